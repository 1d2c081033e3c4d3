//! What Java's facts (`java`) and its typed holes (`java_typed`) both read of a syntax tree:
//! parsing, and where a declaration's signature and header lie.

use tree_sitter::{Node, Tree};

use super::Span;

/// Parse Java source; `None` only if tree-sitter refuses the language (a build problem).
pub fn parse(source: &str) -> Option<Tree> {
    super::tree::parse("java", || tree_sitter_java::LANGUAGE.into(), source)
}

/// A declaration from its first modifier to the start of its body, trimmed: a method's
/// signature, a type's header.
pub(super) fn header_span(node: Node, source: &str) -> Span {
    let start = signature_start(node);
    let body = node.child_by_field_name("body");
    let end = body.map_or(node.end_byte(), |b| b.start_byte());
    Span::new(start, start.max(trim_end(source, start, end)))
}

/// Where a method's signature starts: after its annotations (the paper's example signature
/// is `public void InitializeToAssignment(int[] a)`).
pub(super) fn signature_start(method: Node) -> usize {
    let mut cursor = method.walk();
    for child in method.children(&mut cursor) {
        if child.kind() != "modifiers" {
            return child.start_byte();
        }
        let mut inner = child.walk();
        let keyword = child.children(&mut inner).find(|m| {
            !matches!(
                m.kind(),
                "marker_annotation" | "annotation" | "line_comment" | "block_comment"
            )
        });
        if let Some(keyword) = keyword {
            return keyword.start_byte();
        }
    }
    method.start_byte()
}

fn trim_end(source: &str, start: usize, end: usize) -> usize {
    start + source[start..end].trim_end().len()
}
