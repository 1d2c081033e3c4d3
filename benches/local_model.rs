//! A local GGUF model's prompt (prefill) and generation speed, in tokens per second, on a
//! prompt of about 1,000 tokens of the bundled sample repository's Java; the time to re-run
//! that prompt edited near its end (the prompt cache); k = 4 requests sent together (four
//! distinct prompts of about 1,000 tokens, 48 tokens each, as the UI's cards) and one request
//! for 4 samples, timed until all are done; the batch's decoding speed by its width; and a
//! check that keyhole's forward pass gives candle-transformers' greedy tokens on the same file.
//!
//! The model file is `KEYHOLE_BENCH_GGUF` (skipped with a note when unset); threads follow the
//! machine unless `KEYHOLE_BENCH_THREADS` says (as a backend's `threads`). Each timed prompt
//! starts with a line of its own, so that the cache holds nothing of it. Prefill is timed as a
//! one-token completion; generation as the extra time of a 65-token completion (no stop
//! sequence) over the tokens it wrote beyond the first. Each figure is the median of 3 runs
//! (`KEYHOLE_BENCH_RUNS`) after one warm-up. `KEYHOLE_BENCH_CHECK=0` skips the check (it
//! loads the model twice more); `KEYHOLE_BENCH_ONLY=together` times only the requests sent
//! together; `KEYHOLE_BENCH_ONLY=generation` times only generation after prompts of 100, 1,000
//! and 3,000 tokens (`KEYHOLE_BENCH_LENGTHS`, comma-separated), from the first streamed token
//! to the last.
//! `KEYHOLE_BENCH_SERVER=URL` times a llama.cpp `llama-server` at URL on the same k prompts
//! (its `/completion`, `cache_prompt` false), for a side-by-side figure, and in the generation
//! mode generates after each same prompt there right after keyhole does (its own `timings`;
//! both keep the prompt cached between runs, which generation after it does not depend on).

use std::io::{Cursor, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama;
use futures_util::future::join_all;
use keyhole::testing::model::local::LocalBackend;
use keyhole::{Backend, CompletionRequest};
use keyhole::{BackendConfig, testing::model::config::Matrices};

const PROMPT_TOKENS: usize = 1000;
const GENERATED: usize = 65;
/// Requests sent together, as the UI's cards, and the tokens each generates.
const CARDS: usize = 4;
const CARD_TOKENS: usize = 48;
/// Widths of the batch whose decoding speed is timed.
const WIDTHS: [usize; 4] = [1, 2, 4, 8];
/// Runs of each figure, unless `KEYHOLE_BENCH_RUNS` says.
fn runs() -> usize {
    std::env::var("KEYHOLE_BENCH_RUNS").map_or(3, |n| n.parse().expect("a count"))
}
/// Greedy tokens compared with candle-transformers'.
const CHECKED: usize = 32;

/// The lines of the sample repository's Java files, in path order.
fn java_lines() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo");
    let mut files: Vec<PathBuf> = ignore::Walk::new(&root)
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            text.lines().map(String::from).collect::<Vec<_>>()
        })
        .collect()
}

/// The sample's Java from line `start` on (wrapping around), cut to about `tokens` tokens of
/// `backend`.
fn java(backend: &LocalBackend, lines: &[String], start: usize, tokens: usize) -> String {
    let mut text = String::new();
    for line in lines.iter().cycle().skip(start).take(lines.len()) {
        text.push_str(line);
        text.push('\n');
        if backend.model().count_tokens(&text).unwrap() >= tokens {
            break;
        }
    }
    text
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn request(prompt: String, max_tokens: usize) -> CompletionRequest {
    CompletionRequest {
        max_tokens,
        stop: Vec::new(),
        ..CompletionRequest::single_line(prompt)
    }
}

fn main() {
    let Some(path) = std::env::var_os("KEYHOLE_BENCH_GGUF").map(PathBuf::from) else {
        eprintln!("local_model: set KEYHOLE_BENCH_GGUF to a GGUF file to run this benchmark");
        return;
    };
    let threads = std::env::var("KEYHOLE_BENCH_THREADS")
        .ok()
        .map(|n| n.parse().expect("KEYHOLE_BENCH_THREADS is a count"));
    let config = BackendConfig {
        threads,
        ..BackendConfig::local(path.clone())
    };
    // SAFETY: no other thread runs yet.
    unsafe { keyhole::testing::model::local::use_threads(&config) };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let backend = LocalBackend::open(&config).unwrap();
    let load = started.elapsed();
    let lines = java_lines();
    println!("model       {}", backend.model().path().display());
    println!(
        "threads     {}",
        threads.map_or("default".into(), |n| n.to_string())
    );
    println!("load        {:.2} s", load.as_secs_f64());
    let text = java(&backend, &lines, 0, PROMPT_TOKENS);
    let only = std::env::var("KEYHOLE_BENCH_ONLY").ok();
    if only.as_deref() == Some("generation") {
        after_prompts(&backend, &runtime, &lines);
        return;
    }
    let together_only = only.as_deref() == Some("together");
    if !together_only {
        one_prompt(&backend, &runtime, &text);
    }
    together(&backend, &runtime, &lines);
    if backend.model().architecture() != "llama" {
        println!("check       skipped: it runs candle-transformers' llama only");
    } else if std::env::var("KEYHOLE_BENCH_CHECK").as_deref() != Ok("0") && !together_only {
        check(&path, &text, &runtime);
    }
}

/// Prefill and generation speed on `text`, and the time to re-run it edited near its end.
fn one_prompt(backend: &LocalBackend, runtime: &tokio::runtime::Runtime, text: &str) {
    let prompt_tokens = backend.model().count_tokens(text).unwrap();
    let mut run = 0;
    // A prompt the cache holds nothing of: the text after a line of its own.
    let mut fresh = || {
        run += 1;
        format!("// run {run}\n{text}")
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
    time(&request(fresh(), 1));
    let mut prefills = Vec::new();
    let mut generations = Vec::new();
    let mut edits = Vec::new();
    let mut generated = 0;
    for _ in 0..runs() {
        let original = fresh();
        let (prefill, _) = time(&request(original.clone(), 1));
        // The same prompt with its last line but two changed, as after an edit near the hole.
        let mut lines: Vec<&str> = original.lines().collect();
        let at = lines.len() - 3;
        let edited_line = format!("{} // edited", lines[at]);
        lines[at] = &edited_line;
        let (edit, _) = time(&request(lines.join("\n") + "\n", 1));
        let (whole, text) = time(&request(fresh(), GENERATED));
        generated = backend.model().count_tokens(&text).unwrap();
        prefills.push(prefill);
        edits.push(edit);
        generations.push(whole.saturating_sub(prefill));
    }
    let prefill = median(prefills);
    let generation = median(generations);
    let edit = median(edits);
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
    println!(
        "edited      the prompt edited near its end, one token: {:.3} s ({:.0}% of a fresh run)",
        edit.as_secs_f64(),
        100.0 * edit.as_secs_f64() / prefill.as_secs_f64()
    );
}

/// Generation speed after prompts of each length: keyhole's from its first streamed token to
/// its last, and with `KEYHOLE_BENCH_SERVER` llama-server's on the same prompt right after
/// (its `predicted_per_second`), `KEYHOLE_BENCH_RUNS` runs alternating, medians.
fn after_prompts(backend: &LocalBackend, runtime: &tokio::runtime::Runtime, lines: &[String]) {
    let lengths: Vec<usize> = std::env::var("KEYHOLE_BENCH_LENGTHS")
        .unwrap_or_else(|_| "100,1000,3000".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("KEYHOLE_BENCH_LENGTHS is a list of counts")
        })
        .collect();
    for length in lengths {
        let text = java(backend, lines, 0, length);
        let mut own = Vec::new();
        let mut theirs = Vec::new();
        // The same prompt every run: only the first reads it, and each generates after it.
        let prompt = format!("// length {length}\n{text}");
        let prompt_tokens = backend.model().count_tokens(&prompt).unwrap();
        for _ in 0..runs() {
            own.push(generation(backend, runtime, prompt.clone()));
            #[cfg(feature = "http")]
            if let Ok(url) = std::env::var("KEYHOLE_BENCH_SERVER") {
                theirs.push(server_generation(runtime, &url, &prompt));
            }
        }
        let median_rate = |mut rates: Vec<f64>| {
            rates.sort_by(f64::total_cmp);
            rates[rates.len() / 2]
        };
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load = load.split(' ').next().unwrap_or("?");
        print!(
            "after {prompt_tokens:>5}  keyhole {:.1} tokens/s",
            median_rate(own)
        );
        if !theirs.is_empty() {
            print!(", llama-server {:.1} tokens/s", median_rate(theirs));
        }
        println!(" (load {load})");
    }
}

/// Tokens a second keyhole generates after `prompt`, from its first streamed token to its
/// last, greedy and without a stop.
fn generation(backend: &LocalBackend, runtime: &tokio::runtime::Runtime, prompt: String) -> f64 {
    let (sender, mut deltas) = tokio::sync::mpsc::unbounded_channel();
    let request = request(prompt, GENERATED);
    let (first, text) = runtime.block_on(async {
        let completing = backend.complete(&request, Some(&sender));
        tokio::pin!(completing);
        let mut first = None;
        loop {
            tokio::select! {
                done = &mut completing => break (first, done.unwrap().remove(0).text),
                Some(delta) = deltas.recv() => {
                    if first.is_none() && !delta.is_start() {
                        first = Some(Instant::now());
                    }
                }
            }
        }
    });
    let elapsed = first.expect("a streamed token").elapsed();
    let tokens = backend.model().count_tokens(&text).unwrap();
    tokens.saturating_sub(1) as f64 / elapsed.as_secs_f64()
}

/// Tokens a second llama-server at `url` generates after `prompt` (65, greedy, its prompt
/// cache off), as its own `timings` say.
#[cfg(feature = "http")]
fn server_generation(runtime: &tokio::runtime::Runtime, url: &str, prompt: &str) -> f64 {
    let body = serde_json::json!({
        "prompt": prompt,
        "n_predict": GENERATED,
        "temperature": 0.0,
        "ignore_eos": true,
        "cache_prompt": true,
    });
    let answer: serde_json::Value = runtime.block_on(async {
        let client = reqwest::Client::new();
        let sent = client.post(format!("{url}/completion")).json(&body).send();
        sent.await.unwrap().json().await.unwrap()
    });
    answer["timings"]["predicted_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no timings in {answer}"))
}

/// Times `CARDS` distinct prompts sent together and one prompt's `CARDS` samples, each until
/// all are done, and the batch's decoding by its width; with `KEYHOLE_BENCH_SERVER`, the same
/// prompts on llama-server.
fn together(backend: &LocalBackend, runtime: &tokio::runtime::Runtime, lines: &[String]) {
    let mut run = 0;
    // Distinct windows of the Java, each after a line of its own.
    let mut cards = |tokens: usize| {
        run += 1;
        (0..CARDS)
            .map(|card| {
                let start = card * lines.len() / CARDS;
                let java = java(backend, lines, start, tokens);
                format!("// run {run}, card {card}\n{java}")
            })
            .collect::<Vec<_>>()
    };
    let all = |requests: Vec<CompletionRequest>| {
        let started = Instant::now();
        let done = runtime.block_on(join_all(
            requests
                .iter()
                .map(|request| backend.complete(request, None)),
        ));
        let generated: usize = done
            .into_iter()
            .flat_map(Result::unwrap)
            .map(|c| backend.model().count_tokens(&c.text).unwrap())
            .sum();
        (started.elapsed(), generated)
    };
    let requests = |prompts: Vec<String>| {
        prompts
            .into_iter()
            .map(|prompt| request(prompt, CARD_TOKENS))
            .collect::<Vec<_>>()
    };
    let mut times = Vec::new();
    let mut generated = 0;
    let before = backend.model().decoded();
    for _ in 0..runs() {
        let (time, tokens) = all(requests(cards(PROMPT_TOKENS)));
        times.push(time);
        generated = tokens;
    }
    let decoded = backend.model().decoded();
    let (steps, tokens) = (decoded.steps - before.steps, decoded.tokens - before.tokens);
    let prompt_tokens: usize = cards(PROMPT_TOKENS)
        .iter()
        .map(|p| backend.model().count_tokens(p).unwrap())
        .sum();
    println!(
        "together    {CARDS} prompts ({prompt_tokens} tokens), {CARD_TOKENS} tokens each \
         ({generated} written): {:.2} s until all are done; {:.1} rows a step",
        median(times).as_secs_f64(),
        tokens as f64 / steps.max(1) as f64
    );
    let mut times = Vec::new();
    for _ in 0..runs() {
        let sampled = CompletionRequest {
            n: CARDS,
            temperature: 0.8,
            seed: Some(1),
            ..request(cards(PROMPT_TOKENS).remove(0), CARD_TOKENS)
        };
        times.push(all(vec![sampled]).0);
    }
    println!(
        "samples     {CARDS} samples of one prompt, {CARD_TOKENS} tokens each: {:.2} s",
        median(times).as_secs_f64()
    );
    for width in WIDTHS {
        // Short prompts (the first lines of each window), so that decoding is the time.
        let prompts: Vec<String> = (0..width)
            .map(|n| {
                let start = n * lines.len() / width;
                format!("// width {width}, {n}\n{}", java(backend, lines, start, 32))
            })
            .collect();
        let before = backend.model().decoded();
        let (time, _) = all(requests(prompts));
        let decoded = backend.model().decoded();
        let tokens = decoded.tokens - before.tokens;
        let steps = decoded.steps - before.steps;
        println!(
            "width {width}     {tokens} tokens in {steps} steps, {:.1} ms a step, {:.1} tokens/s",
            time.as_secs_f64() * 1000.0 / steps.max(1) as f64,
            tokens as f64 / time.as_secs_f64()
        );
    }
    #[cfg(feature = "http")]
    if let Ok(url) = std::env::var("KEYHOLE_BENCH_SERVER") {
        let times: Vec<Duration> = (0..runs())
            .map(|_| server(runtime, &url, &cards(PROMPT_TOKENS)))
            .collect();
        println!(
            "server      the same {CARDS} prompts on {url}: {:.2} s until all are done",
            median(times).as_secs_f64()
        );
    }
}

/// The time llama-server at `url` takes to complete `prompts` sent together, `CARD_TOKENS`
/// tokens each, greedy, its prompt cache off.
#[cfg(feature = "http")]
fn server(runtime: &tokio::runtime::Runtime, url: &str, prompts: &[String]) -> Duration {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let sent = prompts.iter().map(|prompt| {
        let body = serde_json::json!({
            "prompt": prompt,
            "n_predict": CARD_TOKENS,
            "temperature": 0.0,
            "cache_prompt": false,
        });
        let request = client.post(format!("{url}/completion")).json(&body).send();
        async move {
            let answer: serde_json::Value = request.await.unwrap().json().await.unwrap();
            assert!(answer["content"].is_string(), "{answer}");
        }
    });
    runtime.block_on(join_all(sent));
    started.elapsed()
}

/// Compares keyhole's greedy tokens on a short prompt with candle-transformers' llama on the
/// file's matrices as f32 (what keyhole ran for small models before its own forward pass).
fn check(path: &Path, text: &str, runtime: &tokio::runtime::Runtime) {
    let short: String = text.lines().take(12).map(|l| format!("{l}\n")).collect();
    let greedy = request(short, CHECKED);
    let backend = |matrices| {
        LocalBackend::open(&BackendConfig {
            matrices: Some(matrices),
            ..BackendConfig::local(path.to_path_buf())
        })
        .unwrap()
    };
    let as_f32 = backend(Matrices::F32);
    let (ids, _) = as_f32.model().prompt_ids(&greedy, CHECKED).unwrap();
    let mut reference = reference(path);
    let expected = as_f32
        .model()
        .decode(&reference_greedy(&mut reference, &ids, CHECKED))
        .unwrap();
    let (long, _) = as_f32
        .model()
        .prompt_ids(&request(text.into(), 1), 1)
        .unwrap();
    let reference_time = median(
        (0..runs())
            .map(|_| reference_prefill(&mut reference, &long))
            .collect(),
    );
    drop(reference);
    let complete = |backend: &LocalBackend| {
        runtime
            .block_on(backend.complete(&greedy, None))
            .unwrap()
            .remove(0)
            .text
    };
    let f32_text = complete(&as_f32);
    drop(as_f32);
    let auto_text = complete(&backend(Matrices::Auto));
    let same_start = |text: &str| {
        let common = text
            .chars()
            .zip(expected.chars())
            .take_while(|(a, b)| a == b)
            .count();
        format!("{common} of {} characters", expected.chars().count())
    };
    println!(
        "check       {} prompt tokens, {CHECKED} greedy tokens against candle-transformers (f32):",
        ids.len()
    );
    println!("            all f32: same first {}", same_start(&f32_text));
    println!(
        "            prompt f32, tokens quantized (the default): same first {}",
        same_start(&auto_text)
    );
    println!(
        "reference   candle-transformers (f32) reads the {}-token prompt in {:.2} s: {:.1} tokens/s",
        long.len(),
        reference_time.as_secs_f64(),
        long.len() as f64 / reference_time.as_secs_f64()
    );
}

/// candle-transformers' llama on the file at `path`, its matrices as f32.
fn reference(path: &Path) -> quantized_llama::ModelWeights {
    let device = Device::Cpu;
    let mut file = std::fs::File::open(path).unwrap();
    let content = Content::read(&mut file).unwrap();
    let mut tensors = Vec::new();
    for (name, info) in &content.tensor_infos {
        let tensor = info
            .read(&mut file, content.tensor_data_offset, &device)
            .unwrap();
        let tensor = match info.shape.dims().len() {
            2 => QTensor::quantize(&tensor.dequantize(&device).unwrap(), GgmlDType::F32).unwrap(),
            _ => tensor,
        };
        tensors.push((name.as_str(), tensor));
    }
    let metadata: Vec<_> = content
        .metadata
        .iter()
        .filter(|(key, _)| key.as_str() != "general.alignment")
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &metadata, &refs).unwrap();
    drop(tensors);
    bytes.rewind().unwrap();
    let content = Content::read(&mut bytes).unwrap();
    quantized_llama::ModelWeights::from_gguf(content, &mut bytes, &device).unwrap()
}

/// The most likely token after `ids` fed at `position`.
fn reference_next(model: &mut quantized_llama::ModelWeights, ids: &[u32], position: usize) -> u32 {
    let input = Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let logits = model.forward(&input, position).unwrap().squeeze(0).unwrap();
    logits.argmax(0).unwrap().to_scalar::<u32>().unwrap()
}

/// `count` greedy tokens after `prompt`.
fn reference_greedy(
    model: &mut quantized_llama::ModelWeights,
    prompt: &[u32],
    count: usize,
) -> Vec<u32> {
    model.clear_kv_cache();
    let mut tokens = vec![reference_next(model, prompt, 0)];
    while tokens.len() < count {
        let position = prompt.len() + tokens.len() - 1;
        let next = reference_next(model, &[*tokens.last().unwrap()], position);
        tokens.push(next);
    }
    tokens
}

/// The time candle-transformers' llama takes to read `prompt` (512 tokens at a time, as
/// keyhole fed it).
fn reference_prefill(model: &mut quantized_llama::ModelWeights, prompt: &[u32]) -> Duration {
    model.clear_kv_cache();
    let started = Instant::now();
    for (index, chunk) in prompt.chunks(512).enumerate() {
        reference_next(model, chunk, index * 512);
    }
    started.elapsed()
}
