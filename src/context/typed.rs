//! Typed-hole static context, after ChatLSP (Blinn et al., "Statically Contextualizing Large
//! Language Models with Typed Holes", OOPSLA 2024, sections 2.5–2.7), for Java:
//!
//! - the expected type at the hole (from the syntax tree: a declaration's type, an assigned
//!   variable's or field's type, the enclosing method's return type, a called method's
//!   parameter type) and the definitions of the repository types it names, followed through
//!   their supertypes, field types and method types up to [`TYPE_DEPTH`] hops (candidate 71);
//! - the headers of the values in scope whose type produces a target type, scored and cut to
//!   [`MAX_HEADERS`] (candidate 72);
//! - the syntax errors inside a completion ([`completion_errors`], ChatLSP's error round).
//!
//! The hole's line is cut at the hole before anything is read: the rest of it is the target.

use std::collections::VecDeque;
use std::path::Path;

use super::SourcedText;
use crate::candidate::CandidateId;
use crate::hole::Hole;
use crate::lang::{
    self, DeclarationStyle, Expectation, HoleSyntax, ImportKind, Local, Receiver, Span, TypeKind,
    TypeOutline, TypeSyntax,
};
use crate::repo::{FileId, RepoIndex};

/// Hops followed from the expected type's definitions (hop 0) to the types they mention.
/// ChatLSP follows aliases until base types; Java class graphs rarely end, so this bounds it.
pub const TYPE_DEPTH: usize = 2;
/// ChatLSP's cut of the scored headers: score above 0, at most 10 (section 2.6).
pub const MAX_HEADERS: usize = 10;
/// Superclass and interface levels followed for inherited members and subtyping.
const PARENT_DEPTH: usize = 4;
/// Enclosing types whose members are looked at, innermost first. Real code nests a few
/// levels; thousands (a generated or hostile file) would make every member lookup scan them
/// all, quadratic in the depth.
const MAX_ENCLOSING: usize = 32;
/// ChatLSP scores every entry 1.0; an entry that only reaches a target through one member
/// (a "product type with a component consistent with the target") ranks after direct matches.
const RELATED_SCORE: f64 = 0.5;

/// A declared type: a file and the index of the type in that file's outline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeRef {
    pub file: FileId,
    pub index: usize,
}

/// The type expected at the hole, as written, and the file whose imports give its names
/// meaning (a parameter type is read in the called method's file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedType {
    pub text: String,
    pub file: FileId,
}

/// A value in scope, formatted as a declaration, with its score.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub name: String,
    /// The value's type (a method's return type).
    pub type_name: String,
    pub score: f64,
    pub text: SourcedText,
}

/// How an entry of the typing context is declared.
#[derive(Clone, Copy)]
enum Declaration<'s> {
    Local(&'s Local),
    /// A type's field (index) and one of its names (index).
    Field(TypeRef, usize, usize),
    Method(TypeRef, usize),
}

/// An entry of the typing context: its type and where it is declared.
struct Entry<'s> {
    name: String,
    type_name: String,
    /// The file the type is written in.
    file: FileId,
    declaration: Declaration<'s>,
    /// The type declaring it, when that is not the innermost type around the hole.
    owner: Option<String>,
}

/// A target type of the header search.
struct Target {
    text: String,
    definition: Option<TypeRef>,
}

/// Everything typed-hole context knows about one hole.
pub struct TypedHole<'a> {
    index: &'a RepoIndex,
    hole: &'a Hole,
    /// How the hole's language writes types.
    types: &'static dyn TypeSyntax,
    syntax: HoleSyntax,
    /// Bytes of the current file left out after the hole: the rest of its line.
    gap: usize,
    enclosing: Vec<TypeRef>,
    expected: Option<ExpectedType>,
}

impl<'a> TypedHole<'a> {
    /// Analyse the hole's file (its line cut at the hole) and find the expected type.
    pub fn new(index: &'a RepoIndex, hole: &'a Hole) -> TypedHole<'a> {
        let file = &index.files[hole.file];
        let offset = file.text.floor_char_boundary(hole.offset);
        let line_end = file.text[offset..]
            .find('\n')
            .map_or(file.text.len(), |i| offset + i);
        let cut = format!("{}{}", &file.text[..offset], &file.text[line_end..]);
        let syntax = file.language.hole_syntax(&cut, offset);
        let mut typed = TypedHole {
            index,
            hole,
            gap: line_end - offset,
            enclosing: Vec::new(),
            expected: None,
            types: file.language.types(),
            syntax,
        };
        typed.enclosing = typed
            .syntax
            .enclosing_types
            .iter()
            .take(MAX_ENCLOSING)
            .filter_map(|name| typed.find(hole.file, name))
            .collect();
        // Stated as the language's checker states it (`"Context"` as `Context`,
        // `ParsePayload` as `ParsePayload<unknown>`).
        typed.expected = typed.expected_type_of_syntax().map(|e| ExpectedType {
            text: typed.with_default_arguments(&typed.types.normal_form(&e.text), e.file),
            file: e.file,
        });
        typed
    }

    /// `written` (in `file`) with the default type arguments of the repository's generic
    /// types it names without any.
    fn with_default_arguments(&self, written: &str, file: FileId) -> String {
        self.types.with_default_arguments(written, &|name| {
            let t = self.resolve(file, name)?;
            let declared = self.type_at(t);
            let header = self.index.files[t.file].text.get(declared.header.range())?;
            self.types.default_arguments(header, &declared.name)
        })
    }

    /// Both candidates' contexts by id; an empty context is not applicable.
    pub fn contexts(&self) -> [(CandidateId, SourcedText); 2] {
        [
            (CandidateId::TYPED_TYPES, self.types_context()),
            (CandidateId::TYPED_HEADERS, self.headers_context()),
        ]
    }

    /// The type expected at the hole, if the syntax and the repository say.
    pub fn expected(&self) -> Option<&ExpectedType> {
        self.expected.as_ref()
    }

    /// What the hole is in the syntax (an argument, a declaration's value, a returned value).
    pub fn place(&self) -> lang::HolePlace {
        self.syntax.place
    }

    /// A line comment of the hole's language.
    fn comment(&self) -> &'static str {
        self.index.files[self.hole.file].language.line_comment()
    }

    // ----- Files, outlines and names ---------------------------------------------------------

    fn outline(&self, file: FileId) -> &[TypeOutline] {
        if file == self.hole.file {
            &self.syntax.outline
        } else {
            self.index.files[file].outline()
        }
    }

    pub fn type_at(&self, t: TypeRef) -> &TypeOutline {
        &self.outline(t.file)[t.index]
    }

    fn find(&self, file: FileId, name: &str) -> Option<TypeRef> {
        let index = self.outline(file).iter().position(|t| t.name == name)?;
        Some(TypeRef { file, index })
    }

    /// The repository type a type name written in `from` refers to: one declared in that file,
    /// else one declared in a file it imports, single imports before its package's and
    /// wildcards (as javac looks).
    pub fn resolve(&self, from: FileId, written: &str) -> Option<TypeRef> {
        let name = self.types.erasure(written);
        if name.contains('.') {
            let qualified = self.resolve_qualified(name).or_else(|| {
                let (outer, inner) = name.rsplit_once('.')?;
                self.find(self.resolve(from, outer)?.file, inner)
            });
            return qualified.or_else(|| self.resolve(from, self.types.simple_name(name)));
        }
        if let Some(found) = self.find(from, name) {
            return Some(found);
        }
        let imports = &self.index.graph.imports[from];
        [
            ImportKind::Single,
            ImportKind::SamePackage,
            ImportKind::Wildcard,
        ]
        .into_iter()
        .flat_map(|kind| imports.iter().filter(move |i| i.kind == kind))
        .find_map(|i| self.find(i.file, name))
    }

    /// `a.b.C` or `a.b.C.Inner`.
    fn resolve_qualified(&self, path: &str) -> Option<TypeRef> {
        let (outer, simple) = path.rsplit_once('.').unwrap_or(("", path));
        match self.index.graph.file_of_type(path) {
            Some(file) => self.find(file, simple),
            None if !outer.is_empty() => self.find(self.resolve_qualified(outer)?.file, simple),
            None => None,
        }
    }

    /// A type and its supertypes in the repository, nearest first, each once.
    fn lineage(&self, start: TypeRef) -> Vec<TypeRef> {
        let mut out = vec![start];
        let mut level = vec![start];
        for _ in 0..PARENT_DEPTH {
            let mut next = Vec::new();
            for t in level {
                for written in &self.type_at(t).supertypes {
                    match self.resolve(t.file, written) {
                        Some(parent) if !out.contains(&parent) => {
                            out.push(parent);
                            next.push(parent);
                        }
                        _ => {}
                    }
                }
            }
            level = next;
        }
        out
    }

    /// The enclosing types and their supertypes.
    fn enclosing_lineage(&self) -> Vec<TypeRef> {
        let mut out: Vec<TypeRef> = Vec::new();
        for &t in &self.enclosing {
            for s in self.lineage(t) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    // ----- Expected type ---------------------------------------------------------------------

    fn expected_type_of_syntax(&self) -> Option<ExpectedType> {
        let here = self.hole.file;
        let typed = |text: &str, file| ExpectedType {
            text: text.to_string(),
            file,
        };
        match self.syntax.expected.as_ref()? {
            Expectation::Type(text) => Some(typed(text, here)),
            Expectation::Variable { name, field_only } => {
                let local = self.syntax.locals.iter().find(|l| &l.name == name);
                match local.filter(|_| !field_only) {
                    Some(local) => Some(typed(&local.type_name, here)),
                    None => self
                        .field_type(&self.enclosing_lineage(), name)
                        .map(|(t, file)| typed(&t, file)),
                }
            }
            Expectation::Argument {
                receiver,
                name,
                position,
                arity,
            } => {
                let mut types = self.receiver_types(receiver)?;
                // A plain call may be of a function the file imports (`import { f } from`).
                if *receiver == Receiver::Current {
                    let imported = self.imported_values().into_iter();
                    types.extend(
                        imported
                            .filter(|(_, names)| names.contains(name))
                            .map(|(m, _)| m),
                    );
                }
                self.parameter_type(&types, name, *position, *arity)
            }
            Expectation::Keyword {
                receiver,
                name,
                keyword,
            } => {
                // The first method of that name whose signature says (an override taking
                // `**kwargs` passes the keyword on to its parent's).
                let types = self.receiver_types(receiver)?;
                types.into_iter().find_map(|t| {
                    let methods = self.type_at(t).methods.iter();
                    methods.filter(|m| &m.name == name).find_map(|m| {
                        let signature = self.span_text(t.file, m.signature);
                        Some(typed(
                            &self.types.keyword_parameter(signature, keyword)?,
                            t.file,
                        ))
                    })
                })
            }
            Expectation::Constructor {
                type_name,
                position,
                arity,
            } => {
                let t = self.resolve(here, type_name)?;
                let name = self.type_at(t).name.clone();
                self.parameter_type(&[t], &name, *position, *arity)
            }
        }
    }

    /// The declared type of field `name` in the first of `types` that has it.
    fn field_type(&self, types: &[TypeRef], name: &str) -> Option<(String, FileId)> {
        types.iter().find_map(|&t| {
            self.type_at(t)
                .fields
                .iter()
                .find(|f| f.names.iter().any(|(n, _)| n == name))
                .map(|f| (f.type_name.clone(), t.file))
        })
    }

    /// The types whose methods a call on `receiver` may reach, nearest first.
    fn receiver_types(&self, receiver: &Receiver) -> Option<Vec<TypeRef>> {
        match receiver {
            Receiver::Current => Some(self.enclosing_lineage()),
            Receiver::Super => {
                let innermost = *self.enclosing.first()?;
                Some(self.lineage(innermost).split_off(1))
            }
            Receiver::Name(name) => {
                let local = self.syntax.locals.iter().find(|l| &l.name == name);
                let declared = match local {
                    Some(l) => Some((l.type_name.clone(), self.hole.file)),
                    None => self.field_type(&self.enclosing_lineage(), name),
                };
                let t = match declared {
                    Some((type_name, file)) => self.resolve(file, &type_name)?,
                    // Not a variable: a type, for a static call.
                    None => match self.resolve(self.hole.file, name) {
                        Some(t) => t,
                        // Else a module, or a function, an import binds (`click.echo`,
                        // `click.utils.f`, `echo`): the top levels of the modules imported.
                        None => return self.modules_binding(name),
                    },
                };
                Some(self.lineage(t))
            }
        }
    }

    /// Parameter `position` of the first method `name` (constructors: the type's name) that a
    /// call with at least `arity` arguments reaches; one taking exactly `arity` arguments
    /// wins, unless the language takes the first that accepts them. The rest of the hole's
    /// line is unseen, so the call may have more arguments.
    fn parameter_type(
        &self,
        types: &[TypeRef],
        name: &str,
        position: usize,
        arity: usize,
    ) -> Option<ExpectedType> {
        let candidates: Vec<(TypeRef, &lang::MethodOutline)> = types
            .iter()
            .flat_map(|&t| self.type_at(t).methods.iter().map(move |m| (t, m)))
            .filter(|(_, m)| m.name == name && m.accepts(arity))
            .collect();
        let (t, method) = candidates
            .iter()
            .find(|(_, m)| !self.types.first_overload_wins() && m.params.len() == arity)
            .or_else(|| candidates.first())?;
        Some(ExpectedType {
            text: method.param(position)?.to_string(),
            file: t.file,
        })
    }

    // ----- Relevant type definitions ---------------------------------------------------------

    /// Repository types the expected type names, then the types their definitions mention,
    /// breadth first to [`TYPE_DEPTH`] hops, each once (cycles end there), with their hop.
    pub fn relevant_types(&self) -> Vec<(TypeRef, usize)> {
        let Some(expected) = &self.expected else {
            return Vec::new();
        };
        let mut seen: Vec<TypeRef> = Vec::new();
        let mut queue: VecDeque<(TypeRef, usize)> = VecDeque::new();
        let mut visit = |t: TypeRef, hop: usize, queue: &mut VecDeque<(TypeRef, usize)>| {
            if !seen.contains(&t) {
                seen.push(t);
                queue.push_back((t, hop));
            }
        };
        for name in self.types.type_names(&expected.text) {
            if let Some(t) = self.resolve(expected.file, name) {
                visit(t, 0, &mut queue);
            }
        }
        let mut out = Vec::new();
        while let Some((t, hop)) = queue.pop_front() {
            out.push((t, hop));
            if hop == TYPE_DEPTH {
                continue;
            }
            for written in self.mentioned_types(t) {
                for name in self.types.type_names(&written) {
                    if let Some(found) = self.resolve(t.file, name) {
                        visit(found, hop + 1, &mut queue);
                    }
                }
            }
        }
        out
    }

    /// The types a definition is written with: its supertypes, its fields' types, its methods'
    /// parameter and return types, an alias's value.
    fn mentioned_types(&self, t: TypeRef) -> Vec<String> {
        let outline = self.type_at(t);
        let aliased = (outline.kind == TypeKind::Alias)
            .then(|| self.span_text(t.file, outline.header))
            .and_then(|header| Some(header.split_once('=')?.1.trim().to_string()));
        outline
            .supertypes
            .iter()
            .chain(outline.fields.iter().map(|f| &f.type_name))
            .chain(
                outline
                    .methods
                    .iter()
                    .flat_map(|m| m.return_type.iter().chain(m.params.iter())),
            )
            .cloned()
            .chain(aliased)
            .collect()
    }

    // ----- Definitions a language server points at ---------------------------------------------

    /// Byte `original` of `file` in the text its outline was read from: the hole's file is
    /// read with the rest of the hole's line cut and a placeholder in its place, so nothing
    /// of that rest is there.
    fn analysed_offset(&self, file: FileId, original: usize) -> Option<usize> {
        let inserted = &self.syntax.inserted;
        match original {
            _ if file != self.hole.file => Some(original),
            o if o < inserted.start => Some(o),
            o if o >= inserted.start + self.gap => Some(o - self.gap + inserted.len()),
            _ => None,
        }
    }

    /// The byte of `file` that byte `analysed` of its outline's text was read from; none
    /// inside what was inserted at the hole.
    fn original_offset(&self, file: FileId, analysed: usize) -> Option<usize> {
        let inserted = &self.syntax.inserted;
        match analysed {
            _ if file != self.hole.file => Some(analysed),
            p if p < inserted.start => Some(p),
            p if p >= inserted.end => Some(p - inserted.len() + self.gap),
            _ => None,
        }
    }

    /// The type a language server's definition at byte `original` of `file` names: the
    /// innermost type declared there whose name is written at that byte, or whose declaration
    /// starts there. None for anything else it may point at (a type parameter, an object type
    /// without a name, a variable), which is no definition to show.
    pub fn type_declared_at(&self, file: FileId, original: usize) -> Option<TypeRef> {
        let at = self.analysed_offset(file, original)?;
        let text = if file == self.hole.file {
            &self.syntax.text
        } else {
            &*self.index.files[file].text
        };
        let rest = text.get(at..)?;
        let word = &rest[..rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len())];
        self.outline(file)
            .iter()
            .enumerate()
            .filter(|(_, t)| t.decl.range().contains(&at))
            .filter(|(_, t)| word == t.name || at <= t.header.start as usize)
            .min_by_key(|(_, t)| t.decl.end - t.decl.start)
            .map(|(index, _)| TypeRef { file, index })
    }

    /// Where type `t`'s declaration starts in its file as it is.
    pub fn declaration_start(&self, t: TypeRef) -> Option<usize> {
        self.original_offset(t.file, self.type_at(t).decl.start as usize)
    }

    /// The pieces of `t`'s definition as [`Self::push_definition`] shows it that write types
    /// (its header, its fields' heads, its methods' signatures), in its file as it is: where
    /// a server is asked for the definitions of the types it is written with.
    pub fn written_types(&self, t: TypeRef) -> Vec<Span> {
        let outline = self.type_at(t);
        let fields = outline.fields.iter().map(|f| (f.head, f.decl));
        let methods = outline.methods.iter().map(|m| (m.signature, m.decl));
        std::iter::once((outline.header, outline.header))
            .chain(fields)
            .chain(methods)
            .filter(|(_, decl)| !self.holds_hole(t.file, *decl))
            .filter_map(|(span, _)| {
                let start = self.original_offset(t.file, span.start as usize)?;
                let end = self.original_offset(t.file, span.end as usize)?;
                Some(Span::new(start, end))
            })
            .collect()
    }

    /// Candidate 71: the expected type, then the relevant definitions as code with bodies
    /// left out (ChatLSP reproduces definitions in their concrete syntax).
    pub fn types_context(&self) -> SourcedText {
        let mut out = SourcedText::default();
        let Some(expected) = &self.expected else {
            return out;
        };
        let comment = self.comment();
        out.push_plain(&format!(
            "{comment} Expected type at the hole: {}\n",
            expected.text
        ));
        let types = self.relevant_types();
        if !types.is_empty() {
            out.push_plain(&format!("{comment} Relevant type definitions:\n"));
        }
        for (t, _) in types {
            self.push_definition(&mut out, t);
        }
        out
    }

    /// A type's definition with bodies left out, as the hole's language writes one; an alias
    /// as declared.
    pub fn push_definition(&self, out: &mut SourcedText, t: TypeRef) {
        let style = self.style();
        let python = style == DeclarationStyle::Python;
        let outline = self.type_at(t);
        self.push_span(out, t.file, outline.header);
        if outline.kind == TypeKind::Alias {
            out.push_plain(";\n");
            return;
        }
        out.push_plain(if python { ":\n" } else { " {\n" });
        let mut members = 0;
        // Enum constants: Java's on one line closed by `;`, TypeScript's a line each with a
        // comma, Python's a line each.
        for (i, constant) in outline.constants.iter().enumerate() {
            let java = style == DeclarationStyle::Java;
            out.push_plain(if java && i > 0 { ", " } else { "    " });
            self.push_span(out, t.file, *constant);
            match style {
                DeclarationStyle::Java if i + 1 == outline.constants.len() => out.push_plain(";\n"),
                DeclarationStyle::Java => {}
                DeclarationStyle::TypeScript => out.push_plain(",\n"),
                DeclarationStyle::Python => out.push_plain("\n"),
            }
            members += 1;
        }
        for (f, field) in outline.fields.iter().enumerate() {
            if self.holds_hole(t.file, field.decl) {
                continue;
            }
            out.push_plain("    ");
            self.push_field(out, t, f, None);
            out.push_plain("\n");
            members += 1;
        }
        for (m, method) in outline.methods.iter().enumerate() {
            // A member made up by the reading (a dataclass's `__init__`) has no text of its own.
            let written = method.decl != outline.header;
            if written && !self.holds_hole(t.file, method.decl) {
                out.push_plain("    ");
                self.push_method(out, t, m);
                out.push_plain("\n");
                members += 1;
            }
        }
        match (python, members) {
            (true, 0) => out.push_plain("    ...\n"),
            (true, _) => {}
            (false, _) => out.push_plain("}\n"),
        }
    }

    // ----- Relevant headers ------------------------------------------------------------------

    /// ChatLSP's target types: the expected type and its components (type arguments, array
    /// elements), base types left out (section 2.6.1).
    fn targets(&self) -> Vec<Target> {
        self.expected
            .as_ref()
            .map_or_else(Vec::new, |expected| self.targets_of(expected))
    }

    fn targets_of(&self, expected: &ExpectedType) -> Vec<Target> {
        let text = self.types.normal_form(&expected.text);
        std::iter::once(text.as_str())
            .chain(self.types.components(&text))
            .filter(|t| !self.types.is_base_type(t) && !self.types.is_type_variable(t))
            .map(|t| Target {
                text: self.comparable(&self.types.non_null(t)),
                definition: self.resolve(expected.file, t),
            })
            .collect()
    }

    /// The typing context in order of locality: locals nearest first, the members of the
    /// enclosing types, inherited members, static members of imported types, then the
    /// module's own top level and the values it imports from repository modules.
    fn typing_context(&self) -> Vec<Entry<'_>> {
        let mut entries: Vec<Entry> = self
            .syntax
            .locals
            .iter()
            .map(|l| Entry {
                name: l.name.clone(),
                type_name: l.type_name.clone(),
                file: self.hole.file,
                declaration: Declaration::Local(l),
                owner: None,
            })
            .collect();
        let innermost = self.enclosing.first().copied();
        for t in self.enclosing_lineage() {
            let own = self.enclosing.contains(&t);
            let owner = (Some(t) != innermost).then(|| self.type_at(t).name.clone());
            let statics_only = own && self.syntax.is_static;
            entries.extend(self.members(t, owner, |static_, private| {
                (own || !private) && (static_ || !statics_only)
            }));
        }
        for (t, member) in self.imported_types() {
            let owner = Some(self.type_at(t).name.clone());
            entries.extend(
                self.members(t, owner, |static_, private| static_ && !private)
                    .filter(|e| member.as_ref().is_none_or(|m| &e.name == m)),
            );
        }
        if let Some(module) = self.module_of(self.hole.file) {
            entries.extend(self.members(module, None, |_, _| true));
        }
        for (module, names) in self.imported_values() {
            let owner = Some(format!("from {}", self.index.files[module.file].path));
            entries.extend(
                self.members(module, owner, |_, private| !private)
                    .filter(|e| names.contains(&e.name)),
            );
        }
        entries
    }

    /// The top level of `file` as its outline's [`TypeKind::Module`], where the language
    /// outlines one.
    fn module_of(&self, file: FileId) -> Option<TypeRef> {
        let index = self
            .outline(file)
            .iter()
            .position(|t| t.kind == TypeKind::Module)?;
        Some(TypeRef { file, index })
    }

    /// The top levels of the repository modules the current file imports from, each with the
    /// names the file's imports bind (`from .types import STRING`, `import { initial }`).
    fn imported_values(&self) -> Vec<(TypeRef, Vec<String>)> {
        let facts = &self.index.files[self.hole.file].facts;
        let names: Vec<String> = facts
            .imports
            .iter()
            .filter(|i| !i.wildcard)
            .flat_map(|i| i.names.iter().cloned())
            .collect();
        if names.is_empty() {
            return Vec::new();
        }
        self.index.graph.imports[self.hole.file]
            .iter()
            .filter(|i| i.file != self.hole.file)
            .filter_map(|i| self.module_of(i.file))
            .map(|module| (module, names.clone()))
            .collect()
    }

    /// The top levels of the repository modules the current file imports, where one of its
    /// imports binds the first part of `dotted` (`click` of `click.utils`); `None` where none
    /// does.
    fn modules_binding(&self, dotted: &str) -> Option<Vec<TypeRef>> {
        let first = dotted.split('.').next().unwrap_or(dotted);
        let modules: Vec<TypeRef> = self
            .imported_values()
            .into_iter()
            .filter(|(_, names)| names.iter().any(|n| n == first))
            .map(|(module, _)| module)
            .collect();
        (!modules.is_empty()).then_some(modules)
    }

    /// Repository types the current file imports (single-type and static imports), with the
    /// member a static import names.
    fn imported_types(&self) -> Vec<(TypeRef, Option<String>)> {
        let facts = &self.index.files[self.hole.file].facts;
        let mut out = Vec::new();
        for import in facts.imports.iter().filter(|i| !i.wildcard || i.is_static) {
            let found = if import.is_static && !import.wildcard {
                import.path.rsplit_once('.').and_then(|(ty, member)| {
                    Some((self.resolve_qualified(ty)?, Some(member.to_string())))
                })
            } else {
                self.resolve_qualified(&import.path).map(|t| (t, None))
            };
            out.extend(found.filter(|(t, _)| !self.enclosing.contains(t)));
        }
        out
    }

    /// The fields and methods with a value type of `t` that `keep(is_static, is_private)`
    /// admits, in declaration order, the one holding the hole left out.
    fn members(
        &self,
        t: TypeRef,
        owner: Option<String>,
        keep: impl Fn(bool, bool) -> bool,
    ) -> impl Iterator<Item = Entry<'_>> {
        let outline = self.type_at(t);
        let mut found: Vec<(u32, Entry)> = Vec::new();
        for (f, field) in outline.fields.iter().enumerate() {
            if !keep(field.is_static, field.is_private) || self.holds_hole(t.file, field.decl) {
                continue;
            }
            for (n, (name, _)) in field.names.iter().enumerate() {
                found.push((
                    field.decl.start,
                    Entry {
                        name: name.clone(),
                        type_name: field.type_name.clone(),
                        file: t.file,
                        declaration: Declaration::Field(t, f, n),
                        owner: owner.clone(),
                    },
                ));
            }
        }
        for (m, method) in outline.methods.iter().enumerate() {
            let Some(returns) = method.return_type.as_ref().filter(|r| *r != "void") else {
                continue;
            };
            if keep(method.is_static, method.is_private) && !self.holds_hole(t.file, method.decl) {
                found.push((
                    method.decl.start,
                    Entry {
                        name: method.name.clone(),
                        type_name: returns.clone(),
                        file: t.file,
                        declaration: Declaration::Method(t, m),
                        owner: owner.clone(),
                    },
                ));
            }
        }
        found.sort_by_key(|(start, _)| *start);
        found.into_iter().map(|(_, e)| e)
    }

    /// A type in the one form types are compared in: as the language's checker writes it
    /// (a value's type as written, `params: t.List["Parameter"]`, meets a stated
    /// `t.List[Parameter]`), white space left out.
    fn comparable(&self, written: &str) -> String {
        self.types.normal_form(written).split_whitespace().collect()
    }

    /// Whether a value of type `written` (in `file`) is consistent with `target`: the same
    /// type, the same class with other type arguments, or a repository subtype of it.
    fn consistent(&self, written: &str, file: FileId, target: &Target) -> bool {
        let written = &self.types.normal_form(written);
        if self.comparable(&self.types.non_null(written)) == target.text {
            return true;
        }
        let found = self.resolve(file, written);
        match (found, target.definition) {
            (Some(t), Some(def)) => self.lineage(t).contains(&def),
            // Types outside the repository: one name, and the same arguments where both have
            // them (`t.List[str]` is no `t.List["Parameter"]`).
            (None, None) => {
                let arguments = |t: &str| -> Vec<String> {
                    self.types
                        .components(t)
                        .into_iter()
                        .map(|c| self.comparable(c))
                        .collect()
                };
                let (ours, theirs) = (arguments(written), arguments(&target.text));
                self.types.simple_name(written) == self.types.simple_name(&target.text)
                    && (ours.is_empty() || theirs.is_empty() || ours == theirs)
            }
            _ => false,
        }
    }

    /// 1.0 when the entry's type is consistent with a target; [`RELATED_SCORE`] when its type
    /// is a repository type with an instance field or method of a target type.
    fn score(&self, entry: &Entry, targets: &[Target]) -> f64 {
        self.score_written(&entry.type_name, entry.file, targets)
    }

    /// [`Self::score`] of a value of type `produced`, both types as a language server writes
    /// them in the hole's file: where the server's headers are scored by the rules the
    /// syntax tree's are.
    pub fn score_against(&self, produced: &str, expected: &str) -> f64 {
        let expected = ExpectedType {
            text: expected.to_string(),
            file: self.hole.file,
        };
        self.score_written(produced, self.hole.file, &self.targets_of(&expected))
    }

    /// Whether a function or method called `name` is declared around the hole (the one being
    /// written, which is no value to use in it).
    pub fn encloses_hole(&self, name: &str) -> bool {
        self.outline(self.hole.file)
            .iter()
            .flat_map(|t| &t.methods)
            .any(|m| m.name == name && self.holds_hole(self.hole.file, m.decl))
    }

    /// Whether `name` is a parameter or local variable in scope at the hole.
    pub fn is_local(&self, name: &str) -> bool {
        self.syntax.locals.iter().any(|l| l.name == name)
    }

    /// Whether the hole's file writes `name` as a whole word anywhere.
    pub fn file_writes(&self, name: &str) -> bool {
        let is_part = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
        let text = &self.index.files[self.hole.file].text;
        !name.is_empty()
            && text.match_indices(name).any(|(at, _)| {
                let before = text[..at].chars().next_back();
                let after = text[at + name.len()..].chars().next();
                !before.is_some_and(is_part) && !after.is_some_and(is_part)
            })
    }

    fn score_written(&self, written: &str, file: FileId, targets: &[Target]) -> f64 {
        let direct =
            |written: &str, file| targets.iter().any(|t| self.consistent(written, file, t));
        if direct(written, file) {
            return 1.0;
        }
        let Some(t) = self.resolve(file, &self.types.normal_form(written)) else {
            return 0.0;
        };
        let outline = self.type_at(t);
        let via_field = outline
            .fields
            .iter()
            .filter(|f| !f.is_static && !f.is_private)
            .any(|f| direct(&f.type_name, t.file));
        let via_method = outline
            .methods
            .iter()
            .filter(|m| !m.is_static && !m.is_private)
            .filter_map(|m| m.return_type.as_deref())
            .any(|r| direct(r, t.file));
        if via_field || via_method {
            RELATED_SCORE
        } else {
            0.0
        }
    }

    /// The scored headers, best first and stable in locality order among equals, cut as
    /// ChatLSP cuts them.
    pub fn headers(&self) -> Vec<Header> {
        let targets = self.targets();
        if targets.is_empty() {
            return Vec::new();
        }
        let mut scored: Vec<(f64, Entry)> = self
            .typing_context()
            .into_iter()
            .map(|e| (self.score(&e, &targets), e))
            .filter(|(score, _)| *score > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        // One header per name: the nearest declaration is the one the name means there (an
        // override, an overload stub or a module's own assignment after it say nothing more).
        let mut named: Vec<String> = Vec::new();
        scored.retain(|(_, e)| {
            let first = !named.contains(&e.name);
            named.push(e.name.clone());
            first
        });
        scored
            .into_iter()
            .take(MAX_HEADERS)
            .map(|(score, entry)| Header {
                text: self.format_entry(&entry),
                name: entry.name,
                type_name: entry.type_name,
                score,
            })
            .collect()
    }

    /// Candidate 72: ChatLSP's header list, one declaration per line.
    pub fn headers_context(&self) -> SourcedText {
        let mut out = SourcedText::default();
        let headers = self.headers();
        if headers.is_empty() {
            return out;
        }
        out.push_plain(&format!(
            "{} Consider using these variables relevant to the expected type:\n",
            self.comment()
        ));
        for header in headers {
            out.append(header.text);
            out.push_plain("\n");
        }
        out
    }

    /// One header: a declaration as the hole's language writes it, with the type declaring it
    /// in a comment where that is not the innermost type around the hole.
    fn format_entry(&self, entry: &Entry) -> SourcedText {
        let mut out = SourcedText::default();
        match entry.declaration {
            Declaration::Local(local) => {
                let file = self.hole.file;
                match self.style() {
                    // `T name;`
                    DeclarationStyle::Java => {
                        self.push_span(&mut out, file, local.type_span);
                        out.push_plain(" ");
                        self.push_span(&mut out, file, local.name_span);
                        out.push_plain(";");
                    }
                    // The local's type span is its whole `name: T`, or its name alone
                    // where the type was inferred.
                    DeclarationStyle::TypeScript => {
                        self.push_span(&mut out, file, local.type_span);
                        if !self.span_text(file, local.type_span).contains(':') {
                            out.push_plain(&format!(": {}", local.type_name));
                        }
                        out.push_plain(";");
                    }
                    DeclarationStyle::Python => {
                        self.push_span(&mut out, file, local.name_span);
                        out.push_plain(": ");
                        self.push_span(&mut out, file, local.type_span);
                    }
                }
            }
            Declaration::Field(t, f, n) => self.push_field(&mut out, t, f, Some(n)),
            Declaration::Method(t, m) => self.push_method(&mut out, t, m),
        }
        if let Some(owner) = &entry.owner {
            out.push_plain(&format!("  {} {owner}", self.comment()));
        }
        out
    }

    // ----- Formatting with provenance --------------------------------------------------------

    fn style(&self) -> DeclarationStyle {
        self.types.declaration_style()
    }

    /// A field's declaration (name `only` of it, if given): `private final Long id;` in Java,
    /// `readonly id: string;` in TypeScript (its head holds the name), `id: int` in Python.
    fn push_field(&self, out: &mut SourcedText, t: TypeRef, field: usize, only: Option<usize>) {
        let field = &self.type_at(t).fields[field];
        let names = field
            .names
            .iter()
            .enumerate()
            .filter(|(n, _)| only.is_none_or(|o| o == *n));
        match self.style() {
            DeclarationStyle::Java => {
                self.push_span(out, t.file, field.head);
                for (i, (_, (_, span))) in names.enumerate() {
                    out.push_plain(if i == 0 { " " } else { ", " });
                    self.push_span(out, t.file, *span);
                }
                out.push_plain(";");
            }
            DeclarationStyle::TypeScript => {
                self.push_span(out, t.file, field.head);
                // A type the syntax inferred (`const a = new A()`) is not in the head.
                if !self.span_text(t.file, field.head).contains(':') {
                    out.push_plain(&format!(": {}", field.type_name));
                }
                out.push_plain(";");
            }
            DeclarationStyle::Python => {
                for (i, (_, (_, span))) in names.enumerate() {
                    if i > 0 {
                        out.push_plain("\n    ");
                    }
                    self.push_span(out, t.file, *span);
                    out.push_plain(": ");
                    self.push_span(out, t.file, field.head);
                }
            }
        }
    }

    /// A method's signature as a declaration without body: `T m(U u);`, or Python's
    /// `def m(self, u: U) -> T: ...`.
    fn push_method(&self, out: &mut SourcedText, t: TypeRef, method: usize) {
        let signature = self.type_at(t).methods[method].signature;
        self.push_span(out, t.file, signature);
        if self.style() == DeclarationStyle::Python {
            out.push_plain(": ...");
        } else if !self.span_text(t.file, signature).ends_with(';') {
            out.push_plain(";");
        }
    }

    fn span_text(&self, file: FileId, span: Span) -> &str {
        if file == self.hole.file {
            &self.syntax.text[span.range()]
        } else {
            &self.index.files[file].text[span.range()]
        }
    }

    /// Whether `span` of `file` holds the hole (its declaration is being written).
    fn holds_hole(&self, file: FileId, span: Span) -> bool {
        let at = self.syntax.inserted.start;
        file == self.hole.file && (span.start as usize) <= at && at < span.end as usize
    }

    /// Append `span` of `file` with its provenance. Spans of the current file are in the
    /// analysed text: what was inserted at the hole is left out, and what follows maps back
    /// past the cut rest of the line.
    fn push_span(&self, out: &mut SourcedText, file: FileId, span: Span) {
        if file != self.hole.file {
            out.push_span(self.index, file, span);
            return;
        }
        let inserted = &self.syntax.inserted;
        let range = span.range();
        let before = range.start..range.end.min(inserted.start);
        if !before.is_empty() {
            out.push_span(self.index, file, Span::new(before.start, before.end));
        }
        let after = range.start.max(inserted.end)..range.end;
        if !after.is_empty() {
            let shift = |p: usize| p - inserted.len() + self.gap;
            out.push_span(
                self.index,
                file,
                Span::new(shift(after.start), shift(after.end)),
            );
        }
    }
}

// ----- Error round ----------------------------------------------------------------------------

/// A syntax error inside a completion, at a 1-based line and character column of the file
/// with the completion in place.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CompletionError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for CompletionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} {}", self.line, self.column, self.message)
    }
}

/// ChatLSP's error round (section 2.7), syntax only: put `completion` in place of the
/// `replaced` bytes at `offset` of the file at `path` and report the errors inside it. Files
/// of a language keyhole does not know have none.
pub fn completion_errors(
    path: &str,
    file_text: &str,
    offset: usize,
    replaced: usize,
    completion: &str,
) -> Vec<CompletionError> {
    let Some(language) = lang::for_path(Path::new(path)) else {
        return Vec::new();
    };
    let offset = offset.min(file_text.len());
    let end = (offset + replaced).min(file_text.len());
    if !file_text.is_char_boundary(offset) || !file_text.is_char_boundary(end) {
        return Vec::new();
    }
    let text = format!("{}{completion}{}", &file_text[..offset], &file_text[end..]);
    language
        .syntax_errors(&text, offset..offset + completion.len())
        .into_iter()
        .map(|e| {
            let at = e.span.start as usize;
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            CompletionError {
                line: text[..at].matches('\n').count() + 1,
                column: text[line_start..at].chars().count() + 1,
                message: e.message,
            }
        })
        .collect()
}

/// [`completion_errors`] for a completion of `hole` that replaces its target.
pub fn hole_completion_errors(
    index: &RepoIndex,
    hole: &Hole,
    completion: &str,
) -> Vec<CompletionError> {
    let file = &index.files[hole.file];
    let replaced = hole.target.as_ref().map_or(0, String::len);
    completion_errors(&file.path, &file.text, hole.offset, replaced, completion)
}
