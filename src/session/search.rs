//! What retrieval searches in an open repository (BM25 and RepoCoder's windows), built on
//! first use and cached beside the repository index, where a later open updates it file by
//! file.

use std::sync::{Arc, OnceLock};

use crate::context::retrieval::Retrieval;
use crate::context::windows::WindowIndex;
use crate::repo::{Cached, FileChanges, FileTable, RepoIndex};

/// What retrieval searches in the open repository: built on first use (a proposal or the
/// default context needs none of it), then kept.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SearchIndex {
    /// The files both indexes were built from, in the order of the index they were built
    /// for: what a later open compares its files with.
    built_from: FileTable,
    pub retrieval: Retrieval,
    pub windows: WindowIndex,
}

/// The search indexes' format in their cache beside the repository index: bumped whenever what
/// [`SearchIndex::build`] builds changes (BM25's terms, the window shape, the tokenizer).
const SEARCH_CACHE_VERSION: u32 = 2;

impl SearchIndex {
    /// The search indexes of `index`, from the cache beside the repository index (tokenizing
    /// every window with p50k_base takes seconds on a large repository): as they are while
    /// every file is as it was, updated for the files that changed, were added or removed
    /// otherwise, and kept for the next open. A cache that cannot be trusted is rebuilt, with
    /// one line in the log.
    pub fn open(index: &RepoIndex) -> SearchIndex {
        let Some(cache) = index.derived_cache("search", SEARCH_CACHE_VERSION) else {
            return SearchIndex::build(index);
        };
        let search = match cache.load::<SearchIndex>() {
            Cached::Current(search) => return search,
            Cached::Stale(mut search) => {
                search.update(index);
                search
            }
            Cached::Missing => SearchIndex::build(index),
            Cached::Unusable(why) => {
                tracing::warn!("{why}");
                SearchIndex::build(index)
            }
        };
        cache.store(&search);
        search
    }

    /// The search indexes of `index`, built afresh (by the caller alone where it is a thread
    /// of the CPU pool: see [`WindowIndex::new`]).
    pub fn build(index: &RepoIndex) -> SearchIndex {
        SearchIndex {
            built_from: FileTable::of(&index.files),
            retrieval: Retrieval::new(index),
            windows: WindowIndex::new(index),
        }
    }

    /// Brought up to `index`'s files from those they were built from: only what changed,
    /// was added or removed is read and indexed again.
    pub fn update(&mut self, index: &RepoIndex) {
        let changes = FileChanges::between(&self.built_from, &index.files);
        self.retrieval.update(&changes, index);
        self.windows.update(&changes, index);
        self.built_from = FileTable::of(&index.files);
    }
}

/// Retrieval state shared by the sessions of one open repository, built on first use
/// (`Session::perspectives`; the UI asks for it once a hole's ranked proposals show).
pub type SharedSearch = Arc<OnceLock<SearchIndex>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::HoleRequest;
    use crate::context::fidelity::Fidelity;
    use crate::context::perspectives::{around_hole, repocoder_query};
    use crate::context::windows::Similarity;
    use crate::hole::{Hole, HoleColumn, sample_holes};
    use crate::repo::testing::{edited, in_memory as index, java_sample};
    use crate::token::TokenizerKind;

    /// What each index answers for `hole`: BM25's files, and every window search's hits (their
    /// places and exact scores) under both profiles, with the best hit's term Jaccard.
    fn answers(search: &SearchIndex, index: &RepoIndex, hole: &Hole) -> Vec<String> {
        let request = HoleRequest {
            index,
            hole,
            tokenizer: TokenizerKind::Code.tokenizer(),
            allocation: 4000,
            seed: 9,
            fidelity: Fidelity::Paper,
        };
        let mut answers = vec![format!("{:?}", search.retrieval.file_bm25(&request).pieces)];
        let queries = [
            (repocoder_query(index, hole), Similarity::Jaccard),
            (around_hole(index, hole), Similarity::TfIdfCosine),
        ];
        for (query, similarity) in &queries {
            for fidelity in [Fidelity::Paper, Fidelity::Code] {
                let hits = search
                    .windows
                    .search_as(index, hole, query, *similarity, fidelity);
                let described = hits.iter().map(|hit| {
                    let places = search.windows.places(hit.window);
                    let jaccard = search.windows.jaccard_with(hit.window, query);
                    (places.to_vec(), hit.score.to_bits(), jaccard.to_bits())
                });
                answers.push(format!("{:?}", described.collect::<Vec<_>>()));
            }
        }
        answers
    }

    #[test]
    fn indexes_updated_file_by_file_answer_as_ones_built_afresh() {
        let sources = java_sample();
        let (before, after) = (index(&sources), index(&edited(&sources)));
        let mut updated = SearchIndex::build(&before);
        updated.update(&after);
        let fresh = SearchIndex::build(&after);
        assert_eq!(updated.built_from, fresh.built_from);
        assert_eq!(updated.windows.len(), fresh.windows.len());
        let holes = sample_holes(&after, Some(60), 3, HoleColumn::TrimmedMiddle);
        assert!(holes.len() >= 30, "{} holes", holes.len());
        for hole in &holes {
            let (got, want) = (
                answers(&updated, &after, hole),
                answers(&fresh, &after, hole),
            );
            for (got, want) in got.iter().zip(&want) {
                assert_eq!(
                    got,
                    want,
                    "{}:{}",
                    after.files[hole.file].path,
                    hole.line + 1
                );
            }
        }
        // And back: the edits undone, the index answers as it did.
        updated.update(&before);
        let fresh = SearchIndex::build(&before);
        for hole in sample_holes(&before, Some(20), 4, HoleColumn::TrimmedMiddle) {
            assert_eq!(
                answers(&updated, &before, &hole),
                answers(&fresh, &before, &hole)
            );
        }
    }
}
