//! Settings in, session out: a [`Session`] opened from resolved [`Settings`] ([`Session::open`],
//! [`Session::builder`]), with what the caller already has.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Learning, Session, Settings, SharedSearch};
use crate::model::{self, Backend, BackendError};
use crate::rank::classifier::ModelError;
use crate::repo::{self, RepoIndex};

/// Why a session could not be opened (the repository itself: [`repo::OpenError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error(transparent)]
    Repository(#[from] repo::OpenError),
    #[error("{}: no source files keyhole reads (it reads {})", .0.display(), crate::lang::read_languages())]
    NoSourceFiles(PathBuf),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Classifier(#[from] ModelError),
}

/// How a session is opened: from [`Settings`], with what the caller already has (an index
/// opened with progress, a backend or rankers shared with other sessions, search indexes
/// shared with other sessions on the same index).
pub struct SessionBuilder<'a> {
    settings: &'a Settings,
    learning: Option<Learning>,
    backend: Option<Arc<dyn Backend>>,
    search: Option<SharedSearch>,
    progress: Option<&'a (dyn Fn(Opening) + Sync)>,
}

/// Where opening a session has got to, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    pub stage: OpenStage,
    /// Files indexed so far, of `total` found.
    pub done: usize,
    pub total: usize,
}

/// The stages of opening a session, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenStage {
    /// Reading and parsing files.
    Files,
    /// Linking files by imports, parents and names.
    Graph,
    /// Starting the backend.
    Backend,
}

impl Session {
    /// Index the repository at `repo` (through the cache unless the settings say not) and open
    /// a session on it as `settings` say.
    ///
    /// ```
    /// use keyhole::{Hole, Session, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let scratch = tempfile::tempdir()?;
    /// # let dirs = keyhole::Dirs { data: Some(scratch.path().into()), ..Default::default() };
    /// // The bundled sample repository; any repository on disk opens the same way.
    /// let repo = keyhole::sample::materialize(&dirs)?;
    /// // The embedded model and the bundled classifier, nothing read from the user's files.
    /// let settings = Settings::default();
    /// let session = Session::open(&repo, &settings)?;
    /// let hole = Hole::parse(session.index(), keyhole::sample::DEMO_HOLE)?;
    /// // Every candidate that needs no backend, ranked by the settings' ranker (RLPG-H).
    /// let analysis = session.analyse(&hole);
    /// for row in analysis.candidates.iter().take(5) {
    ///     println!("{:>2} {:<32} {:?}", row.id, row.label, row.score);
    /// }
    /// // The best one's prompt, composed within the budget.
    /// let prompt = analysis.best().expect("RLPG-H ranks").prompt.text();
    /// assert!(!prompt.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn open(repo: &Path, settings: &Settings) -> Result<Session, SessionError> {
        Session::builder(settings).open(repo)
    }

    /// A session as `settings` say, with parts the caller already has.
    pub fn builder(settings: &Settings) -> SessionBuilder<'_> {
        SessionBuilder {
            settings,
            learning: None,
            backend: None,
            search: None,
            progress: None,
        }
    }
}

impl<'a> SessionBuilder<'a> {
    /// Rankers shared with other sessions (what one learns, all see).
    pub fn learning(mut self, learning: Learning) -> Self {
        self.learning = Some(learning);
        self
    }

    /// A backend already built (one server serving many repositories, or a model loaded once).
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Search indexes already built or shared with other sessions on the same index.
    pub(crate) fn search(mut self, search: SharedSearch) -> Self {
        self.search = Some(search);
        self
    }

    /// Called as opening moves through its stages, from worker threads: it must be cheap.
    pub fn progress(mut self, progress: &'a (dyn Fn(Opening) + Sync)) -> Self {
        self.progress = Some(progress);
        self
    }

    fn report(&self, stage: OpenStage, done: usize, total: usize) {
        if let Some(progress) = self.progress {
            progress(Opening { stage, done, total });
        }
    }

    /// Index the repository at `repo` and open the session on it.
    pub fn open(self, repo: &Path) -> Result<Session, SessionError> {
        let settings = self.settings;
        let cache = settings
            .index_cache
            .then_some(settings.dirs.cache.as_deref())
            .flatten();
        let files = |done, total| {
            self.report(OpenStage::Files, done, total);
            // The graph is built once the last file is in.
            if done == total {
                self.report(OpenStage::Graph, done, total);
            }
        };
        let index = RepoIndex::open_with_progress(repo, cache, settings.vendored, &files)?;
        if index.files.is_empty() {
            return Err(SessionError::NoSourceFiles(repo.to_path_buf()));
        }
        self.on(Arc::new(index))
    }

    /// The session on an index already open.
    pub fn on(mut self, index: Arc<RepoIndex>) -> Result<Session, SessionError> {
        let total = index.files.len();
        let backend = match self.backend.take() {
            Some(backend) => backend,
            None => {
                self.report(OpenStage::Backend, total, total);
                Arc::from(model::build_backend(self.settings.backend(), &index)?)
            }
        };
        if self.learning.is_none() {
            self.learning = Some(self.settings.learning()?);
        }
        Ok(self.with_parts(index, backend))
    }

    /// The session on an index already open with a backend already built: the rankers given,
    /// else the bundled ones (loaded on first use).
    pub fn with_parts(self, index: Arc<RepoIndex>, backend: Arc<dyn Backend>) -> Session {
        let settings = self.settings;
        index.language_servers.choose(&settings.language_servers);
        let learning = self
            .learning
            .unwrap_or_else(|| Learning::new(settings.dirs.clone()));
        Session {
            index,
            search: self.search.unwrap_or_default(),
            backend,
            learning,
            tokenizer: settings.tokenizer().tokenizer(),
            budget: settings.budget,
            iterations: settings.iterations,
            seed: settings.seed,
            fidelity: settings.profile,
            ranker: settings.ranker,
        }
    }
}
