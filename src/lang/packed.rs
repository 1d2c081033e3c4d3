//! Long arrays of numbers in the facts (spans, lines) written to the cache as plain bytes,
//! little-endian, rather than number by number: every open decodes every file's facts
//! (some 700,000 spans on guava), and a copy of bytes costs a fraction of decoding each number.

use serde::Serializer;
use serde::de::{self, Deserializer, Visitor};

use super::Span;

/// `#[serde(with = "packed::words")]` for a `Vec<u32>`.
pub mod words {
    use super::*;

    pub fn serialize<S: Serializer>(words: &[u32], serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        serializer.serialize_bytes(&bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u32>, D::Error> {
        deserializer.deserialize_bytes(Words(4, |word| {
            u32::from_le_bytes(word.try_into().unwrap())
        }))
    }
}

/// `#[serde(with = "packed::spans")]` for a `Vec<Span>`: each span's start, then its end.
pub mod spans {
    use super::*;

    pub fn serialize<S: Serializer>(spans: &[Span], serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = (spans.iter())
            .flat_map(|s| [s.start.to_le_bytes(), s.end.to_le_bytes()])
            .flatten()
            .collect();
        serializer.serialize_bytes(&bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Span>, D::Error> {
        deserializer.deserialize_bytes(Words(8, |pair| Span {
            start: u32::from_le_bytes(pair[..4].try_into().unwrap()),
            end: u32::from_le_bytes(pair[4..].try_into().unwrap()),
        }))
    }
}

/// Reads bytes as items of `.0` bytes each, made by `.1`.
struct Words<T>(usize, fn(&[u8]) -> T);

impl<T> Visitor<'_> for Words<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "bytes in items of {}", self.0)
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<T>, E> {
        let Words(size, item) = self;
        if !bytes.len().is_multiple_of(size) {
            return Err(E::custom("packed numbers cut short"));
        }
        Ok(bytes.chunks_exact(size).map(item).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Both {
        #[serde(with = "spans")]
        spans: Vec<Span>,
        #[serde(with = "words")]
        words: Vec<u32>,
    }

    #[test]
    fn numbers_read_back_as_written_and_a_cut_array_is_refused() {
        let both = Both {
            spans: vec![Span::new(0, 3), Span::new(7, u32::MAX as usize)],
            words: vec![5, 0, 70_000],
        };
        let bytes = postcard::to_allocvec(&both).unwrap();
        assert_eq!(postcard::from_bytes::<Both>(&bytes).unwrap(), both);

        // Spans whose bytes are one short of whole spans.
        let cut = postcard::to_allocvec(&(vec![0u8; 15], Vec::<u8>::new())).unwrap();
        assert!(postcard::from_bytes::<Both>(&cut).is_err());
    }
}
