//! The modes and how each reads keys: the keymap's layer for the mode decides first; keys it
//! leaves unbound are typed into a text field or answer a question.

use super::*;
use crate::tui::keymap::Layer;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing the candidate filter.
    Filter,
    /// Typing a line number to go to in the source pane.
    GoTo(String),
    /// Typing what to search for in the source pane (or the prompt pane, when it has the
    /// focus).
    Search(String),
    /// Fuzzy file picker: query and the cursor in its matches.
    Picker {
        query: String,
        cursor: usize,
    },
    /// The command palette: query and the cursor in the actions it matches.
    Palette {
        query: String,
        cursor: usize,
    },
    /// Choosing the completion backend: the cursor in `Setup::backends`.
    Backends {
        cursor: usize,
    },
    /// The recorded-requests picker: the cursor in `Recorded::exchanges`.
    Recorded {
        cursor: usize,
    },
    /// Asking which of several places, as sure as each other, recorded request `exchange`
    /// was made at.
    RecordedPlace {
        cursor: usize,
        places: Vec<crate::proxy::Place>,
        exchange: u64,
    },
    /// Waiting for y before writing the focused completion into the file.
    ConfirmApply,
    /// Editing a prompt in `State::editor`.
    Edit,
    /// The help overlay, scrolled down by this many rows.
    Help {
        scroll: usize,
    },
    /// The request log, newest first, scrolled down by this many rows.
    Requests {
        scroll: usize,
    },
    /// A diff of two prompts (`State::diff`), scrolled down by this many rows.
    Diff {
        scroll: usize,
    },
}

impl Mode {
    /// The keymap layer the mode reads keys from.
    pub fn layer(&self) -> Layer {
        match self {
            Mode::Normal => Layer::Normal,
            Mode::Filter | Mode::GoTo(_) | Mode::Search(_) => Layer::Filter,
            Mode::Picker { .. } | Mode::Palette { .. } => Layer::Picker,
            Mode::Backends { .. } => Layer::Backends,
            Mode::Recorded { .. } | Mode::RecordedPlace { .. } => Layer::Recorded,
            Mode::ConfirmApply => Layer::Confirm,
            Mode::Edit => Layer::Editor,
            Mode::Help { .. } | Mode::Requests { .. } | Mode::Diff { .. } => Layer::Help,
        }
    }
}

/// How a key is read in the current mode: the mode's keymap layer first; in text fields and
/// questions, a key no binding takes is input.
pub fn key_action(state: &State, key: KeyEvent) -> Option<Action> {
    let layer = state.mode.layer();
    match state.keymap.lookup(layer, state.focus, key) {
        Some(command) => Some(Action::Command(command)),
        None if matches!(
            layer,
            Layer::Filter | Layer::Picker | Layer::Editor | Layer::Confirm
        ) =>
        {
            Some(Action::Input(key))
        }
        None => None,
    }
}

/// A command in a mode other than normal: what its layer binds it to do there.
pub(super) fn mode_command(state: &mut State, command: Command) -> Vec<Effect> {
    use Command::*;
    let close = |state: &mut State| {
        state.mode = Mode::Normal;
        vec![]
    };
    match (state.mode.clone(), command) {
        (Mode::Normal, _) => vec![],
        (Mode::Filter, Confirm | Cancel) => close(state),
        (Mode::Filter, Up | Down | PageUp | PageDown) => move_in(state, Pane::Candidates, command),
        (Mode::GoTo(text), Confirm) => {
            state.mode = Mode::Normal;
            go_to_line(state, &text)
        }
        (Mode::Search(text), Confirm) if state.focus == Pane::Prompt => {
            state.mode = Mode::Normal;
            state.prompt_query = text;
            state.prompt_match = None;
            find_in_prompt(state, true)
        }
        (Mode::Search(text), Confirm) => {
            state.mode = Mode::Normal;
            state.search_query = text;
            find(state, true)
        }
        (Mode::GoTo(_) | Mode::Search(_), Cancel) => close(state),
        (Mode::Picker { query, cursor }, Up | Down | PageUp | PageDown) => {
            let matches = state.picker_matches(&query).len();
            let cursor = clamp_add(cursor, step(command, PICKER_PAGE), matches);
            state.mode = Mode::Picker { query, cursor };
            vec![]
        }
        (Mode::Picker { query, cursor }, Confirm) => {
            state.mode = Mode::Normal;
            let Some(&file) = state.picker_matches(&query).get(cursor) else {
                return vec![];
            };
            state.focus = Pane::Source;
            show_file(state, file)
        }
        (Mode::Palette { query, cursor }, Up | Down | PageUp | PageDown) => {
            let matches = state.palette_matches(&query).len();
            let cursor = clamp_add(cursor, step(command, PICKER_PAGE), matches);
            state.mode = Mode::Palette { query, cursor };
            vec![]
        }
        (Mode::Palette { query, cursor }, Confirm) => {
            state.mode = Mode::Normal;
            match state.palette_matches(&query).get(cursor) {
                Some(&(chosen, _, _)) => command_effects(state, chosen),
                None => vec![],
            }
        }
        (Mode::Picker { .. } | Mode::Palette { .. } | Mode::Backends { .. }, Cancel) => {
            close(state)
        }
        (Mode::Backends { cursor }, Up | Down) => {
            let cursor = clamp_add(cursor, step(command, 1), state.setup.backends.len());
            state.mode = Mode::Backends { cursor };
            vec![]
        }
        (Mode::Backends { cursor }, Confirm) => choose_backend(state, cursor),
        (Mode::Recorded { .. } | Mode::RecordedPlace { .. }, _) => picker_command(state, command),
        (Mode::ConfirmApply, Confirm) => {
            state.mode = Mode::Normal;
            apply(state)
        }
        (Mode::ConfirmApply, Cancel) => {
            state.mode = Mode::Normal;
            state.status = "not applied".into();
            vec![]
        }
        (Mode::Edit, Confirm | Cancel) => close_editor(state, command == Confirm),
        (Mode::Help { scroll }, Up | Down | PageUp | PageDown | Top | Bottom) => {
            let scroll = clamp_add(scroll, step(command, HELP_PAGE), usize::MAX / 4);
            state.mode = Mode::Help { scroll };
            vec![]
        }
        (Mode::Help { .. }, Cancel | Help) => close(state),
        (Mode::Requests { scroll }, Up | Down | PageUp | PageDown | Top | Bottom) => {
            let rows = state.request_log.len();
            let scroll = clamp_add(scroll, step(command, HELP_PAGE), rows);
            state.mode = Mode::Requests { scroll };
            vec![]
        }
        (Mode::Requests { .. }, Cancel | Help | RequestLog) => close(state),
        (Mode::Diff { scroll }, Up | Down | PageUp | PageDown | Top | Bottom) => {
            let rows = state.diff.as_ref().map_or(0, |d| d.lines.len());
            let scroll = clamp_add(scroll, step(command, HELP_PAGE), rows);
            state.mode = Mode::Diff { scroll };
            vec![]
        }
        (Mode::Diff { .. }, Cancel | Help | DiffPrompts) => close(state),
        _ => vec![],
    }
}

/// Rows the picker and help move by on PageUp/PageDown.
const PICKER_PAGE: isize = 10;
const HELP_PAGE: isize = 10;

/// How far a movement command moves in a list paged by `page` rows.
pub(super) fn step(command: Command, page: isize) -> isize {
    match command {
        Command::Up => -1,
        Command::Down => 1,
        Command::PageUp => -page,
        Command::PageDown => page,
        Command::Top => isize::MIN / 2,
        Command::Bottom => isize::MAX / 2,
        _ => 0,
    }
}

/// A key no binding takes, in a text field (typed) or a question (answers no).
pub(super) fn input(state: &mut State, key: KeyEvent) -> Vec<Effect> {
    match &mut state.mode {
        Mode::Filter => {
            edit_text(&mut state.filter, key.code);
            state.candidate_cursor = 0;
        }
        Mode::GoTo(text) | Mode::Search(text) => edit_text(text, key.code),
        Mode::Picker { query, cursor } | Mode::Palette { query, cursor } => {
            edit_text(query, key.code);
            *cursor = 0;
        }
        Mode::Edit => {
            if let Some(editor) = &mut state.editor {
                editor.input(key);
            }
        }
        Mode::ConfirmApply => return mode_command(state, Command::Cancel),
        Mode::Normal
        | Mode::Backends { .. }
        | Mode::Recorded { .. }
        | Mode::RecordedPlace { .. }
        | Mode::Help { .. }
        | Mode::Requests { .. }
        | Mode::Diff { .. } => {}
    }
    vec![]
}

pub(super) fn edit_text(text: &mut String, code: KeyCode) {
    match code {
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char(c) => text.push(c),
        _ => {}
    }
}
