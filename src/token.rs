//! Tokenizers behind one trait, and token-exact truncation.
//!
//! Budgets in keyhole are counted in the tokens of the model that will read the prompt, so every
//! tokenizer reports where its tokens end in the text; truncation then cuts at a token boundary
//! and recounts, which keeps budgets exact even for byte-level BPE.

use std::ops::Range;
use std::str::FromStr;

use serde::Serialize;
use tiktoken_rs::CoreBPE;

mod gpt2;

pub use gpt2::{Gpt2Bpe, pieces};

/// Splits text into tokens; all budgets and truncation go through this.
pub trait Tokenizer: Send + Sync {
    /// The name shown to users and written into reports.
    fn name(&self) -> &'static str;
    /// Byte offsets where each token ends, in order; the last one is `text.len()`.
    fn token_ends(&self, text: &str) -> Vec<usize>;
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> usize {
        self.token_ends(text).len()
    }
    /// Whether any run of whole tokens re-tokenizes to exactly those tokens, and joining texts
    /// with a line break never adds tokens. Then cuts need no recount (BPE needs one).
    fn stable_boundaries(&self) -> bool {
        false
    }
}

/// The tokenizers a user can pick by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenizerKind {
    /// keyhole's own code tokenizer, used by the embedded offline model.
    Code,
    /// GPT-2's BPE, the tokenizer RLPG counted its 4072-token budget in.
    R50kBase,
    /// Codex's BPE.
    P50kBase,
    /// GPT-3.5/GPT-4's BPE.
    Cl100kBase,
    /// GPT-4o's BPE.
    O200kBase,
}

impl TokenizerKind {
    pub const ALL: [TokenizerKind; 5] = [
        Self::Code,
        Self::R50kBase,
        Self::P50kBase,
        Self::Cl100kBase,
        Self::O200kBase,
    ];

    /// The BPE an OpenAI model name uses, if tiktoken knows the model.
    pub fn for_model(model: &str) -> Option<TokenizerKind> {
        use tiktoken_rs::tokenizer::Tokenizer as T;
        match tiktoken_rs::tokenizer::get_tokenizer(model)? {
            T::O200kBase | T::O200kHarmony => Some(Self::O200kBase),
            T::Cl100kBase => Some(Self::Cl100kBase),
            T::P50kBase | T::P50kEdit => Some(Self::P50kBase),
            T::R50kBase | T::Gpt2 => Some(Self::R50kBase),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::R50kBase => "r50k_base",
            Self::P50kBase => "p50k_base",
            Self::Cl100kBase => "cl100k_base",
            Self::O200kBase => "o200k_base",
        }
    }

    /// The tokenizer itself; BPE tables are loaded once per process on first use.
    pub fn tokenizer(self) -> &'static dyn Tokenizer {
        static CODE: CodeTokenizer = CodeTokenizer;
        match self {
            Self::Code => &CODE,
            Self::R50kBase => &gpt2::R50K,
            Self::P50kBase => &gpt2::P50K,
            Self::Cl100kBase => &CL100K,
            Self::O200kBase => &O200K,
        }
    }
}

impl FromStr for TokenizerKind {
    type Err = UnknownTokenizer;
    fn from_str(s: &str) -> Result<Self, UnknownTokenizer> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownTokenizer(s.to_string()))
    }
}

/// A tokenizer name keyhole does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown tokenizer '{0}' (known: {known})",
    known = TokenizerKind::ALL.map(TokenizerKind::name).join(", ")
)]
pub struct UnknownTokenizer(pub String);

/// keyhole's code tokenizer: identifiers and numbers whole, common two- and three-character
/// operators whole, every other symbol alone, runs of spaces/tabs as one token, and every line
/// break as its own token. Because a line break never merges with its neighbours, the count of
/// `a + "\n" + b` is exactly `count(a) + 1 + count(b)`, which the composer relies on.
#[derive(Debug, Default)]
pub struct CodeTokenizer;

const OPERATORS_3: [&str; 4] = [">>>", "<<=", ">>=", "..."];
const OPERATORS_2: [&str; 18] = [
    "==", "!=", "<=", ">=", "&&", "||", "++", "--", "->", "::", "+=", "-=", "*=", "/=", "<<", ">>",
    "%=", "&=",
];

impl Tokenizer for CodeTokenizer {
    fn name(&self) -> &'static str {
        "code"
    }

    /// Tokens are maximal runs and a line break never merges except `\r` + `\n` (which only
    /// makes fewer tokens), so cuts at token ends are exact.
    fn stable_boundaries(&self) -> bool {
        true
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        let bytes = text.as_bytes();
        let mut ends = Vec::with_capacity(text.len() / 3 + 1);
        let mut i = 0;
        while i < bytes.len() {
            i = code_token_end(text, i);
            ends.push(i);
        }
        ends
    }
}

/// End of the code token starting at byte `start` (always a char boundary).
fn code_token_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let b = bytes[start];
    let run = |pred: fn(u8) -> bool| {
        let mut j = start + 1;
        while j < bytes.len() && pred(bytes[j]) {
            j += 1;
        }
        j
    };
    match b {
        b'\r' if bytes.get(start + 1) == Some(&b'\n') => start + 2,
        b'\n' | b'\r' => start + 1,
        b' ' | b'\t' => run(|c| c == b' ' || c == b'\t'),
        b'0'..=b'9' => run(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.'),
        c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => {
            run(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
        }
        // Every operator of two or three characters has one of these second.
        c if c.is_ascii()
            && !matches!(
                bytes.get(start + 1),
                Some(b'=' | b'>' | b'<' | b'&' | b'|' | b'+' | b'-' | b':' | b'.')
            ) =>
        {
            start + 1
        }
        c if c.is_ascii() => {
            let rest = &text[start..];
            OPERATORS_3
                .iter()
                .chain(OPERATORS_2.iter())
                .find(|op| rest.starts_with(**op))
                .map_or(start + 1, |op| start + op.len())
        }
        // One token per non-ASCII character.
        _ => start + text[start..].chars().next().map_or(1, char::len_utf8),
    }
}

/// A tiktoken BPE, loaded lazily (the tables take a moment to build).
pub struct Bpe {
    name: &'static str,
    load: fn() -> &'static CoreBPE,
}

static CL100K: Bpe = Bpe {
    name: "cl100k_base",
    load: tiktoken_rs::cl100k_base_singleton,
};
static O200K: Bpe = Bpe {
    name: "o200k_base",
    load: tiktoken_rs::o200k_base_singleton,
};

/// Codex's BPE, whose token ids RepoCoder's code compares (its `CodexTokenizer`).
pub fn p50k() -> &'static Gpt2Bpe {
    &gpt2::P50K
}

impl Tokenizer for Bpe {
    fn name(&self) -> &'static str {
        self.name
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        let bpe = (self.load)();
        let tokens = bpe.encode_ordinary(text);
        let mut end = 0;
        bpe._decode_native_and_split(tokens)
            .map(|bytes| {
                end += bytes.len();
                end
            })
            .collect()
    }

    fn count(&self, text: &str) -> usize {
        (self.load)().count_ordinary(text)
    }
}

/// Which end of a text gives way when it is longer than its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    /// Keep the beginning; the end is cut off.
    Start,
    /// Keep the end; the beginning is cut off.
    End,
}

/// The longest part of `text` of at most `max_tokens` tokens, kept from the given end:
/// returns the byte range kept and its token count.
pub fn truncate(
    tok: &dyn Tokenizer,
    text: &str,
    max_tokens: usize,
    keep: Keep,
) -> (Range<usize>, usize) {
    if let Some(result) = truncate_in_window(tok, text, max_tokens, keep) {
        return result;
    }
    truncate_at(tok, text, &tok.token_ends(text), max_tokens, keep)
}

/// Bytes of text looked at first when only `max` tokens from one end are wanted: generous for
/// code, and the result is verified, so a rare very long token only costs the full pass.
fn window_bytes(max_tokens: usize) -> usize {
    max_tokens.saturating_mul(16).saturating_add(1024)
}

/// Truncation of a long text tokenizing only its kept end, when that end has more than
/// enough tokens; `None` when the whole text must be looked at.
fn truncate_in_window(
    tok: &dyn Tokenizer,
    text: &str,
    max_tokens: usize,
    keep: Keep,
) -> Option<(Range<usize>, usize)> {
    let size = window_bytes(max_tokens);
    if text.len() <= size {
        return None;
    }
    let window = match keep {
        Keep::Start => 0..text.floor_char_boundary(size),
        Keep::End => text.ceil_char_boundary(text.len().saturating_sub(size))..text.len(),
    };
    let part = &text[window.clone()];
    let ends = tok.token_ends(part);
    // One token beyond what is kept, so a token the window edge split is never kept.
    if ends.len() <= max_tokens.saturating_add(1) {
        return None;
    }
    let (range, count) = truncate_at(tok, part, &ends, max_tokens, keep);
    Some((range.start + window.start..range.end + window.start, count))
}

/// Truncation of `text` whose token ends are `ends`.
pub fn truncate_at(
    tok: &dyn Tokenizer,
    text: &str,
    ends: &[usize],
    max_tokens: usize,
    keep: Keep,
) -> (Range<usize>, usize) {
    if ends.len() <= max_tokens {
        return (0..text.len(), ends.len());
    }
    let mut range = match keep {
        Keep::Start => {
            0..if max_tokens == 0 {
                0
            } else {
                ends[max_tokens - 1]
            }
        }
        Keep::End => ends[ends.len() - max_tokens - 1]..text.len(),
    };
    if tok.stable_boundaries() {
        return (range, max_tokens);
    }
    // A BPE token may end inside a character; move the cut to a character boundary, inward.
    loop {
        range.start = text.ceil_char_boundary(range.start);
        range.end = text.floor_char_boundary(range.end).max(range.start);
        let count = tok.count(&text[range.clone()]);
        if count <= max_tokens || range.is_empty() {
            return (range, count);
        }
        // Re-tokenizing a cut piece can (rarely, for BPE) give more tokens: shave one more byte.
        match keep {
            Keep::Start => range.end -= 1,
            Keep::End => range.start += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        let mut start = 0;
        CodeTokenizer
            .token_ends(text)
            .into_iter()
            .map(|end| {
                let p = &text[start..end];
                start = end;
                p
            })
            .collect()
    }

    #[test]
    fn code_tokenizer_splits_identifiers_operators_and_newlines() {
        assert_eq!(
            pieces("if (a >= 10) {\n  x_1 += \"é\";"),
            vec![
                "if", " ", "(", "a", " ", ">=", " ", "10", ")", " ", "{", "\n", "  ", "x_1", " ",
                "+=", " ", "\"", "é", "\"", ";"
            ]
        );
    }

    #[test]
    fn newline_never_merges_so_counts_add_up() {
        let (a, b) = ("foo(bar)  ", "  baz;");
        let joined = format!("{a}\n{b}");
        assert_eq!(
            CodeTokenizer.count(&joined),
            CodeTokenizer.count(a) + 1 + CodeTokenizer.count(b)
        );
    }

    #[test]
    fn truncation_keeps_the_requested_end() {
        let text = "alpha beta gamma";
        let (r, n) = truncate(&CodeTokenizer, text, 3, Keep::Start);
        assert_eq!((&text[r], n), ("alpha beta", 3));
        let (r, n) = truncate(&CodeTokenizer, text, 3, Keep::End);
        assert_eq!((&text[r], n), ("beta gamma", 3));
        let (r, n) = truncate(&CodeTokenizer, text, 0, Keep::End);
        assert_eq!((&text[r], n), ("", 0));
    }

    #[test]
    fn the_window_shortcut_cuts_where_the_full_text_would() {
        let text = "    int total = count(a, b) >>= 2; // ünïcode\r\n".repeat(400);
        for tok in [
            TokenizerKind::Code.tokenizer(),
            TokenizerKind::Cl100kBase.tokenizer(),
        ] {
            let ends = tok.token_ends(&text);
            for max in [0, 1, 7, 100, 900] {
                for keep in [Keep::Start, Keep::End] {
                    let fast = truncate(tok, &text, max, keep);
                    assert_eq!(
                        fast,
                        truncate_at(tok, &text, &ends, max, keep),
                        "{} {max} {keep:?}",
                        tok.name()
                    );
                    assert_eq!(tok.count(&text[fast.0.clone()]), fast.1);
                }
            }
        }
    }

    #[test]
    fn bpe_truncation_never_splits_a_character() {
        let text = "naïve café — ünïcödé strings 🚀🚀🚀";
        let tok = TokenizerKind::Cl100kBase.tokenizer();
        for max in 0..tok.count(text) {
            for keep in [Keep::Start, Keep::End] {
                let (r, n) = truncate(tok, text, max, keep);
                assert!(n <= max);
                assert_eq!(tok.count(&text[r]), n);
            }
        }
    }
}
