//! What a GGUF file's header must satisfy before anything is allocated from it.
//!
//! A header can say anything: a zero head count divides by zero, a block count of 2^32
//! reserves terabytes, a large rotary dimension or context precomputes gigabytes of tables.
//! A file is input like any other, so every hyperparameter and size the forward pass reads is
//! checked here (with checked arithmetic) and the file is refused with a line naming the key;
//! [`guarded`] turns whatever still panics into such a line too.

use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use candle_core::quantized::gguf_file::{Content, TensorInfo, Value};

use super::error::{GgufError, Panicked};

/// The most positions a model gets, whatever its `context_length` says: the forward pass
/// precomputes rotary tables for every position (Qwen2.5's longest trained context is 128 Ki).
pub const MAX_CONTEXT: usize = 1 << 17;
/// Rotary tables may take this much beyond the weights' own size: a real model's tables are a
/// sliver of its weights, a crafted file's can be gigabytes from a few bytes of header.
const TABLES_SLACK: u64 = 64 << 20;

/// Bytes of a tensor as stored: its element count checked against overflow (dimensions of
/// 2^32 x 2^32 would wrap to 0) and whole blocks of its type.
pub fn stored_bytes(name: &str, info: &TensorInfo) -> Result<u64, GgufError> {
    let elements = elements(name, info)?;
    if elements == 0 {
        // candle views a tensor's bytes as its element type: an empty Vec's dangling
        // pointer is not aligned for that (undefined behaviour, an abort in debug builds).
        return Err(GgufError::NoElements(name.to_string()));
    }
    let dtype = info.ggml_dtype;
    let block = dtype.block_size() as u64;
    if !elements.is_multiple_of(block) {
        return Err(GgufError::PartialBlock {
            name: name.to_string(),
            elements,
            block,
            dtype,
        });
    }
    (elements / block)
        .checked_mul(dtype.type_size() as u64)
        .ok_or_else(|| GgufError::TensorTooLarge(name.to_string()))
}

/// A tensor's element count, or why it has none that fits in 64 bits.
pub fn elements(name: &str, info: &TensorInfo) -> Result<u64, GgufError> {
    info.shape
        .dims()
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .ok_or_else(|| GgufError::TooManyElements {
            name: name.to_string(),
            dims: info.shape.dims().to_vec(),
        })
}

/// Checks every tensor: its size, and that it lies within the `length` bytes of the file.
pub fn check_tensors(content: &Content, length: u64) -> Result<(), GgufError> {
    for (name, info) in &content.tensor_infos {
        let bytes = stored_bytes(name, info)?;
        let end = content
            .tensor_data_offset
            .checked_add(info.offset)
            .and_then(|start| start.checked_add(bytes));
        match end {
            Some(end) if end <= length => {}
            Some(end) => {
                return Err(GgufError::Truncated {
                    name: name.clone(),
                    end,
                    length,
                });
            }
            None => {
                return Err(GgufError::BeyondAnyFile {
                    name: name.clone(),
                    offset: info.offset,
                });
            }
        }
    }
    Ok(())
}

/// The hyperparameters of a model's forward pass, checked.
#[derive(Clone, Debug)]
pub struct Hyperparameters {
    /// The most positions the model attends to.
    pub context_length: usize,
    pub blocks: usize,
    pub embedding: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Leading dimensions of each head that rotary position embedding turns.
    pub rotary: usize,
    /// Base of the rotary frequencies (10,000 unless the file says).
    pub rope_base: f32,
    pub rms_epsilon: f32,
}

impl Hyperparameters {
    /// Reads and checks `arch`'s hyperparameters from `content`: counts that divide, sizes
    /// that fit the tensors, and rotary tables within `weights` (the memory the weights take
    /// as loaded).
    pub fn check(content: &Content, arch: &str, weights: u64) -> Result<Self, GgufError> {
        let read = Reader { content, arch };
        let heads = read.at_least("attention.head_count", 1)?;
        let kv_heads = read.at_least("attention.head_count_kv", 1)?;
        if !heads.is_multiple_of(kv_heads) {
            return Err(read.bad(
                "attention.head_count_kv",
                format!("{kv_heads}, which does not divide the head count {heads}"),
            ));
        }
        let embedding = read.at_least("embedding_length", 1)?;
        let tensors = content.tensor_infos.len() as u64;
        let blocks = read.at_least("block_count", 1)?;
        if blocks > tensors {
            return Err(read.bad(
                "block_count",
                format!("{blocks} layers, but the file has {tensors} tensors"),
            ));
        }
        if let Some(width) = content
            .tensor_infos
            .get("token_embd.weight")
            .and_then(|info| info.shape.dims().last().copied())
            && width as u64 != embedding
        {
            return Err(read.bad(
                "embedding_length",
                format!("{embedding}, but `token_embd.weight` has rows of {width}"),
            ));
        }
        let head_dim = match arch {
            // Qwen3 states its head size; the others divide the embedding among the heads.
            "qwen3" => read.at_least("attention.key_length", 2)?,
            _ if !embedding.is_multiple_of(heads) => {
                return Err(read.bad(
                    "attention.head_count",
                    format!("{heads}, which does not divide the embedding length {embedding}"),
                ));
            }
            _ => embedding / heads,
        };
        let rotary = match arch {
            "llama" => read.at_least("rope.dimension_count", 2)?,
            _ => head_dim,
        };
        if rotary > head_dim || !rotary.is_multiple_of(2) {
            let key = if arch == "llama" {
                "rope.dimension_count"
            } else {
                "attention.key_length"
            };
            return Err(read.bad(
                key,
                format!("{rotary}; it must be even and at most the head size {head_dim}"),
            ));
        }
        if arch == "llama" {
            let experts = read.optional("expert_count")?.unwrap_or(0);
            if experts > 1 {
                return Err(read.bad(
                    "expert_count",
                    format!("{experts}: a mixture of experts, which keyhole does not run"),
                ));
            }
        }
        let context_length = read.context_length()?;
        // Positions times half the rotary size, as f32, for cosines and sines.
        let tables = context_length as u64 * (rotary / 2) * 4 * 2;
        if tables > weights + TABLES_SLACK {
            return Err(read.bad(
                if arch == "llama" {
                    "rope.dimension_count"
                } else {
                    "context_length"
                },
                format!(
                    "too large: the rotary tables it asks for take {} MiB, more than the weights",
                    tables >> 20
                ),
            ));
        }
        let rope_base = read.float("rope.freq_base")?.unwrap_or(10_000.0);
        if !(rope_base > 1.0 && rope_base.is_finite()) {
            return Err(read.bad("rope.freq_base", format!("{rope_base}, not above 1")));
        }
        let rms_epsilon = read
            .float("attention.layer_norm_rms_epsilon")?
            .ok_or_else(|| {
                GgufError::MissingKey(format!("{arch}.attention.layer_norm_rms_epsilon"))
            })?;
        if !(rms_epsilon >= 0.0 && rms_epsilon.is_finite()) {
            return Err(read.bad(
                "attention.layer_norm_rms_epsilon",
                format!("{rms_epsilon}, not a small positive number"),
            ));
        }
        let usize = |n: u64| n as usize;
        Ok(Hyperparameters {
            context_length,
            blocks: usize(blocks),
            embedding: usize(embedding),
            heads: usize(heads),
            kv_heads: usize(kv_heads),
            head_dim: usize(head_dim),
            rotary: usize(rotary),
            rope_base,
            rms_epsilon,
        })
    }
}

/// Reads `{arch}.{key}` integers, naming the key in every complaint.
struct Reader<'a> {
    content: &'a Content,
    arch: &'a str,
}

impl Reader<'_> {
    fn bad(&self, key: &str, why: String) -> GgufError {
        GgufError::metadata(format!("{}.{key}", self.arch), why)
    }

    fn optional(&self, key: &str) -> Result<Option<u64>, GgufError> {
        let full = format!("{}.{key}", self.arch);
        match self.content.metadata.get(&full) {
            None => Ok(None),
            // GGUF writers store these as u32; anything else is a damaged or crafted file.
            Some(Value::U32(n)) => Ok(Some(u64::from(*n))),
            Some(other) => Err(GgufError::metadata(full, format!("{other:?}, not a u32"))),
        }
    }

    /// A float, which files store as f32 (some as f64).
    fn float(&self, key: &str) -> Result<Option<f32>, GgufError> {
        let full = format!("{}.{key}", self.arch);
        match self.content.metadata.get(&full) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(other) => Err(GgufError::metadata(full, format!("{other:?}, not a float"))),
        }
    }

    fn at_least(&self, key: &str, least: u64) -> Result<u64, GgufError> {
        match self.optional(key)? {
            None => Err(GgufError::MissingKey(format!("{}.{key}", self.arch))),
            Some(n) if n < least => Err(self.bad(key, format!("{n}, less than {least}"))),
            Some(n) => Ok(n),
        }
    }

    /// The most tokens the model attends to: its trained context (4,096 when a llama file
    /// does not say), at most [`MAX_CONTEXT`].
    fn context_length(&self) -> Result<usize, GgufError> {
        let trained = match self.optional("context_length")? {
            Some(n) if n < 2 => return Err(self.bad("context_length", format!("{n}, less than 2"))),
            Some(n) => n,
            None if self.arch == "llama" => 4096,
            None => {
                return Err(GgufError::MissingKey(format!(
                    "{}.context_length",
                    self.arch
                )));
            }
        };
        Ok(trained.min(MAX_CONTEXT as u64) as usize)
    }
}

/// `general.alignment` as GGUF allows it: a power of two (candle divides by it).
pub fn check_alignment(alignment: Option<&Value>) -> Result<(), GgufError> {
    let value = match alignment {
        None => return Ok(()),
        Some(value) => value.to_u64().ok(),
    };
    match value {
        Some(n) if n.is_power_of_two() => Ok(()),
        _ => Err(GgufError::metadata(
            "general.alignment",
            format!("{alignment:?}, not a power of two"),
        )),
    }
}

thread_local! {
    /// Whether a panic on this thread is caught by [`guarded`], which reports it itself.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Panics [`guarded`] caught on this thread.
    static CAUGHT: Cell<usize> = const { Cell::new(0) };
}

/// How many panics [`guarded`] has caught on this thread: each is a check this module lacks
/// (the GGUF fuzz target counts them as findings; the message text cannot tell, since a file
/// can hold any text in its names).
pub fn panics_caught() -> usize {
    CAUGHT.with(Cell::get)
}

/// Runs `work`, turning a panic in it (candle's tensor code asserts what it assumes about a
/// file) into an error line that says `what` failed, instead of a message and backtrace.
pub fn guarded<T, E: From<Panicked>>(
    what: &str,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(work));
    GUARDED.with(|g| g.set(was));
    result.unwrap_or_else(|panic| {
        CAUGHT.with(|c| c.set(c.get() + 1));
        Err(E::from(Panicked {
            what: what.to_string(),
            message: panic_message(&*panic),
        }))
    })
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("the model code panicked");
    text.lines().next().unwrap_or_default().to_string()
}

/// The machine's physical memory in bytes, where the system says.
pub fn machine_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page > 0 {
            return (pages as u64).checked_mul(page as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::error::PANICKED;
    use super::*;

    #[test]
    fn a_caught_panic_is_one_line_and_counted_on_its_thread() {
        let before = panics_caught();
        let ok = guarded("reading", || Ok::<_, Panicked>(1));
        assert_eq!((ok.unwrap(), panics_caught()), (1, before));
        let caught = guarded("reading the weights", || -> Result<(), Panicked> {
            panic!("index out of range\nsecond line")
        });
        assert_eq!(
            caught.unwrap_err().to_string(),
            format!("reading the weights {PANICKED}: index out of range")
        );
        assert_eq!(panics_caught(), before + 1);
    }
}
