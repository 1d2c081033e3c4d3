//! Language servers as a person chooses them (`--language-servers`, `KEYHOLE_LANGUAGE_SERVERS`,
//! `--language-server-timeout`), and the client bounded on every side against servers that
//! misbehave. The servers are small Python scripts written by each test; nothing on the
//! machine's `PATH` is asked.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// A Python repository whose hole (`HOLE`) both readings type.
fn python_repo(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        repo.join("app.py"),
        "class Money:\n    cents: int\n\n\ndef make() -> Money:\n    return Money()\n",
    )
    .unwrap();
    repo
}
const HOLE: &str = "app.py:6:12";

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
    std::fs::create_dir_all(&on_path).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    fake_server(&on_path, "pyright-langserver", TYPING);
    let named = fake_server(&elsewhere, "my-pyright", TYPING);
    let named_choice = format!("python={}", named.display());
    let path = path_with(&on_path);
    let prompt = ["prompt", repo, HOLE, "--id", "71"];

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
    std::fs::create_dir_all(&bin).unwrap();
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
    assert!(
        text(&output).contains("did not answer `textDocument/hover` within 1 s"),
        "{}",
        text(&output)
    );
}
