//! The prompt composer (RLPG section 2.3): the proposal context first, then a newline, then the
//! default context (the code before the hole). The proposal gets its share of the budget; what
//! it leaves unused goes to the default context. Each part is cut to fit from its own end.
//! The code profile's proposals are sent as RLPG's main loop sends them instead (see
//! [`Assembly::RlpgMainLoop`]).

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
/// What RLPG's code puts before the default context when it sends it alone (its `codex`
/// mode: `'' + ' ' + default`).
const CODEX_SEPARATOR: &str = " ";

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

/// How a candidate's context and the default context make one prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Assembly {
    /// keyhole's composer (section 2.3, the paper's reading): the context cut to its
    /// allocation, a line break, the default context in what those leave; the prompt stays
    /// within the budget.
    #[default]
    Capped,
    /// RLPG's main loop (`generate_completions.py`, the code profile): the context whole, as
    /// `get_prompt` returns it; `separator`; the default context cut to the budget less
    /// `counted` (RLPG's `rule_prompt_len`: labels left out, counted before the decode
    /// clean-up), or less the allocation where `counted` reaches it. The joined text is then cut
    /// to its last `budget` tokens, and where it was cut, decoded and cleaned up again as one
    /// text.
    RlpgMainLoop {
        counted: usize,
        separator: &'static str,
    },
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
    /// How its candidate's context and the default context were put together.
    pub assembly: Assembly,
    /// The prompt tokens the model's context leaves room for, where that is less than the
    /// budget and the prompt was composed within it instead.
    pub model_room: Option<usize>,
    /// The text after the hole, sent apart for the model to fill in the middle: a recorded
    /// plugin's (the session's `as_sent`); keyhole's own prompts send none.
    pub suffix: Option<SourcedText>,
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

    /// Check the promises a prompt makes: it fits its budget, each segment counts what it says
    /// and fits its allocation (a context RLPG's main loop sends whole need not), the default
    /// context gets exactly what the others left (in RLPG's main loop: the budget less the
    /// context's count, at most its allocation), and every piece's provenance lies inside its
    /// file and is that file's text. Used by tests and by the corpus sweep
    /// (`cargo run --release --example sweep`).
    pub fn validate(&self, index: &RepoIndex, tok: &dyn Tokenizer) -> Result<(), BrokenPromise> {
        let total = self.tokens(tok);
        if total > self.budget {
            return Err(BrokenPromise::OverBudget {
                tokens: total,
                budget: self.budget,
            });
        }
        let mut spent = 0;
        let mut left = self.budget;
        for segment in &self.segments {
            let counted = tok.count(&segment.text.text);
            let whole_context = matches!(self.assembly, Assembly::RlpgMainLoop { .. })
                && matches!(segment.kind, SegmentKind::Proposal { .. });
            if (segment.tokens > segment.allocated && !whole_context) || counted != segment.tokens {
                return Err(BrokenPromise::Segment {
                    kind: segment.kind,
                    tokens: segment.tokens,
                    counted,
                    allocated: segment.allocated,
                });
            }
            if let (Assembly::RlpgMainLoop { counted, .. }, SegmentKind::Proposal { .. }) =
                (self.assembly, segment.kind)
            {
                left = self.budget - counted.min(segment.allocated);
            }
            if let Assembly::Capped = self.assembly {
                left = self.budget - spent;
            }
            if segment.kind == SegmentKind::Default && segment.allocated != left {
                return Err(BrokenPromise::DefaultShare {
                    allocated: segment.allocated,
                    left,
                });
            }
            spent += segment.tokens;
            for piece in &segment.text.pieces {
                let Some(origin) = piece.origin else { continue };
                let file = &index.files[origin.file].text;
                if file.get(origin.span.range()) != segment.text.text.get(piece.range.clone()) {
                    return Err(BrokenPromise::Provenance {
                        range: piece.range.clone(),
                        file: index.files[origin.file].path.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// A promise a prompt broke ([`Prompt::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokenPromise {
    #[error("prompt has {tokens} tokens, budget {budget}")]
    OverBudget { tokens: usize, budget: usize },
    /// A segment counts other than it says, or more than its allocation.
    #[error("{kind:?}: {tokens} tokens ({counted} counted) for {allocated} allocated")]
    Segment {
        kind: SegmentKind,
        tokens: usize,
        counted: usize,
        allocated: usize,
    },
    #[error("default context got {allocated} of the {left} left")]
    DefaultShare { allocated: usize, left: usize },
    /// A piece's text is not the text of the file it says it came from.
    #[error("piece {range:?} does not match {file}")]
    Provenance {
        range: std::ops::Range<usize>,
        file: String,
    },
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
    /// `a > 0? b`); tokens are counted before the clean-up, as RLPG counts them. Sent alone
    /// (candidate 62), it follows a space and the whole is cut again, as RLPG's `codex` mode
    /// sends it.
    RlpgCode,
}

/// Compose the prompt for `hole` from `context` ([`DefaultContext`]: the default context alone)
/// within `budget` tokens of `tok`.
pub fn compose(
    index: &RepoIndex,
    hole: &Hole,
    context: &dyn CandidateContext,
    tok: &dyn Tokenizer,
    budget: usize,
) -> Prompt {
    Composer::new(index, hole, tok, budget, DefaultReading::AsWritten).compose(context)
}

/// A candidate's context as the composer takes it: whose it is, its text, its share of the
/// budget and which end survives a cut.
pub trait CandidateContext {
    fn id(&self) -> CandidateId;
    fn text(&self) -> &SourcedText;
    fn share(&self) -> f64;
    fn keep(&self) -> Keep;
    /// How the context makes a prompt with the default context.
    fn assembly(&self) -> Assembly {
        Assembly::Capped
    }
}

/// The default context's candidate (62), which has no context of its own: composed, it is the
/// code before the hole alone.
pub struct DefaultContext;

impl CandidateContext for DefaultContext {
    fn id(&self) -> CandidateId {
        CandidateId::DEFAULT
    }
    fn text(&self) -> &SourcedText {
        static NONE: SourcedText = SourcedText {
            text: String::new(),
            pieces: Vec::new(),
        };
        &NONE
    }
    fn share(&self) -> f64 {
        0.0
    }
    fn keep(&self) -> Keep {
        Keep::Start
    }
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

    /// The prompt of `candidate`'s context (a proposal, a retrieved context) followed by the
    /// default context; the default context alone for [`DefaultContext`].
    pub fn compose(&self, candidate: &dyn CandidateContext) -> Prompt {
        match candidate.id() {
            CandidateId::DEFAULT => match self.default_reading {
                DefaultReading::AsWritten => self.compose_context(
                    CandidateId::DEFAULT,
                    &SourcedText::default(),
                    0.0,
                    Keep::Start,
                ),
                // RLPG's `codex` mode: an empty rule context and a space before the default
                // context, cut again to the budget as a rule's prompt is.
                DefaultReading::RlpgCode => self.compose_as_rlpg(
                    CandidateId::DEFAULT,
                    &SourcedText::default(),
                    0.0,
                    0,
                    CODEX_SEPARATOR,
                ),
            },
            id => match candidate.assembly() {
                Assembly::RlpgMainLoop { counted, separator } if !candidate.text().is_empty() => {
                    self.compose_as_rlpg(
                        id,
                        candidate.text(),
                        candidate.share(),
                        counted,
                        separator,
                    )
                }
                _ => {
                    self.compose_context(id, candidate.text(), candidate.share(), candidate.keep())
                }
            },
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
    pub(crate) fn compose_parts(&self, parts: &[Part]) -> Prompt {
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
            assembly: Assembly::Capped,
            model_room: None,
            suffix: None,
        }
    }

    /// Candidate `id`'s `context` sent as RLPG's main loop sends a rule's prompt (see
    /// [`Assembly::RlpgMainLoop`]): `get_prompt`'s parts joined, then cut to the budget. Each
    /// segment keeps what survived the final cut, and says so when it lost its start.
    fn compose_as_rlpg(
        &self,
        id: CandidateId,
        context: &SourcedText,
        share: f64,
        counted: usize,
        separator: &'static str,
    ) -> Prompt {
        let (tok, budget) = (self.tok, self.budget);
        let allocated = proposal_allocation(budget, share);
        // `get_prompt`: what the rule's count leaves, or what its allocation leaves once the
        // count reaches it.
        let default_tokens = budget - counted.min(allocated);
        let default = self.default_segment(default_tokens, default_tokens);
        let mut sep = SourcedText::default();
        sep.push_plain(separator);
        let whole = |kind, text: SourcedText, allocated, cut| Segment {
            kind,
            tokens: tok.count(&text.text),
            text,
            allocated,
            cut,
        };
        let mut segments = vec![
            whole(
                SegmentKind::Proposal { id },
                context.clone(),
                allocated,
                None,
            ),
            whole(SegmentKind::Separator, sep, tok.count(separator), None),
            default,
        ];
        // The default context alone has no rule context to show.
        segments.retain(|s| !(matches!(s.kind, SegmentKind::Proposal { .. }) && s.text.is_empty()));
        let joined: String = segments.iter().map(|s| s.text.text.as_str()).collect();
        let ends = tok.token_ends(&joined);
        if ends.len() > budget {
            let cut_at = ends[ends.len() - budget - 1];
            segments = rlpg_final_cut(segments, cut_at, tok);
        }
        Prompt {
            segments,
            budget,
            tokenizer: tok.name(),
            proposal_id: id,
            backend_tokens: None,
            assembly: Assembly::RlpgMainLoop { counted, separator },
            model_room: None,
            suffix: None,
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

/// `segments` as RLPG's main loop leaves them when it keeps the last tokens of the joined text,
/// from byte `cut_at` on, and decodes them (`tokenizer.decode`): a character the cut splits
/// becomes a U+FFFD per byte kept, as a lossy UTF-8 decode reads them, and the decode's clean-up
/// runs over the whole kept text, across the segments' joins. A segment that lost bytes at its
/// start says it was cut there.
fn rlpg_final_cut(segments: Vec<Segment>, cut_at: usize, tok: &dyn Tokenizer) -> Vec<Segment> {
    // Each segment's kept part, and whether it lost bytes at its start.
    let mut kept: Vec<(SourcedText, bool)> = Vec::new();
    let mut start = 0;
    for segment in &segments {
        let text = &segment.text.text;
        let from = cut_at.saturating_sub(start).min(text.len());
        let boundary = text.ceil_char_boundary(from);
        let mut part = SourcedText::default();
        part.push_plain(&"\u{FFFD}".repeat(boundary - from));
        part.append(segment.text.slice(boundary..text.len()));
        kept.push((part, from > 0));
        start += text.len();
    }
    let joined: String = kept.iter().map(|(t, _)| t.text.as_str()).collect();
    let deleted = rlpg_text::decode_clean_up_deletions(&joined);
    let mut start = 0;
    segments
        .into_iter()
        .zip(kept)
        .map(|(segment, (part, lost_start))| {
            let end = start + part.text.len();
            let here: Vec<usize> = deleted
                .iter()
                .filter(|&&at| (start..end).contains(&at))
                .map(|&at| at - start)
                .collect();
            start = end;
            let text = part.without(&here);
            Segment {
                tokens: tok.count(&text.text),
                text,
                cut: if lost_start {
                    Some(Keep::Start)
                } else {
                    segment.cut
                },
                ..segment
            }
        })
        .collect()
}

/// Tokens given to a proposal with budget share `share`.
pub fn proposal_allocation(budget: usize, share: f64) -> usize {
    (budget as f64 * share).floor() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::TokenizerKind;

    fn plain(kind: SegmentKind, text: &str) -> Segment {
        let mut sourced = SourcedText::default();
        sourced.push_plain(text);
        Segment {
            kind,
            text: sourced,
            tokens: 0,
            allocated: 10,
            cut: None,
        }
    }

    fn texts(segments: &[Segment]) -> Vec<&str> {
        segments.iter().map(|s| s.text.text.as_str()).collect()
    }

    #[test]
    fn rlpgs_final_cut_decodes_a_split_character_as_one_replacement_per_byte() {
        let tok = TokenizerKind::Code.tokenizer();
        let id = CandidateId::nth(0);
        // "é" is two bytes; a cut after its first keeps one byte of it.
        let segments = vec![
            plain(SegmentKind::Proposal { id }, "aé b"),
            plain(SegmentKind::Separator, "\n"),
            plain(SegmentKind::Default, "c"),
        ];
        let cut = rlpg_final_cut(segments, 2, tok);
        assert_eq!(texts(&cut), ["\u{FFFD} b", "\n", "c"]);
        assert_eq!(cut[0].cut, Some(Keep::Start));
        assert_eq!((cut[1].cut, cut[2].cut), (None, None));
        assert_eq!(cut[0].tokens, tok.count("\u{FFFD} b"));
    }

    #[test]
    fn rlpgs_final_cut_cleans_up_across_segments_and_can_take_a_whole_segment() {
        let tok = TokenizerKind::Code.tokenizer();
        let id = CandidateId::nth(0);
        let segments = vec![
            plain(SegmentKind::Proposal { id }, "x y"),
            plain(SegmentKind::Separator, " "),
            plain(SegmentKind::Default, ". z ,"),
        ];
        // Cut inside the proposal: the separator's space goes with the ` .` after it.
        let cut = rlpg_final_cut(segments.clone(), 1, tok);
        assert_eq!(texts(&cut), [" y", "", ". z,"]);
        // Cut past the proposal: it keeps nothing and says it lost its start.
        let cut = rlpg_final_cut(segments, 3, tok);
        assert_eq!(texts(&cut), ["", "", ". z,"]);
        assert_eq!(cut[0].cut, Some(Keep::Start));
        assert_eq!(cut[0].tokens, 0);
    }
}
