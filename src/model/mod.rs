//! Completion backends: the embedded offline model and HTTP servers behind one trait.
//!
//! A request is a composed prompt (plus an optional suffix for fill-in-the-middle); a backend
//! returns one or more completions. Requests are futures: dropping one cancels it, which is how
//! the TUI abandons completions when the hole moves.

pub mod config;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "local-model")]
pub mod local;
pub mod ngram;
pub mod secret;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

/// RLPG's completion length (section 3.2).
pub const DEFAULT_MAX_TOKENS: usize = 24;

/// What to complete and how.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionRequest {
    pub prompt: String,
    /// Code after the hole, for backends that fill in the middle.
    pub suffix: Option<String>,
    pub max_tokens: usize,
    /// 0 means greedy.
    pub temperature: f32,
    pub seed: Option<u64>,
    /// Generation stops before any of these; RLPG stops at a newline.
    pub stop: Vec<String>,
    /// Number of samples wanted from this one prompt.
    pub n: usize,
    /// Repository path of the file being completed, so the embedded model can leave it out of
    /// its repository statistics (it must never see the answer). HTTP backends ignore it.
    pub current_file: Option<String>,
    /// The prompt is an instruction to answer as written, not code to continue: chat backends
    /// send it alone, without the completion instruction they wrap code in. Only for backends
    /// that [follow instructions](Backend::follows_instructions).
    pub instruction: bool,
}

impl CompletionRequest {
    /// The end of the prompt a subword tokenizer splits where no text it learned from does: the
    /// start of a word the hole cuts (`Illegal|ArgumentException`), with the spaces and tabs
    /// before it, or the spaces and tabs alone (a hole in a line's indentation, or after a
    /// space). Subword tokenizers attach whitespace to the word that follows and keep a word
    /// whole, so models answer `␣}` for `}` and `IllegalArgument` after `Illegal`. Completion
    /// tools move this fragment out of the prompt and expect the completion to start with it
    /// (token healing). Instructions are sent as written: they are prose, not a cut text.
    pub fn trailing_fragment(&self) -> &str {
        if self.instruction {
            return "";
        }
        let code = self.prompt.trim_end_matches(is_word_char);
        let code = code.trim_end_matches([' ', '\t']);
        &self.prompt[code.len()..]
    }

    /// The request with its [trailing fragment](CompletionRequest::trailing_fragment) moved
    /// out of the prompt, for backends with subword tokenizers; [`restore_fragment`] undoes it
    /// on the answer.
    pub fn without_trailing_fragment(&self) -> CompletionRequest {
        let fragment = self.trailing_fragment().len();
        CompletionRequest {
            prompt: self.prompt[..self.prompt.len() - fragment].to_string(),
            ..self.clone()
        }
    }

    /// A greedy single-line request, as in RLPG.
    pub fn single_line(prompt: String) -> Self {
        CompletionRequest {
            prompt,
            suffix: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: 0.0,
            seed: None,
            stop: vec!["\n".to_string()],
            n: 1,
            current_file: None,
            instruction: false,
        }
    }
}

/// One completion.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Completion {
    pub text: String,
    /// Wall time of the request that produced it.
    pub latency: Duration,
    /// The tokens of the prompt the model saw, where the backend cut the prompt to fit the
    /// model's context (a local model keeps the end, nearest the hole); `None` when the model
    /// saw it whole (or the backend cannot tell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_prompt_tokens: Option<usize>,
}

/// A piece of streamed text for completion `index` of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub index: usize,
    pub text: String,
}

impl Delta {
    /// No text: the backend has begun computing the request (it waited for its turn before).
    pub fn started() -> Delta {
        Delta {
            index: 0,
            text: String::new(),
        }
    }

    pub fn is_start(&self) -> bool {
        self.text.is_empty()
    }
}

/// How a backend's token counts relate to what the model really sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCounting {
    /// Counted with the model's own tokenizer: budgets are exact.
    Exact,
    /// Counted with a stand-in tokenizer: budgets are approximate.
    Approximate,
}

/// How much a server can take at once, as it says (llama.cpp's `/props`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ServerLimits {
    /// Requests it works on at once; more wait in its queue.
    pub slots: usize,
    /// Tokens each slot holds: prompt and completion together.
    pub context_per_slot: usize,
}

impl ServerLimits {
    /// What a user running `concurrency` requests of `budget` prompt tokens and
    /// `max_tokens` completion tokens at once should know: a line per limit they exceed.
    pub fn advice(
        &self,
        backend: &str,
        concurrency: usize,
        budget: usize,
        max_tokens: usize,
    ) -> Vec<String> {
        let mut advice = Vec::new();
        if concurrency > self.slots {
            advice.push(format!(
                "{backend}: the server works on {} request(s) at once and queues the rest; keyhole sends {} at a time (start llama-server with --parallel {concurrency} for more)",
                self.slots, self.slots
            ));
        }
        if budget + max_tokens > self.context_per_slot {
            advice.push(format!(
                "{backend}: each server slot holds {} tokens, less than the budget of {budget} plus {max_tokens} to generate, so prompts are composed within {} tokens; for the whole budget start llama-server with --ctx-size {} (the size is shared by its {} slot(s))",
                self.context_per_slot,
                self.context_per_slot.saturating_sub(max_tokens),
                (budget + max_tokens) * self.slots,
                self.slots
            ));
        }
        advice
    }
}

/// Everything that can go wrong talking to a backend. Messages name the backend and the URL
/// (never a key) and say what failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    #[error("{backend}: cannot connect to {url}: {detail}")]
    Connect {
        backend: String,
        url: String,
        detail: String,
    },
    #[error(
        "{backend}: no answer from {url} within {seconds} s (a slow server, such as llama-server on a CPU, may need a larger `deadline_secs` in backends.toml or a lower `concurrency`)"
    )]
    Deadline {
        backend: String,
        url: String,
        seconds: u64,
    },
    #[error("{backend}: {url} answered {status}: {detail}")]
    Status {
        backend: String,
        url: String,
        status: u16,
        detail: String,
    },
    #[error("{backend}: {url} is rate limiting (429) and retries ran out")]
    RateLimited { backend: String, url: String },
    #[error("{backend}: {url} sent a malformed answer: {detail}")]
    Malformed {
        backend: String,
        url: String,
        detail: String,
    },
    #[error("{backend}: the stream from {url} ended early: {detail}")]
    TruncatedStream {
        backend: String,
        url: String,
        detail: String,
    },
    #[error("{backend}: {url} returned no completions")]
    EmptyChoices { backend: String, url: String },
    #[error("{backend}: the answer from {url} exceeds {limit} bytes")]
    TooLarge {
        backend: String,
        url: String,
        limit: usize,
    },
    #[error("{backend}: {detail}")]
    Config { backend: String, detail: String },
    /// A local model file that cannot be loaded or run.
    #[error("{backend}: {}: {detail}", path.display())]
    LocalModel {
        backend: String,
        path: std::path::PathBuf,
        detail: String,
    },
}

impl BackendError {
    /// Whether no request to this backend can succeed until its configuration changes: the
    /// server refuses the key (401, 403, 407) or knows no such model or endpoint (404, 410), or
    /// the configuration itself is wrong (a key variable that is not set). Retrying, or sending
    /// other prompts, cannot help.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            BackendError::Status {
                status: 401 | 403 | 404 | 407 | 410,
                ..
            } | BackendError::Config { .. }
        )
    }
}

/// A completion backend.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The name the user configured (or "embedded").
    fn name(&self) -> &str;

    /// Whether prompt budgets counted for this backend are exact.
    fn counting(&self) -> TokenCounting;

    /// Whether the backend answers natural-language instructions (chat models); one that only
    /// continues text (the embedded n-gram model, plain completion endpoints) cannot, say,
    /// summarise code.
    fn follows_instructions(&self) -> bool {
        false
    }

    /// Whether requests wait for their turn at it (a local model reads one prompt at a time
    /// before the requests sent together decode as one batch): such a backend sends
    /// [`Delta::started`] when a request's turn comes, so that callers that show latencies
    /// tell the wait apart (other work, such as building retrieved candidates, may hold the
    /// model first).
    fn takes_turns(&self) -> bool {
        false
    }

    /// Complete `request.n` times. Streamed text, where the backend streams, goes to `deltas`
    /// as it arrives; the returned completions are the final texts.
    async fn complete(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError>;

    /// The name of keyhole's tokenizer that counts exactly as this backend's model does, where
    /// keyhole has one (the embedded model's code tokenizer, tiktoken for OpenAI models).
    fn tokenizer(&self) -> Option<&'static str> {
        None
    }

    /// Count tokens with the backend's own tokenizer, where it exposes one.
    async fn count_tokens(&self, _text: &str) -> Option<Result<usize, BackendError>> {
        None
    }

    /// The most prompt tokens (in the model's own count) the model takes with room left for
    /// the completion, where the backend knows its model's context (a local model, a llama.cpp
    /// server's slot): prompts are composed within it rather than cut by the model. `None`: no
    /// limit keyhole knows.
    async fn prompt_room(&self) -> Option<usize> {
        None
    }

    /// How much the backend's server takes at once, where it says (llama.cpp).
    async fn limits(&self) -> Option<Result<ServerLimits, BackendError>> {
        None
    }

    /// The models the backend's server says it serves, where it has a server to ask.
    async fn models(&self) -> Option<Result<Vec<String>, BackendError>> {
        None
    }

    /// What the backend changed about how it serves requests since it was built (a server
    /// that turned out to lack fill-in-the-middle, say), once each, for the user to read.
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The backend a config entry describes; the embedded model learns from `index`.
pub fn build_backend(
    entry: &config::BackendConfig,
    index: &Arc<crate::repo::RepoIndex>,
) -> Result<Box<dyn Backend>, BackendError> {
    match entry.kind {
        config::BackendKind::Embedded => {
            Ok(Box::new(ngram::EmbeddedModel::open(Arc::clone(index))))
        }
        #[cfg(feature = "local-model")]
        config::BackendKind::Local => Ok(Box::new(local::LocalBackend::open(entry)?)),
        #[cfg(feature = "http")]
        kind if kind.is_http() => http::build_http(entry),
        kind => Err(BackendError::Config {
            backend: entry.name.clone(),
            detail: format!(
                "`{}` backends need the `{}` feature, which this keyhole was built without",
                kind.name(),
                if kind.is_http() {
                    "http"
                } else {
                    "local-model"
                }
            ),
        }),
    }
}

/// Cut `text` before the first stop sequence, if any occurs.
pub fn apply_stop(text: &str, stop: &[String]) -> String {
    let end = stop
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
        .unwrap_or(text.len());
    text[..end].to_string()
}

/// Whether `c` continues an identifier or a number, so that a hole after it cuts a word.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The text a model wrote after a prompt whose trailing `fragment` was moved out of it, as it
/// continues the original prompt: the fragment the model wrote again belongs to the prompt,
/// not to the completion (with any leading spaces and tabs, where it wrote other ones). A
/// model that wrote another word than the fragment starts keeps its answer, blank taken off.
pub fn restore_fragment(text: &str, fragment: &str) -> String {
    if fragment.is_empty() {
        return text.to_string();
    }
    if let Some(rest) = text.strip_prefix(fragment) {
        return rest.to_string();
    }
    let word = fragment.trim_start_matches([' ', '\t']);
    let text = text.trim_start_matches([' ', '\t']);
    text.strip_prefix(word).unwrap_or(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_blank_is_what_the_prompt_ends_with_and_the_answer_repeats() {
        let request = CompletionRequest::single_line("    return x;\n\t  ".to_string());
        assert_eq!(request.trailing_fragment(), "\t  ");
        assert_eq!(
            request.without_trailing_fragment().prompt,
            "    return x;\n"
        );
        assert_eq!(restore_fragment("\t  }", "\t  "), "}");
        assert_eq!(restore_fragment("    }", "\t  "), "}", "other whitespace");
        assert_eq!(restore_fragment("}", "\t  "), "}", "none written again");
        assert_eq!(
            restore_fragment("  x", ""),
            "  x",
            "no fragment: the answer as written"
        );
    }

    #[test]
    fn a_word_the_hole_cuts_moves_out_with_the_blank_before_it() {
        let prompt = |text: &str| CompletionRequest::single_line(text.to_string());
        let request = prompt("    throw new Illegal");
        assert_eq!(request.trailing_fragment(), " Illegal");
        assert_eq!(request.without_trailing_fragment().prompt, "    throw new");
        let answer = " IllegalArgumentException(name);";
        assert_eq!(
            restore_fragment(answer, " Illegal"),
            "ArgumentException(name);"
        );
        assert_eq!(
            restore_fragment("IllegalStateException();", " Illegal"),
            "StateException();",
            "the word without its blank"
        );
        assert_eq!(
            restore_fragment(" RuntimeException();", " Illegal"),
            "RuntimeException();",
            "another word: a miss, kept as written"
        );
        assert_eq!(prompt("x.get").trailing_fragment(), "get");
        assert_eq!(
            prompt("x.get(").trailing_fragment(),
            "",
            "after punctuation"
        );
        assert_eq!(prompt("int i1").trailing_fragment(), " i1");
        assert_eq!(prompt("línea").trailing_fragment(), "línea");
    }
}
