//! `keyhole backends`, and the `--backend` arguments every command that completes takes.

use anyhow::{Context, Result};
use clap::Args;
use futures_util::future::join_all;

use super::dirs;
use keyhole::model;
use keyhole::model::config::{self, BackendConfig};
use keyhole::model::secret;
use keyhole::session::{Choices, Settings};

/// Which backend to use, with overrides of its configured settings.
#[derive(Args)]
pub struct BackendArgs {
    /// Backend name from backends.toml (`keyhole backends` lists them).
    #[arg(long, default_value = config::EMBEDDED)]
    backend: String,
    /// Override the backend's base URL.
    #[arg(long)]
    url: Option<String>,
    /// Override the backend's model.
    #[arg(long)]
    model: Option<String>,
    /// Most tokens to generate.
    #[arg(long, value_parser = super::bounds::generated_tokens)]
    max_tokens: Option<usize>,
    /// Run this GGUF model file in-process (a one-off local backend, or the path of the
    /// local backend named by --backend).
    #[arg(long, value_name = "FILE")]
    model_path: Option<std::path::PathBuf>,
}

impl Default for BackendArgs {
    /// The embedded backend as configured.
    fn default() -> Self {
        BackendArgs {
            backend: config::EMBEDDED.to_string(),
            url: None,
            model: None,
            max_tokens: None,
            model_path: None,
        }
    }
}

/// The configured backend entries (the embedded one first).
fn configured() -> Result<Vec<BackendConfig>> {
    Ok(Settings::resolve(&Choices::default(), dirs().clone())?.backends)
}

/// How long `keyhole backends` waits for each server to list its models.
const CHECK_SECS: u64 = 5;

/// One configured backend as `keyhole backends` reports it.
#[derive(serde::Serialize)]
struct BackendOut {
    name: String,
    kind: &'static str,
    /// The server's URL (credentials masked) or the model file's path.
    location: Option<String>,
    model: Option<String>,
    /// The environment variable holding the key, and whether it is set (never the key).
    key_env: Option<String>,
    key_set: bool,
    #[serde(flatten)]
    check: Check,
}

/// Whether a backend can be used now.
#[derive(serde::Serialize)]
struct Check {
    /// `ready` (answers, or needs no server), `down` (a server that does not answer, a model
    /// file that is not there) or `unusable` (its configuration cannot work).
    status: &'static str,
    /// What was found, on one line (limits advice on the lines after).
    detail: String,
    /// The models its server lists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    models: Vec<String>,
}

impl Check {
    fn new(status: &'static str, detail: impl Into<String>) -> Check {
        Check {
            status,
            detail: detail.into(),
            models: Vec::new(),
        }
    }
}

/// `keyhole backends`: the table (or JSON), then exit 2 when a configured server is down.
pub fn backends_command(json: bool) -> Result<()> {
    let config_file = dirs().config_file(config::BACKENDS_FILE);
    let backends = configured()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let checks = runtime.block_on(join_all(backends.iter().map(check_server)));
    let out: Vec<BackendOut> = backends
        .iter()
        .zip(checks)
        .map(|(b, check)| BackendOut {
            name: b.name.clone(),
            kind: b.kind.name(),
            location: match (&b.base_url, &b.path) {
                (Some(url), _) => Some(secret::shown_url(url)),
                (None, Some(path)) => {
                    Some(keyhole::escape::controls(&path.display().to_string()).into_owned())
                }
                (None, None) => None,
            },
            model: b.model.clone(),
            key_env: b.api_key_env.clone(),
            key_set: b
                .api_key_env
                .as_ref()
                .is_some_and(|var| std::env::var_os(var).is_some()),
            check,
        })
        .collect();
    if json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if let Some(path) = config_file {
            outln!("config  {}", path.display());
        }
        for b in &out {
            let key = match &b.key_env {
                Some(var) if b.key_set => format!("key from ${var} (set)"),
                Some(var) => format!("key from ${var} (NOT set)"),
                None => "no key".to_string(),
            };
            let location = b.location.as_deref().unwrap_or("-");
            let model = b.model.as_deref().unwrap_or("-");
            outln!(
                "{:<16} {:<12} {location:<32} {model:<24} {key}",
                b.name,
                b.kind
            );
            // A server's own words may be in it.
            outln!("{:<16} {}", "", keyhole::escape::controls(&b.check.detail));
        }
    }
    let down: Vec<&str> = out
        .iter()
        .filter(|b| b.check.status != "ready")
        .map(|b| b.name.as_str())
        .collect();
    if !down.is_empty() {
        anyhow::bail!("not ready: {} (see above)", down.join(", "));
    }
    Ok(())
}

/// Whether a backend's server answers, and which models it lists (the configured one
/// flagged when it is not among them).
async fn check_server(entry: &BackendConfig) -> Check {
    match (entry.kind, &entry.path) {
        (config::BackendKind::Embedded, _) => {
            return Check::new("ready", "built in: needs no server");
        }
        (config::BackendKind::Local, Some(path)) if path.is_file() => {
            return Check::new("ready", "runs in-process: the model file is there");
        }
        (config::BackendKind::Local, _) => {
            return Check::new("down", "runs in-process: NO model file at its path");
        }
        _ => {}
    }
    let quick = BackendConfig {
        deadline_secs: entry.deadline_secs.min(CHECK_SECS),
        retries: 0,
        ..entry.clone()
    };
    let backend = match model::http::build_http(&quick) {
        Ok(backend) => backend,
        Err(e) => return Check::new("unusable", format!("not usable: {e}")),
    };
    let mut check = match backend.models().await {
        Some(Ok(models)) => {
            let missing = entry
                .model
                .as_ref()
                .filter(|m| !models.is_empty() && !models.contains(m))
                .map(|m| format!(" (NOT {m})"))
                .unwrap_or_default();
            let detail = format!(
                "answers; serves {}: {}{missing}",
                models.len(),
                models.join(", ")
            );
            Check {
                status: "ready",
                detail,
                models,
            }
        }
        Some(Err(e)) => Check::new("down", format!("no answer to the model list: {e}")),
        None => Check::new("ready", "answers nothing about its models"),
    };
    // What the server takes at once, and where keyhole's settings for it go beyond.
    if let Some(Ok(limits)) = backend.limits().await {
        let max_tokens = entry.max_tokens.unwrap_or(model::DEFAULT_MAX_TOKENS);
        let budget = keyhole::compose::DEFAULT_BUDGET;
        let advice = limits.advice(&entry.name, entry.concurrency, budget, max_tokens);
        check.detail = format!(
            "{}; {} slot(s) of {} tokens",
            check.detail, limits.slots, limits.context_per_slot
        );
        for advice in advice {
            check.detail += &format!("\n      {advice}");
        }
    }
    check
}

impl BackendArgs {
    /// The backend entry `backend` with the model and token limit a recorded run used.
    pub fn recorded(
        backend: &str,
        model: Option<String>,
        max_tokens: Option<usize>,
    ) -> BackendArgs {
        BackendArgs {
            backend: backend.to_string(),
            model,
            max_tokens,
            ..BackendArgs::default()
        }
    }

    /// Put these choices into `choices`.
    pub fn choose(&self, choices: &mut Choices) {
        choices.backend = Some(self.backend.clone());
        choices.url.clone_from(&self.url);
        choices.model.clone_from(&self.model);
        choices.max_tokens = self.max_tokens;
        choices.model_path.clone_from(&self.model_path);
    }
}
