//! RLPG's repo-level prompt proposals (paper section 2.1, appendix B): a prompt source (where
//! in the repository to look) crossed with a prompt context type (what to take from there).
//! Ids and order follow Table 7, file ranking Table 6, truncation B.3, formatting B.5. This file
//! is the algorithm, per prompt source; what a file offers per context type is in `items.rs`.
//! Where the paper and its authors' code differ, it reads the chosen profile's table of rules
//! ([`super::profile::Rules`]: [`super::profile::paper::RULES`], [`super::profile::code::RULES`]).

use super::fidelity::Fidelity;
use super::items::{file_items, item_spans, join_items};
use super::profile::{ClassLine, Cutting};
use super::{HoleRequest, SourcedText};
use crate::candidate::{self, ContextType, PromptSource, ProposalSpec};
use crate::compose::Assembly;
use crate::hole::Hole;
use crate::lang::{Span, TypeKind};
use crate::repo::{FileId, RepoIndex};
use crate::token::{Keep, Tokenizer};
use rayon::prelude::*;

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
            let (context, from_before_hole) = current_items(spec.context_type, req);
            if from_before_hole {
                // Items from before the hole keep those nearest to it, as the authors' code does.
                keep = Keep::End;
            }
            let (context, counted) = cut_alone(context, keep, req);
            (context, vec![req.hole.file], counted)
        }
        PromptSource::ParentClass => {
            keep = rules.parent_keep;
            parent_context(spec.context_type, req)
        }
        source => {
            let files = (rules.rank_files)(source, req);
            let (context, counted) = multi_file_context(&files, spec.context_type, req);
            (context, files, Some(counted))
        }
    };
    ProposalContext {
        spec,
        context,
        ranked_files,
        keep,
        assembly: assembly(rules.cutting, spec.context_type, counted),
    }
}

/// How a proposal's context of `context_type` makes a prompt with the default context, given
/// its tokens where the profile counted them (`counted`). RLPG's main loop sends the context
/// whole with the separator its rule configuration names (`space` for post lines, else
/// `newline`) and sizes the default context from the context's own count (`rule_prompt_len`).
fn assembly(cutting: Cutting, context_type: ContextType, counted: Option<usize>) -> Assembly {
    match (cutting, counted) {
        (Cutting::RlpgCode, Some(counted)) => Assembly::RlpgMainLoop {
            counted,
            separator: match context_type {
                ContextType::PostLines => " ",
                _ => "\n",
            },
        },
        _ => Assembly::Capped,
    }
}

/// A single file's context as the profile sends it: whole, for the composer to cut; or cut to
/// the allocation from the `keep` end and decoded as RLPG's code cuts it, with its tokens.
fn cut_alone(text: SourcedText, keep: Keep, req: &HoleRequest) -> (SourcedText, Option<usize>) {
    match req.fidelity.rules().cutting {
        Cutting::Composer => (text, None),
        cutting @ Cutting::RlpgCode => {
            let (text, tokens) = cutting.cut(&text, req.tokenizer, req.allocation, keep);
            (text, Some(tokens))
        }
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
    // Each proposal alone on the CPU pool: a person waits for all 62 before the ranked list.
    candidate::proposal_specs()
        .par_iter()
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
/// context came from before the hole.
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
    let rules = req.fidelity.rules();
    let spans = item_spans(rules, file, context_type);
    let after: Vec<Span> = spans
        .iter()
        .copied()
        .filter(|s| s.start as usize >= after_line)
        .collect();
    if !after.is_empty() {
        return (join_items(req, req.hole.file, &after, Keep::Start), false);
    }
    let hole = req.hole.offset;
    let ends_before = |s: &Span| {
        let end = s.end as usize;
        end < hole || (end == hole && rules.item_ending_at_hole_is_before)
    };
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
    let links = (rules.parents)(index, req.hole.file);
    let nearest = links
        .into_iter()
        .filter(|link| file.line_of(link.class_name_span.start as usize) < req.hole.line)
        .max_by_key(|link| link.class_name_span.start);
    let Some(link) = nearest else {
        return (SourcedText::default(), Vec::new(), Some(0));
    };
    let keep = rules.parent_keep;
    let (items, counted) = match file_items(req, link.file, context_type, keep) {
        // Method bodies were cut one by one.
        (items, Some(counted)) => (items, Some(counted)),
        (items, None) => cut_alone(items, keep, req),
    };
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
fn push_current_class(text: &mut SourcedText, req: &HoleRequest) -> bool {
    let file = &req.index.files[req.hole.file];
    let current = file
        .facts
        .types
        .iter()
        .filter(|t| file.line_of(t.name_span.start as usize) < req.hole.line)
        .filter(|t| match req.fidelity.rules().class_line {
            ClassLine::AnyType => true,
            ClassLine::Classes => t.kind == TypeKind::Class,
        })
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
        let (items, counted) = file_items(req, file, context_type, Keep::Start);
        if items.is_empty() && !rules.keeps_empty_file_labels {
            continue;
        }
        any_items |= counted.map_or(!items.is_empty(), |n| n > 0);
        let mut label = SourcedText::default();
        label.push_plain(&format!("[{}] ", req.index.files[file].stem()));
        let (part, tokens) = file_part(label, items, counted, req);
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
    if rules.pads_file_list {
        // A space after the last file's context, a line break even without a class line.
        text.push_plain(" ");
        if !push_current_class(&mut text, req) {
            text.push_plain("\n");
        }
    } else {
        push_current_class(&mut text, req);
    }
    (text, total)
}

/// A file's part of a multi-file context: its `label` followed by its `items` (whose tokens are
/// `counted` where known), cut to the allocation; and the tokens the part counts towards filling
/// it. The composer's profile cuts the label with the items; RLPG's code cuts and counts the
/// items alone.
fn file_part(
    mut label: SourcedText,
    items: SourcedText,
    counted: Option<usize>,
    req: &HoleRequest,
) -> (SourcedText, usize) {
    let cutting = req.fidelity.rules().cutting;
    match (cutting, counted) {
        (Cutting::Composer, _) => {
            label.append(items);
            cutting.cut(&label, req.tokenizer, req.allocation, Keep::Start)
        }
        (Cutting::RlpgCode, Some(tokens)) => {
            label.append(items);
            (label, tokens)
        }
        (Cutting::RlpgCode, None) => {
            let (cut, tokens) = cutting.cut(&items, req.tokenizer, req.allocation, Keep::Start);
            label.append(cut);
            (label, tokens)
        }
    }
}
