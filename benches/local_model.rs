//! A local GGUF model's prompt (prefill) and generation speed, in tokens per second, on a
//! prompt of about 1,000 tokens of the bundled sample repository's Java.
//!
//! The model file is `KEYHOLE_BENCH_GGUF` (skipped with a note when unset); threads follow the
//! machine unless `CANDLE_NUM_THREADS` says. Prefill is timed as a one-token completion;
//! generation as the extra time of a 65-token completion (no stop sequence) over the tokens
//! it wrote beyond the first. Each figure is the median of 3 runs after one warm-up.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keyhole::model::config::BackendConfig;
use keyhole::model::local::LocalBackend;
use keyhole::model::{Backend, CompletionRequest};

const PROMPT_TOKENS: usize = 1000;
const GENERATED: usize = 65;
const RUNS: usize = 3;

/// Java from the sample repository, cut to about `PROMPT_TOKENS` tokens of `backend`.
fn prompt(backend: &LocalBackend) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo");
    let mut files: Vec<PathBuf> = ignore::Walk::new(&root)
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    files.sort();
    let mut text = String::new();
    for file in files {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            text.push_str(line);
            text.push('\n');
            if backend.model().count_tokens(&text).unwrap() >= PROMPT_TOKENS {
                return text;
            }
        }
    }
    text
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let Some(path) = std::env::var_os("KEYHOLE_BENCH_GGUF") else {
        eprintln!("local_model: set KEYHOLE_BENCH_GGUF to a GGUF file to run this benchmark");
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let backend = LocalBackend::open(&BackendConfig::local(PathBuf::from(path))).unwrap();
    let load = started.elapsed();
    let prompt = prompt(&backend);
    let prompt_tokens = backend.model().count_tokens(&prompt).unwrap();
    let request = |max_tokens: usize| CompletionRequest {
        max_tokens,
        stop: Vec::new(),
        ..CompletionRequest::single_line(prompt.clone())
    };
    let time = |request: &CompletionRequest| {
        let started = Instant::now();
        let text = runtime
            .block_on(backend.complete(request, None))
            .unwrap()
            .remove(0)
            .text;
        (started.elapsed(), text)
    };
    let (short, long) = (request(1), request(GENERATED));
    time(&short);
    let mut prefills = Vec::new();
    let mut generations = Vec::new();
    let mut generated = 0;
    for _ in 0..RUNS {
        let (prefill, _) = time(&short);
        let (whole, text) = time(&long);
        generated = backend.model().count_tokens(&text).unwrap();
        prefills.push(prefill);
        generations.push(whole.saturating_sub(prefill));
    }
    let prefill = median(prefills);
    let generation = median(generations);
    println!("model       {}", backend.model().path().display());
    println!("load        {:.2} s", load.as_secs_f64());
    println!(
        "prompt      {prompt_tokens} tokens in {:.2} s: {:.1} tokens/s",
        prefill.as_secs_f64(),
        prompt_tokens as f64 / prefill.as_secs_f64()
    );
    let extra = generated.saturating_sub(1).max(1);
    println!(
        "generation  {extra} tokens in {:.2} s: {:.1} tokens/s",
        generation.as_secs_f64(),
        extra as f64 / generation.as_secs_f64()
    );
}
