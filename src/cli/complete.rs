//! `keyhole complete` and `keyhole backends`.

use anyhow::{Context, Result, bail};
use clap::Args;
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{HoleArgs, RankArgs, Session, dirs, hole_json};
use keyhole::candidate::CandidateId;
use keyhole::compose::{Composer, Prompt};
use keyhole::context::perspectives::Candidate;
use keyhole::context::proposals::{self, ProposalContext};
use keyhole::context::typed::{self, CompletionError};
use keyhole::metrics;
use keyhole::model::config::{self, BackendConfig};
use keyhole::model::secret;
use keyhole::model::{self, Backend, Completion, CompletionRequest, TokenCounting};
use keyhole::rank::RankInput;

#[derive(Args)]
pub struct CompleteArgs {
    #[command(flatten)]
    at: HoleArgs,
    /// Candidate ids to complete with (see `keyhole prompt --help`); repeatable. Without it, the
    /// k best-ranked candidates.
    #[arg(long = "id", visible_alias = "proposal")]
    ids: Vec<CandidateId>,
    /// Number of candidates to complete with, one completion each.
    #[arg(short = 'k', default_value_t = 3, value_parser = super::bounds::candidates)]
    k: usize,
    /// Instead, draw this many samples from the first candidate's prompt.
    #[arg(long, value_parser = super::bounds::samples)]
    samples: Option<usize>,
    /// Sampling temperature [default: 0, or 0.8 with --samples].
    #[arg(long, value_parser = super::bounds::temperature)]
    temperature: Option<f32>,
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    rank: RankArgs,
}

/// Which backend to use, with overrides of its configured settings.
#[derive(Args)]
pub(super) struct BackendArgs {
    /// Backend name from backends.toml (`keyhole backends` lists them).
    #[arg(long, default_value = config::EMBEDDED)]
    backend: String,
    /// Override the backend's base URL.
    #[arg(long)]
    url: Option<String>,
    /// Override the backend's model.
    #[arg(long)]
    model: Option<String>,
    /// Most tokens to generate.
    #[arg(long, value_parser = super::bounds::generated_tokens)]
    max_tokens: Option<usize>,
    /// Run this GGUF model file in-process (a one-off local backend, or the path of the
    /// local backend named by --backend).
    #[arg(long, value_name = "FILE")]
    model_path: Option<std::path::PathBuf>,
}

impl Default for BackendArgs {
    /// The embedded backend as configured.
    fn default() -> Self {
        BackendArgs {
            backend: config::EMBEDDED.to_string(),
            url: None,
            model: None,
            max_tokens: None,
            model_path: None,
        }
    }
}

/// The configured backend entries (the embedded one first).
pub(super) fn configured() -> Result<Vec<BackendConfig>> {
    match dirs().config_file(config::BACKENDS_FILE) {
        Some(path) => Ok(config::load_backends(&path)?),
        None => Ok(vec![BackendConfig::embedded()]),
    }
}

/// How long `keyhole backends` waits for each server to list its models.
const CHECK_SECS: u64 = 5;

pub fn backends_command() -> Result<()> {
    if let Some(path) = dirs().config_file(config::BACKENDS_FILE) {
        outln!("config  {}", path.display());
    }
    let backends = configured()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let checks = runtime.block_on(join_all(backends.iter().map(check_server)));
    for (b, check) in backends.iter().zip(checks) {
        let key = match &b.api_key_env {
            Some(var) if std::env::var_os(var).is_some() => format!("key from ${var} (set)"),
            Some(var) => format!("key from ${var} (NOT set)"),
            None => "no key".to_string(),
        };
        let url = match (&b.base_url, &b.path) {
            (Some(url), _) => secret::shown_url(url),
            (None, Some(path)) => {
                keyhole::escape::controls(&path.display().to_string()).into_owned()
            }
            (None, None) => "-".into(),
        };
        let model = b.model.as_deref().unwrap_or("-");
        outln!(
            "{:<16} {:<12} {url:<32} {model:<24} {key}",
            b.name,
            b.kind.name()
        );
        outln!("{:<16} {check}", "");
    }
    Ok(())
}

/// Whether a backend's server answers, and which models it lists (the configured one
/// flagged when it is not among them), on one line.
async fn check_server(entry: &BackendConfig) -> String {
    match (entry.kind, &entry.path) {
        (config::BackendKind::Embedded, _) => return "built in: needs no server".into(),
        (config::BackendKind::Local, Some(path)) if path.is_file() => {
            return "runs in-process: the model file is there".into();
        }
        (config::BackendKind::Local, _) => {
            return "runs in-process: NO model file at its path".into();
        }
        _ => {}
    }
    let quick = BackendConfig {
        deadline_secs: entry.deadline_secs.min(CHECK_SECS),
        retries: 0,
        ..entry.clone()
    };
    let backend = match model::http::build_http(&quick) {
        Ok(backend) => backend,
        Err(e) => return format!("not usable: {e}"),
    };
    match backend.models().await {
        Some(Ok(models)) => {
            let missing = entry
                .model
                .as_ref()
                .filter(|m| !models.is_empty() && !models.contains(m))
                .map(|m| format!(" (NOT {m})"))
                .unwrap_or_default();
            format!(
                "answers; serves {}: {}{missing}",
                models.len(),
                models.join(", ")
            )
        }
        Some(Err(e)) => format!("no answer to the model list: {e}"),
        None => "answers nothing about its models".into(),
    }
}

impl BackendArgs {
    /// The chosen backend entry with flag overrides applied.
    pub(super) fn entry(&self) -> Result<BackendConfig> {
        self.entry_among(configured()?)
    }

    /// [`BackendArgs::entry`] among `configured` entries already read.
    pub(super) fn entry_among(&self, configured: Vec<BackendConfig>) -> Result<BackendConfig> {
        if let Some(path) = &self.model_path
            && self.backend == config::EMBEDDED
        {
            return Ok(BackendConfig::local(path.clone()));
        }
        let mut entry = configured
            .into_iter()
            .find(|b| b.name == self.backend)
            .with_context(|| {
                format!(
                    "--backend {}: no such backend (see `keyhole backends`)",
                    self.backend
                )
            })?;
        if self.url.is_some() {
            entry.base_url.clone_from(&self.url);
        }
        if self.model.is_some() {
            entry.model.clone_from(&self.model);
        }
        if self.max_tokens.is_some() {
            entry.max_tokens = self.max_tokens;
        }
        if let Some(path) = &self.model_path {
            if entry.kind != config::BackendKind::Local {
                bail!("--model-path: backend `{}` is not a local one", entry.name);
            }
            entry.path = Some(path.clone());
        }
        Ok(entry)
    }
}

/// One prompt to send and the candidate it came from.
struct Attempt {
    id: CandidateId,
    prompt: Prompt,
}

pub fn complete_command(args: &CompleteArgs) -> Result<()> {
    let entry = args.backend.entry()?;
    // SAFETY: nothing has started a thread yet; opening the session starts rayon's.
    unsafe { model::local::use_threads(&entry) };
    let session = Session::open(&args.at, entry.tokenizer())?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let backend = model::build_backend(&entry, &session.index)?;
    let attempts = runtime.block_on(attempts(args, &session, backend.as_ref()))?;
    let base = CompletionRequest {
        temperature: args
            .temperature
            .unwrap_or(if args.samples.is_some() { 0.8 } else { 0.0 }),
        seed: args.seed,
        n: args.samples.unwrap_or(1).max(1),
        current_file: Some(session.path(session.hole.file).to_string()),
        ..CompletionRequest::single_line(String::new())
    };
    let requests: Vec<CompletionRequest> = attempts
        .iter()
        .map(|a| {
            entry.apply(&CompletionRequest {
                prompt: a.prompt.text(),
                ..base.clone()
            })
        })
        .collect();
    let results = runtime.block_on(join_all(requests.iter().map(|r| backend.complete(r, None))));
    if results.iter().all(Result::is_err) {
        let first = results
            .into_iter()
            .find_map(Result::err)
            .expect("all failed");
        bail!(first);
    }
    let rows: Vec<Row> = attempts
        .iter()
        .zip(results)
        .flat_map(|(attempt, result)| match result {
            Ok(completions) => completions
                .into_iter()
                .map(|c| Row::done(attempt, c, &session))
                .collect(),
            Err(err) => vec![Row {
                id: attempt.id,
                tokens: attempt.prompt.tokens(session.tokenizer),
                outcome: Err(err.to_string()),
                syntax_errors: Vec::new(),
            }],
        })
        .collect();
    if args.at.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&rows_json(&session, &entry, backend.counting(), &rows))?
        );
    } else {
        print_rows(&session, &entry, backend.counting(), &rows)?;
    }
    super::print_notices(backend.as_ref())?;
    Ok(())
}

/// The prompts to complete: the given candidates, or the k best-ranked ones (one, for
/// samples), each fitted to the budget.
async fn attempts(
    args: &CompleteArgs,
    session: &Session,
    backend: &dyn Backend,
) -> Result<Vec<Attempt>> {
    let budget = args.at.budget;
    let all: Vec<ProposalContext> = proposals::build_for_budget_as(
        &session.index,
        &session.hole,
        session.tokenizer,
        budget,
        session.fidelity,
    );
    let ids: Vec<CandidateId> = if args.ids.is_empty() {
        let k = if args.samples.is_some() {
            1
        } else {
            args.k.max(1)
        };
        args.rank
            .rank(&RankInput::new(&session.index, &session.hole, &all))?
            .into_iter()
            .take(k)
            .map(|r| r.id)
            .collect()
    } else {
        args.ids.clone()
    };
    let retrieved: Vec<Candidate> = if ids.iter().any(|&id| id > CandidateId::DEFAULT) {
        let immediate = ids.iter().all(|&id| super::immediate(id));
        session.retrieved(&args.at, backend, immediate).await?
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let proposal = all.get(id.index()).filter(|p| p.applicable());
        let candidate = retrieved.iter().find(|c| c.id == id && c.applicable());
        let prompt = fit(session, budget, backend, |composer| {
            match (proposal, candidate) {
                (Some(p), _) => composer.compose(Some(p)),
                (_, Some(c)) => c.compose(composer).expect("an applicable candidate"),
                _ => composer.compose(None),
            }
        })
        .await?;
        out.push(Attempt { id, prompt });
    }
    Ok(out)
}

/// Compose within `budget`; where the backend counts tokens itself (llama.cpp's /tokenize),
/// check the prompt with it and shrink the budget until the backend agrees it fits.
async fn fit(
    session: &Session,
    budget: usize,
    backend: &dyn Backend,
    compose: impl Fn(&Composer) -> Prompt,
) -> Result<Prompt> {
    let mut local_budget = budget;
    for _ in 0..4 {
        let composer = Composer::new(
            &session.index,
            &session.hole,
            session.tokenizer,
            local_budget,
        );
        let prompt = compose(&composer);
        let Some(count) = backend.count_tokens(&prompt.text()).await else {
            return Ok(prompt);
        };
        let count = count?;
        if count <= budget {
            return Ok(prompt);
        }
        local_budget = local_budget.saturating_sub(count - budget + count / 50 + 1);
    }
    bail!(
        "{}: the prompt does not fit {budget} tokens of the backend's tokenizer",
        backend.name()
    )
}

struct Row {
    id: CandidateId,
    tokens: usize,
    outcome: Result<(Completion, Option<metrics::Scores>), String>,
    /// Syntax errors inside the completion, put in place of the target.
    syntax_errors: Vec<CompletionError>,
}

impl Row {
    fn done(attempt: &Attempt, completion: Completion, session: &Session) -> Row {
        let scores = session
            .hole
            .target
            .as_deref()
            .map(|t| metrics::score(&completion.text, t));
        Row {
            id: attempt.id,
            tokens: attempt.prompt.tokens(session.tokenizer),
            syntax_errors: typed::hole_completion_errors(
                &session.index,
                &session.hole,
                &completion.text,
            ),
            outcome: Ok((completion, scores)),
        }
    }
}

fn candidate_name(id: CandidateId) -> String {
    format!("{id} {}", id.label())
}

fn counting_note(counting: TokenCounting, tokenizer: &str) -> String {
    match counting {
        TokenCounting::Exact => format!("{tokenizer} tokens, exact"),
        TokenCounting::Approximate => format!("{tokenizer} tokens, approximate for this model"),
    }
}

fn print_rows(
    session: &Session,
    entry: &BackendConfig,
    counting: TokenCounting,
    rows: &[Row],
) -> Result<()> {
    outln!("hole     {}", session.hole.display(&session.index));
    outln!(
        "target   {}",
        session.hole.target.as_deref().unwrap_or("(unknown)")
    );
    outln!(
        "backend  {} ({})",
        entry.name,
        counting_note(counting, session.tokenizer.name())
    );
    outln!();
    outln!(
        "{:>2}  {:<30} {:>6} {:>8}  {:<2} {:>5} {:>3}  completion",
        "#",
        "candidate",
        "tokens",
        "ms",
        "EM",
        "ES",
        "SYN"
    );
    for (i, row) in rows.iter().enumerate() {
        let name = candidate_name(row.id);
        match &row.outcome {
            Ok((c, scores)) => outln!(
                "{:>2}  {name:<30} {:>6} {:>8.1}  {:<2} {:>5} {:>3}  {}",
                i + 1,
                row.tokens,
                c.latency.as_secs_f64() * 1000.0,
                scores.map_or("", |s| if s.exact_match { "✓" } else { "✗" }),
                scores.map_or(String::new(), |s| format!("{:.2}", s.edit_similarity)),
                row.syntax_errors.len(),
                c.text
            ),
            Err(err) => outln!("{:>2}  {name:<30} {:>6}  error: {err}", i + 1, row.tokens),
        }
    }
    // ChatLSP's error round reports where each completion breaks the file's syntax.
    for (i, row) in rows.iter().enumerate() {
        if let Some(first) = row.syntax_errors.first() {
            outln!(
                "note: #{} has {} syntax error(s) in the completion, first at {first}",
                i + 1,
                row.syntax_errors.len()
            );
        }
    }
    Ok(())
}

fn rows_json(
    session: &Session,
    entry: &BackendConfig,
    counting: TokenCounting,
    rows: &[Row],
) -> Value {
    let completions: Vec<Value> = rows
        .iter()
        .map(|row| {
            let spec = row.id.proposal();
            let mut value = json!({
                "proposal_id": row.id,
                "source": spec.map_or(json!("default"), |s| json!(s.source)),
                "context_type": spec.map(|s| s.context_type),
                "prompt_tokens": row.tokens,
            });
            match &row.outcome {
                Ok((c, scores)) => {
                    value["syntax_errors"] = json!(row.syntax_errors);
                    value["text"] = json!(c.text);
                    value["latency_ms"] = json!(c.latency.as_secs_f64() * 1000.0);
                    value["exact_match"] = json!(scores.map(|s| s.exact_match));
                    value["edit_similarity"] = json!(scores.map(|s| s.edit_similarity));
                }
                Err(err) => value["error"] = json!(err),
            }
            value
        })
        .collect();
    json!({
        "hole": hole_json(session),
        "backend": entry.name,
        "tokenizer": session.tokenizer.name(),
        "token_counting": counting,
        "completions": completions,
    })
}

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
    #[arg(long, default_value_t = 4, value_parser = super::bounds::concurrency)]
    concurrency: usize,
    #[command(flatten)]
    backend: BackendArgs,
}

/// Complete every task of a benchmark file and report exact match and edit similarity.
pub fn tasks_command(args: &TasksArgs) -> Result<()> {
    use futures_util::stream::{self, StreamExt};
    use keyhole::eval::interop;
    use keyhole::model::ngram::EmbeddedModel;

    let tasks = interop::read_tasks(&args.file)?;
    let entry = args.backend.entry()?;
    let backend: Box<dyn Backend> = match (&args.repo, entry.kind) {
        (Some(repo), _) => {
            model::build_backend(&entry, &keyhole::repo::RepoIndex::open(repo, None)?)?
        }
        (None, config::BackendKind::Embedded) => Box::new(EmbeddedModel::without_repository()),
        (None, config::BackendKind::Local) => Box::new(model::local::LocalBackend::open(&entry)?),
        (None, _) => config::build_http(&entry)?,
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
        rows.push(json!({ "task_id": task.id, "prediction": prediction, "ground_truth": truth,
            "exact_match": scores.exact_match, "edit_similarity": scores.edit_similarity, "error": error }));
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
