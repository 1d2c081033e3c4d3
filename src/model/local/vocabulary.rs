//! A local model's tokenizer: a `tokenizer.json` beside the GGUF file when there is one, else
//! the byte-level BPE vocabulary and merges in the GGUF metadata. Either way the prompt is
//! encoded exactly as the model was trained, so token counts for budgets are exact.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;

use candle_core::quantized::gguf_file::Value;
use serde_json::{Map, Value as Json, json};
use tokenizers::Tokenizer;

use super::error::{GgufError, TokenizerError};

/// GPT-2's pre-tokenizer split, the byte-level default.
const GPT2_SPLIT: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Qwen2's split: single digits, newlines kept apart from code.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split: like Qwen2's with up to three digits together.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token types (llama.cpp's `llama_token_type`).
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// Fill-in-the-middle sentinel tokens, StarCoder and Qwen-Coder spellings.
const FIM_SPELLINGS: [[&str; 3]; 2] = [
    ["<fim_prefix>", "<fim_suffix>", "<fim_middle>"],
    ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"],
];

/// The ids of a vocabulary's fill-in-the-middle tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fim {
    pub prefix: u32,
    pub suffix: u32,
    pub middle: u32,
}

/// A model's tokenizer with the special ids generation needs.
pub struct Vocabulary {
    tokenizer: Tokenizer,
    /// Prepended to every prompt, where the model wants it.
    bos: Option<u32>,
    /// End of text, fed as the prompt when there is nothing else to condition on.
    eos: Option<u32>,
    /// Tokens that end a completion: end of text and every control token (a file separator
    /// or chat marker in the middle of code means the code ended).
    ends: HashSet<u32>,
    fim: Option<Fim>,
}

impl Vocabulary {
    /// The tokenizer for the model at `model`, whose GGUF metadata is `metadata`.
    pub fn load(
        metadata: &std::collections::HashMap<String, Value>,
        model: &Path,
    ) -> Result<Vocabulary, GgufError> {
        let beside = model.with_file_name("tokenizer.json");
        let tokenizer = if beside.is_file() {
            Tokenizer::from_file(&beside).map_err(|e| GgufError::TokenizerFile {
                detail: e.to_string(),
                path: beside,
            })?
        } else {
            let json = tokenizer_json(metadata)?;
            Tokenizer::from_str(&json.to_string())
                .map_err(|e| GgufError::UnusableTokenizer(e.to_string()))?
        };
        let id = |key: &str| metadata.get(key).and_then(|v| v.to_u32().ok());
        let add_bos = metadata
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(false);
        let eos = id("tokenizer.ggml.eos_token_id");
        let mut ends: HashSet<u32> = eos.into_iter().collect();
        ends.extend(id("tokenizer.ggml.eot_token_id"));
        ends.extend(
            tokenizer
                .get_added_tokens_decoder()
                .into_iter()
                .filter(|(_, token)| token.special)
                .map(|(id, _)| id),
        );
        let fim = FIM_SPELLINGS.iter().find_map(|[p, s, m]| {
            Some(Fim {
                prefix: tokenizer.token_to_id(p)?,
                suffix: tokenizer.token_to_id(s)?,
                middle: tokenizer.token_to_id(m)?,
            })
        });
        Ok(Vocabulary {
            bos: id("tokenizer.ggml.bos_token_id").filter(|_| add_bos),
            eos,
            ends,
            fim,
            tokenizer,
        })
    }

    /// `text` as token ids, without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// The text of generated `ids` (incomplete UTF-8 at the end shows as U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.tokenizer
            .decode(ids, false)
            .map_err(|e| TokenizerError::Decode(e.to_string()))
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    pub fn fim(&self) -> Option<Fim> {
        self.fim
    }

    /// Whether generating `id` ends the completion.
    pub fn ends(&self, id: u32) -> bool {
        self.ends.contains(&id)
    }
}

/// The `tokenizer.json` (Hugging Face's format) that the GGUF metadata describes: a GPT-2
/// style byte-level BPE with the pre-tokenizer `tokenizer.ggml.pre` names.
fn tokenizer_json(metadata: &std::collections::HashMap<String, Value>) -> Result<Json, GgufError> {
    let kind = metadata
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok())
        .ok_or(GgufError::NoTokenizer("tokenizer.ggml.model"))?;
    if kind != "gpt2" {
        return Err(GgufError::UnsupportedTokenizer(kind.clone()));
    }
    let strings = |key: &'static str| -> Result<Vec<String>, GgufError> {
        let values = metadata
            .get(key)
            .and_then(|v| v.to_vec().ok())
            .ok_or(GgufError::NoTokenizer(key))?;
        values
            .iter()
            .map(|v| {
                v.to_string()
                    .cloned()
                    .map_err(|_| GgufError::NotStrings(key))
            })
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?;
    let types: Vec<i32> = match metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .map_err(|e| GgufError::TokenTypes(e.to_string()))?
            .iter()
            .map(|t| t.to_i32().unwrap_or(1))
            .collect(),
        None => Vec::new(),
    };
    let mut vocab = Map::new();
    let mut added = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        vocab.insert(token.clone(), json!(id));
        let kind = types.get(id).copied().unwrap_or(1);
        if kind == CONTROL || kind == USER_DEFINED {
            added.push(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": kind == CONTROL,
            }));
        }
    }
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
    let pre = metadata
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.to_string().ok())
        .map_or("default", String::as_str);
    // The splits llama.cpp applies for each `pre` name, as tokenizers' pre-tokenizers.
    let pre_tokenizers = match pre {
        "qwen2" | "deepseek-r1-qwen" => vec![split(QWEN2_SPLIT), byte_level(false)],
        "llama3" | "llama-bpe" | "llama-v3" => vec![split(LLAMA3_SPLIT), byte_level(false)],
        "smollm" | "starcoder" | "refact" => vec![
            json!({"type": "Digits", "individual_digits": true}),
            split(GPT2_SPLIT),
            byte_level(false),
        ],
        _ => vec![split(GPT2_SPLIT), byte_level(false)],
    };
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pre_tokenizers},
        "post_processor": null,
        "decoder": byte_level(true),
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges,
        },
    }))
}
