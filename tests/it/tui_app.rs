//! The headless app: the real reducer and effect driver on the bundled sample, driven through
//! its action channel like the terminal loop drives it.

use crate::backends_support;
use crate::common::scratch_dirs;
use keyhole::CandidateId;

use std::time::Duration;

use backends_support::{InFlight, Reply, Server, config, llama_props, llama_tokens, sse};
use keyhole::RankerKind;
use keyhole::testing::rank::classifier::Classifier;
use keyhole::testing::tui::app::App;
use keyhole::testing::tui::driver::Outcome;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::theme::Theme;
use keyhole::{BackendConfig, BackendKind};
use keyhole::{testing::tui::command::Command, testing::tui::command::Pane};
use keyhole::{
    testing::tui::state::Action, testing::tui::state::AnalysisPhase, testing::tui::state::Mode,
    testing::tui::state::Phase, testing::tui::state::Setup, testing::tui::state::key_action,
};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(120);
/// RLPG's 62 proposals, the default context and the retrieved candidates 63–72.
const CANDIDATES: usize = 73;

/// The app opening the sample's demo hole on a first run, with its own directories (kept
/// alive beside it).
fn opening() -> (App, tempfile::TempDir) {
    let (scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.open(root, Some(keyhole::sample::DEMO_HOLE.to_string()));
    (app, scratch)
}

/// The app on the sample's demo hole once it has settled.
async fn opened() -> (App, tempfile::TempDir) {
    let (mut app, scratch) = opening();
    app.settle(LIMIT).await.unwrap();
    (app, scratch)
}

#[tokio::test]
async fn opens_the_sample_ranks_every_candidate_and_completes_top_k() {
    let (mut app, _scratch) = opened().await;
    let state = &app.state;
    assert_eq!(
        state.candidates.len(),
        CANDIDATES,
        "62 proposals, the default and 10 retrieved"
    );
    assert!(state.candidates[0].score.is_some());
    let target = state.view.as_ref().unwrap().hole.target.clone().unwrap();
    assert!(!target.is_empty());

    app.sender().send(Action::Command(Command::Run)).unwrap();
    let action = app.next().await.unwrap();
    app.dispatch(action);
    assert!(app.state.running(), "completions run in a task");
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), app.state.k);
    assert_eq!(app.state.focus, Pane::Completions);
    let done = app.state.cards[0].outcome.as_ref().unwrap();
    assert!((0.0..=1.0).contains(&done.scores.unwrap().edit_similarity));

    app.dispatch(Action::Command(Command::Explain));
    assert!(app.state.explained.is_some());
    assert!(
        app.state.status.contains("% copied"),
        "{}",
        app.state.status
    );
}

#[tokio::test]
async fn a_hole_after_non_ascii_text_builds_every_candidate() {
    // Once, the typed-hole probe panicked here and the screen stayed under a spinner.
    let dir = tempfile::tempdir().unwrap();
    let text = "\u{feff}package p;\nclass A {\n    String s = \"→\"; int n = s.length();\n}\n";
    std::fs::write(dir.path().join("A.java"), text).unwrap();
    for position in ["A.java:1:2", "A.java:3:17", "A.java:3:18"] {
        let (_scratch, dirs) = scratch_dirs();
        let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
        app.open(dir.path().to_path_buf(), Some(position.to_string()));
        app.settle(LIMIT).await.unwrap();
        assert_eq!(app.state.candidates.len(), CANDIDATES, "at {position}");
        assert!(!app.state.busy(), "at {position}: {}", app.state.status);
    }
}

#[tokio::test]
async fn cancel_aborts_a_run_and_moving_the_hole_recomputes() {
    let (mut app, _scratch) = opened().await;
    app.dispatch(Action::Command(Command::Run));
    app.dispatch(Action::Command(Command::Cancel));
    assert!(!app.state.running());
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
    assert_eq!(app.state.candidates.len(), CANDIDATES);
}

#[tokio::test]
async fn filter_narrows_the_candidates() {
    let (mut app, _scratch) = opened().await;
    app.dispatch(Action::Command(Command::Filter));
    for c in "sibling".chars() {
        let key = keyhole::testing::tui::state::key_action(
            &app.state,
            ratatui::crossterm::event::KeyEvent::from(ratatui::crossterm::event::KeyCode::Char(c)),
        )
        .unwrap();
        app.dispatch(key);
    }
    let visible = app.state.visible();
    assert!(!visible.is_empty() && visible.len() < CANDIDATES);
    assert!(
        visible
            .iter()
            .all(|&i| app.state.candidates[i].label.contains("sibling"))
    );
}

/// Wait for the next action and apply it (re-ranking keeps no spinner, so `settle` would not).
async fn next(app: &mut App) {
    let action = tokio::time::timeout(LIMIT, app.next()).await.unwrap();
    app.dispatch(action.unwrap());
}

fn press(app: &mut App, key: KeyEvent) {
    if let Some(action) = key_action(&app.state, key) {
        app.dispatch(action);
    }
}

#[tokio::test]
async fn an_edited_prompt_runs_as_one_more_scored_card() {
    let (mut app, _scratch) = opened().await;
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    let k = app.state.cards.len();
    press(&mut app, KeyEvent::from(KeyCode::Char('i')));
    let original = app.state.editor.as_ref().unwrap().tokens;
    for c in " // edited".chars() {
        press(&mut app, KeyEvent::from(KeyCode::Char(c)));
    }
    let editor = app.state.editor.as_ref().unwrap();
    assert!(editor.tokens > original, "the count follows the edit");
    assert!(keyhole::testing::tui::ui::prompt::title(&app.state).contains("editing cand"));
    press(
        &mut app,
        KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL),
    );
    assert!(app.state.editor.is_none() && app.state.running());
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), k + 1, "one more card");
    let card = app.state.cards.last().unwrap();
    assert!(card.edited.as_deref().unwrap().contains("// edited"));
    let done = card.outcome.as_ref().unwrap();
    assert!((0.0..=1.0).contains(&done.scores.unwrap().edit_similarity));
    assert_eq!(app.state.card_cursor, k);
}

#[tokio::test]
async fn opening_reports_indexing_progress() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.open(root, None);
    let mut statuses = Vec::new();
    while app.state.index.is_none() {
        let action = app.next().await.unwrap();
        app.dispatch(action);
        statuses.push(app.state.status.clone());
    }
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("indexing ") && s.ends_with(" files") && s.contains('/')),
        "{statuses:?}"
    );
    for stage in [
        "repository graph",
        "starting the backend",
        "loading the rankers",
    ] {
        assert!(
            statuses.iter().any(|s| s.contains(stage)),
            "{stage}: {statuses:?}"
        );
    }
    // No position: a real hole of a central file, not the licence header at 1:1.
    let state = &app.state;
    let hole = &state.view.as_ref().unwrap().hole;
    let index = state.index.as_ref().unwrap();
    let line = index.files[hole.file].line_text(hole.line).trim();
    assert!(hole.line > 0 && hole.column > 0, "{}", hole.display(index));
    assert!(!line.starts_with("package") && !line.starts_with("import") && !line.starts_with("/*"));
    assert!(!hole.target.as_deref().unwrap_or("").is_empty());
}

#[tokio::test]
async fn a_position_past_the_end_leaves_the_ui_with_one_line() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    let path = keyhole::sample::DEMO_HOLE
        .rsplit_once(':')
        .unwrap()
        .0
        .rsplit_once(':')
        .unwrap()
        .0;
    app.open(root, Some(format!("{path}:9999:1")));
    let mut left = false;
    while !left {
        let action = app.next().await.unwrap();
        left = app.dispatch(action).contains(&Outcome::Quit);
    }
    let Phase::Failed(error) = &app.state.phase else {
        panic!("{:?}", app.state.phase);
    };
    assert!(
        error.contains(&format!("{path}:9999: line out of range")),
        "{error}"
    );
    assert!(!error.contains('\n'));
}

#[tokio::test]
async fn cycling_the_ranker_re_ranks_and_names_it() {
    let (mut app, _scratch) = opened().await;
    assert!(keyhole::testing::tui::ui::candidates::title(&app.state).contains("ranker RLPG-H"));
    let rlpg_h: Vec<_> = app.state.candidates.iter().map(|c| c.id).collect();
    press(&mut app, KeyEvent::from(KeyCode::Char('o')));
    next(&mut app).await;
    let title = keyhole::testing::tui::ui::candidates::title(&app.state);
    assert!(title.contains("ranker RLPG-R"), "{title}");
    let status = &app.state.status;
    assert_eq!(app.state.candidates.len(), CANDIDATES);
    let rlpg_r: Vec<_> = app.state.candidates.iter().map(|c| c.id).collect();
    if app.state.candidates[0].score.is_some() {
        assert!(
            status.contains("re-ranked by the RLPG-R ranker"),
            "{status}"
        );
        assert_ne!(
            rlpg_h, rlpg_r,
            "the classifiers order the sample hole differently"
        );
    } else {
        // A classifier without an RLPG-R head says so instead of showing RLPG-H's scores.
        assert!(status.contains("RLPG-R cannot rank"), "{status}");
    }
    for name in ["BM25", "fixed", "online"] {
        press(&mut app, KeyEvent::from(KeyCode::Char('o')));
        next(&mut app).await;
        assert!(app.state.status.contains(name), "{}", app.state.status);
        assert!(app.state.candidates[0].score.is_some());
    }
    press(&mut app, KeyEvent::from(KeyCode::Char('o')));
    assert!(keyhole::testing::tui::ui::candidates::title(&app.state).contains("ranker RLPG-H"));
}

#[tokio::test]
async fn retrieved_candidates_follow_the_ranked_ones_and_complete_like_them() {
    let (mut app, _scratch) = opened().await;
    let state = &app.state;
    assert!(
        !state.retrieving(),
        "the embedded backend built 67, 69 and 70"
    );
    let ids: Vec<usize> = state.candidates.iter().map(|c| c.id.index()).collect();
    let first_retrieved = ids.iter().position(|&id| id == 63).unwrap();
    assert_eq!(
        ids[first_retrieved..first_retrieved + 10],
        [63, 64, 65, 66, 67, 68, 69, 70, 71, 72]
    );
    assert!(
        state.candidates[..first_retrieved]
            .iter()
            .all(|c| c.score.is_some())
    );
    let summary = state.candidate(CandidateId::SUMMARY).unwrap();
    let why = keyhole::testing::tui::ui::candidates::note(state, summary).unwrap();
    assert!(why.contains("does not follow instructions"), "{why}");
    assert!(
        state
            .candidate(CandidateId::REPOCODER)
            .unwrap()
            .retrieval_score
            .is_some()
    );
    let pick = state.procc.as_ref().unwrap().pick.unwrap();
    assert!(CandidateId::PROCC.contains(&pick));

    // Select two retrieved candidates and complete with them.
    app.dispatch(Action::Command(Command::FocusNext));
    for _ in 0..first_retrieved + 3 {
        app.dispatch(Action::Command(Command::Down));
    }
    assert_eq!(app.state.focused_candidate().unwrap().id, 66);
    app.dispatch(Action::Command(Command::Select));
    app.dispatch(Action::Command(Command::Down));
    app.dispatch(Action::Command(Command::Select));
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    let used: Vec<usize> = app
        .state
        .cards
        .iter()
        .map(|c| c.candidate.index())
        .collect();
    assert_eq!(used, [66, 67]);
    assert!(app.state.cards.iter().all(|c| c.outcome.is_ok()));
}

#[tokio::test]
async fn completes_with_the_chosen_backend_and_switches_backends_inside() {
    let (server, served) = loopback().await;
    let (_scratch, dirs) = scratch_dirs();
    let setup = Setup {
        backends: vec![BackendConfig::embedded(), served],
        backend: 1,
        budget: 2000,
        tokenizer: None,
    };
    let tokenizer = setup.tokenizer().name();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let mut app = app_with(setup, root, keyhole::sample::DEMO_HOLE, dirs).await;
    assert_eq!(app.state.candidates.len(), CANDIDATES);
    let prompt = &app.state.candidates[0].prompt;
    assert_eq!((prompt.budget, prompt.tokenizer), (2000, tokenizer));

    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    let texts = |app: &App| -> Vec<String> {
        let cards = app.state.cards.iter();
        cards
            .map(|c| {
                c.outcome
                    .as_ref()
                    .map_or_else(|e| e.to_string(), |d| d.text.clone())
            })
            .collect()
    };
    assert_eq!(texts(&app), vec!["fromServer();"; app.state.k]);
    let asked = server.requests().len();

    // b, up, enter: the embedded model completes from now on.
    app.dispatch(Action::Command(Command::Backends));
    assert_eq!(app.state.mode, Mode::Backends { cursor: 1 });
    press(&mut app, KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    press(&mut app, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.setup.backend, 0);
    assert_eq!(app.state.backend.as_ref().unwrap().name(), "embedded");
    assert_eq!(app.state.candidates.len(), CANDIDATES, "built again");
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), app.state.k);
    assert!(!texts(&app).contains(&"fromServer();".to_string()));
    assert_eq!(
        server.requests().len(),
        asked,
        "the server is asked no more"
    );
}

/// Room for RepoCoder's windows in half of it, counted either way.
const BUDGET: usize = 1200;

/// The app on the sample's demo hole completing with `server` as llama.cpp, budget [`BUDGET`].
async fn on_llama(server: &Server) -> (App, tempfile::TempDir) {
    let (scratch, dirs) = scratch_dirs();
    let setup = Setup {
        backends: vec![BackendConfig {
            name: "llama".into(),
            ..config(BackendKind::LlamaCpp, &server.base)
        }],
        backend: 0,
        budget: BUDGET,
        tokenizer: None,
    };
    let root = keyhole::sample::materialize(&dirs).unwrap();
    (
        app_with(setup, root, keyhole::sample::DEMO_HOLE, dirs).await,
        scratch,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_gets_no_more_cards_at_once_than_it_has_slots_and_the_wait_shows_apart() {
    const PAUSE: u64 = 150;
    let in_flight = InFlight::default();
    let counted = in_flight.clone();
    let server = Server::start(move |request, _| match request.path.as_str() {
        "/props" => llama_props(1, 8192),
        "/tokenize" => llama_tokens(request, 4),
        _ => {
            counted.hold(Duration::from_millis(PAUSE));
            match request.body["stream"] == json!(true) {
                true => Reply::Stream(sse(&[json!({ "content": "x", "stop": true })])),
                false => Reply::Json(200, json!({ "content": "x", "stop": true })),
            }
        }
    })
    .await;
    let (mut app, _scratch) = on_llama(&server).await;
    let done = run_in_turns(&mut app, u128::from(PAUSE)).await;
    assert_eq!(in_flight.most(), 1, "one slot: one request at a time");
    assert_eq!(done.len(), 3);
}

/// `r`'s cards, each checked to have taken at least `pause_ms` and waited that long for each
/// card before it.
async fn run_in_turns(
    app: &mut App,
    pause_ms: u128,
) -> Vec<keyhole::testing::tui::state::Finished> {
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    let done: Vec<_> = app
        .state
        .cards
        .iter()
        .map(|c| c.outcome.clone().unwrap())
        .collect();
    for (n, card) in done.iter().enumerate() {
        assert!(card.latency_ms >= pause_ms, "{n}: {card:?}");
        assert!(card.queued_ms >= n as u128 * pause_ms, "{n}: {card:?}");
    }
    done
}

#[tokio::test]
async fn a_server_that_counts_tokens_itself_gets_prompts_fitted_to_its_count() {
    // llama.cpp whose tokenizer makes a token of every two characters: about twice keyhole's.
    let server = Server::start(|request, _| match request.path.as_str() {
        "/tokenize" => llama_tokens(request, 2),
        // Retrieval's own requests (RepoCoder's first pass, ProCC's line) do not stream.
        _ if request.body["stream"] == json!(true) => {
            Reply::Stream(sse(&[json!({ "content": "fromServer();", "stop": true })]))
        }
        _ => Reply::Json(200, json!({ "content": "fromServer();", "stop": true })),
    })
    .await;
    let (mut app, _scratch) = on_llama(&server).await;
    // The focused candidate's prompt is fitted as it opens: the pane shows what a run sends, in
    // the words the backend picker uses too.
    let title = keyhole::testing::tui::ui::prompt::title(&app.state);
    assert!(
        title.contains("tokens (exact, counted by llama)"),
        "{title}"
    );
    let summary = keyhole::testing::tui::state::backend_summary(&app.state);
    assert!(
        summary.contains("budgets exact, counted by llama"),
        "{summary}"
    );

    // RepoCoder's second iteration and the hypothetical line are built from the backend's
    // answers during analysis; fitting composes them again without asking anew.
    let completions = |server: &Server| {
        let requests = server.requests().into_iter();
        // Not counting tokens, nor asking how many slots the server has.
        let completing =
            |r: &backends_support::Recorded| !["/tokenize", "/props"].contains(&r.path.as_str());
        requests.filter(completing).count()
    };
    let asked = completions(&server);
    let chosen = [7, 67, 69].map(CandidateId::nth);
    app.state.selected.extend(chosen);
    assert!(
        chosen
            .iter()
            .all(|&id| app.state.candidate(id).unwrap().applicable())
    );
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), chosen.len());
    assert_eq!(
        completions(&server) - asked,
        chosen.len(),
        "one request per card"
    );
    let sent: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.path != "/tokenize")
        .filter_map(|r| {
            let body = &r.body;
            let prompt = body["prompt"].as_str().or(body["input_prefix"].as_str());
            prompt.map(str::to_string)
        })
        .collect();
    for card in &app.state.cards {
        assert!(card.outcome.is_ok(), "{:?}", card.outcome);
        let fitted = card
            .fitted
            .as_ref()
            .expect("the card keeps the prompt it sent");
        let counted = fitted.backend_tokens.unwrap();
        assert!(
            counted <= BUDGET && counted * 50 >= BUDGET * 49,
            "{counted} of {BUDGET} for candidate {}",
            card.candidate
        );
        assert!(sent.contains(&fitted.text().trim_end().to_string()));
    }
    // Explaining a card shows the prompt it sent, with the server's count.
    app.dispatch(Action::Command(Command::Explain));
    let title = keyhole::testing::tui::ui::prompt::title(&app.state);
    assert!(
        title.contains(&format!("/{BUDGET} tokens (exact, counted by llama)")),
        "{title}"
    );
}

/// A loopback server that always answers `fromServer();`, and a backend entry for it.
async fn loopback() -> (Server, BackendConfig) {
    let server = Server::start(|_, _| {
        Reply::Stream(sse(&[
            json!({"choices": [{"index": 0, "text": "fromServer();"}]}),
        ]))
    })
    .await;
    let served = BackendConfig {
        name: "loopback".into(),
        ..config(BackendKind::OpenAi, &server.base)
    };
    (server, served)
}

/// The app on `root` at `position`, completing through a loopback server that always answers
/// `fromServer();`.
async fn served_app(
    root: std::path::PathBuf,
    position: &str,
    dirs: keyhole::Dirs,
) -> (App, Server) {
    let (server, served) = loopback().await;
    let setup = Setup {
        backends: vec![served],
        backend: 0,
        budget: 2000,
        tokenizer: None,
    };
    (app_with(setup, root, position, dirs).await, server)
}

/// The app with `setup` on `root` at `position`, settled.
async fn app_with(
    setup: Setup,
    root: std::path::PathBuf,
    position: &str,
    dirs: keyhole::Dirs,
) -> App {
    let settings = keyhole::Settings {
        backends: setup.backends,
        chosen: setup.backend,
        budget: setup.budget,
        tokenizer: setup.tokenizer,
        ranker: RankerKind::RlpgH,
        dirs: dirs.clone(),
        ..Default::default()
    };
    let options = keyhole::testing::tui::Options {
        settings,
        learning: keyhole::testing::session::learning_with(Classifier::bundled(), dirs),
        theme: None,
        warnings: Vec::new(),
        sample: keyhole::sample::Sample::Java,
        recorded: None,
    };
    let mut app = App::with_options(Keymap::builtin(), Theme::dark(), options);
    app.open(root, Some(position.to_string()));
    app.settle(LIMIT).await.unwrap();
    app
}

#[tokio::test]
async fn apply_shows_the_change_asks_writes_shows_the_new_file_and_undoes() {
    let (scratch, dirs) = scratch_dirs();
    let repo = scratch.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let before = "class A {\n    int f() {\n        return g();\n    }\n}\n";
    std::fs::write(repo.join("A.java"), before).unwrap();
    let (mut app, _server) = served_app(repo.clone(), "A.java:3:16", dirs).await;
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.focus, Pane::Completions);
    press(&mut app, KeyEvent::from(KeyCode::Char('a')));
    assert_eq!(app.state.mode, Mode::ConfirmApply);
    let (line, path, old, new) = keyhole::testing::tui::state::apply_preview(&app.state).unwrap();
    assert_eq!((line, path.as_str()), (3, "A.java"));
    assert_eq!(old, "        return g();");
    assert_eq!(new, "        return fromServer();");
    // n keeps the file as it is.
    press(&mut app, KeyEvent::from(KeyCode::Char('n')));
    assert_eq!(app.state.mode, Mode::Normal);
    assert_eq!(
        std::fs::read_to_string(repo.join("A.java")).unwrap(),
        before
    );
    press(&mut app, KeyEvent::from(KeyCode::Char('a')));
    press(&mut app, KeyEvent::from(KeyCode::Char('y')));
    while !app.state.status.starts_with("wrote") {
        next(&mut app).await;
    }
    app.settle(LIMIT).await.unwrap();
    let written = std::fs::read_to_string(repo.join("A.java")).unwrap();
    assert_eq!(
        written,
        before.replace("return g();", "return fromServer();")
    );
    let shown: String = app.state.lines[2].iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        shown.trim_end(),
        "        return fromServer();",
        "the source pane shows it"
    );
    // The repository was read again: the hole's target is the text as written.
    let target = |app: &App| app.state.view.as_ref().unwrap().hole.target.clone();
    assert_eq!(target(&app).as_deref(), Some("fromServer();"));
    // A second write stacks on the first; undo takes them back in turn, the last first.
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    press(&mut app, KeyEvent::from(KeyCode::Char('a')));
    press(&mut app, KeyEvent::from(KeyCode::Char('y')));
    while !app.state.status.contains("2 writes to undo") {
        next(&mut app).await;
    }
    app.settle(LIMIT).await.unwrap();
    press(&mut app, KeyEvent::from(KeyCode::Char('u')));
    while !app.state.status.contains("1 more to undo") {
        next(&mut app).await;
    }
    app.settle(LIMIT).await.unwrap();
    press(&mut app, KeyEvent::from(KeyCode::Char('u')));
    while !app.state.status.starts_with("undone:") {
        next(&mut app).await;
    }
    app.settle(LIMIT).await.unwrap();
    assert_eq!(target(&app).as_deref(), Some("g();"));
    assert_eq!(
        std::fs::read_to_string(repo.join("A.java")).unwrap(),
        before
    );
    let shown: String = app.state.lines[2].iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(shown.trim_end(), "        return g();");
}

#[tokio::test]
async fn apply_leaves_the_bundled_sample_alone_and_says_why() {
    let (_scratch, dirs) = scratch_dirs();
    let root = keyhole::sample::materialize(&dirs).unwrap();
    let (mut app, _server) = served_app(root.clone(), keyhole::sample::DEMO_HOLE, dirs).await;
    app.state.shared_sample = true;
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    press(&mut app, KeyEvent::from(KeyCode::Char('a')));
    assert_eq!(app.state.mode, Mode::Normal);
    assert!(
        app.state.status.contains("bundled sample"),
        "{}",
        app.state.status
    );
}

/// A model that takes turns (as the local backend does): each request computes for `PAUSE`,
/// one at a time behind a lock when `lock` is set, else together as one batch; it counts how
/// many are in flight at once.
#[derive(Default)]
struct TakesTurns {
    lock: Option<tokio::sync::Mutex<()>>,
    in_flight: InFlight,
}

const PAUSE: Duration = Duration::from_millis(300);

#[async_trait::async_trait]
impl keyhole::Backend for TakesTurns {
    fn name(&self) -> &str {
        "takes-turns"
    }

    fn counting(&self) -> keyhole::TokenCounting {
        keyhole::TokenCounting::Approximate
    }

    fn takes_turns(&self) -> bool {
        true
    }

    async fn complete(
        &self,
        _request: &keyhole::CompletionRequest,
        deltas: Option<&tokio::sync::mpsc::UnboundedSender<keyhole::Delta>>,
    ) -> Result<Vec<keyhole::Completion>, keyhole::BackendError> {
        let started = std::time::Instant::now();
        let _turn = match &self.lock {
            Some(lock) => Some(lock.lock().await),
            None => None,
        };
        if let Some(deltas) = deltas {
            let _ = deltas.send(keyhole::Delta::started());
        }
        self.in_flight.wait(PAUSE).await;
        Ok(vec![keyhole::Completion {
            text: "x".into(),
            latency: started.elapsed(),
            model_prompt_tokens: None,
        }])
    }
}

#[tokio::test]
async fn a_card_s_time_is_its_own_and_the_wait_for_its_turn_is_shown_apart() {
    let (mut app, _scratch) = opened().await;
    let one_at_a_time = TakesTurns {
        lock: Some(Default::default()),
        ..TakesTurns::default()
    };
    app.state.backend = Some(std::sync::Arc::new(one_at_a_time));
    let done = run_in_turns(&mut app, PAUSE.as_millis()).await;
    assert_eq!(done.len(), 3);
    // The last one waited for two turns and then took one: its time leaves the wait out.
    assert!(done[2].latency_ms < done[2].queued_ms, "{:?}", done[2]);
}

#[tokio::test]
async fn the_cards_requests_reach_a_model_that_takes_turns_together_so_it_can_batch_them() {
    let (mut app, _scratch) = opened().await;
    let model = std::sync::Arc::new(TakesTurns::default());
    app.state.backend = Some(model.clone());
    app.dispatch(Action::Command(Command::Run));
    app.settle(LIMIT).await.unwrap();
    assert_eq!(app.state.cards.len(), 3);
    assert!(app.state.cards.iter().all(|c| c.outcome.is_ok()));
    assert_eq!(model.in_flight.most(), 3, "requests in flight at once");
}

/// The retrieved candidates that search the repository's indexes.
const SEARCHED: [CandidateId; 5] = [
    CandidateId::FILE_BM25,
    CandidateId::IDENTIFIER_USAGE,
    CandidateId::RANDOM_CONTEXT,
    CandidateId::REPOCODER,
    CandidateId::LEXICAL,
];

/// Actions until a hole after generation `after` shows its ranked candidates; the statuses
/// shown on the way.
async fn until_ranked(app: &mut App, after: Option<u64>) -> Vec<String> {
    let mut statuses = Vec::new();
    loop {
        next(app).await;
        statuses.push(app.state.status.clone());
        let view = app.state.view.as_ref();
        let newer = view.is_some_and(|v| after.is_none_or(|after| v.generation > after));
        if newer && view.is_some_and(|v| v.analysis == AnalysisPhase::Built) {
            return statuses;
        }
    }
}

/// The ranked proposals show while the searched candidates still wait for the search
/// indexes, and their rows read as pending.
fn assert_ranked_before_searched(app: &App) {
    let state = &app.state;
    assert_eq!(state.candidates.len(), CANDIDATES);
    assert!(state.candidates[0].score.is_some(), "ranked at once");
    for id in SEARCHED {
        let row = state.candidate(id).unwrap();
        assert!(row.building(), "{id} shows before its index is ready");
        let note = keyhole::testing::tui::ui::candidates::note(state, row);
        assert_eq!(note.as_deref(), Some("waiting for the search indexes"));
    }
    assert!(state.busy(), "the spinner runs while they build");
    assert!(
        state.status.contains("building the search indexes"),
        "{}",
        state.status
    );
}

#[tokio::test]
async fn a_first_open_shows_progress_then_ranked_proposals_before_the_search_indexes() {
    let (mut app, _scratch) = opening();
    let statuses = until_ranked(&mut app, None).await;
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("indexing ") && s.ends_with(" files") && s.contains('/')),
        "files indexed of total: {statuses:?}"
    );
    assert_ranked_before_searched(&app);
    app.settle(LIMIT).await.unwrap();
    for id in SEARCHED {
        assert!(!app.state.candidate(id).unwrap().building(), "{id} filled");
    }
    assert!(
        app.state
            .candidate(CandidateId::REPOCODER)
            .unwrap()
            .applicable()
    );
}

#[tokio::test]
async fn a_first_open_counts_the_search_indexes_in_the_status_line_while_they_build() {
    let (mut app, _scratch) = opening();
    until_ranked(&mut app, None).await;
    // The statuses shown from the ranked candidates until the searched rows are filled.
    let mut statuses = Vec::new();
    let searched = |app: &App| {
        SEARCHED
            .iter()
            .all(|&id| !app.state.candidate(id).unwrap().building())
    };
    within("the searched rows filled", async {
        while !searched(&app) {
            next(&mut app).await;
            statuses.push(app.state.status.clone());
        }
    })
    .await;
    // "RepoCoder: N/M windows tokenized", counting up to all of them.
    let counts: Vec<(usize, usize)> = statuses
        .iter()
        .filter_map(|s| {
            let count = s
                .split("RepoCoder: ")
                .nth(1)?
                .split(" windows tokenized")
                .next()?;
            let (done, total) = count.split_once('/')?;
            Some((done.parse().ok()?, total.parse().ok()?))
        })
        .collect();
    assert!(counts.len() > 1, "counts while they build: {statuses:?}");
    assert!(counts.is_sorted(), "{counts:?}");
    let total = counts[0].1;
    assert!(total > 10 && counts.iter().all(|&(done, all)| done < all && all == total));
    let indexing = format!("(RepoCoder: {total} windows tokenized, indexing them)");
    assert!(
        statuses.iter().any(|s| s.contains(&indexing)),
        "then all of them: {statuses:?}"
    );
    assert!(
        statuses.iter().any(|s| s.contains("(BM25: ")),
        "files counted too: {statuses:?}"
    );
    assert!(
        !app.state.status.contains("tokenized"),
        "{}",
        app.state.status
    );
}

#[tokio::test]
async fn a_first_open_shows_the_hole_s_file_before_the_repository_is_indexed() {
    let (mut app, _scratch) = opening();
    within("the file shown", async {
        while app.state.lines.is_empty() {
            next(&mut app).await;
        }
    })
    .await;
    assert!(app.state.index.is_none(), "shown before the index is ready");
    assert_eq!(app.state.cursor, (93, 31), "the cursor on the hole");
    let title = keyhole::testing::tui::ui::source::title(&app.state);
    assert_eq!(title, "OrderService.java  94:32");
    let line: String = app.state.lines[93]
        .iter()
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(line.contains("findByCustomerId"), "{line}");
    app.settle(LIMIT).await.unwrap();
    assert!(app.state.opening_file.is_none() && app.state.index.is_some());
}

#[tokio::test]
async fn after_an_edit_the_ranked_proposals_show_before_the_updated_search_fills_the_rest() {
    let (scratch, dirs) = scratch_dirs();
    let repo = scratch.path().join("repo");
    crate::common::copy_sample(&repo);
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.open(repo.clone(), Some(keyhole::sample::DEMO_HOLE.to_string()));
    app.settle(LIMIT).await.unwrap();
    let before = app.state.view.as_ref().unwrap().generation;
    // A person's editor (E) changed a file: the hole's, after the hole.
    let hole_file = keyhole::sample::DEMO_HOLE.split(':').next().unwrap();
    let mut text = std::fs::read_to_string(repo.join(hole_file)).unwrap();
    text.push_str("\nclass EditedSince { int editedMarker() { return 1; } }\n");
    std::fs::write(repo.join(hole_file), text).unwrap();
    app.dispatch(Action::Edited(Ok(())));
    until_ranked(&mut app, Some(before)).await;
    assert_ranked_before_searched(&app);
    app.settle(LIMIT).await.unwrap();
    // Filled from the indexes brought up to date: as a session opened afresh on the edited
    // repository builds them.
    assert_searched_as_a_fresh_session_builds_them(&app, &repo);
}

/// The searched rows shown are those a session opened afresh on `repo` builds at the demo
/// hole.
fn assert_searched_as_a_fresh_session_builds_them(app: &App, repo: &std::path::Path) {
    let (_fresh_scratch, fresh_dirs) = scratch_dirs();
    let settings = keyhole::Settings {
        dirs: fresh_dirs,
        ..Default::default()
    };
    let session = keyhole::Session::open(repo, &settings).unwrap();
    let hole = keyhole::Hole::parse(session.index(), keyhole::sample::DEMO_HOLE).unwrap();
    let fresh = session.analyse(&hole);
    for id in SEARCHED {
        let (shown, built) = (app.state.candidate(id).unwrap(), fresh.get(id).unwrap());
        assert_eq!(shown.availability, built.availability, "{id}");
        assert_eq!(shown.prompt.text(), built.prompt.text(), "{id}");
    }
}

/// The app on a copy of the sample (which a test may change) at its demo hole, settled; the
/// copy's root.
async fn opened_copy() -> (App, std::path::PathBuf, tempfile::TempDir) {
    let (scratch, dirs) = scratch_dirs();
    let repo = scratch.path().join("repo");
    crate::common::copy_sample(&repo);
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.open(repo.clone(), Some(keyhole::sample::DEMO_HOLE.to_string()));
    app.settle(LIMIT).await.unwrap();
    (app, repo, scratch)
}

/// What another program's save puts in the hole's file: a line right after the hole's line
/// (so the hole stays where it is, and RLPG's lines after the hole read it).
const MARKER: &str = "        // savedByAnotherEditor";

/// Save the demo hole's file in `repo` as another editor would, with [`MARKER`] after the hole.
fn save_from_another_editor(repo: &std::path::Path) {
    let (file, line) = keyhole::sample::DEMO_HOLE
        .split_once(':')
        .map(|(file, at)| {
            (
                file,
                at.split(':').next().unwrap().parse::<usize>().unwrap(),
            )
        })
        .unwrap();
    let text = std::fs::read_to_string(repo.join(file)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(line, MARKER);
    std::fs::write(repo.join(file), lines.join("\n") + "\n").unwrap();
}

fn shows_the_saved_text(app: &App) -> bool {
    let marker = MARKER.trim();
    app.state
        .candidates
        .iter()
        .any(|c| c.prompt.text().contains(marker))
}

/// `work` on the app, failing the test rather than hanging where it never ends.
async fn within<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {LIMIT:?}"))
}

#[tokio::test]
async fn a_file_another_program_saves_is_read_again_and_the_rows_show_it() {
    let (mut app, repo, _scratch) = opened_copy().await;
    let before = app.state.view.as_ref().unwrap().generation;
    assert!(!shows_the_saved_text(&app));
    // Nobody tells the app: it notices the save itself.
    save_from_another_editor(&repo);
    let statuses = within("the save noticed", until_ranked(&mut app, Some(before))).await;
    assert!(
        statuses.iter().any(|s| s.contains("changed on disk")),
        "{statuses:?}"
    );
    assert!(app.state.candidates[0].score.is_some(), "ranked at once");
    assert!(
        shows_the_saved_text(&app),
        "a proposal reads the saved line"
    );
    let shown: String = app.state.lines[94]
        .iter()
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(
        shown.trim_end(),
        MARKER,
        "the source pane shows the file as saved"
    );
    app.settle(LIMIT).await.unwrap();
    assert_searched_as_a_fresh_session_builds_them(&app, &repo);
}

#[tokio::test]
async fn a_save_under_a_prompt_being_edited_waits_for_the_editor_and_keeps_the_edit() {
    let (mut app, repo, _scratch) = opened_copy().await;
    let before = app.state.view.as_ref().unwrap().generation;
    press(&mut app, KeyEvent::from(KeyCode::Char('i')));
    let id = app.state.editor.as_ref().unwrap().candidate;
    for c in " // typed by hand".chars() {
        press(&mut app, KeyEvent::from(KeyCode::Char(c)));
    }
    save_from_another_editor(&repo);
    within("the save noticed", async {
        while !app.state.status.contains("changed on disk") {
            next(&mut app).await;
        }
    })
    .await;
    // Said, not done: the editor and what was typed in it stay, the candidates as they were.
    let status = app.state.status.clone();
    let hole_file = keyhole::sample::DEMO_HOLE.split(':').next().unwrap();
    assert!(status.contains(hole_file), "{status}");
    assert!(status.contains("leave the prompt editor"), "{status}");
    assert_eq!(app.state.mode, Mode::Edit);
    assert!(
        app.state
            .editor
            .as_ref()
            .unwrap()
            .text()
            .contains("typed by hand")
    );
    assert_eq!(app.state.view.as_ref().unwrap().generation, before);
    assert!(!shows_the_saved_text(&app));
    // Leaving the editor keeps the edit, and the repository is read again.
    press(&mut app, KeyEvent::from(KeyCode::Esc));
    within("read again", until_ranked(&mut app, Some(before))).await;
    assert!(shows_the_saved_text(&app));
    let kept = app.state.kept_edit(id).expect("the edit kept at the hole");
    assert!(kept.contains("typed by hand"), "{kept}");
}
