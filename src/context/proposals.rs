//! RLPG's repo-level prompt proposals (paper section 2.1, appendix B): a prompt source (where
//! in the repository to look) crossed with a prompt context type (what to take from there).
//! Ids and order follow Table 7, file ranking Table 6, truncation B.3, formatting B.5.

use super::SourcedText;
use super::fidelity::Fidelity;
use super::rlpg_files;
use crate::candidate::{self, ContextType, PromptSource, ProposalSpec};
use crate::hole::Hole;
use crate::lang::{MethodDecl, Span, TypeKind};

use crate::repo::{FileId, Import, ParentLink, RepoIndex};
use crate::token::{Keep, Tokenizer};

/// The context a proposal offers for one hole, before the composer fits it to the budget.
#[derive(Clone, Debug)]
pub struct ProposalContext {
    pub spec: ProposalSpec,
    pub context: SourcedText,
    /// Files the source ranked, best first (those that gave context and those that did not).
    pub ranked_files: Vec<FileId>,
    /// Which end survives when the context is longer than its allocation (B.3).
    pub keep: Keep,
}

impl crate::compose::CandidateContext for ProposalContext {
    fn id(&self) -> crate::candidate::CandidateId {
        self.spec.id
    }

    fn text(&self) -> &SourcedText {
        &self.context
    }

    fn share(&self) -> f64 {
        self.spec.share
    }

    fn keep(&self) -> Keep {
        self.keep
    }
}

impl ProposalContext {
    /// RLPG calls a proposal applicable when it yields any context.
    pub fn applicable(&self) -> bool {
        !self.context.is_empty()
    }
}

/// What the builders need besides the spec.
pub struct Request<'a> {
    pub index: &'a RepoIndex,
    pub hole: &'a Hole,
    pub tokenizer: &'a dyn Tokenizer,
    /// Tokens the composer will allow the proposal context.
    pub allocation: usize,
    pub fidelity: Fidelity,
}

/// Build the context of proposal `spec` for the request's hole.
pub fn build(spec: ProposalSpec, req: &Request) -> ProposalContext {
    let mut keep = spec.source.keep();
    let (context, ranked_files) = match spec.source {
        PromptSource::Current => {
            let (context, from_before_hole) = current_context(spec.context_type, req);
            if from_before_hole {
                // Items from before the hole keep those nearest to it, as the authors' code does.
                keep = Keep::End;
            }
            (context, vec![req.hole.file])
        }
        PromptSource::ParentClass => {
            if req.fidelity == Fidelity::Code {
                // RLPG's code cuts a parent class's context from the front (`type='back'`).
                keep = Keep::End;
            }
            parent_context(spec.context_type, req)
        }
        source => {
            let files = rank_files(source, req);
            (multi_file_context(&files, spec.context_type, req), files)
        }
    };
    ProposalContext {
        spec,
        context,
        ranked_files,
        keep,
    }
}

/// Build every proposal for one hole, in id order.
pub fn build_all(req: &Request) -> Vec<ProposalContext> {
    candidate::proposal_specs()
        .iter()
        .map(|&spec| build(spec, req))
        .collect()
}

/// Build every proposal for one hole as the paper describes them: see [`build_for_budget_as`].
pub fn build_for_budget(
    index: &RepoIndex,
    hole: &Hole,
    tokenizer: &dyn Tokenizer,
    budget: usize,
) -> Vec<ProposalContext> {
    build_for_budget_as(index, hole, tokenizer, budget, Fidelity::Paper)
}

/// Build every proposal for one hole, in id order, each allocated its share of `budget` as
/// the composer will allocate it, following `fidelity`'s rules.
pub fn build_for_budget_as(
    index: &RepoIndex,
    hole: &Hole,
    tokenizer: &dyn Tokenizer,
    budget: usize,
    fidelity: Fidelity,
) -> Vec<ProposalContext> {
    candidate::proposal_specs()
        .iter()
        .map(|&spec| {
            let req = Request {
                index,
                hole,
                tokenizer,
                allocation: crate::compose::proposal_allocation(budget, spec.share),
                fidelity,
            };
            build(spec, &req)
        })
        .collect()
}

// ----- Current file ---------------------------------------------------------------------------

/// Current: post lines are the lines after the hole line; other types are taken from after the
/// hole line first and only when there are none from before the hole (B.3). Says whether the
/// context came from before the hole.
fn current_context(context_type: ContextType, req: &Request) -> (SourcedText, bool) {
    let (text, before) = current_items(context_type, req);
    match req.fidelity {
        Fidelity::Paper => (text, before),
        // RLPG's code cuts the context to its allocation and decodes it.
        Fidelity::Code => {
            let keep = if before { Keep::End } else { Keep::Start };
            let (text, _) = rlpg_files::cut_and_decode(&text, req.tokenizer, req.allocation, keep);
            (text, before)
        }
    }
}

/// [`current_context`] before the code profile's cut.
fn current_items(context_type: ContextType, req: &Request) -> (SourcedText, bool) {
    let index = req.index;
    let file = &index.files[req.hole.file];
    let after_line = file.line_start(req.hole.line + 1);
    if context_type == ContextType::PostLines {
        let mut text = SourcedText::default();
        if after_line < file.text.len() {
            text.push_span(index, req.hole.file, Span::new(after_line, file.text.len()));
        }
        return (text, false);
    }
    let spans = item_spans(req, req.hole.file, context_type);
    let after: Vec<Span> = spans
        .iter()
        .copied()
        .filter(|s| s.start as usize >= after_line)
        .collect();
    if !after.is_empty() {
        return (join_items(req, req.hole.file, &after, Keep::Start), false);
    }
    // RLPG's code takes an item ending right at the hole as after it (`end_char < hole_char`).
    let ends_before = |s: &Span| match req.fidelity {
        Fidelity::Paper => (s.end as usize) <= req.hole.offset,
        Fidelity::Code => (s.end as usize) < req.hole.offset,
    };
    let before: Vec<Span> = spans.iter().copied().filter(ends_before).collect();
    (join_items(req, req.hole.file, &before, Keep::End), true)
}

// ----- Parent class ---------------------------------------------------------------------------

/// Parent Class: the file of the parent of the class declared nearest above the hole, as
/// `[Parent] context` followed by a line with `[CurrentClass]` (B.5 class_name formatting).
fn parent_context(context_type: ContextType, req: &Request) -> (SourcedText, Vec<FileId>) {
    let index = req.index;
    let file = &index.files[req.hole.file];
    let links: Vec<ParentLink> = match req.fidelity {
        Fidelity::Paper => index.graph.parents[req.hole.file].clone(),
        Fidelity::Code => rlpg_files::parents(index, req.hole.file),
    };
    let nearest = links
        .into_iter()
        .filter(|link| file.line_of(link.class_name_span.start as usize) < req.hole.line)
        .max_by_key(|link| link.class_name_span.start);
    let Some(link) = nearest else {
        return (SourcedText::default(), Vec::new());
    };
    // RLPG's code cuts a parent class's context from the front (`type='back'`).
    let keep = match req.fidelity {
        Fidelity::Paper => Keep::Start,
        Fidelity::Code => Keep::End,
    };
    let mut items = file_items(req, link.file, context_type, keep);
    if req.fidelity == Fidelity::Code && context_type != ContextType::MethodNamesAndBodies {
        items = rlpg_files::cut_and_decode(&items, req.tokenizer, req.allocation, keep).0;
    }
    if items.is_empty() {
        return (items, vec![link.file]);
    }
    let mut text = SourcedText::default();
    text.push_plain(&format!("[{}] ", link.parent_name));
    text.append(items);
    push_current_class(&mut text, req);
    (text, vec![link.file])
}

/// `\n[Name]` for the class the hole is in (the type declared nearest above it), if any;
/// says whether there was one.
fn push_current_class(text: &mut SourcedText, req: &Request) -> bool {
    let file = &req.index.files[req.hole.file];
    let current = file
        .facts
        .types
        .iter()
        .filter(|t| file.line_of(t.name_span.start as usize) < req.hole.line)
        // RLPG's code names only classes (its `class_declaration` query).
        .filter(|t| req.fidelity == Fidelity::Paper || t.kind == TypeKind::Class)
        .max_by_key(|t| t.name_span.start);
    if let Some(class) = current {
        text.push_plain(&format!("\n[{}]", class.name));
    }
    current.is_some()
}

// ----- Sources with ranked lists of files -----------------------------------------------------

/// Context from a ranked list of files: `[FileName] context` per file, files taken best first
/// until the allocation is filled, laid out best last so it sits nearest the code (authors'
/// code), then the current class line. Each file alone is first cut to the allocation.
fn multi_file_context(files: &[FileId], context_type: ContextType, req: &Request) -> SourcedText {
    let mut parts = Vec::new();
    let mut total = 0;
    let mut any_items = false;
    for &file in files {
        if total >= req.allocation {
            break;
        }
        // RLPG's code counts a method-bodies context as its bodies' tokens, labels left out.
        let (items, counted) = match (req.fidelity, context_type) {
            (Fidelity::Code, ContextType::MethodNamesAndBodies) => {
                let (text, tokens) = method_bodies(req, file);
                (text, Some(tokens))
            }
            _ => (file_items(req, file, context_type, Keep::Start), None),
        };
        // The authors' code adds a bare `[FileName]` here; a label without context is noise,
        // so only the code profile keeps it.
        if items.is_empty() && req.fidelity == Fidelity::Paper {
            continue;
        }
        any_items |= counted.map_or(!items.is_empty(), |n| n > 0);
        let mut part = SourcedText::default();
        part.push_plain(&format!("[{}] ", req.index.files[file].stem()));
        let tokens = match req.fidelity {
            Fidelity::Paper => {
                part.append(items);
                let (cut, tokens) = part.truncate(req.tokenizer, req.allocation, Keep::Start);
                part = cut;
                tokens
            }
            // RLPG's code cuts and counts the file's context alone, not its label (method
            // bodies were cut one by one).
            Fidelity::Code => {
                let (cut, tokens) = match counted {
                    Some(tokens) => (items, tokens),
                    None => rlpg_files::cut_and_decode(
                        &items,
                        req.tokenizer,
                        req.allocation,
                        Keep::Start,
                    ),
                };
                part.append(cut);
                tokens
            }
        };
        total += tokens;
        parts.push(part);
    }
    let mut text = SourcedText::default();
    if !any_items {
        return text;
    }
    for (i, part) in parts.into_iter().rev().enumerate() {
        if i > 0 {
            text.push_plain(" ");
        }
        text.append(part);
    }
    match req.fidelity {
        Fidelity::Paper => {
            push_current_class(&mut text, req);
        }
        // RLPG's code leaves a space after every file's context and a line break before the
        // class line even when there is no class; both count in the tokens kept.
        Fidelity::Code => {
            text.push_plain(" ");
            if !push_current_class(&mut text, req) {
                text.push_plain("\n");
            }
        }
    }
    text
}

/// Table 6's file ranking for every source that returns a list of files.
fn rank_files(source: PromptSource, req: &Request) -> Vec<FileId> {
    let index = req.index;
    let graph = &index.graph;
    let id = req.hole.file;
    if req.fidelity == Fidelity::Code {
        // RLPG's code does not keep the current file out of the import-of lists.
        return rlpg_files::rank_files(source, req);
    }
    let ranked = match source {
        PromptSource::Import => rank_imports(req),
        PromptSource::Sibling => rank_by_common_imports(req, graph.siblings(&index.files, id)),
        PromptSource::SimilarName => {
            rank_by_common_imports(req, graph.similar_names(&index.files, id))
        }
        PromptSource::ChildClass => rank_by_common_imports(req, graph.children[id].clone()),
        PromptSource::ImportOfSibling => {
            rank_imports_by_frequency(req, &graph.siblings(&index.files, id))
        }
        PromptSource::ImportOfSimilarName => {
            rank_imports_by_frequency(req, &graph.similar_names(&index.files, id))
        }
        PromptSource::ImportOfParentClass => {
            let parents: Vec<FileId> = graph.parents[id].iter().map(|l| l.file).collect();
            rank_imports_by_frequency(req, &parents)
        }
        PromptSource::ImportOfChildClass => rank_imports_by_frequency(req, &graph.children[id]),
        PromptSource::Current | PromptSource::ParentClass => unreachable!("single-file sources"),
    };
    // The current file never feeds another source: its text holds the hole's answer.
    ranked.into_iter().filter(|&f| f != id).collect()
}

/// Distance in lines from the hole to the nearest usage of each import of the current file.
/// A usage on the hole line counts only if it is visible before the hole; the rest of that line
/// is the answer. Imports never used come last.
fn import_distances(req: &Request) -> Vec<(FileId, usize)> {
    let index = req.index;
    let file = &index.files[req.hole.file];
    let prefix = &file.text[file.line_start(req.hole.line)..req.hole.offset];
    imports_of(req, req.hole.file)
        .map(|import| {
            let visible_on_hole_line = index.files[import.file]
                .facts
                .types
                .iter()
                .any(|t| t.top_level && prefix.contains(t.name.as_str()));
            let distance = import
                .usage_lines
                .iter()
                .filter(|&&l| l as usize != req.hole.line || visible_on_hole_line)
                .map(|&l| (l as usize).abs_diff(req.hole.line))
                .min()
                .unwrap_or(usize::MAX);
            (import.file, distance)
        })
        .collect()
}

/// The repository files `file` imports, every kind keyhole resolves (the paper profile: the
/// code profile ranks files in [`rlpg_files`]).
fn imports_of<'r>(req: &Request<'r>, file: FileId) -> impl Iterator<Item = &'r Import> + use<'r> {
    req.index.graph.imports[file].iter()
}

/// Import: import files ranked by how close their nearest usage is to the hole.
fn rank_imports(req: &Request) -> Vec<FileId> {
    let mut distances = import_distances(req);
    distances.sort_by_key(|&(file, d)| (d, file));
    distances.into_iter().map(|(f, _)| f).collect()
}

/// Sibling, Similar Name, Child Class: files sharing an import with the current file, ranked by
/// how close to the hole the nearest shared import is used, ties broken by the number of shared
/// imports; files sharing none follow in path order (the authors' code falls back to all of
/// them when none shares an import).
fn rank_by_common_imports(req: &Request, candidates: Vec<FileId>) -> Vec<FileId> {
    let distances = import_distances(req);
    let mut keyed: Vec<(usize, std::cmp::Reverse<usize>, FileId)> = candidates
        .into_iter()
        .map(|candidate| {
            let theirs: Vec<FileId> = imports_of(req, candidate).map(|i| i.file).collect();
            let shared: Vec<usize> = distances
                .iter()
                .filter(|(f, _)| theirs.contains(f))
                .map(|&(_, d)| d)
                .collect();
            let nearest = shared.iter().copied().min().unwrap_or(usize::MAX);
            (nearest, std::cmp::Reverse(shared.len()), candidate)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, f)| f).collect()
}

/// Import of X: the files X import, ranked by how many of the X files import each.
fn rank_imports_by_frequency(req: &Request, of: &[FileId]) -> Vec<FileId> {
    let mut counts: Vec<(FileId, usize)> = Vec::new();
    for &file in of {
        for import in imports_of(req, file) {
            match counts.iter_mut().find(|(f, _)| *f == import.file) {
                Some((_, n)) => *n += 1,
                None => counts.push((import.file, 1)),
            }
        }
    }
    counts.sort_by_key(|&(file, n)| (std::cmp::Reverse(n), file));
    counts.into_iter().map(|(f, _)| f).collect()
}

// ----- What a file offers for each context type ----------------------------------------------

/// Spans of a file's items of one context type (not post lines, not bodies). Method names are
/// whole signatures (the paper's appendix B.2 example), or the names alone under
/// [`Fidelity::Code`] (RLPG's code captures the method's name identifier); identifiers under
/// [`Fidelity::Code`] are followed by the type identifiers.
fn item_spans(req: &Request, file: FileId, context_type: ContextType) -> Vec<Span> {
    let source = &req.index.files[file];
    let facts = &source.facts;
    let spans = match context_type {
        ContextType::MethodNames if req.fidelity == Fidelity::Code => {
            facts.methods.iter().map(|m| m.name).collect()
        }
        // RLPG's parse_tree.py extends the identifier list with the type identifiers in place
        // (`file_identifiers = all_identifiers; file_identifiers.extend(...)`), so its
        // identifiers are every identifier, then every type identifier.
        ContextType::Identifiers if req.fidelity == Fidelity::Code => [
            facts.identifiers.as_slice(),
            facts.type_identifiers.as_slice(),
        ]
        .concat(),
        ContextType::Identifiers => facts.identifiers.clone(),
        ContextType::TypeIdentifiers => facts.type_identifiers.clone(),
        ContextType::FieldDeclarations => facts.field_declarations.clone(),
        ContextType::StringLiterals => facts.string_literals.clone(),
        ContextType::MethodNames => facts.methods.iter().map(|m| m.signature).collect(),
        ContextType::MethodNamesAndBodies => facts.methods.iter().map(|m| m.with_body).collect(),
        ContextType::PostLines => Vec::new(),
    };
    match req.fidelity {
        Fidelity::Paper => spans,
        Fidelity::Code => spans
            .into_iter()
            .map(|s| rlpg_files::attribute_span(source, s))
            .collect(),
    }
}

/// Everything of `context_type` in another file, items joined by spaces (B.5: "all" of them),
/// as many from the `keep` end as the allocation can hold. Method bodies get `[name]` before
/// each (class_method_name) and, as in the authors' code, an equal share of the allocation
/// each.
fn file_items(req: &Request, file: FileId, context_type: ContextType, keep: Keep) -> SourcedText {
    if context_type != ContextType::MethodNamesAndBodies {
        let spans = item_spans(req, file, context_type);
        return join_items(req, file, &spans, keep);
    }
    method_bodies(req, file).0
}

/// A file's methods as `[name] body`, each body cut to its share, and the bodies' tokens.
fn method_bodies(req: &Request, file: FileId) -> (SourcedText, usize) {
    let methods = &req.index.files[file].facts.methods;
    let mut total = 0;
    let mut share = req.allocation / methods.len().max(1);
    let mut text = SourcedText::default();
    for (i, method) in methods.iter().enumerate() {
        if i > 0 {
            text.push_plain(" ");
        }
        text.push_plain("[");
        text.push_span(req.index, file, method.name);
        text.push_plain("] ");
        let mut body = SourcedText::default();
        body.push_span(req.index, file, method_text(req, file, method));
        // The paper profile keeps the start (the signature and first statements); RLPG's code
        // keeps the end, as it cuts every text with its default `type='back'`.
        let (cut, tokens) = match req.fidelity {
            Fidelity::Paper => body.truncate(req.tokenizer, share, Keep::Start),
            Fidelity::Code => rlpg_files::cut_and_decode(&body, req.tokenizer, share, Keep::End),
        };
        text.append(cut);
        total += tokens;
        // RLPG's code reuses the variable: each method's share is what the one before it got.
        if req.fidelity == Fidelity::Code {
            share = tokens;
        }
    }
    (text, total)
}

/// The text of a method in a method-bodies context: the whole declaration from its signature,
/// or under [`Fidelity::Code`] what RLPG's code takes: from the start of the line where the
/// body opens to its end when that is the line of the method's name, else the name's line
/// alone (its `method_body[0][0] == method_name[0][0]` match).
fn method_text(req: &Request, file: FileId, method: &MethodDecl) -> Span {
    if req.fidelity == Fidelity::Paper {
        return method.with_body;
    }
    let source = &req.index.files[file];
    let name_line = source.line_of(method.name.start as usize);
    let after_signature =
        &source.text[method.signature.end as usize..method.with_body.end as usize];
    let body_line = after_signature
        .find('{')
        .map(|i| source.line_of(method.signature.end as usize + i));
    let line_start = source.line_start(name_line);
    if body_line == Some(name_line) {
        let end = rlpg_files::rlpg_span(source, method.with_body).end as usize;
        Span::new(line_start, end)
    } else {
        Span::new(line_start, source.line_start(name_line + 1))
    }
}

/// Items joined by single spaces. Only as many items as can matter are joined: enough from the
/// kept end to exceed the allocation, checked in tokens, so huge files cost no more than
/// small ones.
fn join_items(req: &Request, file: FileId, spans: &[Span], keep: Keep) -> SourcedText {
    // Saturating: a huge allocation then takes every item at once instead of wrapping round.
    let mut byte_limit = req.allocation.max(16).saturating_mul(8);
    loop {
        let chosen = take_from_end(spans, keep, byte_limit);
        let mut text = SourcedText::default();
        for (i, span) in chosen.iter().enumerate() {
            if i > 0 {
                text.push_plain(" ");
            }
            text.push_span(req.index, file, *span);
        }
        if chosen.len() == spans.len() || req.tokenizer.count(&text.text) > req.allocation {
            return text;
        }
        byte_limit = byte_limit.saturating_mul(4);
    }
}

/// The items at the kept end of `spans` whose text adds up to at least `byte_limit` bytes.
fn take_from_end(spans: &[Span], keep: Keep, byte_limit: usize) -> &[Span] {
    let mut bytes = 0;
    let mut n = 0;
    let iter: Box<dyn Iterator<Item = &Span>> = match keep {
        Keep::Start => Box::new(spans.iter()),
        Keep::End => Box::new(spans.iter().rev()),
    };
    for span in iter {
        if bytes >= byte_limit {
            break;
        }
        bytes += span.range().len() + 1;
        n += 1;
    }
    match keep {
        Keep::Start => &spans[..n],
        Keep::End => &spans[spans.len() - n..],
    }
}
