//! Success rates over sets of holes.

use serde::Serialize;

/// A success rate in percent, over all holes (hole-wise) and as the mean of per-repository
/// rates (repo-wise, independent of repository size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rate {
    pub hole_wise: f64,
    pub repo_wise: f64,
}

/// The rate of per-repository `(hits, holes)` counts, in repository order; 0 for none.
pub(super) fn rate_of(per_repo: impl IntoIterator<Item = (usize, usize)>) -> Rate {
    let per_repo: Vec<(usize, usize)> = per_repo.into_iter().filter(|&(_, n)| n > 0).collect();
    if per_repo.is_empty() {
        return Rate::default();
    }
    let (hits, total) = per_repo
        .iter()
        .fold((0, 0), |(h, t), &(hits, total)| (h + hits, t + total));
    let repo_sum: f64 = per_repo.iter().map(|&(h, t)| percent(h, t)).sum();
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
