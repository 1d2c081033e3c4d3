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
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::LabelRow;
use crate::candidate::CandidateId;
use crate::feedback::write_atomic;
use crate::label::Grouping;

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
        let scan = match File::open(path) {
            Ok(file) => Scan::new(BufReader::new(file), Some(rows_per_hole), true, |rows| rows)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Scan::new(io::empty(), Some(rows_per_hole), true, |rows| rows)?
            }
            Err(e) => return Err(e),
        };
        // A last line without its line break would run into the next hole's first row.
        if !scan.removed.is_empty() || scan.unterminated {
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
        let rows: Vec<LabelRow> = scan.holes.into_iter().flatten().collect();
        let done = rows.iter().map(|r| r.hole_id.clone()).collect();
        Ok((
            LabelFile {
                path: path.to_path_buf(),
                file,
                done,
                removed: scan.removed.len(),
            },
            rows,
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
fn terminated(lines: &[String]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        if !line.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// A run of consecutive lines holding rows of one hole with ids 0, 1, … in order, as `T`.
struct Block<T> {
    hole_id: String,
    rows: T,
    /// How many rows (lines) it has.
    len: usize,
    /// Whether its first row has id 0 (a block cut at its start does not).
    from_zero: bool,
    failed: bool,
    /// Its lines, with their line breaks, where the scan keeps text.
    lines: Vec<String>,
}

/// A label file read into whole holes and what is left over, one line at a time: each block
/// becomes a `T` as it ends, so that no more than one hole's rows are held at once.
struct Scan<T> {
    /// The first whole block of every hole that has one without failures.
    holes: Vec<T>,
    /// Lines to keep, with their line breaks: whole blocks, failed ones included.
    kept: Vec<String>,
    /// Every other line: torn blocks, lines that do not parse, repeated whole holes.
    removed: Vec<String>,
    /// Whether the last line has no line break.
    unterminated: bool,
}

impl<T> Scan<T> {
    /// Reads `file`; a whole block has `rows_per_hole` rows, or as many as the fullest block
    /// when that is not known. `fold` makes a block's rows (catalogue numbering) into a `T`;
    /// `kept` and `removed` hold lines only when `keep_text`.
    fn new(
        file: impl BufRead,
        rows_per_hole: Option<usize>,
        keep_text: bool,
        mut fold: impl FnMut(Vec<LabelRow>) -> T,
    ) -> io::Result<Scan<T>> {
        let Blocks {
            blocks,
            unparsed,
            unterminated,
        } = blocks(file, keep_text, &mut fold)?;
        let whole_len = rows_per_hole.unwrap_or_else(|| {
            let full = blocks.iter().filter(|b| b.from_zero);
            full.map(|b| b.len).max().unwrap_or(0)
        });
        let mut scan = Scan {
            holes: Vec::new(),
            kept: Vec::new(),
            removed: Vec::new(),
            unterminated,
        };
        let mut done = HashSet::new();
        for block in blocks {
            let whole = block.from_zero && block.len == whole_len;
            let keep = whole && (block.failed || done.insert(block.hole_id));
            if keep && !block.failed {
                scan.holes.push(block.rows);
            }
            let to = if keep {
                &mut scan.kept
            } else {
                &mut scan.removed
            };
            to.extend(block.lines);
        }
        scan.removed.extend(unparsed);
        Ok(scan)
    }
}

/// A label file's lines as blocks, in file order.
struct Blocks<T> {
    blocks: Vec<Block<T>>,
    /// Lines that do not parse (where text is kept).
    unparsed: Vec<String>,
    /// Whether the last line has no line break.
    unterminated: bool,
}

/// The blocks of parsed rows in file order; a line that does not parse ends a block.
fn blocks<T>(
    mut file: impl BufRead,
    keep_text: bool,
    mut fold: impl FnMut(Vec<LabelRow>) -> T,
) -> io::Result<Blocks<T>> {
    let mut blocks = Vec::new();
    let mut unparsed = Vec::new();
    // The block being read: its first row's facts, its rows and lines.
    let mut open: Option<(Block<()>, Vec<LabelRow>)> = None;
    let mut close = |open: &mut Option<(Block<()>, Vec<LabelRow>)>, blocks: &mut Vec<Block<T>>| {
        if let Some((block, rows)) = open.take() {
            blocks.push(Block {
                hole_id: block.hole_id,
                rows: fold(rows.into_iter().map(numbered_in_catalogue).collect()),
                len: block.len,
                from_zero: block.from_zero,
                failed: block.failed,
                lines: block.lines,
            });
        }
    };
    let mut line = String::new();
    let mut unterminated = false;
    loop {
        line.clear();
        if file.read_line(&mut line)? == 0 {
            break;
        }
        unterminated = !line.ends_with('\n');
        let Ok(row) = serde_json::from_str::<LabelRow>(&line) else {
            close(&mut open, &mut blocks);
            if keep_text {
                unparsed.push(line.clone());
            }
            continue;
        };
        let continues = open.as_ref().is_some_and(|(_, rows)| {
            let last = rows.last().expect("blocks hold rows");
            last.hole_id == row.hole_id && last.proposal_id.index() + 1 == row.proposal_id.index()
        });
        if !continues {
            close(&mut open, &mut blocks);
            let block = Block {
                hole_id: row.hole_id.clone(),
                rows: (),
                len: 0,
                from_zero: row.proposal_id.index() == 0,
                failed: false,
                lines: Vec::new(),
            };
            open = Some((block, Vec::new()));
        }
        let (block, rows) = open.as_mut().expect("a block is open");
        block.len += 1;
        block.failed |= row.error.is_some();
        if keep_text {
            block.lines.push(line.clone());
        }
        rows.push(row);
    }
    close(&mut open, &mut blocks);
    Ok(Blocks {
        blocks,
        unparsed,
        unterminated,
    })
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
    let scan = Scan::new(BufReader::new(File::open(path)?), None, false, |rows| rows)?;
    Ok(scan.holes.into_iter().flatten().collect())
}

/// Add the complete holes of one file, which is left as it is, to `grouping`: as
/// [`read_file`] reads them, holding one hole's rows at a time.
pub fn group_file(path: &Path, grouping: &mut Grouping) -> io::Result<()> {
    let file = BufReader::new(File::open(path)?);
    // A block's outcomes are added once the whole file says whether the block is whole.
    let scan = Scan::new(file, None, false, |rows| {
        (rows.len(), grouping.outcomes(&rows))
    })?;
    for (rows, hole) in scan.holes {
        grouping.insert(hole.expect("blocks hold rows"), rows);
    }
    Ok(())
}
