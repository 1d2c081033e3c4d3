//! How RLPG's published code read and decoded text, where the code profile reproduces it: the
//! clean-up GPT-2's decode applied to every text it cut, and where it started a file's text.
//! Below both the composer (the default context) and the proposals, which follow the same
//! rules.

use crate::sourced::SourcedText;

/// What GPT-2's tokenizer in transformers (2022) did to every text RLPG's code cut and
/// decoded (`clean_up_tokenization`): these replacements, in turn, each deleting spaces.
const DECODE_CLEAN_UP: [(&str, &str); 10] = [
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
];

/// `text` cleaned up as transformers' decode cleaned what RLPG's code decoded (see
/// [`DECODE_CLEAN_UP`]); it only deletes characters, so the text keeps its provenance.
pub fn decode_clean_up(text: SourcedText) -> SourcedText {
    let deleted = decode_clean_up_deletions(&text.text);
    text.without(&deleted)
}

/// The bytes of `text` (one-byte spaces, ascending) that [`decode_clean_up`] deletes. The
/// replacements run in turn, each over what the ones before it left, so a later one can match
/// across a deletion (`a  .` loses one space per pass of ` .`, which runs once).
pub fn decode_clean_up_deletions(text: &str) -> Vec<usize> {
    let mut current = text.to_string();
    // Where each byte of `current` stands in `text`.
    let mut origin: Vec<usize> = (0..text.len()).collect();
    let mut deleted = Vec::new();
    for (from, to) in DECODE_CLEAN_UP {
        // The spaces of `from` that `to` does not have: all of them.
        debug_assert_eq!(from.replace(' ', ""), to);
        let here: Vec<usize> = current
            .match_indices(from)
            .flat_map(|(at, _)| from.match_indices(' ').map(move |(k, _)| at + k))
            .collect();
        if here.is_empty() {
            continue;
        }
        deleted.extend(here.iter().map(|&at| origin[at]));
        let mut next = String::with_capacity(current.len());
        let mut next_origin = Vec::with_capacity(origin.len());
        let mut start = 0;
        for &at in here.iter().chain([&current.len()]) {
            next.push_str(&current[start..at]);
            next_origin.extend_from_slice(&origin[start..at]);
            start = at + 1;
        }
        current = next;
        origin = next_origin;
    }
    deleted.sort_unstable();
    deleted
}

/// Where RLPG's code starts a file's text that begins at its first line (`get_string` through
/// `modified_start_line`): at the first line that does not start with `/` or `*` (meant to
/// skip a licence header; lines are not trimmed, so ` * ...` stops it). `None` where every
/// line does.
pub fn rlpg_first_line(text: &str) -> Option<usize> {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if !(line.starts_with('/') || line.starts_with('*')) {
            return Some(start);
        }
        start += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(text: &str) -> String {
        let mut sourced = SourcedText::default();
        sourced.push_plain(text);
        decode_clean_up(sourced).text
    }

    #[test]
    fn the_clean_up_deletes_spaces_as_pythons_replace_chain_does() {
        assert_eq!(cleaned("a != b ? c . d"), "a!= b? c. d");
        assert_eq!(cleaned("it ' s"), "it's");
        // One pass of ` .` over two spaces leaves one: Python's `replace` does not rescan.
        assert_eq!(cleaned("x  .y"), "x .y");
        // A later replacement sees what an earlier one left: ` ?` then ` ,`.
        assert_eq!(cleaned("a ? ,b"), "a?,b");
    }

    #[test]
    fn deletions_are_positions_in_the_original_text() {
        assert_eq!(decode_clean_up_deletions("a ? ,b"), vec![1, 3]);
        assert_eq!(decode_clean_up_deletions("no change"), Vec::<usize>::new());
    }
}
