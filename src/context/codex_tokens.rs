//! Codex's (`p50k_base`) token ids of many texts at once, as RepoCoder's window database needs
//! them: the same ids tiktoken gives, found faster. tiktoken cuts a text into pieces with a
//! pattern whose one look-ahead (`\s+(?!\S)`) needs a backtracking regex engine, the larger
//! part of its time; here the `regex` crate cuts with the pattern less the look-ahead, which is
//! then applied by hand, and each distinct piece is encoded once (code repeats its words and
//! indentation), by tiktoken itself.

use std::sync::LazyLock;

use rustc_hash::FxHashMap;

use crate::token;

/// p50k_base's (and r50k_base's) piece pattern, `\s+(?!\S)` left out: see [`pieces`].
static PIECE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+")
        .expect("the piece pattern is valid")
});

/// The pieces tiktoken cuts `text` into before byte-pair encoding. Its pattern takes a run of
/// white space followed by other text without the run's last character (`\s+(?!\S)`), which
/// then starts the next piece (` word`), unless the run is that one character (`\s+`).
pub fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let found = PIECE.find_at(text, at)?;
        let mut end = found.end();
        let piece = found.as_str();
        if end < text.len() && piece.chars().all(char::is_whitespace) {
            let last = piece.char_indices().last().map_or(0, |(i, _)| i);
            if last > 0 {
                end = found.start() + last;
            }
        }
        at = end;
        Some(&text[found.start()..end])
    })
}

/// Encodes texts piece by piece, remembering each piece's ids.
#[derive(Default)]
pub struct CodexTokens<'t> {
    known: FxHashMap<&'t str, Vec<u32>>,
}

impl<'t> CodexTokens<'t> {
    /// The distinct token ids of `text`, sorted.
    pub fn distinct(&mut self, text: &'t str) -> Vec<u32> {
        let mut ids = Vec::new();
        for piece in pieces(text) {
            let encoded = self
                .known
                .entry(piece)
                .or_insert_with(|| token::p50k().ids(piece));
            ids.extend_from_slice(encoded);
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiktoken(text: &str) -> Vec<u32> {
        let mut ids = token::p50k().ids(text);
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Every text: the same ids as tiktoken's own encoding.
    fn agrees(text: &str) {
        assert_eq!(
            CodexTokens::default().distinct(text),
            tiktoken(text),
            "{text:?}"
        );
    }

    #[test]
    fn white_space_runs_leave_their_last_character_to_what_follows() {
        let text = "def f(x):\n    return  x\n\n\tif a:\r\n \t b = 'it''s'\n  \u{a0}é\u{2003}42   ";
        let cut: Vec<&str> = pieces(text).collect();
        assert_eq!(cut.concat(), text);
        assert!(cut.contains(&"\n   ") && cut.contains(&" return") && cut.contains(&" "));
        agrees(text);
    }

    #[test]
    fn the_bundled_samples_tokenize_as_tiktoken_does() {
        let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut read = 0;
        for entry in ignore::Walk::new(samples).flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                agrees(&text);
                read += 1;
            }
        }
        assert!(read > 50, "{read} files");
    }

    proptest::proptest! {
        #[test]
        fn any_text_tokenizes_as_tiktoken_does(
            text in "([ \t\n\r\u{a0}\u{2003}]{0,4}|'(s|t|re|ve|m|ll|d|x)?|[a-zA-Z_]{1,6}|[0-9²]{1,3}|[éß中\u{301}]|[(){}:;.,=+\\-*/<>\"#@!?]{1,3})*"
        ) {
            agrees(&text);
        }
    }
}
