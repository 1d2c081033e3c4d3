//! What keyhole learns from people: the rankers (the classifier and the online ranker), ProCC's
//! bandit, and the pick log, kept in the data directory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::candidate::CandidateId;
use crate::context::perspectives;
use crate::dirs::Dirs;
use crate::feedback;
use crate::proxy::NotLearnt;
use crate::rank::bandit::{self, LinUcb};
use crate::rank::classifier::{Classifier, ModelError};
use crate::rank::online::{self, OnlineRanker};
use crate::rank::{RankInput, Ranked, RankerKind, Rankers};

use super::tuned::{Tuned, TunedInfo};

/// The pick log, in the data directory.
const FEEDBACK_FILE: &str = "feedback.jsonl";

/// What a pick teaches ProCC's bandit: in `context`, each (arm, reward).
#[derive(Clone, Debug, PartialEq)]
pub struct BanditLesson {
    pub(crate) context: bandit::Context,
    /// The perspectives that applied to the hole: the bandit chooses among them again once
    /// taught.
    pub available: [bool; bandit::ARMS],
    pub rewards: Vec<(usize, f64)>,
}

/// What recording a pick did, in a line, and the perspective ProCC's bandit chooses for the
/// hole now that the pick taught it (`None` when the pick taught it nothing).
pub struct PickRecorded {
    pub said: String,
    pub procc_pick: Option<Option<CandidateId>>,
}

/// The rankers and what they learn, shared by every session of a process (the UI switching
/// backends keeps its picks): the classifier (the bundled one loaded once, on first use, or
/// the one tuned for the backend, or the one asked for) and the online ranker from the data
/// directory, kept current by this process's picks.
#[derive(Clone)]
pub struct Learning {
    rankers: Arc<OnceLock<RwLock<Rankers>>>,
    /// Where the online ranker, the bandit and the picks are kept.
    dirs: Arc<Dirs>,
    /// What the classifier was tuned for, when it is a tuned one (`keyhole tune`).
    tuned: Option<Arc<TunedInfo>>,
}

impl Learning {
    /// Rankers that keep what they learn in `dirs`, with the bundled classifier.
    pub fn new(dirs: Dirs) -> Learning {
        Learning {
            rankers: Arc::default(),
            dirs: Arc::new(dirs),
            tuned: None,
        }
    }

    /// Rankers with `classifier` behind RLPG-H and RLPG-R.
    pub(crate) fn with_classifier(classifier: Classifier, dirs: Dirs) -> Learning {
        let learning = Learning::new(dirs);
        // Freshly made, so nothing has filled it yet.
        let _ = learning
            .rankers
            .set(Self::load(classifier, false, &learning.dirs));
        learning
    }

    /// Rankers with the classifier `keyhole tune` made for the backend: behind RLPG-H and
    /// RLPG-R, and the prior the online ranker starts from.
    pub(crate) fn with_tuned(tuned: Tuned, dirs: Dirs) -> Learning {
        let mut learning = Learning::new(dirs);
        let _ = learning
            .rankers
            .set(Self::load(tuned.classifier, true, &learning.dirs));
        learning.tuned = Some(Arc::new(tuned.info));
        learning
    }

    /// What the classifier was tuned for, when it is a tuned one.
    pub fn tuned(&self) -> Option<&TunedInfo> {
        self.tuned.as_deref()
    }

    /// What `kind` ranks with, where it reads a tuned classifier: `RLPG-H tuned for smol, 400
    /// holes`, `online, starting from RLPG-H tuned for smol, 400 holes`; what a header shows
    /// for the ranker. None for the bundled classifier, one asked for by name, and rankers
    /// that read no classifier.
    pub fn ranks_with(&self, kind: RankerKind) -> Option<String> {
        let info = self.tuned()?;
        match kind {
            RankerKind::RlpgH => Some(info.describe()),
            RankerKind::Online => Some(format!("online, starting from {}", info.describe())),
            // A tuned model has only an RLPG-H head; RLPG-R says so when asked to rank.
            _ => None,
        }
    }

    /// Where what is learned is kept.
    pub fn dirs(&self) -> &Dirs {
        &self.dirs
    }

    /// Loads the rankers now where they are still to be loaded on first use.
    pub fn load_now(&self) {
        self.loaded();
    }

    /// The rankers, loaded on first use by the thread that asks, alone: holes' jobs on the
    /// CPU pool may wait for them, and loading splits no work among the pool's threads.
    fn loaded(&self) -> &RwLock<Rankers> {
        self.rankers
            .get_or_init(|| Self::load(Classifier::bundled(), false, &self.dirs))
    }

    fn load(classifier: Classifier, online_from_classifier: bool, dirs: &Dirs) -> RwLock<Rankers> {
        let (online, warning) = OnlineRanker::load_saved(dirs);
        if let Some(warning) = warning {
            crate::escape::warn(&format!("online ranker: {warning}"));
        }
        RwLock::new(Rankers {
            classifier,
            online,
            online_from_classifier,
        })
    }

    /// What the online ranker has learnt: shows and picks per candidate.
    pub(crate) fn online_counts(&self) -> BTreeMap<CandidateId, online::Counts> {
        let rankers = self.loaded().read().unwrap_or_else(PoisonError::into_inner);
        rankers.online.counts().clone()
    }

    /// The order `kind` gives the proposals, or why it cannot rank.
    pub(crate) fn rank(
        &self,
        kind: RankerKind,
        input: &RankInput,
    ) -> Result<Vec<Ranked>, ModelError> {
        let rankers = self.loaded().read().unwrap_or_else(PoisonError::into_inner);
        let ranker = rankers.get(kind)?;
        Ok(ranker.rank(input))
    }

    /// Log the pick, teach the online ranker and, for a ProCC perspective, the bandit; says
    /// where it went or what failed.
    pub fn record_pick(
        &self,
        mut pick: feedback::Pick,
        lesson: Option<BanditLesson>,
    ) -> PickRecorded {
        let said = |said: String| PickRecorded {
            said,
            procc_pick: None,
        };
        let Some(dir) = self.dirs.data.clone() else {
            return said("no data directory: pick not recorded".into());
        };
        pick.unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        log_pick(&pick);
        // Held until the lesson is saved: another process's pick waits rather than
        // overwriting this one's lesson with its own.
        let logged = feedback::PickLog::lock(&dir.join(FEEDBACK_FILE))
            .and_then(|mut log| log.append(&pick).map(|()| log));
        let _log = match logged {
            Ok(log) => log,
            Err(e) => {
                tracing::warn!(error = %e, "cannot log the pick");
                return said(format!("cannot log the pick: {e}"));
            }
        };
        let path = dir.join(online::FILE);
        let (mut ranker, warning) = OnlineRanker::load(&path);
        ranker.record_pick(&pick.candidates, pick.picked);
        if let Err(e) = ranker.save(&path) {
            return said(format!("cannot save the online ranker: {e}"));
        }
        let mut rankers = self
            .loaded()
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        rankers.online = ranker;
        drop(rankers);
        let (taught, procc_pick) = match lesson {
            Some(lesson) => match teach_bandit(&dir.join(bandit::FILE), &lesson) {
                Ok(choice) => ("; online ranker and ProCC bandit updated", Some(choice)),
                Err(e) => return said(format!("cannot save the ProCC bandit: {e}")),
            },
            None => ("; online ranker updated", None),
        };
        PickRecorded {
            said: warning.unwrap_or_else(|| {
                format!(
                    "pick of {} {} logged to {}{taught}",
                    pick.picked,
                    pick.picked.label(),
                    dir.display()
                )
            }),
            procc_pick,
        }
    }

    /// Teach the online ranker that a completion of `used`'s prompt for `hole` was kept
    /// (`accepted`) or dropped in the person's editor (`keyhole proxy --compose`); read,
    /// changed and saved under the pick log's lock, as a pick is. Says what it did.
    pub(crate) fn record_outcome(
        &self,
        used: CandidateId,
        hole: &str,
        accepted: bool,
    ) -> Result<String, NotLearnt> {
        let Some(dir) = self.dirs.data.clone() else {
            return Err(NotLearnt::NoDataDirectory);
        };
        tracing::info!(hole, used = used.index(), accepted, "outcome");
        let _log = feedback::PickLog::lock(&dir.join(FEEDBACK_FILE)).map_err(NotLearnt::Lock)?;
        let path = dir.join(online::FILE);
        let (mut ranker, warning) = OnlineRanker::load(&path);
        if let Some(warning) = warning {
            crate::escape::warn(&format!("online ranker: {warning}"));
        }
        ranker.record_outcome(used, accepted);
        ranker.save(&path).map_err(NotLearnt::Save)?;
        let mut rankers = self
            .loaded()
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        rankers.online = ranker;
        let kept = if accepted { "kept" } else { "dropped" };
        Ok(format!(
            "{used} {} {kept} at {hole}: online ranker updated",
            used.label()
        ))
    }

    pub(crate) fn apply(
        &self,
        path: &Path,
        hash: &[u8; 32],
        offset: usize,
        replace: usize,
        text: &str,
    ) -> Result<String, feedback::ApplyError> {
        let staging = self.dirs.data.as_deref();
        let result = feedback::apply_completion(path, hash, offset, replace, text, staging);
        tracing::info!(path = %path.display(), offset, replace, ok = result.is_ok(), "apply");
        result?;
        std::fs::read_to_string(path).map_err(|source| feedback::ApplyError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The hole and hashes only: prompts and completions stay out of the log.
fn log_pick(pick: &feedback::Pick) {
    tracing::info!(
        hole = %pick.hole,
        picked = pick.picked.index(),
        candidates = ?pick.candidates,
        prompt_hash = %pick.prompt_hash,
        "pick"
    );
}

/// ProCC's bandit context for a hole from its perspectives' candidates (each applicable one's
/// best window similarity and Jaccard), and which perspectives applied.
pub(super) fn procc_context<'c>(
    candidates: impl IntoIterator<Item = &'c perspectives::RetrievedContext>,
) -> (bandit::Context, [bool; bandit::ARMS]) {
    let candidates: Vec<&perspectives::RetrievedContext> = candidates.into_iter().collect();
    let features = CandidateId::PROCC.map(|id| {
        let c = candidates.iter().find(|c| c.id == id && c.applicable())?;
        Some((c.score.unwrap_or(0.0), c.jaccard.unwrap_or(0.0)))
    });
    (bandit::context(features), features.map(|f| f.is_some()))
}

/// Update the bandit saved at `path` with each reward of `lesson`.
/// Teach the bandit saved at `path` and save it; the perspective it now chooses for the
/// lesson's hole.
fn teach_bandit(path: &Path, lesson: &BanditLesson) -> std::io::Result<Option<CandidateId>> {
    let (mut bandit, warning) = LinUcb::load(path);
    if let Some(warning) = warning {
        crate::escape::warn(&format!("ProCC bandit: {warning}"));
    }
    for &(arm, reward) in &lesson.rewards {
        bandit.update(arm, &lesson.context, reward);
    }
    bandit.save(path)?;
    let arm = bandit.choose(&lesson.context, lesson.available);
    Ok(arm.map(|arm| CandidateId::PROCC[arm]))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn picks_from_processes_at_once_each_reach_the_log_and_the_online_ranker() {
        let root = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(root.path());
        // Two processes' worth: each its own Learning on the same data directory.
        std::thread::scope(|scope| {
            for _ in 0..2 {
                let learning = Learning::new(dirs.clone());
                scope.spawn(move || {
                    for _ in 0..25 {
                        let pick = feedback::Pick {
                            hole: "A.java:3:9".into(),
                            candidates: vec![CandidateId::nth(6), CandidateId::DEFAULT],
                            prompt_hash: String::new(),
                            completions: vec![String::new(), String::new()],
                            picked: CandidateId::nth(6),
                            unix_time: 0,
                        };
                        learning.record_pick(pick, None);
                    }
                });
            }
        });
        let log = std::fs::read_to_string(dirs.data_file(FEEDBACK_FILE).unwrap()).unwrap();
        assert_eq!(log.lines().count(), 50);
        let (ranker, _) = OnlineRanker::load(&dirs.data_file(online::FILE).unwrap());
        // Read, changed and saved under the pick log's lock: no pick's lesson overwritten.
        assert_eq!(ranker.counts()[&CandidateId::nth(6)].picks, 50);
    }

    #[test]
    fn a_logged_pick_names_the_hole_but_not_the_completions() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Mutex::new(file.reopen().unwrap()))
            .with_ansi(false)
            .finish();
        let pick = feedback::Pick {
            hole: "A.java:3:9".into(),
            candidates: vec![CandidateId::nth(6), CandidateId::DEFAULT],
            prompt_hash: feedback::prompt_hash("secret prompt"),
            completions: vec!["secretCompletion()".into(), String::new()],
            picked: CandidateId::nth(6),
            unix_time: 0,
        };
        tracing::subscriber::with_default(subscriber, || log_pick(&pick));
        let log = std::fs::read_to_string(file.path()).unwrap();
        assert!(log.contains("A.java:3:9") && log.contains(&pick.prompt_hash));
        assert!(!log.contains("secret"), "{log}");
    }
}
