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

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio::sync::mpsc::UnboundedSender;

use super::{
    Backend, BackendError, Completion, CompletionRequest, Delta, TokenCounting, apply_stop,
};
use crate::repo::{Cached, FileChanges, FileTable, RepoIndex, SourceFile, packed_u32};
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
/// [`RepoModel::build`] computes changes (model tokens, [`MAX_ORDER`], the order it sorts in).
const CACHE_VERSION: u32 = 3;

/// Split text into model tokens.
pub fn model_tokens(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut pending_space: Option<usize> = None;
    for end in CodeTokenizer.token_ends(text) {
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

/// Token strings and their ids: id 0 is the file boundary, the others follow the strings'
/// order, so that the ids of a repository's tokens do not depend on the order its files came in
/// and a token gained or lost leaves the others in order ([`RepoModel::update`]). Held as one
/// text and where each string ends in it, and looked up by binary search: loading it from the
/// cache allocates nothing per token (a map of a large repository's tokens took a tenth of a
/// warm run to build).
#[derive(Default)]
struct Vocabulary {
    /// Every token's string, in id order, one after another.
    text: String,
    /// Where each id's string ends in `text` (id 0, the boundary, is empty).
    ends: Vec<u32>,
}

impl Vocabulary {
    /// The vocabulary of `tokens`, sorted and without repeats.
    fn of_sorted<'s>(tokens: impl IntoIterator<Item = &'s str>) -> Self {
        let mut vocab = Vocabulary {
            text: String::new(),
            ends: vec![0],
        };
        for token in tokens {
            vocab.text.push_str(token);
            vocab.ends.push(vocab.text.len() as u32);
        }
        vocab
    }

    /// Ids in all, the boundary's included.
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn string(&self, id: u32) -> &str {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.text[start as usize..self.ends[id] as usize]
    }

    /// Every token's id and string, the boundary's left out.
    fn strings(&self) -> impl Iterator<Item = (u32, &str)> {
        (1..self.len() as u32).map(|id| (id, self.string(id)))
    }

    fn get(&self, token: &str) -> Option<u32> {
        if token.is_empty() {
            return None;
        }
        let (mut lo, mut hi) = (1, self.len() as u32);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.string(mid).cmp(token) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

/// Cached as its text and ends; one out of order or cutting a character is refused.
impl Serialize for Vocabulary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Packed<'a>(&'a str, #[serde(with = "packed_u32")] &'a Vec<u32>);
        Packed(&self.text, &self.ends).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Vocabulary {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Packed(String, #[serde(with = "packed_u32")] Vec<u32>);
        let Packed(text, ends) = Packed::deserialize(deserializer)?;
        let cuts_well = ends.first() == Some(&0)
            && ends.windows(2).all(|w| w[0] < w[1])
            && ends.last().is_some_and(|&end| end as usize == text.len())
            && ends.iter().all(|&end| text.is_char_boundary(end as usize));
        let vocab = Vocabulary { text, ends };
        let sorted =
            cuts_well && (2..vocab.len() as u32).all(|id| vocab.string(id - 1) < vocab.string(id));
        if !sorted {
            return Err(serde::de::Error::custom("a vocabulary out of order"));
        }
        Ok(vocab)
    }
}

/// Repository statistics: every file's tokens in one stream and a suffix array over it. Files
/// can come and go ([`RepoModel::update`]); the statistics are then exactly those built afresh.
#[derive(Serialize, Deserialize)]
pub struct RepoModel {
    /// The files the statistics were built from, in the index's order.
    built_from: FileTable,
    vocab: Vocabulary,
    /// All files' tokens, each file followed by `BOUNDARY`.
    #[serde(with = "packed_u32")]
    stream: Vec<u32>,
    /// Stream positions `p` (of a token that has a preceding context), sorted by the tokens
    /// before `p` read backwards, then by position ([`context_order`]).
    #[serde(with = "packed_u32")]
    by_context: Vec<u32>,
    /// Each file's range in the stream, by repository path.
    files: FxHashMap<String, Range<u32>>,
    /// How often each token occurs, for the last resort.
    #[serde(with = "packed_u32")]
    unigram: Vec<u32>,
    /// Per token: where it first occurs among the repository's tokens, by rank. Equal scores
    /// go to the token met first, as they did when ids were given in that order.
    #[serde(with = "packed_u32")]
    first_met: Vec<u32>,
}

impl RepoModel {
    /// The statistics of `index`, from the cache beside the repository index (the build takes
    /// seconds on a large repository, most of it the sort): as they are while every file is as
    /// it was, updated for the files that changed, were added or removed otherwise, and kept
    /// for the next run. A cache that cannot be trusted is rebuilt, with one line in the log.
    pub fn open(index: &RepoIndex) -> RepoModel {
        let Some(cache) = index.derived_cache("embedded-model", CACHE_VERSION) else {
            return RepoModel::build(&index.files);
        };
        let model = match cache.load::<RepoModel>() {
            Cached::Current(model) => return model,
            Cached::Stale(mut model) => {
                model.update(&index.files);
                model
            }
            Cached::Missing => RepoModel::build(&index.files),
            Cached::Unusable(why) => {
                tracing::warn!("{why}");
                RepoModel::build(&index.files)
            }
        };
        cache.store(&model);
        model
    }

    /// Build from a repository's files (a few seconds for a large repository): sorted on the
    /// CPU pool, or by the caller alone where it is a thread of the pool, which must not take
    /// up other jobs while it waits for a piece: jobs of the pool may wait for these statistics.
    pub fn build(files_of_repo: &[SourceFile]) -> RepoModel {
        let mut model = RepoModel {
            built_from: FileTable::default(),
            vocab: Vocabulary::of_sorted([]),
            stream: vec![BOUNDARY],
            by_context: Vec::new(),
            files: FxHashMap::default(),
            unigram: vec![1],
            first_met: vec![0],
        };
        model.update(files_of_repo);
        model
    }

    /// Brought up to `files` from the files the statistics were built from: only the files
    /// that changed or were added are tokenized and only their positions sorted, then merged
    /// into the suffix array, whose other positions keep their order (token ids follow the
    /// tokens' strings, so a token gained or lost leaves the others' order alone).
    pub fn update(&mut self, files: &[SourceFile]) {
        let changes = FileChanges::between(&self.built_from, files);
        let tokens_of = |&id: &u32| model_tokens(&files[id as usize].text);
        let fresh: Vec<Vec<&str>> = if crate::pool::on_pool_thread() {
            changes.derived_again.iter().map(tokens_of).collect()
        } else {
            changes.derived_again.par_iter().map(tokens_of).collect()
        };
        let old_ranges: Vec<Range<u32>> = (self.built_from.paths())
            .map(|path| self.files[path].clone())
            .collect();

        // Which tokens remain, and the vocabulary they make.
        let mut count = self.unigram.clone();
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
        let mut kept_from: Vec<Option<usize>> = vec![None; files.len()];
        for (old, kept) in changes.kept.iter().enumerate() {
            if let Some(new) = kept {
                kept_from[*new as usize] = Some(old);
            }
        }
        let mut fresh = changes.derived_again.iter().zip(fresh).peekable();
        let mut shifts = Shifts::default();
        let mut stream = Vec::with_capacity(self.stream.len());
        stream.push(BOUNDARY);
        let mut ranges = FxHashMap::default();
        let mut fresh_positions: Vec<u32> = Vec::new();
        for (id, file) in files.iter().enumerate() {
            let start = stream.len() as u32;
            if let Some(old) = kept_from[id] {
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
            ranges.insert(file.path.clone(), start..stream.len() as u32);
            stream.push(BOUNDARY);
        }
        drop(by_string);

        // Kept positions keep their order (their contexts' ids kept theirs, positions too);
        // the fresh ones are sorted and merged in.
        let order = |&a: &u32, &b: &u32| context_order(&stream, a, b);
        if crate::pool::on_pool_thread() {
            fresh_positions.sort_unstable_by(order);
        } else {
            fresh_positions.par_sort_unstable_by(order);
        }
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
        let mut met = 0;
        for &t in &stream {
            unigram[t as usize] += 1;
            if first_met[t as usize] == u32::MAX {
                first_met[t as usize] = met;
                met += 1;
            }
        }
        *self = RepoModel {
            built_from: FileTable::of(files),
            vocab,
            stream,
            by_context,
            files: ranges,
            unigram,
            first_met,
        };
    }

    /// The longest suffix of `context` found in the repository outside `exclude`, with the
    /// tokens that followed it there: (matched order, [(token, count)]).
    fn continuations(
        &self,
        context: &[u32],
        exclude: &Range<u32>,
        max_order: usize,
    ) -> (usize, Vec<(u32, u32)>) {
        let by_context = &self.by_context;
        let mut range = 0..by_context.len();
        let mut order = 0;
        for k in 1..=max_order.min(context.len()).min(MAX_ORDER) {
            let want = context[context.len() - k];
            if want == NOT_IN_REPO {
                break;
            }
            let slice = &by_context[range.clone()];
            let token_at = |p: u32| self.back_token(p, k);
            let lo = slice.partition_point(|&p| token_at(p) < Some(want));
            let hi = slice.partition_point(|&p| token_at(p) <= Some(want));
            let narrowed = range.start + lo..range.start + hi;
            if !self.has_outside(&narrowed, exclude) {
                break;
            }
            range = narrowed;
            order = k;
        }
        (order, self.count_next(range, exclude))
    }

    /// The token `k` places before position `p`, or `None` past a file boundary.
    fn back_token(&self, p: u32, k: usize) -> Option<u32> {
        let idx = (p as usize).checked_sub(k)?;
        let t = self.stream[idx];
        (t != BOUNDARY).then_some(t)
    }

    fn has_outside(&self, range: &Range<usize>, exclude: &Range<u32>) -> bool {
        if range.is_empty() {
            return false;
        }
        if range.len() > exclude.len() {
            return true;
        }
        self.by_context[range.clone()]
            .iter()
            .any(|p| !exclude.contains(p))
    }

    fn count_next(&self, range: Range<usize>, exclude: &Range<u32>) -> Vec<(u32, u32)> {
        let step = range.len().div_ceil(MAX_CONTINUATIONS).max(1);
        let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
        for &p in self.by_context[range].iter().step_by(step) {
            if !exclude.contains(&p) {
                *counts.entry(self.stream[p as usize]).or_default() += 1;
            }
        }
        counts.into_iter().collect()
    }
}

/// Where the positions of an old stream went: per run of old positions, how far it moved, or
/// that it went (a changed or removed file). Consecutive files that moved alike make one run,
/// so a one-file edit is three runs, and moving every position of the suffix array costs a
/// short search each rather than a read of a table as long as the stream.
#[derive(Default)]
struct Shifts {
    /// Old start of each run, increasing.
    starts: Vec<u32>,
    /// Per run: what to add to an old position (wrapping), or none where it went.
    by: Vec<Option<u32>>,
}

impl Shifts {
    /// The old positions `range` (a kept file's, after every earlier file's) are now at `to..`;
    /// the positions between the previous run and `range` went. A file right after the
    /// previous one (only the boundary between them) that moved alike extends its run.
    fn moved(&mut self, range: Range<u32>, to: u32) {
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

    fn new_position(&self, old: u32) -> Option<u32> {
        let run = self
            .starts
            .partition_point(|&start| start <= old)
            .checked_sub(1)?;
        self.by[run].map(|by| old.wrapping_add(by))
    }
}

/// Marks a prompt token the repository never saw.
const NOT_IN_REPO: u32 = u32::MAX;

/// The suffix array's order: by the tokens before each position read backwards, then by
/// position, so that it is one order however the statistics came about.
fn context_order(stream: &[u32], a: u32, b: u32) -> std::cmp::Ordering {
    backward(stream, a).cmp(backward(stream, b)).then(a.cmp(&b))
}

/// The tokens before `p`, backwards, up to the file start or `MAX_ORDER`.
fn backward(stream: &[u32], p: u32) -> impl Iterator<Item = u32> + '_ {
    stream[..p as usize]
        .iter()
        .rev()
        .take(MAX_ORDER)
        .take_while(|&&t| t != BOUNDARY)
        .copied()
}

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
        if let Some(id) = self.repo.vocab.get(token) {
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
            self.repo.vocab.string(id)
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
            _ => (0, self.repo.first_met[id as usize]),
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
            for &id in &repo.stream[exclude.start as usize..exclude.end as usize] {
                if completes(repo.vocab.string(id)) {
                    *in_current_file.entry(id).or_default() += 1;
                }
            }
            for (id, s) in repo.vocab.strings() {
                let elsewhere = repo.unigram[id as usize]
                    - in_current_file.get(&id).copied().unwrap_or_default();
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
            .and_then(|f| repo.files.get(f))
            .cloned()
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

    /// Everything the statistics hold, to compare two of them exactly.
    fn parts(model: &RepoModel) -> String {
        let mut files: Vec<_> = model
            .files
            .iter()
            .map(|(p, r)| (p, r.start, r.end))
            .collect();
        files.sort();
        format!(
            "{:?}",
            (
                &model.built_from,
                model.vocab.strings().collect::<Vec<_>>(),
                &model.stream,
                &model.by_context,
                files,
                &model.unigram,
                &model.first_met,
            )
        )
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
        let mut updated = RepoModel::build(&before.files);
        updated.update(&after.files);
        assert_eq!(parts(&updated), parts(&RepoModel::build(&after.files)));
        updated.update(&before.files);
        assert_eq!(parts(&updated), parts(&RepoModel::build(&before.files)));
    }

    #[test]
    fn statistics_updated_file_by_file_are_those_built_afresh() {
        let sources = java_sample();
        let (before, after) = (in_memory(&sources), in_memory(&edited(&sources)));
        let mut updated = RepoModel::build(&before.files);
        updated.update(&after.files);
        let fresh = RepoModel::build(&after.files);
        assert_eq!(parts(&updated), parts(&fresh));
        // Completions read the same statistics, so they are the same.
        let model = |repo| EmbeddedModel::with(None, OnceLock::from(repo));
        let (updated, fresh) = (model(updated), model(fresh));
        for file in after.files.iter().step_by(3) {
            let prompt = &file.text[..file.text.len() / 2];
            let request = CompletionRequest {
                prompt: prompt.to_string(),
                suffix: None,
                max_tokens: 24,
                temperature: 0.0,
                seed: None,
                stop: vec!["\n".into()],
                n: 1,
                current_file: Some(file.path.clone()),
                instruction: false,
            };
            assert_eq!(updated.generate(&request, 0), fresh.generate(&request, 0));
        }
        let mut back = RepoModel::build(&after.files);
        back.update(&before.files);
        assert_eq!(parts(&back), parts(&RepoModel::build(&before.files)));
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
