//! The terminal UI: a pure state machine (`state`), an effect driver on tokio (`driver`), one
//! loop that drains actions then draws (`run`), rendering as a function of state (`ui`), keymaps
//! and themes as data, and headless rendering of named states to text, SVG or PNG
//! (`render_fixture`).

pub mod app;
pub mod command;
pub mod driver;
pub mod highlight;
pub mod keymap;
pub mod layout;
pub mod log;
pub mod png;
pub mod state;
pub mod svg;
pub mod theme;
pub mod ui;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossterm::event::EventStream;
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind, MouseButton, MouseEventKind};
use ratatui::crossterm::execute;
use ratatui::layout::{Position, Rect};

use app::App;
use command::{Command, Pane};
use driver::Outcome;
pub use driver::StartError;
use keymap::Keymap;
use state::Action;
use theme::Theme;

/// Output of `render_fixture`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
    Txt,
}

/// A `--format` that is not one of [`Format`]'s.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not a format (svg, png, txt)")]
pub struct UnknownFormat(String);

impl std::str::FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(text: &str) -> Result<Format, UnknownFormat> {
        match text {
            "svg" => Ok(Format::Svg),
            "png" => Ok(Format::Png),
            "txt" => Ok(Format::Txt),
            _ => Err(UnknownFormat(text.into())),
        }
    }
}

/// Screen sizes [`render_fixture`] draws, in cells: the layout needs some room, and a picture
/// far larger than any terminal would only exhaust memory.
pub const RENDER_WIDTHS: std::ops::RangeInclusive<u16> = 20..=500;
pub const RENDER_HEIGHTS: std::ops::RangeInclusive<u16> = 5..=200;

/// The main states `render_fixture` knows.
pub const FIXTURES: [&str; 6] = [
    "start",
    "candidates",
    "retrieved",
    "prompt",
    "completions",
    "help",
];

/// What the UI starts with besides the repository: the choices `keyhole complete` takes.
pub struct Options {
    /// The backends, budget, tokenizer, ranker and profile it starts with, and where the
    /// config, the caches and what the UI learns are kept.
    pub settings: crate::session::Settings,
    /// The rankers (the classifier is loaded before the screen is taken, so a bad file is a
    /// one-line error).
    pub learning: crate::session::Learning,
    /// The built-in theme to start from (`--theme`); none: the one theme.toml names, or dark.
    pub theme: Option<String>,
    /// What was wrong with the configuration and left out (a bad backends.toml entry), shown
    /// when the UI starts.
    pub warnings: Vec<String>,
    /// The bundled sample opened when no repository is given.
    pub sample: crate::sample::Sample,
    /// The recorded request whose hole to open (`--recorded N`).
    pub recorded: Option<u64>,
}

/// Why the UI stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot unpack the bundled sample")]
    Sample(#[source] std::io::Error),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Theme(#[from] theme::UnknownTheme),
    #[error(transparent)]
    Terminal(#[from] std::io::Error),
    /// The status line the failed opening left: the error the driver met, as it showed it.
    #[error("{0}")]
    Opening(String),
}

/// Why a fixture could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("unknown state '{state}' (known: {})", FIXTURES.join(", "))]
    UnknownState { state: String },
    #[error(
        "cannot render {width}x{height} cells (widths {RENDER_WIDTHS:?}, heights {RENDER_HEIGHTS:?})"
    )]
    Size { width: u16, height: u16 },
    #[error("cannot unpack the bundled sample")]
    Sample(#[source] std::io::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("the driver stopped")]
    DriverStopped,
    #[error(transparent)]
    StillBusy(#[from] app::StillBusy),
}

/// Run the TUI on the real terminal. `repo: None` opens the bundled sample at its demo hole.
pub fn run(
    repo: Option<PathBuf>,
    position: Option<String>,
    mut options: Options,
) -> Result<(), RunError> {
    let shared_sample = repo.is_none();
    let (root, position) = match repo {
        Some(root) => (root, position),
        None => (
            options
                .sample
                .materialize(&options.settings.dirs)
                .map_err(RunError::Sample)?,
            Some(options.sample.demo_hole().to_string()),
        ),
    };
    check_start(&root, position.as_deref())?;
    let runtime = tokio::runtime::Runtime::new().map_err(RunError::Runtime)?;
    let config = options.settings.dirs.config.clone();
    let (mut theme, theme_warning) = Theme::load(config.as_deref(), options.theme.as_deref())?;
    theme.monochrome = theme::no_color_asked();
    let (keymap, keymap_warnings) = Keymap::load(config.as_deref());
    let log_warning = log::init(&options.settings.dirs)
        .err()
        .map(|e| e.to_string());
    let warnings: Vec<String> = std::mem::take(&mut options.warnings)
        .into_iter()
        .chain(keymap_warnings)
        .chain(theme_warning)
        .chain(log_warning)
        .collect();
    // ratatui::init also restores the terminal on panic; a signal from outside restores it
    // through `signals`, and an error returns to the restore below.
    #[cfg(unix)]
    signals::restore_the_terminal_on_signals();
    let mut terminal = ratatui::init();
    keep_the_terminal_through_background_panics();
    // Lines written to standard error now would land in the middle of the screen.
    crate::escape::warn_to_stderr(false);
    let result = runtime.block_on(async {
        let mut app = App::with_options(keymap, theme, options);
        app.state.shared_sample = shared_sample;
        app.state.warning = match &warnings[..] {
            [] => None,
            [one] => Some(one.clone()),
            [first, rest @ ..] => Some(format!("{first} (and {} more in the log)", rest.len())),
        };
        for warning in &warnings {
            tracing::warn!(%warning, "config");
        }
        app.open(root, position);
        event_loop(&mut terminal, &mut app).await?;
        match app.state.phase {
            state::Phase::Failed(e) => Err(RunError::Opening(e)),
            _ => Ok(()),
        }
    });
    let _ = set_mouse(false);
    ratatui::restore();
    crate::escape::warn_to_stderr(true);
    // Indexing and analysis run on blocking threads that cannot be interrupted: leave them to
    // the process's exit instead of waiting for them with the shell blanked.
    runtime.shutdown_background();
    result
}

/// What can be told wrong before the screen is taken over: a repository that is not a
/// directory, a position that is malformed, names no file or lies past its file's end. The
/// index checks the rest (files it skips) once open; either way the error is one line.
pub fn check_start(root: &std::path::Path, position: Option<&str>) -> Result<(), StartError> {
    use crate::hole::HoleError;
    if !root.exists() {
        return Err(crate::repo::OpenError::Missing(root.to_path_buf()).into());
    }
    if !root.is_dir() {
        return Err(crate::repo::OpenError::NotADirectory(root.to_path_buf()).into());
    }
    let Some(spec) = position else {
        return Ok(());
    };
    let (path, at) = match spec.contains(':') {
        true => {
            let (path, line, column) = crate::hole::split_position(spec)?;
            (path, Some((line, column)))
        }
        false => (spec, None),
    };
    let no_file = || HoleError::NoSuchFile(path.to_string());
    // Through the repository's one checked read: a FIFO or a link out must not hang or leak.
    let bytes = crate::repo::read_repo_file(
        root,
        std::path::Path::new(path),
        crate::repo::MAX_FILE_BYTES,
    )
    .map_err(|_| no_file())?;
    let text = String::from_utf8(bytes).map_err(|_| no_file())?;
    let Some((line, column)) = at else {
        return Ok(());
    };
    // As the index counts: a final line break ends the last line, an empty file has one.
    let lines = text.lines().count().max(1);
    if line == 0 || line > lines {
        return Err(HoleError::LineOutOfRange {
            file: path.into(),
            line,
            lines,
        }
        .into());
    }
    let chars = text.lines().nth(line - 1).unwrap_or("").chars().count();
    if column == 0 || column > chars + 1 {
        return Err(HoleError::ColumnOutOfRange {
            file: path.into(),
            line,
            column,
            chars,
        }
        .into());
    }
    Ok(())
}

/// A panic in a worker thread is caught by the driver and shown as a failed job, so it must
/// not give the terminal back (ratatui's hook would, leaving a dead screen where `q` no longer
/// reads as a key): it goes to the log, without a message that may quote user text. A panic
/// on the UI thread gives the mouse back, then ratatui's hook restores the terminal and the
/// command line's reports the panic.
fn keep_the_terminal_through_background_panics() {
    let ui_thread = std::thread::current().id();
    let restore_and_report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() == ui_thread {
            let _ = set_mouse(false);
            restore_and_report(info);
        } else {
            let at = info.location().map(ToString::to_string).unwrap_or_default();
            let said = crate::escape::panic_message(info.payload());
            tracing::error!(at, said, "worker thread panicked");
        }
    }));
}

/// The terminal given back when a signal from outside ends the UI (`kill`, a closed terminal
/// window; Ctrl-C in raw mode is a key, not a signal), and a language server that went away
/// an error to report rather than a SIGPIPE that kills the UI with the terminal raw.
#[cfg(unix)]
mod signals {
    use std::sync::OnceLock;

    /// The terminal and its settings before the UI took it.
    static SAVED: OnceLock<(libc::c_int, libc::termios)> = OnceLock::new();

    /// Mouse reports and bracketed paste off, the cursor shown, the main screen back.
    const LEAVE: &[u8] =
        b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?25h\x1b[?1049l";

    /// The signals that end a process by default and may come while the UI runs.
    const ENDING: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

    /// Save the terminal's settings and handle [`ENDING`] by restoring them first; ignore
    /// SIGPIPE (the screen is a terminal, and a closed pipe is an error the code reports).
    pub fn restore_the_terminal_on_signals() {
        // SAFETY: plain libc calls on a zeroed `termios`/`sigaction`; the handler makes only
        // async-signal-safe calls.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            // The terminal crossterm puts in raw mode: standard input if it is one.
            let fd = match libc::isatty(0) {
                1 => 0,
                _ => libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC),
            };
            let mut termios: libc::termios = std::mem::zeroed();
            if fd < 0 || libc::tcgetattr(fd, &mut termios) != 0 {
                return;
            }
            if SAVED.set((fd, termios)).is_err() {
                return;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = restore_then_end as *const () as libc::sighandler_t;
            // The default action is back once the handler runs: re-raised, the signal ends the
            // process as it meant to.
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            for signal in ENDING {
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    extern "C" fn restore_then_end(signal: libc::c_int) {
        // SAFETY: tcsetattr, write and raise are async-signal-safe; SAVED is set before this
        // handler is installed and never changes.
        unsafe {
            if let Some((fd, termios)) = SAVED.get() {
                libc::tcsetattr(*fd, libc::TCSANOW, termios);
            }
            libc::write(1, LEAVE.as_ptr().cast(), LEAVE.len());
            libc::raise(signal);
        }
    }
}

/// Draw; wait for input, an action or a spinner tick; apply everything queued; repeat.
async fn event_loop(terminal: &mut ratatui::DefaultTerminal, app: &mut App) -> std::io::Result<()> {
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut panes: Vec<(Pane, Rect)> = Vec::new();
    set_mouse(app.state.mouse)?;
    loop {
        terminal.draw(|f| panes = ui::draw(f, &app.state))?;
        let mut outcomes = Vec::new();
        let rows = pane_rows(&panes, app.state.pane_rows);
        if rows != app.state.pane_rows {
            outcomes.extend(app.dispatch(Action::Layout(rows)));
        }
        tokio::select! {
            Some(Ok(ev)) = events.next() => {
                if let Some(action) = event_action(app, &ev, &panes) {
                    outcomes.extend(app.dispatch(action));
                }
            }
            Some(action) = app.next() => outcomes.extend(app.dispatch(action)),
            _ = tick.tick(), if app.state.busy() => outcomes.extend(app.dispatch(Action::Tick(Instant::now()))),
        }
        while let Some(action) = app.try_next() {
            outcomes.extend(app.dispatch(action));
        }
        for outcome in outcomes {
            match outcome {
                Outcome::Quit => return Ok(()),
                Outcome::SetMouse(on) => set_mouse(on)?,
                Outcome::Copy(text) => execute!(
                    std::io::stdout(),
                    ratatui::crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
                )?,
                Outcome::Suspend => {
                    suspend()?;
                    *terminal = ratatui::init();
                    set_mouse(app.state.mouse)?;
                }
                Outcome::Editor { path, line } => {
                    set_mouse(false)?;
                    ratatui::restore();
                    let edited = run_editor(&path, line);
                    *terminal = ratatui::init();
                    set_mouse(app.state.mouse)?;
                    app.dispatch(Action::Edited(edited));
                }
                Outcome::Continue => {}
            }
        }
    }
}

fn set_mouse(on: bool) -> std::io::Result<()> {
    if on {
        execute!(std::io::stdout(), event::EnableMouseCapture)?;
    } else {
        execute!(std::io::stdout(), event::DisableMouseCapture)?;
    }
    Ok(())
}

/// Why the user's editor did not return cleanly (the status line shows it).
#[derive(Debug, thiserror::Error)]
pub enum EditorError {
    #[error("cannot run the editor `{program}`: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("the editor `{program}` exited with {status}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
    },
}

/// The user's editor (`$VISUAL`, else `$EDITOR`, else vi; words after the first are its
/// arguments) on `path` at `line`, waited for; why not.
fn run_editor(path: &std::path::Path, line: usize) -> Result<(), EditorError> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".into());
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(format!("+{line}"))
        .arg(path)
        .status()
        .map_err(|source| EditorError::Start {
            program: program.into(),
            source,
        })?;
    match status.success() {
        true => Ok(()),
        false => Err(EditorError::Failed {
            program: program.into(),
            status,
        }),
    }
}

/// Give the terminal back and stop until the shell continues the process (Ctrl-Z).
fn suspend() -> std::io::Result<()> {
    set_mouse(false)?;
    ratatui::restore();
    #[cfg(unix)]
    std::process::Command::new("kill")
        .args(["-TSTP", &std::process::id().to_string()])
        .status()?;
    Ok(())
}

/// Rows of each pane drawn (`Pane::ALL` order); a pane not drawn (another is zoomed) keeps
/// its last height.
fn pane_rows(panes: &[(Pane, Rect)], mut rows: [u16; 4]) -> [u16; 4] {
    for (pane, rect) in panes {
        if let Some(at) = Pane::ALL.iter().position(|p| p == pane) {
            rows[at] = rect.height;
        }
    }
    rows
}

/// Keys through the keymap (or the focused text field); left clicks and the wheel by pane.
fn event_action(app: &App, event: &Event, panes: &[(Pane, Rect)]) -> Option<Action> {
    match event {
        Event::Key(key) if key.kind == KeyEventKind::Press => state::key_action(&app.state, *key),
        Event::Mouse(m) if app.state.mouse => {
            let at = Position::new(m.column, m.row);
            let (pane, rect) = panes.iter().find(|(_, r)| r.contains(at))?;
            match m.kind {
                MouseEventKind::Down(MouseButton::Left) => Some(Action::Click {
                    pane: *pane,
                    row: m.row - rect.y,
                    col: m.column - rect.x,
                    width: rect.width,
                    height: rect.height,
                }),
                MouseEventKind::ScrollDown => Some(Action::Scroll {
                    pane: *pane,
                    command: Command::Down,
                }),
                MouseEventKind::ScrollUp => Some(Action::Scroll {
                    pane: *pane,
                    command: Command::Up,
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Render a named main state of the bundled sample headlessly, as SVG, PNG or plain text (in
/// the dark theme, without colour where `NO_COLOR` asks).
pub fn render_fixture(
    state: &str,
    format: Format,
    width: u16,
    height: u16,
    dirs: &crate::dirs::Dirs,
) -> Result<Vec<u8>, FixtureError> {
    let mut theme = Theme::dark();
    theme.monochrome = theme::no_color_asked();
    let background = theme.background;
    let buffer = fixture_buffer(state, theme, width, height, dirs)?;
    Ok(match format {
        Format::Svg => svg::render(&buffer, background).into_bytes(),
        Format::Png => png::render(&buffer, background),
        Format::Txt => text(&buffer).into_bytes(),
    })
}

/// The frame of a named main state of the bundled sample in `theme`.
fn fixture_buffer(
    state: &str,
    theme: Theme,
    width: u16,
    height: u16,
    dirs: &crate::dirs::Dirs,
) -> Result<ratatui::buffer::Buffer, FixtureError> {
    if !FIXTURES.contains(&state) {
        return Err(FixtureError::UnknownState {
            state: state.into(),
        });
    }
    if !RENDER_WIDTHS.contains(&width) || !RENDER_HEIGHTS.contains(&height) {
        return Err(FixtureError::Size { width, height });
    }
    let root = crate::sample::materialize(dirs).map_err(FixtureError::Sample)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut app = App::new(Keymap::builtin(), theme, dirs.clone());
        app.open(root, Some(crate::sample::DEMO_HOLE.to_string()));
        drive_to(&mut app, state).await?;
        // A test backend cannot fail (its error is `Infallible`).
        let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
        let Ok(_) = terminal.draw(|f| {
            ui::draw(f, &app.state);
        });
        Ok(terminal.backend().buffer().clone())
    })
}

/// Send the commands a user would to reach state `name`, letting results arrive in between.
async fn drive_to(app: &mut App, name: &str) -> Result<(), FixtureError> {
    const LIMIT: Duration = Duration::from_secs(120);
    if name == "start" {
        // The first frame after indexing: the hole shown, candidates still being built.
        while app.state.index.is_none() {
            let action = app.next().await.ok_or(FixtureError::DriverStopped)?;
            app.dispatch(action);
        }
        // With its highlighting; the candidates that may arrive first are left out, so the
        // picture is the same every time.
        while app.state.highlighting.is_some() {
            let action = app.next().await.ok_or(FixtureError::DriverStopped)?;
            match action {
                Action::Highlighted { .. } => {
                    app.dispatch(action);
                }
                // The highlighting waits for the ranked candidates (`State::after_ranked`),
                // which this picture leaves out: it runs without them.
                Action::Analysed { .. } => {
                    let held = std::mem::take(&mut app.state.after_ranked);
                    app.run_effects(held);
                }
                _ => {}
            }
        }
        return Ok(());
    }
    app.settle(LIMIT).await?;
    if name == "retrieved" || name == "completions" {
        // The candidates pane scrolled to the retrieved candidates, ProCC's pick focused.
        app.dispatch(Action::Command(Command::FocusNext));
        let pick = app.state.procc.as_ref().and_then(|p| p.pick);
        while app.state.focused_candidate().map(|c| c.id) != pick
            && app.state.candidate_cursor + 1 < app.state.visible().len()
        {
            app.dispatch(Action::Command(Command::Down));
        }
        if name == "retrieved" {
            return Ok(());
        }
    }
    let commands: &[Command] = match name {
        "candidates" => &[Command::FocusNext, Command::Down, Command::Select],
        "prompt" => &[Command::FocusNext, Command::FocusNext],
        // ProCC's pick and the ranker's best, side by side: their contexts differ, and so do
        // their completions. The second is explained.
        "completions" => &[
            Command::Select,
            Command::Top,
            Command::Select,
            Command::Run,
            Command::Right,
            Command::Explain,
        ],
        _ => &[Command::Help],
    };
    for &command in commands {
        app.dispatch(Action::Command(command));
        app.settle(LIMIT).await?;
    }
    pin_latency(app);
    Ok(())
}

/// Latency varies run to run; fixtures show 0 ms so snapshots and screenshots are stable.
fn pin_latency(app: &mut App) {
    for card in &mut app.state.cards {
        if let Ok(done) = &mut card.outcome {
            done.latency_ms = 0;
        }
    }
}

/// A buffer as plain text, one line per row, trailing spaces trimmed.
pub fn text(buffer: &ratatui::buffer::Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        let row: String = (0..area.width).map(|x| buffer[(x, y)].symbol()).collect();
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use ratatui::style::{Color, Modifier};

    use super::*;

    #[test]
    fn without_colour_the_hole_and_the_focused_candidate_show_in_reverse_video() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = crate::dirs::Dirs::under(scratch.path());
        let mut theme = Theme::dark();
        theme.monochrome = true;
        let buffer = fixture_buffer("candidates", theme, 120, 40, &dirs).unwrap();
        let cells = || buffer.content.iter();
        assert!(cells().all(|c| c.fg == Color::Reset && c.bg == Color::Reset));
        let reversed = |needle: &str| {
            (0..buffer.area.height).any(|y| {
                let row: String = (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect();
                let Some(at) = row.find(needle) else {
                    return false;
                };
                let x = row[..at].chars().count() as u16;
                buffer[(x, y)].modifier.contains(Modifier::REVERSED)
            })
        };
        // The hole's target in the source pane, and the focused (selected) candidate's row.
        assert!(reversed("findByCu"), "the hole");
        assert!(reversed("●   6"), "the focused candidate");
    }
}
