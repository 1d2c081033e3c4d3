//! The UI's side of candidates: the ranker cycle, completion cards and the hole they belong
//! to (candidates themselves are the session's).

use super::*;

/// The ranker after `kind` in the cycle RLPG-H → RLPG-R → BM25 → fixed → online → RLPG-H.
pub fn next_ranker(kind: RankerKind) -> RankerKind {
    let all = RankerKind::ALL;
    let at = all.iter().position(|&k| k == kind).unwrap_or(0);
    all[(at + 1) % all.len()]
}

/// What the completions pane is doing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CompletionPhase {
    #[default]
    Idle,
    /// Requests in flight: the text each has streamed so far, by card slot.
    Running { streamed: Vec<String> },
}

/// One completion card.
#[derive(Clone, Debug)]
pub struct Card {
    pub candidate: CandidateId,
    /// The prompt text when the user edited the candidate's prompt before running it.
    pub edited: Option<String>,
    /// The prompt as sent, where it was composed again to fit the backend's own token count
    /// (it then differs from the candidate's prompt in the list).
    pub fitted: Option<Prompt>,
    pub outcome: Result<Finished, String>,
}

impl Card {
    /// The prompt its completion came from: as sent where it was fitted to the backend, else
    /// its candidate's.
    pub fn prompt<'s>(&'s self, state: &'s State) -> Option<&'s Prompt> {
        self.fitted
            .as_ref()
            .or_else(|| state.candidate(self.candidate).map(|c| &c.prompt))
    }
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
    pub analysis: AnalysisPhase,
}

/// Where building the hole's candidates is (the retrieved ones that wait for the backend
/// show as such in their rows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnalysisPhase {
    Building,
    Built,
    /// Why they could not be built (an internal error, logged).
    Failed(String),
}
