//! The two forward passes agree: on real holes of the bundled sample, the plain one that ranks
//! ([`super::inference`]) gives the probabilities the candle networks that train
//! ([`super::network`]) give, for both heads, with the bundled model and with one trained here,
//! so that the two can never drift apart.

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::dataset::{Example, Inputs};
use super::features::{self, CHUNK_LEN, CHUNKS};
use super::inference::{self, Dims, Weights};
use super::network::{HashedEncoder, HeadH, HeadR};
use super::train::{Holdout, TrainOptions, train};
use super::{BUNDLED, Classifier, Variant, candidate_contexts};
use crate::compose::DEFAULT_BUDGET;
use crate::context::fidelity::Fidelity;
use crate::context::proposals::{ProposalContext, build_for_budget};
use crate::hole::{Hole, HoleColumn, sample_holes};
use crate::label::RLPG_CANDIDATES;
use crate::rank::RankInput;
use crate::repo::RepoIndex;
use crate::token::TokenizerKind;

/// How far apart the two passes' probabilities may be (they sum in different orders).
const TOLERANCE: f32 = 1e-5;
const HOLES: usize = 60;

/// The candle networks of a model file with keyhole's encoder, run as training evaluates them:
/// without dropout, a batch of one hole.
struct Candle {
    encoder: HashedEncoder,
    h: HeadH,
    r: HeadR,
}

impl Candle {
    fn load(bytes: &[u8]) -> candle_core::Result<Candle> {
        let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        Ok(Candle {
            encoder: HashedEncoder::new(vb.pp("encoder"))?,
            h: HeadH::new(vb.pp("h"), Dims::HASHED)?,
            r: HeadR::new(vb.pp("r"), Dims::HASHED)?,
        })
    }

    fn probabilities(&self, variant: Variant, input: &RankInput) -> candle_core::Result<Vec<f32>> {
        let dev = &Device::Cpu;
        let hole = Tensor::new(features::hole_ids(&input.window), dev)?.unsqueeze(0)?;
        let holes = self.encoder.holes(&hole)?;
        let logits = match variant {
            Variant::H => self.h.forward(&holes, false)?,
            Variant::R => {
                let ids: Vec<u32> = candidate_contexts(input)
                    .iter()
                    .flat_map(|&(text, keep)| {
                        features::chunked(&features::context_ids(text, keep)).collect::<Vec<_>>()
                    })
                    .collect();
                let ids = Tensor::from_vec(ids, (RLPG_CANDIDATES, CHUNKS * CHUNK_LEN), dev)?;
                let (chunks, present) = self.encoder.chunks(&ids)?;
                let (chunks, present) = (chunks.unsqueeze(0)?, present.unsqueeze(0)?);
                self.r.forward(&holes, &chunks, &present, false)?
            }
        };
        candle_nn::ops::sigmoid(&logits)?.squeeze(0)?.to_vec1()
    }
}

/// Sampled holes of the bundled sample repository with their proposals, as ranking gets them.
struct Holes {
    index: RepoIndex,
    holes: Vec<(Hole, Vec<ProposalContext>)>,
}

impl Holes {
    fn sample() -> Holes {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample-repo");
        let index = RepoIndex::open(Path::new(dir), None).expect("the sample opens");
        let tokenizer = TokenizerKind::Code.tokenizer();
        let holes = sample_holes(&index, Some(HOLES), 9, HoleColumn::TrimmedMiddle)
            .into_iter()
            .map(|hole| {
                let proposals =
                    build_for_budget(&index, &hole, tokenizer, DEFAULT_BUDGET, Fidelity::Paper);
                (hole, proposals)
            })
            .collect();
        Holes { index, holes }
    }

    fn inputs(&self) -> impl Iterator<Item = RankInput<'_>> {
        self.holes
            .iter()
            .map(|(hole, proposals)| RankInput::new(&self.index, hole, proposals))
    }
}

/// Both heads of the model in `bytes` give the same probabilities in both passes on every
/// hole; the probabilities must differ between holes, so that a pass that ignores its input
/// cannot agree by accident.
fn assert_agree(bytes: &[u8], model: &str, holes: &Holes) {
    let plain = Classifier::from_bytes(bytes, model, None).expect("the plain pass loads");
    let candle = Candle::load(bytes).expect("candle loads");
    for variant in [Variant::H, Variant::R] {
        let mut seen = Vec::new();
        for input in holes.inputs() {
            let ours = plain.probabilities(variant, &input).unwrap();
            let theirs = candle.probabilities(variant, &input).unwrap();
            assert_eq!(ours.len(), RLPG_CANDIDATES);
            for (id, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    (a - b).abs() <= TOLERANCE,
                    "{model}, {}, {}:{}, candidate {id}: plain {a}, candle {b}",
                    variant.name(),
                    input.window.prefix,
                    input.before_hole.len(),
                );
            }
            seen.push(ours);
        }
        assert_eq!(seen.len(), HOLES.min(holes.holes.len()));
        assert!(
            seen.iter().any(|p| p != &seen[0]),
            "{model}, {}: every hole scored alike",
            variant.name()
        );
    }
}

#[test]
fn the_bundled_model_ranks_the_same_without_candle() {
    let holes = Holes::sample();
    assert!(holes.holes.len() >= 40, "{} holes", holes.holes.len());
    assert_agree(BUNDLED, "the bundled classifier", &holes);
}

/// Examples from the sample's holes with arbitrary but fixed labels: enough for an epoch or two
/// to move every weight away from where it started.
fn examples(holes: &Holes) -> Vec<Example> {
    holes
        .inputs()
        .enumerate()
        .map(|(i, input)| Example {
            repository: if i % 4 == 0 { "valid" } else { "train" }.to_string(),
            file: String::new(),
            inputs: Inputs::Hashed {
                hole: features::hole_ids(&input.window),
                contexts: candidate_contexts(&input)
                    .iter()
                    .map(|&(text, keep)| features::context_ids(text, keep))
                    .collect(),
            },
            mask: vec![1.0; RLPG_CANDIDATES],
            labels: (0..RLPG_CANDIDATES)
                .map(|id| f32::from(u8::from((id * 7 + i) % 5 == 0)))
                .collect(),
        })
        .collect()
}

#[test]
fn a_freshly_trained_model_ranks_the_same_without_candle() {
    let holes = Holes::sample();
    let examples = examples(&holes);
    let dir = tempfile::tempdir().unwrap();
    let (h, r) = (
        dir.path().join("h.safetensors"),
        dir.path().join("r.safetensors"),
    );
    let options = TrainOptions {
        variant: Variant::H,
        validation: Holdout::Repositories(vec!["valid".into()]),
        max_epochs: 2,
        patience: 2,
        seed: 3,
        fine_tune: false,
    };
    train(&examples, &options, None, &h, &|_| {}).unwrap();
    let options = TrainOptions {
        variant: Variant::R,
        ..options
    };
    train(&examples, &options, Some(&h), &r, &|_| {}).unwrap();
    let bytes = std::fs::read(&r).unwrap();
    assert_ne!(bytes, BUNDLED);
    assert_agree(&bytes, "a model trained here", &holes);
}

/// With a BERT encoder the heads take its width, and each candidate's context is one chunk (its
/// vector) or none; freshly initialised heads of that shape agree on random vectors.
#[test]
fn heads_of_a_bert_width_give_the_same_probabilities_without_candle() {
    let dims = Dims::bert(48);
    let vars = VarMap::new();
    let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
    let (h, r) = (
        HeadH::new(vb.pp("h"), dims).unwrap(),
        HeadR::new(vb.pp("r"), dims).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("heads.safetensors");
    vars.save(&file).unwrap();
    let weights = Weights::read(&std::fs::read(&file).unwrap()).unwrap();
    let plain_h = inference::HeadH::load(&weights, dims).unwrap();
    let plain_r = inference::HeadR::load(&weights, dims).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let dev = &Device::Cpu;
    for hole_number in 0..20 {
        let mut vector = || -> Vec<f32> {
            (0..dims.hole)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect()
        };
        let hole = vector();
        // Every third candidate has no context (RLPG-R gives it no attention).
        let contexts: Vec<Option<Vec<f32>>> = (0..RLPG_CANDIDATES)
            .map(|id| (id % 3 != 0).then(&mut vector))
            .collect();
        let flat: Vec<f32> = contexts
            .iter()
            .flat_map(|c| c.clone().unwrap_or_else(|| vec![0.0; dims.chunk]))
            .collect();
        let present: Vec<f32> = contexts
            .iter()
            .map(|c| f32::from(u8::from(c.is_some())))
            .collect();
        let holes = Tensor::from_vec(hole.clone(), (1, dims.hole), dev).unwrap();
        let chunks = Tensor::from_vec(flat, (1, RLPG_CANDIDATES, 1, dims.chunk), dev).unwrap();
        let present = Tensor::from_vec(present, (1, RLPG_CANDIDATES, 1), dev).unwrap();
        let candle_probabilities = |logits: Tensor| -> Vec<f32> {
            let p = candle_nn::ops::sigmoid(&logits).unwrap();
            p.squeeze(0).unwrap().to_vec1().unwrap()
        };
        let one_chunk: Vec<Vec<Option<Vec<f32>>>> = contexts.into_iter().map(|c| vec![c]).collect();
        let pairs = [
            (
                "RLPG-H",
                plain_h.logits(&hole),
                candle_probabilities(h.forward(&holes, false).unwrap()),
            ),
            (
                "RLPG-R",
                plain_r.logits(&hole, &one_chunk),
                candle_probabilities(r.forward(&holes, &chunks, &present, false).unwrap()),
            ),
        ];
        for (head, logits, theirs) in pairs {
            for (id, (logit, b)) in logits.iter().zip(&theirs).enumerate() {
                let a = inference::sigmoid(*logit);
                assert!(
                    (a - b).abs() <= TOLERANCE,
                    "{head}, hole {hole_number}, candidate {id}: plain {a}, candle {b}"
                );
            }
        }
    }
}

/// The time to rank one hole with each pass; run with `cargo test --release --lib
/// ranking_time -- --ignored --nocapture` (BENCHMARKS.md).
#[test]
#[ignore = "a measurement, not a test"]
fn ranking_time_plain_and_candle() {
    let holes = Holes::sample();
    let plain = Classifier::bundled();
    let candle = Candle::load(BUNDLED).unwrap();
    let n = holes.holes.len() as f64;
    for variant in [Variant::H, Variant::R] {
        for round in 0..3 {
            let began = Instant::now();
            holes.inputs().for_each(|input| {
                plain.probabilities(variant, &input).unwrap();
            });
            let ours = began.elapsed().as_secs_f64() * 1e3 / n;
            let began = Instant::now();
            holes.inputs().for_each(|input| {
                candle.probabilities(variant, &input).unwrap();
            });
            let theirs = began.elapsed().as_secs_f64() * 1e3 / n;
            println!(
                "{} round {round}: plain {ours:.3} ms per hole, candle {theirs:.3} ms per hole",
                variant.name()
            );
        }
    }
}
