//! The classifier in the evaluation (section 3.2 methods 10–11, appendix D.4): RLPG-H and
//! RLPG-R rank every labelled hole, whose inputs are rebuilt from the repository (label rows
//! keep no context text), and the prompts composed from their top-l proposals are completed by
//! the backend (Table 10). Rankings pick among the labelled rows; compositions need new
//! completions.

use std::collections::BTreeMap;

use futures_util::stream::{self, StreamExt};
use rayon::prelude::*;
use serde::Serialize;

use super::report::HoleRows;
use super::runner::{Failures, RunError};
use crate::candidate::CandidateId;
use crate::compose::{Composer, Prompt};
use crate::context::fidelity::Fidelity;
use crate::context::perspectives::first_completion;
use crate::context::proposals::{ProposalContext, build_for_budget};
use crate::hole::Hole;
use crate::metrics;
use crate::model::{Backend, BackendError, CompletionRequest};
use crate::rank::classifier::{Classifier, Variant};
use crate::rank::{RankInput, Ranked, Ranker, compose_top};
use crate::repo::RepoIndex;
use crate::session::{FitError, FitTarget, counts_exactly, fit};
use crate::token::Tokenizer;

/// Holes ranked and composed at once, before their compositions are completed.
const PREPARED_AT_ONCE: usize = 64;

/// What to run.
pub struct ClassifierEval<'a> {
    pub classifier: &'a Classifier,
    pub variants: Vec<Variant>,
    /// Compositions to complete, l > 1 (l = 1 is the ranking's own row).
    pub compositions: Vec<usize>,
    pub tokenizer: &'static dyn Tokenizer,
    pub budget: usize,
    pub concurrency: usize,
    pub fidelity: Fidelity,
}

/// One hole's results.
pub struct Classified {
    pub hole_id: String,
    /// Per variant, the candidate ids best first.
    pub rankings: Vec<(Variant, Vec<CandidateId>)>,
    /// Per variant and l, whether the composed prompt's completion matched.
    pub compositions: Vec<(Variant, usize, bool)>,
    /// The request that failed, if one did: the hole then has no compositions (Table 10 leaves
    /// it out; a failure is no miss).
    pub failed: Option<BackendError>,
}

/// A hole ranked, its compositions waiting to be composed and completed.
struct Pending {
    classified: Classified,
    hole: Hole,
    /// Its contexts, where its compositions are composed again to fit the backend (else
    /// none).
    proposals: Vec<ProposalContext>,
    /// Per variant, its ranking of the proposals.
    ranked: Vec<(Variant, Vec<Ranked>)>,
    /// Per variant and l, the composition within the budget as keyhole counts it.
    prompts: Vec<(Variant, usize, Prompt)>,
}

impl ClassifierEval<'_> {
    /// Rank and compose every hole of `holes` (all from the repository `index`); holes that no
    /// longer exist in the repository are left out. Stops when `failures` says so.
    pub async fn run(
        &self,
        index: &RepoIndex,
        holes: &[&HoleRows],
        backend: &dyn Backend,
        failures: &mut Failures,
    ) -> Result<Vec<Classified>, RunError> {
        // A hole's 62 contexts are kept until its compositions are sent only where the backend
        // counts tokens its own way (they are composed again to fit it).
        let refit = !self.compositions.is_empty() && !counts_exactly(backend, self.tokenizer);
        let mut out = Vec::new();
        // Ranked in groups, so that memory holds one group's contexts, not every hole's.
        for group in holes.chunks(PREPARED_AT_ONCE) {
            let pending: Vec<Pending> = group
                .par_iter()
                .filter_map(|h| self.prepare(index, h, refit))
                .collect();
            let mut done = stream::iter(pending)
                .map(|p| self.complete(p, index, backend, refit))
                .buffer_unordered(self.concurrency.max(1));
            while let Some(classified) = done.next().await {
                let failed = classified.failed.as_ref();
                failures.request(&failed.map_or(Ok(()), |e| Err(e.clone())))?;
                failures.hole(failed)?;
                out.push(classified);
            }
        }
        Ok(out)
    }

    /// `rows`' hole ranked and its compositions composed; its contexts kept if `refit`.
    fn prepare(&self, index: &RepoIndex, rows: &HoleRows, refit: bool) -> Option<Pending> {
        let hole = rows.hole(index).ok()?;
        let proposals = build_for_budget(index, &hole, self.tokenizer, self.budget, self.fidelity);
        let input = RankInput::new(index, &hole, &proposals);
        let ranked: Vec<(Variant, Vec<Ranked>)> = self
            .variants
            .iter()
            .filter_map(|&v| Some((v, self.classifier.ranker(v).ok()?.rank(&input))))
            .collect();
        let rankings = ranked
            .iter()
            .map(|(v, r)| (*v, r.iter().map(|r| r.id).collect()))
            .collect();
        let composer = Composer::new(
            index,
            &hole,
            self.tokenizer,
            self.budget,
            self.fidelity.default_reading(),
        );
        let prompts = ranked
            .iter()
            .flat_map(|(v, r)| {
                let composer = &composer;
                let proposals = &proposals;
                self.compositions
                    .iter()
                    .map(move |&l| (*v, l, compose_top(composer, r, proposals, l)))
            })
            .collect();
        Some(Pending {
            classified: Classified {
                hole_id: rows.hole_id.to_string(),
                rankings,
                compositions: Vec::new(),
                failed: None,
            },
            hole,
            proposals: if refit { proposals } else { Vec::new() },
            ranked,
            prompts,
        })
    }

    /// The hole's compositions completed (composed again to fit the backend's own token count
    /// if `refit`), or the first failed request.
    async fn complete(
        &self,
        pending: Pending,
        index: &RepoIndex,
        backend: &dyn Backend,
        refit: bool,
    ) -> Classified {
        let Pending {
            mut classified,
            hole,
            proposals,
            ranked,
            prompts,
        } = pending;
        let target = FitTarget {
            backend,
            index,
            tokenizer: self.tokenizer,
            budget: self.budget,
            default_reading: self.fidelity.default_reading(),
        };
        let expected = hole.target.as_deref().unwrap_or_default();
        for (variant, l, prompt) in prompts {
            let prompt = match refit {
                false => Ok(prompt),
                true => {
                    let ranked = ranked.iter().find(|(v, _)| *v == variant).map(|(_, r)| r);
                    let ranked = ranked.map_or(&[][..], Vec::as_slice);
                    let compose = |c: &Composer| compose_top(c, ranked, &proposals, l);
                    fit(&target, &hole, compose).await
                }
            };
            let completed = match prompt {
                Ok(prompt) => {
                    let request = CompletionRequest {
                        current_file: Some(index.files[hole.file].path.clone()),
                        ..CompletionRequest::single_line(prompt.text())
                    };
                    first_completion(backend, &request).await
                }
                Err(FitError::Backend(err)) => Err(err),
                // Not even the code before the hole fits: a miss, as for a model that cannot
                // take the prompt.
                Err(FitError::DoesNotFit { .. }) => Ok(String::new()),
            };
            match completed {
                Ok(text) => {
                    let hit = metrics::score(&text, expected).exact_match;
                    classified.compositions.push((variant, l, hit));
                }
                Err(err) => {
                    classified.compositions.clear();
                    classified.failed = Some(err);
                    return classified;
                }
            }
        }
        classified
    }
}

/// Table 10: the success rate of each composition, hole-wise, against the default context on
/// the same holes.
#[derive(Debug, Serialize)]
pub struct CompositionRow {
    pub method: String,
    pub l: usize,
    pub holes: usize,
    pub success: f64,
    pub default: f64,
}

/// Table 10's counts, one classified hole at a time: rows for l = 1 (the ranking's pick, from
/// the label rows) and each composition, over the holes whose compositions all completed.
#[derive(Default)]
pub struct CompositionTally {
    holes: usize,
    default_hits: usize,
    /// Variants in the order the first hole ranks with them, each with its hits at l = 1 and
    /// per composition l.
    variants: Vec<(Variant, usize, BTreeMap<usize, usize>)>,
    /// Holes whose composition requests failed, and the last such failure.
    failed: usize,
    last_failure: Option<BackendError>,
}

impl CompositionTally {
    /// Count `result`, the classification of `hole`.
    pub fn add(&mut self, result: &Classified, hole: &HoleRows) {
        if self.holes == 0 && self.failed == 0 {
            self.variants = result
                .rankings
                .iter()
                .map(|r| (r.0, 0, BTreeMap::new()))
                .collect();
        }
        if let Some(err) = &result.failed {
            self.failed += 1;
            self.last_failure = Some(err.clone());
            return;
        }
        self.holes += 1;
        self.default_hits += usize::from(hole.succeeded(CandidateId::DEFAULT));
        for (variant, top_hits, by_l) in &mut self.variants {
            let ranking = result.rankings.iter().find(|r| r.0 == *variant);
            let top = ranking.and_then(|r| r.1.first());
            *top_hits += usize::from(top.is_some_and(|&id| hole.succeeded(id)));
            for &(v, l, hit) in &result.compositions {
                if v == *variant {
                    *by_l.entry(l).or_default() += usize::from(hit);
                }
            }
        }
    }

    /// Holes whose composition requests failed (Table 10 leaves them out), and the last error.
    pub fn failures(&self) -> (usize, Option<&BackendError>) {
        (self.failed, self.last_failure.as_ref())
    }

    /// Table 10's rows.
    pub fn rows(&self) -> Vec<CompositionRow> {
        let n = self.holes;
        let percent = |hits: usize| 100.0 * hits as f64 / n.max(1) as f64;
        let default = percent(self.default_hits);
        let mut rows = Vec::new();
        for (variant, top_hits, by_l) in &self.variants {
            let row = |l: usize, hits: usize| CompositionRow {
                method: variant.name().into(),
                l,
                holes: n,
                success: percent(hits),
                default,
            };
            rows.push(row(1, *top_hits));
            rows.extend(by_l.iter().map(|(&l, &hits)| row(l, hits)));
        }
        rows
    }
}

/// Table 10 as markdown.
pub fn composition_markdown(rows: &[CompositionRow]) -> String {
    let mut out = String::from(
        "\n## Composition of the top-l proposals (Table 10)\n\n\
         The top l candidates of the classifier share half the budget in proportion to their \
         normalized probabilities (appendix D.4); l = 1 is the classifier's own pick.\n\n\
         | Method | l | Holes | Success (hole) | Default (hole) | Rel. ↑ |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        let gain = if r.default > 0.0 {
            format!("{:+.2}%", 100.0 * (r.success - r.default) / r.default)
        } else {
            "-".into()
        };
        out += &format!(
            "| {} | {} | {} | {:.2}% | {:.2}% | {gain} |\n",
            r.method, r.l, r.holes, r.success, r.default
        );
    }
    out
}
