//! Python facts through tree-sitter-python, in one pass over the syntax tree, and how Python
//! imports reach repository files.

use tree_sitter::{Node, Tree};

use super::python_typed;
use super::tree::{NameUsages, span};
use super::{
    FileFacts, FileId, HoleSyntax, Import, ImportDecl, ImportKind, ImportScope, Language,
    MethodDecl, Span, SyntaxError, TypeDecl, TypeSyntax,
};

pub struct Python;

/// Parse Python source; `None` only if tree-sitter refuses the language (a build problem).
pub(super) fn parse(source: &str) -> Option<Tree> {
    super::tree::parse("python", || tree_sitter_python::LANGUAGE.into(), source)
}

impl Language for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn display_name(&self) -> &'static str {
        "Python"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["py", "pyi"]
    }

    /// Virtual environments (`python -m venv venv`, uv's and poetry's `.venv`) and the
    /// `site-packages` of an environment kept elsewhere: installed packages, not the project's.
    fn vendored_dirs(&self) -> &'static [&'static str] {
        &[".venv", "venv", "site-packages"]
    }

    fn extract(&self, source: &str) -> FileFacts {
        match parse(source) {
            Some(tree) => {
                let mut facts = Extractor::new(source).run(tree.root_node());
                facts.outline = python_typed::outline(tree.root_node(), source);
                facts
            }
            None => FileFacts::default(),
        }
    }

    fn line_comment(&self) -> &'static str {
        "#"
    }

    /// `#` lines. A docstring is a string statement to the grammar, and a line alone cannot
    /// tell whether it is inside one, so docstring lines are holes (EVALUATION.md says why).
    fn is_comment_line(&self, trimmed: &str) -> bool {
        trimmed.starts_with('#')
    }

    fn hole_syntax(&self, source: &str, hole: usize) -> HoleSyntax {
        super::hole_grammar::hole_syntax(&python_typed::HOLES, source, hole)
    }

    fn syntax_errors(&self, source: &str, within: std::ops::Range<usize>) -> Vec<SyntaxError> {
        parse(source).map_or_else(Vec::new, |tree| super::tree::errors(&tree, source, within))
    }

    fn is_preamble_line(&self, trimmed: &str) -> bool {
        trimmed.starts_with("import ")
            || (trimmed.starts_with("from ") && trimmed.contains(" import"))
    }

    fn types(&self) -> &'static dyn TypeSyntax {
        &python_typed::PythonTypes
    }

    /// `PATH::Name` for every top-level class, function and assigned name, under every
    /// '/'-boundary suffix of the file's path: a wildcard import, resolved to a path suffix,
    /// looks up which of the names the importing file uses the module declares (the full
    /// path is the conventional one). And `DIR/::Name` under the suffixes of the file's
    /// directory: a package's `__init__.py` re-exports its modules' names (`from .order import
    /// Order`), and `from pkg import Order` reaches the module declaring it through this key.
    fn qualified_names(&self, path: &str, facts: &FileFacts) -> Vec<(String, bool)> {
        let starts = || std::iter::once(0).chain(path.match_indices('/').map(|(i, _)| i + 1));
        let dir_len = path.rfind('/').map_or(0, |i| i + 1);
        let mut out = Vec::new();
        for name in top_level_names(facts) {
            for start in starts() {
                out.push((declared_key(&path[start..], name), start == 0));
                if start <= dir_len {
                    let dir = &path[start..dir_len];
                    out.push((declared_key(dir, name), start == 0));
                }
            }
        }
        out
    }

    /// Every import resolved to the module file it names (`a/b.py` or `a/b/__init__.py`), a
    /// `from m import x` to the submodule `m/x.py` when there is one; a wildcard import
    /// reaches its module when the file uses a name the module declares. Python has no
    /// implicit same-package names.
    fn resolve_imports(
        &self,
        path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import> {
        let mut found = Vec::new();
        for import in &facts.imports {
            if import.wildcard {
                let Some((target, suffix)) = module_file(scope, path, &import.path) else {
                    continue;
                };
                let mut lines: Vec<u32> = Vec::new();
                for (name, used) in &facts.name_usages {
                    if scope.declaring(&declared_key(&suffix, name)) == Some(target) {
                        lines.extend(used);
                    }
                }
                lines.sort_unstable();
                lines.dedup();
                super::add_import(&mut found, target, ImportKind::Wildcard, &lines);
                continue;
            }
            let target = module_file(scope, path, &import.path).or_else(|| {
                // `from m import name`: the name is declared in module `m`.
                let (module, _) = import.path.rsplit_once('.')?;
                let module = if module.chars().all(|c| c == '.') {
                    // `from . import name`: the package's `__init__.py`.
                    format!("{module}.")
                } else {
                    module.to_string()
                };
                module_file(scope, path, &module)
            });
            let Some((target, found_as)) = target else {
                continue;
            };
            let mut lines: Vec<u32> = Vec::new();
            for name in &import.names {
                lines.extend(facts.usages_of(name));
            }
            lines.sort_unstable();
            super::add_import(&mut found, target, ImportKind::Single, &lines);
            // `from pkg import Name` where `pkg/__init__.py` only re-exports `Name`: the
            // package's module declaring it is imported too.
            let imported = import.path.rsplit('.').next().unwrap_or_default();
            if let Some(package) = found_as.strip_suffix("__init__.py")
                && scope.declaring(&declared_key(&found_as, imported)) != Some(target)
                && let Some(declaring) = scope.declaring(&declared_key(package, imported))
            {
                super::add_import(&mut found, declaring, ImportKind::Single, &lines);
            }
        }
        found
    }
}

/// The key [`Python::qualified_names`] registers a module's top-level name under.
fn declared_key(path_suffix: &str, name: &str) -> String {
    format!("{path_suffix}::{name}")
}

/// Names a `from m import *` can bring in: the module's top-level classes, functions and
/// assigned names, as its outline and signatures record them.
fn top_level_names(facts: &FileFacts) -> Vec<&str> {
    let mut names: Vec<&str> = facts
        .types
        .iter()
        .filter(|t| t.top_level)
        .map(|t| t.name.as_str())
        .collect();
    names.extend(facts.top_level_names.iter().map(String::as_str));
    names.sort_unstable();
    names.dedup();
    names
}

/// The repository file of module `module` (`a.b`, `.sibling`, `..pkg.mod`, `.`) imported from
/// the file at `from`, with the path it was found under (a suffix of the file's path).
fn module_file(scope: &dyn ImportScope, from: &str, module: &str) -> Option<(FileId, String)> {
    let dots = module.len() - module.trim_start_matches('.').len();
    let parts: Vec<&str> = module[dots..]
        .split('.')
        .filter(|p| !p.is_empty())
        .collect();
    let mut dir: Vec<&str> = from.split('/').collect();
    dir.pop();
    if dots > 0 {
        // Relative: one dot is the importing file's package, each further dot one level up.
        for _ in 1..dots {
            dir.pop()?;
        }
        let base = dir.join("/");
        let package = |name: &str| match base.as_str() {
            "" => name.to_string(),
            base => format!("{base}/{name}"),
        };
        return module_paths(&parts)
            .into_iter()
            .map(|p| package(&p))
            .find_map(|p| Some((scope.file_at(&p)?, p)));
    }
    // Absolute: under some source root (the repository's root, `src/`, ...). A root the
    // importing file sits under wins, the shallowest first (Python 3 imports are absolute);
    // else the shortest path anywhere.
    let suffixes = module_paths(&parts);
    for depth in 0..=dir.len() {
        let root = dir[..depth].join("/");
        for suffix in &suffixes {
            let path = if root.is_empty() {
                suffix.clone()
            } else {
                format!("{root}/{suffix}")
            };
            if let Some(id) = scope.file_at(&path) {
                return Some((id, suffix.clone()));
            }
        }
    }
    suffixes
        .into_iter()
        .find_map(|s| Some((*scope.files_ending_with(&s).first()?, s)))
}

/// The files a module's parts may be, in the order Python prefers them: `a/b.py`, the
/// package `a/b/__init__.py`, then stubs. No parts: the package itself (`from . import x`).
fn module_paths(parts: &[&str]) -> Vec<String> {
    if parts.is_empty() {
        return vec!["__init__.py".into(), "__init__.pyi".into()];
    }
    let base = parts.join("/");
    vec![
        format!("{base}.py"),
        format!("{base}/__init__.py"),
        format!("{base}.pyi"),
        format!("{base}/__init__.pyi"),
    ]
}

/// What the extractor is inside of while it walks.
#[derive(Clone, Copy, Default)]
struct Context {
    /// Inside an import statement: its names are not usages.
    in_import: bool,
    /// Directly in a class body (not in one of its methods).
    in_class_body: bool,
    /// Inside a method: `self.x = ...` declares a field.
    in_method: bool,
    /// Inside a type annotation or a class's base list: names are type identifiers.
    in_type: bool,
    /// Inside any class or function: declarations are not top level.
    nested: bool,
}

struct Extractor<'a> {
    source: &'a str,
    facts: FileFacts,
    usages: NameUsages<'a>,
    /// Node ids of the docstrings met so far (a definition is met before its body).
    docstrings: Vec<usize>,
}

impl<'a> Extractor<'a> {
    fn new(source: &'a str) -> Self {
        Extractor {
            source,
            facts: FileFacts::default(),
            usages: NameUsages::default(),
            docstrings: Vec::new(),
        }
    }

    fn text(&self, node: Node) -> &'a str {
        &self.source[node.byte_range()]
    }

    /// Depth-first walk with an explicit stack, so deeply nested code cannot overflow it.
    fn run(mut self, root: Node<'a>) -> FileFacts {
        let mut stack: Vec<(Node, Context)> = vec![(root, Context::default())];
        while let Some((node, ctx)) = stack.pop() {
            let inner = self.visit(node, ctx);
            let mut cursor = node.walk();
            let children: Vec<Node> = node.children(&mut cursor).collect();
            for child in children.into_iter().rev() {
                let mut child_ctx = inner;
                if node.kind() == "class_definition"
                    && node.child_by_field_name("superclasses") == Some(child)
                {
                    child_ctx.in_type = true;
                }
                stack.push((child, child_ctx));
            }
        }
        self.finish()
    }

    /// Record what `node` contributes; returns the context of its children.
    fn visit(&mut self, node: Node, ctx: Context) -> Context {
        if node.is_error() || node.is_missing() {
            self.facts.syntax_errors += 1;
        }
        let mut inner = ctx;
        match node.kind() {
            "identifier" => {
                if ctx.in_type {
                    self.facts.type_identifiers.push(span(node));
                } else {
                    self.facts.identifiers.push(span(node));
                }
                if !ctx.in_import {
                    self.usage(node);
                }
            }
            "type" => inner.in_type = true,
            "keyword_argument" if ctx.in_type => inner.in_type = false,
            "string" if !self.docstrings.contains(&node.id()) => {
                self.facts.string_literals.push(span(node));
            }
            "concatenated_string" if self.docstrings.contains(&node.id()) => {
                // Its parts are the docstring too.
                let mut cursor = node.walk();
                let parts: Vec<usize> = node.named_children(&mut cursor).map(|c| c.id()).collect();
                self.docstrings.extend(parts);
            }
            "module" => self.docstrings.extend(docstring(node).map(|d| d.id())),
            "import_statement" | "import_from_statement" | "future_import_statement" => {
                self.import(node);
                inner.in_import = true;
            }
            "class_definition" => {
                self.note_docstring(node);
                self.class(node, !ctx.nested);
                inner.in_class_body = true;
                inner.in_method = false;
                inner.nested = true;
            }
            "function_definition" => {
                self.note_docstring(node);
                self.method(node, !ctx.nested);
                inner.in_method = ctx.in_class_body || ctx.in_method;
                inner.in_class_body = false;
                inner.nested = true;
            }
            "expression_statement" => {
                self.statement(node, ctx);
            }
            _ => {}
        }
        inner
    }

    fn note_docstring(&mut self, definition: Node) {
        let body = definition.child_by_field_name("body");
        self.docstrings
            .extend(body.and_then(docstring).map(|d| d.id()));
    }

    fn usage(&mut self, node: Node) {
        self.usages.record(self.text(node), node);
    }

    /// `import a.b as x` (binds `x`; without `as`, `a`), `from m import c as d` (binds `d`;
    /// the import names `m.c`), `from m import *`.
    fn import(&mut self, node: Node) {
        let mut cursor = node.walk();
        let module = node
            .child_by_field_name("module_name")
            .map(|m| compact(self.text(m)));
        let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        if node.kind() == "future_import_statement" {
            return;
        }
        let Some(module) = module else {
            for name in names {
                let (dotted, alias) = aliased(name);
                let path = compact(self.text(dotted));
                let bound = match alias {
                    Some(alias) => self.text(alias).to_string(),
                    None => path.split('.').next().unwrap_or_default().to_string(),
                };
                self.push_import(path, false, vec![bound]);
            }
            return;
        };
        let mut inner = node.walk();
        if node
            .children(&mut inner)
            .any(|c| c.kind() == "wildcard_import")
        {
            self.push_import(module, true, Vec::new());
            return;
        }
        for name in names {
            let (dotted, alias) = aliased(name);
            let imported = compact(self.text(dotted));
            let path = if module.ends_with('.') {
                format!("{module}{imported}")
            } else {
                format!("{module}.{imported}")
            };
            let bound = alias.map_or(imported, |a| self.text(a).to_string());
            self.push_import(path, false, vec![bound]);
        }
    }

    fn push_import(&mut self, path: String, wildcard: bool, names: Vec<String>) {
        self.facts.imports.push(ImportDecl {
            path,
            wildcard,
            is_static: false,
            names,
        });
    }

    fn class(&mut self, node: Node, top_level: bool) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        let bases = python_typed::bases(node, self.source);
        let kind = python_typed::class_kind(&bases);
        if top_level {
            self.facts.top_level_names.push(self.text(name).to_string());
        }
        self.facts.types.push(TypeDecl {
            name: self.text(name).to_string(),
            kind,
            name_span: span(name),
            superclass: python_typed::superclass(&bases),
            top_level,
        });
    }

    fn method(&mut self, node: Node, top_level: bool) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        if top_level {
            self.facts.top_level_names.push(self.text(name).to_string());
        }
        let signature = python_typed::signature_span(node, self.source);
        self.facts.methods.push(MethodDecl {
            name: span(name),
            signature,
            with_body: Span::new(signature.start as usize, node.end_byte()),
        });
    }

    /// Class attributes (`x: int = 0`, `x = 0` in a class body), `self.x = ...` in a method,
    /// and module-level assigned names (for wildcard imports).
    fn statement(&mut self, node: Node, ctx: Context) {
        let Some(assignment) = node.named_child(0).filter(|a| a.kind() == "assignment") else {
            return;
        };
        let Some(left) = assignment.child_by_field_name("left") else {
            return;
        };
        let class_attribute = ctx.in_class_body && left.kind() == "identifier";
        if class_attribute || (ctx.in_method && is_self_attribute(left, self.source)) {
            self.facts.field_declarations.push(span(node));
        } else if !ctx.nested && left.kind() == "identifier" {
            // A module's globals are its attributes (`pricing.VAT_PERCENT`), as a class's.
            self.facts.field_declarations.push(span(node));
            self.facts.top_level_names.push(self.text(left).to_string());
        }
    }

    fn finish(mut self) -> FileFacts {
        self.facts.name_usages = self.usages.into_sorted();
        self.facts
    }
}

/// `a . b` → `a.b`: a dotted name or relative module as written, whitespace left out.
fn compact(text: &str) -> String {
    text.split_whitespace().collect()
}

/// An import's name and its alias, if it has one.
fn aliased(name: Node) -> (Node, Option<Node>) {
    if name.kind() == "aliased_import" {
        let dotted = name.child_by_field_name("name").unwrap_or(name);
        (dotted, name.child_by_field_name("alias"))
    } else {
        (name, None)
    }
}

/// `self.x`.
pub(super) fn is_self_attribute(node: Node, source: &str) -> bool {
    node.kind() == "attribute"
        && node
            .child_by_field_name("object")
            .is_some_and(|o| o.kind() == "identifier" && &source[o.byte_range()] == "self")
}

/// The string that is the first statement of a module's or definition's body, if any: its
/// docstring, documentation as javadoc is in Java, and no string literal of the code.
pub(super) fn docstring(body: Node) -> Option<Node> {
    let mut cursor = body.walk();
    let first = body
        .named_children(&mut cursor)
        .find(|c| c.kind() != "comment")?;
    let string = first.named_child(0)?;
    (first.kind() == "expression_statement"
        && first.named_child_count() == 1
        && matches!(string.kind(), "string" | "concatenated_string"))
    .then_some(string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    const SOURCE: &str = r#""""Order services."""

import os.path
import shop.util as u
from . import pricing
from ..repository.orders import OrderRepository as Repo, Other
from shop.models import *


class OrderService(base.BaseService, Mixin, metaclass=Meta):
    """Places orders."""

    PREFIX = "order-"
    limit: int = 10

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.count: int = 0

    @staticmethod
    def find(order_id: int) -> "Order":
        return Repo.find(order_id, os.path)


def helper(x):
    pass
"#;

    fn text(span: Span) -> &'static str {
        &SOURCE[span.range()]
    }

    #[test]
    fn imports_name_what_they_bind() {
        let facts = Python.extract(SOURCE);
        let imports: Vec<_> = facts
            .imports
            .iter()
            .map(|i| (i.path.as_str(), i.wildcard, i.names.join(",")))
            .collect();
        assert_eq!(
            imports,
            vec![
                ("os.path", false, "os".to_string()),
                ("shop.util", false, "u".to_string()),
                (".pricing", false, "pricing".to_string()),
                (
                    "..repository.orders.OrderRepository",
                    false,
                    "Repo".to_string()
                ),
                ("..repository.orders.Other", false, "Other".to_string()),
                ("shop.models", true, String::new()),
            ]
        );
    }

    #[test]
    fn classes_members_and_literals() {
        let facts = Python.extract(SOURCE);
        let types: Vec<_> = facts
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.superclass.as_deref(), t.top_level))
            .collect();
        assert_eq!(types, vec![("OrderService", Some("BaseService"), true)]);
        let fields: Vec<_> = facts.field_declarations.iter().map(|s| text(*s)).collect();
        assert_eq!(
            fields,
            vec![
                "PREFIX = \"order-\"",
                "limit: int = 10",
                "self.repo = repo",
                "self.count: int = 0"
            ]
        );
        // Docstrings are documentation, not string literals.
        let strings: Vec<_> = facts.string_literals.iter().map(|s| text(*s)).collect();
        assert_eq!(strings, vec!["\"order-\"", "\"Order\""]);
        let sigs: Vec<_> = facts.methods.iter().map(|m| text(m.signature)).collect();
        assert_eq!(
            sigs,
            vec![
                "def __init__(self, repo: Repo) -> None",
                "def find(order_id: int) -> \"Order\"",
                "def helper(x)"
            ]
        );
        assert!(text(facts.methods[1].with_body).ends_with("os.path)"));
        let type_ids: Vec<_> = facts.type_identifiers.iter().map(|s| text(*s)).collect();
        assert!(type_ids.contains(&"BaseService") && type_ids.contains(&"Repo"));
        assert!(!type_ids.contains(&"Meta"), "{type_ids:?}");
        let mut names = facts.top_level_names.clone();
        names.sort();
        assert_eq!(names, ["OrderService", "helper"]);
        assert_eq!(facts.syntax_errors, 0);
    }

    #[test]
    fn usages_leave_out_import_lines() {
        let facts = Python.extract(SOURCE);
        assert_eq!(facts.usages_of("Repo"), &[15, 21]);
        assert_eq!(facts.usages_of("os"), &[21]);
        assert_eq!(facts.usages_of("pricing"), &[] as &[u32]);
    }

    #[test]
    fn broken_code_still_yields_facts() {
        let facts = Python.extract("class A(:\n    def f(self, x:\n        return 'hi");
        assert!(facts.syntax_errors > 0);
        assert!(facts.types.iter().any(|t| t.name == "A"));
        assert!(Python.extract("\u{0}\u{1}((((\"\"\"").syntax_errors > 0);
        assert!(
            Python
                .hole_syntax("def f(:\n  return (((", 18)
                .expected
                .is_none()
        );
    }

    /// A repository of paths, for resolution without an index.
    struct Paths {
        paths: Vec<&'static str>,
        names: Vec<(String, FileId)>,
        suffixes: FxHashMap<String, Vec<FileId>>,
    }

    impl Paths {
        fn new(files: &[(&'static str, &str)]) -> Paths {
            let mut paths = Paths {
                paths: files.iter().map(|(p, _)| *p).collect(),
                names: Vec::new(),
                suffixes: FxHashMap::default(),
            };
            for (id, (path, source)) in files.iter().enumerate() {
                for (name, _) in Python.qualified_names(path, &Python.extract(source)) {
                    if !paths.names.iter().any(|(n, _)| *n == name) {
                        paths.names.push((name, id));
                    }
                }
                let starts = std::iter::once(0).chain(path.match_indices('/').map(|(i, _)| i + 1));
                for start in starts {
                    paths
                        .suffixes
                        .entry(path[start..].to_string())
                        .or_default()
                        .push(id);
                }
            }
            for ids in paths.suffixes.values_mut() {
                ids.sort_by_key(|&id| paths.paths[id].len());
            }
            paths
        }

        fn resolve(&self, path: &str, source: &str) -> Vec<(&str, Vec<u32>)> {
            let facts = Python.extract(source);
            Python
                .resolve_imports(path, &facts, self)
                .into_iter()
                .map(|i| (self.paths[i.file], i.usage_lines))
                .collect()
        }
    }

    impl ImportScope for Paths {
        fn file_at(&self, path: &str) -> Option<FileId> {
            self.paths.iter().position(|p| *p == path)
        }
        fn files_ending_with(&self, suffix: &str) -> &[FileId] {
            self.suffixes.get(suffix).map_or(&[], Vec::as_slice)
        }
        fn declaring(&self, qualified: &str) -> Option<FileId> {
            self.names
                .iter()
                .find(|(n, _)| n == qualified)
                .map(|(_, id)| *id)
        }
        fn project_file(&self, _: &str) -> Option<std::sync::Arc<crate::lang::ProjectFile>> {
            None
        }
    }

    #[test]
    fn imports_resolve_to_modules_packages_and_relative_paths() {
        let repo = Paths::new(&[
            ("src/shop/__init__.py", ""),
            ("src/shop/models/__init__.py", "from .order import Order\n"),
            ("src/shop/models/order.py", "class Order:\n    pass\n"),
            (
                "src/shop/util.py",
                "def slug(s):\n    return s\nLIMIT = 3\n",
            ),
            ("src/shop/services/pricing.py", "VAT = 20\n"),
            ("tests/shop/util.py", ""),
            ("src/shop/services/orders.py", ""),
        ]);
        let source = "from shop.models import Order\nfrom . import pricing\nfrom ..util import *\nimport shop.models.order as o\n\nx = Order(pricing.VAT)\ny = slug(o)\n";
        let found = repo.resolve("src/shop/services/orders.py", source);
        assert_eq!(
            found,
            vec![
                // The package, and the module its `__init__.py` re-exports `Order` from.
                ("src/shop/models/__init__.py", vec![5]),
                ("src/shop/models/order.py", vec![5, 6]),
                ("src/shop/services/pricing.py", vec![5]),
                // A wildcard import is used where a name its module declares is.
                ("src/shop/util.py", vec![6]),
            ]
        );
        // An absolute import prefers the source root the importing file is under.
        let from_tests = repo.resolve(
            "tests/shop/test_util.py",
            "import shop.util\nshop.util.slug()\n",
        );
        assert_eq!(from_tests, vec![("tests/shop/util.py", vec![1])]);
        // Modules outside the repository resolve to nothing.
        assert!(
            repo.resolve("src/shop/a.py", "import os\nfrom typing import List\n")
                .is_empty()
        );
    }

    #[test]
    fn comment_and_preamble_lines() {
        assert!(Python.is_comment_line("# a note"));
        assert!(!Python.is_comment_line("x = 1  # note"));
        assert!(!Python.is_comment_line("\"\"\"Docstring.\"\"\""));
        assert!(Python.is_preamble_line("from a.b import c"));
        assert!(Python.is_preamble_line("import os"));
        assert!(!Python.is_preamble_line("from_date = 3"));
        assert!(Python.handles(std::path::Path::new("pkg/mod.pyi")));
    }
}
