//! Reading a GGUF file: its header checked against its length, and each weight matrix in the
//! representations the forward pass multiplies it in.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::ops::Range;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{D, Device, Module, Tensor};
use rayon::prelude::*;

use super::block_matrix::{Activations, BlockMatrix, Format};
use super::error::GgufError;
use super::header::{self, guarded};
use crate::model::config::Matrices;

/// The first bytes of every GGUF file.
const MAGIC: &[u8; 4] = b"GGUF";

/// The architectures keyhole runs, as `general.architecture` names them.
const SUPPORTED: &str = "llama, qwen2, qwen3";

/// Quantizations that candle 0.11 multiplies with scalar code only on x86 (it has no SIMD
/// dot product for them; SmolLM2's Q4_1 file ran about 4 times slower than as Q8_0) and
/// keyhole has no kernel of its own for. Their quantized copies are Q8_0, which keeps every
/// value to within 8-bit rounding of the original at 1.7 times the memory. Q4_1 and Q8_0 are
/// multiplied as stored, by keyhole's kernels (`block_matrix` with `q4_1` and `q8_0`).
const SLOW: [GgmlDType; 2] = [GgmlDType::Q5_0, GgmlDType::Q5_1];

/// Models whose matrices take at most this much memory as f32 keep them twice, as f32 and
/// quantized (1.25 to 1.5 times the f32 size): candle multiplies f32 with an optimized GEMM,
/// which on SmolLM2-135M fed a 1,000-token prompt 2.5 times faster than its quantized
/// kernels, while one token at a time reads every matrix, a quarter as many bytes when
/// quantized. Larger models keep their quantization alone.
const F32_LIMIT: u64 = 1 << 30;

/// Where a model's tensors are read from.
trait Source: Read + Seek {}
impl<T: Read + Seek> Source for T {}

/// A GGUF file's header, checked against the file's length, and the open file.
pub struct GgufFile {
    pub content: Content,
    reader: Box<dyn Source>,
}

/// What a product is for, which decides the representation where a matrix holds both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// A prompt's tokens, as f32: the GEMM reuses each weight across the rows. Every prompt
    /// token goes this way, however few are left after the cache, so that a prompt's keys
    /// and values do not depend on what the cache held.
    Prompt,
    /// One generated token, quantized: memory-bound, and a quarter of the bytes to read.
    Token,
}

/// Which representations a model's matrices are held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    /// As f32, multiplied by candle's GEMM: fastest on many rows (a prompt).
    pub dense: bool,
    /// Quantized (Q8_0 in place of the [slow](SLOW) types): fastest on one row (a new token).
    pub quantized: bool,
}

impl Kept {
    pub const DENSE: Kept = Kept {
        dense: true,
        quantized: false,
    };
    pub const QUANTIZED: Kept = Kept {
        dense: false,
        quantized: true,
    };
    pub const BOTH: Kept = Kept {
        dense: true,
        quantized: true,
    };

    /// For the output projection, which multiplies only the last position's row: the
    /// quantized copy alone where there is one.
    pub fn for_output(self) -> Kept {
        if self.quantized {
            Kept::QUANTIZED
        } else {
            Kept::DENSE
        }
    }
}

impl GgufFile {
    /// Opens `path` and reads its header; the tensors are read by [`GgufFile::matrix`] and
    /// [`GgufFile::vector`].
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => GgufError::NotFound,
            _ => GgufError::Open(e),
        })?;
        let metadata = file.metadata().map_err(GgufError::Read)?;
        if metadata.is_dir() {
            return Err(GgufError::Directory);
        }
        let length = metadata.len();
        let mut reader = BufReader::new(file);
        let mut magic = [0u8; 4];
        if reader.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return Err(GgufError::NotGguf);
        }
        reader.rewind().map_err(GgufError::Read)?;
        // candle divides by `general.alignment` at the end of reading (and by nothing else):
        // a panic there is a zero alignment.
        let content = guarded("reading the GGUF header", || {
            Content::read(&mut reader).map_err(|e| GgufError::DamagedHeader {
                detail: one_line(&e),
            })
        })
        .map_err(|e| match e {
            GgufError::Panicked(panic) if panic.message.contains("divide by zero") => {
                GgufError::ZeroAlignment
            }
            e => e,
        })?;
        header::check_alignment(content.metadata.get("general.alignment"))?;
        // A truncated download keeps a whole header: check that every tensor is there.
        header::check_tensors(&content, length)?;
        Ok(GgufFile {
            content,
            reader: Box::new(reader),
        })
    }

    /// The representations the matrices are held in, as `matrices` says: by default both
    /// for a model within [`F32_LIMIT`] as f32, else quantized alone.
    pub fn kept(&self, matrices: Matrices) -> Kept {
        match matrices {
            Matrices::Auto if self.tensor_bytes(|_| Some(GgmlDType::F32)) <= F32_LIMIT => {
                Kept::BOTH
            }
            Matrices::Auto | Matrices::Quantized => Kept::QUANTIZED,
            Matrices::F32 => Kept::DENSE,
        }
    }

    /// The memory the tensors take once loaded with their matrices as `matrices` says.
    pub fn loaded_bytes(&self, matrices: Matrices) -> u64 {
        let kept = self.kept(matrices);
        let tied = !self.has("output.weight");
        let held = |(name, info): (&String, &gguf_file::TensorInfo)| {
            let as_f32 = bytes_as(info, GgmlDType::F32);
            let quantized = bytes_as(info, quantized_type(info));
            match name.as_str() {
                _ if !is_matrix(info) => bytes_as(info, info.ggml_dtype),
                _ if is_float(info.ggml_dtype) => as_f32,
                // Looked up as f32; a tied output projection multiplies a quantized copy.
                "token_embd.weight" if tied && kept.quantized => as_f32 + quantized,
                "token_embd.weight" => as_f32,
                "output.weight" if kept.quantized => quantized,
                "output.weight" => as_f32,
                _ => kept.dense as u64 * as_f32 + kept.quantized as u64 * quantized,
            }
        };
        self.content
            .tensor_infos
            .iter()
            .map(held)
            .fold(0u64, u64::saturating_add)
    }

    /// The tensors' total size, each as `dtype` says (as stored where it says `None`);
    /// sizes were checked by [`GgufFile::open`].
    fn tensor_bytes(&self, dtype: impl Fn(&gguf_file::TensorInfo) -> Option<GgmlDType>) -> u64 {
        self.content
            .tensor_infos
            .values()
            .map(|info| bytes_as(info, dtype(info).unwrap_or(info.ggml_dtype)))
            .fold(0u64, u64::saturating_add)
    }

    /// A metadata string.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.content
            .metadata
            .get(key)
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
    }

    /// The architecture, checked to be one keyhole runs.
    pub fn architecture(&self) -> Result<String, GgufError> {
        let arch = self
            .string("general.architecture")
            .ok_or(GgufError::NoArchitecture)?;
        match arch {
            "llama" | "qwen2" | "qwen3" => Ok(arch.to_string()),
            other => Err(GgufError::Architecture {
                found: other.to_string(),
                supported: SUPPORTED,
            }),
        }
    }

    /// Whether the file has a tensor called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The tensor `name` as stored, checked to have the dimensions `dims` (GGUF order
    /// reversed: rows first).
    pub fn tensor(&mut self, name: &str, dims: &[usize]) -> Result<QTensor, GgufError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_string()))?;
        if info.shape.dims() != dims {
            return Err(GgufError::Dimensions {
                name: name.to_string(),
                dims: info.shape.dims().to_vec(),
                wanted: format!("{dims:?}"),
            });
        }
        info.read(
            &mut self.reader,
            self.content.tensor_data_offset,
            &Device::Cpu,
        )
        .map_err(|e| read_failed(name, &e))
    }

    /// The first dimension of tensor `name` (a matrix's rows).
    pub fn rows(&self, name: &str) -> Result<usize, GgufError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_string()))?;
        match info.shape.dims() {
            &[rows, _] => Ok(rows),
            dims => Err(GgufError::Dimensions {
                name: name.to_string(),
                dims: dims.to_vec(),
                wanted: "a matrix's".into(),
            }),
        }
    }

    /// The vector `name` (a norm's weights or a bias) of `length` values, as f32.
    pub fn vector(&mut self, name: &str, length: usize) -> Result<Tensor, GgufError> {
        self.tensor(name, &[length])?
            .dequantize(&Device::Cpu)
            .map_err(|e| read_failed(name, &e))
    }

    /// The matrix `name` of `rows` x `columns`, held as `kept` says.
    pub fn matrix(
        &mut self,
        name: &str,
        (rows, columns): (usize, usize),
        kept: Kept,
    ) -> Result<Matrix, GgufError> {
        let stored = self.tensor(name, &[rows, columns])?;
        Matrix::new(stored, kept).map_err(|e| load_failed(name, &e))
    }
}

/// candle could not read tensor `name`'s values.
fn read_failed(name: &str, error: &candle_core::Error) -> GgufError {
    GgufError::ReadTensor {
        name: name.to_string(),
        detail: one_line(error),
    }
}

/// candle could not hold tensor `name` as the forward pass multiplies it.
pub fn load_failed(name: &str, error: &candle_core::Error) -> GgufError {
    GgufError::LoadTensor {
        name: name.to_string(),
        detail: one_line(error),
    }
}

/// A weight matrix, multiplied as f32 or quantized, whichever of those it holds is faster for
/// the rows at hand.
pub struct Matrix {
    /// `(rows, columns)` f32 values.
    dense: Option<Tensor>,
    quantized: Option<Quantized>,
}

/// A matrix's quantized rows, in consecutive pieces that multiply in parallel (see
/// [`token_pieces`]).
enum Quantized {
    /// Multiplied by candle's kernels, each piece a matrix of its own.
    Candle(Vec<QMatMul>),
    /// Q4_1 or Q8_0 as stored, multiplied by keyhole's kernels a range of rows at a time.
    Blocks(BlockMatrix, Vec<Range<usize>>),
}

/// One piece of a product: rows of a quantized matrix.
#[derive(Clone)]
enum Piece<'a> {
    Candle(&'a QMatMul),
    Blocks(&'a BlockMatrix, Range<usize>),
}

/// Pieces a quantized matrix's rows are held in, so that a generated token's products run on
/// the CPU pool's threads, one piece a thread (two a thread cost more in hand-overs than
/// they won in balance: 38.0 ms a step against 31.1, BENCHMARKS.md). The pool steals
/// work rather than waiting at a barrier: a piece no other thread has taken is done by the
/// thread that asked, so a token never waits for a thread another process holds off its core
/// (candle's own pool made two threads generate 3.4 tokens/s where one generated 46).
fn token_pieces() -> usize {
    rayon::current_num_threads()
}

/// `rows` rows in `pieces` consecutive ranges as even as can be (fewer for fewer rows).
fn row_ranges(rows: usize, pieces: usize) -> Vec<Range<usize>> {
    let pieces = pieces.clamp(1, rows.max(1));
    (0..pieces)
        .map(|piece| piece * rows / pieces..(piece + 1) * rows / pieces)
        .collect()
}

/// `stored`'s rows in `pieces` consecutive pieces (fewer for a matrix of fewer rows), each
/// the stored bytes of its rows: the same values, in the same type.
fn row_pieces(stored: QTensor, pieces: usize) -> candle_core::Result<Vec<QMatMul>> {
    let (rows, columns) = stored.shape().dims2()?;
    let ranges = row_ranges(rows, pieces);
    if ranges.len() == 1 {
        return Ok(vec![QMatMul::from_qtensor(stored)?]);
    }
    let bytes = stored.data()?;
    let row_bytes = bytes.len() / rows;
    ranges
        .into_iter()
        .map(|Range { start, end }| {
            let part = candle_core::quantized::ggml_file::qtensor_from_ggml(
                stored.dtype(),
                &bytes[start * row_bytes..end * row_bytes],
                vec![end - start, columns],
                &Device::Cpu,
            )?;
            QMatMul::from_qtensor(part)
        })
        .collect()
}

impl Matrix {
    /// `stored` held as `kept` says; a matrix stored as floats is only ever held as f32.
    pub fn new(stored: QTensor, kept: Kept) -> candle_core::Result<Matrix> {
        let dtype = stored.dtype();
        if is_float(dtype) {
            return Ok(Matrix::from_f32(stored.dequantize(&Device::Cpu)?));
        }
        let dense = match kept.dense {
            true => Some(stored.dequantize(&Device::Cpu)?),
            false => None,
        };
        let quantized = match kept.quantized {
            false => None,
            true => {
                let fast = quantized_dtype(dtype, stored.shape().dims());
                let stored = if fast == dtype {
                    stored
                } else {
                    let values = match &dense {
                        Some(values) => values.clone(),
                        None => stored.dequantize(&Device::Cpu)?,
                    };
                    QTensor::quantize(&values, fast)?
                };
                let format = match fast {
                    GgmlDType::Q4_1 => Some(Format::Q4_1),
                    GgmlDType::Q8_0 => Some(Format::Q8_0),
                    _ => None,
                };
                Some(match format {
                    Some(format) => {
                        let (rows, columns) = stored.shape().dims2()?;
                        let matrix = BlockMatrix::new(format, &stored.data()?, rows, columns)?;
                        Quantized::Blocks(matrix, row_ranges(rows, token_pieces()))
                    }
                    None => Quantized::Candle(row_pieces(stored, token_pieces())?),
                })
            }
        };
        Ok(Matrix { dense, quantized })
    }

    /// The matrix of `values`, held as f32 alone.
    pub fn from_f32(values: Tensor) -> Matrix {
        Matrix {
            dense: Some(values),
            quantized: None,
        }
    }

    /// `input` (`(rows, columns)`) times the transposed matrix: `(rows, matrix rows)`, in the
    /// representation for `pass` where the matrix holds both.
    pub fn forward(&self, input: &Tensor, pass: Pass) -> candle_core::Result<Tensor> {
        let [product] = Matrix::forward_each([self], input, pass)?;
        Ok(product)
    }

    /// `input` times each of `matrices` (as [`Matrix::forward`]), their quantized pieces all
    /// in one job on the CPU pool: a generated token's query, key and value (or gate and up)
    /// products wait for the pool's threads once instead of once each, and `input` is
    /// rounded to 8 bits for keyhole's kernels once for all of them.
    pub fn forward_each<const N: usize>(
        matrices: [&Matrix; N],
        input: &Tensor,
        pass: Pass,
    ) -> candle_core::Result<[Tensor; N]> {
        let pieces: Vec<(usize, Piece)> = matrices
            .iter()
            .enumerate()
            .filter_map(|(index, matrix)| matrix.quantized_for(pass).map(|q| (index, q)))
            .flat_map(|(index, quantized)| quantized.pieces().map(move |piece| (index, piece)))
            .collect();
        let rounded = match pieces.iter().any(|(_, p)| matches!(p, Piece::Blocks(..))) {
            true => {
                let (_, columns) = input.dims2()?;
                let values = input.flatten_all()?.to_vec1::<f32>()?;
                Some(Activations::quantize(&values, columns)?)
            }
            false => None,
        };
        let forward = |(index, piece): &(usize, Piece)| {
            Ok::<_, candle_core::Error>((*index, piece.forward(input, rounded.as_ref())?))
        };
        let parts: Vec<(usize, Tensor)> = match pieces.len() {
            0 => Vec::new(),
            1 => vec![forward(&pieces[0])?],
            _ => pieces
                .par_iter()
                .map(forward)
                .collect::<candle_core::Result<_>>()?,
        };
        let mut products = Vec::with_capacity(N);
        for (index, matrix) in matrices.iter().enumerate() {
            let product = match matrix.quantized_for(pass) {
                None => {
                    let dense = matrix
                        .dense
                        .as_ref()
                        .expect("a matrix without pieces is dense");
                    input.matmul(&dense.t()?)?
                }
                Some(_) => {
                    let own: Vec<Tensor> = parts
                        .iter()
                        .filter(|(of, _)| *of == index)
                        .map(|(_, part)| part.clone())
                        .collect();
                    match own.len() {
                        1 => own.into_iter().next().expect("one piece"),
                        _ => Tensor::cat(&own, D::Minus1)?,
                    }
                }
            };
            products.push(product);
        }
        Ok(products
            .try_into()
            .unwrap_or_else(|_| unreachable!("a product per matrix")))
    }

    /// The quantized rows a product for `pass` multiplies, or `None` where it multiplies
    /// the f32 matrix.
    fn quantized_for(&self, pass: Pass) -> Option<&Quantized> {
        match (&self.dense, &self.quantized) {
            (Some(_), Some(_)) if pass == Pass::Prompt => None,
            (_, Some(quantized)) => Some(quantized),
            (Some(_), None) => None,
            (None, None) => unreachable!("a matrix holds at least one representation"),
        }
    }
}

impl Quantized {
    fn pieces(&self) -> Box<dyn Iterator<Item = Piece<'_>> + '_> {
        match self {
            Quantized::Candle(pieces) => Box::new(pieces.iter().map(Piece::Candle)),
            Quantized::Blocks(matrix, ranges) => Box::new(
                ranges
                    .iter()
                    .map(|rows| Piece::Blocks(matrix, rows.clone())),
            ),
        }
    }
}

impl Piece<'_> {
    /// `input` times the piece's rows, transposed: `(input rows, piece rows)`. A piece of
    /// keyhole's blocks multiplies `rounded`, the input rounded to 8 bits.
    fn forward(
        &self,
        input: &Tensor,
        rounded: Option<&Activations>,
    ) -> candle_core::Result<Tensor> {
        match self {
            Piece::Candle(piece) => piece.forward(input),
            Piece::Blocks(matrix, rows) => {
                let rounded = rounded.expect("the input is rounded for every block piece");
                let mut products = vec![0.0; rounded.rows() * rows.len()];
                matrix.multiply(rounded, rows.clone(), &mut products)?;
                Tensor::from_vec(products, (rounded.rows(), rows.len()), &Device::Cpu)
            }
        }
    }
}

/// Whether tensors of `dtype` are floats (which have no quantized copy).
pub fn is_float(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

/// Whether a tensor is a matrix stored quantized (norms and biases are f32 vectors).
fn is_matrix(info: &gguf_file::TensorInfo) -> bool {
    info.shape.dims().len() == 2
}

/// The type a tensor's quantized copy has: as stored, except the [slow](SLOW) types as Q8_0
/// where its rows are whole Q8_0 blocks.
fn quantized_type(info: &gguf_file::TensorInfo) -> GgmlDType {
    quantized_dtype(info.ggml_dtype, info.shape.dims())
}

fn quantized_dtype(dtype: GgmlDType, dims: &[usize]) -> GgmlDType {
    let columns = dims.last().copied().unwrap_or(0);
    if SLOW.contains(&dtype) && columns.is_multiple_of(GgmlDType::Q8_0.block_size()) {
        GgmlDType::Q8_0
    } else {
        dtype
    }
}

/// A tensor's size as `dtype`; sizes were checked by [`GgufFile::open`].
fn bytes_as(info: &gguf_file::TensorInfo, dtype: GgmlDType) -> u64 {
    let elements = header::elements("", info).unwrap_or(u64::MAX);
    (elements / dtype.block_size() as u64).saturating_mul(dtype.type_size() as u64)
}

/// A candle error on one line: its message and context, without the backtrace candle adds
/// when `RUST_BACKTRACE` is set.
pub fn one_line(error: &candle_core::Error) -> String {
    let text = match error {
        candle_core::Error::WithBacktrace { inner, .. } => return one_line(inner),
        candle_core::Error::Context { inner, context } => format!("{context}: {}", one_line(inner)),
        other => other.to_string(),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use candle_core::quantized::gguf_file::Value;

    use super::*;

    /// A GGUF file in memory holding one 64x32 matrix stored as Q4_1 and one f32 vector.
    fn q4_1_file() -> (GgufFile, Tensor) {
        let values: Vec<f32> = (0..64 * 32)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let matrix = Tensor::from_vec(values, (64, 32), &Device::Cpu).unwrap();
        let stored = QTensor::quantize(&matrix, GgmlDType::Q4_1).unwrap();
        let norm = QTensor::quantize(
            &Tensor::ones(32, candle_core::DType::F32, &Device::Cpu).unwrap(),
            GgmlDType::F32,
        )
        .unwrap();
        let arch = Value::String("llama".into());
        let mut bytes = Cursor::new(Vec::new());
        gguf_file::write(
            &mut bytes,
            &[("general.architecture", &arch)],
            &[("w", &stored), ("norm", &norm)],
        )
        .unwrap();
        bytes.rewind().unwrap();
        let content = Content::read(&mut bytes).unwrap();
        let file = GgufFile {
            content,
            reader: Box::new(bytes),
        };
        (file, stored.dequantize(&Device::Cpu).unwrap())
    }

    /// `rows` rows of activations 32 wide.
    fn activations(rows: usize) -> Tensor {
        let values: Vec<f32> = (0..rows * 32)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        Tensor::from_vec(values, (rows, 32), &Device::Cpu).unwrap()
    }

    fn largest_difference(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap()
    }

    #[test]
    fn a_small_model_keeps_both_and_multiplies_prompts_as_f32_and_tokens_quantized() {
        let (mut file, stored) = q4_1_file();
        assert_eq!(file.kept(Matrices::Auto), Kept::BOTH);
        assert_eq!(file.kept(Matrices::F32), Kept::DENSE);
        assert_eq!(file.kept(Matrices::Quantized), Kept::QUANTIZED);
        // The 64x32 matrix as f32 and as stored (Q4_1), and the f32 norm.
        let q4_1 = 64 * 32 / 32 * 20;
        assert_eq!(
            file.loaded_bytes(Matrices::Auto),
            64 * 32 * 4 + q4_1 + 32 * 4
        );
        assert_eq!(file.loaded_bytes(Matrices::Quantized), q4_1 + 32 * 4);
        let both = file.matrix("w", (64, 32), Kept::BOTH).unwrap();
        let quantized = file.matrix("w", (64, 32), Kept::QUANTIZED).unwrap();
        let dense = file.matrix("w", (64, 32), Kept::DENSE).unwrap();
        assert!(matches!(both.quantized, Some(Quantized::Blocks(..))));
        let exact = |rows| activations(rows).matmul(&stored.t().unwrap()).unwrap();
        // A prompt's rows, however few, multiply the exact values.
        for rows in [1, 3] {
            let prompt = both.forward(&activations(rows), Pass::Prompt).unwrap();
            assert_eq!(largest_difference(&prompt, &exact(rows)), 0.0);
        }
        // A new token multiplies the Q4_1 blocks (with its activations rounded to 8 bits).
        let token = both.forward(&activations(1), Pass::Token).unwrap();
        let off = largest_difference(&token, &exact(1));
        assert!(off > 0.0 && off < 0.5, "{off}");
        let alone = quantized.forward(&activations(1), Pass::Prompt).unwrap();
        assert_eq!(largest_difference(&token, &alone), 0.0);
        let f32_alone = dense.forward(&activations(1), Pass::Token).unwrap();
        assert_eq!(largest_difference(&f32_alone, &exact(1)), 0.0);
    }

    #[test]
    fn a_q8_0_matrix_is_multiplied_as_stored_by_keyholes_kernel() {
        let (_, stored) = q4_1_file();
        let q8_0 = QTensor::quantize(&stored, GgmlDType::Q8_0).unwrap();
        let exact = q8_0.dequantize(&Device::Cpu).unwrap();
        let matrix = Matrix::new(q8_0, Kept::QUANTIZED).unwrap();
        assert!(matches!(matrix.quantized, Some(Quantized::Blocks(..))));
        // Within the activations' rounding to 8 bits of the stored values' product.
        for rows in [1, 3] {
            let got = matrix.forward(&activations(rows), Pass::Token).unwrap();
            let expected = activations(rows).matmul(&exact.t().unwrap()).unwrap();
            let off = largest_difference(&got, &expected);
            assert!(off < 0.1, "{off}");
        }
    }

    #[test]
    fn a_token_multiplied_in_row_pieces_on_several_threads_gets_the_whole_matrix_values() {
        let (_, stored) = q4_1_file();
        // Q4_0, a type candle's kernels multiply.
        let quantized = || QTensor::quantize(&stored, GgmlDType::Q4_0).unwrap();
        let whole = QMatMul::from_qtensor(quantized()).unwrap();
        // 64 rows in 3 uneven pieces (21, 21, 22), multiplied on the CPU pool.
        let pieces = Matrix {
            dense: None,
            quantized: Some(Quantized::Candle(row_pieces(quantized(), 3).unwrap())),
        };
        for rows in [1, 4] {
            let expected = whole.forward(&activations(rows)).unwrap();
            let got = pieces.forward(&activations(rows), Pass::Token).unwrap();
            assert_eq!(got.dims(), &[rows, 64]);
            assert_eq!(largest_difference(&got, &expected), 0.0);
        }
    }

    #[test]
    fn a_q4_1_matrix_multiplied_in_row_pieces_gets_the_whole_matrix_values_on_any_pool() {
        let (mut file, _) = q4_1_file();
        let stored = file.tensor("w", &[64, 32]).unwrap();
        // 64 rows whole, and in 3 uneven pieces (21, 21, 22), on pools of 1 and 3 threads.
        let in_pieces = |pieces| Matrix {
            dense: None,
            quantized: Some(Quantized::Blocks(
                BlockMatrix::new(Format::Q4_1, &stored.data().unwrap(), 64, 32).unwrap(),
                row_ranges(64, pieces),
            )),
        };
        let (whole, pieces) = (in_pieces(1), in_pieces(3));
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for rows in [1, 4] {
                let expected = pool.install(|| whole.forward(&activations(rows), Pass::Token));
                let got = pool.install(|| pieces.forward(&activations(rows), Pass::Token));
                let (expected, got) = (expected.unwrap(), got.unwrap());
                assert_eq!(got.dims(), &[rows, 64]);
                assert_eq!(largest_difference(&got, &expected), 0.0);
            }
        }
    }

    #[test]
    fn a_matrix_of_other_dimensions_than_the_header_says_is_refused_by_name() {
        let (mut file, _) = q4_1_file();
        let error = file
            .matrix("w", (32, 64), Kept::BOTH)
            .err()
            .expect("wrong dimensions");
        assert_eq!(
            error.to_string(),
            "tensor `w` has dimensions [64, 32], not [32, 64]"
        );
        let error = file.vector("gone", 32).expect_err("missing");
        assert_eq!(error.to_string(), "tensor `gone` is missing");
    }
}
