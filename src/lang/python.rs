//! Python facts through tree-sitter-python, in one pass over the syntax tree, and how Python
//! imports reach repository files.

use std::cell::RefCell;
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};
use tree_sitter::Node;

use super::python_tree::{is_self_attribute, parse};
use super::python_typed;
use super::tree::{DottedUsages, NameUsages, span};
use super::{
    FileFacts, FileId, HoleSyntax, Import, ImportDecl, ImportKind, ImportScope, Language,
    MethodDecl, ProjectFileError, Span, SyntaxError, TypeDecl, TypeSyntax,
};

pub struct Python;

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

    /// pytest's test files: `test_panel.py`, `panel_test.py`.
    fn test_affixes(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&["test_"], &["_test"])
    }

    fn extract(&self, source: &str) -> FileFacts {
        match parse(source) {
            Some(tree) => {
                let mut facts = Extractor::new(source).run(tree.root_node());
                facts.outline =
                    super::Outlines::of(python_typed::outline(tree.root_node(), source));
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

    /// Every import resolved to the module file it names (`a/b.py` or `a/b/__init__.py`) as
    /// Python finds it: a relative import against the importing file's package, an absolute
    /// one under the file's import roots ([`import_roots`]) and nowhere else, so that `import
    /// json` beside a package's `json.py` reaches nothing (the standard library's `json`).
    /// `from m import x` reaches the submodule `m/x.py` where there is one, else `m` and the
    /// module declaring `x` where `m` re-exports it; a module imported whole (`import pkg`,
    /// `import pkg.sub as s`) also reaches the modules declaring the names used through it
    /// (`pkg.Name`); a wildcard import reaches its module, and the modules declaring what it
    /// re-exports, where the file uses a name it brings in. Python has no implicit
    /// same-package names.
    fn resolve_imports(
        &self,
        path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import> {
        let modules = Modules::new(scope);
        let mut found = Vec::new();
        for import in &facts.imports {
            if import.wildcard {
                modules.wildcard(path, import, facts, &mut found);
            } else {
                modules.single(path, import, facts, &mut found);
            }
        }
        found
    }
}

/// How many re-exports deep a name is followed to the module that declares it.
const REEXPORT_DEPTH: usize = 8;

/// Python's module lookup in one repository, for the imports of one file: the file a module
/// name is, and the module that declares a name another module offers.
struct Modules<'s> {
    scope: &'s dyn ImportScope,
    /// Import roots by importing file, worked out once: re-exports are followed through the
    /// same `__init__.py` again and again.
    roots: RefCell<FxHashMap<String, Rc<[String]>>>,
}

impl<'s> Modules<'s> {
    fn new(scope: &'s dyn ImportScope) -> Self {
        Modules {
            scope,
            roots: RefCell::default(),
        }
    }

    fn roots(&self, path: &str) -> Rc<[String]> {
        if let Some(roots) = self.roots.borrow().get(path) {
            return roots.clone();
        }
        let roots: Rc<[String]> = import_roots(self.scope, path).into();
        self.roots
            .borrow_mut()
            .insert(path.to_string(), roots.clone());
        roots
    }

    /// The file of module `module` (`a.b`, `.sibling`, `..pkg.mod`, `.`) imported from the
    /// file at `from`.
    fn file(&self, from: &str, module: &str) -> Option<FileId> {
        let dots = module.len() - module.trim_start_matches('.').len();
        let parts: Vec<&str> = module[dots..]
            .split('.')
            .filter(|p| !p.is_empty())
            .collect();
        let bases: Rc<[String]> = if dots > 0 {
            // Relative: one dot is the importing file's package, each further dot one level up.
            let mut dir: Vec<&str> = from.split('/').collect();
            dir.pop();
            for _ in 1..dots {
                dir.pop()?;
            }
            Rc::from([dir.join("/")])
        } else {
            self.roots(from)
        };
        bases
            .iter()
            .find_map(|base| module_file(base, &parts, |path| self.scope.file_at(path)))
    }

    /// `import a.b`, `import a.b as s`, `from m import x as y`: the module named, and the
    /// modules declaring what the file uses through it.
    fn single(&self, path: &str, import: &ImportDecl, facts: &FileFacts, found: &mut Vec<Import>) {
        let mut lines: Vec<u32> = Vec::new();
        for name in &import.names {
            lines.extend(facts.usages_of(name));
        }
        lines.sort_unstable();
        lines.dedup();
        if let Some(module) = self.file(path, &import.path) {
            super::add_import(found, module, ImportKind::Single, &lines);
            for bound in &import.names {
                let denoted = self.bound_module(path, import, bound).unwrap_or(module);
                for (rest, used) in facts.dotted_uses_of(bound) {
                    let parts: Vec<&str> = rest.split('.').collect();
                    if let Some(home) = self.through(denoted, &parts)
                        && home != module
                    {
                        super::add_import(found, home, ImportKind::Single, used);
                    }
                }
            }
            return;
        }
        // `from m import Name`: the module `m`, and the one declaring `Name` where `m`
        // re-exports it (a package's `__init__.py`).
        let Some((module, name)) = import.path.rsplit_once('.') else {
            return;
        };
        let Some(module) = self.file(path, &from_module(module)) else {
            return;
        };
        super::add_import(found, module, ImportKind::Single, &lines);
        if let Some(home) = self.declaring(module, name, REEXPORT_DEPTH)
            && home != module
        {
            super::add_import(found, home, ImportKind::Single, &lines);
        }
    }

    /// The module a name bound by an import denotes, where it is not the module imported:
    /// `import a.b.c` binds `a`, the package. (`from a import a` reads the same; the
    /// declaration keeps no difference between the two.)
    fn bound_module(&self, path: &str, import: &ImportDecl, bound: &str) -> Option<FileId> {
        let (first, _) = import.path.split_once('.')?;
        (first == bound).then(|| self.file(path, first))?
    }

    /// `from m import *`: `m`, used where the file uses a name it brings in, and the modules
    /// declaring the names it re-exports.
    fn wildcard(
        &self,
        path: &str,
        import: &ImportDecl,
        facts: &FileFacts,
        found: &mut Vec<Import>,
    ) {
        let Some(module) = self.file(path, &import.path) else {
            return;
        };
        let mut through: Vec<u32> = Vec::new();
        let mut homes: Vec<(FileId, &[u32])> = Vec::new();
        for (name, used) in facts.name_usages.iter() {
            if !self.brings_in(module, name) {
                continue;
            }
            let Some(home) = self.declaring(module, name, REEXPORT_DEPTH) else {
                continue;
            };
            through.extend(used);
            if home != module {
                homes.push((home, used));
            }
        }
        through.sort_unstable();
        through.dedup();
        super::add_import(found, module, ImportKind::Wildcard, &through);
        for (home, lines) in homes {
            super::add_import(found, home, ImportKind::Wildcard, lines);
        }
    }

    /// Where a dotted use of `module` leads (`["core", "Name"]` of `pkg.core.Name`): down its
    /// subpackages, then to the module declaring the first name that is no submodule.
    fn through(&self, module: FileId, parts: &[&str]) -> Option<FileId> {
        let mut at = module;
        for part in parts {
            let (path, _) = self.scope.source(at)?;
            match self.submodule(path, part) {
                Some(sub) => at = sub,
                None => return self.declaring(at, part, REEXPORT_DEPTH),
            }
        }
        Some(at)
    }

    /// Submodule `name` of the package whose `__init__.py` is at `path`.
    fn submodule(&self, path: &str, name: &str) -> Option<FileId> {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        if !matches!(file_name, "__init__.py" | "__init__.pyi") {
            return None;
        }
        let dir = &path[..path.len() - file_name.len()];
        module_file(dir.trim_end_matches('/'), &[name], |path| {
            self.scope.file_at(path)
        })
    }

    /// The module declaring `name` as `module` offers it: `module` itself where the name is one
    /// of its top-level classes, functions or assignments, else the module it takes the name
    /// from (`from .core import Name`, `from pkg.core import *`, a submodule `from . import
    /// core`), followed `depth` re-exports deep.
    fn declaring(&self, module: FileId, name: &str, depth: usize) -> Option<FileId> {
        let (path, facts) = self.scope.source(module)?;
        if facts.top_level_names.iter().any(|n| n == name) {
            return Some(module);
        }
        if depth == 0 {
            return None;
        }
        for import in &facts.imports {
            if import.wildcard {
                let Some(from) = self.file(path, &import.path) else {
                    continue;
                };
                if self.brings_in(from, name)
                    && let Some(home) = self.declaring(from, name, depth - 1)
                {
                    return Some(home);
                }
            } else if import.names.iter().any(|n| n == name) {
                // A module bound by name (`from . import core`, `import a.b as name`) is its
                // own home.
                if let Some(sub) = self.file(path, &import.path) {
                    return Some(sub);
                }
                let Some((from, imported)) = import.path.rsplit_once('.') else {
                    continue;
                };
                let Some(from) = self.file(path, &from_module(from)) else {
                    continue;
                };
                return self.declaring(from, imported, depth - 1).or(Some(from));
            }
        }
        None
    }

    /// Whether `from module import *` brings in `name`: one of its `__all__`, else any public
    /// name.
    fn brings_in(&self, module: FileId, name: &str) -> bool {
        let listed = self
            .scope
            .source(module)
            .and_then(|(_, facts)| facts.wildcard_names.as_ref());
        match listed {
            Some(listed) => listed.iter().any(|n| n == name),
            None => !name.starts_with('_'),
        }
    }
}

/// The module part of `from m import name`'s path (`m` of `m.name`): `from . import x` is
/// written `.x`, whose module is the package `.`.
fn from_module(module: &str) -> String {
    if module.chars().all(|c| c == '.') {
        format!("{module}.")
    } else {
        module.to_string()
    }
}

/// Where Python looks for the absolute imports of the file at `path`, first first:
/// - for a test file (`test_*.py`, `*_test.py`, `conftest.py`), pytest's rootdir insertion:
///   the first directory up from it that is no package;
/// - the roots of the project it belongs to (the nearest directory up holding a `setup.py`,
///   `pyproject.toml` or `setup.cfg`, else the repository): those its `pyproject.toml` and
///   `setup.cfg` name ([`configured_roots`]), its `src/`, and the project's own directory;
/// - then the repository's, where the project is another.
///
/// Never a package module's own directory: Python 3's imports are absolute, and a package's
/// `json.py` does not shadow the standard library's `json`.
fn import_roots(scope: &dyn ImportScope, path: &str) -> Vec<String> {
    let dir = parent_dir(path);
    let mut roots: Vec<String> = Vec::new();
    if is_test_file(&path[path.rfind('/').map_or(0, |i| i + 1)..]) {
        let mut base = dir;
        while !base.is_empty() && scope.file_at(&join(base, "__init__.py")).is_some() {
            base = parent_dir(base);
        }
        roots.push(base.to_string());
    }
    let mut project = dir;
    while !project.is_empty() && !is_project(scope, project) {
        project = parent_dir(project);
    }
    roots.extend(project_roots(scope, project));
    if !project.is_empty() {
        roots.extend(project_roots(scope, ""));
    }
    let mut seen = FxHashSet::default();
    roots.retain(|r| seen.insert(r.clone()));
    roots
}

/// Whether pytest collects the file as a test module or conftest (its default patterns).
fn is_test_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".py") else {
        return false;
    };
    stem.starts_with("test_") || stem.ends_with("_test") || stem == "conftest"
}

/// Whether the directory `dir` holds a Python project: a `setup.py`, `pyproject.toml` or
/// `setup.cfg`.
fn is_project(scope: &dyn ImportScope, dir: &str) -> bool {
    scope.file_at(&join(dir, "setup.py")).is_some()
        || ["pyproject.toml", "setup.cfg"]
            .iter()
            .any(|name| scope.project_file(&join(dir, name)).is_some())
}

/// The import roots of the project in `dir`: those its configuration names, its `src/`, and
/// the directory itself (its top-level packages and modules).
fn project_roots(scope: &dyn ImportScope, dir: &str) -> Vec<String> {
    let mut roots: Vec<String> = configured_roots(scope, dir)
        .iter()
        .map(|root| join(dir, root))
        .collect();
    roots.push(join(dir, "src"));
    roots.push(dir.to_string());
    roots
}

/// The import roots the `pyproject.toml` and `setup.cfg` in `dir` name, relative to `dir`.
/// The one place keyhole reads a Python project's configuration: through the index's project
/// files, each read and understood once.
fn configured_roots(scope: &dyn ImportScope, dir: &str) -> Vec<String> {
    let mut roots = Vec::new();
    if let Some(file) = scope.project_file(&join(dir, "pyproject.toml")) {
        roots.extend(file.reading(pyproject_roots).into_iter().flatten().cloned());
    }
    if let Some(file) = scope.project_file(&join(dir, "setup.cfg")) {
        roots.extend(file.reading(setup_cfg_roots).into_iter().flatten().cloned());
    }
    roots
}

/// The import roots a `pyproject.toml` names: setuptools' `package-dir` and `packages.find`
/// `where`, Poetry's `packages` `from`, Hatch's wheel `packages` (`src/pkg`: `src`) and
/// `sources`, PDM's `package-dir`, and pytest's `pythonpath`.
fn pyproject_roots(text: &str) -> Result<Vec<String>, ProjectFileError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ProjectFileError::Toml(crate::config_file::toml_error_line(text, &e))
    })?;
    let at = |keys: &[&str]| -> Option<&toml::Value> {
        let (last, tables) = keys.split_last()?;
        let mut table = &table;
        for key in tables {
            table = table.get(*key)?.as_table()?;
        }
        table.get(*last)
    };
    let mut roots: Vec<String> = Vec::new();
    let setuptools = at(&["tool", "setuptools", "package-dir"]).and_then(toml::Value::as_table);
    for (package, dir) in setuptools.into_iter().flatten() {
        roots.extend(dir.as_str().and_then(|dir| package_dir_root(package, dir)));
    }
    roots.extend(strings(at(&[
        "tool",
        "setuptools",
        "packages",
        "find",
        "where",
    ])));
    let poetry = at(&["tool", "poetry", "packages"]).and_then(toml::Value::as_array);
    for package in poetry.into_iter().flatten() {
        let from = package.get("from").and_then(toml::Value::as_str);
        roots.extend(from.map(str::to_string));
    }
    for wheel in [
        &["tool", "hatch", "build", "targets", "wheel"][..],
        &["tool", "hatch", "build"][..],
    ] {
        let packages = strings(at(&[wheel, &["packages"]].concat()));
        roots.extend(
            packages
                .iter()
                .map(|p| parent_dir(p.trim_end_matches('/')).to_string()),
        );
        match at(&[wheel, &["sources"]].concat()) {
            Some(toml::Value::Table(sources)) => roots.extend(
                sources
                    .iter()
                    .filter(|(_, to)| to.as_str() == Some(""))
                    .map(|(from, _)| from.clone()),
            ),
            sources => roots.extend(strings(sources)),
        }
    }
    let pdm = at(&["tool", "pdm", "build", "package-dir"]).and_then(toml::Value::as_str);
    roots.extend(pdm.map(str::to_string));
    roots.extend(strings(at(&[
        "tool",
        "pytest",
        "ini_options",
        "pythonpath",
    ])));
    Ok(roots.iter().filter_map(|r| repository_dir(r)).collect())
}

/// A TOML string or array's strings.
fn strings(value: Option<&toml::Value>) -> Vec<String> {
    match value {
        Some(toml::Value::String(s)) => vec![s.clone()],
        Some(toml::Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The import roots a `setup.cfg` names: `[options] package_dir` and `[options.packages.find]
/// where`, and pytest's `pythonpath` under `[tool:pytest]`. INI as setuptools reads it:
/// `key = value` or `key: value`, a value going on over indented lines, `#` and `;` comments.
fn setup_cfg_roots(text: &str) -> Result<Vec<String>, ProjectFileError> {
    let mut section = String::new();
    let mut key = String::new();
    let mut values: Vec<(String, String, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            values.push((section.clone(), key.clone(), trimmed.to_string()));
        } else if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            section = name.trim().to_string();
            key.clear();
        } else if let Some(at) = trimmed.find(['=', ':']) {
            key = trimmed[..at].trim().to_string();
            let value = trimmed[at + 1..].trim();
            if !value.is_empty() {
                values.push((section.clone(), key.clone(), value.to_string()));
            }
        }
    }
    let mut roots: Vec<String> = Vec::new();
    for (section, key, value) in &values {
        match (section.as_str(), key.as_str()) {
            ("options", "package_dir") => {
                if let Some((package, dir)) = value.split_once('=') {
                    roots.extend(package_dir_root(package.trim(), dir.trim()));
                }
            }
            ("options.packages.find", "where") | ("tool:pytest", "pythonpath") => {
                roots.extend(value.split_whitespace().map(str::to_string));
            }
            _ => {}
        }
    }
    Ok(roots.iter().filter_map(|r| repository_dir(r)).collect())
}

/// The root a `package_dir` entry makes: `"" = "src"` maps every package under `src/`;
/// `pkg = "lib/pkg"` puts `pkg` under `lib/`. A package kept under another name (`pkg =
/// "lib"`) is no root.
fn package_dir_root(package: &str, dir: &str) -> Option<String> {
    if package.is_empty() {
        return Some(dir.to_string());
    }
    let package = package.replace('.', "/");
    let dir = dir.trim_end_matches('/');
    if dir == package {
        return Some(String::new());
    }
    dir.strip_suffix(&package)
        .and_then(|root| root.strip_suffix('/'))
        .map(str::to_string)
}

/// A configured directory as a repository-relative path (`./src/` → `src`, `.` → the project
/// itself); `None` for one that leaves the project (`..`, absolute).
fn repository_dir(dir: &str) -> Option<String> {
    let dir = dir.trim().trim_matches('"');
    if dir.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = dir
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (!parts.contains(&"..")).then(|| parts.join("/"))
}

/// The directory of a repository path ("" at the root).
fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `dir/name`, or `name` at the repository root.
fn join(dir: &str, name: &str) -> String {
    match (dir, name) {
        ("", name) => name.to_string(),
        (dir, "") => dir.to_string(),
        (dir, name) => format!("{dir}/{name}"),
    }
}

/// The first of the files a module's parts may be under `base` that `file_at` finds, in the
/// order Python prefers them: `a/b.py`, the package `a/b/__init__.py`, then stubs. No parts:
/// the package itself (`from . import x`). Each candidate is written into one buffer: import
/// resolution asks this for every import of every file, and a string per candidate was most
/// of its cost on Django.
fn module_file(
    base: &str,
    parts: &[&str],
    file_at: impl Fn(&str) -> Option<FileId>,
) -> Option<FileId> {
    let mut path = String::with_capacity(128);
    path.push_str(base);
    for (i, part) in parts.iter().enumerate() {
        if i > 0 || !base.is_empty() {
            path.push('/');
        }
        path.push_str(part);
    }
    let module_len = path.len();
    let endings: &[&str] = match parts.is_empty() {
        true => &["__init__.py", "__init__.pyi"],
        false => &[".py", "/__init__.py", ".pyi", "/__init__.pyi"],
    };
    endings.iter().find_map(|ending| {
        path.truncate(module_len);
        if parts.is_empty() && !path.is_empty() {
            path.push('/');
        }
        path.push_str(ending);
        file_at(&path)
    })
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
    /// The object of an attribute (`pkg.core` of `pkg.core.Name`): part of a longer dotted
    /// name, recorded with it.
    in_dotted: bool,
}

struct Extractor<'a> {
    source: &'a str,
    facts: FileFacts,
    usages: NameUsages<'a>,
    dotted: DottedUsages,
    /// Node ids of the docstrings met so far (a definition is met before its body).
    docstrings: Vec<usize>,
}

impl<'a> Extractor<'a> {
    fn new(source: &'a str) -> Self {
        Extractor {
            source,
            facts: FileFacts::default(),
            usages: NameUsages::default(),
            dotted: DottedUsages::default(),
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
                child_ctx.in_dotted =
                    node.kind() == "attribute" && node.child_by_field_name("object") == Some(child);
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
            "attribute" if !ctx.in_dotted && !ctx.in_import => self.dotted_usage(node),
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
            "module" => self.note_docstring_of(Some(node)),
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
        self.note_docstring_of(definition.child_by_field_name("body"));
    }

    /// The docstring of a module or a definition's body, if it has one.
    fn note_docstring_of(&mut self, body: Option<Node>) {
        if let Some(string) = body.and_then(docstring) {
            self.docstrings.push(string.id());
            self.facts.documentation.push(span(string));
        }
    }

    fn usage(&mut self, node: Node) {
        self.usages.record(self.text(node), node);
    }

    /// A dotted name as long as it stays one (`a.b.c` of `a.b.c(x).d`), its first parts.
    fn dotted_usage(&mut self, node: Node) {
        let mut parts: Vec<&str> = Vec::new();
        let mut at = node;
        while at.kind() == "attribute" {
            let Some(name) = at.child_by_field_name("attribute") else {
                return;
            };
            parts.push(self.text(name));
            let Some(object) = at.child_by_field_name("object") else {
                return;
            };
            at = object;
        }
        if at.kind() != "identifier" {
            return;
        }
        parts.push(self.text(at));
        self.dotted.record(parts, node);
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
            ..ImportDecl::default()
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
            if self.text(left) == "__all__" {
                // What `from m import *` brings in, where it is written out.
                let listed = assignment.child_by_field_name("right");
                self.facts.wildcard_names = listed.and_then(|list| self.string_items(list));
            }
        }
    }

    /// The strings of a list or tuple display of plain strings (`["a", 'b']`).
    fn string_items(&self, list: Node) -> Option<Vec<String>> {
        if !matches!(list.kind(), "list" | "tuple") {
            return None;
        }
        let mut cursor = list.walk();
        let items: Vec<Node> = list.named_children(&mut cursor).collect();
        items
            .into_iter()
            .filter(|item| item.kind() != "comment")
            .map(|item| match item.kind() {
                "string" => string_value(self.text(item)).map(str::to_string),
                _ => None,
            })
            .collect()
    }

    fn finish(mut self) -> FileFacts {
        self.facts.name_usages = self.usages.into_usages();
        self.facts.dotted_usages = self.dotted.into_usages(&self.facts.imports);
        self.facts
    }
}

/// The text of a plain string literal without its prefix and quotes (`r"a"` → `a`).
fn string_value(literal: &str) -> Option<&str> {
    let quoted = literal.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    ["\"\"\"", "'''", "\"", "'"].iter().find_map(|quote| {
        quoted
            .strip_prefix(quote)?
            .strip_suffix(quote)
            .filter(|_| quoted.len() >= 2 * quote.len())
    })
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

    /// A repository of paths and their facts, for resolution without an index.
    struct Paths {
        paths: Vec<&'static str>,
        facts: Vec<FileFacts>,
        /// Project files by path.
        projects: Vec<(&'static str, std::sync::Arc<crate::lang::ProjectFile>)>,
    }

    impl Paths {
        fn new(files: &[(&'static str, &str)]) -> Paths {
            let (sources, projects): (Vec<_>, Vec<_>) = files
                .iter()
                .partition(|(p, _)| Python.handles(std::path::Path::new(p)));
            Paths {
                paths: sources.iter().map(|(p, _)| *p).collect(),
                facts: sources.iter().map(|(_, s)| Python.extract(s)).collect(),
                projects: projects
                    .iter()
                    .map(|(p, text)| {
                        let file = crate::lang::ProjectFile::new(text.to_string());
                        (*p, std::sync::Arc::new(file))
                    })
                    .collect(),
            }
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
        fn declaring(&self, _: &str) -> Option<FileId> {
            None
        }
        fn project_file(&self, path: &str) -> Option<std::sync::Arc<crate::lang::ProjectFile>> {
            let found = self.projects.iter().find(|(p, _)| *p == path);
            found.map(|(_, file)| file.clone())
        }
        fn source(&self, file: FileId) -> Option<(&str, &FileFacts)> {
            Some((self.paths.get(file)?, self.facts.get(file)?))
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
        // An absolute import is looked for under the import roots (`src/`), not beside the
        // importing file.
        let from_tests = repo.resolve(
            "tests/shop/test_util.py",
            "import shop.util\nshop.util.slug()\n",
        );
        assert_eq!(from_tests, vec![("src/shop/util.py", vec![1])]);
        // Modules outside the repository resolve to nothing.
        assert!(
            repo.resolve("src/shop/a.py", "import os\nfrom typing import List\n")
                .is_empty()
        );
    }

    #[test]
    fn imports_follow_reexports_to_the_declaring_module() {
        let repo = Paths::new(&[
            (
                "pkg/__init__.py",
                "\"\"\"The package.\"\"\"\nfrom .core import Engine\nfrom ._util import *\n__all__ = [\"Engine\", \"helper\"]\n",
            ),
            ("pkg/core.py", "class Engine:\n    pass\n"),
            (
                "pkg/_util.py",
                "__all__ = ['helper']\ndef helper():\n    pass\ndef hidden():\n    pass\n",
            ),
            ("pkg/sub/__init__.py", "from pkg.sub.impl import Thing\n"),
            ("pkg/sub/impl.py", "class Thing:\n    pass\n"),
        ]);
        let source = "import pkg\nimport pkg.sub as s\nfrom pkg import *\n\npkg.Engine()\ns.Thing()\nhelper()\nhidden()\n";
        assert_eq!(
            repo.resolve("tests/test_x.py", source),
            vec![
                ("pkg/__init__.py", vec![4, 6]),
                ("pkg/core.py", vec![4]),
                ("pkg/sub/__init__.py", vec![5]),
                ("pkg/sub/impl.py", vec![5]),
                // Through the package's `__all__` and its wildcard import; `hidden` is in
                // neither `__all__`.
                ("pkg/_util.py", vec![6]),
            ]
        );
        // `import a.b.c` binds `a`: `a.b.c.Name` walks down the subpackages.
        let deep = repo.resolve(
            "tests/test_y.py",
            "import pkg.sub.impl\n\npkg.sub.impl.Thing\npkg.Engine\n",
        );
        assert_eq!(
            deep,
            vec![("pkg/sub/impl.py", vec![2, 3]), ("pkg/core.py", vec![3])]
        );
    }

    #[test]
    fn absolute_imports_come_from_import_roots_only() {
        let repo = Paths::new(&[
            ("pkg/__init__.py", ""),
            ("pkg/json.py", "def dumps(x):\n    pass\n"),
            ("pkg/types.py", "Number = int\n"),
            ("pkg/abc.py", "class Base:\n    pass\n"),
            ("pkg/util.py", "def slug(s):\n    pass\n"),
        ]);
        let source = "from abc import ABC\nimport json\nimport types\nfrom pkg.util import slug\nfrom . import types as own\n\nslug(json, types, own, ABC)\n";
        assert_eq!(
            repo.resolve("pkg/service.py", source),
            vec![("pkg/util.py", vec![6]), ("pkg/types.py", vec![6])],
            "the standard library's abc, json and types are no package modules"
        );
        // A test module outside any package sees its own directory (pytest's rootdir
        // insertion), and the roots.
        let tests = Paths::new(&[
            ("tests/helpers.py", "def make():\n    pass\n"),
            ("tests/test_a.py", ""),
            ("tests/unit/__init__.py", ""),
            ("tests/unit/test_b.py", ""),
            ("tests/scripts/tool.py", ""),
            ("tests/scripts/gen.py", ""),
        ]);
        let source = "from helpers import make\nmake()\n";
        assert_eq!(
            tests.resolve("tests/test_a.py", source),
            vec![("tests/helpers.py", vec![1])]
        );
        assert_eq!(
            tests.resolve("tests/unit/test_b.py", source),
            vec![("tests/helpers.py", vec![1])]
        );
        assert!(
            tests
                .resolve("tests/scripts/gen.py", "import tool\ntool.x\n")
                .is_empty()
        );
        // A project's `setup.py` makes its directory a root for its own files.
        let examples = Paths::new(&[
            ("examples/complex/setup.py", ""),
            ("examples/complex/complex/__init__.py", ""),
            ("examples/complex/complex/cli.py", "def main():\n    pass\n"),
            ("examples/complex/complex/commands/cmd_init.py", ""),
        ]);
        assert_eq!(
            examples.resolve(
                "examples/complex/complex/commands/cmd_init.py",
                "from complex.cli import main\nmain()\n"
            ),
            vec![("examples/complex/complex/cli.py", vec![1])]
        );
    }

    #[test]
    fn project_files_name_import_roots() {
        let roots = |files: &[(&'static str, &str)]| -> Vec<String> {
            let repo = Paths::new(files);
            import_roots(&repo, "x.py")
        };
        assert_eq!(
            roots(&[(
                "pyproject.toml",
                "[tool.setuptools.packages.find]\nwhere = [\"lib\"]\n"
            )]),
            ["lib", "src", ""]
        );
        assert_eq!(
            roots(&[(
                "pyproject.toml",
                "[tool.setuptools.package-dir]\n\"\" = \"./code/\"\nacme = \"other/acme\"\nodd = \"elsewhere\"\n"
            )]),
            ["code", "other", "src", ""]
        );
        assert_eq!(
            roots(&[(
                "pyproject.toml",
                "[tool.poetry]\npackages = [{ include = \"a\", from = \"python\" }]\n[tool.hatch.build.targets.wheel]\npackages = [\"pkgs/attr\"]\n[tool.pdm.build]\npackage-dir = \"pdm\"\n[tool.pytest.ini_options]\npythonpath = [\".\", \"../outside\", \"/abs\"]\n"
            )]),
            ["python", "pkgs", "pdm", "", "src"]
        );
        assert_eq!(
            roots(&[(
                "setup.cfg",
                "[metadata]\nname = x\n\n[options]\npackage_dir =\n    =source\n# comment\n[options.packages.find]\nwhere = found\n[tool:pytest]\npythonpath = tests\n"
            )]),
            ["source", "found", "tests", "src", ""]
        );
        // A malformed pyproject.toml names no root and says why, on one line.
        let repo = Paths::new(&[("pyproject.toml", "[tool.setuptools\n")]);
        assert_eq!(import_roots(&repo, "x.py"), ["src", ""]);
        let file = repo.project_file("pyproject.toml").unwrap();
        let problem = file.problem().expect("a problem").to_string();
        assert!(
            problem.starts_with("line 1") && !problem.contains('\n'),
            "{problem}"
        );
    }

    #[test]
    fn docstrings_all_and_dotted_names_are_recorded() {
        let source = "\"\"\"Doc.\n\nMore.\"\"\"\nimport pkg\n__all__ = ('a', \"b\")\n\ndef f():\n    \"\"\"F.\"\"\"\n    return pkg.core.Name(1).attr + other.x\n";
        let facts = Python.extract(source);
        let docs: Vec<&str> = facts
            .documentation
            .iter()
            .map(|s| &source[s.range()])
            .collect();
        assert_eq!(docs, ["\"\"\"Doc.\n\nMore.\"\"\"", "\"\"\"F.\"\"\""]);
        assert_eq!(
            facts.wildcard_names,
            Some(vec!["a".to_string(), "b".to_string()])
        );
        // Only names an import binds start a recorded dotted name; a call ends it.
        assert_eq!(
            facts.dotted_usages,
            crate::lang::Usages::of([("pkg.core.Name", vec![8])])
        );
        let computed = Python.extract("__all__ = [n for n in names]\n");
        assert_eq!(
            computed.wildcard_names, None,
            "not written out: every public name"
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
