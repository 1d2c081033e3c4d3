//! Typed-hole context (ChatLSP): expected types, relevant type definitions, relevant headers
//! and the error report, on small repositories written here and on the bundled sample.

use crate::common;
use keyhole::CandidateId;

use std::path::Path;

use keyhole::RepoIndex;
use keyhole::SourcedText;
use keyhole::TokenizerKind;
use keyhole::{Composer, testing::compose::DefaultReading};
use keyhole::{Hole, testing::hole, testing::hole::HoleColumn};
use keyhole::{
    testing::context::typed::MAX_HEADERS, testing::context::typed::TYPE_DEPTH,
    testing::context::typed::TypedHole, testing::context::typed::completion_errors,
};

/// A repository of `files` (path, text) in a temporary directory.
fn repo(files: &[(&str, &str)]) -> (tempfile::TempDir, RepoIndex) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let index = RepoIndex::open(dir.path(), None).expect("open");
    (dir, index)
}

/// The hole right after the first occurrence of `marker` in `path`.
fn hole_after(index: &RepoIndex, path: &str, marker: &str) -> Hole {
    let file = &index.files[index.file_id(path).expect("file")];
    let line = (0..file.line_count())
        .find(|&l| file.line_text(l).contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in {path}"));
    let text = file.line_text(line);
    let column = text[..text.find(marker).expect("marker") + marker.len()]
        .chars()
        .count();
    Hole::at(index, path, line + 1, column + 1).expect("hole")
}

fn expected(index: &RepoIndex, path: &str, marker: &str) -> Option<String> {
    let hole = hole_after(index, path, marker);
    TypedHole::new(index, &hole)
        .expected()
        .map(|e| e.text.clone())
}

const ORDER: &str = "package shop;

import java.util.List;

public class Order extends Entity {
    private Customer customer;
    private List<Line> lines;

    public Order(Customer customer) {
        this.customer = customer;
    }

    public Customer getCustomer() {
        return customer;
    }
}
";

const SERVICE: &str = "package shop;

import util.Format;

public class Service extends BaseService {
    private Order current;

    public Order find(long id) {
        Order order = lookup(id);
        return order;
    }

    void update(Customer c, int[] values) {
        this.current = current;
        process(current, c);
        Order made = new Order(c);
        audit(current);
        String text = Format.describe(current);
        int size = text.length() + made.hashCode();
        boolean empty = !text.isEmpty() && values[size] > 0;
        var inferred = current;
    }

    private Order lookup(long id) {
        return null;
    }

    private void process(Order o, Customer c) {
    }
}
";

fn shop() -> (tempfile::TempDir, RepoIndex) {
    repo(&[
        ("src/shop/Order.java", ORDER),
        ("src/shop/Service.java", SERVICE),
        (
            "src/shop/Entity.java",
            "package shop;\n\npublic abstract class Entity {\n    protected Long id;\n}\n",
        ),
        (
            "src/shop/Customer.java",
            "package shop;\n\npublic class Customer {\n    private Order lastOrder;\n    public Order getLastOrder() { return lastOrder; }\n}\n",
        ),
        (
            "src/shop/Line.java",
            "package shop;\n\npublic class Line {\n    Product product;\n}\n",
        ),
        (
            "src/shop/Product.java",
            "package shop;\n\npublic class Product {\n    Supplier supplier;\n}\n",
        ),
        (
            "src/shop/Supplier.java",
            "package shop;\n\npublic class Supplier {\n}\n",
        ),
        (
            "src/shop/BaseService.java",
            "package shop;\n\npublic class BaseService {\n    protected void audit(Order order) {}\n}\n",
        ),
        (
            "src/util/Format.java",
            "package util;\n\nimport shop.Order;\n\npublic final class Format {\n    public static String describe(Order order) { return \"\"; }\n}\n",
        ),
    ])
}

const SVC: &str = "src/shop/Service.java";

#[test]
fn expected_type_of_declarations_assignments_and_returns() {
    let (_dir, index) = shop();
    assert_eq!(
        expected(&index, SVC, "Order order = ").as_deref(),
        Some("Order")
    );
    // Mid-identifier: the hole completes the initializer all the same.
    assert_eq!(
        expected(&index, SVC, "Order order = look").as_deref(),
        Some("Order")
    );
    assert_eq!(expected(&index, SVC, "return ").as_deref(), Some("Order"));
    // Conditions and array indexes.
    assert_eq!(expected(&index, SVC, "= !").as_deref(), Some("boolean"));
    assert_eq!(expected(&index, SVC, "&& ").as_deref(), Some("boolean"));
    assert_eq!(expected(&index, SVC, "values[").as_deref(), Some("int"));
    // `this.x = ` resolves the field's declared type.
    assert_eq!(
        expected(&index, SVC, "this.current = ").as_deref(),
        Some("Order")
    );
}

#[test]
fn expected_type_of_call_arguments() {
    let (_dir, index) = shop();
    // A method of the current class, by name and argument position.
    assert_eq!(
        expected(&index, SVC, "process(current, ").as_deref(),
        Some("Customer")
    );
    assert_eq!(expected(&index, SVC, "process(").as_deref(), Some("Order"));
    // A method of the parent class.
    assert_eq!(expected(&index, SVC, "audit(").as_deref(), Some("Order"));
    // A static method of a class imported from another package.
    assert_eq!(
        expected(&index, SVC, "Format.describe(").as_deref(),
        Some("Order")
    );
    // A constructor of a class of the same package.
    assert_eq!(
        expected(&index, SVC, "new Order(").as_deref(),
        Some("Customer")
    );
}

#[test]
fn no_expected_type_no_candidates() {
    let (_dir, index) = shop();
    for marker in ["text.length() + ", "var inferred = ", "void update("] {
        let hole = hole_after(&index, SVC, marker);
        let typed = TypedHole::new(&index, &hole);
        assert_eq!(typed.expected(), None, "{marker}");
        for (_, context) in typed.contexts() {
            assert!(context.is_empty(), "{marker}: {}", context.text);
        }
    }
}

#[test]
fn relevant_types_follow_members_to_the_depth_limit_once_each() {
    let (_dir, index) = shop();
    let hole = hole_after(&index, SVC, "Order order = ");
    let typed = TypedHole::new(&index, &hole);
    let found: Vec<(String, usize)> = typed
        .relevant_types()
        .into_iter()
        .map(|(t, hop)| (index.files[t.file].stem().to_string(), hop))
        .collect();
    let hop = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, h)| *h);
    assert_eq!(hop("Order"), Some(0));
    // Supertype, field type and the type argument of a field type: one hop.
    assert_eq!(hop("Entity"), Some(1));
    assert_eq!(hop("Customer"), Some(1));
    assert_eq!(hop("Line"), Some(1));
    assert_eq!(hop("Product"), Some(2));
    // Three hops away: past the limit.
    assert_eq!(TYPE_DEPTH, 2);
    assert_eq!(hop("Supplier"), None);
    // Customer mentions Order again: the cycle ends, every type is listed once.
    let mut names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), found.len(), "{found:?}");

    let text = typed.contexts()[0].1.text.clone();
    assert!(
        text.starts_with("// Expected type at the hole: Order\n"),
        "{text}"
    );
    assert!(text.contains("public class Order extends Entity {\n    private Customer customer;\n    private List<Line> lines;\n    public Order(Customer customer);\n    public Customer getCustomer();\n}\n"), "{text}");
    // Bodies are left out.
    assert!(!text.contains("return customer"), "{text}");
}

#[test]
fn headers_match_the_type_then_related_types_in_locality_order() {
    let (_dir, index) = shop();
    let hole = hole_after(&index, SVC, "audit(");
    let typed = TypedHole::new(&index, &hole);
    let headers = typed.headers();
    let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
    // Locals nearest first, then the class's fields and methods in order, inherited ones;
    // the parameter of Customer type only leads to an Order through a member, so it is last.
    assert_eq!(
        names,
        ["made", "current", "find", "lookup", "c"],
        "{headers:?}"
    );
    assert!(headers[..4].iter().all(|h| h.score == 1.0));
    assert!(headers[4].score > 0.0 && headers[4].score < 1.0);
    let text = typed.contexts()[1].1.text.clone();
    assert_eq!(
        text,
        "// Consider using these variables relevant to the expected type:\nOrder made;\nprivate Order current;\npublic Order find(long id);\nprivate Order lookup(long id);\nCustomer c;\n"
    );
}

#[test]
fn headers_are_cut_to_ten() {
    let methods: String = (0..14)
        .map(|i| format!("    Order make{i}() {{ return null; }}\n"))
        .collect();
    let service = format!(
        "package shop;\n\npublic class Many {{\n{methods}    void use(Customer c) {{\n        Order o = \n    }}\n}}\n"
    );
    let (_dir, index) = repo(&[
        (
            "src/shop/Order.java",
            "package shop;\npublic class Order {}\n",
        ),
        (
            "src/shop/Customer.java",
            "package shop;\npublic class Customer { Order last; }\n",
        ),
        ("src/shop/Many.java", &service),
    ]);
    let hole = hole_after(&index, "src/shop/Many.java", "Order o = ");
    let headers = TypedHole::new(&index, &hole).headers();
    assert_eq!(headers.len(), MAX_HEADERS);
    let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names[0], "make0");
    assert_eq!(names[9], "make9");
    // The related parameter scores less than every direct match, so the cut drops it.
    assert!(!names.contains(&"c"));
}

#[test]
fn the_rest_of_the_hole_line_never_reaches_the_context() {
    let (_dir, index) = shop();
    // A declaration after the hole on the hole's line is part of the target: the field `b`
    // would be both a definition member and a header if the line were read whole.
    let (_counter_dir, counter) = repo(&[(
        "Counter.java",
        "public class Counter {\n    Counter next;\n    Counter a = null; Counter b = null;\n}\n",
    )]);
    let hole = hole_after(&counter, "Counter.java", "Counter a = ");
    let typed = TypedHole::new(&counter, &hole);
    assert_eq!(typed.expected().map(|e| e.text.as_str()), Some("Counter"));
    assert_no_leak(&counter, &hole);
    let names: Vec<String> = typed.headers().into_iter().map(|h| h.name).collect();
    assert_eq!(names, ["next"]);
    for hole in hole::every_line(&index, 3, 7) {
        assert_no_leak(&index, &hole);
    }
}

/// Both contexts of `hole` have true provenance, take nothing from the rest of the hole's
/// line, and compose into valid prompts.
fn assert_no_leak(index: &RepoIndex, hole: &Hole) {
    let tok = TokenizerKind::Code.tokenizer();
    let file = &index.files[hole.file];
    let line_end = file.line_start(hole.line + 1);
    let rest = &file.text[hole.offset..line_end];
    for (id, context) in TypedHole::new(index, hole).contexts() {
        assert_provenance(index, &context);
        for origin in context.pieces.iter().filter_map(|p| p.origin) {
            let span = origin.span.range();
            let leaks = origin.file == hole.file && span.end > hole.offset && span.start < line_end;
            assert!(
                !leaks || rest.trim().is_empty(),
                "{id} at {}: {:?}",
                hole.display(index),
                &file.text[span]
            );
        }
        assert!(
            rest.trim().len() < 12 || !context.text.contains(rest.trim()),
            "{id} at {}",
            hole.display(index)
        );
        let prompt = Composer::new(index, hole, tok, 512, DefaultReading::AsWritten)
            .compose_context(id, &context, 0.5, keyhole::Keep::Start);
        prompt.validate(index, tok).expect("valid prompt");
    }
}

fn assert_provenance(index: &RepoIndex, text: &SourcedText) {
    for piece in &text.pieces {
        if let Some(origin) = piece.origin {
            assert_eq!(
                &index.files[origin.file].text[origin.span.range()],
                &text.text[piece.range.clone()]
            );
        }
    }
}

#[test]
fn error_report_names_errors_inside_the_completion_only() {
    // The file is broken elsewhere too (the field line): that error is not the completion's.
    let text =
        "class A {\n    int broken = ;\n    int f(int x) {\n        return x + 1;\n    }\n}\n";
    let offset = text.find("x + 1;").expect("hole");
    let target = "x + 1;".len();
    let path = "A.java";
    assert_eq!(completion_errors(path, text, offset, target, "x * 2;"), []);
    let errors = completion_errors(path, text, offset, target, "x * 2));");
    assert!(!errors.is_empty());
    assert!(
        errors.iter().all(|e| e.line == 4 && e.column >= 16),
        "{errors:?}"
    );
    assert!(errors[0].message.contains(')'), "{errors:?}");
    let missing = completion_errors(path, text, offset, target, "f(x;");
    assert!(!missing.is_empty(), "{missing:?}");
    // Files of unknown languages have no syntax to check.
    assert_eq!(completion_errors("a.txt", text, offset, target, ")))"), []);
}

#[test]
fn broken_files_never_panic() {
    let (_dir, index) = repo(&[
        (
            "Broken.java",
            "class A extends { void f( { int x = ; return new (\n\"unterminated\n/* open comment\n",
        ),
        (
            "Weird.java",
            "\u{0}{{{{(((( class class class Ω x = 'ab\n\tfoo(bar(, \"\"\" text\n",
        ),
        ("Empty.java", ""),
        ("Deep.java", &"class A { ".repeat(300)),
    ]);
    for hole in hole::every_line(&index, 8, 3) {
        let typed = TypedHole::new(&index, &hole);
        for (_, context) in typed.contexts() {
            assert_provenance(&index, &context);
        }
        let _ = keyhole::testing::context::typed::hole_completion_errors(&index, &hole, "x) {{ \"");
    }
}

#[test]
fn sample_repo_hole_gets_types_and_headers() {
    let hole = common::hole("service/OrderService.java:39:29");
    let typed = TypedHole::new(&common::SAMPLE, &hole);
    let [(types_id, types), (headers_id, headers)] = typed.contexts();
    assert_eq!(
        (types_id, headers_id),
        (CandidateId::TYPED_TYPES, CandidateId::TYPED_HEADERS)
    );
    assert!(
        types
            .text
            .starts_with("// Expected type at the hole: Customer\n// Relevant type definitions:\npublic class Customer extends Entity {\n"),
        "{}",
        types.text
    );
    let files: Vec<&str> = types
        .files()
        .into_iter()
        .map(|f| common::SAMPLE.files[f].stem())
        .collect();
    assert_eq!(&files[..2], ["Customer", "Entity"]);
    assert!(
        headers
            .text
            .contains("private Customer loadCustomer(Long customerId);"),
        "{}",
        headers.text
    );
    assert_eq!(CandidateId::TYPED_TYPES.label(), "typed-hole types");
}

/// How often each candidate applies on a real repository (run with `--ignored`; set
/// KEYHOLE_TYPED_REPO to choose it, default /work/corpus/commons-io).
#[test]
#[ignore = "a measurement on a real repository (KEYHOLE_TYPED_REPO), not a check"]
fn applicability_on_a_real_repository() {
    let root = std::env::var("KEYHOLE_TYPED_REPO").unwrap_or("/work/corpus/commons-io".into());
    let index = RepoIndex::open(Path::new(&root), None).expect("open");
    let holes = hole::sample_holes(&index, Some(3000), 9, HoleColumn::TrimmedMiddle);
    let (mut types, mut headers, mut definitions) = (0, 0, 0);
    for hole in &holes {
        let typed = TypedHole::new(&index, hole);
        let [(_, t), (_, h)] = typed.contexts();
        types += usize::from(!t.is_empty());
        headers += usize::from(!h.is_empty());
        definitions += usize::from(!typed.relevant_types().is_empty());
        assert_provenance(&index, &t);
        assert_provenance(&index, &h);
    }
    let pct = |n: usize| 100.0 * n as f64 / holes.len().max(1) as f64;
    println!(
        "{root}: {} holes; typed-hole types applicable {:.1}% (with repository definitions {:.1}%), headers {:.1}%",
        holes.len(),
        pct(types),
        pct(definitions),
        pct(headers)
    );
}

// ----- Headers of Python and TypeScript modules ------------------------------------------------

const PY_TYPES: &str = r#"class ParamType:
    name: str


class StringType(ParamType):
    pass


def make_type(name: str) -> ParamType:
    return StringType()


def describe(kind: ParamType) -> str:
    return kind.name


STRING = StringType()
LIMIT: int = 3
"#;

const PY_CORE: &str = r#"import typing as t

from .types import STRING, make_type, ParamType


class Parameter:
    name: str


class BaseCommand:
    def get_params(self) -> t.List["Parameter"]:
        return []

    def get_names(self) -> t.List[str]:
        return []


class Command(BaseCommand):
    def __init__(self, params: t.Optional[t.List["Parameter"]] = None) -> None:
        self.params: t.List["Parameter"] = params or []

    def get_params(self) -> t.List["Parameter"]:
        return self.params


def default_type(flag: bool) -> ParamType:
    return STRING
"#;

/// The headers' text of the hole at the first `▮` of `marked`, a line of `path` with a `▮`
/// where the hole is.
fn headers_text(index: &RepoIndex, path: &str, marked: &str) -> String {
    let (before, after) = marked.split_once('▮').expect("a ▮ in the line");
    let line = format!("{before}{after}");
    let file = &index.files[index.file_id(path).expect("file")];
    let number = (0..file.line_count())
        .find(|&l| file.line_text(l).trim_end() == line)
        .unwrap_or_else(|| panic!("{line} not in {path}"));
    let hole = Hole::at(index, path, number + 1, before.chars().count() + 1).expect("hole");
    let text = TypedHole::new(index, &hole).contexts()[1].1.clone();
    assert_provenance(index, &text);
    text.text
}

#[test]
fn python_headers_hold_module_constants_imported_bindings_and_parameters() {
    let (_dir, index) = repo(&[
        ("pkg/__init__.py", ""),
        ("pkg/types.py", PY_TYPES),
        ("pkg/core.py", PY_CORE),
    ]);
    // An imported function and constant whose type is the declared return type, in the
    // order their module declares them.
    let imported = headers_text(&index, "pkg/core.py", "    return ▮STRING");
    assert_eq!(
        imported,
        "# Consider using these variables relevant to the expected type:\n\
         def make_type(name: str) -> ParamType: ...  # from pkg/types.py\n\
         STRING: StringType  # from pkg/types.py\n"
    );
    // The module's own constant, assigned after the function the hole is in.
    let own = headers_text(&index, "pkg/types.py", "    return ▮StringType()");
    assert!(own.contains("STRING: StringType\n"), "{own}");
    assert!(!own.contains("LIMIT"), "{own}");
    // The parameter at `self.params: t.List["Parameter"] = ▮params or []`, the nearest
    // `get_params` once (not its parent's too), and no list of another element type.
    let params = headers_text(
        &index,
        "pkg/core.py",
        "        self.params: t.List[\"Parameter\"] = ▮params or []",
    );
    assert_eq!(
        params,
        "# Consider using these variables relevant to the expected type:\n\
         params: t.Optional[t.List[\"Parameter\"]]\n\
         def get_params(self) -> t.List[\"Parameter\"]: ...\n"
    );
}

#[test]
fn typescript_headers_hold_imported_constants_and_functions() {
    let (_dir, index) = repo(&[
        (
            "model.ts",
            "export interface Model {\n  grid: string[];\n}\n\
             export const initial: Model = { grid: [] };\n\
             export const size: number = 3;\n\
             export function reset(m: Model): Model {\n  return m;\n}\n",
        ),
        (
            "main.ts",
            "import { Model, initial, reset, size } from './model';\n\
             \n\
             export function update(flag: boolean): Model {\n  return initial;\n}\n\
             \n\
             export const fallback = reset(initial);\n",
        ),
    ]);
    let text = headers_text(&index, "main.ts", "  return ▮initial;");
    assert_eq!(
        text,
        "// Consider using these variables relevant to the expected type:\n\
         const initial: Model;  // from model.ts\n\
         function reset(m: Model): Model;  // from model.ts\n"
    );
}

#[test]
fn an_argument_of_an_imported_function_expects_its_parameters_type() {
    let (_dir, index) = repo(&[
        (
            "helpers/server.ts",
            "export interface Context {\n  title: string;\n}\n\
             export async function createServer(t: Context, port: number): Promise<void> {}\n",
        ),
        (
            "test/main.ts",
            "import { createServer } from '../helpers/server';\n\
             \n\
             export async function run(t: any) {\n  await createServer(t, 8080);\n}\n",
        ),
    ]);
    assert_eq!(
        expected(&index, "test/main.ts", "createServer(").as_deref(),
        Some("Context")
    );
    assert_eq!(
        expected(&index, "test/main.ts", "createServer(t, ").as_deref(),
        Some("number")
    );
}

#[test]
fn a_typescript_call_takes_the_first_overload_that_accepts_its_arguments() {
    // As ky's test helper declares it: the overload with the context comes first.
    let (_dir, index) = repo(&[
        (
            "helpers/server.ts",
            "export interface Context {\n  title: string;\n}\n\
             export interface ServerOptions {\n  port: number;\n}\n\
             export async function createServer(t: Context, options?: ServerOptions): Promise<void>;\n\
             export async function createServer(options?: ServerOptions): Promise<void>;\n\
             export async function createServer(a?: Context | ServerOptions, b?: ServerOptions): Promise<void> {}\n",
        ),
        (
            "test/main.ts",
            "import { createServer } from '../helpers/server';\n\
             \n\
             export async function run(t: any) {\n  await createServer(t);\n}\n",
        ),
    ]);
    // One argument seen fits both; TypeScript takes the first declared, not the one with
    // exactly one parameter.
    assert_eq!(
        expected(&index, "test/main.ts", "createServer(").as_deref(),
        Some("Context")
    );
}

#[test]
fn a_typescript_generic_type_written_bare_is_stated_with_its_default_type_arguments() {
    // As zod's `handlePropertyResult(result: ParsePayload, ...)`: TypeScript's checker
    // expects `ParsePayload<unknown>` there.
    let (_dir, index) = repo(&[
        (
            "core/payload.ts",
            "export interface ParsePayload<T = unknown> {\n  value: T;\n}\n",
        ),
        (
            "core/run.ts",
            "import { ParsePayload } from './payload';\n\n\
             export function handle(result: ParsePayload, key: string): void {}\n\n\
             export function run(p: ParsePayload<string>) {\n  handle(p, 'k');\n}\n",
        ),
    ]);
    assert_eq!(
        expected(&index, "core/run.ts", "  handle(").as_deref(),
        Some("ParsePayload<unknown>")
    );
    assert_eq!(
        expected(&index, "core/run.ts", "  handle(p, ").as_deref(),
        Some("string")
    );
}

#[test]
fn python_arguments_of_other_files_functions_expect_their_parameters_type() {
    let (_dir, index) = repo(&[
        ("pkg/__init__.py", "from .utils import echo\n"),
        (
            "pkg/utils.py",
            "import typing as t\n\n\n\
             def echo(message: t.Optional[t.Any] = None, *, color: t.Optional[bool] = None) -> None:\n    pass\n\n\n\
             def short_help(help: str, max_length: int = 45) -> str:\n    return help\n",
        ),
        (
            "pkg/align.py",
            "import typing as t\n\n\nclass Align:\n    \
             def __init__(self, text: str, vertical: t.Optional[str] = None) -> None:\n        \
             self.text = text\n\n    \
             @classmethod\n    def center(cls, text: str, height: t.Optional[int] = None) -> \"Align\":\n        \
             return cls(text)\n",
        ),
        (
            "tests/test_show.py",
            "import pkg\nimport pkg.utils\nfrom pkg.align import Align\nfrom pkg.utils import echo\n\n\n\
             def test_show(text: str) -> None:\n    echo(text, color=True)\n    echo(text)\n    \
             pkg.echo(text)\n    pkg.utils.short_help(text, 10)\n    Align.center(text, height=3)\n    \
             Align(text, vertical=\"top\")\n    aligned = Align(text)\n    aligned.center(text, height=1)\n",
        ),
    ]);
    let at = |marker| expected(&index, "tests/test_show.py", marker);
    // A keyword argument of a function imported by name.
    assert_eq!(at("echo(text, color=").as_deref(), Some("t.Optional[bool]"));
    // A position of a function imported by name, and of functions reached through modules
    // the file imports (a package's re-export, a submodule).
    assert_eq!(at("    echo(").as_deref(), Some("t.Optional[t.Any]"));
    assert_eq!(at("pkg.echo(").as_deref(), Some("t.Optional[t.Any]"));
    assert_eq!(at("short_help(text, ").as_deref(), Some("int"));
    // Keywords of a class's method, of its constructor, of a method of a value.
    assert_eq!(
        at("Align.center(text, height=").as_deref(),
        Some("t.Optional[int]")
    );
    assert_eq!(
        at("Align(text, vertical=").as_deref(),
        Some("t.Optional[str]")
    );
    assert_eq!(
        at("aligned.center(text, height=").as_deref(),
        Some("t.Optional[int]")
    );
}

/// A module as click and rich write them: forward references in quotes (`"Context"`,
/// `t.List["Segment"]`) and class constants as `t.ClassVar[...]`.
const PY_CONTEXT: &str = r#"import typing as t

from .style import Style
from .segment import Segment


class Context:
    max_width: t.ClassVar[int] = 80
    default_style: t.ClassVar["Style"] = Style()
    choices: t.ClassVar[t.List[t.Literal["auto", 'never']]] = []

    def __init__(self, parent: t.Optional["Context"] = None) -> None:
        self.parent = parent

    def find_root(self) -> "Context":
        node: "Context" = self
        return node

    def style(self) -> Style:
        return self.default_style

    def render(self, parts: t.List["Segment"]) -> None:
        segments: t.List["Segment"] = parts
"#;

#[test]
fn python_expected_types_read_forward_references_and_class_variables_as_pyright_does() {
    let (_dir, index) = repo(&[
        ("pkg/__init__.py", ""),
        ("pkg/style.py", "class Style:\n    color: str\n"),
        ("pkg/segment.py", "class Segment:\n    text: str\n"),
        ("pkg/context.py", PY_CONTEXT),
    ]);
    let at = |marker| expected(&index, "pkg/context.py", marker);
    // The type a value must have, without the quotes and the `ClassVar` that only say how
    // the declaration is read; a `Literal`'s strings are values and keep theirs.
    assert_eq!(at("node: \"Context\" = ").as_deref(), Some("Context"));
    assert_eq!(at("max_width: t.ClassVar[int] = ").as_deref(), Some("int"));
    assert_eq!(
        at("choices: t.ClassVar[t.List[t.Literal[\"auto\", 'never']]] = ").as_deref(),
        Some("t.List[t.Literal[\"auto\", 'never']]")
    );
    assert_eq!(
        at("segments: t.List[\"Segment\"] = ").as_deref(),
        Some("t.List[Segment]")
    );
    // The headers compare that type with the values' types as written: an attribute of a
    // quoted parameter's type (`find_root`, being written, is none), a class variable (and,
    // after it, what gives a `Style` through a method: a `"Context"`).
    assert_eq!(
        headers_text(
            &index,
            "pkg/context.py",
            "        node: \"Context\" = ▮self"
        ),
        "# Consider using these variables relevant to the expected type:\n\
         parent: t.Optional[\"Context\"]\n"
    );
    assert_eq!(
        headers_text(
            &index,
            "pkg/context.py",
            "        return ▮self.default_style"
        ),
        "# Consider using these variables relevant to the expected type:\n\
         default_style: t.ClassVar[\"Style\"]\n\
         def find_root(self) -> \"Context\": ...\n"
    );
    assert_eq!(
        headers_text(
            &index,
            "pkg/context.py",
            "        segments: t.List[\"Segment\"] = ▮parts"
        ),
        "# Consider using these variables relevant to the expected type:\n\
         parts: t.List[\"Segment\"]\n"
    );
}
