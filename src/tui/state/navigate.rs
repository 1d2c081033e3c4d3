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
    // Within the file the highlighting is unchanged.
    if state.lines.is_empty() || hole.file != state.file {
        for highlight in show_file(state, hole.file) {
            hold_until_ranked(state, highlight);
        }
    }
    state.cursor = (hole.line, hole.column);
    state.view = Some(HoleView {
        hole: hole.clone(),
        generation,
        analysis: AnalysisPhase::Building,
    });
    state.candidates.clear();
    state.search_progress = None;
    state.procc = None;
    state.selected.clear();
    state.cards.clear();
    state.explained = None;
    state.completion = CompletionPhase::Idle;
    state.status = format!("hole {} · ranking candidates…", hole.display(&index));
    // A recorded request's prompt belongs to its hole alone.
    let recorded = state.recorded.open.take().filter(|r| r.at(&hole));
    state.recorded.open = recorded.clone();
    let analyse = Effect::Analyse {
        index,
        search,
        backend,
        hole,
        generation,
        ranker: state.ranker,
        tokenizer: state.setup.tokenizer(),
        budget: state.setup.budget,
        recorded,
    };
    vec![Effect::CancelCompletions, analyse]
}

/// Run `effect` once the hole's ranked candidates show (see [`State::after_ranked`]), in
/// place of one of its kind held before (a file shown since, or an index read again).
pub(super) fn hold_until_ranked(state: &mut State, effect: Effect) {
    let kind = std::mem::discriminant(&effect);
    state
        .after_ranked
        .retain(|held| std::mem::discriminant(held) != kind);
    state.after_ranked.push(effect);
}

/// Show `file` in the source pane: its plain text at once, highlighted when the driver has
/// run syntect over it (a large file takes long enough to stall a key press).
pub(super) fn show_file(state: &mut State, file: FileId) -> Vec<Effect> {
    let Some(index) = &state.index else {
        return vec![];
    };
    let source = &index.files[file];
    // A file written since the index read it shows as it is on disk now.
    let text = match &state.on_disk {
        Some((written, text)) if *written == file => text,
        _ => &*source.text,
    };
    state.lines = highlight::plain(text);
    // Highlighting held for a file shown before is no longer wanted.
    (state.after_ranked).retain(|held| !matches!(held, Effect::Highlight { .. }));
    let effect = Effect::Highlight {
        shown: state.shown + 1,
        path: source.path.clone(),
        text: text.to_string(),
        theme: state.theme.code.clone(),
    };
    state.shown += 1;
    state.highlighting = Some(state.shown);
    state.file = file;
    state.cursor = (0, 0);
    vec![effect]
}

/// Highlighted lines arrived; they show if what they are for still shows.
pub(super) fn highlighted(state: &mut State, shown: u64, lines: Vec<StyledLine>) {
    if state.highlighting == Some(shown) {
        state.lines = lines;
        state.highlighting = None;
    }
}

pub(super) fn clamp_add(value: usize, delta: isize, len: usize) -> usize {
    (value as isize)
        .saturating_add(delta)
        .clamp(0, len.saturating_sub(1) as isize) as usize
}

/// Rows a page moves in `pane`: its height as last drawn, less one row kept for context.
pub(super) fn page(state: &State, pane: Pane) -> isize {
    let rows = state.pane_rows[Pane::ALL.iter().position(|&p| p == pane).unwrap_or(0)];
    (rows as isize - 1).max(1)
}

/// Move up or down in `pane` by `command` (a line, a page, to either end).
pub(super) fn move_in(state: &mut State, pane: Pane, command: Command) -> Vec<Effect> {
    let delta = step(command, page(state, pane));
    match pane {
        Pane::Source => {
            let line = clamp_add(state.cursor.0, delta, state.line_count());
            // The column the cursor was put in, where the line is long enough.
            state.cursor = (line, state.column_goal.min(state.line_chars(line)));
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
            set_column(state, clamp_add(state.cursor.1, delta, chars + 1));
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

/// Put the source cursor in `column` of its line, and remember it for moves up and down.
fn set_column(state: &mut State, column: usize) {
    state.cursor.1 = column;
    state.column_goal = column;
}

/// Home and End in the source pane: the line's first non-blank character (its very first
/// when already there) or one past its end.
pub(super) fn line_start(state: &mut State) -> Vec<Effect> {
    let indent = state
        .line_text(state.cursor.0)
        .chars()
        .take_while(|c| c.is_whitespace())
        .count();
    let column = if state.cursor.1 == indent { 0 } else { indent };
    set_column(state, column);
    vec![]
}

pub(super) fn line_end(state: &mut State) -> Vec<Effect> {
    set_column(state, state.line_chars(state.cursor.0));
    vec![]
}

/// `:` then a 1-based line number: the source cursor goes there (the last line for a larger
/// number).
pub(super) fn go_to_line(state: &mut State, text: &str) -> Vec<Effect> {
    match text.trim().parse::<usize>() {
        Ok(line) if line > 0 && state.line_count() > 0 => {
            let line = line.min(state.line_count()) - 1;
            state.cursor = (line, state.column_goal.min(state.line_chars(line)));
            state.focus = Pane::Source;
        }
        _ => state.status = format!("'{text}' is not a line number"),
    }
    vec![]
}

/// The next (or previous) match of the search in the file shown, from the cursor on,
/// wrapping at the ends; case matters only when the query has a capital.
pub(super) fn find(state: &mut State, forward: bool) -> Vec<Effect> {
    let query = state.search_query.clone();
    if query.is_empty() {
        state.status = "nothing to search for: / searches".into();
        return vec![];
    }
    let fold = !query.chars().any(char::is_uppercase);
    let norm = |s: &str| {
        if fold {
            s.to_lowercase()
        } else {
            s.to_string()
        }
    };
    let needle = norm(&query);
    let lines = state.line_count();
    let (line, column) = state.cursor;
    // Every line once, the cursor's line last again for a match before the cursor.
    for step in 0..=lines {
        let at = match forward {
            true => (line + step) % lines.max(1),
            false => (line + lines * 2 - step) % lines.max(1),
        };
        let text = norm(state.line_text(at));
        let columns: Vec<usize> = text
            .match_indices(&needle)
            .map(|(byte, _)| text[..byte].chars().count())
            .collect();
        let found = match (forward, step) {
            (true, 0) => columns.into_iter().find(|&c| c > column),
            (false, 0) => columns.into_iter().rev().find(|&c| c < column),
            (true, s) if s == lines => columns.into_iter().find(|&c| c <= column),
            (false, s) if s == lines => columns.into_iter().rev().find(|&c| c >= column),
            (true, _) => columns.into_iter().next(),
            (false, _) => columns.into_iter().next_back(),
        };
        if let Some(found) = found {
            state.cursor = (at, found);
            state.column_goal = found;
            state.focus = Pane::Source;
            state.status = format!("/{query}: line {}", at + 1);
            return vec![];
        }
    }
    state.status = format!("/{query}: not found in this file");
    vec![]
}

pub(super) fn confirm(state: &mut State) -> Vec<Effect> {
    match state.focus {
        Pane::Source => hole_at_cursor(state),
        Pane::Candidates | Pane::Prompt => run(state, true),
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
                let left = layout::first_column(state.cursor.1, width);
                let col = left + col.saturating_sub(layout::GUTTER) as usize;
                state.cursor = (line, col.min(state.line_chars(line)));
                state.column_goal = state.cursor.1;
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

/// Where `query` occurs in `text` (byte ranges); case matters only when the query has a
/// capital, as in the source pane.
pub fn matches(text: &str, query: &str) -> Vec<std::ops::Range<usize>> {
    if query.is_empty() {
        return Vec::new();
    }
    if query.chars().any(char::is_uppercase) {
        return text
            .match_indices(query)
            .map(|(at, m)| at..at + m.len())
            .collect();
    }
    // Folding ASCII keeps byte offsets; other text is searched as it is.
    let (folded, needle) = (text.to_ascii_lowercase(), query.to_ascii_lowercase());
    folded
        .match_indices(&needle)
        .map(|(at, m)| at..at + m.len())
        .collect()
}

/// The next (or previous) match of the prompt search in the prompt shown, wrapping; the pane
/// scrolls to it and the status counts ("match 2 of 7").
pub(super) fn find_in_prompt(state: &mut State, forward: bool) -> Vec<Effect> {
    let query = state.prompt_query.clone();
    let Some(text) = state.shown_prompt().map(Prompt::text) else {
        return vec![];
    };
    if query.is_empty() {
        state.status = "nothing to search for: / searches the prompt".into();
        return vec![];
    }
    let found = matches(&text, &query);
    if found.is_empty() {
        state.prompt_match = None;
        state.status = format!("/{query}: not in this prompt");
        return vec![];
    }
    let n = found.len();
    let next = match (state.prompt_match, forward) {
        (None, true) => 0,
        (None, false) => n - 1,
        (Some(i), true) => (i + 1) % n,
        (Some(i), false) => (i + n - 1) % n,
    };
    state.prompt_match = Some(next);
    state.prompt_scroll = text[..found[next].start]
        .matches('\n')
        .count()
        .saturating_sub(2);
    state.prompt_left = 0;
    state.status = format!("/{query}: match {} of {n} in the prompt", next + 1);
    vec![]
}
