//! The classifier's forward pass in plain Rust: what ranking runs, with or without the `train`
//! feature, so the core needs no tensor library. The weights are read from the safetensors file
//! into plain `Vec<f32>`s; the networks are the ones [`super::network`] trains in candle
//! (where each is described), without dropout: matrix-vector products, relu, layer norm,
//! softmax attention and a sigmoid. `agreement`'s tests hold the two to the same
//! probabilities.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

use super::features::{BUCKETS, CHUNK_LEN, PAD, PART_LEN, PARTS};
use crate::label::RLPG_CANDIDATES;

/// Sub-token embedding width (CodeBERT's hidden size is 768).
pub const E: usize = 32;
/// Hole-window representation width, the model dimension of RLPG-R (paper: 768).
pub const Z: usize = 64;
/// Attention heads and per-head key/value width: the paper's τ = 4 and d_k = d_v = 32.
pub const HEADS: usize = 4;
pub const HEAD_DIM: usize = 32;
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// The widths the heads are built with, which follow the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Width of a hole-window representation: RLPG-H's input, RLPG-R's query and model width.
    pub hole: usize,
    /// Width of a context chunk vector: RLPG-R's keys and values.
    pub chunk: usize,
    /// RLPG-H's hidden layer.
    pub hidden: usize,
    /// RLPG-R's feed-forward layer.
    pub feed_forward: usize,
}

impl Dims {
    /// With [`HashedEncoder`]: hidden 64 and feed-forward 4 × [`Z`] where the paper has 512
    /// and 2048, to train in minutes on two cores.
    pub const HASHED: Dims = Dims {
        hole: Z,
        chunk: E,
        hidden: 64,
        feed_forward: 4 * Z,
    };

    /// With a frozen BERT of hidden size `width`: appendix C's W1 ∈ R^{512×768} and
    /// feed-forward 2048 (the paper's CodeBERT has width 768).
    pub fn bert(width: usize) -> Dims {
        Dims {
            hole: width,
            chunk: width,
            hidden: 512,
            feed_forward: 2048,
        }
    }
}

/// A model file's tensors by name, as `f32`s, each with its shape.
pub struct Weights(HashMap<String, (Vec<usize>, Vec<f32>)>);

/// Why a file's weights are not a classifier's; each names the weight.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WeightsError {
    #[error(transparent)]
    Safetensors(#[from] safetensors::SafeTensorError),
    #[error("weight {name} is {dtype:?}, not F32")]
    NotF32 { name: String, dtype: Dtype },
    #[error("weight {name} holds {value}, not a finite number")]
    NotFinite { name: String, value: f32 },
    #[error("weight {0} is missing")]
    Missing(String),
    #[error("weight {name} has shape {found:?}, not {wanted:?}")]
    Shape {
        name: String,
        found: Vec<usize>,
        wanted: Vec<usize>,
    },
}

impl Weights {
    /// The tensors of a safetensors file; every one must be `F32` and finite (a NaN weight
    /// would give NaN scores that decide the order). The error names the weight.
    pub fn read(bytes: &[u8]) -> Result<Weights, WeightsError> {
        let file = SafeTensors::deserialize(bytes)?;
        let mut tensors = HashMap::new();
        let mut names = file.names();
        names.sort();
        for name in names {
            let view = file.tensor(name)?;
            if view.dtype() != Dtype::F32 {
                return Err(WeightsError::NotF32 {
                    name: name.to_string(),
                    dtype: view.dtype(),
                });
            }
            let values: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if let Some(&value) = values.iter().find(|v| !v.is_finite()) {
                return Err(WeightsError::NotFinite {
                    name: name.to_string(),
                    value,
                });
            }
            tensors.insert(name.to_string(), (view.shape().to_vec(), values));
        }
        Ok(Weights(tensors))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The one value of tensor `name`, if the file has it.
    pub fn scalar(&self, name: &str) -> Option<f32> {
        self.0
            .get(name)
            .and_then(|(_, values)| values.first().copied())
    }

    /// Tensor `name`, which must have `shape`.
    fn take(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightsError> {
        match self.0.get(name) {
            None => Err(WeightsError::Missing(name.to_string())),
            Some((found, _)) if found != shape => Err(WeightsError::Shape {
                name: name.to_string(),
                found: found.clone(),
                wanted: shape.to_vec(),
            }),
            Some((_, values)) => Ok(values.clone()),
        }
    }
}

/// `y = W x + b`, with `W` stored row by row as PyTorch and candle store it (`[out, in]`).
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
}

impl Linear {
    fn load(
        weights: &Weights,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<Self, WeightsError> {
        Ok(Linear {
            weight: weights.take(&format!("{name}.weight"), &[outputs, inputs])?,
            bias: weights.take(&format!("{name}.bias"), &[outputs])?,
            inputs,
        })
    }

    fn apply(&self, x: &[f32]) -> Vec<f32> {
        self.weight
            .chunks_exact(self.inputs)
            .zip(&self.bias)
            .map(|(row, b)| dot(row, x) + b)
            .collect()
    }
}

struct LayerNorm {
    gain: Vec<f32>,
    shift: Vec<f32>,
}

impl LayerNorm {
    fn load(weights: &Weights, name: &str, width: usize) -> Result<Self, WeightsError> {
        Ok(LayerNorm {
            gain: weights.take(&format!("{name}.weight"), &[width])?,
            shift: weights.take(&format!("{name}.bias"), &[width])?,
        })
    }

    fn apply(&self, x: &[f32]) -> Vec<f32> {
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let variance = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let scale = 1.0 / (variance + LAYER_NORM_EPS).sqrt();
        x.iter()
            .zip(self.gain.iter().zip(&self.shift))
            .map(|(v, (g, s))| (v - mean) * scale * g + s)
            .collect()
    }
}

/// The dot product, summed in eight lanes so that the compiler vectorizes it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn relu(mut x: Vec<f32>) -> Vec<f32> {
    x.iter_mut().for_each(|v| *v = v.max(0.0));
    x
}

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// keyhole's encoder F_phi: hashed sub-token embeddings, mean-pooled.
pub struct HashedEncoder {
    /// [`BUCKETS`] rows of [`E`].
    table: Vec<f32>,
    project: Linear,
}

impl HashedEncoder {
    pub fn load(weights: &Weights) -> Result<Self, WeightsError> {
        Ok(HashedEncoder {
            table: weights.take("encoder.table", &[BUCKETS, E])?,
            project: Linear::load(weights, "encoder.project", PARTS * E, Z)?,
        })
    }

    /// The mean embedding of `ids`, padding left out (zero when all are padding).
    fn bag_mean(&self, ids: &[u32]) -> [f32; E] {
        let mut sum = [0f32; E];
        let mut count = 0;
        for &id in ids.iter().filter(|&&id| id != PAD) {
            let row = &self.table[id as usize * E..][..E];
            sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
            count += 1;
        }
        sum.map(|s| s / count.max(1) as f32)
    }

    /// F(H) of a hole window's `features::hole_ids`: `[Z]`.
    pub fn hole(&self, ids: &[u32]) -> Vec<f32> {
        let parts: Vec<f32> = ids
            .chunks_exact(PART_LEN)
            .flat_map(|part| self.bag_mean(part))
            .collect();
        relu(self.project.apply(&parts))
    }

    /// A context's chunk vectors from its `features::chunked` ids: `CHUNKS` of them, each
    /// `None` where the chunk holds no sub-token.
    pub fn chunks(&self, ids: &[u32]) -> Vec<Option<Vec<f32>>> {
        ids.chunks_exact(CHUNK_LEN)
            .map(|chunk| {
                let present = chunk.iter().any(|&id| id != PAD);
                present.then(|| self.bag_mean(chunk).to_vec())
            })
            .collect()
    }
}

/// RLPG-H: sigmoid(W2 relu(W1 F(H) + b1) + b2), here up to the logits.
pub struct HeadH {
    hidden: Linear,
    out: Linear,
}

impl HeadH {
    pub fn load(weights: &Weights, dims: Dims) -> Result<Self, WeightsError> {
        Ok(HeadH {
            hidden: Linear::load(weights, "h.hidden", dims.hole, dims.hidden)?,
            out: Linear::load(weights, "h.out", dims.hidden, RLPG_CANDIDATES)?,
        })
    }

    /// The logits of every candidate from the hole's representation.
    pub fn logits(&self, hole: &[f32]) -> Vec<f32> {
        self.out.apply(&relu(self.hidden.apply(hole)))
    }
}

/// RLPG-R: the hole window attends over each candidate context's chunks, then the G block and
/// one output row per candidate.
pub struct HeadR {
    query: Linear,
    key: Linear,
    value: Linear,
    combine: Linear,
    norm1: LayerNorm,
    feed1: Linear,
    feed2: Linear,
    norm2: LayerNorm,
    /// Row p scores candidate p.
    out_weight: Vec<f32>,
    out_bias: Vec<f32>,
}

impl HeadR {
    pub fn load(weights: &Weights, dims: Dims) -> Result<Self, WeightsError> {
        let (width, model) = (HEADS * HEAD_DIM, dims.hole);
        Ok(HeadR {
            query: Linear::load(weights, "r.query", model, width)?,
            key: Linear::load(weights, "r.key", dims.chunk, width)?,
            value: Linear::load(weights, "r.value", dims.chunk, width)?,
            combine: Linear::load(weights, "r.combine", width, model)?,
            norm1: LayerNorm::load(weights, "r.norm1", model)?,
            feed1: Linear::load(weights, "r.feed1", model, dims.feed_forward)?,
            feed2: Linear::load(weights, "r.feed2", dims.feed_forward, model)?,
            norm2: LayerNorm::load(weights, "r.norm2", model)?,
            out_weight: weights.take("r.out_weight", &[RLPG_CANDIDATES, model])?,
            out_bias: weights.take("r.out_bias", &[RLPG_CANDIDATES])?,
        })
    }

    /// The logits of every candidate from the hole's representation and, per candidate (by
    /// id), its chunk vectors (`None` for an empty chunk).
    pub fn logits(&self, hole: &[f32], contexts: &[Vec<Option<Vec<f32>>>]) -> Vec<f32> {
        let query = self.query.apply(hole);
        contexts
            .iter()
            .zip(self.out_weight.chunks_exact(hole.len()).zip(&self.out_bias))
            .map(|(chunks, (row, bias))| {
                let attended = self.combine.apply(&self.attend(&query, chunks));
                // The G block: residual, layer norm, feed-forward, residual, layer norm.
                let residual: Vec<f32> = attended.iter().zip(hole).map(|(a, h)| a + h).collect();
                let x = self.norm1.apply(&residual);
                let fed = self.feed2.apply(&relu(self.feed1.apply(&x)));
                let x = self
                    .norm2
                    .apply(&fed.iter().zip(&x).map(|(f, x)| f + x).collect::<Vec<_>>());
                dot(row, &x) + bias
            })
            .collect()
    }

    /// Each head's softmax-weighted values over the present chunks. Empty chunks get no
    /// attention (the weight candle's -1e9 mask gives them rounds to 0); with none present
    /// the weights are even over chunks that are all zero vectors, so the values are all the
    /// value projection's bias.
    fn attend(&self, query: &[f32], chunks: &[Option<Vec<f32>>]) -> Vec<f32> {
        let present: Vec<&Vec<f32>> = chunks.iter().flatten().collect();
        if present.is_empty() {
            return self.value.bias.clone();
        }
        let keys: Vec<Vec<f32>> = present.iter().map(|c| self.key.apply(c)).collect();
        let values: Vec<Vec<f32>> = present.iter().map(|c| self.value.apply(c)).collect();
        let scale = (HEAD_DIM as f32).sqrt();
        let mut attended = vec![0f32; HEADS * HEAD_DIM];
        for head in 0..HEADS {
            let q = of_head(query, head);
            let scores: Vec<f32> = keys
                .iter()
                .map(|k| dot(of_head(k, head), q) / scale)
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f32 = exps.iter().sum();
            let out = &mut attended[head * HEAD_DIM..][..HEAD_DIM];
            for (value, e) in values.iter().zip(&exps) {
                let weight = e / total;
                out.iter_mut()
                    .zip(of_head(value, head))
                    .for_each(|(o, v)| *o += weight * v);
            }
        }
        attended
    }
}

/// Head `head`'s part of a query, key or value.
fn of_head(v: &[f32], head: usize) -> &[f32] {
    &v[head * HEAD_DIM..][..HEAD_DIM]
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A safetensors file of `(name, dtype, shape, little-endian bytes)` tensors, written by
    /// hand so that the core's tests need no tensor library.
    pub fn safetensors_file(tensors: &[(&str, &str, &[usize], Vec<u8>)]) -> Vec<u8> {
        let (mut header, mut data) = (serde_json::Map::new(), Vec::new());
        for (name, dtype, shape, bytes) in tensors {
            let offsets = [data.len(), data.len() + bytes.len()];
            let entry =
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": offsets});
            header.insert(name.to_string(), entry);
            data.extend_from_slice(bytes);
        }
        let mut header = serde_json::to_vec(&header).unwrap();
        header.resize(header.len().next_multiple_of(8), b' ');
        [(header.len() as u64).to_le_bytes().to_vec(), header, data].concat()
    }

    pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn weights_are_read_as_f32_and_a_bad_one_is_named() {
        let good = safetensors_file(&[("a.weight", "F32", &[2, 2], f32_bytes(&[1., 2., 3., 4.]))]);
        let weights = Weights::read(&good).unwrap();
        assert_eq!(weights.take("a.weight", &[2, 2]).unwrap(), [1., 2., 3., 4.]);
        let wrong = weights.take("a.weight", &[4]).unwrap_err().to_string();
        assert!(
            wrong.contains("a.weight") && wrong.contains("[2, 2]"),
            "{wrong}"
        );
        assert!(
            weights
                .take("b.weight", &[4])
                .unwrap_err()
                .to_string()
                .contains("b.weight")
        );
        assert_eq!(weights.scalar("a.weight"), Some(1.0));

        let nan = safetensors_file(&[("a.bias", "F32", &[2], f32_bytes(&[0., f32::NAN]))]);
        let error = Weights::read(&nan).err().unwrap().to_string();
        assert!(error.contains("a.bias") && error.contains("NaN"), "{error}");
        let half = safetensors_file(&[("a.bias", "F16", &[2], vec![0; 4])]);
        let error = Weights::read(&half).err().unwrap().to_string();
        assert!(error.contains("a.bias") && error.contains("F16"), "{error}");
        assert!(Weights::read(b"not a model").is_err());
    }

    #[test]
    fn a_linear_layer_and_a_layer_norm_compute_what_they_say() {
        let file = safetensors_file(&[
            (
                "l.weight",
                "F32",
                &[2, 3],
                f32_bytes(&[1., 0., -1., 0.5, 0.5, 0.5]),
            ),
            ("l.bias", "F32", &[2], f32_bytes(&[0.25, -1.])),
            ("n.weight", "F32", &[2], f32_bytes(&[2., 1.])),
            ("n.bias", "F32", &[2], f32_bytes(&[0., 1.])),
        ]);
        let weights = Weights::read(&file).unwrap();
        let linear = Linear::load(&weights, "l", 3, 2).unwrap();
        assert_eq!(linear.apply(&[1., 2., 4.]), [1. - 4. + 0.25, 3.5 - 1.]);
        let norm = LayerNorm::load(&weights, "n", 2).unwrap();
        // Mean 2, variance 1: (-1, 1) scaled by the gains and shifted.
        let out = norm.apply(&[1., 3.]);
        assert!(
            (out[0] + 2.0).abs() < 1e-4 && (out[1] - 2.0).abs() < 1e-4,
            "{out:?}"
        );
        let long: Vec<f32> = (0..19).map(|i| i as f32).collect();
        assert_eq!(
            dot(&long, &long),
            (0..19).map(|i| (i * i) as f32).sum::<f32>()
        );
    }
}
