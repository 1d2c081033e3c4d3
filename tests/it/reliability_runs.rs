//! Runs that must not mix what does not belong together, through the real binary: batch
//! answers checked against the requests they answer and read line by line within bounds,
//! merges that never pass incomplete shards as whole, runs bound to their repository's files,
//! file names that are not UTF-8.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::backends_support::{Reply, Server};
use crate::reliability_support::{keyhole, one_line_error, write_backends};

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn succeeded(output: &Output) -> String {
    let stderr = stderr(output);
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// `keyhole eval REPO --holes HOLES --out scratch/OUT` and `extra`.
fn eval(scratch: &Path, repo: &Path, holes: usize, out: &str, extra: &[&str]) -> Output {
    let (repo, holes, out) = (
        repo.to_str().unwrap().to_string(),
        holes.to_string(),
        scratch.join(out).to_str().unwrap().to_string(),
    );
    let args = ["eval", &repo, "--holes", &holes, "--out", &out];
    keyhole(scratch, &[&args[..], extra].concat(), &[])
}

/// Stderr of a command that wrote its report though `missing` of the run's `holes` holes have
/// no rows: exit code 2, and the last line says so, as `eval` says that holes failed.
pub(crate) fn incomplete(output: &Output, missing: usize, holes: usize) -> String {
    let stderr = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "keyhole: {missing} of the run's {holes} holes have no rows (holes that failed in an earlier run, or shards not merged or stopped part way); the report covers the others"
        )),
        "{stderr}"
    );
    stderr
}

fn merge(scratch: &Path, dirs: &[&Path], out: &str) -> Output {
    let out = scratch.join(out);
    let mut args = vec!["eval", "merge", "--out", out.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    keyhole(scratch, &args, &[])
}

fn holes(dir: &Path) -> BTreeSet<String> {
    let rows = keyhole::testing::eval::labels::read_dir(&dir.join("labels")).unwrap();
    rows.into_iter().map(|r| r.hole_id).collect()
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A copy of the directory `from` at `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A scratch directory whose backend `srv` is an OpenAI-style chat model at `base`, with
/// `extra` lines in its entry.
fn chat_scratch(base: &str, extra: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"srv\"\nkind = \"openai_chat\"\nbase_url = \"{base}\"\nmodel = \"m\"\nretries = 0\n{extra}"
    );
    write_backends(scratch.path(), &toml);
    scratch
}

fn chat_answer(text: &str) -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
}

/// The answer line a batch engine writes for the request with `custom_id`.
fn answer_line(custom_id: &Value, text: &str) -> String {
    let line = json!({
        "custom_id": custom_id,
        "response": {"status_code": 200, "body": chat_answer(text)},
        "error": null,
    });
    format!("{line}\n")
}

/// Batch flags of a run over the sample's first holes with the backend `srv`, completing a
/// few candidates (one round) and no compositions.
fn batch_args<'a>(holes: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let args = [
        "--holes",
        holes,
        "--out",
        out,
        "--backend",
        "srv",
        "--compose",
        "1",
        "--candidates",
        "0-3",
    ];
    [&args[..], extra].concat()
}

#[test]
fn response_files_are_read_within_bounds_and_line_by_line() {
    let scratch = chat_scratch("http://127.0.0.1:9", "");
    let scratch = scratch.path();
    let file = |name: &str| scratch.join(name).to_str().unwrap().to_string();
    let sample = sample();
    let run = |extra: &[&str]| {
        let out = file("out");
        let args = batch_args("2", &out, extra);
        keyhole(
            scratch,
            &[&["eval", sample.to_str().unwrap()][..], &args].concat(),
            &[],
        )
    };
    let stderr = succeeded(&run(&["--export-requests", &file("requests.jsonl")]));
    // The candidate set needs no answers to build others from: one round labels every hole.
    assert!(
        stderr.contains("importing these answers with --import-responses labels every hole")
            && !stderr.contains("second round:"),
        "{stderr}"
    );
    assert!(!stderr.contains("need a second round"), "{stderr}");
    let requests = lines(&scratch.join("requests.jsonl"));
    assert!(requests.len() >= 4, "{}", requests.len());

    // Exporting onto the answers being imported would overwrite them.
    let answers = scratch.join("answers.jsonl");
    let good: String = requests
        .iter()
        .map(|r| answer_line(&r["custom_id"], "x;"))
        .collect();
    std::fs::write(&answers, &good).unwrap();
    let same = ["--import-responses", &file("answers.jsonl")];
    let err = one_line_error(&run(&[
        &same[..],
        &["--export-requests", &file("./answers.jsonl")],
    ]
    .concat()));
    assert!(err.contains("also a response file to import"), "{err}");
    assert_eq!(std::fs::read_to_string(&answers).unwrap(), good, "kept");

    // A pipe, or a device without end, is no response file.
    let fifo = scratch.join("fifo.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for endless in [fifo.to_str().unwrap(), "/dev/zero"] {
        let err = one_line_error(&run(&["--import-responses", endless]));
        assert!(
            err.contains(&format!("{endless}: not a regular file")),
            "{err}"
        );
    }

    // One answer not UTF-8, one longer than an online answer may be, one for a hole of
    // another run, one repeated: each is left out on its own and named.
    let mut text = Vec::new();
    let mut bad_utf8 = answer_line(&requests[0]["custom_id"], "x;").into_bytes();
    let at = bad_utf8.len() - 20;
    bad_utf8[at] = 0xff;
    text.extend(bad_utf8);
    let huge = "y".repeat(9 << 20);
    text.extend(answer_line(&requests[1]["custom_id"], &huge).into_bytes());
    for request in &requests[2..] {
        text.extend(answer_line(&request["custom_id"], "x;").into_bytes());
    }
    text.extend(answer_line(&requests[2]["custom_id"], "other").into_bytes());
    text.extend(answer_line(&json!("other-repo/A.java:1:1#62#0123456789ab"), "x;").into_bytes());
    std::fs::write(&answers, text).unwrap();
    let output = run(&[&same[..], &["--export-requests", &file("again.jsonl")]].concat());
    let stderr = succeeded(&output);
    let shown = file("answers.jsonl");
    assert!(
        stderr.contains("2 lines of the response files are left out")
            && stderr.contains(&format!(
                "{shown}:1: not UTF-8; {shown}:2: longer than 8 MiB, the most an answer may be)"
            )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "1 answers repeat a custom id answered before, and only the first answer of each is used ({} ({shown}:{})",
            requests[2]["custom_id"].as_str().unwrap(),
            requests.len() + 1
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 answers are for holes this run does not have")
            && stderr.contains("other-repo/A.java:1:1#62"),
        "{stderr}"
    );
    assert!(stderr.lines().all(|l| l.len() < 1000), "{stderr}");
    let asked: BTreeSet<&str> = requests[..2]
        .iter()
        .map(|r| r["custom_id"].as_str().unwrap())
        .collect();
    let again = lines(&scratch.join("again.jsonl"));
    let again: BTreeSet<&str> = again
        .iter()
        .map(|r| r["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(again, asked, "exactly the answers left out are asked again");
}

#[test]
fn answers_to_another_runs_requests_are_refused() {
    let scratch = chat_scratch("http://127.0.0.1:9", "");
    let scratch = scratch.path();
    let file = |name: &str| scratch.join(name).to_str().unwrap().to_string();
    let sample = sample();
    let run = |out: &str, extra: &[&str]| {
        let out = file(out);
        let args = batch_args("2", &out, extra);
        keyhole(
            scratch,
            &[&["eval", sample.to_str().unwrap()][..], &args].concat(),
            &[],
        )
    };
    // Requests of a run with budget 128, answered.
    let small = ["--budget", "128", "--export-requests", &file("small.jsonl")];
    succeeded(&run("small", &small));
    let answers: String = lines(&scratch.join("small.jsonl"))
        .iter()
        .map(|r| answer_line(&r["custom_id"], "x;"))
        .collect();
    std::fs::write(file("answers.jsonl"), answers).unwrap();

    // Imported into a run with the default budget, whose prompts are others.
    let output = run("big", &["--import-responses", &file("answers.jsonl")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let stderr = stderr(&output);
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("answer requests this run does not send") && last.contains("--budget"),
        "{stderr}"
    );
    let label_file = scratch.join("big/labels/sample-repo.jsonl");
    let text = std::fs::read_to_string(label_file).unwrap_or_default();
    assert!(
        !text.contains("\"prediction\":\"x;\""),
        "no answer to another prompt is labelled"
    );

    // The run they were made for labels from them.
    let small = [
        "--budget",
        "128",
        "--import-responses",
        &file("answers.jsonl"),
    ];
    succeeded(&run("small", &small));
    assert_eq!(holes(&scratch.join("small")).len(), 2);
}

/// Shard `i` of 2 of 6 holes of `repo`, labelled with the embedded model into `scratch/NAME`.
fn shard(scratch: &Path, repo: &Path, i: usize, name: &str) -> PathBuf {
    let output = eval(scratch, repo, 6, name, &["--shard", &format!("{i}/2")]);
    succeeded(&output);
    scratch.join(name)
}

#[test]
fn merges_refuse_or_report_what_is_incomplete_and_rerun_after_a_kill() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let one = shard(scratch, &sample(), 1, "one");
    let two = shard(scratch, &sample(), 2, "two");
    let rows_per_hole = keyhole::testing::eval::WRITTEN_ROWS;

    // A shard whose eval still runs has not written all its rows.
    let lock = std::fs::File::open(two.join("eval.lock")).unwrap();
    lock.lock().unwrap();
    let err = one_line_error(&merge(scratch, &[&one, &two], "m"));
    assert!(
        err.contains("is still being labelled by `keyhole eval`"),
        "{err}"
    );
    lock.unlock().unwrap();
    assert!(!scratch.join("m/labels").exists(), "nothing merged");

    // A copy of a label file beside the real one would count its holes twice.
    let labels = one.join("labels/sample-repo.jsonl");
    let copy = one.join("labels/sample-repo (copy).jsonl");
    std::fs::copy(&labels, &copy).unwrap();
    let err = one_line_error(&merge(scratch, &[&one, &two], "m"));
    assert!(
        err.contains("sample-repo (copy).jsonl is no label file of this run"),
        "{err}"
    );
    let err = one_line_error(&eval(scratch, &sample(), 6, "one", &["--shard", "1/2"]));
    assert!(err.contains("is no label file of this run"), "{err}");
    std::fs::remove_file(&copy).unwrap();

    // A shard whose last hole has no rows: said, and counted in the report.
    let text = std::fs::read_to_string(two.join("labels/sample-repo.jsonl")).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    let kept = &kept[..kept.len() - rows_per_hole];
    std::fs::write(
        two.join("labels/sample-repo.jsonl"),
        format!("{}\n", kept.join("\n")),
    )
    .unwrap();
    let output = merge(scratch, &[&one, &two], "m");
    let stderr = incomplete(&output, 1, 6);
    assert!(
        stderr.contains(&format!(
            "shard 2/2 ({}) has no rows for 1 of its 3 holes",
            two.display()
        )),
        "{stderr}"
    );
    let report = std::fs::read_to_string(scratch.join("m/report.md")).unwrap();
    assert!(report.contains("Holes missing rows: 1."), "{report}");
    assert_eq!(holes(&scratch.join("m")).len(), 5);

    // Killed while writing its report: the rerun keeps the label files and writes it.
    std::fs::remove_file(scratch.join("m/report.md")).unwrap();
    incomplete(&merge(scratch, &[&one, &two], "m"), 1, 6);
    assert!(scratch.join("m/report.md").exists());
    // Killed while writing its label files: they were aside, and the rerun writes them.
    let partial = scratch.join("m/labels.partial");
    std::fs::rename(scratch.join("m/labels"), &partial).unwrap();
    let cut = std::fs::read(partial.join("sample-repo.jsonl")).unwrap();
    std::fs::write(partial.join("sample-repo.jsonl"), &cut[..cut.len() / 2]).unwrap();
    assert!(
        !scratch.join("m/labels").exists(),
        "nothing passes as whole"
    );
    incomplete(&merge(scratch, &[&one, &two], "m"), 1, 6);
    assert_eq!(holes(&scratch.join("m")).len(), 5);
    assert!(!partial.exists());
    // Other shards into it are refused, saying what to do.
    let err = one_line_error(&merge(scratch, &[&one], "m"));
    assert!(
        err.contains("merge into a new --out, or delete") && err.contains("(5 holes)"),
        "{err}"
    );
}

#[test]
fn a_run_refuses_to_resume_or_merge_over_changed_sources() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let checkout = scratch.join("a/sample-repo");
    copy_dir(&sample(), &checkout);
    let other = scratch.join("b/sample-repo");
    copy_dir(&sample(), &other);
    let java = |root: &Path| {
        let mut found = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "java") {
                    found.push(path);
                }
            }
        }
        found.sort();
        found.remove(0)
    };
    let edited = java(&other);
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, format!("// edited\n{text}")).unwrap();
    let name = edited.file_name().unwrap().to_str().unwrap().to_string();

    // Shards of two checkouts of one repository.
    let one = shard(scratch, &checkout, 1, "one");
    let two = shard(scratch, &other, 2, "two");
    let settings = std::fs::read_to_string(one.join("settings.json")).unwrap();
    assert!(settings.contains("\"fingerprint\""), "{settings}");
    let err = one_line_error(&merge(scratch, &[&one, &two], "m"));
    assert!(
        err.contains("labelled sample-repo from other files than") && err.contains(&name),
        "{err}"
    );
    assert!(!scratch.join("m/labels").exists());

    // Resuming after an edit.
    let before = std::fs::read_to_string(one.join("labels/sample-repo.jsonl")).unwrap();
    std::fs::write(java(&checkout), format!("// edited\n{text}")).unwrap();
    let err = one_line_error(&eval(scratch, &checkout, 6, "one", &["--shard", "1/2"]));
    assert!(
        err.contains("the sources of sample-repo changed since its rows were labelled (1 file:")
            && err.contains(&format!("{name} edited")),
        "{err}"
    );
    let after = std::fs::read_to_string(one.join("labels/sample-repo.jsonl")).unwrap();
    assert_eq!(before, after, "no row written or moved");
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_that_change_rows_are_recorded_and_candidate_lists_are_one_identity() {
    let server = Server::start(|_, _| Reply::Json(200, chat_answer("x;"))).await;
    let scratch = chat_scratch(&server.base, "");
    let scratch = scratch.path();
    let srv = ["--backend", "srv", "--compose", "1"];
    let run = |extra: &[&str]| eval(scratch, &sample(), 2, "out", &[&srv[..], extra].concat());
    succeeded(&run(&["--candidates", "7,3,62,3"]));
    // The same set, in another order and without the repeat.
    let stderr = succeeded(&run(&["--candidates", "3,7,62"]));
    assert!(stderr.contains("2 from an earlier run"), "{stderr}");

    let healing = chat_scratch(&server.base, "token_healing = false\n");
    std::fs::copy(
        healing.path().join("config/backends.toml"),
        scratch.join("config/backends.toml"),
    )
    .unwrap();
    let err = one_line_error(&run(&["--candidates", "3,7,62"]));
    assert!(
        err.contains("the backend's token_healing none, not false"),
        "{err}"
    );
}

#[test]
fn a_missing_shard_warning_is_one_line_at_any_count() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let output = eval(scratch, &sample(), 10, "one", &["--shard", "1/100000"]);
    succeeded(&output);
    let merged = holes(&scratch.join("one")).len();
    let stderr = incomplete(
        &merge(scratch, &[&scratch.join("one")], "m"),
        10 - merged,
        10,
    );
    let warning: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:") && l.contains("shards"))
        .collect();
    assert_eq!(warning.len(), 1, "{stderr}");
    assert!(
        warning[0].contains(
            "99999 of the run's 100000 shards are not among them (2/100000, and 99998 more)"
        ),
        "{stderr}"
    );
    assert!(warning[0].len() < 300, "{}", warning[0]);
}

#[cfg(unix)]
#[test]
fn file_names_that_are_not_utf8_stay_distinct() {
    use std::os::unix::ffi::OsStrExt;
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let body = std::fs::read_to_string(
        sample().join("src/main/java/com/acme/shop/web/CustomerController.java"),
    )
    .unwrap();
    for byte in [0xff, 0xfe] {
        let bytes = [b'A', byte, b'.', b'j', b'a', b'v', b'a'];
        // Not copies of each other: copies have no holes.
        let text = format!("{body}// {byte}\n");
        std::fs::write(repo.join(std::ffi::OsStr::from_bytes(&bytes)), text).unwrap();
    }
    let index = keyhole::RepoIndex::open(&repo, None).unwrap();
    let paths: BTreeSet<&str> = index.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, BTreeSet::from(["A\\xfe.java", "A\\xff.java"]));

    let first = eval(scratch, &repo, 100, "out", &[]);
    succeeded(&first);
    let labelled = holes(&scratch.join("out"));
    assert!(
        labelled.iter().any(|h| h.contains("A\\xff.java")),
        "{labelled:?}"
    );
    assert!(
        labelled.iter().any(|h| h.contains("A\\xfe.java")),
        "{labelled:?}"
    );
    let again = eval(scratch, &repo, 100, "out", &[]);
    let stderr = succeeded(&again);
    assert!(!stderr.contains("moved to"), "{stderr}");
    assert!(!scratch.join("out/labels/repo.jsonl.removed").exists());
    assert_eq!(holes(&scratch.join("out")), labelled);
}

/// A scratch directory whose backend `srv` is an OpenAI-style completion server at `base`,
/// without retries, and a task file of six holes of the sample in it.
fn tasks_scratch(base: &str) -> (tempfile::TempDir, PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"srv\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"m\"\nretries = 0\ndeadline_secs = 1\n"
    );
    write_backends(scratch.path(), &toml);
    let tasks = scratch.path().join("tasks.jsonl");
    let sample = sample();
    let args = ["holes", sample.to_str().unwrap(), "--cap", "6", "--export"];
    succeeded(&keyhole(
        scratch.path(),
        &[&args[..], &[tasks.to_str().unwrap()]].concat(),
        &[],
    ));
    (scratch, tasks)
}

fn tasks(scratch: &Path, file: &Path, extra: &[&str]) -> Output {
    let args = ["tasks", file.to_str().unwrap(), "--backend", "srv"];
    keyhole(scratch, &[&args[..], extra].concat(), &[])
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_stop_on_a_refused_key_count_failures_apart_and_resume() {
    let refused =
        Server::start(|_, _| Reply::Json(401, json!({"error": {"message": "no such key"}}))).await;
    let (scratch, file) = tasks_scratch(&refused.base);
    let err = one_line_error(&tasks(scratch.path(), &file, &[]));
    assert!(
        err.contains("answered 401: no such key (tasks stopped: no request can succeed"),
        "{err}"
    );
    assert!(
        refused.requests().len() <= 4,
        "{}",
        refused.requests().len()
    );

    let dead = Server::start(|_, _| Reply::Json(500, json!({"error": "down"}))).await;
    let (scratch, file) = tasks_scratch(&dead.base);
    let stopped = tasks(
        scratch.path(),
        &file,
        &["--max-failures", "2", "--concurrency", "1"],
    );
    let err = one_line_error(&stopped);
    assert!(
        err.contains("tasks stopped after 2 failed requests in a row"),
        "{err}"
    );
    assert_eq!(dead.requests().len(), 2);

    // Two tasks fail: not scored as misses, not written, exit 2; the rerun asks only them.
    let flaky = Server::start(|_, seen| match seen {
        1 | 3 => Reply::Json(500, json!({"error": "overloaded"})),
        _ => Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]})),
    })
    .await;
    let (scratch, file) = tasks_scratch(&flaky.base);
    let out = scratch.path().join("results.jsonl");
    let keep = ["--out", out.to_str().unwrap(), "--concurrency", "1"];
    let first = tasks(scratch.path(), &file, &keep);
    assert_eq!(first.status.code(), Some(2), "{}", stderr(&first));
    let said = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(
        said.contains("over the 4 completed (0 from an earlier run), 2 failed"),
        "{said}"
    );
    let err = stderr(&first);
    assert!(
        err.contains("2 of 6 tasks failed and are not scored")
            && err.contains("again with the same --out completes them"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 4);
    let again = tasks(scratch.path(), &file, &keep);
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        said.contains("over the 6 completed (4 from an earlier run), 0 failed"),
        "{said}"
    );
    assert_eq!(flaky.requests().len(), 8, "only the failed two asked again");
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 6);
}

#[cfg(unix)]
#[test]
fn training_and_validation_repositories_are_found_by_path_in_every_shape_or_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-python");
    for name in ["a", "b"] {
        copy_dir(&python, &scratch.join("repos").join(name));
    }
    std::os::unix::fs::symlink(scratch.join("repos/a"), scratch.join("link")).unwrap();
    // Run from `scratch`, so that relative paths start there.
    let eval_training = |out: &str, train: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
            .current_dir(scratch)
            .args(["eval", "repos/a", "repos/b", "--holes", "2", "--out", out])
            .args(["--candidates", "62", "--compose", "", "--train", train])
            .envs(crate::common::hermetic_env(scratch))
            .output()
            .unwrap()
    };
    let absolute = scratch.join("repos/a").to_str().unwrap().to_string();
    let shapes = [
        "a".to_string(),
        "repos/a".to_string(),
        "repos/a/".to_string(),
        "./repos/../repos/a".to_string(),
        absolute.clone(),
        format!("{absolute}/"),
        "link".to_string(),
        scratch.join("link").to_str().unwrap().to_string(),
    ];
    for (n, train) in shapes.iter().enumerate() {
        let out = format!("out{n}");
        succeeded(&eval_training(&out, train));
        let report = std::fs::read_to_string(scratch.join(out).join("report.md")).unwrap();
        assert!(
            report.contains("training repositories: a; test repositories: b."),
            "--train {train}: {report}"
        );
    }
    let err = one_line_error(&eval_training("none", "repos/c"));
    assert!(
        err.contains(
            "--train repos/c: no repository of this run is at that path or has that name (a, b)"
        ),
        "{err}"
    );

    // `keyhole train`'s held-out repositories, the same way.
    std::os::unix::fs::symlink(scratch.join("repos/b"), scratch.join("link-b")).unwrap();
    let train_validating = |validation: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_keyhole"))
            .current_dir(scratch)
            .args(["train", "out0", "--corpus", "repos", "--max-epochs", "1"])
            .args(["--out", "model.safetensors", "--validation", validation])
            .envs(crate::common::hermetic_env(scratch))
            .output()
            .unwrap()
    };
    let absolute = scratch.join("repos/b/").to_str().unwrap().to_string();
    for validation in ["b", "repos/b", &absolute, "link-b"] {
        succeeded(&train_validating(validation));
        let report = std::fs::read_to_string(scratch.join("model.report.md")).unwrap();
        assert!(
            report.contains("validated on b ("),
            "--validation {validation}: {report}"
        );
    }
    let err = one_line_error(&train_validating("repos/c"));
    assert!(
        err.contains("--validation repos/c: no labelled repository is at that path (in --corpus) or has that name (a, b)"),
        "{err}"
    );
}
