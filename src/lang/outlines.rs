//! A file's type outlines ([`super::FileFacts::outline`]), kept encoded as the cache holds
//! them until typed-hole context first asks for them. Only the few files a hole's types lead
//! to are ever read, while every open decodes every file's facts from the cache: decoding all
//! outlines (a string or vector per member, some 35,000 members on guava) was most of what is
//! left of that cost.

use std::sync::OnceLock;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::{Span, TypeOutline};

#[derive(Clone, Default)]
pub struct Outlines {
    /// The outlines, once extracted or decoded.
    decoded: OnceLock<Vec<TypeOutline>>,
    /// The outlines as the cache holds them (postcard), until decoded.
    encoded: Option<Box<[u8]>>,
}

impl Outlines {
    /// Outlines just extracted from a file.
    pub fn of(types: Vec<TypeOutline>) -> Outlines {
        Outlines {
            decoded: OnceLock::from(types),
            encoded: None,
        }
    }

    /// The outlines of `text`, decoded the first time they are asked for. Outlines a cache
    /// held that do not decode or do not fit `text` (a span out of it or off a character
    /// boundary) are not used: `extract` gives them afresh from the text.
    pub fn of_text(&self, text: &str, extract: impl Fn() -> Vec<TypeOutline>) -> &[TypeOutline] {
        // Typed-hole context may ask from jobs of the CPU pool: built by the pool's rule.
        crate::pool::get_or_build(&self.decoded, || {
            let cached = (self.encoded.as_deref())
                .and_then(|bytes| postcard::from_bytes::<Vec<TypeOutline>>(bytes).ok());
            match cached {
                Some(types) if spans(&types).all(|span| span.fits(text)) => types,
                _ => extract(),
            }
        })
        .as_slice()
    }

    /// The outlines as decoded or extracted, ignoring any that do not decode (for comparing
    /// and printing facts, not for cutting a text).
    fn decoded(&self) -> Vec<TypeOutline> {
        self.clone().into_types()
    }

    /// The outlines, taken: extracted ones as they are, cached ones decoded (none when they do
    /// not decode; not checked against a text).
    pub fn into_types(self) -> Vec<TypeOutline> {
        match (self.decoded.into_inner(), self.encoded) {
            (Some(types), _) => types,
            (None, Some(bytes)) => postcard::from_bytes(&bytes).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }
}

/// Every span of `types`: each type's header and declaration, its constants, fields and
/// methods.
fn spans(types: &[TypeOutline]) -> impl Iterator<Item = Span> + '_ {
    types.iter().flat_map(|t| {
        let fields = t.fields.iter().flat_map(|field| {
            let names = field.names.iter().map(|(_, span)| *span);
            [field.head, field.decl].into_iter().chain(names)
        });
        let methods = t.methods.iter().flat_map(|m| [m.signature, m.decl]);
        [t.header, t.decl]
            .into_iter()
            .chain(t.constants.iter().copied())
            .chain(fields)
            .chain(methods)
    })
}

impl PartialEq for Outlines {
    fn eq(&self, other: &Outlines) -> bool {
        self.decoded() == other.decoded()
    }
}

impl Eq for Outlines {}

impl std::fmt::Debug for Outlines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.decoded().fmt(f)
    }
}

/// Written as bytes holding the encoded outlines, so that a reader can keep them undecoded.
/// Outlines in hand are encoded afresh (those extracted again over cached ones that did not fit
/// replace them), cached ones never asked for are written back as they were read.
impl Serialize for Outlines {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.decoded.get(), &self.encoded) {
            (Some(types), _) => {
                let bytes = postcard::to_allocvec(types).map_err(serde::ser::Error::custom)?;
                serializer.serialize_bytes(&bytes)
            }
            (None, Some(bytes)) => serializer.serialize_bytes(bytes),
            (None, None) => serializer.serialize_bytes(&[]),
        }
    }
}

impl<'de> Deserialize<'de> for Outlines {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Outlines, D::Error> {
        struct Encoded;
        impl Visitor<'_> for Encoded {
            type Value = Outlines;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("encoded type outlines")
            }

            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Outlines, E> {
                Ok(Outlines {
                    decoded: OnceLock::new(),
                    encoded: Some(bytes.into()),
                })
            }
        }
        deserializer.deserialize_bytes(Encoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{Java, Language};

    const SOURCE: &str = "class Order {\n  int total;\n  int total() { return total; }\n}\n";

    fn cached(facts_of: &str) -> Outlines {
        let facts = Java.extract(facts_of);
        postcard::from_bytes(&postcard::to_allocvec(&facts.outline).unwrap()).unwrap()
    }

    #[test]
    fn cached_outlines_read_back_as_they_were_extracted() {
        let extracted = Java.extract(SOURCE).outline;
        let read = cached(SOURCE);
        assert_eq!(read, extracted);
        let types = read.of_text(SOURCE, || {
            panic!("outlines that fit are not extracted again")
        });
        assert_eq!(types.len(), 1);
        assert_eq!(types[0].name, "Order");
        assert_eq!(types[0].methods[0].name, "total");
    }

    #[test]
    fn cached_outlines_that_do_not_fit_the_text_are_extracted_again() {
        // Another text's outlines: the declaration runs past this shorter text's end.
        let read = cached(SOURCE);
        let short = "class A {}\n";
        let types = read.of_text(short, || Java.extract(short).outline.into_types());
        assert_eq!(types.len(), 1);
        assert_eq!(types[0].name, "A");

        // What is kept for the next open is the outline extracted again, not the one that did
        // not fit.
        let kept: Outlines = postcard::from_bytes(&postcard::to_allocvec(&read).unwrap()).unwrap();
        let types = kept.of_text(short, || panic!("the kept outline fits"));
        assert_eq!(types[0].name, "A");

        let damaged = Outlines {
            decoded: OnceLock::new(),
            encoded: Some(vec![0xff, 0xff, 0xff].into()),
        };
        let types = damaged.of_text(SOURCE, || Java.extract(SOURCE).outline.into_types());
        assert_eq!(types[0].name, "Order");
    }
}
