//! Which backend completes: the setup chosen on the command line and switched in the UI.

use super::*;
use crate::session::counting_words;

/// Which backend completes and how prompts are counted for it: what `keyhole complete`
/// takes as flags, chosen on the command line and switched in the UI.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Every configured backend, the embedded one first.
    pub backends: Vec<BackendConfig>,
    /// The one that completes.
    pub backend: usize,
    pub budget: usize,
    /// The tokenizer budgets are counted in; `None`: the backend's own.
    pub tokenizer: Option<TokenizerKind>,
}

impl Default for Setup {
    /// The embedded model alone, RLPG's budget.
    fn default() -> Setup {
        Setup {
            backends: vec![BackendConfig::embedded()],
            backend: 0,
            budget: crate::compose::DEFAULT_BUDGET,
            tokenizer: None,
        }
    }
}

impl Setup {
    pub fn entry(&self) -> &BackendConfig {
        &self.backends[self.backend]
    }

    pub fn tokenizer(&self) -> TokenizerKind {
        self.tokenizer.unwrap_or_else(|| self.entry().tokenizer())
    }
}

/// The backends as backends.toml says now. The one completing stays chosen by its name (as it
/// was built: a changed entry takes effect when chosen again); one no longer configured stays
/// in the list until another is chosen. What was left out of the file shows as the warning.
pub(super) fn backends_read(
    state: &mut State,
    mut backends: Vec<BackendConfig>,
    warnings: Vec<String>,
) -> Vec<Effect> {
    let current = state.setup.entry().clone();
    let chosen = match backends.iter().position(|b| b.name == current.name) {
        Some(at) => at,
        None => {
            backends.push(current);
            backends.len() - 1
        }
    };
    state.setup.backends = backends;
    state.setup.backend = chosen;
    // The picker opens on the one completing; the list under it may have moved.
    if let Mode::Backends { cursor } = &mut state.mode {
        *cursor = chosen;
    }
    if let Some(first) = warnings.first() {
        state.warning = Some(match warnings.len() {
            1 => first.clone(),
            n => format!("{first} (and {} more)", n - 1),
        });
    }
    vec![]
}

/// Complete with backend `cursor` of the setup from now on (it starts in the background).
pub(super) fn choose_backend(state: &mut State, cursor: usize) -> Vec<Effect> {
    state.mode = Mode::Normal;
    let (Some(index), Some(entry)) = (&state.index, state.setup.backends.get(cursor)) else {
        return vec![];
    };
    if cursor == state.setup.backend {
        return vec![];
    }
    state.status = format!("starting backend {}…", entry.name);
    state.starting_backend = Some(cursor);
    vec![Effect::SwitchBackend {
        chosen: cursor,
        entry: entry.clone(),
        index: index.clone(),
    }]
}

/// The new backend completes from now on; the hole's candidates are built again, since
/// budgets are counted in its tokenizer and ProCC's summary depends on what it can do.
pub(super) fn switch_backend(
    state: &mut State,
    chosen: usize,
    backend: Result<Arc<dyn Backend>, JobError>,
    learning: Option<Learning>,
) -> Vec<Effect> {
    state.starting_backend = None;
    let backend = match backend {
        Ok(backend) => backend,
        Err(e) => {
            state.status = format!("cannot switch the backend: {e}");
            return vec![];
        }
    };
    state.setup.backend = chosen;
    state.backend = Some(backend);
    // The new rankers first: the hole is ranked again with them.
    let mut effects = Vec::new();
    if let Some(learning) = learning {
        state.tuned = learning.tuned().map(|t| t.describe());
        effects.push(Effect::UseLearning(learning));
    }
    if let Some(hole) = state.view.as_ref().map(|v| v.hole.clone()) {
        effects.extend(set_hole(state, hole));
    }
    state.status = format!("completing with {}", backend_summary(state));
    effects
}

/// "NAME (kind, model) · budgets exact in code" for the status line and the picker (see
/// [`counting_words`]).
pub fn backend_summary(state: &State) -> String {
    let entry = state.setup.entry();
    let model = entry
        .model
        .as_deref()
        .map(|m| format!(", {m}"))
        .unwrap_or_default();
    let tokenizer = state.setup.tokenizer().tokenizer();
    let counting = match state.backend.as_deref() {
        Some(backend) => counting_words(backend, tokenizer),
        None => format!("in {}", tokenizer.name()),
    };
    format!(
        "{} ({}{model}) · budgets {counting}",
        entry.name,
        entry.kind.name(),
    )
}
