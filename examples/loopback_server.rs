//! An OpenAI-compatible server that answers at once, for measuring `keyhole eval`'s own
//! throughput (BENCHMARKS.md, "Online eval throughput"): every POST gets the same one-line
//! completion over a kept-alive HTTP/1.1 connection. `GET /count` says how many were answered
//! and the seconds from the first to the last.
//! With `--busy N`, every N-th request is answered 429 with `Retry-After: 1` first.
//!
//! ```sh
//! cargo run --release --example loopback_server -- 127.0.0.1:8091 [--busy 50]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &str = r#"{"choices":[{"index":0,"text":"x;","finish_reason":"stop"}]}"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:8091".to_string());
    let busy: u64 = match (args.next().as_deref(), args.next()) {
        (Some("--busy"), Some(n)) => n.parse().expect("--busy takes a whole number"),
        _ => 0,
    };
    let listener = TcpListener::bind(&address).await?;
    eprintln!("answering on http://{address}");
    let tally = Arc::new(Tally::default());
    loop {
        let (socket, _) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let tally = tally.clone();
        tokio::spawn(async move {
            let _ = serve(socket, &tally, busy).await;
        });
    }
}

/// Requests answered, and when the first and the last came.
#[derive(Default)]
struct Tally {
    count: AtomicU64,
    span: Mutex<Option<(Instant, Instant)>>,
}

impl Tally {
    /// Counts a request; its number, from 1.
    fn add(&self) -> u64 {
        let now = Instant::now();
        let mut span = self.span.lock().unwrap();
        let (first, _) = span.get_or_insert((now, now));
        *span = Some((*first, now));
        self.count.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn report(&self) -> String {
        let seconds = self
            .span
            .lock()
            .unwrap()
            .map_or(0.0, |(first, last)| (last - first).as_secs_f64());
        let count = self.count.load(Ordering::Relaxed);
        format!("{{\"answered\":{count},\"seconds\":{seconds:.3}}}")
    }
}

/// Answers the requests of one connection until the client closes it.
async fn serve(mut socket: TcpStream, tally: &Tally, busy: u64) -> std::io::Result<()> {
    let mut data: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // One request: the head, then as many bytes as Content-Length says.
        let head_end = loop {
            if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = socket.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            data.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&data[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while data.len() < head_end + length {
            let n = socket.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            data.extend_from_slice(&buf[..n]);
        }
        data.drain(..head_end + length);
        let reply = if head.starts_with("get /count") {
            response("200 OK", &[], &tally.report())
        } else {
            let n = tally.add();
            if busy > 0 && n.is_multiple_of(busy) {
                response("429 Too Many Requests", &["Retry-After: 1"], "{}")
            } else {
                response("200 OK", &[], ANSWER)
            }
        };
        socket.write_all(reply.as_bytes()).await?;
    }
}

fn response(status: &str, headers: &[&str], body: &str) -> String {
    let mut text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}
