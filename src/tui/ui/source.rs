//! The source pane: the current file, highlighted, with the hole and its target marked.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::layout::{first_column, scroll_top};
use crate::tui::state::State;

pub fn title(state: &State) -> String {
    // While opening, the hole's file as read from disk.
    let path = match &state.index {
        Some(index) => Some(index.files[state.file].path.as_str()),
        None => state.opening_file.as_deref(),
    };
    match path {
        Some(path) => {
            let name = path.rsplit('/').next().unwrap_or(path);
            format!("{name}  {}:{}", state.cursor.0 + 1, state.cursor.1 + 1)
        }
        None => "source".into(),
    }
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let theme = &state.theme;
    if state.index.is_none() && state.lines.is_empty() {
        let text = format!("{} indexing the repository…", super::spinner(state));
        frame.render_widget(
            Paragraph::new(text).style(Style::new().fg(theme.muted)),
            area,
        );
        return;
    }
    // (line, column)
    let hole = match &state.index {
        Some(_) => (state.view.as_ref())
            .map(|v| &v.hole)
            .filter(|h| h.file == state.file)
            .map(|h| (h.line, h.column)),
        // Opening: the hole's file as read from disk, the hole where its position puts it.
        None => Some(state.cursor),
    };
    let top = scroll_top(state.cursor.0, area.height as usize);
    let left = first_column(state.cursor.1, area.width);
    let lines: Vec<Line> = state
        .lines
        .iter()
        .enumerate()
        .skip(top)
        .take(area.height as usize)
        .map(|(n, runs)| {
            let hole_col = hole.filter(|h| h.0 == n).map(|h| h.1);
            let cursor_col = (state.cursor.0 == n).then_some(state.cursor.1);
            let number = if hole_col.is_some() {
                theme.hole
            } else {
                theme.muted
            };
            let mut spans = vec![Span::styled(
                format!("{:>5} ", n + 1),
                Style::new().fg(number),
            )];
            let cells = marked(state, runs, hole_col, cursor_col);
            spans.extend(group(cells.into_iter().skip(left)));
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// The line's cells, with the target (from the hole on) faded, the hole cell marked and the
/// cursor cell shown. Per character, so marks may fall inside a highlighted run.
fn marked(
    state: &State,
    runs: &[(Style, String)],
    hole: Option<usize>,
    cursor: Option<usize>,
) -> Vec<(Style, char)> {
    let theme = &state.theme;
    let mut cells: Vec<(Style, char)> = runs
        .iter()
        .flat_map(|(style, text)| text.chars().map(move |c| (*style, c)))
        .collect();
    // Marks may sit one past the end of the line.
    let end = hole.max(cursor).map_or(0, |c| c + 1);
    while cells.len() < end {
        cells.push((Style::new(), ' '));
    }
    for (i, (style, _)) in cells.iter_mut().enumerate() {
        if hole.is_some_and(|h| i >= h) {
            *style = Style::new().fg(theme.target).add_modifier(Modifier::ITALIC);
        }
        if hole == Some(i) {
            *style = style.bg(theme.hole).fg(theme.background);
        }
        if cursor == Some(i) && cursor != hole {
            *style = style.bg(theme.cursor_bg).add_modifier(Modifier::UNDERLINED);
        }
    }
    cells
}

/// Consecutive cells of one style become one span.
pub fn group(cells: impl IntoIterator<Item = (Style, char)>) -> Vec<Span<'static>> {
    let mut spans: Vec<Span> = Vec::new();
    for (style, c) in cells {
        match spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push(c),
            _ => spans.push(Span::styled(c.to_string(), style)),
        }
    }
    spans
}
