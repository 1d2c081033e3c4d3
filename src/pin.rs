//! The candidate a person pinned for a repository (`p` in the UI's candidates pane): `keyhole
//! proxy --compose` sends its context for that repository's holes in place of the ranker's
//! first. One small file per repository in the data directory (`pins/HASH.json`, the hash of
//! the repository's canonical path), replaced atomically: pins of two repositories never share
//! a file, and a reader sees the old pin or the new one. A file that cannot be read or
//! understood is one warning line and no pin.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::candidate::CandidateId;
use crate::dirs::Dirs;
use crate::feedback;

/// The data directory's folder of pins.
const PINS_DIR: &str = "pins";
/// The pin files' format.
const VERSION: u32 = 1;

/// What a pin file holds.
#[derive(Serialize, Deserialize)]
struct PinFile {
    version: u32,
    /// The repository's canonical path: for people reading the file, and to tell a file
    /// copied in from another repository.
    repo: PathBuf,
    /// The pinned candidate's id in the catalogue.
    candidate: usize,
}

/// Why a pin file was not taken (then nothing is pinned).
#[derive(Debug, thiserror::Error)]
enum BadPin {
    #[error("{0}")]
    Unreadable(io::Error),
    #[error("{0}")]
    NotJson(#[from] serde_json::Error),
    #[error("it pins for {}", .0.display())]
    OtherRepository(PathBuf),
    #[error("{0} is not a candidate id")]
    NoCandidate(usize),
}

/// A repository's pin: where it is kept, and reading and writing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The repository's canonical path.
    repo: PathBuf,
    /// Its pin file; `None` without a data directory (nothing can be pinned).
    path: Option<PathBuf>,
}

impl Pin {
    /// The pin of the repository at `root`, kept in `dirs`' data directory.
    pub fn of(dirs: &Dirs, root: &Path) -> Pin {
        let repo = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let hash = blake3::hash(repo.as_os_str().as_encoded_bytes()).to_hex();
        let path = dirs
            .data
            .as_ref()
            .map(|dir| dir.join(PINS_DIR).join(format!("{}.json", &hash[..32])));
        Pin { repo, path }
    }

    /// The file the pin is kept in.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The pinned candidate, none where nothing is pinned; and a warning where the file
    /// cannot be read or understood (then nothing is pinned).
    pub fn read(&self) -> (Option<CandidateId>, Option<String>) {
        let Some(path) = &self.path else {
            return (None, None);
        };
        match self.read_file(path) {
            Ok(pinned) => (pinned, None),
            Err(why) => {
                let warning = format!(
                    "ignoring the pinned candidate in {}: {why}; nothing is pinned",
                    path.display()
                );
                (None, Some(warning))
            }
        }
    }

    fn read_file(&self, path: &Path) -> Result<Option<CandidateId>, BadPin> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(BadPin::Unreadable(e)),
        };
        let file: PinFile = serde_json::from_slice(&bytes)?;
        feedback::check_version(file.version, VERSION).map_err(BadPin::Unreadable)?;
        if file.repo != self.repo {
            return Err(BadPin::OtherRepository(file.repo));
        }
        CandidateId::new(file.candidate)
            .map(Some)
            .ok_or(BadPin::NoCandidate(file.candidate))
    }

    /// Pin `candidate` (replacing any pin), or with `None` unpin.
    pub fn write(&self, candidate: Option<CandidateId>) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Err(io::Error::other("there is no data directory to keep it in"));
        };
        let Some(candidate) = candidate else {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        };
        let file = PinFile {
            version: VERSION,
            repo: self.repo.clone(),
            candidate: candidate.index(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file)?;
        bytes.push(b'\n');
        feedback::create_parent(path)?;
        feedback::write_atomic(path, &bytes)
    }
}

/// A repository's pin as a long-running reader (`keyhole proxy --compose`) sees it: the file
/// is read again only when it changed, so asking costs one `stat`. A damaged file is said once
/// on standard error.
pub struct PinWatch {
    pin: Pin,
    seen: Mutex<(Option<FileStamp>, Option<CandidateId>)>,
}

/// What changes when a pin file is written again (each write renames a new file over it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            #[cfg(unix)]
            inode: std::os::unix::fs::MetadataExt::ino(&meta),
        })
    }
}

impl PinWatch {
    pub fn new(pin: Pin) -> PinWatch {
        let watch = PinWatch {
            pin,
            seen: Mutex::new((None, None)),
        };
        // Read now, so that the first request finds it read.
        watch.current();
        watch
    }

    /// The pinned candidate now.
    pub fn current(&self) -> Option<CandidateId> {
        let stamp = self.pin.path().and_then(FileStamp::of);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.0 != stamp || stamp.is_none() {
            let (pinned, warning) = match stamp {
                Some(_) => self.pin.read(),
                None => (None, None),
            };
            if let Some(warning) = warning {
                crate::escape::warn(&warning);
            }
            *seen = (stamp, pinned);
        }
        seen.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_kept_per_repository_and_unpinning_removes_it() {
        let root = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(root.path());
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let (pin_a, pin_b) = (Pin::of(&dirs, &a), Pin::of(&dirs, &b));
        assert_eq!(pin_a.read(), (None, None));
        pin_a.write(Some(CandidateId::nth(7))).unwrap();
        pin_b.write(Some(CandidateId::FILE_BM25)).unwrap();
        // The same repository named another way is the same pin.
        let dotted = Pin::of(&dirs, &a.join("..").join("a"));
        assert_eq!(dotted.read(), (Some(CandidateId::nth(7)), None));
        assert_eq!(pin_b.read(), (Some(CandidateId::FILE_BM25), None));
        pin_a.write(None).unwrap();
        assert_eq!(pin_a.read(), (None, None));
        assert!(!pin_a.path().unwrap().exists());
        pin_a.write(None).unwrap();
        assert!(
            Pin::of(&Dirs::none(), &a)
                .write(Some(CandidateId::DEFAULT))
                .is_err()
        );
    }

    #[test]
    fn a_damaged_pin_file_is_a_warning_and_no_pin() {
        let root = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(root.path());
        let pin = Pin::of(&dirs, root.path());
        pin.write(Some(CandidateId::DEFAULT)).unwrap();
        let path = pin.path().unwrap().to_path_buf();
        let whole = std::fs::read_to_string(&path).unwrap();
        let torn = &whole[..whole.len() / 2];
        let elsewhere = whole.replace(&serde_json::to_string(&pin.repo).unwrap(), "\"/elsewhere\"");
        for (text, said) in [
            (torn, "EOF while parsing"),
            (
                "{\"version\":1,\"repo\":\"\",\"candidate\":99}",
                "it pins for",
            ),
            (elsewhere.as_str(), "it pins for /elsewhere"),
        ] {
            std::fs::write(&path, text).unwrap();
            let (pinned, warning) = pin.read();
            assert_eq!(pinned, None);
            let warning = warning.unwrap();
            assert!(warning.contains(said), "{warning}");
            assert!(warning.contains(&path.display().to_string()), "{warning}");
        }
        let repo = serde_json::to_string(&pin.repo).unwrap();
        std::fs::write(
            &path,
            format!("{{\"version\":1,\"repo\":{repo},\"candidate\":99}}"),
        )
        .unwrap();
        assert!(pin.read().1.unwrap().contains("99 is not a candidate id"));
    }

    #[test]
    fn a_watch_sees_each_new_pin() {
        let root = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(root.path());
        let pin = Pin::of(&dirs, root.path());
        let watch = PinWatch::new(pin.clone());
        assert_eq!(watch.current(), None);
        for id in [7, 8, 63] {
            pin.write(Some(CandidateId::nth(id))).unwrap();
            assert_eq!(watch.current(), Some(CandidateId::nth(id)));
        }
        pin.write(None).unwrap();
        assert_eq!(watch.current(), None);
    }
}
