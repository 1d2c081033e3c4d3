//! Faults become typed errors naming the backend and URL, never panics or hangs; retries
//! honour Retry-After; API keys are sent but never shown.

use crate::backends_support;

use std::time::{Duration, Instant};

use backends_support::{Reply, Server, complete_streaming, config, request, sse};
use keyhole::testing::model::http::MAX_ANSWER_BYTES;
use keyhole::{BackendConfig, BackendKind, testing::model::http::build_http};
use keyhole::{BackendError, Completion};
use serde_json::json;

async fn complete(cfg: &BackendConfig) -> Result<Vec<Completion>, BackendError> {
    build_http(cfg).unwrap().complete(&request(1), None).await
}

fn ok_answer() -> Reply {
    Reply::Json(200, json!({"choices": [{"text": "1;"}]}))
}

fn assert_names_backend_and_url(error: &BackendError, server: &Server, path: &str) {
    let message = error.to_string();
    assert!(message.starts_with("test-backend: "), "{message}");
    assert!(
        message.contains(&format!("{}{path}", server.base)),
        "{message}"
    );
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = complete(&config(BackendKind::OpenAi, &base))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, BackendError::Connect { url, .. } if *url == format!("{base}/v1/completions")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_silent_server_runs_into_the_deadline() {
    let server = Server::start(|_, _| Reply::Hang).await;
    let mut cfg = config(BackendKind::Ollama, &server.base);
    cfg.deadline_secs = 1;
    let start = Instant::now();
    let error = complete(&cfg).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(3));
    assert!(
        matches!(error, BackendError::Deadline { seconds: 1, .. }),
        "{error:?}"
    );
    assert_names_backend_and_url(&error, &server, "/api/generate");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_say_what_the_server_said() {
    let server =
        Server::start(|_, _| Reply::Json(400, json!({"error": {"message": "n must be 1"}}))).await;
    let mut cfg = config(BackendKind::OpenAi, &server.base);
    cfg.retries = 3;
    let error = complete(&cfg).await.unwrap_err();
    assert!(
        matches!(&error, BackendError::Status { status: 400, detail, .. } if detail == "n must be 1"),
        "{error:?}"
    );
    assert_names_backend_and_url(&error, &server, "/v1/completions");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let server = Server::start(|_, _| Reply::Json(503, json!({"error": "loading model"}))).await;
    let mut cfg = config(BackendKind::LlamaCpp, &server.base);
    cfg.retries = 2;
    let error = complete(&cfg).await.unwrap_err();
    assert!(
        matches!(&error, BackendError::Status { status: 503, detail, .. } if detail == "loading model"),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn rate_limits_honour_retry_after_then_succeed() {
    let server = Server::start(|_, seen| match seen {
        0 => Reply::Raw {
            status: 429,
            headers: vec![("Retry-After", "1".into())],
            body: Vec::new(),
        },
        _ => ok_answer(),
    })
    .await;
    let mut cfg = config(BackendKind::OpenAi, &server.base);
    cfg.retries = 1;
    let start = Instant::now();
    let completions = complete(&cfg).await.unwrap();
    assert_eq!(completions[0].text, "1;");
    assert!(start.elapsed() >= Duration::from_secs(1), "waited as asked");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn rate_limits_that_outlast_the_retries_are_reported() {
    let server = Server::start(|_, _| Reply::Raw {
        status: 429,
        headers: vec![("Retry-After", "0".into())],
        body: Vec::new(),
    })
    .await;
    let mut cfg = config(BackendKind::OpenAi, &server.base);
    cfg.retries = 2;
    let error = complete(&cfg).await.unwrap_err();
    assert!(
        matches!(error, BackendError::RateLimited { .. }),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn malformed_answers_are_reported() {
    let server = Server::start(|request, _| match request.path.as_str() {
        "/completion" => Reply::Raw {
            status: 200,
            headers: Vec::new(),
            body: b"{\"content\": ".to_vec(),
        },
        _ => Reply::Json(200, json!({"count": 3})),
    })
    .await;
    let backend = build_http(&config(BackendKind::LlamaCpp, &server.base)).unwrap();
    let error = backend.complete(&request(1), None).await.unwrap_err();
    assert!(matches!(error, BackendError::Malformed { .. }), "{error:?}");
    let error = backend.count_tokens("x").await.unwrap().unwrap_err();
    assert!(
        matches!(&error, BackendError::Malformed { detail, .. } if detail.contains("tokens")),
        "{error:?}"
    );
}

#[tokio::test]
async fn error_events_in_a_stream_are_reported() {
    let events = sse(&[json!({"error": {"message": "context too long"}})]);
    let server = Server::start(move |_, _| Reply::Stream(events.clone())).await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let error = complete_streaming(backend.as_ref(), &request(1))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, BackendError::Malformed { detail, .. } if detail.contains("context too long")),
        "{error:?}"
    );
}

#[tokio::test]
async fn streams_that_end_early_are_truncated() {
    let server = Server::start(|request, _| match request.path.as_str() {
        "/v1/completions" => Reply::Stream(vec![
            "data: {\"choices\": [{\"text\": \"1\"}]}\n\n".to_string(),
        ]),
        _ => Reply::Stream(vec![
            json!({"response": "1", "done": false}).to_string() + "\n",
        ]),
    })
    .await;
    for kind in [BackendKind::OpenAi, BackendKind::Ollama] {
        let backend = build_http(&config(kind, &server.base)).unwrap();
        let error = complete_streaming(backend.as_ref(), &request(1))
            .await
            .unwrap_err();
        assert!(
            matches!(error, BackendError::TruncatedStream { .. }),
            "{kind:?}: {error:?}"
        );
    }
}

#[tokio::test]
async fn bodies_shorter_than_promised_are_truncated() {
    let server = Server::start(|_, _| Reply::Short).await;
    let error = complete(&config(BackendKind::OpenAi, &server.base))
        .await
        .unwrap_err();
    assert!(
        matches!(error, BackendError::TruncatedStream { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn empty_choices_are_reported() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"choices": []}))).await;
    let error = complete(&config(BackendKind::OpenAi, &server.base))
        .await
        .unwrap_err();
    assert!(
        matches!(error, BackendError::EmptyChoices { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn oversized_answers_are_refused_whole_or_streamed() {
    let server = Server::start(|request, _| {
        let filler = "x".repeat(MAX_ANSWER_BYTES);
        if request.body["stream"] == json!(true) {
            let line = format!(
                "data: {}\n\n",
                json!({"choices": [{"text": "x".repeat(1 << 20)}]})
            );
            Reply::Stream(vec![line; 9])
        } else {
            Reply::Json(200, json!({"choices": [{"text": filler}]}))
        }
    })
    .await;
    let cfg = config(BackendKind::OpenAi, &server.base);
    let error = complete(&cfg).await.unwrap_err();
    assert!(
        matches!(
            error,
            BackendError::TooLarge {
                limit: MAX_ANSWER_BYTES,
                ..
            }
        ),
        "{error:?}"
    );
    let backend = build_http(&cfg).unwrap();
    let error = complete_streaming(backend.as_ref(), &request(1))
        .await
        .unwrap_err();
    assert!(matches!(error, BackendError::TooLarge { .. }), "{error:?}");
}

/// Through the binary, so that the key is set in the child's environment, not in this test
/// process's.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_is_sent_as_a_bearer_token_but_never_shown() {
    const VAR: &str = "KEYHOLE_TEST_KEY_BEARER_NEVER_SHOWN";
    const KEY: &str = "sk-test-0123456789";
    let server = Server::start(|_, _| {
        Reply::Json(401, json!({"error": {"message": format!("bad key {KEY}")}}))
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let entry = format!(
        "[[backend]]\nname = \"keyed\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"{VAR}\"\n",
        server.base
    );
    crate::reliability_support::write_backends(scratch.path(), &entry);
    let sample = crate::common::sample_path();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args([
            "complete",
            &sample.to_string_lossy(),
            keyhole::sample::DEMO_HOLE,
        ])
        .args(["--backend", "keyed", "-k", "1"])
        .envs(crate::common::hermetic_env(scratch.path()))
        .env(VAR, KEY)
        .output()
        .await
        .unwrap();

    assert_eq!(
        server.requests()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("401"), "{stderr}");
    for shown in [&output.stdout, &output.stderr] {
        let shown = String::from_utf8_lossy(shown);
        assert!(!shown.contains(KEY), "{shown}");
    }
}

#[tokio::test]
async fn a_missing_key_variable_is_a_config_error_naming_it() {
    let mut cfg = config(BackendKind::Ollama, "http://127.0.0.1:9");
    cfg.api_key_env = Some("KEYHOLE_TEST_KEY_NEVER_SET".to_string());
    let error = complete(&cfg).await.unwrap_err();
    assert!(
        matches!(&error, BackendError::Config { detail, .. } if detail.contains("KEYHOLE_TEST_KEY_NEVER_SET")),
        "{error:?}"
    );
}

#[tokio::test]
async fn secrets_in_the_url_stay_out_of_messages() {
    let server = Server::start(|_, _| Reply::Json(500, json!({"error": "boom"}))).await;
    let base = server.base.replace("http://", "http://user:hunter2@") + "/proxy?token=s3cret";
    let error = complete(&config(BackendKind::OpenAi, &base))
        .await
        .unwrap_err();
    let message = error.to_string();
    let masked = server.base.replace("http://", "http://***@") + "/proxy/v1/completions?***";
    assert!(message.contains(&masked), "{message}");
    assert!(
        !message.contains("hunter2") && !message.contains("s3cret"),
        "{message}"
    );
    assert_eq!(
        server.requests()[0].path,
        "/proxy/v1/completions?token=s3cret"
    );
}

#[tokio::test]
async fn the_embedded_kind_is_not_built_here() {
    let error = build_http(&BackendConfig::embedded()).err().unwrap();
    assert!(matches!(error, BackendError::Config { .. }), "{error:?}");
}
