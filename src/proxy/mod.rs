//! keyhole between an editor's completion plugin and its model server (`keyhole proxy`, the
//! `proxy` feature's [`Proxy`]), and what it records of each exchange: the request as the plugin
//! sent it ([`Sent`]), the answer, and where in a repository the hole was ([`hole_places`]) and
//! each piece of the request came from ([`provenance`]). The record is read without the server
//! (`keyhole recorded`, the UI's recorded-requests picker), and with it the A/B of
//! `--compose-share` ([`ab`]: arms, outcomes inferred, `keyhole recorded stats`).

pub mod ab;
mod arms;
mod compose;
mod exchange;
#[cfg(feature = "proxy")]
mod judging;
mod locate;
mod record;
mod redact;
#[cfg(feature = "proxy")]
mod server;
mod stats;

use std::path::PathBuf;

pub use compose::{
    Chosen, Composition, ContextSource, NoContext, NotLearnt, Pinned, fim_shape, rewrite,
};
pub use exchange::{Answered, ExtraChunk, Sent, read_answer, read_request};
pub use locate::{Certainty, Place, Provenance, hole_places, provenance, sent_prompt};
pub use record::{DEFAULT_MAX_BYTES, Exchange, RecordStore, read_log};
#[cfg(feature = "proxy")]
pub use server::{Access, Bounds, Compose, Proxy, Upstream};
pub use stats::stats;

/// Where the proxy records, in keyhole's data directory; none without one.
pub fn log_dir(dirs: &crate::dirs::Dirs) -> Option<PathBuf> {
    dirs.data.as_ref().map(|d| d.join("proxy"))
}
