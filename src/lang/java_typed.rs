//! Java syntax for typed-hole context (ChatLSP, paper sections 2.5–2.7): type outlines
//! (headers and member declarations, bodies left out), what the syntax around a hole says
//! about its expected type and scope, and the syntax errors inside a completion.
//!
//! Java has no hole syntax, so the hole is emulated as ChatLSP's TypeScript port does (section
//! 3.1): a placeholder expression is written at the hole, with the brackets still open before
//! it closed, and the placeholder's place in the syntax tree gives the expected type.

use tree_sitter::Node;

use super::hole_grammar::{HoleGrammar, Lexicon, MemberSyntax, boolean};
use super::java_tree::{header_span, parse, signature_start};
use super::tree::{ancestors, named_children, span, text, type_text};
use super::{
    Expectation, FieldOutline, HolePlace, Local, MethodOutline, Receiver, Span, TypeKind,
    TypeOutline, TypeSyntax,
};

// ----- Outlines -------------------------------------------------------------------------------

fn type_kind(kind: &str) -> Option<TypeKind> {
    match kind {
        "class_declaration" => Some(TypeKind::Class),
        "interface_declaration" => Some(TypeKind::Interface),
        "enum_declaration" => Some(TypeKind::Enum),
        "record_declaration" => Some(TypeKind::Record),
        _ => None,
    }
}

/// Parts of a type body that hold members too: what error recovery wrapped, and an enum's
/// declarations after its constants.
fn is_body_part(node: Node) -> bool {
    node.is_error() || node.kind() == "enum_body_declarations"
}

/// Every type declared at the top level or in another type's body, in source order.
pub(super) fn outline(root: Node, source: &str) -> Vec<TypeOutline> {
    let mut types = Vec::new();
    // An explicit stack of bodies to look in: deep nesting cannot overflow the call stack.
    let mut bodies = vec![root];
    while let Some(body) = bodies.pop() {
        for child in named_children(body) {
            if let Some(kind) = type_kind(child.kind()) {
                types.push(type_outline(child, kind, source));
                bodies.extend(child.child_by_field_name("body"));
            } else if is_body_part(child) {
                bodies.push(child);
            }
        }
    }
    types.sort_by_key(|t| t.decl.start);
    types
}

fn type_outline(node: Node, kind: TypeKind, source: &str) -> TypeOutline {
    let mut outline = TypeOutline {
        name: node
            .child_by_field_name("name")
            .map_or_else(String::new, |n| text(n, source).to_string()),
        kind,
        header: header_span(node, source),
        decl: span(node),
        supertypes: supertypes(node, source),
        constants: Vec::new(),
        fields: Vec::new(),
        methods: Vec::new(),
    };
    let in_interface = kind == TypeKind::Interface;
    let Some(body) = node.child_by_field_name("body") else {
        return outline;
    };
    for member in named_children(body) {
        let parts = if is_body_part(member) {
            named_children(member)
        } else {
            vec![member]
        };
        for member in parts {
            match member.kind() {
                "field_declaration" | "constant_declaration" => {
                    outline
                        .fields
                        .extend(field_outline(member, source, in_interface));
                }
                "method_declaration" | "constructor_declaration" => {
                    outline.methods.extend(method_outline(member, source));
                }
                "enum_constant" => outline.constants.push(constant_span(member)),
                _ => {}
            }
        }
    }
    outline
}

/// The types after `extends` and `implements`.
fn supertypes(node: Node, source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in named_children(node) {
        let types = match part.kind() {
            "superclass" => named_children(part),
            "super_interfaces" | "extends_interfaces" => named_children(part)
                .into_iter()
                .filter(|l| l.kind() == "type_list")
                .flat_map(named_children)
                .collect(),
            _ => continue,
        };
        out.extend(types.into_iter().map(|t| type_text(t, source)));
    }
    out
}

fn has_modifier(node: Node, keyword: &str) -> bool {
    let mut cursor = node.walk();
    let modifiers = node.children(&mut cursor).find(|c| c.kind() == "modifiers");
    modifiers.is_some_and(|m| {
        let mut inner = m.walk();
        m.children(&mut inner).any(|k| k.kind() == keyword)
    })
}

fn field_outline(node: Node, source: &str, in_interface: bool) -> Option<FieldOutline> {
    let ty = node.child_by_field_name("type")?;
    let mut cursor = node.walk();
    let names = node
        .children_by_field_name("declarator", &mut cursor)
        .filter_map(|d| d.child_by_field_name("name"))
        .map(|n| (text(n, source).to_string(), span(n)))
        .collect();
    Some(FieldOutline {
        head: Span::new(signature_start(node), ty.end_byte()),
        type_name: type_text(ty, source),
        names,
        decl: span(node),
        is_static: in_interface || has_modifier(node, "static"),
        is_private: has_modifier(node, "private"),
    })
}

fn method_outline(node: Node, source: &str) -> Option<MethodOutline> {
    let name = node.child_by_field_name("name")?;
    let mut params = Vec::new();
    let mut varargs = false;
    for param in node
        .child_by_field_name("parameters")
        .map(named_children)
        .unwrap_or_default()
    {
        match param.kind() {
            "formal_parameter" => params.extend(
                param
                    .child_by_field_name("type")
                    .map(|t| type_text(t, source)),
            ),
            "spread_parameter" => {
                varargs = true;
                params.extend(
                    named_children(param)
                        .into_iter()
                        .find(|c| !c.kind().contains("annotation") && !is_declaration_part(*c))
                        .map(|t| type_text(t, source)),
                );
            }
            _ => {}
        }
    }
    Some(MethodOutline {
        name: text(name, source).to_string(),
        signature: header_span(node, source),
        decl: span(node),
        return_type: node
            .child_by_field_name("type")
            .map(|t| type_text(t, source)),
        params,
        varargs,
        is_static: has_modifier(node, "static"),
        is_private: has_modifier(node, "private"),
    })
}

fn is_declaration_part(node: Node) -> bool {
    matches!(node.kind(), "modifiers" | "variable_declarator")
}

/// An enum constant with its arguments, without a class body.
fn constant_span(node: Node) -> Span {
    let end = node
        .child_by_field_name("arguments")
        .or_else(|| node.child_by_field_name("name"))
        .map_or(node.end_byte(), |n| n.end_byte());
    Span::new(node.start_byte(), end)
}

// ----- The hole -------------------------------------------------------------------------------

/// Java's typed-hole reading.
pub(super) const HOLES: HoleGrammar = HoleGrammar {
    lexicon: Lexicon {
        line_comment: "//",
        block_comment: Some(("/*", "*/")),
        strings: &[("\"\"\"", true), ("\"", false), ("'", false)],
        keywords_before_expression: &["return", "new", "throw", "case", "yield", "assert", "else"],
        braces_are_blocks: true,
    },
    string_parts: &["string_fragment", "escape_sequence"],
    parse,
    is_type_declaration: |kind| type_kind(kind).is_some(),
    outline,
    expectation,
    // No place asked of a server yet: the generic hole is asked everywhere.
    place: |_, _| HolePlace::Other,
    locals,
    in_static_code,
};

/// `a.b`, `this` and `super` in Java.
const MEMBERS: MemberSyntax = MemberSyntax::with_this_and_super("field_access", "object", "field");

/// Walk up from the expression at the hole (the path's last node) through expressions it
/// ends, to the place that says what type it must have.
fn expectation(path: &[Node], _root: Node, source: &str) -> Option<Expectation> {
    let mut at = path.len().checked_sub(1)?;
    loop {
        let node = path[at];
        let parent = path[at.checked_sub(1)?];
        let grandparent = at.checked_sub(2).map(|g| path[g]);
        let is = |field: &str| parent.child_by_field_name(field) == Some(node);
        match parent.kind() {
            "parenthesized_expression" => match grandparent.map(|g| g.kind()) {
                Some("if_statement" | "while_statement" | "do_statement") => return boolean(),
                _ => at -= 1,
            },
            "field_access" if is("field") => at -= 1,
            "method_invocation" if is("name") => at -= 1,
            "ternary_expression" if is("condition") => return boolean(),
            "unary_expression" => {
                let op = parent.child_by_field_name("operator").map(|o| o.kind());
                return (op == Some("!")).then(boolean).flatten();
            }
            "array_access" if is("index") => return Some(Expectation::Type("int".into())),
            "ternary_expression" => at -= 1,
            "binary_expression" => {
                let op = parent.child_by_field_name("operator").map(|o| o.kind());
                return matches!(op, Some("&&" | "||")).then(boolean).flatten();
            }
            "variable_declarator" if is("value") => {
                let ty = grandparent?.child_by_field_name("type")?;
                let ty = type_text(ty, source);
                return (ty != "var").then_some(Expectation::Type(ty));
            }
            "assignment_expression" if is("right") => {
                let op = parent.child_by_field_name("operator")?;
                return (op.kind() == "=")
                    .then(|| MEMBERS.assigned(parent.child_by_field_name("left")?, source))
                    .flatten();
            }
            "return_statement" => return return_type(&path[..at], source),
            "argument_list" => return argument(&path[..at], node, source),
            _ => return None,
        }
    }
}

/// The return type of the method the `return` (the path's last node) is in (none in a
/// lambda or constructor).
fn return_type(statement: &[Node], source: &str) -> Option<Expectation> {
    let method = ancestors(statement).find(|a| {
        matches!(
            a.kind(),
            "method_declaration" | "lambda_expression" | "constructor_declaration" | "class_body"
        )
    })?;
    let ty = method
        .child_by_field_name("type")
        .filter(|_| method.kind() == "method_declaration")?;
    let ty = type_text(ty, source);
    (ty != "void").then_some(Expectation::Type(ty))
}

/// Argument `node` of the call whose argument list is the path's last node.
fn argument(list_path: &[Node], node: Node, source: &str) -> Option<Expectation> {
    let (&list, call_path) = list_path.split_last()?;
    let arguments: Vec<Node> = named_children(list)
        .into_iter()
        .filter(|c| !c.kind().ends_with("comment"))
        .collect();
    let position = arguments.iter().position(|a| *a == node)?;
    let arity = arguments.len();
    let call = *call_path.last()?;
    match call.kind() {
        "method_invocation" => {
            let receiver = match call.child_by_field_name("object") {
                None => Receiver::Current,
                Some(object) => MEMBERS.receiver(object, source)?,
            };
            Some(Expectation::Argument {
                receiver,
                name: text(call.child_by_field_name("name")?, source).into(),
                position,
                arity,
            })
        }
        "object_creation_expression" => Some(Expectation::Constructor {
            type_name: type_text(call.child_by_field_name("type")?, source),
            position,
            arity,
        }),
        "explicit_constructor_invocation" => {
            let class = ancestors(call_path).find(|a| a.kind() == "class_declaration")?;
            let type_name = if call.child_by_field_name("constructor")?.kind() == "super" {
                let superclass = class.child_by_field_name("superclass")?;
                type_text(*named_children(superclass).first()?, source)
            } else {
                text(class.child_by_field_name("name")?, source).into()
            };
            Some(Expectation::Constructor {
                type_name,
                position,
                arity,
            })
        }
        _ => None,
    }
}

/// Parameters and locals with declared types visible at the path's last node, nearest first.
fn locals(path: &[Node], source: &str) -> Vec<Local> {
    let mut out = Vec::new();
    let Some(&(mut child)) = path.last() else {
        return out;
    };
    for scope in ancestors(path) {
        match scope.kind() {
            "block" | "constructor_body" | "switch_block_statement_group" => {
                let before = named_children(scope)
                    .into_iter()
                    .filter(|s| s.end_byte() <= child.start_byte());
                for statement in before.rev() {
                    if statement.kind() == "local_variable_declaration" {
                        out.extend(declared(statement, source).into_iter().rev());
                    }
                }
            }
            "for_statement" => {
                let init = scope.child_by_field_name("init");
                if let Some(init) = init.filter(|i| *i != child) {
                    out.extend(declared(init, source).into_iter().rev());
                }
            }
            "method_declaration"
            | "constructor_declaration"
            | "lambda_expression"
            | "catch_clause"
            | "enhanced_for_statement" => out.extend(parameters(scope, source)),
            "resource_specification" => {
                let before = named_children(scope)
                    .into_iter()
                    .filter(|s| s.end_byte() <= child.start_byte());
                out.extend(before.rev().filter_map(|r| local(r, source)));
            }
            _ => {}
        }
        child = scope;
    }
    out
}

/// The variables of a declaration, in order; none for `var`.
fn declared(declaration: Node, source: &str) -> Vec<Local> {
    let Some(ty) = declaration.child_by_field_name("type") else {
        return Vec::new();
    };
    let mut cursor = declaration.walk();
    declaration
        .children_by_field_name("declarator", &mut cursor)
        .filter_map(|d| d.child_by_field_name("name"))
        .filter_map(|name| typed_local(ty, name, source))
        .collect()
}

/// A node with `type` and `name` fields as a local.
fn local(node: Node, source: &str) -> Option<Local> {
    typed_local(
        node.child_by_field_name("type")?,
        node.child_by_field_name("name")?,
        source,
    )
}

fn typed_local(ty: Node, name: Node, source: &str) -> Option<Local> {
    let type_name = type_text(ty, source);
    (type_name != "var").then(|| Local {
        name: text(name, source).into(),
        type_name,
        type_span: span(ty),
        name_span: span(name),
    })
}

/// The declared parameters of a method, constructor, lambda, catch clause or for-each loop.
fn parameters(scope: Node, source: &str) -> Vec<Local> {
    match scope.kind() {
        "catch_clause" => named_children(scope)
            .into_iter()
            .filter(|c| c.kind() == "catch_formal_parameter")
            .filter_map(|p| {
                let ty = named_children(p)
                    .into_iter()
                    .find(|c| c.kind() == "catch_type")?;
                typed_local(ty, p.child_by_field_name("name")?, source)
            })
            .collect(),
        "enhanced_for_statement" => local(scope, source).into_iter().collect(),
        _ => scope
            .child_by_field_name("parameters")
            .map(named_children)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.kind() == "formal_parameter")
            .filter_map(|p| local(p, source))
            .collect(),
    }
}

/// Whether the code at the path's last node has no `this`: a static method, initializer or
/// field.
fn in_static_code(path: &[Node], _source: &str) -> bool {
    ancestors(path)
        .find(|a| {
            matches!(
                a.kind(),
                "method_declaration"
                    | "constructor_declaration"
                    | "static_initializer"
                    | "field_declaration"
                    | "class_body"
            )
        })
        .is_some_and(|a| a.kind() == "static_initializer" || has_modifier(a, "static"))
}

// ----- Syntax errors --------------------------------------------------------------------------

/// How Java writes types: `a.b.Outer.Inner<Arg>[]`, annotations before the name.
pub struct JavaTypes;

impl TypeSyntax for JavaTypes {
    fn declaration_style(&self) -> super::DeclarationStyle {
        super::DeclarationStyle::Java
    }

    /// `java.util.List<Order>[]` → `java.util.List`; annotations and varargs dots left out.
    fn erasure<'t>(&self, written: &'t str) -> &'t str {
        let name = written
            .split_whitespace()
            .find(|w| !w.starts_with('@'))
            .unwrap_or_default();
        let end = name.find(['<', '[']).unwrap_or(name.len());
        name[..end].trim_end_matches('.')
    }

    /// The top-level type arguments and the array element type of a type.
    fn components<'t>(&self, written: &'t str) -> Vec<&'t str> {
        let written = written.trim();
        if let Some(element) = written.strip_suffix("[]") {
            return vec![element.trim()];
        }
        let (Some(open), Some(close)) = (written.find('<'), written.rfind('>')) else {
            return Vec::new();
        };
        if close <= open {
            return Vec::new();
        }
        let mut out = Vec::new();
        let (mut depth, mut start) = (0usize, open + 1);
        let arguments = written[open + 1..close].char_indices();
        for (i, c) in arguments.map(|(i, c)| (open + 1 + i, c)) {
            match c {
                '<' => depth += 1,
                '>' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    out.push(&written[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(&written[start..close]);
        out.into_iter()
            .map(|a| {
                let a = a.trim();
                // `? extends Order` targets Order; a bare `?` is no type.
                a.rsplit_once(' ').map_or(a, |(_, bound)| bound)
            })
            .filter(|a| !a.is_empty() && *a != "?")
            .collect()
    }

    /// Every type name in a written type: `Map<Long, List<Order>>` → `Map`, `Long`, `List`, `Order`.
    fn type_names<'t>(&self, written: &'t str) -> Vec<&'t str> {
        written
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'))
            .filter(|w| w.chars().next().is_some_and(char::is_alphabetic))
            .filter(|w| !matches!(*w, "extends" | "super") && !w.starts_with('@'))
            .collect()
    }

    /// Types ChatLSP leaves out of the targets: primitives and the standard library's most
    /// common types, which would make incidental matches everywhere.
    fn is_base_type(&self, written: &str) -> bool {
        matches!(
            self.simple_name(written),
            "boolean"
                | "byte"
                | "char"
                | "short"
                | "int"
                | "long"
                | "float"
                | "double"
                | "void"
                | "var"
                | "String"
                | "Object"
                | "Boolean"
                | "Byte"
                | "Character"
                | "Short"
                | "Integer"
                | "Long"
                | "Float"
                | "Double"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_text_helpers() {
        assert_eq!(
            JavaTypes.erasure("java.util.List<Order>[]"),
            "java.util.List"
        );
        assert_eq!(JavaTypes.erasure("@Nullable Order"), "Order");
        assert_eq!(JavaTypes.erasure("Order.Builder"), "Order.Builder");
        assert_eq!(JavaTypes.simple_name("a.b.Order"), "Order");
        assert_eq!(
            JavaTypes.components("Map<Long, List<Order>>"),
            ["Long", "List<Order>"]
        );
        assert_eq!(JavaTypes.components("Order[]"), ["Order"]);
        assert_eq!(JavaTypes.components("List<? extends Money>"), ["Money"]);
        assert_eq!(JavaTypes.components("List<?>"), Vec::<&str>::new());
        assert_eq!(
            JavaTypes.type_names("Map<Long, List<? extends a.Order>>"),
            ["Map", "Long", "List", "a.Order"]
        );
        assert!(JavaTypes.is_base_type("int") && JavaTypes.is_base_type("java.lang.String"));
        assert!(!JavaTypes.is_base_type("Order"));
    }
}
