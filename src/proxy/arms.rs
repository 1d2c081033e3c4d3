//! What the A/B of `keyhole proxy --compose-share` keeps for each request: which prompt went
//! (the arm) and what became of its completion (the outcome), apart from how outcomes are
//! inferred ([`super::ab`]) so that the store can hold them without reading that rule.

use serde::{Deserialize, Serialize};

/// Which prompt went for a request keyhole could compose for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// keyhole's context, in the plugin's request.
    Keyhole,
    /// The plugin's request as it sent it.
    Plugin,
}

impl Arm {
    pub const ALL: [Arm; 2] = [Arm::Keyhole, Arm::Plugin];

    /// Its name in the store and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Keyhole => "keyhole",
            Arm::Plugin => "plugin",
        }
    }

    pub fn parse(name: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|arm| arm.name() == name)
    }
}

/// What became of a completion shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Accepted,
    Rejected,
    Unknown,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Accepted, Outcome::Rejected, Outcome::Unknown];

    /// Its name in the store and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
            Outcome::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// An outcome and the characters of the completion the person kept (0 unless accepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    pub outcome: Outcome,
    pub accepted_chars: usize,
}

impl Judged {
    /// `outcome`, with no characters kept.
    pub(super) fn of(outcome: Outcome) -> Judged {
        Judged {
            outcome,
            accepted_chars: 0,
        }
    }
}
