//! Whole-repository and per-hole latency, printed as a table (see BENCHMARKS.md).
//!
//! `cargo bench --bench latency` runs it on the bundled sample repository and on the repository
//! named by `KEYHOLE_BENCH_REPO` (default `/work/corpus/guava-libraries`), skipped with a note
//! when that directory is missing. Everything runs on a 2-thread rayon pool; whole-repository
//! timings are the median of 5 interleaved rounds after one untimed open. A breakdown of the index build is printed after the table,
//! measured with public APIs only (the steps `RepoIndex::open` takes, re-run one at a time).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ignore::WalkBuilder;
use keyhole::Fidelity;
use keyhole::TokenizerKind;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::proposals::build_all;
use keyhole::testing::lang;
use keyhole::{Composer, testing::compose::DefaultReading};
use keyhole::{RepoIndex, testing::repo::MAX_FILE_BYTES, testing::repo::RepoGraph};
use keyhole::{testing::hole::HoleColumn, testing::hole::sample_holes};
use rayon::prelude::*;

const THREADS: usize = 2;
const RUNS: usize = 5;
const HOLES: usize = 300;
const SEED: u64 = 9;
const ALLOCATION: usize = 2036;
const BUDGET: usize = 4072;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The walk `RepoIndex::open` does (src/repo/scan.rs) without its ignore files: hidden
/// entries left out, links not followed, entries sorted by their paths' bytes.
fn walk(root: &Path) -> Vec<PathBuf> {
    WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(true)
        .follow_links(false)
        .sort_by_file_path(|a, b| a.as_os_str().cmp(b.as_os_str()))
        .build()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_type().is_some_and(|t| t.is_file()) && lang::for_path(e.path()).is_some()
        })
        .map(|e| e.into_path())
        .collect()
}

/// Read, check and hash one file, as `RepoIndex::open` does.
fn read_hash(path: &Path) -> Option<(String, [u8; 32])> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let hash = *blake3::hash(text.as_bytes()).as_bytes();
    Some((text, hash))
}

struct Row {
    name: String,
    files: usize,
    lines: usize,
    parse: Duration,
    cold: Duration,
    warm: Duration,
    nocache: Duration,
    p50: Duration,
    p99: Duration,
    max: Duration,
    build_p50: Duration,
    build_p99: Duration,
    compose_p50: Duration,
    holes: usize,
    rss_mb: f64,
}

fn measure(name: &str, root: &Path) -> Row {
    eprintln!("[{name}] {}", root.display());

    // Whole-repository timings: cold (fresh empty cache), no cache, warm, bare parse. One
    // untimed open first warms the page cache and the rayon pool; then RUNS rounds, each timing
    // every variant once, so a burst of load from other processes hits all of them alike.
    let cache = tempfile::tempdir().expect("temp dir");
    let index = RepoIndex::open(root, Some(cache.path())).expect("open");
    let texts: Vec<&str> = index.files.iter().map(|f| &*f.text).collect();
    let (mut cold, mut nocache, mut warm, mut parse) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().expect("temp dir");
        let (t, fresh) = time(|| RepoIndex::open(root, Some(dir.path())).expect("open"));
        assert_eq!(fresh.cache.reused, 0);
        cold.push(t);
        drop((fresh, dir));

        let (t, fresh) = time(|| RepoIndex::open(root, None).expect("open"));
        nocache.push(t);
        drop(fresh);

        let (t, fresh) = time(|| RepoIndex::open(root, Some(cache.path())).expect("open"));
        assert_eq!(fresh.cache.parsed, 0, "warm open parsed files");
        warm.push(t);
        drop(fresh);

        let (t, trees) = time(|| {
            texts
                .par_iter()
                .map(|t| keyhole::testing::lang::java::parse(t).is_some())
                .filter(|&ok| ok)
                .count()
        });
        assert_eq!(trees, texts.len());
        parse.push(t);
    }
    let lines: usize = texts.iter().map(|t| t.lines().count()).sum();

    // Breakdown of the index build, each step re-run on its own (median of RUNS).
    let mut walk_t = Vec::new();
    let mut read_t = Vec::new();
    let mut extract_t = Vec::new();
    let mut graph_t = Vec::new();
    for _ in 0..RUNS {
        let (t, paths) = time(|| walk(&index.root));
        walk_t.push(t);
        let (t, read) = time(|| {
            paths
                .par_iter()
                .filter_map(|p| read_hash(p))
                .collect::<Vec<_>>()
        });
        read_t.push(t);
        drop(read);
        let (t, facts) = time(|| {
            texts
                .par_iter()
                .map(|t| lang::for_path(Path::new("A.java")).unwrap().extract(t))
                .collect::<Vec<_>>()
        });
        extract_t.push(t);
        drop(facts);
        let (t, graph) = time(|| RepoGraph::build(&index.root, &index.files));
        graph_t.push(t);
        drop(graph);
    }
    let (walk_m, read_m, extract_m, graph_m) = (
        median(walk_t),
        median(read_t),
        median(extract_t),
        median(graph_t),
    );
    let parse_m = median(parse.clone());
    let (cold_m, nocache_m, warm_m) = (
        median(cold.clone()),
        median(nocache.clone()),
        median(warm.clone()),
    );
    eprintln!("[{name}] breakdown (median of {RUNS}, {THREADS} threads):");
    eprintln!(
        "  walk (ignore crate, no ignore files)  {:>9.1} ms",
        ms(walk_m)
    );
    eprintln!(
        "  read + check + blake3 (parallel)      {:>9.1} ms",
        ms(read_m)
    );
    eprintln!(
        "  bare tree-sitter parse (parallel)     {:>9.1} ms",
        ms(parse_m)
    );
    eprintln!(
        "  parse + extract facts (parallel)      {:>9.1} ms",
        ms(extract_m)
    );
    eprintln!(
        "    of which extraction                 {:>9.1} ms",
        ms(extract_m.saturating_sub(parse_m))
    );
    eprintln!(
        "  graph build (RepoGraph::build)        {:>9.1} ms",
        ms(graph_m)
    );
    eprintln!(
        "  open, no cache                        {:>9.1} ms",
        ms(nocache_m)
    );
    eprintln!(
        "  open, cold (adds cache encode+write)  {:>9.1} ms",
        ms(cold_m)
    );
    eprintln!(
        "  open, warm                            {:>9.1} ms",
        ms(warm_m)
    );
    eprintln!(
        "  runs cold  {:?}",
        cold.iter().map(|d| ms(*d).round()).collect::<Vec<_>>()
    );
    eprintln!(
        "  runs warm  {:?}",
        warm.iter().map(|d| ms(*d).round()).collect::<Vec<_>>()
    );
    eprintln!(
        "  runs parse {:?}",
        parse.iter().map(|d| ms(*d).round()).collect::<Vec<_>>()
    );

    // Per-hole latency: all 62 proposals plus one composed prompt for each, single-threaded.
    let tokenizer = TokenizerKind::Code.tokenizer();
    let holes = sample_holes(&index, Some(HOLES), SEED, HoleColumn::TrimmedMiddle);
    let mut per_hole = Vec::with_capacity(holes.len());
    let mut build_only = Vec::with_capacity(holes.len());
    let mut compose_only = Vec::with_capacity(holes.len());
    for hole in &holes {
        let req = HoleRequest {
            index: &index,
            hole,
            tokenizer,
            allocation: ALLOCATION,
            fidelity: Fidelity::Paper,
            seed: 9,
        };
        let start = Instant::now();
        let proposals = build_all(&req);
        let built = start.elapsed();
        assert_eq!(proposals.len(), 62);
        let composer = Composer::new(&index, hole, tokenizer, BUDGET, DefaultReading::AsWritten);
        let mut tokens = 0;
        for p in &proposals {
            tokens += composer.compose(p).segments.len();
        }
        let total = start.elapsed();
        per_hole.push(total);
        build_only.push(built);
        compose_only.push(total - built);
        std::hint::black_box(tokens);
    }
    per_hole.sort();
    build_only.sort();
    compose_only.sort();
    let row = Row {
        name: name.to_string(),
        files: index.files.len(),
        lines,
        parse: parse_m,
        cold: cold_m,
        warm: warm_m,
        nocache: nocache_m,
        p50: percentile(&per_hole, 50.0),
        p99: percentile(&per_hole, 99.0),
        max: *per_hole.last().expect("some holes"),
        build_p50: percentile(&build_only, 50.0),
        build_p99: percentile(&build_only, 99.0),
        compose_p50: percentile(&compose_only, 50.0),
        holes: holes.len(),
        rss_mb: peak_rss_mb(),
    };
    drop(index);
    row
}

fn main() {
    // `cargo bench` passes `--bench`; no other arguments are understood.
    let sample = support::sample_repo();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .expect("rayon pool");
    let mut rows = vec![pool.install(|| measure("sample", &sample))];
    if let Some((name, corpus)) = support::large_repo() {
        rows.push(pool.install(|| measure(&name, &corpus)));
    }

    println!();
    println!(
        "{:<16} {:>6} {:>8} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "repo",
        "files",
        "lines",
        "parse ms",
        "cold ms",
        "x",
        "warm ms",
        "x",
        "nocache ms",
        "hole p50",
        "hole p99",
        "hole max",
        "build p50",
        "build p99",
        "comp p50",
        "RSS MB"
    );
    for r in &rows {
        println!(
            "{:<16} {:>6} {:>8} {:>10.1} {:>10.1} {:>6.2} {:>10.1} {:>6.3} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.0}",
            r.name,
            r.files,
            r.lines,
            ms(r.parse),
            ms(r.cold),
            r.cold.as_secs_f64() / r.parse.as_secs_f64(),
            ms(r.warm),
            r.warm.as_secs_f64() / r.parse.as_secs_f64(),
            ms(r.nocache),
            ms(r.p50),
            ms(r.p99),
            ms(r.max),
            ms(r.build_p50),
            ms(r.build_p99),
            ms(r.compose_p50),
            r.rss_mb
        );
    }
    println!();
    println!(
        "parse/cold/warm/nocache: median of {RUNS} runs on {THREADS} rayon threads; x = ratio to bare parse."
    );
    println!(
        "hole: build_all (allocation {ALLOCATION}) + compose of each of the 62 proposals (budget {BUDGET}), \
         one thread, over {} holes (seed {SEED}); build = build_all alone, comp = the 62 composes alone.",
        rows.iter()
            .map(|r| r.holes.to_string())
            .collect::<Vec<_>>()
            .join("/")
    );
    println!(
        "RSS MB: peak resident set (VmHWM) of this process after the row's repository; it only grows."
    );
}
