//! RLPG's evaluation protocol on real repositories: for every sampled hole, complete with the
//! default context and with every applicable proposal, and record one label row each.
//! [`runner`] produces the rows, [`labels`] keeps them safe on disk, [`outdir`] keeps one run at
//! a time in an output directory and its settings, [`report`] turns the rows into the paper's
//! tables and plots, [`interop`] speaks RepoEval / CrossCodeEval task files. At scale, a run is
//! cut into [`shard`]s on many machines and their directories are put together by [`merge`];
//! [`batch`] writes a run's requests for a serving engine's batch mode and reads the answers.
//! [`run`](mod@run) puts these together over many repositories, as `keyhole eval` does.

/// Batch files speak the HTTP backends' wire formats.
#[cfg(feature = "http")]
pub mod batch;
pub mod classified;
pub mod interop;
pub mod labels;
pub mod merge;
pub mod outdir;
pub mod plan;
pub mod report;
pub mod run;
pub mod runner;
pub mod shard;
/// Tuning trains a classifier, with candle.
#[cfg(feature = "train")]
pub mod tune;

pub use crate::label::{LabelRow, RLPG_CANDIDATES, ROWS_PER_HOLE, WRITTEN_ROWS, hole_id};
pub use run::{Evaluation, Observer, Outcome, run};
