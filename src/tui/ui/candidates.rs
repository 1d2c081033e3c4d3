//! The candidates pane: RLPG's proposals in rank order with the ranker's score, then the
//! retrieved candidates with their retrieval score, each with source, type, size and whether it
//! applies (and why not, on a wide pane).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::bar;
use crate::candidate::CandidateId;
use crate::rank::{RankerKind, online};
use crate::tui::layout::scroll_top;
use crate::tui::state::{AnalysisPhase, Availability, CandidateRow, Mode, State};

const SCORE_WIDTH: usize = 8;
/// The source column's width, and on a narrow pane.
const SOURCE: usize = 19;
const COMPACT_SOURCE: usize = 12;
/// The width a full row takes: narrower panes get compact rows.
const FULL_ROW: usize = 5 + SCORE_WIDTH + 6 + SOURCE + 1 + 9 + 6 + 1;
/// The least room worth showing a row's note in (narrower panes show it in the prompt title).
const NOTE_MIN: usize = 12;
/// Marks ProCC's pick among its perspectives.
pub const PROCC_MARK: &str = "★";
/// Marks the candidate pinned for the repository (`keyhole proxy --compose` sends it).
pub const PIN_MARK: &str = "⚑";

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
    let procc = match state.procc.as_ref().and_then(|p| p.pick) {
        Some(id) => format!(" · ProCC {PROCC_MARK}{}", state.shown_id(id)),
        None => String::new(),
    };
    let pinned = match state.pinned {
        Some(id) => format!(" · pinned {PIN_MARK}{}", state.shown_id(id)),
        None => String::new(),
    };
    format!(
        "candidates {}/{} · ranker {}{procc}{pinned}{selected}{filter}",
        state.visible().len(),
        state.candidates.len(),
        ranker_name(state)
    )
}

/// The ranker's name; the online one says how much it has learnt (with no picks it ranks as
/// the order it starts from, which it should not hide), and RLPG-H what it was tuned for.
pub fn ranker_name(state: &State) -> String {
    let start = state.tuned.as_deref().unwrap_or("fixed");
    match (state.ranker, state.online_picks()) {
        (RankerKind::Online, 0) => format!("online (no picks yet: as {start})"),
        (RankerKind::Online, 1) => "online (1 pick)".into(),
        (RankerKind::Online, n) => format!("online ({n} picks)"),
        (RankerKind::RlpgH, _) if state.tuned.is_some() => start.into(),
        (kind, _) => kind.name().into(),
    }
}

/// What the ranker's scores are, for the score column's header.
pub fn score_unit(kind: RankerKind) -> &'static str {
    match kind {
        RankerKind::RlpgH | RankerKind::RlpgR => "P(success)",
        RankerKind::Bm25 => "BM25 (÷best)",
        RankerKind::Fixed => "fixed order",
        RankerKind::Online => "picks/shown",
    }
}

pub fn draw(frame: &mut Frame, area: Rect, state: &State) {
    let theme = &state.theme;
    if state.candidates.is_empty() {
        let text = match state.view.as_ref().map(|v| &v.analysis) {
            Some(AnalysisPhase::Failed(error)) => format!("cannot build the candidates: {error}"),
            Some(AnalysisPhase::Building) => format!(
                "{} building every candidate context…",
                super::spinner(state)
            ),
            _ => String::new(),
        };
        frame.render_widget(
            Paragraph::new(text).style(Style::new().fg(theme.muted)),
            area,
        );
        return;
    }
    // A narrow pane keeps id, score, source, type and size: the bar goes, the source shortens.
    let compact = (area.width as usize) < FULL_ROW;
    let (score_width, source_width) = match compact {
        true => (5, COMPACT_SOURCE),
        false => (SCORE_WIDTH + 5, SOURCE),
    };
    let header = Line::styled(
        format!(
            "     # {:<score_width$} {:<source_width$} {:<8} {:>5} ok",
            score_unit(state.ranker),
            "source",
            "type",
            "tok",
        ),
        Style::new().fg(theme.muted).add_modifier(Modifier::BOLD),
    );
    let visible = state.visible();
    let rows = area.height.saturating_sub(1) as usize;
    let top = scroll_top(state.candidate_cursor, rows);
    let best = best_score(state);
    let mut lines = vec![header];
    for (pos, &i) in visible.iter().enumerate().skip(top).take(rows) {
        let c = &state.candidates[i];
        let base = if pos == state.candidate_cursor {
            Style::new().bg(theme.selected).add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        let mut spans = row(state, c, best, base, compact);
        let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        let room = (area.width as usize).saturating_sub(used + 1);
        if let Some(note) = note(state, c).filter(|_| room >= NOTE_MIN) {
            let note: String = note.chars().take(room).collect();
            spans.push(Span::styled(format!(" {note}"), base.fg(theme.muted)));
        }
        lines.push(Line::from(spans));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// What a full bar means: 1 for the rankers whose scores are probabilities or rates (so a
/// 0.02 draws an empty bar however the others score), the best score for BM25's unbounded
/// ones.
fn best_score(state: &State) -> f64 {
    if state.ranker != RankerKind::Bm25 {
        return 1.0;
    }
    let best = state
        .candidates
        .iter()
        .filter_map(|c| c.score)
        .fold(0.0, f64::max);
    if best > 0.0 { best } else { 1.0 }
}

/// id, score bar and value, source, type, tokens and whether it applies. A retrieved
/// candidate shows its retrieval similarity (0..1) in another colour: no ranker scores it.
fn row(
    state: &State,
    c: &CandidateRow,
    best: f64,
    base: Style,
    compact: bool,
) -> Vec<Span<'static>> {
    let theme = &state.theme;
    let mark = if state.selected.contains(&c.id) {
        "●"
    } else if state.pinned == Some(c.id) {
        PIN_MARK
    } else if state.kept_edit(c.id).is_some() {
        "✎"
    } else {
        " "
    };
    let (fraction, value, colour) = match (c.score, c.retrieval_score) {
        (Some(s), _) => (Some(s / best), Some(s), theme.score),
        (None, Some(s)) => (Some(s), Some(s), theme.explain),
        (None, None) => (None, None, theme.score),
    };
    let score_bar = fraction.map_or_else(|| " ".repeat(SCORE_WIDTH), |f| bar(f, SCORE_WIDTH));
    let score = match (state.ranker, state.online.get(&c.id)) {
        // The online ranker's evidence, as counts: a rate after one pick would overstate it.
        (RankerKind::Online, Some(n)) if c.score.is_some() => format!("{}/{}", n.picks, n.shown),
        _ => value.map_or_else(|| "  —".into(), four_wide),
    };
    let (ok, ok_colour) = match &c.availability {
        Availability::Applicable if procc_pick(state) == Some(c.id) => (PROCC_MARK, theme.good),
        Availability::Applicable => ("✓", theme.good),
        Availability::NotApplicable(_) => ("·", theme.muted),
        Availability::Building => (super::spinner(state), theme.muted),
    };
    // A row still building has no count yet: pending, not empty.
    let tokens = match c.building() {
        true => "…".to_string(),
        false => c.tokens().to_string(),
    };
    let source_width = if compact { COMPACT_SOURCE } else { SOURCE };
    let mut spans = vec![
        Span::styled(
            format!("{mark}{:>4} ", state.shown_number(c.id)),
            base.fg(theme.explain),
        ),
        Span::styled(score_bar, base.fg(colour)),
        Span::styled(format!(" {score:<4} "), base.fg(theme.text)),
        Span::styled(
            format!("{:<source_width$.source_width$} ", c.source),
            base.fg(theme.text),
        ),
        Span::styled(
            format!("{:<8} ", c.id.info().type_text()),
            base.fg(theme.proposal),
        ),
        Span::styled(format!("{tokens:>5} "), base.fg(theme.muted)),
        Span::styled(ok, base.fg(ok_colour)),
    ];
    if compact {
        spans.remove(1);
        spans[1].content = format!("{score:<4} ").into();
    }
    spans
}

/// A score in four characters: probabilities and similarities to two decimals, BM25's larger
/// scores to fewer.
fn four_wide(score: f64) -> String {
    match score.abs() {
        a if a < 10.0 => format!("{score:.2}"),
        a if a < 100.0 => format!("{score:.1}"),
        _ => format!("{score:.0}"),
    }
}

fn procc_pick(state: &State) -> Option<CandidateId> {
    state.procc.as_ref().and_then(|p| p.pick)
}

/// What a wide pane adds after a row: why it does not apply, that it waits, ProCC's pick, which
/// reading built a typed hole, why the online ranker put it where it is.
pub fn note(state: &State, c: &CandidateRow) -> Option<String> {
    match &c.availability {
        Availability::NotApplicable(why) => why.clone(),
        Availability::Building => Some(format!("waiting for {}", c.waits_for())),
        Availability::Applicable if procc_pick(state) == Some(c.id) => {
            Some("ProCC (LinUCB) pick".into())
        }
        Availability::Applicable if c.id.is_recorded() => Some(c.label.clone()),
        Availability::Applicable if c.reader.is_some() => {
            c.reader.as_ref().map(|reader| format!("read by {reader}"))
        }
        Availability::Applicable if state.ranker == RankerKind::Online && c.score.is_some() => {
            Some(online::reason(state.online.get(&c.id)))
        }
        Availability::Applicable => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::theme::Theme;

    fn scored(score: f64) -> CandidateRow {
        CandidateRow {
            id: CandidateId::nth(1),
            label: "cand 1".into(),
            source: "current",
            context_type: "PL",
            score: Some(score),
            retrieval_score: None,
            availability: Availability::Applicable,
            reader: None,
            prompt: crate::compose::Prompt {
                segments: vec![],
                budget: 10,
                tokenizer: "code",
                proposal_id: CandidateId::nth(1),
                backend_tokens: None,
                assembly: crate::compose::Assembly::Capped,
                model_room: None,
                suffix: None,
            },
        }
    }

    fn bar_of(state: &State, score: f64) -> String {
        let spans = row(
            state,
            &scored(score),
            best_score(state),
            Style::new(),
            false,
        );
        spans[1].content.to_string()
    }

    #[test]
    fn probabilities_draw_absolute_bars_and_bm25_relative_ones_each_with_its_unit() {
        let mut state = State::new(Keymap::builtin(), Theme::dark());
        state.candidates = vec![scored(0.02)];
        assert_eq!(bar_of(&state, 0.02), "▏·······", "0.02 is no full bar");
        assert_eq!(bar_of(&state, 1.0), "████████");
        assert_eq!(score_unit(state.ranker), "P(success)");
        state.ranker = RankerKind::Bm25;
        state.candidates = vec![scored(12.0)];
        assert_eq!(
            bar_of(&state, 12.0),
            "████████",
            "the best BM25 score fills it"
        );
        assert_eq!(bar_of(&state, 6.0), "████····");
        assert!(score_unit(state.ranker).starts_with("BM25"));
    }

    #[test]
    fn a_typed_hole_row_says_which_reading_built_it() {
        let state = State::new(Keymap::builtin(), Theme::dark());
        let typed = CandidateRow {
            id: CandidateId::TYPED_TYPES,
            score: None,
            reader: Some("pyright-langserver".into()),
            ..scored(0.0)
        };
        assert_eq!(
            note(&state, &typed).as_deref(),
            Some("read by pyright-langserver")
        );
        let not_typed = scored(0.5);
        assert_eq!(note(&state, &not_typed), None);
    }

    #[test]
    fn rlpg_h_says_which_model_it_was_tuned_for() {
        let mut state = State::new(Keymap::builtin(), Theme::dark());
        state.tuned = Some("RLPG-H tuned for smol, 400 holes".into());
        assert!(title(&state).contains("ranker RLPG-H tuned for smol, 400 holes"));
        state.ranker = RankerKind::Online;
        assert!(title(&state).contains("online (no picks yet: as RLPG-H tuned for smol"));
        state.ranker = RankerKind::Bm25;
        assert!(!title(&state).contains("tuned"));
    }

    #[test]
    fn the_online_ranker_says_how_many_picks_it_learnt_from() {
        let mut state = State::new(Keymap::builtin(), Theme::dark());
        state.ranker = RankerKind::Online;
        assert!(title(&state).contains("online (no picks yet: as fixed)"));
        let counts = crate::rank::online::Counts { picks: 3, shown: 5 };
        let learnt = [(CandidateId::nth(7), counts)].into_iter().collect();
        crate::tui::state::update(&mut state, crate::tui::state::Action::OnlineLearnt(learnt));
        assert!(
            title(&state).contains("online (3 picks)"),
            "{}",
            title(&state)
        );
    }
}
