//! How closely keyhole reproduces the papers' published code: reads what the authors' code
//! produced for a set of holes (JSONL, one hole a line; EVALUATION.md says how to make it) and
//! reports agreement.
//!
//! cargo run --example fidelity -- repocoder REPO ORACLE.jsonl [paper|code]
//! cargo run --example fidelity -- holes REPO ORACLE.jsonl [paper|code]
//! cargo run --example fidelity -- rlpg REPO ORACLE.jsonl [paper|code]
//! cargo run --example fidelity -- rlpg-prompt REPO ORACLE.jsonl [paper|code]
//! cargo run --example fidelity -- default REPO ORACLE.jsonl [paper|code]
//!
//! `rlpg`: per hole, the rule context RLPG's code builds for each of the 62 proposals (by
//! keyhole's label, e.g. `sibling I`). Reported per proposal: applicability agreement, and
//! where both have a context, contexts equal ignoring whitespace. Budgets are 4,072 GPT-2
//! (r50k_base) tokens, as RLPG's.
//!
//! `rlpg-prompt`: per hole, the whole prompt RLPG's main loop (`generate_completions.py`)
//! sends for each of the 62 proposals (`prompts`, by keyhole's label; `null` where the rule is
//! not triggered, which sends its `codex` mode's prompt, `codex_prompt`). Reported per
//! proposal: applicability agreement, and where both apply, keyhole's prompt equal to RLPG's,
//! exactly and ignoring whitespace, and the same contexts composed as keyhole's capped
//! composer composes them (the paper's reading of this step); per hole, candidate 62 (the
//! default context alone) equal to `codex_prompt`.
//!
//! `default`: per hole, RLPG's default context alone (`get_default_prompt`, 4,072 GPT-2 tokens:
//! candidate 62). Reported: keyhole's candidate 62 prompt equal to it, exactly and ignoring
//! whitespace.
//!
//! `holes`: RLPG's hole positions (file, line, column). Reported, over the files keyhole
//! samples: their holes whose line keyhole also samples, and of those the ones at the same
//! column.
//!
//! `repocoder`: per hole, RepoCoder's top-20 windows with their scores and its r-g prompt.
//! Reported for candidate 66 built with the given fidelity profile (default paper): top-1
//! agreement (keyhole's best block is one of RepoCoder's best-scoring windows; ties count as
//! agreement), the same best score, and retrieved contexts equal to RepoCoder's, exactly and
//! ignoring whitespace. `repocoder2` reports the same for candidate 67, RepoCoder's second
//! iteration (its r-g-r-g prompt), from rows that also carry the completion both sides
//! started from.
//!
//! cargo run --example fidelity -- completions REPO HOLES.json > HOLES-WITH-COMPLETIONS.json
//!
//! `completions`: the holes of `keyhole holes --json`, each with the `completion` candidate
//! 67 starts from in a paper-profile eval with the embedded model: the greedy completion of
//! candidate 66's prompt (budget 4,072 in the embedded model's tokenizer). A model's own
//! completion, not the target line: the target would put the answer into the query, which is
//! RepoCoder's oracle setting, not its second iteration.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use keyhole::Fidelity;
use keyhole::RepoIndex;
use keyhole::testing::context::HoleRequest;
use keyhole::{CandidateId, testing::candidate};
use keyhole::{DEFAULT_BUDGET, testing::compose};
use keyhole::{Hole, testing::hole::sample_holes};
use keyhole::{Keep, TokenizerKind, testing::token};
use keyhole::{Session, Settings};
use keyhole::{testing::context::perspectives, testing::context::proposals};
use keyhole::{
    testing::context::windows::MAX_HITS, testing::context::windows::Shown,
    testing::context::windows::Similarity, testing::context::windows::WindowIndex,
};
use serde_json::Value;

fn main() {
    let usage = "usage: fidelity repocoder|repocoder2|holes|rlpg|default|completions|assembly REPO ORACLE.jsonl [paper|code]";
    let mut args = std::env::args().skip(1);
    let (Some(kind), Some(repo), Some(oracle)) = (args.next(), args.next(), args.next()) else {
        panic!("{usage}");
    };
    let fidelity: Fidelity = args
        .next()
        .map_or(Ok(Fidelity::Paper), |f| f.parse())
        .unwrap_or_else(|e| panic!("{e}"));
    let index = RepoIndex::open(&PathBuf::from(repo), None).unwrap_or_else(|e| panic!("{e}"));
    let rows = std::fs::read_to_string(&oracle).unwrap_or_else(|e| panic!("{oracle}: {e}"));
    match kind.as_str() {
        "repocoder" => repocoder(&index, &rows, fidelity, Iteration::First),
        "repocoder2" => repocoder(&index, &rows, fidelity, Iteration::Second),
        "completions" => completions(index, &rows),
        "assembly" => assembly(index, &rows, fidelity),
        "holes" => holes(&index, &rows, fidelity),
        "rlpg" => rlpg(&index, &rows, fidelity),
        "rlpg-prompt" => rlpg_prompt(&index, &rows, fidelity),
        "default" => default_context(&index, &rows, fidelity),
        _ => panic!("{usage}"),
    }
}

/// The oracle's rows, one a hole: the row, the hole as `FILE:LINE:COL`, and the hole.
fn oracle_holes(index: &RepoIndex, rows: &str) -> Vec<(Value, String, Hole)> {
    rows.lines()
        .map(|row| {
            let row: Value = serde_json::from_str(row).expect("a JSON object a line");
            let at = format!(
                "{}:{}:{}",
                row["file"].as_str().unwrap(),
                row["line"],
                row["column"]
            );
            let hole = Hole::parse(index, &at).unwrap_or_else(|e| panic!("{at}: {e}"));
            (row, at, hole)
        })
        .collect()
}

/// Agreement of the 62 proposals' contexts with RLPG's code.
fn rlpg(index: &RepoIndex, rows: &str, fidelity: Fidelity) {
    let tok = TokenizerKind::R50kBase.tokenizer();
    let specs = candidate::proposal_specs();
    // Per proposal: holes, applicability agreed, both applicable, equal contexts.
    let mut counts = vec![[0usize; 4]; specs.len()];
    for (row, at, hole) in oracle_holes(index, rows) {
        let built = proposals::build_for_budget(index, &hole, tok, DEFAULT_BUDGET, fidelity);
        for p in &built {
            let theirs = row["proposals"][p.spec.label()]
                .as_str()
                .unwrap_or_else(|| {
                    panic!("{at}: the oracle has no {}", p.spec.label());
                });
            let allocation = compose::proposal_allocation(DEFAULT_BUDGET, p.spec.share);
            let (ours, _) = p.context.truncate(tok, allocation, p.keep);
            // RLPG's multi-file contexts may run past their allocation; its final prompt is then
            // cut to the budget from the front, as keyhole's composer cuts them.
            let (range, _) = token::truncate(tok, theirs, allocation, p.keep);
            let theirs = &theirs[range];
            let c = &mut counts[usize::from(p.spec.id)];
            c[0] += 1;
            c[1] += usize::from(ours.is_empty() == theirs.is_empty());
            if ours.is_empty() != theirs.is_empty()
                && std::env::var_os("FIDELITY_VERBOSE").is_some()
            {
                println!(
                    "{at} {}: applicable for keyhole {}, for the authors' code {}",
                    p.spec.label(),
                    !ours.is_empty(),
                    !theirs.is_empty()
                );
            }
            if !ours.is_empty() && !theirs.is_empty() {
                c[2] += 1;
                c[3] += usize::from(words(&ours.text) == words(theirs));
                if words(&ours.text) != words(theirs)
                    && std::env::var_os("FIDELITY_VERBOSE").is_some()
                {
                    let (a, b) = (words(&ours.text), words(theirs));
                    let first = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                    let around =
                        |w: &[&str]| w[first.saturating_sub(3)..(first + 5).min(w.len())].join(" ");
                    println!(
                        "{at} {} word {first} of {}/{}:\n  ours   {}\n  theirs {}",
                        p.spec.label(),
                        a.len(),
                        b.len(),
                        around(&a),
                        around(&b)
                    );
                }
            }
        }
    }
    let pct = |a: usize, b: usize| {
        if b == 0 {
            "-".to_string()
        } else {
            format!("{:.0}%", 100.0 * a as f64 / b as f64)
        }
    };
    println!(
        "fidelity {}: proposal, holes, applicability agrees, both applicable, equal ignoring whitespace",
        fidelity.name()
    );
    let mut total = [0usize; 4];
    let row = |label: &str, c: [usize; 4]| {
        println!(
            "{label:<28} {:>4} {:>5} {:>5} {:>5}",
            c[0],
            pct(c[1], c[0]),
            c[2],
            pct(c[3], c[2])
        );
    };
    for spec in specs {
        let c = counts[usize::from(spec.id)];
        for (t, n) in total.iter_mut().zip(c) {
            *t += n;
        }
        row(&spec.label(), c);
    }
    row("all", total);
}

/// Agreement of the 62 proposals' whole prompts with those RLPG's main loop sends.
fn rlpg_prompt(index: &RepoIndex, rows: &str, fidelity: Fidelity) {
    let tok = TokenizerKind::R50kBase.tokenizer();
    let specs = candidate::proposal_specs();
    let verbose = std::env::var_os("FIDELITY_VERBOSE").is_some();
    // Per proposal: pairs, applicability agreed, both applicable, equal exactly, equal ignoring
    // whitespace, equal ignoring whitespace when composed capped.
    let mut counts = vec![[0usize; 6]; specs.len()];
    // Candidate 62 against the codex prompt: holes, equal exactly, ignoring whitespace.
    let mut codex = [0usize; 3];
    for (row, at, hole) in oracle_holes(index, rows) {
        let built = proposals::build_for_budget(index, &hole, tok, DEFAULT_BUDGET, fidelity);
        let composer = compose::Composer::new(
            index,
            &hole,
            tok,
            DEFAULT_BUDGET,
            fidelity.default_reading(),
        );
        let theirs = row["codex_prompt"]
            .as_str()
            .expect("a codex_prompt per row");
        let ours = composer.compose(&keyhole::DefaultContext).text();
        codex[0] += 1;
        codex[1] += usize::from(ours == theirs);
        codex[2] += usize::from(words(&ours) == words(theirs));
        for p in &built {
            let label = p.spec.label();
            let theirs = &row["prompts"][&label];
            let c = &mut counts[usize::from(p.spec.id)];
            c[0] += 1;
            let ours = composer.compose(p).text();
            c[1] += usize::from(p.applicable() == theirs.is_string());
            if verbose && p.applicable() != theirs.is_string() {
                println!(
                    "{at} {label}: applicable for keyhole {}, for the authors' code {}",
                    p.applicable(),
                    theirs.is_string()
                );
            }
            let (Some(theirs), true) = (theirs.as_str(), p.applicable()) else {
                continue;
            };
            c[2] += 1;
            c[3] += usize::from(ours == theirs);
            c[4] += usize::from(words(&ours) == words(theirs));
            let capped = composer.compose_context(p.spec.id, &p.context, p.spec.share, p.keep);
            c[5] += usize::from(words(&capped.text()) == words(theirs));
            if verbose && words(&ours) != words(theirs) {
                let (a, b) = (words(&ours), words(theirs));
                let first = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                let around =
                    |w: &[&str]| w[first.saturating_sub(3)..(first + 5).min(w.len())].join(" ");
                println!(
                    "{at} {label} word {first} of {}/{}:\n  ours   {}\n  theirs {}",
                    a.len(),
                    b.len(),
                    around(&a),
                    around(&b)
                );
            }
        }
    }
    let pct = |a: usize, b: usize| {
        if b == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", 100.0 * a as f64 / b as f64)
        }
    };
    println!(
        "fidelity {}: proposal, pairs, applicability agrees, both applicable, prompt equal, \
         equal ignoring whitespace, capped composer equal ignoring whitespace",
        fidelity.name()
    );
    let mut total = [0usize; 6];
    let line = |label: &str, c: [usize; 6]| {
        println!(
            "{label:<28} {:>4} {:>6} {:>5} {:>6} {:>6} {:>6}",
            c[0],
            pct(c[1], c[0]),
            c[2],
            pct(c[3], c[2]),
            pct(c[4], c[2]),
            pct(c[5], c[2])
        );
    };
    for spec in specs {
        let c = counts[usize::from(spec.id)];
        for (t, n) in total.iter_mut().zip(c) {
            *t += n;
        }
        line(&spec.label(), c);
    }
    line("all", total);
    println!(
        "all: {} of {} pairs both applicable, prompt equal {} ({}), ignoring whitespace {} ({}); \
         capped composer {} ({}); candidate 62 equal to RLPG's codex prompt in {} of {} holes \
         ({}), ignoring whitespace {} ({})",
        total[2],
        total[0],
        total[3],
        pct(total[3], total[2]),
        total[4],
        pct(total[4], total[2]),
        total[5],
        pct(total[5], total[2]),
        codex[1],
        codex[0],
        pct(codex[1], codex[0]),
        codex[2],
        pct(codex[2], codex[0])
    );
}

/// Agreement of candidate 62, the default context alone, with RLPG's `get_default_prompt`.
fn default_context(index: &RepoIndex, rows: &str, fidelity: Fidelity) {
    let tok = TokenizerKind::R50kBase.tokenizer();
    let (mut holes, mut exact, mut equal) = (0, 0, 0);
    for (row, at, hole) in oracle_holes(index, rows) {
        let theirs = row["default"].as_str().expect("a `default` per row");
        let composer = compose::Composer::new(
            index,
            &hole,
            tok,
            DEFAULT_BUDGET,
            fidelity.default_reading(),
        );
        // `get_default_prompt` itself, not the `codex` mode's prompt around it (`rlpg-prompt`).
        let ours = composer
            .compose_context(CandidateId::DEFAULT, &Default::default(), 0.0, Keep::Start)
            .text();
        holes += 1;
        exact += usize::from(ours == theirs);
        equal += usize::from(words(&ours) == words(theirs));
        if ours != theirs && std::env::var_os("FIDELITY_VERBOSE").is_some() {
            let first = ours
                .chars()
                .zip(theirs.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let around = |t: &str| {
                t.chars()
                    .skip(first.saturating_sub(20))
                    .take(40)
                    .collect::<String>()
            };
            println!(
                "{at} char {first}:\n  ours   {:?}\n  theirs {:?}",
                around(&ours),
                around(theirs)
            );
        }
    }
    println!(
        "fidelity {}: {holes} holes, candidate 62 equal to RLPG's default context {exact} \
         ({:.0}%), ignoring whitespace {equal} ({:.0}%)",
        fidelity.name(),
        100.0 * exact as f64 / holes.max(1) as f64,
        100.0 * equal as f64 / holes.max(1) as f64
    );
}

/// Agreement of keyhole's hole sampling with RLPG's `create_hole_data.py`.
fn holes(index: &RepoIndex, rows: &str, fidelity: Fidelity) {
    let ours: HashMap<(&str, usize), usize> = sample_holes(index, None, 9, fidelity.hole_column())
        .iter()
        .map(|h| {
            (
                (index.files[h.file].path.as_str(), h.line + 1),
                h.column + 1,
            )
        })
        .collect();
    let sampled: HashSet<&str> = ours.keys().map(|(f, _)| *f).collect();
    let (mut theirs, mut lines, mut columns) = (0, 0, 0);
    for row in rows.lines() {
        let row: Value = serde_json::from_str(row).expect("a JSON object a line");
        let file = row["file"].as_str().unwrap();
        if !sampled.contains(file) {
            continue;
        }
        theirs += 1;
        let line = row["line"].as_u64().unwrap() as usize;
        if let Some(&column) = ours.get(&(file, line)) {
            lines += 1;
            columns += usize::from(Some(column as u64) == row["column"].as_u64());
        }
    }
    println!(
        "{theirs} RLPG holes in {} files keyhole samples ({} keyhole holes), fidelity {}: \
         line also a keyhole hole {:.1}%, same column {:.1}%",
        sampled.len(),
        ours.len(),
        fidelity.name(),
        100.0 * lines as f64 / theirs.max(1) as f64,
        100.0 * columns as f64 / lines.max(1) as f64
    );
}

/// Which of RepoCoder's iterations a comparison is of.
#[derive(Clone, Copy, PartialEq)]
enum Iteration {
    /// Candidate 66: the r-g prompt, retrieved by the lines before the hole.
    First,
    /// Candidate 67: the r-g-r-g prompt, retrieved with the row's `completion`.
    Second,
}

/// The holes of `keyhole holes --json` (`holes`), printed with the completion candidate 67
/// starts from (see the module's comment).
fn completions(index: RepoIndex, holes: &str) {
    let mut holes: Value = serde_json::from_str(holes).expect("keyhole holes --json");
    let session = Session::builder(&Settings::default())
        .on(Arc::new(index))
        .unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Runtime::new().expect("an async runtime");
    for h in holes["holes"].as_array_mut().expect("a holes array") {
        let hole = listed_hole(session.index(), h);
        let first = keyhole::testing::session::perspectives(&session).immediate(&hole);
        let composer = session.composer(&hole);
        let prompt = first
            .iter()
            .find(|c| c.id == CandidateId::REPOCODER)
            .and_then(|c| c.compose(&composer))
            .unwrap_or_else(|| composer.compose(&keyhole::DefaultContext));
        let request = perspectives::line_request(session.index(), &hole, &prompt);
        let completion = runtime
            .block_on(perspectives::first_completion(
                session.backend().as_ref(),
                &request,
            ))
            .unwrap_or_else(|e| panic!("{}:{}: {e}", h["file"], h["line"]));
        h["completion"] = Value::from(completion);
    }
    println!("{}", serde_json::to_string_pretty(&holes).unwrap());
}

/// A hole of `keyhole holes --json`'s list.
fn listed_hole(index: &RepoIndex, h: &Value) -> Hole {
    let at = format!(
        "{}:{}:{}",
        h["file"].as_str().unwrap(),
        h["line"],
        h["column"]
    );
    Hole::parse(index, &at).unwrap_or_else(|e| panic!("{at}: {e}"))
}

/// What the paper profile's cap changes in success: on the holes of `keyhole holes --json`,
/// every applicable proposal completed by the session's backend (the embedded model by
/// default) twice, its prompt assembled as RLPG's main loop sends it and capped at its
/// allocation (the paper's reading); success rates of the default context, the mean over
/// applicable pairs, the oracle over proposals and the best fixed proposal, for each.
fn assembly(index: RepoIndex, holes: &str, fidelity: Fidelity) {
    let holes: Value = serde_json::from_str(holes).expect("keyhole holes --json");
    let settings = Settings {
        tokenizer: Some(TokenizerKind::R50kBase),
        profile: fidelity,
        ..Settings::default()
    };
    let session = Session::builder(&settings)
        .on(Arc::new(index))
        .unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Runtime::new().expect("an async runtime");
    let complete = |hole: &Hole, prompt: &compose::Prompt| {
        let request = perspectives::line_request(session.index(), hole, prompt);
        let text = runtime
            .block_on(perspectives::first_completion(
                session.backend().as_ref(),
                &request,
            ))
            .unwrap_or_else(|e| panic!("{e}"));
        keyhole::score(&text, hole.target.as_deref().unwrap_or("")).exact_match
    };
    let proposals = candidate::proposal_specs().len();
    // Per assembly (main loop, capped): per proposal, its successes; per hole, any success.
    let mut fixed = [vec![0usize; proposals], vec![0usize; proposals]];
    let (mut oracle, mut pairs, mut hits) = ([0usize; 2], 0usize, [0usize; 2]);
    let (mut holes_done, mut default_hits) = (0usize, 0usize);
    for h in holes["holes"].as_array().expect("a holes array") {
        let hole = listed_hole(session.index(), h);
        let composer = session.composer(&hole);
        holes_done += 1;
        default_hits += usize::from(complete(&hole, &composer.compose(&keyhole::DefaultContext)));
        let mut any = [false; 2];
        for p in session.proposals(&hole).iter().filter(|p| p.applicable()) {
            pairs += 1;
            let sent = composer.compose(p);
            let capped = composer.compose_context(p.spec.id, &p.context, p.spec.share, p.keep);
            for (a, prompt) in [sent, capped].iter().enumerate() {
                let hit = complete(&hole, prompt);
                hits[a] += usize::from(hit);
                fixed[a][usize::from(p.spec.id)] += usize::from(hit);
                any[a] |= hit;
            }
        }
        for a in 0..2 {
            oracle[a] += usize::from(any[a]);
        }
    }
    let rate = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;
    println!("{holes_done} holes, {pairs} applicable (hole, proposal) pairs");
    println!(
        "default context (candidate 62): {:.2}",
        rate(default_hits, holes_done)
    );
    for (a, name) in ["RLPG's main loop", "capped at the allocation"]
        .iter()
        .enumerate()
    {
        let (best, best_hits) = fixed[a]
            .iter()
            .enumerate()
            .max_by_key(|&(id, n)| (*n, std::cmp::Reverse(id)))
            .unwrap();
        println!(
            "{name}: pairs {:.2}, oracle {:.2}, best fixed proposal #{best} {:.2}",
            rate(hits[a], pairs),
            rate(oracle[a], holes_done),
            rate(*best_hits, holes_done)
        );
    }
}

/// Agreement of candidate 66 (or 67) with RepoCoder's retrieval and r-g (or r-g-r-g) prompt.
fn repocoder(index: &RepoIndex, rows: &str, fidelity: Fidelity, iteration: Iteration) {
    let windows = WindowIndex::new(index);
    let (mut holes, mut top1, mut score, mut equal, mut equal_words) = (0, 0, 0, 0, 0);
    for (row, at, hole) in oracle_holes(index, rows) {
        let top_k = row["top_k"].as_array().unwrap();
        let best_score = top_k
            .first()
            .map_or(f64::NAN, |w| w["score"].as_f64().unwrap());
        let (query, shown) = match iteration {
            Iteration::First => (perspectives::repocoder_query(index, &hole), Shown::Extended),
            Iteration::Second => {
                let completion = row["completion"].as_str().expect("rows with a completion");
                let query = perspectives::iteration_query(index, &hole, completion);
                (query, Shown::Window)
            }
        };
        let hits = windows.search_as(index, &hole, &query, Similarity::Jaccard, fidelity);
        holes += 1;
        let req = HoleRequest {
            index,
            hole: &hole,
            tokenizer: TokenizerKind::P50kBase.tokenizer(),
            allocation: compose::proposal_allocation(DEFAULT_BUDGET, candidate::RETRIEVED_SHARE),
            seed: 9,
            fidelity,
        };
        let (text, used) = windows.blocks(&req, &hits, shown, fidelity);
        let theirs = row["prompt"].as_str().unwrap_or_default();
        let ours = format!("{}\n", text.text);
        equal += usize::from(ours == theirs);
        if ours != theirs && std::env::var_os("FIDELITY_VERBOSE").is_some() {
            let paths = |t: &str| -> Vec<String> {
                let lines: Vec<&str> = t.lines().collect();
                lines
                    .windows(2)
                    .filter(|w| w[0].ends_with("the below code fragment can be found in:"))
                    .map(|w| w[1].to_string())
                    .collect()
            };
            let first = ours.lines().zip(theirs.lines()).position(|(a, b)| a != b);
            let line = |t: &str| {
                let at = first.unwrap_or_default();
                let around: Vec<&str> = t.lines().skip(at.saturating_sub(3)).take(5).collect();
                format!("line {at}: {around:?}")
            };
            println!(
                "{at}: context differs\n  ours   {:?}\n  theirs {:?}\n  first different line\n    ours   {}\n    theirs {}",
                paths(&ours),
                paths(theirs),
                line(&ours),
                line(theirs)
            );
        }
        equal_words += usize::from(words(&ours) == words(theirs));
        let Some(best) = used
            .first()
            .and_then(|&w| hits.iter().find(|h| h.window == w))
        else {
            continue;
        };
        let places = windows.places(best.window);
        let is_best_tie = top_k
            .iter()
            .filter(|o| o["score"].as_f64().unwrap() == best_score)
            .flat_map(|o| o["places"].as_array().unwrap())
            .any(|p| {
                places.iter().any(|w| {
                    p["file"] == index.files[w.file].path.as_str()
                        && p["start"] == w.first
                        && p["end"] == w.end
                })
            });
        // RepoCoder keeps 20 windows: when all 20 tie, more may tie beyond them.
        let tied_beyond = top_k.len() == MAX_HITS
            && top_k
                .iter()
                .all(|o| o["score"].as_f64() == Some(best_score))
            && (best.score - best_score).abs() < 1e-9;
        let is_best_tie = is_best_tie || tied_beyond;
        top1 += usize::from(is_best_tie);
        if !is_best_tie && std::env::var_os("FIDELITY_VERBOSE").is_some() {
            let w = windows.window(best.window);
            println!(
                "{at}: keyhole's best block {}:{}..{} ({:.4}), RepoCoder's best {} ({best_score:.4})",
                index.files[w.file].path, w.first, w.end, best.score, top_k[0]["places"]
            );
        }
        score += usize::from((best.score - best_score).abs() < 1e-9);
    }
    let pct = |n: usize| 100.0 * n as f64 / holes.max(1) as f64;
    println!(
        "{holes} holes, candidate {}, fidelity {}: top-1 window agreement {:.1}%, equal best \
         score {:.1}%, context equal {:.1}% ({:.1}% ignoring whitespace)",
        match iteration {
            Iteration::First => CandidateId::REPOCODER,
            Iteration::Second => CandidateId::REPOCODER_ITERATION,
        },
        fidelity.name(),
        pct(top1),
        pct(score),
        pct(equal),
        pct(equal_words)
    );
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}
