//! Criterion benchmark of the prompt proposal classifier (issue target: scoring all candidates
//! of one hole ≤ 5 ms on one core; the forward pass is plain Rust on one thread). Proposals are
//! built beforehand, as the UI and CLI have them already when they rank.
//!
//! Holes come from `KEYHOLE_BENCH_REPO` (default `/work/corpus/guava-libraries`) when it
//! exists, else from the bundled sample repository.

mod support;

use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use keyhole::Fidelity;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::rank::RankInput;
use keyhole::{Hole, testing::hole::HoleColumn, testing::hole::sample_holes};
use keyhole::{ProposalContext, testing::context::proposals::build_for_budget};
use keyhole::{testing::rank::classifier::Classifier, testing::rank::classifier::Variant};

const HOLES: usize = 50;
const BUDGET: usize = 4072;

fn repo() -> PathBuf {
    support::large_repo().map_or_else(support::sample_repo, |(_, path)| path)
}

fn scoring(c: &mut Criterion) {
    let root = repo();
    let index = RepoIndex::open(&root, keyhole::Dirs::from_env().cache.as_deref()).expect("open");
    let tokenizer = TokenizerKind::Code.tokenizer();
    let holes: Vec<(Hole, Vec<ProposalContext>)> =
        sample_holes(&index, Some(HOLES), 9, HoleColumn::TrimmedMiddle)
            .into_iter()
            .map(|h| {
                let built = build_for_budget(&index, &h, tokenizer, BUDGET, Fidelity::Paper);
                (h, built)
            })
            .collect();
    let classifier = Classifier::bundled();
    let mut group = c.benchmark_group(format!(
        "classifier/{}",
        root.file_name().unwrap_or_default().to_string_lossy()
    ));
    for variant in [Variant::H, Variant::R] {
        group.bench_function(format!("{} per hole", variant.name()), |b| {
            let mut i = 0;
            b.iter(|| {
                let (hole, built) = &holes[i % holes.len()];
                i += 1;
                classifier
                    .probabilities(variant, &RankInput::new(&index, hole, built))
                    .expect("scores")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, scoring);
criterion_main!(benches);
