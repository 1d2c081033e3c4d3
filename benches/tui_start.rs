//! The UI's time from start to its first ranked candidates on a large repository: the app (the
//! real state and driver, no terminal) opened at a file, driven through its action channel as
//! the terminal loop drives it, and timed from `open` to the state whose source pane shows the
//! hole's file, to the state whose candidates pane shows ranked proposals, to the rows of the
//! candidates that search the repository filled, and to everything settled (the backend's
//! candidates included). Once with an empty cache (cold), then with the cache that run wrote
//! (warm; `KEYHOLE_BENCH_WARM_RUNS` times, 1 unless set, for a profiler). Also the longest the
//! status stood still before the first ranked candidates (what a person sees as a frozen
//! screen) and while the searched rows were pending, and, while the search indexes build, a key press (the cursor moving) and a full
//! 200x60 frame every 16 ms, timed from the key to the finished frame (the target is 16 ms).
//! Beside each warm run, the same without the UI: the session opened on the same cache and
//! the hole's proposals ranked, what the UI adds on top of them told apart.
//! Then another program saves the hole's file with one more line: timed from the save to the
//! UI noticing it, to the re-ranked proposals, to the searched rows filled again and to
//! everything settled; and one poll of the watch on the repository's files. The repository is
//! copied to a scratch folder first, so the save changes only the copy. Asserts nothing.
//!
//! KEYHOLE_BENCH_REPO names the repository (default /work/corpus/guava-libraries); the bench
//! skips, saying so, where it is absent. KEYHOLE_BENCH_FILE names the file it opens at
//! (default guava's ImmutableMap.java where it exists, else a central file of the repository).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

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

/// When each moment came, from `open` (or from the save).
#[derive(Default)]
struct Moments {
    /// The source pane shows the hole's file, the hole marked.
    shown: Option<Duration>,
    /// The UI said a file changed on disk (after a save).
    noticed: Option<Duration>,
    ranked: Option<Duration>,
    searched: Option<Duration>,
    settled: Option<Duration>,
    /// The longest the status stood still before the first ranked candidates.
    still: Duration,
    /// Status changes before the first ranked candidates.
    statuses: usize,
    /// The longest the status stood still while the searched rows were pending, and how many
    /// times it changed meanwhile (the search indexes' counts).
    still_searching: Duration,
    search_statuses: usize,
    /// Key to finished frame while the searched rows were pending.
    frames: Vec<Duration>,
}

fn main() {
    let Some((name, original)) = support::large_repo() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let root = scratch.path().join(&name);
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .args([&original, &root])
        .status();
    assert!(copied.is_ok_and(|s| s.success()), "the repository copied");
    // Modification times in the past, as a repository's are when a person opens it.
    std::thread::sleep(Duration::from_secs(3));
    let dirs = keyhole::Dirs::under(&scratch.path().join("dirs"));
    let warm_runs: usize = std::env::var("KEYHOLE_BENCH_WARM_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let runs = std::iter::once("cold").chain(std::iter::repeat_n("warm", warm_runs));
    let last = warm_runs;
    for (run, cache) in runs.enumerate() {
        let (moments, app) = runtime.block_on(open(&root, &dirs));
        report(&format!("tui start, {name}, {cache} cache"), &moments);
        if run > 0 {
            headless(&root, &dirs);
        }
        if run == last {
            runtime.block_on(saved(app, &name));
        }
    }
}

/// What the UI's first ranked candidates cost without the UI, on the same cache: the session
/// opened as the UI opens it and the hole's ranked proposals, in this process.
fn headless(root: &Path, dirs: &keyhole::Dirs) {
    let start = Instant::now();
    let settings = keyhole::Settings {
        dirs: dirs.clone(),
        ..keyhole::Settings::default()
    };
    let session = keyhole::Session::open(root, &settings).expect("the session opens");
    let file = std::env::var("KEYHOLE_BENCH_FILE").unwrap_or_else(|_| FILE.to_string());
    let position = root.join(&file).is_file().then_some(file);
    let hole = keyhole::Hole::locate(session.index(), position.as_deref().unwrap_or_default())
        .expect("the hole");
    let analysis = session.analyse_before_search(&hole, settings.ranker);
    assert!(analysis.candidates.iter().any(|c| c.score.is_some()));
    println!(
        "  headless, same cache: session opened and the hole's proposals ranked {}",
        secs(Some(start.elapsed()))
    );
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("never".into(), |d| format!("{:.3} s", d.as_secs_f64()))
}

fn report(what: &str, moments: &Moments) {
    println!(
        "{what}: hole's file shown {}  first ranked candidates {}  searched rows filled {}  settled {}  (longest still status before ranked {:.2} s over {} statuses)",
        secs(moments.shown),
        secs(moments.ranked),
        secs(moments.searched),
        secs(moments.settled),
        moments.still.as_secs_f64(),
        moments.statuses,
    );
    println!(
        "  while the search indexes built: longest still status {:.2} s over {} statuses",
        moments.still_searching.as_secs_f64(),
        moments.search_statuses,
    );
    let mut frames = moments.frames.clone();
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

/// Another program saves the hole's file of the settled `app` with one more line: timed from
/// the save; then one poll of a watch on the repository's files.
async fn saved(mut app: App, name: &str) {
    let (index, view) = (app.state.index.clone(), app.state.view.clone());
    let (Some(index), Some(view)) = (index, view) else {
        return;
    };
    let path = index.root.join(&index.files[view.hole.file].path);
    let mut text = std::fs::read_to_string(&path).expect("the hole's file");
    text.push_str("\n// saved by another editor\n");
    let start = Instant::now();
    std::fs::write(&path, text).expect("the save");
    let moments = follow(&mut app, start, Some(view.generation)).await;
    println!(
        "  after another program saved the hole's file: noticed {}  re-ranked {}  searched rows filled {}  settled {}",
        secs(moments.noticed),
        secs(moments.ranked),
        secs(moments.searched),
        secs(moments.settled),
    );
    let Some(index) = app.state.index.clone() else {
        return;
    };
    let mut watch = keyhole::testing::tui::driver::watch::Watch::new(index, SystemTime::now());
    watch.poll();
    let polls: Vec<Duration> = (0..20)
        .map(|_| {
            let start = Instant::now();
            watch.poll();
            start.elapsed()
        })
        .collect();
    let (min, max) = (polls.iter().min(), polls.iter().max());
    if let (Some(min), Some(max)) = (min, max) {
        println!(
            "  one poll of the watch on {name}'s {} files: {:.2}–{:.2} ms",
            app.state.index.as_ref().map_or(0, |i| i.files.len()),
            min.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
        );
    }
}

/// Open the app on `root` with `dirs` (its cache in them) and time it; the app, settled.
async fn open(root: &Path, dirs: &keyhole::Dirs) -> (Moments, App) {
    let file = std::env::var("KEYHOLE_BENCH_FILE").unwrap_or_else(|_| FILE.to_string());
    let position = root.join(&file).is_file().then_some(file);
    let mut app = App::new(Keymap::builtin(), Theme::dark(), dirs.clone());
    let start = Instant::now();
    app.open(PathBuf::from(root), position);
    let moments = follow(&mut app, start, None).await;
    (moments, app)
}

/// Drive `app` until it settles on a hole after generation `after` (any, when none), timing
/// each moment from `start`.
async fn follow(app: &mut App, start: Instant, after: Option<u64>) -> Moments {
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
        if moments.noticed.is_none() && state.status.contains("changed on disk") {
            moments.noticed = Some(now - start);
        }
        let newer = state
            .view
            .as_ref()
            .is_some_and(|v| after.is_none_or(|after| v.generation > after));
        // Opening, the hole's file shows before there is a hole view (read from disk).
        let shows = !state.lines.is_empty() && (after.is_none() || newer);
        if moments.shown.is_none() && shows {
            moments.shown = Some(now - start);
        }
        if state.status != status {
            if moments.ranked.is_none() {
                moments.still = moments.still.max(now - since);
                moments.statuses += 1;
            } else if moments.searched.is_none() {
                moments.still_searching = moments.still_searching.max(now - since);
                moments.search_statuses += 1;
            }
            (status, since) = (state.status.clone(), now);
        }
        let built = newer
            && state
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
            moments.still_searching = moments.still_searching.max(now - since);
        }
        if built && !state.busy() {
            moments.settled = Some(now - start);
        }
    }
    moments
}
