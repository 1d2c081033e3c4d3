//! `keyhole eval merge`: the output directories of a sharded run put together into one, as
//! if one run had labelled every hole.
//!
//! The shards must have been made with the same settings apart from the shard (the same N,
//! each shard once); a hole labelled in two directories is refused rather than picked from
//! one, since it says that the directories are not shards of one run. The merged label files
//! keep each repository's holes in one order (by file, line and column), whatever order the
//! shards were given in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use super::WRITTEN_ROWS;
use super::labels::{self, LabelFile, LabelIndex};
use super::outdir::{self, OutDir, OutDirError, Recorded};
use super::runner::{run_hole_id, run_holes};
use super::shard::Shard;
use crate::repo::RepoIndex;

/// Where a merge writes its label files until every one is whole; renamed to `labels` then,
/// so that a merge killed part way leaves no label rows that would pass as the whole run.
const PARTIAL_LABEL_DIR: &str = "labels.partial";

/// Why directories cannot be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    #[error("{dir} was made with {differences} as {first} was; only shards of one run merge")]
    Settings {
        dir: String,
        first: String,
        differences: String,
    },
    #[error("{dir} and {other} are both shard {shard}")]
    SameShard {
        dir: String,
        other: String,
        shard: Shard,
    },
    #[error("{dir} and {other} both label {hole_id}; only shards of one run merge, each once")]
    Duplicate {
        dir: String,
        other: String,
        hole_id: String,
    },
    #[error(
        "{dir} is still being labelled by `keyhole eval` ({holder}), so its rows are not all written: merge once it has finished"
    )]
    InUse { dir: String, holder: String },
    #[error(
        "{dir} labelled {repository} from other files than {first} did ({changes}); only shards of one checkout merge"
    )]
    Sources {
        dir: String,
        first: String,
        repository: String,
        changes: String,
    },
    #[error(
        "{out} already holds label rows other than these shards' ({holes} holes): merge into a new --out, or delete {out} and merge again"
    )]
    OutHasRows { out: String, holes: usize },
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    #[error("{path}: {detail}")]
    Io { path: String, detail: String },
}

/// Shard directories read and checked, ready to be written as one. No `keyhole eval` can
/// write into the shards while it lives.
#[derive(Debug)]
pub struct Merged {
    /// The shards' settings, with the shard that of the whole run.
    pub settings: Recorded,
    /// The shards given, in the order of `dirs`, with their directories.
    pub shards: Vec<(Shard, PathBuf)>,
    /// Where each shard's whole holes are, in the order of `shards`: the rows stay in the
    /// shards' files until they are written.
    indexes: Vec<LabelIndex>,
    /// Each repository's holes, in order.
    holes: BTreeMap<String, Vec<ShardHole>>,
    /// The holes each shard labels, in the order of `shards`.
    labelled: Vec<HashSet<String>>,
    _holds: Vec<File>,
}

/// A hole of a shard, where the merged file puts it: (file, line, column), then the shard and
/// the hole's place in the shard's index.
type ShardHole = (String, usize, usize, usize, usize);

/// A shard that lacks rows of some of its holes.
#[derive(Debug, PartialEq)]
pub struct Holes {
    pub shard: Shard,
    pub dir: PathBuf,
    pub missing: usize,
    pub holes: usize,
}

impl Merged {
    /// The shards of the run that were not given, e.g. `3/4`.
    pub fn missing(&self) -> Vec<Shard> {
        let Some(count) = self.shards.first().map(|(s, _)| s.count()) else {
            return Vec::new();
        };
        let given: HashSet<Shard> = self.shards.iter().map(|(s, _)| *s).collect();
        (1..=count)
            .filter_map(|i| Shard::new(i, count).ok())
            .filter(|s| !given.contains(s))
            .collect()
    }

    /// How many holes the merged directories label.
    pub fn holes(&self) -> usize {
        self.labelled.iter().map(HashSet::len).sum()
    }

    /// Checks that the repositories, as `indexes` (by name) hold them now, are the ones the
    /// shards labelled (the report finds the holes again in them).
    pub fn check_sources(&self, indexes: &[(String, &RepoIndex)]) -> Result<(), MergeError> {
        for (name, index) in indexes {
            let Some(then) = self.settings.sources.get(name) else {
                continue;
            };
            let now = outdir::Sources::of(index);
            if now.fingerprint != then.fingerprint {
                return Err(MergeError::Sources {
                    dir: index.root.display().to_string(),
                    first: self.shards[0].1.display().to_string(),
                    repository: name.clone(),
                    changes: now.changes_since(then),
                });
            }
        }
        Ok(())
    }

    /// The shards that lack rows of some of their holes, as sampled in `indexes` (by name).
    pub fn with_holes(&self, indexes: &[(String, &RepoIndex)]) -> Vec<Holes> {
        let labels = &self.settings.labels;
        let mut found = Vec::new();
        for ((shard, dir), labelled) in self.shards.iter().zip(&self.labelled) {
            let mut holes = 0;
            let mut missing = 0;
            for (name, index) in indexes {
                let sampled = run_holes(index, labels.holes, labels.seed, labels.fidelity, *shard);
                holes += sampled.len();
                let ids = sampled.iter().map(|h| run_hole_id(name, index, h));
                missing += ids.filter(|id| !labelled.contains(id)).count();
            }
            if missing > 0 {
                found.push(Holes {
                    shard: *shard,
                    dir: dir.clone(),
                    missing,
                    holes,
                });
            }
        }
        found
    }
}

/// Reads the output directories `dirs` and checks that they are distinct shards of one run,
/// none of them still being labelled.
pub fn read(dirs: &[PathBuf]) -> Result<Merged, MergeError> {
    let shown = |dir: &Path| dir.display().to_string();
    let mut first: Option<(PathBuf, Recorded)> = None;
    let mut shards: Vec<(Shard, PathBuf)> = Vec::new();
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut indexes = Vec::new();
    let mut holes: BTreeMap<String, Vec<_>> = BTreeMap::new();
    let mut labelled = Vec::new();
    let mut holds = Vec::new();
    for (d, dir) in dirs.iter().enumerate() {
        match outdir::hold_for_reading(dir) {
            Ok(hold) => holds.extend(hold),
            Err(OutDirError::Locked { dir, holder }) => {
                return Err(MergeError::InUse { dir, holder });
            }
            Err(e) => return Err(e.into()),
        }
        let recorded = outdir::recorded(dir)?;
        let shard = recorded.labels.shard;
        match &mut first {
            None => first = Some((dir.clone(), recorded.clone())),
            Some((first_dir, expected)) => {
                // Everything but the shard must agree; the shard count is compared as `I/N`
                // only when it differs, so `1/2` and `2/2` agree and `1/2` and `1/3` do not.
                let mut now = recorded.clone();
                if now.labels.shard.count() == expected.labels.shard.count() {
                    now.labels.shard = expected.labels.shard;
                }
                let mut differences = outdir::differences(&now.labels, &expected.labels);
                differences.extend(outdir::differences(&now.report, &expected.report));
                if !differences.is_empty() {
                    return Err(MergeError::Settings {
                        dir: shown(dir),
                        first: shown(first_dir),
                        differences: differences.join(", "),
                    });
                }
                for (repository, sources) in &recorded.sources {
                    match expected.sources.get(repository) {
                        Some(then) if then.fingerprint != sources.fingerprint => {
                            return Err(MergeError::Sources {
                                dir: shown(dir),
                                first: shown(first_dir),
                                repository: repository.clone(),
                                changes: sources.changes_since(then),
                            });
                        }
                        Some(_) => {}
                        None => {
                            expected.sources.insert(repository.clone(), sources.clone());
                        }
                    }
                }
            }
        }
        if let Some((_, other)) = shards.iter().find(|(s, _)| *s == shard) {
            return Err(MergeError::SameShard {
                dir: shown(dir),
                other: shown(other),
                shard,
            });
        }
        shards.push((shard, dir.clone()));
        let mut mine = HashSet::new();
        let paths = outdir::run_label_files(dir, &recorded.labels.repositories)?;
        let index = LabelIndex::read(&paths).map_err(|e| MergeError::Io {
            path: shown(dir),
            detail: e.to_string(),
        })?;
        // One hole's rows at a time, for where it goes in the merged file.
        for i in 0..index.len() {
            let hole_id = index.hole_id(i);
            let hole_owner = *owner.entry(hole_id.to_string()).or_insert(d);
            if hole_owner != d {
                return Err(MergeError::Duplicate {
                    dir: shown(dir),
                    other: shown(&dirs[hole_owner]),
                    hole_id: hole_id.to_string(),
                });
            }
            mine.insert(hole_id.to_string());
            let rows = index.hole_rows(i).map_err(|e| MergeError::Io {
                path: shown(dir),
                detail: e.to_string(),
            })?;
            let first = &rows[0];
            let at = (first.file.clone(), first.line, first.column, d, i);
            holes.entry(first.repository.clone()).or_default().push(at);
        }
        indexes.push(index);
        labelled.push(mine);
    }
    let Some((_, mut settings)) = first else {
        return Err(MergeError::Io {
            path: "eval merge".to_string(),
            detail: "no directories to merge".to_string(),
        });
    };
    settings.labels.shard = Shard::WHOLE;
    for repo in holes.values_mut() {
        repo.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
    }
    Ok(Merged {
        settings,
        shards,
        indexes,
        holes,
        labelled,
        _holds: holds,
    })
}

/// Writes `merged` into the output directory `out`, with the settings of the whole run;
/// returns the directory, still locked. The label files are written aside and put in place
/// together once whole. `out` must hold no label rows, or exactly these (a merge stopped
/// after its label files were in place, say while writing its report: they are kept).
pub fn write(merged: &Merged, out: &Path) -> Result<OutDir, MergeError> {
    let Recorded {
        labels,
        report,
        repository_paths,
        sources,
    } = &merged.settings;
    if outdir::has_rows(out) {
        let held = labels::label_files(&out.join("labels")).and_then(|p| LabelIndex::read(&p));
        let held: HashSet<&str> = match &held {
            Ok(held) => (0..held.len()).map(|i| held.hole_id(i)).collect(),
            Err(_) => HashSet::new(),
        };
        let same_settings = outdir::recorded(out).is_ok_and(|r| &r.labels == labels);
        let ours = merged
            .labelled
            .iter()
            .flatten()
            .all(|h| held.contains(h.as_str()));
        if !(same_settings && ours && held.len() == merged.holes()) {
            return Err(MergeError::OutHasRows {
                out: out.display().to_string(),
                holes: held.len(),
            });
        }
        let mut dir = OutDir::open(out, labels, report, repository_paths)?;
        dir.record_sources(sources.clone())?;
        return Ok(dir);
    }
    let mut dir = OutDir::open(out, labels, report, repository_paths)?;
    dir.record_sources(sources.clone())?;
    let io_error = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| MergeError::Io {
            path,
            detail: e.to_string(),
        }
    };
    // What a merge killed part way left.
    let partial = out.join(PARTIAL_LABEL_DIR);
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(io_error(&partial))?;
    }
    for (repository, holes) in &merged.holes {
        let path = partial.join(format!("{repository}.jsonl"));
        let (mut file, _) = LabelFile::open(&path, WRITTEN_ROWS).map_err(io_error(&path))?;
        for &(_, _, _, shard, i) in holes {
            let rows = merged.indexes[shard]
                .hole_rows(i)
                .map_err(|e| MergeError::Io {
                    path: merged.shards[shard].1.display().to_string(),
                    detail: e.to_string(),
                })?;
            file.append_hole(&rows).map_err(io_error(&path))?;
        }
    }
    std::fs::create_dir_all(&partial).map_err(io_error(&partial))?;
    let label_dir = dir.label_dir();
    // A label directory without rows (a run whose every request failed) holds nothing but
    // empty files; one holding anything else is kept.
    if label_dir.exists() {
        let entries = std::fs::read_dir(&label_dir).map_err(io_error(&label_dir))?;
        let mut held = entries.map(|e| e.and_then(|e| e.metadata()));
        if held.any(|m| m.map_or(true, |m| !m.is_file() || m.len() > 0)) {
            return Err(MergeError::Io {
                path: label_dir.display().to_string(),
                detail: "holds files a merge would replace: merge into a new --out".to_string(),
            });
        }
        std::fs::remove_dir_all(&label_dir).map_err(io_error(&label_dir))?;
    }
    std::fs::rename(&partial, &label_dir).map_err(io_error(&label_dir))?;
    Ok(dir)
}
