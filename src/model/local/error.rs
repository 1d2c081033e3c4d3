//! What can go wrong with a local model, one type per meaning: its file cannot be run
//! ([`GgufError`]), a text cannot pass through its tokenizer ([`TokenizerError`]), generation
//! stopped ([`GenerationError`]), and the panic a guard caught ([`Panicked`]). Each is one
//! line naming the tensor, key or step; the other files of the model import them from here.

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::quantized::GgmlDType;

/// What `guarded` says of a panic it caught.
pub const PANICKED: &str = "stopped on a panic";

/// A panic caught by `header::guarded`: what was under way, and the panic's first line.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{what} {PANICKED}: {message}")]
pub struct Panicked {
    pub what: String,
    pub message: String,
}

/// Why a GGUF file is not a model keyhole can run: what the checks of its header, tensors,
/// metadata and tokenizer found.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("no such file")]
    NotFound,
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    #[error("{0}")]
    Read(std::io::Error),
    #[error("is a directory, not a GGUF file")]
    Directory,
    #[error("not a GGUF file (it does not start with `GGUF`)")]
    NotGguf,
    /// candle could not read the header; `detail` is its error on one line.
    #[error("truncated or damaged GGUF header: {detail}")]
    DamagedHeader { detail: String },
    #[error("`general.alignment` is 0, not a power of two")]
    ZeroAlignment,
    /// A metadata value the forward pass cannot use: `why` says what it is and what it must be.
    #[error("`{key}` is {why}")]
    Metadata { key: String, why: String },
    #[error("`{0}` is missing")]
    MissingKey(String),
    #[error("no general.architecture in the metadata")]
    NoArchitecture,
    #[error("unsupported architecture `{found}` (keyhole runs {supported})")]
    Architecture {
        found: String,
        supported: &'static str,
    },
    #[error("tensor `{0}` is missing")]
    MissingTensor(String),
    #[error("tensor `{0}` has no elements")]
    NoElements(String),
    #[error("tensor `{name}` has {elements} elements, not whole blocks of {block} ({dtype:?})")]
    PartialBlock {
        name: String,
        elements: u64,
        block: u64,
        dtype: GgmlDType,
    },
    #[error("tensor `{0}` is larger than any file")]
    TensorTooLarge(String),
    #[error("tensor `{name}` has dimensions {dims:?}, more elements than 64 bits count")]
    TooManyElements { name: String, dims: Vec<usize> },
    /// `wanted` is the dimensions asked for, or the kind of tensor ("a matrix's").
    #[error("tensor `{name}` has dimensions {dims:?}, not {wanted}")]
    Dimensions {
        name: String,
        dims: Vec<usize>,
        wanted: String,
    },
    #[error("truncated: tensor `{name}` ends at byte {end} but the file has {length} bytes")]
    Truncated { name: String, end: u64, length: u64 },
    #[error("tensor `{name}` lies beyond the end of any file (offset {offset})")]
    BeyondAnyFile { name: String, offset: u64 },
    /// candle could not read a tensor's values (`detail`: its error on one line).
    #[error("cannot read tensor `{name}`: {detail}")]
    ReadTensor { name: String, detail: String },
    /// candle could not hold a tensor as the forward pass multiplies it.
    #[error("cannot load `{name}`: {detail}")]
    LoadTensor { name: String, detail: String },
    #[error("cannot read `{name}`: {detail}")]
    Dequantize { name: String, detail: String },
    /// The `tokenizer.json` beside the file cannot be read.
    #[error("{}: {detail}", .path.display())]
    TokenizerFile { path: PathBuf, detail: String },
    #[error("the tokenizer in the metadata is unusable: {0}")]
    UnusableTokenizer(String),
    #[error(
        "no tokenizer in the metadata ({0} is missing); put the model's tokenizer.json beside the file"
    )]
    NoTokenizer(&'static str),
    #[error(
        "the `{0}` tokenizer in the metadata is not supported (only byte-level BPE, `gpt2`); put the model's tokenizer.json beside the file"
    )]
    UnsupportedTokenizer(String),
    #[error("{0} holds a non-string")]
    NotStrings(&'static str),
    #[error("tokenizer.ggml.token_type: {0}")]
    TokenTypes(String),
    #[error(transparent)]
    Panicked(#[from] Panicked),
}

impl GgufError {
    /// The value of `key` is not what it must be (`why`: what it is, and what it must be).
    pub fn metadata(key: impl Into<String>, why: impl Into<String>) -> GgufError {
        GgufError::Metadata {
            key: key.into(),
            why: why.into(),
        }
    }
}

/// Why a text could not pass through the model's tokenizer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("cannot tokenize the prompt: {0}")]
    Encode(String),
    #[error("cannot decode the completion: {0}")]
    Decode(String),
}

/// Why generation stopped for a job (every sample of it).
#[derive(Clone, Debug, thiserror::Error)]
pub enum GenerationError {
    /// A tensor operation failed (`0`: candle's error on one line).
    #[error("generation failed: {0}")]
    Failed(String),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Panicked(#[from] Panicked),
    #[error("cannot start the model's thread: {0}")]
    NoThread(Arc<std::io::Error>),
    /// A bug outside the guarded model code.
    #[error("the model's thread stopped on a panic")]
    ThreadPanicked,
}
