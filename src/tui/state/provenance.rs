//! Where prompt text came from, said to people: a segment by what it is, an origin as the
//! file and lines it was copied from.

use crate::candidate::{CandidateId, Family, Numbering};
use crate::compose::{Prompt, SegmentKind};
use crate::context::{Origin, SourcedText};
use crate::explain::ExplainedSpan;
use crate::repo::{FileId, RepoIndex};

/// "proposal 7 (import MNB)", "the default context", "retrieved candidate 68 (ProCC lexical)".
pub fn segment_name(kind: SegmentKind, numbering: Numbering) -> String {
    match kind {
        SegmentKind::Default => "the default context".into(),
        SegmentKind::Separator => "a separator".into(),
        SegmentKind::Proposal { id } => match id.family() {
            Family::Proposal => format!("proposal {} ({})", numbering.number(id), id.label()),
            Family::Default => "the default context".into(),
            Family::Recorded if id == CandidateId::SENT_BY_KEYHOLE => {
                "the prompt keyhole sent in the plugin's place".into()
            }
            Family::Recorded => "the plugin's prompt".into(),
            Family::Retrieved | Family::Typed => {
                format!(
                    "retrieved candidate {} ({})",
                    numbering.number(id),
                    id.label()
                )
            }
        },
    }
}

/// Whose text a prompt's bytes without an origin are: the plugin's framing in the prompt it
/// sent, keyhole's formatting in its own.
pub fn framing_name(prompt: &Prompt) -> &'static str {
    match prompt.proposal_id.family() {
        Family::Recorded => "the plugin's framing",
        _ => "keyhole's formatting",
    }
}

/// 1-based first and last line of `origin` in its file.
pub fn origin_lines(index: &RepoIndex, origin: Origin) -> (usize, usize) {
    let file = &index.files[origin.file];
    let (start, end) = (origin.span.start as usize, origin.span.end as usize);
    let last = end.saturating_sub(1).max(start);
    (file.line_of(start) + 1, file.line_of(last) + 1)
}

/// "Order.java:3-40" (or ":3" for one line): the file's name, since the status line and the
/// prompt pane are narrow.
pub fn origin_text(index: &RepoIndex, origin: Origin) -> String {
    let (first, last) = origin_lines(index, origin);
    lines_text(index, origin.file, first, last)
}

fn lines_text(index: &RepoIndex, file: FileId, first: usize, last: usize) -> String {
    let path = &index.files[file].path;
    let name = path.rsplit('/').next().unwrap_or(path);
    match first == last {
        true => format!("{name}:{first}"),
        false => format!("{name}:{first}-{last}"),
    }
}

/// The files a segment's text was taken from, in order of first use, each with the lines it
/// spans: "Order.java:3-40, Item.java:1-9" (file names only: the pane is narrow).
pub fn segment_sources(index: &RepoIndex, text: &SourcedText) -> String {
    let mut files: Vec<(usize, usize, usize)> = Vec::new();
    for origin in text.pieces.iter().filter_map(|p| p.origin) {
        let (first, last) = origin_lines(index, origin);
        match files.iter_mut().find(|(f, ..)| *f == origin.file) {
            Some((_, lo, hi)) => (*lo, *hi) = ((*lo).min(first), (*hi).max(last)),
            None => files.push((origin.file, first, last)),
        }
    }
    let named: Vec<String> = files
        .into_iter()
        .map(|(file, first, last)| lines_text(index, file, first, last))
        .collect();
    named.join(", ")
}

/// Where each piece of an explained completion came from, in order: (the piece, "FILE:LINES
/// in SEGMENT"), or "not in the prompt" for what no copy explains.
pub fn explained_pieces(
    index: &RepoIndex,
    prompt: &Prompt,
    completion: &str,
    spans: &[ExplainedSpan],
    numbering: Numbering,
) -> Vec<(String, String)> {
    spans
        .iter()
        .map(|span| {
            let piece = completion[span.completion.clone()].to_string();
            let segment = span
                .segment
                .and_then(|i| prompt.segments.get(i))
                .map(|s| segment_name(s.kind, numbering));
            let from = match (span.origin, segment) {
                (Some(origin), Some(segment)) => {
                    format!("{} in {segment}", origin_text(index, origin))
                }
                (None, Some(segment)) => format!("{} in {segment}", framing_name(prompt)),
                _ => "not in the prompt".into(),
            };
            (piece, from)
        })
        .collect()
}
