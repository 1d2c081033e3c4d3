//! `p`: the candidate pinned for the open repository, whose context `keyhole proxy --compose`
//! sends in place of the ranker's first ([`crate::pin`] keeps it in the data directory).

use super::*;

/// Pin the focused candidate, or unpin it where it is the pinned one.
pub(super) fn pin_focused(state: &mut State) -> Vec<Effect> {
    let (Some(index), Some(focused)) = (&state.index, state.focused_candidate()) else {
        return vec![];
    };
    let id = focused.id;
    if id.is_recorded() {
        state.status = "a recorded prompt cannot be pinned: pin one of keyhole's candidates".into();
        return vec![];
    }
    if id.needs_backend() {
        state.status = format!(
            "cand {} needs the backend to write first, too slow for keyhole proxy --compose: not pinned",
            state.shown_id(id)
        );
        return vec![];
    }
    let candidate = (state.pinned != Some(id)).then_some(id);
    vec![Effect::Pin {
        root: index.root.clone(),
        candidate,
    }]
}

/// The pin as written, or why it could not be.
pub(super) fn pinned_saved(state: &mut State, pinned: Result<Option<CandidateId>, JobError>) {
    match pinned {
        Ok(Some(id)) => {
            state.pinned = Some(id);
            state.status = format!(
                "pinned cand {} ({}) for this repository: keyhole proxy --compose sends its \
                 context · p on it again unpins",
                state.shown_id(id),
                id.label()
            );
        }
        Ok(None) => {
            state.pinned = None;
            state.status = "unpinned: keyhole proxy --compose sends the ranker's first".into();
        }
        Err(why) => state.status = format!("cannot pin: {why}"),
    }
}
