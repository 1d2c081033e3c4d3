//! Java facts through tree-sitter-java, in one pass over the syntax tree.

use std::sync::LazyLock;

use tree_sitter::{Node, Tree, TreeCursor};

use super::java_tree::header_span;
pub use super::java_tree::parse;
use super::java_typed;
use super::tree::{NameUsages, span};
use super::{
    FileFacts, FileId, HoleSyntax, Import, ImportDecl, ImportKind, ImportScope, Language,
    MethodDecl, Span, SyntaxError, TypeDecl, TypeKind, TypeSyntax,
};

pub struct Java;

impl Language for Java {
    fn name(&self) -> &'static str {
        "java"
    }

    fn display_name(&self) -> &'static str {
        "Java"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["java"]
    }

    fn extract(&self, source: &str) -> FileFacts {
        match parse(source) {
            Some(tree) => {
                let mut facts = Extractor::new(source).run(&tree);
                facts.outline = super::Outlines::of(java_typed::outline(tree.root_node(), source));
                facts
            }
            None => FileFacts::default(),
        }
    }

    fn line_comment(&self) -> &'static str {
        "//"
    }

    /// RLPG's hole sampler skips lines that start with `/` or `*` once trimmed (javadoc,
    /// block and line comments).
    fn is_comment_line(&self, trimmed: &str) -> bool {
        trimmed.starts_with('/') || trimmed.starts_with('*')
    }

    fn hole_syntax(&self, source: &str, hole: usize) -> HoleSyntax {
        super::hole_grammar::hole_syntax(&java_typed::HOLES, source, hole)
    }

    fn syntax_errors(&self, source: &str, within: std::ops::Range<usize>) -> Vec<SyntaxError> {
        parse(source).map_or_else(Vec::new, |tree| super::tree::errors(&tree, source, within))
    }

    fn is_preamble_line(&self, trimmed: &str) -> bool {
        trimmed.starts_with("package ") || trimmed.starts_with("import ")
    }

    fn types(&self) -> &'static dyn TypeSyntax {
        &java_typed::JavaTypes
    }

    /// `package.Type` per top-level type; a file whose path matches its package is where
    /// javac would look for it.
    fn qualified_names(&self, path: &str, facts: &FileFacts) -> Vec<(String, bool)> {
        let top_level = facts.types.iter().filter(|t| t.top_level);
        top_level
            .map(|decl| {
                let fq = qualify(facts.package.as_deref(), &decl.name);
                let conventional = path.ends_with(&format!("{}.java", fq.replace('.', "/")));
                (fq, conventional)
            })
            .collect()
    }

    /// Single-type imports (also static imports of a type's members and nested types),
    /// wildcard imports resolving to the file of a type used in the file, and types of the
    /// same package used without an import.
    fn resolve_imports(
        &self,
        _path: &str,
        facts: &FileFacts,
        scope: &dyn ImportScope,
    ) -> Vec<Import> {
        let mut found = Vec::new();
        let used_types = || facts.name_usages.iter().filter(|(n, _)| starts_upper(n));
        // One buffer for every qualified name asked for (a file asks for hundreds).
        let mut qualified = String::new();
        let mut declaring = |package: Option<&str>, name: &str| {
            qualified.clear();
            if let Some(package) = package {
                qualified.push_str(package);
                qualified.push('.');
            }
            qualified.push_str(name);
            scope.declaring(&qualified)
        };
        for import in &facts.imports {
            if import.wildcard {
                for (name, lines) in used_types() {
                    if let Some(target) = declaring(Some(&import.path), name) {
                        super::add_import(&mut found, target, ImportKind::Wildcard, lines);
                    }
                }
            } else if let Some(target) = longest_type_prefix(scope, &import.path) {
                let simple = import.path.rsplit('.').next().unwrap_or(&import.path);
                let lines = facts.usages_of(simple);
                super::add_import(&mut found, target, ImportKind::Single, lines);
            }
        }
        for (name, lines) in used_types() {
            if let Some(target) = declaring(facts.package.as_deref(), name) {
                super::add_import(&mut found, target, ImportKind::SamePackage, lines);
            }
        }
        found
    }

    /// RLPG's `parse_tree.py`: the dotted path rooted where its first part last occurs in the
    /// importing file's path, as a `.java` file; `java.*` left out.
    fn rlpg_code_covers(&self) -> bool {
        true
    }

    fn rlpg_code_import_path(&self, from: &str, import: &ImportDecl) -> Option<String> {
        let parts: Vec<&str> = import.path.split('.').collect();
        if parts[0] == "java" {
            return None;
        }
        let path_parts: Vec<&str> = from.split('/').collect();
        let root = path_parts.iter().rposition(|p| *p == parts[0])?;
        Some([&path_parts[..root], &parts[..]].concat().join("/") + ".java")
    }
}

fn qualify(package: Option<&str>, name: &str) -> String {
    match package {
        Some(p) => format!("{p}.{name}"),
        None => name.to_string(),
    }
}

fn starts_upper(name: &str) -> bool {
    name.chars().next().is_some_and(char::is_uppercase)
}

/// `a.b.Outer.Inner.member` → the file of `a.b.Outer.Inner` or else of `a.b.Outer`.
fn longest_type_prefix(scope: &dyn ImportScope, path: &str) -> Option<FileId> {
    let mut prefix = path;
    loop {
        if let Some(id) = scope.declaring(prefix) {
            return Some(id);
        }
        prefix = prefix.rsplit_once('.')?.0;
    }
}

/// Ids of the node kinds the extractor looks at.
struct Kinds {
    identifier: u16,
    type_identifier: u16,
    string_literal: u16,
    field_declaration: u16,
    method_declaration: u16,
    import_declaration: u16,
    package_declaration: u16,
    types: [(u16, TypeKind); 4],
}

impl Kinds {
    fn type_kind(&self, id: u16) -> Option<TypeKind> {
        self.types
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, kind)| *kind)
    }
}

static KINDS: LazyLock<Kinds> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_java::LANGUAGE.into();
    let id = |name: &str| language.id_for_node_kind(name, true);
    Kinds {
        identifier: id("identifier"),
        type_identifier: id("type_identifier"),
        string_literal: id("string_literal"),
        field_declaration: id("field_declaration"),
        method_declaration: id("method_declaration"),
        import_declaration: id("import_declaration"),
        package_declaration: id("package_declaration"),
        types: [
            (id("class_declaration"), TypeKind::Class),
            (id("interface_declaration"), TypeKind::Interface),
            (id("enum_declaration"), TypeKind::Enum),
            (id("record_declaration"), TypeKind::Record),
        ],
    }
});

struct Extractor<'a> {
    source: &'a str,
    facts: FileFacts,
    usages: NameUsages<'a>,
}

impl<'a> Extractor<'a> {
    fn new(source: &'a str) -> Self {
        Extractor {
            source,
            facts: FileFacts::default(),
            usages: NameUsages::default(),
        }
    }

    fn text(&self, node: Node) -> &'a str {
        &self.source[node.byte_range()]
    }

    /// Depth-first walk without recursion, so deeply nested code cannot overflow the stack.
    fn run(mut self, tree: &Tree) -> FileFacts {
        let mut cursor: TreeCursor = tree.walk();
        // Depth at which we entered an import or package declaration, if inside one.
        let mut header_depth: Option<usize> = None;
        let mut depth = 0usize;
        loop {
            let node = cursor.node();
            let in_header = header_depth.is_some();
            if self.visit(node, in_header, depth) {
                header_depth = Some(depth);
            }
            if cursor.goto_first_child() {
                depth += 1;
                continue;
            }
            loop {
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return self.finish();
                }
                depth -= 1;
                if header_depth == Some(depth) {
                    header_depth = None;
                }
            }
            if header_depth == Some(depth) {
                header_depth = None;
            }
        }
    }

    /// Record what `node`, `depth` levels below the root, contributes; returns true when it
    /// starts an import/package header.
    fn visit(&mut self, node: Node, in_header: bool, depth: usize) -> bool {
        if node.is_error() || node.is_missing() {
            self.facts.syntax_errors += 1;
        }
        // Node kinds are compared by id: this runs for every node of every file.
        let k = &*KINDS;
        let id = node.kind_id();
        if id == k.identifier {
            self.facts.identifiers.push(span(node));
            self.usage(node, in_header);
        } else if id == k.type_identifier {
            self.facts.type_identifiers.push(span(node));
            self.usage(node, in_header);
        } else if id == k.string_literal {
            self.facts.string_literals.push(span(node));
        } else if id == k.field_declaration {
            self.facts.field_declarations.push(span(node));
        } else if id == k.method_declaration {
            self.method(node);
        } else if let Some(kind) = k.type_kind(id) {
            // The root is the `program` node; asking a node for its parent would search down
            // from the root again, quadratic in nesting depth over a file.
            self.type_decl(node, kind, depth == 1);
        } else if id == k.import_declaration {
            self.import(node);
            return true;
        } else if id == k.package_declaration {
            self.facts.package = node
                .named_children(&mut node.walk())
                .find(|c| matches!(c.kind(), "scoped_identifier" | "identifier"))
                .map(|c| self.text(c).to_string());
            return true;
        }
        false
    }

    fn usage(&mut self, node: Node, in_header: bool) {
        if in_header {
            return;
        }
        self.usages.record(self.text(node), node);
    }

    fn import(&mut self, node: Node) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        let path = children
            .iter()
            .find(|c| matches!(c.kind(), "scoped_identifier" | "identifier"));
        if let Some(path) = path {
            self.facts.imports.push(ImportDecl {
                path: self.text(*path).split_whitespace().collect(),
                wildcard: children.iter().any(|c| c.kind() == "asterisk"),
                is_static: children.iter().any(|c| c.kind() == "static"),
                ..ImportDecl::default()
            });
        }
    }

    fn type_decl(&mut self, node: Node, kind: TypeKind, top_level: bool) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        let superclass = node
            .child_by_field_name("superclass")
            .and_then(|s| s.named_child(0))
            .map(|t| simple_type_name(self.text(t)).to_string());
        self.facts.types.push(TypeDecl {
            name: self.text(name).to_string(),
            kind,
            name_span: span(name),
            superclass,
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

    fn finish(mut self) -> FileFacts {
        self.facts.name_usages = self.usages.into_usages();
        self.facts
    }
}

/// `Map<K, V>` → `Map`, `java.util.List` → `List`.
pub(super) fn simple_type_name(text: &str) -> &str {
    let base = text.split('<').next().unwrap_or(text).trim();
    base.rsplit('.').next().unwrap_or(base).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"package com.acme.shop;

import java.util.List;
import com.acme.shop.model.*;
import static com.acme.shop.util.TextUtil.slug;

/** An order service. */
public class OrderService extends BaseService<Order> implements Service {
    private static final String PREFIX = "order-";
    private final OrderRepository repository;

    @Override
    public Order find(long id) {
        return repository.findById(id);
    }

    abstract void close();

    static class Helper {}
}
"#;

    fn text(span: Span) -> &'static str {
        &SOURCE[span.range()]
    }

    #[test]
    fn extracts_package_imports_and_types() {
        let facts = Java.extract(SOURCE);
        assert_eq!(facts.package.as_deref(), Some("com.acme.shop"));
        let imports: Vec<_> = facts
            .imports
            .iter()
            .map(|i| (i.path.as_str(), i.wildcard, i.is_static))
            .collect();
        assert_eq!(
            imports,
            vec![
                ("java.util.List", false, false),
                ("com.acme.shop.model", true, false),
                ("com.acme.shop.util.TextUtil.slug", false, true)
            ]
        );
        let types: Vec<_> = facts
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.superclass.as_deref(), t.top_level))
            .collect();
        assert_eq!(
            types,
            vec![
                ("OrderService", Some("BaseService"), true),
                ("Helper", None, false)
            ]
        );
        assert_eq!(facts.syntax_errors, 0);
    }

    #[test]
    fn extracts_members_literals_and_signatures() {
        let facts = Java.extract(SOURCE);
        let fields: Vec<_> = facts.field_declarations.iter().map(|s| text(*s)).collect();
        assert_eq!(
            fields,
            vec![
                "private static final String PREFIX = \"order-\";",
                "private final OrderRepository repository;"
            ]
        );
        assert_eq!(text(facts.string_literals[0]), "\"order-\"");
        let sigs: Vec<_> = facts.methods.iter().map(|m| text(m.signature)).collect();
        assert_eq!(
            sigs,
            vec!["public Order find(long id)", "abstract void close();"]
        );
        assert!(text(facts.methods[0].with_body).ends_with("findById(id);\n    }"));
        assert_eq!(text(facts.methods[0].name), "find");
    }

    #[test]
    fn usages_leave_out_import_and_package_lines() {
        let facts = Java.extract(SOURCE);
        assert_eq!(facts.usages_of("Order"), &[7, 12]);
        assert_eq!(facts.usages_of("List"), &[] as &[u32]);
        assert_eq!(facts.usages_of("repository"), &[9, 13]);
    }

    #[test]
    fn broken_code_still_yields_facts() {
        let facts = Java.extract("class A { void f( { int x = ; } String s = \"hi\"; ");
        assert!(facts.syntax_errors > 0);
        assert_eq!(facts.types[0].name, "A");
        assert!(Java.extract("\u{0}\u{1}{{{{((((").syntax_errors > 0);
    }
}
