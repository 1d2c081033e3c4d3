//! Completing: which candidates run, the cards that come back, picks, explain and apply.

use super::provenance::{origin_text, segment_name};
use super::*;

/// Edited cards join the ones shown (the oldest go past MAX_K) and take the focus; a normal run
/// replaces them.
pub(super) fn show_cards(state: &mut State, cards: Vec<Card>) {
    if cards.iter().any(|c| c.edited.is_some()) {
        state.cards.extend(cards);
        let extra = state.cards.len().saturating_sub(MAX_K);
        state.cards.drain(..extra);
        state.card_cursor = state.cards.len() - 1;
    } else {
        state.cards = cards;
        state.card_cursor = 0;
    }
}

/// Why candidate `c` is not completed, in a line for the status.
pub(super) fn not_completed(state: &State, c: &CandidateRow) -> String {
    let id = state.shown_id(c.id);
    match &c.availability {
        Availability::Building => format!("candidate {id} is still waiting for {}", c.waits_for()),
        Availability::NotApplicable(why) => format!(
            "candidate {id} does not apply to this hole ({}): nothing to complete",
            why.as_deref().unwrap_or("its context is empty here")
        ),
        Availability::Applicable => format!("candidate {id} applies"),
    }
}

/// What a run completes, one request per distinct prompt: the selected candidates; else the
/// top k applicable ones in rank order (`r`), or the focused one and then the best others
/// (`focused_first`, Enter); a candidate the user edited sends its kept edit. A candidate whose
/// prompt is the very text of one taken joins its request instead of taking a card. An error for a focused candidate that does not apply.
// The error is the status line `not_completed` builds from the state: no library error to type.
pub(super) fn run_prompts(state: &State, focused_first: bool) -> Result<Vec<RunPrompt>, String> {
    let (order, limit): (Vec<&CandidateRow>, usize) = if state.selected.is_empty() {
        let first = match state.focused_candidate().filter(|_| focused_first) {
            Some(c) if !c.applicable() => return Err(not_completed(state, c)),
            first => first,
        };
        let rest = state.candidates.iter().filter(|c| c.applicable());
        (first.into_iter().chain(rest).collect(), state.k)
    } else {
        let chosen = state.candidates.iter();
        let chosen = chosen.filter(|c| state.selected.contains(&c.id) && c.applicable());
        (chosen.collect(), MAX_K)
    };
    let mut runs: Vec<RunPrompt> = Vec::new();
    for c in order {
        if runs
            .iter()
            .any(|r| r.candidate == c.id || r.same.contains(&c.id))
        {
            continue;
        }
        let kept = state.kept_edit(c.id);
        let text = kept.map_or_else(|| c.prompt.text(), String::from);
        let suffix = c.prompt.suffix.as_ref().map(|s| s.text.clone());
        if let Some(run) = runs
            .iter_mut()
            .find(|r| (&r.text, &r.suffix) == (&text, &suffix))
        {
            run.same.push(c.id);
        } else if runs.len() < limit {
            runs.push(RunPrompt {
                candidate: c.id,
                same: Vec::new(),
                text,
                fitted: (kept.is_none() && c.prompt.backend_tokens.is_some())
                    .then(|| c.prompt.clone()),
                suffix,
                edited: kept.is_some(),
            });
        }
    }
    Ok(runs)
}

/// `r` (the top k) or Enter on a candidate (it first).
pub(super) fn run(state: &mut State, focused_first: bool) -> Vec<Effect> {
    let prompts = match run_prompts(state, focused_first) {
        Ok(prompts) => prompts,
        Err(why) => {
            state.status = why;
            return vec![];
        }
    };
    let count = prompts.len();
    let shared: usize = prompts.iter().map(|p| p.same.len()).sum();
    let effects = start_completion(state, prompts, false);
    if !effects.is_empty() {
        state.cards.clear();
        state.status = match shared {
            0 => format!("completing with {count} candidates… Esc cancels"),
            n => format!(
                "completing {count} prompts ({n} more candidates had one of the same prompts)… \
                 Esc cancels"
            ),
        };
    }
    effects
}

/// Start completing `prompts` (candidate id, prompt text) for the current hole.
pub(super) fn start_completion(
    state: &mut State,
    prompts: Vec<RunPrompt>,
    edited: bool,
) -> Vec<Effect> {
    let (Some(index), Some(backend), Some(view)) = (&state.index, &state.backend, &state.view)
    else {
        return vec![];
    };
    if prompts.is_empty() {
        return vec![];
    }
    let hole = &view.hole;
    let file = &index.files[hole.file];
    let job = CompleteJob {
        generation: view.generation,
        backend: backend.clone(),
        prompts,
        current_file: file.path.clone(),
        file_text: file.text.to_string(),
        offset: hole.offset,
        target: hole.target.clone().unwrap_or_default(),
        refit: refit(state).filter(|_| !edited),
    };
    state.completion = CompletionPhase::Running {
        cards: job
            .prompts
            .iter()
            .map(|p| RunningCard {
                candidate: p.candidate,
                text: String::new(),
                pieces: 0,
                started: None,
            })
            .collect(),
    };
    state.explained = None;
    state.focus = Pane::Completions;
    vec![Effect::CancelCompletions, Effect::Complete(job)]
}

/// What composing the hole's prompts again for the backend needs.
pub(super) fn refit(state: &State) -> Option<Refit> {
    let (index, search, view) = (
        state.index.as_ref()?,
        state.search.as_ref()?,
        state.view.as_ref()?,
    );
    Some(Refit {
        index: index.clone(),
        search: search.clone(),
        hole: view.hole.clone(),
        tokenizer: state.setup.tokenizer(),
        budget: state.setup.budget,
    })
}

/// Where the backend counts tokens in a tokenizer of its own, the focused candidate's prompt is
/// fitted to that count as a run would send it, so that the prompt pane shows what is sent.
/// One at a time; a hole whose fitting failed, or whose backend turned out not to count, is
/// left as composed.
pub(super) fn fit_focused(state: &mut State) -> Vec<Effect> {
    let (Some(backend), Some(view)) = (&state.backend, &state.view) else {
        return vec![];
    };
    let generation = view.generation;
    let tokenizer = state.setup.tokenizer().tokenizer();
    if state.fitting.is_some()
        || state.fit_stopped == Some(generation)
        || crate::session::counts_exactly(backend.as_ref(), tokenizer)
    {
        return vec![];
    }
    let backend = backend.clone();
    // A plugin's prompt is sent as the plugin sent it, never fitted.
    let Some(candidate) = state
        .focused_candidate()
        .filter(|c| c.applicable() && c.prompt.backend_tokens.is_none())
        .filter(|c| !c.id.is_recorded())
        .map(|c| c.id)
    else {
        return vec![];
    };
    let Some(refit) = refit(state) else {
        return vec![];
    };
    state.fitting = Some(candidate);
    vec![Effect::Fit {
        generation,
        candidate,
        backend,
        refit,
    }]
}

/// A fitted prompt replaces its candidate's; a failure stops fitting at this hole.
pub(super) fn fitted(
    state: &mut State,
    generation: u64,
    candidate: CandidateId,
    prompt: Result<Prompt, JobError>,
) {
    state.fitting = None;
    if state
        .view
        .as_ref()
        .is_none_or(|v| v.generation != generation)
    {
        return;
    }
    match prompt {
        Ok(prompt) if prompt.backend_tokens.is_some() => {
            if let Some(row) = state.candidates.iter_mut().find(|c| c.id == candidate) {
                row.prompt = prompt;
            }
        }
        Ok(_) => state.fit_stopped = Some(generation),
        Err(why) => {
            state.fit_stopped = Some(generation);
            state.status = format!("cannot fit the prompt to the backend's count: {why}");
        }
    }
}

/// Esc: dismiss a warning, else stop the running completions, else close what is open.
pub(super) fn cancel(state: &mut State) -> Vec<Effect> {
    if state.warning.take().is_some() {
        return vec![];
    }
    if state.running() {
        state.completion = CompletionPhase::Idle;
        state.status = "completions cancelled".into();
        return vec![Effect::CancelCompletions];
    }
    state.explained = None;
    state.zoomed = false;
    vec![]
}

pub(super) fn focused_card(state: &State) -> Option<&Finished> {
    state
        .cards
        .get(state.card_cursor)
        .and_then(|c| c.outcome.as_ref().ok())
}

pub(super) fn pick(state: &mut State, n: usize) -> Vec<Effect> {
    let (Some(index), Some(view)) = (&state.index, &state.view) else {
        return vec![];
    };
    let card = match state.cards.get(n).map(|c| &c.outcome) {
        None => return vec![],
        Some(Err(why)) => {
            state.status = format!("completion {} failed, nothing to pick: {why}", n + 1);
            return vec![];
        }
        Some(Ok(_)) => &state.cards[n],
    };
    // Picks teach the rankers which of keyhole's candidates win; a recorded prompt is none.
    if card.candidate.is_recorded() {
        let whose = match card.candidate {
            CandidateId::AS_SENT => "the plugin's prompt",
            _ => "keyhole's prompt as sent",
        };
        for (i, card) in state.cards.iter_mut().enumerate() {
            card.picked = i == n;
        }
        state.card_cursor = n;
        state.status = format!(
            "picked completion {} ({whose}): not recorded, it teaches the rankers nothing",
            n + 1
        );
        return vec![];
    }
    let keyholes = || state.cards.iter().filter(|c| !c.candidate.is_recorded());
    let prompt = card
        .edited
        .clone()
        .or_else(|| card.prompt(state).map(Prompt::text));
    let pick = feedback::Pick {
        hole: view.hole.display(index),
        candidates: keyholes().map(|c| c.candidate).collect(),
        prompt_hash: feedback::prompt_hash(prompt.as_deref().unwrap_or("")),
        completions: keyholes()
            .map(|c| c.outcome.as_ref().map_or(String::new(), |f| f.text.clone()))
            .collect(),
        picked: card.candidate,
        // The driver stamps the time: update stays free of clocks.
        unix_time: 0,
    };
    let picked = card.candidate;
    let bandit = card
        .edited
        .is_none()
        .then(|| procc_lesson(state, picked))
        .flatten();
    for (i, card) in state.cards.iter_mut().enumerate() {
        card.picked = i == n;
    }
    state.card_cursor = n;
    state.status = format!(
        "picked completion {} (candidate {})…",
        n + 1,
        state.shown_id(picked)
    );
    vec![Effect::Pick { pick, bandit }]
}

/// A pick of one of ProCC's perspectives rewards its arm 1 and the other perspectives whose
/// completions were shown (and that applied) 0; other picks teach the bandit nothing.
pub(super) fn procc_lesson(state: &State, picked: CandidateId) -> Option<BanditLesson> {
    let procc = state.procc.as_ref()?;
    if !CandidateId::PROCC.contains(&picked) {
        return None;
    }
    let shown: BTreeSet<CandidateId> = state
        .cards
        .iter()
        .filter(|c| c.edited.is_none())
        .map(|c| c.candidate)
        .collect();
    let rewards = CandidateId::PROCC
        .iter()
        .enumerate()
        .filter(|&(arm, id)| procc.available[arm] && shown.contains(id))
        .map(|(arm, &id)| (arm, f64::from(u8::from(id == picked))))
        .collect();
    Some(BanditLesson {
        context: procc.context,
        available: procc.available,
        rewards,
    })
}

pub(super) fn explain_card(state: &mut State) -> Vec<Effect> {
    let Some(card) = state.cards.get(state.card_cursor) else {
        return vec![];
    };
    if card.edited.is_some() {
        state.status = "an edited prompt has no segments to explain".into();
        return vec![];
    }
    let (Ok(done), Some(prompt)) = (&card.outcome, card.prompt(state)) else {
        return vec![];
    };
    let spans = explain::explain(prompt, &done.text);
    let unexplained: usize = spans
        .iter()
        .filter(|s| s.prompt.is_none())
        .map(|s| done.text[s.completion.clone()].chars().count())
        .sum();
    let mut status = format!(
        "completion {}: {:.0}% copied",
        state.card_cursor + 1,
        explain::explained_fraction(&spans) * 100.0,
    );
    let longest = spans
        .iter()
        .filter(|s| s.prompt.is_some())
        .max_by_key(|s| s.completion.len());
    if let (Some(span), Some(index)) = (longest, &state.index) {
        let chars = done.text[span.completion.clone()].chars().count();
        let segment = span
            .segment
            .and_then(|i| prompt.segments.get(i))
            .map_or_else(
                || "the prompt".into(),
                |s| segment_name(s.kind, state.numbering),
            );
        let place = span.origin.map_or_else(
            || super::provenance::framing_name(prompt).into(),
            |o| origin_text(index, o),
        );
        status += &format!(" · longest, {chars} chars: {place} in {segment}");
    }
    if unexplained > 0 {
        status += &format!(" · {unexplained} chars not copied");
    }
    let scroll = longest
        .and_then(|s| s.prompt.as_ref())
        .map_or(0, |r| explained_line(prompt, r.start));
    state.status = status;
    state.prompt_scroll = scroll;
    state.prompt_left = 0;
    state.explained = Some(spans);
    vec![]
}

/// The prompt line to scroll to so that byte `at` shows, with two lines above it.
pub(super) fn explained_line(prompt: &Prompt, at: usize) -> usize {
    prompt.text()[..at].matches('\n').count().saturating_sub(2)
}

/// The prompt shown in the prompt pane as text, with a name for a file: "OrderService-94-32-c7".
fn shown_prompt_text(state: &State) -> Option<(String, String)> {
    let prompt = state.shown_prompt()?;
    let (index, view) = (state.index.as_ref()?, state.view.as_ref()?);
    let path = &index.files[view.hole.file].path;
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let hole = &view.hole;
    let id = prompt.proposal_id;
    let stem = format!("{stem}-{}-{}-c{id}", hole.line + 1, hole.column + 1);
    Some((stem, prompt.text()))
}

/// `y` in the completions pane: the focused completion to the clipboard.
pub(super) fn copy_completion(state: &mut State) -> Vec<Effect> {
    let Some(done) = focused_card(state) else {
        state.status = "no completion to copy".into();
        return vec![];
    };
    let text = done.text.clone();
    state.status = format!(
        "completion {} copied to the clipboard ({} bytes, OSC 52)",
        state.card_cursor + 1,
        text.len()
    );
    vec![Effect::Copy(text)]
}

pub(super) fn copy_prompt(state: &mut State) -> Vec<Effect> {
    let Some((_, text)) = shown_prompt_text(state) else {
        return vec![];
    };
    state.status = format!(
        "prompt copied to the clipboard ({} bytes, OSC 52)",
        text.len()
    );
    vec![Effect::Copy(text)]
}

pub(super) fn save_prompt(state: &mut State) -> Vec<Effect> {
    let Some((stem, text)) = shown_prompt_text(state) else {
        return vec![];
    };
    state.status = "saving the prompt…".into();
    vec![Effect::SavePrompt { stem, text }]
}
