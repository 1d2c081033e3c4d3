//! Keys in text fields and questions, and how a key is read in each mode.

use super::*;

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

/// Keys typed into the filter, the picker or the apply question.
pub(super) fn input(state: &mut State, key: KeyEvent) -> Vec<Effect> {
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

pub(super) fn edit_text(text: &mut String, code: KeyCode) {
    match code {
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char(c) => text.push(c),
        _ => {}
    }
}

/// How a key is read in the current mode: text fields take raw keys, else the keymap decides.
pub fn key_action(state: &State, key: KeyEvent) -> Option<Action> {
    match state.mode {
        Mode::Normal => state.keymap.lookup(key).map(Action::Command),
        _ => Some(Action::Input(key)),
    }
}
