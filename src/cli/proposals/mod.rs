//! `keyhole proposals`: every candidate of a hole, ranked, as a table ([`table`]) or JSON.
//! Both are drawn from one [`ProposalsOut`], so they never disagree.

mod table;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::backends::BackendArgs;
use super::hole::{HoleArgs, HoleOut, Opened, RankArgs, context_segment, default_segment};
use keyhole::candidate::{CandidateId, ContextType, PromptSource};
use keyhole::compose;
use keyhole::rank::{RankerKind, online};
use keyhole::session::{HoleCandidates, proposal_why_not};
use keyhole::token::Keep;

pub fn proposals_command(at: &HoleArgs, backend: &BackendArgs, rank: &RankArgs) -> Result<()> {
    let opened = Opened::open(at, backend, Some(rank))?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let mut all = runtime.block_on(opened.session.candidates(&opened.hole));
    if let Some(warning) = &all.warning {
        anyhow::bail!("{warning}");
    }
    runtime.block_on(all.fit(&opened.session, &opened.hole))?;
    let out = ProposalsOut::new(&opened, rank.ranker, &all);
    if at.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        table::print(&opened, &out)?;
    }
    opened.finish()
}

/// What `keyhole proposals` reports.
#[derive(Serialize)]
pub struct ProposalsOut<'a> {
    repository: &'a Path,
    hole: HoleOut<'a>,
    tokenizer: &'static str,
    budget: usize,
    ranker: RankerKind,
    /// What the ranker ranks with where it reads a classifier tuned for the backend's model
    /// (`keyhole tune`): `RLPG-H tuned for smol, 400 holes`.
    ranks_with: Option<String>,
    /// RLPG's applicable candidates, best first. Ids here are as the profile numbers them.
    ranking: Vec<usize>,
    /// The 62 proposals in id order.
    proposals: Vec<ProposalOut<'a>>,
    default: DefaultOut,
    /// The retrieved candidates 63–72 in id order.
    retrieved: Vec<RetrievedOut<'a>>,
    /// The perspective ProCC's LinUCB bandit picks (a fresh bandit where none was kept).
    procc_pick: Option<CandidateId>,
    /// With `--ranker online`: what it has learnt, shows and picks per candidate (ids as the
    /// profile numbers them); candidates never shown are left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    online_counts: Option<BTreeMap<usize, online::Counts>>,
}

#[derive(Serialize)]
struct ProposalOut<'a> {
    id: usize,
    source: PromptSource,
    context_type: ContextType,
    applicable: bool,
    /// Why it does not apply at this hole, where it does not.
    why_not: Option<String>,
    rank: Option<usize>,
    score: Option<f64>,
    tokens: usize,
    full_tokens: usize,
    allocated: usize,
    truncated: bool,
    cut: Option<Keep>,
    /// Files whose text survived into the prompt, best-ranked first.
    files: Vec<&'a str>,
    /// Every file the source ranked, best first.
    ranked_files: Vec<&'a str>,
    default_tokens: usize,
    /// The whole prompt's tokens as the backend counted them, where it counts for itself (the
    /// prompt was fitted to that count; the other figures are keyhole's).
    backend_tokens: Option<usize>,
}

#[derive(Serialize)]
struct DefaultOut {
    id: CandidateId,
    rank: Option<usize>,
    score: Option<f64>,
    tokens: usize,
    allocated: usize,
    truncated: bool,
    cut: Option<Keep>,
    /// The default prompt's tokens as the backend counted them, where it counts for itself.
    backend_tokens: Option<usize>,
}

#[derive(Serialize)]
struct RetrievedOut<'a> {
    id: CandidateId,
    label: &'static str,
    applicable: bool,
    why_not: Option<&'a str>,
    tokens: usize,
    full_tokens: usize,
    allocated: usize,
    truncated: bool,
    cut: Option<Keep>,
    /// The best retrieved window's similarity to the query.
    score: Option<f64>,
    jaccard: Option<f64>,
    /// Which reading built a typed-hole candidate: `tree-sitter` or the language server's name.
    reader: Option<&'a str>,
    /// Files the context draws on, in prompt order.
    files: Vec<&'a str>,
    default_tokens: Option<usize>,
    /// The whole prompt's tokens as the backend counted them, where it counts for itself (the
    /// prompt was fitted to that count; the other figures are keyhole's).
    backend_tokens: Option<usize>,
}

impl<'a> ProposalsOut<'a> {
    fn new(opened: &'a Opened, ranker: RankerKind, all: &'a HoleCandidates) -> ProposalsOut<'a> {
        let session = &opened.session;
        let place = |id: CandidateId| {
            all.ranking
                .iter()
                .position(|r| r.id == id)
                .map(|i| (i + 1, all.ranking[i].score))
        };
        let mut proposals: Vec<ProposalOut> = all
            .proposals
            .iter()
            .map(|proposal| {
                let spec = proposal.spec;
                let prompt = &all.get(spec.id).expect("every proposal has a row").prompt;
                let seg = context_segment(prompt);
                let in_prompt = seg.map(|s| s.text.files()).unwrap_or_default();
                ProposalOut {
                    id: opened.number(spec.id),
                    source: spec.source,
                    context_type: spec.context_type,
                    applicable: proposal.applicable(),
                    why_not: proposal_why_not(proposal),
                    rank: place(spec.id).map(|p| p.0),
                    score: place(spec.id).map(|p| p.1),
                    tokens: seg.map_or(0, |s| s.tokens),
                    full_tokens: session.tokenizer.count(&proposal.context.text),
                    allocated: compose::proposal_allocation(session.budget, spec.share),
                    truncated: seg.is_some_and(|s| s.cut.is_some()),
                    cut: seg.and_then(|s| s.cut),
                    files: proposal
                        .ranked_files
                        .iter()
                        .filter(|f| in_prompt.contains(f))
                        .map(|&f| opened.path(f))
                        .collect(),
                    ranked_files: proposal
                        .ranked_files
                        .iter()
                        .map(|&f| opened.path(f))
                        .collect(),
                    default_tokens: default_segment(prompt).tokens,
                    backend_tokens: prompt.backend_tokens,
                }
            })
            .collect();
        proposals.sort_by_key(|p| p.id);
        let default_prompt = &all.get(CandidateId::DEFAULT).expect("a default row").prompt;
        let default = default_segment(default_prompt);
        let retrieved = all
            .retrieved
            .iter()
            .map(|built| {
                let row = all
                    .get(built.id)
                    .expect("every retrieved candidate has a row");
                let prompt = row.applicable().then_some(&row.prompt);
                let seg = prompt.and_then(context_segment);
                RetrievedOut {
                    id: built.id,
                    label: built.id.label(),
                    applicable: row.applicable(),
                    why_not: built.why_not.as_deref(),
                    tokens: seg.map_or(0, |s| s.tokens),
                    full_tokens: session.tokenizer.count(&built.context.text),
                    allocated: compose::proposal_allocation(session.budget, built.id.info().share),
                    truncated: seg.is_some_and(|s| s.cut.is_some()),
                    cut: seg.and_then(|s| s.cut),
                    score: built.score,
                    jaccard: built.jaccard,
                    reader: built.reader.as_deref(),
                    files: seg
                        .map(|s| s.text.files())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|f| opened.path(f))
                        .collect(),
                    default_tokens: prompt.map(|p| default_segment(p).tokens),
                    backend_tokens: prompt.and_then(|p| p.backend_tokens),
                }
            })
            .collect();
        ProposalsOut {
            repository: &session.index.root,
            hole: opened.hole_out(),
            tokenizer: session.tokenizer.name(),
            budget: session.budget,
            ranker,
            ranks_with: session.learning.ranks_with(ranker),
            online_counts: (ranker == RankerKind::Online).then(|| {
                let counts = session.learning.online_counts().into_iter();
                counts.map(|(id, n)| (opened.number(id), n)).collect()
            }),
            ranking: all.ranking.iter().map(|r| opened.number(r.id)).collect(),
            proposals,
            default: DefaultOut {
                id: CandidateId::DEFAULT,
                rank: place(CandidateId::DEFAULT).map(|p| p.0),
                score: place(CandidateId::DEFAULT).map(|p| p.1),
                tokens: default.tokens,
                allocated: default.allocated,
                truncated: default.cut.is_some(),
                cut: default.cut,
                backend_tokens: default_prompt.backend_tokens,
            },
            retrieved,
            procc_pick: all.procc.pick,
        }
    }
}
