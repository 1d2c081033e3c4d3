//! The language seam: everything keyhole knows about a programming language comes through
//! [`Language`]. Java is the first implementation; another language adds a module here and an
//! entry in [`for_path`], and the rest of the program stays as it is.

pub mod java;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use java::Java;

/// A byte range in a file. Lines are derived from the file's line index when needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// What kind of type a declaration introduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TypeKind {
    Class,
    Interface,
    Enum,
    Record,
}

/// A type declared in a file (top-level or nested).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeDecl {
    pub name: String,
    pub kind: TypeKind,
    /// The span of the name identifier.
    pub name_span: Span,
    /// Simple name of the class this one extends, if any (classes only, as in RLPG).
    pub superclass: Option<String>,
    /// Whether the type is declared at the top level of the file.
    pub top_level: bool,
}

/// One import declaration, as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportDecl {
    /// The dotted path without `import`, `static`, `.*` and `;`.
    pub path: String,
    pub wildcard: bool,
    pub is_static: bool,
}

/// A method: its name, its signature (modifiers to the start of the body, annotations left
/// out) and the whole declaration from the signature to the end of the body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodDecl {
    pub name: Span,
    pub signature: Span,
    pub with_body: Span,
}

/// Per-file facts RLPG's prompt proposals are made from (paper appendix A.2), extracted once
/// per file content and cached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFacts {
    pub package: Option<String>,
    pub types: Vec<TypeDecl>,
    pub imports: Vec<ImportDecl>,
    pub identifiers: Vec<Span>,
    pub type_identifiers: Vec<Span>,
    pub field_declarations: Vec<Span>,
    pub string_literals: Vec<Span>,
    pub methods: Vec<MethodDecl>,
    /// Every simple name used in the code outside import and package declarations, with the
    /// 0-based lines it is used on; import usage is looked up here.
    pub name_usages: Vec<(String, Vec<u32>)>,
    /// Number of syntax errors the parser recovered from.
    pub syntax_errors: u32,
}

impl FileFacts {
    /// Lines on which `name` is used, if it is.
    pub fn usages_of(&self, name: &str) -> &[u32] {
        self.name_usages
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .map_or(&[], |i| &self.name_usages[i].1)
    }
}

/// A programming language keyhole can index.
pub trait Language: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether files with this path belong to the language.
    fn handles(&self, path: &Path) -> bool;
    /// Extract the facts of one file. Never panics, whatever the text.
    fn extract(&self, source: &str) -> FileFacts;
    /// Whether a trimmed, non-empty line counts as a comment for hole sampling.
    fn is_comment_line(&self, trimmed: &str) -> bool;
}

static JAVA: Java = Java;

/// The language that handles `path`, if keyhole knows one.
pub fn for_path(path: &Path) -> Option<&'static dyn Language> {
    JAVA.handles(path).then_some(&JAVA as &dyn Language)
}
