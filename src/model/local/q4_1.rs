//! The dot products of Q4_1 matrix rows with activation rows rounded to 8 bits
//! ([`Activations`](super::block_matrix::Activations)), for
//! [`BlockMatrix`](super::block_matrix::BlockMatrix).
//!
//! candle 0.11 has only scalar code for Q4_1 on x86, so keyhole used to multiply Q8_0 copies
//! of such matrices: 34 bytes read per 32 weights where Q4_1 holds them in 20, and a
//! generated token reads every matrix once. A Q4_1 block holds 32 weights as `d * q + m` with
//! `q` in 0..16, so its part of a dot product with an activation block `a * p` (`p` in
//! -127..=127) is `d * a * sum(q * p) + m * a * sum(p)`, and the activation block carries
//! `a * sum(p)` ready. With AVX2 (and FMA and F16C, found at run time) 32 products of a block
//! take one multiply-add of bytes; otherwise plain code does the same sums.

use half::f16;

use super::blocks::{BLOCK, Row};
#[cfg(target_arch = "x86_64")]
use super::blocks::{PREFETCH, lane_sum};

/// A Q4_1 block's bytes: its scale `d` and minimum `m` as f16, then 32 four-bit values, the
/// first 16 in the low halves of 16 bytes and the last 16 in their high halves.
pub const BLOCK_BYTES: usize = 4 + BLOCK / 2;

/// A Q4_1 matrix row (`weights`, its blocks' bytes) times an activation row.
pub fn dot_plain(weights: &[u8], input: Row) -> f32 {
    let mut total = 0.0f32;
    for (b, block) in weights.chunks_exact(BLOCK_BYTES).enumerate() {
        let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
        let m = f16::from_le_bytes([block[2], block[3]]).to_f32();
        let values = &input.values[b * BLOCK..(b + 1) * BLOCK];
        let (low, high) = values.split_at(BLOCK / 2);
        let mut products = 0i32;
        for ((byte, l), h) in block[4..].iter().zip(low).zip(high) {
            products += i32::from(byte & 0x0F) * i32::from(*l);
            products += i32::from(byte >> 4) * i32::from(*h);
        }
        let [scale, sum] = input.scales[b];
        total += products as f32 * d * scale + m * sum;
    }
    total
}

/// As [`dot_plain`] for `R` matrix rows at once, which share each activation block's loads
/// and add into sums of their own (so that no addition waits for the one before): a block's
/// 32 products in one multiply-add of bytes.
///
/// # Safety
/// The processor must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dots_avx2<const R: usize>(weights: [&[u8]; R], input: Row) -> [f32; R] {
    use std::arch::x86_64::*;

    let blocks = input.blocks_against(&weights, BLOCK_BYTES);
    let low_nibbles = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    // Each row's `d * a * sum(q * p)` in eight lanes, and `m * a * sum(p)` in the second lane
    // of four (the first adds up junk).
    let mut sums = [_mm256_setzero_ps(); R];
    let mut minimums = [_mm_setzero_ps(); R];
    for b in 0..blocks {
        // SAFETY: `b < blocks`, so the activations' block and each row's 20 bytes are in
        // bounds (checked above); the loads are unaligned.
        unsafe {
            let values = _mm256_loadu_si256(input.values.as_ptr().add(b * BLOCK) as *const __m256i);
            // [a, a * sum(p), 0, 0]
            let scale_and_sum =
                _mm_castpd_ps(_mm_load_sd(input.scales.as_ptr().add(b) as *const f64));
            for r in 0..R {
                let at = weights[r].as_ptr().add(b * BLOCK_BYTES);
                // Past the row's end the hint reads nothing.
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PREFETCH) as *const i8);
                let halves = _mm_cvtsi32_si128(std::ptr::read_unaligned(at as *const i32));
                // [d * a, m * a * sum(p), 0, 0]
                let scaled = _mm_mul_ps(_mm_cvtph_ps(halves), scale_and_sum);
                minimums[r] = _mm_add_ps(minimums[r], scaled);
                let packed = _mm_loadu_si128(at.add(4) as *const __m128i);
                let nibbles = _mm256_and_si256(
                    _mm256_set_m128i(_mm_srli_epi16::<4>(packed), packed),
                    low_nibbles,
                );
                let products = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles, values), ones);
                sums[r] = _mm256_fmadd_ps(
                    _mm256_broadcastss_ps(scaled),
                    _mm256_cvtepi32_ps(products),
                    sums[r],
                );
            }
        }
    }
    std::array::from_fn(|r| {
        // SAFETY: the processor has AVX2 (this function's requirement).
        unsafe { lane_sum(sums[r]) + _mm_cvtss_f32(_mm_movehdup_ps(minimums[r])) }
    })
}
