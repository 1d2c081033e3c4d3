//! Context candidates: text for the prompt that remembers where every piece came from.
//!
//! RLPG's 62 prompt proposals live in [`proposals`]; retrieved candidates of the same shape
//! (RLPG's baselines, RepoCoder, ProCC's perspectives) in [`perspectives`], built on
//! [`retrieval`] and [`windows`].

pub mod fidelity;
pub mod perspectives;
pub mod profile;
pub mod proposals;
pub mod retrieval;
pub mod rlpg_files;
pub mod typed;
pub mod windows;

pub use crate::sourced::{Origin, Piece, SourcedText};
