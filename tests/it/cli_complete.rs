//! `keyhole complete` end to end: offline with the embedded model, and against a local
//! OpenAI-compatible server configured in backends.toml with a key from the environment.

use crate::backends_support;

use std::process::Output;

use backends_support::{Reply, Server};
use serde_json::{Value, json};

const HOLE: &str = "src/main/java/com/acme/shop/web/BaseController.java:24:24";

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

async fn keyhole(args: Vec<String>, config_dir: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"));
    command
        .args(args)
        .env("KEYHOLE_CONFIG_DIR", config_dir)
        .env("KEYHOLE_CACHE_DIR", config_dir.join("cache"))
        .env("KEYHOLE_DATA_DIR", config_dir.join("data"));
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().await.unwrap()
}

/// The JSON a successful run printed.
fn success_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_completions_offline_with_scores() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "complete",
        &sample(),
        HOLE,
        "--proposal",
        "14",
        "--proposal",
        "62",
        "--json",
    ];
    let out = keyhole(args.map(String::from).to_vec(), dir.path(), &[]).await;
    let json = success_json(&out);
    let rows = json["completions"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0]["proposal_id"].clone(),
            rows[0]["exact_match"].clone()
        ),
        (json!(14), json!(true))
    );
    assert_eq!(
        (
            rows[1]["proposal_id"].clone(),
            rows[1]["exact_match"].clone()
        ),
        (json!(62), json!(false))
    );
    assert_eq!(json["token_counting"], "exact");
}

#[tokio::test(flavor = "multi_thread")]
async fn retrieved_candidates_complete_by_id_including_those_that_need_a_completion_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "complete".to_string(),
        sample(),
        HOLE.to_string(),
        "--json".into(),
    ];
    for id in ["63", "66", "67", "68", "69"] {
        args.extend(["--id".to_string(), id.to_string()]);
    }
    let out = keyhole(args, dir.path(), &[]).await;
    let json = success_json(&out);
    let rows = json["completions"].as_array().unwrap();
    let ids: Vec<u64> = rows
        .iter()
        .map(|r| r["proposal_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [63, 66, 67, 68, 69]);
    assert!(rows.iter().all(|r| r["text"].is_string()), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_server_completes_and_the_key_stays_secret() {
    let server = Server::start(|_, i| {
        Reply::Json(200, json!({ "choices": [{ "index": 0, "text": format!("isBlank(value)) {{\nnext line {i}") }] }))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-3.5-turbo-instruct\"\napi_key_env = \"KEYHOLE_TEST_KEY_CLI\"\n",
        server.base
    );
    std::fs::write(dir.path().join("backends.toml"), toml).unwrap();
    let secret = "sk-test-do-not-print-7f3a9";
    let args = ["complete", &sample(), HOLE, "--backend", "local", "-k", "2"];
    let out = keyhole(
        args.map(String::from).to_vec(),
        dir.path(),
        &[("KEYHOLE_TEST_KEY_CLI", secret)],
    )
    .await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("budgets exact in cl100k_base"), "{stdout}");
    assert_eq!(
        stdout.matches("✓").count(),
        2,
        "cut at the newline, both match:\n{stdout}"
    );
    assert!(!stdout.contains(secret) && !stderr.contains(secret));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/completions");
        assert_eq!(request.headers["authorization"], format!("Bearer {secret}"));
        assert_eq!(request.body["model"], "gpt-3.5-turbo-instruct");
        assert_eq!(request.body["max_tokens"], 24);
        assert_eq!(request.body["stop"], json!(["\n"]));
        assert!(
            request.body["prompt"]
                .as_str()
                .unwrap()
                .ends_with("        if (TextUtil."),
            "the word the hole cuts (`is`) is the model's to write"
        );
    }
    let listed = keyhole(
        vec!["backends".into()],
        dir.path(),
        &[("KEYHOLE_TEST_KEY_CLI", secret)],
    )
    .await;
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("local")
            && listed.contains("$KEYHOLE_TEST_KEY_CLI (set)")
            && !listed.contains(secret)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_server_is_one_line_naming_backend_and_url() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[[backend]]\nname = \"gone\"\nkind = \"ollama\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"codellama\"\n";
    std::fs::write(dir.path().join("backends.toml"), toml).unwrap();
    let args = ["complete", &sample(), HOLE, "--backend", "gone", "-k", "1"];
    let out = keyhole(args.map(String::from).to_vec(), dir.path(), &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("gone") && stderr.contains("127.0.0.1:9"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn backends_asks_each_server_for_its_models() {
    let openai = Server::start(|request, _| match request.path.as_str() {
        "/v1/models" => Reply::Json(
            200,
            json!({"data": [{"id": "coder-1b"}, {"id": "chat-7b"}]}),
        ),
        _ => Reply::Json(404, json!({})),
    })
    .await;
    let ollama = Server::start(|request, _| match request.path.as_str() {
        "/api/tags" => Reply::Json(200, json!({"models": [{"name": "codellama:7b"}]})),
        _ => Reply::Json(404, json!({})),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"served\"\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"coder-1b\"\n\n\
         [[backend]]\nname = \"wrong-model\"\nkind = \"ollama\"\nbase_url = \"{}\"\nmodel = \"starcoder\"\n\n\
         [[backend]]\nname = \"gone\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n",
        openai.base, ollama.base
    );
    std::fs::write(dir.path().join("backends.toml"), toml).unwrap();
    let out = keyhole(vec!["backends".into()], dir.path(), &[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    // A configured server that is down makes the listing fail, after it is printed.
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim(), "keyhole: not ready: gone (see above)");
    let after = |name: &str| {
        let lines: Vec<&str> = stdout.lines().collect();
        let at = lines.iter().position(|l| l.starts_with(name)).unwrap();
        lines[at + 1].trim().to_string()
    };
    assert_eq!(after("embedded"), "built in: needs no server");
    assert_eq!(after("served"), "answers; serves 2: coder-1b, chat-7b");
    assert_eq!(
        after("wrong-model"),
        "answers; serves 1: codellama:7b (NOT starcoder)"
    );
    assert!(
        after("gone").starts_with("no answer to the model list: gone: cannot connect"),
        "{stdout}"
    );
    let out = keyhole(vec!["backends".into(), "--json".into()], dir.path(), &[]).await;
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let status: Vec<(&str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["name"].as_str().unwrap(), b["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        [
            ("embedded", "ready"),
            ("served", "ready"),
            ("wrong-model", "ready"),
            ("gone", "down")
        ]
    );
    assert_eq!(listed[1]["models"], json!(["coder-1b", "chat-7b"]));
}
