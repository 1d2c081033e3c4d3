//! What retrieval searches in an open repository (BM25 and RepoCoder's windows), built on
//! first use and cached beside the repository index as a base and a segment: a later open
//! updates the base file by file, and an edit writes only the segment.

use std::sync::{Arc, OnceLock};

use crate::context::retrieval::Retrieval;
use crate::context::windows::{TokenSets, WindowIndex};
use crate::repo::{Cached, FileChanges, FileTable, Layers, RepoIndex, base_outgrown};

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
/// [`SearchIndex::build`] builds changes (BM25's terms, the window shape, the tokenizer), or
/// what the cache keeps of it.
const SEARCH_CACHE_VERSION: u32 = 3;

impl SearchIndex {
    /// The search indexes of `index`, from the cache beside the repository index (tokenizing
    /// every window with p50k_base takes seconds on a large repository). The cache is a base,
    /// the indexes of some earlier files, and a segment beside it: the Codex tokens of the
    /// windows the base does not hold. Opening it updates the base for the files that changed,
    /// were added or removed since it was written, tokenizing only windows of text neither
    /// holds; an edit then writes only the segment, and the base is written afresh once the
    /// changed files pass a share of the repository ([`base_outgrown`]). A cache that cannot
    /// be trusted is rebuilt, with one line in the log.
    /// `progress` hears how far the work that takes seconds has come: BM25's files and the
    /// windows tokenized (none where the cache is current).
    pub fn open(index: &RepoIndex, progress: &(dyn Fn(SearchProgress) + Sync)) -> SearchIndex {
        let Some(cache) = index.derived_cache("search", SEARCH_CACHE_VERSION) else {
            return SearchIndex::build_reporting(index, progress);
        };
        let (layers, current) = match cache.load_layers::<SearchIndex, TokenSets>() {
            Cached::Current(layers) => (layers, true),
            Cached::Stale(layers) => (layers, false),
            Cached::Missing => {
                let search = SearchIndex::build_reporting(index, progress);
                cache.store(&search);
                return search;
            }
            Cached::Unusable(why) => {
                tracing::warn!("{why}");
                let search = SearchIndex::build_reporting(index, progress);
                cache.store(&search);
                return search;
            }
        };
        let Layers {
            base: mut search,
            segment,
            stamp,
        } = layers;
        let changes = FileChanges::between(&search.built_from, &index.files);
        let added = search.update(&changes, index, &segment.unwrap_or_default(), progress);
        if !current {
            let (delta, stale) = (changes.derived_again.len(), changes.dropped());
            if base_outgrown(delta, stale, index.files.len()) {
                cache.store(&search);
            } else {
                cache.store_segment(stamp, &added);
            }
        }
        search
    }

    /// The search indexes of `index`, built afresh (by the caller alone where it is a thread
    /// of the CPU pool: see [`WindowIndex::new`]).
    pub fn build(index: &RepoIndex) -> SearchIndex {
        SearchIndex::build_reporting(index, &|_| ())
    }

    /// [`SearchIndex::build`], telling `progress` how far it has come.
    fn build_reporting(
        index: &RepoIndex,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> SearchIndex {
        SearchIndex {
            built_from: FileTable::of(&index.files),
            retrieval: Retrieval::new_with_progress(index, &SearchStage::Files.reporting(progress)),
            windows: WindowIndex::new_with_progress(
                index,
                &SearchStage::Windows.reporting(progress),
            ),
        }
    }

    /// Brought up to `index`'s files from those they were built from by `changes`: only what
    /// changed, was added or removed is read and indexed again, and only windows of text
    /// neither the indexes nor `known` hold are tokenized. Returns the tokens of the windows
    /// of text the indexes did not hold.
    fn update(
        &mut self,
        changes: &FileChanges,
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> TokenSets {
        if changes.is_empty() {
            return TokenSets::default();
        }
        self.retrieval.update(changes, index);
        let windows = SearchStage::Windows.reporting(progress);
        let added = self.windows.update(changes, index, known, &windows);
        self.built_from = FileTable::of(&index.files);
        added
    }
}

/// How far building the search indexes has come, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchProgress {
    pub stage: SearchStage,
    /// Files or windows done so far, of `total`.
    pub done: usize,
    pub total: usize,
}

/// The parts of building the search indexes that take seconds on a large repository, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchStage {
    /// BM25's terms of every file.
    Files,
    /// RepoCoder's windows of new text, each tokenized with p50k_base.
    Windows,
}

impl SearchStage {
    /// `progress` told of this stage's counts as (done, total).
    fn reporting(
        self,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> impl Fn(usize, usize) + Sync + '_ {
        move |done, total| {
            progress(SearchProgress {
                stage: self,
                done,
                total,
            })
        }
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
    use std::path::Path;

    impl SearchIndex {
        /// Brought up to `index`'s files, tokenizing every window of new text.
        fn update_to(&mut self, index: &RepoIndex) {
            let changes = FileChanges::between(&self.built_from, &index.files);
            self.update(&changes, index, &TokenSets::default(), &|_| ());
        }
    }

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
        updated.update_to(&after);
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
        updated.update_to(&before);
        let fresh = SearchIndex::build(&before);
        for hole in sample_holes(&before, Some(20), 4, HoleColumn::TrimmedMiddle) {
            assert_eq!(
                answers(&updated, &before, &hole),
                answers(&fresh, &before, &hole)
            );
        }
    }

    /// `sources` written out as the only files under `root`.
    fn write_repo(root: &Path, sources: &[(String, String)]) {
        if root.exists() {
            std::fs::remove_dir_all(root).unwrap();
        }
        for (path, text) in sources {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// The one file in cache directory `dir` whose name ends with `suffix`, if there is one.
    fn cache_path(dir: &Path, suffix: &str) -> Option<std::path::PathBuf> {
        let entries = std::fs::read_dir(dir.join("index")).unwrap();
        let mut found = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix));
        let path = found.next()?;
        assert!(found.next().is_none(), "one {suffix}");
        Some(path)
    }

    /// The bytes of [`cache_path`]'s file, if there is one.
    fn cache_file(dir: &Path, suffix: &str) -> Option<Vec<u8>> {
        cache_path(dir, suffix).map(|path| std::fs::read(path).unwrap())
    }

    #[test]
    fn indexes_kept_as_a_base_and_a_segment_answer_as_ones_built_afresh() {
        let sources = java_sample();
        let scratch = tempfile::tempdir().unwrap();
        let (root, cache) = (scratch.path().join("repo"), scratch.path().join("cache"));
        // Each open writes the repository's files as `sources` says, opens its index and the
        // search indexes from the cache, and checks they answer as ones built afresh.
        let open = |sources: &[(String, String)]| {
            write_repo(&root, sources);
            let index = RepoIndex::open(&root, Some(&cache)).unwrap();
            let (opened, fresh) = (
                SearchIndex::open(&index, &|_| ()),
                SearchIndex::build(&index),
            );
            assert_eq!(opened.windows.len(), fresh.windows.len());
            for hole in sample_holes(&index, Some(12), 5, HoleColumn::TrimmedMiddle) {
                let at = format!("{}:{}", index.files[hole.file].path, hole.line + 1);
                let (got, want) = (
                    answers(&opened, &index, &hole),
                    answers(&fresh, &index, &hole),
                );
                assert_eq!(got, want, "{at}");
            }
        };
        let (base, segment) = (".search.bin", ".search.delta");
        open(&sources);
        let first_base = cache_file(&cache, base).expect("the base is written");
        assert!(cache_file(&cache, segment).is_none());

        // An edit writes the segment alone; opened again, base and segment are current.
        let after = edited(&sources);
        open(&after);
        assert!(
            cache_file(&cache, base).unwrap() == first_base,
            "the base is kept"
        );
        let first_segment = cache_file(&cache, segment).expect("an edit writes a segment");
        open(&after);
        assert!(
            cache_file(&cache, segment).unwrap() == first_segment,
            "nothing to write"
        );

        // A torn segment is not trusted: the base is updated again and the segment rewritten.
        let torn = cache_path(&cache, segment).unwrap();
        std::fs::write(&torn, &first_segment[..first_segment.len() / 2]).unwrap();
        open(&after);
        assert!(
            cache_file(&cache, segment).unwrap() == first_segment,
            "written again"
        );

        // Back as it was, then more files changed than the segment keeps: the base is written
        // afresh with them and the segment goes; a later edit writes a segment over it.
        open(&sources);
        let mut many = sources.clone();
        let (dir, _) = sources[0].0.rsplit_once('/').unwrap();
        for n in 0..40 {
            let text = format!(
                "class Many{n} {{\n    int total(int count) {{\n        return count * {n};\n    }}\n}}\n"
            );
            many.push((format!("{dir}/Many{n}.java"), text));
        }
        open(&many);
        let compacted = cache_file(&cache, base).unwrap();
        assert!(compacted != first_base, "the base is written afresh");
        assert!(cache_file(&cache, segment).is_none(), "the segment goes");
        let mut edited_many = many.clone();
        edited_many[1].1.push_str("// edited\n");
        open(&edited_many);
        assert!(cache_file(&cache, base).unwrap() == compacted);
        assert!(cache_file(&cache, segment).is_some());
    }
}
