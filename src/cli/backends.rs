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

pub fn backends_command() -> Result<()> {
    if let Some(path) = dirs().config_file(config::BACKENDS_FILE) {
        outln!("config  {}", path.display());
    }
    let backends = configured()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let checks = runtime.block_on(join_all(backends.iter().map(check_server)));
    for (b, check) in backends.iter().zip(checks) {
        let key = match &b.api_key_env {
            Some(var) if std::env::var_os(var).is_some() => format!("key from ${var} (set)"),
            Some(var) => format!("key from ${var} (NOT set)"),
            None => "no key".to_string(),
        };
        let url = match (&b.base_url, &b.path) {
            (Some(url), _) => secret::shown_url(url),
            (None, Some(path)) => {
                keyhole::escape::controls(&path.display().to_string()).into_owned()
            }
            (None, None) => "-".into(),
        };
        let model = b.model.as_deref().unwrap_or("-");
        outln!(
            "{:<16} {:<12} {url:<32} {model:<24} {key}",
            b.name,
            b.kind.name()
        );
        outln!("{:<16} {check}", "");
    }
    Ok(())
}

/// Whether a backend's server answers, and which models it lists (the configured one
/// flagged when it is not among them), on one line.
async fn check_server(entry: &BackendConfig) -> String {
    match (entry.kind, &entry.path) {
        (config::BackendKind::Embedded, _) => return "built in: needs no server".into(),
        (config::BackendKind::Local, Some(path)) if path.is_file() => {
            return "runs in-process: the model file is there".into();
        }
        (config::BackendKind::Local, _) => {
            return "runs in-process: NO model file at its path".into();
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
        Err(e) => return format!("not usable: {e}"),
    };
    let models = match backend.models().await {
        Some(Ok(models)) => {
            let missing = entry
                .model
                .as_ref()
                .filter(|m| !models.is_empty() && !models.contains(m))
                .map(|m| format!(" (NOT {m})"))
                .unwrap_or_default();
            format!(
                "answers; serves {}: {}{missing}",
                models.len(),
                models.join(", ")
            )
        }
        Some(Err(e)) => format!("no answer to the model list: {e}"),
        None => "answers nothing about its models".into(),
    };
    // What the server takes at once, and where keyhole's settings for it go beyond.
    match backend.limits().await {
        Some(Ok(limits)) => {
            let max_tokens = entry.max_tokens.unwrap_or(model::DEFAULT_MAX_TOKENS);
            let budget = keyhole::compose::DEFAULT_BUDGET;
            let advice = limits.advice(&entry.name, entry.concurrency, budget, max_tokens);
            let mut line = format!(
                "{models}; {} slot(s) of {} tokens",
                limits.slots, limits.context_per_slot
            );
            for advice in advice {
                line += &format!("\n      {advice}");
            }
            line
        }
        _ => models,
    }
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
