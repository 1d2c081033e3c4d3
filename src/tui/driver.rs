//! The effect driver: runs what `update` asks for on tokio and reports back as actions. The
//! work itself is library calls; the functions here only shape their results for the state.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use futures_util::future::join_all;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::state::{
    Action, Availability, BanditLesson, Candidate, Card, CompleteJob, Effect, Finished, Indexed,
    Procc, SearchIndex, apply_ranking,
};
use crate::candidate::CandidateId;
use crate::compose::{Composer, Prompt};
use crate::context::fidelity::Fidelity;
use crate::context::perspectives::{self, Perspectives};
use crate::context::proposals::{self, ProposalContext};
use crate::context::retrieval::Retrieval;
use crate::context::windows::WindowIndex;
use crate::dirs::Dirs;
use crate::feedback;
use crate::hole::Hole;
use crate::metrics;
use crate::model::config::BackendConfig;
use crate::model::{self, Backend, CompletionRequest, Delta};
use crate::rank::bandit::{self, LinUcb};
use crate::rank::classifier::Classifier;
use crate::rank::online::{self, OnlineRanker};
use crate::rank::{RankInput, Ranked, RankerKind, Rankers};
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

const FEEDBACK_FILE: &str = "feedback.jsonl";

/// Open the repository, find the hole (a bare path: its first line; none: the first file)
/// and build the backend that completes it. `progress(done, total)` runs on worker threads as
/// files are indexed.
pub fn index(
    root: &Path,
    position: Option<&str>,
    backend: &BackendConfig,
    dirs: &Dirs,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> anyhow::Result<Indexed> {
    let index = RepoIndex::open_with_progress(root, dirs.cache.as_deref(), progress)?;
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
    let backend = model::build_backend(backend, &index)?;
    let search = SearchIndex {
        retrieval: Retrieval::new(&index),
        windows: WindowIndex::new(&index),
    };
    Ok(Indexed {
        index: Arc::new(index),
        search: Arc::new(search),
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

/// The rankers, loaded on first use: the bundled classifier once, not per key press, and the
/// online ranker from the data directory, kept current by this session's picks.
#[derive(Clone, Default)]
pub struct SharedRankers {
    rankers: Arc<OnceLock<RwLock<Rankers>>>,
    /// Where the online ranker, the bandit and the picks are kept.
    dirs: Arc<Dirs>,
}

impl SharedRankers {
    fn new(dirs: Dirs) -> SharedRankers {
        SharedRankers {
            rankers: Arc::default(),
            dirs: Arc::new(dirs),
        }
    }

    fn loaded(&self) -> &RwLock<Rankers> {
        self.rankers
            .get_or_init(|| Self::with(Classifier::bundled(), &self.dirs))
    }

    /// The rankers with `classifier` behind RLPG-H and RLPG-R.
    fn with(classifier: Classifier, dirs: &Dirs) -> RwLock<Rankers> {
        let (online, warning) = OnlineRanker::load_saved(dirs);
        if let Some(warning) = warning {
            tracing::warn!(%warning, "online ranker");
        }
        RwLock::new(Rankers { classifier, online })
    }

    /// The order `kind` gives the proposals, or why it cannot rank.
    pub fn rank(&self, kind: RankerKind, input: &RankInput) -> Result<Vec<Ranked>, String> {
        let rankers = self.loaded().read().unwrap_or_else(PoisonError::into_inner);
        let ranker = rankers.get(kind).map_err(|e| e.to_string())?;
        Ok(ranker.rank(input))
    }

    /// Rank with the online ranker as a pick left it.
    fn learnt(&self, online: OnlineRanker) {
        let mut rankers = self
            .loaded()
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        rankers.online = online;
    }
}

/// Every candidate of a hole that needs no backend, in ranker order.
pub struct Analysis {
    /// RLPG's proposals and the default context in `ranker` order (the ones it left out
    /// last), the retrieved candidates among them, those needing the backend still building.
    pub candidates: Vec<Candidate>,
    /// What the ranker ranks.
    pub proposals: Vec<ProposalContext>,
    /// The retrieved candidates built so far (RepoCoder's second iteration starts from them).
    pub retrieved: Vec<perspectives::Candidate>,
    /// Why the ranker could not rank (the candidates are then in id order).
    pub warning: Option<String>,
}

/// What the candidates of a hole are built from: the open repository, its search indexes and
/// the budget, counted in the chosen backend's tokenizer.
#[derive(Clone, Copy)]
pub struct Building<'a> {
    pub index: &'a RepoIndex,
    pub search: &'a SearchIndex,
    pub tokenizer: &'static dyn Tokenizer,
    pub budget: usize,
}

impl<'a> Building<'a> {
    /// The retrieval perspectives over the open repository.
    fn perspectives(&self) -> Perspectives<'a> {
        Perspectives {
            index: self.index,
            retrieval: &self.search.retrieval,
            windows: &self.search.windows,
            tokenizer: self.tokenizer,
            budget: self.budget,
            seed: perspectives::DEFAULT_SEED,
            // The UI shows the paper profile; it has no --fidelity switch yet.
            fidelity: Fidelity::Paper,
        }
    }

    fn composer<'h>(&self, hole: &'h Hole) -> Composer<'h>
    where
        'a: 'h,
    {
        Composer::new(self.index, hole, self.tokenizer, self.budget)
    }
}

/// Build every candidate that needs no backend, with placeholders for those that do, ranked.
pub fn analyse(
    building: Building,
    hole: &Hole,
    ranker: RankerKind,
    rankers: &SharedRankers,
) -> Analysis {
    let index = building.index;
    let built = proposals::build_for_budget(index, hole, building.tokenizer, building.budget);
    let composer = building.composer(hole);
    let retrieved = building.perspectives().immediate(hole);
    let mut candidates: Vec<Candidate> = built
        .iter()
        .map(|p| Candidate {
            id: p.spec.id,
            label: p.spec.label(),
            source: p.spec.source.name(),
            context_type: p.spec.context_type.abbreviation(),
            score: None,
            retrieval_score: None,
            availability: match p.applicable() {
                true => Availability::Applicable,
                false => Availability::NotApplicable(None),
            },
            prompt: composer.compose(Some(p)),
        })
        .collect();
    // The default context alone has no proposal.
    candidates.push(Candidate {
        id: CandidateId::DEFAULT,
        label: "default context".into(),
        source: "current",
        context_type: "default",
        score: None,
        retrieval_score: None,
        availability: Availability::Applicable,
        prompt: composer.compose(None),
    });
    candidates.extend(retrieved.iter().map(|c| retrieved_row(c, &composer)));
    candidates.extend(CandidateId::NEED_BACKEND.map(|id| {
        let prompt = composer.compose(None);
        retrieved_candidate(id, Availability::Building, None, prompt)
    }));
    let ranking = rankers.rank(ranker, &RankInput::new(index, hole, &built));
    apply_ranking(&mut candidates, ranking.as_deref().unwrap_or_default());
    Analysis {
        candidates,
        proposals: built,
        retrieved,
        warning: ranking.err(),
    }
}

fn retrieved_candidate(
    id: CandidateId,
    availability: Availability,
    retrieval_score: Option<f64>,
    prompt: Prompt,
) -> Candidate {
    let info = id.info();
    Candidate {
        id,
        label: info.label.clone(),
        source: info.source,
        context_type: info.context_type,
        score: None,
        retrieval_score,
        availability,
        prompt,
    }
}

/// A built retrieved candidate as a row; one that does not apply keeps the default prompt.
fn retrieved_row(built: &perspectives::Candidate, composer: &Composer) -> Candidate {
    let availability = match built.applicable() {
        true => Availability::Applicable,
        false => Availability::NotApplicable(built.why_not.clone()),
    };
    let prompt = built
        .compose(composer)
        .unwrap_or_else(|| composer.compose(None));
    retrieved_candidate(built.id, availability, built.score, prompt)
}

/// The retrieved candidates that need the backend, and ProCC's pick once all are built. A
/// backend failure makes them not applicable, saying why.
pub async fn retrieve_later(
    building: Building<'_>,
    backend: &dyn Backend,
    hole: &Hole,
    immediate: &[perspectives::Candidate],
    dirs: &Dirs,
) -> (Vec<Candidate>, Procc) {
    let composer = building.composer(hole);
    let iterations = usize::from(perspectives::DEFAULT_ITERATIONS);
    let built = perspectives::build_later(
        &building.perspectives(),
        hole,
        &composer,
        backend,
        iterations,
        immediate,
    )
    .await;
    let later = match built {
        Ok(later) => later,
        Err(e) => {
            tracing::warn!(error = %e, "retrieved candidates");
            let why = format!("the backend failed: {e}");
            let failed = |id| perspectives::Candidate {
                id,
                why_not: Some(why.clone()),
                ..Default::default()
            };
            CandidateId::NEED_BACKEND.map(failed).to_vec()
        }
    };
    let procc = procc_choice(immediate.iter().chain(&later), dirs);
    let rows = later.iter().map(|c| retrieved_row(c, &composer)).collect();
    (rows, procc)
}

/// ProCC's pick by the bandit kept in the data directory; a fresh bandit (which picks the
/// first applicable perspective and learns from there) where there is none.
fn procc_choice<'c>(
    built: impl IntoIterator<Item = &'c perspectives::Candidate>,
    dirs: &Dirs,
) -> Procc {
    let (context, available) = perspectives::procc_context(built);
    let (bandit, warning) = dirs
        .data_file(bandit::FILE)
        .map_or_else(|| (LinUcb::default(), None), |path| LinUcb::load(&path));
    if let Some(warning) = warning {
        tracing::warn!(%warning, "ProCC bandit");
    }
    Procc {
        context,
        available,
        pick: bandit
            .choose(&context, available)
            .map(|arm| CandidateId::PROCC[arm]),
    }
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
                    tracing::warn!(candidate = id.index(), error = %e, "backend");
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
        picked = pick.picked.index(),
        candidates = ?pick.candidates,
        prompt_hash = %pick.prompt_hash,
        "pick"
    );
}

/// Log the pick, teach the online ranker and, for a ProCC perspective, the bandit; says where
/// it went or what failed.
fn record_pick(
    mut pick: feedback::Pick,
    lesson: Option<BanditLesson>,
    rankers: &SharedRankers,
) -> String {
    let Some(dir) = rankers.dirs.data.clone() else {
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
    ranker.record_pick(&pick.candidates, pick.picked);
    if let Err(e) = ranker.save(&path) {
        return format!("cannot save the online ranker: {e}");
    }
    rankers.learnt(ranker);
    let taught = match lesson {
        Some(lesson) => match teach_bandit(&dir.join(bandit::FILE), &lesson) {
            Ok(()) => "; online ranker and ProCC bandit updated",
            Err(e) => return format!("cannot save the ProCC bandit: {e}"),
        },
        None => "; online ranker updated",
    };
    warning.unwrap_or_else(|| {
        format!(
            "pick of {} {} logged to {}{taught}",
            pick.picked,
            pick.picked.label(),
            dir.display()
        )
    })
}

/// Update the bandit saved at `path` with each reward of `lesson`.
fn teach_bandit(path: &Path, lesson: &BanditLesson) -> std::io::Result<()> {
    let (mut bandit, warning) = LinUcb::load(path);
    if let Some(warning) = warning {
        tracing::warn!(%warning, "ProCC bandit");
    }
    for &(arm, reward) in &lesson.rewards {
        bandit.update(arm, &lesson.context, reward);
    }
    bandit.save(path)
}

fn apply(
    path: &Path,
    hash: &[u8; 32],
    offset: usize,
    replace: usize,
    text: &str,
    dirs: &Dirs,
) -> String {
    let result =
        feedback::apply_completion(path, hash, offset, replace, text, dirs.data.as_deref());
    tracing::info!(path = %path.display(), offset, replace, ok = result.is_ok(), "apply");
    match result {
        Ok(()) => format!("wrote the completion into {}", path.display()),
        Err(e) => e.to_string(),
    }
}

/// What a panic said, for one line on the screen.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    format!("internal error ({})", crate::text::excerpt(&text, 120))
}

/// What only the terminal loop can do.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Quit,
    Suspend,
    SetMouse(bool),
}

/// Runs effects; owns the running completion and analysis tasks so they can be aborted.
pub struct Driver {
    tx: UnboundedSender<Action>,
    rankers: SharedRankers,
    running: Option<JoinHandle<()>>,
    analysing: Option<JoinHandle<()>>,
}

impl Driver {
    /// A driver that keeps what it learns in `dirs` and reads indexes from its cache.
    pub fn new(tx: UnboundedSender<Action>, dirs: Dirs) -> Driver {
        Driver {
            tx,
            rankers: SharedRankers::new(dirs),
            running: None,
            analysing: None,
        }
    }

    /// A driver whose RLPG-H and RLPG-R rankers use `classifier` instead of the bundled one.
    pub fn with_classifier(
        tx: UnboundedSender<Action>,
        classifier: Classifier,
        dirs: Dirs,
    ) -> Driver {
        let driver = Driver::new(tx, dirs);
        let rankers = SharedRankers::with(classifier, &driver.rankers.dirs);
        // Freshly made, so nothing has filled it yet.
        let _ = driver.rankers.rankers.set(rankers);
        driver
    }

    /// Blocking library work goes to tokio's blocking pool; its result comes back as an action,
    /// and a panic in it as the action `failed` makes of its text (the screen must not wait
    /// forever for a result that will never come).
    fn blocking(
        &self,
        work: impl FnOnce() -> Action + Send + 'static,
        failed: impl FnOnce(String) -> Action + Send + 'static,
    ) {
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let action = std::panic::catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|payload| failed(panic_text(payload)));
            let _ = tx.send(action);
        });
    }

    pub fn run(&mut self, effect: Effect) -> Outcome {
        match effect {
            Effect::Index {
                root,
                position,
                backend,
            } => {
                let (tx, dirs) = (self.tx.clone(), self.rankers.dirs.clone());
                self.blocking(
                    move || {
                        let progress = |done, total| report_progress(&tx, done, total);
                        let indexed = index(&root, position.as_deref(), &backend, &dirs, &progress);
                        Action::Indexed(indexed.map_err(|e| {
                            let error = format!("{e:#}");
                            tracing::error!(root = %root.display(), %error, "open");
                            error
                        }))
                    },
                    |error| Action::Indexed(Err(error)),
                )
            }
            Effect::Analyse {
                index,
                search,
                backend,
                hole,
                generation,
                ranker,
                tokenizer,
                budget,
            } => {
                if let Some(task) = self.analysing.take() {
                    task.abort();
                }
                let (tx, rankers) = (self.tx.clone(), self.rankers.clone());
                let dirs = self.rankers.dirs.clone();
                let tokenizer = tokenizer.tokenizer();
                self.analysing = Some(tokio::spawn(async move {
                    let job = (index.clone(), search.clone(), hole.clone());
                    let analysis = tokio::task::spawn_blocking(move || {
                        let (index, search, hole) = job;
                        let building = Building {
                            index: &index,
                            search: &search,
                            tokenizer,
                            budget,
                        };
                        analyse(building, &hole, ranker, &rankers)
                    });
                    let analysis = match analysis.await {
                        Ok(analysis) => analysis,
                        // Aborted because the hole moved: nobody waits for it.
                        Err(e) if e.is_cancelled() => return,
                        Err(e) => {
                            let error = panic_text(e.into_panic());
                            tracing::error!(hole = %hole.display(&index), %error, "analysis");
                            let _ = tx.send(Action::AnalysisFailed { generation, error });
                            return;
                        }
                    };
                    let _ = tx.send(Action::Analysed {
                        generation,
                        candidates: analysis.candidates,
                        proposals: Arc::new(analysis.proposals),
                        ranker,
                    });
                    if let Some(warning) = analysis.warning {
                        let _ = tx.send(Action::Message(warning));
                    }
                    let building = Building {
                        index: &index,
                        search: &search,
                        tokenizer,
                        budget,
                    };
                    let later =
                        retrieve_later(building, &*backend, &hole, &analysis.retrieved, &dirs);
                    let (candidates, procc) = later.await;
                    let _ = tx.send(Action::Retrieved {
                        generation,
                        candidates,
                        procc,
                    });
                }));
            }
            Effect::Rank {
                index,
                hole,
                proposals,
                generation,
                ranker,
            } => {
                let rankers = self.rankers.clone();
                self.blocking(
                    move || Action::Ranked {
                        generation,
                        ranker,
                        ranked: rankers.rank(ranker, &RankInput::new(&index, &hole, &proposals)),
                    },
                    move |error| Action::Ranked {
                        generation,
                        ranker,
                        ranked: Err(error),
                    },
                )
            }
            Effect::Complete(job) => {
                self.cancel();
                let tx = self.tx.clone();
                self.running = Some(tokio::spawn(async move {
                    let run = AssertUnwindSafe(complete(&job, Some(&tx))).catch_unwind();
                    let cards = run.await.unwrap_or_else(|payload| {
                        let _ = tx.send(Action::Message(panic_text(payload)));
                        Vec::new()
                    });
                    let generation = job.generation;
                    let _ = tx.send(Action::Completed { generation, cards });
                }));
            }
            Effect::CancelCompletions => self.cancel(),
            Effect::SwitchBackend {
                chosen,
                entry,
                index,
            } => self.blocking(
                move || {
                    let backend = model::build_backend(&entry, &index)
                        .map(Arc::from)
                        .map_err(|e| e.to_string());
                    Action::BackendSwitched { chosen, backend }
                },
                move |error| Action::BackendSwitched {
                    chosen,
                    backend: Err(error),
                },
            ),
            Effect::Pick { pick, bandit } => {
                let rankers = self.rankers.clone();
                self.blocking(
                    move || Action::Message(record_pick(pick, bandit, &rankers)),
                    Action::Message,
                )
            }
            Effect::Apply {
                path,
                hash,
                offset,
                replace,
                text,
            } => {
                let dirs = self.rankers.dirs.clone();
                self.blocking(
                    move || Action::Message(apply(&path, &hash, offset, replace, &text, &dirs)),
                    Action::Message,
                )
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
            candidates: vec![CandidateId::nth(6), CandidateId::DEFAULT],
            prompt_hash: feedback::prompt_hash("secret prompt"),
            completions: vec!["secretCompletion()".into(), String::new()],
            picked: CandidateId::nth(6),
            unix_time: 0,
        };
        tracing::subscriber::with_default(subscriber, || log_pick(&pick));
        let log = std::fs::read_to_string(file.path()).unwrap();
        assert!(log.contains("A.java:3:9") && log.contains(&pick.prompt_hash));
        assert!(!log.contains("secret"), "{log}");
    }
}
