//! The headless app: the real reducer and effect driver on the bundled sample, driven through
//! its action channel like the terminal loop drives it.

use std::time::Duration;

use keyhole::tui::app::App;
use keyhole::tui::keymap::Keymap;
use keyhole::tui::state::{Action, Command, Pane};
use keyhole::tui::theme::Theme;

const LIMIT: Duration = Duration::from_secs(120);

async fn opened() -> App {
    let root = keyhole::sample::materialize().unwrap();
    let mut app = App::new(Keymap::builtin(), Theme::dark());
    app.open(root, Some(keyhole::sample::DEMO_HOLE.to_string()));
    app.settle(LIMIT).await.unwrap();
    app
}

#[tokio::test]
async fn opens_the_sample_ranks_every_candidate_and_completes_top_k() {
    let mut app = opened().await;
    let state = &app.state;
    assert_eq!(state.candidates.len(), 63, "62 proposals and the default");
    assert!(state.candidates[0].score.is_some());
    let target = state.view.as_ref().unwrap().hole.target.clone().unwrap();
    assert!(!target.is_empty());

    app.sender().send(Action::Command(Command::Run)).unwrap();
    let action = app.next().await.unwrap();
    app.dispatch(action);
    assert!(app.state.running, "completions run in a task");
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), app.state.k);
    assert_eq!(app.state.focus, Pane::Completions);
    let done = app.state.cards[0].outcome.as_ref().unwrap();
    assert!((0.0..=1.0).contains(&done.scores.edit_similarity));

    app.dispatch(Action::Command(Command::Explain));
    assert!(app.state.explained.is_some());
    assert!(app.state.status.contains("came from candidate"));
}

#[tokio::test]
async fn cancel_aborts_a_run_and_moving_the_hole_recomputes() {
    let mut app = opened().await;
    app.dispatch(Action::Command(Command::Run));
    app.dispatch(Action::Command(Command::Cancel));
    assert!(!app.state.running);
    app.settle(LIMIT).await.unwrap();
    assert!(app.state.cards.is_empty(), "an aborted run reports nothing");

    app.dispatch(Action::Command(Command::FocusPrev));
    app.dispatch(Action::Command(Command::FocusPrev));
    app.dispatch(Action::Command(Command::FocusPrev));
    assert_eq!(app.state.focus, Pane::Source);
    app.dispatch(Action::Command(Command::Up));
    app.dispatch(Action::Command(Command::Confirm));
    assert!(
        app.state.candidates.is_empty(),
        "stale candidates are dropped"
    );
    app.settle(LIMIT).await.unwrap();
    let hole = &app.state.view.as_ref().unwrap().hole;
    assert_eq!(hole.line + 1, 93);
    assert_eq!(app.state.candidates.len(), 63);
}

#[tokio::test]
async fn filter_narrows_the_candidates() {
    let mut app = opened().await;
    app.dispatch(Action::Command(Command::Filter));
    for c in "sibling".chars() {
        let key = keyhole::tui::state::key_action(
            &app.state,
            ratatui::crossterm::event::KeyEvent::from(ratatui::crossterm::event::KeyCode::Char(c)),
        )
        .unwrap();
        app.dispatch(key);
    }
    let visible = app.state.visible();
    assert!(!visible.is_empty() && visible.len() < 63);
    assert!(
        visible
            .iter()
            .all(|&i| app.state.candidates[i].label.contains("sibling"))
    );
}
