//! Overlays: the help table (from the live keymap), the fuzzy file picker and the backend
//! picker.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::tui::state::State;

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height)])
        .flex(Flex::Center)
        .areas(area);
    let [rect] = Layout::horizontal([Constraint::Length(width)])
        .flex(Flex::Center)
        .areas(row);
    rect
}

/// A cleared, bordered box; returns its inside.
fn panel(frame: &mut Frame, state: &State, area: Rect, title: &str) -> Rect {
    let theme = &state.theme;
    let block = Block::bordered()
        .border_style(Style::new().fg(theme.border_focus))
        .style(Style::new().bg(theme.background).fg(theme.text))
        .title(Span::styled(
            format!(" {title} "),
            Style::new().fg(theme.title),
        ));
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    inner
}

/// Every binding of the active keymap, in as many columns as it needs.
pub fn help(frame: &mut Frame, state: &State) {
    let theme = &state.theme;
    let key = Style::new().fg(theme.explain).add_modifier(Modifier::BOLD);
    let rows: Vec<Line> = state
        .keymap
        .bindings
        .iter()
        .map(|b| {
            Line::from(vec![
                Span::styled(format!("{:>8}  ", b.on), key),
                Span::raw(b.desc.clone()),
            ])
        })
        .collect();
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(8),
        area.height.saturating_sub(4),
    );
    let inner = panel(frame, state, rect, "keys · any key closes");
    let per_column = (inner.height as usize).max(1);
    let columns = rows.len().div_ceil(per_column).max(1);
    let areas = Layout::horizontal(vec![Constraint::Fill(1); columns]).split(inner);
    for (chunk, &column) in rows.chunks(per_column).zip(areas.iter()) {
        frame.render_widget(Paragraph::new(chunk.to_vec()), column);
    }
}

pub fn picker(frame: &mut Frame, state: &State, query: &str, cursor: usize) {
    let Some(index) = &state.index else { return };
    let theme = &state.theme;
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(20).min(90),
        area.height.saturating_sub(6),
    );
    let inner = panel(frame, state, rect, "open a file");
    let mut lines = vec![Line::styled(
        format!("> {query}▏"),
        Style::new().fg(theme.explain),
    )];
    let rows = inner.height.saturating_sub(1) as usize;
    let top = super::scroll_top(cursor, rows);
    let matches = state.picker_matches(query);
    for (n, &file) in matches.iter().enumerate().skip(top).take(rows) {
        let style = if n == cursor {
            Style::new().bg(theme.selected)
        } else {
            Style::new()
        };
        lines.push(Line::styled(index.files[file].path.clone(), style));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The configured backends; the current one is marked. Base URLs are left out: they can hold
/// credentials, and the name says which server it is.
pub fn backends(frame: &mut Frame, state: &State, cursor: usize) {
    let theme = &state.theme;
    let area = frame.area();
    let height = (state.setup.backends.len() as u16 + 4).min(area.height);
    let rect = centered(area, area.width.saturating_sub(20).min(90), height);
    let inner = panel(frame, state, rect, "complete with");
    let mut lines = vec![Line::styled(
        crate::tui::state::backend_summary(state),
        Style::new().fg(theme.muted),
    )];
    let rows = inner.height.saturating_sub(1) as usize;
    let top = super::scroll_top(cursor, rows);
    for (n, entry) in state.setup.backends.iter().enumerate().skip(top).take(rows) {
        let current = if n == state.setup.backend { "●" } else { " " };
        let model = entry.model.as_deref().unwrap_or("");
        let style = if n == cursor {
            Style::new().bg(theme.selected)
        } else {
            Style::new()
        };
        let text = format!(
            "{current} {:<20} {:<12} {model}",
            entry.name,
            entry.kind.name()
        );
        lines.push(Line::styled(text, style));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
