//! Each HTTP protocol against a loopback server speaking it: request bodies, parsed answers,
//! streaming, several samples per prompt and token counting.

use crate::backends_support;

use std::time::Duration;

use backends_support::{Reply, Server, complete_streaming, config, request, sse, texts};
use keyhole::{BackendConfig, BackendKind, testing::model::http::build_http};
use keyhole::{Delta, TokenCounting};
use serde_json::json;

fn delta(index: usize, text: &str) -> Delta {
    Delta {
        index,
        text: text.to_string(),
    }
}

#[tokio::test]
async fn a_base_url_ending_in_the_api_version_gets_it_once_and_native_paths_none() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "1;"}]})))
            .await;
    for (kind, base, path) in [
        (BackendKind::OpenAi, "/v1", "/v1/completions"),
        (BackendKind::OpenAiChat, "/v1/", "/v1/chat/completions"),
        (BackendKind::OpenAi, "/proxy/v1", "/proxy/v1/completions"),
        (BackendKind::OpenAi, "/proxy", "/proxy/v1/completions"),
        // A server's own endpoints sit beside its /v1, not under it.
        (BackendKind::LlamaCpp, "/v1", "/completion"),
        (BackendKind::Ollama, "/v1/", "/api/generate"),
    ] {
        let config = config(kind, &format!("{}{base}", server.base));
        let _ = build_http(&config)
            .unwrap()
            .complete(&request(1), None)
            .await;
        let requests = server.requests();
        assert_eq!(
            requests.last().unwrap().path,
            path,
            "base_url ending {base}"
        );
    }
}

#[tokio::test]
async fn openai_sends_all_settings_in_one_request_and_orders_choices() {
    let server = Server::start(|_, _| {
        let choices = json!([{"index": 1, "text": "2;\nnext"}, {"index": 0, "text": "1;"}]);
        Reply::Json(200, json!({ "choices": choices }))
    })
    .await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let mut req = request(2);
    req.suffix = Some("\nreturn x;".to_string());
    let completions = backend.complete(&req, None).await.unwrap();

    assert_eq!(
        texts(&completions),
        ["1;", "2;"],
        "ordered by index, cut at the stop"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/completions");
    assert_eq!(
        requests[0].body,
        json!({
            "model": "test-model", "prompt": "int x =", "suffix": "\nreturn x;", "max_tokens": 17,
            "temperature": 0.5, "stop": ["\n"], "n": 2, "seed": 7, "stream": false,
        })
    );
    assert_eq!(requests[0].headers.get("authorization"), None);
}

#[tokio::test]
async fn openai_leaves_out_unset_suffix_and_seed_and_applies_config_settings() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"text": "1;]"}]}))).await;
    let mut cfg = config(BackendKind::OpenAi, &server.base);
    cfg.temperature = Some(0.0);
    cfg.max_tokens = Some(5);
    cfg.stop = Some(vec!["]".to_string()]);
    let backend = build_http(&cfg).unwrap();
    let mut req = request(1);
    req.seed = None;
    let completions = backend.complete(&req, None).await.unwrap();

    assert_eq!(texts(&completions), ["1;"]);
    let body = server.body();
    assert_eq!(body.get("suffix"), None);
    assert_eq!(body.get("seed"), None);
    assert_eq!(
        (&body["max_tokens"], &body["temperature"], &body["stop"]),
        (&json!(5), &json!(0.0), &json!(["]"]))
    );
}

#[tokio::test]
async fn openai_streams_deltas_per_choice_up_to_the_stop() {
    let mut pieces = sse(&[
        json!({"choices": [{"index": 0, "text": "fo"}, {"index": 1, "text": "ba"}]}),
        json!({"choices": [{"index": 0, "text": "o\nzzz"}]}),
        json!({"choices": [{"index": 1, "text": "r"}]}),
    ]);
    // A line split across writes, and an SSE comment, must not confuse the reader.
    let last = pieces.remove(2);
    let (head, tail) = last.split_at(9);
    pieces.splice(
        2..2,
        [
            ": keep-alive\n\n".to_string(),
            head.to_string(),
            tail.to_string(),
        ],
    );
    let server = Server::start(move |_, _| Reply::Stream(pieces.clone())).await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let (completions, deltas) = complete_streaming(backend.as_ref(), &request(2))
        .await
        .unwrap();

    assert_eq!(completions, ["foo", "bar"]);
    assert_eq!(
        deltas,
        [delta(0, "fo"), delta(1, "ba"), delta(0, "o"), delta(1, "r")]
    );
    assert_eq!(server.body()["stream"], json!(true));
}

#[tokio::test]
async fn openai_chat_wraps_the_prompt_in_an_instruction() {
    let server = Server::start(|_, _| {
        Reply::Json(
            200,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "1;"}}]}),
        )
    })
    .await;
    let mut cfg = config(BackendKind::OpenAiChat, &server.base);
    cfg.system_prompt = Some("Be terse.".to_string());
    cfg.user_template = Some("Before:\n{prompt}\nAfter:\n{suffix}".to_string());
    let backend = build_http(&cfg).unwrap();
    let mut req = request(1);
    req.suffix = Some("return x;".to_string());
    let completions = backend.complete(&req, None).await.unwrap();

    assert_eq!(texts(&completions), ["1;"]);
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    let body = &requests[0].body;
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Before:\nint x =\nAfter:\nreturn x;"},
        ])
    );
    assert_eq!(body.get("prompt"), None);
    assert_eq!(
        (&body["model"], &body["n"], &body["max_tokens"]),
        (&json!("test-model"), &json!(1), &json!(17))
    );
}

#[tokio::test]
async fn a_chat_answer_in_a_code_fence_restating_the_line_becomes_its_code() {
    let answer = "```java\nint x = compute();\nreturn x;\n```";
    let server = Server::start(move |_, _| {
        Reply::Json(
            200,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}),
        )
    })
    .await;
    let backend = build_http(&config(BackendKind::OpenAiChat, &server.base)).unwrap();
    let completions = backend.complete(&request(1), None).await.unwrap();
    // The prompt ends in `int x = `; the newline stop applies after cleaning.
    assert_eq!(texts(&completions), ["compute();"]);
    assert_eq!(
        server.body()["stop"],
        json!([]),
        "no stop sent to a chat model"
    );
}

#[tokio::test]
async fn only_chat_backends_follow_instructions_which_they_get_as_written() {
    let server = Server::start(|_, _| {
        Reply::Json(
            200,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "It sums."}}]}),
        )
    })
    .await;
    let chat = build_http(&config(BackendKind::OpenAiChat, &server.base)).unwrap();
    assert!(chat.follows_instructions());
    for kind in [
        BackendKind::OpenAi,
        BackendKind::Ollama,
        BackendKind::LlamaCpp,
    ] {
        assert!(
            !build_http(&config(kind, &server.base))
                .unwrap()
                .follows_instructions()
        );
    }
    let embedded = keyhole::testing::model::ngram::EmbeddedModel::without_repository();
    assert!(!keyhole::Backend::follows_instructions(&embedded));
    let mut req = request(1);
    req.prompt = "This code snippet of\nint x = a + b;\nmeans".to_string();
    req.instruction = true;
    let completions = chat.complete(&req, None).await.unwrap();
    assert_eq!(texts(&completions), ["It sums."]);
    assert_eq!(
        server.body()["messages"],
        json!([{"role": "user", "content": "This code snippet of\nint x = a + b;\nmeans"}])
    );
}

#[tokio::test]
async fn openai_chat_streams_delta_content_and_uses_the_default_instruction() {
    let events = sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "42"}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": ";"}, "finish_reason": "stop"}]}),
    ]);
    let server = Server::start(move |_, _| Reply::Stream(events.clone())).await;
    let backend = build_http(&config(BackendKind::OpenAiChat, &server.base)).unwrap();
    let (completions, deltas) = complete_streaming(backend.as_ref(), &request(1))
        .await
        .unwrap();

    assert_eq!(completions, ["42;"]);
    assert_eq!(deltas, [delta(0, "42"), delta(0, ";")]);
    let user = server.body()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.starts_with("Complete the code at the end of this prompt.")
            && user.ends_with("\n\nint x =")
    );
}

#[tokio::test]
async fn without_n_support_samples_are_separate_concurrent_requests_within_the_limit() {
    let server = Server::start(|request, _| {
        let seed = request.body["seed"].as_u64().unwrap();
        let text = format!("s{seed}");
        Reply::After(
            Duration::from_millis(100),
            Box::new(Reply::Json(200, json!({"choices": [{"text": text}]}))),
        )
    })
    .await;
    let mut cfg = config(BackendKind::OpenAi, &server.base);
    cfg.supports_n = Some(false);
    cfg.concurrency = 2;
    let backend = build_http(&cfg).unwrap();
    let completions = backend.complete(&request(4), None).await.unwrap();

    assert_eq!(
        texts(&completions),
        ["s7", "s8", "s9", "s10"],
        "seeds offset per sample"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.body["n"] == json!(1)));
    assert_eq!(server.most_in_flight(), 2);
}

#[tokio::test]
async fn ollama_generates_raw_and_fills_in_the_middle_through_the_template() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"response": "1;\nfoo", "done": true}))).await;
    let backend = build_http(&config(BackendKind::Ollama, &server.base)).unwrap();
    let mut req = request(1);
    assert_eq!(texts(&backend.complete(&req, None).await.unwrap()), ["1;"]);
    req.suffix = Some("return x;".to_string());
    backend.complete(&req, None).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests[0].path, "/api/generate");
    let options = json!({"temperature": 0.5, "num_predict": 17, "stop": ["\n"], "seed": 7});
    assert_eq!(
        requests[0].body,
        json!({"model": "test-model", "prompt": "int x =", "raw": true, "stream": false, "options": options})
    );
    assert_eq!(
        (&requests[1].body["suffix"], &requests[1].body["raw"]),
        (&json!("return x;"), &json!(false))
    );
}

#[tokio::test]
async fn ollama_streams_ndjson_and_makes_one_request_per_sample() {
    let server = Server::start(|request, _| {
        let seed = request.body["options"]["seed"].as_u64().unwrap();
        let lines = [
            json!({"response": format!("s{seed}"), "done": false}).to_string() + "\n",
            json!({"response": ";", "done": false}).to_string() + "\n",
            // The last line need not end with a newline.
            json!({"response": "", "done": true}).to_string(),
        ];
        Reply::Stream(lines.to_vec())
    })
    .await;
    let backend = build_http(&config(BackendKind::Ollama, &server.base)).unwrap();
    let (completions, mut deltas) = complete_streaming(backend.as_ref(), &request(2))
        .await
        .unwrap();

    assert_eq!(completions, ["s7;", "s8;"]);
    deltas.sort_by_key(|d| d.index);
    assert_eq!(
        deltas,
        [delta(0, "s7"), delta(0, ";"), delta(1, "s8"), delta(1, ";")]
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn llamacpp_without_infill_completes_left_to_right_and_says_so_once() {
    // llama-server answers 501 to /infill for a model without fill-in-the-middle tokens.
    let server = Server::start(|request, _| match request.path.as_str() {
        "/infill" => Reply::Json(
            501,
            json!({"error": {"code": 501, "message": "infill is not supported by this model"}}),
        ),
        _ => Reply::Json(200, json!({"content": "1;"})),
    })
    .await;
    let backend = build_http(&config(BackendKind::LlamaCpp, &server.base)).unwrap();
    let mut req = request(1);
    req.suffix = Some("\nreturn x;".to_string());
    for _ in 0..2 {
        let completions = backend.complete(&req, None).await.unwrap();
        assert_eq!(texts(&completions), ["1;"]);
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/infill", "/completion", "/completion"]);
    assert_eq!(server.requests()[1].body["prompt"], json!("int x ="));
    let notices = backend.notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("does not fill in the middle"),
        "{notices:?}"
    );
}

#[tokio::test]
async fn llamacpp_completes_and_infills() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"content": "1;\n", "stop": true}))).await;
    let backend = build_http(&config(BackendKind::LlamaCpp, &server.base)).unwrap();
    let mut req = request(1);
    assert_eq!(texts(&backend.complete(&req, None).await.unwrap()), ["1;"]);
    req.suffix = Some("return x;".to_string());
    req.seed = None;
    backend.complete(&req, None).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests[0].path, "/completion");
    assert_eq!(
        requests[0].body,
        json!({"prompt": "int x =", "n_predict": 17, "temperature": 0.5, "stop": ["\n"], "seed": 7, "stream": false})
    );
    assert_eq!(requests[1].path, "/infill");
    assert_eq!(
        requests[1].body,
        json!({
            "input_prefix": "int x =", "input_suffix": "return x;", "n_predict": 17,
            "temperature": 0.5, "stop": ["\n"], "stream": false,
        })
    );
}

#[tokio::test]
async fn llamacpp_streams_until_stop_and_counts_tokens_exactly() {
    let server = Server::start(|request, _| match request.path.as_str() {
        "/tokenize" => Reply::Json(200, json!({"tokens": [1, 2, 3]})),
        _ => {
            let events = [
                json!({"content": "a", "stop": false}),
                json!({"content": "b", "stop": true}),
            ];
            Reply::Stream(events.iter().map(|e| format!("data: {e}\n\n")).collect())
        }
    })
    .await;
    let backend = build_http(&config(BackendKind::LlamaCpp, &server.base)).unwrap();
    let (completions, deltas) = complete_streaming(backend.as_ref(), &request(1))
        .await
        .unwrap();
    assert_eq!(completions, ["ab"]);
    assert_eq!(deltas, [delta(0, "a"), delta(0, "b")]);

    assert_eq!(backend.counting(), TokenCounting::Exact);
    assert_eq!(backend.count_tokens("int x").await, Some(Ok(3)));
    let tokenize = server.requests().pop().unwrap();
    assert_eq!(
        (tokenize.path.as_str(), tokenize.body),
        ("/tokenize", json!({"content": "int x"}))
    );
}

#[tokio::test]
async fn openai_counting_is_exact_only_for_models_tiktoken_knows() {
    let mut cfg = config(BackendKind::OpenAi, "http://127.0.0.1:9");
    cfg.model = Some("gpt-3.5-turbo-instruct".to_string());
    let known = build_http(&cfg).unwrap();
    assert_eq!(known.counting(), TokenCounting::Exact);
    assert_eq!(known.count_tokens("hello world").await, Some(Ok(2)));

    cfg.model = Some("qwen2.5-coder:7b".to_string());
    let unknown = build_http(&cfg).unwrap();
    assert_eq!(unknown.counting(), TokenCounting::Approximate);
    assert_eq!(unknown.count_tokens("hello world").await, None);
    assert_eq!(
        build_http(&config(BackendKind::Ollama, "http://127.0.0.1:9"))
            .unwrap()
            .counting(),
        TokenCounting::Approximate
    );
}

#[tokio::test]
async fn an_openai_server_that_refuses_the_suffix_is_asked_left_to_right() {
    // vLLM's /v1/completions takes no suffix: 400 "suffix is not currently supported".
    let server = Server::start(|request, _| match request.body.get("suffix") {
        Some(_) => Reply::Json(
            400,
            json!({"object": "error", "message": "suffix is not currently supported", "code": 400}),
        ),
        None => Reply::Json(200, json!({"choices": [{"index": 0, "text": "1;"}]})),
    })
    .await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let mut req = request(1);
    req.suffix = Some("\nreturn x;".to_string());
    for _ in 0..2 {
        assert_eq!(texts(&backend.complete(&req, None).await.unwrap()), ["1;"]);
    }
    let suffixes: Vec<bool> = server
        .requests()
        .iter()
        .map(|r| r.body.get("suffix").is_some())
        .collect();
    assert_eq!(suffixes, [true, false, false]);
    let notices = backend.notices();
    assert!(notices[0].contains("(it answered 400)"), "{notices:?}");

    // Any other 400 is the error it says.
    let server =
        Server::start(|_, _| Reply::Json(400, json!({"error": {"message": "prompt is too long"}})))
            .await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let err = backend.complete(&req, None).await.unwrap_err();
    assert!(err.to_string().contains("prompt is too long"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

/// A prompt that ends in the start of a word (a hole inside an identifier) is sent without it
/// and the blank before it; the model writes the whole word, and the completion is its rest.
#[tokio::test]
async fn a_word_the_hole_cuts_moves_from_the_prompt_into_the_expected_completion() {
    let server = Server::start(|_, _| {
        Reply::Json(
            200,
            json!({"choices": [{"index": 0, "text": " IllegalArgumentException(name);"}]}),
        )
    })
    .await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let mut req = request(1);
    req.prompt = "    throw new Illegal".to_string();
    let completions = backend.complete(&req, None).await.unwrap();
    assert_eq!(server.body()["prompt"], json!("    throw new"));
    assert_eq!(texts(&completions), ["ArgumentException(name);"]);

    // `token_healing = false`: the prompt as cut, the answer as written.
    let unhealed = BackendConfig {
        token_healing: Some(false),
        ..config(BackendKind::OpenAi, &server.base)
    };
    let completions = build_http(&unhealed)
        .unwrap()
        .complete(&req, None)
        .await
        .unwrap();
    let sent = server.requests().pop().unwrap();
    assert_eq!(sent.body["prompt"], json!("    throw new Illegal"));
    assert_eq!(texts(&completions), [" IllegalArgumentException(name);"]);
}

/// A prompt that ends in a blank (a hole after a space or in a line's indentation) is sent
/// without it, and the blank the model writes again is not part of the completion.
#[tokio::test]
async fn a_trailing_blank_moves_from_the_prompt_into_the_expected_completion() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "    }"}]})))
            .await;
    let backend = build_http(&config(BackendKind::OpenAi, &server.base)).unwrap();
    let mut req = request(1);
    req.prompt = "    return x;\n    ".to_string();
    let completions = backend.complete(&req, None).await.unwrap();
    assert_eq!(server.body()["prompt"], json!("    return x;\n"));
    assert_eq!(texts(&completions), ["}"]);
}
