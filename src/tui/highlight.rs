//! Syntax highlighting with syntect, converted to ratatui styles here (syntect-tui pins an older
//! ratatui).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ratatui::style::{Color, Modifier, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

/// One source line as styled runs.
pub type StyledLine = Vec<(Style, String)>;

fn sets() -> &'static (SyntaxSet, ThemeSet) {
    static SETS: OnceLock<(SyntaxSet, ThemeSet)> = OnceLock::new();
    SETS.get_or_init(|| {
        (
            SyntaxSet::load_defaults_newlines(),
            ThemeSet::load_defaults(),
        )
    })
}

/// A syntect theme by built-in name, or a `.tmTheme` file by path (read once per process).
fn code_theme(name: &str) -> Option<Theme> {
    if let Some(theme) = sets().1.themes.get(name) {
        return Some(theme.clone());
    }
    static FILES: OnceLock<Mutex<HashMap<String, Option<Theme>>>> = OnceLock::new();
    let mut files = FILES.get_or_init(Mutex::default).lock().ok()?;
    files
        .entry(name.to_string())
        .or_insert_with(|| ThemeSet::get_theme(name).ok())
        .clone()
}

/// A file's lines unstyled: what shows until its highlighting is ready.
pub fn plain(text: &str) -> Vec<StyledLine> {
    text.lines()
        .map(|l| vec![(Style::default(), l.to_string())])
        .collect()
}

/// Highlight a whole file (syntect's state runs from the top). Unknown syntaxes or themes give
/// plain lines.
pub fn file(path: &str, text: &str, theme: &str) -> Vec<StyledLine> {
    let syntaxes = &sets().0;
    let ext = path.rsplit('.').next().unwrap_or("");
    let syntax = syntaxes.find_syntax_by_extension(ext);
    let (Some(syntax), Some(theme)) = (syntax, code_theme(theme)) else {
        return plain(text);
    };
    let mut lines = HighlightLines::new(syntax, &theme);
    text.lines()
        .map(|line| {
            let with_newline = format!("{line}\n");
            lines
                .highlight_line(&with_newline, syntaxes)
                .map(|runs| {
                    runs.into_iter()
                        .map(|(s, t)| (style(s), t.trim_end_matches('\n').to_string()))
                        .filter(|(_, t)| !t.is_empty())
                        .collect()
                })
                .unwrap_or_else(|_| vec![(Style::default(), line.to_string())])
        })
        .collect()
}

/// Foreground and font style only: the pane's background stays the theme's.
fn style(s: syntect::highlighting::Style) -> Style {
    let fg = s.foreground;
    let mut style = Style::default().fg(Color::Rgb(fg.r, fg.g, fg.b));
    for (font, modifier) in [
        (FontStyle::BOLD, Modifier::BOLD),
        (FontStyle::ITALIC, Modifier::ITALIC),
        (FontStyle::UNDERLINE, Modifier::UNDERLINED),
    ] {
        if s.font_style.contains(font) {
            style = style.add_modifier(modifier);
        }
    }
    style
}

#[cfg(test)]
mod tests {
    #[test]
    fn java_gets_colours_and_unknown_files_stay_plain() {
        let lines = super::file("A.java", "class A {}\n", "base16-ocean.dark");
        assert!(lines[0].len() > 1);
        let plain = super::file("a.unknown", "x y\n", "base16-ocean.dark");
        assert_eq!(plain[0].len(), 1);
    }

    #[test]
    fn a_tm_theme_file_can_colour_the_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("red.tmTheme");
        let plist = r#"<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict><key>name</key><string>Red</string><key>settings</key><array>
<dict><key>settings</key><dict><key>foreground</key><string>#FF0000</string>
<key>background</key><string>#000000</string></dict></dict></array></dict></plist>"#;
        std::fs::write(&path, plist).unwrap();
        let lines = super::file("A.java", "class A {}\n", path.to_str().unwrap());
        let red = ratatui::style::Color::Rgb(255, 0, 0);
        assert!(
            lines[0].iter().all(|(style, _)| style.fg == Some(red)),
            "{lines:?}"
        );
        let missing = super::file("A.java", "class A {}\n", "/no/such.tmTheme");
        assert_eq!(
            missing[0].len(),
            1,
            "an unreadable theme leaves the code plain"
        );
    }
}
