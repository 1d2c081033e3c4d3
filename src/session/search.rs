//! What retrieval searches in an open repository (BM25 and RepoCoder's windows), built on
//! first use and cached beside the repository index.

use std::sync::{Arc, OnceLock};

use crate::context::retrieval::Retrieval;
use crate::context::windows::WindowIndex;
use crate::repo::RepoIndex;

/// What retrieval searches in the open repository: built on first use (a proposal or the
/// default context needs none of it), then kept.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SearchIndex {
    pub retrieval: Retrieval,
    pub windows: WindowIndex,
}

/// The search indexes' format in their cache beside the repository index: bumped whenever what
/// [`SearchIndex::build`] builds changes (BM25's terms, the window shape, the tokenizer).
const SEARCH_CACHE_VERSION: u32 = 1;

impl SearchIndex {
    /// The search indexes of `index`, from the cache beside the repository index while every
    /// file is as it was (tokenizing every window with p50k_base takes seconds on a large
    /// repository); built and cached otherwise.
    pub fn open(index: &RepoIndex) -> SearchIndex {
        let cache = index.derived_cache("search", SEARCH_CACHE_VERSION);
        if let Some(cached) = cache.as_ref().and_then(|c| c.load()) {
            return cached;
        }
        let built = SearchIndex::build(index);
        if let Some(cache) = cache {
            cache.store(&built);
        }
        built
    }

    /// The search indexes of `index`, built afresh (by the caller alone where it is a thread
    /// of the CPU pool: see [`WindowIndex::new`]).
    pub fn build(index: &RepoIndex) -> SearchIndex {
        SearchIndex {
            retrieval: Retrieval::new(index),
            windows: WindowIndex::new(index),
        }
    }
}

/// Retrieval state shared by the sessions of one open repository, built on first use
/// (`Session::perspectives`) or while the session opens ([`super::search_built`]).
pub type SharedSearch = Arc<OnceLock<SearchIndex>>;
