//! End to end in a real terminal: `keyhole` (no arguments) in tmux, driven with send-keys and
//! read with capture-pane. tmux is installed on first use where the tests run as root
//! (`common::tools`); elsewhere they fail saying so: these are the only tests of the real
//! terminal, and a skip would read as a pass.

use std::path::PathBuf;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

const SESSION: &str = "keyhole-tui-e2e";

/// tmux on a server of this test process's own (`-L`), so the tests never touch the user's
/// tmux sessions, nor those of a test run beside this one, which use the same session names.
fn tmux(args: &[&str]) -> String {
    crate::common::tools::require_tmux();
    let socket = format!("keyhole-tests-{}", std::process::id());
    let out = Command::new("tmux")
        .args(["-L", &socket])
        .args(args)
        .output()
        .expect("tmux is installed (the end-to-end UI tests drive keyhole in it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn screen() -> String {
    screen_of(SESSION)
}

fn screen_of(session: &str) -> String {
    tmux(&["capture-pane", "-p", "-t", session])
}

/// Wait until the screen shows `text`; panics with the screen after `limit`.
fn wait_for(text: &str, limit: Duration) {
    wait_in(SESSION, text, limit)
}

fn wait_in(session: &str, text: &str, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if screen_of(session).contains(text) {
            return;
        }
        sleep(Duration::from_millis(200));
    }
    panic!(
        "'{text}' never appeared; the screen:\n{}",
        screen_of(session)
    );
}

/// Kills the session even when an assertion fails.
struct Session(&'static str);

impl Drop for Session {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", self.0]);
    }
}

/// Run `script` in `sh` inside a fresh tmux session of `session` (80x24), with keyhole's
/// directories in `home`; the session is killed when the guard drops.
fn shell(session: &'static str, home: &std::path::Path, script: &str) -> Session {
    tmux(&["kill-session", "-t", session]);
    let env: Vec<String> = crate::common::hermetic_env(home)
        .iter()
        .map(|(var, value)| format!("{var}={}", value.to_string_lossy()))
        .collect();
    let script = format!(
        "{} {script}; code=$?; echo; echo exit=$code; sleep 600",
        env.join(" ")
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "80",
        "-y",
        "24",
        "sh",
        "-c",
        &script,
    ]);
    Session(session)
}

/// A temporary home for keyhole's directories with `repo/` holding `files` (name, text).
fn home_with_repo<N: AsRef<str>>(files: &[(N, String)]) -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let repo = home.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    for (name, text) in files {
        std::fs::write(repo.join(name.as_ref()), text).unwrap();
    }
    (home, repo)
}

#[test]
fn bad_start_up_input_is_one_line_and_exit_2_without_taking_the_screen() {
    let (home, repo) = home_with_repo(&[("A.java", "class A {\n}\n".into())]);
    let bin = env!("CARGO_BIN_EXE_keyhole");
    let repo = repo.display();
    for (args, says) in [
        (format!("{repo} A.java:9:1"), "A.java:9: line out of range"),
        (format!("{repo} B.java:1:1"), "B.java: no such source file"),
        (format!("{repo}/missing"), "missing: no such directory"),
        (format!("{repo} --theme neon"), "unknown theme 'neon'"),
    ] {
        let session = "keyhole-tui-bad-start";
        let _guard = shell(session, home.path(), &format!("{bin} {args}"));
        wait_in(session, "exit=", Duration::from_secs(30));
        let screen = screen_of(session);
        let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            2,
            "{args}: one line, then the exit code:\n{screen}"
        );
        assert!(lines[0].contains(says), "{args}: {screen}");
        assert_eq!(lines[1], "exit=2", "{args}");
    }
}

#[test]
fn quit_while_indexing_returns_to_the_shell() {
    // Enough files that indexing is still going when q arrives.
    let files: Vec<(String, String)> = (0..3000)
        .map(|n| {
            let body = format!("class C{n} {{\n  int f{n}() {{ return {n}; }}\n}}\n");
            (format!("C{n}.java"), body.repeat(20))
        })
        .collect();
    let (home, repo) = home_with_repo(&files);
    let bin = env!("CARGO_BIN_EXE_keyhole");
    let session = "keyhole-tui-quit";
    let _guard = shell(session, home.path(), &format!("{bin} {}", repo.display()));
    wait_in(session, "indexing", Duration::from_secs(30));
    tmux(&["send-keys", "-t", session, "q"]);
    wait_in(session, "exit=0", Duration::from_secs(30));
}

#[test]
fn opens_the_sample_completes_shows_help_and_quits() {
    tmux(&["kill-session", "-t", SESSION]);
    let bin = env!("CARGO_BIN_EXE_keyhole");
    let scratch = tempfile::tempdir().unwrap();
    let dirs: Vec<String> = crate::common::hermetic_env(scratch.path())
        .iter()
        .map(|(var, value)| format!("{var}={}", value.to_string_lossy()))
        .collect();
    let mut command = vec![
        "new-session",
        "-d",
        "-s",
        SESSION,
        "-x",
        "120",
        "-y",
        "40",
        "env",
    ];
    command.extend(dirs.iter().map(String::as_str));
    command.push(bin);
    tmux(&command);
    let _session = Session(SESSION);
    wait_for("candidates 73/73", Duration::from_secs(60));
    tmux(&["send-keys", "-t", SESSION, "r"]);
    wait_for("ES ", Duration::from_secs(60));
    // Shift-Tab (reported as BackTab with Shift held) goes back from the completions.
    tmux(&["send-keys", "-t", SESSION, "BTab"]);
    wait_for("┏ prompt", Duration::from_secs(10));
    tmux(&["send-keys", "-t", SESSION, "?"]);
    wait_for("Esc or ? closes", Duration::from_secs(10));
    // Other keys leave the help open; Esc closes it; then q quits.
    tmux(&["send-keys", "-t", SESSION, "x"]);
    sleep(Duration::from_millis(300));
    assert!(screen().contains("Esc or ? closes"), "{}", screen());
    tmux(&["send-keys", "-t", SESSION, "Escape"]);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) && screen().contains("Esc or ? closes") {
        sleep(Duration::from_millis(200));
    }
    assert!(!screen().contains("Esc or ? closes"), "help did not close");
    tmux(&["send-keys", "-t", SESSION, "q"]);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) && screen().contains("keyhole ") {
        sleep(Duration::from_millis(200));
    }
    assert!(
        !screen().contains("candidates 73/73"),
        "keyhole did not quit"
    );
}

#[test]
fn r_opens_a_recorded_completion_and_runs_the_plugins_prompt_beside_keyholes() {
    let cart =
        "class Cart {\n    int total;\n\n    int total() {\n        return total;\n    }\n}\n";
    let (home, repo) = home_with_repo(&[("Cart.java", cart.to_string())]);
    // What llama.vim sent with the cursor after `return ` (it sends curl's User-Agent).
    let dirs = keyhole::Dirs::under(home.path());
    let log_dir = keyhole::testing::proxy::log_dir(&dirs).unwrap();
    let log = keyhole::testing::proxy::RecordStore::open(
        &log_dir,
        keyhole::testing::proxy::DEFAULT_MAX_BYTES,
    )
    .unwrap();
    log.append(&keyhole::testing::proxy::Exchange {
        id: 0,
        at: 1_764_000_000.0,
        client: "127.0.0.1:50000".into(),
        agent: Some("curl/8.5.0".into()),
        method: "POST".into(),
        endpoint: "/infill".into(),
        upstream: "http://127.0.0.1:8080/".into(),
        status: 200,
        sent: keyhole::testing::proxy::Sent {
            prefix: Some("class Cart {\n    int total;\n\n    int total() {\n".into()),
            prompt: Some("        return ".into()),
            suffix: Some("total;\n    }\n}\n".into()),
            ..Default::default()
        },
        answered: keyhole::testing::proxy::Answered {
            text: "total;".into(),
            ..Default::default()
        },
        first_byte_ms: Some(5.0),
        total_ms: 9.0,
        cancelled: false,
        error: None,
        ..Default::default()
    })
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_keyhole");
    let session = "keyhole-tui-recorded";
    let _guard = shell(session, home.path(), &format!("{bin} {}", repo.display()));
    // Once the candidates are all built, the repository is open.
    wait_in(
        session,
        "retrieved candidates built",
        Duration::from_secs(120),
    );
    tmux(&["send-keys", "-t", session, "R"]);
    wait_in(session, "recorded requests", Duration::from_secs(30));
    wait_in(session, "curl", Duration::from_secs(30));
    tmux(&["send-keys", "-t", session, "Enter"]);
    wait_in(session, "Cart.java:5:16", Duration::from_secs(60));
    wait_in(session, "sent", Duration::from_secs(60));
    tmux(&["send-keys", "-t", session, "r"]);
    wait_in(session, "cand sent", Duration::from_secs(60));
    tmux(&["send-keys", "-t", session, "q"]);
    wait_in(session, "exit=0", Duration::from_secs(30));
}

/// keyhole's process id: the child of the shell the session `session` runs.
fn keyhole_pid(session: &str) -> String {
    let shell = tmux(&["display-message", "-p", "-t", session, "#{pane_pid}"]);
    let children = Command::new("ps")
        .args(["-o", "pid=", "--ppid", shell.trim()])
        .output()
        .unwrap();
    let children = String::from_utf8_lossy(&children.stdout).into_owned();
    children
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("no child of the shell {shell}"))
        .to_string()
}

#[test]
fn a_signal_from_outside_gives_the_terminal_back() {
    let (home, repo) =
        home_with_repo(&[("A.java", "class A {\n  int f() { return 1; }\n}\n".into())]);
    let bin = env!("CARGO_BIN_EXE_keyhole");
    // After keyhole ends: how it ended, and whether the terminal reads lines and echoes
    // again (`icanon echo`) or was left raw (`-icanon -echo`).
    let script = format!(
        "{bin} {}; echo ended=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo | tr '\\n' ' '",
        repo.display()
    );
    // A signal that ends the process ends it as the signal (128 + its number) after the
    // terminal is given back; SIGPIPE (a language server that went away) does not end the UI.
    for (signal, ended) in [
        ("TERM", "ended=143"),
        ("HUP", "ended=129"),
        ("INT", "ended=130"),
        ("PIPE", "ended=0"),
    ] {
        let session = "keyhole-tui-signal";
        let _guard = shell(session, home.path(), &script);
        wait_in(session, "A.java", Duration::from_secs(120));
        let pid = keyhole_pid(session);
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        if signal == "PIPE" {
            sleep(Duration::from_millis(500));
            tmux(&["send-keys", "-t", session, "q"]);
        }
        wait_in(session, "exit=", Duration::from_secs(30));
        let screen = screen_of(session);
        assert!(screen.contains(ended), "SIG{signal}: {screen}");
        // On main: `-icanon -echo`, the shell's terminal left raw.
        assert!(
            screen.contains("icanon echo") && !screen.contains("-icanon"),
            "SIG{signal}: {screen}"
        );
    }
}
