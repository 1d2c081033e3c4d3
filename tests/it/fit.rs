//! Requests shaped to what a llama.cpp server says about itself: prompts fitted to its own
//! token count (`/tokenize`), within the budget as the model counts it and close to it,
//! shrinking when the model's tokenizer counts more than keyhole's and growing when it counts
//! fewer; and no more requests at once than it has slots (`/props`).

use serde_json::{Value, json};

use crate::backends_support::{InFlight, Reply, Server, llama_props, llama_tokens};
use crate::common;

const BUDGET: usize = 300;

/// A llama.cpp server whose tokenizer makes one token of every `chars_per_token` characters,
/// and that completes every prompt with `x`.
async fn server(chars_per_token: usize) -> Server {
    Server::start(move |request, _| match request.path.as_str() {
        "/tokenize" => llama_tokens(request, chars_per_token),
        _ => Reply::Json(200, json!({ "content": "x", "stop": true })),
    })
    .await
}

/// The prompts `server` was sent to complete, in order (llama.cpp's `/completion` and `/infill`).
fn sent_prompts(server: &Server) -> Vec<String> {
    let completions = server.requests().into_iter();
    let completions = completions.filter(|r| r.path == "/completion" || r.path == "/infill");
    completions
        .map(|r| {
            let text = r.body["prompt"]
                .as_str()
                .or(r.body["input_prefix"].as_str());
            text.unwrap().to_string()
        })
        .collect()
}

/// `keyhole ARGS` with the scratch directories of `scratch`, checked to succeed.
async fn keyhole(scratch: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command.args(args).envs(common::hermetic_env(scratch));
    common::ok(command.output().await.unwrap())
}

/// `keyhole eval` of three holes of the sample, candidates 7 and 63, with the backend `llama`
/// and `extra` options; what it wrote on stderr.
async fn eval_sample(scratch: &std::path::Path, extra: &[&str]) -> String {
    let out = scratch.join("eval");
    let sample = common::sample();
    let mut args = vec![
        "eval",
        &sample,
        "--holes",
        "3",
        "--candidates",
        "7,63",
        "--backend",
        "llama",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let output = keyhole(scratch, &args).await;
    String::from_utf8_lossy(&output.stderr).into_owned()
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
    let output = keyhole(config_dir, &args).await;
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Scratch directories whose backends.toml names `server` as the llama.cpp backend `llama`.
fn configured(server: &Server) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let config = std::path::PathBuf::from(&common::hermetic_env(scratch.path())[0].1);
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

/// The lengths of the fitted and the unfitted prompt, after checking the fitted one.
async fn fitted_and_unfitted_lengths(chars_per_token: usize) -> (usize, usize, Value, Value) {
    let (fitted, unfitted, counted) = fitted(chars_per_token).await;
    check_close_to_the_budget(&fitted, &counted);
    let length = |v: &Value| v["text"].as_str().unwrap().len();
    (length(&fitted), length(&unfitted), fitted, unfitted)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_counts_more_tokens_gets_a_shorter_prompt_within_its_budget() {
    let (fitted, unfitted, _, unfitted_json) = fitted_and_unfitted_lengths(2).await;
    assert!(fitted < unfitted);
    assert!(
        unfitted_json["backend_tokens"].is_null(),
        "the embedded model counts as keyhole does"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_counts_fewer_tokens_gets_a_longer_prompt_within_its_budget() {
    let (fitted, unfitted, fitted_json, _) = fitted_and_unfitted_lengths(8).await;
    assert!(fitted > unfitted);
    let tokens = fitted_json["tokens"].as_u64().unwrap() as usize;
    assert!(
        tokens > BUDGET,
        "keyhole counts more than the budget: {tokens}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_sends_every_prompt_fitted_to_the_servers_count() {
    let server = server(2).await;
    let scratch = configured(&server);
    eval_sample(scratch.path(), &["--budget", &BUDGET.to_string()]).await;

    let sent: Vec<String> = sent_prompts(&server);
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
    let output = keyhole(scratch.path(), &args).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn eval_sends_no_more_at_once_than_the_server_has_slots_and_says_why() {
    // Each completion holds a server thread a while.
    let in_flight = InFlight::default();
    let counted = in_flight.clone();
    let server = Server::start(move |request, _| match request.path.as_str() {
        "/props" => llama_props(1, 512),
        "/tokenize" => llama_tokens(request, 4),
        _ => {
            counted.hold(std::time::Duration::from_millis(20));
            Reply::Json(200, json!({ "content": "x", "stop": true }))
        }
    })
    .await;
    let scratch = configured(&server);
    let stderr = eval_sample(scratch.path(), &["--concurrency", "4"]).await;
    assert!(
        stderr.contains("llama: the server works on 1 request(s) at once"),
        "{stderr}"
    );
    assert!(
        stderr.contains("each server slot holds 512 tokens, less than the budget of 4072"),
        "{stderr}"
    );
    assert_eq!(in_flight.most(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_slot_smaller_than_the_budget_gets_prompts_composed_within_it_and_says_so() {
    // A slot of 200 tokens (`n_ctx`), one token per 4 characters: with 24 tokens to generate,
    // every prompt is composed within 176 tokens as the server counts them, so the server cuts
    // nothing, and the output says the room was smaller than the budget.
    const N_CTX: usize = 200;
    let room = N_CTX - keyhole::testing::model::DEFAULT_MAX_TOKENS;
    let server = Server::start(move |request, _| match request.path.as_str() {
        "/props" => llama_props(1, N_CTX),
        "/tokenize" => llama_tokens(request, 4),
        _ => Reply::Json(200, json!({ "content": "x", "stop": true })),
    })
    .await;
    let scratch = configured(&server);
    let complete = |extra: &'static [&'static str]| {
        let sample = common::sample();
        let scratch = scratch.path().to_path_buf();
        async move {
            let mut args = vec![
                "complete",
                &sample,
                keyhole::sample::DEMO_HOLE,
                "--backend",
                "llama",
            ];
            args.extend(extra);
            keyhole(&scratch, &args).await
        }
    };
    let json: Value = serde_json::from_slice(&complete(&["--json"]).await.stdout).unwrap();
    let rows = json["completions"].as_array().unwrap();
    assert!(!rows.is_empty(), "{json}");
    for row in rows {
        assert_eq!(row["model_room"], room, "{row}");
    }
    let sent: Vec<usize> = sent_prompts(&server)
        .iter()
        .map(|text| text.chars().count() / 4)
        .collect();
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|&tokens| tokens <= room),
        "{sent:?} over {room}"
    );
    // The server was asked about its slots once, not once a prompt.
    let asked = server
        .requests()
        .iter()
        .filter(|r| r.path == "/props")
        .count();
    assert_eq!(asked, 1);
    let text = String::from_utf8_lossy(&complete(&[]).await.stdout).into_owned();
    assert!(
        text.contains(&format!(
            "note: the model's context leaves room for {room} prompt tokens, fewer than the budget"
        )),
        "{text}"
    );
}
