//! `keyhole tune`: label holes of the user's repositories with their backend, train RLPG-H on
//! those labels, and keep it in the data directory for that backend and model, where every
//! session then finds it ([`keyhole::session::tuned`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::backends::BackendArgs;
use super::dirs;
use super::eval::{Terminal, progress_bar};
use keyhole::candidate::{CandidateId, Selection};
use keyhole::compose;
use keyhole::context::fidelity::Fidelity;
use keyhole::eval::WRITTEN_ROWS;
use keyhole::eval::labels::{self, LabelFile};
use keyhole::eval::outdir::{LabelSettings, OutDir, OutDirError, ReportSettings};
use keyhole::eval::plan::{self, HoleCost};
use keyhole::eval::run::batch_files::BatchFiles;
use keyhole::eval::run::{
    Backends, Observer as _, Runtime, canonical, in_flight, repository_names, within_server_limits,
};
use keyhole::eval::runner::{
    DEFAULT_MAX_FAILURES, DEFAULT_STAGE_DEADLINE, EvalOptions, Failures, RepoRun, RunStats,
};
use keyhole::eval::shard::Shard;
use keyhole::eval::tune::{self, TuneReport};
use keyhole::hole;
use keyhole::rank::classifier::dataset::{Corpus, Rebuild};
use keyhole::rank::classifier::train::{self as training, Holdout, TrainOptions};
use keyhole::rank::classifier::{Classifier, Variant};
use keyhole::repo::RepoIndex;
use keyhole::session::tuned::{self, TunedInfo};
use keyhole::session::{Choices, Session, Settings};

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
}

/// One repository as tune works on it.
struct Repo {
    name: String,
    path: PathBuf,
    session: Session,
    labels: LabelFile,
}

pub fn tune_command(args: &TuneArgs) -> Result<()> {
    let settings = session_settings(args)?;
    let entry = settings.backend().clone();
    let model = tuned::model_name(&entry);
    let Some(dir) = tuned::tuned_dir(&settings.dirs, &entry) else {
        bail!("no data directory to keep the tuned classifier in (set KEYHOLE_DATA_DIR)");
    };
    let names = repository_names(&args.repos)?;
    let mut options = EvalOptions {
        holes: Some(args.holes),
        seed: args.seed,
        budget: args.budget,
        concurrency: in_flight(args.concurrency, &entry, &Terminal::default())?,
        shard: Shard::WHOLE,
        // The default context always; the plan adds the other candidates per hole.
        candidates: Selection {
            ids: vec![CandidateId::DEFAULT],
            top: None,
        },
        fidelity: Fidelity::Paper,
        tokenizer: settings.tokenizer(),
        plan: None,
        stage_deadline: std::time::Duration::from_secs(args.stage_deadline),
    };
    let paths: Vec<PathBuf> = args.repos.iter().map(|p| canonical(p)).collect();
    let out = OutDir::open(
        &dir,
        &LabelSettings::new(names.clone(), &options, &entry),
        &ReportSettings {
            classifier: "tuned".into(),
            encoder_dir: None,
            train: Vec::new(),
            compose: Vec::new(),
        },
        &paths,
    )
    .map_err(in_tune_terms)?;
    let mut out = out;
    // The classifier that ranks now: the plan weighs its doubts, the report compares with it.
    let learning = settings.learning()?;
    let before = match learning.tuned() {
        Some(info) => info.describe(),
        None => "bundled".to_string(),
    };
    let mut backends = Backends::new(&entry, options.concurrency);
    let mut repos = Vec::new();
    for (path, name) in paths.iter().zip(&names) {
        let index = Arc::new(RepoIndex::open(path, dirs().cache.as_deref())?);
        out.check_sources(name, &index).map_err(in_tune_terms)?;
        let session = Session::builder(&settings)
            .learning(learning.clone())
            .backend(backends.for_index(&index)?)
            .on(index)?;
        let label_path = out.label_dir().join(format!("{name}.jsonl"));
        let (labels, _) = LabelFile::open(&label_path, WRITTEN_ROWS)
            .with_context(|| format!("{}", label_path.display()))?;
        repos.push(Repo {
            name: name.clone(),
            path: path.clone(),
            session,
            labels,
        });
    }
    let holdout = held_out(&repos, &options)?;
    let planned = plan_labels(&repos, &options, &holdout, args.requests)?;
    errln!(
        "{} requests planned for {} holes ({} held out{})",
        planned.requests,
        planned.holes(),
        planned.held_out,
        match args.requests {
            Some(n) => format!(", of a budget of {n}"),
            None => String::new(),
        }
    );
    options.plan = Some(Arc::new(planned));
    let stats = label(args, &entry, &mut backends, &mut options, &mut repos)?;
    let Some(stats) = stats else {
        return Ok(()); // requests exported; answers to come
    };
    let report = train_and_compare(args, &settings, &out, &repos, holdout, before, &stats)?;
    let info = TunedInfo {
        version: 0, // set by `record`
        backend: entry.name.clone(),
        model,
        variant: Variant::H.name().to_string(),
        train_holes: report.training.train_holes,
        validation_holes: report.training.validation_holes,
        repositories: names,
        success: report.comparison.tuned,
        success_before: report.comparison.before,
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    write_report(&report, &dir)?;
    tuned::record(&dir, &info).with_context(|| format!("cannot write {}", dir.display()))?;
    outln!("{}", report.markdown());
    errln!(
        "{} in {}: keyhole ranks with it whenever {} is the backend",
        info.describe(),
        dir.display(),
        entry.name
    );
    Ok(())
}

/// `error` said for tune, whose directory is the data directory's, not an --out.
fn in_tune_terms(error: OutDirError) -> anyhow::Error {
    match error {
        OutDirError::Settings { dir, differences } => anyhow::anyhow!(
            "{dir} holds labels made with {differences}: tune with the same settings to go on, or move the directory away to start over"
        ),
        OutDirError::Locked { dir, holder } => {
            anyhow::anyhow!(
                "{dir} is in use by another keyhole run ({holder}); wait for it to finish"
            )
        }
        OutDirError::SourcesChanged {
            dir,
            repository,
            changes,
        } => anyhow::anyhow!(
            "the sources of {repository} changed since its holes were labelled ({changes}): move {dir} away to tune on the repository as it is now"
        ),
        other => other.into(),
    }
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

/// The held-out holes, chosen among every sampled hole (labelled or not) so that each run
/// holds out the same.
fn held_out(repos: &[Repo], options: &EvalOptions) -> Result<Holdout> {
    let files: Vec<(String, Vec<String>)> = repos
        .iter()
        .map(|r| {
            let run = run_of(r, options);
            let index = &r.session.index;
            let files = run
                .holes()
                .into_iter()
                .map(|h| index.files[h.file].path.clone());
            (r.name.clone(), files.collect())
        })
        .collect();
    Ok(tune::holdout(&files)?)
}

fn run_of<'a>(repo: &'a Repo, options: &'a EvalOptions) -> RepoRun<'a> {
    RepoRun {
        repository: &repo.name,
        session: &repo.session,
        options,
    }
}

/// The plan for the holes not yet labelled, within `budget`.
fn plan_labels(
    repos: &[Repo],
    options: &EvalOptions,
    holdout: &Holdout,
    budget: Option<usize>,
) -> Result<plan::Plan> {
    let mut holes = Vec::new();
    let mut labelled = Vec::new();
    let mut held_out_done = false;
    for repo in repos {
        let run = run_of(repo, options);
        let sampled = run.holes();
        let bar = progress_bar(&format!("{}: composing prompts", repo.name));
        bar.set_length(sampled.len() as u64);
        for hole in &sampled {
            let id = run.id(hole);
            let file = &repo.session.index.files[hole.file].path;
            let held = holdout.holds(&repo.name, file);
            if repo.labels.is_done(&id) {
                held_out_done |= held;
                labelled.push(id);
            } else {
                holes.push(HoleCost {
                    hole_id: id,
                    held_out: held,
                    groups: run.candidate_groups(hole),
                });
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    let mut plan = plan::plan(&holes, budget, held_out_done)?;
    for id in &labelled {
        plan.resume(id);
    }
    Ok(plan)
}

/// Labels the planned holes, online or from batch files; `None` when requests were exported
/// and the answers are still to come.
fn label(
    args: &TuneArgs,
    entry: &keyhole::model::config::BackendConfig,
    backends: &mut Backends,
    options: &mut EvalOptions,
    repos: &mut [Repo],
) -> Result<Option<RunStats>> {
    let terminal = Terminal::default();
    let mut batch = BatchFiles::open(
        args.export_requests.as_deref(),
        &args.import_responses,
        entry,
        &terminal,
    )?;
    let runtime = Runtime::start()?;
    let mut failures = Failures::of("tune", DEFAULT_MAX_FAILURES);
    let mut total = RunStats::default();
    let mut server_checked = batch.is_some();
    for repo in repos.iter_mut() {
        if !server_checked {
            server_checked = true;
            options.concurrency = within_server_limits(
                repo.session.backend.as_ref(),
                entry,
                options,
                &runtime,
                &terminal,
            )?;
            backends.in_flight = options.concurrency;
        }
        let run = RepoRun {
            repository: &repo.name,
            session: &repo.session,
            options,
        };
        let progress = |done, total| terminal.holes(&repo.name, done, total);
        let result = match &mut batch {
            Some(batch) => batch.label(&run, &mut repo.labels),
            None => run
                .run(&runtime, &mut repo.labels, &progress, &mut failures)
                .map_err(Into::into),
        };
        terminal.labelled(&repo.name);
        if backends.shared().is_none() {
            super::hole::print_notices(repo.session.backend.as_ref())?;
        }
        let stats = result?;
        errln!(
            "{}: {stats}; {} requests, {} candidates answered by an identical prompt's",
            repo.name,
            stats.requests,
            stats.shared
        );
        total.holes += stats.holes;
        total.failed += stats.failed;
        total.requests += stats.requests;
        total.shared += stats.shared;
    }
    if let Some(backend) = backends.shared() {
        super::hole::print_notices(backend.as_ref())?;
    }
    if let Some(batch) = batch
        && !batch.finish(&terminal)?
    {
        return Ok(None);
    }
    if total.failed > 0 {
        errln!(
            "{} holes failed and are left out; running tune again labels them",
            total.failed
        );
    }
    Ok(Some(total))
}

/// Trains RLPG-H on every label of the tune directory and compares it on the held-out holes.
fn train_and_compare(
    args: &TuneArgs,
    settings: &Settings,
    out: &OutDir,
    repos: &[Repo],
    holdout: Holdout,
    before: String,
    stats: &RunStats,
) -> Result<TuneReport> {
    let rows = labels::read_all(&out.label_files()?)?;
    let corpus: Vec<(String, PathBuf)> = repos
        .iter()
        .map(|r| (r.name.clone(), r.path.clone()))
        .collect();
    let rebuild = Rebuild {
        corpus: Corpus::Paths(&corpus),
        tokenizer: settings.tokenizer().tokenizer(),
        budget: args.budget,
        with_contexts: false,
        encoder: None,
        cache: dirs().cache.as_deref(),
    };
    let built = rebuild.examples(&rows);
    for line in built.skipped.iter().take(5) {
        errln!("skipped: {line}");
    }
    let model_path = out.root().join(tuned::CLASSIFIER_FILE);
    let options = TrainOptions {
        variant: Variant::H,
        validation: holdout.clone(),
        max_epochs: args.max_epochs,
        patience: args.patience,
        seed: args.seed,
        fine_tune: true,
    };
    // From the classifier that ranks now: an earlier tuning's, else the bundled one.
    let before_tuned = matches!(tuned::find(&settings.dirs, settings.backend()), Ok(Some(_)));
    let start = before_tuned.then_some(model_path.as_path());
    // Not yet where sessions look: the comparison needs the classifier that ranked before.
    let trained_path = model_path.with_extension("new.safetensors");
    let training = training::train(&built.examples, &options, start, &trained_path, &|e| {
        let _ = super::write_err(format_args!(
            "epoch {:>2}: train loss {:.4}, held-out loss {:.4}, top-1 success {:.2}%",
            e.epoch, e.train_loss, e.validation_loss, e.validation_success
        ));
    })?;
    let trained = Classifier::load(&trained_path)?;
    let before_classifier = match tuned::find(&settings.dirs, settings.backend()) {
        Ok(Some(found)) => found.classifier,
        _ => Classifier::bundled(),
    };
    let indexes: Vec<(&str, &RepoIndex)> = repos
        .iter()
        .map(|r| (r.name.as_str(), r.session.index.as_ref()))
        .collect();
    let (scored, skipped) =
        tune::score_held_out(&rows, &holdout, &indexes, &trained, &before_classifier);
    for line in skipped.iter().take(5) {
        errln!("skipped: {line}");
    }
    std::fs::rename(&trained_path, &model_path)
        .with_context(|| format!("cannot write {}", model_path.display()))?;
    Ok(TuneReport {
        backend: settings.backend().name.clone(),
        model: tuned::model_name(settings.backend()),
        repositories: repos.iter().map(|r| r.name.clone()).collect(),
        held_out: holdout.describe(),
        before,
        batch: !args.import_responses.is_empty(),
        requests: stats.requests,
        shared: stats.shared,
        comparison: tune::compare(&scored),
        training,
    })
}

fn write_report(report: &TuneReport, dir: &Path) -> Result<()> {
    let json = dir.join("report.json");
    let md = dir.join("report.md");
    std::fs::write(&json, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    std::fs::write(&md, report.markdown()).with_context(|| format!("cannot write {}", md.display()))
}
