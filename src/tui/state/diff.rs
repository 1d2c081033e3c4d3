//! Two prompts side by side as a line diff: two selected candidates, or an edited prompt
//! against the one it was edited from.

use similar::{ChangeTag, TextDiff};

use super::*;

/// A diff to show: what is compared, and its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptDiff {
    /// "cand 7 → cand 11".
    pub title: String,
    pub lines: Vec<DiffLine>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffLine {
    /// Only in the first prompt.
    Removed(String),
    /// Only in the second.
    Added(String),
    Same(String),
    /// A run of this many equal lines, left out.
    SameRun(usize),
}

/// Equal lines kept around each change; longer equal runs shrink to a count.
const CONTEXT: usize = 2;

impl PromptDiff {
    pub fn new(title: String, old: &str, new: &str) -> PromptDiff {
        let diff = TextDiff::from_lines(old, new);
        let changes: Vec<(ChangeTag, String)> = diff
            .iter_all_changes()
            .map(|c| (c.tag(), c.value().trim_end_matches('\n').to_string()))
            .collect();
        let changed = |i: usize| changes.get(i).is_some_and(|(t, _)| *t != ChangeTag::Equal);
        let near_change = |i: usize| (i.saturating_sub(CONTEXT)..=i + CONTEXT).any(changed);
        let mut lines = Vec::new();
        let mut skipped = 0;
        for (i, (tag, text)) in changes.iter().enumerate() {
            if *tag == ChangeTag::Equal && !near_change(i) {
                skipped += 1;
                continue;
            }
            if skipped > 0 {
                lines.push(DiffLine::SameRun(skipped));
                skipped = 0;
            }
            lines.push(match tag {
                ChangeTag::Delete => DiffLine::Removed(text.clone()),
                ChangeTag::Insert => DiffLine::Added(text.clone()),
                ChangeTag::Equal => DiffLine::Same(text.clone()),
            });
        }
        // Nothing but equal lines: the prompts are the same, and there is nothing to show.
        if skipped > 0 && !lines.is_empty() {
            lines.push(DiffLine::SameRun(skipped));
        }
        PromptDiff { title, lines }
    }
}

/// `D`: in the completions pane, an edited card's prompt against the one it was edited from;
/// elsewhere the focused candidate's kept edit against its composed prompt, or the two
/// selected candidates' prompts (one selected: it against the focused one), or with nothing
/// selected at a recorded request `proxy --compose` composed, the plugin's prompt against
/// keyhole's.
pub(super) fn diff_prompts(state: &mut State) -> Vec<Effect> {
    let edited = state
        .cards
        .get(state.card_cursor)
        .filter(|_| state.focus == Pane::Completions)
        .and_then(|card| Some((card.candidate, card.edited.clone()?)));
    let diff = match edited {
        Some((id, text)) => state.candidate(id).map(|original| {
            let title = format!("cand {} → edited", state.shown_number(id));
            PromptDiff::new(title, &original.prompt.text(), &text)
        }),
        None => kept_edit(state)
            .or_else(|| two_candidates(state))
            .or_else(|| recorded_pair(state)),
    };
    match diff {
        Some(diff) => {
            state.diff = Some(diff);
            state.mode = Mode::Diff { scroll: 0 };
        }
        None => {
            state.status = "select two candidates (space) to compare their prompts, or focus \
                            an edited card"
                .into();
        }
    }
    vec![]
}

/// The focused candidate's kept edit against its composed prompt, when nothing is selected.
fn kept_edit(state: &State) -> Option<PromptDiff> {
    let c = state
        .focused_candidate()
        .filter(|_| state.selected.is_empty())?;
    let edit = state.kept_edit(c.id)?;
    let title = format!("cand {} → edited", state.shown_number(c.id));
    Some(PromptDiff::new(title, &c.prompt.text(), edit))
}

/// The selected two, or the selected one and the focused one, in rank order.
fn two_candidates(state: &State) -> Option<PromptDiff> {
    let mut ids: Vec<CandidateId> = state.selected.iter().copied().collect();
    if ids.len() == 1 {
        let focused = state.focused_candidate()?.id;
        if focused != ids[0] {
            ids.push(focused);
        }
    }
    let [a, b] = ids[..] else {
        return None;
    };
    candidates_diff(state, a, b)
}

/// The plugin's prompt against the one keyhole sent in its place, where both are candidates
/// and nothing is selected.
fn recorded_pair(state: &State) -> Option<PromptDiff> {
    if !state.selected.is_empty() {
        return None;
    }
    candidates_diff(state, CandidateId::AS_SENT, CandidateId::SENT_BY_KEYHOLE)
}

/// Candidate `a`'s prompt against `b`'s.
fn candidates_diff(state: &State, a: CandidateId, b: CandidateId) -> Option<PromptDiff> {
    let (a, b) = (state.candidate(a)?, state.candidate(b)?);
    let title = format!(
        "cand {} → cand {}",
        state.shown_number(a.id),
        state.shown_number(b.id)
    );
    Some(PromptDiff::new(title, &a.prompt.text(), &b.prompt.text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_keeps_the_changes_with_a_little_context_and_counts_the_rest() {
        let old: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let diff = PromptDiff::new("a → b".into(), &old, &new);
        assert_eq!(
            diff.lines,
            [
                DiffLine::SameRun(7),
                DiffLine::Same("line 8".into()),
                DiffLine::Same("line 9".into()),
                DiffLine::Removed("line 10".into()),
                DiffLine::Added("line ten".into()),
                DiffLine::Same("line 11".into()),
                DiffLine::Same("line 12".into()),
                DiffLine::SameRun(8),
            ]
        );
        assert!(PromptDiff::new("same".into(), &old, &old).lines.is_empty());
    }
}
