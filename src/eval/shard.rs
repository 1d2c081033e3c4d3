//! Shards: one machine's deterministic part of an evaluation's holes, so that N machines label
//! a study together (`--shard I/N`) and `keyhole eval merge` puts their directories together.
//!
//! The holes are sampled first, with the run's seed, exactly as an unsharded run samples them;
//! shard I of N then takes every N-th of them, starting at the I-th. The same seed on the same
//! repository gives the same holes on every machine, so the shards are disjoint and together
//! are the unsharded run's holes; dealing them out in turn spreads every file over the shards.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Shard `index` (1-based) of `count`; `1/1` is the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Shard {
    index: usize,
    count: usize,
}

/// The most shards a run may be cut into (more than any cluster has machines).
pub const MAX_SHARDS: usize = 100_000;

impl Shard {
    /// The whole run.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`, or why not.
    pub fn new(index: usize, count: usize) -> Result<Shard, ShardError> {
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(ShardError::Count);
        }
        if !(1..=count).contains(&index) {
            return Err(ShardError::Index { count });
        }
        Ok(Shard { index, count })
    }

    pub fn index(self) -> usize {
        self.index
    }

    pub fn count(self) -> usize {
        self.count
    }

    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// This shard's part of `items` (in the order the run samples them), in their order.
    pub fn select<T>(self, items: Vec<T>) -> Vec<T> {
        if self.is_whole() {
            return items;
        }
        items
            .into_iter()
            .enumerate()
            .filter(|(position, _)| position % self.count == self.index - 1)
            .map(|(_, item)| item)
            .collect()
    }
}

/// `I/N`.
impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why a shard cannot be made or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    #[error("the shard count must be from 1 to {MAX_SHARDS}")]
    Count,
    #[error("the shard must be from 1 to {count}")]
    Index { count: usize },
    #[error("expected I/N, such as 2/8 (shard I of N, from 1), not {0:?}")]
    Syntax(String),
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let expected = || ShardError::Syntax(text.to_string());
        let (index, count) = text.trim().split_once('/').ok_or_else(expected)?;
        let number = |t: &str| t.trim().parse::<usize>().map_err(|_| expected());
        Shard::new(number(index)?, number(count)?)
    }
}

impl TryFrom<String> for Shard {
    type Error = ShardError;

    fn try_from(text: String) -> Result<Shard, ShardError> {
        text.parse()
    }
}

impl From<Shard> for String {
    fn from(shard: Shard) -> String {
        shard.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_every_item_in_order() {
        let items: Vec<usize> = (0..23).collect();
        for count in [1, 2, 3, 7, 23, 40] {
            let mut seen = Vec::new();
            for index in 1..=count {
                let part = Shard::new(index, count).unwrap().select(items.clone());
                assert!(part.windows(2).all(|w| w[0] < w[1]), "kept in order");
                // Dealt in turn: no shard has more than one item more than another.
                assert!(
                    part.len() >= items.len() / count && part.len() <= items.len().div_ceil(count)
                );
                seen.extend(part);
            }
            seen.sort();
            assert_eq!(seen, items, "{count} shards");
        }
    }

    #[test]
    fn shards_parse_from_i_slash_n_and_refuse_the_rest() {
        assert_eq!("2/8".parse::<Shard>().unwrap(), Shard::new(2, 8).unwrap());
        assert_eq!("2/8".parse::<Shard>().unwrap().to_string(), "2/8");
        for bad in ["0/4", "5/4", "1/0", "3", "a/b", "1/4/2", "-1/4"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&Shard::new(3, 4).unwrap()).unwrap();
        assert_eq!(json, "\"3/4\"");
        assert_eq!(serde_json::from_str::<Shard>(&json).unwrap().index(), 3);
    }
}
