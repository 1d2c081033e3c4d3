//! End to end in a real terminal: `keyhole` (no arguments) in tmux, driven with send-keys and
//! read with capture-pane. Skips, saying so, where tmux is not installed.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

const SESSION: &str = "keyhole-tui-e2e";

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn screen() -> String {
    tmux(&["capture-pane", "-p", "-t", SESSION])
}

/// Wait until the screen shows `text`; panics with the screen after `limit`.
fn wait_for(text: &str, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if screen().contains(text) {
            return;
        }
        sleep(Duration::from_millis(200));
    }
    panic!("'{text}' never appeared; the screen:\n{}", screen());
}

/// Kills the session even when an assertion fails.
struct Session;

impl Drop for Session {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", SESSION]);
    }
}

#[test]
fn opens_the_sample_completes_shows_help_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed");
        return;
    }
    tmux(&["kill-session", "-t", SESSION]);
    let bin = env!("CARGO_BIN_EXE_keyhole");
    let scratch = tempfile::tempdir().unwrap();
    let dirs: Vec<String> = crate::common::dirs_env(scratch.path())
        .iter()
        .map(|(var, dir)| format!("{var}={}", dir.display()))
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
    let _session = Session;
    wait_for("candidates 73/73", Duration::from_secs(60));
    tmux(&["send-keys", "-t", SESSION, "r"]);
    wait_for("ES ", Duration::from_secs(60));
    tmux(&["send-keys", "-t", SESSION, "?"]);
    wait_for("any key closes", Duration::from_secs(10));
    // Any key closes the help; then q quits.
    tmux(&["send-keys", "-t", SESSION, "x"]);
    sleep(Duration::from_millis(300));
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
