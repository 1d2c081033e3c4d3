//! The two readings of RLPG's proposals and RepoCoder's prompts, as data: where the paper's text
//! and its authors' published code build a context differently, the algorithms
//! ([`super::proposals`] with its `items`, and [`super::windows`]) read the chosen
//! profile's [`Rules`]. Each profile is one table: [`paper::RULES`] and [`code::RULES`], a row
//! per rule saying which source it follows. [`Fidelity`] names the profile a person chose.

pub mod code;
pub mod paper;

use super::HoleRequest;
use super::SourcedText;
use super::fidelity::Fidelity;
use super::rlpg_files;
use crate::candidate::PromptSource;
use crate::repo::{FileId, ParentLink, RepoIndex};
use crate::token::{Keep, Tokenizer};

/// How a profile builds RLPG's proposal contexts and RepoCoder's prompts where the papers and
/// their authors' code differ. What every proposal takes (a prompt source crossed with a
/// context type) and their ids are the same in both (see [`crate::candidate::proposal_specs`]).
pub struct Rules {
    // ----- Where a source looks
    /// The files a multi-file prompt source offers, best first (Table 6).
    pub rank_files: fn(PromptSource, &HoleRequest) -> Vec<FileId>,
    /// The parent classes of the classes declared in a file (the Parent Class source).
    pub parents: fn(&RepoIndex, FileId) -> Vec<ParentLink>,

    // ----- What a file's items are
    /// What a method-names item (MN) is.
    pub method_names: MethodNames,
    /// What the identifiers (I) of a file are.
    pub identifiers: Identifiers,
    /// How an item's text is taken from its span.
    pub item_text: ItemText,
    /// The text of a method in a method-bodies context (MNB).
    pub method_text: MethodText,

    // ----- Which items survive, and how texts are cut
    /// Whether an item of the current file ending right at the hole counts as before it.
    pub item_ending_at_hole_is_before: bool,
    /// Which end of a parent class's context survives a cut.
    pub parent_keep: Keep,
    /// Which end of a method body survives a cut.
    pub body_keep: Keep,
    /// How many tokens each method body of a method-bodies context gets.
    pub body_share: BodyShare,
    /// Who cuts a proposal's texts, and how a proposal's context makes a prompt.
    pub cutting: Cutting,

    // ----- How a context is laid out
    /// Which types the `[CurrentClass]` line can name.
    pub class_line: ClassLine,
    /// Whether a file without items still shows its `[FileName]` label in a multi-file context.
    pub keeps_empty_file_labels: bool,
    /// Whether a multi-file context ends with a space, and with a line break where there is no
    /// class line.
    pub pads_file_list: bool,

    // ----- RepoCoder
    /// How RepoCoder's prompt is made of retrieved windows.
    pub windows: WindowRules,
}

impl Rules {
    /// How RepoCoder's prompt is made of retrieved windows.
    pub fn windows(&self) -> &WindowRules {
        &self.windows
    }
}

/// What a method-names item (MN) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodNames {
    /// The whole signature.
    Signatures,
    /// The name alone.
    Names,
}

/// What the identifiers (I) of a file are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identifiers {
    /// Its identifiers.
    Identifiers,
    /// Its identifiers, then its type identifiers.
    WithTypeIdentifiers,
}

/// How an item's text is taken from its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemText {
    /// The span's bytes.
    Span,
    /// As RLPG's `get_string` slices it ([`rlpg_files::attribute_span`]).
    RlpgSlice,
}

/// The text of a method in a method-bodies context (MNB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodText {
    /// The whole declaration, from its signature.
    Declaration,
    /// The lines RLPG's code takes ([`rlpg_files::method_lines`]).
    RlpgLines,
}

/// How many tokens each method body of a method-bodies context gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyShare {
    /// An equal share of the allocation each.
    Equal,
    /// The first an equal share, each later one the tokens the one before it kept.
    PreviousTokens,
}

/// Who cuts a proposal's texts, and how a proposal's context makes a prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cutting {
    /// keyhole's composer: a single file's context is sent whole for the composer to cut to its
    /// allocation, the default context given what it leaves (section 2.3); a file of a
    /// multi-file context is cut with its label; method bodies are cut to their share.
    Composer,
    /// RLPG's main loop: every text (each context, each file's context without its label, each
    /// method body) is cut to its allocation and decoded ([`rlpg_files::cut_and_decode`]), its
    /// tokens counted; the context is sent whole with the separator its rule names and the
    /// default context sized from that count ([`crate::compose::Assembly::RlpgMainLoop`]).
    RlpgCode,
}

impl Cutting {
    /// `text` cut to `max_tokens` from the `keep` end, and the tokens it counts.
    pub fn cut(
        self,
        text: &SourcedText,
        tokenizer: &dyn Tokenizer,
        max_tokens: usize,
        keep: Keep,
    ) -> (SourcedText, usize) {
        match self {
            Cutting::Composer => text.truncate(tokenizer, max_tokens, keep),
            Cutting::RlpgCode => rlpg_files::cut_and_decode(text, tokenizer, max_tokens, keep),
        }
    }
}

/// Which types the `[CurrentClass]` line can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassLine {
    /// Classes, interfaces, enums and records.
    AnyType,
    /// Classes only.
    Classes,
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
    pub(crate) fn rules(self) -> &'static Rules {
        match self {
            Fidelity::Paper => &paper::RULES,
            Fidelity::Code => &code::RULES,
        }
    }
}
