//! Cache files whose arrays are used where they lie in the mapped file, not decoded: a header
//! (checksum, format, key, a table of sections) and sections aligned so that an array of
//! `u32`s is read in place. Loading such a file costs its checksum and a few pages of header,
//! whatever its size; a decoded cache of tens of megabytes cost a tenth of a warm run.
//!
//! Layout: the checksum of everything after it (32 bytes: [`super::cache::seal`]), the format (32), the key
//! (32), the number of sections (u64), each section's offset and length (u64s), then the
//! sections, each starting at a multiple of 8 bytes. Integers are little-endian.

use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

use super::cache::{checked, read_bounded, write_checked};

/// Sections start at a multiple of this many bytes.
const ALIGN: usize = 8;
const HEADER: usize = 32 + 32 + 32 + 8;

/// The format of a cache file: its kind and version, hashed; a file of another format is never
/// read further.
pub fn format_id(name: &str, version: u32) -> [u8; 32] {
    let mut format = blake3::Hasher::new();
    format.update(name.as_bytes());
    format.update(&version.to_le_bytes());
    *format.finalize().as_bytes()
}

/// An array of `u32`s, built in memory or lying in a mapped cache file.
#[derive(Clone)]
pub enum Words {
    Owned(Vec<u32>),
    /// `len` words from byte `start` of `file` (aligned; checked when made).
    Mapped {
        file: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl Default for Words {
    fn default() -> Self {
        Words::Owned(Vec::new())
    }
}

impl From<Vec<u32>> for Words {
    fn from(words: Vec<u32>) -> Self {
        Words::Owned(words)
    }
}

impl Deref for Words {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match self {
            Words::Owned(words) => words,
            // SAFETY: `Sections::words` made this only for a range inside the mapping, starting
            // at a multiple of 4 bytes of a page-aligned mapping, on a little-endian machine;
            // the mapping lives as long as `file`, and cache files are never written in place.
            Words::Mapped { file, start, len } => unsafe {
                std::slice::from_raw_parts(file.as_ptr().add(*start).cast::<u32>(), *len)
            },
        }
    }
}

impl Words {
    /// The words `range` of these (empty where `range` is not inside them), in place where
    /// they are mapped.
    pub fn part(&self, range: Range<usize>) -> Words {
        if self.get(range.clone()).is_none() {
            return Words::default();
        }
        match self {
            Words::Owned(words) => Words::Owned(words[range].to_vec()),
            Words::Mapped { file, start, .. } => Words::Mapped {
                file: Arc::clone(file),
                start: start + 4 * range.start,
                len: range.len(),
            },
        }
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Text built in memory or lying in a mapped cache file (checked to be UTF-8 when made).
#[derive(Clone)]
pub enum Text {
    Owned(String),
    Mapped {
        file: Arc<memmap2::Mmap>,
        range: Range<usize>,
    },
}

impl Default for Text {
    fn default() -> Self {
        Text::Owned(String::new())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text::Owned(text)
    }
}

impl Text {
    /// The part `range` of this text, in place where it is mapped; none when `range` is not
    /// inside it on character boundaries.
    pub fn part(&self, range: Range<usize>) -> Option<Text> {
        self.get(range.clone())?;
        Some(match self {
            Text::Owned(text) => Text::Owned(text[range].to_string()),
            Text::Mapped { file, range: whole } => Text::Mapped {
                file: Arc::clone(file),
                range: whole.start + range.start..whole.start + range.end,
            },
        })
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Text::Owned(text) => text,
            // SAFETY: `Sections::text` checked these bytes are UTF-8 when it made this.
            Text::Mapped { file, range } => unsafe {
                std::str::from_utf8_unchecked(&file[range.clone()])
            },
        }
    }
}

/// Strings and their ids (the embedded model's tokens, the search indexes' terms): id 0 is the
/// empty string (the model's file boundary), the others follow the strings' order, so that ids
/// do not depend on the order files came in and a string gained or lost leaves the others in
/// order. Held as one text and where each string ends in it, and looked up by binary search:
/// loading it from a cache allocates nothing per string (a map of a large repository's tokens
/// took a tenth of a warm run to build).
#[derive(Default)]
pub struct Vocabulary {
    /// Every token's string, in id order, one after another.
    text: Text,
    /// Where each id's string ends in `text` (id 0, the boundary, is empty).
    ends: Words,
}

impl Vocabulary {
    /// The vocabulary of `tokens`, sorted and without repeats.
    pub fn of_sorted<'s>(tokens: impl IntoIterator<Item = &'s str>) -> Self {
        let mut text = String::new();
        let mut ends = vec![0];
        for token in tokens {
            text.push_str(token);
            ends.push(text.len() as u32);
        }
        Vocabulary {
            text: Text::Owned(text),
            ends: ends.into(),
        }
    }

    /// A vocabulary read from a cache; none when its ends are out of order, cut a character,
    /// or its strings are out of order.
    pub fn checked(text: Text, ends: Words) -> Option<Self> {
        let cuts_well = ends.first() == Some(&0)
            && ends.windows(2).all(|w| w[0] < w[1])
            && ends.last().is_some_and(|&end| end as usize == text.len())
            && ends.iter().all(|&end| text.is_char_boundary(end as usize));
        let vocab = Vocabulary { text, ends };
        let sorted =
            cuts_well && (2..vocab.len() as u32).all(|id| vocab.string(id - 1) < vocab.string(id));
        sorted.then_some(vocab)
    }

    /// The strings, one after another, as the cache holds them.
    pub fn text_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// Where each id's string ends in the text.
    pub fn ends(&self) -> &[u32] {
        &self.ends
    }

    /// Ids in all, the boundary's included.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn string(&self, id: u32) -> &str {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.text[start as usize..self.ends[id] as usize]
    }

    /// Every token's id and string, the boundary's left out.
    pub fn strings(&self) -> impl Iterator<Item = (u32, &str)> {
        (1..self.len() as u32).map(|id| (id, self.string(id)))
    }

    /// How many tokens sort before `token` (the boundary left out).
    pub fn count_below(&self, token: &str) -> u32 {
        let (mut lo, mut hi) = (1, self.len() as u32);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.string(mid) < token {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - 1
    }

    pub fn get(&self, token: &str) -> Option<u32> {
        let id = self.count_below(token) + 1;
        (!token.is_empty() && (id as usize) < self.len() && self.string(id) == token).then_some(id)
    }
}

/// Lists of values flattened in `values`, delimited by `starts`, built one list at a time.
pub fn push_list(
    starts: &mut Vec<u32>,
    values: &mut Vec<u32>,
    list: impl IntoIterator<Item = u32>,
) {
    values.extend(list);
    starts.push(values.len() as u32);
}

/// List `list` of those flattened in `values` and delimited by `starts`; empty where a cache
/// file's lists do not hold together.
pub fn list<'a>(values: &'a [u32], starts: &[u32], list: usize) -> &'a [u32] {
    let (Some(&start), Some(&end)) = (starts.get(list), starts.get(list + 1)) else {
        return &[];
    };
    values.get(start as usize..end as usize).unwrap_or(&[])
}

/// Where part `part` lies of parts laid one after another that end at `ends`.
pub fn part_range(ends: &[u32], part: usize) -> Range<usize> {
    let start = part.checked_sub(1).map_or(0, |before| ends[before]);
    start as usize..ends[part] as usize
}

/// The bytes of `words` as the file holds them (little-endian).
pub fn word_bytes(words: &[u32]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: any u32 is four initialized bytes, and u8 needs no alignment.
        std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words))
        })
    } else {
        std::borrow::Cow::Owned(words.iter().flat_map(|w| w.to_le_bytes()).collect())
    }
}

/// Write `sections` to `path` under `format` and `key`, atomically (temp file + rename).
pub fn write_sections(
    path: &Path,
    format: &[u8; 32],
    key: &[u8; 32],
    sections: &[&[u8]],
) -> std::io::Result<()> {
    let table = HEADER + 16 * sections.len();
    let mut offsets = Vec::with_capacity(sections.len());
    let mut end = table;
    for section in sections {
        let start = end.next_multiple_of(ALIGN);
        offsets.push(start);
        end = start + section.len();
    }
    // The payload is what follows the checksum; filled once, never zeroed first.
    let mut payload: Vec<u8> = Vec::with_capacity(end - 32);
    payload.extend_from_slice(format);
    payload.extend_from_slice(key);
    payload.extend_from_slice(&(sections.len() as u64).to_le_bytes());
    for (section, start) in sections.iter().zip(&offsets) {
        payload.extend_from_slice(&(*start as u64).to_le_bytes());
        payload.extend_from_slice(&(section.len() as u64).to_le_bytes());
    }
    for (section, start) in sections.iter().zip(&offsets) {
        payload.resize(start - 32, 0);
        payload.extend_from_slice(section);
    }
    write_checked(path, &payload)
}

/// A cache file of sections, mapped and checked.
pub struct Sections {
    file: Arc<memmap2::Mmap>,
    key: [u8; 32],
    /// Each section's bytes in the file.
    ranges: Vec<Range<usize>>,
}

/// What a cache file of sections holds.
pub enum Opened {
    Found(Sections),
    Missing,
    /// Another format, torn or corrupt: the one line saying so.
    Unusable(String),
}

impl Sections {
    /// The sections of the file at `path`, if it is there, of `format` and whole.
    pub fn open(path: &Path, format: &[u8; 32]) -> Opened {
        let unusable =
            |why: &str| Opened::Unusable(format!("cache {}: {why}; rebuilding it", path.display()));
        let file = match read_bounded(path) {
            Ok(Some(file)) => file,
            Ok(None) => return Opened::Missing,
            Err(why) => return unusable(&why.to_string()),
        };
        if file.len() < HEADER {
            return unusable("truncated");
        }
        // The format first: a file of another format is not worth its checksum.
        if file[32..64] != format[..] {
            return unusable("written by another version");
        }
        if let Err(why) = checked(&file) {
            return unusable(why);
        }
        let word = |at: usize| {
            file.get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
        };
        let count = word(96).unwrap_or(usize::MAX);
        let ranges: Option<Vec<Range<usize>>> = (0..count.min(file.len() / 16))
            .map(|i| {
                let (start, len) = (word(HEADER + 16 * i)?, word(HEADER + 16 * i + 8)?);
                let end = start.checked_add(len)?;
                (start.is_multiple_of(ALIGN) && end <= file.len()).then_some(start..end)
            })
            .collect();
        let Some(ranges) = ranges.filter(|r| r.len() == count) else {
            return unusable("does not decode (corrupt)");
        };
        let key = file[64..96].try_into().expect("32 bytes");
        Opened::Found(Sections {
            file: Arc::new(file),
            key,
            ranges,
        })
    }

    /// What `decode` reads from the sections of the file at `path`, if it is there, of
    /// `format`, whole and written under `key` (any key when none is asked for); a file that
    /// cannot be trusted or does not decode is reported with one line in the log, to be
    /// rebuilt.
    pub fn read<T>(
        path: &Path,
        format: &[u8; 32],
        key: Option<&[u8; 32]>,
        decode: impl FnOnce(&Sections) -> Option<T>,
    ) -> Option<T> {
        match Sections::open(path, format) {
            Opened::Found(sections) if key.is_none_or(|key| sections.key() == key) => {
                decode(&sections).or_else(|| {
                    let path = path.display();
                    tracing::warn!("cache {path}: does not decode (corrupt); rebuilding it");
                    None
                })
            }
            Opened::Found(_) | Opened::Missing => None,
            Opened::Unusable(why) => {
                tracing::warn!("{why}");
                None
            }
        }
    }

    /// The key the file was written under.
    pub fn key(&self) -> &[u8; 32] {
        &self.key
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn bytes(&self, section: usize) -> &[u8] {
        &self.file[self.ranges[section].clone()]
    }

    /// Section `section` as `u32`s, in place; none when its length is not whole words.
    pub fn words(&self, section: usize) -> Option<Words> {
        let range = self.ranges[section].clone();
        if !range.len().is_multiple_of(4) {
            return None;
        }
        let len = range.len() / 4;
        let aligned = (self.file.as_ptr() as usize + range.start).is_multiple_of(4);
        Some(if cfg!(target_endian = "little") && aligned {
            Words::Mapped {
                file: Arc::clone(&self.file),
                start: range.start,
                len,
            }
        } else {
            let word = |c: &[u8]| u32::from_le_bytes(c.try_into().expect("4 bytes"));
            Words::Owned(self.file[range].chunks_exact(4).map(word).collect())
        })
    }

    /// Section `section` as text, in place, cut into parts that end at `ends` (the last at the
    /// section's end), each checked on the CPU pool; none when a part is not UTF-8 or the ends
    /// are out of order. Checked part by part, a text of tens of megabytes costs its check
    /// split over the cores.
    pub fn text_in_parts(&self, section: usize, ends: &[u32]) -> Option<Text> {
        use rayon::prelude::*;
        let range = self.ranges[section].clone();
        let bytes = &self.file[range.clone()];
        let in_order = ends.windows(2).all(|w| w[0] <= w[1])
            && ends.last().map_or(0, |&end| end as usize) == bytes.len();
        let utf8 = || {
            (0..ends.len())
                .into_par_iter()
                .all(|i| std::str::from_utf8(&bytes[part_range(ends, i)]).is_ok())
        };
        // Parts that are each UTF-8 make a UTF-8 whole.
        (in_order && utf8()).then(|| Text::Mapped {
            file: Arc::clone(&self.file),
            range,
        })
    }

    /// Section `section` as text, in place; none when it is not UTF-8.
    pub fn text(&self, section: usize) -> Option<Text> {
        let range = self.ranges[section].clone();
        std::str::from_utf8(&self.file[range.clone()]).ok()?;
        Some(Text::Mapped {
            file: Arc::clone(&self.file),
            range,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_come_back_in_place_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        let format = format_id("x", 1);
        let words = [1u32, 2, u32::MAX];
        write_sections(
            &path,
            &format,
            &[7; 32],
            &[b"abc", &word_bytes(&words), "é".as_bytes()],
        )
        .unwrap();
        let Opened::Found(sections) = Sections::open(&path, &format) else {
            panic!("not found");
        };
        assert_eq!(sections.key(), &[7; 32]);
        assert_eq!(sections.bytes(0), b"abc");
        let read = sections.words(1).unwrap();
        assert!(matches!(read, Words::Mapped { .. }));
        assert_eq!(&read[..], &words);
        assert_eq!(&*sections.text(2).unwrap(), "é");
        assert!(sections.words(0).is_none());
        assert!(matches!(
            Sections::open(&path, &format_id("x", 2)),
            Opened::Unusable(why) if why.contains("another version")
        ));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            Sections::open(&path, &format),
            Opened::Unusable(why) if why.contains("corrupt")
        ));
        std::fs::write(&path, &bytes[..50]).unwrap();
        assert!(matches!(
            Sections::open(&path, &format),
            Opened::Unusable(_)
        ));
        assert!(matches!(
            Sections::open(&dir.path().join("none"), &format),
            Opened::Missing
        ));
    }
}
