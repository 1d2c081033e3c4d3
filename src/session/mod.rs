//! One hole session: an open repository with its search indexes, the backend that completes,
//! the rankers and the budget. For a hole it builds every candidate of the catalogue, ranks
//! them, composes their prompts, fits them to the backend and records what a person picked.
//! `keyhole proposals`, `prompt` and `complete`, the UI's driver and eval's runner all build
//! candidates here, so they give the same answer for the same hole.
//!
//! A session is opened from resolved [`Settings`] ([`Session::open`], [`Session::builder`]).
//! The parts, in the order a hole flows through them: `search` (retrieval's indexes),
//! `rows` (a hole's candidates as ranked rows), `fit` (prompts fitted to the backend's own
//! token count), `learning` (rankers, bandit and picks) and `recorded` (the prompt a plugin
//! sent for the hole, beside keyhole's).

mod fit;
mod learning;
mod open;
mod recorded;
mod rows;
mod search;
mod settings;
pub mod tuned;

use rayon::prelude::*;
use std::sync::Arc;

pub use fit::{FitError, FitTarget, counting_words, counts_exactly, fit};
pub use learning::{BanditLesson, Learning, PickRecorded};
pub use open::{OpenStage, Opening, SessionBuilder, SessionError};
pub use recorded::ComposingRepo;
pub use rows::{
    Analysis, Availability, BuiltContext, CandidateRow, HoleCandidates, Later, Procc, Searched,
    Waiting, apply_ranking, fill_rows, proposal_why_not,
};
pub use search::{SearchIndex, SearchProgress, SearchStage, SharedSearch};
pub use settings::{Choices, Settings, SettingsError, read_backends_leniently};

use learning::procc_context;
use rows::{proposal_row, retrieved_row};

use crate::candidate::CandidateId;
use crate::compose::{Composer, DefaultContext};
use crate::context::HoleRequest;
use crate::context::fidelity::Fidelity;
use crate::context::perspectives::{self, Perspectives};
use crate::context::proposals::{self, ProposalContext};
use crate::context::typed_server;
use crate::hole::Hole;
use crate::model::Backend;
use crate::rank::bandit::{self, LinUcb};
use crate::rank::{RankInput, Ranked, RankerKind};
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

/// A repository opened for holes, with everything a hole's candidates are built from. Cheap to
/// clone: the parts are shared. Its parts are read through its methods: they belong together
/// (the search indexes are the index's, the tokenizer the backend's), so they are set only
/// where a session is opened.
#[derive(Clone)]
pub struct Session {
    pub(crate) index: Arc<RepoIndex>,
    /// Retrieval state, built when a retrieved candidate first needs it.
    pub(crate) search: SharedSearch,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) learning: Learning,
    /// Budgets count in this tokenizer (the backend's where keyhole has it).
    pub(crate) tokenizer: &'static dyn Tokenizer,
    pub(crate) budget: usize,
    /// RepoCoder's iterations (candidate 67 is the last).
    pub(crate) iterations: u16,
    /// Seed of the random-context baseline.
    pub(crate) seed: u64,
    /// Whose rules build the candidates where a paper and its authors' code disagree.
    pub(crate) fidelity: Fidelity,
    /// The ranker the session was opened with: [`Session::analyse`] and
    /// [`Session::candidates`] order by it.
    pub(crate) ranker: RankerKind,
}

impl Session {
    /// The open repository's index.
    pub fn index(&self) -> &Arc<RepoIndex> {
        &self.index
    }

    /// The backend that completes prompts.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The rankers, the bandit and the picks.
    pub fn learning(&self) -> &Learning {
        &self.learning
    }

    /// The tokenizer budgets count in (the backend's where keyhole has it).
    pub fn tokenizer(&self) -> &'static dyn Tokenizer {
        self.tokenizer
    }

    /// Tokens a prompt may take.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The retrieval perspectives over the open repository.
    pub(crate) fn perspectives(&self) -> Perspectives<'_> {
        let search = self.search_index();
        Perspectives {
            index: &self.index,
            retrieval: &search.retrieval,
            windows: &search.windows,
            tokenizer: self.tokenizer,
            budget: self.budget,
            seed: self.seed,
            fidelity: self.fidelity,
        }
    }

    /// The search indexes, built now if nobody has built them yet; holes' jobs on the CPU pool
    /// wait for them, so they are built by the pool's rule ([`crate::pool::get_or_build`]).
    fn search_index(&self) -> &SearchIndex {
        self.search_index_reporting(&|_| ())
    }

    /// [`Session::search_index`], telling `progress` how far their building has come where it
    /// builds them (a front end shows it: seconds on a large repository the first time).
    pub(crate) fn search_index_reporting(
        &self,
        progress: &(dyn Fn(SearchProgress) + Sync),
    ) -> &SearchIndex {
        crate::pool::get_or_build(&self.search, || SearchIndex::open(&self.index, progress))
    }

    /// Builds now what every hole of the session shares and would otherwise build on first
    /// use: eval and tune call it before they start holes on the CPU pool, so that the first
    /// holes do not all wait for one build.
    pub fn build_shared(&self) {
        self.search_index();
        self.learning.load_now();
    }

    /// The composer of `hole`'s prompts within the budget.
    pub fn composer(&self, hole: &Hole) -> Composer<'static> {
        Composer::new(
            &self.index,
            hole,
            self.tokenizer,
            self.budget,
            self.fidelity.default_reading(),
        )
    }

    /// RLPG's 62 proposals for `hole`, each within its share of the budget.
    pub fn proposals(&self, hole: &Hole) -> Vec<ProposalContext> {
        proposals::build_for_budget(
            &self.index,
            hole,
            self.tokenizer,
            self.budget,
            self.fidelity,
        )
    }

    /// Every candidate that needs no backend, with placeholders for those that do, in the
    /// order of the session's ranker.
    pub fn analyse(&self, hole: &Hole) -> Analysis {
        self.analyse_with(hole, self.ranker)
    }

    /// [`Session::analyse`] in the order `ranker` gives.
    pub fn analyse_with(&self, hole: &Hole, ranker: RankerKind) -> Analysis {
        let mut analysis = self.analyse_before_search(hole, ranker);
        let searched = self.searched(hole);
        analysis.fill(searched.candidates);
        analysis.retrieved.extend(searched.built);
        if analysis
            .get(CandidateId::TYPED_TYPES)
            .is_some_and(CandidateRow::building)
        {
            let typed = perspectives::typed_candidates(&self.index, hole);
            analysis.fill(self.rows(hole, &typed));
            analysis.retrieved.extend(typed);
        }
        analysis.retrieved.sort_by_key(|c| c.id);
        analysis
    }

    /// RLPG's proposals and the default context in `ranker`'s order, with the retrieved
    /// candidates still building: they need the search indexes (built or brought up to date
    /// first), a language server or the backend, which a person should not wait for to see the
    /// ranked proposals. The typed holes come with them where no language server would be
    /// asked (the syntax tree or a kept answer is as quick as a proposal). The UI fills the
    /// rest from [`Session::searched`], [`Session::typed_rows`] and
    /// [`Session::retrieve_later`] as each is ready.
    pub fn analyse_before_search(&self, hole: &Hole, ranker: RankerKind) -> Analysis {
        // Both read the hole's file and the index only; the UI waits for them.
        let (built, typed) = rayon::join(
            || self.proposals(hole),
            || match typed_server::would_ask_a_server(&self.index, hole) {
                true => Vec::new(),
                false => perspectives::typed_candidates(&self.index, hole),
            },
        );
        let composer = self.composer(hole);
        let mut candidates: Vec<CandidateRow> = built
            .par_iter()
            .map(|p| proposal_row(p, &composer))
            .collect();
        // The default context alone has no proposal.
        let default = composer.compose(&DefaultContext);
        candidates.push(CandidateRow::new(
            CandidateId::DEFAULT,
            Availability::Applicable,
            None,
            default.clone(),
        ));
        candidates.extend(
            CandidateId::retrieved()
                .map(|id| CandidateRow::new(id, Availability::Building, None, default.clone())),
        );
        fill_rows(&mut candidates, self.rows(hole, &typed));
        let (ranking, warning) = match self.rank(hole, &built, ranker) {
            Ok(ranking) => (ranking, None),
            Err(why) => (Vec::new(), Some(why.to_string())),
        };
        apply_ranking(&mut candidates, &ranking);
        Analysis {
            candidates,
            proposals: built,
            retrieved: typed,
            ranking,
            warning,
        }
    }

    /// The retrieved candidates that search the repository (63–66, 68), with their rows; the
    /// search indexes are built (or brought up to date from their cache) first where nobody
    /// has yet.
    pub(crate) fn searched(&self, hole: &Hole) -> Searched {
        let built = self.perspectives().searched(hole);
        Searched {
            candidates: self.rows(hole, &built),
            built,
        }
    }

    /// The typed-hole rows (71, 72) of `hole`, from its language server where one answers.
    pub fn typed_rows(&self, hole: &Hole) -> Vec<CandidateRow> {
        self.rows(hole, &perspectives::typed_candidates(&self.index, hole))
    }

    /// Retrieved candidates `built` for `hole` as rows.
    fn rows(&self, hole: &Hole, built: &[perspectives::RetrievedContext]) -> Vec<CandidateRow> {
        let composer = self.composer(hole);
        built.iter().map(|c| retrieved_row(c, &composer)).collect()
    }

    /// `ranker`'s order of RLPG's applicable candidates for `hole` (its 62 `proposals` and the
    /// default context), best first, or why it cannot rank.
    pub fn rank(
        &self,
        hole: &Hole,
        proposals: &[ProposalContext],
        ranker: RankerKind,
    ) -> Result<Vec<Ranked>, crate::rank::classifier::ModelError> {
        let input = RankInput::new(&self.index, hole, proposals);
        self.learning.rank(ranker, &input)
    }

    /// The retrieved candidates that need the backend, and ProCC's pick once all are built,
    /// given the `immediate` ones (RepoCoder's second iteration starts from the first). A
    /// backend failure makes them not applicable, saying why.
    pub async fn retrieve_later(
        &self,
        hole: &Hole,
        immediate: &[perspectives::RetrievedContext],
    ) -> Later {
        let composer = self.composer(hole);
        let built = perspectives::build_later(
            &self.perspectives(),
            hole,
            &composer,
            self.backend.as_ref(),
            usize::from(self.iterations),
            immediate,
        )
        .await;
        let built = match built {
            Ok(later) => later,
            Err(e) => {
                tracing::warn!(error = %e, "retrieved candidates");
                let why = format!("the backend failed: {e}");
                let failed = |id| perspectives::RetrievedContext {
                    id,
                    why_not: Some(why.clone()),
                    ..Default::default()
                };
                CandidateId::NEED_BACKEND.map(failed).to_vec()
            }
        };
        let procc = self.procc_choice(immediate.iter().chain(&built));
        let candidates = built.iter().map(|c| retrieved_row(c, &composer)).collect();
        Later {
            candidates,
            built,
            procc,
        }
    }

    /// One candidate's context, built alone: no ranking, and the backend is asked only for a
    /// candidate that needs it.
    pub async fn context(&self, hole: &Hole, id: CandidateId) -> BuiltContext {
        if let Some(spec) = id.proposal() {
            let request = HoleRequest::new(
                &self.index,
                hole,
                self.tokenizer,
                (self.budget, spec.share),
                self.fidelity,
                self.seed,
            );
            return BuiltContext::Proposal(proposals::build(spec, &request));
        }
        if id == CandidateId::DEFAULT {
            return BuiltContext::Default;
        }
        let immediate = self.perspectives().immediate(hole);
        let built = if id.needs_backend() {
            let later = self.retrieve_later(hole, &immediate).await;
            later.built.into_iter().find(|c| c.id == id)
        } else {
            immediate.into_iter().find(|c| c.id == id)
        };
        BuiltContext::Retrieved(built.expect("every retrieved candidate is built"))
    }

    /// One candidate, built alone (see [`Session::context`]).
    pub async fn candidate(&self, hole: &Hole, id: CandidateId) -> CandidateRow {
        self.context(hole, id).await.row(&self.composer(hole))
    }

    /// Both stages: every candidate of the catalogue for `hole`, ranked by the session's
    /// ranker, the backend asked for what the later ones need.
    pub async fn candidates(&self, hole: &Hole) -> HoleCandidates {
        let mut analysis = self.analyse(hole);
        let later = self.retrieve_later(hole, &analysis.retrieved).await;
        analysis.fill(later.candidates);
        let mut retrieved = analysis.retrieved;
        retrieved.extend(later.built);
        retrieved.sort_by_key(|c| c.id);
        HoleCandidates {
            candidates: analysis.candidates,
            proposals: analysis.proposals,
            retrieved,
            ranking: analysis.ranking,
            procc: later.procc,
            warning: analysis.warning,
        }
    }

    /// ProCC's pick by the bandit kept in the data directory; a fresh bandit (which picks the
    /// first applicable perspective and learns from there) where there is none.
    pub fn procc_choice<'c>(
        &self,
        built: impl IntoIterator<Item = &'c perspectives::RetrievedContext>,
    ) -> Procc {
        let (context, available) = procc_context(built);
        let (bandit, warning) = self
            .learning
            .dirs()
            .data_file(bandit::FILE)
            .map_or_else(|| (LinUcb::default(), None), |path| LinUcb::load(&path));
        if let Some(warning) = warning {
            tracing::warn!(%warning, "ProCC bandit");
        }
        Procc {
            context,
            available,
            pick: bandit
                .choose(&context, available)
                .map(|arm| CandidateId::PROCC[arm]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirs::Dirs;

    /// The bundled classifier without its RLPG-R head: its safetensors with the head's
    /// tensors left out.
    fn without_rlpg_r() -> crate::rank::classifier::Classifier {
        let bundled = include_bytes!("../rank/classifier/bundled.safetensors");
        let size = u64::from_le_bytes(bundled[..8].try_into().unwrap()) as usize;
        let (header, data) = (&bundled[8..8 + size], &bundled[8 + size..]);
        let mut header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(header).unwrap();
        header.retain(|name, _| !name.starts_with("r."));
        let mut kept: Vec<u8> = Vec::new();
        for tensor in header.values_mut() {
            let Some(offsets) = tensor.get_mut("data_offsets") else {
                continue; // __metadata__
            };
            let at = |i: usize| offsets[i].as_u64().unwrap() as usize;
            let (start, end) = (at(0), at(1));
            *offsets = serde_json::json!([kept.len(), kept.len() + end - start]);
            kept.extend(&data[start..end]);
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header);
        bytes.extend(kept);
        let path = std::path::Path::new("h-only.safetensors");
        crate::rank::classifier::Classifier::from_file_bytes(&bytes, path).unwrap()
    }

    #[test]
    fn the_best_candidate_is_the_rankers_first_and_none_where_it_cannot_rank() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = Dirs {
            data: Some(scratch.path().into()),
            ..Dirs::none()
        };
        let repo = crate::sample::materialize(&dirs).unwrap();
        let settings = Settings {
            ranker: RankerKind::RlpgR,
            ..Settings::default()
        };
        let learning = Learning::with_classifier(without_rlpg_r(), Dirs::none());
        let session = Session::builder(&settings)
            .learning(learning)
            .open(&repo)
            .unwrap();
        let hole = Hole::parse(&session.index, crate::sample::DEMO_HOLE).unwrap();
        let failed = session.analyse(&hole);
        assert!(failed.ranking.is_empty());
        assert!(failed.best().is_none(), "no ranking, no best candidate");
        let warning = failed.warning.as_deref().unwrap();
        assert!(warning.contains("RLPG-R"), "{warning}");
        // The same session with another ranker chosen explicitly.
        let ranked = session.analyse_with(&hole, RankerKind::RlpgH);
        let best = ranked.best().unwrap();
        assert_eq!(best.id, ranked.ranking[0].id);
        assert_eq!(best.score, Some(ranked.ranking[0].score));
        assert_eq!(
            ranked.candidates[0].id, best.id,
            "rows in the ranker's order"
        );
        assert_eq!(
            ranked.get(best.id).unwrap().prompt.text(),
            best.prompt.text()
        );
        assert!(ranked.get(CandidateId::AS_SENT).is_none());
    }

    /// Jobs of a small CPU pool, started from outside it one after another as eval starts
    /// holes, all asking for search indexes no one has built: the first builds them while the
    /// others wait in the cell, and every job ends (#36: a builder that split its work took up
    /// a waiting job while it waited for a piece, and deadlocked).
    #[test]
    fn holes_on_the_pool_that_wait_for_the_search_indexes_all_end() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = Dirs {
            data: Some(scratch.path().into()),
            ..Dirs::none()
        };
        let repo = crate::sample::materialize(&dirs).unwrap();
        let session = Session::open(&repo, &Settings::default()).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..10 {
                // Not built yet: no cache, and a fresh cell each round.
                let fresh = Session {
                    search: SharedSearch::default(),
                    ..session.clone()
                };
                // One job starts the build; the others come while it goes on, and wake idle
                // threads, which take up pieces of the build before them.
                pool.in_place_scope(|jobs| {
                    for _ in 0..40 {
                        jobs.spawn(|_| assert!(!fresh.perspectives().windows.is_empty()));
                        std::thread::sleep(std::time::Duration::from_millis(3));
                    }
                });
            }
            done.send(()).unwrap();
        });
        let waited = std::time::Duration::from_secs(300);
        assert!(
            ended.recv_timeout(waited).is_ok(),
            "jobs waiting for the search indexes were still waiting after {waited:?}"
        );
    }
}
