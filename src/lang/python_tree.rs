//! What Python's facts (`python`) and its typed holes (`python_typed`) both read of a syntax
//! tree: parsing, and `self.x`.

use tree_sitter::{Node, Tree};

/// Parse Python source; `None` only if tree-sitter refuses the language (a build problem).
pub(super) fn parse(source: &str) -> Option<Tree> {
    super::tree::parse("python", || tree_sitter_python::LANGUAGE.into(), source)
}

/// `self.x`.
pub(super) fn is_self_attribute(node: Node, source: &str) -> bool {
    node.kind() == "attribute"
        && node
            .child_by_field_name("object")
            .is_some_and(|o| o.kind() == "identifier" && &source[o.byte_range()] == "self")
}
