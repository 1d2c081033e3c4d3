//! RLPG's evaluation protocol on real repositories: for every sampled hole, complete with the
//! default context and with every applicable proposal, and record one label row each.
//! `runner` produces the rows (over one repository's holes), `labels` keeps them
//! safe on disk, `outdir` keeps one run at a time in an output directory and its settings,
//! `report` turns the rows into the paper's tables and plots, `interop` speaks RepoEval /
//! CrossCodeEval task files. At scale, a run is cut into shards on many machines and their
//! directories are put together by `merge`; `batch` writes a run's requests for a serving
//! engine's batch mode and reads the answers. [`run()`] puts these together over many
//! repositories, as `keyhole eval` does.

/// Batch files speak the HTTP backends' wire formats.
#[cfg(feature = "http")]
pub(crate) mod batch;
pub(crate) mod classified;
pub(crate) mod interop;
pub(crate) mod labels;
// Putting shards' directories together is the command line's alone.
#[cfg(feature = "cli")]
pub(crate) mod merge;
pub(crate) mod outdir;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod runner;
pub(crate) mod shard;
/// Tuning trains a classifier, with candle.
#[cfg(feature = "train")]
pub(crate) mod tune;

pub use run::{EvalError, Evaluation, Observer, Outcome, run};
pub use runner::RunStats;
pub use shard::{Shard, ShardError};

pub(crate) use crate::label::{LabelRow, WRITTEN_ROWS, hole_id};
