//! What the default encoder reads: hashed sub-tokens. Code is split into identifiers, numbers
//! and punctuation; an identifier counts as itself and as each of its camelCase / snake_case
//! parts, lowercased, so `getUserName` shares features with `userName`. Each sub-token is
//! hashed into one of [`BUCKETS`] embedding rows (row 0 is padding).

use crate::hole::HoleWindow;
use crate::token::Keep;

/// Embedding rows of the hashed encoder.
pub const BUCKETS: usize = 1 << 12;
/// The padding id; its mask weight is 0.
pub const PAD: u32 = 0;
/// Sub-tokens per hole-window part.
pub const PART_LEN: usize = 48;
/// Sub-tokens at the end of the hole-line prefix that form a part of their own: what is
/// typed right before the cursor says most about what comes next.
pub const TAIL_LEN: usize = 4;
/// The hole window's parts: lines before, hole-line prefix, its tail, lines after.
pub const PARTS: usize = 4;
/// A candidate context is read as `CHUNKS` chunks of `CHUNK_LEN` sub-tokens from the end that
/// survives truncation (the attention keys of RLPG-R).
pub const CHUNKS: usize = 16;
pub const CHUNK_LEN: usize = 16;
/// Bytes of a context read from its kept end: enough for `CHUNKS * CHUNK_LEN` sub-tokens of
/// ordinary code without tokenizing the whole context.
const CONTEXT_BYTES: usize = 4096;

/// Calls `emit` with the id of every sub-token of `text`, in order.
pub fn subtokens(text: &str, mut emit: impl FnMut(u32)) {
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' || c == '$' {
            let mut end = start + c.len_utf8();
            while let Some(&(i, c)) = chars.peek() {
                if !(c.is_alphanumeric() || c == '_' || c == '$') {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            word(&text[start..end], &mut emit);
        } else if !c.is_whitespace() {
            let mut buf = [0; 4];
            emit(bucket(c.encode_utf8(&mut buf).as_bytes()));
        }
    }
}

/// A word: numbers all map to one id; identifiers give themselves and their parts.
fn word(word: &str, emit: &mut impl FnMut(u32)) {
    if word.starts_with(|c: char| c.is_ascii_digit()) {
        emit(bucket(b"0"));
        return;
    }
    emit(lowercase_bucket(word));
    let mut parts = 0;
    let mut first = None;
    identifier_parts(word, |part| {
        parts += 1;
        match parts {
            1 => first = Some(part),
            2 => {
                emit(lowercase_bucket(first.take().unwrap_or_default()));
                emit(lowercase_bucket(part));
            }
            _ => emit(lowercase_bucket(part)),
        }
    });
}

/// Calls `part` with each piece of an identifier: `getHTTPResponse_code` → `get`, `HTTP`,
/// `Response`, `code`.
fn identifier_parts<'w>(word: &'w str, mut part: impl FnMut(&'w str)) {
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut chars = word.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if c == '_' || c == '$' {
            if i > start {
                part(&word[start..i]);
            }
            start = i + c.len_utf8();
        } else {
            let lower_to_upper =
                prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) && c.is_uppercase();
            let acronym_end = prev.is_some_and(char::is_uppercase)
                && c.is_uppercase()
                && next.is_some_and(char::is_lowercase);
            if (lower_to_upper || acronym_end) && i > start {
                part(&word[start..i]);
                start = i;
            }
        }
        prev = Some(c);
    }
    if start < word.len() {
        part(&word[start..]);
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a, written out because the shipped model's rows depend on it: it must never change
/// with a dependency's version.
fn bucket(bytes: &[u8]) -> u32 {
    finish(bytes.iter().fold(FNV_OFFSET, |h, &b| fnv(h, b)))
}

/// [`bucket`] of the word lowercased, without building the lowercase string (this runs for
/// every word of 63 contexts per hole).
fn lowercase_bucket(word: &str) -> u32 {
    if word.is_ascii() {
        let hash = word
            .bytes()
            .fold(FNV_OFFSET, |h, b| fnv(h, b.to_ascii_lowercase()));
        return finish(hash);
    }
    let mut hash = FNV_OFFSET;
    for c in word.chars().flat_map(char::to_lowercase) {
        let mut buf = [0; 4];
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            hash = fnv(hash, b);
        }
    }
    finish(hash)
}

fn fnv(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
}

fn finish(hash: u64) -> u32 {
    1 + (hash % (BUCKETS as u64 - 1)) as u32
}

fn ids(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    subtokens(text, |id| out.push(id));
    out
}

/// Up to `len` ids from the `keep` end of `ids`, padded to `len`.
fn padded(ids: &[u32], len: usize, keep: Keep) -> impl Iterator<Item = u32> + '_ {
    let taken = match keep {
        Keep::Start => &ids[..ids.len().min(len)],
        Keep::End => &ids[ids.len().saturating_sub(len)..],
    };
    taken
        .iter()
        .copied()
        .chain(std::iter::repeat(PAD))
        .take(len)
}

/// The hole window's [`PARTS`] parts, each [`PART_LEN`] ids (the tail part padded too).
pub fn hole_ids(window: &HoleWindow) -> Vec<u32> {
    let prefix = ids(window.prefix);
    let tail = &prefix[prefix.len().saturating_sub(TAIL_LEN)..];
    let mut out = Vec::with_capacity(PARTS * PART_LEN);
    out.extend(padded(&ids(window.before), PART_LEN, Keep::End));
    out.extend(padded(&prefix, PART_LEN, Keep::End));
    out.extend(padded(tail, PART_LEN, Keep::End));
    out.extend(padded(&ids(window.after), PART_LEN, Keep::Start));
    out
}

/// A context's sub-tokens nearest its kept end, at most `CHUNKS * CHUNK_LEN`, in text order
/// (unpadded: an empty context gives none).
pub fn context_ids(text: &str, keep: Keep) -> Vec<u32> {
    let n = CHUNKS * CHUNK_LEN;
    // Most contexts give enough sub-tokens in a quarter of CONTEXT_BYTES; tokenize more only
    // when they do not. A word cut at the window's edge changes only ids beyond the `n` kept
    // (hence the margin), so the result is the same as tokenizing CONTEXT_BYTES at once.
    let mut bytes = CONTEXT_BYTES / 4;
    let all = loop {
        let window = kept_bytes(text, keep, bytes);
        let all = ids(window);
        if all.len() > n + CUT_WORD_MARGIN || window.len() == text.len() || bytes >= CONTEXT_BYTES {
            break all;
        }
        bytes *= 2;
    };
    match keep {
        Keep::Start => all[..all.len().min(n)].to_vec(),
        Keep::End => all[all.len().saturating_sub(n)..].to_vec(),
    }
}

/// Sub-tokens one word cut at a window's edge can give (itself and its parts).
const CUT_WORD_MARGIN: usize = 8;

/// At most `bytes` bytes of `text` from its `keep` end (on character boundaries): enough to
/// tokenize for a window of tokens without tokenizing a whole long context.
pub fn kept_bytes(text: &str, keep: Keep, bytes: usize) -> &str {
    match keep {
        Keep::Start => &text[..text.floor_char_boundary(bytes)],
        Keep::End => &text[text.ceil_char_boundary(text.len().saturating_sub(bytes))..],
    }
}

/// Context ids laid out as [`CHUNKS`] × [`CHUNK_LEN`], padded at the end.
pub fn chunked(ids: &[u32]) -> impl Iterator<Item = u32> + '_ {
    padded(ids, CHUNKS * CHUNK_LEN, Keep::Start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(word: &str) -> Vec<&str> {
        let mut out = Vec::new();
        identifier_parts(word, |p| out.push(p));
        out
    }

    #[test]
    fn identifiers_share_their_parts() {
        assert_eq!(
            parts("getHTTPResponse_code"),
            ["get", "HTTP", "Response", "code"]
        );
        assert_eq!(parts("x"), ["x"]);
        assert_eq!(parts("_a__b_"), ["a", "b"]);
        let user = [bucket(b"username"), bucket(b"user"), bucket(b"name")];
        assert_eq!(ids("userName"), user);
        let getter = ids("getUserName()");
        assert!(getter.contains(&bucket(b"user")) && getter.contains(&bucket(b"name")));
        assert_eq!(ids("x"), [bucket(b"x")], "a one-part word is not repeated");
        assert_eq!(lowercase_bucket("ÄbC"), bucket("äbc".as_bytes()));
        assert_eq!(lowercase_bucket("AbC_9"), bucket(b"abc_9"));
        assert_eq!(ids("12 345"), ids("7 8"));
        assert!(ids("a.b").contains(&bucket(b".")));
        assert!(ids("").is_empty() && ids(" \n\t").is_empty());
    }

    #[test]
    fn ids_are_never_padding_and_stay_in_range() {
        for text in ["ü", "日本語", "a$b", "__", "0x1F", "{}"] {
            assert!(
                ids(text)
                    .iter()
                    .all(|&id| id != PAD && (id as usize) < BUCKETS)
            );
        }
    }

    #[test]
    fn contexts_keep_the_end_that_survives_truncation() {
        let text: String = (0..1000).map(|i| format!("w{i} ")).collect();
        let end = context_ids(&text, Keep::End);
        let start = context_ids(&text, Keep::Start);
        assert_eq!(end.len(), CHUNKS * CHUNK_LEN);
        assert_eq!(end.last(), ids("w999").last());
        assert_eq!(start.first(), ids("w0").first());
        assert!(context_ids("", Keep::End).is_empty());
        assert_eq!(chunked(&[5]).collect::<Vec<_>>().len(), CHUNKS * CHUNK_LEN);
    }

    /// The widening window gives what tokenizing CONTEXT_BYTES at once gives, on real code.
    #[test]
    fn the_widening_window_changes_nothing() {
        let n = CHUNKS * CHUNK_LEN;
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample-repo");
        let index = crate::repo::RepoIndex::open(std::path::Path::new(dir), None).unwrap();
        for file in &index.files {
            for keep in [Keep::Start, Keep::End] {
                let all = ids(kept_bytes(&file.text, keep, CONTEXT_BYTES));
                let reference = match keep {
                    Keep::Start => all[..all.len().min(n)].to_vec(),
                    Keep::End => all[all.len().saturating_sub(n)..].to_vec(),
                };
                assert_eq!(context_ids(&file.text, keep), reference, "{}", file.path);
            }
        }
    }
}
