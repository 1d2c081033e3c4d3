//! On-disk cache of per-file facts, keyed by repository and invalidated by file content.
//!
//! Layout: one file per repository, `<cache dir>/index/<hash of root path>.bin`, holding a
//! checksum of the payload ([`seal`]) followed by the postcard-encoded entries. A file that fails
//! its checksum or does not decode is reported and rebuilt; a cache that cannot be written is
//! reported and the index simply stays in memory.
//!
//! The files' texts are kept beside it too ([`super::texts`]), so that a file unchanged on disk
//! is not read again.
//!
//! What is costly to derive from every file (the search indexes, the embedded model's
//! statistics) is cached beside it, `<hash of root path>.<name>.bin`, in a file of sections
//! read where they lie ([`super::mapped`]), with the files it was derived from. State derived
//! from other files is brought up to today's file by file ([`FileChanges`]: only what a
//! changed, added or removed file contributed is derived again), and what that brought is kept
//! as a small segment beside the base, so that an edit writes only the segment; the base is
//! written afresh once the changed files pass a share of the repository, as the facts' base is
//! ([`base_outgrown`]). State of another format, or a torn file, is never decoded: it is
//! rebuilt with one line saying why. Answers
//! about one place (a language server's at a hole) are kept one file each under a key of what
//! they depend on ([`Keyed`]).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::SourceFile;
use super::read::Refusal;
use crate::lang::{FileFacts, MethodDecl};

/// The largest cache file read; a larger one is rebuilt.
const MAX_CACHE_BYTES: u64 = 1 << 30;

/// Bumped whenever [`FileFacts`] or extraction changes, so stale caches are ignored.
const FORMAT_VERSION: u32 = 11;

/// One file's cached facts, left encoded where they lie in the mapped cache file until the job
/// that indexes the file decodes them: decoded all at once when the cache was loaded, on one
/// thread, they were the longest step of a warm open.
pub struct Entry {
    pub path: String,
    pub hash: [u8; 32],
    facts: Encoded,
}

/// Bytes of a mapped cache file.
struct Encoded {
    file: Arc<memmap2::Mmap>,
    range: Range<usize>,
}

impl Entry {
    /// The facts; none when they do not decode (written so by hand, or by a bug: the file
    /// passed its checksum).
    pub fn facts(&self) -> Option<FileFacts> {
        postcard::from_bytes(&self.facts.file[self.facts.range.clone()]).ok()
    }
}

/// A cache file's payload as written: each file's facts encoded apart (as bytes: their length,
/// then them), to be decoded later.
#[derive(Deserialize)]
struct Payload<'a> {
    /// Read alone before the rest ([`decode`]).
    _version: u32,
    #[serde(borrow)]
    entries: Vec<StoredEntry<'a>>,
}

#[derive(Deserialize)]
struct StoredEntry<'a> {
    path: String,
    hash: [u8; 32],
    facts: &'a [u8],
}

#[derive(Serialize)]
struct PayloadRef<'a> {
    version: u32,
    entries: Vec<EntryRef<'a>>,
}

#[derive(Serialize)]
struct EntryRef<'a> {
    path: &'a str,
    hash: &'a [u8; 32],
    facts: Bytes,
}

/// Bytes written as bytes (a length, then them), which a borrowed `&[u8]` reads back in place.
struct Bytes(Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

pub struct Cache {
    path: Option<PathBuf>,
    /// Per path: the cached entries (the base file's, then the delta's), whichever matches the
    /// file's content is used.
    entries: HashMap<String, Vec<Entry>>,
    /// The content hash of every file in the base cache file, by path.
    base: HashMap<String, [u8; 32]>,
    /// The files the delta beside it holds, sorted: written again only when they change.
    delta: Vec<(String, [u8; 32])>,
}

/// When the delta beside a base cache (the facts', or a derived cache's segment) holds more
/// than this share of the repository's files (or the base this many stale ones), the base is
/// written afresh with every file and the delta goes: a delta is rewritten whole on every
/// change, so it is kept small.
const DELTA_SHARE: usize = 16;
/// Below this many changed files the delta is kept whatever the repository's size.
const DELTA_MIN: usize = 32;

/// Whether a base cache is due to be written afresh, with `delta` of the repository's `files`
/// kept in the delta beside it and `stale` of its own files changed or gone.
pub(crate) fn base_outgrown(delta: usize, stale: usize, files: usize) -> bool {
    let limit = DELTA_MIN.max(files / DELTA_SHARE);
    delta > limit || stale > limit
}

/// What keeping files as a base cache file with a small delta beside it needs written now.
pub(super) enum Rewrite {
    Nothing,
    Base,
    Delta,
}

impl Rewrite {
    /// Of the `files` to keep, `changed` are not in the base as they are and `stale` of the
    /// base's own are gone or changed; `delta_holds_changed`: the delta beside it already holds
    /// exactly the changed ones; `base_usable`: there is a base a delta can go beside.
    pub(super) fn due(
        files: usize,
        changed: usize,
        stale: usize,
        delta_holds_changed: bool,
        base_usable: bool,
    ) -> Rewrite {
        if changed == 0 && stale == 0 && delta_holds_changed {
            return Rewrite::Nothing;
        }
        if !base_usable || base_outgrown(changed, stale, files) {
            return Rewrite::Base;
        }
        match delta_holds_changed {
            true => Rewrite::Nothing,
            false => Rewrite::Delta,
        }
    }
}

impl Cache {
    /// The cache for `root`, empty when there is none yet or it cannot be used.
    pub fn load(root: &Path, dir: Option<&Path>, warnings: &mut Vec<String>) -> Cache {
        let mut cache = Cache {
            path: None,
            entries: HashMap::new(),
            base: HashMap::new(),
            delta: Vec::new(),
        };
        let Some(path) = Cache::path_for(root, dir) else {
            return cache;
        };
        let base = load_entries(&path, warnings);
        let delta = load_entries(&delta_path(&path), warnings);
        cache.base = (base.iter()).map(|e| (e.path.clone(), e.hash)).collect();
        cache.delta = delta.iter().map(|e| (e.path.clone(), e.hash)).collect();
        cache.delta.sort_unstable();
        for entry in base.into_iter().chain(delta) {
            cache
                .entries
                .entry(entry.path.clone())
                .or_default()
                .push(entry);
        }
        cache.path = Some(path);
        cache
    }

    /// Where the cache of the repository at `root` lives in the cache folder `dir` (none: no
    /// cache).
    pub fn path_for(root: &Path, dir: Option<&Path>) -> Option<PathBuf> {
        let key = blake3::hash(root.to_string_lossy().as_bytes()).to_hex();
        Some(dir?.join("index").join(format!("{}.bin", &key[..32])))
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The cached entries for a path (none, or those of the base and the delta: the one whose
    /// hash is the file's is to be used).
    pub fn take(&mut self, rel: &str) -> Vec<Entry> {
        self.entries.remove(rel).unwrap_or_default()
    }

    /// Keep the facts of `files` for the next open, writing only what changed: the files whose
    /// facts the base does not hold (new or changed) go to the small delta beside it, and the
    /// base is written afresh once the delta or its stale entries grow past a share of the
    /// repository, or when some of its facts did not fit their file (`reparsed`). Nothing is written when the cache already
    /// holds every file as it is. Each write is atomic (temp file + rename), so processes
    /// sharing the cache never see a torn file; a warning if it fails.
    pub fn store(&self, files: &[SourceFile], reparsed: &HashSet<&str>) -> Option<String> {
        let path = self.path.as_ref()?;
        let in_base = |f: &SourceFile| {
            self.base.get(&f.path) == Some(&f.hash) && !reparsed.contains(f.path.as_str())
        };
        let changed: Vec<&SourceFile> = files.iter().filter(|f| !in_base(f)).collect();
        let stale = self.base.len() - (files.len() - changed.len());
        let mut delta: Vec<(String, [u8; 32])> =
            changed.iter().map(|f| (f.path.clone(), f.hash)).collect();
        delta.sort_unstable();
        // Facts that did not fit their file stay wherever they were read from (the base or the
        // delta) until a new base replaces both: a delta beside them would leave them to be
        // read, and found wrong, again.
        let base_usable = !self.base.is_empty() && reparsed.is_empty();
        let due = Rewrite::due(
            files.len(),
            changed.len(),
            stale,
            delta == self.delta,
            base_usable,
        );
        let written = match due {
            Rewrite::Nothing => return None,
            Rewrite::Base => {
                write(path, files.iter()).and_then(|()| remove_if_there(&delta_path(path)))
            }
            Rewrite::Delta => write(&delta_path(path), changed.into_iter()),
        };
        not_written(path, written, "running without a cache")
    }
}

/// The one warning line for the cache file `path` when `written` failed, saying what follows.
pub(super) fn not_written(path: &Path, written: std::io::Result<()>, so: &str) -> Option<String> {
    let err = written.err()?;
    Some(format!(
        "cache {}: cannot write ({err}); {so}",
        path.display()
    ))
}

/// The delta beside the base cache file `path`: the facts of the files changed since the base
/// was written.
fn delta_path(path: &Path) -> PathBuf {
    path.with_extension("delta")
}

/// The entries of the cache file at `path`, none when it is missing or unusable (with one
/// warning line saying why).
fn load_entries(path: &Path, warnings: &mut Vec<String>) -> Vec<Entry> {
    let why = match read_bounded(path) {
        Ok(Some(bytes)) => match decode(Arc::new(bytes)) {
            Ok(entries) => return entries,
            Err(why) => why.to_string(),
        },
        Ok(None) => return Vec::new(),
        Err(why) => why.to_string(),
    };
    warnings.push(format!("cache {}: {why}; rebuilding it", path.display()));
    Vec::new()
}

/// Remove the file at `path`, if there is one.
pub(super) fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Answers cached one file each beside the index's cache, in `<hash of root path>.<name>/`,
/// each under a key naming everything it was derived from (for a language server's answer
/// at a hole: the server, the file's text, the hole and the files it imports), so an
/// answer is reused exactly while those stay as they were; a key never matches stale state.
pub struct Keyed {
    dir: PathBuf,
}

impl Keyed {
    /// The answers called `name` beside the index's cache file `index_file`.
    pub fn beside(index_file: &Path, name: &str) -> Keyed {
        Keyed {
            dir: index_file.with_extension(name),
        }
    }

    fn path(&self, key: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{}.bin", blake3::Hash::from_bytes(*key).to_hex()))
    }

    /// The answer kept under `key`, if any; one that cannot be read or fails its checksum is
    /// logged and asked again.
    pub fn load<T: DeserializeOwned>(&self, key: &[u8; 32]) -> Option<T> {
        let path = self.path(key);
        let bytes = match read_bounded(&path) {
            Ok(bytes) => bytes?,
            Err(why) => {
                tracing::warn!(path = %path.display(), %why, "cached answer; asking again");
                return None;
            }
        };
        let payload = checked(&bytes)
            .map_err(|why| tracing::warn!(path = %path.display(), why, "cached answer"))
            .ok()?;
        let (stored, rest) = postcard::take_from_bytes::<[u8; 32]>(payload).ok()?;
        (stored == *key).then(|| postcard::from_bytes(rest).ok())?
    }

    /// Keep `answer` under `key` (a warning in the log if it cannot be written).
    pub fn store<T: Serialize>(&self, key: &[u8; 32], answer: &T) {
        let path = self.path(key);
        let written = postcard::to_stdvec(&(key, answer))
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_checked(&path, &bytes));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep an answer");
        }
    }
}

/// Which files derived state was built from: each file's path and content hash, in the
/// index's order (a [`crate::lang::FileId`] is a position here).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileTable(Vec<(String, [u8; 32])>);

impl FileTable {
    pub fn of(files: &[SourceFile]) -> FileTable {
        FileTable(files.iter().map(|f| (f.path.clone(), f.hash)).collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Every file's path, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(path, _)| path.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Names these files and contents: the same key as state derived from them has.
    pub fn key(&self) -> [u8; 32] {
        files_key(self.0.iter().map(|(path, hash)| (path.as_str(), hash)))
    }

    /// The key of a segment laid over a base derived from these files for `today`'s: a
    /// segment goes with one base and one set of files.
    pub fn segment_key(&self, today: &FileTable) -> [u8; 32] {
        let mut key = blake3::Hasher::new();
        key.update(&self.key());
        key.update(&today.key());
        *key.finalize().as_bytes()
    }
}

/// Names a list of files (path, content hash), in order.
fn files_key<'a>(files: impl Iterator<Item = (&'a str, &'a [u8; 32])>) -> [u8; 32] {
    let mut key = blake3::Hasher::new();
    for (path, hash) in files {
        key.update(&(path.len() as u64).to_le_bytes());
        key.update(path.as_bytes());
        key.update(hash);
    }
    *key.finalize().as_bytes()
}

/// How the files of a repository changed since derived state was built from them: what the
/// state keeps of an unchanged file moves to the file's new position, what it holds of a
/// changed or removed file goes, and a changed or added file is derived again.
#[derive(Debug, PartialEq)]
pub struct FileChanges {
    /// Per file the state was built from: its position among today's files, if it is there
    /// with the same content. Increasing where present: the index lists files in walk order.
    pub kept: Vec<Option<u32>>,
    /// Today's files that are new or changed, in order.
    pub derived_again: Vec<u32>,
}

impl FileChanges {
    pub fn between(built_from: &FileTable, files: &[SourceFile]) -> FileChanges {
        let today: HashMap<(&str, &[u8; 32]), u32> = (files.iter().enumerate())
            .map(|(id, f)| ((f.path.as_str(), &f.hash), id as u32))
            .collect();
        let kept: Vec<Option<u32>> = (built_from.0.iter())
            .map(|(path, hash)| today.get(&(path.as_str(), hash)).copied())
            .collect();
        let mut is_kept = vec![false; files.len()];
        for &id in kept.iter().flatten() {
            is_kept[id as usize] = true;
        }
        let derived_again = (0..files.len() as u32)
            .filter(|&id| !is_kept[id as usize])
            .collect();
        FileChanges {
            kept,
            derived_again,
        }
    }

    /// No change to `files` files: each kept where it was.
    pub fn none(files: usize) -> FileChanges {
        FileChanges {
            kept: (0..files as u32).map(Some).collect(),
            derived_again: Vec::new(),
        }
    }

    /// Per today's file (of `files`): the position it had among the files the state was built
    /// from, if it is kept as it was (the inverse of `kept`).
    pub fn kept_from(&self, files: usize) -> Vec<Option<usize>> {
        let mut kept_from = vec![None; files];
        for (old, kept) in self.kept.iter().enumerate() {
            if let Some(new) = kept {
                kept_from[*new as usize] = Some(old);
            }
        }
        kept_from
    }

    /// How many of the files the state was built from are changed or gone.
    pub fn dropped(&self) -> usize {
        self.kept.iter().filter(|new| new.is_none()).count()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.derived_again.is_empty()
            && self
                .kept
                .iter()
                .enumerate()
                .all(|(old, new)| *new == Some(old as u32))
    }
}

/// The bytes of the cache file at `path`, mapped (none when there is no file yet). Only a
/// regular file of at most [`MAX_CACHE_BYTES`] is mapped: a FIFO would block and `/dev/zero`
/// never end. Mapped rather than read: a cache of tens of megabytes is decoded straight from
/// the page cache, without copying it into fresh memory first (which cost a quarter of a warm
/// run on guava).
pub(super) fn read_bounded(path: &Path) -> Result<Option<memmap2::Mmap>, Refusal> {
    let file = match super::read::open_regular_file(path, MAX_CACHE_BYTES) {
        // An empty file cannot be mapped, and no cache is empty: one cut short.
        Ok((_, 0)) => {
            return Err(Refusal::Unreadable(
                std::io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        Ok((file, _)) => file,
        Err(Refusal::Missing) => return Ok(None),
        Err(why) => return Err(why),
    };
    // SAFETY: keyhole never writes a cache file in place: every write goes to a fresh file
    // renamed over the old one (`write_checked`), so the mapped file keeps its contents while
    // it is mapped. Only another program truncating it meanwhile could make a read fault.
    let mapped = unsafe { memmap2::Mmap::map(&file) };
    mapped.map(Some).map_err(Refusal::Unreadable)
}

/// Whether cached `facts` can describe `text`: every span lies inside it on character
/// boundaries and every line number is one of its lines. A cache that passes its checksum may
/// still hold another text's facts (written by hand, or by a bug), and they are used to cut
/// the text.
pub fn facts_fit(facts: &FileFacts, text: &str, line_count: usize) -> bool {
    // Destructured in full so that a new field of the facts cannot be forgotten here.
    let FileFacts {
        package: _,
        types,
        imports: _,
        identifiers,
        type_identifiers,
        field_declarations,
        string_literals,
        methods,
        name_usages,
        syntax_errors: _,
        // Checked when first decoded, against the text then ([`crate::lang::Outlines`]).
        outline: _,
        top_level_names: _,
        wildcard_names: _,
        dotted_usages,
        documentation,
        ambient_modules: _,
    } = facts;
    // Walked in place, not gathered first: gathering them cost fresh memory for every file.
    let method_spans = methods.iter().flat_map(
        |MethodDecl {
             name,
             signature,
             with_body,
         }| [*name, *signature, *with_body],
    );
    let mut spans = (types.iter().map(|t| t.name_span))
        .chain(identifiers.iter().copied())
        .chain(type_identifiers.iter().copied())
        .chain(field_declarations.iter().copied())
        .chain(string_literals.iter().copied())
        .chain(documentation.iter().copied())
        .chain(method_spans);
    spans.all(|span| span.fits(text))
        && (name_usages.all_lines().iter())
            .chain(dotted_usages.all_lines())
            .all(|&line| (line as usize) < line_count.max(1))
}

/// What names the checksum of every cache file: its first half of the seal before the payload.
/// A file sealed otherwise (by a keyhole that summed with blake3) is of another version.
const SEAL_KIND: &[u8; 16] = b"keyhole xxh3-128";

/// The 32 bytes written before a cache file's payload: [`SEAL_KIND`], then the payload's
/// xxh3-128 (little-endian). The sum guards against torn and damaged files, not against
/// anyone forging one (whoever can write the cache can write anything there), so it is
/// xxh3's, which sums the tens of megabytes of cache a process loads several times faster
/// than blake3.
pub(crate) fn seal(payload: &[u8]) -> [u8; 32] {
    let mut seal = [0; 32];
    seal[..16].copy_from_slice(SEAL_KIND);
    seal[16..].copy_from_slice(&xxhash_rust::xxh3::xxh3_128(payload).to_le_bytes());
    seal
}

/// The payload of a cache file, once its seal says it is what was written.
pub(super) fn checked(bytes: &[u8]) -> Result<&[u8], &'static str> {
    if bytes.len() < 32 {
        return Err("truncated");
    }
    let (sealed, payload) = bytes.split_at(32);
    if sealed[..16] != SEAL_KIND[..] {
        return Err("written by another version");
    }
    if seal(payload)[..] != *sealed {
        return Err("checksum mismatch (corrupt)");
    }
    Ok(payload)
}

fn decode(file: Arc<memmap2::Mmap>) -> Result<Vec<Entry>, &'static str> {
    let payload = checked(&file)?;
    // The version leads the payload; read it alone first, as another version's entries may
    // not decode at all.
    let (version, _) =
        postcard::take_from_bytes::<u32>(payload).map_err(|_| "does not decode (corrupt)")?;
    if version != FORMAT_VERSION {
        return Err("written by another version");
    }
    let payload: Payload =
        postcard::from_bytes(payload).map_err(|_| "does not decode (corrupt)")?;
    let start = file.as_ptr() as usize;
    let entries = payload.entries.into_iter().map(|entry| {
        // Read in place: the facts' bytes lie inside the mapped file.
        let at = entry.facts.as_ptr() as usize - start;
        Entry {
            path: entry.path,
            hash: entry.hash,
            facts: Encoded {
                file: Arc::clone(&file),
                range: at..at + entry.facts.len(),
            },
        }
    });
    Ok(entries.collect())
}

fn write<'a>(path: &Path, files: impl Iterator<Item = &'a SourceFile>) -> std::io::Result<()> {
    let payload = PayloadRef {
        version: FORMAT_VERSION,
        entries: files
            .map(|f| {
                let facts = postcard::to_stdvec(&f.facts).map_err(std::io::Error::other)?;
                Ok(EntryRef {
                    path: &f.path,
                    hash: &f.hash,
                    facts: Bytes(facts),
                })
            })
            .collect::<std::io::Result<_>>()?,
    };
    let bytes = postcard::to_stdvec(&payload).map_err(std::io::Error::other)?;
    write_checked(path, &bytes)
}

/// Write `bytes` after their [`seal`] to `path`, atomically (temp file + rename).
pub(super) fn write_checked(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("cache path has a parent");
    std::fs::create_dir_all(dir)?;
    let (tmp_path, mut tmp) = tempfile_in(dir)?;
    // No fsync: a cache torn by a crash fails its checksum and is rebuilt, so durability is
    // not worth the time on every open.
    let written = tmp
        .write_all(&seal(bytes))
        .and_then(|()| tmp.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp_path, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    written
}

/// A fresh file next to the target, so the rename stays on one filesystem.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let name = format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let path = dir.join(name.replace(['(', ')'], ""));
    let file = std::fs::File::create(&path)?;
    Ok((path, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_files_facts_decode_alone_and_those_that_do_not_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.bin");
        let java = crate::lang::for_path(Path::new("A.java")).unwrap();
        let facts = java.extract("package p;\nclass A extends B { int x; void f() {} }\n");
        let entry = |path, hash, facts| EntryRef {
            path,
            hash,
            facts: Bytes(facts),
        };
        let payload = PayloadRef {
            version: FORMAT_VERSION,
            entries: vec![
                entry("p/A.java", &[1; 32], postcard::to_stdvec(&facts).unwrap()),
                entry("p/B.java", &[2; 32], vec![0xff; 7]),
            ],
        };
        write_checked(&path, &postcard::to_stdvec(&payload).unwrap()).unwrap();
        let mut warnings = Vec::new();
        let entries = load_entries(&path, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let read: Vec<_> = (entries.iter())
            .map(|e| (e.path.as_str(), e.hash[0], e.facts()))
            .collect();
        assert_eq!(read, [("p/A.java", 1, Some(facts)), ("p/B.java", 2, None)]);
    }
}
