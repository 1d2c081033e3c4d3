//! `keyhole tune` as a user meets it: the real binary labels the sample repository with a
//! backend (the embedded model, or a loopback server that counts requests), trains RLPG-H on
//! the labels and keeps it in the scratch data directory, where `proposals` and `complete`
//! then find it for that backend and model only.

use crate::backends_support;
use crate::common;
use crate::reliability_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use backends_support::{Reply, Server};
use keyhole::testing::eval::LabelRow;
use reliability_support::{keyhole, one_line_error, stdout, write_backends};
use serde_json::{Value, json};

const HOLE: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The one directory tune keeps a backend's model's classifier in.
fn tuned_dir(scratch: &Path, prefix: &str) -> PathBuf {
    let root = scratch.join("data/tuned");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

fn label_rows(dir: &Path) -> Vec<LabelRow> {
    std::fs::read_to_string(dir.join("labels/sample-repo.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn tune_writes_a_classifier_and_its_report_and_a_second_run_resumes() {
    let scratch = tempfile::tempdir().unwrap();
    let args = [
        "tune",
        &common::sample(),
        "--holes",
        "16",
        "--max-epochs",
        "3",
    ];
    let first = keyhole(scratch.path(), &args, &[]);
    let table = stdout(&first);
    let dir = tuned_dir(scratch.path(), "embedded--embedded--");
    for file in [
        "classifier.safetensors",
        "report.md",
        "report.json",
        "tuned.json",
    ] {
        assert!(dir.join(file).is_file(), "{file} in {}", dir.display());
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(
        table.trim(),
        report.trim(),
        "the report is what tune prints"
    );
    for row in [
        "| RLPG-H tuned for this model |",
        "| RLPG-H before tuning (bundled) |",
        "| best fixed proposal, in hindsight (#",
        "| default context |",
        "| oracle (best candidate per hole) |",
    ] {
        assert!(report.contains(row), "{row} in {report}");
    }
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let held_out = json["comparison"]["holes"].as_u64().unwrap();
    let trained = json["training"]["train_holes"].as_u64().unwrap();
    // One repository: whole files of it are held out.
    assert!(held_out > 0 && trained > 0, "{json}");
    assert!(
        json["held_out"]
            .as_str()
            .unwrap()
            .contains("files of sample-repo")
    );
    assert!(json["comparison"]["oracle"].as_f64() >= json["comparison"]["default"].as_f64());
    let rows = label_rows(&dir).len();
    assert!(stderr(&first).contains("16 holes: 16 complete (0 from an earlier run, 16 now)"));

    // Again: every hole is labelled already, so nothing is asked and the labels stay.
    let again = keyhole(scratch.path(), &args, &[]);
    stdout(&again);
    assert!(
        stderr(&again).contains(
            "16 holes: 16 complete (16 from an earlier run, 0 now), 0 failed; 0 requests"
        ),
        "{}",
        stderr(&again)
    );
    assert_eq!(label_rows(&dir).len(), rows);
    // Other settings would mix labels: refused, saying what differs and what to do.
    let other = keyhole(
        scratch.path(),
        &["tune", &common::sample(), "--holes", "17"],
        &[],
    );
    let message = one_line_error(&other);
    assert!(
        message.contains("--holes 16, not 17") && message.contains("move the directory away"),
        "{message}"
    );
}

/// A scratch directory with a backend `srv` (OpenAI-style) at `base`.
fn scratch_with_server(base: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[backend]]\nname = \"srv\"\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"tiny-coder\"\nretries = 0\n"
    );
    write_backends(scratch.path(), &toml);
    scratch
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tuned_classifier_ranks_for_its_backend_and_model_only_and_flags_override_it() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]})))
            .await;
    let scratch = scratch_with_server(&server.base);
    let s = scratch.path();
    let tune = [
        "tune",
        &common::sample(),
        "--backend",
        "srv",
        "--holes",
        "8",
        "--max-epochs",
        "2",
    ];
    let said = stderr(&{
        let output = keyhole(s, &tune, &[]);
        stdout(&output);
        output
    });
    assert!(
        said.contains("RLPG-H tuned for srv (tiny-coder), 8 holes in "),
        "{said}"
    );
    let sample = common::sample();
    let proposals = |extra: &[&str]| {
        let mut args = vec!["proposals", sample.as_str(), HOLE];
        args.extend_from_slice(extra);
        stdout(&keyhole(s, &args, &[]))
    };
    let ranker_line = |table: &str| {
        table
            .lines()
            .find(|l| l.starts_with("ranker"))
            .unwrap()
            .to_string()
    };
    let tuned = proposals(&["--backend", "srv"]);
    assert_eq!(
        ranker_line(&tuned),
        "ranker      RLPG-H tuned for srv (tiny-coder), 8 holes"
    );
    // The same backend serving another model, and another backend: the bundled classifier.
    let other_model = proposals(&["--backend", "srv", "--model", "big-coder"]);
    assert_eq!(ranker_line(&other_model), "ranker      RLPG-H");
    assert_eq!(ranker_line(&proposals(&[])), "ranker      RLPG-H");
    // A classifier asked for by name wins.
    let model = tuned_dir(s, "srv--tiny-coder--").join("classifier.safetensors");
    let asked = proposals(&["--backend", "srv", "--classifier", model.to_str().unwrap()]);
    assert_eq!(ranker_line(&asked), "ranker      RLPG-H");
    // The online ranker starts from it.
    let online = proposals(&["--backend", "srv", "--ranker", "online"]);
    assert_eq!(
        ranker_line(&online),
        "ranker      online, starting from RLPG-H tuned for srv (tiny-coder), 8 holes"
    );
    let json: Value = serde_json::from_str(&proposals(&["--backend", "srv", "--json"])).unwrap();
    assert_eq!(
        json["ranks_with"],
        "RLPG-H tuned for srv (tiny-coder), 8 holes"
    );
    // `complete` says what chose its candidates.
    let args = ["complete", &sample, HOLE, "--backend", "srv", "-k", "1"];
    let completed = stdout(&keyhole(s, &args, &[]));
    assert!(
        completed.contains("ranker   RLPG-H tuned for srv (tiny-coder), 8 holes"),
        "{completed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_budget_is_honoured_and_identical_prompts_share_one_request() {
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]})))
            .await;
    let scratch = scratch_with_server(&server.base);
    let s = scratch.path();
    let tune = |requests: &str| {
        keyhole(
            s,
            &[
                "tune",
                &common::sample(),
                "--backend",
                "srv",
                "--holes",
                "12",
                "--requests",
                requests,
                "--max-epochs",
                "2",
            ],
            &[],
        )
    };
    // Too few for one held-out hole in full: refused before anything is sent.
    let refused = one_line_error(&tune("5"));
    assert!(refused.contains("--requests 5: too few"), "{refused}");
    assert!(server.requests().is_empty());

    stdout(&tune("150"));
    let sent = server.requests();
    assert!(
        !sent.is_empty() && sent.len() <= 150,
        "{} requests",
        sent.len()
    );
    // No prompt was sent twice, yet more candidates were labelled than requests sent: those
    // whose prompts were identical took one answer.
    let prompts: std::collections::HashSet<&str> = sent
        .iter()
        .map(|r| r.body["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(
        prompts.len(),
        sent.len(),
        "an identical prompt was sent twice"
    );
    let dir = tuned_dir(s, "srv--tiny-coder--");
    let rows = label_rows(&dir);
    let labelled = rows.iter().filter(|r| r.applicable).count();
    assert!(
        labelled > sent.len(),
        "{labelled} labels from {} requests",
        sent.len()
    );
    // Fewer holes than sampled were affordable; the held-out ones are labelled in full.
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["requests"].as_u64().unwrap() as usize, sent.len());
    assert!(report["shared"].as_u64().unwrap() > 0, "{report}");

    // A second budget goes to holes not labelled yet; the labels made stay.
    let before = rows.len();
    stdout(&tune("150"));
    assert!(server.requests().len() - sent.len() <= 150);
    let after = label_rows(&dir);
    assert!(after.len() > before);
    assert_eq!(after[..before], rows[..]);
}

#[test]
fn tune_labels_from_batch_files_for_a_serving_engine() {
    // Nothing listens at the backend's URL: every answer comes from the files.
    let scratch = scratch_with_server("http://127.0.0.1:9");
    let s = scratch.path();
    let requests = s.join("requests.jsonl");
    let answers = s.join("answers.jsonl");
    let tune = |batch: &[&str]| {
        let mut args = vec![
            "tune",
            "--backend",
            "srv",
            "--holes",
            "8",
            "--requests",
            "150",
            "--max-epochs",
            "2",
        ];
        let sample = common::sample();
        args.insert(1, &sample);
        args.extend_from_slice(batch);
        keyhole(s, &args, &[])
    };
    let exported = tune(&["--export-requests", requests.to_str().unwrap()]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    assert!(exported.stdout.is_empty(), "no report before the answers");
    let lines: Vec<Value> = std::fs::read_to_string(&requests)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty() && lines.len() <= 150, "{}", lines.len());
    let prompts: std::collections::HashSet<&str> = lines
        .iter()
        .map(|l| l["body"]["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(
        prompts.len(),
        lines.len(),
        "an identical prompt was exported twice"
    );
    let answered: Vec<String> = lines
        .iter()
        .map(|l| {
            json!({
                "custom_id": l["custom_id"],
                "response": {"status_code": 200, "body": {"choices": [{"index": 0, "text": "x;"}]}},
                "error": null,
            })
            .to_string()
        })
        .collect();
    std::fs::write(&answers, answered.join("\n") + "\n").unwrap();
    let imported = tune(&["--import-responses", answers.to_str().unwrap()]);
    let table = stdout(&imported);
    assert!(
        table.contains("This run labelled from batch files."),
        "{table}"
    );
    let dir = tuned_dir(s, "srv--tiny-coder--");
    assert!(dir.join("tuned.json").is_file());
    let labelled = label_rows(&dir).iter().filter(|r| r.applicable).count();
    assert!(labelled > lines.len(), "identical prompts share one answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn recorded_outcomes_of_keyholes_arm_join_the_labels_when_asked() {
    use keyhole::testing::proxy::ab::{Arm, Judged, Outcome};
    use keyhole::testing::proxy::{Composition, Exchange, RecordStore};
    let server =
        Server::start(|_, _| Reply::Json(200, json!({"choices": [{"index": 0, "text": "x;"}]})))
            .await;
    let scratch = scratch_with_server(&server.base);
    let s = scratch.path();
    // What `keyhole proxy --compose --to srv's URL --repo SAMPLE` kept of three completions of
    // keyhole's prompt, in three files, and one of the plugin's (which teaches nothing).
    let store = RecordStore::open(&s.join("data/proxy"), 1 << 20).unwrap();
    let repo = std::fs::canonicalize(common::sample()).unwrap();
    let holes = [
        (Arm::Keyhole, HOLE, Outcome::Accepted),
        (
            Arm::Keyhole,
            "src/main/java/com/acme/shop/model/Customer.java:20:9",
            Outcome::Rejected,
        ),
        (
            Arm::Keyhole,
            "src/main/java/com/acme/shop/pricing/PriceCalculator.java:20:9",
            Outcome::Accepted,
        ),
        (Arm::Plugin, HOLE, Outcome::Accepted),
    ];
    for (arm, hole, outcome) in holes {
        let exchange = Exchange {
            upstream: format!("{}/", server.base.trim_end_matches('/')),
            composition: Some(Composition {
                arm: Some(arm),
                candidate: Some(7),
                hole: Some(hole.into()),
                repo: Some(repo.display().to_string()),
                ..Composition::default()
            }),
            ..Exchange::default()
        };
        let id = store.append(&exchange).unwrap();
        let judged = Judged {
            outcome,
            accepted_chars: 0,
        };
        store.set_judged(id, judged).unwrap();
    }
    let tune = |extra: &[&str]| {
        let mut args = vec![
            "tune",
            &common::sample(),
            "--backend",
            "srv",
            "--holes",
            "8",
            "--max-epochs",
            "1",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = keyhole(s, &args, &[]);
        stdout(&output);
        stderr(&output)
    };
    let said = tune(&["--recorded-outcomes"]);
    let joined = said
        .lines()
        .find(|l| l.contains("through keyhole proxy --compose join the labels"))
        .unwrap_or_else(|| panic!("{said}"));
    let count = |text: &str| -> usize { text.trim().parse().unwrap() };
    let (taught, rest) = joined.split_once(" completions").unwrap();
    let left_out = rest.split('(').nth(1).unwrap().split(' ').next().unwrap();
    let taught = count(taught.rsplit(' ').next().unwrap());
    assert_eq!(taught + count(left_out), 3, "{joined}");
    assert!(taught >= 1, "{joined}");
    // Without the flag, nothing recorded is read.
    assert!(!tune(&[]).contains("join the labels"));
}
