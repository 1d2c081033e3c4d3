//! Editing a candidate's prompt in place, with a live token count.

use super::*;

/// A candidate's prompt being edited, with its live token count.
pub struct Editor {
    pub textarea: TextArea<'static>,
    pub candidate: usize,
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

pub(super) fn open_editor(state: &mut State) -> Vec<Effect> {
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

/// Ctrl-S in the editor: run the edited prompt.
pub const SUBMIT_EDIT: char = 's';

/// Esc leaves the prompt as it was, Ctrl-S completes with the edit, other keys edit.
pub(super) fn edit_input(state: &mut State, key: KeyEvent) -> Vec<Effect> {
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
