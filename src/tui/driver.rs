//! The effect driver: runs what `update` asks for on tokio and reports back as actions. The
//! work itself is library calls; the functions here only shape their results for the state.
//! Beside it: `watch` (changes other programs make to the open repository).

pub mod watch;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::state::{
    Action, Applied, Card, CompleteJob, Effect, FileEdit, Finished, IndexBackend, Indexed,
    JobError, LoggedRequest, Progress, Stage,
};
use crate::candidate::CandidateId;
use crate::compose::Prompt;
use crate::context::perspectives;
use crate::dirs::Dirs;
use crate::hole::Hole;
use crate::metrics;
use crate::model::Backend;
use crate::model::config::BackendConfig;
use crate::model::{self, Completion, CompletionRequest, Delta};
use crate::pin::Pin;
use crate::rank::RankInput;
use crate::repo::{FileId, RepoIndex};
use crate::session::{
    BuiltContext, CandidateRow, Learning, Opening, SearchProgress, Session, Settings, SharedSearch,
};
use crate::token::TokenizerKind;

/// Open the repository with `backend` as `settings` say, and find the hole (a bare path: its
/// first line; none: a real hole of a central file). `progress` runs on worker threads as
/// opening moves through its stages.
pub fn index(
    root: &Path,
    position: Option<&str>,
    backend: IndexBackend,
    settings: &Settings,
    learning: Learning,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Indexed, StartError> {
    let (settings, kept) = match backend {
        IndexBackend::Build(entry) => (
            Settings {
                backends: vec![*entry],
                chosen: 0,
                ..settings.clone()
            },
            None,
        ),
        IndexBackend::Keep(backend) => (settings.clone(), Some(backend)),
    };
    let read_at = SystemTime::now();
    let opening = |opening: Opening| progress(Progress::from(opening));
    // The search indexes are built after the hole's ranked proposals show (see
    // `Effect::Analyse`), so that a person does not wait for them.
    let mut builder = Session::builder(&settings)
        .progress(&opening)
        .learning(learning);
    if let Some(backend) = kept {
        builder = builder.backend(backend);
    }
    let session = builder.open(root)?;
    let index = session.index;
    for warning in &index.warnings {
        tracing::warn!(%warning, "index");
    }
    let hole = Hole::locate(&index, position.unwrap_or_default())?;
    let (pinned, pin_warning) = Pin::of(&settings.dirs, &index.root).read();
    Ok(Indexed {
        index,
        search: session.search,
        backend: session.backend,
        hole,
        pinned,
        pin_warning,
        read_at,
    })
}

/// Why the repository could not be opened at the hole asked for.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Repository(#[from] crate::repo::OpenError),
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
    #[error(transparent)]
    Hole(#[from] crate::hole::HoleError),
}

/// A backend answered a request with no completion at all.
#[derive(Debug, thiserror::Error)]
#[error("no completion")]
struct NoCompletion;

/// The repository's pin file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct PinNotWritten {
    path: PathBuf,
    source: std::io::Error,
}

/// The hole's file at `position` as it is on disk, sent to the UI to show while the
/// repository is indexed (parsing a large one the first time takes seconds); nothing where
/// the position names no readable text file (opening says why).
fn preview(root: &Path, position: Option<&str>, tx: &UnboundedSender<Action>) {
    let Some(spec) = position else {
        return;
    };
    let (path, at) = match crate::hole::split_position(spec) {
        Ok((path, line, column)) => (path, (line.saturating_sub(1), column.saturating_sub(1))),
        Err(_) => (spec, (0, 0)),
    };
    let read = crate::repo::read_repo_file(root, Path::new(path), crate::repo::MAX_FILE_BYTES);
    if let Some(text) = read.ok().and_then(|bytes| String::from_utf8(bytes).ok()) {
        let path = path.trim_start_matches("./").to_string();
        let _ = tx.send(Action::Previewed { path, text, at });
    }
}

/// Report about every hundredth file (and every stage change), so a huge repository does not
/// flood the action channel.
fn report_progress(tx: &UnboundedSender<Action>, progress: Progress) {
    let Progress { stage, done, total } = progress;
    if stage != Stage::Files || a_hundredth(done, total) {
        let _ = tx.send(Action::Progress(progress));
    }
}

/// Report building the search indexes about every hundredth file or window.
fn report_search(tx: &UnboundedSender<Action>, progress: SearchProgress) {
    if a_hundredth(progress.done, progress.total) {
        let _ = tx.send(Action::SearchProgress(progress));
    }
}

/// Whether `done` of `total` is a count worth showing: the first, the last, and one in about
/// every hundredth of them.
fn a_hundredth(done: usize, total: usize) -> bool {
    done == total || done.is_multiple_of((total / 100).max(1))
}

/// A session to fit prompts with, and the contexts already built from the backend's answers
/// for the job's hole.
type Fit<'a> = (&'a Session, &'a [perspectives::RetrievedContext]);

/// The prompts of `job` as they are sent: composed again by the session of `fit` to fit the
/// budget as the backend's model counts it, where the backend counts in a tokenizer of its own
/// (the prompt then comes with them); as they are otherwise. An error for a prompt that
/// cannot fit.
async fn sent_prompts(
    job: &CompleteJob,
    fit: Option<Fit<'_>>,
) -> Vec<Result<(String, Option<Prompt>), JobError>> {
    let refit = job.refit.as_ref().zip(fit);
    let Some((refit, (session, drafted))) =
        refit.filter(|(_, (session, _))| !session.counts_exactly())
    else {
        return job
            .prompts
            .iter()
            .map(|p| Ok((p.text.clone(), None)))
            .collect();
    };
    join_all(job.prompts.iter().map(|p| async move {
        match &p.fitted {
            // A plugin's prompt goes as the plugin sent it.
            _ if p.candidate.is_recorded() || p.edited => Ok((p.text.clone(), None)),
            Some(fitted) => Ok((fitted.text(), Some(fitted.clone()))),
            None => fit_candidate(session, drafted, &refit.hole, p.candidate)
                .await
                .map(|prompt| (prompt.text(), Some(prompt))),
        }
    }))
    .await
}

/// Candidate `id`'s prompt at `hole` composed again by `session` to fit the budget as the
/// backend's model counts it; a context built from the backend's answers (in `drafted`) is
/// composed again, not asked for anew.
async fn fit_candidate(
    session: &Session,
    drafted: &[perspectives::RetrievedContext],
    hole: &Hole,
    id: CandidateId,
) -> Result<Prompt, JobError> {
    let context = match drafted.iter().find(|c| c.id == id) {
        Some(built) => BuiltContext::Retrieved(built.clone()),
        None => session.context(hole, id).await,
    };
    let fitted = session.fit(hole, |composer| context.compose(composer));
    fitted.await.map_err(JobError::failed)
}

/// One card's request: the completion, how long it waited for its turn first and how long it
/// took from then.
type Answered = Result<(Completion, Duration, Duration), JobError>;

/// Complete every prompt of `job`, each fitted by `session` where the backend counts tokens
/// itself (see `sent_prompts`), and score each; streamed text goes to `stream` as it
/// arrives. The requests go out together (a local model decodes them as one batch), to a
/// server at most as many at once as it has slots; a card's time starts when its turn comes,
/// so that each card's latency is its own and the wait before it is told apart.
pub async fn complete(
    job: &CompleteJob,
    fit: Option<Fit<'_>>,
    stream: Option<&UnboundedSender<Action>>,
) -> Vec<Card> {
    let prompts = sent_prompts(job, fit).await;
    let begun = Instant::now();
    let turns = job.backend.takes_turns();
    let answer = |card: usize| {
        let prompt = &prompts[card];
        async move {
            let (text, _) = prompt.as_ref().map_err(Clone::clone)?;
            // When the request began: now, or for a backend that takes turns, when its turn
            // came (it says so with an empty delta).
            let started = Mutex::new(Instant::now());
            let start = |at: Instant| {
                *started.lock().unwrap_or_else(PoisonError::into_inner) = at;
                if let Some(ui) = stream {
                    let generation = job.generation;
                    let _ = ui.send(Action::CardStarted {
                        generation,
                        card,
                        at,
                    });
                }
            };
            if !turns {
                start(Instant::now());
            }
            let request = CompletionRequest {
                current_file: Some(job.current_file.clone()),
                suffix: job.prompts[card].suffix.clone(),
                ..CompletionRequest::single_line(text.clone())
            };
            let (deltas, mut received) = tokio::sync::mpsc::unbounded_channel::<Delta>();
            let forward = async {
                while let Some(delta) = received.recv().await {
                    if delta.is_start() {
                        start(Instant::now());
                    } else if let Some(ui) = stream {
                        let _ = ui.send(Action::Streamed {
                            generation: job.generation,
                            card,
                            text: delta.text,
                        });
                    }
                }
            };
            // The request owns the sender: when it finishes, the channel closes and forwarding
            // ends.
            let request = async move { job.backend.complete(&request, Some(&deltas)).await };
            let completions = tokio::join!(request, forward).0.map_err(|e| {
                let candidate = job.prompts[card].candidate.index();
                tracing::warn!(candidate, error = %e, "backend");
                JobError::failed(e)
            })?;
            let first = completions.into_iter().next();
            let first = first.ok_or_else(|| JobError::failed(NoCompletion))?;
            let started = *started.lock().unwrap_or_else(PoisonError::into_inner);
            Ok((first, started - begun, started.elapsed()))
        }
    };
    // A server that says how many requests it works on at once (llama.cpp's slots) gets no
    // more than that: the rest wait here, where their wait is seen, not in its queue.
    let slots = match job.backend.limits().await {
        Some(Ok(limits)) => limits.slots,
        _ => prompts.len(),
    };
    let results: Vec<Answered> = futures_util::stream::iter((0..prompts.len()).map(answer))
        .buffered(slots.max(1))
        .collect()
        .await;
    job.prompts
        .iter()
        .zip(prompts.iter())
        .zip(results)
        .map(|((run, sent), result)| Card {
            candidate: run.candidate,
            same: run.same.clone(),
            edited: run.edited.then(|| run.text.clone()),
            fitted: sent.as_ref().ok().and_then(|(_, fitted)| fitted.clone()),
            outcome: result.map(|(c, queued, own)| Finished {
                // Nothing follows an end-of-line hole: no text to score against.
                scores: (!job.target.is_empty()).then(|| metrics::score(&c.text, &job.target)),
                syntax_errors: syntax_errors(job, &c.text),
                latency_ms: own.as_millis(),
                queued_ms: queued.as_millis(),
                text: c.text,
            }),
            picked: false,
        })
        .collect()
}

/// The rankers for backend `entry` where they differ from `current`: the classifier `keyhole
/// tune` made for its model, or the bundled one after a tuned one (a classifier asked for by
/// name stays). `None`: keep `current`.
fn learning_for(
    settings: &Settings,
    entry: &BackendConfig,
    current: &Learning,
) -> Option<Learning> {
    if settings.classifier.is_some() || settings.encoder_dir.is_some() {
        return None;
    }
    let settings = Settings {
        backends: vec![entry.clone()],
        chosen: 0,
        ..settings.clone()
    };
    let learning = settings
        .learning()
        .map_err(|e| tracing::warn!(error = %e, "rankers for the new backend"))
        .ok()?;
    let describe = |l: &Learning| l.tuned().map(|t| t.describe());
    (describe(&learning) != describe(current)).then_some(learning)
}

/// What a run sent and got back, request by request, for the request log.
fn request_log(job: &CompleteJob, cards: &[Card], sent_at: SystemTime) -> Vec<LoggedRequest> {
    let seconds = sent_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let at = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60
    );
    cards
        .iter()
        .zip(&job.prompts)
        .map(|(card, run)| LoggedRequest {
            at: at.clone(),
            backend: job.backend.name().to_string(),
            candidate: card.candidate,
            shared_by: card.same.len(),
            edited: run.edited,
            prompt_tokens: card.fitted.as_ref().and_then(|p| p.backend_tokens),
            prompt_bytes: card
                .fitted
                .as_ref()
                .map_or(run.text.len(), |p| p.text().len()),
            outcome: card
                .outcome
                .as_ref()
                .map(|f| (f.text.clone(), f.queued_ms, f.latency_ms))
                .map_err(Clone::clone),
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

/// Make `edit` on disk; the file's text afterwards and its hash, or why not (one line).
fn write_edit(edit: &FileEdit, learning: &Learning) -> Result<(String, [u8; 32]), JobError> {
    let FileEdit {
        path,
        hash,
        offset,
        replace,
        text,
    } = edit;
    let now = learning
        .apply(path, hash, *offset, *replace, text)
        .map_err(JobError::failed)?;
    let hash = *blake3::hash(now.as_bytes()).as_bytes();
    Ok((now, hash))
}

/// Write a completion in; what comes back says how to take it out again.
fn apply(file: FileId, edit: &FileEdit, original: String, learning: &Learning) -> Action {
    let result = write_edit(edit, learning).map(|(text, hash)| {
        let undo = FileEdit {
            path: edit.path.clone(),
            hash,
            offset: edit.offset,
            replace: edit.text.len(),
            text: original,
        };
        (text, Some(Applied { file, undo }))
    });
    Action::Written { file, result }
}

/// Write `text` to `keyhole-prompt-STEM.txt` in the working directory (`-2`, `-3`… when the
/// name is taken: a file already there is never replaced); says where it went.
fn save_prompt(stem: &str, text: &str) -> String {
    let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    save_prompt_in(&dir, stem, text)
}

fn save_prompt_in(dir: &Path, stem: &str, text: &str) -> String {
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let path = dir.join(format!("keyhole-prompt-{stem}{suffix}.txt"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        match file {
            Ok(mut file) => {
                use std::io::Write;
                return match file.write_all(text.as_bytes()) {
                    Ok(()) => format!("prompt saved to {}", path.display()),
                    Err(e) => format!("cannot save the prompt to {}: {e}", path.display()),
                };
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return format!("cannot save the prompt to {}: {e}", path.display()),
        }
    }
    format!("cannot save the prompt: keyhole-prompt-{stem}-*.txt all taken")
}

/// What a panic said, for one line on the screen.
fn panicked(payload: Box<dyn std::any::Any + Send>) -> JobError {
    let said = crate::escape::panic_message(payload.as_ref());
    JobError::Panicked(crate::text::excerpt(said, 120).to_string())
}

/// `work` on tokio's blocking pool, awaited: its result, or `None` where the task awaiting it
/// was aborted (the hole moved), or what a panic in it said.
async fn on_a_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Option<JobError>> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| (!e.is_cancelled()).then(|| panicked(e.into_panic())))
}

/// What only the terminal loop can do.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Quit,
    Suspend,
    SetMouse(bool),
    /// Put this text on the clipboard.
    Copy(String),
    /// Run the user's editor on `path` at `line`.
    Editor {
        path: PathBuf,
        line: usize,
    },
}

/// Runs effects; owns the running completion and analysis tasks so they can be aborted.
pub struct Driver {
    tx: UnboundedSender<Action>,
    /// What the UI was started with: the profile, RepoCoder's iterations, the seed and the
    /// directories (the backend, budget and tokenizer of each job come with it).
    settings: Settings,
    learning: Learning,
    running: Option<JoinHandle<()>>,
    analysing: Option<JoinHandle<()>>,
    /// The watch on the open repository's files.
    watching: Option<JoinHandle<()>>,
    /// The contexts built from the backend's answers (67, 69, 70) for the latest hole, by
    /// generation: fitting a card composes them again rather than asking the backend anew.
    drafted: Drafted,
}

/// The contexts built from the backend's answers for one hole generation.
type Drafted = Arc<Mutex<Option<(u64, Vec<perspectives::RetrievedContext>)>>>;

impl Driver {
    /// A driver with the defaults that keeps what it learns in `dirs` and reads indexes from
    /// its cache.
    pub fn new(tx: UnboundedSender<Action>, dirs: Dirs) -> Driver {
        let settings = Settings {
            dirs: dirs.clone(),
            ..Settings::default()
        };
        Driver::with_settings(tx, settings, Learning::new(dirs))
    }

    /// A driver opening sessions as `settings` say, ranking with `learning`.
    pub fn with_settings(
        tx: UnboundedSender<Action>,
        settings: Settings,
        learning: Learning,
    ) -> Driver {
        Driver {
            tx,
            settings,
            learning,
            running: None,
            analysing: None,
            watching: None,
            drafted: Drafted::default(),
        }
    }

    /// A session on the open repository with the driver's settings and rankers.
    fn session(
        &self,
        index: Arc<RepoIndex>,
        search: SharedSearch,
        backend: Arc<dyn Backend>,
        tokenizer: TokenizerKind,
        budget: usize,
    ) -> Session {
        let settings = Settings {
            tokenizer: Some(tokenizer),
            budget,
            ..self.settings.clone()
        };
        Session::builder(&settings)
            .search(search)
            .learning(self.learning.clone())
            .with_parts(index, backend)
    }

    /// Blocking library work goes to tokio's blocking pool; its result comes back as an action,
    /// and a panic in it as the action `failed` makes of its text (the screen must not wait
    /// forever for a result that will never come).
    fn blocking(
        &self,
        work: impl FnOnce() -> Action + Send + 'static,
        failed: impl FnOnce(JobError) -> Action + Send + 'static,
    ) {
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let action = std::panic::catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|payload| failed(panicked(payload)));
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
                let (tx, learning) = (self.tx.clone(), self.learning.clone());
                let settings = self.settings.clone();
                // The classifier and the online ranker load beside the repository's reading,
                // not after it: the ranking waits for both.
                let rankers = learning.clone();
                tokio::task::spawn_blocking(move || rankers.load_now());
                self.blocking(
                    move || {
                        // Shown while opening; a re-read keeps the index it has on screen.
                        preview(&root, position.as_deref(), &tx);
                        let progress = |progress| report_progress(&tx, progress);
                        let position = position.as_deref();
                        let indexed = index(
                            &root,
                            position,
                            backend,
                            &settings,
                            learning.clone(),
                            &progress,
                        );
                        if let Ok(indexed) = &indexed {
                            let total = indexed.index.files.len();
                            let stage = Stage::Rankers;
                            report_progress(
                                &tx,
                                Progress {
                                    stage,
                                    done: total,
                                    total,
                                },
                            );
                            let _ = tx.send(Action::OnlineLearnt(learning.online_counts()));
                        }
                        Action::Indexed(indexed.map_err(|error| {
                            tracing::error!(root = %root.display(), %error, "open");
                            JobError::failed(error)
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
                recorded,
            } => {
                if let Some(task) = self.analysing.take() {
                    task.abort();
                }
                let tx = self.tx.clone();
                let drafted = self.drafted.clone();
                let session = self.session(index.clone(), search, backend, tokenizer, budget);
                self.analysing = Some(tokio::spawn(async move {
                    // RLPG's proposals and the default context, ranked: shown at once.
                    let job = (session.clone(), hole.clone());
                    let analysis = on_a_thread(move || {
                        let (session, hole) = job;
                        let mut analysis = session.analyse_before_search(&hole, ranker);
                        if let Some(recorded) = &recorded {
                            let sent =
                                session.recorded_rows(&recorded.exchange, Some(&recorded.place));
                            analysis.candidates.splice(0..0, sent);
                        }
                        analysis
                    });
                    let analysis = match analysis.await {
                        Ok(analysis) => analysis,
                        // Aborted because the hole moved: nobody waits for it.
                        Err(None) => return,
                        Err(Some(error)) => {
                            tracing::error!(hole = %hole.display(&index), %error, "analysis");
                            let _ = tx.send(Action::AnalysisFailed { generation, error });
                            return;
                        }
                    };
                    // The typed holes a language server answers fill their rows when it has,
                    // beside the others.
                    let typed = [CandidateId::TYPED_TYPES, CandidateId::TYPED_HEADERS];
                    let waiting = |c: &CandidateRow| c.building() && typed.contains(&c.id);
                    let server_asked = analysis.candidates.iter().any(waiting);
                    let _ = tx.send(Action::Analysed {
                        generation,
                        candidates: analysis.candidates,
                        proposals: Arc::new(analysis.proposals),
                        ranker,
                    });
                    if let Some(warning) = analysis.warning {
                        let _ = tx.send(Action::Message(warning));
                    }
                    if server_asked {
                        let (session, hole, tx) = (session.clone(), hole.clone(), tx.clone());
                        tokio::task::spawn_blocking(move || {
                            let candidates = session.typed_rows(&hole);
                            let _ = tx.send(Action::Typed {
                                generation,
                                candidates,
                            });
                        });
                    }
                    // The candidates that search fill theirs once the search indexes are
                    // built or brought up to date (seconds on a large repository, the first
                    // time or after an edit): the screen stays live meanwhile.
                    let job = (session.clone(), hole.clone(), tx.clone());
                    let searched = on_a_thread(move || {
                        let (session, hole, tx) = job;
                        session.search_index_reporting(&|progress| report_search(&tx, progress));
                        session.searched(&hole)
                    });
                    let searched = searched.await;
                    let searched = match searched {
                        Ok(searched) => searched,
                        Err(None) => return,
                        Err(Some(error)) => {
                            tracing::error!(hole = %hole.display(&index), %error, "search");
                            let candidates = Err(error);
                            let _ = tx.send(Action::Searched {
                                generation,
                                candidates,
                            });
                            return;
                        }
                    };
                    let _ = tx.send(Action::Searched {
                        generation,
                        candidates: Ok(searched.candidates),
                    });
                    let later = session.retrieve_later(&hole, &searched.built).await;
                    *drafted.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((generation, later.built.clone()));
                    let _ = tx.send(Action::Retrieved {
                        generation,
                        candidates: later.candidates,
                        procc: later.procc,
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
                let learning = self.learning.clone();
                self.blocking(
                    move || Action::Ranked {
                        generation,
                        ranker,
                        ranked: learning
                            .rank(ranker, &RankInput::new(&index, &hole, &proposals))
                            .map_err(JobError::failed),
                    },
                    move |error| Action::Ranked {
                        generation,
                        ranker,
                        ranked: Err(error),
                    },
                )
            }
            Effect::Fit {
                generation,
                candidate,
                backend,
                refit,
            } => {
                let tx = self.tx.clone();
                let drafted = self.drafted.clone();
                let session = self.session(
                    refit.index,
                    refit.search,
                    backend,
                    refit.tokenizer,
                    refit.budget,
                );
                tokio::spawn(async move {
                    let drafts = drafted
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone()
                        .filter(|(g, _)| *g == generation)
                        .map(|(_, built)| built)
                        .unwrap_or_default();
                    let fit = fit_candidate(&session, &drafts, &refit.hole, candidate);
                    let prompt = AssertUnwindSafe(fit)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|payload| Err(panicked(payload)));
                    let _ = tx.send(Action::Fitted {
                        generation,
                        candidate,
                        prompt,
                    });
                });
            }
            Effect::Complete(job) => {
                self.cancel();
                let tx = self.tx.clone();
                let drafted = self.drafted.clone();
                let session = job.refit.as_ref().map(|refit| {
                    let (index, search) = (refit.index.clone(), refit.search.clone());
                    self.session(
                        index,
                        search,
                        job.backend.clone(),
                        refit.tokenizer,
                        refit.budget,
                    )
                });
                self.running = Some(tokio::spawn(async move {
                    let drafts = drafted
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    let drafts = drafts
                        .filter(|(generation, _)| *generation == job.generation)
                        .map(|(_, built)| built)
                        .unwrap_or_default();
                    let fit = session.as_ref().map(|session| (session, drafts.as_slice()));
                    let sent_at = SystemTime::now();
                    let run = AssertUnwindSafe(complete(&job, fit, Some(&tx))).catch_unwind();
                    let cards = run.await.unwrap_or_else(|payload| {
                        let _ = tx.send(Action::Message(panicked(payload).to_string()));
                        Vec::new()
                    });
                    let _ = tx.send(Action::Logged(request_log(&job, &cards, sent_at)));
                    let generation = job.generation;
                    let _ = tx.send(Action::Completed { generation, cards });
                }));
            }
            Effect::CancelCompletions => self.cancel(),
            Effect::Watch { index, read_at } => {
                if let Some(task) = self.watching.take() {
                    task.abort();
                }
                let watching = watch::run(index, read_at, self.tx.clone());
                self.watching = Some(tokio::spawn(watching));
            }
            Effect::ReadRecorded => {
                let dir = crate::proxy::log_dir(&self.settings.dirs);
                self.blocking(
                    move || match dir.map_or_else(
                        || Ok(Default::default()),
                        |dir| crate::proxy::read_log(&dir),
                    ) {
                        Ok((exchanges, unreadable)) => Action::RecordedRead {
                            exchanges,
                            unreadable,
                        },
                        Err(error) => Action::Message(format!("{error}")),
                    },
                    |error| Action::Message(format!("cannot read the recorded requests: {error}")),
                );
            }
            Effect::LocateRecorded { index, exchange } => self.blocking(
                move || {
                    let places = crate::proxy::hole_places(&index, &exchange.sent);
                    Action::RecordedLocated { exchange, places }
                },
                |error| Action::Message(format!("cannot look for the hole: {error}")),
            ),
            Effect::ReadBackends => {
                let dirs = self.settings.dirs.clone();
                self.blocking(
                    move || {
                        let (backends, warnings) = crate::session::read_backends_leniently(&dirs);
                        Action::BackendsRead { backends, warnings }
                    },
                    |error| Action::Message(format!("cannot read the backends: {error}")),
                );
            }
            Effect::SwitchBackend {
                chosen,
                entry,
                index,
            } => {
                let (settings, current) = (self.settings.clone(), self.learning.clone());
                self.blocking(
                    move || {
                        let backend = model::build_backend(&entry, &index)
                            .map(Arc::from)
                            .map_err(JobError::failed);
                        let learning = backend
                            .is_ok()
                            .then(|| learning_for(&settings, &entry, &current))
                            .flatten();
                        Action::BackendSwitched {
                            chosen,
                            backend,
                            learning,
                        }
                    },
                    move |error| Action::BackendSwitched {
                        chosen,
                        backend: Err(error),
                        learning: None,
                    },
                )
            }
            Effect::UseLearning(learning) => self.learning = learning,
            Effect::Pick { pick, bandit } => {
                let (tx, learning) = (self.tx.clone(), self.learning.clone());
                self.blocking(
                    move || {
                        let context = bandit.as_ref().map(|lesson| lesson.context);
                        let recorded = learning.record_pick(pick, bandit);
                        let _ = tx.send(Action::OnlineLearnt(learning.online_counts()));
                        if let (Some(context), Some(pick)) = (context, recorded.procc_pick) {
                            let _ = tx.send(Action::ProccTaught { context, pick });
                        }
                        Action::Message(recorded.said)
                    },
                    |error| Action::Message(error.to_string()),
                )
            }
            Effect::Apply {
                file,
                edit,
                original,
            } => {
                let learning = self.learning.clone();
                self.blocking(
                    move || apply(file, &edit, original, &learning),
                    move |error| Action::Written {
                        file,
                        result: Err(error),
                    },
                )
            }
            Effect::Undo { file, edit } => {
                let learning = self.learning.clone();
                let undo = move || Action::Written {
                    file,
                    result: write_edit(&edit, &learning).map(|(text, _)| (text, None)),
                };
                self.blocking(undo, move |error| Action::Written {
                    file,
                    result: Err(error),
                })
            }
            Effect::Pin { root, candidate } => {
                let pin = Pin::of(&self.settings.dirs, &root);
                let write = move || {
                    let written = pin.write(candidate).map_err(|source| {
                        let path = pin.path().map(Path::to_path_buf).unwrap_or_default();
                        JobError::failed(PinNotWritten { path, source })
                    });
                    Action::Pinned(written.map(|()| candidate))
                };
                self.blocking(write, |error| Action::Pinned(Err(error)))
            }
            Effect::SetMouse(on) => return Outcome::SetMouse(on),
            Effect::Copy(text) => return Outcome::Copy(text),
            Effect::Highlight {
                shown,
                path,
                text,
                theme,
            } => {
                let plain = super::highlight::plain(&text);
                self.blocking(
                    move || Action::Highlighted {
                        shown,
                        lines: super::highlight::file(&path, &text, &theme),
                    },
                    // Plain lines, rather than a spinner that never stops.
                    move |_| Action::Highlighted {
                        shown,
                        lines: plain,
                    },
                )
            }
            Effect::SavePrompt { stem, text } => self.blocking(
                move || Action::Message(save_prompt(&stem, &text)),
                |error| Action::Message(error.to_string()),
            ),
            Effect::OpenInEditor { path, line } => return Outcome::Editor { path, line },
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
    use super::*;
    use crate::session::tuned::{self, TunedInfo};

    #[test]
    fn switching_to_a_backend_with_a_tuned_classifier_ranks_with_it_and_back() {
        let root = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(root.path());
        let embedded = BackendConfig::embedded();
        let srv = BackendConfig {
            name: "srv".into(),
            ..BackendConfig::embedded()
        };
        // `keyhole tune` made a classifier for srv's model.
        let dir = tuned::tuned_dir(&dirs, &srv).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let bundled = include_bytes!("../rank/classifier/bundled.safetensors");
        std::fs::write(dir.join(tuned::CLASSIFIER_FILE), bundled).unwrap();
        let info = TunedInfo {
            version: 1,
            backend: "srv".into(),
            model: tuned::model_name(&srv),
            variant: "RLPG-H".into(),
            train_holes: 300,
            validation_holes: 100,
            repositories: vec!["a".into()],
            success: 50.0,
            success_before: 45.0,
            unix_time: 0,
        };
        tuned::record(&dir, &info).unwrap();
        let settings = Settings {
            dirs: dirs.clone(),
            ..Settings::default()
        };
        let untuned = Learning::new(dirs.clone());
        let tuned = learning_for(&settings, &srv, &untuned).expect("srv's tuned classifier");
        assert_eq!(tuned.tuned(), Some(&info));
        // Switching between two untuned backends, or to srv again, changes nothing.
        assert!(learning_for(&settings, &embedded, &untuned).is_none());
        assert!(learning_for(&settings, &srv, &tuned).is_none());
        // Back to the embedded model: the bundled classifier again.
        let back = learning_for(&settings, &embedded, &tuned).expect("the bundled rankers");
        assert_eq!(back.tuned(), None);
        // A classifier asked for by name stays whatever the backend.
        let asked = Settings {
            classifier: Some(dir.join(tuned::CLASSIFIER_FILE)),
            ..settings
        };
        assert!(learning_for(&asked, &srv, &untuned).is_none());
    }

    #[test]
    fn a_saved_prompt_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let first = save_prompt_in(dir.path(), "A-1-1-c7", "one");
        let second = save_prompt_in(dir.path(), "A-1-1-c7", "two");
        assert!(first.ends_with("A-1-1-c7.txt"), "{first}");
        assert!(second.ends_with("A-1-1-c7-2.txt"), "{second}");
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("keyhole-prompt-A-1-1-c7.txt"), "one");
        assert_eq!(read("keyhole-prompt-A-1-1-c7-2.txt"), "two");
    }
}
