//! RepoCoder's retrieval database (section 2.2) as its published code builds it: windows of
//! [`WINDOW_LINES`] lines every [`WINDOW_STEP`] lines over every file (with a head window of
//! the first [`WINDOW_STEP`] lines), identical windows merged into one that remembers every
//! place it occurs, built once per repository. Both RepoCoder's Jaccard similarity (over sets
//! of Codex token ids) and ProCC's lexical (TF-IDF cosine over terms) similarity search it, and
//! [`WindowIndex::blocks`] lays the hits out as RepoCoder's prompt (Figure 3).

use rayon::prelude::*;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::HoleRequest;
use super::SourcedText;
use super::codex_tokens::CodexTokens;
use super::fidelity::Fidelity;
use super::profile::{BlockBudget, WindowOrder};
use super::retrieval::terms;
use crate::hole::Hole;
use crate::lang::Span;
use crate::repo::packed::{self, Fixed};
use crate::repo::{FileChanges, FileId, FileTable, RepoIndex, SourceFile, listing};
use crate::token::{self, Tokenizer};

/// RepoCoder's window size S_w and sliding size S_s for line completion (section 4,
/// hyper-parameters).
pub const WINDOW_LINES: usize = 20;
pub const WINDOW_STEP: usize = 10;
/// RepoCoder's K: retrieved snippets in a prompt at most.
pub const MAX_BLOCKS: usize = 10;
/// Hits a search returns at most: RepoCoder's code keeps the 20 best windows (`max_top_k`)
/// and builds the prompt from them, skipping blocks that do not fit.
pub const MAX_HITS: usize = 20;
/// Lines an iteration-1 block reaches below its window: RepoCoder's r-g prompt shows each
/// window moved `window_size // slice_size` lines down (`_make_an_extended_block`).
pub const EXTENSION: usize = WINDOW_STEP;
/// RepoCoder's separator line: 50 dashes.
const RULE: &str = "--------------------------------------------------";

/// One place a window occurs: lines `first..end` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub file: FileId,
    pub first: u32,
    pub end: u32,
}

impl Fixed for Window {
    const BYTES: usize = 12;
    fn put(&self, out: &mut Vec<u8>) {
        ((self.file as u32, self.first), self.end).put(out);
    }
    fn take(bytes: &[u8]) -> Self {
        let ((file, first), end) = <((u32, u32), u32)>::take(bytes);
        Window {
            file: file as FileId,
            first,
            end,
        }
    }
}

/// How a query is compared with the windows. A dense encoder (an embedding model) would be a
/// further variant with its own window vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Similarity {
    /// RepoCoder: |Sq ∩ Sc| / |Sq ∪ Sc| over sets of tokens. The paper does not fix the
    /// tokenizer; its code compares sets of Codex (`p50k_base`) token ids, and so does this.
    Jaccard,
    /// ProCC's lexical perspective without an encoder: cosine of TF-IDF vectors over terms
    /// (identifiers, keywords and numbers; sublinear tf `1 + ln tf`, smoothed idf
    /// `ln((N + 1) / (df + 1)) + 1`).
    TfIdfCosine,
}

/// Which lines a block shows of its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// The window itself (RepoCoder's later iterations, ProCC).
    Window,
    /// The window moved [`EXTENSION`] lines down, as RepoCoder's first iteration shows it:
    /// the lines that follow the similar code are what the model can copy.
    Extended,
}

/// A window and its similarity to a query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub window: usize,
    pub score: f64,
}

/// Every window of a repository, indexed by term. Files can come and go
/// ([`WindowIndex::update`]): a window is tokenized once, when its text first appears, and what
/// is global (the number of windows, document frequencies, the norms) follows. Searches answer
/// exactly as an index built afresh from the same files does: ties are broken by the windows'
/// first places, never by their ids, which depend on the order files came.
#[derive(Serialize, Deserialize)]
pub struct WindowIndex {
    /// Per window: every place its text occurs, in file and line order.
    #[serde(with = "packed::nested")]
    places: Vec<Vec<Window>>,
    /// Per window: the key of its text (what identical windows share).
    #[serde(with = "packed")]
    text_keys: Vec<[u8; 16]>,
    /// Every term met, by id; a term no window holds any more has no postings.
    vocabulary: FxHashMap<String, u32>,
    /// Per term id: the windows holding it and how often, in no particular order.
    #[serde(with = "packed::nested")]
    postings: Vec<Vec<(u32, u16)>>,
    /// Per window: its distinct term ids, in the order the window's text first uses them
    /// (flattened; `term_starts` delimits them), and how often it uses each.
    #[serde(with = "packed")]
    window_terms: Vec<u32>,
    #[serde(with = "packed")]
    window_term_counts: Vec<u16>,
    #[serde(with = "packed")]
    term_starts: Vec<u32>,
    /// Per window: the norm of its TF-IDF vector.
    #[serde(with = "packed")]
    norms: Vec<f32>,
    /// Per window: its distinct Codex token ids, sorted (flattened; `token_starts` delimits
    /// them).
    #[serde(with = "packed")]
    token_ids: Vec<u32>,
    #[serde(with = "packed")]
    token_starts: Vec<u32>,
    /// RepoCoder's order of the windows and of their places ([`WindowOrder::RepoCoder`]).
    #[serde(skip)]
    repocoder_order: OnceLock<RepoCoderOrder>,
}

/// The Codex token sets of window texts, by the texts' keys: what a layered cache keeps of the
/// windows its base does not hold, so that opening it again tokenizes none of them.
#[derive(Default, Serialize, Deserialize)]
pub struct TokenSets {
    #[serde(with = "packed")]
    keys: Vec<[u8; 16]>,
    /// The sets one after another (flattened; `ends` delimits them).
    #[serde(with = "packed")]
    ids: Vec<u32>,
    #[serde(with = "packed")]
    ends: Vec<u32>,
    /// Per key: its set, made on first use.
    #[serde(skip)]
    by_key: OnceLock<FxHashMap<[u8; 16], usize>>,
}

impl TokenSets {
    fn push(&mut self, key: [u8; 16], ids: &[u32]) {
        self.keys.push(key);
        self.ids.extend_from_slice(ids);
        self.ends.push(self.ids.len() as u32);
    }

    /// The token set of the text whose key is `key`, if held.
    fn get(&self, key: &[u8; 16]) -> Option<&[u32]> {
        let by_key = self.by_key.get_or_init(|| {
            (self.keys.iter().enumerate())
                .map(|(set, &key)| (key, set))
                .collect()
        });
        // A segment that passed its checksum yet does not hold together (written by hand, or
        // by a bug) has its sets tokenized again rather than read out of bounds.
        let set = *by_key.get(key)?;
        let start = match set.checked_sub(1) {
            Some(before) => *self.ends.get(before)?,
            None => 0,
        };
        self.ids.get(start as usize..*self.ends.get(set)? as usize)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The windows' `items` (one per window) of the windows `kept` says to keep, in order.
fn keep_windows<T>(items: Vec<T>, kept: impl Fn(usize) -> bool) -> Vec<T> {
    let items = items.into_iter().enumerate();
    items
        .filter(|(window, _)| kept(*window))
        .map(|(_, item)| item)
        .collect()
}

/// The lists flattened in `values` and delimited by `starts` (one more than the lists) with
/// those `kept` does not keep taken out in place, the rest moved down (fresh memory for a copy
/// of every window's terms and tokens cost more than the update's own work); returns the
/// kept lists' starts.
fn keep_lists<T: Copy>(
    values: &mut Vec<T>,
    starts: &[u32],
    kept: impl Fn(usize) -> bool,
) -> Vec<u32> {
    let mut kept_starts = vec![0];
    let mut end = 0;
    for list in (0..starts.len() - 1).filter(|&list| kept(list)) {
        let range = starts[list] as usize..starts[list + 1] as usize;
        let len = range.len();
        values.copy_within(range, end);
        end += len;
        kept_starts.push(end as u32);
    }
    values.truncate(end);
    kept_starts
}

/// What identical windows share: the start of their text's hash.
fn text_key(text: &str) -> [u8; 16] {
    let hash = blake3::hash(text.as_bytes());
    hash.as_bytes()[..16]
        .try_into()
        .expect("a hash is 32 bytes")
}

/// Windows as RepoCoder's code lists them.
struct RepoCoderOrder {
    /// Per window: its position in RepoCoder's window list.
    rank: Vec<usize>,
    /// Per window: its places in RepoCoder's order (the first is its `metadata[0]`).
    places: Vec<Vec<Window>>,
}

impl WindowIndex {
    /// Every window of `index`, tokenized on the CPU pool, or by the caller alone where it is
    /// a thread of the pool: other jobs of the pool may wait for this index (built on first
    /// use), and a thread of the pool that split the work could take up one of them while it
    /// waits for a piece; that job would then wait, on top of the same stack, for the build it
    /// buries (#36).
    pub fn new(index: &RepoIndex) -> WindowIndex {
        WindowIndex::new_with_progress(index, &|_, _| ())
    }

    /// [`WindowIndex::new`], telling `progress` as windows are tokenized (see
    /// [`WindowIndex::update`]).
    pub fn new_with_progress(
        index: &RepoIndex,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> WindowIndex {
        let mut built = WindowIndex {
            places: Vec::new(),
            text_keys: Vec::new(),
            vocabulary: FxHashMap::default(),
            postings: Vec::new(),
            window_terms: Vec::new(),
            window_term_counts: Vec::new(),
            term_starts: vec![0],
            norms: Vec::new(),
            token_ids: Vec::new(),
            token_starts: vec![0],
            repocoder_order: OnceLock::new(),
        };
        built.update(
            &FileChanges::between(&FileTable::default(), &index.files),
            index,
            &TokenSets::default(),
            progress,
        );
        built
    }

    /// Brought up to `index`'s files from the files it was built from: the places of kept
    /// files move to their new positions, those of changed and removed files go, and the
    /// windows of changed and added files are cut again; a window whose text is already
    /// known only gains a place, a window left with none goes, and only windows of new text
    /// are tokenized (on the CPU pool, as [`WindowIndex::new`] says), unless `known` holds
    /// their tokens. Returns the tokens of the windows of new text. `progress` hears (windows
    /// tokenized, of all to tokenize) as each is.
    pub fn update(
        &mut self,
        changes: &FileChanges,
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> TokenSets {
        for places in &mut self.places {
            places.retain_mut(|place| match changes.kept[place.file] {
                Some(new) => {
                    place.file = new as FileId;
                    true
                }
                None => false,
            });
        }
        let mut by_text: FxHashMap<[u8; 16], usize> = (self.text_keys.iter().copied())
            .enumerate()
            .map(|(id, key)| (key, id))
            .collect();
        let known_windows = self.places.len();
        let mut new_texts: Vec<String> = Vec::new();
        for &file in &changes.derived_again {
            let (file, source) = (file as FileId, &index.files[file as usize]);
            if source.text.is_empty() {
                continue;
            }
            for (first, end) in window_lines(source.line_count()) {
                let place = Window {
                    file,
                    first: first as u32,
                    end: end as u32,
                };
                let text = lines_text(source, first, end);
                let key = text_key(&text);
                let next = self.places.len();
                let id = *by_text.entry(key).or_insert(next);
                if id == next {
                    self.places.push(Vec::new());
                    self.text_keys.push(key);
                    new_texts.push(text);
                }
                let places = &mut self.places[id];
                let at = places.partition_point(|p| (p.file, p.first) < (file, place.first));
                places.insert(at, place);
            }
        }
        self.drop_windows_without_places(known_windows);
        let first_new = self.len() - new_texts.len();
        let keys = &self.text_keys[first_new..];
        let unknown: Vec<&str> = (new_texts.iter().zip(keys))
            .filter(|(_, key)| known.get(key).is_none())
            .map(|(text, _)| text.as_str())
            .collect();
        let done = AtomicUsize::new(0);
        let counted = |ids: Vec<u32>| {
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, unknown.len());
            ids
        };
        let mut tokenized = if crate::pool::on_pool_thread() {
            let mut tokens = CodexTokens::default();
            (unknown.iter())
                .map(|text| counted(tokens.distinct(text)))
                .collect()
        } else {
            (unknown.par_iter())
                .map_init(CodexTokens::default, |tokens, text| {
                    counted(tokens.distinct(text))
                })
                .collect::<Vec<_>>()
        }
        .into_iter();
        let keys = keys.to_vec();
        for (text, key) in new_texts.iter().zip(&keys) {
            self.add_terms(text);
            match known.get(key) {
                Some(ids) => self.token_ids.extend_from_slice(ids),
                None => self
                    .token_ids
                    .extend(tokenized.next().expect("one set per text")),
            }
            self.token_starts.push(self.token_ids.len() as u32);
        }
        self.norms = self.compute_norms();
        self.repocoder_order = OnceLock::new();
        let mut added = TokenSets::default();
        for window in first_new..self.len() {
            added.push(self.text_keys[window], self.window_token_ids(window));
        }
        added
    }

    /// Drop the windows among the first `known` that have no place left, renumbering the rest
    /// (those from `known` on have places and no terms yet: they keep their order after
    /// the known ones).
    fn drop_windows_without_places(&mut self, known: usize) {
        let mut renumbered: Vec<Option<u32>> = Vec::with_capacity(known);
        let mut next = 0u32;
        for places in &self.places[..known] {
            renumbered.push((!places.is_empty()).then(|| {
                next += 1;
                next - 1
            }));
        }
        if renumbered.iter().all(Option::is_some) {
            return;
        }
        for postings in &mut self.postings {
            postings.retain_mut(|(window, _)| match renumbered[*window as usize] {
                Some(new) => {
                    *window = new;
                    true
                }
                None => false,
            });
        }
        let has_place = |window: usize| renumbered[window].is_some();
        let term_starts = keep_lists(&mut self.window_terms, &self.term_starts, has_place);
        keep_lists(&mut self.window_term_counts, &self.term_starts, has_place);
        self.term_starts = term_starts;
        self.token_starts = keep_lists(&mut self.token_ids, &self.token_starts, has_place);
        let kept = |window: usize| window >= known || renumbered[window].is_some();
        self.places = keep_windows(std::mem::take(&mut self.places), kept);
        self.text_keys = keep_windows(std::mem::take(&mut self.text_keys), kept);
    }

    fn add_terms(&mut self, text: &str) {
        let id = (self.term_starts.len() - 1) as u32;
        let mut tf: FxHashMap<u32, u16> = FxHashMap::default();
        let mut in_order: Vec<u32> = Vec::new();
        for term in terms(text) {
            let term = match self.vocabulary.get(term) {
                Some(&term) => term,
                None => {
                    let next = self.vocabulary.len() as u32;
                    self.vocabulary.insert(term.to_string(), next);
                    self.postings.push(Vec::new());
                    next
                }
            };
            let n = tf.entry(term).or_insert_with(|| {
                in_order.push(term);
                0
            });
            *n = n.saturating_add(1);
        }
        for &term in &in_order {
            self.postings[term as usize].push((id, tf[&term]));
            self.window_term_counts.push(tf[&term]);
        }
        self.window_terms.extend(in_order);
        self.term_starts.push(self.window_terms.len() as u32);
    }

    fn idf(&self, term: u32) -> f32 {
        let n = self.len() as f32;
        let df = self.postings[term as usize].len() as f32;
        ((n + 1.0) / (df + 1.0)).ln() + 1.0
    }

    /// Every window's norm, each summed over its terms in the order its text uses them (so it
    /// is the same however the index came about).
    fn compute_norms(&self) -> Vec<f32> {
        let idf: Vec<f32> = (0..self.postings.len() as u32)
            .map(|t| self.idf(t))
            .collect();
        (0..self.len())
            .map(|window| {
                let range =
                    self.term_starts[window] as usize..self.term_starts[window + 1] as usize;
                let terms = self.window_terms[range.clone()].iter();
                let squares = terms
                    .zip(&self.window_term_counts[range])
                    .map(|(&term, &tf)| {
                        let weight = tf_weight(tf) * idf[term as usize];
                        weight * weight
                    });
                squares.fold(0.0f32, |sum, square| sum + square).sqrt()
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The first place window `id` occurs.
    pub fn window(&self, id: usize) -> Window {
        self.places[id][0]
    }

    /// Where window `id` first occurs, as (file, line): windows are in this order in a fresh
    /// index, and ties are broken in it.
    fn first_place(&self, id: usize) -> (FileId, u32) {
        let place = self.places[id][0];
        (place.file, place.first)
    }

    /// Every place window `id` occurs, in file and line order.
    pub fn places(&self, id: usize) -> &[Window] {
        &self.places[id]
    }

    /// The [`MAX_HITS`] windows most similar to `query`, best first (ties in window order),
    /// leaving out those of the hole's own file and of other languages (see [`excluded`]).
    pub fn search(
        &self,
        index: &RepoIndex,
        hole: &Hole,
        query: &str,
        similarity: Similarity,
    ) -> Vec<Hit> {
        self.search_ordered(index, hole, query, similarity, |a, b| {
            self.first_place(a.window).cmp(&self.first_place(b.window))
        })
    }

    /// [`WindowIndex::search`] with ties broken as `fidelity`'s profile says: in window order, or
    /// as RepoCoder's code breaks them (a stable ascending sort whose last
    /// [`MAX_HITS`] it keeps: of tied windows, the later in its window list first).
    pub fn search_as(
        &self,
        index: &RepoIndex,
        hole: &Hole,
        query: &str,
        similarity: Similarity,
        fidelity: Fidelity,
    ) -> Vec<Hit> {
        match fidelity.rules().windows().order {
            WindowOrder::Path => self.search(index, hole, query, similarity),
            WindowOrder::RepoCoder => {
                let order = self.repocoder_order(index);
                self.search_ordered(index, hole, query, similarity, |a, b| {
                    order.rank[b.window].cmp(&order.rank[a.window])
                })
            }
        }
    }

    fn search_ordered(
        &self,
        index: &RepoIndex,
        hole: &Hole,
        query: &str,
        similarity: Similarity,
        tie: impl Fn(&Hit, &Hit) -> std::cmp::Ordering,
    ) -> Vec<Hit> {
        let mut hits = match similarity {
            Similarity::Jaccard => self.jaccard(&token_set(query)),
            Similarity::TfIdfCosine => self.cosine(&self.query_terms(query)),
        };
        hits.retain(|h| !excluded(index, hole, &self.places[h.window]));
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then_with(|| tie(a, b));
        if hits.len() > MAX_HITS {
            hits.select_nth_unstable_by(MAX_HITS, order);
            hits.truncate(MAX_HITS);
        }
        hits.sort_by(order);
        hits
    }

    /// RepoCoder's window list order (files as `glob` lists them, which is `os.walk` order for
    /// files that are not hidden; then windows down each file), built on first use by the
    /// thread that asks, alone (holes' jobs on the CPU pool wait for it: see
    /// [`WindowIndex::new`]).
    fn repocoder_order(&self, index: &RepoIndex) -> &RepoCoderOrder {
        self.repocoder_order.get_or_init(|| {
            let walk = listing::walk_order(&index.root);
            let key = |p: &Window| {
                let file = walk
                    .get(&index.files[p.file].path)
                    .copied()
                    .unwrap_or(usize::MAX);
                (file, p.end)
            };
            let places: Vec<Vec<Window>> = self
                .places
                .iter()
                .map(|places| {
                    let mut places = places.clone();
                    places.sort_by_key(key);
                    places
                })
                .collect();
            let mut windows: Vec<usize> = (0..places.len()).collect();
            windows.sort_by_key(|&w| (key(&places[w][0]), self.first_place(w)));
            let mut rank = vec![0; places.len()];
            for (position, w) in windows.into_iter().enumerate() {
                rank[w] = position;
            }
            RepoCoderOrder { rank, places }
        })
    }

    /// The query's distinct terms: those some window holds by id with their count, in the
    /// order the query first uses them (so that sums over them do not depend on term ids), and
    /// how many distinct terms no window holds.
    fn query_terms(&self, query: &str) -> QueryTerms {
        let mut known: Vec<(u32, u16)> = Vec::new();
        let mut position: FxHashMap<u32, usize> = FxHashMap::default();
        let mut unknown: Vec<&str> = Vec::new();
        for term in terms(query) {
            let held = self.vocabulary.get(term).copied();
            match held.filter(|&id| !self.postings[id as usize].is_empty()) {
                Some(id) => {
                    let at = *position.entry(id).or_insert_with(|| {
                        known.push((id, 0));
                        known.len() - 1
                    });
                    known[at].1 = known[at].1.saturating_add(1);
                }
                None if !unknown.contains(&term) => unknown.push(term),
                None => {}
            }
        }
        QueryTerms {
            known,
            unknown: unknown.len(),
        }
    }

    /// Jaccard similarity of the token set `query` with every window (RepoCoder scores every
    /// window, sharing a token or not).
    fn jaccard(&self, query: &[u32]) -> Vec<Hit> {
        let mut in_query = vec![false; query.last().map_or(0, |&t| t as usize + 1)];
        for &t in query {
            in_query[t as usize] = true;
        }
        (0..self.len())
            .map(|window| {
                let ids = self.window_token_ids(window);
                let shared = ids
                    .iter()
                    .filter(|&&t| in_query.get(t as usize).copied().unwrap_or(false))
                    .count();
                let union = query.len() + ids.len() - shared;
                let score = if union == 0 {
                    0.0
                } else {
                    shared as f64 / union as f64
                };
                Hit { window, score }
            })
            .collect()
    }

    fn cosine(&self, query: &QueryTerms) -> Vec<Hit> {
        let mut dot = vec![0.0f32; self.len()];
        let mut query_norm = 0.0f32;
        for &(term, tf) in &query.known {
            let idf = self.idf(term);
            let q = tf_weight(tf) * idf;
            query_norm += q * q;
            for &(w, wtf) in &self.postings[term as usize] {
                dot[w as usize] += q * tf_weight(wtf) * idf;
            }
        }
        // Terms the repository never saw weigh as if they had df 0.
        let unseen = (self.len() as f32 + 1.0).ln() + 1.0;
        query_norm += query.unknown as f32 * unseen * unseen;
        let query_norm = query_norm.sqrt();
        dot.into_iter()
            .enumerate()
            .filter(|&(_, d)| d > 0.0)
            .map(|(window, d)| Hit {
                window,
                score: f64::from(d / (query_norm * self.norms[window])),
            })
            .collect()
    }

    fn window_term_ids(&self, window: usize) -> &[u32] {
        &self.window_terms[self.term_starts[window] as usize..self.term_starts[window + 1] as usize]
    }

    fn window_token_ids(&self, window: usize) -> &[u32] {
        &self.token_ids[self.token_starts[window] as usize..self.token_starts[window + 1] as usize]
    }

    /// Jaccard similarity of `text`'s terms and window `window`'s (a ProCC bandit feature).
    pub fn jaccard_with(&self, window: usize, text: &str) -> f64 {
        let query = self.query_terms(text);
        let ids = self.window_term_ids(window);
        let shared = query.known.iter().filter(|(t, _)| ids.contains(t)).count();
        let union = query.known.len() + query.unknown + ids.len() - shared;
        if union == 0 {
            0.0
        } else {
            shared as f64 / union as f64
        }
    }

    /// RepoCoder's prompt (Figure 3) from `hits`, best first: whole blocks taken best-first
    /// while they fit (a block that does not fit is skipped, as in RepoCoder), at most
    /// [`MAX_BLOCKS`], laid out in ascending similarity so that the best block sits next to the
    /// code. The paper profile fits the request's allocation and leaves out blocks showing the
    /// code of one already taken; the code profile follows RepoCoder's code (see
    /// [`Fidelity`]). Returns the text and the windows used, best first.
    pub fn blocks(
        &self,
        req: &HoleRequest,
        hits: &[Hit],
        shown: Shown,
        fidelity: Fidelity,
    ) -> (SourcedText, Vec<usize>) {
        let rules = fidelity.rules().windows();
        let language = req.index.files[req.hole.file].language;
        let comment = match rules.comment {
            Some(comment) => comment.to_string(),
            None => format!("{} ", language.line_comment()),
        };
        let header = format!(
            "{comment}Here are some relevant code fragments from other files of the repo:\n{comment}{RULE}\n"
        );
        let (tokenizer, mut used): (&dyn Tokenizer, usize) = match rules.budget {
            BlockBudget::Allocation => (req.tokenizer, req.tokenizer.count(&header)),
            BlockBudget::Fixed { header_tokens, .. } => (token::p50k(), header_tokens),
        };
        let fits = |used: usize, tokens: usize| match rules.budget {
            BlockBudget::Allocation => used + tokens <= req.allocation,
            BlockBudget::Fixed { tokens: budget, .. } => used + tokens < budget,
        };
        let mut chosen: Vec<(usize, SourcedText)> = Vec::new();
        let mut shown_code: Vec<String> = Vec::new();
        for hit in hits {
            if chosen.len() == MAX_BLOCKS {
                break;
            }
            let place = self.shown_place(req.index, req.hole, hit.window, shown, fidelity);
            let code = lines_text(
                &req.index.files[place.file],
                place.first as usize,
                place.end as usize,
            );
            if rules.skips_repeated_code && shown_code.contains(&code) {
                continue;
            }
            let places = self.places_as(req.index, hit.window, fidelity);
            let block = block(req.index, places, place, &comment);
            let tokens = tokenizer.count(&block.text);
            if fits(used, tokens) {
                used += tokens;
                chosen.push((hit.window, block));
                shown_code.push(code);
            }
        }
        let join = |chosen: &[(usize, SourcedText)]| {
            let mut text = SourcedText::default();
            text.push_plain(&header);
            for (_, block) in chosen.iter().rev() {
                text.append(block.clone());
            }
            text
        };
        if rules.budget != BlockBudget::Allocation {
            let text = if chosen.is_empty() {
                SourcedText::default()
            } else {
                join(&chosen)
            };
            return (text, chosen.into_iter().map(|(w, _)| w).collect());
        }
        // Tokens may merge across block boundaries under BPE: drop the worst block until the
        // whole fits.
        while !chosen.is_empty() {
            let text = join(&chosen);
            if req.tokenizer.count(&text.text) <= req.allocation {
                return (text, chosen.into_iter().map(|(w, _)| w).collect());
            }
            chosen.pop();
        }
        (SourcedText::default(), Vec::new())
    }

    /// The lines a block of `window` shows, extended as `shown` says: those of its first place
    /// outside the hole's file (a window is only retrieved when it has one); under
    /// the code profile those of its first place, as RepoCoder's code shows `metadata[0]`.
    pub fn shown_place(
        &self,
        index: &RepoIndex,
        hole: &Hole,
        window: usize,
        shown: Shown,
        fidelity: Fidelity,
    ) -> Window {
        let rules = fidelity.rules().windows();
        let places = self.places_as(index, window, fidelity);
        let outside = places.iter().find(|p| p.file != hole.file);
        let place = match outside {
            Some(&place) if !rules.shows_first_place => place,
            _ => places[0],
        };
        let file = &index.files[place.file];
        match shown {
            Shown::Window if rules.splits_windows_again => split_again(place, file),
            Shown::Window => place,
            Shown::Extended => extended(place, file.line_count()),
        }
    }

    /// Window `window`'s places in file and line order, or under the code profile in
    /// RepoCoder's order.
    fn places_as(&self, index: &RepoIndex, window: usize, fidelity: Fidelity) -> &[Window] {
        match fidelity.rules().windows().order {
            WindowOrder::Path => &self.places[window],
            WindowOrder::RepoCoder => &self.repocoder_order(index).places[window],
        }
    }
}

/// One block: every place the window occurs, then the lines of `place` commented out, between
/// rules.
fn block(index: &RepoIndex, places: &[Window], place: Window, comment: &str) -> SourcedText {
    let mut text = SourcedText::default();
    text.push_plain(&format!(
        "{comment}the below code fragment can be found in:\n"
    ));
    for other in places {
        text.push_plain(&format!("{comment}{}\n", index.files[other.file].path));
    }
    text.push_plain(&format!("{comment}{RULE}\n"));
    let file = &index.files[place.file];
    for line in place.first as usize..place.end as usize {
        text.push_plain(comment);
        let start = file.line_start(line);
        let span = Span::new(start, start + file.line_text(line).len());
        text.push_span(index, place.file, span);
        text.push_plain("\n");
    }
    text.push_plain(&format!("{comment}{RULE}\n"));
    text
}

/// A query's terms as [`WindowIndex::search`] needs them.
struct QueryTerms {
    known: Vec<(u32, u16)>,
    unknown: usize,
}

fn tf_weight(tf: u16) -> f32 {
    1.0 + f32::from(tf).ln()
}

/// The distinct Codex token ids of `text`, sorted: what RepoCoder's Jaccard compares.
pub fn token_set(text: &str) -> Vec<u32> {
    CodexTokens::default().distinct(text)
}

/// The windows of a file of `lines` lines, as RepoCoder's code makes them: one centred on every
/// [`WINDOW_STEP`]-th line (half the window above it, half from it on), cut at the file's
/// ends. The first is the head window: the first half window of lines.
pub fn window_lines(lines: usize) -> impl Iterator<Item = (usize, usize)> {
    let half = WINDOW_LINES / 2;
    (0..lines).step_by(WINDOW_STEP).map(move |centre| {
        (
            centre.saturating_sub(half),
            (centre + WINDOW_LINES - half).min(lines),
        )
    })
}

/// Lines `first..end` of a file joined by line breaks, without their own line breaks (how
/// RepoCoder's code reads a window: CRLF as LF, no final line break).
pub fn lines_text(file: &SourceFile, first: usize, end: usize) -> String {
    (first..end)
        .map(|line| file.line_text(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines an iteration-1 block shows for `place` in a file of `lines` lines: the window's
/// length ending [`EXTENSION`] lines below it (or at the end of the file).
pub fn extended(place: Window, lines: usize) -> Window {
    let end = (place.end as usize + EXTENSION).min(lines);
    Window {
        first: end.saturating_sub(WINDOW_LINES) as u32,
        end: end as u32,
        ..place
    }
}

/// The lines RepoCoder's plain blocks (later iterations) show for `place`: its code keeps a
/// window as its lines joined by line breaks and splits that again to show it
/// (`'\n'.join`, then `splitlines()`), which loses a last line that is empty.
pub fn split_again(place: Window, file: &SourceFile) -> Window {
    let last_empty = place.end > place.first && file.line_text(place.end as usize - 1).is_empty();
    Window {
        end: place.end - u32::from(last_empty),
        ..place
    }
}

/// The first line of RepoCoder's query: the [`WINDOW_LINES`] whole lines before the hole's
/// line make it.
pub fn query_first_line(hole: &Hole) -> usize {
    hole.line.saturating_sub(WINDOW_LINES)
}

/// Whether a window with these places is left out of a search for `hole`: when it occurs only
/// in the hole's file. RepoCoder's code keeps a window of the hole's file only if it ends
/// before `context_start_lineno`, the first line of the prompt; its prompts are whole file
/// prefixes (`context_start_lineno` 0), so no window of the hole's file is ever retrieved
/// (`_is_context_after_hole` keeps a window with a place elsewhere). A copy of the hole's file
/// under another path stays, as there. Windows only in files of another language are left out
/// too: RepoCoder's code globs the files of one language.
pub fn excluded(index: &RepoIndex, hole: &Hole, places: &[Window]) -> bool {
    let current = &index.files[hole.file];
    let elsewhere = |p: &&Window| p.file != hole.file;
    !places
        .iter()
        .filter(elsewhere)
        .any(|p| index.files[p.file].same_language(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_centred_every_step_with_a_head_window() {
        assert_eq!(window_lines(0).count(), 0);
        assert_eq!(window_lines(5).collect::<Vec<_>>(), [(0, 5)]);
        assert_eq!(window_lines(20).collect::<Vec<_>>(), [(0, 10), (0, 20)]);
        assert_eq!(
            window_lines(21).collect::<Vec<_>>(),
            [(0, 10), (0, 20), (10, 21)]
        );
        assert_eq!(
            window_lines(45).collect::<Vec<_>>(),
            [(0, 10), (0, 20), (10, 30), (20, 40), (30, 45)]
        );
    }

    #[test]
    fn an_extended_block_ends_ten_lines_below_its_window() {
        let place = |first, end| Window {
            file: 0,
            first,
            end,
        };
        assert_eq!(extended(place(10, 30), 100), place(20, 40));
        assert_eq!(extended(place(0, 10), 100), place(0, 20), "the head window");
        assert_eq!(extended(place(30, 45), 45), place(25, 45), "cut at the end");
        assert_eq!(extended(place(0, 5), 5), place(0, 5));
    }
}
