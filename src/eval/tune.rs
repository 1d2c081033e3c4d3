//! What `keyhole tune` measures on the held-out holes of the user's own repositories: the
//! success of the tuned RLPG-H's top choice, of the classifier that ranked before it, of the
//! best single proposal, of the fixed order, of the default context, and of the oracle; and
//! the run itself ([`run`], in `pipeline`).

use std::collections::{BTreeMap, BTreeSet};

mod pipeline;
mod recorded;
pub use pipeline::{Tuned, Tuning, run};

use serde::Serialize;

use crate::candidate::CandidateId;
use crate::label::{HoleRows, LabelRow, LabelledHoleError, group};
use crate::rank::classifier::train::{Holdout, HoldoutError, TrainReport};
use crate::rank::classifier::{Classifier, ModelError, Variant};
use crate::rank::{FixedRanker, RankInput};
use crate::repo::RepoIndex;

/// Share of a single repository's holes held out, as whole files.
const HELD_OUT_FILES: f64 = 0.2;

/// The holes held out for validation and the report, given each repository's name and the
/// files of its sampled holes (one entry per hole): the last repository, or with one
/// repository about a fifth of its holes, as whole files chosen by a hash of their paths (the
/// same on every run).
pub fn holdout(repositories: &[(String, Vec<String>)]) -> Result<Holdout, HoldoutError> {
    let Some((name, files)) = repositories.last() else {
        return Err(HoldoutError::NoRepositories);
    };
    if repositories.len() > 1 {
        return Ok(Holdout::Repositories(vec![name.clone()]));
    }
    let mut holes: BTreeMap<&str, usize> = BTreeMap::new();
    for file in files {
        *holes.entry(file).or_default() += 1;
    }
    if holes.len() < 2 {
        return Err(HoldoutError::TooFewFiles {
            repository: name.clone(),
            files: holes.len(),
        });
    }
    let mut order: Vec<(&str, usize)> = holes.into_iter().collect();
    order.sort_by_key(|(file, _)| *blake3::hash(file.as_bytes()).as_bytes());
    let wanted = (files.len() as f64 * HELD_OUT_FILES).ceil() as usize;
    let mut held = BTreeSet::new();
    let mut count = 0;
    // At least one file held out, and at least one left to train on.
    for (file, n) in &order[..order.len() - 1] {
        if count >= wanted {
            break;
        }
        held.insert((name.clone(), file.to_string()));
        count += n;
    }
    Ok(Holdout::Files(held))
}

/// One held-out hole: its labels and the probabilities each classifier gives its candidates.
pub struct Scored {
    pub rows: HoleRows,
    pub tuned: Vec<f32>,
    pub before: Vec<f32>,
}

/// Why a held-out hole could not be scored (a line of what scoring skipped).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unscored {
    #[error(transparent)]
    Hole(#[from] LabelledHoleError),
    #[error("{hole_id}: {source}")]
    Classifier {
        hole_id: String,
        source: Box<ModelError>,
    },
}

/// `rows`, a held-out hole of `index`, scored by RLPG-H of `tuned` and of `before`.
pub fn score(
    index: &RepoIndex,
    rows: HoleRows,
    tuned: &Classifier,
    before: &Classifier,
) -> Result<Scored, Unscored> {
    let hole = rows.hole(index)?;
    // RLPG-H reads the hole window alone.
    let input = RankInput::new(index, &hole, &[]);
    let probabilities = |classifier: &Classifier| {
        classifier
            .probabilities(Variant::H, &input)
            .map_err(|source| Unscored::Classifier {
                hole_id: rows.hole_id.clone(),
                source: Box::new(source),
            })
    };
    Ok(Scored {
        tuned: probabilities(tuned)?,
        before: probabilities(before)?,
        rows,
    })
}

/// The held-out holes of `rows` (repository by name in `indexes`), scored by `tuned` and
/// `before`; and one line for each hole that could not be found again.
pub fn score_held_out(
    rows: &[LabelRow],
    holdout: &Holdout,
    indexes: &[(&str, &RepoIndex)],
    tuned: &Classifier,
    before: &Classifier,
) -> (Vec<Scored>, Vec<String>) {
    let (mut scored, mut skipped) = (Vec::new(), Vec::new());
    for hole in group(rows) {
        if !holdout.holds(&hole.repository, hole.file()) {
            continue;
        }
        let Some(&(_, index)) = indexes.iter().find(|(name, _)| *name == hole.repository) else {
            skipped.push(format!("{}: not among the repositories", hole.hole_id));
            continue;
        };
        match score(index, hole, tuned, before) {
            Ok(s) => scored.push(s),
            Err(why) => skipped.push(why.to_string()),
        }
    }
    (scored, skipped)
}

/// Top-1 success on the held-out holes, percent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeldOut {
    pub holes: usize,
    pub tuned: f64,
    pub before: f64,
    /// The single proposal that does best on these holes (the default context where it does
    /// not apply): chosen in hindsight, so no fixed choice does better.
    pub best_fixed: f64,
    pub best_fixed_id: CandidateId,
    /// The fixed order's first applicable candidate.
    pub fixed_order: f64,
    pub default: f64,
    /// Any candidate succeeded.
    pub oracle: f64,
}

/// The comparison on `holes`.
pub fn compare(holes: &[Scored]) -> HeldOut {
    let rate = |hit: &dyn Fn(&Scored) -> bool| {
        100.0 * holes.iter().filter(|h| hit(h)).count() as f64 / holes.len().max(1) as f64
    };
    let top = |h: &Scored, p: &[f32]| {
        CandidateId::rlpg()
            .filter(|&id| h.rows.applicable(id))
            .max_by(|&a, &b| p[a.index()].total_cmp(&p[b.index()]).then(b.cmp(&a)))
            .unwrap_or(CandidateId::DEFAULT)
    };
    let fixed = |h: &Scored, id: CandidateId| match h.rows.applicable(id) {
        true => h.rows.succeeded(id),
        false => h.rows.succeeded(CandidateId::DEFAULT),
    };
    // In the fixed order, so that a tie goes to the proposal the fixed ranker leads with.
    let (best_fixed_id, best_fixed) = FixedRanker::order()
        .map(|id| (id, rate(&|h| fixed(h, id))))
        .fold((CandidateId::DEFAULT, f64::MIN), |best, next| {
            if next.1 > best.1 { next } else { best }
        });
    HeldOut {
        holes: holes.len(),
        tuned: rate(&|h| h.rows.succeeded(top(h, &h.tuned))),
        before: rate(&|h| h.rows.succeeded(top(h, &h.before))),
        best_fixed: best_fixed.max(0.0),
        best_fixed_id,
        fixed_order: rate(&|h| {
            let first = FixedRanker::order().find(|&id| h.rows.applicable(id));
            h.rows.succeeded(first.unwrap_or(CandidateId::DEFAULT))
        }),
        default: rate(&|h| h.rows.succeeded(CandidateId::DEFAULT)),
        oracle: rate(&|h| CandidateId::rlpg().any(|id| h.rows.succeeded(id))),
    }
}

/// What `keyhole tune` writes beside the tuned model (report.json, and report.md from it).
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    pub backend: String,
    pub model: String,
    pub repositories: Vec<String>,
    /// What was held out: a repository, or files of the one repository.
    pub held_out: String,
    /// The classifier that ranked before (the bundled one, or an earlier tuning).
    pub before: String,
    /// Whether this run labelled from batch files (then it sent nothing itself).
    pub batch: bool,
    /// Requests this run sent, and the candidates labelled from another candidate's
    /// identical request.
    pub requests: usize,
    pub shared: usize,
    pub comparison: HeldOut,
    pub training: TrainReport,
}

impl TuneReport {
    pub fn markdown(&self) -> String {
        let c = &self.comparison;
        let t = &self.training;
        let model = match self.model == self.backend {
            true => String::new(),
            false => format!(" ({})", self.model),
        };
        let gain = |success: f64| match c.default > 0.0 {
            true => format!("{:+.1}%", 100.0 * (success - c.default) / c.default),
            false => "-".to_string(),
        };
        let mut out = format!(
            "# RLPG-H tuned for {}{model}\n\n\
             Labelled with the backend `{}` on {}; trained on {} holes, {} holes held out ({}), \
             which also chose the epoch ({} of {}, {:.0} s). {}\n\n\
             | On {} held-out holes | Top-1 success | vs default |\n| --- | --- | --- |\n",
            self.backend,
            self.backend,
            self.repositories.join(", "),
            t.train_holes,
            t.validation_holes,
            self.held_out,
            t.best_epoch,
            t.epochs.len(),
            t.seconds,
            match self.batch {
                true => "This run labelled from batch files.".to_string(),
                false => format!(
                    "This run sent {} requests; {} more candidates were labelled from an \
                     identical prompt's answer.",
                    self.requests, self.shared
                ),
            },
            c.holes,
        );
        let rows = [
            ("RLPG-H tuned for this model".to_string(), c.tuned),
            (format!("RLPG-H before tuning ({})", self.before), c.before),
            (
                format!(
                    "best fixed proposal, in hindsight (#{} {})",
                    c.best_fixed_id,
                    c.best_fixed_id.label()
                ),
                c.best_fixed,
            ),
            ("fixed order's first".to_string(), c.fixed_order),
            ("default context".to_string(), c.default),
            ("oracle (best candidate per hole)".to_string(), c.oracle),
        ];
        for (what, success) in rows {
            out += &format!("| {what} | {success:.1}% | {} |\n", gain(success));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hole whose candidates `ids` apply, of which `hits` succeed.
    fn hole(n: usize, ids: &[usize], hits: &[usize], tuned: usize, before: usize) -> Scored {
        let rows: Vec<LabelRow> = CandidateId::all()
            .map(|id| {
                let applicable = ids.contains(&id.index()) || id == CandidateId::DEFAULT;
                let row = serde_json::json!({
                    "hole_id": format!("r/A.java:{n}:1"), "repository": "r", "file": "A.java",
                    "line": n, "column": 1, "proposal_id": id.index(), "applicable": applicable,
                    "success": applicable && hits.contains(&id.index()), "edit_similarity": 0.0,
                    "edit_distance": 0, "prediction": "", "target": "", "proposal_tokens": 0,
                    "default_tokens": 0, "proposal_truncated": false, "default_truncated": false,
                    "backend": "b", "error": null,
                });
                serde_json::from_value(row).unwrap()
            })
            .collect();
        let favour = |id: usize| {
            let mut p = vec![0.1; 63];
            p[id] = 0.9;
            p
        };
        Scored {
            rows: group(&rows).remove(0),
            tuned: favour(tuned),
            before: favour(before),
        }
    }

    #[test]
    fn one_repository_holds_out_whole_files_the_same_way_every_time() {
        let files: Vec<String> = (0..50).map(|i| format!("F{}.java", i % 10)).collect();
        let repos = [("r".to_string(), files)];
        let Ok(Holdout::Files(held)) = holdout(&repos) else {
            panic!("files held out");
        };
        // Ten holes or more of fifty, five per file: two files at least, never all ten.
        assert!((2..10).contains(&held.len()), "{held:?}");
        assert_eq!(holdout(&repos), Ok(Holdout::Files(held)));
        let one = [("r".to_string(), vec!["A.java".to_string(); 3])];
        let one_file = holdout(&one).unwrap_err();
        assert!(
            one_file
                .to_string()
                .starts_with("r: its sampled holes are in 1 file;")
        );
        let two = [("a".to_string(), vec![]), ("b".to_string(), vec![])];
        assert_eq!(holdout(&two), Ok(Holdout::Repositories(vec!["b".into()])));
    }

    #[test]
    fn each_ranker_is_scored_by_its_top_choice_among_the_applicable_candidates() {
        let holes = [
            // The tuned model picks 7, which succeeds; before, 6, which does not.
            hole(1, &[6, 7], &[7], 7, 6),
            // Both pick 20, which does not apply here: their top is the best applicable one.
            hole(2, &[6], &[62], 20, 20),
            hole(3, &[6, 7], &[7], 6, 7),
            hole(4, &[5], &[], 5, 5),
        ];
        let c = compare(&holes);
        assert_eq!(c.holes, 4);
        assert_eq!(c.tuned, 25.0);
        assert_eq!(c.before, 25.0);
        // #7 wins on holes 1 and 3; on hole 2 it falls back to the default, which succeeds.
        assert_eq!((c.best_fixed_id, c.best_fixed), (CandidateId::nth(7), 75.0));
        assert_eq!(c.default, 25.0);
        assert_eq!(c.oracle, 75.0);
        // The fixed order leads with 6, then 7.
        assert_eq!(c.fixed_order, 0.0);
    }
}
