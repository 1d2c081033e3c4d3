//! Reports from synthetic label rows with known outcomes.
//!
//! Repository `a` is training, `b` and `c` are test. Per hole: the default context's success
//! and the applicable proposals with theirs (10 is `parent_class I`, 6 is `current PL 50%`):
//!
//! | hole | default | proposals         | note                                   |
//! |------|---------|-------------------|----------------------------------------|
//! | a1   | miss    | 10 hit, 6 miss    |                                        |
//! | a2   | miss    | 10 hit            |                                        |
//! | b1   | hit     | 10 miss, 6 hit    | row 10: both contexts truncated        |
//! | b2   | miss    | 10 hit, 6 hit     | row 10: proposal context truncated     |
//! | b3   | miss    | 6 miss            | default row: default context truncated |
//! | b4   | error   | none              | the default row matched but errored    |
//! | c1   | hit     | 6 hit, 10 hit     |                                        |

use keyhole::CandidateId;
use keyhole::Fidelity;
use keyhole::{testing::eval::LabelRow, testing::eval::ROWS_PER_HOLE, testing::eval::hole_id};
use keyhole::{
    testing::eval::report, testing::eval::report::Builder, testing::eval::report::MAX_K,
    testing::eval::report::Report, testing::eval::report::Truncation,
};

fn row(repo: &str, n: usize, id: usize, applicable: bool, success: bool) -> LabelRow {
    let file = "src/A.java";
    LabelRow {
        hole_id: hole_id(repo, file, n, 1),
        repository: repo.into(),
        file: file.into(),
        line: n,
        column: 1,
        proposal_id: CandidateId::nth(id),
        fidelity: Fidelity::Paper,
        applicable,
        success,
        edit_similarity: if success { 1.0 } else { 0.0 },
        edit_distance: 0,
        prediction: String::new(),
        target: String::new(),
        proposal_tokens: 0,
        default_tokens: 0,
        proposal_truncated: false,
        default_truncated: false,
        backend: "test".into(),
        error: None,
        bm25: None,
        retrieval_score: None,
        retrieval_jaccard: None,
        why_not: None,
        model_room: None,
    }
}

/// All 63 rows of one hole.
fn hole(repo: &str, n: usize, default: bool, proposals: &[(usize, bool)]) -> Vec<LabelRow> {
    (0..ROWS_PER_HOLE)
        .map(|id| match proposals.iter().find(|p| p.0 == id) {
            _ if CandidateId::DEFAULT == id => row(repo, n, id, true, default),
            Some(&(_, success)) => row(repo, n, id, true, success),
            None => row(repo, n, id, false, false),
        })
        .collect()
}

fn rows() -> Vec<LabelRow> {
    let mut rows: Vec<LabelRow> = [
        hole("a", 1, false, &[(10, true), (6, false)]),
        hole("a", 2, false, &[(10, true)]),
        hole("b", 1, true, &[(10, false), (6, true)]),
        hole("b", 2, false, &[(10, true), (6, true)]),
        hole("b", 3, false, &[(6, false)]),
        hole("b", 4, true, &[]),
        hole("c", 1, true, &[(6, true), (10, true)]),
    ]
    .concat();
    let mut edit = |repo: &str, n: usize, id: usize, f: fn(&mut LabelRow)| {
        let id_of = hole_id(repo, "src/A.java", n, 1);
        let r = rows
            .iter_mut()
            .find(|r| r.hole_id == id_of && r.proposal_id.index() == id)
            .unwrap();
        f(r);
    };
    edit("b", 1, 10, |r| {
        (r.default_truncated, r.proposal_truncated) = (true, true)
    });
    edit("b", 2, 10, |r| r.proposal_truncated = true);
    edit("b", 3, CandidateId::DEFAULT.index(), |r| {
        r.default_truncated = true
    });
    edit("b", 4, CandidateId::DEFAULT.index(), |r| {
        r.error = Some("timeout".into())
    });
    rows
}

fn train() -> Vec<String> {
    vec!["a".into()]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn method<'r>(report: &'r Report, name: &str) -> &'r report::MethodRow {
    report.methods.iter().find(|m| m.name == name).unwrap()
}

#[test]
fn summary_counts_holes_and_rows() {
    let rows = rows();
    let s = build().summary;
    assert_eq!((s.holes, s.rows, s.incomplete_holes), (7, rows.len(), 0));
    assert_eq!(
        (s.train, s.test),
        (vec!["a".to_string()], vec!["b".into(), "c".into()])
    );
    assert_eq!(s.method_scope, "test repositories");
}

fn build() -> Report {
    report::build(&rows(), &train(), 7)
}

#[test]
fn table2_compares_default_and_oracle_per_split() {
    let report = build();
    let split = |name: &str| report.splits.iter().find(|s| s.split == name).unwrap();
    let train = split("train");
    assert_eq!((train.repositories, train.holes), (1, 2));
    assert_eq!(
        (train.default.hole_wise, train.oracle.hole_wise),
        (0.0, 100.0)
    );
    assert_eq!(train.gain.hole_wise, None, "no gain over a zero rate");
    let test = split("test");
    assert_eq!((test.repositories, test.holes), (2, 5));
    // b: default 1/4, oracle 2/4; c: both 1/1 (b4's matching default row errored: a miss).
    assert_eq!(
        (test.default.hole_wise, test.oracle.hole_wise),
        (40.0, 60.0)
    );
    assert_eq!(
        (test.default.repo_wise, test.oracle.repo_wise),
        (62.5, 75.0)
    );
    assert_eq!(
        (test.gain.hole_wise, test.gain.repo_wise),
        (Some(50.0), Some(20.0))
    );
    let all = split("all");
    assert_eq!(all.holes, 7);
    assert!(close(all.default.hole_wise, 200.0 / 7.0));
    assert!(close(all.oracle.hole_wise, 500.0 / 7.0));
    assert!(close(all.oracle.repo_wise, 250.0 / 3.0));
    for s in &report.splits {
        assert!(s.oracle.hole_wise >= s.default.hole_wise);
        assert!(s.oracle.repo_wise >= s.default.repo_wise);
    }
}

#[test]
fn fixed_proposal_is_chosen_on_the_training_split() {
    let f = build().fixed_proposal;
    // On a, proposal 10 hits twice; proposal 6, which wins on the test split, never does.
    assert_eq!(
        (f.id, f.label.as_str(), f.success),
        (10, "parent_class I", 100.0)
    );
    assert_eq!((f.chosen_on.as_str(), f.holes), ("train", 2));
}

#[test]
fn methods_on_the_test_split() {
    let report = build();
    let names: Vec<&str> = report.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "default",
            "oracle",
            "random context",
            "random proposal",
            "file-level BM25",
            "identifier usage",
            "typed-hole types",
            "typed-hole headers",
            "fixed proposal",
            "fixed ranking",
            "RLPG-BM25",
            "RepoCoder",
            "RepoCoder iter 2",
            "ProCC lexical",
            "ProCC hypothetical line",
            "ProCC summary",
            "ProCC (LinUCB)",
        ]
    );
    let rate = |name| {
        let m = method(&report, name);
        (m.success.hole_wise, m.success.repo_wise)
    };
    assert_eq!(rate("default"), (40.0, 62.5));
    assert_eq!(rate("oracle"), (60.0, 75.0));
    // 10 misses on b1 and is not applicable on b3, where the default context misses.
    assert_eq!(rate("fixed proposal"), (40.0, 62.5));
    assert_eq!(method(&report, "fixed proposal").gain.hole_wise, Some(0.0));
    // FixedRanker puts current PL 50% (id 6) first: it hits on b1, b2 and c1.
    assert_eq!(rate("fixed ranking"), (60.0, 75.0));
    // The random pick only matters on b1 (10 misses, 6 hits); seed 7 draws 10 there.
    let (random, _) = rate("random proposal");
    assert_eq!(random, 40.0);
}

#[test]
fn random_method_is_seeded() {
    let json = |seed| serde_json::to_string(&report::build(&rows(), &train(), seed)).unwrap();
    assert_eq!(json(3), json(3));
    let picks: Vec<f64> = (0..16)
        .map(|seed| {
            let report = report::build(&rows(), &train(), seed);
            method(&report, "random proposal").success.hole_wise
        })
        .collect();
    assert!(picks.contains(&40.0) && picks.contains(&60.0), "{picks:?}");
}

#[test]
fn truncation_follows_the_chosen_prompt() {
    let report = build();
    let t = |name| &method(&report, name).truncation;
    // The fixed proposal picks 10 on b1, b2, c1 and the default context on b3, b4.
    let expected = Truncation {
        default: 40.0,
        proposal: 40.0,
        either: 60.0,
        both: 20.0,
    };
    assert_eq!(t("fixed proposal"), &expected);
    let default = Truncation {
        default: 20.0,
        either: 20.0,
        ..Truncation::default()
    };
    assert_eq!(t("default"), &default);
    assert_eq!(t("fixed ranking"), &Truncation::default());
}

#[test]
fn edit_similarity_follows_the_chosen_prompt() {
    // Here a hit has similarity 1 and a miss 0: the mean is the success rate.
    let report = build();
    for m in &report.methods {
        assert!(
            close(m.edit_similarity, m.success.hole_wise),
            "{}: {} vs {}",
            m.name,
            m.edit_similarity,
            m.success.hole_wise
        );
    }
    assert!(method(&report, "oracle").edit_similarity > method(&report, "default").edit_similarity);
}

#[test]
fn success_at_k_is_monotone_and_bounded_by_the_oracle() {
    let report = build();
    let oracle = method(&report, "oracle").success;
    for curve in &report.success_at_k {
        assert_eq!(curve.hole_wise.len(), MAX_K);
        for values in [&curve.hole_wise, &curve.repo_wise] {
            assert!(values.windows(2).all(|w| w[0] <= w[1]), "{}", curve.method);
        }
        assert!(curve.hole_wise.iter().all(|&v| v <= oracle.hole_wise));
        let top1 = method(&report, &curve.method).success.hole_wise;
        assert_eq!(curve.hole_wise[0], top1);
    }
    let fixed = report
        .success_at_k
        .iter()
        .find(|c| c.method == "fixed proposal")
        .unwrap();
    // The second attempt is the default context, which hits on b1.
    assert_eq!(&fixed.hole_wise[..3], [40.0, 60.0, 60.0]);
}

#[test]
fn per_proposal_source_and_context_type_rates_count_applicable_pairs() {
    let report = build();
    let p = |id: usize| &report.proposals[id];
    assert_eq!(report.proposals.len(), ROWS_PER_HOLE);
    assert_eq!((p(10).applicable, p(10).success), (5, 80.0));
    assert!(close(p(10).applicability, 500.0 / 7.0));
    assert_eq!((p(6).applicable, p(6).success), (5, 60.0));
    assert_eq!((p(0).applicable, p(0).success), (0, 0.0));
    assert_eq!(p(CandidateId::DEFAULT.index()).label, "default context");
    assert!(close(p(CandidateId::DEFAULT.index()).success, 200.0 / 7.0));
    let tally = |list: &[report::Tally], name: &str| {
        let t = list.iter().find(|t| t.name == name).unwrap();
        (t.applicable, t.success)
    };
    assert_eq!(report.sources.len(), 10);
    assert_eq!(tally(&report.sources, "current"), (5, 60.0));
    assert_eq!(tally(&report.sources, "parent_class"), (5, 80.0));
    assert_eq!(tally(&report.sources, "import"), (0, 0.0));
    assert_eq!(report.context_types.len(), 7);
    assert_eq!(tally(&report.context_types, "PL"), (5, 60.0));
    assert_eq!(tally(&report.context_types, "I"), (5, 80.0));
}

#[test]
fn repository_table_has_every_method() {
    let report = build();
    let repo = |name: &str| {
        report
            .repositories
            .iter()
            .find(|r| r.repository == name)
            .unwrap()
    };
    let a = repo("a");
    assert_eq!((a.split.as_str(), a.holes), ("train", 2));
    // default, oracle, (four baselines, two typed-hole contexts), fixed proposal, fixed ranking
    assert_eq!(
        (a.success[0], a.success[1], a.success[8], a.success[9]),
        (0.0, 100.0, 100.0, 0.0)
    );
    let b = repo("b");
    assert_eq!((b.split.as_str(), b.holes), ("test", 4));
    assert_eq!(
        (b.success[0], b.success[1], b.success[8], b.success[9]),
        (25.0, 50.0, 25.0, 50.0)
    );
    assert_eq!(repo("c").success, vec![100.0; 17]);
}

#[test]
fn further_methods_plug_in_as_rankings() {
    let rows = rows();
    let report = Builder::new(&rows, &train(), 7)
        .add_ranking("always 6", |_| vec![CandidateId::nth(6)])
        .add_ranking("oracle or nothing", |h| {
            CandidateId::all().filter(|&id| h.succeeded(id)).collect()
        })
        .build();
    assert_eq!(method(&report, "always 6").success.hole_wise, 60.0);
    assert_eq!(
        method(&report, "oracle or nothing").success,
        method(&report, "oracle").success
    );
    assert_eq!(report.success_at_k.len(), 19);
    assert_eq!(report.repositories[0].success.len(), 19);
}

#[test]
fn without_a_training_split_the_choice_is_made_on_all_holes() {
    let report = report::build(&rows(), &["zzz".to_string()], 7);
    assert_eq!(report.fixed_proposal.chosen_on, "all");
    assert_eq!(report.fixed_proposal.holes, 7);
    assert_eq!(report.summary.method_scope, "test repositories");
    assert_eq!(report.notes.len(), 3, "{:?}", report.notes);
    assert!(report.notes[0].contains("zzz"));
    assert!(report.notes[1].contains("chosen on all holes"));
    assert!(report.notes[2].contains("ProCC (LinUCB) learned online over all holes"));
    assert!(!report.splits.iter().any(|s| s.split == "train"));
}

#[test]
fn without_a_test_split_methods_cover_all_holes() {
    let all: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let report = report::build(&rows(), &all, 7);
    assert_eq!(report.summary.method_scope, "all repositories");
    assert!(close(
        method(&report, "default").success.hole_wise,
        200.0 / 7.0
    ));
}

#[test]
fn missing_rows_count_as_inapplicable() {
    let mut rows = rows();
    rows.retain(|r| !(r.repository == "c" && r.proposal_id == 6));
    let report = report::build(&rows, &train(), 7);
    assert_eq!(report.summary.incomplete_holes, 1);
    assert_eq!(report.proposals[6].applicable, 4);
}

#[test]
fn write_produces_markdown_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    report::write(&build(), dir.path()).unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    for heading in [
        "(Table 2)",
        "(Tables 3 and 8)",
        "(Table 12)",
        "(Figure 2, top)",
        "(Figure 3)",
        "(Tables 13–15)",
    ] {
        assert!(md.contains(heading), "{heading} missing");
    }
    assert!(md.contains("Fixed proposal: #10 `parent_class I`, chosen on 2 holes (train split)"));
    assert!(
        md.contains("| fixed proposal | 40.00 | +0.00 | 62.50 | +0.00 |"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["fixed_proposal"]["id"], 10);
    assert_eq!(
        json["splits"][0]["gain"]["hole_wise"],
        serde_json::Value::Null
    );
    for plot in ["success_at_k.svg", "sources.svg", "context_types.svg"] {
        let svg = std::fs::read_to_string(dir.path().join("plots").join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{plot}"
        );
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(md.contains(&format!("(plots/{plot})")), "{plot} not linked");
    }
}

/// A hole where ProCC's perspectives 68-70 applied with the given (score, Jaccard) and
/// successes, the summary not applicable (with why) where it has no features.
fn procc_hole(repo: &str, n: usize, arms: [(Option<(f64, f64)>, bool); 3]) -> Vec<LabelRow> {
    let mut rows = hole(repo, n, false, &[]);
    for (id, (features, success)) in [68, 69, 70].into_iter().zip(arms) {
        let r = &mut rows[id];
        match features {
            Some((score, jaccard)) => {
                (r.applicable, r.success) = (true, success);
                (r.retrieval_score, r.retrieval_jaccard) = (Some(score), Some(jaccard));
            }
            None => r.why_not = Some("backend `embedded` does not follow instructions".into()),
        }
    }
    rows
}

#[test]
fn procc_linucb_learns_on_the_training_split_and_picks_on_the_test_split() {
    // The hypothetical line (69) pays on every hole; the lexical perspective (68) never does.
    let hole_of = |repo: &str, n: usize| {
        let f = (n % 7) as f64 / 10.0;
        procc_hole(
            repo,
            n,
            [
                (Some((0.3 + f, 0.2)), false),
                (Some((0.2, 0.3 + f)), true),
                (None, false),
            ],
        )
    };
    let rows: Vec<LabelRow> = (1..=40)
        .map(|n| hole_of("a", n))
        .chain((1..=10).map(|n| hole_of("t", n)))
        .flatten()
        .collect();
    let report = report::build(&rows, &train(), 9);
    assert!(close(
        method(&report, "ProCC (LinUCB)").success.hole_wise,
        100.0
    ));
    assert!(close(
        method(&report, "ProCC lexical").success.hole_wise,
        0.0
    ));
    assert!(close(
        method(&report, "ProCC hypothetical line").success.hole_wise,
        100.0
    ));
    for name in ["RepoCoder", "RepoCoder iter 2", "ProCC summary"] {
        assert!(report.methods.iter().any(|m| m.name == name), "{name}");
    }
    assert!(
        report.notes.iter().any(
            |n| n.contains("ProCC summary is not applicable on 50 holes")
                && n.contains("does not follow instructions")
        ),
        "{:?}",
        report.notes
    );
    assert!(report.notes.iter().any(|n| n.contains("40 training holes")));
    let trained = report::train_procc(&rows, &train());
    assert_eq!(trained.pulls().iter().sum::<u64>(), 40);
}

#[test]
fn a_report_read_hole_by_hole_from_label_files_is_the_report_of_their_rows() {
    // Three repositories (one training), holes written out of hole id order, outcomes that
    // vary per hole and candidate (ProCC's perspectives with retrieval scores, so its bandit
    // learns): the two passes over the files give the report of the rows held in memory,
    // byte for byte, and the same trained bandit.
    use keyhole::{testing::eval::labels::LabelIndex, testing::eval::labels::read_all};
    let mut rows = Vec::new();
    for (r, repo) in ["a", "b", "c"].into_iter().enumerate() {
        for n in (1..=25).rev() {
            let mut hole = hole(
                repo,
                n,
                (n + r) % 3 == 0,
                &[(n % 9, n % 2 == 0), (10, n % 4 == 1)],
            );
            for (k, id) in CandidateId::PROCC.into_iter().enumerate() {
                let row = &mut hole[id.index()];
                row.applicable = (n + k) % 3 != 0;
                row.success = row.applicable && (n * (k + 2) + r) % 5 == 0;
                row.retrieval_score = Some(((n * 7 + k * 3 + r) % 11) as f64 / 11.0);
                row.retrieval_jaccard = Some(((n * 5 + k) % 13) as f64 / 13.0);
                row.edit_similarity = ((n + k) % 10) as f64 / 10.0;
            }
            hole[CandidateId::DEFAULT.index()].default_truncated = n % 7 == 0;
            rows.extend(hole);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for repo in ["c", "a", "b"] {
        let path = dir.path().join(format!("{repo}.jsonl"));
        let text: String = rows
            .iter()
            .filter(|r| r.repository == repo)
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        paths.push(path);
    }
    paths.sort();
    let index = LabelIndex::read(&paths).unwrap();
    assert_eq!(index.len(), 75);
    let streamed = report::build_from(&index, &train(), 7).unwrap();
    // (As read back: serde_json's numbers may differ from the written ones in the last bit.)
    let read = read_all(&paths).unwrap();
    let held = report::build(&read, &train(), 7);
    assert_eq!(
        serde_json::to_string_pretty(&streamed).unwrap(),
        serde_json::to_string_pretty(&held).unwrap()
    );
    assert!(
        streamed
            .notes
            .iter()
            .any(|n| n.contains("25 training holes"))
    );
    let learnt = report::Choices::learn(&index, &train()).unwrap().bandit;
    assert_eq!(learnt, report::train_procc(&read, &train()));
    assert!(learnt.pulls().iter().sum::<u64>() > 0);
}
