//! Label rows grouped by hole, and success rates over sets of holes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::candidate::CandidateId;
use crate::eval::{LabelRow, ROWS_PER_HOLE, WRITTEN_ROWS};
use crate::hole::Hole;
use crate::repo::RepoIndex;

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

    /// Applicable candidates, proposals in id order, then the default context.
    pub fn applicable_ids(&self) -> impl Iterator<Item = CandidateId> + '_ {
        CandidateId::all().filter(|&id| self.applicable(id))
    }

    /// Whether the hole has every row this version writes.
    pub(super) fn is_complete(&self) -> bool {
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

/// A success rate in percent, over all holes (hole-wise) and as the mean of per-repository
/// rates (repo-wise, independent of repository size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rate {
    pub hole_wise: f64,
    pub repo_wise: f64,
}

/// The rate of `(repository, hit)` outcomes; 0 for no outcomes.
pub(super) fn rate<'h>(outcomes: impl IntoIterator<Item = (&'h str, bool)>) -> Rate {
    let mut per_repo: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (repo, hit) in outcomes {
        let (hits, total) = per_repo.entry(repo).or_default();
        *hits += usize::from(hit);
        *total += 1;
    }
    if per_repo.is_empty() {
        return Rate::default();
    }
    let (hits, total) = per_repo
        .values()
        .fold((0, 0), |(h, t), &(hits, total)| (h + hits, t + total));
    let repo_sum: f64 = per_repo.values().map(|&(h, t)| percent(h, t)).sum();
    Rate {
        hole_wise: percent(hits, total),
        repo_wise: repo_sum / per_repo.len() as f64,
    }
}

/// `part / whole` in percent; 0 for an empty whole.
pub(super) fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// RLPG's relative improvement of `rate` over `base`, in percent; none when `base` is 0.
pub(super) fn gain(rate: f64, base: f64) -> Option<f64> {
    (base > 0.0).then(|| 100.0 * (rate - base) / base)
}
