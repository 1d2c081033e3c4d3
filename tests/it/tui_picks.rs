//! A pick in the TUI teaches both learners: the online ranker and, for a completion from one of
//! ProCC's perspectives, its LinUCB bandit, both saved in the data directory (a temporary one
//! given to the app).

use std::time::Duration;

use keyhole::CandidateId;
use keyhole::testing::tui::app::App;
use keyhole::testing::tui::command::Command;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::state::Action;
use keyhole::testing::tui::theme::Theme;
use keyhole::{testing::rank::bandit, testing::rank::bandit::LinUcb};

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn picking_a_procc_perspective_updates_the_bandit_and_the_online_ranker() {
    let (_scratch, dirs) = crate::common::scratch_dirs();
    let data = dirs.data.clone().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let root = keyhole::sample::materialize(&dirs).unwrap();
        let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs);
        app.open(root, Some(keyhole::sample::DEMO_HOLE.to_string()));
        app.settle(LIMIT).await.unwrap();
        let procc = app
            .state
            .procc
            .clone()
            .expect("ProCC chose among its perspectives");
        let shown: Vec<CandidateId> = CandidateId::PROCC
            .into_iter()
            .filter(|&id| app.state.candidate(id).unwrap().applicable())
            .collect();
        assert!(shown.len() >= 2, "the sample hole has {shown:?}");
        app.state.selected.extend(&shown);
        app.dispatch(Action::Command(Command::Run));
        app.settle(LIMIT).await.unwrap();
        // Pick the completion of the second perspective shown.
        app.dispatch(Action::Command(Command::Pick2));
        // The count of picks the online ranker learnt from, then the report.
        while app.state.status.starts_with("picked completion") {
            let action = tokio::time::timeout(LIMIT, app.next()).await.unwrap();
            app.dispatch(action.unwrap());
        }
        let status = &app.state.status;
        assert!(status.contains("ProCC bandit updated"), "{status}");
        assert_eq!(app.state.online_picks(), 1);

        let (saved, warning) = LinUcb::load(&data.join(bandit::FILE));
        assert_eq!(warning, None);
        let pulls = saved.pulls();
        for (arm, id) in CandidateId::PROCC.into_iter().enumerate() {
            let expected = u64::from(shown.contains(&id) && procc.available[arm]);
            assert_eq!(pulls[arm], expected, "arm {arm} (candidate {id})");
        }
        let picked_arm = CandidateId::PROCC.iter().position(|&id| id == shown[1]);
        assert_eq!(
            saved.choose(
                keyhole::testing::rank::procc_context(&procc),
                procc.available
            ),
            picked_arm,
            "rewarded 1, the picked perspective now leads at this hole"
        );
        let online = std::fs::read_to_string(data.join("online-ranker.json")).unwrap();
        assert!(online.contains(&format!("\"{}\"", shown[1])), "{online}");
        let log = std::fs::read_to_string(data.join("feedback.jsonl")).unwrap();
        assert_eq!(log.lines().count(), 1);
    });
}
