//! Codex's (`p50k_base`) token ids of many texts at once, as RepoCoder's window database needs
//! them: the same ids tiktoken gives, found faster. Texts are cut into the BPE's pieces and each
//! distinct piece is encoded once (code repeats its words and indentation).

use rustc_hash::FxHashMap;

use crate::token;

/// Encodes texts piece by piece, remembering each piece's ids.
#[derive(Default)]
pub struct CodexTokens<'t> {
    known: FxHashMap<&'t str, Vec<u32>>,
}

impl<'t> CodexTokens<'t> {
    /// The distinct token ids of `text`, sorted.
    pub fn distinct(&mut self, text: &'t str) -> Vec<u32> {
        let mut ids = Vec::new();
        for piece in token::pieces(text) {
            let encoded = self.known.entry(piece).or_insert_with(|| {
                let mut encoded = Vec::new();
                token::p50k().piece_ids(piece, &mut encoded);
                encoded
            });
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

    /// One encoder over many texts (its remembered pieces reused): each text's distinct ids
    /// are those of tiktoken's own encoding.
    #[test]
    fn the_bundled_samples_have_tiktokens_distinct_ids() {
        let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let texts: Vec<String> = ignore::Walk::new(samples)
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
            .collect();
        assert!(texts.len() > 50, "{} files", texts.len());
        let mut tokens = CodexTokens::default();
        for text in &texts {
            let mut ids = tiktoken_rs::p50k_base_singleton().encode_ordinary(text);
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(tokens.distinct(text), ids, "{text:?}");
        }
    }
}
