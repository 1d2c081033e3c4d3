//! Context candidates: text for the prompt that remembers where every piece came from.
//!
//! RLPG's 62 prompt proposals live in [`proposals`]; retrieved candidates of the same shape
//! (RLPG's baselines, RepoCoder, ProCC's perspectives) in [`perspectives`], built on
//! [`retrieval`] and [`windows`].

mod codex_tokens;
pub mod fidelity;
mod items;
pub mod perspectives;
pub mod profile;
pub mod proposals;
pub mod retrieval;
pub mod rlpg_files;
pub mod typed;
pub mod typed_server;
pub mod windows;

use crate::hole::Hole;
use crate::repo::RepoIndex;
pub use crate::sourced::{Origin, SourcedText};
use crate::token::Tokenizer;
/// What a candidate's context is built from for one hole: the repository, the hole, the
/// tokenizer and the tokens its context may take, the profile whose rules build it and the seed
/// of random choices. RLPG's proposals ([`proposals`]) and the retrieved candidates
/// ([`retrieval`], [`windows`]) take the same request.
#[derive(Clone, Copy)]
pub struct HoleRequest<'a> {
    pub index: &'a RepoIndex,
    pub hole: &'a Hole,
    pub tokenizer: &'a dyn Tokenizer,
    /// Tokens the composer will allow the candidate's context.
    pub allocation: usize,
    pub fidelity: fidelity::Fidelity,
    /// Seeds the random choices (combined with the hole's position).
    pub seed: u64,
}

impl<'a> HoleRequest<'a> {
    /// The request for a candidate given `share` of `budget` (its share in the catalogue),
    /// allocated as the composer will allocate it.
    pub fn new(
        index: &'a RepoIndex,
        hole: &'a Hole,
        tokenizer: &'a dyn Tokenizer,
        (budget, share): (usize, f64),
        fidelity: fidelity::Fidelity,
        seed: u64,
    ) -> Self {
        HoleRequest {
            index,
            hole,
            tokenizer,
            allocation: crate::compose::proposal_allocation(budget, share),
            fidelity,
            seed,
        }
    }
}
