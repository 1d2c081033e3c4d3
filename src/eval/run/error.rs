//! Why `keyhole eval` or `keyhole tune` stopped: the errors of the parts a run is built from,
//! as they say themselves, a file of the run that could not be read or written (named), and
//! what only a run can get wrong.

use std::io;
use std::path::{Path, PathBuf};

#[cfg(feature = "http")]
use crate::eval::batch::BatchError;
use crate::eval::outdir::OutDirError;
use crate::eval::plan::PlanError;
use crate::eval::runner::RunError;
use crate::model::BackendError;
use crate::model::config::ConfigError;
use crate::rank::classifier::ModelError;
#[cfg(feature = "train")]
use crate::rank::classifier::train::{HoldoutError, TrainError};
use crate::repo::OpenError;
use crate::session::tuned::TunedError;
use crate::session::{SessionError, SettingsError};

/// Why an evaluation or a tuning run stopped; its `Display` and sources read as one line
/// (`keyhole: …` and exit 2 on the command line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[cfg(feature = "http")]
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[cfg(feature = "train")]
    #[error(transparent)]
    Holdout(#[from] HoldoutError),
    #[cfg(feature = "train")]
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tuned(#[from] TunedError),
    /// A line for the person running it could not be written.
    #[error(transparent)]
    Observer(#[from] io::Error),
    /// A file or directory of the run (a label file, the report, a batch file) could not be
    /// read or written: the path, then why.
    #[error("{}", path.display())]
    At {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// What the run keeps (the tuned classifier and its report) could not be written.
    #[error("cannot write {}", path.display())]
    CannotWrite {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot start the async runtime")]
    Runtime(#[source] io::Error),
    /// Where the run would keep what it keeps in the data directory, there is none.
    #[error("no data directory {purpose}")]
    NoDataDirectory { purpose: &'static str },
    #[error(
        "--train {given}: no repository of this run is at that path or has that name ({names})"
    )]
    UnknownTrain { given: String, names: String },
    #[error("{} and {} are one repository: give it once", first.display(), second.display())]
    RepositoryTwice { first: PathBuf, second: PathBuf },
    #[error("two repositories are named {0}: their label files would be one")]
    SameName(String),
    #[error("batch files need keyhole built with the `http` feature")]
    NoBatchFiles,
    #[error(
        "--export-requests {} is also a response file to import: writing the requests would overwrite its answers; export to another file",
        .0.display()
    )]
    ExportOverImport(PathBuf),
    #[error(
        "{count} answers in the response files answer requests this run does not send (made with other settings, such as another --budget, model or candidate set, or by an older keyhole), so they label nothing ({named}); answer the requests --export-requests writes with this run's settings"
    )]
    StaleAnswers { count: usize, named: String },
    #[error(
        "{waiting} holes have no answers in the response files yet ({first_round} of round 1, {second_round} of round 2); --export-requests FILE writes their requests"
    )]
    AnswersToCome {
        waiting: usize,
        first_round: usize,
        second_round: usize,
    },
    /// The report is written, but holes of this run failed.
    #[error(
        "{failed} of {holes} holes failed and have no label rows (the last: {last}); the report covers the complete ones, and running the same command again retries the failed ones"
    )]
    HolesFailed {
        failed: usize,
        holes: usize,
        last: String,
    },
    /// The report is written, but holes of the run have no rows, though none failed now.
    #[error(
        "{0}; the report covers the others, and labelling them (or merging every shard) completes it"
    )]
    HolesUnlabelled(String),
    /// The report is written, but Table 10 leaves holes out.
    #[error(
        "Table 10 leaves out {uncomposed} holes whose composition requests failed (the last: {last}); running the same command again completes them"
    )]
    CompositionsFailed { uncomposed: usize, last: String },
    /// Tune's label directory (the data directory's, not an --out) holds what it cannot go on
    /// from; said in tune's terms.
    #[error("{}", in_tune_terms(.0))]
    TuneDirectory(OutDirError),
}

/// `error` said for tune, whose directory is the data directory's, not an --out.
fn in_tune_terms(error: &OutDirError) -> String {
    match error {
        OutDirError::Settings { dir, differences } => format!(
            "{dir} holds labels made with {differences}: tune with the same settings to go on, or move the directory away to start over"
        ),
        OutDirError::Locked { dir, holder } => {
            format!("{dir} is in use by another keyhole run ({holder}); wait for it to finish")
        }
        OutDirError::SourcesChanged {
            dir,
            repository,
            changes,
        } => format!(
            "the sources of {repository} changed since its holes were labelled ({changes}): move {dir} away to tune on the repository as it is now"
        ),
        other => other.to_string(),
    }
}

impl EvalError {
    /// `error` of tune's label directory: in tune's terms where tune has its own.
    pub(crate) fn of_tune_directory(error: OutDirError) -> EvalError {
        match error {
            OutDirError::Settings { .. }
            | OutDirError::Locked { .. }
            | OutDirError::SourcesChanged { .. } => EvalError::TuneDirectory(error),
            other => EvalError::OutDir(other),
        }
    }
}

/// A failure with a file or directory of the run, named.
pub(crate) trait At<T> {
    /// The error said after `path`, as `PATH: why`.
    fn at(self, path: &Path) -> Result<T, EvalError>;
    /// The error of writing what the run keeps at `path`, as `cannot write PATH: why`.
    fn writing(self, path: &Path) -> Result<T, EvalError>;
}

impl<T, E: Into<Box<dyn std::error::Error + Send + Sync>>> At<T> for Result<T, E> {
    fn at(self, path: &Path) -> Result<T, EvalError> {
        self.map_err(|source| EvalError::At {
            path: path.to_path_buf(),
            source: source.into(),
        })
    }

    fn writing(self, path: &Path) -> Result<T, EvalError> {
        self.map_err(|source| EvalError::CannotWrite {
            path: path.to_path_buf(),
            source: source.into(),
        })
    }
}
