//! `keyhole eval`: RLPG's protocol over repositories, label files, and the report.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use clap::builder::TypedValueParser as _;
use indicatif::{ProgressBar, ProgressStyle};

mod report;
pub(super) mod scale;

use super::backends::BackendArgs;
use super::dirs;
use keyhole::candidate::Selection;
use keyhole::compose;
use keyhole::context::fidelity::Fidelity;
use keyhole::eval::WRITTEN_ROWS;

use keyhole::eval::labels::{self, LabelFile};
use keyhole::eval::outdir::{LabelSettings, OutDir, ReportSettings};
use keyhole::eval::runner::{
    DEFAULT_MAX_FAILURES, EvalOptions, Failures, RepoRun, RunStats, run_holes,
};
use keyhole::eval::shard::Shard;
use keyhole::model;
use keyhole::model::Backend;
use keyhole::model::config::{BackendConfig, BackendKind};
use keyhole::repo::RepoIndex;
use keyhole::session::{Choices, Session, Settings};
use keyhole::token::TokenizerKind;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: Option<scale::EvalCommand>,
    /// Repositories to evaluate (their directory names name them in reports).
    #[arg(required = true)]
    repos: Vec<PathBuf>,
    /// Holes per repository at most, drawn with --seed (RLPG's cap is 10,000).
    #[arg(long, default_value_t = 10_000)]
    holes: usize,
    #[arg(long, default_value_t = 9)]
    seed: u64,
    /// Where label files (labels/REPO.jsonl), report.md, report.json and plots/ go.
    #[arg(long, default_value = "keyhole-eval")]
    out: PathBuf,
    /// Repositories of the training split (comma-separated names); the fixed proposal is
    /// chosen on them and the others are the test split.
    #[arg(long, value_delimiter = ',')]
    train: Vec<String>,
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = super::bounds::budget)]
    budget: usize,
    /// Tokenizer the budget is counted in [default: the backend's].
    #[arg(long)]
    tokenizer: Option<TokenizerKind>,
    /// Whose rules place the holes and build the contexts where a paper and its authors'
    /// code disagree: paper or code.
    #[arg(long, default_value = "paper")]
    fidelity: Fidelity,
    /// Completions in flight at once (at most the backend's `concurrency` in backends.toml).
    #[arg(long, default_value_t = 4, value_parser = super::bounds::concurrency)]
    concurrency: usize,
    /// Stop after this many failed requests, or failed holes, in a row (a dead or hung
    /// server; a wrong key, model or URL stops the run at the first answer).
    #[arg(long, default_value_t = DEFAULT_MAX_FAILURES, value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    max_failures: usize,
    /// Keep ProCC's bandit, as trained for the report, in the data directory, where
    /// `keyhole proposals` reads it to pick a perspective (it is always written to --out).
    #[arg(long)]
    keep_bandit: bool,
    #[command(flatten)]
    backend: BackendArgs,
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

/// `path` made absolute, where it exists.
pub(super) fn canonical(path: &std::path::Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

pub(super) fn repository_name(path: &std::path::Path) -> String {
    canonical(path).file_name().map_or_else(
        || "repository".to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The concurrency to run with on `backend`'s server: at most the requests it works on at once
/// (more would wait in its queue and run into the deadline), saying so and anything else about
/// its limits the run exceeds. Unchanged where the server does not say.
pub(super) fn within_server_limits(
    backend: &dyn Backend,
    entry: &BackendConfig,
    options: &EvalOptions,
    runtime: &tokio::runtime::Runtime,
) -> Result<usize> {
    let Some(Ok(limits)) = runtime.block_on(backend.limits()) else {
        return Ok(options.concurrency);
    };
    let max_tokens = entry.max_tokens.unwrap_or(model::DEFAULT_MAX_TOKENS);
    for line in limits.advice(&entry.name, options.concurrency, options.budget, max_tokens) {
        errln!("{line}");
    }
    Ok(options.concurrency.min(limits.slots))
}

pub fn eval_command(args: &EvalArgs) -> Result<()> {
    if let Some(command) = &args.command {
        return scale::run(command);
    }
    let settings = session_settings(args)?;
    let entry = settings.backend().clone();
    let tokenizer_kind = settings.tokenizer();
    let mut options = EvalOptions {
        holes: Some(args.holes),
        seed: args.seed,
        budget: args.budget,
        concurrency: scale::in_flight(args.concurrency, &entry)?,
        shard: args.shard.unwrap_or(Shard::WHOLE),
        candidates: args
            .candidates
            .as_ref()
            .map_or_else(Selection::all, |c| c.read_as(args.fidelity.numbering())),
        fidelity: args.fidelity,
        tokenizer: tokenizer_kind,
        plan: None,
    };
    let names: Vec<String> = args.repos.iter().map(|p| repository_name(p)).collect();
    if let Some(name) = names
        .iter()
        .find(|n| names.iter().filter(|m| m == n).count() > 1)
    {
        bail!("two repositories are named {name}: their label files would be one");
    }
    let mut out = OutDir::open(
        &args.out,
        &LabelSettings::new(names.clone(), &options, &entry),
        &report_settings(args),
        &args.repos.iter().map(|p| canonical(p)).collect::<Vec<_>>(),
    )?;
    let mut batch = scale::Batch::open(
        args.export_requests.as_deref(),
        &args.import_responses,
        &entry,
    )?;
    // RLPG-H picks `top:N` candidates with the classifier the report ranks with.
    let learning = settings.learning()?;
    if let Some(ranks_with) = learning.ranks_with(keyhole::rank::RankerKind::RlpgH) {
        errln!("ranking with {ranks_with} (--classifier overrides it)");
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let label_dir = out.label_dir();
    let mut failures = Failures::new(args.max_failures);
    let mut total = RunStats::default();
    let mut backends = Backends::new(&entry, options.concurrency);
    let mut server_checked = false;
    for (path, name) in args.repos.iter().zip(&names) {
        let index = Arc::new(RepoIndex::open(path, dirs().cache.as_deref())?);
        out.check_sources(name, &index)?;
        // A merged directory is reported on, not labelled: its missing shards stay missing.
        if args.report_only {
            let o = &options;
            total.holes += run_holes(&index, o.holes, o.seed, o.fidelity, o.shard).len();
            continue;
        }
        let backend = backends.for_index(&index)?;
        if !server_checked {
            server_checked = true;
            options.concurrency =
                within_server_limits(backend.as_ref(), &entry, &options, &runtime)?;
            backends.in_flight = options.concurrency;
        }
        let label_path = label_dir.join(format!("{name}.jsonl"));
        let (mut labels, _) = LabelFile::open(&label_path, WRITTEN_ROWS)
            .with_context(|| format!("{}", label_path.display()))?;
        if labels.removed_lines() > 0 {
            errln!(
                "{name}: {} lines of holes cut short or written twice were moved to {} (holes cut short are redone)",
                labels.removed_lines(),
                labels::removed_path(&label_path).display()
            );
        }
        let progress = progress_bar(name);
        let session = Session::builder(&settings)
            .learning(learning.clone())
            .backend(backend)
            .on(index)?;
        let run = RepoRun {
            repository: name,
            session: &session,
            options: &options,
        };
        let result = match &mut batch {
            Some(batch) => batch.label(&run, &mut labels),
            None => runtime
                .block_on(run.run(&mut labels, &progress, &mut failures))
                .map_err(Into::into),
        };
        progress.finish_and_clear();
        if backends.shared.is_none() {
            super::hole::print_notices(session.backend.as_ref())?;
        }
        let stats = result?;
        errln!("{name}: {stats}");
        total.holes += stats.holes;
        total.failed += stats.failed;
        total.last_error = stats.last_error.or(total.last_error);
    }
    // A backend that serves every repository says what it changed once.
    if let Some(backend) = &backends.shared {
        super::hole::print_notices(backend.as_ref())?;
    }
    // A batch run reports once every hole is answered.
    if let Some(batch) = batch
        && !batch.finish()?
    {
        return Ok(());
    }
    report::write_report(
        args,
        &mut backends,
        &settings,
        &out,
        &runtime,
        &mut failures,
        total,
    )
}

/// The backend of a run for each repository: the embedded model learns from each one, any
/// other backend (a local model, loaded once; a server, whose fallbacks are learnt once)
/// serves them all.
pub(super) struct Backends<'e> {
    entry: &'e BackendConfig,
    shared: Option<Arc<dyn Backend>>,
    /// Requests in flight at once: what the run asked, within backends.toml's `concurrency`
    /// and the server's slots.
    pub(super) in_flight: usize,
}

impl<'e> Backends<'e> {
    pub(super) fn new(entry: &'e BackendConfig, in_flight: usize) -> Backends<'e> {
        Backends {
            entry,
            shared: None,
            in_flight,
        }
    }

    pub(super) fn entry(&self) -> &BackendConfig {
        self.entry
    }

    /// The backend that completes holes of `index`.
    /// The backend serving every repository, once built (not the embedded model's).
    pub(super) fn shared(&self) -> Option<&Arc<dyn Backend>> {
        self.shared.as_ref()
    }

    pub(super) fn for_index(&mut self, index: &Arc<RepoIndex>) -> Result<Arc<dyn Backend>> {
        if self.entry.kind == BackendKind::Embedded {
            return Ok(Arc::from(model::build_backend(self.entry, index)?));
        }
        if let Some(backend) = &self.shared {
            return Ok(Arc::clone(backend));
        }
        let backend: Arc<dyn Backend> = Arc::from(model::build_backend(self.entry, index)?);
        self.shared = Some(Arc::clone(&backend));
        Ok(backend)
    }
}

/// The settings of the sessions that label each repository.
fn session_settings(args: &EvalArgs) -> Result<Settings> {
    let mut choices = Choices {
        budget: Some(args.budget),
        tokenizer: args.tokenizer,
        profile: Some(args.fidelity),
        seed: Some(args.seed),
        classifier: args.classifier.clone(),
        encoder_dir: args.encoder_dir.clone(),
        ..Choices::default()
    };
    args.backend.choose(&mut choices);
    super::hole::settings(&choices)
}

/// What the report of this run depends on beyond the rows.
fn report_settings(args: &EvalArgs) -> ReportSettings {
    let shown = |p: &std::path::Path| p.display().to_string();
    ReportSettings {
        classifier: args
            .classifier
            .as_deref()
            .map_or_else(|| "bundled".to_string(), shown),
        encoder_dir: args.encoder_dir.as_deref().map(shown),
        train: args.train.clone(),
        compose: args.compose.0.clone(),
    }
}

pub(super) fn progress_bar(name: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} holes  {per_sec}  ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(name.to_string());
    bar
}
