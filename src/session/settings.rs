//! What a person asked for ([`Choices`]: flags, the UI's options) becomes one resolved
//! [`Settings`] value here, with backends.toml and the defaults, and nowhere else; every
//! command, the UI and eval open their sessions from it (`open.rs`).

use std::path::PathBuf;

use super::Learning;
use super::tuned::{self, Tuned, TunedInfo};
use crate::compose::DEFAULT_BUDGET;
use crate::context::fidelity::Fidelity;
use crate::context::perspectives;
use crate::dirs::Dirs;
use crate::lsp;
use crate::model::config::{self, BackendConfig, BackendKind, ConfigError};
use crate::rank::RankerKind;
use crate::rank::classifier::{Classifier, ModelError};
use crate::repo::Vendored;
use crate::token::TokenizerKind;

/// What a person asked for, every choice optional (ripgrep's low-level arguments): the
/// command line's flags or the UI's options. [`Settings::resolve`] fills in the rest.
#[derive(Clone, Debug, Default)]
pub struct Choices {
    /// A backend's name in backends.toml [default: the embedded model].
    pub backend: Option<String>,
    /// Overrides of the chosen backend's base URL, model and tokens to generate.
    pub url: Option<String>,
    pub model: Option<String>,
    pub max_tokens: Option<usize>,
    /// A GGUF file to run in-process: a one-off local backend, or the path of the local
    /// backend `backend` names.
    pub model_path: Option<PathBuf>,
    /// The tokenizer budgets count in [default: the backend's].
    pub tokenizer: Option<TokenizerKind>,
    pub budget: Option<usize>,
    /// Whose rules build the contexts where a paper and its authors' code disagree.
    pub profile: Option<Fidelity>,
    pub ranker: Option<RankerKind>,
    /// A classifier written by `keyhole train` [default: the bundled one], and the encoder
    /// it was trained with.
    pub classifier: Option<PathBuf>,
    pub encoder_dir: Option<PathBuf>,
    /// RepoCoder's iterations (candidate 67 is the last).
    pub iterations: Option<u16>,
    /// Seed of the random-context baseline (and of eval's hole sample).
    pub seed: Option<u64>,
    /// Neither read nor write the repository index's cache.
    pub no_cache: bool,
    /// Which language servers typed holes ask [default: `KEYHOLE_LANGUAGE_SERVERS`, else
    /// auto], and how long one may take.
    pub language_servers: Option<lsp::ServerChoice>,
    pub language_server_timeout: Option<std::time::Duration>,
    /// Index the folders languages install dependencies into (`node_modules`, `.venv`) too.
    pub include_vendored: bool,
}

/// Everything a session is opened with, resolved (ripgrep's high-level arguments).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The configured backends, the embedded one first, with the choices' overrides applied to
    /// the chosen one (a one-off local model joins them): the UI offers them all.
    pub backends: Vec<BackendConfig>,
    /// Which of `backends` completes.
    pub chosen: usize,
    /// The tokenizer budgets count in; none: the backend's own ([`Settings::tokenizer`]).
    pub tokenizer: Option<TokenizerKind>,
    pub budget: usize,
    pub profile: Fidelity,
    pub ranker: RankerKind,
    pub classifier: Option<PathBuf>,
    pub encoder_dir: Option<PathBuf>,
    pub iterations: u16,
    pub seed: u64,
    /// Where configuration, caches and what is learnt live.
    pub dirs: Dirs,
    /// Whether the repository index goes through its cache in `dirs`.
    pub index_cache: bool,
    pub language_servers: lsp::ServerOptions,
    /// Whether the folders of installed dependencies are indexed.
    pub vendored: Vendored,
}

/// Which classifier ranks, as [`Settings::classifier`] chooses it.
enum ChosenClassifier {
    Asked(Classifier),
    Tuned(Tuned),
    Bundled,
}

/// Why settings could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--backend {0}: no such backend (see `keyhole backends`)")]
    NoSuchBackend(String),
    #[error("--model-path: backend `{0}` is not a local one")]
    NotLocal(String),
    #[error("{}: {}", lsp::SERVERS_VARIABLE, .0)]
    LanguageServers(lsp::ServerChoiceError),
}

impl Default for Settings {
    /// The embedded model, the bundled classifier and every default, with no directories:
    /// nothing is read from or written to the user's.
    fn default() -> Settings {
        Settings::with_backends(
            vec![BackendConfig::embedded()],
            0,
            &Choices::default(),
            Dirs::none(),
        )
    }
}

impl Settings {
    /// `choices` resolved with the backends configured in `dirs` (backends.toml) and the
    /// defaults.
    pub fn resolve(choices: &Choices, dirs: Dirs) -> Result<Settings, SettingsError> {
        let backends = match dirs.config_file(config::BACKENDS_FILE) {
            Some(path) => config::load_backends(&path)?,
            None => vec![BackendConfig::embedded()],
        };
        Settings::resolve_among(backends, choices, dirs)
    }

    /// [`Settings::resolve`], forgiving a backends.toml entry that cannot be used: it is left
    /// out, and its error comes back as a warning (the UI starts whatever one entry says).
    /// The backend `choices` names must still be there.
    pub fn resolve_leniently(
        choices: &Choices,
        dirs: Dirs,
    ) -> Result<(Settings, Vec<String>), SettingsError> {
        let (backends, warnings) = read_backends_leniently(&dirs);
        Ok((Settings::resolve_among(backends, choices, dirs)?, warnings))
    }

    fn resolve_among(
        mut backends: Vec<BackendConfig>,
        choices: &Choices,
        dirs: Dirs,
    ) -> Result<Settings, SettingsError> {
        let chosen = chosen_backend(choices, &backends)?;
        let at = match backends.iter().position(|b| b.name == chosen.name) {
            Some(at) => {
                backends[at] = chosen;
                at
            }
            None => {
                backends.push(chosen);
                backends.len() - 1
            }
        };
        let mut settings = Settings::with_backends(backends, at, choices, dirs);
        if choices.language_servers.is_none() {
            settings.language_servers.choice =
                lsp::ServerChoice::from_env().map_err(SettingsError::LanguageServers)?;
        }
        Ok(settings)
    }

    fn with_backends(
        backends: Vec<BackendConfig>,
        chosen: usize,
        choices: &Choices,
        dirs: Dirs,
    ) -> Settings {
        Settings {
            backends,
            chosen,
            tokenizer: choices.tokenizer,
            budget: choices.budget.unwrap_or(DEFAULT_BUDGET),
            profile: choices.profile.unwrap_or(Fidelity::Paper),
            ranker: choices.ranker.unwrap_or(RankerKind::RlpgH),
            classifier: choices.classifier.clone(),
            encoder_dir: choices.encoder_dir.clone(),
            iterations: choices
                .iterations
                .unwrap_or(perspectives::DEFAULT_ITERATIONS),
            seed: choices.seed.unwrap_or(crate::hole::DEFAULT_SEED),
            dirs,
            index_cache: !choices.no_cache,
            language_servers: lsp::ServerOptions {
                choice: choices.language_servers.clone().unwrap_or_default(),
                timeout: choices.language_server_timeout,
            },
            vendored: match choices.include_vendored {
                true => Vendored::Included,
                false => Vendored::Skipped,
            },
        }
    }

    /// The backend that completes.
    pub fn backend(&self) -> &BackendConfig {
        &self.backends[self.chosen]
    }

    /// The tokenizer budgets count in: the one chosen, else the backend's.
    pub fn tokenizer(&self) -> TokenizerKind {
        self.tokenizer.unwrap_or_else(|| self.backend().tokenizer())
    }

    /// The rankers these settings name, learning in their data directory: the classifier
    /// [`Settings::classifier`] chooses, the bundled one loaded on first use.
    pub fn learning(&self) -> Result<Learning, ModelError> {
        Ok(match self.chosen_classifier()? {
            ChosenClassifier::Asked(classifier) => {
                Learning::with_classifier(classifier, self.dirs.clone())
            }
            ChosenClassifier::Tuned(tuned) => Learning::with_tuned(tuned, self.dirs.clone()),
            ChosenClassifier::Bundled => Learning::new(self.dirs.clone()),
        })
    }

    /// The classifier behind RLPG-H and RLPG-R, and what it was tuned for where it is a tuned
    /// one: the one asked for (read now: a bad file is an error before any work); without
    /// one, the classifier `keyhole tune` made for the chosen backend and its model; else the
    /// bundled one.
    pub(crate) fn classifier(&self) -> Result<(Classifier, Option<TunedInfo>), ModelError> {
        Ok(match self.chosen_classifier()? {
            ChosenClassifier::Asked(classifier) => (classifier, None),
            ChosenClassifier::Tuned(tuned) => (tuned.classifier, Some(tuned.info)),
            ChosenClassifier::Bundled => (Classifier::bundled(), None),
        })
    }

    /// The one place the classifier is chosen. A tuned model that cannot be used (unreadable,
    /// damaged) is passed over with a one-line warning: nobody asked for it by name.
    fn chosen_classifier(&self) -> Result<ChosenClassifier, ModelError> {
        if self.classifier.is_some() || self.encoder_dir.is_some() {
            let asked = Classifier::open(self.classifier.as_deref(), self.encoder_dir.as_deref());
            return Ok(ChosenClassifier::Asked(asked?));
        }
        Ok(match tuned::find(&self.dirs, self.backend()) {
            Ok(Some(tuned)) => ChosenClassifier::Tuned(tuned),
            Ok(None) => ChosenClassifier::Bundled,
            Err(why) => {
                crate::escape::warn(&format!(
                    "tuned classifier left out, ranking with the bundled one: {why}"
                ));
                ChosenClassifier::Bundled
            }
        })
    }

    /// Sets the compute threads of a local model (backends.toml's `threads`) for the whole
    /// process, as every command does before it starts work.
    ///
    /// # Safety
    /// Changes the process environment: call it before the process starts any other thread.
    pub unsafe fn use_threads(&self) {
        // Without the `local-model` feature no backend runs a model in this process.
        #[cfg(feature = "local-model")]
        // SAFETY: passed on to the caller.
        unsafe {
            crate::model::local::use_threads(self.backend())
        }
    }
}

/// The backends configured in `dirs` (the embedded one first), an entry that cannot be used
/// left out, with a warning naming its file, line and key.
pub fn read_backends_leniently(dirs: &Dirs) -> (Vec<BackendConfig>, Vec<String>) {
    let (backends, errors) = match dirs.config_file(config::BACKENDS_FILE) {
        Some(path) => config::load_backends_leniently(&path),
        None => (vec![BackendConfig::embedded()], Vec::new()),
    };
    let warnings = errors
        .iter()
        .map(|e| format!("left out of the backends: {e}"))
        .collect();
    (backends, warnings)
}

/// The backend entry `choices` name, with their overrides applied.
fn chosen_backend(
    choices: &Choices,
    configured: &[BackendConfig],
) -> Result<BackendConfig, SettingsError> {
    let name = choices.backend.as_deref().unwrap_or(config::EMBEDDED);
    if let Some(path) = &choices.model_path
        && name == config::EMBEDDED
    {
        return Ok(BackendConfig::local(path.clone()));
    }
    let mut entry = configured
        .iter()
        .find(|b| b.name == name)
        .cloned()
        .ok_or_else(|| SettingsError::NoSuchBackend(name.to_string()))?;
    if choices.url.is_some() {
        entry.base_url.clone_from(&choices.url);
    }
    if choices.model.is_some() {
        entry.model.clone_from(&choices.model);
    }
    if choices.max_tokens.is_some() {
        entry.max_tokens = choices.max_tokens;
    }
    if let Some(path) = &choices.model_path {
        if entry.kind != BackendKind::Local {
            return Err(SettingsError::NotLocal(entry.name));
        }
        entry.path = Some(path.clone());
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Directories whose config holds `backends_toml`.
    fn configured(backends_toml: &str) -> (tempfile::TempDir, Dirs) {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join(config::BACKENDS_FILE), backends_toml).unwrap();
        let dirs = Dirs {
            config: Some(scratch.path().to_path_buf()),
            ..Dirs::none()
        };
        (scratch, dirs)
    }

    const SERVER: &str = r#"
[[backend]]
name = "server"
kind = "llamacpp"
base_url = "http://127.0.0.1:9"
model = "configured"
"#;

    #[test]
    fn choices_override_the_chosen_backend_and_keep_the_others() {
        let (_scratch, dirs) = configured(SERVER);
        let choices = Choices {
            backend: Some("server".into()),
            model: Some("asked".into()),
            budget: Some(512),
            ..Choices::default()
        };
        let settings = Settings::resolve(&choices, dirs).unwrap();
        let names: Vec<&str> = settings.backends.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["embedded", "server"]);
        assert_eq!(settings.backend().name, "server");
        assert_eq!(settings.backend().model.as_deref(), Some("asked"));
        assert_eq!(settings.budget, 512);
        assert_eq!(settings.tokenizer(), settings.backend().tokenizer());
    }

    #[test]
    fn an_unknown_backend_or_a_model_path_for_a_server_is_refused() {
        let (_scratch, dirs) = configured(SERVER);
        let unknown = Choices {
            backend: Some("nope".into()),
            ..Choices::default()
        };
        let error = Settings::resolve(&unknown, dirs.clone()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--backend nope: no such backend (see `keyhole backends`)"
        );
        let not_local = Choices {
            backend: Some("server".into()),
            model_path: Some("m.gguf".into()),
            ..Choices::default()
        };
        let error = Settings::resolve(&not_local, dirs).unwrap_err();
        assert!(
            error.to_string().contains("`server` is not a local one"),
            "{error}"
        );
    }

    #[test]
    fn a_model_path_alone_joins_the_configured_backends_as_a_local_one() {
        let (_scratch, dirs) = configured(SERVER);
        let choices = Choices {
            model_path: Some("m.gguf".into()),
            tokenizer: Some(TokenizerKind::R50kBase),
            ..Choices::default()
        };
        let settings = Settings::resolve(&choices, dirs).unwrap();
        assert_eq!(settings.backends.len(), 3);
        assert_eq!(settings.backend().kind, BackendKind::Local);
        assert_eq!(
            settings.backend().path.as_deref(),
            Some(Path::new("m.gguf"))
        );
        assert_eq!(settings.tokenizer(), TokenizerKind::R50kBase);
    }

    #[test]
    fn a_bad_entry_is_left_out_with_its_line_and_the_others_kept_where_asked_to_forgive() {
        let toml = format!(
            "{SERVER}\n[[backend]]\nname = \"hot\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\ntemperature = 5\n\n[[backend]]\nname = \"other\"\nkind = \"ollama\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n"
        );
        let (_scratch, dirs) = configured(&toml);
        // Strictly, the file is one error naming the line and key.
        let strict = Settings::resolve(&Choices::default(), dirs.clone()).unwrap_err();
        assert!(
            strict.to_string().contains("line 13, key `temperature`"),
            "{strict}"
        );
        let (settings, warnings) =
            Settings::resolve_leniently(&Choices::default(), dirs.clone()).unwrap();
        let names: Vec<&str> = settings.backends.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["embedded", "server", "other"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("left out of the backends: ")
                && warnings[0].contains("line 13, key `temperature`"),
            "{warnings:?}"
        );
        // The one left out cannot be chosen.
        let hot = Choices {
            backend: Some("hot".into()),
            ..Choices::default()
        };
        assert!(Settings::resolve_leniently(&hot, dirs).is_err());
    }
}
