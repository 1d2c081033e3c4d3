//! What every language's typed-hole reading shares (ChatLSP, paper sections 2.5–2.7, with the
//! hole emulated as its TypeScript port does in section 3.1): a placeholder expression is
//! written at the hole, with the literal it is in and the brackets still open before it
//! closed, and the placeholder's place in the syntax tree says what the hole expects.
//!
//! A language brings a [`HoleGrammar`]: how its text is cut into code, comments and literals
//! ([`Lexicon`]), how `a.b` and `this` are written ([`MemberSyntax`]), and the readers of its
//! tree (outlines, the expected type, locals).

use std::ops::Range;

use tree_sitter::{Node, Tree};

use super::tree::{ancestors, expression_at, path_to};
use super::{Expectation, HolePlace, HoleSyntax, Local, Receiver, TypeOutline};
use crate::text::identifier_start;

/// The placeholder expression written at the hole.
const PLACEHOLDER: &str = "keyholeHole__";

/// How a language's text is cut into code, comments and literals, as far as finding where a
/// hole's prefix ends needs.
pub(super) struct Lexicon {
    pub line_comment: &'static str,
    /// A block comment's opening and closing marks, if the language has them.
    pub block_comment: Option<(&'static str, &'static str)>,
    /// String delimiters, each with whether its literal may span lines; a delimiter that
    /// starts another comes first (`"""` before `"`). The delimiter that opens a literal
    /// closes it, and a backslash escapes the next character.
    pub strings: &'static [(&'static str, bool)],
    /// Keywords an expression may follow directly: a hole right after one gets a space first.
    pub keywords_before_expression: &'static [&'static str],
    /// Whether `{` opens a block of statements ended by `;` (Java, TypeScript): the probe
    /// closes only the brackets opened since the innermost `{` and ends the statement.
    /// Otherwise (Python) it closes every bracket still open.
    pub braces_are_blocks: bool,
}

/// How a language writes a member access (`a.b`) and the objects that are the current
/// instance (`this`, `self`) or its superclass (`super`).
pub(super) struct MemberSyntax {
    /// The node kind of `a.b`, and the fields of its object and its member's name.
    pub kind: &'static str,
    pub object: &'static str,
    pub name: &'static str,
    pub is_current: fn(Node, &str) -> bool,
    pub is_super: fn(Node, &str) -> bool,
}

impl MemberSyntax {
    /// The member access of a language that writes the current instance and its superclass
    /// as the keywords `this` and `super` (Java, TypeScript).
    pub(super) const fn with_this_and_super(
        kind: &'static str,
        object: &'static str,
        name: &'static str,
    ) -> MemberSyntax {
        MemberSyntax {
            kind,
            object,
            name,
            is_current: |node, _| node.kind() == "this",
            is_super: |node, _| node.kind() == "super",
        }
    }

    /// `x` of `this.x`.
    fn field_of_current<'t>(&self, node: Node<'t>, source: &str) -> Option<Node<'t>> {
        let object = node.child_by_field_name(self.object)?;
        (node.kind() == self.kind && (self.is_current)(object, source))
            .then(|| node.child_by_field_name(self.name))
            .flatten()
    }

    /// `x = ▮` and `this.x = ▮`: the variable whose type is expected.
    pub(super) fn assigned(&self, left: Node, source: &str) -> Option<Expectation> {
        if left.kind() == "identifier" {
            return Some(Expectation::Variable {
                name: source[left.byte_range()].into(),
                field_only: false,
            });
        }
        let field = self.field_of_current(left, source)?;
        Some(Expectation::Variable {
            name: source[field.byte_range()].into(),
            field_only: true,
        })
    }

    /// Whose method a call on `object` is: `this.m()`, `super.m()`, `name.m()` and
    /// `this.name.m()`; `None` for any other object.
    pub(super) fn receiver(&self, object: Node, source: &str) -> Option<Receiver> {
        if (self.is_current)(object, source) {
            Some(Receiver::Current)
        } else if (self.is_super)(object, source) {
            Some(Receiver::Super)
        } else if object.kind() == "identifier" {
            Some(Receiver::Name(source[object.byte_range()].into()))
        } else {
            let field = self.field_of_current(object, source)?;
            Some(Receiver::Name(source[field.byte_range()].into()))
        }
    }
}

/// Walk up from the expression at the hole (the path's last node) through the expressions
/// it ends (`a.▮`, `▮()`, a conditional's branch), as `passes(node, parent, grandparent)`
/// says of each: the index in the path of the outermost one, whose parent says what type it
/// must have (and what a language server is asked there). `None` at the root.
pub(super) fn outermost(
    path: &[Node],
    passes: impl Fn(Node, Node, Option<Node>) -> bool,
) -> Option<usize> {
    let mut at = path.len().checked_sub(1)?;
    loop {
        let parent = path[at.checked_sub(1)?];
        let grandparent = at.checked_sub(2).map(|g| path[g]);
        if !passes(path[at], parent, grandparent) {
            return Some(at);
        }
        at -= 1;
    }
}

/// What a condition expects in a language whose conditions are booleans.
pub(super) fn boolean() -> Option<Expectation> {
    Some(Expectation::Type("boolean".into()))
}

/// A language's typed-hole reading: its lexicon and the readers of its syntax tree.
pub(super) struct HoleGrammar {
    pub lexicon: Lexicon,
    /// Node kinds inside a string literal: a placeholder there is the literal.
    pub string_parts: &'static [&'static str],
    pub parse: fn(&str) -> Option<Tree>,
    /// Whether a node kind declares a type (its `name` field names it).
    pub is_type_declaration: fn(&str) -> bool,
    /// Every type declared at the top level or in another type, in source order.
    pub outline: fn(Node, &str) -> Vec<TypeOutline>,
    /// What the syntax around the path's last node (the expression at the hole) expects;
    /// the root is where a called function of the file is looked up.
    pub expectation: fn(&[Node], Node, &str) -> Option<Expectation>,
    /// What the path's last node (the expression at the hole) is: an argument, a
    /// declaration's value, a returned value.
    pub place: fn(&[Node], &str) -> HolePlace,
    /// Parameters and locals with types visible at the path's last node, nearest first.
    pub locals: fn(&[Node], &str) -> Vec<Local>,
    /// Whether the code at the path's last node has no current instance (`this`, `self`).
    pub in_static_code: fn(&[Node], &str) -> bool,
}

/// What `grammar`'s syntax says about a hole at byte `hole` of `source`.
pub(super) fn hole_syntax(grammar: &HoleGrammar, source: &str, hole: usize) -> HoleSyntax {
    let hole = source.floor_char_boundary(hole);
    let (text, inserted, placeholder) = probe(&grammar.lexicon, source, hole)
        .unwrap_or_else(|| (source.to_string(), hole..hole, hole..hole));
    let Some(tree) = (grammar.parse)(&text) else {
        return HoleSyntax::default();
    };
    let root = tree.root_node();
    let deepest = root
        .descendant_for_byte_range(placeholder.start, placeholder.end)
        .unwrap_or(root);
    let mut path = path_to(root, deepest);
    expression_at(&mut path, grammar.string_parts);
    let expected = (!placeholder.is_empty())
        .then(|| (grammar.expectation)(&path, root, &text))
        .flatten();
    let place = match placeholder.is_empty() {
        true => HolePlace::Other,
        false => (grammar.place)(&path, &text),
    };
    HoleSyntax {
        outline: (grammar.outline)(root, &text),
        expected,
        enclosing_types: ancestors(&path)
            .filter(|a| (grammar.is_type_declaration)(a.kind()))
            .filter_map(|a| a.child_by_field_name("name"))
            .map(|n| text[n.byte_range()].to_string())
            .collect(),
        locals: (grammar.locals)(&path, &text),
        is_static: (grammar.in_static_code)(&path, &text),
        place,
        text,
        inserted,
    }
}

/// Where the hole's prefix ends, lexically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lexical {
    Code,
    LineComment,
    BlockComment,
    /// A literal opened by the lexicon's string delimiter of this index.
    String(usize),
}

/// The lexical state at the end of `prefix` and the brackets still open there.
fn scan(lexicon: &Lexicon, prefix: &str) -> (Lexical, Vec<u8>) {
    let bytes = prefix.as_bytes();
    let at = |i: usize, mark: &str| bytes[i..].starts_with(mark.as_bytes());
    let mut state = Lexical::Code;
    let mut open: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match state {
            Lexical::Code => {
                if at(i, lexicon.line_comment) {
                    state = Lexical::LineComment;
                    i += lexicon.line_comment.len();
                    continue;
                }
                if let Some((start, _)) = lexicon.block_comment.filter(|(s, _)| at(i, s)) {
                    state = Lexical::BlockComment;
                    i += start.len();
                    continue;
                }
                if let Some(q) = lexicon.strings.iter().position(|(d, _)| at(i, d)) {
                    state = Lexical::String(q);
                    i += lexicon.strings[q].0.len();
                    continue;
                }
                match b {
                    b'(' | b'[' | b'{' => open.push(b),
                    b')' | b']' | b'}' => {
                        let opener = match b {
                            b')' => b'(',
                            b']' => b'[',
                            _ => b'{',
                        };
                        if let Some(pos) = open.iter().rposition(|&o| o == opener) {
                            open.truncate(pos);
                        }
                    }
                    _ => {}
                }
            }
            Lexical::LineComment if b == b'\n' => state = Lexical::Code,
            Lexical::BlockComment => {
                let end = lexicon.block_comment.map_or("", |(_, end)| end);
                if at(i, end) {
                    state = Lexical::Code;
                    i += end.len();
                    continue;
                }
            }
            Lexical::String(_) if b == b'\\' => i += 1,
            Lexical::String(q) => {
                let (delimiter, multiline) = lexicon.strings[q];
                if at(i, delimiter) {
                    state = Lexical::Code;
                    i += delimiter.len();
                    continue;
                }
                if b == b'\n' && !multiline {
                    state = Lexical::Code;
                }
            }
            _ => {}
        }
        i += 1;
    }
    (state, open)
}

/// `source` with the placeholder written at `hole` and the literal and brackets open there
/// closed (see [`Lexicon::braces_are_blocks`]). Returns the text, the inserted range and the
/// placeholder's range; `None` inside a comment, where nothing is expected.
fn probe(
    lexicon: &Lexicon,
    source: &str,
    hole: usize,
) -> Option<(String, Range<usize>, Range<usize>)> {
    let prefix = &source[..hole];
    let (state, open) = scan(lexicon, prefix);
    let mut insert = String::new();
    let word_before = &prefix[identifier_start(prefix)..];
    if lexicon.keywords_before_expression.contains(&word_before) {
        insert.push(' ');
    }
    let placeholder = hole + insert.len()..hole + insert.len() + PLACEHOLDER.len();
    insert.push_str(PLACEHOLDER);
    match state {
        Lexical::LineComment | Lexical::BlockComment => return None,
        Lexical::String(q) => insert.push_str(lexicon.strings[q].0),
        Lexical::Code => {}
    }
    let closer = |opener: &u8| match opener {
        b'(' => ')',
        b'[' => ']',
        _ => '}',
    };
    if lexicon.braces_are_blocks {
        insert.extend(open.iter().rev().take_while(|&&o| o != b'{').map(closer));
        insert.push(';');
    } else {
        insert.extend(open.iter().rev().map(closer));
    }
    let text = format!("{prefix}{insert}{}", &source[hole..]);
    Some((text, hole..hole + insert.len(), placeholder))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the probe writes at the end of `prefix` in a language, `None` in a comment.
    fn inserted(grammar: &HoleGrammar, prefix: &str) -> Option<String> {
        probe(&grammar.lexicon, prefix, prefix.len()).map(|(text, range, _)| text[range].into())
    }

    #[test]
    fn java_closes_literals_and_the_brackets_of_the_statement() {
        let java = &super::super::java_typed::HOLES;
        let p = PLACEHOLDER;
        assert_eq!(inserted(java, "return").unwrap(), format!(" {p};"));
        assert_eq!(inserted(java, "{ f(a, g(").unwrap(), format!("{p}));"));
        assert_eq!(inserted(java, "{ x[{ f(").unwrap(), format!("{p});"));
        assert_eq!(inserted(java, "s = \"a\\\"b").unwrap(), format!("{p}\";"));
        assert_eq!(inserted(java, "c = '").unwrap(), format!("{p}';"));
        assert_eq!(
            inserted(java, "t = \"\"\"\n a").unwrap(),
            format!("{p}\"\"\";")
        );
        assert_eq!(inserted(java, "s = \"a\n").unwrap(), format!("{p};"));
        assert_eq!(inserted(java, "/* f( */ g("), Some(format!("{p});")));
        assert_eq!(inserted(java, "f(); // g("), None);
        assert_eq!(inserted(java, "/** f("), None);
    }

    #[test]
    fn typescript_template_literals_span_lines() {
        let ts = &super::super::typescript_typed::HOLES;
        let p = PLACEHOLDER;
        assert_eq!(inserted(ts, "await").unwrap(), format!(" {p};"));
        assert_eq!(inserted(ts, "s = `a\n").unwrap(), format!("{p}`;"));
        assert_eq!(inserted(ts, "s = 'a\n").unwrap(), format!("{p};"));
        assert_eq!(inserted(ts, "f({ a: g(").unwrap(), format!("{p});"));
        assert_eq!(inserted(ts, "x = 1; // ("), None);
    }

    #[test]
    fn python_closes_every_bracket_and_triple_quotes() {
        let py = &super::super::python_typed::HOLES;
        let p = PLACEHOLDER;
        assert_eq!(inserted(py, "if not").unwrap(), format!(" {p}"));
        assert_eq!(inserted(py, "d = {'a': f(").unwrap(), format!("{p})}}"));
        assert_eq!(inserted(py, "s = '''a\n").unwrap(), format!("{p}'''"));
        assert_eq!(inserted(py, "s = \"a\\\"").unwrap(), format!("{p}\""));
        assert_eq!(inserted(py, "x = 1  # f("), None);
        assert_eq!(inserted(py, "x = '#'; f(").unwrap(), format!("{p})"));
    }
}
