//! Backend configuration: the TOML file in the config directory, with flags to override.
//!
//! `backends.toml` holds one `[[backend]]` table per backend. The embedded backend is built in
//! and always listed first. API keys never appear here: a backend names the environment
//! variable that holds its key, and the key is read only when a request is sent.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::CompletionRequest;
use crate::config_file::{key_at, key_offset, line_of};

/// Environment variable that replaces the platform's config directory.
/// The backends file, inside the config directory.
pub const BACKENDS_FILE: &str = "backends.toml";
/// Name (and kind) of the built-in offline backend.
pub const EMBEDDED: &str = "embedded";
/// Name of the one-off local backend that `--model-path` makes.
pub const LOCAL: &str = "local";
/// Placeholder for the prompt in a chat backend's user message.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";
/// Placeholder for the code after the hole in a chat backend's user message.
pub const SUFFIX_PLACEHOLDER: &str = "{suffix}";
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a code completion engine. You answer with code only, without explanations or markdown.";
pub const DEFAULT_USER_TEMPLATE: &str =
    "Complete the code at the end of this prompt. Answer with the missing code only.\n\n{prompt}";

/// Which server protocol a backend speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum BackendKind {
    #[serde(rename = "embedded")]
    Embedded,
    /// `/v1/completions` (vLLM, llama.cpp, LM Studio, TGI, OpenAI).
    #[serde(rename = "openai")]
    OpenAi,
    /// `/v1/chat/completions`, with the prompt wrapped in an instruction.
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// Ollama's `/api/generate`.
    #[serde(rename = "ollama")]
    Ollama,
    /// llama.cpp's native `/completion`, `/infill` and `/tokenize`.
    #[serde(rename = "llamacpp")]
    LlamaCpp,
    /// A GGUF model file run in-process (see [`super::local`]).
    #[serde(rename = "local")]
    Local,
}

impl BackendKind {
    /// Whether the backend is a server reached over HTTP.
    pub fn is_http(self) -> bool {
        !matches!(self, BackendKind::Embedded | BackendKind::Local)
    }
}

impl BackendKind {
    /// The name `kind = ` takes in backends.toml.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Embedded => "embedded",
            BackendKind::OpenAi => "openai",
            BackendKind::OpenAiChat => "openai_chat",
            BackendKind::Ollama => "ollama",
            BackendKind::LlamaCpp => "llamacpp",
            BackendKind::Local => "local",
        }
    }
}

/// One backend as configured. Generation settings that are set replace the request's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    pub name: String,
    pub kind: BackendKind,
    /// Server root, without `/v1`: e.g. `http://localhost:8080`.
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The NAME of the environment variable holding the API key (sent as a bearer token).
    pub api_key_env: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<usize>,
    pub stop: Option<Vec<String>>,
    /// Limit on a whole request: connecting, retries and reading the answer.
    #[serde(default = "default_deadline_secs")]
    pub deadline_secs: u64,
    /// Requests in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Retries after 429 and 5xx answers.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Whether the server honours `n > 1` (OpenAI kinds only; llama.cpp's `/v1` rejects it).
    pub supports_n: Option<bool>,
    /// Chat backends: the system message.
    pub system_prompt: Option<String>,
    /// Chat backends: the user message, with `{prompt}` (and optionally `{suffix}`).
    pub user_template: Option<String>,
    /// Local backends: the GGUF model file.
    pub path: Option<PathBuf>,
    /// Local backends: compute threads for prompts [default: the machine's physical cores];
    /// generated tokens run on one (see [`super::local::use_threads`]).
    pub threads: Option<usize>,
    /// Local backends: how the model's matrices are held [default: auto].
    pub matrices: Option<Matrices>,
    /// Whether a prompt's [trailing fragment](super::CompletionRequest::trailing_fragment) is
    /// moved into the completion's expected start [default: true]; `false` sends the prompt as
    /// cut, as RLPG's code sent Codex its prompts.
    pub token_healing: Option<bool>,
}

/// How a local model's matrices are held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Matrices {
    /// Both as f32 and quantized where the whole model takes at most 1 GiB as f32: prompts
    /// multiply the f32 copy (candle's GEMM), generated tokens the quantized one (a quarter
    /// of the bytes to read); larger models quantized alone.
    #[default]
    Auto,
    /// As f32 alone: fast prompts, slow generation, four to eight times the memory of a 4- or
    /// 8-bit file.
    F32,
    /// Quantized alone, as stored except the types neither candle nor keyhole has a fast
    /// kernel for (Q5_0, Q5_1), which run as Q8_0: least memory, slower prompts.
    Quantized,
}

fn default_deadline_secs() -> u64 {
    60
}

fn default_concurrency() -> usize {
    4
}

fn default_retries() -> u32 {
    3
}

/// Upper bounds of the numbers a user configures (or gives as flags): generous for any real
/// server, small enough that no count overflows, allocates without end or waits for ever.
pub const MAX_CONCURRENCY: usize = 256;
pub const MAX_DEADLINE_SECS: u64 = 24 * 60 * 60;
pub const MAX_RETRIES: u32 = 20;
pub const MAX_GENERATED_TOKENS: usize = 1 << 16;
pub const MAX_SAMPLES: usize = 128;
pub const MAX_TEMPERATURE: f32 = 2.0;

impl BackendConfig {
    /// The built-in offline backend.
    pub fn embedded() -> Self {
        BackendConfig {
            name: EMBEDDED.to_string(),
            kind: BackendKind::Embedded,
            base_url: None,
            model: None,
            api_key_env: None,
            temperature: None,
            max_tokens: None,
            stop: None,
            deadline_secs: default_deadline_secs(),
            concurrency: default_concurrency(),
            retries: default_retries(),
            supports_n: None,
            system_prompt: None,
            user_template: None,
            path: None,
            threads: None,
            matrices: None,
            token_healing: None,
        }
    }

    /// A one-off local backend for the model file at `path` (`--model-path`).
    pub fn local(path: PathBuf) -> Self {
        BackendConfig {
            name: LOCAL.to_string(),
            kind: BackendKind::Local,
            path: Some(path),
            ..BackendConfig::embedded()
        }
    }

    /// Whether one request can ask for several samples.
    pub fn supports_n(&self) -> bool {
        matches!(self.kind, BackendKind::OpenAi | BackendKind::OpenAiChat)
            && self.supports_n.unwrap_or(true)
    }

    /// The tokenizer that counts like this backend's model, where keyhole has it (otherwise
    /// keyhole's code tokenizer, and counts are approximate).
    pub fn tokenizer(&self) -> crate::token::TokenizerKind {
        use crate::token::TokenizerKind;
        match self.kind {
            BackendKind::Embedded => TokenizerKind::Code,
            _ => self
                .model
                .as_deref()
                .and_then(TokenizerKind::for_model)
                .unwrap_or(TokenizerKind::Code),
        }
    }

    /// `request` with this backend's configured generation settings in place of its own.
    pub fn apply(&self, request: &CompletionRequest) -> CompletionRequest {
        CompletionRequest {
            temperature: self.temperature.unwrap_or(request.temperature),
            max_tokens: self.max_tokens.unwrap_or(request.max_tokens),
            stop: self.stop.clone().unwrap_or_else(|| request.stop.clone()),
            ..request.clone()
        }
    }

    /// The request this backend sends for `request` (its generation settings applied, the
    /// prompt's [trailing fragment](CompletionRequest::trailing_fragment) moved out) and that
    /// fragment, which [`super::restore_fragment`] takes back out of the answers.
    pub fn prepare(&self, request: &CompletionRequest) -> (CompletionRequest, String) {
        if self.token_healing == Some(false) {
            return (self.apply(request), String::new());
        }
        let fragment = request.trailing_fragment().to_string();
        (self.apply(&request.without_trailing_fragment()), fragment)
    }

    /// The first problem with this entry, as (key, message).
    fn problem(&self) -> Option<(&'static str, String)> {
        let http = self.kind.is_http();
        let needs_model = matches!(
            self.kind,
            BackendKind::OpenAi | BackendKind::OpenAiChat | BackendKind::Ollama
        );
        if self.name.trim().is_empty() {
            Some(("name", "must not be empty".into()))
        } else if self.name == EMBEDDED {
            Some((
                "name",
                format!("`{EMBEDDED}` is the built-in backend's name"),
            ))
        } else if http && self.base_url.is_none() {
            Some(("base_url", "is required for HTTP backends".into()))
        } else if let Some(problem) = self.base_url.as_deref().and_then(url_problem) {
            Some(("base_url", problem))
        } else if self.kind == BackendKind::Local && self.path.is_none() {
            Some((
                "path",
                "is required for local backends (a GGUF file)".into(),
            ))
        } else if self.threads == Some(0) {
            Some(("threads", "must be at least 1".into()))
        } else if needs_model && self.model.is_none() {
            Some(("model", "is required for this kind".into()))
        } else if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            Some((
                "concurrency",
                format!("must be from 1 to {MAX_CONCURRENCY}"),
            ))
        } else if !(1..=MAX_DEADLINE_SECS).contains(&self.deadline_secs) {
            Some((
                "deadline_secs",
                format!("must be from 1 to {MAX_DEADLINE_SECS}"),
            ))
        } else if self.retries > MAX_RETRIES {
            Some(("retries", format!("must be from 0 to {MAX_RETRIES}")))
        } else if self
            .max_tokens
            .is_some_and(|n| !(1..=MAX_GENERATED_TOKENS).contains(&n))
        {
            Some((
                "max_tokens",
                format!("must be from 1 to {MAX_GENERATED_TOKENS}"),
            ))
        } else if self
            .temperature
            .is_some_and(|t| !(0.0..=MAX_TEMPERATURE).contains(&t))
        {
            Some((
                "temperature",
                format!("must be from 0 to {MAX_TEMPERATURE}"),
            ))
        } else if self
            .user_template
            .as_ref()
            .is_some_and(|t| !t.contains(PROMPT_PLACEHOLDER))
        {
            Some((
                "user_template",
                format!("must contain {PROMPT_PLACEHOLDER}"),
            ))
        } else {
            None
        }
    }
}

/// Why `url` cannot be a server root; the URL itself is not echoed (it may hold secrets).
/// Without the `http` feature no server is ever asked, so a URL is not read at all (a backend
/// that names one is refused when it is chosen).
#[cfg(not(feature = "http"))]
fn url_problem(_: &str) -> Option<String> {
    None
}

/// Why `url` cannot be a server root; the URL itself is not echoed (it may hold secrets).
#[cfg(feature = "http")]
fn url_problem(url: &str) -> Option<String> {
    match url::Url::parse(url) {
        Err(e) => Some(format!("is not a valid URL ({e})")),
        Ok(u) if !matches!(u.scheme(), "http" | "https") => Some("must be http or https".into()),
        Ok(_) => None,
    }
}

/// A backends file that cannot be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read {}: {detail}", path.display())]
    Read { path: PathBuf, detail: String },
    #[error("{}, line {line}{}: {message}", path.display(), key.as_ref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        line: usize,
        key: Option<String>,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendsFile {
    #[serde(default)]
    backend: Vec<toml::Spanned<BackendConfig>>,
}

/// The embedded backend followed by those in `path` (a missing file configures none).
pub fn load_backends(path: &Path) -> Result<Vec<BackendConfig>, ConfigError> {
    // A FIFO or a device would block the read or never end it.
    if path.exists() && !path.is_file() {
        return Err(ConfigError::Read {
            path: path.to_path_buf(),
            detail: "not a regular file".into(),
        });
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                detail: e.to_string(),
            });
        }
    };
    parse_backends(&text, path)
}

/// [`load_backends`], forgiving: an entry that cannot be used is left out, with its error,
/// and the others are kept (the embedded backend needs no entry). A file that cannot be read
/// at all leaves the embedded backend alone.
pub fn load_backends_leniently(path: &Path) -> (Vec<BackendConfig>, Vec<ConfigError>) {
    match load_backends(path) {
        Ok(backends) => (backends, Vec::new()),
        Err(err @ ConfigError::Read { .. }) => (vec![BackendConfig::embedded()], vec![err]),
        Err(ConfigError::Invalid { .. }) => {
            // Read a second time only when something is wrong: the common case reads once.
            let text = std::fs::read_to_string(path).unwrap_or_default();
            parse_backends_leniently(&text, path)
        }
    }
}

/// Each `[[backend]]` entry of `text` parsed on its own (the rest blanked, so lines keep their
/// numbers): those that parse and check out, and the errors of the others.
fn parse_backends_leniently(text: &str, path: &Path) -> (Vec<BackendConfig>, Vec<ConfigError>) {
    let starts: Vec<usize> = text
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .chain(std::iter::once(0))
        .filter(|&at| {
            text[at..]
                .trim_start_matches([' ', '\t'])
                .starts_with("[[backend]]")
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let blanked = |range: std::ops::Range<usize>| -> String {
        text.char_indices()
            .map(|(i, c)| {
                if range.contains(&i) || c == '\n' {
                    c
                } else {
                    ' '
                }
            })
            .collect()
    };
    let mut backends = vec![BackendConfig::embedded()];
    let mut errors = Vec::new();
    let ends = starts
        .iter()
        .skip(1)
        .copied()
        .chain(std::iter::once(text.len()));
    // Whatever comes before the first entry (top-level keys) is checked on its own.
    let first = starts.first().copied().unwrap_or(text.len());
    if let Err(err) = parse_backends(&blanked(0..first), path) {
        errors.push(err);
    }
    for (start, end) in starts.iter().copied().zip(ends) {
        match parse_backends(&blanked(start..end), path) {
            Ok(parsed) => {
                // The embedded backend, then the entry.
                let Some(entry) = parsed.into_iter().nth(1) else {
                    continue;
                };
                if backends.iter().any(|b| b.name == entry.name) {
                    let at = key_offset(text, start, "name").unwrap_or(start);
                    errors.push(ConfigError::Invalid {
                        path: path.to_path_buf(),
                        line: line_of(text, at),
                        key: Some("name".into()),
                        message: format!("`{}` is configured twice", entry.name),
                    });
                } else {
                    backends.push(entry);
                }
            }
            Err(err) => errors.push(err),
        }
    }
    (backends, errors)
}

/// The embedded backend followed by those `text` configures, errors naming `path` (where the
/// text was read from), the line and the key.
pub fn parse_backends(text: &str, path: &Path) -> Result<Vec<BackendConfig>, ConfigError> {
    let invalid = |offset: usize, key: Option<String>, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: line_of(text, offset),
        key,
        message,
    };
    let file: BackendsFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        invalid(offset, key_at(text, offset), e.message().to_string())
    })?;
    let mut names = HashSet::new();
    let mut backends = vec![BackendConfig::embedded()];
    for entry in file.backend {
        let table = entry.span().start;
        let config = entry.into_inner();
        let problem = config.problem().or_else(|| {
            (!names.insert(config.name.clone()))
                .then(|| ("name", format!("`{}` is configured twice", config.name)))
        });
        if let Some((key, message)) = problem {
            let at = key_offset(text, table, key).unwrap_or(table);
            return Err(invalid(at, Some(key.to_string()), message));
        }
        backends.push(config);
    }
    Ok(backends)
}
