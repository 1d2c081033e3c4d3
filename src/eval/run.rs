//! An evaluation over many repositories, as `keyhole eval` runs one: each repository's session
//! labels its holes into a label file (online, or from batch files), and the report is written
//! from every label file of the output directory. What happens along the way reaches the
//! caller through an [`Observer`].
//!
//! ```
//! use keyhole::eval::{self, Evaluation, Observer};
//! use keyhole::{Dirs, Settings};
//!
//! /// Notes on standard error; no progress display, the report left in its file.
//! struct Quiet;
//! impl Observer for Quiet {
//!     fn note(&self, line: &str) -> std::io::Result<()> {
//!         Ok(eprintln!("{line}"))
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let scratch = tempfile::tempdir()?;
//! # let dirs = Dirs { data: Some(scratch.path().into()), ..Dirs::none() };
//! let repo = keyhole::sample::materialize(&dirs)?;
//! // The embedded model and the bundled classifier; nothing of the user's is read or written.
//! let settings = Settings::default();
//! let mut evaluation = Evaluation::new(scratch.path().join("eval"));
//! evaluation.holes = 2;
//! evaluation.compose.clear(); // no compositions of the classifier's best proposals
//! let outcome = eval::run(&settings, &[repo], &evaluation, &Quiet)?;
//! assert_eq!(outcome.stats.holes, 2);
//! let report = outcome.report.expect("every hole was answered");
//! assert!(std::fs::read_to_string(report)?.contains("RLPG-H"));
//! # Ok(()) }
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Batch files speak the HTTP backends' wire formats.
#[cfg(feature = "http")]
pub mod batch_files;
mod error;
mod report;
/// Without the HTTP wire formats there are no batch files: a run that names some stops.
#[cfg(not(feature = "http"))]
pub(crate) mod batch_files {
    use std::path::{Path, PathBuf};

    use super::{EvalError, Observer};
    use crate::eval::labels::LabelFile;
    use crate::eval::runner::{RepoRun, RunStats};
    use crate::model::config::BackendConfig;

    pub enum BatchFiles {}

    impl BatchFiles {
        pub fn open(
            export_requests: Option<&Path>,
            import_responses: &[PathBuf],
            _: &BackendConfig,
            _: &dyn Observer,
        ) -> Result<Option<BatchFiles>, EvalError> {
            if export_requests.is_some() || !import_responses.is_empty() {
                return Err(EvalError::NoBatchFiles);
            }
            Ok(None)
        }

        pub fn label(&mut self, _: &RepoRun, _: &mut LabelFile) -> Result<RunStats, EvalError> {
            match *self {}
        }

        pub fn finish(self, _: &dyn Observer) -> Result<bool, EvalError> {
            match self {}
        }
    }
}

use self::batch_files::BatchFiles;
pub(crate) use self::error::At;
pub use self::error::EvalError;
use super::WRITTEN_ROWS;
use super::labels::{self, LabelFile};
use super::outdir::{LabelSettings, OutDir, ReportSettings};
use super::runner::{
    DEFAULT_MAX_FAILURES, DEFAULT_STAGE_DEADLINE, EvalOptions, Failures, RepoRun, RunStats,
    run_holes,
};
use super::shard::Shard;
use crate::candidate::Selection;
use crate::model::config::{BackendConfig, BackendKind, MAX_CONCURRENCY};
use crate::model::{self, Backend, BackendError};
use crate::rank::RankerKind;
use crate::repo::{OpenError, RepoIndex};
use crate::session::{Session, Settings};

/// Holes per repository at most unless asked otherwise: RLPG's cap.
pub const DEFAULT_HOLES: usize = 10_000;
/// Completions in flight at once unless asked otherwise.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// What an evaluation does beyond what its sessions' [`Settings`] say (the backend, budget,
/// tokenizer, profile, classifier and seed come from them).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Evaluation {
    /// Holes per repository at most, drawn with the settings' seed.
    pub holes: usize,
    /// Where label files (labels/REPO.jsonl), report.md, report.json and plots/ go.
    pub out: PathBuf,
    /// Repositories of the training split (by name); the fixed proposal is chosen on them
    /// and the others are the test split.
    pub train: Vec<String>,
    /// Completions in flight at once (at most the backend's `concurrency`).
    pub concurrency: usize,
    /// Stop after this many failed requests, or failed holes, in a row.
    pub max_failures: usize,
    /// Stop when a hole waits this long for one stage (a stall, never a slow run).
    pub stage_deadline: std::time::Duration,
    /// Keep ProCC's bandit, as trained for the report, in the data directory too.
    pub keep_bandit: bool,
    /// Compositions of the classifier's top-l proposals to complete on the test holes
    /// (appendix D.4, l > 1).
    pub compose: Vec<usize>,
    /// Complete only these candidates (the default context always is); none: all.
    pub candidates: Option<Selection>,
    /// Label only this shard of the sampled holes; none: all of them.
    pub shard: Option<Shard>,
    /// Write the requests the run still needs to this file (OpenAI Batch API input) instead
    /// of sending them.
    pub export_requests: Option<PathBuf>,
    /// Label from the answers in these batch output files instead of asking a server.
    pub import_responses: Vec<PathBuf>,
    /// Label nothing: rank and report on the holes already labelled in `out`.
    pub report_only: bool,
}

impl Evaluation {
    /// `keyhole eval`'s defaults, writing into `out`.
    pub fn new(out: impl Into<PathBuf>) -> Evaluation {
        Evaluation {
            holes: DEFAULT_HOLES,
            out: out.into(),
            train: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            max_failures: DEFAULT_MAX_FAILURES,
            stage_deadline: DEFAULT_STAGE_DEADLINE,
            keep_bandit: false,
            compose: vec![2, 5],
            candidates: None,
            shard: None,
            export_requests: None,
            import_responses: Vec::new(),
            report_only: false,
        }
    }

    /// Whether the run is answered from batch files rather than a server.
    pub fn batch(&self) -> bool {
        self.export_requests.is_some() || !self.import_responses.is_empty()
    }
}

/// What an evaluation tells the person running it as it goes. Only [`Observer::note`] must be
/// written; the command line draws the rest as progress bars and standard output.
pub trait Observer: Sync {
    /// A line to show: a warning, a repository's counts, where the report went.
    fn note(&self, line: &str) -> io::Result<()>;

    /// `done` of the `total` holes of `repository` are labelled (or failed); called as each
    /// hole's rows are written.
    fn holes(&self, repository: &str, done: usize, total: usize) {
        let _ = (repository, done, total);
    }

    /// `done` of the `total` sampled holes of `repository` have their prompts composed, before
    /// labelling starts (`keyhole tune` plans its requests from them).
    fn composing(&self, repository: &str, done: usize, total: usize) {
        let _ = (repository, done, total);
    }

    /// The labelling of `repository` has ended, however it ended.
    fn labelled(&self, repository: &str) {
        let _ = repository;
    }

    /// The report is written: report.md's text, to show.
    fn report(&self, markdown: &str) -> io::Result<()> {
        let _ = markdown;
        Ok(())
    }
}

/// What an evaluation did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Outcome {
    /// The holes of every repository (those of earlier runs in `resumed`).
    pub stats: RunStats,
    /// report.md, once written; none while a batch run waits for answers.
    pub report: Option<PathBuf>,
}

/// Runs `evaluation` on `repos` (named by their directories in the reports) with sessions
/// opened as `settings` say. An error, after the report, when holes or compositions failed.
pub fn run(
    settings: &Settings,
    repos: &[PathBuf],
    evaluation: &Evaluation,
    observer: &dyn Observer,
) -> Result<Outcome, EvalError> {
    let entry = settings.backend();
    let mut options = EvalOptions {
        holes: Some(evaluation.holes),
        seed: settings.seed,
        budget: settings.budget,
        concurrency: in_flight(evaluation.concurrency, entry, observer)?,
        shard: evaluation.shard.unwrap_or(Shard::WHOLE),
        candidates: evaluation
            .candidates
            .as_ref()
            .map_or_else(Selection::all, |c| c.read_as(settings.profile.numbering())),
        fidelity: settings.profile,
        tokenizer: settings.tokenizer(),
        plan: None,
        stage_deadline: evaluation.stage_deadline,
    };
    let names = repository_names(repos)?;
    let located: Vec<(String, PathBuf)> = names.iter().cloned().zip(repos.to_vec()).collect();
    let train = evaluation.train.iter().map(|given| {
        let meant = repository_meant(given, &located).map(str::to_string);
        meant.ok_or_else(|| EvalError::UnknownTrain {
            given: given.clone(),
            names: names.join(", "),
        })
    });
    // The training split by the names label files and reports give the repositories.
    let evaluation = &Evaluation {
        train: train.collect::<Result<_, _>>()?,
        ..evaluation.clone()
    };
    let mut out = OutDir::open(
        &evaluation.out,
        &LabelSettings::new(names.clone(), &options, entry),
        &report_settings(settings, evaluation),
        &repos.iter().map(|p| canonical(p)).collect::<Vec<_>>(),
    )?;
    let mut batch = BatchFiles::open(
        evaluation.export_requests.as_deref(),
        &evaluation.import_responses,
        entry,
        observer,
    )?;
    // RLPG-H picks `top:N` candidates with the classifier the report ranks with.
    let learning = settings.learning()?;
    if let Some(ranks_with) = learning.ranks_with(RankerKind::RlpgH) {
        observer.note(&format!(
            "ranking with {ranks_with} (--classifier overrides it)"
        ))?;
    }
    let runtime = Runtime::start()?;
    let label_dir = out.label_dir();
    let mut failures = Failures::new(evaluation.max_failures);
    let mut total = RunStats::default();
    let mut backends = Backends::new(entry, options.concurrency);
    let mut server_checked = false;
    for (path, name) in repos.iter().zip(&names) {
        let index = open_index(settings, path)?;
        out.check_sources(name, &index)?;
        // A merged directory is reported on, not labelled: its missing shards stay missing.
        if evaluation.report_only {
            let o = &options;
            total.holes += run_holes(&index, o.holes, o.seed, o.fidelity, o.shard).len();
            continue;
        }
        let backend = backends.for_index(&index)?;
        if !server_checked {
            server_checked = true;
            options.concurrency =
                within_server_limits(backend.as_ref(), entry, &options, &runtime, observer)?;
            backends.in_flight = options.concurrency;
        }
        let mut labels = open_labels(&label_dir, name, observer)?;
        let session = Session::builder(settings)
            .learning(learning.clone())
            .backend(backend)
            .on(index)?;
        let run = RepoRun {
            repository: name,
            session: &session,
            options: &options,
        };
        let progress = |done, total| observer.holes(name, done, total);
        let result = match &mut batch {
            Some(batch) => batch.label(&run, &mut labels),
            None => run
                .run(&runtime, &mut labels, &progress, &mut failures)
                .map_err(Into::into),
        };
        observer.labelled(name);
        if backends.shared.is_none() {
            note_backend(session.backend.as_ref(), observer)?;
        }
        let stats = result?;
        observer.note(&format!("{name}: {stats}"))?;
        total.holes += stats.holes;
        total.failed += stats.failed;
        total.last_error = stats.last_error.or(total.last_error);
    }
    // A backend that serves every repository says what it changed once.
    if let Some(backend) = &backends.shared {
        note_backend(backend.as_ref(), observer)?;
    }
    // A batch run reports once every hole is answered.
    if let Some(batch) = batch
        && !batch.finish(observer)?
    {
        return Ok(Outcome {
            stats: total,
            report: None,
        });
    }
    report::write_report(
        repos,
        evaluation,
        &mut backends,
        settings,
        &out,
        &runtime,
        &mut failures,
        total.clone(),
        observer,
    )?;
    Ok(Outcome {
        stats: total,
        report: Some(out.root().join("report.md")),
    })
}

/// The async runtime of a run. It is shut down without waiting for its blocking threads: a
/// request stuck in one past the stage deadline must not keep the run from returning its
/// error (dropping a tokio runtime waits for every blocking thread).
pub struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    pub fn start() -> Result<Runtime, EvalError> {
        let runtime = tokio::runtime::Runtime::new().map_err(EvalError::Runtime)?;
        Ok(Runtime(Some(runtime)))
    }
}

impl std::ops::Deref for Runtime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("a runtime lives until dropped")
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// What `backend` changed of what was asked, as notes.
/// The index of the repository at `path`, as the settings open one for a run.
pub(crate) fn open_index(settings: &Settings, path: &Path) -> Result<Arc<RepoIndex>, OpenError> {
    Ok(Arc::new(RepoIndex::open_with_progress(
        path,
        settings.dirs.cache.as_deref(),
        settings.vendored,
        &|_, _| {},
    )?))
}

/// The label file of repository `name` in `label_dir`, saying where lines it had to take out
/// went.
pub(crate) fn open_labels(
    label_dir: &Path,
    name: &str,
    observer: &dyn Observer,
) -> Result<LabelFile, EvalError> {
    let label_path = label_dir.join(format!("{name}.jsonl"));
    let (labels, _) = LabelFile::open(&label_path, WRITTEN_ROWS).at(&label_path)?;
    if labels.removed_lines() > 0 {
        observer.note(&format!(
            "{name}: {} lines of holes cut short or written twice were moved to {} (holes cut short are redone)",
            labels.removed_lines(),
            labels::removed_path(&label_path).display()
        ))?;
    }
    Ok(labels)
}

pub(crate) fn note_backend(backend: &dyn Backend, observer: &dyn Observer) -> io::Result<()> {
    for notice in backend.notices() {
        observer.note(&format!("note: {notice}"))?;
    }
    Ok(())
}

/// The names of `repos` in label files and reports (their directories'), checked to be
/// distinct: two repositories of one name would share a label file.
pub fn repository_names(repos: &[PathBuf]) -> Result<Vec<String>, EvalError> {
    let names: Vec<String> = repos.iter().map(|p| repository_name(p)).collect();
    for (i, name) in names.iter().enumerate() {
        let Some(first) = names[..i].iter().position(|n| n == name) else {
            continue;
        };
        if canonical(&repos[first]) == canonical(&repos[i]) {
            return Err(EvalError::RepositoryTwice {
                first: repos[first].clone(),
                second: repos[i].clone(),
            });
        }
        return Err(EvalError::SameName(name.clone()));
    }
    Ok(names)
}

/// The repository of `repos` (each a name and where it is) that `given` means: the one at the
/// path `given` (absolute or relative, with a trailing slash or through a symbolic link: both
/// sides made canonical), else the one named `given`.
pub fn repository_meant<'r>(given: &str, repos: &'r [(String, PathBuf)]) -> Option<&'r str> {
    let at = Path::new(given).canonicalize().ok();
    let by_path = at.and_then(|at| repos.iter().find(|(_, path)| canonical(path) == at));
    let by_name = || {
        let name = given.trim_end_matches('/');
        repos.iter().find(|(n, _)| n == name)
    };
    by_path.or_else(by_name).map(|(name, _)| name.as_str())
}

/// `path` made absolute, where it exists.
pub fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The name of the repository at `path` in label files and reports: its directory's.
pub fn repository_name(path: &Path) -> String {
    canonical(path).file_name().map_or_else(
        || "repository".to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Completions an evaluation keeps in flight: `asked`, but no more than an HTTP backend's own
/// limit (requests beyond it would wait for a turn within their deadline and time out).
pub fn in_flight(
    asked: usize,
    entry: &BackendConfig,
    observer: &dyn Observer,
) -> io::Result<usize> {
    if !entry.kind.is_http() || asked <= entry.concurrency {
        return Ok(asked);
    }
    observer.note(&format!(
        "{}: {} requests in flight, not {asked}: the backend's concurrency in backends.toml allows no more (it may be raised to {MAX_CONCURRENCY})",
        entry.name,
        entry.concurrency
    ))?;
    Ok(entry.concurrency)
}

/// The concurrency to run with on `backend`'s server: at most the requests it works on at once
/// (more would wait in its queue and run into the deadline), saying so and anything else about
/// its limits the run exceeds. Unchanged where the server does not say.
pub fn within_server_limits(
    backend: &dyn Backend,
    entry: &BackendConfig,
    options: &EvalOptions,
    runtime: &tokio::runtime::Runtime,
    observer: &dyn Observer,
) -> io::Result<usize> {
    let Some(Ok(limits)) = runtime.block_on(backend.limits()) else {
        return Ok(options.concurrency);
    };
    let max_tokens = entry.max_tokens.unwrap_or(model::DEFAULT_MAX_TOKENS);
    for line in limits.advice(&entry.name, options.concurrency, options.budget, max_tokens) {
        observer.note(&line)?;
    }
    Ok(options.concurrency.min(limits.slots))
}

/// The backend of a run for each repository: the embedded model learns from each one, any
/// other backend (a local model, loaded once; a server, whose fallbacks are learnt once)
/// serves them all.
pub struct Backends<'e> {
    entry: &'e BackendConfig,
    shared: Option<Arc<dyn Backend>>,
    /// Requests in flight at once: what the run asked, within backends.toml's `concurrency`
    /// and the server's slots.
    pub in_flight: usize,
}

impl<'e> Backends<'e> {
    pub fn new(entry: &'e BackendConfig, in_flight: usize) -> Backends<'e> {
        Backends {
            entry,
            shared: None,
            in_flight,
        }
    }

    /// The backend serving every repository, once built (not the embedded model's).
    pub fn shared(&self) -> Option<&Arc<dyn Backend>> {
        self.shared.as_ref()
    }

    /// The backend that completes holes of `index`.
    pub fn for_index(&mut self, index: &Arc<RepoIndex>) -> Result<Arc<dyn Backend>, BackendError> {
        if self.entry.kind == BackendKind::Embedded {
            return Ok(Arc::from(model::build_backend(self.entry, index)?));
        }
        if let Some(backend) = &self.shared {
            return Ok(Arc::clone(backend));
        }
        let backend: Arc<dyn Backend> = Arc::from(model::build_backend(self.entry, index)?);
        self.shared = Some(Arc::clone(&backend));
        Ok(backend)
    }
}

/// What the report of this run depends on beyond the rows.
fn report_settings(settings: &Settings, evaluation: &Evaluation) -> ReportSettings {
    let shown = |p: &Path| p.display().to_string();
    ReportSettings {
        classifier: settings
            .classifier
            .as_deref()
            .map_or_else(|| "bundled".to_string(), shown),
        encoder_dir: settings.encoder_dir.as_deref().map(shown),
        train: evaluation.train.clone(),
        compose: evaluation.compose.clone(),
    }
}
