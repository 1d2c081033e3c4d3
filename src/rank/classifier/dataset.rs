//! Training examples from evaluation label files: for every labelled hole, the classifier's
//! inputs rebuilt from the repository (hole window, each candidate's context) and its targets
//! (which candidates were applicable, which succeeded). With a BERT encoder the inputs are its
//! \[CLS\] vectors, computed here once per distinct text (the encoder is frozen).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::bert::{BertEncoder, EncoderError};
use super::{EncoderKind, WINDOW_KEEP, candidate_contexts, features};
use crate::candidate::CandidateId;
use crate::context::proposals::build_for_budget;
use crate::hole::HoleWindow;
use crate::label::LabelRow;
use crate::label::{HoleRows, LabelledHoleError, group as group_holes};
use crate::rank::RankInput;
use crate::repo::RepoIndex;
use crate::token::{Keep, Tokenizer};

/// One labelled hole, ready for the networks.
pub struct Example {
    pub repository: String,
    /// The hole's file, relative to its repository.
    pub file: String,
    pub inputs: Inputs,
    /// 1 where the candidate was applicable.
    pub mask: Vec<f32>,
    /// 1 where it was applicable and its completion matched.
    pub labels: Vec<f32>,
}

/// A hole's inputs as the model's encoder reads them. Candidate contexts are only kept when
/// asked for, as RLPG-R needs them and they are large; otherwise they are empty.
pub enum Inputs {
    Hashed {
        /// `features::hole_ids` of the hole window.
        hole: Vec<u32>,
        /// Each candidate's `features::context_ids`, by id (empty when not applicable).
        contexts: Vec<Vec<u32>>,
    },
    Bert {
        /// The hole window's \[CLS\] vector.
        hole: Vec<f32>,
        /// Each candidate context's \[CLS\] vector, by id (`None` when it has none); shared
        /// between holes with the same context.
        contexts: Vec<Option<Arc<[f32]>>>,
    },
}

impl Inputs {
    /// The encoder these inputs were made for.
    pub fn encoder(&self) -> EncoderKind {
        match self {
            Inputs::Hashed { .. } => EncoderKind::Hashed,
            Inputs::Bert { hole, .. } => EncoderKind::Bert { width: hole.len() },
        }
    }
}

/// Context vectors already computed, by text and kept end.
type Encoded = Mutex<HashMap<(blake3::Hash, bool), Option<Arc<[f32]>>>>;

/// Where the labelled repositories are.
#[derive(Clone, Copy)]
pub enum Corpus<'a> {
    /// Each under this directory, by the name label rows give it.
    Dir(&'a Path),
    /// Each at its own path, by name.
    Paths(&'a [(String, PathBuf)]),
}

impl Corpus<'_> {
    /// Where repository `name` is.
    fn path(&self, name: &str) -> PathBuf {
        match self {
            Corpus::Dir(dir) => dir.join(name),
            Corpus::Paths(paths) => paths
                .iter()
                .find(|(n, _)| n == name)
                .map_or_else(|| PathBuf::from(name), |(_, p)| p.clone()),
        }
    }
}

/// How to rebuild the holes' inputs.
pub struct Rebuild<'a> {
    /// Finds repository `name` (as label rows name it).
    pub corpus: Corpus<'a>,
    pub tokenizer: &'a dyn Tokenizer,
    /// The budget the labels were made with (proposal contexts are cut to their share).
    pub budget: usize,
    pub with_contexts: bool,
    /// Read code with this frozen BERT encoder instead of keyhole's hashed sub-tokens.
    pub encoder: Option<&'a BertEncoder>,
    /// Where repository indexes are cached (none: index from scratch).
    pub cache: Option<&'a Path>,
}

/// Why a hole's example could not be rebuilt (a line of [`Examples::skipped`]).
#[derive(Debug, thiserror::Error)]
enum Unbuilt {
    #[error(transparent)]
    Hole(#[from] LabelledHoleError),
    #[error("{hole_id}: {source}")]
    Encoder {
        hole_id: String,
        source: EncoderError,
    },
}

/// What came out of a rebuild.
pub struct Examples {
    pub examples: Vec<Example>,
    /// One line per hole or repository that could not be rebuilt.
    pub skipped: Vec<String>,
}

impl Rebuild<'_> {
    /// Examples for every hole of `rows`, grouped by repository; a repository that cannot be
    /// opened or a hole that no longer exists is skipped with a note.
    pub fn examples(&self, rows: &[LabelRow]) -> Examples {
        let mut by_repository: BTreeMap<String, Vec<HoleRows>> = BTreeMap::new();
        for hole in group_holes(rows) {
            by_repository
                .entry(hole.repository.clone())
                .or_default()
                .push(hole);
        }
        let mut out = Examples {
            examples: Vec::new(),
            skipped: Vec::new(),
        };
        let encoded = Encoded::default();
        for (name, holes) in by_repository {
            let path = self.corpus.path(&name);
            let index = match RepoIndex::open(&path, self.cache) {
                Ok(index) => index,
                Err(e) => {
                    out.skipped.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            let built: Vec<Result<Example, Unbuilt>> = holes
                .par_iter()
                .map(|h| self.example(&index, h, &encoded))
                .collect();
            for result in built {
                match result {
                    Ok(example) => out.examples.push(example),
                    Err(why) => out.skipped.push(why.to_string()),
                }
            }
        }
        out
    }

    fn example(
        &self,
        index: &RepoIndex,
        rows: &HoleRows,
        encoded: &Encoded,
    ) -> Result<Example, Unbuilt> {
        let hole = rows.hole(index)?;
        let proposals = match self.with_contexts {
            // The labels' own profile: its holes and contexts are the ones labelled.
            true => build_for_budget(index, &hole, self.tokenizer, self.budget, rows.fidelity()),
            false => Vec::new(),
        };
        let input = RankInput::new(index, &hole, &proposals);
        let contexts = match self.with_contexts {
            true => candidate_contexts(&input),
            false => Vec::new(),
        };
        let inputs = self
            .inputs(&input.window, &contexts, encoded)
            .map_err(|source| Unbuilt::Encoder {
                hole_id: rows.hole_id.clone(),
                source,
            })?;
        let flag = |yes: bool| if yes { 1.0 } else { 0.0 };
        Ok(Example {
            repository: rows.repository.to_string(),
            file: rows.file().to_string(),
            inputs,
            mask: CandidateId::rlpg()
                .map(|id| flag(rows.applicable(id)))
                .collect(),
            labels: CandidateId::rlpg()
                .map(|id| flag(rows.succeeded(id)))
                .collect(),
        })
    }

    fn inputs(
        &self,
        window: &HoleWindow,
        contexts: &[(&str, Keep)],
        encoded: &Encoded,
    ) -> Result<Inputs, EncoderError> {
        let Some(encoder) = self.encoder else {
            return Ok(Inputs::Hashed {
                hole: features::hole_ids(window),
                contexts: contexts
                    .iter()
                    .map(|&(text, keep)| features::context_ids(text, keep))
                    .collect(),
            });
        };
        Ok(Inputs::Bert {
            hole: encoder.encode(&window.text(), WINDOW_KEEP)?,
            contexts: contexts
                .iter()
                .map(|&(text, keep)| encode_once(encoder, encoded, text, keep))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// `text`'s vector as [`BertEncoder::encode_context`], computed only the first time.
fn encode_once(
    encoder: &BertEncoder,
    encoded: &Encoded,
    text: &str,
    keep: Keep,
) -> Result<Option<Arc<[f32]>>, EncoderError> {
    let key = (blake3::hash(text.as_bytes()), keep == Keep::End);
    if let Some(vector) = encoded.lock().expect("encoded").get(&key) {
        return Ok(vector.clone());
    }
    // Not locked while encoding: two threads meeting the same new text both encode it.
    let vector: Option<Arc<[f32]>> = encoder.encode_context(text, keep)?.map(Arc::from);
    encoded.lock().expect("encoded").insert(key, vector.clone());
    Ok(vector)
}
