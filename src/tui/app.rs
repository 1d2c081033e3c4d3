//! The application: state plus the effect driver and the action channel they share. The
//! terminal loop, `render_fixture` and the headless tests drive the same `App`.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::driver::{Driver, Outcome};
use super::keymap::Keymap;
use super::state::{self, Action, Effect, IndexBackend, State};
use super::theme::Theme;
use crate::dirs::Dirs;

/// The app still had work in flight when [`App::settle`]'s time ran out, and what its status
/// line said.
#[derive(Debug, thiserror::Error)]
#[error("still busy after {limit:?}: {status}")]
pub struct StillBusy {
    pub limit: Duration,
    pub status: String,
}

pub struct App {
    pub state: State,
    driver: Driver,
    tx: UnboundedSender<Action>,
    rx: UnboundedReceiver<Action>,
}

impl App {
    /// Must be called inside a tokio runtime (the driver spawns tasks).
    /// What it learns (picks, the online ranker, ProCC's bandit) goes to `dirs`.
    pub fn new(keymap: Keymap, theme: Theme, dirs: Dirs) -> App {
        let (tx, rx) = mpsc::unbounded_channel();
        App {
            state: State::new(keymap, theme),
            driver: Driver::new(tx.clone(), dirs),
            tx,
            rx,
        }
    }

    /// An app with the backend, budget, ranker and classifier of `options`.
    pub fn with_options(keymap: Keymap, theme: Theme, options: super::Options) -> App {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut state = State::new(keymap, theme);
        let settings = options.settings;
        state.setup = state::Setup {
            backends: settings.backends.clone(),
            backend: settings.chosen,
            budget: settings.budget,
            tokenizer: settings.tokenizer,
        };
        state.ranker = settings.ranker;
        state.tuned = options.learning.tuned().map(|t| t.describe());
        state.numbering = settings.profile.numbering();
        state.recorded.pending = options.recorded;
        App {
            state,
            driver: Driver::with_settings(tx.clone(), settings, options.learning),
            tx,
            rx,
        }
    }

    /// Start indexing `root`; the hole follows as an action when the index is ready.
    pub fn open(&mut self, root: PathBuf, position: Option<String>) {
        let backend = self.state.setup.entry().clone();
        self.run_effects(vec![Effect::Index {
            root,
            position,
            backend: IndexBackend::Build(Box::new(backend)),
        }]);
    }

    /// A sender into the action channel (what tests and other producers use).
    pub fn sender(&self) -> UnboundedSender<Action> {
        self.tx.clone()
    }

    /// Apply one action and run its effects; returns what only the terminal loop can do.
    pub fn dispatch(&mut self, action: Action) -> Vec<Outcome> {
        let effects = state::update(&mut self.state, action);
        self.run_effects(effects)
    }

    pub(super) fn run_effects(&mut self, effects: Vec<Effect>) -> Vec<Outcome> {
        effects
            .into_iter()
            .map(|e| self.driver.run(e))
            .filter(|o| *o != Outcome::Continue)
            .collect()
    }

    /// The next action from the channel.
    pub async fn next(&mut self) -> Option<Action> {
        self.rx.recv().await
    }

    /// A queued action, without waiting.
    pub fn try_next(&mut self) -> Option<Action> {
        self.rx.try_recv().ok()
    }

    /// Process actions until nothing is in flight and the channel is empty; fail after `limit`.
    pub async fn settle(&mut self, limit: Duration) -> Result<(), StillBusy> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            while let Some(action) = self.try_next() {
                self.dispatch(action);
            }
            if !self.state.busy() {
                return Ok(());
            }
            let action = tokio::time::timeout_at(deadline, self.next())
                .await
                .map_err(|_| StillBusy {
                    limit,
                    status: self.state.status.clone(),
                })?;
            if let Some(action) = action {
                self.dispatch(action);
            }
        }
    }
}
