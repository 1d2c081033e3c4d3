//! The CLI and the UI give the same answer for the same hole: both build it through the
//! library's session, on a fresh install (their own empty directories).

use std::time::Duration;

use keyhole::CandidateId;
use keyhole::testing::tui::app::App;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::theme::Theme;
use serde_json::Value;

use crate::common::{self, scratch_dirs};

#[tokio::test(flavor = "multi_thread")]
async fn proposals_and_the_ui_rank_the_same_candidates_and_pick_the_same_perspective() {
    let scratch = tempfile::tempdir().unwrap();
    let output = common::keyhole(
        &[
            "proposals",
            &common::sample(),
            keyhole::sample::DEMO_HOLE,
            "--json",
        ],
        scratch.path(),
    );
    let cli: Value = serde_json::from_slice(&common::ok(output).stdout).unwrap();

    let (_ui_scratch, dirs) = scratch_dirs();
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
    app.open(
        common::sample_path(),
        Some(keyhole::sample::DEMO_HOLE.to_string()),
    );
    app.settle(Duration::from_secs(120)).await.unwrap();
    let state = &app.state;

    let cli_ranking: Vec<usize> = serde_json::from_value(cli["ranking"].clone()).unwrap();
    let ui_ranking: Vec<usize> = state
        .candidates
        .iter()
        .filter(|c| c.score.is_some())
        .map(|c| c.id.index())
        .collect();
    assert_eq!(cli_ranking, ui_ranking);
    assert!(!cli_ranking.is_empty());

    let ui_pick = state.procc.as_ref().and_then(|p| p.pick);
    assert!(ui_pick.is_some(), "a fresh bandit picks a perspective");
    assert_eq!(
        cli["procc_pick"].as_u64().map(|n| n as usize),
        ui_pick.map(CandidateId::index)
    );

    // Every retrieved candidate: the same applicability and the same prompt size.
    for row in cli["retrieved"].as_array().unwrap() {
        let id = CandidateId::nth(row["id"].as_u64().unwrap() as usize);
        let shown = state.candidate(id).unwrap();
        assert_eq!(
            row["applicable"].as_bool(),
            Some(shown.applicable()),
            "{id}"
        );
        assert_eq!(row["tokens"].as_u64(), Some(shown.tokens() as u64), "{id}");
    }
}

/// `--fidelity code` reaches the UI as it reaches `keyhole prompt`: the same prompt for a
/// proposal whose text the two profiles build differently (method names alone, in RLPG's
/// code, against full signatures).
#[tokio::test(flavor = "multi_thread")]
async fn the_ui_and_prompt_build_the_code_profile_alike() {
    use keyhole::Fidelity;
    use keyhole::testing::rank::classifier::Classifier;

    let id = CandidateId::nth(9); // parent_class MN
    let scratch = tempfile::tempdir().unwrap();
    let prompt = |fidelity: &str| {
        let output = common::keyhole(
            &[
                "prompt",
                &common::sample(),
                keyhole::sample::DEMO_HOLE,
                "--id",
                "9",
                "--fidelity",
                fidelity,
            ],
            scratch.path(),
        );
        String::from_utf8(common::ok(output).stdout).unwrap()
    };
    let (paper, code) = (prompt("paper"), prompt("code"));
    assert_ne!(paper, code, "the profiles build this proposal differently");

    let (_ui_scratch, dirs) = scratch_dirs();
    let settings = keyhole::Settings {
        profile: Fidelity::Code,
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
    app.open(
        common::sample_path(),
        Some(keyhole::sample::DEMO_HOLE.to_string()),
    );
    app.settle(Duration::from_secs(120)).await.unwrap();
    let shown = app.state.candidate(id).unwrap().prompt.text();
    assert_eq!(shown, code);
}
