//! The repository index: every source file with its text and facts, and the repository graph
//! RLPG's prompt sources walk (paper appendix A.2). Built once per open, cached on disk.

mod cache;
mod graph;
pub mod listing;
pub(crate) mod mapped;
mod read;
mod scan;
mod texts;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

pub use cache::{FileChanges, FileTable, Keyed};
pub(crate) use cache::{base_outgrown, seal};
pub use graph::{Import, ParentLink, RepoGraph};
pub use mapped::Text;
pub use read::{Refusal, name_text, read_regular_file, read_repo_file};
pub use scan::MAX_FILE_BYTES;

use crate::lang::{self, FileFacts, Language};

pub use crate::lang::FileId;

/// One indexed source file.
pub struct SourceFile {
    /// Path relative to the repository root, '/'-separated.
    pub path: String,
    /// The file's text as read when the index was opened (or as last read, kept in the cache,
    /// while the file is unchanged on disk).
    pub text: Text,
    /// Byte offset where each line starts.
    line_starts: mapped::Words,
    pub hash: [u8; 32],
    pub(crate) facts: FileFacts,
    /// The language the file is written in (by its name).
    pub language: &'static dyn Language,
    /// The sum of the file's metadata when its text was read, where it can show a change
    /// ([`texts::Metadata`]): what keeps its text for the next open.
    metadata: texts::Metadata,
}

impl SourceFile {
    fn new(
        language: &'static dyn Language,
        path: String,
        read: ReadText,
        facts: FileFacts,
    ) -> Self {
        let ReadText {
            text,
            line_starts,
            hash,
            metadata,
        } = read;
        // A final line break ends the last line; it does not start another.
        // memchr's vector search: a warm open finds every line of every file (14 MB on guava).
        let line_starts = line_starts.unwrap_or_else(|| {
            (std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i as u32 + 1)))
            .filter(|&start| start == 0 || (start as usize) < text.len())
            .collect::<Vec<u32>>()
            .into()
        });
        SourceFile {
            path,
            text,
            line_starts,
            hash,
            facts,
            language,
            metadata,
        }
    }

    /// Whether `other` is written in this file's language: a hole's candidates come from
    /// files of its own language.
    pub fn same_language(&self, other: &SourceFile) -> bool {
        self.language.name() == other.language.name()
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The file's type outlines, for typed-hole context (decoded from the cache the first
    /// time they are asked for, extracted again if those do not fit the text).
    pub fn outline(&self) -> &[crate::lang::TypeOutline] {
        let extract = || self.language.extract(&self.text).outline.into_types();
        self.facts.outline.of_text(&self.text, extract)
    }

    /// 0-based line containing byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s as usize <= offset) - 1
    }

    /// Byte offset where 0-based `line` starts (the end of the text past the last line).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts
            .get(line)
            .map_or(self.text.len(), |&s| s as usize)
    }

    /// Text of 0-based `line` without its line break.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self.line_start(line);
        let end = self.line_start(line + 1).min(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// File name without extension: `src/a/OrderService.java` → `OrderService`.
    pub fn stem(&self) -> &str {
        let name = self.path.rsplit('/').next().unwrap_or(&self.path);
        name.split('.').next().unwrap_or(name)
    }

    /// Directory part of the path ("" at the root).
    pub fn dir(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(d, _)| d)
    }
}

/// How the last open used the on-disk cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheReport {
    /// Files whose facts came from the cache.
    pub reused: usize,
    /// Files parsed afresh.
    pub parsed: usize,
    /// Files unchanged on disk since their text was kept in the cache, which were not read.
    pub texts_kept: usize,
    /// Where the cache lives, if caching is on.
    pub path: Option<PathBuf>,
}

/// Everything keyhole knows about a repository.
pub struct RepoIndex {
    pub root: PathBuf,
    pub files: Vec<SourceFile>,
    pub(crate) graph: RepoGraph,
    /// Files skipped, project files that could not be read and cache problems, one line each;
    /// the index is usable regardless.
    pub warnings: Vec<String>,
    pub cache: CacheReport,
    /// The language servers typed holes ask, one per language, started on the first hole
    /// that needs one and stopped with the index.
    pub(crate) language_servers: crate::lsp::Servers,
}

/// Whether the folders a language installs dependencies into (`node_modules`, `.venv`:
/// [`Language::vendored_dirs`]) are indexed with the repository's own files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Vendored {
    /// Left out, as the language's own resolution leaves them out of the project's sources.
    #[default]
    Skipped,
    Included,
}

/// Why a repository could not be opened at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error("{0}: no such directory")]
    Missing(PathBuf),
    #[error("{0}: not a directory")]
    NotADirectory(PathBuf),
}

impl RepoIndex {
    /// Index the repository at `root`, reusing and refreshing the cache in `cache_dir` (none:
    /// no cache). Unreadable, binary, non-UTF-8 and huge files are skipped with a warning.
    /// Folders of installed dependencies are left out ([`Vendored::Skipped`]).
    pub fn open(root: &Path, cache_dir: Option<&Path>) -> Result<RepoIndex, OpenError> {
        Self::open_with_progress(root, cache_dir, Vendored::Skipped, &|_, _| {})
    }

    /// [`RepoIndex::open`] with or without the folders of installed dependencies, calling
    /// `progress(files done, files found)` as files are indexed (from worker threads, so it
    /// must be cheap and thread-safe).
    pub fn open_with_progress(
        root: &Path,
        cache_dir: Option<&Path>,
        vendored: Vendored,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<RepoIndex, OpenError> {
        if !root.exists() {
            return Err(OpenError::Missing(root.to_path_buf()));
        }
        if !root.is_dir() {
            return Err(OpenError::NotADirectory(root.to_path_buf()));
        }
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut warnings = Vec::new();
        // Taken before any file's metadata: a file changed since may not keep its text.
        let settled_before = std::time::SystemTime::now() - texts::SETTLED;
        // The walk (one thread, mostly waiting on the file system) beside the caches' loading.
        let cache_path = cache::Cache::path_for(&root, cache_dir);
        let ((found, walked), ((mut cache, loaded), (kept, kept_loaded))) = rayon::join(
            || warned(|warnings| scan::find_sources(&root, vendored, warnings)),
            || {
                rayon::join(
                    || warned(|warnings| cache::Cache::load(&root, cache_dir, warnings)),
                    || warned(|warnings| texts::KeptTexts::load(cache_path.as_deref(), warnings)),
                )
            },
        );
        warnings.extend(walked.into_iter().chain(loaded).chain(kept_loaded));
        let jobs: Vec<_> = found.into_iter().map(|f| (cache.take(&f.rel), f)).collect();
        let (total, done) = (jobs.len(), AtomicUsize::new(0));
        let dir = read::RepoDir::open(&root);
        progress(0, total);
        let results: Vec<_> = jobs
            .into_par_iter()
            .map(|(cached, found)| {
                let result = index_file(&dir, found, cached, &kept, settled_before);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                result
            })
            .collect();

        let mut files = Vec::with_capacity(results.len());
        let mut report = CacheReport {
            path: cache.path().map(Path::to_path_buf),
            ..Default::default()
        };
        let mut reparsed = Vec::new();
        for result in results {
            match result {
                Ok((file, from)) => {
                    report.texts_kept += usize::from(matches!(file.text, Text::Mapped { .. }));
                    match from {
                        FactsFrom::Cache => report.reused += 1,
                        FactsFrom::Parser => report.parsed += 1,
                        FactsFrom::ParserOverBadCache => {
                            reparsed.push(file.path.clone());
                            warnings.push(format!(
                                "cache {}: its facts of {} do not fit the file; parsed it again",
                                report.path.as_deref().unwrap_or(Path::new("")).display(),
                                file.path
                            ));
                            report.parsed += 1;
                        }
                    }
                    files.push(file);
                }
                Err(skip) => warnings.push(format!("skipped {skip}")),
            }
        }
        // The cache is written while the graph is built: both only read the files.
        let reparsed = reparsed.iter().map(String::as_str).collect();
        let (graph, (store_warning, texts_warning)) = rayon::join(
            || RepoGraph::build(&root, &files),
            || (cache.store(&files, &reparsed), kept.store(&files)),
        );
        warnings.extend(store_warning.into_iter().chain(texts_warning));
        warnings.extend(graph.warnings.iter().cloned());
        Ok(RepoIndex {
            root,
            files,
            graph,
            warnings,
            cache: report,
            language_servers: Default::default(),
        })
    }

    /// An index of files held in memory (repository-relative path, text), as if a repository
    /// at `root` held them: for fuzzing and tests, which should not have to write files.
    /// Files no language handles are left out, as a walk would leave them out.
    pub fn from_sources(root: &Path, sources: Vec<(String, String)>) -> RepoIndex {
        let files: Vec<SourceFile> = sources
            .into_iter()
            .filter_map(|(path, text)| {
                let language = lang::for_path(Path::new(&path))?;
                Some(parsed(language, path, ReadText::fresh(text, None)))
            })
            .collect();
        RepoIndex {
            root: root.to_path_buf(),
            graph: RepoGraph::build(root, &files),
            files,
            warnings: Vec::new(),
            cache: CacheReport::default(),
            language_servers: Default::default(),
        }
    }

    /// The file `extension` beside the index's own cache (`<hash of root>.<extension>`), for
    /// state kept in a layout of its own; none when the index is not cached.
    pub(crate) fn beside_cache(&self, extension: &str) -> Option<PathBuf> {
        Some(self.cache.path.as_deref()?.with_extension(extension))
    }

    /// The answers called `name` kept beside the index's own cache, one per key; none when
    /// the index is not cached.
    pub(crate) fn keyed_cache(&self, name: &str) -> Option<Keyed> {
        Some(Keyed::beside(self.cache.path.as_deref()?, name))
    }

    /// The file at a repository-relative path.
    pub fn file_id(&self, path: &str) -> Option<FileId> {
        self.graph
            .by_path
            .get(path.trim_start_matches("./"))
            .copied()
    }
}

/// What `work` returns, with the warnings it gave: for work run beside other work, whose
/// warnings are then told in a fixed order.
fn warned<T>(work: impl FnOnce(&mut Vec<String>) -> T) -> (T, Vec<String>) {
    let mut warnings = Vec::new();
    (work(&mut warnings), warnings)
}

/// Where the facts of an indexed file came from.
enum FactsFrom {
    Cache,
    Parser,
    /// Parsed because the cached facts did not fit the text.
    ParserOverBadCache,
}

/// A file's text, as read or kept from an earlier read.
struct ReadText {
    text: Text,
    /// Where its lines start, if kept.
    line_starts: Option<mapped::Words>,
    hash: [u8; 32],
    metadata: texts::Metadata,
}

impl ReadText {
    /// `text` as just read (or given), with the file's `metadata` when it was read.
    fn fresh(text: String, metadata: texts::Metadata) -> ReadText {
        ReadText {
            hash: *blake3::hash(text.as_bytes()).as_bytes(),
            text: text.into(),
            line_starts: None,
            metadata,
        }
    }
}

/// The text of one file (kept, if its metadata is as it was, else read and hashed) with its
/// facts (cached for this content, else parsed).
fn index_file(
    dir: &read::RepoDir,
    found: scan::Found,
    cached: Vec<cache::Entry>,
    kept: &texts::KeptTexts,
    settled_before: std::time::SystemTime,
) -> Result<(SourceFile, FactsFrom), scan::SkipReason> {
    let metadata = (kept.keeps())
        .then(|| texts::metadata_sum(&found.abs, settled_before))
        .flatten();
    let read = match metadata.and_then(|sum| kept.get(&found.rel, sum)) {
        Some(kept) => ReadText {
            text: kept.text,
            line_starts: Some(kept.line_starts),
            hash: kept.hash,
            metadata,
        },
        None => ReadText::fresh(scan::read_source(dir, &found)?, metadata),
    };
    let language = found.language;
    let Some(entry) = cached.into_iter().find(|e| e.hash == read.hash) else {
        return Ok((parsed(language, found.rel, read), FactsFrom::Parser));
    };
    let Some(facts) = entry.facts() else {
        return Ok((
            parsed(language, found.rel, read),
            FactsFrom::ParserOverBadCache,
        ));
    };
    let file = SourceFile::new(language, found.rel, read, facts);
    if cache::facts_fit(&file.facts, &file.text, file.line_count()) {
        return Ok((file, FactsFrom::Cache));
    }
    let read = ReadText {
        text: file.text,
        line_starts: Some(file.line_starts),
        hash: file.hash,
        metadata: file.metadata,
    };
    Ok((
        parsed(language, file.path, read),
        FactsFrom::ParserOverBadCache,
    ))
}

/// The file with facts freshly extracted from its text.
fn parsed(language: &'static dyn Language, rel: String, read: ReadText) -> SourceFile {
    let facts = language.extract(&read.text);
    SourceFile::new(language, rel, read, facts)
}

/// Repositories held in memory for the tests of what is derived from an index.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use super::RepoIndex;
    use crate::dirs::Dirs;
    use crate::sample::Sample;

    /// The Java sample's files as (path, text), in the index's order.
    pub(crate) fn java_sample() -> Vec<(String, String)> {
        let data = tempfile::tempdir().unwrap();
        let dirs = Dirs {
            data: Some(data.path().to_path_buf()),
            config: None,
            cache: None,
            state: None,
        };
        let root = Sample::Java.materialize(&dirs).unwrap();
        let index = RepoIndex::open(&root, None).unwrap();
        (index.files.iter())
            .map(|f| (f.path.clone(), f.text.to_string()))
            .collect()
    }

    /// The Java sample after a one-line edit of one file, a rewrite of another, a file removed and
    /// two added (one a near copy, whose windows the index already holds, one new).
    pub(crate) fn edited(sources: &[(String, String)]) -> Vec<(String, String)> {
        let mut after = sources.to_vec();
        let (path, text) = after[3].clone();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.insert(lines.len() / 2, "        int edited = 1;");
        after[3] = (path, lines.join("\n") + "\n");
        after[5].1 = after[5]
            .1
            .replace("order", "purchase")
            .replace("Order", "Purchase");
        after.remove(7);
        let copy = sources[4].1.replace("return", "return /* copied */");
        let (dir, _) = sources[1].0.rsplit_once('/').unwrap();
        after.insert(2, (format!("{dir}/Aaa.java"), copy));
        let last = sources.last().unwrap().0.rsplit_once('/').unwrap().0;
        let new = "class Zzz {\n    int tax(int rate) {\n        return rate * 2;\n    }\n}\n";
        after.push((format!("{last}/Zzz.java"), new.to_string()));
        after
    }

    pub(crate) fn in_memory(sources: &[(String, String)]) -> RepoIndex {
        RepoIndex::from_sources(Path::new("/nonexistent/sample"), sources.to_vec())
    }
}
