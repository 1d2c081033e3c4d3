//! TypeScript, TSX and JavaScript facts through tree-sitter-typescript, in one pass over the
//! syntax tree, and ES imports resolved to repository files as TypeScript's module resolution
//! finds them: relative specifiers by path, others as a module a declaration file of the
//! repository declares by name (`declare module "x"`), else through the `baseUrl` and `paths`
//! of the file's nearest `tsconfig.json`, then the repository's own packages by name
//! ([`super::packages`]). A name imported from a barrel is followed to the file that declares
//! it, and a namespace's members used through it (`core.parse`) to theirs; CommonJS exports
//! (`module.exports = ...`, `exports.x = ...`) read as ES exports, `require` as an import.

use std::cell::RefCell;

use rustc_hash::FxHashMap;
use tree_sitter::{Node, Tree};

use super::tree::{DottedUsages, NameUsages, named_children, span};
use super::tsconfig::{TsConfig, normalize};
pub use super::typescript_tree::{Grammar, parse};
use super::typescript_tree::{header_span, is_parameter_property, type_kind};
use super::typescript_typed;
pub use super::typescript_typed::union_members;
use super::{
    FileFacts, FileId, HoleSyntax, Import, ImportDecl, ImportKind, ImportScope, Language,
    MethodDecl, Span, SyntaxError, TypeDecl, TypeKind, TypeSyntax,
};

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
                facts.outline =
                    super::Outlines::of(typescript_typed::outline(tree.root_node(), source));
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

    /// The modules the file declares by name (`declare module "legacy-charts"`), under
    /// [`ambient_module`]'s key.
    fn qualified_names(&self, _path: &str, facts: &FileFacts) -> Vec<(String, bool)> {
        let names = facts.ambient_modules.iter();
        names.map(|name| (ambient_module(name), true)).collect()
    }

    /// npm's, pnpm's and yarn's installs: TypeScript resolves a bare specifier there only
    /// through a package's own `package.json`, never as the repository's sources.
    fn vendored_dirs(&self) -> &'static [&'static str] {
        &["node_modules"]
    }

    fn types(&self) -> &'static dyn TypeSyntax {
        &typescript_typed::TypeScriptTypes
    }

    /// Each import, re-export, `require` and `import()` whose specifier names a repository
    /// file, with the lines its bound names are used on; and for each name it binds, the file
    /// that declares what the name stands for, followed through barrels (`export * from`,
    /// `export { a as b } from`, `export * as ns from`, an imported name exported again): for
    /// a namespace (`import * as core`, or a name a barrel exports as one), the files that
    /// declare the members used through it (`core.parse`).
    fn resolve_imports(
        &self,
        path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import> {
        // The file's configuration is read whether or not an import needs it, so that what
        // is wrong with it is said whatever the file imports.
        TsConfig::of_file(path, scope);
        let modules = Modules::new(scope);
        let mut found = Vec::new();
        for import in &facts.imports {
            let Some(target) = modules.resolve(path, &import.path) else {
                continue;
            };
            let kind = match import.wildcard {
                true => ImportKind::Wildcard,
                false => ImportKind::Single,
            };
            let mut lines: Vec<u32> = import
                .names
                .iter()
                .flat_map(|n| facts.usages_of(n).iter().copied())
                .collect();
            lines.sort_unstable();
            lines.dedup();
            super::add_import(&mut found, target, kind, &lines);
            if import.reexport {
                continue;
            }
            for (bound, taken) in &import.members {
                let denoted = match taken.as_str() {
                    "*" => Denoted::Namespace(target),
                    name => match modules.declaring(target, name) {
                        Some(denoted) => denoted,
                        None => continue,
                    },
                };
                let used = facts.usages_of(bound);
                match denoted {
                    Denoted::Declared(home) | Denoted::Namespace(home) if home != target => {
                        super::add_import(&mut found, home, kind, used)
                    }
                    _ => {}
                }
                if let Denoted::Namespace(namespace) = denoted {
                    for (rest, used) in facts.dotted_uses_of(bound) {
                        if let Some(home) = modules.through(namespace, rest)
                            && home != target
                        {
                            super::add_import(&mut found, home, kind, used);
                        }
                    }
                }
            }
        }
        found
    }
}

// ----- Module resolution ----------------------------------------------------------------------

/// What a name a module offers stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Denoted {
    /// A declaration of this file.
    Declared(FileId),
    /// This module as a whole (`export * as ns from`, an `import * as ns` exported again).
    Namespace(FileId),
}

/// How many barrels deep a name is followed to the file that declares it.
const REEXPORT_DEPTH: usize = 8;

/// TypeScript's module lookup for the imports of one file: the file a specifier names from a
/// file, and the file declaring a name a module offers. Specifiers are resolved once per
/// importing directory, however many names are followed through the same barrels.
struct Modules<'s> {
    scope: &'s dyn ImportScope,
    resolved: RefCell<FxHashMap<(String, String), Option<FileId>>>,
}

impl<'s> Modules<'s> {
    fn new(scope: &'s dyn ImportScope) -> Self {
        Modules {
            scope,
            resolved: RefCell::default(),
        }
    }

    /// The file `specifier`, written in the file at `from`, names.
    fn resolve(&self, from: &str, specifier: &str) -> Option<FileId> {
        let dir = from.rsplit_once('/').map_or("", |(d, _)| d);
        let key = (dir.to_string(), specifier.to_string());
        if let Some(known) = self.resolved.borrow().get(&key) {
            return *known;
        }
        let found = resolve_specifier(from, specifier, self.scope).map(|(id, _)| id);
        self.resolved.borrow_mut().insert(key, found);
        found
    }

    /// What `name` stands for as `module` offers it: its own declaration, else what it
    /// re-exports under that name, followed [`REEXPORT_DEPTH`] barrels deep, each file once.
    fn declaring(&self, module: FileId, name: &str) -> Option<Denoted> {
        let mut seen = Vec::new();
        self.declaring_within(module, name, REEXPORT_DEPTH, &mut seen)
    }

    fn declaring_within(
        &self,
        module: FileId,
        name: &str,
        depth: usize,
        seen: &mut Vec<FileId>,
    ) -> Option<Denoted> {
        if seen.contains(&module) {
            return None;
        }
        seen.push(module);
        let (path, facts) = self.scope.source(module)?;
        if facts
            .top_level_names
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
        {
            return Some(Denoted::Declared(module));
        }
        if depth == 0 {
            return None;
        }
        // A name the module takes from another (re-exported, or imported and exported
        // again: an importer asking for it shows it is exported).
        for import in &facts.imports {
            let Some((_, taken)) = import.members.iter().find(|(as_name, _)| as_name == name)
            else {
                continue;
            };
            let Some(from) = self.resolve(path, &import.path) else {
                continue;
            };
            return match taken.as_str() {
                "*" => Some(Denoted::Namespace(from)),
                taken => self
                    .declaring_within(from, taken, depth - 1, seen)
                    .or(Some(Denoted::Declared(from))),
            };
        }
        // `export * from` passes on every name but `default`.
        if name == "default" {
            return None;
        }
        facts
            .imports
            .iter()
            .filter(|i| i.reexport && i.wildcard)
            .filter_map(|i| self.resolve(path, &i.path))
            .find_map(|from| self.declaring_within(from, name, depth - 1, seen))
    }

    /// Where a dotted use of the namespace `module` leads (`parse` of `core.parse`,
    /// `util.Text` of `ns.util.Text`): through each part that is a namespace again, to the
    /// file declaring the first that is not.
    fn through(&self, module: FileId, dotted: &str) -> Option<FileId> {
        let mut at = module;
        for part in dotted.split('.') {
            match self.declaring(at, part)? {
                Denoted::Namespace(namespace) => at = namespace,
                Denoted::Declared(home) => return Some(home),
            }
        }
        Some(at)
    }
}

/// The file an import specifier written in the file at `from` names, if it is a repository
/// file: a relative specifier by path; a bare one through the `paths` and `baseUrl` of the
/// file's `tsconfig.json`, then the repository's own packages ([`super::packages`]). Others
/// (`react`, installed packages) are not.
fn resolve_specifier(
    from: &str,
    specifier: &str,
    scope: &dyn ImportScope,
) -> Option<(FileId, String)> {
    let dir = from.rsplit_once('/').map_or("", |(d, _)| d);
    let relative = specifier == "."
        || specifier == ".."
        || specifier.starts_with("./")
        || specifier.starts_with("../");
    if relative {
        return normalize(dir, specifier)
            .and_then(|path| resolve_path(&path, scope))
            .or_else(|| module_pattern(specifier, scope));
    }
    if specifier.starts_with('/') {
        return None;
    }
    // A module a file of the repository declares by this name: TypeScript looks for such
    // ambient modules before it resolves a name to a path.
    if let Some(declared) = declared_module(specifier, scope) {
        return Some(declared);
    }
    let config = TsConfig::of_file(from, scope);
    let load = |path: &str| resolve_path(path, scope);
    config
        .candidates(specifier)
        .iter()
        .find_map(|path| load(path))
        .or_else(|| {
            let conditions = config.custom_conditions();
            super::packages::resolve(dir, specifier, conditions, scope, &load)
        })
        .or_else(|| module_pattern(specifier, scope))
}

/// The file that declares the module `name` (`declare module "name"`), with its path.
fn declared_module(name: &str, scope: &dyn ImportScope) -> Option<(FileId, String)> {
    let declared = scope.declaring(&ambient_module(name))?;
    let (path, _) = scope.source(declared)?;
    Some((declared, path.to_string()))
}

/// The file declaring a module pattern (`declare module "*.svg"`, `"virtual:*"`) that
/// `specifier` matches, which TypeScript tries where nothing else resolved: the `*` standing
/// for what comes before a `.`, `/`, `:`, `?` or `!` of it, or for what follows one.
fn module_pattern(specifier: &str, scope: &dyn ImportScope) -> Option<(FileId, String)> {
    let mut marks = specifier.match_indices(['.', '/', ':', '?', '!']);
    marks.find_map(|(at, mark)| {
        declared_module(&format!("*{}", &specifier[at..]), scope)
            .or_else(|| declared_module(&format!("{}*", &specifier[..at + mark.len()]), scope))
    })
}

/// The name under which a file's `declare module "name"` is found
/// ([`Language::qualified_names`]): quoted, so it is no other language's qualified name.
fn ambient_module(name: &str) -> String {
    format!("declare module {name:?}")
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
    /// The names a `const x = require('./e')` binds (with what each takes from the module),
    /// for the call at this byte.
    pending_names: Option<(usize, Vec<(String, String)>)>,
    /// `export { a as b }` without a module: (`a`, `b`), sorted out in [`Extractor::finish`]
    /// once the file's imports are known.
    local_exports: Vec<(String, String)>,
    /// Dotted names (`core.parse`, `z.ZodType`) with the lines they are used on.
    dotted: DottedUsages,
    /// Whether the file imports or exports at its top level (an ES module): there a
    /// `declare module "x"` augments the module `x` is, and declares none.
    es_module: bool,
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
            local_exports: Vec::new(),
            dotted: DottedUsages::default(),
            es_module: false,
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
        if matches!(node.kind(), "import_statement" | "export_statement") && kinds.len() == 1 {
            self.es_module = true;
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
            "export_statement" if matches!(kinds, [_]) => self.export(node),
            "member_expression" | "nested_identifier" | "nested_type_identifier" if !in_header => {
                self.dotted_usage(node)
            }
            "lexical_declaration" | "variable_declaration" => self.function_variables(node),
            "assignment_expression" if matches!(kinds, [_, "expression_statement"]) => {
                self.commonjs_export(node)
            }
            "module" => {
                let name = node.child_by_field_name("name");
                let declared = name.and_then(|n| string_value(n, self.source));
                self.facts
                    .ambient_modules
                    .extend(declared.map(str::to_string));
            }
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
        let mut members = Vec::new();
        let mut source = node.child_by_field_name("source");
        for child in named_children(node) {
            match child.kind() {
                "import_clause" => {
                    for part in named_children(child) {
                        match part.kind() {
                            "identifier" => members.push(self.member(part, "default")),
                            "namespace_import" => members.extend(
                                named_children(part)
                                    .into_iter()
                                    .map(|n| self.member(n, "*")),
                            ),
                            "named_imports" => members.extend(
                                named_children(part)
                                    .into_iter()
                                    .filter_map(|s| self.specifier(s)),
                            ),
                            _ => {}
                        }
                    }
                }
                "import_require_clause" => {
                    source = child.child_by_field_name("source");
                    members.extend(
                        named_children(child)
                            .into_iter()
                            .filter(|c| c.kind() == "identifier")
                            .map(|c| self.member(c, "*")),
                    );
                }
                _ => {}
            }
        }
        self.push_import(source, false, members, false);
    }

    /// A name bound to what a module offers as `taken`.
    fn member(&self, bound: Node, taken: &str) -> (String, String) {
        (self.text(bound).to_string(), taken.to_string())
    }

    /// `A` or `A as B` of an import or export list: (`B`, `A`); a string name (`"a-b" as c`)
    /// without its quotes.
    fn specifier(&self, specifier: Node) -> Option<(String, String)> {
        let name_text = |n: Node| match n.kind() {
            "string" => string_value(n, self.source).map(str::to_string),
            _ => Some(self.text(n).to_string()),
        };
        let name = name_text(specifier.child_by_field_name("name")?)?;
        let alias = match specifier.child_by_field_name("alias") {
            Some(alias) => name_text(alias)?,
            None => name.clone(),
        };
        Some((alias, name))
    }

    /// `export { A as B } from './d'` and `export * as ns from './d'` re-export what they
    /// name; `export * from './d'` is a wildcard. None binds a name here.
    fn reexport(&mut self, node: Node) {
        let mut members = Vec::new();
        let mut wildcard = true;
        for child in named_children(node) {
            match child.kind() {
                "export_clause" => {
                    wildcard = false;
                    members.extend(
                        named_children(child)
                            .into_iter()
                            .filter_map(|s| self.specifier(s)),
                    );
                }
                "namespace_export" => {
                    wildcard = false;
                    let name = child.named_child(0);
                    members.extend(name.and_then(|n| match n.kind() {
                        "string" => {
                            string_value(n, self.source).map(|n| (n.to_string(), "*".to_string()))
                        }
                        _ => Some(self.member(n, "*")),
                    }));
                }
                _ => {}
            }
        }
        self.push_import(node.child_by_field_name("source"), wildcard, members, true);
    }

    /// A top-level `export` of the file's own declarations: the names it exports (`export
    /// default` as `default`) are the module's; a list (`export { a as b }`) is sorted out once
    /// the file's imports are known.
    fn export(&mut self, node: Node) {
        let mut cursor = node.walk();
        if node.children(&mut cursor).any(|c| c.kind() == "default") {
            self.facts.top_level_names.push("default".to_string());
            return;
        }
        if let Some(declaration) = node.child_by_field_name("declaration") {
            let names = declared_names(declaration, self.source);
            self.facts.top_level_names.extend(names);
            return;
        }
        for clause in named_children(node) {
            if clause.kind() == "export_clause" {
                let listed: Vec<(String, String)> = named_children(clause)
                    .into_iter()
                    .filter_map(|s| self.specifier(s))
                    .map(|(exported, local)| (local, exported))
                    .collect();
                self.local_exports.extend(listed);
            }
        }
    }

    /// A top-level CommonJS export: `module.exports = { a, b: require('./b') }`,
    /// `module.exports = require('./c')` (the module is that one), `exports.d = ...` and
    /// `module.exports.d = ...`. What it exports is the file's, or re-exported from the
    /// module a `require` names, as ES exports are.
    fn commonjs_export(&mut self, node: Node) {
        let (Some(left), Some(right)) = (
            node.child_by_field_name("left"),
            node.child_by_field_name("right"),
        ) else {
            return;
        };
        let left: String = self.text(left).split_whitespace().collect();
        let named = left
            .strip_prefix("module.exports.")
            .or_else(|| left.strip_prefix("exports."));
        if let Some(name) = named {
            if !name.contains('.') {
                self.commonjs_value(name.to_string(), right);
            }
            return;
        }
        if left != "module.exports" {
            return;
        }
        if let Some(specifier) = self.loaded_module(right) {
            self.push_import(Some(specifier), true, Vec::new(), true);
            return;
        }
        if right.kind() != "object" {
            self.commonjs_value("default".to_string(), right);
            return;
        }
        for property in named_children(right) {
            match property.kind() {
                "shorthand_property_identifier" => {
                    let name = self.text(property).to_string();
                    self.local_exports.push((name.clone(), name));
                }
                "pair" => {
                    let (Some(key), Some(value)) = (
                        property.child_by_field_name("key"),
                        property.child_by_field_name("value"),
                    ) else {
                        continue;
                    };
                    let key = match key.kind() {
                        "string" => string_value(key, self.source),
                        "property_identifier" => Some(self.text(key)),
                        _ => None,
                    };
                    if let Some(key) = key {
                        self.commonjs_value(key.to_string(), value);
                    }
                }
                _ => {}
            }
        }
    }

    /// `value` exported as `name`: a local name (sorted out with the file's imports, as
    /// `export { a as name }` is), a module `require` loads or one of its members
    /// (re-exported), else a value of the file's own.
    fn commonjs_value(&mut self, name: String, value: Node) {
        if value.kind() == "identifier" {
            self.local_exports
                .push((self.text(value).to_string(), name));
            return;
        }
        if let Some(specifier) = self.loaded_module(value) {
            self.push_import(Some(specifier), false, vec![(name, "*".into())], true);
            return;
        }
        let member = (value.kind() == "member_expression")
            .then(|| value.child_by_field_name("object"))
            .flatten()
            .and_then(|object| self.loaded_module(object))
            .zip(value.child_by_field_name("property"));
        match member {
            Some((specifier, property)) => {
                let taken = self.text(property).to_string();
                self.push_import(Some(specifier), false, vec![(name, taken)], true);
            }
            None => self.facts.top_level_names.push(name),
        }
    }

    /// An import or re-export of the module `source` names, taking `members` from it.
    fn push_import(
        &mut self,
        source: Option<Node>,
        wildcard: bool,
        members: Vec<(String, String)>,
        reexport: bool,
    ) {
        let Some(path) = source.and_then(|s| string_value(s, self.source)) else {
            return;
        };
        let names = match reexport {
            true => Vec::new(),
            false => members.iter().map(|(bound, _)| bound.clone()).collect(),
        };
        self.facts.imports.push(ImportDecl {
            path: path.to_string(),
            wildcard,
            names,
            members,
            reexport,
            ..ImportDecl::default()
        });
    }

    /// A dotted name as long as it stays one (`a.b.c` of `a.b.c(x).d`, `ns.Type` in a type),
    /// recorded once, at its outermost node.
    fn dotted_usage(&mut self, node: Node) {
        let inner_of_longer = node
            .parent()
            .and_then(dotted_step)
            .is_some_and(|(object, _)| object == node);
        if inner_of_longer {
            return;
        }
        let mut parts = Vec::new();
        let mut at = node;
        while let Some((object, property)) = dotted_step(at) {
            parts.push(self.text(property));
            at = object;
        }
        if !matches!(at.kind(), "identifier" | "type_identifier") || parts.is_empty() {
            return;
        }
        parts.push(self.text(at));
        self.dotted.record(parts, node);
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
        let members = match name.kind() {
            "identifier" => vec![self.member(name, "*")],
            "object_pattern" => named_children(name)
                .into_iter()
                .filter_map(|p| match p.kind() {
                    "shorthand_property_identifier_pattern" => Some(self.member(p, self.text(p))),
                    "pair_pattern" => {
                        let key = p.child_by_field_name("key")?;
                        let value = p.child_by_field_name("value")?;
                        (value.kind() == "identifier").then(|| self.member(value, self.text(key)))
                    }
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        self.pending_names = Some((value.start_byte(), members));
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
        let members = match self.pending_names.take() {
            Some((at, members)) if at == node.start_byte() => members,
            _ => Vec::new(),
        };
        self.push_import(Some(specifier), false, members, false);
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
        if self.es_module {
            // Augmentations (`declare module "vue" { ... }` in a module) add to a module
            // found elsewhere.
            self.facts.ambient_modules.clear();
        }
        self.facts.name_usages = self.usages.into_usages();
        // `import { a } from './x'; export { a as b }` re-exports `x`'s `a` as `b`, as
        // `export { a as b } from './x'` would; a listed name the file declares is its own.
        for (local, exported) in std::mem::take(&mut self.local_exports) {
            let imported = self.facts.imports.iter().find_map(|i| {
                let taken = i.members.iter().find(|(bound, _)| *bound == local)?;
                Some((i.path.clone(), taken.1.clone()))
            });
            match imported {
                Some((path, taken)) => self.facts.imports.push(ImportDecl {
                    path,
                    members: vec![(exported, taken)],
                    reexport: true,
                    ..ImportDecl::default()
                }),
                None => self.facts.top_level_names.push(exported),
            }
        }
        self.facts.top_level_names.sort_unstable();
        self.facts.top_level_names.dedup();
        self.facts.dotted_usages = self.dotted.into_usages(&self.facts.imports);
        self.facts
    }
}

/// The object and property of one step of a dotted name (`a.b` of `a.b.c`, `ns.T` in a type);
/// none for an optional step (`a?.b`) or a `#private` one, which end the name.
fn dotted_step(node: Node) -> Option<(Node, Node)> {
    let dotted = matches!(
        node.kind(),
        "member_expression" | "nested_identifier" | "nested_type_identifier"
    );
    if !dotted || node.child_by_field_name("optional_chain").is_some() {
        return None;
    }
    let (object, property) = (node.named_child(0)?, node.named_child(1)?);
    matches!(property.kind(), "property_identifier" | "type_identifier")
        .then_some((object, property))
}

/// The names a declaration introduces: a function's, class's, interface's, type's, enum's or
/// namespace's name, each variable of a `const`/`let`/`var` (plain names; a destructuring
/// pattern's names too), what an `export declare` declares.
fn declared_names(declaration: Node, source: &str) -> Vec<String> {
    let text = |n: Node| source[n.byte_range()].to_string();
    match declaration.kind() {
        "lexical_declaration" | "variable_declaration" => named_children(declaration)
            .into_iter()
            .filter_map(|d| d.child_by_field_name("name"))
            .flat_map(|pattern| {
                let mut names = Vec::new();
                pattern_names(pattern, source, &mut names);
                names
            })
            .collect(),
        "ambient_declaration" => named_children(declaration)
            .into_iter()
            .flat_map(|d| declared_names(d, source))
            .collect(),
        _ => declaration
            .child_by_field_name("name")
            .filter(|n| n.kind() != "string")
            .map(text)
            .into_iter()
            .collect(),
    }
}

/// The names a binding pattern binds (`{ a, b: c, ...d }`, `[e, f = 1]`).
fn pattern_names(pattern: Node, source: &str, names: &mut Vec<String>) {
    match pattern.kind() {
        "identifier" | "shorthand_property_identifier_pattern" => {
            names.push(source[pattern.byte_range()].to_string())
        }
        "pair_pattern" => {
            if let Some(value) = pattern.child_by_field_name("value") {
                pattern_names(value, source, names);
            }
        }
        "assignment_pattern" | "object_assignment_pattern" => {
            if let Some(left) = pattern.child_by_field_name("left") {
                pattern_names(left, source, names);
            }
        }
        _ => {
            for child in named_children(pattern) {
                pattern_names(child, source, names);
            }
        }
    }
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
        let problem = files.configs[0].1.problem().unwrap().to_string();
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
    #[test]
    fn commonjs_exports_read_as_the_es_exports_they_stand_for() {
        let source = "const helpers = require('./helpers');\nclass Local {}\n\
                      exports.Parser = require('./parser').Parser;\nexports.format = require('./format');\n\
                      module.exports.helpers = helpers;\nmodule.exports.Local = Local;\nexports.version = '1';\n\
                      module.exports = { Local, tokens: require('./tokens'), 'kebab-name': 1 };\n\
                      module.exports = require('./all');\nif (ready) {\n  exports.hidden = 1;\n}\n";
        let facts = TSX.extract(source);
        assert_eq!(
            facts.top_level_names,
            ["Local", "kebab-name", "version"],
            "only the top level's exports"
        );
        // (module, whether all of it, (name here, name there)).
        type Reexport<'f> = (&'f str, bool, Vec<(&'f str, &'f str)>);
        let reexports: Vec<Reexport> = facts
            .imports
            .iter()
            .filter(|i| i.reexport)
            .map(|i| {
                let members = i.members.iter();
                let members = members.map(|(a, b)| (a.as_str(), b.as_str())).collect();
                (i.path.as_str(), i.wildcard, members)
            })
            .collect();
        assert_eq!(
            reexports,
            vec![
                ("./parser", false, vec![("Parser", "Parser")]),
                ("./format", false, vec![("format", "*")]),
                ("./tokens", false, vec![("tokens", "*")]),
                ("./all", true, vec![]),
                ("./helpers", false, vec![("helpers", "*")]),
            ]
        );
    }

    #[test]
    fn a_declaration_file_names_the_modules_it_declares() {
        let source = "declare module \"legacy\" {\n  export function f(): void;\n}\n\
                      declare module '*.svg' {\n  const url: string;\n  export default url;\n}\n\
                      declare namespace Inner {\n  const x: number;\n}\nmodule Old {}\n";
        let facts = TYPESCRIPT.extract(source);
        assert_eq!(facts.ambient_modules, ["legacy", "*.svg"]);
        // In a module, `declare module` augments a module that is elsewhere.
        let augmenting = format!("import {{ App }} from 'vue';\n{source}");
        assert!(TYPESCRIPT.extract(&augmenting).ambient_modules.is_empty());
        assert_eq!(
            TYPESCRIPT.qualified_names("types/vendor.d.ts", &facts),
            vec![
                ("declare module \"legacy\"".to_string(), true),
                ("declare module \"*.svg\"".to_string(), true)
            ]
        );
    }

    /// A repository of sources (with their facts) and project files, for the rules that read
    /// other files: barrels, packages, workspaces.
    struct Repo {
        sources: Vec<(String, FileFacts)>,
        projects: Vec<(String, Arc<ProjectFile>)>,
    }

    impl Repo {
        fn new(files: &[(&str, &str)]) -> Repo {
            let (sources, projects): (Vec<_>, Vec<_>) = files
                .iter()
                .partition(|(path, _)| has_source_extension(path));
            Repo {
                sources: sources
                    .iter()
                    .map(|(path, text)| (path.to_string(), TSX.extract(text)))
                    .collect(),
                projects: configs(&projects),
            }
        }

        /// The files the imports of `from` reach, each with its usage lines.
        fn imports_of(&self, from: &str) -> Vec<(&str, Vec<u32>)> {
            let id = self.file_at(from).expect("a source of the repository");
            TYPESCRIPT
                .resolve_imports(from, &self.sources[id].1, self)
                .into_iter()
                .map(|i| (self.sources[i.file].0.as_str(), i.usage_lines))
                .collect()
        }
    }

    impl ImportScope for Repo {
        fn file_at(&self, path: &str) -> Option<FileId> {
            self.sources.iter().position(|(p, _)| p == path)
        }
        fn declaring(&self, _: &str) -> Option<FileId> {
            None
        }
        fn project_file(&self, path: &str) -> Option<Arc<ProjectFile>> {
            let found = self.projects.iter().find(|(p, _)| p == path);
            found.map(|(_, file)| file.clone())
        }
        fn source(&self, file: FileId) -> Option<(&str, &FileFacts)> {
            self.sources.get(file).map(|(p, f)| (p.as_str(), f))
        }
        fn directories(&self) -> Vec<&str> {
            let dirs = self.sources.iter().map(|(p, _)| p.rsplit_once('/'));
            dirs.map(|split| split.map_or("", |(d, _)| d)).collect()
        }
    }

    #[test]
    fn exports_members_and_dotted_uses_are_recorded() {
        let source = "import * as core from './core';\nimport d, { a as b } from './m';\n\
                      export * as util from './util';\nexport { x as y, default as z } from './n';\n\
                      export function f() {}\nexport const { g, h: i } = o, j = 1;\n\
                      export default class {}\nexport type T = number;\nconst k = 1;\nexport { k as K, b };\n\
                      core.parse(1).data.x;\nlet t: core.util.Text = core.a?.b;\nother.c.d;\n";
        let facts = TYPESCRIPT.extract(source);
        let members: Vec<_> = facts
            .imports
            .iter()
            .map(|i| (i.path.as_str(), i.reexport, i.wildcard, i.members.clone()))
            .collect();
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            members,
            vec![
                ("./core", false, false, vec![pair("core", "*")]),
                (
                    "./m",
                    false,
                    false,
                    vec![pair("d", "default"), pair("b", "a")]
                ),
                ("./util", true, false, vec![pair("util", "*")]),
                (
                    "./n",
                    true,
                    false,
                    vec![pair("y", "x"), pair("z", "default")]
                ),
                // `export { b }` of an imported `b` passes on `./m`'s `a`.
                ("./m", true, false, vec![pair("b", "a")]),
            ]
        );
        assert_eq!(
            facts.top_level_names,
            ["K", "T", "default", "f", "g", "i", "j"]
        );
        let dotted: Vec<_> = facts
            .dotted_usages
            .iter()
            .map(|(n, l)| (n, l.to_vec()))
            .collect();
        // Cut at a call and at `?.`; only names an import binds.
        assert_eq!(
            dotted,
            vec![
                ("core.a", vec![11]),
                ("core.parse", vec![10]),
                ("core.util.Text", vec![11])
            ]
        );
    }

    /// A core module behind a barrel of every kind, as zod's `v4/core` and `v4/classic` are.
    const BARRELS: [(&str, &str); 7] = [
        (
            "src/core/parse.ts",
            "export function parse(s: string) { return s; }\nexport const VERSION = 1;\n",
        ),
        (
            "src/core/errors.ts",
            "export class ZodError extends Error {}\n",
        ),
        (
            "src/core/util.ts",
            "export function clone<T>(x: T): T { return x; }\n",
        ),
        (
            "src/core/legacy.ts",
            "export default function legacy() {}\n",
        ),
        (
            "src/core/index.ts",
            "export * from \"./parse.js\";\nexport { ZodError as CoreError } from \"./errors.js\";\n\
             export * as util from \"./util.js\";\nexport { default as legacy } from \"./legacy.js\";\n",
        ),
        // An imported namespace exported again, under two names.
        (
            "src/classic/index.ts",
            "import * as z from \"../core/index.js\";\nexport * from \"../core/index.js\";\nexport { z, z as default };\n",
        ),
        ("src/unrelated.ts", "export function parse() {}\n"),
    ];

    #[test]
    fn names_imported_from_a_barrel_reach_their_declaring_files() {
        let mut files = BARRELS.to_vec();
        files.push((
            "src/app.ts",
            "import { parse, CoreError, util, legacy } from \"./core/index.js\";\n\nparse(\"x\");\n\
             throw new CoreError();\nutil.clone(1);\nlegacy();\n",
        ));
        let repo = Repo::new(&files);
        assert_eq!(
            repo.imports_of("src/app.ts"),
            vec![
                ("src/core/index.ts", vec![2, 3, 4, 5]),
                ("src/core/parse.ts", vec![2]),
                ("src/core/errors.ts", vec![3]),
                ("src/core/util.ts", vec![4]),
                ("src/core/legacy.ts", vec![5]),
            ]
        );
    }

    #[test]
    fn a_namespace_imports_members_reach_their_declaring_files() {
        let mut files = BARRELS.to_vec();
        files.push((
            "src/app.ts",
            "import * as core from \"./core/index.js\";\nimport z from \"./classic/index.js\";\n\
             core.parse(\"x\");\nlet e: core.CoreError;\ncore.util.clone(2);\nz.legacy();\nz.nothing;\n",
        ));
        let repo = Repo::new(&files);
        assert_eq!(
            repo.imports_of("src/app.ts"),
            vec![
                // `z`, the default export of `classic`, is the `core` namespace again.
                ("src/core/index.ts", vec![2, 3, 4, 5, 6]),
                ("src/core/errors.ts", vec![3]),
                ("src/core/parse.ts", vec![2]),
                ("src/core/util.ts", vec![4]),
                ("src/classic/index.ts", vec![5, 6]),
                ("src/core/legacy.ts", vec![5]),
            ]
        );
    }

    #[test]
    fn barrels_that_export_each_other_end() {
        let repo = Repo::new(&[
            (
                "a.ts",
                "export * from './b';\nexport * as self from './a';\n",
            ),
            ("b.ts", "export * from './a';\n"),
            (
                "main.ts",
                "import * as a from './a';\na.self.self.self.missing;\na.nothing;\n",
            ),
        ]);
        assert_eq!(repo.imports_of("main.ts"), vec![("a.ts", vec![1, 2])]);
    }

    /// A package that imports itself by name (zod's tests: `from "zod/v4"`), mapped through
    /// `exports` by a condition its `tsconfig.json` names in `customConditions`; the built
    /// files the other conditions name are not in the repository.
    fn self_referencing(tsconfig: &'static str) -> Repo {
        Repo::new(&[
            (
                "packages/zod/package.json",
                r#"{ "name": "zod", "main": "./index.cjs", "exports": {
                    "./package.json": "./package.json",
                    ".": { "@zod/source": "./src/index.ts", "types": "./index.d.cts", "import": "./index.js" },
                    "./v4": { "@zod/source": "./src/v4/index.ts", "types": "./v4/index.d.cts" },
                    "./v4/locales/*": { "@zod/source": "./src/v4/locales/*", "types": "./v4/locales/*" } } }"#,
            ),
            ("packages/zod/tsconfig.json", tsconfig),
            (
                "packages/zod/src/index.ts",
                "export * from './v4/index.js';\n",
            ),
            (
                "packages/zod/src/v4/index.ts",
                "export function string() {}\n",
            ),
            (
                "packages/zod/src/v4/locales/en.ts",
                "export default function en() {}\n",
            ),
            (
                "packages/zod/src/v4/tests/string.test.ts",
                "import * as z from \"zod/v4\";\nimport { string } from \"zod\";\n\
                 import en from \"zod/v4/locales/en.js\";\nimport * as mini from \"zod/mini\";\n\
                 z.string(); string(); en();\n",
            ),
        ])
    }

    #[test]
    fn a_package_imports_itself_through_exports_and_custom_conditions() {
        let repo =
            self_referencing(r#"{ "compilerOptions": { "customConditions": ["@zod/source"] } }"#);
        assert_eq!(
            repo.imports_of("packages/zod/src/v4/tests/string.test.ts"),
            vec![
                ("packages/zod/src/v4/index.ts", vec![4]),
                ("packages/zod/src/index.ts", vec![4]),
                ("packages/zod/src/v4/locales/en.ts", vec![4]),
            ]
        );
        // Without the condition, `exports` names only built files, which are not here.
        let repo = self_referencing("{}");
        assert!(
            repo.imports_of("packages/zod/src/v4/tests/string.test.ts")
                .is_empty()
        );
    }

    #[test]
    fn workspace_packages_resolve_by_name_through_exports_and_entry_fields() {
        let packages = [
            (
                "packages/shared/src/index.ts",
                "export function isArray() {}\n",
            ),
            ("packages/utils/src/index.ts", "export const VERSION = 1;\n"),
            (
                "packages/utils/src/strings.ts",
                "export function trim() {}\n",
            ),
            ("packages/utils/src/math.ts", "export function add() {}\n"),
            ("tools/tool/src/index.ts", "export const tool = 1;\n"),
            // No `exports`: `types` (its build is absent), then `main`.
            (
                "packages/shared/package.json",
                r#"{ "name": "@acme/shared", "types": "./dist/index.d.ts", "main": "src/index.ts" }"#,
            ),
            (
                "packages/utils/package.json",
                r#"{ "name": "@acme/utils", "exports": { ".": "./src/index.ts",
                     "./strings": { "require": "./cjs/strings.js", "default": "./src/strings.ts" },
                     "./*": "./src/*.ts" } }"#,
            ),
            // A package of the repository that is no workspace package.
            (
                "tools/tool/package.json",
                r#"{ "name": "@acme/tool", "main": "src/index.ts" }"#,
            ),
            (
                "packages/app/src/main.ts",
                "import { isArray } from '@acme/shared';\nimport { trim } from '@acme/utils/strings';\n\
                 import { add } from '@acme/utils/math';\nimport { tool } from '@acme/tool';\n\
                 import { x } from '@acme/utils/nothing';\nimport React from 'react';\n",
            ),
        ];
        let expected = vec![
            ("packages/shared/src/index.ts", vec![]),
            ("packages/utils/src/strings.ts", vec![]),
            ("packages/utils/src/math.ts", vec![]),
        ];
        let mut pnpm = packages.to_vec();
        pnpm.push((
            "pnpm-workspace.yaml",
            "packages:\n  - 'packages/*'\ncatalog:\n  react: ^19\n",
        ));
        assert_eq!(
            Repo::new(&pnpm).imports_of("packages/app/src/main.ts"),
            expected
        );
        let mut npm = packages.to_vec();
        npm.push((
            "package.json",
            r#"{ "private": true, "workspaces": { "packages": ["packages/*"] } }"#,
        ));
        assert_eq!(
            Repo::new(&npm).imports_of("packages/app/src/main.ts"),
            expected
        );
        // Outside any workspace, a package is not linked where another finds it.
        assert!(
            Repo::new(&packages)
                .imports_of("packages/app/src/main.ts")
                .is_empty()
        );
    }
    #[test]
    fn subpath_imports_resolve_through_the_packages_imports() {
        let repo = Repo::new(&[
            (
                "package.json",
                r##"{ "name": "app", "imports": {
                    "#internal/*": "./src/internal/*.ts",
                    "#config": { "types": "./src/config.ts", "default": "./dist/config.js" },
                    "#dep": "lodash" } }"##,
            ),
            ("src/internal/log.ts", "export function log() {}\n"),
            ("src/config.ts", "export const config = {};\n"),
            (
                "src/main.ts",
                "import { log } from '#internal/log';\nimport { config } from '#config';\n\
                 import dep from '#dep';\nimport { x } from '#missing';\nlog(config, dep, x);\n",
            ),
        ]);
        assert_eq!(
            repo.imports_of("src/main.ts"),
            vec![("src/internal/log.ts", vec![4]), ("src/config.ts", vec![4])]
        );
    }
}
