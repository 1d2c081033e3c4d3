//! The embedded model's base statistics: every file's tokens in one stream, a suffix array over
//! it, and the vocabulary, as of the files they were last built from; kept in a cache file whose
//! arrays are used where they lie ([`crate::repo::mapped`]).

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{BOUNDARY, MAX_ORDER, model_tokens};
use crate::repo::mapped::{Sections, Vocabulary, Words, word_bytes, write_sections};
use crate::repo::{FileChanges, FileTable, SourceFile};

/// Statistics of a set of files: every file's tokens in one stream and a suffix array over it.
/// Files can come and go ([`Base::update`]); the statistics are then exactly those built afresh.
pub(super) struct Base {
    /// The files the statistics were built from, in the index's order.
    pub(super) built_from: FileTable,
    pub(super) vocab: Vocabulary,
    /// All files' tokens, each file followed by `BOUNDARY`.
    pub(super) stream: Words,
    /// Stream positions `p` (of a token that has a preceding context), sorted by the tokens
    /// before `p` read backwards, then by position ([`context_order`]).
    pub(super) by_context: Words,
    /// Per file of `built_from`: the start and end of its tokens in the stream.
    ranges: Words,
    /// How often each token occurs, for the last resort.
    pub(super) unigram: Words,
    /// Per token: the stream position where it first occurs. Equal scores go to the token met
    /// first, as they did when ids were given in that order.
    pub(super) first_met: Words,
}

/// The base's sections in its cache file, in order.
const SECTIONS: usize = 8;

impl Base {
    /// Build from a repository's files (a few seconds for a large repository): sorted on the
    /// CPU pool, or by the caller alone where it is a thread of the pool, which must not take
    /// up other jobs while it waits for a piece: jobs of the pool may wait for these statistics.
    pub(super) fn build(files_of_repo: &[SourceFile]) -> Base {
        let mut base = Base {
            built_from: FileTable::default(),
            vocab: Vocabulary::of_sorted([]),
            stream: vec![BOUNDARY].into(),
            by_context: Words::default(),
            ranges: Words::default(),
            unigram: vec![1].into(),
            first_met: vec![0].into(),
        };
        base.update(files_of_repo);
        base
    }

    /// The tokens of file `file` of `built_from`: their range in the stream.
    pub(super) fn range(&self, file: usize) -> Range<u32> {
        self.ranges[2 * file]..self.ranges[2 * file + 1]
    }

    /// The token `k` places before position `p`, or `None` past a file boundary.
    pub(super) fn back_token(&self, p: u32, k: usize) -> Option<u32> {
        back_token(&self.stream, p, k)
    }

    /// Brought up to `files` from the files the statistics were built from: only the files
    /// that changed or were added are tokenized and only their positions sorted, then merged
    /// into the suffix array, whose other positions keep their order (token ids follow the
    /// tokens' strings, so a token gained or lost leaves the others' order alone).
    pub(super) fn update(&mut self, files: &[SourceFile]) {
        let changes = FileChanges::between(&self.built_from, files);
        let tokens_of = |&id: &u32| model_tokens(&files[id as usize].text);
        let fresh: Vec<Vec<&str>> = if crate::pool::on_pool_thread() {
            changes.derived_again.iter().map(tokens_of).collect()
        } else {
            changes.derived_again.par_iter().map(tokens_of).collect()
        };
        let old_ranges: Vec<Range<u32>> =
            (0..self.built_from.len()).map(|f| self.range(f)).collect();

        // Which tokens remain, and the vocabulary they make.
        let mut count = self.unigram.to_vec();
        for (range, kept) in old_ranges.iter().zip(&changes.kept) {
            if kept.is_none() {
                for &t in &self.stream[range.start as usize..range.end as usize] {
                    count[t as usize] -= 1;
                }
            }
        }
        // Distinct first, then sorted: a fresh build meets every token of the repository here.
        let mut unseen: FxHashSet<&str> = FxHashSet::default();
        for &token in fresh.iter().flatten() {
            match self.vocab.get(token) {
                Some(id) => count[id as usize] += 1,
                None => {
                    unseen.insert(token);
                }
            }
        }
        let mut unseen: Vec<&str> = unseen.into_iter().collect();
        unseen.sort_unstable();
        let old_vocab = std::mem::take(&mut self.vocab);
        let gone = (1..old_vocab.len()).any(|id| count[id] == 0);
        // Where each old id went: none while no token came or went (the common small edit).
        let (vocab, renumbered) = if unseen.is_empty() && !gone {
            (old_vocab, None)
        } else {
            let mut strings: Vec<&str> = Vec::with_capacity(old_vocab.len() + unseen.len());
            let mut renumbered = vec![u32::MAX; old_vocab.len()];
            renumbered[BOUNDARY as usize] = BOUNDARY;
            let mut unseen = unseen.into_iter().peekable();
            for (id, old) in old_vocab
                .strings()
                .filter(|&(id, _)| count[id as usize] > 0)
            {
                while let Some(new) = unseen.next_if(|new| *new < old) {
                    strings.push(new);
                }
                renumbered[id as usize] = strings.len() as u32 + 1;
                strings.push(old);
            }
            strings.extend(unseen);
            (Vocabulary::of_sorted(strings), Some(renumbered))
        };
        // Many fresh tokens (a first build) are looked up through a map, a few by search.
        let by_string: Option<FxHashMap<&str, u32>> = (fresh.iter().map(Vec::len).sum::<usize>()
            > vocab.len())
        .then(|| vocab.strings().map(|(id, s)| (s, id)).collect());
        let id_of = |token: &str| match &by_string {
            Some(ids) => ids.get(token).copied(),
            None => vocab.get(token),
        };

        // The new stream, in the files' order, and how far each old file's positions moved
        // (runs of files that moved alike are one shift: see `Shifts`).
        let kept_from = changes.kept_from(files.len());
        let mut fresh = changes.derived_again.iter().zip(fresh).peekable();
        let mut shifts = Shifts::default();
        let mut stream = Vec::with_capacity(self.stream.len());
        stream.push(BOUNDARY);
        let mut ranges = Vec::with_capacity(2 * files.len());
        let mut fresh_positions: Vec<u32> = Vec::new();
        for kept in kept_from {
            let start = stream.len() as u32;
            if let Some(old) = kept {
                let range = old_ranges[old].clone();
                shifts.moved(range.clone(), start);
                let tokens = &self.stream[range.start as usize..range.end as usize];
                match &renumbered {
                    Some(renumbered) => {
                        stream.extend(tokens.iter().map(|&t| renumbered[t as usize]));
                    }
                    None => stream.extend_from_slice(tokens),
                }
            } else {
                let (_, tokens) = fresh.next().expect("every file is kept or derived again");
                for token in tokens {
                    let id = id_of(token).expect("every token is in the vocabulary");
                    fresh_positions.push(stream.len() as u32);
                    stream.push(id);
                }
            }
            ranges.extend([start, stream.len() as u32]);
            stream.push(BOUNDARY);
        }
        drop(by_string);

        // Kept positions keep their order (their contexts' ids kept theirs, positions too);
        // the fresh ones are sorted and merged in.
        let on_pool = crate::pool::on_pool_thread();
        sort_by_context(&stream, &mut fresh_positions, vocab.len() as u32, on_pool);
        let order = |&a: &u32, &b: &u32| context_order(&stream, a, b);
        let kept: Vec<u32> = (self.by_context.iter())
            .filter_map(|&p| shifts.new_position(p))
            .collect();
        let mut by_context = Vec::with_capacity(kept.len() + fresh_positions.len());
        let mut rest = &kept[..];
        for p in fresh_positions {
            let at = rest.partition_point(|q| order(q, &p).is_lt());
            by_context.extend_from_slice(&rest[..at]);
            by_context.push(p);
            rest = &rest[at..];
        }
        by_context.extend_from_slice(rest);

        let mut unigram = vec![0u32; vocab.len()];
        let mut first_met = vec![u32::MAX; vocab.len()];
        for (p, &t) in stream.iter().enumerate() {
            unigram[t as usize] += 1;
            if first_met[t as usize] == u32::MAX {
                first_met[t as usize] = p as u32;
            }
        }
        *self = Base {
            built_from: FileTable::of(files),
            vocab,
            stream: stream.into(),
            by_context: by_context.into(),
            ranges: ranges.into(),
            unigram: unigram.into(),
            first_met: first_met.into(),
        };
    }

    /// Keep the statistics in `path` under `format`, keyed by the files they were built from.
    pub(super) fn store(&self, path: &Path, format: &[u8; 32]) -> std::io::Result<()> {
        let built_from = postcard::to_stdvec(&self.built_from).map_err(std::io::Error::other)?;
        let sections: [&[u8]; SECTIONS] = [
            &built_from,
            self.vocab.text_bytes(),
            &word_bytes(self.vocab.ends()),
            &word_bytes(&self.stream),
            &word_bytes(&self.by_context),
            &word_bytes(&self.ranges),
            &word_bytes(&self.unigram),
            &word_bytes(&self.first_met),
        ];
        write_sections(path, format, &self.built_from.key(), &sections)
    }

    /// The statistics in a cache file's sections, used where they lie; none when they do not
    /// fit together.
    pub(super) fn load(sections: &Sections) -> Option<Base> {
        if sections.len() != SECTIONS {
            return None;
        }
        let built_from: FileTable = postcard::from_bytes(sections.bytes(0)).ok()?;
        let vocab = Vocabulary::checked(sections.text(1)?, sections.words(2)?)?;
        let base = Base {
            vocab,
            stream: sections.words(3)?,
            by_context: sections.words(4)?,
            ranges: sections.words(5)?,
            unigram: sections.words(6)?,
            first_met: sections.words(7)?,
            built_from,
        };
        let fits = base.by_context.len() < base.stream.len()
            && base.ranges.len() == 2 * base.built_from.len()
            && base
                .ranges
                .iter()
                .all(|&at| (at as usize) < base.stream.len())
            && base.unigram.len() == base.vocab.len()
            && base.first_met.len() == base.vocab.len()
            && base.built_from.key() == *sections.key();
        fits.then_some(base)
    }
}

/// Where the positions of an old stream went: per run of old positions, how far it moved, or
/// that it went (a changed or removed file). Consecutive files that moved alike make one run,
/// so a one-file edit is three runs, and moving every position of the suffix array costs a
/// short search each rather than a read of a table as long as the stream.
#[derive(Default)]
pub(super) struct Shifts {
    /// Old start of each run, increasing.
    starts: Vec<u32>,
    /// Per run: what to add to an old position (wrapping), or none where it went.
    by: Vec<Option<u32>>,
}

impl Shifts {
    /// The old positions `range` (a kept file's, after every earlier file's) are now at `to..`;
    /// the positions between the previous run and `range` went. A file right after the
    /// previous one (only the boundary between them) that moved alike extends its run.
    pub(super) fn moved(&mut self, range: Range<u32>, to: u32) {
        let by = to.wrapping_sub(range.start);
        let runs = self.by.len();
        let extends = runs >= 2
            && self.by[runs - 2] == Some(by)
            && self.starts.last() == Some(&range.start.wrapping_sub(1));
        if extends {
            self.starts.pop();
            self.by.pop();
        } else {
            self.starts.push(range.start);
            self.by.push(Some(by));
        }
        self.starts.push(range.end);
        self.by.push(None);
    }

    pub(super) fn new_position(&self, old: u32) -> Option<u32> {
        let run = self
            .starts
            .partition_point(|&start| start <= old)
            .checked_sub(1)?;
        self.by[run].map(|by| old.wrapping_add(by))
    }

    /// The first old position whose run moved past `new` (`u32::MAX` if none did): a kept
    /// position comes before new position `new` exactly when it is below this.
    pub(super) fn first_moved_past(&self, new: u32) -> u32 {
        (self.starts.iter().zip(&self.by))
            .find(|&(&start, by)| by.is_some_and(|by| start.wrapping_add(by) > new))
            .map_or(u32::MAX, |(&start, _)| start)
    }
}

/// The token `k` places before position `p` of `stream`, or `None` past a file boundary.
pub(super) fn back_token(stream: &[u32], p: u32, k: usize) -> Option<u32> {
    let idx = (p as usize).checked_sub(k)?;
    let t = stream[idx];
    (t != BOUNDARY).then_some(t)
}

/// The suffix array's order: by the tokens before each position read backwards, then by
/// position, so that it is one order however the statistics came about.
pub(super) fn context_order(stream: &[u32], a: u32, b: u32) -> std::cmp::Ordering {
    context_order_after(stream, a, b, 0)
}

/// [`context_order`] of `a` and `b`, whose contexts agree on their first `agreed` tokens (none
/// of them a boundary). A context that ends (at the boundary, token 0) before the other comes
/// first.
fn context_order_after(stream: &[u32], a: u32, b: u32, agreed: usize) -> std::cmp::Ordering {
    let (a_at, b_at) = (a as usize, b as usize);
    for k in agreed + 1..=MAX_ORDER {
        // Stream position 0 is a boundary: neither index goes below it.
        let (x, y) = (stream[a_at - k], stream[b_at - k]);
        if x != y || x == BOUNDARY {
            return x.cmp(&y).then(a.cmp(&b));
        }
    }
    a.cmp(&b)
}

/// `positions` of `stream` put in the suffix array's order ([`context_order`]); every token of
/// `stream` is below `tokens`. Each position is given one number, the first tokens of its context
/// packed above the position, so that the sort compares plain numbers; positions whose packed
/// tokens agree and whose contexts go on are then sorted alike by the next tokens.
pub(super) fn sort_by_context(stream: &[u32], positions: &mut [u32], tokens: u32, on_pool: bool) {
    let bits = u32::BITS - (tokens.max(2) - 1).leading_zeros();
    sort_from(stream, positions, 0, bits, !on_pool);
}

/// [`sort_by_context`] for `positions` whose contexts agree on their first `skip` tokens, each
/// token `bits` wide.
fn sort_from(stream: &[u32], positions: &mut [u32], skip: usize, bits: u32, parallel: bool) {
    // 96 bits of tokens above the 32 of the position.
    let packed = (96 / bits as usize).min(MAX_ORDER - skip);
    let mut keys: Vec<u128> = (positions.iter())
        .map(|&p| {
            // The tokens before `p` from the `skip`th back, which are no boundary; once one is,
            // the context ended, and reads as tokens below every token (0, the boundary).
            let mut key = 0u128;
            let mut at = p as usize - skip;
            let mut ended = false;
            for _ in 0..packed {
                let token = if ended { BOUNDARY } else { stream[at - 1] };
                ended |= token == BOUNDARY;
                at -= usize::from(!ended);
                key = (key << bits) | u128::from(token);
            }
            (key << 32) | u128::from(p)
        })
        .collect();
    if parallel {
        keys.par_sort_unstable();
    } else {
        keys.sort_unstable();
    }
    for (at, key) in positions.iter_mut().zip(&keys) {
        *at = *key as u32;
    }
    if skip + packed == MAX_ORDER {
        return;
    }
    // Runs of contexts that agree on every packed token and go on past them: a short one
    // (most are) compared token by token, a longer one sorted alike by the next tokens.
    let last_token = (1u128 << bits) - 1;
    let agreed = skip + packed;
    let mut start = 0;
    for run in keys.chunk_by(|a, b| a >> 32 == b >> 32) {
        if run.len() > 1 && (run[0] >> 32) & last_token != BOUNDARY as u128 {
            let positions = &mut positions[start..start + run.len()];
            if run.len() <= SHORT_RUN {
                positions.sort_unstable_by(|&a, &b| context_order_after(stream, a, b, agreed));
            } else {
                sort_from(stream, positions, agreed, bits, false);
            }
        }
        start += run.len();
    }
}

/// Runs of up to this many positions that agree on their packed tokens are compared token by
/// token rather than packed again.
const SHORT_RUN: usize = 16;

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn sorting_by_packed_contexts_gives_the_suffix_arrays_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Few tokens (long runs of contexts that agree past the packed ones), and many (few
        // packed per number).
        for tokens in [3u32, 40, 70_000, 300_000] {
            let mut stream = vec![BOUNDARY];
            for _ in 0..6_000 {
                // Files of repeated lines, so that long contexts recur.
                let line: Vec<u32> = (0..rng.random_range(1..12))
                    .map(|_| rng.random_range(1..tokens))
                    .collect();
                // Now and then many times, for long runs of contexts that agree.
                let times = [rng.random_range(1..5), 40][usize::from(rng.random_range(0..50) == 0)];
                for _ in 0..times {
                    stream.extend(&line);
                }
                if rng.random_range(0..8) == 0 {
                    stream.push(BOUNDARY);
                }
            }
            stream.push(BOUNDARY);
            let mut want: Vec<u32> = (0..stream.len() as u32)
                .filter(|&p| stream[p as usize] != BOUNDARY)
                .collect();
            let mut got = want.clone();
            // The order as it is defined: by the tokens before each position read backwards,
            // up to a boundary or `MAX_ORDER` of them, then by position.
            let backward = |p: u32| {
                let before = stream[..p as usize].iter().rev().take(MAX_ORDER);
                before.take_while(|&&t| t != BOUNDARY).copied()
            };
            want.sort_by(|&a, &b| backward(a).cmp(backward(b)).then(a.cmp(&b)));
            for on_pool in [false, true] {
                sort_by_context(&stream, &mut got, tokens, on_pool);
                let differs = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(differs, None, "{tokens} tokens");
                got.reverse();
            }
        }
    }
}
