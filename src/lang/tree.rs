//! What every language reads off a tree-sitter tree the same way: spans and texts of nodes,
//! the path down to a node and the syntax errors in a range.

use std::cell::RefCell;
use std::ops::Range;

use tree_sitter::{Node, Parser, Tree};

use super::{Span, SyntaxError};
use crate::text::clipped;

thread_local! {
    // A parser is cheap to reuse and not Sync, so each worker thread keeps one per grammar.
    static PARSERS: RefCell<Vec<(&'static str, Parser)>> = const { RefCell::new(Vec::new()) };
}

/// Parse `source` with the grammar named `grammar` (made by `language` the first time this
/// thread needs it); `None` only if tree-sitter refuses the grammar (a build problem).
pub(super) fn parse(
    grammar: &'static str,
    language: impl FnOnce() -> tree_sitter::Language,
    source: &str,
) -> Option<Tree> {
    PARSERS.with(|cell| {
        let mut parsers = cell.borrow_mut();
        let at = match parsers.iter().position(|(name, _)| *name == grammar) {
            Some(at) => at,
            None => {
                let mut parser = Parser::new();
                parser.set_language(&language()).ok()?;
                parsers.push((grammar, parser));
                parsers.len() - 1
            }
        };
        parsers[at].1.parse(source, None)
    })
}

/// A node's byte span.
pub(super) fn span(node: Node) -> Span {
    Span::new(node.start_byte(), node.end_byte())
}

/// A node's text.
pub(super) fn text<'a>(node: Node, source: &'a str) -> &'a str {
    &source[node.byte_range()]
}

/// A type as written, whitespace runs made single spaces: `Map<Long,\n Integer>` →
/// `Map<Long, Integer>`.
pub(super) fn type_text(node: Node, source: &str) -> String {
    text(node, source)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn named_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The lines each name is used on, gathered while a file's tree is walked.
#[derive(Default)]
pub(super) struct NameUsages<'a> {
    lines: rustc_hash::FxHashMap<&'a str, Vec<u32>>,
}

impl<'a> NameUsages<'a> {
    /// `name` is used on the line `node` starts on.
    pub(super) fn record(&mut self, name: &'a str, node: Node) {
        let line = node.start_position().row as u32;
        let lines = self.lines.entry(name).or_default();
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }

    /// Every name with its lines.
    pub(super) fn into_usages(self) -> super::Usages {
        super::Usages::of(self.lines)
    }
}

/// The longest dotted name [`DottedUsages`] keeps (`a.b.c.d.e.f`): a module imported whole is
/// reached through its first few parts.
const MAX_DOTTED_PARTS: usize = 6;

/// Dotted names (`pkg.core.Name`, their first [`MAX_DOTTED_PARTS`] parts) and the
/// lines each is used on, for [`super::FileFacts::dotted_usages`].
#[derive(Default)]
pub(super) struct DottedUsages {
    lines: rustc_hash::FxHashMap<String, Vec<u32>>,
}

impl DottedUsages {
    /// The dotted name of `parts` (innermost last: `Name`, `core`, `pkg` of `pkg.core.Name`)
    /// is used on the line `node` starts on.
    pub(super) fn record(&mut self, mut parts: Vec<&str>, node: Node) {
        parts.reverse();
        parts.truncate(MAX_DOTTED_PARTS);
        let line = node.start_position().row as u32;
        let lines = self.lines.entry(parts.join(".")).or_default();
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }

    /// The names that start with a name one of `imports` binds, which alone say which module
    /// is used.
    pub(super) fn into_usages(self, imports: &[super::ImportDecl]) -> super::Usages {
        let bound: rustc_hash::FxHashSet<&str> = imports
            .iter()
            .flat_map(|i| i.names.iter().map(String::as_str))
            .collect();
        let kept = (self.lines.into_iter())
            .filter(|(name, _)| bound.contains(name.split('.').next().unwrap_or_default()));
        super::Usages::of(kept)
    }
}

/// Climb the path to the expression the placeholder is: the contents of a string (nodes of
/// the grammar's `string_parts` kinds) are their literal.
pub(super) fn expression_at(path: &mut Vec<Node>, string_parts: &[&str]) {
    while path.len() > 1 {
        let node = path[path.len() - 1];
        if node.is_named() && !string_parts.contains(&node.kind()) {
            break;
        }
        path.pop();
    }
}

/// The ancestors of a path's last node, innermost first.
pub(super) fn ancestors<'p, 't>(path: &'p [Node<'t>]) -> impl Iterator<Item = Node<'t>> + 'p {
    path[..path.len().saturating_sub(1)].iter().rev().copied()
}

/// The nodes from `root` down to `node`, both included. tree-sitter keeps no parent links
/// (`Node::parent` searches down from the root every time), so walking up with it is
/// quadratic in nesting depth; the hole's analysis descends once and reads ancestors here.
/// A path's last node is the one it leads to; a prefix of it is the path to an ancestor.
pub(super) fn path_to<'t>(root: Node<'t>, node: Node<'t>) -> Vec<Node<'t>> {
    let mut path = vec![root];
    let mut at = root;
    while at != node {
        match at.child_with_descendant(node) {
            Some(child) => {
                path.push(child);
                at = child;
            }
            None => break,
        }
    }
    path
}

/// Error and missing nodes overlapping `within`, clipped to it, in text order.
pub(super) fn errors(tree: &Tree, source: &str, within: Range<usize>) -> Vec<SyntaxError> {
    // Whole characters only: a span that splits one could not be shown or sliced.
    let within = source.floor_char_boundary(within.start)..source.ceil_char_boundary(within.end);
    let mut found = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let r = node.byte_range();
        let touches = r.start <= within.end && r.end >= within.start;
        if !touches || !(node.has_error() || node.is_missing()) {
            continue;
        }
        if node.is_missing() {
            found.push(SyntaxError {
                span: Span::new(r.start, r.start),
                message: format!("missing `{}`", node.kind()),
            });
        } else if node.is_error() {
            let clipped_range = r.start.max(within.start)..r.end.min(within.end);
            if clipped_range.start < clipped_range.end || r.is_empty() {
                found.push(SyntaxError {
                    span: Span::new(
                        clipped_range.start,
                        clipped_range.end.max(clipped_range.start),
                    ),
                    message: format!("unexpected `{}`", excerpt(clipped(source, clipped_range))),
                });
            }
        } else {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    found.sort_by_key(|e| e.span.start);
    found
}

/// The first line of `text`, trimmed, at most 24 characters.
fn excerpt(text: &str) -> String {
    crate::text::excerpt(text.trim().lines().next().unwrap_or_default(), 24)
}
