//! `keyhole proxy` as an editor plugin meets it: requests reach the server as they were sent,
//! streamed answers come back as they were written, and `keyhole recorded` shows what was sent
//! and answered, without the plugin's credentials.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server, sse};
use crate::common;

/// A running `keyhole proxy` and the address it listens on; killed when dropped.
struct RunningProxy {
    child: Child,
    base: String,
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_proxy(to: &str, scratch: &std::path::Path) -> RunningProxy {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(["proxy", "--listen", "127.0.0.1:0", "--to", to])
        .envs(common::dirs_env(scratch))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "keyhole proxy: http://127.0.0.1:PORT -> ..., recording to ..."
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    RunningProxy { child, base }
}

fn recorded(scratch: &std::path::Path) -> Vec<Value> {
    let output = common::ok(common::keyhole(&["recorded", "list", "--json"], scratch));
    serde_json::from_slice(&output.stdout).unwrap()
}

const SECRET: &str = "sk-plugin-secret-4242";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infill_request_streams_through_and_is_recorded_without_its_key() {
    let server = Server::start(|request, _| match request.path.as_str() {
        "/infill" => Reply::Stream(sse(&[
            json!({"content": "return "}),
            json!({"content": "total;", "tokens_predicted": 3, "tokens_evaluated": 40}),
        ])),
        _ => Reply::Json(404, json!({"error": "no such endpoint"})),
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let request = json!({
        "input_prefix": "int total() {\n    ",
        "prompt": "",
        "input_suffix": "\n}\n",
        "input_extra": [{"filename": "src/Cart.java", "text": "class Cart {}\n"}],
        "n_predict": 16,
        "stream": true,
    });
    let answer = reqwest::Client::new()
        .post(format!("{}/infill", proxy.base))
        .bearer_auth(SECRET)
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(
        answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = answer.text().await.unwrap();
    // The stream arrives unchanged, events and end marker included.
    assert!(body.contains(r#"data: {"content":"return "}"#), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    // The server got what the plugin sent, its key included (the key is the plugin's).
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/infill");
    assert_eq!(seen.body, request);
    assert_eq!(seen.headers["authorization"], format!("Bearer {SECRET}"));

    let exchanges = recorded(scratch.path());
    assert_eq!(exchanges.len(), 1, "{exchanges:?}");
    let e = &exchanges[0];
    assert_eq!(e["id"], 1);
    assert_eq!(e["endpoint"], "/infill");
    assert_eq!(e["status"], 200);
    assert_eq!(e["sent"]["prefix"], "int total() {\n    ");
    assert_eq!(e["sent"]["suffix"], "\n}\n");
    assert_eq!(e["sent"]["extra"][0]["filename"], "src/Cart.java");
    assert_eq!(e["sent"]["parameters"]["n_predict"], 16);
    assert_eq!(e["answered"]["text"], "return total;");
    assert_eq!(e["answered"]["answer_tokens"], 3);
    assert_eq!(e["cancelled"], false);
    // The plugin's key reaches no file of keyhole's.
    for entry in walk(&scratch.path().join("data")) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(SECRET), "{} holds the key", entry.display());
    }
    let shown = common::ok(common::keyhole(&["recorded", "show", "1"], scratch.path()));
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("--- prefix ---\nint total() {"), "{shown}");
    assert!(shown.contains("--- answer (prompt 40 tokens, answer 3 tokens) ---\nreturn total;"));

    // In the repository the plugin was editing: the hole, and where each piece came from.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("src")).unwrap();
    std::fs::write(repo.path().join("src/Cart.java"), "class Cart {}\n").unwrap();
    std::fs::write(
        repo.path().join("src/Total.java"),
        "class Total {\nint total() {\n    \n}\n}\n",
    )
    .unwrap();
    let repo_arg = repo.path().to_str().unwrap();
    let shown = common::ok(common::keyhole(
        &["recorded", "show", "1", "--repo", repo_arg, "--json"],
        scratch.path(),
    ));
    let located: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let places = &located["located"]["places"];
    assert_eq!(places.as_array().unwrap().len(), 1, "{located}");
    assert_eq!(places[0]["file"], "src/Total.java");
    assert_eq!(
        (places[0]["line"].clone(), places[0]["column"].clone()),
        (json!(3), json!(5))
    );
    assert_eq!(places[0]["certainty"], "exact");
    let provenance = located["located"]["provenance"].as_array().unwrap();
    let extra = provenance
        .iter()
        .find(|p| p["piece"] == "extra 1 (src/Cart.java)")
        .unwrap();
    assert_eq!(extra["from"], json!(["src/Cart.java:1-1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_cancels_and_the_record_says_so() {
    let server = Server::start(|_, _| {
        let mut pieces = vec![format!("data: {}\n\n", json!({"content": "a"}))];
        // Far longer than the client waits.
        pieces.extend((0..5000).map(|_| format!("data: {}\n\n", json!({"content": "b"}))));
        Reply::After(Duration::from_millis(1), Box::new(Reply::Stream(pieces)))
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let mut answer = reqwest::Client::new()
        .post(format!("{}/completion", proxy.base))
        .json(&json!({"prompt": "x = ", "stream": true}))
        .send()
        .await
        .unwrap();
    let first = answer.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("data:"));
    drop(answer);
    // The record is written when the proxy notices the hang-up.
    let mut exchanges = Vec::new();
    for _ in 0..100 {
        exchanges = recorded(scratch.path());
        if !exchanges.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0]["cancelled"], true);
    assert_eq!(exchanges[0]["sent"]["prompt"], "x = ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_gets_a_one_line_502_and_a_record() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&format!("http://127.0.0.1:{port}"), scratch.path());
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/completions", proxy.base))
        .json(&json!({"prompt": "def f(", "suffix": "):\n", "max_tokens": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502);
    let text = answer.text().await.unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("cannot reach"), "{text}");
    let exchanges = recorded(scratch.path());
    assert_eq!(exchanges[0]["status"], 502);
    assert_eq!(exchanges[0]["sent"]["suffix"], "):\n");
    // Requests without text (health checks, model lists) pass through unrecorded.
    let _ = reqwest::get(format!("{}/health", proxy.base))
        .await
        .unwrap();
    assert_eq!(recorded(scratch.path()).len(), 1);
}

#[test]
fn bad_proxy_arguments_are_one_line_errors() {
    let scratch = tempfile::tempdir().unwrap();
    let err = crate::reliability_support::one_line_error(&common::keyhole(
        &["proxy", "--to", "no-such-backend"],
        scratch.path(),
    ));
    assert!(err.contains("no-such-backend"), "{err}");
    let err = crate::reliability_support::one_line_error(&common::keyhole(
        &["recorded", "show", "9"],
        scratch.path(),
    ));
    assert!(err.contains("no recorded request 9"), "{err}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
