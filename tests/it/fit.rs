//! Prompts fitted to a server that counts tokens itself (llama.cpp's `/tokenize`): within the
//! budget as the model counts it and close to it, shrinking when the model's tokenizer counts
//! more than keyhole's and growing when it counts fewer.

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::common;

const BUDGET: usize = 300;

/// A llama.cpp server whose tokenizer makes one token of every `chars_per_token` characters,
/// and that completes every prompt with `x`.
async fn server(chars_per_token: usize) -> Server {
    Server::start(move |request, _| match request.path.as_str() {
        "/tokenize" => {
            let content = request.body["content"].as_str().unwrap_or("");
            let tokens = vec![0; content.chars().count() / chars_per_token];
            Reply::Json(200, json!({ "tokens": tokens }))
        }
        _ => Reply::Json(200, json!({ "content": "x", "stop": true })),
    })
    .await
}

/// `keyhole prompt --json` for candidate 63 at the demo hole, with the backend `backend`
/// configured in `config_dir`.
async fn prompt(config_dir: &std::path::Path, backend: &str) -> Value {
    let budget = BUDGET.to_string();
    let args = [
        "prompt",
        &common::sample(),
        keyhole::sample::DEMO_HOLE,
        "--id",
        "63",
        "--budget",
        &budget,
        "--backend",
        backend,
        "--json",
    ];
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command.args(args).envs(common::dirs_env(config_dir));
    let output = command.output().await.unwrap();
    serde_json::from_slice(&common::ok(output).stdout).unwrap()
}

/// Scratch directories whose backends.toml names `server` as the llama.cpp backend `llama`.
fn configured(server: &Server) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let config = common::dirs_env(scratch.path())[0].1.clone();
    std::fs::create_dir_all(&config).unwrap();
    let toml = format!(
        "[[backend]]\nname = \"llama\"\nkind = \"llamacpp\"\nbase_url = \"{}\"\n",
        server.base
    );
    std::fs::write(config.join("backends.toml"), toml).unwrap();
    scratch
}

async fn fitted(chars_per_token: usize) -> (Value, Value, Vec<String>) {
    let server = server(chars_per_token).await;
    let scratch = configured(&server);
    let fitted = prompt(scratch.path(), "llama").await;
    let unfitted = prompt(scratch.path(), "embedded").await;
    let counted = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/tokenize")
        .map(|r| r.body["content"].as_str().unwrap().to_string())
        .collect();
    (fitted, unfitted, counted)
}

fn check_close_to_the_budget(fitted: &Value, counted: &[String]) {
    let model_tokens = fitted["backend_tokens"].as_u64().unwrap() as usize;
    assert!(model_tokens <= BUDGET, "{model_tokens} over {BUDGET}");
    assert!(
        model_tokens * 50 >= BUDGET * 49,
        "{model_tokens} of {BUDGET}"
    );
    let text = fitted["text"].as_str().unwrap();
    assert!(
        counted.iter().any(|c| c == text),
        "the printed prompt is one the server counted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_counts_more_tokens_gets_a_shorter_prompt_within_its_budget() {
    let (fitted, unfitted, counted) = fitted(2).await;
    check_close_to_the_budget(&fitted, &counted);
    let length = |v: &Value| v["text"].as_str().unwrap().len();
    assert!(length(&fitted) < length(&unfitted));
    assert!(
        unfitted["backend_tokens"].is_null(),
        "the embedded model counts as keyhole does"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_counts_fewer_tokens_gets_a_longer_prompt_within_its_budget() {
    let (fitted, unfitted, counted) = fitted(8).await;
    check_close_to_the_budget(&fitted, &counted);
    let length = |v: &Value| v["text"].as_str().unwrap().len();
    assert!(length(&fitted) > length(&unfitted));
    assert!(
        fitted["tokens"].as_u64().unwrap() as usize > BUDGET,
        "{fitted}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_sends_every_prompt_fitted_to_the_servers_count() {
    let server = server(2).await;
    let scratch = configured(&server);
    let out = scratch.path().join("eval");
    let budget = BUDGET.to_string();
    let args = [
        "eval",
        &common::sample(),
        "--holes",
        "3",
        "--candidates",
        "7,63",
        "--budget",
        &budget,
        "--backend",
        "llama",
        "--out",
        out.to_str().unwrap(),
    ];
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command.args(args).envs(common::dirs_env(scratch.path()));
    common::ok(command.output().await.unwrap());

    let sent: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.path != "/tokenize")
        .map(|r| {
            let body = &r.body;
            let text = body["prompt"].as_str().or(body["input_prefix"].as_str());
            text.unwrap().to_string()
        })
        .collect();
    assert!(sent.len() >= 3, "{sent:?}");
    for prompt in &sent {
        let tokens = prompt.chars().count() / 2;
        assert!(tokens <= BUDGET, "{tokens} tokens sent of {BUDGET}");
    }
    // Most prompts fill the budget as the server counts it (less: a hole near its file's start).
    let full = sent
        .iter()
        .filter(|p| p.chars().count() / 2 * 50 >= BUDGET * 49);
    assert!(full.count() * 2 >= sent.len(), "{sent:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn proposals_reports_every_prompt_fitted_to_the_servers_count() {
    let server = server(2).await;
    let scratch = configured(&server);
    let budget = BUDGET.to_string();
    let args = [
        "proposals",
        &common::sample(),
        keyhole::sample::DEMO_HOLE,
        "--budget",
        &budget,
        "--backend",
        "llama",
        "--json",
    ];
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command.args(args).envs(common::dirs_env(scratch.path()));
    let output = common::ok(command.output().await.unwrap());
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows: Vec<&Value> = out["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .chain(out["retrieved"].as_array().unwrap())
        .chain([&out["default"]])
        .filter(|row| row["applicable"].as_bool() != Some(false))
        .collect();
    assert!(rows.len() > 20, "{out}");
    for row in rows {
        let counted = row["backend_tokens"].as_u64().unwrap() as usize;
        assert!(counted <= BUDGET, "{counted} over {BUDGET}: {row}");
    }
}
