//! The embedded model's speed: single-line greedy completions of ~4k-token prompts on one
//! core (target: at least 1,000 per second). Repository: `KEYHOLE_BENCH_MODEL_REPO`, default
//! `/work/corpus/commons-io`, else the bundled sample.

use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keyhole::CompletionRequest;
use keyhole::Fidelity;
use keyhole::RepoIndex;
use keyhole::TokenizerKind;
use keyhole::testing::candidate;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::proposals;
use keyhole::testing::model::ngram::EmbeddedModel;
use keyhole::{Composer, testing::compose, testing::compose::DefaultReading};
use keyhole::{testing::hole::HoleColumn, testing::hole::sample_holes};

const BUDGET: usize = 4072;
/// Proposals that usually fill their share: identifiers of imports, post lines at 75%.
const FILLERS: [usize; 2] = [16, 7];

fn repository() -> PathBuf {
    let path = std::env::var_os("KEYHOLE_BENCH_MODEL_REPO")
        .map_or_else(|| PathBuf::from("/work/corpus/commons-io"), PathBuf::from);
    if path.is_dir() {
        path
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo")
    }
}

/// Requests whose prompts are as close to the full budget as the holes allow.
fn requests(index: &RepoIndex) -> Vec<CompletionRequest> {
    let tok = TokenizerKind::Code.tokenizer();
    sample_holes(index, Some(200), 9, HoleColumn::TrimmedMiddle)
        .iter()
        .filter_map(|hole| {
            let composer = Composer::new(index, hole, tok, BUDGET, DefaultReading::AsWritten);
            let prompt = FILLERS
                .iter()
                .map(|&id| {
                    let spec = candidate::proposal_specs()[id];
                    let req = HoleRequest {
                        index,
                        hole,
                        tokenizer: tok,
                        allocation: compose::proposal_allocation(BUDGET, spec.share),
                        fidelity: Fidelity::Paper,
                        seed: 9,
                    };
                    composer.compose(&proposals::build(spec, &req))
                })
                .max_by_key(|p| p.tokens(tok))?;
            (prompt.tokens(tok) + 200 >= BUDGET).then(|| CompletionRequest {
                current_file: Some(index.files[hole.file].path.clone()),
                ..CompletionRequest::single_line(prompt.text())
            })
        })
        .take(64)
        .collect()
}

fn bench(c: &mut Criterion) {
    let path = repository();
    let index = RepoIndex::open(&path, None).expect("repository opens");
    let model = EmbeddedModel::new(&index);
    let requests = requests(&index);
    assert!(
        !requests.is_empty(),
        "no hole with a near-full prompt in {}",
        path.display()
    );
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut group = c.benchmark_group("embedded_model");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function(format!("single_line_4k_prompt/{name}"), |b| {
        b.iter(|| {
            i = (i + 1) % requests.len();
            model.generate(&requests[i], 0)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
