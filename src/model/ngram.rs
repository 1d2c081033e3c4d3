//! The embedded offline model: a token n-gram language model of code that answers instantly.
//!
//! Two sources of statistics are combined at every step:
//! - the prompt itself: the longest earlier occurrence of the current context inside the
//!   prompt predicts what follows, so context placed in the prompt changes the completion the
//!   way in-context copying does in a large model;
//! - the repository minus the current file: a suffix array over the repository's tokens,
//!   read backwards, finds the longest matching context of any length and the tokens that
//!   followed it. The current file is left out so the model never sees the answer.
//!
//! Model tokens are keyhole's code tokens with a space before a token glued to it (`" x"`), so
//! an n-gram spans more code; indentation stays a token of its own.

mod base;
mod segment;

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use tokio::sync::mpsc::UnboundedSender;

use self::base::{Base, Shifts};
use self::segment::{Segment, order_key};
use super::{
    Backend, BackendError, Completion, CompletionRequest, Delta, TokenCounting, apply_stop,
};
use crate::repo::mapped::{Sections, format_id};
use crate::repo::{FileChanges, FileTable, RepoIndex, SourceFile, base_outgrown};
use crate::token::{CodeTokenizer, Tokenizer};

/// Longest context, in model tokens, either source matches.
const MAX_ORDER: usize = 24;
/// Continuations read from a suffix-array range at most (evenly spread over larger ranges).
const MAX_CONTINUATIONS: usize = 256;
/// In-prompt evidence counts this much more than repository evidence of the same order.
const PROMPT_WEIGHT: f64 = 2.0;
/// Token id marking the boundary between files in the repository stream.
const BOUNDARY: u32 = 0;
/// The statistics' format in their cache beside the repository index: bumped whenever what
/// [`RepoModel::build`] computes changes (model tokens, [`MAX_ORDER`], the order it sorts in)
/// or how the cache lays it out.
const CACHE_VERSION: u32 = 5;

/// Split text into model tokens.
pub fn model_tokens(text: &str) -> Vec<&str> {
    let ends = CodeTokenizer.token_ends(text);
    // At most one model token per code token: never grown (and copied) on a large file.
    let mut out: Vec<&str> = Vec::with_capacity(ends.len());
    let mut start = 0;
    let mut pending_space: Option<usize> = None;
    for end in ends {
        let piece = &text[start..end];
        let at_line_start = out.last().is_none_or(|t| t.ends_with('\n'));
        if piece.starts_with([' ', '\t']) && !at_line_start {
            pending_space = Some(start);
        } else if let Some(space_start) = pending_space.take() {
            if piece.starts_with(['\n', '\r']) {
                out.push(&text[space_start..start]);
                out.push(piece);
            } else {
                out.push(&text[space_start..end]);
            }
        } else {
            out.push(piece);
        }
        start = end;
    }
    if let Some(space_start) = pending_space {
        out.push(&text[space_start..]);
    }
    out
}

/// The repository's statistics as a fresh build of today's files would hold them: the base
/// (as of the files it was built from) and, where files changed since, a segment of the changed
/// and added files, read together. A suffix-array range is a range of the base's, less its
/// positions in files that changed or went, merged in order with a range of the segment's
/// ([`Occurrences`]): what a completion reads is exactly what a fresh build gives.
pub struct RepoModel {
    base: Base,
    segment: Option<Segment>,
    /// Today's files' paths, in the index's order.
    paths: Vec<String>,
    /// Where today's files lie in the stream a fresh build would lay out.
    layout: Layout,
    /// How often each token occurs today, for the last resort; counted when first needed where
    /// there is a segment (the base's own otherwise).
    unigram: OnceLock<Vec<u32>>,
}

/// Today's stream as a fresh build would lay it out, read from the base and the segment.
struct Layout {
    /// Today's files in the index's order: each one's tokens' range in that stream, and where
    /// they lie.
    files: Vec<(Range<u32>, Place)>,
    /// Where the base's positions are in today's stream (none for a file that changed or went).
    base_moves: Shifts,
    /// Where the segment's positions are in today's stream.
    segment_moves: Shifts,
}

impl Layout {
    /// Today's `files` files, changed from the base's as `changes` says: a kept one where the
    /// base has it, the others in order from the segment, the `i`th at `segment_range(i)`.
    fn of(
        base: &Base,
        changes: &FileChanges,
        files: usize,
        segment_range: impl Fn(usize) -> Range<u32>,
    ) -> Layout {
        let kept_from = changes.kept_from(files);
        let (mut base_moves, mut segment_moves) = (Shifts::default(), Shifts::default());
        let mut laid_out = Vec::with_capacity(files);
        let mut derived = 0;
        let mut at = 1;
        for kept in kept_from {
            let (range, place) = match kept {
                Some(old) => {
                    let range = base.range(old);
                    base_moves.moved(range.clone(), at);
                    (range.clone(), Place::Base(range.start))
                }
                None => {
                    let range = segment_range(derived);
                    derived += 1;
                    segment_moves.moved(range.clone(), at);
                    (range.clone(), Place::Segment(range.start))
                }
            };
            let end = at + range.len() as u32;
            laid_out.push((at..end, place));
            at = end + 1;
        }
        Layout {
            files: laid_out,
            base_moves,
            segment_moves,
        }
    }

    /// Where base position `p` (of a file kept as it was) is today.
    fn base_new(&self, p: u32) -> u32 {
        self.base_moves
            .new_position(p)
            .expect("only positions that still count are read")
    }

    /// Where segment position `q` is today.
    fn segment_new(&self, q: u32) -> u32 {
        self.segment_moves
            .new_position(q)
            .expect("every segment position is today's")
    }
}

/// Where a file's tokens lie: from this position of the base's stream or the segment's.
#[derive(Clone, Copy)]
enum Place {
    Base(u32),
    Segment(u32),
}

/// A range of the suffix array as a fresh build would hold it: the positions of `base` (an index
/// range of the base's suffix array) that still count, merged in order with `segment` (one of
/// the segment's).
#[derive(Clone, Debug)]
struct Occurrences {
    base: Range<usize>,
    segment: Range<usize>,
}

/// One position of a merged suffix-array range: an index into the base's suffix array or the
/// segment's.
#[derive(Clone, Copy, Debug, PartialEq)]
enum At {
    Base(usize),
    Segment(usize),
}

/// How the positions at a few ranks of a merged range are found ([`RepoModel::sample`]).
#[derive(Clone, Copy, Debug)]
enum Merge {
    /// Place every segment position among the base's (few segment positions).
    PlaceSegment,
    /// Search for each rank (many segment positions).
    SearchEachRank,
}

impl RepoModel {
    /// The statistics of `index`, from the cache beside the repository index (the build takes
    /// seconds on a large repository, most of it the sort): the base as it is while every file
    /// is as it was; else the base and a segment of the files that changed, were added or
    /// removed, the segment kept beside the base (only it is written after an edit); once the
    /// segment outgrows its share of the repository ([`base_outgrown`]), a new base. A cache that
    /// cannot be trusted is rebuilt, with one line in the log.
    pub fn open(index: &RepoIndex) -> RepoModel {
        let files = &index.files;
        let (Some(base_path), Some(segment_path)) = (
            index.beside_cache("embedded-model.bin"),
            index.beside_cache("embedded-model.segment"),
        ) else {
            return RepoModel::build(files);
        };
        let base_format = format_id("embedded-model", CACHE_VERSION);
        let base = Sections::read(&base_path, &base_format, None, Base::load);
        let keep_base = |base: &Base| {
            if let Err(error) = base.store(&base_path, &base_format) {
                tracing::warn!(path = %base_path.display(), %error, "cannot write a derived cache");
            }
        };
        let Some(mut base) = base else {
            let base = Base::build(files);
            keep_base(&base);
            return RepoModel::of(base, None, files, &FileChanges::none(files.len()));
        };
        let today = FileTable::of(files);
        if base.built_from == today {
            return RepoModel::of(base, None, files, &FileChanges::none(files.len()));
        }
        let changes = FileChanges::between(&base.built_from, files);
        if base_outgrown(changes.derived_again.len(), changes.dropped(), files.len()) {
            base.update(files);
            keep_base(&base);
            let _ = std::fs::remove_file(&segment_path);
            return RepoModel::of(base, None, files, &FileChanges::none(files.len()));
        }
        let key = base.built_from.segment_key(&today);
        let segment_format = format_id("embedded-model segment", CACHE_VERSION);
        let derived_again = changes.derived_again.len();
        let kept = Sections::read(&segment_path, &segment_format, Some(&key), |sections| {
            Segment::load(sections, &base, derived_again)
        });
        let segment = kept.unwrap_or_else(|| {
            let segment = Segment::build(&base, files, &changes);
            if let Err(error) = segment.store(&segment_path, &segment_format, &key) {
                tracing::warn!(path = %segment_path.display(), %error, "cannot write a derived cache");
            }
            segment
        });
        RepoModel::of(base, Some(segment), files, &changes)
    }

    /// Build from a repository's files (a few seconds for a large repository; see
    /// [`Base::build`]).
    pub fn build(files: &[SourceFile]) -> RepoModel {
        RepoModel::of(
            Base::build(files),
            None,
            files,
            &FileChanges::none(files.len()),
        )
    }

    /// `base` and `segment` read together as the statistics of `files`, changed from the base's
    /// as `changes` says: the segment holds every file the base does not hold as it is (none
    /// when the base holds them all).
    fn of(
        base: Base,
        segment: Option<Segment>,
        files: &[SourceFile],
        changes: &FileChanges,
    ) -> RepoModel {
        let layout = Layout::of(&base, changes, files.len(), |i| {
            let segment = segment.as_ref();
            segment
                .expect("a segment holds every file the base lacks")
                .range(i)
        });
        RepoModel {
            base,
            segment,
            paths: files.iter().map(|file| file.path.clone()).collect(),
            layout,
            unigram: OnceLock::new(),
        }
    }

    /// Token ids in all: the base's, then the segment's new ones.
    fn vocab_len(&self) -> usize {
        self.base.vocab.len() + self.segment.as_ref().map_or(0, |s| s.after.len())
    }

    fn string(&self, id: u32) -> &str {
        let base_len = self.base.vocab.len() as u32;
        match (id.checked_sub(base_len), &self.segment) {
            (Some(new), Some(segment)) => segment.extra.string(new + 1),
            _ => self.base.vocab.string(id),
        }
    }

    /// Every token's id and string, the boundary's left out.
    fn strings(&self) -> impl Iterator<Item = (u32, &str)> {
        (1..self.vocab_len() as u32).map(|id| (id, self.string(id)))
    }

    /// The id of a token some file holds today.
    fn token_id(&self, token: &str) -> Option<u32> {
        let live = |&id: &u32| self.first_met(id) != u32::MAX;
        let base_len = self.base.vocab.len() as u32;
        (self.base.vocab.get(token).filter(live)).or_else(|| {
            let segment = self.segment.as_ref()?;
            Some(base_len + segment.extra.get(token)? - 1)
        })
    }

    /// Where token `id` is first met among today's files: a position of today's stream,
    /// `u32::MAX` for a token no file holds now.
    fn first_met(&self, id: u32) -> u32 {
        let segment = self.segment.as_ref();
        let changed = segment.and_then(|segment| segment.first_met(id));
        changed.unwrap_or_else(|| self.base_new(self.base.first_met[id as usize]))
    }

    /// How often token `id` occurs today.
    fn unigram(&self, id: u32) -> u32 {
        let Some(segment) = &self.segment else {
            return self.base.unigram[id as usize];
        };
        let counts = self.unigram.get_or_init(|| {
            let mut counts = self.base.unigram.to_vec();
            counts.resize(self.vocab_len(), 0);
            for &at in segment.removed.iter() {
                let p = self.base.by_context[at as usize];
                counts[self.base.stream[p as usize] as usize] -= 1;
            }
            for &q in segment.by_context.iter() {
                counts[segment.stream[q as usize] as usize] += 1;
            }
            counts
        });
        counts[id as usize]
    }

    /// The tokens of today's file at `range` (a range of [`RepoModel::file_range`]).
    fn tokens_in(&self, range: &Range<u32>) -> &[u32] {
        let files = &self.layout.files;
        let file = files.partition_point(|(r, _)| r.start < range.start);
        let Some((_, place)) = files.get(file).filter(|_| !range.is_empty()) else {
            return &[];
        };
        let (stream, start) = match (place, &self.segment) {
            (Place::Segment(start), Some(segment)) => (&segment.stream, start),
            (Place::Base(start), _) | (Place::Segment(start), None) => (&self.base.stream, start),
        };
        &stream[*start as usize..*start as usize + range.len()]
    }

    /// The range of today's file `path` in the stream a fresh build would lay out.
    fn file_range(&self, path: &str) -> Option<Range<u32>> {
        let file = self.paths.iter().position(|p| p == path)?;
        Some(self.layout.files[file].0.clone())
    }

    /// A number that orders token ids as their strings.
    fn key(&self, id: u32) -> u64 {
        match &self.segment {
            Some(segment) => order_key(self.base.vocab.len() as u32, &segment.after, id),
            None => u64::from(id) << 32,
        }
    }

    /// Where base position `p` (of a file kept as it was) is today.
    fn base_new(&self, p: u32) -> u32 {
        self.layout.base_new(p)
    }

    /// Where segment position `q` is today.
    fn segment_new(&self, q: u32) -> u32 {
        self.layout.segment_new(q)
    }

    /// The suffix array as a whole.
    fn everything(&self) -> Occurrences {
        Occurrences {
            base: 0..self.base.by_context.len(),
            segment: 0..self.segment.as_ref().map_or(0, |s| s.by_context.len()),
        }
    }

    fn segment_positions(&self, range: &Range<usize>) -> &[u32] {
        match &self.segment {
            Some(segment) => &segment.by_context[range.clone()],
            None => &[],
        }
    }

    /// The indices of `base` (a range of the base's suffix array) that no longer count.
    fn removed_in(&self, base: &Range<usize>) -> &[u32] {
        let Some(segment) = &self.segment else {
            return &[];
        };
        let removed = &segment.removed[..];
        let lo = removed.partition_point(|&at| (at as usize) < base.start);
        let hi = removed.partition_point(|&at| (at as usize) < base.end);
        &removed[lo..hi]
    }

    /// How many of the base's positions in `base` still count.
    fn live(&self, base: &Range<usize>) -> usize {
        base.len() - self.removed_in(base).len()
    }

    fn len(&self, occurrences: &Occurrences) -> usize {
        self.live(&occurrences.base) + occurrences.segment.len()
    }

    /// The index into the base's suffix array of the `a`th position of `base` that counts.
    fn live_at(&self, base: &Range<usize>, a: usize) -> usize {
        let removed = self.removed_in(base);
        // Removed indices before the answer: those with at most `a` live ones before them.
        let before =
            partition_by_index(removed.len(), |m| removed[m] as usize - base.start - m <= a);
        base.start + a + before
    }

    /// `occurrences` narrowed to those whose `k`th token back is `want` (the first `k - 1`
    /// already agree).
    fn narrow(&self, occurrences: &Occurrences, k: usize, want: u32) -> Occurrences {
        let base = if (want as usize) < self.base.vocab.len() {
            let slice = &self.base.by_context[occurrences.base.clone()];
            let token_at = |p: u32| self.base.back_token(p, k);
            let lo = slice.partition_point(|&p| token_at(p) < Some(want));
            let hi = slice.partition_point(|&p| token_at(p) <= Some(want));
            occurrences.base.start + lo..occurrences.base.start + hi
        } else {
            occurrences.base.start..occurrences.base.start
        };
        let segment = match &self.segment {
            Some(segment) => {
                let slice = &segment.by_context[occurrences.segment.clone()];
                let want = Some(self.key(want));
                let key_at = |q: u32| segment.back_token(q, k).map(|t| self.key(t));
                let lo = slice.partition_point(|&q| key_at(q) < want);
                let hi = slice.partition_point(|&q| key_at(q) <= want);
                occurrences.segment.start + lo..occurrences.segment.start + hi
            }
            None => 0..0,
        };
        Occurrences { base, segment }
    }

    /// The order of base position `p` and segment position `q` by their contexts alone, which
    /// agree on their first `from` tokens.
    fn context_cmp(&self, p: u32, q: u32, from: usize) -> std::cmp::Ordering {
        let segment = self.segment.as_ref().expect("a segment");
        for k in from + 1..=MAX_ORDER {
            let a = self.base.back_token(p, k).map(|t| self.key(t));
            let b = segment.back_token(q, k).map(|t| self.key(t));
            if a != b || a.is_none() {
                return a.cmp(&b);
            }
        }
        std::cmp::Ordering::Equal
    }

    /// How many segment positions of `segment` come before base position `p` (one that counts).
    fn segment_below(&self, segment: &Range<usize>, p: u32, from: usize) -> usize {
        let p_new = self.base_new(p);
        self.segment_positions(segment).partition_point(|&q| {
            let order = self.context_cmp(p, q, from);
            order.then(p_new.cmp(&self.segment_new(q))).is_gt()
        })
    }

    /// How many positions of `base` that count come before segment position `q`: those of a
    /// smaller context, and of the same context those before it today (kept positions keep their
    /// order, so that is an old position below a bound).
    fn base_below(&self, base: &Range<usize>, q: u32, from: usize) -> usize {
        let slice = &self.base.by_context[base.clone()];
        let lo = slice.partition_point(|&p| self.context_cmp(p, q, from).is_lt());
        let same = slice[lo..].partition_point(|&p| self.context_cmp(p, q, from).is_eq());
        let bound = self.layout.base_moves.first_moved_past(self.segment_new(q));
        let below = lo + slice[lo..lo + same].partition_point(|&p| p < bound);
        below - self.removed_in(&(base.start..base.start + below)).len()
    }

    /// The positions at ranks `0, step, 2 step, …` of `occurrences` (whose contexts agree on
    /// their first `from` tokens).
    fn sample(&self, occurrences: &Occurrences, step: usize, from: usize) -> Vec<At> {
        let (live, segment) = (self.live(&occurrences.base), occurrences.segment.len());
        let samples = (live + segment).div_ceil(step);
        // Placing every segment position costs a search of the base's range each; searching
        // for each rank, a search of the base's range of searches of the segment's.
        let log = |n: usize| n.max(2).ilog2() as usize;
        let how = if segment <= samples * log(segment) {
            Merge::PlaceSegment
        } else {
            Merge::SearchEachRank
        };
        self.sample_by(occurrences, step, from, how)
    }

    fn sample_by(&self, occ: &Occurrences, step: usize, from: usize, how: Merge) -> Vec<At> {
        let (live, segment) = (self.live(&occ.base), occ.segment.len());
        let ranks = (0..live + segment).step_by(step);
        let base_at = |a: usize| At::Base(self.live_at(&occ.base, a));
        let segment_at = |b: usize| At::Segment(occ.segment.start + b);
        if segment == 0 {
            return ranks.map(base_at).collect();
        }
        if live == 0 {
            return ranks.map(segment_at).collect();
        }
        let positions = self.segment_positions(&occ.segment);
        match how {
            Merge::PlaceSegment => {
                let placed: Vec<usize> = (positions.iter().enumerate())
                    .map(|(b, &q)| b + self.base_below(&occ.base, q, from))
                    .collect();
                let mut before = 0;
                ranks
                    .map(|rank| {
                        before += placed[before..].partition_point(|&r| r < rank);
                        match placed.get(before) {
                            Some(&r) if r == rank => segment_at(before),
                            _ => base_at(rank - before),
                        }
                    })
                    .collect()
            }
            Merge::SearchEachRank => {
                let rank_of_base = |a: usize| {
                    let p = self.base.by_context[self.live_at(&occ.base, a)];
                    a + self.segment_below(&occ.segment, p, from)
                };
                ranks
                    .map(|rank| {
                        let bases = partition_by_index(live, |a| rank_of_base(a) <= rank);
                        if bases > 0 && rank_of_base(bases - 1) == rank {
                            base_at(bases - 1)
                        } else {
                            segment_at(rank - bases)
                        }
                    })
                    .collect()
            }
        }
    }

    /// The position `at` points to, where it is today, and the token there.
    fn read(&self, at: At) -> (u32, u32) {
        match (at, &self.segment) {
            (At::Segment(i), Some(segment)) => {
                let q = segment.by_context[i];
                (self.segment_new(q), segment.stream[q as usize])
            }
            (At::Base(i), _) | (At::Segment(i), None) => {
                let p = self.base.by_context[i];
                (self.base_new(p), self.base.stream[p as usize])
            }
        }
    }

    /// The longest suffix of `context` found in the repository outside `exclude`, with the
    /// tokens that followed it there: (matched order, [(token, count)]).
    fn continuations(
        &self,
        context: &[u32],
        exclude: &Range<u32>,
        max_order: usize,
    ) -> (usize, Vec<(u32, u32)>) {
        let mut occurrences = self.everything();
        let mut order = 0;
        for k in 1..=max_order.min(context.len()).min(MAX_ORDER) {
            let want = context[context.len() - k];
            if want == NOT_IN_REPO {
                break;
            }
            let narrowed = self.narrow(&occurrences, k, want);
            if !self.has_outside(&narrowed, exclude) {
                break;
            }
            occurrences = narrowed;
            order = k;
        }
        (order, self.count_next(&occurrences, order, exclude))
    }

    fn has_outside(&self, occurrences: &Occurrences, exclude: &Range<u32>) -> bool {
        let len = self.len(occurrences);
        if len == 0 {
            return false;
        }
        if len > exclude.len() {
            return true;
        }
        let mut removed = self.removed_in(&occurrences.base).iter().peekable();
        let base = (occurrences.base.clone())
            .filter(|&at| removed.next_if_eq(&&(at as u32)).is_none())
            .map(|at| self.base_new(self.base.by_context[at]));
        let segment =
            (self.segment_positions(&occurrences.segment).iter()).map(|&q| self.segment_new(q));
        { base }.chain(segment).any(|p| !exclude.contains(&p))
    }

    /// What follows the positions of `occurrences` outside `exclude` (at most
    /// [`MAX_CONTINUATIONS`] of them, evenly spread).
    fn count_next(
        &self,
        occurrences: &Occurrences,
        from: usize,
        exclude: &Range<u32>,
    ) -> Vec<(u32, u32)> {
        let step = self.len(occurrences).div_ceil(MAX_CONTINUATIONS).max(1);
        let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
        for at in self.sample(occurrences, step, from) {
            let (p, next) = self.read(at);
            if !exclude.contains(&p) {
                *counts.entry(next).or_default() += 1;
            }
        }
        counts.into_iter().collect()
    }
}

/// The number of indices `i` in `0..n` for which `below(i)` holds, which holds for a prefix.
fn partition_by_index(n: usize, below: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Marks a prompt token the repository never saw.
const NOT_IN_REPO: u32 = u32::MAX;

/// One request's view: prompt tokens (plus what has been generated) with their strings.
struct Sequence<'a> {
    repo: &'a RepoModel,
    /// Token ids: repository ids where the repository knows the token, local ids above.
    ids: Vec<u32>,
    /// Strings of local tokens, by `id - local_base`.
    local: Vec<String>,
    local_ids: FxHashMap<String, u32>,
    /// Positions `j` by the token before them (`ids[j - 1]`), for in-prompt matching.
    after: FxHashMap<u32, Vec<usize>>,
}

const LOCAL_BASE: u32 = 1 << 31;

impl<'a> Sequence<'a> {
    fn new(repo: &'a RepoModel, tokens: &[&str]) -> Self {
        let mut seq = Sequence {
            repo,
            ids: Vec::new(),
            local: Vec::new(),
            local_ids: FxHashMap::default(),
            after: FxHashMap::default(),
        };
        for t in tokens {
            let id = seq.id_of(t);
            seq.push(id);
        }
        seq
    }

    fn id_of(&mut self, token: &str) -> u32 {
        if let Some(id) = self.repo.token_id(token) {
            return id;
        }
        if let Some(&id) = self.local_ids.get(token) {
            return id;
        }
        let id = LOCAL_BASE + self.local.len() as u32;
        self.local.push(token.to_string());
        self.local_ids.insert(token.to_string(), id);
        id
    }

    fn text(&self, id: u32) -> &str {
        if id >= LOCAL_BASE {
            &self.local[(id - LOCAL_BASE) as usize]
        } else {
            self.repo.string(id)
        }
    }

    fn push(&mut self, id: u32) {
        if let Some(&prev) = self.ids.last() {
            self.after.entry(prev).or_default().push(self.ids.len());
        }
        self.ids.push(id);
    }

    /// Scored tokens' order: best first; of equal scores, the token the repository met first,
    /// then the prompt's own tokens in the order the prompt brought them.
    fn by_score(&self, a: &(u32, f64), b: &(u32, f64)) -> std::cmp::Ordering {
        let met = |id: u32| match id {
            LOCAL_BASE.. => (1, id),
            _ => (0, self.repo.first_met(id)),
        };
        b.1.total_cmp(&a.1).then(met(a.0).cmp(&met(b.0)))
    }

    /// Ids as the repository sees them (local tokens are unknown there).
    fn repo_view(&self, k: usize) -> Vec<u32> {
        let start = self.ids.len().saturating_sub(k);
        self.ids[start..]
            .iter()
            .map(|&i| if i >= LOCAL_BASE { NOT_IN_REPO } else { i })
            .collect()
    }

    /// The longest earlier occurrence in the sequence of its own end, with what followed it.
    fn prompt_continuations(&self, max_order: usize) -> (usize, Vec<(u32, u32)>) {
        let n = self.ids.len();
        let Some(&last) = self.ids.last().filter(|_| max_order > 0) else {
            return (0, Vec::new());
        };
        let Some(positions) = self.after.get(&last) else {
            return (0, Vec::new());
        };
        let mut best = 0;
        let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
        for &j in positions.iter().filter(|&&j| j < n) {
            let mut len = 1;
            while len < max_order.min(MAX_ORDER)
                && len < j
                && self.ids[j - 1 - len] == self.ids[n - 1 - len]
            {
                len += 1;
            }
            if len > best {
                best = len;
                counts.clear();
            }
            if len == best {
                *counts.entry(self.ids[j]).or_default() += 1;
            }
        }
        (best, counts.into_iter().collect())
    }

    /// Scores of candidate next tokens, combining prompt and repository at their longest
    /// matches; with `prefix`, only tokens that start with it (backing off to shorter contexts
    /// until some do).
    fn candidates(&self, exclude: &Range<u32>, prefix: Option<&str>) -> Vec<(u32, f64)> {
        let mut max_order = MAX_ORDER;
        loop {
            let (lp, prompt) = self.prompt_continuations(max_order);
            let (lr, repo) =
                self.repo
                    .continuations(&self.repo_view(max_order), exclude, max_order);
            let mut scores: FxHashMap<u32, f64> = FxHashMap::default();
            add_evidence(&mut scores, &prompt, lp, PROMPT_WEIGHT);
            add_evidence(&mut scores, &repo, lr, 1.0);
            let fits = |&(id, _): &(u32, f64)| prefix.is_none_or(|p| self.text(id).starts_with(p));
            let mut kept: Vec<(u32, f64)> = scores.into_iter().filter(fits).collect();
            if !kept.is_empty() {
                kept.sort_by(|a, b| self.by_score(a, b));
                return kept;
            }
            if lp.max(lr) == 0 {
                return prefix
                    .map(|p| self.unigram_with_prefix(p, exclude))
                    .unwrap_or_default();
            }
            max_order = lp.max(lr) - 1;
        }
    }

    /// Last resort for a partial word: the tokens of the prompt that complete it, else the
    /// repository's most frequent ones, counted outside the `exclude`d current file (a word
    /// that only the hole's own line holds would otherwise be copied from the answer).
    fn unigram_with_prefix(&self, prefix: &str, exclude: &Range<u32>) -> Vec<(u32, f64)> {
        let completes = |s: &str| s.starts_with(prefix) && s.len() > prefix.len();
        let mut found: FxHashMap<u32, f64> = FxHashMap::default();
        for &id in &self.ids {
            if completes(self.text(id)) {
                *found.entry(id).or_default() += PROMPT_WEIGHT;
            }
        }
        if found.is_empty() {
            let repo = self.repo;
            let mut in_current_file: FxHashMap<u32, u32> = FxHashMap::default();
            for &id in repo.tokens_in(exclude) {
                if completes(repo.string(id)) {
                    *in_current_file.entry(id).or_default() += 1;
                }
            }
            for (id, s) in repo.strings() {
                let elsewhere =
                    repo.unigram(id) - in_current_file.get(&id).copied().unwrap_or_default();
                if completes(s) && elsewhere > 0 {
                    found.insert(id, f64::from(elsewhere));
                }
            }
        }
        let mut out: Vec<(u32, f64)> = found.into_iter().collect();
        out.sort_by(|a, b| self.by_score(a, b));
        out
    }
}

/// Longer matches are much stronger evidence: a match of order `k` weighs `k²`.
fn add_evidence(
    scores: &mut FxHashMap<u32, f64>,
    counts: &[(u32, u32)],
    order: usize,
    weight: f64,
) {
    let total: u32 = counts.iter().map(|&(_, c)| c).sum();
    if order == 0 || total == 0 {
        return;
    }
    let w = weight * (order * order) as f64;
    for &(id, c) in counts {
        *scores.entry(id).or_default() += w * f64::from(c) / f64::from(total);
    }
}

/// The embedded model as a completion backend (cheap to clone: the statistics are shared).
#[derive(Clone)]
pub struct EmbeddedModel {
    repo: Arc<Statistics>,
}

/// The repository statistics, built when the first completion needs them: commands that only
/// show prompts never complete.
struct Statistics {
    /// The repository they are built from; none for a model that knows no repository.
    index: Option<Arc<RepoIndex>>,
    built: OnceLock<RepoModel>,
}

impl EmbeddedModel {
    /// A model of `index`'s repository, its statistics built now (and not cached).
    pub fn new(index: &RepoIndex) -> Self {
        Self::with(None, OnceLock::from(RepoModel::build(&index.files)))
    }

    /// A model of `index`'s repository whose statistics are built (or read from the cache
    /// beside the repository index) on the first completion.
    pub fn open(index: Arc<RepoIndex>) -> Self {
        Self::with(Some(index), OnceLock::new())
    }

    /// A model that knows no repository and learns from its prompts alone (for task files
    /// from benchmarks whose repositories are not at hand).
    pub fn without_repository() -> Self {
        Self::with(None, OnceLock::new())
    }

    fn with(index: Option<Arc<RepoIndex>>, built: OnceLock<RepoModel>) -> Self {
        EmbeddedModel {
            repo: Arc::new(Statistics { index, built }),
        }
    }

    /// The statistics, built by the first completion that needs them, as the CPU pool's rule
    /// for shared values says ([`crate::pool::get_or_build`]).
    fn statistics(&self) -> &RepoModel {
        let Statistics { index, built } = self.repo.as_ref();
        let build = || match index {
            Some(index) => RepoModel::open(index),
            None => RepoModel::build(&[]),
        };
        crate::pool::get_or_build(built, build)
    }

    /// One completion of `request.prompt`; `sample` picks the sample's seed offset.
    pub fn generate(&self, request: &CompletionRequest, sample: u64) -> String {
        let tokens = model_tokens(&request.prompt);
        let (context, prefix) = split_partial(&tokens);
        let repo = self.statistics();
        let mut seq = Sequence::new(repo, context);
        let exclude = request
            .current_file
            .as_ref()
            .and_then(|f| repo.file_range(f))
            .unwrap_or(0..0);
        let mut rng = ChaCha8Rng::seed_from_u64(request.seed.unwrap_or(0).wrapping_add(sample));
        let mut out = String::new();
        let mut prefix = prefix.map(str::to_string);
        for _ in 0..request.max_tokens {
            let candidates = seq.candidates(&exclude, prefix.as_deref());
            let Some(id) = pick(&candidates, request.temperature, &mut rng) else {
                break;
            };
            let text = seq.text(id).to_string();
            out.push_str(&text[prefix.take().map_or(0, |p| p.len())..]);
            if text.contains('\n')
                || request
                    .stop
                    .iter()
                    .any(|s| !s.is_empty() && out.contains(s.as_str()))
            {
                break;
            }
            seq.push(id);
        }
        apply_stop(&out, &request.stop)
    }
}

/// A trailing partial word (or space) of the prompt becomes a constraint on the first token:
/// a hole in the middle of `findByCus|tomerId` must continue the word, not start a new one.
fn split_partial<'t>(tokens: &'t [&'t str]) -> (&'t [&'t str], Option<&'t str>) {
    match tokens.split_last() {
        Some((last, rest))
            if last.ends_with(|c: char| {
                c.is_alphanumeric() || c == '_' || c == '$' || c == ' ' || c == '\t'
            }) =>
        {
            (rest, Some(*last))
        }
        _ => (tokens, None),
    }
}

/// The best candidate, or one drawn with probability ∝ score^(1/temperature).
fn pick(candidates: &[(u32, f64)], temperature: f32, rng: &mut ChaCha8Rng) -> Option<u32> {
    if temperature <= 0.0 || candidates.len() < 2 {
        return candidates.first().map(|c| c.0);
    }
    let weights: Vec<f64> = candidates
        .iter()
        .map(|c| c.1.powf(1.0 / f64::from(temperature)))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut x = rng.random::<f64>() * total;
    for (c, w) in candidates.iter().zip(&weights) {
        if x < *w {
            return Some(c.0);
        }
        x -= w;
    }
    candidates.last().map(|c| c.0)
}

#[async_trait]
impl Backend for EmbeddedModel {
    fn name(&self) -> &str {
        "embedded"
    }

    fn counting(&self) -> TokenCounting {
        TokenCounting::Exact
    }

    fn tokenizer(&self) -> Option<&'static str> {
        Some(CodeTokenizer.name())
    }

    async fn complete(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        // Generation is CPU work: run it off the async workers so input and network stay
        // responsive, and so several requests use several cores.
        let (model, owned) = (self.clone(), request.clone());
        let out = tokio::task::spawn_blocking(move || {
            (0..owned.n.max(1))
                .map(|index| {
                    let started = Instant::now();
                    let text = model.generate(&owned, index as u64);
                    Completion {
                        model_prompt_tokens: None,
                        text,
                        latency: started.elapsed(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|err| BackendError::Config {
            backend: "embedded".into(),
            detail: format!("generation failed: {err}"),
        })?;
        if let Some(tx) = deltas {
            for (index, completion) in out.iter().enumerate() {
                let _ = tx.send(Delta {
                    index,
                    text: completion.text.clone(),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::testing::{edited, in_memory, java_sample};

    /// Everything base statistics hold, to compare two of them exactly.
    fn parts(base: &Base) -> String {
        format!(
            "{:?}",
            (
                &base.built_from,
                base.vocab.strings().collect::<Vec<_>>(),
                &base.stream,
                &base.by_context,
                (0..base.built_from.len())
                    .map(|f| base.range(f))
                    .collect::<Vec<_>>(),
                &base.unigram,
                &base.first_met,
            )
        )
    }

    fn embedded(repo: RepoModel) -> EmbeddedModel {
        EmbeddedModel::with(None, OnceLock::from(repo))
    }

    /// Completions of prompts cut from every third file, at a few places of each.
    fn answers(model: &EmbeddedModel, index: &RepoIndex) -> Vec<String> {
        let mut answers = Vec::new();
        for file in index.files.iter().step_by(3) {
            for cut in [3, 2] {
                let mut at = file.text.len() / cut;
                while !file.text.is_char_boundary(at) {
                    at -= 1;
                }
                let request = CompletionRequest {
                    prompt: file.text[..at].to_string(),
                    suffix: None,
                    max_tokens: 24,
                    temperature: 0.0,
                    seed: None,
                    stop: vec!["\n".into()],
                    n: 1,
                    current_file: Some(file.path.clone()),
                    instruction: false,
                };
                answers.push(model.generate(&request, 0));
            }
        }
        answers
    }

    /// The suffix array as `model` reads it (today's position and the token there), merged the
    /// way `how` merges.
    fn suffix_array(model: &RepoModel, how: Merge, step: usize) -> Vec<(u32, &str)> {
        let all = model.sample_by(&model.everything(), step, 0, how);
        (all.into_iter())
            .map(|at| model.read(at))
            .map(|(p, token)| (p, model.string(token)))
            .collect()
    }

    /// Where two lists first differ, to say so in a line.
    fn first_difference<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T]) -> Option<String> {
        let at = (a.iter().zip(b)).position(|(x, y)| x != y);
        let at = at.or((a.len() != b.len()).then(|| a.len().min(b.len())))?;
        Some(format!(
            "at {at} of {}/{}: {:?} vs {:?}",
            a.len(),
            b.len(),
            a.get(at),
            b.get(at)
        ))
    }

    /// That `model` reads as `fresh` does: the same suffix array (merged either way), and at
    /// contexts taken from every `every`th file the same ranges, samples of them and
    /// continuations.
    fn assert_reads_as(model: &RepoModel, fresh: &RepoModel, every: usize) {
        // Every position placing the segment's; every 17th searching (slower).
        for (how, step) in [(Merge::PlaceSegment, 1), (Merge::SearchEachRank, 17)] {
            let got = suffix_array(model, how, step);
            let want = suffix_array(fresh, Merge::PlaceSegment, step);
            assert_eq!(first_difference(&got, &want), None, "{how:?}");
        }
        let named = |(token, count): (u32, u32), model: &RepoModel| {
            (model.string(token).to_string(), count)
        };
        for (path, (range, _)) in (fresh.paths.iter().zip(&fresh.layout.files)).step_by(every) {
            let exclude = fresh.file_range(path).unwrap();
            assert_eq!(model.file_range(path), Some(exclude.clone()));
            assert_eq!(
                model
                    .tokens_in(range)
                    .iter()
                    .map(|&t| model.string(t))
                    .collect::<Vec<_>>(),
                fresh
                    .tokens_in(range)
                    .iter()
                    .map(|&t| fresh.string(t))
                    .collect::<Vec<_>>()
            );
            let tokens = fresh.tokens_in(range);
            for end in (1..tokens.len()).step_by(29) {
                let context: Vec<&str> = (tokens[end.saturating_sub(8)..end].iter())
                    .map(|&t| fresh.string(t))
                    .collect();
                let ids = |m: &RepoModel| -> Vec<u32> {
                    (context.iter())
                        .map(|t| m.token_id(t).unwrap_or(NOT_IN_REPO))
                        .collect()
                };
                let (mut got, mut want) = (
                    model.continuations(&ids(model), &exclude, MAX_ORDER),
                    fresh.continuations(&ids(fresh), &exclude, MAX_ORDER),
                );
                let mut got: Vec<_> = got.1.drain(..).map(|c| named(c, model)).collect();
                let mut want: Vec<_> = want.1.drain(..).map(|c| named(c, fresh)).collect();
                got.sort();
                want.sort();
                assert_eq!(got, want, "{path} at {end}");
                // Narrowed ranges sampled either way, at a step that skips.
                let (mut at_model, mut at_fresh) = (model.everything(), fresh.everything());
                for (k, t) in context.iter().rev().enumerate().take(3) {
                    let (Some(a), Some(b)) = (model.token_id(t), fresh.token_id(t)) else {
                        break;
                    };
                    at_model = model.narrow(&at_model, k + 1, a);
                    at_fresh = fresh.narrow(&at_fresh, k + 1, b);
                    assert_eq!(model.len(&at_model), fresh.len(&at_fresh));
                    let step = fresh.len(&at_fresh).div_ceil(40).max(3);
                    let want: Vec<_> =
                        (fresh.sample_by(&at_fresh, step, k + 1, Merge::PlaceSegment))
                            .into_iter()
                            .map(|at| fresh.read(at).0)
                            .collect();
                    for how in [Merge::PlaceSegment, Merge::SearchEachRank] {
                        let got: Vec<_> = (model.sample_by(&at_model, step, k + 1, how))
                            .into_iter()
                            .map(|at| model.read(at).0)
                            .collect();
                        assert_eq!(got, want, "{path} at {end}, order {}", k + 1);
                    }
                }
            }
        }
        // Where each token is first met today, exactly; a token no file holds, nowhere.
        for (id, s) in model.strings() {
            let want = fresh
                .token_id(s)
                .map_or(u32::MAX, |there| fresh.first_met(there));
            assert_eq!(model.first_met(id), want, "{s}");
        }
        for (id, s) in fresh.strings() {
            let id_there = model.token_id(s).expect("every token is known");
            assert_eq!(model.unigram(id_there), fresh.unigram(id), "{s}");
        }
    }

    /// `base` and the segment that brings it up to `files`, read together.
    fn with_segment(base: Base, files: &[SourceFile]) -> RepoModel {
        let changes = FileChanges::between(&base.built_from, files);
        let segment = Segment::build(&base, files, &changes);
        RepoModel::of(base, Some(segment), files, &changes)
    }

    #[test]
    fn an_edit_with_no_new_token_keeps_the_vocabulary_and_moves_the_rest_alike() {
        let before = java_sample();
        // One line of a middle file doubled: every token is known and none goes, while the
        // files after it move by the line's tokens.
        let mut after = before.clone();
        let (path, text) = after[3].clone();
        let mut lines: Vec<&str> = text.lines().collect();
        let doubled = lines.iter().position(|l| l.contains('(')).unwrap();
        lines.insert(doubled, lines[doubled]);
        after[3] = (path, lines.join("\n") + "\n");
        let (before, after) = (in_memory(&before), in_memory(&after));
        let mut updated = Base::build(&before.files);
        updated.update(&after.files);
        assert_eq!(parts(&updated), parts(&Base::build(&after.files)));
        updated.update(&before.files);
        assert_eq!(parts(&updated), parts(&Base::build(&before.files)));
        // The same edit as a segment over the base.
        let fresh = RepoModel::build(&after.files);
        assert_reads_as(&with_segment(updated, &after.files), &fresh, 1);
    }

    #[test]
    fn statistics_updated_file_by_file_are_those_built_afresh() {
        let sources = java_sample();
        let (before, after) = (in_memory(&sources), in_memory(&edited(&sources)));
        let mut updated = Base::build(&before.files);
        updated.update(&after.files);
        let fresh = Base::build(&after.files);
        assert_eq!(parts(&updated), parts(&fresh));
        // Completions read the same statistics, so they are the same.
        let unchanged = FileChanges::none(after.files.len());
        let model = |base| embedded(RepoModel::of(base, None, &after.files, &unchanged));
        assert_eq!(
            answers(&model(updated), &after),
            answers(&model(fresh), &after)
        );
        let mut back = Base::build(&after.files);
        back.update(&before.files);
        assert_eq!(parts(&back), parts(&Base::build(&before.files)));
    }

    #[test]
    fn a_base_and_a_segment_read_as_statistics_built_afresh() {
        let sources = java_sample();
        let (before, after) = (in_memory(&sources), in_memory(&edited(&sources)));
        for (from, to) in [(&before, &after), (&after, &before)] {
            let fresh = RepoModel::build(&to.files);
            let model = with_segment(Base::build(&from.files), &to.files);
            assert!(
                model.segment.as_ref().unwrap().extra.len() > 1
                    || from.files.len() > to.files.len()
            );
            assert_reads_as(&model, &fresh, 1);
            assert_eq!(answers(&embedded(model), to), answers(&embedded(fresh), to));
        }
    }

    #[test]
    fn where_a_token_is_first_met_after_an_edit_is_where_a_fresh_build_meets_it() {
        let file = |name: &str, body: &str| (format!("src/{name}.java"), format!("{body}\n"));
        let before = vec![
            file("b", "class B { int alpha; int beta; int delta; }"),
            file("c", "class C { int gamma; int epsilon; }"),
            file(
                "d",
                "class D { int alpha; int delta; int epsilon; int zeta; }",
            ),
            file("e", "class E { int gamma; }"),
        ];
        let after = vec![
            // Added before the rest: `gamma` is met here first now.
            file("a", "class A { int gamma; int omega; }"),
            // Edited: `alpha` is next met in D, after files that moved; `beta` is met nowhere;
            // `delta` is still met here first; `zeta` comes earlier.
            file("b", "class B { int delta; int zeta; }"),
            // C is gone: `epsilon` is next met in D.
            file(
                "d",
                "class D { int alpha; int delta; int epsilon; int zeta; }",
            ),
            file("e", "class E { int gamma; }"),
        ];
        let (before, after) = (in_memory(&before), in_memory(&after));
        for (from, to) in [(&before, &after), (&after, &before)] {
            let model = with_segment(Base::build(&from.files), &to.files);
            let fresh = RepoModel::build(&to.files);
            assert_reads_as(&model, &fresh, 1);
        }
        let model = with_segment(Base::build(&before.files), &after.files);
        let beta = model.base.vocab.get(" beta").unwrap();
        assert_eq!(model.first_met(beta), u32::MAX);
        assert_eq!(model.token_id(" beta"), None);
    }

    /// Writes `sources` under `root` as the only files there.
    fn on_disk(root: &std::path::Path, sources: &[(String, String)]) {
        let _ = std::fs::remove_dir_all(root);
        for (path, text) in sources {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    #[test]
    fn statistics_kept_as_a_base_and_a_segment_answer_as_ones_built_afresh() {
        // Three copies of the sample, so that a few changed files stay under the segment's
        // share of the repository, and forty do not.
        let sample = java_sample();
        let mut sources: Vec<(String, String)> = Vec::new();
        for copy in ["a", "b", "c"] {
            sources.extend(
                sample
                    .iter()
                    .map(|(p, t)| (format!("{copy}/{p}"), t.clone())),
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let (root, cache) = (dir.path().join("repo"), dir.path().join("cache"));
        let open = |sources: &[(String, String)]| {
            on_disk(&root, sources);
            let index = RepoIndex::open(&root, Some(&cache)).unwrap();
            let model = RepoModel::open(&index);
            (index, model)
        };
        let check = |index: &RepoIndex, model: RepoModel| {
            let fresh = RepoModel::build(&index.files);
            assert_reads_as(&model, &fresh, 9);
            assert_eq!(
                answers(&embedded(model), index),
                answers(&embedded(fresh), index)
            );
        };
        let (index, model) = open(&sources);
        assert!(model.segment.is_none());
        let base_path = index.beside_cache("embedded-model.bin").unwrap();
        let segment_path = index.beside_cache("embedded-model.segment").unwrap();
        let base_bytes = std::fs::read(&base_path).unwrap();
        assert!(!segment_path.exists());

        // An edit writes a segment and leaves the base alone; the next run reads both.
        let edited_sources = edited(&sources);
        let (index, model) = open(&edited_sources);
        assert!(model.segment.is_some());
        assert!(segment_path.exists());
        assert_eq!(std::fs::read(&base_path).unwrap(), base_bytes);
        check(&index, model);
        let segment_bytes = std::fs::read(&segment_path).unwrap();
        let (index, model) = open(&edited_sources);
        assert!(matches!(
            model.segment.as_ref().unwrap().stream,
            crate::repo::mapped::Words::Mapped { .. }
        ));
        assert_eq!(std::fs::read(&segment_path).unwrap(), segment_bytes);
        check(&index, model);

        // A torn segment is rebuilt.
        std::fs::write(&segment_path, &segment_bytes[..segment_bytes.len() / 2]).unwrap();
        let (index, model) = open(&edited_sources);
        assert_eq!(std::fs::read(&segment_path).unwrap(), segment_bytes);
        check(&index, model);

        // Past its share of the repository, the segment goes into a new base.
        let mut many = edited_sources.clone();
        for (_, text) in many.iter_mut().take(40) {
            text.push_str("// one more line\n");
        }
        let (index, model) = open(&many);
        assert!(model.segment.is_none());
        assert!(!segment_path.exists());
        assert_ne!(std::fs::read(&base_path).unwrap(), base_bytes);
        check(&index, model);
        let (index, model) = open(&many);
        assert!(matches!(
            model.base.stream,
            crate::repo::mapped::Words::Mapped { .. }
        ));
        check(&index, model);
    }

    #[test]
    fn spaces_glue_to_the_next_token_but_indentation_stands_alone() {
        assert_eq!(
            model_tokens("    return a + b;\n  x"),
            ["    ", "return", " a", " +", " b", ";", "\n", "  ", "x"]
        );
        assert_eq!(model_tokens("a = \n"), ["a", " =", " ", "\n"]);
        assert_eq!(model_tokens("f(x) "), ["f", "(", "x", ")", " "]);
    }

    #[test]
    fn a_partial_word_constrains_the_first_token() {
        let tokens = model_tokens("return findByCus");
        assert_eq!(
            split_partial(&tokens),
            (&["return"][..], Some(" findByCus"))
        );
        let tokens = model_tokens("repo.");
        assert_eq!(split_partial(&tokens).1, None);
    }
}
