//! Label files: JSONL, one row per hole × candidate, safe against a killed run.
//!
//! The rows of one hole are appended in a single write, in candidate order, and synced before
//! the next hole starts, so a hole is a block of consecutive lines with ids 0, 1, …, n-1.
//! Reading keeps the first whole block of each hole: one with every id a hole of the file has
//! (the count the writer gives; for reading alone, the fullest block, so a file of an older
//! version with fewer candidates per hole stays whole). A torn write anywhere in the file (a
//! line cut short, two lines run together, a line lost) leaves a block that is not whole; its
//! hole is not done, and is redone once. A block whose rows record a failed request (written
//! by older versions) is no label either: its hole is redone, and the old block stays.
//!
//! Opening a file to write repairs it: the lines of torn blocks and repeated holes are moved
//! to `REPO.jsonl.removed` beside it, so nothing is lost and reports never read them.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::LabelRow;
use crate::candidate::CandidateId;
use crate::feedback::write_atomic;

/// An open label file that appends whole holes.
pub struct LabelFile {
    path: PathBuf,
    file: File,
    done: HashSet<String>,
    removed: usize,
}

impl LabelFile {
    /// Open (creating) a label file whose holes have `rows_per_hole` rows, repairing it after
    /// an interrupted write; returns the file and the rows of its complete holes.
    pub fn open(path: &Path, rows_per_hole: usize) -> io::Result<(LabelFile, Vec<LabelRow>)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let scan = Scan::new(&text, Some(rows_per_hole));
        // A last line without its line break would run into the next hole's first row.
        let unterminated = !text.is_empty() && !text.ends_with('\n');
        if !scan.removed.is_empty() || unterminated {
            if !scan.removed.is_empty() {
                let mut removed = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(removed_path(path))?;
                removed.write_all(terminated(&scan.removed).as_bytes())?;
                removed.sync_data()?;
            }
            write_atomic(path, terminated(&scan.kept).as_bytes())?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let done = scan.rows.iter().map(|r| r.hole_id.clone()).collect();
        Ok((
            LabelFile {
                path: path.to_path_buf(),
                file,
                done,
                removed: scan.removed.len(),
            },
            scan.rows,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many lines opening moved to the `.removed` file (torn or repeated holes).
    pub fn removed_lines(&self) -> usize {
        self.removed
    }

    /// Whether all rows of a hole are on disk.
    pub fn is_done(&self, hole_id: &str) -> bool {
        self.done.contains(hole_id)
    }

    /// Append all rows of one hole and sync them to disk.
    pub fn append_hole(&mut self, rows: &[LabelRow]) -> io::Result<()> {
        let mut on_disk: Vec<LabelRow> = rows.iter().cloned().map(numbered_on_disk).collect();
        // A hole's rows are a block of consecutive numbers on disk.
        on_disk.sort_by_key(|r| r.proposal_id);
        let mut buf = Vec::new();
        for row in &on_disk {
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

/// `row` with its id as its profile numbers it, as files hold it.
fn numbered_on_disk(mut row: LabelRow) -> LabelRow {
    let number = row.fidelity.numbering().number(row.proposal_id);
    row.proposal_id = CandidateId::nth(number);
    row
}

/// `row` as read from a file, with its id back in the catalogue's numbering.
fn numbered_in_catalogue(mut row: LabelRow) -> LabelRow {
    row.proposal_id = row.fidelity.numbering().typed(row.proposal_id);
    row
}

/// Where the repair of `path` keeps the lines it takes out.
pub fn removed_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".removed");
    path.with_file_name(name)
}

/// `lines` joined, each ending with a line break.
fn terminated(lines: &[&str]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        if !line.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// A run of consecutive lines holding rows of one hole with ids 0, 1, … in order.
struct Block {
    /// Line numbers, end exclusive.
    lines: std::ops::Range<usize>,
    /// Whether its first row has id 0 (a block cut at its start does not).
    from_zero: bool,
    failed: bool,
}

/// A label file read into whole holes and what is left over.
struct Scan<'t> {
    /// Rows of the first whole block of every hole that has one without failures.
    rows: Vec<LabelRow>,
    /// Lines to keep, with their line breaks: whole blocks, failed ones included.
    kept: Vec<&'t str>,
    /// Every other line: torn blocks, lines that do not parse, repeated whole holes.
    removed: Vec<&'t str>,
}

impl<'t> Scan<'t> {
    /// Reads `text`; a whole block has `rows_per_hole` rows, or as many as the fullest block
    /// when that is not known.
    fn new(text: &'t str, rows_per_hole: Option<usize>) -> Scan<'t> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let parsed: Vec<Option<LabelRow>> =
            lines.iter().map(|l| serde_json::from_str(l).ok()).collect();
        let blocks = blocks(&parsed);
        let whole_len = rows_per_hole.unwrap_or_else(|| {
            let full = blocks.iter().filter(|b| b.from_zero);
            full.map(|b| b.lines.len()).max().unwrap_or(0)
        });
        let mut scan = Scan {
            rows: Vec::new(),
            kept: Vec::new(),
            removed: Vec::new(),
        };
        let mut done = HashSet::new();
        let mut in_blocks = vec![false; lines.len()];
        for block in &blocks {
            in_blocks[block.lines.clone()].fill(true);
            let first = parsed[block.lines.start]
                .as_ref()
                .expect("blocks hold rows");
            let whole = block.from_zero && block.lines.len() == whole_len;
            let keep = whole && (block.failed || done.insert(first.hole_id.clone()));
            if keep && !block.failed {
                let rows = parsed[block.lines.clone()].iter().flatten().cloned();
                scan.rows.extend(rows.map(numbered_in_catalogue));
            }
            let to = if keep {
                &mut scan.kept
            } else {
                &mut scan.removed
            };
            to.extend(&lines[block.lines.clone()]);
        }
        // Lines that do not parse.
        scan.removed.extend(
            lines
                .iter()
                .zip(&in_blocks)
                .filter(|(_, in_block)| !**in_block)
                .map(|(line, _)| *line),
        );
        scan
    }
}

/// The blocks of parsed rows in file order; a line that does not parse ends a block.
fn blocks(parsed: &[Option<LabelRow>]) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut open = false;
    for (i, row) in parsed.iter().enumerate() {
        let Some(row) = row else {
            open = false;
            continue;
        };
        let continues = open
            && blocks.last().is_some_and(|b| {
                let last = parsed[b.lines.end - 1].as_ref().expect("blocks hold rows");
                last.hole_id == row.hole_id
                    && last.proposal_id.index() + 1 == row.proposal_id.index()
            });
        if continues {
            let block = blocks.last_mut().expect("continues a block");
            block.lines.end = i + 1;
            block.failed |= row.error.is_some();
        } else {
            blocks.push(Block {
                lines: i..i + 1,
                from_zero: row.proposal_id.index() == 0,
                failed: row.error.is_some(),
            });
        }
        open = true;
    }
    blocks
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
            read_file(path)
        };
        rows.extend(
            read.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        );
    }
    Ok(rows)
}

/// Every complete row of the label files in `dir` (for reports).
pub fn read_dir(dir: &Path) -> io::Result<Vec<LabelRow>> {
    let mut rows = Vec::new();
    for path in label_files(dir)? {
        rows.extend(read_file(&path)?);
    }
    Ok(rows)
}

/// The `*.jsonl` files in `dir`, sorted.
pub fn label_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// The rows of the complete holes of one file, which is left as it is.
pub fn read_file(path: &Path) -> io::Result<Vec<LabelRow>> {
    Ok(Scan::new(&std::fs::read_to_string(path)?, None).rows)
}
