//! The UI's time from start to its first ranked candidates on a large repository: the app (the
//! real state and driver, no terminal) opened at a file, driven through its action channel as
//! the terminal loop drives it, and timed from `open` to the state whose candidates pane shows
//! ranked proposals, to the rows of the candidates that search the repository filled, and to
//! everything settled (the backend's candidates included). Once with an empty cache (cold),
//! then with the cache that run wrote (warm). Also the longest the status stood still before
//! the first ranked candidates (what a person sees as a frozen screen), and, while the search
//! indexes build, a key press (the cursor moving) and a full 200x60 frame every 16 ms, timed
//! from the key to the finished frame (the target is 16 ms). Asserts nothing.
//!
//! KEYHOLE_BENCH_REPO names the repository (default /work/corpus/guava-libraries); the bench
//! skips, saying so, where it is absent. KEYHOLE_BENCH_FILE names the file it opens at
//! (default guava's ImmutableMap.java where it exists, else a central file of the repository).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keyhole::CandidateId;
use keyhole::testing::tui::app::App;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::state::{AnalysisPhase, key_action};
use keyhole::testing::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

const FILE: &str = "guava/src/com/google/common/collect/ImmutableMap.java";
const LIMIT: Duration = Duration::from_secs(600);
const FRAME: Duration = Duration::from_millis(16);

/// When each moment came, from `open`.
#[derive(Default)]
struct Moments {
    ranked: Option<Duration>,
    searched: Option<Duration>,
    settled: Option<Duration>,
    /// The longest the status stood still before the first ranked candidates.
    still: Duration,
    /// Status changes before the first ranked candidates.
    statuses: usize,
    /// Key to finished frame while the searched rows were pending.
    frames: Vec<Duration>,
}

fn main() {
    let Some((name, root)) = support::large_repo() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dirs = keyhole::Dirs::under(scratch.path());
    for cache in ["cold", "warm"] {
        let moments = runtime.block_on(open(&root, &dirs));
        let secs =
            |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64()));
        println!(
            "tui start, {name}, {cache} cache: first ranked candidates {}  searched rows filled {}  settled {}  (longest still status before ranked {:.2} s over {} statuses)",
            secs(moments.ranked),
            secs(moments.searched),
            secs(moments.settled),
            moments.still.as_secs_f64(),
            moments.statuses,
        );
        let mut frames = moments.frames;
        frames.sort();
        if let Some(max) = frames.last() {
            let ms = |d: &Duration| d.as_secs_f64() * 1e3;
            println!(
                "  key→frame while the search indexes built: {} keys, p50 {:.2} ms  max {:.2} ms",
                frames.len(),
                ms(&frames[frames.len() / 2]),
                ms(max),
            );
        }
    }
}

/// Open the app on `root` with `dirs` (its cache in them) and time it.
async fn open(root: &Path, dirs: &keyhole::Dirs) -> Moments {
    let file = std::env::var("KEYHOLE_BENCH_FILE").unwrap_or_else(|_| FILE.to_string());
    let position = root.join(&file).is_file().then_some(file);
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs.clone());
    let start = Instant::now();
    app.open(PathBuf::from(root), position);
    let mut moments = Moments::default();
    let (mut status, mut since) = (app.state.status.clone(), start);
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("a test terminal");
    let mut keys = [KeyCode::Down, KeyCode::Up].into_iter().cycle();
    while moments.settled.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the app settles");
        // While the searched rows are pending a person keeps working: a key and a frame.
        let waiting = moments.ranked.is_some() && moments.searched.is_none();
        if waiting {
            let key = KeyEvent::from(keys.next().expect("keys cycle"));
            let pressed = Instant::now();
            if let Some(action) = key_action(&app.state, key) {
                app.dispatch(action);
            }
            terminal
                .draw(|f| {
                    keyhole::testing::tui::ui::draw(f, &app.state);
                })
                .expect("a frame");
            moments.frames.push(pressed.elapsed());
        }
        let wait = if waiting { FRAME } else { LIMIT };
        let Ok(action) = tokio::time::timeout(wait, app.next()).await else {
            continue;
        };
        app.dispatch(action.expect("the channel stays open"));
        let now = Instant::now();
        let state = &app.state;
        if moments.ranked.is_none() && state.status != status {
            moments.still = moments.still.max(now - since);
            moments.statuses += 1;
            (status, since) = (state.status.clone(), now);
        }
        let built = state
            .view
            .as_ref()
            .is_some_and(|v| v.analysis == AnalysisPhase::Built);
        if built && moments.ranked.is_none() && state.candidates.iter().any(|c| c.score.is_some()) {
            moments.ranked = Some(now - start);
            moments.still = moments.still.max(now - since);
        }
        let searching = [CandidateId::FILE_BM25, CandidateId::REPOCODER];
        let filled = searching
            .iter()
            .all(|&id| state.candidate(id).is_some_and(|c| !c.building()));
        if built && moments.searched.is_none() && filled {
            moments.searched = Some(now - start);
        }
        if built && !state.busy() {
            moments.settled = Some(now - start);
        }
    }
    moments
}
