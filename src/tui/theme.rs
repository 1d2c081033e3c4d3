//! Themes by meaning: widgets ask for a role (hole, budget_warn, proposal...), never a colour.

use std::path::Path;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use serde::Deserialize;

use crate::config_file;

const DARK: &str = include_str!("../../themes/dark.toml");
const LIGHT: &str = include_str!("../../themes/light.toml");
/// The user's theme, in keyhole's config directory; it may set only some roles.
pub const USER_FILE: &str = "theme.toml";

#[derive(Clone, Debug, Deserialize)]
pub struct Theme {
    /// The syntect theme for code.
    pub code: String,
    #[serde(with = "color")]
    pub text: Color,
    #[serde(with = "color")]
    pub muted: Color,
    #[serde(with = "color")]
    pub border: Color,
    #[serde(with = "color")]
    pub border_focus: Color,
    #[serde(with = "color")]
    pub title: Color,
    #[serde(with = "color")]
    pub hole: Color,
    #[serde(with = "color")]
    pub target: Color,
    #[serde(with = "color")]
    pub selected: Color,
    #[serde(with = "color")]
    pub cursor_bg: Color,
    #[serde(with = "color")]
    pub score: Color,
    #[serde(with = "color")]
    pub budget_ok: Color,
    #[serde(with = "color")]
    pub budget_warn: Color,
    #[serde(with = "color")]
    pub budget_over: Color,
    #[serde(with = "color")]
    pub proposal: Color,
    #[serde(with = "color")]
    pub default_context: Color,
    #[serde(with = "color")]
    pub formatting: Color,
    #[serde(with = "color")]
    pub explain: Color,
    #[serde(with = "color")]
    pub diff: Color,
    #[serde(with = "color")]
    pub good: Color,
    #[serde(with = "color")]
    pub bad: Color,
    #[serde(with = "color")]
    pub background: Color,
    /// No colour at all (`NO_COLOR`, see no-color.org): what a colour marked shows in reverse
    /// video instead (see [`monochrome`]).
    #[serde(skip)]
    pub monochrome: bool,
}

impl Theme {
    pub fn dark() -> Theme {
        Theme::named("dark").expect("dark is built in")
    }

    pub fn light() -> Theme {
        Theme::named("light").expect("light is built in")
    }

    /// The built-in theme called `name` (`--theme NAME`, `theme = "NAME"` in theme.toml).
    pub fn named(name: &str) -> Result<Theme, UnknownTheme> {
        builtin(name).map(|text| toml::from_str(text).expect("embedded themes parse"))
    }

    /// The theme the text of a user's theme file makes, or the one line that says what is
    /// wrong with it.
    pub fn from_user_text(user: &str) -> Result<Theme, BadThemeFile> {
        overlay(None, user)
    }

    /// The built-in theme `name` (else the one the user's file names, else dark) with the
    /// user's roles laid over it. An unknown `name` is an error; a bad file is reported, not
    /// fatal.
    pub fn load(
        config_dir: Option<&Path>,
        name: Option<&str>,
    ) -> Result<(Theme, Option<String>), UnknownTheme> {
        let chosen = name.map(Theme::named).transpose()?;
        let Some(path) = config_dir
            .map(|d| d.join(USER_FILE))
            .filter(|p| p.is_file())
        else {
            return Ok((chosen.unwrap_or_else(Theme::dark), None));
        };
        let merged = std::fs::read_to_string(&path)
            .map_err(|e| BadThemeFile(e.to_string()))
            .and_then(|user| overlay(name, &user));
        Ok(match merged {
            Ok(theme) => (theme, None),
            Err(e) => (
                chosen.unwrap_or_else(Theme::dark),
                Some(format!("{}: {e}", path.display())),
            ),
        })
    }
}

/// Whether the environment asks for no colour: `NO_COLOR` set and not empty (no-color.org).
pub fn no_color_asked() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Takes every colour out of a drawn frame: text and backgrounds go to the terminal's own, and
/// a cell whose background the theme coloured to mark it (the hole, the cursor, a selection,
/// explained spans, the hint keys) shows in reverse video, so that nothing marked by colour
/// alone disappears. Modifiers (bold, underline) stay.
pub fn monochrome(buffer: &mut Buffer, background: Color) {
    for cell in &mut buffer.content {
        let marked = cell.bg != background && cell.bg != Color::Reset;
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
        if marked {
            cell.modifier.insert(Modifier::REVERSED);
        }
    }
}

/// The built-in themes' names.
pub const NAMES: [&str; 2] = ["dark", "light"];

/// A theme name (`--theme`, `theme = ` in theme.toml) that is not built in.
#[derive(Debug, thiserror::Error)]
#[error("unknown theme '{name}' (built in: {})", NAMES.join(", "))]
pub struct UnknownTheme {
    pub name: String,
}

/// What is wrong with a user's theme file: one line naming the line and key (the status bar
/// shows it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadThemeFile(String);

fn builtin(name: &str) -> Result<&'static str, UnknownTheme> {
    match name {
        "dark" => Ok(DARK),
        "light" => Ok(LIGHT),
        _ => Err(UnknownTheme { name: name.into() }),
    }
}

/// The built-in theme `name` (else the one `user` names by `theme = ` or the older `base = `,
/// else dark) with the other keys of `user` replaced. Errors are one line naming the line and
/// key: the status bar shows them.
fn overlay(name: Option<&str>, user: &str) -> Result<Theme, BadThemeFile> {
    let problem = |key: &str, message: &str| {
        let at = config_file::key_offset(user, 0, key).unwrap_or(0);
        BadThemeFile(config_file::problem_line(user, at, Some(key), message))
    };
    let roles: toml::Table =
        toml::from_str(user).map_err(|e| BadThemeFile(config_file::toml_error_line(user, &e)))?;
    let named_in_file = ["theme", "base"]
        .into_iter()
        .find_map(|key| Some((key, roles.get(key)?.as_str()?)));
    let base = match (name, named_in_file) {
        (Some(name), _) => builtin(name).map_err(|e| BadThemeFile(e.to_string()))?,
        (None, Some((key, name))) => builtin(name).map_err(|e| problem(key, &e.to_string()))?,
        (None, None) => DARK,
    };
    let mut table: toml::Table = toml::from_str(base).expect("embedded themes parse");
    for (key, value) in roles
        .into_iter()
        .filter(|(k, _)| k != "base" && k != "theme")
    {
        table.insert(key.clone(), value);
        // Checked role by role: the merged table has no positions to point at.
        if let Err(e) = table.clone().try_into::<Theme>() {
            return Err(problem(&key, e.message()));
        }
    }
    table
        .try_into()
        .map_err(|e: toml::de::Error| BadThemeFile(e.to_string()))
}

mod color {
    use ratatui::style::Color;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Color, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| serde::de::Error::custom(format!("'{text}' is not a colour")))
    }
}

/// A colour's RGB value, `None` for the terminal's default; named colours get the usual
/// terminal values (what screenshots draw them as).
pub fn rgb(color: Color) -> Option<[u8; 3]> {
    Some(match color {
        Color::Reset => return None,
        Color::Rgb(r, g, b) => [r, g, b],
        Color::Black => [0, 0, 0],
        Color::Red => [205, 49, 49],
        Color::Green => [13, 188, 121],
        Color::Yellow => [229, 229, 16],
        Color::Blue => [36, 114, 200],
        Color::Magenta => [188, 63, 188],
        Color::Cyan => [17, 168, 205],
        Color::Gray => [204, 204, 204],
        Color::DarkGray => [102, 102, 102],
        Color::White => [255, 255, 255],
        Color::LightRed => [241, 76, 76],
        Color::LightGreen => [35, 209, 139],
        Color::LightYellow => [245, 245, 67],
        Color::LightBlue => [59, 142, 234],
        Color::LightMagenta => [214, 112, 214],
        Color::LightCyan => [41, 184, 219],
        Color::Indexed(i) => [i, i, i],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_themes_parse_and_user_roles_overlay() {
        assert_ne!(Theme::dark().background, Theme::light().background);
        let t = overlay(None, "base = \"light\"\nhole = \"red\"\n").unwrap();
        assert_eq!(t.hole, Color::Red);
        assert_eq!(t.background, Theme::light().background);
        assert!(overlay(None, "hole = \"nope\"").is_err());
    }

    #[test]
    fn a_theme_is_chosen_by_name_on_the_command_line_or_in_the_file() {
        let light = Theme::light().background;
        let t = overlay(None, "theme = \"light\"\n").unwrap();
        assert_eq!(t.background, light);
        let t = overlay(Some("light"), "hole = \"red\"\n").unwrap();
        assert_eq!((t.background, t.hole), (light, Color::Red));
        let t = overlay(Some("dark"), "theme = \"light\"\n").unwrap();
        assert_eq!(t.background, Theme::dark().background, "the flag wins");
        let e = overlay(None, "\ntheme = \"solarized\"\n").unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("line 2") && e.contains("unknown theme 'solarized'"),
            "{e}"
        );
        let e = Theme::load(None, Some("neon")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown theme 'neon' (built in: dark, light)"
        );
    }
}
