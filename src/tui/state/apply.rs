//! Writing a completion into the file: a preview of the changed line and a question first,
//! the new text in the source pane after, and undo, write by write, last first.

use super::*;

/// One replacement in a file on disk, made only while the file is the content hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEdit {
    pub path: PathBuf,
    /// blake3 of the content the edit is meant for; a file changed since is left alone.
    pub hash: [u8; 32],
    pub offset: usize,
    /// Bytes replaced at `offset`.
    pub replace: usize,
    pub text: String,
}

/// A completion written into a file, and the edit that takes it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub file: FileId,
    pub undo: FileEdit,
}

/// The hole's line as it is and as the focused completion would make it: (1-based line,
/// path, before, after).
pub fn apply_preview(state: &State) -> Option<(usize, String, String, String)> {
    let (index, view, done) = (
        state.index.as_ref()?,
        state.view.as_ref()?,
        focused_card(state)?,
    );
    let hole = &view.hole;
    let file = &index.files[hole.file];
    let before = file.line_text(hole.line).to_string();
    let at = crate::text::byte_of_char(&before, hole.column);
    let replaced = hole.target.as_ref().map_or(0, String::len);
    let after = format!("{}{}{}", &before[..at], done.text, &before[at + replaced..]);
    Some((hole.line + 1, file.path.clone(), before, after))
}

/// `a`: show what would change and ask; the bundled sample is never changed.
pub(super) fn ask_apply(state: &mut State) -> Vec<Effect> {
    if state.shared_sample {
        state.status = "apply leaves the bundled sample as it is (every run and the screenshots \
                        share it): open a repository of yours to write into it"
            .into();
        return vec![];
    }
    if state.phase == Phase::Rereading {
        state.status = "reading the repository again after the last write; a moment".into();
        return vec![];
    }
    if apply_preview(state).is_some() {
        state.mode = Mode::ConfirmApply;
        state.status = "write this completion into the file? y writes, n keeps it".into();
    }
    vec![]
}

/// `y`: write the focused completion over the hole's target.
pub(super) fn apply(state: &mut State) -> Vec<Effect> {
    let (Some(index), Some(view), Some(done)) = (&state.index, &state.view, focused_card(state))
    else {
        return vec![];
    };
    let file = &index.files[view.hole.file];
    let edit = FileEdit {
        path: index.root.join(&file.path),
        hash: file.hash,
        offset: view.hole.offset,
        replace: view.hole.target.as_ref().map_or(0, String::len),
        text: done.text.clone(),
    };
    let status = format!("writing the completion into {}…", file.path);
    let mut effects = vec![Effect::Apply {
        file: view.hole.file,
        edit,
        original: view.hole.target.clone().unwrap_or_default(),
    }];
    // Writing a completion in is choosing it: it teaches the rankers as a pick does.
    let already = state.cards.get(state.card_cursor).is_some_and(|c| c.picked);
    if !already {
        effects.extend(pick(state, state.card_cursor));
    }
    state.status = status;
    effects
}

/// The write is done (or the undo of it, when `applied` is none): the source pane shows the
/// file's `text` on disk now, until the repository is read again.
pub(super) fn written(
    state: &mut State,
    file: FileId,
    result: Result<(String, Option<Applied>), JobError>,
) -> Vec<Effect> {
    let written_now;
    let applied = match result {
        Ok((text, applied)) => {
            written_now = applied.is_some();
            state.on_disk = Some((file, text));
            applied
        }
        Err(e) => {
            state.status = e.to_string();
            return vec![];
        }
    };
    let path = state
        .index
        .as_ref()
        .map_or_else(String::new, |i| i.files[file].path.clone());
    match applied {
        Some(applied) => state.applied.push(applied),
        None => drop(state.applied.pop()),
    }
    let left = state.applied.len();
    state.status = match (written_now, left) {
        (true, 1) => format!("wrote the completion into {path} · u undoes it"),
        (true, n) => format!("wrote the completion into {path} · u undoes it ({n} writes to undo)"),
        (false, 0) => format!("undone: {path} is as it was"),
        (false, n) => format!("undone in {path} · {n} more to undo"),
    };
    let mut effects = Vec::new();
    if state.file == file {
        let cursor = state.cursor;
        effects = show_file(state, file);
        state.cursor = cursor;
    }
    effects.extend(read_again(state));
    effects
}

/// The candidates are built from the index: read the repository again (its cache makes that
/// quick), keeping the backend, and come back to the hole.
pub(super) fn read_again(state: &mut State) -> Vec<Effect> {
    // Whatever changed on disk so far, this reading reads.
    state.changed_on_disk.clear();
    let mut effects = Vec::new();
    if let (Some(index), Some(view)) = (&state.index, &state.view) {
        state.phase = Phase::Rereading;
        effects.push(Effect::Index {
            root: index.root.clone(),
            position: Some(view.hole.display(index)),
            backend: match &state.backend {
                Some(backend) => IndexBackend::Keep(Arc::clone(backend)),
                None => IndexBackend::Build(Box::new(state.setup.entry().clone())),
            },
        });
    }
    effects
}

/// The writes to undo, their files numbered as in `new`, the index read again after `old`
/// (files added or removed renumber the rest); a write into a file gone since is dropped.
pub(super) fn carry_applied(applied: &mut Vec<Applied>, old: &RepoIndex, new: &RepoIndex) {
    applied.retain_mut(|a| match new.file_id(&old.files[a.file].path) {
        Some(file) => {
            a.file = file;
            true
        }
        None => false,
    });
}

/// `u`: put the file back as it was before the last apply.
pub(super) fn undo(state: &mut State) -> Vec<Effect> {
    if state.phase == Phase::Rereading {
        state.status = "reading the repository again after the write; u works in a moment".into();
        return vec![];
    }
    match state.applied.last() {
        Some(applied) => vec![Effect::Undo {
            file: applied.file,
            edit: applied.undo.clone(),
        }],
        None => {
            state.status = "nothing to undo".into();
            vec![]
        }
    }
}
