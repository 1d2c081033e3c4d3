#!/usr/bin/env python3
"""How often the expected type keyhole states at a typed hole (candidate 71's "Expected type at
the hole: T") equals the language's own checker's, read with and without a language server.

    typed_hole_agreement.py KEYHOLE REPO HOLES.jsonl [--servers off|auto] [--timeout SECS] [--json OUT]

HOLES.jsonl: one hole a line, {"kind", "file", "line", "column", "expected"}, as
../shared/tools/ts-expected-types.js prints for TypeScript (checker.getContextualType) and
examples/py_expected_types.py for Python (pyright's declared types). `--servers off` reads the
syntax tree only; `auto` (the default) asks the language server found on PATH (set PATH or
KEYHOLE_LSP_BIN first). Each keyhole runs with its own scratch config, cache and data
directories. Types are compared after white space and `;`/`,` in object types are ignored,
with a union's members as a set (inside type arguments too) and, for Python, `Optional[X]`
and `Union[...]` written as `X | None` and `A | B` (pyright's way) with `typing.`/`t.`
prefixes dropped, and pyright's `(A) -> B` and `(A | B)` as Python writes them
(`Callable[[A], B]`, `A | B`).

Prints one line a hole (OK/NO, kind, position, reader, checker's and keyhole's types) and a
last line with the agreement by kind.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import tempfile


def split_top(t, sep="|"):
    out, depth, start = [], 0, 0
    for i, c in enumerate(t):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(t[start:i])
            start = i + 1
    return out + [t[start:]]


def callables_as_python(t):
    """pyright's `(A, B) -> C` as `Callable[[A, B], C]` (parameter names and defaults left
    out), grouping parentheses (`(A | B)`) dropped; the text unchanged where it reads as no
    type."""
    tokens = re.findall(r"->|\.\.\.|'[^']*'|\"[^\"]*\"|[\w.@-]+|\S", t)
    at = [0]

    def peek():
        return tokens[at[0]] if at[0] < len(tokens) else None

    def take(mark=None):
        token = peek()
        if token is None or (mark is not None and token != mark):
            raise ValueError(t)
        at[0] += 1
        return token

    def items(close, parameters):
        out = []
        while peek() != close:
            if parameters and peek() in ("/", "*") and at[0] + 1 < len(tokens) and tokens[at[0] + 1] in (",", close):
                take()
            else:
                if parameters and at[0] + 1 < len(tokens) and tokens[at[0] + 1] == ":":
                    take()
                    take(":")
                out.append(union())
                if parameters and peek() == "=":
                    take()
                    atom()
            if peek() == ",":
                take()
            elif peek() != close:
                raise ValueError(t)
        take(close)
        return out

    def atom():
        token = take()
        if token == "(":
            inner = items(")", True)
            if peek() == "->":
                take()
                returned = atom()
                listed = inner[0] if inner == ["..."] else "[" + ", ".join(inner) + "]"
                return f"Callable[{listed}, {returned}]"
            if len(inner) != 1:
                raise ValueError(t)
            return inner[0]
        if token == "[":
            return "[" + ", ".join(items("]", False)) + "]"
        if token == "*" and peek() == "*":
            token += take()
        if token in ("*", "**"):
            return token + atom()
        if peek() == "[":
            take()
            return token + "[" + ", ".join(items("]", False)) + "]"
        return token

    def union():
        members = [atom()]
        while peek() == "|":
            take()
            members.append(atom())
        return " | ".join(members)

    try:
        read = union()
        return read if peek() is None else t
    except ValueError:
        return t


def python_spelling(t):
    """Optional[X] -> X | None, Union[A, B] -> A | B, module prefixes of typing dropped, and
    pyright's callables and groups as Python writes them."""
    t = callables_as_python(t)
    t = re.sub(r"\b(?:typing|t|te|typing_extensions)\.", "", t)
    while True:
        m = re.search(r"\b(Optional|Union)\[", t)
        if not m:
            return t
        depth, i = 1, m.end()
        while depth and i < len(t):
            depth += {"[": 1, "]": -1}.get(t[i], 0)
            i += 1
        inner = t[m.end():i - 1]
        parts = split_top(inner.replace("[", "<").replace("]", ">"), ",")
        parts = [p.replace("<", "[").replace(">", "]") for p in parts]
        members = parts + (["None"] if m.group(1) == "Optional" else [])
        t = t[:m.start()] + " | ".join(members) + t[i:]


def canon(t):
    """A union is a set of members, inside type arguments too."""
    members = []
    for m in split_top(t):
        for open_, close in ("<>", "[]"):
            i = m.find(open_)
            if i >= 0 and m.endswith(close):
                args = split_top(m[i + 1:-1].replace("[", "<").replace("]", ">") if open_ == "[" else m[i + 1:-1], ",")
                if open_ == "[":
                    args = [a.replace("<", "[").replace(">", "]") for a in args]
                m = m[:i + 1] + ",".join(canon(a) for a in args) + close
                break
        members.append(m)
    return "|".join(sorted(members))


def norm(t, python):
    if python:
        t = python_spelling(t)
    t = re.sub(r"\s+", "", t).replace(";", ",").replace(",}", "}").rstrip(",")
    return canon(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("keyhole")
    ap.add_argument("repo")
    ap.add_argument("holes")
    ap.add_argument("--servers", default="auto")
    ap.add_argument("--json", help="write each hole's result here")
    ap.add_argument("--timeout", help="seconds a language server may take (a busy machine's first answer is slow)")
    ap.add_argument("--at-hole", action="store_true", help="compare against each hole's \"expected_here\" (TypeScript's type written from the hole's place: examples/ts_expected_at_hole.js)")
    a = ap.parse_args()
    env = dict(os.environ)
    scratch = tempfile.mkdtemp()
    for var, sub in [("KEYHOLE_CONFIG_DIR", "c"), ("KEYHOLE_CACHE_DIR", "ca"), ("KEYHOLE_DATA_DIR", "d")]:
        env[var] = os.path.join(scratch, sub)
    env["KEYHOLE_LANGUAGE_SERVERS"] = a.servers
    tally = collections.Counter()
    results = []
    for line in open(a.holes):
        h = json.loads(line)
        spec = f"{h['file']}:{h['line']}:{h['column']}"
        python = h["file"].endswith((".py", ".pyi"))
        timeout = ["--language-server-timeout", a.timeout] if a.timeout else []
        run = lambda *args: subprocess.run([a.keyhole, *args, a.repo, spec, "--json", *timeout], capture_output=True, text=True, env=env)
        stated, reader = None, None
        out = run("prompt", "--id", "71")
        if out.returncode == 0:
            m = re.search(r"Expected type at the hole: (.*)", json.loads(out.stdout).get("text", ""))
            stated = m.group(1).strip() if m else None
        out = run("proposals")
        if out.returncode == 0:
            rows = json.loads(out.stdout).get("retrieved", [])
            reader = next((r.get("reader") for r in rows if r.get("id") == 71), None)
        checker = h["expected_here"] if a.at_hole else h["expected"]
        ok = stated is not None and norm(stated, python) == norm(checker, python)
        tally[(h["kind"], ok)] += 1
        results.append({**h, "stated": stated, "reader": reader, "equal": ok})
        print(f"{'OK' if ok else 'NO'} {h['kind']:11} {spec:45} {str(reader):28} checker={checker!r} keyhole={stated!r}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    kinds = sorted({k for k, _ in tally})
    good = sum(v for (k, ok), v in tally.items() if ok)
    by_kind = ", ".join(f"{k} {tally[(k, True)]}/{tally[(k, True)] + tally[(k, False)]}" for k in kinds)
    print(f"equal: {good} of {sum(tally.values())} (servers {a.servers}); by kind: {by_kind}")


if __name__ == "__main__":
    main()
