//! The terminal UI's arguments: the choices of `keyhole complete`, checked before the screen
//! is taken over.

use anyhow::Result;
use clap::Args;

use super::backends::BackendArgs;
use super::dirs;
use super::hole::{PromptArgs, RankArgs, ServerArgs};
use keyhole::sample::Sample;
use keyhole::session::{Choices, Settings};

/// What the UI completes with and how it ranks and counts: the choices of `complete`.
#[derive(Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub rank: RankArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// The UI's colours: dark or light [default: what theme.toml names, else dark].
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
    /// Open the hole of recorded request N (`keyhole recorded list`): where the repository
    /// holds what the plugin sent around the cursor, with the plugin's prompt as the first
    /// candidate.
    #[arg(long, value_name = "N", conflicts_with = "position")]
    pub recorded: Option<u64>,
    /// The bundled sample to open when no repository is given: java, python or typescript.
    #[arg(long, value_name = "LANGUAGE", default_value = "java", value_parser = Sample::named)]
    pub sample: Sample,
    /// Also index the folders languages install dependencies into (node_modules, .venv,
    /// venv, site-packages), which are left out by default.
    #[arg(long)]
    pub include_vendored: bool,
}

impl UiArgs {
    /// The UI's options; a bad backend, classifier or encoder is an error before the screen
    /// is taken over.
    pub fn options(&self) -> Result<keyhole::tui::Options> {
        let mut choices = Choices {
            include_vendored: self.include_vendored,
            ..Choices::default()
        };
        self.prompt.choose(&mut choices);
        self.backend.choose(&mut choices);
        self.rank.choose(&mut choices);
        self.servers.choose(&mut choices);
        // A bad backends.toml entry is left out with a warning: the UI still starts.
        let (settings, warnings) = Settings::resolve_leniently(&choices, dirs().clone())?;
        // SAFETY: resolved before the UI starts a thread.
        unsafe { settings.use_threads() };
        let learning = settings.learning()?;
        Ok(keyhole::tui::Options {
            settings,
            learning,
            theme: self.theme.clone(),
            warnings,
            sample: self.sample,
            recorded: self.recorded,
        })
    }
}
