//! Checked conversions between byte offsets and characters. Files are UTF-8 and users count
//! columns in characters, while tree-sitter and slicing count bytes: every conversion between
//! the two goes through here (or through `str::floor_char_boundary` and friends), so a
//! position next to `→`, an emoji or a byte-order mark cannot split a character.

use std::ops::Range;

/// The byte offset of character `column` in `line`; the end of the line when the line has
/// fewer characters.
pub fn byte_of_char(line: &str, column: usize) -> usize {
    line.char_indices()
        .nth(column)
        .map_or(line.len(), |(b, _)| b)
}

/// `text[range]`, with the range clamped to the text and narrowed to whole characters, so a
/// stale or foreign offset yields less text instead of a panic.
pub fn clipped(text: &str, range: Range<usize>) -> &str {
    let start = text.ceil_char_boundary(range.start);
    let end = text.floor_char_boundary(range.end).max(start);
    &text[start..end]
}

/// Where the identifier that `prefix` ends with starts (Java's letters, digits, `_` and `$`,
/// Unicode letters included); `prefix.len()` when it ends with something else.
pub fn identifier_start(prefix: &str) -> usize {
    prefix
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_' || c == '$')
        .last()
        .map_or(prefix.len(), |(i, _)| i)
}

/// The first `max` characters of `text`, with `…` when something was cut.
pub fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let line = "a → «b» 😀c";
        assert_eq!(byte_of_char(line, 2), 2);
        assert_eq!(byte_of_char(line, 3), 5);
        assert_eq!(byte_of_char(line, 100), line.len());
    }

    #[test]
    fn clipped_never_splits_a_character() {
        let text = "x→y";
        assert_eq!(clipped(text, 0..2), "x");
        assert_eq!(clipped(text, 2..5), "y");
        assert_eq!(clipped(text, 4..100), "y");
        let reversed = std::ops::Range { start: 9, end: 3 };
        assert_eq!(clipped(text, reversed), "");
    }

    #[test]
    fn identifier_start_after_symbols() {
        assert_eq!(identifier_start("a → count"), 6);
        assert_eq!(identifier_start("x ≤ "), "x ≤ ".len());
        assert_eq!(identifier_start("\u{feff}package"), 3);
        assert_eq!(identifier_start("größe"), 0);
        assert_eq!(identifier_start(""), 0);
    }

    #[test]
    fn excerpt_cuts_on_characters() {
        assert_eq!(excerpt("→→→", 2), "→→…");
        assert_eq!(excerpt("ab", 2), "ab");
    }
}
