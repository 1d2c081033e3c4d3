//! Reports: RLPG's tables and plots from label rows (paper section 3, appendix D).
//!
//! Every method is a ranking of a hole's candidates ([`RankFn`]): the candidate it picks is
//! its first applicable one, and its first k are its k attempts for success@k. The built-in
//! methods are the default context, the oracle, a random proposal, the fixed proposal chosen
//! on the training repositories, keyhole's fixed ranking, the retrieved candidates each alone
//! (RLPG's baselines, RepoCoder, ProCC's perspectives) and ProCC's bandit over its
//! perspectives; later methods plug in through [`Builder::add_ranking`]. Repositories not
//! named as training are the test split.

mod holes;
mod markdown;
mod methods;
mod svg;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::Path;

use serde::Serialize;

pub use crate::label::{Grouped, Grouping, HoleRows, LabelledHoleError, group as group_holes};
pub use holes::Rate;
pub use methods::{RankFn, by_ranker};

use crate::candidate::{self, CandidateId, Numbering, ProposalSpec};
use crate::eval::LabelRow;
use crate::rank::FixedRanker;
use crate::rank::bandit::LinUcb;
use holes::{gain, percent};
use methods::{Attempts, Method};

/// success@k is reported for k = 1..=MAX_K (the range of the paper's Figure 2).
pub const MAX_K: usize = 20;

/// Everything the report shows; rates are percentages.
#[derive(Debug, Serialize)]
pub struct Report {
    pub summary: Summary,
    /// Caveats about how the numbers were obtained.
    pub notes: Vec<String>,
    /// Table 2: default context against the oracle, per split and overall.
    pub splits: Vec<SplitRow>,
    pub fixed_proposal: FixedChoice,
    /// Tables 3/8 and 12, on the holes named by `summary.method_scope`.
    pub methods: Vec<MethodRow>,
    /// Figure 2 (top), same holes as `methods`.
    pub success_at_k: Vec<Curve>,
    /// Figure 2 (bottom): mean success per prompt source where applicable, all holes.
    pub sources: Vec<Tally>,
    /// Figure 3: the same per context type.
    pub context_types: Vec<Tally>,
    /// Every proposal and the default context, all holes.
    pub proposals: Vec<ProposalRow>,
    /// Tables 13–15: each method's success rate per repository, in `methods` order.
    pub repositories: Vec<RepoRow>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub holes: usize,
    pub rows: usize,
    /// Holes without all their rows (missing rows count as inapplicable), and holes of the run
    /// without any row (a hole that failed, a shard stopped part way).
    pub incomplete_holes: usize,
    pub train: Vec<String>,
    pub test: Vec<String>,
    /// Which holes the method tables cover.
    pub method_scope: String,
    pub seed: u64,
}

#[derive(Debug, Serialize)]
pub struct SplitRow {
    pub split: String,
    pub repositories: usize,
    pub holes: usize,
    pub default: Rate,
    pub oracle: Rate,
    pub gain: Gain,
}

/// Relative improvement over the default context in percent; none when the default's rate is 0.
#[derive(Debug, Serialize)]
pub struct Gain {
    pub hole_wise: Option<f64>,
    pub repo_wise: Option<f64>,
}

impl Gain {
    fn over(rate: Rate, base: Rate) -> Gain {
        Gain {
            hole_wise: gain(rate.hole_wise, base.hole_wise),
            repo_wise: gain(rate.repo_wise, base.repo_wise),
        }
    }
}

/// The fixed prompt proposal and the hole-wise rate that chose it.
#[derive(Debug, Serialize)]
pub struct FixedChoice {
    /// As the run's profile numbers it ([`candidate::Numbering`]).
    pub id: usize,
    pub label: String,
    pub success: f64,
    /// `train`, or `all` when there is no training split.
    pub chosen_on: String,
    pub holes: usize,
}

#[derive(Debug, Serialize)]
pub struct MethodRow {
    pub name: String,
    pub success: Rate,
    pub gain: Gain,
    /// Mean edit similarity (percent) of the completion of the prompt it picks, hole-wise:
    /// how close the misses came.
    pub edit_similarity: f64,
    pub truncation: Truncation,
}

/// Table 12: percent of holes whose prompt, as the method picks it, had the default context
/// truncated, the proposal context truncated, either, or both.
#[derive(Debug, Default, PartialEq, Serialize)]
pub struct Truncation {
    pub default: f64,
    pub proposal: f64,
    pub either: f64,
    pub both: f64,
}

/// success@k for k = 1..=[`MAX_K`].
#[derive(Debug, Serialize)]
pub struct Curve {
    pub method: String,
    pub hole_wise: Vec<f64>,
    pub repo_wise: Vec<f64>,
}

/// Mean success of a group of candidates over the (hole, candidate) pairs where applicable.
#[derive(Debug, Serialize)]
pub struct Tally {
    pub name: String,
    pub applicable: usize,
    pub success: f64,
}

#[derive(Debug, Serialize)]
pub struct ProposalRow {
    /// As the run's profile numbers it ([`candidate::Numbering`]); rows are in that order.
    pub id: usize,
    pub label: String,
    /// Holes where the proposal is applicable, and their share of all holes.
    pub applicable: usize,
    pub applicability: f64,
    /// Success rate where applicable.
    pub success: f64,
}

#[derive(Debug, Serialize)]
pub struct RepoRow {
    pub repository: String,
    pub split: String,
    pub holes: usize,
    pub success: Vec<f64>,
}

/// The report with the built-in methods only.
pub fn build(rows: &[LabelRow], train: &[String], seed: u64) -> Report {
    Builder::new(rows, train, seed).build()
}

/// Builds a report with further methods as extra rows.
pub struct Builder<'a> {
    labels: Cow<'a, Grouped>,
    train: Vec<String>,
    seed: u64,
    extra: Vec<Method<'a>>,
    extra_notes: Vec<String>,
    missing_holes: usize,
}

impl<'a> Builder<'a> {
    /// `train` names the training repositories; `seed` draws the random method.
    pub fn new(rows: &[LabelRow], train: &[String], seed: u64) -> Self {
        Self::grouped(Cow::Owned(Grouped::from_rows(rows)), train, seed)
    }

    /// The report of rows already grouped by hole (as [`Grouping`] reads them from files).
    pub fn grouped(labels: Cow<'a, Grouped>, train: &[String], seed: u64) -> Self {
        Builder {
            labels,
            train: train.to_vec(),
            seed,
            extra: Vec::new(),
            extra_notes: Vec::new(),
            missing_holes: 0,
        }
    }

    /// Count `missing` holes of the run that have no rows among the incomplete ones.
    pub fn missing_holes(mut self, missing: usize) -> Self {
        self.missing_holes = missing;
        self
    }

    /// Add a caveat about how the added methods were obtained.
    pub fn add_note(mut self, note: impl Into<String>) -> Self {
        self.extra_notes.push(note.into());
        self
    }

    /// Add a method that orders each hole's candidate ids, best first.
    pub fn add_ranking(
        mut self,
        name: impl Into<String>,
        rank: impl Fn(&HoleRows) -> Vec<CandidateId> + 'a,
    ) -> Self {
        self.extra.push(Method {
            name: name.into(),
            rank: Box::new(rank),
        });
        self
    }

    pub fn build(self) -> Report {
        let holes = &self.labels.holes;
        let split = Split::new(holes, &self.train);
        let choice: Vec<&HoleRows> = split.choice.iter().map(|&i| &holes[i]).collect();
        // Rows of one run share a profile, and with it how ids are numbered to people.
        let numbering = self.labels.fidelity.map(|f| f.numbering());
        let numbering = numbering.unwrap_or_default();
        let order = methods::fixed_order(&choice, numbering);
        let fixed = order[0];
        let mut notes = split.notes.clone();
        notes.extend(self.extra_notes);
        notes.extend(why_not_notes(holes));
        let (procc, procc_note) = procc_picks(holes, &split);
        notes.push(procc_note);
        let mut all_methods = vec![
            method("default", methods::default_context()),
            method("oracle", methods::oracle()),
            method(
                "random context",
                methods::single(CandidateId::RANDOM_CONTEXT),
            ),
            method("random proposal", methods::random(self.seed)),
            method("file-level BM25", methods::single(CandidateId::FILE_BM25)),
            method(
                "identifier usage",
                methods::single(CandidateId::IDENTIFIER_USAGE),
            ),
            method(
                "typed-hole types",
                methods::single(CandidateId::TYPED_TYPES),
            ),
            method(
                "typed-hole headers",
                methods::single(CandidateId::TYPED_HEADERS),
            ),
            method(
                "fixed proposal",
                methods::fixed_proposal(order.iter().map(|&(id, _)| id).collect()),
            ),
            method("fixed ranking", Box::new(by_ranker(&FixedRanker))),
            method("RLPG-BM25", methods::rlpg_bm25()),
            method("RepoCoder", methods::single(CandidateId::REPOCODER)),
            method(
                "RepoCoder iter 2",
                methods::single(CandidateId::REPOCODER_ITERATION),
            ),
            method("ProCC lexical", methods::single(CandidateId::LEXICAL)),
            method(
                "ProCC hypothetical line",
                methods::single(CandidateId::HYPOTHETICAL_LINE),
            ),
            method("ProCC summary", methods::single(CandidateId::SUMMARY)),
            method("ProCC (LinUCB)", methods::picked(procc)),
        ];
        all_methods.extend(self.extra);
        let eval = Eval::new(holes, &all_methods);
        let mut summary = split.summary(self.labels.rows, holes, self.seed);
        summary.incomplete_holes += self.missing_holes;
        Report {
            summary,
            notes,
            splits: split.table2(&eval),
            fixed_proposal: FixedChoice {
                id: numbering.number(fixed.0),
                label: fixed.0.label().into(),
                success: fixed.1,
                chosen_on: split.chosen_on.into(),
                holes: split.choice.len(),
            },
            methods: eval.method_rows(&all_methods, &split.scope),
            success_at_k: eval.curves(&all_methods, &split.scope),
            sources: tallies(holes, |s| s.source.name()),
            context_types: tallies(holes, |s| s.context_type.abbreviation()),
            proposals: proposal_rows(holes, numbering),
            repositories: eval.repo_rows(&split),
        }
    }
}

/// ProCC's bandit trained as the report trains it (see `procc_picks`), for use beyond the
/// report.
pub fn train_procc(rows: &[LabelRow], train: &[String]) -> LinUcb {
    train_procc_grouped(&Grouped::from_rows(rows), train)
}

/// [`train_procc`] on rows already grouped by hole.
pub fn train_procc_grouped(labels: &Grouped, train: &[String]) -> LinUcb {
    let holes = &labels.holes;
    let split = Split::new(holes, train);
    let mut bandit = LinUcb::default();
    methods::procc_picks(&mut bandit, split.learn_from().map(|i| &holes[i]), true);
    bandit
}

/// ProCC (LinUCB)'s pick per hole, and a note saying how it learned: online over the training
/// holes in hole order, each pick made before its reward is seen, then frozen for the others;
/// with no training split, online over all holes.
fn procc_picks(holes: &[HoleRows], split: &Split) -> (HashMap<String, CandidateId>, String) {
    let mut bandit = LinUcb::default();
    let mut picks = methods::procc_picks(&mut bandit, split.learn_from().map(|i| &holes[i]), true);
    let note = if split.train.is_empty() {
        "ProCC (LinUCB) learned online over all holes in hole order, each pick made before its \
         exact match was seen."
            .to_string()
    } else {
        picks.extend(methods::procc_picks(
            &mut bandit,
            split.test.iter().map(|&i| &holes[i]),
            false,
        ));
        format!(
            "ProCC (LinUCB) learned online over the {} training holes in hole order, then \
             picked on the test holes without learning.",
            split.train.len()
        )
    };
    let picks = picks
        .into_iter()
        .map(|(hole, id)| (hole.to_string(), id))
        .collect();
    (picks, note)
}

/// Why candidates could not apply, where the rows say: one note per candidate and reason.
fn why_not_notes(holes: &[HoleRows]) -> Vec<String> {
    let mut reasons: BTreeMap<(CandidateId, &str), usize> = BTreeMap::new();
    for hole in holes {
        for id in CandidateId::all() {
            let why = hole.row(id).and_then(|r| r.why_not.as_deref());
            // A candidate the run left out is named once, in the run's candidate set.
            if let Some(why) = why.filter(|&w| w != crate::eval::runner::NOT_SELECTED) {
                *reasons.entry((id, why)).or_default() += 1;
            }
        }
    }
    reasons
        .into_iter()
        .map(|((id, why), n)| format!("{} is not applicable on {n} holes: {why}.", id.label()))
        .collect()
}

fn method<'a>(name: &str, rank: RankFn<'a>) -> Method<'a> {
    Method {
        name: name.into(),
        rank,
    }
}

/// Which holes are training and test, and which holes each part of the report uses.
struct Split {
    train_repos: Vec<String>,
    train: Vec<usize>,
    test: Vec<usize>,
    /// Holes the fixed proposal is chosen on, and what to call them.
    choice: Vec<usize>,
    chosen_on: &'static str,
    /// Holes the method tables cover, and what to call them.
    scope: Vec<usize>,
    scope_name: &'static str,
    notes: Vec<String>,
}

impl Split {
    fn new(holes: &[HoleRows], train_repos: &[String]) -> Split {
        let (train, test): (Vec<usize>, Vec<usize>) =
            (0..holes.len()).partition(|&i| named(train_repos, &holes[i].repository));
        let all: Vec<usize> = (0..holes.len()).collect();
        let mut notes = Vec::new();
        let missing: Vec<&str> = train_repos
            .iter()
            .filter(|t| !holes.iter().any(|h| h.repository == **t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "Training repositories without label rows: {}.",
                missing.join(", ")
            ));
        }
        let (choice, chosen_on) = if train.is_empty() {
            notes.push(
                "No training split: the fixed proposal was chosen on all holes, test holes \
                 included, so its row is not a held-out result."
                    .into(),
            );
            (all.clone(), "all")
        } else {
            (train.clone(), "train")
        };
        let (scope, scope_name) = if test.is_empty() {
            notes.push("No test split: the method tables cover all holes.".into());
            (all, "all repositories")
        } else {
            (test.clone(), "test repositories")
        };
        Split {
            train_repos: train_repos.to_vec(),
            train,
            test,
            choice,
            chosen_on,
            scope,
            scope_name,
            notes,
        }
    }

    /// The holes ProCC's bandit learns from: the training split, else all holes.
    fn learn_from(&self) -> impl Iterator<Item = usize> + '_ {
        let all = self
            .train
            .is_empty()
            .then(|| 0..self.train.len() + self.test.len());
        self.train.iter().copied().chain(all.into_iter().flatten())
    }

    fn is_train(&self, repository: &str) -> bool {
        named(&self.train_repos, repository)
    }

    fn summary(&self, rows: usize, holes: &[HoleRows], seed: u64) -> Summary {
        let repos = |subset: &[usize]| -> Vec<String> {
            let names: BTreeSet<&str> = subset
                .iter()
                .map(|&i| holes[i].repository.as_str())
                .collect();
            names.into_iter().map(String::from).collect()
        };
        Summary {
            holes: holes.len(),
            rows,
            incomplete_holes: holes.iter().filter(|h| !h.is_complete()).count(),
            train: repos(&self.train),
            test: repos(&self.test),
            method_scope: self.scope_name.into(),
            seed,
        }
    }

    fn table2(&self, eval: &Eval) -> Vec<SplitRow> {
        let all: Vec<usize> = (0..eval.holes.len()).collect();
        [("train", &self.train), ("test", &self.test), ("all", &all)]
            .into_iter()
            .filter(|(_, subset)| !subset.is_empty())
            .map(|(name, subset)| {
                let (default, oracle) =
                    (eval.rate(DEFAULT, subset, 1), eval.rate(ORACLE, subset, 1));
                SplitRow {
                    split: name.into(),
                    repositories: eval.repositories(subset).len(),
                    holes: subset.len(),
                    default,
                    oracle,
                    gain: Gain::over(oracle, default),
                }
            })
            .collect()
    }
}

fn named(list: &[String], name: &str) -> bool {
    list.iter().any(|n| n == name)
}

/// Positions of the built-in methods that other rows refer to.
const DEFAULT: usize = 0;
const ORACLE: usize = 1;

/// Every method's attempts on every hole.
struct Eval<'h> {
    holes: &'h [HoleRows],
    /// `attempts[method][hole]`.
    attempts: Vec<Vec<Attempts>>,
}

impl<'h> Eval<'h> {
    fn new(holes: &'h [HoleRows], methods: &[Method]) -> Self {
        let attempts = methods
            .iter()
            .map(|m| {
                holes
                    .iter()
                    .map(|h| methods::attempts((m.rank)(h), h))
                    .collect()
            })
            .collect();
        Eval { holes, attempts }
    }

    /// success@k of method `m` on `subset`.
    fn rate(&self, m: usize, subset: &[usize], k: usize) -> Rate {
        holes::rate(subset.iter().map(|&i| {
            (
                self.holes[i].repository.as_str(),
                self.attempts[m][i].success_at(k),
            )
        }))
    }

    /// The holes of `subset` by repository.
    fn repositories(&self, subset: &[usize]) -> BTreeMap<&'h str, Vec<usize>> {
        let mut repos: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in subset {
            repos
                .entry(self.holes[i].repository.as_str())
                .or_default()
                .push(i);
        }
        repos
    }

    fn method_rows(&self, methods: &[Method], scope: &[usize]) -> Vec<MethodRow> {
        let default = self.rate(DEFAULT, scope, 1);
        methods
            .iter()
            .enumerate()
            .map(|(m, method)| {
                let success = self.rate(m, scope, 1);
                MethodRow {
                    name: method.name.clone(),
                    success,
                    gain: Gain::over(success, default),
                    edit_similarity: self.edit_similarity(m, scope),
                    truncation: self.truncation(m, scope),
                }
            })
            .collect()
    }

    fn edit_similarity(&self, m: usize, scope: &[usize]) -> f64 {
        let picked: Vec<f64> = scope
            .iter()
            .filter_map(|&i| self.holes[i].row(self.attempts[m][i].top))
            // A failed request (rows of older versions) came no closer than a miss.
            .map(|r| if r.failed { 0.0 } else { r.edit_similarity })
            .collect();
        match picked.len() {
            0 => 0.0,
            n => 100.0 * picked.iter().sum::<f64>() / n as f64,
        }
    }

    fn truncation(&self, m: usize, scope: &[usize]) -> Truncation {
        let flags: Vec<(bool, bool)> = scope
            .iter()
            .filter_map(|&i| self.holes[i].row(self.attempts[m][i].top))
            .map(|r| (r.default_truncated, r.proposal_truncated))
            .collect();
        let share = |f: fn(&(bool, bool)) -> bool| {
            percent(flags.iter().filter(|x| f(x)).count(), scope.len())
        };
        Truncation {
            default: share(|&(d, _)| d),
            proposal: share(|&(_, p)| p),
            either: share(|&(d, p)| d || p),
            both: share(|&(d, p)| d && p),
        }
    }

    fn curves(&self, methods: &[Method], scope: &[usize]) -> Vec<Curve> {
        methods
            .iter()
            .enumerate()
            .map(|(m, method)| {
                let rates: Vec<Rate> = (1..=MAX_K).map(|k| self.rate(m, scope, k)).collect();
                Curve {
                    method: method.name.clone(),
                    hole_wise: rates.iter().map(|r| r.hole_wise).collect(),
                    repo_wise: rates.iter().map(|r| r.repo_wise).collect(),
                }
            })
            .collect()
    }

    fn repo_rows(&self, split: &Split) -> Vec<RepoRow> {
        let all: Vec<usize> = (0..self.holes.len()).collect();
        self.repositories(&all)
            .into_iter()
            .map(|(repo, subset)| RepoRow {
                repository: repo.into(),
                split: if split.is_train(repo) {
                    "train"
                } else {
                    "test"
                }
                .into(),
                holes: subset.len(),
                success: (0..self.attempts.len())
                    .map(|m| self.rate(m, &subset, 1).hole_wise)
                    .collect(),
            })
            .collect()
    }
}

/// (applicable, successful) (hole, candidate) pairs per candidate id.
fn counts(holes: &[HoleRows]) -> Vec<(usize, usize)> {
    CandidateId::all()
        .map(|id| {
            let applicable = holes.iter().filter(|h| h.applicable(id)).count();
            let successes = holes.iter().filter(|h| h.succeeded(id)).count();
            (applicable, successes)
        })
        .collect()
}

/// Mean success where applicable per group of proposals, groups in Table 7 order.
fn tallies(holes: &[HoleRows], key: fn(&ProposalSpec) -> &'static str) -> Vec<Tally> {
    let counts = counts(holes);
    let mut groups: Vec<(&str, usize, usize)> = Vec::new();
    for spec in candidate::proposal_specs() {
        let name = key(spec);
        let (applicable, successes) = counts[spec.id.index()];
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => (g.1, g.2) = (g.1 + applicable, g.2 + successes),
            None => groups.push((name, applicable, successes)),
        }
    }
    groups
        .into_iter()
        .map(|(name, applicable, successes)| Tally {
            name: name.into(),
            applicable,
            success: percent(successes, applicable),
        })
        .collect()
}

/// Every candidate with rows (ids a run did not write, such as reserved ones, are left out).
fn proposal_rows(holes: &[HoleRows], numbering: Numbering) -> Vec<ProposalRow> {
    let mut rows: Vec<ProposalRow> = CandidateId::all()
        .zip(counts(holes))
        .filter(|&(id, _)| holes.iter().any(|h| h.row(id).is_some()))
        .map(|(id, (applicable, successes))| ProposalRow {
            id: numbering.number(id),
            label: id.label().into(),
            applicable,
            applicability: percent(applicable, holes.len()),
            success: percent(successes, applicable),
        })
        .collect();
    rows.sort_by_key(|r| r.id);
    rows
}

/// Write `report.md`, `report.json` and `plots/*.svg` into `dir`.
pub fn write(report: &Report, dir: &Path) -> io::Result<()> {
    let plots = dir.join(svg::PLOT_DIR);
    fs::create_dir_all(&plots)?;
    fs::write(dir.join("report.md"), markdown::render(report))?;
    fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    for (name, text) in svg::plots(report) {
        fs::write(plots.join(name), text)?;
    }
    Ok(())
}
