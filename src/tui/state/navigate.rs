//! Moving around: the hole, the file shown, cursors in each pane, the file picker, clicks.

use super::*;

/// Columns the prompt scrolls sideways per key.
const SIDEWAYS: isize = 8;

/// Move the hole: show its file, recompute the candidates, drop stale results.
pub(super) fn set_hole(state: &mut State, hole: Hole) -> Vec<Effect> {
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

pub(super) fn show_file(state: &mut State, file: FileId) {
    let Some(index) = &state.index else { return };
    let source = &index.files[file];
    state.lines = highlight::file(&source.path, &source.text, &state.theme.code);
    state.file = file;
    state.cursor = (0, 0);
}

pub(super) fn clamp_add(value: usize, delta: isize, len: usize) -> usize {
    (value as isize)
        .saturating_add(delta)
        .clamp(0, len.saturating_sub(1) as isize) as usize
}

pub(super) fn move_vertical(state: &mut State, delta: isize) -> Vec<Effect> {
    match state.focus {
        Pane::Source => {
            let line = clamp_add(state.cursor.0, delta, state.line_count());
            state.cursor = (line, state.cursor.1.min(state.line_chars(line)));
        }
        Pane::Candidates => {
            let len = state.visible().len();
            state.candidate_cursor = clamp_add(state.candidate_cursor, delta, len);
            state.prompt_scroll = 0;
            state.prompt_left = 0;
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

pub(super) fn move_horizontal(state: &mut State, delta: isize) -> Vec<Effect> {
    match state.focus {
        Pane::Source => {
            let chars = state.line_chars(state.cursor.0);
            state.cursor.1 = clamp_add(state.cursor.1, delta, chars + 1);
        }
        Pane::Completions => {
            state.card_cursor = clamp_add(state.card_cursor, delta, state.cards.len());
            state.explained = None;
        }
        Pane::Prompt if !state.prompt_wrap => {
            let step = delta * SIDEWAYS;
            state.prompt_left = (state.prompt_left as isize + step).max(0) as usize;
        }
        Pane::Candidates | Pane::Prompt => {}
    }
    vec![]
}

pub(super) fn confirm(state: &mut State) -> Vec<Effect> {
    match state.focus {
        Pane::Source => hole_at_cursor(state),
        Pane::Candidates | Pane::Prompt => run(state),
        Pane::Completions => pick(state, state.card_cursor),
    }
}

pub(super) fn hole_at_cursor(state: &mut State) -> Vec<Effect> {
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

pub(super) fn picker_input(
    state: &mut State,
    mut query: String,
    cursor: usize,
    code: KeyCode,
) -> Vec<Effect> {
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

pub(super) fn click(
    state: &mut State,
    pane: Pane,
    at: (u16, u16),
    size: (u16, u16),
) -> Vec<Effect> {
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
