//! What the benchmarks share: which large repository to measure.

// Each bench is its own crate and uses part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository named by `KEYHOLE_BENCH_REPO` (default `/work/corpus/guava-libraries`).
pub fn large_repo_path() -> PathBuf {
    std::env::var_os("KEYHOLE_BENCH_REPO").map_or_else(
        || PathBuf::from("/work/corpus/guava-libraries"),
        PathBuf::from,
    )
}

/// The large repository and its name when it exists; otherwise a note saying it is skipped.
pub fn large_repo() -> Option<(String, PathBuf)> {
    let path = large_repo_path();
    if !path.is_dir() {
        println!(
            "note: {} not found; skipping it (set KEYHOLE_BENCH_REPO to bench a larger repository)",
            path.display()
        );
        return None;
    }
    let name = path
        .file_name()
        .map_or("repo".into(), |n| n.to_string_lossy().into_owned());
    Some((name, path))
}

/// The bundled sample repository.
pub fn sample_repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo")
}
