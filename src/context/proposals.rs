//! RLPG's repo-level prompt proposals (paper section 2.1, appendix B): a prompt source (where
//! in the repository to look) crossed with a prompt context type (what to take from there).
//! Ids and order follow Table 7, file ranking Table 6, truncation B.3, formatting B.5. Where the
//! paper and its authors' code differ, the chosen profile decides ([`super::profile`]).

use super::fidelity::Fidelity;
use super::{HoleRequest, SourcedText};
use crate::candidate::{self, ContextType, PromptSource, ProposalSpec};
use crate::compose::Assembly;
use crate::hole::Hole;
use crate::lang::Span;

use crate::repo::{FileId, RepoIndex};
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
    /// How the context makes a prompt with the default context (the profile's).
    pub assembly: Assembly,
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

    fn assembly(&self) -> Assembly {
        self.assembly
    }
}

impl ProposalContext {
    /// RLPG calls a proposal applicable when it yields any context.
    pub fn applicable(&self) -> bool {
        !self.context.is_empty()
    }
}

/// Build the context of proposal `spec` for the request's hole.
pub fn build(spec: ProposalSpec, req: &HoleRequest) -> ProposalContext {
    let rules = req.fidelity.rules();
    let mut keep = spec.source.keep();
    // `counted`: the context's tokens where the profile counts them as RLPG's code does.
    let (context, ranked_files, counted) = match spec.source {
        PromptSource::Current => {
            let (context, from_before_hole, counted) = current_context(spec.context_type, req);
            if from_before_hole {
                // Items from before the hole keep those nearest to it, as the authors' code does.
                keep = Keep::End;
            }
            (context, vec![req.hole.file], counted)
        }
        PromptSource::ParentClass => {
            keep = rules.parent_keep();
            parent_context(spec.context_type, req)
        }
        source => {
            let files = rules.rank_files(source, req);
            let (context, counted) = multi_file_context(&files, spec.context_type, req);
            (context, files, Some(counted))
        }
    };
    ProposalContext {
        spec,
        context,
        ranked_files,
        keep,
        assembly: rules.assembly(spec.context_type, counted),
    }
}

/// Build every proposal for one hole, in id order.
pub fn build_all(req: &HoleRequest) -> Vec<ProposalContext> {
    candidate::proposal_specs()
        .iter()
        .map(|&spec| build(spec, req))
        .collect()
}

/// Build every proposal for one hole, in id order, each allocated its share of `budget` as
/// the composer will allocate it, following `fidelity`'s rules.
pub fn build_for_budget(
    index: &RepoIndex,
    hole: &Hole,
    tokenizer: &dyn Tokenizer,
    budget: usize,
    fidelity: Fidelity,
) -> Vec<ProposalContext> {
    candidate::proposal_specs()
        .iter()
        .map(|&spec| {
            // No proposal draws at random.
            let req = HoleRequest::new(
                index,
                hole,
                tokenizer,
                (budget, spec.share),
                fidelity,
                crate::hole::DEFAULT_SEED,
            );
            build(spec, &req)
        })
        .collect()
}

// ----- Current file ---------------------------------------------------------------------------

/// Current: post lines are the lines after the hole line; other types are taken from after the
/// hole line first and only when there are none from before the hole (B.3). Says whether the
/// context came from before the hole, and gives its tokens where the profile counts them.
fn current_context(
    context_type: ContextType,
    req: &HoleRequest,
) -> (SourcedText, bool, Option<usize>) {
    let (text, before) = current_items(context_type, req);
    let (text, counted) = req.fidelity.rules().finish_current(text, before, req);
    (text, before, counted)
}

/// [`current_context`] before the profile finishes it.
fn current_items(context_type: ContextType, req: &HoleRequest) -> (SourcedText, bool) {
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
    let rules = req.fidelity.rules();
    let ends_before = |s: &Span| rules.ends_before_hole(s.end as usize, req.hole.offset);
    let before: Vec<Span> = spans.iter().copied().filter(ends_before).collect();
    (join_items(req, req.hole.file, &before, Keep::End), true)
}

// ----- Parent class ---------------------------------------------------------------------------

/// Parent Class: the file of the parent of the class declared nearest above the hole, as
/// `[Parent] context` followed by a line with `[CurrentClass]` (B.5 class_name formatting); its
/// tokens where the profile counts them (labels left out).
fn parent_context(
    context_type: ContextType,
    req: &HoleRequest,
) -> (SourcedText, Vec<FileId>, Option<usize>) {
    let index = req.index;
    let file = &index.files[req.hole.file];
    let rules = req.fidelity.rules();
    let links = rules.parents(index, req.hole.file);
    let nearest = links
        .into_iter()
        .filter(|link| file.line_of(link.class_name_span.start as usize) < req.hole.line)
        .max_by_key(|link| link.class_name_span.start);
    let Some(link) = nearest else {
        return (SourcedText::default(), Vec::new(), Some(0));
    };
    let keep = rules.parent_keep();
    let (items, counted) = match context_type {
        ContextType::MethodNamesAndBodies => {
            let (items, tokens) = method_bodies(req, link.file);
            (items, Some(tokens))
        }
        _ => (file_items(req, link.file, context_type, keep), None),
    };
    let (items, counted) = rules.finish_parent_items(items, counted, keep, req);
    if items.is_empty() {
        return (items, vec![link.file], counted);
    }
    let mut text = SourcedText::default();
    text.push_plain(&format!("[{}] ", link.parent_name));
    text.append(items);
    push_current_class(&mut text, req);
    (text, vec![link.file], counted)
}

/// `\n[Name]` for the class the hole is in (the type declared nearest above it), if any;
/// says whether there was one.
pub(super) fn push_current_class(text: &mut SourcedText, req: &HoleRequest) -> bool {
    let file = &req.index.files[req.hole.file];
    let current = file
        .facts
        .types
        .iter()
        .filter(|t| file.line_of(t.name_span.start as usize) < req.hole.line)
        .filter(|t| req.fidelity.rules().names_in_class_line(t.kind))
        .max_by_key(|t| t.name_span.start);
    if let Some(class) = current {
        text.push_plain(&format!("\n[{}]", class.name));
    }
    current.is_some()
}

// ----- Sources with ranked lists of files -----------------------------------------------------

/// Context from a ranked list of files: `[FileName] context` per file, files taken best first
/// until the allocation is filled, laid out best last so it sits nearest the code (authors'
/// code), then the current class line. Each file alone is first cut to the allocation. Also
/// gives the tokens counted towards filling the allocation.
fn multi_file_context(
    files: &[FileId],
    context_type: ContextType,
    req: &HoleRequest,
) -> (SourcedText, usize) {
    let rules = req.fidelity.rules();
    let mut parts = Vec::new();
    let mut total = 0;
    let mut any_items = false;
    for &file in files {
        if total >= req.allocation {
            break;
        }
        let (items, counted) = rules.file_context(req, file, context_type);
        if items.is_empty() && !rules.keeps_empty_file_labels() {
            continue;
        }
        any_items |= counted.map_or(!items.is_empty(), |n| n > 0);
        let mut label = SourcedText::default();
        label.push_plain(&format!("[{}] ", req.index.files[file].stem()));
        let (part, tokens) = rules.file_part(label, items, counted, req);
        total += tokens;
        parts.push(part);
    }
    let mut text = SourcedText::default();
    if !any_items {
        return (text, 0);
    }
    for (i, part) in parts.into_iter().rev().enumerate() {
        if i > 0 {
            text.push_plain(" ");
        }
        text.append(part);
    }
    rules.close_files(&mut text, req);
    (text, total)
}

// ----- What a file offers for each context type ----------------------------------------------

/// Spans of a file's items of one context type (not post lines), as the profile reads them.
fn item_spans(req: &HoleRequest, file: FileId, context_type: ContextType) -> Vec<Span> {
    req.fidelity
        .rules()
        .item_spans(&req.index.files[file], context_type)
}

/// Everything of `context_type` in another file, items joined by spaces (B.5: "all" of them),
/// as many from the `keep` end as the allocation can hold. Method bodies get `[name]` before
/// each (class_method_name) and, as in the authors' code, an equal share of the allocation
/// each.
pub(super) fn file_items(
    req: &HoleRequest,
    file: FileId,
    context_type: ContextType,
    keep: Keep,
) -> SourcedText {
    if context_type != ContextType::MethodNamesAndBodies {
        let spans = item_spans(req, file, context_type);
        return join_items(req, file, &spans, keep);
    }
    method_bodies(req, file).0
}

/// A file's methods as `[name] body`, each body cut to its share, and the bodies' tokens.
pub(super) fn method_bodies(req: &HoleRequest, file: FileId) -> (SourcedText, usize) {
    let rules = req.fidelity.rules();
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
        let source = &req.index.files[file];
        body.push_span(req.index, file, rules.method_text(source, method));
        let (cut, tokens, next_share) = rules.cut_body(&body, req.tokenizer, share);
        text.append(cut);
        total += tokens;
        share = next_share;
    }
    (text, total)
}

/// Items joined by single spaces. Only as many items as can matter are joined: enough from the
/// kept end to exceed the allocation, checked in tokens, so huge files cost no more than
/// small ones.
fn join_items(req: &HoleRequest, file: FileId, spans: &[Span], keep: Keep) -> SourcedText {
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
