//! Numbers, devices and files that used to crash or hang keyhole: huge or zero numbers on the
//! command line and in backends.toml, a full disk, cache files that are not files or describe
//! other text, and file names holding control characters.

use crate::reliability_support;
use keyhole::CandidateId;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use keyhole::Fidelity;
use keyhole::Hole;
use keyhole::MAX_BUDGET;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::context::proposals;
use reliability_support::fuzz_checks::write;
use reliability_support::{Tmpfs, keyhole, one_line_error, stdout};

const HOLE: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";
const HUGE: &str = "4611686018427387904"; // 2^62

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn numbers_out_of_range_on_the_command_line_are_one_line_errors_naming_the_flag() {
    let scratch = tempfile::tempdir().unwrap();
    let sample = sample();
    let hole = |command: &'static str, extra: &[&'static str]| {
        let mut args = vec![command, sample.as_str(), HOLE];
        args.extend_from_slice(extra);
        args
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (hole("proposals", &["--budget", HUGE]), "--budget"),
        (hole("prompt", &["--budget", "0"]), "--budget"),
        (
            hole("proposals", &["--iterations", "65535"]),
            "--iterations",
        ),
        (hole("complete", &["-k", "0"]), "-k"),
        (hole("complete", &["-k", HUGE]), "-k"),
        (hole("complete", &["--samples", HUGE]), "--samples"),
        (hole("complete", &["--temperature", "NaN"]), "--temperature"),
        (hole("complete", &["--max-tokens", HUGE]), "--max-tokens"),
        (
            vec!["holes", &sample, "--export", "x", "--budget", HUGE],
            "--budget",
        ),
        (vec!["render", "--width", "0", "--height", "0"], "--width"),
        (
            vec!["render", "--width", "65535", "--height", "65535"],
            "--width",
        ),
        (vec!["render", "--height", "65535"], "--height"),
        (vec!["eval", &sample, "--concurrency", "0"], "--concurrency"),
        (vec!["eval", &sample, "--budget", HUGE], "--budget"),
        (
            vec!["tasks", "t.jsonl", "--concurrency", HUGE],
            "--concurrency",
        ),
        (
            vec!["train", "l", "--corpus", "c", "--max-epochs", HUGE],
            "--max-epochs",
        ),
    ];
    for (args, flag) in cases {
        let err = one_line_error(&keyhole(scratch.path(), &args, &[]));
        assert!(err.contains(&format!("'{flag} <")), "{args:?}: {err}");
        assert!(err.contains("must be from"), "{args:?}: {err}");
    }
    // The largest budget still works.
    let budget = MAX_BUDGET.to_string();
    let args = ["prompt", &sample, HOLE, "--budget", &budget];
    stdout(&keyhole(scratch.path(), &args, &[]));
}

#[test]
fn a_huge_budget_given_to_the_library_still_ends() {
    let index = RepoIndex::open(Path::new(&sample()), None).unwrap();
    let hole = Hole::parse(&index, HOLE).unwrap();
    let tokenizer = TokenizerKind::Code.tokenizer();
    for budget in [1 << 62, usize::MAX] {
        let built = proposals::build_for_budget(&index, &hole, tokenizer, budget, Fidelity::Paper);
        assert_eq!(built.len(), CandidateId::PROPOSALS);
    }
}

#[test]
fn render_sizes_out_of_range_given_to_the_library_are_errors() {
    use keyhole::{testing::tui::Format, testing::tui::render_fixture};
    for (width, height) in [(0, 0), (120, 0), (u16::MAX, u16::MAX)] {
        let err = render_fixture("start", Format::Png, width, height, &keyhole::Dirs::none())
            .unwrap_err();
        assert!(err.to_string().starts_with("cannot render"), "{err}");
    }
}

#[test]
fn numbers_out_of_range_in_backends_toml_name_the_file_line_and_key() {
    for (line, expect) in [
        ("concurrency = 2305843009213693952", "concurrency"),
        ("concurrency = 0", "concurrency"),
        ("deadline_secs = 18446744073709551615", "deadline_secs"),
        ("retries = 4294967295", "retries"),
        ("max_tokens = 0", "max_tokens"),
        ("temperature = nan", "temperature"),
        ("temperature = -1.0", "temperature"),
    ] {
        let scratch = tempfile::tempdir().unwrap();
        let toml = format!(
            "[[backend]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n{line}\n"
        );
        write(&scratch.path().join("config"), "backends.toml", toml);
        let err = one_line_error(&keyhole(scratch.path(), &["backends"], &[]));
        assert!(err.contains("backends.toml, line 6"), "{line}: {err}");
        assert!(err.contains(&format!("key `{expect}`")), "{line}: {err}");
    }
}

/// `keyhole ARGS` with stdout and stderr going where given.
fn run_into(scratch: &Path, args: &[&str], out: Stdio, err: Stdio) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .env("KEYHOLE_CONFIG_DIR", scratch.join("config"))
        .env("KEYHOLE_CACHE_DIR", scratch.join("cache"))
        .env("KEYHOLE_DATA_DIR", scratch.join("data"))
        .stdout(out)
        .stderr(err)
        .output()
        .unwrap()
}

fn dev_full() -> Stdio {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_standard_output_or_error_is_an_error_not_a_panic() {
    let scratch = tempfile::tempdir().unwrap();
    let sample = sample();
    // Lines (holes), and text without a final line break (prompt), which stays buffered.
    for args in [
        vec!["holes", &sample],
        vec!["prompt", &sample, HOLE],
        vec!["index", &sample],
    ] {
        let out = run_into(scratch.path(), &args, dev_full(), Stdio::piped());
        let err = one_line_error(&out);
        assert!(
            err.contains("cannot write to standard output: No space left on device"),
            "{args:?}: {err}"
        );
    }
    // `holes` reports its count on stderr; nothing can be said, but it must not panic.
    let out = run_into(
        scratch.path(),
        &["holes", &sample],
        Stdio::null(),
        dev_full(),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "mounts a tmpfs, which needs root: .ci/run runs it"]
fn a_full_disk_under_an_output_file_is_a_one_line_error() {
    let scratch = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&scratch.path().join("tiny"), "64k");
    let export = disk.0.join("tasks.jsonl");
    let args = ["holes", &sample(), "--export", arg(&export)];
    let err = one_line_error(&keyhole(scratch.path(), &args, &[]));
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains(arg(&export)), "{err}");
}

/// Where the index cache of `repo` lives under `cache` (src/repo/cache.rs).
fn cache_file(cache: &Path, repo: &Path) -> PathBuf {
    let root = repo.canonicalize().unwrap();
    let key = blake3::hash(root.to_string_lossy().as_bytes()).to_hex();
    cache.join("index").join(format!("{}.bin", &key[..32]))
}

fn small_repo(scratch: &Path) -> PathBuf {
    let repo = scratch.join("repo");
    write(&repo, "A.java", "class A {\n    int total = 42;\n}\n");
    repo
}

#[cfg(unix)]
#[test]
fn a_cache_that_is_a_fifo_or_a_link_to_dev_zero_is_rebuilt_not_read() {
    for kind in ["fifo", "dev-zero"] {
        let scratch = tempfile::tempdir().unwrap();
        let repo = small_repo(scratch.path());
        let cache = cache_file(&scratch.path().join("cache"), &repo);
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        if kind == "fifo" {
            let path = std::ffi::CString::new(arg(&cache)).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &cache).unwrap();
        }
        let out = keyhole(scratch.path(), &["index", arg(&repo)], &[]);
        let text = stdout(&out);
        assert!(text.contains("files       1"), "{kind}: {text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not a regular file; rebuilding it"),
            "{kind}: {stderr}"
        );
        // Rebuilt as a regular file, used the next time.
        assert!(
            std::fs::symlink_metadata(&cache).unwrap().is_file(),
            "{kind}"
        );
        let again = stdout(&keyhole(scratch.path(), &["index", arg(&repo)], &[]));
        assert!(again.contains("1 reused, 0 parsed"), "{kind}: {again}");
    }
}

#[cfg(unix)]
#[test]
fn a_backends_file_that_is_a_fifo_is_a_one_line_error_not_a_hang() {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let fifo = std::ffi::CString::new(arg(&config.join("backends.toml"))).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let error = one_line_error(&keyhole(scratch.path(), &["backends"], &[]));
    assert!(
        error.contains("backends.toml: not a regular file"),
        "{error}"
    );
}

/// `bytes` with every occurrence of `from` replaced by `to` (same length).
fn replace_bytes(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    n
}

#[test]
fn a_cache_with_facts_of_other_text_is_parsed_again_with_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("repo");
    let long = format!(
        "package p;\n\nclass Long {{\n{}}}\n",
        (0..200)
            .map(|i| format!("    int field{i} = {i}; String s{i} = \"é{i}\";\n"))
            .collect::<String>()
    );
    write(&repo, "A.java", &long);
    stdout(&keyhole(scratch.path(), &["index", arg(&repo)], &[]));

    // Swap the text for a short one and make the cache claim its facts describe it: the entry's
    // content hash and the file's checksum both match, the facts are the long text's.
    let short = "class A {\n    int x = 1;\n}\n";
    write(&repo, "A.java", short);
    let cache = cache_file(&scratch.path().join("cache"), &repo);
    let mut bytes = std::fs::read(&cache).unwrap();
    let (old, new) = (
        blake3::hash(long.as_bytes()),
        blake3::hash(short.as_bytes()),
    );
    assert_eq!(replace_bytes(&mut bytes, old.as_bytes(), new.as_bytes()), 1);
    let sum = keyhole::testing::repo::cache_seal(&bytes[32..]);
    bytes[..32].copy_from_slice(&sum);
    std::fs::write(&cache, &bytes).unwrap();

    let out = keyhole(
        scratch.path(),
        &["proposals", arg(&repo), "A.java:2:13", "--json"],
        &[],
    );
    stdout(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("its facts of A.java do not fit the file; parsed it again"),
        "{stderr}"
    );
    // Rewritten with the right facts: no warning the next times.
    for _ in 0..2 {
        let again = keyhole(scratch.path(), &["index", arg(&repo)], &[]);
        assert!(stdout(&again).contains("1 reused, 0 parsed"));
        assert_eq!(String::from_utf8_lossy(&again.stderr), "");
    }
}

#[cfg(unix)]
#[test]
fn control_characters_in_file_names_are_escaped_in_messages_and_listings() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = small_repo(scratch.path());
    // Not UTF-8, so skipped with a warning naming it.
    write(
        &repo,
        "Evil\nkeyhole: forged\u{1b}[2J.java",
        b"class E { \xff }".as_slice(),
    );
    write(
        &repo,
        "Odd\u{1b}]0;title\u{7}.java",
        "class Odd {\n    int y = 2;\n}\n",
    );
    let out = keyhole(scratch.path(), &["holes", arg(&repo)], &[]);
    let listing = stdout(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for text in [&listing, &stderr.to_string()] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        lines[0],
        "warning: skipped Evil\\nkeyhole: forged\\u{1b}[2J.java: not valid UTF-8"
    );
    // One hole a line, in either file.
    let holes: usize = lines[1].strip_suffix(" holes").unwrap().parse().unwrap();
    assert_eq!(listing.lines().count(), holes, "{listing}");
    for line in listing.lines() {
        assert!(
            line.starts_with("A.java:") || line.starts_with("Odd\\u{1b}]0;title\\u{7}.java:"),
            "{line}"
        );
    }
    assert!(listing.contains("Odd\\u{1b}"), "{listing}");
}
