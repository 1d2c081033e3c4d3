//! The effect driver: runs what `update` asks for on tokio and reports back as actions. The
//! work itself is library calls; the functions here only shape their results for the state.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::state::{
    Action, Candidate, Card, CompleteJob, Effect, Finished, Indexed, RankerChoice, apply_ranking,
};
use crate::compose::{self, Composer};
use crate::context::proposals::{self, ProposalContext};
use crate::feedback;
use crate::hole::Hole;
use crate::metrics;
use crate::model::config::BackendConfig;
use crate::model::{self, CompletionRequest, Delta};
use crate::rank::online::{self, OnlineRanker};
use crate::rank::{FixedRanker, RankInput, Ranked, Ranker};
use crate::repo::RepoIndex;

const FEEDBACK_FILE: &str = "feedback.jsonl";

/// Open the repository and find the hole (a bare path: its first line; none: the first file).
/// `progress(done, total)` runs on worker threads as files are indexed.
pub fn index(
    root: &Path,
    position: Option<&str>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> anyhow::Result<Indexed> {
    let cache = crate::repo::default_cache_dir();
    let index = RepoIndex::open_with_progress(root, cache.as_deref(), progress)?;
    for warning in &index.warnings {
        tracing::warn!(%warning, "index");
    }
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

/// Report about every hundredth file (and the last), so a huge repository does not flood the
/// action channel.
fn report_progress(tx: &UnboundedSender<Action>, done: usize, total: usize) {
    if done == total || done.is_multiple_of((total / 100).max(1)) {
        let _ = tx.send(Action::Progress { done, total });
    }
}

/// The order `choice` gives the proposals. The online ranker is read from the data directory,
/// where picks teach it; a missing or unreadable one ranks like a fresh one.
pub fn ranking(choice: RankerChoice, input: &RankInput) -> Vec<Ranked> {
    match choice {
        RankerChoice::Fixed => FixedRanker.rank(input),
        RankerChoice::Online => {
            let (ranker, warning) = OnlineRanker::load_saved();
            if let Some(warning) = warning {
                tracing::warn!(%warning, "online ranker");
            }
            ranker.rank(input)
        }
    }
}

/// Every proposal for the hole with its composed prompt, in `ranker` order (the ones it left out
/// last), and the proposals themselves for later re-ranking.
pub fn candidates(
    index: &RepoIndex,
    hole: &Hole,
    ranker: RankerChoice,
) -> (Vec<Candidate>, Vec<ProposalContext>) {
    let budget = compose::DEFAULT_BUDGET;
    let tokenizer = BackendConfig::embedded().tokenizer().tokenizer();
    let built = proposals::build_for_budget(index, hole, tokenizer, budget);
    let composer = Composer::new(index, hole, tokenizer, budget);
    let mut out: Vec<Candidate> = built
        .iter()
        .map(|p| Candidate {
            id: p.spec.id,
            label: p.spec.label(),
            source: p.spec.source.name(),
            context_type: p.spec.context_type.abbreviation(),
            score: None,
            applicable: p.applicable(),
            prompt: composer.compose(Some(p)),
        })
        .collect();
    // The default context alone has no proposal.
    out.push(Candidate {
        id: proposals::DEFAULT_ID,
        label: "default context".into(),
        source: "current",
        context_type: "default",
        score: None,
        applicable: true,
        prompt: composer.compose(None),
    });
    apply_ranking(
        &mut out,
        &ranking(ranker, &RankInput::new(index, hole, &built)),
    );
    (out, built)
}

/// Ask the backend for one completion per prompt, concurrently, and score each.
/// Complete every prompt of `job` at once; streamed text goes to `stream` as it arrives.
pub async fn complete(job: &CompleteJob, stream: Option<&UnboundedSender<Action>>) -> Vec<Card> {
    let requests: Vec<CompletionRequest> = job
        .prompts
        .iter()
        .map(|(_, prompt)| CompletionRequest {
            current_file: Some(job.current_file.clone()),
            ..CompletionRequest::single_line(prompt.clone())
        })
        .collect();
    let results = join_all(requests.iter().enumerate().map(|(card, r)| async move {
        let (deltas, mut received) = tokio::sync::mpsc::unbounded_channel::<Delta>();
        let forward = async {
            while let Some(delta) = received.recv().await {
                if let Some(ui) = stream {
                    let _ = ui.send(Action::Streamed {
                        generation: job.generation,
                        card,
                        text: delta.text,
                    });
                }
            }
        };
        // The request owns the sender: when it finishes, the channel closes and forwarding ends.
        let request = async move { job.backend.complete(r, Some(&deltas)).await };
        tokio::join!(request, forward).0
    }))
    .await;
    job.prompts
        .iter()
        .zip(results)
        .map(|((id, prompt), result)| Card {
            candidate: *id,
            edited: job.edited.then(|| prompt.clone()),
            outcome: result
                .map_err(|e| {
                    tracing::warn!(candidate = id, error = %e, "backend");
                    e.to_string()
                })
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

/// Syntax errors inside the completion, put in place of the target.
pub fn syntax_errors(job: &CompleteJob, completion: &str) -> usize {
    crate::context::typed::completion_errors(
        &job.current_file,
        &job.file_text,
        job.offset,
        job.target.len(),
        completion,
    )
    .len()
}

/// The hole and hashes only: prompts and completions stay out of the log.
fn log_pick(pick: &feedback::Pick) {
    tracing::info!(
        hole = %pick.hole,
        picked = pick.picked,
        candidates = ?pick.candidates,
        prompt_hash = %pick.prompt_hash,
        "pick"
    );
}

/// Log the pick and teach the online ranker; says where it went or what failed.
fn record_pick(mut pick: feedback::Pick, picked: usize) -> String {
    let Some(dir) = feedback::data_dir() else {
        return "no data directory: pick not recorded".into();
    };
    pick.unix_time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    log_pick(&pick);
    if let Err(e) = feedback::append_pick(&dir.join(FEEDBACK_FILE), &pick) {
        tracing::warn!(error = %e, "cannot log the pick");
        return format!("cannot log the pick: {e}");
    }
    let path = dir.join(online::FILE);
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
    let result = feedback::apply_completion(path, hash, offset, replace, text);
    tracing::info!(path = %path.display(), offset, replace, ok = result.is_ok(), "apply");
    match result {
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
            Effect::Index { root, position } => {
                let tx = self.tx.clone();
                self.blocking(move || {
                    let progress = |done, total| report_progress(&tx, done, total);
                    let indexed = index(&root, position.as_deref(), &progress);
                    Action::Indexed(indexed.map_err(|e| {
                        let error = format!("{e:#}");
                        tracing::error!(root = %root.display(), %error, "open");
                        error
                    }))
                })
            }
            Effect::Analyse {
                index,
                hole,
                generation,
                ranker,
            } => self.blocking(move || {
                let (candidates, proposals) = candidates(&index, &hole, ranker);
                Action::Analysed {
                    generation,
                    candidates,
                    proposals: Arc::new(proposals),
                    ranker,
                }
            }),
            Effect::Rank {
                index,
                hole,
                proposals,
                generation,
                ranker,
            } => self.blocking(move || Action::Ranked {
                generation,
                ranker,
                ranked: ranking(ranker, &RankInput::new(&index, &hole, &proposals)),
            }),
            Effect::Complete(job) => {
                self.cancel();
                let tx = self.tx.clone();
                self.running = Some(tokio::spawn(async move {
                    let cards = complete(&job, Some(&tx)).await;
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_logged_pick_names_the_hole_but_not_the_completions() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Mutex::new(file.reopen().unwrap()))
            .with_ansi(false)
            .finish();
        let pick = feedback::Pick {
            hole: "A.java:3:9".into(),
            candidates: vec![6, 62],
            prompt_hash: feedback::prompt_hash("secret prompt"),
            completions: vec!["secretCompletion()".into(), String::new()],
            picked: 0,
            unix_time: 0,
        };
        tracing::subscriber::with_default(subscriber, || log_pick(&pick));
        let log = std::fs::read_to_string(file.path()).unwrap();
        assert!(log.contains("A.java:3:9") && log.contains(&pick.prompt_hash));
        assert!(!log.contains("secret"), "{log}");
    }
}
