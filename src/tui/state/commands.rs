//! What a command does in the normal mode.

use super::*;

pub(super) fn command_effects(state: &mut State, command: Command) -> Vec<Effect> {
    match command {
        Command::Quit => vec![Effect::CancelCompletions, Effect::Quit],
        Command::Help => {
            state.mode = Mode::Help { scroll: 0 };
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
        Command::Up
        | Command::Down
        | Command::PageUp
        | Command::PageDown
        | Command::Top
        | Command::Bottom => move_in(state, state.focus, command),
        Command::LineStart => line_start(state),
        Command::LineEnd => line_end(state),
        Command::GoToLine => {
            state.mode = Mode::GoTo(String::new());
            state.focus = Pane::Source;
            vec![]
        }
        Command::Search => {
            state.mode = Mode::Search(String::new());
            // The prompt pane searches the prompt; everywhere else `/` searches the file.
            if state.focus != Pane::Prompt {
                state.focus = Pane::Source;
            }
            vec![]
        }
        Command::NextMatch if state.focus == Pane::Prompt => find_in_prompt(state, true),
        Command::PrevMatch if state.focus == Pane::Prompt => find_in_prompt(state, false),
        Command::NextMatch => find(state, true),
        Command::PrevMatch => find(state, false),
        Command::Left => move_horizontal(state, -1),
        Command::Right => move_horizontal(state, 1),
        Command::Confirm => confirm(state),
        Command::Select => select(state),
        Command::Run => run(state, false),
        Command::Cancel => cancel(state),
        Command::Pick1 => pick(state, 0),
        Command::Pick2 => pick(state, 1),
        Command::Pick3 => pick(state, 2),
        Command::Pick4 => pick(state, 3),
        Command::Pick5 => pick(state, 4),
        Command::Explain => explain_card(state),
        Command::Apply => ask_apply(state),
        Command::Undo => undo(state),
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
        Command::CopyPrompt => copy_prompt(state),
        Command::CopyCompletion => copy_completion(state),
        Command::OpenInEditor => open_in_editor(state),
        Command::Palette => {
            state.mode = Mode::Palette {
                query: String::new(),
                cursor: 0,
            };
            vec![]
        }
        Command::DiffPrompts => diff_prompts(state),
        Command::DiscardEdit => discard_edit(state),
        Command::Pin => pin_focused(state),
        Command::RequestLog => {
            state.mode = Mode::Requests { scroll: 0 };
            vec![]
        }
        Command::FocusSource => focus(state, Pane::Source),
        Command::FocusCandidates => focus(state, Pane::Candidates),
        Command::FocusPrompt => focus(state, Pane::Prompt),
        Command::FocusCompletions => focus(state, Pane::Completions),
        Command::SavePrompt => save_prompt(state),
        Command::Wrap => {
            state.prompt_wrap = !state.prompt_wrap;
            state.prompt_left = 0;
            vec![]
        }
        Command::CycleRanker => cycle_ranker(state),
        Command::Recorded => open_picker(state),
        Command::Backends => {
            state.mode = Mode::Backends {
                cursor: state.setup.backend,
            };
            // A server that moved is reached without a restart: the picker shows the file as
            // it is now once it is read.
            vec![Effect::ReadBackends]
        }
    }
}

/// Toggle the focused candidate in the selection; one still being built cannot be chosen yet.
pub(super) fn select(state: &mut State) -> Vec<Effect> {
    let Some(focused) = state.focused_candidate() else {
        return vec![];
    };
    let id = focused.id;
    if !focused.applicable() && !state.selected.contains(&id) {
        state.status = not_completed(state, focused);
    } else if !state.selected.remove(&id) {
        state.selected.insert(id);
    }
    vec![]
}

pub(super) fn cycle_ranker(state: &mut State) -> Vec<Effect> {
    state.ranker = next_ranker(state.ranker);
    state.status = format!("ranking with {}…", state.ranker.name());
    rank(state)
}

/// Re-rank the candidates shown with the chosen ranker (candidates still being built get it
/// when they arrive).
pub(super) fn rank(state: &State) -> Vec<Effect> {
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

pub(super) fn set_k(state: &mut State, k: usize) -> Vec<Effect> {
    state.k = k;
    state.status = format!("k = {k}");
    vec![]
}

fn focus(state: &mut State, pane: Pane) -> Vec<Effect> {
    state.focus = pane;
    state.zoomed = false;
    vec![]
}

/// `E`: the file at the hole, at the hole's line (else the file shown at the cursor), in the
/// user's editor; the repository is read again when it returns.
pub(super) fn open_in_editor(state: &mut State) -> Vec<Effect> {
    let Some(index) = &state.index else {
        return vec![];
    };
    if state.shared_sample {
        state.status = "the bundled sample is shared by every run: open a repository of yours \
                        to edit it"
            .into();
        return vec![];
    }
    let (file, line) = match &state.view {
        Some(view) if view.hole.file == state.file => (view.hole.file, view.hole.line),
        _ => (state.file, state.cursor.0),
    };
    vec![Effect::OpenInEditor {
        path: index.root.join(&index.files[file].path),
        line: line + 1,
    }]
}
