//! TypeScript, TSX and JavaScript facts through tree-sitter-typescript, in one pass over the
//! syntax tree, and ES imports resolved to repository files as TypeScript's module resolution
//! finds them (relative specifiers by path, others through the `baseUrl` and `paths` of the
//! file's nearest `tsconfig.json`).

use tree_sitter::{Node, Tree};

use super::tree::{NameUsages, named_children, span};
use super::tsconfig::{TsConfig, normalize};
use super::typescript_typed;
use super::{
    FileFacts, FileId, HoleSyntax, Import, ImportDecl, ImportKind, ImportScope, Language,
    MethodDecl, Span, SyntaxError, TypeDecl, TypeKind, TypeSyntax,
};

/// One of the two grammars tree-sitter-typescript ships: TypeScript proper, and TSX, which
/// also reads JavaScript and JSX. Both are the one language "typescript" to the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grammar {
    TypeScript,
    Tsx,
}

/// TypeScript and JavaScript files of one grammar.
pub struct TypeScript {
    pub grammar: Grammar,
}

pub static TYPESCRIPT: TypeScript = TypeScript {
    grammar: Grammar::TypeScript,
};
pub static TSX: TypeScript = TypeScript {
    grammar: Grammar::Tsx,
};

/// Parse source with `grammar`; `None` only if tree-sitter refuses the grammar (a build
/// problem).
pub fn parse(grammar: Grammar, source: &str) -> Option<Tree> {
    match grammar {
        Grammar::TypeScript => super::tree::parse(
            "typescript",
            || tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            source,
        ),
        Grammar::Tsx => super::tree::parse(
            "tsx",
            || tree_sitter_typescript::LANGUAGE_TSX.into(),
            source,
        ),
    }
}

/// Extensions TypeScript's module resolution tries after a specifier without one, in its
/// order: TypeScript sources and declarations first, then JavaScript.
const TS_EXTENSIONS: [&str; 3] = [".ts", ".tsx", ".d.ts"];
const JS_EXTENSIONS: [&str; 2] = [".js", ".jsx"];

impl Language for TypeScript {
    fn name(&self) -> &'static str {
        "typescript"
    }

    fn display_name(&self) -> &'static str {
        match self.grammar {
            Grammar::TypeScript => "TypeScript",
            Grammar::Tsx => "TSX/JavaScript",
        }
    }

    /// `d.ts` files end in `ts`, so they are TypeScript's.
    fn extensions(&self) -> &'static [&'static str] {
        match self.grammar {
            Grammar::TypeScript => &["ts", "mts", "cts"],
            Grammar::Tsx => &["tsx", "js", "jsx", "mjs", "cjs"],
        }
    }

    fn extract(&self, source: &str) -> FileFacts {
        match parse(self.grammar, source) {
            Some(tree) => {
                let mut facts = Extractor::new(source).run(&tree);
                facts.outline = typescript_typed::outline(tree.root_node(), source);
                facts
            }
            None => FileFacts::default(),
        }
    }

    fn line_comment(&self) -> &'static str {
        "//"
    }

    /// `//` and `/*` comments and the `*` lines of a block comment, as for Java.
    fn is_comment_line(&self, trimmed: &str) -> bool {
        trimmed.starts_with("//") || trimmed.starts_with("/*") || trimmed.starts_with('*')
    }

    fn hole_syntax(&self, source: &str, hole: usize) -> HoleSyntax {
        let holes = match self.grammar {
            Grammar::TypeScript => &typescript_typed::HOLES,
            Grammar::Tsx => &typescript_typed::TSX_HOLES,
        };
        super::hole_grammar::hole_syntax(holes, source, hole)
    }

    fn syntax_errors(&self, source: &str, within: std::ops::Range<usize>) -> Vec<SyntaxError> {
        parse(self.grammar, source)
            .map_or_else(Vec::new, |tree| super::tree::errors(&tree, source, within))
    }

    /// `import` lines, re-exports (`export ... from`) and the `"use strict"` directive.
    fn is_preamble_line(&self, trimmed: &str) -> bool {
        let reexport = trimmed.starts_with("export ")
            && (trimmed.contains(" from '") || trimmed.contains(" from \""));
        let directive = matches!(
            trimmed.trim_end_matches(';'),
            "\"use strict\"" | "'use strict'"
        );
        trimmed.starts_with("import ") || reexport || directive
    }

    /// npm's, pnpm's and yarn's installs: TypeScript resolves a bare specifier there only
    /// through a package's own `package.json`, never as the repository's sources.
    fn vendored_dirs(&self) -> &'static [&'static str] {
        &["node_modules"]
    }

    fn types(&self) -> &'static dyn TypeSyntax {
        &typescript_typed::TypeScriptTypes
    }

    /// Each top-level type as `module#Name` (its path without extension), where it is
    /// declared, and as `dir#Name` for every directory above it, where a barrel that
    /// re-exports it may be imported; the first file of a directory claims a name there.
    fn qualified_names(&self, path: &str, facts: &FileFacts) -> Vec<(String, bool)> {
        let module = module_path(path);
        let dirs: Vec<&str> = std::iter::once("")
            .chain(module.match_indices('/').map(|(i, _)| &module[..i]))
            .collect();
        let mut names = Vec::new();
        for decl in facts.types.iter().filter(|t| t.top_level) {
            names.push((qualified(module, &decl.name), true));
            names.extend(dirs.iter().map(|d| (qualified(d, &decl.name), false)));
        }
        names
    }

    /// Each import, re-export, `require` and `import()` whose specifier names a repository
    /// file, with the lines its bound names are used on.
    fn resolve_imports(
        &self,
        path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import> {
        let config = TsConfig::of_file(path, scope);
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        let mut found = Vec::new();
        for import in &facts.imports {
            let Some((target, target_path)) = resolve_specifier(dir, &import.path, &config, scope)
            else {
                continue;
            };
            let kind = match import.wildcard {
                true => ImportKind::Wildcard,
                false => ImportKind::Single,
            };
            let lines_of = |name: &str| facts.usages_of(name).to_vec();
            let mut lines: Vec<u32> = import.names.iter().flat_map(|n| lines_of(n)).collect();
            lines.sort_unstable();
            lines.dedup();
            super::add_import(&mut found, target, kind, &lines);
            // A name the target only re-exports (a barrel `index.ts`) reaches the file of its
            // subtree that declares it.
            let module = module_path(&target_path);
            let dir = target_path.rsplit_once('/').map_or("", |(d, _)| d);
            for name in &import.names {
                let declared_there = scope.declaring(&qualified(module, name)).is_some();
                if let Some(declaring) = scope
                    .declaring(&qualified(dir, name))
                    .filter(|d| !declared_there && *d != target)
                {
                    super::add_import(&mut found, declaring, kind, &lines_of(name));
                }
            }
        }
        found
    }
}

// ----- Module resolution ----------------------------------------------------------------------

/// A file's path without its extension (`.d.ts` whole): the module it is.
fn module_path(path: &str) -> &str {
    let stem = path.strip_suffix(".d.ts").unwrap_or(path);
    match stem.rsplit_once('.') {
        Some((module, extension)) if !extension.contains('/') && !module.ends_with('/') => module,
        _ => stem,
    }
}

/// `module#Name`: a declaration's name under [`Language::qualified_names`].
fn qualified(module: &str, name: &str) -> String {
    format!("{module}#{name}")
}

/// The file an import specifier written in `dir` names, if it is a repository file. Bare
/// package names (`react`) without a `paths` or `baseUrl` match are not.
fn resolve_specifier(
    dir: &str,
    specifier: &str,
    config: &TsConfig,
    scope: &dyn ImportScope,
) -> Option<(FileId, String)> {
    let relative = specifier == "."
        || specifier == ".."
        || specifier.starts_with("./")
        || specifier.starts_with("../");
    if relative {
        return resolve_path(&normalize(dir, specifier)?, scope);
    }
    if specifier.starts_with('/') {
        return None;
    }
    config
        .candidates(specifier)
        .iter()
        .find_map(|path| resolve_path(path, scope))
}

/// A module path as TypeScript resolves it: a `.js`-family specifier names its TypeScript
/// source (ESM style), then the path with TypeScript extensions, as a directory's `index`
/// with them, then the same with JavaScript extensions; a path with a known extension is
/// also taken as it is.
fn resolve_path(path: &str, scope: &dyn ImportScope) -> Option<(FileId, String)> {
    let at = |candidate: String| scope.file_at(&candidate).map(|id| (id, candidate));
    let path = path.trim_end_matches('/');
    let swaps: [(&str, &[&str]); 4] = [
        (".js", &[".ts", ".tsx", ".d.ts"]),
        (".jsx", &[".tsx"]),
        (".mjs", &[".mts", ".d.mts"]),
        (".cjs", &[".cts", ".d.cts"]),
    ];
    for (js, sources) in swaps {
        if let Some(stem) = path.strip_suffix(js) {
            let found = sources.iter().find_map(|s| at(format!("{stem}{s}")));
            if found.is_some() {
                return found;
            }
        }
    }
    if let Some(found) = at(path.to_string()).filter(|_| has_source_extension(path)) {
        return Some(found);
    }
    let with =
        |extensions: &[&str], base: &str| extensions.iter().find_map(|e| at(format!("{base}{e}")));
    let index = if path.is_empty() {
        "index".to_string()
    } else {
        format!("{path}/index")
    };
    with(&TS_EXTENSIONS, path)
        .or_else(|| with(&TS_EXTENSIONS, &index))
        .or_else(|| with(&JS_EXTENSIONS, path))
        .or_else(|| with(&JS_EXTENSIONS, &index))
}

fn has_source_extension(path: &str) -> bool {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    [&TYPESCRIPT, &TSX]
        .iter()
        .any(|l| l.extensions().contains(&extension))
}

// ----- Extraction -----------------------------------------------------------------------------

struct Extractor<'a> {
    source: &'a str,
    facts: FileFacts,
    usages: NameUsages<'a>,
    /// The names a `const x = require('./e')` binds, for the call at this byte.
    pending_names: Option<(usize, Vec<String>)>,
}

/// The declarations a node is: a class (also an abstract one or a named class expression),
/// interface, type alias or enum.
pub(super) fn type_kind(kind: &str) -> Option<TypeKind> {
    match kind {
        "class_declaration" | "abstract_class_declaration" | "class" => Some(TypeKind::Class),
        // A type alias names a structural type, as an interface does.
        "interface_declaration" | "type_alias_declaration" => Some(TypeKind::Interface),
        "enum_declaration" => Some(TypeKind::Enum),
        _ => None,
    }
}

/// Functions and methods with a name field (arrow functions are named by their variable).
fn is_function(kind: &str) -> bool {
    matches!(
        kind,
        "function_declaration"
            | "generator_function_declaration"
            | "function_signature"
            | "method_definition"
            | "method_signature"
            | "abstract_method_signature"
    )
}

/// The string's contents without its quotes.
fn string_value<'a>(node: Node, source: &'a str) -> Option<&'a str> {
    let text = &source[node.byte_range()];
    (node.kind() == "string" && text.len() >= 2).then(|| &text[1..text.len() - 1])
}

impl<'a> Extractor<'a> {
    fn new(source: &'a str) -> Self {
        Extractor {
            source,
            facts: FileFacts::default(),
            usages: NameUsages::default(),
            pending_names: None,
        }
    }

    fn text(&self, node: Node) -> &'a str {
        &self.source[node.byte_range()]
    }

    /// Depth-first walk without recursion, so deeply nested code cannot overflow the stack.
    /// `kinds` holds the kinds of the nodes above the current one.
    fn run(mut self, tree: &Tree) -> FileFacts {
        let mut cursor = tree.walk();
        let mut kinds: Vec<&'static str> = Vec::new();
        // Depth at which we entered an import or re-export, if inside one.
        let mut header_depth: Option<usize> = None;
        loop {
            let node = cursor.node();
            if self.visit(node, &kinds, header_depth.is_some()) && header_depth.is_none() {
                header_depth = Some(kinds.len());
            }
            if cursor.goto_first_child() {
                kinds.push(node.kind());
                continue;
            }
            loop {
                if header_depth == Some(kinds.len()) {
                    header_depth = None;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return self.finish();
                }
                kinds.pop();
            }
        }
    }

    /// Record what `node` (below nodes of `kinds`) contributes; returns true when it starts
    /// an import header, whose names are not usages.
    fn visit(&mut self, node: Node, kinds: &[&'static str], in_header: bool) -> bool {
        if node.is_error() || node.is_missing() {
            self.facts.syntax_errors += 1;
        }
        match node.kind() {
            "identifier"
            | "property_identifier"
            | "shorthand_property_identifier"
            | "shorthand_property_identifier_pattern"
            | "private_property_identifier" => {
                self.facts.identifiers.push(span(node));
                self.usage(node, in_header);
            }
            "type_identifier" => {
                self.facts.type_identifiers.push(span(node));
                self.usage(node, in_header);
            }
            "string" | "template_string" if !in_header => {
                // A template's nested strings are its own.
                if kinds.last() != Some(&"template_substitution") || node.kind() == "string" {
                    self.facts.string_literals.push(span(node));
                }
            }
            "public_field_definition" | "property_signature" => {
                self.facts.field_declarations.push(span(node));
            }
            "required_parameter" | "optional_parameter" if is_parameter_property(node) => {
                self.facts.field_declarations.push(span(node));
            }
            "import_statement" => {
                self.import(node);
                return true;
            }
            "export_statement" if node.child_by_field_name("source").is_some() => {
                self.reexport(node);
                return true;
            }
            "lexical_declaration" | "variable_declaration" => self.function_variables(node),
            // `const x = require('./e')` is an import line: its names are not usages.
            "variable_declarator" => return self.note_require(node),
            "call_expression" => self.dynamic_import(node),
            kind if is_function(kind) => self.method(node),
            kind => {
                if let Some(type_kind) = type_kind(kind) {
                    let top_level = matches!(kinds, [_] | [_, "export_statement"]);
                    self.type_decl(node, type_kind, top_level);
                }
            }
        }
        false
    }

    fn usage(&mut self, node: Node, in_header: bool) {
        if in_header {
            return;
        }
        self.usages.record(self.text(node), node);
    }

    /// `import x, { A, B as C } from './b'`, `import * as ns from './c'`, `import './d'`,
    /// `import x = require('./e')`.
    fn import(&mut self, node: Node) {
        let mut names = Vec::new();
        let mut source = node.child_by_field_name("source");
        for child in named_children(node) {
            match child.kind() {
                "import_clause" => {
                    for part in named_children(child) {
                        match part.kind() {
                            "identifier" => names.push(self.text(part).to_string()),
                            "namespace_import" => names.extend(
                                named_children(part)
                                    .into_iter()
                                    .map(|n| self.text(n).to_string()),
                            ),
                            "named_imports" => {
                                for specifier in named_children(part) {
                                    let bound = specifier
                                        .child_by_field_name("alias")
                                        .or_else(|| specifier.child_by_field_name("name"));
                                    names.extend(bound.map(|b| self.text(b).to_string()));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                "import_require_clause" => {
                    source = child.child_by_field_name("source");
                    names.extend(
                        named_children(child)
                            .into_iter()
                            .filter(|c| c.kind() == "identifier")
                            .map(|c| self.text(c).to_string()),
                    );
                }
                _ => {}
            }
        }
        self.push_import(source, false, names);
    }

    /// `export { A } from './d'` binds nothing here; `export * from './d'` is a wildcard.
    fn reexport(&mut self, node: Node) {
        let wildcard = named_children(node)
            .iter()
            .all(|c| c.kind() != "export_clause");
        self.push_import(node.child_by_field_name("source"), wildcard, Vec::new());
    }

    fn push_import(&mut self, source: Option<Node>, wildcard: bool, names: Vec<String>) {
        let Some(path) = source.and_then(|s| string_value(s, self.source)) else {
            return;
        };
        self.facts.imports.push(ImportDecl {
            path: path.to_string(),
            wildcard,
            is_static: false,
            names,
        });
    }

    /// `const x = require('./e')` and `const { a, b } = await import('./f')`: the names the
    /// call's import binds; true when the declarator is such an import.
    fn note_require(&mut self, node: Node) -> bool {
        let (Some(name), Some(mut value)) = (
            node.child_by_field_name("name"),
            node.child_by_field_name("value"),
        ) else {
            return false;
        };
        if value.kind() == "await_expression" {
            match value.named_child(0) {
                Some(inner) => value = inner,
                None => return false,
            }
        }
        if self.loaded_module(value).is_none() {
            return false;
        }
        let names = match name.kind() {
            "identifier" => vec![self.text(name).to_string()],
            "object_pattern" => named_children(name)
                .into_iter()
                .filter_map(|p| match p.kind() {
                    "shorthand_property_identifier_pattern" => Some(p),
                    "pair_pattern" => p.child_by_field_name("value"),
                    _ => None,
                })
                .filter(|n| n.kind() == "identifier" || n.kind().starts_with("shorthand"))
                .map(|n| self.text(n).to_string())
                .collect(),
            _ => Vec::new(),
        };
        self.pending_names = Some((value.start_byte(), names));
        true
    }

    /// The specifier of a `require('./e')` or `import('./f')` call with a string argument.
    fn loaded_module<'t>(&self, call: Node<'t>) -> Option<Node<'t>> {
        let function = call
            .child_by_field_name("function")
            .filter(|_| call.kind() == "call_expression")?;
        let loads = function.kind() == "import"
            || (function.kind() == "identifier" && self.text(function) == "require");
        if !loads {
            return None;
        }
        call.child_by_field_name("arguments")
            .and_then(|a| a.named_child(0))
            .filter(|a| a.kind() == "string")
    }

    /// `require('./e')` and `import('./f')`, with the names a declaration binds to them.
    fn dynamic_import(&mut self, node: Node) {
        let Some(specifier) = self.loaded_module(node) else {
            return;
        };
        let names = match self.pending_names.take() {
            Some((at, names)) if at == node.start_byte() => names,
            _ => Vec::new(),
        };
        self.push_import(Some(specifier), false, names);
    }

    fn type_decl(&mut self, node: Node, kind: TypeKind, top_level: bool) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        self.facts.types.push(TypeDecl {
            name: self.text(name).to_string(),
            kind,
            name_span: span(name),
            superclass: superclass(node, self.source).map(str::to_string),
            top_level,
        });
    }

    fn method(&mut self, node: Node) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        let signature = header_span(node, self.source);
        self.facts.methods.push(MethodDecl {
            name: span(name),
            signature,
            with_body: Span::new(signature.start as usize, node.end_byte()),
        });
    }

    /// `const f = (a: number): string => ...` and `let g = function () {...}`: methods named
    /// by their variable, the signature from the declaration's keyword to the body.
    fn function_variables(&mut self, declaration: Node) {
        for declarator in named_children(declaration) {
            let (Some(name), Some(value)) = (
                declarator.child_by_field_name("name"),
                declarator.child_by_field_name("value"),
            ) else {
                continue;
            };
            let is_function = matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "generator_function"
            );
            if !is_function || name.kind() != "identifier" {
                continue;
            }
            let start = declaration.start_byte();
            let body_start = value
                .child_by_field_name("body")
                .map_or(value.end_byte(), |b| b.start_byte());
            let end = start + self.source[start..body_start].trim_end().len();
            self.facts.methods.push(MethodDecl {
                name: span(name),
                signature: Span::new(start, end.max(start)),
                with_body: Span::new(start, value.end_byte().max(declaration.end_byte())),
            });
        }
    }

    fn finish(mut self) -> FileFacts {
        self.facts.name_usages = self.usages.into_sorted();
        self.facts
    }
}

/// A constructor parameter with `public`, `private`, `protected` or `readonly` declares a
/// field.
pub(super) fn is_parameter_property(parameter: Node) -> bool {
    let mut cursor = parameter.walk();
    parameter
        .children(&mut cursor)
        .any(|c| c.kind() == "accessibility_modifier" || (c.kind() == "readonly" && !c.is_named()))
}

/// The simple name of the class a class extends: `extends Base<T>` and `extends ns.Base` →
/// `Base`; none for a computed base (`extends mixin(Base)`).
pub(super) fn superclass<'a>(class: Node, source: &'a str) -> Option<&'a str> {
    let heritage = named_children(class)
        .into_iter()
        .find(|c| c.kind() == "class_heritage")?;
    let extends = named_children(heritage)
        .into_iter()
        .find(|c| c.kind() == "extends_clause")?;
    let value = extends.child_by_field_name("value")?;
    match value.kind() {
        "identifier" => Some(&source[value.byte_range()]),
        "member_expression" => {
            let property = value.child_by_field_name("property")?;
            Some(&source[property.byte_range()])
        }
        _ => None,
    }
}

/// A declaration from its first keyword (decorators left out) to the start of its body,
/// trimmed: a method's signature, a type's header.
pub(super) fn header_span(node: Node, source: &str) -> Span {
    let start = signature_start(node);
    let body = node.child_by_field_name("body");
    let end = body.map_or(node.end_byte(), |b| b.start_byte());
    let end = start + source[start..end.max(start)].trim_end().len();
    Span::new(start, end)
}

/// Where a declaration starts after its decorators and comments.
pub(super) fn signature_start(node: Node) -> usize {
    let mut cursor = node.walk();
    let first = node
        .children(&mut cursor)
        .find(|c| !matches!(c.kind(), "decorator" | "comment"));
    first.map_or(node.start_byte(), |c| c.start_byte())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::lang::ProjectFile;

    const SOURCE: &str = r#"import { Order, LineItem as Item } from './model/order';
import type { Money } from "../money";
import * as util from './util';
import Base from '@app/base';
import React from 'react';
export * from './events';
export { Status } from './status';

/** An order service. */
export class OrderService extends Base<Order> implements Service {
    private static readonly PREFIX = "order-";
    private total: Money = util.zero();

    constructor(private readonly repository: OrderRepository, name: string) {
        super(name);
    }

    @cached
    public find(id: number): Order | undefined {
        return this.repository.findById(id);
    }

    abstract close(): void;
}

interface Service { start(): void; }
type Id = string;
enum Color { Red, Green }
export const total = (items: Item[]): number => items.length;
const fs = require('./fs-shim');
"#;

    fn text(span: Span) -> &'static str {
        &SOURCE[span.range()]
    }

    #[test]
    fn extracts_imports_with_their_bound_names() {
        let facts = TYPESCRIPT.extract(SOURCE);
        let imports: Vec<_> = facts
            .imports
            .iter()
            .map(|i| (i.path.as_str(), i.wildcard, i.names.join(",")))
            .collect();
        assert_eq!(
            imports,
            vec![
                ("./model/order", false, "Order,Item".to_string()),
                ("../money", false, "Money".to_string()),
                ("./util", false, "util".to_string()),
                ("@app/base", false, "Base".to_string()),
                ("react", false, "React".to_string()),
                ("./events", true, String::new()),
                ("./status", false, String::new()),
                ("./fs-shim", false, "fs".to_string()),
            ]
        );
        assert_eq!(facts.syntax_errors, 0);
    }

    #[test]
    fn extracts_types_members_and_signatures() {
        let facts = TYPESCRIPT.extract(SOURCE);
        let types: Vec<_> = facts
            .types
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.kind,
                    t.superclass.as_deref(),
                    t.top_level,
                )
            })
            .collect();
        assert_eq!(
            types,
            vec![
                ("OrderService", TypeKind::Class, Some("Base"), true),
                ("Service", TypeKind::Interface, None, true),
                ("Id", TypeKind::Interface, None, true),
                ("Color", TypeKind::Enum, None, true),
            ]
        );
        let fields: Vec<_> = facts.field_declarations.iter().map(|s| text(*s)).collect();
        assert_eq!(
            fields,
            vec![
                "private static readonly PREFIX = \"order-\"",
                "private total: Money = util.zero()",
                "private readonly repository: OrderRepository",
            ]
        );
        let signatures: Vec<_> = facts.methods.iter().map(|m| text(m.signature)).collect();
        assert_eq!(
            signatures,
            vec![
                "constructor(private readonly repository: OrderRepository, name: string)",
                "public find(id: number): Order | undefined",
                "abstract close(): void",
                "start(): void",
                "const total = (items: Item[]): number =>",
            ]
        );
        assert_eq!(text(facts.methods[4].name), "total");
        assert!(text(facts.methods[1].with_body).ends_with("findById(id);\n    }"));
        assert_eq!(text(facts.string_literals[0]), "\"order-\"");
    }

    #[test]
    fn usages_leave_out_import_lines() {
        let facts = TYPESCRIPT.extract(SOURCE);
        assert_eq!(facts.usages_of("Order"), &[9, 18]);
        assert_eq!(facts.usages_of("Item"), &[28]);
        assert_eq!(facts.usages_of("util"), &[11]);
        assert_eq!(facts.usages_of("Status"), &[] as &[u32]);
    }

    #[test]
    fn tsx_reads_javascript_and_jsx() {
        let source = "const path = require('./path');\nimport { h } from './h.js';\n\
                      class View extends Base { render() { return <div title=\"x\">{path}</div>; } }\n";
        let facts = TSX.extract(source);
        assert_eq!(facts.syntax_errors, 0);
        assert_eq!(facts.imports.len(), 2);
        assert_eq!(facts.types[0].superclass.as_deref(), Some("Base"));
        assert_eq!(facts.usages_of("path"), &[2]);
    }

    #[test]
    fn broken_code_still_yields_facts() {
        let facts = TYPESCRIPT.extract("class A { f() { let x = ; } s = \"hi\"; ");
        assert!(facts.syntax_errors > 0);
        assert_eq!(facts.types[0].name, "A");
        assert!(TSX.extract("\u{0}\u{1}{{{{((((<<<").syntax_errors > 0);
    }

    #[test]
    fn comment_and_preamble_lines() {
        let ts = &TYPESCRIPT;
        assert!(
            ts.is_comment_line("// x")
                && ts.is_comment_line("/** doc")
                && ts.is_comment_line("* b")
        );
        assert!(!ts.is_comment_line("a / b"));
        assert!(ts.is_preamble_line("import { A } from './a';"));
        assert!(ts.is_preamble_line("export * from \"./b\";"));
        assert!(ts.is_preamble_line("'use strict';"));
        assert!(!ts.is_preamble_line("export class A {}"));
    }

    /// A repository of paths, for resolution tests.
    struct Files {
        paths: Vec<&'static str>,
        configs: Vec<(String, Arc<ProjectFile>)>,
    }

    /// Project files at their paths.
    fn configs(files: &[(&str, &str)]) -> Vec<(String, Arc<ProjectFile>)> {
        let file = |text: &str| Arc::new(ProjectFile::new(text.to_string()));
        files
            .iter()
            .map(|&(path, text)| (path.to_string(), file(text)))
            .collect()
    }

    impl ImportScope for Files {
        fn file_at(&self, path: &str) -> Option<FileId> {
            self.paths.iter().position(|p| *p == path)
        }
        fn declaring(&self, _: &str) -> Option<FileId> {
            None
        }
        fn project_file(&self, path: &str) -> Option<Arc<ProjectFile>> {
            let found = self.configs.iter().find(|(p, _)| p == path);
            found.map(|(_, file)| file.clone())
        }
    }

    fn resolved(files: &Files, from: &str, source: &str) -> Vec<(&'static str, Vec<u32>)> {
        let facts = TSX.extract(source);
        TYPESCRIPT
            .resolve_imports(from, &facts, files)
            .into_iter()
            .map(|i| (files.paths[i.file], i.usage_lines))
            .collect()
    }

    #[test]
    fn relative_specifiers_resolve_as_typescript_does() {
        let files = Files {
            paths: vec![
                "src/model/order.ts",
                "src/model/order.js",
                "src/util/index.ts",
                "src/h.tsx",
                "src/types.d.ts",
                "lib/legacy.js",
                "src/app.ts",
            ],
            configs: Vec::new(),
        };
        let source = "import { Order } from './model/order';\nimport * as u from './util';\n\
                      import { h } from './h.js';\nimport type { T } from './types';\n\
                      const legacy = require('../lib/legacy');\nimport React from 'react';\n\
                      import { X } from '../../outside';\n\
                      let o: Order = u.make(h, legacy);\n";
        assert_eq!(
            resolved(&files, "src/app.ts", source),
            vec![
                ("src/model/order.ts", vec![7]),
                ("src/util/index.ts", vec![7]),
                ("src/h.tsx", vec![7]),
                ("src/types.d.ts", vec![]),
                ("lib/legacy.js", vec![7]),
            ]
        );
    }

    #[test]
    fn tsconfig_paths_and_base_url_resolve_bare_specifiers() {
        let mut files = Files {
            paths: vec!["src/app/core/base.ts", "src/shared/log.ts", "src/main.ts"],
            configs: configs(&[(
                "tsconfig.json",
                r#"{
                  // comments and trailing commas are allowed
                  "compilerOptions": {
                    "baseUrl": "./src",
                    "paths": { "@app/*": ["app/*"], "@log": ["shared/log.ts"], },
                  },
                }"#,
            )]),
        };
        let source = "import { Base } from '@app/core/base';\nimport log from '@log';\n\
                      import { x } from 'shared/log';\nimport React from 'react';\n";
        assert_eq!(
            resolved(&files, "src/main.ts", source),
            vec![
                ("src/app/core/base.ts", vec![]),
                ("src/shared/log.ts", vec![])
            ]
        );
        files.configs = configs(&[("tsconfig.json", "{ not json")]);
        assert!(resolved(&files, "src/main.ts", source).is_empty());
        let problem = files.configs[0].1.problem().unwrap();
        assert!(problem.contains("line 1"), "{problem}");
    }

    #[test]
    fn each_file_reads_its_nearest_tsconfig_and_what_it_extends() {
        let files = Files {
            paths: vec![
                "packages/app/src/main.ts",
                "packages/shared/src/log.ts",
                "packages/web/src/page.ts",
                "packages/web/src/ui/button.ts",
                "packages/admin/src/panel.ts",
                "packages/admin/lib/log.ts",
                "tools/build.ts",
            ],
            configs: configs(&[
                // Paths without a baseUrl are relative to the file that writes them.
                (
                    "tsconfig.base.json",
                    r#"{ "compilerOptions": { "paths": { "@shared/*": ["packages/shared/src/*"] } } }"#,
                ),
                // `extends` without `.json`.
                (
                    "packages/app/tsconfig.json",
                    r#"{ "extends": "../../tsconfig.base" }"#,
                ),
                // A baseUrl (relative to this file) makes the extended paths relative to it,
                // as TypeScript does.
                (
                    "packages/web/tsconfig.json",
                    r#"{ "extends": ["../../tsconfig.base.json"], "compilerOptions": { "baseUrl": "src" } }"#,
                ),
                // Its own `paths` replace the extended ones.
                (
                    "packages/admin/tsconfig.json",
                    r#"{ "extends": "../../tsconfig.base.json",
                         "compilerOptions": { "paths": { "@shared/*": ["lib/*"] } } }"#,
                ),
            ]),
        };
        let source = "import { log } from '@shared/log';\nimport { Button } from 'ui/button';\n";
        let resolved_from = |path| resolved(&files, path, source);
        assert_eq!(
            resolved_from("packages/app/src/main.ts"),
            vec![("packages/shared/src/log.ts", vec![])]
        );
        assert_eq!(
            resolved_from("packages/web/src/page.ts"),
            vec![("packages/web/src/ui/button.ts", vec![])]
        );
        assert_eq!(
            resolved_from("packages/admin/src/panel.ts"),
            vec![("packages/admin/lib/log.ts", vec![])]
        );
        // No tsconfig above the file: relative specifiers only.
        assert!(resolved_from("tools/build.ts").is_empty());
    }

    #[test]
    fn extends_cycles_and_chains_end() {
        let mut configs_list = vec![
            (
                "a/tsconfig.json".to_string(),
                r#"{ "extends": "./b.json", "compilerOptions": { "baseUrl": "." } }"#.to_string(),
            ),
            (
                "a/b.json".to_string(),
                r#"{ "extends": "./tsconfig.json", "compilerOptions": { "paths": { "@x": ["x.ts"] } } }"#
                    .to_string(),
            ),
        ];
        // A chain longer than any real one, each link extending the next.
        for i in 0..39 {
            configs_list.push((
                format!("c/{i}.json"),
                format!(r#"{{ "extends": "./{}.json" }}"#, i + 1),
            ));
        }
        configs_list.push((
            "c/tsconfig.json".to_string(),
            r#"{ "extends": "./0.json", "compilerOptions": { "baseUrl": "." } }"#.to_string(),
        ));
        configs_list.push((
            "c/39.json".to_string(),
            r#"{ "compilerOptions": { "paths": { "@x": ["x.ts"] } } }"#.to_string(),
        ));
        let list: Vec<(&str, &str)> = configs_list
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let files = Files {
            paths: vec!["a/x.ts", "a/main.ts", "c/x.ts", "c/main.ts"],
            configs: configs(&list),
        };
        let source = "import { x } from '@x';\n";
        assert_eq!(
            resolved(&files, "a/main.ts", source),
            vec![("a/x.ts", vec![])]
        );
        // The far end of the long chain (its `paths`) is beyond the bound; `baseUrl` of the
        // nearest file still applies.
        assert!(resolved(&files, "c/main.ts", source).is_empty());
        assert_eq!(
            resolved(&files, "c/main.ts", "import { x } from 'x';\n"),
            vec![("c/x.ts", vec![])]
        );
    }
}
