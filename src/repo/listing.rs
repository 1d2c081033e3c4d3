//! The order Python's `os.listdir` and `os.walk` list a repository's files on Linux: the file
//! system's own directory order (`readdir`), which `std::fs::read_dir` reads too. RLPG's
//! published code takes sibling files in `os.listdir` order and its other file lists in
//! `os.walk` order, and `--fidelity code` reproduces them. The order is the file system's: on
//! ext4 a hash with a per-file-system seed, so it is the same for one checkout, not across
//! machines.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// The entries of `dir` in directory order (empty when it cannot be read).
pub fn listdir(dir: &Path) -> Vec<OsString> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// Files (relative, '/'-separated) and their positions in `os.walk` order.
pub type WalkOrder = Arc<HashMap<String, usize>>;

/// Every file under `root` (relative, '/'-separated) with its position in `os.walk(root)`
/// order: a directory's files, then each subdirectory's in turn, symbolic links to
/// directories not followed. Walked once per root and process.
pub fn walk_order(root: &Path) -> WalkOrder {
    static WALKS: LazyLock<Mutex<HashMap<PathBuf, WalkOrder>>> = LazyLock::new(Mutex::default);
    let mut walks = WALKS.lock().unwrap_or_else(|e| e.into_inner());
    walks
        .entry(root.to_path_buf())
        .or_insert_with(|| {
            let mut order = HashMap::new();
            walk(root, "", &mut order);
            Arc::new(order)
        })
        .clone()
}

fn walk(dir: &Path, rel: &str, order: &mut HashMap<String, usize>) {
    let mut subdirs = Vec::new();
    for name in listdir(dir) {
        let path = dir.join(&name);
        let name = super::name_text(&name);
        let rel_path = if rel.is_empty() {
            name.into_owned()
        } else {
            format!("{rel}/{name}")
        };
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => subdirs.push((path, rel_path)),
            Ok(_) => {
                let next = order.len();
                order.insert(rel_path, next);
            }
            Err(_) => {}
        }
    }
    for (path, rel_path) in subdirs {
        walk(&path, &rel_path, order);
    }
}
