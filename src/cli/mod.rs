//! The command line: one module per command, each building a typed output that serde prints
//! for `--json` and a renderer prints as a table, over the library's [`keyhole::session`].
//! Any failure is one line on stderr and exit code 2.

/// `println!` that returns an error instead of panicking when standard output cannot be
/// written (a full disk, say); a reader that closes a pipe still stops keyhole by SIGPIPE.
macro_rules! outln {
    () => {
        crate::cli::write_out(format_args!("\n"))?
    };
    ($($arg:tt)*) => {
        crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` that returns an error instead of panicking, as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        crate::cli::write_out(format_args!($($arg)*))?
    };
}

/// `eprintln!` that returns an error instead of panicking when standard error cannot be
/// written: the command stops with a non-zero exit code rather than go on unheard.
macro_rules! errln {
    ($($arg:tt)*) => {
        crate::cli::write_err(format_args!($($arg)*))?
    };
}

mod backends;
mod bounds;
mod complete;
mod eval;
mod hole;
mod holes;
mod index;
mod prompt;
mod proposals;
#[cfg(feature = "proxy")]
mod proxy;
mod tasks;
mod train;
mod tune;
mod ui;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use hole::{CacheArgs, HoleArgs, RankArgs};
use keyhole::candidate::CandidateId;
use keyhole::context::perspectives;
use keyhole::dirs::Dirs;
use keyhole::escape;

#[derive(Parser)]
#[command(
    name = "keyhole",
    version,
    about = "Explore repository-level prompts for code completion"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Repository to open in the terminal UI [default: the bundled sample].
    repo: Option<PathBuf>,
    /// FILE or FILE:LINE:COL to open at.
    position: Option<String>,
    #[command(flatten)]
    ui: ui::UiArgs,
}

#[derive(Subcommand)]
enum Command {
    /// List RLPG's 62 prompt proposals for a hole (source, context type, applicability,
    /// tokens), the default context, and the retrieved candidates 63-72.
    Proposals {
        #[command(flatten)]
        at: HoleArgs,
        #[command(flatten)]
        backend: backends::BackendArgs,
        #[command(flatten)]
        rank: RankArgs,
    },
    /// Print the prompt composed from one candidate (62 = the default context alone).
    Prompt {
        #[command(flatten)]
        at: HoleArgs,
        /// Candidate id (`keyhole proposals` lists them): proposals 0-61, the default context
        /// 62, retrieved 63-72.
        #[arg(long, visible_alias = "proposal", default_value_t = CandidateId::DEFAULT)]
        id: CandidateId,
        #[command(flatten)]
        backend: backends::BackendArgs,
    },
    /// Complete a hole with the k best-ranked candidates (or the given proposals), or with
    /// several samples of one prompt.
    Complete(complete::CompleteArgs),
    /// List the configured completion backends and ask each server which models it serves
    /// (exit code 2 when one is not ready).
    Backends {
        #[arg(long)]
        json: bool,
    },
    /// Run RLPG's evaluation protocol on repositories and write labels and a report.
    Eval(Box<eval::EvalArgs>),
    /// Train the prompt proposal classifier (RLPG-H or RLPG-R) on evaluation label files.
    Train(train::TrainArgs),
    /// Learn which contexts help your backend's model: label holes of your repositories with
    /// it, train RLPG-H on those labels, and rank with that classifier from then on whenever
    /// the backend and its model are the active ones.
    Tune(Box<tune::TuneArgs>),
    /// List RLPG's sampled holes of a repository.
    Holes(holes::HolesArgs),
    /// Complete the tasks of a RepoEval or CrossCodeEval task file and score them.
    Tasks(tasks::TasksArgs),
    /// Draw a main state of the UI on the bundled sample without a terminal.
    Render {
        /// start, candidates, prompt, completions or help.
        #[arg(long, default_value = "start")]
        state: String,
        /// svg, png or txt.
        #[arg(long, default_value = "svg")]
        format: keyhole::tui::Format,
        #[arg(long, default_value_t = 120, value_parser = bounds::screen_width)]
        width: u16,
        #[arg(long, default_value_t = 40, value_parser = bounds::screen_height)]
        height: u16,
    },
    /// Stand between an editor's completion plugin and its model server: forward every
    /// request, stream the answers back, and record what was sent.
    #[cfg(feature = "proxy")]
    Proxy(proxy::ProxyArgs),
    /// What an editor plugin sent through `keyhole proxy`.
    #[cfg(feature = "proxy")]
    Recorded {
        #[command(subcommand)]
        command: proxy::RecordedCommand,
    },
    /// Index a repository and report what was found.
    Index {
        repo: PathBuf,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: hole::CacheArgs,
    },
}

/// The `keyhole` binary's `main`.
pub fn main() -> ExitCode {
    report_panics_without_user_text();
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            // --help and --version
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            // Usage errors stay on one line too; `keyhole --help` has the rest.
            let rendered = err.to_string();
            let first = rendered.lines().next().unwrap_or("invalid arguments");
            return fail(first.trim_start_matches("error: "));
        }
    };
    // Output still buffered when `run` returns must reach its reader too, or fail loudly.
    let done = run(cli).and_then(|()| {
        std::io::stdout()
            .flush()
            .context("cannot write to standard output")
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&one_line(&err)),
    }
}

/// Exit code 2 with `message` as the one line on standard error (if it can still be written).
fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "keyhole: {}", escape::controls(message));
    ExitCode::from(2)
}

/// Writes to standard output; see [`outln!`].
fn write_out(args: std::fmt::Arguments) -> Result<()> {
    std::io::stdout()
        .write_fmt(args)
        .context("cannot write to standard output")
}

/// Writes one message line to standard error, control characters escaped (they come from file
/// names); see [`errln!`].
fn write_err(args: std::fmt::Arguments) -> Result<()> {
    let message = args.to_string();
    writeln!(std::io::stderr(), "{}", escape::controls(&message))
        .context("cannot write to standard error")
}

/// Piped into `head`, keyhole should stop quietly when the reader leaves, as command-line tools
/// do; Rust ignores SIGPIPE and would instead panic on the next print.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error and its causes on one line.
fn one_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// keyhole's directories, looked up in the environment once for the whole process.
fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(Dirs::from_env)
}

/// A notice of the library's (a language server not used, say) as one warning line.
fn warn(line: &str) {
    let _ = writeln!(std::io::stderr(), "warning: {}", escape::controls(line));
}

fn run(cli: Cli) -> Result<()> {
    let ui = cli.command.is_none() && std::io::stdout().is_terminal();
    if !ui {
        // The UI owns the terminal: its notices stay in its log.
        keyhole::lsp::show_notices_with(warn);
    }
    match cli.command {
        None if ui => {
            let options = cli.ui.options()?;
            Ok(keyhole::tui::run(cli.repo, cli.position, options)?)
        }
        None if cli.ui.recorded.is_some() => {
            // Not a terminal: what the UI would open, as `keyhole recorded show` prints it.
            let repo = cli
                .repo
                .context("--recorded needs the repository the plugin edited")?;
            proxy::recorded_command(&proxy::RecordedCommand::Show {
                id: cli.ui.recorded.unwrap_or_default(),
                repo: Some(repo),
                json: false,
            })
        }
        None => {
            // Not a terminal (piped, CI): print what the UI would open on, as a table.
            // A repository without a position: the hole the UI would open on.
            let (repo, position) = match cli.repo {
                Some(repo) => (repo, cli.position.unwrap_or_default()),
                None => (
                    cli.ui
                        .sample
                        .materialize(dirs())
                        .context("cannot write the bundled sample repository")?,
                    cli.position
                        .unwrap_or_else(|| cli.ui.sample.demo_hole().to_string()),
                ),
            };
            let at = HoleArgs {
                repo,
                position,
                prompt: cli.ui.prompt.clone(),
                json: false,
                iterations: perspectives::DEFAULT_ITERATIONS,
                cache: CacheArgs {
                    no_cache: false,
                    include_vendored: cli.ui.include_vendored,
                },
                servers: cli.ui.servers.clone(),
            };
            proposals::proposals_command(&at, &cli.ui.backend, &cli.ui.rank)
        }
        Some(Command::Proposals { at, backend, rank }) => {
            proposals::proposals_command(&at, &backend, &rank)
        }
        Some(Command::Prompt { at, id, backend }) => prompt::prompt_command(&at, id, &backend),
        Some(Command::Complete(args)) => complete::complete_command(&args),
        Some(Command::Backends { json }) => backends::backends_command(json),
        Some(Command::Eval(args)) => eval::eval_command(&args),
        Some(Command::Train(args)) => train::train_command(&args),
        Some(Command::Tune(args)) => tune::tune_command(&args),
        Some(Command::Holes(args)) => holes::holes_command(&args),
        Some(Command::Render {
            state,
            format,
            width,
            height,
        }) => {
            let bytes = keyhole::tui::render_fixture(&state, format, width, height, dirs())?;
            std::io::stdout()
                .write_all(&bytes)
                .context("cannot write the rendering")
        }
        Some(Command::Tasks(args)) => tasks::tasks_command(&args),
        Some(Command::Index { repo, json, cache }) => index::index_command(&repo, json, &cache),
        #[cfg(feature = "proxy")]
        Some(Command::Proxy(args)) => proxy::proxy_command(&args),
        #[cfg(feature = "proxy")]
        Some(Command::Recorded { command }) => proxy::recorded_command(&command),
    }
}

/// A panic is a bug in keyhole: say where, in one line, but not the message when it is not the
/// program's own words: a formatted message may quote what keyhole was reading (a slice error
/// quotes the string, which may be a plugin's prompt or a file's contents).
/// `RUST_BACKTRACE=1` adds the backtrace, which holds no text from outside.
fn report_panics_without_user_text() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map_or_else(|| "an unknown place".to_string(), ToString::to_string);
        let said = escape::panic_message(info.payload());
        let mut line =
            format!("keyhole: internal error at {at} ({said}); this is a bug in keyhole\n");
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            line.push_str(&std::backtrace::Backtrace::force_capture().to_string());
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }));
}
