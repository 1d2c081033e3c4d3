//! Why a completion came out as it did: which of its bytes the model copied from the prompt,
//! from which segment, and from which repository file and span.
//!
//! The completion is covered greedily from left to right by the longest run of bytes that
//! occurs in the prompt; among equally long occurrences the one nearest the end of the prompt
//! (nearest the hole) wins, since that is the text the model attends to most. A run counts only
//! from [`MIN_COPY`] bytes: shorter runs (`);`, `. `, single letters) occur all over any prompt
//! and would "explain" nothing. What no run covers is reported unexplained.

use std::ops::Range;

use serde::Serialize;

use crate::compose::Prompt;
use crate::context::Origin;

/// The shortest run of bytes that counts as copied from the prompt.
pub const MIN_COPY: usize = 4;

/// A stretch of the completion and where in the prompt it was copied from, if anywhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExplainedSpan {
    /// Bytes of the completion.
    pub completion: Range<usize>,
    /// Bytes of `prompt.text()` it equals; `None`: nothing in the prompt explains it.
    pub prompt: Option<Range<usize>>,
    /// Index into `prompt.segments` of the segment holding those bytes.
    pub segment: Option<usize>,
    /// The repository file span holding those bytes; `None` for keyhole's own formatting.
    pub origin: Option<Origin>,
}

/// Explain `completion` against `prompt`: spans that tile the completion in order. A copied run
/// that crosses segment or piece boundaries is split there, so each span has one origin.
pub fn explain(prompt: &Prompt, completion: &str) -> Vec<ExplainedSpan> {
    let text = prompt.text();
    let mut spans = Vec::new();
    let mut unexplained_from = None;
    let mut at = 0;
    while at < completion.len() {
        match longest_copy(text.as_bytes(), completion, at) {
            Some(source) => {
                push_unexplained(&mut spans, unexplained_from.take(), at);
                let end = at + source.len();
                spans.extend(attribute(prompt, at, source));
                at = end;
            }
            None => {
                unexplained_from.get_or_insert(at);
                at += completion[at..].chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    push_unexplained(&mut spans, unexplained_from, completion.len());
    spans
}

/// The share of the completion's bytes copied from the prompt (0 for an empty completion).
pub fn explained_fraction(spans: &[ExplainedSpan]) -> f64 {
    let bytes = |only_explained: bool| -> usize {
        spans
            .iter()
            .filter(|s| !only_explained || s.prompt.is_some())
            .map(|s| s.completion.len())
            .sum()
    };
    let total = bytes(false);
    if total == 0 {
        return 0.0;
    }
    bytes(true) as f64 / total as f64
}

fn push_unexplained(spans: &mut Vec<ExplainedSpan>, from: Option<usize>, to: usize) {
    if let Some(from) = from {
        spans.push(ExplainedSpan {
            completion: from..to,
            prompt: None,
            segment: None,
            origin: None,
        });
    }
}

/// The prompt bytes of the longest run starting at `completion[at..]` that occurs in `prompt`
/// (the latest occurrence on ties), if at least [`MIN_COPY`] bytes long. The run ends on a
/// character boundary of the completion, hence also of the prompt.
fn longest_copy(prompt: &[u8], completion: &str, at: usize) -> Option<Range<usize>> {
    let wanted = &completion.as_bytes()[at..];
    let first = *wanted.first()?;
    let mut best: Option<Range<usize>> = None;
    // Walking back from the end and replacing only on a strictly longer run keeps the latest.
    for start in (0..prompt.len()).rev().filter(|&i| prompt[i] == first) {
        let len = common_prefix(&prompt[start..], wanted);
        if best.as_ref().is_none_or(|b| len > b.len()) {
            best = Some(start..start + len);
            if len == wanted.len() {
                break;
            }
        }
    }
    let best = best?;
    let len = (0..=best.len())
        .rev()
        .find(|&len| completion.is_char_boundary(at + len))?;
    (len >= MIN_COPY).then_some(best.start..best.start + len)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Spans for the completion bytes from `copied_at` that equal prompt bytes `source`, split at
/// the segments and pieces they cross.
fn attribute(prompt: &Prompt, copied_at: usize, source: Range<usize>) -> Vec<ExplainedSpan> {
    let mut spans = Vec::new();
    let mut segment_start = 0;
    for (index, segment) in prompt.segments.iter().enumerate() {
        let segment_end = segment_start + segment.text.text.len();
        let (start, end) = (source.start.max(segment_start), source.end.min(segment_end));
        if start < end {
            // Slicing narrows each piece's file span to the bytes taken.
            let taken = segment
                .text
                .slice(start - segment_start..end - segment_start);
            let at = copied_at + start - source.start;
            spans.extend(taken.pieces.into_iter().map(|piece| ExplainedSpan {
                completion: at + piece.range.start..at + piece.range.end,
                prompt: Some(start + piece.range.start..start + piece.range.end),
                segment: Some(index),
                origin: piece.origin,
            }));
        }
        segment_start = segment_end;
    }
    spans
}
