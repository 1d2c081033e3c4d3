//! The prompt an editor plugin sent for a hole, recorded by `keyhole proxy`, as one more row
//! beside keyhole's candidates: completed by the same backend and scored the same way, its
//! provenance matched against the repository (the plugin's framing has none).

use crate::candidate::CandidateId;
use crate::compose::{Assembly, Prompt, Segment, SegmentKind};
use crate::proxy::{self, Certainty, Exchange, Place};

use super::{Availability, CandidateRow, Session};

impl Session {
    /// The prompt `exchange` sent, as the row "as sent by CLIENT", its code matched at `place`
    /// (where its hole was found) first. It is sent as the plugin sent it: never cut to the
    /// budget nor composed again, with the plugin's suffix where it sent one. A chat request
    /// does not apply: keyhole's backends continue code, they do not hold conversations.
    pub fn as_sent(&self, exchange: &Exchange, place: Option<&Place>) -> CandidateRow {
        let sent = proxy::sent_prompt(&self.index, &exchange.sent, place);
        let availability = match &sent {
            Some(_) => Availability::Applicable,
            None => Availability::NotApplicable(Some(format!(
                "{} sent a chat, not code to continue",
                exchange.sender()
            ))),
        };
        let sent = sent.unwrap_or_default();
        let tokens = self.tokenizer.count(&sent.prompt.text);
        let prompt = Prompt {
            segments: vec![Segment {
                kind: SegmentKind::Proposal {
                    id: CandidateId::AS_SENT,
                },
                text: sent.prompt,
                tokens,
                // The plugin chose its length: nothing was allotted, nothing cut.
                allocated: tokens,
                cut: None,
            }],
            budget: self.budget,
            tokenizer: self.tokenizer.name(),
            proposal_id: CandidateId::AS_SENT,
            backend_tokens: None,
            assembly: Assembly::Capped,
            model_room: None,
            suffix: sent.suffix,
        };
        // How sure the place is stays in view beside the row.
        let found = match place.map(|p| p.certainty) {
            Some(Certainty::Exact) => ", found exactly".to_string(),
            Some(Certainty::BeforeOnly) => ", found; the file changed after the cursor".to_string(),
            Some(Certainty::Nearest { matched, sent }) => {
                format!(", found nearest ({matched} of {sent} lines around it match)")
            }
            None => String::new(),
        };
        CandidateRow {
            label: format!("as sent by {}{found}", exchange.sender()),
            ..CandidateRow::new(CandidateId::AS_SENT, availability, None, prompt)
        }
    }
}
