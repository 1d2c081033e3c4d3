//! Latency of typed holes answered by `typescript-language-server` on a real repository (the
//! figures in BENCHMARKS.md): the server's start, the first hole (the project loads), then
//! every later hole. Holes sit after `return ` in the repository's `.ts` files.
//!
//! `PATH=target/lsp/node_modules/.bin:$PATH cargo run --release --example typed_server_latency
//! -- REPO [HOLES]`

use std::path::Path;
use std::time::{Duration, Instant};

use keyhole::Hole;
use keyhole::RepoIndex;
use keyhole::testing::context::typed_server;
use keyhole::{testing::lsp, testing::lsp::Client, testing::lsp::Timeouts};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let root = Path::new(args.get(1).map_or(".", String::as_str)).canonicalize()?;
    let wanted: usize = args.get(2).map_or(Ok(50), |n| n.parse())?;
    let index = RepoIndex::open(&root, None)?;
    let files: Vec<&str> = index
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| p.ends_with(".ts") && !p.ends_with(".d.ts"))
        .collect();
    let mut holes = Vec::new();
    for path in &files {
        let text = &index.files[index.file_id(path).expect("indexed")].text;
        for (at, _) in text.match_indices("return ") {
            let before = &text[..at + "return ".len()];
            let line = before.matches('\n').count() + 1;
            let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
                .chars()
                .count()
                + 1;
            holes.push(Hole::at(&index, path, line, column)?);
        }
    }
    holes.truncate(wanted);
    let spec = &lsp::TYPESCRIPT;
    let program = lsp::find_on_path(spec.command, &std::env::var_os("PATH").unwrap_or_default())
        .ok_or_else(|| format!("{} is not on PATH", spec.command))?;
    let started = Instant::now();
    let mut client = Client::start(spec.command, &program, spec, &root, Timeouts::default())?;
    let start = started.elapsed();
    let mut times = Vec::new();
    let (mut typed, mut definitions, mut headers) = (0, 0, 0);
    for hole in &holes {
        let asked = Instant::now();
        let answer = typed_server::ask(&mut client, spec, &index, hole)?;
        times.push(asked.elapsed());
        typed += usize::from(answer.expected.is_some());
        definitions += answer.definitions.len();
        headers += answer.headers.len();
    }
    let first = times.first().copied().unwrap_or_default();
    let mut later: Vec<Duration> = times.iter().skip(1).copied().collect();
    later.sort();
    let at = |q: f64| later.get(((later.len() as f64 - 1.0) * q).round() as usize);
    println!(
        "{} .ts files, {} holes; start (initialize) {:.0} ms; first hole {:.0} ms",
        files.len(),
        holes.len(),
        ms(start),
        ms(first)
    );
    if let (Some(p50), Some(p90), Some(max)) = (at(0.5), at(0.9), later.last()) {
        println!(
            "later holes: median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
            ms(*p50),
            ms(*p90),
            ms(*max)
        );
    }
    println!(
        "holes with an expected type {typed}/{}; definitions {definitions}; headers {headers}",
        holes.len()
    );
    Ok(())
}
