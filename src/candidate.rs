//! The candidate catalogue: every context keyhole can put before a hole, described once.
//!
//! Ids 0–61 are RLPG's prompt proposals in Table 7's order (a prompt source crossed with a
//! context type), 62 is the default context (the code before the hole alone), 63–72 are the
//! retrieved candidates of later work. Help texts, report method names, the UI's columns, JSON
//! fields, id checks and evaluation row counts all read this table; no other module types an id
//! range.

use std::fmt;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::token::Keep;

/// A candidate's id, 0–72. Serialized as the bare number (label files and picks store it so).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "usize", into = "usize")]
pub struct CandidateId(u8);

impl CandidateId {
    /// How many candidates there are.
    pub const COUNT: usize = 73;
    /// RLPG's proposals are the ids below this one.
    pub const PROPOSALS: usize = 62;
    /// Table 7's "Codex": the code before the hole, no proposal.
    pub const DEFAULT: CandidateId = CandidateId(62);
    /// RLPG's file-level BM25 baseline.
    pub const FILE_BM25: CandidateId = CandidateId(63);
    /// RLPG's identifier-usage baseline.
    pub const IDENTIFIER_USAGE: CandidateId = CandidateId(64);
    /// RLPG's random-context baseline.
    pub const RANDOM_CONTEXT: CandidateId = CandidateId(65);
    /// RepoCoder's first iteration: retrieval by the code before the hole.
    pub const REPOCODER: CandidateId = CandidateId(66);
    /// RepoCoder's later iteration: retrieval by the code and the previous completion.
    pub const REPOCODER_ITERATION: CandidateId = CandidateId(67);
    /// ProCC's lexical semantics perspective.
    pub const LEXICAL: CandidateId = CandidateId(68);
    /// ProCC's hypothetical line perspective.
    pub const HYPOTHETICAL_LINE: CandidateId = CandidateId(69);
    /// ProCC's code summarization perspective.
    pub const SUMMARY: CandidateId = CandidateId(70);
    /// ChatLSP's typed-hole context: the expected type's definitions.
    pub const TYPED_TYPES: CandidateId = CandidateId(71);
    /// ChatLSP's typed-hole context: headers of what produces the expected type.
    pub const TYPED_HEADERS: CandidateId = CandidateId(72);
    /// The prompt an editor plugin sent, recorded by `keyhole proxy` (`Family::Recorded`). It
    /// stands outside the catalogue: it exists only for a recorded request's hole, no one types
    /// its number, and `all()`, selections and evaluation never see it.
    pub const AS_SENT: CandidateId = CandidateId(Self::COUNT as u8);
    /// The prompt `keyhole proxy --compose` sent in place of the plugin's (`Family::Recorded`),
    /// shown beside [`Self::AS_SENT`] for a composed request; outside the catalogue as it is.
    pub const SENT_BY_KEYHOLE: CandidateId = CandidateId(Self::COUNT as u8 + 1);
    /// The first retrieved candidate.
    pub const FIRST_RETRIEVED: CandidateId = CandidateId::FILE_BM25;
    /// The candidates that need the backend to write something first.
    pub const NEED_BACKEND: [CandidateId; 3] = [
        CandidateId::REPOCODER_ITERATION,
        CandidateId::HYPOTHETICAL_LINE,
        CandidateId::SUMMARY,
    ];
    /// ProCC's arms, in the order of its bandit's features.
    pub const PROCC: [CandidateId; 3] = [
        CandidateId::LEXICAL,
        CandidateId::HYPOTHETICAL_LINE,
        CandidateId::SUMMARY,
    ];

    /// The candidate with number `n`, if there is one.
    pub const fn new(n: usize) -> Option<CandidateId> {
        if n < Self::COUNT {
            Some(CandidateId(n as u8))
        } else {
            None
        }
    }

    /// The candidate with number `n`, for ids known to exist (constants, tests); panics on a
    /// number out of range.
    pub const fn nth(n: usize) -> CandidateId {
        match CandidateId::new(n) {
            Some(id) => id,
            None => panic!("candidate ids run from 0 to 72"),
        }
    }

    /// Every id in order.
    pub fn all() -> impl Iterator<Item = CandidateId> {
        (0..Self::COUNT as u8).map(CandidateId)
    }

    /// The ids of RLPG's candidates: the 62 proposals and the default context.
    pub fn rlpg() -> impl Iterator<Item = CandidateId> {
        (0..=Self::DEFAULT.0).map(CandidateId)
    }

    /// The retrieved candidates, 63–72.
    pub fn retrieved() -> impl Iterator<Item = CandidateId> {
        (Self::FIRST_RETRIEVED.0..Self::COUNT as u8).map(CandidateId)
    }

    /// The number, for indexing tables laid out in id order.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// This candidate's entry in the catalogue ([`recorded_info`] for a recorded prompt).
    pub fn info(self) -> &'static CandidateInfo {
        catalogue()
            .get(self.index())
            .unwrap_or_else(|| recorded_info(self))
    }

    /// Whether it is a prompt recorded by `keyhole proxy` ([`Self::AS_SENT`],
    /// [`Self::SENT_BY_KEYHOLE`]), sent as it was: never composed again nor learnt from.
    pub fn is_recorded(self) -> bool {
        self.index() >= Self::COUNT
    }

    /// `import MNB`, `default context`, `RepoCoder`: how people know it.
    pub fn label(self) -> &'static str {
        &self.info().label
    }

    pub fn family(self) -> Family {
        self.info().family
    }

    /// Whether the backend must write something before the candidate can be built.
    pub fn needs_backend(self) -> bool {
        Self::NEED_BACKEND.contains(&self)
    }

    /// The proposal's spec, for ids 0–61.
    pub fn proposal(self) -> Option<ProposalSpec> {
        proposal_specs().get(self.index()).copied()
    }
}

/// The default context: what a prompt holds when no other candidate applies.
impl Default for CandidateId {
    fn default() -> CandidateId {
        CandidateId::DEFAULT
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Ids compare with plain numbers, as people and tests write them.
impl PartialEq<usize> for CandidateId {
    fn eq(&self, n: &usize) -> bool {
        self.index() == *n
    }
}

impl From<CandidateId> for usize {
    fn from(id: CandidateId) -> usize {
        id.index()
    }
}

impl TryFrom<usize> for CandidateId {
    type Error = SelectionError;

    fn try_from(n: usize) -> Result<CandidateId, SelectionError> {
        CandidateId::new(n).ok_or(SelectionError::NoSuchId(n))
    }
}

/// Why candidate ids or a [`Selection`] cannot be read; each names the part that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    #[error("{0} is not a candidate id ({range})", range = id_range())]
    NoSuchId(usize),
    #[error("'{0}' is not a candidate id ({range})", range = id_range())]
    NotANumber(String),
    #[error("'{0}': top:N takes N from 1 to {max}", max = CandidateId::PROPOSALS + 1)]
    BadTop(String),
    #[error("'{0}' is an empty range")]
    EmptyRange(String),
    #[error("'{0}' has an empty entry")]
    EmptyEntry(String),
}

/// How a profile numbers RLPG's proposals where Table 7 and RLPG's code disagree: the post
/// lines of the current file. Every number people type or read (`--id`, label files, reports,
/// the UI) goes through the run's numbering; everything inside keyhole uses the catalogue's
/// ids, which are Table 7's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Numbering {
    /// Table 7 of the paper: 5 is `current PL 25%`, 6 is `current PL 50%`.
    #[default]
    Table7,
    /// RLPG's code (`utils.py`'s `combined_to_index`, which its released data uses): the
    /// post-line ratios in `rule_config.py`'s order 0.5, 0.25, 0.75, so 5 is `current PL 50%`
    /// and 6 is `current PL 25%`.
    RlpgCode,
}

impl Numbering {
    /// The catalogue ids this numbering gives other numbers: Table 7's 5 and 6, swapped.
    const RLPG_CODE_SWAP: (usize, usize) = (5, 6);

    /// The number this numbering gives candidate `id`.
    pub fn number(self, id: CandidateId) -> usize {
        match self {
            Numbering::Table7 => id.index(),
            Numbering::RlpgCode => swap(id.index(), Self::RLPG_CODE_SWAP),
        }
    }

    /// The candidate this numbering calls `number`, if there is one.
    pub fn id(self, number: usize) -> Option<CandidateId> {
        match self {
            Numbering::Table7 => CandidateId::new(number),
            Numbering::RlpgCode => CandidateId::new(swap(number, Self::RLPG_CODE_SWAP)),
        }
    }

    /// The candidate a person means by `typed`, a number parsed as it was typed (`--id 5`).
    pub fn typed(self, typed: CandidateId) -> CandidateId {
        self.id(typed.index())
            .expect("both numberings number the same range")
    }
}

fn swap(n: usize, (a, b): (usize, usize)) -> usize {
    if n == a {
        b
    } else if n == b {
        a
    } else {
        n
    }
}

/// `0-72`: the ids, as help texts and errors name them.
pub fn id_range() -> String {
    format!("0-{}", CandidateId::COUNT - 1)
}

/// What the ids are, for help texts and errors: `proposals 0-61, the default context 62,
/// retrieved 63-72`.
pub fn id_kinds() -> String {
    format!(
        "proposals 0-{}, the default context {}, retrieved {}-{}",
        CandidateId::PROPOSALS - 1,
        CandidateId::DEFAULT,
        CandidateId::FIRST_RETRIEVED,
        CandidateId::COUNT - 1
    )
}

impl std::str::FromStr for CandidateId {
    type Err = NotACandidateId;

    fn from_str(text: &str) -> Result<CandidateId, NotACandidateId> {
        text.trim()
            .parse::<usize>()
            .ok()
            .and_then(CandidateId::new)
            .ok_or_else(|| NotACandidateId(text.to_string()))
    }
}

/// A text that is no candidate's id (`--id`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "candidate ids run from 0 to {last}: {kinds}",
    last = CandidateId::COUNT - 1,
    kinds = id_kinds()
)]
pub struct NotACandidateId(pub String);

/// Which kind of candidate it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// One of RLPG's 62 prompt proposals.
    Proposal,
    /// The code before the hole alone.
    Default,
    /// Retrieved by a search of the repository (RLPG's baselines, RepoCoder, ProCC).
    Retrieved,
    /// Static context of the hole's expected type (ChatLSP).
    Typed,
    /// The prompt an editor plugin sent for the hole ([`CandidateId::AS_SENT`]).
    Recorded,
}

/// Where a proposal takes its context from (RLPG's prompt sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSource {
    Current,
    ParentClass,
    Import,
    Sibling,
    SimilarName,
    ChildClass,
    ImportOfSibling,
    ImportOfSimilarName,
    ImportOfParentClass,
    ImportOfChildClass,
}

impl PromptSource {
    pub fn name(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::ParentClass => "parent_class",
            Self::Import => "import",
            Self::Sibling => "sibling",
            Self::SimilarName => "similar_name",
            Self::ChildClass => "child_class",
            Self::ImportOfSibling => "import_of_sibling",
            Self::ImportOfSimilarName => "import_of_similar_name",
            Self::ImportOfParentClass => "import_of_parent_class",
            Self::ImportOfChildClass => "import_of_child_class",
        }
    }

    /// Truncation per appendix B.3. Its two sentences disagree about Current; the authors'
    /// code settles it: Current (post lines and the other types, taken after the hole) keeps
    /// its beginning. Parent Class keeps its beginning too (the code profile keeps its end, as
    /// the authors' code does); every other source keeps its end, and since files are laid out
    /// best-ranked last (as in the authors' code), the lowest-ranked files go first.
    pub fn keep(self) -> Keep {
        match self {
            Self::Current | Self::ParentClass => Keep::Start,
            _ => Keep::End,
        }
    }
}

/// What a proposal takes from its source (RLPG's prompt context types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ContextType {
    #[serde(rename = "PL")]
    PostLines,
    #[serde(rename = "I")]
    Identifiers,
    #[serde(rename = "TI")]
    TypeIdentifiers,
    #[serde(rename = "FD")]
    FieldDeclarations,
    #[serde(rename = "SL")]
    StringLiterals,
    #[serde(rename = "MN")]
    MethodNames,
    #[serde(rename = "MNB")]
    MethodNamesAndBodies,
}

impl ContextType {
    pub fn abbreviation(self) -> &'static str {
        match self {
            Self::PostLines => "PL",
            Self::Identifiers => "I",
            Self::TypeIdentifiers => "TI",
            Self::FieldDeclarations => "FD",
            Self::StringLiterals => "SL",
            Self::MethodNames => "MN",
            Self::MethodNamesAndBodies => "MNB",
        }
    }

    /// What the abbreviation stands for, for legends.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::PostLines => "post lines: the lines after the hole",
            Self::Identifiers => "identifiers",
            Self::TypeIdentifiers => "type identifiers",
            Self::FieldDeclarations => "field declarations",
            Self::StringLiterals => "string literals",
            Self::MethodNames => "method names",
            Self::MethodNamesAndBodies => "method names and bodies",
        }
    }
}

/// One of RLPG's 62 proposals.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ProposalSpec {
    pub id: CandidateId,
    pub source: PromptSource,
    pub context_type: ContextType,
    /// Share of the total budget allocated to the proposal context (B.4: 0.5, or 0.25/0.5/0.75
    /// for post lines).
    pub share: f64,
}

impl ProposalSpec {
    /// `import MNB`, `current PL 25%`: how the proposal is named to people.
    pub fn label(&self) -> String {
        let base = format!(
            "{} {}",
            self.source.name(),
            self.context_type.abbreviation()
        );
        match self.context_type {
            ContextType::PostLines => format!("{base} {}%", (self.share * 100.0).round()),
            _ => base,
        }
    }
}

/// The six context types every source but Current offers, in Table 7's order.
const OTHER_TYPES: [ContextType; 6] = [
    ContextType::MethodNamesAndBodies,
    ContextType::MethodNames,
    ContextType::Identifiers,
    ContextType::TypeIdentifiers,
    ContextType::StringLiterals,
    ContextType::FieldDeclarations,
];

const OTHER_SOURCES: [PromptSource; 9] = [
    PromptSource::ParentClass,
    PromptSource::Import,
    PromptSource::Sibling,
    PromptSource::SimilarName,
    PromptSource::ChildClass,
    PromptSource::ImportOfSibling,
    PromptSource::ImportOfSimilarName,
    PromptSource::ImportOfParentClass,
    PromptSource::ImportOfChildClass,
];

/// All 62 proposals in Table 7's order; `proposal_specs()[n].id.index() == n`.
pub fn proposal_specs() -> &'static [ProposalSpec] {
    static SPECS: LazyLock<Vec<ProposalSpec>> = LazyLock::new(|| {
        use ContextType::*;
        let mut all = Vec::with_capacity(CandidateId::PROPOSALS);
        let mut add = |source, context_type, share| {
            all.push(ProposalSpec {
                id: CandidateId(all.len() as u8),
                source,
                context_type,
                share,
            });
        };
        for t in [
            MethodNames,
            Identifiers,
            TypeIdentifiers,
            StringLiterals,
            FieldDeclarations,
        ] {
            add(PromptSource::Current, t, 0.5);
        }
        for share in [0.25, 0.5, 0.75] {
            add(PromptSource::Current, PostLines, share);
        }
        for source in OTHER_SOURCES {
            for t in OTHER_TYPES {
                add(source, t, 0.5);
            }
        }
        all
    });
    &SPECS
}

/// What the catalogue says of one candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateInfo {
    pub id: CandidateId,
    /// How people know it: `import MNB`, `default context`, `RepoCoder iter 2`.
    pub label: String,
    /// The source column: a prompt source's name, `retrieval`, `RepoCoder`, `ProCC`,
    /// `typed hole`.
    pub source: &'static str,
    /// The type column: a context type's abbreviation, `default`, or the retrieval's kind.
    pub context_type: &'static str,
    pub family: Family,
    /// Whether the backend writes something first (RepoCoder's second iteration needs the
    /// first completion, ProCC's hypothetical line the line, its summary the summary).
    pub needs_backend: bool,
    /// Share of the budget its context may take; the default context takes none (the whole
    /// budget is the code before the hole).
    pub share: f64,
    /// Which end of its context survives a cut. Proposals of the current file that take items
    /// from before the hole keep the end instead (nearest the hole), decided per hole.
    pub keep: Keep,
}

impl CandidateInfo {
    /// The type column: the context type, with the budget share where only the share tells
    /// proposals apart (post lines: "PL 25%", "PL 50%", "PL 75%").
    pub fn type_text(&self) -> String {
        if self.context_type == ContextType::PostLines.abbreviation() {
            format!("PL {}%", (self.share * 100.0).round())
        } else {
            self.context_type.to_string()
        }
    }
}

/// Share of the budget for every retrieved candidate (RepoCoder: "half the prompt length").
pub const RETRIEVED_SHARE: f64 = 0.5;

/// The whole table, in id order.
pub fn catalogue() -> &'static [CandidateInfo] {
    static TABLE: LazyLock<Vec<CandidateInfo>> = LazyLock::new(|| {
        let mut table: Vec<CandidateInfo> = proposal_specs()
            .iter()
            .map(|spec| CandidateInfo {
                id: spec.id,
                label: spec.label(),
                source: spec.source.name(),
                context_type: spec.context_type.abbreviation(),
                family: Family::Proposal,
                needs_backend: false,
                share: spec.share,
                keep: spec.source.keep(),
            })
            .collect();
        table.push(CandidateInfo {
            id: CandidateId::DEFAULT,
            label: "default context".into(),
            source: "current",
            context_type: "default",
            family: Family::Default,
            needs_backend: false,
            share: 0.0,
            keep: Keep::End,
        });
        // (label, source column, type column, which end a cut keeps)
        let retrieved: [(&str, &str, &str, Keep); 10] = [
            ("file-level BM25", "retrieval", "BM25", Keep::Start),
            ("identifier usage", "retrieval", "usage", Keep::Start),
            ("random context", "retrieval", "random", Keep::End),
            // RepoCoder's layout puts the best block last, so a cut takes the front.
            ("RepoCoder", "RepoCoder", "iter 1", Keep::End),
            ("RepoCoder iter 2", "RepoCoder", "iter 2", Keep::End),
            ("ProCC lexical", "ProCC", "lexical", Keep::End),
            ("ProCC hypothetical line", "ProCC", "hyp line", Keep::End),
            ("ProCC summary", "ProCC", "summary", Keep::End),
            // Both typed-hole contexts put what matters most first: the expected type, the
            // nearest definitions, the best headers.
            ("typed-hole types", "typed hole", "types", Keep::Start),
            ("typed-hole headers", "typed hole", "headers", Keep::Start),
        ];
        for (id, (label, source, context_type, keep)) in CandidateId::retrieved().zip(retrieved) {
            let typed = matches!(id, CandidateId::TYPED_TYPES | CandidateId::TYPED_HEADERS);
            table.push(CandidateInfo {
                id,
                label: label.into(),
                source,
                context_type,
                family: if typed {
                    Family::Typed
                } else {
                    Family::Retrieved
                },
                needs_backend: id.needs_backend(),
                share: RETRIEVED_SHARE,
                keep,
            });
        }
        table
    });
    &TABLE
}

/// What the catalogue would say of a recorded prompt: [`CandidateId::AS_SENT`], the prompt a
/// plugin sent (its label names no plugin: the row of a recorded request names the one that
/// sent it), or [`CandidateId::SENT_BY_KEYHOLE`], what `keyhole proxy --compose` sent instead.
pub fn recorded_info(id: CandidateId) -> &'static CandidateInfo {
    fn recorded(id: CandidateId, label: &str, context_type: &'static str) -> CandidateInfo {
        CandidateInfo {
            id,
            label: label.into(),
            source: "recorded",
            context_type,
            family: Family::Recorded,
            needs_backend: false,
            share: 0.0,
            keep: Keep::End,
        }
    }
    static AS_SENT: LazyLock<CandidateInfo> =
        LazyLock::new(|| recorded(CandidateId::AS_SENT, "as sent by the plugin", "as sent"));
    static BY_KEYHOLE: LazyLock<CandidateInfo> = LazyLock::new(|| {
        recorded(
            CandidateId::SENT_BY_KEYHOLE,
            "as keyhole sent it in the plugin's place",
            "composed",
        )
    });
    match id {
        CandidateId::SENT_BY_KEYHOLE => &BY_KEYHOLE,
        _ => &AS_SENT,
    }
}

/// A set of candidates named on a command line: ids and ranges (`62,7,63-66`), and `top:N` for
/// the chosen ranker's best N of RLPG's candidates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// Named ids, in order, without repeats.
    pub ids: Vec<CandidateId>,
    /// The ranker's top N, if asked for.
    pub top: Option<usize>,
}

impl Selection {
    /// Every candidate.
    pub fn all() -> Selection {
        Selection {
            ids: CandidateId::all().collect(),
            top: None,
        }
    }

    /// Parse `62,7,63-66,top:5`; the error names the part that is wrong.
    pub fn parse(text: &str) -> Result<Selection, SelectionError> {
        let mut selection = Selection::default();
        let id = |part: &str| -> Result<CandidateId, SelectionError> {
            let n: usize = part
                .trim()
                .parse()
                .map_err(|_| SelectionError::NotANumber(part.to_string()))?;
            CandidateId::try_from(n)
        };
        for part in text.split(',').map(str::trim) {
            if let Some(n) = part.strip_prefix("top:") {
                let n: usize = n
                    .parse()
                    .ok()
                    .filter(|&n| (1..=CandidateId::PROPOSALS + 1).contains(&n))
                    .ok_or_else(|| SelectionError::BadTop(part.to_string()))?;
                selection.top = Some(n);
            } else if let Some((first, last)) = part.split_once('-') {
                let (first, last) = (id(first)?, id(last)?);
                if first > last {
                    return Err(SelectionError::EmptyRange(part.to_string()));
                }
                selection.ids.extend((first.0..=last.0).map(CandidateId));
            } else if part.is_empty() {
                return Err(SelectionError::EmptyEntry(text.to_string()));
            } else {
                selection.ids.push(id(part)?);
            }
        }
        let mut seen = [false; CandidateId::COUNT];
        selection
            .ids
            .retain(|id| !std::mem::replace(&mut seen[id.index()], true));
        Ok(selection)
    }

    /// The selection a person typed in `numbering`'s numbers, as catalogue ids.
    pub fn read_as(&self, numbering: Numbering) -> Selection {
        Selection {
            ids: self.ids.iter().map(|&n| numbering.typed(n)).collect(),
            top: self.top,
        }
    }

    /// The selection in `numbering`'s numbers, for people (the inverse of [`Self::read_as`]).
    pub fn written_as(&self, numbering: Numbering) -> Selection {
        Selection {
            ids: self
                .ids
                .iter()
                .map(|&id| CandidateId::nth(numbering.number(id)))
                .collect(),
            top: self.top,
        }
    }

    /// The candidates to use, given the ranker's order of RLPG's candidates (best first).
    pub fn resolve(&self, ranked: &[CandidateId]) -> Vec<CandidateId> {
        let mut chosen: Vec<CandidateId> = self
            .top
            .map(|n| ranked.iter().copied().take(n).collect())
            .unwrap_or_default();
        for &id in &self.ids {
            if !chosen.contains(&id) {
                chosen.push(id);
            }
        }
        chosen
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.top.map(|n| format!("top:{n}")).into_iter().collect();
        let mut i = 0;
        while i < self.ids.len() {
            let start = self.ids[i];
            let mut end = i;
            while end + 1 < self.ids.len() && self.ids[end + 1].0 == self.ids[end].0 + 1 {
                end += 1;
            }
            parts.push(match end - i {
                0 => start.to_string(),
                _ => format!("{start}-{}", self.ids[end]),
            });
            i = end + 1;
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_every_id_in_order_with_table_7s_proposals_first() {
        let table = catalogue();
        assert_eq!(table.len(), CandidateId::COUNT);
        for (n, info) in table.iter().enumerate() {
            assert_eq!(info.id.index(), n);
        }
        assert_eq!(CandidateId::new(0).unwrap().label(), "current MN");
        assert_eq!(CandidateId::new(5).unwrap().label(), "current PL 25%");
        assert_eq!(
            CandidateId::new(61).unwrap().label(),
            "import_of_child_class FD"
        );
        assert_eq!(CandidateId::DEFAULT.label(), "default context");
        assert_eq!(CandidateId::TYPED_HEADERS.label(), "typed-hole headers");
        assert_eq!(CandidateId::new(73), None);
        let backend: Vec<CandidateId> = CandidateId::all()
            .filter(|id| id.info().needs_backend)
            .collect();
        assert_eq!(backend, CandidateId::NEED_BACKEND);
    }

    #[test]
    fn selections_parse_ids_ranges_and_top_n_and_name_what_is_wrong() {
        let s = Selection::parse("62,7,63-66,top:5,7").unwrap();
        assert_eq!(s.top, Some(5));
        let ids: Vec<usize> = s.ids.iter().map(|id| id.index()).collect();
        assert_eq!(ids, [62, 7, 63, 64, 65, 66]);
        assert_eq!(s.to_string(), "top:5,62,7,63-66");
        let ranked: Vec<CandidateId> = [3, 62, 7].map(|n| CandidateId::new(n).unwrap()).to_vec();
        let top2 = Selection::parse("top:2,7").unwrap().resolve(&ranked);
        assert_eq!(
            top2.iter().map(|id| id.index()).collect::<Vec<_>>(),
            [3, 62, 7]
        );
        for (bad, named) in [
            ("73", "73"),
            ("x", "'x'"),
            ("9-3", "'9-3'"),
            ("top:0", "top:0"),
            ("1,,2", "empty"),
        ] {
            let err = Selection::parse(bad).unwrap_err().to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
    }
}
