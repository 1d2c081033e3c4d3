//! Criterion benchmarks of RepoCoder's window retrieval (see BENCHMARKS.md): building the
//! window index of a repository, and one query (search and prompt layout) per hole, cycling
//! over 64 holes of the latency sample (300 holes, seed 9), for Jaccard (RepoCoder) and TF-IDF
//! cosine (ProCC lexical). One core: nothing here runs in parallel.
//!
//! Runs on the bundled sample repository and, when the directory exists, on the repository named
//! by `KEYHOLE_BENCH_REPO` (default `/work/corpus/guava-libraries`).

mod support;

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use keyhole::Fidelity;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::context::HoleRequest;
use keyhole::{
    testing::context::perspectives::around_hole, testing::context::perspectives::repocoder_query,
};
use keyhole::{
    testing::context::windows::Shown, testing::context::windows::Similarity,
    testing::context::windows::WindowIndex,
};
use keyhole::{testing::hole::HoleColumn, testing::hole::sample_holes};

const ALLOCATION: usize = 2036;
const HOLES: usize = 64;

fn bench_repo(c: &mut Criterion, name: &str, root: &Path) {
    let mut group = c.benchmark_group(format!("retrieval/{name}"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let cache = tempfile::tempdir().expect("temp dir");
    let index = RepoIndex::open(root, Some(cache.path())).expect("open");
    group.bench_function("window_index", |b| {
        b.iter_with_large_drop(|| WindowIndex::new(&index))
    });
    let windows = WindowIndex::new(&index);
    println!("{name}: {} windows", windows.len());
    let holes = sample_holes(&index, Some(300), 9, HoleColumn::TrimmedMiddle);
    let holes: Vec<_> = holes.into_iter().step_by(300 / HOLES).take(HOLES).collect();
    let tokenizer = TokenizerKind::Code.tokenizer();
    let cases = [
        ("repocoder_query", Similarity::Jaccard),
        ("procc_lexical_query", Similarity::TfIdfCosine),
    ];
    for (case, similarity) in cases {
        let next = Cell::new(0);
        group.bench_function(case, |b| {
            b.iter(|| {
                let hole = &holes[next.replace((next.get() + 1) % holes.len())];
                let query = match similarity {
                    Similarity::Jaccard => repocoder_query(&index, hole),
                    Similarity::TfIdfCosine => around_hole(&index, hole),
                };
                let hits = windows.search(&index, hole, &query, similarity);
                let req = HoleRequest {
                    index: &index,
                    hole,
                    tokenizer,
                    allocation: ALLOCATION,
                    seed: 9,
                    fidelity: keyhole::Fidelity::Paper,
                };
                windows.blocks(&req, &hits, Shown::Window, Fidelity::Paper)
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let sample = support::sample_repo();
    bench_repo(c, "sample", &sample);
    if let Some((name, corpus)) = support::large_repo() {
        bench_repo(c, &name, &corpus);
    }
}

criterion_group!(retrieval, benches);
criterion_main!(retrieval);
