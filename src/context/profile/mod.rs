//! The two readings of RLPG's proposals side by side: where the paper's text and its authors'
//! published code build a proposal's context differently, the algorithm in
//! [`super::proposals`] asks the profile ([`Profile`]); the paper profile ([`paper`]) and the
//! code profile ([`code`]) each answer in one file. [`Fidelity`] names the profile a person
//! chose.

pub mod code;
pub mod paper;

use super::HoleRequest;
use super::SourcedText;
use super::fidelity::Fidelity;
use crate::candidate::{ContextType, PromptSource};
use crate::compose::Assembly;
use crate::lang::{MethodDecl, Span, TypeKind};
use crate::repo::{FileId, ParentLink, RepoIndex, SourceFile};
use crate::token::{Keep, Tokenizer};

/// How a profile builds RLPG's proposal contexts and RepoCoder's prompts where the papers and
/// their authors' code differ.
pub trait Profile: Sync {
    /// How RepoCoder's prompt is made of retrieved windows.
    fn windows(&self) -> &'static WindowRules;

    /// The current file's context as gathered (`before`: from before the hole), as the
    /// profile finishes it, and its tokens where the profile counts them as RLPG's code does.
    fn finish_current(
        &self,
        text: SourcedText,
        before: bool,
        req: &HoleRequest,
    ) -> (SourcedText, Option<usize>);

    /// Whether an item of the current file ending at byte `end` is before the hole.
    fn ends_before_hole(&self, end: usize, hole_offset: usize) -> bool;

    /// The parent classes of the classes declared in `file`.
    fn parents(&self, index: &RepoIndex, file: FileId) -> Vec<ParentLink>;

    /// Which end of a parent class's context survives a cut.
    fn parent_keep(&self) -> Keep;

    /// A parent class's items as the profile cuts them (`counted`: method bodies, cut one by
    /// one, with their tokens), and their tokens where the profile counts them as RLPG's code
    /// does.
    fn finish_parent_items(
        &self,
        items: SourcedText,
        counted: Option<usize>,
        keep: Keep,
        req: &HoleRequest,
    ) -> (SourcedText, Option<usize>);

    /// Whether the `[CurrentClass]` line can name a type of `kind`.
    fn names_in_class_line(&self, kind: TypeKind) -> bool;

    /// The files a multi-file `source` takes context from, best first.
    fn rank_files(&self, source: PromptSource, req: &HoleRequest) -> Vec<FileId>;

    /// A file's items of `context_type` for a multi-file source, and the tokens they count
    /// where the profile counts them itself (method bodies cut one by one).
    fn file_context(
        &self,
        req: &HoleRequest,
        file: FileId,
        context_type: ContextType,
    ) -> (SourcedText, Option<usize>);

    /// Whether a file without items still shows its `[FileName]` label.
    fn keeps_empty_file_labels(&self) -> bool;

    /// A file's part of a multi-file context: its `label` followed by its `items` (whose
    /// tokens are `counted` where known), cut to the allocation; and the tokens the part
    /// counts towards filling it.
    fn file_part(
        &self,
        label: SourcedText,
        items: SourcedText,
        counted: Option<usize>,
        req: &HoleRequest,
    ) -> (SourcedText, usize);

    /// What follows a multi-file context's files: the class line and the separators.
    fn close_files(&self, text: &mut SourcedText, req: &HoleRequest);

    /// A file's items of `context_type`: spans of the text (not post lines).
    fn item_spans(&self, source: &SourceFile, context_type: ContextType) -> Vec<Span>;

    /// The text of a method in a method-bodies context.
    fn method_text(&self, source: &SourceFile, method: &MethodDecl) -> Span;

    /// How a proposal's context of `context_type` makes a prompt with the default context,
    /// given the context's tokens where the profile counted them (`counted`).
    fn assembly(&self, context_type: ContextType, counted: Option<usize>) -> Assembly;

    /// A method body cut to `share` tokens, its tokens, and the next method's share.
    fn cut_body(
        &self,
        body: &SourcedText,
        tokenizer: &dyn Tokenizer,
        share: usize,
    ) -> (SourcedText, usize, usize);
}

/// How a profile builds RepoCoder's prompt from retrieved windows (see [`super::windows`]).
#[derive(Debug)]
pub struct WindowRules {
    /// What every line of a block starts with; `None`: a line comment of the hole's language
    /// and a space.
    pub comment: Option<&'static str>,
    /// What the blocks are counted against.
    pub budget: BlockBudget,
    /// Whether a block showing the same lines as one already taken is left out.
    pub skips_repeated_code: bool,
    /// The order of tied windows and of a window's places.
    pub order: WindowOrder,
    /// Whether a block shows its window's first place even where that is in the hole's file
    /// (else the first place outside it, which made the window retrievable).
    pub shows_first_place: bool,
    /// Whether a later iteration's block leaves out its window's last line when that line is
    /// empty.
    pub splits_windows_again: bool,
}

/// What RepoCoder's blocks are counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockBudget {
    /// The candidate's allocation in the budget's tokenizer; the joined blocks fit it whole.
    Allocation,
    /// A budget of its own in Codex's tokenizer: blocks taken while the running total stays
    /// strictly below `tokens`, the header counted as `header_tokens` whatever it holds.
    Fixed { tokens: usize, header_tokens: usize },
}

/// The order of tied windows and of a window's places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowOrder {
    /// File path and line order; of tied windows the earlier first.
    Path,
    /// RepoCoder's window list (files as `glob` lists them); of tied windows the later first.
    RepoCoder,
}

impl Fidelity {
    /// The rules of this profile.
    pub fn rules(self) -> &'static dyn Profile {
        match self {
            Fidelity::Paper => &paper::Paper,
            Fidelity::Code => &code::Code,
        }
    }
}

/// A file's items of `context_type` as its facts list them, the way both profiles read them
/// unless they say otherwise: method names are whole signatures.
pub(super) fn fact_spans(source: &SourceFile, context_type: ContextType) -> Vec<Span> {
    let facts = &source.facts;
    match context_type {
        ContextType::Identifiers => facts.identifiers.clone(),
        ContextType::TypeIdentifiers => facts.type_identifiers.clone(),
        ContextType::FieldDeclarations => facts.field_declarations.clone(),
        ContextType::StringLiterals => facts.string_literals.clone(),
        ContextType::MethodNames => facts.methods.iter().map(|m| m.signature).collect(),
        ContextType::MethodNamesAndBodies => facts.methods.iter().map(|m| m.with_body).collect(),
        ContextType::PostLines => Vec::new(),
    }
}
