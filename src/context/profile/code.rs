//! The code profile (`--fidelity code`): RLPG's proposals exactly as its published code builds
//! them (`parse_tree.py`, `context.py`), quirks included; every rule is listed in
//! [`crate::context::fidelity`]. Its file lists live in [`crate::context::rlpg_files`].

use super::{BlockBudget, Profile, WindowOrder, WindowRules, fact_spans};
use crate::candidate::{ContextType, PromptSource};
use crate::compose::Assembly;
use crate::context::HoleRequest;
use crate::context::SourcedText;
use crate::context::proposals::{file_items, method_bodies, push_current_class};
use crate::context::rlpg_files;
use crate::lang::{MethodDecl, Span, TypeKind};
use crate::repo::{FileId, ParentLink, RepoIndex, SourceFile};
use crate::token::{Keep, Tokenizer};

/// The authors' code's reading.
pub struct Code;

/// The blocks' budget in RepoCoder's code: 2,000 Codex tokens, half of Codex's context.
pub const BLOCK_BUDGET: usize = 2000;

/// RepoCoder's blocks as its code (`_build_prompt`) builds them: Python comments, a 2,000
/// Codex-token budget of their own with the header counted as 20 tokens, repeated lines kept,
/// its window list's order, `metadata[0]` shown, and windows joined and split again.
static WINDOWS: WindowRules = WindowRules {
    comment: Some("# "),
    budget: BlockBudget::Fixed {
        tokens: BLOCK_BUDGET,
        header_tokens: 20,
    },
    skips_repeated_code: false,
    order: WindowOrder::RepoCoder,
    shows_first_place: true,
    splits_windows_again: true,
};

impl Profile for Code {
    fn windows(&self) -> &'static WindowRules {
        &WINDOWS
    }

    /// Cut to its allocation and decoded, as every text RLPG's code cuts.
    fn finish_current(
        &self,
        text: SourcedText,
        before: bool,
        req: &HoleRequest,
    ) -> (SourcedText, Option<usize>) {
        let keep = if before { Keep::End } else { Keep::Start };
        let (text, tokens) = rlpg_files::cut_and_decode(&text, req.tokenizer, req.allocation, keep);
        (text, Some(tokens))
    }

    /// RLPG's code takes an item ending right at the hole as after it (`end_char < hole_char`).
    fn ends_before_hole(&self, end: usize, hole_offset: usize) -> bool {
        end < hole_offset
    }

    /// A superclass written as a bare type identifier, in the last other file declaring a class
    /// of that name.
    fn parents(&self, index: &RepoIndex, file: FileId) -> Vec<ParentLink> {
        rlpg_files::parents(index, file)
    }

    /// The end: RLPG's code cuts a parent class's context from the front (`type='back'`).
    fn parent_keep(&self) -> Keep {
        Keep::End
    }

    /// Cut and decoded (method bodies were cut one by one), counted without the labels.
    fn finish_parent_items(
        &self,
        items: SourcedText,
        counted: Option<usize>,
        keep: Keep,
        req: &HoleRequest,
    ) -> (SourcedText, Option<usize>) {
        if counted.is_some() {
            return (items, counted);
        }
        let (items, tokens) =
            rlpg_files::cut_and_decode(&items, req.tokenizer, req.allocation, keep);
        (items, Some(tokens))
    }

    /// Classes only (its `class_declaration` query).
    fn names_in_class_line(&self, kind: TypeKind) -> bool {
        kind == TypeKind::Class
    }

    /// As `parse_tree.py` and `context.py` compute them; the current file is not kept out of
    /// the import-of lists.
    fn rank_files(&self, source: PromptSource, req: &HoleRequest) -> Vec<FileId> {
        rlpg_files::rank_files(source, req)
    }

    /// A method-bodies context counts its bodies' tokens, labels left out.
    fn file_context(
        &self,
        req: &HoleRequest,
        file: FileId,
        context_type: ContextType,
    ) -> (SourcedText, Option<usize>) {
        match context_type {
            ContextType::MethodNamesAndBodies => {
                let (text, tokens) = method_bodies(req, file);
                (text, Some(tokens))
            }
            _ => (file_items(req, file, context_type, Keep::Start), None),
        }
    }

    /// The authors' code adds a bare `[FileName]`.
    fn keeps_empty_file_labels(&self) -> bool {
        true
    }

    /// The file's context is cut and counted alone, not its label (method bodies were cut one
    /// by one).
    fn file_part(
        &self,
        mut label: SourcedText,
        items: SourcedText,
        counted: Option<usize>,
        req: &HoleRequest,
    ) -> (SourcedText, usize) {
        let (cut, tokens) = match counted {
            Some(tokens) => (items, tokens),
            None => rlpg_files::cut_and_decode(&items, req.tokenizer, req.allocation, Keep::Start),
        };
        label.append(cut);
        (label, tokens)
    }

    /// A space after every file's context and a line break before the class line even when
    /// there is no class; both count in the tokens kept.
    fn close_files(&self, text: &mut SourcedText, req: &HoleRequest) {
        text.push_plain(" ");
        if !push_current_class(text, req) {
            text.push_plain("\n");
        }
    }

    /// As RLPG's main loop sends it: the context whole, the separator its rule configuration
    /// names (`space` for post lines, else `newline`), the default context sized from the
    /// context's own count (`rule_prompt_len`), the joined text cut to the budget.
    fn assembly(&self, context_type: ContextType, counted: Option<usize>) -> Assembly {
        let separator = match context_type {
            ContextType::PostLines => " ",
            _ => "\n",
        };
        counted.map_or(Assembly::Capped, |counted| Assembly::RlpgMainLoop {
            counted,
            separator,
        })
    }

    /// Method names are the names alone (the `all_method_name` capture); identifiers are every
    /// identifier, then every type identifier (`parse_tree.py` extends the identifier list in
    /// place); item texts are sliced as its `get_string` slices them.
    fn item_spans(&self, source: &SourceFile, context_type: ContextType) -> Vec<Span> {
        let facts = &source.facts;
        let spans = match context_type {
            ContextType::MethodNames => facts.methods.iter().map(|m| m.name).collect(),
            ContextType::Identifiers => [
                facts.identifiers.as_slice(),
                facts.type_identifiers.as_slice(),
            ]
            .concat(),
            _ => fact_spans(source, context_type),
        };
        spans
            .into_iter()
            .map(|s| rlpg_files::attribute_span(source, s))
            .collect()
    }

    /// From the start of the line where the body opens to its end when that is the line of the
    /// method's name, else the name's line alone (its `method_body[0][0] == method_name[0][0]`
    /// match).
    fn method_text(&self, source: &SourceFile, method: &MethodDecl) -> Span {
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

    /// Keeps the end, as it cuts every text with its default `type='back'`; it reuses the
    /// variable, so each method's share is what the one before it got.
    fn cut_body(
        &self,
        body: &SourcedText,
        tokenizer: &dyn Tokenizer,
        share: usize,
    ) -> (SourcedText, usize, usize) {
        let (cut, tokens) = rlpg_files::cut_and_decode(body, tokenizer, share, Keep::End);
        (cut, tokens, tokens)
    }
}
