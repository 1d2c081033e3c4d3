//! `keyhole tasks`: complete the tasks of a RepoEval or CrossCodeEval task file and score
//! them.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::Args;
use clap::builder::TypedValueParser as _;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use super::backends::BackendArgs;
use super::bounds;
use keyhole::eval::interop::{self, Task};
use keyhole::eval::runner::{DEFAULT_MAX_FAILURES, Failures};
use keyhole::feedback::write_atomic;
use keyhole::metrics;
use keyhole::model::config;
use keyhole::model::ngram::EmbeddedModel;
use keyhole::model::{self, Backend, CompletionRequest};
use keyhole::session::{Choices, Session};
use std::sync::Arc;

#[derive(Args)]
pub struct TasksArgs {
    /// A RepoEval or CrossCodeEval task file (JSONL).
    file: std::path::PathBuf,
    /// The repository the tasks come from, for the embedded model's statistics (without it,
    /// the embedded model learns from each prompt alone).
    #[arg(long)]
    repo: Option<std::path::PathBuf>,
    /// Write one JSON line per completed task (id, prediction, scores) here, as each
    /// completes; a run given the same file again completes only the tasks it lacks.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Completions in flight at once.
    #[arg(long, default_value_t = 4, value_parser = bounds::concurrency)]
    concurrency: usize,
    /// Stop after this many failed requests in a row (a dead or hung server; a wrong key,
    /// model or URL stops the run at the first answer).
    #[arg(long, default_value_t = DEFAULT_MAX_FAILURES, value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    max_failures: usize,
    #[command(flatten)]
    backend: BackendArgs,
}

/// Complete every task of a benchmark file and report exact match and edit similarity over
/// the completed ones; a failed request is no miss: its task is left for the next run, which
/// exits 2 until every task is complete.
pub fn tasks_command(args: &TasksArgs) -> Result<()> {
    let tasks = interop::read_tasks(&args.file)?;
    let mut choices = Choices::default();
    args.backend.choose(&mut choices);
    let settings = super::hole::settings(&choices)?;
    let entry = settings.backend();
    let backend: Arc<dyn Backend> = match (&args.repo, entry.kind) {
        (Some(repo), _) => Session::open(repo, &settings)?.backend,
        (None, config::BackendKind::Embedded) => Arc::new(EmbeddedModel::without_repository()),
        (None, config::BackendKind::Local) => Arc::new(model::local::LocalBackend::open(entry)?),
        (None, _) => Arc::from(model::http::build_http(entry)?),
    };
    let mut done = match &args.out {
        Some(out) => completed(out, &tasks).with_context(|| format!("{}", out.display()))?,
        None => HashMap::new(),
    };
    let resumed = done.len();
    let mut out = match &args.out {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("{}", path.display()))?,
        ),
        None => None,
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let mut failures = Failures::of("tasks", args.max_failures);
    let (mut failed, mut last_error) = (0usize, None);
    let todo: Vec<&Task> = tasks.iter().filter(|t| !done.contains_key(&t.id)).collect();
    runtime.block_on(async {
        let mut answers = stream::iter(todo)
            .map(|task| {
                let request = entry.apply(&CompletionRequest {
                    suffix: task.suffix.clone(),
                    current_file: Some(task.file.clone()),
                    ..CompletionRequest::single_line(task.prompt.clone())
                });
                let backend = backend.as_ref();
                async move { (task, backend.complete(&request, None).await) }
            })
            .buffer_unordered(args.concurrency.max(1));
        while let Some((task, result)) = answers.next().await {
            failures.request(&result)?;
            let completions = match result {
                Ok(completions) => completions,
                Err(err) => {
                    failed += 1;
                    last_error = Some(err);
                    continue;
                }
            };
            let prediction = completions.into_iter().next().map(|c| c.text);
            let row = TaskRow::scored(task, prediction.unwrap_or_default());
            if let (Some(file), Some(path)) = (out.as_mut(), &args.out) {
                let mut line = serde_json::to_vec(&row)?;
                line.push(b'\n');
                file.write_all(&line)
                    .with_context(|| format!("{}", path.display()))?;
            }
            done.insert(task.id.clone(), row.scores());
        }
        anyhow::Ok(())
    })?;
    let completed = done.len();
    let exact = done.values().filter(|s| s.0).count();
    let similarity: f64 = done.values().map(|s| s.1).sum();
    let n = completed.max(1) as f64;
    outln!(
        "{} tasks, backend {}: exact match {:.2}%, edit similarity {:.2}% over the {completed} completed ({resumed} from an earlier run), {failed} failed",
        tasks.len(),
        entry.name,
        100.0 * exact as f64 / n,
        100.0 * similarity / n
    );
    if let Some(last) = last_error {
        bail!(
            "{failed} of {} tasks failed and are not scored (the last: {last}); running the same command again{} completes them",
            tasks.len(),
            if args.out.is_some() {
                " with the same --out"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// The tasks of `tasks` that the results file `path` holds, with their scores; its lines of
/// other tasks and any line a killed run cut short are dropped from it.
fn completed(path: &Path, tasks: &[Task]) -> Result<HashMap<String, (bool, f64)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e.into()),
    };
    let ids: std::collections::HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    let mut done = HashMap::new();
    let mut kept = String::new();
    for line in text.split_inclusive('\n') {
        let Ok(row) = serde_json::from_str::<StoredRow>(line) else {
            continue;
        };
        // Older versions wrote failed tasks too, with their error: no result.
        let whole = line.ends_with('\n') && row.error.is_none();
        if !whole || !ids.contains(row.task_id.as_str()) {
            continue;
        }
        if done
            .insert(row.task_id, (row.exact_match, row.edit_similarity))
            .is_none()
        {
            kept.push_str(line);
        }
    }
    if kept != text {
        write_atomic(path, kept.as_bytes())?;
    }
    Ok(done)
}

/// One line of `--out`.
#[derive(Serialize)]
struct TaskRow<'a> {
    task_id: &'a str,
    prediction: String,
    ground_truth: &'a str,
    exact_match: bool,
    edit_similarity: f64,
}

impl<'a> TaskRow<'a> {
    fn scored(task: &'a Task, prediction: String) -> TaskRow<'a> {
        // Task ground truths may span lines; single-line completions are scored on the first.
        let truth = task.ground_truth.lines().next().unwrap_or_default();
        let scores = metrics::score(&prediction, truth);
        TaskRow {
            task_id: &task.id,
            prediction,
            ground_truth: truth,
            exact_match: scores.exact_match,
            edit_similarity: scores.edit_similarity,
        }
    }

    fn scores(&self) -> (bool, f64) {
        (self.exact_match, self.edit_similarity)
    }
}

/// What a resumed run reads back of a line of `--out`.
#[derive(Deserialize)]
struct StoredRow {
    task_id: String,
    exact_match: bool,
    edit_similarity: f64,
    #[serde(default)]
    error: Option<String>,
}
