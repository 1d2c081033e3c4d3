//! RLPG's file lists and text readings as its published code builds them, for `--fidelity
//! code` (the code profile's table, [`super::profile::code::RULES`], names them): which files
//! each multi-file prompt source offers and in what order (the paper's Table 6 in the letter
//! of `parse_tree.py` and `context.py`), and how it slices, cuts and decodes items.
//!
//! - Imports: import declarations whose dotted path, rooted where the first part of the path
//!   last occurs in the current file's path, names a repository file; kept only when the
//!   imported name occurs again in the file (as an identifier or type identifier).
//! - An import's distance from the hole: the line distance of the *last* of those further
//!   occurrences (identifiers first, then type identifiers), not the nearest.
//! - Siblings in `os.listdir` order; similar names (a camel-case part in common, or the same
//!   file name) and child classes in `os.walk` order (see [`crate::repo::listing`]).
//! - Siblings, similar names and child classes: those importing the nearest import that any of
//!   them imports, by the number of imports they share with the current file (by file name),
//!   most first; when none does, all of them in their order.
//! - Import of X: the files X import, by how many X files import each, first seen first.
//!
//! - RLPG's `get_relevant_files` caches its answers across the holes of a file, so in its runs
//!   a hole's siblings, similar names and children can be those answered for an earlier hole;
//!   the earlier holes are every hole line above it, so keyhole replays the cache over them.

use std::collections::HashMap;

use super::HoleRequest;
use super::SourcedText;
use crate::candidate::PromptSource;
use crate::hole::takes_hole;
use crate::lang::{MethodDecl, Span, TypeKind};
use crate::repo::listing;
use crate::repo::{FileId, ParentLink, RepoIndex, SourceFile};
use crate::rlpg_text;
use crate::token::{Keep, Tokenizer};

/// The files `source` offers for the request's hole, best first, as RLPG's code ranks them.
pub fn rank_files(source: PromptSource, req: &HoleRequest) -> Vec<FileId> {
    let index = req.index;
    let id = req.hole.file;
    match source {
        PromptSource::Import => sorted_imports(req).into_iter().map(|(f, _)| f).collect(),
        PromptSource::Sibling => relevant(req, siblings(index, id)),
        PromptSource::SimilarName => relevant(req, similar_names(index, id)),
        PromptSource::ChildClass => relevant(req, children(index, id)),
        PromptSource::ImportOfSibling => imports_by_frequency(index, &siblings(index, id)),
        PromptSource::ImportOfSimilarName => imports_by_frequency(index, &similar_names(index, id)),
        PromptSource::ImportOfParentClass => {
            let parents: Vec<FileId> = parents(index, id).iter().map(|l| l.file).collect();
            imports_by_frequency(index, &parents)
        }
        PromptSource::ImportOfChildClass => imports_by_frequency(index, &children(index, id)),
        PromptSource::Current | PromptSource::ParentClass => unreachable!("single-file sources"),
    }
}

/// RLPG's imports of `file`: each imported file with the further occurrences of its name.
/// In a language RLPG's code has no rule for, keyhole's own imports stand in, each with the
/// lines it is used on.
fn imports(index: &RepoIndex, file: FileId) -> Vec<(FileId, Vec<usize>)> {
    let source = &index.files[file];
    if !source.language.rlpg_code_covers() {
        return own_imports(index, file);
    }
    let mut found: Vec<(FileId, Vec<usize>)> = Vec::new();
    for import in &source.facts.imports {
        let Some(path) = source.language.rlpg_code_import_path(&source.path, import) else {
            continue;
        };
        let Some(target) = index.file_id(&path) else {
            continue;
        };
        let name = import.path.rsplit('.').next().unwrap_or(&import.path);
        let named = |spans: &[Span]| -> Vec<Span> {
            spans
                .iter()
                .copied()
                .filter(|s| &source.text[s.range()] == name)
                .collect()
        };
        let mut uses = named(&source.facts.identifiers);
        uses.extend(named(&source.facts.type_identifiers));
        // The first occurrence is the import declaration's own.
        if uses.len() > 1 && !found.iter().any(|(f, _)| *f == target) {
            uses.remove(0);
            let lines = uses
                .iter()
                .map(|s| source.line_of(s.start as usize))
                .collect();
            found.push((target, lines));
        }
    }
    found
}

/// keyhole's imports of `file` used somewhere in it, with the lines they are used on.
fn own_imports(index: &RepoIndex, file: FileId) -> Vec<(FileId, Vec<usize>)> {
    let used = index.graph.imports[file]
        .iter()
        .filter(|i| !i.usage_lines.is_empty());
    used.map(|i| (i.file, i.usage_lines.iter().map(|&l| l as usize).collect()))
        .collect()
}

/// The current file's imports by distance from the hole (RLPG's quirk: the distance of the
/// last further occurrence), ties in declaration order.
fn sorted_imports(req: &HoleRequest) -> Vec<(FileId, usize)> {
    imports_from_line(&last_uses(req.index, req.hole.file), req.hole.line)
}

/// Each import of `file` and the line of its last further occurrence.
fn last_uses(index: &RepoIndex, file: FileId) -> Vec<(FileId, usize)> {
    imports(index, file)
        .into_iter()
        .map(|(target, lines)| (target, lines[lines.len() - 1]))
        .collect()
}

/// The imports of `last_uses` by distance from `line`, ties in declaration order.
fn imports_from_line(last_uses: &[(FileId, usize)], line: usize) -> Vec<(FileId, usize)> {
    let mut distances: Vec<(FileId, usize)> = last_uses
        .iter()
        .map(|&(target, last)| (target, last.abs_diff(line)))
        .collect();
    distances.sort_by_key(|&(_, d)| d);
    distances
}

/// The stems of the files `file` imports (RLPG compares imports by file name).
fn import_names(index: &RepoIndex, file: FileId) -> Vec<&str> {
    imports(index, file)
        .into_iter()
        .map(|(f, _)| index.files[f].stem())
        .collect()
}

/// RLPG's `get_relevant_files`: the `candidates` importing the nearest import that any of
/// them imports, by overlap, else all of them. RLPG's runs keep one context object per file
/// and source, and its answers in a cache across the file's holes, keyed by an import that
/// is not always the one answered for (the loop's next import); a hole whose imports meet a
/// cached key first gets that answer. The holes before a hole in those runs are every line
/// RLPG takes a hole on above it, so the cache is replayed over them: the answer depends on
/// the hole's file and line alone.
fn relevant(req: &HoleRequest, candidates: Vec<FileId>) -> Vec<FileId> {
    let index = req.index;
    let id = req.hole.file;
    let mine = import_names(index, id);
    let candidate_imports: Vec<(FileId, usize, Vec<FileId>)> = candidates
        .iter()
        .map(|&f| {
            let mut theirs = import_names(index, f);
            theirs.sort_unstable();
            theirs.dedup();
            let overlap = theirs.iter().filter(|n| mine.contains(n)).count();
            let imported = imports(index, f).into_iter().map(|(t, _)| t).collect();
            (f, overlap, imported)
        })
        .collect();
    // Per import of the file: the candidates importing it, by overlap, most first.
    let sharing = |import: FileId| -> Vec<FileId> {
        let mut sharing: Vec<(FileId, usize)> = Vec::new();
        for (f, n, imported) in &candidate_imports {
            // A dict in RLPG's code: a file listed twice (two child classes) counts once.
            let shares = *n > 0 && imported.contains(&import);
            if shares && !sharing.iter().any(|(g, _)| g == f) {
                sharing.push((*f, *n));
            }
        }
        sharing.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        sharing.into_iter().map(|(f, _)| f).collect()
    };
    let last_uses = last_uses(index, id);
    // Worked out once: the replay below asks for them at every hole line above the hole.
    let shared: HashMap<FileId, Vec<FileId>> = last_uses
        .iter()
        .map(|&(import, _)| (import, sharing(import)))
        .collect();
    let file = &index.files[id];
    let mut cache = RelevantCache::default();
    let earlier = (0..req.hole.line).filter(|&l| takes_hole(file.language, file.line_text(l)));
    for line in earlier {
        cache.answer(&imports_from_line(&last_uses, line), &shared);
    }
    let order = imports_from_line(&last_uses, req.hole.line);
    cache.answer(&order, &shared).unwrap_or(candidates)
}

/// The per-file cache of RLPG's `get_relevant_files`: answers by the import they were stored
/// under.
#[derive(Default)]
struct RelevantCache {
    answers: HashMap<FileId, Vec<FileId>>,
}

impl RelevantCache {
    /// One call of `get_relevant_files` for a hole whose imports by distance are `order`, as
    /// RLPG's loop runs it: a cached import answers at once; otherwise the first import the
    /// candidates share (`shared`: the candidates importing each import) answers (none:
    /// `None`, all candidates, not cached), and is stored under the import the loop stood on
    /// when it stopped: the next one, where there is one.
    fn answer(
        &mut self,
        order: &[(FileId, usize)],
        shared: &HashMap<FileId, Vec<FileId>>,
    ) -> Option<Vec<FileId>> {
        let mut found: Option<(FileId, Vec<FileId>)> = None;
        for &(import, _) in order {
            if let Some(answer) = self.answers.get(&import) {
                return Some(answer.clone());
            }
            if let Some((_, answer)) = found {
                found = Some((import, answer));
                break;
            }
            let answer = &shared[&import];
            if !answer.is_empty() {
                found = Some((import, answer.clone()));
            }
        }
        let (key, answer) = found?;
        self.answers.insert(key, answer.clone());
        Some(answer)
    }
}

/// RLPG's `get_relevant_import_of_att_files`: what `of` import, by how many import each.
fn imports_by_frequency(index: &RepoIndex, of: &[FileId]) -> Vec<FileId> {
    let mut counts: Vec<(FileId, usize)> = Vec::new();
    for &file in of {
        for (import, _) in imports(index, file) {
            match counts.iter_mut().find(|(f, _)| *f == import) {
                Some((_, n)) => *n += 1,
                None => counts.push((import, 1)),
            }
        }
    }
    counts.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    counts.into_iter().map(|(f, _)| f).collect()
}

/// The other files of the file's language in its directory, in `os.listdir` order (those keyhole indexed).
fn siblings(index: &RepoIndex, id: FileId) -> Vec<FileId> {
    let file = &index.files[id];
    let dir = file.dir();
    let name = file.path.rsplit('/').next().unwrap_or(&file.path);
    listing::listdir(&index.root.join(dir))
        .into_iter()
        .filter_map(|entry| {
            let entry = crate::repo::name_text(&entry).into_owned();
            let same_language = file.language.handles(std::path::Path::new(&entry));
            if !same_language || entry == name {
                return None;
            }
            let path = if dir.is_empty() {
                entry
            } else {
                format!("{dir}/{entry}")
            };
            index.file_id(&path)
        })
        .collect()
}

/// `files` in `os.walk` order.
fn walk_sorted(index: &RepoIndex, mut files: Vec<FileId>) -> Vec<FileId> {
    let order = listing::walk_order(&index.root);
    files.sort_by_key(|&f| {
        order
            .get(&index.files[f].path)
            .copied()
            .unwrap_or(usize::MAX)
    });
    files
}

/// Files RLPG's `match_similar_filenames` pairs with the file, in `os.walk` order.
fn similar_names(index: &RepoIndex, id: FileId) -> Vec<FileId> {
    let name = index.files[id].path.rsplit('/').next().unwrap_or_default();
    let similar = (0..index.files.len())
        .filter(|&f| f != id && index.files[f].same_language(&index.files[id]))
        .filter(|&f| {
            let other = index.files[f].path.rsplit('/').next().unwrap_or_default();
            similar_file_names(other, name)
        })
        .collect();
    walk_sorted(index, similar)
}

/// The files with a class whose parent (as [`parents`] finds it) is in `id`, one entry per
/// such class, in `os.walk` order.
fn children(index: &RepoIndex, id: FileId) -> Vec<FileId> {
    let children = (0..index.files.len())
        .flat_map(|f| {
            let links = parents(index, f).iter().filter(|l| l.file == id).count();
            std::iter::repeat_n(f, links)
        })
        .collect();
    walk_sorted(index, children)
}

/// The parent links of `file` RLPG's code finds: its query matches a superclass written as a
/// bare type identifier (so `extends Base<T>` and `extends a.Base` give no parent), and the
/// parent's file is the *last* other file, in `os.walk` order, declaring a class of that name
/// (`get_parent_class_filename` breaks only its inner loop), whatever the imports say.
pub fn parents(index: &RepoIndex, file: FileId) -> Vec<ParentLink> {
    let source = &index.files[file];
    if !source.language.rlpg_code_covers() {
        return index.graph.parents[file].clone();
    }
    let walk = listing::walk_order(&index.root);
    let rank = |f: FileId| {
        walk.get(&index.files[f].path)
            .copied()
            .unwrap_or(usize::MAX)
    };
    source
        .facts
        .types
        .iter()
        .filter(|t| t.kind == TypeKind::Class)
        .filter(|t| bare_superclass(&source.text[t.name_span.end as usize..]))
        .filter_map(|t| {
            let name = t.superclass.as_deref()?;
            let parent = (0..index.files.len())
                .filter(|&f| f != file && index.files[f].same_language(source))
                .filter(|&f| {
                    index.files[f]
                        .facts
                        .types
                        .iter()
                        .any(|c| c.kind == TypeKind::Class && c.name == name)
                })
                .max_by_key(|&f| rank(f))?;
            Some(ParentLink {
                class_name_span: t.name_span,
                parent_name: name.to_string(),
                file: parent,
            })
        })
        .collect()
}

/// Whether the class declaration continuing with `rest` (after its name) extends a bare type
/// identifier.
fn bare_superclass(rest: &str) -> bool {
    let mut rest = rest.trim_start();
    // The class's own type parameters, which may say `extends` too.
    if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            depth += match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            };
            (depth == 0).then_some(i + 1)
        });
        rest = end.map_or("", |e| &rest[e..]);
    }
    let Some(after) = rest.trim_start().strip_prefix("extends") else {
        return false;
    };
    let name_end = after
        .trim_start()
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(after.trim_start().len());
    let next = after.trim_start()[name_end..].trim_start();
    !(next.starts_with('<') || next.starts_with('.'))
}

/// The text RLPG's `get_string` takes for a tree-sitter span: tree-sitter's columns are bytes,
/// but it slices each line (with its line break) by characters, so on a line with multi-byte
/// characters the slice ends, or starts, that many characters later (up to the line's end).
pub fn rlpg_span(file: &SourceFile, span: Span) -> Span {
    let at = |offset: usize| {
        let line = file.line_of(offset);
        let start = file.line_start(line);
        let text = &file.text[start..file.line_start(line + 1)];
        start + crate::text::byte_of_char(text, offset - start)
    };
    let start = at(span.start as usize);
    Span::new(start, at(span.end as usize).max(start))
}

/// An item's text as RLPG's code takes it: [`rlpg_span`], stripped of surrounding whitespace.
pub fn attribute_span(file: &SourceFile, span: Span) -> Span {
    let span = rlpg_span(file, span);
    let text = &file.text[span.range()];
    let start = span.start as usize + (text.len() - text.trim_start().len());
    Span::new(
        start,
        start.max(span.start as usize + text.trim_end().len()),
    )
}

/// A method's text in a method-bodies context as RLPG's code takes it: from the start of the
/// line where the body opens to its end when that is the line of the method's name, else the
/// name's line alone (its `method_body[0][0] == method_name[0][0]` match).
pub fn method_lines(source: &SourceFile, method: &MethodDecl) -> Span {
    let name_line = source.line_of(method.name.start as usize);
    let after_signature =
        &source.text[method.signature.end as usize..method.with_body.end as usize];
    let body_line = after_signature
        .find('{')
        .map(|i| source.line_of(method.signature.end as usize + i));
    let line_start = source.line_start(name_line);
    if body_line == Some(name_line) {
        let end = rlpg_span(source, method.with_body).end as usize;
        Span::new(line_start, end)
    } else {
        Span::new(line_start, source.line_start(name_line + 1))
    }
}

/// `text` as RLPG's code reads it (Python's universal newlines: CRLF as LF), cut to
/// `max_tokens` from the kept end, then cleaned up as transformers' decode cleaned it (see
/// `rlpg_text::decode_clean_up`); the tokens counted are those before the clean-up, as RLPG counts them:
/// `len(truncated_codex_tokens)`, all `max_tokens` of them when the text was cut (a cut piece
/// can count fewer once tokenized again). Both only delete characters, so the text keeps its
/// provenance.
pub fn cut_and_decode(
    text: &SourcedText,
    tokenizer: &dyn Tokenizer,
    max_tokens: usize,
    keep: Keep,
) -> (SourcedText, usize) {
    let text = text.crlf_as_lf();
    let (cut, tokens) = text.truncate(tokenizer, max_tokens, keep);
    let tokens = if cut.text.len() < text.text.len() {
        max_tokens
    } else {
        tokens
    };
    (rlpg_text::decode_clean_up(cut), tokens)
}

/// RLPG's `match_similar_filenames(other, current)`: the same file name, or a non-empty
/// camel-case part of `other`'s (before the first dot) among `current`'s.
pub fn similar_file_names(other: &str, current: &str) -> bool {
    if other == current {
        return true;
    }
    let stem = |name: &str| name.split('.').next().unwrap_or_default().to_string();
    let theirs = camel_case_split(&stem(current));
    camel_case_split(&stem(other))
        .iter()
        .any(|p| !p.is_empty() && theirs.contains(p))
}

/// RLPG's `camel_case_split`: cut before every upper-case character (a leading one gives an
/// empty first part).
pub fn camel_case_split(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut starts = vec![0];
    starts.extend((0..chars.len()).filter(|&i| chars[i].is_uppercase()));
    starts.push(chars.len());
    starts
        .windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_deletes_the_spaces_transformers_deleted() {
        let mut text = SourcedText::default();
        text.push_plain("a != b ? c : d . e , it 's x  .y");
        let tok = crate::token::TokenizerKind::Code.tokenizer();
        let (cleaned, _) = cut_and_decode(&text, tok, 100, Keep::Start);
        // One left-to-right pass per replacement: "  ." loses one space only.
        assert_eq!(cleaned.text, "a!= b? c : d. e, it's x .y");
        let mut crlf = SourcedText::default();
        crlf.push_plain("a;\r\nb;\r\n");
        assert_eq!(
            cut_and_decode(&crlf, tok, 100, Keep::Start).0.text,
            "a;\nb;\n"
        );
    }

    #[test]
    fn only_bare_superclasses_are_parents() {
        assert!(bare_superclass(" extends Base {"));
        assert!(bare_superclass(
            "<T extends Number> extends Base implements X {"
        ));
        assert!(!bare_superclass(" extends Base<T> {"));
        assert!(!bare_superclass(" extends a.b.Base {"));
        assert!(!bare_superclass(" implements Runnable {"));
    }

    #[test]
    fn camel_case_parts_as_rlpg_splits_them() {
        assert_eq!(camel_case_split("OrderService"), ["", "Order", "Service"]);
        assert_eq!(
            camel_case_split("URLHandler"),
            ["", "U", "R", "L", "Handler"]
        );
        assert_eq!(camel_case_split("util"), ["util"]);
        assert!(similar_file_names(
            "OrderRepository.java",
            "OrderService.java"
        ));
        assert!(!similar_file_names("Customer.java", "OrderService.java"));
        assert!(
            similar_file_names("TextUtil.java", "TextUtil.java"),
            "same name"
        );
    }
}
