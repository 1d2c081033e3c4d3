//! Methods: each orders a hole's candidates. Its first applicable candidate is the prompt it
//! picks (RLPG's methods, top-1); its first k are k attempts (success@k, Figure 2 top).

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::holes::percent;
use crate::candidate::{self, CandidateId, Numbering, ProposalSpec};
use crate::context::SourcedText;
use crate::context::proposals::ProposalContext;
use crate::hole::HoleWindow;
use crate::label::HoleRows;
use crate::rank::bandit::{self, ARMS, Context, LinUcb};
use crate::rank::{RankInput, Ranker};

/// Orders the candidate ids of one hole, best first; inapplicable ids are skipped.
pub type RankFn<'a> = Box<dyn Fn(&HoleRows) -> Vec<CandidateId> + 'a>;

/// What a method does on one hole.
#[derive(Clone, Copy, Debug)]
pub(super) struct Attempts {
    /// The candidate it picks.
    pub top: CandidateId,
    /// Position of its first successful candidate.
    pub first_hit: Option<usize>,
}

impl Attempts {
    pub fn success_at(&self, k: usize) -> bool {
        self.first_hit.is_some_and(|i| i < k)
    }
}

/// Follow `order` on `hole`: applicable candidates, without repeats; a method that offers
/// none gets the default context, as RLPG's prompt is when the proposal context is empty.
pub(super) fn attempts(order: Vec<CandidateId>, hole: &HoleRows) -> Attempts {
    let mut seen = [false; CandidateId::COUNT];
    let mut tried: Vec<CandidateId> = order
        .into_iter()
        .filter(|&id| hole.applicable(id))
        .filter(|&id| !std::mem::replace(&mut seen[id.index()], true))
        .collect();
    if tried.is_empty() {
        tried.push(CandidateId::DEFAULT);
    }
    Attempts {
        top: tried[0],
        first_hit: tried.iter().position(|&id| hole.succeeded(id)),
    }
}

/// Codex in the paper: the default context alone.
pub(super) fn default_context() -> RankFn<'static> {
    Box::new(|_| vec![CandidateId::DEFAULT])
}

/// The upper bound: a successful RLPG candidate (a proposal or the default context)
/// whenever there is one.
pub(super) fn oracle() -> RankFn<'static> {
    Box::new(|hole| {
        hole.applicable_ids()
            .filter(|&id| id <= CandidateId::DEFAULT && hole.succeeded(id))
            .collect()
    })
}

/// One candidate where it applies, the default context elsewhere (the retrieval baselines).
pub(super) fn single(id: CandidateId) -> RankFn<'static> {
    Box::new(move |_| vec![id, CandidateId::DEFAULT])
}

/// RLPG-BM25: the proposals ranked by the BM25 score of their context against the hole
/// window, then the default context.
pub(super) fn rlpg_bm25() -> RankFn<'static> {
    Box::new(|hole| {
        let mut scored: Vec<(CandidateId, f64)> = candidate::proposal_specs()
            .iter()
            .map(|spec| spec.id)
            .filter_map(|id| Some((id, hole.row(id)?.bm25?)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .map(|(id, _)| id)
            .chain([CandidateId::DEFAULT])
            .collect()
    })
}

/// A random applicable proposal per hole, drawn from `seed` and the hole id, so that a hole's
/// draw does not depend on which other holes are in the run.
pub(super) fn random(seed: u64) -> RankFn<'static> {
    Box::new(move |hole| {
        let mut ids: Vec<CandidateId> = hole
            .applicable_ids()
            .filter(|&id| id < CandidateId::DEFAULT)
            .collect();
        let hash = blake3::hash(hole.hole_id.as_bytes());
        let mut bytes = [0; 8];
        bytes.copy_from_slice(&hash.as_bytes()[..8]);
        ids.shuffle(&mut ChaCha8Rng::seed_from_u64(
            seed ^ u64::from_le_bytes(bytes),
        ));
        ids.push(CandidateId::DEFAULT);
        ids
    })
}

/// How often each proposal succeeds as RLPG's fixed prompt proposal (the proposal where
/// applicable, the default context elsewhere) on the holes added.
#[derive(Default)]
pub(super) struct FixedTally {
    hits: Vec<usize>,
    holes: usize,
}

impl FixedTally {
    pub fn add(&mut self, hole: &HoleRows) {
        self.hits.resize(CandidateId::COUNT, 0);
        for spec in candidate::proposal_specs() {
            let hit = attempts(vec![spec.id, CandidateId::DEFAULT], hole).success_at(1);
            self.hits[spec.id.index()] += usize::from(hit);
        }
        self.holes += 1;
    }

    /// The proposals with their success rate, best first; ties keep the order of the ids as
    /// `numbering` numbers them.
    pub fn order(&self, numbering: Numbering) -> Vec<(CandidateId, f64)> {
        let mut specs: Vec<&ProposalSpec> = candidate::proposal_specs().iter().collect();
        specs.sort_by_key(|spec| numbering.number(spec.id));
        let mut order: Vec<(CandidateId, f64)> = specs
            .into_iter()
            .map(|spec| {
                let hits = self.hits.get(spec.id.index()).copied().unwrap_or(0);
                (spec.id, percent(hits, self.holes))
            })
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        order
    }
}

/// The fixed prompt proposal: the best of `order`, else the default context; further attempts
/// follow `order` (as the paper's Figure 2 does for the fixed proposal).
pub(super) fn fixed_proposal(order: Vec<CandidateId>) -> RankFn<'static> {
    Box::new(move |_| {
        let (best, rest) = order.split_first().expect("there are proposals");
        [*best, CandidateId::DEFAULT]
            .into_iter()
            .chain(rest.iter().copied())
            .collect()
    })
}

/// ProCC's bandit context of a hole, and which perspectives applied there.
fn procc_context(hole: &HoleRows) -> (Context, [bool; ARMS]) {
    let features = CandidateId::PROCC.map(|id| {
        let row = hole.row(id).filter(|_| hole.applicable(id))?;
        Some((
            row.retrieval_score.unwrap_or(0.0),
            row.retrieval_jaccard.unwrap_or(0.0),
        ))
    });
    (bandit::context(features), features.map(|f| f.is_some()))
}

/// The arm `bandit` picks for `hole`, in its context; none where no perspective applied.
fn procc_choice(bandit: &LinUcb, hole: &HoleRows) -> Option<(usize, Context)> {
    let (x, available) = procc_context(hole);
    Some((bandit.choose(&x, available)?, x))
}

/// ProCC's pick for `hole` (a candidate id; none where no perspective applied), as `bandit`
/// makes it without learning.
pub(super) fn procc_pick(bandit: &LinUcb, hole: &HoleRows) -> Option<CandidateId> {
    procc_choice(bandit, hole).map(|(arm, _)| CandidateId::PROCC[arm])
}

/// [`procc_pick`], and `bandit` learns from the pick's exact match once it is made (ProCC's
/// online adaptive selection).
pub(super) fn procc_learn(bandit: &mut LinUcb, hole: &HoleRows) -> Option<CandidateId> {
    let (arm, x) = procc_choice(bandit, hole)?;
    let id = CandidateId::PROCC[arm];
    bandit.update(arm, &x, f64::from(u8::from(hole.succeeded(id))));
    Some(id)
}

/// Rank with a keyhole [`Ranker`]. Label rows keep no context text, so the ranker sees
/// stand-ins that carry only applicability, and no hole window; rankers that read them need a
/// [`RankFn`] of their own.
pub fn by_ranker<'r>(ranker: &'r dyn Ranker) -> impl Fn(&HoleRows) -> Vec<CandidateId> + 'r {
    move |hole| {
        let stand_ins: Vec<ProposalContext> = candidate::proposal_specs()
            .iter()
            .map(|&spec| stand_in(spec, hole.applicable(spec.id)))
            .collect();
        let window = HoleWindow {
            before: "",
            prefix: "",
            after: "",
        };
        let input = RankInput {
            window,
            before_hole: "",
            proposals: &stand_ins,
        };
        ranker.rank(&input).into_iter().map(|r| r.id).collect()
    }
}

fn stand_in(spec: ProposalSpec, applicable: bool) -> ProposalContext {
    let text = if applicable {
        spec.label()
    } else {
        String::new()
    };
    ProposalContext {
        spec,
        context: SourcedText {
            text,
            pieces: Vec::new(),
        },
        ranked_files: Vec::new(),
        keep: spec.source.keep(),
        assembly: crate::compose::Assembly::Capped,
    }
}
