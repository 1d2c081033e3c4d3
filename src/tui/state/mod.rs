//! The pure core: application state, the actions that change it and the effects it asks for.
//! `update` does no IO; the driver runs effects and feeds their results back as actions.
//!
//! Here: `State` and `update`. Beside it: `messages` (commands, actions, effects), `phase`
//! (opening), `input` (modes and how each reads keys), `commands` (the normal mode),
//! `navigate` (hole, file, cursors, search), `complete` (runs, cards, picks, explain),
//! `apply` (write, preview, undo), `editor`, `setup` (backends), `recorded` (the requests an
//! editor plugin made through `keyhole proxy`), `pin` (the candidate pinned for the
//! repository), `candidate` (cards and the hole view) and `provenance` (where prompt text came
//! from, in words). The submodules share
//! this module's imports through `use super::*`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use fuzzy_matcher::FuzzyMatcher;
use fuzzy_matcher::skim::SkimMatcherV2;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::Style;
use ratatui_textarea::TextArea;

use super::command::{Command, Pane};
use super::highlight::{self, StyledLine};
use super::keymap::Keymap;
use super::layout::{self, scroll_top};
use super::theme::Theme;
use crate::candidate::{CandidateId, Numbering};
use crate::compose::Prompt;
use crate::context::proposals::ProposalContext;
use crate::explain::{self, ExplainedSpan};
use crate::feedback;
use crate::hole::Hole;
use crate::metrics::Scores;
use crate::model::Backend;
use crate::model::config::BackendConfig;
use crate::rank::online::Counts;
use crate::rank::{Ranked, RankerKind, bandit};
use crate::repo::{FileId, RepoIndex};
use crate::token::{Tokenizer, TokenizerKind};

mod apply;
mod candidate;
mod commands;
mod complete;
mod diff;
mod editor;
mod input;
mod messages;
mod navigate;
mod phase;
mod pin;
pub mod provenance;
mod recorded;
mod setup;
#[cfg(test)]
mod tests;
mod watched;

use crate::session::Learning;
pub use crate::session::{
    Availability, BanditLesson, CandidateRow, Procc, SearchProgress, SearchStage, SharedSearch,
    Waiting, apply_ranking, fill_rows,
};
use apply::*;
pub use apply::{Applied, FileEdit, apply_preview};
pub use candidate::*;
use commands::*;
use complete::*;
use diff::diff_prompts;
pub use diff::{DiffLine, PromptDiff};
pub use editor::*;
pub use input::*;
pub use messages::*;
pub use navigate::matches;
use navigate::*;
pub use phase::*;
use pin::*;
use recorded::*;
pub use recorded::{OpenRecorded, Recorded, recorded_row};
pub use setup::*;
use watched::*;

pub const DEFAULT_K: usize = 3;
/// The most cards side by side (and the pick keys 1..5).
pub const MAX_K: usize = 5;

pub struct State {
    pub phase: Phase,
    pub keymap: Keymap,
    pub theme: Theme,
    pub setup: Setup,
    /// The backend of the setup being started, while it starts.
    pub starting_backend: Option<usize>,
    pub index: Option<Arc<RepoIndex>>,
    pub search: Option<SharedSearch>,
    pub backend: Option<Arc<dyn Backend>>,
    pub view: Option<HoleView>,
    /// The hole's file while the repository is being opened: its lines show, read from disk,
    /// before the index is ready.
    pub opening_file: Option<String>,
    /// The file shown in the source pane, its highlighted lines and the cursor (line, column).
    pub file: FileId,
    pub lines: Vec<StyledLine>,
    pub cursor: (usize, usize),
    pub candidates: Vec<CandidateRow>,
    pub proposals: Arc<Vec<ProposalContext>>,
    pub ranker: RankerKind,
    /// What the online ranker has learnt: shows and picks per candidate.
    pub online: BTreeMap<CandidateId, Counts>,
    /// What RLPG-H ranks with where it is a classifier tuned for the backend's model
    /// (`keyhole tune`): `RLPG-H tuned for smol, 400 holes`.
    pub tuned: Option<String>,
    /// ProCC's pick among the retrieved candidates, once they are all built.
    pub procc: Option<Procc>,
    pub candidate_cursor: usize,
    pub selected: BTreeSet<CandidateId>,
    pub filter: String,
    pub prompt_scroll: usize,
    /// First column shown of the prompt's lines (long lines scroll sideways).
    pub prompt_left: usize,
    /// Long prompt lines wrap instead of scrolling sideways.
    pub prompt_wrap: bool,
    pub cards: Vec<Card>,
    pub card_cursor: usize,
    pub completion: CompletionPhase,
    pub explained: Option<Vec<ExplainedSpan>>,
    pub k: usize,
    pub focus: Pane,
    pub zoomed: bool,
    pub mode: Mode,
    pub editor: Option<Editor>,
    /// Prompts the user edited and kept (`i`, then Esc or Ctrl-S), until discarded (`d`).
    pub edits: KeptEdits,
    pub mouse: bool,
    pub tick: usize,
    /// The time at the last tick (the driver's clock: `update` reads none).
    pub now: Option<Instant>,
    /// The candidate whose prompt is being fitted to the backend's count.
    pub fitting: Option<CandidateId>,
    /// The hole (its generation) at which fitting stopped: it failed, or the backend does not
    /// count.
    pub fit_stopped: Option<u64>,

    pub status: String,
    /// A problem with the user's files (keymap, theme, log): shown over the status until
    /// dismissed, so it cannot scroll away unread.
    pub warning: Option<String>,
    /// How many texts the source pane has shown; the one whose highlighted lines are being
    /// made (its plain lines show meanwhile).
    pub shown: u64,
    pub highlighting: Option<u64>,
    /// Work held until the hole's ranked candidates show: highlighting its file and the watch
    /// on the repository's files would take the CPU the ranking needs (syntect alone takes
    /// longer than the ranking on a large file), while the plain file shows meanwhile and the
    /// watch misses nothing (it compares with when the index read the files).
    pub after_ranked: Vec<Effect>,
    /// How far building the search indexes has come, while rows wait for them.
    pub search_progress: Option<SearchProgress>,
    /// The prompt diff shown (`D`).
    pub diff: Option<PromptDiff>,
    /// The requests runs sent this session, oldest first (at most [`REQUEST_LOG_KEEPS`]).
    pub request_log: Vec<LoggedRequest>,
    /// The completions written into files and not undone, the last last: `u` takes them back
    /// in turn.
    pub applied: Vec<Applied>,
    /// A file's text on disk after a write, until the repository has been read again.
    pub on_disk: Option<(FileId, String)>,
    /// Files another program changed on disk, not yet read again: the reading waits while
    /// the person edits a prompt, answers a question or completions run.
    pub changed_on_disk: Vec<String>,
    /// The repository is the bundled sample, which apply leaves alone.
    pub shared_sample: bool,
    /// The column the source cursor was last put in: moving up and down keeps to it.
    pub column_goal: usize,
    /// The last search in the source pane (n and N find it again).
    pub search_query: String,
    /// The last search in the prompt pane, and which of its matches is current.
    pub prompt_query: String,
    pub prompt_match: Option<usize>,
    /// Rows of each pane (in `Pane::ALL` order) as last drawn: a page moves by them.
    pub pane_rows: [u16; 4],
    /// How ids are numbered on screen: the profile's (`--fidelity code` swaps 5 and 6).
    pub numbering: Numbering,
    /// The requests an editor plugin made through `keyhole proxy`, and the one whose hole is
    /// open.
    pub recorded: Recorded,
    /// The candidate pinned for the open repository (`p`): `keyhole proxy --compose` sends its
    /// context there.
    pub pinned: Option<CandidateId>,
}

impl State {
    pub fn new(keymap: Keymap, theme: Theme) -> State {
        State {
            phase: Phase::Opening(Progress {
                stage: Stage::Files,
                done: 0,
                total: 0,
            }),
            keymap,
            theme,
            setup: Setup::default(),
            starting_backend: None,
            index: None,
            search: None,
            backend: None,
            view: None,
            opening_file: None,
            file: 0,
            lines: Vec::new(),
            cursor: (0, 0),
            candidates: Vec::new(),
            proposals: Arc::default(),
            ranker: RankerKind::RlpgH,
            online: BTreeMap::new(),
            tuned: None,
            procc: None,
            candidate_cursor: 0,
            selected: BTreeSet::new(),
            filter: String::new(),
            prompt_scroll: 0,
            prompt_left: 0,
            prompt_wrap: false,
            cards: Vec::new(),
            card_cursor: 0,
            completion: CompletionPhase::Idle,
            explained: None,
            k: DEFAULT_K,
            focus: Pane::Source,
            zoomed: false,
            mode: Mode::Normal,
            editor: None,
            edits: KeptEdits::default(),
            mouse: true,
            tick: 0,
            now: None,
            fitting: None,
            fit_stopped: None,

            status: "indexing…".into(),
            warning: None,
            shown: 0,
            highlighting: None,
            after_ranked: Vec::new(),
            search_progress: None,
            applied: Vec::new(),
            request_log: Vec::new(),
            diff: None,
            on_disk: None,
            changed_on_disk: Vec::new(),
            shared_sample: false,
            column_goal: 0,
            search_query: String::new(),
            prompt_query: String::new(),
            prompt_match: None,
            pane_rows: [10; 4],
            numbering: Numbering::Table7,
            recorded: Recorded::default(),
            pinned: None,
        }
    }

    /// The number shown for candidate `id` (see [`State::numbering`]).
    pub fn shown_id(&self, id: CandidateId) -> usize {
        self.numbering.number(id)
    }

    /// How a candidate's number is shown: [`State::shown_id`]; `sent` for the prompt a plugin
    /// sent and `comp` for the one `proxy --compose` sent in its place, which have none.
    pub fn shown_number(&self, id: CandidateId) -> String {
        match id {
            CandidateId::AS_SENT => "sent".into(),
            CandidateId::SENT_BY_KEYHOLE => "comp".into(),
            id => self.shown_id(id).to_string(),
        }
    }

    /// How many picks the online ranker has learnt from.
    pub fn online_picks(&self) -> u64 {
        self.online.values().map(|c| c.picks).sum()
    }

    /// Whether something is in flight (the loop ticks the spinner only then).
    pub fn busy(&self) -> bool {
        self.running()
            || self.starting_backend.is_some()
            || matches!(self.phase, Phase::Opening(_) | Phase::Rereading)
            || self.highlighting.is_some()
            || self.fitting.is_some()
            || self.analysing()
            || self.retrieving()
    }

    /// Whether completions are being asked for.
    pub fn running(&self) -> bool {
        matches!(self.completion, CompletionPhase::Running { .. })
    }

    /// Whether retrieved candidates are still waiting for the backend.
    pub fn retrieving(&self) -> bool {
        self.candidates.iter().any(CandidateRow::building)
    }

    /// Whether rows of the hole shown wait for the search indexes.
    fn waits_for_search(&self) -> bool {
        (self.candidates.iter()).any(|c| c.building() && c.waits_for() == Waiting::SearchIndexes)
    }

    pub fn analysing(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|v| v.analysis == AnalysisPhase::Building)
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

    pub fn focused_candidate(&self) -> Option<&CandidateRow> {
        let visible = self.visible();
        visible
            .get(self.candidate_cursor.min(visible.len().saturating_sub(1)))
            .map(|&i| &self.candidates[i])
    }

    pub fn candidate(&self, id: CandidateId) -> Option<&CandidateRow> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// The user's kept edit of candidate `id`'s prompt at the current hole.
    pub fn kept_edit(&self, id: CandidateId) -> Option<&str> {
        self.edits.get(&self.view.as_ref()?.hole, id)
    }

    /// The prompt in the prompt pane: the explained card's, else the focused candidate's.
    pub fn shown_prompt(&self) -> Option<&Prompt> {
        let card = self
            .explained
            .as_ref()
            .and_then(|_| self.cards.get(self.card_cursor));
        match card {
            Some(card) => card.prompt(self),
            None => self.focused_candidate().map(|c| &c.prompt),
        }
    }

    /// The actions the palette lists for `query` (fuzzy, over key and description), best
    /// first; every one for an empty query. The palette itself is left out.
    pub fn palette_matches(&self, query: &str) -> Vec<(Command, String, String)> {
        let matcher = SkimMatcherV2::default();
        let mut hits: Vec<(i64, usize, (Command, String, String))> = self
            .keymap
            .actions(self.focus)
            .into_iter()
            .filter(|(command, _, _)| *command != Command::Palette)
            .enumerate()
            .filter_map(|(n, (command, keys, desc))| {
                let score = match query.is_empty() {
                    true => 0,
                    false => matcher.fuzzy_match(&format!("{desc} {keys}"), query)?,
                };
                Some((score, n, (command, keys, desc.to_string())))
            })
            .collect();
        hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.into_iter().map(|(_, _, hit)| hit).collect()
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

    fn line_text(&self, line: usize) -> &str {
        self.index
            .as_ref()
            .map_or("", |i| i.files[self.file].line_text(line))
    }

    fn line_chars(&self, line: usize) -> usize {
        self.line_text(line).chars().count()
    }

    fn line_count(&self) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| i.files[self.file].line_count())
    }
}

/// Apply one action; return the effects it asks for.
pub fn update(state: &mut State, action: Action) -> Vec<Effect> {
    let mut effects = react(state, action);
    // Files changed on disk are read as soon as nothing the person does waits for them.
    effects.extend(read_changes(state));
    // Whatever moved the focus, the prompt shown is the one a run would send.
    effects.extend(fit_focused(state));
    effects
}

fn react(state: &mut State, action: Action) -> Vec<Effect> {
    match action {
        // Quitting and suspending work in every mode.
        Action::Command(command @ (Command::Quit | Command::Suspend)) => {
            command_effects(state, command)
        }
        Action::Command(command) if state.mode != Mode::Normal => mode_command(state, command),
        Action::Command(command) => command_effects(state, command),
        // Over an overlay (help, the picker) the wheel scrolls the overlay.
        Action::Scroll { command, .. } if state.mode != Mode::Normal => {
            mode_command(state, command)
        }
        Action::Scroll { pane, command } => move_in(state, pane, command),
        Action::Layout(rows) => {
            state.pane_rows = rows;
            vec![]
        }
        Action::Input(key) => input(state, key),
        Action::Click {
            pane,
            row,
            col,
            width,
            height,
        } => click(state, pane, (row, col), (width, height)),
        Action::Tick(now) => {
            state.tick = state.tick.wrapping_add(1);
            state.now = Some(now);
            vec![]
        }
        Action::Previewed { path, text, at } => {
            // Only while nothing better shows.
            if matches!(state.phase, Phase::Opening(_)) && state.index.is_none() {
                state.lines = highlight::plain(&text);
                state.cursor = at;
                state.opening_file = Some(path);
            }
            vec![]
        }
        Action::Progress(progress) => {
            if matches!(state.phase, Phase::Opening(_)) {
                state.phase = Phase::Opening(progress);
                state.status = progress.to_string();
            }
            vec![]
        }
        Action::Indexed(Ok(indexed)) => {
            let read_again = state.phase == Phase::Rereading;
            let before = (
                state.index.take(),
                state.view.as_ref().map(|v| v.hole.clone()),
            );
            let selected = std::mem::take(&mut state.selected);
            let watch = Effect::Watch {
                index: indexed.index.clone(),
                read_at: indexed.read_at,
            };
            state.phase = Phase::Ready;
            state.index = Some(indexed.index.clone());
            state.search = Some(indexed.search);
            state.backend = Some(indexed.backend);
            state.pinned = indexed.pinned;
            if let Some(warning) = indexed.pin_warning {
                state.warning = Some(warning);
            }
            // The file shown comes from the new index, as it is on disk now (not as opening or
            // a write showed it).
            state.on_disk = None;
            state.opening_file = None;
            state.lines.clear();
            let mut effects = set_hole(state, indexed.hole);
            hold_until_ranked(state, watch);
            // What the person chose and typed at the hole stays with it.
            if let ((Some(old), Some(hole)), true) = (before, read_again) {
                state.selected = selected;
                let new = (state.view.as_ref()).map(|v| (&indexed.index, &v.hole));
                if let Some((index, moved_to)) = new {
                    state.edits.carry(&old, &hole, index, moved_to);
                    carry_applied(&mut state.applied, &old, index);
                }
            }
            // `--recorded N`: its hole opens once the record is read.
            if state.recorded.pending.is_some() {
                effects.push(Effect::ReadRecorded);
            }
            effects
        }
        Action::RecordedRead {
            exchanges,
            unreadable,
        } => recorded_read(state, exchanges, unreadable),
        Action::RecordedLocated { exchange, places } => located(state, *exchange, places),
        // Reading it again after a write failed: the index as it was stays.
        Action::Indexed(Err(e)) if state.phase == Phase::Rereading => {
            state.phase = Phase::Ready;
            state.status = format!("cannot read the repository again: {e}");
            vec![]
        }
        // Nothing to show without a repository: leave, and let the CLI say why.
        Action::Indexed(Err(e)) => {
            state.status = e.to_string();
            state.phase = Phase::Failed(e.to_string());
            vec![Effect::Quit]
        }
        Action::BackendSwitched {
            chosen,
            backend,
            learning,
        } => switch_backend(state, chosen, backend, learning),
        Action::BackendsRead { backends, warnings } => backends_read(state, backends, warnings),
        Action::AnalysisFailed { generation, error } => {
            let Some(view) = state.view.as_mut().filter(|v| v.generation == generation) else {
                return vec![];
            };
            state.status = format!("cannot build the candidates: {error}");
            view.analysis = AnalysisPhase::Failed(error.to_string());
            std::mem::take(&mut state.after_ranked)
        }
        Action::Analysed {
            generation,
            candidates,
            proposals,
            ranker,
        } => {
            let Some(view) = state.view.as_mut().filter(|v| v.generation == generation) else {
                return vec![];
            };
            view.analysis = AnalysisPhase::Built;
            state.candidates = candidates;
            state.proposals = proposals;
            state.candidate_cursor = 0;
            state.prompt_scroll = 0;
            state.prompt_left = 0;
            state.status = analysed_status(state);
            let mut effects = std::mem::take(&mut state.after_ranked);
            // The ranker changed while the candidates were being built.
            if ranker != state.ranker {
                effects.extend(rank(state));
            }
            effects
        }
        Action::SearchProgress(progress) => {
            // Shown while rows wait for the indexes (a count that comes later is of an index
            // read before, whose rows are gone). Windows are tokenized on several threads, so
            // a count may come after a higher one: the higher stays.
            let behind = (state.search_progress)
                .is_some_and(|shown| shown.stage == progress.stage && shown.done > progress.done);
            if state.waits_for_search() && !behind {
                state.search_progress = Some(progress);
                state.status = analysed_status(state);
            }
            vec![]
        }
        Action::Searched {
            generation,
            candidates,
        } => {
            state.search_progress = None;
            if current(state, generation) {
                searched(state, candidates);
            }
            vec![]
        }
        Action::Retrieved {
            generation,
            candidates,
            procc,
        } => {
            if current(state, generation) {
                fill_rows(&mut state.candidates, candidates);
                state.status = match procc.pick {
                    Some(id) => format!(
                        "retrieved candidates built · ProCC (LinUCB) picks {}",
                        state.shown_id(id)
                    ),
                    None => "retrieved candidates built · no ProCC perspective applies".into(),
                };
                state.procc = Some(procc);
            }
            vec![]
        }
        Action::Typed {
            generation,
            candidates,
        } => {
            if current(state, generation) {
                fill_rows(&mut state.candidates, candidates);
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
                    state.prompt_left = 0;
                    state.prompt_left = 0;
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
        Action::CardStarted {
            generation,
            card,
            at,
        } => {
            if let Some(running) = running_card(state, generation, card) {
                running.started = Some(at);
            }
            vec![]
        }
        Action::Fitted {
            generation,
            candidate,
            prompt,
        } => {
            fitted(state, generation, candidate, prompt);
            vec![]
        }
        Action::Streamed {
            generation,
            card,
            text,
        } => {
            if let Some(running) = running_card(state, generation, card) {
                running.text.push_str(&text);
                running.pieces += 1;
            }
            vec![]
        }
        Action::Completed { generation, cards } => {
            if current(state, generation) && state.running() {
                show_cards(state, cards);
                state.completion = CompletionPhase::Idle;
                state.status = "completions ready: Enter or 1..k picks, e explains".into();
            }
            vec![]
        }
        Action::Written { file, result } => written(state, file, result),
        Action::Highlighted { shown, lines } => {
            highlighted(state, shown, lines);
            vec![]
        }
        Action::OnlineLearnt(counts) => {
            state.online = counts;
            vec![]
        }
        Action::ProccTaught { context, pick } => {
            if let Some(procc) = state.procc.as_mut().filter(|p| p.context == context) {
                procc.pick = pick;
            }
            vec![]
        }
        Action::Logged(requests) => {
            state.request_log.extend(requests);
            let extra = state.request_log.len().saturating_sub(REQUEST_LOG_KEEPS);
            state.request_log.drain(..extra);
            vec![]
        }
        Action::Edited(Ok(())) => {
            state.status = "back from the editor: reading the repository again".into();
            // The file shown comes from the new index once it is read.
            state.lines.clear();
            read_again(state)
        }
        Action::Edited(Err(why)) => {
            state.status = why.to_string();
            vec![]
        }
        Action::ChangedOnDisk { index, paths } => changed_on_disk(state, &index, paths),
        Action::Message(text) => {
            state.status = text;
            vec![]
        }
        Action::Pinned(pinned) => {
            pinned_saved(state, pinned);
            vec![]
        }
    }
}

/// The searched candidates' rows are in: the rows still waiting for the search indexes take
/// them, or, where the indexes could not be built, say why, as do those that would have been
/// built from them with the backend's answers.
fn searched(state: &mut State, candidates: Result<Vec<CandidateRow>, JobError>) {
    match candidates {
        Ok(candidates) => fill_rows(&mut state.candidates, candidates),
        Err(error) => {
            let failed =
                |c: &&mut CandidateRow| c.building() && c.waits_for() != Waiting::LanguageServer;
            for row in state.candidates.iter_mut().filter(failed) {
                let why = format!("the search indexes could not be built: {error}");
                row.availability = Availability::NotApplicable(Some(why));
            }
        }
    }
    state.status = analysed_status(state);
}

fn analysed_status(state: &State) -> String {
    let ranked = format!(
        "{} candidates, ranked by {}",
        state.candidates.len(),
        state.ranker.name()
    );
    let building: Vec<&CandidateRow> = state.candidates.iter().filter(|c| c.building()).collect();
    let waiting = |what| building.iter().filter(|c| c.waits_for() == what).count();
    let asking = [
        Some(waiting(Waiting::SearchIndexes))
            .filter(|&n| n > 0)
            .map(|n| match &state.search_progress {
                Some(progress) => {
                    format!("building the search indexes ({progress}) for {n} retrieved candidates")
                }
                None => format!("building the search indexes for {n} retrieved candidates"),
            }),
        Some(waiting(Waiting::Backend))
            .filter(|&n| n > 0)
            .map(|n| format!("asking the backend for {n} retrieved candidates")),
        (waiting(Waiting::LanguageServer) > 0)
            .then(|| "the language server for the typed holes".to_string()),
    ];
    match asking
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" and ")
    {
        asked if asked.is_empty() => ranked,
        asked => format!("{ranked} · {asked}…"),
    }
}

/// Card slot `card` of the running completion of hole `generation`.
fn running_card(state: &mut State, generation: u64, card: usize) -> Option<&mut RunningCard> {
    if !current(state, generation) {
        return None;
    }
    match &mut state.completion {
        CompletionPhase::Running { cards } => cards.get_mut(card),
        CompletionPhase::Idle => None,
    }
}

fn current(state: &State, generation: u64) -> bool {
    state
        .view
        .as_ref()
        .is_some_and(|v| v.generation == generation)
}
