//! The prompt proposal classifier as users meet it: `keyhole proposals` sorts by the chosen
//! ranker's score, `keyhole train` makes a model from label files that `proposals` can use,
//! and bad model files give one-line errors naming them.

use crate::common;

use common::{copy_sample, keyhole, ok, sample};
use serde_json::Value;

const DEMO: &str = "src/main/java/com/acme/shop/service/OrderService.java:94:32";

#[test]
fn every_ranker_sorts_the_applicable_candidates_by_its_score() {
    let scratch = tempfile::tempdir().unwrap();
    for ranker in ["rlpg-h", "rlpg-r", "bm25", "fixed", "online"] {
        let out = ok(keyhole(
            &["proposals", &sample(), DEMO, "--json", "--ranker", ranker],
            scratch.path(),
        ));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ranking: Vec<usize> = serde_json::from_value(json["ranking"].clone()).unwrap();
        let proposals = json["proposals"].as_array().unwrap();
        let score = |id: usize| {
            let row = if id == 62 {
                &json["default"]
            } else {
                &proposals[id]
            };
            row["score"].as_f64().unwrap()
        };
        assert!(
            ranking.contains(&62),
            "{ranker}: the default context is a candidate"
        );
        assert!(
            ranking.windows(2).all(|w| score(w[0]) >= score(w[1])),
            "{ranker}: {ranking:?}"
        );
        for p in proposals {
            let ranked = ranking.contains(&(p["id"].as_u64().unwrap() as usize));
            assert_eq!(ranked, p["applicable"].as_bool().unwrap(), "{ranker}: {p}");
            assert_eq!(p["rank"].is_null(), !ranked);
        }
    }
}

#[test]
fn the_online_ranker_explains_its_order_with_counts() {
    use keyhole::candidate::CandidateId;
    use keyhole::rank::online::OnlineRanker;
    let scratch = tempfile::tempdir().unwrap();
    // Candidate 9 picked 2 of the 3 times it was shown beside 6 and 7.
    let mut ranker = OnlineRanker::default();
    let shown = [6, 7, 9].map(CandidateId::nth);
    for picked in [9, 9, 6] {
        ranker.record_pick(&shown, CandidateId::nth(picked));
    }
    let data = scratch.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    ranker.save(&data.join("online-ranker.json")).unwrap();
    let args = ["proposals", &sample(), DEMO, "--ranker", "online"];
    let text = String::from_utf8(ok(keyhole(&args, scratch.path())).stdout).unwrap();
    assert!(text.contains("3 picks; picks per showing"), "{text}");
    assert!(text.contains("no exploration"), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("rank  score"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |id: &str| rows.iter().find(|r| r.get(2) == Some(&id)).unwrap().clone();
    assert_eq!(
        &row("9")[..2],
        ["1", "2/3"],
        "picked 2 of 3 ranks first: {text}"
    );
    assert_eq!(row("7")[1], "0/3", "{text}");
    assert!(
        row("0")[1].parse::<f64>().is_ok(),
        "never shown: a prior score: {text}"
    );
    let json_args = ["proposals", &sample(), DEMO, "--ranker", "online", "--json"];
    let json: Value =
        serde_json::from_slice(&ok(keyhole(&json_args, scratch.path())).stdout).unwrap();
    assert_eq!(
        json["online_counts"]["9"],
        serde_json::json!({"picks": 2, "shown": 3})
    );
    let fixed = ["proposals", &sample(), DEMO, "--json"];
    let json: Value = serde_json::from_slice(&ok(keyhole(&fixed, scratch.path())).stdout).unwrap();
    assert!(
        json.get("online_counts").is_none(),
        "only for the online ranker"
    );
}

#[test]
fn the_table_shows_scores_best_first_and_names_the_ranker() {
    let scratch = tempfile::tempdir().unwrap();
    let out = ok(keyhole(&["proposals", &sample(), DEMO], scratch.path()));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ranker      RLPG-H"), "{text}");
    let scores: Vec<f64> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("rank  score"))
        .skip(1)
        .map_while(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(scores.len() > 5, "{text}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(
        scores.iter().all(|s| (0.0..=1.0).contains(s)),
        "probabilities: {scores:?}"
    );
}

#[test]
fn a_bad_model_file_is_a_one_line_error_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let junk = scratch.path().join("junk.safetensors");
    std::fs::write(&junk, b"not a model").unwrap();
    let missing = scratch.path().join("missing.safetensors");
    for file in [&junk, &missing] {
        let out = keyhole(
            &[
                "proposals",
                &sample(),
                DEMO,
                "--classifier",
                file.to_str().unwrap(),
            ],
            scratch.path(),
        );
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    }
}

#[test]
fn a_model_trained_on_label_files_ranks_proposals() {
    let scratch = tempfile::tempdir().unwrap();
    let corpus = scratch.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    for name in ["shop-a", "shop-b"] {
        copy_sample(&corpus.join(name));
    }
    let eval_out = scratch.path().join("eval");
    let repos = [corpus.join("shop-a"), corpus.join("shop-b")];
    ok(keyhole(
        &[
            "eval",
            repos[0].to_str().unwrap(),
            repos[1].to_str().unwrap(),
            "--holes",
            "40",
            "--train",
            "shop-a",
            "--compose",
            "2",
            "--out",
            eval_out.to_str().unwrap(),
        ],
        scratch.path(),
    ));
    let report = std::fs::read_to_string(eval_out.join("report.md")).unwrap();
    for row in [
        "| RLPG-H |",
        "| RLPG-R |",
        "Table 10",
        "rank the test repositories only",
    ] {
        assert!(report.contains(row), "{row} missing from the report");
    }
    let model = scratch.path().join("model.safetensors");
    let train = |variant: &str| {
        ok(keyhole(
            &[
                "train",
                eval_out.to_str().unwrap(),
                "--corpus",
                corpus.to_str().unwrap(),
                "--validation",
                "shop-b",
                "--variant",
                variant,
                "--max-epochs",
                "2",
                "--out",
                model.to_str().unwrap(),
            ],
            scratch.path(),
        ))
    };
    // RLPG-R keeps the encoder of the RLPG-H model already at --out.
    let h = String::from_utf8(train("h").stdout).unwrap();
    assert!(
        h.contains("RLPG-H training report") && h.contains("validated on shop-b"),
        "{h}"
    );
    let before_r = std::fs::metadata(&model).unwrap().len();
    train("r");
    assert!(
        std::fs::metadata(&model).unwrap().len() > before_r,
        "the R head was added"
    );
    assert!(model.with_extension("report.md").exists());
    assert!(model.with_extension("report.json").exists());
    for ranker in ["rlpg-h", "rlpg-r"] {
        let out = ok(keyhole(
            &[
                "proposals",
                &sample(),
                DEMO,
                "--json",
                "--ranker",
                ranker,
                "--classifier",
                model.to_str().unwrap(),
            ],
            scratch.path(),
        ));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!json["ranking"].as_array().unwrap().is_empty());
    }
}

#[test]
fn complete_takes_the_top_k_of_the_chosen_ranker() {
    let scratch = tempfile::tempdir().unwrap();
    for ranker in ["rlpg-h", "bm25"] {
        let listing = ok(keyhole(
            &["proposals", &sample(), DEMO, "--json", "--ranker", ranker],
            scratch.path(),
        ));
        let listing: Value = serde_json::from_slice(&listing.stdout).unwrap();
        let best: Vec<u64> = listing["ranking"].as_array().unwrap()[..3]
            .iter()
            .map(|id| id.as_u64().unwrap())
            .collect();
        let done = ok(keyhole(
            &[
                "complete",
                &sample(),
                DEMO,
                "--json",
                "-k",
                "3",
                "--ranker",
                ranker,
            ],
            scratch.path(),
        ));
        let done: Value = serde_json::from_slice(&done.stdout).unwrap();
        let used: Vec<u64> = done["completions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["proposal_id"].as_u64().unwrap())
            .collect();
        assert_eq!(used, best, "{ranker}");
    }
}
