//! Faults tests/it/backends_faults.rs does not cover, both about time: a stream that stalls
//! halfway and an answer trickling in a byte at a time. The deadline must end either cleanly.
//! (Huge answers are covered there: `oversized_answers_are_refused_whole_or_streamed`.)

use crate::backends_support;

use std::time::{Duration, Instant};

use backends_support::{config, request};
use keyhole::{BackendError, Completion};
use keyhole::{BackendKind, testing::model::http::build_http};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longer than any test runs: the runtime drops the connection at the end of the test.
const FOREVER: Duration = Duration::from_secs(60);
/// What the deadline may overrun by.
const SLACK: Duration = Duration::from_secs(2);

/// What the server writes once it has read a request: pieces, each after its pause, then
/// nothing for `hold` before it closes the connection.
#[derive(Clone)]
struct Script {
    pieces: Vec<(Duration, Vec<u8>)>,
    hold: Duration,
}

/// Serves `script` on loopback for every connection; returns the base URL.
async fn serve(script: Script) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                if drain_request(&mut socket).await.is_none() {
                    return;
                }
                let _ = socket.set_nodelay(true);
                for (pause, piece) in script.pieces {
                    tokio::time::sleep(pause).await;
                    // The client may have given up, which is what some tests want.
                    if socket.write_all(&piece).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(script.hold).await;
            });
        }
    });
    base
}

/// Reads one request, head and body, so that closing the socket later does not reset it.
async fn drain_request(socket: &mut TcpStream) -> Option<()> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let head = data
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| i + 4);
        if let Some(head) = head {
            let text = String::from_utf8_lossy(&data[..head]).to_ascii_lowercase();
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap_or(0));
            if data.len() >= head + length {
                return Some(());
            }
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 || data.len() > 1 << 20 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}

fn now(bytes: impl Into<Vec<u8>>) -> (Duration, Vec<u8>) {
    (Duration::ZERO, bytes.into())
}

/// The head of an answer whose body runs until the connection closes.
const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn a_stream_that_stalls_halfway_ends_at_the_deadline() {
    let openai = format!("data: {}\n\n", json!({"choices": [{"text": "1"}]}));
    let ollama = format!("{}\n", json!({"response": "1", "done": false}));
    for (kind, first_half) in [(BackendKind::OpenAi, openai), (BackendKind::Ollama, ollama)] {
        let script = Script {
            pieces: vec![now(STREAM_HEAD), now(first_half)],
            hold: FOREVER,
        };
        let mut cfg = config(kind, &serve(script).await);
        cfg.deadline_secs = 1;
        let backend = build_http(&cfg).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let start = Instant::now();
        let error = backend.complete(&request(1), Some(&tx)).await.unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1) + SLACK, "{kind:?}");
        assert!(
            matches!(
                error,
                BackendError::Deadline { seconds: 1, .. } | BackendError::TruncatedStream { .. }
            ),
            "{kind:?}: {error:?}"
        );
        assert_eq!(rx.try_recv().unwrap().text, "1", "the first half arrived");
    }
}

/// A JSON answer whose body comes one byte per 50 ms (about 1.4 s in all).
fn trickle() -> Script {
    let body = json!({"choices": [{"text": "1;"}]}).to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut pieces = vec![now(head)];
    pieces.extend(body.bytes().map(|b| (Duration::from_millis(50), vec![b])));
    Script {
        pieces,
        hold: Duration::ZERO,
    }
}

async fn complete_within(deadline_secs: u64) -> (Result<Vec<Completion>, BackendError>, Duration) {
    let mut cfg = config(BackendKind::OpenAi, &serve(trickle()).await);
    cfg.deadline_secs = deadline_secs;
    let backend = build_http(&cfg).unwrap();
    let start = Instant::now();
    let result = backend.complete(&request(1), None).await;
    (result, start.elapsed())
}

#[tokio::test]
async fn a_trickling_answer_completes_within_the_deadline() {
    let (result, _) = complete_within(5).await;
    assert_eq!(result.unwrap()[0].text, "1;");
}

#[tokio::test]
async fn a_trickling_answer_slower_than_the_deadline_ends_at_it() {
    let (result, took) = complete_within(1).await;
    assert!(took < Duration::from_secs(1) + SLACK, "{took:?}");
    let error = result.unwrap_err();
    assert!(
        matches!(error, BackendError::Deadline { seconds: 1, .. }),
        "{error:?}"
    );
}
