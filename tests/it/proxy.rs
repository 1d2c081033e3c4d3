//! `keyhole proxy` as an editor plugin meets it: requests reach the server as they were sent,
//! streamed answers come back as they were written, and `keyhole recorded` shows what was sent
//! and answered, without the plugin's credentials.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server, sse};
use crate::common;

/// A running `keyhole proxy`, the address it listens on and what it said before it
/// listened (its warnings); killed when dropped.
pub(crate) struct RunningProxy {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) said: Vec<String>,
    /// What it says from then on.
    pub(crate) stderr: BufReader<std::process::ChildStderr>,
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_proxy(to: &str, scratch: &std::path::Path) -> RunningProxy {
    start_proxy_with(to, scratch, &[])
}

/// The proxy to `to`, with `env` set besides its directories.
pub(crate) fn start_proxy_with(
    to: &str,
    scratch: &std::path::Path,
    env: &[(&str, &str)],
) -> RunningProxy {
    spawn_proxy(&["--listen", "127.0.0.1:0", "--to", to], scratch, env)
}

/// `keyhole proxy ARGS`, once it says where it listens.
pub(crate) fn spawn_proxy(
    args: &[&str],
    scratch: &std::path::Path,
    env: &[(&str, &str)],
) -> RunningProxy {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command.arg("proxy").args(args);
    run_proxy(command, scratch, env)
}

/// Run `command` (a `keyhole proxy`, maybe through a shell) until it says where it listens.
pub(crate) fn run_proxy(
    mut command: Command,
    scratch: &std::path::Path,
    env: &[(&str, &str)],
) -> RunningProxy {
    let mut child = command
        .envs(common::hermetic_env(scratch))
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    // Killed and waited for when dropped, whatever happens from here.
    let mut proxy = RunningProxy {
        child,
        base: String::new(),
        said: Vec::new(),
        stderr,
    };
    loop {
        let mut line = String::new();
        proxy.stderr.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the proxy ended: {:?}", proxy.said);
        // "keyhole proxy: http://127.0.0.1:PORT -> ..., recording to ..."
        if let Some(base) = line
            .strip_prefix("keyhole proxy: ")
            .and_then(|rest| rest.split_whitespace().next())
        {
            proxy.base = base.to_string();
            return proxy;
        }
        proxy.said.push(line);
    }
}

pub(crate) fn recorded(scratch: &std::path::Path) -> Vec<Value> {
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
    let holding = files_holding(&scratch.path().join("data"), SECRET);
    assert!(holding.is_empty(), "{holding:?} hold the key");
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
    // Why: not reqwest's "error sending request" alone.
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
    let exchanges = recorded(scratch.path());
    assert_eq!(exchanges[0]["status"], 502);
    assert_eq!(exchanges[0]["sent"]["suffix"], "):\n");
    // Requests without text (health checks, model lists) pass through unrecorded.
    let _ = reqwest::get(format!("{}/health", proxy.base))
        .await
        .unwrap();
    assert_eq!(recorded(scratch.path()).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_recorded_with_its_reason_and_without_the_key_it_echoes() {
    let server = Server::start(|request, _| {
        let echoed = request.headers["authorization"].clone();
        Reply::Json(
            501,
            json!({"error": {"message": format!("no infill for {echoed}")}}),
        )
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let answer = reqwest::Client::new()
        .post(format!("{}/infill", proxy.base))
        .bearer_auth(SECRET)
        .json(&json!({"input_prefix": "x = ", "input_suffix": "\n"}))
        .send()
        .await
        .unwrap();
    // The client gets the server's answer as it was.
    assert_eq!(answer.status(), 501);
    assert!(answer.text().await.unwrap().contains(SECRET));
    let exchanges = recorded(scratch.path());
    let error = exchanges[0]["error"].as_str().unwrap();
    assert!(error.contains("no infill for Bearer"), "{error}");
    assert!(!error.contains(SECRET), "{error}");
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

/// The files under `dir` whose bytes (a database's too) hold `secret`.
pub(crate) fn files_holding(dir: &std::path::Path, secret: &str) -> Vec<std::path::PathBuf> {
    walk(dir)
        .into_iter()
        .filter(|file| {
            let bytes = std::fs::read(file).unwrap_or_default();
            bytes
                .windows(secret.len())
                .any(|window| window == secret.as_bytes())
        })
        .collect()
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

// Request shapes of real editor plugins, written here from their public code, replayed through
// the proxy as they send them: the server gets them unchanged, the record has them, and
// `keyhole recorded show` finds the hole in the repository the plugin was editing.

/// The repository the plugins were editing: the cursor stood on line 11 after `    return `
/// (column 12), before `sum;`.
const CART: &str = "import { Price } from \"./price\";\n\nexport class Cart {\n  private items: Price[] = [];\n\n  total(): number {\n    let sum = 0;\n    for (const item of this.items) {\n      sum += item.cents;\n    }\n    return sum;\n  }\n}\n";
const PRICE: &str = "export class Price {\n  constructor(public cents: number) {}\n}\n";

fn cart_repo() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("src")).unwrap();
    std::fs::write(repo.path().join("src/cart.ts"), CART).unwrap();
    std::fs::write(repo.path().join("src/price.ts"), PRICE).unwrap();
    repo
}

/// The cart before the cursor's line, the line up to the cursor, and the rest of the line with
/// the lines after: how plugins cut the file at the cursor.
fn cart_at_cursor() -> (String, &'static str, String) {
    let cursor_line = CART.split_inclusive('\n').nth(10).unwrap();
    let before_line: String = CART.split_inclusive('\n').take(10).collect();
    let after: String = CART.split_inclusive('\n').skip(11).collect();
    let (line_prefix, line_suffix) = cursor_line.split_at("    return ".len());
    (before_line, line_prefix, format!("{line_suffix}{after}"))
}

/// A server that answers each endpoint plugins complete with as llama.cpp and Ollama do.
async fn completing_server() -> Server {
    Server::start(|request, _| match request.path.as_str() {
        "/infill" => Reply::Json(
            200,
            json!({"content": "sum;", "tokens_predicted": 2, "tokens_evaluated": 90}),
        ),
        "/completion" | "/v1/completions" | "/v1/fim/completions" => Reply::Stream(sse(&[
            json!({"content": "sum;", "choices": [{"text": "sum;", "delta": {"content": "sum;"}}]}),
        ])),
        "/api/generate" => Reply::Raw {
            status: 200,
            headers: vec![("Content-Type", "application/x-ndjson".into())],
            body: b"{\"response\":\"sum\",\"done\":false}\n{\"response\":\";\",\"done\":true,\"eval_count\":2}\n"
                .to_vec(),
        },
        _ => Reply::Json(404, json!({"error": "no such endpoint"})),
    })
    .await
}

/// Send `body` to `path` through `proxy` with `headers` as the plugin does; check the server
/// got it unchanged and the answer came back; return the record's `recorded show --repo`.
async fn replay(
    server: &Server,
    proxy: &RunningProxy,
    scratch: &std::path::Path,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Value {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", proxy.base))
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = request.send().await.unwrap();
    assert_eq!(answer.status(), 200, "{path}");
    let text = answer.text().await.unwrap();
    assert!(text.contains("sum"), "{path}: {text}");
    let seen = server.requests().last().unwrap().clone();
    assert_eq!(seen.path, path);
    assert_eq!(
        &seen.body, body,
        "{path}: the body reaches the server unchanged"
    );
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        assert_eq!(
            seen.headers.get(&name).map(String::as_str),
            Some(*value),
            "{name}"
        );
    }
    let exchanges = recorded(scratch);
    let id = exchanges.last().unwrap()["id"].to_string();
    let repo = cart_repo();
    let shown = common::ok(common::keyhole(
        &[
            "recorded",
            "show",
            &id,
            "--repo",
            repo.path().to_str().unwrap(),
            "--json",
        ],
        scratch,
    ));
    serde_json::from_slice(&shown.stdout).unwrap()
}

/// The record found the hole at the cursor, sure of it, and the code before it in the cart.
fn assert_found_at_the_cursor(shown: &Value) {
    let places = shown["located"]["places"].as_array().unwrap();
    assert_eq!(places.len(), 1, "{shown:#}");
    assert_eq!(places[0]["file"], "src/cart.ts");
    assert_eq!(
        (places[0]["line"].as_u64(), places[0]["column"].as_u64()),
        (Some(11), Some(12))
    );
    assert_eq!(places[0]["certainty"], "exact", "{shown:#}");
    assert_eq!(shown["answered"]["text"], "sum;", "{shown:#}");
}

/// The provenance of the piece named `piece`: (where it came from, its framing characters).
fn provenance_of(shown: &Value, piece: &str) -> (Vec<String>, u64) {
    let pieces = shown["located"]["provenance"].as_array().unwrap();
    let found = pieces
        .iter()
        .find(|p| p["piece"] == piece)
        .unwrap_or_else(|| panic!("no {piece} in {shown:#}"));
    let from = found["from"].as_array().unwrap();
    let from = from
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    (from, found["framing_chars"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_vscode_infill_requests_go_through_unchanged_and_are_located() {
    // ggml-org/llama.vscode at 009e5b72 (src/llama-server.ts, createRequestPayload), with
    // src/completion.ts (033bf113: input_prefix is the lines before the cursor's line plus a
    // line break, prompt the line up to the cursor, input_suffix the rest of the line and the
    // lines after) and src/extra-context.ts (4a1e49cb: chunks carry text, time and the
    // document's absolute file name). Sent with axios.
    let server = completing_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let (before_line, line_prefix, after) = cart_at_cursor();
    let body = json!({
        "input_prefix": before_line,
        "input_suffix": after,
        "input_extra": [{
            "text": PRICE,
            "time": 1_764_000_000_000u64,
            "filename": "/home/dev/shop/src/price.ts",
        }],
        "prompt": line_prefix,
        "n_predict": 128,
        "top_k": 40,
        "top_p": 0.99,
        "stream": false,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": true,
        "n_indent": 4,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 1000,
    });
    let headers = [
        ("authorization", "Bearer sk-llama-vscode-0001"),
        ("user-agent", "axios/1.7.9"),
    ];
    let shown = replay(&server, &proxy, scratch.path(), "/infill", &headers, &body).await;
    assert_found_at_the_cursor(&shown);
    assert_eq!(shown["agent"], "axios/1.7.9");
    let listed = common::ok(common::keyhole(&["recorded", "list"], scratch.path()));
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("    1  axios        /infill"), "{listed}");
    assert_eq!(shown["sent"]["parameters"]["n_indent"], 4);
    assert_eq!(shown["answered"]["prompt_tokens"], 90);
    let (from, framing) = provenance_of(&shown, "extra 1 (/home/dev/shop/src/price.ts)");
    assert_eq!((from, framing), (vec!["src/price.ts:1-3".to_string()], 0));
    let (from, _) = provenance_of(&shown, "prompt");
    assert_eq!(from, ["src/cart.ts:11-11"]);
    let (from, framing) = provenance_of(&shown, "suffix");
    assert_eq!((from, framing), (vec!["src/cart.ts:11-13".to_string()], 0));
    // `keyhole REPO --recorded 1` without a terminal says what the UI would open.
    let repo = cart_repo();
    let repo_arg = repo.path().to_str().unwrap();
    let opened = common::ok(common::keyhole(
        &[repo_arg, "--recorded", "1"],
        scratch.path(),
    ));
    let opened = String::from_utf8(opened.stdout).unwrap();
    assert!(
        opened.contains(
            "--- hole: src/cart.ts:11:12 (the text before and after the cursor match the file) ---"
        ),
        "{opened}"
    );
    let missing = common::keyhole(&[repo_arg, "--recorded", "99"], scratch.path());
    assert_eq!(missing.status.code(), Some(2));
    let error = String::from_utf8(missing.stderr).unwrap();
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.contains("no recorded request 99"), "{error}");
    // The warm-up requests it sends to keep the extra chunks cached (n_predict 0, nothing
    // around a cursor) go through too; there is no hole to find.
    let warm_up = json!({
        "input_prefix": "", "input_suffix": "", "input_extra": [], "prompt": "",
        "n_predict": 0, "samplers": [], "cache_prompt": true,
        "t_max_prompt_ms": 500, "t_max_predict_ms": 1,
    });
    let shown = replay(&server, &proxy, scratch.path(), "/infill", &[], &warm_up).await;
    assert_eq!(shown["located"]["places"], json!([]));
}

/// Continue's prefix: its snippets of other files commented out, the current file's path, then
/// the code before the cursor (core/autocomplete/templating/formatting.ts, formatSnippets).
fn continue_prefix() -> String {
    let (before_line, line_prefix, _) = cart_at_cursor();
    let snippet = format!("Path: src/price.ts\n{}", PRICE.trim());
    let commented: Vec<String> = snippet.lines().map(|l| format!("// {l}")).collect();
    format!(
        "{}\n// src/cart.ts\n{before_line}{line_prefix}",
        commented.join("\n")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_autocomplete_through_llama_cpp_ollama_and_openai_is_located() {
    // continuedev/continue at d0a3c0b6.
    let server = completing_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let (_, _, after) = cart_at_cursor();
    let stops = [
        "<|endoftext|>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
    ];
    // core/llm/llms/LlamaCpp.ts: POST {apiBase}completion with the prompt its Qwen template
    // made (core/autocomplete/templating/AutocompleteTemplate.ts, qwenCoderFimTemplate),
    // streamed; with no key configured it still sends `Bearer undefined`.
    let templated = format!(
        "<|fim_prefix|>{}<|fim_suffix|>{after}<|fim_middle|>",
        continue_prefix()
    );
    let llama_cpp = json!({
        "prompt": templated,
        "stream": true,
        "n_predict": 4096,
        "stop": stops,
        "temperature": 0.01,
    });
    let headers = [("authorization", "Bearer undefined")];
    let shown = replay(
        &server,
        &proxy,
        scratch.path(),
        "/completion",
        &headers,
        &llama_cpp,
    )
    .await;
    assert_found_at_the_cursor(&shown);
    let (from, framing) = provenance_of(&shown, "prompt");
    assert!(from.contains(&"src/price.ts:1-2".to_string()), "{from:?}");
    assert!(
        from.iter().any(|f| f.starts_with("src/cart.ts:1-")),
        "{from:?}"
    );
    let template = "<|fim_prefix|>// Path: src/price.ts\n".len() + "<|fim_suffix|>".len();
    assert!(framing as usize >= template, "{framing}");

    // core/llm/llms/Ollama.ts, _streamFim: POST {apiBase}api/generate with the prefix and the
    // suffix apart (raw left out when unset), its model-file options and keep_alive.
    let ollama = json!({
        "model": "qwen2.5-coder:1.5b-base",
        "prompt": continue_prefix(),
        "suffix": after,
        "options": {"temperature": 0.01, "num_predict": 4096, "stop": stops, "num_ctx": 8192},
        "keep_alive": 1800,
        "stream": true,
    });
    let shown = replay(
        &server,
        &proxy,
        scratch.path(),
        "/api/generate",
        &[],
        &ollama,
    )
    .await;
    assert_found_at_the_cursor(&shown);
    assert_eq!(shown["answered"]["text"], "sum;");
    assert_eq!(shown["answered"]["answer_tokens"], 2);

    // core/llm/llms/OpenAI.ts, _streamFim: POST {apiBase}fim/completions, its key in both
    // x-api-key and Authorization.
    let openai = json!({
        "model": "codestral-latest",
        "prompt": continue_prefix(),
        "suffix": after,
        "max_tokens": 4096,
        "temperature": 0.01,
        "stop": stops,
        "stream": true,
    });
    let key = "sk-continue-secret-7777";
    let bearer = format!("Bearer {key}");
    let headers = [("x-api-key", key), ("authorization", bearer.as_str())];
    let shown = replay(
        &server,
        &proxy,
        scratch.path(),
        "/v1/fim/completions",
        &headers,
        &openai,
    )
    .await;
    assert_found_at_the_cursor(&shown);
    for entry in walk(&scratch.path().join("data")) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(key), "{} holds the key", entry.display());
    }
}

/// Twinny's Code Llama prompt (src/extension/fim-templates.ts, getFimPromptTemplateLLama): no
/// file context, the language and file header its completion provider writes
/// (getPromptHeader), the prefix and suffix set apart from its markers by spaces.
fn twinny_prompt() -> String {
    let (before_line, line_prefix, after) = cart_at_cursor();
    let header = "\n// Language: TypeScript (typescript) \n// File uri: file:///home/dev/shop/src/cart.ts (typescript) \n";
    format!("<PRE> \n{header}{before_line}{line_prefix} <SUF> {after} <MID>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twinny_fim_requests_to_ollama_and_an_openai_server_are_located() {
    // twinnydotdev/twinny at 193d14c0: src/extension/provider-options.ts
    // (createStreamRequestBodyFim) for Ollama and OpenAI-compatible providers, sent to the
    // provider's path with an empty Authorization when no key is set
    // (src/extension/providers/completion.ts, buildFimRequest).
    let server = completing_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let body = json!({
        "model": "codellama:7b-code",
        "prompt": twinny_prompt(),
        "stream": true,
        "keep_alive": "5m",
        "options": {"temperature": 0.2, "num_predict": 512},
    });
    let headers = [("content-type", "application/json"), ("authorization", "")];
    for path in ["/api/generate", "/v1/completions"] {
        let shown = replay(&server, &proxy, scratch.path(), path, &headers, &body).await;
        assert_found_at_the_cursor(&shown);
        let (from, framing) = provenance_of(&shown, "prompt");
        assert_eq!(from, ["src/cart.ts:1-13"], "{shown:#}");
        // The markers, the spaces around them and the header are Twinny's own.
        assert!(framing as usize > "<PRE>  <SUF>  <MID>".len(), "{framing}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_authorization_gives_way_to_the_backends_key() {
    // Twinny sends `Authorization:` empty without a key; behind a backend with one, the
    // backend's key goes in its place.
    let server = completing_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let backends = format!(
        "[[backend]]\nname = \"ollama\"\nkind = \"ollama\"\nbase_url = \"{}\"\nmodel = \"codellama:7b-code\"\napi_key_env = \"KEYHOLE_TEST_OLLAMA_KEY\"\n",
        server.base
    );
    std::fs::write(config.join("backends.toml"), backends).unwrap();
    let key = ("KEYHOLE_TEST_OLLAMA_KEY", "sk-ollama-behind-keyhole");
    let proxy = start_proxy_with("ollama", scratch.path(), &[key]);
    let body = json!({"model": "codellama:7b-code", "prompt": twinny_prompt(), "stream": true});
    let answer = reqwest::Client::new()
        .post(format!("{}/api/generate", proxy.base))
        .header("authorization", "")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let seen = &server.requests()[0];
    assert_eq!(
        seen.headers["authorization"],
        "Bearer sk-ollama-behind-keyhole"
    );
    assert_eq!(seen.body, body);
    // llama.vim sends the scheme with no token: no credential either.
    let answer = reqwest::Client::new()
        .post(format!("{}/api/generate", proxy.base))
        .header("authorization", "Bearer ")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        server.requests()[1].headers["authorization"],
        "Bearer sk-ollama-behind-keyhole"
    );
}

// What a plugin or a server sent is outside text: it may end anywhere in a character, hold
// escape sequences, and the record it sits in may be damaged.

/// Record `exchange` (its id given by the log) in the data directory under `scratch`.
fn record_exchange(scratch: &std::path::Path, exchange: keyhole::testing::proxy::Exchange) -> u64 {
    let dirs = keyhole::Dirs::under(scratch);
    let log = keyhole::testing::proxy::RecordStore::open(
        &keyhole::testing::proxy::log_dir(&dirs).unwrap(),
        keyhole::testing::proxy::DEFAULT_MAX_BYTES,
    )
    .unwrap();
    log.append(&exchange).unwrap()
}

fn exchange_sending(sent: keyhole::testing::proxy::Sent) -> keyhole::testing::proxy::Exchange {
    keyhole::testing::proxy::Exchange {
        id: 0,
        at: 1_764_000_000.0,
        client: "127.0.0.1:51000".into(),
        agent: Some("llama.vim".into()),
        method: "POST".into(),
        endpoint: "/infill".into(),
        upstream: "http://127.0.0.1:8080/".into(),
        status: 200,
        sent,
        answered: keyhole::testing::proxy::Answered {
            text: "1".into(),
            ..keyhole::testing::proxy::Answered::default()
        },
        first_byte_ms: Some(1.0),
        total_ms: 2.0,
        cancelled: false,
        error: None,
        ..Default::default()
    }
}

#[test]
fn a_request_whose_text_before_the_cursor_ends_in_any_character_is_located() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let code = "def total(items):\n    # café\n    s = 0\n    名前 = s\n    return s\n";
    std::fs::write(repo.path().join("cart.py"), code).unwrap();
    for (before, after, place) in [
        (
            "def total(items):\n    # café",
            "\n    s = 0\n",
            "cart.py:2:11",
        ),
        ("    s = 0\n    名前", " = s\n", "cart.py:4:7"),
    ] {
        let id = record_exchange(
            scratch.path(),
            exchange_sending(keyhole::testing::proxy::Sent {
                prefix: Some(before.into()),
                prompt: Some(String::new()),
                suffix: Some(after.into()),
                ..keyhole::testing::proxy::Sent::default()
            }),
        );
        let repo = repo.path().to_str().unwrap();
        let shown = common::keyhole(
            &["recorded", "show", &id.to_string(), "--repo", repo],
            scratch.path(),
        );
        let stderr = String::from_utf8_lossy(&shown.stderr);
        // On main: exit 101, the panic quoting the plugin's prompt.
        assert_eq!(shown.status.code(), Some(0), "{stderr}");
        let stdout = String::from_utf8_lossy(&shown.stdout);
        assert!(
            stdout.contains(&format!(
                "--- hole: {place} (the text before and after the cursor match the file) ---"
            )),
            "{stdout}"
        );
    }
}

#[test]
fn recorded_text_is_shown_with_its_lines_and_without_control_characters() {
    let scratch = tempfile::tempdir().unwrap();
    let hostile = "\u{1b}]0;title\u{7}\u{1b}[2J";
    let mut exchange = exchange_sending(keyhole::testing::proxy::Sent {
        prompt: Some(format!("first line\nsecond{hostile}\r")),
        extra: vec![keyhole::testing::proxy::ExtraChunk {
            filename: format!("src/a{hostile}.py"),
            text: format!("x = 1\n{hostile}"),
        }],
        ..keyhole::testing::proxy::Sent::default()
    });
    exchange.answered.text = format!("sum;{hostile}\nnext");
    exchange.agent = Some(format!("vim{hostile}/9"));
    exchange.client = format!("127.0.0.1{hostile}");
    exchange.endpoint = format!("/infill{hostile}");
    exchange.upstream = format!("http://x{hostile}/");
    exchange.error = Some(format!("refused{hostile}\nsecond"));
    let id = record_exchange(scratch.path(), exchange).to_string();
    for args in [vec!["recorded", "show", &id], vec!["recorded", "list"]] {
        let shown = common::ok(common::keyhole(&args, scratch.path()));
        let stdout = String::from_utf8(shown.stdout).unwrap();
        let controls: Vec<char> = stdout
            .chars()
            .filter(|&c| c.is_control() && c != '\n')
            .collect();
        assert!(controls.is_empty(), "{args:?}: {controls:?} in {stdout}");
        assert!(stdout.contains("]0;title"), "{args:?}: {stdout}");
    }
    let shown = common::ok(common::keyhole(&["recorded", "show", &id], scratch.path()));
    let stdout = String::from_utf8(shown.stdout).unwrap();
    // A body keeps its lines; a one-line field's break is written as `\n`.
    assert!(
        stdout.contains("\nfirst line\nsecond\\u{1b}]0;title\\u{7}\\u{1b}[2J\\r\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nsum;\\u{1b}]0;title"), "{stdout}");
    assert!(
        stdout.contains("error  refused\\u{1b}]0;title\\u{7}\\u{1b}[2J\\nsecond\n"),
        "{stdout}"
    );
}

/// `keyhole ARGS` under `scratch`, which must end within a few minutes (a hang is a failure).
pub(crate) fn keyhole_finishing(args: &[&str], scratch: &std::path::Path) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .envs(common::hermetic_env(scratch))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("keyhole {args:?} still running after 3 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_record_that_cannot_be_read_is_one_line_and_exit_2_not_a_spin() {
    let scratch = tempfile::tempdir().unwrap();
    let dirs = keyhole::Dirs::under(scratch.path());
    let log_dir = keyhole::testing::proxy::log_dir(&dirs).unwrap();
    std::fs::create_dir_all(log_dir.join("exchanges.jsonl")).unwrap();
    for args in [
        &["recorded", "list"][..],
        &["recorded", "show", "1"],
        &[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "http://127.0.0.1:9",
        ],
    ] {
        let output = keyhole_finishing(args, scratch.path());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("exchanges.jsonl"), "{args:?}: {stderr}");
    }
}
