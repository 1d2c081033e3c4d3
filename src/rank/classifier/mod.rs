//! RLPG's prompt proposal classifier (paper section 2.2, appendix C): given the hole window
//! (and, for RLPG-R, every candidate's context), the probability that each candidate's prompt
//! yields the right line. Candidates are the 62 proposals and the default context.
//!
//! A model file holds the encoder and one or both heads. keyhole ships one trained on the
//! development corpus ([`Classifier::bundled`]); `keyhole train` makes others.

pub mod dataset;
mod features;
mod network;
pub mod train;

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::Serialize;

use super::{RankInput, Ranked, Ranker, sorted};
use crate::context::proposals::DEFAULT_ID;
use crate::eval::RLPG_CANDIDATES;
use crate::token::Keep;
use network::{HashedEncoder, HeadH, HeadR};

/// The model trained on the development corpus, shipped inside the binary.
const BUNDLED: &[u8] = include_bytes!("bundled.safetensors");

/// Which classifier: RLPG-H reads the hole window only, RLPG-R also each candidate's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Variant {
    H,
    R,
}

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

/// Why a model could not be used; each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{file}: not a keyhole classifier: {reason}")]
    Unreadable { file: String, reason: String },
    #[error("{file}: has no {variant} head (train one with `keyhole train --variant {flag}`)")]
    MissingHead {
        file: String,
        variant: &'static str,
        flag: &'static str,
    },
}

/// A loaded classifier: the encoder and whichever heads the file has.
pub struct Classifier {
    source: String,
    encoder: HashedEncoder,
    h: Option<HeadH>,
    r: Option<HeadR>,
}

impl Classifier {
    /// The model shipped with keyhole.
    pub fn bundled() -> Classifier {
        Self::from_bytes(BUNDLED, "the bundled classifier")
            .expect("the bundled classifier is checked by the tests")
    }

    /// A model written by `keyhole train`.
    pub fn load(path: &Path) -> Result<Classifier, ModelError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Unreadable {
            file: file.clone(),
            reason: e.to_string(),
        })?;
        Self::from_bytes(&bytes, &file)
    }

    fn from_bytes(bytes: &[u8], source: &str) -> Result<Classifier, ModelError> {
        let unreadable = |e: candle_core::Error| ModelError::Unreadable {
            file: source.to_string(),
            reason: e.to_string().lines().next().unwrap_or_default().to_string(),
        };
        let vb = VarBuilder::from_slice_safetensors(bytes, DType::F32, &Device::Cpu)
            .map_err(unreadable)?;
        let h = match vb.contains_tensor("h.out.weight") {
            true => Some(HeadH::new(vb.pp("h")).map_err(unreadable)?),
            false => None,
        };
        let r = match vb.contains_tensor("r.out_weight") {
            true => Some(HeadR::new(vb.pp("r")).map_err(unreadable)?),
            false => None,
        };
        Ok(Classifier {
            source: source.to_string(),
            encoder: HashedEncoder::new(vb.pp("encoder")).map_err(unreadable)?,
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
        let holes = Tensor::new(features::hole_ids(&input.window), &Device::Cpu)?.unsqueeze(0)?;
        let holes = self.encoder.holes(&holes)?;
        let logits = match (variant, &self.h, &self.r) {
            (Variant::H, Some(h), _) => h.forward(&holes, false)?,
            (Variant::R, _, Some(r)) => {
                let ids: Vec<u32> = candidate_ids(input)
                    .iter()
                    .flat_map(|ids| features::chunked(ids))
                    .collect();
                let ids = Tensor::from_vec(
                    ids,
                    (RLPG_CANDIDATES, features::CHUNKS * features::CHUNK_LEN),
                    &Device::Cpu,
                )?;
                let (chunks, present) = self.encoder.chunks(&ids)?;
                r.forward(&holes, &chunks.unsqueeze(0)?, &present.unsqueeze(0)?, false)?
            }
            _ => candle_core::bail!("no {} head", variant.name()),
        };
        candle_nn::ops::sigmoid(&logits)?.squeeze(0)?.to_vec1()
    }
}

/// Each candidate's context sub-tokens for RLPG-R, in id order; the default context's material
/// is the code before the hole.
fn candidate_ids(input: &RankInput) -> Vec<Vec<u32>> {
    let mut ids: Vec<Vec<u32>> = input
        .proposals
        .iter()
        .map(|p| features::context_ids(&p.context.text, p.keep))
        .collect();
    ids.resize(DEFAULT_ID, Vec::new());
    ids.push(features::context_ids(input.before_hole, Keep::End));
    ids
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
        match self.classifier.probabilities(self.variant, input) {
            Ok(p) => sorted(
                (0..RLPG_CANDIDATES)
                    .filter(|&id| input.applicable(id))
                    .map(|id| Ranked {
                        id,
                        score: f64::from(p[id]),
                    })
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(
                    "{} failed ({e}); ranking in the fixed order",
                    self.variant.name()
                );
                super::FixedRanker.rank(input)
            }
        }
    }
}
