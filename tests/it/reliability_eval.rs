//! `keyhole eval` as a user meets it when things go wrong: the real binary against loopback
//! servers that refuse the key, know no such model, are dead, hang or fail now and then; two
//! runs into one output directory; resuming with other settings; label files torn anywhere.
//! A failed request is never a label row, and a run that did not complete exits 2.

use crate::backends_support;
use crate::reliability_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use backends_support::{Reply, Server};
use keyhole::{testing::eval::LabelRow, testing::eval::WRITTEN_ROWS};
use reliability_support::{keyhole, one_line_error, write_backends};
use serde_json::json;
use tempfile::TempDir;

const BACKEND: &str = "srv";

fn sample() -> String {
    format!("{}/examples/sample-repo", env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory whose backends file has one OpenAI-style backend at `base`: no
/// retries, a 1 s deadline.
fn scratch_for(base: &str) -> TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"{BACKEND}\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"m\"\nretries = 0\ndeadline_secs = 1\n"
    );
    write_backends(scratch.path(), &toml);
    scratch
}

/// A server that answers every request but those `fails` picks (by how many came before),
/// which get `status`, and a scratch directory configured for it.
async fn failing_when(
    fails: impl Fn(usize) -> bool + Send + Sync + 'static,
    status: u16,
) -> (Server, TempDir) {
    let server = Server::start(move |_, seen| {
        if fails(seen) {
            Reply::Json(status, json!({"error": "overloaded"}))
        } else {
            answer()
        }
    })
    .await;
    let scratch = scratch_for(&server.base);
    (server, scratch)
}

fn answer() -> Reply {
    Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]}))
}

/// `eval` of `holes` holes of the sample into `scratch/out` with the backend `srv`.
fn eval(scratch: &Path, holes: usize, extra: &[&str]) -> Output {
    let holes = holes.to_string();
    let out = scratch.join("out");
    let mut args = vec![
        "eval",
        &sample(),
        "--holes",
        &holes,
        "--out",
        out.to_str().unwrap(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    keyhole(scratch, &args, &[])
}

fn eval_with_server(scratch: &Path, holes: usize) -> Output {
    eval(scratch, holes, &["--backend", BACKEND])
}

fn labels_path(scratch: &Path) -> std::path::PathBuf {
    scratch.join("out/labels/sample-repo.jsonl")
}

fn label_text(scratch: &Path) -> String {
    std::fs::read_to_string(labels_path(scratch)).unwrap_or_default()
}

/// Rows per hole id, in file order, checked to parse.
fn rows_per_hole(text: &str) -> HashMap<String, Vec<usize>> {
    let mut per_hole: HashMap<String, Vec<usize>> = HashMap::new();
    for line in text.lines() {
        let row: LabelRow = serde_json::from_str(line).unwrap();
        assert_eq!(row.error, None, "a failed request is never a label row");
        per_hole
            .entry(row.hole_id)
            .or_default()
            .push(row.proposal_id.index());
    }
    per_hole
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn last_line(output: &Output) -> String {
    stderr(output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_key_or_an_unknown_model_stops_the_run_at_once() {
    for status in [401, 403, 404] {
        let server = Server::start(move |_, _| {
            Reply::Json(
                status,
                json!({"error": {"message": "no such key or model"}}),
            )
        })
        .await;
        let scratch = scratch_for(&server.base);
        // The binary blocks this thread; the server runs on the runtime's worker threads.
        let output = eval_with_server(scratch.path(), 5);
        let message = one_line_error(&output);
        assert!(message.contains(&format!("{BACKEND}: ")), "{message}");
        assert!(
            message.contains(&format!("answered {status}: no such key or model")),
            "{message}"
        );
        assert!(message.contains("key, model or URL"), "{message}");
        // At once: no more than the requests already in flight (--concurrency 4).
        assert!(server.requests().len() <= 4, "{}", server.requests().len());
        assert_eq!(label_text(scratch.path()), "", "no label rows");
        assert!(!scratch.path().join("out/report.md").exists());
        // With no rows written, the directory is not bound to the wrong model.
        let output = eval(
            scratch.path(),
            5,
            &["--backend", BACKEND, "--model", "other"],
        );
        let message = one_line_error(&output);
        assert!(message.contains(&format!("answered {status}")), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_server_stops_the_run_after_a_few_failures() {
    // A port nobody listens on.
    let base = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let scratch = scratch_for(&base);
    // Each hole's first refused connection fails it and skips its other requests: more than 8
    // holes, so that 8 failed requests come before the end.
    let output = eval_with_server(scratch.path(), 10);
    let message = one_line_error(&output);
    assert!(
        message.contains(
            "eval stopped after 8 failed requests in a row; the last: srv: cannot connect"
        ),
        "{message}"
    );
    assert_eq!(label_text(scratch.path()), "");

    let output = eval(
        scratch.path(),
        5,
        &["--backend", BACKEND, "--max-failures", "2"],
    );
    let message = one_line_error(&output);
    assert!(message.contains("after 2 failed requests"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_server_stops_the_run_at_its_deadlines() {
    let server = Server::start(|_, _| Reply::Hang).await;
    let scratch = scratch_for(&server.base);
    let output = eval_with_server(scratch.path(), 5);
    let message = one_line_error(&output);
    assert!(message.contains("8 failed requests in a row"), "{message}");
    assert!(message.contains("srv: no answer from"), "{message}");
    assert!(message.contains("within 1 s"), "{message}");
    assert_eq!(label_text(scratch.path()), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_holes_get_no_rows_exit_2_and_a_rerun_retries_only_them() {
    // One failure early in the run, among the first hole's requests: that hole fails (and its
    // requests not yet sent are skipped).
    let (server, scratch) = failing_when(|seen| seen == 10, 500).await;
    let output = eval_with_server(scratch.path(), 5);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains("sample-repo: 5 holes: 4 complete (0 from an earlier run, 4 now), 1 failed"),
        "{}",
        stderr(&output)
    );
    let last = last_line(&output);
    assert!(
        last.starts_with("keyhole: 1 of 5 holes failed and have no label rows (the last: srv: "),
        "{last}"
    );
    assert!(last.contains("answered 500: overloaded"), "{last}");
    let report = scratch.path().join("out/report.md");
    let says_incomplete = || {
        std::fs::read_to_string(&report)
            .unwrap()
            .contains("Incomplete: 1 of 5 holes failed")
    };
    assert!(
        says_incomplete(),
        "the report covers the complete holes, and says so"
    );
    let before = label_text(scratch.path());
    let per_hole = rows_per_hole(&before);
    assert_eq!(per_hole.len(), 4);
    assert!(per_hole.values().all(|ids| ids.len() == WRITTEN_ROWS));

    let requests_before = server.requests().len();
    let output = eval_with_server(scratch.path(), 5);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains("sample-repo: 5 holes: 5 complete (4 from an earlier run, 1 now), 0 failed"),
        "{}",
        stderr(&output)
    );
    assert!(!says_incomplete());
    let after = label_text(scratch.path());
    assert!(
        after.starts_with(&before),
        "the complete holes are kept as they were"
    );
    let per_hole = rows_per_hole(&after);
    assert_eq!(per_hole.len(), 5);
    assert!(per_hole.values().all(|ids| ids.len() == WRITTEN_ROWS));
    // One hole's completions (and a draft), and the classifier's compositions of all five
    // (two variants × two sizes each); redoing every hole would take hundreds.
    let requests = server.requests().len() - requests_before;
    assert!(requests <= WRITTEN_ROWS + 1 + 5 * 4, "{requests}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_fails_now_and_then_costs_holes_not_the_run() {
    // Every 20th request fails: holes fail here and there, never 8 requests in a row.
    let (_server, scratch) = failing_when(|seen| seen % 20 == 19, 503).await;
    let output = eval(
        scratch.path(),
        6,
        &["--backend", BACKEND, "--max-failures", "100"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let per_hole = rows_per_hole(&label_text(scratch.path()));
    let failed = 6 - per_hole.len();
    assert!(failed > 0);
    assert!(
        last_line(&output).contains(&format!("{failed} of 6 holes failed")),
        "{}",
        stderr(&output)
    );
    assert!(per_hole.values().all(|ids| ids.len() == WRITTEN_ROWS));
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_into_the_same_directory_says_who_holds_it_and_a_dead_holder_is_replaced() {
    let healthy = Arc::new(AtomicBool::new(false));
    let server = {
        let healthy = healthy.clone();
        Server::start(move |_, _| {
            if healthy.load(Ordering::SeqCst) {
                answer()
            } else {
                Reply::Hang
            }
        })
        .await
    };
    let scratch = scratch_for(&server.base);
    let out = scratch.path().join("out");
    let mut first = Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(["eval", &sample(), "--holes", "3", "--backend", BACKEND])
        .args(["--max-failures", "1000", "--out", out.to_str().unwrap()])
        .env("KEYHOLE_CONFIG_DIR", scratch.path().join("config"))
        .env("KEYHOLE_CACHE_DIR", scratch.path().join("cache"))
        .env("KEYHOLE_DATA_DIR", scratch.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the first run asks the server", || {
        !server.requests().is_empty()
    });

    let second = eval_with_server(scratch.path(), 3);
    let message = one_line_error(&second);
    assert!(
        message.contains(&format!(
            "is in use by another `keyhole eval` (pid {} on ",
            first.id()
        )),
        "{message}"
    );

    first.kill().unwrap(); // SIGKILL: the lock file stays behind
    first.wait().unwrap();
    healthy.store(true, Ordering::SeqCst);
    let third = eval_with_server(scratch.path(), 3);
    assert!(third.status.success(), "{}", stderr(&third));
    let per_hole = rows_per_hole(&label_text(scratch.path()));
    assert_eq!(per_hole.len(), 3, "each hole once");
    assert!(per_hole.values().all(|ids| ids.len() == WRITTEN_ROWS));
}

/// A scratch directory with an evaluation of `holes` holes by the embedded model in `out`.
fn evaluated(holes: usize) -> TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let first = eval(scratch.path(), holes, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    scratch
}

#[test]
fn resuming_with_other_settings_names_the_difference_and_changes_nothing() {
    let scratch = evaluated(3);
    let labels = label_text(scratch.path());
    let settings = std::fs::read_to_string(scratch.path().join("out/settings.json")).unwrap();
    assert!(settings.contains("\"budget\": 4072"), "{settings}");

    let message = one_line_error(&eval(scratch.path(), 3, &["--budget", "300"]));
    assert!(
        message.contains("was made with --budget 4072, not 300"),
        "{message}"
    );
    let message = one_line_error(&eval(scratch.path(), 4, &["--seed", "1"]));
    assert!(
        message.contains("was made with --holes 3, not 4, --seed 9, not 1"),
        "{message}"
    );
    assert_eq!(label_text(scratch.path()), labels, "the rows are untouched");

    // The report's settings may change: the report is rebuilt from all the rows.
    let again = eval(scratch.path(), 3, &["--compose", "3"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(label_text(scratch.path()), labels);
}

#[test]
fn an_output_directory_of_an_older_version_is_refused_and_left_as_it_is() {
    let scratch = evaluated(2);
    // What an older keyhole left: label files and no settings.
    std::fs::remove_file(scratch.path().join("out/settings.json")).unwrap();
    let labels = label_text(scratch.path());

    let message = one_line_error(&eval(scratch.path(), 2, &[]));
    assert!(
        message.contains("holds label files from an older keyhole that recorded no settings"),
        "{message}"
    );
    assert_eq!(label_text(scratch.path()), labels);
}

#[test]
fn torn_writes_anywhere_are_repaired_on_the_first_resume_with_the_right_counts() {
    let scratch = evaluated(6);
    let text = label_text(scratch.path());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6 * WRITTEN_ROWS);
    let mut torn: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    // Inside the first hole: a line cut short.
    let cut = torn[10].len() / 2;
    torn[10].truncate(cut);
    // Inside the third hole: two lines run together.
    let next = torn.remove(2 * WRITTEN_ROWS + 5);
    torn[2 * WRITTEN_ROWS + 4].push_str(&next);
    // The last hole written twice, as two runs into one directory once did.
    let last: Vec<String> = torn[torn.len() - WRITTEN_ROWS..].to_vec();
    torn.extend(last);
    std::fs::write(labels_path(scratch.path()), torn.join("\n") + "\n").unwrap();

    let resumed = eval(scratch.path(), 6, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(
        stderr(&resumed)
            .contains("sample-repo: 6 holes: 6 complete (4 from an earlier run, 2 now), 0 failed"),
        "{}",
        stderr(&resumed)
    );
    let per_hole = rows_per_hole(&label_text(scratch.path()));
    assert_eq!(per_hole.len(), 6);
    assert!(
        per_hole
            .values()
            .all(|ids| *ids == (0..WRITTEN_ROWS).collect::<Vec<_>>()),
        "every hole once, whole"
    );
    let removed =
        std::fs::read_to_string(scratch.path().join("out/labels/sample-repo.jsonl.removed"))
            .unwrap();
    assert_eq!(
        removed.lines().count(),
        3 * WRITTEN_ROWS - 1,
        "what the repair took out is kept"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(scratch.path().join("out/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["summary"]["holes"], 6, "{}", report["summary"]);
    assert_eq!(report["summary"]["incomplete_holes"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_composition_requests_are_left_out_of_table_10_not_counted_as_misses() {
    // 0: answer; otherwise the status to answer with.
    let status = Arc::new(AtomicU16::new(0));
    let server = {
        let status = status.clone();
        Server::start(move |_, _| match status.load(Ordering::SeqCst) {
            0 => answer(),
            code => Reply::Json(code, json!({"error": "down"})),
        })
        .await
    };
    let scratch = scratch_for(&server.base);
    let first = eval_with_server(scratch.path(), 3);
    assert!(first.status.success(), "{}", stderr(&first));
    let labels = label_text(scratch.path());

    // Every hole is labelled: only the classifier's compositions ask the server now.
    status.store(500, Ordering::SeqCst);
    let output = eval_with_server(scratch.path(), 3);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let last = last_line(&output);
    assert!(
        last.starts_with("keyhole: Table 10 leaves out 3 holes whose composition requests failed (the last: srv: "),
        "{last}"
    );
    assert_eq!(label_text(scratch.path()), labels);

    // After the per-repository lines, the one line that says why the run stopped.
    status.store(401, Ordering::SeqCst);
    let output = eval_with_server(scratch.path(), 3);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let last = last_line(&output);
    assert!(last.contains("answered 401: down (eval stopped"), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hole_waiting_past_the_stage_deadline_stops_the_run_naming_hole_and_stage() {
    // A server that never answers, behind a backend whose own deadline is far away: the stage
    // deadline is what ends the wait.
    let server = Server::start(|_, _| Reply::Hang).await;
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"{BACKEND}\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nretries = 0\ndeadline_secs = 300\n",
        server.base
    );
    write_backends(scratch.path(), &toml);
    let started = Instant::now();
    let output = eval(
        scratch.path(),
        2,
        &["--backend", BACKEND, "--stage-deadline", "2"],
    );
    let message = one_line_error(&output);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
    assert!(
        message.contains("eval stopped: hole sample-repo/")
            && message
                .contains("waited 2 s for a completion of its first stage (--stage-deadline)"),
        "{message}"
    );
    assert_eq!(label_text(scratch.path()), "");
}

/// Three `keyhole eval --shard I/3` of `sample` started at once on a fresh cache, their holes
/// starting while the search indexes are being built; each must end within `limit` of the
/// start, else it is killed and the test fails naming it.
fn shards_at_once(round: usize, sample: &str, limit: Duration) {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let repo = format!("{}/examples/{sample}", env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    let mut shards: Vec<(usize, std::process::Child)> = (1..=3)
        .map(|i| {
            let log = std::fs::File::create(scratch.join(format!("shard{i}.log"))).unwrap();
            let out = scratch.join(format!("out{i}"));
            let child = Command::new(env!("CARGO_BIN_EXE_keyhole"))
                .args(["eval", &repo, "--holes", "12", "--shard", &format!("{i}/3")])
                .args(["--concurrency", "16", "--candidates", "62", "--compose", ""])
                .arg("--out")
                .arg(&out)
                .envs(crate::common::hermetic_env(scratch))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            (i, child)
        })
        .collect();
    for position in 0..shards.len() {
        let i = shards[position].0;
        let status = loop {
            if let Some(status) = shards[position].1.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                for (_, child) in &mut shards {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                panic!(
                    "round {round}: shard {i}/3 of {sample} was still running after {limit:?} on a fresh cache: eval stalled"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let log = std::fs::read_to_string(scratch.join(format!("shard{i}.log"))).unwrap();
        assert!(
            status.success(),
            "round {round}, shard {i}/3 of {sample}: {log}"
        );
    }
}

#[test]
fn concurrent_shards_on_a_fresh_cache_never_stall() {
    // On the main of the time, 1 to 3 of the 6 shards of a round hung for good at 0% CPU.
    for round in 1..=20 {
        for sample in ["sample-python", "sample-typescript"] {
            shards_at_once(round, sample, Duration::from_secs(180));
        }
    }
}
