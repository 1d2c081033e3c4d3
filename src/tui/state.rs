//! The pure core: application state, the actions that change it and the effects it asks for.
//! `update` does no IO; the driver runs effects and feeds their results back as actions.

pub use crate::session::{
    Availability, BanditLesson, Candidate, Procc, SearchIndex, apply_ranking, retrieved,
};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use fuzzy_matcher::FuzzyMatcher;
use fuzzy_matcher::skim::SkimMatcherV2;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Style;
use ratatui_textarea::TextArea;
use serde::Deserialize;

use super::highlight::{self, StyledLine};
use super::keymap::Keymap;
use super::theme::Theme;
use super::ui::{self, scroll_top};
use crate::candidate::CandidateId;
use crate::compose::Prompt;
use crate::context::proposals::ProposalContext;
use crate::explain::{self, ExplainedSpan};
use crate::feedback;
use crate::hole::Hole;
use crate::metrics::Scores;
use crate::model::config::BackendConfig;
use crate::model::{Backend, TokenCounting};
use crate::rank::{Ranked, RankerKind};
use crate::repo::{FileId, RepoIndex};
use crate::token::{Tokenizer, TokenizerKind};

pub const DEFAULT_K: usize = 3;
/// The most cards side by side (and the pick keys 1..5).
pub const MAX_K: usize = 5;
const PAGE: isize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    Source,
    Candidates,
    Prompt,
    Completions,
}

impl Pane {
    pub const ALL: [Pane; 4] = [
        Pane::Source,
        Pane::Candidates,
        Pane::Prompt,
        Pane::Completions,
    ];

    fn step(self, by: isize) -> Pane {
        let i = Pane::ALL.iter().position(|&p| p == self).unwrap_or(0) as isize;
        Pane::ALL[(i + by).rem_euclid(Pane::ALL.len() as isize) as usize]
    }
}

/// What a key can be bound to (keymaps name these in snake_case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Quit,
    Help,
    FocusNext,
    FocusPrev,
    Zoom,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Confirm,
    Select,
    Run,
    Cancel,
    #[serde(rename = "pick_1")]
    Pick1,
    #[serde(rename = "pick_2")]
    Pick2,
    #[serde(rename = "pick_3")]
    Pick3,
    #[serde(rename = "pick_4")]
    Pick4,
    #[serde(rename = "pick_5")]
    Pick5,
    Explain,
    Apply,
    Filter,
    Picker,
    MoreK,
    FewerK,
    ToggleMouse,
    Suspend,
    /// Edit the focused candidate's prompt in place.
    Edit,
    CycleRanker,
    /// Choose the completion backend among the configured ones.
    Backends,
}

/// The ranker after `kind` in the cycle RLPG-H → RLPG-R → BM25 → fixed → online → RLPG-H.
pub fn next_ranker(kind: RankerKind) -> RankerKind {
    let all = RankerKind::value_variants();
    let at = all.iter().position(|&k| k == kind).unwrap_or(0);
    all[(at + 1) % all.len()]
}

/// One completion card.
#[derive(Clone, Debug)]
pub struct Card {
    pub candidate: CandidateId,
    /// The prompt text when the user edited the candidate's prompt before running it.
    pub edited: Option<String>,
    pub outcome: Result<Finished, String>,
}

#[derive(Clone, Debug)]
pub struct Finished {
    pub text: String,
    pub latency_ms: u128,
    pub scores: Scores,
    /// ERROR or missing nodes inside the completion when parsed in place.
    pub syntax_errors: usize,
}

/// The hole the candidates and completions belong to; results for an older generation are
/// dropped.
#[derive(Clone, Debug, PartialEq)]
pub struct HoleView {
    pub hole: Hole,
    pub generation: u64,
    /// Why the hole's candidates could not be built (an internal error, logged).
    pub failed: Option<String>,
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing the candidate filter.
    Filter,
    /// Fuzzy file picker: query and the cursor in its matches.
    Picker {
        query: String,
        cursor: usize,
    },
    /// Choosing the completion backend: the cursor in `Setup::backends`.
    Backends {
        cursor: usize,
    },
    /// Waiting for y before writing the focused completion into the file.
    ConfirmApply,
    /// Editing a prompt in `State::editor`.
    Edit,
}

/// A candidate's prompt being edited, with its live token count.
pub struct Editor {
    pub textarea: TextArea<'static>,
    pub candidate: CandidateId,
    pub budget: usize,
    pub tokenizer: &'static dyn Tokenizer,
    pub tokens: usize,
}

impl Editor {
    fn new(candidate: &Candidate, theme: &Theme) -> Editor {
        let prompt = &candidate.prompt;
        let tokenizer = TokenizerKind::ALL
            .into_iter()
            .find(|k| k.name() == prompt.tokenizer)
            .unwrap_or(TokenizerKind::Code)
            .tokenizer();
        let text = prompt.text();
        let mut textarea = TextArea::new(text.split('\n').map(String::from).collect());
        textarea.set_style(Style::new().fg(theme.text));
        textarea.set_cursor_line_style(Style::new().bg(theme.selected));
        Editor {
            textarea,
            candidate: candidate.id,
            budget: prompt.budget,
            tokenizer,
            tokens: tokenizer.count(&text),
        }
    }

    pub fn text(&self) -> String {
        self.textarea.lines().join("\n")
    }

    fn input(&mut self, key: KeyEvent) {
        if self.textarea.input(key) {
            self.tokens = self.tokenizer.count(&self.text());
        }
    }
}

pub enum Action {
    Command(Command),
    /// A key typed while a text field or question has the focus.
    Input(KeyEvent),
    /// A mouse click, relative to the pane's inner area of the given size.
    Click {
        pane: Pane,
        row: u16,
        col: u16,
        width: u16,
        height: u16,
    },
    Tick,
    /// Files indexed so far, of those found, while the repository opens.
    Progress {
        done: usize,
        total: usize,
    },
    Indexed(Result<Indexed, String>),
    Analysed {
        generation: u64,
        candidates: Vec<Candidate>,
        /// What the ranker ranks, kept so a ranker change re-ranks without rebuilding.
        proposals: Arc<Vec<ProposalContext>>,
        /// The ranker that ordered `candidates`.
        ranker: RankerKind,
    },
    /// Backend `chosen` of the setup is ready, or why it could not be built.
    BackendSwitched {
        chosen: usize,
        backend: Result<Arc<dyn Backend>, String>,
    },
    /// Building the candidates of hole `generation` failed (a bug: the driver caught a panic).
    AnalysisFailed {
        generation: u64,
        error: String,
    },
    /// The retrieved candidates that needed the backend, built after the others.
    Retrieved {
        generation: u64,
        candidates: Vec<Candidate>,
        procc: Procc,
    },
    /// A new order of the candidates from `ranker`, or why it cannot rank.
    Ranked {
        generation: u64,
        ranker: RankerKind,
        ranked: Result<Vec<Ranked>, String>,
    },
    /// Text streamed so far for card slot `card` of a running completion.
    Streamed {
        generation: u64,
        card: usize,
        text: String,
    },
    Completed {
        generation: u64,
        cards: Vec<Card>,
    },
    /// A one-line report from the driver (pick logged, file written, errors).
    Message(String),
}

pub struct Indexed {
    pub index: Arc<RepoIndex>,
    pub search: Arc<SearchIndex>,
    pub backend: Arc<dyn Backend>,
    pub hole: Hole,
}

pub enum Effect {
    /// Open the repository and build `backend` for it.
    Index {
        root: PathBuf,
        position: Option<String>,
        backend: BackendConfig,
    },
    /// Build and rank every candidate within `budget` tokens of `tokenizer`; the retrieved
    /// ones that need `backend` follow.
    Analyse {
        index: Arc<RepoIndex>,
        search: Arc<SearchIndex>,
        backend: Arc<dyn Backend>,
        hole: Hole,
        generation: u64,
        ranker: RankerKind,
        tokenizer: TokenizerKind,
        budget: usize,
    },
    /// Build backend `chosen` of the setup (a local model loads its file).
    SwitchBackend {
        chosen: usize,
        entry: BackendConfig,
        index: Arc<RepoIndex>,
    },
    Rank {
        index: Arc<RepoIndex>,
        hole: Hole,
        proposals: Arc<Vec<ProposalContext>>,
        generation: u64,
        ranker: RankerKind,
    },
    Complete(CompleteJob),
    CancelCompletions,
    Pick {
        pick: feedback::Pick,
        /// Set when the picked completion came from one of ProCC's perspectives.
        bandit: Option<BanditLesson>,
    },
    Apply {
        path: PathBuf,
        hash: [u8; 32],
        offset: usize,
        replace: usize,
        text: String,
    },
    SetMouse(bool),
    Suspend,
    Quit,
}

/// Everything a completion run needs, owned, so it can move into a task.
pub struct CompleteJob {
    pub generation: u64,
    pub backend: Arc<dyn Backend>,
    /// (candidate id, prompt text), one card each.
    pub prompts: Vec<(CandidateId, String)>,
    pub current_file: String,
    pub file_text: String,
    pub offset: usize,
    pub target: String,
    /// The prompts are user edits: their cards join the ones shown instead of replacing them.
    pub edited: bool,
}

pub struct State {
    pub keymap: Keymap,
    pub theme: Theme,
    pub setup: Setup,
    /// The backend of the setup being started, while it starts.
    pub starting_backend: Option<usize>,
    pub index: Option<Arc<RepoIndex>>,
    pub search: Option<Arc<SearchIndex>>,
    pub backend: Option<Arc<dyn Backend>>,
    pub view: Option<HoleView>,
    /// The file shown in the source pane, its highlighted lines and the cursor (line, column).
    pub file: FileId,
    pub lines: Vec<StyledLine>,
    pub cursor: (usize, usize),
    pub candidates: Vec<Candidate>,
    pub proposals: Arc<Vec<ProposalContext>>,
    pub ranker: RankerKind,
    /// ProCC's pick among the retrieved candidates, once they are all built.
    pub procc: Option<Procc>,
    pub candidate_cursor: usize,
    pub selected: BTreeSet<CandidateId>,
    pub filter: String,
    pub prompt_scroll: usize,
    pub cards: Vec<Card>,
    pub card_cursor: usize,
    pub running: bool,
    /// Text streamed so far by each request of the running completion, by card slot.
    pub streamed: Vec<String>,
    pub explained: Option<Vec<ExplainedSpan>>,
    pub k: usize,
    pub focus: Pane,
    pub zoomed: bool,
    pub help: bool,
    pub mode: Mode,
    pub editor: Option<Editor>,
    pub mouse: bool,
    pub tick: usize,
    pub status: String,
    pub quit: bool,
}

impl State {
    pub fn new(keymap: Keymap, theme: Theme) -> State {
        State {
            keymap,
            theme,
            setup: Setup::default(),
            starting_backend: None,
            index: None,
            search: None,
            backend: None,
            view: None,
            file: 0,
            lines: Vec::new(),
            cursor: (0, 0),
            candidates: Vec::new(),
            proposals: Arc::default(),
            ranker: RankerKind::RlpgH,
            procc: None,
            candidate_cursor: 0,
            selected: BTreeSet::new(),
            filter: String::new(),
            prompt_scroll: 0,
            cards: Vec::new(),
            streamed: Vec::new(),
            card_cursor: 0,
            running: false,
            explained: None,
            k: DEFAULT_K,
            focus: Pane::Source,
            zoomed: false,
            help: false,
            mode: Mode::Normal,
            editor: None,
            mouse: true,
            tick: 0,
            status: "indexing…".into(),
            quit: false,
        }
    }

    /// Whether something is in flight (the loop ticks the spinner only then).
    pub fn busy(&self) -> bool {
        self.running
            || self.starting_backend.is_some()
            || self.index.is_none() && !self.failed()
            || self.analysing()
            || self.retrieving()
    }

    /// Whether retrieved candidates are still waiting for the backend.
    pub fn retrieving(&self) -> bool {
        self.candidates.iter().any(Candidate::building)
    }

    fn failed(&self) -> bool {
        self.status.starts_with(OPEN_FAILED)
    }

    pub fn analysing(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.failed.is_none()) && self.candidates.is_empty()
    }

    /// Indices into `candidates` that pass the filter, in rank order.
    pub fn visible(&self) -> Vec<usize> {
        let matcher = SkimMatcherV2::default();
        (0..self.candidates.len())
            .filter(|&i| {
                self.filter.is_empty()
                    || matcher
                        .fuzzy_match(&self.candidates[i].label, &self.filter)
                        .is_some()
            })
            .collect()
    }

    pub fn focused_candidate(&self) -> Option<&Candidate> {
        let visible = self.visible();
        visible
            .get(self.candidate_cursor.min(visible.len().saturating_sub(1)))
            .map(|&i| &self.candidates[i])
    }

    pub fn candidate(&self, id: CandidateId) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// The prompt in the prompt pane: the explained card's, else the focused candidate's.
    pub fn shown_prompt(&self) -> Option<&Prompt> {
        let card = self
            .explained
            .as_ref()
            .and_then(|_| self.cards.get(self.card_cursor));
        match card {
            Some(card) => self.candidate(card.candidate).map(|c| &c.prompt),
            None => self.focused_candidate().map(|c| &c.prompt),
        }
    }

    /// Files matching the picker query, best first.
    pub fn picker_matches(&self, query: &str) -> Vec<FileId> {
        let Some(index) = &self.index else {
            return Vec::new();
        };
        let matcher = SkimMatcherV2::default();
        let mut hits: Vec<(i64, FileId)> = index
            .files
            .iter()
            .enumerate()
            .filter_map(|(id, f)| matcher.fuzzy_match(&f.path, query).map(|s| (s, id)))
            .collect();
        hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.into_iter().map(|(_, id)| id).collect()
    }

    fn line_chars(&self, line: usize) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| i.files[self.file].line_text(line).chars().count())
    }

    fn line_count(&self) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| i.files[self.file].line_count())
    }
}

const OPEN_FAILED: &str = "cannot open the repository";

/// Apply one action; return the effects it asks for.
pub fn update(state: &mut State, action: Action) -> Vec<Effect> {
    match action {
        Action::Command(command) => command_effects(state, command),
        Action::Input(key) => input(state, key),
        Action::Click {
            pane,
            row,
            col,
            width,
            height,
        } => click(state, pane, (row, col), (width, height)),
        Action::Tick => {
            state.tick = state.tick.wrapping_add(1);
            vec![]
        }
        Action::Progress { done, total } => {
            if state.index.is_none() {
                state.status = format!("indexing {done}/{total} files");
            }
            vec![]
        }
        Action::Indexed(Ok(indexed)) => {
            state.index = Some(indexed.index);
            state.search = Some(indexed.search);
            state.backend = Some(indexed.backend);
            set_hole(state, indexed.hole)
        }
        Action::Indexed(Err(e)) => {
            state.status = format!("{OPEN_FAILED}: {e}");
            vec![]
        }
        Action::BackendSwitched { chosen, backend } => switch_backend(state, chosen, backend),
        Action::AnalysisFailed { generation, error } => {
            if let Some(view) = state.view.as_mut().filter(|v| v.generation == generation) {
                state.status = format!("cannot build the candidates: {error}");
                view.failed = Some(error);
            }
            vec![]
        }
        Action::Analysed {
            generation,
            candidates,
            proposals,
            ranker,
        } => {
            if !current(state, generation) {
                return vec![];
            }
            state.candidates = candidates;
            state.proposals = proposals;
            state.candidate_cursor = 0;
            state.prompt_scroll = 0;
            state.status = analysed_status(state);
            // The ranker changed while the candidates were being built.
            if ranker == state.ranker {
                return vec![];
            }
            rank(state)
        }
        Action::Retrieved {
            generation,
            candidates,
            procc,
        } => {
            if current(state, generation) {
                for built in candidates {
                    if let Some(row) = state.candidates.iter_mut().find(|c| c.id == built.id) {
                        *row = built;
                    }
                }
                state.status = match procc.pick {
                    Some(id) => format!("retrieved candidates built · ProCC (LinUCB) picks {id}"),
                    None => "retrieved candidates built · no ProCC perspective applies".into(),
                };
                state.procc = Some(procc);
            }
            vec![]
        }
        Action::Ranked {
            generation,
            ranker,
            ranked,
        } => {
            // A later choice may have overtaken this ranking.
            if !current(state, generation) || ranker != state.ranker {
                return vec![];
            }
            match ranked {
                Ok(ranked) => {
                    apply_ranking(&mut state.candidates, &ranked);
                    state.candidate_cursor = 0;
                    state.prompt_scroll = 0;
                    state.status = format!("candidates re-ranked by the {} ranker", ranker.name());
                }
                // Scores of the previous ranker would read as this one's.
                Err(e) => {
                    state.candidates.iter_mut().for_each(|c| c.score = None);
                    state.status = format!("{} cannot rank: {e}", ranker.name());
                }
            }
            vec![]
        }
        Action::Streamed {
            generation,
            card,
            text,
        } => {
            if current(state, generation) && state.running {
                if state.streamed.len() <= card {
                    state.streamed.resize(card + 1, String::new());
                }
                state.streamed[card].push_str(&text);
            }
            vec![]
        }
        Action::Completed { generation, cards } => {
            if current(state, generation) && state.running {
                state.streamed.clear();
                show_cards(state, cards);
                state.running = false;
                state.status = "completions ready: Enter or 1..k picks, e explains".into();
            }
            vec![]
        }
        Action::Message(text) => {
            state.status = text;
            vec![]
        }
    }
}

fn analysed_status(state: &State) -> String {
    let ranked = format!(
        "{} candidates, ranked by {}",
        state.candidates.len(),
        state.ranker.name()
    );
    match state.candidates.iter().filter(|c| c.building()).count() {
        0 => ranked,
        n => format!("{ranked} · asking the backend for {n} retrieved candidates…"),
    }
}

/// Edited cards join the ones shown (the oldest go past MAX_K) and take the focus; a normal run
/// replaces them.
fn show_cards(state: &mut State, cards: Vec<Card>) {
    if cards.iter().any(|c| c.edited.is_some()) {
        state.cards.extend(cards);
        let extra = state.cards.len().saturating_sub(MAX_K);
        state.cards.drain(..extra);
        state.card_cursor = state.cards.len() - 1;
    } else {
        state.cards = cards;
        state.card_cursor = 0;
    }
}

fn current(state: &State, generation: u64) -> bool {
    state
        .view
        .as_ref()
        .is_some_and(|v| v.generation == generation)
}

/// Move the hole: show its file, recompute the candidates, drop stale results.
fn set_hole(state: &mut State, hole: Hole) -> Vec<Effect> {
    let (Some(index), Some(search), Some(backend)) = (
        state.index.clone(),
        state.search.clone(),
        state.backend.clone(),
    ) else {
        return vec![];
    };
    let generation = state.view.as_ref().map_or(0, |v| v.generation + 1);
    // Highlighting a large file is the slow part of a move; within the file it is unchanged.
    if state.lines.is_empty() || hole.file != state.file {
        show_file(state, hole.file);
    }
    state.cursor = (hole.line, hole.column);
    state.view = Some(HoleView {
        hole: hole.clone(),
        generation,
        failed: None,
    });
    state.candidates.clear();
    state.procc = None;
    state.selected.clear();
    state.cards.clear();
    state.explained = None;
    state.running = false;
    state.status = format!("hole {} · ranking candidates…", hole.display(&index));
    vec![
        Effect::CancelCompletions,
        Effect::Analyse {
            index,
            search,
            backend,
            hole,
            generation,
            ranker: state.ranker,
            tokenizer: state.setup.tokenizer(),
            budget: state.setup.budget,
        },
    ]
}

fn show_file(state: &mut State, file: FileId) {
    let Some(index) = &state.index else { return };
    let source = &index.files[file];
    state.lines = highlight::file(&source.path, &source.text, &state.theme.code);
    state.file = file;
    state.cursor = (0, 0);
}

fn command_effects(state: &mut State, command: Command) -> Vec<Effect> {
    if state.help && !matches!(command, Command::Quit | Command::Suspend) {
        state.help = false;
        return vec![];
    }
    match command {
        Command::Quit => {
            state.quit = true;
            vec![Effect::CancelCompletions, Effect::Quit]
        }
        Command::Help => {
            state.help = true;
            vec![]
        }
        Command::FocusNext => {
            state.focus = state.focus.step(1);
            vec![]
        }
        Command::FocusPrev => {
            state.focus = state.focus.step(-1);
            vec![]
        }
        Command::Zoom => {
            state.zoomed = !state.zoomed;
            vec![]
        }
        Command::Up => move_vertical(state, -1),
        Command::Down => move_vertical(state, 1),
        Command::PageUp => move_vertical(state, -PAGE),
        Command::PageDown => move_vertical(state, PAGE),
        Command::Top => move_vertical(state, isize::MIN / 2),
        Command::Bottom => move_vertical(state, isize::MAX / 2),
        Command::Left => move_horizontal(state, -1),
        Command::Right => move_horizontal(state, 1),
        Command::Confirm => confirm(state),
        Command::Select => select(state),
        Command::Run => run(state),
        Command::Cancel => cancel(state),
        Command::Pick1 => pick(state, 0),
        Command::Pick2 => pick(state, 1),
        Command::Pick3 => pick(state, 2),
        Command::Pick4 => pick(state, 3),
        Command::Pick5 => pick(state, 4),
        Command::Explain => explain_card(state),
        Command::Apply => {
            if focused_card(state).is_some() {
                state.mode = Mode::ConfirmApply;
                state.status = "write this completion into the file? y/n".into();
            }
            vec![]
        }
        Command::Filter => {
            state.mode = Mode::Filter;
            state.focus = Pane::Candidates;
            vec![]
        }
        Command::Picker => {
            state.mode = Mode::Picker {
                query: String::new(),
                cursor: 0,
            };
            vec![]
        }
        Command::MoreK => set_k(state, (state.k + 1).min(MAX_K)),
        Command::FewerK => set_k(state, state.k.saturating_sub(1).max(1)),
        Command::ToggleMouse => {
            state.mouse = !state.mouse;
            vec![Effect::SetMouse(state.mouse)]
        }
        Command::Suspend => vec![Effect::Suspend],
        Command::Edit => open_editor(state),
        Command::CycleRanker => cycle_ranker(state),
        Command::Backends => {
            state.mode = Mode::Backends {
                cursor: state.setup.backend,
            };
            vec![]
        }
    }
}

/// Toggle the focused candidate in the selection; one still being built cannot be chosen yet.
fn select(state: &mut State) -> Vec<Effect> {
    let Some(focused) = state.focused_candidate() else {
        return vec![];
    };
    let id = focused.id;
    if focused.building() {
        state.status = format!("candidate {id} is still waiting for the backend");
    } else if !state.selected.remove(&id) {
        state.selected.insert(id);
    }
    vec![]
}

fn open_editor(state: &mut State) -> Vec<Effect> {
    let Some(editor) = state
        .focused_candidate()
        .map(|c| Editor::new(c, &state.theme))
    else {
        return vec![];
    };
    state.status = format!("editing the prompt of candidate {}", editor.candidate);
    state.editor = Some(editor);
    state.mode = Mode::Edit;
    state.focus = Pane::Prompt;
    vec![]
}

fn cycle_ranker(state: &mut State) -> Vec<Effect> {
    state.ranker = next_ranker(state.ranker);
    state.status = format!("ranking with {}…", state.ranker.name());
    rank(state)
}

/// Re-rank the candidates shown with the chosen ranker (candidates still being built get it
/// when they arrive).
fn rank(state: &State) -> Vec<Effect> {
    match (&state.view, &state.index) {
        (Some(view), Some(index)) if !state.candidates.is_empty() => vec![Effect::Rank {
            index: index.clone(),
            hole: view.hole.clone(),
            proposals: state.proposals.clone(),
            generation: view.generation,
            ranker: state.ranker,
        }],
        _ => vec![],
    }
}

fn set_k(state: &mut State, k: usize) -> Vec<Effect> {
    state.k = k;
    state.status = format!("k = {k}");
    vec![]
}

fn clamp_add(value: usize, delta: isize, len: usize) -> usize {
    (value as isize)
        .saturating_add(delta)
        .clamp(0, len.saturating_sub(1) as isize) as usize
}

fn move_vertical(state: &mut State, delta: isize) -> Vec<Effect> {
    match state.focus {
        Pane::Source => {
            let line = clamp_add(state.cursor.0, delta, state.line_count());
            state.cursor = (line, state.cursor.1.min(state.line_chars(line)));
        }
        Pane::Candidates => {
            let len = state.visible().len();
            state.candidate_cursor = clamp_add(state.candidate_cursor, delta, len);
            state.prompt_scroll = 0;
            state.explained = None;
        }
        Pane::Prompt => {
            let len = state.shown_prompt().map_or(0, |p| p.text().lines().count());
            state.prompt_scroll = clamp_add(state.prompt_scroll, delta, len);
        }
        Pane::Completions => {}
    }
    vec![]
}

fn move_horizontal(state: &mut State, delta: isize) -> Vec<Effect> {
    match state.focus {
        Pane::Source => {
            let chars = state.line_chars(state.cursor.0);
            state.cursor.1 = clamp_add(state.cursor.1, delta, chars + 1);
        }
        Pane::Completions => {
            state.card_cursor = clamp_add(state.card_cursor, delta, state.cards.len());
            state.explained = None;
        }
        Pane::Candidates | Pane::Prompt => {}
    }
    vec![]
}

fn confirm(state: &mut State) -> Vec<Effect> {
    match state.focus {
        Pane::Source => hole_at_cursor(state),
        Pane::Candidates | Pane::Prompt => run(state),
        Pane::Completions => pick(state, state.card_cursor),
    }
}

fn hole_at_cursor(state: &mut State) -> Vec<Effect> {
    let Some(index) = state.index.clone() else {
        return vec![];
    };
    let path = &index.files[state.file].path;
    match Hole::at(&index, path, state.cursor.0 + 1, state.cursor.1 + 1) {
        Ok(hole) => set_hole(state, hole),
        Err(e) => {
            state.status = e.to_string();
            vec![]
        }
    }
}

/// The candidates to complete with: the selected ones, else the focused one and the next best
/// applicable ones up to k.
fn run_ids(state: &State) -> Vec<CandidateId> {
    if !state.selected.is_empty() {
        return state.selected.iter().copied().take(MAX_K).collect();
    }
    let first = state
        .focused_candidate()
        .filter(|c| !c.building())
        .map(|c| c.id);
    let rest = state
        .candidates
        .iter()
        .filter(|c| c.applicable())
        .map(|c| c.id);
    let mut ids = Vec::new();
    for id in first.into_iter().chain(rest) {
        if !ids.contains(&id) && ids.len() < state.k {
            ids.push(id);
        }
    }
    ids
}

fn run(state: &mut State) -> Vec<Effect> {
    let prompts: Vec<(CandidateId, String)> = run_ids(state)
        .into_iter()
        .filter_map(|id| state.candidate(id).map(|c| (id, c.prompt.text())))
        .collect();
    let count = prompts.len();
    let effects = start_completion(state, prompts, false);
    if !effects.is_empty() {
        state.cards.clear();
        state.status = format!("completing with {count} candidates… Esc cancels");
    }
    effects
}

/// Start completing `prompts` (candidate id, prompt text) for the current hole.
fn start_completion(
    state: &mut State,
    prompts: Vec<(CandidateId, String)>,
    edited: bool,
) -> Vec<Effect> {
    let (Some(index), Some(backend), Some(view)) = (&state.index, &state.backend, &state.view)
    else {
        return vec![];
    };
    if prompts.is_empty() {
        return vec![];
    }
    let hole = &view.hole;
    let file = &index.files[hole.file];
    let job = CompleteJob {
        generation: view.generation,
        backend: backend.clone(),
        prompts,
        current_file: file.path.clone(),
        file_text: file.text.clone(),
        offset: hole.offset,
        target: hole.target.clone().unwrap_or_default(),
        edited,
    };
    state.running = true;
    state.streamed.clear();
    state.explained = None;
    state.focus = Pane::Completions;
    vec![Effect::CancelCompletions, Effect::Complete(job)]
}

fn cancel(state: &mut State) -> Vec<Effect> {
    if state.running {
        state.running = false;
        state.status = "completions cancelled".into();
        return vec![Effect::CancelCompletions];
    }
    state.explained = None;
    state.zoomed = false;
    vec![]
}

fn focused_card(state: &State) -> Option<&Finished> {
    state
        .cards
        .get(state.card_cursor)
        .and_then(|c| c.outcome.as_ref().ok())
}

fn pick(state: &mut State, n: usize) -> Vec<Effect> {
    let (Some(index), Some(view)) = (&state.index, &state.view) else {
        return vec![];
    };
    let Some(card) = state.cards.get(n).filter(|c| c.outcome.is_ok()) else {
        return vec![];
    };
    let prompt = card
        .edited
        .clone()
        .or_else(|| state.candidate(card.candidate).map(|c| c.prompt.text()));
    let pick = feedback::Pick {
        hole: view.hole.display(index),
        candidates: state.cards.iter().map(|c| c.candidate).collect(),
        prompt_hash: feedback::prompt_hash(prompt.as_deref().unwrap_or("")),
        completions: state
            .cards
            .iter()
            .map(|c| c.outcome.as_ref().map_or(String::new(), |f| f.text.clone()))
            .collect(),
        picked: card.candidate,
        // The driver stamps the time: update stays free of clocks.
        unix_time: 0,
    };
    let picked = card.candidate;
    let bandit = card
        .edited
        .is_none()
        .then(|| procc_lesson(state, picked))
        .flatten();
    state.card_cursor = n;
    state.status = format!("picked completion {} (candidate {picked})…", n + 1);
    vec![Effect::Pick { pick, bandit }]
}

/// A pick of one of ProCC's perspectives rewards its arm 1 and the other perspectives whose
/// completions were shown (and that applied) 0; other picks teach the bandit nothing.
fn procc_lesson(state: &State, picked: CandidateId) -> Option<BanditLesson> {
    let procc = state.procc.as_ref()?;
    if !CandidateId::PROCC.contains(&picked) {
        return None;
    }
    let shown: BTreeSet<CandidateId> = state
        .cards
        .iter()
        .filter(|c| c.edited.is_none())
        .map(|c| c.candidate)
        .collect();
    let rewards = CandidateId::PROCC
        .iter()
        .enumerate()
        .filter(|&(arm, id)| procc.available[arm] && shown.contains(id))
        .map(|(arm, &id)| (arm, f64::from(u8::from(id == picked))))
        .collect();
    Some(BanditLesson {
        context: procc.context,
        rewards,
    })
}

fn explain_card(state: &mut State) -> Vec<Effect> {
    let Some(card) = state.cards.get(state.card_cursor) else {
        return vec![];
    };
    if card.edited.is_some() {
        state.status = "an edited prompt has no segments to explain".into();
        return vec![];
    }
    let (Ok(done), Some(candidate)) = (&card.outcome, state.candidate(card.candidate)) else {
        return vec![];
    };
    let spans = explain::explain(&candidate.prompt, &done.text);
    let unexplained: usize = spans
        .iter()
        .filter(|s| s.prompt.is_none())
        .map(|s| done.text[s.completion.clone()].chars().count())
        .sum();
    let nothing = match unexplained {
        0 => String::new(),
        n => format!("; nothing in the prompt explains {n} chars"),
    };
    let status = format!(
        "completion {} came from candidate {} ({}): {:.0}% copied from the prompt{nothing}",
        state.card_cursor + 1,
        candidate.id,
        candidate.label,
        explain::explained_fraction(&spans) * 100.0,
    );
    let scroll = first_explained_line(&candidate.prompt, &spans);
    state.status = status;
    state.prompt_scroll = scroll;
    state.explained = Some(spans);
    vec![]
}

/// Scroll so the first copied span shows, with two lines above it.
fn first_explained_line(prompt: &Prompt, spans: &[ExplainedSpan]) -> usize {
    let start = spans
        .iter()
        .find_map(|s| s.prompt.as_ref().map(|r| r.start));
    start.map_or(0, |at| {
        prompt.text()[..at].matches('\n').count().saturating_sub(2)
    })
}

/// Keys typed into the filter, the picker or the apply question.
fn input(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    match state.mode.clone() {
        Mode::Normal => vec![],
        Mode::Filter => {
            match key.code {
                KeyCode::Enter | KeyCode::Esc => state.mode = Mode::Normal,
                code => edit_text(&mut state.filter, code),
            }
            state.candidate_cursor = 0;
            vec![]
        }
        Mode::Picker { query, cursor } => picker_input(state, query, cursor, key.code),
        Mode::Backends { cursor } => backends_input(state, cursor, key.code),
        Mode::ConfirmApply => {
            state.mode = Mode::Normal;
            if key.code == KeyCode::Char('y') {
                return apply(state);
            }
            state.status = "not applied".into();
            vec![]
        }
        Mode::Edit => edit_input(state, key),
    }
}

/// Ctrl-S in the editor: run the edited prompt.
pub const SUBMIT_EDIT: char = 's';

/// Esc leaves the prompt as it was, Ctrl-S completes with the edit, other keys edit.
fn edit_input(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    let Some(editor) = &mut state.editor else {
        state.mode = Mode::Normal;
        return vec![];
    };
    let submit =
        key.code == KeyCode::Char(SUBMIT_EDIT) && key.modifiers.contains(KeyModifiers::CONTROL);
    if key.code != KeyCode::Esc && !submit {
        editor.input(key);
        return vec![];
    }
    let prompt = (editor.candidate, editor.text());
    state.editor = None;
    state.mode = Mode::Normal;
    if !submit {
        state.status = "edit discarded".into();
        return vec![];
    }
    let effects = start_completion(state, vec![prompt], true);
    if !effects.is_empty() {
        state.status = "completing with the edited prompt… Esc cancels".into();
    }
    effects
}

fn edit_text(text: &mut String, code: KeyCode) {
    match code {
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char(c) => text.push(c),
        _ => {}
    }
}

fn picker_input(state: &mut State, mut query: String, cursor: usize, code: KeyCode) -> Vec<Effect> {
    let matches = state.picker_matches(&query);
    match code {
        KeyCode::Esc => state.mode = Mode::Normal,
        KeyCode::Enter => {
            state.mode = Mode::Normal;
            if let Some(&file) = matches.get(cursor) {
                show_file(state, file);
                state.focus = Pane::Source;
            }
        }
        KeyCode::Up | KeyCode::Down => {
            let delta = if code == KeyCode::Up { -1 } else { 1 };
            let cursor = clamp_add(cursor, delta, matches.len());
            state.mode = Mode::Picker { query, cursor };
        }
        code => {
            edit_text(&mut query, code);
            state.mode = Mode::Picker { query, cursor: 0 };
        }
    }
    vec![]
}

fn backends_input(state: &mut State, cursor: usize, code: KeyCode) -> Vec<Effect> {
    match code {
        KeyCode::Up | KeyCode::Down => {
            let delta = if code == KeyCode::Up { -1 } else { 1 };
            let cursor = clamp_add(cursor, delta, state.setup.backends.len());
            state.mode = Mode::Backends { cursor };
            vec![]
        }
        KeyCode::Enter => {
            state.mode = Mode::Normal;
            let (Some(index), Some(entry)) = (&state.index, state.setup.backends.get(cursor))
            else {
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
        KeyCode::Esc => {
            state.mode = Mode::Normal;
            vec![]
        }
        _ => {
            state.mode = Mode::Backends { cursor };
            vec![]
        }
    }
}

/// The new backend completes from now on; the hole's candidates are built again, since
/// budgets are counted in its tokenizer and ProCC's summary depends on what it can do.
fn switch_backend(
    state: &mut State,
    chosen: usize,
    backend: Result<Arc<dyn Backend>, String>,
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
    let effects = match state.view.as_ref().map(|v| v.hole.clone()) {
        Some(hole) => set_hole(state, hole),
        None => vec![],
    };
    state.status = format!("completing with {}", backend_summary(state));
    effects
}

/// "NAME (kind, model) · budgets exact in TOKENIZER" for the status line and the picker.
pub fn backend_summary(state: &State) -> String {
    let entry = state.setup.entry();
    let model = entry
        .model
        .as_deref()
        .map(|m| format!(", {m}"))
        .unwrap_or_default();
    let counting = match state.backend.as_ref().map(|b| b.counting()) {
        Some(TokenCounting::Approximate) => "approximate",
        _ => "exact",
    };
    format!(
        "{} ({}{model}) · budgets {counting} in {}",
        entry.name,
        entry.kind.name(),
        state.setup.tokenizer().name()
    )
}

fn apply(state: &mut State) -> Vec<Effect> {
    let (Some(index), Some(view), Some(done)) = (&state.index, &state.view, focused_card(state))
    else {
        return vec![];
    };
    let file = &index.files[view.hole.file];
    let effect = Effect::Apply {
        path: index.root.join(&file.path),
        hash: file.hash,
        offset: view.hole.offset,
        replace: view.hole.target.as_ref().map_or(0, String::len),
        text: done.text.clone(),
    };
    state.status = format!("writing the completion into {}…", file.path);
    vec![effect]
}

fn click(state: &mut State, pane: Pane, at: (u16, u16), size: (u16, u16)) -> Vec<Effect> {
    let ((row, col), (width, height)) = (at, size);
    state.focus = pane;
    let (row, height) = (row as usize, height as usize);
    match pane {
        Pane::Source => {
            let line = scroll_top(state.cursor.0, height) + row;
            if line < state.line_count() {
                let left = ui::source::first_column(state.cursor.1, width);
                let col = left + col.saturating_sub(ui::source::GUTTER) as usize;
                state.cursor = (line, col.min(state.line_chars(line)));
            }
        }
        Pane::Candidates => {
            // The list has one header row.
            let visible = state.visible().len();
            if let Some(row) = row.checked_sub(1) {
                let at = scroll_top(state.candidate_cursor, height.saturating_sub(1)) + row;
                if at < visible {
                    state.candidate_cursor = at;
                    state.explained = None;
                }
            }
        }
        Pane::Prompt | Pane::Completions => {}
    }
    vec![]
}

/// How a key is read in the current mode: text fields take raw keys, else the keymap decides.
pub fn key_action(state: &State, key: KeyEvent) -> Option<Action> {
    match state.mode {
        Mode::Normal => state.keymap.lookup(key).map(Action::Command),
        _ => Some(Action::Input(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyModifiers;

    fn state() -> State {
        State::new(Keymap::builtin(), Theme::dark())
    }

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn focus_cycles_both_ways_and_help_swallows_the_next_key() {
        let mut s = state();
        update(&mut s, Action::Command(Command::FocusPrev));
        assert_eq!(s.focus, Pane::Completions);
        update(&mut s, Action::Command(Command::FocusNext));
        assert_eq!(s.focus, Pane::Source);
        update(&mut s, Action::Command(Command::Help));
        assert!(s.help);
        update(&mut s, Action::Command(Command::FocusNext));
        assert!(!s.help);
        assert_eq!(s.focus, Pane::Source);
    }

    #[test]
    fn k_stays_within_bounds() {
        let mut s = state();
        for _ in 0..10 {
            update(&mut s, Action::Command(Command::MoreK));
        }
        assert_eq!(s.k, MAX_K);
        for _ in 0..10 {
            update(&mut s, Action::Command(Command::FewerK));
        }
        assert_eq!(s.k, 1);
    }

    #[test]
    fn filter_mode_takes_raw_keys_until_enter() {
        let mut s = state();
        update(&mut s, Action::Command(Command::Filter));
        assert!(matches!(key_action(&s, key('q')), Some(Action::Input(_))));
        for c in "mnb".chars() {
            update(&mut s, Action::Input(key(c)));
        }
        update(&mut s, Action::Input(KeyEvent::from(KeyCode::Enter)));
        assert_eq!(s.filter, "mnb");
        assert_eq!(s.mode, Mode::Normal);
        assert!(matches!(
            key_action(&s, key('q')),
            Some(Action::Command(Command::Quit))
        ));
    }

    #[test]
    fn streamed_text_shows_while_running_and_gives_way_to_the_cards() {
        let mut s = state();
        let hole = Hole {
            file: 0,
            line: 0,
            column: 0,
            offset: 0,
            target: None,
        };
        s.view = Some(HoleView {
            hole,
            generation: 3,
            failed: None,
        });
        s.running = true;
        let streamed = |generation, card, text: &str| Action::Streamed {
            generation,
            card,
            text: text.into(),
        };
        update(&mut s, streamed(3, 1, "find"));
        update(&mut s, streamed(3, 1, "ById("));
        update(&mut s, streamed(2, 0, "stale"));
        assert_eq!(s.streamed, ["", "findById("]);
        update(
            &mut s,
            Action::Completed {
                generation: 3,
                cards: vec![],
            },
        );
        assert!(!s.running && s.streamed.is_empty());
    }

    #[test]
    fn results_for_another_hole_are_dropped() {
        let mut s = state();
        let effects = update(
            &mut s,
            Action::Analysed {
                generation: 7,
                candidates: vec![],
                proposals: Arc::default(),
                ranker: RankerKind::RlpgH,
            },
        );
        assert!(effects.is_empty());
        assert!(s.candidates.is_empty());
        update(
            &mut s,
            Action::Completed {
                generation: 7,
                cards: vec![],
            },
        );
        assert!(!s.running);
    }

    fn candidate(id: usize) -> Candidate {
        let id = CandidateId::nth(id);
        Candidate {
            id,
            label: format!("cand {id}"),
            source: "current",
            context_type: "default",
            score: None,
            retrieval_score: None,
            availability: Availability::Applicable,
            prompt: Prompt {
                segments: vec![],
                budget: 10,
                tokenizer: "code",
                proposal_id: id,
            },
        }
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn ranking_orders_and_scores_then_lists_retrieved_then_the_unranked() {
        let not_applicable = |id| Candidate {
            id: CandidateId::nth(id),
            availability: Availability::NotApplicable(None),
            ..candidate(id)
        };
        let mut cands: Vec<Candidate> =
            [70, 4, 1, 63, 2, 3, 5].into_iter().map(candidate).collect();
        cands[1] = not_applicable(4);
        cands[4] = not_applicable(2);
        let ranked = [(3, 0.9), (1, 0.5)].map(|(id, score)| Ranked {
            id: CandidateId::nth(id),
            score,
        });
        apply_ranking(&mut cands, &ranked);
        let order: Vec<_> = cands.iter().map(|c| (c.id.index(), c.score)).collect();
        assert_eq!(
            order,
            [
                (3, Some(0.9)),
                (1, Some(0.5)),
                (5, None),
                (63, None),
                (70, None),
                (2, None),
                (4, None)
            ]
        );
    }

    /// A state with a one-file repository open.
    fn opened() -> State {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("A.java"), "class A {}\n").unwrap();
        let mut s = state();
        s.index = Some(Arc::new(RepoIndex::open(dir.path(), None).unwrap()));
        s
    }

    fn at_hole(s: &mut State, generation: u64) {
        s.view = Some(HoleView {
            hole: Hole {
                file: 0,
                line: 0,
                column: 0,
                offset: 0,
                target: None,
            },
            generation,
            failed: None,
        });
    }

    #[test]
    fn a_backend_that_cannot_start_keeps_the_current_one_and_says_why() {
        let mut s = opened();
        at_hole(&mut s, 1);
        s.candidates = vec![candidate(1)];
        let mut other = BackendConfig::embedded();
        other.name = "other".into();
        s.setup.backends.push(other);
        update(&mut s, Action::Command(Command::Backends));
        assert_eq!(s.mode, Mode::Backends { cursor: 0 });
        update(&mut s, Action::Input(KeyEvent::from(KeyCode::Down)));
        let effects = update(&mut s, Action::Input(KeyEvent::from(KeyCode::Enter)));
        assert!(matches!(
            effects[..],
            [Effect::SwitchBackend { chosen: 1, .. }]
        ));
        assert!(s.busy(), "starting it");
        let failed = Action::BackendSwitched {
            chosen: 1,
            backend: Err("other: cannot read model.gguf".into()),
        };
        assert!(update(&mut s, failed).is_empty());
        assert_eq!(s.setup.backend, 0);
        assert!(!s.busy());
        assert_eq!(
            s.status,
            "cannot switch the backend: other: cannot read model.gguf"
        );
    }

    #[test]
    fn a_failed_analysis_stops_the_spinner_and_says_why() {
        let mut s = opened();
        at_hole(&mut s, 3);
        assert!(s.busy(), "building the candidates");
        let failed = |generation| Action::AnalysisFailed {
            generation,
            error: "internal error (boom)".into(),
        };
        update(&mut s, failed(2));
        assert!(s.busy(), "a stale failure is ignored");
        update(&mut s, failed(3));
        assert!(!s.busy());
        assert_eq!(
            s.status,
            "cannot build the candidates: internal error (boom)"
        );
    }

    #[test]
    fn the_ranker_cycles_through_every_kind_from_rlpg_h() {
        let mut s = state();
        assert_eq!(s.ranker, RankerKind::RlpgH, "RLPG-H ranks by default");
        let mut seen = vec![s.ranker];
        for _ in 0..5 {
            update(&mut s, Action::Command(Command::CycleRanker));
            seen.push(s.ranker);
        }
        use RankerKind::*;
        assert_eq!(seen, [RlpgH, RlpgR, Bm25, Fixed, Online, RlpgH]);
        assert!(ui::candidates::title(&s).contains("ranker RLPG-H"));
    }

    #[test]
    fn cycling_the_ranker_asks_for_a_ranking_and_drops_an_overtaken_one() {
        let mut s = opened();
        at_hole(&mut s, 2);
        s.candidates = vec![candidate(1), candidate(2)];
        let effects = update(&mut s, Action::Command(Command::CycleRanker));
        assert_eq!(s.ranker, RankerKind::RlpgR);
        assert!(matches!(
            effects[..],
            [Effect::Rank {
                generation: 2,
                ranker: RankerKind::RlpgR,
                ..
            }]
        ));
        let ranked = |ranker, first| Action::Ranked {
            generation: 2,
            ranker,
            ranked: Ok(vec![Ranked {
                id: CandidateId::nth(first),
                score: 1.0,
            }]),
        };
        update(&mut s, ranked(RankerKind::RlpgH, 1));
        assert_eq!(s.candidates[0].id, 1, "the RLPG-H ranking was overtaken");
        update(&mut s, ranked(RankerKind::RlpgR, 2));
        assert_eq!(s.candidates[0].id, 2);
        assert_eq!(s.candidates[0].score, Some(1.0));
        assert!(s.status.contains("RLPG-R"), "{}", s.status);
        let failed = Action::Ranked {
            generation: 2,
            ranker: RankerKind::RlpgR,
            ranked: Err("no RLPG-R head".into()),
        };
        update(&mut s, failed);
        assert_eq!(s.candidates[0].score, None, "no score is shown as RLPG-R's");
        assert!(s.status.contains("RLPG-R cannot rank: no RLPG-R head"));
        update(&mut s, Action::Command(Command::CycleRanker));
        assert_eq!(s.ranker, RankerKind::Bm25);
        let built_by = |ranker| Action::Analysed {
            generation: 2,
            candidates: vec![candidate(1)],
            proposals: Arc::default(),
            ranker,
        };
        assert!(update(&mut s, built_by(RankerKind::Bm25)).is_empty());
        assert!(matches!(
            update(&mut s, built_by(RankerKind::RlpgR))[..],
            [Effect::Rank {
                ranker: RankerKind::Bm25,
                ..
            }]
        ));
    }

    fn waiting(id: usize) -> Candidate {
        Candidate {
            availability: Availability::Building,
            ..candidate(id)
        }
    }

    fn procc(pick: Option<usize>) -> Procc {
        let pick = pick.map(CandidateId::nth);
        Procc {
            context: crate::rank::bandit::context([Some((0.5, 0.25)), Some((0.4, 0.2)), None]),
            available: [true, true, false],
            pick,
        }
    }

    #[test]
    fn retrieved_candidates_arrive_later_without_blocking_and_mark_procc_pick() {
        let mut s = opened();
        at_hole(&mut s, 4);
        let analysed = vec![candidate(6), candidate(68), waiting(69), waiting(70)];
        update(
            &mut s,
            Action::Analysed {
                generation: 4,
                candidates: analysed,
                proposals: Arc::default(),
                ranker: RankerKind::RlpgH,
            },
        );
        assert!(
            s.retrieving() && s.busy(),
            "the spinner runs while they build"
        );
        assert!(
            s.status.contains("asking the backend for 2"),
            "{}",
            s.status
        );
        // Input is not blocked: the cursor moves, but a waiting row cannot be chosen yet.
        update(&mut s, Action::Command(Command::FocusNext));
        update(&mut s, Action::Command(Command::Bottom));
        assert_eq!(s.focused_candidate().unwrap().id, 70);
        update(&mut s, Action::Command(Command::Select));
        assert!(s.selected.is_empty() && s.status.contains("waiting"));
        assert!(ui::prompt::title(&s).contains("waiting for the backend"));
        s.k = MAX_K;
        assert_eq!(run_ids(&s), [6, 68], "waiting rows are not completed");

        let built = |id, availability| Candidate {
            id: CandidateId::nth(id),
            availability,
            retrieval_score: Some(0.5),
            ..candidate(id)
        };
        let why = "backend `embedded` does not follow instructions".to_string();
        let retrieved = |generation| Action::Retrieved {
            generation,
            candidates: vec![
                built(69, Availability::Applicable),
                built(70, Availability::NotApplicable(Some(why.clone()))),
            ],
            procc: procc(Some(69)),
        };
        update(&mut s, retrieved(3));
        assert!(s.retrieving(), "a stale hole's candidates are dropped");
        update(&mut s, retrieved(4));
        assert!(!s.retrieving() && !s.busy());
        let ids: Vec<_> = s.candidates.iter().map(|c| c.id).collect();
        assert_eq!(ids, [6, 68, 69, 70], "rows keep their places");
        assert!(s.candidate(CandidateId::nth(69)).unwrap().applicable());
        assert!(ui::prompt::title(&s).contains(&why), "why not shows");
        assert!(ui::candidates::title(&s).contains("ProCC ★69"));
        assert!(s.status.contains("ProCC (LinUCB) picks 69"));
        update(&mut s, Action::Command(Command::Up));
        update(&mut s, Action::Command(Command::Select));
        assert!(s.selected.contains(&CandidateId::nth(69)));
    }

    fn card(candidate: usize) -> Card {
        let candidate = CandidateId::nth(candidate);
        Card {
            candidate,
            edited: None,
            outcome: Ok(Finished {
                text: format!("c{candidate}"),
                latency_ms: 0,
                scores: crate::metrics::score("a", "a"),
                syntax_errors: 0,
            }),
        }
    }

    fn lesson_of(effects: &[Effect]) -> Option<BanditLesson> {
        match effects {
            [Effect::Pick { bandit, .. }] => bandit.clone(),
            _ => panic!("a pick effect"),
        }
    }

    #[test]
    fn picking_a_procc_perspective_rewards_its_arm_and_the_shown_others_nothing() {
        let mut s = opened();
        at_hole(&mut s, 1);
        s.procc = Some(procc(Some(68)));
        // 70 was not available, 6 is RLPG's: neither is taught.
        s.cards = [68, 69, 70, 6].map(card).to_vec();
        let lesson = lesson_of(&update(&mut s, Action::Command(Command::Pick2))).unwrap();
        assert_eq!(lesson.rewards, [(0, 0.0), (1, 1.0)]);
        assert_eq!(lesson.context, procc(None).context);
        let effects = update(&mut s, Action::Command(Command::Pick4));
        assert_eq!(
            lesson_of(&effects),
            None,
            "an RLPG pick leaves the bandit alone"
        );
    }
    #[test]
    fn the_editor_counts_tokens_and_esc_discards_it() {
        let mut s = state();
        s.candidates = vec![candidate(7)];
        assert!(matches!(
            key_action(&s, key('i')),
            Some(Action::Command(Command::Edit))
        ));
        update(&mut s, Action::Command(Command::Edit));
        assert_eq!((s.mode.clone(), s.focus), (Mode::Edit, Pane::Prompt));
        for c in "int x".chars() {
            update(&mut s, Action::Input(key(c)));
        }
        let editor = s.editor.as_ref().unwrap();
        assert_eq!(
            (editor.text().as_str(), editor.candidate.index()),
            ("int x", 7)
        );
        let tokens = TokenizerKind::Code.tokenizer().count("int x");
        assert_eq!(editor.tokens, tokens);
        assert!(ui::prompt::title(&s).contains(&format!("{tokens}/10 tokens")));
        update(&mut s, Action::Input(KeyEvent::from(KeyCode::Esc)));
        assert!(s.editor.is_none() && s.mode == Mode::Normal);
        assert_eq!(s.candidates[0].prompt.text(), "", "the prompt is unchanged");
    }

    #[test]
    fn ctrl_s_closes_the_editor_and_edited_cards_join_the_shown_ones() {
        let mut s = state();
        s.candidates = vec![candidate(7)];
        update(&mut s, Action::Command(Command::Edit));
        // No backend yet: nothing runs, but the editor still closes.
        assert!(update(&mut s, Action::Input(ctrl(SUBMIT_EDIT))).is_empty());
        assert_eq!(s.mode, Mode::Normal);
        let card = |edited: Option<&str>| Card {
            candidate: CandidateId::nth(7),
            edited: edited.map(String::from),
            outcome: Err("offline".into()),
        };
        s.cards = (0..MAX_K).map(|_| card(None)).collect();
        show_cards(&mut s, vec![card(Some("edit"))]);
        assert_eq!(s.cards.len(), MAX_K);
        assert_eq!(s.card_cursor, MAX_K - 1);
        assert!(s.cards[MAX_K - 1].edited.is_some());
        show_cards(&mut s, vec![card(None)]);
        assert_eq!((s.cards.len(), s.card_cursor), (1, 0));
    }

    #[test]
    fn progress_shows_until_the_index_is_ready() {
        let mut s = state();
        update(
            &mut s,
            Action::Progress {
                done: 812,
                total: 1581,
            },
        );
        assert_eq!(s.status, "indexing 812/1581 files");
        assert!(s.busy());
    }

    #[test]
    fn quit_cancels_and_quits_and_mouse_toggles() {
        let mut s = state();
        let effects = update(&mut s, Action::Command(Command::Quit));
        assert!(matches!(
            effects[..],
            [Effect::CancelCompletions, Effect::Quit]
        ));
        let effects = update(&mut s, Action::Command(Command::ToggleMouse));
        assert!(matches!(effects[..], [Effect::SetMouse(false)]));
    }
}
