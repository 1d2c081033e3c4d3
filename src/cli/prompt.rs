//! `keyhole prompt`: the prompt one candidate composes to, as text or as JSON with every
//! segment and the file and lines each piece came from.

use anyhow::{Context, Result};
use serde::Serialize;

use super::backends::BackendArgs;
use super::hole::{HoleArgs, HoleOut, Opened, PieceOut};
use keyhole::candidate::CandidateId;
use keyhole::compose::{Prompt, SegmentKind};
use keyhole::session::Availability;
use keyhole::token::Keep;

/// The prompt of candidate `typed`, a number as the profile numbers candidates.
pub fn prompt_command(at: &HoleArgs, typed: CandidateId, backend: &BackendArgs) -> Result<()> {
    let opened = Opened::open(at, backend, None)?;
    let id = opened.meant(typed);
    let session = &opened.session;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let hole = &opened.hole;
    let context = runtime.block_on(session.context(hole, id));
    let row = context.row(&session.composer(hole));
    if let Availability::NotApplicable(why) = &row.availability {
        let why = why
            .as_deref()
            .filter(|w| !w.is_empty())
            .map_or_else(String::new, |w| format!(" ({w})"));
        errln!(
            "note: candidate {typed} is not applicable here{why}; the prompt is the default context alone"
        );
    }
    // Fitted to the budget as the backend's model counts it, where it counts for itself.
    let prompt = runtime.block_on(session.fit(hole, |composer| context.compose(composer)))?;
    if at.json {
        let out = PromptOut::new(&opened, &prompt);
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        out!("{}", prompt.text());
    }
    opened.finish()
}

/// What `keyhole prompt --json` reports.
#[derive(Serialize)]
struct PromptOut<'a> {
    hole: HoleOut<'a>,
    /// As the profile numbers it.
    proposal_id: usize,
    tokenizer: &'static str,
    budget: usize,
    tokens: usize,
    /// The whole prompt's tokens as the backend counted them (`/tokenize`, a local model's
    /// vocabulary), where it counts for itself; `tokens` is keyhole's count in `tokenizer`.
    backend_tokens: Option<usize>,
    text: String,
    segments: Vec<SegmentOut<'a>>,
}

#[derive(Serialize)]
struct SegmentOut<'a> {
    kind: SegmentKind,
    text: &'a str,
    tokens: usize,
    allocated: usize,
    truncated: bool,
    cut: Option<Keep>,
    pieces: Vec<PieceOut<'a>>,
}

impl<'a> PromptOut<'a> {
    fn new(opened: &'a Opened, prompt: &'a Prompt) -> PromptOut<'a> {
        PromptOut {
            hole: opened.hole_out(),
            proposal_id: opened.number(prompt.proposal_id),
            tokenizer: prompt.tokenizer,
            budget: opened.session.budget,
            tokens: prompt.tokens(opened.session.tokenizer),
            backend_tokens: prompt.backend_tokens,
            text: prompt.text(),
            segments: prompt
                .segments
                .iter()
                .map(|s| SegmentOut {
                    kind: match s.kind {
                        // Numbered as the profile numbers candidates, like `proposal_id`.
                        SegmentKind::Proposal { id } => SegmentKind::Proposal {
                            id: CandidateId::nth(opened.number(id)),
                        },
                        kind => kind,
                    },
                    text: &s.text.text,
                    tokens: s.tokens,
                    allocated: s.allocated,
                    truncated: s.cut.is_some(),
                    cut: s.cut,
                    pieces: opened.pieces(&s.text),
                })
                .collect(),
        }
    }
}
