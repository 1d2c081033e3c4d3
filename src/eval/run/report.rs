//! The report phase of `keyhole eval`: the label rows become report.md, report.json, the
//! plots, Table 10's compositions and ProCC's trained bandit.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::{At, Backends, EvalError, Evaluation, Observer, repository_name};
use crate::candidate::{CandidateId, Selection};
use crate::eval::classified::{self, Classified, ClassifierEval, CompositionTally};
use crate::eval::labels::LabelIndex;
use crate::eval::outdir::OutDir;
use crate::eval::report::{self, HoleRows};
use crate::eval::runner::{Failures, RunStats};
use crate::model::Backend;
use crate::rank::bandit::{self, LinUcb};
use crate::rank::classifier::Variant;
use crate::repo::RepoIndex;
use crate::session::Settings;

/// Holes ranked by the classifier together: enough for its requests to run `concurrency` at
/// once, few enough that what they hold does not grow with the run.
const CLASSIFIED_TOGETHER: usize = 512;

/// Read every label file of `out` (twice, a hole at a time: see [`report::Choices`] and
/// [`report::Scoring`]), write the report beside them and print it; an error when holes of
/// this run failed (`total`) or compositions did; shown through `observer`.
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
) -> Result<(), EvalError> {
    let label_dir = out.label_dir();
    let index = LabelIndex::read(&out.label_files()?).at(&label_dir)?;
    let (classifier, tuned) = settings.classifier()?;
    let choices = report::Choices::learn(&index, &args.train).at(&label_dir)?;
    let variants: Vec<Variant> = [Variant::H, Variant::R]
        .into_iter()
        .filter(|&v| classifier.has(v))
        .collect();
    let names = variants.iter().map(|v| v.name().to_string()).collect();
    let mut scoring = report::Scoring::new(&choices, settings.seed, names);
    let mut compositions = CompositionTally::default();
    let run = ClassifierEval {
        classifier: &classifier,
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
    let mut ranking = Ranking {
        repos,
        settings,
        observer,
        backends,
        run,
        repository: None,
        variants: &variants,
    };
    let mut together: Vec<HoleRows> = Vec::new();
    let holes = index.holes(&|_| true);
    // Rows of the holes of one repository are ranked together, then scored in hole id order.
    for hole in holes.map(Some).chain([None]) {
        let hole = hole.transpose().at(&label_dir)?;
        let full = together.len() == CLASSIFIED_TOGETHER;
        let other_repository = hole
            .as_ref()
            .zip(together.last())
            .is_some_and(|(h, last)| h.repository != last.repository);
        if hole.is_none() || full || other_repository {
            let rankings = runtime.block_on(ranking.rank(&choices, &together, failures))?;
            for (hole, ranked) in together.drain(..).zip(rankings) {
                let extra: Vec<Vec<CandidateId>> = match &ranked {
                    Some(classified) => variants
                        .iter()
                        .map(|v| {
                            let ranking = classified.rankings.iter().find(|r| r.0 == *v);
                            ranking.map_or_else(Vec::new, |r| r.1.clone())
                        })
                        .collect(),
                    None => Vec::new(),
                };
                scoring.add(&hole, &extra);
                if let Some(classified) = &ranked {
                    compositions.add(classified, &hole);
                }
            }
        }
        together.extend(hole);
    }
    // Holes of the run without rows: failed ones, and shards not merged or stopped part way.
    let missing = total.holes.saturating_sub(scoring.holes());
    let mut notes = Vec::new();
    if !args.train.is_empty() {
        notes.push(
            "RLPG-H and RLPG-R rank the test repositories only (the classifier learned from \
             training data); in the per-repository table their training rows equal the default \
             context."
                .to_string(),
        );
    }
    if let Some(tuned) = &tuned {
        notes.push(format!(
            "RLPG-H ranks with the classifier {} (`keyhole tune`); it learnt from labels of {}, \
             so on those repositories its rows are not held out.",
            tuned.describe(),
            tuned.repositories.join(", ")
        ));
    }
    if let Some(set) = args.candidates.as_ref().filter(|&s| *s != Selection::all()) {
        notes.push(format!(
            "Candidate set: {set} and the default context; the others were not completed (their \
             rows count as not applicable), so every method and the oracle choose among these."
        ));
    }
    if args.batch() {
        notes.push(
            "Labelled from batch files: Table 10's compositions, which need completions of \
             their own, are left out."
                .to_string(),
        );
    }
    if total.failed > 0 {
        notes.push(format!(
            "Incomplete: {} of {} holes failed (backend errors) and are not in this report; \
             running the same `keyhole eval` again completes them.",
            total.failed, total.holes
        ));
    }
    // Holes of the run without rows, though none failed in this run: said in the report, and
    // by the exit code, as a run whose holes failed says it.
    let unlabelled = (total.failed == 0 && missing > 0).then(|| {
        format!(
            "{missing} of the run's {} holes have no rows (holes that failed in an earlier run, \
             or shards not merged or stopped part way)",
            total.holes
        )
    });
    if let Some(unlabelled) = &unlabelled {
        notes.push(format!(
            "Incomplete: {unlabelled} and are not in this report."
        ));
    }
    let report = scoring.finish(notes, missing);
    save_procc_bandit(&choices.bandit, args, settings, observer)?;
    report::write(&report, out.root()).at(out.root())?;
    append_compositions(out.root(), &compositions.rows())?;
    observer.report(&std::fs::read_to_string(out.root().join("report.md")).unwrap_or_default())?;
    observer.note(&format!(
        "labels in {}, report in {}",
        label_dir.display(),
        out.root().join("report.md").display()
    ))?;
    // A partial run must not look like success: the report covers what completed, and the
    // exit code says that something did not.
    if let Some(last) = total.last_error {
        return Err(EvalError::HolesFailed {
            failed: total.failed,
            holes: total.holes,
            last: last.to_string(),
        });
    }
    if let Some(unlabelled) = unlabelled {
        return Err(EvalError::HolesUnlabelled(unlabelled));
    }
    if let (uncomposed, Some(last)) = compositions.failures() {
        return Err(EvalError::CompositionsFailed {
            uncomposed,
            last: last.to_string(),
        });
    }
    Ok(())
}

/// RLPG-H and RLPG-R on the holes the method tables cover (the test split, or every hole
/// without one), with their compositions; holes of repositories not named on the command line
/// cannot be rebuilt and are left out.
struct Ranking<'r, 'e> {
    repos: &'r [PathBuf],
    settings: &'r Settings,
    observer: &'r dyn Observer,
    backends: &'r mut Backends<'e>,
    run: ClassifierEval<'r>,
    /// The repository being ranked: its name, index and backend.
    repository: Option<(String, Arc<RepoIndex>, Arc<dyn Backend>)>,
    variants: &'r [Variant],
}

impl Ranking<'_, '_> {
    /// Per hole of `holes` (holes of one repository), its classification where it has one.
    async fn rank(
        &mut self,
        choices: &report::Choices,
        holes: &[HoleRows],
        failures: &mut Failures,
    ) -> Result<Vec<Option<Classified>>, EvalError> {
        let mut out: Vec<Option<Classified>> = holes.iter().map(|_| None).collect();
        let Some(first) = holes.first() else {
            return Ok(out);
        };
        let name = &first.repository;
        let path = self.repos.iter().find(|p| repository_name(p) == *name);
        if self.variants.is_empty() || !choices.in_scope(name) || path.is_none() {
            return Ok(out);
        }
        if self.repository.as_ref().is_none_or(|(n, _, _)| n != name) {
            let path = path.expect("named above");
            (self.observer).note(&format!("{name}: ranking holes with the classifier…"))?;
            let index = Arc::new(RepoIndex::open_with_progress(
                path,
                self.settings.dirs.cache.as_deref(),
                self.settings.vendored,
                &|_, _| {},
            )?);
            let backend = self.backends.for_index(&index)?;
            self.repository = Some((name.clone(), index, backend));
        }
        let (_, index, backend) = self.repository.as_ref().expect("opened above");
        let mine: Vec<&HoleRows> = holes.iter().collect();
        let classified = self
            .run
            .run(index, &mine, backend.as_ref(), failures)
            .await?;
        let at: HashMap<&str, usize> = holes
            .iter()
            .enumerate()
            .map(|(i, h)| (h.hole_id.as_str(), i))
            .collect();
        for c in classified {
            if let Some(&i) = at.get(c.hole_id.as_str()) {
                out[i] = Some(c);
            }
        }
        Ok(out)
    }
}

/// Table 10 goes at the end of report.md and into compositions.json.
fn append_compositions(
    out: &std::path::Path,
    table: &[classified::CompositionRow],
) -> Result<(), EvalError> {
    if table.is_empty() {
        return Ok(());
    }
    let md = out.join("report.md");
    let mut text = std::fs::read_to_string(&md).at(&md)?;
    text.push_str(&classified::composition_markdown(table));
    std::fs::write(&md, text).at(&md)?;
    let json = out.join("compositions.json");
    let rows = serde_json::to_vec_pretty(table).at(&json)?;
    std::fs::write(&json, rows).at(&json)
}

/// Write ProCC's bandit, trained on these rows as the report trains it, beside the report and,
/// with --keep-bandit, into the data directory.
fn save_procc_bandit(
    bandit: &LinUcb,
    args: &Evaluation,
    settings: &Settings,
    observer: &dyn Observer,
) -> Result<(), EvalError> {
    let path = args.out.join(bandit::FILE);
    bandit.save(&path).at(&path)?;
    if args.keep_bandit {
        let dir = settings
            .dirs
            .data
            .clone()
            .ok_or(EvalError::NoDataDirectory {
                purpose: "for --keep-bandit",
            })?;
        let path = dir.join(bandit::FILE);
        bandit.save(&path).at(&path)?;
        observer.note(&format!("ProCC bandit kept in {}", path.display()))?;
    }
    Ok(())
}
