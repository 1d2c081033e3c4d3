//! Rankers order the candidate contexts of a hole; every view (CLI, reports, TUI) ranks through
//! [`Ranker`]. The default context is a candidate like the others (id 62).

pub mod bandit;
pub mod bm25;
pub mod classifier;
pub mod online;

use serde::Serialize;

use crate::candidate::CandidateId;
use crate::compose::{Composer, Part, Prompt};
use crate::context::proposals::ProposalContext;
use crate::hole::{Hole, HoleWindow};
use crate::repo::RepoIndex;

/// A candidate's place in a ranking.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub id: CandidateId,
    pub score: f64,
}

/// What a ranker may look at for one hole: the code around it and every proposal's context.
#[derive(Clone, Copy)]
pub struct RankInput<'a> {
    pub window: HoleWindow<'a>,
    /// The file up to the hole: the default context's material.
    pub before_hole: &'a str,
    /// All 62 proposals in id order, applicable or not.
    pub proposals: &'a [ProposalContext],
}

impl<'a> RankInput<'a> {
    pub fn new(index: &'a RepoIndex, hole: &Hole, proposals: &'a [ProposalContext]) -> Self {
        RankInput {
            window: HoleWindow::of(index, hole),
            before_hole: &index.files[hole.file].text[..hole.offset],
            proposals,
        }
    }

    /// Whether candidate `id` (a proposal or the default context) can be used for this hole.
    pub fn applicable(&self, id: CandidateId) -> bool {
        id == CandidateId::DEFAULT
            || self
                .proposals
                .iter()
                .any(|p| p.spec.id == id && p.applicable())
    }
}

/// Orders the applicable proposals of one hole, plus the default context, best first.
pub trait Ranker {
    fn rank(&self, input: &RankInput) -> Vec<Ranked>;
}

/// The rankers a person can choose between.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RankerKind {
    /// RLPG-H: the classifier reading the hole window.
    RlpgH,
    /// RLPG-R: the classifier attending from the hole window to each candidate's context.
    RlpgR,
    /// RLPG-BM25: proposals by the BM25 similarity of their context to the hole window.
    Bm25,
    /// The same order for every hole.
    Fixed,
    /// The fixed order moved by the completions people picked.
    Online,
}

impl RankerKind {
    /// Every ranker, in the order the UI cycles through them.
    pub const ALL: [RankerKind; 5] = [
        RankerKind::RlpgH,
        RankerKind::RlpgR,
        RankerKind::Bm25,
        RankerKind::Fixed,
        RankerKind::Online,
    ];

    /// How the command line and config files spell it: `rlpg-h`, `bm25`.
    pub fn key(self) -> &'static str {
        match self {
            RankerKind::RlpgH => "rlpg-h",
            RankerKind::RlpgR => "rlpg-r",
            RankerKind::Bm25 => "bm25",
            RankerKind::Fixed => "fixed",
            RankerKind::Online => "online",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RankerKind::RlpgH => "RLPG-H",
            RankerKind::RlpgR => "RLPG-R",
            RankerKind::Bm25 => "BM25",
            RankerKind::Fixed => "fixed",
            RankerKind::Online => "online",
        }
    }
}

impl std::str::FromStr for RankerKind {
    type Err = UnknownRanker;

    fn from_str(text: &str) -> Result<RankerKind, UnknownRanker> {
        RankerKind::ALL
            .into_iter()
            .find(|k| k.key() == text)
            .ok_or_else(|| UnknownRanker(text.to_string()))
    }
}

/// A ranker name keyhole does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a ranker ({known})",
    known = RankerKind::ALL.map(RankerKind::key).join(", ")
)]
pub struct UnknownRanker(pub String);

/// What the rankers need loaded: the classifier's weights and the online ranker's picks.
pub struct Rankers {
    pub classifier: classifier::Classifier,
    pub online: online::OnlineRanker,
    /// Whether the online ranker starts from the classifier's RLPG-H ranking rather than the
    /// fixed order: a classifier tuned for the backend's model knows better than the fixed order.
    pub online_from_classifier: bool,
}

impl Rankers {
    /// The ranker of `kind`; a classifier head the model lacks is an error naming the file.
    pub fn get(&self, kind: RankerKind) -> Result<Box<dyn Ranker + '_>, classifier::ModelError> {
        Ok(match kind {
            RankerKind::RlpgH => Box::new(self.classifier.ranker(classifier::Variant::H)?),
            RankerKind::RlpgR => Box::new(self.classifier.ranker(classifier::Variant::R)?),
            RankerKind::Bm25 => Box::new(bm25::Bm25Ranker),
            RankerKind::Fixed => Box::new(FixedRanker),
            RankerKind::Online if self.online_from_classifier => Box::new(online::Starting {
                online: &self.online,
                prior: self.classifier.ranker(classifier::Variant::H)?,
            }),
            RankerKind::Online => Box::new(self.online.clone()),
        })
    }
}

/// Scored candidates, best first; ties keep id order.
fn sorted(mut ranked: Vec<Ranked>) -> Vec<Ranked> {
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    ranked
}

/// A fixed prior order, the same for every hole (RLPG's "fixed prompt proposal" baseline,
/// extended to a full order).
///
/// Measured with the embedded model on 300 RLPG holes of each training repository (junit4,
/// commons-lang3, args4j): post lines at 50%, 75% and 25% lead (42.5%, 42.5%, 42.1% exact
/// match against 37.8% for the default context); every other proposal scores within half a
/// point of the default, so the rest follow the default context in Table 7 order.
pub struct FixedRanker;

/// Post lines 50%, 75%, 25% (ids 6, 7, 5), then the default context.
const FIXED_LEADERS: [usize; 4] = [6, 7, 5, CandidateId::DEFAULT.index()];

impl FixedRanker {
    pub(crate) fn order() -> impl Iterator<Item = CandidateId> {
        let leaders = FIXED_LEADERS.into_iter().filter_map(CandidateId::new);
        let rest = CandidateId::rlpg().filter(|id| !FIXED_LEADERS.contains(&id.index()));
        leaders.chain(rest)
    }
}

impl Ranker for FixedRanker {
    fn rank(&self, input: &RankInput) -> Vec<Ranked> {
        let order: Vec<CandidateId> = Self::order().filter(|&id| input.applicable(id)).collect();
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

/// Share of the budget the top-l proposals divide between them when l > 1 (appendix D.4 divides
/// "the total context length" by normalized probability; keyhole divides the share one proposal
/// would get, so that the default context keeps its half as in every other prompt).
const COMPOSED_SHARE: f64 = 0.5;

/// The prompt from the `l` best candidates of `ranked` (appendix D.4): each gets a part of
/// `COMPOSED_SHARE` in proportion to its normalized score, the best placed nearest the code.
/// With l = 1 the single proposal's prompt is composed as any proposal's (its own share, or as
/// its profile sends it), so it is the ranker's usual prompt. The
/// default context, if ranked among them, adds nothing but its allocation goes back to it.
pub fn compose_top(
    composer: &Composer,
    ranked: &[Ranked],
    proposals: &[ProposalContext],
    l: usize,
) -> Prompt {
    let top = &ranked[..l.min(ranked.len())];
    if let [only] = top
        && let Some(proposal) = proposals.iter().find(|p| p.spec.id == only.id)
    {
        return composer.compose(proposal);
    }
    let total: f64 = top.iter().map(|r| r.score.max(0.0)).sum();
    let budget = (composer.budget() as f64 * COMPOSED_SHARE).floor();
    let parts: Vec<Part> = top
        .iter()
        .rev()
        .filter_map(|r| {
            let proposal = proposals.iter().find(|p| p.spec.id == r.id)?;
            let allocated = if total > 0.0 {
                (budget * r.score.max(0.0) / total).floor() as usize
            } else {
                (budget / top.len() as f64).floor() as usize
            };
            Some(Part {
                id: r.id,
                context: &proposal.context,
                allocated,
                keep: proposal.keep,
            })
        })
        .collect();
    composer.compose_parts(&parts)
}
