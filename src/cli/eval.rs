//! `keyhole eval`: RLPG's protocol over repositories, label files, and the report.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Result;
use clap::Args;
use clap::builder::TypedValueParser as _;
use indicatif::{ProgressBar, ProgressStyle};

pub(super) mod scale;

use super::backends::BackendArgs;
use super::hole::PromptArgs;
use keyhole::candidate::Selection;
use keyhole::escape;
use keyhole::eval::run::{self, DEFAULT_CONCURRENCY, DEFAULT_HOLES, Evaluation, Observer};
use keyhole::eval::runner::{DEFAULT_MAX_FAILURES, DEFAULT_STAGE_DEADLINE};
use keyhole::eval::shard::Shard;
use keyhole::hole;
use keyhole::session::{Choices, Settings};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: Option<scale::EvalCommand>,
    /// Repositories to evaluate (their directory names name them in reports).
    #[arg(required = true)]
    repos: Vec<PathBuf>,
    /// Holes per repository at most, drawn with --seed (RLPG's cap is 10,000).
    #[arg(long, default_value_t = DEFAULT_HOLES)]
    holes: usize,
    #[arg(long, default_value_t = hole::DEFAULT_SEED)]
    seed: u64,
    /// Where label files (labels/REPO.jsonl), report.md, report.json and plots/ go.
    #[arg(long, default_value = "keyhole-eval")]
    out: PathBuf,
    /// Repositories of the training split (comma-separated paths, as given or in any other
    /// spelling of the same folder, or names); the fixed proposal is chosen on them and the
    /// others are the test split.
    #[arg(long, value_delimiter = ',')]
    train: Vec<String>,
    #[command(flatten)]
    prompt: PromptArgs,
    /// Completions in flight at once (at most the backend's `concurrency` in backends.toml).
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY, value_parser = super::bounds::concurrency)]
    concurrency: usize,
    /// Stop after this many failed requests, or failed holes, in a row (a dead or hung
    /// server; a wrong key, model or URL stops the run at the first answer).
    #[arg(long, default_value_t = DEFAULT_MAX_FAILURES, value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    max_failures: usize,
    /// Stop, naming the hole and the stage, when a hole waits this many seconds for one
    /// stage: its prompts, or one request (a stall; a request's own deadline comes first).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_STAGE_DEADLINE.as_secs(), value_parser = super::bounds::stage_deadline)]
    stage_deadline: u64,
    /// Keep ProCC's bandit, as trained for the report, in the data directory, where
    /// `keyhole proposals` reads it to pick a perspective (it is always written to --out).
    #[arg(long)]
    keep_bandit: bool,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    servers: super::hole::ServerArgs,
    /// The classifier whose RLPG-H and RLPG-R rankings become report rows [default: the
    /// bundled one].
    #[arg(long)]
    classifier: Option<PathBuf>,
    /// The local BERT-family encoder the classifier was trained with (`keyhole train
    /// --encoder-dir`).
    #[arg(long)]
    encoder_dir: Option<PathBuf>,
    /// Compositions of the classifier's top-l proposals to complete on the test holes
    /// (appendix D.4; comma-separated, l > 1); none with an empty value.
    #[arg(long, default_value = "2,5", value_parser = super::bounds::compositions)]
    compose: super::bounds::Compositions,
    /// Complete only these candidates: ids and ranges (`62,7,63-66`) and `top:N`, RLPG-H's
    /// best N of RLPG's candidates per hole [default: all 0-72]. The default context is always
    /// completed; the others' rows say they were left out, and the report's oracle is over
    /// the set.
    #[arg(long, value_name = "LIST", value_parser = Selection::parse)]
    candidates: Option<Selection>,
    /// Label only shard I of N of the sampled holes (from 1; the same seed gives every
    /// machine the same holes); `keyhole eval merge` puts the shards' --out directories
    /// together.
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// Write the requests the run still needs to FILE (OpenAI Batch API input, which
    /// `vllm run-batch` also reads) instead of sending them; holes take two rounds (RepoCoder's second
    /// iteration and ProCC's hypothetical line and summary need first-round answers).
    #[arg(long, value_name = "FILE")]
    export_requests: Option<PathBuf>,
    /// Label from the answers in these batch output files (comma-separated, or repeated)
    /// instead of asking a server; a file cut short counts as far as it goes.
    #[arg(long, value_name = "FILE", value_delimiter = ',')]
    import_responses: Vec<PathBuf>,
    /// Label nothing: rank and report on the holes already labelled in --out (a run stopped
    /// part way; `keyhole eval merge` does this for merged shards). Table 10's compositions
    /// still ask the backend unless --compose is empty.
    #[arg(long)]
    report_only: bool,
}

pub fn eval_command(args: &EvalArgs) -> Result<()> {
    if let Some(command) = &args.command {
        return scale::run(command);
    }
    let settings = session_settings(args)?;
    let mut evaluation = Evaluation::new(&args.out);
    evaluation.holes = args.holes;
    evaluation.train.clone_from(&args.train);
    evaluation.concurrency = args.concurrency;
    evaluation.max_failures = args.max_failures;
    evaluation.stage_deadline = std::time::Duration::from_secs(args.stage_deadline);
    evaluation.keep_bandit = args.keep_bandit;
    evaluation.compose.clone_from(&args.compose.0);
    evaluation.candidates.clone_from(&args.candidates);
    evaluation.shard = args.shard;
    evaluation.export_requests.clone_from(&args.export_requests);
    evaluation
        .import_responses
        .clone_from(&args.import_responses);
    evaluation.report_only = args.report_only;
    run::run(&settings, &args.repos, &evaluation, &Terminal::default())?;
    Ok(())
}

/// The settings of the sessions that label each repository.
fn session_settings(args: &EvalArgs) -> Result<Settings> {
    let mut choices = Choices {
        seed: Some(args.seed),
        classifier: args.classifier.clone(),
        encoder_dir: args.encoder_dir.clone(),
        ..Choices::default()
    };
    args.prompt.choose(&mut choices);
    args.backend.choose(&mut choices);
    args.servers.choose(&mut choices);
    super::hole::settings(&choices)
}

/// An evaluation as it goes, on a terminal: notes on standard error, a progress bar per
/// repository, the report on standard output.
#[derive(Default)]
pub(super) struct Terminal {
    bar: Mutex<Option<ProgressBar>>,
}

impl Observer for Terminal {
    fn note(&self, line: &str) -> std::io::Result<()> {
        writeln!(std::io::stderr(), "{}", escape::controls(line))
    }

    fn holes(&self, repository: &str, done: usize, total: usize) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bar.get_or_insert_with(|| progress_bar(repository));
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }

    fn composing(&self, repository: &str, done: usize, total: usize) {
        self.holes(&format!("{repository}: composing prompts"), done, total);
        if done == total {
            self.labelled(repository);
        }
    }

    fn labelled(&self, _: &str) {
        let bar = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    }

    fn report(&self, markdown: &str) -> std::io::Result<()> {
        writeln!(std::io::stdout(), "{markdown}")
    }
}

fn progress_bar(name: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} holes  {per_sec}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(name.to_string());
    bar
}
