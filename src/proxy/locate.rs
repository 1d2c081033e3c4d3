//! Where a recorded completion request was made: the file and position of its hole, found in
//! the repository from the text the plugin sent before and after the cursor, and where each
//! piece of what it sent came from. Plugins send that text in three shapes: apart (llama.cpp's
//! `/infill`: `input_prefix`, `prompt`, `input_suffix`), as a prompt and a suffix (OpenAI's and
//! Ollama's `suffix`), or as one prompt in which they filled a model's fill-in-the-middle
//! template themselves (Continue's and Twinny's `<fim_prefix>…<fim_suffix>…<fim_middle>`).

use std::collections::HashMap;
use std::ops::Range;

use serde::Serialize;

use super::exchange::Sent;
use crate::lang::Span;
use crate::repo::{FileId, RepoIndex};
use crate::sourced::SourcedText;

/// Lines of the text before the cursor that must match (fewer when it has fewer).
pub(super) const ANCHOR_LINES: usize = 3;

/// How sure a place is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// The text before and after the cursor meet there, as sent.
    Exact,
    /// The text before the cursor is there, but what follows has changed since (the user went
    /// on writing, perhaps the completion itself).
    BeforeOnly,
    /// The lines just before the cursor are not there as sent (the file was edited near the
    /// hole), but the cursor's line is, where `matched` of the `sent` lines around it are too:
    /// the nearest window of the file to what was sent.
    Nearest { matched: u16, sent: u16 },
}

impl Certainty {
    /// How people read it.
    pub fn describe(self) -> String {
        match self {
            Certainty::Exact => "the text before and after the cursor match the file".into(),
            Certainty::BeforeOnly => {
                "the text before the cursor matches; the file changed after it".into()
            }
            Certainty::Nearest { matched, sent } => format!(
                "the file changed near the cursor: {matched} of the {sent} lines sent around it match"
            ),
        }
    }
}

/// A place the hole may have been.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    pub file: String,
    /// 1-based, as editors count.
    pub line: usize,
    pub column: usize,
    pub certainty: Certainty,
}

impl Place {
    /// `FILE:LINE:COL`, as the other commands take a hole.
    pub fn position(&self) -> String {
        format!("{}:{}:{}", self.file, self.line, self.column)
    }

    /// The file and byte offset of the place in `index`, if it has the file.
    fn cursor(&self, index: &RepoIndex) -> Option<(FileId, usize)> {
        let id = index.files.iter().position(|f| f.path == self.file)?;
        let file = &index.files[id];
        let start = file.line_start(self.line.checked_sub(1)?);
        let offset = file.text[start..]
            .char_indices()
            .nth(self.column.checked_sub(1)?)
            .map_or(file.text.len(), |(at, _)| start + at);
        Some((id, offset))
    }
}

/// The text a request sent before and after its cursor, as ranges of one of its pieces.
pub(super) struct AroundCursor<'s> {
    /// The text before the cursor; for an infill request, its prefix and middle joined.
    pub before: std::borrow::Cow<'s, str>,
    pub after: &'s str,
}

/// The text before and after the cursor, whichever shape the request sent it in.
pub(super) fn around_cursor(sent: &Sent) -> AroundCursor<'_> {
    let prompt = sent
        .prompt
        .as_deref()
        .or_else(|| sent.messages.last().map(|m| m.content.as_str()))
        .unwrap_or_default();
    let suffix = sent.suffix.as_deref();
    if let Some(prefix) = &sent.prefix {
        return AroundCursor {
            before: format!("{prefix}{prompt}").into(),
            after: suffix.unwrap_or_default(),
        };
    }
    match (suffix, fim_parts(prompt)) {
        (None, Some(fim)) => AroundCursor {
            before: prompt[fim.before].into(),
            after: &prompt[fim.after],
        },
        _ => AroundCursor {
            before: prompt.into(),
            after: suffix.unwrap_or_default(),
        },
    }
}

/// Where a prompt a plugin filled a fill-in-the-middle template in holds the text before and
/// after the cursor; the rest is the template's.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FimParts {
    before: Range<usize>,
    after: Range<usize>,
}

/// The fill-in-the-middle templates of the models plugins serve, prefix first: (prefix marker,
/// suffix marker, middle marker). Code Llama's markers stand apart from the text by a space.
const PREFIX_FIRST: [(&str, &str, &str); 4] = [
    // StarCoder, Stable Code (Continue's default template).
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    // Qwen2.5-Coder, CodeGemma.
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    // DeepSeek Coder.
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    // Code Llama (Twinny's default), whose markers a space sets apart.
    ("<PRE>", " <SUF>", " <MID>"),
];

/// Codestral's template puts the suffix first: `[SUFFIX]…[PREFIX]…`.
const SUFFIX_FIRST: (&str, &str) = ("[SUFFIX]", "[PREFIX]");

/// The parts of `prompt` a fill-in-the-middle template holds, if it holds one.
fn fim_parts(prompt: &str) -> Option<FimParts> {
    for (prefix, suffix, middle) in PREFIX_FIRST {
        let Some(at) = prompt.rfind(suffix) else {
            continue;
        };
        // The text before the cursor starts after the prefix marker: the marker is the
        // template's, and with fewer lines than the anchor takes it would be looked for too.
        let Some(open) = prompt[..at].find(prefix.trim()) else {
            continue;
        };
        let after = at + suffix.len();
        let end = prompt[after..]
            .rfind(middle)
            .map_or(prompt.len(), |m| after + m);
        return Some(FimParts {
            before: open + prefix.trim().len()..at,
            after: after..end,
        });
    }
    let (suffix, prefix) = SUFFIX_FIRST;
    let first = prompt.find(suffix)?;
    let second = first + prompt[first..].find(prefix)?;
    Some(FimParts {
        before: second + prefix.len()..prompt.len(),
        after: first + suffix.len()..second,
    })
}

/// Where the text before the cursor starts in a prompt the plugin filled a fill-in-the-middle
/// template in (right after the template's prefix marker), if it filled one.
pub fn prefix_start(prompt: &str) -> Option<usize> {
    fim_parts(prompt).map(|fim| fim.before.start)
}

/// The places a request's hole may have been, surest first; several of equal certainty mean
/// the request cannot tell them apart.
pub fn hole_places(index: &RepoIndex, sent: &Sent) -> Vec<Place> {
    let around = around_cursor(sent);
    let anchor = anchor(&around.before);
    if anchor.trim().is_empty() {
        return Vec::new();
    }
    let after_head = around
        .after
        .split_inclusive('\n')
        .next()
        .unwrap_or_default();
    // Spaces and tabs right after the cursor are compared apart: a plugin may leave a line's
    // indentation out (llama.vscode sends no prompt on a blank line) or a template add one.
    let blank = |text: &str| text.len() - text.trim_start_matches([' ', '\t']).len();
    let sent_blank = blank(after_head);
    let mut places = Vec::new();
    for (id, file) in index.files.iter().enumerate() {
        for (at, _) in file.text.match_indices(anchor) {
            let mut cursor = at + anchor.len();
            let rest = &file.text[cursor..];
            let file_blank = blank(rest);
            let certainty = if rest[file_blank..].starts_with(&after_head[sent_blank..]) {
                // The cursor stood after the indentation the plugin did not send.
                cursor += file_blank.saturating_sub(sent_blank);
                Certainty::Exact
            } else {
                Certainty::BeforeOnly
            };
            places.push(place(index, id, cursor, certainty));
        }
    }
    if places.is_empty() {
        return nearest_places(index, &around.before, around.after);
    }
    places.sort_by(|a, b| a.certainty.cmp(&b.certainty).then(a.file.cmp(&b.file)));
    places
}

/// Lines on each side of the cursor compared when the anchor is not found as sent.
const NEAREST_WINDOW: usize = 12;

/// Where the cursor's line (as sent, up to the cursor) begins a line of a file and most of the
/// lines sent around it are near it: the places with the most such lines, if at least half.
/// Where no file has the cursor's line as sent (the person edited it, or wrote it, and has not
/// saved yet), the line after the last one sent above it stands in for it, the cursor after what
/// the two lines share: a plugin asks on every keystroke, mostly in lines not yet saved.
fn nearest_places(index: &RepoIndex, before: &str, after: &str) -> Vec<Place> {
    let (earlier, cursor_line) = before.rsplit_once('\n').unwrap_or(("", before));
    let meaningful = |line: &&str| !line.trim().is_empty();
    let sent: Vec<&str> = earlier
        .lines()
        .rev()
        .take(NEAREST_WINDOW)
        .chain(after.lines().skip(1).take(NEAREST_WINDOW))
        .filter(meaningful)
        .map(str::trim)
        .collect();
    if sent.is_empty() {
        return Vec::new();
    }
    // How many of the lines sent around the cursor lie near `cursor` in `file`.
    let matched_near = |text: &str, line_start: usize, cursor: usize| {
        let above = text[..line_start].lines().rev().take(NEAREST_WINDOW);
        let below = text[cursor..].lines().skip(1).take(NEAREST_WINDOW);
        let near: Vec<&str> = above
            .chain(below)
            .filter(meaningful)
            .map(str::trim)
            .collect();
        sent.iter().filter(|line| near.contains(line)).count()
    };
    let mut candidates = Vec::new();
    if !cursor_line.trim().is_empty() {
        for (id, file) in index.files.iter().enumerate() {
            for (at, _) in file.text.match_indices(cursor_line) {
                if at == 0 || file.text.as_bytes()[at - 1] == b'\n' {
                    let cursor = at + cursor_line.len();
                    candidates.push((matched_near(&file.text, at, cursor), id, cursor));
                }
            }
        }
    }
    if candidates.is_empty() {
        candidates = edited_line_places(index, earlier, cursor_line, &matched_near);
    }
    let Some(matched) = candidates.iter().map(|(matched, ..)| *matched).max() else {
        return Vec::new();
    };
    if matched * 2 < sent.len() {
        return Vec::new();
    }
    let certainty = Certainty::Nearest {
        matched: u16::try_from(matched).unwrap_or(u16::MAX),
        sent: u16::try_from(sent.len()).unwrap_or(u16::MAX),
    };
    candidates
        .into_iter()
        .filter(|(m, ..)| *m == matched)
        .map(|(_, id, cursor)| place(index, id, cursor, certainty))
        .collect()
}

/// The places of a cursor whose line no file holds as sent: after each whole line that equals
/// the last line sent above the cursor, on the line that follows it, the cursor after what
/// that line shares with the sent one; each with how many lines sent around it lie near.
fn edited_line_places(
    index: &RepoIndex,
    earlier: &str,
    cursor_line: &str,
    matched_near: &dyn Fn(&str, usize, usize) -> usize,
) -> Vec<(usize, FileId, usize)> {
    let Some(above) = earlier.lines().rev().map(str::trim).find(|l| !l.is_empty()) else {
        return Vec::new();
    };
    let mut places = Vec::new();
    for (id, file) in index.files.iter().enumerate() {
        let text = &file.text;
        for (at, _) in text.match_indices(above) {
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let Some(line_end) = text[at..].find('\n').map(|i| at + i) else {
                continue; // the file's last line: no line follows it
            };
            if text[line_start..line_end].trim() != above {
                continue;
            }
            let next = line_end + 1;
            let next_end = text[next..].find('\n').map_or(text.len(), |i| next + i);
            let cursor = next + common_prefix(&text[next..next_end], cursor_line);
            places.push((matched_near(text, next, cursor), id, cursor));
        }
    }
    places
}

/// The last [`ANCHOR_LINES`] lines of `before`, the cursor's line up to the cursor included.
pub(super) fn anchor(before: &str) -> &str {
    let mut start = before.len();
    for _ in 0..ANCHOR_LINES {
        // The break that ends the line before, not the one the text may end with (cut at a
        // character, never a byte: the text ends as the plugin sent it, `é` or `日` included).
        let earlier = &before[..start];
        let earlier = earlier.strip_suffix('\n').unwrap_or(earlier);
        match earlier.rfind('\n') {
            Some(i) => start = i + 1,
            None => return before,
        }
    }
    &before[start..]
}

fn place(index: &RepoIndex, file: FileId, offset: usize, certainty: Certainty) -> Place {
    let source = &index.files[file];
    let line = source.line_of(offset.min(source.text.len().saturating_sub(1)));
    let column = source.text[source.line_start(line)..offset].chars().count();
    Place {
        file: source.path.clone(),
        line: line + 1,
        column: column + 1,
        certainty,
    }
}

/// The plugin's prompt as keyhole's backends take it, each byte with its origin where a
/// repository file holds it (the plugin's framing and template have none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentPrompt {
    /// What the model continues: an infill request's extra chunks (the server puts them
    /// first), prefix and middle; another request's prompt as sent, template and all.
    pub prompt: SourcedText,
    /// The text after the cursor, where the request sent it apart.
    pub suffix: Option<SourcedText>,
}

/// The prompt `sent` asks a model to continue, with where each piece came from, given the
/// place its hole was (the code before and after it is matched there first); `None` for a chat
/// request, which asks no model to continue code.
pub fn sent_prompt(index: &RepoIndex, sent: &Sent, place: Option<&Place>) -> Option<SentPrompt> {
    if sent.prompt.is_none() && sent.prefix.is_none() {
        return None;
    }
    let lines = RepoLines::new(index);
    let cursor = place.and_then(|p| p.cursor(index));
    let after = |text: &str| lines.sourced(text, cursor, Side::After);
    let prompt = sent.prompt.as_deref().unwrap_or_default();
    if let Some(prefix) = &sent.prefix {
        let mut sourced = SourcedText::default();
        for chunk in &sent.extra {
            sourced.append(lines.sourced(&chunk.text, None, Side::Before));
        }
        sourced.append(lines.sourced(&format!("{prefix}{prompt}"), cursor, Side::Before));
        return Some(SentPrompt {
            prompt: sourced,
            suffix: sent.suffix.as_deref().map(after),
        });
    }
    Some(SentPrompt {
        prompt: lines.sourced_prompt(prompt, cursor, sent.suffix.is_none()),
        suffix: sent.suffix.as_deref().map(after),
    })
}

/// Which side of the cursor a text was sent from: the code nearest the cursor is its end
/// before it and its start after it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Before,
    After,
}

/// Comment marks plugins put before lines of other files (Continue's snippets).
const COMMENT_MARKS: [&str; 4] = ["// ", "# ", "-- ", "; "];

/// A line shorter than this (trimmed) says too little to start a match on (`}`, `else:`).
const MIN_LINE_CHARS: usize = 4;

/// Every line of the repository by its text, to find where sent lines came from.
struct RepoLines<'i> {
    index: &'i RepoIndex,
    /// A line's text (no line break) to where it starts: (file, byte offset).
    lines: HashMap<&'i str, Vec<(FileId, usize)>>,
}

impl<'i> RepoLines<'i> {
    fn new(index: &'i RepoIndex) -> RepoLines<'i> {
        let mut lines: HashMap<&str, Vec<(FileId, usize)>> = HashMap::new();
        for (id, file) in index.files.iter().enumerate() {
            let mut start = 0;
            for line in file.text.split_inclusive('\n') {
                let content = line.trim_end_matches(['\n', '\r']);
                if content.trim().chars().count() >= MIN_LINE_CHARS {
                    lines.entry(content).or_default().push((id, start));
                }
                start += line.len();
            }
        }
        RepoLines { index, lines }
    }

    /// `text` with origins: the code next to the cursor matched at the cursor (byte for byte),
    /// the rest line by line wherever the repository holds those lines.
    fn sourced(&self, text: &str, cursor: Option<(FileId, usize)>, side: Side) -> SourcedText {
        let mut sourced = SourcedText::default();
        let Some((file, at)) = cursor else {
            return self.by_lines(text);
        };
        let file_text = &self.index.files[file].text;
        match side {
            Side::Before => {
                let n = common_suffix(text, &file_text[..at]);
                sourced.append(self.by_lines(&text[..text.len() - n]));
                sourced.push_span(self.index, file, Span::new(at - n, at));
            }
            Side::After => {
                // A template may set the suffix apart by a space (Twinny's `<SUF> `).
                let space = usize::from(text.starts_with(' ') && !file_text[at..].starts_with(' '));
                let sent = &text[space..];
                let rest = &file_text[at..];
                let mut n = common_prefix(sent, rest);
                // What the user wrote at the cursor since pushed the text after it on: it
                // starts where the sent text's head is found again, a little further.
                let mut wrote = 0;
                let head = &sent[..sent.floor_char_boundary(SUFFIX_HEAD)];
                let marks = head.chars().filter(|c| !c.is_whitespace()).count();
                if n == 0 && marks >= SUFFIX_HEAD_MARKS {
                    let near = &rest[..rest.floor_char_boundary(SUFFIX_SEARCH)];
                    if let Some(found) = near.find(head) {
                        wrote = found;
                        n = common_prefix(sent, &rest[found..]);
                    }
                }
                sourced.push_plain(&text[..space]);
                let start = at + wrote;
                sourced.push_span(self.index, file, Span::new(start, start + n));
                sourced.append(self.by_lines(&sent[n..]));
            }
        }
        sourced
    }

    /// A prompt sent whole (not an infill's middle) with origins: where it fills a FIM
    /// template (`templated`: no suffix was sent apart), the two parts matched around the
    /// cursor and the template the plugin's framing; else the text before the cursor.
    fn sourced_prompt(
        &self,
        prompt: &str,
        cursor: Option<(FileId, usize)>,
        templated: bool,
    ) -> SourcedText {
        let Some(fim) = fim_parts(prompt).filter(|_| templated) else {
            return self.sourced(prompt, cursor, Side::Before);
        };
        // Codestral's template puts the suffix first: the parts go in the prompt's order.
        let mut parts = [(fim.before, Side::Before), (fim.after, Side::After)];
        parts.sort_by_key(|(range, _)| range.start);
        let mut sourced = SourcedText::default();
        let mut at = 0;
        for (range, side) in parts {
            sourced.push_plain(&prompt[at..range.start]);
            sourced.append(self.sourced(&prompt[range.clone()], cursor, side));
            at = range.end;
        }
        sourced.push_plain(&prompt[at..]);
        sourced
    }

    /// `text` with origins for the runs of whole lines a repository file holds in the same
    /// order, and for lines a comment mark set before a repository line.
    fn by_lines(&self, text: &str) -> SourcedText {
        let mut sourced = SourcedText::default();
        // The run being matched: its file, where it starts there and where the next line
        // must start.
        let mut run: Option<(FileId, usize, usize)> = None;
        let flush = |sourced: &mut SourcedText, run: &mut Option<(FileId, usize, usize)>| {
            if let Some((file, start, end)) = run.take() {
                sourced.push_span(self.index, file, Span::new(start, end));
            }
        };
        for line in text.split_inclusive('\n') {
            if let Some((file, _, next)) = &mut run
                && self.index.files[*file].text[*next..].starts_with(line)
            {
                *next += line.len();
                continue;
            }
            flush(&mut sourced, &mut run);
            let content = line.trim_end_matches(['\n', '\r']);
            if let Some((file, start)) = self.best_start(text, line) {
                run = Some((file, start, start + line.len()));
                continue;
            }
            let marked = COMMENT_MARKS.iter().find_map(|mark| {
                let code = content.strip_prefix(mark)?;
                let &(file, start) = self.lines.get(code)?.first()?;
                Some((mark.len(), file, start, code.len()))
            });
            match marked {
                Some((mark, file, start, len)) => {
                    sourced.push_plain(&line[..mark]);
                    sourced.push_span(self.index, file, Span::new(start, start + len));
                    sourced.push_plain(&line[mark + len..]);
                }
                None => sourced.push_plain(line),
            }
        }
        flush(&mut sourced, &mut run);
        sourced
    }

    /// Where the run of lines starting with `line` (a line of `text`) best continues: the
    /// repository line equal to it whose following lines match the most of `text`'s.
    fn best_start(&self, text: &str, line: &str) -> Option<(FileId, usize)> {
        let content = line.trim_end_matches(['\n', '\r']);
        let starts = self.lines.get(content)?;
        let offset = line.as_ptr() as usize - text.as_ptr() as usize;
        let following = &text[offset..];
        starts
            .iter()
            .copied()
            .filter(|&(file, start)| self.index.files[file].text[start..].starts_with(line))
            .max_by_key(|&(file, start)| {
                let matched = common_prefix(following, &self.index.files[file].text[start..]);
                // Equal runs: the first file in the index.
                (matched, std::cmp::Reverse(file))
            })
    }
}

/// Bytes of the text sent after the cursor that must be found again where the user wrote on.
const SUFFIX_HEAD: usize = 40;
/// Characters other than spaces the head needs to be worth finding (`}` and `}` will do so
/// close to the cursor; a line break alone will not).
const SUFFIX_HEAD_MARKS: usize = 2;
/// How far after the cursor they are looked for.
const SUFFIX_SEARCH: usize = 4096;

/// Bytes at the end of `a` that end `b` too, at a character boundary.
fn common_suffix(a: &str, b: &str) -> usize {
    let n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut start = a.len() - n;
    while !a.is_char_boundary(start) {
        start += 1;
    }
    a.len() - start
}

/// Bytes at the start of `a` that start `b` too, at a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Where one piece of the sent text came from: the repository lines it holds, and how much of
/// it no file holds (the plugin's own framing, or text the repository does not have).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// What the piece is: `prefix`, `suffix`, `extra 1 (src/a.py)`, `message 2 (user)`.
    pub piece: String,
    /// `FILE:FIRST-LAST`, 1-based lines, in the piece's order; empty when no file holds any
    /// of it.
    pub from: Vec<String>,
    pub chars: usize,
    /// Characters of the piece no repository file holds: the plugin's framing.
    pub framing_chars: usize,
}

/// Where each piece of what was sent came from, the code around the cursor matched at `place`
/// first.
pub fn provenance(index: &RepoIndex, sent: &Sent, place: Option<&Place>) -> Vec<Provenance> {
    let lines = RepoLines::new(index);
    let cursor = place.and_then(|p| p.cursor(index));
    let mut pieces: Vec<(String, &str, Option<Side>)> = Vec::new();
    for (name, text, side) in [
        ("prefix", &sent.prefix, Side::Before),
        ("prompt", &sent.prompt, Side::Before),
        ("suffix", &sent.suffix, Side::After),
    ] {
        if let Some(text) = text {
            pieces.push((name.to_string(), text, Some(side)));
        }
    }
    for (i, chunk) in sent.extra.iter().enumerate() {
        let name = format!("extra {} ({})", i + 1, chunk.filename);
        pieces.push((name, &chunk.text, None));
    }
    for (i, message) in sent.messages.iter().enumerate() {
        let name = format!("message {} ({})", i + 1, message.role);
        pieces.push((name, &message.content, None));
    }
    pieces
        .into_iter()
        .map(|(piece, text, side)| {
            let sourced = match side {
                // Only the prefix's end (an infill request's middle follows it) and the
                // suffix's start touch the cursor.
                Some(Side::Before) if piece == "prefix" && sent.prompt.is_some() => {
                    lines.sourced(text, None, Side::Before)
                }
                Some(Side::Before) if piece == "prompt" && sent.prefix.is_none() => {
                    lines.sourced_prompt(text, cursor, sent.suffix.is_none())
                }
                Some(side) => lines.sourced(text, cursor, side),
                None => lines.sourced(text, None, Side::Before),
            };
            Provenance {
                from: origin_lines(index, &sourced),
                chars: text.chars().count(),
                framing_chars: sourced
                    .pieces
                    .iter()
                    .filter(|p| p.origin.is_none())
                    .map(|p| sourced.text[p.range.clone()].chars().count())
                    .sum(),
                piece,
            }
        })
        .collect()
}

/// `FILE:FIRST-LAST` for each run of `text` a file holds, neighbouring runs of one file joined.
fn origin_lines(index: &RepoIndex, text: &SourcedText) -> Vec<String> {
    let mut runs: Vec<(FileId, usize, usize)> = Vec::new();
    for origin in text.pieces.iter().filter_map(|p| p.origin) {
        let file = &index.files[origin.file];
        let (start, end) = (origin.span.start as usize, origin.span.end as usize);
        let first = file.line_of(start) + 1;
        let last = file.line_of(end.saturating_sub(1).max(start)) + 1;
        match runs.last_mut() {
            Some((f, _, hi)) if *f == origin.file && first <= *hi + 1 => *hi = (*hi).max(last),
            _ => runs.push((origin.file, first, last)),
        }
    }
    runs.into_iter()
        .map(|(file, first, last)| format!("{}:{first}-{last}", index.files[file].path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy;
    use proptest::prop_oneof;

    fn index() -> RepoIndex {
        RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![
                (
                    "src/Cart.java".into(),
                    "class Cart {\n    int total() {\n        return sum;\n    }\n}\n".into(),
                ),
                (
                    "src/Price.java".into(),
                    "class Price {\n    long cents;\n}\n".into(),
                ),
            ],
        )
    }

    #[test]
    fn a_hole_is_still_found_after_edits_just_above_it_and_says_how_sure() {
        let file = "class Cart {\n    List<Item> items;\n    int tax;\n\n    int total() {\n        int sum = 0;\n        for (Item i : items) sum += i.cents;\n        return sum;\n    }\n}\n";
        let sent = Sent {
            prefix: Some(file[..file.find("return ").unwrap() + 7].into()),
            prompt: Some(String::new()),
            suffix: Some(file[file.find("sum;\n    }").unwrap()..].into()),
            ..Sent::default()
        };
        // The loop above the hole was rewritten, and a field added: the anchor is gone.
        let edited = file
            .replace(
                "for (Item i : items) sum += i.cents;",
                "sum = items.stream().mapToInt(Item::cents).sum();",
            )
            .replace("    int tax;\n", "    int tax;\n    int discount;\n");
        let index = RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![
                ("src/Cart.java".into(), edited.clone()),
                (
                    "src/Other.java".into(),
                    "class Other {\n        return sum;\n}\n".into(),
                ),
            ],
        );
        let places = hole_places(&index, &sent);
        assert_eq!(places.len(), 1, "{places:?}");
        assert_eq!(places[0].file, "src/Cart.java");
        assert_eq!((places[0].line, places[0].column), (9, 16));
        let Certainty::Nearest {
            matched,
            sent: around,
        } = places[0].certainty
        else {
            panic!("{:?}", places[0].certainty);
        };
        assert!(
            matched < around && matched * 2 >= around,
            "{matched} of {around}"
        );
        assert!(
            places[0]
                .certainty
                .describe()
                .contains("changed near the cursor")
        );
        // A file that shares only the cursor's line is no place for it.
        let elsewhere = RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![(
                "src/Other.java".into(),
                "class Other {\n        return sum;\n}\n".into(),
            )],
        );
        assert!(hole_places(&elsewhere, &sent).is_empty());
    }

    #[test]
    fn a_hole_in_a_line_not_yet_saved_is_found_on_the_line_the_file_has_there() {
        // On disk: the method as saved. In the editor: its return line being rewritten, and a
        // new line typed below it, neither saved (a plugin asks on every keystroke).
        let file = "class Cart {\n    int total() {\n        int sum = 0;\n        return sum;\n    }\n}\n";
        let index = RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![("src/Cart.java".into(), file.into())],
        );
        let editing = Sent {
            prefix: Some(
                "class Cart {\n    int total() {\n        int sum = 0;\n        return sum + tax"
                    .into(),
            ),
            prompt: Some(String::new()),
            suffix: Some("\n    }\n}\n".into()),
            ..Sent::default()
        };
        let places = hole_places(&index, &editing);
        assert_eq!(places.len(), 1, "{places:?}");
        // Line 4, after `        return sum` (what the saved line shares with the edited one).
        assert_eq!((places[0].line, places[0].column), (4, 19));
        assert!(matches!(places[0].certainty, Certainty::Nearest { .. }));
        let new_line = Sent {
            prefix: Some("class Cart {\n    int total() {\n        int sum = 0;\n        return sum;\n        ".into()),
            prompt: Some(String::new()),
            suffix: Some("\n    }\n}\n".into()),
            ..Sent::default()
        };
        let places = hole_places(&index, &new_line);
        assert_eq!(places.len(), 1, "{places:?}");
        // Line 5 (`    }` on disk), after the indentation the two share.
        assert_eq!((places[0].line, places[0].column), (5, 5));
        // Lines around it that the file does not hold: no place.
        let elsewhere = Sent {
            prefix: Some(
                "class Basket {\n    void add() {\n        items.add(x);\n        return sum + tax"
                    .into(),
            ),
            prompt: Some(String::new()),
            suffix: Some("\n    }\n}\n".into()),
            ..Sent::default()
        };
        assert!(hole_places(&index, &elsewhere).is_empty());
    }

    #[test]
    fn an_infill_request_is_found_where_its_prefix_and_suffix_meet() {
        let sent = Sent {
            prefix: Some("class Cart {\n    int total() {\n        return ".into()),
            prompt: Some(String::new()),
            suffix: Some("sum;\n    }\n}\n".into()),
            ..Sent::default()
        };
        let places = hole_places(&index(), &sent);
        assert_eq!(places.len(), 1);
        assert_eq!(places[0].position(), "src/Cart.java:3:16");
        assert_eq!(places[0].certainty, Certainty::Exact);
        // The user wrote on since: the line now differs after the cursor.
        let later = Sent {
            suffix: Some("\n    }\n}\n".into()),
            ..sent.clone()
        };
        let place = &hole_places(&index(), &later)[0];
        assert_eq!(place.certainty, Certainty::BeforeOnly);
        // The suffix as sent is found again after what the user wrote (`sum;`).
        let suffix = sent_prompt(&index(), &later, Some(place))
            .unwrap()
            .suffix
            .unwrap();
        assert!(framing(&suffix).is_empty(), "{:?}", framing(&suffix));
        let origin = suffix.pieces[0].origin.unwrap();
        assert_eq!(
            origin.span.start as usize,
            index().files[0].text.find("sum;").unwrap() + 4
        );
    }

    #[test]
    fn provenance_names_the_lines_each_piece_came_from_and_marks_framing() {
        let sent = Sent {
            prompt: Some("<fim_prefix>".into()),
            extra: vec![super::super::ExtraChunk {
                filename: "src/Price.java".into(),
                text: "class Price {\n    long cents;\n".into(),
            }],
            ..Sent::default()
        };
        let found = provenance(&index(), &sent, None);
        assert_eq!(found[0].piece, "prompt");
        assert!(found[0].from.is_empty(), "the plugin's own text");
        assert_eq!(found[0].framing_chars, "<fim_prefix>".len());
        assert_eq!(found[1].from, ["src/Price.java:1-2"]);
        assert_eq!(found[1].framing_chars, 0);
    }

    /// The text of `sourced` no file holds, piece by piece.
    fn framing(sourced: &SourcedText) -> Vec<&str> {
        let pieces = sourced.pieces.iter().filter(|p| p.origin.is_none());
        pieces.map(|p| &sourced.text[p.range.clone()]).collect()
    }

    #[test]
    fn a_prompt_in_a_fim_template_is_found_and_its_template_marked_as_framing() {
        let index = index();
        // Continue's Qwen template, a snippet of another file commented out before the code.
        let continue_qwen = "<|fim_prefix|>// Path: Price.java\n// class Price {\n//     long cents;\n\
            class Cart {\n    int total() {\n        return <|fim_suffix|>sum;\n    }\n}\n<|fim_middle|>";
        // Twinny's Code Llama template (a space sets its markers apart), and Codestral's
        // suffix-first one.
        let twinny = "<PRE> \n// Language: Java (java) \nclass Cart {\n    int total() {\n        return  <SUF> sum;\n    }\n <MID>";
        let codestral =
            "[SUFFIX]sum;\n    }\n}\n[PREFIX]class Cart {\n    int total() {\n        return ";
        for prompt in [continue_qwen, twinny, codestral] {
            let sent = Sent {
                prompt: Some(prompt.into()),
                ..Sent::default()
            };
            let places = hole_places(&index, &sent);
            assert_eq!(places.len(), 1, "{prompt}");
            assert_eq!(places[0].position(), "src/Cart.java:3:16", "{prompt}");
            assert_eq!(places[0].certainty, Certainty::Exact, "{prompt}");
            let sent_prompt = sent_prompt(&index, &sent, Some(&places[0])).unwrap();
            assert_eq!(
                sent_prompt.prompt.text, prompt,
                "sent as the plugin sent it"
            );
            assert_eq!(sent_prompt.suffix, None);
            let framing = framing(&sent_prompt.prompt);
            assert!(
                framing
                    .iter()
                    .all(|f| !f.contains("return") && !f.contains("sum;")),
                "the code around the cursor is the file's: {framing:?}"
            );
            let marker = ["<|fim_suffix|>", " <SUF>", "[PREFIX]"];
            assert!(
                marker.iter().any(|m| framing.iter().any(|f| f.contains(m))),
                "{framing:?}"
            );
        }
        // Continue's commented snippet: the code after the comment mark is the other file's.
        let sent = Sent {
            prompt: Some(continue_qwen.into()),
            ..Sent::default()
        };
        let sourced = sent_prompt(&index, &sent, None).unwrap().prompt;
        let files: Vec<&str> = sourced
            .files()
            .into_iter()
            .map(|f| index.files[f].path.as_str())
            .collect();
        assert!(files.contains(&"src/Price.java"), "{files:?}");
    }

    #[test]
    fn a_blank_line_whose_indentation_was_not_sent_puts_the_cursor_after_it() {
        // llama.vscode sends no middle on a line of spaces: the prefix ends at the line start.
        let index = RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![(
                "a.py".into(),
                "def total(items):\n    s = 0\n    \n    return s\n".into(),
            )],
        );
        let sent = Sent {
            prefix: Some("def total(items):\n    s = 0\n".into()),
            prompt: Some(String::new()),
            suffix: Some("\n    return s\n".into()),
            ..Sent::default()
        };
        let places = hole_places(&index, &sent);
        assert_eq!(places[0].position(), "a.py:3:5");
        assert_eq!(places[0].certainty, Certainty::Exact);
        let sent_prompt = sent_prompt(&index, &sent, Some(&places[0])).unwrap();
        assert!(framing(&sent_prompt.prompt).is_empty());
        assert_eq!(sent_prompt.suffix.unwrap().text, "\n    return s\n");
    }

    #[test]
    fn text_before_the_cursor_may_end_in_any_character() {
        // A comment ending in `é` and a CJK identifier: the anchor is cut at characters.
        let index = RepoIndex::from_sources(
            std::path::Path::new("/repo"),
            vec![(
                "a.py".into(),
                "def f():\n    # café\n    total = 1\n    名前 = total\n".into(),
            )],
        );
        for (before, after, column) in [
            ("def f():\n    # café", "\n", 11),
            ("    total = 1\n    名前", " = total\n", 7),
        ] {
            let sent = Sent {
                prompt: Some(before.into()),
                suffix: Some(after.into()),
                ..Sent::default()
            };
            let places = hole_places(&index, &sent);
            assert_eq!(places.len(), 1, "{before}");
            assert_eq!(places[0].column, column, "{before}");
            assert!(sent_prompt(&index, &sent, Some(&places[0])).is_some());
        }
    }

    /// Text around a cursor: any Unicode, or a few characters of several widths that make
    /// repeated and partial matches likely.
    fn around() -> impl Strategy<Value = String> {
        prop_oneof!["(\\PC|\n|\t|\r){0,48}", "[a é日😀#\n]{0,24}",]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Whatever text a plugin sends before and after the cursor, in whichever shape,
        /// locating never panics, and every place it finds has that text right before it in
        /// the file (the indentation the plugin may leave out aside).
        #[test]
        fn any_text_around_the_cursor_is_located_only_where_the_file_holds_it(
            head in around(), before in around(), after in around(), tail in around(),
        ) {
            let text = format!("{head}{before}{after}{tail}");
            let index = RepoIndex::from_sources(
                std::path::Path::new("/repo"),
                vec![("src/a.py".into(), text)],
            );
            let shapes = [
                Sent {
                    prefix: Some(before.clone()),
                    prompt: Some(String::new()),
                    suffix: Some(after.clone()),
                    ..Sent::default()
                },
                Sent {
                    prompt: Some(before.clone()),
                    suffix: Some(after.clone()),
                    ..Sent::default()
                },
                Sent {
                    prompt: Some(format!("<fim_prefix>{before}<fim_suffix>{after}<fim_middle>")),
                    ..Sent::default()
                },
            ];
            let blanks: &[char] = &[' ', '\t'];
            for sent in shapes {
                let places = hole_places(&index, &sent);
                let anchor = anchor(&before);
                if !anchor.trim().is_empty() && !before.contains("<fim_") && !after.contains("<fim_") {
                    proptest::prop_assert!(!places.is_empty(), "the file holds {before:?}");
                }
                for place in &places {
                    let (file, offset) = place.cursor(&index).expect("a place in the index");
                    let held = &index.files[file].text[..offset];
                    proptest::prop_assert!(
                        held.trim_end_matches(blanks).ends_with(anchor.trim_end_matches(blanks)),
                        "{place:?}: {held:?} does not end with {anchor:?}"
                    );
                }
                sent_prompt(&index, &sent, places.first());
                provenance(&index, &sent, places.first());
            }
        }
    }
}
