//! Robustness sweep: a hole at random columns of every line of every file of a repository;
//! all 62 proposals are built and composed for each, and every prompt is validated. Panics
//! are caught and reported with the position.
//!
//! cargo run --release --example sweep -- REPO [COLUMNS_PER_LINE] [SEED]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::Instant;

use keyhole::compose;
use keyhole::context::proposals::{self, Request};
use keyhole::hole::every_line;
use keyhole::repo::RepoIndex;
use keyhole::token::TokenizerKind;

fn main() {
    let mut args = std::env::args().skip(1);
    let repo = PathBuf::from(
        args.next()
            .expect("usage: sweep REPO [COLUMNS_PER_LINE] [SEED]"),
    );
    let columns: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("COLUMNS_PER_LINE is a number"));
    let seed: u64 = args
        .next()
        .map_or(9, |a| a.parse().expect("SEED is a number"));
    let index = RepoIndex::open(&repo, None).unwrap_or_else(|e| panic!("{e}"));
    let tok = TokenizerKind::Code.tokenizer();
    let holes = every_line(&index, columns, seed);
    let started = Instant::now();
    let (mut prompts, mut failures) = (0usize, 0usize);
    for hole in &holes {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut problems = Vec::new();
            let composer = compose::Composer::new(&index, hole, tok, compose::DEFAULT_BUDGET);
            for spec in proposals::specs() {
                let allocation = compose::proposal_allocation(compose::DEFAULT_BUDGET, spec.share);
                let req = Request {
                    index: &index,
                    hole,
                    tokenizer: tok,
                    allocation,
                };
                let proposal = proposals::build(spec, &req);
                let prompt = composer.compose(Some(&proposal));
                if let Err(why) = prompt.validate(&index, tok) {
                    problems.push(format!("proposal {}: {why}", spec.id));
                }
            }
            problems
        }));
        prompts += proposals::PROPOSAL_COUNT;
        let problems = outcome.unwrap_or_else(|_| vec!["panicked".to_string()]);
        for problem in &problems {
            failures += 1;
            println!("{}: {problem}", hole.display(&index));
        }
    }
    println!(
        "{}: {} files, {} holes, {prompts} prompts validated in {:.1} s, {failures} failures",
        repo.display(),
        index.files.len(),
        holes.len(),
        started.elapsed().as_secs_f64()
    );
    std::process::exit(i32::from(failures > 0));
}
