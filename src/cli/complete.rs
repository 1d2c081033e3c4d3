//! `keyhole complete`: k candidates' prompts (the ranker's best, or the ones named) completed
//! side by side, or several samples of one, each scored against the true rest of the line.

use anyhow::{Context, Result, bail};
use clap::Args;
use futures_util::future::join_all;
use serde::Serialize;

use super::backends::BackendArgs;
use super::bounds;
use super::hole::{HoleArgs, HoleOut, Opened, RankArgs};
use keyhole::candidate::{CandidateId, ContextType};
use keyhole::compose::Prompt;
use keyhole::context::typed::{self, CompletionError};
use keyhole::escape;
use keyhole::metrics;
use keyhole::model::{Completion, CompletionRequest, TokenCounting};
use keyhole::session::counting_words;

#[derive(Args)]
pub struct CompleteArgs {
    #[command(flatten)]
    at: HoleArgs,
    /// Candidate ids to complete with (see `keyhole prompt --help`); repeatable. Without it,
    /// the k best-ranked candidates.
    #[arg(long = "id", visible_alias = "proposal")]
    ids: Vec<CandidateId>,
    /// Number of candidates to complete with, one completion each.
    #[arg(short = 'k', default_value_t = 3, value_parser = bounds::candidates)]
    k: usize,
    /// Instead, draw this many samples from the first candidate's prompt.
    #[arg(long, value_parser = bounds::samples)]
    samples: Option<usize>,
    /// Sampling temperature [default: 0, or 0.8 with --samples].
    #[arg(long, value_parser = bounds::temperature)]
    temperature: Option<f32>,
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    rank: RankArgs,
}

/// One prompt to send and the candidate it came from, or why it is not sent.
struct Attempt {
    id: CandidateId,
    prompt: Prompt,
    /// Why the candidate does not apply at the hole: nothing is sent for it.
    why_not: Option<String>,
}

pub fn complete_command(args: &CompleteArgs) -> Result<()> {
    let opened = Opened::open(&args.at, &args.backend, Some(&args.rank))?;
    let entry = opened.settings.backend();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let attempts = runtime.block_on(attempts(args, &opened))?;
    let base = CompletionRequest {
        temperature: args
            .temperature
            .unwrap_or(if args.samples.is_some() { 0.8 } else { 0.0 }),
        seed: args.seed,
        n: args.samples.unwrap_or(1).max(1),
        current_file: Some(opened.path(opened.hole.file).to_string()),
        ..CompletionRequest::single_line(String::new())
    };
    if let Some(why) = attempts
        .iter()
        .map(|a| a.why_not.as_ref())
        .collect::<Option<Vec<_>>>()
        && let Some(first) = why.first()
    {
        // Nothing applies: no request is worth making.
        bail!(
            "candidate {} does not apply: {first}",
            opened.number(attempts[0].id)
        );
    }
    let requests: Vec<Option<CompletionRequest>> = attempts
        .iter()
        .map(|a| {
            a.why_not.is_none().then(|| {
                entry.apply(&CompletionRequest {
                    prompt: a.prompt.text(),
                    ..base.clone()
                })
            })
        })
        .collect();
    let backend = opened.session.backend.as_ref();
    let results = runtime.block_on(join_all(requests.iter().map(|r| async move {
        match r {
            Some(request) => Some(backend.complete(request, None).await),
            None => None,
        }
    })));
    if results.iter().flatten().all(Result::is_err) {
        let first = results
            .into_iter()
            .flatten()
            .find_map(Result::err)
            .expect("all failed");
        bail!(first);
    }
    let failed = |attempt: &Attempt, error: String| Row {
        id: attempt.id,
        tokens: attempt.prompt.model_tokens(opened.session.tokenizer),
        model_room: attempt.prompt.model_room,
        outcome: Err(error),
        syntax_errors: Vec::new(),
    };
    let rows: Vec<Row> = attempts
        .iter()
        .zip(results)
        .flat_map(|(attempt, result)| match result {
            Some(Ok(completions)) => completions
                .into_iter()
                .map(|c| Row::done(attempt, c, &opened))
                .collect(),
            Some(Err(err)) => vec![failed(attempt, err.to_string())],
            None => {
                let why = attempt.why_not.clone().unwrap_or_default();
                vec![failed(attempt, format!("does not apply: {why}"))]
            }
        })
        .collect();
    // The ranker chose the candidates only where none were named.
    let ranks_with = match args.ids.is_empty() {
        true => opened.session.learning.ranks_with(args.rank.ranker),
        false => None,
    };
    let out = CompleteOut::new(&opened, &entry.name, backend.counting(), ranks_with, &rows);
    if args.at.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print(&opened, &out)?;
    }
    opened.finish()
}

/// The prompts to complete: the given candidates, or the k best-ranked ones (one, for
/// samples), each fitted to the backend.
async fn attempts(args: &CompleteArgs, opened: &Opened) -> Result<Vec<Attempt>> {
    let (session, hole) = (&opened.session, &opened.hole);
    let ids: Vec<CandidateId> = if args.ids.is_empty() {
        let k = if args.samples.is_some() { 1 } else { args.k };
        // Ranking needs the proposals only: no retrieval state is built for it.
        let proposals = session.proposals(hole);
        let ranking = session.rank(hole, &proposals, args.rank.ranker)?;
        ranking.iter().take(k).map(|r| r.id).collect()
    } else {
        args.ids.iter().map(|&typed| opened.meant(typed)).collect()
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let context = session.context(hole, id).await;
        let prompt = session
            .fit(hole, |composer| context.compose(composer))
            .await?;
        out.push(Attempt {
            id,
            prompt,
            why_not: context.why_not(),
        });
    }
    Ok(out)
}

struct Row {
    id: CandidateId,
    tokens: usize,
    /// The prompt tokens the model's context left room for, where fewer than the budget.
    model_room: Option<usize>,
    outcome: Result<(Completion, Option<metrics::Scores>), String>,
    /// Syntax errors inside the completion, put in place of the target.
    syntax_errors: Vec<CompletionError>,
}

impl Row {
    fn done(attempt: &Attempt, completion: Completion, opened: &Opened) -> Row {
        let scores = opened
            .hole
            .target
            .as_deref()
            .map(|t| metrics::score(&completion.text, t));
        Row {
            id: attempt.id,
            tokens: attempt.prompt.model_tokens(opened.session.tokenizer),
            model_room: attempt.prompt.model_room,
            syntax_errors: typed::hole_completion_errors(
                &opened.session.index,
                &opened.hole,
                &completion.text,
            ),
            outcome: Ok((completion, scores)),
        }
    }
}

/// What `keyhole complete` reports.
#[derive(Serialize)]
struct CompleteOut<'a> {
    hole: HoleOut<'a>,
    backend: &'a str,
    /// What chose the candidates where a classifier tuned for the backend's model ranked them
    /// (`keyhole tune`): `RLPG-H tuned for smol, 400 holes`.
    ranks_with: Option<String>,
    tokenizer: &'static str,
    token_counting: TokenCounting,
    completions: Vec<CompletionOut<'a>>,
}

#[derive(Serialize)]
struct CompletionOut<'a> {
    /// As the profile numbers it.
    proposal_id: usize,
    #[serde(skip)]
    label: &'static str,
    /// The proposal's prompt source, or the candidate's source column (`current` for the
    /// default context).
    source: &'static str,
    context_type: Option<ContextType>,
    prompt_tokens: usize,
    /// The prompt's tokens the model saw, where the backend cut it to fit the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_prompt_tokens: Option<usize>,
    /// The prompt tokens the model's context left room for, where fewer than the budget: the
    /// prompt was composed within them.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_room: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    syntax_errors: Option<&'a [CompletionError]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_match: Option<Option<bool>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    edit_similarity: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

impl<'a> CompleteOut<'a> {
    fn new(
        opened: &'a Opened,
        backend: &'a str,
        counting: TokenCounting,
        ranks_with: Option<String>,
        rows: &'a [Row],
    ) -> CompleteOut<'a> {
        let completions = rows
            .iter()
            .map(|row| {
                let spec = row.id.proposal();
                let done = row.outcome.as_ref().ok();
                CompletionOut {
                    proposal_id: opened.number(row.id),
                    label: row.id.label(),
                    source: spec.map_or(row.id.info().source, |s| s.source.name()),
                    context_type: spec.map(|s| s.context_type),
                    prompt_tokens: row.tokens,
                    model_prompt_tokens: done.and_then(|(c, _)| c.model_prompt_tokens),
                    model_room: row.model_room,
                    syntax_errors: done.map(|_| row.syntax_errors.as_slice()),
                    text: done.map(|(c, _)| c.text.as_str()),
                    latency_ms: done.map(|(c, _)| c.latency.as_secs_f64() * 1000.0),
                    exact_match: done.map(|(_, s)| s.map(|s| s.exact_match)),
                    edit_similarity: done.map(|(_, s)| s.map(|s| s.edit_similarity)),
                    error: row.outcome.as_ref().err().map(String::as_str),
                }
            })
            .collect();
        CompleteOut {
            hole: opened.hole_out(),
            backend,
            ranks_with,
            tokenizer: opened.session.tokenizer.name(),
            token_counting: counting,
            completions,
        }
    }
}

fn print(opened: &Opened, out: &CompleteOut) -> Result<()> {
    let hole = opened.hole.display(&opened.session.index);
    outln!("hole     {}", escape::controls(&hole));
    let target = out.hole.target.unwrap_or("(unknown)");
    outln!("target   {}", escape::controls(target));
    let session = &opened.session;
    let counting = counting_words(session.backend.as_ref(), session.tokenizer);
    outln!("backend  {} (budgets {counting})", out.backend);
    if let Some(ranks_with) = &out.ranks_with {
        outln!("ranker   {ranks_with}");
    }
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
    for (i, c) in out.completions.iter().enumerate() {
        let name = format!("{} {}", c.proposal_id, c.label);
        // What the backend answered, on the row's one line.
        let (text, error) = (c.text.map(escape::controls), c.error.map(escape::controls));
        match (text, error) {
            (Some(text), _) => outln!(
                "{:>2}  {name:<30} {:>6} {:>8.1}  {:<2} {:>5} {:>3}  {text}",
                i + 1,
                c.prompt_tokens,
                c.latency_ms.unwrap_or_default(),
                match c.exact_match.flatten() {
                    Some(true) => "✓",
                    Some(false) => "✗",
                    None => "",
                },
                c.edit_similarity
                    .flatten()
                    .map_or(String::new(), |s| format!("{s:.2}")),
                c.syntax_errors.map_or(0, <[_]>::len),
            ),
            (None, error) => outln!(
                "{:>2}  {name:<30} {:>6}  error: {}",
                i + 1,
                c.prompt_tokens,
                error.unwrap_or_default()
            ),
        }
    }
    if let Some(room) = out.completions.iter().find_map(|c| c.model_room) {
        outln!(
            "note: the model's context leaves room for {room} prompt tokens, fewer than the budget: \
             each prompt was composed within them"
        );
    }
    for (i, c) in out.completions.iter().enumerate() {
        if let Some(seen) = c.model_prompt_tokens {
            outln!(
                "warning: #{}'s prompt was cut to the {seen} tokens that fit the model's context \
                 (of {}): the model saw only its end",
                i + 1,
                c.prompt_tokens
            );
        }
    }
    // ChatLSP's error round reports where each completion breaks the file's syntax.
    for (i, c) in out.completions.iter().enumerate() {
        if let Some(errors) = c.syntax_errors
            && let Some(first) = errors.first()
        {
            outln!(
                "note: #{} has {} syntax error(s) in the completion, first at {first}",
                i + 1,
                errors.len()
            );
        }
    }
    Ok(())
}
