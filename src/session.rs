//! One hole session: an open repository with its search indexes, the backend that completes,
//! the rankers and the budget. For a hole it builds every candidate of the catalogue, ranks
//! them, composes their prompts, fits them to the backend and records what a person picked.
//! `keyhole proposals`, `prompt` and `complete`, the UI's driver and eval's runner all build
//! candidates here, so they give the same answer for the same hole.

use std::path::Path;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::candidate::CandidateId;
use crate::compose::{Composer, DefaultReading, Prompt, SegmentKind};
use crate::context::fidelity::Fidelity;
use crate::context::perspectives::{self, Perspectives};
use crate::context::proposals::{self, ProposalContext};
use crate::context::retrieval::Retrieval;
use crate::context::windows::WindowIndex;
use crate::dirs::Dirs;
use crate::feedback;
use crate::hole::Hole;
use crate::model::{Backend, BackendError};
use crate::rank::bandit::{self, LinUcb};
use crate::rank::classifier::Classifier;
use crate::rank::online::{self, OnlineRanker};
use crate::rank::{RankInput, Ranked, RankerKind, Rankers};
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

/// The pick log, in the data directory.
const FEEDBACK_FILE: &str = "feedback.jsonl";

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

    /// The search indexes of `index`, built afresh.
    pub fn build(index: &RepoIndex) -> SearchIndex {
        SearchIndex {
            retrieval: Retrieval::new(index),
            windows: WindowIndex::new(index),
        }
    }
}

/// Retrieval state shared by the sessions of one open repository, built on first use.
pub type SharedSearch = Arc<OnceLock<SearchIndex>>;

/// A repository opened for holes, with everything a hole's candidates are built from. Cheap to
/// clone: the parts are shared.
#[derive(Clone)]
pub struct Session {
    pub index: Arc<RepoIndex>,
    /// Retrieval state, built when a retrieved candidate first needs it.
    pub search: SharedSearch,
    pub backend: Arc<dyn Backend>,
    pub learning: Learning,
    /// Budgets count in this tokenizer (the backend's where keyhole has it).
    pub tokenizer: &'static dyn Tokenizer,
    pub budget: usize,
    /// RepoCoder's iterations (candidate 67 is the last).
    pub iterations: u16,
    /// Seed of the random-context baseline.
    pub seed: u64,
    /// Whose rules build the candidates where a paper and its authors' code disagree.
    pub fidelity: Fidelity,
}

impl Session {
    /// A session on `index` (its search indexes are built on first use); RepoCoder's default
    /// iterations and the random baseline's default seed.
    pub fn new(
        index: Arc<RepoIndex>,
        backend: Arc<dyn Backend>,
        learning: Learning,
        tokenizer: &'static dyn Tokenizer,
        budget: usize,
    ) -> Session {
        Session {
            index,
            search: Arc::default(),
            backend,
            learning,
            tokenizer,
            budget,
            iterations: perspectives::DEFAULT_ITERATIONS,
            seed: perspectives::DEFAULT_SEED,
            fidelity: Fidelity::Paper,
        }
    }

    /// The retrieval perspectives over the open repository.
    pub fn perspectives(&self) -> Perspectives<'_> {
        let search = self.search.get_or_init(|| SearchIndex::open(&self.index));
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

    /// The composer of `hole`'s prompts within the budget.
    pub fn composer(&self, hole: &Hole) -> Composer<'static> {
        Composer::new_as(
            &self.index,
            hole,
            self.tokenizer,
            self.budget,
            self.fidelity.default_reading(),
        )
    }

    /// RLPG's 62 proposals for `hole`, each within its share of the budget.
    pub fn proposals(&self, hole: &Hole) -> Vec<ProposalContext> {
        proposals::build_for_budget_as(
            &self.index,
            hole,
            self.tokenizer,
            self.budget,
            self.fidelity,
        )
    }

    /// Every candidate that needs no backend, with placeholders for those that do, in the
    /// order `ranker` gives.
    pub fn analyse(&self, hole: &Hole, ranker: RankerKind) -> Analysis {
        let built = self.proposals(hole);
        let composer = self.composer(hole);
        let retrieved = self.perspectives().immediate(hole);
        let mut candidates: Vec<Candidate> =
            built.iter().map(|p| proposal_row(p, &composer)).collect();
        // The default context alone has no proposal.
        let default = composer.compose(None);
        candidates.push(Candidate::new(
            CandidateId::DEFAULT,
            Availability::Applicable,
            None,
            default.clone(),
        ));
        candidates.extend(retrieved.iter().map(|c| retrieved_row(c, &composer)));
        candidates.extend(
            CandidateId::NEED_BACKEND
                .map(|id| Candidate::new(id, Availability::Building, None, default.clone())),
        );
        let (ranking, warning) = match self.rank(hole, &built, ranker) {
            Ok(ranking) => (ranking, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        apply_ranking(&mut candidates, &ranking);
        Analysis {
            candidates,
            proposals: built,
            retrieved,
            ranking,
            warning,
        }
    }

    /// `ranker`'s order of RLPG's applicable candidates for `hole` (its 62 `proposals` and the
    /// default context), best first, or why it cannot rank.
    pub fn rank(
        &self,
        hole: &Hole,
        proposals: &[ProposalContext],
        ranker: RankerKind,
    ) -> Result<Vec<Ranked>, String> {
        let input = RankInput::new(&self.index, hole, proposals);
        self.learning.rank(ranker, &input)
    }

    /// The retrieved candidates that need the backend, and ProCC's pick once all are built,
    /// given the `immediate` ones (RepoCoder's second iteration starts from the first). A
    /// backend failure makes them not applicable, saying why.
    pub async fn retrieve_later(
        &self,
        hole: &Hole,
        immediate: &[perspectives::Candidate],
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
                let failed = |id| perspectives::Candidate {
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
            let request = proposals::Request {
                index: &self.index,
                hole,
                tokenizer: self.tokenizer,
                allocation: crate::compose::proposal_allocation(self.budget, spec.share),
                fidelity: self.fidelity,
            };
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
    pub async fn candidate(&self, hole: &Hole, id: CandidateId) -> Candidate {
        self.context(hole, id).await.row(&self.composer(hole))
    }

    /// Both stages: every candidate of the catalogue for `hole`, ranked, the backend asked for
    /// what the later ones need.
    pub async fn candidates(&self, hole: &Hole, ranker: RankerKind) -> HoleCandidates {
        let mut analysis = self.analyse(hole, ranker);
        let later = self.retrieve_later(hole, &analysis.retrieved).await;
        for row in later.candidates {
            if let Some(slot) = analysis.candidates.iter_mut().find(|c| c.id == row.id) {
                *slot = Candidate {
                    score: slot.score,
                    ..row
                };
            }
        }
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
        built: impl IntoIterator<Item = &'c perspectives::Candidate>,
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

    /// Whether budgets counted in this session's tokenizer are the model's own counts: the
    /// backend's model counts with it, or the backend has no count of its own to check with.
    pub fn counts_exactly(&self) -> bool {
        counts_exactly(self.backend.as_ref(), self.tokenizer)
    }

    /// Compose `hole`'s prompt with `compose` within the budget as the backend's model counts
    /// tokens: see [`fit`].
    pub async fn fit(
        &self,
        hole: &Hole,
        compose: impl Fn(&Composer) -> Prompt,
    ) -> Result<Prompt, FitError> {
        let target = FitTarget {
            backend: self.backend.as_ref(),
            index: &self.index,
            tokenizer: self.tokenizer,
            budget: self.budget,
            default_reading: self.fidelity.default_reading(),
        };
        fit(&target, hole, compose).await
    }
}

/// Whether `tokenizer` counts tokens as `backend`'s model does, so prompts need no fitting.
pub fn counts_exactly(backend: &dyn Backend, tokenizer: &dyn Tokenizer) -> bool {
    backend.tokenizer() == Some(tokenizer.name())
}

/// A backend and the budget its prompts fit, in a tokenizer of keyhole's.
pub struct FitTarget<'a> {
    pub backend: &'a dyn Backend,
    pub index: &'a RepoIndex,
    pub tokenizer: &'static dyn Tokenizer,
    pub budget: usize,
    /// How the code before the hole reads line breaks (the profile's).
    pub default_reading: DefaultReading,
}

/// Compose `hole`'s prompt with `compose` within the budget as the backend's model counts
/// tokens. Where the backend counts in a tokenizer of its own (llama.cpp's `/tokenize`, a local
/// model's vocabulary), the budget keyhole composes with is scaled by the ratio of the two
/// counts until the model's count is within the budget and at most 2% under it: shrinking
/// where keyhole's tokenizer counts fewer tokens than the model's, growing where it counts
/// more. The fitted prompt records the model's count.
pub async fn fit(
    target: &FitTarget<'_>,
    hole: &Hole,
    compose: impl Fn(&Composer) -> Prompt,
) -> Result<Prompt, FitError> {
    let FitTarget {
        backend,
        index,
        tokenizer,
        budget,
        default_reading,
    } = *target;
    let composed = |local: usize| {
        compose(&Composer::new_as(
            index,
            hole,
            tokenizer,
            local,
            default_reading,
        ))
    };
    let mut prompt = composed(budget);
    if counts_exactly(backend, tokenizer) {
        return Ok(prompt);
    }
    let mut local = budget;
    let mut best: Option<Prompt> = None;
    // The largest local budget seen to fit and the smallest seen not to, with their counts.
    let mut under: Option<(usize, usize)> = None;
    let mut over: Option<(usize, usize)> = None;
    for _ in 0..FIT_ROUNDS {
        let text = prompt.text();
        let Some(count) = backend.count_tokens(&text).await else {
            return Ok(prompt);
        };
        let count = count?;
        prompt.backend_tokens = Some(count);
        if count <= budget {
            under = under.max(Some((local, count)));
            if best.as_ref().is_none_or(|b| b.backend_tokens < Some(count)) {
                best = Some(prompt);
            }
            if count * 50 >= budget * 49 {
                break;
            }
        } else if over.is_none_or(|(l, _)| local < l) {
            over = Some((local, count));
        }
        let next = match (under, over) {
            // Between the two, where the counts' line crosses the budget.
            (Some((low, low_count)), Some((high, high_count))) if high > low + 1 => {
                let step = (high - low) * (budget - low_count) / (high_count - low_count).max(1);
                (low + step).clamp(low + 1, high - 1)
            }
            // Nothing left between them.
            (Some(_), Some(_)) => break,
            // Scaled by the ratio of the counts (a little under it when shrinking).
            _ if count > budget => (local * budget / count).min(local - 1) * 99 / 100,
            _ => local * budget / count.max(1),
        };
        if next == local || next == 0 || over.is_some_and(|(high, _)| next >= high) {
            break;
        }
        local = next;
        prompt = composed(local);
        // A larger budget that adds nothing: everything the candidate has is in already.
        if count <= budget && prompt.text() == text {
            break;
        }
    }
    best.ok_or_else(|| FitError::DoesNotFit {
        backend: backend.name().to_string(),
        budget,
    })
}

/// Rounds of composing and counting [`fit`] tries; the ratio of two tokenizers' counts barely
/// moves with the budget, so two or three rounds usually land.
const FIT_ROUNDS: usize = 6;

/// A candidate's context before composition, so that it can be composed again within
/// another budget.
pub enum BuiltContext {
    Proposal(ProposalContext),
    Retrieved(perspectives::Candidate),
    /// The default context has none of its own.
    Default,
}

impl BuiltContext {
    /// Its prompt (the default context alone where it does not apply).
    pub fn compose(&self, composer: &Composer) -> Prompt {
        match self {
            BuiltContext::Proposal(p) => composer.compose(Some(p)),
            BuiltContext::Retrieved(c) => c
                .compose(composer)
                .unwrap_or_else(|| composer.compose(None)),
            BuiltContext::Default => composer.compose(None),
        }
    }

    /// The candidate's row, composed by `composer`.
    pub fn row(&self, composer: &Composer) -> Candidate {
        match self {
            BuiltContext::Proposal(p) => proposal_row(p, composer),
            BuiltContext::Retrieved(c) => retrieved_row(c, composer),
            BuiltContext::Default => Candidate::new(
                CandidateId::DEFAULT,
                Availability::Applicable,
                None,
                composer.compose(None),
            ),
        }
    }
}

/// Why a prompt could not be fitted to the backend.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{backend}: the prompt does not fit {budget} tokens of the backend's tokenizer")]
    DoesNotFit { backend: String, budget: usize },
}

/// Every candidate of a hole that needs no backend, in ranker order.
pub struct Analysis {
    /// RLPG's proposals and the default context in the ranker's order (the ones it left out
    /// last), the retrieved candidates among them, those needing the backend still building.
    pub candidates: Vec<Candidate>,
    /// What the ranker ranks: the 62 proposals in id order.
    pub proposals: Vec<ProposalContext>,
    /// The retrieved candidates built so far (RepoCoder's second iteration starts from them).
    pub retrieved: Vec<perspectives::Candidate>,
    /// The ranker's order of RLPG's applicable candidates, best first.
    pub ranking: Vec<Ranked>,
    /// Why the ranker could not rank (the candidates are then in id order).
    pub warning: Option<String>,
}

/// The candidates built once the backend wrote what they need.
pub struct Later {
    /// Rows for 67, 69 and 70.
    pub candidates: Vec<Candidate>,
    /// The same, as built.
    pub built: Vec<perspectives::Candidate>,
    pub procc: Procc,
}

/// Every candidate of a hole.
pub struct HoleCandidates {
    /// All 73, in the ranker's order (see [`apply_ranking`]).
    pub candidates: Vec<Candidate>,
    /// The 62 proposals in id order.
    pub proposals: Vec<ProposalContext>,
    /// The retrieved candidates 63–72 in id order, as built.
    pub retrieved: Vec<perspectives::Candidate>,
    pub ranking: Vec<Ranked>,
    pub procc: Procc,
    pub warning: Option<String>,
}

impl HoleCandidates {
    pub fn get(&self, id: CandidateId) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// Every applicable candidate's prompt composed again by `session` to fit the budget as the
    /// backend's model counts it (see [`fit`]); nothing changes where keyhole counts as the
    /// model does.
    pub async fn fit(&mut self, session: &Session, hole: &Hole) -> Result<(), FitError> {
        if session.counts_exactly() {
            return Ok(());
        }
        let (proposals, retrieved) = (&self.proposals, &self.retrieved);
        let fitted = self
            .candidates
            .iter()
            .filter(|c| c.applicable())
            .map(|row| {
                let id = row.id;
                async move {
                    let proposal = proposals.iter().find(|p| p.spec.id == id);
                    let built = retrieved.iter().find(|c| c.id == id);
                    // Composed by the one rule every candidate's prompt follows.
                    let context = match (proposal, built) {
                        (Some(p), _) => BuiltContext::Proposal(p.clone()),
                        (_, Some(c)) => BuiltContext::Retrieved(c.clone()),
                        _ => BuiltContext::Default,
                    };
                    let prompt = session
                        .fit(hole, |composer| context.compose(composer))
                        .await?;
                    Ok::<_, FitError>((id, prompt))
                }
            });
        for fitted in futures_util::future::join_all(fitted).await {
            let (id, prompt) = fitted?;
            if let Some(row) = self.candidates.iter_mut().find(|c| c.id == id) {
                row.prompt = prompt;
            }
        }
        Ok(())
    }
}

/// Whether a candidate's prompt can be used yet.
#[derive(Clone, Debug, PartialEq)]
pub enum Availability {
    Applicable,
    /// Its context is empty for this hole; why, where it is known.
    NotApplicable(Option<String>),
    /// A retrieved candidate waiting for the backend (67, 69, 70).
    Building,
}

/// One candidate context, ranked, with the prompt it composes to.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub id: CandidateId,
    pub label: String,
    pub source: &'static str,
    pub context_type: &'static str,
    /// The ranker's score; `None` when the ranker left it out (not applicable, or retrieved:
    /// rankers order RLPG's candidates only).
    pub score: Option<f64>,
    /// The similarity of the best retrieved window to its query (retrieved candidates that
    /// search RepoCoder's windows).
    pub retrieval_score: Option<f64>,
    pub availability: Availability,
    /// The prompt it composes to (the default context's while it is not applicable).
    pub prompt: Prompt,
}

impl Candidate {
    /// Candidate `id` as the catalogue names it.
    pub fn new(
        id: CandidateId,
        availability: Availability,
        retrieval_score: Option<f64>,
        prompt: Prompt,
    ) -> Candidate {
        let info = id.info();
        Candidate {
            id,
            label: info.label.clone(),
            source: info.source,
            context_type: info.context_type,
            score: None,
            retrieval_score,
            availability,
            prompt,
        }
    }

    pub fn applicable(&self) -> bool {
        self.availability == Availability::Applicable
    }

    pub fn building(&self) -> bool {
        self.availability == Availability::Building
    }

    /// Tokens of the candidate's own context in the prompt (the default context's for the
    /// default candidate); none while it does not apply.
    pub fn tokens(&self) -> usize {
        let own = |k: &SegmentKind| !matches!(k, SegmentKind::Separator);
        match self.applicable() {
            true => self.prompt.segment(own).map_or(0, |s| s.tokens),
            false => 0,
        }
    }
}

/// A proposal as a row; one that does not apply composes to the default context alone (its
/// context is empty).
fn proposal_row(proposal: &ProposalContext, composer: &Composer) -> Candidate {
    let availability = match proposal.applicable() {
        true => Availability::Applicable,
        false => Availability::NotApplicable(None),
    };
    Candidate::new(
        proposal.spec.id,
        availability,
        None,
        composer.compose(Some(proposal)),
    )
}

/// A built retrieved candidate as a row; one that does not apply keeps the default prompt.
fn retrieved_row(built: &perspectives::Candidate, composer: &Composer) -> Candidate {
    let availability = match built.applicable() {
        true => Availability::Applicable,
        false => Availability::NotApplicable(built.why_not.clone()),
    };
    let prompt = built
        .compose(composer)
        .unwrap_or_else(|| composer.compose(None));
    Candidate::new(built.id, availability, built.score, prompt)
}

/// Whether candidate `id` is a retrieved one (63–72) rather than RLPG's.
fn retrieved(id: CandidateId) -> bool {
    id >= CandidateId::FIRST_RETRIEVED
}

/// Score and order the candidates as `ranked` says. RLPG's applicable candidates it left out
/// (all of them when the ranker failed) follow by id, then the retrieved candidates by id (no
/// ranker scores them, and their similarities are on another scale), then the rest by id.
pub fn apply_ranking(candidates: &mut [Candidate], ranked: &[Ranked]) {
    let place = |id: CandidateId| ranked.iter().position(|r| r.id == id);
    for c in candidates.iter_mut() {
        c.score = place(c.id).map(|i| ranked[i].score);
    }
    candidates.sort_by_key(|c| match place(c.id) {
        Some(at) => (0, at),
        None if retrieved(c.id) => (2, c.id.index()),
        None if c.applicable() => (1, c.id.index()),
        None => (3, c.id.index()),
    });
}

/// ProCC's choice among its perspectives (68–70) for the hole, kept to teach its bandit.
#[derive(Clone, Debug, PartialEq)]
pub struct Procc {
    pub context: bandit::Context,
    pub available: [bool; bandit::ARMS],
    /// The candidate LinUCB picks; none when no perspective applies.
    pub pick: Option<CandidateId>,
}

/// What a pick teaches ProCC's bandit: in `context`, each (arm, reward).
#[derive(Clone, Debug, PartialEq)]
pub struct BanditLesson {
    pub context: bandit::Context,
    pub rewards: Vec<(usize, f64)>,
}

/// The rankers and what they learn, shared by every session of a process (the UI switching
/// backends keeps its picks): the bundled classifier loaded once, on first use, and the online
/// ranker from the data directory, kept current by this process's picks.
#[derive(Clone)]
pub struct Learning {
    rankers: Arc<OnceLock<RwLock<Rankers>>>,
    /// Where the online ranker, the bandit and the picks are kept.
    dirs: Arc<Dirs>,
}

impl Learning {
    /// Rankers that keep what they learn in `dirs`, with the bundled classifier.
    pub fn new(dirs: Dirs) -> Learning {
        Learning {
            rankers: Arc::default(),
            dirs: Arc::new(dirs),
        }
    }

    /// Rankers with `classifier` behind RLPG-H and RLPG-R.
    pub fn with_classifier(classifier: Classifier, dirs: Dirs) -> Learning {
        let learning = Learning::new(dirs);
        // Freshly made, so nothing has filled it yet.
        let _ = learning.rankers.set(Self::load(classifier, &learning.dirs));
        learning
    }

    /// Where what is learned is kept.
    pub fn dirs(&self) -> &Dirs {
        &self.dirs
    }

    fn loaded(&self) -> &RwLock<Rankers> {
        self.rankers
            .get_or_init(|| Self::load(Classifier::bundled(), &self.dirs))
    }

    fn load(classifier: Classifier, dirs: &Dirs) -> RwLock<Rankers> {
        let (online, warning) = OnlineRanker::load_saved(dirs);
        if let Some(warning) = warning {
            tracing::warn!(%warning, "online ranker");
        }
        RwLock::new(Rankers { classifier, online })
    }

    /// How many picks the online ranker has learnt from.
    pub fn online_picks(&self) -> u64 {
        let rankers = self.loaded().read().unwrap_or_else(PoisonError::into_inner);
        rankers.online.picks()
    }

    /// The order `kind` gives the proposals, or why it cannot rank.
    pub fn rank(&self, kind: RankerKind, input: &RankInput) -> Result<Vec<Ranked>, String> {
        let rankers = self.loaded().read().unwrap_or_else(PoisonError::into_inner);
        let ranker = rankers.get(kind).map_err(|e| e.to_string())?;
        Ok(ranker.rank(input))
    }

    /// Log the pick, teach the online ranker and, for a ProCC perspective, the bandit; says
    /// where it went or what failed.
    pub fn record_pick(&self, mut pick: feedback::Pick, lesson: Option<BanditLesson>) -> String {
        let Some(dir) = self.dirs.data.clone() else {
            return "no data directory: pick not recorded".into();
        };
        pick.unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        log_pick(&pick);
        if let Err(e) = feedback::append_pick(&dir.join(FEEDBACK_FILE), &pick) {
            tracing::warn!(error = %e, "cannot log the pick");
            return format!("cannot log the pick: {e}");
        }
        let path = dir.join(online::FILE);
        let (mut ranker, warning) = OnlineRanker::load(&path);
        ranker.record_pick(&pick.candidates, pick.picked);
        if let Err(e) = ranker.save(&path) {
            return format!("cannot save the online ranker: {e}");
        }
        let mut rankers = self
            .loaded()
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        rankers.online = ranker;
        drop(rankers);
        let taught = match lesson {
            Some(lesson) => match teach_bandit(&dir.join(bandit::FILE), &lesson) {
                Ok(()) => "; online ranker and ProCC bandit updated",
                Err(e) => return format!("cannot save the ProCC bandit: {e}"),
            },
            None => "; online ranker updated",
        };
        warning.unwrap_or_else(|| {
            format!(
                "pick of {} {} logged to {}{taught}",
                pick.picked,
                pick.picked.label(),
                dir.display()
            )
        })
    }

    /// Write a completion into the user's file (see [`feedback::apply_completion`]); the
    /// file's text afterwards, or why it was left alone.
    pub fn apply(
        &self,
        path: &Path,
        hash: &[u8; 32],
        offset: usize,
        replace: usize,
        text: &str,
    ) -> Result<String, String> {
        let staging = self.dirs.data.as_deref();
        let result = feedback::apply_completion(path, hash, offset, replace, text, staging);
        tracing::info!(path = %path.display(), offset, replace, ok = result.is_ok(), "apply");
        result.map_err(|e| e.to_string())?;
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The hole and hashes only: prompts and completions stay out of the log.
fn log_pick(pick: &feedback::Pick) {
    tracing::info!(
        hole = %pick.hole,
        picked = pick.picked.index(),
        candidates = ?pick.candidates,
        prompt_hash = %pick.prompt_hash,
        "pick"
    );
}

/// ProCC's bandit context for a hole from its perspectives' candidates (each applicable one's
/// best window similarity and Jaccard), and which perspectives applied.
fn procc_context<'c>(
    candidates: impl IntoIterator<Item = &'c perspectives::Candidate>,
) -> (bandit::Context, [bool; bandit::ARMS]) {
    let candidates: Vec<&perspectives::Candidate> = candidates.into_iter().collect();
    let features = CandidateId::PROCC.map(|id| {
        let c = candidates.iter().find(|c| c.id == id && c.applicable())?;
        Some((c.score.unwrap_or(0.0), c.jaccard.unwrap_or(0.0)))
    });
    (bandit::context(features), features.map(|f| f.is_some()))
}

/// Update the bandit saved at `path` with each reward of `lesson`.
fn teach_bandit(path: &Path, lesson: &BanditLesson) -> std::io::Result<()> {
    let (mut bandit, warning) = LinUcb::load(path);
    if let Some(warning) = warning {
        tracing::warn!(%warning, "ProCC bandit");
    }
    for &(arm, reward) in &lesson.rewards {
        bandit.update(arm, &lesson.context, reward);
    }
    bandit.save(path)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_logged_pick_names_the_hole_but_not_the_completions() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Mutex::new(file.reopen().unwrap()))
            .with_ansi(false)
            .finish();
        let pick = feedback::Pick {
            hole: "A.java:3:9".into(),
            candidates: vec![CandidateId::nth(6), CandidateId::DEFAULT],
            prompt_hash: feedback::prompt_hash("secret prompt"),
            completions: vec!["secretCompletion()".into(), String::new()],
            picked: CandidateId::nth(6),
            unix_time: 0,
        };
        tracing::subscriber::with_default(subscriber, || log_pick(&pick));
        let log = std::fs::read_to_string(file.path()).unwrap();
        assert!(log.contains("A.java:3:9") && log.contains(&pick.prompt_hash));
        assert!(!log.contains("secret"), "{log}");
    }
}
