//! keyhole: explore repository-level prompts for code completion.
//!
//! For a *hole* (a position in a file of a repository) keyhole builds every candidate context
//! it knows (RLPG's 62 prompt proposals, the default context and later work's retrieved
//! contexts), ranks them, composes each into a prompt within a token budget, completes it with
//! a model and scores the completion against the true rest of the line.
//!
//! # Embedding keyhole
//!
//! A [`Session`] is a repository opened for holes: its index, a completion backend, the
//! rankers and what they learned ([`Learning`]), a tokenizer and a budget. It is opened from
//! [`Settings`], resolved once from what a person chose ([`Choices`]), backends.toml and the
//! defaults. Open one on the bundled sample repository, list a hole's ranked candidates, and
//! compose one's prompt:
//!
//! ```
//! use keyhole::{Dirs, Hole, Session, Settings};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The embedded model and the bundled classifier; nothing of the user's is read or written.
//! let settings = Settings::default();
//! let repo = keyhole::sample::materialize(&Dirs::none())?;
//! let session = Session::open(&repo, &settings)?;
//!
//! let hole = Hole::parse(session.index(), keyhole::sample::DEMO_HOLE)?;
//! let analysis = session.analyse(&hole);
//! for row in analysis.candidates.iter().filter(|c| c.score.is_some()).take(3) {
//!     println!("{:>2} {:<45} {} tokens", row.id, row.label, row.tokens());
//! }
//!
//! // The ranker's favourite (none where it could not rank): its context, a newline, the code
//! // before the hole, composed within the budget.
//! let best = analysis.best().ok_or("the ranker could not rank")?;
//! println!("{}", best.prompt.text());
//! assert!(best.prompt.tokens(session.tokenizer()) <= settings.budget);
//! # Ok(())
//! # }
//! ```
//!
//! # What is here
//!
//! Everything an embedder uses is at the crate root, in the order a hole flows through it:
//! - **Settings and the session**: [`Choices`] resolved into [`Settings`], [`Dirs`] (where
//!   files are kept), [`Session`] ([`SessionBuilder`] to supply parts), with its [`Learning`]
//!   (rankers, bandit, picks) and the repository's [`RepoIndex`].
//! - **Holes and candidates**: a [`Hole`]; every candidate is described once in the
//!   [`catalogue`] ([`CandidateId`], [`CandidateInfo`], [`Selection`]); [`Session::analyse`]
//!   builds a hole's [`Analysis`]: RLPG's proposals ([`ProposalContext`]), the retrieved
//!   contexts ([`RetrievedContext`]) and every candidate as a ranked [`CandidateRow`], in the
//!   order of a [`RankerKind`] ([`Ranked`]); [`Fidelity`] says whose rules build them.
//! - **Prompts**: a [`Composer`] fits any [`CandidateContext`] (or the [`DefaultContext`]
//!   alone) into a token budget ([`TokenizerKind`], [`Keep`]) as a [`Prompt`] whose every
//!   [`Segment`] knows where its bytes came from ([`SourcedText`]).
//! - **Completion and judgement**: a [`Backend`] (from a [`BackendConfig`], [`build_backend`])
//!   completes a [`CompletionRequest`]; [`score()`] compares the completion with the truth.
//! - **Evaluation and tuning**: [`eval::run()`] runs RLPG's protocol over many repositories,
//!   label files and report included, as `keyhole eval` does; `tune::run()` tunes RLPG-H for a backend, as `keyhole tune` does (feature
//!   `train`); [`sample`] is the bundled sample repositories.
//!
//! # Features
//!
//! All on by default: `tui` (the terminal UI), `local-model` (GGUF models run in-process),
//! `http` (OpenAI-compatible, Ollama and llama.cpp servers), `proxy` (`keyhole proxy`, between
//! an editor plugin and its server), `train` (training the classifier and tuning it for a
//! backend, with candle), `bert` (BERT-family encoders for the classifier; implies `train`) and
//! `cli` (the `keyhole` binary: all of the above, its flags, progress bars and allocator). With
//! `default-features = false` the library builds its core alone, without a tensor library:
//! indexing, proposals, retrieval, composing, ranking (with the bundled classifier or one
//! `keyhole train` wrote) and the embedded model.

// A build without the command line (the core, or some features) leaves unused what only the
// command line, the UI, the proxy or the HTTP backends use; the default build has them all and
// is where unused code is found.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]

// What an embedder uses is re-exported below (and `eval`, `tune`, `sample`); the modules
// themselves are the crate's own, so that their many parts are free to change.
mod candidate;
mod compose;
mod config_file;
mod context;
mod dirs;
mod escape;
pub mod eval;
mod explain;
mod feedback;
mod hole;
mod label;
mod lang;
mod lsp;
mod metrics;
mod model;
mod pin;
mod pool;
mod proxy;
mod rank;
mod repo;
mod rlpg_text;
pub mod sample;
mod session;
mod sourced;
mod text;
mod token;
#[cfg(feature = "tui")]
mod tui;

/// The `keyhole` binary's command line, here rather than in the binary so that it can use the
/// crate's own modules; not part of the library's interface.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod testing;

// The command line names the crate's modules as `keyhole::...`, as it did when it was the
// binary's; this keeps those paths working inside the crate.
extern crate self as keyhole;

pub use candidate::{
    CandidateId, CandidateInfo, ContextType, Family, Numbering, PromptSource, ProposalSpec,
    Selection, SelectionError, catalogue,
};
pub use compose::{
    Assembly, BrokenPromise, CandidateContext, Composer, DEFAULT_BUDGET, DefaultContext,
    DefaultReading, MAX_BUDGET, Prompt, Segment, SegmentKind,
};
pub use context::fidelity::Fidelity;
pub use context::perspectives::RetrievedContext;
pub use context::proposals::ProposalContext;
pub use dirs::Dirs;
pub use feedback::Pick;
pub use hole::{Hole, HoleColumn, HoleError};
pub use lang::Span;
pub use lsp::{ServerChoice, ServerChoiceError, ServerOptions};
pub use metrics::{Scores, score};
pub use model::config::{BackendConfig, BackendKind, ConfigError, Matrices};
pub use model::{
    Backend, BackendError, Completion, CompletionRequest, Delta, TokenCounting, build_backend,
};
pub use rank::classifier::ModelError;
pub use rank::{Ranked, RankerKind};
pub use repo::{CacheReport, OpenError, RepoIndex, SourceFile, Vendored};
pub use session::tuned::TunedInfo;
pub use session::{
    Analysis, Availability, BanditLesson, BuiltContext, CandidateRow, Choices, FitError,
    HoleCandidates, Later, Learning, OpenStage, Opening, PickRecorded, Procc, Session,
    SessionBuilder, SessionError, Settings, SettingsError,
};
pub use sourced::{Origin, Piece, SourcedText};
pub use token::{Keep, Tokenizer, TokenizerKind};

/// Tuning RLPG-H for a person's backend on their repositories, as `keyhole tune` does.
#[cfg(feature = "train")]
pub mod tune {
    pub use crate::eval::tune::{HeldOut, TuneReport, Tuned, Tuning, run};
    pub use crate::rank::classifier::train::{Comparison, Epoch, TrainReport};
}
