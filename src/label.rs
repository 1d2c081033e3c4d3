//! Label rows: one hole × one candidate of an evaluation, and the rows of a hole together.
//! Below both the evaluation that writes them and the classifier that learns from them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::candidate::CandidateId;
use crate::context::fidelity::Fidelity;
use crate::hole::{Hole, HoleError};
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
    /// The prompt tokens the model's context left room for, where fewer than the budget: the
    /// prompt was composed within them (a local model with a small context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_room: Option<usize>,
}

/// The stable id of a hole.
pub fn hole_id(repository: &str, file: &str, line: usize, column: usize) -> String {
    format!("{repository}/{file}:{line}:{column}")
}

/// What reports and the classifier read of one label row: its outcome, without the texts
/// (prediction, target, backend) that make a row large, so that every hole of a run fits in
/// memory at the scale of RLPG's protocol.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub applicable: bool,
    pub success: bool,
    /// Whether the request failed (rows of older versions; see [`LabelRow::error`]).
    pub failed: bool,
    pub edit_similarity: f64,
    pub proposal_truncated: bool,
    pub default_truncated: bool,
    pub bm25: Option<f64>,
    pub retrieval_score: Option<f64>,
    pub retrieval_jaccard: Option<f64>,
    /// Shared among the rows that give the same reason (see [`Grouping`]).
    pub why_not: Option<Arc<str>>,
}

/// The label rows of one hole, by proposal id (a missing row counts as inapplicable).
#[derive(Clone, Debug)]
pub struct HoleRows {
    pub hole_id: String,
    pub repository: String,
    file: String,
    line: usize,
    column: usize,
    fidelity: Fidelity,
    by_id: Vec<Option<Outcome>>,
}

/// A labelled hole that is not in its repository as it is now (the file changed or went).
#[derive(Debug, thiserror::Error)]
#[error("{hole_id}: {source}")]
pub struct LabelledHoleError {
    pub hole_id: String,
    pub source: HoleError,
}

impl HoleRows {
    pub fn row(&self, id: CandidateId) -> Option<&Outcome> {
        self.by_id.get(id.index()).and_then(Option::as_ref)
    }

    /// Whether candidate `id` gave context; the default context always does once labelled.
    pub fn applicable(&self, id: CandidateId) -> bool {
        self.row(id)
            .is_some_and(|r| r.applicable || id == CandidateId::DEFAULT)
    }

    /// RLPG's success: an applicable candidate whose completion matched, without a backend
    /// error (errors count as misses).
    pub fn succeeded(&self, id: CandidateId) -> bool {
        self.applicable(id) && self.row(id).is_some_and(|r| r.success && !r.failed)
    }

    /// The labelled hole found again in `index` (its repository), or why it cannot be.
    pub fn hole(&self, index: &RepoIndex) -> Result<Hole, LabelledHoleError> {
        Hole::at(index, &self.file, self.line, self.column).map_err(|source| LabelledHoleError {
            hole_id: self.hole_id.clone(),
            source,
        })
    }

    /// The hole's file, relative to its repository.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The profile the hole's rows were made with.
    pub fn fidelity(&self) -> Fidelity {
        self.fidelity
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

/// Label rows grouped by hole as they are read, one row at a time, keeping only their
/// outcomes: what a report holds instead of the rows.
#[derive(Default)]
pub struct Grouping {
    holes: BTreeMap<String, HoleRows>,
    rows: usize,
    first_fidelity: Option<Fidelity>,
    reasons: HashSet<Arc<str>>,
}

/// Every hole of a set of label rows, in hole id order.
#[derive(Clone)]
pub struct Grouped {
    pub holes: Vec<HoleRows>,
    /// How many rows were read (a row read twice counts twice, and the later one is kept).
    pub rows: usize,
    /// The profile of the first row read: rows of one run share it.
    pub fidelity: Option<Fidelity>,
}

impl Grouping {
    /// Add `row` to its hole; a row with an id the hole already has replaces it.
    pub fn add(&mut self, row: &LabelRow) {
        let hole = self.outcomes(std::slice::from_ref(row));
        self.insert(hole.expect("one row"), 1);
    }

    /// The outcomes of `rows`, rows of one hole (its first row names it), not yet added.
    pub fn outcomes(&mut self, rows: &[LabelRow]) -> Option<HoleRows> {
        let first = rows.first()?;
        let mut hole = HoleRows {
            hole_id: first.hole_id.clone(),
            repository: first.repository.clone(),
            file: first.file.clone(),
            line: first.line,
            column: first.column,
            fidelity: first.fidelity,
            by_id: vec![None; ROWS_PER_HOLE],
        };
        for row in rows {
            let why_not = row.why_not.as_deref().map(|why| self.shared(why));
            hole.by_id[row.proposal_id.index()] = Some(Outcome {
                applicable: row.applicable,
                success: row.success,
                failed: row.error.is_some(),
                edit_similarity: row.edit_similarity,
                proposal_truncated: row.proposal_truncated,
                default_truncated: row.default_truncated,
                bm25: row.bm25,
                retrieval_score: row.retrieval_score,
                retrieval_jaccard: row.retrieval_jaccard,
                why_not,
            });
        }
        Some(hole)
    }

    /// Add the outcomes of `rows` rows of one hole; ids the hole already has are replaced.
    pub fn insert(&mut self, hole: HoleRows, rows: usize) {
        self.rows += rows;
        self.first_fidelity.get_or_insert(hole.fidelity);
        match self.holes.get_mut(&hole.hole_id) {
            Some(held) => {
                for (held, new) in held.by_id.iter_mut().zip(hole.by_id) {
                    if new.is_some() {
                        *held = new;
                    }
                }
            }
            None => {
                self.holes.insert(hole.hole_id.clone(), hole);
            }
        }
    }

    /// `why` as the rows before gave it: reasons are few, rows many.
    fn shared(&mut self, why: &str) -> Arc<str> {
        if let Some(shared) = self.reasons.get(why) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(why);
        self.reasons.insert(shared.clone());
        shared
    }

    pub fn finish(self) -> Grouped {
        Grouped {
            holes: self.holes.into_values().collect(),
            rows: self.rows,
            fidelity: self.first_fidelity,
        }
    }
}

impl Grouped {
    /// `rows` grouped by hole.
    pub fn from_rows(rows: &[LabelRow]) -> Grouped {
        let mut grouping = Grouping::default();
        rows.iter().for_each(|row| grouping.add(row));
        grouping.finish()
    }
}

/// Group rows by hole, in hole id order; rows with an unknown proposal id are ignored.
pub fn group(rows: &[LabelRow]) -> Vec<HoleRows> {
    Grouped::from_rows(rows).holes
}
