//! Typed holes from a real language server (ChatLSP's TypeScript port), and servers that
//! misbehave: each gives a one-line reason, none hangs.
//!
//! The tests of real servers ask the pinned ones (`tests/language-servers.txt`), which the
//! tests install under `target/lsp` on first use, or those in the directory `KEYHOLE_LSP_BIN`
//! names; never a server on the machine's `PATH`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keyhole::CandidateId;
use keyhole::Fidelity;
use keyhole::Hole;
use keyhole::RepoIndex;
use keyhole::SourcedText;
use keyhole::TokenizerKind;
use keyhole::testing::session::SearchIndex;
use keyhole::{RetrievedContext, testing::context::perspectives::Perspectives};
use keyhole::{testing::context::typed_server, testing::context::typed_server::ServerAnswer};
use keyhole::{
    testing::lsp, testing::lsp::Client, testing::lsp::LspError, testing::lsp::ServerSpec,
    testing::lsp::Servers, testing::lsp::Timeouts,
};

/// Where the test's language servers are installed.
fn server_bin() -> PathBuf {
    crate::common::tools::language_servers()
}

/// The candidate rows 71 and 72 of the hole at `line`:`column` of `path` in `root` (files
/// written there), its language's server looked for in `search_path` only.
fn typed_rows(
    root: &Path,
    files: &[(&str, &str)],
    hole: (&str, usize, usize),
    search_path: OsString,
    timeouts: Timeouts,
) -> Vec<RetrievedContext> {
    for (path, text) in files {
        write(root, path, text);
    }
    let sources = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let mut index = RepoIndex::from_sources(root, sources);
    *keyhole::testing::repo::language_servers(&mut index) =
        Servers::new(Some(search_path), timeouts);
    typed_rows_of(&index, hole)
}

/// The candidate rows 71 and 72 of the hole at (path, line, column) of `index`.
fn typed_rows_of(index: &RepoIndex, hole: (&str, usize, usize)) -> Vec<RetrievedContext> {
    let search = SearchIndex::build(index);
    let perspectives = Perspectives {
        index,
        retrieval: &search.retrieval,
        windows: &search.windows,
        tokenizer: TokenizerKind::Code.tokenizer(),
        budget: 4072,
        seed: 9,
        fidelity: Fidelity::Paper,
    };
    let hole = Hole::at(index, hole.0, hole.1, hole.2).unwrap();
    let typed = [CandidateId::TYPED_TYPES, CandidateId::TYPED_HEADERS];
    perspectives
        .immediate(&hole)
        .into_iter()
        .filter(|c| typed.contains(&c.id))
        .collect()
}

const ORDERS: &str = "class Money:\n    cents: int\n\n\nclass Order:\n    total: Money\n\n\n\
def cheapest(orders: list[Order]) -> Order:\n    return orders[0]\n\n\n\
def make() -> Order:\n    return Order()\n";

#[test]
fn pyright_types_a_python_hole_in_the_candidate_rows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let bin = server_bin();
    assert!(
        lsp::find_on_path("pyright-langserver", bin.as_os_str()).is_some(),
        "pyright-langserver is not in {} (KEYHOLE_LSP_BIN names it)",
        bin.display()
    );
    // The hole: `make`'s body after `return `.
    let rows = typed_rows(
        &root,
        &[("orders.py", ORDERS)],
        ("orders.py", 14, 12),
        bin.into_os_string(),
        Timeouts::default(),
    );
    let types = &rows[0];
    assert_eq!(types.why_not, None, "{rows:#?}");
    let text = &types.context.text;
    assert!(
        text.contains("# Expected type at the hole: Order"),
        "{text}"
    );
    assert!(text.contains("class Order:\n    total: Money"), "{text}");
    // Followed from Order's definition.
    assert!(text.contains("class Money:"), "{text}");
    let headers = &rows[1].context.text;
    assert!(headers.contains("cheapest"), "{headers}");
}

#[test]
fn a_server_that_never_answers_leaves_both_rows_to_the_syntax_tree() {
    let bin = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let fake = bin.path().join("pyright-langserver");
    std::fs::write(
        &fake,
        "#!/usr/bin/env python3\nimport sys\nfor line in sys.stdin.buffer:\n    pass\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let quick = Timeouts {
        start: Duration::from_secs(3),
        request: Duration::from_secs(1),
    };
    let rows = typed_rows(
        &root,
        &[("orders.py", ORDERS)],
        ("orders.py", 14, 12),
        bin.path().as_os_str().to_owned(),
        quick,
    );
    // The server is stopped after its timeout and keyhole's own reading builds both rows,
    // as it does where no server is installed.
    assert!(rows[0].applicable(), "{rows:#?}");
    for row in &rows {
        let why_not = row.why_not.as_deref().unwrap_or_default();
        assert!(!why_not.contains("pyright"), "{why_not}");
    }
    let types = &rows[0].context.text;
    assert!(
        types.contains("# Expected type at the hole: Order"),
        "{types}"
    );
    assert!(
        types.contains("class Order:\n    total: Money\n"),
        "{types}"
    );
}

fn typescript_server() -> PathBuf {
    let bin = server_bin();
    lsp::find_on_path("typescript-language-server", bin.as_os_str()).unwrap_or_else(|| {
        panic!(
            "typescript-language-server is not in {} (KEYHOLE_LSP_BIN names it)",
            bin.display()
        )
    })
}

fn write(root: &Path, path: &str, text: &str) {
    std::fs::write(root.join(path), text).unwrap();
}

const MAIN: &str = "import { Model, Grid } from './model';\n\
import { Action } from './action';\n\
\n\
export function clearGrid(grid: Grid): Grid {\n  return grid.map((row) => row.map(() => ''));\n}\n\
\n\
export const initial: Model = { grid: [], selected: '' };\n\
\n\
export function count(grid: Grid): number {\n  return grid.length;\n}\n\
\n\
export function update(model: Model, action: Action): Model {\n  return model;\n}\n";

/// EmojiPaint's types (the paper's running example), across files.
fn emoji_paint(root: &Path) {
    write(
        root,
        "model.ts",
        "export type Emoji = string;\nexport type Row = number;\nexport type Grid = Emoji[][];\n\
         export interface Model {\n  grid: Grid;\n  selected: Emoji;\n}\n",
    );
    write(
        root,
        "action.ts",
        "import { Emoji, Row } from './model';\n\
         export type Action =\n  | { kind: 'select'; emoji: Emoji }\n  | { kind: 'clearRow'; row: Row };\n",
    );
    write(root, "main.ts", MAIN);
}

/// The index of `root` (its files written there) and the hole after the first `marker` of
/// `path`.
fn index_and_hole(root: &Path, path: &str, marker: &str) -> (RepoIndex, Hole) {
    let index = RepoIndex::from_sources(root, read_back(root));
    let file = index.file_id(path).unwrap();
    let text = &index.files[file].text;
    let before = &text[..text.find(marker).unwrap() + marker.len()];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    let hole = Hole::at(&index, path, line, column).unwrap();
    (index, hole)
}

/// Every file written under `root`, as (relative path, text).
fn read_back(root: &Path) -> Vec<(String, String)> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn ask_server(
    name: &str,
    program: &Path,
    spec: &ServerSpec,
    index: &RepoIndex,
    hole: &Hole,
) -> Result<ServerAnswer, LspError> {
    let mut client = Client::start(name, program, spec, &index.root, Timeouts::default())?;
    typed_server::ask(&mut client, spec, index, hole)
}

fn ask_typescript(index: &RepoIndex, hole: &Hole) -> Result<ServerAnswer, LspError> {
    let program = typescript_server();
    ask_server(
        "typescript-language-server",
        &program,
        &lsp::TYPESCRIPT,
        index,
        hole,
    )
}

/// Every piece of `text` with a file holds that file's text at its span.
fn assert_true_provenance(index: &RepoIndex, text: &SourcedText) {
    for piece in &text.pieces {
        if let Some(origin) = piece.origin {
            assert_eq!(
                &text.text[piece.range.clone()],
                &index.files[origin.file].text[origin.span.range()]
            );
        }
    }
}

/// The files the pieces of `text` come from, and the text of those from none.
fn sources(index: &RepoIndex, text: &SourcedText) -> (Vec<String>, String) {
    let mut files: Vec<String> = Vec::new();
    let mut plain = String::new();
    for piece in &text.pieces {
        match piece.origin {
            Some(origin) => {
                let path = index.files[origin.file].path.clone();
                if !files.contains(&path) {
                    files.push(path);
                }
            }
            None => plain.push_str(&text.text[piece.range.clone()]),
        }
    }
    (files, plain)
}

#[test]
fn typescript_language_server_gives_the_expected_type_its_definitions_and_headers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    emoji_paint(&root);
    // The hole: `update`'s body after `return `, the rest of the line cut.
    let (index, hole) = index_and_hole(&root, "main.ts", "Action): Model {\n  return ");
    let answer = ask_typescript(&index, &hole).expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("Model"));
    let hops: Vec<(&str, usize)> = answer
        .definitions
        .iter()
        .map(|d| (d.path.as_str(), d.hop))
        .collect();
    assert_eq!(hops[0], ("model.ts", 0), "{hops:?}");
    let [(_, types), _] = typed_server::contexts(&answer, &index, &hole);
    let text = &types.text;
    assert!(
        text.contains("interface Model {\n    grid: Grid;\n"),
        "{text}"
    );
    // Followed from Model's definition: Grid, then Emoji from Grid's.
    assert!(text.contains("type Grid = Emoji[][];\n"), "{text}");
    assert!(text.contains("type Emoji = string;\n"), "{text}");
    assert_true_provenance(&index, &types);
    // The typing context: values producing a Model; not `count`, which produces a number.
    let headers: Vec<&str> = answer
        .headers
        .iter()
        .map(|h| h.declaration.as_str())
        .collect();
    assert!(
        headers.iter().any(|h| h.contains("initial: Model")),
        "{headers:?}"
    );
    assert!(!headers.iter().any(|h| h.contains("count")), "{headers:?}");
}

/// A library of the repository, imported by `main.ts`.
const LIBRARY: &str = "export interface Options {\n  prefix: string;\n}\n\
export function get(url: string, options?: Options): number {\n  return 0;\n}\n";

#[test]
fn typescript_language_server_says_what_an_argument_and_a_return_expect_with_their_undefined() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write(&root, "lib.ts", LIBRARY);
    write(
        &root,
        "main.ts",
        "import { get, Options } from './lib';\n\
         export function fetchIt(): number | undefined {\n  return get('a', {prefix: 'b'});\n}\n",
    );
    // An argument: its parameter's type in the signature the server resolves through the
    // import, optional, so `undefined` too (a generic hole's inference loses it).
    let (index, hole) = index_and_hole(&root, "main.ts", "get('a', ");
    let answer = ask_typescript(&index, &hole).expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("Options | undefined"));
    assert!(!answer.expected_by_syntax);
    let hops: Vec<&str> = answer.definitions.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(hops, ["lib.ts"]);
    // A return keeps the declared `| undefined`.
    let (index, hole) = index_and_hole(&root, "main.ts", "  return ");
    let answer = ask_typescript(&index, &hole).expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("number | undefined"));
}

#[test]
fn typescript_definitions_are_named_declarations_without_type_parameters_or_bare_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write(
        &root,
        "model.ts",
        "export type Emoji = string;\n\
         export interface Box<T> {\n  value: T;\n  label: Emoji;\n  wrap<U>(inner: U): Box<U>;\n}\n\
         export type Picked =\n  | { kind: 'one'; box: Box<Emoji> }\n  | { kind: 'none' };\n",
    );
    write(
        &root,
        "main.ts",
        "import { Box, Picked, Emoji } from './model';\n\
         export function pick(e: Emoji): Picked {\n  return undefined as any;\n}\n",
    );
    let (index, hole) = index_and_hole(&root, "main.ts", "  return ");
    let answer = ask_typescript(&index, &hole).expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("Picked"));
    let [(_, types), _] = typed_server::contexts(&answer, &index, &hole);
    let text = &types.text;
    assert!(
        text.contains(
            "type Picked =\n  | { kind: 'one'; box: Box<Emoji> }\n  | { kind: 'none' };\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("interface Box<T> {\n    value: T;\n"),
        "{text}"
    );
    // No line holds a type parameter alone, and every definition starts with its keyword.
    for line in text.lines() {
        assert!(!["T", "U", "T;", "U;"].contains(&line.trim()), "{text}");
        assert!(!line.starts_with('{') && !line.starts_with('|'), "{text}");
    }
    assert_true_provenance(&index, &types);
}

/// A Python module whose classes have docstrings and bodies, one of them in the hole's own
/// file, and a class named only in a docstring and a body.
const INVENTORY: &str = r#"class Unrelated:
    pass


class Money:
    """An amount.

    Made with Unrelated() in tests.
    """

    cents: int

    def add(self, other: "Money") -> "Money":
        """Add."""
        helper = Unrelated()
        return Money()
"#;

const STOCK: &str = r#"from inventory import Money


class Item:
    """An item on a shelf.

    See Unrelated.
    """

    price: Money

    def total(self, count: int) -> Money:
        """The price of `count`."""
        return self.price


def first(items: list[Item]) -> Item:
    return items[0]
"#;

#[test]
fn pyright_definitions_are_class_outlines_from_their_true_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write(&root, "inventory.py", INVENTORY);
    write(&root, "stock.py", STOCK);
    let (index, hole) = index_and_hole(&root, "stock.py", "-> Item:\n    return ");
    let bin = server_bin();
    let program = lsp::find_on_path("pyright-langserver", bin.as_os_str()).unwrap();
    let answer = ask_server("pyright-langserver", &program, &lsp::PYRIGHT, &index, &hole)
        .expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("Item"), "{answer:?}");
    let [(_, types), _] = typed_server::contexts(&answer, &index, &hole);
    let text = &types.text;
    assert!(
        text.contains(
            "class Item:\n    price: Money\n    def total(self, count: int) -> Money: ...\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "class Money:\n    cents: int\n    def add(self, other: \"Money\") -> \"Money\": ...\n"
        ),
        "{text}"
    );
    assert!(!text.contains("\"\"\""), "no docstring: {text}");
    assert!(
        !text.contains("Unrelated"),
        "only types the expected type is built from: {text}"
    );
    // Item is in the hole's own file, Money in another: each piece names its file.
    let (files, plain) = sources(&index, &types);
    assert_eq!(files, ["stock.py", "inventory.py"], "{text}");
    assert!(!plain.contains("price"), "{plain}");
    assert_true_provenance(&index, &types);
}

#[test]
fn a_hole_without_an_expected_type_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    emoji_paint(&root);
    // A statement position: nothing constrains the hole.
    let (index, hole) = index_and_hole(&root, "main.ts", "}\n\n");
    let answer = ask_typescript(&index, &hole).expect("the server answers");
    assert_eq!(answer, ServerAnswer::default());
}

// ----- Servers that misbehave ------------------------------------------------------------------

/// What a fake server that reads starts with: `read()`, the next message from keyhole (the
/// process ends when keyhole stops writing), and `send(message)`.
const FAKE_FRAMING: &str = r#"
import json, sys
def read():
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line.strip() == b"":
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(sys.stdin.buffer.read(length))
def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()
"#;

/// `script` as an executable Python server at `path`.
fn write_fake(path: &Path, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/usr/bin/env python3\n{script}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A fake server, in Python, named `keyhole-fake-lsp` in a directory of its own.
fn fake_server(dir: &Path, script: &str) -> OsString {
    write_fake(&dir.join(FAKE.command), script);
    dir.as_os_str().to_owned()
}

static FAKE: ServerSpec = ServerSpec {
    command: "keyhole-fake-lsp",
    args: &[],
    prelude: "",
    placeholder: "_()",
    hover_at: 0,
    type_probe: "{}",
    initialization_options: "null",
};

/// Answers `initialize`, then reads everything and answers nothing.
const SILENT_AFTER_START: &str = r#"
message = read()
body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}}).encode()
sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
sys.stdout.buffer.flush()
while True:
    read()
"#;

fn pool(search_path: OsString) -> Servers {
    Servers::new(
        Some(search_path),
        Timeouts {
            start: Duration::from_secs(5),
            request: Duration::from_secs(2),
        },
    )
}

fn hover(servers: &Servers, root: &Path) -> Option<Result<ServerAnswer, LspError>> {
    let sources = vec![("main.ts".to_string(), "let x: number = 1;\n".to_string())];
    let index = RepoIndex::from_sources(root, sources);
    let hole = Hole::at(&index, "main.ts", 1, 17).unwrap();
    servers.with(&FAKE, root, |client| {
        typed_server::ask(client, &FAKE, &index, &hole)
    })
}

#[test]
fn a_server_that_crashes_at_start_is_a_one_line_reason_and_is_not_started_again() {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let servers = pool(fake_server(bin.path(), "import sys\nsys.exit(3)\n"));
    let first = hover(&servers, root.path()).expect("the server is installed");
    let why = first.unwrap_err().to_string();
    assert_eq!(
        why,
        "keyhole-fake-lsp exited while keyhole waited for `initialize`"
    );
    // The second hole gets the same reason without starting it again: the script is gone.
    std::fs::remove_file(bin.path().join(FAKE.command)).unwrap();
    let bin_kept = pool(bin.path().as_os_str().to_owned());
    assert!(
        hover(&bin_kept, root.path()).is_none(),
        "not installed: no answer"
    );
    let again = hover(&servers, root.path()).expect("remembered");
    assert_eq!(again.unwrap_err().to_string(), why);
}

#[test]
fn a_server_that_never_answers_at_start_is_stopped_after_the_timeout() {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let script = "import sys\nfor line in sys.stdin.buffer:\n    pass\n";
    let servers = pool(fake_server(bin.path(), script));
    let why = hover(&servers, root.path())
        .unwrap()
        .unwrap_err()
        .to_string();
    assert_eq!(
        why,
        "keyhole-fake-lsp did not answer `initialize` within 5 s, so it was stopped"
    );
}

#[test]
fn a_server_that_stops_answering_after_start_is_stopped_and_said_so_for_every_later_hole() {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let script = format!("{FAKE_FRAMING}{SILENT_AFTER_START}");
    let servers = pool(fake_server(bin.path(), &script));
    let why = hover(&servers, root.path())
        .unwrap()
        .unwrap_err()
        .to_string();
    assert_eq!(
        why,
        "keyhole-fake-lsp did not answer `textDocument/hover` within 5 s, so it was stopped"
    );
    let again = hover(&servers, root.path())
        .unwrap()
        .unwrap_err()
        .to_string();
    assert_eq!(again, why);
    assert!(!why.contains('\n'));
}

/// After [`FAKE_FRAMING`]: answers `initialize`; at the first request says it loads the
/// project (a work-done progress begun, then silence for `{load}` seconds); then, where
/// `{ends}`, ends the progress and answers every request (a hover as `let x: Loaded`).
const LOADING: &str = r#"
import time
def answer(message):
    result = {"contents": "let x: Loaded"} if message["method"] == "textDocument/hover" else None
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
message = read()
send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}})
message = read()
while "id" not in message:
    message = read()
send({"jsonrpc": "2.0", "id": "p", "method": "window/workDoneProgress/create", "params": {"token": 7}})
send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": 7, "value": {"kind": "begin", "title": "Loading"}}})
time.sleep({load})
if not {ends}:
    while True:
        read()
send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": 7, "value": {"kind": "end"}}})
answer(message)
while True:
    message = read()
    if "method" in message and "id" in message:
        answer(message)
"#;

/// A pool, whose servers may stay silent for 2 s while they start, of a fake server in `bin`
/// that reports loading the project for `load` seconds (`ends`: whether the report ends).
fn pool_of_a_loading_server(bin: &Path, load: &str, ends: &str) -> Servers {
    let loading = LOADING.replace("{load}", load).replace("{ends}", ends);
    let search_path = fake_server(bin, &format!("{FAKE_FRAMING}{loading}"));
    let timeouts = Timeouts {
        start: Duration::from_secs(2),
        request: Duration::from_secs(2),
    };
    Servers::new(Some(search_path), timeouts)
}

#[test]
fn a_server_that_says_it_loads_the_project_is_waited_for_past_the_start_timeout() {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    // Silent for twice the start timeout, its progress open.
    let servers = pool_of_a_loading_server(bin.path(), "4", "True");
    let answer = hover(&servers, root.path())
        .unwrap()
        .expect("it answers once loaded");
    assert_eq!(answer.expected.as_deref(), Some("Loaded"), "{answer:?}");
}

#[test]
fn a_server_that_says_it_loads_forever_is_stopped_after_the_load_limit_in_one_line() {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let servers = pool_of_a_loading_server(bin.path(), "0", "False");
    let started = std::time::Instant::now();
    let why = hover(&servers, root.path())
        .unwrap()
        .unwrap_err()
        .to_string();
    // Ten start timeouts, then the syntax tree's reading; never a hang.
    assert_eq!(
        why,
        "keyhole-fake-lsp did not answer `textDocument/hover` within 20 s, so it was stopped"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
}

/// After [`FAKE_FRAMING`]: answers signature help at any argument with `handle(result:
/// Payload)`, as zod's `handlePropertyResult` is declared, and the hole's hover with
/// TypeScript's instantiation of it; everything else with nothing.
const DECLARED_WITHOUT_DEFAULTS: &str = r#"
help = {"activeSignature": 0, "activeParameter": 0, "signatures": [
    {"label": "handle(result: Payload): void", "parameters": [{"label": "result: Payload"}]}]}
hover = {"contents": {"kind": "markdown", "value": "```typescript\nfunction _<Payload<unknown>>(): Payload<unknown>\n```"}}
while True:
    message = read()
    if "id" not in message or "method" not in message:
        continue
    result = {"initialize": {"capabilities": {}}, "textDocument/signatureHelp": help,
              "textDocument/hover": hover}.get(message["method"])
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
"#;

#[test]
fn an_arguments_parameter_declared_without_its_type_arguments_is_stated_as_typescript_instantiates_it()
 {
    let bin = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let script = format!("{FAKE_FRAMING}{DECLARED_WITHOUT_DEFAULTS}");
    let servers = pool(fake_server(bin.path(), &script));
    let sources = vec![(
        "main.ts".to_string(),
        "declare function handle(result: Payload): void;\nhandle(payload);\n".to_string(),
    )];
    let index = RepoIndex::from_sources(root.path(), sources);
    let hole = Hole::at(&index, "main.ts", 2, 8).unwrap();
    let answer = servers
        .with(&FAKE, root.path(), |client| {
            typed_server::ask(client, &FAKE, &index, &hole)
        })
        .unwrap()
        .expect("it answers");
    assert_eq!(
        answer.expected.as_deref(),
        Some("Payload<unknown>"),
        "{answer:?}"
    );
}

#[test]
fn no_installed_server_means_no_answer() {
    let empty = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let servers = pool(empty.path().as_os_str().to_owned());
    assert!(hover(&servers, root.path()).is_none());
}

#[test]
fn pyright_headers_hold_an_imported_constant_of_a_subtype_and_not_the_function_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write(
        &root,
        "kinds.py",
        "class ParamType:\n    name: str\n\n\nclass StringType(ParamType):\n    pass\n\n\n\
         STRING = StringType()\n",
    );
    write(
        &root,
        "core.py",
        "from kinds import STRING, ParamType\n\n\n\
         def default_type(flag: bool) -> ParamType:\n    return STRING\n",
    );
    let (index, hole) = index_and_hole(&root, "core.py", "    return ");
    let bin = server_bin();
    let program = lsp::find_on_path("pyright-langserver", bin.as_os_str()).unwrap();
    let answer = ask_server("pyright-langserver", &program, &lsp::PYRIGHT, &index, &hole)
        .expect("the server answers");
    assert_eq!(answer.expected.as_deref(), Some("ParamType"), "{answer:?}");
    let [_, (_, headers)] = typed_server::contexts(&answer, &index, &hole);
    // A StringType is a ParamType: the syntax tree's subtyping scores the server's header.
    assert!(
        headers.text.contains("STRING: StringType\n"),
        "{}",
        headers.text
    );
    assert!(!headers.text.contains("default_type"), "{}", headers.text);
    assert!(!headers.text.contains(';'), "Python: {}", headers.text);
}

/// A stand-in for pyright that answers as pyright 1.1.414 does: signature help with the
/// parameters' label offsets, a hover over a name declared with a value showing the type
/// narrowed to the value's (`cb: None`), without one the declared type, spelled as pyright
/// spells it (`((TextIO) -> TextIO) | None`), and the generic hole's solved type where the
/// place is not asked.
const FAKE_PYRIGHT: &str = r#"
def send(id, result):
    body = json.dumps({"jsonrpc": "2.0", "id": id, "result": result}).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()
texts = {}
ECHO = "(message: str, *, color: bool | None = None) -> None"
while True:
    message = read()
    method, params = message.get("method"), message.get("params") or {}
    if method == "textDocument/didOpen":
        texts[params["textDocument"]["uri"]] = params["textDocument"]["text"]
    elif method == "textDocument/didChange":
        texts[params["textDocument"]["uri"]] = params["contentChanges"][-1]["text"]
    if "id" not in message:
        continue
    result = None
    if method == "initialize":
        result = {"capabilities": {}}
    elif method in ("textDocument/hover", "textDocument/signatureHelp"):
        line = texts[params["textDocument"]["uri"]].split("\n")[params["position"]["line"]]
        at = line[params["position"]["character"]:]
        if method == "textDocument/signatureHelp" and "echo(" in line:
            result = {"signatures": [{"label": ECHO, "parameters": [
                {"label": [1, 13]}, {"label": [18, 43]}], "activeParameter": 1}]}
        elif method == "textDocument/hover":
            generic = "None" if line.lstrip().startswith("cb") else "bool"
            if at.startswith("__keyhole_hole"):
                value = "(variable) __keyhole_hole: " + generic
            elif "__keyhole_hole" in line:
                value = "(variable) cb: None"
            else:
                value = "(variable) cb: ((TextIO) -> TextIO) | None"
            result = {"contents": {"kind": "plaintext", "value": value}}
    elif method == "textDocument/completion":
        result = []
    send(message["id"], result)
"#;

#[test]
fn pyright_is_asked_by_place_and_its_types_read_as_python_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    write(
        &root,
        "util.py",
        "import typing as t\n\n\ndef echo(message: str, *, color: t.Optional[bool] = None) -> None:\n    pass\n",
    );
    write(
        &root,
        "main.py",
        "import typing as t\nfrom util import echo\n\n\ndef run(text: str) -> None:\n    \
         cb: t.Optional[t.Callable[[t.TextIO], t.TextIO]] = None\n    echo(text, color=None)\n",
    );
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("pyright-langserver");
    write_fake(&fake, &format!("{FAKE_FRAMING}{FAKE_PYRIGHT}"));
    let ask = |marker: &str| {
        let (index, hole) = index_and_hole(&root, "main.py", marker);
        ask_server("pyright-langserver", &fake, &lsp::PYRIGHT, &index, &hole)
            .expect("the server answers")
    };
    // An annotated declaration: its name's declared type, asked with the value left out (with
    // it, pyright narrows to the value's `None`), the callable as Python writes it.
    let declared = ask("]] = ");
    assert_eq!(
        declared.expected.as_deref(),
        Some("Callable[[TextIO], TextIO] | None"),
        "{declared:?}"
    );
    assert!(!declared.expected_by_syntax);
    // A keyword argument: its parameter's type in signature help, not the generic hole's
    // `bool`.
    let argument = ask("color=");
    assert_eq!(
        argument.expected.as_deref(),
        Some("bool | None"),
        "{argument:?}"
    );
    assert!(!argument.expected_by_syntax);
}

// ----- Answers kept by content -------------------------------------------------------------

fn cached_index(root: &Path, cache: &Path, search_path: &Path) -> RepoIndex {
    let mut index = RepoIndex::open(root, Some(cache)).unwrap();
    *keyhole::testing::repo::language_servers(&mut index) = Servers::new(
        Some(search_path.as_os_str().to_owned()),
        Timeouts::default(),
    );
    index
}

/// Whether the hole of [`cached_rows`] would ask the server (the UI then builds it later).
fn would_ask(root: &Path, cache: &Path, search_path: &Path) -> bool {
    let index = cached_index(root, cache, search_path);
    let hole = Hole::at(&index, "orders.py", 14, 12).unwrap();
    typed_server::would_ask_a_server(&index, &hole)
}

/// The typed rows of the hole after `return ` in `make` of `orders.py` under `root`, the index
/// cached in `cache`, pyright found in `search_path`.
fn cached_rows(root: &Path, cache: &Path, search_path: &Path) -> Vec<RetrievedContext> {
    typed_rows_of(
        &cached_index(root, cache, search_path),
        ("orders.py", 14, 12),
    )
}

#[test]
fn a_servers_answers_are_kept_by_content_and_asked_again_when_a_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write(&root, "orders.py", ORDERS);
    // pyright behind a script that notes each start.
    let bin = tempfile::tempdir().unwrap();
    let starts = bin.path().join("starts");
    let real = lsp::find_on_path("pyright-langserver", server_bin().as_os_str()).unwrap();
    let wrapper = bin.path().join("pyright-langserver");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho start >> '{}'\nexec '{}' \"$@\"\n",
            starts.display(),
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert!(would_ask(&root, cache.path(), bin.path()));
    let first = cached_rows(&root, cache.path(), bin.path());
    assert!(first[0].context.text.contains("class Order:"), "{first:#?}");
    assert_eq!(started(), 1);
    assert!(
        !would_ask(&root, cache.path(), bin.path()),
        "the answer is kept"
    );
    let empty = tempfile::tempdir().unwrap();
    assert!(
        !would_ask(&root, cache.path(), empty.path()),
        "no server installed"
    );
    // A second session on the unchanged file: the same rows, no server started.
    let second = cached_rows(&root, cache.path(), bin.path());
    assert_eq!(second, first);
    assert_eq!(started(), 1);
    // The file changed: the server is asked again.
    write(
        &root,
        "orders.py",
        &ORDERS.replace("cents: int", "cents: float"),
    );
    let third = cached_rows(&root, cache.path(), bin.path());
    assert_eq!(started(), 2);
    assert!(
        third[0]
            .context
            .text
            .contains("class Money:\n    cents: float"),
        "{third:#?}"
    );
}
