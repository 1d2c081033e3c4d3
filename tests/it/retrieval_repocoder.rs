//! RepoCoder and ProCC on the sample repository: the window database never shows the hole,
//! prompts follow RepoCoder's layout within their budget, iteration 2 uses the completion, the
//! summary needs a backend that follows instructions, and the bandit learns, persists and
//! survives a corrupt file.

use std::collections::BTreeSet;

use crate::common;
use keyhole::CandidateId;

use common::{SAMPLE, hole};
use keyhole::Fidelity;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::retrieval::Retrieval;
use keyhole::testing::model::ngram::EmbeddedModel;
use keyhole::{Composer, testing::compose::DefaultReading};
use keyhole::{Hole, testing::hole::HoleColumn, testing::hole::sample_holes};
use keyhole::{
    RetrievedContext, testing::context::perspectives, testing::context::perspectives::Perspectives,
};
use keyhole::{Tokenizer, TokenizerKind};
use keyhole::{
    testing::context::windows, testing::context::windows::MAX_BLOCKS,
    testing::context::windows::Shown, testing::context::windows::Similarity,
    testing::context::windows::WindowIndex,
};
use keyhole::{testing::rank::bandit, testing::rank::bandit::LinUcb};

const DEMO: &str = "service/OrderService.java:94:32";

fn perspectives<'a>(
    retrieval: &'a Retrieval,
    windows: &'a WindowIndex,
    tokenizer: &'a dyn Tokenizer,
    budget: usize,
) -> Perspectives<'a> {
    Perspectives {
        index: &SAMPLE,
        retrieval,
        windows,
        tokenizer,
        budget,
        seed: 9,
        fidelity: Fidelity::Paper,
    }
}

fn request<'h>(h: &'h Hole, tokenizer: &'h dyn Tokenizer, allocation: usize) -> HoleRequest<'h> {
    HoleRequest {
        index: &SAMPLE,
        hole: h,
        tokenizer,
        allocation,
        seed: 9,
        fidelity: keyhole::Fidelity::Paper,
    }
}

/// No byte of `candidate` comes from the hole's file (RepoCoder's code retrieves nothing from
/// it), and the hole's line shows only as a copy in another file.
fn assert_hole_hidden(h: &Hole, candidate: &RetrievedContext) {
    let file = &SAMPLE.files[h.file];
    for origin in candidate.context.pieces.iter().filter_map(|p| p.origin) {
        assert!(
            origin.file != h.file,
            "candidate {} shows bytes {:?} of {} at the hole {}:{}",
            candidate.id,
            origin.span,
            file.path,
            h.line + 1,
            h.column + 1
        );
    }
    let line = file.line_text(h.line).trim();
    if line.len() > 12 && candidate.context.text.contains(line) {
        let elsewhere = SAMPLE
            .files
            .iter()
            .enumerate()
            .any(|(f, other)| f != h.file && other.text.contains(line));
        assert!(
            elsewhere,
            "candidate {} shows the hole's line {line:?}",
            candidate.id
        );
    }
}

#[test]
fn no_window_shows_the_hole_line_or_what_follows() {
    let retrieval = Retrieval::new(&SAMPLE);
    let windows = WindowIndex::new(&SAMPLE);
    let tok = TokenizerKind::Code.tokenizer();
    let p = perspectives(&retrieval, &windows, tok, 4072);
    let holes = sample_holes(&SAMPLE, Some(150), 3, HoleColumn::TrimmedMiddle);
    let mut checked = 0;
    for h in &holes {
        let target = h.target.clone().unwrap_or_default();
        let mut candidates = p.immediate(h);
        // The worst case for leaking: the "generation" is the answer itself.
        candidates.push(p.repocoder_iteration(h, &target));
        candidates.push(p.hypothetical_line(h, &target));
        // Typed-hole context may show declarations above the hole (tests/it/typed_holes.rs checks
        // it never shows the hole's line); retrieved windows may not.
        let windowed = |c: &&RetrievedContext| {
            (CandidateId::REPOCODER..CandidateId::TYPED_TYPES).contains(&c.id)
        };
        for c in candidates.iter().filter(windowed) {
            assert_hole_hidden(h, c);
            checked += usize::from(c.applicable());
        }
    }
    assert!(
        checked > 400,
        "only {checked} applicable candidates checked"
    );
}

#[test]
fn repocoder_retrieves_nothing_from_the_holes_own_file() {
    let windows = WindowIndex::new(&SAMPLE);
    let h = hole(DEMO);
    let query = perspectives::repocoder_query(&SAMPLE, &h);
    // The same query for a hole in another file finds the hole's file first (it is where the
    // query comes from)...
    let elsewhere = hole("model/Money.java:10:1");
    let hits = windows.search(&SAMPLE, &elsewhere, &query, Similarity::Jaccard);
    assert_eq!(windows.window(hits[0].window).file, h.file);
    // ...and RepoCoder's code never retrieves a window that occurs only in the hole's file.
    let hits = windows.search(&SAMPLE, &h, &query, Similarity::Jaccard);
    assert_eq!(hits.len(), windows::MAX_HITS, "RepoCoder keeps the 20 best");
    for hit in &hits {
        let places = windows.places(hit.window);
        assert!(places.iter().any(|p| p.file != h.file), "{places:?}");
    }
}

#[test]
fn identical_windows_are_one_window_with_every_path() {
    // util/TextUtil.java and legacy/TextUtil.java are the same file.
    let windows = WindowIndex::new(&SAMPLE);
    let h = hole("util/TextUtil.java:41:13");
    let legacy = &SAMPLE.files[hole("legacy/TextUtil.java:1:1").file];
    let query = perspectives::repocoder_query(&SAMPLE, &h);
    let hits = windows.search(&SAMPLE, &h, &query, Similarity::Jaccard);
    // Its own windows stay retrievable through the copy, as in RepoCoder's code: the query,
    // lines 21-40, is one of them (centred on line 31) and scores 1.
    let best = windows.places(hits[0].window);
    assert_eq!(hits[0].score, 1.0);
    let paths: Vec<&str> = best
        .iter()
        .map(|p| SAMPLE.files[p.file].path.as_str())
        .collect();
    assert_eq!(
        paths,
        [legacy.path.as_str(), SAMPLE.files[h.file].path.as_str()]
    );
    assert_eq!((best[0].first, best[0].end), (20, 40));
    // The block names both paths and shows the copy's lines, never the hole's file.
    let req = request(&h, TokenizerKind::Code.tokenizer(), 2036);
    let (text, used) = windows.blocks(&req, &hits, Shown::Window, Fidelity::Paper);
    assert_eq!(used[0], hits[0].window);
    let both = format!(
        "// the below code fragment can be found in:\n// {}\n// {}\n",
        paths[0], paths[1]
    );
    assert!(text.text.contains(&both), "{}", text.text);
    assert!(text.files().iter().all(|&f| f != h.file));
}

#[test]
fn the_query_is_the_twenty_whole_lines_before_the_holes_line() {
    let h = hole(DEMO);
    let file = &SAMPLE.files[h.file];
    let query = perspectives::repocoder_query(&SAMPLE, &h);
    let lines: Vec<&str> = query.split('\n').collect();
    assert_eq!(lines.len(), 20);
    assert_eq!(lines[0], "    public Order ship(Long orderId) {", "line 74");
    assert_eq!(
        lines[19], "    public List<Order> findOrdersForCustomer(Long customerId) {",
        "line 93; the start of the hole's line 94 is not in it"
    );
    assert_eq!(
        lines,
        (73..93).map(|l| file.line_text(l)).collect::<Vec<_>>()
    );
}

#[test]
fn jaccard_compares_sets_of_codex_token_ids() {
    let windows = WindowIndex::new(&SAMPLE);
    let h = hole(DEMO);
    let query = perspectives::repocoder_query(&SAMPLE, &h);
    let ids = |text: &str| -> BTreeSet<u32> {
        tiktoken_rs::p50k_base_singleton()
            .encode_ordinary(text)
            .into_iter()
            .collect()
    };
    let q = ids(&query);
    for hit in windows.search(&SAMPLE, &h, &query, Similarity::Jaccard) {
        let w = windows.window(hit.window);
        let file = &SAMPLE.files[w.file];
        let lines: Vec<&str> = (w.first..w.end)
            .map(|l| file.line_text(l as usize))
            .collect();
        let c = ids(&lines.join("\n"));
        let expected = q.intersection(&c).count() as f64 / q.union(&c).count() as f64;
        assert!((hit.score - expected).abs() < 1e-12, "{w:?}");
    }
}

#[test]
fn an_iteration_one_block_shows_its_window_ten_lines_further_down() {
    let retrieval = Retrieval::new(&SAMPLE);
    let windows = WindowIndex::new(&SAMPLE);
    let p = perspectives(&retrieval, &windows, TokenizerKind::Code.tokenizer(), 4072);
    let h = hole(DEMO);
    let hits = windows.search(
        &SAMPLE,
        &h,
        &perspectives::repocoder_query(&SAMPLE, &h),
        Similarity::Jaccard,
    );
    let best = windows.window(hits[0].window);
    let file = &SAMPLE.files[best.file];
    let end = (best.end as usize + 10).min(file.line_count());
    let first = end.saturating_sub(20);
    let shown: String = (first..end)
        .map(|l| format!("// {}\n", file.line_text(l)))
        .collect();
    let candidate = p
        .immediate(&h)
        .into_iter()
        .find(|c| c.id == CandidateId::REPOCODER)
        .unwrap();
    let rule = format!("// {}\n", "-".repeat(50));
    assert!(
        candidate
            .context
            .text
            .ends_with(&format!("{rule}{shown}{rule}")),
        "the best block (last) shows lines {first}..{end}:\n{}",
        candidate.context.text
    );
}

/// The paths of the blocks of a RepoCoder prompt, first to last.
fn block_paths(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "// the below code fragment can be found in:")
        .map(|w| w[1].trim_start_matches("// "))
        .collect()
}

#[test]
fn blocks_follow_repocoder_with_the_best_block_last() {
    let windows = WindowIndex::new(&SAMPLE);
    let h = hole(DEMO);
    let hits = windows.search(
        &SAMPLE,
        &h,
        &perspectives::repocoder_query(&SAMPLE, &h),
        Similarity::Jaccard,
    );
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let req = request(&h, TokenizerKind::Code.tokenizer(), 2036);
    let (text, used) = windows.blocks(&req, &hits, Shown::Window, Fidelity::Paper);
    assert!(
        text.text.starts_with(
            "// Here are some relevant code fragments from other files of the repo:\n// -----"
        ),
        "{}",
        text.text
    );
    assert_eq!(used[0], hits[0].window, "the best hit is taken first");
    let paths = block_paths(&text.text);
    assert_eq!(paths.len(), used.len());
    let best = &SAMPLE.files[windows.window(hits[0].window).file].path;
    assert_eq!(paths.last(), Some(&best.as_str()), "the best block is last");
    // Every code line of a block is commented out, and taken from its file.
    let first = windows.window(used[0]);
    let line = SAMPLE.files[first.file].line_text(first.first as usize);
    assert!(text.text.contains(&format!("// {line}\n")));
}

#[test]
fn blocks_fit_their_budget_in_the_tokenizer_counted() {
    let windows = WindowIndex::new(&SAMPLE);
    let retrieval = Retrieval::new(&SAMPLE);
    for kind in [TokenizerKind::Code, TokenizerKind::Cl100kBase] {
        let tok = kind.tokenizer();
        for budget in [200, 600, 1400, 4072] {
            let p = perspectives(&retrieval, &windows, tok, budget);
            for h in sample_holes(&SAMPLE, Some(12), 5, HoleColumn::TrimmedMiddle) {
                let windowed = |c: &&RetrievedContext| {
                    (CandidateId::REPOCODER..CandidateId::TYPED_TYPES).contains(&c.id)
                };
                for c in p.immediate(&h).iter().filter(windowed) {
                    let tokens = tok.count(&c.context.text);
                    assert!(
                        tokens <= budget / 2,
                        "{} tokens of {:?} for an allocation of {}",
                        tokens,
                        kind,
                        budget / 2
                    );
                    assert!(block_paths(&c.context.text).len() <= MAX_BLOCKS);
                    let composer =
                        Composer::new(&SAMPLE, &h, tok, budget, DefaultReading::AsWritten);
                    if let Some(prompt) = c.compose(&composer) {
                        prompt.validate(&SAMPLE, tok).unwrap();
                    }
                }
            }
        }
    }
}

#[test]
fn iteration_two_retrieves_with_what_the_first_completion_adds() {
    let retrieval = Retrieval::new(&SAMPLE);
    let windows = WindowIndex::new(&SAMPLE);
    let p = perspectives(&retrieval, &windows, TokenizerKind::Code.tokenizer(), 4072);
    let h = hole(DEMO);
    let target = h.target.clone().unwrap();
    assert!(target.starts_with("findByCustomerId"), "{target}");
    let first = p
        .immediate(&h)
        .into_iter()
        .find(|c| c.id == CandidateId::REPOCODER)
        .unwrap();
    let second = p.repocoder_iteration(&h, &target);
    assert_ne!(second.context, first.context);
    let query = perspectives::iteration_query(&SAMPLE, &h, &target);
    assert!(query.ends_with("return orderRepository.findByCustomerId(customerId);"));
    // The generated call moves the windows that use it up the ranking.
    let rank_of_a_use = |previous: &str| {
        let query = perspectives::iteration_query(&SAMPLE, &h, previous);
        let hits = windows.search(&SAMPLE, &h, &query, Similarity::Jaccard);
        hits.iter().position(|hit| {
            let w = windows.window(hit.window);
            let file = &SAMPLE.files[w.file];
            let text =
                &file.text[file.line_start(w.first as usize)..file.line_start(w.end as usize)];
            text.contains("findByCustomerId")
        })
    };
    let with = rank_of_a_use(&target).expect("a use among the hits");
    assert!(
        rank_of_a_use("").is_none_or(|without| with < without),
        "rank {with} with the generation, {:?} without",
        rank_of_a_use("")
    );
    assert_ne!(p.repocoder_iteration(&h, ""), second);
}

#[test]
fn the_summary_needs_a_backend_that_follows_instructions() {
    let retrieval = Retrieval::new(&SAMPLE);
    let windows = WindowIndex::new(&SAMPLE);
    let tok = TokenizerKind::Code.tokenizer();
    let p = perspectives(&retrieval, &windows, tok, 4072);
    let h = hole(DEMO);
    let backend = EmbeddedModel::new(&SAMPLE);
    let composer = Composer::new(&SAMPLE, &h, tok, 4072, DefaultReading::AsWritten);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let all = runtime
        .block_on(perspectives::build_all(&p, &h, &composer, &backend, 2))
        .unwrap();
    let ids: Vec<usize> = all.iter().map(|c| c.id.index()).collect();
    assert_eq!(ids, (63..=72).collect::<Vec<_>>());
    let at = |id: CandidateId| id.index() - CandidateId::FIRST_RETRIEVED.index();
    let summary = &all[at(CandidateId::SUMMARY)];
    assert!(!summary.applicable());
    let why = summary.why_not.as_deref().unwrap();
    assert!(
        why.contains("embedded") && why.contains("does not follow instructions"),
        "{why}"
    );
    assert!(all[at(CandidateId::HYPOTHETICAL_LINE)].applicable());
    assert!(all[at(CandidateId::LEXICAL)].applicable());
    // A summary, where there is one, retrieves by its words.
    let c = p.summary(&h, "finds the orders of a customer by the customer id");
    assert!(c.applicable() && c.context.text.contains("customerId"));
}

/// A deterministic stream of contexts for the bandit.
fn contexts(n: usize) -> impl Iterator<Item = bandit::Context> {
    (0..n).map(|i| {
        let f = |k: usize| ((i * 7919 + k * 104_729) % 1000) as f64 / 1000.0;
        bandit::context([Some((f(1), f(2))), Some((f(3), f(4))), Some((f(5), f(6)))])
    })
}

#[test]
fn linucb_learns_to_prefer_the_arm_that_pays() {
    let mut bandit = LinUcb::default();
    let all = [true; 3];
    // Arm 1 (hypothetical line) pays whenever it is picked; the others never do.
    for x in contexts(300) {
        let arm = bandit.choose(&x, all).unwrap();
        bandit.update(arm, &x, if arm == 1 { 1.0 } else { 0.0 });
    }
    let picks: Vec<usize> = contexts(100)
        .map(|x| bandit.choose(&x, all).unwrap())
        .collect();
    assert!(picks.iter().all(|&a| a == 1), "{picks:?}");
    assert!(bandit.pulls()[1] > 250, "{:?}", bandit.pulls());
    // An arm that is not available is never picked.
    let x = contexts(1).next().unwrap();
    assert_eq!(
        bandit.choose(&x, [true, false, true]).map(|a| a != 1),
        Some(true)
    );
    assert_eq!(bandit.choose(&x, [false; 3]), None);
}

#[test]
fn linucb_persists_and_a_corrupt_file_gives_a_fresh_one_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join(bandit::FILE);
    let mut trained = LinUcb::default();
    for (i, x) in contexts(20).enumerate() {
        trained.update(i % 3, &x, (i % 2) as f64);
    }
    trained.save(&path).unwrap();
    let (loaded, warning) = LinUcb::load(&path);
    assert_eq!(warning, None);
    assert_eq!(loaded.pulls(), trained.pulls());
    // JSON keeps the statistics to the last digit or so; the picks are the same.
    for x in contexts(50) {
        assert_eq!(loaded.choose(&x, [true; 3]), trained.choose(&x, [true; 3]));
    }
    assert_eq!(
        LinUcb::load(&dir.path().join("none.json")),
        (LinUcb::default(), None)
    );
    for content in ["{\"version\": 1, \"alp", "{\"version\": 7, \"alpha\": 0.1}"] {
        std::fs::write(&path, content).unwrap();
        let (bandit, warning) = LinUcb::load(&path);
        assert_eq!(bandit, LinUcb::default());
        let warning = warning.expect("a warning");
        assert!(warning.contains(&path.display().to_string()), "{warning}");
        assert!(!warning.contains('\n'), "{warning}");
    }
}

#[test]
fn a_budget_too_small_for_any_window_says_so() {
    let scratch = tempfile::tempdir().unwrap();
    let sample = crate::common::sample();
    let args = [
        "proposals",
        &sample,
        keyhole::sample::DEMO_HOLE,
        "--budget",
        "300",
    ];
    let output = crate::common::ok(crate::common::keyhole(&args, scratch.path()));
    let table = String::from_utf8_lossy(&output.stdout);
    let repocoder = table
        .lines()
        .find(|l| l.trim_start().starts_with("66 "))
        .unwrap();
    assert!(
        repocoder.contains("no retrieved window fits in 150 tokens, its share of the budget"),
        "{repocoder}"
    );
}
