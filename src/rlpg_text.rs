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
pub fn decode_clean_up(mut text: SourcedText) -> SourcedText {
    for (from, to) in DECODE_CLEAN_UP {
        let deleted: Vec<usize> = text
            .text
            .match_indices(from)
            .flat_map(|(at, _)| {
                // The spaces of `from` that `to` does not have: all of them.
                debug_assert_eq!(from.replace(' ', ""), to);
                from.match_indices(' ').map(move |(k, _)| at + k)
            })
            .collect();
        text = text.without(&deleted);
    }
    text
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
