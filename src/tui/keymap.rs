//! Keymaps as data: an embedded default table, the vim layer and the user's file, merged in that
//! order. The help overlay and the hint bar read the same table, so they cannot drift.

use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

use super::command::{Command, Pane};
use crate::config_file;

const DEFAULT: &str = include_str!("../../keymaps/default.toml");
const VIM: &str = include_str!("../../keymaps/vim.toml");
/// The user's overrides, in keyhole's config directory.
pub const USER_FILE: &str = "keymap.toml";

/// Which keys a mode reads: each mode has its own layer of bindings, and `any` holds the
/// keys every mode shares (quit, suspend) unless the mode binds them itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Any,
    #[default]
    Normal,
    /// One-line text fields: the candidate filter, search in the file, go to line. Keys no
    /// binding takes are typed into the field.
    Filter,
    /// The fuzzy file picker (typing goes into its query).
    Picker,
    /// Choosing the backend.
    Backends,
    /// Choosing a recorded request, or the place of its hole.
    Recorded,
    /// Editing a prompt (typing goes into the editor).
    Editor,
    /// A yes/no question (keys no binding takes answer no).
    Confirm,
    /// The help overlay.
    Help,
}

impl Layer {
    pub const ALL: [Layer; 9] = [
        Layer::Any,
        Layer::Normal,
        Layer::Filter,
        Layer::Picker,
        Layer::Backends,
        Layer::Recorded,
        Layer::Editor,
        Layer::Confirm,
        Layer::Help,
    ];

    /// How help names the layer.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Any => "everywhere",
            Layer::Normal => "all panes",
            Layer::Filter => "filter, search, go to line",
            Layer::Picker => "file picker",
            Layer::Backends => "backend picker",
            Layer::Recorded => "recorded-requests picker",
            Layer::Editor => "prompt editor",
            Layer::Confirm => "apply question",
            Layer::Help => "this help",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Binding {
    pub on: String,
    /// `on`, parsed once when the keymap is read (lookups run on every key press).
    key: KeyEvent,
    pub run: Command,
    pub desc: String,
    /// Shown in the hint bar (the help overlay shows every binding).
    pub hint: bool,
    /// The mode whose layer holds the binding (`normal` when left out).
    pub mode: Layer,
    /// In the normal layer, the pane the binding holds in (every pane when left out); it
    /// wins over a binding of the same key for every pane.
    pub pane: Option<Pane>,
}

/// What is wrong with a `[[bind]]` entry of keys.toml: one line naming its line and key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadBinding(String);

/// The keys a `[[bind]]` entry may have.
const FIELDS: [&str; 6] = ["on", "run", "desc", "hint", "mode", "pane"];

impl Binding {
    /// The binding `table` (at byte `at` of `text`) describes, or one line naming the line
    /// and key of what is wrong with it.
    fn parse(text: &str, at: usize, table: &toml::Table) -> Result<Binding, BadBinding> {
        let problem = |key: &str, message: &str| {
            let line = config_file::key_offset(text, at, key).unwrap_or(at);
            BadBinding(config_file::problem_line(text, line, Some(key), message))
        };
        if let Some(key) = table.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            let known = FIELDS.join(", ");
            return Err(problem(key, &format!("unknown field (known: {known})")));
        }
        fn field<T: serde::de::DeserializeOwned>(
            table: &toml::Table,
            key: &str,
            problem: &dyn Fn(&str, &str) -> BadBinding,
        ) -> Result<Option<T>, BadBinding> {
            table
                .get(key)
                .map(|v| {
                    v.clone()
                        .try_into::<T>()
                        .map_err(|e| problem(key, e.message()))
                })
                .transpose()
        }
        let required = |key: &str| problem(key, &format!("missing `{key}`"));
        let on: String = field(table, "on", &problem)?.ok_or_else(|| required("on"))?;
        let Some(key) = parse_key(&on) else {
            return Err(problem("on", &format!("unknown key '{on}'")));
        };
        Ok(Binding {
            on,
            key,
            run: field(table, "run", &problem)?.ok_or_else(|| required("run"))?,
            desc: field(table, "desc", &problem)?.unwrap_or_default(),
            hint: field(table, "hint", &problem)?.unwrap_or(false),
            mode: field(table, "mode", &problem)?.unwrap_or_default(),
            pane: field(table, "pane", &problem)?,
        })
    }

    fn same_place(&self, other: &Binding) -> bool {
        self.on == other.on && self.mode == other.mode && self.pane == other.pane
    }
}

#[derive(Debug, Deserialize)]
struct File {
    #[serde(default)]
    bind: Vec<toml::Spanned<toml::Table>>,
}

#[derive(Clone, Debug)]
pub struct Keymap {
    pub bindings: Vec<Binding>,
}

impl Keymap {
    /// Default + vim layers, then the user's file if there is one. Each bad entry is left out
    /// and reported (the rest of the file still applies), so a typo never locks the user out.
    pub fn load(config_dir: Option<&Path>) -> (Keymap, Vec<String>) {
        let mut map = Keymap::builtin();
        let Some(path) = config_dir
            .map(|d| d.join(USER_FILE))
            .filter(|p| p.is_file())
        else {
            return (map, Vec::new());
        };
        let problems = match std::fs::read_to_string(&path) {
            Ok(text) => map.layer(&text),
            Err(e) => vec![e.to_string()],
        };
        let named = problems
            .into_iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect();
        (map, named)
    }

    /// The built-in bindings with the text of a user's keymap file laid over them, or the
    /// lines that say what is wrong with it (its good entries are kept all the same).
    pub fn with_user_text(text: &str) -> (Keymap, Vec<String>) {
        let mut map = Keymap::builtin();
        let problems = map.layer(text);
        (map, problems)
    }

    pub fn builtin() -> Keymap {
        let mut map = Keymap { bindings: vec![] };
        for text in [DEFAULT, VIM] {
            let problems = map.layer(text);
            assert!(problems.is_empty(), "embedded keymaps parse: {problems:?}");
        }
        map
    }

    /// Add a layer: its bindings replace earlier ones on the same key, mode and pane. A
    /// binding that does not parse is left out and reported in one line naming the line and
    /// key; a file that is not TOML at all is one such line.
    fn layer(&mut self, text: &str) -> Vec<String> {
        let file: File = match toml::from_str(text) {
            Ok(file) => file,
            Err(e) => return vec![config_file::toml_error_line(text, &e)],
        };
        let mut problems = Vec::new();
        for entry in file.bind {
            match Binding::parse(text, entry.span().start, entry.get_ref()) {
                Ok(binding) => {
                    self.bindings.retain(|old| !old.same_place(&binding));
                    self.bindings.push(binding);
                }
                Err(problem) => problems.push(problem.to_string()),
            }
        }
        problems
    }

    /// The command `key` runs in `layer` with `pane` focused: the pane's own binding, else the
    /// layer's, else the one every mode shares.
    pub fn lookup(&self, layer: Layer, pane: Pane, key: KeyEvent) -> Option<Command> {
        let find = |mode: Layer, pane: Option<Pane>| {
            self.bindings
                .iter()
                .filter(|b| b.mode == mode && b.pane == pane)
                .find(|b| same_key(b.key, key))
                .map(|b| b.run)
        };
        find(layer, Some(pane))
            .or_else(|| find(layer, None))
            .or_else(|| find(Layer::Any, None))
    }

    /// The keys bound to `command` in `layer` (for `pane` only, or for every pane), joined for
    /// display ("j/down").
    pub fn keys_for(&self, layer: Layer, pane: Option<Pane>, command: Command) -> String {
        let keys: Vec<&str> = self
            .bindings
            .iter()
            .filter(|b| b.mode == layer && b.pane == pane && b.run == command)
            .map(|b| b.on.as_str())
            .collect();
        keys.join("/")
    }

    /// Every binding of `layer` for `pane` (`None`: for every pane), one entry per command in
    /// table order: (keys, description, hinted).
    pub fn entries(&self, layer: Layer, pane: Option<Pane>) -> Vec<(String, &str, bool)> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for b in self
            .bindings
            .iter()
            .filter(|b| b.mode == layer && b.pane == pane)
        {
            if !seen.contains(&b.run) {
                seen.push(b.run);
                let hinted = self
                    .bindings
                    .iter()
                    .any(|o| o.run == b.run && o.mode == layer && o.pane == pane && o.hint);
                out.push((self.keys_for(layer, pane, b.run), b.desc.as_str(), hinted));
            }
        }
        out
    }

    /// Every action of the normal mode with `pane` focused, with its keys and description: the
    /// pane's own first, then the shared ones (the command palette lists these).
    pub fn actions(&self, pane: Pane) -> Vec<(Command, String, &str)> {
        let mut out: Vec<(Command, String, &str)> = Vec::new();
        for (layer, scope) in [
            (Layer::Normal, Some(pane)),
            (Layer::Normal, None),
            (Layer::Any, None),
        ] {
            for b in self
                .bindings
                .iter()
                .filter(|b| b.mode == layer && b.pane == scope)
            {
                if !out.iter().any(|(run, _, _)| *run == b.run) {
                    out.push((b.run, self.keys_for(layer, scope, b.run), b.desc.as_str()));
                }
            }
        }
        out
    }

    /// Hint bar entries for `layer` with `pane` focused, most useful first: the pane's own
    /// hinted keys, then the layer's, then the shared ones.
    pub fn hints(&self, layer: Layer, pane: Pane) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = Vec::new();
        for (scope_layer, scope_pane) in [(layer, Some(pane)), (layer, None), (Layer::Any, None)] {
            for (keys, desc, hinted) in self.entries(scope_layer, scope_pane) {
                if hinted && !out.iter().any(|(_, d)| *d == desc) {
                    out.push((keys, desc));
                }
            }
        }
        out
    }
}

/// Shift is part of the character for printable keys, so it is ignored there; so it is for
/// BackTab, which terminals report with Shift held.
fn same_key(bound: KeyEvent, got: KeyEvent) -> bool {
    let strip = |m: KeyModifiers, c: KeyCode| match c {
        KeyCode::Char(_) | KeyCode::BackTab => m - KeyModifiers::SHIFT,
        _ => m,
    };
    bound.code == got.code && strip(bound.modifiers, bound.code) == strip(got.modifiers, got.code)
}

/// "q", "ctrl-c", "enter", "backtab", "pgdn", "space", "?" ...
pub fn parse_key(text: &str) -> Option<KeyEvent> {
    let (mods, name) = match text.rsplit_once('-').filter(|(_, n)| !n.is_empty()) {
        Some((m, n)) => (modifiers(m)?, n),
        None => (KeyModifiers::NONE, text),
    };
    let code = match name {
        "enter" => KeyCode::Enter,
        "esc" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "backtab" => KeyCode::BackTab,
        "backspace" => KeyCode::Backspace,
        "space" => KeyCode::Char(' '),
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "pgup" => KeyCode::PageUp,
        "pgdn" => KeyCode::PageDown,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        _ => {
            let mut chars = name.chars();
            let c = chars.next()?;
            if chars.next().is_some() {
                return None;
            }
            KeyCode::Char(c)
        }
    };
    Some(KeyEvent::new(code, mods))
}

fn modifiers(text: &str) -> Option<KeyModifiers> {
    text.split('-').try_fold(KeyModifiers::NONE, |acc, m| {
        Some(
            acc | match m {
                "ctrl" => KeyModifiers::CONTROL,
                "alt" => KeyModifiers::ALT,
                "shift" => KeyModifiers::SHIFT,
                _ => return None,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn builtin_parses_and_vim_layer_adds_keys() {
        let map = Keymap::builtin();
        let normal = |key| map.lookup(Layer::Normal, Pane::Candidates, key);
        assert_eq!(normal(press(KeyCode::Char('j'))), Some(Command::Down));
        assert_eq!(normal(press(KeyCode::Down)), Some(Command::Down));
        assert!(
            map.keys_for(Layer::Normal, None, Command::Help)
                .contains('?')
        );
        assert_eq!(map.keys_for(Layer::Normal, None, Command::CycleRanker), "o");
    }

    #[test]
    fn a_pane_binding_wins_there_and_every_mode_has_its_layer() {
        let map = Keymap::builtin();
        let slash = press(KeyCode::Char('/'));
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Source, slash),
            Some(Command::Search)
        );
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Prompt, slash),
            Some(Command::Search),
            "the prompt pane searches the prompt"
        );
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Completions, slash),
            Some(Command::Filter)
        );
        let home = press(KeyCode::Home);
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Source, home),
            Some(Command::LineStart)
        );
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Candidates, home),
            Some(Command::Top)
        );
        let enter = press(KeyCode::Enter);
        assert_eq!(
            map.lookup(Layer::Picker, Pane::Source, enter),
            Some(Command::Confirm)
        );
        let q = press(KeyCode::Char('q'));
        assert_eq!(
            map.lookup(Layer::Filter, Pane::Source, q),
            None,
            "typed into the field"
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for layer in Layer::ALL {
            assert_eq!(
                map.lookup(layer, Pane::Prompt, ctrl_c),
                Some(Command::Quit),
                "{layer:?}"
            );
        }
        let ctrl_s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert_eq!(
            map.lookup(Layer::Editor, Pane::Prompt, ctrl_s),
            Some(Command::Confirm)
        );
    }

    #[test]
    fn shift_tab_reaches_the_previous_pane_however_the_terminal_reports_it() {
        let map = Keymap::builtin();
        for modifiers in [KeyModifiers::NONE, KeyModifiers::SHIFT] {
            let key = KeyEvent::new(KeyCode::BackTab, modifiers);
            assert_eq!(
                map.lookup(Layer::Normal, Pane::Source, key),
                Some(Command::FocusPrev)
            );
        }
    }

    #[test]
    fn hints_put_the_focused_panes_keys_first() {
        let map = Keymap::builtin();
        let hints = map.hints(Layer::Normal, Pane::Source);
        let keys: Vec<&str> = hints.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys[..4], ["enter", "ctrl-p", ":", "/"], "{keys:?}");
        let prompt = map.hints(Layer::Normal, Pane::Prompt);
        assert_eq!(prompt[0].0, "y");
    }

    #[test]
    fn a_bad_entry_drops_only_itself() {
        let mut map = Keymap::builtin();
        let problems = map.layer(concat!(
            "[[bind]]\non = \"x\"\nrun = \"quit\"\ndesc = \"bye\"\n",
            "[[bind]]\non = \"nope\"\nrun = \"quit\"\n",
            "[[bind]]\non = \"v\"\nrun = \"explode\"\n",
            "[[bind]]\non = \"w\"\nrun = \"zoom\"\nmode = \"normal\"\n",
        ));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("line 6, key `on`: unknown key 'nope'"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("line 10, key `run`"),
            "{problems:?}"
        );
        let key = |c| press(KeyCode::Char(c));
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Source, key('x')),
            Some(Command::Quit)
        );
        assert_eq!(
            map.lookup(Layer::Normal, Pane::Source, key('w')),
            Some(Command::Zoom)
        );
        assert_eq!(map.lookup(Layer::Normal, Pane::Source, key('v')), None);
    }

    #[test]
    fn ctrl_keys_parse() {
        let k = parse_key("ctrl-c").unwrap();
        assert_eq!(k.modifiers, KeyModifiers::CONTROL);
        let minus = KeyEvent::new(KeyCode::Char('-'), KeyModifiers::NONE);
        assert_eq!(parse_key("-"), Some(minus));
    }
}
