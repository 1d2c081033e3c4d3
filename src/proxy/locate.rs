//! Where a recorded completion request was made: the file and position of its hole, found in
//! the repository from the text the plugin sent before and after the cursor, and where each
//! piece of what it sent came from.

use serde::Serialize;

use super::exchange::Sent;
use crate::repo::{FileId, RepoIndex};

/// Lines of the text before the cursor that must match (fewer when it has fewer).
const ANCHOR_LINES: usize = 3;

/// How sure a place is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// The text before and after the cursor meet there, as sent.
    Exact,
    /// The text before the cursor is there, but what follows has changed since (the user went
    /// on writing, perhaps the completion itself).
    BeforeOnly,
}

/// A place the hole may have been.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    pub file: String,
    /// 1-based, as editors count.
    pub line: usize,
    pub column: usize,
    pub certainty: Certainty,
}

impl Place {
    /// `FILE:LINE:COL`, as the other commands take a hole.
    pub fn position(&self) -> String {
        format!("{}:{}:{}", self.file, self.line, self.column)
    }
}

/// The places a request's hole may have been, surest first; several of equal certainty mean
/// the request cannot tell them apart.
pub fn hole_places(index: &RepoIndex, sent: &Sent) -> Vec<Place> {
    let before = text_before_cursor(sent);
    let anchor = anchor(&before);
    if anchor.trim().is_empty() {
        return Vec::new();
    }
    let after = sent.suffix.as_deref().unwrap_or_default();
    let after_head = after.split_inclusive('\n').next().unwrap_or_default();
    let mut places = Vec::new();
    for (id, file) in index.files.iter().enumerate() {
        for (at, _) in file.text.match_indices(anchor) {
            let cursor = at + anchor.len();
            let certainty = if file.text[cursor..].starts_with(after_head) {
                Certainty::Exact
            } else {
                Certainty::BeforeOnly
            };
            places.push(place(index, id, cursor, certainty));
        }
    }
    places.sort_by(|a, b| a.certainty.cmp(&b.certainty).then(a.file.cmp(&b.file)));
    places
}

/// The text before the cursor: an infill request's prefix and its middle, a completion's
/// prompt, a chat's last message.
fn text_before_cursor(sent: &Sent) -> String {
    let prefix = sent.prefix.as_deref().unwrap_or_default();
    let prompt = match &sent.prompt {
        Some(prompt) => prompt.as_str(),
        None => sent.messages.last().map_or("", |m| m.content.as_str()),
    };
    format!("{prefix}{prompt}")
}

/// The last [`ANCHOR_LINES`] lines of `before`, the cursor's line up to the cursor included.
fn anchor(before: &str) -> &str {
    let mut start = before.len();
    for _ in 0..ANCHOR_LINES {
        match before[..start.saturating_sub(1)].rfind('\n') {
            Some(i) if start > 0 => start = i + 1,
            _ => return before,
        }
    }
    &before[start..]
}

fn place(index: &RepoIndex, file: FileId, offset: usize, certainty: Certainty) -> Place {
    let source = &index.files[file];
    let line = source.line_of(offset.min(source.text.len().saturating_sub(1)));
    let column = source.text[source.line_start(line)..offset].chars().count();
    Place {
        file: source.path.clone(),
        line: line + 1,
        column: column + 1,
        certainty,
    }
}

/// Where one piece of the sent text came from: the repository lines it equals, or none (the
/// plugin's own framing, or text the repository does not hold).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// What the piece is: `prefix`, `suffix`, `extra 1 (src/a.py)`, `message 2 (user)`.
    pub piece: String,
    /// `FILE:FIRST-LAST`, 1-based lines; empty when no file holds the piece.
    pub from: Vec<String>,
    pub chars: usize,
}

/// Where each piece of what was sent came from.
pub fn provenance(index: &RepoIndex, sent: &Sent) -> Vec<Provenance> {
    let mut pieces: Vec<(String, &str)> = Vec::new();
    for (name, text) in [
        ("prefix", &sent.prefix),
        ("prompt", &sent.prompt),
        ("suffix", &sent.suffix),
    ] {
        if let Some(text) = text {
            pieces.push((name.to_string(), text));
        }
    }
    for (i, chunk) in sent.extra.iter().enumerate() {
        pieces.push((format!("extra {} ({})", i + 1, chunk.filename), &chunk.text));
    }
    for (i, message) in sent.messages.iter().enumerate() {
        pieces.push((
            format!("message {} ({})", i + 1, message.role),
            &message.content,
        ));
    }
    pieces
        .into_iter()
        .map(|(piece, text)| Provenance {
            from: found_in(index, text),
            chars: text.chars().count(),
            piece,
        })
        .collect()
}

/// The places whose lines hold `text` whole (its surrounding blank lines aside).
fn found_in(index: &RepoIndex, text: &str) -> Vec<String> {
    let text = text.trim_matches('\n');
    if text.trim().is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    for file in &index.files {
        for (at, _) in file.text.match_indices(text) {
            let first = file.line_of(at) + 1;
            let last = file.line_of(at + text.len() - 1) + 1;
            found.push(format!("{}:{first}-{last}", file.path));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> RepoIndex {
        RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![
                (
                    "src/Cart.java".into(),
                    "class Cart {\n    int total() {\n        return sum;\n    }\n}\n".into(),
                ),
                (
                    "src/Price.java".into(),
                    "class Price {\n    long cents;\n}\n".into(),
                ),
            ],
        )
    }

    #[test]
    fn an_infill_request_is_found_where_its_prefix_and_suffix_meet() {
        let sent = Sent {
            prefix: Some("class Cart {\n    int total() {\n        return ".into()),
            prompt: Some(String::new()),
            suffix: Some("sum;\n    }\n}\n".into()),
            ..Sent::default()
        };
        let places = hole_places(&index(), &sent);
        assert_eq!(places.len(), 1);
        assert_eq!(places[0].position(), "src/Cart.java:3:16");
        assert_eq!(places[0].certainty, Certainty::Exact);
        // The user wrote on since: the line now differs after the cursor.
        let later = Sent {
            suffix: Some("\n    }\n}\n".into()),
            ..sent.clone()
        };
        assert_eq!(
            hole_places(&index(), &later)[0].certainty,
            Certainty::BeforeOnly
        );
    }

    #[test]
    fn provenance_names_the_lines_each_piece_came_from_and_marks_framing() {
        let sent = Sent {
            prompt: Some("<fim_prefix>".into()),
            extra: vec![super::super::ExtraChunk {
                filename: "src/Price.java".into(),
                text: "class Price {\n    long cents;\n".into(),
            }],
            ..Sent::default()
        };
        let found = provenance(&index(), &sent);
        assert_eq!(found[0].piece, "prompt");
        assert!(found[0].from.is_empty(), "the plugin's own text");
        assert_eq!(found[1].from, ["src/Price.java:1-2"]);
    }
}
