//! keyhole: explore repository-level prompts for code completion.
//!
//! Every candidate context is described once, in the catalogue ([`candidate`]).
//! Data flows through the modules in this order: a repository is indexed ([`repo`], with the
//! language seam in [`lang`]); a [`hole`] is chosen; [`context`] builds every candidate context
//! (RLPG's prompt proposals first), [`rank`] orders them; [`compose`] fits one into a token
//! budget ([`token`]); a [`model`] backend completes the prompt, and [`metrics`] scores the
//! completion against the truth.

pub mod candidate;
pub mod compose;
pub mod config_file;
pub mod context;
pub mod dirs;
pub mod escape;
pub mod eval;
pub mod explain;
pub mod feedback;
pub mod hole;
pub mod label;
pub mod lang;
pub mod metrics;
pub mod model;
pub mod rank;
pub mod repo;
pub mod rlpg_text;
pub mod sample;
pub mod session;
pub mod sourced;
pub mod text;
pub mod token;
#[cfg(feature = "tui")]
pub mod tui;
