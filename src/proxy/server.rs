//! The proxy's HTTP server: every request goes to the server as it came and its answer streams
//! back as it comes (server-sent events and NDJSON included, status and headers unchanged); a
//! client that hangs up cancels the server's request with it. What each completion request sent
//! and got back is recorded ([`super::RecordStore`]), however it ends, credentials redacted.
//! Only the machine's own programs are served ([`Access`]), and no client can hold the proxy's
//! time or memory for long ([`Bounds`]): a request body streams to the server, only its start
//! kept for the record.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderName, HeaderValue, ORIGIN, USER_AGENT,
};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::arms::Arm;
use super::judging::Judging;
use super::redact::redact_query;
use super::{
    Composition, ContextSource, Exchange, RecordStore, fim_shape, read_answer, read_request,
    rewrite,
};
use crate::model::secret;

/// The body of the proxy's answers.
type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The server requests go to.
pub struct Upstream {
    /// Its root: a request for `/v1/completions` goes to this URL's path + `/v1/completions`.
    pub base: url::Url,
    /// Sent as a bearer token where the client sends no Authorization of its own.
    pub api_key: Option<String>,
}

impl Upstream {
    /// The URL a request for `endpoint` (path and query) goes to.
    fn url(&self, endpoint: &str) -> String {
        let mut base = self.base.clone();
        base.set_query(None);
        format!("{}{endpoint}", base.as_str().trim_end_matches('/'))
    }

    /// Secrets that must not reach the record or a message: the key and the URL's own.
    fn secrets(&self) -> Vec<String> {
        let mut secrets = secret::url_secrets(&self.base);
        secrets.extend(self.api_key.clone());
        secrets
    }
}

/// The proxy's HTTP client could not be made (no TLS roots, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot make an HTTP client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// Who may use the proxy: only programs of the machine it runs on, unless its user says
/// otherwise. A web page in a browser can send requests to a local server too, and would spend
/// the backend's key: the browser names the page in `Origin`, and names the page's own host in
/// `Host` when DNS rebinding points that host at this machine.
#[derive(Clone, Debug)]
pub struct Access {
    /// Where the proxy listens: a request's `Host` must name this address or `localhost`.
    pub listen: SocketAddr,
    /// The browser origins served (`http://localhost:3000`); a request from any other is
    /// refused.
    pub allowed_origins: Vec<String>,
}

impl Access {
    /// Why `headers` are refused, if they are.
    fn refusal(&self, headers: &hyper::HeaderMap) -> Option<String> {
        if let Some(host) = headers.get(HOST)
            && !self.serves_host(host.as_bytes())
        {
            let host = String::from_utf8_lossy(host.as_bytes());
            return Some(format!(
                "refused: Host {host} is not this proxy's address nor localhost"
            ));
        }
        let origin = headers.get(ORIGIN)?;
        let origin = String::from_utf8_lossy(origin.as_bytes());
        let allowed = self
            .allowed_origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/') == origin.trim_end_matches('/'));
        (!allowed).then(|| {
            format!(
                "refused: a web page's request (Origin {origin}); --allow-origin {origin} serves it"
            )
        })
    }

    /// Whether `host` (a Host header: a name or an address, maybe a port) names the proxy.
    fn serves_host(&self, host: &[u8]) -> bool {
        let Ok(host) = std::str::from_utf8(host) else {
            return false;
        };
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let Ok(address) = name.parse::<std::net::IpAddr>() else {
            // Any other name may be a page's, pointed here by DNS rebinding.
            return false;
        };
        let listening = self.listen.ip();
        listening.is_unspecified()
            || address == listening
            || (listening.is_loopback() && address.is_loopback())
    }
}

/// How long and how much a client may take: generous enough that an editor plugin never meets
/// them, small enough that a slow or hostile client cannot hold the proxy.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// A request's headers must come within this, counted from the connection's opening or
    /// the end of its previous request (so an idle kept-alive connection closes after it too).
    pub header_timeout: Duration,
    /// A request's body must come within this of its headers.
    pub body_timeout: Duration,
    /// A client that takes nothing of its answer for this long is cut off.
    pub idle_timeout: Duration,
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(300),
            max_connections: 256,
        }
    }
}

/// `--compose`: where keyhole's contexts come from, how long a request may wait for one, and
/// the A/B between keyhole's prompt and the plugin's.
pub struct Compose {
    pub source: Arc<dyn ContextSource>,
    /// Counted from the request's arrival; past it the request goes as the plugin sent it.
    pub deadline: Duration,
    /// The share (0..=1) of the requests keyhole composes for that get keyhole's prompt (its
    /// arm of the A/B); the rest get the plugin's, after the same wait.
    pub share: f64,
    /// Seeds the draws of the arms.
    pub seed: u64,
    /// The repository composed in, as the record names it.
    pub repo: String,
}

/// Contexts chosen at once: a choice that outlives its deadline still runs to its end, and
/// requests past this many go as sent rather than pile up behind them.
const COMPOSING_AT_ONCE: usize = 2;

/// The proxy: one upstream, one HTTP client (its connections kept alive), an optional record.
pub struct Proxy {
    upstream: Upstream,
    client: reqwest::Client,
    log: Option<Arc<RecordStore>>,
    access: Access,
    bounds: Bounds,
    /// The most of a request's body, and of its answer, kept for the record.
    kept_bytes: usize,
    compose: Option<Compose>,
    composing: Arc<Semaphore>,
    /// Draws each request's arm of the A/B.
    arms: std::sync::Mutex<rand_chacha::ChaCha8Rng>,
    /// The completions in an arm waiting for their outcome (with `--compose` and a record).
    judging: Option<Arc<Judging>>,
}

impl Proxy {
    pub fn new(
        upstream: Upstream,
        log: Option<RecordStore>,
        access: Access,
        bounds: Bounds,
    ) -> Result<Proxy, ClientError> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        // Escaped for the record, a body may grow several times: both fit one exchange's cap.
        let kept_bytes = log.as_ref().map_or(MAX_KEPT_BYTES, |log| {
            MAX_KEPT_BYTES.min(usize::try_from(log.exchange_cap() / 16).unwrap_or(usize::MAX))
        });
        Ok(Proxy {
            upstream,
            client,
            log: log.map(Arc::new),
            access,
            bounds,
            kept_bytes,
            compose: None,
            composing: Arc::new(Semaphore::new(COMPOSING_AT_ONCE)),
            arms: std::sync::Mutex::new(rand::SeedableRng::seed_from_u64(0)),
            judging: None,
        })
    }

    /// The proxy sends keyhole's context in place of the plugin's where it can (`--compose`),
    /// on `compose.share` of those requests, and judges what became of each completion.
    pub fn composing(self, compose: Compose) -> Proxy {
        let judging = self
            .log
            .as_ref()
            .map(|_| Arc::new(Judging::new(compose.source.clone())));
        Proxy {
            arms: std::sync::Mutex::new(rand::SeedableRng::seed_from_u64(compose.seed)),
            compose: Some(compose),
            judging,
            ..self
        }
    }

    /// The arm of the A/B the next request keyhole can compose for is in.
    fn draw_arm(&self, share: f64) -> Arm {
        let mut arms = self.arms.lock().unwrap_or_else(|e| e.into_inner());
        match rand::Rng::random::<f64>(&mut *arms) < share {
            true => Arm::Keyhole,
            false => Arm::Plugin,
        }
    }

    /// Answer every connection `listener` accepts, until the task is dropped; no more than
    /// [`Bounds::max_connections`] at once.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let connections = Arc::new(Semaphore::new(self.bounds.max_connections.max(1)));
        loop {
            // Taken before accepting: a connection over the cap waits in the listen queue.
            let Ok(permit) = connections.clone().acquire_owned().await else {
                return;
            };
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: wait, and go on serving.
                Err(err) => {
                    tracing::warn!(%err, "proxy: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let proxy = self.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(|request| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, Infallible>(proxy.forward(request, peer).await) }
                });
                let io = WriteDeadline::new(stream, proxy.bounds.idle_timeout);
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(proxy.bounds.header_timeout)
                    .serve_connection(TokioIo::new(io), service);
                if let Err(err) = connection.await {
                    tracing::debug!(%err, "proxy: connection ended");
                }
            });
        }
    }

    /// What must not be recorded or shown: the upstream's key and URL credentials, and the
    /// credentials the client sent (a server may echo them in an error).
    fn secrets_of(&self, headers: &hyper::HeaderMap) -> Vec<String> {
        let mut secrets = self.upstream.secrets();
        let credentials = CREDENTIAL_HEADERS
            .iter()
            .flat_map(|name| headers.get_all(*name));
        for value in credentials {
            if let Ok(value) = value.to_str() {
                let credential = value.split_once(' ').map_or(value, |(_, c)| c).trim();
                if credential.len() >= secret::MIN_URL_SECRET {
                    secrets.push(credential.to_string());
                }
            }
        }
        secrets
    }

    /// The exchange as far as a request's head tells it, to be recorded when it ends however
    /// it ends (dropped unfinished: the client hung up).
    fn pending(
        &self,
        parts: &hyper::http::request::Parts,
        endpoint: &str,
        peer: SocketAddr,
    ) -> Pending {
        let exchange = Exchange {
            at: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            client: peer.to_string(),
            agent: parts
                .headers
                .get(USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(|agent| crate::text::excerpt(agent, 80)),
            method: parts.method.to_string(),
            endpoint: redact_query(endpoint),
            upstream: secret::shown_url(self.upstream.base.as_str()),
            ..Exchange::default()
        };
        Pending {
            exchange,
            started: Instant::now(),
            log: self.log.clone(),
            judging: self.judging.clone(),
            request: Vec::new(),
            request_rest: Arc::default(),
            content_type: String::new(),
            answer: Vec::new(),
            kept_bytes: self.kept_bytes,
            secrets: self.secrets_of(&parts.headers),
        }
    }

    /// Forward one request and stream its answer back, recording the exchange.
    async fn forward(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
        let arrived = tokio::time::Instant::now();
        let (parts, mut body) = request.into_parts();
        let endpoint = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let mut pending = self.pending(&parts, &endpoint, peer);
        if let Some(refusal) = self.access.refusal(&parts.headers) {
            pending.exchange.status = StatusCode::FORBIDDEN.as_u16();
            pending.exchange.refused = true;
            pending.exchange.error = Some(refusal.clone());
            pending.finish(false);
            return plain(StatusCode::FORBIDDEN, format!("keyhole proxy: {refusal}"));
        }
        // The body's start, up to what the record keeps, is read here; the rest streams to
        // the server as it comes, kept by no one.
        let deadline = tokio::time::Instant::now() + self.bounds.body_timeout;
        let mut head = Vec::new();
        let mut ended = false;
        while !ended && pending.request.len() < self.kept_bytes {
            match next_data(&mut body, deadline).await {
                Ok(Some(data)) => {
                    pending.request.extend_from_slice(&data);
                    head.push(data);
                }
                Ok(None) => ended = true,
                Err(why) => {
                    let message = format!("keyhole proxy: cannot read the request: {why}");
                    pending.exchange.status = StatusCode::BAD_REQUEST.as_u16();
                    pending.exchange.error = Some(message.clone());
                    pending.finish(false);
                    return plain(StatusCode::BAD_REQUEST, message);
                }
            }
        }
        let outgoing = match (ended, &self.compose) {
            (true, Some(compose)) => {
                let (body, composition) = self.compose(compose, head.concat(), arrived).await;
                pending.exchange.composition = Some(composition);
                reqwest::Body::from(body)
            }
            (true, None) => reqwest::Body::from(head.concat()),
            (false, compose) => {
                if compose.is_some() {
                    pending.exchange.composition = Some(Composition::forwarded(
                        "the request is larger than the proxy reads before sending it",
                        0.0,
                    ));
                }
                let rest = rest_of(body, deadline, pending.request_rest.clone());
                reqwest::Body::wrap_stream(
                    futures_util::stream::iter(head.into_iter().map(Ok)).chain(rest),
                )
            }
        };
        let mut upstream = self
            .client
            .request(parts.method.clone(), self.upstream.url(&endpoint))
            .body(outgoing);
        // A streamed body keeps the length the client gave: not every server takes chunks.
        if !ended && let Some(length) = parts.headers.get(CONTENT_LENGTH) {
            upstream = upstream.header(CONTENT_LENGTH, length);
        }
        // Twinny sends an empty Authorization and llama.vim `Bearer` alone when they have no
        // key: that is no credential, and the upstream's key, where the proxy has one, goes in
        // its place.
        let has_key = self.upstream.api_key.is_some();
        let credential = |(name, value): &(&HeaderName, &HeaderValue)| {
            !has_key || *name != AUTHORIZATION || carries_credential(value)
        };
        let headers = parts.headers.iter().filter(|(n, _)| passes(n));
        let mut authorized = false;
        for (name, value) in headers.filter(credential) {
            authorized |= name == AUTHORIZATION;
            upstream = upstream.header(name, value);
        }
        if let Some(key) = &self.upstream.api_key
            && !authorized
        {
            upstream = upstream.bearer_auth(key);
        }
        let answer = match upstream.send().await {
            Ok(answer) => answer,
            Err(err) => {
                let message = secret::redact_all(
                    &format!(
                        "keyhole proxy: cannot reach {}: {}",
                        pending.exchange.upstream,
                        why(&err)
                    ),
                    &self.upstream.secrets(),
                );
                pending.exchange.status = StatusCode::BAD_GATEWAY.as_u16();
                pending.exchange.error = Some(message.clone());
                pending.finish(false);
                return plain(StatusCode::BAD_GATEWAY, message);
            }
        };
        pending.exchange.status = answer.status().as_u16();
        pending.content_type = answer
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers().iter().filter(|(n, _)| passes(n)) {
            response = response.header(name, value);
        }
        let recorded = Recorded {
            inner: answer.bytes_stream().boxed(),
            pending: Some(pending),
        };
        let body = StreamBody::new(recorded.map(|chunk| chunk.map(Frame::data)));
        response
            .body(BodyExt::boxed_unsync(body))
            .unwrap_or_else(|err| plain(StatusCode::BAD_GATEWAY, err.to_string()))
    }
}

impl Proxy {
    /// The body to send for `body` (a whole request that came at `arrived`): keyhole's
    /// context in it where the source chooses one by the deadline, else `body` as it came;
    /// and what the record says of it.
    async fn compose(
        &self,
        compose: &Compose,
        body: Vec<u8>,
        arrived: tokio::time::Instant,
    ) -> (Vec<u8>, Composition) {
        let started = Instant::now();
        let sent = read_request(&body, false);
        let shape = match fim_shape(&sent) {
            Ok(shape) => shape,
            Err(why) => {
                let why = why.to_string();
                return (body, Composition::forwarded(why, elapsed_ms(started)));
            }
        };
        // Drawn before composing, so whether keyhole can compose for a request (in time)
        // decides alike for both arms: a request it cannot serve is in neither.
        let arm = self.draw_arm(compose.share);
        let deadline = arrived + compose.deadline;
        let deadline_ms = compose.deadline.as_millis();
        if tokio::time::Instant::now() >= deadline {
            let why = format!("past the deadline ({deadline_ms} ms) before composing began");
            return (body, Composition::forwarded(why, elapsed_ms(started)));
        }
        let Ok(permit) = self.composing.clone().try_acquire_owned() else {
            let why = "keyhole was still composing for earlier requests";
            return (body, Composition::forwarded(why, elapsed_ms(started)));
        };
        let source = compose.source.clone();
        let by = deadline.into_std();
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            source.choose(&sent, by)
        });
        let chosen = match tokio::time::timeout_at(deadline, job).await {
            Ok(Ok(Ok(chosen))) => chosen,
            Ok(Ok(Err(why))) => {
                let why = why.to_string();
                return (body, Composition::forwarded(why, elapsed_ms(started)));
            }
            Ok(Err(failed)) => {
                let why = format!("composing failed: {failed}");
                return (body, Composition::forwarded(why, elapsed_ms(started)));
            }
            Err(_) => {
                let why = format!("past the deadline ({deadline_ms} ms) while composing");
                return (body, Composition::forwarded(why, elapsed_ms(started)));
            }
        };
        let in_repo = |composition: Composition| Composition {
            repo: Some(compose.repo.clone()),
            ..composition
        };
        if arm == Arm::Plugin {
            let composition = Composition::plugins_arm(chosen, elapsed_ms(started));
            return (body, in_repo(composition));
        }
        match rewrite(&body, shape, &chosen) {
            Ok(composed) => {
                let instead = read_request(&composed, false);
                let composition = Composition::sent_instead(chosen, instead, elapsed_ms(started));
                (composed, in_repo(composition))
            }
            Err(why) => (
                body,
                Composition::forwarded(why.to_string(), elapsed_ms(started)),
            ),
        }
    }
}

/// The most of a request's body, and of its answer, the record keeps of one exchange.
const MAX_KEPT_BYTES: usize = 1 << 20;

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("the body did not come in time (--body-timeout)")]
    Late,
    #[error(transparent)]
    Read(#[from] hyper::Error),
}

/// The next piece of a request's body (`None` at its end), unless `deadline` passes first.
async fn next_data(
    body: &mut Incoming,
    deadline: tokio::time::Instant,
) -> Result<Option<Bytes>, BodyError> {
    loop {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .map_err(|_| BodyError::Late)?;
        match frame {
            None => return Ok(None),
            Some(Err(err)) => return Err(BodyError::Read(err)),
            // Trailers carry no text.
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// The rest of a request's body as it comes, counted into `size`, by `deadline`.
fn rest_of(
    body: Incoming,
    deadline: tokio::time::Instant,
    size: Arc<AtomicU64>,
) -> impl Stream<Item = Result<Bytes, BodyError>> + Send + 'static {
    futures_util::stream::unfold(Some(body), move |body| {
        let size = size.clone();
        async move {
            let mut body = body?;
            match next_data(&mut body, deadline).await {
                Ok(Some(data)) => {
                    size.fetch_add(data.len() as u64, Ordering::Relaxed);
                    Some((Ok(data), Some(body)))
                }
                Ok(None) => None,
                // Said once; the stream ends after it.
                Err(why) => Some((Err(why), None)),
            }
        }
    })
}

/// Why a request to the server failed, causes included: reqwest's own message ("error
/// sending request") says nothing of the refused connection beneath it.
fn why(err: &reqwest::Error) -> String {
    let mut said = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_said = cause.to_string();
        if !said.contains(&cause_said) {
            said = format!("{said}: {cause_said}");
        }
        source = cause.source();
    }
    said
}

/// Whether an Authorization header carries a credential: not empty, and not a scheme alone.
fn carries_credential(value: &HeaderValue) -> bool {
    let value = value.as_bytes().trim_ascii();
    let credential = match value.iter().position(u8::is_ascii_whitespace) {
        Some(space) => value[space..].trim_ascii(),
        None if value.eq_ignore_ascii_case(b"bearer") || value.eq_ignore_ascii_case(b"basic") => {
            b""
        }
        None => value,
    };
    !credential.is_empty()
}

/// Headers clients put their key in: OpenAI's and every compatible server's Authorization,
/// Anthropic's and Continue's `x-api-key`, Azure's `api-key`.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

/// Whether a header goes through: hop-by-hop headers, the host and the length stay with
/// their connection.
fn passes(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
    )
}

/// A short text answer of the proxy's own.
fn plain(status: StatusCode, message: String) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(message + "\n")).map_err(|never| match never {});
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    *response.status_mut() = status;
    response
}

/// An exchange under way: recorded once, when it ends, or when it is dropped unfinished (the
/// client hung up, whether before the server's headers or in the middle of its answer).
struct Pending {
    exchange: Exchange,
    started: Instant,
    /// Where it is recorded; `None` once recorded, or with no store.
    log: Option<Arc<RecordStore>>,
    /// What judges the completions of the A/B, once it is recorded.
    judging: Option<Arc<Judging>>,
    /// The start of the request's body, and the size of the rest that streamed past.
    request: Vec<u8>,
    request_rest: Arc<AtomicU64>,
    content_type: String,
    /// The start of the answer; `exchange.answer_bytes` counts all of it.
    answer: Vec<u8>,
    kept_bytes: usize,
    /// Redacted from what is recorded.
    secrets: Vec<String>,
}

impl Pending {
    fn chunk(&mut self, chunk: &[u8]) {
        if self.exchange.first_byte_ms.is_none() {
            self.exchange.first_byte_ms = Some(elapsed_ms(self.started));
        }
        self.exchange.answer_bytes += chunk.len() as u64;
        let room = self.kept_bytes.saturating_sub(self.answer.len());
        self.answer
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Record the exchange, unless it already is or holds nothing worth keeping (a health
    /// check, a model list: no text, no body).
    fn finish(&mut self, cancelled: bool) {
        let Some(log) = self.log.take() else {
            return;
        };
        let e = &mut self.exchange;
        e.total_ms = elapsed_ms(self.started);
        e.cancelled = cancelled;
        let rest = self.request_rest.load(Ordering::Relaxed);
        e.request_bytes = self.request.len() as u64 + rest;
        e.request_cut = rest > 0 || self.request.len() > self.kept_bytes;
        let kept = &self.request[..self.request.len().min(self.kept_bytes)];
        e.sent = read_request(kept, e.request_cut);
        if !e.refused && !e.sent.has_text() && e.sent.body.is_none() {
            return;
        }
        e.answer_cut = e.answer_bytes > self.answer.len() as u64;
        e.answered = read_answer(&self.content_type, &self.answer);
        // A refusal's reason is in its body (llama.cpp's 501 for a model without FIM tokens).
        if e.status >= 400 && e.error.is_none() {
            let body = String::from_utf8_lossy(&self.answer);
            e.error = Some(crate::text::excerpt(body.trim(), 300));
        }
        let redact = |text: &str| secret::redact_all(text, &self.secrets);
        e.error = e.error.as_deref().map(redact);
        e.answered.text = redact(&e.answered.text);
        e.sent.body = e.sent.body.as_deref().map(redact);
        match log.append(e) {
            Ok(id) => {
                e.id = id;
                if let Some(judging) = &self.judging {
                    judging.heard(e, &log);
                }
            }
            Err(err) => crate::escape::warn(&format!(
                "proxy: cannot record an exchange in {}: {err}",
                log.dir().display()
            )),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.finish(true);
    }
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// The server's answer as it streams to the client, noted on the way; recorded when it ends,
/// or (by [`Pending`]'s drop) when the client hangs up and the stream is dropped unfinished.
struct Recorded {
    inner: futures_util::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    pending: Option<Pending>,
}

impl Stream for Recorded {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.poll_next_unpin(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(pending) = self.pending.as_mut() {
                    pending.chunk(chunk);
                }
            }
            Poll::Ready(Some(Err(err))) => {
                if let Some(mut pending) = self.pending.take() {
                    pending.exchange.error = Some(format!("the answer broke off: {}", why(err)));
                    pending.finish(false);
                }
            }
            Poll::Ready(None) => {
                if let Some(mut pending) = self.pending.take() {
                    pending.finish(false);
                }
            }
            Poll::Pending => {}
        }
        next.map(|item| item.map(|r| r.map_err(std::io::Error::other)))
    }
}

/// A connection whose writes fail once one has waited [`Bounds::idle_timeout`] for a client
/// that reads nothing: hyper then closes it, and the answer's stream is dropped (and recorded
/// as cancelled).
struct WriteDeadline {
    stream: tokio::net::TcpStream,
    wait: Duration,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteDeadline {
    fn new(stream: tokio::net::TcpStream, wait: Duration) -> WriteDeadline {
        WriteDeadline {
            stream,
            wait,
            waiting: None,
        }
    }

    /// `poll`'s result, or a timeout where it has waited too long.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if poll.is_ready() {
            self.waiting = None;
            return poll;
        }
        let wait = self.wait;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(wait)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took nothing of its answer in time (--idle-timeout)",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl tokio::io::AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.bounded(cx, poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.bounded(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
