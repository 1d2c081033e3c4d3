//! The prompt pane: token budget bars per segment over the prompt text, coloured by where each
//! byte came from, with the spans a completion copied highlighted.

use std::ops::Range;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::bar;
use super::source::group;
use crate::compose::{Prompt, Segment, SegmentKind};
use crate::session::{counting_words, counts_exactly};
use crate::sourced::SourcedText;
use crate::token::Keep;
use crate::tui::command::Pane;
use crate::tui::state::{
    Availability, CandidateRow, Editor, Mode, State, matches, prompt_tokenizer, provenance,
};
use crate::tui::theme::Theme;

/// A segment using this share of its allocation is drawn amber; a cut one red.
const WARN_AT: f64 = 0.9;
const BAR_WIDTH: usize = 20;

pub fn title(state: &State) -> String {
    format!("{}{}", prompt_title(state), search_note(state))
}

/// The prompt search being typed, or the last one with its place: " · /total 2 of 7".
fn search_note(state: &State) -> String {
    match &state.mode {
        Mode::Search(typed) if state.focus == Pane::Prompt => format!(" · /{typed}▏"),
        _ if state.prompt_query.is_empty() => String::new(),
        _ => {
            let found = state
                .shown_prompt()
                .map_or(0, |p| matches(&p.text(), &state.prompt_query).len());
            match state.prompt_match.filter(|&i| i < found) {
                Some(i) => format!(" · /{} {} of {found}", state.prompt_query, i + 1),
                None => format!(" · /{} {found} found", state.prompt_query),
            }
        }
    }
}

fn prompt_title(state: &State) -> String {
    if let Some(editor) = &state.editor {
        return edit_title(editor);
    }
    if state.explained.is_none()
        && let Some(c) = state.focused_candidate()
    {
        match &c.availability {
            Availability::NotApplicable(Some(why)) => {
                return format!("candidate {} does not apply: {why}", state.shown_id(c.id));
            }
            Availability::Building => {
                return format!(
                    "candidate {} is waiting for {}",
                    state.shown_id(c.id),
                    c.waits_for()
                );
            }
            _ => {}
        }
    }
    if let Some((c, edit)) = kept_edit_shown(state) {
        let tokens = prompt_tokenizer(&c.prompt).count(edit);
        return format!(
            "prompt · edited by you · {tokens}/{} tokens ({}) · d discards, D compares",
            c.prompt.budget, c.prompt.tokenizer
        );
    }
    match state.shown_prompt() {
        Some(p) => {
            let used: usize = p.segments.iter().map(|s| s.tokens).sum();
            let explained = if state.explained.is_some() {
                " · explained spans highlighted"
            } else {
                ""
            };
            let Some(backend) = state.backend.as_deref() else {
                return format!("prompt · {used}/{} tokens ({})", p.budget, p.tokenizer);
            };
            let words = counting_words(backend, state.setup.tokenizer().tokenizer());
            if let Some(counted) = p.backend_tokens {
                // A model with a small context: the prompt was composed within its room.
                let (limit, whose) = match p.model_room {
                    Some(room) => (room, ", the model's context"),
                    None => (state.setup.budget, ""),
                };
                return format!("prompt · {counted}/{limit} tokens ({words}{whose}){explained}");
            }
            let words = match state.fitting {
                Some(_) if !counts_exactly(backend, state.setup.tokenizer().tokenizer()) => {
                    format!("{}, fitting to {}'s count…", p.tokenizer, backend.name())
                }
                _ => words,
            };
            format!("prompt · {used}/{} tokens ({words}){explained}", p.budget)
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

/// The focused candidate and the user's kept edit of its prompt, where the pane shows that
/// edit (no card is explained).
fn kept_edit_shown(state: &State) -> Option<(&CandidateRow, &str)> {
    let c = state
        .focused_candidate()
        .filter(|_| state.explained.is_none())?;
    Some((c, state.kept_edit(c.id)?))
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    if let Some(editor) = &state.editor {
        frame.render_widget(&editor.textarea, area);
        return;
    }
    if let Some((_, edit)) = kept_edit_shown(state) {
        // Written by the user: no segments to colour, sent as it is.
        let lines: Vec<Line> = edit
            .lines()
            .skip(state.prompt_scroll)
            .take(area.height as usize)
            .map(|l| Line::styled(l.to_string(), Style::new().fg(state.theme.text)))
            .collect();
        let lines = Paragraph::new(lines);
        let lines = match state.prompt_wrap {
            true => lines.wrap(Wrap { trim: false }),
            false => lines,
        };
        frame.render_widget(lines, area);
        return;
    }
    let Some(prompt) = state.shown_prompt() else {
        return;
    };
    let mut bars: Vec<Line> = prompt
        .segments
        .iter()
        .filter(|s| s.kind != SegmentKind::Separator)
        .map(|s| budget_line(state, s, prompt.budget))
        .collect();
    bars.extend(prompt.suffix.as_ref().map(|s| suffix_line(state, s)));
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
        SegmentKind::Proposal { id } => format!("cand {}", state.shown_number(id)),
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

/// "suffix    sent after the cursor, 12 lines  Cart.java:11-22": the text a plugin sent apart
/// after the hole, and where it came from.
fn suffix_line(state: &State, suffix: &SourcedText) -> Line<'static> {
    let theme = &state.theme;
    let sources = state
        .index
        .as_ref()
        .map(|index| provenance::segment_sources(index, suffix))
        .unwrap_or_default();
    let lines = suffix.text.lines().count();
    Line::from(vec![
        Span::styled(
            format!("{:<10}", "suffix"),
            Style::new().fg(theme.default_context),
        ),
        Span::styled(
            format!("sent after the cursor, {lines} lines  {sources}"),
            Style::new().fg(theme.muted),
        ),
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
/// formatting colour, explained bytes and matches of the prompt search highlighted.
fn style_at(state: &State, prompt: &Prompt, found: &[Range<usize>], at: usize) -> Style {
    let theme = &state.theme;
    let mut start = 0;
    let mut style = Style::new().fg(theme.text);
    for segment in &prompt.segments {
        let end = start + segment.text.text.len();
        if at < end {
            let local = at - start;
            // Pieces are in text order and do not overlap.
            let pieces = &segment.text.pieces;
            let formatting = pieces
                .get(pieces.partition_point(|p| p.range.end <= local))
                .is_some_and(|p| p.range.contains(&local) && p.origin.is_none());
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
    if let Some(i) = found.iter().position(|m| m.contains(&at)) {
        style = style.bg(theme.diff).fg(theme.background);
        if state.prompt_match == Some(i) {
            style = style.add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
        }
    }
    style
}

/// The styles of the prompt's bytes in `visible` as runs `(first byte, style)` in order. A style
/// changes only where a segment, a piece or an explained span starts or ends, so `style_at` runs
/// once per such boundary rather than once per character (per character it was most of a frame).
fn style_runs(state: &State, prompt: &Prompt, visible: Range<usize>) -> Vec<(usize, Style)> {
    let found = match state.prompt_query.is_empty() {
        true => Vec::new(),
        false => matches(&prompt.text(), &state.prompt_query),
    };
    let mut bounds = vec![visible.start];
    for m in &found {
        bounds.extend([m.start, m.end]);
    }
    let mut start = 0;
    for segment in &prompt.segments {
        bounds.push(start);
        for piece in &segment.text.pieces {
            bounds.extend([start + piece.range.start, start + piece.range.end]);
        }
        start += segment.text.text.len();
    }
    for span in state.explained.iter().flatten() {
        if let Some(range) = &span.prompt {
            bounds.extend([range.start, range.end]);
        }
    }
    bounds.retain(|b| visible.contains(b));
    bounds.sort_unstable();
    bounds.dedup();
    bounds
        .into_iter()
        .map(|at| (at, style_at(state, prompt, &found, at)))
        .collect()
}

fn text_lines(state: &State, prompt: &Prompt, height: u16) -> Vec<Line<'static>> {
    let text = prompt.text();
    let mut offset = 0;
    let mut shown = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        if shown.len() == height as usize {
            break;
        }
        if n >= state.prompt_scroll {
            shown.push((offset, line));
        }
        offset += line.len() + 1;
    }
    let visible = match (shown.first(), shown.last()) {
        (Some((first, _)), Some((last, line))) => *first..last + line.len() + 1,
        _ => return Vec::new(),
    };
    let runs = style_runs(state, prompt, visible);
    let mut run = 0;
    let left = if state.prompt_wrap {
        0
    } else {
        state.prompt_left
    };
    shown
        .into_iter()
        .map(|(offset, line)| {
            let cells = line.char_indices().skip(left).map(|(i, c)| {
                let at = offset + i;
                while runs.get(run + 1).is_some_and(|(start, _)| *start <= at) {
                    run += 1;
                }
                (runs[run].1, c)
            });
            Line::from(group(cells))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::CandidateId;
    use crate::explain::ExplainedSpan;
    use crate::lang::Span as ByteSpan;
    use crate::sourced::{Origin, Piece, SourcedText};
    use crate::tui::keymap::Keymap;

    fn segment(kind: SegmentKind, pieces: &[(&str, bool)]) -> Segment {
        let mut text = SourcedText::default();
        for (part, from_file) in pieces {
            let start = text.text.len();
            text.text.push_str(part);
            let origin = from_file.then_some(Origin {
                file: 0,
                span: ByteSpan::new(0, part.len()),
            });
            text.pieces.push(Piece {
                range: start..text.text.len(),
                origin,
            });
        }
        Segment {
            kind,
            text,
            tokens: 0,
            allocated: 0,
            cut: None,
        }
    }

    /// The colour each visible character is drawn in, line by line.
    fn colours(state: &State, prompt: &Prompt) -> Vec<Vec<(char, Style)>> {
        text_lines(state, prompt, 10)
            .iter()
            .map(|line| {
                let spans = line.spans.iter();
                spans
                    .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn prompt_text_is_coloured_by_segment_formatting_and_explained_bytes() {
        let id = CandidateId::new(7).unwrap();
        let prompt = Prompt {
            segments: vec![
                segment(
                    SegmentKind::Proposal { id },
                    &[("[A]\n", false), ("int a;\nint b;", true)],
                ),
                segment(SegmentKind::Separator, &[("\n", false)]),
                segment(SegmentKind::Default, &[("class C {\n  x", true)]),
            ],
            budget: 100,
            tokenizer: "code",
            proposal_id: id,
            backend_tokens: None,
            assembly: crate::compose::Assembly::Capped,
            model_room: None,
            suffix: None,
        };
        let mut state = State::new(Keymap::builtin(), Theme::dark());
        let theme = state.theme.clone();
        // "b;" of the proposal and "C" of the default context were copied into a completion.
        let text = prompt.text();
        let b = text.find("b;").unwrap();
        let c = text.find('C').unwrap();
        let span = |range: Range<usize>| ExplainedSpan {
            completion: 0..1,
            prompt: Some(range),
            segment: None,
            origin: None,
        };
        state.explained = Some(vec![span(b..b + 2), span(c..c + 1)]);
        let explained = Style::new()
            .fg(theme.background)
            .bg(theme.explain)
            .add_modifier(Modifier::BOLD);
        let lines = colours(&state, &prompt);
        let proposal = Style::new().fg(theme.proposal);
        let formatting = Style::new().fg(theme.formatting);
        let default = Style::new().fg(theme.default_context);
        assert!(lines[0].iter().all(|(_, s)| *s == formatting), "{lines:?}");
        assert!(lines[1].iter().all(|(_, s)| *s == proposal));
        assert_eq!(lines[2][4], ('b', explained));
        assert_eq!(lines[2][5], (';', explained));
        assert_eq!(lines[2][3], (' ', proposal));
        assert_eq!(lines[3][6], ('C', explained));
        assert_eq!(lines[3][7], (' ', default));
        assert_eq!(
            lines[4],
            vec![(' ', default), (' ', default), ('x', default)]
        );

        // Scrolled down two lines and right four characters, the same bytes keep their styles.
        state.prompt_scroll = 2;
        state.prompt_left = 4;
        let lines = colours(&state, &prompt);
        assert_eq!(lines[0][0], ('b', explained));
        assert_eq!(lines[1][2], ('C', explained));
        assert_eq!(lines.len(), 3, "{lines:?}");
    }
}
