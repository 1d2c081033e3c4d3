//! The candidates pane: every proposal in rank order with its score, source, type and size.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{bar, scroll_top};
use crate::tui::state::{Mode, State};

const SCORE_WIDTH: usize = 8;

pub fn title(state: &State) -> String {
    let filter = match (&state.mode, state.filter.is_empty()) {
        (Mode::Filter, _) => format!("  /{}▏", state.filter),
        (_, false) => format!("  /{}", state.filter),
        _ => String::new(),
    };
    let selected = match state.selected.len() {
        0 => String::new(),
        n => format!(" · {n} selected"),
    };
    format!(
        "candidates {}/{} · ranker {}{selected}{filter}",
        state.visible().len(),
        state.candidates.len(),
        state.ranker.name()
    )
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let theme = &state.theme;
    if state.candidates.is_empty() {
        let text = if state.analysing() {
            format!(
                "{} building every candidate context…",
                super::spinner(state)
            )
        } else {
            String::new()
        };
        frame.render_widget(
            Paragraph::new(text).style(Style::new().fg(theme.muted)),
            area,
        );
        return;
    }
    let header = Line::styled(
        format!(
            "     # {:<w$} {:<20} {:<7} {:>5} ok",
            "score",
            "source",
            "type",
            "tok",
            w = SCORE_WIDTH + 5
        ),
        Style::new().fg(theme.muted).add_modifier(Modifier::BOLD),
    );
    let visible = state.visible();
    let rows = area.height.saturating_sub(1) as usize;
    let top = scroll_top(state.candidate_cursor, rows);
    let mut lines = vec![header];
    for (pos, &i) in visible.iter().enumerate().skip(top).take(rows) {
        let c = &state.candidates[i];
        let base = if pos == state.candidate_cursor {
            Style::new().bg(theme.selected).add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        let mark = if state.selected.contains(&c.id) {
            "●"
        } else {
            " "
        };
        let (score_bar, score) = match c.score {
            Some(s) => (bar(s, SCORE_WIDTH), format!("{s:.2}")),
            None => (" ".repeat(SCORE_WIDTH), "  —".into()),
        };
        let (ok, ok_colour) = if c.applicable {
            ("✓", theme.good)
        } else {
            ("·", theme.muted)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{mark}{:>4} ", c.id), base.fg(theme.explain)),
            Span::styled(score_bar, base.fg(theme.score)),
            Span::styled(format!(" {score:<4} "), base.fg(theme.text)),
            Span::styled(format!("{:<20} ", c.source), base.fg(theme.text)),
            Span::styled(format!("{:<7} ", c.context_type), base.fg(theme.proposal)),
            Span::styled(format!("{:>5} ", c.tokens()), base.fg(theme.muted)),
            Span::styled(ok, base.fg(ok_colour)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), area);
}
