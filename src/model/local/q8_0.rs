//! The dot products of Q8_0 matrix rows with activation rows rounded to 8 bits
//! ([`Activations`](super::block_matrix::Activations)), for [`BlockMatrix`](super::block_matrix::BlockMatrix):
//! the output projection SmolLM2 ties to its Q8_0 embeddings (30 MB read a generated token)
//! and any other Q8_0 matrix.
//!
//! A Q8_0 block holds 32 weights as `d * w` with `w` in -127..=127, so its part of a dot
//! product with an activation block `a * p` is `d * a * sum(w * p)`. candle's kernel
//! converts `d` through a function call a block and adds into one sum; here the blocks of
//! four rows add into sums of their own. AVX2 multiplies bytes only unsigned by signed, so
//! `w * p` is taken as `|w| * (p with w's sign)`.

use half::f16;

use super::blocks::{BLOCK, Row};
#[cfg(target_arch = "x86_64")]
use super::blocks::{PREFETCH, lane_sum};

/// A Q8_0 block's bytes: its scale `d` as f16, then 32 signed bytes.
pub const BLOCK_BYTES: usize = 2 + BLOCK;

/// A Q8_0 matrix row (`weights`, its blocks' bytes) times an activation row.
pub fn dot_plain(weights: &[u8], input: Row) -> f32 {
    let mut total = 0.0f32;
    for (b, block) in weights.chunks_exact(BLOCK_BYTES).enumerate() {
        let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
        let values = &input.values[b * BLOCK..(b + 1) * BLOCK];
        let products: i32 = block[2..]
            .iter()
            .zip(values)
            .map(|(&w, &p)| i32::from(w as i8) * i32::from(p))
            .sum();
        total += products as f32 * d * input.scales[b][0];
    }
    total
}

/// As [`dot_plain`] for `R` matrix rows at once, which share each activation block's loads
/// and add into sums of their own: a block's 32 products in one multiply-add of bytes.
///
/// # Safety
/// The processor must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dots_avx2<const R: usize>(weights: [&[u8]; R], input: Row) -> [f32; R] {
    use std::arch::x86_64::*;

    let blocks = input.blocks_against(&weights, BLOCK_BYTES);
    let ones = _mm256_set1_epi16(1);
    let mut sums = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        // SAFETY: `b < blocks`, so the activations' block and each row's 34 bytes are in
        // bounds (checked above); the loads are unaligned.
        unsafe {
            let values = _mm256_loadu_si256(input.values.as_ptr().add(b * BLOCK) as *const __m256i);
            let a = _mm_load_ss(input.scales.as_ptr().add(b) as *const f32);
            for r in 0..R {
                let at = weights[r].as_ptr().add(b * BLOCK_BYTES);
                // Past the row's end the hint reads nothing.
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PREFETCH) as *const i8);
                let d = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(std::ptr::read_unaligned(
                    at as *const u16,
                ))));
                let scale = _mm256_broadcastss_ps(_mm_mul_ss(d, a));
                let w = _mm256_loadu_si256(at.add(2) as *const __m256i);
                // |w| is at most 128 and |p| 127: a pair's sum stays within i16.
                let magnitudes = _mm256_sign_epi8(w, w);
                let signed = _mm256_sign_epi8(values, w);
                let products = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, signed), ones);
                sums[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(products), sums[r]);
            }
        }
    }
    // SAFETY: the processor has AVX2 (this function's requirement).
    std::array::from_fn(|r| unsafe { lane_sum(sums[r]) })
}
