//! `keyhole eval --candidates`: a run completes only the candidates it names (so that a slow
//! model can evaluate a subset), says so in its report, and keeps its set across resumes.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::{self, keyhole};

const NOT_SELECTED: &str = keyhole::testing::eval::runner::NOT_SELECTED;

fn rows(out: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("labels/sample-repo.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn only_the_named_candidates_are_completed_and_the_report_names_the_set() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let out_arg = out.to_string_lossy().into_owned();
    let args = ["eval", &common::sample(), "--holes", "6", "--out", &out_arg];
    let run = |set: &str| {
        let mut all = args.to_vec();
        all.extend(["--candidates", set]);
        keyhole(&all, scratch.path())
    };
    common::ok(run("7,63-66"));

    let rows = rows(&out);
    assert_eq!(rows.len(), 6 * 73, "every candidate still has its row");
    let chosen: BTreeSet<u64> = [7, 62, 63, 64, 65, 66].into();
    for row in &rows {
        let id = row["proposal_id"].as_u64().unwrap();
        let left_out = row["why_not"].as_str() == Some(NOT_SELECTED);
        assert_eq!(left_out, !chosen.contains(&id), "{row}");
        if left_out {
            assert_eq!(row["applicable"], false);
            assert_eq!(row["prediction"], "");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Candidate set: 7,63-66"), "{report}");
    assert!(
        !report.contains(NOT_SELECTED),
        "left-out candidates are named once"
    );

    // Resuming into the same directory with another set would mix two protocols.
    let err = crate::reliability_support::one_line_error(&run("top:3"));
    assert!(err.contains("candidates"), "{err}");
}

#[test]
fn top_n_takes_the_rankers_best_n_of_rlpgs_candidates_per_hole() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let out_arg = out.to_string_lossy().into_owned();
    common::ok(keyhole(
        &[
            "eval",
            &common::sample(),
            "--holes",
            "6",
            "--out",
            &out_arg,
            // An empty list completes no compositions (it was a parse error).
            "--compose",
            "",
            "--candidates",
            "top:2",
        ],
        scratch.path(),
    ));
    let rows = rows(&out);
    for hole in rows.chunks(73) {
        let completed: Vec<u64> = hole
            .iter()
            .filter(|r| r["why_not"].as_str() != Some(NOT_SELECTED))
            .map(|r| r["proposal_id"].as_u64().unwrap())
            .collect();
        assert!(completed.contains(&62), "{completed:?}");
        assert!(completed.iter().all(|&id| id <= 62), "{completed:?}");
        assert!((1..=3).contains(&completed.len()), "{completed:?}");
    }
}

#[test]
fn a_run_stopped_part_way_is_reported_without_labelling_more() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let out_arg = out.to_string_lossy().into_owned();
    let sample = common::sample();
    let args = [
        "eval",
        &sample,
        "--holes",
        "6",
        "--compose",
        "",
        "--out",
        &out_arg,
    ];
    common::ok(keyhole(&args, scratch.path()));
    // As if the run had stopped after four holes: their rows are all there is.
    let kept: Vec<String> = rows(&out)
        .iter()
        .map(Value::to_string)
        .take(4 * 73)
        .collect();
    let labels = out.join("labels/sample-repo.jsonl");
    std::fs::write(&labels, kept.join("\n") + "\n").unwrap();
    std::fs::remove_file(out.join("report.md")).unwrap();

    let mut report_only = args.to_vec();
    report_only.push("--report-only");
    // Reported, and said in the exit code and its last line: two holes have no rows.
    crate::reliability_runs::incomplete(&keyhole(&report_only, scratch.path()), 2, 6);
    assert_eq!(rows(&out).len(), 4 * 73, "nothing labelled");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("4 holes from 292 label rows"), "{report}");
}
