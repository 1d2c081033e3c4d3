//! What retrieval searches in an open repository (BM25 and RepoCoder's windows), built on
//! first use and cached beside the repository index as a base and a segment: a later open
//! updates the base file by file, and an edit writes only the segment.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::context::retrieval::{BM25_SECTIONS, Retrieval};
use crate::context::windows::{TokenSets, WINDOW_SECTIONS, WindowIndex};
use crate::repo::mapped::{Sections, format_id, write_sections};
use crate::repo::{FileChanges, FileTable, RepoIndex, base_outgrown};

/// What retrieval searches in the open repository: built on first use (a proposal or the
/// default context needs none of it), then kept.
pub struct SearchIndex {
    /// The files both indexes answer for, in the order of the index they were opened for.
    built_from: FileTable,
    pub retrieval: Retrieval,
    pub windows: WindowIndex,
}

/// The search indexes' format in their cache beside the repository index: bumped whenever what
/// [`SearchIndex::build`] builds changes (BM25's terms, the window shape, the tokenizer), or
/// what the cache keeps of it.
const SEARCH_CACHE_VERSION: u32 = 4;

/// The sections of the base's cache file: the files it was built from, BM25's, the windows'.
const SECTIONS: usize = 1 + BM25_SECTIONS + WINDOW_SECTIONS;

impl SearchIndex {
    /// The search indexes of `index`, from the cache beside the repository index (tokenizing
    /// every window with p50k_base takes seconds on a large repository). The cache is a base,
    /// the indexes of some earlier files whose arrays are read where they lie in the mapped
    /// file, and a segment beside it: the Codex tokens of the windows of text the base does not
    /// hold. The files that changed, were added or removed since the base was written are laid
    /// over it, tokenizing only windows of text neither holds; an edit then writes only the
    /// segment, and the base is written afresh once the changed files pass a share of the
    /// repository ([`base_outgrown`]). A cache that cannot be trusted is rebuilt, with one line
    /// in the log.
    /// `progress` hears how far the work that takes seconds has come: BM25's files and the
    /// windows tokenized (none where the cache is current).
    pub fn open(index: &RepoIndex, progress: &(dyn Fn(SearchProgress) + Sync)) -> SearchIndex {
        let (Some(base_path), Some(segment_path)) = (
            index.beside_cache("search.bin"),
            index.beside_cache("search.segment"),
        ) else {
            return SearchIndex::build_with(index, &TokenSets::default(), progress);
        };
        let format = format_id("search", SEARCH_CACHE_VERSION);
        let base = Sections::read(&base_path, &format, None, SearchIndex::load);
        let keep_base = |search: &SearchIndex| {
            if let Err(error) = search.store(&base_path, &format) {
                tracing::warn!(path = %base_path.display(), %error, "cannot write a derived cache");
            }
            // A segment names the base it goes with: one left behind is never read.
            let _ = std::fs::remove_file(&segment_path);
        };
        let Some(base) = base else {
            let search = SearchIndex::build_with(index, &TokenSets::default(), progress);
            keep_base(&search);
            return search;
        };
        let changes = FileChanges::between(&base.built_from, &index.files);
        if changes.is_empty() {
            return base;
        }
        let key = base.built_from.segment_key(&FileTable::of(&index.files));
        let segment_format = format_id("search segment", SEARCH_CACHE_VERSION);
        let known = Sections::read(&segment_path, &segment_format, Some(&key), TokenSets::load);
        let current = known.is_some();
        let known = known.unwrap_or_default();
        let (search, added) = base.changed(&changes, index, &known, progress);
        if base_outgrown(
            changes.derived_again.len(),
            changes.dropped(),
            index.files.len(),
        ) {
            let search = SearchIndex::build_with(index, &search.windows.token_sets(), progress);
            keep_base(&search);
            return search;
        }
        if !current {
            let sections = added.sections();
            let sections: Vec<&[u8]> = sections.iter().map(|s| &s[..]).collect();
            if let Err(error) = write_sections(&segment_path, &segment_format, &key, &sections) {
                tracing::warn!(path = %segment_path.display(), %error, "cannot write a derived cache");
            }
        }
        search
    }

    /// The search indexes of `index`, built afresh (by the caller alone where it is a thread
    /// of the CPU pool: see [`WindowIndex::new`]).
    pub fn build(index: &RepoIndex) -> SearchIndex {
        SearchIndex::build_with(index, &TokenSets::default(), &|_| ())
    }

    /// [`SearchIndex::build`], tokenizing only the windows whose tokens `known` does not hold,
    /// telling `progress` how far it has come.
    fn build_with(
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> SearchIndex {
        SearchIndex {
            built_from: FileTable::of(&index.files),
            retrieval: Retrieval::new_with_progress(index, &SearchStage::Files.reporting(progress)),
            windows: WindowIndex::build(index, known, &SearchStage::Windows.reporting(progress)),
        }
    }

    /// For `index`'s files, from those this base was built from: `changes` laid over it, only
    /// what changed or was added read and indexed, and only windows of text neither the base
    /// nor `known` holds tokenized. Returns the tokens of the windows of text the base does
    /// not hold.
    fn changed(
        self,
        changes: &FileChanges,
        index: &RepoIndex,
        known: &TokenSets,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> (SearchIndex, TokenSets) {
        let windows = SearchStage::Windows.reporting(progress);
        let (windows, added) = self.windows.changed(changes, index, known, &windows);
        let search = SearchIndex {
            built_from: FileTable::of(&index.files),
            retrieval: self.retrieval.changed(changes, index),
            windows,
        };
        (search, added)
    }

    /// Keep this index (a base, built afresh) in `path` under `format`, keyed by its files.
    fn store(&self, path: &Path, format: &[u8; 32]) -> std::io::Result<()> {
        let built_from = postcard::to_stdvec(&self.built_from).map_err(std::io::Error::other)?;
        let mut sections: Vec<Cow<'_, [u8]>> = vec![Cow::Owned(built_from)];
        sections.extend(self.retrieval.sections());
        sections.extend(self.windows.sections());
        let sections: Vec<&[u8]> = sections.iter().map(|s| &s[..]).collect();
        write_sections(path, format, &self.built_from.key(), &sections)
    }

    /// The base in a cache file's sections, read where it lies; none when they do not fit
    /// together.
    fn load(sections: &Sections) -> Option<SearchIndex> {
        if sections.len() != SECTIONS {
            return None;
        }
        let built_from: FileTable = postcard::from_bytes(sections.bytes(0)).ok()?;
        let search = SearchIndex {
            retrieval: Retrieval::load(sections, 1)?,
            windows: WindowIndex::load(sections, 1 + BM25_SECTIONS)?,
            built_from,
        };
        let fits = search.built_from.key() == *sections.key()
            && search.retrieval.files() == search.built_from.len();
        fits.then_some(search)
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
        /// For `index`'s files, this base's changes laid over it, tokenizing every window of
        /// new text.
        fn changed_to(self, index: &RepoIndex) -> SearchIndex {
            let changes = FileChanges::between(&self.built_from, &index.files);
            self.changed(&changes, index, &TokenSets::default(), &|_| ())
                .0
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

    /// Whether `got` answers as `want` (built afresh for `index`) for the holes of `index`
    /// sampled every `every` lines.
    fn answers_as(got: &SearchIndex, want: &SearchIndex, index: &RepoIndex, every: u64) {
        assert_eq!(got.built_from, want.built_from);
        assert_eq!(got.windows.len(), want.windows.len());
        let holes = sample_holes(index, Some(60), every, HoleColumn::TrimmedMiddle);
        assert!(holes.len() >= 10, "{} holes", holes.len());
        for hole in &holes {
            let at = format!("{}:{}", index.files[hole.file].path, hole.line + 1);
            for (got, want) in answers(got, index, hole)
                .iter()
                .zip(answers(want, index, hole))
            {
                assert_eq!(got, &want, "{at}");
            }
        }
    }

    #[test]
    fn indexes_with_changed_files_laid_over_them_answer_as_ones_built_afresh() {
        let sources = java_sample();
        let (before, after) = (index(&sources), index(&edited(&sources)));
        let updated = SearchIndex::build(&before).changed_to(&after);
        answers_as(&updated, &SearchIndex::build(&after), &after, 3);
        // And back: the edits undone over a base of the edited files.
        let back = SearchIndex::build(&after).changed_to(&before);
        answers_as(&back, &SearchIndex::build(&before), &before, 4);

        // One word changed: as many windows as before, so only the norms of windows holding a
        // term whose document frequency changed are summed again.
        let mut renamed = sources.clone();
        renamed[2].1 = renamed[2].1.replacen("return", "return /* renamed */", 1);
        let renamed = index(&renamed);
        let updated = SearchIndex::build(&before).changed_to(&renamed);
        let fresh = SearchIndex::build(&renamed);
        assert_eq!(
            fresh.windows.len(),
            SearchIndex::build(&before).windows.len()
        );
        answers_as(&updated, &fresh, &renamed, 3);
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
            answers_as(&opened, &fresh, &index, 5);
        };
        let (base, segment) = (".search.bin", ".search.segment");
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
