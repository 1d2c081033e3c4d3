//! What a file offers a proposal for each of RLPG's context types (appendix B.2, B.5): its items
//! as the chosen profile reads them ([`super::profile::Rules`]), joined, as many from the kept
//! end as the allocation can hold. [`super::proposals`] lays them out per prompt source.

use super::HoleRequest;
use super::SourcedText;
use super::profile::{BodyShare, Cutting, Identifiers, ItemText, MethodNames, MethodText, Rules};
use super::rlpg_files;
use crate::candidate::ContextType;
use crate::lang::{MethodDecl, Span};
use crate::repo::{FileId, SourceFile};
use crate::token::Keep;

/// Everything of `context_type` in a file, items joined by spaces (B.5: "all" of them), as many
/// from the `keep` end as the allocation can hold; and their tokens where the profile has
/// counted them already (method bodies, cut one by one as RLPG's code cuts them).
pub(super) fn file_items(
    req: &HoleRequest,
    file: FileId,
    context_type: ContextType,
    keep: Keep,
) -> (SourcedText, Option<usize>) {
    if context_type != ContextType::MethodNamesAndBodies {
        let spans = item_spans(req.fidelity.rules(), &req.index.files[file], context_type);
        return (join_items(req, file, &spans, keep), None);
    }
    let (text, tokens) = method_bodies(req, file);
    let counted = match req.fidelity.rules().cutting {
        Cutting::Composer => None,
        Cutting::RlpgCode => Some(tokens),
    };
    (text, counted)
}

/// Spans of a file's items of one context type (not post lines), as the profile reads them.
pub(super) fn item_spans(
    rules: &Rules,
    source: &SourceFile,
    context_type: ContextType,
) -> Vec<Span> {
    let facts = &source.facts;
    let spans = match context_type {
        ContextType::Identifiers => match rules.identifiers {
            Identifiers::Identifiers => facts.identifiers.clone(),
            Identifiers::WithTypeIdentifiers => [
                facts.identifiers.as_slice(),
                facts.type_identifiers.as_slice(),
            ]
            .concat(),
        },
        ContextType::TypeIdentifiers => facts.type_identifiers.clone(),
        ContextType::FieldDeclarations => facts.field_declarations.clone(),
        ContextType::StringLiterals => facts.string_literals.clone(),
        ContextType::MethodNames => match rules.method_names {
            MethodNames::Signatures => facts.methods.iter().map(|m| m.signature).collect(),
            MethodNames::Names => facts.methods.iter().map(|m| m.name).collect(),
        },
        ContextType::MethodNamesAndBodies => facts.methods.iter().map(|m| m.with_body).collect(),
        ContextType::PostLines => Vec::new(),
    };
    match rules.item_text {
        ItemText::Span => spans,
        ItemText::RlpgSlice => spans
            .into_iter()
            .map(|s| rlpg_files::attribute_span(source, s))
            .collect(),
    }
}

/// A file's methods as `[name] body` (B.5 class_method_name), each body cut to its share of the
/// allocation, and the bodies' tokens.
fn method_bodies(req: &HoleRequest, file: FileId) -> (SourcedText, usize) {
    let rules = req.fidelity.rules();
    let source = &req.index.files[file];
    let methods = &source.facts.methods;
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
        body.push_span(req.index, file, method_text(rules, source, method));
        let (cut, tokens) = rules
            .cutting
            .cut(&body, req.tokenizer, share, rules.body_keep);
        text.append(cut);
        total += tokens;
        if rules.body_share == BodyShare::PreviousTokens {
            share = tokens;
        }
    }
    (text, total)
}

/// The text of a method in a method-bodies context, as the profile takes it.
fn method_text(rules: &Rules, source: &SourceFile, method: &MethodDecl) -> Span {
    match rules.method_text {
        MethodText::Declaration => method.with_body,
        MethodText::RlpgLines => rlpg_files::method_lines(source, method),
    }
}

/// Items joined by single spaces. Only as many items as can matter are joined: enough from the
/// kept end to exceed the allocation, checked in tokens, so huge files cost no more than
/// small ones.
pub(super) fn join_items(
    req: &HoleRequest,
    file: FileId,
    spans: &[Span],
    keep: Keep,
) -> SourcedText {
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
