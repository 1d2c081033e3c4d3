//! Python as Python reads it, on package trees laid out as real projects lay them out: absolute
//! imports found only under the repository's import roots (never beside the importing module,
//! so the standard library is not a package's own `json.py`), a package's re-exports followed to
//! the module declaring what a file uses, and the holes a person would choose (none inside a
//! docstring in the paper's sampling, an opening in code, similar names without test affixes).

use serde_json::Value;

use crate::common::{imported, keyhole, ok, proposals_json, ranked, set, write_tree};

#[test]
fn a_package_module_named_like_the_standard_library_is_not_what_import_json_means() {
    // A flat layout: the package at the repository root, with modules named as the standard
    // library's `abc`, `json` and `types`.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("pyproject.toml", "[project]\nname = \"pkg\"\n"),
            ("pkg/__init__.py", "\"\"\"The package.\"\"\"\n"),
            ("pkg/abc.py", "class Base:\n    pass\n"),
            ("pkg/json.py", "def dumps(data):\n    return str(data)\n"),
            ("pkg/types.py", "Number = int\n"),
            (
                "pkg/helpers.py",
                "def slug(text):\n    return text.lower()\n",
            ),
            (
                "pkg/service.py",
                "from abc import ABC\nimport json\nimport types\n\nfrom .helpers import slug\n\n\nclass Service(ABC):\n    def dump(self, data):\n        return json.dumps(slug(data)), types.SimpleNamespace()\n",
            ),
        ],
    );
    let files = imported(&repo, "pkg/service.py:10:16", dir.path());
    assert_eq!(files, set(&["pkg/helpers.py"]));
}

#[test]
fn src_layout_tests_reach_the_modules_declaring_what_they_use_through_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("pyproject.toml", "[project]\nname = \"shop\"\n"),
            (
                "src/shop/__init__.py",
                "\"\"\"The shop.\"\"\"\n\nfrom .core import Order\nfrom .pricing import *\n\n__all__ = [\"Order\", \"with_vat\"]\n",
            ),
            (
                "src/shop/core.py",
                "import json\n\n\nclass Order:\n    def dump(self):\n        return json.dumps({})\n",
            ),
            (
                "src/shop/json.py",
                "def dumps(data):\n    return str(data)\n",
            ),
            (
                "src/shop/pricing.py",
                "__all__ = [\"with_vat\"]\n\nVAT = 20\n\n\ndef with_vat(cents):\n    return cents * (100 + VAT) // 100\n",
            ),
            (
                "src/shop/io/__init__.py",
                "from shop.io.files import read_orders\n",
            ),
            (
                "src/shop/io/files.py",
                "def read_orders(path):\n    return []\n",
            ),
            (
                "tests/test_shop.py",
                "import shop\nimport shop.io as sio\n\n\ndef test_order():\n    order = shop.Order()\n    assert shop.with_vat(100) == 120\n    assert sio.read_orders(\"x\") == []\n    assert order.dump()\n",
            ),
        ],
    );
    // `import shop` then `shop.Order`, `shop.with_vat`; `import shop.io as sio` then
    // `sio.read_orders`: each reaches the module that declares the name.
    let files = imported(&repo, "tests/test_shop.py:9:12", dir.path());
    assert_eq!(
        files,
        set(&[
            "src/shop/__init__.py",
            "src/shop/core.py",
            "src/shop/io/__init__.py",
            "src/shop/io/files.py",
            "src/shop/pricing.py",
        ])
    );
    // `import json` in the package is the standard library's.
    let files = imported(&repo, "src/shop/core.py:6:16", dir.path());
    assert!(files.is_empty(), "{files:?}");
}

#[test]
fn a_root_named_by_pyproject_or_setup_cfg_is_where_absolute_imports_are_found() {
    for (config, root) in [
        (
            (
                "pyproject.toml",
                "[tool.setuptools.packages.find]\nwhere = [\"lib\"]\n",
            ),
            "lib",
        ),
        (
            (
                "setup.cfg",
                "[metadata]\nname = acme\n\n[options]\npackage_dir =\n    =source\npackages = find:\n",
            ),
            "source",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let at = |path: &str| format!("{root}/{path}");
        write_tree(
            &repo,
            &[
                config,
                (&at("acme/__init__.py"), ""),
                (
                    &at("acme/json.py"),
                    "def dumps(data):\n    return str(data)\n",
                ),
                (&at("acme/util.py"), "def helper():\n    return 1\n"),
                (
                    &at("acme/engine.py"),
                    "import json\nfrom acme.util import helper\n\n\ndef run():\n    return json.dumps(helper())\n",
                ),
            ],
        );
        let files = imported(&repo, &at("acme/engine.py:6:12"), dir.path());
        assert_eq!(files, set(&[&at("acme/util.py")]), "{}", config.0);
    }
}

#[test]
fn the_paper_profile_samples_no_hole_in_a_docstring_and_the_code_profile_does() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[(
            "orders.py",
            "\"\"\"Orders.\n\nEvery order has a total.\n\"\"\"\n\n\ndef total(order):\n    \"\"\"The order's total,\n    in cents.\"\"\"\n    return order.cents  # cents\n",
        )],
    );
    let lines = |fidelity: &str| -> Vec<u64> {
        let args = [
            "holes",
            repo.to_str().unwrap(),
            "--fidelity",
            fidelity,
            "--json",
        ];
        let report: Value = serde_json::from_slice(&ok(keyhole(&args, dir.path())).stdout).unwrap();
        let holes = report["holes"].as_array().unwrap().iter();
        holes.map(|h| h["line"].as_u64().unwrap()).collect()
    };
    assert_eq!(lines("paper"), [7, 10]);
    // RLPG's code reads one line at a time: a docstring's lines are holes.
    assert_eq!(lines("code"), [1, 3, 4, 7, 8, 9, 10]);
}

#[test]
fn a_repository_opens_on_code_of_the_most_imported_module() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            (
                "src/pkg/__init__.py",
                "\"\"\"The package.\n\nIt re-exports its modules' names.\n\"\"\"\n\nfrom .core import (\n    Engine,\n    start,\n)\n",
            ),
            (
                "src/pkg/core.py",
                "\"\"\"The engine.\"\"\"\n\nimport os\n\n\nclass Engine:\n    \"\"\"Runs.\"\"\"\n\n    name = os.name\n\n\ndef start():\n    return Engine()\n",
            ),
            (
                "src/pkg/cli.py",
                "from pkg import start\n\n\ndef main():\n    start()\n",
            ),
            (
                "tests/test_core.py",
                "import pkg\n\n\ndef test_start():\n    assert pkg.start()\n",
            ),
            // Imports of the package alone: its `__init__.py` is the most imported file.
            ("src/pkg/plugins.py", "import pkg\n\nLOADED = []\n"),
            ("tests/conftest.py", "import pkg\n"),
        ],
    );
    // Without a terminal `keyhole REPO` prints what the UI would open on.
    let out = ok(keyhole(&[repo.to_str().unwrap()], dir.path()));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let hole = stdout
        .lines()
        .find_map(|l| l.strip_prefix("hole"))
        .expect("a hole line")
        .trim();
    assert_eq!(hole, "src/pkg/core.py:6:7", "{stdout}");
}

#[test]
fn similar_names_of_a_test_file_are_its_subject_not_every_other_test() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let test = "from rich.panel import Panel\n\n\ndef test_panel():\n    assert Panel()\n";
    write_tree(
        &repo,
        &[
            ("rich/__init__.py", ""),
            ("rich/panel.py", "class Panel:\n    pass\n"),
            ("rich/layout.py", "class Layout:\n    pass\n"),
            ("tests/test_panel.py", test),
            ("tests/test_layout.py", "def test_layout():\n    pass\n"),
            ("tests/test_console.py", "def test_console():\n    pass\n"),
            ("tests/panel_test.py", "def test_more():\n    pass\n"),
        ],
    );
    let report = proposals_json(&repo, "tests/test_panel.py:5:12", &[], dir.path());
    assert_eq!(
        ranked(&report, "similar_name"),
        set(&["rich/panel.py", "tests/panel_test.py"])
    );
}
