//! Only the user's own programs reach `keyhole proxy`: a web page's request (its `Origin`, or
//! its own name as `Host` after DNS rebinding) is refused, recorded as refused and never
//! reaches the server with the backend's key; listening beyond the machine takes a flag.

use serde_json::json;

use crate::backends_support::{Reply, Server};
use crate::proxy::{RunningProxy, keyhole_finishing, recorded, spawn_proxy};

const KEY: &str = "sk-backend-key-behind-keyhole";
const KEY_ENV: (&str, &str) = ("KEYHOLE_TEST_PROXY_KEY", KEY);

/// A backend named `keyed` at `base` whose key is [`KEY`], in the config under `scratch`.
fn keyed_backend(base: &str, scratch: &std::path::Path) {
    let config = scratch.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let backends = format!(
        "[[backend]]\nname = \"keyed\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"m\"\napi_key_env = \"{}\"\n",
        KEY_ENV.0
    );
    std::fs::write(config.join("backends.toml"), backends).unwrap();
}

fn keyed_proxy(server: &Server, scratch: &std::path::Path, more: &[&str]) -> RunningProxy {
    keyed_backend(&server.base, scratch);
    let mut args = vec!["--listen", "127.0.0.1:0", "--to", "keyed"];
    args.extend(more);
    spawn_proxy(&args, scratch, &[KEY_ENV])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_pages_request_is_refused_recorded_and_never_gets_the_key() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "x"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = keyed_proxy(&server, scratch.path(), &[]);
    let client = reqwest::Client::new();
    let url = format!("{}/completion", proxy.base);
    // What a page's fetch sends across origins without a preflight: text/plain, its Origin.
    let cross_origin = client
        .post(&url)
        .header("origin", "http://attacker.example")
        .header("content-type", "text/plain")
        .body(r#"{"prompt": "spend the key"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(cross_origin.status(), 403);
    let said = cross_origin.text().await.unwrap();
    assert!(said.contains("Origin http://attacker.example"), "{said}");
    // After DNS rebinding the page's own name is the Host, and its fetch is same-origin.
    let rebound = client
        .post(&url)
        .header("host", "attacker.example:8012")
        .json(&json!({"prompt": "read the answer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    assert!(
        server.requests().is_empty(),
        "a refused request reached the server"
    );

    // The plugin's own request goes through, with the backend's key.
    let own = client
        .post(&url)
        .json(&json!({"prompt": "x = "}))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
    assert_eq!(
        server.requests()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
    let exchanges = recorded(scratch.path());
    assert_eq!(exchanges.len(), 3, "{exchanges:?}");
    for (refused, reason) in exchanges[..2].iter().zip([
        "Origin http://attacker.example",
        "Host attacker.example:8012",
    ]) {
        assert_eq!(refused["status"], 403);
        assert_eq!(refused["refused"], true);
        let error = refused["error"].as_str().unwrap();
        assert!(error.contains(reason), "{error}");
    }
    assert_eq!(exchanges[2]["status"], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_the_user_allows_and_localhost_names_are_served() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "x"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = keyed_proxy(
        &server,
        scratch.path(),
        &["--allow-origin", "http://localhost:3000"],
    );
    let port = proxy.base.rsplit(':').next().unwrap().to_string();
    let client = reqwest::Client::new();
    for (origin, host) in [
        (Some("http://localhost:3000"), format!("localhost:{port}")),
        (None, format!("127.0.0.1:{port}")),
        (None, "LOCALHOST".to_string()),
    ] {
        let mut request = client
            .post(format!("{}/completion", proxy.base))
            .header("host", &host)
            .json(&json!({"prompt": "x = "}));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 200, "{origin:?} {host}");
    }
    let other = client
        .post(format!("{}/completion", proxy.base))
        .header("origin", "http://localhost:4000")
        .json(&json!({"prompt": "x = "}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 403);
}

#[test]
fn listening_beyond_this_machine_takes_a_flag_and_says_what_it_exposes() {
    let scratch = tempfile::tempdir().unwrap();
    keyed_backend("http://127.0.0.1:9", scratch.path());
    let output = keyhole_finishing(
        &[
            "proxy",
            "--listen",
            "0.0.0.0:0",
            "--to",
            "http://127.0.0.1:9",
        ],
        scratch.path(),
    );
    let error = crate::reliability_support::one_line_error(&output);
    assert!(error.contains("--allow-remote"), "{error}");
    let proxy = spawn_proxy(
        &["--listen", "0.0.0.0:0", "--allow-remote", "--to", "keyed"],
        scratch.path(),
        &[KEY_ENV],
    );
    let warning = proxy.said.concat();
    assert!(
        warning.contains("0.0.0.0") && warning.contains("keyed's API key"),
        "{warning}"
    );
    assert!(!warning.contains(KEY), "{warning}");
}
