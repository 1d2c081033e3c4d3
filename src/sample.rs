//! The bundled sample repositories, embedded in the binary so keyhole works anywhere offline:
//! one per language keyhole reads, each with a demo hole.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use crate::dirs::Dirs;

static JAVA: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/sample-repo");
static PYTHON: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/sample-python");
static TYPESCRIPT: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/sample-typescript");

/// The Java sample's hole: a service call whose method exists only in an imported file.
pub const DEMO_HOLE: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";

/// A bundled sample repository.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sample {
    /// A small Java shop: services, repositories, a class hierarchy.
    #[default]
    Java,
    /// The same shop in Python: a package with absolute and relative imports, annotations.
    Python,
    /// A lending library in TypeScript, TSX and JavaScript, with `tsconfig.json` paths.
    TypeScript,
}

/// A name that is none of the bundled samples'.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no bundled sample {name:?} (there are: {known})",
    known = Sample::ALL.map(Sample::name).join(", ")
)]
pub struct UnknownSample {
    pub name: String,
}

impl Sample {
    pub const ALL: [Sample; 3] = [Sample::Java, Sample::Python, Sample::TypeScript];

    /// Its name on the command line (`--sample java`).
    pub fn name(self) -> &'static str {
        match self {
            Sample::Java => "java",
            Sample::Python => "python",
            Sample::TypeScript => "typescript",
        }
    }

    /// The sample named `name`; the error names the ones there are.
    pub fn named(name: &str) -> Result<Sample, UnknownSample> {
        Sample::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| UnknownSample {
                name: name.to_string(),
            })
    }

    /// The hole it opens on.
    pub fn demo_hole(self) -> &'static str {
        match self {
            Sample::Java => DEMO_HOLE,
            // A repository call whose method exists only in the imported repository module.
            Sample::Python => "shop/services/order_service.py:22:28",
            Sample::TypeScript => "src/service/loan-service.ts:21:20",
        }
    }

    fn files(self) -> &'static Dir<'static> {
        match self {
            Sample::Java => &JAVA,
            Sample::Python => &PYTHON,
            Sample::TypeScript => &TYPESCRIPT,
        }
    }

    /// The sample on disk: written once into keyhole's data directory (or the temp directory
    /// when that is unavailable), in a folder named by the content's hash.
    pub fn materialize(self, dirs: &Dirs) -> std::io::Result<PathBuf> {
        let base = dirs.data.clone().unwrap_or_else(std::env::temp_dir);
        self.materialize_in(&base)
            .or_else(|_| self.materialize_in(&std::env::temp_dir().join("keyhole")))
    }

    fn materialize_in(self, base: &Path) -> std::io::Result<PathBuf> {
        // The Java sample keeps the folder name it always had.
        let folder = if self == Sample::Java {
            "sample-repo".to_string()
        } else {
            format!("sample-{}", self.name())
        };
        let dest = base.join(format!("{folder}-{}", self.content_hash()));
        if dest.is_dir() {
            return Ok(dest);
        }
        std::fs::create_dir_all(base)?;
        let staging = base.join(format!(".sample-staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)?;
        self.files().extract(&staging)?;
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

    fn content_hash(self) -> String {
        let mut hasher = blake3::Hasher::new();
        let mut files = Vec::new();
        collect_files(self.files(), &mut files);
        files.sort_by_key(|f| f.path());
        for file in files {
            hasher.update(file.path().to_string_lossy().as_bytes());
            hasher.update(file.contents());
        }
        hasher.finalize().to_hex()[..16].to_string()
    }
}

/// The Java sample on disk (see [`Sample::materialize`]).
pub fn materialize(dirs: &Dirs) -> std::io::Result<PathBuf> {
    Sample::Java.materialize(dirs)
}

fn collect_files<'a>(dir: &'a Dir<'a>, out: &mut Vec<&'a include_dir::File<'a>>) {
    out.extend(dir.files());
    for sub in dir.dirs() {
        collect_files(sub, out);
    }
}
