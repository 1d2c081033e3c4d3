//! The forward pass of the decoder-only transformers keyhole runs: the llama family, Qwen2
//! (biases on the query, key and value projections) and Qwen3 (each head's queries and keys
//! normalized), written with candle's tensor operations.
//!
//! Two things candle-transformers' models do not offer are why it is written here: each
//! weight matrix is multiplied in the representation that is fastest for the rows at hand
//! ([`Matrix`]: f32 GEMM for a prompt, quantized for one new token), and the KV cache is
//! keyhole's, with the tokens it holds, so that a prompt that shares a prefix with the last
//! sequence only computes the rest ([`Transformer::prefill`]).

use candle_core::{D, DType, Device, Result, Tensor};
use candle_nn::ops::{rms_norm, silu, softmax_last_dim};
use candle_nn::rotary_emb::{rope, rope_i};

use super::header::Hyperparameters;
use super::weights::{GgufFile, Kept, Matrix, Pass, is_float, one_line};

/// Prompt tokens fed per forward pass: bounds the attention scores' memory on long prompts
/// and lets a cancelled request stop between chunks.
const PREFILL_CHUNK: usize = 512;

/// KV caches grow by whole multiples of this many positions (and at least double), so that
/// generating token by token copies them rarely.
const CACHE_GROWTH: usize = 256;

/// A loaded model and the keys and values of the last sequence it read.
pub struct Transformer {
    /// `(vocabulary, embedding)` f32 rows, looked up by token id.
    embeddings: Tensor,
    layers: Vec<Layer>,
    output_norm: Norm,
    output: Matrix,
    rotary: Rotary,
    shape: Shape,
    /// The tokens whose keys and values every layer's cache holds, in order.
    tokens: Vec<u32>,
}

/// The sizes of attention.
#[derive(Clone, Copy)]
struct Shape {
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    context: usize,
}

/// What a layer needs to know of the pass it is in.
struct Context<'a> {
    /// Tokens held before this pass's.
    position: usize,
    rotary: &'a Rotary,
    shape: Shape,
    /// The causal mask, where the pass has more than one token.
    mask: Option<&'a Tensor>,
    pass: Pass,
}

/// What [`Transformer::prefill`] did: the logits after the prompt's last token, and how many
/// of its tokens came from the cache.
pub struct Prefilled {
    pub logits: Tensor,
    pub reused: usize,
}

struct Layer {
    attention_norm: Norm,
    query: Projection,
    key: Projection,
    value: Projection,
    /// Qwen3's norms of each head's queries and keys, before rotation.
    head_norms: Option<(Norm, Norm)>,
    attention_output: Matrix,
    feed_forward_norm: Norm,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
    cache: KvCache,
}

/// A matrix with an optional bias (Qwen2's attention has them).
struct Projection {
    matrix: Matrix,
    bias: Option<Tensor>,
}

/// Root-mean-square normalization over the last dimension, then a per-channel scale.
struct Norm {
    weight: Tensor,
    epsilon: f32,
}

/// Rotary position embedding: cosines and sines for every position, and which dimensions
/// pair up (llama's GGUF files interleave them; Qwen's pair each half with the other).
struct Rotary {
    cos: Tensor,
    sin: Tensor,
    /// Leading dimensions of each head that turn; the rest pass unchanged.
    dims: usize,
    interleaved: bool,
}

/// One layer's keys and values, `(kv heads, positions, head size)`, in buffers with room to
/// grow.
struct KvCache {
    keys: Option<Tensor>,
    values: Option<Tensor>,
    /// Positions held.
    len: usize,
    /// The most positions it ever holds: the model's context.
    limit: usize,
}

impl Transformer {
    /// Reads the model in `file` (architecture `arch`, hyperparameters checked), its matrices
    /// held as `kept` says.
    pub fn load(
        file: &mut GgufFile,
        arch: &str,
        hyper: &Hyperparameters,
        kept: Kept,
    ) -> std::result::Result<Transformer, String> {
        let embedding = hyper.embedding;
        let shape = Shape {
            heads: hyper.heads,
            kv_heads: hyper.kv_heads,
            head_dim: hyper.head_dim,
            context: hyper.context_length,
        };
        let norm = |file: &mut GgufFile, name: &str, size: usize| {
            Ok::<_, String>(Norm {
                weight: file.vector(name, size)?,
                epsilon: hyper.rms_epsilon,
            })
        };
        let vocabulary = file.rows("token_embd.weight")?;
        let stored_embeddings = file.tensor("token_embd.weight", &[vocabulary, embedding])?;
        let embeddings = stored_embeddings
            .dequantize(&Device::Cpu)
            .map_err(|e| format!("cannot read `token_embd.weight`: {}", one_line(&e)))?;
        let output = if file.has("output.weight") {
            file.matrix("output.weight", (vocabulary, embedding), kept.for_output())?
        } else if kept.quantized && !is_float(stored_embeddings.dtype()) {
            // Tied embeddings: the output projection multiplies a quantized copy of them.
            Matrix::new(stored_embeddings, Kept::QUANTIZED)
                .map_err(|e| format!("cannot load `token_embd.weight`: {}", one_line(&e)))?
        } else {
            Matrix::from_f32(embeddings.clone())
        };
        let output_norm = norm(file, "output_norm.weight", embedding)?;
        let queries = shape.heads * shape.head_dim;
        let keys = shape.kv_heads * shape.head_dim;
        let mut layers = Vec::with_capacity(hyper.blocks);
        for index in 0..hyper.blocks {
            let name = |part: &str| format!("blk.{index}.{part}");
            let feed_forward = file.rows(&name("ffn_gate.weight"))?;
            let mut projection = |part: &str, rows: usize| {
                let bias = name(&format!("{part}.bias"));
                Ok::<_, String>(Projection {
                    matrix: file.matrix(
                        &name(&format!("{part}.weight")),
                        (rows, embedding),
                        kept,
                    )?,
                    bias: match file.has(&bias) {
                        true => Some(file.vector(&bias, rows)?),
                        false => None,
                    },
                })
            };
            let query = projection("attn_q", queries)?;
            let key = projection("attn_k", keys)?;
            let value = projection("attn_v", keys)?;
            let head_norms = match file.has(&name("attn_q_norm.weight")) {
                true => Some((
                    norm(file, &name("attn_q_norm.weight"), shape.head_dim)?,
                    norm(file, &name("attn_k_norm.weight"), shape.head_dim)?,
                )),
                false => None,
            };
            layers.push(Layer {
                attention_norm: norm(file, &name("attn_norm.weight"), embedding)?,
                query,
                key,
                value,
                head_norms,
                attention_output: file.matrix(
                    &name("attn_output.weight"),
                    (embedding, queries),
                    kept,
                )?,
                feed_forward_norm: norm(file, &name("ffn_norm.weight"), embedding)?,
                gate: file.matrix(&name("ffn_gate.weight"), (feed_forward, embedding), kept)?,
                up: file.matrix(&name("ffn_up.weight"), (feed_forward, embedding), kept)?,
                down: file.matrix(&name("ffn_down.weight"), (embedding, feed_forward), kept)?,
                cache: KvCache::new(shape.context),
            });
        }
        let rotary = Rotary::new(hyper, arch == "llama")
            .map_err(|e| format!("cannot compute the rotary tables: {}", one_line(&e)))?;
        Ok(Transformer {
            embeddings,
            layers,
            output_norm,
            output,
            rotary,
            shape,
            tokens: Vec::new(),
        })
    }

    /// Makes the cache hold `prompt` and returns the logits after its last token. The longest
    /// prefix `prompt` shares with the tokens already held is kept (as llama.cpp's
    /// `cache_prompt`), the rest is computed a chunk at a time; `None` once `cancelled` says.
    pub fn prefill(
        &mut self,
        prompt: &[u32],
        cancelled: impl Fn() -> bool,
    ) -> Result<Option<Prefilled>> {
        if prompt.is_empty() {
            candle_core::bail!("an empty prompt");
        }
        let shared = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(held, new)| held == new)
            .count();
        // The last prompt token is always fed: its logits are what the prompt is for.
        let reused = shared.min(prompt.len() - 1);
        self.rewind(reused);
        let mut logits = None;
        for chunk in prompt[reused..].chunks(PREFILL_CHUNK) {
            if cancelled() {
                return Ok(None);
            }
            logits = Some(self.feed(chunk, Pass::Prompt)?);
        }
        let logits = logits.expect("at least the last prompt token is fed");
        Ok(Some(Prefilled { logits, reused }))
    }

    /// Feeds a generated token after the tokens held and returns the logits after it.
    pub fn forward(&mut self, token: u32) -> Result<Tensor> {
        self.feed(&[token], Pass::Token)
    }

    /// Feeds `ids` after the tokens held and returns the logits after the last of them.
    fn feed(&mut self, ids: &[u32], pass: Pass) -> Result<Tensor> {
        let result = self.run(ids, pass);
        match result {
            Ok(_) => self.tokens.extend(ids),
            // Some layers may have cached the ids and others not: start afresh next time.
            Err(_) => self.rewind(0),
        }
        result
    }

    /// Forgets the held tokens from position `len` on.
    pub fn rewind(&mut self, len: usize) {
        self.tokens.truncate(len);
        for layer in &mut self.layers {
            layer.cache.len = layer.cache.len.min(len);
        }
    }

    fn run(&mut self, ids: &[u32], pass: Pass) -> Result<Tensor> {
        let position = self.tokens.len();
        let count = ids.len();
        if position + count > self.shape.context {
            candle_core::bail!(
                "{} tokens, more than the model's context of {}",
                position + count,
                self.shape.context
            );
        }
        let vocabulary = self.embeddings.dim(0)?;
        if let Some(id) = ids.iter().find(|&&id| id as usize >= vocabulary) {
            candle_core::bail!("token {id} is not in the model's {vocabulary} embeddings");
        }
        let ids = Tensor::new(ids, &Device::Cpu)?;
        let mut hidden = self.embeddings.index_select(&ids, 0)?;
        let mask = match count {
            1 => None,
            _ => Some(causal_mask(count, position)?),
        };
        for layer in &mut self.layers {
            let normed = layer.attention_norm.forward(&hidden)?;
            let context = Context {
                position,
                rotary: &self.rotary,
                shape: self.shape,
                mask: mask.as_ref(),
                pass,
            };
            let attended = layer.attend(&normed, &context)?;
            hidden = (hidden + attended)?;
            let normed = layer.feed_forward_norm.forward(&hidden)?;
            let fed = layer.feed_forward(&normed, pass)?;
            hidden = (hidden + fed)?;
        }
        let last = hidden.narrow(0, count - 1, 1)?;
        let logits = self
            .output
            .forward(&self.output_norm.forward(&last)?, Pass::Token)?;
        logits.squeeze(0)
    }
}

impl Layer {
    /// Self-attention of `input` (`(tokens, embedding)`, normalized) over the cached keys and
    /// values and its own.
    fn attend(&mut self, input: &Tensor, context: &Context) -> Result<Tensor> {
        let count = input.dim(0)?;
        let Shape {
            heads,
            kv_heads,
            head_dim,
            ..
        } = context.shape;
        let pass = context.pass;
        let query = self.query.forward(input, pass)?;
        let key = self.key.forward(input, pass)?;
        let value = self.value.forward(input, pass)?;
        let query = query.reshape((count, heads, head_dim))?;
        let key = key.reshape((count, kv_heads, head_dim))?;
        let value = value.reshape((count, kv_heads, head_dim))?;
        let (query, key) = match &self.head_norms {
            Some((query_norm, key_norm)) => (query_norm.forward(&query)?, key_norm.forward(&key)?),
            None => (query, key),
        };
        // Heads first: (heads, tokens, head size).
        let query = context
            .rotary
            .apply(&query.transpose(0, 1)?, context.position)?;
        let key = context
            .rotary
            .apply(&key.transpose(0, 1)?, context.position)?;
        let value = value.transpose(0, 1)?.contiguous()?;
        let (keys, values) = self.cache.append(&key, &value)?;
        let positions = keys.dim(1)?;
        // Each key head serves `group` consecutive query heads: stacking their queries as
        // rows lets one product per key head cover them, without copying the keys.
        let group = heads / kv_heads;
        let query = query.reshape((kv_heads, group * count, head_dim))?;
        let scores = query
            .matmul(&keys.t()?)?
            .affine(1.0 / (head_dim as f64).sqrt(), 0.0)?;
        let scores = match context.mask {
            None => scores,
            Some(mask) => scores
                .reshape((kv_heads, group, count, positions))?
                .broadcast_add(mask)?
                .reshape((kv_heads, group * count, positions))?,
        };
        let mixed = softmax_last_dim(&scores)?.matmul(&values)?;
        let mixed = mixed
            .reshape((heads, count, head_dim))?
            .transpose(0, 1)?
            .reshape((count, heads * head_dim))?;
        self.attention_output.forward(&mixed, pass)
    }

    /// The gated feed-forward network (SwiGLU) on `input` (normalized).
    fn feed_forward(&self, input: &Tensor, pass: Pass) -> Result<Tensor> {
        let gate = silu(&self.gate.forward(input, pass)?)?;
        self.down
            .forward(&(gate * self.up.forward(input, pass)?)?, pass)
    }
}

impl Projection {
    fn forward(&self, input: &Tensor, pass: Pass) -> Result<Tensor> {
        let product = self.matrix.forward(input, pass)?;
        match &self.bias {
            Some(bias) => product.broadcast_add(bias),
            None => Ok(product),
        }
    }
}

impl Norm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        rms_norm(input, &self.weight, self.epsilon)
    }
}

impl Rotary {
    fn new(hyper: &Hyperparameters, interleaved: bool) -> Result<Rotary> {
        let half = hyper.rotary / 2;
        let frequencies: Vec<f32> = (0..half)
            .map(|i| 1.0 / hyper.rope_base.powf((2 * i) as f32 / hyper.rotary as f32))
            .collect();
        let angles: Vec<f32> = (0..hyper.context_length)
            .flat_map(|position| frequencies.iter().map(move |f| position as f32 * f))
            .collect();
        let angles = Tensor::from_vec(angles, (hyper.context_length, half), &Device::Cpu)?;
        Ok(Rotary {
            cos: angles.cos()?,
            sin: angles.sin()?,
            dims: hyper.rotary,
            interleaved,
        })
    }

    /// `heads` (`(heads, tokens, head size)`) turned by their positions from `position` on.
    fn apply(&self, heads: &Tensor, position: usize) -> Result<Tensor> {
        let (_, count, head_dim) = heads.dims3()?;
        let cos = self.cos.narrow(0, position, count)?;
        let sin = self.sin.narrow(0, position, count)?;
        let turn = |x: &Tensor| {
            let x = x.contiguous()?.unsqueeze(0)?;
            let turned = match self.interleaved {
                true => rope_i(&x, &cos, &sin)?,
                false => rope(&x, &cos, &sin)?,
            };
            turned.squeeze(0)
        };
        if self.dims == head_dim {
            return turn(heads);
        }
        let turned = turn(&heads.narrow(D::Minus1, 0, self.dims)?)?;
        let rest = heads.narrow(D::Minus1, self.dims, head_dim - self.dims)?;
        Tensor::cat(&[&turned, &rest.contiguous()?], D::Minus1)
    }
}

impl KvCache {
    fn new(limit: usize) -> KvCache {
        KvCache {
            keys: None,
            values: None,
            len: 0,
            limit,
        }
    }

    /// Appends `key` and `value` (`(kv heads, tokens, head size)`) and returns every position
    /// held, as views of the buffers.
    fn append(&mut self, key: &Tensor, value: &Tensor) -> Result<(Tensor, Tensor)> {
        let needed = self.len + key.dim(1)?;
        let capacity = match &self.keys {
            Some(keys) => keys.dim(1)?,
            None => 0,
        };
        if needed > capacity {
            let grown = needed
                .max(2 * capacity)
                .next_multiple_of(CACHE_GROWTH)
                .min(self.limit)
                .max(needed);
            self.keys = Some(grow(self.keys.take(), key, self.len, grown)?);
            self.values = Some(grow(self.values.take(), value, self.len, grown)?);
        }
        let (Some(keys), Some(values)) = (&self.keys, &self.values) else {
            unreachable!("allocated above")
        };
        keys.slice_set(key, 1, self.len)?;
        values.slice_set(value, 1, self.len)?;
        self.len = needed;
        Ok((keys.narrow(1, 0, needed)?, values.narrow(1, 0, needed)?))
    }
}

/// A buffer of `capacity` positions shaped like `like`, holding the first `len` of `old`.
fn grow(old: Option<Tensor>, like: &Tensor, len: usize, capacity: usize) -> Result<Tensor> {
    let (heads, _, head_dim) = like.dims3()?;
    let buffer = Tensor::zeros((heads, capacity, head_dim), DType::F32, &Device::Cpu)?;
    if let Some(old) = old.filter(|_| len > 0) {
        buffer.slice_set(&old.narrow(1, 0, len)?.contiguous()?, 1, 0)?;
    }
    Ok(buffer)
}

/// Added to the scores of `count` tokens from `position` on: minus infinity where a key comes
/// after its query, so that no token sees its future.
fn causal_mask(count: usize, position: usize) -> Result<Tensor> {
    let positions = position + count;
    let mask: Vec<f32> = (0..count)
        .flat_map(|row| {
            (0..positions).map(move |key| match key > position + row {
                true => f32::NEG_INFINITY,
                false => 0.0,
            })
        })
        .collect();
    Tensor::from_vec(mask, (count, positions), &Device::Cpu)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use candle_core::quantized::gguf_file::{self, Content, Value};
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::model::config::Matrices;

    const EMBEDDING: usize = 64;
    const HEADS: usize = 4;
    const KV_HEADS: usize = 2;
    const HEAD: usize = EMBEDDING / HEADS;
    const FEED_FORWARD: usize = 128;
    const VOCABULARY: usize = 48;
    const LAYERS: usize = 2;
    const CONTEXT: usize = 600;

    /// A model of `arch` with random weights, its matrices rounded to `dtype`, written into
    /// `dir`: stored as `dtype`, or with `as_f32` as the f32 values of that rounding.
    fn tiny(dir: &Path, arch: &str, dtype: GgmlDType, as_f32: bool) -> PathBuf {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut random = |dims: &[usize], scale: f32, around: f32, dtype: GgmlDType| {
            let count = dims.iter().product();
            let values: Vec<f32> = (0..count)
                .map(|_| around + scale * (rng.random::<f32>() * 2.0 - 1.0))
                .collect();
            let tensor = Tensor::from_vec(values, dims, &Device::Cpu).unwrap();
            let rounded = QTensor::quantize(&tensor, dtype).unwrap();
            match as_f32 {
                true => {
                    let values = rounded.dequantize(&Device::Cpu).unwrap();
                    QTensor::quantize(&values, GgmlDType::F32).unwrap()
                }
                false => rounded,
            }
        };
        let mut tensors = vec![
            (
                "token_embd.weight".to_string(),
                random(&[VOCABULARY, EMBEDDING], 1.0, 0.0, GgmlDType::F32),
            ),
            (
                "output_norm.weight".into(),
                random(&[EMBEDDING], 0.1, 1.0, GgmlDType::F32),
            ),
        ];
        if arch != "qwen3" {
            // Qwen3's output projection is tied to its embeddings here.
            tensors.push((
                "output.weight".into(),
                random(&[VOCABULARY, EMBEDDING], 0.5, 0.0, dtype),
            ));
        }
        for layer in 0..LAYERS {
            let name = |part: &str| format!("blk.{layer}.{part}");
            for (part, rows, columns) in [
                ("attn_q.weight", HEADS * HEAD, EMBEDDING),
                ("attn_k.weight", KV_HEADS * HEAD, EMBEDDING),
                ("attn_v.weight", KV_HEADS * HEAD, EMBEDDING),
                ("attn_output.weight", EMBEDDING, HEADS * HEAD),
                ("ffn_gate.weight", FEED_FORWARD, EMBEDDING),
                ("ffn_up.weight", FEED_FORWARD, EMBEDDING),
                ("ffn_down.weight", EMBEDDING, FEED_FORWARD),
            ] {
                tensors.push((name(part), random(&[rows, columns], 0.5, 0.0, dtype)));
            }
            for part in ["attn_norm.weight", "ffn_norm.weight"] {
                tensors.push((name(part), random(&[EMBEDDING], 0.1, 1.0, GgmlDType::F32)));
            }
            if arch == "qwen2" {
                for (part, size) in [
                    ("attn_q.bias", HEADS * HEAD),
                    ("attn_k.bias", KV_HEADS * HEAD),
                    ("attn_v.bias", KV_HEADS * HEAD),
                ] {
                    tensors.push((name(part), random(&[size], 0.5, 0.0, GgmlDType::F32)));
                }
            }
            if arch == "qwen3" {
                for part in ["attn_q_norm.weight", "attn_k_norm.weight"] {
                    tensors.push((name(part), random(&[HEAD], 0.1, 1.0, GgmlDType::F32)));
                }
            }
        }
        let key = |name: &str| format!("{arch}.{name}");
        let count = |n: usize| Value::U32(n as u32);
        let metadata = vec![
            (
                "general.architecture".to_string(),
                Value::String(arch.into()),
            ),
            (key("attention.head_count"), count(HEADS)),
            (key("attention.head_count_kv"), count(KV_HEADS)),
            (key("attention.key_length"), count(HEAD)),
            (key("block_count"), count(LAYERS)),
            (key("embedding_length"), count(EMBEDDING)),
            (key("rope.dimension_count"), count(HEAD)),
            (key("rope.freq_base"), Value::F32(10_000.0)),
            (key("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
            (key("context_length"), count(CONTEXT)),
            // candle-transformers' Qwen3 computes its rotary tables in f16 unless told f32.
            ("general.dtype".into(), count(0)),
        ];
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let path = dir.join(format!("{arch}-{dtype:?}-{as_f32}.gguf"));
        let mut file = std::fs::File::create(&path).unwrap();
        gguf_file::write(&mut file, &metadata, &tensors).unwrap();
        path
    }

    fn own(path: &Path, matrices: Matrices) -> Transformer {
        let mut file = GgufFile::open(path).unwrap();
        let arch = file.architecture().unwrap();
        let hyper = Hyperparameters::check(&file.content, &arch, 1 << 30).unwrap();
        let kept = file.kept(matrices);
        Transformer::load(&mut file, &arch, &hyper, kept).unwrap()
    }

    /// candle-transformers' model of the same file: what keyhole ran before its own.
    enum Reference {
        Llama(quantized_llama::ModelWeights),
        Qwen2(quantized_qwen2::ModelWeights),
        Qwen3(quantized_qwen3::ModelWeights),
    }

    impl Reference {
        fn load(path: &Path, arch: &str) -> Reference {
            let mut reader = std::fs::File::open(path).unwrap();
            let content = Content::read(&mut reader).unwrap();
            let device = Device::Cpu;
            match arch {
                "llama" => Reference::Llama(
                    quantized_llama::ModelWeights::from_gguf(content, &mut reader, &device)
                        .unwrap(),
                ),
                "qwen2" => Reference::Qwen2(
                    quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &device)
                        .unwrap(),
                ),
                _ => Reference::Qwen3(
                    quantized_qwen3::ModelWeights::from_gguf(content, &mut reader, &device)
                        .unwrap(),
                ),
            }
        }

        fn forward(&mut self, ids: &[u32], position: usize) -> Tensor {
            let input = Tensor::new(ids, &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let logits = match self {
                Reference::Llama(m) => m.forward(&input, position),
                Reference::Qwen2(m) => m.forward(&input, position),
                Reference::Qwen3(m) => m.forward(&input, position),
            };
            logits.unwrap().squeeze(0).unwrap()
        }
    }

    /// The largest difference between `a` and `b`, relative to `b`'s largest magnitude.
    fn relative_difference(a: &Tensor, b: &Tensor) -> f32 {
        let largest = |t: &Tensor| t.abs().unwrap().max_all().unwrap().to_scalar::<f32>();
        largest(&(a - b).unwrap()).unwrap() / largest(b).unwrap()
    }

    fn argmax(logits: &Tensor) -> u32 {
        logits.argmax(0).unwrap().to_scalar().unwrap()
    }

    /// A prompt of `length` tokens.
    fn prompt(length: usize) -> Vec<u32> {
        (0..length).map(|i| (i * 7 % VOCABULARY) as u32).collect()
    }

    /// Runs a 250-token prompt and 10 tokens (past the cache's first 256 positions) through
    /// keyhole's model of `own_file` and candle-transformers' of `reference_file`, comparing
    /// the logits after the prompt and after each token (the reference's most likely one).
    /// The most likely tokens must agree where `greedy` says.
    fn compare(
        arch: &str,
        files: (&Path, &Path),
        matrices: Matrices,
        tolerances: (f32, f32),
        greedy: bool,
    ) {
        let (own_file, reference_file) = files;
        let mut reference = Reference::load(reference_file, arch);
        let mut model = own(own_file, matrices);
        let prompt = prompt(250);
        let mut expected = reference.forward(&prompt, 0);
        let mut logits = model.prefill(&prompt, || false).unwrap().unwrap().logits;
        for step in 0..10 {
            let tolerance = if step == 0 {
                tolerances.0
            } else {
                tolerances.1
            };
            let off = relative_difference(&logits, &expected);
            assert!(off <= tolerance, "{arch}, step {step}: {off}");
            let next = argmax(&expected);
            if greedy {
                assert_eq!(argmax(&logits), next, "{arch}, step {step}");
            }
            expected = reference.forward(&[next], prompt.len() + step);
            logits = model.forward(next).unwrap();
        }
    }

    #[test]
    fn the_forward_pass_matches_candle_transformers_on_f32_matrices() {
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let file = tiny(dir.path(), arch, GgmlDType::F32, false);
            compare(arch, (&file, &file), Matrices::Auto, (1e-4, 1e-4), true);
        }
    }

    #[test]
    fn the_forward_pass_matches_candle_transformers_on_q8_0_matrices_kept_quantized() {
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let file = tiny(dir.path(), arch, GgmlDType::Q8_0, false);
            compare(
                arch,
                (&file, &file),
                Matrices::Quantized,
                (1e-3, 1e-3),
                true,
            );
        }
    }

    #[test]
    fn by_default_prompts_run_as_f32_and_tokens_as_q8_0() {
        // Against the same values as f32 throughout: the prompt's logits differ by the
        // output projection's rounding of its one row to 8 bits (it multiplies the quantized
        // copy), each token's by every product's (a wrong position or a stale cache moves
        // them by far more).
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let stored = tiny(dir.path(), arch, GgmlDType::Q8_0, false);
            let as_f32 = tiny(dir.path(), arch, GgmlDType::Q8_0, true);
            compare(arch, (&stored, &as_f32), Matrices::Auto, (1e-2, 0.1), false);
        }
    }

    #[test]
    fn a_prompt_sharing_a_prefix_with_the_cache_computes_only_the_rest_and_the_same_logits() {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny(dir.path(), "qwen2", GgmlDType::Q8_0, false);
        let mut cached = own(&path, Matrices::Auto);
        let mut fresh = own(&path, Matrices::Auto);
        let first = prompt(40);
        assert_eq!(cached.prefill(&first, || false).unwrap().unwrap().reused, 0);
        cached.forward(3).unwrap();
        cached.forward(5).unwrap();
        // An edit after the first 30 tokens.
        let mut edited = first[..30].to_vec();
        edited.extend([9, 10, 11, 12]);
        let again = cached.prefill(&edited, || false).unwrap().unwrap();
        assert_eq!(again.reused, 30);
        let once = fresh.prefill(&edited, || false).unwrap().unwrap();
        assert_eq!(once.reused, 0);
        let off = relative_difference(&again.logits, &once.logits);
        assert!(off < 1e-5, "{off}");
        // The same prompt once more (the next sample): all but its last token are reused.
        let same = cached.prefill(&edited, || false).unwrap().unwrap();
        assert_eq!(same.reused, edited.len() - 1);
        assert!(relative_difference(&same.logits, &once.logits) < 1e-5);
        // And the tokens generated after it carry on as after a fresh prompt.
        let off = relative_difference(&cached.forward(7).unwrap(), &fresh.forward(7).unwrap());
        assert!(off < 1e-5, "{off}");
    }

    #[test]
    fn a_cancelled_prefill_stops_and_the_next_prompt_starts_from_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny(dir.path(), "llama", GgmlDType::Q8_0, false);
        let mut model = own(&path, Matrices::Auto);
        let long = prompt(PREFILL_CHUNK + 20);
        let calls = std::cell::Cell::new(0);
        // Cancelled after the first chunk.
        let cancelled = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        assert!(model.prefill(&long, cancelled).unwrap().is_none());
        let resumed = model.prefill(&long, || false).unwrap().unwrap();
        assert_eq!(resumed.reused, PREFILL_CHUNK);
    }
}
