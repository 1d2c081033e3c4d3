//! HTTP backends: OpenAI-compatible, Ollama and llama.cpp servers.
//!
//! One [`HttpBackend`] serves every protocol: a [`Protocol`] says where to send a request, what
//! to send and how to read the answer, and the shared [`transport`] does the rest (key,
//! retries, deadline, concurrency, size bound, stream framing).

mod llamacpp;
mod ollama;
mod openai;
mod transport;

use std::collections::BTreeMap;
use std::time::Instant;

use async_trait::async_trait;
use futures_util::future::try_join_all;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::config::{BackendConfig, BackendKind, DEFAULT_SYSTEM_PROMPT, DEFAULT_USER_TEMPLATE};
use super::{
    Backend, BackendError, Completion, CompletionRequest, Delta, TokenCounting, apply_stop,
};
use transport::{Framing, Transport};
pub use transport::{MAX_ANSWER_BYTES, MAX_RETRY_WAIT};

/// Text for completion `index` of one HTTP answer.
struct Piece {
    index: usize,
    text: String,
}

/// What differs between server protocols.
#[async_trait]
trait Protocol: Send + Sync {
    /// The endpoint for `request`.
    fn path(&self, request: &CompletionRequest) -> &'static str;
    /// The JSON body; `request.n` is already what this call asks for.
    fn body(&self, request: &CompletionRequest, stream: bool) -> Value;
    fn framing(&self) -> Framing;
    /// The texts of a whole (unstreamed) answer.
    fn answer(&self, answer: &Value) -> Result<Vec<Piece>, String>;
    /// The text pieces of one streamed event, and whether it ends the stream.
    fn event(&self, event: &Value) -> Result<(Vec<Piece>, bool), String>;

    fn counting(&self) -> TokenCounting {
        TokenCounting::Approximate
    }

    /// Whether the protocol talks to a chat model that follows instructions.
    fn follows_instructions(&self) -> bool {
        false
    }

    async fn count_tokens(
        &self,
        _transport: &Transport,
        _text: &str,
    ) -> Option<Result<usize, BackendError>> {
        None
    }
}

/// A completion server behind the [`Backend`] trait.
pub struct HttpBackend {
    config: BackendConfig,
    transport: Transport,
    protocol: Box<dyn Protocol>,
}

/// The backend for an HTTP entry of the config; the embedded and local kinds are built elsewhere.
pub fn build_http(config: &BackendConfig) -> Result<Box<dyn Backend>, BackendError> {
    let protocol: Box<dyn Protocol> = match config.kind {
        BackendKind::Embedded | BackendKind::Local => {
            return Err(config_error(config, "this kind is not an HTTP backend"));
        }
        BackendKind::OpenAi => Box::new(openai::OpenAi::completions(model(config)?)),
        BackendKind::OpenAiChat => {
            let system = config
                .system_prompt
                .as_deref()
                .unwrap_or(DEFAULT_SYSTEM_PROMPT);
            let user = config
                .user_template
                .as_deref()
                .unwrap_or(DEFAULT_USER_TEMPLATE);
            Box::new(openai::OpenAi::chat(model(config)?, system, user))
        }
        BackendKind::Ollama => Box::new(ollama::Ollama::new(model(config)?)),
        BackendKind::LlamaCpp => Box::new(llamacpp::LlamaCpp),
    };
    let transport = Transport::new(config)?;
    Ok(Box::new(HttpBackend {
        config: config.clone(),
        transport,
        protocol,
    }))
}

fn model(config: &BackendConfig) -> Result<String, BackendError> {
    config
        .model
        .clone()
        .ok_or_else(|| config_error(config, "model is not set"))
}

fn config_error(config: &BackendConfig, detail: &str) -> BackendError {
    BackendError::Config {
        backend: config.name.clone(),
        detail: detail.to_string(),
    }
}

#[async_trait]
impl Backend for HttpBackend {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn counting(&self) -> TokenCounting {
        self.protocol.counting()
    }

    fn follows_instructions(&self) -> bool {
        self.protocol.follows_instructions()
    }

    async fn complete(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let request = self.config.apply(request);
        let calls = calls(&request, self.config.supports_n());
        let answers = try_join_all(
            calls
                .iter()
                .map(|(first, call)| self.call(call, *first, deltas)),
        )
        .await?;
        Ok(answers.into_iter().flatten().collect())
    }

    async fn count_tokens(&self, text: &str) -> Option<Result<usize, BackendError>> {
        self.protocol.count_tokens(&self.transport, text).await
    }
}

impl HttpBackend {
    /// One HTTP request; its completions are numbered from `first` in the deltas.
    async fn call(
        &self,
        request: &CompletionRequest,
        first: usize,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let start = Instant::now();
        let endpoint = self.transport.endpoint(self.protocol.path(request));
        let body = self.protocol.body(request, deltas.is_some());
        let mut texts = Texts {
            texts: BTreeMap::new(),
            first,
            stop: &request.stop,
            deltas,
        };
        if deltas.is_some() {
            endpoint
                .stream(&body, self.protocol.framing(), |event| {
                    let (pieces, done) = self.protocol.event(event)?;
                    pieces.into_iter().for_each(|piece| texts.add(piece));
                    Ok(done)
                })
                .await?;
        } else {
            let answer = endpoint.json(&body).await?;
            let pieces = self
                .protocol
                .answer(&answer)
                .map_err(|d| endpoint.malformed(d))?;
            pieces.into_iter().for_each(|piece| texts.add(piece));
        }
        if texts.texts.is_empty() {
            return Err(endpoint.empty());
        }
        let latency = start.elapsed();
        Ok(texts
            .texts
            .into_values()
            .map(|(text, _)| Completion {
                text: apply_stop(&text, &request.stop),
                latency,
            })
            .collect())
    }
}

/// The requests that fetch `request.n` samples, with the index of each one's first sample:
/// one request where the server accepts `n`, else one per sample, run concurrently. Seeds are
/// offset per sample so that seeded samples still differ.
fn calls(request: &CompletionRequest, supports_n: bool) -> Vec<(usize, CompletionRequest)> {
    let n = request.n.max(1);
    if supports_n || n == 1 {
        return vec![(
            0,
            CompletionRequest {
                n,
                ..request.clone()
            },
        )];
    }
    (0..n)
        .map(|i| {
            let seed = request.seed.map(|s| s.wrapping_add(i as u64));
            (
                i,
                CompletionRequest {
                    n: 1,
                    seed,
                    ..request.clone()
                },
            )
        })
        .collect()
}

/// Completion texts by index, passed on as deltas up to the first stop sequence.
struct Texts<'a> {
    /// Text so far, and how many bytes of it went out as deltas.
    texts: BTreeMap<usize, (String, usize)>,
    first: usize,
    stop: &'a [String],
    deltas: Option<&'a UnboundedSender<Delta>>,
}

impl Texts<'_> {
    fn add(&mut self, piece: Piece) {
        let (text, sent) = self.texts.entry(piece.index).or_default();
        text.push_str(&piece.text);
        let Some(deltas) = self.deltas else { return };
        let visible = apply_stop(text, self.stop).len();
        if visible > *sent {
            // A closed receiver means nobody is listening any more; the final texts still count.
            let _ = deltas.send(Delta {
                index: self.first + piece.index,
                text: text[*sent..visible].to_string(),
            });
            *sent = visible;
        }
    }
}

/// Sets `key` where `value` is given: optional request fields are left out, not sent as null.
fn insert_some(object: &mut Value, key: &str, value: Option<impl Into<Value>>) {
    if let (Some(object), Some(value)) = (object.as_object_mut(), value) {
        object.insert(key.to_string(), value.into());
    }
}

/// The one completion in `answer[field]`, for servers without `n`.
fn single_text(answer: &Value, field: &str) -> Result<Vec<Piece>, String> {
    let text = answer
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no `{field}` text"))?;
    Ok(vec![Piece {
        index: 0,
        text: text.to_string(),
    }])
}
