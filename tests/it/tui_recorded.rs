//! A recorded completion opened in the headless app: `--recorded N` and the picker open the
//! hole where the repository holds what the plugin sent, and the plugin's prompt runs beside
//! keyhole's candidates with the same backend, scored against the file on disk; where `proxy
//! --compose` sent keyhole's prompt instead, both are candidates. And `p`, which pins a
//! candidate for `proxy --compose`.

use std::time::Duration;

use crate::common::scratch_dirs;
use keyhole::CandidateId;
use keyhole::testing::pin::Pin;
use keyhole::testing::proxy::{
    self, Answered, Composition, Exchange, ExtraChunk, RecordStore, Sent,
};
use keyhole::testing::tui::app::App;
use keyhole::testing::tui::command::{Command, Pane};
use keyhole::testing::tui::keymap::{Keymap, Layer};
use keyhole::testing::tui::state::{Action, DiffLine, Mode};
use keyhole::testing::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const LIMIT: Duration = Duration::from_secs(120);
const FILE: &str = "src/main/java/com/acme/shop/service/OrderService.java";
/// Line 94, column 32 of FILE: the sample's demo hole.
const LINE: usize = 94;

/// What llama.vscode sent at the demo hole when the rest of the line was not written yet: the
/// 20 lines before it and the middle of its line, the lines after, and a chunk of another file.
fn infill_at_the_demo_hole(text: &str, cursor: usize) -> Sent {
    let line_start = text[..cursor].rfind('\n').map_or(0, |i| i + 1);
    let prefix_start = text[..line_start]
        .match_indices('\n')
        .rev()
        .nth(20)
        .map_or(0, |(i, _)| i + 1);
    let line_end = cursor + text[cursor..].find('\n').unwrap_or(0);
    Sent {
        prefix: Some(text[prefix_start..line_start].to_string()),
        prompt: Some(text[line_start..cursor].to_string()),
        suffix: Some(
            text[line_end..]
                .lines()
                .take(10)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        extra: vec![ExtraChunk {
            filename: "/home/me/shop/Unsaved.java".into(),
            text: "class Unsaved { int draft; }\n".into(),
        }],
        ..Sent::default()
    }
}

fn record(dirs: &keyhole::Dirs, sent: Sent) {
    let log = RecordStore::open(&proxy::log_dir(dirs).unwrap(), proxy::DEFAULT_MAX_BYTES).unwrap();
    log.append(&Exchange {
        id: 0,
        at: 1_764_000_000.0,
        client: "127.0.0.1:51000".into(),
        agent: Some("axios/1.7.9".into()),
        method: "POST".into(),
        endpoint: "/infill".into(),
        upstream: "http://127.0.0.1:8080/".into(),
        status: 200,
        sent,
        answered: Answered {
            text: "order.total()".into(),
            ..Answered::default()
        },
        first_byte_ms: Some(20.0),
        total_ms: 80.0,
        cancelled: false,
        error: None,
        ..Default::default()
    })
    .unwrap();
}

#[tokio::test]
async fn a_recorded_request_opens_at_its_hole_and_its_prompt_completes_beside_the_best() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let text = std::fs::read_to_string(root.join(FILE)).unwrap();
    let line_start: usize = text
        .split_inclusive('\n')
        .take(LINE - 1)
        .map(str::len)
        .sum();
    let cursor = line_start + 31;
    record(&dirs, infill_at_the_demo_hole(&text, cursor));

    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.state.recorded.pending = Some(1);
    app.open(root, None);
    app.settle(LIMIT).await.unwrap();

    let state = &app.state;
    let hole = &state.view.as_ref().unwrap().hole;
    let index = state.index.as_ref().unwrap();
    assert_eq!(
        hole.display(index),
        format!("{FILE}:{LINE}:32"),
        "{}",
        state.status
    );
    // The file on disk has the rest of the line the plugin did not see: what the user wrote.
    let open = state
        .recorded
        .open
        .as_ref()
        .expect("the record's hole is open");
    assert_eq!(open.place.certainty, proxy::Certainty::BeforeOnly);
    assert!(!hole.target.as_deref().unwrap_or_default().is_empty());
    let sent = &state.candidates[0];
    assert_eq!(sent.id, CandidateId::AS_SENT);
    assert_eq!(
        sent.label,
        "as sent by axios, found; the file changed after the cursor"
    );
    assert!(sent.applicable());
    // Its provenance: the code before the hole from the hole's file, the unsaved chunk from
    // no file of the repository.
    let prompt = &sent.prompt;
    let text_of = prompt.segments[0].text.clone();
    let files: Vec<&str> = text_of
        .files()
        .into_iter()
        .map(|f| index.files[f].path.as_str())
        .collect();
    assert_eq!(files, [FILE]);
    assert!(prompt.text().starts_with("class Unsaved"));
    assert!(prompt.suffix.is_some(), "the plugin's suffix goes with it");
    // On screen: the row, and the prompt pane on it with where its parts came from.
    let screen = screen(&app);
    for shown in ["as sent by axios", "cand sent", "OrderService.java:74-94"] {
        assert!(screen.contains(shown), "{shown} is not on the screen");
    }
    // The suffix: the lines after the hole's line, found after what the user wrote since.
    assert!(screen.contains("sent after the cursor, 10 lines  OrderService.java:94-103"));
    let state = &app.state;
    // keyhole's candidates follow, ranked.
    assert!(state.candidates[1].score.is_some());
    assert!(state.candidates.len() > 73);

    // r completes the plugin's prompt and the best candidates with the same backend.
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    let cards = &app.state.cards;
    assert_eq!(cards.len(), app.state.k);
    assert_eq!(cards[0].candidate, CandidateId::AS_SENT);
    assert!(
        cards.iter().all(|c| c.outcome.is_ok()),
        "{:?}",
        cards[0].outcome
    );
    assert_ne!(cards[1].candidate, CandidateId::AS_SENT);

    // The picker lists it and opens it again from another hole.
    app.dispatch(Action::Command(Command::Down));
    app.dispatch(Action::Command(Command::Recorded));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.mode, Mode::Recorded { cursor: 0 });
    assert_eq!(app.state.recorded.exchanges.len(), 1);
    app.dispatch(Action::Command(Command::Confirm));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.mode, Mode::Normal);
    assert_eq!(app.state.candidates[0].id, CandidateId::AS_SENT);
}

/// A repository of one Python file whose comment ends in `é`, and the app over it with
/// request 1 recorded (sending `before` and `after` around the cursor) and pending.
async fn app_opening_a_recorded_request(before: &str, after: &str) -> (tempfile::TempDir, App) {
    let (scratch, dirs) = scratch_dirs();
    let repo = scratch.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let code = "def total(items):\n    s = 0\n    # café\n    return s\n";
    std::fs::write(repo.join("cart.py"), code).unwrap();
    record(
        &dirs,
        Sent {
            prefix: Some(before.into()),
            prompt: Some(String::new()),
            suffix: Some(after.into()),
            ..Sent::default()
        },
    );
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.state.recorded.pending = Some(1);
    app.open(repo, None);
    app.settle(LIMIT).await.unwrap();
    (scratch, app)
}

#[tokio::test]
async fn a_recorded_request_ending_in_a_non_ascii_character_opens_at_its_hole() {
    let (_scratch, app) = app_opening_a_recorded_request(
        "def total(items):\n    s = 0\n    # café",
        "\n    return s\n",
    )
    .await;
    let state = &app.state;
    let index = state.index.as_ref().unwrap();
    // On main: locating panicked, and the default hole stayed open.
    assert_eq!(
        state.view.as_ref().unwrap().hole.display(index),
        "cart.py:3:11",
        "{} / {:?}",
        state.status,
        state.warning
    );
    assert!(state.recorded.open.is_some());
    assert_eq!(state.warning, None);
}

#[tokio::test]
async fn a_recorded_request_that_cannot_be_located_says_so_until_dismissed() {
    let (_scratch, mut app) =
        app_opening_a_recorded_request("def elsewhere():\n    unknown = 1\n    ", "\n").await;
    assert!(app.state.recorded.open.is_none());
    let warning = app.state.warning.clone().expect("a warning that stays");
    assert!(
        warning.contains("recorded request 1") && warning.contains("in no file"),
        "{warning}"
    );
    // The hole's analysis and moves around do not replace it; Esc does.
    app.dispatch(Action::Command(Command::Down));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.warning.as_deref(), Some(warning.as_str()));
    app.dispatch(Action::Command(Command::Cancel));
    assert_eq!(app.state.warning, None);
}

/// The lines of `file` in the sample from `first` to `last` (1-based), each with its newline.
fn sample_lines(root: &std::path::Path, file: &str, first: usize, last: usize) -> String {
    let text = std::fs::read_to_string(root.join(file)).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines[first - 1..last].concat()
}

/// The screen `app` draws, as text.
fn screen(app: &App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(150, 45)).unwrap();
    terminal
        .draw(|frame| {
            keyhole::testing::tui::ui::draw(frame, &app.state);
        })
        .unwrap();
    let cells = terminal.backend().buffer().content();
    cells.iter().map(|cell| cell.symbol()).collect()
}

#[tokio::test]
async fn a_composed_request_opens_with_the_plugins_prompt_and_keyholes_and_d_diffs_them() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let text = std::fs::read_to_string(root.join(FILE)).unwrap();
    let line_start: usize = text
        .split_inclusive('\n')
        .take(LINE - 1)
        .map(str::len)
        .sum();
    let sent = infill_at_the_demo_hole(&text, line_start + 31);
    // What `proxy --compose` sent instead: the plugin's text around the cursor, keyhole's
    // context (lines of the order model) in place of the plugin's chunk.
    let order = "src/main/java/com/acme/shop/model/Order.java";
    let context = sample_lines(&root, order, 10, 21);
    let instead = Sent {
        extra: vec![ExtraChunk {
            filename: order.into(),
            text: context.clone(),
        }],
        ..sent.clone()
    };
    let log = RecordStore::open(&proxy::log_dir(&dirs).unwrap(), proxy::DEFAULT_MAX_BYTES).unwrap();
    log.append(&Exchange {
        at: 1_764_000_000.0,
        client: "127.0.0.1:51000".into(),
        agent: Some("llama.vim".into()),
        method: "POST".into(),
        endpoint: "/infill".into(),
        status: 200,
        sent,
        answered: Answered {
            text: "order.total()".into(),
            ..Answered::default()
        },
        composition: Some(Composition {
            candidate: Some(7),
            label: Some("import MNB".into()),
            hole: Some(format!("{FILE}:{LINE}:32")),
            sent: Some(instead),
            ..Composition::default()
        }),
        ..Exchange::default()
    })
    .unwrap();

    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.state.recorded.pending = Some(1);
    app.open(root, None);
    app.settle(LIMIT).await.unwrap();
    let state = &app.state;
    assert!(state.recorded.open.is_some(), "{}", state.status);
    let [plugins, keyholes] = &state.candidates[..2] else {
        unreachable!()
    };
    assert_eq!(plugins.id, CandidateId::AS_SENT);
    assert_eq!(keyholes.id, CandidateId::SENT_BY_KEYHOLE);
    assert!(
        keyholes
            .label
            .starts_with("as keyhole sent it: cand 7 (import MNB), found"),
        "{}",
        keyholes.label
    );
    assert!(plugins.prompt.text().starts_with("class Unsaved"));
    assert!(keyholes.prompt.text().starts_with(&context));
    // keyhole's context came from the order model, and the prompt pane says so.
    let index = state.index.as_ref().unwrap();
    let files: Vec<&str> = keyholes.prompt.segments[0]
        .text
        .files()
        .into_iter()
        .map(|f| index.files[f].path.as_str())
        .collect();
    assert_eq!(files, [order, FILE]);
    app.dispatch(Action::Command(Command::Down));
    let shown = screen(&app);
    for seen in ["as keyhole sent", "cand comp", "Order.java:10-21"] {
        assert!(shown.contains(seen), "{seen} is not on the screen");
    }

    // D, with nothing selected: the plugin's prompt against keyhole's.
    app.dispatch(Action::Command(Command::DiffPrompts));
    assert!(matches!(app.state.mode, Mode::Diff { .. }));
    let diff = app.state.diff.as_ref().unwrap();
    assert_eq!(diff.title, "cand sent → cand comp");
    assert!(
        diff.lines
            .contains(&DiffLine::Removed("class Unsaved { int draft; }".into())),
        "{:?}",
        diff.lines
    );
    let first = context.lines().next().unwrap().to_string();
    assert!(
        diff.lines.contains(&DiffLine::Added(first)),
        "{:?}",
        diff.lines
    );
}

/// Process `app`'s actions until `done` holds of its state.
async fn until(app: &mut App, done: impl Fn(&keyhole::testing::tui::state::State) -> bool) {
    tokio::time::timeout(LIMIT, async {
        while !done(&app.state) {
            let action = app.next().await.unwrap();
            app.dispatch(action);
        }
    })
    .await
    .expect("it never happened");
}

#[tokio::test]
async fn p_pins_the_focused_candidate_for_the_repository_and_a_new_ui_finds_the_pin() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs.clone());
    app.open(root.clone(), None);
    app.settle(LIMIT).await.unwrap();
    // `p` in the candidates pane, on the second candidate.
    let p = keyhole::testing::tui::keymap::parse_key("p").unwrap();
    let pin = app.state.keymap.lookup(Layer::Normal, Pane::Candidates, p);
    assert_eq!(pin, Some(Command::Pin));
    app.dispatch(Action::Command(Command::FocusCandidates));
    app.dispatch(Action::Command(Command::Down));
    let id = app.state.focused_candidate().unwrap().id;
    app.dispatch(Action::Command(Command::Pin));
    until(&mut app, |s| s.pinned == Some(id)).await;
    assert!(
        app.state.status.starts_with("pinned cand"),
        "{}",
        app.state.status
    );
    // Where `keyhole proxy --compose` reads it.
    assert_eq!(Pin::of(&dirs, &root).read(), (Some(id), None));
    let shown = screen(&app);
    assert!(shown.contains(&format!("pinned ⚑{id}")), "the title");
    assert!(shown.contains(&format!("⚑{id:>4}")), "the row's mark");
    drop(app);

    // A new UI on the same data directory finds it, and p on it again unpins.
    let mut again = App::new(Keymap::builtin(), Theme::dark(), dirs.clone());
    again.open(root.clone(), None);
    again.settle(LIMIT).await.unwrap();
    assert_eq!(again.state.pinned, Some(id));
    again.dispatch(Action::Command(Command::FocusCandidates));
    again.dispatch(Action::Command(Command::Down));
    assert_eq!(again.state.focused_candidate().unwrap().id, id);
    again.dispatch(Action::Command(Command::Pin));
    until(&mut again, |s| s.pinned.is_none()).await;
    assert_eq!(Pin::of(&dirs, &root).read(), (None, None));

    // A torn file is one warning and no pin.
    Pin::of(&dirs, &root).write(Some(id)).unwrap();
    let path = Pin::of(&dirs, &root).path().unwrap().to_path_buf();
    std::fs::write(&path, "{\"version\":1,\"re").unwrap();
    let mut torn = App::new(Keymap::builtin(), Theme::dark(), dirs);
    torn.open(root, None);
    torn.settle(LIMIT).await.unwrap();
    assert_eq!(torn.state.pinned, None);
    let warning = torn.state.warning.clone().unwrap_or_default();
    assert!(
        warning.starts_with("ignoring the pinned candidate in"),
        "{warning}"
    );
}
