//! The classifier on a local BERT-family encoder (the paper's frozen CodeBERT), as a user with
//! a model directory meets it. Each test writes a tiny randomly initialised BERT or RoBERTa
//! (config.json, model.safetensors with Hugging Face's tensor names, a word-level
//! tokenizer.json) into a temporary directory.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use common::{keyhole, ok, sample};
use serde_json::{Value, json};

use keyhole::testing::context::proposals::build_for_budget;
use keyhole::testing::eval::RLPG_CANDIDATES;
use keyhole::testing::hole::HoleWindow;
use keyhole::testing::rank::RankInput;
use keyhole::testing::rank::classifier::bert::BertEncoder;
use keyhole::{Keep, TokenizerKind};
use keyhole::{testing::rank::classifier::Classifier, testing::rank::classifier::Variant};
use keyhole::{
    testing::rank::classifier::dataset::Example, testing::rank::classifier::dataset::Inputs,
};
use keyhole::{
    testing::rank::classifier::train::Holdout, testing::rank::classifier::train::TrainOptions,
    testing::rank::classifier::train::train,
};

const DEMO: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";
const LAYERS: usize = 2;
const INTERMEDIATE: usize = 64;

/// The tokenizer's vocabulary: specials, then Java words and punctuation.
const WORDS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "public", "private", "class", "int", "long", "void",
    "return", "if", "else", "for", "new", "this", "null", "String", "List", "Map", "order",
    "total", "price", "item", "items", "customer", "get", "set", "add", "size", "alpha", "beta",
    "x", "y", "i", "(", ")", "{", "}", ";", "=", ".", ",", "+", "-", "<", ">", "==", "0", "1",
    "static", "final", "import", "package", "throw", "try", "catch", "while", "true", "false",
];

/// A tiny model of `model_type` (`bert` numbers positions from 0, `roberta` from 2) with
/// hidden size `width`, its tensors named under `prefix`, and `positions` position rows.
fn write_model(dir: &Path, model_type: &str, prefix: &str, width: usize, positions: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let pad = if model_type == "roberta" { 1 } else { 0 };
    let config = json!({
        "model_type": model_type,
        "vocab_size": WORDS.len(),
        "hidden_size": width,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 2,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": positions,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-5,
        "pad_token_id": pad,
        "hidden_act": "gelu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut tensors = HashMap::new();
    // Small weights, as BERT initialises them, keep attention soft so that every token counts;
    // layer norm scales start near 1.
    let mut put = |name: String, shape: &[usize]| {
        let mut t = Tensor::randn(0f32, 0.1, shape, &Device::Cpu).unwrap();
        if name.ends_with("LayerNorm.weight") {
            t = (t + 1.0).unwrap();
        }
        tensors.insert(format!("{prefix}{name}"), t);
    };
    put(
        "embeddings.word_embeddings.weight".into(),
        &[WORDS.len(), width],
    );
    put(
        "embeddings.position_embeddings.weight".into(),
        &[positions, width],
    );
    put(
        "embeddings.token_type_embeddings.weight".into(),
        &[2, width],
    );
    let linears = [
        ("attention.self.query", width, width),
        ("attention.self.key", width, width),
        ("attention.self.value", width, width),
        ("attention.output.dense", width, width),
        ("intermediate.dense", INTERMEDIATE, width),
        ("output.dense", width, INTERMEDIATE),
    ];
    let norms = ["attention.output.LayerNorm", "output.LayerNorm"];
    for layer in 0..LAYERS {
        for (name, out, inp) in linears {
            put(format!("encoder.layer.{layer}.{name}.weight"), &[out, inp]);
            put(format!("encoder.layer.{layer}.{name}.bias"), &[out]);
        }
        for name in norms {
            put(format!("encoder.layer.{layer}.{name}.weight"), &[width]);
            put(format!("encoder.layer.{layer}.{name}.bias"), &[width]);
        }
    }
    put("embeddings.LayerNorm.weight".into(), &[width]);
    put("embeddings.LayerNorm.bias".into(), &[width]);
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    let vocab: serde_json::Map<String, Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| (w.to_string(), json!(i)))
        .collect();
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
}

/// The one line a failing command printed, checked to name `path`.
fn one_line_error(output: Output, path: &Path) -> String {
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    stderr
}

fn words(range: std::ops::Range<usize>) -> String {
    range
        .map(|i| WORDS[4 + i % (WORDS.len() - 4)])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_encoder_gives_one_vector_per_text_and_reads_only_what_fits() {
    let scratch = tempfile::tempdir().unwrap();
    for (model_type, prefix) in [("bert", "bert."), ("roberta", "")] {
        let dir = scratch.path().join(model_type);
        // RoBERTa's first position is 2, so 20 rows leave 18 tokens: [CLS], 16 words, [SEP].
        write_model(&dir, model_type, prefix, 32, 20);
        let encoder = BertEncoder::load(&dir).unwrap();
        assert_eq!(encoder.width(), 32);
        let a = encoder.encode("int total = price ;", Keep::Start).unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.iter().all(|v| v.is_finite()), "{a:?}");
        let b = encoder
            .encode("return order . items ;", Keep::Start)
            .unwrap();
        assert_ne!(a, b, "{model_type}: different texts, different vectors");
        assert_eq!(
            a,
            encoder.encode("int total = price ;", Keep::Start).unwrap()
        );
        if model_type == "roberta" {
            let long = words(0..400);
            assert_eq!(
                encoder.encode(&long, Keep::End).unwrap(),
                encoder.encode(&words(384..400), Keep::End).unwrap(),
                "a long text is read from the end it keeps"
            );
            assert_eq!(
                encoder.encode(&long, Keep::Start).unwrap(),
                encoder.encode(&words(0..16), Keep::Start).unwrap()
            );
        }
        assert_eq!(encoder.encode_context("", Keep::End).unwrap(), None);
    }
}

#[test]
fn a_directory_that_is_not_a_bert_model_is_a_one_line_error_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("missing");
    let error = BertEncoder::load(&missing).err().unwrap().to_string();
    assert!(error.starts_with(&missing.display().to_string()), "{error}");
    let dir = scratch.path().join("model");
    write_model(&dir, "bert", "", 32, 20);
    std::fs::write(dir.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    let error = BertEncoder::load(&dir).err().unwrap().to_string();
    assert!(
        error.contains("config.json") && error.contains("missing field"),
        "{error}"
    );
    write_model(&dir, "gpt2", "", 32, 20);
    let error = BertEncoder::load(&dir).err().unwrap().to_string();
    assert!(
        error.contains("config.json") && error.contains("gpt2"),
        "{error}"
    );
    write_model(&dir, "bert", "transformer.", 32, 20);
    let error = BertEncoder::load(&dir).err().unwrap().to_string();
    assert!(error.contains("model.safetensors"), "{error}");
    assert_eq!(error.lines().count(), 1);
}

/// Holes whose line calls `alpha` succeed with proposal 6 only; `beta`, with 20 only. With
/// contexts, each candidate's is a few words of its own.
fn synthetic(
    encoder: &BertEncoder,
    repository: &str,
    n: usize,
    with_contexts: bool,
) -> Vec<Example> {
    let contexts: Vec<Option<Arc<[f32]>>> = match with_contexts {
        true => (0..RLPG_CANDIDATES)
            .map(|id| {
                encoder
                    .encode_context(&words(id..id + 5), Keep::End)
                    .unwrap()
            })
            .map(|v| v.map(Into::into))
            .collect(),
        false => Vec::new(),
    };
    let kinds: Vec<(Vec<f32>, Vec<f32>)> = [("alpha", 6), ("beta", 20)]
        .into_iter()
        .map(|(word, winner)| {
            let prefix = format!("int total = {word} . {word} (");
            let window = HoleWindow {
                before: "public class order {\n",
                prefix: &prefix,
                after: "}\n",
            };
            let hole = encoder.encode(&window.text(), Keep::Start).unwrap();
            (
                hole,
                (0..RLPG_CANDIDATES)
                    .map(|id| f32::from(u8::from(id == winner)))
                    .collect(),
            )
        })
        .collect();
    (0..n)
        .map(|i| {
            let (hole, labels) = kinds[i % 2].clone();
            Example {
                repository: repository.into(),
                file: "A.java".into(),
                inputs: Inputs::Bert {
                    hole,
                    contexts: contexts.clone(),
                },
                mask: vec![1.0; RLPG_CANDIDATES],
                labels,
            }
        })
        .collect()
}

#[test]
fn a_model_trained_on_the_encoder_ranks_holes_with_its_directory_only() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("codebert");
    write_model(&dir, "roberta", "roberta.", 32, 66);
    let encoder = BertEncoder::load(&dir).unwrap();
    let model = scratch.path().join("model.safetensors");
    // RLPG-H learns; RLPG-R (on the candidates' context vectors) only has to run, briefly.
    for (variant, holes, epochs) in [(Variant::H, 256, 80), (Variant::R, 64, 2)] {
        let r = variant == Variant::R;
        let mut examples = synthetic(&encoder, "train", holes, r);
        examples.extend(synthetic(&encoder, "valid", 32, r));
        let options = TrainOptions {
            variant,
            validation: Holdout::Repositories(vec!["valid".into()]),
            max_epochs: epochs,
            patience: epochs,
            seed: 1,
            fine_tune: false,
        };
        // RLPG-R starts from the RLPG-H model and keeps its head.
        let start = r.then_some(model.as_path());
        let report = train(&examples, &options, start, &model, &|_| {}).unwrap();
        if variant == Variant::H {
            // The fixed order cannot tell the two kinds of hole apart; the head on the
            // encoder's vectors must.
            assert_eq!(report.validation.fixed, 50.0);
            assert!(report.validation.model > 90.0, "{report:?}");
        }
    }
    let classifier = Classifier::load_with(&model, Some(&dir)).unwrap();
    assert!(classifier.has(Variant::H) && classifier.has(Variant::R));
    let hole = common::hole("service/OrderService.java:94:32");
    let proposals = build_for_budget(
        &common::SAMPLE,
        &hole,
        TokenizerKind::Code.tokenizer(),
        4072,
        keyhole::Fidelity::Paper,
    );
    let input = RankInput::new(&common::SAMPLE, &hole, &proposals);
    for variant in [Variant::H, Variant::R] {
        let p = classifier.probabilities(variant, &input).unwrap();
        assert_eq!(p.len(), RLPG_CANDIDATES);
        assert!(p.iter().all(|p| (0.0..=1.0).contains(p)), "{p:?}");
    }

    // The same, through the CLI; without the directory, with a missing one or with one of
    // another width, one line each.
    let proposals = |extra: &[&str]| {
        let mut args = vec!["proposals", &*sample(), DEMO]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        args.extend(["--classifier".into(), model.display().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        keyhole(&args, scratch.path())
    };
    for ranker in ["rlpg-h", "rlpg-r"] {
        let out = proposals(&[
            "--json",
            "--ranker",
            ranker,
            "--encoder-dir",
            dir.to_str().unwrap(),
        ]);
        let out = ok(out);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!json["ranking"].as_array().unwrap().is_empty(), "{ranker}");
    }
    let error = one_line_error(proposals(&[]), &model);
    assert!(
        error.contains("--encoder-dir") && error.contains("32"),
        "{error}"
    );
    let missing = scratch.path().join("no-such-dir");
    one_line_error(
        proposals(&["--encoder-dir", missing.to_str().unwrap()]),
        &missing,
    );
    let narrow = scratch.path().join("narrow");
    write_model(&narrow, "bert", "", 16, 66);
    let error = one_line_error(
        proposals(&["--encoder-dir", narrow.to_str().unwrap()]),
        &narrow,
    );
    assert!(
        error.contains(&model.display().to_string()) && error.contains("16"),
        "{error}"
    );
    // The bundled model reads code with keyhole's own encoder.
    let dir_arg = dir.to_str().unwrap();
    let out = keyhole(
        &["proposals", &sample(), DEMO, "--encoder-dir", dir_arg],
        scratch.path(),
    );
    one_line_error(out, &dir);
}

#[test]
fn training_with_a_missing_encoder_directory_is_a_one_line_error_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("no-such-dir");
    let out = keyhole(
        &[
            "train",
            scratch.path().to_str().unwrap(),
            "--corpus",
            scratch.path().to_str().unwrap(),
            "--encoder-dir",
            missing.to_str().unwrap(),
        ],
        scratch.path(),
    );
    one_line_error(out, &missing);
}
