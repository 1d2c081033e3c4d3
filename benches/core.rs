//! Criterion benchmarks of keyhole's core paths (see BENCHMARKS.md).
//!
//! Runs on the bundled sample repository and, when the directory exists, on the repository named
//! by `KEYHOLE_BENCH_REPO` (default `/work/corpus/guava-libraries`) with small sample sizes.

mod support;

use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use keyhole::Fidelity;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::compose::compose;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::proposals::build_all;
use keyhole::testing::context::typed::TypedHole;
use keyhole::{Hole, testing::hole::HoleColumn, testing::hole::sample_holes};
use rayon::prelude::*;

const ALLOCATION: usize = 2036;
const BUDGET: usize = 4072;

fn bench_repo(c: &mut Criterion, name: &str, root: &Path, large: bool) {
    let mut group = c.benchmark_group(name);
    if large {
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(10));
    }

    group.bench_function("index_cold", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("temp dir"),
            |dir| {
                let index = RepoIndex::open(root, Some(dir.path())).expect("open");
                // Returned so that dropping the index and removing the directory is not timed.
                (index, dir)
            },
            BatchSize::PerIteration,
        )
    });

    let cache = tempfile::tempdir().expect("temp dir");
    let index = RepoIndex::open(root, Some(cache.path())).expect("open");
    group.bench_function("index_warm", |b| {
        b.iter_with_large_drop(|| {
            let index = RepoIndex::open(root, Some(cache.path())).expect("open");
            debug_assert_eq!(index.cache.parsed, 0);
            index
        })
    });

    // The same files, read beforehand; only the parse is timed.
    let texts: Vec<&str> = index.files.iter().map(|f| &*f.text).collect();
    group.bench_function("bare_parse", |b| {
        b.iter_with_large_drop(|| {
            texts
                .par_iter()
                .map(|t| keyhole::testing::lang::java::parse(t))
                .collect::<Vec<_>>()
        })
    });

    // One hole from the same sample the latency bench uses (300 holes, seed 9): the middle one.
    let holes = sample_holes(&index, Some(300), 9, HoleColumn::TrimmedMiddle);
    let hole = &holes[holes.len() / 2];
    let tokenizer = TokenizerKind::Code.tokenizer();
    let req = HoleRequest {
        index: &index,
        hole,
        tokenizer,
        allocation: ALLOCATION,
        fidelity: Fidelity::Paper,
        seed: 9,
    };
    group.bench_function("proposals_all_one_hole", |b| {
        b.iter_with_large_drop(|| build_all(&req))
    });

    // One prompt, from the applicable proposal with the most context.
    let proposals = build_all(&req);
    let proposal = proposals
        .iter()
        .filter(|p| p.applicable())
        .max_by_key(|p| p.context.text.len())
        .expect("an applicable proposal");
    group.bench_function("compose_one_prompt", |b| {
        b.iter_with_large_drop(|| compose(&index, hole, proposal, tokenizer, BUDGET))
    });
    group.finish();
}

/// Files nested `depth` deep three ways, with the hole where the nesting is deepest: one block
/// per line inside a method, one class per line, and `depth` imports before a class.
fn nested(shape: &str, depth: usize) -> (String, usize) {
    let text = match shape {
        "blocks" => format!(
            "class Deep {{\n  void f() {{\n{}    int x = 1;\n{}  }}\n}}\n",
            "{\n".repeat(depth),
            "}\n".repeat(depth)
        ),
        "classes" => format!(
            "{}    int x = 1;\n{}",
            (0..depth)
                .map(|i| format!("class C{i} {{\n"))
                .collect::<String>(),
            "}\n".repeat(depth)
        ),
        _ => format!(
            "package p;\n{}class Deep {{\n    int x = 1;\n}}\n",
            (0..depth)
                .map(|i| format!("import q.T{i};\n"))
                .collect::<String>()
        ),
    };
    let line = text
        .lines()
        .position(|l| l.contains("int x"))
        .expect("a hole line");
    (text, line + 1)
}

/// Everything one hole needs from the syntax tree (facts of the file, 62 proposals, the
/// typed-hole analysis) at growing nesting depths: linear, not quadratic, in the depth.
fn bench_nesting(c: &mut Criterion) {
    let mut group = c.benchmark_group("nesting");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let tokenizer = TokenizerKind::Code.tokenizer();
    for shape in ["blocks", "classes", "imports"] {
        for depth in [1_000, 4_000, 16_000, 32_000] {
            let (text, line) = nested(shape, depth);
            group.bench_function(BenchmarkId::new(shape, depth), |b| {
                b.iter_with_large_drop(|| {
                    let sources = vec![("Deep.java".to_string(), text.clone())];
                    let index = RepoIndex::from_sources(Path::new("/nested"), sources);
                    let hole = Hole::at(&index, "Deep.java", line, 5).expect("the hole");
                    let req = HoleRequest {
                        index: &index,
                        hole: &hole,
                        tokenizer,
                        allocation: ALLOCATION,
                        fidelity: Fidelity::Paper,
                        seed: 9,
                    };
                    let proposals = build_all(&req);
                    let typed = TypedHole::new(&index, &hole).contexts();
                    (proposals, typed, index)
                })
            });
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_nesting(c);
    let sample = support::sample_repo();
    bench_repo(c, "sample", &sample, false);
    if let Some((name, corpus)) = support::large_repo() {
        bench_repo(c, &name, &corpus, true);
    }
}

criterion_group!(core, benches);
criterion_main!(core);
