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

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

pub use crate::label::{Grouped, HoleRows};
pub use holes::Rate;
pub use methods::{RankFn, by_ranker};

use crate::candidate::{self, CandidateId, Numbering, ProposalSpec};
use crate::context::fidelity::Fidelity;
use crate::eval::LabelRow;
use crate::eval::labels::LabelIndex;
use crate::rank::FixedRanker;
use crate::rank::bandit::LinUcb;
use holes::{gain, percent};

/// A row of the method tables.
struct Method<'a> {
    name: String,
    rank: Rank<'a>,
}

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

/// Where a report reads its holes: one at a time, in hole id order, as often as it needs (a
/// [`LabelIndex`] of label files, or holes held in memory).
pub trait HoleSource {
    /// The holes of the repositories `wanted` names, in hole id order.
    fn holes<'a>(
        &'a self,
        wanted: &'a dyn Fn(&str) -> bool,
    ) -> Box<dyn Iterator<Item = io::Result<HoleRows>> + 'a>;
    /// How many holes each repository has.
    fn repositories(&self) -> BTreeMap<String, usize>;
    /// How many rows were read.
    fn rows(&self) -> usize;
    /// The profile of the first row read: rows of one run share it.
    fn fidelity(&self) -> Option<Fidelity>;
}

impl HoleSource for LabelIndex {
    fn holes<'a>(
        &'a self,
        wanted: &'a dyn Fn(&str) -> bool,
    ) -> Box<dyn Iterator<Item = io::Result<HoleRows>> + 'a> {
        Box::new(LabelIndex::holes(self, wanted))
    }

    fn repositories(&self) -> BTreeMap<String, usize> {
        LabelIndex::repositories(self)
    }

    fn rows(&self) -> usize {
        LabelIndex::rows(self)
    }

    fn fidelity(&self) -> Option<Fidelity> {
        LabelIndex::fidelity(self)
    }
}

impl HoleSource for Grouped {
    fn holes<'a>(
        &'a self,
        wanted: &'a dyn Fn(&str) -> bool,
    ) -> Box<dyn Iterator<Item = io::Result<HoleRows>> + 'a> {
        let holes = self.holes.iter().filter(move |h| wanted(&h.repository));
        Box::new(holes.cloned().map(Ok))
    }

    fn repositories(&self) -> BTreeMap<String, usize> {
        let mut holes = BTreeMap::new();
        for hole in &self.holes {
            *holes.entry(hole.repository.clone()).or_default() += 1;
        }
        holes
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn fidelity(&self) -> Option<Fidelity> {
        self.fidelity
    }
}

/// The report with the built-in methods only.
pub fn build(rows: &[LabelRow], train: &[String], seed: u64) -> Report {
    Builder::new(rows, train, seed).build()
}

/// The report of the holes of `labels` with the built-in methods only, read a hole at a time.
pub fn build_from(labels: &dyn HoleSource, train: &[String], seed: u64) -> io::Result<Report> {
    let choices = Choices::learn(labels, train)?;
    let mut scoring = Scoring::new(&choices, seed, Vec::new());
    for hole in labels.holes(&|_| true) {
        scoring.add(&hole?, &[]);
    }
    Ok(scoring.finish(Vec::new(), 0))
}

/// Builds a report of rows held in memory, with further methods as extra rows: the two passes
/// of [`Choices`] and [`Scoring`] over them.
pub struct Builder<'a> {
    labels: Grouped,
    train: Vec<String>,
    seed: u64,
    extra: Vec<(String, RankFn<'a>)>,
}

impl<'a> Builder<'a> {
    /// `train` names the training repositories; `seed` draws the random method.
    pub fn new(rows: &[LabelRow], train: &[String], seed: u64) -> Self {
        Builder {
            labels: Grouped::from_rows(rows),
            train: train.to_vec(),
            seed,
            extra: Vec::new(),
        }
    }

    /// Add a method that orders each hole's candidate ids, best first.
    pub fn add_ranking(
        mut self,
        name: impl Into<String>,
        rank: impl Fn(&HoleRows) -> Vec<CandidateId> + 'a,
    ) -> Self {
        self.extra.push((name.into(), Box::new(rank)));
        self
    }

    pub fn build(self) -> Report {
        let choices = Choices::learn(&self.labels, &self.train).expect("holes in memory");
        let names = self.extra.iter().map(|(name, _)| name.clone()).collect();
        let mut scoring = Scoring::new(&choices, self.seed, names);
        for hole in &self.labels.holes {
            let extra: Vec<Vec<CandidateId>> =
                self.extra.iter().map(|(_, rank)| rank(hole)).collect();
            scoring.add(hole, &extra);
        }
        scoring.finish(Vec::new(), 0)
    }
}

/// ProCC's bandit trained as the report trains it (see [`Choices`]), for use beyond the
/// report.
pub fn train_procc(rows: &[LabelRow], train: &[String]) -> LinUcb {
    let choices = Choices::learn(&Grouped::from_rows(rows), train).expect("holes in memory");
    choices.bandit
}

/// The report's first pass: what must be learnt from a set of holes before any hole can be
/// scored. The fixed proposal is chosen on the training holes (all holes without a training
/// split), and ProCC's bandit learns online over the same holes in hole id order, each pick
/// made before its reward is seen.
pub struct Choices {
    split: Split,
    numbering: Numbering,
    /// Proposals with their rate as the fixed proposal on the choice holes, best first.
    fixed: Vec<(CandidateId, f64)>,
    /// ProCC's bandit once it learnt from every choice hole.
    pub bandit: LinUcb,
    rows: usize,
}

impl Choices {
    /// Read the choice holes of `labels` once; `train` names the training repositories.
    pub fn learn(labels: &dyn HoleSource, train: &[String]) -> io::Result<Choices> {
        let split = Split::new(labels.repositories(), train);
        let numbering = labels.fidelity().map(|f| f.numbering()).unwrap_or_default();
        let mut fixed = methods::FixedTally::default();
        let mut bandit = LinUcb::default();
        let in_choice = |repository: &str| split.in_choice(repository);
        for hole in labels.holes(&in_choice) {
            let hole = hole?;
            fixed.add(&hole);
            methods::procc_learn(&mut bandit, &hole);
        }
        Ok(Choices {
            fixed: fixed.order(numbering),
            numbering,
            bandit,
            rows: labels.rows(),
            split,
        })
    }

    /// The training repositories' names, as given.
    pub fn is_train(&self, repository: &str) -> bool {
        self.split.is_train(repository)
    }

    /// Whether the method tables cover `repository`'s holes (the test split, or every hole
    /// without one).
    pub fn in_scope(&self, repository: &str) -> bool {
        self.split.in_scope(repository)
    }
}

/// The report's second pass: every hole scored as it comes, in hole id order, into counts per
/// repository, so that what it holds does not grow with the number of holes.
pub struct Scoring<'c> {
    choices: &'c Choices,
    seed: u64,
    methods: Vec<Method<'static>>,
    /// ProCC's bandit learning again as it learnt in the first pass (the same holes in the same
    /// order make the same picks), for the picks on the holes it learns from.
    procc: LinUcb,
    repositories: BTreeMap<String, RepoTally>,
    /// Per method, on the holes the tables cover.
    scope: Vec<ScopeTally>,
    scope_holes: usize,
    /// Per candidate: (applicable, successful, holes with a row).
    candidates: Vec<(usize, usize, usize)>,
    reasons: BTreeMap<(CandidateId, Arc<str>), usize>,
    holes: usize,
    incomplete: usize,
}

/// One repository's holes and each method's hits at k = 1..=MAX_K among them.
struct RepoTally {
    holes: usize,
    /// `hits[method][k - 1]`.
    hits: Vec<[usize; MAX_K]>,
}

/// What a method's picks came to on the holes the tables cover.
#[derive(Clone, Default)]
struct ScopeTally {
    /// Edit similarity summed in hole id order, over the picks that have a row.
    edit_similarity: f64,
    picked: usize,
    /// Holes whose pick had the default context, the proposal context, either or both cut.
    truncated: [usize; 4],
}

impl<'c> Scoring<'c> {
    /// Scores with the built-in methods and `extra`, methods whose rankings come with each hole.
    pub fn new(choices: &'c Choices, seed: u64, extra: Vec<String>) -> Self {
        let order: Vec<CandidateId> = choices.fixed.iter().map(|&(id, _)| id).collect();
        let mut all = vec![
            method("default", Rank::Fn(methods::default_context())),
            method("oracle", Rank::Fn(methods::oracle())),
            method(
                "random context",
                Rank::Fn(methods::single(CandidateId::RANDOM_CONTEXT)),
            ),
            method("random proposal", Rank::Fn(methods::random(seed))),
            method(
                "file-level BM25",
                Rank::Fn(methods::single(CandidateId::FILE_BM25)),
            ),
            method(
                "identifier usage",
                Rank::Fn(methods::single(CandidateId::IDENTIFIER_USAGE)),
            ),
            method(
                "typed-hole types",
                Rank::Fn(methods::single(CandidateId::TYPED_TYPES)),
            ),
            method(
                "typed-hole headers",
                Rank::Fn(methods::single(CandidateId::TYPED_HEADERS)),
            ),
            method("fixed proposal", Rank::Fn(methods::fixed_proposal(order))),
            method("fixed ranking", Rank::Fn(Box::new(by_ranker(&FixedRanker)))),
            method("RLPG-BM25", Rank::Fn(methods::rlpg_bm25())),
            method(
                "RepoCoder",
                Rank::Fn(methods::single(CandidateId::REPOCODER)),
            ),
            method(
                "RepoCoder iter 2",
                Rank::Fn(methods::single(CandidateId::REPOCODER_ITERATION)),
            ),
            method(
                "ProCC lexical",
                Rank::Fn(methods::single(CandidateId::LEXICAL)),
            ),
            method(
                "ProCC hypothetical line",
                Rank::Fn(methods::single(CandidateId::HYPOTHETICAL_LINE)),
            ),
            method(
                "ProCC summary",
                Rank::Fn(methods::single(CandidateId::SUMMARY)),
            ),
            method("ProCC (LinUCB)", Rank::Procc),
        ];
        all.extend(
            extra
                .into_iter()
                .enumerate()
                .map(|(i, name)| method(&name, Rank::Extra(i))),
        );
        Scoring {
            choices,
            seed,
            scope: vec![ScopeTally::default(); all.len()],
            methods: all,
            procc: LinUcb::default(),
            repositories: BTreeMap::new(),
            scope_holes: 0,
            candidates: vec![(0, 0, 0); CandidateId::COUNT],
            reasons: BTreeMap::new(),
            holes: 0,
            incomplete: 0,
        }
    }

    /// How many holes were scored.
    pub fn holes(&self) -> usize {
        self.holes
    }

    /// Score the next hole (in hole id order), with the rankings of the extra methods.
    pub fn add(&mut self, hole: &HoleRows, extra: &[Vec<CandidateId>]) {
        let split = &self.choices.split;
        let learns = split.in_choice(&hole.repository);
        // Where the bandit learnt, its pick is the one it made then; elsewhere the trained
        // bandit picks without learning.
        let procc = match learns {
            true => methods::procc_learn(&mut self.procc, hole),
            false => methods::procc_pick(&self.choices.bandit, hole),
        };
        let in_scope = split.in_scope(&hole.repository);
        let methods = self.methods.len();
        let repo = self
            .repositories
            .entry(hole.repository.clone())
            .or_insert_with(|| RepoTally {
                holes: 0,
                hits: vec![[0; MAX_K]; methods],
            });
        repo.holes += 1;
        for (m, method) in self.methods.iter().enumerate() {
            let order = match &method.rank {
                Rank::Fn(rank) => rank(hole),
                Rank::Procc => procc.map_or(vec![CandidateId::DEFAULT], |id| {
                    vec![id, CandidateId::DEFAULT]
                }),
                Rank::Extra(i) => extra.get(*i).cloned().unwrap_or_default(),
            };
            let attempts = methods::attempts(order, hole);
            if let Some(first) = attempts.first_hit {
                repo.hits[m][first.min(MAX_K)..]
                    .iter_mut()
                    .for_each(|h| *h += 1);
            }
            if !in_scope {
                continue;
            }
            if let Some(row) = hole.row(attempts.top) {
                let tally = &mut self.scope[m];
                // A failed request (rows of older versions) came no closer than a miss.
                tally.edit_similarity += if row.failed { 0.0 } else { row.edit_similarity };
                tally.picked += 1;
                let (d, p) = (row.default_truncated, row.proposal_truncated);
                for (count, cut) in tally.truncated.iter_mut().zip([d, p, d || p, d && p]) {
                    *count += usize::from(cut);
                }
            }
        }
        self.scope_holes += usize::from(in_scope);
        for id in CandidateId::all() {
            let counts = &mut self.candidates[id.index()];
            counts.0 += usize::from(hole.applicable(id));
            counts.1 += usize::from(hole.succeeded(id));
            counts.2 += usize::from(hole.row(id).is_some());
            let why = hole.row(id).and_then(|r| r.why_not.clone());
            // A candidate the run left out is named once, in the run's candidate set.
            if let Some(why) = why.filter(|w| &**w != crate::eval::runner::NOT_SELECTED) {
                *self.reasons.entry((id, why)).or_default() += 1;
            }
        }
        self.holes += 1;
        self.incomplete += usize::from(!hole.is_complete());
    }

    /// The report, with `notes` on how the extra methods were obtained and `missing` holes of
    /// the run that have no rows counted among the incomplete ones.
    pub fn finish(self, notes: Vec<String>, missing: usize) -> Report {
        let choices = self.choices;
        let split = &choices.split;
        let numbering = choices.numbering;
        let fixed = choices.fixed[0];
        let mut all_notes = split.notes.clone();
        all_notes.extend(notes);
        all_notes.extend(self.reasons.iter().map(|((id, why), n)| {
            format!("{} is not applicable on {n} holes: {why}.", id.label())
        }));
        all_notes.push(split.procc_note());
        let rate = |m: usize, subset: &dyn Fn(&str) -> bool, k: usize| {
            holes::rate_of(
                self.repositories
                    .iter()
                    .filter(|(name, _)| subset(name))
                    .map(|(_, r)| (r.hits[m][k - 1], r.holes)),
            )
        };
        let in_scope = |r: &str| split.in_scope(r);
        let default = rate(DEFAULT, &in_scope, 1);
        let methods = self
            .methods
            .iter()
            .zip(&self.scope)
            .enumerate()
            .map(|(m, (method, tally))| {
                let success = rate(m, &in_scope, 1);
                let share = |count| percent(count, self.scope_holes);
                MethodRow {
                    name: method.name.clone(),
                    success,
                    gain: Gain::over(success, default),
                    edit_similarity: match tally.picked {
                        0 => 0.0,
                        n => 100.0 * tally.edit_similarity / n as f64,
                    },
                    truncation: Truncation {
                        default: share(tally.truncated[0]),
                        proposal: share(tally.truncated[1]),
                        either: share(tally.truncated[2]),
                        both: share(tally.truncated[3]),
                    },
                }
            })
            .collect();
        let success_at_k = self
            .methods
            .iter()
            .enumerate()
            .map(|(m, method)| {
                let rates: Vec<Rate> = (1..=MAX_K).map(|k| rate(m, &in_scope, k)).collect();
                Curve {
                    method: method.name.clone(),
                    hole_wise: rates.iter().map(|r| r.hole_wise).collect(),
                    repo_wise: rates.iter().map(|r| r.repo_wise).collect(),
                }
            })
            .collect();
        let is_train = |r: &str| split.is_train(r);
        let is_test = |r: &str| !split.is_train(r);
        let any = |_: &str| true;
        let splits = [
            ("train", &is_train as &dyn Fn(&str) -> bool),
            ("test", &is_test),
            ("all", &any),
        ];
        let splits = splits
            .into_iter()
            .filter_map(|(name, subset)| {
                let repos = self.repositories.iter().filter(|(r, _)| subset(r));
                let (repositories, holes) =
                    repos.fold((0, 0), |(n, h), (_, r)| (n + 1, h + r.holes));
                if holes == 0 {
                    return None;
                }
                let (default, oracle) = (rate(DEFAULT, subset, 1), rate(ORACLE, subset, 1));
                Some(SplitRow {
                    split: name.into(),
                    repositories,
                    holes,
                    default,
                    oracle,
                    gain: Gain::over(oracle, default),
                })
            })
            .collect();
        let repositories = self
            .repositories
            .iter()
            .map(|(repo, tally)| RepoRow {
                repository: repo.clone(),
                split: if split.is_train(repo) {
                    "train"
                } else {
                    "test"
                }
                .into(),
                holes: tally.holes,
                success: (0..self.methods.len())
                    .map(|m| percent(tally.hits[m][0], tally.holes))
                    .collect(),
            })
            .collect();
        let names = |subset: &dyn Fn(&str) -> bool| -> Vec<String> {
            let repos = self.repositories.keys().filter(|r| subset(r));
            repos.cloned().collect()
        };
        Report {
            summary: Summary {
                holes: self.holes,
                rows: choices.rows,
                incomplete_holes: self.incomplete + missing,
                train: names(&is_train),
                test: names(&is_test),
                method_scope: split.scope_name.into(),
                seed: self.seed,
            },
            notes: all_notes,
            splits,
            fixed_proposal: FixedChoice {
                id: numbering.number(fixed.0),
                label: fixed.0.label().into(),
                success: fixed.1,
                chosen_on: split.chosen_on.into(),
                holes: split.choice_holes,
            },
            methods,
            success_at_k,
            sources: tallies(&self.candidates, |s| s.source.name()),
            context_types: tallies(&self.candidates, |s| s.context_type.abbreviation()),
            proposals: proposal_rows(&self.candidates, self.holes, numbering),
            repositories,
        }
    }
}

/// How a method ranks a hole's candidates.
enum Rank<'a> {
    Fn(RankFn<'a>),
    /// ProCC's bandit's pick.
    Procc,
    /// The ranking that comes with the hole, `n`th of the extra methods.
    Extra(usize),
}

fn method<'a>(name: &str, rank: Rank<'a>) -> Method<'a> {
    Method {
        name: name.into(),
        rank,
    }
}

/// Which repositories are training and test, and which holes each part of the report uses.
struct Split {
    train_repos: Vec<String>,
    /// Holes of the training and of the test repositories.
    train: usize,
    test: usize,
    /// Holes the fixed proposal is chosen on, and what to call them.
    choice_holes: usize,
    chosen_on: &'static str,
    /// What to call the holes the method tables cover.
    scope_name: &'static str,
    notes: Vec<String>,
}

impl Split {
    /// The split of `repositories` (holes per repository).
    fn new(repositories: BTreeMap<String, usize>, train_repos: &[String]) -> Split {
        let count = |train: bool| -> usize {
            let repos = repositories
                .iter()
                .filter(|(r, _)| named(train_repos, r) == train);
            repos.map(|(_, holes)| holes).sum()
        };
        let (train, test) = (count(true), count(false));
        let mut notes = Vec::new();
        let missing: Vec<&str> = train_repos
            .iter()
            .filter(|t| !repositories.contains_key(t.as_str()))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "Training repositories without label rows: {}.",
                missing.join(", ")
            ));
        }
        let (choice_holes, chosen_on) = if train == 0 {
            notes.push(
                "No training split: the fixed proposal was chosen on all holes, test holes \
                 included, so its row is not a held-out result."
                    .into(),
            );
            (train + test, "all")
        } else {
            (train, "train")
        };
        let scope_name = if test == 0 {
            notes.push("No test split: the method tables cover all holes.".into());
            "all repositories"
        } else {
            "test repositories"
        };
        Split {
            train_repos: train_repos.to_vec(),
            train,
            test,
            choice_holes,
            chosen_on,
            scope_name,
            notes,
        }
    }

    fn is_train(&self, repository: &str) -> bool {
        named(&self.train_repos, repository)
    }

    /// Whether the fixed proposal is chosen, and ProCC's bandit learns, on `repository`'s
    /// holes: the training split, else all holes.
    fn in_choice(&self, repository: &str) -> bool {
        self.train == 0 || self.is_train(repository)
    }

    /// Whether the method tables cover `repository`'s holes: the test split, else all holes.
    fn in_scope(&self, repository: &str) -> bool {
        self.test == 0 || !self.is_train(repository)
    }

    /// How ProCC's bandit learned: online over the training holes in hole order, each pick
    /// made before its reward is seen, then frozen for the others; with no training split,
    /// online over all holes.
    fn procc_note(&self) -> String {
        if self.train == 0 {
            "ProCC (LinUCB) learned online over all holes in hole order, each pick made before its \
             exact match was seen."
                .to_string()
        } else {
            format!(
                "ProCC (LinUCB) learned online over the {} training holes in hole order, then \
                 picked on the test holes without learning.",
                self.train
            )
        }
    }
}

fn named(list: &[String], name: &str) -> bool {
    list.iter().any(|n| n == name)
}

/// Positions of the built-in methods that other rows refer to.
const DEFAULT: usize = 0;
const ORACLE: usize = 1;

/// Mean success where applicable per group of proposals, groups in Table 7 order; `counts`
/// per candidate id as [`Scoring`] keeps them.
fn tallies(counts: &[(usize, usize, usize)], key: fn(&ProposalSpec) -> &'static str) -> Vec<Tally> {
    let mut groups: Vec<(&str, usize, usize)> = Vec::new();
    for spec in candidate::proposal_specs() {
        let name = key(spec);
        let (applicable, successes, _) = counts[spec.id.index()];
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
fn proposal_rows(
    counts: &[(usize, usize, usize)],
    holes: usize,
    numbering: Numbering,
) -> Vec<ProposalRow> {
    let mut rows: Vec<ProposalRow> = CandidateId::all()
        .zip(counts)
        .filter(|&(_, &(_, _, with_row))| with_row > 0)
        .map(|(id, &(applicable, successes, _))| ProposalRow {
            id: numbering.number(id),
            label: id.label().into(),
            applicable,
            applicability: percent(applicable, holes),
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
