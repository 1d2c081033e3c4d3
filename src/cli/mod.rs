//! Subcommands: each opens the repository, finds the hole and prints a table or JSON.
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

mod bounds;
mod complete;
mod eval;
mod train;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use keyhole::candidate::{self, CandidateId};
use keyhole::compose::{self, Prompt, SegmentKind};
use keyhole::context::SourcedText;
use keyhole::context::fidelity::Fidelity;
use keyhole::context::perspectives::{self, Candidate, Perspectives};
use keyhole::context::proposals::{self, ProposalContext, Request};
use keyhole::context::retrieval::Retrieval;
use keyhole::context::windows::WindowIndex;
use keyhole::dirs::Dirs;
use keyhole::escape;
use keyhole::eval::interop;
use keyhole::hole::{self, Hole};
use keyhole::model::{self, Backend};
use keyhole::rank::bandit;
use keyhole::rank::classifier::Classifier;
use keyhole::rank::online::OnlineRanker;
use keyhole::rank::{RankInput, Ranked, RankerKind, Rankers};
use keyhole::repo::RepoIndex;
use keyhole::sample;
use keyhole::token::{Keep, Tokenizer, TokenizerKind};

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
    ui: UiArgs,
}

/// What the UI completes with and how it ranks and counts: the choices of `complete`.
#[derive(Args)]
struct UiArgs {
    #[command(flatten)]
    backend: complete::BackendArgs,
    #[command(flatten)]
    rank: RankArgs,
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = bounds::budget)]
    budget: usize,
    /// Tokenizer the budget is counted in [default: the backend's, else code].
    #[arg(long)]
    tokenizer: Option<TokenizerKind>,
}

impl UiArgs {
    /// The UI's options; a bad backend, classifier or encoder is an error before the screen
    /// is taken over.
    fn options(&self) -> Result<keyhole::tui::Options> {
        let mut backends = complete::configured()?;
        let chosen = self.backend.entry_among(backends.clone())?;
        // Flag overrides (--url, --model, --model-path) apply to the chosen entry; a one-off
        // local model joins the configured ones.
        let at = match backends.iter().position(|b| b.name == chosen.name) {
            Some(at) => {
                backends[at] = chosen;
                at
            }
            None => {
                backends.push(chosen);
                backends.len() - 1
            }
        };
        let classifier = Classifier::open(
            self.rank.classifier.as_deref(),
            self.rank.encoder_dir.as_deref(),
        )?;
        Ok(keyhole::tui::Options {
            setup: keyhole::tui::state::Setup {
                backends,
                backend: at,
                budget: self.budget,
                tokenizer: self.tokenizer,
            },
            ranker: self.rank.ranker,
            classifier,
            dirs: dirs().clone(),
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// List RLPG's 62 prompt proposals for a hole (source, context type, applicability,
    /// tokens), the default context, and the retrieved candidates 63-72.
    Proposals {
        #[command(flatten)]
        at: HoleArgs,
        #[command(flatten)]
        backend: complete::BackendArgs,
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
        backend: complete::BackendArgs,
    },
    /// Complete a hole with the k best-ranked candidates (or the given proposals), or with
    /// several samples of one prompt.
    Complete(complete::CompleteArgs),
    /// List the configured completion backends and ask each server which models it serves.
    Backends,
    /// Run RLPG's evaluation protocol on repositories and write labels and a report.
    Eval(eval::EvalArgs),
    /// Train the prompt proposal classifier (RLPG-H or RLPG-R) on evaluation label files.
    Train(train::TrainArgs),
    /// List RLPG's sampled holes of a repository.
    Holes(HolesArgs),
    /// Complete the tasks of a RepoEval or CrossCodeEval task file and score them.
    Tasks(complete::TasksArgs),
    /// Draw a main state of the UI on the bundled sample without a terminal.
    Render {
        /// start, candidates, prompt, completions or help.
        #[arg(long, default_value = "start")]
        state: String,
        #[arg(long, value_enum, default_value = "svg")]
        format: keyhole::tui::Format,
        #[arg(long, default_value_t = 120, value_parser = bounds::screen_width)]
        width: u16,
        #[arg(long, default_value_t = 40, value_parser = bounds::screen_height)]
        height: u16,
    },
    /// Index a repository and report what was found.
    Index {
        repo: PathBuf,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

#[derive(Args)]
struct HolesArgs {
    repo: PathBuf,
    /// At most this many holes, drawn at random with --seed.
    #[arg(long)]
    cap: Option<usize>,
    #[arg(long, default_value_t = 9)]
    seed: u64,
    #[arg(long)]
    json: bool,
    /// Write the holes as a CrossCodeEval-style task file (prompt: the default context).
    #[arg(long)]
    export: Option<PathBuf>,
    /// Budget of the exported prompts.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = bounds::budget)]
    budget: usize,
    /// Tokenizer the exported prompts' budget is counted in.
    #[arg(long, default_value = "code")]
    tokenizer: TokenizerKind,
    /// Where the holes sit: paper (the middle of the trimmed line) or code (as RLPG's code
    /// puts them).
    #[arg(long, default_value = "paper")]
    fidelity: Fidelity,
    #[command(flatten)]
    cache: CacheArgs,
}

/// How to rank the candidates of a hole.
#[derive(Args)]
pub(super) struct RankArgs {
    /// Which ranker orders the candidates (RLPG-H is the bundled classifier).
    #[arg(long, value_enum, default_value = "rlpg-h")]
    ranker: RankerKind,
    /// A classifier written by `keyhole train` [default: the bundled one].
    #[arg(long)]
    classifier: Option<PathBuf>,
    /// The local BERT-family model (config.json, model.safetensors, tokenizer.json) the
    /// classifier was trained on with `keyhole train --encoder-dir`.
    #[arg(long)]
    encoder_dir: Option<PathBuf>,
}

impl RankArgs {
    /// The chosen ranker's order of the hole's candidates.
    fn rank(&self, input: &RankInput) -> Result<Vec<Ranked>> {
        let classifier = Classifier::open(self.classifier.as_deref(), self.encoder_dir.as_deref())?;
        let (online, warning) = OnlineRanker::load_saved(dirs());
        if let Some(warning) = warning {
            errln!("warning: {warning}");
        }
        let rankers = Rankers { classifier, online };
        Ok(rankers.get(self.ranker)?.rank(input))
    }
}

#[derive(Args)]
struct CacheArgs {
    /// Do not read or write the on-disk index cache.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Args)]
struct HoleArgs {
    /// Repository root.
    repo: PathBuf,
    /// FILE:LINE:COL, FILE relative to REPO, LINE and COL 1-based.
    position: String,
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = bounds::budget)]
    budget: usize,
    /// Tokenizer the budget is counted in: code, r50k_base, p50k_base, cl100k_base,
    /// o200k_base [default: the backend's, else code].
    #[arg(long)]
    tokenizer: Option<TokenizerKind>,
    /// Whose rules build the contexts where a paper and its authors' code disagree: paper
    /// or code.
    #[arg(long, default_value = "paper")]
    fidelity: Fidelity,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// RepoCoder's retrieval-generation iterations for candidate 67 (its last iteration).
    #[arg(long, default_value_t = perspectives::DEFAULT_ITERATIONS, value_parser = bounds::iterations)]
    iterations: u16,
    #[command(flatten)]
    cache: CacheArgs,
}

pub fn main() -> ExitCode {
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        None if std::io::stdout().is_terminal() => {
            let options = cli.ui.options()?;
            // SAFETY: nothing has started a thread yet.
            unsafe { model::local::use_threads(options.setup.entry()) };
            keyhole::tui::run(cli.repo, cli.position, options)
        }
        None => {
            // Not a terminal (piped, CI): print what the UI would open on, as a table.
            let repo = match cli.repo {
                Some(repo) => repo,
                None => sample::materialize(dirs())
                    .context("cannot write the bundled sample repository")?,
            };
            let position = cli
                .position
                .unwrap_or_else(|| sample::DEMO_HOLE.to_string());
            let at = HoleArgs {
                repo,
                position,
                budget: cli.ui.budget,
                tokenizer: cli.ui.tokenizer,
                fidelity: Fidelity::Paper,
                json: false,
                iterations: perspectives::DEFAULT_ITERATIONS,
                cache: CacheArgs { no_cache: false },
            };
            proposals_command(&at, &cli.ui.backend, &cli.ui.rank)
        }
        Some(Command::Proposals { at, backend, rank }) => proposals_command(&at, &backend, &rank),
        Some(Command::Prompt { at, id, backend }) => prompt_command(&at, id, &backend),
        Some(Command::Complete(args)) => complete::complete_command(&args),
        Some(Command::Backends) => complete::backends_command(),
        Some(Command::Eval(args)) => eval::eval_command(&args),
        Some(Command::Train(args)) => train::train_command(&args),
        Some(Command::Holes(args)) => holes_command(&args),
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
        Some(Command::Tasks(args)) => complete::tasks_command(&args),
        Some(Command::Index { repo, json, cache }) => index_command(&repo, json, &cache),
    }
}

fn open(repo: &Path, cache: &CacheArgs) -> Result<RepoIndex> {
    let cache_dir = if cache.no_cache {
        None
    } else {
        dirs().cache.clone()
    };
    let index = RepoIndex::open(repo, cache_dir.as_deref())?;
    for warning in index.warnings.iter().take(5) {
        errln!("warning: {warning}");
    }
    if index.warnings.len() > 5 {
        errln!(
            "warning: ... and {} more (keyhole index --json lists them)",
            index.warnings.len() - 5
        );
    }
    Ok(index)
}

/// The opened repository, the hole, and the tokenizer of a hole command.
struct Session {
    index: RepoIndex,
    hole: Hole,
    tokenizer: &'static dyn Tokenizer,
    fidelity: Fidelity,
}

impl Session {
    /// Open the repository and find the hole; budgets count in `--tokenizer`, else `fallback`.
    fn open(at: &HoleArgs, fallback: TokenizerKind) -> Result<Session> {
        let index = open(&at.repo, &at.cache)?;
        let hole = Hole::parse(&index, &at.position)?;
        let tokenizer = at.tokenizer.unwrap_or(fallback).tokenizer();
        Ok(Session {
            index,
            hole,
            tokenizer,
            fidelity: at.fidelity,
        })
    }

    fn build(&self, spec: candidate::ProposalSpec, budget: usize) -> ProposalContext {
        let req = Request {
            index: &self.index,
            hole: &self.hole,
            tokenizer: self.tokenizer,
            allocation: compose::proposal_allocation(budget, spec.share),
            fidelity: self.fidelity,
        };
        proposals::build(spec, &req)
    }

    fn path(&self, file: usize) -> &str {
        &self.index.files[file].path
    }

    /// The retrieved candidates 63-72 within `budget`, asking `backend` for what they need;
    /// only those that need nothing from it where `immediate`.
    async fn retrieved(
        &self,
        at: &HoleArgs,
        backend: &dyn Backend,
        immediate: bool,
    ) -> Result<Vec<Candidate>> {
        let retrieval = Retrieval::new(&self.index);
        let windows = WindowIndex::new(&self.index);
        let perspectives = Perspectives {
            index: &self.index,
            retrieval: &retrieval,
            windows: &windows,
            tokenizer: self.tokenizer,
            budget: at.budget,
            seed: perspectives::DEFAULT_SEED,
            fidelity: self.fidelity,
        };
        if immediate {
            return Ok(perspectives.immediate(&self.hole));
        }
        let composer = compose::Composer::new(&self.index, &self.hole, self.tokenizer, at.budget);
        let iterations = usize::from(at.iterations);
        Ok(
            perspectives::build_all(&perspectives, &self.hole, &composer, backend, iterations)
                .await?,
        )
    }

    /// [`Session::retrieved`] outside an async context.
    fn retrieved_now(
        &self,
        at: &HoleArgs,
        backend: &dyn Backend,
        immediate: bool,
    ) -> Result<Vec<Candidate>> {
        let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
        runtime.block_on(self.retrieved(at, backend, immediate))
    }
}

/// What the backend changed about how it serves (see [`Backend::notices`]), on stderr.
pub(super) fn print_notices(backend: &dyn Backend) -> Result<()> {
    for notice in backend.notices() {
        errln!("note: {notice}");
    }
    Ok(())
}

/// The backend of a hole command and the session opened with its tokenizer.
fn open_with_backend(
    at: &HoleArgs,
    args: &complete::BackendArgs,
) -> Result<(Session, Box<dyn Backend>)> {
    let entry = args.entry()?;
    let session = Session::open(at, entry.tokenizer())?;
    let backend = model::build_backend(&entry, &session.index)?;
    Ok((session, backend))
}

/// Whether candidate `id` is built without the backend.
fn immediate(id: CandidateId) -> bool {
    !id.needs_backend()
}

fn proposals_command(
    at: &HoleArgs,
    backend: &complete::BackendArgs,
    rank: &RankArgs,
) -> Result<()> {
    let (session, backend) = open_with_backend(at, backend)?;
    let composer =
        compose::Composer::new(&session.index, &session.hole, session.tokenizer, at.budget);
    let built = proposals::build_for_budget_as(
        &session.index,
        &session.hole,
        session.tokenizer,
        at.budget,
        session.fidelity,
    );
    let ranking = rank.rank(&RankInput::new(&session.index, &session.hole, &built))?;
    let rows: Vec<(ProposalContext, Prompt)> = built
        .into_iter()
        .map(|proposal| {
            let prompt = composer.compose(Some(&proposal));
            (proposal, prompt)
        })
        .collect();
    let listing = Listing {
        rows,
        default: composer.compose(None),
        ranker: rank.ranker,
        ranking,
    };
    let retrieved: Vec<(Candidate, Option<Prompt>)> = session
        .retrieved_now(at, backend.as_ref(), false)?
        .into_iter()
        .map(|c| {
            let prompt = c.compose(&composer);
            (c, prompt)
        })
        .collect();
    if at.json {
        let mut json = proposals_json(&session, at, &listing);
        json["retrieved"] = retrieved_json(&session, &retrieved);
        json["procc_pick"] = json!(procc_pick(&retrieved)?);
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_proposals(&session, at, &listing)?;
        print_retrieved(&session, at, &retrieved)?;
        if let Some(id) = procc_pick(&retrieved)? {
            outln!("ProCC (LinUCB) picks {id} {}.", id.label());
        }
    }
    print_notices(backend.as_ref())
}

/// A hole's candidates with their prompts and the chosen ranker's order.
struct Listing {
    /// The 62 proposals in id order.
    rows: Vec<(ProposalContext, Prompt)>,
    default: Prompt,
    ranker: RankerKind,
    /// The applicable candidates and the default context, best first.
    ranking: Vec<Ranked>,
}

impl Listing {
    /// Rank (1-based) and score of candidate `id`; none for an inapplicable proposal.
    fn place(&self, id: CandidateId) -> Option<(usize, f64)> {
        self.ranking
            .iter()
            .position(|r| r.id == id)
            .map(|i| (i + 1, self.ranking[i].score))
    }

    /// Ranked candidates best first, then the inapplicable ones in id order.
    fn order(&self) -> Vec<CandidateId> {
        let ranked = self.ranking.iter().map(|r| r.id);
        let rest = CandidateId::rlpg()
            .filter(|&id| self.place(id).is_none() && id != CandidateId::DEFAULT);
        ranked.chain(rest).collect()
    }
}

/// Tokens and cut of a candidate's context in its prompt.
fn context_segment(prompt: Option<&Prompt>) -> Option<&compose::Segment> {
    prompt.and_then(proposal_segment)
}

/// ProCC's pick among its perspectives by the bandit kept in the data directory (see
/// `keyhole eval --keep-bandit`), with a warning about an unreadable state; none without one.
fn procc_pick(rows: &[(Candidate, Option<Prompt>)]) -> Result<Option<CandidateId>> {
    let Some(path) = dirs().data_file(bandit::FILE) else {
        return Ok(None);
    };
    if !path.exists() {
        return Ok(None);
    }
    let (bandit, warning) = bandit::LinUcb::load(&path);
    if let Some(warning) = warning {
        errln!("warning: {warning}");
    }
    let (x, available) = perspectives::procc_context(rows.iter().map(|(c, _)| c));
    Ok(bandit
        .choose(&x, available)
        .map(|arm| CandidateId::PROCC[arm]))
}

fn print_retrieved(
    session: &Session,
    at: &HoleArgs,
    rows: &[(Candidate, Option<Prompt>)],
) -> Result<()> {
    outln!();
    outln!(
        "{:>3}  {:<23} {:<4} {:>6} {:>6}  {:<5}  {:>5}  files used (best first) or why not",
        "id",
        "retrieved",
        "app",
        "tokens",
        "alloc",
        "cut",
        "score"
    );
    for (candidate, prompt) in rows {
        let seg = context_segment(prompt.as_ref());
        let files: Vec<&str> = seg
            .map(|s| s.text.files())
            .unwrap_or_default()
            .into_iter()
            .rev()
            .map(|f| file_name(session.path(f)))
            .collect();
        outln!(
            "{:>3}  {:<23} {:<4} {:>6} {:>6}  {:<5}  {:>5}  {}",
            candidate.id,
            candidate.id.label(),
            if candidate.applicable() { "yes" } else { "no" },
            seg.map_or(0, |s| s.tokens),
            compose::proposal_allocation(at.budget, keyhole::candidate::RETRIEVED_SHARE),
            cut_name(seg.and_then(|s| s.cut)),
            candidate
                .score
                .map_or_else(|| "-".into(), |s| format!("{s:.3}")),
            candidate
                .why_not
                .clone()
                .unwrap_or_else(|| summarize(&files, 3)),
        );
    }
    Ok(())
}

fn retrieved_json(session: &Session, rows: &[(Candidate, Option<Prompt>)]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|(candidate, prompt)| {
            let seg = context_segment(prompt.as_ref());
            let files: Vec<&str> = seg
                .map(|s| s.text.files())
                .unwrap_or_default()
                .into_iter()
                .map(|f| session.path(f))
                .collect();
            json!({
                "id": candidate.id,
                "label": candidate.id.label(),
                "applicable": candidate.applicable(),
                "why_not": candidate.why_not,
                "tokens": seg.map_or(0, |s| s.tokens),
                "full_tokens": session.tokenizer.count(&candidate.context.text),
                "allocated": seg.map(|s| s.allocated),
                "truncated": seg.is_some_and(|s| s.cut.is_some()),
                "score": candidate.score,
                "jaccard": candidate.jaccard,
                "files": files,
                "default_tokens": prompt.as_ref().map(|p| default_segment(p).tokens),
            })
        })
        .collect();
    Value::Array(rows)
}

fn proposal_segment(prompt: &Prompt) -> Option<&compose::Segment> {
    prompt.segment(|k| matches!(k, SegmentKind::Proposal { .. }))
}

/// Files whose text survived into the prompt, best-ranked first.
fn files_used(proposal: &ProposalContext, prompt: &Prompt) -> Vec<usize> {
    let in_prompt = proposal_segment(prompt)
        .map(|s| s.text.files())
        .unwrap_or_default();
    proposal
        .ranked_files
        .iter()
        .copied()
        .filter(|f| in_prompt.contains(f))
        .collect()
}

fn default_segment(prompt: &Prompt) -> &compose::Segment {
    prompt
        .segment(|k| matches!(k, SegmentKind::Default))
        .expect("every prompt has a default segment")
}

fn cut_name(cut: Option<Keep>) -> &'static str {
    match cut {
        None => "-",
        Some(Keep::Start) => "start",
        Some(Keep::End) => "end",
    }
}

fn print_proposals(session: &Session, at: &HoleArgs, listing: &Listing) -> Result<()> {
    let hole = &session.hole;
    let root = session.index.root.to_string_lossy();
    outln!("repository  {}", escape::controls(&root));
    outln!(
        "hole        {}",
        escape::controls(&hole.display(&session.index))
    );
    outln!(
        "line        {}",
        session.index.files[hole.file].line_text(hole.line).trim()
    );
    outln!(
        "target      {}",
        hole.target.as_deref().unwrap_or("(unknown)")
    );
    outln!(
        "budget      {} {} tokens",
        at.budget,
        session.tokenizer.name()
    );
    outln!("ranker      {}", listing.ranker.name());
    outln!();
    outln!(
        "{:>4} {:>6}  {:>3}  {:<23} {:<4} {:<4} {:>6} {:>6}  {:<5}  files used",
        "rank",
        "score",
        "id",
        "source",
        "type",
        "app",
        "tokens",
        "alloc",
        "cut"
    );
    for id in listing.order() {
        let (rank, score) = listing
            .place(id)
            .map_or(("-".into(), "-".into()), |(r, s)| {
                (r.to_string(), format!("{s:.3}"))
            });
        let row = match listing.rows.get(id.index()) {
            Some((proposal, prompt)) => proposal_row(session, at, proposal, prompt),
            None => default_row(session, &listing.default),
        };
        outln!("{rank:>4} {score:>6}  {row}");
    }
    let applicable = listing.rows.iter().filter(|(p, _)| p.applicable()).count();
    outln!();
    outln!(
        "{applicable} of {} proposals applicable; `keyhole prompt REPO POSITION --id ID` shows one.",
        CandidateId::PROPOSALS
    );
    Ok(())
}

/// One proposal's columns from `id` on.
fn proposal_row(
    session: &Session,
    at: &HoleArgs,
    proposal: &ProposalContext,
    prompt: &Prompt,
) -> String {
    let spec = proposal.spec;
    let seg = proposal_segment(prompt);
    let files: Vec<&str> = files_used(proposal, prompt)
        .into_iter()
        .map(|f| file_name(session.path(f)))
        .collect();
    format!(
        "{:>3}  {:<23} {:<4} {:<4} {:>6} {:>6}  {:<5}  {}",
        spec.id,
        spec.source.name(),
        spec.context_type.abbreviation(),
        if proposal.applicable() { "yes" } else { "no" },
        seg.map_or(0, |s| s.tokens),
        compose::proposal_allocation(at.budget, spec.share),
        cut_name(seg.and_then(|s| s.cut)),
        summarize(&files, 3),
    )
}

fn default_row(session: &Session, default: &Prompt) -> String {
    let seg = default_segment(default);
    format!(
        "{:>3}  {:<23} {:<4} {:<4} {:>6} {:>6}  {:<5}  {}",
        CandidateId::DEFAULT,
        "default",
        "-",
        "yes",
        seg.tokens,
        seg.allocated,
        cut_name(seg.cut),
        file_name(session.path(session.hole.file))
    )
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn summarize(items: &[&str], shown: usize) -> String {
    let mut text = items
        .iter()
        .take(shown)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > shown {
        text.push_str(&format!(" +{}", items.len() - shown));
    }
    text
}

fn hole_json(session: &Session) -> Value {
    let hole = &session.hole;
    json!({
        "file": session.path(hole.file),
        "line": hole.line + 1,
        "column": hole.column + 1,
        "target": hole.target,
    })
}

fn proposals_json(session: &Session, at: &HoleArgs, listing: &Listing) -> Value {
    let place = |id| {
        listing
            .place(id)
            .map_or((Value::Null, Value::Null), |(r, s)| (json!(r), json!(s)))
    };
    let proposals: Vec<Value> = listing
        .rows
        .iter()
        .map(|(proposal, prompt)| {
            let spec = proposal.spec;
            let seg = proposal_segment(prompt);
            let used: Vec<&str> = files_used(proposal, prompt).into_iter().map(|f| session.path(f)).collect();
            let (rank, score) = place(spec.id);
            json!({
                "id": spec.id,
                "source": spec.source,
                "context_type": spec.context_type,
                "applicable": proposal.applicable(),
                "rank": rank,
                "score": score,
                "tokens": seg.map_or(0, |s| s.tokens),
                "full_tokens": session.tokenizer.count(&proposal.context.text),
                "allocated": compose::proposal_allocation(at.budget, spec.share),
                "truncated": seg.is_some_and(|s| s.cut.is_some()),
                "cut": seg.and_then(|s| s.cut),
                "files": used,
                "ranked_files": proposal.ranked_files.iter().map(|&f| session.path(f)).collect::<Vec<_>>(),
                "default_tokens": default_segment(prompt).tokens,
            })
        })
        .collect();
    let seg = default_segment(&listing.default);
    let (rank, score) = place(CandidateId::DEFAULT);
    json!({
        "repository": session.index.root,
        "hole": hole_json(session),
        "tokenizer": session.tokenizer.name(),
        "budget": at.budget,
        "ranker": listing.ranker,
        "ranking": listing.ranking.iter().map(|r| r.id).collect::<Vec<_>>(),
        "proposals": proposals,
        "default": { "id": CandidateId::DEFAULT, "rank": rank, "score": score, "tokens": seg.tokens, "truncated": seg.cut.is_some(), "cut": seg.cut },
    })
}

fn prompt_command(at: &HoleArgs, id: CandidateId, backend: &complete::BackendArgs) -> Result<()> {
    let (session, backend) = open_with_backend(at, backend)?;
    let composer =
        compose::Composer::new(&session.index, &session.hole, session.tokenizer, at.budget);
    let (prompt, why_not) = if id < CandidateId::DEFAULT {
        let proposal = session.build(candidate::proposal_specs()[id.index()], at.budget);
        let why_not = (!proposal.applicable()).then(String::new);
        (composer.compose(Some(&proposal)), why_not)
    } else if id == CandidateId::DEFAULT {
        (composer.compose(None), None)
    } else {
        let candidate = session
            .retrieved_now(at, backend.as_ref(), immediate(id))?
            .into_iter()
            .find(|c| c.id == id)
            .context("every retrieved candidate is built")?;
        match candidate.compose(&composer) {
            Some(prompt) => (prompt, None),
            None => (
                composer.compose(None),
                Some(candidate.why_not.unwrap_or_default()),
            ),
        }
    };
    if let Some(why) = why_not {
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        };
        errln!(
            "note: candidate {id} is not applicable here{why}; the prompt is the default context alone"
        );
    }
    if at.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&prompt_json(&session, &prompt))?
        );
    } else {
        out!("{}", prompt.text());
    }
    print_notices(backend.as_ref())
}

fn prompt_json(session: &Session, prompt: &Prompt) -> Value {
    let segments: Vec<Value> = prompt
        .segments
        .iter()
        .map(|s| {
            json!({
                "kind": s.kind,
                "text": s.text.text,
                "tokens": s.tokens,
                "allocated": s.allocated,
                "truncated": s.cut.is_some(),
                "cut": s.cut,
                "pieces": pieces_json(session, &s.text),
            })
        })
        .collect();
    json!({
        "hole": hole_json(session),
        "proposal_id": prompt.proposal_id,
        "tokenizer": prompt.tokenizer,
        "budget": prompt.budget,
        "tokens": prompt.tokens(session.tokenizer),
        "text": prompt.text(),
        "segments": segments,
    })
}

/// Provenance of each piece: the file and 1-based line range it came from.
fn pieces_json(session: &Session, text: &SourcedText) -> Vec<Value> {
    text.pieces
        .iter()
        .map(|p| match p.origin {
            Some(o) => {
                let file = &session.index.files[o.file];
                let last = (o.span.end as usize)
                    .saturating_sub(1)
                    .max(o.span.start as usize);
                json!({
                    "start": p.range.start, "end": p.range.end,
                    "file": file.path,
                    "lines": [file.line_of(o.span.start as usize) + 1, file.line_of(last) + 1],
                })
            }
            None => json!({ "start": p.range.start, "end": p.range.end, "file": null }),
        })
        .collect()
}

fn holes_command(args: &HolesArgs) -> Result<()> {
    let index = open(&args.repo, &args.cache)?;
    let holes = hole::sample_holes_as(&index, args.cap, args.seed, args.fidelity);
    if let Some(path) = &args.export {
        let name = index
            .root
            .file_name()
            .map_or_else(|| "repository".into(), |n| n.to_string_lossy().into_owned());
        let tok = args.tokenizer.tokenizer();
        let rows = holes.iter().map(|h| {
            let prompt = compose::compose(&index, h, None, tok, args.budget).text();
            interop::export_row(&index, &name, h, &prompt)
        });
        interop::write_jsonl(path, rows).with_context(|| format!("{}", path.display()))?;
        errln!("{} tasks written to {}", holes.len(), path.display());
        return Ok(());
    }
    if args.json {
        let rows: Vec<Value> = holes
            .iter()
            .map(|h| json!({ "file": index.files[h.file].path, "line": h.line + 1, "column": h.column + 1, "target": h.target }))
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "holes": rows }))?
        );
    } else {
        for h in &holes {
            // One hole a line, whatever the file is called.
            outln!(
                "{}\t{}",
                escape::controls(&h.display(&index)),
                h.target.as_deref().unwrap_or("")
            );
        }
        errln!("{} holes", holes.len());
    }
    Ok(())
}

fn index_command(repo: &Path, json: bool, cache: &CacheArgs) -> Result<()> {
    let index = open(repo, cache)?;
    let lines: usize = index.files.iter().map(|f| f.line_count()).sum();
    let duplicates = index.graph.duplicated.iter().filter(|&&d| d).count();
    let errors: u32 = index.files.iter().map(|f| f.facts.syntax_errors).sum();
    if json {
        let value = json!({
            "repository": index.root,
            "files": index.files.len(),
            "lines": lines,
            "duplicated_files": duplicates,
            "syntax_errors": errors,
            "cache": index.cache,
            "warnings": index.warnings,
        });
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        outln!(
            "repository  {}",
            escape::controls(&index.root.to_string_lossy())
        );
        outln!(
            "files       {} ({lines} lines, {duplicates} with exact copies, {errors} syntax errors)",
            index.files.len()
        );
        outln!(
            "cache       {} reused, {} parsed",
            index.cache.reused,
            index.cache.parsed
        );
        outln!("warnings    {}", index.warnings.len());
    }
    Ok(())
}
