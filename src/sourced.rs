//! Text built from repository spans and formatting, with provenance for every byte: what every
//! candidate context and every prompt is made of.

use std::ops::Range;

use serde::Serialize;

use crate::lang::Span;
use crate::repo::{FileId, RepoIndex};
use crate::token::{self, Keep, Tokenizer};

/// Where a piece of prompt text came from: a byte span of a repository file whose text it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub file: FileId,
    pub span: Span,
}

/// A run of [`SourcedText::text`] and its origin; `None` for formatting keyhole added
/// (separators, `[ClassName]` labels).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Piece {
    pub range: Range<usize>,
    pub origin: Option<Origin>,
}

/// Text built from repository spans and formatting, with provenance for every byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourcedText {
    pub text: String,
    pub pieces: Vec<Piece>,
}

impl SourcedText {
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Append formatting text that comes from no file.
    pub fn push_plain(&mut self, text: &str) {
        self.push(text, None);
    }

    /// Append the text of `span` in `file`.
    pub fn push_span(&mut self, index: &RepoIndex, file: FileId, span: Span) {
        self.push(
            &index.files[file].text[span.range()],
            Some(Origin { file, span }),
        );
    }

    fn push(&mut self, text: &str, origin: Option<Origin>) {
        if text.is_empty() {
            return;
        }
        let start = self.text.len();
        self.text.push_str(text);
        self.pieces.push(Piece {
            range: start..self.text.len(),
            origin,
        });
    }

    /// Append another sourced text after this one.
    pub fn append(&mut self, other: SourcedText) {
        let offset = self.text.len();
        self.text.push_str(&other.text);
        self.pieces.extend(other.pieces.into_iter().map(|p| Piece {
            range: p.range.start + offset..p.range.end + offset,
            origin: p.origin,
        }));
    }

    /// The part `range` of this text, with pieces clipped and their file spans narrowed to the
    /// bytes kept.
    pub fn slice(&self, range: Range<usize>) -> SourcedText {
        let mut out = SourcedText {
            text: self.text[range.clone()].to_string(),
            pieces: Vec::new(),
        };
        for piece in &self.pieces {
            let start = piece.range.start.max(range.start);
            let end = piece.range.end.min(range.end);
            if start >= end {
                continue;
            }
            let origin = piece.origin.map(|o| Origin {
                file: o.file,
                span: Span::new(
                    o.span.start as usize + (start - piece.range.start),
                    o.span.start as usize + (end - piece.range.start),
                ),
            });
            out.pieces.push(Piece {
                range: start - range.start..end - range.start,
                origin,
            });
        }
        out
    }

    /// At most `max_tokens` tokens of this text, kept from the given end: the kept text and its
    /// token count.
    pub fn truncate(
        &self,
        tok: &dyn Tokenizer,
        max_tokens: usize,
        keep: Keep,
    ) -> (SourcedText, usize) {
        let (range, count) = token::truncate(tok, &self.text, max_tokens, keep);
        if range.len() == self.text.len() {
            return (self.clone(), count);
        }
        (self.slice(range), count)
    }

    /// The text without the one-byte characters at `positions` (ascending).
    pub fn without(&self, positions: &[usize]) -> SourcedText {
        if positions.is_empty() {
            return self.clone();
        }
        let mut kept = SourcedText::default();
        let mut start = 0;
        for &at in positions {
            kept.append(self.slice(start..at));
            start = at + 1;
        }
        kept.append(self.slice(start..self.text.len()));
        kept
    }

    /// The text with every CRLF read as LF, as Python's universal newlines read files.
    pub fn crlf_as_lf(&self) -> SourcedText {
        let carriage_returns: Vec<usize> =
            self.text.match_indices("\r\n").map(|(at, _)| at).collect();
        self.without(&carriage_returns)
    }

    /// Files the text draws on, in order of first appearance.
    pub fn files(&self) -> Vec<FileId> {
        let mut files = Vec::new();
        for origin in self.pieces.iter().filter_map(|p| p.origin) {
            if !files.contains(&origin.file) {
                files.push(origin.file);
            }
        }
        files
    }
}
