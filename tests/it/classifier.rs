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
    use keyhole::CandidateId;
    use keyhole::testing::rank::online::OnlineRanker;
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

/// The bundled model, tuned for the embedded backend as `keyhole tune` leaves it under
/// `scratch`: its file (written with `bytes`) and the description that makes sessions use it.
fn tuned_for_the_embedded_backend(scratch: &std::path::Path, bytes: &[u8]) -> std::path::PathBuf {
    use keyhole::testing::session::tuned;
    let dirs = keyhole::Dirs::under(scratch);
    let entry = keyhole::BackendConfig::embedded();
    let dir = tuned::tuned_dir(&dirs, &entry).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(tuned::CLASSIFIER_FILE);
    std::fs::write(&file, bytes).unwrap();
    let info = tuned::TunedInfo {
        version: 1,
        backend: entry.name.clone(),
        model: tuned::model_name(&entry),
        variant: "RLPG-H".into(),
        train_holes: 30,
        validation_holes: 10,
        repositories: vec!["a".into()],
        success: 50.0,
        success_before: 45.0,
        unix_time: 0,
    };
    tuned::record(&dir, &info).unwrap();
    file
}

const BUNDLED: &[u8] = include_bytes!("../../src/rank/classifier/bundled.safetensors");

/// The bundled model with its RLPG-H head's output weights all NaN (a tuning that diverged).
fn with_nan_weights() -> Vec<u8> {
    use candle_core::{Device, Tensor};
    let mut tensors = candle_core::safetensors::load_buffer(BUNDLED, &Device::Cpu).unwrap();
    let out = &tensors["h.out.weight"];
    let nan = Tensor::full(f32::NAN, out.shape(), &Device::Cpu).unwrap();
    tensors.insert("h.out.weight".into(), nan);
    let file = tempfile::NamedTempFile::new().unwrap();
    candle_core::safetensors::save(&tensors, file.path()).unwrap();
    std::fs::read(file.path()).unwrap()
}

#[test]
fn a_damaged_tuned_classifier_is_refused_in_one_line_and_the_bundled_one_ranks() {
    let ranker_line = |stdout: &[u8]| {
        let text = String::from_utf8_lossy(stdout);
        let line = text.lines().find(|l| l.starts_with("ranker"));
        line.unwrap_or_default().to_string()
    };
    let scratch = tempfile::tempdir().unwrap();
    tuned_for_the_embedded_backend(scratch.path(), BUNDLED);
    let intact = ok(keyhole(&["proposals", &sample(), DEMO], scratch.path()));
    assert!(
        ranker_line(&intact.stdout).contains("tuned for embedded"),
        "{}",
        ranker_line(&intact.stdout)
    );
    assert!(intact.stderr.is_empty());

    let flipped = {
        let mut bytes = BUNDLED.to_vec();
        let at = bytes.len() * 3 / 4;
        bytes[at] ^= 0x40;
        bytes
    };
    for damage in ["truncated", "emptied", "deleted", "flipped", "NaN"] {
        let scratch = tempfile::tempdir().unwrap();
        let bytes = match damage {
            "NaN" => with_nan_weights(),
            _ => BUNDLED.to_vec(),
        };
        let file = tuned_for_the_embedded_backend(scratch.path(), &bytes);
        match damage {
            "truncated" => std::fs::write(&file, &BUNDLED[..BUNDLED.len() / 2]).unwrap(),
            "emptied" => std::fs::write(&file, b"").unwrap(),
            "deleted" => std::fs::remove_file(&file).unwrap(),
            "flipped" => std::fs::write(&file, &flipped).unwrap(),
            // NaN: written so by tune itself: its checksum holds, its weights do not.
            _ => {}
        }
        let out = ok(keyhole(&["proposals", &sample(), DEMO], scratch.path()));
        let stderr = String::from_utf8(out.stderr).unwrap();
        // On main: nothing said (a flipped or NaN model even ranked).
        assert_eq!(stderr.lines().count(), 1, "{damage}: {stderr}");
        assert!(
            stderr.starts_with(
                "keyhole: warning: tuned classifier left out, ranking with the bundled one: "
            ) && stderr.contains(&file.display().to_string()),
            "{damage}: {stderr}"
        );
        assert_eq!(ranker_line(&out.stdout), "ranker      RLPG-H", "{damage}");
    }
}
