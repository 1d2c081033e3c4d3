//! No credential a plugin sends reaches the record store or the screen: not in the query
//! string, not in any field of the JSON body however deep or however it is named.

use serde_json::json;

use crate::backends_support::{Reply, Server};
use crate::common;
use crate::proxy::{files_holding, recorded, start_proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_the_query_and_anywhere_in_the_body_are_never_recorded() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "ok"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&server.base, scratch.path());
    let secrets = [
        "query-api-key-1111",
        "query-key-2222",
        "query-sig-3333",
        "nested-api-key-4444",
        "auth-5555",
        "credentials-6666",
        "bearer-7777",
        "pwd-8888",
        "access-token-9999",
    ];
    let endpoint = format!(
        "/v1/completions?api_key={}&key={}&stream=false&sig={}",
        secrets[0], secrets[1], secrets[2]
    );
    let body = json!({
        "prompt": "def f(",
        "max_tokens": 8,
        "options": {"api_key": secrets[3], "temperature": 0.1},
        "auth": secrets[4],
        "credentials": {"user": "me", "secret": secrets[5]},
        "bearer": secrets[6],
        "extra_settings": [{"pwd": secrets[7]}],
        "access_token": secrets[8],
    });
    let answer = reqwest::Client::new()
        .post(format!("{}{endpoint}", proxy.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // The server got them all: they are the plugin's to send.
    assert_eq!(server.requests()[0].body, body);

    let data = scratch.path().join("data");
    for secret in secrets {
        let holding = files_holding(&data, secret);
        assert!(holding.is_empty(), "{holding:?} hold {secret}");
    }
    let exchanges = recorded(scratch.path());
    let e = &exchanges[0];
    assert_eq!(
        e["endpoint"],
        "/v1/completions?api_key=[redacted]&key=[redacted]&stream=false&sig=[redacted]"
    );
    // What is not a credential is kept as it was sent.
    assert_eq!(e["sent"]["parameters"]["max_tokens"], 8);
    assert_eq!(e["sent"]["parameters"]["options"]["temperature"], 0.1);
    assert_eq!(e["sent"]["parameters"]["credentials"], "[redacted]");
    let shown = common::ok(common::keyhole(&["recorded", "show", "1"], scratch.path()));
    let shown = String::from_utf8_lossy(&shown.stdout);
    for secret in secrets {
        assert!(!shown.contains(secret), "{shown}");
    }
}
