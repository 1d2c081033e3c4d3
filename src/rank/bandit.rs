//! ProCC's adaptive retrieval selection (section 3.3): LinUCB with disjoint arms, one arm per
//! retrieval perspective (lexical, hypothetical line, summary). The context of a hole is, per
//! perspective, its best window's similarity to its query and the Jaccard similarity of that
//! window and the code around the hole, plus a bias; the reward is exact match (1 or 0).
//! Trained from evaluation label rows and updated from picks; saved as JSON beside the online
//! ranker.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::feedback;

/// The perspectives, in [`CandidateId::PROCC`](crate::CandidateId::PROCC) order.
pub const ARMS: usize = 3;
/// Two features per arm and a bias.
pub const FEATURES: usize = 2 * ARMS + 1;
/// ProCC's coefficient of the upper confidence bound (section 4.1.5).
pub const ALPHA: f64 = 0.1;
/// Where the trained bandit is kept in the data directory.
pub const FILE: &str = "procc-linucb.json";
/// Version of the saved state; a file of another version is ignored.
const VERSION: u32 = 1;

/// A hole's context for the bandit.
pub type Context = [f64; FEATURES];

/// The context of a hole from each arm's (top similarity, Jaccard), `None` for an arm that
/// retrieved nothing (its features are 0).
pub fn context(per_arm: [Option<(f64, f64)>; ARMS]) -> Context {
    let mut x = [0.0; FEATURES];
    for (arm, features) in per_arm.iter().enumerate() {
        if let Some((score, jaccard)) = features {
            x[2 * arm] = *score;
            x[2 * arm + 1] = *jaccard;
        }
    }
    x[FEATURES - 1] = 1.0;
    x
}

/// One arm's ridge regression: A = I + Σ x xᵀ, b = Σ r x.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Arm {
    a: [[f64; FEATURES]; FEATURES],
    b: [f64; FEATURES],
    pulls: u64,
}

impl Default for Arm {
    fn default() -> Self {
        let mut a = [[0.0; FEATURES]; FEATURES];
        for (i, row) in a.iter_mut().enumerate() {
            row[i] = 1.0;
        }
        Arm {
            a,
            b: [0.0; FEATURES],
            pulls: 0,
        }
    }
}

impl Arm {
    /// θᵀx + α √(xᵀA⁻¹x) with θ = A⁻¹b; A is symmetric, so θᵀx = bᵀ(A⁻¹x).
    fn upper_bound(&self, x: &Context, alpha: f64) -> f64 {
        let y = solve(self.a, *x);
        dot(&self.b, &y) + alpha * dot(x, &y).max(0.0).sqrt()
    }

    fn update(&mut self, x: &Context, reward: f64) {
        for (i, row) in self.a.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                *cell += x[i] * x[j];
            }
        }
        for (b, xi) in self.b.iter_mut().zip(x) {
            *b += reward * xi;
        }
        self.pulls += 1;
    }
}

/// What `save` writes.
#[derive(Serialize, Deserialize)]
struct State {
    version: u32,
    alpha: f64,
    arms: [Arm; ARMS],
}

/// LinUCB over ProCC's perspectives.
#[derive(Clone, Debug, PartialEq)]
pub struct LinUcb {
    alpha: f64,
    arms: [Arm; ARMS],
}

impl Default for LinUcb {
    fn default() -> Self {
        LinUcb {
            alpha: ALPHA,
            arms: Default::default(),
        }
    }
}

impl LinUcb {
    /// The arm with the highest upper confidence bound among the `available` ones (ties go to
    /// the first); `None` when none is available.
    pub fn choose(&self, x: &Context, available: [bool; ARMS]) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (arm, state) in self.arms.iter().enumerate().filter(|(a, _)| available[*a]) {
            let bound = state.upper_bound(x, self.alpha);
            if best.is_none_or(|(_, b)| bound > b) {
                best = Some((arm, bound));
            }
        }
        best.map(|(arm, _)| arm)
    }

    /// Learn that `arm`, chosen in context `x`, earned `reward`.
    pub fn update(&mut self, arm: usize, x: &Context, reward: f64) {
        self.arms[arm].update(x, reward);
    }

    /// How often each arm has been updated.
    pub fn pulls(&self) -> [u64; ARMS] {
        [0, 1, 2].map(|a| self.arms[a].pulls)
    }

    /// The bandit saved at `path`; a fresh one if there is none. A file that cannot be read or
    /// understood also gives a fresh bandit, with a one-line warning naming the file.
    pub fn load(path: &Path) -> (Self, Option<String>) {
        feedback::load_state(path, "ProCC bandit", Self::read)
    }

    fn read(path: &Path) -> io::Result<Self> {
        let state: State = serde_json::from_slice(&std::fs::read(path)?)?;
        feedback::check_version(state.version, VERSION)?;
        Ok(LinUcb {
            alpha: state.alpha,
            arms: state.arms,
        })
    }

    /// Save atomically: a crash leaves the previous state or this one.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let state = State {
            version: VERSION,
            alpha: self.alpha,
            arms: self.arms.clone(),
        };
        feedback::create_parent(path)?;
        feedback::write_atomic(path, &serde_json::to_vec_pretty(&state)?)
    }
}

fn dot(a: &[f64; FEATURES], b: &[f64; FEATURES]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A⁻¹v by Gaussian elimination with partial pivoting (A is symmetric positive definite:
/// the identity plus outer products).
fn solve(mut a: [[f64; FEATURES]; FEATURES], mut v: [f64; FEATURES]) -> [f64; FEATURES] {
    for col in 0..FEATURES {
        let pivot = (col..FEATURES)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        v.swap(col, pivot);
        let (pivot_row, pivot_v) = (a[col], v[col]);
        for row in col + 1..FEATURES {
            let factor = a[row][col] / pivot_row[col];
            for (cell, p) in a[row].iter_mut().zip(&pivot_row).skip(col) {
                *cell -= factor * p;
            }
            v[row] -= factor * pivot_v;
        }
    }
    let mut x = [0.0; FEATURES];
    for row in (0..FEATURES).rev() {
        let tail: f64 = (row + 1..FEATURES).map(|k| a[row][k] * x[k]).sum();
        x[row] = (v[row] - tail) / a[row][row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solve_inverts_a_symmetric_positive_definite_matrix() {
        let mut arm = Arm::default();
        arm.update(&[0.5, 0.2, 0.0, 1.0, 0.3, 0.9, 1.0], 1.0);
        arm.update(&[0.1, 0.7, 0.4, 0.0, 0.3, 0.2, 1.0], 0.0);
        let v = [1.0, -2.0, 0.5, 0.0, 3.0, 1.0, 2.0];
        let x = solve(arm.a, v);
        for (row, expected) in arm.a.iter().zip(v) {
            assert!((dot(row, &x) - expected).abs() < 1e-9);
        }
    }
}
