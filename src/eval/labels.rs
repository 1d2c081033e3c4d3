//! Label files: JSONL, one row per hole × proposal, safe against a killed run.
//!
//! The rows of one hole are appended in a single write and synced before the next hole
//! starts. On reopening, rows of a hole that did not get all its rows (a kill in the middle of
//! a write) are dropped, so the hole is redone whole and nothing finished is redone or lost.
//! "All its rows" is as many as the fullest hole of the file has: a file written by an older
//! version, with fewer candidates per hole, stays whole.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::LabelRow;

/// An open label file that appends whole holes.
pub struct LabelFile {
    path: PathBuf,
    file: File,
    done: HashSet<String>,
}

impl LabelFile {
    /// Open (creating) a label file, repairing it after an interrupted write; returns the file
    /// and the rows already in it.
    pub fn open(path: &Path) -> io::Result<(LabelFile, Vec<LabelRow>)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let (rows, clean) = if path.exists() {
            read_complete(path)?
        } else {
            (Vec::new(), true)
        };
        if !clean {
            rewrite(path, &rows)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let done = rows.iter().map(|r| r.hole_id.clone()).collect();
        Ok((
            LabelFile {
                path: path.to_path_buf(),
                file,
                done,
            },
            rows,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether all rows of a hole are on disk.
    pub fn is_done(&self, hole_id: &str) -> bool {
        self.done.contains(hole_id)
    }

    /// Append all rows of one hole and sync them to disk.
    pub fn append_hole(&mut self, rows: &[LabelRow]) -> io::Result<()> {
        let mut buf = Vec::new();
        for row in rows {
            serde_json::to_writer(&mut buf, row)?;
            buf.push(b'\n');
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        if let Some(row) = rows.first() {
            self.done.insert(row.hole_id.clone());
        }
        Ok(())
    }
}

/// Rows of every complete hole in a label file, and whether the file held nothing else.
fn read_complete(path: &Path) -> io::Result<(Vec<LabelRow>, bool)> {
    let mut rows = Vec::new();
    let mut clean = true;
    for line in BufReader::new(File::open(path)?).lines() {
        match serde_json::from_str::<LabelRow>(&line?) {
            Ok(row) => rows.push(row),
            // Only a killed write leaves a line that does not parse (the last one).
            Err(_) => clean = false,
        }
    }
    let mut per_hole: HashMap<&str, usize> = HashMap::new();
    for row in &rows {
        *per_hole.entry(&row.hole_id).or_default() += 1;
    }
    let full = per_hole.values().copied().max().unwrap_or(0);
    let incomplete: HashSet<String> = per_hole
        .into_iter()
        .filter(|(_, n)| *n < full)
        .map(|(id, _)| id.to_string())
        .collect();
    if !incomplete.is_empty() {
        clean = false;
        rows.retain(|r| !incomplete.contains(&r.hole_id));
    }
    Ok((rows, clean))
}

/// Replace the file with `rows`, atomically.
fn rewrite(path: &Path, rows: &[LabelRow]) -> io::Result<()> {
    let tmp = path.with_extension("jsonl.tmp");
    {
        let mut out = io::BufWriter::new(File::create(&tmp)?);
        for row in rows {
            serde_json::to_writer(&mut out, row)?;
            out.write_all(b"\n")?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Every complete row of the label files named: files as they are, directories by their
/// `*.jsonl` files (an evaluation's output directory by its `labels/`).
pub fn read_all(paths: &[PathBuf]) -> io::Result<Vec<LabelRow>> {
    let mut rows = Vec::new();
    for path in paths {
        let read = if path.join("labels").is_dir() {
            read_dir(&path.join("labels"))
        } else if path.is_dir() {
            read_dir(path)
        } else {
            read_complete(path).map(|(rows, _)| rows)
        };
        rows.extend(
            read.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        );
    }
    Ok(rows)
}

/// Every complete row of the label files in `dir` (for reports).
pub fn read_dir(dir: &Path) -> io::Result<Vec<LabelRow>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    let mut rows = Vec::new();
    for path in paths {
        rows.extend(read_complete(&path)?.0);
    }
    Ok(rows)
}
