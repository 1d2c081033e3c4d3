//! Training a classifier on label files (appendix C): Adam, learning rate 3e-4, batches of 64,
//! RLPG's masked loss; repositories split into training and validation, early stopping on the
//! validation success of the top-ranked candidate.
//!
//! RLPG-H trains the encoder with its head (keyhole's encoder is trained from scratch, where the
//! paper froze CodeBERT). RLPG-R then freezes that encoder, as the paper freezes F_phi, and
//! trains its own head; it starts from a model file that already has an encoder. With a BERT
//! encoder (examples made with [`super::dataset::Rebuild::encoder`]) both train only their
//! head on the frozen \[CLS\] vectors, as in the paper.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::dataset::{Example, Inputs};
use super::features::{CHUNK_LEN, CHUNKS, PART_LEN, PARTS};
use super::inference::{E, Weights};
use super::network::{HashedEncoder, HeadH, HeadR, masked_bce};
use super::{BERT_WIDTH, BUNDLED, BUNDLED_NAME, EncoderKind, Variant};
use crate::candidate::CandidateId;
use crate::label::RLPG_CANDIDATES;
use crate::rank::FixedRanker;

/// Paper, appendix C.
const LEARNING_RATE: f64 = 3e-4;
const BATCH: usize = 64;

#[derive(Clone, Debug)]
pub struct TrainOptions {
    pub variant: Variant,
    /// The holes held out for early stopping.
    pub validation: Holdout,
    pub max_epochs: usize,
    /// Epochs without a better validation success before stopping.
    pub patience: usize,
    /// Orders the batches (weight initialisation and dropout use candle's unseeded RNG).
    pub seed: u64,
    /// RLPG-H starts from the model at `start` (the bundled one without it) instead of from
    /// nothing, and keeps it where no epoch does better on the validation holes: a few
    /// hundred labels adjust what the model knows rather than replace it.
    pub fine_tune: bool,
}

/// Which labelled holes are held out for validation: whole repositories (so the success
/// measured is the success on code the model never saw), or with a single repository whole
/// files of it.
#[derive(Clone, Debug, PartialEq)]
pub enum Holdout {
    Repositories(Vec<String>),
    /// (repository, file) pairs.
    Files(BTreeSet<(String, String)>),
}

impl Holdout {
    /// Whether a hole of `file` in `repository` is held out.
    pub fn holds(&self, repository: &str, file: &str) -> bool {
        match self {
            Holdout::Repositories(names) => names.iter().any(|n| n == repository),
            Holdout::Files(files) => files.contains(&(repository.to_string(), file.to_string())),
        }
    }

    /// `junit4` or `3 files of junit4`, for messages and reports.
    pub fn describe(&self) -> String {
        match self {
            Holdout::Repositories(names) => names.join(", "),
            Holdout::Files(files) => {
                let repositories: BTreeSet<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
                let names: Vec<&str> = repositories.into_iter().collect();
                format!("{} files of {}", files.len(), names.join(", "))
            }
        }
    }
}

/// How one epoch went.
#[derive(Clone, Debug, Serialize)]
pub struct Epoch {
    pub epoch: usize,
    pub train_loss: f64,
    pub validation_loss: f64,
    /// Percent of validation holes where the top-ranked candidate succeeded.
    pub validation_success: f64,
}

/// What `keyhole train` writes next to the model.
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    pub variant: &'static str,
    pub train_repositories: Vec<String>,
    pub validation_repositories: Vec<String>,
    pub train_holes: usize,
    pub validation_holes: usize,
    pub epochs: Vec<Epoch>,
    pub best_epoch: usize,
    /// On the validation holes, percent: the model's top candidate, and for comparison the
    /// default context, the fixed ranking's top candidate and the oracle.
    pub validation: Comparison,
    pub seconds: f64,
    pub trained_parameters: usize,
}

impl TrainReport {
    /// The report as Markdown: the split, the validation holes' top-1 success against the
    /// default context, the fixed ranking and the oracle, and each epoch.
    pub fn markdown(&self) -> String {
        let r = self;
        let mut out = format!(
            "# {} training report\n\nTrained on {} ({} holes), validated on {} ({} holes), \
             {:.0} s, {} trained parameters; best epoch {} of {}.\n\n\
             | On validation holes | Top-1 success |\n| --- | --- |\n\
             | {} | {:.2}% |\n| default context | {:.2}% |\n| fixed ranking | {:.2}% |\n| oracle | {:.2}% |\n\n\
             | Epoch | Train loss | Validation loss | Validation success |\n| --- | --- | --- | --- |\n",
            r.variant,
            r.train_repositories.join(", "),
            r.train_holes,
            r.validation_repositories.join(", "),
            r.validation_holes,
            r.seconds,
            r.trained_parameters,
            r.best_epoch,
            r.epochs.len(),
            r.variant,
            r.validation.model,
            r.validation.default,
            r.validation.fixed,
            r.validation.oracle,
        );
        for e in &r.epochs {
            out += &format!(
                "| {} | {:.4} | {:.4} | {:.2}% |\n",
                e.epoch, e.train_loss, e.validation_loss, e.validation_success
            );
        }
        out
    }
}

/// Why no holes can be held out.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HoldoutError {
    #[error("no repositories")]
    NoRepositories,
    /// One repository whose sampled holes lie in fewer than two files.
    #[error(
        "{repository}: its sampled holes are in {files} file{}; tune holds whole files out, so it needs two, or another repository",
        if *files == 1 { "" } else { "s" }
    )]
    TooFewFiles { repository: String, files: usize },
}

/// Why a classifier could not be trained or written. The starting model is named as given
/// (`start`: its path, or the bundled model's name).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    #[error(
        "need holes for training and for validation (held out: {held_out}; found {train} and {validation})"
    )]
    TooFewHoles {
        held_out: String,
        train: usize,
        validation: usize,
    },
    #[error("{start}: cannot read the starting model: {detail}")]
    UnreadableStart { start: String, detail: String },
    #[error(
        "{start}: the starting model was trained on {trained}, not {wanted} (start from a model trained on the same encoder with --start)"
    )]
    OtherEncoder {
        start: String,
        trained: String,
        wanted: String,
    },
    #[error("{start}: the starting model has no {weight} (is it a keyhole classifier?)")]
    MissingWeight { start: String, weight: String },
    #[error("{start}: the starting model does not fit this keyhole: {source}")]
    Misfit {
        start: String,
        source: candle_core::Error,
    },
    #[error(transparent)]
    Tensors(#[from] candle_core::Error),
    #[error("cannot write {}: {detail}", .path.display())]
    Write { path: PathBuf, detail: String },
}

type Result<T> = std::result::Result<T, TrainError>;

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub model: f64,
    pub default: f64,
    pub fixed: f64,
    pub oracle: f64,
}

/// The networks being trained and the variables the optimiser moves.
struct Model {
    vars: VarMap,
    kind: EncoderKind,
    /// keyhole's own encoder; a BERT encoder's vectors come with the examples.
    encoder: Option<HashedEncoder>,
    h: Option<HeadH>,
    r: Option<HeadR>,
    trained: Vec<Var>,
}

impl Model {
    /// A fresh encoder (unless `kind` is a BERT's) and RLPG-H head, or for RLPG-R the encoder
    /// and any RLPG-H head of `start` with a fresh RLPG-R head. Without `start`, RLPG-R starts
    /// from the bundled model, or with a BERT encoder from nothing.
    /// With `fine_tune`, RLPG-H starts from `start`'s (or the bundled model's) weights.
    fn new(
        variant: Variant,
        kind: EncoderKind,
        start: Option<&Path>,
        fine_tune: bool,
    ) -> Result<Model> {
        let mut vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let encoder = match kind {
            EncoderKind::Hashed => Some(HashedEncoder::new(vb.pp("encoder"))?),
            EncoderKind::Bert { .. } => None,
        };
        if variant == Variant::H {
            let h = Some(HeadH::new(vb.pp("h"), kind.dims())?);
            if fine_tune {
                let (saved, source) = starting_weights(start, kind)?;
                if !saved.is_empty() {
                    let names: BTreeSet<String> =
                        vars.data().lock().expect("vars").keys().cloned().collect();
                    if let Some(missing) = names.iter().find(|n| !saved.contains_key(*n)) {
                        return Err(TrainError::MissingWeight {
                            start: source,
                            weight: missing.clone(),
                        });
                    }
                    vars.set(saved.iter().filter(|(name, _)| names.contains(*name)))
                        .map_err(|error| TrainError::Misfit {
                            start: source,
                            source: error,
                        })?;
                }
            }
            let trained = vars.all_vars();
            return Ok(Model {
                vars,
                kind,
                encoder,
                h,
                r: None,
                trained,
            });
        }
        let (saved, source) = starting_weights(start, kind)?;
        // Keep the start's RLPG-H head, if it has one, so the written model still offers it.
        let h = match saved.contains_key("h.out.weight") {
            true => Some(HeadH::new(vb.pp("h"), kind.dims())?),
            false => None,
        };
        let kept: BTreeSet<String> = vars.data().lock().expect("vars").keys().cloned().collect();
        let missing: Vec<&String> = kept
            .iter()
            .filter(|name| !saved.contains_key(*name))
            .collect();
        if let Some(missing) = missing.first() {
            return Err(TrainError::MissingWeight {
                start: source,
                weight: missing.to_string(),
            });
        }
        vars.set(saved.iter().filter(|(name, _)| kept.contains(*name)))
            .map_err(|error| TrainError::Misfit {
                start: source,
                source: error,
            })?;
        let r = Some(HeadR::new(vb.pp("r"), kind.dims())?);
        let trained = vars
            .data()
            .lock()
            .expect("vars")
            .iter()
            .filter(|(name, _)| !kept.contains(*name))
            .map(|(_, var)| var.clone())
            .collect();
        Ok(Model {
            vars,
            kind,
            encoder,
            h,
            r,
            trained,
        })
    }

    fn logits(&self, batch: &Batch, train: bool) -> candle_core::Result<Tensor> {
        let (holes, contexts) = self.encode(&batch.inputs)?;
        match (&self.r, contexts) {
            (Some(r), Some((chunks, present))) => {
                r.forward(&holes.detach(), &chunks, &present, train)
            }
            (_, _) => match &self.h {
                Some(h) => h.forward(&holes, train),
                None => candle_core::bail!("no RLPG-H head"),
            },
        }
    }

    /// Hole representations `[b, Dims::hole]` and, when the batch has contexts, the
    /// candidates' chunk vectors `[b, RLPG_CANDIDATES, c, Dims::chunk]` and their presence
    /// `[b, RLPG_CANDIDATES, c]`.
    fn encode(
        &self,
        inputs: &BatchInputs,
    ) -> candle_core::Result<(Tensor, Option<(Tensor, Tensor)>)> {
        match (&self.encoder, inputs) {
            (Some(encoder), BatchInputs::Ids { holes, contexts }) => {
                let b = holes.dim(0)?;
                let chunks = |ids: &Tensor| -> candle_core::Result<(Tensor, Tensor)> {
                    let (chunks, present) = encoder.chunks(ids)?;
                    Ok((
                        chunks.reshape((b, RLPG_CANDIDATES, CHUNKS, E))?,
                        present.reshape((b, RLPG_CANDIDATES, CHUNKS))?,
                    ))
                };
                Ok((
                    encoder.holes(holes)?,
                    contexts.as_ref().map(chunks).transpose()?,
                ))
            }
            (None, BatchInputs::Vectors { holes, contexts }) => {
                Ok((holes.clone(), contexts.clone()))
            }
            _ => candle_core::bail!("the examples were not made for {}", self.kind.describe()),
        }
    }

    fn snapshot(&self) -> Result<HashMap<String, Tensor>> {
        let data = self.vars.data().lock().expect("vars");
        data.iter()
            .map(|(name, var)| Ok((name.clone(), var.as_tensor().copy()?)))
            .collect()
    }

    fn restore(&mut self, snapshot: &HashMap<String, Tensor>) -> Result<()> {
        Ok(self.vars.set(snapshot.iter())?)
    }
}

/// The weights a model starts from, and where they come from: `start`, else the bundled
/// model, or with a BERT encoder nothing; an error where they were trained on another encoder.
fn starting_weights(
    start: Option<&Path>,
    kind: EncoderKind,
) -> Result<(HashMap<String, Tensor>, String)> {
    let (bytes, source) = match (start, kind) {
        (Some(path), _) => (
            std::borrow::Cow::Owned(std::fs::read(path).map_err(|e| {
                TrainError::UnreadableStart {
                    start: path.display().to_string(),
                    detail: e.to_string(),
                }
            })?),
            path.display().to_string(),
        ),
        (None, EncoderKind::Hashed) => (
            std::borrow::Cow::Borrowed(BUNDLED),
            BUNDLED_NAME.to_string(),
        ),
        (None, EncoderKind::Bert { .. }) => return Ok((HashMap::new(), String::new())),
    };
    let unreadable = |detail: String| TrainError::UnreadableStart {
        start: source.clone(),
        detail,
    };
    let saved_kind =
        EncoderKind::of(&Weights::read(&bytes).map_err(|e| unreadable(e.to_string()))?);
    if saved_kind != kind {
        return Err(TrainError::OtherEncoder {
            start: source,
            trained: saved_kind.describe(),
            wanted: kind.describe(),
        });
    }
    let saved = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| unreadable(e.to_string()))?;
    Ok((saved, source))
}

/// One batch as tensors.
struct Batch {
    inputs: BatchInputs,
    labels: Tensor,
    mask: Tensor,
}

/// The examples' inputs, stacked.
enum BatchInputs {
    /// Hole ids `[b, PARTS * PART_LEN]` and context ids `[b * RLPG_CANDIDATES, CHUNKS *
    /// CHUNK_LEN]`, for the hashed encoder to read.
    Ids {
        holes: Tensor,
        contexts: Option<Tensor>,
    },
    /// A BERT's vectors, already as the heads read them (see [`Model::encode`]).
    Vectors {
        holes: Tensor,
        contexts: Option<(Tensor, Tensor)>,
    },
}

impl Batch {
    fn of(
        examples: &[&Example],
        kind: EncoderKind,
        with_contexts: bool,
    ) -> candle_core::Result<Batch> {
        let b = examples.len();
        let dev = &Device::Cpu;
        let flat = |f: &dyn Fn(&Example) -> &[f32]| -> Vec<f32> {
            examples.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        let inputs = match kind {
            EncoderKind::Hashed => ids(examples, with_contexts)?,
            EncoderKind::Bert { width } => vectors(examples, width, with_contexts)?,
        };
        Ok(Batch {
            inputs,
            labels: Tensor::from_vec(flat(&|e| &e.labels), (b, RLPG_CANDIDATES), dev)?,
            mask: Tensor::from_vec(flat(&|e| &e.mask), (b, RLPG_CANDIDATES), dev)?,
        })
    }
}

/// The examples' hole inputs, concatenated, and their candidates' context inputs, in order,
/// as `pick` takes each example's inputs apart; `pick` gives `None` for inputs made for
/// another encoder.
fn unpack<'e, H: Copy + 'e, C: 'e>(
    examples: &[&'e Example],
    pick: impl Fn(&'e Inputs) -> Option<(&'e [H], &'e [C])>,
) -> candle_core::Result<(Vec<H>, Vec<&'e C>)> {
    let (mut holes, mut contexts) = (Vec::new(), Vec::new());
    for example in examples {
        let Some((hole, c)) = pick(&example.inputs) else {
            candle_core::bail!("the examples were made for different encoders");
        };
        holes.extend_from_slice(hole);
        contexts.extend(c);
    }
    Ok((holes, contexts))
}

fn ids(examples: &[&Example], with_contexts: bool) -> candle_core::Result<BatchInputs> {
    let (b, dev) = (examples.len(), &Device::Cpu);
    let (holes, contexts) = unpack(examples, |inputs| match inputs {
        Inputs::Hashed { hole, contexts } => Some((hole.as_slice(), contexts.as_slice())),
        Inputs::Bert { .. } => None,
    })?;
    let contexts = with_contexts.then(|| {
        let ids: Vec<u32> = contexts
            .iter()
            .flat_map(|c| super::features::chunked(c))
            .collect();
        Tensor::from_vec(ids, (b * RLPG_CANDIDATES, CHUNKS * CHUNK_LEN), dev)
    });
    Ok(BatchInputs::Ids {
        holes: Tensor::from_vec(holes, (b, PARTS * PART_LEN), dev)?,
        contexts: contexts.transpose()?,
    })
}

/// With a BERT encoder each candidate's context is one chunk: its \[CLS\] vector.
fn vectors(
    examples: &[&Example],
    width: usize,
    with_contexts: bool,
) -> candle_core::Result<BatchInputs> {
    let b = examples.len();
    let (holes, contexts) = unpack(examples, |inputs| match inputs {
        Inputs::Bert { hole, contexts } => Some((hole.as_slice(), contexts.as_slice())),
        Inputs::Hashed { .. } => None,
    })?;
    let contexts = with_contexts
        .then(|| -> candle_core::Result<(Tensor, Tensor)> {
            let vectors: Vec<Option<&[f32]>> = contexts.iter().map(|c| c.as_deref()).collect();
            let (chunks, present) = context_chunks(&vectors, width)?;
            Ok((
                chunks.reshape((b, RLPG_CANDIDATES, 1, width))?,
                present.reshape((b, RLPG_CANDIDATES, 1))?,
            ))
        })
        .transpose()?;
    Ok(BatchInputs::Vectors {
        holes: Tensor::from_vec(holes, (b, width), &Device::Cpu)?,
        contexts,
    })
}

/// Candidate contexts' vectors (`None` where a candidate has no context) as RLPG-R's single
/// chunk per candidate: vectors `[n, 1, width]` and presence `[n, 1]`.
fn context_chunks(
    vectors: &[Option<&[f32]>],
    width: usize,
) -> candle_core::Result<(Tensor, Tensor)> {
    let n = vectors.len();
    let mut flat = Vec::with_capacity(n * width);
    for vector in vectors {
        match vector {
            Some(v) => flat.extend_from_slice(v),
            None => flat.resize(flat.len() + width, 0.0),
        }
    }
    let present: Vec<f32> = vectors
        .iter()
        .map(|v| f32::from(u8::from(v.is_some())))
        .collect();
    Ok((
        Tensor::from_vec(flat, (n, 1, width), &Device::Cpu)?,
        Tensor::from_vec(present, (n, 1), &Device::Cpu)?,
    ))
}

/// Train `options.variant` on `examples`, starting (for RLPG-R) from the model at `start`, and
/// write the model to `out` (atomically) with its report beside it.
pub fn train(
    examples: &[Example],
    options: &TrainOptions,
    start: Option<&Path>,
    out: &Path,
    progress: &dyn Fn(&Epoch),
) -> Result<TrainReport> {
    let began = Instant::now();
    let (train, validation): (Vec<&Example>, Vec<&Example>) = examples
        .iter()
        .partition(|e| !options.validation.holds(&e.repository, &e.file));
    if train.is_empty() || validation.is_empty() {
        return Err(TrainError::TooFewHoles {
            held_out: options.validation.describe(),
            train: train.len(),
            validation: validation.len(),
        });
    }
    let kind = train[0].inputs.encoder();
    let fine_tune = options.fine_tune && options.variant == Variant::H;
    let mut model = Model::new(options.variant, kind, start, fine_tune)?;
    let with_contexts = options.variant == Variant::R;
    let params = ParamsAdamW {
        lr: LEARNING_RATE,
        weight_decay: 0.0,
        ..ParamsAdamW::default()
    };
    let mut optimizer = AdamW::new(model.trained.clone(), params)?;
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut order = train.clone();
    let mut epochs = Vec::new();
    let mut best: Option<(Epoch, HashMap<String, Tensor>)> = None;
    if fine_tune {
        // Epoch 0: the starting model, kept unless training does better.
        let (validation_loss, validation_success) = evaluate(&model, &validation, false)?;
        let stats = Epoch {
            epoch: 0,
            train_loss: evaluate(&model, &train, false)?.0,
            validation_loss,
            validation_success,
        };
        progress(&stats);
        epochs.push(stats.clone());
        best = Some((stats, model.snapshot()?));
    }
    for epoch in 1..=options.max_epochs {
        order.shuffle(&mut rng);
        let mut losses = Vec::new();
        for chunk in order.chunks(BATCH) {
            let batch = Batch::of(chunk, kind, with_contexts)?;
            let loss = masked_bce(&model.logits(&batch, true)?, &batch.labels, &batch.mask)?;
            optimizer.backward_step(&loss)?;
            losses.push(f64::from(loss.to_scalar::<f32>()?));
        }
        let (validation_loss, validation_success) = evaluate(&model, &validation, with_contexts)?;
        let stats = Epoch {
            epoch,
            train_loss: losses.iter().sum::<f64>() / losses.len().max(1) as f64,
            validation_loss,
            validation_success,
        };
        progress(&stats);
        epochs.push(stats.clone());
        let better = best.as_ref().is_none_or(|(b, _)| {
            (stats.validation_success, -stats.validation_loss)
                > (b.validation_success, -b.validation_loss)
        });
        if better {
            best = Some((stats, model.snapshot()?));
        } else if epoch - best.as_ref().map_or(0, |(b, _)| b.epoch) >= options.patience {
            break;
        }
    }
    let (best_epoch, weights) = best.expect("at least one epoch");
    model.restore(&weights)?;
    save(&weights, kind, out)?;
    let report = TrainReport {
        variant: options.variant.name(),
        train_repositories: repositories(&train),
        validation_repositories: repositories(&validation),
        train_holes: train.len(),
        validation_holes: validation.len(),
        epochs,
        best_epoch: best_epoch.epoch,
        validation: compare(best_epoch.validation_success, &validation),
        seconds: began.elapsed().as_secs_f64(),
        trained_parameters: model.trained.iter().map(|v| v.elem_count()).sum(),
    };
    Ok(report)
}

/// Mean masked loss and top-1 success (percent) on `examples`, without dropout.
fn evaluate(model: &Model, examples: &[&Example], with_contexts: bool) -> Result<(f64, f64)> {
    let (mut loss, mut hits) = (0.0, 0);
    for chunk in examples.chunks(BATCH) {
        let batch = Batch::of(chunk, model.kind, with_contexts)?;
        let logits = model.logits(&batch, false)?;
        loss += f64::from(masked_bce(&logits, &batch.labels, &batch.mask)?.to_scalar::<f32>()?)
            * chunk.len() as f64;
        for (example, scores) in chunk.iter().zip(logits.to_vec2::<f32>()?) {
            let top = CandidateId::rlpg()
                .filter(|&id| example.mask[id.index()] > 0.0)
                .max_by(|&a, &b| {
                    scores[a.index()]
                        .total_cmp(&scores[b.index()])
                        .then(b.cmp(&a))
                })
                .unwrap_or(CandidateId::DEFAULT);
            hits += usize::from(example.labels[top.index()] > 0.0);
        }
    }
    let n = examples.len().max(1) as f64;
    Ok((loss / n, 100.0 * hits as f64 / n))
}

fn compare(model: f64, examples: &[&Example]) -> Comparison {
    let rate = |hit: &dyn Fn(&Example) -> bool| {
        100.0 * examples.iter().filter(|e| hit(e)).count() as f64 / examples.len().max(1) as f64
    };
    Comparison {
        model,
        default: rate(&|e| e.labels[CandidateId::DEFAULT.index()] > 0.0),
        fixed: rate(&|e| {
            let top = FixedRanker::order()
                .find(|&id| e.mask[id.index()] > 0.0)
                .unwrap_or(CandidateId::DEFAULT);
            e.labels[top.index()] > 0.0
        }),
        oracle: rate(&|e| e.labels.iter().any(|&l| l > 0.0)),
    }
}

fn repositories(examples: &[&Example]) -> Vec<String> {
    let names: BTreeSet<&str> = examples.iter().map(|e| e.repository.as_str()).collect();
    names.into_iter().map(str::to_string).collect()
}

/// Write the weights (and which encoder they need) next to `out` and rename them into place,
/// so a crash never leaves a half-written model.
fn save(weights: &HashMap<String, Tensor>, kind: EncoderKind, out: &Path) -> Result<()> {
    let unwritable = |path: &Path, detail: String| TrainError::Write {
        path: path.to_path_buf(),
        detail,
    };
    crate::feedback::create_parent(out).map_err(|e| unwritable(out, e.to_string()))?;
    let partial = out.with_extension("safetensors.partial");
    let mut weights = weights.clone();
    if let EncoderKind::Bert { width } = kind {
        let marker = Tensor::new(&[width as f32], &Device::Cpu)?;
        weights.insert(BERT_WIDTH.to_string(), marker);
    }
    candle_core::safetensors::save(&weights, &partial)
        .map_err(|e| unwritable(&partial, e.to_string()))?;
    std::fs::rename(&partial, out).map_err(|e| unwritable(out, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hole::HoleWindow;
    use crate::rank::classifier::features;

    /// Holes whose line says `alpha` succeed with proposal 6 only; `beta`, with proposal 20 only.
    fn synthetic(repository: &str, n: usize) -> Vec<Example> {
        (0..n)
            .map(|i| {
                let (word, winner) = if i % 2 == 0 {
                    ("alpha", 6)
                } else {
                    ("beta", 20)
                };
                let prefix = format!("int x{i} = {word}(");
                let window = HoleWindow {
                    before: "class A {\n",
                    prefix: &prefix,
                    after: "}\n",
                };
                let mut labels = vec![0.0; RLPG_CANDIDATES];
                labels[winner] = 1.0;
                Example {
                    repository: repository.into(),
                    file: format!("A{}.java", i % 7),
                    inputs: Inputs::Hashed {
                        hole: features::hole_ids(&window),
                        contexts: Vec::new(),
                    },
                    mask: vec![1.0; RLPG_CANDIDATES],
                    labels,
                }
            })
            .collect()
    }

    #[test]
    fn files_of_one_repository_can_be_held_out() {
        let mut examples = synthetic("only", 1024);
        let held: BTreeSet<(String, String)> = [("only".to_string(), "A3.java".to_string())].into();
        let dir = tempfile::tempdir().unwrap();
        let options = TrainOptions {
            variant: Variant::H,
            validation: Holdout::Files(held),
            max_epochs: 2,
            patience: 1,
            seed: 1,
            fine_tune: false,
        };
        let out = dir.path().join("model.safetensors");
        let report = train(&examples, &options, None, &out, &|_| {}).unwrap();
        let held_out = examples.iter().filter(|e| e.file == "A3.java").count();
        assert_eq!(report.validation_holes, held_out);
        assert_eq!(report.train_holes, examples.len() - held_out);
        examples.retain(|e| e.file == "A3.java");
        let error = train(&examples, &options, None, &out, &|_| {}).unwrap_err();
        assert!(
            error.to_string().contains("held out: 1 files of only"),
            "{error}"
        );
    }

    #[test]
    fn rlpg_h_learns_which_proposal_a_hole_needs() {
        let mut examples = synthetic("train", 1024);
        examples.extend(synthetic("valid", 128));
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("model.safetensors");
        let options = TrainOptions {
            variant: Variant::H,
            validation: Holdout::Repositories(vec!["valid".into()]),
            max_epochs: 80,
            // Success on 128 holes swings between epochs while the loss falls (and matrix
            // products split by thread count differ in the last bits): stop late, not on a
            // swing.
            patience: 40,
            seed: 1,
            fine_tune: false,
        };
        let report = train(&examples, &options, None, &out, &|_| {}).unwrap();
        // The fixed order cannot tell the two kinds of hole apart; the classifier must.
        assert_eq!(report.validation.fixed, 50.0);
        assert!(report.validation.model > 95.0, "{report:?}");
        let loaded = crate::rank::classifier::Classifier::load(&out).unwrap();
        assert!(loaded.has(Variant::H) && !loaded.has(Variant::R));
        assert!(!out.with_extension("safetensors.partial").exists());
        // Fine-tuned from it, the model knows the holes before its first epoch.
        let again = dir.path().join("again.safetensors");
        let fine_tune = TrainOptions {
            max_epochs: 1,
            fine_tune: true,
            ..options
        };
        let tuned = train(&examples, &fine_tune, Some(&out), &again, &|_| {}).unwrap();
        assert_eq!(tuned.epochs[0].epoch, 0);
        assert!(tuned.epochs[0].validation_success > 95.0, "{tuned:?}");
        assert!(tuned.validation.model > 95.0, "{tuned:?}");
    }
}
