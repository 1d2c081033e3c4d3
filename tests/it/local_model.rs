//! The local GGUF backend on a tiny llama that the test writes: loading, greedy and seeded
//! sampling, stop rules, streaming, requests sent together (one batch) and one of them
//! dropped, exact token counts, fill-in-the-middle layout, long prompts, and one-line errors
//! for files that cannot be used.
//!
//! The model's layers carry small random weights, and its output matrix is built so that
//! greedy decoding follows a chain of tokens (each token's embedding is the output row of its
//! successor): the text it writes is known in advance, while every layer still runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::reliability_support::fuzz_checks;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use keyhole::testing::model::local::LocalBackend;
use keyhole::{Backend, BackendError, CompletionRequest, TokenCounting};
use keyhole::{BackendConfig, testing::model::config::Matrices};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;

const EMBEDDING: usize = 32;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const LAYERS: usize = 2;
const FEED_FORWARD: usize = 64;
const CONTEXT: usize = 64;
const HOLE: &str = "src/main/java/com/acme/shop/web/BaseController.java:24:24";

/// Merges of the vocabulary: "return" and " x" become single tokens.
const MERGES: [(&str, &str); 6] = [
    ("r", "e"),
    ("re", "t"),
    ("ret", "u"),
    ("retu", "r"),
    ("retur", "n"),
    ("Ġ", "x"),
];
const END: &str = "<|endoftext|>";
const FIM: [&str; 3] = ["<fim_prefix>", "<fim_suffix>", "<fim_middle>"];

/// The text greedy decoding writes after a prompt that ends in `(`: `int`, a space, an `é`
/// split across two byte tokens, a newline, then end of text. (A prompt that ends inside a
/// word loses that word's start to token healing, so the chain starts after punctuation.)
const AFTER_PAREN: &str = "int éx;\n}";
/// The tokens of that chain, in the byte-level alphabet.
const CHAIN: [&str; 12] = ["(", "i", "n", "t", "Ġ", "Ã", "©", "x", ";", "Ċ", "}", END];

/// GPT-2's printable stand-in for each byte.
fn byte_chars() -> Vec<char> {
    let printable = |b: u32| {
        (u32::from('!')..=u32::from('~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut shifted = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                shifted += 1;
                char::from_u32(255 + shifted).unwrap()
            }
        })
        .collect()
}

struct Tiny {
    architecture: &'static str,
    fim: bool,
    tokenizer: bool,
    /// How the weight matrices are quantized.
    matrices: GgmlDType,
}

impl Tiny {
    const LLAMA: Tiny = Tiny {
        architecture: "llama",
        fim: true,
        tokenizer: true,
        matrices: GgmlDType::Q8_0,
    };

    fn vocabulary(&self) -> Vec<String> {
        let mut tokens: Vec<String> = byte_chars().iter().map(char::to_string).collect();
        tokens.extend(MERGES.iter().map(|(a, b)| format!("{a}{b}")));
        tokens.push(END.to_string());
        if self.fim {
            tokens.extend(FIM.map(String::from));
        }
        tokens
    }

    /// Writes the model to `path`.
    fn write(&self, path: &Path) {
        self.write_with(path, &[]);
    }

    /// Writes the model to `path` with the metadata in `changed` set (replaced or added).
    fn write_with(&self, path: &Path, changed: &[(&str, Value)]) {
        let tokens = self.vocabulary();
        let id: HashMap<&str, usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let vocab = tokens.len();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut random = |rows: usize, cols: usize, scale: f32| -> Vec<f32> {
            (0..rows * cols)
                .map(|_| scale * (rng.random::<f32>() * 2.0 - 1.0) * 1.7)
                .collect()
        };
        let embedding = random(vocab, EMBEDDING, 1.0);
        // Each output row is noise, except that a chain token's successor reads its embedding.
        let mut output = random(vocab, EMBEDDING, 1.0);
        for pair in CHAIN.windows(2) {
            let (from, to) = (id[pair[0]], id[pair[1]]);
            output[to * EMBEDDING..(to + 1) * EMBEDDING]
                .copy_from_slice(&embedding[from * EMBEDDING..(from + 1) * EMBEDDING]);
        }
        let head = EMBEDDING / HEADS;
        let tensor = |data: Vec<f32>, rows: usize, cols: usize, dtype: GgmlDType| {
            let t = Tensor::from_vec(data, (rows, cols), &Device::Cpu).unwrap();
            let t = if rows == 1 { t.squeeze(0).unwrap() } else { t };
            QTensor::quantize(&t, dtype).unwrap()
        };
        let mut tensors = vec![
            (
                "token_embd.weight".to_string(),
                tensor(embedding, vocab, EMBEDDING, GgmlDType::F32),
            ),
            (
                "output.weight".to_string(),
                tensor(output, vocab, EMBEDDING, self.matrices),
            ),
            (
                "output_norm.weight".to_string(),
                tensor(vec![1.0; EMBEDDING], 1, EMBEDDING, GgmlDType::F32),
            ),
        ];
        for layer in 0..LAYERS {
            let shapes = [
                ("attn_q", EMBEDDING, EMBEDDING),
                ("attn_k", KV_HEADS * head, EMBEDDING),
                ("attn_v", KV_HEADS * head, EMBEDDING),
                ("attn_output", EMBEDDING, EMBEDDING),
                ("ffn_gate", FEED_FORWARD, EMBEDDING),
                ("ffn_up", FEED_FORWARD, EMBEDDING),
                ("ffn_down", EMBEDDING, FEED_FORWARD),
            ];
            for (name, rows, cols) in shapes {
                let data = random(rows, cols, 0.02);
                tensors.push((
                    format!("blk.{layer}.{name}.weight"),
                    tensor(data, rows, cols, self.matrices),
                ));
            }
            if self.architecture == "qwen2" {
                // Qwen2's attention projections carry biases.
                for (name, size) in [
                    ("attn_q", EMBEDDING),
                    ("attn_k", KV_HEADS * head),
                    ("attn_v", KV_HEADS * head),
                ] {
                    tensors.push((
                        format!("blk.{layer}.{name}.bias"),
                        tensor(vec![0.0; size], 1, size, GgmlDType::F32),
                    ));
                }
            }
            for name in ["attn_norm", "ffn_norm"] {
                tensors.push((
                    format!("blk.{layer}.{name}.weight"),
                    tensor(vec![1.0; EMBEDDING], 1, EMBEDDING, GgmlDType::F32),
                ));
            }
        }
        let arch = self.architecture;
        let mut metadata: Vec<(String, Value)> = vec![
            ("general.architecture".into(), Value::String(arch.into())),
            (
                format!("{arch}.attention.head_count"),
                Value::U32(HEADS as u32),
            ),
            (
                format!("{arch}.attention.head_count_kv"),
                Value::U32(KV_HEADS as u32),
            ),
            (format!("{arch}.block_count"), Value::U32(LAYERS as u32)),
            (
                format!("{arch}.embedding_length"),
                Value::U32(EMBEDDING as u32),
            ),
            (
                format!("{arch}.rope.dimension_count"),
                Value::U32(head as u32),
            ),
            (
                format!("{arch}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-5),
            ),
            (format!("{arch}.context_length"), Value::U32(CONTEXT as u32)),
        ];
        if self.tokenizer {
            let strings =
                |items: Vec<String>| Value::Array(items.into_iter().map(Value::String).collect());
            let types = tokens
                .iter()
                .map(|t| {
                    Value::I32(if t.starts_with('<') && t.len() > 1 {
                        3
                    } else {
                        1
                    })
                })
                .collect();
            metadata.extend([
                ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
                ("tokenizer.ggml.pre".into(), Value::String("smollm".into())),
                ("tokenizer.ggml.tokens".into(), strings(tokens.clone())),
                (
                    "tokenizer.ggml.merges".into(),
                    strings(MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect()),
                ),
                ("tokenizer.ggml.token_type".into(), Value::Array(types)),
                (
                    "tokenizer.ggml.eos_token_id".into(),
                    Value::U32(id[END] as u32),
                ),
                (
                    "tokenizer.ggml.bos_token_id".into(),
                    Value::U32(id[END] as u32),
                ),
            ]);
        }
        for (key, value) in changed {
            metadata.retain(|(k, _)| k != key);
            metadata.push((key.to_string(), value.clone()));
        }
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut file = std::fs::File::create(path).unwrap();
        gguf_file::write(&mut file, &metadata, &tensors).unwrap();
    }
}

/// `spec` written into a fresh directory; the directory lives as long as the result.
fn written(spec: &Tiny) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    spec.write(&path);
    (dir, path)
}

fn backend(path: &Path) -> LocalBackend {
    LocalBackend::open(&BackendConfig::local(path.to_path_buf())).unwrap()
}

fn request(prompt: &str, stop: &[&str], max_tokens: usize) -> CompletionRequest {
    CompletionRequest {
        max_tokens,
        stop: stop.iter().map(|s| s.to_string()).collect(),
        ..CompletionRequest::single_line(prompt.to_string())
    }
}

async fn texts(backend: &LocalBackend, request: &CompletionRequest) -> Vec<String> {
    let completions = backend.complete(request, None).await.unwrap();
    completions.into_iter().map(|c| c.text).collect()
}

async fn text(backend: &LocalBackend, request: &CompletionRequest) -> String {
    let mut texts = texts(backend, request).await;
    assert_eq!(texts.len(), 1);
    texts.remove(0)
}

#[tokio::test]
async fn greedy_decoding_is_deterministic_and_ends_at_end_of_text() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    assert_eq!(backend.model().architecture(), "llama");
    assert_eq!(backend.model().context_length(), CONTEXT);
    let unbounded = request("f(", &[], 40);
    assert_eq!(text(&backend, &unbounded).await, AFTER_PAREN);
    assert_eq!(text(&backend, &unbounded).await, AFTER_PAREN);
}

#[tokio::test]
async fn q4_1_matrices_run_as_well() {
    // candle has no SIMD kernel for Q4_1: keyhole multiplies such matrices with its own.
    let (_dir, path) = written(&Tiny {
        matrices: GgmlDType::Q4_1,
        ..Tiny::LLAMA
    });
    let backend = backend(&path);
    assert_eq!(text(&backend, &request("f(", &[], 40)).await, AFTER_PAREN);
}

#[tokio::test]
async fn generation_stops_at_the_line_end_a_stop_sequence_or_max_tokens() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    let single_line = CompletionRequest::single_line("f(".to_string());
    assert_eq!(text(&backend, &single_line).await, "int éx;");
    assert_eq!(text(&backend, &request("f(", &["éx"], 40)).await, "int ");
    assert_eq!(text(&backend, &request("f(", &[], 2)).await, "in");
    // Five tokens end inside the two-byte `é`: the incomplete character is dropped.
    assert_eq!(text(&backend, &request("f(", &[], 5)).await, "int ");
}

#[tokio::test]
async fn streamed_deltas_add_up_to_the_text_and_never_split_a_character() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let completions = backend
        .complete(&request("f(", &["x;"], 40), Some(&sender))
        .await
        .unwrap();
    drop(sender);
    let mut deltas = Vec::new();
    while let Some(delta) = receiver.recv().await {
        assert_eq!(delta.index, 0);
        deltas.push(delta.text);
    }
    assert_eq!(completions[0].text, "int é");
    assert_eq!(deltas.concat(), "int é");
    assert!(deltas.len() > 1, "{deltas:?}");
    assert!(
        deltas
            .iter()
            .all(|d| !d.contains(char::REPLACEMENT_CHARACTER)),
        "{deltas:?}"
    );
}

#[tokio::test]
async fn seeded_sampling_repeats_and_samples_differ() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    // A high temperature flattens the chain's preference into noise.
    let sampled = CompletionRequest {
        temperature: 100.0,
        seed: Some(11),
        n: 3,
        ..request("f(", &[], 12)
    };
    let prompt = backend.model().prompt_ids(&sampled, 12).unwrap().0;
    let read = || backend.model().decoded().prompt_tokens;
    let before = read();
    let first = texts(&backend, &sampled).await;
    // The three samples read the prompt once.
    assert_eq!(read() - before, prompt.len() as u64);
    let again = texts(&backend, &sampled).await;
    assert_eq!(first.len(), 3);
    assert_eq!(first, again);
    assert!(first[0] != first[1] || first[1] != first[2], "{first:?}");
    assert!(first.iter().all(|t| t != AFTER_PAREN), "{first:?}");
}

/// A copy of the model at `path`, loaded anew: nothing it holds comes from another test's
/// requests. The directory lives as long as the backend.
fn fresh_copy(path: &Path) -> (tempfile::TempDir, LocalBackend) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("fresh.gguf");
    std::fs::copy(path, &copy).unwrap();
    let backend = backend(&copy);
    (dir, backend)
}

/// Requests of every kind: greedy to the end of text, cut by a stop sequence, by
/// `max_tokens`, and sampled twice from another prompt.
fn mixed_requests() -> Vec<CompletionRequest> {
    vec![
        request("f(", &[], 40),
        request("int y = f(", &["x;"], 40),
        request("return f(", &[], 3),
        CompletionRequest {
            temperature: 8.0,
            seed: Some(4),
            n: 2,
            ..request("int a = 1;\nreturn a", &[], 12)
        },
    ]
}

/// What each of `requests` writes when sent alone, to a fresh copy of the model at `path`.
async fn each_alone(path: &Path, requests: &[CompletionRequest]) -> Vec<Vec<String>> {
    let (_alone_dir, alone) = fresh_copy(path);
    let mut expected = Vec::new();
    for request in requests {
        expected.push(texts(&alone, request).await);
    }
    expected
}

#[tokio::test]
async fn requests_sent_together_write_what_each_writes_alone_and_stream_apart() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let requests = mixed_requests();
    let expected = each_alone(&path, &requests).await;
    assert_eq!(expected[0], [AFTER_PAREN]);
    let together = backend(&path);
    let sent = requests.iter().map(|request| {
        let together = &together;
        async move {
            let (sender, mut receiver) = mpsc::unbounded_channel();
            let completions = together.complete(request, Some(&sender)).await.unwrap();
            drop(sender);
            let mut streamed = vec![String::new(); completions.len()];
            let mut started = 0;
            while let Some(delta) = receiver.recv().await {
                match delta.is_start() {
                    true => started += 1,
                    false => streamed[delta.index].push_str(&delta.text),
                }
            }
            assert_eq!(started, 1);
            let texts: Vec<String> = completions.into_iter().map(|c| c.text).collect();
            assert_eq!(streamed, texts);
            texts
        }
    });
    let got = futures_util::future::join_all(sent).await;
    assert_eq!(got, expected);
}

#[tokio::test]
async fn a_request_dropped_while_others_run_leaves_them_to_finish_as_alone() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let requests = mixed_requests();
    let expected = each_alone(&path, &requests).await;
    let together = std::sync::Arc::new(backend(&path));
    // Noise to its last token: it is still running when it is dropped.
    let long = CompletionRequest {
        temperature: 100.0,
        seed: Some(9),
        ..request("f(", &[], 50)
    };
    let (sender, mut dropped) = mpsc::unbounded_channel();
    let cancelled = tokio::spawn({
        let together = together.clone();
        async move { together.complete(&long, Some(&sender)).await }
    });
    let others: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let together = together.clone();
            tokio::spawn(async move { together.complete(&request, None).await.unwrap() })
        })
        .collect();
    // Dropped once it has streamed a piece of text.
    while dropped.recv().await.unwrap().is_start() {}
    cancelled.abort();
    // The model lets go of its stream.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while dropped.recv().await.is_some() {}
    });
    closed.await.expect("the dropped request's stream closes");
    for (other, expected) in others.into_iter().zip(expected) {
        let texts: Vec<String> = other.await.unwrap().into_iter().map(|c| c.text).collect();
        assert_eq!(texts, expected);
    }
}

#[tokio::test]
async fn token_counts_are_the_tokenizers_exactly() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    assert_eq!(backend.counting(), TokenCounting::Exact);
    let count = |text: &'static str| {
        let backend = &backend;
        async move { backend.count_tokens(text).await.unwrap().unwrap() }
    };
    // "return" and " x" are merged tokens; ";" is a byte.
    assert_eq!(count("return x;").await, 3);
    // " é" is three bytes without merges; digits are split one by one (SmolLM's rule).
    assert_eq!(count("return x; é").await, 6);
    assert_eq!(count("x = 123").await, 7);
    let (ids, truncated) = backend
        .model()
        .prompt_ids(&request("return x;", &[], 8), 8)
        .unwrap();
    assert_eq!((ids.len(), truncated), (3, false));
}

#[tokio::test]
async fn a_suffix_is_laid_out_for_fill_in_the_middle_when_the_vocabulary_has_fim_tokens() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let model = backend(&path);
    let model = model.model();
    let fim = model.fim().expect("the vocabulary has FIM tokens");
    let with_suffix = CompletionRequest {
        suffix: Some(" x;".to_string()),
        ..request("return", &[], 8)
    };
    let (ids, _) = model.prompt_ids(&with_suffix, 8).unwrap();
    let x = model.count_tokens(" x").unwrap();
    assert_eq!(x, 1);
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert_eq!(
        (ids[0], ids[2], ids[5]),
        (fim.prefix, fim.suffix, fim.middle)
    );
    let (plain, _) = model.prompt_ids(&request("return", &[], 8), 8).unwrap();
    assert_eq!(plain, vec![ids[1]]);

    let (_dir, path) = written(&Tiny {
        fim: false,
        ..Tiny::LLAMA
    });
    let backend = backend(&path);
    assert!(backend.model().fim().is_none());
    let (ids, _) = backend.model().prompt_ids(&with_suffix, 8).unwrap();
    assert_eq!(ids.len(), 1, "left to right without FIM tokens: {ids:?}");
}

#[tokio::test]
async fn a_prompt_longer_than_the_context_keeps_its_end() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let backend = backend(&path);
    let long = format!("{}f(", "return x;".repeat(40));
    let full = backend.model().count_tokens(&long).unwrap();
    assert!(full > CONTEXT);
    let (ids, truncated) = backend
        .model()
        .prompt_ids(&request(&long, &[], 10), 10)
        .unwrap();
    assert!(truncated);
    assert_eq!(ids.len(), CONTEXT - 10);
    // The end survives, so the chain still continues from `(`.
    assert_eq!(
        text(&backend, &request(&long, &["\n"], 10)).await,
        "int éx;"
    );
}

#[tokio::test]
async fn q4_1_matrices_kept_quantized_run_as_stored_and_give_the_same_chain() {
    // `matrices = "quantized"`: the Q4_1 matrices are kept as stored, not as f32 (least
    // memory), prompts and tokens alike multiplied by keyhole's Q4_1 kernel.
    let (_dir, path) = written(&Tiny {
        matrices: GgmlDType::Q4_1,
        ..Tiny::LLAMA
    });
    let config = BackendConfig {
        matrices: Some(Matrices::Quantized),
        ..BackendConfig::local(path.clone())
    };
    let quantized = LocalBackend::open(&config).unwrap();
    let as_f32 = backend(&path);
    assert!(
        !std::ptr::eq(quantized.model(), as_f32.model()),
        "each way of running the matrices is its own model"
    );
    let prompt = request("f(", &[], 40);
    assert_eq!(text(&quantized, &prompt).await, AFTER_PAREN);
    assert_eq!(text(&quantized, &prompt).await, AFTER_PAREN);
}

#[tokio::test]
async fn prompts_that_share_a_prefix_with_the_last_complete_as_on_a_fresh_model() {
    // The model keeps the last sequence's keys and values and reuses the prefix a new prompt
    // shares with it (an edit near the hole, the next sample, a shorter prompt): what it
    // writes must be what a model that saw only the new prompt writes.
    let (_dir, path) = written(&Tiny::LLAMA);
    let warm = backend(&path);
    // Sampled warm enough that the text follows the logits, not only the chain.
    let sampled = |prompt: &str, suffix: Option<&str>| CompletionRequest {
        temperature: 8.0,
        seed: Some(5),
        n: 3,
        suffix: suffix.map(String::from),
        ..request(prompt, &[], 12)
    };
    let prompts = [
        sampled("int a = 1;\nint b = 2;\nreturn f(", None),
        sampled("int a = 1;\nint b = 3;\nreturn f(", None),
        request("int a = 1;\nint b = 3;\nreturn f(", &[], 40),
        sampled("int a = 1;\nint b = 3;\nreturn f(", Some(");\n}")),
        sampled("int a = 1;\nint b = 3;\nreturn f(", Some(");\n}\n")),
        sampled("int a = 1;\n", None),
    ];
    for (index, prompt) in prompts.iter().enumerate() {
        // A model of its own for each fresh run.
        let (_fresh_dir, fresh) = fresh_copy(&path);
        let expected = texts(&fresh, prompt).await;
        assert_eq!(texts(&warm, prompt).await, expected, "prompt {index}");
    }
}

#[tokio::test]
async fn a_model_loads_once_per_process() {
    let (_dir, path) = written(&Tiny::LLAMA);
    let first = backend(&path);
    let second = backend(&path);
    assert!(std::ptr::eq(first.model(), second.model()));
}

#[test]
fn bad_files_are_one_line_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_model_dir, model) = written(&Tiny::LLAMA);
    let bytes = std::fs::read(&model).unwrap();
    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let header_only = dir.path().join("header.gguf");
    std::fs::write(&header_only, &bytes[..40]).unwrap();
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "these are not weights\n").unwrap();
    let gpt2 = dir.path().join("gpt2.gguf");
    Tiny {
        architecture: "gpt2",
        ..Tiny::LLAMA
    }
    .write(&gpt2);
    let untokenized = dir.path().join("untokenized.gguf");
    Tiny {
        tokenizer: false,
        ..Tiny::LLAMA
    }
    .write(&untokenized);
    let cases = [
        (dir.path().join("missing.gguf"), "no such file"),
        (truncated, "truncated"),
        (header_only, "truncated or damaged GGUF header"),
        (text, "not a GGUF file"),
        (gpt2, "unsupported architecture `gpt2`"),
        (untokenized, "no tokenizer in the metadata"),
    ];
    for (path, reason) in cases {
        let out = complete(&path, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

/// `keyhole complete --json` of the default context (62) with the model at `path`, which must
/// succeed.
fn default_context_json(path: &Path, scratch: &Path) -> serde_json::Value {
    let out = complete_with(path, scratch, &["--json", "--id", "62"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn keyhole_complete_runs_a_model_file_with_exact_counts() {
    let (dir, path) = written(&Tiny::LLAMA);
    let json = default_context_json(&path, dir.path());
    assert_eq!(json["backend"], "local");
    assert_eq!(json["token_counting"], "exact");
    let rows = json["completions"].as_array().unwrap();
    assert!(rows[0]["text"].is_string(), "{rows:?}");
}

#[test]
fn a_configured_local_backend_needs_a_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("backends.toml"),
        "[[backend]]\nname = \"smol\"\nkind = \"local\"\nthreads = 2\n",
    )
    .unwrap();
    let out = keyhole(&["backends"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 1, key `path`") || stderr.contains("key `path`"),
        "{stderr}"
    );
}

#[test]
fn a_configured_local_backend_completes() {
    let (dir, path) = written(&Tiny::LLAMA);
    std::fs::write(
        dir.path().join("backends.toml"),
        format!(
            "[[backend]]\nname = \"smol\"\nkind = \"local\"\npath = \"{}\"\nthreads = 1\n",
            path.display()
        ),
    )
    .unwrap();
    let listed = keyhole(&["backends"], dir.path());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("local"));
    let out = keyhole(
        &[
            "complete",
            &sample(),
            HOLE,
            "--backend",
            "smol",
            "--id",
            "62",
            "--json",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["backend"], "smol");
}

#[tokio::test]
async fn a_missing_file_is_a_local_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.gguf");
    let error = LocalBackend::open(&BackendConfig::local(path.clone()))
        .err()
        .unwrap();
    assert!(
        matches!(error, BackendError::LocalModel { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("local: {}: no such file", path.display())
    );
}

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

fn keyhole(args: &[&str], config: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .env("KEYHOLE_CONFIG_DIR", config)
        .env("KEYHOLE_CACHE_DIR", config.join("cache"))
        .env("KEYHOLE_DATA_DIR", config.join("data"))
        .output()
        .unwrap()
}

fn complete_with(model: &Path, config: &Path, extra: &[&str]) -> Output {
    let model = model.display().to_string();
    let mut args = vec!["complete", "--model-path", &model];
    let sample = sample();
    args.extend([sample.as_str(), HOLE]);
    args.extend(extra);
    keyhole(&args, config)
}

fn complete(model: &Path, config: &Path) -> Output {
    complete_with(model, config, &["--id", "62"])
}

/// `bytes` with both dimensions of the 2-D tensor `name` set to `dim`.
fn with_dimensions(bytes: &[u8], name: &str, dim: u64) -> Vec<u8> {
    let mut info = (name.len() as u64).to_le_bytes().to_vec();
    info.extend(name.as_bytes());
    info.extend(2u32.to_le_bytes());
    let at = bytes
        .windows(info.len())
        .position(|w| w == info)
        .expect("the tensor's header")
        + info.len();
    let mut patched = bytes.to_vec();
    patched[at..at + 8].copy_from_slice(&dim.to_le_bytes());
    patched[at + 8..at + 16].copy_from_slice(&dim.to_le_bytes());
    patched
}

#[test]
fn crafted_headers_are_one_line_errors_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let crafted = |name: &str, changed: &[(&str, Value)]| {
        let path = dir.path().join(format!("{name}.gguf"));
        Tiny::LLAMA.write_with(&path, changed);
        path
    };
    let huge = dir.path().join("huge-tensor.gguf");
    let bytes = std::fs::read(crafted("plain", &[])).unwrap();
    std::fs::write(&huge, with_dimensions(&bytes, "output.weight", 1 << 32)).unwrap();
    let cases = [
        (
            crafted("alignment", &[("general.alignment", Value::U32(0))]),
            "`general.alignment` is 0",
        ),
        (
            crafted("heads", &[("llama.attention.head_count", Value::U32(0))]),
            "`llama.attention.head_count` is 0",
        ),
        (
            crafted(
                "kv-heads",
                &[("llama.attention.head_count_kv", Value::U32(0))],
            ),
            "`llama.attention.head_count_kv` is 0",
        ),
        (
            crafted(
                "uneven-heads",
                &[("llama.attention.head_count", Value::U32(6))],
            ),
            "`llama.attention.head_count` is 6, which does not divide",
        ),
        (
            crafted("blocks", &[("llama.block_count", Value::U32(u32::MAX))]),
            "`llama.block_count` is 4294967295",
        ),
        (
            crafted("experts", &[("llama.expert_count", Value::U32(u32::MAX))]),
            "`llama.expert_count` is 4294967295",
        ),
        (
            crafted(
                "rope",
                &[("llama.rope.dimension_count", Value::U32(1 << 20))],
            ),
            "`llama.rope.dimension_count` is 1048576",
        ),
        (
            crafted(
                "embedding",
                &[("llama.embedding_length", Value::U32(1 << 20))],
            ),
            "`llama.embedding_length` is 1048576",
        ),
        (
            crafted("context", &[("llama.context_length", Value::U32(0))]),
            "`llama.context_length` is 0",
        ),
        (
            crafted("typed", &[("llama.block_count", Value::String("2".into()))]),
            "`llama.block_count` is String",
        ),
        (huge, "tensor `output.weight` has dimensions"),
    ];
    for (path, reason) in cases {
        // A backtrace, where candle would print one, must not reach the line either.
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
            .args(["complete", "--model-path", path.to_str().unwrap()])
            .args([sample().as_str(), HOLE, "--id", "62"])
            .env("KEYHOLE_CONFIG_DIR", dir.path())
            .env("KEYHOLE_CACHE_DIR", dir.path().join("cache"))
            .env("KEYHOLE_DATA_DIR", dir.path().join("data"))
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

#[tokio::test]
async fn a_qwen2_context_of_four_billion_tokens_is_capped_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qwen2.gguf");
    let qwen2 = Tiny {
        architecture: "qwen2",
        ..Tiny::LLAMA
    };
    qwen2.write_with(&path, &[("qwen2.context_length", Value::U32(u32::MAX))]);
    // Uncapped, candle would precompute 16 GiB of rotary positions before the first token.
    let backend = backend(&path);
    assert_eq!(backend.model().architecture(), "qwen2");
    assert_eq!(backend.model().context_length(), 1 << 17);
    let completion = text(&backend, &request("f(", &[], 4)).await;
    assert!(completion.chars().count() <= 4, "{completion:?}");
}

/// What loading a fuzz finding `bytes` says, after the fuzz target's own check passed on it,
/// and whether the model code's guard caught a panic meanwhile.
fn fuzz_finding_refused(bytes: &[u8]) -> (String, bool) {
    fuzz_checks::check_gguf(bytes);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("finding.gguf");
    std::fs::write(&path, bytes).unwrap();
    let caught = keyhole::testing::model::local::panics_caught();
    let error = keyhole::testing::model::local::LocalModel::load(&path, Matrices::Auto)
        .err()
        .expect("the finding is refused")
        .to_string();
    (
        error,
        keyhole::testing::model::local::panics_caught() > caught,
    )
}

#[test]
fn a_tensor_name_that_reads_like_the_guards_message_is_no_caught_panic() {
    // Found by the `gguf` fuzz target (2026-11-27, session 9): a tensor name holding "stopped
    // on a panic" passed for a caught panic where the check read the message; the file is
    // refused by the header's own check (522,133,279 dimensions), no panic.
    let bytes = include_bytes!("reliability_support/gguf/tensor-name-reads-like-a-panic.gguf");
    let (error, panicked) = fuzz_finding_refused(bytes);
    assert!(error.contains("dimensions, max is 4"), "{error}");
    assert!(!panicked, "{error}");
}

#[test]
fn a_tensor_name_with_line_breaks_is_refused_in_one_line() {
    // Found by the `gguf` fuzz target (2026-11-27): an empty tensor whose name holds line
    // breaks made a six-line error.
    let bytes = include_bytes!("reliability_support/gguf/tensor-name-with-line-breaks.gguf");
    let (error, _) = fuzz_finding_refused(bytes);
    assert!(
        error.contains("has no elements") && error.contains("\\n"),
        "{error}"
    );
}

#[test]
fn damaged_model_files_load_or_are_refused_in_one_line_without_a_panic() {
    // What the `gguf` fuzz target checks, on the tiny model cut short and with its header's
    // bytes (counts, lengths, types, dimensions, offsets, values) overwritten.
    let (_dir, path) = written(&Tiny::LLAMA);
    let bytes = std::fs::read(&path).unwrap();
    let header = bytes
        .windows(b"blk.0".len())
        .rposition(|w| w == b"blk.0")
        .expect("the tensor headers")
        + 200;
    for cut in (0..bytes.len()).step_by(1009) {
        fuzz_checks::check_gguf(&bytes[..cut]);
    }
    for at in (0..header).step_by(7) {
        for value in [0x00, 0x7F, 0xFF] {
            let mut damaged = bytes.clone();
            damaged[at] = value;
            fuzz_checks::check_gguf(&damaged);
        }
    }
}

#[test]
fn a_model_with_a_small_context_gets_prompts_composed_within_it_and_says_so() {
    // The sample hole's prompt is far longer than the tiny model's 64 tokens: it is composed
    // within the room the context leaves (64 less 24 to generate, the BOS and FIM tokens),
    // so the model sees the whole prompt keyhole shows, and nothing is cut behind its back.
    let (dir, path) = written(&Tiny::LLAMA);
    let json = default_context_json(&path, dir.path());
    let row = &json["completions"][0];
    let room = CONTEXT - keyhole::testing::model::DEFAULT_MAX_TOKENS - 4;
    assert_eq!(row["model_room"], room, "{row}");
    let composed = row["prompt_tokens"].as_u64().unwrap();
    assert!(composed > 0 && composed <= room as u64, "{row}");
    assert!(
        row["model_prompt_tokens"].is_null(),
        "nothing was cut: {row}"
    );
    let out = complete(&path, dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "note: the model's context leaves room for {room} prompt tokens, fewer than the budget"
        )),
        "{text}"
    );
    assert!(!text.contains("warning: #1's prompt was cut"), "{text}");
}
