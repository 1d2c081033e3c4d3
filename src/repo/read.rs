//! The one way keyhole reads a file of a repository: sources, project files (`tsconfig.json`
//! and what it extends, `package.json`, `pyproject.toml`), ignore files. A repository is
//! input keyhole does not control: any of them may be a FIFO (opening it waits for a writer
//! for ever), a device or a link to one (`/dev/zero` never ends), or a link out of the
//! repository (`/etc/passwd`). Only a regular file inside the repository, of at most the
//! caller's cap, is read; anything else is refused with the reason, which callers turn into
//! one warning line naming the file.

use std::io::Read;
use std::path::{Component, Path};

/// Why a file was not read, whichever file it was.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("no such file")]
    Missing,
    #[error("outside the repository")]
    Outside,
    #[error("not a regular file")]
    NotAFile,
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    #[error("cannot read: {0}")]
    Unreadable(std::io::Error),
}

/// Why a file of a repository was not read: the file (repository-relative, '/'-separated) and
/// the reason, shown as one line (`tsconfig.json: not a regular file`).
#[derive(Debug, thiserror::Error)]
#[error("{file}: {why}")]
pub struct RepoReadError {
    pub file: String,
    pub why: Refusal,
}

impl RepoReadError {
    /// Whether there is simply no such file: where a file is optional (a `tsconfig.json`
    /// above a source), that is no problem to report.
    pub fn is_missing(&self) -> bool {
        matches!(self.why, Refusal::Missing)
    }
}

/// The bytes of the file at `path` (relative to `root`, or absolute under it), if it is a
/// regular file inside the repository at `root` once links are resolved, of at most `cap`
/// bytes. `root` should be canonical (as [`super::RepoIndex`] holds it); one that is not is
/// made so. To read many files of one repository, open it once: [`RepoDir`].
pub fn read_repo_file(root: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, RepoReadError> {
    RepoDir::open(root).read(path, cap)
}

/// A repository's root folder, held open where the kernel resolves paths beneath it (Linux),
/// so that reading many of its files opens the root once, not once per file.
pub struct RepoDir {
    root: std::path::PathBuf,
    #[cfg(target_os = "linux")]
    beneath: Option<std::os::fd::OwnedFd>,
}

impl RepoDir {
    /// The repository at `root` (see [`read_repo_file`] for what `root` should be).
    pub fn open(root: &Path) -> RepoDir {
        RepoDir {
            root: root.to_path_buf(),
            #[cfg(target_os = "linux")]
            beneath: beneath::root(root),
        }
    }

    /// The bytes of the file at `path`, as [`read_repo_file`] reads it.
    pub fn read(&self, path: &Path, cap: u64) -> Result<Vec<u8>, RepoReadError> {
        let root = self.root.as_path();
        let refused = |why| RepoReadError {
            file: repo_name(root, path),
            why,
        };
        #[cfg(target_os = "linux")]
        if let Some(opened) = (self.beneath.as_ref()).and_then(|dir| beneath::open(dir, root, path))
        {
            let file = opened.map_err(refused)?;
            return read_opened(file, cap).map_err(refused);
        }
        let joined = root.join(path);
        let resolved = joined.canonicalize().map_err(|e| refused(refusal(e)))?;
        let inside = resolved.starts_with(root)
            || root
                .canonicalize()
                .is_ok_and(|root| resolved.starts_with(root));
        if !inside {
            return Err(refused(Refusal::Outside));
        }
        read_regular_file(&resolved, cap).map_err(refused)
    }
}

/// Opening a file of a repository by the kernel's own resolution beneath the root (Linux's
/// `openat2` with `RESOLVE_BENEATH`): links are followed while they stay inside, and one that
/// leaves fails, without the `readlink` per path component that canonicalizing a path costs
/// (a fifth of a warm open of guava went there).
#[cfg(target_os = "linux")]
mod beneath {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use super::Refusal;

    /// `struct open_how` of `linux/openat2.h`.
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }

    /// The folder `root`, held to resolve paths beneath it; none where it cannot be opened
    /// (paths are then resolved as without `openat2`).
    pub(super) fn root(root: &Path) -> Option<OwnedFd> {
        let root = CString::new(root.as_os_str().as_bytes()).ok()?;
        // SAFETY: a NUL-terminated path; the descriptor returned is owned here alone.
        let dir = unsafe {
            libc::open(
                root.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        // SAFETY: `dir` was just opened and is closed by nothing else.
        (dir >= 0).then(|| unsafe { OwnedFd::from_raw_fd(dir) })
    }

    /// The file at `path` (relative to `root`, held open as `dir`, or absolute under it)
    /// opened for reading without waiting (a FIFO), if it lies inside `root` once links are
    /// resolved; missing when it is not there. None where the kernel cannot say: no `openat2`
    /// (before Linux 5.6, or refused by a sandbox), a link or `..` that leaves the root, an
    /// absolute link (which `RESOLVE_BENEATH` refuses even when it points inside), a path not
    /// under `root`. The caller then resolves the path itself.
    pub(super) fn open(
        dir: &OwnedFd,
        root: &Path,
        path: &Path,
    ) -> Option<Result<std::fs::File, Refusal>> {
        let relative = match path.is_absolute() {
            true => path.strip_prefix(root).ok()?,
            false => path,
        };
        if relative.as_os_str().is_empty() {
            return None;
        }
        let relative = CString::new(relative.as_os_str().as_bytes()).ok()?;
        let how = OpenHow {
            flags: (libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_BENEATH,
        };
        // SAFETY: `openat2(dirfd, path, how, size)` with a live directory descriptor, a
        // NUL-terminated path and `how` of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                relative.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel returned a new descriptor, owned by the file alone.
            return Some(Ok(unsafe { std::fs::File::from_raw_fd(fd as i32) }));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            // Resolution stays beneath the root until it fails, so what is missing is inside.
            Some(libc::ENOENT | libc::ENOTDIR) => Some(Err(Refusal::Missing)),
            _ => None,
        }
    }
}

/// The bytes of the regular file at `path`, of at most `cap` bytes, whatever else is there: a
/// FIFO is opened without waiting and refused, and no more than `cap + 1` bytes are ever read,
/// so a device without end cannot grow memory. For files keyhole keeps itself (its cache) as
/// much as for a repository's, through [`read_repo_file`].
pub fn read_regular_file(path: &Path, cap: u64) -> Result<Vec<u8>, Refusal> {
    read_opened(open_nonblocking(path)?, cap)
}

/// The bytes of the opened `file`, if it is a regular file of at most `cap` bytes (opened
/// without waiting, as [`open_regular_file`] opens it).
fn read_opened(file: std::fs::File, cap: u64) -> Result<Vec<u8>, Refusal> {
    let len = regular_len(&file, cap)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Refusal::Unreadable)?;
    // A file that grew since it was measured.
    if bytes.len() as u64 > cap {
        return Err(Refusal::TooLarge(cap));
    }
    Ok(bytes)
}

/// The regular file at `path` opened for reading, with its length, if it is at most `cap`
/// bytes (see [`read_regular_file`]).
pub fn open_regular_file(path: &Path, cap: u64) -> Result<(std::fs::File, u64), Refusal> {
    let file = open_nonblocking(path)?;
    let len = regular_len(&file, cap)?;
    Ok((file, len))
}

/// The file at `path` opened for reading, whatever it is.
fn open_nonblocking(path: &Path) -> Result<std::fs::File, Refusal> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Opening a FIFO for reading waits for a writer, unless non-blocking.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options.open(path).map_err(refusal)
}

/// The length of the opened `file`, if it is a regular file of at most `cap` bytes. Checked
/// on the opened file, so that it is the file that is read, whatever the path names by now.
fn regular_len(file: &std::fs::File, cap: u64) -> Result<u64, Refusal> {
    let meta = file.metadata().map_err(Refusal::Unreadable)?;
    if !meta.is_file() {
        return Err(Refusal::NotAFile);
    }
    if meta.len() > cap {
        return Err(Refusal::TooLarge(cap));
    }
    Ok(meta.len())
}

fn refusal(error: std::io::Error) -> Refusal {
    match error.kind() {
        // `.git/info/exclude` where `.git` is a file (a worktree's) is as missing.
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => Refusal::Missing,
        _ => Refusal::Unreadable(error),
    }
}

/// `path` as the repository names it: relative to `root`, '/'-separated, each name as
/// [`name_text`] writes it.
fn repo_name(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name_text(name).into_owned()),
            Component::ParentDir => Some("..".to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("src")).unwrap();
        let root = root.canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn reads_a_regular_file_inside_the_repository_within_its_cap() {
        let (_dir, root) = repo();
        std::fs::write(root.join("src/a.ts"), "let a = 1;\n").unwrap();
        let bytes = read_repo_file(&root, Path::new("src/a.ts"), 100).unwrap();
        assert_eq!(bytes, b"let a = 1;\n");
        // An absolute path under the root names the same file.
        assert!(read_repo_file(&root, &root.join("src/a.ts"), 100).is_ok());
        let err = read_repo_file(&root, Path::new("src/a.ts"), 4).unwrap_err();
        assert_eq!(err.to_string(), "src/a.ts: larger than 4 bytes");
        let err = read_repo_file(&root, Path::new("src/none.ts"), 4).unwrap_err();
        assert!(err.is_missing(), "{err}");
    }

    #[test]
    fn refuses_fifos_devices_and_links_out_of_the_repository() {
        let (dir, root) = repo();
        let fifo = std::ffi::CString::new(root.join("fifo.json").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("/dev/zero", root.join("zero.json")).unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("secret.json")).unwrap();
        std::os::unix::fs::symlink("../secret.json", root.join("src/up.json")).unwrap();
        let read = |name: &str| read_repo_file(&root, Path::new(name), 1 << 20).unwrap_err();
        assert_eq!(
            read("fifo.json").to_string(),
            "fifo.json: not a regular file"
        );
        assert!(matches!(read("zero.json").why, Refusal::Outside));
        // Kept files are read through the same check: a device is no file.
        assert!(matches!(
            read_regular_file(Path::new("/dev/zero"), 1 << 20),
            Err(Refusal::NotAFile)
        ));
        assert_eq!(
            read("secret.json").to_string(),
            "secret.json: outside the repository"
        );
        assert!(matches!(read("src/up.json").why, Refusal::Outside));
        assert!(matches!(read("../secret").why, Refusal::Outside));
        // A link that stays inside is followed.
        std::os::unix::fs::symlink("../fifo.json", root.join("src/fifo.json")).unwrap();
        assert!(matches!(read("src/fifo.json").why, Refusal::NotAFile));
    }

    #[test]
    fn links_inside_are_followed_however_written_and_folders_out_refused() {
        let (dir, root) = repo();
        std::fs::write(root.join("src/a.ts"), "let a = 1;\n").unwrap();
        // Relative and absolute links to a file inside, a link to a folder inside, `..` that
        // stays inside: the same file.
        std::os::unix::fs::symlink("src/a.ts", root.join("rel.ts")).unwrap();
        std::os::unix::fs::symlink(root.join("src/a.ts"), root.join("abs.ts")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lib")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("abslib")).unwrap();
        for name in [
            "rel.ts",
            "abs.ts",
            "lib/a.ts",
            "abslib/a.ts",
            "src/../src/a.ts",
        ] {
            let bytes = read_repo_file(&root, Path::new(name), 100);
            assert_eq!(bytes.unwrap(), b"let a = 1;\n", "{name}");
        }
        // A folder out of the repository, by a relative or an absolute link.
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/b.ts"), "outside").unwrap();
        std::os::unix::fs::symlink("../out", root.join("up")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("out"), root.join("absup")).unwrap();
        for name in ["up/b.ts", "absup/b.ts", "src/../../out/b.ts"] {
            let err = read_repo_file(&root, Path::new(name), 100).unwrap_err();
            assert!(matches!(err.why, Refusal::Outside), "{name}: {err}");
        }
        // Missing, through a link or not.
        for name in ["lib/none.ts", "src/a.ts/x", "none/a.ts"] {
            let err = read_repo_file(&root, Path::new(name), 100).unwrap_err();
            assert!(err.is_missing(), "{name}: {err}");
        }
    }
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
