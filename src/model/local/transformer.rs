//! The forward pass of the decoder-only transformers keyhole runs: the llama family, Qwen2
//! (biases on the query, key and value projections) and Qwen3 (each head's queries and keys
//! normalized). Its matrix products are candle's (those of Q4_1 and Q8_0 matrices keyhole's
//! own, `block_matrix`, `q4_1` and `q8_0`), and a prompt's attention; a generated
//! token's attention over its cache runs by hand on the CPU pool (`attention`), and the
//! element-wise work between the products (norms, rotation, the gated activation) runs by
//! hand on the rows' values, which for a generated token are a few thousand numbers a layer:
//! candle's operations allocated a tensor for each step of each.
//!
//! Three things candle-transformers' models do not offer are why it is written here: each
//! weight matrix is multiplied in the representation that is fastest for the rows at hand
//! ([`Matrix`]: f32 GEMM for a prompt, quantized for new tokens); the KV caches are
//! keyhole's, one [`Sequence`] each with the tokens it holds, so that a prompt that shares a
//! prefix with a held sequence only computes the rest ([`Transformer::prefill`]); and one
//! step decodes a token for each of several sequences, their rows multiplied together
//! ([`Transformer::step`]).

use candle_core::{Device, Result, Tensor};
use candle_nn::ops::softmax_last_dim;

use super::attention;
use super::error::GgufError;
use super::header::Hyperparameters;
use super::weights::{GgufFile, Kept, Matrix, Pass, is_float, load_failed, one_line};

/// Prompt tokens fed per forward pass: bounds the attention scores' memory on long prompts
/// and lets a cancelled request stop between chunks.
const PREFILL_CHUNK: usize = 512;

/// KV caches grow by whole multiples of this many positions (and at least double), so that
/// generating token by token copies them rarely.
const CACHE_GROWTH: usize = 256;

/// A loaded model: its weights, read-only once loaded. What it read of each sequence is that
/// sequence's [`Sequence`].
pub struct Transformer {
    /// `(vocabulary, embedding)` f32 rows, looked up by token id.
    embeddings: Tensor,
    layers: Vec<Layer>,
    output_norm: Norm,
    output: Matrix,
    rotary: Rotary,
    shape: Shape,
}

/// One sequence's keys and values in every layer, and the tokens they are of.
pub struct Sequence {
    /// The tokens whose keys and values every layer's cache holds, in order.
    tokens: Vec<u32>,
    /// One per layer.
    caches: Vec<KvCache>,
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
    /// Each sequence's rows in the pass.
    spans: &'a [Span],
    rotary: &'a Rotary,
    shape: Shape,
    pass: Pass,
}

/// One sequence's rows in a pass: consecutive tokens fed after those it holds.
struct Span {
    /// Its first row among the pass's.
    start: usize,
    count: usize,
    /// Tokens the sequence held before.
    position: usize,
    /// The causal mask, where it feeds more than one token.
    mask: Option<Tensor>,
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
}

/// A matrix with an optional bias (Qwen2's attention has them).
struct Projection {
    matrix: Matrix,
    bias: Option<Tensor>,
}

/// Root-mean-square normalization of rows as long as its weights, then a per-channel scale.
struct Norm {
    weight: Vec<f32>,
    epsilon: f32,
}

/// Rotary position embedding: cosines and sines for every position, and which dimensions
/// pair up (llama's GGUF files interleave them; Qwen's pair each half with the other).
struct Rotary {
    /// `context x dims / 2`: each position's angles.
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Leading dimensions of each head that turn; the rest pass unchanged.
    dims: usize,
    interleaved: bool,
}

/// One layer's keys and values, each `kv heads x capacity x head size` of which the first
/// `len` positions of each head are held, in buffers with room to grow.
struct KvCache {
    keys: Vec<f32>,
    values: Vec<f32>,
    capacity: usize,
    len: usize,
    /// The most positions it ever holds: the model's context.
    limit: usize,
    heads: usize,
    head_dim: usize,
}

impl Transformer {
    /// Reads the model in `file` (architecture `arch`, hyperparameters checked), its matrices
    /// held as `kept` says.
    pub fn load(
        file: &mut GgufFile,
        arch: &str,
        hyper: &Hyperparameters,
        kept: Kept,
    ) -> std::result::Result<Transformer, GgufError> {
        let embedding = hyper.embedding;
        let shape = Shape {
            heads: hyper.heads,
            kv_heads: hyper.kv_heads,
            head_dim: hyper.head_dim,
            context: hyper.context_length,
        };
        let norm = |file: &mut GgufFile, name: &str, size: usize| {
            let weight = file.vector(name, size)?;
            Ok::<_, GgufError>(Norm {
                weight: weight.to_vec1().map_err(|e| load_failed(name, &e))?,
                epsilon: hyper.rms_epsilon,
            })
        };
        let vocabulary = file.rows("token_embd.weight")?;
        let stored_embeddings = file.tensor("token_embd.weight", &[vocabulary, embedding])?;
        let embeddings =
            stored_embeddings
                .dequantize(&Device::Cpu)
                .map_err(|e| GgufError::Dequantize {
                    name: "token_embd.weight".into(),
                    detail: one_line(&e),
                })?;
        let output = if file.has("output.weight") {
            file.matrix("output.weight", (vocabulary, embedding), kept.for_output())?
        } else if kept.quantized && !is_float(stored_embeddings.dtype()) {
            // Tied embeddings: the output projection multiplies a quantized copy of them.
            Matrix::new(stored_embeddings, Kept::QUANTIZED)
                .map_err(|e| load_failed("token_embd.weight", &e))?
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
                Ok::<_, GgufError>(Projection {
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
            });
        }
        let rotary = Rotary::new(hyper, arch == "llama");
        Ok(Transformer {
            embeddings,
            layers,
            output_norm,
            output,
            rotary,
            shape,
        })
    }

    /// A sequence that holds nothing yet.
    pub fn sequence(&self) -> Sequence {
        Sequence {
            tokens: Vec::new(),
            caches: (0..self.layers.len())
                .map(|_| KvCache::new(self.shape))
                .collect(),
        }
    }

    /// Makes `sequence` hold `prompt` and returns the logits after its last token. The longest
    /// prefix `prompt` shares with the tokens it already holds is kept (as llama.cpp's
    /// `cache_prompt`), the rest is computed a chunk at a time; `None` once `cancelled` says.
    pub fn prefill(
        &self,
        sequence: &mut Sequence,
        prompt: &[u32],
        cancelled: impl Fn() -> bool,
    ) -> Result<Option<Prefilled>> {
        if prompt.is_empty() {
            candle_core::bail!("an empty prompt");
        }
        // The last prompt token is always fed: its logits are what the prompt is for.
        let reused = sequence.shared(prompt).min(prompt.len() - 1);
        sequence.rewind(reused);
        let mut logits = None;
        for chunk in prompt[reused..].chunks(PREFILL_CHUNK) {
            if cancelled() {
                return Ok(None);
            }
            logits = Some(
                self.feed(&mut [sequence], &[chunk], Pass::Prompt)?
                    .squeeze(0)?,
            );
        }
        let logits = logits.expect("at least the last prompt token is fed");
        Ok(Some(Prefilled { logits, reused }))
    }

    /// Feeds one generated token to each sequence, `tokens[i]` after what `sequences[i]`
    /// holds, in one pass whose products multiply all their rows at once, and returns the
    /// logits after each, `(sequences, vocabulary)`. Each sequence attends to its own cache
    /// only, so its logits are what it gets alone.
    pub fn step(&self, sequences: &mut [&mut Sequence], tokens: &[u32]) -> Result<Tensor> {
        let ids: Vec<&[u32]> = tokens.iter().map(std::slice::from_ref).collect();
        self.feed(sequences, &ids, Pass::Token)
    }

    /// Feeds `ids[i]` after the tokens `sequences[i]` holds and returns the logits after the
    /// last of each, `(sequences, vocabulary)`.
    fn feed(&self, sequences: &mut [&mut Sequence], ids: &[&[u32]], pass: Pass) -> Result<Tensor> {
        let result = self.run(sequences, ids, pass);
        for (sequence, ids) in sequences.iter_mut().zip(ids) {
            match result {
                Ok(_) => sequence.tokens.extend(*ids),
                // Some layers may have cached the ids and others not: start afresh next time.
                Err(_) => sequence.rewind(0),
            }
        }
        result
    }

    fn run(&self, sequences: &mut [&mut Sequence], ids: &[&[u32]], pass: Pass) -> Result<Tensor> {
        let vocabulary = self.embeddings.dim(0)?;
        let mut spans = Vec::with_capacity(ids.len());
        let mut rows = 0;
        for (sequence, ids) in sequences.iter().zip(ids) {
            let position = sequence.tokens.len();
            let count = ids.len();
            if count == 0 {
                candle_core::bail!("nothing to feed");
            }
            if position + count > self.shape.context {
                candle_core::bail!(
                    "{} tokens, more than the model's context of {}",
                    position + count,
                    self.shape.context
                );
            }
            if let Some(id) = ids.iter().find(|&&id| id as usize >= vocabulary) {
                candle_core::bail!("token {id} is not in the model's {vocabulary} embeddings");
            }
            let mask = match count {
                1 => None,
                _ => Some(causal_mask(count, position)?),
            };
            spans.push(Span {
                start: rows,
                count,
                position,
                mask,
            });
            rows += count;
        }
        let all: Vec<u32> = ids.concat();
        let all = Tensor::new(all.as_slice(), &Device::Cpu)?;
        let mut hidden = self.embeddings.index_select(&all, 0)?;
        let context = Context {
            spans: &spans,
            rotary: &self.rotary,
            shape: self.shape,
            pass,
        };
        for (index, layer) in self.layers.iter().enumerate() {
            let normed = layer.attention_norm.forward(&hidden)?;
            let mut caches: Vec<&mut KvCache> = sequences
                .iter_mut()
                .map(|sequence| &mut sequence.caches[index])
                .collect();
            let attended = layer.attend(&normed, &mut caches, &context)?;
            hidden = (hidden + attended)?;
            let normed = layer.feed_forward_norm.forward(&hidden)?;
            let fed = layer.feed_forward(&normed, pass)?;
            hidden = (hidden + fed)?;
        }
        // Only the last row of each sequence is read out.
        let last: Vec<u32> = spans
            .iter()
            .map(|s| (s.start + s.count - 1) as u32)
            .collect();
        let last = hidden.index_select(&Tensor::new(last.as_slice(), &Device::Cpu)?, 0)?;
        self.output
            .forward(&self.output_norm.forward(&last)?, Pass::Token)
    }
}

impl Sequence {
    /// How many of `prompt`'s first tokens it holds.
    pub fn shared(&self, prompt: &[u32]) -> usize {
        self.tokens
            .iter()
            .zip(prompt)
            .take_while(|(held, new)| held == new)
            .count()
    }

    /// Forgets the held tokens from position `len` on.
    pub fn rewind(&mut self, len: usize) {
        self.tokens.truncate(len);
        for cache in &mut self.caches {
            cache.len = cache.len.min(len);
        }
    }

    /// A new sequence holding a copy of the first `len` tokens of this one (a prompt that
    /// several samples continue).
    pub fn fork(&self, len: usize) -> Sequence {
        let len = len.min(self.tokens.len());
        Sequence {
            tokens: self.tokens[..len].to_vec(),
            caches: self.caches.iter().map(|cache| cache.copy(len)).collect(),
        }
    }
}

impl Layer {
    /// Self-attention of `input` (`(rows, embedding)`, normalized): each span's rows over
    /// its sequence's cache (`caches`, in the order of `context.spans`) and its own.
    fn attend(
        &self,
        input: &Tensor,
        caches: &mut [&mut KvCache],
        context: &Context,
    ) -> Result<Tensor> {
        let pass = context.pass;
        let projections = [&self.query, &self.key, &self.value];
        let products = Matrix::forward_each(projections.map(|p| &p.matrix), input, pass)?;
        let [query, key, value] = products;
        let [query, key, value] = [
            self.query.add_bias(query)?,
            self.key.add_bias(key)?,
            self.value.add_bias(value)?,
        ];
        let spans = context.spans.iter().zip(caches);
        let projected = |span: &Span| {
            let rows = |t: &Tensor| {
                t.narrow(0, span.start, span.count)?
                    .flatten_all()?
                    .to_vec1::<f32>()
            };
            Ok::<_, candle_core::Error>((rows(&query)?, rows(&key)?, rows(&value)?))
        };
        let mixed = if context.spans.iter().all(|span| span.count == 1) {
            // A generated token per sequence: by hand, on the CPU pool.
            let cached = spans
                .map(|(span, cache)| {
                    let query = self.cache(projected(span)?, cache, span, context);
                    Ok((query, &**cache))
                })
                .collect::<Result<Vec<_>>>()?;
            attend_rows(&cached, context.shape)?
        } else {
            let mixed = spans
                .map(|(span, cache)| self.attend_span(projected(span)?, cache, span, context))
                .collect::<Result<Vec<_>>>()?;
            match mixed.len() {
                1 => mixed.into_iter().next().expect("one span"),
                _ => Tensor::cat(&mixed, 0)?,
            }
        };
        self.attention_output.forward(&mixed, pass)
    }

    /// One span's projected queries, keys and values (`tokens x heads x head size` each),
    /// each head normalized where the model says and rotated to its token's position; the
    /// keys and values appended to its `cache`. Returns the queries.
    fn cache(
        &self,
        (mut query, mut key, value): (Vec<f32>, Vec<f32>, Vec<f32>),
        cache: &mut KvCache,
        span: &Span,
        context: &Context,
    ) -> Vec<f32> {
        let Shape {
            heads,
            kv_heads,
            head_dim,
            ..
        } = context.shape;
        if let Some((query_norm, key_norm)) = &self.head_norms {
            query_norm.normalize(&mut query);
            key_norm.normalize(&mut key);
        }
        let rotary = context.rotary;
        rotary.apply(&mut query, (heads, head_dim), span.position);
        rotary.apply(&mut key, (kv_heads, head_dim), span.position);
        cache.append(&key, &value);
        query
    }

    /// One span's attention with candle's products (a prompt's rows): its queries over
    /// everything its cache holds after [`Layer::cache`]; `(tokens, heads x head size)`.
    fn attend_span(
        &self,
        projected: (Vec<f32>, Vec<f32>, Vec<f32>),
        cache: &mut KvCache,
        span: &Span,
        context: &Context,
    ) -> Result<Tensor> {
        let count = span.count;
        let Shape {
            heads,
            kv_heads,
            head_dim,
            ..
        } = context.shape;
        let query = self.cache(projected, cache, span, context);
        // Heads first: (heads, tokens, head size).
        let query = Tensor::from_vec(query, (count, heads, head_dim), &Device::Cpu)?
            .transpose(0, 1)?
            .contiguous()?;
        let (keys, values) = cache.held()?;
        let positions = cache.len;
        // Each key head serves `group` consecutive query heads: stacking their queries as
        // rows lets one product per key head cover them, without copying the keys.
        let group = heads / kv_heads;
        let query = query.reshape((kv_heads, group * count, head_dim))?;
        let scores = query
            .matmul(&keys.t()?)?
            .affine(1.0 / (head_dim as f64).sqrt(), 0.0)?;
        let scores = match &span.mask {
            None => scores,
            Some(mask) => scores
                .reshape((kv_heads, group, count, positions))?
                .broadcast_add(mask)?
                .reshape((kv_heads, group * count, positions))?,
        };
        let mixed = softmax_last_dim(&scores)?.matmul(&values)?;
        mixed
            .reshape((heads, count, head_dim))?
            .transpose(0, 1)?
            .reshape((count, heads * head_dim))
    }

    /// The gated feed-forward network (SwiGLU) on `input` (normalized).
    fn feed_forward(&self, input: &Tensor, pass: Pass) -> Result<Tensor> {
        let [gate, up] = Matrix::forward_each([&self.gate, &self.up], input, pass)?;
        let shape = gate.shape().clone();
        let mut gated = gate.flatten_all()?.to_vec1::<f32>()?;
        let up = up.flatten_all()?.to_vec1::<f32>()?;
        for (gate, up) in gated.iter_mut().zip(up) {
            // SiLU (gate / (1 + e^-gate), as candle computes it) times the up projection.
            *gate = *gate / (1.0 + (-*gate).exp()) * up;
        }
        self.down
            .forward(&Tensor::from_vec(gated, shape, &Device::Cpu)?, pass)
    }
}

impl Projection {
    /// `product`, the matrix's, plus the bias where there is one.
    fn add_bias(&self, product: Tensor) -> Result<Tensor> {
        match &self.bias {
            Some(bias) => product.broadcast_add(bias),
            None => Ok(product),
        }
    }
}

impl Norm {
    /// `input`'s rows normalized.
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let mut rows = input.flatten_all()?.to_vec1::<f32>()?;
        self.normalize(&mut rows);
        Tensor::from_vec(rows, input.shape(), &Device::Cpu)
    }

    /// Normalizes each row of `rows` in place, in the order of candle's `rms_norm` (the same
    /// values to the bit).
    fn normalize(&self, rows: &mut [f32]) {
        let size = self.weight.len();
        for row in rows.chunks_exact_mut(size) {
            let squares: f32 = row.iter().map(|v| v * v).sum();
            let root = (squares / size as f32 + self.epsilon).sqrt();
            for (value, weight) in row.iter_mut().zip(&self.weight) {
                *value = *value / root * weight;
            }
        }
    }
}

impl Rotary {
    fn new(hyper: &Hyperparameters, interleaved: bool) -> Rotary {
        let half = hyper.rotary / 2;
        let frequencies: Vec<f32> = (0..half)
            .map(|i| 1.0 / hyper.rope_base.powf((2 * i) as f32 / hyper.rotary as f32))
            .collect();
        let angles: Vec<f32> = (0..hyper.context_length)
            .flat_map(|position| frequencies.iter().map(move |f| position as f32 * f))
            .collect();
        Rotary {
            cos: angles.iter().map(|a| a.cos()).collect(),
            sin: angles.iter().map(|a| a.sin()).collect(),
            dims: hyper.rotary,
            interleaved,
        }
    }

    /// Turns each head of `rows` (`tokens x heads x head size`, the first token at
    /// `position`) by its token's position, in place, as candle's `rope_i` and `rope` do.
    fn apply(&self, rows: &mut [f32], (heads, head_dim): (usize, usize), position: usize) {
        let half = self.dims / 2;
        for (index, head) in rows.chunks_exact_mut(head_dim).enumerate() {
            let at = (position + index / heads) * half;
            let (cos, sin) = (&self.cos[at..at + half], &self.sin[at..at + half]);
            let turned = &mut head[..self.dims];
            if self.interleaved {
                for ((pair, cos), sin) in turned.chunks_exact_mut(2).zip(cos).zip(sin) {
                    let (x, y) = (pair[0], pair[1]);
                    pair[0] = x * cos - y * sin;
                    pair[1] = x * sin + y * cos;
                }
            } else {
                let (first, second) = turned.split_at_mut(half);
                for (((x, y), cos), sin) in first.iter_mut().zip(second).zip(cos).zip(sin) {
                    let (a, b) = (*x, *y);
                    *x = a * cos - b * sin;
                    *y = a * sin + b * cos;
                }
            }
        }
    }
}

impl KvCache {
    fn new(shape: Shape) -> KvCache {
        KvCache {
            keys: Vec::new(),
            values: Vec::new(),
            capacity: 0,
            len: 0,
            limit: shape.context,
            heads: shape.kv_heads,
            head_dim: shape.head_dim,
        }
    }

    /// Appends `keys` and `values` (`tokens x kv heads x head size`) after the positions held.
    fn append(&mut self, keys: &[f32], values: &[f32]) {
        let head_dim = self.head_dim;
        let tokens = keys.len() / (self.heads * head_dim);
        let needed = self.len + tokens;
        if needed > self.capacity {
            let grown = needed
                .max(2 * self.capacity)
                .next_multiple_of(CACHE_GROWTH)
                .min(self.limit)
                .max(needed);
            *self = self.copy_into(self.len, grown);
        }
        let (held, capacity, heads) = (self.len, self.capacity, self.heads);
        for (buffer, rows) in [(&mut self.keys, keys), (&mut self.values, values)] {
            for (index, head_row) in rows.chunks_exact(head_dim).enumerate() {
                let (token, head) = (index / heads, index % heads);
                let at = (head * capacity + held + token) * head_dim;
                buffer[at..at + head_dim].copy_from_slice(head_row);
            }
        }
        self.len = needed;
    }

    /// Every position held, `(kv heads, positions, head size)`, for candle's products.
    fn held(&self) -> Result<(Tensor, Tensor)> {
        let shape = (self.heads, self.capacity, self.head_dim);
        let held = |buffer: &[f32]| {
            Tensor::from_slice(buffer, shape, &Device::Cpu)?.narrow(1, 0, self.len)
        };
        Ok((held(&self.keys)?, held(&self.values)?))
    }

    /// A cache holding a copy of the first `len` positions of this one, with room to grow.
    fn copy(&self, len: usize) -> KvCache {
        let len = len.min(self.len);
        self.copy_into(len, len.next_multiple_of(CACHE_GROWTH).min(self.limit))
    }

    /// A cache with room for `capacity` positions holding the first `len` of this one.
    fn copy_into(&self, len: usize, capacity: usize) -> KvCache {
        let head_dim = self.head_dim;
        let copy = |buffer: &[f32]| {
            let mut copied = vec![0.0; self.heads * capacity * head_dim];
            for head in 0..self.heads {
                let (from, to) = (head * self.capacity * head_dim, head * capacity * head_dim);
                copied[to..to + len * head_dim]
                    .copy_from_slice(&buffer[from..from + len * head_dim]);
            }
            copied
        };
        KvCache {
            keys: copy(&self.keys),
            values: copy(&self.values),
            capacity,
            len,
            ..*self
        }
    }
}

/// The attention of one new row per sequence (its rotated queries, `heads x head size`, and
/// its cache holding the row's keys and values): `(sequences, heads x head size)`.
fn attend_rows(cached: &[(Vec<f32>, &KvCache)], shape: Shape) -> Result<Tensor> {
    let rows: Vec<attention::Row> = cached
        .iter()
        .map(|(queries, cache)| attention::Row {
            queries,
            keys: &cache.keys,
            values: &cache.values,
            capacity: cache.capacity,
            positions: cache.len,
        })
        .collect();
    let heads = attention::Heads {
        heads: shape.heads,
        kv_heads: shape.kv_heads,
        head_dim: shape.head_dim,
    };
    let mixed = attention::attend(&rows, heads);
    Tensor::from_vec(
        mixed,
        (rows.len(), shape.heads * shape.head_dim),
        &Device::Cpu,
    )
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
    use std::path::Path;

    use candle_core::quantized::GgmlDType;
    use candle_core::quantized::gguf_file::Content;
    use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

    use super::*;
    use crate::model::config::Matrices;
    use crate::model::local::fixture::{CONTEXT, VOCABULARY, tiny};

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

    /// The logits after `token` fed to `sequence` alone.
    fn forward(model: &Transformer, sequence: &mut Sequence, token: u32) -> Tensor {
        let logits = model.step(&mut [sequence], &[token]).unwrap();
        logits.squeeze(0).unwrap()
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
        let model = own(own_file, matrices);
        let mut sequence = model.sequence();
        let prompt = prompt(250);
        let mut expected = reference.forward(&prompt, 0);
        let prefilled = model.prefill(&mut sequence, &prompt, || false).unwrap();
        let mut logits = prefilled.unwrap().logits;
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
            logits = forward(&model, &mut sequence, next);
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
    fn q4_1_matrices_kept_quantized_are_within_8_bit_rounding_of_their_f32_values() {
        // keyhole multiplies Q4_1 with its own kernel, prompts and tokens alike here, its
        // activations rounded to 8 bits a block. Against candle-transformers on the same
        // values as f32 throughout, the logits after the 250-token prompt were 0.026-0.044
        // off (candle-transformers' own Q4_1 kernel, which rounds the activations alike:
        // 0.025-0.045); a product that lost a block's minimum or scale, or mixed up rows,
        // moves them by far more. Not candle-transformers' Q4_1 itself: in a random model
        // this small, an activation that rounds the other way after a sum in another order
        // moves the logits by as much (0.017-0.040 apart), so only the kernels' shared
        // rounding can be bounded.
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let stored = tiny(dir.path(), arch, GgmlDType::Q4_1, false);
            let as_f32 = tiny(dir.path(), arch, GgmlDType::Q4_1, true);
            compare(
                arch,
                (&stored, &as_f32),
                Matrices::Quantized,
                (0.1, 0.1),
                false,
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
        let model = own(&path, Matrices::Auto);
        let (mut cached, mut fresh) = (model.sequence(), model.sequence());
        let first = prompt(40);
        let read = |sequence: &mut Sequence, prompt: &[u32]| {
            model.prefill(sequence, prompt, || false).unwrap().unwrap()
        };
        assert_eq!(read(&mut cached, &first).reused, 0);
        forward(&model, &mut cached, 3);
        forward(&model, &mut cached, 5);
        // An edit after the first 30 tokens.
        let mut edited = first[..30].to_vec();
        edited.extend([9, 10, 11, 12]);
        let again = read(&mut cached, &edited);
        assert_eq!(again.reused, 30);
        let once = read(&mut fresh, &edited);
        assert_eq!(once.reused, 0);
        let off = relative_difference(&again.logits, &once.logits);
        assert!(off < 1e-5, "{off}");
        // The same prompt once more: all but its last token are reused.
        let same = read(&mut cached, &edited);
        assert_eq!(same.reused, edited.len() - 1);
        assert!(relative_difference(&same.logits, &once.logits) < 1e-5);
        // And the tokens generated after it carry on as after a fresh prompt.
        let off = relative_difference(
            &forward(&model, &mut cached, 7),
            &forward(&model, &mut fresh, 7),
        );
        assert!(off < 1e-5, "{off}");
    }

    #[test]
    fn a_cancelled_prefill_stops_and_the_next_prompt_starts_from_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny(dir.path(), "llama", GgmlDType::Q8_0, false);
        let model = own(&path, Matrices::Auto);
        let mut sequence = model.sequence();
        let long = prompt(PREFILL_CHUNK + 20);
        let calls = std::cell::Cell::new(0);
        // Cancelled after the first chunk.
        let cancelled = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        assert!(
            model
                .prefill(&mut sequence, &long, cancelled)
                .unwrap()
                .is_none()
        );
        let resumed = model
            .prefill(&mut sequence, &long, || false)
            .unwrap()
            .unwrap();
        assert_eq!(resumed.reused, PREFILL_CHUNK);
    }

    #[test]
    fn a_batched_step_gives_each_sequence_exactly_the_logits_it_gets_alone() {
        // Sequences of different lengths and tokens, stepped together and each alone: the rows
        // of one product do not mix, and each attends to its own cache.
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let path = tiny(dir.path(), arch, GgmlDType::Q8_0, false);
            let model = own(&path, Matrices::Auto);
            let prompts = [prompt(30), prompt(7), prompt(300)[100..].to_vec()];
            let start = |prompt: &Vec<u32>| {
                let mut sequence = model.sequence();
                model.prefill(&mut sequence, prompt, || false).unwrap();
                sequence
            };
            let mut together: Vec<Sequence> = prompts.iter().map(start).collect();
            let mut alone: Vec<Sequence> = prompts.iter().map(start).collect();
            for step in 0..5u32 {
                let tokens = [step, 2 * step + 1, 40 - step];
                let mut batch: Vec<&mut Sequence> = together.iter_mut().collect();
                let logits = model.step(&mut batch, &tokens).unwrap();
                for (index, sequence) in alone.iter_mut().enumerate() {
                    let expected = forward(&model, sequence, tokens[index]);
                    let got = logits.get(index).unwrap();
                    assert_eq!(
                        relative_difference(&got, &expected),
                        0.0,
                        "{arch}, step {step}"
                    );
                }
            }
            for (a, b) in together.iter().zip(&alone) {
                assert_eq!(a.tokens, b.tokens);
            }
        }
    }

    #[test]
    fn a_generated_tokens_attention_over_a_long_cache_is_the_prompts_and_alike_on_any_pool() {
        // f32 matrices throughout, so that a generated token's pass (attention by hand, on the
        // pool) differs from a prompt's (candle's products) in rounding alone: a wrong
        // position, a missed piece of the cache or a mixed-up head moves the logits by far
        // more.
        let dir = tempfile::tempdir().unwrap();
        for arch in ["llama", "qwen2", "qwen3"] {
            let path = tiny(dir.path(), arch, GgmlDType::F32, false);
            let model = own(&path, Matrices::Auto);
            let long = prompt(CONTEXT - 20);
            let (last, before) = long.split_last().unwrap();
            let generated_on = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let mut sequence = model.sequence();
                    model.prefill(&mut sequence, before, || false).unwrap();
                    forward(&model, &mut sequence, *last)
                })
            };
            let alone = generated_on(1);
            for threads in [2, 3] {
                let off = relative_difference(&generated_on(threads), &alone);
                assert_eq!(off, 0.0, "{arch}, {threads} threads");
            }
            let mut whole = model.sequence();
            let read = model.prefill(&mut whole, &long, || false).unwrap().unwrap();
            let off = relative_difference(&alone, &read.logits);
            assert!(off < 1e-5, "{arch}: {off}");
        }
    }

    #[test]
    fn greedy_tokens_after_a_long_prompt_are_candle_transformers_on_one_thread_and_on_two() {
        // Several hundred positions of cache, so that a generated token's attention spans
        // several of its pieces, and every element-wise step of the token's pass in each
        // architecture; quantized throughout, as the reference is.
        const GREEDY: usize = 32;
        let dir = tempfile::tempdir().unwrap();
        let long = prompt(450);
        for arch in ["llama", "qwen2", "qwen3"] {
            let path = tiny(dir.path(), arch, GgmlDType::Q8_0, false);
            let mut reference = Reference::load(&path, arch);
            let mut expected = vec![argmax(&reference.forward(&long, 0))];
            while expected.len() < GREEDY {
                let position = long.len() + expected.len() - 1;
                let last = *expected.last().unwrap();
                expected.push(argmax(&reference.forward(&[last], position)));
            }
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let generated = pool.install(|| {
                    let model = own(&path, Matrices::Quantized);
                    let mut sequence = model.sequence();
                    let read = model.prefill(&mut sequence, &long, || false).unwrap();
                    let mut tokens = vec![argmax(&read.unwrap().logits)];
                    while tokens.len() < GREEDY {
                        let last = *tokens.last().unwrap();
                        tokens.push(argmax(&forward(&model, &mut sequence, last)));
                    }
                    tokens
                });
                assert_eq!(generated, expected, "{arch}, {threads} threads");
            }
        }
    }

    #[test]
    fn a_forked_sequence_continues_as_the_original_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny(dir.path(), "llama", GgmlDType::Q8_0, false);
        let model = own(&path, Matrices::Auto);
        let mut original = model.sequence();
        let prompt = prompt(260);
        model.prefill(&mut original, &prompt, || false).unwrap();
        let mut fork = original.fork(prompt.len());
        // The original goes on past the prompt; the fork keeps the prompt alone.
        forward(&model, &mut original, 1);
        assert_eq!(fork.tokens, prompt);
        let mut again = original.fork(prompt.len());
        let expected = forward(&model, &mut fork, 2);
        assert_eq!(
            relative_difference(&forward(&model, &mut again, 2), &expected),
            0.0
        );
    }
}
