//! Shared fixtures: the bundled sample repository and helpers to build proposals on it.
#![allow(dead_code)]

pub mod tools;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

use keyhole::Fidelity;
use keyhole::Hole;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::candidate;
use keyhole::testing::context::HoleRequest;
use keyhole::{Prompt, SegmentKind, testing::compose};
use keyhole::{ProposalContext, testing::context::proposals};

/// Fresh config, cache and data directories for one test: keep the `TempDir` alive as long as
/// the directories are used.
pub fn scratch_dirs() -> (tempfile::TempDir, keyhole::Dirs) {
    let root = tempfile::tempdir().unwrap();
    let dirs = keyhole::Dirs::under(root.path());
    (root, dirs)
}

pub const SHOP: &str = "src/main/java/com/acme/shop/";

pub fn sample_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo")
}

/// The sample repository's path as an argument.
pub fn sample() -> String {
    sample_path().to_string_lossy().into_owned()
}

/// Copy the sample repository to `dest`.
pub fn copy_sample(dest: &Path) {
    let status = Command::new("cp")
        .args(["-r", &sample(), dest.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The environment of a `keyhole` process under test: its own config, cache and data
/// directories under `scratch`, never the user's, and no language server from the machine's
/// `PATH` (a test of a server names the pinned ones: [`tools::language_servers`]).
pub fn hermetic_env(scratch: &Path) -> [(&'static str, OsString); 4] {
    [
        ("KEYHOLE_CONFIG_DIR", scratch.join("config").into()),
        ("KEYHOLE_CACHE_DIR", scratch.join("cache").into()),
        ("KEYHOLE_DATA_DIR", scratch.join("data").into()),
        ("KEYHOLE_LANGUAGE_SERVERS", "off".into()),
    ]
}

/// `keyhole ARGS` with its directories under `scratch`.
pub fn keyhole(args: &[&str], scratch: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .envs(hermetic_env(scratch))
        .output()
        .unwrap()
}

/// `output`, checked to come from a command that succeeded.
pub fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The sample repository, indexed once per test binary, without a cache.
pub static SAMPLE: LazyLock<RepoIndex> =
    LazyLock::new(|| RepoIndex::open(&sample_path(), None).expect("sample opens"));

/// The hole at `FILE:LINE:COL`, FILE relative to the shop package directory.
pub fn hole(spec: &str) -> Hole {
    Hole::parse(&SAMPLE, &format!("{SHOP}{spec}")).expect("hole in range")
}

/// Proposal `id` for `hole`, composed into a prompt of `budget` code tokens.
pub fn proposal(hole: &Hole, id: usize, budget: usize) -> (ProposalContext, Prompt) {
    let tokenizer = TokenizerKind::Code.tokenizer();
    let spec = candidate::proposal_specs()[id];
    let req = HoleRequest {
        index: &SAMPLE,
        hole,
        tokenizer,
        allocation: compose::proposal_allocation(budget, spec.share),
        fidelity: Fidelity::Paper,
        seed: 9,
    };
    let context = proposals::build(spec, &req);
    let prompt = compose::compose(&SAMPLE, hole, &context, tokenizer, budget);
    (context, prompt)
}

/// The proposal part of the composed prompt ("" when not applicable).
pub fn proposal_text(hole: &Hole, id: usize, budget: usize) -> String {
    let (_, prompt) = proposal(hole, id, budget);
    prompt
        .segments
        .iter()
        .find(|s| matches!(s.kind, SegmentKind::Proposal { .. }))
        .map(|s| s.text.text.clone())
        .unwrap_or_default()
}

/// File names (no directories) of the files a proposal ranked, best first.
pub fn ranked_names(hole: &Hole, id: usize) -> Vec<String> {
    let (context, _) = proposal(hole, id, 4072);
    context
        .ranked_files
        .iter()
        .map(|&f| SAMPLE.files[f].stem().to_string())
        .collect()
}

/// The repository at `root` indexed (no cache) on another thread: `None` where that did not
/// finish within minutes, which is a hang, not a slow machine.
pub fn index_within_minutes(root: &Path) -> Option<RepoIndex> {
    let (send, receive) = std::sync::mpsc::channel();
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        let _ = send.send(RepoIndex::open(&root, None).unwrap());
    });
    receive
        .recv_timeout(std::time::Duration::from_secs(180))
        .ok()
}

/// Write `files` (repository-relative path, text) under `root`: a repository laid out as a
/// test needs it.
pub fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// `keyhole proposals REPO POSITION --json` with `extra` flags, its report.
pub fn proposals_json(
    repo: &Path,
    position: &str,
    extra: &[&str],
    scratch: &Path,
) -> serde_json::Value {
    let mut args = vec!["proposals", repo.to_str().unwrap(), position, "--json"];
    args.extend(extra);
    serde_json::from_slice(&ok(keyhole(&args, scratch)).stdout).expect("JSON")
}

/// Every file the proposals of `source` rank for the hole.
pub fn ranked(report: &serde_json::Value, source: &str) -> BTreeSet<String> {
    let proposals = report["proposals"].as_array().unwrap().iter();
    proposals
        .filter(|p| p["source"] == source)
        .flat_map(|p| p["ranked_files"].as_array().unwrap())
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// The files a hole's import proposals take their context from.
pub fn imported(repo: &Path, position: &str, scratch: &Path) -> BTreeSet<String> {
    ranked(&proposals_json(repo, position, &[], scratch), "import")
}

pub fn set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|f| f.to_string()).collect()
}
