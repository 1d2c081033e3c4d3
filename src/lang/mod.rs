//! The language seam: everything keyhole knows about a programming language comes through
//! [`Language`]: which files are its own, the facts of a file, how its imports reach other
//! files, what a hole's syntax says and how its types are written. Another language adds a
//! module here and an entry in [`languages`]; the rest of the program stays as it is.

mod hole_grammar;
pub mod java;
mod java_tree;
mod java_typed;
mod outlines;
mod packages;
mod packed;
pub mod python;
mod python_tree;
mod python_typed;
mod tree;
mod tsconfig;
pub mod typescript;
mod typescript_tree;
mod typescript_typed;
mod usages;

use std::any::Any;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

pub use java::Java;
pub use outlines::Outlines;
pub use python::Python;
pub use usages::Usages;

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

    /// Whether the span cuts `text` where it can be cut: in order, inside it, on character
    /// boundaries.
    pub fn fits(self, text: &str) -> bool {
        self.start <= self.end
            && text.is_char_boundary(self.start as usize)
            && text.is_char_boundary(self.end as usize)
    }
}

/// What kind of type a declaration introduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TypeKind {
    Class,
    Interface,
    Enum,
    Record,
    /// A type alias for a type other than an object type (`type Grid = Emoji[][]`): in an
    /// outline, its header is the whole declaration and it has no members.
    Alias,
    /// In an outline, a module's top level (Python, TypeScript) as a type without a name or
    /// span: its constants with a declared type as static fields, its functions as static
    /// methods, the values its code and its importers see.
    Module,
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportDecl {
    /// What the import names, in the language's notation: Java's dotted path without
    /// `import`, `static`, `.*` and `;`; Python's module with its leading dots; an ES module
    /// specifier.
    pub path: String,
    /// It brings in every name of what it names (`a.b.*`, `from m import *`, `export * from`).
    pub wildcard: bool,
    pub is_static: bool,
    /// The names the import binds in the file, under which its uses are found (`from m import
    /// a as b`: `b`); empty where the language reads them off `path` (Java).
    #[serde(default)]
    pub names: Vec<String>,
    /// What the declaration takes from its module, where the language says it apart from
    /// `names` (TypeScript): each as the name it goes by here (bound in the file, or exported
    /// under, for a re-export) and its name in the module, `*` for the module itself:
    /// `import { a as b }` → (`b`, `a`); `import * as ns` → (`ns`, `*`); `import d` → (`d`,
    /// `default`); `export { a as b } from` → (`b`, `a`); `export * as ns from` → (`ns`, `*`).
    #[serde(default)]
    pub members: Vec<(String, String)>,
    /// It passes what it takes on to the file's importers (`export ... from`) instead of
    /// binding it in the file.
    #[serde(default)]
    pub reexport: bool,
}

/// How an import reached a repository file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportKind {
    /// An import naming the file or one of its declarations.
    Single,
    /// A wildcard import resolving to the file of a name used in the current file.
    Wildcard,
    /// A declaration of the same package used without an import. RLPG only followed import
    /// statements; Java code reaches its own package without them, so keyhole counts these too.
    SamePackage,
}

/// A repository file the current file depends on, and the 0-based lines where it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub file: FileId,
    pub kind: ImportKind,
    pub usage_lines: Vec<u32>,
}

/// Record that an import reaches `target`, used on `lines`: a file reached twice is one
/// import whose uses are both's.
pub fn add_import(found: &mut Vec<Import>, target: FileId, kind: ImportKind, lines: &[u32]) {
    match found.iter_mut().find(|i| i.file == target) {
        Some(existing) => {
            existing.usage_lines.extend_from_slice(lines);
            existing.usage_lines.sort_unstable();
            existing.usage_lines.dedup();
        }
        None => found.push(Import {
            file: target,
            kind,
            usage_lines: lines.to_vec(),
        }),
    }
}

/// Index of a file in the repository index.
pub type FileId = usize;

/// What a language may ask of the repository while it resolves a file's imports.
pub trait ImportScope {
    /// The file at a repository-relative, '/'-separated path.
    fn file_at(&self, path: &str) -> Option<FileId>;
    /// The file a [`Language::qualified_names`] name belongs to.
    fn declaring(&self, qualified: &str) -> Option<FileId>;
    /// The project file (`packages/a/tsconfig.json`) at a repository-relative path, if there
    /// is one: read once per index, however many files ask.
    fn project_file(&self, path: &str) -> Option<Arc<ProjectFile>>;
    /// Say one line of what resolution left out of a project file (a cut `extends` chain):
    /// the repository index shows it among its warnings.
    fn note(&self, _line: String) {}
    /// The path and facts of another repository file, for a language whose imports reach
    /// through what that file re-exports (a Python package's `__init__.py`).
    fn source(&self, file: FileId) -> Option<(&str, &FileFacts)> {
        let _ = file;
        None
    }
    /// Every directory that directly holds a repository source file (`""`: the root), for a
    /// language that finds its packages by where they are (a workspace's `packages/*`).
    fn directories(&self) -> Vec<&str> {
        Vec::new()
    }
}

/// A file of a repository that is no source file but says how its sources import each other
/// (`tsconfig.json`), with what its language made of it, made once.
pub struct ProjectFile {
    text: String,
    reading: OnceLock<Result<Box<dyn Any + Send + Sync>, ProjectFileError>>,
}

/// Why a project file could not be read: it is not the TOML or JSON its name says, where the
/// message names the line (the repository index shows it among its warnings).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectFileError {
    /// `pyproject.toml`: the line and key, as every TOML error is said.
    #[error("{0}")]
    Toml(String),
    /// `package.json`.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `tsconfig.json` (JSON with comments): the parser's message, on one line.
    #[error("{0}")]
    Jsonc(String),
}

impl ProjectFile {
    pub fn new(text: String) -> ProjectFile {
        ProjectFile {
            text,
            reading: OnceLock::new(),
        }
    }

    /// What `read` makes of the text, made the first time it is asked; `None` where `read`
    /// says why it cannot ([`ProjectFile::problem`]).
    pub fn reading<T: Any + Send + Sync>(
        &self,
        read: impl FnOnce(&str) -> Result<T, ProjectFileError>,
    ) -> Option<&T> {
        let reading = self
            .reading
            .get_or_init(|| read(&self.text).map(|t| Box::new(t) as Box<dyn Any + Send + Sync>));
        reading.as_ref().ok()?.downcast_ref()
    }

    /// Why the file could not be read, where a language tried and could not.
    pub fn problem(&self) -> Option<&ProjectFileError> {
        self.reading.get()?.as_ref().err()
    }
}

/// How a language writes types, for the typed-hole context: what a written type names and
/// what it is made of.
pub trait TypeSyntax: Send + Sync {
    /// The type's name without arguments, array marks or annotations: `java.util.List<Order>[]`
    /// → `java.util.List`; `list[Order]` → `list`; `Order[]` → `Order`.
    fn erasure<'t>(&self, written: &'t str) -> &'t str;
    /// The name's last part: `a.b.Order` → `Order`.
    fn simple_name<'t>(&self, written: &'t str) -> &'t str {
        let name = self.erasure(written);
        name.rsplit('.').next().unwrap_or(name)
    }
    /// The type's arguments and element type, one level down: `Map<K, List<V>>` → `K`,
    /// `List<V>`; `Order[]` → `Order`; `Optional[Order]` → `Order`.
    fn components<'t>(&self, written: &'t str) -> Vec<&'t str>;
    /// Every type name in a written type: `Map<Long, List<Order>>` → `Map`, `Long`, `List`,
    /// `Order`.
    fn type_names<'t>(&self, written: &'t str) -> Vec<&'t str>;
    /// Types ChatLSP leaves out of the targets: primitives and the standard library's most
    /// common types, which would make incidental matches everywhere.
    fn is_base_type(&self, written: &str) -> bool;
    /// Whether a written type is (by convention) a type variable, which says nothing about a
    /// value: `T`, `E`, `K2`.
    fn is_type_variable(&self, written: &str) -> bool {
        is_type_variable_name(self.erasure(written))
    }
    /// The type without its "or nothing": `Optional[T]` and `T | None` → `T` in Python,
    /// `T | undefined | null` → `T` in TypeScript; `written` itself where nothing is left out.
    /// A value of `T` is what a hole of `T | None` asks for, and a parameter of `T | None` is
    /// the value a hole of `T` most often takes.
    fn non_null(&self, written: &str) -> String {
        written.trim().to_string()
    }
    /// The type a value declared `written` holds, in the one spelling typed holes state and
    /// compare types in, as the language's checker writes it: Python's forward references
    /// without their quotes and `ClassVar[T]`/`Final[T]` as `T`; white space as written.
    fn normal_form(&self, written: &str) -> String {
        written.trim().to_string()
    }
    /// How the language writes the declarations a typed hole shows.
    fn declaration_style(&self) -> DeclarationStyle;
    /// `written` with each generic type it names without type arguments given those
    /// `defaults` says it takes (TypeScript's checker writes `ParsePayload` declared
    /// `interface ParsePayload<T = unknown>` as `ParsePayload<unknown>`); as written where the
    /// language writes no defaults.
    fn with_default_arguments(
        &self,
        written: &str,
        defaults: &dyn Fn(&str) -> Option<String>,
    ) -> String {
        let _ = defaults;
        written.to_string()
    }
    /// The type arguments the type `name` declared with `header` takes when it is written
    /// without any (`<unknown>`), where every type parameter has a default.
    fn default_arguments(&self, header: &str, name: &str) -> Option<String> {
        let _ = (header, name);
        None
    }
    /// Whether a call takes the first overload, in the order declared, that accepts its
    /// arguments (TypeScript's rule), rather than one with exactly as many parameters as
    /// the call has arguments.
    fn first_overload_wins(&self) -> bool {
        false
    }
    /// The type a function's signature, as outlined ([`MethodOutline::signature`]), gives the
    /// argument a call passes as `keyword=`: Python's keyword arguments. `None` where the
    /// language has none, or the signature does not say.
    fn keyword_parameter(&self, signature: &str, keyword: &str) -> Option<String> {
        let _ = (signature, keyword);
        None
    }
}

/// How a language writes the declarations typed-hole context shows: ChatLSP reproduces
/// definitions in the hole's own concrete syntax, so a Python prompt never holds Java.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclarationStyle {
    /// `class C {`, `private T name;`, `T m(U u);`, `}`.
    Java,
    /// `class C {`, `name: T;` (a field's head holds its name), `m(u: U): T;`, `}`.
    TypeScript,
    /// `class C:`, `    name: T`, `    def m(self, u: U) -> T: ...`.
    Python,
}

/// The convention of Java, TypeScript and Python for type variables: one capital, perhaps a
/// digit or another letter after it.
fn is_type_variable_name(name: &str) -> bool {
    name.len() <= 2 && name.chars().next().is_some_and(char::is_uppercase)
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
    #[serde(with = "packed::spans")]
    pub identifiers: Vec<Span>,
    #[serde(with = "packed::spans")]
    pub type_identifiers: Vec<Span>,
    #[serde(with = "packed::spans")]
    pub field_declarations: Vec<Span>,
    #[serde(with = "packed::spans")]
    pub string_literals: Vec<Span>,
    pub methods: Vec<MethodDecl>,
    /// Every simple name used in the code outside import and package declarations, with the
    /// 0-based lines it is used on; import usage is looked up here.
    pub name_usages: Usages,
    /// Number of syntax errors the parser recovered from.
    pub syntax_errors: u32,
    /// Every declared type with its members, for typed-hole context: read through
    /// `SourceFile::outline` of the index, which decodes a cached file's on first use.
    pub outline: Outlines,
    /// The names a module declares at its top level (Python's classes, functions and
    /// assigned names), which a wildcard import brings in; empty where a language reads
    /// them elsewhere (Java: `types`).
    #[serde(default)]
    pub top_level_names: Vec<String>,
    /// The names a wildcard import of the module brings in where the module lists them
    /// (Python's `__all__`); `None`: its public top-level names.
    #[serde(default)]
    pub wildcard_names: Option<Vec<String>>,
    /// Every dotted name used in the code (`pkg.core.Name`, as long as it stays a name: cut at a
    /// call or subscript), with the 0-based lines it is used on, sorted by name: how a file
    /// uses a module it imports whole (`import pkg` then `pkg.Name`).
    #[serde(default)]
    pub dotted_usages: Usages,
    /// Documentation the grammar reads as code (Python's docstrings), which the paper's hole
    /// sampling steps over as it steps over comment lines.
    #[serde(default, with = "packed::spans")]
    pub documentation: Vec<Span>,
    /// The modules the file declares for others by name (TypeScript's `declare module "x"`
    /// in a declaration file), which an import of that name reaches.
    #[serde(default)]
    pub ambient_modules: Vec<String>,
}

/// A declared type as a language server sees it: its header and its members' declarations,
/// bodies left out (what ChatLSP's type definitions are made of).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeOutline {
    pub name: String,
    pub kind: TypeKind,
    /// From the first modifier (annotations left out) to the opening brace, trimmed.
    pub header: Span,
    /// The whole declaration.
    pub decl: Span,
    /// Type names after `extends` and `implements`, as written.
    pub supertypes: Vec<String>,
    /// Enum constants with their arguments.
    pub constants: Vec<Span>,
    pub fields: Vec<FieldOutline>,
    /// Methods and constructors.
    pub methods: Vec<MethodOutline>,
}

impl TypeOutline {
    /// A module's top level (Python, TypeScript), nothing in it yet: its members are filled
    /// in as the module's statements are read.
    pub fn empty_module() -> TypeOutline {
        TypeOutline {
            name: String::new(),
            kind: TypeKind::Module,
            header: Span::new(0, 0),
            decl: Span::new(0, 0),
            supertypes: Vec::new(),
            constants: Vec::new(),
            fields: Vec::new(),
            methods: Vec::new(),
        }
    }
}

/// One field declaration (all its names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldOutline {
    /// From the first modifier to the end of the type.
    pub head: Span,
    pub type_name: String,
    /// Each declared name and its span.
    pub names: Vec<(String, Span)>,
    pub decl: Span,
    pub is_static: bool,
    pub is_private: bool,
}

/// One method or constructor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodOutline {
    pub name: String,
    /// Modifiers to the end of the parameters and throws clause.
    pub signature: Span,
    pub decl: Span,
    /// `None` for a constructor.
    pub return_type: Option<String>,
    /// Parameter types, the last one's element type for varargs.
    pub params: Vec<String>,
    pub varargs: bool,
    pub is_static: bool,
    pub is_private: bool,
}

impl MethodOutline {
    /// Whether a call with at least `arity` arguments can reach this method.
    pub fn accepts(&self, arity: usize) -> bool {
        self.params.len() >= arity || self.varargs
    }

    /// The type of argument `position`.
    pub fn param(&self, position: usize) -> Option<&str> {
        let last = self.params.len().checked_sub(1)?;
        match self.params.get(position) {
            Some(p) => Some(p),
            None if self.varargs => Some(&self.params[last]),
            None => None,
        }
    }
}

/// What the syntax tree says about a hole: the types of its file, where its expected type
/// comes from, and the variables in scope. Spans are in [`HoleSyntax::text`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HoleSyntax {
    /// The analysed text: the source with a placeholder written at the hole.
    pub text: String,
    /// Where the placeholder and what closes it were inserted (empty if nothing was).
    pub inserted: Range<usize>,
    pub outline: Vec<TypeOutline>,
    pub expected: Option<Expectation>,
    /// Names of the types around the hole, innermost first.
    pub enclosing_types: Vec<String>,
    /// Parameters and locals declared before the hole, nearest first.
    pub locals: Vec<Local>,
    /// Whether the hole is in static code (no `this`).
    pub is_static: bool,
    /// What the hole is in the syntax, for asking a language server what it expects there.
    pub place: HolePlace,
}

/// What a hole is in the syntax, as a language server is asked about it: an argument's
/// expected type is its parameter's (signature help), a declaration's is its name's
/// declared type (hover).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HolePlace {
    /// Anything else: an assignment, a condition, a hole outside an expression.
    #[default]
    Other,
    /// An argument of a call or of `new`.
    Argument,
    /// The value of a declaration whose name starts at byte `name` (before the hole, so the
    /// same byte of the file).
    Declaration { name: usize },
    /// A value the enclosing function returns.
    Return,
}

/// Where the expected type of a hole comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// Written in the syntax: a declaration's type, the enclosing method's return type, a
    /// condition's `boolean`.
    Type(String),
    /// The type of the variable assigned: a local, parameter or field (`this.x`: a field only).
    Variable { name: String, field_only: bool },
    /// Argument `position` of a call of `name` with at least `arity` arguments.
    Argument {
        receiver: Receiver,
        name: String,
        position: usize,
        arity: usize,
    },
    /// The argument a call of `name` on `receiver` passes as `keyword=` (Python; a class's
    /// name called by its own name is its constructor).
    Keyword {
        receiver: Receiver,
        name: String,
        keyword: String,
    },
    /// Argument `position` of `new type_name(...)` with at least `arity` arguments.
    Constructor {
        type_name: String,
        position: usize,
        arity: usize,
    },
}

/// What a method is called on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// No receiver, or `this`.
    Current,
    Super,
    /// A name: a variable, a field or a type.
    Name(String),
}

/// A parameter or local variable with a declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Local {
    pub name: String,
    pub type_name: String,
    pub type_span: Span,
    pub name_span: Span,
}

/// A syntax error: where it is and what the parser saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyntaxError {
    pub span: Span,
    pub message: String,
}

impl FileFacts {
    /// Lines on which `name` is used, if it is.
    pub fn usages_of(&self, name: &str) -> &[u32] {
        self.name_usages.lines_of(name)
    }

    /// The dotted uses of `bound` in the file: for `pkg` of `pkg.core.Name` on line 3,
    /// (`core.Name`, `[3]`).
    pub fn dotted_uses_of<'f>(&'f self, bound: &str) -> impl Iterator<Item = (&'f str, &'f [u32])> {
        let prefix = format!("{bound}.");
        (self.dotted_usages.starting_at(&prefix))
            .map_while(move |(name, lines)| Some((name.strip_prefix(&prefix)?, lines)))
    }
}

/// A programming language keyhole can index.
pub trait Language: Send + Sync {
    /// The language's name in the program; files of one name are one language, whose files
    /// a hole's candidates come from (TypeScript and TSX, two grammars, share one).
    fn name(&self) -> &'static str;
    /// The language's name for people ("Java").
    fn display_name(&self) -> &'static str;
    /// The file name extensions of its files, without the dot.
    fn extensions(&self) -> &'static [&'static str];
    /// Whether files with this path belong to the language.
    fn handles(&self, path: &Path) -> bool {
        path.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| self.extensions().contains(&e))
    }
    /// Extract the facts of one file. Never panics, whatever the text.
    fn extract(&self, source: &str) -> FileFacts;
    /// What starts a line comment (`//`), for the comments keyhole writes into prompts.
    fn line_comment(&self) -> &'static str;
    /// Whether a trimmed, non-empty line counts as a comment for hole sampling.
    fn is_comment_line(&self, trimmed: &str) -> bool;
    /// Analyse the hole at byte `hole` of `source`, the current file with the rest of the
    /// hole's line cut away. Never panics, whatever the text.
    fn hole_syntax(&self, source: &str, hole: usize) -> HoleSyntax;
    /// Syntax errors of `source` that overlap `within`, clipped to it.
    fn syntax_errors(&self, source: &str, within: Range<usize>) -> Vec<SyntaxError>;
    /// Whether a trimmed line belongs to a file's preamble (package and import lines), which
    /// the UI steps over when it chooses a first hole.
    fn is_preamble_line(&self, trimmed: &str) -> bool;
    /// How the language writes types.
    fn types(&self) -> &'static dyn TypeSyntax;

    /// The names under which other files' imports reach the declarations of the file at
    /// `path` (Java: `package.Type` per top-level type), each with whether the file sits where
    /// that name says it should, which wins when two files claim a name.
    fn qualified_names(&self, path: &str, facts: &FileFacts) -> Vec<(String, bool)> {
        let _ = (path, facts);
        Vec::new()
    }
    /// The repository files the imports of the file at `path` reach, each once, in the order
    /// of the declarations, with the lines each is used on.
    fn resolve_imports(
        &self,
        path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import>;
    /// Folders this language's tools install dependencies into (`node_modules`), which its
    /// own resolution does not take for the project's sources: a repository walk leaves them
    /// out unless asked to include them. Short: only names no project uses for its own code.
    fn vendored_dirs(&self) -> &'static [&'static str] {
        &[]
    }
    /// The prefixes and suffixes of a file stem that every test file of the language shares
    /// (pytest's `test_`, `_test`), which similar names leave out. None by default: Java's
    /// `OrderServiceTest` keeps `Test`, a camel-case part as RLPG reads it, and TypeScript's
    /// `.test`/`.spec` are past the stem's first dot already.
    fn test_affixes(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&[], &[])
    }
    /// The language server that types its holes (ChatLSP's typed-hole context), used where
    /// one is chosen and found; none where the tree-sitter approximation is all there is.
    fn language_server(&self) -> Option<&'static crate::lsp::ServerSpec> {
        crate::lsp::server_for(self.name())
    }
    /// Whether RLPG's published code (written for Java) reads this language. Where it does
    /// not, `--fidelity code` takes keyhole's own imports and parents in its place.
    fn rlpg_code_covers(&self) -> bool {
        false
    }
    /// The repository path RLPG's published code builds from an import of the file at
    /// `from` (its `parse_tree.py`); `None` where it leaves the import out.
    fn rlpg_code_import_path(&self, from: &str, import: &ImportDecl) -> Option<String> {
        let _ = (from, import);
        None
    }
}

static JAVA: Java = Java;
static PYTHON: Python = Python;

/// Every language keyhole reads.
pub fn languages() -> [&'static dyn Language; 4] {
    [&JAVA, &PYTHON, &typescript::TYPESCRIPT, &typescript::TSX]
}

/// The language that handles `path`, if keyhole knows one.
pub fn for_path(path: &Path) -> Option<&'static dyn Language> {
    languages().into_iter().find(|l| l.handles(path))
}

/// Whether a folder of this name holds some language's installed dependencies
/// ([`Language::vendored_dirs`]).
pub fn is_vendored_dir(name: &str) -> bool {
    languages()
        .iter()
        .any(|l| l.vendored_dirs().contains(&name))
}

/// The languages keyhole reads and their files, for messages: "Java (*.java)".
pub fn read_languages() -> String {
    languages()
        .iter()
        .map(|l| {
            let files: Vec<String> = l.extensions().iter().map(|e| format!("*.{e}")).collect();
            format!("{} ({})", l.display_name(), files.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
