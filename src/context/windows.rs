//! RepoCoder's retrieval database (section 2.2) as its published code builds it: windows of
//! [`WINDOW_LINES`] lines every [`WINDOW_STEP`] lines over every file (with a head window of
//! the first [`WINDOW_STEP`] lines), identical windows merged into one that remembers every
//! place it occurs, built once per repository. Both RepoCoder's Jaccard similarity (over sets
//! of Codex token ids) and ProCC's lexical (TF-IDF cosine over terms) similarity search it, and
//! [`WindowIndex::blocks`] lays the hits out as RepoCoder's prompt (Figure 3).

use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};

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
use crate::repo::mapped::{Sections, Vocabulary, Words, list, push_list, word_bytes};
use crate::repo::{FileChanges, FileId, RepoIndex, SourceFile, listing};
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

/// Every window of a repository, indexed by term. Its base is built from some files or read in
/// place from a cache file ([`WindowIndex::load`]); the files changed, added or removed since
/// are laid over it ([`WindowIndex::changed`]): a window of the base keeps the places of kept
/// files (renumbered) and gains those in changed and added files, a window left with none is
/// passed over, a window of new text is tokenized once (unless a segment of the cache holds its
/// tokens), and what is global (the number of windows, document frequencies, the norms)
/// follows. Searches answer exactly as an index built afresh from the same files does: ties are
/// broken by the windows' first places, never by their ids, which depend on the order files
/// came.
pub struct WindowIndex {
    base: WindowBase,
    changes: Option<WindowChanges>,
    /// RepoCoder's order of the windows and of their places ([`WindowOrder::RepoCoder`]).
    repocoder_order: OnceLock<RepoCoderOrder>,
}

/// Windows' own lists, as arrays a cache file holds in place.
#[derive(Default)]
struct WindowLists {
    /// Per window: every place its text occurs, in file and line order, as three words (file,
    /// first line, end line); `place_starts` delimits them (in words).
    place_starts: Words,
    places: Words,
    /// Per window: the key of its text (what identical windows share), as four words.
    text_keys: Words,
    /// Per window: its distinct term ids, in the order its text first uses them, and how often
    /// it uses each (`term_starts` delimits them).
    term_starts: Words,
    terms: Words,
    term_counts: Words,
    /// Per window: its distinct Codex token ids, sorted (`token_starts` delimits them).
    token_starts: Words,
    tokens: Words,
}

/// [`WindowLists`] built one window at a time.
struct ListsBuilder {
    place_starts: Vec<u32>,
    places: Vec<u32>,
    text_keys: Vec<u32>,
    term_starts: Vec<u32>,
    terms: Vec<u32>,
    term_counts: Vec<u32>,
    token_starts: Vec<u32>,
    tokens: Vec<u32>,
}

impl ListsBuilder {
    fn new() -> ListsBuilder {
        ListsBuilder {
            place_starts: vec![0],
            places: Vec::new(),
            text_keys: Vec::new(),
            term_starts: vec![0],
            terms: Vec::new(),
            term_counts: Vec::new(),
            token_starts: vec![0],
            tokens: Vec::new(),
        }
    }

    fn push(&mut self, key: &[u8; 16], places: &[Window], terms: &[(u32, u16)], tokens: &[u32]) {
        let words = places.iter().flat_map(|p| [p.file as u32, p.first, p.end]);
        push_list(&mut self.place_starts, &mut self.places, words);
        self.text_keys.extend(key_words(key));
        self.term_counts
            .extend(terms.iter().map(|&(_, n)| u32::from(n)));
        push_list(
            &mut self.term_starts,
            &mut self.terms,
            terms.iter().map(|&(t, _)| t),
        );
        push_list(
            &mut self.token_starts,
            &mut self.tokens,
            tokens.iter().copied(),
        );
    }

    fn done(self) -> WindowLists {
        WindowLists {
            place_starts: self.place_starts.into(),
            places: self.places.into(),
            text_keys: self.text_keys.into(),
            term_starts: self.term_starts.into(),
            terms: self.terms.into(),
            term_counts: self.term_counts.into(),
            token_starts: self.token_starts.into(),
            tokens: self.tokens.into(),
        }
    }
}

/// A text key as the four words a cache file holds.
fn key_words(key: &[u8; 16]) -> impl Iterator<Item = u32> + '_ {
    key.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
}

impl WindowLists {
    fn len(&self) -> usize {
        self.text_keys.len() / 4
    }

    fn key(&self, window: usize) -> [u8; 16] {
        let mut key = [0; 16];
        for (bytes, word) in key.chunks_exact_mut(4).zip(&self.text_keys[4 * window..]) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        key
    }

    fn places(&self, window: usize) -> impl Iterator<Item = Window> + '_ {
        (list(&self.places, &self.place_starts, window).chunks_exact(3)).map(|p| Window {
            file: p[0] as FileId,
            first: p[1],
            end: p[2],
        })
    }

    /// Window `window`'s distinct terms in the order its text first uses them, and how often
    /// it uses each.
    fn terms(&self, window: usize) -> (&[u32], &[u32]) {
        let terms = list(&self.terms, &self.term_starts, window);
        let counts = list(&self.term_counts, &self.term_starts, window);
        (terms, counts)
    }

    fn tokens(&self, window: usize) -> &[u32] {
        list(&self.tokens, &self.token_starts, window)
    }

    fn sections(&self) -> [Cow<'_, [u8]>; 8] {
        [
            word_bytes(&self.place_starts),
            word_bytes(&self.places),
            word_bytes(&self.text_keys),
            word_bytes(&self.term_starts),
            word_bytes(&self.terms),
            word_bytes(&self.term_counts),
            word_bytes(&self.token_starts),
            word_bytes(&self.tokens),
        ]
    }

    /// The lists in sections `first..first + 8`; none when they do not fit together.
    fn load(sections: &Sections, first: usize) -> Option<WindowLists> {
        let words = |at: usize| sections.words(first + at);
        let lists = WindowLists {
            place_starts: words(0)?,
            places: words(1)?,
            text_keys: words(2)?,
            term_starts: words(3)?,
            terms: words(4)?,
            term_counts: words(5)?,
            token_starts: words(6)?,
            tokens: words(7)?,
        };
        let delimits = |starts: &[u32], values: &[u32]| {
            starts.len() == lists.len() + 1 && starts.last() == Some(&(values.len() as u32))
        };
        let fits = lists.text_keys.len().is_multiple_of(4)
            && delimits(&lists.place_starts, &lists.places)
            && delimits(&lists.term_starts, &lists.terms)
            && lists.term_counts.len() == lists.terms.len()
            && delimits(&lists.token_starts, &lists.tokens);
        fits.then_some(lists)
    }
}

/// The windows of the files an index was built from, as arrays a cache file holds in place.
struct WindowBase {
    lists: WindowLists,
    /// The windows in the order of their text keys: where a text's window is found.
    by_key: Words,
    /// Every term, by id (id 0, the empty string, is no term).
    terms: Vocabulary,
    /// Per term id: the windows holding it and how often (`posting_starts` delimits them).
    posting_starts: Words,
    posting_windows: Words,
    posting_counts: Words,
    /// Per window: the norm of its TF-IDF vector (an `f32`'s bits).
    norms: Words,
    /// Per file the base was built from: the windows with a place in it.
    file_starts: Words,
    file_windows: Words,
}

/// The sections of a [`WindowIndex`]'s base in a cache file.
pub const WINDOW_SECTIONS: usize = 17;

impl WindowBase {
    /// The base window whose text has key `key`, if any.
    fn find(&self, key: &[u8; 16]) -> Option<usize> {
        let at = self
            .by_key
            .partition_point(|&w| self.lists.key(w as usize) < *key);
        let window = *self.by_key.get(at)? as usize;
        (self.lists.key(window) == *key).then_some(window)
    }

    fn df(&self, term: u32) -> usize {
        list(&self.posting_windows, &self.posting_starts, term as usize).len()
    }

    fn postings(&self, term: u32) -> impl Iterator<Item = (u32, u16)> + '_ {
        let windows = list(&self.posting_windows, &self.posting_starts, term as usize);
        let counts = list(&self.posting_counts, &self.posting_starts, term as usize);
        (windows.iter().copied()).zip(counts.iter().map(|&n| n as u16))
    }
}

/// What changed since the base was built.
struct WindowChanges {
    /// Per file of the base: its position today, none when it changed or went.
    kept: Vec<Option<u32>>,
    /// Per window of the base: whether it has no place left.
    gone: Vec<bool>,
    /// Windows of the base that occur in changed or added files: their places there, in order.
    more_places: FxHashMap<u32, Vec<Window>>,
    /// Windows of text the base does not hold, numbered from the base's last on.
    new: WindowLists,
    /// Terms the base does not hold, numbered from the base's last on.
    new_terms: FxHashMap<String, u32>,
    /// Per term: the new windows holding it and how often.
    postings: FxHashMap<u32, Vec<(u32, u16)>>,
    /// Per term of the base: how many of the windows holding it have gone.
    gone_df: FxHashMap<u32, u32>,
    /// Per window: the norm of its TF-IDF vector today.
    norms: Vec<f32>,
    /// Windows that have a place today.
    live: usize,
}

/// The Codex token sets of window texts, by the texts' keys: what the segment of a cache keeps
/// of the windows its base does not hold, so that opening it again tokenizes none of them.
#[derive(Default)]
pub struct TokenSets {
    /// Per set: the key of its text, as four words.
    keys: Words,
    /// The sets one after another (`starts` delimits them).
    ids: Words,
    starts: Words,
    /// Per key: its set, made on first use.
    by_key: OnceLock<FxHashMap<[u8; 16], usize>>,
}

impl TokenSets {
    fn of<'a>(sets: impl Iterator<Item = ([u8; 16], &'a [u32])>) -> TokenSets {
        let (mut keys, mut ids, mut starts) = (Vec::new(), Vec::new(), vec![0]);
        for (key, set) in sets {
            keys.extend(key_words(&key));
            push_list(&mut starts, &mut ids, set.iter().copied());
        }
        TokenSets {
            keys: keys.into(),
            ids: ids.into(),
            starts: starts.into(),
            by_key: OnceLock::new(),
        }
    }

    /// The token set of the text whose key is `key`, if held.
    fn get(&self, key: &[u8; 16]) -> Option<&[u32]> {
        let by_key = self.by_key.get_or_init(|| {
            let keys = self.keys.chunks_exact(4).enumerate();
            keys.map(|(set, words)| {
                let mut key = [0; 16];
                for (bytes, word) in key.chunks_exact_mut(4).zip(words) {
                    bytes.copy_from_slice(&word.to_le_bytes());
                }
                (key, set)
            })
            .collect()
        });
        Some(list(&self.ids, &self.starts, *by_key.get(key)?))
    }

    fn len(&self) -> usize {
        self.keys.len() / 4
    }

    /// The sets as the sections of a cache file.
    pub fn sections(&self) -> [Cow<'_, [u8]>; 3] {
        [
            word_bytes(&self.keys),
            word_bytes(&self.ids),
            word_bytes(&self.starts),
        ]
    }

    /// The sets a cache file's sections hold, read where they lie; none when they do not fit
    /// together.
    pub fn load(sections: &Sections) -> Option<TokenSets> {
        if sections.len() != 3 {
            return None;
        }
        let sets = TokenSets {
            keys: sections.words(0)?,
            ids: sections.words(1)?,
            starts: sections.words(2)?,
            by_key: OnceLock::new(),
        };
        let fits = sets.keys.len().is_multiple_of(4)
            && sets.starts.len() == sets.len() + 1
            && sets.starts.last() == Some(&(sets.ids.len() as u32));
        fits.then_some(sets)
    }
}

/// What identical windows share: the start of their text's hash.
fn text_key(text: &str) -> [u8; 16] {
    let hash = blake3::hash(text.as_bytes());
    hash.as_bytes()[..16]
        .try_into()
        .expect("a hash is 32 bytes")
}

/// Every window of `source` (file `file`): its place and its text.
fn cut(file: FileId, source: &SourceFile) -> impl Iterator<Item = (Window, String)> + '_ {
    let lines = if source.text.is_empty() {
        0
    } else {
        source.line_count()
    };
    window_lines(lines).map(move |(first, end)| {
        let place = Window {
            file,
            first: first as u32,
            end: end as u32,
        };
        (place, lines_text(source, first, end))
    })
}

/// The distinct terms of `text` in the order it first uses them, and how often it uses each.
fn term_counts(text: &str) -> Vec<(&str, u16)> {
    let mut at: FxHashMap<&str, usize> = FxHashMap::default();
    let mut counts: Vec<(&str, u16)> = Vec::new();
    for term in terms(text) {
        let i = *at.entry(term).or_insert_with(|| {
            counts.push((term, 0));
            counts.len() - 1
        });
        counts[i].1 = counts[i].1.saturating_add(1);
    }
    counts
}

/// The Codex token sets of `texts`, on the CPU pool, or by the caller alone where it is a
/// thread of the pool: other jobs of the pool may wait for this index (built on first use),
/// and a thread of the pool that split the work could take up one of them while it waits for a
/// piece; that job would then wait, on top of the same stack, for the build it buries (#36).
/// `progress` hears (texts tokenized, of all) as each is.
fn tokenize(texts: &[&str], progress: &(dyn Fn(usize, usize) + Sync)) -> Vec<Vec<u32>> {
    let done = AtomicUsize::new(0);
    let counted = |ids: Vec<u32>| {
        progress(done.fetch_add(1, Ordering::Relaxed) + 1, texts.len());
        ids
    };
    if crate::pool::on_pool_thread() {
        let mut tokens = CodexTokens::default();
        (texts.iter())
            .map(|text| counted(tokens.distinct(text)))
            .collect()
    } else {
        (texts.par_iter())
            .map_init(CodexTokens::default, |tokens, text| {
                counted(tokens.distinct(text))
            })
            .collect()
    }
}

/// The token sets of `texts` (by key): those `known` holds, the others tokenized (`progress`
/// hears of those).
fn token_sets(
    texts: &[(String, [u8; 16])],
    known: &TokenSets,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Vec<u32>> {
    let unknown: Vec<&str> = (texts.iter())
        .filter(|(_, key)| known.get(key).is_none())
        .map(|(text, _)| text.as_str())
        .collect();
    let mut tokenized = tokenize(&unknown, progress).into_iter();
    (texts.iter())
        .map(|(_, key)| match known.get(key) {
            Some(ids) => ids.to_vec(),
            None => tokenized.next().expect("one set per text"),
        })
        .collect()
}

/// ProCC's smoothed idf of a term `df` of `windows` windows hold.
fn idf_of(windows: usize, df: usize) -> f32 {
    ((windows as f32 + 1.0) / (df as f32 + 1.0)).ln() + 1.0
}

/// The norm of a window's TF-IDF vector, summed over its terms in the order its text uses them
/// (so it is the same however the index came about).
fn norm(terms: &[u32], counts: &[u32], idf: impl Fn(u32) -> f32) -> f32 {
    let squares = terms.iter().zip(counts).map(|(&term, &tf)| {
        let weight = tf_weight(tf as u16) * idf(term);
        weight * weight
    });
    squares.fold(0.0f32, |sum, square| sum + square).sqrt()
}

impl WindowChanges {
    /// How many windows hold term `term` today.
    fn df(&self, base: &WindowBase, term: u32) -> usize {
        let gone = self.gone_df.get(&term).copied().unwrap_or(0) as usize;
        let added = self.postings.get(&term).map_or(0, Vec::len);
        base.df(term).saturating_sub(gone) + added
    }

    /// Every window's norm today: a window of the base keeps its norm while the number of
    /// windows and its terms' document frequencies are as they were; the others are summed
    /// again.
    fn norms_today(&self, base: &WindowBase) -> Vec<f32> {
        let count = base.lists.len();
        let mut dfs: Vec<usize> = (0..base.terms.len() + self.new_terms.len())
            .map(|term| base.df(term as u32))
            .collect();
        for &term in self.gone_df.keys().chain(self.postings.keys()) {
            dfs[term as usize] = self.df(base, term);
        }
        let idf: Vec<f32> = dfs.iter().map(|&df| idf_of(self.live, df)).collect();
        let norm_of = |lists: &WindowLists, w| {
            let (terms, counts) = lists.terms(w);
            norm(terms, counts, |term| {
                idf.get(term as usize).copied().unwrap_or(0.0)
            })
        };
        let mut norms: Vec<f32> = base.norms.iter().map(|&n| f32::from_bits(n)).collect();
        let mut again = vec![self.live != count; count];
        if self.live == count {
            let terms = self.gone_df.keys().chain(self.postings.keys());
            let changed = terms.filter(|&&t| dfs[t as usize] != base.df(t));
            for &term in changed {
                for (w, _) in base.postings(term) {
                    if let Some(again) = again.get_mut(w as usize) {
                        *again = true;
                    }
                }
            }
        }
        for w in (0..count).filter(|&w| again[w] && !self.gone[w]) {
            norms[w] = norm_of(&base.lists, w);
        }
        norms.extend((0..self.new.len()).map(|w| norm_of(&self.new, w)));
        norms
    }
}

/// Windows as RepoCoder's code lists them.
struct RepoCoderOrder {
    /// Per window: its position in RepoCoder's window list.
    rank: Vec<usize>,
    /// Per window: its places in RepoCoder's order (the first is its `metadata[0]`).
    places: Vec<Vec<Window>>,
}

impl WindowIndex {
    /// Every window of `index`, tokenized on the CPU pool (see [`tokenize`]).
    pub fn new(index: &RepoIndex) -> WindowIndex {
        WindowIndex::build(index, &TokenSets::default(), &|_, _| ())
    }

    /// Every window of `index`, tokenizing only those whose tokens `known` does not hold;
    /// `progress` hears (windows tokenized, of all to tokenize) as each is.
    pub fn build(
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> WindowIndex {
        let mut by_text: FxHashMap<[u8; 16], usize> = FxHashMap::default();
        let mut texts: Vec<(String, [u8; 16])> = Vec::new();
        let mut places: Vec<Vec<Window>> = Vec::new();
        let (mut file_starts, mut file_windows) = (vec![0], Vec::new());
        for (file, source) in index.files.iter().enumerate() {
            let mut windows = Vec::new();
            for (place, text) in cut(file, source) {
                let key = text_key(&text);
                let id = *by_text.entry(key).or_insert(texts.len());
                if id == texts.len() {
                    texts.push((text, key));
                    places.push(Vec::new());
                }
                places[id].push(place);
                windows.push(id as u32);
            }
            push_list(&mut file_starts, &mut file_windows, windows);
        }
        let tokens = token_sets(&texts, known, progress);
        let counts: Vec<Vec<(&str, u16)>> =
            texts.iter().map(|(text, _)| term_counts(text)).collect();
        let mut by_term: FxHashMap<&str, Vec<(u32, u16)>> = FxHashMap::default();
        for (window, counts) in counts.iter().enumerate() {
            for &(term, n) in counts {
                by_term.entry(term).or_default().push((window as u32, n));
            }
        }
        let mut sorted: Vec<&str> = by_term.keys().copied().collect();
        sorted.sort_unstable();
        let ids: FxHashMap<&str, u32> = sorted.iter().copied().zip(1..).collect();
        let (mut posting_starts, mut posting_windows) = (vec![0, 0], Vec::new());
        let mut posting_counts = Vec::new();
        for term in &sorted {
            let postings = &by_term[term];
            posting_counts.extend(postings.iter().map(|&(_, n)| u32::from(n)));
            push_list(
                &mut posting_starts,
                &mut posting_windows,
                postings.iter().map(|&(w, _)| w),
            );
        }
        let mut lists = ListsBuilder::new();
        for (window, (_, key)) in texts.iter().enumerate() {
            let terms: Vec<(u32, u16)> = counts[window]
                .iter()
                .map(|&(term, n)| (ids[term], n))
                .collect();
            lists.push(key, &places[window], &terms, &tokens[window]);
        }
        let lists = lists.done();
        let idf: Vec<f32> = (posting_starts.windows(2))
            .map(|w| idf_of(lists.len(), (w[1] - w[0]) as usize))
            .collect();
        let norms: Vec<u32> = (0..lists.len())
            .map(|window| {
                let (terms, counts) = lists.terms(window);
                norm(terms, counts, |t| idf[t as usize]).to_bits()
            })
            .collect();
        let mut by_key: Vec<u32> = (0..lists.len() as u32).collect();
        by_key.sort_unstable_by_key(|&w| texts[w as usize].1);
        WindowIndex {
            base: WindowBase {
                lists,
                by_key: by_key.into(),
                terms: Vocabulary::of_sorted(sorted),
                posting_starts: posting_starts.into(),
                posting_windows: posting_windows.into(),
                posting_counts: posting_counts.into(),
                norms: norms.into(),
                file_starts: file_starts.into(),
                file_windows: file_windows.into(),
            },
            changes: None,
            repocoder_order: OnceLock::new(),
        }
    }

    /// The windows of `index`'s files: this index's base with the files `changes` says changed,
    /// were added or removed since laid over it. Only the windows of changed and added files
    /// are cut, and only those of text neither the base nor `known` holds are tokenized (on the
    /// CPU pool, as [`tokenize`] says). Returns the tokens of the windows of text the base does
    /// not hold. `progress` hears of the windows tokenized, as [`WindowIndex::build`] says.
    pub fn changed(
        self,
        changes: &FileChanges,
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> (WindowIndex, TokenSets) {
        let base = self.base;
        let count = base.lists.len();
        let mut more_places: FxHashMap<u32, Vec<Window>> = FxHashMap::default();
        let mut by_text: FxHashMap<[u8; 16], usize> = FxHashMap::default();
        let mut texts: Vec<(String, [u8; 16])> = Vec::new();
        let mut places: Vec<Vec<Window>> = Vec::new();
        for &file in &changes.derived_again {
            let source = &index.files[file as usize];
            for (place, text) in cut(file as FileId, source) {
                let key = text_key(&text);
                if let Some(window) = base.find(&key) {
                    more_places.entry(window as u32).or_default().push(place);
                    continue;
                }
                let id = *by_text.entry(key).or_insert(texts.len());
                if id == texts.len() {
                    texts.push((text, key));
                    places.push(Vec::new());
                }
                places[id].push(place);
            }
        }
        let kept = &changes.kept;
        let mut gone = vec![false; count];
        let mut gone_df: FxHashMap<u32, u32> = FxHashMap::default();
        let dropped = (kept.iter().enumerate()).filter(|(_, new)| new.is_none());
        for (old, _) in dropped {
            for &window in list(&base.file_windows, &base.file_starts, old) {
                let w = window as usize;
                let placeless = !more_places.contains_key(&window)
                    && (base.lists.places(w)).all(|p| kept.get(p.file).is_none_or(Option::is_none));
                if w < count && !gone[w] && placeless {
                    gone[w] = true;
                    for &term in base.lists.terms(w).0 {
                        *gone_df.entry(term).or_default() += 1;
                    }
                }
            }
        }
        let tokens = token_sets(&texts, known, progress);
        let mut new_terms: FxHashMap<String, u32> = FxHashMap::default();
        let mut postings: FxHashMap<u32, Vec<(u32, u16)>> = FxHashMap::default();
        let mut lists = ListsBuilder::new();
        for (i, (text, key)) in texts.iter().enumerate() {
            let terms: Vec<(u32, u16)> = (term_counts(text).into_iter())
                .map(|(term, n)| {
                    let id = base.terms.get(term).unwrap_or_else(|| {
                        let next = base.terms.len() + new_terms.len();
                        *new_terms.entry(term.to_string()).or_insert(next as u32)
                    });
                    postings
                        .entry(id)
                        .or_default()
                        .push(((count + i) as u32, n));
                    (id, n)
                })
                .collect();
            lists.push(key, &places[i], &terms, &tokens[i]);
        }
        let added = TokenSets::of(
            texts
                .iter()
                .map(|(_, key)| *key)
                .zip(tokens.iter().map(Vec::as_slice)),
        );
        let live = count - gone.iter().filter(|&&g| g).count() + texts.len();
        let mut changes = WindowChanges {
            kept: kept.clone(),
            gone,
            more_places,
            new: lists.done(),
            new_terms,
            postings,
            gone_df,
            norms: Vec::new(),
            live,
        };
        changes.norms = changes.norms_today(&base);
        let index = WindowIndex {
            base,
            changes: Some(changes),
            repocoder_order: OnceLock::new(),
        };
        (index, added)
    }

    /// The base's sections, to keep in a cache file.
    pub fn sections(&self) -> Vec<Cow<'_, [u8]>> {
        let base = &self.base;
        let mut sections: Vec<Cow<'_, [u8]>> = base.lists.sections().into();
        sections.extend([
            word_bytes(&base.by_key),
            Cow::Borrowed(base.terms.text_bytes()),
            word_bytes(base.terms.ends()),
            word_bytes(&base.posting_starts),
            word_bytes(&base.posting_windows),
            word_bytes(&base.posting_counts),
            word_bytes(&base.norms),
            word_bytes(&base.file_starts),
            word_bytes(&base.file_windows),
        ]);
        sections
    }

    /// The base held by sections `first..` of a cache file, read where it lies; none when
    /// its arrays do not fit together.
    pub fn load(sections: &Sections, first: usize) -> Option<WindowIndex> {
        let lists = WindowLists::load(sections, first)?;
        let words = |at: usize| sections.words(first + 8 + at);
        let base = WindowBase {
            by_key: words(0)?,
            terms: Vocabulary::checked(sections.text(first + 9)?, words(2)?)?,
            posting_starts: words(3)?,
            posting_windows: words(4)?,
            posting_counts: words(5)?,
            norms: words(6)?,
            file_starts: words(7)?,
            file_windows: words(8)?,
            lists,
        };
        let windows = base.lists.len();
        let fits = base.by_key.len() == windows
            && base.norms.len() == windows
            && base.posting_starts.len() == base.terms.len() + 1
            && base.posting_starts.last() == Some(&(base.posting_windows.len() as u32))
            && base.posting_counts.len() == base.posting_windows.len()
            && base.file_starts.last() == Some(&(base.file_windows.len() as u32));
        fits.then(|| WindowIndex {
            base,
            changes: None,
            repocoder_order: OnceLock::new(),
        })
    }

    /// The token sets of every window today: what a base written afresh need not tokenize
    /// again.
    pub fn token_sets(&self) -> TokenSets {
        let live = (0..self.slots()).filter(|&w| !self.is_gone(w));
        TokenSets::of(live.map(|w| (self.key(w), self.window_token_ids(w))))
    }

    /// Window ids in all: the base's and the new windows', those gone included.
    fn slots(&self) -> usize {
        self.base.lists.len() + self.changes.as_ref().map_or(0, |c| c.new.len())
    }

    /// Whether window `w` of the base has no place left.
    fn is_gone(&self, w: usize) -> bool {
        self.changes
            .as_ref()
            .is_some_and(|c| c.gone.get(w).copied().unwrap_or(false))
    }

    /// Window `w`'s lists and its number among them.
    fn lists_of(&self, w: usize) -> (&WindowLists, usize) {
        let count = self.base.lists.len();
        match &self.changes {
            Some(changes) if w >= count => (&changes.new, w - count),
            _ => (&self.base.lists, w),
        }
    }

    fn key(&self, w: usize) -> [u8; 16] {
        let (lists, w) = self.lists_of(w);
        lists.key(w)
    }

    fn norm(&self, w: usize) -> f32 {
        match &self.changes {
            Some(changes) => changes.norms[w],
            None => f32::from_bits(self.base.norms[w]),
        }
    }

    /// Term `term`'s id, if some window of the base or a new one held it.
    fn term_id(&self, term: &str) -> Option<u32> {
        let new = |changes: &WindowChanges| changes.new_terms.get(term).copied();
        (self.base.terms.get(term)).or_else(|| self.changes.as_ref().and_then(new))
    }

    /// How many windows hold term `term` today.
    fn df(&self, term: u32) -> usize {
        match &self.changes {
            Some(changes) => changes.df(&self.base, term),
            None => self.base.df(term),
        }
    }

    /// The windows holding term `term` and how often (a window gone among them).
    fn postings(&self, term: u32) -> impl Iterator<Item = (u32, u16)> + '_ {
        let new = (self.changes.as_ref())
            .and_then(|c| c.postings.get(&term))
            .into_iter()
            .flatten()
            .copied();
        self.base.postings(term).chain(new)
    }

    fn idf(&self, term: u32) -> f32 {
        idf_of(self.len(), self.df(term))
    }

    /// Windows in all.
    pub fn len(&self) -> usize {
        self.changes
            .as_ref()
            .map_or(self.base.lists.len(), |c| c.live)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first place window `id` occurs.
    pub fn window(&self, id: usize) -> Window {
        self.places(id)[0]
    }

    /// Where window `id` first occurs, as (file, first line, end line): windows are in this
    /// order in a fresh index, and ties are broken in it (two windows may start at one line,
    /// the head window and the next, but never end there too).
    fn first_place(&self, id: usize) -> (FileId, u32, u32) {
        let place = self.place_iter(id).min_by_key(|p| (p.file, p.first));
        place.map_or((FileId::MAX, 0, 0), |p| (p.file, p.first, p.end))
    }

    /// Every place window `id` occurs today, in no particular order.
    fn place_iter(&self, id: usize) -> impl Iterator<Item = Window> + '_ {
        let (lists, w) = self.lists_of(id);
        let changes = self.changes.as_ref();
        let kept = lists.places(w).filter_map(move |place| match changes {
            Some(changes) if id < self.base.lists.len() => {
                let file = (*changes.kept.get(place.file)?)? as FileId;
                Some(Window { file, ..place })
            }
            _ => Some(place),
        });
        let more = changes.and_then(|c| c.more_places.get(&(id as u32)));
        kept.chain(more.into_iter().flatten().copied())
    }

    /// Every place window `id` occurs, in file and line order.
    pub fn places(&self, id: usize) -> Vec<Window> {
        let mut places: Vec<Window> = self.place_iter(id).collect();
        places.sort_by_key(|p| (p.file, p.first));
        places
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
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then_with(|| tie(a, b));
        let usable = |hit: &Hit| !excluded(index, hole, self.place_iter(hit.window));
        match similarity {
            Similarity::Jaccard => best_hits(self.jaccard(&token_set(query)), order, usable),
            Similarity::TfIdfCosine => {
                best_hits(self.cosine(&self.query_terms(query)), order, usable)
            }
        }
    }

    /// RepoCoder's window list order (files as `glob` lists them, which is `os.walk` order for
    /// files that are not hidden; then windows down each file), built on first use by the
    /// thread that asks, alone (holes' jobs on the CPU pool wait for it: see [`tokenize`]).
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
            let places: Vec<Vec<Window>> = (0..self.slots())
                .map(|w| {
                    let mut places = self.places(w);
                    places.sort_by_key(key);
                    places
                })
                .collect();
            let mut windows: Vec<usize> = (0..places.len())
                .filter(|&w| !places[w].is_empty())
                .collect();
            windows.sort_by_key(|&w| (key(&places[w][0]), self.first_place(w)));
            let mut rank = vec![usize::MAX; places.len()];
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
        let mut unknown = 0;
        for (term, n) in term_counts(query) {
            match self.term_id(term).filter(|&id| self.df(id) > 0) {
                Some(id) => known.push((id, n)),
                None => unknown += 1,
            }
        }
        QueryTerms { known, unknown }
    }

    /// Jaccard similarity of the token set `query` with every window (RepoCoder scores every
    /// window, sharing a token or not).
    fn jaccard(&self, query: &[u32]) -> impl Iterator<Item = Hit> + '_ {
        // A bit per token id: the whole set stays in the first-level cache while every window's
        // ids are looked up in it (some ten million lookups on guava).
        let mut in_query = vec![0u64; query.last().map_or(0, |&t| t as usize / 64 + 1)];
        for &t in query {
            in_query[t as usize / 64] |= 1 << (t % 64);
        }
        let shared_with = move |t: u32| {
            let word = in_query.get(t as usize / 64).copied().unwrap_or(0);
            (word >> (t % 64)) & 1
        };
        let query_len = query.len();
        (0..self.slots())
            .filter(|&window| !self.is_gone(window))
            .map(move |window| {
                let ids = self.window_token_ids(window);
                let shared = ids.iter().map(|&t| shared_with(t)).sum::<u64>() as usize;
                let union = query_len + ids.len() - shared;
                let score = if union == 0 {
                    0.0
                } else {
                    shared as f64 / union as f64
                };
                Hit { window, score }
            })
    }

    /// TF-IDF cosine similarity of `query` with every window sharing a term with it.
    fn cosine(&self, query: &QueryTerms) -> impl Iterator<Item = Hit> + '_ {
        let mut dot = vec![0.0f32; self.slots()];
        let mut query_norm = 0.0f32;
        for &(term, tf) in &query.known {
            let idf = self.idf(term);
            let q = tf_weight(tf) * idf;
            query_norm += q * q;
            for (w, wtf) in self.postings(term) {
                if let Some(dot) = dot.get_mut(w as usize) {
                    *dot += q * tf_weight(wtf) * idf;
                }
            }
        }
        // Terms the repository never saw weigh as if they had df 0.
        let unseen = (self.len() as f32 + 1.0).ln() + 1.0;
        query_norm += query.unknown as f32 * unseen * unseen;
        let query_norm = query_norm.sqrt();
        dot.into_iter()
            .enumerate()
            .filter(|&(window, d)| d > 0.0 && !self.is_gone(window))
            .map(move |(window, d)| Hit {
                window,
                score: f64::from(d / (query_norm * self.norm(window))),
            })
    }

    fn window_term_ids(&self, window: usize) -> &[u32] {
        let (lists, w) = self.lists_of(window);
        lists.terms(w).0
    }

    fn window_token_ids(&self, window: usize) -> &[u32] {
        let (lists, w) = self.lists_of(window);
        lists.tokens(w)
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
            let block = block(req.index, &places, place, &comment);
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
    fn places_as(&self, index: &RepoIndex, window: usize, fidelity: Fidelity) -> Cow<'_, [Window]> {
        match fidelity.rules().windows().order {
            WindowOrder::Path => Cow::Owned(self.places(window)),
            WindowOrder::RepoCoder => Cow::Borrowed(&self.repocoder_order(index).places[window]),
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
    // The weights of small counts, worked out once: summing every window's norm again after
    // an edit took a logarithm per term of every window.
    static SMALL: LazyLock<[f32; 64]> =
        LazyLock::new(|| std::array::from_fn(|tf| 1.0 + (tf as f32).ln()));
    match SMALL.get(usize::from(tf)) {
        Some(&weight) => weight,
        None => 1.0 + f32::from(tf).ln(),
    }
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

/// The best [`MAX_HITS`] of `hits` that are `usable`, best first under `order`, kept as they
/// stream past: holding a hit for every window (some 40,000 on guava) cost fresh memory on
/// every search. Only a hit good enough to enter is checked for use.
fn best_hits(
    hits: impl Iterator<Item = Hit>,
    order: impl Fn(&Hit, &Hit) -> std::cmp::Ordering,
    usable: impl Fn(&Hit) -> bool,
) -> Vec<Hit> {
    let mut best: Vec<Hit> = Vec::with_capacity(MAX_HITS + 1);
    for hit in hits {
        let enters =
            best.len() < MAX_HITS || best.last().is_some_and(|worst| order(&hit, worst).is_lt());
        if !enters || !usable(&hit) {
            continue;
        }
        let at = best.partition_point(|kept| order(kept, &hit).is_le());
        best.insert(at, hit);
        best.truncate(MAX_HITS);
    }
    best
}

/// Whether a window with these places is left out of a search for `hole`: when it occurs only
/// in the hole's file. RepoCoder's code keeps a window of the hole's file only if it ends
/// before `context_start_lineno`, the first line of the prompt; its prompts are whole file
/// prefixes (`context_start_lineno` 0), so no window of the hole's file is ever retrieved
/// (`_is_context_after_hole` keeps a window with a place elsewhere). A copy of the hole's file
/// under another path stays, as there. Windows only in files of another language are left out
/// too: RepoCoder's code globs the files of one language.
pub fn excluded(index: &RepoIndex, hole: &Hole, places: impl IntoIterator<Item = Window>) -> bool {
    let current = &index.files[hole.file];
    !places
        .into_iter()
        .filter(|p| p.file != hole.file)
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

    #[test]
    fn the_best_hits_streamed_are_the_best_usable_hits_sorted() {
        // Scores from a small generator, with ties, some windows unusable.
        let mut state = 7u64;
        let hits: Vec<Hit> = (0..5_000)
            .map(|window| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let score = (state >> 33) as f64 % 50.0 / 50.0;
                Hit { window, score }
            })
            .collect();
        let order =
            |a: &Hit, b: &Hit| (b.score.total_cmp(&a.score)).then_with(|| b.window.cmp(&a.window));
        let usable = |hit: &Hit| !hit.window.is_multiple_of(3);
        let mut expected: Vec<Hit> = hits.iter().copied().filter(usable).collect();
        expected.sort_by(order);
        expected.truncate(MAX_HITS);
        assert_eq!(best_hits(hits.iter().copied(), order, usable), expected);
        let few = &hits[..7];
        let mut all_few: Vec<Hit> = few.iter().copied().filter(usable).collect();
        all_few.sort_by(order);
        assert_eq!(best_hits(few.iter().copied(), order, usable), all_few);
    }
}
