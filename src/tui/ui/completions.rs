//! The completions pane: one card per candidate side by side, scored against the target, with
//! the words that differ between cards highlighted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::candidate::CandidateId;
use crate::tui::state::{Card, CompletionPhase, Finished, RunningCard, State, provenance};

pub fn title(state: &State) -> String {
    let target = state
        .view
        .as_ref()
        .and_then(|v| v.hole.target.as_deref())
        .unwrap_or("");
    match target {
        "" => format!(
            "completions (k={}) · end of line: no target to score",
            state.k
        ),
        target => format!("completions (k={}) · target: {target}", state.k),
    }
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let theme = &state.theme;
    // A short pane (80x24) gets cards without frames, the scores before the text, so that
    // every card keeps its EM and ES in view.
    let compact = area.height < COMPACT_BELOW;
    if let CompletionPhase::Running { cards } = &state.completion {
        let areas = Layout::horizontal(vec![Constraint::Fill(1); cards.len()]).split(area);
        for (n, (card, &rect)) in cards.iter().zip(areas.iter()).enumerate() {
            let label = card_label(state, card.candidate, &[], None);
            let block = card_block(state, n, label, false, compact);
            frame.render_widget(running(state, card).block(block), rect);
        }
        return;
    }
    if state.cards.is_empty() {
        let hint = "r completes the top k candidates (one card per distinct prompt) · Enter on a \
                    candidate completes it and the k-1 best";
        frame.render_widget(
            Paragraph::new(hint).style(Style::new().fg(theme.muted)),
            area,
        );
        return;
    }
    let areas = Layout::horizontal(vec![Constraint::Fill(1); state.cards.len()]).split(area);
    for (n, (card, &rect)) in state.cards.iter().zip(areas.iter()).enumerate() {
        draw_card(frame, rect, state, n, card, compact);
    }
}

/// Panes shorter than this many rows get compact cards.
const COMPACT_BELOW: u16 = 5;

/// "cand 7 current PL 75% · same prompt: 6, 5", or what an edited prompt came from.
fn card_label(
    state: &State,
    candidate: CandidateId,
    same: &[CandidateId],
    edited: Option<&str>,
) -> String {
    let id = state.shown_number(candidate);
    let mut label = match (edited, state.candidate(candidate)) {
        (Some(_), _) => format!("edited from cand {id}"),
        (None, Some(c)) => format!("cand {id} {}", c.label),
        (None, None) => format!("cand {id}"),
    };
    if !same.is_empty() {
        let others: Vec<String> = same
            .iter()
            .map(|&c| state.shown_id(c).to_string())
            .collect();
        label += &format!(" · same prompt: {}", others.join(", "));
    }
    label
}

/// A card's frame and title; a compact card has a rule on its left and the title as its
/// first line.
fn card_block(
    state: &State,
    n: usize,
    label: String,
    picked: bool,
    compact: bool,
) -> Block<'static> {
    let theme = &state.theme;
    let focused = n == state.card_cursor;
    let border = if focused {
        theme.border_focus
    } else {
        theme.border
    };
    let picked = if picked { " ✔ picked" } else { "" };
    let mut title = Style::new().fg(theme.title);
    if compact && focused {
        title = title.add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
    }
    let block = match compact {
        true => Block::new().borders(Borders::LEFT),
        false => Block::bordered(),
    };
    block
        .border_style(Style::new().fg(border))
        .title(Span::styled(
            format!(" {}{picked} · {label} ", n + 1),
            title,
        ))
}

/// A card in flight: waiting for its turn, or its time and tokens so far and the text streamed.
fn running(state: &State, card: &RunningCard) -> Paragraph<'static> {
    let theme = &state.theme;
    let progress = match (card.started, state.now) {
        (None, _) => "queued: waiting for its turn at the model".to_string(),
        (Some(started), now) => {
            let elapsed = now.map_or(0.0, |now| {
                now.saturating_duration_since(started).as_secs_f64()
            });
            format!(
                "{} {elapsed:.1} s · {} tok · Esc cancels",
                super::spinner(state),
                card.pieces
            )
        }
    };
    let lines = vec![
        Line::styled(progress, Style::new().fg(theme.explain)),
        Line::styled(card.text.clone(), Style::new().fg(theme.muted)),
    ];
    Paragraph::new(lines).wrap(Wrap { trim: false })
}

fn draw_card(frame: &mut Frame, area: Rect, state: &State, n: usize, card: &Card, compact: bool) {
    let theme = &state.theme;
    let label = card_label(state, card.candidate, &card.same, card.edited.as_deref());
    let block = card_block(state, n, label, card.picked, compact);
    let lines = match &card.outcome {
        Ok(done) => {
            let others: Vec<&str> = state
                .cards
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != n)
                .filter_map(|(_, c)| c.outcome.as_ref().ok().map(|f| f.text.as_str()))
                .collect();
            let text = Line::from(diff_spans(state, &done.text, &others));
            let mut lines = match compact {
                true => vec![score_line(state, done, true), text],
                false => vec![text, score_line(state, done, false)],
            };
            if n == state.card_cursor {
                lines.extend(explained_lines(state, card, &done.text));
            }
            lines
        }
        Err(e) => vec![Line::styled(e.to_string(), Style::new().fg(theme.bad))],
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

/// "EM ✗  ES 0.24  412 ms (+2.3 s queued)  syntax ok"; at the end of a line, with nothing after
/// the hole, "no target" instead of the scores. A compact card keeps the scores alone.
fn score_line(state: &State, done: &Finished, compact: bool) -> Line<'static> {
    let theme = &state.theme;
    let mut spans = match &done.scores {
        Some(s) => {
            let (em, em_colour) = if s.exact_match {
                ("EM ✓", theme.good)
            } else {
                ("EM ✗", theme.bad)
            };
            vec![
                Span::styled(em, Style::new().fg(em_colour)),
                Span::styled(
                    format!("  ES {:.2}", s.edit_similarity),
                    Style::new().fg(theme.score),
                ),
            ]
        }
        None => vec![Span::styled(
            "no target (end of line)",
            Style::new().fg(theme.muted),
        )],
    };
    if compact {
        return Line::from(spans);
    }
    let (syntax, syntax_colour) = match done.syntax_errors {
        0 => ("syntax ok".to_string(), theme.good),
        1 => ("syntax: 1 error".into(), theme.bad),
        e => (format!("syntax: {e} errors"), theme.bad),
    };
    let queued = match done.queued_ms {
        0..100 => String::new(),
        ms => format!(" (+{:.1} s queued)", ms as f64 / 1000.0),
    };
    spans.extend([
        Span::styled(
            format!("  {} ms{queued}  ", done.latency_ms),
            Style::new().fg(theme.muted),
        ),
        Span::styled(syntax, Style::new().fg(syntax_colour)),
    ]);
    Line::from(spans)
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
