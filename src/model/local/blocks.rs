//! What every block kernel of a generated token's products shares (`q4_1`, `q8_0`): the
//! block of 32 weights, one activation row rounded to 8 bits, how far ahead a row's bytes are
//! asked for, and the sum of a vector's lanes.

/// Weights in a block of a Q4_1 or Q8_0 matrix row, and values in a block of an activation row.
pub const BLOCK: usize = 32;
/// How far ahead of the block it multiplies the vector kernels ask for each matrix row's
/// bytes, in bytes: a generated token reads every matrix once from memory, and the hint
/// raised SmolLM2's rate at 1 thread after a 113-token prompt from 79% of llama-server's to
/// 94% (medians of five alternations, load 5-8).
#[cfg(target_arch = "x86_64")]
pub const PREFETCH: usize = 512;

/// One activation row's blocks: their scales and scaled sums, and their values.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub scales: &'a [[f32; 2]],
    pub values: &'a [i8],
}

impl Row<'_> {
    /// How many blocks the row holds, checked against `weights`' rows of blocks stored in
    /// `block_bytes` each: the bounds a kernel's unchecked loads rely on.
    pub fn blocks_against(&self, weights: &[&[u8]], block_bytes: usize) -> usize {
        let blocks = self.scales.len();
        assert!(self.values.len() == blocks * BLOCK);
        assert!(weights.iter().all(|row| row.len() == blocks * block_bytes));
        blocks
    }
}

/// The sum of `lanes`' eight values.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn lane_sum(lanes: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;

    let quarter = _mm_add_ps(
        _mm256_castps256_ps128(lanes),
        _mm256_extractf128_ps::<1>(lanes),
    );
    let half = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
    _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)))
}
