//! The texts of a repository's files as last read, kept beside the facts' cache and used where
//! they lie in the mapped file: while a file's metadata is what it was when its text was kept,
//! the kept text (with its line starts and content hash) is the file's, and the file is neither
//! read nor hashed again. Reading and hashing every file was a fifth of a warm open on guava,
//! before the page faults of copying the texts into fresh memory.
//!
//! A file's metadata is summed ([`Metadata`]: device, inode, size, modification and change
//! times, mode) only once its change time has stood for [`SETTLED`]: a file written again
//! within one tick of the filesystem's clock after it was read could otherwise keep the same
//! times while its text changed. The change time cannot be set back by a program, so a later
//! write always shows.
//!
//! Layout: a file of sections ([`super::mapped`]) per repository, `<index cache>.texts`, with
//! a small delta beside it (`.texts-delta`) holding the files changed since, as the facts'
//! cache has ([`super::cache::base_outgrown`]). Sections: the paths (a sorted
//! [`Vocabulary`]), then in the paths' order where each text ends in the texts, the texts,
//! where each file's line starts end in the line starts, the line starts, each metadata sum
//! (two words) and each content hash (eight words).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rayon::prelude::*;

use super::SourceFile;
use super::cache::{Rewrite, not_written, remove_if_there};
use super::mapped::{
    Opened, Sections, Text, Vocabulary, Words, format_id, part_range, word_bytes, write_sections,
};

/// Bumped whenever the layout changes, so that another version's file is never read.
const VERSION: u32 = 1;

/// How long a file's change time must have stood before its metadata is trusted to show a
/// change (the coarsest file times in use tick every two seconds).
pub const SETTLED: Duration = Duration::from_secs(2);

/// A sum of the metadata that any write to a file changes; none for a file whose metadata
/// cannot show a change yet ([`SETTLED`]), or where there is no such metadata.
pub type Metadata = Option<u64>;

/// The sum of `path`'s metadata as [`Metadata`] says, for files changed before
/// `settled_before`. Links are not followed: a file that became a link is read (and refused)
/// as such.
pub fn metadata_sum(path: &Path, settled_before: SystemTime) -> Metadata {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        let changed = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            meta.ctime().try_into().ok()?,
            meta.ctime_nsec() as u32,
        ))?;
        if !meta.is_file() || changed >= settled_before {
            return None;
        }
        let fields = [
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime() as u64,
            meta.mtime_nsec() as u64,
            meta.ctime() as u64,
            meta.ctime_nsec() as u64,
            u64::from(meta.mode()),
        ];
        let mut bytes = [0; 64];
        for (bytes, field) in bytes.chunks_exact_mut(8).zip(fields) {
            bytes.copy_from_slice(&field.to_le_bytes());
        }
        Some(xxhash_rust::xxh3::xxh3_64(&bytes))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, settled_before);
        None
    }
}

/// One file's kept text, as it was when its metadata summed to what it sums to now.
pub struct KeptText {
    pub text: Text,
    pub line_starts: Words,
    pub hash: [u8; 32],
}

/// One kept file of texts (the base or the delta).
struct Kept {
    paths: Vocabulary,
    text_ends: Words,
    texts: Text,
    line_ends: Words,
    line_starts: Words,
    sums: Words,
    hashes: Words,
}

impl Kept {
    /// The file at `path`, none when it is missing, of another version, torn, or its parts do
    /// not hold together (with the one line saying why).
    fn open(path: &Path, warnings: &mut Vec<String>) -> Option<Kept> {
        let sections = match Sections::open(path, &format_id("texts", VERSION)) {
            Opened::Found(sections) => sections,
            Opened::Missing => return None,
            Opened::Unusable(why) => {
                warnings.push(why);
                return None;
            }
        };
        let kept = (|| {
            (sections.len() == 8).then_some(())?;
            let paths = Vocabulary::checked(sections.text(0)?, sections.words(1)?)?;
            let text_ends = sections.words(2)?;
            let kept = Kept {
                paths,
                texts: sections.text_in_parts(3, &text_ends)?,
                text_ends,
                line_ends: sections.words(4)?,
                line_starts: sections.words(5)?,
                sums: sections.words(6)?,
                hashes: sections.words(7)?,
            };
            kept.fits().then_some(kept)
        })();
        if kept.is_none() {
            warnings.push(format!(
                "cache {}: does not decode (corrupt); rebuilding it",
                path.display()
            ));
        }
        kept
    }

    /// Whether the parts hold together: one of each per path (the texts were cut where
    /// their ends say when checked), and every line start in its text, just after a line
    /// break (checked on the CPU pool).
    fn fits(&self) -> bool {
        let files = self.paths.len() - 1;
        let sized = self.text_ends.len() == files
            && self.line_ends.len() == files
            && self.sums.len() == 2 * files
            && self.hashes.len() == 8 * files
            && self.line_ends.windows(2).all(|w| w[0] <= w[1])
            && self.line_ends.last().map_or(0, |&end| end as usize) == self.line_starts.len();
        sized
            && (0..files).into_par_iter().all(|file| {
                let text = &self.texts.as_bytes()[self.text_range(file)];
                let starts = &self.line_starts[self.line_range(file)];
                starts.first() == Some(&0)
                    && starts.windows(2).all(|w| w[0] < w[1])
                    && starts[1..]
                        .iter()
                        .all(|&s| (s as usize) < text.len() && text[s as usize - 1] == b'\n')
            })
    }

    fn text_range(&self, file: usize) -> Range<usize> {
        part_range(&self.text_ends, file)
    }

    fn line_range(&self, file: usize) -> Range<usize> {
        part_range(&self.line_ends, file)
    }

    /// File `rel`'s place, if kept.
    fn find(&self, rel: &str) -> Option<usize> {
        Some(self.paths.get(rel)? as usize - 1)
    }

    fn sum(&self, file: usize) -> u64 {
        u64::from(self.sums[2 * file]) | u64::from(self.sums[2 * file + 1]) << 32
    }

    fn get(&self, rel: &str, sum: u64) -> Option<KeptText> {
        let file = self.find(rel).filter(|&file| self.sum(file) == sum)?;
        let mut hash = [0; 32];
        for (bytes, word) in hash
            .chunks_exact_mut(4)
            .zip(&self.hashes[8 * file..8 * file + 8])
        {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        Some(KeptText {
            text: self.texts.part(self.text_range(file))?,
            line_starts: self.line_starts.part(self.line_range(file)),
            hash,
        })
    }
}

/// The kept texts of one repository (none when the index is not cached).
#[derive(Default)]
pub struct KeptTexts {
    path: Option<PathBuf>,
    base: Option<Kept>,
    delta: Option<Kept>,
}

impl KeptTexts {
    /// The texts kept beside the facts' cache file `cache` (none: no cache).
    pub fn load(cache: Option<&Path>, warnings: &mut Vec<String>) -> KeptTexts {
        let Some(cache) = cache else {
            return KeptTexts::default();
        };
        let path = cache.with_extension("texts");
        KeptTexts {
            base: Kept::open(&path, warnings),
            delta: Kept::open(&delta_path(&path), warnings),
            path: Some(path),
        }
    }

    /// Whether texts are kept at all (not without a cache): else a file's metadata is not
    /// worth summing.
    pub fn keeps(&self) -> bool {
        self.path.is_some()
    }

    /// File `rel`'s kept text, if its metadata still sums to `sum`.
    pub fn get(&self, rel: &str, sum: u64) -> Option<KeptText> {
        let delta = self.delta.as_ref().and_then(|kept| kept.get(rel, sum));
        delta.or_else(|| self.base.as_ref()?.get(rel, sum))
    }

    /// Keep the texts of `files` whose metadata is summed, writing only what changed: the
    /// files the base does not hold as they are go to the delta, and the base is written
    /// afresh once that grows past a share of the repository. Each write is atomic; a warning
    /// if one fails.
    pub fn store(&self, files: &[SourceFile]) -> Option<String> {
        let path = self.path.as_ref()?;
        let kept = |kept: &Option<Kept>, f: &SourceFile| {
            let (kept, sum) = (kept.as_ref(), f.metadata);
            kept.zip(sum).is_some_and(|(kept, sum)| {
                kept.find(&f.path).is_some_and(|file| kept.sum(file) == sum)
            })
        };
        let summed: Vec<&SourceFile> = files.iter().filter(|f| f.metadata.is_some()).collect();
        let changed: Vec<&SourceFile> = (summed.iter().copied())
            .filter(|f| !kept(&self.base, f))
            .collect();
        let base_files = self.base.as_ref().map_or(0, |kept| kept.paths.len() - 1);
        let stale = base_files.saturating_sub(summed.len() - changed.len());
        let delta_files = self.delta.as_ref().map_or(0, |kept| kept.paths.len() - 1);
        let delta_holds_changed =
            changed.len() == delta_files && changed.iter().all(|f| kept(&self.delta, f));
        let due = Rewrite::due(
            files.len(),
            changed.len(),
            stale,
            delta_holds_changed,
            self.base.is_some(),
        );
        let written = match due {
            Rewrite::Nothing => return None,
            // No base of nothing: every file's times may still be settling.
            Rewrite::Base if summed.is_empty() => return None,
            Rewrite::Base => write(path, summed).and_then(|()| remove_if_there(&delta_path(path))),
            Rewrite::Delta if changed.is_empty() => remove_if_there(&delta_path(path)),
            Rewrite::Delta => write(&delta_path(path), changed),
        };
        not_written(path, written, "texts are read again next time")
    }
}

fn delta_path(path: &Path) -> PathBuf {
    path.with_extension("texts-delta")
}

/// The most text kept: a repository with more (some hundred times Django's) reads its files.
const MAX_KEPT_BYTES: usize = 1 << 29;

/// Write the texts of `files` (each with its metadata summed) to `path`, in the order of their
/// paths; nothing (and no file there) when they are more than [`MAX_KEPT_BYTES`].
fn write(path: &Path, mut files: Vec<&SourceFile>) -> std::io::Result<()> {
    if files.iter().map(|f| f.text.len()).sum::<usize>() > MAX_KEPT_BYTES {
        return remove_if_there(path);
    }
    files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    let paths = Vocabulary::of_sorted(files.iter().map(|f| f.path.as_str()));
    let (mut texts, mut text_ends) = (String::new(), Vec::with_capacity(files.len()));
    let (mut line_starts, mut line_ends) = (Vec::new(), Vec::with_capacity(files.len()));
    let (mut sums, mut hashes) = (Vec::new(), Vec::new());
    for file in &files {
        texts.push_str(&file.text);
        text_ends.push(texts.len() as u32);
        line_starts.extend_from_slice(&file.line_starts);
        line_ends.push(line_starts.len() as u32);
        let sum = file.metadata.expect("only summed files are kept");
        sums.extend([sum as u32, (sum >> 32) as u32]);
        let hash = file.hash.chunks_exact(4);
        hashes.extend(hash.map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))));
    }
    let sections = [
        paths.text_bytes(),
        &word_bytes(paths.ends()),
        &word_bytes(&text_ends),
        texts.as_bytes(),
        &word_bytes(&line_ends),
        &word_bytes(&line_starts),
        &word_bytes(&sums),
        &word_bytes(&hashes),
    ];
    write_sections(path, &format_id("texts", VERSION), &[0; 32], &sections)
}
