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

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::LabelRow;
use crate::candidate::CandidateId;
use crate::context::fidelity::Fidelity;
use crate::feedback::write_atomic;
use crate::label::{Grouping, HoleRows};

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
        let rows: Vec<LabelRow> = scan.holes.into_iter().flat_map(|b| b.rows).collect();
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
    repository: String,
    /// Where its lines are in the file: byte offset and length.
    at: (u64, u64),
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
    holes: Vec<Block<T>>,
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
        for mut block in blocks {
            let whole = block.from_zero && block.len == whole_len;
            let keep = whole && (block.failed || done.insert(block.hole_id.clone()));
            let to = if keep {
                &mut scan.kept
            } else {
                &mut scan.removed
            };
            to.extend(std::mem::take(&mut block.lines));
            if keep && !block.failed {
                scan.holes.push(block);
            }
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
                repository: block.repository,
                at: block.at,
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
    let mut offset = 0;
    loop {
        line.clear();
        let read = file.read_line(&mut line)? as u64;
        if read == 0 {
            break;
        }
        offset += read;
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
                repository: row.repository.clone(),
                at: (offset - read, 0),
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
        block.at.1 = offset - block.at.0;
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
    Ok(scan.holes.into_iter().flat_map(|b| b.rows).collect())
}

/// Where the complete holes of a set of label files are, read once line by line (as
/// [`read_file`] reads them, the files left as they are): a report then reads the holes one at
/// a time, in hole id order, as many times as it needs, and never holds more than one hole's
/// rows. What it keeps per hole is its id and where its rows are: about 100 bytes.
#[derive(Debug)]
pub struct LabelIndex {
    files: Vec<PathBuf>,
    /// Every complete hole's block, by hole id and then file order (a hole in two files has
    /// two, and the later rows replace the earlier, as [`Grouping`] adds them).
    blocks: Vec<Located>,
    /// Where each hole's blocks start in `blocks`.
    holes: Vec<u32>,
    repositories: Vec<String>,
    rows: usize,
    fidelity: Option<Fidelity>,
}

/// One block of a hole's rows in one of the index's files.
#[derive(Debug)]
struct Located {
    hole_id: Box<str>,
    /// Index into the index's repositories.
    repository: u32,
    file: u32,
    offset: u64,
    bytes: u64,
}

impl LabelIndex {
    /// Index the label files `paths`.
    pub fn read(paths: &[PathBuf]) -> io::Result<LabelIndex> {
        let mut index = LabelIndex {
            files: paths.to_vec(),
            blocks: Vec::new(),
            holes: Vec::new(),
            repositories: Vec::new(),
            rows: 0,
            fidelity: None,
        };
        for (file, path) in paths.iter().enumerate() {
            let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
            let reader = BufReader::new(File::open(path).map_err(named)?);
            // Only the first row's profile is kept (rows of one run share it).
            let first = index.fidelity.is_none();
            let scan = Scan::new(reader, None, false, |rows| {
                first.then(|| rows.first().map(|r| r.fidelity)).flatten()
            })
            .map_err(named)?;
            for block in scan.holes {
                index.fidelity = index.fidelity.or(block.rows);
                index.rows += block.len;
                let known = index
                    .repositories
                    .iter()
                    .position(|r| *r == block.repository);
                let repository = known.unwrap_or_else(|| {
                    index.repositories.push(block.repository);
                    index.repositories.len() - 1
                });
                index.blocks.push(Located {
                    hole_id: block.hole_id.into_boxed_str(),
                    repository: repository as u32,
                    file: file as u32,
                    offset: block.at.0,
                    bytes: block.at.1,
                });
            }
        }
        // Stable: a hole's blocks stay in file order.
        index.blocks.sort_by(|a, b| a.hole_id.cmp(&b.hole_id));
        let starts = (0..index.blocks.len())
            .filter(|&i| i == 0 || index.blocks[i - 1].hole_id != index.blocks[i].hole_id);
        index.holes = starts.map(|i| i as u32).collect();
        Ok(index)
    }

    /// How many holes it has.
    pub fn len(&self) -> usize {
        self.holes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.holes.is_empty()
    }

    /// How many rows the complete holes have (a hole in two files counts both).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The profile of the first row read: rows of one run share it.
    pub fn fidelity(&self) -> Option<Fidelity> {
        self.fidelity
    }

    /// The id of hole `i` (holes are in hole id order).
    pub fn hole_id(&self, i: usize) -> &str {
        &self.blocks[self.holes[i] as usize].hole_id
    }

    /// The repository of hole `i`.
    pub fn repository(&self, i: usize) -> &str {
        &self.repositories[self.blocks[self.holes[i] as usize].repository as usize]
    }

    /// How many holes each repository has.
    pub fn repositories(&self) -> BTreeMap<String, usize> {
        let mut holes = BTreeMap::new();
        for i in 0..self.len() {
            *holes.entry(self.repository(i).to_string()).or_default() += 1;
        }
        holes
    }

    /// The rows of hole `i`, read again from its files (catalogue numbering).
    pub fn hole_rows(&self, i: usize) -> io::Result<Vec<LabelRow>> {
        self.read_hole(i, |line| serde_json::from_str::<LabelRow>(line))
    }

    /// The rows of hole `i` as [`hole_rows`](Self::hole_rows) reads them, each parsed by
    /// `parse`.
    fn read_hole(
        &self,
        i: usize,
        parse: impl Fn(&str) -> serde_json::Result<LabelRow>,
    ) -> io::Result<Vec<LabelRow>> {
        let end = self
            .holes
            .get(i + 1)
            .map_or(self.blocks.len(), |&e| e as usize);
        let mut rows = Vec::new();
        for block in &self.blocks[self.holes[i] as usize..end] {
            let path = &self.files[block.file as usize];
            let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
            let mut file = File::open(path).map_err(named)?;
            file.seek(SeekFrom::Start(block.offset)).map_err(named)?;
            let mut text = String::new();
            file.take(block.bytes)
                .read_to_string(&mut text)
                .map_err(named)?;
            for line in text.lines() {
                let row = parse(line).map_err(|e| {
                    let detail = format!("changed while being read ({e})");
                    named(io::Error::new(io::ErrorKind::InvalidData, detail))
                })?;
                rows.push(numbered_in_catalogue(row));
            }
        }
        Ok(rows)
    }

    /// The outcomes of the holes of the repositories that `wanted` names, one at a time in hole
    /// id order (only those are read).
    pub fn holes<'a>(
        &'a self,
        wanted: &'a dyn Fn(&str) -> bool,
    ) -> impl Iterator<Item = io::Result<HoleRows>> + 'a {
        let mut grouping = Grouping::default();
        (0..self.len())
            .filter(|&i| wanted(self.repository(i)))
            .map(move |i| {
                let rows = self.read_hole(i, OutcomeLine::parse)?;
                Ok(grouping.outcomes(&rows).expect("blocks hold rows"))
            })
    }
}

/// What a report reads of a row already read whole once: a [`LabelRow`] whose texts
/// (prediction, target, backend) are skipped unread, for a faster pass over the files.
#[derive(serde::Deserialize)]
struct OutcomeLine {
    hole_id: String,
    repository: String,
    file: String,
    line: usize,
    column: usize,
    proposal_id: CandidateId,
    #[serde(default)]
    fidelity: Fidelity,
    applicable: bool,
    success: bool,
    edit_similarity: f64,
    proposal_truncated: bool,
    default_truncated: bool,
    error: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    bm25: Option<f64>,
    #[serde(default)]
    retrieval_score: Option<f64>,
    #[serde(default)]
    retrieval_jaccard: Option<f64>,
    #[serde(default)]
    why_not: Option<String>,
}

impl OutcomeLine {
    fn parse(line: &str) -> serde_json::Result<LabelRow> {
        let o: OutcomeLine = serde_json::from_str(line)?;
        Ok(LabelRow {
            hole_id: o.hole_id,
            repository: o.repository,
            file: o.file,
            line: o.line,
            column: o.column,
            proposal_id: o.proposal_id,
            fidelity: o.fidelity,
            applicable: o.applicable,
            success: o.success,
            edit_similarity: o.edit_similarity,
            edit_distance: 0,
            prediction: String::new(),
            target: String::new(),
            proposal_tokens: 0,
            default_tokens: 0,
            proposal_truncated: o.proposal_truncated,
            default_truncated: o.default_truncated,
            backend: String::new(),
            error: o.error.map(|_| String::new()),
            bm25: o.bm25,
            retrieval_score: o.retrieval_score,
            retrieval_jaccard: o.retrieval_jaccard,
            why_not: o.why_not,
            model_room: None,
        })
    }
}
