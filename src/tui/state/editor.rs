//! Editing a candidate's prompt in place, with a live token count.

use std::collections::HashMap;

use super::*;

/// A candidate's prompt being edited, with its live token count.
pub struct Editor {
    pub textarea: TextArea<'static>,
    pub candidate: CandidateId,
    pub budget: usize,
    pub tokenizer: &'static dyn Tokenizer,
    pub tokens: usize,
    /// The composed prompt, to tell an edit from no change.
    original: String,
}

/// Prompts the user edited, per hole and candidate, kept until discarded: the prompt pane
/// shows them and runs send them instead of the composed prompt.
#[derive(Default)]
pub struct KeptEdits(HashMap<(FileId, usize, CandidateId), String>);

impl KeptEdits {
    pub fn get(&self, hole: &Hole, id: CandidateId) -> Option<&str> {
        self.0
            .get(&(hole.file, hole.offset, id))
            .map(String::as_str)
    }

    fn keep(&mut self, hole: &Hole, id: CandidateId, text: String) {
        self.0.insert((hole.file, hole.offset, id), text);
    }

    fn discard(&mut self, hole: &Hole, id: CandidateId) -> bool {
        self.0.remove(&(hole.file, hole.offset, id)).is_some()
    }

    /// The edits made on `old`, on `new`, the repository read again: those of the hole shown
    /// (`hole`, now `moved_to`) go with it, the others keep their place in their file, which
    /// files added or removed may have renumbered. A file gone takes its edits with it.
    pub(super) fn carry(&mut self, old: &RepoIndex, hole: &Hole, new: &RepoIndex, moved_to: &Hole) {
        self.0 = std::mem::take(&mut self.0)
            .into_iter()
            .filter_map(|((file, offset, id), text)| {
                if (file, offset) == (hole.file, hole.offset) {
                    return Some(((moved_to.file, moved_to.offset, id), text));
                }
                let file = new.file_id(&old.files.get(file)?.path)?;
                Some(((file, offset, id), text))
            })
            .collect();
    }
}

/// The tokenizer `prompt` was counted in.
pub fn prompt_tokenizer(prompt: &Prompt) -> &'static dyn Tokenizer {
    TokenizerKind::ALL
        .into_iter()
        .find(|k| k.name() == prompt.tokenizer)
        .unwrap_or(TokenizerKind::Code)
        .tokenizer()
}

impl Editor {
    /// The editor of `candidate`'s prompt, starting from the user's kept edit where there is one.
    fn new(candidate: &CandidateRow, kept: Option<&str>, theme: &Theme) -> Editor {
        let prompt = &candidate.prompt;
        let tokenizer = prompt_tokenizer(prompt);
        let original = prompt.text();
        let text = kept.map_or_else(|| original.clone(), String::from);
        let mut textarea = TextArea::new(text.split('\n').map(String::from).collect());
        textarea.set_style(Style::new().fg(theme.text));
        textarea.set_cursor_line_style(Style::new().bg(theme.selected));
        Editor {
            textarea,
            candidate: candidate.id,
            budget: prompt.budget,
            tokenizer,
            tokens: tokenizer.count(&text),
            original,
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
        .map(|c| Editor::new(c, state.kept_edit(c.id), &state.theme))
    else {
        return vec![];
    };
    state.status = format!("editing the prompt of candidate {}", editor.candidate);
    state.editor = Some(editor);
    state.mode = Mode::Edit;
    state.focus = Pane::Prompt;
    vec![]
}

/// Close the editor, keeping the edit for the candidate until it is discarded (`d`): `submit`
/// also completes with it (Ctrl-S by default). An edit back to the composed prompt keeps
/// nothing.
pub(super) fn close_editor(state: &mut State, submit: bool) -> Vec<Effect> {
    state.mode = Mode::Normal;
    let Some(editor) = state.editor.take() else {
        return vec![];
    };
    let id = editor.candidate;
    let shown = state.shown_id(id);
    if let Some(hole) = state.view.as_ref().map(|v| v.hole.clone()) {
        if editor.text() == editor.original {
            state.edits.discard(&hole, id);
        } else {
            state.edits.keep(&hole, id, editor.text());
        }
    }
    if !submit {
        state.status = match state.kept_edit(id) {
            Some(_) => format!(
                "edit of candidate {shown} kept: runs send it; i edits it again, d discards it"
            ),
            None => format!("candidate {shown}: its prompt as composed"),
        };
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
        edited: true,
    };
    let effects = start_completion(state, vec![prompt], true);
    if !effects.is_empty() {
        state.status = "completing with the edited prompt… Esc cancels".into();
    }
    effects
}

/// `d`: drop the focused candidate's kept edit; its prompt is the composed one again.
pub(super) fn discard_edit(state: &mut State) -> Vec<Effect> {
    let (Some(c), Some(view)) = (state.focused_candidate(), &state.view) else {
        return vec![];
    };
    let (id, hole) = (c.id, view.hole.clone());
    let shown = state.shown_id(id);
    state.status = if state.edits.discard(&hole, id) {
        format!("edit of candidate {shown} discarded: its prompt as composed")
    } else {
        format!("candidate {shown} has no edit to discard")
    };
    vec![]
}
