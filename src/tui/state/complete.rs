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

/// The candidates to complete with: the selected ones, else the focused one and the next best
/// applicable ones up to k.
pub(super) fn run_ids(state: &State) -> Vec<CandidateId> {
    if !state.selected.is_empty() {
        return state.selected.iter().copied().take(MAX_K).collect();
    }
    let first = state
        .focused_candidate()
        .filter(|c| !c.building())
        .map(|c| c.id);
    let rest = state
        .candidates
        .iter()
        .filter(|c| c.applicable())
        .map(|c| c.id);
    let mut ids = Vec::new();
    for id in first.into_iter().chain(rest) {
        if !ids.contains(&id) && ids.len() < state.k {
            ids.push(id);
        }
    }
    ids
}

pub(super) fn run(state: &mut State) -> Vec<Effect> {
    let prompts: Vec<JobPrompt> = run_ids(state)
        .into_iter()
        .filter_map(|id| state.candidate(id).map(JobPrompt::of))
        .collect();
    let count = prompts.len();
    let effects = start_completion(state, prompts, false);
    if !effects.is_empty() {
        state.cards.clear();
        state.status = format!("completing with {count} candidates… Esc cancels");
    }
    effects
}

/// Start completing `prompts` (candidate id, prompt text) for the current hole.
pub(super) fn start_completion(
    state: &mut State,
    prompts: Vec<JobPrompt>,
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
        file_text: file.text.clone(),
        offset: hole.offset,
        target: hole.target.clone().unwrap_or_default(),
        edited,
        refit: match (&state.search, edited) {
            (Some(search), false) => Some(Refit {
                index: index.clone(),
                search: search.clone(),
                hole: hole.clone(),
                tokenizer: state.setup.tokenizer(),
                budget: state.setup.budget,
            }),
            _ => None,
        },
    };
    state.completion = CompletionPhase::Running {
        streamed: Vec::new(),
    };
    state.explained = None;
    state.focus = Pane::Completions;
    vec![Effect::CancelCompletions, Effect::Complete(job)]
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
    let Some(card) = state.cards.get(n).filter(|c| c.outcome.is_ok()) else {
        return vec![];
    };
    // Picks teach the rankers which of keyhole's candidates win; the plugin's prompt is none.
    if card.candidate == CandidateId::AS_SENT {
        state.card_cursor = n;
        state.status = format!(
            "picked completion {} (the plugin's prompt): not recorded, it teaches the rankers nothing",
            n + 1
        );
        return vec![];
    }
    let keyholes = || {
        state
            .cards
            .iter()
            .filter(|c| c.candidate != CandidateId::AS_SENT)
    };
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
    state.card_cursor = n;
    state.status = format!("picked completion {} (candidate {picked})…", n + 1);
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
