//! A frozen BERT-family encoder read from a local directory, as the paper's F_phi (section
//! 2.2: CodeBERT's hidden state at the first position, the \[CLS\] token). The directory holds
//! what Hugging Face ships for CodeBERT, GraphCodeBERT, UniXcoder or any BERT/RoBERTa model:
//! `config.json`, `model.safetensors` and `tokenizer.json`. Nothing is ever downloaded.
//!
//! The forward pass is the standard post-norm encoder: word + position + token-type embeddings
//! with layer norm, then per layer self-attention, output projection, residual and layer norm,
//! intermediate layer with GELU, output projection, residual and layer norm.

#[cfg(feature = "bert")]
mod encoder;
#[cfg(feature = "bert")]
pub use encoder::BertEncoder;
#[cfg(not(feature = "bert"))]
pub use unavailable::BertEncoder;

/// Tokens read per text, special tokens included: half of CodeBERT's 512 positions, to halve
/// the encoding time on a CPU (the paper does not say how it truncated). Hole windows (five
/// lines) fit; candidate contexts keep the end that survives the prompt's truncation.
pub const MAX_TOKENS: usize = 256;
/// Bytes of a text tokenized at most: enough for [`MAX_TOKENS`] tokens of ordinary code.
#[cfg_attr(not(feature = "bert"), allow(dead_code))]
const MAX_BYTES: usize = 16 * MAX_TOKENS;

/// What a BERT encoder asked for without the `bert` feature says.
#[cfg_attr(feature = "bert", allow(dead_code))]
pub const NEEDS_FEATURE: &str =
    "BERT encoders need the `bert` feature, which this keyhole was built without";

/// Why an encoder directory cannot be used; `path` names the directory or the file in it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct EncoderError {
    pub path: String,
    pub reason: String,
}

/// Without the `bert` feature no encoder can be loaded: `load` says so, and the type has no
/// values, so the code that would use one compiles and can never run.
#[cfg(not(feature = "bert"))]
mod unavailable {
    use std::path::Path;

    use super::EncoderError;
    use crate::token::Keep;

    #[derive(Debug)]
    pub enum BertEncoder {}

    impl BertEncoder {
        pub fn load(dir: &Path) -> Result<BertEncoder, EncoderError> {
            Err(EncoderError {
                path: dir.display().to_string(),
                reason: super::NEEDS_FEATURE.into(),
            })
        }

        pub fn width(&self) -> usize {
            match *self {}
        }

        pub fn dir(&self) -> &Path {
            match *self {}
        }

        pub fn encode(&self, _text: &str, _keep: Keep) -> Result<Vec<f32>, EncoderError> {
            match *self {}
        }

        pub fn encode_context(
            &self,
            _text: &str,
            _keep: Keep,
        ) -> Result<Option<Vec<f32>>, EncoderError> {
            match *self {}
        }
    }
}
