//! The code profile (`--fidelity code`): RLPG's proposals exactly as its published code builds
//! them (`parse_tree.py`, `context.py`, `generate_completions.py`), quirks included, and
//! RepoCoder's prompt as its code (`_build_prompt`) builds it. One row per rule, each saying
//! which line of the authors' code it follows; [`crate::context::fidelity`] lists them in words.
//! Its file lists and text readings live in [`crate::context::rlpg_files`].

use super::{
    BlockBudget, BodyShare, ClassLine, Cutting, Identifiers, ItemText, MethodNames, MethodText,
    Rules, WindowOrder, WindowRules,
};
use crate::context::rlpg_files;
use crate::token::Keep;

/// The blocks' budget in RepoCoder's code: 2,000 Codex tokens, half of Codex's context.
pub const BLOCK_BUDGET: usize = 2000;

/// The authors' code's reading.
pub static RULES: Rules = Rules {
    // As `parse_tree.py` and `context.py` compute them; the current file is not kept out of the
    // import-of lists.
    rank_files: rlpg_files::rank_files,
    // A superclass written as a bare type identifier, in the last other file declaring a class
    // of that name (`get_parent_class_filename`).
    parents: rlpg_files::parents,
    // The names alone (the `all_method_name` capture of `parse_tree.py`).
    method_names: MethodNames::Names,
    // Every identifier, then every type identifier (`parse_tree.py` extends the identifier
    // list in place).
    identifiers: Identifiers::WithTypeIdentifiers,
    // Sliced as its `get_string` slices them: byte columns read as characters, then stripped.
    item_text: ItemText::RlpgSlice,
    // The body's lines from the name's line (its `method_body[0][0] == method_name[0][0]`
    // match).
    method_text: MethodText::RlpgLines,
    // An item ending right at the hole is after it (`end_char < hole_char`).
    item_ending_at_hole_is_before: false,
    // A parent class's context is cut from the front (`type='back'`).
    parent_keep: Keep::End,
    // Every text is cut with its default `type='back'`.
    body_keep: Keep::End,
    // It reuses the variable, so each method's share is what the one before it got.
    body_share: BodyShare::PreviousTokens,
    // Every text cut to its allocation and decoded, counted as `len(truncated_codex_tokens)`;
    // the context sent whole by the main loop (`generate_completions.py`), the default context
    // sized by `rule_prompt_len`.
    cutting: Cutting::RlpgCode,
    // Classes only (its `class_declaration` query).
    class_line: ClassLine::Classes,
    // The authors' code adds a bare `[FileName]`.
    keeps_empty_file_labels: true,
    // A space after every file's context and a line break before the class line even when
    // there is no class; both count in the tokens kept.
    pads_file_list: true,
    // RepoCoder's blocks as its code (`_build_prompt`) builds them: Python comments, a 2,000
    // Codex-token budget of their own with the header counted as 20 tokens, repeated lines
    // kept, its window list's order, `metadata[0]` shown, and windows joined and split again.
    windows: WindowRules {
        comment: Some("# "),
        budget: BlockBudget::Fixed {
            tokens: BLOCK_BUDGET,
            header_tokens: 20,
        },
        skips_repeated_code: false,
        order: WindowOrder::RepoCoder,
        shows_first_place: true,
        splits_windows_again: true,
    },
};
