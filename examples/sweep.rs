//! Robustness sweep: holes all over a repository, and for each every candidate (RLPG's 62
//! proposals, the default context and the retrieved candidates 63–72, those that need a
//! completion built from a non-ASCII stand-in answer) is built, composed and validated with
//! the same checks the fuzz targets use. Panics are caught and reported with the position.
//!
//! cargo run --release --example sweep -- REPO [COLUMNS_PER_LINE] [SEED]
//! cargo run --release --example sweep -- REPO non-ascii
//!
//! The second form puts a hole right before and right after every non-ASCII character.

#[path = "../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::Instant;

use keyhole::CandidateId;
use keyhole::DEFAULT_BUDGET;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::{Hole, testing::hole::every_line};

/// Holes before and after every non-ASCII character of every file.
fn next_to_non_ascii(index: &RepoIndex) -> Vec<Hole> {
    let mut holes = Vec::new();
    for file in &index.files {
        for line in 0..file.line_count() {
            let chars: Vec<char> = file.line_text(line).chars().collect();
            let non_ascii = |i: usize| chars.get(i).is_some_and(|c| !c.is_ascii());
            for column in (0..=chars.len()).filter(|&c| non_ascii(c) || c > 0 && non_ascii(c - 1)) {
                holes.extend(Hole::at(index, &file.path, line + 1, column + 1).ok());
            }
        }
    }
    holes
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: sweep REPO [COLUMNS_PER_LINE [SEED] | non-ascii]";
    let repo = PathBuf::from(args.next().expect(usage));
    let mode = args.next();
    let index = RepoIndex::open(&repo, None).unwrap_or_else(|e| panic!("{e}"));
    let holes = match mode.as_deref() {
        Some("non-ascii") => next_to_non_ascii(&index),
        columns => {
            let columns = columns.map_or(2, |a| a.parse().expect(usage));
            let seed = args.next().map_or(9, |a| a.parse().expect(usage));
            every_line(&index, columns, seed)
        }
    };
    // The checks panic on the first broken prompt; the sweep reports it and goes on.
    std::panic::set_hook(Box::new(|_| {}));
    let searches = fuzz_checks::Searches::new(&index);
    let started = Instant::now();
    let mut failures = 0usize;
    for hole in &holes {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let kind = TokenizerKind::Code;
            fuzz_checks::compose_all(&index, hole, kind, DEFAULT_BUDGET);
            fuzz_checks::compose_retrieved(&index, &searches, hole, kind, DEFAULT_BUDGET);
        }));
        if let Err(payload) = outcome {
            failures += 1;
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("{}: {why}", hole.display(&index));
        }
    }
    let per_hole = CandidateId::COUNT;
    println!(
        "{}: {} files, {} holes, {} candidates built and validated in {:.1} s, {failures} holes failed",
        repo.display(),
        index.files.len(),
        holes.len(),
        holes.len() * per_hole,
        started.elapsed().as_secs_f64()
    );
    std::process::exit(i32::from(failures > 0));
}
