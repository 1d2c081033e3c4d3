//! `keyhole eval merge` and eval's batch files: the glue between the command line and
//! [`keyhole::eval::merge`] and [`keyhole::eval::batch`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use super::{BackendArgs, EvalArgs, canonical, eval_command, repository_name};
use keyhole::candidate::Selection;
use keyhole::eval::batch::{BatchRun, BatchStats, Responses};
use keyhole::eval::labels::LabelFile;
use keyhole::eval::merge::{self, Merged};
use keyhole::eval::runner::{DEFAULT_MAX_FAILURES, RepoRun, RunStats};
use keyhole::model::config::{BackendConfig, MAX_CONCURRENCY};
use keyhole::model::http::BatchCodec;
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
        budget: labels.budget,
        // The run's own tokenizer and profile, as the label settings recorded them.
        tokenizer: labels.tokenizer.parse().ok(),
        fidelity: labels.fidelity,
        concurrency,
        max_failures: DEFAULT_MAX_FAILURES,
        keep_bandit: false,
        backend: BackendArgs::recorded(&labels.backend, labels.model.clone(), labels.max_tokens),
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

/// Completions eval keeps in flight: `asked`, but no more than an HTTP backend's own limit
/// (requests beyond it would wait for a turn within their deadline and time out).
pub(in crate::cli) fn in_flight(asked: usize, entry: &BackendConfig) -> Result<usize> {
    if !entry.kind.is_http() || asked <= entry.concurrency {
        return Ok(asked);
    }
    errln!(
        "{}: {} requests in flight, not {asked}: the backend's concurrency in backends.toml allows no more (it may be raised to {MAX_CONCURRENCY})",
        entry.name,
        entry.concurrency
    );
    Ok(entry.concurrency)
}

impl EvalArgs {
    /// Whether the run is answered from batch files rather than a server.
    pub(super) fn batch(&self) -> bool {
        self.export_requests.is_some() || !self.import_responses.is_empty()
    }
}

/// `--export-requests` and `--import-responses`: a run answered from batch files instead of
/// a server.
pub(in crate::cli) struct Batch {
    codec: BatchCodec,
    responses: Responses,
    /// Where the requests go, and the file they are written to until the run is done.
    export: Option<(PathBuf, PathBuf, BufWriter<File>)>,
    stats: BatchStats,
}

impl Batch {
    /// The batch files `--export-requests` and `--import-responses` name, if any.
    pub(in crate::cli) fn open(
        export_requests: Option<&std::path::Path>,
        import_responses: &[PathBuf],
        entry: &BackendConfig,
    ) -> Result<Option<Batch>> {
        if export_requests.is_none() && import_responses.is_empty() {
            return Ok(None);
        }
        if let Some(export) = export_requests
            && let Some(import) = import_responses
                .iter()
                .find(|import| same_file(export, import))
        {
            bail!(
                "--export-requests {} is also a response file to import: writing the requests would overwrite its answers; export to another file",
                import.display()
            );
        }
        let codec = BatchCodec::new(entry)?;
        let responses = Responses::read(import_responses, &codec)?;
        for file in &responses.cut {
            errln!(
                "{file}: its last line is cut short; its request is exported again (or import the whole file later)"
            );
        }
        if !responses.left_out.is_empty() {
            errln!(
                "warning: {} lines of the response files are left out and their requests asked again ({})",
                responses.left_out.len(),
                named(&responses.left_out)
            );
        }
        if !responses.repeated.is_empty() {
            errln!(
                "warning: {} answers repeat a custom id answered before, and only the first answer of each is used ({})",
                responses.repeated.len(),
                named(&responses.repeated)
            );
        }
        let export = match export_requests {
            Some(path) => {
                let mut partial = path.as_os_str().to_owned();
                partial.push(".partial");
                let partial = PathBuf::from(partial);
                let file =
                    File::create(&partial).with_context(|| format!("{}", partial.display()))?;
                Some((path.to_path_buf(), partial, BufWriter::new(file)))
            }
            None => None,
        };
        Ok(Some(Batch {
            codec,
            responses,
            export,
            stats: BatchStats::default(),
        }))
    }

    /// Labels the holes of `run` the responses answer, and exports what the others need.
    pub(in crate::cli) fn label(
        &mut self,
        run: &RepoRun,
        labels: &mut LabelFile,
    ) -> Result<RunStats> {
        let batch = BatchRun {
            run,
            codec: &self.codec,
            responses: &self.responses,
        };
        let export = self.export.as_mut().map(|(_, _, w)| w as &mut dyn Write);
        let stats = batch
            .run(labels, export)
            .with_context(|| format!("{}", labels.path().display()))?;
        self.stats.add(&stats);
        Ok(RunStats {
            holes: stats.holes,
            resumed: stats.resumed,
            completed: stats.labelled,
            ..RunStats::default()
        })
    }

    /// Finishes the export; true when every hole is labelled (the report can be written).
    pub(in crate::cli) fn finish(self) -> Result<bool> {
        let unknown = self.responses.unknown();
        if !unknown.is_empty() {
            errln!(
                "warning: {} answers are for holes this run does not have (another seed, shard or repository) and are not used ({})",
                unknown.len(),
                named(&unknown)
            );
        }
        if self.responses.failed > 0 {
            errln!(
                "{} answers in the response files are errors and their requests are asked again (the last: {})",
                self.responses.failed,
                self.responses.last_error.as_deref().unwrap_or_default()
            );
        }
        if self.responses.left_to_right && self.export.is_some() {
            errln!(
                "the engine does not fill in the middle (an answer refused the suffix); requests are exported left to right"
            );
        }
        let waiting = self.stats.waiting();
        let stale = self.responses.stale();
        let exported = self.export.is_some();
        if let Some((path, partial, writer)) = self.export {
            let written = writer.into_inner().map_err(|e| e.into_error());
            written
                .and_then(|file| file.sync_all())
                .and_then(|()| std::fs::rename(&partial, &path))
                .with_context(|| format!("{}", path.display()))?;
            errln!("{}", self.stats.export_summary(&path));
        }
        if !stale.is_empty() {
            bail!(
                "{} answers in the response files answer requests this run does not send (made with other settings, such as another --budget, model or candidate set, or by an older keyhole), so they label nothing ({}); answer the requests --export-requests writes with this run's settings",
                stale.len(),
                named(&stale)
            );
        }
        if waiting > 0 && !exported {
            bail!(
                "{waiting} holes have no answers in the response files yet ({} of round 1, {} of round 2); --export-requests FILE writes their requests",
                self.stats.first_holes,
                self.stats.second_holes
            );
        }
        Ok(waiting == 0)
    }
}

/// The first few of `things`, and how many more there are.
fn named(things: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text = things[..things.len().min(SHOWN)].join("; ");
    if things.len() > SHOWN {
        text.push_str(&format!("; and {} more", things.len() - SHOWN));
    }
    text
}

/// `, and N more` after the first of `count` things named.
fn and_more(count: usize) -> String {
    match count {
        0 | 1 => String::new(),
        n => format!(", and {} more", n - 1),
    }
}

/// Whether `a` and `b` name one file (`a` need not exist yet).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    let resolved = |p: &std::path::Path| match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => canonical(if dir.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            dir
        })
        .join(name),
        _ => canonical(p),
    };
    canonical(a) == canonical(b) || resolved(a) == resolved(b)
}
