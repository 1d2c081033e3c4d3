//! Products with matrices stored as Q4_1, read in place: the kernel a generated token's rows
//! multiply SmolLM2's matrices with.
//!
//! candle 0.11 has only scalar code for Q4_1 on x86, so keyhole used to multiply Q8_0 copies
//! of such matrices: 34 bytes read per 32 weights where Q4_1 holds them in 20, and a
//! generated token reads every matrix once. Here the activation rows are rounded once per
//! product to 8 bits in blocks of 32 ([`Activations`], as llama.cpp's Q8_1), and each block
//! of a matrix row multiplies its block of the activations in integers: a Q4_1 block holds
//! 32 weights as `d * q + m` with `q` in 0..16, so its part of a dot product with an
//! activation block `a * p` (`p` in -127..=127) is `d * a * sum(q * p) + m * a * sum(p)`,
//! and the activation block carries `a * sum(p)` ready. With AVX2 (and FMA and F16C, found
//! at run time) 32 products of a block take one multiply-add of bytes; otherwise plain code
//! does the same sums.

use std::ops::Range;

use half::f16;

/// Weights in a block, of a Q4_1 matrix row as of an activation row.
pub const BLOCK: usize = 32;
/// A Q4_1 block's bytes: its scale `d` and minimum `m` as f16, then 32 four-bit values, the
/// first 16 in the low halves of 16 bytes and the last 16 in their high halves.
const BLOCK_BYTES: usize = 4 + BLOCK / 2;

/// A matrix stored as Q4_1, its rows' blocks as the file holds them.
pub struct Q4_1Matrix {
    blocks: Vec<u8>,
    rows: usize,
    columns: usize,
}

/// Rows of activations rounded to 8 bits a block of [`BLOCK`] values at a time: block `b`
/// holds `scales[b] * values[32 b + i]`, and `sums[b]` is `scales[b]` times the sum of its
/// values.
pub struct Activations {
    rows: usize,
    columns: usize,
    scales: Vec<f32>,
    sums: Vec<f32>,
    values: Vec<i8>,
}

/// Which code computes the dot products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, on any processor.
    Plain,
    /// 256-bit vectors (AVX2, FMA and F16C).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest this processor runs.
    pub fn detected() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Kernel::Avx2;
        }
        Kernel::Plain
    }
}

impl Q4_1Matrix {
    /// The matrix of `rows` x `columns` whose Q4_1 blocks are `blocks`, row after row.
    pub fn new(blocks: &[u8], rows: usize, columns: usize) -> candle_core::Result<Q4_1Matrix> {
        if !columns.is_multiple_of(BLOCK) {
            candle_core::bail!("a Q4_1 row of {columns} values is not whole blocks of {BLOCK}");
        }
        let expected = rows
            .checked_mul(columns / BLOCK * BLOCK_BYTES)
            .filter(|&bytes| bytes == blocks.len());
        if expected.is_none() {
            candle_core::bail!(
                "{} bytes of Q4_1 blocks for a {rows} x {columns} matrix",
                blocks.len()
            );
        }
        Ok(Q4_1Matrix {
            blocks: blocks.to_vec(),
            rows,
            columns,
        })
    }

    /// The products of `input`'s rows with the matrix's rows `rows`, with the detected
    /// [`Kernel`]: `out[i * rows.len() + r]` is input row `i` times matrix row
    /// `rows.start + r`.
    pub fn multiply(
        &self,
        input: &Activations,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> candle_core::Result<()> {
        self.multiply_with(Kernel::detected(), input, rows, out)
    }

    /// As [`Q4_1Matrix::multiply`], with `kernel`.
    pub fn multiply_with(
        &self,
        kernel: Kernel,
        input: &Activations,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> candle_core::Result<()> {
        if input.columns != self.columns {
            candle_core::bail!(
                "rows of {} values times a Q4_1 matrix of {} columns",
                input.columns,
                self.columns
            );
        }
        if rows.end > self.rows || out.len() != input.rows * rows.len() {
            candle_core::bail!(
                "rows {rows:?} of {} into {} products for {} input rows",
                self.rows,
                out.len(),
                input.rows
            );
        }
        let row_bytes = self.columns / BLOCK * BLOCK_BYTES;
        let blocks = self.columns / BLOCK;
        let width = rows.len();
        for (r, row) in rows.enumerate() {
            let weights = &self.blocks[row * row_bytes..(row + 1) * row_bytes];
            // Every input row against this matrix row while its bytes are in the cache.
            for i in 0..input.rows {
                let at = i * blocks..(i + 1) * blocks;
                let block = Block {
                    scales: &input.scales[at.clone()],
                    sums: &input.sums[at],
                    values: &input.values[i * self.columns..(i + 1) * self.columns],
                };
                out[i * width + r] = match kernel {
                    Kernel::Plain => dot_plain(weights, block),
                    // SAFETY: `Kernel::Avx2` is only chosen, or tested, where the processor
                    // has AVX2, FMA and F16C.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx2 => unsafe { dot_avx2(weights, block) },
                };
            }
        }
        Ok(())
    }
}

impl Activations {
    /// `values`, rows of `columns` values each (a multiple of [`BLOCK`]), rounded: each block
    /// scaled so that its largest magnitude is 127.
    pub fn quantize(values: &[f32], columns: usize) -> candle_core::Result<Activations> {
        if columns == 0 || !columns.is_multiple_of(BLOCK) || !values.len().is_multiple_of(columns) {
            candle_core::bail!(
                "{} values are not rows of {columns} in whole blocks of {BLOCK}",
                values.len()
            );
        }
        let blocks = values.len() / BLOCK;
        let mut rounded = Activations {
            rows: values.len() / columns,
            columns,
            scales: Vec::with_capacity(blocks),
            sums: Vec::with_capacity(blocks),
            values: Vec::with_capacity(values.len()),
        };
        for block in values.chunks_exact(BLOCK) {
            let largest = block.iter().fold(0.0f32, |most, v| most.max(v.abs()));
            let scale = largest / 127.0;
            let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
            let mut sum = 0i32;
            for value in block {
                let q = (value * inverse).round() as i8;
                sum += i32::from(q);
                rounded.values.push(q);
            }
            rounded.scales.push(scale);
            rounded.sums.push(sum as f32 * scale);
        }
        Ok(rounded)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// One activation row's blocks: their scales, scaled sums and values.
#[derive(Clone, Copy)]
struct Block<'a> {
    scales: &'a [f32],
    sums: &'a [f32],
    values: &'a [i8],
}

/// A Q4_1 matrix row (`weights`, its blocks' bytes) times an activation row.
fn dot_plain(weights: &[u8], input: Block) -> f32 {
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
        total += products as f32 * d * input.scales[b] + m * input.sums[b];
    }
    total
}

/// As [`dot_plain`], a block's 32 products in one multiply-add of bytes, two blocks at a time
/// into separate sums so that each addition need not wait for the one before.
///
/// # Safety
/// The processor must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_avx2(weights: &[u8], input: Block) -> f32 {
    use std::arch::x86_64::*;

    let blocks = weights.len() / BLOCK_BYTES;
    assert!(
        input.values.len() == blocks * BLOCK
            && input.scales.len() == blocks
            && input.sums.len() == blocks
    );
    let low_nibbles = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    // One block's `d * a * sum(q * p)` in eight lanes and its `m * a * sum(p)`.
    let block = |b: usize| {
        // SAFETY: `b < blocks`, so the block's 20 bytes and 32 values are in bounds (checked
        // above); the loads are unaligned.
        unsafe {
            let at = weights.as_ptr().add(b * BLOCK_BYTES);
            let halves = _mm_cvtsi32_si128(std::ptr::read_unaligned(at as *const i32));
            // [d, m, 0, 0]
            let scale_and_minimum = _mm_cvtph_ps(halves);
            let packed = _mm_loadu_si128(at.add(4) as *const __m128i);
            let nibbles = _mm256_and_si256(
                _mm256_set_m128i(_mm_srli_epi16::<4>(packed), packed),
                low_nibbles,
            );
            let values = _mm256_loadu_si256(input.values.as_ptr().add(b * BLOCK) as *const __m256i);
            let products = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles, values), ones);
            let scale = _mm256_set1_ps(_mm_cvtss_f32(scale_and_minimum) * input.scales[b]);
            let minimum = _mm_cvtss_f32(_mm_movehdup_ps(scale_and_minimum)) * input.sums[b];
            (scale, _mm256_cvtepi32_ps(products), minimum)
        }
    };
    let (mut even, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut minimums = [0.0f32; 2];
    for b in (0..blocks.saturating_sub(1)).step_by(2) {
        let (scale, products, minimum) = block(b);
        even = _mm256_fmadd_ps(scale, products, even);
        minimums[0] += minimum;
        let (scale, products, minimum) = block(b + 1);
        odd = _mm256_fmadd_ps(scale, products, odd);
        minimums[1] += minimum;
    }
    if blocks % 2 == 1 {
        let (scale, products, minimum) = block(blocks - 1);
        even = _mm256_fmadd_ps(scale, products, even);
        minimums[0] += minimum;
    }
    let sum = _mm256_add_ps(even, odd);
    let quarter = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
    let half = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
    let one = _mm_add_ss(half, _mm_movehdup_ps(half));
    _mm_cvtss_f32(one) + minimums[0] + minimums[1]
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// Random values, `count` of them, around `around`.
    fn random(rng: &mut ChaCha8Rng, count: usize, around: f32) -> Vec<f32> {
        (0..count)
            .map(|_| around + rng.random::<f32>() * 2.0 - 1.0)
            .collect()
    }

    /// Every kernel this processor runs, the plain one first.
    fn kernels() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Plain];
        if Kernel::detected() != Kernel::Plain {
            kernels.push(Kernel::detected());
        }
        kernels
    }

    #[test]
    fn products_are_the_dequantized_matrix_times_the_rounded_activations_on_every_kernel() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Odd row counts, an odd number of blocks a row (3), and several input rows.
        for (rows, columns, inputs) in [(7, 96, 1), (13, 64, 3), (1, 32, 2), (33, 256, 1)] {
            let weights = random(&mut rng, rows * columns, 0.3);
            let stored = QTensor::quantize(
                &Tensor::from_vec(weights, (rows, columns), &Device::Cpu).unwrap(),
                GgmlDType::Q4_1,
            )
            .unwrap();
            let dequantized: Vec<f32> = stored
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let matrix = Q4_1Matrix::new(&stored.data().unwrap(), rows, columns).unwrap();
            let input = random(&mut rng, inputs * columns, 0.0);
            let activations = Activations::quantize(&input, columns).unwrap();
            // The activations as the kernel multiplies them, in f32.
            let rounded: Vec<f32> = activations
                .values
                .iter()
                .enumerate()
                .map(|(i, &q)| f32::from(q) * activations.scales[i / BLOCK])
                .collect();
            for (value, rounded) in input.iter().zip(&rounded) {
                assert!((value - rounded).abs() <= 1.0 / 254.0 + 1e-6);
            }
            let exact = |i: usize, row: usize| -> f32 {
                let weights = &dequantized[row * columns..(row + 1) * columns];
                let input = &rounded[i * columns..(i + 1) * columns];
                weights.iter().zip(input).map(|(w, a)| w * a).sum()
            };
            for kernel in kernels() {
                // All rows, then a piece of them from row 1 on.
                for range in [0..rows, 1.min(rows - 1)..rows] {
                    let mut out = vec![f32::NAN; inputs * range.len()];
                    matrix
                        .multiply_with(kernel, &activations, range.clone(), &mut out)
                        .unwrap();
                    for i in 0..inputs {
                        for (r, row) in range.clone().enumerate() {
                            let (got, expected) = (out[i * range.len() + r], exact(i, row));
                            let off = (got - expected).abs();
                            assert!(
                                off <= 1e-4 * (1.0 + expected.abs()),
                                "{kernel:?}, {rows}x{columns}, input {i}, row {row}: \
                                 {got} against {expected}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn mismatched_shapes_are_errors_not_panics() {
        let stored = QTensor::quantize(
            &Tensor::zeros((2, 64), candle_core::DType::F32, &Device::Cpu).unwrap(),
            GgmlDType::Q4_1,
        )
        .unwrap();
        let bytes = stored.data().unwrap();
        assert!(Q4_1Matrix::new(&bytes, 3, 64).is_err());
        assert!(Q4_1Matrix::new(&bytes, 2, 48).is_err());
        let matrix = Q4_1Matrix::new(&bytes, 2, 64).unwrap();
        let narrow = Activations::quantize(&[0.0; 32], 32).unwrap();
        assert!(matrix.multiply(&narrow, 0..2, &mut [0.0; 2]).is_err());
        let input = Activations::quantize(&[1.0; 64], 64).unwrap();
        assert!(matrix.multiply(&input, 0..3, &mut [0.0; 3]).is_err());
        assert!(matrix.multiply(&input, 0..2, &mut [0.0; 1]).is_err());
        assert!(Activations::quantize(&[0.0; 48], 48).is_err());
    }
}
