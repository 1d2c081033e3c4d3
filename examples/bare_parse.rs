//! Parse every Java file under a directory with tree-sitter and nothing else, in parallel: the
//! process-level reference that BENCHMARKS.md measures the one-hole commands against.
//!
//! cargo run --release --example bare_parse -- REPO

use std::path::{Path, PathBuf};

use rayon::prelude::*;

fn java_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => java_files(&path, out),
            Ok(kind) if kind.is_file() && path.extension().is_some_and(|e| e == "java") => {
                out.push(path)
            }
            _ => {}
        }
    }
}

fn main() {
    let Some(root) = std::env::args_os().nth(1) else {
        eprintln!("usage: bare_parse REPO");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    java_files(Path::new(&root), &mut files);
    let parsed = files
        .par_iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .filter(|text| keyhole::lang::java::parse(text).is_some())
        .count();
    println!("{parsed} of {} files parsed", files.len());
}
