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
//! let hole = Hole::parse(&session.index, keyhole::sample::DEMO_HOLE)?;
//! let analysis = session.analyse(&hole);
//! for row in analysis.candidates.iter().filter(|c| c.score.is_some()).take(3) {
//!     println!("{:>2} {:<45} {} tokens", row.id, row.label, row.tokens());
//! }
//!
//! // The ranker's favourite (none where it could not rank): its context, a newline, the code
//! // before the hole, composed within the budget.
//! let best = analysis.best().ok_or("the ranker could not rank")?;
//! println!("{}", best.prompt.text());
//! assert!(best.prompt.tokens(session.tokenizer) <= settings.budget);
//! # Ok(())
//! # }
//! ```
//!
//! # Where things live
//!
//! Every candidate context is described once, in the catalogue ([`candidate`]).
//! Data flows through the modules in this order: a repository is indexed ([`repo`], with the
//! language seam in [`lang`]); a [`hole`] is chosen; [`context`] builds every candidate context
//! (RLPG's prompt proposals first), [`rank`] orders them; [`compose`] fits one into a token
//! budget ([`token`]); a [`model`] backend completes the prompt, and [`metrics`] scores the
//! completion against the truth. [`session`] ties these together for one repository, and
//! [`eval`] runs RLPG's protocol over many holes of one ([`RepoRun`]) or over many
//! repositories, label files and report included, as `keyhole eval` does ([`eval::run()`]).
//!
//! # Features
//!
//! All on by default: `tui` (the terminal UI, [`tui`]), `local-model` (GGUF models run
//! in-process), `http` (OpenAI-compatible, Ollama and llama.cpp servers), `proxy` (`keyhole
//! proxy`, [`proxy`], between an editor plugin and its server), `train` (training the
//! classifier and tuning it for a backend, with candle), `bert` (BERT-family encoders for the
//! classifier; implies `train`) and `cli` (the `keyhole` binary: all of the above, its flags,
//! progress bars and allocator). With `default-features = false` the library builds its core
//! alone, without a tensor library: indexing, proposals, retrieval, composing, ranking (with
//! the bundled classifier or one `keyhole train` wrote) and the embedded model.

pub mod candidate;
pub mod compose;
pub(crate) mod config_file;
pub mod context;
pub mod dirs;
// Plumbing the binary and the tests reach, not the library's interface: public, undocumented.
#[doc(hidden)]
pub mod escape;
pub mod eval;
pub mod explain;
pub mod feedback;
pub mod hole;
pub(crate) mod label;
pub mod lang;
#[doc(hidden)]
pub mod lsp;
pub mod metrics;
pub mod model;
mod pool;
pub mod proxy;
pub mod rank;
pub mod repo;
pub(crate) mod rlpg_text;
pub mod sample;
pub mod session;
pub(crate) mod sourced;
pub(crate) mod text;
pub mod token;
#[cfg(feature = "tui")]
pub mod tui;

pub use candidate::{CandidateId, catalogue};
pub use compose::{Composer, DEFAULT_BUDGET, Prompt};
pub use context::fidelity::Fidelity;
pub use dirs::Dirs;
pub use eval::runner::{EvalOptions, RepoRun};
pub use eval::{Evaluation, Observer};
pub use hole::Hole;
pub use model::config::BackendConfig;
pub use model::{Backend, build_backend};
pub use rank::RankerKind;
pub use repo::RepoIndex;
pub use session::{Choices, Learning, Session, SessionBuilder, Settings};
pub use token::TokenizerKind;
