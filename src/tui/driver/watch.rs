//! Changes other programs make to the open repository while the UI shows it (an editor saving
//! a file, a `git checkout`), noticed by polling stamps: the size and modification time of
//! every indexed file and of the folders that hold them. Polling, not the operating system's
//! change notifications: it needs no watch per folder (inotify's per-user limit is easily
//! reached by a large repository), works the same on every file system (network and container
//! mounts included) and costs what the index holds (a `stat` per file and folder, about a
//! millisecond per thousand files), never what its ignored folders hold.
//!
//! A stamp that moved is only a hint: the file is read and its content hash compared with the
//! index's, so a save that changed nothing (`touch`, an editor writing the same text) is no
//! change, and a file changed back is one no longer.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::UnboundedSender;

use crate::repo::{MAX_FILE_BYTES, RepoIndex, read_repo_file};
use crate::tui::state::Action;

/// How often the stamps are read, at most.
pub const POLL: Duration = Duration::from_millis(500);

/// Files and folders modified this close before the index read them may have changed after it
/// did (modification times are coarse: a tick of the kernel's clock, two seconds on FAT), so
/// the first poll reads them to be sure.
const SLACK: Duration = Duration::from_secs(2);

/// The most entries read below a folder that appeared, looking for source files in it.
const NEW_FOLDER_ENTRIES: usize = 10_000;

/// Poll `index`'s files every [`POLL`] (less often where a poll is slow) on a blocking thread,
/// sending what changed to the UI, until aborted (another index is watched) or the UI is gone.
pub async fn run(index: Arc<RepoIndex>, read_at: SystemTime, ui: UnboundedSender<Action>) {
    let mut watch = Watch::new(index.clone(), read_at);
    loop {
        if ui.is_closed() {
            return;
        }
        let started = std::time::Instant::now();
        let polled = tokio::task::spawn_blocking(move || {
            let changed = watch.poll();
            (watch, changed)
        });
        let changed;
        (watch, changed) = match polled.await {
            Ok(polled) => polled,
            Err(error) => {
                if error.is_panic() {
                    let said = crate::escape::panic_message(error.into_panic().as_ref());
                    tracing::error!(said, "the watch on the repository's files stopped");
                }
                return;
            }
        };
        if let Some(paths) = changed {
            let index = index.clone();
            if ui.send(Action::ChangedOnDisk { index, paths }).is_err() {
                return;
            }
        }
        // A repository whose poll is slow (very many files, a slow file system) is polled
        // less often: the watch takes at most a twentieth of a core.
        tokio::time::sleep(POLL.max(started.elapsed() * 20)).await;
    }
}

/// What a file or folder looked like at a poll: size, modification time and (on Unix) inode,
/// which an editor's save through a new file and a rename changes; none where it could not be
/// read (removed).
type Stamp = Option<(u64, Option<SystemTime>, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.len(), meta.modified().ok(), inode))
}

/// The open repository's files and folders as the last poll saw them, and which files differ
/// from what the index holds.
pub struct Watch {
    index: Arc<RepoIndex>,
    /// Every indexed file's stamp at the last poll (none before the first).
    files: Vec<Option<Stamp>>,
    /// Every folder holding an indexed file (the root among them), with its stamp at the last
    /// poll: a file added or removed changes its folder's.
    folders: HashMap<PathBuf, Option<Stamp>>,
    /// When the index began reading the repository.
    read_at: SystemTime,
    /// Indexed files whose content is not the index's (or that are gone).
    changed: BTreeSet<String>,
    /// Source files not in the index, by the folder they were found in.
    added: HashMap<PathBuf, BTreeSet<String>>,
    /// What the last poll reported.
    reported: BTreeSet<String>,
}

impl Watch {
    /// A watch on `index`, which began reading the repository at `read_at`. Reads nothing yet.
    pub fn new(index: Arc<RepoIndex>, read_at: SystemTime) -> Watch {
        let mut folders = HashMap::new();
        folders.insert(index.root.clone(), None);
        for file in &index.files {
            let mut dir = Path::new(&file.path).parent();
            while let Some(rel) = dir.filter(|d| !d.as_os_str().is_empty()) {
                if folders.insert(index.root.join(rel), None).is_some() {
                    break;
                }
                dir = rel.parent();
            }
        }
        Watch {
            files: vec![None; index.files.len()],
            index,
            folders,
            read_at,
            changed: BTreeSet::new(),
            added: HashMap::new(),
            reported: BTreeSet::new(),
        }
    }

    /// Read every stamp; the repository-relative paths of the files whose content differs
    /// from the index's (changed, removed or added), sorted, when they are not what the last
    /// poll reported.
    pub fn poll(&mut self) -> Option<Vec<String>> {
        let recent = self
            .read_at
            .checked_sub(SLACK)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let moved = |before: &Option<Stamp>, now: &Stamp| match before {
            Some(before) => before != now,
            // First look: anything modified about when the index read it, or gone.
            None => now.is_none_or(|(_, modified, _)| modified.is_none_or(|m| m >= recent)),
        };
        for (id, file) in self.index.files.iter().enumerate() {
            let now = stamp(&self.index.root.join(&file.path));
            if moved(&self.files[id], &now) {
                let read = read_repo_file(&self.index.root, Path::new(&file.path), MAX_FILE_BYTES);
                let same = read.is_ok_and(|bytes| *blake3::hash(&bytes).as_bytes() == file.hash);
                match same {
                    true => self.changed.remove(&file.path),
                    false => self.changed.insert(file.path.clone()),
                };
            }
            self.files[id] = Some(now);
        }
        let folders: Vec<PathBuf> = self.folders.keys().cloned().collect();
        for folder in folders {
            let now = stamp(&folder);
            if moved(&self.folders[&folder], &now) {
                let added = self.new_sources(&folder);
                match added.is_empty() {
                    true => self.added.remove(&folder),
                    false => self.added.insert(folder.clone(), added),
                };
            }
            self.folders.insert(folder, Some(now));
        }
        let now: BTreeSet<String> = (self.changed.iter())
            .chain(self.added.values().flatten())
            .cloned()
            .collect();
        if now == self.reported {
            return None;
        }
        self.reported = now;
        Some(self.reported.iter().cloned().collect())
    }

    /// The source files below `folder` (a language reads them, not hidden, not in a folder of
    /// installed dependencies) that the index does not hold; a folder the index holds files
    /// of is its own watch's, and not looked into.
    fn new_sources(&self, folder: &Path) -> BTreeSet<String> {
        let known: HashSet<&str> = self.index.files.iter().map(|f| f.path.as_str()).collect();
        let mut found = BTreeSet::new();
        let mut pending = vec![folder.to_path_buf()];
        let mut entries = 0;
        while let Some(dir) = pending.pop() {
            let Ok(read) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in read.flatten() {
                entries += 1;
                if entries > NEW_FOLDER_ENTRIES {
                    return found;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if name.starts_with('.') {
                    continue;
                }
                if kind.is_dir() {
                    if !crate::lang::is_vendored_dir(&name) && !self.folders.contains_key(&path) {
                        pending.push(path);
                    }
                    continue;
                }
                let Ok(rel) = path.strip_prefix(&self.index.root) else {
                    continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                let source = kind.is_file() && crate::lang::for_path(&path).is_some();
                if source && !known.contains(rel.as_str()) {
                    found.insert(rel);
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository of `files` on disk, indexed now, and its watch (first poll done).
    fn watched(files: &[(&str, &str)]) -> (tempfile::TempDir, Watch) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let read_at = SystemTime::now();
        let index = RepoIndex::open(dir.path(), None).unwrap();
        let mut watch = Watch::new(Arc::new(index), read_at);
        assert_eq!(
            watch.poll(),
            None,
            "nothing changed since the index read it"
        );
        (dir, watch)
    }

    #[test]
    fn a_changed_added_or_removed_file_is_reported_once_and_a_save_of_the_same_text_is_not() {
        let (dir, mut watch) = watched(&[
            ("A.java", "class A {}\n"),
            ("b/B.java", "class B {}\n"),
            ("b/C.java", "class C {}\n"),
        ]);
        let root = dir.path();
        // Past the tick of the clock that stamps modification times.
        std::thread::sleep(Duration::from_millis(20));
        // The same text written again: stamps move, content does not.
        std::fs::write(root.join("A.java"), "class A {}\n").unwrap();
        assert_eq!(watch.poll(), None);
        std::fs::write(root.join("b/B.java"), "class B { int x; }\n").unwrap();
        assert_eq!(watch.poll(), Some(vec!["b/B.java".to_string()]));
        assert_eq!(watch.poll(), None, "reported once");
        std::fs::remove_file(root.join("b/C.java")).unwrap();
        std::fs::create_dir_all(root.join("b/d")).unwrap();
        std::fs::write(root.join("b/d/D.java"), "class D {}\n").unwrap();
        // Not source files, hidden or installed: no change to the index.
        std::fs::write(root.join("notes.txt"), "x").unwrap();
        std::fs::write(root.join(".A.java.swp"), "x").unwrap();
        std::fs::create_dir_all(root.join("node_modules/m")).unwrap();
        std::fs::write(root.join("node_modules/m/E.java"), "class E {}\n").unwrap();
        let all = ["b/B.java", "b/C.java", "b/d/D.java"].map(String::from);
        assert_eq!(watch.poll(), Some(all.to_vec()));
        // Changed back: B is the index's again.
        std::fs::write(root.join("b/B.java"), "class B {}\n").unwrap();
        assert_eq!(watch.poll(), Some(all[1..].to_vec()));
    }

    #[test]
    fn a_change_made_while_the_index_was_read_is_seen_by_the_first_poll() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("A.java"), "class A {}\n").unwrap();
        let read_at = SystemTime::now();
        let index = RepoIndex::open(dir.path(), None).unwrap();
        // Written after the index read it, before the watch first looked.
        std::fs::write(dir.path().join("A.java"), "class A { int y; }\n").unwrap();
        let mut watch = Watch::new(Arc::new(index), read_at);
        assert_eq!(watch.poll(), Some(vec!["A.java".to_string()]));
    }
}
