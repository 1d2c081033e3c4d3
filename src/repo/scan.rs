//! Finding and reading the source files of a repository.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::Match;
use ignore::WalkBuilder;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::Vendored;
use super::read::{RepoDir, RepoReadError, name_text};
use crate::lang;

/// Files larger than this are skipped: generated or data files, not code a person completes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// A source file found on disk: its path relative to the root ('/'-separated) and absolute.
pub struct Found {
    pub rel: String,
    pub abs: PathBuf,
    pub language: &'static dyn lang::Language,
}

/// Walk `root` respecting its ignore files (also outside git checkouts: [`IgnoreFiles`]),
/// keeping files some language handles, and leaving out folders of installed dependencies
/// unless `vendored` says to include them. Problems (unreadable directories, symlink loops,
/// ignore files that cannot be read) become warnings, never failures.
pub fn find_sources(root: &Path, vendored: Vendored, warnings: &mut Vec<String>) -> Vec<Found> {
    let ignore_files = Arc::new(Mutex::new(IgnoreFiles::new(root)));
    let kept = ignore_files.clone();
    // Hidden entries are left out here rather than by the walker, so that a folder's ignore
    // files are seen in its listing: in name order they come before any other entry but those
    // whose names start with a byte below '.', so only a folder with such an entry is asked
    // for them by name (one open per name and folder was a tenth of a warm run on Django).
    let walker = WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        // By the bytes of the whole path, which share their folder's: the same order as by
        // name, without parsing each name out of its path at every comparison.
        .sort_by_file_path(|a, b| a.as_os_str().cmp(b.as_os_str()))
        .filter_entry(move |entry| {
            if entry.depth() == 0 {
                return true;
            }
            let name = entry.file_name();
            let mut ignore_files = kept.lock().unwrap_or_else(PoisonError::into_inner);
            let first = name.as_encoded_bytes().first().copied().unwrap_or(0);
            if first == b'.' {
                ignore_files.note(entry.path());
                return false;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let vendored_dir = is_dir
                && vendored == Vendored::Skipped
                && lang::is_vendored_dir(&name.to_string_lossy());
            let listed = first > b'.';
            !(vendored_dir || ignore_files.ignored(entry.path(), is_dir, listed))
        })
        .build();
    let mut found = Vec::new();
    // Per file of `found`: whether its name is UTF-8.
    let mut utf8_names: Vec<bool> = Vec::new();
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
        // A UTF-8 path is cut as text, without parsing it into components first.
        let as_text = (path.to_str().zip(root.to_str()))
            .and_then(|(path, root)| path.strip_prefix(root)?.strip_prefix('/'))
            .filter(|_| std::path::MAIN_SEPARATOR == '/');
        let (rel, utf8) = match as_text {
            Some(rel) => (rel.to_string(), true),
            None => {
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                let text = (rel.components())
                    .map(|c| name_text(c.as_os_str()))
                    .collect::<Vec<_>>()
                    .join("/");
                (text, rel.to_str().is_some())
            }
        };
        utf8_names.push(utf8);
        found.push(Found {
            rel,
            abs: path.to_path_buf(),
            language,
        });
    }
    // A name that is not UTF-8 reads as text with escapes, which a UTF-8 name could spell out
    // too; two files must never share a path (and so hole ids), so the escaped one goes.
    if utf8_names.contains(&false) {
        let mut taken: HashSet<String> = (found.iter().zip(&utf8_names))
            .filter(|(_, utf8)| **utf8)
            .map(|(f, _)| f.rel.clone())
            .collect();
        let mut utf8_names = utf8_names.into_iter();
        found.retain(|f| {
            let utf8 = utf8_names.next().unwrap_or(true);
            let distinct = utf8 || taken.insert(f.rel.clone());
            if !distinct {
                warnings.push(format!(
                    "skipped {}: its name is not UTF-8 and reads as another file's",
                    crate::escape::controls(&f.rel)
                ));
            }
            distinct
        });
    }
    let mut ignore_files = ignore_files.lock().unwrap_or_else(PoisonError::into_inner);
    warnings.append(&mut ignore_files.warnings);
    found
}

/// The ignore files of a repository as git reads them (each folder's `.gitignore`, and
/// `.git/info/exclude` at the root) with ripgrep's `.ignore` beside them, each read as
/// [`super::read_repo_file`] reads when the walk first reaches its folder: left to the `ignore`
/// crate, a FIFO there would hang the walk and a link to `/dev/zero` grow memory without end.
/// Files outside the repository (a global excludes file, a parent folder's) are not read.
struct IgnoreFiles {
    root: PathBuf,
    dir: RepoDir,
    /// Per folder the walk reached: the rules that apply inside it, nearest folder first
    /// (its own ignore files', then each parent's up to the root), only folders that have
    /// ignore files listed. Kept per folder so that each entry costs one lookup of its parent.
    in_dir: HashMap<PathBuf, Arc<[Arc<Gitignore>]>>,
    /// The folder whose rules were last asked for, and its rules.
    last: Option<(PathBuf, Arc<[Arc<Gitignore>]>)>,
    /// The ignore files met in folder listings so far ([`IgnoreFiles::note`]).
    listed: HashSet<PathBuf>,
    warnings: Vec<String>,
}

/// The names of the ignore files in each folder, lowest precedence first.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

impl IgnoreFiles {
    fn new(root: &Path) -> IgnoreFiles {
        IgnoreFiles {
            root: root.to_path_buf(),
            dir: RepoDir::open(root),
            in_dir: HashMap::new(),
            last: None,
            listed: HashSet::new(),
            warnings: Vec::new(),
        }
    }

    /// Notes a hidden entry of a folder's listing that is one of its ignore files.
    fn note(&mut self, path: &Path) {
        let name = path.file_name().unwrap_or_default();
        if IGNORE_FILES.iter().any(|ignore| name == *ignore) {
            self.listed.insert(path.to_path_buf());
        }
    }

    /// Whether `path` (under the root) is ignored: the nearest folder whose rules match it
    /// decides, as git has it, and within a folder the last matching rule. `listed`: its
    /// folder's ignore files, if any, have been met in the listing already ([`Self::note`]).
    fn ignored(&mut self, path: &Path, is_dir: bool, listed: bool) -> bool {
        let Some(dir) = path.parent() else {
            return false;
        };
        // Entries come folder by folder: the last folder's rules are most often the ones.
        let rules = match &self.last {
            Some((last, rules)) if last.as_os_str() == dir.as_os_str() => Arc::clone(rules),
            _ => {
                let rules = self.rules_in(dir, listed);
                self.last = Some((dir.to_path_buf(), Arc::clone(&rules)));
                rules
            }
        };
        for rules in rules.iter() {
            match rules.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// The rules that apply inside `dir`, nearest first; its ignore files are read the first
    /// time (those met in its listing where it has been `listed`, else any there).
    fn rules_in(&mut self, dir: &Path, listed: bool) -> Arc<[Arc<Gitignore>]> {
        if let Some(rules) = self.in_dir.get(dir) {
            return Arc::clone(rules);
        }
        let outer = match dir.parent() {
            // A parent was listed before the walk entered `dir`, unless it is above the root.
            Some(parent) if dir != self.root && dir.starts_with(&self.root) => {
                self.rules_in(parent, true)
            }
            _ => Arc::from([]),
        };
        let rules: Arc<[Arc<Gitignore>]> = match self.read_rules(dir, listed) {
            Some(own) => (std::iter::once(Arc::new(own)))
                .chain(outer.iter().cloned())
                .collect(),
            None => outer,
        };
        self.in_dir.insert(dir.to_path_buf(), Arc::clone(&rules));
        rules
    }

    fn read_rules(&mut self, dir: &Path, listed: bool) -> Option<Gitignore> {
        // Lowest precedence first: a later rule overrides an earlier one.
        let exclude = (dir == self.root).then_some(".git/info/exclude");
        let mut builder = GitignoreBuilder::new(dir);
        let mut any = false;
        for name in exclude.into_iter().chain(IGNORE_FILES) {
            let file = dir.join(name);
            if listed && IGNORE_FILES.contains(&name) && !self.listed.contains(&file) {
                continue;
            }
            let bytes = match self.dir.read(&file, MAX_FILE_BYTES) {
                Ok(bytes) => bytes,
                Err(e) if e.is_missing() => continue,
                Err(e) => {
                    self.warnings
                        .push(format!("{e}; its rules were not applied"));
                    continue;
                }
            };
            any = true;
            for line in String::from_utf8_lossy(&bytes).lines() {
                if let Err(e) = builder.add_line(Some(file.clone()), line) {
                    self.warnings
                        .push(format!("{e}; that rule was not applied"));
                }
            }
        }
        if !any {
            return None;
        }
        builder
            .build()
            .map_err(|e| {
                self.warnings
                    .push(format!("{e}; its rules were not applied"))
            })
            .ok()
    }
}

/// Why a file was not indexed.
#[derive(Debug, thiserror::Error)]
pub enum SkipReason {
    #[error(transparent)]
    Refused(#[from] RepoReadError),
    #[error("{0}: binary file")]
    Binary(String),
    #[error("{0}: not valid UTF-8")]
    NotUtf8(String),
}

/// Read a source file of the repository `dir` as text, or say why not.
pub fn read_source(dir: &RepoDir, found: &Found) -> Result<String, SkipReason> {
    let bytes = dir.read(&found.abs, MAX_FILE_BYTES)?;
    if memchr::memchr(0, &bytes).is_some() {
        return Err(SkipReason::Binary(found.rel.clone()));
    }
    String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8(found.rel.clone()))
}
