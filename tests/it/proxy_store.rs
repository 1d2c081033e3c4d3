//! The record store as a person who leaves proxies running meets it: one store that several
//! `keyhole proxy` processes write at once, with unique ids and nothing lost.

use std::collections::BTreeSet;

use serde_json::json;

use crate::backends_support::{Reply, Server};
use crate::proxy::{recorded, start_proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_proxies_on_one_store_give_unique_ids_and_lose_nothing() {
    let server = Server::start(|request, _| {
        Reply::Json(200, json!({"content": request.body["prompt"].clone()}))
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    // The README's setup: one proxy per server, both recording to the default store.
    let proxies = [
        start_proxy(&server.base, scratch.path()),
        start_proxy(&server.base, scratch.path()),
    ];
    let client = reqwest::Client::new();
    let mut requests = Vec::new();
    for (p, proxy) in proxies.iter().enumerate() {
        for i in 0..60 {
            let client = client.clone();
            let url = format!("{}/completion", proxy.base);
            requests.push(tokio::spawn(async move {
                let answer = client
                    .post(url)
                    .json(&json!({"prompt": format!("p{p}-{i}"), "n_predict": 4}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 200);
            }));
        }
    }
    for request in requests {
        request.await.unwrap();
    }
    // A 502 on one proxy and a request on the other once shared an id: not any more.
    let exchanges = recorded(scratch.path());
    let ids: BTreeSet<u64> = exchanges
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(exchanges.len(), 120, "{} recorded", exchanges.len());
    assert_eq!(ids.len(), 120, "duplicate ids");
    let prompts: BTreeSet<String> = exchanges
        .iter()
        .map(|e| e["sent"]["prompt"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(prompts.len(), 120, "an exchange lost or recorded twice");
    // `show` reaches each of them.
    let last = ids.last().unwrap().to_string();
    let shown = crate::common::ok(crate::common::keyhole(
        &["recorded", "show", &last, "--json"],
        scratch.path(),
    ));
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["id"].as_u64().unwrap().to_string(), last);
}
