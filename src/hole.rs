//! Holes: a cursor position in a file, with the text that truly follows it when known, and
//! RLPG's hole sampling (paper section 3.1, appendix A.1).

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::lang;
use crate::repo::{FileId, RepoIndex, SourceFile};

/// A position to complete: file, 0-based line and 0-based character column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hole {
    pub file: FileId,
    pub line: usize,
    pub column: usize,
    /// Byte offset of the hole in the file's text.
    pub offset: usize,
    /// The rest of the line after the hole (RLPG's target), when it is known.
    pub target: Option<String>,
}

/// Why a position does not name a hole; every message names the file and position.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoleError {
    #[error("{0}: no such source file in the repository")]
    NoSuchFile(String),
    #[error("{file}: keyhole does not read this language (it reads {reads})")]
    UnknownLanguage { file: String, reads: String },
    #[error("{file}:{line}: line out of range (the file has {lines} lines)")]
    LineOutOfRange {
        file: String,
        line: usize,
        lines: usize,
    },
    #[error("{file}:{line}:{column}: column out of range (the line has {chars} characters)")]
    ColumnOutOfRange {
        file: String,
        line: usize,
        column: usize,
        chars: usize,
    },
    #[error("'{0}': expected FILE:LINE:COL with 1-based LINE and COL")]
    BadPosition(String),
}

impl Hole {
    /// The hole at 1-based `line` and `column` of `path`, as editors and compilers count;
    /// column `chars + 1` is the end of the line. The target is the rest of that line.
    pub fn at(
        index: &RepoIndex,
        path: &str,
        line: usize,
        column: usize,
    ) -> Result<Hole, HoleError> {
        let file_id = index.file_id(path).ok_or_else(|| {
            let on_disk = index.root.join(path).is_file();
            match lang::for_path(std::path::Path::new(path)) {
                None if on_disk => HoleError::UnknownLanguage {
                    file: path.to_string(),
                    reads: lang::read_languages(),
                },
                _ => HoleError::NoSuchFile(path.to_string()),
            }
        })?;
        let file = &index.files[file_id];
        if line == 0 || line > file.line_count() {
            return Err(HoleError::LineOutOfRange {
                file: path.into(),
                line,
                lines: file.line_count(),
            });
        }
        let text = file.line_text(line - 1);
        let chars = text.chars().count();
        if column == 0 || column > chars + 1 {
            return Err(HoleError::ColumnOutOfRange {
                file: path.into(),
                line,
                column,
                chars,
            });
        }
        Ok(Self::in_line(index, file_id, line - 1, column - 1))
    }

    /// Parse `FILE:LINE:COL` and find that hole.
    pub fn parse(index: &RepoIndex, spec: &str) -> Result<Hole, HoleError> {
        let (path, line, column) = split_position(spec)?;
        Self::at(index, path, line, column)
    }

    /// The hole a position names: `FILE:LINE:COL`; `FILE` alone: its first line; empty: where a
    /// repository opens without a position ([`Hole::opening`]).
    pub fn locate(index: &RepoIndex, position: &str) -> Result<Hole, HoleError> {
        match position {
            "" => Ok(Hole::opening(index)),
            spec if spec.contains(':') => Hole::parse(index, spec),
            path => Hole::at(index, path, 1, 1),
        }
    }

    /// Where a repository opens without a position: the first hole in code of the file the
    /// most others import among those that have code, so the first screen shows a hole worth
    /// completing rather than a licence header, a docstring or a package `__init__.py` that
    /// only re-exports. A hole in code is one of the paper's sampled holes (no comment or
    /// documentation line) past the preamble (package and import lines) on a line that uses
    /// a name (not the rest of a long import or a lone bracket).
    pub fn opening(index: &RepoIndex) -> Hole {
        let mut imported = vec![0usize; index.files.len()];
        for import in index.graph.imports.iter().flatten() {
            imported[import.file] += 1;
        }
        let mut first_in_code: Vec<Option<Hole>> = vec![None; index.files.len()];
        let mut lines_using_names: Option<(FileId, Vec<bool>)> = None;
        for hole in sample_holes(index, None, 0, HoleColumn::TrimmedMiddle) {
            if first_in_code[hole.file].is_some() {
                continue;
            }
            let file = &index.files[hole.file];
            if file
                .language
                .is_preamble_line(file.line_text(hole.line).trim())
            {
                continue;
            }
            let using = match &mut lines_using_names {
                Some((f, using)) if *f == hole.file => using,
                slot => &mut slot.insert((hole.file, lines_using_names_of(file))).1,
            };
            if using.get(hole.line) == Some(&true) {
                let file = hole.file;
                first_in_code[file] = Some(hole);
            }
        }
        let central = (0..index.files.len())
            .filter(|&f| first_in_code[f].is_some())
            .max_by_key(|&f| (imported[f], std::cmp::Reverse(f)));
        if let Some(hole) = central.and_then(|f| first_in_code[f].take()) {
            return hole;
        }
        // No file has code: the first line of the most imported one.
        let central = (0..index.files.len())
            .max_by_key(|&f| (imported[f], std::cmp::Reverse(f)))
            .unwrap_or(0);
        Hole {
            file: central,
            line: 0,
            column: 0,
            offset: 0,
            target: Some(index.files[central].line_text(0).trim_end().to_string()),
        }
    }

    /// The hole at 0-based `line` and character `column` (already checked to be in range).
    fn in_line(index: &RepoIndex, file: FileId, line: usize, column: usize) -> Hole {
        let source = &index.files[file];
        let text = source.line_text(line);
        let byte_in_line = crate::text::byte_of_char(text, column);
        let target = text[byte_in_line..].trim_end().to_string();
        Hole {
            file,
            line,
            column,
            offset: source.line_start(line) + byte_in_line,
            target: Some(target),
        }
    }

    /// The 1-based `FILE:LINE:COL` of this hole.
    pub fn display(&self, index: &RepoIndex) -> String {
        format!(
            "{}:{}:{}",
            index.files[self.file].path,
            self.line + 1,
            self.column + 1
        )
    }
}

/// `FILE:LINE:COL` in its parts (LINE and COL 1-based, not yet checked against the file).
pub fn split_position(spec: &str) -> Result<(&str, usize, usize), HoleError> {
    let bad = || HoleError::BadPosition(spec.to_string());
    let (rest, column) = spec.rsplit_once(':').ok_or_else(bad)?;
    let (path, line) = rest.rsplit_once(':').ok_or_else(bad)?;
    let line = line.parse().map_err(|_| bad())?;
    let column = column.parse().map_err(|_| bad())?;
    Ok((path, line, column))
}

/// Holes everywhere, for robustness sweeps: every line of every file (blank and comment lines
/// included), at `columns_per_line` columns drawn with `seed` from the start to the end of line.
pub fn every_line(index: &RepoIndex, columns_per_line: usize, seed: u64) -> Vec<Hole> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut holes = Vec::new();
    for (id, file) in index.files.iter().enumerate() {
        for line in 0..file.line_count() {
            let chars = file.line_text(line).chars().count();
            for _ in 0..columns_per_line {
                holes.push(Hole::in_line(index, id, line, rng.random_range(0..=chars)));
            }
        }
    }
    holes
}

/// How a profile samples holes: where a hole sits in its line, and which lines take one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoleColumn {
    /// The paper's: the middle character of the trimmed line ("the middle of the line"), on
    /// lines of code: no blank, comment or documentation line. RLPG skipped Java's comment
    /// lines, javadoc's included; a Python docstring is documentation as javadoc is, though
    /// its lines carry no mark a line alone shows.
    TrimmedMiddle,
    /// RLPG's code's: `int(len(stripped) / 2)` characters into the line with its indentation,
    /// on every line its `create_hole_data.py` takes, read one at a time: neither blank nor a
    /// comment line ([`takes_hole`]), so a docstring's lines are holes.
    RlpgCode,
}

impl HoleColumn {
    /// Whether lines of documentation the grammar reads as code (Python's docstrings) are
    /// holes.
    fn takes_documentation(self) -> bool {
        self == HoleColumn::RlpgCode
    }
}

/// Whether RLPG takes a hole on a line of this text: one neither blank nor a comment line.
pub fn takes_hole(language: &dyn lang::Language, line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty() && !language.is_comment_line(trimmed)
}

/// For each line of `file`, whether it holds documentation and nothing else: a docstring's
/// lines, not a line with code before or after one.
fn documentation_lines(file: &SourceFile) -> Vec<bool> {
    let mut lines = vec![false; file.line_count()];
    for doc in &file.facts.documentation {
        let (start, end) = (doc.start as usize, doc.end as usize);
        let (first, last) = (
            file.line_of(start),
            file.line_of(end.saturating_sub(1).max(start)),
        );
        for (line, documentation) in lines.iter_mut().enumerate().take(last + 1).skip(first) {
            let text = file.line_text(line);
            let from = file.line_start(line) + (text.len() - text.trim_start().len());
            if from >= start && from + text.trim().len() <= end {
                *documentation = true;
            }
        }
    }
    lines
}

/// For each line of `file`, whether a name is used on it (import lines use none).
fn lines_using_names_of(file: &SourceFile) -> Vec<bool> {
    let mut lines = vec![false; file.line_count()];
    for &line in file.facts.name_usages.all_lines() {
        if let Some(slot) = lines.get_mut(line as usize) {
            *slot = true;
        }
    }
    lines
}

/// The seed a run draws its holes and its random baseline with unless one is given, so that
/// every command, shard and session draws the same.
pub const DEFAULT_SEED: u64 = 9;

/// RLPG's holes for a repository: every line that is neither blank nor a comment (nor, in the
/// paper's reading, documentation: see [`HoleColumn`]), in files that have no exact copy
/// elsewhere, and the rest of the line after the hole as the target; the hole's column is
/// `column`'s. With `cap`, at most that many are
/// drawn at random with `seed` (RLPG capped each repository at 10,000); the result is in
/// file/line order.
pub fn sample_holes(
    index: &RepoIndex,
    cap: Option<usize>,
    seed: u64,
    column: HoleColumn,
) -> Vec<Hole> {
    let mut holes = Vec::new();
    for (id, file) in index.files.iter().enumerate() {
        let language = file.language;
        if index.graph.duplicated[id] {
            continue;
        }
        let documentation = if column.takes_documentation() {
            Vec::new()
        } else {
            documentation_lines(file)
        };
        for line in 0..file.line_count() {
            let text = file.line_text(line);
            if !takes_hole(language, text) || documentation.get(line) == Some(&true) {
                continue;
            }
            let trimmed = text.trim();
            let half = trimmed.chars().count() / 2;
            let middle = match column {
                HoleColumn::TrimmedMiddle => {
                    text[..text.len() - text.trim_start().len()].chars().count() + half
                }
                HoleColumn::RlpgCode => half,
            };
            holes.push(Hole::in_line(index, id, line, middle));
        }
    }
    if let Some(cap) = cap.filter(|&c| c < holes.len()) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        holes.shuffle(&mut rng);
        holes.truncate(cap);
        holes.sort_by_key(|h| (h.file, h.line));
    }
    holes
}

/// RLPG's hole window (section 2.2) in its parts: the two lines before the hole line, the hole
/// line up to the hole, and the two lines after it. The rest of the hole line is left out: it
/// is the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoleWindow<'a> {
    pub before: &'a str,
    pub prefix: &'a str,
    pub after: &'a str,
}

impl<'a> HoleWindow<'a> {
    pub fn of(index: &'a RepoIndex, hole: &Hole) -> HoleWindow<'a> {
        let file = &index.files[hole.file];
        let line_start = file.line_start(hole.line);
        let after_start = file.line_start(hole.line + 1);
        HoleWindow {
            before: &file.text[file.line_start(hole.line.saturating_sub(2))..line_start],
            prefix: &file.text[line_start..hole.offset],
            after: &file.text[after_start..file.line_start(hole.line + 3)],
        }
    }

    /// The window as one text: the lines before, the prefix, a line break, the lines after.
    pub fn text(&self) -> String {
        format!("{}{}\n{}", self.before, self.prefix, self.after)
    }
}
