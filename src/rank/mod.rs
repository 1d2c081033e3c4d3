//! Rankers order the candidate contexts of a hole; every view (CLI, reports, TUI) ranks through
//! [`Ranker`]. The default context is a candidate like the others (id 62).

pub mod bandit;
pub mod online;

use serde::Serialize;

use crate::context::proposals::{DEFAULT_ID, PROPOSAL_COUNT, ProposalContext};

/// A candidate's place in a ranking.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub id: usize,
    pub score: f64,
}

/// Orders the applicable proposals of one hole, plus the default context, best first.
pub trait Ranker {
    fn name(&self) -> &'static str;
    fn rank(&self, proposals: &[ProposalContext]) -> Vec<Ranked>;
}

/// A fixed prior order, the same for every hole (RLPG's "fixed prompt proposal" baseline,
/// extended to a full order).
///
/// Measured with the embedded model on 300 RLPG holes of each training repository (junit4,
/// commons-lang3, args4j): post lines at 50%, 75% and 25% lead (42.5%, 42.5%, 42.1% exact
/// match against 37.8% for the default context); every other proposal scores within half a
/// point of the default, so the rest follow the default context in Table 7 order.
pub struct FixedRanker;

const FIXED_LEADERS: [usize; 4] = [6, 7, 5, DEFAULT_ID];

impl FixedRanker {
    fn order() -> impl Iterator<Item = usize> {
        FIXED_LEADERS
            .into_iter()
            .chain((0..PROPOSAL_COUNT).filter(|id| !FIXED_LEADERS.contains(id)))
    }
}

impl Ranker for FixedRanker {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn rank(&self, proposals: &[ProposalContext]) -> Vec<Ranked> {
        let applicable = |id: usize| {
            id == DEFAULT_ID || proposals.iter().any(|p| p.spec.id == id && p.applicable())
        };
        let order: Vec<usize> = Self::order().filter(|&id| applicable(id)).collect();
        let n = order.len() as f64;
        order
            .into_iter()
            .enumerate()
            .map(|(i, id)| Ranked {
                id,
                score: 1.0 - i as f64 / n,
            })
            .collect()
    }
}
