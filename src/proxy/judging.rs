//! The proxy judging the completions of the A/B as it serves ([`super::ab`]'s rule, live):
//! each exchange it records is heard by the completions still waiting for their outcome, then,
//! in an arm, waits itself.

use std::sync::Arc;

use super::ab::{Arm, Awaiting, Judged, Outcome, Standing};
use super::{ContextSource, Exchange, RecordStore};

/// The most completions a proxy waits on at once; past it the oldest is judged unknown.
const MAX_AWAITING: usize = 512;

/// What a completion of keyhole's arm teaches once judged: the candidate whose context was
/// sent, and the hole.
type Lesson = (u16, String);

/// A proxy's completions in an arm still waiting for their outcome: each exchange the proxy
/// records is heard by them, then waits itself. Decided outcomes go to the store, and those of
/// keyhole's arm teach the source's ranker, off the proxy's async threads.
pub(super) struct Judging {
    /// Each awaiting completion, with what it teaches where it was keyhole's.
    awaiting: std::sync::Mutex<Vec<(Awaiting, Option<Lesson>)>>,
    source: Arc<dyn ContextSource>,
}

impl Judging {
    pub(super) fn new(source: Arc<dyn ContextSource>) -> Judging {
        Judging {
            awaiting: std::sync::Mutex::default(),
            source,
        }
    }

    /// `exchange` was recorded in `store` (its id set): what it says of the completions
    /// waiting, and, in an arm, it waits too.
    pub(super) fn heard(&self, exchange: &Exchange, store: &RecordStore) {
        let mut decided = Vec::new();
        let mut awaiting = self.awaiting.lock().unwrap_or_else(|e| e.into_inner());
        awaiting.retain_mut(|(waiting, teaches)| match waiting.hear(exchange) {
            Some(judged) => {
                decided.push((waiting.id, judged, teaches.take()));
                false
            }
            None => true,
        });
        if let Some(composition) = &exchange.composition
            && let Some(arm) = composition.arm
        {
            let teaches = match (arm, composition.candidate, &composition.hole) {
                (Arm::Keyhole, Some(candidate), Some(hole)) => Some((candidate, hole.clone())),
                _ => None,
            };
            match Awaiting::of(exchange) {
                Standing::Decided(judged) => decided.push((exchange.id, judged, teaches)),
                Standing::Awaiting(waiting) => awaiting.push((waiting, teaches)),
            }
        }
        if awaiting.len() > MAX_AWAITING {
            let (oldest, _) = awaiting.remove(0);
            decided.push((oldest.id, Judged::of(Outcome::Unknown), None));
        }
        drop(awaiting);
        for (id, judged, teaches) in decided {
            if let Err(err) = store.set_judged(id, judged) {
                crate::escape::warn(&format!("proxy: cannot keep an outcome: {err}"));
            }
            let accepted = match judged.outcome {
                Outcome::Accepted => true,
                Outcome::Rejected => false,
                Outcome::Unknown => continue,
            };
            if let Some((candidate, hole)) = teaches {
                let source = self.source.clone();
                std::thread::spawn(move || match source.learn(candidate, &hole, accepted) {
                    Ok(said) => tracing::info!(%said, "proxy: learnt from an outcome"),
                    Err(why) => {
                        crate::escape::warn(&format!("proxy: cannot learn from an outcome: {why}"))
                    }
                });
            }
        }
    }
}
