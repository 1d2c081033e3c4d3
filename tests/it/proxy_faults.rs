//! Nothing lost without a word, and nothing unbounded: `keyhole proxy` records an exchange
//! however it ends (the client hanging up before the server's headers, a body that is not
//! JSON, an answer larger than what is kept) and says in one line when it cannot; slow,
//! silent or too many clients are cut off or made to wait.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::proxy::{recorded, run_proxy, spawn_proxy};

/// The exchanges recorded under `scratch` once there are `count`, within a minute.
async fn recorded_once(scratch: &std::path::Path, count: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let exchanges = recorded(scratch);
        if exchanges.len() >= count || start.elapsed() > Duration::from_secs(60) {
            return exchanges;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_before_the_servers_headers_is_recorded_as_cancelled() {
    // llama-server answers a non-streamed request only once it is done; llama.vim cancels
    // the request it supersedes before then.
    let server = Server::start(|_, _| {
        Reply::After(
            Duration::from_secs(30),
            Box::new(Reply::Json(200, json!({"content": "late"}))),
        )
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = spawn_proxy(
        &["--listen", "127.0.0.1:0", "--to", &server.base],
        scratch.path(),
        &[],
    );
    let cancelled = reqwest::Client::new()
        .post(format!("{}/infill", proxy.base))
        .timeout(Duration::from_millis(500))
        .json(&json!({"input_prefix": "x = ", "input_suffix": "\n", "stream": false}))
        .send()
        .await;
    assert!(cancelled.is_err());
    let exchanges = recorded_once(scratch.path(), 1).await;
    assert_eq!(exchanges.len(), 1, "the cancelled request left no record");
    let e = &exchanges[0];
    assert_eq!(e["cancelled"], true);
    assert_eq!(e["sent"]["prefix"], "x = ");
    assert_eq!(e["first_byte_ms"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_json_or_too_large_are_kept_cut_and_marked() {
    let big_answer = "y".repeat(100_000);
    let answer = json!({"content": big_answer}).to_string();
    let server = Server::start(move |_, _| Reply::Raw {
        status: 200,
        headers: vec![("content-type", "application/json".into())],
        body: answer.clone().into_bytes(),
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    // A 1 MiB store: one exchange keeps at most 16 KiB of each body.
    let proxy = spawn_proxy(
        &[
            "--listen",
            "127.0.0.1:0",
            "--to",
            &server.base,
            "--log-max-mib",
            "1",
        ],
        scratch.path(),
        &[],
    );
    let client = reqwest::Client::new();
    let text = client
        .post(format!("{}/completion", proxy.base))
        .header("content-type", "text/plain")
        .body(b"prompt=def\x1b[2J\xff&api_key=sk-form-secret".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 200);
    let big_prompt = "x".repeat(200_000);
    let big = client
        .post(format!("{}/completion", proxy.base))
        .json(&json!({"prompt": big_prompt}))
        .send()
        .await
        .unwrap();
    // The client gets the whole answer; the server got the whole request.
    assert_eq!(big.text().await.unwrap().len(), 100_000 + 14);
    assert_eq!(
        server.requests()[1].body["prompt"].as_str().unwrap().len(),
        200_000
    );

    let exchanges = recorded(scratch.path());
    assert_eq!(exchanges.len(), 2, "{exchanges:?}");
    assert_eq!(
        exchanges[0]["sent"]["body"],
        r"prompt=def\u{1b}[2J\xff&api_key=[redacted]"
    );
    let cut = &exchanges[1];
    assert_eq!(cut["request_cut"], true);
    assert_eq!(cut["request_bytes"], 200_000 + 13);
    assert!(
        cut["sent"]["body"]
            .as_str()
            .unwrap()
            .starts_with(r#"{"prompt":"xxx"#)
    );
    assert_eq!(cut["answer_cut"], true);
    assert_eq!(cut["answer_bytes"], 100_000 + 14);
    let shown = crate::common::ok(crate::common::keyhole(
        &["recorded", "show", &cut["id"].to_string()],
        scratch.path(),
    ));
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("cut: 200013 bytes came"), "{shown}");
    assert!(shown.contains("cut: 100014 bytes came"), "{shown}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_written_is_one_line_and_the_store_stays_readable() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "ok"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    // A full disk, as a file size limit: writes past 1000 blocks fail (and do not kill).
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "trap '' XFSZ; ulimit -f 1000; exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_keyhole"),
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &server.base,
    ]);
    let mut proxy = run_proxy(command, scratch.path(), &[]);
    let client = reqwest::Client::new();
    for i in 0..12 {
        let answer = client
            .post(format!("{}/completion", proxy.base))
            .json(&json!({"prompt": format!("{i}{}", "z".repeat(50_000))}))
            .send()
            .await
            .unwrap();
        // The client is served whether or not its exchange could be recorded.
        assert_eq!(answer.status(), 200);
    }
    let kept = recorded(scratch.path());
    assert!(!kept.is_empty() && kept.len() < 12, "{} kept", kept.len());
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let mut said = String::new();
    proxy.stderr.read_to_string(&mut said).unwrap();
    let failures: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("cannot record an exchange"))
        .collect();
    assert!(!failures.is_empty(), "nothing said: {said}");
    assert!(
        failures.iter().all(|l| l.starts_with("keyhole: warning: ")),
        "{said}"
    );
}

/// Whether the proxy closes `stream` (or resets it) within a few minutes.
fn closed_by_the_proxy(mut stream: TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(180)))
        .unwrap();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_slow_bodies_and_idle_connections_are_cut_off() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "ok"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = spawn_proxy(
        &[
            "--listen",
            "127.0.0.1:0",
            "--to",
            &server.base,
            "--header-timeout",
            "1",
            "--body-timeout",
            "1",
        ],
        scratch.path(),
        &[],
    );
    let address = proxy.base.trim_start_matches("http://").to_string();
    // Slowloris: headers that never end.
    let mut slow = TcpStream::connect(&address).unwrap();
    slow.write_all(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // Idle: a connection that never sends anything.
    let idle = TcpStream::connect(&address).unwrap();
    // A body that stops halfway.
    let mut stalled = TcpStream::connect(&address).unwrap();
    stalled
        .write_all(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
        .unwrap();
    let started = Instant::now();
    let (slow, idle) =
        tokio::task::spawn_blocking(move || (closed_by_the_proxy(slow), closed_by_the_proxy(idle)))
            .await
            .unwrap();
    assert!(
        slow && idle,
        "slow headers closed: {slow}, idle closed: {idle}"
    );
    let mut answer = String::new();
    stalled
        .set_read_timeout(Some(Duration::from_secs(180)))
        .unwrap();
    let _ = stalled.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("--body-timeout"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(170));
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_until_one_closes() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "ok"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = spawn_proxy(
        &[
            "--listen",
            "127.0.0.1:0",
            "--to",
            &server.base,
            "--max-connections",
            "2",
        ],
        scratch.path(),
        &[],
    );
    let address = proxy.base.trim_start_matches("http://").to_string();
    let held = [
        TcpStream::connect(&address).unwrap(),
        TcpStream::connect(&address).unwrap(),
    ];
    let client = reqwest::Client::new();
    let request = || {
        client
            .post(format!("{}/completion", proxy.base))
            .json(&json!({"prompt": "x"}))
    };
    let waiting = request().timeout(Duration::from_secs(1)).send().await;
    assert!(waiting.is_err(), "a third connection was served");
    drop(held);
    let served = request()
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
}
