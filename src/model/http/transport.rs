//! Plumbing every protocol shares: the API key, retries, deadline, concurrency limit, size
//! bound, stream framing and error messages.

use std::future::Future;
use std::time::Duration;

use reqwest::{Response, StatusCode, Url};
use serde_json::Value;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::model::config::{BackendConfig, MAX_CONCURRENCY};
use crate::model::{BackendError, secret};

/// Answers larger than this are refused, so a runaway server cannot exhaust memory.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;
/// The longest wait before a retry, whatever Retry-After asks for.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// Wait before the first retry when the server does not say; doubles each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How much of an error answer goes into an error message.
const DETAIL_CHARS: usize = 300;

/// How a streamed answer is cut into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// Server-sent events: `data: {...}` lines, optionally ending with `data: [DONE]`.
    Sse,
    /// One JSON object per line.
    Ndjson,
}

/// One server: where it is, how to reach it and within which limits.
pub(super) struct Transport {
    backend: String,
    base: Url,
    client: reqwest::Client,
    api_key_env: Option<String>,
    deadline: Duration,
    retries: u32,
    limiter: Semaphore,
    /// The base URL's user info and query values, redacted from every error text.
    url_secrets: Vec<String>,
}

impl Transport {
    pub fn new(config: &BackendConfig) -> Result<Self, BackendError> {
        let config_error = |detail: String| BackendError::Config {
            backend: config.name.clone(),
            detail,
        };
        let base_url = config
            .base_url
            .as_deref()
            .ok_or_else(|| config_error("base_url is not set".into()))?;
        let base = Url::parse(base_url)
            .map_err(|e| config_error(format!("base_url is not a valid URL ({e})")))?;
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| config_error(format!("cannot set up HTTP: {}", cause(&e))))?;
        Ok(Transport {
            backend: config.name.clone(),
            client,
            api_key_env: config.api_key_env.clone(),
            deadline: Duration::from_secs(config.deadline_secs),
            retries: config.retries,
            // Clamped as well as checked on load: Semaphore::new panics above MAX_PERMITS.
            limiter: Semaphore::new(config.concurrency.clamp(1, MAX_CONCURRENCY)),
            url_secrets: secret::url_secrets(&base),
            base,
        })
    }

    /// `path` under the base URL, keeping the base's own path prefix and query. A base that
    /// ends in an API version (`http://host:8080/v1`, as Continue, Tabby and the OpenAI SDK
    /// write it) names where versioned paths live: a path starting with that version does not
    /// get it twice, and a server's own unversioned endpoints (llama.cpp's `/completion` and
    /// `/tokenize`, Ollama's `/api/...`) are found beside it, not under it.
    pub fn endpoint(&self, path: &str) -> Endpoint<'_> {
        let mut url = self.base.clone();
        let prefix = self.base.path().trim_end_matches('/');
        let is_version = |v: &str| {
            v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit())
        };
        let prefix = match prefix.rsplit_once('/') {
            Some((parent, last)) if is_version(last) => parent,
            _ => prefix,
        };
        url.set_path(&format!("{prefix}{path}"));
        let shown = secret::shown_url(url.as_str());
        Endpoint {
            transport: self,
            url,
            shown,
        }
    }

    /// The key, read from the environment now so that it is never stored.
    pub fn api_key(&self) -> Result<Option<String>, BackendError> {
        let Some(var) = &self.api_key_env else {
            return Ok(None);
        };
        std::env::var(var)
            .map(Some)
            .map_err(|_| BackendError::Config {
                backend: self.backend.clone(),
                detail: format!("the API key variable {var} is not set"),
            })
    }

    /// `text` without the API key or the base URL's user info and query values, in any form:
    /// what a server (or the network stack) says may quote the request back.
    fn redact(&self, text: &str) -> String {
        let text = super::redact(text, self.api_key().ok().flatten().as_deref());
        secret::redact_all(&text, &self.url_secrets)
    }
}

/// One URL of a server; its errors name the backend and the URL without secrets.
pub(super) struct Endpoint<'a> {
    transport: &'a Transport,
    url: Url,
    shown: String,
}

impl Endpoint<'_> {
    /// POST `body` and read one JSON answer.
    pub async fn json(&self, body: &Value) -> Result<Value, BackendError> {
        self.read_answer(Some(body)).await
    }

    /// GET the endpoint and read one JSON answer (a server's model list).
    pub async fn get_json(&self) -> Result<Value, BackendError> {
        self.read_answer(None).await
    }

    /// POST `body` (GET without one) and read one JSON answer.
    async fn read_answer(&self, body: Option<&Value>) -> Result<Value, BackendError> {
        self.within_deadline(async {
            let (mut response, _permit) = self.send(body).await?;
            let mut answer = Vec::new();
            while let Some(chunk) = self.next_chunk(&mut response, answer.len()).await? {
                answer.extend_from_slice(chunk.as_ref());
            }
            self.parse(&answer)
        })
        .await
    }

    /// POST `body` and hand each streamed event to `on_event`, which says whether it was the
    /// last; a stream that ends before that is truncated.
    pub async fn stream(
        &self,
        body: &Value,
        framing: Framing,
        mut on_event: impl FnMut(&Value) -> Result<bool, AnswerError> + Send,
    ) -> Result<(), BackendError> {
        self.within_deadline(async {
            let (mut response, _permit) = self.send(Some(body)).await?;
            let mut reader = StreamReader::new(framing);
            let mut read = 0;
            while let Some(chunk) = self.next_chunk(&mut response, read).await? {
                read += chunk.as_ref().len();
                let ended = reader.feed(chunk.as_ref(), &mut on_event);
                if ended.map_err(|d| self.malformed(d))? {
                    return Ok(());
                }
            }
            if reader
                .finish(&mut on_event)
                .map_err(|d| self.malformed(d))?
            {
                return Ok(());
            }
            Err(self.truncated("the connection closed before the end of the stream".into()))
        })
        .await
    }

    /// Parses JSON, treating an `error` object as the failure it reports.
    fn parse(&self, bytes: &[u8]) -> Result<Value, BackendError> {
        parse_answer(bytes).map_err(|d| self.malformed(d))
    }

    /// The next piece of the body, given how much was read before; enforces the size bound.
    async fn next_chunk(
        &self,
        response: &mut Response,
        read: usize,
    ) -> Result<Option<impl AsRef<[u8]>>, BackendError> {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| self.truncated(cause(&e)))?;
        match chunk {
            Some(chunk) if read + chunk.len() > MAX_ANSWER_BYTES => Err(self.too_large()),
            chunk => Ok(chunk),
        }
    }

    /// Sends (a POST of `body`, or a GET without one) with retries on 429 and 5xx (but 501);
    /// holds a concurrency permit while a request is open.
    async fn send(
        &self,
        body: Option<&Value>,
    ) -> Result<(Response, SemaphorePermit<'_>), BackendError> {
        let key = self.transport.api_key()?;
        let mut attempt = 0;
        loop {
            let permit = self
                .transport
                .limiter
                .acquire()
                .await
                .expect("the limiter is never closed");
            let mut request = match body {
                Some(body) => self.transport.client.post(self.url.clone()).json(body),
                None => self.transport.client.get(self.url.clone()),
            };
            if let Some(key) = &key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.map_err(|e| self.connect_error(&e))?;
            let status = response.status();
            if status.is_success() {
                return Ok((response, permit));
            }
            // 501 says the endpoint will never work (llama.cpp's /infill without FIM tokens):
            // asking again only delays the fallback.
            let retryable = status == StatusCode::TOO_MANY_REQUESTS
                || status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED;
            if !retryable || attempt >= self.transport.retries {
                return Err(self.status_error(response).await);
            }
            let wait = retry_wait(&response, attempt);
            drop((response, permit));
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn within_deadline<T>(
        &self,
        work: impl Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        tokio::time::timeout(self.transport.deadline, work)
            .await
            .unwrap_or_else(|_| {
                Err(BackendError::Deadline {
                    backend: self.transport.backend.clone(),
                    url: self.shown.clone(),
                    seconds: self.transport.deadline.as_secs(),
                })
            })
    }

    /// The error for an unsuccessful status, with what the server said (minus the key).
    async fn status_error(&self, mut response: Response) -> BackendError {
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            return BackendError::RateLimited {
                backend: self.transport.backend.clone(),
                url: self.shown.clone(),
            };
        }
        let mut answer = Vec::new();
        while let Ok(Some(chunk)) = self.next_chunk(&mut response, answer.len()).await {
            answer.extend_from_slice(chunk.as_ref());
        }
        let detail = self.transport.redact(&answer_detail(&answer));
        BackendError::Status {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
            status: status.as_u16(),
            // Shortened only now: a key across the cut would leave its start unredacted.
            detail: detail.chars().take(DETAIL_CHARS).collect(),
        }
    }

    fn connect_error(&self, error: &reqwest::Error) -> BackendError {
        BackendError::Connect {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
            detail: self.transport.redact(&cause(error)),
        }
    }

    pub fn malformed(&self, detail: AnswerError) -> BackendError {
        BackendError::Malformed {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
            detail: self.transport.redact(&detail.to_string()),
        }
    }

    fn truncated(&self, detail: String) -> BackendError {
        BackendError::TruncatedStream {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
            detail: self.transport.redact(&detail),
        }
    }

    fn too_large(&self) -> BackendError {
        BackendError::TooLarge {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
            limit: MAX_ANSWER_BYTES,
        }
    }

    pub fn empty(&self) -> BackendError {
        BackendError::EmptyChoices {
            backend: self.transport.backend.clone(),
            url: self.shown.clone(),
        }
    }
}

/// What is wrong with a server's answer or one of its streamed events: the detail of a
/// [`BackendError::Malformed`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// The answer is an `error` object: what it says.
    #[error("server error: {0}")]
    Server(String),
    /// A field the protocol needs is absent (its name, as the protocol's documentation
    /// writes it).
    #[error("no `{0}`")]
    Missing(&'static str),
    #[error("`{0}` is not text")]
    NotText(&'static str),
    #[error("no completions")]
    NoCompletions,
}

/// Parses an answer or one streamed event, treating an `error` object as the failure it
/// reports.
fn parse_answer(bytes: &[u8]) -> Result<Value, AnswerError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| AnswerError::InvalidJson(e.to_string()))?;
    match value.get("error") {
        Some(error) => Err(AnswerError::Server(error_text(error))),
        None => Ok(value),
    }
}

/// The half of reading a stream that needs no network: bytes in as they arrive, events out.
/// A line is only decoded once complete, so multi-byte characters split across chunks
/// survive.
pub(super) struct StreamReader {
    framing: Framing,
    pending: Vec<u8>,
}

impl StreamReader {
    pub(super) fn new(framing: Framing) -> StreamReader {
        StreamReader {
            framing,
            pending: Vec::new(),
        }
    }

    /// Adds a chunk and hands each event it completes to `on_event`, which says whether it
    /// was the last; true once the stream has ended.
    pub(super) fn feed(
        &mut self,
        chunk: &[u8],
        on_event: &mut impl FnMut(&Value) -> Result<bool, AnswerError>,
    ) -> Result<bool, AnswerError> {
        // Only the new chunk can hold a newline not yet read: scanning all that is pending
        // again would be quadratic in the length of a long line.
        let before = self.pending.len();
        self.pending.extend_from_slice(chunk);
        let Some(last) = chunk.iter().rposition(|&b| b == b'\n').map(|i| before + i) else {
            return Ok(false);
        };
        let rest = self.pending.split_off(last + 1);
        let complete = std::mem::replace(&mut self.pending, rest);
        for line in String::from_utf8_lossy(&complete).lines() {
            if self.line(line, on_event)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Reads what follows the last newline (an NDJSON stream need not end with one); true
    /// when that ended the stream.
    pub(super) fn finish(
        self,
        on_event: &mut impl FnMut(&Value) -> Result<bool, AnswerError>,
    ) -> Result<bool, AnswerError> {
        self.line(&String::from_utf8_lossy(&self.pending), on_event)
    }

    /// Handles one line; true when it ends the stream.
    fn line(
        &self,
        line: &str,
        on_event: &mut impl FnMut(&Value) -> Result<bool, AnswerError>,
    ) -> Result<bool, AnswerError> {
        let payload = match self.framing {
            Framing::Ndjson => line.trim(),
            // Other SSE fields (event:, id:, comments) carry nothing we use.
            Framing::Sse => line.strip_prefix("data:").map_or("", str::trim),
        };
        match payload {
            "" => Ok(false),
            "[DONE]" if self.framing == Framing::Sse => Ok(true),
            _ => on_event(&parse_answer(payload.as_bytes())?),
        }
    }
}

/// Retry-After in seconds where given, else exponential backoff; capped either way.
fn retry_wait(response: &Response, attempt: u32) -> Duration {
    let asked = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    asked
        .unwrap_or_else(|| FIRST_BACKOFF.saturating_mul(2u32.saturating_pow(attempt)))
        .min(MAX_RETRY_WAIT)
}

/// The innermost cause of an error: the OS or protocol failure, without the URL reqwest adds.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

/// What an error answer says: its `error` message where it is JSON, else its text.
fn answer_detail(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => value
            .get("error")
            .map_or_else(|| value.to_string(), error_text),
        Err(_) => text.trim().to_string(),
    }
}

/// The message of an `error` field, which servers send as a string or as `{message: ...}`.
pub(super) fn error_text(error: &Value) -> String {
    match error.get("message").unwrap_or(error) {
        Value::String(message) => message.clone(),
        other => other.to_string(),
    }
}
