//! A soak of `keyhole proxy` (BENCHMARKS.md, "Proxy soak"): several proxies recording to one
//! store at once under a bounded loopback load for minutes. At the end every request sent must
//! be in the store exactly once, under an id of its own; each proxy's resident memory is
//! sampled as it goes.
//!
//! ```sh
//! cargo run --example loopback_server -- 127.0.0.1:8091 &
//! cargo run --example proxy_soak -- target/debug/keyhole http://127.0.0.1:8091 300 3 4 25
//! ```
//!
//! Arguments: the keyhole binary, the server, seconds, proxies, clients per proxy, requests a
//! second per client.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [binary, server, seconds, proxies, clients, rate] = &args[..] else {
        panic!("proxy_soak KEYHOLE SERVER SECONDS PROXIES CLIENTS RATE");
    };
    let number = |text: &str| -> u64 { text.parse().expect("a whole number") };
    let (seconds, proxies, clients, rate) = (
        number(seconds),
        number(proxies),
        number(clients),
        number(rate),
    );
    let home = tempfile::tempdir().unwrap();
    let mut running: Vec<(Child, String)> = (0..proxies)
        .map(|_| start_proxy(binary, server, home.path()))
        .collect();
    let pids: Vec<u32> = running.iter().map(|(child, _)| child.id()).collect();
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for (p, (_, base)) in running.iter().enumerate() {
        for c in 0..clients {
            let (url, sent, failed) = (
                format!("{base}/v1/completions"),
                sent.clone(),
                failed.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
                let mut n = 0u64;
                while Instant::now() < deadline {
                    tick.tick().await;
                    let body = serde_json::json!({
                        "prompt": format!("soak {p} {c} {n}\n{}", "int total = ".repeat(120)),
                        "max_tokens": 16,
                    });
                    n += 1;
                    let answered = match client.post(&url).json(&body).send().await {
                        Ok(answer) => answer.status() == 200 && answer.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    let tally = if answered { &sent } else { &failed };
                    tally.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
    }
    // Resident memory of each proxy, every 15 seconds.
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); pids.len()];
    while Instant::now() < deadline {
        for (pid, series) in pids.iter().zip(&mut samples) {
            series.push(rss_kib(*pid));
        }
        tokio::time::sleep(Duration::from_secs(15)).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    for (pid, series) in pids.iter().zip(&mut samples) {
        series.push(rss_kib(*pid));
    }
    for (child, _) in &mut running {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (exchanges, unreadable) =
        keyhole::testing::proxy::read_log(&home.path().join("data/proxy")).unwrap();
    let ids: BTreeSet<u64> = exchanges.iter().map(|e| e.id).collect();
    let tags: BTreeSet<String> = exchanges
        .iter()
        .filter_map(|e| e.sent.prompt.as_deref()?.lines().next().map(str::to_string))
        .collect();
    let sent = sent.load(Ordering::Relaxed);
    println!(
        "{seconds} s, {proxies} proxies x {clients} clients at {rate}/s: {sent} answered, {} failed",
        failed.load(Ordering::Relaxed)
    );
    println!(
        "recorded {} ({unreadable} unreadable), {} distinct ids, {} distinct requests",
        exchanges.len(),
        ids.len(),
        tags.len()
    );
    for (p, series) in samples.iter().enumerate() {
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "proxy {p} RSS MiB: first {:.1}, min {:.1}, max {:.1}, last {:.1} ({} samples)",
            mib(series[0]),
            mib(*series.iter().min().unwrap()),
            mib(*series.iter().max().unwrap()),
            mib(*series.last().unwrap()),
            series.len()
        );
    }
    let store =
        std::fs::metadata(home.path().join("data/proxy/exchanges.sqlite3")).map_or(0, |m| m.len());
    println!("store {:.1} MiB", store as f64 / (1 << 20) as f64);
    let whole = exchanges.len() as u64 == sent
        && ids.len() == exchanges.len()
        && tags.len() == exchanges.len();
    println!(
        "{}",
        if whole {
            "every request recorded once, ids unique"
        } else {
            "MISMATCH"
        }
    );
}

/// `keyhole proxy` to `server`, recording under `home`, and the address it listens on.
fn start_proxy(binary: &str, server: &str, home: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(binary)
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--to",
            server,
            "--log-max-mib",
            "4096",
        ])
        .env("KEYHOLE_CONFIG_DIR", home.join("config"))
        .env("KEYHOLE_CACHE_DIR", home.join("cache"))
        .env("KEYHOLE_DATA_DIR", home.join("data"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = listening_at(BufReader::new(child.stderr.take().unwrap()));
    (child, base)
}

/// Where a proxy says it listens; what it says after goes on to this process's stderr, so
/// that a warning is seen and a full pipe never blocks it.
fn listening_at(mut stderr: BufReader<std::process::ChildStderr>) -> String {
    loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the proxy ended");
        if let Some(base) = line
            .strip_prefix("keyhole proxy: ")
            .and_then(|rest| rest.split_whitespace().next())
        {
            std::thread::spawn(move || {
                for line in stderr.lines().map_while(Result::ok) {
                    eprintln!("{line}");
                }
            });
            return base.to_string();
        }
    }
}

/// The resident memory of process `pid`, in KiB (0 where it cannot be read).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
