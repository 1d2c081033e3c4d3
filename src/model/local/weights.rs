//! Reading a GGUF file into one of candle-transformers' quantized models, with a one-line
//! reason for every file that cannot be used.

use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek};
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use super::header::{self, guarded};
use crate::model::config::Matrices;

/// The first bytes of every GGUF file.
const MAGIC: &[u8; 4] = b"GGUF";

/// A quantized causal language model with its KV cache.
pub enum Weights {
    /// Llama and everything in its GGUF layout (SmolLM, SmolLM2, Mistral, CodeLlama).
    Llama(quantized_llama::ModelWeights),
    Qwen2(quantized_qwen2::ModelWeights),
    Qwen3(quantized_qwen3::ModelWeights),
}

/// The architectures keyhole runs, as `general.architecture` names them.
const SUPPORTED: &str = "llama, qwen2, qwen3";

/// Quantizations that candle 0.11 multiplies with scalar code only on x86 (it has no SIMD
/// dot product for them): SmolLM2's Q4_1 file ran about 4 times slower than as Q8_0.
/// Matrices stored so are converted to Q8_0 at load, which keeps every value to within 8-bit
/// rounding of the original at 1.7 times the memory.
const SLOW: [GgmlDType; 3] = [GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1];

/// Models whose matrices take at most this much memory as f32 run them as f32: candle
/// multiplies f32 with an optimized GEMM, which on SmolLM2-135M fed a 1,000-token prompt
/// 2.5 times faster than its quantized kernels (generation was 10% slower). Prompts are
/// most of a completion's work, so small models trade memory for speed; larger ones keep
/// their quantization.
const F32_LIMIT: usize = 1 << 30;

/// Where a model's tensors are read from: the file, or memory after a conversion.
trait Source: Read + Seek {}
impl<T: Read + Seek> Source for T {}

/// A GGUF file's header, checked against the file's length, and the open file.
pub struct GgufFile {
    pub content: Content,
    reader: Box<dyn Source>,
}

impl GgufFile {
    /// Opens `path` and reads its header; the tensors are read by [`Weights::load`].
    pub fn open(path: &Path) -> Result<GgufFile, String> {
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => format!("cannot open: {e}"),
        })?;
        let metadata = file.metadata().map_err(|e| e.to_string())?;
        if metadata.is_dir() {
            return Err("is a directory, not a GGUF file".into());
        }
        let length = metadata.len();
        let mut reader = BufReader::new(file);
        let mut magic = [0u8; 4];
        if reader.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return Err("not a GGUF file (it does not start with `GGUF`)".into());
        }
        reader.rewind().map_err(|e| e.to_string())?;
        // candle divides by `general.alignment` at the end of reading (and by nothing else):
        // a panic there is a zero alignment.
        let content = guarded("reading the GGUF header", || {
            Content::read(&mut reader)
                .map_err(|e| format!("truncated or damaged GGUF header: {}", one_line(&e)))
        })
        .map_err(|e| {
            if e.contains("divide by zero") {
                "`general.alignment` is 0, not a power of two".to_string()
            } else {
                e
            }
        })?;
        header::check_alignment(content.metadata.get("general.alignment"))?;
        // A truncated download keeps a whole header: check that every tensor is there.
        header::check_tensors(&content, length)?;
        Ok(GgufFile {
            content,
            reader: Box::new(reader),
        })
    }

    /// The file with its matrices as `matrices` says, in memory: all as f32 (by default in a
    /// model within [`F32_LIMIT`]), else the [slow](SLOW) ones as Q8_0; unchanged when nothing
    /// needs converting.
    fn with_fast_matrices(mut self, matrices: Matrices) -> candle_core::Result<GgufFile> {
        let infos = &self.content.tensor_infos;
        let as_f32 = self.as_f32(matrices);
        let target = |info: &gguf_file::TensorInfo| conversion(info, as_f32);
        if !infos.values().any(|info| target(info).is_some()) {
            return Ok(self);
        }
        let mut tensors = Vec::with_capacity(self.content.tensor_infos.len());
        for (name, info) in &self.content.tensor_infos {
            let tensor = info.read(
                &mut self.reader,
                self.content.tensor_data_offset,
                &Device::Cpu,
            )?;
            let tensor = match target(info) {
                Some(dtype) => QTensor::quantize(&tensor.dequantize(&Device::Cpu)?, dtype)?,
                None => tensor,
            };
            tensors.push((name.as_str(), tensor));
        }
        // The writer aligns tensors to its own default; a recorded alignment would mislead.
        let metadata: Vec<(&str, &Value)> = self
            .content
            .metadata
            .iter()
            .filter(|(key, _)| key.as_str() != "general.alignment")
            .map(|(key, value)| (key.as_str(), value))
            .collect();
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        let mut converted = Cursor::new(Vec::new());
        gguf_file::write(&mut converted, &metadata, &refs)?;
        drop(tensors);
        converted.rewind()?;
        Ok(GgufFile {
            content: Content::read(&mut converted)?,
            reader: Box::new(converted),
        })
    }

    /// Whether the matrices run as f32: as asked, or by default in a model within
    /// [`F32_LIMIT`] as f32.
    fn as_f32(&self, matrices: Matrices) -> bool {
        match matrices {
            Matrices::Auto => self.tensor_bytes(|_| Some(GgmlDType::F32)) <= F32_LIMIT as u64,
            Matrices::F32 => true,
            Matrices::Quantized => false,
        }
    }

    /// The memory the tensors take once loaded with their matrices as `matrices` says.
    pub fn loaded_bytes(&self, matrices: Matrices) -> u64 {
        let as_f32 = self.as_f32(matrices);
        self.tensor_bytes(|info| conversion(info, as_f32))
    }

    /// The tensors' total size, each as `dtype` says (as stored where it says `None`);
    /// sizes were checked by [`GgufFile::open`].
    fn tensor_bytes(&self, dtype: impl Fn(&gguf_file::TensorInfo) -> Option<GgmlDType>) -> u64 {
        self.content
            .tensor_infos
            .iter()
            .map(|(name, info)| {
                let elements = header::elements(name, info).unwrap_or(u64::MAX);
                let dtype = dtype(info).unwrap_or(info.ggml_dtype);
                (elements / dtype.block_size() as u64).saturating_mul(dtype.type_size() as u64)
            })
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
    pub fn architecture(&self) -> Result<String, String> {
        let arch = self
            .string("general.architecture")
            .ok_or("no general.architecture in the metadata")?;
        match arch {
            "llama" | "qwen2" | "qwen3" => Ok(arch.to_string()),
            other => Err(format!(
                "unsupported architecture `{other}` (keyhole runs {SUPPORTED})"
            )),
        }
    }
}

/// What a tensor is converted to at load: every matrix to f32 when `as_f32`, else the
/// [slow](SLOW) ones to Q8_0; `None` keeps it as stored.
fn conversion(info: &gguf_file::TensorInfo, as_f32: bool) -> Option<GgmlDType> {
    let dtype = info.ggml_dtype;
    let dims = info.shape.dims();
    if dims.len() != 2 || matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
        None
    } else if as_f32 {
        Some(GgmlDType::F32)
    } else {
        (SLOW.contains(&dtype) && dims[1].is_multiple_of(GgmlDType::Q8_0.block_size()))
            .then_some(GgmlDType::Q8_0)
    }
}

impl Weights {
    /// The model in `file`, on the CPU.
    pub fn load(file: GgufFile, arch: &str, matrices: Matrices) -> Result<Weights, String> {
        let GgufFile {
            content,
            mut reader,
        } = file
            .with_fast_matrices(matrices)
            .map_err(|e| format!("cannot convert the matrices: {}", one_line(&e)))?;
        let device = Device::Cpu;
        let load = || {
            match arch {
                "llama" => quantized_llama::ModelWeights::from_gguf(content, &mut reader, &device)
                    .map(Weights::Llama),
                "qwen2" => quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &device)
                    .map(Weights::Qwen2),
                "qwen3" => quantized_qwen3::ModelWeights::from_gguf(content, &mut reader, &device)
                    .map(Weights::Qwen3),
                other => return Err(format!("unsupported architecture `{other}`")),
            }
            .map_err(|e| format!("cannot load the {arch} weights: {}", one_line(&e)))
        };
        guarded(&format!("loading the {arch} weights"), load)
    }

    /// Forgets the previous sequence.
    pub fn reset(&mut self) {
        match self {
            Weights::Llama(m) => m.clear_kv_cache(),
            Weights::Qwen2(m) => m.clear_kv_cache(),
            Weights::Qwen3(m) => m.clear_kv_cache(),
        }
    }

    /// Feeds `ids` at `position` (tokens already in the cache) and returns the logits for
    /// the token after the last one.
    pub fn forward(&mut self, ids: &[u32], position: usize) -> candle_core::Result<Tensor> {
        let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Weights::Llama(m) => m.forward(&input, position)?,
            Weights::Qwen2(m) => m.forward(&input, position)?,
            Weights::Qwen3(m) => m.forward(&input, position)?,
        };
        logits.squeeze(0)
    }
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

    /// The matrix `w` as `matrices` makes it: its type, and its largest difference from the
    /// stored values.
    fn converted(matrices: Matrices) -> (GgmlDType, f32) {
        let (file, stored) = q4_1_file();
        let mut file = file.with_fast_matrices(matrices).unwrap();
        let info = &file.content.tensor_infos["w"];
        let dtype = info.ggml_dtype;
        let tensor = info
            .read(
                &mut file.reader,
                file.content.tensor_data_offset,
                &Device::Cpu,
            )
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap();
        let difference = (tensor - stored).unwrap().abs().unwrap().max_all().unwrap();
        (dtype, difference.to_scalar::<f32>().unwrap())
    }

    #[test]
    fn matrices_run_as_f32_or_q8_0_as_asked_and_keep_their_values() {
        let (dtype, difference) = converted(Matrices::F32);
        assert_eq!((dtype, difference), (GgmlDType::F32, 0.0));
        // A small model runs as f32 unless told otherwise.
        assert_eq!(converted(Matrices::Auto).0, GgmlDType::F32);
        let (dtype, difference) = converted(Matrices::Quantized);
        assert_eq!(dtype, GgmlDType::Q8_0);
        // Q8_0 keeps every value to within half a step of 1/127 of its block's largest (2).
        assert!(difference <= 2.0 / 127.0, "{difference}");
        assert!(difference > 0.0, "really requantized");
    }
}
