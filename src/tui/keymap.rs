//! Keymaps as data: an embedded default table, the vim layer and the user's file, merged in that
//! order. The help overlay and the hint bar read the same table, so they cannot drift.

use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

use super::state::Command;
use crate::model::config;

const DEFAULT: &str = include_str!("../../keymaps/default.toml");
const VIM: &str = include_str!("../../keymaps/vim.toml");
/// The user's overrides, in keyhole's config directory.
pub const USER_FILE: &str = "keymap.toml";

#[derive(Clone, Debug, Deserialize)]
pub struct Binding {
    pub on: String,
    pub run: Command,
    pub desc: String,
    /// Shown in the hint bar (the help overlay shows every binding).
    #[serde(default)]
    pub hint: bool,
}

#[derive(Debug, Deserialize)]
struct File {
    #[serde(default)]
    bind: Vec<toml::Spanned<Binding>>,
}

#[derive(Clone, Debug)]
pub struct Keymap {
    pub bindings: Vec<Binding>,
}

impl Keymap {
    /// Default + vim layers, then the user's file if there is one (its error is returned, not
    /// fatal, so a typo never locks the user out).
    pub fn load(config_dir: Option<&Path>) -> (Keymap, Option<String>) {
        let mut map = Keymap::builtin();
        let Some(path) = config_dir
            .map(|d| d.join(USER_FILE))
            .filter(|p| p.is_file())
        else {
            return (map, None);
        };
        let warning = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| map.layer(&text))
            .err()
            .map(|e| format!("{}: {e}", path.display()));
        (map, warning)
    }

    /// The built-in bindings with the text of a user's keymap file laid over them, or the one
    /// line that says what is wrong with it.
    pub fn with_user_text(text: &str) -> Result<Keymap, String> {
        let mut map = Keymap::builtin();
        map.layer(text)?;
        Ok(map)
    }

    pub fn builtin() -> Keymap {
        let mut map = Keymap { bindings: vec![] };
        for text in [DEFAULT, VIM] {
            map.layer(text).expect("embedded keymaps parse");
        }
        map
    }

    /// Add a layer: its bindings replace earlier ones on the same key. Errors are one line
    /// naming the line and key: the status bar shows them.
    fn layer(&mut self, text: &str) -> Result<(), String> {
        let file: File = toml::from_str(text).map_err(|e| config::toml_error_line(text, &e))?;
        for entry in file.bind {
            let table = entry.span().start;
            let b = entry.into_inner();
            if parse_key(&b.on).is_none() {
                let at = config::key_offset(text, table, "on").unwrap_or(table);
                let message = format!("unknown key '{}'", b.on);
                return Err(config::problem_line(text, at, Some("on"), &message));
            }
            self.bindings.retain(|old| old.on != b.on);
            self.bindings.push(b);
        }
        Ok(())
    }

    pub fn lookup(&self, key: KeyEvent) -> Option<Command> {
        self.bindings
            .iter()
            .find(|b| parse_key(&b.on).is_some_and(|k| same_key(k, key)))
            .map(|b| b.run)
    }

    /// The keys bound to `command`, joined for display ("j/down").
    pub fn keys_for(&self, command: Command) -> String {
        let keys: Vec<&str> = self
            .bindings
            .iter()
            .filter(|b| b.run == command)
            .map(|b| b.on.as_str())
            .collect();
        keys.join("/")
    }

    /// Hint bar entries: (keys, description), one per command, in table order.
    pub fn hints(&self) -> Vec<(String, &str)> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for b in self.bindings.iter().filter(|b| b.hint) {
            if !seen.contains(&b.run) {
                seen.push(b.run);
                out.push((self.keys_for(b.run), b.desc.as_str()));
            }
        }
        out
    }
}

/// Shift is part of the character for printable keys, so it is ignored there.
fn same_key(bound: KeyEvent, got: KeyEvent) -> bool {
    let strip = |m: KeyModifiers, c: KeyCode| match c {
        KeyCode::Char(_) => m - KeyModifiers::SHIFT,
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

    #[test]
    fn builtin_parses_and_vim_layer_adds_keys() {
        let map = Keymap::builtin();
        let j = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        let down = KeyEvent::new(KeyCode::Down, KeyModifiers::NONE);
        assert_eq!(map.lookup(j), Some(Command::Down));
        assert_eq!(map.lookup(down), Some(Command::Down));
        assert!(map.keys_for(Command::Help).contains('?'));
        assert!(
            map.hints().iter().any(|(keys, _)| keys == "i"),
            "edit is hinted"
        );
        assert_eq!(map.keys_for(Command::CycleRanker), "o");
    }

    #[test]
    fn user_layer_overrides_and_bad_keys_are_reported() {
        let mut map = Keymap::builtin();
        map.layer("[[bind]]\non = \"x\"\nrun = \"quit\"\ndesc = \"bye\"\n")
            .unwrap();
        let x = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE);
        assert_eq!(map.lookup(x), Some(Command::Quit));
        assert!(
            map.layer("[[bind]]\non = \"nope\"\nrun = \"quit\"\ndesc = \"\"\n")
                .is_err()
        );
    }

    #[test]
    fn ctrl_keys_parse() {
        let k = parse_key("ctrl-c").unwrap();
        assert_eq!(k.modifiers, KeyModifiers::CONTROL);
        let minus = KeyEvent::new(KeyCode::Char('-'), KeyModifiers::NONE);
        assert_eq!(parse_key("-"), Some(minus));
    }
}
