//! RLPG's evaluation protocol on real repositories: for every sampled hole, complete with the
//! default context and with every applicable proposal, and record one label row each.
//! [`runner`] produces the rows, [`labels`] keeps them safe on disk, [`outdir`] keeps one run at
//! a time in an output directory and its settings, [`report`] turns the rows into the paper's
//! tables and plots, [`interop`] speaks RepoEval / CrossCodeEval task files.

pub mod classified;
pub mod interop;
pub mod labels;
pub mod outdir;
pub mod report;
pub mod runner;

use serde::{Deserialize, Serialize};

use crate::candidate::CandidateId;

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
    pub proposal_id: CandidateId,
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
