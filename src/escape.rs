//! Text from outside (file names above all) made safe to print: a name may hold a newline that
//! would forge a second message line, or an escape sequence that would drive the terminal.

use std::borrow::Cow;

/// `text` with each control character written as an escape (`\n`, `\u{1b}`); other text,
/// non-ASCII included, as it is.
pub fn controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::controls;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(controls("src/A.java"), "src/A.java");
        assert_eq!(controls("Ü/日本.java"), "Ü/日本.java");
        assert_eq!(
            controls("a\nb\r\t\u{1b}[31mc\u{7f}\u{9b}"),
            "a\\nb\\r\\t\\u{1b}[31mc\\u{7f}\\u{9b}"
        );
    }
}
