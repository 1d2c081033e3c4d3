//! Files another program changed on disk while the UI runs (the driver's watch reports them):
//! the repository is read again and the hole's candidates built anew at once, unless the person
//! is in the middle of something new candidates would overturn (a prompt being edited, a write
//! being asked about, completions running), which the reading waits for, saying so.

use super::*;

/// Files of `index` whose content is not the index's now, as the watch on it found them; none
/// where they were changed back.
pub(super) fn changed_on_disk(
    state: &mut State,
    index: &Arc<RepoIndex>,
    paths: Vec<String>,
) -> Vec<Effect> {
    // A report on an index already read again (by a write of the UI's own, or an editor's)
    // is old: the watch on the new one reports what that reading missed.
    let shown = state.index.as_ref().is_some_and(|i| Arc::ptr_eq(i, index));
    if !shown || state.phase != Phase::Ready {
        return vec![];
    }
    state.changed_on_disk = paths;
    if let Some(until) = waiting_for(state).filter(|_| !state.changed_on_disk.is_empty()) {
        state.status = format!(
            "{} changed on disk: the candidates are built again once {until}",
            changed_files(state)
        );
    }
    // `update` reads the repository again as soon as nothing waits.
    vec![]
}

/// What the person is doing that a new reading of the repository would overturn, in words;
/// none when it can be read now.
fn waiting_for(state: &State) -> Option<&'static str> {
    match state.mode {
        Mode::Edit => Some("you leave the prompt editor (what you typed is kept)"),
        Mode::ConfirmApply => Some("you answer"),
        _ if state.running() => Some("the completions are in"),
        _ => None,
    }
}

/// Read the repository again for the files changed on disk, once nothing waits.
pub(super) fn read_changes(state: &mut State) -> Vec<Effect> {
    if state.changed_on_disk.is_empty()
        || state.phase != Phase::Ready
        || waiting_for(state).is_some()
    {
        return vec![];
    }
    state.status = format!(
        "{} changed on disk: reading the repository again…",
        changed_files(state)
    );
    read_again(state)
}

/// The files changed on disk, in words: the hole's named first.
fn changed_files(state: &State) -> String {
    let paths = &state.changed_on_disk;
    let hole_file = (state.index.as_ref())
        .zip(state.view.as_ref())
        .map(|(index, view)| index.files[view.hole.file].path.as_str());
    let first = match hole_file.filter(|f| paths.iter().any(|p| p == f)) {
        Some(file) => format!("the hole's file {file}"),
        None => paths.first().cloned().unwrap_or_default(),
    };
    match paths.len() {
        0 | 1 => first,
        2 => format!("{first} and 1 more file"),
        n => format!("{first} and {} more files", n - 1),
    }
}
