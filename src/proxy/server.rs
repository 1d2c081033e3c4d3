//! The proxy's HTTP server: every request goes to the server as it came and its answer streams
//! back as it comes (server-sent events and NDJSON included, status and headers unchanged); a
//! client that hangs up cancels the server's request with it. What each completion request sent
//! and got back is recorded ([`super::RecordStore`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{
    AUTHORIZATION, CONTENT_TYPE, HOST, HeaderName, HeaderValue, ORIGIN, USER_AGENT,
};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::redact::redact_query;
use super::{Exchange, RecordStore, read_answer, read_request};
use crate::model::secret;

/// The body of the proxy's answers.
type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The largest request body the proxy takes (prompts with many extra chunks stay far below).
const MAX_REQUEST_BYTES: usize = 64 << 20;
/// The most of one answer kept for the record; the client gets all of it.
const MAX_RECORDED_ANSWER: usize = 4 << 20;

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

/// The proxy: one upstream, one HTTP client (its connections kept alive), an optional record.
pub struct Proxy {
    upstream: Upstream,
    client: reqwest::Client,
    log: Option<Arc<RecordStore>>,
    access: Access,
}

impl Proxy {
    pub fn new(
        upstream: Upstream,
        log: Option<RecordStore>,
        access: Access,
    ) -> Result<Proxy, ClientError> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Proxy {
            upstream,
            client,
            log: log.map(Arc::new),
            access,
        })
    }

    /// Answer every connection `listener` accepts, until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
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
                let service = hyper::service::service_fn(move |request| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, Infallible>(proxy.forward(request, peer).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
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

    /// What is known of an exchange when its request's head has come.
    fn exchange_of(
        &self,
        parts: &hyper::http::request::Parts,
        endpoint: &str,
        peer: SocketAddr,
    ) -> Exchange {
        Exchange {
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
        }
    }

    /// Forward one request and stream its answer back, recording the exchange.
    async fn forward(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let endpoint = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        if let Some(refusal) = self.access.refusal(&parts.headers) {
            let refused = Pending {
                exchange: Exchange {
                    status: StatusCode::FORBIDDEN.as_u16(),
                    refused: true,
                    error: Some(refusal.clone()),
                    ..self.exchange_of(&parts, &endpoint, peer)
                },
                started,
                log: self.log.clone(),
                content_type: String::new(),
                answer: Vec::new(),
                secrets: self.secrets_of(&parts.headers),
            };
            refused.finish(false);
            return plain(StatusCode::FORBIDDEN, format!("keyhole proxy: {refusal}"));
        }
        let body = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => {
                let message = format!("keyhole proxy: cannot read the request: {err}");
                return plain(StatusCode::BAD_REQUEST, message);
            }
        };
        let mut pending = Pending {
            exchange: Exchange {
                sent: read_request(&body),
                ..self.exchange_of(&parts, &endpoint, peer)
            },
            started,
            log: self.log.clone(),
            content_type: String::new(),
            answer: Vec::new(),
            secrets: self.secrets_of(&parts.headers),
        };
        if !pending.exchange.sent.has_text() {
            pending.log = None;
        }
        let mut upstream = self
            .client
            .request(parts.method.clone(), self.upstream.url(&endpoint))
            .body(body);
        // Twinny sends an empty Authorization when it has no key: that is no credential, and
        // the upstream's key, where the proxy has one, goes in its place.
        let has_key = self.upstream.api_key.is_some();
        let credential = |(name, value): &(&HeaderName, &HeaderValue)| {
            !has_key || *name != AUTHORIZATION || !value.as_bytes().trim_ascii().is_empty()
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
                        "keyhole proxy: cannot reach {}: {err}",
                        pending.exchange.upstream
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

/// An exchange whose answer is still streaming.
struct Pending {
    exchange: Exchange,
    started: Instant,
    /// Where it is recorded; `None`: not recorded (no log, or a request without text).
    log: Option<Arc<RecordStore>>,
    content_type: String,
    answer: Vec<u8>,
    /// Redacted from what is recorded.
    secrets: Vec<String>,
}

impl Pending {
    fn chunk(&mut self, chunk: &[u8]) {
        if self.exchange.first_byte_ms.is_none() {
            self.exchange.first_byte_ms = Some(elapsed_ms(self.started));
        }
        let room = MAX_RECORDED_ANSWER.saturating_sub(self.answer.len());
        self.answer
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Record the exchange (once).
    fn finish(mut self, cancelled: bool) {
        let Some(log) = self.log.take() else {
            return;
        };
        self.exchange.total_ms = elapsed_ms(self.started);
        self.exchange.cancelled = cancelled;
        self.exchange.answered = read_answer(&self.content_type, &self.answer);
        // A refusal's reason is in its body (llama.cpp's 501 for a model without FIM tokens).
        if self.exchange.status >= 400 && self.exchange.error.is_none() {
            let body = String::from_utf8_lossy(&self.answer);
            self.exchange.error = Some(crate::text::excerpt(body.trim(), 300));
        }
        let redact = |text: &str| secret::redact_all(text, &self.secrets);
        self.exchange.error = self.exchange.error.as_deref().map(redact);
        self.exchange.answered.text = redact(&self.exchange.answered.text);
        if let Err(err) = log.append(&self.exchange) {
            crate::escape::warn(&format!(
                "proxy: cannot record an exchange in {}: {err}",
                log.dir().display()
            ));
        }
    }
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// The server's answer as it streams to the client, noted on the way; recorded when it ends,
/// or when the client hangs up and the stream is dropped unfinished.
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
                    pending.exchange.error = Some(format!("the answer broke off: {err}"));
                    pending.finish(false);
                }
            }
            Poll::Ready(None) => {
                if let Some(pending) = self.pending.take() {
                    pending.finish(false);
                }
            }
            Poll::Pending => {}
        }
        next.map(|item| item.map(|r| r.map_err(std::io::Error::other)))
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.finish(true);
        }
    }
}
