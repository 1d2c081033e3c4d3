//! RLPG's non-proposal baselines (section 3.2, methods 5–9; appendix C.3): contexts retrieved
//! from the repository without prompt proposals, and BM25, which also ranks proposals
//! (RLPG-BM25). Each context takes half the budget, like a proposal.

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::{HoleRequest, SourcedText};
use crate::hole::{Hole, HoleWindow};
use crate::lang::Span;
use crate::repo::{FileChanges, FileId, RepoIndex, packed};
use crate::token::Keep;

/// Lines above and below a usage in an identifier usage window.
const USAGE_WINDOW: usize = 2;

/// Words BM25 compares: identifiers, keywords and numbers, as written.
pub fn terms(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
}

/// Okapi BM25 with the defaults of the `rank-bm25` package RLPG used (k1 1.5, b 0.75, and
/// negative idf replaced by 0.25 × the mean idf). Documents can be added, dropped and
/// renumbered ([`Bm25::update`]); what is global (document frequencies, the mean length and
/// idf) follows, and scores are exactly those of an index built afresh from the same documents.
#[derive(Serialize, Deserialize)]
pub struct Bm25 {
    /// Per term: the documents holding it and how often, in no particular order.
    #[serde(with = "packed::by_string")]
    postings: FxHashMap<String, Vec<(u32, u32)>>,
    /// Per document: its number of terms.
    #[serde(with = "packed")]
    doc_len: Vec<u32>,
    /// The sum of `doc_len`, kept exact so that the mean does not depend on the order of
    /// updates.
    total_len: u64,
    /// What a term held by more than half of the documents weighs: 0.25 × the mean idf.
    floor_idf: f64,
}

const K1: f64 = 1.5;
const B: f64 = 0.75;
const EPSILON: f64 = 0.25;

impl Bm25 {
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Bm25 {
        let mut bm25 = Bm25 {
            postings: FxHashMap::default(),
            doc_len: Vec::new(),
            total_len: 0,
            floor_idf: 0.0,
        };
        for text in docs {
            bm25.doc_len.push(0);
            bm25.add(bm25.doc_len.len() - 1, text);
        }
        bm25.settle();
        bm25
    }

    /// Keep document `old` as document `kept[old]`, or drop it where that is `None`; then make
    /// room for `count` documents in all and add `added` (document, text) to them. Only the
    /// kept documents' postings are visited, and only the added texts are read.
    pub fn update<'a>(
        &mut self,
        kept: &[Option<u32>],
        count: usize,
        added: impl IntoIterator<Item = (usize, &'a str)>,
    ) {
        self.postings.retain(|_, docs| {
            docs.retain_mut(|(doc, _)| match kept[*doc as usize] {
                Some(new) => {
                    *doc = new;
                    true
                }
                None => false,
            });
            !docs.is_empty()
        });
        let mut doc_len = vec![0; count];
        for (old, new) in kept.iter().enumerate() {
            if let Some(new) = new {
                doc_len[*new as usize] = self.doc_len[old];
            }
        }
        self.doc_len = doc_len;
        for (doc, text) in added {
            self.add(doc, text);
        }
        self.settle();
    }

    fn add(&mut self, doc: usize, text: &str) {
        let mut tf: FxHashMap<&str, u32> = FxHashMap::default();
        for term in terms(text) {
            *tf.entry(term).or_default() += 1;
        }
        self.doc_len[doc] = tf.values().sum::<u32>();
        for (term, n) in tf {
            let docs = match self.postings.get_mut(term) {
                Some(docs) => docs,
                None => self.postings.entry(term.to_string()).or_default(),
            };
            docs.push((doc as u32, n));
        }
    }

    /// The global statistics, once the documents are all there. The mean idf is summed by
    /// document frequency, so it does not depend on the order the terms were met in.
    fn settle(&mut self) {
        self.total_len = self.doc_len.iter().map(|&l| u64::from(l)).sum();
        let mut terms_by_df: Vec<(usize, usize)> = {
            let mut counts: FxHashMap<usize, usize> = FxHashMap::default();
            for docs in self.postings.values() {
                *counts.entry(docs.len()).or_default() += 1;
            }
            counts.into_iter().collect()
        };
        terms_by_df.sort_unstable();
        let idf_sum: f64 = (terms_by_df.iter())
            .map(|&(df, terms)| terms as f64 * self.raw_idf(df))
            .sum();
        self.floor_idf = EPSILON * idf_sum / self.postings.len().max(1) as f64;
    }

    fn raw_idf(&self, df: usize) -> f64 {
        let (n, df) = (self.doc_len.len() as f64, df as f64);
        ((n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Every document's score for `query`.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.doc_len.len()];
        let mean_len = self.total_len as f64 / (self.doc_len.len() as f64).max(1.0);
        for term in terms(query) {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let idf = match self.raw_idf(postings.len()) {
                idf if idf < 0.0 => self.floor_idf,
                idf => idf,
            };
            for &(doc, tf) in postings {
                let tf = f64::from(tf);
                let norm =
                    K1 * (1.0 - B + B * f64::from(self.doc_len[doc as usize]) / mean_len.max(1.0));
                scores[doc as usize] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores
    }
}

/// RLPG's hole window: two lines before the hole line, the hole line up to the hole, and two
/// lines after it.
pub fn hole_window(index: &RepoIndex, hole: &Hole) -> String {
    HoleWindow::of(index, hole).text()
}

/// What the baselines share for one repository: BM25 over its files.
#[derive(Serialize, Deserialize)]
pub struct Retrieval {
    files: Bm25,
}

impl Retrieval {
    pub fn new(index: &RepoIndex) -> Retrieval {
        Retrieval::new_with_progress(index, &|_, _| ())
    }

    /// [`Retrieval::new`], telling `progress` (files done, of all) as each file is read.
    pub fn new_with_progress(index: &RepoIndex, progress: &dyn Fn(usize, usize)) -> Retrieval {
        let total = index.files.len();
        let texts = (index.files.iter().enumerate()).map(|(n, f)| {
            progress(n, total);
            f.text.as_str()
        });
        let files = Bm25::new(texts);
        progress(total, total);
        Retrieval { files }
    }

    /// Brought up to `index`'s files from the files it was built from: only what `changes`
    /// says is new or changed is read (see [`Bm25::update`]).
    pub fn update(&mut self, changes: &FileChanges, index: &RepoIndex) {
        let added = (changes.derived_again.iter())
            .map(|&id| (id as usize, index.files[id as usize].text.as_str()));
        self.files.update(&changes.kept, index.files.len(), added);
    }

    /// File-level BM25: whole other files, most similar to the hole window first, until the
    /// allocation is filled; cut from the back (C.3).
    pub fn file_bm25(&self, req: &HoleRequest) -> SourcedText {
        let scores = self.files.scores(&hole_window(req.index, req.hole));
        let current = &req.index.files[req.hole.file];
        let mut ranked: Vec<FileId> = (0..scores.len())
            .filter(|&f| f != req.hole.file && scores[f] > 0.0)
            .filter(|&f| req.index.files[f].same_language(current))
            .collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let spans = ranked
            .into_iter()
            .map(|f| (f, Span::new(0, req.index.files[f].text.len())));
        fill(req, spans)
    }

    /// Identifier usage (random): windows of two lines around every usage of the identifier
    /// nearest before the hole, in random order; the next nearest identifier when one has no
    /// usage outside the hole's lines.
    pub fn identifier_usage(&self, req: &HoleRequest) -> SourcedText {
        let file = &req.index.files[req.hole.file];
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        let before_hole = file
            .facts
            .identifiers
            .iter()
            .rev()
            .filter(|s| (s.end as usize) <= req.hole.offset);
        for span in before_hole {
            let name = &file.text[span.range()];
            if !seen.insert(name) {
                continue;
            }
            let mut windows = usage_windows(req, name);
            if !windows.is_empty() {
                windows.shuffle(&mut rng(req));
                return fill(req, windows.into_iter());
            }
        }
        SourcedText::default()
    }

    /// Random: a random line of a random file and everything after it (the hole's lines left
    /// out when the current file is drawn).
    pub fn random_context(&self, req: &HoleRequest) -> SourcedText {
        let mut rng = rng(req);
        let current = &req.index.files[req.hole.file];
        let ids: Vec<FileId> = (0..req.index.files.len())
            .filter(|&f| req.index.files[f].same_language(current))
            .collect();
        let Some(&f) = ids.choose(&mut rng) else {
            return SourcedText::default();
        };
        let file = &req.index.files[f];
        let line = (0..file.line_count())
            .collect::<Vec<_>>()
            .choose(&mut rng)
            .copied()
            .unwrap_or(0);
        let mut start = file.line_start(line);
        if f == req.hole.file && line <= req.hole.line + USAGE_WINDOW {
            start = file.line_start(req.hole.line + USAGE_WINDOW + 1);
        }
        fill(req, std::iter::once((f, Span::new(start, file.text.len()))))
    }
}

fn rng(req: &HoleRequest) -> ChaCha8Rng {
    let position = (req.hole.file as u64) << 32 | req.hole.line as u64;
    ChaCha8Rng::seed_from_u64(req.seed ^ position.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Usage windows of `name` in the repository, leaving out any that touch the hole's line.
fn usage_windows(req: &HoleRequest, name: &str) -> Vec<(FileId, Span)> {
    let mut windows = Vec::new();
    let current = &req.index.files[req.hole.file];
    let same_language = req.index.files.iter().enumerate();
    for (id, file) in same_language.filter(|(_, f)| f.same_language(current)) {
        for &line in file.facts.usages_of(name) {
            let line = line as usize;
            let (first, last) = (line.saturating_sub(USAGE_WINDOW), line + USAGE_WINDOW);
            if id == req.hole.file && first <= req.hole.line && req.hole.line <= last {
                continue;
            }
            windows.push((
                id,
                Span::new(file.line_start(first), file.line_start(last + 1)),
            ));
        }
    }
    windows
}

/// Spans taken in order, each on its own lines, until the allocation is filled; the last one
/// is cut from the back to fit.
fn fill(req: &HoleRequest, spans: impl Iterator<Item = (FileId, Span)>) -> SourcedText {
    let mut text = SourcedText::default();
    let mut used = 0;
    for (file, span) in spans {
        let separator = usize::from(!text.is_empty() && !text.text.ends_with('\n'));
        let Some(room) = req
            .allocation
            .checked_sub(used + separator)
            .filter(|&r| r > 0)
        else {
            break;
        };
        if separator == 1 {
            text.push_plain("\n");
            used += 1;
        }
        let mut piece = SourcedText::default();
        piece.push_span(req.index, file, span);
        let (piece, tokens) = piece.truncate(req.tokenizer, room, Keep::Start);
        used += tokens;
        text.append(piece);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_prefers_documents_sharing_rare_terms() {
        let docs = [
            "order repository save",
            "customer name email",
            "order order total",
            "misc",
            "other words",
            "more",
        ];
        let s = Bm25::new(docs).scores("save order");
        assert!(s[0] > s[2] && s[2] > s[1], "{s:?}");
        assert_eq!(s[3], 0.0);
        // As in rank-bm25, a term in half of the documents has an idf of zero.
        assert_eq!(Bm25::new(["a x", "b", "a", "c"]).scores("a"), [0.0; 4]);
        assert_eq!(
            terms("a.b(c_d, $e1)").collect::<Vec<_>>(),
            ["a", "b", "c_d", "$e1"]
        );
    }

    #[test]
    fn bm25_updated_document_by_document_scores_as_one_built_afresh() {
        let before = [
            "order repository save order",
            "customer name email",
            "",
            "order total tax",
            "misc words here",
            "customer order id",
        ];
        // Document 1 is removed, 3 changed, two are added (one empty); the rest move.
        let after = [
            "order repository save order",
            "brand new document about tax",
            "",
            "order total tax rate rate",
            "misc words here",
            "",
            "customer order id",
        ];
        let kept = [Some(0), None, Some(2), None, Some(4), Some(6)];
        let mut updated = Bm25::new(before);
        updated.update(
            &kept,
            after.len(),
            [(1, after[1]), (3, after[3]), (5, after[5])],
        );
        let fresh = Bm25::new(after);
        let bits = |scores: Vec<f64>| scores.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        for query in [
            "order",
            "customer order tax",
            "rate words new",
            "email",
            "order order id",
        ] {
            assert_eq!(
                bits(updated.scores(query)),
                bits(fresh.scores(query)),
                "{query}"
            );
        }
        assert_eq!(updated.floor_idf.to_bits(), fresh.floor_idf.to_bits());
        assert!(
            !updated.postings.contains_key("email"),
            "a term no document holds is gone"
        );
    }
}
