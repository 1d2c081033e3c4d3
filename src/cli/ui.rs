//! The terminal UI's arguments: the choices of `keyhole complete`, checked before the screen
//! is taken over.

use anyhow::Result;
use clap::Args;

use super::backends::{self, BackendArgs};
use super::bounds;
use super::dirs;
use super::hole::RankArgs;
use keyhole::compose;
use keyhole::rank::classifier::Classifier;
use keyhole::token::TokenizerKind;

/// What the UI completes with and how it ranks and counts: the choices of `complete`.
#[derive(Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub rank: RankArgs,
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = bounds::budget)]
    pub budget: usize,
    /// Tokenizer the budget is counted in [default: the backend's, else code].
    #[arg(long)]
    pub tokenizer: Option<TokenizerKind>,
    /// The UI's colours: dark or light [default: what theme.toml names, else dark].
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
    /// Whose rules build the contexts where a paper and its authors' code disagree: paper
    /// or code.
    #[arg(long, default_value = "paper")]
    pub fidelity: keyhole::context::fidelity::Fidelity,
}

impl UiArgs {
    /// The UI's options; a bad backend, classifier or encoder is an error before the screen
    /// is taken over.
    pub fn options(&self) -> Result<keyhole::tui::Options> {
        let mut backends = backends::configured()?;
        let chosen = self.backend.entry_among(backends.clone())?;
        // Flag overrides (--url, --model, --model-path) apply to the chosen entry; a one-off
        // local model joins the configured ones.
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
        let classifier = Classifier::open(
            self.rank.classifier.as_deref(),
            self.rank.encoder_dir.as_deref(),
        )?;
        Ok(keyhole::tui::Options {
            setup: keyhole::tui::state::Setup {
                backends,
                backend: at,
                budget: self.budget,
                tokenizer: self.tokenizer,
            },
            ranker: self.rank.ranker,
            classifier,
            dirs: dirs().clone(),
            theme: self.theme.clone(),
            fidelity: self.fidelity,
        })
    }
}
