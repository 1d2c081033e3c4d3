//! What is costly to rebuild (the search indexes, the embedded model's statistics) is
//! cached beside the repository index: a warm run answers as a cold one, and a changed file
//! makes the caches stale.

use std::path::Path;

use serde_json::Value;

use crate::common::{self, copy_sample, keyhole, ok};
use keyhole::sample::DEMO_HOLE;

/// The derived caches in `scratch`'s cache directory (`<index>.search.bin` and
/// `<index>.embedded-model.bin`), by name.
fn derived_caches(scratch: &Path) -> Vec<String> {
    let dir = scratch.join("cache/index");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| Some(name.strip_suffix(".bin")?.split_once('.')?.1.to_string()))
        .collect();
    names.sort();
    names
}

fn proposals(repo: &str, scratch: &Path, extra: &[&str]) -> String {
    let args = [&["proposals", repo, DEMO_HOLE, "--json"][..], extra].concat();
    String::from_utf8(ok(keyhole(&args, scratch)).stdout).unwrap()
}

#[test]
fn a_warm_run_answers_as_a_cold_one_and_as_one_without_a_cache() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = common::sample();
    let cold = proposals(&repo, scratch.path(), &[]);
    assert_eq!(
        derived_caches(scratch.path()),
        ["embedded-model", "search"],
        "proposals builds both and keeps them"
    );
    let warm = proposals(&repo, scratch.path(), &[]);
    assert_eq!(cold, warm);
    let uncached = tempfile::tempdir().unwrap();
    assert_eq!(cold, proposals(&repo, uncached.path(), &["--no-cache"]));
    assert!(!uncached.path().join("cache").exists());
}

#[test]
fn a_prompt_of_a_proposal_builds_no_retrieval_state_or_model() {
    let scratch = tempfile::tempdir().unwrap();
    ok(keyhole(
        &["prompt", &common::sample(), DEMO_HOLE, "--id", "62"],
        scratch.path(),
    ));
    assert!(derived_caches(scratch.path()).is_empty());
}

/// The files candidate `id` of `proposals --json` output draws on.
fn files_of(json: &str, id: u64) -> Vec<String> {
    let json: Value = serde_json::from_str(json).unwrap();
    let row = json["retrieved"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap()
        .clone();
    serde_json::from_value(row["files"].clone()).unwrap()
}

#[test]
fn a_changed_file_makes_the_cached_windows_and_model_stale() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("shop");
    copy_sample(&repo);
    let repo_arg = repo.to_string_lossy().into_owned();
    let before = proposals(&repo_arg, scratch.path(), &[]);
    let mirror = "src/main/java/com/acme/shop/util/TextUtil.java";
    assert!(!files_of(&before, 66).contains(&mirror.to_string()));

    // Another file now holds the code around the hole, so RepoCoder finds its windows there.
    let hole_file = DEMO_HOLE.split(':').next().unwrap();
    let text = std::fs::read_to_string(repo.join(hole_file)).unwrap();
    std::fs::write(repo.join(mirror), text).unwrap();
    let after = proposals(&repo_arg, scratch.path(), &[]);
    assert!(
        files_of(&after, 66).contains(&mirror.to_string()),
        "{:?}",
        files_of(&after, 66)
    );
    let uncached = tempfile::tempdir().unwrap();
    assert_eq!(
        after,
        proposals(&repo_arg, uncached.path(), &["--no-cache"])
    );
}

#[test]
fn an_edited_and_a_removed_file_update_the_cached_indexes_as_a_fresh_build_would() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("shop");
    copy_sample(&repo);
    let repo_arg = repo.to_string_lossy().into_owned();
    proposals(&repo_arg, scratch.path(), &[]);
    let edited = repo.join("src/main/java/com/acme/shop/model/Customer.java");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replacen('{', "{\n    private int edited;", 1)).unwrap();
    std::fs::remove_file(repo.join("src/main/java/com/acme/shop/util/TextUtil.java")).unwrap();
    let after = proposals(&repo_arg, scratch.path(), &[]);
    let uncached = tempfile::tempdir().unwrap();
    assert_eq!(
        after,
        proposals(&repo_arg, uncached.path(), &["--no-cache"])
    );
}

#[test]
fn processes_sharing_the_caches_while_a_file_changes_leave_them_whole() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("shop");
    copy_sample(&repo);
    let repo_arg = repo.to_string_lossy().into_owned();
    let edited = repo.join("src/main/java/com/acme/shop/model/Customer.java");
    let text = std::fs::read_to_string(&edited).unwrap();
    for round in 0..3 {
        // Each round three processes at once read, update and write the same caches.
        let running: Vec<_> = (0..3)
            .map(|_| {
                std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
                    .args(["proposals", &repo_arg, DEMO_HOLE, "--json"])
                    .envs(common::hermetic_env(scratch.path()))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for process in running {
            let output = process.wait_with_output().unwrap();
            assert!(output.status.success());
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!stderr.contains("rebuilding"), "round {round}: {stderr}");
        }
        let changed = text.replacen('{', &format!("{{\n    private int edited{round};"), 1);
        let tmp = repo.join("Customer.tmp");
        std::fs::write(&tmp, changed).unwrap();
        std::fs::rename(tmp, &edited).unwrap();
    }
    // Every cache file is whole: its checksum is that of what follows it.
    let caches = std::fs::read_dir(scratch.path().join("cache/index")).unwrap();
    for path in caches.map(|e| e.unwrap().path()).filter(|p| p.is_file()) {
        let bytes = std::fs::read(&path).unwrap();
        let (sum, payload) = bytes.split_at(32);
        let seal = keyhole::testing::repo::cache_seal(payload);
        assert_eq!(seal, sum, "{}", path.display());
    }
    let output = ok(keyhole(
        &["proposals", &repo_arg, DEMO_HOLE, "--json"],
        scratch.path(),
    ));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("rebuilding"));
    let uncached = tempfile::tempdir().unwrap();
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        proposals(&repo_arg, uncached.path(), &["--no-cache"])
    );
}
