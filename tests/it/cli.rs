//! The command line as a user runs it: output shape, and one-line errors with exit code 2.

use crate::common;

use std::process::{Command, Output};

use serde_json::Value;

const DEMO: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";

fn keyhole(args: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .envs(common::hermetic_env(scratch.path()))
        .output()
        .unwrap()
}

fn sample() -> String {
    common::sample_path().to_string_lossy().into_owned()
}

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn one_line_error(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn typed_hole_rows_say_which_reading_built_them() {
    let json = stdout_json(&keyhole(&["proposals", &sample(), DEMO, "--json"]));
    let typed: Vec<&Value> = json["retrieved"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| [71, 72].contains(&r["id"].as_u64().unwrap()))
        .collect();
    assert_eq!(typed.len(), 2);
    // Servers are off in the tests' environment: the syntax tree read both.
    for row in &typed {
        assert_eq!(row["reader"], "tree-sitter", "{row}");
    }
    let others = json["retrieved"].as_array().unwrap().iter();
    assert!(
        others
            .filter(|r| r["id"] == 63)
            .all(|r| r["reader"].is_null())
    );
    let text = stdout(&keyhole(&["proposals", &sample(), DEMO]));
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("72 "))
        .unwrap();
    assert!(line.contains("tree-sitter: "), "{line}");
}

#[test]
fn proposals_json_lists_all_62_rows() {
    let json = stdout_json(&keyhole(&["proposals", &sample(), DEMO, "--json"]));
    let rows = json["proposals"].as_array().unwrap();
    assert_eq!(rows.len(), 62);
    assert_eq!(rows[14]["id"], 14);
    assert_eq!(rows[14]["source"], "import");
    assert_eq!(rows[14]["context_type"], "MNB");
    assert_eq!(rows[32]["source"], "child_class");
    assert_eq!(
        rows[32]["applicable"], false,
        "nothing extends OrderService"
    );
    assert_eq!(
        rows[8]["files"][0],
        "src/main/java/com/acme/shop/service/BaseService.java"
    );
    for row in rows {
        assert!(row["tokens"].as_u64().unwrap() <= row["allocated"].as_u64().unwrap());
        assert_eq!(
            row["applicable"].as_bool().unwrap(),
            row["tokens"].as_u64().unwrap() > 0
        );
    }
    assert_eq!(json["hole"]["target"], "findByCustomerId(customerId);");
}

#[test]
fn prompt_prints_the_composed_text_and_its_segments() {
    let args = [
        "prompt",
        &sample(),
        DEMO,
        "--proposal",
        "9",
        "--budget",
        "300",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plain = keyhole(&args);
    let json = stdout_json(&keyhole(&[args.as_slice(), &["--json"]].concat()));
    assert_eq!(
        String::from_utf8(plain.stdout).unwrap(),
        json["text"].as_str().unwrap()
    );
    let segments = json["segments"].as_array().unwrap();
    let kinds: Vec<&str> = segments
        .iter()
        .map(|s| s["kind"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["proposal", "separator", "default"]);
    assert!(json["tokens"].as_u64().unwrap() <= 300);
    let first_piece = &segments[0]["pieces"][1];
    assert_eq!(
        first_piece["file"],
        "src/main/java/com/acme/shop/service/BaseService.java"
    );
    assert!(
        json["text"]
            .as_str()
            .unwrap()
            .ends_with("return orderRepository.")
    );
}

#[test]
fn no_arguments_prints_the_demo_table_from_the_embedded_sample() {
    let output = keyhole(&[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("target      findByCustomerId(customerId);"));
    assert!(text.contains(" 62  default"));
    assert!(text.contains("of 62 proposals applicable"));
}

#[test]
fn the_python_sample_opens_at_its_demo_hole_offline() {
    let text = stdout(&keyhole(&["--sample", "python"]));
    assert!(
        text.contains("hole        shop/services/order_service.py:22:28"),
        "{text}"
    );
    assert!(text.contains("target      save(order)"), "{text}");
    let text = stdout(&keyhole(&["--sample", "typescript"]));
    assert!(
        text.contains("hole        src/service/loan-service.ts:21:20"),
        "{text}"
    );
    let err = crate::reliability_support::one_line_error(&keyhole(&["--sample", "cobol"]));
    assert!(
        err.contains("no bundled sample \"cobol\" (there are: java, python, typescript)"),
        "{err}"
    );
}

#[test]
fn a_repository_without_a_terminal_prints_its_own_table_at_the_opening_hole() {
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path().join("src/shop");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Price.java"),
        "package shop;\n\npublic class Price {\n    long cents;\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Cart.java"),
        "package shop;\n\nimport java.util.List;\n\npublic class Cart {\n    Price total() {\n        return new Price();\n    }\n}\n",
    )
    .unwrap();
    let text = stdout(&keyhole(&[repo.path().to_str().unwrap()]));
    // Price is the file another imports; its first hole past the package line.
    assert!(text.contains("src/shop/Price.java:3:"), "{text}");
    assert!(!text.contains("OrderService"), "{text}");
    assert!(text.contains(" 62  default"), "{text}");
}

#[test]
fn a_candidate_that_does_not_apply_is_never_completed() {
    // The embedded model follows no instructions, so ProCC's summary (70) has no context.
    let alone = keyhole(&["complete", &sample(), DEMO, "--id", "70"]);
    let err = crate::reliability_support::one_line_error(&alone);
    assert!(
        err.contains(
            "candidate 70 does not apply: backend `embedded` does not follow instructions"
        ),
        "{err}"
    );
    let mixed = stdout_json(&keyhole(&[
        "complete",
        &sample(),
        DEMO,
        "--id",
        "70",
        "--id",
        "62",
        "--json",
    ]));
    let rows = mixed["completions"].as_array().unwrap();
    assert!(rows[0]["text"].is_null(), "{mixed}");
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("does not apply: ")
    );
    assert!(
        rows[1]["text"].is_string(),
        "the default context is completed"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let err = one_line_error(&keyhole(&["proposals", "/no/such/repo", DEMO]));
    assert!(err.contains("/no/such/repo: no such directory"), "{err}");
    let err = one_line_error(&keyhole(&["proposals", &sample(), "Missing.java:1:1"]));
    assert!(err.contains("Missing.java: no such source file"), "{err}");
    let err = one_line_error(&keyhole(&[
        "proposals",
        &sample(),
        &DEMO.replace(":94:32", ":94:99"),
    ]));
    assert!(
        err.contains("OrderService.java:94:99: column out of range"),
        "{err}"
    );
    let err = one_line_error(&keyhole(&["proposals", &sample(), "OrderService.java"]));
    assert!(err.contains("expected FILE:LINE:COL"), "{err}");
    let err = one_line_error(&keyhole(&["prompt", &sample(), DEMO, "--id", "99"]));
    assert!(err.contains("'99'") && err.contains("--id"), "{err}");
    let err = one_line_error(&keyhole(&[
        "proposals",
        &sample(),
        DEMO,
        "--tokenizer",
        "gpt9",
    ]));
    assert!(err.contains("unknown tokenizer 'gpt9'"), "{err}");
}

#[test]
fn holes_lists_sampled_positions() {
    let json = stdout_json(&keyhole(&["holes", &sample(), "--cap", "5", "--json"]));
    let holes = json["holes"].as_array().unwrap();
    assert_eq!(holes.len(), 5);
    assert!(holes.iter().all(|h| h["line"].as_u64().unwrap() >= 1));
}

#[test]
fn exported_holes_run_as_a_task_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    let out = dir.path().join("results.jsonl");
    let exported = keyhole(&[
        "holes",
        &sample(),
        "--cap",
        "12",
        "--export",
        file.to_str().unwrap(),
    ]);
    assert!(exported.status.success());
    let run = keyhole(&[
        "tasks",
        file.to_str().unwrap(),
        "--repo",
        &sample(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        String::from_utf8(run.stdout)
            .unwrap()
            .starts_with("12 tasks, backend embedded: exact match")
    );
    let results = std::fs::read_to_string(out).unwrap();
    assert_eq!(results.lines().count(), 12);
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"x\"}\n").unwrap();
    let err = one_line_error(&keyhole(&["tasks", bad.to_str().unwrap()]));
    assert!(err.contains("bad.jsonl:1:"), "{err}");
}

#[test]
fn proposals_lists_the_retrieved_candidates_after_the_default_context() {
    let text = stdout(&keyhole(&["proposals", &sample(), DEMO]));
    for (id, label) in [
        (63, "file-level BM25"),
        (66, "RepoCoder"),
        (67, "RepoCoder iter 2"),
        (68, "ProCC lexical"),
        (69, "ProCC hypothetical line"),
    ] {
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{id}  {label}")))
            .unwrap_or_else(|| panic!("no row {id} in\n{text}"));
        assert!(row.contains(" yes "), "{row}");
    }
    let summary = text
        .lines()
        .find(|l| l.trim_start().starts_with("70  ProCC summary"))
        .unwrap();
    assert!(
        summary.contains(" no ") && summary.contains("does not follow instructions"),
        "{summary}"
    );

    let json = stdout_json(&keyhole(&["proposals", &sample(), DEMO, "--json"]));
    let rows = json["retrieved"].as_array().unwrap();
    let ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (63..=72).collect::<Vec<u64>>());
    let repocoder = &rows[3];
    assert!(repocoder["score"].as_f64().unwrap() > 0.0);
    assert!(repocoder["tokens"].as_u64().unwrap() <= 2036);
    assert_eq!(rows[7]["applicable"], false);
    assert!(rows[7]["why_not"].as_str().unwrap().contains("embedded"));
}

#[test]
fn prompt_takes_a_retrieved_candidate_by_id() {
    let text = stdout(&keyhole(&["prompt", &sample(), DEMO, "--id", "66"]));
    assert!(
        text.starts_with("// Here are some relevant code fragments from other files of the repo:"),
        "{text}"
    );
    assert!(text.ends_with("        return orderRepository."), "{text}");
    let json = stdout_json(&keyhole(&[
        "prompt",
        &sample(),
        DEMO,
        "--id",
        "67",
        "--json",
    ]));
    assert_eq!(json["proposal_id"], 67);
    let output = keyhole(&["prompt", &sample(), DEMO, "--id", "70"]);
    assert!(output.status.success());
    let note = String::from_utf8_lossy(&output.stderr);
    assert!(
        note.contains("not applicable") && note.contains("does not follow instructions"),
        "{note}"
    );
    let err = one_line_error(&keyhole(&["prompt", &sample(), DEMO, "--id", "73"]));
    assert!(err.contains("'73'") && err.contains("0 to 72"), "{err}");
}
