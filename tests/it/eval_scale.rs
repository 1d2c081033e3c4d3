//! Label generation at scale through the real binary: shards of one run (`--shard I/N`) and
//! `keyhole eval merge`; batch files exported, answered by a batch engine and imported.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keyhole::testing::eval::LabelRow;
use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::reliability_support::{keyhole, one_line_error, write_backends};

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

/// Holes in the runs below: enough for three shards of several holes each.
const HOLES: &str = "10";

/// `keyhole eval` of the sample with the embedded backend into `scratch/out`, with `extra`
/// flags; checked to succeed.
fn eval(scratch: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let dir = scratch.join(out);
    let sample = sample();
    let mut args = vec![
        "eval",
        &sample,
        "--holes",
        HOLES,
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    let output = keyhole(scratch, &args, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir
}

fn rows(dir: &Path) -> Vec<LabelRow> {
    keyhole::testing::eval::labels::read_dir(&dir.join("labels")).unwrap()
}

fn holes(dir: &Path) -> BTreeSet<String> {
    rows(dir).into_iter().map(|r| r.hole_id).collect()
}

fn merge(scratch: &Path, dirs: &[&Path], out: &str) -> std::process::Output {
    let out = scratch.join(out);
    let mut args = vec!["eval", "merge", "--out", out.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    keyhole(scratch, &args, &[])
}

#[test]
fn shards_split_the_holes_and_merge_into_the_report_of_one_run() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let whole = eval(scratch, "whole", &[]);
    let shards: Vec<PathBuf> = (1..=3)
        .map(|i| {
            eval(
                scratch,
                &format!("shard{i}"),
                &["--shard", &format!("{i}/3")],
            )
        })
        .collect();

    // Disjoint, and together the unsharded run's holes.
    let all = holes(&whole);
    assert_eq!(all.len(), 10);
    let parts: Vec<BTreeSet<String>> = shards.iter().map(|d| holes(d)).collect();
    for (i, a) in parts.iter().enumerate() {
        assert!(!a.is_empty(), "shard {} has holes", i + 1);
        for b in &parts[i + 1..] {
            assert!(a.is_disjoint(b), "{a:?} and {b:?} overlap");
        }
    }
    let union: BTreeSet<String> = parts.iter().flatten().cloned().collect();
    assert_eq!(union, all);
    let settings = std::fs::read_to_string(shards[1].join("settings.json")).unwrap();
    assert!(settings.contains("\"shard\": \"2/3\""), "{settings}");

    // Given in any order, the shards merge into the report the unsharded run wrote.
    let refs: Vec<&Path> = shards.iter().rev().map(PathBuf::as_path).collect();
    let output = merge(scratch, &refs, "merged");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = scratch.join("merged");
    for file in ["report.md", "report.json", "compositions.json"] {
        assert_eq!(
            std::fs::read_to_string(merged.join(file)).unwrap(),
            std::fs::read_to_string(whole.join(file)).unwrap(),
            "{file}"
        );
    }
    let key = |r: &LabelRow| (r.hole_id.clone(), r.proposal_id, r.prediction.clone());
    let merged_rows: Vec<_> = rows(&merged).iter().map(key).collect();
    let whole_rows: Vec<_> = rows(&whole).iter().map(key).collect();
    assert_eq!(merged_rows, whole_rows, "the same rows in the same order");
    let settings = std::fs::read_to_string(merged.join("settings.json")).unwrap();
    assert!(settings.contains("\"shard\": \"1/1\""), "{settings}");

    // Missing a shard is allowed, and said: by a warning, and by exit code 2 after the report.
    let output = merge(scratch, &[&shards[0], &shards[2]], "partial");
    let stderr = crate::reliability_runs::incomplete(&output, parts[1].len(), 10);
    assert!(scratch.join("partial/report.md").exists());
    assert!(
        stderr.contains("1 of the run's 3 shards are not among them (2/3)"),
        "{stderr}"
    );
    assert_eq!(holes(&scratch.join("partial")).len(), 10 - parts[1].len());

    // The merged directory already has rows: merging into it again would mix them.
    let err = one_line_error(&merge(scratch, &[&shards[1]], "merged"));
    assert!(err.contains("already holds label rows"), "{err}");
}

#[test]
fn merge_refuses_directories_that_are_not_shards_of_one_run() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let one = eval(scratch, "one", &["--shard", "1/2"]);
    let other_seed = eval(scratch, "seed", &["--shard", "2/2", "--seed", "10"]);
    let err = one_line_error(&merge(scratch, &[&one, &other_seed], "out"));
    assert!(
        err.contains("seed was made with --seed 10, not 9 as"),
        "{err}"
    );
    assert!(!scratch.join("out").exists(), "nothing written");

    let other_count = eval(scratch, "count", &["--shard", "2/3"]);
    let err = one_line_error(&merge(scratch, &[&one, &other_count], "out"));
    assert!(err.contains("--shard 2/3, not 1/2"), "{err}");

    // The same shard twice, and a whole run with one of its shards.
    let again = eval(scratch, "again", &["--shard", "1/2"]);
    let err = one_line_error(&merge(scratch, &[&one, &again], "out"));
    assert!(err.contains("are both shard 1/2"), "{err}");
    let whole = eval(scratch, "whole", &["--shard", "1/1"]);
    let half = eval(scratch, "half", &["--shard", "1/1", "--seed", "9"]);
    let err = one_line_error(&merge(scratch, &[&whole, &half], "out"));
    assert!(err.contains("are both shard 1/1"), "{err}");

    // Shards whose label files overlap (one's copied into another) are no shards of one run.
    let two = eval(scratch, "two", &["--shard", "2/2"]);
    let own = two.join("labels/sample-repo.jsonl");
    let mut overlapping = std::fs::read(one.join("labels/sample-repo.jsonl")).unwrap();
    overlapping.extend(std::fs::read(&own).unwrap());
    std::fs::write(&own, overlapping).unwrap();
    let err = one_line_error(&merge(scratch, &[&one, &two], "out"));
    assert!(err.contains("both label sample-repo/"), "{err}");
    assert!(!scratch.join("out").exists(), "nothing written");

    // A shard's directory resumed as another shard would mix their rows.
    let dir = one.to_str().unwrap();
    let output = keyhole(
        scratch,
        &[
            "eval",
            &sample(),
            "--holes",
            HOLES,
            "--out",
            dir,
            "--shard",
            "2/2",
        ],
        &[],
    );
    let err = one_line_error(&output);
    assert!(err.contains("--shard 1/2, not 2/2"), "{err}");
}

/// `keyhole eval` of `holes` holes of the sample with the backend `srv`, without Table 10's
/// compositions (their requests are not the labels'), then `extra`, in `scratch`.
fn eval_srv(scratch: &Path, holes: &str, extra: &[&str]) -> std::process::Output {
    let sample = sample();
    let args = [
        "eval",
        &sample,
        "--holes",
        holes,
        "--backend",
        "srv",
        "--compose",
        "1",
    ];
    keyhole(scratch, &[&args[..], extra].concat(), &[])
}

/// The completion a loopback server gives for a request body: a function of the prompt, so that
/// an online run and a batch run get the same answers to the same requests.
fn completion(body: &Value) -> Value {
    let prompt = body["messages"].to_string();
    let text = format!("```java\nx{};\n```", prompt.len() % 7);
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
}

/// A scratch directory whose backend `srv` is an OpenAI-style chat model at `base` (a chat
/// model also writes ProCC's summaries).
fn chat_scratch(base: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"srv\"\nkind = \"openai_chat\"\nbase_url = \"{base}\"\nmodel = \"m\"\nretries = 0\n"
    );
    write_backends(scratch.path(), &toml);
    scratch
}

/// What a batch engine does with a request file (OpenAI's Batch API, vLLM's run_batch): sends
/// each line's body to its url on the server, and writes the output file.
async fn run_batch(server: &Server, requests: &Path, responses: &Path) {
    let client = reqwest::Client::new();
    let mut out = String::new();
    for line in std::fs::read_to_string(requests).unwrap().lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["method"], "POST");
        let url = format!("{}{}", server.base, line["url"].as_str().unwrap());
        let answer = client.post(url).json(&line["body"]).send().await.unwrap();
        let status = answer.status().as_u16();
        let body: Value = answer.json().await.unwrap();
        let output = json!({
            "id": "batch_req_1",
            "custom_id": line["custom_id"],
            "response": {"status_code": status, "request_id": "r", "body": body},
            "error": null,
        });
        out.push_str(&format!("{output}\n"));
    }
    std::fs::write(responses, out).unwrap();
}

/// The request bodies the server saw, as a sorted list.
fn bodies(server: &Server, from: usize) -> Vec<String> {
    let mut bodies: Vec<String> = server.requests()[from..]
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    bodies.sort();
    bodies
}

fn custom_ids(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    lines
        .map(|l| l["custom_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn batch_files_label_as_an_online_run_does_and_resume_from_a_cut_response_file() {
    let server = Server::start(|request, _| Reply::Json(200, completion(&request.body))).await;
    let scratch = chat_scratch(&server.base);
    let scratch = scratch.path();
    let file = |name: &str| scratch.join(name).to_str().unwrap().to_string();
    let run = |out: &str, extra: &[&str]| {
        let out = file(out);
        eval_srv(scratch, "3", &[&["--out", &out][..], extra].concat())
    };

    let online = run("online", &[]);
    assert!(
        online.status.success(),
        "{}",
        String::from_utf8_lossy(&online.stderr)
    );
    let online_bodies = bodies(&server, 0);
    let seen = server.requests().len();

    // Round 1: every candidate that needs nothing, and the drafts; no request is sent.
    let export = run("batch", &["--export-requests", &file("round1.jsonl")]);
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert!(export.status.success(), "{stderr}");
    assert!(
        stderr.contains("for 3 holes") && stderr.contains("need a second round"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), seen, "nothing sent");
    let round1: Vec<Value> = std::fs::read_to_string(file("round1.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(round1.iter().all(|l| l["url"] == "/v1/chat/completions"));
    assert!(round1.iter().all(|l| l["body"]["model"] == "m"));
    let ids = custom_ids(&scratch.join("round1.jsonl"));
    assert_eq!(ids.len(), round1.len(), "custom ids are unique");
    assert!(ids.iter().any(|id| id.contains("#summary#")));
    assert!(
        !ids.iter().any(|id| id.contains("#67#")),
        "RepoCoder's iteration 2 waits"
    );
    run_batch(
        &server,
        &scratch.join("round1.jsonl"),
        &scratch.join("out1.jsonl"),
    )
    .await;

    // Round 2: the candidates built from round 1's answers.
    let import1 = ["--import-responses", &file("out1.jsonl")];
    let export = run(
        "batch",
        &[&import1[..], &["--export-requests", &file("round2.jsonl")]].concat(),
    );
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert!(
        stderr.contains("round 1: 0 requests for 0 holes"),
        "{stderr}"
    );
    let ids = custom_ids(&scratch.join("round2.jsonl"));
    let kinds: BTreeSet<&str> = ids
        .iter()
        .map(|id| id.rsplit('#').nth(1).unwrap())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["67", "69", "70"]));
    run_batch(
        &server,
        &scratch.join("round2.jsonl"),
        &scratch.join("out2.jsonl"),
    )
    .await;
    let batch_bodies = bodies(&server, seen);

    // Round 2's answers cut in the middle of a line: the holes answered in full are labelled,
    // the run says what is missing, and exporting again asks for exactly that.
    let whole = std::fs::read_to_string(file("out2.jsonl")).unwrap();
    let cut_at = whole.len() / 2;
    let cut_at = (cut_at..whole.len())
        .find(|&i| whole.as_bytes()[i] == b'{')
        .unwrap()
        + 10;
    std::fs::write(file("out2-cut.jsonl"), &whole[..cut_at]).unwrap();
    let partial = format!("{},{}", file("out1.jsonl"), file("out2-cut.jsonl"));
    let import = run("batch", &["--import-responses", &partial]);
    let stderr = String::from_utf8_lossy(&import.stderr);
    assert_eq!(import.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("have no answers in the response files yet"),
        "{stderr}"
    );
    let labelled = holes(&scratch.join("batch"));
    assert!(!labelled.is_empty() && labelled.len() < 3, "{labelled:?}");
    let export = run(
        "batch",
        &[
            "--import-responses",
            &partial,
            "--export-requests",
            &file("rest.jsonl"),
        ],
    );
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert!(stderr.contains("its last line is cut short"), "{stderr}");
    let answered = whole[..cut_at]
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let answered: BTreeSet<String> = answered
        .map(|l| l["custom_id"].as_str().unwrap().to_string())
        .collect();
    let rest = custom_ids(&scratch.join("rest.jsonl"));
    let missing: BTreeSet<String> = custom_ids(&scratch.join("round2.jsonl"))
        .difference(&answered)
        .filter(|id| labelled.iter().all(|h| !id.starts_with(&format!("{h}#"))))
        .cloned()
        .collect();
    assert_eq!(rest, missing);

    // The whole file labels the rest: the rows an online run wrote, from the same requests.
    let all = format!("{},{}", file("out1.jsonl"), file("out2.jsonl"));
    let import = run("batch", &["--import-responses", &all]);
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let key = |r: &LabelRow| {
        (
            r.hole_id.clone(),
            r.proposal_id,
            r.applicable,
            r.prediction.clone(),
        )
    };
    let batch_rows: Vec<_> = rows(&scratch.join("batch")).iter().map(key).collect();
    let mut online_rows: Vec<_> = rows(&scratch.join("online")).iter().map(key).collect();
    let mut sorted_batch = batch_rows.clone();
    sorted_batch.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    online_rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    assert_eq!(sorted_batch.len(), 3 * keyhole::testing::eval::WRITTEN_ROWS);
    assert_eq!(sorted_batch, online_rows);
    assert_eq!(
        batch_bodies, online_bodies,
        "the same requests, online or in batch files"
    );
    let report = std::fs::read_to_string(scratch.join("batch/report.md")).unwrap();
    assert!(report.contains("Labelled from batch files"), "{report}");
}

#[test]
fn batch_files_need_an_openai_style_backend_and_well_formed_answers() {
    let scratch = chat_scratch("http://127.0.0.1:9");
    let scratch = scratch.path();
    let sample = sample();
    let out = scratch.join("out");
    let out = out.to_str().unwrap();
    let requests = scratch.join("requests.jsonl");
    let requests = requests.to_str().unwrap();
    let embedded = keyhole(
        scratch,
        &["eval", &sample, "--out", out, "--export-requests", requests],
        &[],
    );
    let err = one_line_error(&embedded);
    assert!(err.contains("kind openai or openai_chat"), "{err}");
    assert!(!Path::new(requests).exists());

    let answers = scratch.join("answers.jsonl");
    let good = json!({"custom_id": "a#1", "response": {"status_code": 200, "body": completion(&json!({}))}});
    std::fs::write(&answers, format!("{good}\n{{\"custom_id\": \n{good}\n")).unwrap();
    let args = ["eval", &sample, "--out", out, "--backend", "srv"];
    let import = ["--import-responses", answers.to_str().unwrap()];
    let err = one_line_error(&keyhole(scratch, &[&args[..], &import].concat(), &[]));
    assert!(err.contains("answers.jsonl:2: not JSON"), "{err}");
    std::fs::write(&answers, format!("{good}\n{{\"id\": 1}}\n")).unwrap();
    let err = one_line_error(&keyhole(scratch, &[&args[..], &import].concat(), &[]));
    assert!(err.contains("answers.jsonl:2: no `custom_id`"), "{err}");
}

/// A scratch directory whose backend `srv` is an OpenAI-style completion server at `base`
/// that allows `concurrency` requests at once.
fn completions_scratch(base: &str, concurrency: usize) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"srv\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"m\"\nconcurrency = {concurrency}\n"
    );
    write_backends(scratch.path(), &toml);
    scratch
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_keeps_as_many_requests_in_flight_as_the_backend_allows() {
    // Slow answers, so that requests pile up to whatever limit holds them: slow enough, when
    // nothing caps them, for both holes' prompts to be composed and sent on a loaded machine.
    let slow = |millis: u64| {
        Server::start(move |_, _| {
            let answer = json!({"choices": [{"index": 0, "text": "x;"}]});
            Reply::After(
                std::time::Duration::from_millis(millis),
                Box::new(Reply::Json(200, answer)),
            )
        })
    };
    let eval = |scratch: &Path, concurrency: &str| {
        let out = scratch.join("out");
        let more = ["--concurrency", concurrency, "--out", out.to_str().unwrap()];
        eval_srv(scratch, "2", &more)
    };

    let server = slow(2_000).await;
    let scratch = completions_scratch(&server.base, 128);
    let output = eval(scratch.path(), "128");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Two holes have more than 128 requests in their first stage.
    assert!(server.most_in_flight() > 64, "{}", server.most_in_flight());

    // More than the backend allows is capped, and said, rather than left to time out.
    let server = slow(200).await;
    let scratch = completions_scratch(&server.base, 3);
    let output = eval(scratch.path(), "128");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("srv: 3 requests in flight, not 128"),
        "{stderr}"
    );
    // (The server counts an answer until its connection closes, after the client has read it
    // and sent the next request: one or two more than the client holds.)
    assert!(server.most_in_flight() <= 5, "{}", server.most_in_flight());
}

#[test]
fn an_engine_that_refuses_the_suffix_gets_the_requests_left_to_right() {
    let scratch = completions_scratch("http://127.0.0.1:9", 4);
    let scratch = scratch.path();
    let out = scratch.join("out");
    let file = |name: &str| scratch.join(name).to_str().unwrap().to_string();
    let export = |extra: &[&str]| {
        let out = ["--out", out.to_str().unwrap()];
        eval_srv(scratch, "2", &[&out[..], extra].concat())
    };
    assert!(
        export(&["--export-requests", &file("r1.jsonl")])
            .status
            .success()
    );
    let drafts = |path: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(path).unwrap();
        let lines = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap());
        lines
            .filter(|l| {
                l["custom_id"]
                    .as_str()
                    .unwrap()
                    .contains("#hypothetical-line#")
            })
            .collect()
    };
    let first = drafts(&file("r1.jsonl"));
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|l| l["body"]["suffix"].is_string()));

    // vLLM's answer to a completion request with a suffix.
    let refusal = json!({
        "custom_id": first[0]["custom_id"],
        "response": {"status_code": 400, "body": {"object": "error", "message": "suffix is not currently supported", "code": 400}},
        "error": null,
    });
    std::fs::write(file("a1.jsonl"), format!("{refusal}\n")).unwrap();
    let again = export(&[
        "--import-responses",
        &file("a1.jsonl"),
        "--export-requests",
        &file("r2.jsonl"),
    ]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        stderr.contains("requests are exported left to right"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 answers in the response files are errors"),
        "{stderr}"
    );
    let second = drafts(&file("r2.jsonl"));
    assert_eq!(second.len(), 2, "both asked again");
    assert!(second.iter().all(|l| l["body"].get("suffix").is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_can_leave_table_10_out_when_the_backend_is_gone() {
    let server = Server::start(|request, _| Reply::Json(200, completion(&request.body))).await;
    let scratch = chat_scratch(&server.base);
    let scratch = scratch.path();
    let sample = sample();
    let shard = |i: &str| {
        let out = scratch.join(format!("shard{i}"));
        let args = ["eval", &sample, "--holes", "4", "--backend", "srv"];
        let more = ["--shard", &format!("{i}/2"), "--out", out.to_str().unwrap()];
        let output = keyhole(scratch, &[&args[..], &more].concat(), &[]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        out
    };
    let (one, two) = (shard("1"), shard("2"));
    // The merging machine's entry for the backend points nowhere (the URL is no setting).
    let gone = chat_scratch("http://127.0.0.1:9");
    std::fs::copy(
        gone.path().join("config/backends.toml"),
        scratch.join("config/backends.toml"),
    )
    .unwrap();
    let merge = |out: &str, extra: &[&str]| {
        let out = scratch.join(out);
        let args = ["eval", "merge", "--out", out.to_str().unwrap()];
        let dirs = [one.to_str().unwrap(), two.to_str().unwrap()];
        keyhole(scratch, &[&args[..], &dirs, extra].concat(), &[])
    };
    let failed = merge("m1", &[]);
    assert_eq!(failed.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
    let merged = merge("m2", &["--compose", "1"]);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    assert_eq!(holes(&scratch.join("m2")).len(), 4);
    assert!(scratch.join("m2/report.md").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_request_holds_up_only_its_own_hole() {
    // The server's first completion request is answered only once every request but two has
    // come (as a request told to come back after a Retry-After would be), every other one at
    // once: meanwhile the other holes go through both stages (RepoCoder's second iteration
    // needs the first's answers), so what comes after the slow answer is the slow hole's own
    // second request only. Counting requests, not seconds, keeps this true on a loaded machine.
    let answer = |text: &str| Reply::Json(200, json!({"choices": [{"index": 0, "text": text}]}));
    // Eval of 40 holes against the server at `base`: its scratch folder and label folder.
    let eval = |base: &str| {
        let scratch = completions_scratch(base, 8);
        let out = scratch.path().join("out");
        let more = ["--candidates", "7,63,67", "--out", out.to_str().unwrap()];
        let output = eval_srv(scratch.path(), "40", &more);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        (scratch, out)
    };
    let all_at_once = Server::start(move |_, _| answer("x;")).await;
    eval(&all_at_once.base);
    let total = all_at_once.requests().len();

    // A hole held up by the slow one would keep the count from growing until the longest
    // pause is over, and then come after the slow answer.
    const LONGEST: Duration = Duration::from_secs(120);
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let signalled = Arc::new(Mutex::new(None));
    let signal = Arc::new(tokio::sync::Notify::new());
    let (log, signal_log, slow_signal) = (arrived.clone(), signalled.clone(), signal.clone());
    let server = Server::start(move |_, n| {
        let mut arrived = log.lock().unwrap();
        arrived.push(Instant::now());
        if arrived.len() == total - 2 {
            *signal_log.lock().unwrap() = Some(Instant::now());
            slow_signal.notify_one();
        }
        match n {
            0 => Reply::WhenNotified(slow_signal.clone(), LONGEST, Box::new(answer("slow;"))),
            _ => answer("x;"),
        }
    })
    .await;
    let (_scratch, out) = eval(&server.base);
    let arrived = arrived.lock().unwrap().clone();
    assert_eq!(
        arrived.len(),
        total,
        "the slow answer changed what was sent"
    );
    let answered = arrived[0] + LONGEST;
    let answered = signalled
        .lock()
        .unwrap()
        .map_or(answered, |at| at.min(answered));
    let after = arrived.iter().filter(|&&at| at > answered).count();
    assert!(after <= 2, "{after} of {total} came after the slow answer");
    // The label file keeps the sampled order all the same (what a merge of shards writes).
    let rows = rows(&out);
    let mut order: Vec<(&str, usize, usize)> = rows
        .iter()
        .map(|r| (r.file.as_str(), r.line, r.column))
        .collect();
    order.dedup();
    assert_eq!(order.len(), 40);
    assert!(order.is_sorted(), "{order:?}");
    assert!(rows.iter().any(|r| r.prediction == "slow;"));
}
