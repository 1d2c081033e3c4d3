//! `keyhole proxy --compose`: a fill-in-the-middle request whose hole is in the repository
//! reaches the server with keyhole's context in the place its format has for one and the
//! plugin's text around the cursor as sent; anything else reaches it exactly as sent; the
//! record keeps both and says why.

use std::io::BufRead;

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::common;
use crate::proxy::{RunningProxy, recorded, spawn_proxy};
use keyhole::CandidateId;
use keyhole::testing::pin::Pin;
use keyhole::{Dirs, Hole, Session, Settings};

const ORDER_SERVICE: &str = "src/main/java/com/acme/shop/service/OrderService.java";

/// The text before and after a cursor in the sample's order service, in the middle of
/// `placeOrder`'s first line, as an editor plugin sends it.
fn around_cursor() -> (String, String) {
    let text = std::fs::read_to_string(common::sample_path().join(ORDER_SERVICE)).unwrap();
    let cursor = text.find("loadCustomer(customerId);").unwrap();
    (text[..cursor].to_string(), text[cursor..].to_string())
}

/// `keyhole proxy --compose --repo SAMPLE` in front of `server`, once the repository is open.
fn composing_proxy(server: &Server, scratch: &std::path::Path, extra: &[&str]) -> RunningProxy {
    let sample = common::sample();
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--to",
        &server.base,
        "--compose",
        "--repo",
        &sample,
    ];
    args.extend_from_slice(extra);
    let mut proxy = spawn_proxy(&args, scratch, &[]);
    // Requests before the repository is open go as sent: the tests wait for it.
    let mut line = String::new();
    while !line.contains("is open (") {
        line.clear();
        proxy.stderr.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the proxy ended: {:?}", proxy.said);
    }
    proxy
}

fn ok_server() -> impl std::future::Future<Output = Server> {
    Server::start(|_, _| Reply::Json(200, json!({"content": "x", "choices": [{"text": "x"}]})))
}

async fn post(proxy: &RunningProxy, path: &str, body: Vec<u8>) {
    let answer = reqwest::Client::new()
        .post(format!("{}{path}", proxy.base))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.bytes().await.unwrap();
}

/// Each chunk is a stretch of the file it names.
fn assert_chunks_are_the_repositorys(chunks: &[Value]) {
    assert!(!chunks.is_empty(), "keyhole sent no context");
    for chunk in chunks {
        let file = chunk["filename"].as_str().unwrap();
        let held = std::fs::read_to_string(common::sample_path().join(file)).unwrap();
        let text = chunk["text"].as_str().unwrap();
        assert!(!text.trim().is_empty());
        assert!(held.contains(text.trim()), "{file} does not hold {text:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infill_request_reaches_the_server_with_keyholes_context_and_the_plugins_text() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    let (before, after) = around_cursor();
    let (prefix, middle) = before.split_at(before.rfind('\n').unwrap() + 1);
    // As llama.vim sends it: the cursor line's start as the prompt, its ring of chunks.
    let request = json!({
        "input_prefix": prefix,
        "prompt": middle,
        "input_suffix": after,
        "input_extra": [{"filename": "notes.txt", "text": "the plugin's ring\n"}],
        "n_predict": 128,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": true,
    });
    post(&proxy, "/infill", serde_json::to_vec(&request).unwrap()).await;
    let seen = server.body();
    for field in [
        "input_prefix",
        "prompt",
        "input_suffix",
        "n_predict",
        "samplers",
    ] {
        assert_eq!(seen[field], request[field], "{field} as the plugin sent it");
    }
    let chunks = seen["input_extra"].as_array().unwrap();
    assert!(
        chunks.iter().all(|c| c["filename"] != "notes.txt"),
        "{chunks:?}"
    );
    assert_chunks_are_the_repositorys(chunks);

    let e = &recorded(scratch.path())[0];
    assert_eq!(
        e["sent"]["extra"][0]["filename"], "notes.txt",
        "the plugin's, kept"
    );
    let composition = &e["composition"];
    assert!(
        composition.get("forwarded_because").is_none(),
        "{composition}"
    );
    assert_eq!(composition["sent"]["extra"], seen["input_extra"]);
    assert!(
        composition["candidate"].as_u64().unwrap() < 62,
        "{composition}"
    );
    let line = 1 + before.matches('\n').count();
    assert!(
        composition["hole"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{ORDER_SERVICE}:{line}:")),
        "{composition}"
    );
    // `recorded list` marks it; `show` prints both prompts.
    let listed = common::ok(common::keyhole(&["recorded", "list"], scratch.path()));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("(composed)"));
    let shown = common::ok(common::keyhole(&["recorded", "show", "1"], scratch.path()));
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("--- extra chunk: notes.txt ---"), "{shown}");
    let file = chunks[0]["filename"].as_str().unwrap();
    assert!(
        shown.contains(&format!(
            "--- keyhole sent instead: extra chunk: {file} ---"
        )),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_and_ollama_completions_with_a_suffix_get_the_context_before_their_prompt() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    let (before, after) = around_cursor();
    let openai = json!({"model": "m", "prompt": before, "suffix": after, "max_tokens": 64});
    // Ollama's, as Continue's and Twinny's Ollama providers send it.
    let ollama = json!({"model": "m", "prompt": before, "suffix": after, "raw": false,
        "options": {"num_predict": 64}});
    post(
        &proxy,
        "/v1/completions",
        serde_json::to_vec(&openai).unwrap(),
    )
    .await;
    post(
        &proxy,
        "/api/generate",
        serde_json::to_vec(&ollama).unwrap(),
    )
    .await;
    let exchanges = recorded(scratch.path());
    for (i, (request, seen)) in [openai, ollama].iter().zip(server.requests()).enumerate() {
        let seen = seen.body;
        assert_eq!(seen["suffix"], request["suffix"]);
        for (field, value) in request.as_object().unwrap() {
            if field != "prompt" {
                assert_eq!(&seen[field], value, "{field} as the plugin sent it");
            }
        }
        let prompt = seen["prompt"].as_str().unwrap();
        let context = prompt
            .strip_suffix(before.as_str())
            .expect("the plugin's prompt ends keyhole's");
        assert!(context.ends_with('\n') && context.len() > 1, "{context:?}");
        let e = &exchanges[i];
        assert_eq!(e["sent"]["prompt"], request["prompt"], "the plugin's, kept");
        assert_eq!(e["composition"]["sent"]["prompt"], seen["prompt"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_leaves_the_model_no_room_for_a_context_goes_as_sent() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    let (before, after) = around_cursor();
    let request = serde_json::to_vec(&json!({
        "model": "m", "prompt": before, "suffix": after, "max_tokens": 1_000_000,
    }))
    .unwrap();
    post(&proxy, "/v1/completions", request.clone()).await;
    assert_eq!(server.requests()[0].raw, request);
    let e = &recorded(scratch.path())[0];
    let why = e["composition"]["forwarded_because"].as_str().unwrap();
    assert!(why.starts_with("no room for a context"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_keyhole_cannot_compose_goes_exactly_as_sent_and_the_record_says_why() {
    let server = Server::start(|_, _| Reply::Json(200, json!({"content": "x"}))).await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    // A hole in no file of the repository, spaced and ordered as no serializer writes it.
    let elsewhere = br#"{ "input_suffix" : "}\n",  "input_prefix":"class Elsewhere {\n  int nowhere() {\n    return ","prompt":"" ,"n_predict":16}"#;
    let chat = br#"{"model":"m","messages":[ {"role":"user","content":"hello"} ]}"#;
    post(&proxy, "/infill", elsewhere.to_vec()).await;
    post(&proxy, "/v1/chat/completions", chat.to_vec()).await;
    let seen = server.requests();
    assert_eq!(seen[0].raw, elsewhere, "byte for byte");
    assert_eq!(seen[1].raw, chat, "byte for byte");
    let exchanges = recorded(scratch.path());
    let why = |i: usize| exchanges[i]["composition"]["forwarded_because"].clone();
    assert!(
        why(0).as_str().unwrap().contains("not in the repository"),
        "{:?}",
        why(0)
    );
    assert!(why(1).as_str().unwrap().contains("chat"), "{:?}", why(1));
    assert!(exchanges[0]["composition"].get("sent").is_none());
    let listed = common::ok(common::keyhole(&["recorded", "list"], scratch.path()));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("(forwarded as sent)") && !listed.contains("(composed)"),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_deadline_a_request_goes_as_sent() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "0"]);
    let (before, after) = around_cursor();
    let request = serde_json::to_vec(&json!({
        "input_prefix": before, "prompt": "", "input_suffix": after, "n_predict": 16,
    }))
    .unwrap();
    post(&proxy, "/infill", request.clone()).await;
    assert_eq!(server.requests()[0].raw, request);
    let e = &recorded(scratch.path())[0];
    let why = e["composition"]["forwarded_because"].as_str().unwrap();
    assert!(why.contains("past the deadline (0 ms)"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_after_the_repository_opened_is_composed_for_once_it_is_seen() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("repo");
    common::copy_sample(&repo);
    let repo_arg = repo.to_str().unwrap().to_string();
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--to",
        &server.base,
        "--compose",
        "--repo",
        &repo_arg,
        "--compose-deadline-ms",
        "60000",
    ];
    let mut proxy = spawn_proxy(&args, scratch.path(), &[]);
    let mut line = String::new();
    while !line.contains("is open (") {
        line.clear();
        proxy.stderr.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the proxy ended: {:?}", proxy.said);
    }
    let new_file = "src/main/java/com/acme/shop/service/Refunds.java";
    let before = "package com.acme.shop.service;\n\npublic class Refunds {\n    private final long limitCents = 5000;\n\n    public boolean allowed(long cents) {\n        return cents <= ";
    let after = "limitCents;\n    }\n}\n";
    let request = serde_json::to_vec(&json!({
        "input_prefix": before, "prompt": "", "input_suffix": after, "n_predict": 16,
    }))
    .unwrap();
    post(&proxy, "/infill", request.clone()).await;
    std::fs::write(repo.join(new_file), format!("{before}{after}")).unwrap();
    // Files are looked at again at most every 2 seconds, off the requests' path: the request
    // that finds the change goes with the session it finds, a later one with the new one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let composed = loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        post(&proxy, "/infill", request.clone()).await;
        let last = recorded(scratch.path()).pop().unwrap();
        if last["composition"].get("forwarded_because").is_none() {
            break last;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never composed: {last}"
        );
    };
    assert!(
        composed["composition"]["hole"]
            .as_str()
            .unwrap()
            .starts_with(new_file),
        "{composed}"
    );
    let first = &recorded(scratch.path())[0];
    let why = first["composition"]["forwarded_because"].as_str().unwrap();
    assert!(why.contains("not in the repository"), "{why}");
}

/// An infill request at the cursor of [`around_cursor`], as llama.vim sends one.
fn infill_at_the_cursor() -> Vec<u8> {
    let (before, after) = around_cursor();
    serde_json::to_vec(&json!({
        "input_prefix": before, "prompt": "", "input_suffix": after, "n_predict": 16,
    }))
    .unwrap()
}

/// Pin `candidate` for the sample in the data directory of the proxy under `scratch`, as `p`
/// in the UI does.
fn pin_for_the_sample(scratch: &std::path::Path, candidate: CandidateId) {
    Pin::of(&Dirs::under(scratch), &common::sample_path())
        .write(Some(candidate))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_pinned_for_the_repository_is_sent_in_place_of_the_rankers_first() {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    post(&proxy, "/infill", infill_at_the_cursor()).await;
    let first = recorded(scratch.path())[0]["composition"].clone();
    assert!(first.get("pinned").is_none(), "{first}");
    let ranked = first["candidate"].as_u64().unwrap() as usize;
    // Another of RLPG's proposals with a context at this hole.
    let (_elsewhere, dirs) = common::scratch_dirs();
    let settings = Settings {
        dirs,
        ..Settings::default()
    };
    let session = Session::open(&common::sample_path(), &settings).unwrap();
    let hole = Hole::parse(session.index(), first["hole"].as_str().unwrap()).unwrap();
    let proposals = session.proposals(&hole);
    let pinned = proposals
        .iter()
        .find(|p| p.applicable() && p.spec.id != ranked)
        .expect("a second proposal applies")
        .spec
        .id;

    // Pinned while the proxy runs: the next request finds it.
    pin_for_the_sample(scratch.path(), pinned);
    post(&proxy, "/infill", infill_at_the_cursor()).await;
    let composition = recorded(scratch.path())[1]["composition"].clone();
    assert_eq!(composition["candidate"], pinned.index(), "{composition}");
    assert_eq!(composition["pinned"], json!({"candidate": pinned.index()}));
    let seen = server.requests()[1].body.clone();
    assert_eq!(seen["input_extra"], composition["sent"]["extra"]);
    // A proposal's context may be made of a file's lines (its method headers, say): each chunk
    // names a file of the repository.
    let chunks = seen["input_extra"].as_array().unwrap();
    assert!(!chunks.is_empty());
    for chunk in chunks {
        let file = chunk["filename"].as_str().unwrap();
        assert!(common::sample_path().join(file).is_file(), "{chunk}");
    }

    // Unpinned: the ranker's first again.
    Pin::of(&Dirs::under(scratch.path()), &common::sample_path())
        .write(None)
        .unwrap();
    post(&proxy, "/infill", infill_at_the_cursor()).await;
    let composition = recorded(scratch.path())[2]["composition"].clone();
    assert_eq!(composition["candidate"], ranked, "{composition}");
    assert!(composition.get("pinned").is_none(), "{composition}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_retrieved_candidate_is_built_for_the_request_and_one_that_needs_the_backend_gives_way()
 {
    let server = ok_server().await;
    let scratch = tempfile::tempdir().unwrap();
    pin_for_the_sample(scratch.path(), CandidateId::FILE_BM25);
    let proxy = composing_proxy(&server, scratch.path(), &["--compose-deadline-ms", "60000"]);
    post(&proxy, "/infill", infill_at_the_cursor()).await;
    let composition = recorded(scratch.path())[0]["composition"].clone();
    assert_eq!(composition["candidate"], 63, "{composition}");
    assert_eq!(composition["label"], CandidateId::FILE_BM25.label());
    assert_eq!(composition["pinned"], json!({"candidate": 63}));
    let seen = server.requests()[0].body.clone();
    assert_eq!(seen["input_extra"], composition["sent"]["extra"]);
    assert_chunks_are_the_repositorys(seen["input_extra"].as_array().unwrap());

    // RepoCoder's second iteration needs a completion first: the ranker's first goes, and
    // the record says why.
    pin_for_the_sample(scratch.path(), CandidateId::REPOCODER_ITERATION);
    post(&proxy, "/infill", infill_at_the_cursor()).await;
    let composition = recorded(scratch.path())[1]["composition"].clone();
    assert!(
        composition.get("forwarded_because").is_none(),
        "{composition}"
    );
    assert!(
        composition["candidate"].as_u64().unwrap() <= 62,
        "{composition}"
    );
    assert_eq!(composition["pinned"]["candidate"], 67);
    let why = composition["pinned"]["passed_over_because"]
        .as_str()
        .unwrap();
    assert!(
        why.contains("needs the backend") && why.ends_with("the ranker's first instead"),
        "{why}"
    );
}
