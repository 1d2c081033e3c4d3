//! Editing a candidate's prompt in place, with a live token count.

use super::*;

/// A candidate's prompt being edited, with its live token count.
pub struct Editor {
    pub textarea: TextArea<'static>,
    pub candidate: CandidateId,
    pub budget: usize,
    pub tokenizer: &'static dyn Tokenizer,
    pub tokens: usize,
}

impl Editor {
    fn new(candidate: &CandidateRow, theme: &Theme) -> Editor {
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

    pub(super) fn input(&mut self, key: KeyEvent) {
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

/// Close the editor: `submit` completes with the edit (Ctrl-S by default), else it is
/// discarded and the prompt stays as it was.
pub(super) fn close_editor(state: &mut State, submit: bool) -> Vec<Effect> {
    state.mode = Mode::Normal;
    let Some(editor) = state.editor.take() else {
        return vec![];
    };
    if !submit {
        state.status = "edit discarded".into();
        return vec![];
    }
    // The edit replaces the prompt; the text after the hole goes with it as it was.
    let suffix = state
        .candidate(editor.candidate)
        .and_then(|c| c.prompt.suffix.as_ref())
        .map(|s| s.text.clone());
    let prompt = RunPrompt {
        candidate: editor.candidate,
        same: Vec::new(),
        text: editor.text(),
        fitted: None,
        suffix,
    };
    let effects = start_completion(state, vec![prompt], true);
    if !effects.is_empty() {
        state.status = "completing with the edited prompt… Esc cancels".into();
    }
    effects
}
