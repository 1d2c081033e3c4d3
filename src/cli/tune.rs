//! `keyhole tune`: its flags, and what [`keyhole::eval::tune::run`] says on the terminal.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::backends::BackendArgs;
use super::eval::Terminal;
use keyhole::compose;
use keyhole::context::fidelity::Fidelity;
use keyhole::eval::runner::DEFAULT_STAGE_DEADLINE;
use keyhole::eval::tune::{self, Tuning};
use keyhole::hole;
use keyhole::session::{Choices, Settings};

#[derive(Args)]
pub struct TuneArgs {
    /// Your repositories (their directory names name them); with two or more, the last is
    /// held out to measure the tuned ranker on, with one, about a fifth of its holes' files.
    #[arg(required = true)]
    repos: Vec<PathBuf>,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    servers: super::hole::ServerArgs,
    /// At most this many requests this run, spent where labels teach most: held-out holes in
    /// full, then the candidates the current classifier is least sure of [default: every
    /// candidate of every hole].
    #[arg(long, value_parser = super::bounds::requests)]
    requests: Option<usize>,
    /// Holes sampled per repository.
    #[arg(long, default_value_t = 200, value_parser = super::bounds::holes)]
    holes: usize,
    #[arg(long, default_value_t = hole::DEFAULT_SEED)]
    seed: u64,
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = super::bounds::budget)]
    budget: usize,
    /// Completions in flight at once (at most the backend's `concurrency` in backends.toml).
    #[arg(long, default_value_t = 4, value_parser = super::bounds::concurrency)]
    concurrency: usize,
    /// Stop, naming the hole and the stage, when a hole waits this many seconds for one
    /// stage: its prompts, or one request (a stall; a request's own deadline comes first).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_STAGE_DEADLINE.as_secs(), value_parser = super::bounds::stage_deadline)]
    stage_deadline: u64,
    #[arg(long, default_value_t = 40, value_parser = super::bounds::epochs)]
    max_epochs: usize,
    #[arg(long, default_value_t = 5, value_parser = super::bounds::epochs)]
    patience: usize,
    /// Write the requests still needed to FILE (OpenAI Batch API input, as `keyhole eval`
    /// does) for a serving engine, instead of sending them.
    #[arg(long, value_name = "FILE")]
    export_requests: Option<PathBuf>,
    /// Label from the answers in these batch output files (comma-separated, or repeated).
    #[arg(long, value_name = "FILE", value_delimiter = ',')]
    import_responses: Vec<PathBuf>,
    /// Train on what you kept too: each completion of keyhole's prompt that `keyhole proxy
    /// --compose` in front of this backend saw you accept or reject in one of REPOS is a label
    /// for the candidate whose context it sent (docs/proxy.md).
    #[arg(long)]
    recorded_outcomes: bool,
}

pub fn tune_command(args: &TuneArgs) -> Result<()> {
    let settings = session_settings(args)?;
    let tuning = Tuning {
        holes: args.holes,
        requests: args.requests,
        concurrency: args.concurrency,
        stage_deadline: std::time::Duration::from_secs(args.stage_deadline),
        max_epochs: args.max_epochs,
        patience: args.patience,
        export_requests: args.export_requests.clone(),
        import_responses: args.import_responses.clone(),
        recorded_outcomes: args.recorded_outcomes,
    };
    let Some(tuned) = tune::run(&settings, &args.repos, &tuning, &Terminal::default())? else {
        return Ok(()); // requests exported; answers to come
    };
    outln!("{}", tuned.report.markdown());
    errln!(
        "{} in {}: keyhole ranks with it whenever {} is the backend",
        tuned.info.describe(),
        tuned.dir.display(),
        tuned.info.backend
    );
    Ok(())
}

fn session_settings(args: &TuneArgs) -> Result<Settings> {
    let mut choices = Choices {
        budget: Some(args.budget),
        profile: Some(Fidelity::Paper),
        seed: Some(args.seed),
        ..Choices::default()
    };
    args.backend.choose(&mut choices);
    args.servers.choose(&mut choices);
    super::hole::settings(&choices)
}
