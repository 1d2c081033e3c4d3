//! Label files survive a killed run: nothing finished is lost or redone.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keyhole::eval::labels::{LabelFile, read_dir};
use keyhole::eval::{LabelRow, ROWS_PER_HOLE};

fn row(hole: &str, id: usize) -> LabelRow {
    LabelRow {
        hole_id: hole.to_string(),
        repository: "r".into(),
        file: "A.java".into(),
        line: 1,
        column: 1,
        proposal_id: id,
        applicable: true,
        success: id.is_multiple_of(2),
        edit_similarity: 1.0,
        edit_distance: 0,
        prediction: "x".into(),
        target: "x".into(),
        proposal_tokens: 3,
        default_tokens: 4,
        proposal_truncated: false,
        default_truncated: false,
        backend: "embedded".into(),
        error: None,
        bm25: None,
    }
}

fn hole(name: &str) -> Vec<LabelRow> {
    (0..ROWS_PER_HOLE).map(|id| row(name, id)).collect()
}

#[test]
fn an_interrupted_write_is_dropped_and_the_hole_redone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let (mut labels, rows) = LabelFile::open(&path).unwrap();
    assert!(rows.is_empty());
    labels.append_hole(&hole("r/A.java:1:1")).unwrap();
    labels.append_hole(&hole("r/A.java:2:1")).unwrap();
    drop(labels);
    // A kill in the middle of the third hole's write: some rows, then half a line.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    for r in &hole("r/A.java:3:1")[..10] {
        writeln!(file, "{}", serde_json::to_string(r).unwrap()).unwrap();
    }
    write!(file, "{{\"hole_id\":\"r/A.ja").unwrap();
    drop(file);

    let (labels, rows) = LabelFile::open(&path).unwrap();
    assert_eq!(rows.len(), 2 * ROWS_PER_HOLE);
    assert!(labels.is_done("r/A.java:1:1") && labels.is_done("r/A.java:2:1"));
    assert!(!labels.is_done("r/A.java:3:1"));
    assert_eq!(
        read_dir(dir.path()).unwrap(),
        rows,
        "the file itself was repaired"
    );
}

fn label_rows(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn kill_dash_nine_in_the_middle_of_a_run_loses_nothing() {
    let out = tempfile::tempdir().unwrap();
    let sample = format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"));
    let args = [
        "eval",
        sample.as_str(),
        "--holes",
        "60",
        "--out",
        out.path().to_str().unwrap(),
    ];
    let labels = out.path().join("labels/sample-repo.jsonl");
    let keyhole = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keyhole"));
        c.args(args)
            .env("KEYHOLE_CACHE_DIR", out.path().join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let mut child = keyhole(&args).spawn().unwrap();
    let started = Instant::now();
    while label_rows(&labels) < 3 * ROWS_PER_HOLE && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = std::fs::read_to_string(&labels).unwrap();
    let finished_before: Vec<&str> = before
        .lines()
        .filter(|l| serde_json::from_str::<LabelRow>(l).is_ok())
        .collect();
    assert!(finished_before.len() >= 3 * ROWS_PER_HOLE);

    let status = keyhole(&args).status().unwrap();
    assert!(status.success());
    let after = std::fs::read_to_string(&labels).unwrap();
    let rows: Vec<LabelRow> = after
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut per_hole: HashMap<&str, Vec<usize>> = HashMap::new();
    for r in &rows {
        per_hole.entry(&r.hole_id).or_default().push(r.proposal_id);
    }
    assert_eq!(per_hole.len(), 60, "every hole, once");
    assert!(
        per_hole.values().all(|ids| ids.len() == ROWS_PER_HOLE),
        "no hole redone or half-written"
    );
    let complete_before = (finished_before.len() / ROWS_PER_HOLE) * ROWS_PER_HOLE;
    let kept: Vec<&str> = after.lines().take(complete_before).collect();
    assert_eq!(
        kept,
        finished_before[..complete_before],
        "finished rows are kept as they were"
    );
    assert!(out.path().join("report.md").exists());
}
