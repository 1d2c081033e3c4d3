//! The encoder itself: `config.json`, `model.safetensors` and `tokenizer.json` read into a
//! candle forward pass (the `bert` feature).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear, ops};
use serde::Deserialize;
use tokenizers::{PostProcessor, Tokenizer, TruncationDirection};

use super::{EncoderError, MAX_BYTES, MAX_TOKENS};
use crate::rank::classifier::features::kept_bytes;
use crate::token::Keep;

/// The parts of `config.json` the forward pass needs (Hugging Face's names).
#[derive(Deserialize)]
struct Config {
    #[serde(default = "default_model_type")]
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab_size")]
    type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    layer_norm_eps: f64,
    #[serde(default)]
    pad_token_id: usize,
    #[serde(default = "default_hidden_act")]
    hidden_act: String,
}

fn default_model_type() -> String {
    "bert".into()
}
fn default_type_vocab_size() -> usize {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}
fn default_hidden_act() -> String {
    "gelu".into()
}

#[derive(Clone, Copy)]
enum Activation {
    /// Hugging Face's "gelu": the exact, erf-based one.
    Gelu,
    /// "gelu_new" / "gelu_pytorch_tanh": the tanh approximation.
    GeluTanh,
    Relu,
}

impl Activation {
    fn named(name: &str) -> Option<Activation> {
        match name {
            "gelu" => Some(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }

    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Gelu => x.gelu_erf(),
            Activation::GeluTanh => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

impl Layer {
    fn new(vb: VarBuilder, c: &Config) -> Result<Layer> {
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let attention = vb.pp("attention");
        let own = attention.pp("self");
        Ok(Layer {
            query: linear(h, h, own.pp("query"))?,
            key: linear(h, h, own.pp("key"))?,
            value: linear(h, h, own.pp("value"))?,
            attention_out: linear(h, h, attention.pp("output").pp("dense"))?,
            attention_norm: layer_norm(h, eps, attention.pp("output").pp("LayerNorm"))?,
            intermediate: linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            output: linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            output_norm: layer_norm(h, eps, vb.pp("output").pp("LayerNorm"))?,
        })
    }

    /// `x` `[1, n, hidden]` → `[1, n, hidden]`; one unpadded sequence, so no attention mask.
    fn forward(&self, x: &Tensor, heads: usize, activation: Activation) -> Result<Tensor> {
        let (b, n, hidden) = x.dims3()?;
        let head_dim = hidden / heads;
        let split = |proj: &Linear| -> Result<Tensor> {
            proj.forward(x)?
                .reshape((b, n, heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let (q, k, v) = (split(&self.query)?, split(&self.key)?, split(&self.value)?);
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?;
        let attended = ops::softmax_last_dim(&scores)?
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, n, hidden))?;
        let x = self
            .attention_norm
            .forward(&(self.attention_out.forward(&attended)? + x)?)?;
        let inner = activation.apply(&self.intermediate.forward(&x)?)?;
        self.output_norm
            .forward(&(self.output.forward(&inner)? + x)?)
    }
}

pub struct BertEncoder {
    dir: PathBuf,
    tokenizer: Tokenizer,
    words: Embedding,
    positions: Embedding,
    token_type: Option<Tensor>,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    activation: Activation,
    /// RoBERTa numbers positions from padding_idx + 1; BERT from 0.
    first_position: usize,
    max_tokens: usize,
    width: usize,
}

impl BertEncoder {
    /// The model in `dir`; any problem is an error naming the directory or file.
    pub fn load(dir: &Path) -> std::result::Result<BertEncoder, EncoderError> {
        let fail = |path: &Path, reason: String| EncoderError {
            path: path.display().to_string(),
            reason: reason.lines().next().unwrap_or_default().to_string(),
        };
        if !dir.is_dir() {
            return Err(fail(
                dir,
                "not a directory (expected config.json, model.safetensors and tokenizer.json)"
                    .into(),
            ));
        }
        let config_path = dir.join("config.json");
        let config: Config = std::fs::read_to_string(&config_path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
            .map_err(|e| fail(&config_path, e))?;
        let first_position = match config.model_type.as_str() {
            "bert" => 0,
            "roberta" | "xlm-roberta" | "camembert" => config.pad_token_id + 1,
            other => {
                return Err(fail(
                    &config_path,
                    format!("model_type {other:?} is not supported (bert or roberta)"),
                ));
            }
        };
        let activation = Activation::named(&config.hidden_act).ok_or_else(|| {
            fail(
                &config_path,
                format!(
                    "hidden_act {:?} is not supported (gelu, gelu_new or relu)",
                    config.hidden_act
                ),
            )
        })?;
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(fail(
                &config_path,
                "hidden_size is not a multiple of num_attention_heads".into(),
            ));
        }
        let max_tokens = MAX_TOKENS.min(
            config
                .max_position_embeddings
                .saturating_sub(first_position),
        );
        if max_tokens < 3 {
            return Err(fail(
                &config_path,
                "max_position_embeddings leaves no room for text".into(),
            ));
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| fail(&tokenizer_path, e.to_string()))?;
        // Truncation is done here, per text; padding would only add work to one sequence.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| fail(&tokenizer_path, e.to_string()))?;
        let weights_path = dir.join("model.safetensors");
        let tensors = candle_core::safetensors::load(&weights_path, &Device::Cpu)
            .map_err(|e| fail(&weights_path, e.to_string()))?;
        let prefix = ["", "bert.", "roberta."]
            .into_iter()
            .find(|p| tensors.contains_key(&format!("{p}embeddings.word_embeddings.weight")))
            .ok_or_else(|| fail(&weights_path, "no embeddings.word_embeddings.weight (with or without a bert. or roberta. prefix): not a BERT-family model".into()))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let vb = match prefix {
            "" => vb,
            p => vb.pp(p.trim_end_matches('.')),
        };
        let weights = |e: candle_core::Error| fail(&weights_path, e.to_string());
        let (h, c) = (config.hidden_size, &config);
        let embeddings = vb.pp("embeddings");
        let token_type = match embeddings.contains_tensor("token_type_embeddings.weight") {
            true => Some(
                embeddings
                    .get((c.type_vocab_size, h), "token_type_embeddings.weight")
                    .and_then(|t| t.get(0))
                    .map_err(weights)?,
            ),
            false => None,
        };
        Ok(BertEncoder {
            words: embedding(c.vocab_size, h, embeddings.pp("word_embeddings")).map_err(weights)?,
            positions: embedding(
                c.max_position_embeddings,
                h,
                embeddings.pp("position_embeddings"),
            )
            .map_err(weights)?,
            token_type,
            norm: layer_norm(h, c.layer_norm_eps, embeddings.pp("LayerNorm")).map_err(weights)?,
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::new(vb.pp("encoder.layer").pp(i), c))
                .collect::<Result<_>>()
                .map_err(weights)?,
            heads: c.num_attention_heads,
            activation,
            first_position,
            max_tokens,
            width: h,
            dir: dir.to_path_buf(),
            tokenizer,
        })
    }

    /// The hidden size: the width of every vector [`BertEncoder::encode`] returns.
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hidden state at the first position (the \[CLS\] token) of `text`, cut to the model's
    /// tokens from its `keep` end; a text without tokens gives zeros. An error names the
    /// encoder's directory.
    pub fn encode(&self, text: &str, keep: Keep) -> std::result::Result<Vec<f32>, EncoderError> {
        let encoded = self
            .token_ids(text, keep)
            .and_then(|ids| match ids.is_empty() {
                true => Ok(vec![0.0; self.width]),
                false => self.forward(&ids)?.to_vec1(),
            });
        encoded.map_err(|e| EncoderError {
            path: self.dir.display().to_string(),
            reason: e.to_string().lines().next().unwrap_or_default().to_string(),
        })
    }

    /// A candidate context's vector, `None` when it has no text (RLPG-R then gives it no
    /// attention).
    pub fn encode_context(
        &self,
        text: &str,
        keep: Keep,
    ) -> std::result::Result<Option<Vec<f32>>, EncoderError> {
        match text.is_empty() {
            true => Ok(None),
            false => self.encode(text, keep).map(Some),
        }
    }

    fn token_ids(&self, text: &str, keep: Keep) -> Result<Vec<u32>> {
        let tokenizer = |e: tokenizers::Error| candle_core::Error::Msg(format!("tokenizer: {e}"));
        let mut encoding = self
            .tokenizer
            .encode(kept_bytes(text, keep, MAX_BYTES), false)
            .map_err(tokenizer)?;
        let special = self
            .tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        let direction = match keep {
            Keep::Start => TruncationDirection::Right,
            Keep::End => TruncationDirection::Left,
        };
        encoding.truncate(self.max_tokens.saturating_sub(special), 0, direction);
        let encoding = self
            .tokenizer
            .post_process(encoding, None, true)
            .map_err(tokenizer)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids → the last layer's first hidden state `[hidden]`.
    fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        let dev = &Device::Cpu;
        let first = self.first_position as u32;
        let positions = Tensor::arange(first, first + ids.len() as u32, dev)?;
        let mut x =
            (self.words.forward(&Tensor::new(ids, dev)?)? + self.positions.forward(&positions)?)?;
        if let Some(token_type) = &self.token_type {
            x = x.broadcast_add(token_type)?;
        }
        let mut x = self.norm.forward(&x)?.unsqueeze(0)?;
        for layer in &self.layers {
            x = layer.forward(&x, self.heads, self.activation)?;
        }
        x.i((0, 0))
    }
}
