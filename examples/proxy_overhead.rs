//! What `keyhole proxy` adds to a request (BENCHMARKS.md, "Proxy overhead"): the same
//! completion request sent to a server directly and through the proxy, one at a time
//! (latency percentiles) and from many connections at once (requests per second).
//!
//! ```sh
//! cargo run --release --example loopback_server -- 127.0.0.1:8091 &
//! ./target/release/keyhole proxy --listen 127.0.0.1:8012 --to http://127.0.0.1:8091 &
//! cargo run --release --example proxy_overhead -- http://127.0.0.1:8091 http://127.0.0.1:8012
//! ```

use std::time::{Duration, Instant};

const SEQUENTIAL: usize = 2000;
const CONCURRENT: usize = 64;
const PER_CONNECTION: usize = 100;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let direct = args.next().expect("the server's URL");
    let proxied = args.next().expect("the proxy's URL");
    let body = serde_json::json!({
        "prompt": "int total = ".repeat(200),
        "max_tokens": 16,
        "temperature": 0.0,
    });
    for (name, base) in [("direct", &direct), ("proxied", &proxied)] {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .unwrap();
        let url = format!("{base}/v1/completions");
        let mut times = Vec::with_capacity(SEQUENTIAL);
        for _ in 0..SEQUENTIAL {
            let start = Instant::now();
            let answer = client.post(&url).json(&body).send().await.unwrap();
            answer.bytes().await.unwrap();
            times.push(start.elapsed());
        }
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        let start = Instant::now();
        let tasks: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                let (client, url, body) = (client.clone(), url.clone(), body.clone());
                tokio::spawn(async move {
                    for _ in 0..PER_CONNECTION {
                        let answer = client.post(&url).json(&body).send().await.unwrap();
                        answer.bytes().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let rate = (CONCURRENT * PER_CONNECTION) as f64 / start.elapsed().as_secs_f64();
        println!(
            "{name:8} one at a time: p50 {:.3} ms, p99 {:.3} ms; {CONCURRENT} at once: {rate:.0} requests/s",
            ms(at(0.5)),
            ms(at(0.99))
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
