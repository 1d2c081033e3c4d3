//! Label files survive a killed run: nothing finished is lost or redone.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keyhole::CandidateId;
use keyhole::Fidelity;
use keyhole::{testing::eval::LabelRow, testing::eval::WRITTEN_ROWS};
use keyhole::{testing::eval::labels::LabelFile, testing::eval::labels::read_dir};

fn row(hole: &str, id: usize) -> LabelRow {
    LabelRow {
        hole_id: hole.to_string(),
        repository: "r".into(),
        file: "A.java".into(),
        line: 1,
        column: 1,
        proposal_id: CandidateId::nth(id),
        fidelity: Fidelity::Paper,
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
        retrieval_score: None,
        retrieval_jaccard: None,
        why_not: None,
        model_room: None,
    }
}

fn hole(name: &str) -> Vec<LabelRow> {
    (0..WRITTEN_ROWS).map(|id| row(name, id)).collect()
}

#[test]
fn an_interrupted_write_is_dropped_and_the_hole_redone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let (mut labels, rows) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
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

    let (labels, rows) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
    assert_eq!(rows.len(), 2 * WRITTEN_ROWS);
    assert!(labels.is_done("r/A.java:1:1") && labels.is_done("r/A.java:2:1"));
    assert!(!labels.is_done("r/A.java:3:1"));
    assert_eq!(
        read_dir(dir.path()).unwrap(),
        rows,
        "the file itself was repaired"
    );
}

#[test]
fn a_label_file_of_an_older_version_with_fewer_rows_per_hole_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    // Before RepoCoder and ProCC, a hole had 66 rows (ids 0-65), and rows had no retrieval
    // fields at all.
    let mut text = String::new();
    for name in ["r/A.java:1:1", "r/A.java:2:1"] {
        for r in &hole(name)[..66] {
            let mut value = serde_json::to_value(r).unwrap();
            for key in ["retrieval_score", "retrieval_jaccard", "why_not"] {
                value.as_object_mut().unwrap().remove(key);
            }
            text.push_str(&format!("{value}\n"));
        }
    }
    std::fs::write(&path, &text).unwrap();
    assert_eq!(read_dir(dir.path()).unwrap().len(), 2 * 66, "read whole");
    let (labels, rows) = LabelFile::open(&path, 66).unwrap();
    assert_eq!(rows.len(), 2 * 66);
    assert!(labels.is_done("r/A.java:1:1") && labels.is_done("r/A.java:2:1"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "left as it was"
    );
}

#[test]
fn a_hole_whose_rows_record_a_failed_request_is_no_label_and_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    // Older versions wrote a refused request as a row with an error.
    let mut failed = hole("r/A.java:1:1");
    failed[7].error = Some("status 401".into());
    let (mut labels, _) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
    labels.append_hole(&failed).unwrap();
    labels.append_hole(&hole("r/A.java:2:1")).unwrap();
    drop(labels);
    let (mut labels, rows) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
    assert!(!labels.is_done("r/A.java:1:1"));
    assert!(rows.iter().all(|r| r.hole_id == "r/A.java:2:1"));
    labels.append_hole(&hole("r/A.java:1:1")).unwrap();
    drop(labels);
    let rows = read_dir(dir.path()).unwrap();
    assert_eq!(rows.len(), 2 * WRITTEN_ROWS);
    assert!(rows.iter().all(|r| r.error.is_none()));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.lines().count(),
        3 * WRITTEN_ROWS,
        "the old rows stay in the file"
    );
}

#[test]
fn a_last_row_without_its_line_break_does_not_run_into_the_next_hole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let (mut labels, _) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
    labels.append_hole(&hole("r/A.java:1:1")).unwrap();
    drop(labels);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.trim_end()).unwrap();
    let (mut labels, rows) = LabelFile::open(&path, WRITTEN_ROWS).unwrap();
    assert_eq!(rows.len(), WRITTEN_ROWS);
    labels.append_hole(&hole("r/A.java:2:1")).unwrap();
    drop(labels);
    assert_eq!(read_dir(dir.path()).unwrap().len(), 2 * WRITTEN_ROWS);
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
            .envs(crate::common::hermetic_env(out.path()))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let mut child = keyhole(&args).spawn().unwrap();
    let started = Instant::now();
    while label_rows(&labels) < 3 * WRITTEN_ROWS && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = std::fs::read_to_string(&labels).unwrap();
    let finished_before: Vec<&str> = before
        .lines()
        .filter(|l| serde_json::from_str::<LabelRow>(l).is_ok())
        .collect();
    assert!(finished_before.len() >= 3 * WRITTEN_ROWS);

    let status = keyhole(&args).status().unwrap();
    assert!(status.success());
    let after = std::fs::read_to_string(&labels).unwrap();
    let rows: Vec<LabelRow> = after
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut per_hole: HashMap<&str, Vec<usize>> = HashMap::new();
    for r in &rows {
        per_hole
            .entry(&r.hole_id)
            .or_default()
            .push(r.proposal_id.index());
    }
    assert_eq!(per_hole.len(), 60, "every hole, once");
    assert!(
        per_hole.values().all(|ids| ids.len() == WRITTEN_ROWS),
        "no hole redone or half-written"
    );
    let complete_before = (finished_before.len() / WRITTEN_ROWS) * WRITTEN_ROWS;
    let kept: Vec<&str> = after.lines().take(complete_before).collect();
    assert_eq!(
        kept,
        finished_before[..complete_before],
        "finished rows are kept as they were"
    );
    assert!(out.path().join("report.md").exists());
}

#[test]
fn the_report_reads_a_repaired_label_file_as_the_label_reader_does() {
    use keyhole::testing::eval::report;
    use keyhole::{testing::eval::labels::LabelIndex, testing::eval::labels::read_file};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let lines = |rows: &[LabelRow]| -> String {
        rows.iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect()
    };
    let mut failed = hole("r/A.java:4:1");
    failed[3].error = Some("status 500".into());
    // Hole 1 written twice: the copy that counts is the first, so the second differs.
    let mut again = hole("r/A.java:1:1");
    again.iter_mut().for_each(|r| r.success = !r.success);
    let mut text = lines(&hole("r/A.java:1:1"));
    text += &lines(&hole("r/A.java:3:1")[..10]);
    text += "{\"hole_id\":\"r/A.ja\n";
    text += &lines(&hole("r/A.java:2:1"));
    text += &lines(&again);
    text += &lines(&failed);
    std::fs::write(&path, &text).unwrap();

    let index = LabelIndex::read(std::slice::from_ref(&path)).unwrap();
    let streamed = report::build_from(&index, &[], 7).unwrap();
    let read = report::build(&read_file(&path).unwrap(), &[], 7);
    assert_eq!(streamed.summary.holes, 2, "holes 1 and 2, once each");
    assert_eq!(streamed.summary.rows, 2 * WRITTEN_ROWS);
    assert_eq!(
        serde_json::to_string(&streamed).unwrap(),
        serde_json::to_string(&read).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "left as it was"
    );
}
