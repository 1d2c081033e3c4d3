//! `keyhole proxy` (between an editor's completion plugin and its model server) and
//! `keyhole recorded` (what the plugin sent through it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::dirs;
use keyhole::escape;
use keyhole::model::secret;
use keyhole::proxy::ab;
use keyhole::proxy::{self, Access, Bounds, Compose, Exchange, Proxy, RecordStore, Upstream};
use keyhole::rank::RankerKind;
use keyhole::session::{Choices, ComposingRepo, SessionError, Settings};

#[derive(Args)]
pub struct ProxyArgs {
    /// Address to listen on; point the plugin's server URL here.
    #[arg(long, default_value = "127.0.0.1:8012")]
    listen: SocketAddr,
    /// Listen on an address other machines can reach (--listen 0.0.0.0:8012): they can then
    /// use the server, and its API key, through the proxy.
    #[arg(long)]
    allow_remote: bool,
    /// Serve requests from web pages of this origin (`http://localhost:3000`); requests from
    /// any other page are refused. May be given more than once.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// The model server: a URL (`http://127.0.0.1:8080`) or a backend's name in backends.toml.
    #[arg(long, value_name = "URL|BACKEND")]
    to: String,
    /// Record nothing.
    #[arg(long)]
    no_log: bool,
    /// Seconds a request's headers may take, counted from the connection's opening or its
    /// previous request's end (so also how long an idle connection is kept).
    #[arg(long, default_value_t = Bounds::default().header_timeout.as_secs(), value_name = "SECS")]
    header_timeout: u64,
    /// Seconds a request's body may take after its headers.
    #[arg(long, default_value_t = Bounds::default().body_timeout.as_secs(), value_name = "SECS")]
    body_timeout: u64,
    /// Seconds a client may take nothing of its answer before it is cut off.
    #[arg(long, default_value_t = Bounds::default().idle_timeout.as_secs(), value_name = "SECS")]
    idle_timeout: u64,
    /// Connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = Bounds::default().max_connections, value_name = "N")]
    max_connections: usize,
    /// The most the record store keeps, in MiB, shared by every proxy recording there; the
    /// oldest exchanges go first, and one exchange takes at most a quarter.
    #[arg(long, default_value_t = proxy::DEFAULT_MAX_BYTES >> 20, value_name = "MIB")]
    log_max_mib: u64,
    /// Send keyhole's context for each fill-in-the-middle request whose hole is in --repo (the
    /// ranker's first candidate, within the model's room) in place of the plugin's; anything
    /// else goes as sent, and the record says why.
    #[arg(long, requires = "repo")]
    compose: bool,
    /// The repository the plugin edits (with --compose).
    #[arg(long, value_name = "REPO")]
    repo: Option<PathBuf>,
    /// The most milliseconds composing may add to a request; past it the request goes as the
    /// plugin sent it.
    #[arg(long, default_value_t = 150, value_name = "MS")]
    compose_deadline_ms: u64,
    /// The share of the requests keyhole can compose for that get keyhole's prompt; the rest
    /// get the plugin's own (an A/B: `keyhole recorded stats` compares what was accepted).
    #[arg(long, default_value_t = 1.0, value_name = "P", requires = "compose", value_parser = super::bounds::share)]
    compose_share: f64,
    /// Which ranker chooses keyhole's context: rlpg-h (the bundled classifier, or the one
    /// `keyhole tune` made for the backend), rlpg-r, bm25, fixed, online (moved by the
    /// completions kept and dropped).
    #[arg(long, default_value = "rlpg-h", requires = "compose")]
    ranker: RankerKind,
}

#[derive(Subcommand)]
pub enum RecordedCommand {
    /// One line per recorded completion request, newest last (in the UI, R lists them and
    /// opens one; `keyhole REPO --recorded N` opens request N).
    List {
        #[arg(long)]
        json: bool,
    },
    /// What one request sent and what came back; with --repo, where its hole is in that
    /// repository and where each piece of what was sent came from.
    Show {
        /// Its number (`keyhole recorded list`).
        id: u64,
        /// The repository the plugin was editing.
        #[arg(long)]
        repo: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The A/B of `proxy --compose --compose-share`: per repository and backend, how often
    /// each arm's completions were accepted (with a 95% interval), the difference keyhole −
    /// plugin, and the characters accepted. Outcomes not yet inferred are inferred and kept.
    Stats {
        /// Only this repository's requests; its files on disk decide outcomes the requests
        /// left unknown.
        #[arg(long)]
        repo: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

pub fn proxy_command(args: &ProxyArgs) -> Result<()> {
    let upstream = upstream(&args.to)?;
    let dir = match (args.no_log, log_dir()) {
        (true, _) => None,
        (false, Some(dir)) => Some(dir),
        (false, None) => bail!("no data directory to record in; give --no-log"),
    };
    let shown = secret::shown_url(upstream.base.as_str());
    if !args.listen.ip().is_loopback() {
        if !args.allow_remote {
            bail!(
                "--listen {}: other machines can reach that address and would use {shown} through the proxy; give --allow-remote to listen there anyway",
                args.listen
            );
        }
        let key = match &upstream.api_key {
            Some(_) => format!(" with backend {}'s API key", args.to),
            None => String::new(),
        };
        escape::warn(&format!(
            "listening on {}: any machine that reaches it can use {shown}{key} through the proxy",
            args.listen
        ));
    }
    // Resolved before any thread starts; the repository opens while the proxy serves.
    let composing = match (&args.repo, args.compose) {
        (Some(repo), true) => Some((repo, composing_settings(repo, &args.to, args.ranker)?)),
        (Some(_), false) => bail!("--repo is for --compose; give --compose too"),
        _ => None,
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Listening first: a plugin's requests wait in the queue while the store opens (and
        // moves in an earlier version's log), however large it is.
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("--listen {}: cannot listen there", args.listen))?;
        let address = listener.local_addr().unwrap_or(args.listen);
        let store = match &dir {
            Some(dir) => Some(
                RecordStore::open(dir, args.log_max_mib.max(1) << 20)
                    .with_context(|| format!("cannot open the record in {}", dir.display()))?,
            ),
            None => None,
        };
        let recording = match &store {
            Some(store) => format!("recording to {}", store.dir().display()),
            None => "recording nothing".to_string(),
        };
        let access = Access {
            listen: address,
            allowed_origins: args.allow_origin.clone(),
        };
        let bounds = Bounds {
            header_timeout: Duration::from_secs(args.header_timeout.max(1)),
            body_timeout: Duration::from_secs(args.body_timeout.max(1)),
            idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
            max_connections: args.max_connections.max(1),
        };
        let mut proxy = Proxy::new(upstream, store, access, bounds)?;
        if let Some((repo, settings)) = &composing {
            // Escaped where it is printed, as everything on standard error is.
            let shown_repo = repo.display().to_string();
            errln!("keyhole proxy: http://{address} -> {shown}, {recording}, composing in {shown_repo} once it is open");
            let announce = move |opened: Result<usize, Arc<SessionError>>| match opened {
                // Said from the opening's thread: a closed standard error has nothing to stop.
                Ok(files) => {
                    let _ = crate::cli::write_err(format_args!(
                        "keyhole proxy --compose: {shown_repo} is open ({files} files)"
                    ));
                }
                Err(why) => escape::warn(&format!(
                    "proxy --compose: cannot open {shown_repo}, so requests go as sent: {why}"
                )),
            };
            proxy = proxy.composing(Compose {
                source: Arc::new(ComposingRepo::open(repo, settings.clone(), announce)),
                deadline: Duration::from_millis(args.compose_deadline_ms),
                share: args.compose_share,
                seed: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
                repo: repo_name(repo),
            });
        } else {
            errln!("keyhole proxy: http://{address} -> {shown}, {recording}");
        }
        let proxy = Arc::new(proxy);
        // Until interrupted: every exchange is in the store once it ends.
        proxy.serve(listener).await;
        Ok(())
    })
}

/// `--compose --repo REPO`: the settings the repository opens with, the backend `--to` names
/// (its tuned classifier, where it has one).
fn composing_settings(repo: &std::path::Path, to: &str, ranker: RankerKind) -> Result<Settings> {
    if !repo.is_dir() {
        bail!(
            "--repo {}: not a directory",
            escape::controls(&repo.display().to_string())
        );
    }
    let choices = Choices {
        backend: (!to.contains("://")).then(|| to.to_string()),
        ranker: Some(ranker),
        ..Choices::default()
    };
    super::hole::settings(&choices)
}

/// How the record names a repository: its absolute path, where it has one.
fn repo_name(repo: &std::path::Path) -> String {
    std::fs::canonicalize(repo)
        .unwrap_or_else(|_| repo.to_path_buf())
        .display()
        .to_string()
}

/// `--to`: a URL as given, or a configured server backend's URL and key.
fn upstream(to: &str) -> Result<Upstream> {
    if to.contains("://") {
        let base = url::Url::parse(to)
            .with_context(|| format!("--to {}: not a URL", secret::shown_url(to)))?;
        return Ok(Upstream {
            base,
            api_key: None,
        });
    }
    let choices = Choices {
        backend: Some(to.to_string()),
        ..Choices::default()
    };
    let settings = Settings::resolve(&choices, dirs().clone())?;
    let backend = settings.backend();
    let Some(url) = backend
        .base_url
        .as_deref()
        .filter(|_| backend.kind.is_http())
    else {
        bail!("--to {to}: not a server backend (give its URL, or a backend with a base_url)");
    };
    let base = url::Url::parse(url).with_context(|| {
        format!(
            "backend {to}: base_url {} is not a URL",
            secret::shown_url(url)
        )
    })?;
    let api_key = match &backend.api_key_env {
        Some(var) => Some(
            std::env::var(var)
                .with_context(|| format!("backend {to}: the API key variable {var} is not set"))?,
        ),
        None => None,
    };
    Ok(Upstream { base, api_key })
}

fn log_dir() -> Option<PathBuf> {
    proxy::log_dir(dirs())
}

pub fn recorded_command(command: &RecordedCommand) -> Result<()> {
    let (mut exchanges, unreadable) = match log_dir() {
        Some(dir) => proxy::read_log(&dir)?,
        None => (Vec::new(), 0),
    };
    if unreadable > 0 {
        errln!("keyhole: {unreadable} recorded lines could not be read and are left out");
    }
    match command {
        RecordedCommand::Stats { repo, json } => {
            stats_command(&mut exchanges, repo.as_deref(), *json)?;
        }
        RecordedCommand::List { json: true } => {
            outln!("{}", serde_json::to_string_pretty(&exchanges)?);
        }
        RecordedCommand::List { json: false } => {
            for e in &exchanges {
                outln!("{}", summary(e));
            }
        }
        RecordedCommand::Show { id, repo, json } => {
            let Some(exchange) = exchanges.iter().find(|e| e.id == *id) else {
                bail!("no recorded request {id} (keyhole recorded list shows them)");
            };
            let located = repo
                .as_deref()
                .map(|repo| locate(repo, exchange))
                .transpose()?;
            if *json {
                let mut value = serde_json::to_value(exchange)?;
                if let Some(located) = &located {
                    value["located"] = serde_json::to_value(located)?;
                }
                outln!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                show(exchange)?;
                if let Some(located) = &located {
                    show_located(located)?;
                }
            }
        }
    }
    Ok(())
}

/// `recorded stats`: the outcomes the store lacks inferred and kept, then the A/B counted.
fn stats_command(
    exchanges: &mut [Exchange],
    repo: Option<&std::path::Path>,
    json: bool,
) -> Result<()> {
    let repo = match repo {
        Some(repo) if !repo.is_dir() => bail!(
            "--repo {}: not a directory",
            escape::controls(&repo.display().to_string())
        ),
        Some(repo) => Some((repo, repo_name(repo))),
        None => None,
    };
    // The hole's file in --repo, as it is now.
    let disk = |exchange: &Exchange| {
        let (root, name) = repo.as_ref()?;
        let composition = exchange.composition.as_ref()?;
        if composition.repo.as_deref() != Some(name.as_str()) {
            return None;
        }
        let hole = composition.hole.as_deref()?;
        let file = hole.rsplitn(3, ':').last()?;
        let bytes = keyhole::repo::read_repo_file(root, std::path::Path::new(file), 64 << 20);
        bytes.ok().map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let found = ab::judge_recorded(exchanges, now, disk);
    if !found.is_empty()
        && let Some(dir) = log_dir()
    {
        let store = RecordStore::open(&dir, proxy::DEFAULT_MAX_BYTES)?;
        for (id, judged) in &found {
            store.set_judged(*id, *judged)?;
        }
    }
    for (id, judged) in found {
        if let Some(exchange) = exchanges.iter_mut().find(|e| e.id == id) {
            exchange.judged = Some(judged);
        }
    }
    let chosen: Vec<Exchange> = exchanges
        .iter()
        .filter(|e| {
            repo.as_ref().is_none_or(|(_, name)| {
                e.composition.as_ref().and_then(|c| c.repo.as_deref()) == Some(name.as_str())
            })
        })
        .cloned()
        .collect();
    let groups = proxy::stats(&chosen);
    if json {
        outln!("{}", serde_json::to_string_pretty(&groups)?);
        return Ok(());
    }
    if groups.is_empty() {
        outln!(
            "no requests in an arm of the A/B are recorded (keyhole proxy --compose --repo REPO --compose-share P records them)"
        );
    }
    let percent = |rate: f64| format!("{:.1}", rate * 100.0);
    for group in &groups {
        outln!(
            "{}  {}",
            escape::controls(&group.repository),
            escape::controls(&group.backend)
        );
        outln!(
            "  arm       requests  accepted  rejected  unknown  accepted % (95% CI)    chars accepted"
        );
        for arm in &group.arms {
            let rate = match (arm.rate, arm.interval) {
                (Some(rate), Some(i)) => {
                    format!("{} ({}-{})", percent(rate), percent(i.low), percent(i.high))
                }
                _ => "-".to_string(),
            };
            outln!(
                "  {:<8} {:>9} {:>9} {:>9} {:>8}  {rate:<22} {:>14}",
                arm.arm,
                arm.requests,
                arm.accepted,
                arm.rejected,
                arm.unknown,
                arm.accepted_chars
            );
        }
        match &group.difference {
            Some(d) => outln!(
                "  keyhole - plugin: {:+.1} points (95% CI {:+.1} to {:+.1})",
                d.rate * 100.0,
                d.interval.low * 100.0,
                d.interval.high * 100.0
            ),
            None => {
                outln!("  keyhole - plugin: - (an arm has no accepted or rejected completion yet)")
            }
        }
    }
    Ok(())
}

/// One line: number, who sent it, endpoint, status, time, the end of what was sent and the
/// answer; what the plugin and the server sent escaped, as everywhere.
fn summary(e: &Exchange) -> String {
    let before_cursor = e
        .sent
        .prompt
        .as_deref()
        .or(e.sent.prefix.as_deref())
        .or(e.sent.messages.last().map(|m| m.content.as_str()))
        .unwrap_or_default();
    let tail: String = last_line(before_cursor)
        .chars()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let composed = e.composition.as_ref().map(proxy::Composition::composed);
    let marks = [
        (e.cancelled, " (cancelled)"),
        (e.refused, " (refused)"),
        (e.sent.context_only(), " (context only)"),
        (e.request_cut || e.answer_cut, " (cut)"),
        (composed == Some(true), " (composed)"),
        (composed == Some(false), " (forwarded as sent)"),
    ];
    let outcome = e
        .judged
        .map_or(String::new(), |j| format!(" ({})", j.outcome.name()));
    let marks: String = marks
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, m)| *m)
        .chain([outcome.as_str()])
        .collect();
    format!(
        "{:>5}  {:<12.12} {:<22} {:>3} {:>8.1} ms{marks}  \"{}\" -> \"{}\"",
        e.id,
        escape::controls(e.sender()),
        escape::controls(&e.endpoint),
        e.status,
        e.total_ms,
        escape::controls(&tail),
        escape::controls(first_line(&e.answered.text)),
    )
}

fn last_line(text: &str) -> &str {
    text.rsplit('\n').next().unwrap_or(text)
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or(text)
}

/// Where a recorded request's hole is in a repository, and where what it sent came from.
#[derive(serde::Serialize)]
struct Located {
    places: Vec<proxy::Place>,
    provenance: Vec<proxy::Provenance>,
}

fn locate(repo: &std::path::Path, exchange: &Exchange) -> Result<Located> {
    let settings = super::hole::settings(&Choices::default())?;
    let session = keyhole::Session::open(repo, &settings)?;
    let places = proxy::hole_places(&session.index, &exchange.sent);
    // Where the pieces came from, the code around the cursor matched at the surest place.
    let provenance = proxy::provenance(&session.index, &exchange.sent, places.first());
    Ok(Located { places, provenance })
}

fn show_located(located: &Located) -> Result<()> {
    match located.places.as_slice() {
        [] => outln!("--- hole: not found in the repository ---"),
        [only] => outln!(
            "--- hole: {} ({}) ---",
            escape::controls(&only.position()),
            only.certainty.describe()
        ),
        many => {
            outln!("--- hole: {} places fit; the surest first ---", many.len());
            for place in many {
                outln!(
                    "  {} ({})",
                    escape::controls(&place.position()),
                    place.certainty.describe()
                );
            }
        }
    }
    outln!("--- where the pieces came from ---");
    for piece in &located.provenance {
        let from = match (piece.from.is_empty(), piece.framing_chars) {
            (true, _) => "no repository file: the plugin's own text".to_string(),
            (false, 0) => piece.from.join(", "),
            (false, framing) => format!(
                "{} (and {framing} chars of the plugin's own)",
                piece.from.join(", ")
            ),
        };
        outln!(
            "  {:<24} {:>6} chars  {}",
            escape::controls(&piece.piece),
            piece.chars,
            escape::controls(&from)
        );
    }
    Ok(())
}

fn show(e: &Exchange) -> Result<()> {
    let agent = e.agent.as_deref().map_or_else(String::new, |agent| {
        format!(" ({})", escape::controls(agent))
    });
    outln!(
        "request {}  {} {}  from {}{agent}  to {}",
        e.id,
        escape::controls(&e.method),
        escape::controls(&e.endpoint),
        escape::controls(&e.client),
        escape::controls(&e.upstream)
    );
    let first_byte = e
        .first_byte_ms
        .map_or("-".to_string(), |ms| format!("{ms:.1} ms"));
    outln!(
        "status {}  first byte {first_byte}  total {:.1} ms{}",
        e.status,
        e.total_ms,
        if e.cancelled {
            "  cancelled by the client"
        } else {
            ""
        }
    );
    if let Some(error) = &e.error {
        outln!("error  {}", escape::controls(error));
    }
    // Bodies keep their lines; names and every other control character are escaped.
    for chunk in &e.sent.extra {
        outln!(
            "--- extra chunk: {} ---\n{}",
            escape::controls(&chunk.filename),
            escape::lines(&chunk.text)
        );
    }
    for message in &e.sent.messages {
        outln!(
            "--- {} ---\n{}",
            escape::controls(&message.role),
            escape::lines(&message.content)
        );
    }
    let pieces = [
        ("prefix", &e.sent.prefix),
        ("prompt", &e.sent.prompt),
        ("suffix", &e.sent.suffix),
    ];
    for (name, text) in pieces {
        if let Some(text) = text {
            outln!("--- {name} ---\n{}", escape::lines(text));
        }
    }
    if let Some(composition) = &e.composition {
        show_composition(composition)?;
    }
    if let Some(judged) = &e.judged {
        outln!(
            "--- outcome: {} ({} characters kept), in {}'s arm ---",
            judged.outcome.name(),
            judged.accepted_chars,
            e.composition
                .as_ref()
                .and_then(|c| c.arm)
                .map_or("no", ab::Arm::name)
        );
    }
    if let Some(body) = &e.sent.body {
        outln!(
            "--- body{} ---\n{body}",
            cut_note(e.request_cut, e.request_bytes)
        );
    }
    if !e.sent.parameters.is_empty() {
        // JSON escapes the C0 controls in strings, not DEL nor the C1 ones.
        let parameters = serde_json::to_string(&e.sent.parameters)?;
        outln!("--- parameters ---\n{}", escape::controls(&parameters));
    }
    let tokens = match (e.answered.prompt_tokens, e.answered.answer_tokens) {
        (None, None) => String::new(),
        (p, a) => format!(
            " (prompt {} tokens, answer {} tokens)",
            p.map_or("?".into(), |n| n.to_string()),
            a.map_or("?".into(), |n| n.to_string())
        ),
    };
    outln!(
        "--- answer{tokens}{} ---\n{}",
        cut_note(e.answer_cut, e.answer_bytes),
        escape::lines(&e.answered.text)
    );
    Ok(())
}

/// What `--compose` sent in place of the plugin's prompt, or why it sent the plugin's.
fn show_composition(composition: &proxy::Composition) -> Result<()> {
    let Some(instead) = composition.sent.as_ref().filter(|_| composition.composed()) else {
        let why = composition.forwarded_because.as_deref().unwrap_or_default();
        outln!(
            "--- composed: no, forwarded as sent ({:.1} ms): {} ---",
            composition.compose_ms,
            escape::controls(why)
        );
        return Ok(());
    };
    outln!(
        "--- composed: keyhole sent candidate {} ({}) for {}, {} context tokens, in {:.1} ms ---",
        composition.candidate.unwrap_or_default(),
        escape::controls(composition.label.as_deref().unwrap_or_default()),
        escape::controls(composition.hole.as_deref().unwrap_or_default()),
        composition.context_tokens.unwrap_or_default(),
        composition.compose_ms
    );
    for chunk in &instead.extra {
        outln!(
            "--- keyhole sent instead: extra chunk: {} ---\n{}",
            escape::controls(&chunk.filename),
            escape::lines(&chunk.text)
        );
    }
    if instead.prefix.is_none()
        && let Some(prompt) = &instead.prompt
    {
        outln!(
            "--- keyhole sent instead: prompt ---\n{}",
            escape::lines(prompt)
        );
    }
    Ok(())
}

/// What a heading says of a body only the start of which was kept.
fn cut_note(cut: bool, bytes: u64) -> String {
    match cut {
        true => format!(" (cut: {bytes} bytes came, the start kept)"),
        false => String::new(),
    }
}
