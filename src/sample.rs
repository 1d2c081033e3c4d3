//! The bundled sample repository, embedded in the binary so keyhole works anywhere offline.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use crate::dirs::Dirs;

static SAMPLE: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/sample-repo");

/// The hole keyhole opens on: a service call whose method exists only in an imported file.
pub const DEMO_HOLE: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";

/// The sample repository on disk: written once into keyhole's data directory (or the temp
/// directory when that is unavailable), in a folder named by the content's hash.
pub fn materialize(dirs: &Dirs) -> std::io::Result<PathBuf> {
    let base = dirs.data.clone().unwrap_or_else(std::env::temp_dir);
    materialize_in(&base).or_else(|_| materialize_in(&std::env::temp_dir().join("keyhole")))
}

fn materialize_in(base: &Path) -> std::io::Result<PathBuf> {
    let dest = base.join(format!("sample-repo-{}", content_hash()));
    if dest.is_dir() {
        return Ok(dest);
    }
    std::fs::create_dir_all(base)?;
    let staging = base.join(format!(".sample-staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    SAMPLE.extract(&staging)?;
    match std::fs::rename(&staging, &dest) {
        Ok(()) => Ok(dest),
        // Another keyhole finished first; its copy is identical.
        Err(_) if dest.is_dir() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(dest)
        }
        Err(err) => Err(err),
    }
}

fn content_hash() -> String {
    let mut hasher = blake3::Hasher::new();
    let mut files = Vec::new();
    collect_files(&SAMPLE, &mut files);
    files.sort_by_key(|f| f.path());
    for file in files {
        hasher.update(file.path().to_string_lossy().as_bytes());
        hasher.update(file.contents());
    }
    hasher.finalize().to_hex()[..16].to_string()
}

fn collect_files<'a>(dir: &'a Dir<'a>, out: &mut Vec<&'a include_dir::File<'a>>) {
    out.extend(dir.files());
    for sub in dir.dirs() {
        collect_files(sub, out);
    }
}
