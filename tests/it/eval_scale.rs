//! Label generation at scale through the real binary: shards of one run (`--shard I/N`) and
//! `keyhole eval merge`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::reliability_support::{keyhole, one_line_error};
use keyhole::eval::LabelRow;

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

/// Holes in the runs below: enough for three shards of several holes each.
const HOLES: &str = "10";

/// `keyhole eval` of the sample with the embedded backend into `scratch/out`, with `extra`
/// flags; checked to succeed.
fn eval(scratch: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let dir = scratch.join(out);
    let sample = sample();
    let mut args = vec![
        "eval",
        &sample,
        "--holes",
        HOLES,
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    let output = keyhole(scratch, &args, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir
}

fn rows(dir: &Path) -> Vec<LabelRow> {
    keyhole::eval::labels::read_dir(&dir.join("labels")).unwrap()
}

fn holes(dir: &Path) -> BTreeSet<String> {
    rows(dir).into_iter().map(|r| r.hole_id).collect()
}

fn merge(scratch: &Path, dirs: &[&Path], out: &str) -> std::process::Output {
    let out = scratch.join(out);
    let mut args = vec!["eval", "merge", "--out", out.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    keyhole(scratch, &args, &[])
}

#[test]
fn shards_split_the_holes_and_merge_into_the_report_of_one_run() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let whole = eval(scratch, "whole", &[]);
    let shards: Vec<PathBuf> = (1..=3)
        .map(|i| {
            eval(
                scratch,
                &format!("shard{i}"),
                &["--shard", &format!("{i}/3")],
            )
        })
        .collect();

    // Disjoint, and together the unsharded run's holes.
    let all = holes(&whole);
    assert_eq!(all.len(), 10);
    let parts: Vec<BTreeSet<String>> = shards.iter().map(|d| holes(d)).collect();
    for (i, a) in parts.iter().enumerate() {
        assert!(!a.is_empty(), "shard {} has holes", i + 1);
        for b in &parts[i + 1..] {
            assert!(a.is_disjoint(b), "{a:?} and {b:?} overlap");
        }
    }
    let union: BTreeSet<String> = parts.iter().flatten().cloned().collect();
    assert_eq!(union, all);
    let settings = std::fs::read_to_string(shards[1].join("settings.json")).unwrap();
    assert!(settings.contains("\"shard\": \"2/3\""), "{settings}");

    // Given in any order, the shards merge into the report the unsharded run wrote.
    let refs: Vec<&Path> = shards.iter().rev().map(PathBuf::as_path).collect();
    let output = merge(scratch, &refs, "merged");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = scratch.join("merged");
    for file in ["report.md", "report.json", "compositions.json"] {
        assert_eq!(
            std::fs::read_to_string(merged.join(file)).unwrap(),
            std::fs::read_to_string(whole.join(file)).unwrap(),
            "{file}"
        );
    }
    let key = |r: &LabelRow| (r.hole_id.clone(), r.proposal_id, r.prediction.clone());
    let merged_rows: Vec<_> = rows(&merged).iter().map(key).collect();
    let whole_rows: Vec<_> = rows(&whole).iter().map(key).collect();
    assert_eq!(merged_rows, whole_rows, "the same rows in the same order");
    let settings = std::fs::read_to_string(merged.join("settings.json")).unwrap();
    assert!(settings.contains("\"shard\": \"1/1\""), "{settings}");

    // Missing a shard is allowed, and said.
    let output = merge(scratch, &[&shards[0], &shards[2]], "partial");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("shards 2/3 are not among them"), "{stderr}");
    assert_eq!(holes(&scratch.join("partial")).len(), 10 - parts[1].len());

    // The merged directory already has rows: merging into it again would mix them.
    let err = one_line_error(&merge(scratch, &[&shards[1]], "merged"));
    assert!(err.contains("already holds label rows"), "{err}");
}

#[test]
fn merge_refuses_directories_that_are_not_shards_of_one_run() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let one = eval(scratch, "one", &["--shard", "1/2"]);
    let other_seed = eval(scratch, "seed", &["--shard", "2/2", "--seed", "10"]);
    let err = one_line_error(&merge(scratch, &[&one, &other_seed], "out"));
    assert!(
        err.contains("seed") && err.contains("--seed 9, not 10"),
        "{err}"
    );
    assert!(!scratch.join("out").exists(), "nothing written");

    let other_count = eval(scratch, "count", &["--shard", "2/3"]);
    let err = one_line_error(&merge(scratch, &[&one, &other_count], "out"));
    assert!(err.contains("--shard 1/2, not 2/3"), "{err}");

    // The same shard twice, and a whole run with one of its shards.
    let again = eval(scratch, "again", &["--shard", "1/2"]);
    let err = one_line_error(&merge(scratch, &[&one, &again], "out"));
    assert!(err.contains("are both shard 1/2"), "{err}");
    let whole = eval(scratch, "whole", &["--shard", "1/1"]);
    let half = eval(scratch, "half", &["--shard", "1/1", "--seed", "9"]);
    let err = one_line_error(&merge(scratch, &[&whole, &half], "out"));
    assert!(err.contains("are both shard 1/1"), "{err}");

    // Shards whose label files overlap (one copied into another) are no shards of one run.
    let two = eval(scratch, "two", &["--shard", "2/2"]);
    let copied = std::fs::read(one.join("labels/sample-repo.jsonl")).unwrap();
    std::fs::write(two.join("labels/copied.jsonl"), copied).unwrap();
    let err = one_line_error(&merge(scratch, &[&one, &two], "out"));
    assert!(err.contains("both label sample-repo/"), "{err}");
    assert!(!scratch.join("out").exists(), "nothing written");

    // A shard's directory resumed as another shard would mix their rows.
    let dir = one.to_str().unwrap();
    let output = keyhole(
        scratch,
        &[
            "eval",
            &sample(),
            "--holes",
            HOLES,
            "--out",
            dir,
            "--shard",
            "2/2",
        ],
        &[],
    );
    let err = one_line_error(&output);
    assert!(err.contains("--shard 1/2, not 2/2"), "{err}");
}
