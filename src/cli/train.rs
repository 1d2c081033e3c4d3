//! `keyhole train`: fit RLPG-H or RLPG-R on evaluation label files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use keyhole::compose;
use keyhole::eval::LabelRow;
use keyhole::eval::labels;
use keyhole::eval::run::repository_meant;
use keyhole::hole;
use keyhole::rank::classifier::Variant;
use keyhole::rank::classifier::bert::BertEncoder;
use keyhole::rank::classifier::dataset::{Corpus, Rebuild};
use keyhole::rank::classifier::train::{self, Holdout, TrainOptions, TrainReport};
use keyhole::token::TokenizerKind;

#[derive(Args)]
pub struct TrainArgs {
    /// Label files, or directories of them (an `eval --out` directory works).
    #[arg(required = true)]
    labels: Vec<PathBuf>,
    /// h (RLPG-H) or r (RLPG-R).
    #[arg(long, default_value = "h")]
    variant: Variant,
    /// Where to write the model; its report goes beside it (FILE.report.md and .json).
    #[arg(long, default_value = "keyhole-classifier.safetensors")]
    out: PathBuf,
    /// The directory holding the labelled repositories, each under the name the labels give it.
    #[arg(long)]
    corpus: PathBuf,
    /// Repositories held out for early stopping (comma-separated) [default: the repository of
    /// the last label file].
    #[arg(long, value_delimiter = ',')]
    validation: Vec<String>,
    /// RLPG-R's starting model, whose encoder it keeps [default: --out if it exists, else the
    /// bundled model].
    #[arg(long)]
    start: Option<PathBuf>,
    /// A local BERT-family model directory (config.json, model.safetensors, tokenizer.json, as
    /// Hugging Face ships CodeBERT) to use, frozen, as the encoder, as the paper does; ranking
    /// with the model then needs the same directory.
    #[arg(long)]
    encoder_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 40, value_parser = super::bounds::epochs)]
    max_epochs: usize,
    #[arg(long, default_value_t = 5, value_parser = super::bounds::epochs)]
    patience: usize,
    #[arg(long, default_value_t = hole::DEFAULT_SEED)]
    seed: u64,
    /// The budget the labels were made with.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = super::bounds::budget)]
    budget: usize,
}

pub fn train_command(args: &TrainArgs) -> Result<()> {
    let encoder = args
        .encoder_dir
        .as_deref()
        .map(BertEncoder::load)
        .transpose()?;
    let rows = labels::read_all(&args.labels)?;
    let Some(last) = rows.last() else {
        bail!("no label rows in {}", show(&args.labels));
    };
    let validation = if args.validation.is_empty() {
        vec![last.repository.clone()]
    } else {
        validation_names(&args.validation, &rows, &args.corpus)?
    };
    let rebuild = Rebuild {
        corpus: Corpus::Dir(&args.corpus),
        tokenizer: TokenizerKind::Code.tokenizer(),
        budget: args.budget,
        with_contexts: args.variant == Variant::R,
        encoder: encoder.as_ref(),
        cache: super::dirs().cache.as_deref(),
    };
    match &encoder {
        Some(e) => errln!(
            "rebuilding the inputs of the labelled holes and encoding them with {}…",
            e.dir().display()
        ),
        None => errln!("rebuilding the inputs of the labelled holes…"),
    }
    let built = rebuild.examples(&rows);
    for line in built.skipped.iter().take(5) {
        errln!("skipped: {line}");
    }
    if built.skipped.len() > 5 {
        errln!("skipped {} more", built.skipped.len() - 5);
    }
    let start = args
        .start
        .clone()
        .or_else(|| args.out.exists().then(|| args.out.clone()));
    let options = TrainOptions {
        variant: args.variant,
        validation: Holdout::Repositories(validation),
        max_epochs: args.max_epochs,
        patience: args.patience,
        seed: args.seed,
        fine_tune: false,
    };
    let report = train::train(
        &built.examples,
        &options,
        start.as_deref(),
        &args.out,
        &|e| {
            // Progress only: where it cannot be written, the report at the end fails loudly.
            let _ = super::write_err(format_args!(
                "epoch {:>2}: train loss {:.4}, validation loss {:.4}, top-1 success {:.2}%",
                e.epoch, e.train_loss, e.validation_loss, e.validation_success
            ));
        },
    )?;
    write_report(&report, &args.out)?;
    outln!("{}", report.markdown());
    errln!("model in {}", args.out.display());
    Ok(())
}

fn show(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

fn write_report(report: &TrainReport, out: &std::path::Path) -> Result<()> {
    let json = out.with_extension("report.json");
    let md = out.with_extension("report.md");
    std::fs::write(&json, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    std::fs::write(&md, report.markdown()).with_context(|| format!("cannot write {}", md.display()))
}

/// The labelled repositories `given` (by name, or by path to the repository in `corpus`) holds
/// out, by the names the label rows give them.
fn validation_names(given: &[String], rows: &[LabelRow], corpus: &Path) -> Result<Vec<String>> {
    let labelled: BTreeSet<&str> = rows.iter().map(|r| r.repository.as_str()).collect();
    let located: Vec<(String, PathBuf)> = labelled
        .iter()
        .map(|&name| (name.to_string(), corpus.join(name)))
        .collect();
    given
        .iter()
        .map(|given| match repository_meant(given, &located) {
            Some(name) => Ok(name.to_string()),
            None => bail!(
                "--validation {given}: no labelled repository is at that path (in --corpus) or has that name ({})",
                labelled.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        })
        .collect()
}
