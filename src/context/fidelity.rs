//! Which authority keyhole follows where a paper's text and its authors' published code
//! disagree: `--fidelity paper` (the default) or `--fidelity code`.
//!
//! Both profiles follow RepoCoder's code (microsoft/CodeT, folder `RepoCoder`) wherever its
//! paper is silent: Jaccard over sets of Codex (`p50k_base`) token ids, no window of the hole's
//! own file, the 20 whole lines before the hole's line as the first query, a head window of a
//! file's first 10 lines, identical windows merged with all their paths, the 20 best windows
//! kept, iteration-1 blocks extended 10 lines down (see [`super::windows`]).
//!
//! Each profile's rules live in one file, side by side: [`super::profile::paper`] and
//! [`super::profile::code`]. What [`Fidelity::Code`] changes, each as the authors' code does
//! it:
//!
//! RLPG (shrivastavadisha/repo_level_prompt_generation)
//! - Hole column: `int(len(stripped) / 2)` characters into the *unstripped* line
//!   (`create_hole_data.py`), so many holes sit in the indentation; the paper (section 2.2)
//!   says the middle of the line, which keyhole takes as the middle of the trimmed line.
//! - Method names (MN): the names alone (the `all_method_name` capture of `parse_tree.py`); the
//!   paper's appendix B.2 example shows whole signatures.
//! - Identifiers (I): every identifier, then every type identifier (`parse_tree.py` extends
//!   the identifier list in place with the type identifiers).
//! - Imports: single-type import declarations only, resolved by path and kept only when the
//!   name is used again; keyhole also counts wildcard imports and same-package references.
//! - File choice and order for the multi-file sources (imports, siblings, similar names,
//!   children and the import-of sources): as `parse_tree.py` and `context.py` compute them,
//!   file-system order included (see [`super::rlpg_files`] and [`crate::repo::listing`]); the
//!   current file is not kept out of the import-of lists.
//! - Multi-file layout: a bare `[FileName]` for a file without context, each file's context cut
//!   and counted without its label, a space after the last context and a line break even when
//!   there is no class line; the class line names classes only (not enums or interfaces).
//! - Method names and bodies (MNB): each method from the start of the line where its body opens
//!   (or its name's line alone when the body opens on another line), cut to keep its *end*,
//!   each method's share being what the one before it got (a reused variable); the paper
//!   profile keeps the start of each whole declaration within an equal share.
//!
//! RepoCoder
//! - Block lines are commented out with `# ` (its prompts are Python) instead of Java's `// `.
//! - The blocks are chosen in a budget of their own: 2,000 Codex tokens, the header counted as
//!   20 tokens whatever the tokenizer says, a block taken while the running total stays
//!   strictly below the budget (`_build_prompt`); the paper profile fits them to half of
//!   keyhole's budget in the budget's tokenizer.
//! - Blocks are never left out for showing the same lines as a block already taken (two
//!   extended windows at the end of a file can show the same lines); the paper profile keeps
//!   one.
//! - A block shows the lines of the window's first place (`metadata[0]`), even when that place
//!   is in the hole's file and only a copy elsewhere made the window retrievable; the paper
//!   profile shows the copy's lines.
//! - A later iteration's block (candidate 67's) leaves out its window's last line when that
//!   line is empty, as RepoCoder's code loses it joining the window's lines and splitting them
//!   again; the paper profile shows the whole window.
//! - Windows and their places are ordered as RepoCoder's window list (files as `glob` lists
//!   them, in file-system order), and of tied windows the later comes first; the paper profile
//!   orders by path.
//!
//! - Every text RLPG's code cuts (each context, each file's context, each method body) is cut
//!   to its allocation and then decoded the way transformers' GPT-2 tokenizer decoded in 2022,
//!   deleting the space before `.`, `,`, `!`, `?` and some contractions (`a != b` becomes
//!   `a!= b`).
//!
//! - A parent class's context is cut to keep its end (its `type='back'`); the paper profile
//!   keeps its start.
//! - Parents: a class's superclass must be written as a bare type identifier, and its file is
//!   the last other file (in `os.walk` order) declaring a class of that name; children follow
//!   from that. Both profiles otherwise resolve parents through imports and packages.
//! - CRLF is read as LF (Python's universal newlines) in every text RLPG's code cuts, the
//!   default context (the code before the hole) included; that context starts at the file's
//!   first line not starting with `/` or `*` and is decoded with its tokenizer's clean-up
//!   (see [`crate::compose::DefaultReading`]).
//! - Proposal ids 5 and 6 are numbered as RLPG's code numbers them (5 is `current PL 50%`,
//!   6 `current PL 25%`; Table 7 has them the other way round): in `--id`, `--candidates`,
//!   label files, reports and the UI (see [`crate::candidate::Numbering`]).
//! - Item texts are sliced as RLPG's `get_string` slices them: tree-sitter's byte columns read
//!   as character indices, items stripped of surrounding whitespace.
//!
//! - The per-file cache of RLPG's `get_relevant_files`, which lets the earlier holes of a file
//!   change a later hole's siblings, similar names and children, is replayed over the hole
//!   lines above the hole (see [`super::rlpg_files`]).
//! - An item of the current file is before the hole only when it ends before it
//!   (`end_char < hole_char`).
//!
//! - Each proposal's prompt is assembled as RLPG's main loop (`generate_completions.py`)
//!   assembles it (see [`crate::compose::Assembly::RlpgMainLoop`]): the rule context whole,
//!   the rule's separator (a space for post lines), the default context sized from RLPG's
//!   `rule_prompt_len` (labels left out, counted before the clean-up, a cut text counting all
//!   its allowed tokens), the joined text cut to its last tokens within the budget and
//!   decoded again; the paper profile cuts the context to its allocation and gives the default
//!   context what is left (section 2.3). On 6,087 prompts of six repositories, all equal to
//!   RLPG's (EVALUATION.md).
//!
//! - Candidate 62 (the default context alone) is sent as RLPG's `codex` mode sends it: after
//!   a space, the whole cut again to the budget (without it, 13 of 180 holes differed beyond
//!   whitespace: the space merges with the first token and the cut drops a few more).
//!
//! Not reproduced: the order of RepoCoder's equally scored windows, which its own runs leave
//! to the order its process pool finishes (`as_completed`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::candidate::Numbering;
use crate::compose::DefaultReading;
use crate::hole::HoleColumn;

/// Which authority keyhole follows where a paper and its published code disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// The papers' text where text and code disagree; keyhole's judgment where both are silent
    /// or where a quirk would mislead (Java same-package references count as imports).
    #[default]
    Paper,
    /// Exactly what the authors' published code builds, quirks included.
    Code,
}

impl Fidelity {
    pub const ALL: [Fidelity; 2] = [Fidelity::Paper, Fidelity::Code];

    /// Where sampled holes sit in their lines.
    pub fn hole_column(self) -> HoleColumn {
        match self {
            Fidelity::Paper => HoleColumn::TrimmedMiddle,
            Fidelity::Code => HoleColumn::RlpgCode,
        }
    }

    /// How the default context reads the hole's file.
    pub fn default_reading(self) -> DefaultReading {
        match self {
            Fidelity::Paper => DefaultReading::AsWritten,
            Fidelity::Code => DefaultReading::RlpgCode,
        }
    }

    /// How ids are numbered to people: Table 7's, or RLPG's code's (post lines 5 and 6
    /// swapped).
    pub fn numbering(self) -> Numbering {
        match self {
            Fidelity::Paper => Numbering::Table7,
            Fidelity::Code => Numbering::RlpgCode,
        }
    }

    /// Whether this is the paper profile (the default, which files leave unsaid).
    pub fn is_paper(&self) -> bool {
        *self == Fidelity::Paper
    }

    pub fn name(self) -> &'static str {
        match self {
            Fidelity::Paper => "paper",
            Fidelity::Code => "code",
        }
    }
}

impl FromStr for Fidelity {
    type Err = UnknownFidelity;
    fn from_str(s: &str) -> Result<Self, UnknownFidelity> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFidelity(s.to_string()))
    }
}

/// A profile name keyhole does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown fidelity '{0}' (known: {known})",
    known = Fidelity::ALL.map(Fidelity::name).join(", ")
)]
pub struct UnknownFidelity(pub String);
