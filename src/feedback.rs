//! What a person does with completions: the picks they make (kept as a JSON-lines log that
//! ranking can learn from) and the completion they apply to their file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::candidate::CandidateId;

/// One pick: the completions shown for a hole, one per candidate context, and the one chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pick {
    /// The hole as `FILE:LINE:COL`.
    pub hole: String,
    /// Candidate context ids, in the order shown.
    pub candidates: Vec<CandidateId>,
    /// [`prompt_hash`] of the prompt of the picked candidate.
    pub prompt_hash: String,
    /// The completion of each candidate, in the same order.
    pub completions: Vec<String>,
    /// Id of the picked candidate.
    pub picked: CandidateId,
    pub unix_time: u64,
}

/// Append `pick` to the pick log at `path` ([`PickLog`]).
pub fn append_pick(path: &Path, pick: &Pick) -> io::Result<()> {
    PickLog::lock(path)?.append(pick)
}

/// The pick log, one JSON line per pick, which every keyhole process (each UI, each
/// `keyhole complete --pick`) appends to: open and locked against the others until dropped, so
/// what a pick teaches (the online ranker, ProCC's bandit) is read, changed and saved under
/// the same lock and no process's lesson overwrites another's. An advisory lock on the file
/// itself, not a database: the log stays the JSON-lines file people and `keyhole train` read.
pub struct PickLog {
    file: File,
}

impl PickLog {
    /// Open (creating, readable by its owner only) and lock the log at `path`; waits while
    /// another process holds it.
    pub fn lock(path: &Path) -> io::Result<PickLog> {
        create_parent(path)?;
        let mut options = OpenOptions::new();
        options.create(true).read(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path)?;
        file.lock()?;
        Ok(PickLog { file })
    }

    /// Append `pick` as one line and sync it. A line that a full disk cut short is taken back,
    /// and one a crash left without its line break is ended first: every line stays whole.
    pub fn append(&mut self, pick: &Pick) -> io::Result<()> {
        let mut line = serde_json::to_vec(pick)?;
        line.push(b'\n');
        let len = self.file.metadata()?.len();
        if len > 0 && !self.ends_with_newline(len)? {
            line.insert(0, b'\n');
        }
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data());
        if written.is_err() {
            let _ = self.file.set_len(len);
        }
        written
    }

    fn ends_with_newline(&mut self, len: u64) -> io::Result<bool> {
        let mut last = [0u8];
        self.file.seek(io::SeekFrom::Start(len - 1))?;
        self.file.read_exact(&mut last)?;
        Ok(last[0] == b'\n')
    }
}

/// A short stable name for a prompt's text: the first 16 hex digits of its blake3 hash.
pub fn prompt_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..16].to_string()
}

/// Why a completion was not applied; each message is one line naming the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

/// The largest file a completion is applied to: reading it back to check it is unchanged must
/// stay bounded, whatever was put at its path since it was indexed.
const MAX_APPLIED_FILE_BYTES: u64 = 256 << 20;

/// Replace `replace` bytes at byte `offset` of the file at `path` with `text`, but only if the
/// file is still the content whose blake3 hash is `expected_hash`. The file is replaced
/// atomically: on any error it is left as it was. `data_dir` is keyhole's data directory, where
/// the new content is staged.
pub fn apply_completion(
    path: &Path,
    expected_hash: &[u8; 32],
    offset: usize,
    replace: usize,
    text: &str,
    data_dir: Option<&Path>,
) -> Result<(), ApplyError> {
    let io_error = |source| ApplyError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Through the checked read: a FIFO or device put at the path since must not hang it.
    let content =
        crate::repo::read_regular_file(path, MAX_APPLIED_FILE_BYTES).map_err(|refused| {
            match refused {
                crate::repo::Refusal::Unreadable(e) => io_error(e),
                other => io_error(io::Error::other(other)),
            }
        })?;
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
    // The temporary file goes to the data directory, so that a process killed while writing
    // it leaves nothing in the user's source folder. A rename is atomic only within one
    // filesystem, and across two it fails (it never copies); then, or when the data directory
    // cannot take the file, it is written beside the source after all, the one place where
    // replacing it stays atomic.
    if let Some(dir) = data_dir.map(|d| d.join(APPLY_TEMP_DIR)) {
        remove_stale_temps(&dir);
        let staged = fs::create_dir_all(&dir)
            .and_then(|()| write_atomic_via(&resolved(path), &updated, &dir));
        if staged.is_ok() {
            return Ok(());
        }
    }
    write_atomic(path, &updated).map_err(io_error)
}

/// Where apply stages its files, under the data directory.
const APPLY_TEMP_DIR: &str = "apply";

/// Removes the temporary files of processes that died while applying (their pid is in the
/// name, see [`temp_path`]); those of live ones are still being written.
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.rsplit('.').nth(1))
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !process_alive(pid)) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Without a cheap check, every such file is taken to be in use.
#[cfg(not(unix))]
fn process_alive(_: u32) -> bool {
    true
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
    let target = resolved(path);
    write_atomic_via(&target, bytes, parent_dir(&target))
}

/// [`write_atomic`] of the `resolved` path `target` with the temporary file in `temp_dir`,
/// which must be on the filesystem of `target` (or the rename fails with
/// [`io::ErrorKind::CrossesDevices`]).
fn write_atomic_via(target: &Path, bytes: &[u8], temp_dir: &Path) -> io::Result<()> {
    let tmp = temp_path(target, temp_dir);
    let written = write_synced(&tmp, bytes, target).and_then(|()| fs::rename(&tmp, target));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(parent_dir(target))
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

/// A fresh name in `dir` for a file to replace `path` with. A leftover of that name can only
/// come from a dead process that had our pid, so it may be overwritten.
fn temp_path(path: &Path, dir: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
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

/// The file a path names, through symlinks, so that replacing it leaves a symlink in place.
fn resolved(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
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
