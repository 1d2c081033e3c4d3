//! The recorded-requests picker: the completions an editor plugin asked for through
//! `keyhole proxy`, newest first; choosing one opens its hole where the repository holds the
//! text it sent around the cursor (asking which place when several fit as well), with the
//! plugin's prompt as one more candidate beside keyhole's (and where `proxy --compose` sent
//! keyhole's prompt instead, that one too).

use super::*;
use crate::escape;
use crate::proxy::{Certainty, Exchange, Place};

/// What the picker lists and the recorded request whose hole is open.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// Every recorded completion request, newest first, as last read.
    pub exchanges: Vec<Exchange>,
    /// Records that could not be read (written by a later version, or by hand).
    pub unreadable: usize,
    /// Requests left out of the list: those that ask for no completion (context a plugin
    /// hands the server to keep) and those the proxy refused; `--recorded N` still opens one.
    pub hidden: usize,
    /// The request whose hole is open: its prompt is a candidate while the hole stays there.
    pub open: Option<Arc<OpenRecorded>>,
    /// The request to open once the repository is (`keyhole REPO --recorded N`).
    pub pending: Option<u64>,
}

/// A recorded request opened at the place its hole was found.
#[derive(Clone, Debug)]
pub struct OpenRecorded {
    pub exchange: Exchange,
    pub place: Place,
    /// The hole it opened, in the repository as read then.
    pub file: FileId,
    pub offset: usize,
}

impl OpenRecorded {
    /// Whether `hole` is this request's.
    pub fn at(&self, hole: &Hole) -> bool {
        (self.file, self.offset) == (hole.file, hole.offset)
    }
}

/// "12  14:03:07  curl  /infill  Cart.java:3:16", the picker's row for `exchange` (the place
/// once it is known: the picker lists before locating); "keyhole's:" before the answer where
/// `proxy --compose` sent keyhole's prompt in place of the plugin's.
pub fn recorded_row(exchange: &Exchange) -> String {
    let seconds = exchange.at as u64 % 86_400;
    let time = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    let answer = match exchange.status {
        400.. => format!("({} from the server)", exchange.status),
        _ => exchange
            .answered
            .text
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    let whose = match &exchange.composition {
        Some(composition) if composition.composed() => "keyhole's: ",
        _ => "",
    };
    format!(
        "{:>5}  {time}  {:<12.12}  {:<20.20}  {whose}{}",
        exchange.id,
        escape::controls(exchange.sender()),
        escape::controls(&exchange.endpoint),
        escape::controls(&crate::text::excerpt(answer.trim(), 40))
    )
}

/// Open the picker on the record as it is now (the driver reads it).
pub(super) fn open_picker(state: &mut State) -> Vec<Effect> {
    state.mode = Mode::Recorded { cursor: 0 };
    vec![Effect::ReadRecorded]
}

/// The record as read: newest first. A pending `--recorded N` is looked for in it.
pub(super) fn recorded_read(
    state: &mut State,
    mut exchanges: Vec<Exchange>,
    unreadable: usize,
) -> Vec<Effect> {
    exchanges.reverse();
    state.recorded.unreadable = unreadable;
    if let Some(id) = state.recorded.pending.take() {
        state.recorded.exchanges = exchanges;
        state.recorded.hidden = 0;
        return match state.recorded.exchanges.iter().position(|e| e.id == id) {
            Some(at) => choose(state, at),
            None => {
                cannot_open(state, id, "there is no such request (R lists them)");
                vec![]
            }
        };
    }
    let listed = |e: &Exchange| !e.refused && !e.sent.context_only();
    state.recorded.hidden = exchanges.iter().filter(|e| !listed(e)).count();
    state.recorded.exchanges = exchanges.into_iter().filter(listed).collect();
    if state.recorded.exchanges.is_empty() && matches!(state.mode, Mode::Recorded { .. }) {
        state.mode = Mode::Normal;
        state.status = "no recorded requests yet: point an editor plugin at keyhole proxy".into();
    }
    vec![]
}

/// Look for the hole of the request at `cursor` in the picker (the driver searches the
/// repository).
pub(super) fn choose(state: &mut State, cursor: usize) -> Vec<Effect> {
    state.mode = Mode::Normal;
    let (Some(index), Some(exchange)) = (&state.index, state.recorded.exchanges.get(cursor)) else {
        return vec![];
    };
    state.status = format!("looking for the hole of recorded request {}…", exchange.id);
    vec![Effect::LocateRecorded {
        index: index.clone(),
        exchange: Box::new(exchange.clone()),
    }]
}

/// Where the request's hole may be: one place opens, none says so, several equally sure ask.
pub(super) fn located(state: &mut State, exchange: Exchange, places: Vec<Place>) -> Vec<Effect> {
    let surest: Vec<Place> = match places.first() {
        Some(first) => places
            .iter()
            .filter(|p| p.certainty == first.certainty)
            .cloned()
            .collect(),
        None => {
            let why = "the text it sent before the cursor is in no file of this repository";
            cannot_open(state, exchange.id, why);
            return vec![];
        }
    };
    match <[Place; 1]>::try_from(surest) {
        Ok([place]) => open_place(state, exchange, place),
        Err(surest) => {
            state.status = format!(
                "recorded request {}: {} places fit as well ({}); which one?",
                exchange.id,
                surest.len(),
                surest[0].certainty.describe()
            );
            state.mode = Mode::RecordedPlace {
                cursor: 0,
                places: surest,
                exchange: exchange.id,
            };
            vec![]
        }
    }
}

/// Say why recorded request `id`'s hole cannot be opened, as a warning that stays until
/// dismissed (a status would be replaced at once by the hole opened meanwhile, which is not
/// the request's).
fn cannot_open(state: &mut State, id: u64, why: &str) {
    state.warning = Some(format!(
        "recorded request {id}: its hole is not opened: {why}"
    ));
}

/// Open `exchange`'s hole at `place`.
pub(super) fn open_place(state: &mut State, exchange: Exchange, place: Place) -> Vec<Effect> {
    state.mode = Mode::Normal;
    let Some(index) = &state.index else {
        return vec![];
    };
    let hole = match Hole::locate(index, &place.position()) {
        Ok(hole) => hole,
        Err(e) => {
            cannot_open(state, exchange.id, &e.to_string());
            return vec![];
        }
    };
    let sure = match place.certainty {
        Certainty::Exact => "sure".to_string(),
        Certainty::BeforeOnly => "the file changed after the cursor since".to_string(),
        nearest @ Certainty::Nearest { .. } => nearest.describe(),
    };
    let id = exchange.id;
    let sender = exchange.sender().to_string();
    let prompts = match exchange.composition.as_ref().is_some_and(|c| c.composed()) {
        true => {
            "its prompt and the one keyhole sent in its place are the first candidates (D diffs them)"
        }
        false => "its prompt is the first candidate",
    };
    state.recorded.open = Some(Arc::new(OpenRecorded {
        exchange,
        file: hole.file,
        offset: hole.offset,
        place: place.clone(),
    }));
    state.focus = Pane::Candidates;
    let effects = set_hole(state, hole);
    state.status = format!(
        "recorded request {id} from {sender} at {} ({sure}) · {prompts}",
        place.position()
    );
    effects
}

/// Rows the picker moves by on PageUp/PageDown.
pub(super) const RECORDED_PAGE: isize = 10;

/// A picker command: move, choose, or close.
pub(super) fn picker_command(state: &mut State, command: Command) -> Vec<Effect> {
    use Command::*;
    match (state.mode.clone(), command) {
        (Mode::Recorded { cursor }, Up | Down | PageUp | PageDown | Top | Bottom) => {
            let rows = state.recorded.exchanges.len();
            let cursor = clamp_add(cursor, step(command, RECORDED_PAGE), rows);
            state.mode = Mode::Recorded { cursor };
            vec![]
        }
        (Mode::Recorded { cursor }, Confirm) => choose(state, cursor),
        (
            Mode::RecordedPlace {
                cursor,
                places,
                exchange,
            },
            Up | Down | PageUp | PageDown | Top | Bottom,
        ) => {
            let cursor = clamp_add(cursor, step(command, RECORDED_PAGE), places.len());
            state.mode = Mode::RecordedPlace {
                cursor,
                places,
                exchange,
            };
            vec![]
        }
        (
            Mode::RecordedPlace {
                cursor,
                places,
                exchange,
            },
            Confirm,
        ) => {
            let recorded = state.recorded.exchanges.iter().find(|e| e.id == exchange);
            match (recorded, places.get(cursor)) {
                (Some(recorded), Some(place)) => open_place(state, recorded.clone(), place.clone()),
                _ => vec![],
            }
        }
        (Mode::Recorded { .. } | Mode::RecordedPlace { .. }, Cancel) => {
            state.mode = Mode::Normal;
            vec![]
        }
        _ => vec![],
    }
}
