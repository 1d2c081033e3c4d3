//! Parse every source file keyhole reads under a directory (Java, Python, TypeScript and
//! JavaScript, by the same rule the index uses) with tree-sitter and nothing else, in parallel:
//! the process-level reference that BENCHMARKS.md measures the one-hole commands against.
//!
//! cargo run --release --example bare_parse -- REPO

use std::path::{Path, PathBuf};

use rayon::prelude::*;

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() && !keyhole::testing::lang::is_vendored_dir(&name) => {
                source_files(&path, out)
            }
            Ok(kind) if kind.is_file() && keyhole::testing::lang::for_path(&path).is_some() => {
                out.push(path)
            }
            _ => {}
        }
    }
}

/// The grammar of a file keyhole reads, by its extension.
fn grammar(path: &Path) -> tree_sitter::Language {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "java" => tree_sitter_java::LANGUAGE.into(),
        "py" | "pyi" => tree_sitter_python::LANGUAGE.into(),
        "tsx" | "jsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
        _ => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
    }
}

fn main() {
    let Some(root) = std::env::args_os().nth(1) else {
        eprintln!("usage: bare_parse REPO");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    source_files(Path::new(&root), &mut files);
    let parsed = files
        .par_iter()
        .map_init(tree_sitter::Parser::new, |parser, path| {
            let text = std::fs::read_to_string(path).ok()?;
            parser.set_language(&grammar(path)).ok()?;
            parser.parse(&text, None)
        })
        .filter(Option::is_some)
        .count();
    println!("{parsed} of {} files parsed", files.len());
}
