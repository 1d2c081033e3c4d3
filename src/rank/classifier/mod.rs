//! RLPG's prompt proposal classifier (paper section 2.2, appendix C): given the hole window
//! (and, for RLPG-R, every candidate's context), the probability that each candidate's prompt
//! yields the right line. Candidates are the 62 proposals and the default context.
//!
//! A model file holds the encoder and one or both heads. keyhole ships one trained on the
//! development corpus ([`Classifier::bundled`]); `keyhole train` makes others. A model trained
//! on a local BERT-family encoder (`keyhole train --encoder-dir DIR`, the paper's frozen
//! CodeBERT) holds only the heads and a tensor naming the encoder's width, and needs the same
//! directory to rank.
//!
//! The networks are written twice: in candle ([`network`], the `train` feature), because
//! training needs its autograd, and in plain Rust ([`inference`]), which is what ranks, with or
//! without that feature, so that the core needs no tensor library. Tests (`agreement`) hold
//! the two to the same probabilities.

#[cfg(all(test, feature = "train"))]
mod agreement;
pub mod bert;
#[cfg(feature = "train")]
pub mod dataset;
mod features;
mod inference;
#[cfg(feature = "train")]
mod network;
#[cfg(feature = "train")]
pub mod train;

use std::path::Path;

use serde::Serialize;

use super::{RankInput, Ranked, Ranker, sorted};
use crate::candidate::CandidateId;
use crate::hole::HoleWindow;
use crate::token::Keep;
use bert::{BertEncoder, EncoderError};
use inference::{Dims, HashedEncoder, HeadH, HeadR, Weights};

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
    /// What a model file's weights say.
    fn of(weights: &Weights) -> EncoderKind {
        match weights.scalar(BERT_WIDTH) {
            None => EncoderKind::Hashed,
            Some(width) => EncoderKind::Bert {
                width: width as usize,
            },
        }
    }

    fn dims(self) -> Dims {
        match self {
            EncoderKind::Hashed => Dims::HASHED,
            EncoderKind::Bert { width } => Dims::bert(width),
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
    #[error("{file}: not a keyhole classifier: {source}")]
    Unreadable {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not a keyhole classifier: {source}")]
    Weights {
        file: String,
        source: inference::WeightsError,
    },
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
    #[error(
        "{file}: trained on a BERT encoder of hidden size {width}; ranking with it needs the `bert` feature, which this keyhole was built without"
    )]
    NeedsBertFeature { file: String, width: usize },
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
    /// The hole window's representation (`Dims::hole` wide).
    fn hole(&self, window: &HoleWindow) -> Result<Vec<f32>, EncoderError> {
        match self {
            Encoder::Hashed(e) => Ok(e.hole(&features::hole_ids(window))),
            Encoder::Bert(e) => e.encode(&window.text(), WINDOW_KEEP),
        }
    }

    /// Every candidate's chunk vectors (`Dims::chunk` wide), by id; `None` for an empty chunk.
    fn contexts(&self, input: &RankInput) -> Result<Vec<Vec<Option<Vec<f32>>>>, EncoderError> {
        candidate_contexts(input)
            .into_iter()
            .map(|(text, keep)| match self {
                Encoder::Hashed(e) => Ok(e.chunks(
                    &features::chunked(&features::context_ids(text, keep)).collect::<Vec<_>>(),
                )),
                // A BERT encoder reads a context as one chunk: its \[CLS\] vector.
                Encoder::Bert(e) => Ok(vec![e.encode_context(text, keep)?]),
            })
            .collect()
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
        let bytes = std::fs::read(path).map_err(|source| ModelError::Unreadable {
            file: file.clone(),
            source,
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
        let unreadable = |error| ModelError::Weights {
            file: source.to_string(),
            source: error,
        };
        let weights = Weights::read(bytes).map_err(unreadable)?;
        let kind = EncoderKind::of(&weights);
        let h = match weights.contains("h.out.weight") {
            true => Some(HeadH::load(&weights, kind.dims()).map_err(unreadable)?),
            false => None,
        };
        let r = match weights.contains("r.out_weight") {
            true => Some(HeadR::load(&weights, kind.dims()).map_err(unreadable)?),
            false => None,
        };
        let encoder = match (kind, encoder_dir) {
            (EncoderKind::Hashed, None) => {
                Encoder::Hashed(HashedEncoder::load(&weights).map_err(unreadable)?)
            }
            (EncoderKind::Bert { width }, _) if !cfg!(feature = "bert") => {
                return Err(ModelError::NeedsBertFeature {
                    file: source.to_string(),
                    width,
                });
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
            return Err(self.missing(variant));
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
    ) -> Result<Vec<f32>, ModelError> {
        let logits = match (variant, &self.h, &self.r) {
            (Variant::H, Some(h), _) => h.logits(&self.encoder.hole(&input.window)?),
            (Variant::R, _, Some(r)) => r.logits(
                &self.encoder.hole(&input.window)?,
                &self.encoder.contexts(input)?,
            ),
            _ => return Err(self.missing(variant)),
        };
        Ok(logits.into_iter().map(inference::sigmoid).collect())
    }

    fn missing(&self, variant: Variant) -> ModelError {
        ModelError::MissingHead {
            file: self.source.clone(),
            variant: variant.name(),
            flag: variant.prefix(),
        }
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

#[cfg(test)]
mod tests {
    use super::inference::tests::{f32_bytes, safetensors_file};
    use super::*;
    use crate::hole::Hole;
    use crate::label::RLPG_CANDIDATES;
    use crate::repo::RepoIndex;

    #[test]
    fn the_bundled_classifier_ranks_a_hole_with_both_heads() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample-repo");
        let index = RepoIndex::open(Path::new(dir), None).unwrap();
        let hole = Hole::parse(&index, crate::sample::DEMO_HOLE).unwrap();
        let input = RankInput::new(&index, &hole, &[]);
        let classifier = Classifier::bundled();
        for variant in [Variant::H, Variant::R] {
            let p = classifier.probabilities(variant, &input).unwrap();
            assert_eq!(p.len(), RLPG_CANDIDATES);
            assert!(p.iter().all(|p| (0.0..=1.0).contains(p)), "{p:?}");
            assert!(p.iter().any(|q| q != &p[0]), "{p:?}");
        }
    }

    /// A model trained on a BERT encoder of hidden size 8: its marker and an RLPG-H head.
    fn bert_trained() -> Vec<u8> {
        let dims = Dims::bert(8);
        let zeros = |n: usize| f32_bytes(&vec![0.0; n]);
        safetensors_file(&[
            (BERT_WIDTH, "F32", &[1], f32_bytes(&[8.0])),
            (
                "h.hidden.weight",
                "F32",
                &[dims.hidden, 8],
                zeros(dims.hidden * 8),
            ),
            ("h.hidden.bias", "F32", &[dims.hidden], zeros(dims.hidden)),
            (
                "h.out.weight",
                "F32",
                &[RLPG_CANDIDATES, dims.hidden],
                zeros(RLPG_CANDIDATES * dims.hidden),
            ),
            (
                "h.out.bias",
                "F32",
                &[RLPG_CANDIDATES],
                zeros(RLPG_CANDIDATES),
            ),
        ])
    }

    #[test]
    fn a_bert_trained_model_says_in_one_line_what_ranking_with_it_needs() {
        let error = Classifier::from_bytes(&bert_trained(), "m.safetensors", None)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(
            error.starts_with("m.safetensors: ") && error.contains("8"),
            "{error}"
        );
        match cfg!(feature = "bert") {
            true => assert!(error.contains("--encoder-dir"), "{error}"),
            false => assert!(error.contains("the `bert` feature"), "{error}"),
        }
    }

    #[test]
    fn a_model_whose_weights_do_not_fit_names_the_weight() {
        let mut bad = bert_trained();
        // The marker says 8; a width of 6 gives every head weight another shape.
        let at = bad
            .windows(4)
            .position(|w| w == 8f32.to_le_bytes())
            .unwrap();
        bad[at..at + 4].copy_from_slice(&6f32.to_le_bytes());
        let error = Classifier::from_bytes(&bad, "m.safetensors", None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("m.safetensors: not a keyhole classifier: weight h.hidden.weight"),
            "{error}"
        );
    }
}
