//! The prompt composer (RLPG section 2.3): the proposal context first, then a newline, then the
//! default context (the code before the hole). The proposal gets its share of the budget; what
//! it leaves unused goes to the default context. Each part is cut to fit from its own end.

use serde::Serialize;

use crate::candidate::CandidateId;
use crate::hole::Hole;
use crate::lang::Span;
use crate::repo::RepoIndex;
use crate::rlpg_text;
use crate::sourced::SourcedText;
use crate::token::{self, Keep, Tokenizer};

/// RLPG's total prompt length in tokens (section 3.2).
pub const DEFAULT_BUDGET: usize = 4072;
/// The largest budget keyhole accepts from a user: above any model's context window.
pub const MAX_BUDGET: usize = 1 << 22;

/// The separator between proposal context and default context (B.5: newline).
const SEPARATOR: &str = "\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SegmentKind {
    /// A candidate's context: an RLPG proposal or a retrieved context, by candidate id.
    Proposal {
        id: CandidateId,
    },
    Separator,
    Default,
}

/// One part of a prompt.
#[derive(Clone, Debug)]
pub struct Segment {
    pub kind: SegmentKind,
    pub text: SourcedText,
    pub tokens: usize,
    /// Tokens this segment was allowed.
    pub allocated: usize,
    /// Which end was cut off, if the segment did not fit.
    pub cut: Option<Keep>,
}

impl Segment {
    /// `full` cut to `allocated` tokens from its `keep` end.
    fn fit(
        kind: SegmentKind,
        full: &SourcedText,
        tok: &dyn Tokenizer,
        allocated: usize,
        keep: Keep,
    ) -> Segment {
        let (text, tokens) = full.truncate(tok, allocated, keep);
        let cut = (text.text.len() < full.text.len()).then_some(opposite(keep));
        Segment {
            kind,
            text,
            tokens,
            allocated,
            cut,
        }
    }
}

fn opposite(keep: Keep) -> Keep {
    match keep {
        Keep::Start => Keep::End,
        Keep::End => Keep::Start,
    }
}

/// A composed prompt: segments in order, with the budget they shared.
#[derive(Clone, Debug)]
pub struct Prompt {
    pub segments: Vec<Segment>,
    pub budget: usize,
    pub tokenizer: &'static str,
    /// The proposal the prompt was built with (`CandidateId::DEFAULT` for the default context alone).
    pub proposal_id: CandidateId,
    /// The whole prompt's tokens as the backend itself counted them (llama.cpp's `/tokenize`, a
    /// local model's vocabulary), where the prompt was fitted to it; `None` otherwise.
    pub backend_tokens: Option<usize>,
    /// The prompt tokens the model's context leaves room for, where that is less than the
    /// budget and the prompt was composed within it instead.
    pub model_room: Option<usize>,
}

impl Prompt {
    pub fn text(&self) -> String {
        self.segments.iter().map(|s| s.text.text.as_str()).collect()
    }

    /// Tokens of the whole prompt, counted as one text.
    pub fn tokens(&self, tok: &dyn Tokenizer) -> usize {
        tok.count(&self.text())
    }

    /// Tokens of the whole prompt as the model sees them where the backend counted them, else
    /// as `tok` counts them.
    pub fn model_tokens(&self, tok: &dyn Tokenizer) -> usize {
        self.backend_tokens.unwrap_or_else(|| self.tokens(tok))
    }

    pub fn segment(&self, kind: fn(&SegmentKind) -> bool) -> Option<&Segment> {
        self.segments.iter().find(|s| kind(&s.kind))
    }

    /// Check the promises a prompt makes: it fits its budget, each segment fits its allocation
    /// and counts what it says, the default context gets exactly what the others left, and every
    /// piece's provenance lies inside its file and is that file's text. Used by tests and by the
    /// corpus sweep (`cargo run --release --example sweep`).
    pub fn validate(&self, index: &RepoIndex, tok: &dyn Tokenizer) -> Result<(), String> {
        let total = self.tokens(tok);
        if total > self.budget {
            return Err(format!("prompt has {total} tokens, budget {}", self.budget));
        }
        let mut spent = 0;
        for segment in &self.segments {
            let counted = tok.count(&segment.text.text);
            if segment.tokens > segment.allocated || counted != segment.tokens {
                return Err(format!(
                    "{:?}: {} tokens ({counted} counted) for {} allocated",
                    segment.kind, segment.tokens, segment.allocated
                ));
            }
            if segment.kind == SegmentKind::Default && segment.allocated != self.budget - spent {
                return Err(format!(
                    "default context got {} of the {} left",
                    segment.allocated,
                    self.budget - spent
                ));
            }
            spent += segment.tokens;
            for piece in &segment.text.pieces {
                let Some(origin) = piece.origin else { continue };
                let file = &index.files[origin.file].text;
                if file.get(origin.span.range()) != segment.text.text.get(piece.range.clone()) {
                    return Err(format!(
                        "piece {:?} does not match {}",
                        piece.range, index.files[origin.file].path
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The default context: all code before the hole in the current file.
pub fn default_context(index: &RepoIndex, hole: &Hole) -> SourcedText {
    let mut text = SourcedText::default();
    text.push_span(index, hole.file, Span::new(0, hole.offset));
    text
}

/// How the default context reads the code before the hole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DefaultReading {
    /// As the file has it.
    #[default]
    AsWritten,
    /// As RLPG's code reads it (`get_default_prompt`): CRLF as LF (Python's universal
    /// newlines), starting at the file's first line that does not start with `/` or `*`, and
    /// after the cut cleaned up as its tokenizer's decode cleaned it (`a > 0 ? b` becomes
    /// `a > 0? b`); tokens are counted before the clean-up, as RLPG counts them.
    RlpgCode,
}

/// Compose the prompt for `hole` from `proposal` (none: default context alone) within `budget`
/// tokens of `tok`.
pub fn compose(
    index: &RepoIndex,
    hole: &Hole,
    proposal: Option<&dyn CandidateContext>,
    tok: &dyn Tokenizer,
    budget: usize,
) -> Prompt {
    Composer::new(index, hole, tok, budget, DefaultReading::AsWritten).compose(proposal)
}

/// A candidate's context as the composer takes it: whose it is, its text, its share of the
/// budget and which end survives a cut.
pub trait CandidateContext {
    fn id(&self) -> CandidateId;
    fn text(&self) -> &SourcedText;
    fn share(&self) -> f64;
    fn keep(&self) -> Keep;
}

/// One candidate context of a composed prompt and the tokens it may take.
pub struct Part<'c> {
    pub id: CandidateId,
    pub context: &'c SourcedText,
    pub allocated: usize,
    pub keep: Keep,
}

/// Composes any number of prompts for one hole, tokenizing the code before the hole once.
pub struct Composer<'a> {
    tok: &'a dyn Tokenizer,
    budget: usize,
    /// The end of the code before the hole that any prompt of this budget could keep.
    default: SourcedText,
    default_ends: Vec<usize>,
    /// Whether `default` is all the code before the hole.
    default_whole: bool,
    default_reading: DefaultReading,
}

impl<'a> Composer<'a> {
    /// The composer of `hole`'s prompts, reading the file's line breaks as `default_reading` says.
    pub fn new(
        index: &RepoIndex,
        hole: &Hole,
        tok: &'a dyn Tokenizer,
        budget: usize,
        default_reading: DefaultReading,
    ) -> Self {
        let full = default_context(index, hole);
        let full = match default_reading {
            DefaultReading::AsWritten => full,
            DefaultReading::RlpgCode => {
                let file = &index.files[hole.file].text;
                let lf = full.crlf_as_lf();
                // The first line is found in the whole file: one after the hole's leaves nothing.
                match rlpg_text::rlpg_first_line(file) {
                    Some(first) if first <= hole.offset => {
                        let skipped = file[..first].matches("\r\n").count();
                        lf.slice(first - skipped..lf.text.len())
                    }
                    _ => SourcedText::default(),
                }
            }
        };
        let window = token::truncate(tok, &full.text, budget, Keep::End).0;
        // Keep one token more than the budget so the cut can be found by its token ends.
        let start = if window.start == 0 {
            0
        } else {
            window.start.saturating_sub(64)
        };
        let start = full.text.floor_char_boundary(start);
        let default = if start == 0 {
            full
        } else {
            full.slice(start..full.text.len())
        };
        let default_ends = tok.token_ends(&default.text);
        Composer {
            tok,
            budget,
            default_reading,
            default_whole: start == 0,
            default,
            default_ends,
        }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The prompt of `candidate`'s context followed by the default context; the default
    /// context alone for `None`.
    pub fn compose(&self, candidate: Option<&dyn CandidateContext>) -> Prompt {
        match candidate {
            Some(c) => self.compose_context(c.id(), c.text(), c.share(), c.keep()),
            None => self.compose_context(
                CandidateId::DEFAULT,
                &SourcedText::default(),
                0.0,
                Keep::Start,
            ),
        }
    }

    /// Compose candidate `id`'s `context` (any kind: a proposal's, a retrieved one's) with
    /// `share` of the budget, cut from its `keep` end, followed by the default context.
    pub fn compose_context(
        &self,
        id: CandidateId,
        context: &SourcedText,
        share: f64,
        keep: Keep,
    ) -> Prompt {
        let part = Part {
            id,
            context,
            allocated: proposal_allocation(self.budget, share),
            keep,
        };
        self.compose_parts(&[part])
    }

    /// Compose several candidates' contexts (appendix D.4), each cut to its own allocation and
    /// followed by a separator, in the order given, then the default context. The prompt is
    /// named after the last part, the one nearest the code.
    pub fn compose_parts(&self, parts: &[Part]) -> Prompt {
        let (tok, budget) = (self.tok, self.budget);
        let mut segments = Vec::new();
        let mut used = 0;
        for part in parts.iter().filter(|p| !p.context.is_empty()) {
            let allocated = part.allocated.min(budget - used);
            let kind = SegmentKind::Proposal { id: part.id };
            let segment = Segment::fit(kind, part.context, tok, allocated, part.keep);
            if segment.tokens > 0 {
                used += segment.tokens;
                segments.push(segment);
                let mut sep = SourcedText::default();
                sep.push_plain(SEPARATOR);
                let sep_tokens = tok.count(SEPARATOR).min(budget - used);
                let sep = Segment::fit(SegmentKind::Separator, &sep, tok, sep_tokens, Keep::Start);
                used += sep.tokens;
                segments.push(sep);
            }
        }
        let allocated = budget - used;
        let mut default = self.default_segment(allocated, allocated);
        // BPE can merge across segment boundaries in either direction; if the joined prompt
        // counts more than the budget, the default context gives up the excess (RLPG's code
        // counts each part on its own and does not).
        let recount = self.default_reading == DefaultReading::AsWritten;
        while recount && !tok.stable_boundaries() && default.tokens > 0 {
            let joined: String = segments
                .iter()
                .map(|s| s.text.text.as_str())
                .chain([default.text.text.as_str()])
                .collect();
            let excess = tok.count(&joined).saturating_sub(budget);
            if excess == 0 {
                break;
            }
            default = self.default_segment(default.tokens.saturating_sub(excess), allocated);
        }
        segments.push(default);
        Prompt {
            segments,
            budget,
            tokenizer: tok.name(),
            proposal_id: parts.last().map_or(CandidateId::DEFAULT, |p| p.id),
            backend_tokens: None,
            model_room: None,
        }
    }

    /// The default context cut to `tokens`, reported against its allocation.
    fn default_segment(&self, tokens: usize, allocated: usize) -> Segment {
        let (range, tokens) = token::truncate_at(
            self.tok,
            &self.default.text,
            &self.default_ends,
            tokens,
            Keep::End,
        );
        let cut = (range.start > 0 || !self.default_whole).then_some(Keep::Start);
        let text = self.default.slice(range);
        let text = match self.default_reading {
            DefaultReading::AsWritten => text,
            DefaultReading::RlpgCode => rlpg_text::decode_clean_up(text),
        };
        Segment {
            kind: SegmentKind::Default,
            text,
            tokens,
            allocated,
            cut,
        }
    }
}

/// Tokens given to a proposal with budget share `share`.
pub fn proposal_allocation(budget: usize, share: f64) -> usize {
    (budget as f64 * share).floor() as usize
}
