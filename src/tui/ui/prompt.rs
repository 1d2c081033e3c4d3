//! The prompt pane: token budget bars per segment over the prompt text, coloured by where each
//! byte came from, with the spans a completion copied highlighted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::bar;
use super::source::group;
use crate::compose::{Prompt, Segment, SegmentKind};
use crate::model::TokenCounting;
use crate::token::Keep;
use crate::tui::state::{Availability, Editor, State, provenance};
use crate::tui::theme::Theme;

/// A segment using this share of its allocation is drawn amber; a cut one red.
const WARN_AT: f64 = 0.9;
const BAR_WIDTH: usize = 20;

pub fn title(state: &State) -> String {
    if let Some(editor) = &state.editor {
        return edit_title(editor);
    }
    if state.explained.is_none()
        && let Some(c) = state.focused_candidate()
    {
        match &c.availability {
            Availability::NotApplicable(Some(why)) => {
                return format!("candidate {} does not apply: {why}", c.id);
            }
            Availability::Building => {
                return format!("candidate {} is waiting for the backend", c.id);
            }
            _ => {}
        }
    }
    match state.shown_prompt() {
        Some(p) => {
            let used: usize = p.segments.iter().map(|s| s.tokens).sum();
            let explained = if state.explained.is_some() {
                " · explained spans highlighted"
            } else {
                ""
            };
            // Counted with a stand-in for the backend's own tokenizer: say so.
            let approximate = match state.backend.as_ref().map(|b| b.counting()) {
                Some(TokenCounting::Approximate) => ", approximate",
                _ => "",
            };
            format!(
                "prompt · {used}/{} tokens ({}{approximate}){explained}",
                p.budget, p.tokenizer
            )
        }
        None => "prompt".into(),
    }
}

/// "editing cand 7 · 1630/4072 tokens (code)", flagged when the edit is over budget.
fn edit_title(editor: &Editor) -> String {
    let over = if editor.tokens > editor.budget {
        " · over budget"
    } else {
        ""
    };
    format!(
        "editing cand {} · {}/{} tokens ({}){over}",
        editor.candidate,
        editor.tokens,
        editor.budget,
        editor.tokenizer.name()
    )
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    if let Some(editor) = &state.editor {
        frame.render_widget(&editor.textarea, area);
        return;
    }
    let Some(prompt) = state.shown_prompt() else {
        return;
    };
    let bars: Vec<Line> = prompt
        .segments
        .iter()
        .filter(|s| s.kind != SegmentKind::Separator)
        .map(|s| budget_line(state, s, prompt.budget))
        .collect();
    let [top, text] =
        Layout::vertical([Constraint::Length(bars.len() as u16), Constraint::Min(0)]).areas(area);
    frame.render_widget(Paragraph::new(bars), top);
    let lines = Paragraph::new(text_lines(state, prompt, text.height));
    let lines = match state.prompt_wrap {
        true => lines.wrap(Wrap { trim: false }),
        false => lines,
    };
    frame.render_widget(lines, text);
}

/// "cand 7  ██████····  812/1628 of 4072  ✂ cut at start  Order.java:3-40, Item.java:1-9".
fn budget_line(state: &State, segment: &Segment, budget: usize) -> Line<'static> {
    let theme = &state.theme;
    let fraction = segment.tokens as f64 / segment.allocated.max(1) as f64;
    let colour = if segment.cut.is_some() {
        theme.budget_over
    } else if fraction >= WARN_AT {
        theme.budget_warn
    } else {
        theme.budget_ok
    };
    let cut = match segment.cut {
        Some(Keep::Start) => "  ✂ cut at start",
        Some(Keep::End) => "  ✂ cut at end",
        None => "",
    };
    let sources = state
        .index
        .as_ref()
        .map(|index| provenance::segment_sources(index, &segment.text))
        .unwrap_or_default();
    let name = match segment.kind {
        SegmentKind::Proposal { id } => format!("cand {id}"),
        SegmentKind::Separator => "separator".into(),
        SegmentKind::Default => "default".into(),
    };
    Line::from(vec![
        Span::styled(
            format!("{name:<10}"),
            Style::new().fg(segment_colour(theme, segment.kind)),
        ),
        Span::styled(bar(fraction, BAR_WIDTH), Style::new().fg(colour)),
        Span::styled(
            format!("  {}/{} of {budget}", segment.tokens, segment.allocated),
            Style::new().fg(theme.muted),
        ),
        Span::styled(cut, Style::new().fg(theme.budget_over)),
        Span::styled(format!("  {sources}"), Style::new().fg(theme.muted)),
    ])
}

fn segment_colour(theme: &Theme, kind: SegmentKind) -> Color {
    match kind {
        SegmentKind::Proposal { .. } => theme.proposal,
        SegmentKind::Separator => theme.formatting,
        SegmentKind::Default => theme.default_context,
    }
}

/// The style of prompt byte `at`: its segment's colour, keyhole's formatting (no origin) in the
/// formatting colour, explained bytes highlighted.
fn style_at(state: &State, prompt: &Prompt, at: usize) -> Style {
    let theme = &state.theme;
    let mut start = 0;
    let mut style = Style::new().fg(theme.text);
    for segment in &prompt.segments {
        let end = start + segment.text.text.len();
        if at < end {
            let local = at - start;
            let formatting = segment
                .text
                .pieces
                .iter()
                .any(|p| p.range.contains(&local) && p.origin.is_none());
            style = Style::new().fg(if formatting {
                theme.formatting
            } else {
                segment_colour(theme, segment.kind)
            });
            break;
        }
        start = end;
    }
    let explained = state
        .explained
        .iter()
        .flatten()
        .any(|s| s.prompt.as_ref().is_some_and(|r| r.contains(&at)));
    if explained {
        style = style
            .bg(theme.explain)
            .fg(theme.background)
            .add_modifier(Modifier::BOLD);
    }
    style
}

fn text_lines(state: &State, prompt: &Prompt, height: u16) -> Vec<Line<'static>> {
    let text = prompt.text();
    let mut offset = 0;
    let mut lines = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        if lines.len() == height as usize {
            break;
        }
        if n >= state.prompt_scroll {
            let left = if state.prompt_wrap {
                0
            } else {
                state.prompt_left
            };
            let cells = line
                .char_indices()
                .skip(left)
                .map(|(i, c)| (style_at(state, prompt, offset + i), c));
            lines.push(Line::from(group(cells)));
        }
        offset += line.len() + 1;
    }
    lines
}
