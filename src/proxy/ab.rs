//! The A/B of `keyhole proxy --compose --compose-share P`: which prompt each request that
//! keyhole could compose for got ([`Arm`], drawn before composing), and whether the person kept
//! the completion it brought ([`Outcome`]), inferred from what the plugin sends next and from
//! the file on disk. The rule, in full (docs/proxy.md says it for people):
//!
//! A completion is read as its answer text with trailing whitespace trimmed; its *first line*
//! is that text up to the end of its first line that is not blank. The *hole* is where the
//! last [`locate::ANCHOR_LINES`] lines the request sent before the cursor (the cursor's line up to the
//! cursor included) end. A later request says where its own cursor is in the text it sends
//! around it (the two joined: the editor's buffer near the cursor); where that text holds the
//! hole's lines (the occurrence nearest before its cursor, else the first after), the text
//! after them is what is at the hole now, and the later request is evidence:
//!
//! - **kept**: what is at the hole starts with the completion's first line, and the cursor is
//!   not right at the end of the kept text or of its first line (a request there cannot tell an
//!   acceptance from a plugin's look-ahead: llama.vim asks for the next completion as if the
//!   one shown were accepted, before the person decides);
//! - **moved on without it**: what is at the hole does not start with the first line, and the
//!   cursor is not at the hole with only a start of the completion typed before it;
//! - otherwise none (the person is still at the hole, or typing the completion).
//!
//! The first evidence among the later requests decides, within [`WINDOW_REQUESTS`] requests
//! sent after the answer began to come that hold the hole's lines, and within [`WINDOW_SECS`]
//! seconds of it: kept is
//! **accepted**, moved on is **rejected**. With none, the file on disk decides where it is
//! read (`keyhole recorded stats --repo`): the hole's lines followed by the first line there is
//! accepted; else the outcome is **unknown**. An answer with no text is rejected (nothing was
//! shown to keep); a request the plugin cancelled, or that failed, is unknown (nothing shown).
//! Where the text after the cursor already started with the first line when the request was
//! made, keeping it cannot be seen: only rejected or unknown. Text the person typed themselves
//! exactly as the completion had it counts as accepted: the proxy cannot tell the two apart.

pub use super::arms::{Arm, Judged, Outcome};
use super::locate;
use super::record::Exchange;

/// The later requests holding a hole's lines that are read for its outcome.
pub const WINDOW_REQUESTS: usize = 12;
/// How long after a completion's answer began to come later requests are read for its outcome.
pub const WINDOW_SECS: f64 = 300.0;

/// What one later request says of a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evidence {
    /// The hole holds the completion's first line, and this many of its bytes.
    Kept(usize),
    MovedOn,
}

/// A completion shown at a hole, waiting for what follows to say whether it was kept.
#[derive(Clone, Debug)]
pub struct Awaiting {
    /// The recorded exchange's id.
    pub id: u64,
    /// The lines before the hole, as sent.
    anchor: String,
    /// The answer, trailing whitespace trimmed.
    completion: String,
    /// Bytes of `completion` up to the end of its first line that is not blank.
    first_line: usize,
    /// The text after the cursor already started with the first line.
    already_there: bool,
    /// When the answer began to come, seconds since the epoch.
    shown_at: f64,
    /// Later requests heard that held the hole's lines.
    heard: usize,
}

/// Where a recorded exchange stands for the A/B.
pub enum Standing {
    /// Decided as soon as it ended (nothing shown; an empty answer).
    Decided(Judged),
    Awaiting(Awaiting),
}

impl Awaiting {
    /// What `exchange` (recorded, in an arm) waits for, or its outcome where it needs no
    /// waiting.
    pub fn of(exchange: &Exchange) -> Standing {
        let shown = !exchange.cancelled
            && !exchange.refused
            && exchange.error.is_none()
            && exchange.status < 400;
        if !shown {
            return Standing::Decided(Judged::of(Outcome::Unknown));
        }
        let completion = exchange.answered.text.trim_end().to_string();
        if completion.is_empty() {
            return Standing::Decided(Judged::of(Outcome::Rejected));
        }
        let around = locate::around_cursor(&exchange.sent);
        let anchor = locate::anchor(&around.before).to_string();
        if anchor.trim().is_empty() {
            return Standing::Decided(Judged::of(Outcome::Unknown));
        }
        let first_line = first_line_end(&completion);
        let already_there = around.after.starts_with(&completion[..first_line]);
        Standing::Awaiting(Awaiting {
            id: exchange.id,
            anchor,
            completion,
            first_line,
            already_there,
            // The answer could be shown from its first byte: a request sent before that did
            // not see it.
            shown_at: exchange.at + exchange.first_byte_ms.unwrap_or(exchange.total_ms) / 1000.0,
            heard: 0,
        })
    }

    /// Hear a later request; its outcome where that decides it (or closes its window).
    pub fn hear(&mut self, later: &Exchange) -> Option<Judged> {
        if later.at - self.shown_at > WINDOW_SECS {
            return Some(Judged::of(Outcome::Unknown));
        }
        // Sent before the completion could be shown, or says nothing of a cursor.
        if later.at < self.shown_at || later.refused || later.sent.context_only() {
            return None;
        }
        let around = locate::around_cursor(&later.sent);
        let evidence = self.evidence(&around.before, around.after)?;
        self.heard += 1;
        match evidence {
            Some(Evidence::Kept(bytes)) => Some(self.accepted(bytes)),
            Some(Evidence::MovedOn) => Some(Judged::of(Outcome::Rejected)),
            None if self.heard >= WINDOW_REQUESTS => Some(Judged::of(Outcome::Unknown)),
            None => None,
        }
    }

    /// Whether the window has closed by `now` (seconds since the epoch).
    pub fn expired(&self, now: f64) -> bool {
        now - self.shown_at > WINDOW_SECS
    }

    /// The outcome the file's text on disk gives, where requests gave none: accepted where the
    /// hole's lines are followed by the first line.
    pub fn on_disk(&self, file: &str) -> Judged {
        let kept = file
            .match_indices(&self.anchor)
            .map(|(at, _)| common_prefix(&file[at + self.anchor.len()..], &self.completion))
            .max()
            .unwrap_or(0);
        match kept >= self.first_line && !self.already_there {
            true => self.accepted(kept),
            false => Judged::of(Outcome::Unknown),
        }
    }

    fn accepted(&self, bytes: usize) -> Judged {
        Judged {
            outcome: Outcome::Accepted,
            accepted_chars: self.completion[..bytes].chars().count(),
        }
    }

    /// What a request that sent `before` and `after` its cursor says: `None` where its text
    /// does not hold the hole's lines, `Some(None)` where it does but says nothing yet.
    fn evidence(&self, before: &str, after: &str) -> Option<Option<Evidence>> {
        let text = format!("{before}{after}");
        let cursor = before.len();
        let ends = text
            .match_indices(&self.anchor)
            .map(|(at, _)| at + self.anchor.len());
        let (mut before_cursor, mut after_cursor) = (None, None);
        for end in ends {
            match end <= cursor {
                true => before_cursor = Some(end),
                false => after_cursor = after_cursor.or(Some(end)),
            }
        }
        let hole = before_cursor.or(after_cursor)?;
        let kept = common_prefix(&text[hole..], &self.completion);
        let typed = text.get(hole..cursor);
        if kept >= self.first_line {
            if self.already_there {
                return Some(None);
            }
            let at_its_end = cursor == hole + kept || cursor == hole + self.first_line;
            return Some((!at_its_end).then_some(Evidence::Kept(kept)));
        }
        let typing = typed.is_some_and(|typed| self.completion.starts_with(typed));
        Some((!typing).then_some(Evidence::MovedOn))
    }
}

/// The end of `completion`'s first line that is not blank (trailing whitespace left out).
fn first_line_end(completion: &str) -> usize {
    let start = completion.len() - completion.trim_start().len();
    let end = completion[start..]
        .find('\n')
        .map_or(completion.len(), |n| start + n);
    completion[..end].trim_end().len()
}

/// The bytes `a` and `b` start with alike, ending on a character.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or_else(|| a.len().min(b.len()), |((at, _), _)| at)
}

/// The outcomes the record store lacks, inferred from the exchanges recorded after each
/// (`exchanges` is the store, oldest first) and from the hole's file as `disk` reads it now
/// (none where it cannot): for each exchange in an arm not judged yet whose window has closed
/// by `now` or that the requests or the file decide, and each unknown one the file now shows
/// accepted. Each (id, outcome) newly found.
pub fn judge_recorded(
    exchanges: &[Exchange],
    now: f64,
    disk: impl Fn(&Exchange) -> Option<String>,
) -> Vec<(u64, Judged)> {
    let mut found = Vec::new();
    for (i, exchange) in exchanges.iter().enumerate() {
        let in_arm = exchange.composition.as_ref().and_then(|c| c.arm).is_some();
        let open = exchange
            .judged
            .is_none_or(|j| j.outcome == Outcome::Unknown);
        if !in_arm || !open {
            continue;
        }
        let mut awaiting = match Awaiting::of(exchange) {
            Standing::Decided(judged) => {
                if exchange.judged != Some(judged) {
                    found.push((exchange.id, judged));
                }
                continue;
            }
            Standing::Awaiting(awaiting) => awaiting,
        };
        // An unknown one was heard out already (by the proxy, or an earlier count).
        let heard = match exchange.judged {
            Some(judged) => Some(judged),
            None => exchanges[i + 1..]
                .iter()
                .find_map(|later| awaiting.hear(later)),
        };
        let on_disk = disk(exchange).map(|file| awaiting.on_disk(&file));
        let judged = match (heard, on_disk) {
            (Some(judged), _) if judged.outcome != Outcome::Unknown => judged,
            (_, Some(judged)) if judged.outcome == Outcome::Accepted => judged,
            (Some(judged), _) => judged,
            (None, _) if awaiting.expired(now) => Judged::of(Outcome::Unknown),
            (None, _) => continue,
        };
        if exchange.judged != Some(judged) {
            found.push((exchange.id, judged));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Answered, Composition, Sent};

    const FILE: &str =
        "class Cart {\n    int total() {\n        int sum = 0;\n        return sum;\n    }\n}\n";

    /// The text before and after a cursor `at` bytes into `file`, as each plugin sends it:
    /// llama.vim's `/infill` (the cursor's line apart as the prompt), Continue's prompt and
    /// suffix (`/v1/completions`, Ollama's `/api/generate`), Twinny's Qwen template.
    fn shapes(file: &str, at: usize) -> [Sent; 3] {
        let (before, after) = file.split_at(at);
        let line = before.rfind('\n').map_or(0, |n| n + 1);
        [
            Sent {
                prefix: Some(before[..line].into()),
                prompt: Some(before[line..].into()),
                suffix: Some(after.into()),
                ..Sent::default()
            },
            Sent {
                prompt: Some(before.into()),
                suffix: Some(after.into()),
                ..Sent::default()
            },
            Sent {
                prompt: Some(format!(
                    "<|fim_prefix|>{before}<|fim_suffix|>{after}<|fim_middle|>"
                )),
                ..Sent::default()
            },
        ]
    }

    /// An exchange in keyhole's arm that sent `sent` at second `at` and got `answer`.
    fn shown(id: u64, sent: Sent, at: f64, answer: &str) -> Exchange {
        Exchange {
            id,
            at,
            status: 200,
            sent,
            answered: Answered {
                text: answer.into(),
                ..Answered::default()
            },
            total_ms: 100.0,
            composition: Some(Composition {
                arm: Some(Arm::Keyhole),
                ..Composition::default()
            }),
            ..Exchange::default()
        }
    }

    /// The file with `text` put at the hole (after `        return `), and its cursor at
    /// `cursor` bytes after the hole.
    fn edited(text: &str) -> String {
        FILE.replacen("return sum;", &format!("return {text}"), 1)
    }

    fn hole() -> usize {
        FILE.find("return ").unwrap() + "return ".len()
    }

    /// The outcome of the first exchange given the later requests `later` (each the file and
    /// its cursor, sent in shape `shape`), one second apart, and the file on disk.
    fn outcome(
        shape: usize,
        answer: &str,
        later: &[(String, usize)],
        disk: Option<&str>,
    ) -> Judged {
        let mut exchanges = vec![shown(1, shapes(FILE, hole())[shape].clone(), 0.0, answer)];
        for (i, (file, cursor)) in later.iter().enumerate() {
            let sent = shapes(file, *cursor)[shape].clone();
            exchanges.push(shown(i as u64 + 2, sent, 1.0 + i as f64, "x"));
        }
        let judged = judge_recorded(&exchanges, 1e9, |_| disk.map(str::to_string));
        judged
            .iter()
            .find(|(id, _)| *id == 1)
            .map(|(_, judged)| *judged)
            .unwrap_or(exchanges[0].judged.unwrap_or(Judged::of(Outcome::Unknown)))
    }

    #[test]
    fn a_completion_the_next_requests_hold_before_the_cursor_is_accepted_in_every_shape() {
        let kept = edited("total();\n        ");
        let cursor = hole() + "total();\n        ".len();
        for shape in 0..3 {
            let judged = outcome(shape, "total();\n", &[(kept.clone(), cursor)], None);
            assert_eq!(
                judged,
                Judged {
                    outcome: Outcome::Accepted,
                    accepted_chars: "total();".len()
                },
                "shape {shape}"
            );
        }
    }

    #[test]
    fn a_look_ahead_at_the_completions_end_is_no_evidence_and_moving_on_without_it_rejects() {
        // llama.vim asks at once for the next completion as if the one shown were kept: its
        // cursor is right at the completion's end. Then the person writes something else.
        let look_ahead = edited("total();");
        let at_end = hole() + "total();".len();
        let other = edited("sum + 1;\n");
        let past = hole() + "sum + 1;\n".len();
        for shape in 0..3 {
            let ahead = (look_ahead.clone(), at_end);
            assert_eq!(
                outcome(shape, "total();", std::slice::from_ref(&ahead), None).outcome,
                Outcome::Unknown,
                "shape {shape}"
            );
            let judged = outcome(shape, "total();", &[ahead, (other.clone(), past)], None);
            assert_eq!(judged, Judged::of(Outcome::Rejected), "shape {shape}");
        }
    }

    #[test]
    fn typing_the_completion_is_no_evidence_and_moving_up_from_the_hole_rejects() {
        let typing = edited("tot");
        let moved_up = FILE.find("int sum").unwrap();
        for shape in 0..3 {
            let at_hole = [(typing.clone(), hole() + 3), (FILE.to_string(), hole())];
            assert_eq!(
                outcome(shape, "total();", &at_hole, None).outcome,
                Outcome::Unknown,
                "shape {shape}"
            );
            let judged = outcome(shape, "total();", &[(FILE.to_string(), moved_up)], None);
            assert_eq!(judged.outcome, Outcome::Rejected, "shape {shape}");
        }
    }

    #[test]
    fn the_file_on_disk_decides_what_the_requests_left_unknown_and_only_for_acceptance() {
        let kept = edited("total(); // kept");
        assert_eq!(
            outcome(0, "total();\n  ", &[], Some(&kept)),
            Judged {
                outcome: Outcome::Accepted,
                accepted_chars: 8
            }
        );
        assert_eq!(
            outcome(0, "total();", &[], Some(FILE)).outcome,
            Outcome::Unknown
        );
        // Only the first line: kept where the first line is, however the rest differs.
        let first = edited("total();\n        return 0;");
        assert_eq!(
            outcome(1, "total();\n        log(x);", &[], Some(&first)).outcome,
            Outcome::Accepted
        );
    }

    #[test]
    fn nothing_shown_is_unknown_an_empty_answer_rejected_and_a_later_window_ignored() {
        let sent = shapes(FILE, hole())[0].clone();
        let cancelled = Exchange {
            cancelled: true,
            ..shown(1, sent.clone(), 0.0, "total();")
        };
        let empty = shown(2, sent.clone(), 0.0, " \n");
        let kept = edited("total();\n");
        let late = shown(
            3,
            shapes(&kept, hole() + 9)[0].clone(),
            WINDOW_SECS + 10.0,
            "x",
        );
        let first = shown(4, sent, 0.0, "total();");
        let exchanges = [cancelled, empty, first, late];
        let judged = judge_recorded(&exchanges, 1e9, |_| None);
        let of = |id| judged.iter().find(|(i, _)| *i == id).unwrap().1.outcome;
        assert_eq!(of(1), Outcome::Unknown);
        assert_eq!(of(2), Outcome::Rejected);
        assert_eq!(of(4), Outcome::Unknown, "past the window");
        // Still inside its window now: not judged yet.
        assert!(judge_recorded(&exchanges[2..3], 1.0, |_| None).is_empty());
    }

    #[test]
    fn a_completion_the_text_after_the_cursor_already_held_cannot_be_seen_kept() {
        // The model repeated what follows the cursor: the file holds it whether kept or not.
        let later = (FILE.to_string(), FILE.find("    }").unwrap());
        assert_eq!(
            outcome(0, "sum;", &[later], Some(FILE)).outcome,
            Outcome::Unknown
        );
    }
}
