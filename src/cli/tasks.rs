//! `keyhole tasks`: complete the tasks of a RepoEval or CrossCodeEval task file and score
//! them.

use anyhow::{Context, Result};
use clap::Args;
use futures_util::stream::{self, StreamExt};
use serde::Serialize;

use super::backends::BackendArgs;
use super::bounds;
use keyhole::eval::interop;
use keyhole::metrics;
use keyhole::model::config;
use keyhole::model::ngram::EmbeddedModel;
use keyhole::model::{self, Backend, Completion, CompletionRequest};
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
    /// Write one JSON line per task (id, prediction, scores) here.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Completions in flight at once.
    #[arg(long, default_value_t = 4, value_parser = bounds::concurrency)]
    concurrency: usize,
    #[command(flatten)]
    backend: BackendArgs,
}

/// Complete every task of a benchmark file and report exact match and edit similarity.
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
        (None, _) => Arc::from(config::build_http(entry)?),
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let results: Vec<(usize, Result<Vec<Completion>, model::BackendError>)> = runtime.block_on(
        stream::iter(tasks.iter().enumerate())
            .map(|(i, task)| {
                let request = entry.apply(&CompletionRequest {
                    suffix: task.suffix.clone(),
                    current_file: Some(task.file.clone()),
                    ..CompletionRequest::single_line(task.prompt.clone())
                });
                let backend = backend.as_ref();
                async move { (i, backend.complete(&request, None).await) }
            })
            .buffer_unordered(args.concurrency.max(1))
            .collect(),
    );
    let mut rows = Vec::with_capacity(tasks.len());
    let (mut exact, mut similarity, mut failed) = (0usize, 0.0f64, 0usize);
    let mut sorted = results;
    sorted.sort_by_key(|(i, _)| *i);
    for (i, result) in sorted {
        let task = &tasks[i];
        let (prediction, error) = match result {
            Ok(c) => (
                c.into_iter().next().map(|c| c.text).unwrap_or_default(),
                None,
            ),
            Err(err) => (String::new(), Some(err.to_string())),
        };
        failed += usize::from(error.is_some());
        // Task ground truths may span lines; single-line completions are scored on the first.
        let truth = task.ground_truth.lines().next().unwrap_or_default();
        let scores = metrics::score(&prediction, truth);
        exact += usize::from(scores.exact_match);
        similarity += scores.edit_similarity;
        rows.push(TaskRow {
            task_id: &task.id,
            prediction,
            ground_truth: truth,
            exact_match: scores.exact_match,
            edit_similarity: scores.edit_similarity,
            error,
        });
    }
    if let Some(out) = &args.out {
        interop::write_jsonl(out, rows).with_context(|| format!("{}", out.display()))?;
    }
    let n = tasks.len().max(1) as f64;
    outln!(
        "{} tasks, backend {}: exact match {:.2}%, edit similarity {:.2}%, {failed} failed",
        tasks.len(),
        entry.name,
        100.0 * exact as f64 / n,
        100.0 * similarity / n
    );
    Ok(())
}

/// One line of `--out`.
#[derive(Serialize)]
struct TaskRow<'a> {
    task_id: &'a str,
    prediction: String,
    ground_truth: &'a str,
    exact_match: bool,
    edit_similarity: f64,
    error: Option<String>,
}
