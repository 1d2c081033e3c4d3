//! What TypeScript's facts (`typescript`) and its typed holes (`typescript_typed`) both read
//! of a syntax tree: the two grammars and parsing with them, the declarations a node is, and
//! where a declaration's signature and header lie.

use tree_sitter::{Node, Tree};

use super::{Span, TypeKind};

/// One of the two grammars tree-sitter-typescript ships: TypeScript proper, and TSX, which
/// also reads JavaScript and JSX. Both are the one language "typescript" to the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grammar {
    TypeScript,
    Tsx,
}

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

/// A constructor parameter with `public`, `private`, `protected` or `readonly` declares a
/// field.
pub(super) fn is_parameter_property(parameter: Node) -> bool {
    let mut cursor = parameter.walk();
    parameter
        .children(&mut cursor)
        .any(|c| c.kind() == "accessibility_modifier" || (c.kind() == "readonly" && !c.is_named()))
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
