//! Key press to finished frame on a large repository: `update` (with its effects started) plus a
//! full draw on a 200x60 TestBackend, over 500 keys that move the hole, scroll, switch panes and
//! type a filter. Prints p50/p99/max and asserts nothing (the target is p99 ≤ 16 ms).
//!
//! KEYHOLE_BENCH_REPO names the repository (default /work/corpus/guava-libraries); the bench
//! skips, saying so, where it is absent. KEYHOLE_BENCH_FILE names the file it opens at (default
//! guava's ImmutableMap.java where it exists, else the repository's first file).

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keyhole::testing::tui::app::App;
use keyhole::testing::tui::keymap::Keymap;
use keyhole::testing::tui::state::key_action;
use keyhole::testing::tui::theme::Theme;
use keyhole::testing::tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

/// A large file of guava; other repositories open at their first file.
const FILE: &str = "guava/src/com/google/common/collect/ImmutableMap.java";
const KEYS: usize = 500;
const SETTLE: Duration = Duration::from_secs(300);

fn main() {
    let root = support::large_repo_path();
    if !root.is_dir() {
        println!("tui bench skipped: {} is absent", root.display());
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let timed = runtime.block_on(bench(root));
    let mut slowest = timed.clone();
    slowest.sort_by_key(|(_, t)| std::cmp::Reverse(*t));
    for (key, time) in slowest.iter().take(8) {
        println!("  slow: {key:?} {:.2} ms", time.as_secs_f64() * 1e3);
    }
    let mut times: Vec<Duration> = timed.into_iter().map(|(_, t)| t).collect();
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "tui key→frame, {} keys, 200x60: p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        times.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(times[times.len() - 1]),
    );
}

/// One round of keys: move and place the hole in the source, scroll and filter the candidates,
/// scroll the prompt, and back to the source.
fn round() -> Vec<KeyEvent> {
    let mut codes = vec![KeyCode::Down; 5];
    codes.extend([KeyCode::Right; 3]);
    codes.extend([KeyCode::Enter, KeyCode::PageDown, KeyCode::Tab]);
    codes.extend([KeyCode::Down; 3]);
    codes.extend("/sib".chars().map(KeyCode::Char));
    codes.extend([KeyCode::Backspace; 3]);
    codes.extend([
        KeyCode::Enter,
        KeyCode::Tab,
        KeyCode::PageDown,
        KeyCode::Down,
    ]);
    codes.extend([KeyCode::Tab, KeyCode::Tab]);
    codes.into_iter().map(KeyEvent::from).collect()
}

/// Each key with the time from its press to its finished frame.
async fn bench(root: PathBuf) -> Vec<(KeyCode, Duration)> {
    let file = std::env::var("KEYHOLE_BENCH_FILE").unwrap_or_else(|_| FILE.to_string());
    let position = root.join(&file).is_file().then_some(file);
    println!("opening {} at {position:?}…", root.display());
    let mut app = App::new(Keymap::builtin(), Theme::dark(), keyhole::Dirs::from_env());
    app.open(root, position);
    app.settle(SETTLE).await.expect("the repository opens");
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("a test terminal");
    let mut draw = |app: &App| {
        terminal
            .draw(|f| {
                ui::draw(f, &app.state);
            })
            .expect("a frame");
    };
    draw(&app);
    let mut times = Vec::with_capacity(KEYS);
    for key in round().into_iter().cycle().take(KEYS) {
        let start = Instant::now();
        if let Some(action) = key_action(&app.state, key) {
            app.dispatch(action);
        }
        draw(&app);
        times.push((key.code, start.elapsed()));
        // Results (a moved hole's candidates) arrive between keys, as in the terminal loop.
        app.settle(SETTLE).await.expect("results arrive");
    }
    times
}
