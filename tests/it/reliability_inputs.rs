//! Bad input gets a clear message and the rest keeps working: huge, deeply nested and broken
//! files, positions outside the repository or past the end, empty repositories, unreadable
//! files, keymap and theme files that do not parse, and the inputs the fuzzer found.
//! (A backends.toml with a wrong type is covered by tests/it/backends_config.rs.)

use crate::{common, reliability_support};

use std::path::{Path, PathBuf};

use keyhole::DEFAULT_BUDGET;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::{Hole, testing::hole::every_line};
use keyhole::{testing::lang::Java, testing::lang::Language};
use keyhole::{testing::tui::keymap, testing::tui::keymap::Keymap};
use keyhole::{testing::tui::theme, testing::tui::theme::Theme};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use reliability_support::fuzz_checks::{self, write};
use reliability_support::{keyhole, one_line_error, stdout};
use serde_json::Value;

/// Five lines; line 4 has 19 characters.
const GOOD: &str = "package p;\n\nclass Good {\n    int total = 42;\n}\n";

/// A scratch directory with `files` written under its `repo/`.
fn repo_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for (rel, content) in files {
        write(&repo, rel, content);
    }
    (scratch, repo)
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn proposal_rows(output: &std::process::Output) -> usize {
    let json: Value = serde_json::from_str(&stdout(output)).unwrap();
    json["proposals"].as_array().unwrap().len()
}

#[test]
fn a_ten_megabyte_line_is_skipped_with_a_warning_naming_it() {
    let mut huge = b"class Huge { String s = \"".to_vec();
    huge.resize(10 << 20, b'x');
    huge.extend_from_slice(b"\"; }");
    let (scratch, repo) =
        repo_with(&[("src/Good.java", GOOD.as_bytes()), ("src/Huge.java", &huge)]);
    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "src/Good.java:4:9", "--json"],
        &[],
    );
    assert_eq!(proposal_rows(&out), 62);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: skipped src/Huge.java: larger than"),
        "{stderr}"
    );
    // The skipped file holds no hole: the warning, then a one-line error.
    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "src/Huge.java:1:1"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines[0].contains("skipped src/Huge.java"), "{stderr}");
    assert_eq!(
        lines[1..],
        ["keyhole: src/Huge.java: no such source file in the repository"]
    );
}

const DEPTH: usize = 50_000;

/// 50,000 nested parentheses in an expression and 50,000 nested blocks in a method.
fn deeply_nested() -> String {
    format!(
        "class Deep {{\n    int x = {}1{};\n    void f() {{\n{}{}\n    }}\n}}\n",
        "(".repeat(DEPTH),
        ")".repeat(DEPTH),
        "{".repeat(DEPTH),
        "}".repeat(DEPTH)
    )
}

#[test]
fn deep_nesting_fits_in_a_default_thread_stack() {
    let source = deeply_nested();
    let (_scratch, repo) = repo_with(&[("Deep.java", source.as_bytes())]);
    // The default stack of a spawned thread; the main test thread may have more.
    let worker = std::thread::Builder::new().stack_size(2 << 20);
    let handle = worker.spawn(move || {
        let facts = Java.extract(&source);
        assert_eq!(facts.types[0].name, "Deep");
        assert_eq!(facts.syntax_errors, 0);
        let index = RepoIndex::open(&repo, None).unwrap();
        let hole = Hole::at(&index, "Deep.java", 4, 100).unwrap();
        fuzz_checks::compose_all(&index, &hole, TokenizerKind::Code, DEFAULT_BUDGET);
    });
    handle.unwrap().join().expect("no stack overflow, no panic");
}

/// Every `;` opens a block and every `)` is gone: errors on nearly every line.
fn break_syntax(text: &str) -> String {
    text.replace(';', " {").replace(')', "")
}

#[test]
fn syntax_errors_everywhere_still_give_62_valid_prompts() {
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo");
    let sample = RepoIndex::open(&sample, None).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    for file in &sample.files {
        write(scratch.path(), &file.path, break_syntax(&file.text));
    }
    let broken = RepoIndex::open(scratch.path(), None).unwrap();
    assert_eq!(broken.files.len(), sample.files.len());
    assert!(
        broken
            .files
            .iter()
            .all(|f| keyhole::testing::repo::facts(f).syntax_errors > 0)
    );

    let holes = every_line(&broken, 1, 7);
    for hole in holes.iter().step_by((holes.len() / 40).max(1)) {
        fuzz_checks::compose_all(&broken, hole, TokenizerKind::Code, DEFAULT_BUDGET);
    }
    let position = format!("{}:2:1", broken.files[0].path);
    let out = keyhole(
        scratch.path(),
        &[
            "proposals",
            arg(scratch.path()),
            &position,
            "--json",
            "--no-cache",
        ],
        &[],
    );
    assert_eq!(proposal_rows(&out), 62);
}

#[test]
fn positions_outside_the_repository_are_one_line_errors_naming_them() {
    let (scratch, repo) = repo_with(&[("A.java", GOOD.as_bytes())]);
    write(scratch.path(), "x.java", "class X {}\n");
    let absolute = scratch.path().join("x.java");
    for file in ["../x.java", arg(&absolute)] {
        for command in ["proposals", "prompt"] {
            let position = format!("{file}:1:1");
            let out = keyhole(scratch.path(), &[command, arg(&repo), &position], &[]);
            let err = one_line_error(&out);
            assert!(
                err.contains(&format!("{file}: no such source file")),
                "{err}"
            );
        }
    }
}

#[test]
fn holes_past_the_end_of_a_line_or_file_are_exit_code_2_and_one_line() {
    let (scratch, repo) = repo_with(&[("A.java", GOOD.as_bytes())]);
    let run = |position: &str| keyhole(scratch.path(), &["proposals", arg(&repo), position], &[]);
    stdout(&run("A.java:4:20")); // just past the last character: the end of the line
    for (position, says) in [
        (
            "A.java:4:21",
            "A.java:4:21: column out of range (the line has 19 characters)",
        ),
        ("A.java:4:0", "A.java:4:0: column out of range"),
        (
            "A.java:6:1",
            "A.java:6: line out of range (the file has 5 lines)",
        ),
        ("A.java:0:1", "A.java:0: line out of range"),
        ("A.java:99999999999999999999:1", "expected FILE:LINE:COL"),
    ] {
        let err = one_line_error(&run(position));
        assert!(err.contains(says), "{position}: {err}");
    }
}

#[test]
fn a_repository_without_a_file_keyhole_reads_is_a_one_line_error_naming_the_languages_it_reads() {
    let (scratch, repo) = repo_with(&[("pkg/core.rb", b"def f\n  1\nend\n")]);
    for command in [
        vec!["proposals", arg(&repo), "pkg/core.rb:1:3"],
        vec!["holes", arg(&repo)],
        vec!["index", arg(&repo)],
    ] {
        let err = one_line_error(&keyhole(scratch.path(), &command, &[]));
        assert!(
            err.contains(
                "no source files keyhole reads (it reads Java (*.java), Python (*.py, *.pyi)"
            ),
            "{command:?}: {err}"
        );
    }
}

#[test]
fn a_file_of_a_language_keyhole_does_not_read_is_named_as_such() {
    let (scratch, repo) = repo_with(&[
        ("A.java", GOOD.as_bytes()),
        ("pkg/core.rb", b"def f\n  1\nend\n"),
    ]);
    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "pkg/core.rb:1:3"],
        &[],
    );
    let err = one_line_error(&out);
    assert!(
        err.contains(
            "pkg/core.rb: keyhole does not read this language (it reads Java (*.java), Python (*.py, *.pyi)"
        ),
        "{err}"
    );
    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "B.java:1:1"],
        &[],
    );
    assert!(one_line_error(&out).contains("B.java: no such source file in the repository"));
}

#[cfg(unix)]
#[test]
fn unreadable_files_are_skipped_with_a_warning_naming_them() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let (scratch, repo) = repo_with(&[("A.java", GOOD.as_bytes()), ("Locked.java", b"class L {}")]);
    let locked = repo.join("Locked.java");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command
        .args(["proposals", arg(&repo), "A.java:4:9", "--json"])
        .envs(common::hermetic_env(scratch.path()));
    // Root (as on CI) reads a file whatever its mode, so there keyhole runs as `nobody`, who
    // may enter the scratch directory and write its own directories there but not read the
    // locked file.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(&repo, std::fs::Permissions::from_mode(0o755)).unwrap();
        command.uid(65534).gid(65534);
    }
    let out = command.output().expect("the keyhole binary runs");
    assert_eq!(
        proposal_rows(&out),
        62,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Locked.java: cannot read"), "{stderr}");
    assert!(!stdout(&out).contains("Locked.java"), "{}", stdout(&out));
}

/// Writes `text` as `file` in a fresh config directory and loads it with `load`; the warning
/// must be one line naming the file, the line and the key.
fn assert_config_warning<T>(
    file: &str,
    text: &str,
    load: fn(Option<&Path>) -> (T, Option<String>),
    line: usize,
    key: &str,
) -> T {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), file, text);
    let (loaded, warning) = load(Some(dir.path()));
    let warning = warning.unwrap_or_else(|| panic!("no warning for {text:?}"));
    let path = dir.path().join(file);
    assert_eq!(warning.lines().count(), 1, "{warning}");
    assert!(
        warning.starts_with(&path.display().to_string()),
        "{warning}"
    );
    assert!(warning.contains(&format!("line {line}")), "{warning}");
    assert!(warning.contains(&format!("`{key}`")), "{warning}");
    loaded
}

#[test]
fn a_bad_keymap_file_is_named_with_line_and_key_and_the_defaults_stay() {
    let quit = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    for (text, line, key) in [
        ("[[bind]]\non = \"x\"\nrun = 5\ndesc = \"d\"\n", 3, "run"),
        (
            "[[bind]]\non = \"x\"\nrun = \"explode\"\ndesc = \"d\"\n",
            3,
            "run",
        ),
        (
            "[[bind]]\n\non = \"nope\"\nrun = \"quit\"\ndesc = \"d\"\n",
            3,
            "on",
        ),
        (
            "[[bind]]\non = \"x\"\nrun = \"quit\"\ndesc = \"d\"\nhint = \"yes\"\n",
            5,
            "hint",
        ),
    ] {
        let load = |dir: Option<&Path>| {
            let (map, problems) = Keymap::load(dir);
            assert!(problems.len() <= 1, "{problems:?}");
            (map, problems.into_iter().next())
        };
        let map = assert_config_warning(keymap::USER_FILE, text, load, line, key);
        let normal = keymap::Layer::Normal;
        let pane = keyhole::testing::tui::command::Pane::Source;
        assert_eq!(
            map.lookup(normal, pane, quit),
            Some(keyhole::testing::tui::command::Command::Quit)
        );
    }
}

#[test]
fn a_bad_theme_file_is_named_with_line_and_key_and_the_default_stays() {
    for (text, line, key) in [
        ("base = \"light\"\nhole = \"nope\"\n", 2, "hole"),
        ("\n\nhole = 5\n", 3, "hole"),
        ("hole = \"red\"\ncode = [1]\n", 2, "code"),
    ] {
        let load = |dir: Option<&Path>| Theme::load(dir, None).unwrap();
        let theme = assert_config_warning(theme::USER_FILE, text, load, line, key);
        assert_eq!(theme.background, Theme::dark().background);
    }
}

/// Text real repositories hold: a byte-order mark, CRLF and lone CR line ends, arrows, quotes
/// and dashes, a no-break space, combining marks and emoji, in code, strings and comments.
const UNICODE_FILES: [(&str, &str); 2] = [
    (
        "p/Größe.java",
        "\u{feff}package p;\r\n\r\n/** Größe → «Maß» – “quoted” ≤ 😀 */\r\npublic class Größe {\r\n    \
         private int maß = 1; // e\u{301} and 👩‍💻\r\n    String arrow = \"a → b ≤ c\";\r\n    \
         int total(int x) {\r\n        int y = x\u{a0}+ maß;\rint z = y;\r\n        \
         return y + z; // «😀»\r\n    }\r\n}\r\n",
    ),
    (
        "p/Täller.java",
        "package p;\n\nclass Täller extends Größe {\n    String s = \"😀x\";\n    \
         int twice() {\n        return total(2) * 2; // ≥ “twice”\n    }\n}\n",
    ),
];

/// A hole right before or after any non-ASCII character, and at both ends of every line:
/// all 62 proposals, the default context and the retrieved candidates 63–72 build and
/// compose into valid prompts (the typed-hole probe once panicked after `→`).
#[test]
fn every_candidate_builds_next_to_non_ascii_characters() {
    let sources = UNICODE_FILES.map(|(path, text)| (path.to_string(), text.to_string()));
    let index = RepoIndex::from_sources(Path::new("/unicode"), sources.to_vec());
    assert_eq!(index.files.len(), 2);
    let searches = fuzz_checks::Searches::new(&index);
    let mut holes = 0;
    for file in &index.files {
        for line in 0..file.line_count() {
            let chars: Vec<char> = file.line_text(line).chars().collect();
            let non_ascii = |i: usize| chars.get(i).is_some_and(|c| !c.is_ascii());
            for column in 0..=chars.len() {
                let next_to_one = non_ascii(column) || column > 0 && non_ascii(column - 1);
                if !(next_to_one || column == 0 || column == chars.len()) {
                    continue;
                }
                let hole = Hole::at(&index, &file.path, line + 1, column + 1).unwrap();
                let tokenizer = [TokenizerKind::Code, TokenizerKind::R50kBase][holes % 2];
                fuzz_checks::compose_all(&index, &hole, tokenizer, DEFAULT_BUDGET);
                fuzz_checks::compose_retrieved(&index, &searches, &hole, tokenizer, DEFAULT_BUDGET);
                holes += 1;
            }
        }
    }
    assert!(holes > 80, "only {holes} holes");
}

/// The report's case through the binary: a hole right after a byte-order mark.
#[test]
fn a_hole_after_a_byte_order_mark_lists_every_candidate() {
    let (scratch, repo) = repo_with(&[("A.java", b"\xef\xbb\xbfpackage p;\nclass A {}\n")]);
    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "A.java:1:2", "--json"],
        &[],
    );
    assert_eq!(proposal_rows(&out), 62);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let retrieved = json["retrieved"].as_array().map_or(0, Vec::len);
    assert_eq!(retrieved, 10, "{json}");
    for id in ["63", "66", "71"] {
        let out = keyhole(
            scratch.path(),
            &["prompt", arg(&repo), "A.java:1:2", "--id", id],
            &[],
        );
        stdout(&out);
    }
}

/// Header bytes of a compose input: line, column and budget (little-endian u16s), tokenizer.
fn compose_input(line: u16, column: u16, budget: u16, tokenizer: u8, text: &str) -> Vec<u8> {
    let mut input = [line, column, budget]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>();
    input.push(tokenizer);
    input.extend_from_slice(text.as_bytes());
    input
}

/// The fuzz runs found no failing input; these keep awkward shapes checked on every test run
/// (empty, line endings, multi-byte characters at the hole, a zero budget, BPE tokenizers).
#[test]
fn fuzz_invariants_hold_on_awkward_inputs() {
    let texts = [
        "",
        "class A {\r    int x;\r}\r",
        "\u{feff}package p;\r\n\r\nclass Ü {\r\n    String s = \"日本語\";\r\n}",
        "class A { void f( { int x = ; } String s = \"hi\"; ",
        "\u{0}\u{1}{{{{((((\u{fffd}",
        "class A { int a = b → c; String s = \"≤«\"; // “😀”\n}",
        "data: {\"choices\":[{\"index\":0,\"text\":\"→😀\"}]}\n\ndata: [DONE]\n",
        "{\"response\":\"«x»\",\"done\":false}\n{\"response\":\"\",\"done\":true}",
        "[[backend]]\nname = \"x\"\nkind = \"openai\"\nconcurrency = 99999999999999999999\n",
        "[[bind]]\non = \"ctrl-☃\"\nrun = \"quit\"\ndesc = \"d\"\n",
    ];
    for (i, text) in texts.iter().enumerate() {
        fuzz_checks::check_extract(text.as_bytes());
        let i = i as u16;
        for (budget, tokenizer) in [(0, 0), (1, 3), (4072, 4)] {
            fuzz_checks::check_compose(&compose_input(i, 7 * i + 3, budget, tokenizer, text));
        }
        fuzz_checks::check_config(text.as_bytes());
        for (pick, cut) in [(0, 1), (1, 2), (2, 3), (3, 5)] {
            let mut stream = vec![pick, cut];
            stream.extend_from_slice(text.as_bytes());
            fuzz_checks::check_stream(&stream);
        }
        for position in 0..text.len() as u32 {
            let mut input = position.to_le_bytes().to_vec();
            input.extend_from_slice(text.as_bytes());
            fuzz_checks::check_typed(&input);
        }
        fuzz_checks::check_tsconfig(text.as_bytes());
        fuzz_checks::check_lsp_frames(text.as_bytes());
        let framed = format!("Content-Length: {}\r\n\r\n{text}", text.len());
        fuzz_checks::check_lsp_frames(framed.as_bytes());
    }
    // Configurations that extend each other every way, one that is not UTF-8, JSONC.
    let tsconfigs: [&[u8]; 4] = [
        b"{\"extends\":[\"./base\",\"../tsconfig.json\",\"./sub/more.json\"]}\0\
         {\"extends\":\"./pkg/tsconfig.json\",\"compilerOptions\":{\"baseUrl\":\"pkg\"}}\0\
         {\"extends\":[\"./base\",\"./tsconfig.json\"]}\0\
         {\"extends\":[\"./base.json\",\"../tsconfig.json\"],\"compilerOptions\":{\"paths\":{\"@a/*\":[\"src/*\"]}}}\0\
         {\"extends\":[\"../base\",\"./tsconfig.json\",\"../../tsconfig.json\"]}\0\
         {\"extends\":\"../tsconfig.json\"}",
        b"// c\n{ \"compilerOptions\": { \"paths\": { \"@a/*\": [\"*\", 7, null], }, }, }\0\xff",
        b"{\"extends\":\"./../../../../etc/passwd\"}\0{\"compilerOptions\":{\"baseUrl\":\"/\"}}",
        // Packages: conditions, patterns, targets out of the package, workspaces of every
        // shape, a manifest that is not JSON.
        b"{\"compilerOptions\":{\"customConditions\":[\"src\"]}}\0{}\0\0\0\0\0\
         {\"name\":\"pkg\",\"exports\":{\"./sub\":{\"src\":\"./sub/b.ts\"},\"./*\":[null,\"./../../*\",\"./*.ts\"],\".\":{\"x\":1,\"default\":\"./c.ts\"}}}\0\
         packages:\n  - '**'\n  - '!pkg/x/**'\n\0\
         {\"workspaces\":{\"packages\":[\"pkg/*\",7]}}\0\
         {\"name\":\"@w/sub\",\"main\":\"b.ts\",\"exports\":\"./b.ts\"",
    ];
    for tsconfig in tsconfigs {
        fuzz_checks::check_tsconfig(tsconfig);
    }
}

/// The repository files the imports of the file at `path` reach.
fn imported(index: &RepoIndex, path: &str) -> Vec<String> {
    let id = index.file_id(path).unwrap();
    let files = keyhole::testing::repo::graph(index).imports[id].iter();
    files.map(|i| index.files[i.file].path.clone()).collect()
}

#[cfg(unix)]
#[test]
fn tsconfig_files_that_are_fifos_devices_links_out_or_huge_are_refused_with_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("repo");
    let config = r#"{ "compilerOptions": { "paths": { "@x": ["x.ts"] } } }"#;
    write(scratch.path(), "outside.json", config);
    for package in ["good", "fifo", "zero", "outside", "huge", "extends"] {
        write(&root, &format!("{package}/x.ts"), "export const x = 1;\n");
        let main = "import { x } from '@x';\nconsole.log(x);\n";
        write(&root, &format!("{package}/main.ts"), main);
    }
    write(&root, "good/tsconfig.json", config);
    let fifo = std::ffi::CString::new(arg(&root.join("fifo/tsconfig.json"))).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let link = |target: &Path, at: &str| std::os::unix::fs::symlink(target, root.join(at));
    link(Path::new("/dev/zero"), "zero/tsconfig.json").unwrap();
    link(
        &scratch.path().join("outside.json"),
        "outside/tsconfig.json",
    )
    .unwrap();
    // What a configuration extends goes through the same check.
    write(
        &root,
        "extends/tsconfig.json",
        r#"{ "extends": "./base.json" }"#,
    );
    link(&scratch.path().join("outside.json"), "extends/base.json").unwrap();
    let mut huge = config.trim_end_matches('}').to_string();
    huge.push_str(&format!(", \"padding\": \"{}\" }}", "x".repeat(5 << 20)));
    write(&root, "huge/tsconfig.json", &huge);

    let index = common::index_within_minutes(&root)
        .expect("a FIFO as tsconfig.json must not hang indexing");
    assert_eq!(imported(&index, "good/main.ts"), ["good/x.ts"]);
    for package in ["fifo", "zero", "outside", "huge", "extends"] {
        let main = format!("{package}/main.ts");
        assert!(imported(&index, &main).is_empty(), "{main}");
    }
    let warnings = index.warnings.join("\n");
    for expected in [
        "fifo/tsconfig.json: not a regular file; imports were resolved without it",
        "zero/tsconfig.json: outside the repository; imports were resolved without it",
        "outside/tsconfig.json: outside the repository; imports were resolved without it",
        "extends/base.json: outside the repository; imports were resolved without it",
        "huge/tsconfig.json: larger than 4194304 bytes; imports were resolved without it",
    ] {
        assert!(
            warnings.contains(expected),
            "missing '{expected}' in:\n{warnings}"
        );
    }
}

/// Control characters in `text` other than line breaks: what must never reach a terminal.
fn controls_in(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c.is_control() && c != '\n')
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_a_file_or_a_servers_answer_reach_the_terminal_escaped() {
    use crate::backends_support::{Reply, Server};
    let hostile = "\u{1b}]0;title\u{7}\u{1b}[2J";
    let code = format!(
        "class A {{\n    int f() {{ return 1; /* {hostile} */ }}\n    int g() {{ return f(); }}\n}}\n"
    );
    let (scratch, repo) = repo_with(&[("A.java", code.as_bytes())]);
    let server = Server::start(move |_, _| {
        Reply::Json(
            200,
            serde_json::json!({"choices": [{"index": 0, "text": format!("1; // {hostile}\nnext")}]}),
        )
    })
    .await;
    reliability_support::write_backends(
        scratch.path(),
        &format!(
            "[[backend]]\nname = \"srv\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nretries = 0\n",
            server.base
        ),
    );
    let hole = "A.java:2:22";
    for args in [
        vec!["proposals", arg(&repo), hole],
        vec!["complete", arg(&repo), hole, "--backend", "srv", "-k", "2"],
    ] {
        let output = keyhole(scratch.path(), &args, &[]);
        let shown = stdout(&output);
        // On main: the file's line and target, and the server's answer, printed raw.
        assert_eq!(controls_in(&shown), Vec::<char>::new(), "{args:?}: {shown}");
        assert!(shown.contains("]0;title"), "{args:?}: {shown}");
    }
}

#[test]
#[cfg(unix)]
fn a_language_servers_error_text_is_one_escaped_warning_and_the_table_keeps_its_rows() {
    use std::os::unix::fs::PermissionsExt;
    let code = "def total(xs: list[int]) -> int:\n    s: int = 0\n    return s\n";
    let (scratch, repo) = repo_with(&[("a.py", code.as_bytes())]);
    // A server that refuses `initialize` (the first request, id 1) in two lines, one of them
    // clearing the screen.
    let bin = scratch.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let server = bin.join("pyright-langserver");
    let body = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"cannot start\nsecond line \u001b[2J"}}"#;
    std::fs::write(
        &server,
        format!(
            "#!/bin/sh\nprintf 'Content-Length: {}\\r\\n\\r\\n%s' '{body}'\nsleep 20\n",
            body.len()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "a.py:2:14"],
        &[("PATH", &path), ("KEYHOLE_LANGUAGE_SERVERS", "auto")],
    );
    let shown = stdout(&output);
    assert_eq!(controls_in(&shown), Vec::<char>::new(), "{shown}");
    // The typed holes' rows fall back to keyhole's own reading, and the server's reason is
    // one warning line on stderr, its line break and escape sequence written out.
    let typed: Vec<&str> = shown
        .lines()
        .filter(|l| {
            l.trim_start().starts_with("71  typed-hole")
                || l.trim_start().starts_with("72  typed-hole")
        })
        .collect();
    assert_eq!(typed.len(), 2, "{shown}");
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(controls_in(&said), Vec::<char>::new(), "{said}");
    let warnings: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("cannot start"))
        .collect();
    assert_eq!(warnings.len(), 1, "{said}");
    assert!(
        warnings[0].contains("cannot start\\nsecond line \\u{1b}[2J"),
        "{said}"
    );
}
