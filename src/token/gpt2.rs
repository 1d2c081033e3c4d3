//! GPT-2's byte-level BPE as OpenAI's `r50k_base` and Codex's `p50k_base` apply it, over a
//! vocabulary compiled into the binary, sorted so that it is searched where it lies. A process
//! that needs the ids of a few hundred pieces then pays for those, not for building tiktoken's
//! tables (its `CoreBPE` decodes 50k base64 lines into two hash maps and compiles a
//! backtracking regex: ~20 ms of CPU, 7% of a warm `proposals` on a large repository).
//! The ids are tiktoken's exactly: the tests hold this encoder to it, and write the table from it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::LazyLock;

use super::Tokenizer;

/// p50k_base's vocabulary (r50k_base's and 24 runs of spaces), sorted by bytes: per token its
/// length (one byte), its rank (two bytes, little-endian) and its bytes. Written by the test
/// `the_table_is_tiktokens_vocabulary` with `KEYHOLE_BLESS=1`.
static TABLE: &[u8] = include_bytes!("p50k_base.bin");

/// Bytes before a token's own in its table entry.
const ENTRY_HEAD: usize = 3;

/// The table's entries located once per process (one pass, no copy of the tokens).
struct Vocabulary {
    /// Where each entry starts in [`TABLE`], in the table's (byte) order.
    sorted: Vec<u32>,
    /// Where the entry of each rank starts; `u32::MAX` for a rank without one
    /// (`<|endoftext|>`'s, a special token).
    by_rank: Vec<u32>,
    /// `sorted[first_byte[b]..first_byte[b + 1]]` are the tokens starting with byte `b`.
    first_byte: [u32; 257],
}

static VOCABULARY: LazyLock<Vocabulary> = LazyLock::new(Vocabulary::read);

impl Vocabulary {
    fn read() -> Vocabulary {
        let mut sorted = Vec::with_capacity(50_280);
        let mut by_rank = Vec::new();
        let mut first_byte = [0u32; 257];
        let mut at = 0;
        while at < TABLE.len() {
            let (rank, bytes) = entry(at as u32);
            let slot = rank as usize;
            if by_rank.len() <= slot {
                by_rank.resize(slot + 1, u32::MAX);
            }
            by_rank[slot] = at as u32;
            first_byte[bytes[0] as usize + 1] += 1;
            sorted.push(at as u32);
            at += ENTRY_HEAD + bytes.len();
        }
        for b in 0..256 {
            first_byte[b + 1] += first_byte[b];
        }
        Vocabulary {
            sorted,
            by_rank,
            first_byte,
        }
    }

    /// The rank of the token made of `bytes`, if there is one.
    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let first = *bytes.first()? as usize;
        let among =
            &self.sorted[self.first_byte[first] as usize..self.first_byte[first + 1] as usize];
        let found = among.binary_search_by(|&at| entry(at).1.cmp(bytes)).ok()?;
        Some(entry(among[found]).0)
    }

    /// The bytes of the token of `rank`.
    fn bytes(&self, rank: u32) -> &'static [u8] {
        entry(self.by_rank[rank as usize]).1
    }
}

/// The rank and bytes of the table's entry at `at`.
fn entry(at: u32) -> (u32, &'static [u8]) {
    let at = at as usize;
    let len = TABLE[at] as usize;
    let rank = u16::from_le_bytes([TABLE[at + 1], TABLE[at + 2]]);
    (
        u32::from(rank),
        &TABLE[at + ENTRY_HEAD..at + ENTRY_HEAD + len],
    )
}

/// r50k_base's and p50k_base's piece pattern, `\s+(?!\S)` left out: see [`pieces`].
static PIECE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+")
        .expect("the piece pattern is valid")
});

/// The pieces tiktoken cuts `text` into before byte-pair encoding. Its pattern's one
/// look-ahead (`\s+(?!\S)`) needs a backtracking regex engine, the larger part of its time; here
/// the `regex` crate cuts with the pattern less the look-ahead, which is then applied by hand:
/// a run of white space followed by other text is taken without the run's last character, which
/// then starts the next piece (` word`), unless the run is that one character (`\s`).
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

/// One of the GPT-2 family's BPEs: the vocabulary's tokens of rank below `ranks`.
pub struct Gpt2Bpe {
    name: &'static str,
    ranks: u32,
}

/// GPT-2's BPE (`r50k_base`): p50k_base without its runs of spaces.
pub static R50K: Gpt2Bpe = Gpt2Bpe {
    name: "r50k_base",
    ranks: 50_257,
};

/// Codex's BPE (`p50k_base`).
pub static P50K: Gpt2Bpe = Gpt2Bpe {
    name: "p50k_base",
    ranks: 50_281,
};

impl Gpt2Bpe {
    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        VOCABULARY.rank(bytes).filter(|&rank| rank < self.ranks)
    }

    /// The token ids of `text`, special tokens read as plain text (tiktoken's
    /// `encode_ordinary`).
    pub fn ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        for piece in pieces(text) {
            self.piece_ids(piece, &mut ids);
        }
        ids
    }

    /// Appends the token ids of one of [`pieces`]' pieces to `ids`: the piece's own token if it
    /// is one, else its bytes merged pair by pair, always the adjacent pair whose joined bytes
    /// have the lowest rank (the leftmost of equals), as long as any pair joins into a token.
    pub fn piece_ids(&self, piece: &str, ids: &mut Vec<u32>) {
        let bytes = piece.as_bytes();
        if let Some(rank) = self.rank(bytes) {
            ids.push(rank);
            return;
        }
        let n = bytes.len();
        // The parts are byte ranges: `end[i]` ends the part starting at `i`, `prev[i]` starts
        // the one before it; `alive[i]` while a part starts at `i`.
        let mut end: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.saturating_sub(1)).collect();
        let mut alive = vec![true; n];
        // Candidate merges, lowest rank and then leftmost first: (rank, left start, right end).
        // One stays valid while its left part and the part after it are as they were.
        let mut merges = BinaryHeap::with_capacity(n);
        let candidate = |left: usize, right_end: usize| {
            self.rank(&bytes[left..right_end])
                .map(|rank| Reverse((rank, left, right_end)))
        };
        merges.extend((0..n - 1).filter_map(|i| candidate(i, i + 2)));
        while let Some(Reverse((_, left, right_end))) = merges.pop() {
            let right = end[left];
            if !alive[left] || right >= n || end[right] != right_end {
                continue;
            }
            end[left] = right_end;
            alive[right] = false;
            if right_end < n {
                prev[right_end] = left;
                merges.extend(candidate(left, end[right_end]));
            }
            if left > 0 {
                merges.extend(candidate(prev[left], right_end));
            }
        }
        let mut at = 0;
        while at < n {
            ids.push(
                self.rank(&bytes[at..end[at]])
                    .expect("single bytes and merged parts are tokens"),
            );
            at = end[at];
        }
    }
}

impl Tokenizer for Gpt2Bpe {
    fn name(&self) -> &'static str {
        self.name
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        let mut end = 0;
        self.ids(text)
            .into_iter()
            .map(|id| {
                end += VOCABULARY.bytes(id).len();
                end
            })
            .collect()
    }

    fn count(&self, text: &str) -> usize {
        self.ids(text).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiktoken_rs::CoreBPE;

    /// The table tiktoken's p50k_base gives: every rank's bytes but the special tokens', sorted.
    fn tiktokens_table() -> Vec<u8> {
        let bpe = tiktoken_rs::p50k_base_singleton();
        let special: Vec<u32> = bpe
            .special_tokens()
            .into_iter()
            .flat_map(|name| bpe.encode_with_special_tokens(name))
            .collect();
        let mut tokens: Vec<(Vec<u8>, u16)> = (0..P50K.ranks)
            .filter(|rank| !special.contains(rank))
            .map(|rank| {
                let bytes = bpe.decode_bytes(&[rank]).expect("every rank has a token");
                (bytes, u16::try_from(rank).expect("ranks fit two bytes"))
            })
            .collect();
        tokens.sort();
        let mut table = Vec::new();
        for (bytes, rank) in tokens {
            table.push(u8::try_from(bytes.len()).expect("tokens are short"));
            table.extend_from_slice(&rank.to_le_bytes());
            table.extend_from_slice(&bytes);
        }
        table
    }

    #[test]
    fn the_table_is_tiktokens_vocabulary() {
        let expected = tiktokens_table();
        if expected != TABLE {
            assert!(
                std::env::var_os("KEYHOLE_BLESS").is_some(),
                "src/token/p50k_base.bin differs from tiktoken's p50k_base: rerun with \
                 KEYHOLE_BLESS=1 to rewrite it"
            );
            let path =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/token/p50k_base.bin");
            std::fs::write(path, expected).expect("the table is written");
        }
    }

    fn tiktoken(bpe: &Gpt2Bpe) -> &'static CoreBPE {
        match bpe.name {
            "r50k_base" => tiktoken_rs::r50k_base_singleton(),
            _ => tiktoken_rs::p50k_base_singleton(),
        }
    }

    /// Every text: the same ids and token ends as tiktoken's.
    fn agrees(text: &str) {
        for bpe in [&R50K, &P50K] {
            let oracle = tiktoken(bpe);
            let ids = oracle.encode_ordinary(text);
            assert_eq!(bpe.ids(text), ids, "{} {text:?}", bpe.name);
            let mut end = 0;
            let ends: Vec<usize> = oracle
                ._decode_native_and_split(ids)
                .map(|bytes| {
                    end += bytes.len();
                    end
                })
                .collect();
            assert_eq!(bpe.token_ends(text), ends, "{} {text:?}", bpe.name);
        }
    }

    #[test]
    fn code_unicode_spaces_digits_and_emoji_tokenize_as_tiktoken_does() {
        for text in [
            "",
            "def f(x):\n    return  x\n\n\tif a:\r\n \t b = 'it''s'\n  \u{a0}é\u{2003}42   ",
            "public static <K, V> ImmutableMap<K, V> of(K k1, V v1) {\n        return RegularImmutableMap.create(1, new Object[] {k1, v1});\n    }",
            &" ".repeat(300),
            &format!("x{}y", " ".repeat(41)),
            "12345678901234567890 3.14159e-10 0x7fff_ffff 1_000_000",
            "emoji 🚀🚀🚀 👩‍👩‍👧‍👦 flags 🇫🇷 and ZWJ",
            "naïve café — ünïcödé strings, 中文字符, русский текст, العربية",
            "<|endoftext|> stays plain text",
            &"ab".repeat(500),
            &"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".repeat(20),
            "\u{301}\u{301}combining\u{301} ²³ ½ Ⅷ",
        ] {
            agrees(text);
        }
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

    #[test]
    fn white_space_runs_leave_their_last_character_to_what_follows() {
        let text = "def f(x):\n    return  x\n\n\tif a:\r\n \t b = 'it''s'\n  \u{a0}é\u{2003}42   ";
        let cut: Vec<&str> = pieces(text).collect();
        assert_eq!(cut.concat(), text);
        assert!(cut.contains(&"\n   ") && cut.contains(&" return") && cut.contains(&" "));
    }

    proptest::proptest! {
        #[test]
        fn any_text_tokenizes_as_tiktoken_does(
            text in "([ \t\n\r\u{a0}\u{2003}]{0,4}|'(s|t|re|ve|m|ll|d|x)?|[a-zA-Z_]{1,6}|[0-9²]{1,3}|[éß中\u{301}🚀]|[(){}:;.,=+\\-*/<>\"#@!?]{1,3})*"
        ) {
            agrees(&text);
        }

        #[test]
        fn any_characters_tokenize_as_tiktoken_does(text in "\\PC{0,40}") {
            agrees(&text);
        }
    }
}
