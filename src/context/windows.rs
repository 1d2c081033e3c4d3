//! RepoCoder's retrieval database (section 2.2): sliding windows of [`WINDOW_LINES`] lines,
//! moved [`WINDOW_STEP`] lines at a time over every file, built once per repository, with an
//! inverted index from terms to windows so that a query touches only the windows sharing a
//! term with it. Both RepoCoder's Jaccard similarity and ProCC's lexical (TF-IDF cosine)
//! similarity search it, and [`WindowIndex::blocks`] lays the hits out as RepoCoder's prompt
//! (Figure 3).

use rustc_hash::FxHashMap;

use super::SourcedText;
use super::retrieval::{Request, terms};
use crate::hole::Hole;
use crate::lang::Span;
use crate::repo::{FileId, RepoIndex};

/// RepoCoder's window size S_w and sliding size S_s for line completion (section 4,
/// hyper-parameters).
pub const WINDOW_LINES: usize = 20;
pub const WINDOW_STEP: usize = 10;
/// RepoCoder's K: retrieved snippets in a prompt at most.
pub const MAX_BLOCKS: usize = 10;
/// Hits a search returns at most: blocks that do not fit are skipped, so the prompt looks a
/// few K deep, not through every window that shares a term.
pub const MAX_HITS: usize = 4 * MAX_BLOCKS;
/// The comment that starts every line of a block. RepoCoder's prompts are Python (`#`); the
/// corpus here is Java, so its line comment.
const COMMENT: &str = "// ";
/// RepoCoder's separator line: 50 dashes.
const RULE: &str = "--------------------------------------------------";

/// One window: lines `first..end` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub file: FileId,
    pub first: u32,
    pub end: u32,
}

/// How a query is compared with the windows. A dense encoder (an embedding model) would be a
/// further variant with its own window vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Similarity {
    /// RepoCoder: |Sq ∩ Sc| / |Sq ∪ Sc| over the sets of terms ([`terms`]: identifiers,
    /// keywords and numbers; punctuation left out). The paper says "sets of tokens" without
    /// fixing the tokenizer.
    Jaccard,
    /// ProCC's lexical perspective without an encoder: cosine of TF-IDF vectors over the same
    /// terms (sublinear tf `1 + ln tf`, smoothed idf `ln((N + 1) / (df + 1)) + 1`).
    TfIdfCosine,
}

/// A window and its similarity to a query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub window: usize,
    pub score: f64,
}

/// Every window of a repository, indexed by term.
pub struct WindowIndex {
    windows: Vec<Window>,
    vocabulary: FxHashMap<String, u32>,
    /// Per term id: the windows holding it and how often.
    postings: Vec<Vec<(u32, u16)>>,
    /// Per window: its distinct term ids, sorted (flattened; `term_starts` delimits them).
    window_terms: Vec<u32>,
    term_starts: Vec<u32>,
    /// Per window: the norm of its TF-IDF vector.
    norms: Vec<f32>,
}

impl WindowIndex {
    pub fn new(index: &RepoIndex) -> WindowIndex {
        let mut built = WindowIndex {
            windows: Vec::new(),
            vocabulary: FxHashMap::default(),
            postings: Vec::new(),
            window_terms: Vec::new(),
            term_starts: vec![0],
            norms: Vec::new(),
        };
        for (file, source) in index.files.iter().enumerate() {
            for (first, end) in window_lines(source.line_count()) {
                let span = lines_span(index, file, first, end);
                built.add(
                    Window {
                        file,
                        first: first as u32,
                        end: end as u32,
                    },
                    &source.text[span.range()],
                );
            }
        }
        built.norms = built.compute_norms();
        built
    }

    fn add(&mut self, window: Window, text: &str) {
        let id = self.windows.len() as u32;
        let mut tf: FxHashMap<u32, u16> = FxHashMap::default();
        for term in terms(text) {
            let next = self.vocabulary.len() as u32;
            let term = *self.vocabulary.entry(term.to_string()).or_insert(next);
            if term as usize == self.postings.len() {
                self.postings.push(Vec::new());
            }
            let n = tf.entry(term).or_default();
            *n = n.saturating_add(1);
        }
        let mut ids: Vec<u32> = tf.keys().copied().collect();
        ids.sort_unstable();
        for &term in &ids {
            self.postings[term as usize].push((id, tf[&term]));
        }
        self.window_terms.extend(ids);
        self.term_starts.push(self.window_terms.len() as u32);
        self.windows.push(window);
    }

    fn idf(&self, term: u32) -> f32 {
        let n = self.windows.len() as f32;
        let df = self.postings[term as usize].len() as f32;
        ((n + 1.0) / (df + 1.0)).ln() + 1.0
    }

    fn compute_norms(&self) -> Vec<f32> {
        let mut squares = vec![0.0f32; self.windows.len()];
        for term in 0..self.postings.len() as u32 {
            let idf = self.idf(term);
            for &(w, tf) in &self.postings[term as usize] {
                let weight = tf_weight(tf) * idf;
                squares[w as usize] += weight * weight;
            }
        }
        squares.into_iter().map(f32::sqrt).collect()
    }

    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    pub fn window(&self, id: usize) -> Window {
        self.windows[id]
    }

    /// The [`MAX_HITS`] windows most similar to `query`, best first (ties in window order),
    /// leaving out those that could show the hole's code (see [`may_show_hole`]); only windows
    /// sharing a term with the query.
    pub fn search(
        &self,
        index: &RepoIndex,
        hole: &Hole,
        query: &str,
        similarity: Similarity,
    ) -> Vec<Hit> {
        let query_terms = self.query_terms(query);
        let mut hits = match similarity {
            Similarity::Jaccard => self.jaccard(&query_terms),
            Similarity::TfIdfCosine => self.cosine(&query_terms),
        };
        hits.retain(|h| !may_show_hole(index, hole, self.windows[h.window]));
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.window.cmp(&b.window));
        if hits.len() > MAX_HITS {
            hits.select_nth_unstable_by(MAX_HITS, order);
            hits.truncate(MAX_HITS);
        }
        hits.sort_by(order);
        hits
    }

    /// The query's distinct terms: known ones by id with their count, and how many distinct
    /// terms the repository never saw.
    fn query_terms(&self, query: &str) -> QueryTerms {
        let mut known: FxHashMap<u32, u16> = FxHashMap::default();
        let mut unknown: Vec<&str> = Vec::new();
        for term in terms(query) {
            match self.vocabulary.get(term) {
                Some(&id) => {
                    let n = known.entry(id).or_default();
                    *n = n.saturating_add(1);
                }
                None if !unknown.contains(&term) => unknown.push(term),
                None => {}
            }
        }
        QueryTerms {
            known: known.into_iter().collect(),
            unknown: unknown.len(),
        }
    }

    fn jaccard(&self, query: &QueryTerms) -> Vec<Hit> {
        let mut shared = vec![0u32; self.windows.len()];
        for &(term, _) in &query.known {
            for &(w, _) in &self.postings[term as usize] {
                shared[w as usize] += 1;
            }
        }
        let query_size = query.known.len() + query.unknown;
        shared
            .into_iter()
            .enumerate()
            .filter(|&(_, n)| n > 0)
            .map(|(window, n)| {
                let union = query_size + self.term_count(window) - n as usize;
                Hit {
                    window,
                    score: f64::from(n) / union as f64,
                }
            })
            .collect()
    }

    fn cosine(&self, query: &QueryTerms) -> Vec<Hit> {
        let mut dot = vec![0.0f32; self.windows.len()];
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
        let unseen = (self.windows.len() as f32 + 1.0).ln() + 1.0;
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

    fn term_count(&self, window: usize) -> usize {
        (self.term_starts[window + 1] - self.term_starts[window]) as usize
    }

    fn window_term_ids(&self, window: usize) -> &[u32] {
        &self.window_terms[self.term_starts[window] as usize..self.term_starts[window + 1] as usize]
    }

    /// Jaccard similarity of `text`'s terms and window `window`'s (a ProCC bandit feature).
    pub fn jaccard_with(&self, window: usize, text: &str) -> f64 {
        let query = self.query_terms(text);
        let ids = self.window_term_ids(window);
        let shared = query
            .known
            .iter()
            .filter(|(t, _)| ids.binary_search(t).is_ok())
            .count();
        let union = query.known.len() + query.unknown + ids.len() - shared;
        if union == 0 {
            0.0
        } else {
            shared as f64 / union as f64
        }
    }

    /// RepoCoder's prompt (Figure 3) from `hits`, best first: whole blocks taken best-first
    /// while they fit the allocation (a block that does not fit is skipped, as in RepoCoder),
    /// at most [`MAX_BLOCKS`], windows with the text of one already taken left out; laid out
    /// in ascending similarity so that the best block sits next to the code. Returns the text
    /// and the windows used, best first.
    pub fn blocks(&self, req: &Request, hits: &[Hit]) -> (SourcedText, Vec<usize>) {
        let header = format!(
            "{COMMENT}Here are some relevant code fragments from other files of the repo:\n{COMMENT}{RULE}\n"
        );
        let mut used = req.tokenizer.count(&header);
        let mut chosen: Vec<(usize, SourcedText)> = Vec::new();
        for hit in hits {
            if chosen.len() == MAX_BLOCKS || used >= req.allocation {
                break;
            }
            let window = self.windows[hit.window];
            let span = lines_span(
                req.index,
                window.file,
                window.first as usize,
                window.end as usize,
            );
            let code = &req.index.files[window.file].text[span.range()];
            if chosen.iter().any(|(w, _)| self.text(req.index, *w) == code) {
                continue;
            }
            let block = self.block(req.index, window);
            let tokens = req.tokenizer.count(&block.text);
            if used + tokens <= req.allocation {
                used += tokens;
                chosen.push((hit.window, block));
            }
        }
        // Tokens may merge across block boundaries under BPE: drop the worst block until the
        // whole fits.
        while !chosen.is_empty() {
            let mut text = SourcedText::default();
            text.push_plain(&header);
            for (_, block) in chosen.iter().rev() {
                text.append(block.clone());
            }
            if req.tokenizer.count(&text.text) <= req.allocation {
                return (text, chosen.into_iter().map(|(w, _)| w).collect());
            }
            chosen.pop();
        }
        (SourcedText::default(), Vec::new())
    }

    fn text<'i>(&self, index: &'i RepoIndex, window: usize) -> &'i str {
        let w = self.windows[window];
        let span = lines_span(index, w.file, w.first as usize, w.end as usize);
        &index.files[w.file].text[span.range()]
    }

    /// One block: where the fragment is, then its lines commented out, between rules.
    fn block(&self, index: &RepoIndex, window: Window) -> SourcedText {
        let file = &index.files[window.file];
        let mut text = SourcedText::default();
        text.push_plain(&format!(
            "{COMMENT}the below code fragment can be found in:\n{COMMENT}{}\n{COMMENT}{RULE}\n",
            file.path
        ));
        for line in window.first as usize..window.end as usize {
            text.push_plain(COMMENT);
            let span = lines_span(index, window.file, line, line + 1);
            text.push_span(index, window.file, span);
            if !text.text.ends_with('\n') {
                text.push_plain("\n");
            }
        }
        text.push_plain(&format!("{COMMENT}{RULE}\n"));
        text
    }
}

/// A query's terms as [`WindowIndex::search`] needs them.
struct QueryTerms {
    known: Vec<(u32, u16)>,
    unknown: usize,
}

fn tf_weight(tf: u16) -> f32 {
    1.0 + f32::from(tf).ln()
}

/// The windows of a file of `lines` lines: starts every [`WINDOW_STEP`] lines, leaving out a
/// last window that the one before already covers.
fn window_lines(lines: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..lines)
        .step_by(WINDOW_STEP)
        .filter(move |&first| first == 0 || first + WINDOW_STEP < lines)
        .map(move |first| (first, (first + WINDOW_LINES).min(lines)))
}

/// The bytes of lines `first..end` of a file.
fn lines_span(index: &RepoIndex, file: FileId, first: usize, end: usize) -> Span {
    let source = &index.files[file];
    Span::new(source.line_start(first), source.line_start(end))
}

/// The first line of the code before the hole that RepoCoder's query reads: the last
/// [`WINDOW_LINES`] lines, the hole's own line (up to the hole) being the last of them.
pub fn query_first_line(hole: &Hole) -> usize {
    (hole.line + 1).saturating_sub(WINDOW_LINES)
}

/// Whether a window could show the hole's code: a window of the current file (or of an exact
/// copy of it) that reaches the lines of the query or anything after them. RepoCoder keeps a
/// window of the current file only when it ends before the query's first line; so do we, which
/// keeps the hole's line and everything after it out.
pub fn may_show_hole(index: &RepoIndex, hole: &Hole, window: Window) -> bool {
    let same_file =
        window.file == hole.file || index.files[window.file].hash == index.files[hole.file].hash;
    same_file && window.end as usize > query_first_line(hole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_line_without_a_redundant_tail() {
        assert_eq!(window_lines(0).count(), 0);
        assert_eq!(window_lines(5).collect::<Vec<_>>(), [(0, 5)]);
        assert_eq!(window_lines(20).collect::<Vec<_>>(), [(0, 20)]);
        assert_eq!(window_lines(21).collect::<Vec<_>>(), [(0, 20), (10, 21)]);
        assert_eq!(
            window_lines(45).collect::<Vec<_>>(),
            [(0, 20), (10, 30), (20, 40), (30, 45)]
        );
    }
}
