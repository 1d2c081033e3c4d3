//! The embedded model's segment: the statistics of the files that changed, came or went since
//! the base was built, kept beside it so that an edit writes what it changed, not the whole.
//! Read together with the base ([`super::RepoModel`]), they answer as statistics built afresh.

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::base::{Base, back_token, sort_by_context};
use super::{BOUNDARY, Layout, model_tokens};
use crate::repo::mapped::{Sections, Vocabulary, Words, word_bytes, write_sections};
use crate::repo::{FileChanges, SourceFile};

/// The changed and added files' statistics, over the base's token ids (and new ids, from the
/// base's vocabulary's length, for tokens the base lacks).
pub(super) struct Segment {
    /// The tokens the base lacks, sorted: id `base_len + i` is `extra`'s id `i + 1`.
    pub(super) extra: Vocabulary,
    /// Per token the base lacks: how many of the base's tokens sort before it.
    pub(super) after: Words,
    /// The changed and added files' tokens, each file followed by `BOUNDARY`, after a first.
    pub(super) stream: Words,
    /// Positions of `stream` (of a token), sorted as the suffix array sorts: by the tokens
    /// before them read backwards, in the strings' order, then by position.
    pub(super) by_context: Words,
    /// Per changed or added file, in order: the start and end of its tokens in `stream`.
    ranges: Words,
    /// Indices into the base's suffix array of the positions of files that changed or went,
    /// sorted: they no longer count.
    pub(super) removed: Words,
    /// The token ids (the base's, then the new ones) whose first occurrence today is not where
    /// the base's first occurrence went, sorted ([`Segment::first_met`]).
    met_ids: Words,
    /// Per id of `met_ids`: where it is first met today, `u32::MAX` where no file holds it now.
    met_at: Words,
}

/// The segment's sections in its cache file, in order.
const SECTIONS: usize = 9;

impl Segment {
    /// The segment that brings `base` up to `files`, which changed from its files as `changes`
    /// says: the changed and added files tokenized and their positions sorted (on the CPU pool,
    /// unless the caller is a thread of it: see [`Base::build`]). What it costs follows the
    /// changed files, not the repository.
    pub(super) fn build(base: &Base, files: &[SourceFile], changes: &FileChanges) -> Segment {
        let tokens_of = |&id: &u32| model_tokens(&files[id as usize].text);
        let on_pool = crate::pool::on_pool_thread();
        let fresh: Vec<Vec<&str>> = if on_pool {
            changes.derived_again.iter().map(tokens_of).collect()
        } else {
            changes.derived_again.par_iter().map(tokens_of).collect()
        };

        // Each distinct token once: its number here, in the order first met.
        let mut numbered: FxHashMap<&str, u32> = FxHashMap::default();
        let mut distinct: Vec<&str> = Vec::new();
        let len: usize = fresh.iter().map(|tokens| tokens.len() + 1).sum();
        let mut local = Vec::with_capacity(len + 1);
        local.push(BOUNDARY);
        let mut ranges = Vec::with_capacity(2 * fresh.len());
        for tokens in &fresh {
            ranges.push(local.len() as u32);
            local.extend(tokens.iter().map(|&token| {
                *numbered.entry(token).or_insert_with(|| {
                    distinct.push(token);
                    distinct.len() as u32
                })
            }));
            ranges.push(local.len() as u32);
            local.push(BOUNDARY);
        }
        drop(fresh);

        // Ids: the base's where it knows the token, new ones in the strings' order above. The
        // tokens' ranks among the segment's own follow the strings' order as ids do not where
        // new tokens came: the sort compares them as plain numbers.
        let mut by_string: Vec<u32> = (1..=distinct.len() as u32).collect();
        by_string.sort_unstable_by_key(|&n| distinct[n as usize - 1]);
        let mut id_of = vec![BOUNDARY; distinct.len() + 1];
        let mut rank_of = vec![BOUNDARY; distinct.len() + 1];
        let base_len = base.vocab.len() as u32;
        let mut unknown: Vec<&str> = Vec::new();
        for (rank, &n) in by_string.iter().enumerate() {
            let token = distinct[n as usize - 1];
            rank_of[n as usize] = rank as u32 + 1;
            id_of[n as usize] = base.vocab.get(token).unwrap_or_else(|| {
                unknown.push(token);
                base_len + unknown.len() as u32 - 1
            });
        }
        let after: Vec<u32> = unknown.iter().map(|t| base.vocab.count_below(t)).collect();
        let extra = Vocabulary::of_sorted(unknown.iter().copied());

        let ranked: Vec<u32> = local.iter().map(|&n| rank_of[n as usize]).collect();
        let mut by_context: Vec<u32> = (0..ranked.len() as u32)
            .filter(|&q| ranked[q as usize] != BOUNDARY)
            .collect();
        sort_by_context(&ranked, &mut by_context, rank_of.len() as u32, on_pool);
        drop(ranked);
        let stream: Vec<u32> = local.iter().map(|&n| id_of[n as usize]).collect();

        // The base's suffix-array indices of the positions of files that changed or went: one
        // read of the suffix array (cheaper than keeping an index of it that every open checks),
        // against a bitmap of those positions spanning only the changed files.
        let gone: Vec<Range<u32>> = (changes.kept.iter().enumerate())
            .filter(|(_, kept)| kept.is_none())
            .map(|(old, _)| base.range(old))
            .collect();
        let from = gone.first().map_or(0, |range| range.start);
        let span = gone.last().map_or(0, |range| range.end) - from;
        let mut marked = vec![0u64; span.div_ceil(64) as usize];
        for p in gone.into_iter().flatten() {
            let bit = p - from;
            marked[bit as usize / 64] |= 1 << (bit % 64);
        }
        let removed: Vec<u32> = (base.by_context.iter().enumerate())
            .filter(|&(_, &p)| {
                let bit = p.wrapping_sub(from);
                bit < span && marked[bit as usize / 64] & (1 << (bit % 64)) != 0
            })
            .map(|(at, _)| at as u32)
            .collect();

        let layout = Layout::of(base, changes, files.len(), |i| {
            ranges[2 * i]..ranges[2 * i + 1]
        });
        let (met_ids, met_at) = first_met_changes(base, changes, &layout, &stream);
        Segment {
            extra,
            after: after.into(),
            stream: stream.into(),
            by_context: by_context.into(),
            ranges: ranges.into(),
            removed: removed.into(),
            met_ids: met_ids.into(),
            met_at: met_at.into(),
        }
    }

    /// Where token `id` is first met today, where that is not where the base's first
    /// occurrence went: a position of today's stream, `u32::MAX` for a token no file holds now.
    pub(super) fn first_met(&self, id: u32) -> Option<u32> {
        let at = self.met_ids.binary_search(&id).ok()?;
        Some(self.met_at[at])
    }

    /// The tokens of the `i`th changed or added file: their range in the stream.
    pub(super) fn range(&self, i: usize) -> Range<u32> {
        self.ranges[2 * i]..self.ranges[2 * i + 1]
    }

    /// How many files the segment holds.
    pub(super) fn files(&self) -> usize {
        self.ranges.len() / 2
    }

    /// The token `k` places before position `q`, or `None` past a file boundary.
    pub(super) fn back_token(&self, q: u32, k: usize) -> Option<u32> {
        back_token(&self.stream, q, k)
    }

    /// Keep the segment in `path` under `format` and `key` (which names the base it goes with
    /// and today's files).
    pub(super) fn store(
        &self,
        path: &Path,
        format: &[u8; 32],
        key: &[u8; 32],
    ) -> std::io::Result<()> {
        let sections: [&[u8]; SECTIONS] = [
            self.extra.text_bytes(),
            &word_bytes(self.extra.ends()),
            &word_bytes(&self.after),
            &word_bytes(&self.stream),
            &word_bytes(&self.by_context),
            &word_bytes(&self.ranges),
            &word_bytes(&self.removed),
            &word_bytes(&self.met_ids),
            &word_bytes(&self.met_at),
        ];
        write_sections(path, format, key, &sections)
    }

    /// The segment in a cache file's sections, used where they lie, for a base of `base_len`
    /// token ids and `files` changed or added files; none when they do not fit together.
    pub(super) fn load(sections: &Sections, base: &Base, files: usize) -> Option<Segment> {
        if sections.len() != SECTIONS {
            return None;
        }
        let segment = Segment {
            extra: Vocabulary::checked(sections.text(0)?, sections.words(1)?)?,
            after: sections.words(2)?,
            stream: sections.words(3)?,
            by_context: sections.words(4)?,
            ranges: sections.words(5)?,
            removed: sections.words(6)?,
            met_ids: sections.words(7)?,
            met_at: sections.words(8)?,
        };
        let ids = base.vocab.len() + segment.after.len();
        let fits = segment.after.len() + 1 == segment.extra.len()
            && segment.by_context.len() < segment.stream.len()
            && segment.files() == files
            && segment.ranges.len() == 2 * files
            && (segment.ranges.iter()).all(|&at| (at as usize) < segment.stream.len())
            && (segment.removed.iter()).all(|&at| (at as usize) < base.by_context.len())
            && segment.met_ids.len() == segment.met_at.len()
            && segment.met_ids.windows(2).all(|w| w[0] < w[1])
            && segment.met_ids.last().is_none_or(|&id| (id as usize) < ids);
        fits.then_some(segment)
    }
}

/// The tokens whose first occurrence today is not where the base's first one went, sorted by
/// id, and where each is first met today (`u32::MAX` where no file holds it now): the tokens the
/// segment's files bring earlier or anew, and those first met in a file that changed or went.
/// Of those, the ones that kept files still hold are looked for in the kept files after the one
/// they were first met in, only as far as the segment's first occurrence of them: what this
/// reads follows the changed files, not the repository.
fn first_met_changes(
    base: &Base,
    changes: &FileChanges,
    layout: &Layout,
    stream: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    const NOWHERE: u32 = u32::MAX;
    // Today's first occurrence in the segment's files, which lie in today's order.
    let mut met: FxHashMap<u32, u32> = FxHashMap::default();
    for (q, &t) in stream.iter().enumerate() {
        if t != BOUNDARY {
            met.entry(t).or_insert_with(|| layout.segment_new(q as u32));
        }
    }
    // A token first met before any kept file held it is met there still, unless the segment
    // brings it earlier.
    met.retain(|&t, &mut at| match base.first_met.get(t as usize) {
        Some(&p) => layout
            .base_moves
            .new_position(p)
            .is_none_or(|kept| at < kept),
        None => true,
    });
    // Tokens first met in a file that changed or went, per old file, with how many of their
    // occurrences went with the files.
    let mut orphans: FxHashMap<u32, (usize, u32)> = FxHashMap::default();
    for (old, kept) in changes.kept.iter().enumerate() {
        if kept.is_some() {
            continue;
        }
        let range = base.range(old);
        for p in range {
            let t = base.stream[p as usize];
            if base.first_met[t as usize] == p {
                orphans.insert(t, (old, 1));
            } else if let Some((_, gone)) = orphans.get_mut(&t) {
                *gone += 1;
            }
        }
    }
    // Of those, the ones kept files still hold, looked for until met today in the segment.
    let mut sought: FxHashMap<u32, u32> = FxHashMap::default();
    let mut from = usize::MAX;
    for (&t, &(old, gone)) in &orphans {
        let at = met.get(&t).copied().unwrap_or(NOWHERE);
        met.insert(t, at);
        if base.unigram[t as usize] > gone {
            sought.insert(t, at);
            from = from.min(old + 1);
        }
    }
    let files = changes.kept.iter().enumerate().skip(from);
    for (old, _) in files.filter(|(_, kept)| kept.is_some()) {
        let range = base.range(old);
        let start = layout.base_new(range.start);
        sought.retain(|_, before| *before > start);
        if sought.is_empty() {
            break;
        }
        for p in range {
            let t = base.stream[p as usize];
            if let Some(before) = sought.remove(&t) {
                met.insert(t, before.min(layout.base_new(p)));
            }
        }
    }
    let mut changed: Vec<(u32, u32)> = met.into_iter().collect();
    changed.sort_unstable();
    changed.into_iter().unzip()
}

/// A number for token `id` (the base's or a new one) that orders ids as their strings: the
/// base's ids in their order, each new token right after the base tokens that sort before it.
pub(super) fn order_key(base_len: u32, after: &[u32], id: u32) -> u64 {
    match id.checked_sub(base_len) {
        Some(new) => (u64::from(after[new as usize]) << 32) | u64::from(new + 1),
        None => u64::from(id) << 32,
    }
}
