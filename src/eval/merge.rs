//! `keyhole eval merge`: the output directories of a sharded run put together into one, as
//! if one run had labelled every hole.
//!
//! The shards must have been made with the same settings apart from the shard (the same N,
//! each shard once); a hole labelled in two directories is refused rather than picked from
//! one, since it says that the directories are not shards of one run. The merged label files
//! keep each repository's holes in one order (by file, line and column), whatever order the
//! shards were given in.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::labels::{self, LabelFile};
use super::outdir::{self, OutDir, OutDirError, Recorded};
use super::shard::Shard;
use super::{LabelRow, WRITTEN_ROWS};

/// Why directories cannot be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    #[error(
        "{dir} was made with {differences} ({first} was made with the first); only shards of one run merge"
    )]
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
        "{out} already holds label rows; merge into a new --out, so that nothing in it is mixed or lost"
    )]
    OutHasRows { out: String },
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    #[error("{path}: {detail}")]
    Io { path: String, detail: String },
}

/// Shard directories read and checked, ready to be written as one.
#[derive(Debug)]
pub struct Merged {
    /// The shards' settings, with the shard that of the whole run.
    pub settings: Recorded,
    /// The shards given, in the order of `dirs`.
    pub shards: Vec<Shard>,
    /// The rows of each repository, whole holes in order.
    pub rows: BTreeMap<String, Vec<LabelRow>>,
}

impl Merged {
    /// The shards of the run that were not given, e.g. `3/4`.
    pub fn missing(&self) -> Vec<Shard> {
        let Some(count) = self.shards.first().map(|s| s.count()) else {
            return Vec::new();
        };
        (1..=count)
            .filter_map(|i| Shard::new(i, count).ok())
            .filter(|s| !self.shards.contains(s))
            .collect()
    }

    /// How many holes the merged directories label.
    pub fn holes(&self) -> usize {
        let mut holes: Vec<&str> = self.rows.values().flatten().map(|r| &*r.hole_id).collect();
        holes.dedup();
        holes.len()
    }
}

/// Reads the output directories `dirs` and checks that they are distinct shards of one run.
pub fn read(dirs: &[PathBuf]) -> Result<Merged, MergeError> {
    let shown = |dir: &Path| dir.display().to_string();
    let mut first: Option<(PathBuf, Recorded)> = None;
    let mut shards: Vec<(Shard, PathBuf)> = Vec::new();
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut rows: BTreeMap<String, Vec<LabelRow>> = BTreeMap::new();
    for (d, dir) in dirs.iter().enumerate() {
        let recorded = outdir::recorded(dir)?;
        let shard = recorded.labels.shard;
        match &first {
            None => first = Some((dir.clone(), recorded.clone())),
            Some((first_dir, expected)) => {
                // Everything but the shard must agree; the shard count is compared as `I/N`
                // only when it differs, so `1/2` and `2/2` agree and `1/2` and `1/3` do not.
                let mut now = recorded.clone();
                if now.labels.shard.count() == expected.labels.shard.count() {
                    now.labels.shard = expected.labels.shard;
                }
                let mut differences = outdir::differences(&expected.labels, &now.labels);
                differences.extend(outdir::differences(&expected.report, &now.report));
                if !differences.is_empty() {
                    return Err(MergeError::Settings {
                        dir: shown(dir),
                        first: shown(first_dir),
                        differences: differences.join(", "),
                    });
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
        let label_dir = dir.join(outdir::LABEL_DIR);
        let read = labels::read_dir(&label_dir).map_err(|e| MergeError::Io {
            path: shown(&label_dir),
            detail: e.to_string(),
        })?;
        for row in read {
            let hole_owner = *owner.entry(row.hole_id.clone()).or_insert(d);
            if hole_owner != d {
                return Err(MergeError::Duplicate {
                    dir: shown(dir),
                    other: shown(&dirs[hole_owner]),
                    hole_id: row.hole_id,
                });
            }
            rows.entry(row.repository.clone()).or_default().push(row);
        }
    }
    let Some((_, mut settings)) = first else {
        return Err(MergeError::Io {
            path: "eval merge".to_string(),
            detail: "no directories to merge".to_string(),
        });
    };
    settings.labels.shard = Shard::WHOLE;
    for repo in rows.values_mut() {
        // Stable: a hole's rows stay in candidate order.
        repo.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    }
    Ok(Merged {
        settings,
        shards: shards.into_iter().map(|(s, _)| s).collect(),
        rows,
    })
}

/// Writes `merged` into the output directory `out`, which must hold no label rows yet, with
/// the settings of the whole run; returns the directory, still locked.
pub fn write(merged: &Merged, out: &Path) -> Result<OutDir, MergeError> {
    if outdir::has_rows(out) {
        return Err(MergeError::OutHasRows {
            out: out.display().to_string(),
        });
    }
    let Recorded {
        labels,
        report,
        repository_paths,
    } = &merged.settings;
    let dir = OutDir::open(out, labels, report, repository_paths)?;
    for (repository, rows) in &merged.rows {
        let path = dir.label_dir().join(format!("{repository}.jsonl"));
        let io_error = |e: std::io::Error| MergeError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        };
        let (mut file, _) = LabelFile::open(&path, WRITTEN_ROWS).map_err(io_error)?;
        for hole in rows.chunk_by(|a, b| a.hole_id == b.hole_id) {
            file.append_hole(hole).map_err(io_error)?;
        }
    }
    Ok(dir)
}
