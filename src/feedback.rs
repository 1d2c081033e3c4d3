//! What a person does with completions: the picks they make (kept as a JSON-lines log that
//! ranking can learn from) and the completion they apply to their file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Where keyhole keeps what it learns: `KEYHOLE_DATA_DIR` if set, else the platform data dir.
pub fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("KEYHOLE_DATA_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => directories::ProjectDirs::from("", "", "keyhole").map(|d| d.data_dir().to_path_buf()),
    }
}

/// One pick: the completions shown for a hole, one per candidate context, and the one chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pick {
    /// The hole as `FILE:LINE:COL`.
    pub hole: String,
    /// Candidate context ids, in the order shown.
    pub candidates: Vec<usize>,
    /// [`prompt_hash`] of the prompt of the picked candidate.
    pub prompt_hash: String,
    /// The completion of each candidate, in the same order.
    pub completions: Vec<String>,
    /// Id of the picked candidate.
    pub picked: usize,
    pub unix_time: u64,
}

/// Append `pick` as one JSON line and sync it, so a crash loses at most the line being written.
pub fn append_pick(path: &Path, pick: &Pick) -> io::Result<()> {
    create_parent(path)?;
    let mut line = serde_json::to_vec(pick)?;
    line.push(b'\n');
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    // One write per line keeps concurrent appenders from interleaving within a line.
    file.write_all(&line)?;
    file.sync_data()
}

/// A short stable name for a prompt's text: the first 16 hex digits of its blake3 hash.
pub fn prompt_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..16].to_string()
}

/// Why a completion was not applied; each message is one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{}: changed on disk since it was loaded; completion not applied", path.display())]
    ChangedOnDisk { path: PathBuf },
    #[error("{}: bytes {start}..{end} lie outside the file ({len} bytes)", path.display())]
    OutOfRange {
        path: PathBuf,
        start: usize,
        end: usize,
        len: usize,
    },
    #[error("{}: byte {offset} is inside a character", path.display())]
    NotCharBoundary { path: PathBuf, offset: usize },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Replace `replace` bytes at byte `offset` of the file at `path` with `text`, but only if the
/// file is still the content whose blake3 hash is `expected_hash`. The file is replaced
/// atomically: on any error it is left as it was.
pub fn apply_completion(
    path: &Path,
    expected_hash: &[u8; 32],
    offset: usize,
    replace: usize,
    text: &str,
) -> Result<(), ApplyError> {
    let io_error = |source| ApplyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let content = fs::read(path).map_err(io_error)?;
    if blake3::hash(&content).as_bytes() != expected_hash {
        return Err(ApplyError::ChangedOnDisk {
            path: path.to_path_buf(),
        });
    }
    let end = check_range(path, &content, offset, replace)?;
    let mut updated = Vec::with_capacity(content.len() + text.len());
    updated.extend_from_slice(&content[..offset]);
    updated.extend_from_slice(text.as_bytes());
    updated.extend_from_slice(&content[end..]);
    write_atomic(path, &updated).map_err(io_error)
}

/// The end of `replace` bytes from `offset`, if both ends lie on characters of `content`.
fn check_range(
    path: &Path,
    content: &[u8],
    offset: usize,
    replace: usize,
) -> Result<usize, ApplyError> {
    let end = offset.saturating_add(replace);
    if end > content.len() {
        return Err(ApplyError::OutOfRange {
            path: path.to_path_buf(),
            start: offset,
            end,
            len: content.len(),
        });
    }
    // The content hashed as loaded, so it is UTF-8: a boundary is any byte but a continuation.
    let inside = |i: usize| content.get(i).is_some_and(|&b| (b as i8) < -0x40);
    match [offset, end].into_iter().find(|&i| inside(i)) {
        Some(offset) => Err(ApplyError::NotCharBoundary {
            path: path.to_path_buf(),
            offset,
        }),
        None => Ok(end),
    }
}

/// Learned state kept in a file: what `read` makes of `path`; the default when there is no
/// file; the default and a one-line warning naming the file (and `what` it is) when the file
/// cannot be read or understood, so a damaged file never stops the app.
pub fn load_state<T: Default>(
    path: &Path,
    what: &str,
    read: impl FnOnce(&Path) -> io::Result<T>,
) -> (T, Option<String>) {
    match read(path) {
        Ok(state) => (state, None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => (T::default(), None),
        Err(e) => {
            let warning = format!(
                "ignoring {what} state {}: {e}; starting fresh",
                path.display()
            );
            (T::default(), Some(warning))
        }
    }
}

/// A state file of another version than `expected` is an error that names both.
pub fn check_version(found: u32, expected: u32) -> io::Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "version {found} (expected {expected})"
        )))
    }
}

/// Replace the file at `path` with `bytes` so that readers and crashes see the old file or the
/// new one, never a mix: write a temporary file beside it, sync, rename over it. An existing
/// file keeps its permissions, and a symlink keeps pointing at the replaced file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let tmp = temp_path(&target);
    let written = write_synced(&tmp, bytes, &target).and_then(|()| fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(parent_dir(&target))
}

fn write_synced(tmp: &Path, bytes: &[u8], target: &Path) -> io::Result<()> {
    let mut file = File::create(tmp)?;
    file.write_all(bytes)?;
    match fs::metadata(target) {
        Ok(meta) => file.set_permissions(meta.permissions())?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    file.sync_all()
}

/// A fresh name beside `path` (same filesystem, so the rename is atomic). A leftover of that
/// name can only come from a dead process that had our pid, so it may be overwritten.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Make a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows cannot open a directory to sync it; its renames are journaled by NTFS.
#[cfg(not(unix))]
fn sync_dir(_: &Path) -> io::Result<()> {
    Ok(())
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Create the directory `path` will live in, if missing.
pub(crate) fn create_parent(path: &Path) -> io::Result<()> {
    fs::create_dir_all(parent_dir(path))
}
