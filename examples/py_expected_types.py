#!/usr/bin/env python3
"""pyright's expected type at sampled holes of a Python repository: the reference keyhole's
typed-hole reading is held against (examples/typed_hole_agreement.py), as
../shared/tools/ts-expected-types.js is for TypeScript.

    py_expected_types.py REPO [PER_KIND] [SEED] > holes.jsonl
    (pyright-langserver on PATH: npm install pyright)

Samples, with Python's `ast`, one-line expressions that are the value of a `return` in a
function with a return annotation, the value of an annotated assignment (`x: T = v`), or an
argument of a call of a function of the repository (pyright's definition of the callee) for
an annotated parameter, and asks pyright what each place expects:
  return       hover on the function's name, the type after its signature's last `->`;
  declaration  hover on the name with the value taken out (`x: T`; with it, pyright shows
               the type narrowed to the value's): its declared type;
  argument     signature help at the argument: the active parameter's type.
One JSON line per hole where pyright names a type (not Unknown/Any): kind, file, 1-based line
and column of the expression's first character (put the hole there), the expression, the
annotation as written where there is one, and `expected`.
"""
import ast
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys


class Server:
    """A language server over stdio: requests answered in order, its requests answered null."""

    def __init__(self, command, root):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.next_id = 0
        uri = root.as_uri()
        self.request("initialize", {"processId": os.getpid(), "rootUri": uri,
                                    "workspaceFolders": [{"uri": uri, "name": "repository"}],
                                    "capabilities": {"textDocument": {
                                        "hover": {"contentFormat": ["plaintext"]},
                                        "signatureHelp": {"signatureInformation": {
                                            "parameterInformation": {"labelOffsetSupport": True}}}}}})
        self.notify("initialized", {})

    def send(self, message):
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self):
        length = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError("the server ended")
            if not line.strip():
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.process.stdout.read(length))

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif message.get("id") == self.next_id:
                return message.get("result")

    def at(self, method, path, line, column):
        return self.request(method, {"textDocument": {"uri": path.as_uri()},
                                     "position": {"line": line, "character": column}})


def utf16_column(line_text, byte_column):
    return len(line_text.encode()[:byte_column].decode(errors="ignore").encode("utf-16-le")) // 2


def hover_code(answer):
    if not answer:
        return ""
    contents = answer["contents"]
    text = contents["value"] if isinstance(contents, dict) else str(contents)
    if "```" in text:
        text = text.split("```")[1].split("\n", 1)[-1]
    # The declaration, without the docstring that follows it.
    return " ".join(text.strip().split("\n\n")[0].split())


def top_level_split(text, mark):
    """Index of the last `mark` outside brackets."""
    depth, found = 0, -1
    for i, c in enumerate(text):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(c, 0)
        if depth == 0 and text.startswith(mark, i):
            found = i
    return found


def returned_type(code):
    i = top_level_split(code, " -> ")
    return code[i + 4:].strip() if i >= 0 else None


def declared_type(code):
    i = code.find(": ")
    return code[i + 2:].strip() if code.startswith("(variable)") and i >= 0 else None


def parameter_type(help_answer):
    if not help_answer or not help_answer.get("signatures"):
        return None
    signature = help_answer["signatures"][help_answer.get("activeSignature") or 0]
    active = signature.get("activeParameter", help_answer.get("activeParameter"))
    parameters = signature.get("parameters") or []
    if active is None or active >= len(parameters):
        return None
    label = parameters[active]["label"]
    if isinstance(label, list):
        units = signature["label"].encode("utf-16-le")[label[0] * 2:label[1] * 2]
        label = units.decode("utf-16-le")
    if label.startswith("*") or ":" not in label:
        return None
    written = label.split(":", 1)[1]
    i = top_level_split(written, " = ")
    return (written[:i] if i >= 0 else written).strip()


versions = {}


def change(server, path, text):
    versions[path] = versions.get(path, 1) + 1
    server.notify("textDocument/didChange", {"textDocument": {"uri": path.as_uri(), "version": versions[path]},
                                             "contentChanges": [{"text": text}]})


def annotated_parameter(server, repo, parsed, path, lines, call):
    """Whether the callee's definition is a function of the repository whose parameter (a
    position or a keyword) is annotated."""
    func, which = call
    line = func.end_lineno - 1
    column = utf16_column(lines[line], func.end_col_offset - 1)
    answer = server.at("textDocument/definition", path, line, column) or []
    answer = answer if isinstance(answer, list) else [answer]
    for target in answer:
        uri = target.get("uri") or target.get("targetUri")
        start = (target.get("range") or target.get("targetSelectionRange"))["start"]["line"] + 1
        file = pathlib.Path(uri.removeprefix("file://"))
        if file not in parsed:
            continue
        for node in ast.walk(ast.parse(parsed[file])):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= start <= node.body[0].lineno:
                params = node.args.posonlyargs + node.args.args
                if params and params[0].arg in ("self", "cls") and isinstance(func, ast.Attribute):
                    params = params[1:]
                if isinstance(which, int):
                    chosen = params[which] if which < len(params) else None
                else:
                    chosen = next((a for a in params + node.args.kwonlyargs if a.arg == which), None)
                return chosen is not None and chosen.annotation is not None
    return False


def holes_of(path, source):
    """(kind, expression, anchor, annotation) of a file: the anchor is the function of a
    return, the name of a declaration, (callee, position or keyword) of an argument."""
    tree = ast.parse(source)
    out = []
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            f = parents.get(node)
            while f is not None and not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                f = parents.get(f)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.returns is not None:
                out.append(("return", node.value, f, ast.get_source_segment(source, f.returns)))
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            out.append(("declaration", node.value, node.target, ast.get_source_segment(source, node.annotation)))
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if callee is not None:
                for i, a in enumerate(node.args):
                    if not isinstance(a, ast.Starred):
                        out.append(("argument", a, (node.func, i), None))
                for k in node.keywords:
                    if k.arg is not None:
                        out.append(("argument", k.value, (node.func, k.arg), None))
    return [h for h in out if h[1].lineno == h[1].end_lineno]


def main():
    repo = pathlib.Path(sys.argv[1]).resolve()
    per_kind = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    skip = {".git", "node_modules", "build", "dist", ".tox", "docs"}
    files = sorted(p for p in repo.rglob("*.py") if not skip & set(p.relative_to(repo).parts))
    parsed = {}
    for p in files:
        try:
            source = p.read_text()
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError):
            continue
        parsed[p] = source
    found = {"return": [], "declaration": [], "argument": []}
    for p, source in parsed.items():
        for kind, expr, anchor, annotation in holes_of(p, source):
            found[kind].append((p, expr, anchor, annotation))
    server = Server([shutil.which("pyright-langserver") or "pyright-langserver", "--stdio"], repo)
    opened = set()
    for kind, all_holes in found.items():
        rng.shuffle(all_holes)
        printed = 0
        for p, expr, anchor, annotation in all_holes:
            if printed == per_kind:
                break
            source = parsed[p]
            lines = source.split("\n")
            if p not in opened:
                server.notify("textDocument/didOpen", {"textDocument": {
                    "uri": p.as_uri(), "languageId": "python", "version": 1, "text": source}})
                opened.add(p)
            line = expr.lineno - 1
            if kind == "argument":
                if not annotated_parameter(server, repo, parsed, p, lines, anchor):
                    continue
                column = utf16_column(lines[line], expr.col_offset)
                expected = parameter_type(server.at("textDocument/signatureHelp", p, line, column))
            elif kind == "declaration":
                # `x: T = v` read as `x: T`, then the file as it was.
                bare = lines[:]
                bare[line] = lines[line][:expr.col_offset].rstrip().rstrip("=").rstrip() + lines[line][expr.end_col_offset:]
                change(server, p, "\n".join(bare))
                column = utf16_column(lines[anchor.lineno - 1], anchor.col_offset)
                expected = declared_type(hover_code(server.at("textDocument/hover", p, anchor.lineno - 1, column)))
                change(server, p, source)
            else:
                name_line = anchor.lineno - 1
                text = lines[name_line]
                while not text.lstrip().startswith(("def ", "async def ")):
                    name_line += 1
                    text = lines[name_line]
                column = utf16_column(text, text.index(anchor.name, text.index("def ")))
                expected = returned_type(hover_code(server.at("textDocument/hover", p, name_line, column)))
            if not expected or expected in ("Unknown", "Any", "None") or "Unknown" in expected:
                continue
            printed += 1
            print(json.dumps({"kind": kind, "file": str(p.relative_to(repo)), "line": expr.lineno,
                              "column": len(lines[line].encode()[:expr.col_offset].decode()) + 1,
                              "expr": ast.get_source_segment(source, expr), "annotation": annotation,
                              "expected": expected}), flush=True)
        print(f"{kind}: {len(all_holes)} found, {printed} printed", file=sys.stderr)


if __name__ == "__main__":
    main()
