//! The completions pane: one card per candidate side by side, scored against the target, with
//! the words that differ between cards highlighted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use crate::tui::state::{Card, CompletionPhase, Finished, State, provenance};

pub fn title(state: &State) -> String {
    let target = state
        .view
        .as_ref()
        .and_then(|v| v.hole.target.as_deref())
        .unwrap_or("");
    format!("completions (k={}) · target: {target}", state.k)
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let theme = &state.theme;
    if let CompletionPhase::Running { streamed } = &state.completion {
        frame.render_widget(streaming(state, streamed), area);
        return;
    }
    let note = if state.cards.is_empty() {
        let hint = "r (or Enter on a candidate) completes with the top k candidates";
        Some((hint.to_string(), theme.muted))
    } else {
        None
    };
    if let Some((text, colour)) = note {
        frame.render_widget(Paragraph::new(text).style(Style::new().fg(colour)), area);
        return;
    }
    let areas = Layout::horizontal(vec![Constraint::Fill(1); state.cards.len()]).split(area);
    for (n, (card, &rect)) in state.cards.iter().zip(areas.iter()).enumerate() {
        draw_card(frame, rect, state, n, card);
    }
}

/// The spinner, and the text each request has streamed so far.
fn streaming(state: &State, streamed: &[String]) -> Paragraph<'static> {
    let theme = &state.theme;
    let head = Line::styled(
        format!("{} completing… Esc cancels", super::spinner(state)),
        Style::new().fg(theme.explain),
    );
    let partial = streamed
        .iter()
        .enumerate()
        .filter(|(_, text)| !text.is_empty())
        .map(|(n, text)| Line::styled(format!("{} · {text}", n + 1), Style::new().fg(theme.muted)));
    Paragraph::new(std::iter::once(head).chain(partial).collect::<Vec<_>>())
}

fn draw_card(frame: &mut Frame, area: Rect, state: &State, n: usize, card: &Card) {
    let theme = &state.theme;
    let border = if n == state.card_cursor {
        theme.border_focus
    } else {
        theme.border
    };
    let label = match (&card.edited, state.candidate(card.candidate)) {
        (Some(_), _) => format!("edited from cand {}", card.candidate),
        (None, Some(c)) => format!("cand {} {}", card.candidate, c.label),
        (None, None) => format!("cand {}", card.candidate),
    };
    let block = Block::bordered()
        .border_style(Style::new().fg(border))
        .title(Span::styled(
            format!(" {} · {label} ", n + 1),
            Style::new().fg(theme.title),
        ));
    let lines = match &card.outcome {
        Ok(done) => {
            let others: Vec<&str> = state
                .cards
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != n)
                .filter_map(|(_, c)| c.outcome.as_ref().ok().map(|f| f.text.as_str()))
                .collect();
            let mut lines = vec![
                Line::from(diff_spans(state, &done.text, &others)),
                score_line(state, done),
            ];
            if n == state.card_cursor {
                lines.extend(explained_lines(state, card, &done.text));
            }
            lines
        }
        Err(e) => vec![Line::styled(e.clone(), Style::new().fg(theme.bad))],
    };
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    frame.render_widget(paragraph.block(block), area);
}

/// When the card is explained: each piece of it and the file and lines it was copied from.
fn explained_lines(state: &State, card: &Card, text: &str) -> Vec<Line<'static>> {
    let theme = &state.theme;
    let (Some(spans), Some(index), Some(candidate)) = (
        &state.explained,
        &state.index,
        state.candidate(card.candidate),
    ) else {
        return vec![];
    };
    provenance::explained_pieces(index, &candidate.prompt, text, spans, state.numbering)
        .into_iter()
        .map(|(piece, from)| {
            Line::from(vec![
                Span::styled(format!("{piece:?} "), Style::new().fg(theme.explain)),
                Span::styled(format!("← {from}"), Style::new().fg(theme.muted)),
            ])
        })
        .collect()
}

/// "EM ✗  ES 0.24  12 ms  syntax ok".
fn score_line(state: &State, done: &Finished) -> Line<'static> {
    let theme = &state.theme;
    let s = &done.scores;
    let (em, em_colour) = if s.exact_match {
        ("EM ✓", theme.good)
    } else {
        ("EM ✗", theme.bad)
    };
    let (syntax, syntax_colour) = match done.syntax_errors {
        0 => ("syntax ok".to_string(), theme.good),
        1 => ("syntax: 1 error".into(), theme.bad),
        e => (format!("syntax: {e} errors"), theme.bad),
    };
    Line::from(vec![
        Span::styled(em, Style::new().fg(em_colour)),
        Span::styled(
            format!("  ES {:.2}", s.edit_similarity),
            Style::new().fg(theme.score),
        ),
        Span::styled(
            format!("  {} ms  ", done.latency_ms),
            Style::new().fg(theme.muted),
        ),
        Span::styled(syntax, Style::new().fg(syntax_colour)),
    ])
}

/// Words of `text`: runs of identifier characters, or single other characters.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let word = c.is_alphanumeric() || c == '_';
        if word {
            start.get_or_insert(i);
            continue;
        }
        if let Some(s) = start.take() {
            out.push(&text[s..i]);
        }
        out.push(&text[i..i + c.len_utf8()]);
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// The completion with the words some other card lacks highlighted.
fn diff_spans(state: &State, text: &str, others: &[&str]) -> Vec<Span<'static>> {
    let theme = &state.theme;
    let other_words: Vec<Vec<&str>> = others.iter().map(|o| words(o)).collect();
    words(text)
        .into_iter()
        .map(|w| {
            let differs = !w.trim().is_empty() && other_words.iter().any(|ws| !ws.contains(&w));
            let style = if differs {
                Style::new()
                    .fg(theme.diff)
                    .add_modifier(Modifier::UNDERLINED)
            } else {
                Style::new().fg(theme.text)
            };
            Span::styled(w.to_string(), style)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn words_split_identifiers_and_punctuation() {
        assert_eq!(
            super::words("a.bc(d1)"),
            vec!["a", ".", "bc", "(", "d1", ")"]
        );
    }
}
