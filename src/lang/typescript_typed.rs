//! TypeScript syntax for typed-hole context (ChatLSP, whose own port is TypeScript's): type
//! outlines (classes, interfaces, object type aliases and enums with their members' headers),
//! what the annotations around a hole say about its expected type and scope, and how
//! TypeScript writes types.
//!
//! The hole is emulated as for Java: a placeholder expression is written at the hole with the
//! brackets still open before it closed, and its place in the syntax tree gives the expected
//! type. TypeScript writes a name before its type (`total: Money`), so a member's or local's
//! whole `name: Type` is its head (its type span) and its name span is empty at the end of it.

use tree_sitter::Node;

use super::hole_grammar::{self, HoleGrammar, Lexicon, MemberSyntax, boolean};
use super::tree::{ancestors, named_children, span, text, type_text};
use super::typescript_tree::{
    Grammar, header_span, is_parameter_property, parse, signature_start, type_kind,
};
use super::{
    Expectation, FieldOutline, HolePlace, Local, MethodOutline, Receiver, Span, TypeKind,
    TypeOutline, TypeSyntax,
};

/// The type of a `type_annotation` field (`: Order` → `Order`).
fn annotation<'t>(node: Node<'t>, field: &str) -> Option<Node<'t>> {
    let annotation = node.child_by_field_name(field)?;
    if annotation.kind() == "type_annotation" {
        annotation.named_child(0)
    } else {
        None
    }
}

/// The type an initializer gives an unannotated variable, where the syntax says it: a literal's
/// or a constructed class's.
fn inferred(value: Node, source: &str) -> Option<String> {
    match value.kind() {
        "number" => Some("number".into()),
        "string" | "template_string" => Some("string".into()),
        "true" | "false" => Some("boolean".into()),
        "new_expression" => {
            let constructor = value.child_by_field_name("constructor")?;
            matches!(constructor.kind(), "identifier" | "member_expression")
                .then(|| type_text(constructor, source))
        }
        _ => None,
    }
}

fn has_token(node: Node, keyword: &str) -> bool {
    let mut cursor = node.walk();
    node.children(&mut cursor).any(|c| c.kind() == keyword)
}

fn is_private(node: Node, source: &str) -> bool {
    let mut cursor = node.walk();
    let modifier = node
        .children(&mut cursor)
        .any(|c| c.kind() == "accessibility_modifier" && text(c, source) == "private");
    let hash_name = node
        .child_by_field_name("name")
        .is_some_and(|n| n.kind() == "private_property_identifier");
    modifier || hash_name
}

// ----- Outlines -------------------------------------------------------------------------------

/// Every class, interface, type alias and enum at the top level (also exported, ambient or in
/// a namespace), in source order, then the file's top level ([`TypeKind::Module`]).
pub(super) fn outline(root: Node, source: &str) -> Vec<TypeOutline> {
    let mut types = Vec::new();
    let mut bodies = vec![root];
    while let Some(body) = bodies.pop() {
        for child in named_children(body) {
            match child.kind() {
                "export_statement" | "ambient_declaration" | "expression_statement" => {
                    bodies.push(child)
                }
                "internal_module" | "module" => bodies.extend(child.child_by_field_name("body")),
                "ERROR" => bodies.push(child),
                kind => {
                    if let Some(kind) = type_kind(kind) {
                        types.extend(type_outline(child, kind, source));
                    }
                }
            }
        }
    }
    types.sort_by_key(|t| t.decl.start);
    types.push(module_outline(root, source));
    types
}

/// The file's top level as a [`TypeKind::Module`]: its variables with a declared (or
/// constructed) type, their heads from `const` to the type, and its functions.
fn module_outline(root: Node, source: &str) -> TypeOutline {
    let mut module = TypeOutline::empty_module();
    for statement in named_children(root) {
        let statement = match statement.kind() {
            "export_statement" => match statement.child_by_field_name("declaration") {
                Some(declaration) => declaration,
                None => continue,
            },
            _ => statement,
        };
        match statement.kind() {
            "lexical_declaration" | "variable_declaration" => {
                for declarator in named_children(statement) {
                    let Some(local) = typed_local(declarator, "name", source) else {
                        continue;
                    };
                    let head_end = local.type_span.end as usize;
                    module.fields.push(FieldOutline {
                        head: Span::new(statement.start_byte(), head_end),
                        type_name: local.type_name,
                        names: vec![(local.name, Span::new(head_end, head_end))],
                        decl: span(declarator),
                        is_static: true,
                        is_private: false,
                    });
                }
            }
            "function_declaration" | "generator_function_declaration" | "function_signature" => {
                let Some(name) = statement.child_by_field_name("name") else {
                    continue;
                };
                let (params, varargs) = parameter_types(statement, source);
                module.methods.push(MethodOutline {
                    name: text(name, source).to_string(),
                    signature: header_span(statement, source),
                    decl: span(statement),
                    return_type: annotation(statement, "return_type").map(|t| type_text(t, source)),
                    params,
                    varargs,
                    is_static: true,
                    is_private: false,
                });
            }
            _ => {}
        }
    }
    module
}

fn type_outline(node: Node, kind: TypeKind, source: &str) -> Option<TypeOutline> {
    let name = text(node.child_by_field_name("name")?, source).to_string();
    let mut kind = kind;
    let (header, body) = if node.kind() == "type_alias_declaration" {
        // An object type reads as a definition with members: `type Order = { ... }`; any
        // other is an alias whose whole declaration is its header.
        let value = node.child_by_field_name("value")?;
        let start = signature_start(node);
        if value.kind() == "object_type" {
            let end = start + source[start..value.start_byte()].trim_end().len();
            (Span::new(start, end), Some(value))
        } else {
            kind = TypeKind::Alias;
            (Span::new(start, value.end_byte()), None)
        }
    } else {
        (header_span(node, source), node.child_by_field_name("body"))
    };
    let mut outline = TypeOutline {
        name,
        kind,
        header,
        decl: span(node),
        supertypes: supertypes(node, source),
        constants: Vec::new(),
        fields: Vec::new(),
        methods: Vec::new(),
    };
    for member in body.map(named_children).unwrap_or_default() {
        match member.kind() {
            "public_field_definition" | "property_signature" => {
                outline.fields.extend(field_outline(member, source));
            }
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                let method = method_outline(member, &outline.name, source);
                if let Some(method) = method {
                    if method.return_type.is_none() && method.name == outline.name {
                        outline.fields.extend(parameter_properties(member, source));
                    }
                    outline.methods.push(method);
                }
            }
            "property_identifier" => outline.constants.push(span(member)),
            "enum_assignment" => outline.constants.push(span(member)),
            _ => {}
        }
    }
    Some(outline)
}

/// The types after `extends` and `implements`, with their type arguments.
fn supertypes(node: Node, source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in named_children(node) {
        match part.kind() {
            "class_heritage" => {
                for clause in named_children(part) {
                    match clause.kind() {
                        "extends_clause" => {
                            let value = clause.child_by_field_name("value");
                            let arguments = clause.child_by_field_name("type_arguments");
                            if let Some(value) = value {
                                let end = arguments.map_or(value.end_byte(), |a| a.end_byte());
                                let written = &source[value.start_byte()..end];
                                out.push(written.split_whitespace().collect::<Vec<_>>().join(" "));
                            }
                        }
                        "implements_clause" => out.extend(
                            named_children(clause)
                                .into_iter()
                                .map(|t| type_text(t, source)),
                        ),
                        _ => {}
                    }
                }
            }
            "extends_type_clause" => out.extend(
                named_children(part)
                    .into_iter()
                    .map(|t| type_text(t, source)),
            ),
            _ => {}
        }
    }
    out
}

/// A field or property: its head is its modifiers, name and type annotation.
fn field_outline(node: Node, source: &str) -> Option<FieldOutline> {
    let name = node.child_by_field_name("name")?;
    let ty = annotation(node, "type");
    let type_name = match ty {
        Some(ty) => type_text(ty, source),
        None => node
            .child_by_field_name("value")
            .and_then(|v| inferred(v, source))
            .unwrap_or_else(|| "any".into()),
    };
    let head_end = node
        .child_by_field_name("type")
        .map_or(name.end_byte(), |t| t.end_byte());
    let head = Span::new(signature_start(node), head_end);
    Some(FieldOutline {
        head,
        type_name,
        names: vec![(
            text(name, source).to_string(),
            Span::new(head_end, head_end),
        )],
        decl: span(node),
        is_static: has_token(node, "static"),
        is_private: is_private(node, source),
    })
}

/// A constructor's parameter properties (`private readonly repo: Repo`) as fields.
fn parameter_properties(constructor: Node, source: &str) -> Vec<FieldOutline> {
    let parameters = constructor
        .child_by_field_name("parameters")
        .map(named_children)
        .unwrap_or_default();
    parameters
        .into_iter()
        .filter(|p| is_parameter_property(*p))
        .filter_map(|p| {
            let name = p.child_by_field_name("pattern")?;
            let ty = annotation(p, "type");
            let head_end = p
                .child_by_field_name("type")
                .map_or(name.end_byte(), |t| t.end_byte());
            Some(FieldOutline {
                head: Span::new(p.start_byte(), head_end),
                type_name: ty.map_or_else(|| "any".into(), |t| type_text(t, source)),
                names: vec![(
                    text(name, source).to_string(),
                    Span::new(head_end, head_end),
                )],
                decl: span(p),
                is_static: false,
                is_private: is_private(p, source),
            })
        })
        .collect()
}

/// The declared parameter types of a function, `any` where one has none (as TypeScript
/// takes it); a rest parameter's element type, with whether there is one.
fn parameter_types(function: Node, source: &str) -> (Vec<String>, bool) {
    let mut params = Vec::new();
    let mut varargs = false;
    let parameters = function
        .child_by_field_name("parameters")
        .map(named_children)
        .unwrap_or_default();
    for p in parameters {
        if !matches!(p.kind(), "required_parameter" | "optional_parameter") {
            continue;
        }
        let rest = p
            .child_by_field_name("pattern")
            .is_some_and(|n| n.kind() == "rest_pattern");
        let written = annotation(p, "type").map_or_else(|| "any".into(), |t| type_text(t, source));
        if rest {
            varargs = true;
            let element = TypeScriptTypes
                .components(&written)
                .first()
                .map(|e| e.to_string());
            params.push(element.unwrap_or_else(|| "any".into()));
        } else {
            params.push(written);
        }
    }
    (params, varargs)
}

/// A method; a constructor is named after its class (as Java's are) and has no return type.
fn method_outline(node: Node, class: &str, source: &str) -> Option<MethodOutline> {
    let name = text(node.child_by_field_name("name")?, source);
    let constructor = name == "constructor";
    let (params, varargs) = parameter_types(node, source);
    Some(MethodOutline {
        name: if constructor { class } else { name }.to_string(),
        signature: header_span(node, source),
        decl: span(node),
        return_type: annotation(node, "return_type")
            .filter(|_| !constructor)
            .map(|t| type_text(t, source)),
        params,
        varargs,
        is_static: has_token(node, "static"),
        is_private: is_private(node, source),
    })
}

// ----- The hole -------------------------------------------------------------------------------

/// TypeScript's typed-hole reading (the TypeScript grammar; [`TSX_HOLES`] for TSX and
/// JavaScript).
pub(super) const HOLES: HoleGrammar = HoleGrammar {
    lexicon: Lexicon {
        line_comment: "//",
        block_comment: Some(("/*", "*/")),
        // A template literal's `${...}` is read as the literal's text.
        strings: &[("`", true), ("\"", false), ("'", false)],
        keywords_before_expression: &[
            "return", "new", "throw", "case", "yield", "await", "else", "typeof",
        ],
        braces_are_blocks: true,
    },
    string_parts: &["string_fragment", "escape_sequence"],
    parse: |source| parse(Grammar::TypeScript, source),
    is_type_declaration: |kind| type_kind(kind).is_some(),
    outline,
    expectation,
    place,
    locals,
    in_static_code,
};

/// [`HOLES`] with the TSX grammar.
pub(super) const TSX_HOLES: HoleGrammar = HoleGrammar {
    parse: |source| parse(Grammar::Tsx, source),
    ..HOLES
};

/// `a.b`, `this` and `super` in TypeScript.
const MEMBERS: MemberSyntax =
    MemberSyntax::with_this_and_super("member_expression", "object", "property");

fn is_function_node(kind: &str) -> bool {
    matches!(
        kind,
        "function_declaration"
            | "generator_function_declaration"
            | "method_definition"
            | "arrow_function"
            | "function_expression"
            | "generator_function"
    )
}

/// [`hole_grammar::outermost`] through TypeScript's `a.▮`, `▮()`, `await ▮`, `▮!` and a
/// ternary's branch.
fn outermost(path: &[Node]) -> Option<usize> {
    hole_grammar::outermost(path, |node, parent, grandparent| {
        let is = |field: &str| parent.child_by_field_name(field) == Some(node);
        match parent.kind() {
            "parenthesized_expression" => !matches!(
                grandparent.map(|g| g.kind()),
                Some("if_statement" | "while_statement" | "do_statement")
            ),
            "member_expression" => is("property"),
            "call_expression" => is("function"),
            "non_null_expression" | "await_expression" => true,
            "ternary_expression" => !is("condition"),
            _ => false,
        }
    })
}

/// The type the place of the expression at the hole says it must have.
fn expectation(path: &[Node], root: Node, source: &str) -> Option<Expectation> {
    let at = outermost(path)?;
    let (node, parent) = (path[at], path[at - 1]);
    let is = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        // `outermost` stops at these only in conditions.
        "parenthesized_expression" | "ternary_expression" => boolean(),
        "unary_expression" => {
            let op = parent.child_by_field_name("operator").map(|o| o.kind());
            (op == Some("!")).then(boolean).flatten()
        }
        "variable_declarator" | "public_field_definition" if is("value") => {
            annotation(parent, "type").map(|t| Expectation::Type(type_text(t, source)))
        }
        "assignment_expression" if is("right") => {
            MEMBERS.assigned(parent.child_by_field_name("left")?, source)
        }
        "return_statement" => return_type(&path[..at], source),
        "arrow_function" if is("body") => returned(parent, source),
        "arguments" => argument(&path[..at], node, root, source),
        _ => None,
    }
}

/// What the expression at the hole is: an argument, an annotated declaration's value (with
/// where its name starts), a returned value.
fn place(path: &[Node], _source: &str) -> HolePlace {
    let Some(at) = outermost(path) else {
        return HolePlace::Other;
    };
    let (node, parent) = (path[at], path[at - 1]);
    let is = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        "arguments" => HolePlace::Argument,
        "variable_declarator" | "public_field_definition"
            if is("value") && annotation(parent, "type").is_some() =>
        {
            match parent.child_by_field_name("name") {
                Some(name) => HolePlace::Declaration {
                    name: name.start_byte(),
                },
                None => HolePlace::Other,
            }
        }
        "return_statement" => HolePlace::Return,
        "arrow_function" if is("body") => HolePlace::Return,
        _ => HolePlace::Other,
    }
}

/// The return type of the function the `return` (the path's last node) is in.
fn return_type(statement: &[Node], source: &str) -> Option<Expectation> {
    let function = ancestors(statement).find(|a| is_function_node(a.kind()))?;
    returned(function, source)
}

/// What a function's annotation says it returns; `void` expects nothing. An async function's
/// `Promise<T>` takes a `T` or a promise of one, which TypeScript's checker writes
/// `T | PromiseLike<T>` (its contextual type there).
fn returned(function: Node, source: &str) -> Option<Expectation> {
    let ty = type_text(annotation(function, "return_type")?, source);
    let promised = ty
        .strip_prefix("Promise<")
        .and_then(|t| t.strip_suffix('>'))
        .map(str::trim)
        .filter(|_| has_token(function, "async"));
    match promised {
        Some("void") => None,
        Some(inner) => Some(Expectation::Type(format!("{inner} | PromiseLike<{inner}>"))),
        None => (ty != "void").then_some(Expectation::Type(ty)),
    }
}

/// Argument `node` of the call whose argument list is the path's last node.
fn argument(list_path: &[Node], node: Node, root: Node, source: &str) -> Option<Expectation> {
    let (&list, call_path) = list_path.split_last()?;
    let arguments: Vec<Node> = named_children(list)
        .into_iter()
        .filter(|c| c.kind() != "comment")
        .collect();
    let position = arguments.iter().position(|a| *a == node)?;
    let arity = arguments.len();
    let call = *call_path.last()?;
    match call.kind() {
        "call_expression" => {
            let function = call.child_by_field_name("function")?;
            if function.kind() == "identifier" {
                // A plain call: a function of this file, else a method of the class.
                let name = text(function, source);
                if let Some(found) = file_function(root, name, source) {
                    let (params, varargs) = parameter_types(found, source);
                    let outline = MethodOutline {
                        name: name.into(),
                        signature: span(found),
                        decl: span(found),
                        return_type: None,
                        params,
                        varargs,
                        is_static: true,
                        is_private: false,
                    };
                    return outline.param(position).map(|t| Expectation::Type(t.into()));
                }
                return Some(Expectation::Argument {
                    receiver: Receiver::Current,
                    name: name.into(),
                    position,
                    arity,
                });
            }
            if function.kind() != "member_expression" {
                return None;
            }
            let object = function.child_by_field_name("object")?;
            Some(Expectation::Argument {
                receiver: MEMBERS.receiver(object, source)?,
                name: text(function.child_by_field_name("property")?, source).into(),
                position,
                arity,
            })
        }
        "new_expression" => Some(Expectation::Constructor {
            type_name: type_text(call.child_by_field_name("constructor")?, source),
            position,
            arity,
        }),
        _ => None,
    }
}

/// The top-level function (declared, or an arrow function or function expression assigned to
/// a variable) named `name`, also exported.
fn file_function<'t>(root: Node<'t>, name: &str, source: &str) -> Option<Node<'t>> {
    let mut statements = named_children(root);
    let exported: Vec<Node> = statements
        .iter()
        .filter(|s| s.kind() == "export_statement")
        .filter_map(|s| s.child_by_field_name("declaration"))
        .collect();
    statements.extend(exported);
    statements.into_iter().find_map(|s| match s.kind() {
        "function_declaration" | "generator_function_declaration" | "function_signature" => s
            .child_by_field_name("name")
            .filter(|n| text(*n, source) == name)
            .map(|_| s),
        "lexical_declaration" | "variable_declaration" => {
            named_children(s).into_iter().find_map(|d| {
                let named = d
                    .child_by_field_name("name")
                    .is_some_and(|n| text(n, source) == name);
                let value = d.child_by_field_name("value")?;
                (named && is_function_node(value.kind())).then_some(value)
            })
        }
        _ => None,
    })
}

/// Parameters and locals with declared (or constructed) types visible at the path's last
/// node, nearest first.
fn locals(path: &[Node], source: &str) -> Vec<Local> {
    let mut out = Vec::new();
    let Some(&(mut child)) = path.last() else {
        return out;
    };
    for scope in ancestors(path) {
        match scope.kind() {
            "statement_block" | "program" | "switch_case" | "switch_default" => {
                let before = named_children(scope)
                    .into_iter()
                    .filter(|s| s.end_byte() <= child.start_byte());
                for statement in before.rev() {
                    let statement = match statement.kind() {
                        "export_statement" => match statement.child_by_field_name("declaration") {
                            Some(d) => d,
                            None => continue,
                        },
                        _ => statement,
                    };
                    if matches!(
                        statement.kind(),
                        "lexical_declaration" | "variable_declaration"
                    ) {
                        out.extend(declared(statement, source).into_iter().rev());
                    }
                }
            }
            "for_statement" => {
                let init = scope.child_by_field_name("initializer");
                if let Some(init) = init.filter(|i| *i != child) {
                    out.extend(declared(init, source).into_iter().rev());
                }
            }
            kind if is_function_node(kind) => out.extend(parameters(scope, source)),
            _ => {}
        }
        child = scope;
    }
    out
}

/// The variables of a declaration with a type, in order.
fn declared(declaration: Node, source: &str) -> Vec<Local> {
    named_children(declaration)
        .into_iter()
        .filter(|d| d.kind() == "variable_declarator")
        .filter_map(|d| typed_local(d, "name", source))
        .collect()
}

/// A declarator or parameter whose name is an identifier, with its annotation or the type its
/// initializer constructs.
fn typed_local(node: Node, name_field: &str, source: &str) -> Option<Local> {
    let name = node.child_by_field_name(name_field)?;
    if name.kind() != "identifier" {
        return None;
    }
    let (type_name, end) = match annotation(node, "type") {
        Some(ty) => (type_text(ty, source), ty.end_byte()),
        None => {
            let value = node.child_by_field_name("value")?;
            (inferred(value, source)?, name.end_byte())
        }
    };
    Some(Local {
        name: text(name, source).into(),
        type_name,
        type_span: Span::new(name.start_byte(), end),
        name_span: Span::new(end, end),
    })
}

/// The declared parameters of a function.
fn parameters(function: Node, source: &str) -> Vec<Local> {
    function
        .child_by_field_name("parameters")
        .map(named_children)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| typed_local(p, "pattern", source))
        .collect()
}

/// Whether the code at the path's last node has no `this`: a static method, field or block.
fn in_static_code(path: &[Node], _source: &str) -> bool {
    ancestors(path)
        .find(|a| {
            matches!(
                a.kind(),
                "method_definition"
                    | "public_field_definition"
                    | "class_static_block"
                    | "class_body"
            )
        })
        .is_some_and(|a| a.kind() == "class_static_block" || has_token(a, "static"))
}

// ----- Types ----------------------------------------------------------------------------------

/// How TypeScript writes types: `ns.Order<Arg>[]`, unions, `readonly` arrays.
pub struct TypeScriptTypes;

/// `Order | undefined` → `Order`, `Order`... the members of a top-level union or intersection.
fn members(written: &str) -> Vec<&str> {
    split_top(written, &['|', '&'])
}

/// The members of a top-level union (`A<B | C> | (x: D) => E` → `A<B | C>`, `(x: D) => E`).
pub fn union_members(written: &str) -> Vec<&str> {
    split_top(written, &['|'])
}

/// `written` split at the `separators` outside brackets (an arrow's `=>` is none).
fn split_top<'t>(written: &'t str, separators: &[char]) -> Vec<&'t str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    let mut previous = ' ';
    for (i, c) in written.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' if previous == '=' => {}
            '>' | ')' | ']' | '}' => depth -= 1,
            c if depth == 0 && separators.contains(&c) => {
                out.push(written[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        previous = c;
    }
    out.push(written[start..].trim());
    out.retain(|m| !m.is_empty());
    out
}

fn is_nullish(written: &str) -> bool {
    matches!(written, "undefined" | "null" | "void")
}

impl TypeSyntax for TypeScriptTypes {
    fn declaration_style(&self) -> super::DeclarationStyle {
        super::DeclarationStyle::TypeScript
    }

    /// Each name of a type (not a member, not after `typeof`) written without `<...>`.
    fn with_default_arguments(
        &self,
        written: &str,
        defaults: &dyn Fn(&str) -> Option<String>,
    ) -> String {
        let is_part = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == '.';
        let mut out = String::with_capacity(written.len());
        let mut rest = written;
        while let Some(start) = rest.find(|c: char| is_part(c) && c != '.') {
            let end = rest[start..]
                .find(|c: char| !is_part(c))
                .map_or(rest.len(), |e| start + e);
            let (before, name, after) = (&rest[..start], &rest[start..end], &rest[end..]);
            out.push_str(before);
            out.push_str(name);
            let next = after.trim_start().chars().next();
            // An indexed access (`ZodType["encode"]`) is a member's type, not the generic's.
            let indexed =
                after.trim_start().starts_with('[') && !after.trim_start().starts_with("[]");
            let named_type = !matches!(next, Some('<' | ':' | '(' | '?'))
                && !indexed
                && !out[..out.len() - name.len()].trim_end().ends_with("typeof")
                && name.starts_with(|c: char| !c.is_ascii_digit());
            if let Some(arguments) = named_type.then(|| defaults(name)).flatten() {
                out.push_str(&arguments);
            }
            rest = after;
        }
        out.push_str(rest);
        out
    }

    /// `interface ParsePayload<T = unknown>` → `<unknown>`; none where a parameter has no
    /// default (`<T, U = T>`).
    fn default_arguments(&self, header: &str, name: &str) -> Option<String> {
        let at = header.find(&format!("{name}<"))? + name.len();
        let list = &header[at + 1..];
        let (mut depth, mut previous) = (1i32, ' ');
        let mut end = None;
        for (i, c) in list.char_indices() {
            match c {
                '<' | '(' | '[' | '{' => depth += 1,
                '>' if previous == '=' => {}
                '>' | ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = Some(i);
                break;
            }
            previous = c;
        }
        let parameters = split_top(&list[..end?], &[',']);
        let defaults: Vec<&str> = parameters
            .iter()
            .map(|p| {
                // The `=` of the default, not one of an arrow's `=>`.
                let bytes = p.as_bytes();
                let eq = (0..bytes.len()).find(|&i| {
                    bytes[i] == b'=' && bytes.get(i + 1) != Some(&b'>') && {
                        let before = &p[..i];
                        let open = before.matches(['<', '(', '[', '{']).count();
                        let close = before.matches(['>', ')', ']', '}']).count()
                            - before.matches("=>").count();
                        open == close
                    }
                })?;
                Some(p[eq + 1..].trim())
            })
            .collect::<Option<_>>()?;
        (!defaults.is_empty()).then(|| format!("<{}>", defaults.join(", ")))
    }

    /// TypeScript tries a call's overloads in the order declared and takes the first that
    /// fits; the hole's line is cut, so the arguments seen are a lower bound.
    fn first_overload_wins(&self) -> bool {
        true
    }

    /// `T | undefined | null` → `T`; an intersection is left as written.
    fn non_null(&self, written: &str) -> String {
        let written = written.trim();
        let union = members(written);
        let kept: Vec<&str> = union.iter().copied().filter(|m| !is_nullish(m)).collect();
        if written.contains('&') || kept.is_empty() || kept.len() == union.len() {
            written.to_string()
        } else {
            kept.join(" | ")
        }
    }

    /// `readonly ns.Order<T>[] | undefined` → `ns.Order`: the first member of a union that is
    /// not `null` or `undefined`, its name without arguments or array marks.
    fn erasure<'t>(&self, written: &'t str) -> &'t str {
        let union = members(written);
        let first = union
            .iter()
            .find(|m| !is_nullish(m))
            .or(union.first())
            .copied()
            .unwrap_or_default();
        let name = first.strip_prefix("readonly ").unwrap_or(first).trim();
        let name = name.trim_start_matches('(');
        let end = name.find(['<', '[', ')', ' ']).unwrap_or(name.len());
        &name[..end]
    }

    /// A union's members, else an array's element type, else the type arguments.
    fn components<'t>(&self, written: &'t str) -> Vec<&'t str> {
        let written = written.trim();
        let union = members(written);
        if union.len() > 1 {
            return union;
        }
        let written = written.strip_prefix("readonly ").unwrap_or(written).trim();
        if let Some(element) = written.strip_suffix("[]") {
            let element = element.trim();
            let element = element
                .strip_prefix('(')
                .and_then(|e| e.strip_suffix(')'))
                .unwrap_or(element);
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
        for (i, c) in written[open + 1..close].char_indices() {
            let i = open + 1 + i;
            match c {
                '<' | '(' | '[' | '{' => depth += 1,
                '>' | ')' | ']' | '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    out.push(written[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(written[start..close].trim());
        out.retain(|a| !a.is_empty());
        out
    }

    /// Every type name: `Map<string, readonly Order[]> | null` → `Map`, `string`, `Order`,
    /// `null`; keywords of the type syntax and literal types left out.
    fn type_names<'t>(&self, written: &'t str) -> Vec<&'t str> {
        written
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'))
            .filter(|w| {
                w.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
            })
            .filter(|w| {
                !matches!(
                    *w,
                    "readonly"
                        | "keyof"
                        | "typeof"
                        | "extends"
                        | "infer"
                        | "is"
                        | "asserts"
                        | "unique"
                )
            })
            .collect()
    }

    /// TypeScript's primitive and special types, their object wrappers, and literal types.
    fn is_base_type(&self, written: &str) -> bool {
        let written = written.trim();
        let literal = written.starts_with(['"', '\'', '`', '-'])
            || written.starts_with(|c: char| c.is_ascii_digit());
        literal
            || matches!(
                self.simple_name(written),
                "string"
                    | "number"
                    | "boolean"
                    | "void"
                    | "any"
                    | "unknown"
                    | "never"
                    | "null"
                    | "undefined"
                    | "object"
                    | "bigint"
                    | "symbol"
                    | "true"
                    | "false"
                    | "String"
                    | "Number"
                    | "Boolean"
                    | "Object"
                    | "Symbol"
                    | "BigInt"
                    | "Function"
            )
    }
}

#[cfg(test)]
mod tests {
    use super::super::typescript::TYPESCRIPT;
    use super::*;
    use crate::lang::{HoleSyntax, Language};

    #[test]
    fn type_text_helpers() {
        let t = TypeScriptTypes;
        assert_eq!(t.erasure("Order[]"), "Order");
        assert_eq!(t.erasure("Array<Order>"), "Array");
        assert_eq!(t.erasure("Order | undefined"), "Order");
        assert_eq!(t.erasure("null | ns.Order"), "ns.Order");
        assert_eq!(t.erasure("readonly Order[]"), "Order");
        assert_eq!(t.simple_name("ns.Order"), "Order");
        assert_eq!(t.components("Order[]"), ["Order"]);
        assert_eq!(t.components("readonly Order[]"), ["Order"]);
        assert_eq!(t.components("Array<Order>"), ["Order"]);
        assert_eq!(t.components("Promise<Order>"), ["Order"]);
        assert_eq!(t.components("Map<string, Order[]>"), ["string", "Order[]"]);
        assert_eq!(t.components("Order | undefined"), ["Order", "undefined"]);
        assert_eq!(
            t.type_names("Map<string, readonly Order[]> | null"),
            ["Map", "string", "Order", "null"]
        );
        for base in [
            "string", "number", "boolean", "void", "any", "unknown", "never",
        ] {
            assert!(t.is_base_type(base), "{base}");
        }
        for base in [
            "null",
            "undefined",
            "object",
            "bigint",
            "symbol",
            "'asc'",
            "42",
        ] {
            assert!(t.is_base_type(base), "{base}");
        }
        assert!(!t.is_base_type("Order") && !t.is_base_type("Order[]"));
        assert!(t.is_type_variable("T") && !t.is_type_variable("Order"));
    }

    const SOURCE: &str = r#"import { Money } from './money';

export interface Priced { price: Money; total(): Money; }
export type Line = { sku: string; qty: number };

export abstract class Order extends Base<Money> implements Priced {
    static count = 0;
    #secret = "x";
    price: Money = Money.zero();

    constructor(private readonly lines: Line[], public id: string) {
        super();
    }

    total(): Money {
        return this.price;
    }

    add(line: Line, ...more: Line[]): void {}
}

export enum Status { Open, Closed = "closed" }

function ship(order: Order, when: Date): boolean {
    return true;
}
"#;

    fn outline() -> Vec<TypeOutline> {
        TYPESCRIPT.extract(SOURCE).outline.into_types()
    }

    fn at(span: Span) -> &'static str {
        &SOURCE[span.range()]
    }

    #[test]
    fn outlines_classes_interfaces_aliases_and_enums() {
        let types = outline();
        let names: Vec<_> = types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Priced", "Line", "Order", "Status", ""]);
        assert_eq!(at(types[1].header), "type Line =");
        // The file's top level: its function, as a static method of the module.
        let module = &types[4];
        assert_eq!(module.kind, TypeKind::Module);
        assert_eq!(
            at(module.methods[0].signature),
            "function ship(order: Order, when: Date): boolean"
        );
        assert_eq!(module.methods[0].params, ["Order", "Date"]);
        assert_eq!(types[1].fields[1].type_name, "number");
        let order = &types[2];
        assert_eq!(
            at(order.header),
            "abstract class Order extends Base<Money> implements Priced"
        );
        assert_eq!(order.supertypes, ["Base<Money>", "Priced"]);
        let fields: Vec<_> = order
            .fields
            .iter()
            .map(|f| {
                (
                    f.names[0].0.as_str(),
                    f.type_name.as_str(),
                    f.is_static,
                    f.is_private,
                )
            })
            .collect();
        assert_eq!(
            fields,
            [
                ("count", "number", true, false),
                ("#secret", "string", false, true),
                ("price", "Money", false, false),
                ("lines", "Line[]", false, true),
                ("id", "string", false, false),
            ]
        );
        assert_eq!(at(order.fields[2].head), "price: Money");
        let methods: Vec<_> = order
            .methods
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    m.return_type.as_deref(),
                    m.params.clone(),
                    m.varargs,
                )
            })
            .collect();
        assert_eq!(
            methods,
            [
                (
                    "Order",
                    None,
                    vec!["Line[]".to_string(), "string".into()],
                    false
                ),
                ("total", Some("Money"), vec![], false),
                (
                    "add",
                    Some("void"),
                    vec!["Line".into(), "Line".into()],
                    true
                ),
            ]
        );
        assert_eq!(at(order.methods[1].signature), "total(): Money");
        assert_eq!(types[3].constants.len(), 2);
    }

    /// The hole syntax of `SOURCE` with `line` inserted before the line holding `marker`,
    /// the hole at its end.
    fn hole(before: &str, line: &str) -> HoleSyntax {
        let at = SOURCE.find(before).unwrap();
        let source = format!("{}{line}\n{}", &SOURCE[..at], &SOURCE[at..]);
        TYPESCRIPT.hole_syntax(&source, at + line.len())
    }

    fn expected(before: &str, line: &str) -> Option<Expectation> {
        hole(before, line).expected
    }

    fn ty(t: &str) -> Option<Expectation> {
        Some(Expectation::Type(t.into()))
    }

    #[test]
    fn expected_type_from_annotations() {
        let in_total = "        return this.price;";
        assert_eq!(
            expected(in_total, "        const m: Money | undefined = "),
            ty("Money | undefined")
        );
        assert_eq!(expected(in_total, "        return "), ty("Money"));
        assert_eq!(expected(in_total, "        if ("), ty("boolean"));
        assert_eq!(
            expected(in_total, "        this.price = "),
            Some(Expectation::Variable {
                name: "price".into(),
                field_only: true
            })
        );
        assert_eq!(
            expected(in_total, "        this.add(x, "),
            Some(Expectation::Argument {
                receiver: Receiver::Current,
                name: "add".into(),
                position: 1,
                arity: 2
            })
        );
        assert_eq!(
            expected(in_total, "        new Order("),
            Some(Expectation::Constructor {
                type_name: "Order".into(),
                position: 0,
                arity: 1
            })
        );
        // A function of the file: its parameter's annotation.
        assert_eq!(expected(in_total, "        ship(this, "), ty("Date"));
        let in_ship = "    return true;";
        assert_eq!(expected(in_ship, "    const n = "), None);
    }

    #[test]
    fn the_holes_place_is_an_argument_a_declaration_or_a_return() {
        // The hole at the end of `source`, its line's rest cut.
        let place = |source: &str| TYPESCRIPT.hole_syntax(source, source.len()).place;
        assert_eq!(place("f(a, "), HolePlace::Argument);
        assert_eq!(place("new C("), HolePlace::Argument);
        let declared = "function f() {\n  const xs: string[] = ";
        assert_eq!(
            place(declared),
            HolePlace::Declaration {
                name: declared.find("xs").unwrap()
            }
        );
        // Without an annotation a declaration expects nothing to ask about.
        assert_eq!(place("const xs = "), HolePlace::Other);
        assert_eq!(
            place("function f(): number {\n  return "),
            HolePlace::Return
        );
        assert_eq!(place("const f = (): number => "), HolePlace::Return);
        assert_eq!(place("let x: number;\nx = "), HolePlace::Other);
    }

    #[test]
    fn an_async_functions_return_expects_a_value_or_a_promise_of_one() {
        let source = "async function load(): Promise<Order | undefined> {\n    return \n}\n\
                      async function done(): Promise<void> {\n    return \n}\n\
                      function now(): Promise<Order> {\n    return \n}\n";
        let holes: Vec<usize> = source
            .match_indices("return ")
            .map(|(i, _)| i + 7)
            .collect();
        let expected = |at| TYPESCRIPT.hole_syntax(source, at).expected;
        assert_eq!(
            expected(holes[0]),
            ty("Order | undefined | PromiseLike<Order | undefined>")
        );
        assert_eq!(expected(holes[1]), None);
        // Not async: the promise itself.
        assert_eq!(expected(holes[2]), ty("Promise<Order>"));
    }

    #[test]
    fn hole_scope_has_annotated_locals_and_enclosing_types() {
        let syntax = hole(
            "    return true;",
            "    let d = new Date(); const s: Status = ",
        );
        assert_eq!(syntax.expected, ty("Status"));
        let locals: Vec<_> = syntax
            .locals
            .iter()
            .map(|l| {
                (
                    l.name.as_str(),
                    l.type_name.as_str(),
                    &syntax.text[l.type_span.range()],
                )
            })
            .collect();
        assert_eq!(
            locals,
            [
                ("d", "Date", "d"),
                ("order", "Order", "order: Order"),
                ("when", "Date", "when: Date")
            ]
        );
        let in_class = hole("        return this.price;", "        ");
        assert_eq!(in_class.enclosing_types, ["Order"]);
        assert!(!in_class.is_static);
        // In a comment nothing is expected.
        assert_eq!(
            expected("        return this.price;", "        // x = "),
            None
        );
    }

    #[test]
    fn generic_types_written_bare_take_their_default_type_arguments() {
        let t = TypeScriptTypes;
        let read = |header: &str, name: &str| t.default_arguments(header, name);
        assert_eq!(
            read("export interface ParsePayload<T = unknown>", "ParsePayload").as_deref(),
            Some("<unknown>")
        );
        assert_eq!(
            read(
                "class Box<T extends (x: A) => B = () => C, U = Map<K, V>>",
                "Box"
            )
            .as_deref(),
            Some("<() => C, Map<K, V>>")
        );
        assert_eq!(read("interface Pair<T, U = T>", "Pair"), None);
        assert_eq!(read("interface Plain", "Plain"), None);
        let defaults = |name: &str| (name == "ParsePayload").then(|| "<unknown>".to_string());
        assert_eq!(
            t.with_default_arguments(
                "ParsePayload | ParsePayload<string> | { ParsePayload: ParsePayload[] } | typeof ParsePayload | ParsePayload[\"value\"]",
                &defaults
            ),
            "ParsePayload<unknown> | ParsePayload<string> | { ParsePayload: ParsePayload<unknown>[] } | typeof ParsePayload | ParsePayload[\"value\"]"
        );
    }

    #[test]
    fn a_union_splits_at_its_top_level_bars_only() {
        assert_eq!(
            union_members("Map<string, A | B> | ((x: C) => D | E) | undefined"),
            ["Map<string, A | B>", "((x: C) => D | E)", "undefined"]
        );
        // An arrow's `=>` closes no bracket.
        assert_eq!(union_members("(() => A) | B"), ["(() => A)", "B"]);
        assert_eq!(union_members("A & B"), ["A & B"]);
    }

    #[test]
    fn non_null_leaves_out_undefined_and_null_of_a_union() {
        let t = TypeScriptTypes;
        assert_eq!(t.non_null("Order | undefined"), "Order");
        assert_eq!(t.non_null("null | Order | Line"), "Order | Line");
        assert_eq!(
            t.non_null("Map<string, Order | null>"),
            "Map<string, Order | null>"
        );
        assert_eq!(t.non_null("A & B | null"), "A & B | null");
        assert_eq!(t.non_null("undefined"), "undefined");
    }
}
