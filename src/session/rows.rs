//! A hole's candidates as rows: each candidate's availability, score and composed prompt, in
//! the ranker's order, and the contexts they were composed from.

use crate::candidate::CandidateId;
use crate::compose::{Composer, DefaultContext, Prompt, SegmentKind};
use crate::context::perspectives;
use crate::context::proposals::ProposalContext;
use crate::hole::Hole;
use crate::rank::Ranked;
use crate::rank::bandit;

use super::Session;
use super::fit::FitError;

/// A candidate's context before composition, so that it can be composed again within
/// another budget.
pub enum BuiltContext {
    Proposal(ProposalContext),
    Retrieved(perspectives::RetrievedContext),
    /// The default context has none of its own.
    Default,
}

impl BuiltContext {
    /// Why the candidate does not apply at this hole, where it does not: a prompt composed
    /// from it would be the default context's alone, so it is not worth a request.
    pub fn why_not(&self) -> Option<String> {
        match self {
            BuiltContext::Proposal(p) => proposal_why_not(p),
            BuiltContext::Retrieved(c) if !c.applicable() => Some(
                c.why_not
                    .clone()
                    .unwrap_or_else(|| "it found nothing for this hole".to_string()),
            ),
            _ => None,
        }
    }

    /// Its prompt (the default context alone where it does not apply).
    pub fn compose(&self, composer: &Composer) -> Prompt {
        match self {
            BuiltContext::Proposal(p) => composer.compose(p),
            BuiltContext::Retrieved(c) => c
                .compose(composer)
                .unwrap_or_else(|| composer.compose(&DefaultContext)),
            BuiltContext::Default => composer.compose(&DefaultContext),
        }
    }

    /// The candidate's row, composed by `composer`.
    pub fn row(&self, composer: &Composer) -> CandidateRow {
        match self {
            BuiltContext::Proposal(p) => proposal_row(p, composer),
            BuiltContext::Retrieved(c) => retrieved_row(c, composer),
            BuiltContext::Default => CandidateRow::new(
                CandidateId::DEFAULT,
                Availability::Applicable,
                None,
                composer.compose(&DefaultContext),
            ),
        }
    }
}

/// Every candidate of a hole that needs no backend, in ranker order.
pub struct Analysis {
    /// RLPG's proposals and the default context in the ranker's order (the ones it left out
    /// last), the retrieved candidates among them, those needing the backend still building.
    pub candidates: Vec<CandidateRow>,
    /// What the ranker ranks: the 62 proposals in id order.
    pub proposals: Vec<ProposalContext>,
    /// The retrieved candidates built so far (RepoCoder's second iteration starts from them).
    pub retrieved: Vec<perspectives::RetrievedContext>,
    /// The ranker's order of RLPG's applicable candidates, best first.
    pub ranking: Vec<Ranked>,
    /// Why the ranker could not rank (the candidates are then in id order).
    pub warning: Option<String>,
}

impl Analysis {
    /// The ranker's first candidate; none where the ranker could not rank (see
    /// [`Analysis::warning`]).
    pub fn best(&self) -> Option<&CandidateRow> {
        self.get(self.ranking.first()?.id)
    }

    /// Candidate `id`'s row.
    pub fn get(&self, id: CandidateId) -> Option<&CandidateRow> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// Rows built since, each put in the place of the building row of its id.
    pub fn fill(&mut self, built: impl IntoIterator<Item = CandidateRow>) {
        fill_rows(&mut self.candidates, built);
    }
}

/// Put each row of `built` in the place of the row of its id in `candidates` (a row still
/// building, whose place the ranker's order already gave), keeping the ranker's score.
pub fn fill_rows(candidates: &mut [CandidateRow], built: impl IntoIterator<Item = CandidateRow>) {
    for row in built {
        if let Some(slot) = candidates.iter_mut().find(|c| c.id == row.id) {
            *slot = CandidateRow {
                score: slot.score,
                ..row
            };
        }
    }
}

/// The retrieved candidates that search the repository's indexes (63–66, 68), built.
pub struct Searched {
    /// Their rows.
    pub candidates: Vec<CandidateRow>,
    /// The same, as built (RepoCoder's second iteration starts from its first).
    pub built: Vec<perspectives::RetrievedContext>,
}

/// The candidates built once the backend wrote what they need.
pub struct Later {
    /// Rows for 67, 69 and 70.
    pub candidates: Vec<CandidateRow>,
    /// The same, as built.
    pub built: Vec<perspectives::RetrievedContext>,
    pub procc: Procc,
}

/// Every candidate of a hole.
pub struct HoleCandidates {
    /// All 73, in the ranker's order (see [`apply_ranking`]).
    pub candidates: Vec<CandidateRow>,
    /// The 62 proposals in id order.
    pub proposals: Vec<ProposalContext>,
    /// The retrieved candidates 63–72 in id order, as built.
    pub retrieved: Vec<perspectives::RetrievedContext>,
    pub ranking: Vec<Ranked>,
    pub procc: Procc,
    pub warning: Option<String>,
}

impl HoleCandidates {
    pub fn get(&self, id: CandidateId) -> Option<&CandidateRow> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// Every applicable candidate's prompt composed again by `session` to fit the budget as the
    /// backend's model counts it (see `fit`); nothing changes where keyhole counts as the
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
    /// A retrieved candidate still being built: waiting for the search indexes, a language
    /// server or the backend ([`CandidateRow::waits_for`]).
    Building,
}

/// What a building candidate waits for; it reads as `the backend` and so on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// BM25's and RepoCoder's indexes of the repository, built or brought up to date.
    SearchIndexes,
    LanguageServer,
    Backend,
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Waiting::SearchIndexes => "the search indexes",
            Waiting::LanguageServer => "the language server",
            Waiting::Backend => "the backend",
        })
    }
}

/// One candidate context, ranked, with the prompt it composes to.
#[derive(Clone, Debug)]
pub struct CandidateRow {
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
    /// Which reading built a typed-hole candidate: `tree-sitter` or the language server's
    /// name.
    pub reader: Option<String>,
    /// The prompt it composes to (the default context's while it is not applicable).
    pub prompt: Prompt,
}

impl CandidateRow {
    /// Candidate `id` as the catalogue names it.
    pub fn new(
        id: CandidateId,
        availability: Availability,
        retrieval_score: Option<f64>,
        prompt: Prompt,
    ) -> CandidateRow {
        let info = id.info();
        CandidateRow {
            id,
            label: info.label.clone(),
            source: info.source,
            context_type: info.context_type,
            score: None,
            retrieval_score,
            availability,
            reader: None,
            prompt,
        }
    }

    pub fn applicable(&self) -> bool {
        self.availability == Availability::Applicable
    }

    pub fn building(&self) -> bool {
        self.availability == Availability::Building
    }

    /// What a building row waits for: a typed hole (71, 72) its language server, those built
    /// from the backend's answers (67, 69, 70) the backend, the others the search indexes.
    pub(crate) fn waits_for(&self) -> Waiting {
        match self.id.info().family {
            crate::candidate::Family::Typed => Waiting::LanguageServer,
            _ if self.id.needs_backend() => Waiting::Backend,
            _ => Waiting::SearchIndexes,
        }
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

/// Why proposal `p` does not apply at this hole, where it does not: its source offers no
/// file here, or the files it offers have nothing of its context type.
pub fn proposal_why_not(p: &ProposalContext) -> Option<String> {
    if p.applicable() {
        return None;
    }
    let source = p.spec.source.name();
    let files = if p.ranked_files.is_empty() {
        format!("{source} offers no file at this hole")
    } else {
        format!("the files {source} offers have none")
    };
    let wanted = p.spec.context_type.meaning();
    Some(format!("{files} (of {wanted})"))
}

/// A proposal as a row; one that does not apply composes to the default context alone (its
/// context is empty).
pub(super) fn proposal_row(proposal: &ProposalContext, composer: &Composer) -> CandidateRow {
    let availability = match proposal_why_not(proposal) {
        None => Availability::Applicable,
        why => Availability::NotApplicable(why),
    };
    CandidateRow::new(
        proposal.spec.id,
        availability,
        None,
        composer.compose(proposal),
    )
}

/// A built retrieved candidate as a row; one that does not apply keeps the default prompt.
pub(super) fn retrieved_row(
    built: &perspectives::RetrievedContext,
    composer: &Composer,
) -> CandidateRow {
    let availability = match built.applicable() {
        true => Availability::Applicable,
        false => Availability::NotApplicable(built.why_not.clone()),
    };
    let prompt = built
        .compose(composer)
        .unwrap_or_else(|| composer.compose(&DefaultContext));
    CandidateRow {
        reader: built.reader.clone(),
        ..CandidateRow::new(built.id, availability, built.score, prompt)
    }
}

/// Whether candidate `id` is a retrieved one (63–72) rather than RLPG's.
fn retrieved(id: CandidateId) -> bool {
    (CandidateId::FIRST_RETRIEVED..CandidateId::AS_SENT).contains(&id)
}

/// Score and order the candidates as `ranked` says. The prompts recorded for the hole (the
/// plugin's, then keyhole's in its place) stay first: they are what the others are compared
/// with. RLPG's applicable candidates the ranker left out (all of them when it failed) follow
/// the ranked ones by id, then the retrieved candidates by id (no ranker scores them, and their
/// similarities are on another scale), then the rest by id.
pub fn apply_ranking(candidates: &mut [CandidateRow], ranked: &[Ranked]) {
    let place = |id: CandidateId| ranked.iter().position(|r| r.id == id);
    for c in candidates.iter_mut() {
        c.score = place(c.id).map(|i| ranked[i].score);
    }
    candidates.sort_by_key(|c| match place(c.id) {
        _ if c.id.is_recorded() => (0, c.id.index()),
        Some(at) => (1, at),
        None if retrieved(c.id) => (3, c.id.index()),
        None if c.applicable() => (2, c.id.index()),
        None => (4, c.id.index()),
    });
}

/// ProCC's choice among its perspectives (68–70) for the hole, kept to teach its bandit.
#[derive(Clone, Debug, PartialEq)]
pub struct Procc {
    pub(crate) context: bandit::Context,
    pub available: [bool; bandit::ARMS],
    /// The candidate LinUCB picks; none when no perspective applies.
    pub pick: Option<CandidateId>,
}
