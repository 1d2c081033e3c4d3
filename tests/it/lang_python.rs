//! Python repositories through the CLI: files counted, proposals from imports, parents and
//! siblings of the right files and language, RLPG's holes, typed holes from annotations.

use std::path::Path;

use serde_json::Value;

use crate::common::{keyhole, ok};

/// A small mixed repository: a Python package under `src/` and one Java file beside its
/// services.
const FILES: &[(&str, &str)] = &[
    ("src/shop/__init__.py", ""),
    (
        "src/shop/models/__init__.py",
        "from .money import Money\nfrom .order import Order\n",
    ),
    (
        "src/shop/models/base.py",
        "class Entity:\n    def __init__(self, entity_id: int) -> None:\n        self.entity_id = entity_id\n\n    def describe(self) -> str:\n        return \"entity\"\n",
    ),
    (
        "src/shop/models/money.py",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Money:\n    cents: int\n    currency: str = \"EUR\"\n\n    def plus(self, other: \"Money\") -> \"Money\":\n        return Money(self.cents + other.cents)\n",
    ),
    (
        "src/shop/models/order.py",
        "from .base import Entity\nfrom .money import Money\n\n\nclass Order(Entity):\n    # The order's total, kept up to date.\n    total: Money\n\n    def add(self, amount: Money) -> None:\n        self.total = self.total.plus(amount)\n",
    ),
    (
        "src/shop/services/order_service.py",
        "from shop.models import Money, Order\n\nfrom . import pricing\n\n\nclass OrderService:\n    def due(self, order: Order) -> Money:\n        # Prices include VAT.\n        total: Money = order.total\n        return pricing.with_vat(total)\n",
    ),
    (
        "src/shop/services/pricing.py",
        "from shop.models.money import Money\n\nVAT = 20\n\n\ndef with_vat(amount: Money) -> Money:\n    return Money(amount.cents * (100 + VAT) // 100)\n",
    ),
    (
        "src/shop/services/Helper.java",
        "package shop.services;\n\npublic class Helper {\n    int help() { return 1; }\n}\n",
    ),
];

fn write_repo(root: &Path) {
    for (path, text) in FILES {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn json(args: &[&str], scratch: &Path) -> Value {
    let out = ok(keyhole(args, scratch));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The applicable proposals of `source` at `hole`, as (context type, files).
fn proposals_of(report: &Value, source: &str) -> Vec<(String, Vec<String>)> {
    report["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"] == source && p["applicable"] == true)
        .map(|p| {
            let files = p["files"].as_array().unwrap();
            let files = files.iter().map(|f| f.as_str().unwrap().to_string());
            (
                p["context_type"].as_str().unwrap().to_string(),
                files.collect(),
            )
        })
        .collect()
}

#[test]
fn index_counts_python_and_java_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_repo(&repo);
    let report = json(&["index", repo.to_str().unwrap(), "--json"], dir.path());
    assert_eq!(report["files"], FILES.len());
    assert_eq!(report["syntax_errors"], 0);
}

#[test]
fn proposals_come_from_imports_parents_and_siblings_of_the_same_language() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_repo(&repo);
    let repo = repo.to_str().unwrap();
    // `total: Money = order.total`, the hole after `= `.
    let service = json(
        &[
            "proposals",
            repo,
            "src/shop/services/order_service.py:9:24",
            "--json",
        ],
        dir.path(),
    );
    let imports = proposals_of(&service, "import");
    let (_, identifiers) = imports.iter().find(|(t, _)| t == "I").expect("import I");
    // `from shop.models import Money, Order` reaches the package and the modules its
    // `__init__.py` re-exports them from; `from . import pricing` the sibling module.
    for file in [
        "src/shop/models/__init__.py",
        "src/shop/models/money.py",
        "src/shop/models/order.py",
        "src/shop/services/pricing.py",
    ] {
        assert!(
            identifiers.contains(&file.to_string()),
            "{file}: {identifiers:?}"
        );
    }
    let siblings = proposals_of(&service, "sibling");
    assert!(!siblings.is_empty());
    for (_, files) in &siblings {
        assert_eq!(files, &["src/shop/services/pricing.py"], "no Java sibling");
    }
    let every_file = service["proposals"].as_array().unwrap().iter();
    for file in every_file.flat_map(|p| p["files"].as_array().unwrap()) {
        assert!(file.as_str().unwrap().ends_with(".py"), "{file}");
    }
    // `class Order(Entity)`: the parent class lives in another module.
    let order = json(
        &[
            "proposals",
            repo,
            "src/shop/models/order.py:10:20",
            "--json",
        ],
        dir.path(),
    );
    let parents = proposals_of(&order, "parent_class");
    let (_, files) = parents
        .iter()
        .find(|(t, _)| t == "MNB")
        .expect("parent MNB");
    assert_eq!(files, &["src/shop/models/base.py"]);
}

#[test]
fn holes_skip_comment_and_blank_lines() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_repo(&repo);
    let report = json(&["holes", repo.to_str().unwrap(), "--json"], dir.path());
    let holes = report["holes"].as_array().unwrap();
    let in_order: Vec<u64> = holes
        .iter()
        .filter(|h| h["file"] == "src/shop/models/order.py")
        .map(|h| h["line"].as_u64().unwrap())
        .collect();
    // Lines 3, 4 and 8 are blank, line 6 a comment.
    assert_eq!(in_order, [1, 2, 5, 7, 9, 10]);
    let comment = holes
        .iter()
        .any(|h| h["file"] == "src/shop/services/order_service.py" && h["line"] == 8);
    assert!(!comment, "the `# Prices include VAT.` line is no hole");
}

#[test]
fn typed_hole_candidates_take_the_type_from_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_repo(&repo);
    let repo = repo.to_str().unwrap();
    // `total: Money = ` expects a Money; Money's definition comes from money.py.
    let types = json(
        &[
            "prompt",
            repo,
            "src/shop/services/order_service.py:9:24",
            "--id",
            "71",
            "--json",
        ],
        dir.path(),
    );
    let text = types["text"].as_str().unwrap();
    assert!(
        text.contains("# Expected type at the hole: Money"),
        "{text}"
    );
    // Written as Python writes it: no braces, no `;`, the type after the name, a stub body.
    assert!(
        text.contains(
            "class Money:\n    cents: int\n    currency: str\n    \
             def plus(self, other: \"Money\") -> \"Money\": ...\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("Money {") && !text.contains("int cents;"),
        "{text}"
    );
    // `return ` in `-> Money`: the annotated local `total` is a Money in scope.
    let headers = json(
        &[
            "prompt",
            repo,
            "src/shop/services/order_service.py:10:16",
            "--id",
            "72",
            "--json",
        ],
        dir.path(),
    );
    let text = headers["text"].as_str().unwrap();
    assert!(text.contains("\ntotal: Money\n"), "{text}");
    assert!(!text.contains("Money total;"), "{text}");
}

#[test]
fn typed_hole_headers_offer_the_optional_parameter_a_hole_of_its_type_takes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let core = "import typing as t\n\n\nclass Parameter:\n    name: str\n\n\n\
                class Command:\n    def __init__(self, name: str, params: \
                t.Optional[t.List[\"Parameter\"]] = None) -> None:\n        \
                self.params: t.List[\"Parameter\"] = params or []\n";
    std::fs::create_dir_all(repo.join("pkg")).unwrap();
    std::fs::write(repo.join("pkg/core.py"), core).unwrap();
    // The hole after `self.params: t.List["Parameter"] = ` (click's core.py has this line).
    let headers = json(
        &[
            "prompt",
            repo.to_str().unwrap(),
            "pkg/core.py:10:44",
            "--id",
            "72",
            "--json",
        ],
        dir.path(),
    );
    let text = headers["text"].as_str().unwrap();
    assert!(
        text.contains("\nparams: t.Optional[t.List[\"Parameter\"]]\n"),
        "{text}"
    );
    assert!(!text.contains("\nname: str\n"), "{text}");
}
