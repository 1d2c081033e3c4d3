//! A loopback HTTP/1.1 server for the backend tests: it records each request and answers as
//! the test's handler says, faults included. Every connection is closed after one answer.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyhole::{Backend, BackendError, Completion, CompletionRequest, Delta};
use keyhole::{BackendConfig, BackendKind};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests larger than this are not expected from a backend.
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Value,
    /// The body as it came.
    pub raw: Vec<u8>,
}

/// How the server answers.
pub enum Reply {
    /// A complete JSON answer.
    Json(u16, Value),
    /// A complete answer with extra headers and any body.
    Raw {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
    /// A body written in these pieces, then the connection closed (no length given).
    Stream(Vec<String>),
    /// Content-Length promises more than is sent before the connection closes.
    Short,
    /// Nothing, for longer than any test waits.
    Hang,
    /// Another reply, after a pause.
    After(Duration, Box<Reply>),
    /// Another reply, once the test says so or the pause is over, whichever comes first.
    WhenNotified(Arc<tokio::sync::Notify>, Duration, Box<Reply>),
}

type Handler = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

pub struct Server {
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl Server {
    /// Starts serving; `handler` gets each request and how many came before it.
    pub async fn start(
        handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = Server {
            base,
            requests: Arc::default(),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
        };
        let shared = (
            Arc::new(handler) as Arc<Handler>,
            server.requests.clone(),
            server.in_flight.clone(),
            server.most_in_flight.clone(),
        );
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (handler, requests, in_flight, most) = shared.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(socket).await else {
                        return;
                    };
                    let (mut socket, recorded) = request;
                    let seen = {
                        let mut requests = requests.lock().unwrap();
                        requests.push(recorded.clone());
                        requests.len() - 1
                    };
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    write_reply(&mut socket, handler(&recorded, seen)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        server
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The body of the only request.
    pub fn body(&self) -> Value {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "expected one request");
        requests[0].body.clone()
    }

    /// The most requests that were being answered at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }
}

async fn read_request(mut socket: TcpStream) -> Option<(TcpStream, Recorded)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 || data.len() > MAX_REQUEST_BYTES {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.lines();
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .map_or(0, |v| v.parse().unwrap());
    assert!(length <= MAX_REQUEST_BYTES);
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let raw = data[head_end..head_end + length].to_vec();
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Some((
        socket,
        Recorded {
            path,
            headers,
            body,
            raw,
        },
    ))
}

async fn write_reply(socket: &mut TcpStream, reply: Reply) {
    let mut reply = reply;
    let reply = loop {
        reply = match reply {
            Reply::After(pause, next) => {
                tokio::time::sleep(pause).await;
                *next
            }
            Reply::WhenNotified(signal, longest, next) => {
                let _ = tokio::time::timeout(longest, signal.notified()).await;
                *next
            }
            other => break other,
        };
    };
    // Write errors mean the client gave up, which some tests intend.
    let _ = match reply {
        Reply::Json(status, value) => {
            write_full(socket, status, &[], value.to_string().as_bytes()).await
        }
        Reply::Raw {
            status,
            headers,
            body,
        } => write_full(socket, status, &headers, &body).await,
        Reply::Stream(pieces) => write_stream(socket, &pieces).await,
        Reply::Short => {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
            socket
                .write_all(format!("{head}{{\"choices\":").as_bytes())
                .await
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        }
        Reply::After(..) | Reply::WhenNotified(..) => unreachable!("unwrapped above"),
    };
    let _ = socket.shutdown().await;
}

async fn write_full(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await
}

async fn write_stream(socket: &mut TcpStream, pieces: &[String]) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    socket.write_all(head.as_bytes()).await?;
    for piece in pieces {
        socket.write_all(piece.as_bytes()).await?;
        socket.flush().await?;
        // Separate writes, so that the client sees pieces in separate reads.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// llama.cpp's `/props`: `slots` requests at once, `n_ctx` tokens each.
pub fn llama_props(slots: usize, n_ctx: usize) -> Reply {
    let props = serde_json::json!({
        "total_slots": slots,
        "default_generation_settings": { "n_ctx": n_ctx },
    });
    Reply::Json(200, props)
}

/// llama.cpp's `/tokenize` for a tokenizer that makes a token of every `chars_per_token`
/// characters of the request's `content`.
pub fn llama_tokens(request: &Recorded, chars_per_token: usize) -> Reply {
    let content = request.body["content"].as_str().unwrap_or("");
    let tokens = vec![0; content.chars().count() / chars_per_token];
    Reply::Json(200, serde_json::json!({ "tokens": tokens }))
}

/// Requests a handler is answering at once, and the most there were.
#[derive(Clone, Default)]
pub struct InFlight {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl InFlight {
    /// Hold the server thread answering a request for `pause`, counted in flight meanwhile.
    pub fn hold(&self, pause: Duration) {
        self.enter();
        std::thread::sleep(pause);
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    /// As [`InFlight::hold`], for a task on the async runtime: sleeps without the thread.
    pub async fn wait(&self, pause: Duration) {
        self.enter();
        tokio::time::sleep(pause).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }

    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// SSE `data:` lines for these JSON events, then `data: [DONE]`.
pub fn sse(events: &[Value]) -> Vec<String> {
    let mut lines: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    lines.push("data: [DONE]\n\n".to_string());
    lines
}

/// A config of `kind` for the server at `base`, with fast retries and a short deadline.
pub fn config(kind: BackendKind, base: &str) -> BackendConfig {
    BackendConfig {
        name: "test-backend".to_string(),
        kind,
        base_url: Some(base.to_string()),
        model: Some("test-model".to_string()),
        deadline_secs: 5,
        retries: 0,
        ..BackendConfig::embedded()
    }
}

/// A request for `n` samples of "prompt" with every generation setting distinguishable.
pub fn request(n: usize) -> CompletionRequest {
    CompletionRequest {
        prompt: "int x = ".to_string(),
        suffix: None,
        max_tokens: 17,
        temperature: 0.5,
        seed: Some(7),
        stop: vec!["\n".to_string()],
        n,
        current_file: None,
        instruction: false,
    }
}

/// Completes `request`, streaming, and returns the texts and the deltas.
pub async fn complete_streaming(
    backend: &dyn Backend,
    request: &CompletionRequest,
) -> Result<(Vec<String>, Vec<Delta>), BackendError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let completions = backend.complete(request, Some(&tx)).await?;
    drop(tx);
    let mut deltas = Vec::new();
    while let Some(delta) = rx.recv().await {
        deltas.push(delta);
    }
    Ok((texts(&completions), deltas))
}

pub fn texts(completions: &[Completion]) -> Vec<String> {
    completions.iter().map(|c| c.text.clone()).collect()
}
