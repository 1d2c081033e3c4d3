//! `keyhole index`: index a repository and report what was found.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::hole::{CacheArgs, open_repo};
use keyhole::escape;
use keyhole::repo::CacheReport;

#[derive(Serialize)]
struct IndexOut<'a> {
    repository: &'a Path,
    files: usize,
    lines: usize,
    duplicated_files: usize,
    syntax_errors: u32,
    cache: &'a CacheReport,
    warnings: &'a [String],
}

pub fn index_command(repo: &Path, json: bool, cache: &CacheArgs) -> Result<()> {
    let index = open_repo(repo, cache)?;
    let out = IndexOut {
        repository: &index.root,
        files: index.files.len(),
        lines: index.files.iter().map(|f| f.line_count()).sum(),
        duplicated_files: index.graph.duplicated.iter().filter(|&&d| d).count(),
        syntax_errors: index.files.iter().map(|f| f.facts.syntax_errors).sum(),
        cache: &index.cache,
        warnings: &index.warnings,
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!(
            "repository  {}",
            escape::controls(&out.repository.to_string_lossy())
        );
        outln!(
            "files       {} ({} lines, {} with exact copies, {} syntax errors)",
            out.files,
            out.lines,
            out.duplicated_files,
            out.syntax_errors
        );
        outln!(
            "cache       {} reused, {} parsed, {} texts kept (unchanged on disk)",
            out.cache.reused,
            out.cache.parsed,
            out.cache.texts_kept
        );
        outln!("warnings    {}", out.warnings.len());
    }
    Ok(())
}
