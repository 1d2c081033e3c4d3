//! The UI's side of candidates: the ranker cycle, completion cards and the hole they belong
//! to (candidates themselves are the session's).

use std::time::Instant;

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
    /// Requests in flight, one per card slot.
    Running { cards: Vec<RunningCard> },
}

/// A card whose request is in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningCard {
    pub candidate: CandidateId,
    /// Text streamed so far, and in how many pieces (servers and the local model stream about
    /// a token a piece).
    pub text: String,
    pub pieces: usize,
    /// When its request began; `None` while it waits behind the backend's other requests.
    pub started: Option<Instant>,
}

/// One request of a run: a candidate, and the others whose prompt is the very same text (they
/// share its request and card).
#[derive(Clone, Debug)]
pub struct RunPrompt {
    pub candidate: CandidateId,
    pub same: Vec<CandidateId>,
    pub text: String,
    /// Its prompt as already fitted to the backend's own count (the prompt pane showed it): sent
    /// as it is.
    pub fitted: Option<Prompt>,
    /// The text after the hole sent with it (a recorded plugin's prompt has one).
    pub suffix: Option<String>,
    /// The text is the user's edit: sent as written, never fitted again.
    pub edited: bool,
}

/// One request a run sent, for the request log: when, to whom, what and how long.
#[derive(Clone, Debug)]
pub struct LoggedRequest {
    /// The wall-clock time the run began, "HH:MM:SS" UTC.
    pub at: String,
    pub backend: String,
    pub candidate: CandidateId,
    /// Other candidates whose identical prompt this request answered.
    pub shared_by: usize,
    pub edited: bool,
    /// The prompt's size: tokens as the backend counted them where it did, and bytes.
    pub prompt_tokens: Option<usize>,
    pub prompt_bytes: usize,
    /// The completion with its queued and own time (ms), or why it failed.
    pub outcome: Result<(String, u128, u128), JobError>,
}

/// The most requests the log keeps (the oldest go first).
pub const REQUEST_LOG_KEEPS: usize = 500;

/// One completion card.
#[derive(Clone, Debug)]
pub struct Card {
    pub candidate: CandidateId,
    /// Candidates whose prompt was the same text as `candidate`'s: one request answered them.
    pub same: Vec<CandidateId>,
    /// The prompt text when the user edited the candidate's prompt before running it.
    pub edited: Option<String>,
    /// The prompt as sent, where it was composed again to fit the backend's own token count
    /// (it then differs from the candidate's prompt in the list).
    pub fitted: Option<Prompt>,
    pub outcome: Result<Finished, JobError>,
    /// The person picked it (a pick, or writing it into the file).
    pub picked: bool,
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
    /// Its own request's time, from when the backend took it up.
    pub latency_ms: u128,
    /// Time it waited first behind the run's other requests (a local model answers one at a
    /// time).
    pub queued_ms: u128,
    /// Against the hole's target; `None` at the end of a line, where there is no text after
    /// the hole to score against.
    pub scores: Option<Scores>,
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
