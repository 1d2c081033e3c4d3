//! No secret leaks: the real binary completes and evaluates against loopback servers that
//! answer, fail, or echo the Authorization header back, and the API key must appear in no
//! output and no file keyhole wrote (backends.toml names only the variable).

use crate::backends_support;
use crate::reliability_support;

use std::collections::HashSet;
use std::path::Path;
use std::process::Output;

use backends_support::{Recorded, Reply, Server};
use reliability_support::{keyhole, write_backends};
use serde_json::json;

/// A variable no other test sets, and a key no file could hold by chance.
const KEY_VAR: &str = "KEYHOLE_RELIABILITY_SECRET_KEY";
const KEY: &str = "sk-kh-9Vq4Tz7Lw2Rb8Nc5Xe3Ym6Pd1";
/// A server's error detail is cut to this many characters (src/model/http/transport.rs).
const DETAIL_CHARS: usize = 300;
const HOLE: &str = "src/main/java/com/acme/shop/web/BaseController.java:24:24";

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

/// Every 8-byte run of the key, so that a key cut short is found too.
fn key_fragments() -> HashSet<&'static [u8]> {
    KEY.as_bytes().windows(8).collect()
}

fn leaks(bytes: &[u8], fragments: &HashSet<&[u8]>) -> bool {
    bytes.windows(8).any(|w| fragments.contains(w))
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

fn write_leaky_backend(scratch: &Path, base: &str) {
    let toml = format!(
        "[[backend]]\nname = \"leaky\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"gpt-3.5-turbo-instruct\"\napi_key_env = \"{KEY_VAR}\"\nretries = 0\ndeadline_secs = 5\n"
    );
    write_backends(scratch, &toml);
}

/// Runs `complete` and `eval --holes 5` against a server answering with `handler`, then
/// checks every output and every file written (but backends.toml) for the key. Returns the
/// outputs so that callers can check what happened.
async fn run_and_check(
    handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
) -> [Output; 2] {
    let server = Server::start(handler).await;
    let scratch = tempfile::tempdir().unwrap();
    write_leaky_backend(scratch.path(), &server.base);
    let out = scratch.path().join("out");
    let env = [(KEY_VAR, KEY)];
    // The binary blocks this thread; the server runs on the runtime's worker threads.
    let complete = ["complete", &sample(), HOLE, "--backend", "leaky", "-k", "3"];
    let complete = keyhole(scratch.path(), &complete, &env);
    let eval = [
        "eval",
        &sample(),
        "--holes",
        "5",
        "--backend",
        "leaky",
        "--out",
        out.to_str().unwrap(),
    ];
    let eval = keyhole(scratch.path(), &eval, &env);

    let fragments = key_fragments();
    let requests = server.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    }
    for (name, output) in [("complete", &complete), ("eval", &eval)] {
        for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(!leaks(bytes, &fragments), "{name} {stream}: {text}");
        }
    }
    let backends = scratch.path().join("config/backends.toml");
    let written: Vec<_> = files_under(scratch.path())
        .into_iter()
        .filter(|f| *f != backends)
        .collect();
    for file in &written {
        let bytes = std::fs::read(file).unwrap();
        assert!(
            !leaks(&bytes, &fragments),
            "the key is in {}",
            file.display()
        );
    }
    [complete, eval]
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_leave_the_key_out_of_outputs_labels_reports_and_caches() {
    let [complete, eval] =
        run_and_check(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]})))
            .await;
    assert!(complete.status.success(), "{}", stderr(&complete));
    assert!(eval.status.success(), "{}", stderr(&eval));
    let out = String::from_utf8_lossy(&eval.stdout);
    assert!(out.contains('|'), "a report table: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_errors_leave_the_key_out() {
    let [complete, _] =
        run_and_check(|_, _| Reply::Json(500, json!({"error": "internal error"}))).await;
    assert!(stderr(&complete).contains("answered 500: internal error"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_authorization_header_is_redacted() {
    let [complete, _] = run_and_check(|request, _| {
        let auth = &request.headers["authorization"];
        Reply::Json(
            401,
            json!({"error": {"message": format!("bad credentials: {auth}")}}),
        )
    })
    .await;
    assert!(stderr(&complete).contains("bad credentials: Bearer [redacted]"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_key_cut_by_the_detail_limit_is_redacted() {
    // The key starts 12 characters before the cut, so only its beginning would survive.
    let [complete, _] = run_and_check(|request, _| {
        let auth = &request.headers["authorization"];
        let padding = "x".repeat(DETAIL_CHARS - 12 - "Bearer ".len());
        Reply::Json(
            401,
            json!({"error": {"message": format!("{padding}{auth}")}}),
        )
    })
    .await;
    assert_eq!(complete.status.code(), Some(2), "{}", stderr(&complete));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_key_in_an_error_event_is_redacted() {
    // Servers also report errors inside successful answers (as OpenAI does mid-stream).
    let [complete, _] = run_and_check(|request, _| {
        let auth = &request.headers["authorization"];
        Reply::Json(
            200,
            json!({"error": {"message": format!("bad credentials: {auth}")}}),
        )
    })
    .await;
    assert!(stderr(&complete).contains("bad credentials: Bearer [redacted]"));
}

/// Forms of the key a server may echo: other cases, and percent-encoded (every byte, as some
/// encoders do) with upper- and lowercase hex digits.
fn key_forms() -> [String; 4] {
    let encoded: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    [
        KEY.to_lowercase(),
        KEY.to_uppercase(),
        encoded.clone(),
        encoded.to_lowercase(),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_key_in_another_case_or_percent_encoded_is_redacted() {
    let [complete, _] = run_and_check(|_, _| {
        let forms = key_forms().join(" ");
        Reply::Json(
            401,
            json!({"error": {"message": format!("bad key: {forms}")}}),
        )
    })
    .await;
    let stderr = stderr(&complete);
    assert!(
        stderr.contains("bad key: [redacted] [redacted] [redacted] [redacted]"),
        "{stderr}"
    );
    for form in key_forms() {
        assert!(!stderr.contains(&form[..12]), "{form} in {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_in_a_completion_is_replaced_before_it_is_printed_or_stored() {
    // run_and_check finds no piece of the key on the screen, in label files or reports.
    let [complete, eval] = run_and_check(|_, _| {
        let text = format!("String key = \"{KEY}\"; // {}", KEY.to_lowercase());
        Reply::Json(200, json!({"choices": [{"index": 0, "text": text}]}))
    })
    .await;
    let out = String::from_utf8_lossy(&complete.stdout);
    assert!(
        out.contains("String key = \"[redacted]\"; // [redacted]"),
        "{out}"
    );
    assert!(eval.status.success(), "{}", stderr(&eval));
}

#[test]
fn keyhole_backends_masks_credentials_and_queries_in_urls() {
    let scratch = tempfile::tempdir().unwrap();
    write_leaky_backend(
        scratch.path(),
        "http://user:hunter2@127.0.0.1:9/v1?token=s3cret",
    );
    let out = keyhole(scratch.path(), &["backends"], &[(KEY_VAR, KEY)]);
    let text = String::from_utf8_lossy(&out.stdout);
    // Nothing listens there: the listing says so, and fails, after it is printed.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(text.contains("http://***@127.0.0.1:9/v1?***"), "{text}");
    let shown = format!("{text}{}", stderr(&out));
    assert!(
        !shown.contains("hunter2") && !shown.contains("s3cret"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_urls_user_info_and_query_echoed_by_the_server_are_redacted() {
    const PASSWORD: &str = "Pa55word-for-alice";
    const QUERY_KEY: &str = "QueryKey-31415-9265";
    // The server echoes what it was sent: the path with its query and the Authorization
    // header (reqwest sends the URL's user info as Basic credentials).
    let server = Server::start(|request, _| {
        let auth = request
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        let message = format!("denied {} for {auth}", request.path);
        Reply::Json(401, json!({"error": {"message": message}}))
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let base = server
        .base
        .replacen("http://", &format!("http://alice:{PASSWORD}@"), 1);
    write_leaky_backend(scratch.path(), &format!("{base}/v1?api-key={QUERY_KEY}"));
    let out = scratch.path().join("out");
    let complete = ["complete", &sample(), HOLE, "--backend", "leaky"];
    let complete = keyhole(scratch.path(), &complete, &[(KEY_VAR, KEY)]);
    let eval = [
        "eval",
        &sample(),
        "--holes",
        "2",
        "--backend",
        "leaky",
        "--out",
        out.to_str().unwrap(),
    ];
    let eval = keyhole(scratch.path(), &eval, &[(KEY_VAR, KEY)]);
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.path.contains(QUERY_KEY)),
        "the query reached the server: {requests:?}"
    );
    let basic = requests
        .iter()
        .filter_map(|r| r.headers.get("authorization"))
        .find_map(|a| a.strip_prefix("Basic "))
        .map(str::to_string);
    let text = stderr(&complete);
    assert_eq!(complete.status.code(), Some(2), "{text}");
    assert!(
        text.contains("denied /v1/completions?api-key=[redacted]"),
        "{text}"
    );
    let backends = scratch.path().join("config/backends.toml");
    let mut shown = vec![
        ("complete".to_string(), complete.stdout, complete.stderr),
        ("eval".to_string(), eval.stdout, eval.stderr),
    ];
    for file in files_under(scratch.path())
        .into_iter()
        .filter(|f| *f != backends)
    {
        shown.push((
            file.display().to_string(),
            std::fs::read(&file).unwrap(),
            vec![],
        ));
    }
    let secrets = [
        Some(PASSWORD.to_string()),
        Some(QUERY_KEY.to_string()),
        basic,
    ];
    for (name, stdout, stderr) in shown {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
        for secret in secrets.iter().flatten() {
            assert!(
                !text.contains(secret.as_str()),
                "{secret} in {name}: {text}"
            );
        }
    }
}
