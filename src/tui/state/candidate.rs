//! Candidates as the UI holds them: availability, scores, ProCC's pick, completion cards and
//! the hole they belong to.

use super::*;

/// The ranker after `kind` in the cycle RLPG-H → RLPG-R → BM25 → fixed → online → RLPG-H.
pub fn next_ranker(kind: RankerKind) -> RankerKind {
    let all = RankerKind::value_variants();
    let at = all.iter().position(|&k| k == kind).unwrap_or(0);
    all[(at + 1) % all.len()]
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

/// Whether candidate `id` is a retrieved one (63–72) rather than RLPG's.
pub fn retrieved(id: CandidateId) -> bool {
    id >= CandidateId::FIRST_RETRIEVED
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

/// What retrieval searches in the open repository, built once when it opens.
pub struct SearchIndex {
    pub retrieval: Retrieval,
    pub windows: WindowIndex,
}

/// One completion card.
#[derive(Clone, Debug)]
pub struct Card {
    pub candidate: CandidateId,
    /// The prompt text when the user edited the candidate's prompt before running it.
    pub edited: Option<String>,
    pub outcome: Result<Finished, String>,
}

#[derive(Clone, Debug)]
pub struct Finished {
    pub text: String,
    pub latency_ms: u128,
    pub scores: Scores,
    /// ERROR or missing nodes inside the completion when parsed in place.
    pub syntax_errors: usize,
}

/// The hole the candidates and completions belong to; results for an older generation are
/// dropped.
#[derive(Clone, Debug, PartialEq)]
pub struct HoleView {
    pub hole: Hole,
    pub generation: u64,
    /// Why the hole's candidates could not be built (an internal error, logged).
    pub failed: Option<String>,
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
