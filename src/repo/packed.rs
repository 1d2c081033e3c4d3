//! Serde for the large vectors of derived state (`#[serde(with = "packed")]`, and
//! [`nested`] and [`by_string`] for vectors of them): the values' little-endian bytes in one
//! piece, which decode many times faster than one varint each and need no allocation per
//! value.

use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A value of fixed size, written as its little-endian bytes.
pub trait Fixed: Sized {
    const BYTES: usize;
    fn put(&self, out: &mut Vec<u8>);
    /// The value from exactly [`Fixed::BYTES`] bytes.
    fn take(bytes: &[u8]) -> Self;
}

macro_rules! fixed_number {
    ($($number:ty),*) => {$(
        impl Fixed for $number {
            const BYTES: usize = std::mem::size_of::<$number>();
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn take(bytes: &[u8]) -> Self {
                <$number>::from_le_bytes(bytes.try_into().expect("a value's bytes"))
            }
        }
    )*};
}

fixed_number!(u16, u32, f32);

impl Fixed for [u8; 16] {
    const BYTES: usize = 16;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn take(bytes: &[u8]) -> Self {
        bytes.try_into().expect("a value's bytes")
    }
}

impl<A: Fixed, B: Fixed> Fixed for (A, B) {
    const BYTES: usize = A::BYTES + B::BYTES;
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }
    fn take(bytes: &[u8]) -> Self {
        let (a, b) = bytes.split_at(A::BYTES);
        (A::take(a), B::take(b))
    }
}

/// Values written as one byte string.
struct Bytes(Vec<u8>);

impl Bytes {
    fn of<'a, T: Fixed + 'a>(values: impl ExactSizeIterator<Item = &'a T>) -> Bytes {
        let mut bytes = Vec::with_capacity(values.len() * T::BYTES);
        for value in values {
            value.put(&mut bytes);
        }
        Bytes(bytes)
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

/// Values read back from one byte string.
struct FromBytes<T>(Vec<T>);

impl<'de, T: Fixed> Deserialize<'de> for FromBytes<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_bytes(Values(PhantomData))
            .map(FromBytes)
    }
}

struct Values<T>(PhantomData<T>);

impl<T: Fixed> de::Visitor<'_> for Values<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "little-endian values of {} bytes", T::BYTES)
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<T>, E> {
        if !bytes.len().is_multiple_of(T::BYTES) {
            return Err(E::invalid_length(bytes.len(), &self));
        }
        Ok(bytes.chunks_exact(T::BYTES).map(T::take).collect())
    }
}

pub fn serialize<T: Fixed, S: Serializer>(values: &[T], serializer: S) -> Result<S::Ok, S::Error> {
    Bytes::of(values.iter()).serialize(serializer)
}

pub fn deserialize<'de, T: Fixed, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    FromBytes::deserialize(deserializer).map(|values| values.0)
}

/// Lists of values (`Vec<Vec<T>>`): every list's length, then all the values, each in one
/// piece.
pub mod nested {
    use super::*;

    pub fn serialize<T: Fixed, S: Serializer>(
        lists: &[Vec<T>],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let lengths: Vec<u32> = lists.iter().map(|list| list.len() as u32).collect();
        let values: Vec<&T> = lists.iter().flatten().collect();
        let values = Bytes::of(values.into_iter());
        (Bytes::of(lengths.iter()), values).serialize(serializer)
    }

    pub fn deserialize<'de, T: Fixed, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Vec<T>>, D::Error> {
        let (lengths, values) = <(FromBytes<u32>, FromBytes<T>)>::deserialize(deserializer)?;
        split(lengths.0, values.0)
    }

    /// `values` cut into lists of `lengths`, which must account for every value.
    fn split<T, E: de::Error>(lengths: Vec<u32>, values: Vec<T>) -> Result<Vec<Vec<T>>, E> {
        let total: u64 = lengths.iter().map(|&n| u64::from(n)).sum();
        if total != values.len() as u64 {
            return Err(E::invalid_length(
                values.len(),
                &"as many values as the lists hold",
            ));
        }
        let mut values = values.into_iter();
        let lists = lengths
            .iter()
            .map(|&n| values.by_ref().take(n as usize).collect());
        Ok(lists.collect())
    }
}

/// A map from strings to lists of values (`FxHashMap<String, Vec<T>>`): its entries in
/// no particular order, each list in one piece.
pub mod by_string {
    use rustc_hash::FxHashMap;

    use super::*;

    pub fn serialize<T: Fixed, S: Serializer>(
        map: &FxHashMap<String, Vec<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            map.iter()
                .map(|(key, values)| (key, Bytes::of(values.iter()))),
        )
    }

    pub fn deserialize<'de, T: Fixed, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<FxHashMap<String, Vec<T>>, D::Error> {
        let entries = Vec::<(String, FromBytes<T>)>::deserialize(deserializer)?;
        let mut map = FxHashMap::with_capacity_and_hasher(entries.len(), Default::default());
        map.extend(entries.into_iter().map(|(key, values)| (key, values.0)));
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use rustc_hash::FxHashMap;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct State {
        #[serde(with = "super")]
        numbers: Vec<u32>,
        #[serde(with = "super::nested")]
        lists: Vec<Vec<(u32, u16)>>,
        #[serde(with = "super::by_string")]
        by_term: FxHashMap<String, Vec<(u32, u32)>>,
    }

    #[test]
    fn values_come_back_as_written_and_a_list_past_its_values_does_not_decode() {
        let state = State {
            numbers: vec![0, 1, u32::MAX],
            lists: vec![vec![(1, 2), (3, u16::MAX)], vec![], vec![(7, 8)]],
            by_term: [("a".into(), vec![(1, 2)]), ("b".into(), vec![])]
                .into_iter()
                .collect(),
        };
        let bytes = postcard::to_stdvec(&state).unwrap();
        assert_eq!(postcard::from_bytes::<State>(&bytes).unwrap(), state);

        // Lists said to hold more values than there are, or fewer.
        #[derive(Debug, Deserialize)]
        struct Lists(#[serde(with = "super::nested")] Vec<Vec<(u32, u16)>>);
        let values = [(1u32, 2u16), (3, 4), (5, 6)];
        for lengths in [[2u32, 0, 2], [1, 0, 1]] {
            let written = (
                super::Bytes::of(lengths.iter()),
                super::Bytes::of(values.iter()),
            );
            let bytes = postcard::to_stdvec(&written).unwrap();
            assert!(
                postcard::from_bytes::<Lists>(&bytes).is_err(),
                "{lengths:?}"
            );
        }
        let written = (
            super::Bytes::of([2u32, 0, 1].iter()),
            super::Bytes::of(values.iter()),
        );
        let bytes = postcard::to_stdvec(&written).unwrap();
        let lists = postcard::from_bytes::<Lists>(&bytes).unwrap().0;
        assert_eq!(lists, [vec![(1, 2), (3, 4)], vec![], vec![(5, 6)]]);
    }
}
