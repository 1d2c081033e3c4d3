//! The embedded model's segment: the statistics of the files that changed, came or went since
//! the base was built, kept beside it so that an edit writes what it changed, not the whole.
//! Read together with the base ([`super::RepoModel`]), they answer as statistics built afresh.

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::base::{Base, back_token, context_order};
use super::{BOUNDARY, model_tokens};
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
    /// Per token id (the base's, then the new ones): where it is first met among today's files,
    /// by rank; `u32::MAX` for a token of the base that no file holds now.
    pub(super) first_met: Words,
}

/// The segment's sections in its cache file, in order.
const SECTIONS: usize = 8;

impl Segment {
    /// The segment that brings `base` up to `files`, which changed from its files as `changes`
    /// says: the changed and added files tokenized and their positions sorted (on the CPU pool,
    /// unless the caller is a thread of it: see [`Base::build`]).
    pub(super) fn build(base: &Base, files: &[SourceFile], changes: &FileChanges) -> Segment {
        let tokens_of = |&id: &u32| model_tokens(&files[id as usize].text);
        let on_pool = crate::pool::on_pool_thread();
        let fresh: Vec<Vec<&str>> = if on_pool {
            changes.derived_again.iter().map(tokens_of).collect()
        } else {
            changes.derived_again.par_iter().map(tokens_of).collect()
        };

        // Ids: the base's where it knows the token, new ones in the strings' order above.
        let mut ids: FxHashMap<&str, Option<u32>> = FxHashMap::default();
        let mut unknown: Vec<&str> = Vec::new();
        for &token in fresh.iter().flatten() {
            ids.entry(token).or_insert_with(|| {
                let id = base.vocab.get(token);
                if id.is_none() {
                    unknown.push(token);
                }
                id
            });
        }
        unknown.sort_unstable();
        let base_len = base.vocab.len() as u32;
        for (i, token) in unknown.iter().enumerate() {
            ids.insert(token, Some(base_len + i as u32));
        }
        let after: Vec<u32> = unknown.iter().map(|t| base.vocab.count_below(t)).collect();
        let extra = Vocabulary::of_sorted(unknown.iter().copied());

        let len: usize = fresh.iter().map(|tokens| tokens.len() + 1).sum();
        let mut stream = Vec::with_capacity(len + 1);
        stream.push(BOUNDARY);
        let mut ranges = Vec::with_capacity(2 * fresh.len());
        for tokens in &fresh {
            ranges.push(stream.len() as u32);
            stream.extend(
                tokens
                    .iter()
                    .map(|t| ids[t].expect("every token has an id")),
            );
            ranges.push(stream.len() as u32);
            stream.push(BOUNDARY);
        }

        // Sorted over the tokens' ranks among the segment's own, which follow the strings'
        // order as ids do not where new tokens came: then plain numbers compare.
        let mut present: Vec<u32> = ids.values().map(|id| id.expect("an id")).collect();
        let key = |id: u32| order_key(base_len, &after, id);
        present.sort_unstable_by_key(|&id| key(id));
        let rank_of: FxHashMap<u32, u32> = (present.iter().enumerate())
            .map(|(rank, &id)| (id, rank as u32 + 1))
            .collect();
        let ranked: Vec<u32> = (stream.iter())
            .map(|&t| if t == BOUNDARY { BOUNDARY } else { rank_of[&t] })
            .collect();
        let mut by_context: Vec<u32> = (0..stream.len() as u32)
            .filter(|&q| stream[q as usize] != BOUNDARY)
            .collect();
        let order = |&a: &u32, &b: &u32| context_order(&ranked, a, b);
        if on_pool {
            by_context.sort_unstable_by(order);
        } else {
            by_context.par_sort_unstable_by(order);
        }

        let mut removed: Vec<u32> = Vec::new();
        for (old, kept) in changes.kept.iter().enumerate() {
            if kept.is_none() {
                let range = base.range(old);
                removed.extend(&base.rank[range.start as usize..range.end as usize]);
            }
        }
        removed.sort_unstable();

        // First met: today's files in order, each from the base or the segment.
        let mut first_met = vec![u32::MAX; base_len as usize + unknown.len()];
        first_met[BOUNDARY as usize] = 0;
        let mut met = 1;
        let mut kept_from: Vec<Option<usize>> = vec![None; files.len()];
        for (old, kept) in changes.kept.iter().enumerate() {
            if let Some(new) = kept {
                kept_from[*new as usize] = Some(old);
            }
        }
        let mut derived = 0;
        for kept in kept_from {
            let tokens = match kept {
                Some(old) => {
                    let range = base.range(old);
                    &base.stream[range.start as usize..range.end as usize]
                }
                None => {
                    derived += 1;
                    &stream[ranges[2 * derived - 2] as usize..ranges[2 * derived - 1] as usize]
                }
            };
            for &t in tokens {
                if first_met[t as usize] == u32::MAX {
                    first_met[t as usize] = met;
                    met += 1;
                }
            }
        }
        Segment {
            extra,
            after: after.into(),
            stream: stream.into(),
            by_context: by_context.into(),
            ranges: ranges.into(),
            removed: removed.into(),
            first_met: first_met.into(),
        }
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
            &word_bytes(&self.first_met),
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
            first_met: sections.words(7)?,
        };
        let fits = segment.after.len() + 1 == segment.extra.len()
            && segment.by_context.len() < segment.stream.len()
            && segment.files() == files
            && segment.ranges.len() == 2 * files
            && (segment.ranges.iter()).all(|&at| (at as usize) < segment.stream.len())
            && (segment.removed.iter()).all(|&at| (at as usize) < base.by_context.len())
            && segment.first_met.len() == base.vocab.len() + segment.after.len();
        fits.then_some(segment)
    }
}

/// A number for token `id` (the base's or a new one) that orders ids as their strings: the
/// base's ids in their order, each new token right after the base tokens that sort before it.
pub(super) fn order_key(base_len: u32, after: &[u32], id: u32) -> u64 {
    match id.checked_sub(base_len) {
        Some(new) => (u64::from(after[new as usize]) << 32) | u64::from(new + 1),
        None => u64::from(id) << 32,
    }
}
