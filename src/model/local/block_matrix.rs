//! Products with matrices stored as Q4_1 or Q8_0, read in place: the matrices a generated
//! token's rows multiply SmolLM2's weights with. The activation rows are rounded once per
//! product to 8 bits in blocks of 32 ([`Activations`], as llama.cpp's Q8_1), and each block
//! of a matrix row multiplies its block of the activations in integers, by the dot products
//! of its format (`q4_1`, `q8_0`), split over the CPU pool by rows.

use std::ops::Range;

use half::f16;

use super::blocks::{BLOCK, Row};
use super::{q4_1, q8_0};

/// Matrix rows the vector kernel multiplies at once: four rows' sums and the constants fit in
/// the 16 vector registers.
#[cfg(target_arch = "x86_64")]
const ROWS_AT_ONCE: usize = 4;

/// How a [`BlockMatrix`]'s blocks hold their 32 weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Q4_1,
    Q8_0,
}

impl Format {
    fn block_bytes(self) -> usize {
        match self {
            Format::Q4_1 => q4_1::BLOCK_BYTES,
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
                    (Kernel::Plain, Format::Q4_1) => {
                        products[0] = q4_1::dot_plain(weights(row), input)
                    }
                    (Kernel::Plain, Format::Q8_0) => {
                        products[0] = q8_0::dot_plain(weights(row), input)
                    }
                    // SAFETY (all four): `Kernel::Avx2` is only chosen, or tested, where the
                    // processor has AVX2, FMA and F16C.
                    #[cfg(target_arch = "x86_64")]
                    (Kernel::Avx2, format) if together == ROWS_AT_ONCE => {
                        let rows = std::array::from_fn(|r| weights(row + r));
                        products.copy_from_slice(&match format {
                            Format::Q4_1 => unsafe { q4_1::dots_avx2::<ROWS_AT_ONCE>(rows, input) },
                            Format::Q8_0 => unsafe { q8_0::dots_avx2::<ROWS_AT_ONCE>(rows, input) },
                        });
                    }
                    #[cfg(target_arch = "x86_64")]
                    (Kernel::Avx2, format) => {
                        let rows = [weights(row)];
                        products[0] = match format {
                            Format::Q4_1 => unsafe { q4_1::dots_avx2::<1>(rows, input)[0] },
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
