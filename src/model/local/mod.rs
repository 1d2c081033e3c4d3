//! A local neural backend: a GGUF causal language model (llama family, Qwen2, Qwen3) run
//! in-process by keyhole's own forward pass over candle's tensors (`transformer`).
//!
//! The model loads once per process and file ([`shared`]) and is shared by every request.
//! Requests that wait for it at the same time run as one batch (`batch`): each prompt is
//! read in turn, then their tokens decode together, one step for all of them. The KV caches
//! outlive a request: a prompt reuses the longest prefix it shares with a held sequence (an
//! edited prompt, the same candidate again), and a request's samples share one reading of
//! its prompt. The batch runs on a thread of its own so the async runtime keeps serving the
//! UI; dropping a request's future sets a flag that the batch checks between tokens.

mod attention;
mod batch;
mod block_matrix;
mod blocks;
mod error;
#[cfg(test)]
mod fixture;
mod header;
mod q4_1;
mod q8_0;
pub use error::{GgufError, TokenizerError};
pub use header::panics_caught;
mod transformer;
mod vocabulary;
mod weights;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Instant;

use async_trait::async_trait;
use tokio::sync::mpsc::UnboundedSender;

use super::config::{BackendConfig, BackendKind, Matrices};
use super::{Backend, BackendError, Completion, CompletionRequest, Delta, TokenCounting};
pub use batch::Decoded;
use batch::{Batch, Job};
use transformer::Transformer;
pub use vocabulary::Fim;
use vocabulary::Vocabulary;
use weights::{GgufFile, one_line};

/// Why a model file cannot be run, or a text cannot pass through its tokenizer. The file's
/// checks (header, tensors, vocabulary) say what they found in one line each.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalModelError {
    /// The weights, as they would be held, need more memory than the machine has.
    #[error(
        "the weights take {} MiB as loaded, more than this machine's {} MiB",
        weights >> 20,
        memory >> 20
    )]
    TooLarge { weights: u64, memory: u64 },
    /// The file is not a model keyhole can run. Names read from the file (tensors, keys) may
    /// hold line breaks or escapes: they are written escaped, so the error stays one line.
    #[error("{}", crate::escape::controls(&.0.to_string()))]
    File(#[from] GgufError),
    /// The tokenizer cannot encode or decode a text.
    #[error("{}", crate::escape::controls(&.0.to_string()))]
    Tokenizer(#[from] TokenizerError),
    #[error("the prompt is empty and the vocabulary has no end-of-text token")]
    EmptyPrompt,
}

/// A GGUF model file as a [`Backend`].
pub struct LocalBackend {
    config: BackendConfig,
    model: Arc<LocalModel>,
}

/// A loaded model: weights, tokenizer, the longest sequence it attends to, and the batch its
/// requests run in (with the sequences it holds).
pub struct LocalModel {
    path: PathBuf,
    architecture: String,
    context_length: usize,
    vocabulary: Vocabulary,
    transformer: Transformer,
    batch: Batch,
}

/// Models loaded in this process, by canonical path and how their matrices run; a model lives
/// while a backend holds it.
type Loaded = HashMap<(PathBuf, Matrices), Weak<LocalModel>>;
static LOADED: LazyLock<Mutex<Loaded>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The model at `path` with its matrices as `matrices` says, loaded now unless this process
/// already holds it.
pub fn shared(path: &Path, matrices: Matrices) -> Result<Arc<LocalModel>, LocalModelError> {
    let key = (
        path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        matrices,
    );
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(model) = loaded.get(&key).and_then(Weak::upgrade) {
        return Ok(model);
    }
    let model = Arc::new(LocalModel::load(path, matrices)?);
    loaded.insert(key, Arc::downgrade(&model));
    Ok(model)
}

/// Sets the compute threads for the whole process: a local backend's `threads` (by default
/// the machine's physical cores, unless `RAYON_NUM_THREADS` says) multiply prompts and, in
/// pieces of rows, generated tokens (see `weights::token_pieces`), and run a generated
/// token's attention in pieces of its cache (`attention`); candle's own pool (its
/// element-wise work and a product it runs whole) stays on one thread, unless
/// `CANDLE_NUM_THREADS` says: its caller spins until every worker is done, so when another
/// process holds a core each product waits for a descheduled worker, and two threads
/// generated 3.4 tokens/s where one generated 46 (BENCHMARKS.md). candle reads both counts
/// from the environment only.
///
/// # Safety
/// Changes the process environment: call it before the process starts any other thread.
pub unsafe fn use_threads(config: &BackendConfig) {
    // SAFETY (both): the caller guarantees no other thread runs (and so reads the environment).
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
    if let Some(threads) = config.threads.filter(|_| config.kind == BackendKind::Local)
        && std::env::var_os("RAYON_NUM_THREADS").is_none()
    {
        unsafe { std::env::set_var("RAYON_NUM_THREADS", threads.to_string()) };
    }
}

impl LocalModel {
    /// Reads the GGUF file at `path`: header, tokenizer, then weights (held as `matrices`
    /// says).
    pub fn load(path: &Path, matrices: Matrices) -> Result<LocalModel, LocalModelError> {
        // The file's checks live in this module's private parts and say what they found.
        let mut file = GgufFile::open(path)?;
        let architecture = file.architecture()?;
        let weights = file.loaded_bytes(matrices);
        let memory = header::machine_memory();
        if let Some(memory) = memory.filter(|&m| weights > m) {
            return Err(LocalModelError::TooLarge { weights, memory });
        }
        let hyper = header::Hyperparameters::check(&file.content, &architecture, weights)?;
        let vocabulary = Vocabulary::load(&file.content.metadata, path)?;
        let kept = file.kept(matrices);
        let transformer = header::guarded(&format!("loading the {architecture} weights"), || {
            Transformer::load(&mut file, &architecture, &hyper, kept)
        })?;
        Ok(LocalModel {
            path: path.to_path_buf(),
            architecture,
            context_length: hyper.context_length,
            vocabulary,
            transformer,
            batch: Batch::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `general.architecture` of the file.
    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// The most tokens (prompt and completion) the model attends to.
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// Prompt tokens the model takes with `max_tokens` left for the completion: its context
    /// less the completion, the beginning-of-text token and the three FIM tokens around a
    /// prefix and a suffix.
    pub fn prompt_room(&self, max_tokens: usize) -> usize {
        let completion = max_tokens.min(self.context_length - 1);
        self.context_length.saturating_sub(completion + 4)
    }

    /// The FIM tokens of the vocabulary, if it has them.
    pub fn fim(&self) -> Option<Fim> {
        self.vocabulary.fim()
    }

    /// Exact token count of `text` in the model's tokenizer.
    pub fn count_tokens(&self, text: &str) -> Result<usize, LocalModelError> {
        self.vocabulary
            .encode(text)
            .map(|ids| ids.len())
            .map_err(LocalModelError::from)
    }

    /// The text of token ids, as a completion's tokens decode.
    pub fn decode(&self, ids: &[u32]) -> Result<String, LocalModelError> {
        self.vocabulary.decode(ids).map_err(LocalModelError::from)
    }

    /// The token ids the model sees for `request`, with room left for `max_tokens`: the
    /// fill-in-the-middle layout (prefix, suffix, middle) when the request has a suffix and
    /// the vocabulary FIM tokens, else the prompt alone. A prompt longer than the context
    /// keeps its end (and the suffix its start), as the code nearest the hole matters most;
    /// the returned flag says whether anything was cut.
    pub fn prompt_ids(
        &self,
        request: &CompletionRequest,
        max_tokens: usize,
    ) -> Result<(Vec<u32>, bool), LocalModelError> {
        let vocabulary = &self.vocabulary;
        let encode = |text: &str| vocabulary.encode(text).map_err(LocalModelError::from);
        let room = self.context_length.saturating_sub(max_tokens);
        let mut ids: Vec<u32> = vocabulary.bos().into_iter().collect();
        let prefix = encode(&request.prompt)?;
        let suffix = request.suffix.as_deref().filter(|s| !s.is_empty());
        let (prefix_keep, truncated) = match (vocabulary.fim(), suffix) {
            (Some(fim), Some(suffix)) => {
                let suffix = encode(suffix)?;
                let room = room.saturating_sub(ids.len() + 3);
                // The prefix gets at least three quarters of the room; the suffix the rest.
                let prefix_keep = prefix
                    .len()
                    .min(room.saturating_sub(suffix.len()).max(room * 3 / 4));
                let suffix_keep = suffix.len().min(room - prefix_keep);
                ids.push(fim.prefix);
                ids.extend(&prefix[prefix.len() - prefix_keep..]);
                ids.push(fim.suffix);
                ids.extend(&suffix[..suffix_keep]);
                ids.push(fim.middle);
                (prefix_keep, suffix_keep < suffix.len())
            }
            _ => {
                let keep = prefix.len().min(room.saturating_sub(ids.len()));
                ids.extend(&prefix[prefix.len() - keep..]);
                (keep, false)
            }
        };
        if ids.is_empty() {
            // Nothing to condition on: start as after a document boundary.
            ids.extend(vocabulary.eos());
        }
        if ids.is_empty() {
            return Err(LocalModelError::EmptyPrompt);
        }
        Ok((ids, truncated || prefix_keep < prefix.len()))
    }

    /// What the model computed since it loaded: prompt tokens read, batch steps and the
    /// tokens they decoded.
    pub fn decoded(&self) -> Decoded {
        self.batch.decoded()
    }
}

/// Sets its flag when dropped: the request's future was dropped (or finished).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl LocalBackend {
    /// The backend for a `kind = "local"` entry; loads its model unless already loaded.
    pub fn open(config: &BackendConfig) -> Result<LocalBackend, BackendError> {
        let path = config.path.clone().ok_or_else(|| BackendError::Config {
            backend: config.name.clone(),
            detail: "path (the GGUF model file) is not set".into(),
        })?;
        let model = shared(&path, config.matrices.unwrap_or_default()).map_err(|error| {
            BackendError::LocalModel {
                backend: config.name.clone(),
                path,
                detail: error.to_string(),
            }
        })?;
        Ok(LocalBackend {
            config: config.clone(),
            model,
        })
    }

    /// The loaded model.
    pub fn model(&self) -> &LocalModel {
        &self.model
    }

    fn error(&self, detail: String) -> BackendError {
        BackendError::LocalModel {
            backend: self.config.name.clone(),
            path: self.model.path.clone(),
            detail,
        }
    }
}

#[async_trait]
impl Backend for LocalBackend {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn counting(&self) -> TokenCounting {
        TokenCounting::Exact
    }

    fn takes_turns(&self) -> bool {
        // A request's prompt is read in its turn; the tokens of requests in the batch then
        // decode together.
        true
    }

    async fn complete(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let start = Instant::now();
        let (request, fragment) = self.config.prepare(request);
        let model = Arc::clone(&self.model);
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(Arc::clone(&cancel));
        let (reply, answer) = tokio::sync::oneshot::channel();
        let deltas = deltas.cloned();
        // Tokenizing a long prompt takes a while: off the async threads, as the batch runs.
        let submitted = tokio::task::spawn_blocking(move || {
            // Leave the prompt at least one token of the context.
            let max_tokens = request.max_tokens.min(model.context_length - 1);
            let (prompt, truncated) = model.prompt_ids(&request, max_tokens)?;
            if truncated {
                tracing::warn!(
                    model = %model.path.display(),
                    context = model.context_length,
                    "the prompt is longer than the model's context; keeping its end"
                );
            }
            let model_prompt_tokens = truncated.then_some(prompt.len());
            let temperature = request.temperature;
            let job = Job {
                prompt,
                max_tokens,
                samples: request.n.max(1),
                seed: request.seed.unwrap_or_else(rand::random),
                temperature: (temperature > 0.0).then_some(f64::from(temperature)),
                stop: request.stop.into(),
                cancel,
                deltas,
                reply,
            };
            batch::submit(&model, job);
            Ok::<_, LocalModelError>(model_prompt_tokens)
        });
        let model_prompt_tokens = submitted
            .await
            .map_err(|e| self.error(format!("generation stopped: {e}")))?
            .map_err(|error| self.error(error.to_string()))?;
        let texts = answer
            .await
            .map_err(|_| self.error("generation stopped: the model's thread ended".into()))?
            .map_err(|error| self.error(error.to_string()))?;
        let latency = start.elapsed();
        Ok(texts
            .into_iter()
            .map(|text| Completion {
                text: super::restore_fragment(&text, &fragment),
                latency,
                model_prompt_tokens,
            })
            .collect())
    }

    async fn prompt_room(&self) -> Option<usize> {
        let max_tokens = self.config.max_tokens.unwrap_or(super::DEFAULT_MAX_TOKENS);
        Some(self.model.prompt_room(max_tokens))
    }

    async fn count_tokens(&self, text: &str) -> Option<Result<usize, BackendError>> {
        Some(
            self.model
                .count_tokens(text)
                .map_err(|error| self.error(error.to_string())),
        )
    }
}
