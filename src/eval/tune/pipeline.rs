//! `keyhole tune` as a library call: sample holes of the user's repositories, label the
//! candidates a plan chooses with the user's backend (online, or through batch files), train
//! RLPG-H on those labels from the classifier that ranks now, compare the two on the held-out
//! holes, and keep the tuned classifier in the data directory for that backend and model, where
//! every session then finds it ([`crate::session::tuned`]). What happens along the way reaches
//! the caller through eval's [`Observer`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{TuneReport, compare, holdout, score_held_out};
use crate::candidate::{CandidateId, Selection};
use crate::context::fidelity::Fidelity;
use crate::eval::labels::{self, LabelFile};
use crate::eval::outdir::{LabelSettings, OutDir, ReportSettings};
use crate::eval::plan::{self, HoleCost};
use crate::eval::run::batch_files::BatchFiles;
use crate::eval::run::{
    At, Backends, EvalError, Observer, Runtime, canonical, in_flight, note_backend, open_index,
    open_labels, repository_names, within_server_limits,
};
use crate::eval::runner::{
    DEFAULT_MAX_FAILURES, DEFAULT_STAGE_DEADLINE, EvalOptions, Failures, RepoRun, RunStats,
};
use crate::eval::shard::Shard;
use crate::rank::classifier::dataset::{Corpus, Rebuild};
use crate::rank::classifier::train::{self as training, Holdout, TrainOptions};
use crate::rank::classifier::{Classifier, Variant};
use crate::repo::RepoIndex;
use crate::session::tuned::{self, TunedInfo};
use crate::session::{Session, Settings};

/// What a tuning run does beyond the settings (whose budget, seed, backend and language
/// servers it uses; contexts are always built by the paper's rules, as the bundled classifier
/// was trained).
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Holes sampled per repository.
    pub holes: usize,
    /// At most this many requests this run, spent where labels teach most; none: every
    /// candidate of every hole.
    pub requests: Option<usize>,
    /// Completions in flight at once (at most the backend's `concurrency`).
    pub concurrency: usize,
    /// Stop when a hole waits this long for one stage (a stall, never a slow run).
    pub stage_deadline: std::time::Duration,
    pub max_epochs: usize,
    pub patience: usize,
    /// Write the requests still needed to this file (OpenAI Batch API input) instead of
    /// sending them.
    pub export_requests: Option<PathBuf>,
    /// Label from the answers in these batch output files.
    pub import_responses: Vec<PathBuf>,
    /// Train on the completions of `keyhole proxy --compose` a person accepted or rejected
    /// too ([`super::recorded`]).
    pub recorded_outcomes: bool,
}

impl Default for Tuning {
    /// `keyhole tune`'s defaults.
    fn default() -> Self {
        Tuning {
            holes: 200,
            requests: None,
            concurrency: 4,
            stage_deadline: DEFAULT_STAGE_DEADLINE,
            max_epochs: 40,
            patience: 5,
            export_requests: None,
            import_responses: Vec::new(),
            recorded_outcomes: false,
        }
    }
}

/// A tuned classifier, kept where sessions find it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Tuned {
    pub info: TunedInfo,
    pub report: TuneReport,
    /// The directory it is kept in (with `report.md` and `report.json`).
    pub dir: PathBuf,
}

/// One repository as tune works on it.
struct Repo {
    name: String,
    path: PathBuf,
    session: Session,
    labels: LabelFile,
}

/// Tunes RLPG-H for the settings' backend on `repos` (with two or more, the last is held
/// out; with one, about a fifth of its holes' files). `None` when requests were exported and
/// their answers are still to come.
pub fn run(
    settings: &Settings,
    repos: &[PathBuf],
    tuning: &Tuning,
    observer: &dyn Observer,
) -> Result<Option<Tuned>, EvalError> {
    let entry = settings.backend().clone();
    let Some(dir) = tuned::tuned_dir(&settings.dirs, &entry) else {
        return Err(EvalError::NoDataDirectory {
            purpose: "to keep the tuned classifier in (set KEYHOLE_DATA_DIR)",
        });
    };
    let names = repository_names(repos)?;
    let mut options = EvalOptions {
        holes: Some(tuning.holes),
        seed: settings.seed,
        budget: settings.budget,
        concurrency: in_flight(tuning.concurrency, &entry, observer)?,
        shard: Shard::WHOLE,
        // The default context always; the plan adds the other candidates per hole.
        candidates: Selection {
            ids: vec![CandidateId::DEFAULT],
            top: None,
        },
        fidelity: Fidelity::Paper,
        tokenizer: settings.tokenizer(),
        plan: None,
        stage_deadline: tuning.stage_deadline,
    };
    let paths: Vec<PathBuf> = repos.iter().map(|p| canonical(p)).collect();
    let mut out = OutDir::open(
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
    .map_err(EvalError::of_tune_directory)?;
    // The classifier that ranks now: the plan weighs its doubts, the report compares with it.
    let learning = settings.learning()?;
    let before = match learning.tuned() {
        Some(info) => info.describe(),
        None => "bundled".to_string(),
    };
    let mut backends = Backends::new(&entry, options.concurrency);
    let mut opened = Vec::new();
    for (path, name) in paths.iter().zip(&names) {
        let index = open_index(settings, path)?;
        out.check_sources(name, &index)
            .map_err(EvalError::of_tune_directory)?;
        let session = Session::builder(settings)
            .learning(learning.clone())
            .backend(backends.for_index(&index)?)
            .on(index)?;
        let labels = open_labels(&out.label_dir(), name, observer)?;
        opened.push(Repo {
            name: name.clone(),
            path: path.clone(),
            session,
            labels,
        });
    }
    let holdout = held_out(&opened, &options)?;
    let planned = plan_labels(&opened, &options, &holdout, tuning.requests, observer)?;
    observer.note(&format!(
        "{} requests planned for {} holes ({} held out{})",
        planned.requests,
        planned.holes(),
        planned.held_out,
        match tuning.requests {
            Some(n) => format!(", of a budget of {n}"),
            None => String::new(),
        }
    ))?;
    options.plan = Some(Arc::new(planned));
    let Some(stats) = label(
        tuning,
        &entry,
        &mut backends,
        &mut options,
        &mut opened,
        observer,
    )?
    else {
        return Ok(None); // requests exported; answers to come
    };
    let report = train_and_compare(
        tuning, settings, &out, &opened, holdout, before, &stats, observer,
    )?;
    let info = TunedInfo {
        version: 0, // set by `record`
        backend: entry.name.clone(),
        model: tuned::model_name(&entry),
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
    tuned::record(&dir, &info).writing(&dir)?;
    Ok(Some(Tuned { info, report, dir }))
}

/// The held-out holes, chosen among every sampled hole (labelled or not) so that each run
/// holds out the same.
fn held_out(repos: &[Repo], options: &EvalOptions) -> Result<Holdout, EvalError> {
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
    Ok(holdout(&files)?)
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
    observer: &dyn Observer,
) -> Result<plan::Plan, EvalError> {
    let mut holes = Vec::new();
    let mut labelled = Vec::new();
    let mut held_out_done = false;
    for repo in repos {
        let run = run_of(repo, options);
        let sampled = run.holes();
        for (done, hole) in sampled.iter().enumerate() {
            observer.composing(&repo.name, done, sampled.len());
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
        }
        observer.composing(&repo.name, sampled.len(), sampled.len());
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
    tuning: &Tuning,
    entry: &crate::model::config::BackendConfig,
    backends: &mut Backends,
    options: &mut EvalOptions,
    repos: &mut [Repo],
    observer: &dyn Observer,
) -> Result<Option<RunStats>, EvalError> {
    let mut batch = BatchFiles::open(
        tuning.export_requests.as_deref(),
        &tuning.import_responses,
        entry,
        observer,
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
                observer,
            )?;
            backends.in_flight = options.concurrency;
        }
        let run = RepoRun {
            repository: &repo.name,
            session: &repo.session,
            options,
        };
        let progress = |done, total| observer.holes(&repo.name, done, total);
        let result = match &mut batch {
            Some(batch) => batch.label(&run, &mut repo.labels),
            None => run
                .run(&runtime, &mut repo.labels, &progress, &mut failures)
                .map_err(Into::into),
        };
        observer.labelled(&repo.name);
        if backends.shared().is_none() {
            note_backend(repo.session.backend.as_ref(), observer)?;
        }
        let stats = result?;
        observer.note(&format!(
            "{}: {stats}; {} requests, {} candidates answered by an identical prompt's",
            repo.name, stats.requests, stats.shared
        ))?;
        total.holes += stats.holes;
        total.failed += stats.failed;
        total.requests += stats.requests;
        total.shared += stats.shared;
    }
    if let Some(backend) = backends.shared() {
        note_backend(backend.as_ref(), observer)?;
    }
    if let Some(batch) = batch
        && !batch.finish(observer)?
    {
        return Ok(None);
    }
    if total.failed > 0 {
        observer.note(&format!(
            "{} holes failed and are left out; running tune again labels them",
            total.failed
        ))?;
    }
    Ok(Some(total))
}

/// Trains RLPG-H on every label of the tune directory and compares it on the held-out holes.
#[allow(clippy::too_many_arguments)] // one call, each argument a different stage's result
fn train_and_compare(
    tuning: &Tuning,
    settings: &Settings,
    out: &OutDir,
    repos: &[Repo],
    holdout: Holdout,
    before: String,
    stats: &RunStats,
    observer: &dyn Observer,
) -> Result<TuneReport, EvalError> {
    let rows = labels::read_all(&out.label_files()?).at(&out.label_dir())?;
    let corpus: Vec<(String, PathBuf)> = repos
        .iter()
        .map(|r| (r.name.clone(), r.path.clone()))
        .collect();
    let rebuild = Rebuild {
        corpus: Corpus::Paths(&corpus),
        tokenizer: settings.tokenizer().tokenizer(),
        budget: settings.budget,
        with_contexts: false,
        encoder: None,
        cache: settings.dirs.cache.as_deref(),
    };
    // The person's own outcomes teach; the held-out comparison stays the labelled holes'.
    let mut taught = rows.clone();
    if tuning.recorded_outcomes {
        let (recorded, skipped) =
            super::recorded::outcome_rows(&settings.dirs, settings.backend(), &corpus, &holdout)?;
        observer.note(&format!(
            "{} completions accepted or rejected through keyhole proxy --compose join the labels ({} in held-out files left out)",
            recorded.len(),
            skipped.len()
        ))?;
        taught.extend(recorded);
    }
    let built = rebuild.examples(&taught);
    for line in built.skipped.iter().take(5) {
        observer.note(&format!("skipped: {line}"))?;
    }
    let model_path = out.root().join(tuned::CLASSIFIER_FILE);
    let options = TrainOptions {
        variant: Variant::H,
        validation: holdout.clone(),
        max_epochs: tuning.max_epochs,
        patience: tuning.patience,
        seed: settings.seed,
        fine_tune: true,
    };
    // From the classifier that ranks now: an earlier tuning's, else the bundled one.
    let before_tuned = matches!(tuned::find(&settings.dirs, settings.backend()), Ok(Some(_)));
    let start = before_tuned.then_some(model_path.as_path());
    // Not yet where sessions look: the comparison needs the classifier that ranked before.
    let trained_path = model_path.with_extension("new.safetensors");
    let training = training::train(&built.examples, &options, start, &trained_path, &|e| {
        let _ = observer.note(&format!(
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
    let (scored, skipped) = score_held_out(&rows, &holdout, &indexes, &trained, &before_classifier);
    for line in skipped.iter().take(5) {
        observer.note(&format!("skipped: {line}"))?;
    }
    std::fs::rename(&trained_path, &model_path).writing(&model_path)?;
    Ok(TuneReport {
        backend: settings.backend().name.clone(),
        model: tuned::model_name(settings.backend()),
        repositories: repos.iter().map(|r| r.name.clone()).collect(),
        held_out: holdout.describe(),
        before,
        batch: !tuning.import_responses.is_empty(),
        requests: stats.requests,
        shared: stats.shared,
        comparison: compare(&scored),
        training,
    })
}

fn write_report(report: &TuneReport, dir: &Path) -> Result<(), EvalError> {
    let json = dir.join("report.json");
    let md = dir.join("report.md");
    let text = serde_json::to_vec_pretty(report).writing(&json)?;
    std::fs::write(&json, text).writing(&json)?;
    std::fs::write(&md, report.markdown()).writing(&md)
}
