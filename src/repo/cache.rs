//! On-disk cache of per-file facts, keyed by repository and invalidated by file content.
//!
//! Layout: one file per repository, `<cache dir>/index/<hash of root path>.bin`, holding a
//! blake3 checksum of the payload followed by the postcard-encoded entries. A file that fails
//! its checksum or does not decode is reported and rebuilt; a cache that cannot be written is
//! reported and the index simply stays in memory.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SourceFile;
use crate::lang::FileFacts;

/// Bumped whenever [`FileFacts`] or extraction changes, so stale caches are ignored.
const FORMAT_VERSION: u32 = 2;

/// The platform cache directory for keyhole (`KEYHOLE_CACHE_DIR` overrides it).
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KEYHOLE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "keyhole").map(|d| d.cache_dir().to_path_buf())
}

#[derive(Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub hash: [u8; 32],
    pub facts: FileFacts,
}

#[derive(Serialize, Deserialize)]
struct Payload {
    version: u32,
    entries: Vec<Entry>,
}

#[derive(Serialize)]
struct PayloadRef<'a> {
    version: u32,
    entries: Vec<EntryRef<'a>>,
}

#[derive(Serialize)]
struct EntryRef<'a> {
    path: &'a str,
    hash: &'a [u8; 32],
    facts: &'a FileFacts,
}

pub struct Cache {
    path: Option<PathBuf>,
    entries: HashMap<String, Entry>,
}

impl Cache {
    /// The cache for `root`, empty when there is none yet or it cannot be used.
    pub fn load(root: &Path, dir: Option<&Path>, warnings: &mut Vec<String>) -> Cache {
        let Some(dir) = dir else {
            return Cache {
                path: None,
                entries: HashMap::new(),
            };
        };
        let key = blake3::hash(root.to_string_lossy().as_bytes()).to_hex();
        let path = dir.join("index").join(format!("{}.bin", &key[..32]));
        let entries = match std::fs::read(&path) {
            Ok(bytes) => decode(&bytes).unwrap_or_else(|why| {
                warnings.push(format!("cache {}: {why}; rebuilding it", path.display()));
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        let entries = entries.into_iter().map(|e| (e.path.clone(), e)).collect();
        Cache {
            path: Some(path),
            entries,
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The cached entry for a path, if any (its hash still has to be checked).
    pub fn take(&mut self, rel: &str) -> Option<Entry> {
        self.entries.remove(rel)
    }

    /// Whether entries remain for files that are gone, so the cache should be rewritten.
    pub fn had_stale_entries(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Write the facts of `files`, atomically (temp file + rename); a warning if it fails.
    pub fn store(&self, files: &[SourceFile]) -> Option<String> {
        let path = self.path.as_ref()?;
        write(path, files).err().map(|err| {
            format!(
                "cache {}: cannot write ({err}); running without a cache",
                path.display()
            )
        })
    }
}

fn decode(bytes: &[u8]) -> Result<Vec<Entry>, &'static str> {
    if bytes.len() < 32 {
        return Err("truncated");
    }
    let (sum, payload) = bytes.split_at(32);
    if blake3::hash(payload).as_bytes() != sum {
        return Err("checksum mismatch (corrupt)");
    }
    // The version leads the payload; read it alone first, as another version's entries may
    // not decode at all.
    let (version, _) =
        postcard::take_from_bytes::<u32>(payload).map_err(|_| "does not decode (corrupt)")?;
    if version != FORMAT_VERSION {
        return Err("written by another version");
    }
    let payload: Payload =
        postcard::from_bytes(payload).map_err(|_| "does not decode (corrupt)")?;
    Ok(payload.entries)
}

fn write(path: &Path, files: &[SourceFile]) -> std::io::Result<()> {
    let payload = PayloadRef {
        version: FORMAT_VERSION,
        entries: files
            .iter()
            .map(|f| EntryRef {
                path: &f.path,
                hash: &f.hash,
                facts: &f.facts,
            })
            .collect(),
    };
    let bytes = postcard::to_stdvec(&payload).map_err(std::io::Error::other)?;
    let dir = path.parent().expect("cache path has a parent");
    std::fs::create_dir_all(dir)?;
    let (tmp_path, mut tmp) = tempfile_in(dir)?;
    // No fsync: a cache torn by a crash fails its checksum and is rebuilt, so durability is
    // not worth the time on every open.
    let written = tmp
        .write_all(blake3::hash(&bytes).as_bytes())
        .and_then(|()| tmp.write_all(&bytes))
        .and_then(|()| std::fs::rename(&tmp_path, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    written
}

/// A fresh file next to the target, so the rename stays on one filesystem.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let name = format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let path = dir.join(name.replace(['(', ')'], ""));
    let file = std::fs::File::create(&path)?;
    Ok((path, file))
}
