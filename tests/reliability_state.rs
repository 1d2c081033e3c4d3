//! The user's state survives a process killed (SIGKILL) while it writes the feedback log and
//! the online ranker.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keyhole::feedback::{Pick, append_pick};
use keyhole::rank::online::OnlineRanker;

/// Set in the child copy of this test binary: the directory to write into.
const WRITER_DIR: &str = "KEYHOLE_TEST_STATE_WRITER";

/// In the child: record picks and save the ranker as fast as possible until killed.
#[test]
fn state_writer() {
    let Some(dir) = std::env::var_os(WRITER_DIR) else {
        return;
    };
    let dir = Path::new(&dir);
    let mut ranker = OnlineRanker::default();
    for n in 0u64.. {
        let pick = Pick {
            hole: format!("A.java:{n}:1"),
            candidates: vec![6, 7, 62],
            prompt_hash: format!("{n:016x}"),
            completions: vec!["x".repeat(2000), "y".into()],
            picked: [6, 7, 62][(n % 3) as usize],
            unix_time: n,
        };
        append_pick(&dir.join("feedback.jsonl"), &pick).unwrap();
        ranker.record_pick(&pick.candidates, pick.picked);
        ranker.save(&dir.join("ranker.json")).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn kill_dash_nine_while_writing_picks_and_the_ranker_loses_nothing_finished() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "state_writer", "--nocapture"])
        .env(WRITER_DIR, dir.path())
        .spawn()
        .unwrap();
    let log = dir.path().join("feedback.jsonl");
    let started = Instant::now();
    while std::fs::read(&log).map_or(0, |b| b.len()) < 200_000
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, in the middle of a write or a save
    child.wait().unwrap();

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let complete = lines.iter().filter(|l| l.ends_with('\n')).count();
    assert!(complete >= 50, "{complete} picks written");
    // Every finished line parses; at most the last, unfinished one does not.
    for line in lines.iter().filter(|l| l.ends_with('\n')) {
        serde_json::from_str::<Pick>(line).unwrap();
    }
    let (ranker, warning) = OnlineRanker::load(&dir.path().join("ranker.json"));
    assert_eq!(warning, None, "the ranker file is always whole");
    assert_ne!(ranker, OnlineRanker::default());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leftovers.len() <= 3, "no pile of temp files: {leftovers:?}");
}
