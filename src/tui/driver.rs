//! The effect driver: runs what `update` asks for on tokio and reports back as actions. The
//! work itself is library calls; the functions here only shape their results for the state.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::state::{Action, Candidate, Card, CompleteJob, Effect, Finished, Indexed};
use crate::compose::{self, Composer};
use crate::context::proposals::{self, Request};
use crate::feedback;
use crate::hole::Hole;
use crate::metrics;
use crate::model::config::BackendConfig;
use crate::model::{self, CompletionRequest};
use crate::rank::online::OnlineRanker;
use crate::rank::{FixedRanker, Ranker};
use crate::repo::RepoIndex;

const FEEDBACK_FILE: &str = "feedback.jsonl";
const RANKER_FILE: &str = "online-ranker.json";

/// Open the repository and find the hole (a bare path: its first line; none: the first file).
pub fn index(root: &Path, position: Option<&str>) -> anyhow::Result<Indexed> {
    let cache = crate::repo::default_cache_dir();
    let index = RepoIndex::open(root, cache.as_deref())?;
    anyhow::ensure!(
        !index.files.is_empty(),
        "{}: no source files",
        root.display()
    );
    let hole = match position {
        Some(spec) if spec.contains(':') => Hole::parse(&index, spec)?,
        Some(path) => Hole::at(&index, path, 1, 1)?,
        None => Hole::at(&index, &index.files[0].path, 1, 1)?,
    };
    let backend = model::build_backend(&BackendConfig::embedded(), &index)?;
    Ok(Indexed {
        index: Arc::new(index),
        backend: Arc::from(backend),
        hole,
    })
}

/// Every proposal for the hole with its composed prompt: ranked ones first in rank order, then
/// the ones the ranker left out.
pub fn candidates(index: &RepoIndex, hole: &Hole) -> Vec<Candidate> {
    let budget = compose::DEFAULT_BUDGET;
    let tokenizer = BackendConfig::embedded().tokenizer().tokenizer();
    let built: Vec<_> = proposals::specs()
        .into_iter()
        .map(|spec| {
            let req = Request {
                index,
                hole,
                tokenizer,
                allocation: compose::proposal_allocation(budget, spec.share),
            };
            proposals::build(spec, &req)
        })
        .collect();
    let composer = Composer::new(index, hole, tokenizer, budget);
    let ranked = FixedRanker.rank(&built);
    let candidate = |id: usize, score: Option<f64>| match built.iter().find(|p| p.spec.id == id) {
        Some(p) => Candidate {
            id,
            label: p.spec.label(),
            source: p.spec.source.name(),
            context_type: p.spec.context_type.abbreviation(),
            score,
            applicable: p.applicable(),
            prompt: composer.compose(Some(p)),
        },
        // The default context alone has no proposal.
        None => Candidate {
            id,
            label: "default context".into(),
            source: "current",
            context_type: "default",
            score,
            applicable: true,
            prompt: composer.compose(None),
        },
    };
    let mut out: Vec<Candidate> = ranked
        .iter()
        .map(|r| candidate(r.id, Some(r.score)))
        .collect();
    out.extend(
        built
            .iter()
            .filter(|p| !ranked.iter().any(|r| r.id == p.spec.id))
            .map(|p| candidate(p.spec.id, None)),
    );
    out
}

/// Ask the backend for one completion per prompt, concurrently, and score each.
pub async fn complete(job: &CompleteJob) -> Vec<Card> {
    let requests: Vec<CompletionRequest> = job
        .prompts
        .iter()
        .map(|(_, prompt)| CompletionRequest {
            current_file: Some(job.current_file.clone()),
            ..CompletionRequest::single_line(prompt.clone())
        })
        .collect();
    let results = join_all(requests.iter().map(|r| job.backend.complete(r, None))).await;
    job.prompts
        .iter()
        .zip(results)
        .map(|((id, _), result)| Card {
            candidate: *id,
            outcome: result
                .map_err(|e| e.to_string())
                .and_then(|c| c.into_iter().next().ok_or_else(|| "no completion".into()))
                .map(|c| Finished {
                    scores: metrics::score(&c.text, &job.target),
                    syntax_errors: syntax_errors(job, &c.text),
                    latency_ms: c.latency.as_millis(),
                    text: c.text,
                }),
        })
        .collect()
}

/// Parse the file with the completion in place of the target; count the error and missing
/// nodes that touch the completion.
pub fn syntax_errors(job: &CompleteJob, completion: &str) -> usize {
    let end = (job.offset + job.target.len()).min(job.file_text.len());
    let text = format!(
        "{}{completion}{}",
        &job.file_text[..job.offset],
        &job.file_text[end..]
    );
    let Some(tree) = crate::lang::java::parse(&text) else {
        return 0;
    };
    let span = job.offset..job.offset + completion.len().max(1);
    let mut count = 0;
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let r = node.byte_range();
        let touches = r.start <= span.end && r.end >= span.start;
        if !touches || !(node.has_error() || node.is_missing()) {
            continue;
        }
        if node.is_error() || node.is_missing() {
            count += 1;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    count
}

/// Log the pick and teach the online ranker; says where it went or what failed.
fn record_pick(mut pick: feedback::Pick, picked: usize) -> String {
    let Some(dir) = feedback::data_dir() else {
        return "no data directory: pick not recorded".into();
    };
    pick.unix_time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Err(e) = feedback::append_pick(&dir.join(FEEDBACK_FILE), &pick) {
        return format!("cannot log the pick: {e}");
    }
    let path = dir.join(RANKER_FILE);
    let (mut ranker, warning) = OnlineRanker::load(&path);
    ranker.record_pick(&pick.candidates, picked);
    match ranker.save(&path) {
        Ok(()) => warning.unwrap_or_else(|| {
            format!(
                "pick {} logged to {}; online ranker updated",
                pick.picked + 1,
                dir.display()
            )
        }),
        Err(e) => format!("cannot save the online ranker: {e}"),
    }
}

fn apply(path: &Path, hash: &[u8; 32], offset: usize, replace: usize, text: &str) -> String {
    match feedback::apply_completion(path, hash, offset, replace, text) {
        Ok(()) => format!("wrote the completion into {}", path.display()),
        Err(e) => e.to_string(),
    }
}

/// What only the terminal loop can do.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Quit,
    Suspend,
    SetMouse(bool),
}

/// Runs effects; owns the running completion task so it can be aborted.
pub struct Driver {
    tx: UnboundedSender<Action>,
    running: Option<JoinHandle<()>>,
}

impl Driver {
    pub fn new(tx: UnboundedSender<Action>) -> Driver {
        Driver { tx, running: None }
    }

    /// Blocking library work goes to tokio's blocking pool; its result comes back as an action.
    fn blocking(&self, work: impl FnOnce() -> Action + Send + 'static) {
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(work());
        });
    }

    pub fn run(&mut self, effect: Effect) -> Outcome {
        match effect {
            Effect::Index { root, position } => self.blocking(move || {
                Action::Indexed(index(&root, position.as_deref()).map_err(|e| format!("{e:#}")))
            }),
            Effect::Analyse {
                index,
                hole,
                generation,
            } => self.blocking(move || Action::Analysed {
                generation,
                candidates: candidates(&index, &hole),
            }),
            Effect::Complete(job) => {
                self.cancel();
                let tx = self.tx.clone();
                self.running = Some(tokio::spawn(async move {
                    let cards = complete(&job).await;
                    let generation = job.generation;
                    let _ = tx.send(Action::Completed { generation, cards });
                }));
            }
            Effect::CancelCompletions => self.cancel(),
            Effect::Pick { pick, picked } => {
                self.blocking(move || Action::Message(record_pick(pick, picked)))
            }
            Effect::Apply {
                path,
                hash,
                offset,
                replace,
                text,
            } => {
                self.blocking(move || Action::Message(apply(&path, &hash, offset, replace, &text)))
            }
            Effect::SetMouse(on) => return Outcome::SetMouse(on),
            Effect::Suspend => return Outcome::Suspend,
            Effect::Quit => return Outcome::Quit,
        }
        Outcome::Continue
    }

    fn cancel(&mut self) {
        if let Some(task) = self.running.take() {
            task.abort();
        }
    }
}
