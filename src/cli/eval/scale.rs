//! `keyhole eval merge`: the glue between the command line and [`keyhole::eval::merge`].

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Subcommand;

use super::{BackendArgs, EvalArgs, canonical, eval_command, repository_name};
use keyhole::eval::merge::{self, Merged};
use keyhole::eval::runner::DEFAULT_MAX_FAILURES;

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
    },
}

pub(super) fn run(command: &EvalCommand) -> Result<()> {
    match command {
        EvalCommand::Merge {
            dirs,
            out,
            repos,
            concurrency,
        } => merge_command(dirs, out, repos, *concurrency),
    }
}

fn merge_command(
    dirs: &[PathBuf],
    out: &std::path::Path,
    repos: &[PathBuf],
    concurrency: usize,
) -> Result<()> {
    let merged = merge::read(dirs)?;
    let repos = repositories(&merged, repos)?;
    drop(merge::write(&merged, out)?);
    let shards = merged.shards.len();
    errln!(
        "merged {} holes from {shards} shard{} into {}",
        merged.holes(),
        if shards == 1 { "" } else { "s" },
        out.display()
    );
    let missing = merged.missing();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
        errln!(
            "warning: shards {} are not among them; merge again with them into a new --out for the whole run",
            names.join(", ")
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
        budget: labels.budget,
        concurrency,
        max_failures: DEFAULT_MAX_FAILURES,
        keep_bandit: false,
        backend: BackendArgs::recorded(&labels.backend, labels.model.clone(), labels.max_tokens),
        classifier: (report.classifier != "bundled").then(|| PathBuf::from(&report.classifier)),
        encoder_dir: report.encoder_dir.as_ref().map(PathBuf::from),
        compose: report.compose.clone(),
        shard: None,
        report_only: true,
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
