//! Rendering: a function of borrowed state, one file per pane. `draw` returns each pane's inner
//! rectangle so the loop can hit-test mouse clicks against the frame that was shown.

pub mod candidates;
pub mod completions;
pub mod overlay;
pub mod prompt;
pub mod source;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Paragraph};

use super::command::{Command, Pane};
use super::keymap::Layer;
use super::state::{Mode, State};

/// Screens narrower than this many cells get the narrow layout.
const NARROW: u16 = 100;

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

pub fn spinner(state: &State) -> &'static str {
    SPINNER[state.tick % SPINNER.len()]
}

pub fn draw(frame: &mut Frame, state: &State) -> Vec<(Pane, Rect)> {
    let theme = &state.theme;
    frame.render_widget(
        Block::new().style(Style::new().bg(theme.background).fg(theme.text)),
        frame.area(),
    );
    let [header, body, status, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(header_line(state, header.width), header);
    frame.render_widget(status_line(state), status);
    frame.render_widget(hint_line(state, hints.width), hints);
    let mut inner = Vec::new();
    for (pane, area) in pane_areas(state, body) {
        let block = pane_block(state, pane);
        let content = block.inner(area);
        frame.render_widget(block, area);
        match pane {
            Pane::Source => source::draw(frame, content, state),
            Pane::Candidates => candidates::draw(frame, content, state),
            Pane::Prompt => prompt::draw(frame, content, state),
            Pane::Completions => completions::draw(frame, content, state),
        }
        inner.push((pane, content));
    }
    match &state.mode {
        Mode::Picker { query, cursor } => overlay::picker(frame, state, query, *cursor),
        Mode::Palette { query, cursor } => overlay::palette(frame, state, query, *cursor),
        Mode::Backends { cursor } => overlay::backends(frame, state, *cursor),
        Mode::Recorded { cursor } => overlay::recorded(frame, state, *cursor),
        Mode::RecordedPlace { cursor, places, .. } => {
            overlay::recorded_places(frame, state, places, *cursor)
        }
        Mode::Help { scroll } => overlay::help(frame, state, *scroll),
        Mode::Requests { scroll } => overlay::requests(frame, state, *scroll),
        Mode::Diff { scroll } => overlay::diff(frame, state, *scroll),
        Mode::ConfirmApply => overlay::apply_question(frame, state),
        _ => {}
    }
    if theme.monochrome {
        super::theme::monochrome(frame.buffer_mut(), theme.background);
    }
    inner
}

/// Source | candidates over the prompt over the completions; a zoomed pane takes everything.
fn pane_areas(state: &State, body: Rect) -> Vec<(Pane, Rect)> {
    if state.zoomed {
        return vec![(state.focus, body)];
    }
    let [top, middle, bottom] = Layout::vertical([
        Constraint::Percentage(40),
        Constraint::Percentage(35),
        Constraint::Percentage(25),
    ])
    .areas(body);
    // On a narrow screen the candidates take more of the top: their columns need the room.
    let source_share = if body.width < NARROW { 40 } else { 50 };
    let [left, right] = Layout::horizontal([
        Constraint::Percentage(source_share),
        Constraint::Percentage(100 - source_share),
    ])
    .areas(top);
    vec![
        (Pane::Source, left),
        (Pane::Candidates, right),
        (Pane::Prompt, middle),
        (Pane::Completions, bottom),
    ]
}

fn pane_block(state: &State, pane: Pane) -> Block<'static> {
    let theme = &state.theme;
    let focused = state.focus == pane;
    let title = match pane {
        Pane::Source => source::title(state),
        Pane::Candidates => candidates::title(state),
        Pane::Prompt => prompt::title(state),
        Pane::Completions => completions::title(state),
    };
    let (border, kind, title_style) = if focused {
        let bold = Style::new().fg(theme.title).add_modifier(Modifier::BOLD);
        (theme.border_focus, BorderType::Thick, bold)
    } else {
        (
            theme.border,
            BorderType::Plain,
            Style::new().fg(theme.title),
        )
    };
    Block::bordered()
        .border_type(kind)
        .border_style(Style::new().fg(border))
        .title(Span::styled(format!(" {title} "), title_style))
}

/// keyhole, the hole, the backend, the ranker and k; on a narrow screen the hole's file goes
/// by its name, so the rest still shows.
fn header_line(state: &State, width: u16) -> Paragraph<'static> {
    let theme = &state.theme;
    let backend = state.backend.as_ref().map_or("—", |b| b.name()).to_string();
    let rest = format!(
        "   backend {backend} · ranker {} · k={}",
        candidates::ranker_name(state),
        state.k
    );
    let hole = match (&state.index, &state.view) {
        (Some(index), Some(view)) => {
            let full = view.hole.display(index);
            let room =
                (width as usize).saturating_sub(" keyhole ".len() + 7 + rest.chars().count());
            match full.rsplit_once('/') {
                Some((_, short)) if full.chars().count() > room => short.to_string(),
                _ => full,
            }
        }
        _ => "—".into(),
    };
    Paragraph::new(Line::from(vec![
        Span::styled(
            " keyhole ",
            Style::new().fg(theme.background).bg(theme.title),
        ),
        Span::styled(format!("  hole {hole}"), Style::new().fg(theme.hole)),
        Span::styled(rest, Style::new().fg(theme.muted)),
    ]))
}

/// The spinner and the status; a text field being typed (go to line, search) takes its
/// place, and a warning about the user's files shows over it until dismissed.
fn status_line(state: &State) -> Paragraph<'static> {
    let theme = &state.theme;
    let spin = if state.busy() { spinner(state) } else { " " };
    let (text, colour) = match (&state.mode, &state.warning) {
        (Mode::GoTo(text), _) => (format!("go to line: {text}▏"), theme.explain),
        (Mode::Search(text), _) => (format!("search: /{text}▏"), theme.explain),
        (_, Some(warning)) => (format!("{warning}  (Esc dismisses)"), theme.bad),
        _ => (state.status.clone(), theme.text),
    };
    Paragraph::new(Line::from(vec![
        Span::styled(format!(" {spin} "), Style::new().fg(theme.explain)),
        Span::styled(text, Style::new().fg(colour)),
    ]))
}

/// The hint bar: the focused pane's hinted keys in the mode's layer, then the layer's and the
/// shared ones, as many whole entries as fit in `width`, ending with help's key.
fn hint_line(state: &State, width: u16) -> Paragraph<'static> {
    let theme = &state.theme;
    let key = Style::new().fg(theme.background).bg(theme.muted);
    let desc = Style::new().fg(theme.muted);
    let layer = state.mode.layer();
    let help = state.keymap.keys_for(Layer::Normal, None, Command::Help);
    let mut pairs = state.keymap.hints(layer, state.focus);
    // Help's key goes last, where it is always seen.
    pairs.retain(|(k, _)| *k != help);
    let cell = |k: &str, d: &str| k.chars().count() + d.chars().count() + 5;
    let tail = match layer == Layer::Normal && !help.is_empty() {
        true => Some((help.clone(), "all keys")),
        false => None,
    };
    let mut room = (width as usize).saturating_sub(tail.as_ref().map_or(0, |(k, d)| cell(k, d)));
    let mut spans = Vec::new();
    for (k, d) in pairs
        .iter()
        .map(|(k, d)| (k.as_str(), *d))
        .chain(tail.iter().map(|(k, d)| (k.as_str(), *d)))
    {
        let needed = cell(k, d);
        let last = tail.as_ref().is_some_and(|(t, _)| t == k);
        if needed > room && !last {
            continue;
        }
        room = room.saturating_sub(needed);
        spans.push(Span::styled(format!(" {k} "), key));
        spans.push(Span::styled(format!(" {d}  "), desc));
    }
    Paragraph::new(Line::from(spans))
}

/// A bar of `width` cells filled to `fraction`, in eighths of a cell.
pub fn bar(fraction: f64, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (fraction.clamp(0.0, 1.0) * (width * 8) as f64).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(PARTS[eighths % 8]);
    }
    let used = s.chars().count();
    s + &"·".repeat(width - used)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use crate::hole::Hole;
    use crate::repo::RepoIndex;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::{HoleView, State};
    use crate::tui::theme::Theme;

    #[test]
    fn a_narrow_header_names_the_holes_file_and_still_shows_the_ranker() {
        let dir = tempfile::tempdir().unwrap();
        let path = "src/main/java/com/example/deeply/nested/Name.java";
        std::fs::create_dir_all(dir.path().join(path).parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(path), "class Name {}\n").unwrap();
        let index = RepoIndex::open(dir.path(), None).unwrap();
        let mut state = State::new(Keymap::builtin(), Theme::dark());
        state.view = Some(HoleView {
            hole: Hole::at(&index, path, 1, 7).unwrap(),
            generation: 0,
            analysis: crate::tui::state::AnalysisPhase::Building,
        });
        state.index = Some(Arc::new(index));
        let header = |width| {
            let mut terminal = Terminal::new(TestBackend::new(width, 24)).unwrap();
            terminal.draw(|f| drop(super::draw(f, &state))).unwrap();
            let text = crate::tui::text(terminal.backend().buffer());
            text.lines().next().unwrap().to_string()
        };
        let narrow = header(80);
        assert!(narrow.contains("hole Name.java:1:7"), "{narrow}");
        assert!(narrow.contains("ranker RLPG-H · k=3"), "{narrow}");
        assert!(header(160).contains(&format!("hole {path}:1:7")));
    }

    #[test]
    fn bars_fill_by_eighths_and_keep_their_width() {
        assert_eq!(super::bar(0.0, 4), "····");
        assert_eq!(super::bar(1.0, 4), "████");
        assert_eq!(super::bar(0.5, 4), "██··");
        assert_eq!(super::bar(0.53, 4).chars().count(), 4);
    }
}
