//! Finding and reading the source files of a repository.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

use crate::lang;

/// Files larger than this are skipped: generated or data files, not code a person completes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// A source file found on disk: its path relative to the root ('/'-separated) and absolute.
pub struct Found {
    pub rel: String,
    pub abs: PathBuf,
    pub language: &'static dyn lang::Language,
}

/// Walk `root` respecting .gitignore (also outside git checkouts), keeping files some language
/// handles. Problems (unreadable directories, symlink loops) become warnings, never failures.
pub fn find_sources(root: &Path, warnings: &mut Vec<String>) -> Vec<Found> {
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut found = Vec::new();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                warnings.push(format!("skipped: {err}"));
                continue;
            }
        };
        let path = entry.path();
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(language) = lang::for_path(path) else {
            continue;
        };
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let rel = rel
            .components()
            .map(|c| name_text(c.as_os_str()))
            .collect::<Vec<_>>()
            .join("/");
        found.push(Found {
            rel,
            abs: path.to_path_buf(),
            language,
        });
    }
    // A name that is not UTF-8 reads as text with escapes, which a UTF-8 name could spell out
    // too; two files must never share a path (and so hole ids), so the escaped one goes.
    let utf8_name = |f: &Found| f.abs.strip_prefix(root).is_ok_and(|r| r.to_str().is_some());
    let utf8: std::collections::HashSet<String> = found
        .iter()
        .filter(|f| utf8_name(f))
        .map(|f| f.rel.clone())
        .collect();
    let mut escaped = std::collections::HashSet::new();
    found.retain(|f| {
        let distinct = utf8_name(f) || (!utf8.contains(&f.rel) && escaped.insert(f.rel.clone()));
        if !distinct {
            warnings.push(format!(
                "skipped {}: its name is not UTF-8 and reads as another file's",
                crate::escape::controls(&f.rel)
            ));
        }
        distinct
    });
    found
}

/// A file or directory name as text: as it is where it is UTF-8, else with each byte that is
/// not written `\xHH`, so that names differing in such bytes stay apart (a lossy reading would
/// make `A\xff.java` and `A\xfe.java` one file).
pub fn name_text(name: &std::ffi::OsStr) -> std::borrow::Cow<'_, str> {
    if let Some(text) = name.to_str() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut text = String::new();
    for chunk in name.as_encoded_bytes().utf8_chunks() {
        text.push_str(chunk.valid());
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02x}"));
        }
    }
    std::borrow::Cow::Owned(text)
}

/// Why a file was not indexed.
#[derive(Debug, thiserror::Error)]
pub enum SkipReason {
    #[error("{0}: cannot read: {1}")]
    Unreadable(String, std::io::Error),
    #[error("{0}: larger than {limit} bytes", limit = MAX_FILE_BYTES)]
    TooLarge(String),
    #[error("{0}: binary file")]
    Binary(String),
    #[error("{0}: not valid UTF-8")]
    NotUtf8(String),
}

/// Read a source file as text, or say why not.
pub fn read_source(found: &Found) -> Result<String, SkipReason> {
    let meta =
        std::fs::metadata(&found.abs).map_err(|e| SkipReason::Unreadable(found.rel.clone(), e))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(SkipReason::TooLarge(found.rel.clone()));
    }
    let bytes =
        std::fs::read(&found.abs).map_err(|e| SkipReason::Unreadable(found.rel.clone(), e))?;
    if bytes.contains(&0) {
        return Err(SkipReason::Binary(found.rel.clone()));
    }
    String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8(found.rel.clone()))
}
