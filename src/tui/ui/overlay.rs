//! Overlays: the help table (from the live keymap), the fuzzy file picker, the backend picker
//! and the recorded-requests picker.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::tui::command::Pane;
use crate::tui::keymap::Layer;
use crate::tui::layout::scroll_top;
use crate::tui::state::{DiffLine, LoggedRequest, State};

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

/// Where help finds each group of keys: (title, layer, pane).
fn help_groups() -> Vec<(String, Layer, Option<Pane>)> {
    let mut groups = vec![
        (Layer::Any.title().to_string(), Layer::Any, None),
        (Layer::Normal.title().to_string(), Layer::Normal, None),
    ];
    for pane in Pane::ALL {
        groups.push((format!("{} pane", pane.name()), Layer::Normal, Some(pane)));
    }
    for layer in &Layer::ALL[2..] {
        groups.push((layer.title().to_string(), *layer, None));
    }
    groups
}

/// What the marks and numbers on the screen mean (the context types' abbreviations come from
/// the candidate catalogue).
const LEGEND: [(&str, &str); 9] = [
    ("★", "ProCC's pick among its perspectives (a LinUCB bandit)"),
    (
        "⚑",
        "pinned (p): proxy --compose sends it for this repository",
    ),
    (
        "✓ ·",
        "applies to this hole / does not (a wide pane says why)",
    ),
    ("●", "selected: r completes the selected candidates"),
    (
        "P(success)",
        "RLPG's probability the proposal completes the hole right",
    ),
    (
        "bars",
        "out of 1 (BM25: of the best score); retrieved: similarity",
    ),
    (
        "pick rate",
        "online: picks per showing, from the fixed order at first",
    ),
    (
        "235/3054",
        "prompt pane: tokens a segment uses / tokens allotted to it",
    ),
    (
        "of 4072",
        "the prompt's whole budget; amber: ≥90% used, red ✂: cut",
    ),
];

/// Each context type once, in the catalogue's order: (abbreviation, meaning).
fn context_types() -> Vec<(&'static str, &'static str)> {
    let mut types: Vec<(&str, &str)> = Vec::new();
    for spec in crate::candidate::proposal_specs() {
        let entry = (
            spec.context_type.abbreviation(),
            spec.context_type.meaning(),
        );
        if !types.contains(&entry) {
            types.push(entry);
        }
    }
    types
}

/// The help as lines: the keys of every mode and pane from the live keymap, in groups,
/// then the legend.
pub fn help_lines(state: &State) -> Vec<Line<'static>> {
    let theme = &state.theme;
    let heading = Style::new().fg(theme.title).add_modifier(Modifier::BOLD);
    let key = Style::new().fg(theme.explain).add_modifier(Modifier::BOLD);
    let row = |k: String, d: String| {
        Line::from(vec![Span::styled(format!("{k:>12}  "), key), Span::raw(d)])
    };
    let mut lines = Vec::new();
    for (title, layer, pane) in help_groups() {
        let entries = state.keymap.entries(layer, pane);
        if entries.is_empty() {
            continue;
        }
        lines.push(Line::styled(title, heading));
        lines.extend(entries.into_iter().map(|(k, d, _)| row(k, d.to_string())));
        lines.push(Line::default());
    }
    lines.push(Line::styled("legend", heading));
    let legend = context_types().into_iter().chain(LEGEND);
    lines.extend(legend.map(|(k, d)| row(k.to_string(), d.to_string())));
    lines
}

/// A page of `lines` in a panel nearly the screen's size (at most `width` wide), scrolled
/// down by `scroll` rows (never past the last page): help, the request log, a prompt diff.
fn page(
    frame: &mut Frame,
    state: &State,
    (width, title): (u16, &str),
    lines: Vec<Line<'static>>,
    scroll: usize,
) {
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(4).min(width),
        area.height.saturating_sub(2),
    );
    let inner = panel(frame, state, rect, title);
    let rows = inner.height as usize;
    let top = scroll.min(lines.len().saturating_sub(rows));
    let shown: Vec<Line> = lines.into_iter().skip(top).take(rows).collect();
    frame.render_widget(Paragraph::new(shown), inner);
}

/// The help, one scrollable column that reads at 80x24.
pub fn help(frame: &mut Frame, state: &State, scroll: usize) {
    let title = "help · ↑↓ PgUp PgDn scroll · Esc or ? closes";
    page(frame, state, (100, title), help_lines(state), scroll);
}

/// A list in a panel: `head` (the query being typed, a summary or column names), then
/// `count` rows as `row` draws them (given the row's index and the room's width), scrolled to
/// keep `cursor` in view, the cursor's row highlighted.
fn list(
    frame: &mut Frame,
    state: &State,
    (rect, title): (Rect, &str),
    head: Line<'static>,
    count: usize,
    cursor: usize,
    row: impl Fn(usize, usize) -> Line<'static>,
) {
    let inner = panel(frame, state, rect, title);
    let rows = inner.height.saturating_sub(1) as usize;
    let top = scroll_top(cursor, rows);
    let selected = Style::new().bg(state.theme.selected);
    let mut lines = vec![head];
    for n in (0..count).skip(top).take(rows) {
        let line = row(n, inner.width as usize);
        lines.push(match n == cursor {
            true => line.patch_style(selected),
            false => line,
        });
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The query being typed above a list.
fn query_line(state: &State, query: &str) -> Line<'static> {
    Line::styled(format!("> {query}▏"), Style::new().fg(state.theme.explain))
}

pub fn picker(frame: &mut Frame, state: &State, query: &str, cursor: usize) {
    let Some(index) = &state.index else { return };
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(20).min(90),
        area.height.saturating_sub(6),
    );
    let matches = state.picker_matches(query);
    let head = query_line(state, query);
    list(
        frame,
        state,
        (rect, "open a file"),
        head,
        matches.len(),
        cursor,
        |n, width| Line::raw(tail_that_fits(&index.files[matches[n]].path, width)),
    );
}

/// `path` within `width` characters: whole if it fits, else its file name with as many of
/// the folders above it as fit after "…/" (a long path keeps what tells files apart).
pub fn tail_that_fits(path: &str, width: usize) -> String {
    if path.chars().count() <= width {
        return path.to_string();
    }
    let parts: Vec<&str> = path.split('/').collect();
    let mut tail = parts[parts.len() - 1].to_string();
    for part in parts[..parts.len() - 1].iter().rev() {
        let longer = format!("{part}/{tail}");
        if longer.chars().count() + 2 > width {
            break;
        }
        tail = longer;
    }
    format!("…/{tail}")
}

/// The request log, newest first: when, to whom, which candidate, the prompt's size, the
/// wait and the time taken, and what came back.
pub fn requests(frame: &mut Frame, state: &State, scroll: usize) {
    let theme = &state.theme;
    let title = format!(
        "requests sent ({}) · newest first · Esc closes",
        state.request_log.len()
    );
    let lines: Vec<Line> = match state.request_log.is_empty() {
        true => vec![Line::styled(
            "nothing sent yet: r completes",
            Style::new().fg(theme.muted),
        )],
        false => state
            .request_log
            .iter()
            .rev()
            .map(|r| logged_line(state, r))
            .collect(),
    };
    page(frame, state, (140, &title), lines, scroll);
}

/// "05:11:02 smol  cand 7 (+2 same)  1248 tok  waited 0 ms, took 812 ms  \"findBy…\"".
fn logged_line(state: &State, r: &LoggedRequest) -> Line<'static> {
    let theme = &state.theme;
    let what = match (r.edited, r.shared_by) {
        (true, _) => format!("edited from {}", state.shown_id(r.candidate)),
        (false, 0) => format!("cand {}", state.shown_id(r.candidate)),
        (false, n) => format!("cand {} (+{n} same)", state.shown_id(r.candidate)),
    };
    let size = match r.prompt_tokens {
        Some(tokens) => format!("{tokens} tok"),
        None => format!("{} B", r.prompt_bytes),
    };
    let (timing, answer, colour) = match &r.outcome {
        Ok((text, queued, took)) => (
            format!("waited {queued} ms, took {took} ms"),
            format!("{text:?}"),
            theme.text,
        ),
        Err(why) => ("failed".to_string(), why.to_string(), theme.bad),
    };
    Line::from(vec![
        Span::styled(format!("{} ", r.at), Style::new().fg(theme.muted)),
        Span::styled(
            format!("{:<12.12} ", r.backend),
            Style::new().fg(theme.title),
        ),
        Span::styled(format!("{what:<20} "), Style::new().fg(theme.explain)),
        Span::styled(
            format!("{size:>9}  {timing:<30} "),
            Style::new().fg(theme.muted),
        ),
        Span::styled(answer, Style::new().fg(colour)),
    ])
}

/// A line diff of two prompts: removed lines, added lines, a little of what they share
/// around each change, and how many shared lines were left out.
pub fn diff(frame: &mut Frame, state: &State, scroll: usize) {
    let Some(diff) = &state.diff else { return };
    let theme = &state.theme;
    let title = format!(
        "{} · - only in the first, + only in the second · Esc closes",
        diff.title
    );
    let styled = |text: String, colour| Line::styled(text, Style::new().fg(colour));
    let lines: Vec<Line> = match diff.lines.is_empty() {
        true => vec![styled("the prompts are the same".into(), theme.muted)],
        false => diff
            .lines
            .iter()
            .map(|line| match line {
                DiffLine::Removed(text) => styled(format!("- {text}"), theme.bad),
                DiffLine::Added(text) => styled(format!("+ {text}"), theme.good),
                DiffLine::Same(text) => styled(format!("  {text}"), theme.text),
                DiffLine::SameRun(n) => styled(format!("  … {n} lines the same"), theme.muted),
            })
            .collect(),
    };
    page(frame, state, (140, &title), lines, scroll);
}

/// The command palette: every action of the focused pane and the shared ones, with its key.
pub fn palette(frame: &mut Frame, state: &State, query: &str, cursor: usize) {
    let theme = &state.theme;
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(20).min(90),
        area.height.saturating_sub(6),
    );
    let title = format!(
        "actions in the {} pane · Enter runs one",
        state.focus.name()
    );
    let matches = state.palette_matches(query);
    let head = query_line(state, query);
    list(
        frame,
        state,
        (rect, &title),
        head,
        matches.len(),
        cursor,
        |n, _| {
            let (_, keys, desc) = &matches[n];
            Line::from(vec![
                Span::styled(format!("{keys:>14}  "), Style::new().fg(theme.explain)),
                Span::styled(desc.clone(), Style::new().fg(theme.text)),
            ])
        },
    );
}

/// The configured backends; the current one is marked. Base URLs are left out: they can hold
/// credentials, and the name says which server it is.
pub fn backends(frame: &mut Frame, state: &State, cursor: usize) {
    let theme = &state.theme;
    let area = frame.area();
    let height = (state.setup.backends.len() as u16 + 4).min(area.height);
    let rect = centered(area, area.width.saturating_sub(20).min(90), height);
    let head = Line::styled(
        crate::tui::state::backend_summary(state),
        Style::new().fg(theme.muted),
    );
    let backends = &state.setup.backends;
    list(
        frame,
        state,
        (rect, "complete with"),
        head,
        backends.len(),
        cursor,
        |n, _| {
            let entry = &backends[n];
            let current = if n == state.setup.backend { "●" } else { " " };
            let model = entry.model.as_deref().unwrap_or("");
            Line::raw(format!(
                "{current} {:<20} {:<12} {model}",
                entry.name,
                entry.kind.name()
            ))
        },
    );
}

/// The requests editor plugins made through `keyhole proxy`, newest first.
pub fn recorded(frame: &mut Frame, state: &State, cursor: usize) {
    let theme = &state.theme;
    let area = frame.area();
    let rect = centered(
        area,
        area.width.saturating_sub(8).min(110),
        area.height.saturating_sub(6),
    );
    let unreadable = match state.recorded.unreadable {
        0 => String::new(),
        n => format!(" · {n} unreadable records left out"),
    };
    let unreadable = match state.recorded.hidden {
        0 => unreadable,
        n => format!("{unreadable} · {n} context-only or refused not listed"),
    };
    let head = Line::styled(
        format!(
            "{:>5}  {:<8}  {:<12}  {:<20}  answer{unreadable}",
            "#", "UTC", "client", "endpoint"
        ),
        Style::new().fg(theme.muted).add_modifier(Modifier::BOLD),
    );
    let exchanges = &state.recorded.exchanges;
    let title = "recorded requests · Enter opens the hole";
    list(
        frame,
        state,
        (rect, title),
        head,
        exchanges.len(),
        cursor,
        |n, _| Line::raw(crate::tui::state::recorded_row(&exchanges[n])),
    );
}

/// The places a recorded request's hole fits as well as each other: which one was it?
pub fn recorded_places(
    frame: &mut Frame,
    state: &State,
    places: &[crate::proxy::Place],
    cursor: usize,
) {
    let theme = &state.theme;
    let area = frame.area();
    let height = (places.len() as u16 + 4).min(area.height);
    let rect = centered(area, area.width.saturating_sub(20).min(90), height);
    let head = Line::styled(
        places
            .first()
            .map(|p| p.certainty.describe())
            .unwrap_or_default(),
        Style::new().fg(theme.muted),
    );
    let title = "which place was it?";
    list(
        frame,
        state,
        (rect, title),
        head,
        places.len(),
        cursor,
        |n, _| Line::raw(places[n].position()),
    );
}

/// The change apply would make, before it asks: the hole's line as it is and as it would be.
pub fn apply_question(frame: &mut Frame, state: &State) {
    let Some((line, path, before, after)) = crate::tui::state::apply_preview(state) else {
        return;
    };
    let theme = &state.theme;
    let area = frame.area();
    let rect = centered(area, area.width.saturating_sub(4), 6.min(area.height));
    let name = path.rsplit('/').next().unwrap_or(&path);
    let title = format!("write into {name}? y writes · n keeps it");
    let inner = panel(frame, state, rect, &title);
    let number = Style::new().fg(theme.muted);
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("{line:>5} - "), number),
            Span::styled(before, Style::new().fg(theme.bad)),
        ]),
        Line::from(vec![
            Span::styled(format!("{line:>5} + "), number),
            Span::styled(after, Style::new().fg(theme.good)),
        ]),
        Line::styled("  u undoes it afterwards", number),
    ];
    frame.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_path_keeps_its_file_name_and_the_folders_that_fit() {
        let path = "src/main/java/com/acme/shop/service/OrderService.java";
        assert_eq!(super::tail_that_fits(path, 80), path);
        assert_eq!(
            super::tail_that_fits(path, 30),
            "…/service/OrderService.java"
        );
        assert_eq!(super::tail_that_fits(path, 10), "…/OrderService.java");
    }

    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::theme::Theme;

    #[test]
    fn help_has_every_group_of_keys_and_every_abbreviation_and_reads_at_80_columns() {
        let state = State::new(Keymap::builtin(), Theme::dark());
        let lines = help_lines(&state);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        // 80 columns less the panel's margin and borders.
        let wide: Vec<&String> = text.iter().filter(|l| l.chars().count() > 74).collect();
        assert!(wide.is_empty(), "too wide at 80x24: {wide:#?}");
        // Help shows every group a binding can be in.
        let groups = help_groups();
        for b in &state.keymap.bindings {
            let shown = groups.iter().any(|(_, l, p)| (*l, *p) == (b.mode, b.pane));
            assert!(shown, "{} ({}) is not in help", b.on, b.desc);
        }
        for spec in crate::candidate::proposal_specs() {
            let abbreviation = format!(" {}  ", spec.context_type.abbreviation());
            assert!(
                text.iter().any(|l| l.contains(&abbreviation)),
                "{abbreviation}"
            );
        }
        assert!(text.iter().any(|l| l.contains("★")));
    }
}
