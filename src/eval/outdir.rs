//! An evaluation's output directory: one run at a time (a lock), and the settings its label
//! rows were made with (`settings.json`), so that a resumed run cannot mix rows made with other
//! settings into them.
//!
//! The lock is an advisory `flock` on `eval.lock`, which the kernel releases when the process
//! ends however it ends: a lock left by a killed run is simply taken. The file names the pid and
//! host of the holder for the message the next run prints.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::labels;
use super::runner::EvalOptions;
use super::shard::Shard;
use crate::candidate::Selection;
use crate::context::fidelity::Fidelity;
use crate::feedback::write_atomic;
use crate::model::config::{BackendConfig, Matrices};
use crate::repo::RepoIndex;

/// The settings file, in the output directory.
pub const SETTINGS_FILE: &str = "settings.json";
/// The lock file, in the output directory.
pub const LOCK_FILE: &str = "eval.lock";
/// Label files, one per repository, under the output directory.
pub const LABEL_DIR: &str = "labels";

/// What the label rows of an output directory depend on; a run into the directory must use
/// the same. (What only the report depends on, such as the classifier, is in [`ReportSettings`].)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelSettings {
    /// Repository names, as label files are named.
    pub repositories: Vec<String>,
    /// The cap on holes per repository.
    pub holes: Option<usize>,
    pub seed: u64,
    pub budget: usize,
    pub tokenizer: String,
    /// Whose rules placed the holes and built the contexts (older files lack it: paper).
    #[serde(default)]
    pub fidelity: Fidelity,
    pub backend: String,
    pub model: Option<String>,
    /// Generation settings the backend's entry sets (they replace the request's).
    pub temperature: Option<f32>,
    pub max_tokens: Option<usize>,
    pub stop: Option<Vec<String>>,
    /// Whether a prompt's trailing fragment moves into the completion (older files lack it:
    /// unset, the default).
    #[serde(default)]
    pub token_healing: Option<bool>,
    /// How a local model's matrices run (they round differently).
    #[serde(default)]
    pub matrices: Option<Matrices>,
    /// The candidate ids a hole gets a row for, e.g. `0-70`, numbered as `fidelity` numbers
    /// them.
    pub candidates: String,
    /// The part of the sampled holes this directory labels (`1/1`: all of them; settings of
    /// older versions, which had no shards, read as that).
    #[serde(default = "whole")]
    pub shard: Shard,
}

fn whole() -> Shard {
    Shard::WHOLE
}

/// A candidate list in one spelling whatever order and repeats it was typed with, so that
/// `7,62,7` and `62,7` are one run's settings.
fn canonical_candidates(text: &str) -> String {
    match Selection::parse(text) {
        Ok(mut selection) => {
            selection.ids.sort();
            selection.to_string()
        }
        Err(_) => text.to_string(),
    }
}

impl LabelSettings {
    /// The settings of a run over `repositories` (by name) with `options` and `backend`.
    pub fn new(
        repositories: Vec<String>,
        options: &EvalOptions,
        backend: &BackendConfig,
    ) -> LabelSettings {
        LabelSettings {
            repositories,
            holes: options.holes,
            seed: options.seed,
            budget: options.budget,
            tokenizer: options.tokenizer.name().to_string(),
            fidelity: options.fidelity,
            backend: backend.name.clone(),
            model: backend.model.clone(),
            temperature: backend.temperature,
            max_tokens: backend.max_tokens,
            stop: backend.stop.clone(),
            token_healing: backend.token_healing,
            matrices: backend.matrices,
            // As the run's profile numbers them.
            candidates: canonical_candidates(
                &options
                    .candidates
                    .written_as(options.fidelity.numbering())
                    .to_string(),
            ),
            shard: options.shard,
        }
    }
}

/// What the report of an output directory was last made with; the report is rebuilt from all
/// the rows each run, so these may change between runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportSettings {
    /// The classifier file, or `bundled`.
    pub classifier: String,
    pub encoder_dir: Option<String>,
    /// Repositories of the training split.
    pub train: Vec<String>,
    /// The compositions completed (Table 10).
    pub compose: Vec<usize>,
}

/// What a repository's files were when its rows were labelled: a fingerprint of them all and
/// each file's content hash (shortened), by path, to say which changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sources {
    pub fingerprint: String,
    pub files: BTreeMap<String, String>,
}

/// Hex digits of a file's content hash kept in [`Sources`].
const FILE_HASH_DIGITS: usize = 16;

impl Sources {
    /// The sources of an indexed repository, from the content hashes the index has.
    pub fn of(index: &RepoIndex) -> Sources {
        let files: BTreeMap<String, String> = index
            .files
            .iter()
            .map(|f| {
                let hex = blake3::Hash::from_bytes(f.hash).to_hex();
                (f.path.clone(), hex[..FILE_HASH_DIGITS].to_string())
            })
            .collect();
        let mut hasher = blake3::Hasher::new();
        for (path, hash) in &files {
            hasher.update(path.as_bytes());
            hasher.update(b"\0");
            hasher.update(hash.as_bytes());
            hasher.update(b"\n");
        }
        Sources {
            fingerprint: hasher.finalize().to_hex()[..FILE_HASH_DIGITS].to_string(),
            files,
        }
    }

    /// The files that differ from `then` to `self`, e.g. `src/A.java edited`, for a message:
    /// the first few and how many in all.
    pub fn changes_since(&self, then: &Sources) -> String {
        let mut changes: Vec<String> = Vec::new();
        for (path, hash) in &self.files {
            match then.files.get(path) {
                None => changes.push(format!("{} added", crate::escape::controls(path))),
                Some(old) if old != hash => {
                    changes.push(format!("{} edited", crate::escape::controls(path)));
                }
                Some(_) => {}
            }
        }
        let removed = then.files.keys().filter(|p| !self.files.contains_key(*p));
        changes.extend(removed.map(|p| format!("{} removed", crate::escape::controls(p))));
        const SHOWN: usize = 3;
        let more = match changes.len() {
            n if n > SHOWN => format!(", and {} more", n - SHOWN),
            _ => String::new(),
        };
        let count = changes.len();
        changes.truncate(SHOWN);
        format!(
            "{count} file{}: {}{more}",
            if count == 1 { "" } else { "s" },
            changes.join(", ")
        )
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SettingsFile {
    /// The keyhole version that wrote the file (for people; not compared).
    written_by: String,
    labels: LabelSettings,
    report: ReportSettings,
    /// Where the repositories were on the machine that wrote the file (not compared: shards
    /// run on machines of their own; `keyhole eval merge` looks there first).
    #[serde(default)]
    repository_paths: Vec<PathBuf>,
    /// The repositories' files as they were labelled, by repository name (older files lack
    /// them, and are not checked).
    #[serde(default)]
    sources: BTreeMap<String, Sources>,
}

/// What a directory's settings file records.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub labels: LabelSettings,
    pub report: ReportSettings,
    pub repository_paths: Vec<PathBuf>,
    pub sources: BTreeMap<String, Sources>,
}

/// The settings recorded in the output directory `root`.
pub fn recorded(root: &Path) -> Result<Recorded, OutDirError> {
    let path = root.join(SETTINGS_FILE);
    let bytes = std::fs::read(&path).map_err(|e| OutDirError::Io {
        path: path.display().to_string(),
        detail: if e.kind() == io::ErrorKind::NotFound {
            "not found: is this a `keyhole eval` output directory?".to_string()
        } else {
            e.to_string()
        },
    })?;
    let file = parse_settings(&path, &bytes)?;
    Ok(Recorded {
        labels: file.labels,
        report: file.report,
        repository_paths: file.repository_paths,
        sources: file.sources,
    })
}

fn parse_settings(path: &Path, bytes: &[u8]) -> Result<SettingsFile, OutDirError> {
    let mut file: SettingsFile = serde_json::from_slice(bytes).map_err(|e| OutDirError::Io {
        path: path.display().to_string(),
        detail: format!("not a settings file keyhole can read ({e})"),
    })?;
    // Older versions wrote the candidates as typed.
    file.labels.candidates = canonical_candidates(&file.labels.candidates);
    Ok(file)
}

/// Why an output directory cannot take this run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutDirError {
    #[error(
        "{dir} is in use by another `keyhole eval` ({holder}); wait for it to finish or use another --out"
    )]
    Locked { dir: String, holder: String },
    #[error(
        "{dir} was made with {differences}; resume with the same settings or use another --out"
    )]
    Settings { dir: String, differences: String },
    #[error(
        "{dir} holds label files from an older keyhole that recorded no settings, so a resumed run could mix rows made with other settings; they are left as they are: use another --out (`keyhole train` still reads them)"
    )]
    Unrecorded { dir: String },
    #[error(
        "{dir}: the sources of {repository} changed since its rows were labelled ({changes}); label the repository as it is now into another --out, or restore its files"
    )]
    SourcesChanged {
        dir: String,
        repository: String,
        changes: String,
    },
    #[error(
        "{path} is no label file of this run, whose repositories are {repositories} (a copy would count its holes twice): move it out of the directory"
    )]
    StrayLabels { path: String, repositories: String },
    #[error("{path}: {detail}")]
    Io { path: String, detail: String },
}

/// An output directory held by this run; dropping it releases the lock.
pub struct OutDir {
    root: PathBuf,
    settings: SettingsFile,
    _lock: File,
}

impl OutDir {
    /// Lock `root` (creating it), check that its rows were made with `labels` settings (or
    /// that it has none yet), and record `labels` and `report` as its settings, with where
    /// the repositories are (`repository_paths`).
    pub fn open(
        root: &Path,
        labels: &LabelSettings,
        report: &ReportSettings,
        repository_paths: &[PathBuf],
    ) -> Result<OutDir, OutDirError> {
        let io_error = |path: &Path| {
            let path = path.display().to_string();
            move |e: io::Error| OutDirError::Io {
                path,
                detail: e.to_string(),
            }
        };
        std::fs::create_dir_all(root).map_err(io_error(root))?;
        let lock = lock(root)?;
        let settings_path = root.join(SETTINGS_FILE);
        // Settings bind only rows: a run that wrote none (a wrong model, say) binds nothing.
        let has_rows = has_rows(root);
        run_label_files(root, &labels.repositories)?;
        let mut sources = BTreeMap::new();
        match std::fs::read(&settings_path) {
            Ok(_) if !has_rows => {}
            Ok(bytes) => {
                let recorded = parse_settings(&settings_path, &bytes)?;
                sources = recorded.sources;
                let differences = differences(&recorded.labels, labels);
                if !differences.is_empty() {
                    return Err(OutDirError::Settings {
                        dir: root.display().to_string(),
                        differences: differences.join(", "),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && has_rows => {
                return Err(OutDirError::Unrecorded {
                    dir: root.display().to_string(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&settings_path)(e)),
        }
        let dir = OutDir {
            root: root.to_path_buf(),
            settings: SettingsFile {
                written_by: format!("keyhole {}", env!("CARGO_PKG_VERSION")),
                labels: labels.clone(),
                report: report.clone(),
                repository_paths: repository_paths.to_vec(),
                sources,
            },
            _lock: lock,
        };
        dir.save()?;
        Ok(dir)
    }

    /// Writes the settings file.
    fn save(&self) -> Result<(), OutDirError> {
        let path = self.root.join(SETTINGS_FILE);
        let json = serde_json::to_vec_pretty(&self.settings).expect("settings serialize");
        write_atomic(&path, &json).map_err(|e| OutDirError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })
    }

    /// Checks that `repository`'s rows, if it has any, were labelled from the files `index`
    /// holds now, and records those files as its sources.
    pub fn check_sources(
        &mut self,
        repository: &str,
        index: &RepoIndex,
    ) -> Result<(), OutDirError> {
        let now = Sources::of(index);
        let label_file = self.label_dir().join(format!("{repository}.jsonl"));
        let has_rows = label_file.metadata().is_ok_and(|m| m.len() > 0);
        if let Some(then) = self.settings.sources.get(repository)
            && has_rows
        {
            if then.fingerprint == now.fingerprint {
                return Ok(());
            }
            return Err(OutDirError::SourcesChanged {
                dir: self.root.display().to_string(),
                repository: repository.to_string(),
                changes: now.changes_since(then),
            });
        }
        self.settings.sources.insert(repository.to_string(), now);
        self.save()
    }

    /// Records `sources` as what the repositories' rows were labelled from.
    pub fn record_sources(
        &mut self,
        sources: BTreeMap<String, Sources>,
    ) -> Result<(), OutDirError> {
        self.settings.sources = sources;
        self.save()
    }

    /// The label files of the run's repositories that exist; any other `*.jsonl` file in the
    /// label directory is refused (a copy beside the real one would count holes twice).
    pub fn label_files(&self) -> Result<Vec<PathBuf>, OutDirError> {
        run_label_files(&self.root, &self.settings.labels.repositories)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the label files are.
    pub fn label_dir(&self) -> PathBuf {
        self.root.join(LABEL_DIR)
    }
}

/// Whether the output directory `root` holds label rows (a label file that is not empty).
pub fn has_rows(root: &Path) -> bool {
    labels::label_files(&root.join(LABEL_DIR)).is_ok_and(|files| {
        files
            .iter()
            .any(|f| f.metadata().is_ok_and(|m| m.len() > 0))
    })
}

/// The label files of `repositories` in the output directory `root` that exist; an error
/// naming any other `*.jsonl` file of its label directory.
pub fn run_label_files(root: &Path, repositories: &[String]) -> Result<Vec<PathBuf>, OutDirError> {
    let dir = root.join(LABEL_DIR);
    let files = match labels::label_files(&dir) {
        Ok(files) => files,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(OutDirError::Io {
                path: dir.display().to_string(),
                detail: e.to_string(),
            });
        }
    };
    let expected: Vec<PathBuf> = repositories
        .iter()
        .map(|r| dir.join(format!("{r}.jsonl")))
        .collect();
    if let Some(stray) = files.iter().find(|f| !expected.contains(f)) {
        return Err(OutDirError::StrayLabels {
            path: stray.display().to_string(),
            repositories: repositories.join(", "),
        });
    }
    Ok(expected.into_iter().filter(|f| files.contains(f)).collect())
}

/// A shared hold on the lock of the output directory `root`, for reading it whole: no
/// `keyhole eval` can write into it while the file lives; an error naming the run that holds
/// it (whose rows are not all written yet). None where the directory has no lock file.
pub fn hold_for_reading(root: &Path) -> Result<Option<File>, OutDirError> {
    let path = root.join(LOCK_FILE);
    let io_error = |e: io::Error| OutDirError::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(e)),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(OutDirError::Locked {
            dir: root.display().to_string(),
            holder: holder(&mut file),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io_error(e)),
    }
}

/// Who holds a lock, as its file says.
fn holder(file: &mut File) -> String {
    let mut holder = String::new();
    let _ = file.read_to_string(&mut holder);
    match holder.trim() {
        "" => "starting".to_string(),
        holder => holder.to_string(),
    }
}

/// Takes the lock of `root`, writing who holds it, or says who does.
fn lock(root: &Path) -> Result<File, OutDirError> {
    let path = root.join(LOCK_FILE);
    let io_error = |e: io::Error| OutDirError::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_error)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(OutDirError::Locked {
                dir: root.display().to_string(),
                holder: holder(&mut file),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io_error(e)),
    }
    let holder = format!("pid {} on {}\n", std::process::id(), host_name());
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(holder.as_bytes()))
        .map_err(io_error)?;
    Ok(file)
}

/// This machine's name, for telling a user where the run holding a lock is.
fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at most that many
        // bytes and the result is read only up to the first NUL within the buffer.
        let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
        if ok {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            if end > 0 {
                return String::from_utf8_lossy(&buf[..end]).into_owned();
            }
        }
    }
    "this host".to_string()
}

/// The settings that differ, each as `--flag RECORDED, not NOW`.
pub fn differences<S: Serialize>(recorded: &S, now: &S) -> Vec<String> {
    let fields = |s: &S| match serde_json::to_value(s).expect("settings serialize") {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a struct serializes to a map"),
    };
    let (recorded, now) = (fields(recorded), fields(now));
    recorded
        .iter()
        .filter(|(key, value)| now.get(key.as_str()) != Some(value))
        .map(|(key, value)| {
            let shown = |v: Option<&serde_json::Value>| match v {
                Some(serde_json::Value::Array(items)) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(","),
                Some(serde_json::Value::Null) | None => "none".to_string(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            format!(
                "{} {}, not {}",
                flag(key),
                shown(Some(value)),
                shown(now.get(key.as_str()))
            )
        })
        .collect()
}

/// How a user sets a label setting.
fn flag(key: &str) -> String {
    match key {
        "repositories" => "the repositories".to_string(),
        "candidates" => "the candidates".to_string(),
        "tokenizer" => "the tokenizer".to_string(),
        "temperature" | "stop" | "token_healing" | "matrices" => format!("the backend's {key}"),
        _ => format!("--{}", key.replace('_', "-")),
    }
}
