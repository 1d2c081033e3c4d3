//! Running the protocol on one repository: sample holes, build every proposal's prompt,
//! complete them with bounded concurrency, and append the rows hole by hole.

use futures_util::stream::{self, StreamExt};
use indicatif::ProgressBar;
use rayon::prelude::*;

use super::labels::LabelFile;
use super::{LabelRow, ROWS_PER_HOLE, hole_id};
use crate::compose::{self, Composer, Prompt, SegmentKind};
use crate::context::proposals::{self, DEFAULT_ID, ProposalContext, Request};
use crate::context::retrieval::{
    self, Bm25, FILE_BM25_ID, IDENTIFIER_USAGE_ID, RANDOM_CONTEXT_ID, Retrieval,
};
use crate::context::typed::{self, TypedHole};
use crate::hole::{Hole, sample_holes};
use crate::metrics;
use crate::model::{Backend, BackendError, CompletionRequest};
use crate::repo::RepoIndex;
use crate::token::{Keep, Tokenizer};

/// Holes whose prompts are built together (in parallel) before their completions run.
const CHUNK: usize = 16;
/// Consecutive holes whose completions all failed before the run gives up.
const MAX_FAILED_HOLES: usize = 8;

/// How to run the protocol.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Holes per repository at most (RLPG capped at 10,000).
    pub holes: Option<usize>,
    pub seed: u64,
    pub budget: usize,
    /// Completions in flight at once.
    pub concurrency: usize,
}

/// One repository's run.
pub struct RepoRun<'a> {
    pub repository: &'a str,
    pub index: &'a RepoIndex,
    pub tokenizer: &'a dyn Tokenizer,
    pub backend: &'a dyn Backend,
    /// The repository's retrieval indexes, for the baselines.
    pub retrieval: &'a Retrieval,
    pub options: &'a EvalOptions,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub holes: usize,
    /// Holes already in the label file from an earlier run.
    pub resumed: usize,
    pub completed: usize,
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("cannot write {path}: {source}")]
    Labels {
        path: String,
        source: std::io::Error,
    },
}

/// A candidate's prompt for a hole (`None` when the candidate is not applicable), and the
/// BM25 score of its context against the hole window (RLPG-BM25; proposals only).
struct HolePrompt {
    id: usize,
    prompt: Option<Prompt>,
    bm25: Option<f64>,
}

type HolePrompts = Vec<HolePrompt>;

impl RepoRun<'_> {
    /// Run every hole not yet in `labels`; a hole's rows are written when all its completions
    /// are in. Transient backend failures leave the hole for the next run.
    pub async fn run(
        &self,
        labels: &mut LabelFile,
        progress: &ProgressBar,
    ) -> Result<RunStats, RunError> {
        let holes = sample_holes(self.index, self.options.holes, self.options.seed);
        let todo: Vec<&Hole> = holes
            .iter()
            .filter(|h| !labels.is_done(&self.id(h)))
            .collect();
        let mut stats = RunStats {
            holes: holes.len(),
            resumed: holes.len() - todo.len(),
            completed: 0,
        };
        progress.set_length(holes.len() as u64);
        progress.set_position(stats.resumed as u64);
        let mut failed_in_a_row = 0;
        for chunk in todo.chunks(CHUNK) {
            let prompts: Vec<HolePrompts> = chunk.par_iter().map(|h| self.prompts(h)).collect();
            let outcomes = self.complete_all(chunk, &prompts).await;
            for ((hole, prompts), outcome) in chunk.iter().zip(&prompts).zip(outcomes) {
                match outcome {
                    Ok(predictions) => {
                        let rows = self.rows(hole, prompts, predictions);
                        labels
                            .append_hole(&rows)
                            .map_err(|source| RunError::Labels {
                                path: labels.path().display().to_string(),
                                source,
                            })?;
                        stats.completed += 1;
                        failed_in_a_row = 0;
                    }
                    Err(err) => {
                        failed_in_a_row += 1;
                        if failed_in_a_row >= MAX_FAILED_HOLES {
                            return Err(err.into());
                        }
                    }
                }
                progress.inc(1);
            }
        }
        Ok(stats)
    }

    fn id(&self, hole: &Hole) -> String {
        hole_id(
            self.repository,
            &self.index.files[hole.file].path,
            hole.line + 1,
            hole.column + 1,
        )
    }

    /// The default prompt and every proposal's (RLPG builds all 62 for every hole).
    fn prompts(&self, hole: &Hole) -> HolePrompts {
        let composer = Composer::new(self.index, hole, self.tokenizer, self.options.budget);
        let built: Vec<ProposalContext> = proposals::specs()
            .into_iter()
            .map(|spec| {
                let allocation = compose::proposal_allocation(self.options.budget, spec.share);
                let req = Request {
                    index: self.index,
                    hole,
                    tokenizer: self.tokenizer,
                    allocation,
                };
                proposals::build(spec, &req)
            })
            .collect();
        let bm25 = Bm25::new(built.iter().map(|p| p.context.text.as_str()))
            .scores(&retrieval::hole_window(self.index, hole));
        let mut out: HolePrompts = built
            .iter()
            .zip(bm25)
            .map(|(p, score)| {
                let prompt = p.applicable().then(|| composer.compose(Some(p)));
                HolePrompt {
                    id: p.spec.id,
                    bm25: prompt.as_ref().map(|_| score),
                    prompt,
                }
            })
            .collect();
        out.push(HolePrompt {
            id: DEFAULT_ID,
            prompt: Some(composer.compose(None)),
            bm25: None,
        });
        out.extend(self.baselines(hole, &composer));
        // Every hole has a row per id; an id with no candidate in this build is not applicable.
        for id in 0..ROWS_PER_HOLE {
            if !out.iter().any(|p| p.id == id) {
                out.push(HolePrompt {
                    id,
                    prompt: None,
                    bm25: None,
                });
            }
        }
        out.sort_by_key(|p| p.id);
        out
    }

    /// RLPG's retrieval baselines and the typed-hole candidates, each with half the budget.
    fn baselines(&self, hole: &Hole, composer: &Composer) -> Vec<HolePrompt> {
        let req = retrieval::Request {
            index: self.index,
            hole,
            tokenizer: self.tokenizer,
            allocation: compose::proposal_allocation(self.options.budget, 0.5),
            seed: self.options.seed,
        };
        let contexts = [
            (FILE_BM25_ID, self.retrieval.file_bm25(&req)),
            (IDENTIFIER_USAGE_ID, self.retrieval.identifier_usage(&req)),
            (RANDOM_CONTEXT_ID, self.retrieval.random_context(&req)),
        ];
        let mut out: Vec<HolePrompt> = contexts
            .into_iter()
            .map(|(id, context)| HolePrompt {
                id,
                prompt: (!context.is_empty())
                    .then(|| composer.compose_context(id, &context, 0.5, Keep::Start)),
                bm25: None,
            })
            .collect();
        let typed = TypedHole::new(self.index, hole).contexts();
        out.extend(typed.into_iter().map(|(id, context)| {
            HolePrompt {
                id,
                prompt: (!context.is_empty())
                    .then(|| composer.compose_context(id, &context, typed::SHARE, typed::KEEP)),
                bm25: None,
            }
        }));
        out
    }

    /// Complete every applicable prompt of a chunk; per hole, its predictions by proposal id
    /// (an error text for prompts the server refused), or the transient error that stopped it.
    async fn complete_all(
        &self,
        chunk: &[&Hole],
        prompts: &[HolePrompts],
    ) -> Vec<Result<Vec<(usize, Prediction)>, BackendError>> {
        let jobs = chunk
            .iter()
            .zip(prompts)
            .enumerate()
            .flat_map(|(h, (hole, list))| {
                list.iter().filter_map(move |c| {
                    c.prompt.as_ref().map(|p| (h, c.id, self.request(hole, p)))
                })
            });
        let done: Vec<(usize, usize, Result<Prediction, BackendError>)> = stream::iter(jobs)
            .map(|(h, id, request)| async move { (h, id, self.predict(&request).await) })
            .buffer_unordered(self.options.concurrency.max(1))
            .collect()
            .await;
        let mut per_hole: Vec<Result<Vec<(usize, Prediction)>, BackendError>> =
            vec![Ok(Vec::new()); chunk.len()];
        for (h, id, result) in done {
            match (result, &mut per_hole[h]) {
                (Ok(prediction), Ok(list)) => list.push((id, prediction)),
                (Err(err), slot) => *slot = Err(err),
                (Ok(_), Err(_)) => {}
            }
        }
        per_hole
    }

    fn request(&self, hole: &Hole, prompt: &Prompt) -> CompletionRequest {
        CompletionRequest {
            current_file: Some(self.index.files[hole.file].path.clone()),
            ..CompletionRequest::single_line(prompt.text())
        }
    }

    /// The completion, or the refusal of a prompt (a 4xx), which a retry would not change.
    async fn predict(&self, request: &CompletionRequest) -> Result<Prediction, BackendError> {
        match self.backend.complete(request, None).await {
            Ok(completions) => Ok(Prediction::Text(
                completions
                    .into_iter()
                    .next()
                    .map(|c| c.text)
                    .unwrap_or_default(),
            )),
            Err(BackendError::Status { status, .. })
                if (400..500).contains(&status) && status != 429 =>
            {
                Ok(Prediction::Refused(format!("status {status}")))
            }
            Err(err) => Err(err),
        }
    }

    fn rows(
        &self,
        hole: &Hole,
        prompts: &HolePrompts,
        mut predictions: Vec<(usize, Prediction)>,
    ) -> Vec<LabelRow> {
        let target = hole.target.clone().unwrap_or_default();
        let file = &self.index.files[hole.file].path;
        prompts
            .iter()
            .map(|HolePrompt { id, prompt, bm25 }| {
                let prediction = predictions
                    .iter()
                    .position(|(p, _)| p == id)
                    .map(|i| predictions.swap_remove(i).1);
                let (text, error) = match prediction {
                    Some(Prediction::Text(t)) => (t, None),
                    Some(Prediction::Refused(why)) => (String::new(), Some(why)),
                    None => (String::new(), None),
                };
                let scores = metrics::score(&text, &target);
                let segment =
                    |kind: fn(&SegmentKind) -> bool| prompt.as_ref().and_then(|p| p.segment(kind));
                let proposal = segment(|k| matches!(k, SegmentKind::Proposal { .. }));
                let default = segment(|k| matches!(k, SegmentKind::Default));
                LabelRow {
                    hole_id: self.id(hole),
                    repository: self.repository.to_string(),
                    file: file.clone(),
                    line: hole.line + 1,
                    column: hole.column + 1,
                    proposal_id: *id,
                    applicable: prompt.is_some(),
                    success: prompt.is_some() && error.is_none() && scores.exact_match,
                    edit_similarity: if prompt.is_some() {
                        scores.edit_similarity
                    } else {
                        0.0
                    },
                    edit_distance: scores.edit_distance,
                    prediction: text,
                    target: target.clone(),
                    proposal_tokens: proposal.map_or(0, |s| s.tokens),
                    default_tokens: default.map_or(0, |s| s.tokens),
                    proposal_truncated: proposal.is_some_and(|s| s.cut.is_some()),
                    default_truncated: default.is_some_and(|s| s.cut.is_some()),
                    backend: self.backend.name().to_string(),
                    error,
                    bm25: *bm25,
                }
            })
            .collect()
    }
}

#[derive(Clone, Debug)]
enum Prediction {
    Text(String),
    Refused(String),
}
