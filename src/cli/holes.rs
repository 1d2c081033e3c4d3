//! `keyhole holes`: RLPG's sampled holes of a repository, as lines, JSON or a task file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::hole::{CacheArgs, PromptArgs, open_repo};
use keyhole::compose;
use keyhole::escape;
use keyhole::eval::interop;
use keyhole::hole;
use keyhole::token::TokenizerKind;

#[derive(Args)]
pub struct HolesArgs {
    repo: PathBuf,
    /// At most this many holes, drawn at random with --seed.
    #[arg(long)]
    cap: Option<usize>,
    #[arg(long, default_value_t = hole::DEFAULT_SEED)]
    seed: u64,
    #[arg(long)]
    json: bool,
    /// Write the holes as a CrossCodeEval-style task file (prompt: the default context).
    #[arg(long)]
    export: Option<PathBuf>,
    /// The exported prompts' budget and tokenizer, and where the holes sit.
    #[command(flatten)]
    prompt: PromptArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

/// One hole, as `--json` lists it.
#[derive(Serialize)]
struct HoleRow<'a> {
    file: &'a str,
    line: usize,
    column: usize,
    target: Option<&'a str>,
}

#[derive(Serialize)]
struct HolesOut<'a> {
    holes: Vec<HoleRow<'a>>,
}

pub fn holes_command(args: &HolesArgs) -> Result<()> {
    let index = open_repo(&args.repo, &args.cache)?;
    let holes = hole::sample_holes(
        &index,
        args.cap,
        args.seed,
        args.prompt.fidelity.hole_column(),
    );
    if let Some(path) = &args.export {
        let name = index
            .root
            .file_name()
            .map_or_else(|| "repository".into(), |n| n.to_string_lossy().into_owned());
        let tok = args
            .prompt
            .tokenizer
            .unwrap_or(TokenizerKind::Code)
            .tokenizer();
        let rows = holes.iter().map(|h| {
            let default_reading = args.prompt.fidelity.default_reading();
            let composer =
                compose::Composer::new(&index, h, tok, args.prompt.budget, default_reading);
            let prompt = composer.compose(&compose::DefaultContext).text();
            interop::export_row(&index, &name, h, &prompt)
        });
        interop::write_jsonl(path, rows).with_context(|| format!("{}", path.display()))?;
        errln!("{} tasks written to {}", holes.len(), path.display());
        return Ok(());
    }
    if args.json {
        let out = HolesOut {
            holes: holes
                .iter()
                .map(|h| HoleRow {
                    file: &index.files[h.file].path,
                    line: h.line + 1,
                    column: h.column + 1,
                    target: h.target.as_deref(),
                })
                .collect(),
        };
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for h in &holes {
            // One hole a line, whatever the file is called.
            outln!(
                "{}\t{}",
                escape::controls(&h.display(&index)),
                h.target.as_deref().unwrap_or("")
            );
        }
        errln!("{} holes", holes.len());
    }
    Ok(())
}
