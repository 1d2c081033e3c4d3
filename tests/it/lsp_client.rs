//! Language servers as a person chooses them (`--language-servers`, `KEYHOLE_LANGUAGE_SERVERS`,
//! `--language-server-timeout`), and the client bounded on every side against servers that
//! misbehave. The servers are small Python scripts written by each test; nothing on the
//! machine's `PATH` is asked.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proptest::prelude::*;

use crate::common::hermetic_env;

/// What every fake server starts with: reading and writing framed messages.
const FRAMING: &str = r#"import json, os, sys
def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line.strip() == b"":
            if length is not None:
                break
            continue
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(sys.stdin.buffer.read(length))
def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()
def answer(message, result):
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
"#;

/// A server that answers every request, typing every hole as `FakeServerType`.
const TYPING: &str = r#"
while True:
    m = read()
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        answer(m, {"capabilities": {}})
    elif m["method"] == "textDocument/hover":
        answer(m, {"contents": "(variable) __keyhole_hole: FakeServerType"})
    else:
        answer(m, None)
"#;

/// Writes the server `name` into `dir`: [`FRAMING`], then a line that leaves a file named
/// `started` beside it, then `body`.
fn fake_server(dir: &Path, name: &str, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let started = dir.join("started");
    let script = format!(
        "#!/usr/bin/env python3\n{FRAMING}open({:?}, 'a').close()\n{body}",
        started.to_str().unwrap()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A Python repository whose hole (`HOLE`, a return) both readings type.
fn python_repo(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("app.py"),
        "class Money:\n    cents: int\n\n\ndef make() -> Money:\n    return Money()\n\n\n\
         def keep():\n    kept = make()\n    return kept\n",
    )
    .unwrap();
    repo
}
const HOLE: &str = "app.py:6:12";
/// A value assigned to an unannotated name: a place the server is asked ChatLSP's generic
/// hole (a return takes the declared type from the syntax tree, so no server is asked there).
const SERVER_HOLE: &str = "app.py:10:12";

/// `PATH` with `dir` first.
fn path_with(dir: &Path) -> OsString {
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// `keyhole ARGS` with its directories under `scratch`, `PATH` as given and
/// `KEYHOLE_LANGUAGE_SERVERS` only where `servers` sets it.
fn keyhole(args: &[&str], scratch: &Path, path: &OsString, servers: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command
        .args(args)
        .envs(hermetic_env(scratch))
        .env("PATH", path)
        .env_remove("KEYHOLE_LANGUAGE_SERVERS");
    if let Some(servers) = servers {
        command.env("KEYHOLE_LANGUAGE_SERVERS", servers);
    }
    command.output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn servers_are_chosen_by_the_flag_or_the_variable_the_flag_winning() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = python_repo(scratch.path());
    let repo = repo.to_str().unwrap();
    // One server where `auto` looks, another only a command names.
    let on_path = scratch.path().join("on-path");
    let elsewhere = scratch.path().join("elsewhere");
    fake_server(&on_path, "pyright-langserver", TYPING);
    let named = fake_server(&elsewhere, "my-pyright", TYPING);
    let named_choice = format!("python={}", named.display());
    let path = path_with(&on_path);
    // Without the cache: a kept answer would start no server, and this is about which starts.
    let prompt = ["prompt", repo, SERVER_HOLE, "--id", "71", "--no-cache"];

    let typed_by_a_server = |flag: Option<&str>, variable: Option<&str>| {
        for dir in [&on_path, &elsewhere] {
            let _ = std::fs::remove_file(dir.join("started"));
        }
        let mut args = prompt.to_vec();
        if let Some(flag) = flag {
            args.extend(["--language-servers", flag]);
        }
        let output = keyhole(&args, scratch.path(), &path, variable);
        assert!(output.status.success(), "{}", text(&output));
        let typed = String::from_utf8_lossy(&output.stdout).contains("FakeServerType");
        let started = [&on_path, &elsewhere].map(|d| d.join("started").exists());
        (typed, started)
    };
    // Today's behaviour by default: the server on PATH.
    assert_eq!(typed_by_a_server(None, None), (true, [true, false]));
    assert_eq!(typed_by_a_server(Some("auto"), None), (true, [true, false]));
    // Off: the syntax tree's reading, no server started.
    assert_eq!(
        typed_by_a_server(Some("off"), None),
        (false, [false, false])
    );
    assert_eq!(
        typed_by_a_server(None, Some("off")),
        (false, [false, false])
    );
    // A command per language: that one, not the one on PATH.
    assert_eq!(
        typed_by_a_server(Some(&named_choice), None),
        (true, [false, true])
    );
    assert_eq!(
        typed_by_a_server(None, Some(&named_choice)),
        (true, [false, true])
    );
    // The flag wins over the variable.
    assert_eq!(
        typed_by_a_server(Some(&named_choice), Some("off")),
        (true, [false, true])
    );
    assert_eq!(
        typed_by_a_server(Some("off"), Some(&named_choice)),
        (false, [false, false])
    );
    // A command for another language only: none for Python.
    assert_eq!(
        typed_by_a_server(Some("typescript=/nowhere/tsls"), None),
        (false, [false, false])
    );
}

#[test]
fn a_bad_choice_of_servers_is_one_line_naming_its_key_and_exit_2() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = python_repo(scratch.path());
    let repo = repo.to_str().unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let prompt = ["prompt", repo, HOLE, "--id", "71"];
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (
            &[],
            Some("pyhton=/x"),
            "KEYHOLE_LANGUAGE_SERVERS: `pyhton=/x`",
        ),
        (&["--language-servers", "on"], None, "--language-servers"),
        (
            &["--language-server-timeout", "0"],
            None,
            "--language-server-timeout",
        ),
        (
            &["--language-server-timeout", "soon"],
            None,
            "--language-server-timeout",
        ),
    ];
    for (flags, variable, key) in cases {
        let args = [&prompt[..], flags].concat();
        let output = keyhole(&args, scratch.path(), &path, variable);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(key), "{stderr}");
    }
}

#[test]
fn the_timeout_flag_bounds_how_long_a_server_is_waited_for() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = python_repo(scratch.path());
    let bin = scratch.path().join("bin");
    // Answers `initialize`, then reads everything and answers nothing.
    let silent = "m = read()\nanswer(m, {'capabilities': {}})\nwhile True:\n    read()\n";
    let server = fake_server(&bin, "silent", silent);
    let choice = format!("python={}", server.display());
    let args = [
        "proposals",
        repo.to_str().unwrap(),
        HOLE,
        "--language-servers",
        &choice,
        "--language-server-timeout",
        "1",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let output = keyhole(&args, scratch.path(), &path, None);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("within 1 s"), "{}", text(&output));
}

// ----- Servers that misbehave -------------------------------------------------------------

/// How a bounded run of keyhole ended.
struct Bounded {
    /// `None` where it was killed for running past the deadline or the memory bound.
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The most resident memory seen, in MB.
    peak_mb: u64,
    why_killed: Option<String>,
}

/// A generous bound that proves a hang is gone, never a speed target.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(180);
/// A generous bound that proves memory growth is gone.
const MEMORY_MB: u64 = 500;

/// Resident memory of process `pid` in MB (0 once it is gone).
fn resident_mb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kb / 1024
}

/// `keyhole ARGS` as [`keyhole`] runs it, killed where it runs past [`DEADLINE`] or holds
/// more than [`MEMORY_MB`], its memory sampled as it runs.
fn keyhole_bounded(args: &[&str], scratch: &Path) -> Bounded {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .envs(hermetic_env(scratch))
        .env_remove("KEYHOLE_LANGUAGE_SERVERS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as it runs, so a full pipe never stalls it.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = std::time::Instant::now();
    let mut peak_mb = 0;
    let mut why_killed = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        peak_mb = peak_mb.max(resident_mb(child.id()));
        if peak_mb > MEMORY_MB {
            why_killed = Some(format!("it held {peak_mb} MB"));
        } else if started.elapsed() > DEADLINE {
            why_killed = Some(format!("it ran past {} s", DEADLINE.as_secs()));
        }
        if why_killed.is_some() {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Bounded {
        code: status.code().or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            status.signal().map(|s| 128 + s)
        }),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_mb,
        why_killed,
    }
}

/// A Python repository whose hole's file is larger than a pipe holds (the whole file goes to
/// the server), and the proposals command for its hole with `server` chosen for Python.
fn large_repo_and_args(scratch: &Path, server: &Path) -> Vec<String> {
    let repo = python_repo(scratch);
    let mut text = std::fs::read_to_string(repo.join("app.py")).unwrap();
    // Several pipe buffers (64 KiB each on Linux), under the size keyhole reads.
    for i in 0..4_000 {
        text.push_str(&format!(
            "\n\ndef helper_{i}(money: Money) -> int:\n    return money.cents + {i}\n"
        ));
    }
    std::fs::write(repo.join("app.py"), text).unwrap();
    [
        "proposals",
        repo.to_str().unwrap(),
        HOLE,
        "--language-servers",
        &format!("python={}", server.display()),
        "--language-server-timeout",
        "10",
    ]
    .map(String::from)
    .to_vec()
}

/// keyhole's proposals for the large repository's hole, `server` chosen for Python.
fn proposals_with(scratch: &Path, server: &Path) -> Bounded {
    let args = large_repo_and_args(scratch, server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    keyhole_bounded(&args, scratch)
}

/// [`proposals_with`] a fake server whose script ends with `body`, checked to have fallen
/// back to the syntax tree saying `why` ([`assert_fell_back`]).
fn falls_back(body: &str, why: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let server = fake_server(scratch.path(), "fake-server", body);
    assert_fell_back(&proposals_with(scratch.path(), &server), why);
}

/// The run finished with the candidate table, its typed-hole rows from the syntax tree, and
/// one line on standard error saying why the server was not used.
fn assert_fell_back(run: &Bounded, why: &str) {
    assert_eq!(run.why_killed, None, "{}", run.stderr);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.peak_mb <= MEMORY_MB, "{} MB", run.peak_mb);
    let typed = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("71 "))
        .unwrap_or_else(|| panic!("no row 71 in {}", run.stdout));
    assert!(typed.contains("yes"), "the syntax tree's reading: {typed}");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("fake-server"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(lines[0].contains(why), "{}", lines[0]);
    assert!(lines[0].contains("syntax tree"), "{}", lines[0]);
}

#[test]
fn a_server_that_stops_reading_is_stopped_at_its_deadline() {
    // Answers `initialize`, then never reads again.
    let silent = "m = read()\nanswer(m, {'capabilities': {}})\nimport time\ntime.sleep(3600)\n";
    falls_back(silent, "stopped reading");
}

#[test]
fn a_server_that_floods_while_not_reading_stays_within_memory() {
    // Answers `initialize`, then writes notifications and requests as fast as it can.
    let flood = r#"m = read()
answer(m, {'capabilities': {}})
note = json.dumps({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 4, "message": "x" * 4000}}).encode()
ask = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "workspace/configuration", "params": {"items": []}}).encode()
chunk = b"".join(b"Content-Length: %d\r\n\r\n" % len(b) + b for b in [note, ask] * 200)
while True:
    sys.stdout.buffer.write(chunk)
"#;
    falls_back(flood, "stopped reading");
}

#[test]
fn a_header_line_without_end_stays_within_memory() {
    let endless = "sys.stdout.buffer.write(b'Content-Length: ')\nwhile True:\n    sys.stdout.buffer.write(b'9' * 65536)\n";
    falls_back(endless, "a header line longer than");
}

#[test]
fn an_oversized_message_is_named_as_what_it_is() {
    let huge = "read()\nsys.stdout.buffer.write(b'Content-Length: 999999999999\\r\\n\\r\\n')\nsys.stdout.buffer.flush()\nwhile True:\n    read()\n";
    falls_back(huge, "a message of 999999999999 bytes");
}

#[test]
fn a_server_that_exits_at_once_is_one_line_and_every_other_candidate_is_shown() {
    let scratch = tempfile::tempdir().unwrap();
    let server = scratch.path().join("fake-server");
    std::fs::write(&server, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = proposals_with(scratch.path(), &server);
    assert_fell_back(&run, "exited");
    assert!(
        run.stdout.contains("\n 70  ProCC summary"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_server_that_fails_to_start_falls_back_to_the_syntax_tree() {
    let scratch = tempfile::tempdir().unwrap();
    let absent = scratch.path().join("fake-server");
    let run = proposals_with(scratch.path(), &absent);
    assert_fell_back(&run, "could not be started");
    // One that answers `initialize` with an error, the same way.
    let failing = fake_server(
        scratch.path(),
        "fake-server",
        "m = read()\nsend({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': 1, 'message': 'no project'}})\nwhile True:\n    read()\n",
    );
    let run = proposals_with(scratch.path(), &failing);
    assert_fell_back(&run, "no project");
}

/// Whether process `pid` is still running (a zombie is not).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn processes_a_server_starts_end_with_it() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("child.pid");
    // Starts a process of its own, then types holes.
    let body = format!(
        "import subprocess\nchild = subprocess.Popen(['sleep', '600'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nopen({:?}, 'w').write(str(child.pid))\n{TYPING}",
        pid_file.to_str().unwrap()
    );
    let server = fake_server(scratch.path(), "fake-server", &body);
    let repo = python_repo(scratch.path());
    let choice = format!("python={}", server.display());
    let output = keyhole(
        &[
            "prompt",
            repo.to_str().unwrap(),
            SERVER_HOLE,
            "--id",
            "71",
            "--language-servers",
            &choice,
        ],
        scratch.path(),
        &std::env::var_os("PATH").unwrap_or_default(),
        None,
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("FakeServerType"));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The group is ended as keyhole stops the server; give the kernel a moment.
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        !running(pid)
    });
    if !gone {
        // SAFETY: ends the process this test's server started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(gone, "the server's own process {pid} outlived keyhole");
}

#[test]
fn typescript_without_tsserver_is_named_with_the_install_that_works() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("ts");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("main.ts"),
        "interface Money { cents: number }\nfunction make(): Money {\n  return { cents: 1 };\n}\n",
    )
    .unwrap();
    // typescript-language-server as it answers where TypeScript has no tsserver.js.
    let bin = scratch.path().join("bin");
    let failing = "m = read()\nsend({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': 1, 'message': 'Could not find a valid TypeScript installation'}})\nwhile True:\n    read()\n";
    let server = fake_server(&bin, "typescript-language-server", failing);
    let choice = format!("typescript={}", server.display());
    let proposals = [
        "proposals",
        repo.to_str().unwrap(),
        "main.ts:3:10",
        "--language-servers",
        &choice,
    ];
    let run = keyhole_bounded(&proposals, scratch.path());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("typescript-language-server"));
    let line = line.unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains("tsserver.js") && line.contains("npm install typescript@5"),
        "{line}"
    );
    // With a TypeScript that has one beside the server, the server's own words.
    let lib = scratch.path().join("node_modules/typescript/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("tsserver.js"), "").unwrap();
    let run = keyhole_bounded(&proposals, scratch.path());
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("typescript-language-server"));
    let line = line.unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains("Could not find a valid TypeScript installation"),
        "{line}"
    );
    assert!(!line.contains("typescript@5"), "{line}");
}

// ----- Framing --------------------------------------------------------------------------------

/// One piece of what a server writes: a header line of some kind, or a body.
fn frame_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0usize..64).prop_map(|n| format!("Content-Length: {n}\r\n").into_bytes()),
        Just(b"content-length:7\n".to_vec()),
        Just(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"Content-Length: 99999999999999999999\r\n".to_vec()),
        Just(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}".to_vec()),
        (1usize..12_000).prop_map(|n| vec![b'x'; n]),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The framing's fuzz invariants on streams built of header lines and bodies, the shapes
    /// a byte-level fuzzer finds slowly: long lines, many lines, huge lengths, cut bodies.
    #[test]
    fn framing_invariants_hold_on_streams_of_headers_and_bodies(
        pieces in proptest::collection::vec(frame_piece(), 0..40)
    ) {
        crate::reliability_support::fuzz_checks::check_lsp_frames(&pieces.concat());
    }
}
