//! The report phase of `keyhole eval`: the label rows become report.md, report.json, the
//! plots, Table 10's compositions and ProCC's trained bandit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use super::{Backends, Evaluation, Observer, repository_name};
use crate::candidate::{CandidateId, Selection};
use crate::eval::classified::{self, Classified, ClassifierEval};
use crate::eval::labels;
use crate::eval::outdir::OutDir;
use crate::eval::report::{self, Grouped, Grouping, HoleRows};
use crate::eval::runner::{Failures, RunStats};
use crate::rank::bandit;
use crate::rank::classifier::{Classifier, Variant};
use crate::repo::RepoIndex;
use crate::session::Settings;

/// Read every label file of `out`, write the report beside them and show it; an error when
/// holes of this run failed (`total`) or compositions did.
#[expect(clippy::too_many_arguments, reason = "the run's state, passed on once")]
pub(super) fn write_report(
    repos: &[PathBuf],
    args: &Evaluation,
    backends: &mut Backends,
    settings: &Settings,
    out: &OutDir,
    runtime: &tokio::runtime::Runtime,
    failures: &mut Failures,
    total: RunStats,
    observer: &dyn Observer,
) -> Result<()> {
    let label_dir = out.label_dir();
    // Rows are read one hole at a time and only their outcomes kept, not their texts.
    let mut grouping = Grouping::default();
    for path in out.label_files()? {
        labels::group_file(&path, &mut grouping).with_context(|| format!("{}", path.display()))?;
    }
    let labelled = grouping.finish();
    let holes = &labelled.holes;
    let (classifier, tuned) = settings.classifier()?;
    let classified = runtime.block_on(classify(
        repos,
        args,
        settings,
        backends,
        &classifier,
        holes,
        failures,
        observer,
    ))?;
    // Holes of the run without rows: failed ones, and shards not merged or stopped part way.
    let missing = total.holes.saturating_sub(holes.len());
    let mut builder =
        report::Builder::grouped(Cow::Borrowed(&labelled), &args.train, settings.seed)
            .missing_holes(missing);
    if !args.train.is_empty() {
        builder = builder.add_note(
            "RLPG-H and RLPG-R rank the test repositories only (the classifier learned from \
             training data); in the per-repository table their training rows equal the default \
             context.",
        );
    }
    if let Some(tuned) = &tuned {
        builder = builder.add_note(format!(
            "RLPG-H ranks with the classifier {} (`keyhole tune`); it learnt from labels of {}, \
             so on those repositories its rows are not held out.",
            tuned.describe(),
            tuned.repositories.join(", ")
        ));
    }
    if let Some(set) = args.candidates.as_ref().filter(|&s| *s != Selection::all()) {
        builder = builder.add_note(format!(
            "Candidate set: {set} and the default context; the others were not completed (their \
             rows count as not applicable), so every method and the oracle choose among these."
        ));
    }
    if args.batch() {
        builder = builder.add_note(
            "Labelled from batch files: Table 10's compositions, which need completions of \
             their own, are left out.",
        );
    }
    if total.failed > 0 {
        builder = builder.add_note(format!(
            "Incomplete: {} of {} holes failed (backend errors) and are not in this report; \
             running the same `keyhole eval` again completes them.",
            total.failed, total.holes
        ));
    } else if missing > 0 {
        builder = builder.add_note(format!(
            "Incomplete: {missing} of the run's {} holes have no rows and are not in this report \
             (holes that failed in an earlier run, or shards not merged or stopped part way).",
            total.holes
        ));
    }
    for variant in [Variant::H, Variant::R]
        .into_iter()
        .filter(|&v| classifier.has(v))
    {
        let by_hole: HashMap<&str, &[CandidateId]> = classified
            .iter()
            .filter_map(|c| {
                let ranking = c.rankings.iter().find(|r| r.0 == variant)?;
                Some((c.hole_id.as_str(), ranking.1.as_slice()))
            })
            .collect();
        builder = builder.add_ranking(variant.name(), move |h| {
            by_hole
                .get(h.hole_id.as_str())
                .map_or_else(Vec::new, |ids| ids.to_vec())
        });
    }
    let report = builder.build();
    save_procc_bandit(&labelled, args, settings, observer)?;
    report::write(&report, out.root()).with_context(|| format!("{}", out.root().display()))?;
    let by_id: HashMap<&str, &HoleRows> = holes.iter().map(|h| (h.hole_id.as_str(), h)).collect();
    let table = classified::composition_table(&classified, &by_id);
    append_compositions(out.root(), &table)?;
    observer.report(&std::fs::read_to_string(out.root().join("report.md")).unwrap_or_default())?;
    observer.note(&format!(
        "labels in {}, report in {}",
        label_dir.display(),
        out.root().join("report.md").display()
    ))?;
    // A partial run must not look like success: the report covers what completed, and the
    // exit code says that something did not.
    if let Some(last) = total.last_error {
        bail!(
            "{} of {} holes failed and have no label rows (the last: {last}); the report covers the complete ones, and running the same command again retries the failed ones",
            total.failed,
            total.holes
        );
    }
    let uncomposed: Vec<&Classified> = classified.iter().filter(|c| c.failed.is_some()).collect();
    if let Some(last) = uncomposed.last().and_then(|c| c.failed.as_ref()) {
        bail!(
            "Table 10 leaves out {} holes whose composition requests failed (the last: {last}); running the same command again completes them",
            uncomposed.len()
        );
    }
    Ok(())
}

/// RLPG-H and RLPG-R on the holes the method tables cover (the test split, or every hole
/// without one), with their compositions; holes of repositories not named on the command line
/// cannot be rebuilt and are left out.
#[expect(clippy::too_many_arguments, reason = "the run's state, passed on once")]
async fn classify(
    repos: &[PathBuf],
    args: &Evaluation,
    settings: &Settings,
    backends: &mut Backends<'_>,
    classifier: &Classifier,
    holes: &[HoleRows],
    failures: &mut Failures,
    observer: &dyn Observer,
) -> Result<Vec<Classified>> {
    let in_scope = |h: &&HoleRows| args.train.is_empty() || !args.train.contains(&h.repository);
    let run = ClassifierEval {
        classifier,
        variants: vec![Variant::H, Variant::R],
        // Compositions are completed online; batch files do not carry them (yet).
        compositions: match args.batch() {
            true => Vec::new(),
            false => args.compose.iter().copied().filter(|&l| l > 1).collect(),
        },
        tokenizer: settings.tokenizer().tokenizer(),
        budget: settings.budget,
        concurrency: backends.in_flight,
        fidelity: settings.profile,
    };
    let mut out = Vec::new();
    for path in repos {
        let name = repository_name(path);
        let mine: Vec<&HoleRows> = holes
            .iter()
            .filter(in_scope)
            .filter(|h| h.repository == name)
            .collect();
        if mine.is_empty() {
            continue;
        }
        observer.note(&format!(
            "{name}: ranking {} holes with the classifier…",
            mine.len()
        ))?;
        let index = Arc::new(RepoIndex::open(path, settings.dirs.cache.as_deref())?);
        let backend = backends.for_index(&index)?;
        out.extend(run.run(&index, &mine, backend.as_ref(), failures).await?);
    }
    Ok(out)
}

/// Table 10 goes at the end of report.md and into compositions.json.
fn append_compositions(out: &std::path::Path, table: &[classified::CompositionRow]) -> Result<()> {
    if table.is_empty() {
        return Ok(());
    }
    let md = out.join("report.md");
    let mut text = std::fs::read_to_string(&md).with_context(|| format!("{}", md.display()))?;
    text.push_str(&classified::composition_markdown(table));
    std::fs::write(&md, text).with_context(|| format!("{}", md.display()))?;
    let json = out.join("compositions.json");
    std::fs::write(&json, serde_json::to_vec_pretty(table)?)
        .with_context(|| format!("{}", json.display()))
}

/// Write ProCC's bandit, trained on these rows as the report trains it, beside the report and,
/// with --keep-bandit, into the data directory.
fn save_procc_bandit(
    labelled: &Grouped,
    args: &Evaluation,
    settings: &Settings,
    observer: &dyn Observer,
) -> Result<()> {
    let bandit = report::train_procc_grouped(labelled, &args.train);
    let path = args.out.join(bandit::FILE);
    bandit
        .save(&path)
        .with_context(|| format!("{}", path.display()))?;
    if args.keep_bandit {
        let dir = settings
            .dirs
            .data
            .clone()
            .context("no data directory for --keep-bandit")?;
        let path = dir.join(bandit::FILE);
        bandit
            .save(&path)
            .with_context(|| format!("{}", path.display()))?;
        observer.note(&format!("ProCC bandit kept in {}", path.display()))?;
    }
    Ok(())
}
