//! Products with matrices stored as Q4_1 or Q8_0, read in place: the kernels a generated
//! token's rows multiply SmolLM2's matrices with (the Q8_0 dot products are in `q8_0`).
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

use super::q8_0;

/// Weights in a block, of a Q4_1 matrix row as of an activation row.
pub const BLOCK: usize = 32;
/// Matrix rows the vector kernel multiplies at once: four rows' sums and the constants fit in
/// the 16 vector registers.
#[cfg(target_arch = "x86_64")]
const ROWS_AT_ONCE: usize = 4;
/// A Q4_1 block's bytes: its scale `d` and minimum `m` as f16, then 32 four-bit values, the
/// first 16 in the low halves of 16 bytes and the last 16 in their high halves.
const BLOCK_BYTES: usize = 4 + BLOCK / 2;
/// How far ahead of the block it multiplies the vector kernels ask for each matrix row's
/// bytes, in bytes: a generated token reads every matrix once from memory, and the hint
/// raised SmolLM2's rate at 1 thread after a 113-token prompt from 79% of llama-server's to
/// 94% (medians of five alternations, load 5-8).
#[cfg(target_arch = "x86_64")]
pub const PREFETCH: usize = 512;

/// How a [`BlockMatrix`]'s blocks hold their 32 weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Q4_1,
    Q8_0,
}

impl Format {
    fn block_bytes(self) -> usize {
        match self {
            Format::Q4_1 => BLOCK_BYTES,
            Format::Q8_0 => q8_0::BLOCK_BYTES,
        }
    }
}

/// A matrix stored as Q4_1 or Q8_0, its rows' blocks as the file holds them.
pub struct BlockMatrix {
    format: Format,
    blocks: Vec<u8>,
    rows: usize,
    columns: usize,
}

/// Rows of activations rounded to 8 bits a block of [`BLOCK`] values at a time: block `b`
/// holds `scales[b][0] * values[32 b + i]`, and `scales[b][1]` is `scales[b][0]` times the
/// sum of its values (side by side, so that one load reads both).
pub struct Activations {
    rows: usize,
    columns: usize,
    scales: Vec<[f32; 2]>,
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

impl BlockMatrix {
    /// The matrix of `rows` x `columns` whose blocks in `format` are `blocks`, row after row.
    pub fn new(
        format: Format,
        blocks: &[u8],
        rows: usize,
        columns: usize,
    ) -> candle_core::Result<BlockMatrix> {
        if !columns.is_multiple_of(BLOCK) {
            candle_core::bail!(
                "a {format:?} row of {columns} values is not whole blocks of {BLOCK}"
            );
        }
        let expected = rows
            .checked_mul(columns / BLOCK * format.block_bytes())
            .filter(|&bytes| bytes == blocks.len());
        if expected.is_none() {
            candle_core::bail!(
                "{} bytes of {format:?} blocks for a {rows} x {columns} matrix",
                blocks.len()
            );
        }
        Ok(BlockMatrix {
            format,
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

    /// As [`BlockMatrix::multiply`], with `kernel`.
    pub fn multiply_with(
        &self,
        kernel: Kernel,
        input: &Activations,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> candle_core::Result<()> {
        if input.columns != self.columns {
            candle_core::bail!(
                "rows of {} values times a {:?} matrix of {} columns",
                input.columns,
                self.format,
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
        let row_bytes = self.columns / BLOCK * self.format.block_bytes();
        let weights = |row: usize| &self.blocks[row * row_bytes..(row + 1) * row_bytes];
        let width = rows.len();
        let first = rows.start;
        // A few matrix rows at a time, against every input row while their bytes are in the
        // cache.
        let mut row = rows.start;
        while row < rows.end {
            let together = match kernel {
                Kernel::Plain => 1,
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx2 => match rows.end - row >= ROWS_AT_ONCE {
                    true => ROWS_AT_ONCE,
                    false => 1,
                },
            };
            for i in 0..input.rows {
                let input = input.row(i);
                let products = &mut out[i * width + row - first..][..together];
                match (kernel, self.format) {
                    (Kernel::Plain, Format::Q4_1) => products[0] = dot_plain(weights(row), input),
                    (Kernel::Plain, Format::Q8_0) => {
                        products[0] = q8_0::dot_plain(weights(row), input)
                    }
                    // SAFETY (all four): `Kernel::Avx2` is only chosen, or tested, where the
                    // processor has AVX2, FMA and F16C.
                    #[cfg(target_arch = "x86_64")]
                    (Kernel::Avx2, format) if together == ROWS_AT_ONCE => {
                        let rows = std::array::from_fn(|r| weights(row + r));
                        products.copy_from_slice(&match format {
                            Format::Q4_1 => unsafe { dots_avx2::<ROWS_AT_ONCE>(rows, input) },
                            Format::Q8_0 => unsafe { q8_0::dots_avx2::<ROWS_AT_ONCE>(rows, input) },
                        });
                    }
                    #[cfg(target_arch = "x86_64")]
                    (Kernel::Avx2, format) => {
                        let rows = [weights(row)];
                        products[0] = match format {
                            Format::Q4_1 => unsafe { dots_avx2::<1>(rows, input)[0] },
                            Format::Q8_0 => unsafe { q8_0::dots_avx2::<1>(rows, input)[0] },
                        }
                    }
                }
            }
            row += together;
        }
        Ok(())
    }
}

impl Activations {
    /// `values`, rows of `columns` values each (a multiple of [`BLOCK`]), rounded: each block
    /// scaled so that its largest magnitude is 127 (the scale then rounded to f16).
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
            // Held to f16's precision, as ggml's Q8_0 and Q8_1 blocks hold it: with the f32
            // scale, the tiny random models' Q8_0 logits were 0.011 off candle-transformers'
            // (which multiplies ggml's blocks) and their greedy tokens parted; as f16 they
            // agree within 1e-3 and pick the same tokens.
            let scale = f16::from_f32(scale).to_f32();
            rounded.scales.push([scale, sum as f32 * scale]);
        }
        Ok(rounded)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row `i`'s blocks.
    fn row(&self, i: usize) -> Row<'_> {
        let blocks = self.columns / BLOCK;
        Row {
            scales: &self.scales[i * blocks..(i + 1) * blocks],
            values: &self.values[i * self.columns..(i + 1) * self.columns],
        }
    }
}

/// One activation row's blocks: their scales and scaled sums, and their values.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub scales: &'a [[f32; 2]],
    pub values: &'a [i8],
}

/// A Q4_1 matrix row (`weights`, its blocks' bytes) times an activation row.
fn dot_plain(weights: &[u8], input: Row) -> f32 {
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
unsafe fn dots_avx2<const R: usize>(weights: [&[u8]; R], input: Row) -> [f32; R] {
    use std::arch::x86_64::*;

    let blocks = input.scales.len();
    assert!(input.values.len() == blocks * BLOCK);
    assert!(weights.iter().all(|row| row.len() == blocks * BLOCK_BYTES));
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
        let shapes = [(7, 96, 1), (13, 64, 3), (1, 32, 2), (33, 256, 1)];
        for ((rows, columns, inputs), (format, dtype)) in shapes.into_iter().flat_map(|shape| {
            [
                (Format::Q4_1, GgmlDType::Q4_1),
                (Format::Q8_0, GgmlDType::Q8_0),
            ]
            .map(|format| (shape, format))
        }) {
            let weights = random(&mut rng, rows * columns, 0.3);
            let stored = QTensor::quantize(
                &Tensor::from_vec(weights, (rows, columns), &Device::Cpu).unwrap(),
                dtype,
            )
            .unwrap();
            let dequantized: Vec<f32> = stored
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let matrix = BlockMatrix::new(format, &stored.data().unwrap(), rows, columns).unwrap();
            let input = random(&mut rng, inputs * columns, 0.0);
            let activations = Activations::quantize(&input, columns).unwrap();
            // The activations as the kernel multiplies them, in f32.
            let rounded: Vec<f32> = activations
                .values
                .iter()
                .enumerate()
                .map(|(i, &q)| f32::from(q) * activations.scales[i / BLOCK][0])
                .collect();
            // Half a step of at most 1 / 127, and the f16 scale's error (2^-11 relative) on up
            // to 127 steps.
            for (value, rounded) in input.iter().zip(&rounded) {
                assert!((value - rounded).abs() <= 1.0 / 254.0 + 1.0 / 2048.0);
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
                                "{format:?} on {kernel:?}, {rows}x{columns}, input {i}, row {row}: \
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
        assert!(BlockMatrix::new(Format::Q4_1, &bytes, 3, 64).is_err());
        assert!(BlockMatrix::new(Format::Q4_1, &bytes, 2, 48).is_err());
        // Q4_1's bytes are too few for Q8_0 blocks.
        assert!(BlockMatrix::new(Format::Q8_0, &bytes, 2, 64).is_err());
        let matrix = BlockMatrix::new(Format::Q4_1, &bytes, 2, 64).unwrap();
        let narrow = Activations::quantize(&[0.0; 32], 32).unwrap();
        assert!(matrix.multiply(&narrow, 0..2, &mut [0.0; 2]).is_err());
        let input = Activations::quantize(&[1.0; 64], 64).unwrap();
        assert!(matrix.multiply(&input, 0..3, &mut [0.0; 3]).is_err());
        assert!(matrix.multiply(&input, 0..2, &mut [0.0; 1]).is_err());
        assert!(Activations::quantize(&[0.0; 48], 48).is_err());
    }
}
