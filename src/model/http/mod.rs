//! HTTP backends: OpenAI-compatible, Ollama and llama.cpp servers.
//!
//! One [`HttpBackend`] serves every protocol: a `Protocol` says where to send a request, what
//! to send and how to read the answer, and the shared `transport` does the rest (key,
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
    Backend, BackendError, Completion, CompletionRequest, Delta, ServerLimits, TokenCounting,
    apply_stop, secret,
};
pub use transport::{AnswerError, MAX_ANSWER_BYTES};
use transport::{Framing, StreamReader, Transport};

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
    fn answer(&self, answer: &Value) -> Result<Vec<Piece>, AnswerError>;
    /// The text pieces of one streamed event, and whether it ends the stream.
    fn event(&self, event: &Value) -> Result<(Vec<Piece>, bool), AnswerError>;

    /// Where the server lists its models, and the names in that list.
    fn models_path(&self) -> &'static str {
        "/v1/models"
    }

    fn model_names(&self, answer: &Value) -> Vec<String> {
        names_at(answer, "data", "id")
    }

    /// A whole answer to `request` as the code it holds, before stop sequences apply.
    fn clean(&self, text: String, _request: &CompletionRequest) -> String {
        text
    }

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

    /// How much the server takes at once, where the protocol can ask.
    async fn limits(&self, _transport: &Transport) -> Option<Result<ServerLimits, BackendError>> {
        None
    }
}

/// A completion server behind the [`Backend`] trait.
pub struct HttpBackend {
    config: BackendConfig,
    transport: Transport,
    protocol: Box<dyn Protocol>,
    /// Set once the server refused a fill-in-the-middle request ([`refuses_suffix`]; llama.cpp's
    /// `/infill` for a model without FIM tokens): requests go left to right from then on.
    no_infill: std::sync::OnceLock<String>,
    /// What the server said of its limits, asked once: every prompt is composed within them.
    limits: tokio::sync::OnceCell<Option<Result<ServerLimits, BackendError>>>,
}

/// The backend for an HTTP entry of the config; the embedded and local kinds are built elsewhere.
pub fn build_http(config: &BackendConfig) -> Result<Box<dyn Backend>, BackendError> {
    let protocol = protocol(config)?;
    let transport = Transport::new(config)?;
    Ok(Box::new(HttpBackend {
        config: config.clone(),
        transport,
        protocol,
        no_infill: std::sync::OnceLock::new(),
        limits: tokio::sync::OnceCell::new(),
    }))
}

/// Why [`read_stream`] read no texts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// `config` is not an HTTP backend's.
    #[error(transparent)]
    Config(#[from] BackendError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

/// The texts of a streamed answer as the protocol of `config` reads them, the body arriving
/// in `chunks`, or why it is malformed: the part of streaming that needs no server (the
/// fuzz target drives it). A stream that stops without its end gives what came.
pub fn read_stream(config: &BackendConfig, chunks: &[&[u8]]) -> Result<Vec<String>, StreamError> {
    let protocol = protocol(config)?;
    let mut reader = StreamReader::new(protocol.framing());
    let mut texts: BTreeMap<usize, String> = BTreeMap::new();
    let mut on_event = |event: &Value| {
        let (pieces, done) = protocol.event(event)?;
        for piece in pieces {
            texts.entry(piece.index).or_default().push_str(&piece.text);
        }
        Ok(done)
    };
    let mut ended = false;
    for chunk in chunks {
        ended = reader.feed(chunk, &mut on_event)?;
        if ended {
            break;
        }
    }
    if !ended {
        reader.finish(&mut on_event)?;
    }
    Ok(texts.into_values().collect())
}

/// How the server of `config` is spoken to.
fn protocol(config: &BackendConfig) -> Result<Box<dyn Protocol>, BackendError> {
    Ok(match config.kind {
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
    })
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

    fn tokenizer(&self) -> Option<&'static str> {
        let model = self.config.model.as_deref()?;
        crate::token::TokenizerKind::for_model(model).map(|kind| kind.tokenizer().name())
    }

    async fn complete(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let (mut request, fragment) = self.config.prepare(request);
        if self.no_infill.get().is_some() {
            request.suffix = None;
        }
        let completions = match self.complete_all(&request, deltas).await {
            Err(BackendError::Status { status, detail, .. })
                if request.suffix.is_some() && refuses_suffix(status, &detail) =>
            {
                let _ = self.no_infill.set(format!(
                    "{}: the server does not fill in the middle (it answered {status}); prompts are completed left to right",
                    self.config.name
                ));
                request.suffix = None;
                self.complete_all(&request, deltas).await
            }
            result => result,
        }?;
        Ok(completions
            .into_iter()
            .map(|c| Completion {
                model_prompt_tokens: None,
                text: super::restore_fragment(&c.text, &fragment),
                ..c
            })
            .collect())
    }

    async fn count_tokens(&self, text: &str) -> Option<Result<usize, BackendError>> {
        self.protocol.count_tokens(&self.transport, text).await
    }

    fn notices(&self) -> Vec<String> {
        self.no_infill.get().cloned().into_iter().collect()
    }

    async fn limits(&self) -> Option<Result<ServerLimits, BackendError>> {
        let ask = || self.protocol.limits(&self.transport);
        self.limits.get_or_init(ask).await.clone()
    }

    /// A server slot's context less the completion's tokens (llama.cpp's `n_ctx`): a longer
    /// prompt would be cut by the server, unseen. No room is known where the server says
    /// nothing of its context, or could not be asked.
    async fn prompt_room(&self) -> Option<usize> {
        let limits = self.limits().await?.ok()?;
        let max_tokens = self.config.max_tokens.unwrap_or(super::DEFAULT_MAX_TOKENS);
        Some(limits.context_per_slot.saturating_sub(max_tokens))
    }

    async fn models(&self) -> Option<Result<Vec<String>, BackendError>> {
        let endpoint = self.transport.endpoint(self.protocol.models_path());
        let answer = endpoint.get_json().await;
        Some(answer.map(|a| self.protocol.model_names(&a)))
    }
}

/// Whether an error answer to a fill-in-the-middle request says that the server cannot fill in
/// the middle: llama.cpp's 501 for a model without FIM tokens, or a 400 that names the suffix
/// (vLLM's `/v1/completions` takes none: "suffix is not currently supported").
fn refuses_suffix(status: u16, detail: &str) -> bool {
    status == 501 || status == 400 && detail.contains("suffix")
}

/// The message of an `error` field, which servers send as a string or as `{message: ...}`.
pub fn error_message(error: &Value) -> String {
    transport::error_text(error)
}

/// `answer[list][*][field]`, the strings of it: a server's model names.
fn names_at(answer: &Value, list: &str, field: &str) -> Vec<String> {
    let entries = answer.get(list).and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter_map(|m| m.get(field).and_then(Value::as_str).map(str::to_string))
        .collect()
}

impl HttpBackend {
    /// Every call that `request` needs, concurrently.
    async fn complete_all(
        &self,
        request: &CompletionRequest,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let calls = calls(request, self.config.supports_n());
        let answers = try_join_all(
            calls
                .iter()
                .map(|(first, call)| self.call(call, *first, deltas)),
        )
        .await?;
        Ok(answers.into_iter().flatten().collect())
    }

    /// One HTTP request; its completions are numbered from `first` in the deltas.
    async fn call(
        &self,
        request: &CompletionRequest,
        first: usize,
        deltas: Option<&UnboundedSender<Delta>>,
    ) -> Result<Vec<Completion>, BackendError> {
        let start = Instant::now();
        let endpoint = self.transport.endpoint(self.protocol.path(request));
        // Read for this call only, to keep it out of completions (see `Texts`).
        let key = self.transport.api_key()?;
        let body = self.protocol.body(request, deltas.is_some());
        let mut texts = Texts {
            texts: BTreeMap::new(),
            first,
            stop: &request.stop,
            deltas,
            key: key.as_deref(),
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
                model_prompt_tokens: None,
                text: finish(self.protocol.as_ref(), text, request, key.as_deref()),
                latency,
            })
            .collect())
    }
}

/// An answer's text as the code it holds: cleaned, cut at the first stop sequence, and without
/// the key. A model may answer with the key (it may be in the training data): it must not reach
/// the screen, label files or the feedback log.
fn finish(
    protocol: &dyn Protocol,
    text: String,
    request: &CompletionRequest,
    key: Option<&str>,
) -> String {
    redact(
        &apply_stop(&protocol.clean(text, request), &request.stop),
        key,
    )
}

/// Requests and answers of an OpenAI-style backend as batch files hold them (OpenAI's Batch
/// API, vLLM's `run_batch`): the endpoint and body a request would be sent as, and the texts
/// of an answer's body as the backend would have read them.
pub struct BatchCodec {
    config: BackendConfig,
    protocol: Box<dyn Protocol>,
    transport: Transport,
}

impl BatchCodec {
    /// The codec of `config`, an `openai` or `openai_chat` entry (the kinds the batch formats
    /// speak).
    pub fn new(config: &BackendConfig) -> Result<BatchCodec, BackendError> {
        if !matches!(config.kind, BackendKind::OpenAi | BackendKind::OpenAiChat) {
            return Err(config_error(
                config,
                "batch files are OpenAI-style requests: use a backend of kind openai or openai_chat",
            ));
        }
        Ok(BatchCodec {
            config: config.clone(),
            protocol: protocol(config)?,
            transport: Transport::new(config)?,
        })
    }

    /// The endpoint (`/v1/completions` or `/v1/chat/completions`) and the body `request` is
    /// sent with, the entry's generation settings applied; one completion, unstreamed, and
    /// without its suffix when the engine has refused one (`left_to_right`).
    pub fn request(
        &self,
        request: &CompletionRequest,
        left_to_right: bool,
    ) -> (&'static str, Value) {
        let mut request = CompletionRequest {
            n: 1,
            ..self.config.prepare(request).0
        };
        if left_to_right {
            request.suffix = None;
        }
        (
            self.protocol.path(&request),
            self.protocol.body(&request, false),
        )
    }

    /// Whether an error answer (`status`, what it says) refuses fill-in-the-middle requests,
    /// as the backend reads it online.
    pub fn refuses_suffix(&self, status: u16, detail: &str) -> bool {
        refuses_suffix(status, detail)
    }

    /// The raw texts of an answer's body, in choice order, or why it holds none.
    pub fn texts(&self, body: &Value) -> Result<Vec<String>, AnswerError> {
        let mut pieces = self.protocol.answer(body)?;
        if pieces.is_empty() {
            return Err(AnswerError::NoCompletions);
        }
        pieces.sort_by_key(|p| p.index);
        Ok(pieces.into_iter().map(|p| p.text).collect())
    }

    /// A raw text of an answer to `request` as the backend would have returned it.
    pub fn finish(&self, text: &str, request: &CompletionRequest) -> String {
        let (sent, fragment) = self.config.prepare(request);
        // Where the key's variable is not set here, no key can be redacted.
        let key = self.transport.api_key().ok().flatten();
        let text = finish(
            self.protocol.as_ref(),
            text.to_string(),
            &sent,
            key.as_deref(),
        );
        super::restore_fragment(&text, &fragment)
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

/// Completion texts by index, passed on as deltas up to the first stop sequence, with the API
/// key redacted.
struct Texts<'a> {
    /// Text so far, and how many bytes of its redacted form went out as deltas.
    texts: BTreeMap<usize, (String, usize)>,
    first: usize,
    stop: &'a [String],
    deltas: Option<&'a UnboundedSender<Delta>>,
    /// The API key, redacted from the texts.
    key: Option<&'a str>,
}

impl Texts<'_> {
    fn add(&mut self, piece: Piece) {
        let (text, sent) = self.texts.entry(piece.index).or_default();
        text.push_str(&piece.text);
        let Some(deltas) = self.deltas else { return };
        let visible = apply_stop(text, self.stop);
        // A tail that may be the start of the key waits for the text that decides it.
        let settled = match self.key {
            Some(key) => &visible[..secret::settled_len(&visible, key)],
            None => &visible,
        };
        let shown = redact(settled, self.key);
        if let Some(new) = shown.get(*sent..).filter(|new| !new.is_empty()) {
            // A closed receiver means nobody is listening any more; the final texts still count.
            let _ = deltas.send(Delta {
                index: self.first + piece.index,
                text: new.to_string(),
            });
            *sent = shown.len();
        }
    }
}

/// `text` without `key` in any form (see [`secret::redact_key`]).
pub(super) fn redact(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => secret::redact_key(text, key),
        None => text.to_string(),
    }
}

/// Sets `key` where `value` is given: optional request fields are left out, not sent as null.
fn insert_some(object: &mut Value, key: &str, value: Option<impl Into<Value>>) {
    if let (Some(object), Some(value)) = (object.as_object_mut(), value) {
        object.insert(key.to_string(), value.into());
    }
}

/// The one completion in `answer[field]`, for servers without `n`.
fn single_text(answer: &Value, field: &'static str) -> Result<Vec<Piece>, AnswerError> {
    let text = answer
        .get(field)
        .and_then(Value::as_str)
        .ok_or(AnswerError::Missing(field))?;
    Ok(vec![Piece {
        index: 0,
        text: text.to_string(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-Kh7Rt2Lq9Zw4";

    /// What the deltas show, piece by piece, and the final text.
    fn stream(pieces: &[&str]) -> (Vec<String>, String) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = vec!["\n".to_string()];
        let mut texts = Texts {
            texts: BTreeMap::new(),
            first: 0,
            stop: &stop,
            deltas: Some(&tx),
            key: Some(KEY),
        };
        for piece in pieces {
            texts.add(Piece {
                index: 0,
                text: piece.to_string(),
            });
        }
        let mut shown = Vec::new();
        while let Ok(delta) = rx.try_recv() {
            shown.push(delta.text);
        }
        let (text, _) = texts.texts.remove(&0).unwrap();
        (shown, redact(&apply_stop(&text, &stop), Some(KEY)))
    }

    #[test]
    fn a_key_streamed_in_pieces_never_reaches_the_deltas() {
        let lower = KEY.to_lowercase();
        let (shown, last) = stream(&[
            "let k = \"sk-",
            "Kh7Rt",
            "2Lq9Zw4\"; ",
            &lower[..6],
            &lower[6..],
            ";\n",
        ]);
        assert_eq!(shown.concat(), "let k = \"[redacted]\"; [redacted];");
        assert_eq!(last, "let k = \"[redacted]\"; [redacted];");
        // Text that turns out not to be the key is shown once it is clear.
        let (shown, _) = stream(&["a sk-K", "x b"]);
        assert_eq!(shown, ["a ", "sk-Kx b"]);
    }
}
