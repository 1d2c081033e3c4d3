//! Training examples from evaluation label files: for every labelled hole, the classifier's
//! inputs rebuilt from the repository (hole window, each candidate's context) and its targets
//! (which candidates were applicable, which succeeded).

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;

use super::features;
use crate::context::proposals::build_for_budget;
use crate::eval::report::{HoleRows, group_holes};
use crate::eval::{LabelRow, RLPG_CANDIDATES};
use crate::hole::{Hole, HoleWindow};
use crate::rank::RankInput;
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

/// One labelled hole, ready for the networks.
pub struct Example {
    pub repository: String,
    /// [`features::hole_ids`] of the hole window.
    pub hole: Vec<u32>,
    /// Each candidate's context sub-tokens, by id (empty when not applicable); only kept when
    /// asked for, as RLPG-R needs them and they are large.
    pub contexts: Vec<Vec<u32>>,
    /// 1 where the candidate was applicable.
    pub mask: Vec<f32>,
    /// 1 where it was applicable and its completion matched.
    pub labels: Vec<f32>,
}

/// How to rebuild the holes' inputs.
pub struct Rebuild<'a> {
    /// Finds repository `name` (as label rows name it).
    pub corpus: &'a Path,
    pub tokenizer: &'a dyn Tokenizer,
    /// The budget the labels were made with (proposal contexts are cut to their share).
    pub budget: usize,
    pub with_contexts: bool,
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
        let mut by_repository: BTreeMap<&str, Vec<HoleRows>> = BTreeMap::new();
        for hole in group_holes(rows) {
            by_repository.entry(hole.repository).or_default().push(hole);
        }
        let mut out = Examples {
            examples: Vec::new(),
            skipped: Vec::new(),
        };
        for (name, holes) in by_repository {
            let path = self.corpus.join(name);
            let index = match RepoIndex::open(&path, crate::repo::default_cache_dir().as_deref()) {
                Ok(index) => index,
                Err(e) => {
                    out.skipped.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            let built: Vec<Result<Example, String>> =
                holes.par_iter().map(|h| self.example(&index, h)).collect();
            for result in built {
                match result {
                    Ok(example) => out.examples.push(example),
                    Err(why) => out.skipped.push(why),
                }
            }
        }
        out
    }

    fn example(&self, index: &RepoIndex, rows: &HoleRows) -> Result<Example, String> {
        let any = (0..RLPG_CANDIDATES)
            .find_map(|id| rows.row(id))
            .ok_or_else(|| format!("{}: no rows", rows.hole_id))?;
        let hole = Hole::at(index, &any.file, any.line, any.column)
            .map_err(|e| format!("{}: {e}", rows.hole_id))?;
        let contexts = if self.with_contexts {
            let proposals = build_for_budget(index, &hole, self.tokenizer, self.budget);
            super::candidate_ids(&RankInput::new(index, &hole, &proposals))
        } else {
            Vec::new()
        };
        let flag = |yes: bool| if yes { 1.0 } else { 0.0 };
        Ok(Example {
            repository: rows.repository.to_string(),
            hole: features::hole_ids(&HoleWindow::of(index, &hole)),
            contexts,
            mask: (0..RLPG_CANDIDATES)
                .map(|id| flag(rows.applicable(id)))
                .collect(),
            labels: (0..RLPG_CANDIDATES)
                .map(|id| flag(rows.succeeded(id)))
                .collect(),
        })
    }
}
