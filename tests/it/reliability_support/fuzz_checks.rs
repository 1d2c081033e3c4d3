//! The invariants the fuzz targets check, shared with the regression tests that replay what
//! the fuzzer found (fuzz/fuzz_targets/*.rs include this file by path).
#![allow(dead_code)] // each fuzz target uses one check

use std::path::Path;

use keyhole::Fidelity;
use keyhole::Hole;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::perspectives::Perspectives;
use keyhole::testing::context::proposals;
use keyhole::testing::context::retrieval::Retrieval;
use keyhole::testing::context::windows::WindowIndex;
use keyhole::testing::lsp;
use keyhole::testing::model::http;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::theme::Theme;
use keyhole::{BackendConfig, BackendKind, testing::model::config};
use keyhole::{CandidateId, testing::candidate};
use keyhole::{Composer, testing::compose, testing::compose::DefaultReading};
use keyhole::{
    testing::lang::FileFacts, testing::lang::Java, testing::lang::Language, testing::lang::Span,
};
use keyhole::{testing::model::local, testing::model::local::LocalModel};

/// Where the fuzzed file and its fixed sibling live in the scratch repository.
const FUZZED: &str = "p/Fuzz.java";
const SIBLING: &str = "p/Sibling.java";
const SIBLING_TEXT: &str = "package p;\n\nimport p.Fuzz;\n\npublic class Sibling extends Fuzz {\n    private int count = 1;\n\n    String name() {\n        return \"sibling\" + count;\n    }\n}\n";

/// Bytes of a compose input that choose the hole, budget and tokenizer; the rest is the file.
const HEADER: usize = 7;

/// Extraction from any text: no panic, spans inside the text on char boundaries, usages sorted.
pub fn check_extract(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let facts = Java.extract(&text);
    check_facts(&text, &facts);
}

fn check_facts(text: &str, facts: &FileFacts) {
    let spans = facts
        .identifiers
        .iter()
        .chain(&facts.type_identifiers)
        .chain(&facts.field_declarations)
        .chain(&facts.string_literals)
        .chain(facts.types.iter().map(|t| &t.name_span))
        .chain(
            facts
                .methods
                .iter()
                .flat_map(|m| [&m.name, &m.signature, &m.with_body]),
        );
    for span in spans {
        check_span(text, *span);
    }
    // tree-sitter counts rows by '\n' alone.
    let last_row = text.matches('\n').count() as u32;
    let names: Vec<&str> = facts.name_usages.iter().map(|(name, _)| name).collect();
    for pair in names.windows(2) {
        assert!(pair[0] < pair[1], "name_usages not sorted: {pair:?}");
    }
    for (name, used_on) in facts.name_usages.iter() {
        assert!(
            used_on.windows(2).all(|w| w[0] < w[1]),
            "{name}: {used_on:?}"
        );
        assert!(
            used_on.iter().all(|&l| l <= last_row),
            "{name}: {used_on:?}"
        );
        assert_eq!(facts.usages_of(name), used_on);
    }
}

fn check_span(text: &str, span: Span) {
    assert!(span.start <= span.end, "{span:?} is reversed");
    assert!(
        text.get(span.range()).is_some(),
        "{span:?} is outside the text ({} bytes) or splits a character",
        text.len()
    );
}

/// One fuzzed file beside a fixed sibling (held in memory); a hole chosen by the input; every
/// candidate, proposals and retrieved ones, composed within the input's budget must validate.
pub fn check_compose(data: &[u8]) {
    let mut header = [0u8; HEADER];
    let split = data.len().min(HEADER);
    header[..split].copy_from_slice(&data[..split]);
    let text = String::from_utf8_lossy(&data[split..]).replace('\0', "");
    let index = RepoIndex::from_sources(
        Path::new("/fuzz"),
        vec![
            (FUZZED.to_string(), text),
            (SIBLING.to_string(), SIBLING_TEXT.to_string()),
        ],
    );

    let pick = |i: usize| u16::from_le_bytes([header[i], header[i + 1]]) as usize;
    let hole = hole_at(&index, pick(0), pick(2));
    let budget = pick(4) % (compose::DEFAULT_BUDGET + 1);
    let kind = TokenizerKind::ALL[header[6] as usize % TokenizerKind::ALL.len()];
    compose_all(&index, &hole, kind, budget);
    compose_retrieved(&index, &Searches::new(&index), &hole, kind, budget);
}

/// Arbitrary text and a byte position in it (the first four bytes, little-endian): the
/// typed-hole analysis never panics, and what it reports lies inside the text it analysed.
pub fn check_typed(data: &[u8]) {
    let split = data.len().min(4);
    let mut position = [0u8; 4];
    position[..split].copy_from_slice(&data[..split]);
    let text = String::from_utf8_lossy(&data[split..]);
    let hole = u32::from_le_bytes(position) as usize % (text.len() + 1);
    let syntax = Java.hole_syntax(&text, hole);
    if syntax.text.is_empty() {
        return; // the parser gave up: nothing to check
    }
    assert!(
        syntax.text.get(syntax.inserted.clone()).is_some(),
        "inserted {:?} outside the analysed text or splitting a character",
        syntax.inserted
    );
    let outline_spans = syntax.outline.iter().flat_map(|t| {
        [t.header, t.decl]
            .into_iter()
            .chain(t.constants.iter().copied())
            .chain(t.fields.iter().flat_map(|f| [f.head, f.decl]))
            .chain(t.methods.iter().flat_map(|m| [m.signature, m.decl]))
    });
    let local_spans = syntax
        .locals
        .iter()
        .flat_map(|l| [l.type_span, l.name_span]);
    for span in outline_spans.chain(local_spans) {
        check_span(&syntax.text, span);
    }
    for error in Java.syntax_errors(&text, hole..text.len()) {
        check_span(&text, error.span);
    }
}

/// Where the pieces of a tsconfig input are written: the configuration nearest the sources,
/// and what it may extend, as written or with `.json` added, a folder up and a folder down;
/// then the packages' manifests and workspace lists that bare specifiers are resolved through.
const TSCONFIGS: [&str; 10] = [
    "pkg/tsconfig.json",
    "tsconfig.json",
    "pkg/base.json",
    "pkg/base",
    "pkg/sub/more.json",
    "pkg/sub/tsconfig.json",
    "pkg/package.json",
    "pnpm-workspace.yaml",
    "package.json",
    "pkg/sub/package.json",
];

/// Sources that import through `paths`, `baseUrl`, relative specifiers and packages (their
/// own by name, a workspace's), and through barrels.
const TSCONFIG_SOURCES: [(&str, &str); 4] = [
    (
        "pkg/main.ts",
        "import { a } from '@a/a';\nimport b from 'b';\nimport c from './c';\n\
         import * as p from 'pkg/sub';\nimport { s } from '@w/sub/x';\np.a.b.c; s.t;\n",
    ),
    ("pkg/c.ts", "export const c = 1;\n"),
    ("pkg/src/a.ts", "export const a = 1;\n"),
    (
        "pkg/sub/b.ts",
        "import { a } from '@a/a';\nexport default a;\nexport * from '../c';\nexport * as n from 'pkg';\n",
    ),
];

/// Arbitrary bytes as a TypeScript project's configurations (cut at each NUL byte into up
/// to ten files: `tsconfig.json`s, which extend each other as they say, `package.json`s and a
/// `pnpm-workspace.yaml`; JSONC or not, UTF-8 or not): indexing ends without a panic, every
/// warning is one line, and every import reaches another repository file.
pub fn check_tsconfig(data: &[u8]) {
    let scratch = Scratch::new("tsconfig");
    let root = scratch.0.as_path();
    for (bytes, name) in data.split(|&b| b == 0).zip(TSCONFIGS) {
        write(root, name, bytes);
    }
    for (name, text) in TSCONFIG_SOURCES {
        write(root, name, text);
    }
    let index = RepoIndex::open(root, None).expect("the repository opens");
    assert_eq!(index.files.len(), TSCONFIG_SOURCES.len());
    for warning in &index.warnings {
        assert!(
            !warning.contains('\n'),
            "a warning of several lines: {warning:?}"
        );
    }
    for (id, imports) in keyhole::testing::repo::graph(&index)
        .imports
        .iter()
        .enumerate()
    {
        assert!(
            imports
                .iter()
                .all(|i| i.file != id && i.file < index.files.len())
        );
    }
}

/// A directory of its own under the system's temporary one, removed when dropped (the fuzz
/// targets have no `tempfile`).
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("keyhole-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `content` at `rel` under `root`, creating directories.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// A hole in the fuzzed file (the sibling when the fuzzed one was skipped), anywhere from the
/// start of a line to just past its end.
fn hole_at(index: &RepoIndex, line_pick: usize, column_pick: usize) -> Hole {
    let path = [FUZZED, SIBLING]
        .into_iter()
        .find(|p| index.file_id(p).is_some())
        .expect("the sibling is always indexed");
    let file = &index.files[index.file_id(path).expect("indexed")];
    let line = line_pick % file.line_count() + 1;
    let chars = file.line_text(line - 1).chars().count();
    let column = column_pick % (chars + 1) + 1;
    Hole::at(index, path, line, column).expect("a position inside the file is a hole")
}

/// Builds all 62 proposals for `hole` and checks every composed prompt, the default included.
pub fn compose_all(index: &RepoIndex, hole: &Hole, kind: TokenizerKind, budget: usize) {
    let tok = kind.tokenizer();
    let composer = Composer::new(index, hole, tok, budget, DefaultReading::AsWritten);
    let specs = candidate::proposal_specs();
    assert_eq!(specs.len(), CandidateId::PROPOSALS);
    for spec in specs {
        let req = HoleRequest {
            index,
            hole,
            tokenizer: tok,
            allocation: compose::proposal_allocation(budget, spec.share),
            fidelity: Fidelity::Paper,
            seed: 9,
        };
        let context = proposals::build(*spec, &req);
        let prompt = composer.compose(&context);
        if let Err(e) = prompt.validate(index, tok) {
            panic!(
                "proposal {} ({}), budget {budget}: {e}",
                spec.id,
                kind.name()
            );
        }
    }
    if let Err(e) = composer
        .compose(&keyhole::DefaultContext)
        .validate(index, tok)
    {
        panic!("default context ({}), budget {budget}: {e}", kind.name());
    }
}

/// What a backend might answer, non-ASCII on purpose: the candidates built from completions
/// (RepoCoder's second iteration, ProCC's hypothetical line and summary) search with it.
const ANSWER: &str = "größe → total(«😀», e\u{301}) ≤ 1;";

/// The search indexes the retrieved candidates need, built once per repository.
pub struct Searches {
    pub retrieval: Retrieval,
    pub windows: WindowIndex,
}

impl Searches {
    pub fn new(index: &RepoIndex) -> Searches {
        Searches {
            retrieval: Retrieval::new(index),
            windows: WindowIndex::new(index),
        }
    }
}

/// Builds every retrieved candidate (63–72) for `hole` and checks every composed prompt.
pub fn compose_retrieved(
    index: &RepoIndex,
    searches: &Searches,
    hole: &Hole,
    kind: TokenizerKind,
    budget: usize,
) {
    let tok = kind.tokenizer();
    let perspectives = Perspectives {
        index,
        retrieval: &searches.retrieval,
        windows: &searches.windows,
        tokenizer: tok,
        budget,
        seed: keyhole::testing::hole::DEFAULT_SEED,
        fidelity: Fidelity::Paper,
    };
    let composer = Composer::new(index, hole, tok, budget, DefaultReading::AsWritten);
    let mut candidates = perspectives.immediate(hole);
    candidates.push(perspectives.repocoder_iteration(hole, ANSWER));
    candidates.push(perspectives.hypothetical_line(hole, ANSWER));
    candidates.push(perspectives.summary(hole, ANSWER));
    assert_eq!(candidates.len(), CandidateId::retrieved().count());
    for candidate in candidates {
        if let Some(Err(e)) = candidate.compose(&composer).map(|p| p.validate(index, tok)) {
            panic!(
                "candidate {} ({}), budget {budget}: {e}",
                candidate.id,
                kind.name()
            );
        }
    }
}

/// The protocols whose streams are read, as the first input byte picks them.
const STREAMING: [BackendKind; 4] = [
    BackendKind::OpenAi,
    BackendKind::OpenAiChat,
    BackendKind::Ollama,
    BackendKind::LlamaCpp,
];

/// A streamed answer (SSE or NDJSON, as the first byte's protocol frames it), cut into chunks
/// where the second byte says: no panic, and the texts do not depend on where the chunks
/// were cut (a character split across chunks is decoded whole).
pub fn check_stream(data: &[u8]) {
    let (Some(&pick), Some(&cut)) = (data.first(), data.get(1)) else {
        return;
    };
    let body = &data[2..];
    let config = BackendConfig {
        name: "fuzz".into(),
        kind: STREAMING[pick as usize % STREAMING.len()],
        base_url: Some("http://127.0.0.1:9".into()),
        model: Some("m".into()),
        ..BackendConfig::embedded()
    };
    let read = |chunks: &[&[u8]]| http::read_stream(&config, chunks).map_err(|e| e.to_string());
    let whole = read(&[body]);
    let step = usize::from(cut).max(1);
    let chunks: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(
        read(&chunks),
        whole,
        "chunks of {step} bytes read differently"
    );
}

/// Any bytes as what a language server writes (headers, `Content-Length`, bodies): no panic,
/// errors on one line, the messages read the same whatever pieces the bytes arrive in, and
/// each message read writes back and reads again as itself.
pub fn check_lsp_frames(data: &[u8]) {
    /// Every body until the end or the first error (its text).
    fn read_all(input: &mut impl std::io::BufRead) -> (Vec<Vec<u8>>, Option<String>) {
        let mut bodies = Vec::new();
        loop {
            match lsp::read_body(input) {
                Ok(Some(body)) => bodies.push(body),
                Ok(None) => return (bodies, None),
                Err(e) => return (bodies, Some(e.to_string())),
            }
        }
    }
    let whole = read_all(&mut &data[..]);
    if let Some(error) = &whole.1 {
        assert_eq!(error.lines().count(), 1, "{error:?}");
    }
    for capacity in [1, 7] {
        let mut pieces = std::io::BufReader::with_capacity(capacity, data);
        assert_eq!(
            read_all(&mut pieces),
            whole,
            "read {capacity} bytes at a time"
        );
    }
    for body in &whole.0 {
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.extend_from_slice(body);
        let Ok(Some(message)) = lsp::read_message(&mut &framed[..]) else {
            continue;
        };
        let mut written = Vec::new();
        lsp::write_message(&mut written, &message).unwrap();
        let read = lsp::read_message(&mut &written[..]).unwrap();
        assert_eq!(read.as_ref(), Some(&message));
    }
}

/// Any text as backends.toml, keymap.toml and theme.toml: no panic, and what is wrong is
/// said on one line.
pub fn check_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let one_line = |error: &str| assert_eq!(error.lines().count(), 1, "{error:?}");
    if let Err(e) = config::parse_backends(&text, Path::new("backends.toml")) {
        one_line(&e.to_string());
    }
    for problem in Keymap::with_user_text(&text).1 {
        one_line(&problem);
    }
    if let Err(e) = Theme::from_user_text(&text) {
        one_line(&e.to_string());
    }
}

/// Any bytes as a GGUF model file: no panic (a panic that the model code's guard catches
/// counts: a header check is missing), and a one-line error where it is refused.
pub fn check_gguf(data: &[u8]) {
    let name = format!(
        "keyhole-fuzz-{}-{:?}.gguf",
        std::process::id(),
        std::thread::current().id()
    );
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, data).unwrap();
    let caught = local::panics_caught();
    if let Err(error) = LocalModel::load(&path, config::Matrices::Auto) {
        let error = error.to_string();
        assert_eq!(error.lines().count(), 1, "{error:?}");
        assert_eq!(local::panics_caught(), caught, "{error}");
    }
    let _ = std::fs::remove_file(&path);
}
