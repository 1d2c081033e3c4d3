//! RepoEval and CrossCodeEval task files: read either style (detected per row) into
//! [`Task`]s, and export keyhole's holes as CrossCodeEval rows for other harnesses.
//!
//! Both styles count lines from 0 (`metadata.line_no`, `metadata.groundtruth_start_lineno`);
//! [`Task::line`] counts from 1, as keyhole does everywhere else.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::hole_id;
use crate::hole::Hole;
use crate::repo::RepoIndex;

/// A completion task: complete `prompt` with `ground_truth`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Task {
    pub id: String,
    pub repository: String,
    pub prompt: String,
    pub ground_truth: String,
    /// The code after the ground truth (CrossCodeEval's right context); RepoEval has none.
    pub suffix: Option<String>,
    /// Path of the file inside the repository.
    pub file: String,
    /// 1-based line where the ground truth starts.
    pub line: usize,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}:{line}: {message}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        message: MalformedTask,
    },
}

/// Why a line of a task file is no task.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedTask {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// A row of the style (CrossCodeEval, RepoEval) that lacks or mistypes a field.
    #[error("{style} row: {source}")]
    Row {
        style: &'static str,
        source: serde_json::Error,
    },
    #[error("RepoEval row: metadata.fpath_tuple is empty")]
    NoPath,
    #[error(
        "neither a CrossCodeEval row (no `groundtruth`) nor a RepoEval row (no `metadata.ground_truth`)"
    )]
    UnknownStyle,
}

/// A RepoEval row (RepoCoder's benchmark files).
#[derive(Deserialize)]
struct RepoEvalRow {
    prompt: String,
    metadata: RepoEvalMeta,
}

#[derive(Deserialize)]
struct RepoEvalMeta {
    task_id: String,
    ground_truth: String,
    /// The repository directory, then the path inside it.
    fpath_tuple: Vec<String>,
    line_no: usize,
}

/// A CrossCodeEval row.
#[derive(Deserialize)]
struct CrossCodeEvalRow {
    prompt: String,
    groundtruth: String,
    right_context: Option<String>,
    metadata: CrossCodeEvalMeta,
}

#[derive(Deserialize)]
struct CrossCodeEvalMeta {
    task_id: String,
    repository: String,
    file: String,
    groundtruth_start_lineno: usize,
}

/// Read a JSONL task file; blank lines are skipped, any other bad line is an error naming the
/// file and line.
pub fn read_tasks(path: &Path) -> Result<Vec<Task>, TaskError> {
    let text = std::fs::read_to_string(path).map_err(|source| TaskError::Io {
        path: path.into(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            parse_task(line).map_err(|message| TaskError::Malformed {
                path: path.into(),
                line: i + 1,
                message,
            })
        })
        .collect()
}

/// One row of either style: CrossCodeEval rows have a top-level `groundtruth`, RepoEval rows a
/// `metadata.ground_truth`.
fn parse_task(line: &str) -> Result<Task, MalformedTask> {
    let value: Value = serde_json::from_str(line).map_err(MalformedTask::NotJson)?;
    if value.get("groundtruth").is_some() {
        let row: CrossCodeEvalRow = from_value(value, "CrossCodeEval")?;
        return Ok(Task {
            id: row.metadata.task_id,
            repository: row.metadata.repository,
            prompt: row.prompt,
            ground_truth: row.groundtruth,
            suffix: row.right_context,
            file: row.metadata.file,
            line: row.metadata.groundtruth_start_lineno + 1,
        });
    }
    if value.pointer("/metadata/ground_truth").is_some() {
        let row: RepoEvalRow = from_value(value, "RepoEval")?;
        let Some((repository, path)) = row.metadata.fpath_tuple.split_first() else {
            return Err(MalformedTask::NoPath);
        };
        return Ok(Task {
            id: row.metadata.task_id,
            repository: repository.clone(),
            prompt: row.prompt,
            ground_truth: row.metadata.ground_truth,
            suffix: None,
            file: path.join("/"),
            line: row.metadata.line_no + 1,
        });
    }
    Err(MalformedTask::UnknownStyle)
}

fn from_value<T: serde::de::DeserializeOwned>(
    value: Value,
    style: &'static str,
) -> Result<T, MalformedTask> {
    serde_json::from_value(value).map_err(|source| MalformedTask::Row { style, source })
}

/// `hole` of `index` as a CrossCodeEval row, with keyhole's `prompt`. The ground truth is the
/// hole's target and the right context the rest of the file after it.
pub fn export_row(index: &RepoIndex, repository: &str, hole: &Hole, prompt: &str) -> Value {
    let file = &index.files[hole.file];
    let target = hole.target.as_deref().unwrap_or_default();
    let after_hole = &file.text[hole.offset..];
    let right_context = after_hole.strip_prefix(target).unwrap_or(after_hole);
    json!({
        "prompt": prompt,
        "groundtruth": target,
        "right_context": right_context,
        "metadata": {
            "task_id": hole_id(repository, &file.path, hole.line + 1, hole.column + 1),
            "repository": repository,
            "file": &file.path,
            "groundtruth_start_lineno": hole.line,
        },
    })
}

/// Write rows as JSONL, one per line.
pub fn write_jsonl<T: serde::Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    for row in rows {
        serde_json::to_writer(&mut out, &row)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
