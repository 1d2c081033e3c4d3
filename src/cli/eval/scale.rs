//! `keyhole eval merge`: the glue between the command line and [`keyhole::eval::merge`].

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Subcommand;

use super::{BackendArgs, EvalArgs, PromptArgs, eval_command};
use keyhole::candidate::Selection;
use keyhole::eval::merge::{self, Merged};
use keyhole::eval::run::{canonical, repository_name};
use keyhole::eval::runner::{DEFAULT_MAX_FAILURES, DEFAULT_STAGE_DEADLINE};
use keyhole::repo::RepoIndex;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Put the --out directories of `keyhole eval --shard I/N` runs together into one, and
    /// write its report as one run over every hole would (ranking with the classifier and
    /// completing Table 10's compositions with the shards' backend).
    Merge {
        /// The shards' output directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged output directory (new, or without label rows).
        #[arg(long)]
        out: PathBuf,
        /// The repositories (comma-separated) [default: where the first shard found them].
        #[arg(long, value_delimiter = ',')]
        repos: Vec<PathBuf>,
        /// Completions in flight at once, for Table 10's compositions.
        #[arg(long, default_value_t = 4, value_parser = crate::cli::bounds::concurrency)]
        concurrency: usize,
        /// Table 10's compositions to complete [default: the shards'; `1` completes none, for
        /// shards labelled from batch files, whose backend may not be reachable].
        #[arg(long, value_delimiter = ',')]
        compose: Option<Vec<usize>>,
    },
}

pub(super) fn run(command: &EvalCommand) -> Result<()> {
    match command {
        EvalCommand::Merge {
            dirs,
            out,
            repos,
            concurrency,
            compose,
        } => merge_command(dirs, out, repos, *concurrency, compose.as_deref()),
    }
}

fn merge_command(
    dirs: &[PathBuf],
    out: &std::path::Path,
    repos: &[PathBuf],
    concurrency: usize,
    compose: Option<&[usize]>,
) -> Result<()> {
    let merged = merge::read(dirs)?;
    let repos = repositories(&merged, repos)?;
    let names = &merged.settings.labels.repositories;
    let mut indexes = Vec::new();
    for path in &repos {
        indexes.push(RepoIndex::open(path, crate::cli::dirs().cache.as_deref())?);
    }
    let indexes: Vec<(String, &RepoIndex)> = names.iter().cloned().zip(&indexes).collect();
    merged.check_sources(&indexes)?;
    let with_holes = merged.with_holes(&indexes);
    drop(merge::write(&merged, out)?);
    let shards = merged.shards.len();
    errln!(
        "merged {} holes from {shards} shard{} into {}",
        merged.holes(),
        if shards == 1 { "" } else { "s" },
        out.display()
    );
    for shard in &with_holes {
        errln!(
            "warning: shard {} ({}) has no rows for {} of its {} holes (its eval failed on them or stopped part way): run its `keyhole eval` again to finish it, then merge into a new --out",
            shard.shard,
            shard.dir.display(),
            shard.missing,
            shard.holes
        );
    }
    let missing = merged.missing();
    if let Some(first) = missing.first() {
        errln!(
            "warning: {} of the run's {} shards are not among them ({first}{}); merge again with them into a new --out for the whole run",
            missing.len(),
            first.count(),
            and_more(missing.len())
        );
    }
    // The report is eval's own, made without labelling anything.
    let labels = &merged.settings.labels;
    let report = &merged.settings.report;
    eval_command(&EvalArgs {
        command: None,
        repos,
        holes: labels.holes.unwrap_or(usize::MAX),
        seed: labels.seed,
        out: out.to_path_buf(),
        train: report.train.clone(),
        // The run's own tokenizer and profile, as the label settings recorded them.
        prompt: PromptArgs {
            budget: labels.budget,
            tokenizer: labels.tokenizer.parse().ok(),
            fidelity: labels.fidelity,
        },
        concurrency,
        max_failures: DEFAULT_MAX_FAILURES,
        stage_deadline: DEFAULT_STAGE_DEADLINE.as_secs(),
        keep_bandit: false,
        backend: BackendArgs::recorded(&labels.backend, labels.model.clone(), labels.max_tokens),
        servers: Default::default(),
        classifier: (report.classifier != "bundled").then(|| PathBuf::from(&report.classifier)),
        encoder_dir: report.encoder_dir.as_ref().map(PathBuf::from),
        compose: super::super::bounds::Compositions(compose.unwrap_or(&report.compose).to_vec()),
        shard: None,
        candidates: Selection::parse(&labels.candidates).ok(),
        report_only: true,
        export_requests: None,
        import_responses: Vec::new(),
    })
}

/// The repositories the shards labelled: `given`, or where the first shard found them; either
/// way named as the shards name them.
fn repositories(merged: &Merged, given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let names = &merged.settings.labels.repositories;
    let (paths, whence) = if given.is_empty() {
        let recorded = &merged.settings.repository_paths;
        if let Some(absent) = recorded.iter().find(|p| !p.is_dir()) {
            bail!(
                "{} is not here (the shards found their repositories there): give the repositories with --repos",
                absent.display()
            );
        }
        (recorded.clone(), "the shards' settings")
    } else {
        (given.iter().map(|p| canonical(p)).collect(), "--repos")
    };
    let found: Vec<String> = paths.iter().map(|p| repository_name(p)).collect();
    if &found != names {
        bail!(
            "{whence} name the repositories {}, but the shards labelled {} (give them in that order with --repos)",
            found.join(","),
            names.join(",")
        );
    }
    Ok(paths)
}

/// `, and N more` after the first of `count` things named.
fn and_more(count: usize) -> String {
    match count {
        0 | 1 => String::new(),
        n => format!(", and {} more", n - 1),
    }
}
