//! Where opening the repository is: phases and the stages of opening, with counts; and how
//! far the search indexes built after it have come.

use super::{SearchProgress, SearchStage};

/// Where opening the repository is: the screen shows progress, then the hole, or the UI
/// leaves with the error (the CLI prints it as one line and exits 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Opening(Progress),
    Ready,
    /// Reading the repository again after a write, so candidates come from the file as it is.
    Rereading,
    Failed(String),
}

/// How far opening has come: the stage and, where it counts files, how many of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub stage: Stage,
    pub done: usize,
    pub total: usize,
}

/// The stages of opening a repository, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Walking the tree and parsing each file (or taking its facts from the cache).
    Files,
    /// Building the repository graph, once every file is parsed.
    Graph,
    /// Starting the backend that completes.
    Backend,
    /// Loading the rankers: the classifier and the online ranker's picks.
    Rankers,
}

impl From<crate::session::Opening> for Progress {
    fn from(opening: crate::session::Opening) -> Progress {
        use crate::session::OpenStage;
        let stage = match opening.stage {
            OpenStage::Files => Stage::Files,
            OpenStage::Graph => Stage::Graph,
            OpenStage::Backend => Stage::Backend,
        };
        Progress {
            stage,
            done: opening.done,
            total: opening.total,
        }
    }
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let Progress { done, total, .. } = self;
        match self.stage {
            Stage::Files => write!(f, "indexing {done}/{total} files"),
            Stage::Graph => write!(f, "{total} files parsed · building the repository graph"),
            Stage::Backend => write!(f, "{total} files · starting the backend"),
            Stage::Rankers => write!(f, "{total} files · loading the rankers"),
        }
    }
}

impl std::fmt::Display for SearchProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let SearchProgress { done, total, .. } = self;
        match self.stage {
            SearchStage::Files => write!(f, "BM25: {done}/{total} files"),
            // Indexing the windows' terms and writing the cache follow (seconds on a large
            // repository): said, so the count standing still does not look stuck.
            SearchStage::Windows if done == total => {
                write!(f, "RepoCoder: {total} windows tokenized, indexing them")
            }
            SearchStage::Windows => write!(f, "RepoCoder: {done}/{total} windows tokenized"),
        }
    }
}
