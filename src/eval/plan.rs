//! What a budget of requests labels (`keyhole tune --requests N`): per hole, the candidates
//! worth a request. Held-out holes are labelled in full, so that the report compares rankers
//! on every candidate; the rest of the budget goes to the training holes' candidates the
//! current classifier is least sure of (its probability nearest one half), where a label
//! teaches it most. Candidates whose prompts are identical are one request.

use std::collections::{HashMap, HashSet};

use crate::candidate::CandidateId;

/// Held-out holes may take a third of a budget (whole holes, in sample order).
const HELD_OUT_SHARE: usize = 3;

/// The candidates to complete per hole (the default context always is), by hole id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    by_hole: HashMap<String, Vec<CandidateId>>,
    /// Holes an earlier run labelled: the run counts them as resumed.
    labelled: HashSet<String>,
    /// Requests the plan costs, as keyhole composes the prompts (a backend that counts tokens
    /// itself may recompose some).
    pub requests: usize,
    /// Holes planned, held out among them.
    pub held_out: usize,
}

impl Plan {
    /// Whether the hole `hole_id` is the run's: planned, or labelled by an earlier run.
    pub fn has(&self, hole_id: &str) -> bool {
        self.by_hole.contains_key(hole_id) || self.labelled.contains(hole_id)
    }

    /// Counts `hole_id`, labelled by an earlier run, among the run's holes.
    pub fn resume(&mut self, hole_id: &str) {
        self.labelled.insert(hole_id.to_string());
    }

    /// The candidates the plan completes for `hole_id`.
    pub fn candidates(&self, hole_id: &str) -> &[CandidateId] {
        self.by_hole.get(hole_id).map_or(&[], Vec::as_slice)
    }

    /// Holes planned (not those labelled before).
    pub fn holes(&self) -> usize {
        self.by_hole.len()
    }

    fn take(&mut self, hole_id: &str, ids: &[CandidateId]) {
        self.by_hole
            .entry(hole_id.to_string())
            .or_default()
            .extend_from_slice(ids);
    }
}

/// Candidates of one hole that share one request (their prompts are identical), with the
/// current classifier's probability of success for each.
#[derive(Clone, Debug, PartialEq)]
pub struct Group(pub Vec<(CandidateId, f64)>);

impl Group {
    fn ids(&self) -> Vec<CandidateId> {
        self.0.iter().map(|&(id, _)| id).collect()
    }

    fn has_default(&self) -> bool {
        self.0.iter().any(|&(id, _)| id == CandidateId::DEFAULT)
    }

    /// What labelling the group teaches: the label's variance under the classifier's
    /// probability, p(1 - p), summed over the candidates it labels.
    fn uncertainty(&self) -> f64 {
        self.0.iter().map(|&(_, p)| p * (1.0 - p)).sum()
    }
}

/// A hole not yet labelled, as the planner sees it.
#[derive(Clone, Debug)]
pub struct HoleCost {
    pub hole_id: String,
    pub held_out: bool,
    /// Its applicable RLPG candidates by request; the default context is in one of them.
    pub groups: Vec<Group>,
}

/// Why no plan fits the budget.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error(
        "--requests {budget}: too few to label one held-out hole in full (the cheapest takes {needs}); give at least {least}"
    )]
    TooFew {
        budget: usize,
        needs: usize,
        least: usize,
    },
}

/// The plan for `holes` (in sample order) within `budget` requests; without a budget, every
/// candidate of every hole. `held_out_done` says whether earlier runs already labelled
/// held-out holes (then none need fit now).
pub fn plan(
    holes: &[HoleCost],
    budget: Option<usize>,
    held_out_done: bool,
) -> Result<Plan, PlanError> {
    let mut plan = Plan::default();
    let Some(budget) = budget else {
        for hole in holes {
            for group in &hole.groups {
                plan.take(&hole.hole_id, &group.ids());
            }
            plan.requests += hole.groups.len();
            plan.held_out += usize::from(hole.held_out);
        }
        return Ok(plan);
    };
    // Held-out holes first, whole, within their share.
    let mut left = budget;
    let share = budget / HELD_OUT_SHARE;
    for hole in holes.iter().filter(|h| h.held_out) {
        let cost = hole.groups.len();
        if plan.requests + cost > share {
            continue;
        }
        for group in &hole.groups {
            plan.take(&hole.hole_id, &group.ids());
        }
        plan.requests += cost;
        plan.held_out += 1;
    }
    let cheapest = holes
        .iter()
        .filter(|h| h.held_out)
        .map(|h| h.groups.len())
        .min();
    if plan.held_out == 0
        && !held_out_done
        && let Some(needs) = cheapest
    {
        return Err(PlanError::TooFew {
            budget,
            needs,
            least: needs * HELD_OUT_SHARE,
        });
    }
    left -= plan.requests;
    // Then the training holes' most uncertain requests; a hole's first also costs its default
    // context's request, which every labelled hole has.
    let mut offers: Vec<(f64, usize, usize)> = Vec::new();
    for (h, hole) in holes.iter().enumerate().filter(|(_, h)| !h.held_out) {
        for (g, group) in hole.groups.iter().enumerate() {
            offers.push((group.uncertainty(), h, g));
        }
    }
    offers.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut opened = vec![false; holes.len()];
    for (_, h, g) in offers {
        let hole = &holes[h];
        let group = &hole.groups[g];
        if opened[h] && group.has_default() {
            continue; // taken when the hole was opened
        }
        let default = hole.groups.iter().find(|g| g.has_default());
        let opening = !opened[h] && !group.has_default() && default.is_some();
        let cost = 1 + usize::from(opening);
        if cost > left {
            continue;
        }
        if opening && let Some(default) = default {
            plan.take(&hole.hole_id, &default.ids());
        }
        plan.take(&hole.hole_id, &group.ids());
        opened[h] = true;
        left -= cost;
        plan.requests += cost;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> CandidateId {
        CandidateId::nth(n)
    }

    /// A hole with the default context alone in one group, and one group per (ids, p).
    fn hole(name: &str, held_out: bool, groups: &[(&[usize], f64)]) -> HoleCost {
        let mut all = vec![Group(vec![(CandidateId::DEFAULT, 0.3)])];
        all.extend(
            groups
                .iter()
                .map(|(ids, p)| Group(ids.iter().map(|&n| (id(n), *p)).collect())),
        );
        HoleCost {
            hole_id: name.into(),
            held_out,
            groups: all,
        }
    }

    #[test]
    fn without_a_budget_every_candidate_of_every_hole_is_labelled() {
        let holes = [
            hole("a", false, &[(&[1, 2], 0.1)]),
            hole("b", true, &[(&[3], 0.5)]),
        ];
        let plan = plan(&holes, None, false).unwrap();
        assert_eq!(plan.requests, 4);
        assert_eq!(plan.candidates("a"), [CandidateId::DEFAULT, id(1), id(2)]);
        assert_eq!((plan.holes(), plan.held_out), (2, 1));
    }

    #[test]
    fn a_budget_labels_held_out_holes_whole_then_the_most_uncertain_requests() {
        let holes = [
            hole("v", true, &[(&[1], 0.5), (&[2], 0.5)]),
            hole("sure", false, &[(&[4], 0.02), (&[5], 0.99)]),
            hole("unsure", false, &[(&[6, 7], 0.5), (&[8], 0.45)]),
        ];
        let plan = plan(&holes, Some(9), false).unwrap();
        assert!(plan.requests <= 9, "{plan:?}");
        assert_eq!(plan.candidates("v"), [CandidateId::DEFAULT, id(1), id(2)]);
        // The two candidates of one request, with the hole's default context, then the next
        // most uncertain; the sure hole gets what is left, least sure first.
        assert_eq!(
            plan.candidates("unsure"),
            [CandidateId::DEFAULT, id(6), id(7), id(8)]
        );
        assert_eq!(plan.requests, 9, "{plan:?}");
        assert_eq!(
            plan.candidates("sure"),
            [CandidateId::DEFAULT, id(4), id(5)]
        );
        // With the held-out hole labelled before, the budget goes to training holes alone.
        let resumed = super::plan(&holes[1..], Some(3), true).unwrap();
        assert_eq!(
            resumed.candidates("unsure"),
            [CandidateId::DEFAULT, id(6), id(7), id(8)]
        );
        assert!(!resumed.has("sure"));
    }

    #[test]
    fn a_budget_too_small_for_one_held_out_hole_is_refused_unless_one_is_labelled() {
        let holes = [
            hole("v", true, &[(&[1], 0.5), (&[2], 0.5)]),
            hole("t", false, &[]),
        ];
        let err = plan(&holes, Some(5), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--requests 5: too few to label one held-out hole in full (the cheapest takes 3); give at least 9"
        );
        let resumed = plan(&holes, Some(5), true).unwrap();
        assert!(!resumed.has("v") && resumed.has("t"));
    }
}
