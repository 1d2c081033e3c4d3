//! The ranges of the numbers a user gives on the command line. A number outside its range is a
//! usage error naming the flag (clap adds the name), before any work starts: huge values
//! otherwise overflow arithmetic, panic in allocators or make loops that never end.

use keyhole::candidate::CandidateId;
use keyhole::compose::MAX_BUDGET;
use keyhole::model::config::{MAX_CONCURRENCY, MAX_GENERATED_TOKENS, MAX_SAMPLES, MAX_TEMPERATURE};
use keyhole::tui::{RENDER_HEIGHTS, RENDER_WIDTHS};

/// `text` as a whole number in `min..=max`.
fn whole(text: &str, min: usize, max: usize) -> Result<usize, String> {
    let value: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number from {min} to {max}"))?;
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be from {min} to {max}"))
    }
}

/// How long a hole may wait for one stage of `eval` or `tune`, in seconds (at most a day).
pub fn stage_deadline(text: &str) -> Result<u64, String> {
    whole(text, 1, 86_400).map(|seconds| seconds as u64)
}

/// A prompt budget, in tokens.
pub fn budget(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_BUDGET)
}

/// A number of candidates to complete with (`-k`): at most every candidate once.
pub fn candidates(text: &str) -> Result<usize, String> {
    whole(text, 1, CandidateId::COUNT)
}

/// Samples drawn from one prompt.
pub fn samples(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_SAMPLES)
}

/// Tokens a backend may generate for one completion.
pub fn generated_tokens(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_GENERATED_TOKENS)
}

/// Requests in flight at once.
pub fn concurrency(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_CONCURRENCY)
}

/// RepoCoder's retrieval-generation iterations; each one asks the backend again.
pub fn iterations(text: &str) -> Result<u16, String> {
    whole(text, 2, 16).map(|n| n as u16)
}

/// A budget of requests (`keyhole tune --requests`).
pub fn requests(text: &str) -> Result<usize, String> {
    whole(text, 1, 100_000_000)
}

/// Seconds a language server may take to answer: at most an hour.
pub fn server_timeout(text: &str) -> Result<std::time::Duration, String> {
    whole(text, 1, 3600).map(|s| std::time::Duration::from_secs(s as u64))
}

/// Holes per repository.
pub fn holes(text: &str) -> Result<usize, String> {
    whole(text, 1, 10_000)
}

/// Training epochs, and epochs without improvement before training stops.
pub fn epochs(text: &str) -> Result<usize, String> {
    whole(text, 1, 100_000)
}

/// Width of a rendered screen, in terminal cells.
pub fn screen_width(text: &str) -> Result<u16, String> {
    let (min, max) = RENDER_WIDTHS.into_inner();
    whole(text, min.into(), max.into()).map(|n| n as u16)
}

/// Height of a rendered screen, in terminal cells.
pub fn screen_height(text: &str) -> Result<u16, String> {
    let (min, max) = RENDER_HEIGHTS.into_inner();
    whole(text, min.into(), max.into()).map(|n| n as u16)
}

/// A sampling temperature: a finite number from 0 (greedy) to [`MAX_TEMPERATURE`].
pub fn temperature(text: &str) -> Result<f32, String> {
    let value: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number from 0 to {MAX_TEMPERATURE}"))?;
    if (0.0..=MAX_TEMPERATURE).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be from 0 to {MAX_TEMPERATURE}"))
    }
}

/// A share of requests (`--compose-share`): a number from 0 to 1.
pub fn share(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a number from 0 to 1".to_string())?;
    match (0.0..=1.0).contains(&value) {
        true => Ok(value),
        false => Err("must be from 0 to 1".into()),
    }
}

/// A comma-separated list of composition sizes (`2,5`); an empty value is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compositions(pub Vec<usize>);

pub fn compositions(text: &str) -> Result<Compositions, String> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| whole(part, 1, MAX_COMPOSITION))
        .collect::<Result<_, _>>()
        .map(Compositions)
}

/// The most candidates a composition takes: RLPG's candidates.
const MAX_COMPOSITION: usize = keyhole::candidate::CandidateId::DEFAULT.index() + 1;
