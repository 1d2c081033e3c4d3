//! The networks, in candle, for training with its autograd (ranking runs the same networks in
//! plain Rust, [`super::inference`], which holds the dimensions). With keyhole's own encoder the dimensions are smaller than the
//! paper's so that training fits in minutes on two CPU cores (appendix C uses CodeBERT's 768;
//! see each constant); with a local BERT-family encoder ([`super::bert`]) the heads take the
//! paper's dimensions ([`Dims::bert`]).
//!
//! - [`HashedEncoder`]: F_phi of the paper, trained from scratch: mean-pooled hashed sub-token
//!   embeddings per hole-window part, concatenated and projected to [`Z`].
//! - [`HeadH`] (RLPG-H, eq. 1): sigmoid(W2 relu(W1 F(H) + b1) + b2) over the candidates.
//! - [`HeadR`] (RLPG-R, C.2): multi-head attention with the hole window as query over each
//!   candidate context's chunks, the G block, and one output row per candidate.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, Linear, VarBuilder, layer_norm, linear, ops};

use super::features::{BUCKETS, CHUNK_LEN, CHUNKS, PAD, PART_LEN, PARTS};
use super::inference::{Dims, E, HEAD_DIM, HEADS, LAYER_NORM_EPS, Z};
use crate::label::RLPG_CANDIDATES;

/// Dropout while training (paper: 0.25).
pub const DROPOUT: f32 = 0.25;

/// Mean of the embeddings of each row of `ids` (`[n, len]`), padding left out: `[n, E]`.
fn bag_means(table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    let (n, len) = ids.dims2()?;
    let vectors = table
        .index_select(&ids.flatten_all()?, 0)?
        .reshape((n, len, E))?;
    let mask = ids.ne(PAD)?.to_dtype(DType::F32)?;
    let sums = vectors.broadcast_mul(&mask.unsqueeze(2)?)?.sum(1)?;
    let counts = mask.sum_keepdim(1)?.clamp(1f32, f32::MAX)?;
    sums.broadcast_div(&counts)
}

pub struct HashedEncoder {
    table: Tensor,
    project: Linear,
}

impl HashedEncoder {
    pub fn new(vb: VarBuilder) -> Result<Self> {
        let table = vb.get_with_hints(
            (BUCKETS, E),
            "table",
            candle_nn::Init::Randn {
                mean: 0.0,
                stdev: 0.1,
            },
        )?;
        Ok(HashedEncoder {
            table,
            project: linear(PARTS * E, Z, vb.pp("project"))?,
        })
    }

    /// F(H) for a batch of hole windows, `ids` `[b, PARTS * PART_LEN]`: `[b, Z]`.
    pub fn holes(&self, ids: &Tensor) -> Result<Tensor> {
        let b = ids.dim(0)?;
        let parts = bag_means(&self.table, &ids.reshape((b * PARTS, PART_LEN))?)?;
        self.project
            .forward(&parts.reshape((b, PARTS * E))?)?
            .relu()
    }

    /// Chunk vectors of candidate contexts, `ids` `[n, CHUNKS * CHUNK_LEN]`: `[n, CHUNKS, E]`,
    /// and which chunks hold any sub-token, `[n, CHUNKS]`. The encoder is frozen here, as
    /// F_phi is in the paper.
    pub fn chunks(&self, ids: &Tensor) -> Result<(Tensor, Tensor)> {
        let n = ids.dim(0)?;
        let rows = ids.reshape((n * CHUNKS, CHUNK_LEN))?;
        let vectors = bag_means(&self.table.detach(), &rows)?.reshape((n, CHUNKS, E))?;
        let present = rows
            .ne(PAD)?
            .to_dtype(DType::F32)?
            .max(1)?
            .reshape((n, CHUNKS))?;
        Ok((vectors, present))
    }
}

pub struct HeadH {
    hidden: Linear,
    out: Linear,
}

impl HeadH {
    pub fn new(vb: VarBuilder, dims: Dims) -> Result<Self> {
        Ok(HeadH {
            hidden: linear(dims.hole, dims.hidden, vb.pp("hidden"))?,
            out: linear(dims.hidden, RLPG_CANDIDATES, vb.pp("out"))?,
        })
    }

    /// Logits `[b, RLPG_CANDIDATES]` from hole representations `[b, Dims::hole]`. The paper gives RLPG-H
    /// no dropout; with an encoder trained from scratch on a few thousand holes it overfits
    /// within two epochs, so training drops out the hidden layer as RLPG-R's G block does.
    pub fn forward(&self, holes: &Tensor, train: bool) -> Result<Tensor> {
        let hidden = self.hidden.forward(holes)?.relu()?;
        let hidden = if train {
            ops::dropout(&hidden, DROPOUT)?
        } else {
            hidden
        };
        self.out.forward(&hidden)
    }
}

pub struct HeadR {
    query: Linear,
    key: Linear,
    value: Linear,
    combine: Linear,
    norm1: LayerNorm,
    feed1: Linear,
    feed2: Linear,
    norm2: LayerNorm,
    /// W_r: row p scores candidate p (the paper's W_r ∈ R^{63×768}, b_p ∈ R^63).
    out_weight: Tensor,
    out_bias: Tensor,
}

impl HeadR {
    pub fn new(vb: VarBuilder, dims: Dims) -> Result<Self> {
        let (width, model) = (HEADS * HEAD_DIM, dims.hole);
        Ok(HeadR {
            query: linear(model, width, vb.pp("query"))?,
            key: linear(dims.chunk, width, vb.pp("key"))?,
            value: linear(dims.chunk, width, vb.pp("value"))?,
            combine: linear(width, model, vb.pp("combine"))?,
            norm1: layer_norm(model, f64::from(LAYER_NORM_EPS), vb.pp("norm1"))?,
            feed1: linear(model, dims.feed_forward, vb.pp("feed1"))?,
            feed2: linear(dims.feed_forward, model, vb.pp("feed2"))?,
            norm2: layer_norm(model, f64::from(LAYER_NORM_EPS), vb.pp("norm2"))?,
            out_weight: vb.get_with_hints(
                (RLPG_CANDIDATES, model),
                "out_weight",
                candle_nn::init::DEFAULT_KAIMING_NORMAL,
            )?,
            out_bias: vb.get_with_hints(
                RLPG_CANDIDATES,
                "out_bias",
                candle_nn::Init::Const(0.0),
            )?,
        })
    }

    /// Logits `[b, RLPG_CANDIDATES]` from hole representations `[b, Dims::hole]` and each
    /// candidate's `c` chunk vectors `[b, RLPG_CANDIDATES, c, Dims::chunk]` with their presence
    /// `[b, RLPG_CANDIDATES, c]`. Dropout applies when `train`.
    pub fn forward(
        &self,
        holes: &Tensor,
        chunks: &Tensor,
        present: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let (b, m, c) = (holes.dim(0)?, RLPG_CANDIDATES, chunks.dim(2)?);
        let dropout = |x: Tensor| {
            if train {
                ops::dropout(&x, DROPOUT)
            } else {
                Ok(x)
            }
        };
        // Query [b, 1, H, 1, d]; keys and values [b, m, H, c, d]. With one query per
        // candidate the products are broadcast sums rather than matrix products.
        let query = self
            .query
            .forward(holes)?
            .reshape((b, 1, HEADS, 1, HEAD_DIM))?;
        let heads = |proj: &Linear| -> Result<Tensor> {
            proj.forward(chunks)?
                .reshape((b, m, c, HEADS, HEAD_DIM))?
                .transpose(2, 3)
        };
        let (keys, values) = (heads(&self.key)?, heads(&self.value)?);
        let scores = (keys.broadcast_mul(&query)?.sum(D::Minus1)? / (HEAD_DIM as f64).sqrt())?;
        // Empty chunks get no attention; a context with none attends evenly to nothing useful
        // and is masked out of the loss anyway.
        let blocked = ((present.reshape((b, m, 1, c))? - 1.0)? * 1e9)?;
        let weights = ops::softmax_last_dim(&scores.broadcast_add(&blocked)?.contiguous()?)?;
        let attended = values
            .broadcast_mul(&weights.unsqueeze(D::Minus1)?)?
            .sum(3)?
            .reshape((b, m, HEADS * HEAD_DIM))?;
        let attended = self.combine.forward(&attended)?;
        // The G block: dropout, residual, layer norm, feed-forward, dropout, residual, norm.
        let x = self
            .norm1
            .forward(&dropout(attended)?.broadcast_add(&holes.unsqueeze(1)?)?)?;
        let fed = self.feed2.forward(&self.feed1.forward(&x)?.relu()?)?;
        let x = self.norm2.forward(&(dropout(fed)? + &x)?)?;
        x.broadcast_mul(&self.out_weight.unsqueeze(0)?)?
            .sum(D::Minus1)?
            .broadcast_add(&self.out_bias)
    }
}

/// RLPG's masked loss: per hole, binary cross-entropy averaged over its applicable candidates;
/// then averaged over holes. `logits`, `labels` and `mask` are `[b, RLPG_CANDIDATES]`.
pub fn masked_bce(logits: &Tensor, labels: &Tensor, mask: &Tensor) -> Result<Tensor> {
    // max(x, 0) - x y + log(1 + exp(-|x|)): BCE on logits without overflow.
    let per_candidate =
        ((logits.relu()? - (logits * labels)?)? + (logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    let per_hole = (per_candidate * mask)?
        .sum(1)?
        .div(&mask.sum(1)?.clamp(1f32, f32::MAX)?)?;
    per_hole.mean_all()
}
