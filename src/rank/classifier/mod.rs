//! RLPG's prompt proposal classifier (paper section 2.2, appendix C): given the hole window
//! (and, for RLPG-R, every candidate's context), the probability that each candidate's prompt
//! yields the right line. Candidates are the 62 proposals and the default context.
//!
//! A model file holds the encoder and one or both heads. keyhole ships one trained on the
//! development corpus ([`Classifier::bundled`]); `keyhole train` makes others. A model trained
//! on a local BERT-family encoder (`keyhole train --encoder-dir DIR`, the paper's frozen
//! CodeBERT) holds only the heads and a tensor naming the encoder's width, and needs the same
//! directory to rank.

pub mod bert;
pub mod dataset;
mod features;
mod network;
pub mod train;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::Serialize;

use super::{RankInput, Ranked, Ranker, sorted};
use crate::candidate::CandidateId;
use crate::hole::HoleWindow;
use crate::label::RLPG_CANDIDATES;
use crate::token::Keep;
use bert::{BertEncoder, EncoderError};
use network::{Dims, HashedEncoder, HeadH, HeadR};

/// The model trained on the development corpus, shipped inside the binary.
const BUNDLED: &[u8] = include_bytes!("bundled.safetensors");
const BUNDLED_NAME: &str = "the bundled classifier";

/// Which classifier: RLPG-H reads the hole window only, RLPG-R also each candidate's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Variant {
    H,
    R,
}

impl std::str::FromStr for Variant {
    type Err = UnknownVariant;

    /// `h` or `r`, as `keyhole train --variant` takes it.
    fn from_str(text: &str) -> Result<Variant, UnknownVariant> {
        [Variant::H, Variant::R]
            .into_iter()
            .find(|v| v.prefix() == text)
            .ok_or_else(|| UnknownVariant(text.to_string()))
    }
}

/// A classifier variant other than `h` and `r`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a classifier variant (h, r)")]
pub struct UnknownVariant(pub String);

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::H => "RLPG-H",
            Variant::R => "RLPG-R",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Variant::H => "h",
            Variant::R => "r",
        }
    }
}

/// The tensor that marks a model trained on a BERT encoder; its one value is the hidden size.
const BERT_WIDTH: &str = "encoder.bert_width";
/// Which end of the hole window a BERT encoder keeps when the window is too long: its start,
/// the lines before and the code up to the hole.
const WINDOW_KEEP: Keep = Keep::Start;

/// Which F_phi a model reads code with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderKind {
    /// keyhole's hashed sub-token encoder, trained with RLPG-H and stored in the model file.
    Hashed,
    /// A frozen BERT-family model of this hidden size, read from a local directory.
    Bert { width: usize },
}

impl EncoderKind {
    /// What a model file's tensors say.
    fn of(tensors: &HashMap<String, Tensor>) -> candle_core::Result<EncoderKind> {
        match tensors.get(BERT_WIDTH) {
            None => Ok(EncoderKind::Hashed),
            Some(t) => Ok(EncoderKind::Bert {
                width: t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?[0] as usize,
            }),
        }
    }

    fn dims(self) -> Dims {
        match self {
            EncoderKind::Hashed => Dims::HASHED,
            EncoderKind::Bert { width } => Dims::bert(width),
        }
    }

    /// The marker tensor a model file of this kind carries, if any.
    fn marker(self) -> candle_core::Result<Option<(String, Tensor)>> {
        match self {
            EncoderKind::Hashed => Ok(None),
            EncoderKind::Bert { width } => Ok(Some((
                BERT_WIDTH.to_string(),
                Tensor::new(&[width as f32], &Device::Cpu)?,
            ))),
        }
    }

    fn describe(self) -> String {
        match self {
            EncoderKind::Hashed => "keyhole's hashed encoder".into(),
            EncoderKind::Bert { width } => format!("a BERT encoder of hidden size {width}"),
        }
    }
}

/// Why a model could not be used; each message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("{file}: not a keyhole classifier: {reason}")]
    Unreadable { file: String, reason: String },
    #[error("{file}: has no {variant} head (train one with `keyhole train --variant {flag}`)")]
    MissingHead {
        file: String,
        variant: &'static str,
        flag: &'static str,
    },
    #[error(
        "{file}: trained on a BERT encoder of hidden size {width}; pass its directory with --encoder-dir"
    )]
    NeedsEncoder { file: String, width: usize },
    #[error("{file}: trained on {trained}, but --encoder-dir {dir} holds {found}")]
    WrongEncoder {
        file: String,
        dir: String,
        trained: String,
        found: String,
    },
    #[error(transparent)]
    Encoder(#[from] EncoderError),
}

/// F_phi as a loaded model uses it.
enum Encoder {
    Hashed(HashedEncoder),
    Bert(Box<BertEncoder>),
}

impl Encoder {
    /// The hole window's representation `[1, Dims::hole]`.
    fn hole(&self, window: &HoleWindow) -> candle_core::Result<Tensor> {
        let dev = &Device::Cpu;
        match self {
            Encoder::Hashed(e) => {
                e.holes(&Tensor::new(features::hole_ids(window), dev)?.unsqueeze(0)?)
            }
            Encoder::Bert(e) => {
                Tensor::new(e.encode(&window.text(), WINDOW_KEEP)?, dev)?.unsqueeze(0)
            }
        }
    }

    /// Every candidate's chunk vectors `[RLPG_CANDIDATES, c, Dims::chunk]` and their presence
    /// `[RLPG_CANDIDATES, c]`.
    fn contexts(&self, input: &RankInput) -> candle_core::Result<(Tensor, Tensor)> {
        let contexts = candidate_contexts(input);
        match self {
            Encoder::Hashed(e) => {
                let ids: Vec<u32> = contexts
                    .iter()
                    .flat_map(|&(text, keep)| {
                        features::chunked(&features::context_ids(text, keep)).collect::<Vec<_>>()
                    })
                    .collect();
                e.chunks(&Tensor::from_vec(
                    ids,
                    (RLPG_CANDIDATES, features::CHUNKS * features::CHUNK_LEN),
                    &Device::Cpu,
                )?)
            }
            Encoder::Bert(e) => {
                let vectors = contexts
                    .iter()
                    .map(|&(text, keep)| e.encode_context(text, keep))
                    .collect::<candle_core::Result<Vec<_>>>()?;
                let borrowed: Vec<Option<&[f32]>> = vectors.iter().map(Option::as_deref).collect();
                bert::context_chunks(&borrowed, e.width())
            }
        }
    }
}

/// A loaded classifier: the encoder and whichever heads the file has.
pub struct Classifier {
    source: String,
    encoder: Encoder,
    h: Option<HeadH>,
    r: Option<HeadR>,
}

impl Classifier {
    /// The model shipped with keyhole.
    pub fn bundled() -> Classifier {
        Self::from_bytes(BUNDLED, BUNDLED_NAME, None)
            .expect("the bundled classifier is checked by the tests")
    }

    /// A model written by `keyhole train` with keyhole's own encoder.
    pub fn load(path: &Path) -> Result<Classifier, ModelError> {
        Self::load_with(path, None)
    }

    /// A model written by `keyhole train`, reading code with the BERT encoder in
    /// `encoder_dir` if it was trained on one (and only then may a directory be given).
    pub fn load_with(path: &Path, encoder_dir: Option<&Path>) -> Result<Classifier, ModelError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Unreadable {
            file: file.clone(),
            reason: e.to_string(),
        })?;
        Self::from_bytes(&bytes, &file, encoder_dir)
    }

    /// A model with keyhole's own encoder whose file `path` was read as `bytes` (by a caller
    /// that checked them first).
    pub fn from_file_bytes(bytes: &[u8], path: &Path) -> Result<Classifier, ModelError> {
        Self::from_bytes(bytes, &path.display().to_string(), None)
    }

    /// The bundled model, or the one at `path`, with `encoder_dir` as [`Classifier::load_with`].
    pub fn open(path: Option<&Path>, encoder_dir: Option<&Path>) -> Result<Classifier, ModelError> {
        match path {
            Some(path) => Self::load_with(path, encoder_dir),
            None => Self::from_bytes(BUNDLED, BUNDLED_NAME, encoder_dir),
        }
    }

    fn from_bytes(
        bytes: &[u8],
        source: &str,
        encoder_dir: Option<&Path>,
    ) -> Result<Classifier, ModelError> {
        let unreadable = |e: candle_core::Error| ModelError::Unreadable {
            file: source.to_string(),
            reason: e.to_string().lines().next().unwrap_or_default().to_string(),
        };
        let tensors =
            candle_core::safetensors::load_buffer(bytes, &Device::Cpu).map_err(unreadable)?;
        // A NaN or infinite weight loads, then gives NaN scores that decide the order.
        let mut names: Vec<&String> = tensors.keys().collect();
        names.sort();
        for name in names {
            let values = tensors[name]
                .to_dtype(DType::F32)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(unreadable)?;
            if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
                return Err(ModelError::Unreadable {
                    file: source.to_string(),
                    reason: format!("weight {name} holds {bad}, not a finite number"),
                });
            }
        }
        let kind = EncoderKind::of(&tensors).map_err(unreadable)?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let h = match vb.contains_tensor("h.out.weight") {
            true => Some(HeadH::new(vb.pp("h"), kind.dims()).map_err(unreadable)?),
            false => None,
        };
        let r = match vb.contains_tensor("r.out_weight") {
            true => Some(HeadR::new(vb.pp("r"), kind.dims()).map_err(unreadable)?),
            false => None,
        };
        let encoder = match (kind, encoder_dir) {
            (EncoderKind::Hashed, None) => {
                Encoder::Hashed(HashedEncoder::new(vb.pp("encoder")).map_err(unreadable)?)
            }
            (EncoderKind::Bert { width }, None) => {
                return Err(ModelError::NeedsEncoder {
                    file: source.to_string(),
                    width,
                });
            }
            (_, Some(dir)) => {
                let bert = BertEncoder::load(dir)?;
                let found = EncoderKind::Bert {
                    width: bert.width(),
                };
                if found != kind {
                    return Err(ModelError::WrongEncoder {
                        file: source.to_string(),
                        dir: dir.display().to_string(),
                        trained: kind.describe(),
                        found: found.describe(),
                    });
                }
                Encoder::Bert(Box::new(bert))
            }
        };
        Ok(Classifier {
            source: source.to_string(),
            encoder,
            h,
            r,
        })
    }

    pub fn has(&self, variant: Variant) -> bool {
        match variant {
            Variant::H => self.h.is_some(),
            Variant::R => self.r.is_some(),
        }
    }

    /// A ranker with one of this model's heads.
    pub fn ranker(&self, variant: Variant) -> Result<ClassifierRanker<'_>, ModelError> {
        if !self.has(variant) {
            return Err(ModelError::MissingHead {
                file: self.source.clone(),
                variant: variant.name(),
                flag: variant.prefix(),
            });
        }
        Ok(ClassifierRanker {
            classifier: self,
            variant,
        })
    }

    /// The probability of success of every candidate (index = candidate id) for one hole.
    pub fn probabilities(
        &self,
        variant: Variant,
        input: &RankInput,
    ) -> candle_core::Result<Vec<f32>> {
        let holes = self.encoder.hole(&input.window)?;
        let logits = match (variant, &self.h, &self.r) {
            (Variant::H, Some(h), _) => h.forward(&holes, false)?,
            (Variant::R, _, Some(r)) => {
                let (chunks, present) = self.encoder.contexts(input)?;
                r.forward(&holes, &chunks.unsqueeze(0)?, &present.unsqueeze(0)?, false)?
            }
            _ => candle_core::bail!("no {} head", variant.name()),
        };
        candle_nn::ops::sigmoid(&logits)?.squeeze(0)?.to_vec1()
    }
}

/// Each candidate's context for RLPG-R and the end of it that survives truncation, in id
/// order; the default context's material is the code before the hole.
fn candidate_contexts<'a>(input: &RankInput<'a>) -> Vec<(&'a str, Keep)> {
    let mut contexts: Vec<(&str, Keep)> = input
        .proposals
        .iter()
        .map(|p| (p.context.text.as_str(), p.keep))
        .collect();
    contexts.resize(CandidateId::PROPOSALS, ("", Keep::End));
    contexts.push((input.before_hole, Keep::End));
    contexts
}

/// Ranks by the classifier's probabilities.
pub struct ClassifierRanker<'a> {
    classifier: &'a Classifier,
    variant: Variant,
}

impl Ranker for ClassifierRanker<'_> {
    fn name(&self) -> &'static str {
        self.variant.name()
    }

    /// The applicable candidates by probability of success. A model that fails to run (it was
    /// checked when loaded, so this should not happen) ranks as the fixed order, with a warning
    /// in the log.
    fn rank(&self, input: &RankInput) -> Vec<Ranked> {
        let finite = |p: &Vec<f32>| p.iter().all(|p| p.is_finite());
        match self.classifier.probabilities(self.variant, input) {
            Ok(p) if finite(&p) => sorted(
                CandidateId::rlpg()
                    .filter(|&id| input.applicable(id))
                    .map(|id| Ranked {
                        id,
                        score: f64::from(p[id.index()]),
                    })
                    .collect(),
            ),
            outcome => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    Ok(_) => "its scores are not all numbers".to_string(),
                };
                crate::escape::warn(&format!(
                    "{} of {} failed ({why}); ranking in the fixed order",
                    self.variant.name(),
                    self.classifier.source
                ));
                super::FixedRanker.rank(input)
            }
        }
    }
}
