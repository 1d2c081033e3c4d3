//! Label rows: one hole × one candidate of an evaluation, and the rows of a hole together.
//! Below both the evaluation that writes them and the classifier that learns from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::candidate::CandidateId;
use crate::context::fidelity::Fidelity;
use crate::hole::Hole;
use crate::repo::RepoIndex;

/// Candidate ids a report reads: every candidate of the catalogue. A hole may have fewer rows
/// (label files of older runs): a missing row counts as inapplicable.
pub const ROWS_PER_HOLE: usize = CandidateId::COUNT;
/// Rows this version's runner writes per hole: one per candidate.
pub const WRITTEN_ROWS: usize = CandidateId::COUNT;
/// RLPG's candidates (the oracle's choice): the proposals and the default context.
pub const RLPG_CANDIDATES: usize = CandidateId::DEFAULT.index() + 1;

/// One hole × one candidate of the catalogue ([`crate::candidate`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelRow {
    /// `repository/file:line:column`, unique across a run.
    pub hole_id: String,
    pub repository: String,
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based.
    pub column: usize,
    /// The catalogue's id. Files number it as the row's profile numbers ids (RLPG's code
    /// swaps 5 and 6, see [`crate::candidate::Numbering`]); label files convert both ways.
    pub proposal_id: CandidateId,
    /// The profile the row was made with; rows without one (and every paper-profile row, to
    /// keep older readers' files as they were) are the paper's.
    #[serde(default, skip_serializing_if = "Fidelity::is_paper")]
    pub fidelity: Fidelity,
    /// Whether the proposal yielded any context; inapplicable rows are not completed.
    pub applicable: bool,
    /// Exact match after stripping trailing whitespace (RLPG's success).
    pub success: bool,
    pub edit_similarity: f64,
    pub edit_distance: usize,
    pub prediction: String,
    pub target: String,
    /// Tokens of the proposal context in the prompt (0 for the default context).
    pub proposal_tokens: usize,
    /// Tokens of the default context in the prompt.
    pub default_tokens: usize,
    pub proposal_truncated: bool,
    pub default_truncated: bool,
    pub backend: String,
    /// Why the completion failed. Only older versions wrote such rows: a failed request is no
    /// label, so readers skip the holes that have one and a resumed run redoes them.
    pub error: Option<String>,
    /// BM25 score of the proposal context against the hole window (RLPG-BM25's ranking).
    #[serde(default)]
    pub bm25: Option<f64>,
    /// Similarity of the best retrieved window to the query (RepoCoder, ProCC).
    #[serde(default)]
    pub retrieval_score: Option<f64>,
    /// Jaccard similarity of the best retrieved window and the code around the hole (ProCC).
    #[serde(default)]
    pub retrieval_jaccard: Option<f64>,
    /// Why the candidate cannot apply at all, where there is more to say than "no context".
    #[serde(default)]
    pub why_not: Option<String>,
}

/// The stable id of a hole.
pub fn hole_id(repository: &str, file: &str, line: usize, column: usize) -> String {
    format!("{repository}/{file}:{line}:{column}")
}

/// The label rows of one hole, by proposal id (a missing row counts as inapplicable).
pub struct HoleRows<'a> {
    pub hole_id: &'a str,
    pub repository: &'a str,
    by_id: Vec<Option<&'a LabelRow>>,
}

impl<'a> HoleRows<'a> {
    pub fn row(&self, id: CandidateId) -> Option<&'a LabelRow> {
        self.by_id.get(id.index()).copied().flatten()
    }

    /// Whether candidate `id` gave context; the default context always does once labelled.
    pub fn applicable(&self, id: CandidateId) -> bool {
        self.row(id)
            .is_some_and(|r| r.applicable || id == CandidateId::DEFAULT)
    }

    /// RLPG's success: an applicable candidate whose completion matched, without a backend
    /// error (errors count as misses).
    pub fn succeeded(&self, id: CandidateId) -> bool {
        self.applicable(id) && self.row(id).is_some_and(|r| r.success && r.error.is_none())
    }

    /// The labelled hole found again in `index` (its repository), or why it cannot be.
    pub fn hole(&self, index: &RepoIndex) -> Result<Hole, String> {
        let row = self
            .by_id
            .iter()
            .flatten()
            .next()
            .ok_or_else(|| format!("{}: no rows", self.hole_id))?;
        Hole::at(index, &row.file, row.line, row.column)
            .map_err(|e| format!("{}: {e}", self.hole_id))
    }

    /// The profile the hole's rows were made with.
    pub fn fidelity(&self) -> Fidelity {
        self.by_id
            .iter()
            .flatten()
            .next()
            .map_or(Fidelity::Paper, |r| r.fidelity)
    }

    /// Applicable candidates, proposals in id order, then the default context.
    pub fn applicable_ids(&self) -> impl Iterator<Item = CandidateId> + '_ {
        CandidateId::all().filter(|&id| self.applicable(id))
    }

    /// Whether the hole has every row this version writes.
    pub fn is_complete(&self) -> bool {
        self.by_id[..WRITTEN_ROWS].iter().all(Option::is_some)
    }
}

/// Group rows by hole, in hole id order; rows with an unknown proposal id are ignored.
pub fn group(rows: &[LabelRow]) -> Vec<HoleRows<'_>> {
    let mut holes: BTreeMap<&str, HoleRows> = BTreeMap::new();
    for row in rows {
        let hole = holes.entry(&row.hole_id).or_insert_with(|| HoleRows {
            hole_id: &row.hole_id,
            repository: &row.repository,
            by_id: vec![None; ROWS_PER_HOLE],
        });
        hole.by_id[row.proposal_id.index()] = Some(row);
    }
    holes.into_values().collect()
}
