//! Fitting a prompt to the budget as the backend's model counts its tokens.

use crate::compose::{Composer, DefaultReading, Prompt};
use crate::hole::Hole;
use crate::model::{Backend, BackendError, TokenCounting};
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

use super::Session;

impl Session {
    /// Whether budgets counted in this session's tokenizer are the model's own counts: the
    /// backend's model counts with it, or the backend has no count of its own to check with.
    pub fn counts_exactly(&self) -> bool {
        counts_exactly(self.backend.as_ref(), self.tokenizer)
    }

    /// Compose `hole`'s prompt with `compose` within the budget as the backend's model counts
    /// tokens: see [`fit`].
    pub async fn fit(
        &self,
        hole: &Hole,
        compose: impl Fn(&Composer) -> Prompt,
    ) -> Result<Prompt, FitError> {
        let target = FitTarget {
            backend: self.backend.as_ref(),
            index: &self.index,
            tokenizer: self.tokenizer,
            budget: self.budget,
            default_reading: self.fidelity.default_reading(),
        };
        fit(&target, hole, compose).await
    }
}

/// Whether `tokenizer` counts tokens as `backend`'s model does, so prompts need no fitting.
pub fn counts_exactly(backend: &dyn Backend, tokenizer: &dyn Tokenizer) -> bool {
    backend.tokenizer() == Some(tokenizer.name())
}

/// How prompt budgets are counted for `backend` when keyhole composes in `tokenizer`, in the
/// words every view uses: "exact in code" (the model counts as keyhole does), "exact, counted
/// by smol" (prompts are fitted to the model's own count), "approximate, in code".
pub fn counting_words(backend: &dyn Backend, tokenizer: &dyn Tokenizer) -> String {
    if counts_exactly(backend, tokenizer) {
        format!("exact in {}", tokenizer.name())
    } else if backend.counting() == TokenCounting::Exact {
        format!("exact, counted by {}", backend.name())
    } else {
        format!("approximate, in {}", tokenizer.name())
    }
}

/// A backend and the budget its prompts fit, in a tokenizer of keyhole's.
pub struct FitTarget<'a> {
    pub backend: &'a dyn Backend,
    pub index: &'a RepoIndex,
    pub tokenizer: &'static dyn Tokenizer,
    pub budget: usize,
    /// How the code before the hole reads line breaks (the profile's).
    pub default_reading: DefaultReading,
}

/// Compose `hole`'s prompt with `compose` within the budget as the backend's model counts
/// tokens. Where the backend counts in a tokenizer of its own (llama.cpp's `/tokenize`, a local
/// model's vocabulary), the budget keyhole composes with is scaled by the ratio of the two
/// counts until the model's count is within the budget and at most 2% under it: shrinking
/// where keyhole's tokenizer counts fewer tokens than the model's, growing where it counts
/// more. The fitted prompt records the model's count. A backend whose model's context leaves
/// less room than the budget ([`Backend::prompt_room`]) gets prompts composed within that
/// room, and the prompt says so ([`Prompt::model_room`]).
pub async fn fit(
    target: &FitTarget<'_>,
    hole: &Hole,
    compose: impl Fn(&Composer) -> Prompt,
) -> Result<Prompt, FitError> {
    let FitTarget {
        backend,
        index,
        tokenizer,
        budget,
        default_reading,
    } = *target;
    // A model whose context is smaller than the budget gets a prompt composed within it, so
    // that what it sees is what keyhole shows (and proposals stay apart), not a cut.
    let model_room = backend.prompt_room().await.filter(|&room| room < budget);
    let budget = model_room.unwrap_or(budget);
    let composed = |local: usize| {
        let mut prompt = compose(&Composer::new(
            index,
            hole,
            tokenizer,
            local,
            default_reading,
        ));
        prompt.model_room = model_room;
        prompt
    };
    let mut prompt = composed(budget);
    if counts_exactly(backend, tokenizer) {
        return Ok(prompt);
    }
    let mut local = budget;
    let mut best: Option<Prompt> = None;
    // The largest local budget seen to fit and the smallest seen not to, with their counts.
    let mut under: Option<(usize, usize)> = None;
    let mut over: Option<(usize, usize)> = None;
    for _ in 0..FIT_ROUNDS {
        let text = prompt.text();
        let Some(count) = backend.count_tokens(&text).await else {
            return Ok(prompt);
        };
        let count = count?;
        prompt.backend_tokens = Some(count);
        if count <= budget {
            under = under.max(Some((local, count)));
            if best.as_ref().is_none_or(|b| b.backend_tokens < Some(count)) {
                best = Some(prompt);
            }
            if count * 50 >= budget * 49 {
                break;
            }
        } else if over.is_none_or(|(l, _)| local < l) {
            over = Some((local, count));
        }
        let next = match (under, over) {
            // Between the two, where the counts' line crosses the budget.
            (Some((low, low_count)), Some((high, high_count))) if high > low + 1 => {
                let step = (high - low) * (budget - low_count) / (high_count - low_count).max(1);
                (low + step).clamp(low + 1, high - 1)
            }
            // Nothing left between them.
            (Some(_), Some(_)) => break,
            // Scaled by the ratio of the counts (a little under it when shrinking).
            _ if count > budget => (local * budget / count).min(local - 1) * 99 / 100,
            _ => local * budget / count.max(1),
        };
        if next == local || next == 0 || over.is_some_and(|(high, _)| next >= high) {
            break;
        }
        local = next;
        prompt = composed(local);
        // A larger budget that adds nothing: everything the candidate has is in already.
        if count <= budget && prompt.text() == text {
            break;
        }
    }
    best.ok_or_else(|| FitError::DoesNotFit {
        backend: backend.name().to_string(),
        budget,
    })
}

/// Rounds of composing and counting [`fit`] tries; the ratio of two tokenizers' counts barely
/// moves with the budget, so two or three rounds usually land.
const FIT_ROUNDS: usize = 6;

/// Why a prompt could not be fitted to the backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{backend}: the prompt does not fit {budget} tokens of the backend's tokenizer")]
    DoesNotFit { backend: String, budget: usize },
}
