//! RLPG-BM25 (section 3.2, method 6) as a ranker: the applicable proposals ordered by the BM25
//! score of their context against the hole window, then the default context.

use super::{RankInput, Ranked, Ranker, sorted};
use crate::candidate::CandidateId;
use crate::context::proposals::ProposalContext;
use crate::context::retrieval::Bm25;

pub struct Bm25Ranker;

/// Each proposal's BM25 score against the hole window `window`, BM25 fitted over the hole's
/// proposal contexts as the paper's baseline is.
pub fn proposal_scores(proposals: &[ProposalContext], window: &str) -> Vec<f64> {
    Bm25::new(proposals.iter().map(|p| p.context.text.as_str())).scores(window)
}

impl Ranker for Bm25Ranker {
    /// BM25 is fitted over the hole's 62 proposal contexts, as the paper's baseline is; the
    /// default context ranks last with score 0.
    fn rank(&self, input: &RankInput) -> Vec<Ranked> {
        let scores = proposal_scores(input.proposals, &input.window.text());
        let applicable = input
            .proposals
            .iter()
            .zip(scores)
            .filter(|(p, _)| p.applicable());
        let mut ranked = sorted(
            applicable
                .map(|(p, score)| Ranked {
                    id: p.spec.id,
                    score,
                })
                .collect(),
        );
        ranked.push(Ranked {
            id: CandidateId::DEFAULT,
            score: 0.0,
        });
        ranked
    }
}
