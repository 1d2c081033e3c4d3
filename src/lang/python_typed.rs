//! Python syntax for typed-hole context (ChatLSP, paper sections 2.5–2.7): class outlines
//! (header, bases, attributes with their annotations, method signatures), what the syntax
//! around a hole says about its expected type and scope, and how Python writes types.
//!
//! Types come from annotations (PEP 484): a parameter's or attribute's annotation, a
//! function's `-> T`; an attribute or variable without one takes the class it is assigned a
//! call of (`x = Order(...)`) or the annotated parameter it is assigned (`self.repo = repo`).
//! As for Java, a placeholder expression is written at the hole and its place in the tree
//! gives the expected type.

use tree_sitter::Node;

use super::hole_grammar::{self, HoleGrammar, Lexicon, MemberSyntax};
use super::python_tree::parse;
use super::tree::{ancestors, named_children, span, text, type_text};
use super::{
    Expectation, FieldOutline, HolePlace, Local, MethodOutline, Receiver, Span, TypeKind,
    TypeOutline, TypeSyntax,
};

// ----- Outlines -------------------------------------------------------------------------------

/// A node's named children without comments (which Python's grammar places anywhere in a
/// block or an argument list).
fn code_children(node: Node) -> Vec<Node> {
    let mut children = named_children(node);
    children.retain(|c| c.kind() != "comment");
    children
}

/// A class's bases as written, keyword arguments (`metaclass=...`) left out.
pub(super) fn bases(class: Node, source: &str) -> Vec<String> {
    class
        .child_by_field_name("superclasses")
        .map(code_children)
        .unwrap_or_default()
        .into_iter()
        .filter(|b| {
            !matches!(
                b.kind(),
                "keyword_argument" | "dictionary_splat" | "list_splat"
            )
        })
        .map(|b| type_text(b, source))
        .collect()
}

/// The simple name of a written base: `mod.Base` → `Base`, `Generic[T]` → `Generic`.
fn base_name(base: &str) -> &str {
    let erased = base.split('[').next().unwrap_or(base).trim();
    erased.rsplit('.').next().unwrap_or(erased)
}

/// Bases that mark a class rather than give it a parent class RLPG would follow.
fn is_marker_base(name: &str) -> bool {
    matches!(
        name,
        "object" | "ABC" | "Generic" | "Protocol" | "NamedTuple" | "TypedDict"
    )
}

/// The parent class RLPG follows: the first base that is not a marker.
pub(super) fn superclass(bases: &[String]) -> Option<String> {
    bases
        .iter()
        .map(|b| base_name(b))
        .find(|b| !is_marker_base(b))
        .map(str::to_string)
}

/// An enum (a base named like the standard library's enums), a protocol, else a class.
pub(super) fn class_kind(bases: &[String]) -> TypeKind {
    let names = || bases.iter().map(|b| base_name(b));
    if names().any(|b| matches!(b, "Enum" | "IntEnum" | "StrEnum" | "Flag" | "IntFlag")) {
        TypeKind::Enum
    } else if names().any(|b| b == "Protocol") {
        TypeKind::Interface
    } else {
        TypeKind::Class
    }
}

/// A definition from `def`/`class` (decorators left out, as Java's annotations are) to the
/// colon before its body, the colon left out.
pub(super) fn signature_span(node: Node, source: &str) -> Span {
    let start = node.start_byte();
    let end = node
        .child_by_field_name("body")
        .map_or(node.end_byte(), |b| b.start_byte());
    let head = source[start..end].trim_end();
    let head = head.strip_suffix(':').unwrap_or(head).trim_end();
    Span::new(start, start + head.len())
}

/// The decorator names of a definition whose parent is `parent`, if that is its decorated
/// wrapper (`@staticmethod` → `staticmethod`).
fn decorators<'a>(parent: Option<Node>, source: &'a str) -> Vec<&'a str> {
    let Some(decorated) = parent.filter(|p| p.kind() == "decorated_definition") else {
        return Vec::new();
    };
    code_children(decorated)
        .into_iter()
        .filter(|d| d.kind() == "decorator")
        .filter_map(|d| d.named_child(0))
        .map(|e| {
            let callee = if e.kind() == "call" {
                e.child_by_field_name("function").unwrap_or(e)
            } else {
                e
            };
            let name = text(callee, source);
            name.rsplit('.').next().unwrap_or(name)
        })
        .collect()
}

/// A class body's statements, decorated definitions unwrapped, with the wrapper if any.
fn members(body: Node) -> Vec<(Node, Option<Node>)> {
    code_children(body)
        .into_iter()
        .map(|m| {
            if m.kind() == "decorated_definition" {
                (m.child_by_field_name("definition").unwrap_or(m), Some(m))
            } else {
                (m, None)
            }
        })
        .collect()
}

/// Every class at the top level, in a class body or in a function, in source order, then the
/// module's top level ([`TypeKind::Module`]).
pub(super) fn outline(root: Node, source: &str) -> Vec<TypeOutline> {
    let mut types = Vec::new();
    // An explicit stack of nodes to look in: deep nesting cannot overflow the call stack.
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        for child in code_children(node) {
            match child.kind() {
                "class_definition" => {
                    types.push(class_outline(child, Some(node), source));
                    stack.extend(child.child_by_field_name("body"));
                }
                "function_definition" => stack.extend(child.child_by_field_name("body")),
                "decorated_definition"
                | "if_statement"
                | "try_statement"
                | "else_clause"
                | "elif_clause"
                | "except_clause"
                | "finally_clause"
                | "block"
                | "ERROR" => {
                    stack.push(child);
                }
                _ => {}
            }
        }
    }
    types.sort_by_key(|t| t.decl.start);
    types.push(module_outline(root, source));
    types
}

/// The module's top level as a [`TypeKind::Module`]: its assignments of an annotated or
/// constructed value, and its functions.
fn module_outline(root: Node, source: &str) -> TypeOutline {
    let mut module = TypeOutline::empty_module();
    for (statement, wrapper) in members(root) {
        match statement.kind() {
            "expression_statement" => {
                let assignment = statement
                    .named_child(0)
                    .filter(|a| a.kind() == "assignment");
                let field = assignment.and_then(|a| class_field(a, statement, source));
                module.fields.extend(field.map(|f| FieldOutline {
                    is_static: true,
                    ..f
                }));
            }
            "function_definition" => {
                let decorators = decorators(wrapper, source);
                let (params, varargs) = positional_params(statement, false, source);
                module.methods.push(MethodOutline {
                    params,
                    varargs,
                    is_static: true,
                    ..method_outline(statement, "", &decorators, source)
                });
            }
            _ => {}
        }
    }
    module
}

/// A class's outline; `container` is the node it sits in (its decorators' if decorated).
fn class_outline(node: Node, container: Option<Node>, source: &str) -> TypeOutline {
    let bases = bases(node, source);
    let kind = class_kind(&bases);
    let name = node
        .child_by_field_name("name")
        .map_or_else(String::new, |n| text(n, source).to_string());
    let mut outline = TypeOutline {
        name,
        kind,
        header: signature_span(node, source),
        decl: span(node),
        supertypes: bases,
        constants: Vec::new(),
        fields: Vec::new(),
        methods: Vec::new(),
    };
    let Some(body) = node.child_by_field_name("body") else {
        return outline;
    };
    let is_dataclass = decorators(container, source).contains(&"dataclass");
    let mut instance_fields: Vec<FieldOutline> = Vec::new();
    for (member, wrapper) in members(body) {
        match member.kind() {
            "expression_statement" => {
                let Some(assignment) = member.named_child(0).filter(|a| a.kind() == "assignment")
                else {
                    continue;
                };
                if kind == TypeKind::Enum && assignment.child_by_field_name("type").is_none() {
                    outline.constants.push(span(assignment));
                } else if let Some(field) = class_field(assignment, member, source) {
                    outline.fields.push(field);
                }
            }
            "function_definition" => {
                let decorators = decorators(wrapper, source);
                let method = method_outline(member, &outline.name, &decorators, source);
                if method.return_type.is_none() && method.name == outline.name {
                    // `__init__`: the attributes it assigns on `self`.
                    instance_fields.extend(self_fields(member, source));
                }
                outline.methods.extend(Some(method));
            }
            _ => {}
        }
    }
    for field in instance_fields {
        let (name, _) = &field.names[0];
        if !outline
            .fields
            .iter()
            .any(|f| f.names.iter().any(|(n, _)| n == name))
        {
            outline.fields.push(field);
        }
    }
    let has_init = outline.methods.iter().any(|m| m.name == outline.name);
    if is_dataclass && !has_init {
        outline.methods.push(dataclass_init(&outline));
    }
    outline
}

/// A `@dataclass`'s generated `__init__`: its annotated instance attributes as parameters.
fn dataclass_init(outline: &TypeOutline) -> MethodOutline {
    MethodOutline {
        name: outline.name.clone(),
        signature: outline.header,
        decl: outline.header,
        return_type: None,
        params: outline
            .fields
            .iter()
            .filter(|f| !f.is_static)
            .map(|f| f.type_name.clone())
            .collect(),
        varargs: false,
        is_static: false,
        is_private: false,
    }
}

/// A leading underscore (not a dunder): private by convention.
fn is_private(name: &str) -> bool {
    name.starts_with('_') && !name.ends_with("__")
}

/// `x: T = v` (an instance attribute, unless `ClassVar`) or `x = Cls(...)` (a class
/// attribute) in a class body.
fn class_field(assignment: Node, statement: Node, source: &str) -> Option<FieldOutline> {
    let name = assignment
        .child_by_field_name("left")
        .filter(|l| l.kind() == "identifier")?;
    let (ty, annotated) = match assignment.child_by_field_name("type") {
        Some(t) => (t, true),
        None => (
            constructed(assignment.child_by_field_name("right")?, source)?,
            false,
        ),
    };
    let type_name = type_text(ty, source);
    let class_var = type_name.starts_with("ClassVar") || type_name.starts_with("typing.ClassVar");
    let name_text = text(name, source).to_string();
    Some(FieldOutline {
        head: span(ty),
        type_name,
        is_private: is_private(&name_text),
        names: vec![(name_text, span(name))],
        decl: span(statement),
        is_static: class_var || !annotated,
    })
}

/// The class a value is a call of: `Order(...)`, `models.Order(...)` → its callee, when it
/// is named like a class.
fn constructed<'t>(value: Node<'t>, source: &str) -> Option<Node<'t>> {
    let callee = value
        .child_by_field_name("function")
        .filter(|_| value.kind() == "call")?;
    let name = match callee.kind() {
        "identifier" => text(callee, source),
        "attribute" => text(callee.child_by_field_name("attribute")?, source),
        _ => return None,
    };
    name.chars()
        .next()
        .is_some_and(char::is_uppercase)
        .then_some(callee)
}

/// The attributes a method assigns on `self`, each once, with their annotation, the class of
/// the call assigned, or the annotation of the parameter assigned.
fn self_fields(method: Node, source: &str) -> Vec<FieldOutline> {
    let params = parameters(method, source);
    let mut out: Vec<FieldOutline> = Vec::new();
    let mut stack = method
        .child_by_field_name("body")
        .into_iter()
        .collect::<Vec<_>>();
    let mut found: Vec<(Node, Node)> = Vec::new();
    while let Some(node) = stack.pop() {
        for child in code_children(node) {
            match child.kind() {
                "expression_statement" => {
                    if let Some(a) = child.named_child(0).filter(|a| a.kind() == "assignment") {
                        found.push((a, child));
                    }
                }
                "function_definition" | "class_definition" | "decorated_definition" => {}
                _ => stack.push(child),
            }
        }
    }
    found.sort_by_key(|(a, _)| a.start_byte());
    for (assignment, statement) in found {
        let Some(left) = assignment.child_by_field_name("left") else {
            continue;
        };
        if !super::python_tree::is_self_attribute(left, source) {
            continue;
        }
        let Some(name) = left.child_by_field_name("attribute") else {
            continue;
        };
        let ty = assignment.child_by_field_name("type").or_else(|| {
            let right = assignment.child_by_field_name("right")?;
            constructed(right, source).or_else(|| {
                let assigned = text(right, source);
                params
                    .iter()
                    .find(|l| l.name == assigned)
                    .map(|l| l.type_node)
            })
        });
        let Some(ty) = ty else { continue };
        let name_text = text(name, source).to_string();
        if out.iter().any(|f| f.names[0].0 == name_text) {
            continue;
        }
        out.push(FieldOutline {
            head: span(ty),
            type_name: type_text(ty, source),
            is_private: is_private(&name_text),
            names: vec![(name_text, span(name))],
            decl: span(statement),
            is_static: false,
        });
    }
    out
}

/// A parameter: its name and annotation nodes.
struct Param<'t> {
    name: String,
    name_node: Node<'t>,
    type_node: Node<'t>,
}

/// The annotated parameters of a function.
fn parameters<'t>(function: Node<'t>, source: &str) -> Vec<Param<'t>> {
    function
        .child_by_field_name("parameters")
        .map(code_children)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            let ty = p.child_by_field_name("type")?;
            let name = p
                .child_by_field_name("name")
                .or_else(|| p.named_child(0).filter(|n| n.kind() == "identifier"))?;
            Some(Param {
                name: text(name, source).to_string(),
                name_node: name,
                type_node: ty,
            })
        })
        .collect()
}

/// A method: `__init__` is outlined under the class's name with no return type, as Java's
/// constructors are, so a call of the class finds its parameters.
fn method_outline(node: Node, class: &str, decorators: &[&str], source: &str) -> MethodOutline {
    let name = node
        .child_by_field_name("name")
        .map_or("", |n| text(n, source));
    let is_static = decorators
        .iter()
        .any(|d| matches!(*d, "staticmethod" | "classmethod"));
    let bound = !decorators.contains(&"staticmethod");
    let (params, varargs) = positional_params(node, bound, source);
    let is_init = name == "__init__";
    MethodOutline {
        name: if is_init {
            class.to_string()
        } else {
            name.to_string()
        },
        signature: signature_span(node, source),
        decl: span(node),
        return_type: node
            .child_by_field_name("return_type")
            .filter(|_| !is_init)
            .map(|t| type_text(t, source)),
        params,
        varargs,
        is_static,
        is_private: is_private(name),
    }
}

/// The types of the parameters a call may pass by position (`Any` where none is written),
/// `self`/`cls` left out of a bound method, and whether `*args` takes the rest.
fn positional_params(function: Node, bound: bool, source: &str) -> (Vec<String>, bool) {
    let mut params = Vec::new();
    let mut varargs = false;
    let list = function
        .child_by_field_name("parameters")
        .map(code_children)
        .unwrap_or_default();
    for (i, param) in list.into_iter().enumerate() {
        if i == 0 && bound {
            continue;
        }
        let annotation = param
            .child_by_field_name("type")
            .map(|t| type_text(t, source));
        let splat = param.kind() == "list_splat_pattern"
            || (param.kind() == "typed_parameter"
                && param
                    .named_child(0)
                    .is_some_and(|c| c.kind() == "list_splat_pattern"));
        match param.kind() {
            "keyword_separator" | "dictionary_splat_pattern" => break,
            "positional_separator" => continue,
            _ if param
                .named_child(0)
                .is_some_and(|c| c.kind() == "dictionary_splat_pattern") =>
            {
                break;
            }
            _ => {}
        }
        params.push(annotation.unwrap_or_else(|| "Any".to_string()));
        if splat {
            varargs = true;
            break;
        }
    }
    (params, varargs)
}

// ----- The hole -------------------------------------------------------------------------------

/// Python's typed-hole reading.
pub(super) const HOLES: HoleGrammar = HoleGrammar {
    lexicon: Lexicon {
        line_comment: "#",
        block_comment: None,
        strings: &[("\"\"\"", true), ("'''", true), ("\"", false), ("'", false)],
        keywords_before_expression: &[
            "return", "yield", "await", "not", "if", "elif", "while", "assert", "in", "is", "and",
            "or", "else", "raise",
        ],
        braces_are_blocks: false,
    },
    string_parts: &["string_content", "escape_sequence"],
    parse,
    is_type_declaration: |kind| kind == "class_definition",
    outline,
    expectation,
    place,
    locals,
    in_static_code,
};

/// `a.b`, `self` (and `cls`) and `super()` in Python.
const MEMBERS: MemberSyntax = MemberSyntax {
    kind: "attribute",
    object: "object",
    name: "attribute",
    is_current: |node, source| {
        node.kind() == "identifier" && matches!(text(node, source), "self" | "cls")
    },
    is_super: |node, source| {
        node.kind() == "call"
            && node
                .child_by_field_name("function")
                .is_some_and(|f| text(f, source) == "super")
    },
};

/// [`hole_grammar::outermost`] through Python's `a.▮`, `▮()`, `▮[i]`, `(▮)` and a
/// conditional's branch.
fn outermost(path: &[Node]) -> Option<usize> {
    hole_grammar::outermost(path, |node, parent, _| {
        let is = |field: &str| parent.child_by_field_name(field) == Some(node);
        match parent.kind() {
            "parenthesized_expression" => true,
            "attribute" => is("attribute"),
            "call" => is("function"),
            "subscript" => is("value"),
            // `a if cond else b`: the condition is the second part.
            "conditional_expression" => code_children(parent).get(1) != Some(&node),
            _ => false,
        }
    })
}

/// The type the place of the expression at the hole says it must have. A condition expects
/// nothing: any Python value is true or false.
fn expectation(path: &[Node], root: Node, source: &str) -> Option<Expectation> {
    let at = outermost(path)?;
    let (node, parent) = (path[at], path[at - 1]);
    let is = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        "assignment" if is("right") => {
            if let Some(ty) = parent.child_by_field_name("type") {
                return Some(Expectation::Type(type_text(ty, source)));
            }
            MEMBERS.assigned(parent.child_by_field_name("left")?, source)
        }
        "return_statement" => return_type(&path[..at], source),
        "keyword_argument" if is("value") => {
            let name = text(parent.child_by_field_name("name")?, source);
            argument(&path[..at - 1], node, Some(name), root, source)
        }
        "argument_list" => argument(&path[..at], node, None, root, source),
        _ => None,
    }
}

/// What the expression at the hole is: an argument (by position or keyword), an annotated
/// assignment's value (with where the name it declares starts), a returned value.
fn place(path: &[Node], _source: &str) -> HolePlace {
    let Some(at) = outermost(path) else {
        return HolePlace::Other;
    };
    let (node, parent) = (path[at], path[at - 1]);
    let is = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        "argument_list" => HolePlace::Argument,
        "keyword_argument" if is("value") => HolePlace::Argument,
        "assignment" if is("right") && parent.child_by_field_name("type").is_some() => {
            // `x: T = ▮`, `self.x: T = ▮`: the name declared.
            let left = parent.child_by_field_name("left");
            let name = left.and_then(|l| match l.kind() {
                "identifier" => Some(l),
                "attribute" => l.child_by_field_name("attribute"),
                _ => None,
            });
            match name {
                Some(name) => HolePlace::Declaration {
                    name: name.start_byte(),
                },
                None => HolePlace::Other,
            }
        }
        "return_statement" => HolePlace::Return,
        _ => HolePlace::Other,
    }
}

/// The annotated return type of the function the `return` (the path's last node) is in; none
/// in a lambda or for `-> None`.
fn return_type(statement: &[Node], source: &str) -> Option<Expectation> {
    let function = ancestors(statement)
        .find(|a| {
            matches!(
                a.kind(),
                "function_definition" | "lambda" | "class_definition"
            )
        })
        .filter(|f| f.kind() == "function_definition")?;
    let ty = type_text(function.child_by_field_name("return_type")?, source);
    (ty != "None").then_some(Expectation::Type(ty))
}

/// Argument `node` (keyword `keyword`, if it is one) of the call whose argument list is the
/// path's last node. A function of this file answers at once; any other callee is named for
/// the repository to resolve: a class (its constructor), a function the file imports, a
/// method of `self`, of a value or of a class, a function of a module the file imports
/// (`click.echo`, `click.utils.f`).
fn argument(
    list_path: &[Node],
    node: Node,
    keyword: Option<&str>,
    root: Node,
    source: &str,
) -> Option<Expectation> {
    let (&list, call_path) = list_path.split_last()?;
    let arguments = code_children(list);
    let positional: Vec<&Node> = arguments
        .iter()
        .filter(|a| a.kind() != "keyword_argument")
        .collect();
    let arity = positional.len();
    let position = positional.iter().position(|a| **a == node);
    let call = *call_path.last()?;
    let function = call.child_by_field_name("function")?;
    let (receiver, name) = match function.kind() {
        "identifier" => {
            let name = text(function, source);
            // A function of this module: its annotation is the answer.
            if let Some(def) = module_function(root, name, source) {
                return parameter_type(def, position, keyword, source).map(Expectation::Type);
            }
            // Called by its own name: a class (its constructor is outlined under it) or a
            // function the file imports.
            (Receiver::Name(name.into()), name)
        }
        "attribute" => {
            let object = function.child_by_field_name("object")?;
            let receiver = MEMBERS
                .receiver(object, source)
                .or_else(|| dotted_name(object, source).map(Receiver::Name))?;
            (
                receiver,
                text(function.child_by_field_name("attribute")?, source),
            )
        }
        _ => return None,
    };
    if let Some(keyword) = keyword {
        return Some(Expectation::Keyword {
            receiver,
            name: name.into(),
            keyword: keyword.into(),
        });
    }
    let position = position?;
    // A class is named like one.
    let is_class = name.starts_with(char::is_uppercase);
    Some(match receiver {
        Receiver::Name(class) if class == name && is_class => Expectation::Constructor {
            type_name: class,
            position,
            arity,
        },
        receiver => Expectation::Argument {
            receiver,
            name: name.into(),
            position,
            arity,
        },
    })
}

/// A name of dotted identifiers as written (`click.utils`), nothing else.
fn dotted_name(node: Node, source: &str) -> Option<String> {
    let mut parts = Vec::new();
    let mut at = node;
    while at.kind() == "attribute" {
        parts.push(text(at.child_by_field_name("attribute")?, source));
        at = at.child_by_field_name("object")?;
    }
    (at.kind() == "identifier").then_some(())?;
    parts.push(text(at, source));
    parts.reverse();
    Some(parts.join("."))
}

/// The module-level function `name`, if this file defines one.
fn module_function<'t>(root: Node<'t>, name: &str, source: &str) -> Option<Node<'t>> {
    code_children(root)
        .into_iter()
        .map(|d| match d.kind() {
            "decorated_definition" => d.child_by_field_name("definition").unwrap_or(d),
            _ => d,
        })
        .filter(|d| d.kind() == "function_definition")
        .find(|d| {
            d.child_by_field_name("name")
                .is_some_and(|n| text(n, source) == name)
        })
}

/// The annotation of parameter `position` (or the one named `keyword`) of a function.
fn parameter_type(
    function: Node,
    position: Option<usize>,
    keyword: Option<&str>,
    source: &str,
) -> Option<String> {
    if let Some(keyword) = keyword {
        let named = parameters(function, source)
            .into_iter()
            .find(|p| p.name == keyword)
            .map(|p| p.type_node);
        // Else `**kwargs: T` takes it, as a `T`.
        let rest = || {
            let list = function.child_by_field_name("parameters")?;
            code_children(list).into_iter().find_map(|p| {
                let splat = p.named_child(0)?.kind() == "dictionary_splat_pattern";
                p.child_by_field_name("type").filter(|_| splat)
            })
        };
        return named.or_else(rest).map(|t| type_text(t, source));
    }
    let (params, varargs) = positional_params(function, false, source);
    let position = position?;
    let param = match params.get(position) {
        Some(p) => p,
        None if varargs => params.last()?,
        None => return None,
    };
    (param != "Any").then(|| param.clone())
}

/// Annotated parameters and locals visible at the path's last node, nearest first: those of
/// the enclosing functions (a closure sees its outer function's), then the module's.
fn locals(path: &[Node], source: &str) -> Vec<Local> {
    let mut out = Vec::new();
    let Some(&hole) = path.last() else {
        return out;
    };
    let scopes = ancestors(path).filter(|a| matches!(a.kind(), "function_definition" | "module"));
    for scope in scopes {
        let body = if scope.kind() == "module" {
            Some(scope)
        } else {
            scope.child_by_field_name("body")
        };
        if let Some(body) = body {
            let mut assigned = assigned_before(body, hole.start_byte(), source);
            assigned.reverse();
            out.extend(assigned);
        }
        if scope.kind() == "function_definition" {
            let mut params: Vec<Local> = parameters(scope, source)
                .into_iter()
                .map(|p| Local {
                    name: p.name,
                    type_name: type_text(p.type_node, source),
                    type_span: span(p.type_node),
                    name_span: span(p.name_node),
                })
                .collect();
            params.reverse();
            out.extend(params);
        }
    }
    out
}

/// Variables a scope's body assigns with an annotation or a class's call before `before`, in
/// source order, nested functions and classes left out (their names are their own).
fn assigned_before(body: Node, before: usize, source: &str) -> Vec<Local> {
    let mut found = Vec::new();
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        for child in code_children(node) {
            if child.start_byte() >= before {
                continue;
            }
            match child.kind() {
                "function_definition" | "class_definition" | "decorated_definition" | "lambda" => {}
                "assignment" if child.end_byte() <= before => {
                    let name = child
                        .child_by_field_name("left")
                        .filter(|l| l.kind() == "identifier");
                    let ty = child
                        .child_by_field_name("type")
                        .or_else(|| constructed(child.child_by_field_name("right")?, source));
                    if let (Some(name), Some(ty)) = (name, ty) {
                        found.push(Local {
                            name: text(name, source).into(),
                            type_name: type_text(ty, source),
                            type_span: span(ty),
                            name_span: span(name),
                        });
                    }
                }
                _ => stack.push(child),
            }
        }
    }
    found.sort_by_key(|l| l.name_span.start);
    found
}

/// Whether the code at the path's last node has no `self`: directly in a class body, or in a
/// `@staticmethod`/`@classmethod`.
fn in_static_code(path: &[Node], source: &str) -> bool {
    let nodes: Vec<Node> = ancestors(path).collect();
    for (i, node) in nodes.iter().enumerate() {
        match node.kind() {
            "class_definition" => return true,
            "function_definition" => {
                let wrapper = nodes.get(i + 1).copied();
                let container = match wrapper {
                    Some(w) if w.kind() == "decorated_definition" => nodes.get(i + 2).copied(),
                    other => other,
                };
                let in_class = container.is_some_and(|c| c.kind() == "block")
                    && nodes
                        .iter()
                        .skip(i + 1)
                        .find(|n| matches!(n.kind(), "class_definition" | "function_definition"))
                        .is_some_and(|n| n.kind() == "class_definition");
                if in_class {
                    let decorators = decorators(wrapper, source);
                    return decorators
                        .iter()
                        .any(|d| matches!(*d, "staticmethod" | "classmethod"));
                }
            }
            _ => {}
        }
    }
    false
}

// ----- Type text ------------------------------------------------------------------------------

/// How Python writes types: `typing.List[Order]`, `Order | None`, `"Order"` (a forward
/// reference), `Callable[[A], B]`.
pub struct PythonTypes;

/// A forward reference's quotes left out: `"Order"` → `Order`.
fn unquoted(written: &str) -> &str {
    let w = written.trim();
    for q in ['"', '\''] {
        if let Some(inner) = w.strip_prefix(q).and_then(|w| w.strip_suffix(q)) {
            return inner.trim();
        }
    }
    w
}

/// Forward references' quotes left out wherever they are: `t.List["Segment"]` →
/// `t.List[Segment]`, `"Optional['Context']"` → `Optional[Context]`. The strings of a
/// `Literal[...]` are values, not types, and keep theirs.
fn without_forward_quotes(written: &str) -> String {
    let mut out = String::with_capacity(written.len());
    // Per open bracket, whether it is inside a `Literal[`.
    let mut in_literal: Vec<bool> = Vec::new();
    let mut rest = written;
    while let Some(c) = rest.chars().next() {
        match c {
            '[' => {
                let head = out.trim_end();
                let name_start = head
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                    .map_or(0, |i| i + 1);
                let literal = head[name_start..].rsplit('.').next() == Some("Literal");
                in_literal.push(literal || in_literal.last() == Some(&true));
            }
            ']' => {
                in_literal.pop();
            }
            '"' | '\'' if in_literal.last() != Some(&true) => {
                // A quoted type holds no quote of its own kind, so each level is shorter and
                // of the other kind: two levels at most.
                if let Some(end) = rest[1..].find(c) {
                    out.push_str(&without_forward_quotes(&rest[1..1 + end]));
                    rest = &rest[end + 2..];
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Wrappers that say how a declaration is read, not what its value is: a `ClassVar[int]`
/// attribute, a `Final[int]` constant and an `Annotated[int, meta]` name hold an `int`.
const QUALIFIERS: [&str; 3] = ["ClassVar", "Final", "Annotated"];

/// `written` split at top-level occurrences of `separator` (outside brackets).
fn split_top(written: &str, separator: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in written.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = depth.saturating_sub(1),
            c if c == separator && depth == 0 => {
                out.push(&written[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&written[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A type as pyright prints it, read into Python's own spelling: a callable `(A, B) -> C` as
/// `Callable[[A, B], C]` (`(...) -> C` as `Callable[..., C]`, parameter names and defaults
/// left out), grouping parentheses (`(A | B)`, pyright's union in a return) dropped. What
/// does not read as a type (a call in `Annotated`'s metadata) gives `None`.
struct PrintedType<'t> {
    rest: &'t str,
}

impl<'t> PrintedType<'t> {
    fn new(printed: &'t str) -> Self {
        PrintedType { rest: printed }
    }

    /// The whole text as one type.
    fn python(mut self) -> Option<String> {
        let read = self.union()?;
        self.rest.trim().is_empty().then_some(read)
    }

    /// Whether the next token is `mark` (taken if so).
    fn eat(&mut self, mark: &str) -> bool {
        let trimmed = self.rest.trim_start();
        match trimmed.strip_prefix(mark) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn union(&mut self) -> Option<String> {
        let mut members = vec![self.atom()?];
        while self.eat("|") {
            members.push(self.atom()?);
        }
        Some(members.join(" | "))
    }

    /// A name with its arguments, a string or a number (`Literal`'s), `...`, a list of types
    /// (`Callable`'s parameters as written), a group, or a callable.
    fn atom(&mut self) -> Option<String> {
        if self.eat("(") {
            let (parameters, closed) = self.list(")", true)?;
            if !closed {
                return None;
            }
            if self.eat("->") {
                let returned = self.atom()?;
                let parameters = match parameters.as_slice() {
                    [only] if only == "..." => only.clone(),
                    _ => format!("[{}]", parameters.join(", ")),
                };
                return Some(format!("Callable[{parameters}, {returned}]"));
            }
            return match parameters.as_slice() {
                [grouped] => Some(grouped.clone()),
                _ => None,
            };
        }
        if self.eat("[") {
            let (items, closed) = self.list("]", false)?;
            return closed.then(|| format!("[{}]", items.join(", ")));
        }
        let trimmed = self.rest.trim_start();
        let quote = trimmed.chars().next().filter(|c| matches!(c, '"' | '\''));
        let end = match quote {
            Some(q) => trimmed[1..].find(q)? + 2,
            None => trimmed
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '@')))
                .unwrap_or(trimmed.len()),
        };
        let name = &trimmed[..end];
        // `-` belongs to a number, never to `->`.
        if name.is_empty() || name.ends_with('-') {
            return None;
        }
        self.rest = &trimmed[end..];
        if self.eat("[") {
            let (arguments, closed) = self.list("]", false)?;
            return closed.then(|| format!("{name}[{}]", arguments.join(", ")));
        }
        Some(name.to_string())
    }

    /// Types separated by commas up to `close` (taken), and whether it was there; a callable's
    /// `parameters` without their names, defaults and `/`, `*` markers.
    fn list(&mut self, close: &str, parameters: bool) -> Option<(Vec<String>, bool)> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some((items, true));
            }
            if parameters {
                if self.eat("/") || self.eat("*,") {
                    self.eat(",");
                    continue;
                }
                // `name: T` or `*args: T`: the type.
                let trimmed = self.rest.trim_start();
                let named = trimmed
                    .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '*')))
                    .filter(|&i| i > 0 && trimmed[i..].starts_with(':'));
                if let Some(colon) = named {
                    self.rest = &trimmed[colon + 1..];
                }
            }
            items.push(self.union()?);
            if parameters && self.eat("=") {
                // A default: `...` in pyright's printing.
                self.atom()?;
            }
            if !self.eat(",") {
                return Some((items, self.eat(close)));
            }
        }
    }
}

impl TypeSyntax for PythonTypes {
    fn declaration_style(&self) -> super::DeclarationStyle {
        super::DeclarationStyle::Python
    }

    /// Quotes left out, then qualifiers unwrapped: `t.ClassVar["Style"]` → `Style`,
    /// `"Context"` → `Context`, pyright's spelling of the declared type.
    fn normal_form(&self, written: &str) -> String {
        let mut normal = without_forward_quotes(written.trim());
        while let Some((head, arguments)) = normal.split_once('[') {
            let qualifier = QUALIFIERS.contains(&self.simple_name(head.trim()));
            let Some(arguments) = arguments.strip_suffix(']').filter(|_| qualifier) else {
                break;
            };
            let Some(&value) = split_top(arguments, ',').first() else {
                break;
            };
            normal = value.to_string();
        }
        match normal.contains('(') {
            true => PrintedType::new(&normal).python().unwrap_or(normal),
            false => normal,
        }
    }

    /// The annotation of the parameter named `keyword` (else of `**kwargs`) in `def f(...)`.
    fn keyword_parameter(&self, signature: &str, keyword: &str) -> Option<String> {
        let source = format!("{signature}:\n    ...\n");
        let tree = parse(&source)?;
        let function = code_children(tree.root_node())
            .into_iter()
            .find(|d| d.kind() == "function_definition")?;
        parameter_type(function, None, Some(keyword), &source)
    }

    fn non_null(&self, written: &str) -> String {
        let written = unquoted(written);
        let (head, _) = written.split_once('[').unwrap_or_default();
        if (head == "Optional" || head.ends_with(".Optional")) && written.ends_with(']') {
            return self.non_null(&written[head.len() + 1..written.len() - 1]);
        }
        let union: Vec<&str> = split_top(written, '|').into_iter().map(str::trim).collect();
        let kept: Vec<&str> = union.iter().copied().filter(|m| *m != "None").collect();
        if kept.is_empty() || kept.len() == union.len() {
            written.to_string()
        } else {
            kept.join(" | ")
        }
    }

    /// `typing.List[Order]` → `typing.List`; `"Order"` → `Order`; a union the erasure of its
    /// first member that is not `None` (`Order | None` → `Order`).
    fn erasure<'t>(&self, written: &'t str) -> &'t str {
        let written = unquoted(written);
        let members = split_top(written, '|');
        let first = members
            .iter()
            .copied()
            .find(|m| unquoted(m) != "None")
            .or(members.first().copied())
            .unwrap_or(written);
        let first = unquoted(first);
        let end = first.find('[').unwrap_or(first.len());
        first[..end].trim()
    }

    /// A union's members; a generic's arguments (a `Callable`'s parameter list flattened).
    fn components<'t>(&self, written: &'t str) -> Vec<&'t str> {
        let written = unquoted(written);
        let members = split_top(written, '|');
        if members.len() > 1 {
            return members.into_iter().map(unquoted).collect();
        }
        let (Some(open), Some(close)) = (written.find('['), written.rfind(']')) else {
            return Vec::new();
        };
        if close <= open {
            return Vec::new();
        }
        let mut out = Vec::new();
        for argument in split_top(&written[open + 1..close], ',') {
            match argument.strip_prefix('[').and_then(|a| a.strip_suffix(']')) {
                Some(list) => out.extend(split_top(list, ',')),
                None => out.push(argument),
            }
        }
        out.into_iter()
            .map(unquoted)
            .filter(|a| !a.is_empty() && *a != "..." && !a.starts_with('['))
            .collect()
    }

    /// Every name in a written type: `dict[str, list["Order"]]` → `dict`, `str`, `list`,
    /// `Order`.
    fn type_names<'t>(&self, written: &'t str) -> Vec<&'t str> {
        written
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .filter(|w| {
                w.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_')
            })
            .collect()
    }

    /// The builtin scalars, `None`, `object`, `Any`, and the containers when bare (`list`,
    /// `typing.Dict`): `list[Order]` is not one.
    fn is_base_type(&self, written: &str) -> bool {
        let written = unquoted(written);
        let scalar = matches!(
            self.simple_name(written),
            "int" | "str" | "float" | "bool" | "bytes" | "complex" | "None" | "object" | "Any"
        );
        let bare_container = !written.contains('[')
            && matches!(
                self.simple_name(written),
                "list"
                    | "dict"
                    | "set"
                    | "frozenset"
                    | "tuple"
                    | "type"
                    | "List"
                    | "Dict"
                    | "Set"
                    | "FrozenSet"
                    | "Tuple"
                    | "Type"
                    | "Iterable"
                    | "Iterator"
                    | "Sequence"
                    | "Mapping"
                    | "Callable"
            );
        (scalar && !written.contains('|')) || bare_container
    }

    /// `T`, `K2`, `T_co`: by convention a type variable.
    fn is_type_variable(&self, written: &str) -> bool {
        let name = self.erasure(written);
        let name = name
            .strip_suffix("_co")
            .or_else(|| name.strip_suffix("_contra"))
            .unwrap_or(name);
        super::is_type_variable_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{HoleSyntax, Language, Receiver, python::Python};

    const SOURCE: &str = r#"from dataclasses import dataclass


@dataclass
class Line:
    product: str
    price: Money


class Order(Entity):
    total: Money

    def __init__(self, customer: Customer, lines: list[Line]) -> None:
        self.customer = customer
        self.note = Note("x")

    def add(self, line: Line, count: int = 1) -> None:
        pass

    def first(self) -> Optional[Line]:
        best: Line = self.lines[0]
        other = Line("a", Money(1))
        return $

    @staticmethod
    def make(name: str) -> "Order":
        self.customer = $


def price_of(line: Line, *, rounding: Rounding) -> Money:
    return line.price
"#;

    /// The syntax at the `$` following `marker`, the `$` cut out (the rest of the line is
    /// the target, so what would follow the hole does not matter).
    fn at(marker: &str) -> HoleSyntax {
        let hole = SOURCE.find(&format!("{marker}$")).expect("marker") + marker.len();
        let cut = format!("{}{}", &SOURCE[..hole], &SOURCE[hole + 1..]);
        Python.hole_syntax(&cut.replace('$', "x"), hole)
    }

    fn ty(text: &str) -> Option<Expectation> {
        Some(Expectation::Type(text.into()))
    }

    #[test]
    fn outline_reads_annotations_init_and_dataclasses() {
        let tree = parse(SOURCE).unwrap();
        let types = outline(tree.root_node(), SOURCE);
        let names: Vec<_> = types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Line", "Order", ""]);
        // The module's top level: its function, its first parameter kept (no `self`).
        let module = &types[2];
        assert_eq!(module.kind, TypeKind::Module);
        let price_of = &module.methods[0];
        assert_eq!(price_of.name, "price_of");
        assert_eq!(price_of.params, ["Line"]);
        assert_eq!(price_of.return_type.as_deref(), Some("Money"));
        let order = &types[1];
        assert_eq!(&SOURCE[order.header.range()], "class Order(Entity)");
        assert_eq!(order.supertypes, ["Entity"]);
        let fields: Vec<_> = order
            .fields
            .iter()
            .map(|f| (f.names[0].0.as_str(), f.type_name.as_str(), f.is_static))
            .collect();
        assert_eq!(
            fields,
            [
                ("total", "Money", false),
                ("customer", "Customer", false),
                ("note", "Note", false)
            ]
        );
        let init = &order.methods[0];
        assert_eq!(
            (init.name.as_str(), init.return_type.as_ref()),
            ("Order", None)
        );
        assert_eq!(init.params, ["Customer", "list[Line]"]);
        let make = order.methods.iter().find(|m| m.name == "make").unwrap();
        assert!(make.is_static);
        assert_eq!(make.params, ["str"]);
        // A dataclass is called with its annotated attributes.
        let line_init = types[0].methods.iter().find(|m| m.name == "Line").unwrap();
        assert_eq!(line_init.params, ["str", "Money"]);
    }

    #[test]
    fn expected_types_from_annotations() {
        let s = at("        return ");
        assert_eq!(s.expected, ty("Optional[Line]"));
        assert_eq!(s.enclosing_types, ["Order"]);
        assert!(!s.is_static);
        let locals: Vec<_> = s
            .locals
            .iter()
            .map(|l| (l.name.as_str(), l.type_name.as_str()))
            .collect();
        assert_eq!(locals, [("other", "Line"), ("best", "Line")]);
        // An annotated assignment, a call of a module function (by position and keyword).
        let probe = |line: &str, cut: usize| {
            let source = SOURCE.replace("        return $", line);
            let hole = source.find(line).unwrap() + cut;
            Python.hole_syntax(&source.replace('$', "x"), hole).expected
        };
        assert_eq!(probe("        x: Money = y", 19), ty("Money"));
        assert_eq!(probe("        return price_of(a)", 24), ty("Line"));
        assert_eq!(
            probe("        return price_of(a, rounding=b)", 36),
            ty("Rounding")
        );
        assert_eq!(
            probe("        self.add(a", 17),
            Some(Expectation::Argument {
                receiver: Receiver::Current,
                name: "add".into(),
                position: 0,
                arity: 1
            })
        );
        assert_eq!(
            probe("        Order(c, ", 17),
            Some(Expectation::Constructor {
                type_name: "Order".into(),
                position: 1,
                arity: 2
            })
        );
        assert_eq!(
            probe("        best = ", 15),
            Some(Expectation::Variable {
                name: "best".into(),
                field_only: false
            })
        );
        // A condition expects nothing in Python; a comment nothing at all.
        assert_eq!(probe("        if ", 11), None);
        assert_eq!(probe("        # return ", 17), None);
        // A string being written is closed before the tree is read.
        assert_eq!(probe("        return \"abc", 19), ty("Optional[Line]"));
    }

    #[test]
    fn the_holes_place_is_an_argument_a_declaration_or_a_return() {
        // The hole at the end of `source`, its line's rest cut.
        let place = |source: &str| Python.hole_syntax(source, source.len()).place;
        assert_eq!(place("f(a, "), HolePlace::Argument);
        assert_eq!(place("f(a, color="), HolePlace::Argument);
        assert_eq!(place("Order(a, self."), HolePlace::Argument);
        let declared = "def f():\n    xs: list[str] = ";
        assert_eq!(
            place(declared),
            HolePlace::Declaration {
                name: declared.find("xs").unwrap()
            }
        );
        let attribute = "class A:\n    def f(self):\n        self.xs: list[str] = ";
        assert_eq!(
            place(attribute),
            HolePlace::Declaration {
                name: attribute.find("xs").unwrap()
            }
        );
        // Without an annotation an assignment declares no type to ask about.
        assert_eq!(place("xs = "), HolePlace::Other);
        assert_eq!(place("def f() -> int:\n    return "), HolePlace::Return);
        assert_eq!(place("def f() -> int:\n    return a if "), HolePlace::Other);
        assert_eq!(place("if "), HolePlace::Other);
    }

    #[test]
    fn calls_of_other_files_name_their_callee_by_position_or_keyword() {
        let expected = |line: &str| {
            let source = format!(
                "import click\nimport click.utils\n\n\nclass Pager:\n    def show(self, text):\n{line}"
            );
            Python.hole_syntax(&source, source.len()).expected
        };
        let keyword = |receiver: Receiver, name: &str, keyword: &str| {
            Some(Expectation::Keyword {
                receiver,
                name: name.into(),
                keyword: keyword.into(),
            })
        };
        let name = |n: &str| Receiver::Name(n.into());
        // An imported function, a module's, a class's method, a method of `self`.
        assert_eq!(
            expected("        echo(text, color="),
            keyword(name("echo"), "echo", "color")
        );
        assert_eq!(
            expected("        click.echo(text, file=f, color="),
            keyword(name("click"), "echo", "color")
        );
        assert_eq!(
            expected("        Align.center(text, height="),
            keyword(name("Align"), "center", "height")
        );
        assert_eq!(
            expected("        self.render(text, markup="),
            keyword(Receiver::Current, "render", "markup")
        );
        // A class called by keyword: its constructor.
        assert_eq!(
            expected("        Panel(text, title="),
            keyword(name("Panel"), "Panel", "title")
        );
        let argument = |receiver: Receiver, name: &str, position: usize, arity: usize| {
            Some(Expectation::Argument {
                receiver,
                name: name.into(),
                position,
                arity,
            })
        };
        assert_eq!(
            expected("        echo("),
            argument(name("echo"), "echo", 0, 1)
        );
        assert_eq!(
            expected("        click.utils.make_default_short_help(text, "),
            argument(name("click.utils"), "make_default_short_help", 1, 2)
        );
        // Not a dotted name: nothing to resolve.
        assert_eq!(expected("        f()(text, color="), None);
    }

    #[test]
    fn a_keyword_argument_takes_its_parameters_annotation_else_kwargs() {
        let signature = "def isolation(self, input: t.Optional[t.Union[str, bytes]] = None, \
                         *, color: bool = False, **extra: \"Style\") -> t.Iterator[int]";
        let read = |keyword| PythonTypes.keyword_parameter(signature, keyword);
        assert_eq!(
            read("input").as_deref(),
            Some("t.Optional[t.Union[str, bytes]]")
        );
        assert_eq!(read("color").as_deref(), Some("bool"));
        assert_eq!(read("anything").as_deref(), Some("\"Style\""));
        let plain = "async def echo(message=None, *args: int, nl: bool = True)";
        assert_eq!(
            PythonTypes.keyword_parameter(plain, "nl").as_deref(),
            Some("bool")
        );
        assert_eq!(PythonTypes.keyword_parameter(plain, "message"), None);
        assert_eq!(PythonTypes.keyword_parameter(plain, "other"), None);
        assert_eq!(PythonTypes.keyword_parameter("class Line", "x"), None);
    }

    #[test]
    fn pyrights_callables_and_groups_read_in_pythons_spelling() {
        let t = PythonTypes;
        assert_eq!(
            t.normal_form("((TextIO) -> TextIO) | None"),
            "Callable[[TextIO], TextIO] | None"
        );
        assert_eq!(t.normal_form("(BinaryIO | TextIO)"), "BinaryIO | TextIO");
        assert_eq!(
            t.normal_form("(...) -> (int | None)"),
            "Callable[..., int | None]"
        );
        assert_eq!(
            t.normal_form("( int, (str) -> int ) -> (() -> None)"),
            "Callable[[int, Callable[[str], int]], Callable[[], None]]"
        );
        assert_eq!(
            t.normal_form(
                "(x: int, /, *, y: str = ..., **kw: Any) -> dict[str, Literal['a,b', -1]]"
            ),
            "Callable[[int, str, Any], dict[str, Literal['a,b', -1]]]"
        );
        // What reads as no type stays as written.
        assert_eq!(
            t.normal_form("list[Annotated[int, Field(gt=0)]]"),
            "list[Annotated[int, Field(gt=0)]]"
        );
        assert_eq!(t.normal_form("(int"), "(int");
        assert_eq!(
            t.normal_form("t.Callable[[t.TextIO], t.TextIO]"),
            "t.Callable[[t.TextIO], t.TextIO]"
        );
    }

    #[test]
    fn static_methods_have_no_self() {
        let s = at("        self.customer = ");
        assert!(s.is_static);
        assert_eq!(
            s.expected,
            Some(Expectation::Variable {
                name: "customer".into(),
                field_only: true
            })
        );
        assert_eq!(s.locals[0].name, "name");
    }

    #[test]
    fn any_hole_in_any_text_is_analysed() {
        let texts = [
            SOURCE,
            "def f(x: \"Or\nder\", *a, **k) -> 'A[':\n  '''é\n\u{0}(([{",
            "class A(B[\"C\"], metaclass=M):\n    x: = \n    @\n  f'{x!r:>{w}}' \\\n",
        ];
        for text in texts {
            for hole in 0..=text.len() {
                let syntax = Python.hole_syntax(text, hole);
                assert!(syntax.inserted.end <= syntax.text.len());
                Python.extract(&text[..text.floor_char_boundary(hole)]);
            }
        }
    }

    #[test]
    fn type_text() {
        let t = PythonTypes;
        assert_eq!(t.erasure("typing.List[Order]"), "typing.List");
        assert_eq!(t.simple_name("typing.List[Order]"), "List");
        assert_eq!(t.erasure("\"Order\""), "Order");
        assert_eq!(t.erasure("Order | None"), "Order");
        assert_eq!(t.erasure("None | a.Order"), "a.Order");
        assert_eq!(t.components("list[Order]"), ["Order"]);
        assert_eq!(t.components("Optional[Order]"), ["Order"]);
        assert_eq!(t.components("dict[str, Order]"), ["str", "Order"]);
        assert_eq!(t.components("Order | None"), ["Order", "None"]);
        assert_eq!(t.components("\"list['Order']\""), ["Order"]);
        assert_eq!(t.components("Callable[[A, B], C]"), ["A", "B", "C"]);
        assert_eq!(t.components("tuple[int, ...]"), ["int"]);
        assert_eq!(
            t.type_names("dict[str, list[\"shop.Order\"]]"),
            ["dict", "str", "list", "shop.Order"]
        );
        for base in [
            "int",
            "str",
            "None",
            "Any",
            "typing.Any",
            "list",
            "Dict",
            "object",
            "bytes",
        ] {
            assert!(t.is_base_type(base), "{base}");
        }
        for not_base in ["list[Order]", "Order", "Optional[Order]", "int | Order"] {
            assert!(!t.is_base_type(not_base), "{not_base}");
        }
        assert!(t.is_type_variable("T") && t.is_type_variable("T_co"));
        assert!(!t.is_type_variable("Order"));
        assert_eq!(t.non_null("Optional[list[Order]]"), "list[Order]");
        assert_eq!(
            t.non_null("t.Optional[t.List[\"Parameter\"]]"),
            "t.List[\"Parameter\"]"
        );
        assert_eq!(t.non_null("None | Order | Line"), "Order | Line");
        assert_eq!(t.non_null("\"Order | None\""), "Order");
        assert_eq!(
            t.non_null("dict[str, Order | None]"),
            "dict[str, Order | None]"
        );
        assert_eq!(t.non_null("None"), "None");
        assert_eq!(t.normal_form(" \"Context\" "), "Context");
        assert_eq!(
            t.normal_form("t.Optional[t.List[\"Parameter\"]]"),
            "t.Optional[t.List[Parameter]]"
        );
        assert_eq!(
            t.normal_form("\"Optional['Context']\""),
            "Optional[Context]"
        );
        assert_eq!(t.normal_form("t.ClassVar[\"Style\"]"), "Style");
        assert_eq!(t.normal_form("Final[ClassVar[int]]"), "int");
        assert_eq!(t.normal_form("Annotated[list[int], \"meta\"]"), "list[int]");
        assert_eq!(t.normal_form("Literal['a', \"b\"]"), "Literal['a', \"b\"]");
        assert_eq!(
            t.normal_form("dict[\"Key\", Literal[\"x\"]]"),
            "dict[Key, Literal[\"x\"]]"
        );
        // What is no type is left as written: an unclosed quote, a bare qualifier.
        assert_eq!(t.normal_form("\"Order"), "\"Order");
        assert_eq!(t.normal_form("Final"), "Final");
        assert_eq!(t.normal_form("ClassVar[int"), "ClassVar[int");
    }
}
