//! A tiny model with random weights, written as a GGUF file, for the forward pass's and the
//! batch's tests.

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EMBEDDING: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD: usize = EMBEDDING / HEADS;
const FEED_FORWARD: usize = 128;
pub const VOCABULARY: usize = 48;
/// The token that ends a text.
pub const END: usize = VOCABULARY - 1;
const LAYERS: usize = 2;
pub const CONTEXT: usize = 600;

/// A model of `arch` with random weights, its matrices rounded to `dtype`, written into
/// `dir`: stored as `dtype`, or with `as_f32` as the f32 values of that rounding. Its
/// vocabulary is one printable character per token, the last token ending the text.
pub fn tiny(dir: &Path, arch: &str, dtype: GgmlDType, as_f32: bool) -> PathBuf {
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
    let mut metadata = vec![
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
    let tokens: Vec<String> = (0..VOCABULARY)
        .map(|id| match id {
            END => "<|endoftext|>".to_string(),
            _ => char::from(b'!' + id as u8).to_string(),
        })
        .collect();
    let types = (0..VOCABULARY)
        .map(|id| Value::I32(if id == END { 3 } else { 1 }))
        .collect();
    metadata.extend([
        (
            "tokenizer.ggml.model".to_string(),
            Value::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(Vec::new())),
        ("tokenizer.ggml.token_type".into(), Value::Array(types)),
        ("tokenizer.ggml.eos_token_id".into(), count(END)),
    ]);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let path = dir.join(format!("{arch}-{dtype:?}-{as_f32}.gguf"));
    let mut file = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
    path
}
