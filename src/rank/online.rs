//! A ranker that learns from the completions people pick. Each candidate's score is its pick
//! rate, smoothed toward a prior as if it had been shown [`PRIOR_SHOWS`] times: the prior is
//! the chance of a pick among [`PRIOR_CARDS`] cards, scaled by the [`FixedRanker`]'s score, so
//! a fresh ranker ranks exactly as the fixed one, and a candidate picked 2 of 3 times ranks
//! above every one never shown.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{FixedRanker, RankInput, Ranked, Ranker};
use crate::candidate::CandidateId;
use crate::dirs::Dirs;
use crate::feedback;

/// How many shows the prior is worth. A power of two, so a fresh ranker's scores are the
/// prior's to the bit.
pub const PRIOR_SHOWS: f64 = 2.0;

/// Cards shown side by side by default: one pick among them is the prior's best chance.
pub const PRIOR_CARDS: f64 = 3.0;

/// Where the ranker is kept, in the data directory.
pub const FILE: &str = "online-ranker.json";

/// Version of the saved state; a file of another version is ignored.
const VERSION: u32 = 1;

/// How often a candidate's completion was shown and picked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub picks: u64,
    pub shown: u64,
}

/// What `save` writes: `{"version": 1, "candidates": {"6": {"picks": 2, "shown": 5}, ...}}`.
#[derive(Serialize, Deserialize)]
struct State {
    version: u32,
    candidates: BTreeMap<CandidateId, Counts>,
}

/// How the online ranker orders, in a line for a table's header.
pub fn how_it_orders() -> String {
    format!(
        "picks per showing, with the fixed order as a prior worth {PRIOR_SHOWS} shows; never \
         shown: the fixed order (no exploration: a candidate is shown when it is in the top k \
         or chosen)"
    )
}

/// Why the online ranker placed a candidate with `counts` where it is: its picks, or its
/// prior alone.
pub fn reason(counts: Option<&Counts>) -> String {
    match counts {
        Some(n) if n.shown > 0 => format!(
            "picked {} of {} times shown, with the fixed order as a prior worth {PRIOR_SHOWS} shows",
            n.picks, n.shown
        ),
        _ => "never shown: its place in the fixed order".into(),
    }
}

/// Pick counts per candidate id, ranking by smoothed pick rate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OnlineRanker {
    counts: BTreeMap<CandidateId, Counts>,
}

impl OnlineRanker {
    /// Learn from one pick: every candidate in `shown` was shown once, `picked` was chosen
    /// (and counts as shown even if missing from `shown`).
    pub fn record_pick(&mut self, shown: &[CandidateId], picked: CandidateId) {
        let shown: BTreeSet<CandidateId> = shown.iter().copied().chain([picked]).collect();
        for id in shown {
            self.counts.entry(id).or_default().shown += 1;
        }
        self.counts.entry(picked).or_default().picks += 1;
    }

    /// Learn from one completion of `used`'s prompt that the person used in their editor
    /// (`keyhole proxy --compose`): shown once, and picked where they kept it.
    pub fn record_outcome(&mut self, used: CandidateId, kept: bool) {
        let counts = self.counts.entry(used).or_default();
        counts.shown += 1;
        counts.picks += u64::from(kept);
    }

    /// The ranker saved at `path`; a fresh one if there is none. A file that cannot be read or
    /// understood also gives a fresh ranker, with a one-line warning naming the file.
    pub fn load(path: &Path) -> (Self, Option<String>) {
        feedback::load_state(path, "ranker", Self::read)
    }

    /// The ranker kept in the data directory (a fresh one without a data directory), and a
    /// warning if its file was unusable.
    pub fn load_saved(dirs: &Dirs) -> (Self, Option<String>) {
        dirs.data_file(FILE)
            .map_or_else(|| (Self::default(), None), |path| Self::load(&path))
    }

    fn read(path: &Path) -> io::Result<Self> {
        let state: State = serde_json::from_slice(&std::fs::read(path)?)?;
        feedback::check_version(state.version, VERSION)?;
        Ok(OnlineRanker {
            counts: state.candidates,
        })
    }

    /// Save atomically: a crash leaves the previous state or this one.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let state = State {
            version: VERSION,
            candidates: self.counts.clone(),
        };
        feedback::create_parent(path)?;
        feedback::write_atomic(path, &serde_json::to_vec_pretty(&state)?)
    }

    /// Shows and picks per candidate, for people to read.
    pub fn counts(&self) -> &BTreeMap<CandidateId, Counts> {
        &self.counts
    }

    /// The smoothed pick rate of `id`, which the ranker it starts from (the fixed one, or a
    /// tuned classifier) scores `start` (0..1).
    fn score(&self, id: CandidateId, start: f64) -> f64 {
        let c = self.counts.get(&id).copied().unwrap_or_default();
        let prior = start / PRIOR_CARDS;
        (c.picks as f64 + PRIOR_SHOWS * prior) / (c.shown as f64 + PRIOR_SHOWS)
    }
}

impl OnlineRanker {
    /// `prior`'s ranking (scores in 0..1) moved by the picks; stable, so equal scores keep
    /// the prior's order.
    fn rank_from(&self, prior: Vec<Ranked>) -> Vec<Ranked> {
        let mut ranked: Vec<Ranked> = prior
            .into_iter()
            .map(|r| Ranked {
                id: r.id,
                score: self.score(r.id, r.score),
            })
            .collect();
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
        ranked
    }
}

impl Ranker for OnlineRanker {
    fn rank(&self, input: &RankInput) -> Vec<Ranked> {
        self.rank_from(FixedRanker.rank(input))
    }
}

/// The online ranker starting from another ranker's scores instead of the fixed order: from a
/// classifier tuned for the backend's model, whose probabilities are the prior rates.
pub struct Starting<'a, R: Ranker> {
    pub online: &'a OnlineRanker,
    pub prior: R,
}

impl<R: Ranker> Ranker for Starting<'_, R> {
    fn rank(&self, input: &RankInput) -> Vec<Ranked> {
        self.online.rank_from(self.prior.rank(input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SourcedText;
    use crate::context::proposals::ProposalContext;
    use crate::hole::HoleWindow;
    use crate::token::Keep;

    fn input(proposals: &[ProposalContext]) -> RankInput<'_> {
        let window = HoleWindow {
            before: "",
            prefix: "",
            after: "",
        };
        RankInput {
            window,
            before_hole: "",
            proposals,
        }
    }

    /// Every proposal, each applicable.
    fn all_applicable() -> Vec<ProposalContext> {
        crate::candidate::proposal_specs()
            .iter()
            .map(|&spec| {
                let mut context = SourcedText::default();
                context.push_plain("context");
                ProposalContext {
                    spec,
                    context,
                    ranked_files: Vec::new(),
                    keep: Keep::Start,
                    assembly: crate::compose::Assembly::Capped,
                }
            })
            .collect()
    }

    fn numbered(numbers: &[usize]) -> Vec<CandidateId> {
        numbers.iter().map(|&n| CandidateId::nth(n)).collect()
    }

    fn ids(ranked: &[Ranked]) -> Vec<CandidateId> {
        ranked.iter().map(|r| r.id).collect()
    }

    #[test]
    fn fresh_ranks_as_fixed() {
        let proposals = all_applicable();
        let fixed = FixedRanker.rank(&input(&proposals));
        let fresh = OnlineRanker::default().rank(&input(&proposals));
        assert_eq!(ids(&fresh), ids(&fixed));
        assert!(
            fresh
                .iter()
                .zip(&fixed)
                .all(|(o, f)| o.score == f.score / PRIOR_CARDS)
        );
        assert_eq!(
            ids(&OnlineRanker::default().rank(&input(&proposals[..3]))),
            ids(&FixedRanker.rank(&input(&proposals[..3])))
        );
    }

    #[test]
    fn repeated_picks_move_a_candidate_up() {
        let proposals = all_applicable();
        let mut ranker = OnlineRanker::default();
        let shown = ids(&FixedRanker.rank(&input(&proposals))[..5]);
        let last = shown[4];
        let mut places = Vec::new();
        for _ in 0..4 {
            ranker.record_pick(&shown, last);
            places.push(
                ids(&ranker.rank(&input(&proposals)))
                    .iter()
                    .position(|&id| id == last),
            );
        }
        assert!(places.windows(2).all(|w| w[1] <= w[0]), "{places:?}");
        assert_eq!(places.last(), Some(&Some(0)), "{places:?}");
    }

    #[test]
    fn starting_from_another_ranker_ranks_as_it_until_picks_move_it() {
        /// Ranks the proposals in reverse id order.
        struct Reverse;
        impl Ranker for Reverse {
            fn rank(&self, input: &RankInput) -> Vec<Ranked> {
                let n = input.proposals.len() as f64;
                (0..input.proposals.len())
                    .rev()
                    .map(|i| Ranked {
                        id: CandidateId::nth(i),
                        score: (i as f64 + 1.0) / (n + 1.0),
                    })
                    .collect()
            }
        }
        let proposals = all_applicable();
        let mut online = OnlineRanker::default();
        let fresh = Starting {
            online: &online,
            prior: Reverse,
        };
        let fresh_ranking = fresh.rank(&input(&proposals));
        assert_eq!(ids(&fresh_ranking), ids(&Reverse.rank(&input(&proposals))));
        let first = CandidateId::nth(0);
        for _ in 0..8 {
            online.record_pick(&[first, CandidateId::nth(61)], first);
        }
        let learnt = Starting {
            online: &online,
            prior: Reverse,
        };
        let place = |ranked: Vec<Ranked>, id| ranked.iter().position(|r| r.id == id);
        assert_eq!(
            place(fresh_ranking, first),
            Some(61),
            "the prior puts it last"
        );
        let learnt = learnt.rank(&input(&proposals));
        assert!(place(learnt.clone(), first) < place(learnt, CandidateId::nth(61)));
    }

    #[test]
    fn a_candidate_picked_two_of_three_times_ranks_above_every_one_never_shown() {
        let proposals = all_applicable();
        let fixed = ids(&FixedRanker.rank(&input(&proposals)));
        let (shown, last) = (&fixed[fixed.len() - 3..], fixed[fixed.len() - 1]);
        let mut ranker = OnlineRanker::default();
        for picked in [last, last, shown[0]] {
            ranker.record_pick(shown, picked);
        }
        assert_eq!(ids(&ranker.rank(&input(&proposals)))[0], last);
        assert_eq!(ranker.counts()[&last], Counts { picks: 2, shown: 3 });
    }

    #[test]
    fn kept_completions_move_a_candidate_up_and_dropped_ones_down() {
        let proposals = all_applicable();
        let fixed = ids(&FixedRanker.rank(&input(&proposals)));
        let (first, tenth) = (fixed[0], fixed[9]);
        let mut ranker = OnlineRanker::default();
        let place = |ranker: &OnlineRanker, id| {
            ids(&ranker.rank(&input(&proposals)))
                .iter()
                .position(|&r| r == id)
        };
        for _ in 0..3 {
            ranker.record_outcome(tenth, true);
        }
        assert_eq!(place(&ranker, tenth), Some(0));
        assert_eq!(ranker.counts()[&tenth], Counts { picks: 3, shown: 3 });
        let before = place(&ranker, first);
        ranker.record_outcome(first, false);
        assert!(place(&ranker, first) > before, "dropped: it goes down");
    }

    #[test]
    fn save_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/ranker.json");
        let mut ranker = OnlineRanker::default();
        ranker.record_pick(&numbered(&[6, 7, 62]), CandidateId::nth(62));
        ranker.record_pick(&numbered(&[6, 14]), CandidateId::nth(14));
        ranker.save(&path).unwrap();
        let (loaded, warning) = OnlineRanker::load(&path);
        assert_eq!(warning, None);
        assert_eq!(loaded, ranker);
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved["version"], 1);
        assert_eq!(saved["candidates"]["6"]["shown"], 2);
    }

    #[test]
    fn missing_file_is_fresh_without_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (ranker, warning) = OnlineRanker::load(&dir.path().join("none.json"));
        assert_eq!((ranker, warning), (OnlineRanker::default(), None));
    }

    #[test]
    fn corrupt_or_foreign_file_is_fresh_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ranker.json");
        for content in [
            "{\"version\": 1, \"candid",
            "{\"version\": 9, \"candidates\": {}}",
        ] {
            std::fs::write(&path, content).unwrap();
            let (ranker, warning) = OnlineRanker::load(&path);
            assert_eq!(ranker, OnlineRanker::default());
            let warning = warning.expect("a warning");
            assert!(warning.contains(&path.display().to_string()), "{warning}");
            assert!(!warning.contains('\n'), "{warning}");
        }
    }
}
