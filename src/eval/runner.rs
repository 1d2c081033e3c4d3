//! Running the protocol on one repository: sample holes, build every candidate's prompt,
//! complete them with bounded concurrency, and append the rows hole by hole.
//!
//! A hole runs in two stages: the first completes every prompt that needs nothing
//! from the backend, together with what the later candidates need written first (ProCC's
//! hypothetical line and summary); the second builds and completes the candidates that
//! depend on those texts (RepoCoder's second iteration, which retrieves with the first
//! iteration's completion, and ProCC's hypothetical line and summary).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{self, FuturesUnordered, StreamExt};
use tokio::sync::Semaphore;

use super::labels::LabelFile;
use super::plan::Plan;
use super::shard::Shard;
use super::{LabelRow, hole_id};
use crate::candidate::{CandidateId, Selection};
use crate::compose::{Composer, DefaultContext, Prompt, SegmentKind};
use crate::context::fidelity::Fidelity;
use crate::context::perspectives::{self, Draft, Perspectives, RetrievedContext};
use crate::context::proposals::ProposalContext;
use crate::context::retrieval::{self};
use crate::hole::{Hole, sample_holes};
use crate::metrics;
use crate::model::{BackendError, CompletionRequest};
use crate::rank::{RankerKind, bm25};
use crate::repo::RepoIndex;
use crate::session::{BuiltContext, FitError, Session};
use crate::token::TokenizerKind;

/// Holes whose completions run at once, within the same `concurrency` of requests. Each goes
/// through its stages on its own, so a hole waiting for its slowest request (one told to come
/// back after a Retry-After second, say) holds up no other. With 2% of answers such a wait,
/// most holes (about 56 requests each) wait once: 64 holes of about a second each still
/// carry ~3,500 requests a second, twice what 2 cores build (128 ran no faster, in 40% more
/// memory: BENCHMARKS.md).
const HOLES_IN_FLIGHT: usize = 64;
/// Holes started but not yet written: those done wait for the holes sampled before them, so
/// that label files keep the sampled order; at about 40 holes a second, 256 let the first
/// wait several seconds before the run waits for it.
const WRITE_WINDOW: usize = 256;
/// Failed requests, or failed holes, in a row before a run stops ([`Failures`]).
pub const DEFAULT_MAX_FAILURES: usize = 8;
/// How long a hole waits for one stage at most ([`EvalOptions::stage_deadline`]): far beyond
/// a stage's normal time (building a hole's prompts takes well under a second; a request ends
/// at its backend's own deadline, a minute unless configured), so that only a stall reaches it.
pub const DEFAULT_STAGE_DEADLINE: Duration = Duration::from_secs(600);

/// How to run the protocol.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Holes per repository at most (RLPG capped at 10,000).
    pub holes: Option<usize>,
    pub seed: u64,
    pub budget: usize,
    /// Completions in flight at once.
    pub concurrency: usize,
    /// The part of the sampled holes to run.
    pub shard: Shard,
    /// The candidates completed (`--candidates`); the default context always is.
    pub candidates: Selection,
    /// Whose rules place the holes and build the contexts.
    pub fidelity: Fidelity,
    /// The tokenizer budgets are counted in.
    pub tokenizer: TokenizerKind,
    /// Per hole, the candidates a budget of requests chose to complete besides `candidates`
    /// (`keyhole tune`); the run then labels only the holes the plan names.
    pub plan: Option<Arc<Plan>>,
    /// How long a hole waits for one stage at most (its prompts built on the CPU pool, one
    /// request answered, ...) before the run stops, naming the hole and the stage.
    pub stage_deadline: Duration,
}

/// The holes a run labels in `index`: RLPG's sample of at most `holes` drawn with `seed`, or
/// `shard`'s part of it.
pub fn run_holes(
    index: &RepoIndex,
    holes: Option<usize>,
    seed: u64,
    fidelity: Fidelity,
    shard: Shard,
) -> Vec<Hole> {
    shard.select(sample_holes(index, holes, seed, fidelity.hole_column()))
}

/// The id of `hole` of the repository named `repository`, as its rows carry it.
pub fn run_hole_id(repository: &str, index: &RepoIndex, hole: &Hole) -> String {
    hole_id(
        repository,
        &index.files[hole.file].path,
        hole.line + 1,
        hole.column + 1,
    )
}

/// Why a candidate's row has no prompt when the run's candidate set leaves it out.
pub const NOT_SELECTED: &str = "not in this run's candidate set (--candidates)";

/// One repository's run.
pub struct RepoRun<'a> {
    pub repository: &'a str,
    /// The repository, its backend and budget: what every candidate is built from.
    pub session: &'a Session,
    pub options: &'a EvalOptions,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    pub holes: usize,
    /// Holes already in the label file from an earlier run.
    pub resumed: usize,
    pub completed: usize,
    /// Holes with a failed request: they have no rows, and the next run retries them.
    pub failed: usize,
    /// Why the last failed hole failed.
    pub last_error: Option<BackendError>,
    /// Requests sent, and the candidates that took another's answer instead (their prompts
    /// were identical to it).
    pub requests: usize,
    pub shared: usize,
}

/// `N holes: C complete (R from an earlier run, K now), F failed`.
impl std::fmt::Display for RunStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} holes: {} complete ({} from an earlier run, {} now), {} failed",
            self.holes,
            self.resumed + self.completed,
            self.resumed,
            self.completed,
            self.failed
        )
    }
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No request can succeed: a wrong key, model or URL.
    #[error(
        "{0} ({1} stopped: no request can succeed until the backend's key, model or URL is fixed)"
    )]
    Configuration(BackendError, &'static str),
    #[error("{command} stopped after {count} failed {what} in a row; the last: {last}")]
    Failing {
        command: &'static str,
        count: usize,
        what: &'static str,
        last: BackendError,
    },
    #[error("cannot write {path}: {source}")]
    Labels {
        path: String,
        source: std::io::Error,
    },
    /// A hole waited past the stage deadline: something is stuck, and waiting longer would
    /// wait for ever.
    #[error(
        "{command} stopped: hole {hole} waited {} s for {stage} (--stage-deadline); keyhole or its backend is stuck there",
        deadline.as_secs_f64()
    )]
    Stalled {
        command: &'static str,
        hole: String,
        stage: Stage,
        deadline: Duration,
    },
}

/// A stage of a hole, as a stalled run names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// Building the prompts that need nothing from the backend, on the CPU pool.
    FirstPrompts,
    /// Composing prompts again to fit the backend's own token count.
    Fitting,
    /// One of the requests of its first stage.
    FirstRequest,
    /// Building the prompts made from the first stage's completions, on the CPU pool.
    SecondPrompts,
    /// One of the requests of its second stage.
    SecondRequest,
    /// Scoring its completions into rows, on the CPU pool.
    Rows,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::FirstPrompts => "its prompts to be built (first stage, on the CPU pool)",
            Stage::Fitting => "its prompts to be fitted to the backend's token count",
            Stage::FirstRequest => "a completion of its first stage",
            Stage::SecondPrompts => "its second-stage prompts to be built (on the CPU pool)",
            Stage::SecondRequest => "a completion of its second stage",
            Stage::Rows => "its rows to be scored (on the CPU pool)",
        })
    }
}

/// Failures in a row, of requests and of holes, and the decision to stop. A dead server fails
/// every request at once (about one per hole: a failed hole's other requests are skipped) and
/// a hung one every request at its deadline, so `max` requests in a row stop a run within
/// moments or after about max / concurrency deadlines; a server that fails some candidate of
/// every hole (say, prompts longer than its context) is caught by `max` holes in a row.
/// Shared by all the stages of an evaluation that send requests.
#[derive(Debug)]
pub struct Failures {
    /// The command that stops, for its message.
    command: &'static str,
    max: usize,
    requests: usize,
    holes: usize,
}

impl Failures {
    /// The command that stops, for its messages.
    pub fn command(&self) -> &'static str {
        self.command
    }

    /// `keyhole eval`'s failures.
    pub fn new(max: usize) -> Failures {
        Failures::of("eval", max)
    }

    /// The failures of the command `command` (for its messages), which stops at `max`.
    pub fn of(command: &'static str, max: usize) -> Failures {
        Failures {
            command,
            max: max.max(1),
            requests: 0,
            holes: 0,
        }
    }

    /// Counts a request's outcome; an error when the run must stop.
    pub fn request<T>(&mut self, result: &Result<T, BackendError>) -> Result<(), RunError> {
        match result {
            Ok(_) => {
                self.requests = 0;
                Ok(())
            }
            Err(err) if err.is_configuration() => {
                Err(RunError::Configuration(err.clone(), self.command))
            }
            Err(err) => {
                self.requests += 1;
                self.check(self.requests, "requests", err)
            }
        }
    }

    /// Counts a hole's outcome (`Some` error when it failed); an error when the run must stop.
    pub fn hole(&mut self, failed: Option<&BackendError>) -> Result<(), RunError> {
        match failed {
            None => {
                self.holes = 0;
                Ok(())
            }
            Some(err) => {
                self.holes += 1;
                self.check(self.holes, "holes", err)
            }
        }
    }

    fn check(&self, count: usize, what: &'static str, last: &BackendError) -> Result<(), RunError> {
        if count >= self.max {
            Err(RunError::Failing {
                command: self.command,
                count,
                what,
                last: last.clone(),
            })
        } else {
            Ok(())
        }
    }
}

/// A candidate's prompt for a hole (`None` when the candidate is not applicable), with what
/// the report ranks by: the BM25 score of a proposal's context against the hole window
/// (RLPG-BM25), a retrieved candidate's similarities (ProCC's bandit).
pub(super) struct HolePrompt {
    pub(super) id: CandidateId,
    pub(super) prompt: Option<Prompt>,
    bm25: Option<f64>,
    retrieval_score: Option<f64>,
    retrieval_jaccard: Option<f64>,
    why_not: Option<String>,
    /// The candidate's context, kept where the backend counts tokens in a tokenizer of its own,
    /// so that the prompt can be composed again to fit the budget as the model counts it.
    context: Option<BuiltContext>,
}

impl HolePrompt {
    fn retrieved(candidate: RetrievedContext, composer: &Composer, refit: bool) -> HolePrompt {
        HolePrompt {
            id: candidate.id,
            prompt: candidate.compose(composer),
            bm25: None,
            retrieval_score: candidate.score,
            retrieval_jaccard: candidate.jaccard,
            why_not: candidate.why_not.clone(),
            context: refit.then_some(BuiltContext::Retrieved(candidate)),
        }
    }
}

/// What one completion job is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Job {
    Candidate(CandidateId),
    Draft(Draft),
}

/// One hole's first stage: its composer, the prompts that need nothing from the backend, and
/// the drafts to write.
pub(super) struct FirstStage {
    pub(super) composer: Composer<'static>,
    pub(super) prompts: Vec<HolePrompt>,
    pub(super) drafts: Vec<(Draft, CompletionRequest)>,
}

/// A hole's completions by job, or the error that failed it.
type Outcome = Result<Vec<(Job, String)>, BackendError>;
/// A hole's rows, or the error that failed it.
type HoleDone = Result<Vec<LabelRow>, BackendError>;

/// What the holes in flight share: the run's parts for their jobs on the CPU pool, the failure
/// count that stops the run, and the requests in flight (`concurrency`).
struct Shared<'f> {
    cpu: Arc<Owned>,
    /// The command that runs, for the message of a stalled hole.
    command: &'static str,
    failures: Mutex<&'f mut Failures>,
    in_flight: Semaphore,
    /// Requests sent, and jobs answered by another's identical request.
    sent: AtomicUsize,
    shared: AtomicUsize,
}

/// A job with its request, keyed by what it belongs to (a hole of a chunk).
pub(super) type KeyedJob<K> = (K, Job, CompletionRequest);
/// A job that takes the answer of another's identical request: (key, job, the other job).
pub(super) type Follower<K> = (K, Job, Job);

/// `jobs` with each request sent once per key (a hole): the jobs to send, and for every job
/// left out (key, job, the job sent with the identical request) so that one answer labels
/// all of them. Candidates whose composed prompts are the same (two proposals that found the
/// same context, or none that fits) cost one request.
pub(super) fn share_identical<K: PartialEq + Copy>(
    jobs: Vec<KeyedJob<K>>,
) -> (Vec<KeyedJob<K>>, Vec<Follower<K>>) {
    let mut sent: Vec<KeyedJob<K>> = Vec::with_capacity(jobs.len());
    let mut copies = Vec::new();
    for (key, job, request) in jobs {
        match sent.iter().find(|(k, _, r)| *k == key && *r == request) {
            Some(&(_, leader, _)) => copies.push((key, job, leader)),
            None => sent.push((key, job, request)),
        }
    }
    (sent, copies)
}

/// Adds `job`'s answer to `done`: the text `leader` got for the same request.
pub(super) fn copy_answer(done: &mut Vec<(Job, String)>, job: Job, leader: Job) {
    if let Some(text) = done
        .iter()
        .find(|(j, _)| *j == leader)
        .map(|(_, t)| t.clone())
    {
        done.push((job, text));
    }
}

/// A run's parts owned, for the jobs of its holes on the CPU pool: a job is not scoped to the
/// run, so that a run whose hole waited past its deadline returns rather than wait for ever
/// for the job that is stuck.
struct Owned {
    repository: String,
    session: Session,
    options: EvalOptions,
}

impl Owned {
    fn run(&self) -> RepoRun<'_> {
        RepoRun {
            repository: &self.repository,
            session: &self.session,
            options: &self.options,
        }
    }
}

/// `work` on the run's holes, run on the CPU pool and awaited without holding up the thread
/// that polls the run; a panic in it is the caller's.
async fn on_cpu<T: Send + 'static>(
    cpu: &Arc<Owned>,
    work: impl FnOnce(&RepoRun) -> T + Send + 'static,
) -> T {
    let (send, result) = tokio::sync::oneshot::channel();
    let cpu = Arc::clone(cpu);
    rayon::spawn(move || {
        let work = std::panic::AssertUnwindSafe(|| work(&cpu.run()));
        let _ = send.send(std::panic::catch_unwind(work));
    });
    match result.await {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => unreachable!("the pool runs every job spawned on it"),
    }
}

/// One stage of one hole with the run's deadline for it.
#[derive(Clone, Copy)]
struct Deadline<'h, 'r> {
    run: &'r RepoRun<'r>,
    hole: &'h Hole,
    stage: Stage,
    command: &'static str,
}

impl Deadline<'_, '_> {
    /// What `work` gives, or [`RunError::Stalled`] once it has taken the stage deadline.
    async fn wait<T>(self, work: impl Future<Output = T>) -> Result<T, RunError> {
        let deadline = self.run.options.stage_deadline;
        tokio::time::timeout(deadline, work)
            .await
            .map_err(|_| RunError::Stalled {
                command: self.command,
                hole: self.run.id(self.hole),
                stage: self.stage,
                deadline,
            })
    }
}

impl RepoRun<'_> {
    /// Run every hole not yet in `labels`; a hole's rows are written when all its completions
    /// are in. A hole with a failed request gets no rows (the next run retries it); the run
    /// stops at once when no request can succeed, or when `failures` says so.
    /// `progress(holes done, holes in all)` is called as each hole's rows are written.
    pub fn run(
        &self,
        runtime: &tokio::runtime::Runtime,
        labels: &mut LabelFile,
        progress: &(dyn Fn(usize, usize) + Sync),
        failures: &mut Failures,
    ) -> Result<RunStats, RunError> {
        let holes = self.holes();
        let todo: Vec<&Hole> = holes
            .iter()
            .filter(|h| !labels.is_done(&self.id(h)))
            .collect();
        let mut stats = RunStats {
            holes: holes.len(),
            resumed: holes.len() - todo.len(),
            ..RunStats::default()
        };
        progress(stats.resumed, stats.holes);
        // Built before any hole starts, rather than by the first holes while the others wait.
        self.session.build_shared();
        let shared = Shared {
            cpu: Arc::new(Owned {
                repository: self.repository.to_string(),
                session: self.session.clone(),
                options: self.options.clone(),
            }),
            command: failures.command(),
            failures: Mutex::new(failures),
            in_flight: Semaphore::new(self.options.concurrency.max(1)),
            sent: AtomicUsize::new(0),
            shared: AtomicUsize::new(0),
        };
        // This thread only sends, receives and writes; every hole's prompts and rows are built
        // on the CPU pool, so building one hole never holds up another's requests.
        runtime.block_on(self.drive(&todo, labels, progress, &shared, &mut stats))?;
        Ok(stats)
    }

    /// The run's loop: starts holes while there is room, and writes each in the order sampled
    /// as they finish.
    async fn drive(
        &self,
        todo: &[&Hole],
        labels: &mut LabelFile,
        progress: &(dyn Fn(usize, usize) + Sync),
        shared: &Shared<'_>,
        stats: &mut RunStats,
    ) -> Result<(), RunError> {
        // Holes complete independently and are written in the order sampled: a hole done
        // before the ones ahead of it waits (its rows only) until they are written. A hole that
        // must stop the run stops it when its turn comes; one whose request says stop stops it
        // at once, the holes done by then written and those in flight dropped (cancelled).
        let mut pending = todo.iter().enumerate();
        let mut in_flight = FuturesUnordered::new();
        let mut waiting: BTreeMap<usize, HoleDone> = BTreeMap::new();
        let (mut started, mut written) = (0, 0);
        loop {
            while in_flight.len() < HOLES_IN_FLIGHT && started - written < WRITE_WINDOW {
                let Some((position, &hole)) = pending.next() else {
                    break;
                };
                in_flight.push(async move { (position, self.complete_hole(hole, shared).await) });
                started += 1;
            }
            let Some((position, done)) = in_flight.next().await else {
                return Ok(());
            };
            let mut stop = match done {
                Ok(done) => {
                    waiting.insert(position, done);
                    None
                }
                Err(err) => Some(err),
            };
            // In order, or every hole done so far once the run stops.
            while let Some(entry) = waiting.first_entry() {
                if stop.is_none() && *entry.key() != written {
                    break;
                }
                let done = entry.remove();
                written += 1;
                if let Err(err) = self.write_hole(done, labels, shared, stats) {
                    stop.get_or_insert(err);
                }
                progress(stats.resumed + stats.completed + stats.failed, stats.holes);
            }
            stats.requests = shared.sent.load(Ordering::Relaxed);
            stats.shared = shared.shared.load(Ordering::Relaxed);
            if let Some(err) = stop {
                return Err(err);
            }
        }
    }

    /// Both stages of one hole, its prompts and rows built on the CPU pool: its rows, or the
    /// request that failed it; an error when the run must stop, or when the hole waited past
    /// the stage deadline.
    async fn complete_hole(&self, hole: &Hole, shared: &Shared<'_>) -> Result<HoleDone, RunError> {
        let within = |stage| self.within(hole, stage, shared);
        let cpu = &shared.cpu;
        let owned = hole.clone();
        let mut first = within(Stage::FirstPrompts)
            .wait(on_cpu(cpu, move |run| run.first_stage(&owned)))
            .await?;
        if let Err(err) = within(Stage::Fitting)
            .wait(self.fit(hole, &mut first.prompts))
            .await?
        {
            return Ok(Err(err));
        }
        let jobs = self.first_jobs(hole, &first);
        let done = match self
            .complete_all(jobs, shared, within(Stage::FirstRequest))
            .await?
        {
            Ok(done) => done,
            Err(err) => return Ok(Err(err)),
        };
        let owned = hole.clone();
        let (mut second, first, mut done) = within(Stage::SecondPrompts)
            .wait(on_cpu(cpu, move |run| {
                let second = run.second_stage(&owned, &first.composer, &done);
                (second, first, done)
            }))
            .await?;
        if let Err(err) = within(Stage::Fitting)
            .wait(self.fit(hole, &mut second))
            .await?
        {
            return Ok(Err(err));
        }
        let jobs = self.candidate_jobs(hole, &second);
        match self
            .complete_all(jobs, shared, within(Stage::SecondRequest))
            .await?
        {
            Ok(more) => done.extend(more),
            Err(err) => return Ok(Err(err)),
        }
        let (owned, prompts) = (hole.clone(), first.prompts);
        let rows = within(Stage::Rows)
            .wait(on_cpu(cpu, move |run| {
                run.rows(&owned, prompts, second, done)
            }))
            .await?;
        Ok(Ok(rows))
    }

    /// `stage` of `hole`, bounded by the run's stage deadline.
    fn within<'h>(&self, hole: &'h Hole, stage: Stage, shared: &Shared<'_>) -> Deadline<'h, '_> {
        Deadline {
            run: self,
            hole,
            stage,
            command: shared.command,
        }
    }

    /// Writes the rows of a hole that completed, or counts it as failed; an error when the
    /// run must stop.
    fn write_hole(
        &self,
        done: HoleDone,
        labels: &mut LabelFile,
        shared: &Shared<'_>,
        stats: &mut RunStats,
    ) -> Result<(), RunError> {
        let mut failures = shared.failures.lock().unwrap_or_else(|e| e.into_inner());
        match done {
            Ok(rows) => {
                labels
                    .append_hole(&rows)
                    .map_err(|source| RunError::Labels {
                        path: labels.path().display().to_string(),
                        source,
                    })?;
                stats.completed += 1;
                failures.hole(None)
            }
            Err(err) => {
                stats.failed += 1;
                let counted = failures.hole(Some(&err));
                stats.last_error = Some(err);
                counted
            }
        }
    }

    /// The holes this run labels: RLPG's sample, or this shard's part of it; with a plan, the
    /// ones it names.
    pub fn holes(&self) -> Vec<Hole> {
        let o = self.options;
        let mut holes = run_holes(&self.session.index, o.holes, o.seed, o.fidelity, o.shard);
        if let Some(plan) = &o.plan {
            holes.retain(|h| plan.has(&self.id(h)));
        }
        holes
    }

    /// RLPG's applicable candidates of `hole` grouped by the request each would send (a group
    /// costs one request: `share_identical`), each with the probability of success the
    /// session's RLPG-H gives it: what a [`super::plan`] weighs.
    pub fn candidate_groups(&self, hole: &Hole) -> Vec<super::plan::Group> {
        let composer = self.session.composer(hole);
        let built = self.session.proposals(hole);
        let ranked = self
            .session
            .rank(hole, &built, RankerKind::RlpgH)
            .unwrap_or_default();
        let probability = |id| ranked.iter().find(|r| r.id == id).map_or(0.0, |r| r.score);
        let mut prompts: Vec<(CandidateId, Prompt)> = built
            .iter()
            .filter(|p| p.applicable())
            .map(|p| (p.spec.id, composer.compose(p)))
            .collect();
        prompts.push((CandidateId::DEFAULT, composer.compose(&DefaultContext)));
        let jobs = prompts
            .iter()
            .map(|(id, prompt)| ((), Job::Candidate(*id), self.request(hole, prompt)))
            .collect();
        let (sent, copies) = share_identical(jobs);
        // Every job here is a candidate's.
        let candidate = |job| match job {
            Job::Candidate(id) => Some((id, probability(id))),
            Job::Draft(_) => None,
        };
        sent.into_iter()
            .map(|((), leader, _)| {
                let members = copies.iter().filter(|(_, _, l)| *l == leader);
                let jobs = std::iter::once(leader).chain(members.map(|&(_, job, _)| job));
                super::plan::Group(jobs.filter_map(candidate).collect())
            })
            .collect()
    }

    pub fn id(&self, hole: &Hole) -> String {
        run_hole_id(self.repository, &self.session.index, hole)
    }

    fn perspectives(&self) -> Perspectives<'_> {
        self.session.perspectives()
    }

    /// The default prompt, every proposal's (RLPG builds all 62 for every hole), the retrieved
    /// candidates that need nothing from the backend, and the drafts the others need.
    pub(super) fn first_stage(&self, hole: &Hole) -> FirstStage {
        let composer = self.session.composer(hole);
        let refit = !self.session.counts_exactly();
        let built: Vec<ProposalContext> = self.session.proposals(hole);
        let bm25 =
            bm25::proposal_scores(&built, &retrieval::hole_window(&self.session.index, hole));
        let mut prompts: Vec<HolePrompt> = built
            .iter()
            .zip(bm25)
            .map(|(p, score)| {
                let prompt = p.applicable().then(|| composer.compose(p));
                HolePrompt {
                    id: p.spec.id,
                    bm25: prompt.as_ref().map(|_| score),
                    prompt,
                    retrieval_score: None,
                    retrieval_jaccard: None,
                    why_not: None,
                    context: refit.then(|| BuiltContext::Proposal(p.clone())),
                }
            })
            .collect();
        prompts.push(HolePrompt {
            id: CandidateId::DEFAULT,
            prompt: Some(composer.compose(&DefaultContext)),
            bm25: None,
            retrieval_score: None,
            retrieval_jaccard: None,
            why_not: None,
            context: refit.then_some(BuiltContext::Default),
        });
        let perspectives = self.perspectives();
        let immediate = perspectives.immediate(hole);
        let top = self.top(hole, &built);
        let backend = self.session.backend.as_ref();
        let drafts = perspectives
            .later_drafts(hole, &composer, &immediate, backend)
            .into_iter()
            .filter(|(draft, _)| match draft {
                // Candidate 66's own completion (or the default context's) is RepoCoder's line.
                Draft::RepoCoderLine => false,
                Draft::HypotheticalLine => self.selected(CandidateId::HYPOTHETICAL_LINE, &top),
                Draft::Summary => self.selected(CandidateId::SUMMARY, &top),
            })
            .collect();
        prompts.extend(
            immediate
                .into_iter()
                .map(|c| HolePrompt::retrieved(c, &composer, refit)),
        );
        self.leave_out(&mut prompts, &top);
        FirstStage {
            composer,
            prompts,
            drafts,
        }
    }

    /// The candidates built from the first stage's completions: RepoCoder's second iteration
    /// (from RepoCoder's first completion, or the default context's where RepoCoder found
    /// nothing, as RepoCoder's prompt then is the code alone), the hypothetical line and the
    /// summary.
    pub(super) fn second_stage(
        &self,
        hole: &Hole,
        composer: &Composer,
        done: &[(Job, String)],
    ) -> Vec<HolePrompt> {
        let text = |job: Job| {
            done.iter()
                .find(|(j, _)| *j == job)
                .map(|(_, t)| t.as_str())
        };
        let drafted = |draft| match draft {
            Draft::RepoCoderLine => text(Job::Candidate(CandidateId::REPOCODER))
                .or_else(|| text(Job::Candidate(CandidateId::DEFAULT))),
            draft => text(Job::Draft(draft)),
        };
        let built = self
            .perspectives()
            .later_from(hole, drafted, self.session.backend.as_ref());
        let mut later: Vec<HolePrompt> = built
            .into_iter()
            .map(|c| HolePrompt::retrieved(c, composer, !self.session.counts_exactly()))
            .collect();
        // top:N names RLPG's candidates only, so these are chosen by id or not at all.
        self.leave_out(&mut later, &[]);
        later
    }

    /// RLPG's candidates chosen for this hole beyond the run's ids: the plan's, and those
    /// `top:N` takes by the run's RLPG-H ranking.
    fn top(&self, hole: &Hole, built: &[ProposalContext]) -> Vec<CandidateId> {
        let mut chosen = match &self.options.plan {
            Some(plan) => plan.candidates(&self.id(hole)).to_vec(),
            None => Vec::new(),
        };
        let Some(n) = self.options.candidates.top else {
            return chosen;
        };
        let ranked = self.session.rank(hole, built, RankerKind::RlpgH);
        chosen.extend(
            ranked
                .map(|r| r.into_iter().take(n).map(|r| r.id).collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        chosen
    }

    /// Whether the run completes any candidate built from another completion (a second stage;
    /// `top:N` names RLPG's candidates only, which need none).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // batch files' question
    pub(super) fn has_second_stage(&self) -> bool {
        let later = [
            CandidateId::REPOCODER_ITERATION,
            CandidateId::HYPOTHETICAL_LINE,
            CandidateId::SUMMARY,
        ];
        later
            .iter()
            .any(|id| self.options.candidates.ids.contains(id))
    }

    /// Whether the run completes candidate `id` for a hole whose `top:N` candidates are `top`.
    fn selected(&self, id: CandidateId, top: &[CandidateId]) -> bool {
        id == CandidateId::DEFAULT || self.options.candidates.ids.contains(&id) || top.contains(&id)
    }

    /// Take the prompt from every candidate the run's set leaves out: its row says why, and
    /// nothing is sent for it.
    fn leave_out(&self, prompts: &mut [HolePrompt], top: &[CandidateId]) {
        for p in prompts.iter_mut().filter(|p| !self.selected(p.id, top)) {
            p.prompt = None;
            p.context = None;
            p.bm25 = None;
            p.why_not = Some(NOT_SELECTED.to_string());
        }
    }

    /// Compose every prompt of `prompts` again to fit the budget as the backend's model counts
    /// it, where the backend counts in a tokenizer of its own (see [`Session::fit`]). A prompt
    /// that cannot fit is left out with the reason in its row; a failed count fails the hole.
    async fn fit(&self, hole: &Hole, prompts: &mut [HolePrompt]) -> Result<(), BackendError> {
        let fitted = futures_util::future::join_all(prompts.iter().map(|p| async move {
            let (Some(_), Some(context)) = (&p.prompt, &p.context) else {
                return None;
            };
            Some(
                self.session
                    .fit(hole, |composer| context.compose(composer))
                    .await,
            )
        }))
        .await;
        for (p, fitted) in prompts.iter_mut().zip(fitted) {
            match fitted {
                None => {}
                Some(Ok(prompt)) => p.prompt = Some(prompt),
                Some(Err(FitError::Backend(err))) => return Err(err),
                Some(Err(err @ FitError::DoesNotFit { .. })) => {
                    p.prompt = None;
                    p.bm25 = None;
                    p.why_not = Some(err.to_string());
                }
            }
        }
        Ok(())
    }

    /// Complete `jobs`, one hole's: its completions by job, or the error that failed it. Once
    /// a request failed, the hole's jobs not yet sent are skipped (its other answers would be
    /// thrown away); the run stops as soon as `failures` says so, which drops (cancels) the
    /// requests still in flight.
    async fn complete_all(
        &self,
        jobs: Vec<(Job, CompletionRequest)>,
        shared: &Shared<'_>,
        deadline: Deadline<'_, '_>,
    ) -> Result<Outcome, RunError> {
        let jobs = jobs.into_iter().map(|(job, request)| ((), job, request));
        let (jobs, copies) = share_identical(jobs.collect());
        shared.shared.fetch_add(copies.len(), Ordering::Relaxed);
        let failed = &AtomicBool::new(false);
        let mut done = stream::iter(jobs)
            .map(|((), job, request)| async move {
                // Shared by the holes in flight: --concurrency bounds the run, not a hole.
                let _slot = shared.in_flight.acquire().await;
                if failed.load(Ordering::Relaxed) {
                    return (job, None);
                }
                shared.sent.fetch_add(1, Ordering::Relaxed);
                let backend = self.session.backend.as_ref();
                let result = deadline
                    .wait(perspectives::first_completion(backend, &request))
                    .await;
                (job, Some(result))
            })
            .buffer_unordered(self.options.concurrency.max(1));
        let mut outcome: Outcome = Ok(Vec::new());
        while let Some((job, result)) = done.next().await {
            let Some(result) = result else { continue };
            let result = result?;
            (shared.failures.lock().unwrap_or_else(|e| e.into_inner())).request(&result)?;
            match (result, &mut outcome) {
                (Ok(text), Ok(list)) => list.push((job, text)),
                (Err(err), slot) => {
                    failed.store(true, Ordering::Relaxed);
                    *slot = Err(err);
                }
                (Ok(_), Err(_)) => {}
            }
        }
        if let Ok(list) = &mut outcome {
            for ((), job, leader) in copies {
                copy_answer(list, job, leader);
            }
        }
        Ok(outcome)
    }

    pub(super) fn request(&self, hole: &Hole, prompt: &Prompt) -> CompletionRequest {
        perspectives::line_request(&self.session.index, hole, prompt)
    }

    /// What a hole's first stage completes: its applicable prompts and its drafts.
    pub(super) fn first_jobs(
        &self,
        hole: &Hole,
        first: &FirstStage,
    ) -> Vec<(Job, CompletionRequest)> {
        let mut jobs = self.candidate_jobs(hole, &first.prompts);
        let drafts = first.drafts.iter();
        jobs.extend(drafts.map(|(draft, request)| (Job::Draft(*draft), request.clone())));
        jobs
    }

    /// The completions of the applicable ones of `prompts`.
    pub(super) fn candidate_jobs(
        &self,
        hole: &Hole,
        prompts: &[HolePrompt],
    ) -> Vec<(Job, CompletionRequest)> {
        let applicable = prompts
            .iter()
            .filter_map(|c| Some((c.id, c.prompt.as_ref()?)));
        applicable
            .map(|(id, prompt)| (Job::Candidate(id), self.request(hole, prompt)))
            .collect()
    }

    /// A hole's rows from both stages' prompts and all its completions.
    pub(super) fn rows(
        &self,
        hole: &Hole,
        mut prompts: Vec<HolePrompt>,
        second: Vec<HolePrompt>,
        mut predictions: Vec<(Job, String)>,
    ) -> Vec<LabelRow> {
        prompts.extend(second);
        prompts.sort_by_key(|p| p.id);
        let target = hole.target.clone().unwrap_or_default();
        let file = &self.session.index.files[hole.file].path;
        prompts
            .iter()
            .map(|p| {
                let HolePrompt { id, prompt, .. } = p;
                let prediction = predictions
                    .iter()
                    .position(|(job, _)| *job == Job::Candidate(*id))
                    .map(|i| predictions.swap_remove(i).1);
                let text = prediction.unwrap_or_default();
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
                    fidelity: self.session.fidelity,
                    applicable: prompt.is_some(),
                    success: prompt.is_some() && scores.exact_match,
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
                    backend: self.session.backend.name().to_string(),
                    error: None,
                    bm25: p.bm25,
                    retrieval_score: p.retrieval_score,
                    retrieval_jaccard: p.retrieval_jaccard,
                    why_not: p.why_not.clone(),
                    model_room: prompt.as_ref().and_then(|p| p.model_room),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Condvar;

    use async_trait::async_trait;
    use tokio::sync::mpsc::UnboundedSender;

    use super::*;
    use crate::dirs::Dirs;
    use crate::model::{Backend, Completion, Delta, TokenCounting};
    use crate::session::Settings;

    /// A backend stuck in what a hole's first stage asks it on the CPU pool (which tokenizer it
    /// counts in) until the test lets it go.
    #[derive(Default)]
    struct Stuck {
        released: Mutex<bool>,
        release: Condvar,
    }

    impl Stuck {
        fn let_go(&self) {
            *self.released.lock().unwrap() = true;
            self.release.notify_all();
        }
    }

    #[async_trait]
    impl Backend for Stuck {
        fn name(&self) -> &str {
            "stuck"
        }

        fn counting(&self) -> TokenCounting {
            TokenCounting::Approximate
        }

        fn tokenizer(&self) -> Option<&'static str> {
            let released = self.released.lock().unwrap();
            drop(self.release.wait_while(released, |r| !*r).unwrap());
            None
        }

        async fn complete(
            &self,
            _: &CompletionRequest,
            _: Option<&UnboundedSender<Delta>>,
        ) -> Result<Vec<Completion>, BackendError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn a_stage_stuck_on_the_cpu_pool_stops_the_run_at_its_deadline_naming_hole_and_stage() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = Dirs {
            data: Some(scratch.path().into()),
            ..Dirs::none()
        };
        let repo = crate::sample::materialize(&dirs).unwrap();
        let settings = Settings::default();
        let stuck = Arc::new(Stuck::default());
        let session = Session::builder(&settings)
            .backend(stuck.clone())
            .open(&repo)
            .unwrap();
        let options = EvalOptions {
            holes: Some(3),
            seed: settings.seed,
            budget: settings.budget,
            concurrency: 4,
            shard: Shard::WHOLE,
            candidates: Selection::all(),
            fidelity: settings.profile,
            tokenizer: settings.tokenizer(),
            plan: None,
            stage_deadline: Duration::from_millis(500),
        };
        let run = RepoRun {
            repository: "sample",
            session: &session,
            options: &options,
        };
        let (mut labels, _) = LabelFile::open(
            &scratch.path().join("labels.jsonl"),
            super::super::WRITTEN_ROWS,
        )
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let mut failures = Failures::new(DEFAULT_MAX_FAILURES);
        // The run returns while the stuck jobs still hold their threads of the pool.
        let result = run.run(&runtime, &mut labels, &|_, _| {}, &mut failures);
        stuck.let_go();
        let Err(err @ RunError::Stalled { stage, .. }) = result else {
            panic!("{result:?}");
        };
        assert_eq!(stage, Stage::FirstPrompts);
        let message = err.to_string();
        assert!(
            message.starts_with("eval stopped: hole sample/")
                && message.ends_with(
                    "waited 0.5 s for its prompts to be built (first stage, on the CPU pool) (--stage-deadline); keyhole or its backend is stuck there"
                ),
            "{message}"
        );
    }
}
