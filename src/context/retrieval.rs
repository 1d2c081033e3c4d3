//! RLPG's non-proposal baselines (section 3.2, methods 5–9; appendix C.3): contexts retrieved
//! from the repository without prompt proposals, and BM25, which also ranks proposals
//! (RLPG-BM25). Each context takes half the budget, like a proposal.

use std::borrow::Cow;

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{HoleRequest, SourcedText};
use crate::hole::{Hole, HoleWindow};
use crate::lang::Span;
use crate::repo::mapped::{Sections, Vocabulary, Words, list, push_list, word_bytes};
use crate::repo::{FileChanges, FileId, RepoIndex};
use crate::token::Keep;

/// Lines above and below a usage in an identifier usage window.
const USAGE_WINDOW: usize = 2;

/// Words BM25 compares: identifiers, keywords and numbers, as written.
pub fn terms(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
}

/// Okapi BM25 with the defaults of the `rank-bm25` package RLPG used (k1 1.5, b 0.75, and
/// negative idf replaced by 0.25 × the mean idf). Its base is built from some documents or read
/// in place from a cache file ([`Bm25::load`]); the documents changed, added or removed since
/// ([`Bm25::changed`]) are laid over it: the base's postings of a document that is no longer
/// there are passed over, the others renumbered, and what is global (document frequencies, the
/// mean length and idf) follows, so that scores are exactly those of an index built afresh from
/// today's documents.
pub struct Bm25 {
    base: Bm25Base,
    changes: Option<Bm25Changes>,
    /// Today's documents, the sum of their lengths (exact, so that the mean does not depend on
    /// how the index came about), and what a term held by more than half of them weighs (0.25 ×
    /// the mean idf).
    docs: usize,
    total_len: u64,
    floor_idf: f64,
}

/// The documents an index was built from, as arrays a cache file holds in place.
struct Bm25Base {
    /// Every term, by id (id 0, the empty string, is no term).
    terms: Vocabulary,
    /// Per term id: the documents holding it and how often (`posting_starts` delimits them).
    posting_starts: Words,
    posting_docs: Words,
    posting_tfs: Words,
    /// Per document: its number of terms, and its distinct terms (`doc_term_starts` delimits
    /// them): what a document that goes takes from the document frequencies.
    doc_len: Words,
    doc_term_starts: Words,
    doc_terms: Words,
}

/// What changed since the base was built.
struct Bm25Changes {
    /// Per document of the base: its number today, none when it changed or went.
    kept: Vec<Option<u32>>,
    /// Per document today: its number of terms.
    doc_len: Vec<u32>,
    /// Terms no document of the base holds, with ids from the base's last on.
    new_terms: FxHashMap<String, u32>,
    /// Per term: the changed and added documents holding it, and how often.
    postings: FxHashMap<u32, Vec<(u32, u32)>>,
    /// Per term of the base: how many of the documents holding it changed or went.
    gone: FxHashMap<u32, u32>,
}

/// The sections of [`Bm25Base`] in a cache file.
pub const BM25_SECTIONS: usize = 8;

const K1: f64 = 1.5;
const B: f64 = 0.75;
const EPSILON: f64 = 0.25;

/// Each document's distinct terms and how often it uses each.
fn term_counts(text: &str) -> FxHashMap<&str, u32> {
    let mut tf: FxHashMap<&str, u32> = FxHashMap::default();
    for term in terms(text) {
        *tf.entry(term).or_default() += 1;
    }
    tf
}

fn raw_idf(docs: usize, df: usize) -> f64 {
    let (n, df) = (docs as f64, df as f64);
    ((n - df + 0.5) / (df + 0.5)).ln()
}

/// 0.25 × the mean idf of terms held by `dfs` documents each (every term some document holds),
/// summed by document frequency so that it does not depend on the order the terms come in.
fn floor_idf(docs: usize, dfs: impl Iterator<Item = usize>) -> f64 {
    let mut counts: FxHashMap<usize, usize> = FxHashMap::default();
    let mut terms = 0;
    for df in dfs {
        *counts.entry(df).or_default() += 1;
        terms += 1;
    }
    let mut terms_by_df: Vec<(usize, usize)> = counts.into_iter().collect();
    terms_by_df.sort_unstable();
    let idf_sum: f64 = (terms_by_df.iter())
        .map(|&(df, terms)| terms as f64 * raw_idf(docs, df))
        .sum();
    EPSILON * idf_sum / terms.max(1) as f64
}

impl Bm25Base {
    fn build<'a>(docs: impl IntoIterator<Item = &'a str>) -> Bm25Base {
        let mut by_term: FxHashMap<&str, Vec<(u32, u32)>> = FxHashMap::default();
        let mut doc_len = Vec::new();
        for (doc, text) in docs.into_iter().enumerate() {
            let tf = term_counts(text);
            doc_len.push(tf.values().sum::<u32>());
            for (term, n) in tf {
                by_term.entry(term).or_default().push((doc as u32, n));
            }
        }
        let mut sorted: Vec<&str> = by_term.keys().copied().collect();
        sorted.sort_unstable();
        let (mut posting_starts, mut posting_docs, mut posting_tfs) = (vec![0, 0], vec![], vec![]);
        let mut doc_terms: Vec<Vec<u32>> = vec![Vec::new(); doc_len.len()];
        for (id, term) in (1..).zip(&sorted) {
            let postings = &by_term[term];
            for &(doc, _) in postings {
                doc_terms[doc as usize].push(id);
            }
            posting_tfs.extend(postings.iter().map(|&(_, tf)| tf));
            push_list(
                &mut posting_starts,
                &mut posting_docs,
                postings.iter().map(|&(doc, _)| doc),
            );
        }
        let (mut doc_term_starts, mut flat_terms) = (vec![0], vec![]);
        for terms in doc_terms {
            push_list(&mut doc_term_starts, &mut flat_terms, terms);
        }
        Bm25Base {
            terms: Vocabulary::of_sorted(sorted),
            posting_starts: posting_starts.into(),
            posting_docs: posting_docs.into(),
            posting_tfs: posting_tfs.into(),
            doc_len: doc_len.into(),
            doc_term_starts: doc_term_starts.into(),
            doc_terms: flat_terms.into(),
        }
    }

    /// How many of the base's documents hold term `id`.
    fn df(&self, id: u32) -> usize {
        list(&self.posting_docs, &self.posting_starts, id as usize).len()
    }

    /// Term `id`'s postings: the documents and how often each holds it.
    fn postings(&self, id: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let docs = list(&self.posting_docs, &self.posting_starts, id as usize);
        let tfs = list(&self.posting_tfs, &self.posting_starts, id as usize);
        docs.iter().copied().zip(tfs.iter().copied())
    }
}

impl Bm25 {
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Bm25 {
        Bm25::of(Bm25Base::build(docs), None)
    }

    /// `base` with `changes` laid over it, and the global statistics of both together.
    fn of(base: Bm25Base, changes: Option<Bm25Changes>) -> Bm25 {
        let terms = 1..base.terms.len() as u32;
        let (docs, total_len, floor) = match &changes {
            None => {
                let docs = base.doc_len.len();
                let dfs = terms.map(|id| base.df(id));
                let total = base.doc_len.iter().map(|&l| u64::from(l)).sum();
                (docs, total, floor_idf(docs, dfs))
            }
            Some(changes) => {
                let docs = changes.doc_len.len();
                let ids = terms.chain(changes.new_terms.values().copied());
                let dfs = ids.map(|id| changes.df(&base, id)).filter(|&df| df > 0);
                let total = changes.doc_len.iter().map(|&l| u64::from(l)).sum();
                (docs, total, floor_idf(docs, dfs))
            }
        };
        Bm25 {
            base,
            changes,
            docs,
            total_len,
            floor_idf: floor,
        }
    }

    /// The index of today's documents: this one's base with the documents changed, added and
    /// removed since laid over it. `kept` maps each of the base's documents to its number
    /// today (none where it changed or went); `added` are today's changed and added documents
    /// (number and text), of `count` in all. Only the added texts are read.
    pub fn changed<'a>(
        self,
        kept: &[Option<u32>],
        count: usize,
        added: impl IntoIterator<Item = (usize, &'a str)>,
    ) -> Bm25 {
        let base = self.base;
        let mut changes = Bm25Changes {
            kept: kept.to_vec(),
            doc_len: vec![0; count],
            new_terms: FxHashMap::default(),
            postings: FxHashMap::default(),
            gone: FxHashMap::default(),
        };
        for (old, new) in kept.iter().enumerate() {
            match new {
                Some(new) => changes.doc_len[*new as usize] = base.doc_len[old],
                None => {
                    for &term in list(&base.doc_terms, &base.doc_term_starts, old) {
                        *changes.gone.entry(term).or_default() += 1;
                    }
                }
            }
        }
        for (doc, text) in added {
            let tf = term_counts(text);
            changes.doc_len[doc] = tf.values().sum::<u32>();
            for (term, n) in tf {
                let id = base.terms.get(term).unwrap_or_else(|| {
                    let next = base.terms.len() as u32 + changes.new_terms.len() as u32;
                    *changes.new_terms.entry(term.to_string()).or_insert(next)
                });
                changes
                    .postings
                    .entry(id)
                    .or_default()
                    .push((doc as u32, n));
            }
        }
        Bm25::of(base, Some(changes))
    }

    /// The base's sections, to keep in a cache file.
    pub fn sections(&self) -> [Cow<'_, [u8]>; BM25_SECTIONS] {
        let base = &self.base;
        [
            Cow::Borrowed(base.terms.text_bytes()),
            word_bytes(base.terms.ends()),
            word_bytes(&base.posting_starts),
            word_bytes(&base.posting_docs),
            word_bytes(&base.posting_tfs),
            word_bytes(&base.doc_len),
            word_bytes(&base.doc_term_starts),
            word_bytes(&base.doc_terms),
        ]
    }

    /// The base held by sections `first..` of a cache file, read where it lies; none when
    /// its arrays do not fit together.
    pub fn load(sections: &Sections, first: usize) -> Option<Bm25> {
        let words = |at: usize| sections.words(first + at);
        let base = Bm25Base {
            terms: Vocabulary::checked(sections.text(first)?, words(1)?)?,
            posting_starts: words(2)?,
            posting_docs: words(3)?,
            posting_tfs: words(4)?,
            doc_len: words(5)?,
            doc_term_starts: words(6)?,
            doc_terms: words(7)?,
        };
        let fits = base.posting_starts.len() == base.terms.len() + 1
            && base.posting_starts.last() == Some(&(base.posting_docs.len() as u32))
            && base.posting_tfs.len() == base.posting_docs.len()
            && base.doc_term_starts.len() == base.doc_len.len() + 1
            && base.doc_term_starts.last() == Some(&(base.doc_terms.len() as u32));
        fits.then(|| Bm25::of(base, None))
    }

    /// How many documents the index holds.
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// Every document's score for `query`.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.docs];
        let mean_len = self.total_len as f64 / (self.docs as f64).max(1.0);
        let doc_len = |doc: usize| match &self.changes {
            None => self.base.doc_len.get(doc).copied(),
            Some(changes) => changes.doc_len.get(doc).copied(),
        };
        for term in terms(query) {
            let base_id = self.base.terms.get(term);
            let (df, added) = match &self.changes {
                None => (base_id.map_or(0, |id| self.base.df(id)), None),
                Some(changes) => {
                    let id = base_id.or_else(|| changes.new_terms.get(term).copied());
                    let df = id.map_or(0, |id| changes.df(&self.base, id));
                    (df, id.and_then(|id| changes.postings.get(&id)))
                }
            };
            if df == 0 {
                continue;
            }
            let idf = match raw_idf(self.docs, df) {
                idf if idf < 0.0 => self.floor_idf,
                idf => idf,
            };
            let kept = base_id.into_iter().flat_map(|id| self.base.postings(id));
            let kept = kept.filter_map(|(doc, tf)| match &self.changes {
                None => Some((doc, tf)),
                Some(changes) => Some((changes.kept.get(doc as usize).copied()??, tf)),
            });
            for (doc, tf) in kept.chain(added.into_iter().flatten().copied()) {
                // A document past the last is one of a cache that does not hold together.
                let (Some(len), Some(score)) =
                    (doc_len(doc as usize), scores.get_mut(doc as usize))
                else {
                    continue;
                };
                let tf = f64::from(tf);
                let norm = K1 * (1.0 - B + B * f64::from(len) / mean_len.max(1.0));
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores
    }
}

impl Bm25Changes {
    /// How many of today's documents hold term `id`.
    fn df(&self, base: &Bm25Base, id: u32) -> usize {
        let gone = self.gone.get(&id).copied().unwrap_or(0) as usize;
        let added = self.postings.get(&id).map_or(0, Vec::len);
        base.df(id).saturating_sub(gone) + added
    }
}

/// RLPG's hole window: two lines before the hole line, the hole line up to the hole, and two
/// lines after it.
pub fn hole_window(index: &RepoIndex, hole: &Hole) -> String {
    HoleWindow::of(index, hole).text()
}

/// What the baselines share for one repository: BM25 over its files.
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
            &*f.text
        });
        let files = Bm25::new(texts);
        progress(total, total);
        Retrieval { files }
    }

    /// For `index`'s files, from the files it was built from: only what `changes` says is new
    /// or changed is read (see [`Bm25::changed`]).
    pub fn changed(self, changes: &FileChanges, index: &RepoIndex) -> Retrieval {
        let added = (changes.derived_again.iter())
            .map(|&id| (id as usize, &*index.files[id as usize].text));
        Retrieval {
            files: self.files.changed(&changes.kept, index.files.len(), added),
        }
    }

    /// BM25's base, as the sections of a cache file.
    pub fn sections(&self) -> [Cow<'_, [u8]>; BM25_SECTIONS] {
        self.files.sections()
    }

    /// The base held by sections `first..` of a cache file, read where it lies.
    pub fn load(sections: &Sections, first: usize) -> Option<Retrieval> {
        Some(Retrieval {
            files: Bm25::load(sections, first)?,
        })
    }

    /// How many files it answers for.
    pub fn files(&self) -> usize {
        self.files.docs()
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
    use crate::repo::mapped::Opened;

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
        let added = [(1, after[1]), (3, after[3]), (5, after[5])];
        // The base as built, and as read in place from a cache file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bm25.bin");
        let format = crate::repo::mapped::format_id("bm25 test", 1);
        let built = Bm25::new(before);
        let sections = built.sections();
        let sections: Vec<&[u8]> = sections.iter().map(|s| &s[..]).collect();
        crate::repo::mapped::write_sections(&path, &format, &[0; 32], &sections).unwrap();
        let Opened::Found(file) = Sections::open(&path, &format) else {
            panic!("written");
        };
        let mapped = Bm25::load(&file, 0).unwrap();
        assert!(matches!(mapped.base.posting_docs, Words::Mapped { .. }));
        let fresh = Bm25::new(after);
        let bits = |scores: Vec<f64>| scores.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        for base in [built, mapped] {
            let updated = base.changed(&kept, after.len(), added);
            assert_eq!(updated.floor_idf.to_bits(), fresh.floor_idf.to_bits());
            for query in [
                "order",
                "customer order tax",
                "rate words new",
                "email",
                "order order id",
                "brand new",
            ] {
                assert_eq!(
                    bits(updated.scores(query)),
                    bits(fresh.scores(query)),
                    "{query}"
                );
            }
        }
    }
}
