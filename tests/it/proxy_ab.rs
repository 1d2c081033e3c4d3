//! The A/B of `keyhole proxy --compose --compose-share P`, replayed as an editor session: each
//! request keyhole can compose for is drawn into keyhole's arm or the plugin's, the plugin's
//! next requests show whether its completion was kept, the proxy keeps each outcome and teaches
//! the online ranker with keyhole's, and `keyhole recorded stats` counts the arms. The requests
//! are shaped as llama.vim's, Continue's and Twinny's are (see `shaped` for what each sends).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::common;
use crate::proxy::{RunningProxy, recorded, spawn_proxy};
use crate::reliability_support::one_line_error;

const ORDER_SERVICE: &str = "src/main/java/com/acme/shop/service/OrderService.java";

/// The three plugins' request shapes.
#[derive(Clone, Copy, Debug)]
enum Plugin {
    /// llama.vim (ggml-org/llama.vim at a1c8e6e4, autoload/llama.vim, `llama#fim` and
    /// `s:fim_ctx_local`): `/infill` with the lines
    /// before the cursor's as `input_prefix`, the cursor's line up to the cursor as `prompt`,
    /// the rest as `input_suffix`, its ring of chunks as `input_extra`.
    LlamaVim,
    /// Continue (continuedev/continue at d0a3c0b6, core/llm/llms/OpenAI.ts and Ollama.ts,
    /// `_streamFim`): the text before the cursor as `prompt`, the rest as `suffix`.
    Continue,
    /// Twinny (twinnydotdev/twinny at 193d14c0, src/extension/fim-templates.ts,
    /// getFimPromptTemplateLLama, its default): Code Llama's template filled in one `prompt`,
    /// the file's header first, the markers set apart by spaces, sent to Ollama's
    /// `/api/generate` (src/extension/provider-options.ts, createStreamRequestBodyFim).
    Twinny,
}

impl Plugin {
    const ALL: [Plugin; 3] = [Plugin::LlamaVim, Plugin::Continue, Plugin::Twinny];

    /// The endpoint and body this plugin sends with `before` and `after` the cursor.
    fn shaped(self, before: &str, after: &str) -> (&'static str, Value) {
        let line = before.rfind('\n').map_or(0, |n| n + 1);
        match self {
            Plugin::LlamaVim => (
                "/infill",
                json!({
                    "input_prefix": &before[..line], "prompt": &before[line..],
                    "input_suffix": after, "input_extra": [], "n_predict": 128,
                    "samplers": ["top_k", "top_p", "infill"], "cache_prompt": true,
                }),
            ),
            Plugin::Continue => (
                "/v1/completions",
                json!({"prompt": before, "suffix": after, "max_tokens": 128, "stream": false}),
            ),
            Plugin::Twinny => (
                "/api/generate",
                json!({
                    "prompt": format!(
                        "<PRE> \n// Language: Java (java) \n{before} <SUF> {after} <MID>"
                    ),
                    "stream": false, "keep_alive": "5m", "options": {"num_predict": 128},
                }),
            ),
        }
    }
}

/// A server that answers each request with a completion of its own, `check{n}();`, in every
/// API's field for it.
async fn numbered_server() -> Server {
    let count = Arc::new(AtomicUsize::new(0));
    Server::start(move |_, _| {
        let text = format!("check{}();", count.fetch_add(1, Ordering::SeqCst));
        Reply::Json(
            200,
            json!({"content": text, "response": text, "choices": [{"text": text}]}),
        )
    })
    .await
}

/// `keyhole proxy --compose --repo REPO EXTRA...` in front of `server`, once the repository is
/// open.
fn composing_proxy(
    server: &Server,
    scratch: &std::path::Path,
    repo: &str,
    extra: &[&str],
) -> RunningProxy {
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--to",
        &server.base,
        "--compose",
        "--repo",
        repo,
        "--compose-deadline-ms",
        "60000",
    ];
    args.extend_from_slice(extra);
    let mut proxy = spawn_proxy(&args, scratch, &[]);
    let mut line = String::new();
    while !line.contains("is open (") {
        line.clear();
        proxy.stderr.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the proxy ended: {:?}", proxy.said);
    }
    proxy
}

/// Send `body` to `path` and read the whole answer's text.
async fn post(proxy: &RunningProxy, path: &str, body: &Value) -> Value {
    let answer = reqwest::Client::new()
        .post(format!("{}{path}", proxy.base))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

fn answer_text(answer: &Value) -> String {
    answer["content"].as_str().unwrap().to_string()
}

/// Offsets of the cursor in `text` for holes at least four lines apart (so that no hole's
/// three lines before it hold another's edit): just after the indentation of statements.
fn holes(text: &str, most: usize) -> Vec<usize> {
    let mut found = Vec::new();
    let mut last_line = 0;
    let mut offset = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        let body = line.trim_start();
        if line.starts_with("        ")
            && body.trim_end().ends_with(';')
            && number >= last_line + 4
            && found.len() < most
        {
            found.push(offset + line.len() - body.len());
            last_line = number;
        }
        offset += line.len();
    }
    found
}

/// The data directory's online ranker: (picks, shown) summed over its candidates.
fn online_counts(scratch: &std::path::Path) -> (u64, u64) {
    let path = scratch.join("data/online-ranker.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return (0, 0);
    };
    let state: Value = serde_json::from_slice(&bytes).unwrap();
    let candidates = state["candidates"].as_object().unwrap();
    candidates.values().fold((0, 0), |(p, s), c| {
        (
            p + c["picks"].as_u64().unwrap(),
            s + c["shown"].as_u64().unwrap(),
        )
    })
}

/// Wait until `done` holds, for at most a minute.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_session_through_half_shares_is_judged_learnt_from_and_counted_per_arm() {
    let server = numbered_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let sample = common::sample();
    let proxy = composing_proxy(
        &server,
        scratch.path(),
        &sample,
        &["--compose-share", "0.5"],
    );
    let mut buffer = std::fs::read_to_string(common::sample_path().join(ORDER_SERVICE)).unwrap();
    // Holes from the bottom up: an edit never moves the holes still to come.
    let mut rounds = holes(&buffer, 12);
    rounds.reverse();
    assert!(rounds.len() >= 10, "{rounds:?}");
    // Per request number (the store's id): whether the person kept its completion, and it.
    let mut kept: BTreeMap<u64, (bool, String)> = BTreeMap::new();
    // What the plugin sent, in order.
    let mut bodies = Vec::new();
    let mut id = 0;
    for (round, &cursor) in rounds.iter().enumerate() {
        let plugin = Plugin::ALL[round % 3];
        let (path, body) = plugin.shaped(&buffer[..cursor], &buffer[cursor..]);
        let completion = answer_text(&post(&proxy, path, &body).await);
        bodies.push(body);
        id += 1;
        let primary = id;
        if let Plugin::LlamaVim = plugin {
            // llama.vim's look-ahead, sent once it shows a completion, before the person
            // decides: the cursor after the completion as if kept, the rest of its line left
            // out (s:fim_ctx_local with `prev`).
            let line_end = cursor + buffer[cursor..].find('\n').unwrap();
            let before = format!("{}{completion}", &buffer[..cursor]);
            let (path, body) = plugin.shaped(&before, &buffer[line_end..]);
            post(&proxy, path, &body).await;
            bodies.push(body);
            id += 1;
        }
        // Every other completion is kept and written on after; the others give way to code
        // the person writes instead.
        let accept = round % 2 == 0;
        let written = match accept {
            true => format!("{completion} "),
            false => "audit(order); ".to_string(),
        };
        kept.insert(primary, (accept, completion));
        buffer.insert_str(cursor, &written);
        let after_it = cursor + written.len();
        let (path, body) = plugin.shaped(&buffer[..after_it], &buffer[after_it..]);
        post(&proxy, path, &body).await;
        bodies.push(body);
        id += 1;
    }
    // A hole in no file of the repository: in neither arm.
    let (path, body) = Plugin::LlamaVim.shaped(
        "class Elsewhere {\n  int f() {\n    return ",
        "0;\n  }\n}\n",
    );
    post(&proxy, path, &body).await;

    // The proxy judged each round's completion as the next request came.
    let mut exchanges = Vec::new();
    eventually("every round judged", || {
        exchanges = recorded(scratch.path());
        kept.keys()
            .all(|id| exchanges[*id as usize - 1].get("judged").is_some())
    })
    .await;
    let arm = |e: &Value| e["composition"]["arm"].as_str().map(str::to_string);
    assert_eq!(
        arm(exchanges.last().unwrap()),
        None,
        "not composable: in no arm"
    );
    let mut expected: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let mut seen = server.requests().into_iter();
    for e in &exchanges[..exchanges.len() - 1] {
        let to_server = seen.next().unwrap();
        let Some(arm) = arm(e) else { continue };
        let composed = e["composition"].get("forwarded_because").is_none();
        assert_eq!(composed, arm == "keyhole", "{e}");
        if arm == "plugin" {
            // What the plugin sent, though keyhole chose a context for it.
            assert!(e["composition"]["candidate"].is_u64(), "{e}");
            assert_eq!(
                to_server.body,
                bodies[e["id"].as_u64().unwrap() as usize - 1]
            );
        }
        let Some((accept, completion)) = kept.get(&e["id"].as_u64().unwrap()) else {
            continue;
        };
        let judged = &e["judged"];
        let outcome = if *accept { "accepted" } else { "rejected" };
        assert_eq!(judged["outcome"], outcome, "{e}");
        let counts = expected.entry(arm).or_default();
        match accept {
            true => {
                counts.0 += 1;
                counts.2 += completion.chars().count() as u64;
                assert_eq!(judged["accepted_chars"], completion.chars().count());
            }
            false => counts.1 += 1,
        }
    }
    assert_eq!(expected.len(), 2, "both arms drawn: {expected:?}");

    // Each decided completion of keyhole's arm taught the online ranker at once.
    let decided_keyhole = |exchanges: &[Value]| {
        exchanges
            .iter()
            .filter(|e| arm(e).as_deref() == Some("keyhole"))
            .fold((0, 0), |(picks, shown), e| {
                match e["judged"]["outcome"].as_str() {
                    Some("accepted") => (picks + 1, shown + 1),
                    Some("rejected") => (picks, shown + 1),
                    _ => (picks, shown),
                }
            })
    };
    let mut taught = (0, 0);
    eventually("the online ranker taught by keyhole's arm", || {
        let exchanges = recorded(scratch.path());
        taught = decided_keyhole(&exchanges);
        online_counts(scratch.path()) == taught
    })
    .await;
    assert!(taught.0 > 0, "{taught:?}");

    // `recorded stats`: the same counts, with intervals and the difference.
    let stats = common::ok(common::keyhole(
        &["recorded", "stats", "--json"],
        scratch.path(),
    ));
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let groups = stats.as_array().unwrap();
    assert_eq!(groups.len(), 1, "{stats}");
    let group = &groups[0];
    assert_eq!(
        group["repository"],
        std::fs::canonicalize(&sample)
            .unwrap()
            .display()
            .to_string()
    );
    let exchanges = recorded(scratch.path());
    for arm_stats in group["arms"].as_array().unwrap() {
        let name = arm_stats["arm"].as_str().unwrap();
        let requests = exchanges
            .iter()
            .filter(|e| arm(e).as_deref() == Some(name))
            .count() as u64;
        let accepted = exchanges
            .iter()
            .filter(|e| arm(e).as_deref() == Some(name) && e["judged"]["outcome"] == "accepted")
            .count() as u64;
        let rejected = exchanges
            .iter()
            .filter(|e| arm(e).as_deref() == Some(name) && e["judged"]["outcome"] == "rejected")
            .count() as u64;
        // Each round's completion as the test judged it; the requests after them may have
        // been judged rejected by the rounds that followed (the person wrote on without them).
        let (round_accepted, _, chars) = expected[name];
        assert_eq!(arm_stats["requests"], requests, "{arm_stats}");
        assert_eq!(arm_stats["accepted"], accepted, "{arm_stats}");
        assert_eq!(arm_stats["rejected"], rejected, "{arm_stats}");
        assert_eq!(
            arm_stats["unknown"].as_u64().unwrap(),
            requests - accepted - rejected
        );
        assert!(accepted >= round_accepted);
        assert!(arm_stats["accepted_chars"].as_u64().unwrap() >= chars);
        let rate = arm_stats["rate"].as_f64().unwrap();
        assert!((rate - accepted as f64 / (accepted + rejected) as f64).abs() < 1e-9);
        let (low, high) = (
            arm_stats["interval"]["low"].as_f64().unwrap(),
            arm_stats["interval"]["high"].as_f64().unwrap(),
        );
        assert!(low < rate && rate < high, "{arm_stats}");
    }
    let difference = &group["difference"];
    let (keyhole, plugin) = (
        group["arms"][0]["rate"].as_f64().unwrap(),
        group["arms"][1]["rate"].as_f64().unwrap(),
    );
    assert!((difference["rate"].as_f64().unwrap() - (keyhole - plugin)).abs() < 1e-9);
    let text = common::ok(common::keyhole(&["recorded", "stats"], scratch.path()));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("keyhole - plugin: "), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("keyhole ")),
        "{text}"
    );
    // `recorded list` marks each outcome; `show` says it with the arm.
    let listed = common::ok(common::keyhole(&["recorded", "list"], scratch.path()));
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.contains("(accepted)") && listed.contains("(rejected)"),
        "{listed}"
    );
    let shown = common::ok(common::keyhole(&["recorded", "show", "1"], scratch.path()));
    let shown = String::from_utf8(shown.stdout).unwrap();
    let first_arm = arm(&exchanges[0]).unwrap();
    assert!(
        shown.contains("--- outcome: accepted (")
            && shown.contains(&format!("in {first_arm}'s arm ---")),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_dropped_in_keyholes_arm_move_the_online_rankers_choice_at_that_hole() {
    let server = numbered_server().await;
    let scratch = tempfile::tempdir().unwrap();
    let proxy = composing_proxy(
        &server,
        scratch.path(),
        &common::sample(),
        &["--ranker", "online"],
    );
    let file = std::fs::read_to_string(common::sample_path().join(ORDER_SERVICE)).unwrap();
    let cursor = holes(&file, 1)[0];
    let mut chosen = Vec::new();
    for _ in 0..20 {
        let (path, body) = Plugin::LlamaVim.shaped(&file[..cursor], &file[cursor..]);
        post(&proxy, path, &body).await;
        // The person writes something else there, and undoes it before the next request.
        let mut edited = file.clone();
        edited.insert_str(cursor, "audit(order); ");
        let after_it = cursor + "audit(order); ".len();
        let (path, body) = Plugin::LlamaVim.shaped(&edited[..after_it], &edited[after_it..]);
        post(&proxy, path, &body).await;
        let exchanges = recorded(scratch.path());
        let primary = &exchanges[exchanges.len() - 2];
        assert_eq!(
            primary["composition"]["arm"], "keyhole",
            "share 1 by default"
        );
        let candidate = primary["composition"]["candidate"].as_u64().unwrap();
        chosen.push(candidate);
        // Taught before the next request (off the proxy's threads).
        let rounds = chosen.len() as u64;
        eventually("the rejection taught", || {
            online_counts(scratch.path()).1 >= rounds
        })
        .await;
        if candidate != chosen[0] {
            break;
        }
    }
    assert_ne!(chosen.last(), chosen.first(), "never moved: {chosen:?}");
    let state: Value = serde_json::from_slice(
        &std::fs::read(scratch.path().join("data/online-ranker.json")).unwrap(),
    )
    .unwrap();
    let first = &state["candidates"][chosen[0].to_string()];
    assert_eq!(first["picks"], 0, "{state}");
    assert_eq!(first["shown"], chosen.len() as u64 - 1, "{state}");
}

#[test]
fn a_share_outside_0_to_1_is_one_line_and_exit_code_2() {
    let scratch = tempfile::tempdir().unwrap();
    let sample = common::sample();
    for share in ["1.5", "-0.1", "half"] {
        let share = format!("--compose-share={share}");
        let output = common::keyhole(
            &[
                "proxy",
                "--to",
                "http://127.0.0.1:9",
                "--compose",
                "--repo",
                &sample,
                &share,
            ],
            scratch.path(),
        );
        let error = one_line_error(&output);
        assert!(error.contains("--compose-share"), "{error}");
    }
}
