//! The `--fidelity code` profile on the bundled sample: each rule where the authors' published
//! code differs from their papers' text, with expectations written from the rule.

use std::path::Path;

use crate::common::{self, SAMPLE, SHOP, hole, keyhole, ok};
use keyhole::Fidelity;
use keyhole::TokenizerKind;
use keyhole::testing::context::perspectives::Perspectives;
use keyhole::testing::context::profile::code::BLOCK_BUDGET;
use keyhole::testing::context::proposals;
use keyhole::testing::context::retrieval::Retrieval;
use keyhole::testing::context::windows::WindowIndex;
use keyhole::testing::hole::sample_holes;
use keyhole::{
    CandidateId, testing::candidate, testing::candidate::ContextType,
    testing::candidate::PromptSource,
};

const DEMO: &str = "service/OrderService.java:94:32";

/// The sampled hole on 0-based `line` of the shop file `path`.
fn sampled(fidelity: Fidelity, path: &str, line: usize) -> keyhole::Hole {
    sample_holes(&SAMPLE, None, 9, fidelity.hole_column())
        .into_iter()
        .find(|h| SAMPLE.files[h.file].path == format!("{SHOP}{path}") && h.line == line)
        .expect("a hole on that line")
}

#[test]
fn code_puts_the_hole_half_the_trimmed_length_into_the_indented_line() {
    // Line 94: 8 spaces, then 52 characters.
    let line = "        return orderRepository.findByCustomerId(customerId);";
    assert_eq!(line.trim().len(), 52);
    let paper = sampled(Fidelity::Paper, "service/OrderService.java", 93);
    assert_eq!(paper.column, 8 + 26, "the middle of the trimmed line");
    assert_eq!(paper.target.as_deref(), Some("dByCustomerId(customerId);"));
    let code = sampled(Fidelity::Code, "service/OrderService.java", 93);
    assert_eq!(
        code.column, 26,
        "int(len(stripped) / 2) into the unstripped line"
    );
    assert_eq!(
        code.target.as_deref(),
        Some("tory.findByCustomerId(customerId);")
    );
    // The same lines either way: only columns move.
    let lines = |f| -> Vec<(usize, usize)> {
        sample_holes(&SAMPLE, None, 9, Fidelity::hole_column(f))
            .iter()
            .map(|h| (h.file, h.line))
            .collect()
    };
    assert_eq!(lines(Fidelity::Paper), lines(Fidelity::Code));
}

#[test]
fn code_lists_method_names_alone() {
    let h = hole(DEMO);
    let spec = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == PromptSource::Current && s.context_type == ContextType::MethodNames)
        .unwrap();
    let tok = TokenizerKind::Code.tokenizer();
    let built =
        |f| proposals::build_for_budget(&SAMPLE, &h, tok, 4072, f)[usize::from(spec.id)].clone();
    // The methods declared after the hole's line, in order.
    assert_eq!(
        built(Fidelity::Code).context.text,
        "statusReport transition loadOrder loadCustomer"
    );
    let paper = built(Fidelity::Paper).context.text;
    assert!(
        paper.starts_with("public Map<OrderStatus, Long> statusReport()"),
        "{paper}"
    );
}

#[test]
fn code_lays_repocoder_blocks_out_as_its_python_prompt_in_2000_codex_tokens() {
    let retrieval = Retrieval::new(&SAMPLE);
    let windows = WindowIndex::new(&SAMPLE);
    let h = hole(DEMO);
    let tok = TokenizerKind::Code.tokenizer();
    let candidate = |fidelity, budget| {
        let p = Perspectives {
            index: &SAMPLE,
            retrieval: &retrieval,
            windows: &windows,
            tokenizer: tok,
            budget,
            seed: 9,
            fidelity,
        };
        let all = p.immediate(&h);
        all.into_iter()
            .find(|c| c.id == CandidateId::REPOCODER)
            .unwrap()
            .context
            .text
    };
    let header = "# Here are some relevant code fragments from other files of the repo:\n# ";
    let code = candidate(Fidelity::Code, 1000);
    assert!(code.starts_with(header), "{code}");
    assert!(!code.contains("\n// "), "every line is commented with #");
    // Blocks are taken in a budget of their own, whatever keyhole's budget: 2,000 Codex
    // tokens with the header counted as 20, each block while the total stays below.
    let p50k = TokenizerKind::P50kBase.tokenizer();
    let header_end = code.find("# the below").unwrap();
    let blocks = p50k.count(&code[header_end..]);
    assert!(blocks + 20 < BLOCK_BUDGET, "{blocks}");
    assert!(
        tok.count(&code) > 500,
        "more than keyhole's allocation of 500"
    );
    let paper = candidate(Fidelity::Paper, 1000);
    assert!(paper.starts_with("// Here are some"), "{paper}");
    assert!(tok.count(&paper) <= 500);
}

fn holes_json(fidelity: &str, scratch: &Path) -> serde_json::Value {
    let out = ok(keyhole(
        &["holes", &common::sample(), "--json", "--fidelity", fidelity],
        scratch,
    ));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_holes_command_takes_the_profile_and_refuses_an_unknown_one() {
    let scratch = tempfile::tempdir().unwrap();
    let column_of_line_94 = |v: &serde_json::Value| {
        v["holes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["file"].as_str().unwrap().ends_with("OrderService.java") && h["line"] == 94)
            .map(|h| h["column"].as_u64().unwrap())
    };
    assert_eq!(
        column_of_line_94(&holes_json("paper", scratch.path())),
        Some(35)
    );
    assert_eq!(
        column_of_line_94(&holes_json("code", scratch.path())),
        Some(27)
    );
    let out = keyhole(
        &["holes", &common::sample(), "--fidelity", "published"],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown fidelity 'published'"), "{err}");
}

/// Proposal `source` `context_type` for `hole` under `fidelity`, 4,072 code tokens.
fn built(
    hole: &keyhole::Hole,
    source: PromptSource,
    context_type: ContextType,
    fidelity: Fidelity,
) -> proposals::ProposalContext {
    let spec = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == source && s.context_type == context_type)
        .unwrap();
    let tok = TokenizerKind::Code.tokenizer();
    proposals::build_for_budget(&SAMPLE, hole, tok, 4072, fidelity)[usize::from(spec.id)].clone()
}

#[test]
fn code_identifiers_are_followed_by_the_type_identifiers() {
    let h = hole(DEMO);
    let paper = built(
        &h,
        PromptSource::Current,
        ContextType::Identifiers,
        Fidelity::Paper,
    );
    let code = built(
        &h,
        PromptSource::Current,
        ContextType::Identifiers,
        Fidelity::Code,
    );
    let (paper, code) = (paper.context.text, code.context.text);
    // After line 94 `Map<OrderStatus, Long>` is used only as a type.
    assert!(code.starts_with(&format!("{paper} ")), "{code}");
    assert!(!paper.split(' ').any(|w| w == "Map"), "{paper}");
    assert!(code[paper.len()..].split(' ').any(|w| w == "Map"), "{code}");
}

#[test]
fn code_imports_are_import_declarations_only() {
    // OrderService imports from model (a wildcard), pricing and repository, and uses
    // Notifier and OrderValidator of its own package without an import.
    let h = hole(DEMO);
    let paths = |f| -> Vec<String> {
        built(&h, PromptSource::Import, ContextType::MethodNames, f)
            .ranked_files
            .iter()
            .map(|&f| SAMPLE.files[f].path.trim_start_matches(SHOP).to_string())
            .collect()
    };
    let mut code = paths(Fidelity::Code);
    code.sort();
    assert_eq!(
        code,
        [
            "pricing/PriceCalculator.java",
            "pricing/PriceQuote.java",
            "repository/CustomerRepository.java",
            "repository/OrderRepository.java",
            "repository/ProductRepository.java"
        ]
        .map(String::from),
        "single-type declarations resolved by path, each used again in the file"
    );
    let paper = paths(Fidelity::Paper);
    assert!(paper.iter().any(|p| p.starts_with("service/")), "{paper:?}");
    assert!(paper.iter().any(|p| p.starts_with("model/")), "{paper:?}");
}

#[test]
fn code_lists_siblings_as_the_directory_lists_them() {
    // Files that import nothing: RLPG's ranking falls back to `os.listdir` order.
    let repo = tempfile::tempdir().unwrap();
    for name in ["Delta", "Alpha", "Charlie", "Bravo", "Echo"] {
        let text = format!(
            "class {name} {{\n    int {}Count() {{ return 1; }}\n}}\n",
            name.to_lowercase()
        );
        std::fs::write(repo.path().join(format!("{name}.java")), text).unwrap();
    }
    let index = keyhole::RepoIndex::open(repo.path(), None).unwrap();
    let h = keyhole::Hole::parse(&index, "Alpha.java:2:5").unwrap();
    let tok = TokenizerKind::Code.tokenizer();
    let sibling = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == PromptSource::Sibling && s.context_type == ContextType::MethodNames)
        .unwrap();
    let ranked = |f| -> Vec<String> {
        proposals::build_for_budget(&index, &h, tok, 4072, f)[usize::from(sibling.id)]
            .ranked_files
            .iter()
            .map(|&f| index.files[f].path.clone())
            .collect()
    };
    let listed: Vec<String> = std::fs::read_dir(repo.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "Alpha.java")
        .collect();
    assert_eq!(ranked(Fidelity::Code), listed);
    assert_eq!(
        ranked(Fidelity::Paper),
        ["Bravo.java", "Charlie.java", "Delta.java", "Echo.java"]
    );
}

/// A temporary repository of `files` (name, text) and the hole at `at` in it.
fn temp_repo(
    files: &[(&str, &str)],
    at: &str,
) -> (tempfile::TempDir, keyhole::RepoIndex, keyhole::Hole) {
    let repo = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = repo.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let index = keyhole::RepoIndex::open(repo.path(), None).unwrap();
    let hole = keyhole::Hole::parse(&index, at).unwrap();
    (repo, index, hole)
}

/// The context of proposal `source` `context_type` in a temporary repository.
fn temp_context(
    index: &keyhole::RepoIndex,
    hole: &keyhole::Hole,
    source: PromptSource,
    context_type: ContextType,
    fidelity: Fidelity,
) -> String {
    let spec = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == source && s.context_type == context_type)
        .unwrap();
    let tok = TokenizerKind::R50kBase.tokenizer();
    proposals::build_for_budget(index, hole, tok, 4072, fidelity)[usize::from(spec.id)]
        .context
        .text
        .clone()
}

#[test]
fn code_slices_items_by_byte_columns_as_characters() {
    // "§" is two bytes: RLPG's get_string slices the line one character further.
    let (_repo, index, h) = temp_repo(
        &[
            ("Main.java", "class Main {\n    int a = 1;\n}\n"),
            ("Other.java", "class Other {\n    String s = \"§x\";\n}\n"),
        ],
        "Main.java:2:5",
    );
    let sl = |f| {
        temp_context(
            &index,
            &h,
            PromptSource::Sibling,
            ContextType::StringLiterals,
            f,
        )
    };
    assert!(
        sl(Fidelity::Code).contains("[Other] \"§x\";"),
        "{}",
        sl(Fidelity::Code)
    );
    assert!(
        sl(Fidelity::Paper).contains("[Other] \"§x\"\n"),
        "{}",
        sl(Fidelity::Paper)
    );
}

#[test]
fn code_gives_each_method_body_the_share_the_one_before_it_got() {
    let long: String = (0..200).map(|i| format!("        x += {i};\n")).collect();
    let other = format!(
        "class Other {{\n    int a() {{ return 1; }}\n    int b() {{\n        int x = 0;\n{long}        return x;\n    }}\n}}\n"
    );
    let (_repo, index, h) = temp_repo(
        &[
            ("Main.java", "class Main {\n    int a = 1;\n}\n"),
            ("Other.java", &other),
        ],
        "Main.java:2:5",
    );
    let mnb = |f| {
        temp_context(
            &index,
            &h,
            PromptSource::Sibling,
            ContextType::MethodNamesAndBodies,
            f,
        )
    };
    let code = mnb(Fidelity::Code);
    // a's text, "    int a() { return 1; }", is few tokens; b keeps as many from its end.
    let tok = TokenizerKind::R50kBase.tokenizer();
    let a_tokens = tok.count("    int a() { return 1; }");
    let b = code
        .split("[b] ")
        .nth(1)
        .unwrap()
        .trim_end_matches(" \n[Main]");
    assert_eq!(tok.count(b), a_tokens, "{code}");
    assert!(b.ends_with("return x;\n    }"), "{b}");
    // The paper profile keeps the start of each declaration within an equal share.
    let paper = mnb(Fidelity::Paper);
    assert!(
        paper.contains("[b] int b() {\n        int x = 0;"),
        "{paper}"
    );
}

#[test]
fn code_takes_the_parent_from_the_last_file_declaring_its_name() {
    // Two files declare a class Base; RLPG's code keeps the last it meets in `os.walk` order.
    let (repo, index, h) = temp_repo(
        &[
            (
                "First.java",
                "class Base {\n    int first() { return 1; }\n}\n",
            ),
            (
                "Second.java",
                "class Base {\n    int second() { return 2; }\n}\n",
            ),
            (
                "Child.java",
                "class Child extends Base {\n    int c = 1;\n}\n",
            ),
        ],
        "Child.java:2:5",
    );
    let last = std::fs::read_dir(repo.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "Child.java")
        .last()
        .unwrap();
    let method = if last == "First.java" {
        "first"
    } else {
        "second"
    };
    let mn = temp_context(
        &index,
        &h,
        PromptSource::ParentClass,
        ContextType::MethodNames,
        Fidelity::Code,
    );
    assert_eq!(mn, format!("[Base] {method}\n[Child]"));
}

#[test]
fn eval_records_the_profile_and_the_tokenizer_and_resumes_only_with_them() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let run = |extra: &[&str]| {
        let mut args = vec!["eval", "--holes", "2", "--out", out.to_str().unwrap()];
        let sample = common::sample();
        args.insert(1, &sample);
        args.extend(extra);
        keyhole(&args, scratch.path())
    };
    ok(run(&["--fidelity", "code", "--tokenizer", "r50k_base"]));
    let settings = std::fs::read_to_string(out.join("settings.json")).unwrap();
    assert!(settings.contains("\"fidelity\": \"code\""), "{settings}");
    assert!(
        settings.contains("\"tokenizer\": \"r50k_base\""),
        "{settings}"
    );
    let again = run(&["--tokenizer", "r50k_base"]);
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("--fidelity code, not paper"), "{err}");
}

/// RLPG's code numbers its rules as `utils.py`'s `combined_to_index` does, which takes the
/// post-line ratios in `rule_config.py`'s order (0.5, 0.25, 0.75); Table 7 lists 0.25 first.
#[test]
fn code_numbers_the_post_lines_as_rlpgs_code_does() {
    let share = |fidelity: Fidelity, n: usize| {
        let id = fidelity.numbering().id(n).unwrap();
        assert_eq!(fidelity.numbering().number(id), n);
        id.proposal().unwrap().share
    };
    assert_eq!(
        [5, 6, 7].map(|n| share(Fidelity::Code, n)),
        [0.5, 0.25, 0.75]
    );
    assert_eq!(
        [5, 6, 7].map(|n| share(Fidelity::Paper, n)),
        [0.25, 0.5, 0.75]
    );
    for n in (0..CandidateId::COUNT).filter(|n| ![5, 6].contains(n)) {
        assert_eq!(
            Fidelity::Code.numbering().id(n),
            Fidelity::Paper.numbering().id(n)
        );
    }
}

#[test]
fn prompt_id_5_is_the_post_lines_at_half_the_budget_in_the_code_profile() {
    let scratch = tempfile::tempdir().unwrap();
    let demo = format!("{SHOP}{DEMO}");
    let prompt = |fidelity: &str| -> serde_json::Value {
        let out = ok(keyhole(
            &[
                "prompt",
                &common::sample(),
                &demo,
                "--id",
                "5",
                "--fidelity",
                fidelity,
                "--json",
            ],
            scratch.path(),
        ));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    for (fidelity, share) in [("code", 0.5), ("paper", 0.25)] {
        let v = prompt(fidelity);
        assert_eq!(v["proposal_id"], 5, "{fidelity}");
        let segment = v["segments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["kind"]["kind"] == "proposal")
            .unwrap_or_else(|| panic!("{fidelity}: no proposal segment in {v}"));
        assert_eq!(segment["kind"]["id"], 5, "{fidelity}");
        let budget = v["budget"].as_u64().unwrap() as usize;
        assert_eq!(
            segment["allocated"],
            keyhole::testing::compose::proposal_allocation(budget, share),
            "{fidelity}"
        );
    }
}

#[test]
fn code_label_files_and_reports_number_the_post_lines_as_rlpgs_code() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let sample = common::sample();
    let out_arg = out.to_string_lossy().into_owned();
    ok(keyhole(
        &[
            "eval",
            &sample,
            "--holes",
            "2",
            "--out",
            &out_arg,
            "--fidelity",
            "code",
            "--compose",
            "",
            "--candidates",
            "5",
        ],
        scratch.path(),
    ));
    let text = std::fs::read_to_string(out.join("labels/sample-repo.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2 * CandidateId::COUNT);
    let not_selected = keyhole::testing::eval::runner::NOT_SELECTED;
    for hole in rows.chunks(CandidateId::COUNT) {
        for (n, row) in hole.iter().enumerate() {
            assert_eq!(
                row["proposal_id"], n,
                "a hole's rows in the profile's order"
            );
            assert_eq!(row["fidelity"], "code", "{row}");
        }
        // `--candidates 5` is RLPG's 5: the post lines at half the budget, completed; Table
        // 7's 5 (RLPG's 6) is left out.
        assert_ne!(hole[5]["why_not"], not_selected, "{}", hole[5]);
        assert_eq!(hole[6]["why_not"], not_selected, "{}", hole[6]);
        assert!(
            hole[5]["proposal_tokens"].as_u64().unwrap() > 0,
            "{}",
            hole[5]
        );
    }
    let settings = std::fs::read_to_string(out.join("settings.json")).unwrap();
    assert!(settings.contains("\"candidates\": \"5\""), "{settings}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| 5 | `current PL 50%` |"), "{report}");
    assert!(report.contains("| 6 | `current PL 25%` |"), "{report}");
}

#[test]
fn code_reads_the_code_before_a_crlf_hole_with_lf_default_reading() {
    let scratch = tempfile::tempdir().unwrap();
    let text = "class Main {\r\n    int a = 1;\r\n    int b = a + 1;\r\n}\r\n";
    let (repo, _, _) = temp_repo(&[("Main.java", text)], "Main.java:3:13");
    let repo = repo.path().to_string_lossy().into_owned();
    let prompt = |fidelity: &str| -> serde_json::Value {
        let args = [
            "prompt",
            &repo,
            "Main.java:3:13",
            "--json",
            "--fidelity",
            fidelity,
            "--tokenizer",
            "r50k_base",
        ];
        serde_json::from_slice(&ok(keyhole(&args, scratch.path())).stdout).unwrap()
    };
    let before = "class Main {\n    int a = 1;\n    int b = ";
    let code = prompt("code");
    // Sent alone, after a space, as RLPG's `codex` mode sends it.
    assert_eq!(code["text"], format!(" {before}"));
    let r50k = TokenizerKind::R50kBase.tokenizer();
    let default = &code["segments"][1];
    assert_eq!(default["tokens"], r50k.count(before), "counted as read");
    // Each kept piece still points at the file's own lines.
    let pieces = &default["pieces"];
    assert_eq!(pieces[0]["file"], "Main.java", "{code}");
    assert_eq!(prompt("paper")["text"], before.replace('\n', "\r\n"));
}

#[test]
fn code_shows_a_later_iterations_window_without_its_empty_last_line() {
    // B's first window is its lines 0-9, the last of them empty.
    let fields = "    int alpha = 1;\n    int beta = 2;\n    int gamma = alpha + beta;\n    \
                  int delta = gamma * 2;\n    int epsilon = delta - 1;\n    int zeta = epsilon;\n    \
                  int eta = zeta + 1;\n    int theta = eta + 2;\n";
    let b = format!("class B {{\n{fields}\n}}\n");
    let a = format!("class A {{\n{fields}    int iota = \n");
    let (_repo, index, h) = temp_repo(&[("A.java", &a), ("B.java", &b)], "A.java:10:16");
    let retrieval = Retrieval::new(&index);
    let windows = WindowIndex::new(&index);
    let iteration = |fidelity| {
        let p = Perspectives {
            index: &index,
            retrieval: &retrieval,
            windows: &windows,
            tokenizer: TokenizerKind::P50kBase.tokenizer(),
            budget: 4072,
            seed: 9,
            fidelity,
        };
        p.repocoder_iteration(&h, "theta + 1;").context.text
    };
    let code = iteration(Fidelity::Code);
    let theta = "    int theta = eta + 2;\n";
    assert!(code.contains(&format!("# {theta}# ---")), "{code}");
    assert!(!code.contains(&format!("# {theta}# \n# ---")), "{code}");
    // The paper profile shows the window's ten lines.
    let paper = iteration(Fidelity::Paper);
    assert!(paper.contains(&format!("// {theta}// \n// ---")), "{paper}");
}

#[test]
fn code_gives_a_hole_the_siblings_rlpgs_cache_gave_it_after_the_holes_above() {
    // F uses X1 near its top and X2 near its end; sibling S1 imports X1, S2 imports X2.
    let mut f =
        "package com.acme.p;\n\nimport com.acme.q.X1;\nimport com.acme.q.X2;\n\nclass F {\n    \
                 X1 one = new X1();\n"
            .to_string();
    for i in 0..12 {
        f.push_str(&format!("    int a{i} = {i};\n"));
    }
    f.push_str("    X2 two = new X2();\n    int b = 2;\n}\n");
    let sibling = |n: u8| {
        format!(
            "package com.acme.p;\nimport com.acme.q.X{n};\nclass S{n} {{ X{n} x; void from{n}() {{}} }}\n"
        )
    };
    let (s1, s2) = (sibling(1), sibling(2));
    let files = [
        ("com/acme/p/F.java", f.as_str()),
        ("com/acme/p/S1.java", &s1),
        ("com/acme/p/S2.java", &s2),
        (
            "com/acme/q/X1.java",
            "package com.acme.q;\npublic class X1 {}\n",
        ),
        (
            "com/acme/q/X2.java",
            "package com.acme.q;\npublic class X2 {}\n",
        ),
    ];
    let names = |line: usize| {
        let (_repo, index, h) = temp_repo(&files, &format!("com/acme/p/F.java:{line}:5"));
        let mn = |fidelity| {
            temp_context(
                &index,
                &h,
                PromptSource::Sibling,
                ContextType::MethodNames,
                fidelity,
            )
        };
        (mn(Fidelity::Code), mn(Fidelity::Paper))
    };
    // Near X1, the siblings importing X1. The first hole of the file (its package line) found
    // them the same way, and RLPG's loop stored that answer under the next import, X2.
    let (code, _) = names(8);
    assert!(code.contains("from1") && !code.contains("from2"), "{code}");
    // So near X2, where X2 comes first, RLPG's run answers from its cache: S1 again.
    let (code, paper) = names(21);
    assert!(code.contains("from1") && !code.contains("from2"), "{code}");
    // The paper profile (and RLPG's code for a file's first hole) ranks afresh.
    assert!(paper.contains("from2"), "{paper}");
}

#[test]
fn code_cuts_a_long_parent_class_context_from_its_front() {
    // More field names than the allocation of 2,036 GPT-2 tokens holds.
    let fields: String = (0..1500).map(|i| format!("    int field{i};\n")).collect();
    let base = format!("class Base {{\n{fields}}}\n");
    let files = [
        ("Base.java", base.as_str()),
        (
            "Child.java",
            "class Child extends Base {\n    int c = 1;\n}\n",
        ),
    ];
    let (_repo, index, h) = temp_repo(&files, "Child.java:2:5");
    let fd = |fidelity| {
        temp_context(
            &index,
            &h,
            PromptSource::ParentClass,
            ContextType::Identifiers,
            fidelity,
        )
    };
    let code = fd(Fidelity::Code);
    assert!(code.ends_with("field1499\n[Child]"), "{code}");
    assert!(!code.contains(" field0 "), "the front is cut: {code}");
    let paper = fd(Fidelity::Paper);
    assert!(paper.starts_with("[Base] Base field0 field1"), "{paper}");
}

/// The default context's segment of `prompt --json` for `at` in `repo` (the default context
/// alone; the code profile sends it after a space), per profile.
fn default_prompt(repo: &Path, at: &str, fidelity: &str, scratch: &Path) -> serde_json::Value {
    let repo = repo.to_string_lossy().into_owned();
    let args = [
        "prompt",
        &repo,
        at,
        "--json",
        "--fidelity",
        fidelity,
        "--tokenizer",
        "r50k_base",
    ];
    let prompt: serde_json::Value =
        serde_json::from_slice(&ok(keyhole(&args, scratch)).stdout).unwrap();
    let segments = prompt["segments"].as_array().unwrap();
    let default = segments.iter().find(|s| s["kind"]["kind"] == "default");
    default.expect("a default segment").clone()
}

#[test]
fn code_starts_the_default_context_at_the_first_line_not_starting_with_a_slash_or_star() {
    let scratch = tempfile::tempdir().unwrap();
    let body = "class Main {\n    int a = 1;\n    int b = a;\n}\n";
    let header = format!("// Header.\n/* more */\n*/\npackage p;\n{body}");
    // Lines are not trimmed: the licence's ` * ` line stops the skip after `/*`.
    let licence = format!("/*\n * Licence.\n */\n{body}");
    let (repo, _, _) = temp_repo(
        &[("Main.java", &header), ("B.java", &licence)],
        "Main.java:7:13",
    );
    let text = |at: &str, fidelity: &str| {
        default_prompt(repo.path(), at, fidelity, scratch.path())["text"].clone()
    };
    let before = "class Main {\n    int a = 1;\n    int b = ";
    assert_eq!(
        text("Main.java:7:13", "code"),
        format!("package p;\n{before}")
    );
    assert_eq!(
        text("Main.java:7:13", "paper"),
        format!("// Header.\n/* more */\n*/\npackage p;\n{before}")
    );
    assert_eq!(
        text("B.java:6:13", "code"),
        format!(" * Licence.\n */\n{before}")
    );
}

#[test]
fn code_cleans_the_default_context_up_as_gpt2s_decode_did() {
    let scratch = tempfile::tempdir().unwrap();
    let text =
        "class Main {\n    int a = 1 > 0 ? 2 : 3;\n    String s = \"x , y\";\n    int b = a;\n}\n";
    let (repo, _, _) = temp_repo(&[("Main.java", text)], "Main.java:4:13");
    let before =
        "class Main {\n    int a = 1 > 0 ? 2 : 3;\n    String s = \"x , y\";\n    int b = ";
    let code = default_prompt(repo.path(), "Main.java:4:13", "code", scratch.path());
    assert_eq!(
        code["text"],
        "class Main {\n    int a = 1 > 0? 2 : 3;\n    String s = \"x, y\";\n    int b = "
    );
    let r50k = TokenizerKind::R50kBase.tokenizer();
    assert_eq!(
        code["tokens"],
        r50k.count(before),
        "counted before the clean-up"
    );
    let paper = default_prompt(repo.path(), "Main.java:4:13", "paper", scratch.path());
    assert_eq!(paper["text"], before);
}

// ----- The whole prompt, as RLPG's main loop sends it -----------------------------------------

/// `class NAME` in package `p` with `fields` int fields `PREFIX0..`, one a line.
fn class_with_fields(name: &str, prefix: &str, fields: usize) -> String {
    let fields: String = (0..fields)
        .map(|i| format!("    int {prefix}{i} = {i};\n"))
        .collect();
    format!("package p;\nclass {name} {{\n{fields}    int hole = 1;\n}}\n")
}

/// Proposal `source` `context_type` for `hole` and its prompt, 4,072 GPT-2 tokens, `fidelity`.
fn sent(
    index: &keyhole::RepoIndex,
    hole: &keyhole::Hole,
    source: PromptSource,
    context_type: ContextType,
    fidelity: Fidelity,
) -> (proposals::ProposalContext, keyhole::Prompt) {
    let spec = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == source && s.context_type == context_type)
        .unwrap();
    let tok = TokenizerKind::R50kBase.tokenizer();
    let proposal =
        proposals::build_for_budget(index, hole, tok, 4072, fidelity)[usize::from(spec.id)].clone();
    let composer = keyhole::Composer::new(index, hole, tok, 4072, fidelity.default_reading());
    let prompt = composer.compose(&proposal);
    (proposal, prompt)
}

/// The line of `Main.java` holding `int hole = 1;`, as `FILE:LINE:COL` at its `1`.
fn hole_line(main: &str) -> String {
    let line = main.lines().position(|l| l.contains("int hole")).unwrap() + 1;
    format!("p/Main.java:{line}:16")
}

#[test]
fn code_sends_the_default_context_alone_after_a_space_cut_again_to_the_budget() {
    // RLPG's `codex` mode: `' ' + get_default_prompt(budget)`, then the last `budget` tokens
    // of that. Where the code before the hole fits, the space stays in front; where it was
    // cut to the budget, the space makes one token too many and the cut takes the first.
    let main = class_with_fields("Main", "m", 40);
    let at = hole_line(&main);
    let (_repo, index, h) = temp_repo(&[("p/Main.java", &main)], &at);
    let r50k = TokenizerKind::R50kBase.tokenizer();
    let composer = |fidelity: Fidelity, budget: usize| {
        keyhole::Composer::new(&index, &h, r50k, budget, fidelity.default_reading())
    };
    let whole = composer(Fidelity::Code, 4072).compose(&keyhole::DefaultContext);
    assert!(
        whole.text().starts_with(" package p;"),
        "{:?}",
        whole.text()
    );
    assert_eq!(whole.segments[0].kind, keyhole::SegmentKind::Separator);
    let paper = composer(Fidelity::Paper, 4072)
        .compose(&keyhole::DefaultContext)
        .text();
    assert_eq!(whole.text(), format!(" {paper}"));
    for budget in [63, 64, 65, 66] {
        let paper = composer(Fidelity::Paper, budget)
            .compose(&keyhole::DefaultContext)
            .text();
        let code = composer(Fidelity::Code, budget)
            .compose(&keyhole::DefaultContext)
            .text();
        assert_eq!(
            r50k.count(&paper),
            budget,
            "the default context fills the budget"
        );
        assert!(r50k.count(&code) <= budget, "{budget}: {code:?}");
        assert!(
            format!(" {paper}").ends_with(&code),
            "{budget}: {code:?} {paper:?}"
        );
        assert_ne!(code, format!(" {paper}"), "{budget}: cut again");
    }
}

#[test]
fn code_sends_a_rule_context_longer_than_its_allocation_whole() {
    // The sibling's identifiers fill the allocation of 2,036 tokens, and its label and the
    // class line run past it; the code before the hole is short, so nothing is cut.
    let main = class_with_fields("Main", "m", 3);
    let sibling = class_with_fields("B", "b", 1500);
    let at = hole_line(&main);
    let (repo, index, h) = temp_repo(&[("p/Main.java", &main), ("p/B.java", &sibling)], &at);
    let (proposal, prompt) = sent(
        &index,
        &h,
        PromptSource::Sibling,
        ContextType::Identifiers,
        Fidelity::Code,
    );
    let r50k = TokenizerKind::R50kBase.tokenizer();
    let context = &proposal.context.text;
    assert!(context.starts_with("[B] ") && context.ends_with(" \n[Main]"));
    assert!(r50k.count(context) > 2036, "longer than its allocation");
    let segment = &prompt.segments[0];
    assert_eq!(&segment.text.text, context, "kept whole");
    assert_eq!((segment.allocated, segment.cut), (2036, None));
    assert_eq!(
        prompt.text(),
        format!("{context}\n{}", prompt.segments[2].text.text)
    );
    prompt.validate(&index, r50k).unwrap();
    // The paper profile's composer cuts it at the allocation.
    let (_, paper) = sent(
        &index,
        &h,
        PromptSource::Sibling,
        ContextType::Identifiers,
        Fidelity::Paper,
    );
    assert!(paper.segments[0].tokens <= 2036);
    // `prompt` shows the same prompt, the segment past its allocation and not cut.
    let scratch = tempfile::tempdir().unwrap();
    let id = candidate::proposal_specs()
        .iter()
        .find(|s| s.source == PromptSource::Sibling && s.context_type == ContextType::Identifiers)
        .unwrap()
        .id;
    let number = Fidelity::Code.numbering().number(id).to_string();
    let root = repo.path().to_string_lossy().into_owned();
    let args = [
        "prompt",
        &root,
        &at,
        "--id",
        &number,
        "--fidelity",
        "code",
        "--tokenizer",
        "r50k_base",
        "--json",
    ];
    let v: serde_json::Value =
        serde_json::from_slice(&ok(keyhole(&args, scratch.path())).stdout).unwrap();
    assert_eq!(v["text"], prompt.text());
    let shown = &v["segments"][0];
    assert_eq!(shown["kind"]["kind"], "proposal");
    assert_eq!(shown["tokens"], r50k.count(context));
    assert_eq!(
        (&shown["allocated"], &shown["truncated"]),
        (&2036.into(), &false.into())
    );
}

#[test]
fn code_cuts_the_joined_prompt_to_its_last_tokens_from_the_rule_contexts_start() {
    // The sibling's context counts its whole allocation, so the default context gets the
    // other 2,036 tokens; with the labels the joined text runs past 4,072 and loses its start.
    let main = class_with_fields("Main", "m", 600);
    let sibling = class_with_fields("B", "b", 1500);
    let at = hole_line(&main);
    let (_repo, index, h) = temp_repo(&[("p/Main.java", &main), ("p/B.java", &sibling)], &at);
    let (proposal, prompt) = sent(
        &index,
        &h,
        PromptSource::Sibling,
        ContextType::Identifiers,
        Fidelity::Code,
    );
    let r50k = TokenizerKind::R50kBase.tokenizer();
    let [rule, separator, default] = &prompt.segments[..] else {
        panic!("three segments: {:?}", prompt.segments.len());
    };
    assert_eq!(separator.text.text, "\n");
    assert_eq!((default.allocated, default.tokens), (2036, 2036));
    // RLPG's cut: the last 4,072 tokens of the joined text (nothing here for the clean-up).
    let joined = format!("{}\n{}", proposal.context.text, default.text.text);
    let ends = r50k.token_ends(&joined);
    assert!(ends.len() > 4072, "{}", ends.len());
    assert_eq!(prompt.text(), joined[ends[ends.len() - 4073]..]);
    assert!(proposal.context.text.ends_with(&rule.text.text));
    assert!(!rule.text.text.starts_with("[B]"), "the label went first");
    assert_eq!(rule.cut, Some(keyhole::Keep::Start));
    assert_eq!(rule.tokens, r50k.count(&rule.text.text), "its kept size");
    prompt.validate(&index, r50k).unwrap();
}

#[test]
fn code_sizes_the_default_context_from_rlpgs_count_without_labels() {
    let main = class_with_fields("Main", "m", 600);
    let sibling = "package p;\nclass A {\n    int alpha;\n    int beta;\n}\n";
    let at = hole_line(&main);
    let (_repo, index, h) = temp_repo(&[("p/Main.java", &main), ("p/A.java", sibling)], &at);
    let r50k = TokenizerKind::R50kBase.tokenizer();
    let (proposal, code) = sent(
        &index,
        &h,
        PromptSource::Sibling,
        ContextType::Identifiers,
        Fidelity::Code,
    );
    assert_eq!(proposal.context.text, "[A] p A alpha beta \n[Main]");
    let counted = r50k.count("p A alpha beta");
    assert_eq!(code.segments[2].allocated, 4072 - counted);
    assert!(r50k.count(&proposal.context.text) > counted);
    code.validate(&index, r50k).unwrap();
    // keyhole's composer gives the default context what the segments it sent left.
    let (_, paper) = sent(
        &index,
        &h,
        PromptSource::Sibling,
        ContextType::Identifiers,
        Fidelity::Paper,
    );
    let spent = paper.segments[0].tokens + paper.segments[1].tokens;
    assert_eq!(paper.segments[2].allocated, 4072 - spent);
}

#[test]
fn code_joins_post_lines_and_the_default_context_with_a_space() {
    let main = class_with_fields("Main", "m", 3);
    let at = hole_line(&main);
    let (_repo, index, h) = temp_repo(&[("p/Main.java", &main)], &at);
    let (proposal, code) = sent(
        &index,
        &h,
        PromptSource::Current,
        ContextType::PostLines,
        Fidelity::Code,
    );
    assert_eq!(proposal.context.text, "}\n");
    assert!(
        code.text().starts_with("}\n package p;"),
        "{:?}",
        code.text()
    );
    let (_, paper) = sent(
        &index,
        &h,
        PromptSource::Current,
        ContextType::PostLines,
        Fidelity::Paper,
    );
    assert!(
        paper.text().starts_with("}\n\npackage p;"),
        "{:?}",
        paper.text()
    );
}
