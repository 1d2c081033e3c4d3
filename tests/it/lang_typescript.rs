//! TypeScript, TSX and JavaScript repositories through the CLI: indexing, RLPG's proposals
//! from ES imports (relative, barrel, and each package's tsconfig `paths` with what it
//! extends), parents and siblings, hole sampling and typed holes from annotations, in a
//! repository that also holds Java.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::common::{self, keyhole};

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// A small shop in TypeScript and JavaScript, with one Java file beside its service.
fn shop(root: &Path) {
    write(
        root,
        "tsconfig.json",
        r#"{
  // comments and trailing commas, as tsconfig allows
  "compilerOptions": {
    "baseUrl": ".",
    "paths": { "@lib/*": ["src/lib/*"], },
  },
}
"#,
    );
    write(
        root,
        "src/model/entity.ts",
        "export abstract class Entity {\n  constructor(public readonly id: string) {}\n}\n",
    );
    write(
        root,
        "src/model/money.ts",
        "export class Money {\n  constructor(readonly cents: number) {}\n\n  \
         plus(other: Money): Money {\n    return new Money(this.cents + other.cents);\n  }\n}\n",
    );
    write(
        root,
        "src/model/order.ts",
        "import { Entity } from './entity';\nimport { Money } from './money';\n\n\
         export class Order extends Entity {\n  total: Money = new Money(0);\n\n  \
         add(price: Money): void {\n    this.total = this.total.plus(price);\n  }\n}\n",
    );
    write(
        root,
        "src/model/index.ts",
        "export * from './entity';\nexport * from './money';\nexport * from './order';\n",
    );
    write(
        root,
        "src/lib/log.js",
        "'use strict';\nfunction log(message) {\n  console.log(message);\n}\nmodule.exports = { log };\n",
    );
    write(
        root,
        "src/service/order-service.ts",
        "import { Money, Order } from '../model';\nimport { log } from '@lib/log';\n\
         import React from 'react';\n\n\
         // Places orders.\nexport class OrderService {\n  \
         place(order: Order, price: Money): Money {\n    order.add(price);\n    \
         log(`placed ${order.id}`);\n    const paid: Money = order.total;\n    \
         return paid;\n  }\n}\n",
    );
    write(
        root,
        "src/service/order-report.ts",
        "import type { Order } from '../model/order';\n\nexport function report(orders: Order[]): string {\n  \
         return orders.map((o) => o.id).join(', ');\n}\n",
    );
    write(
        root,
        "src/service/OrderHelper.java",
        "package service;\n\nclass OrderHelper {\n    int total = 0;\n}\n",
    );
}

fn run_json(args: &[&str], scratch: &Path) -> Value {
    let output = common::ok(keyhole(args, scratch));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn proposal(proposals: &Value, id: u64) -> &Value {
    proposals["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .unwrap()
}

fn files(proposal: &Value) -> Vec<&str> {
    let files = proposal["files"].as_array().unwrap();
    files.iter().map(|f| f.as_str().unwrap()).collect()
}

#[test]
fn index_counts_typescript_javascript_and_java_files() {
    let (scratch, _) = common::scratch_dirs();
    let repo = tempfile::tempdir().unwrap();
    shop(repo.path());
    let output = common::ok(keyhole(
        &["index", repo.path().to_str().unwrap()],
        scratch.path(),
    ));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("files       8 "), "{text}");
    assert!(text.contains("0 syntax errors"), "{text}");
}

#[test]
fn proposals_come_from_imports_through_barrels_and_paths_and_from_siblings_of_the_language() {
    let (scratch, _) = common::scratch_dirs();
    let repo = tempfile::tempdir().unwrap();
    shop(repo.path());
    let root = repo.path().to_str().unwrap();
    // The hole in `order.add(price);`.
    let hole = "src/service/order-service.ts:8:5";
    let proposals = run_json(&["proposals", root, hole, "--json"], scratch.path());
    // import, identifiers: the barrel, the files it re-exports the used names from, and the
    // JavaScript module reached through tsconfig's `paths`; never `react`.
    let import = proposal(&proposals, 16);
    assert_eq!(import["applicable"], true);
    let imported = files(import);
    for file in ["src/model/order.ts", "src/model/money.ts", "src/lib/log.js"] {
        assert!(imported.contains(&file), "{file} not in {imported:?}");
    }
    assert!(!imported.contains(&"src/model/entity.ts"), "{imported:?}");
    // sibling, identifiers: the other TypeScript file of the directory, not the Java one.
    let sibling = proposal(&proposals, 22);
    assert_eq!(files(sibling), ["src/service/order-report.ts"]);
    // similar name `order`: TypeScript files only.
    let similar = files(proposal(&proposals, 28));
    assert!(similar.contains(&"src/model/order.ts"), "{similar:?}");
    assert!(similar.iter().all(|f| !f.ends_with(".java")), "{similar:?}");

    // A hole in a class with a parent: the parent class file.
    let proposals = run_json(
        &["proposals", root, "src/model/order.ts:8:5", "--json"],
        scratch.path(),
    );
    let parent = proposal(&proposals, 10);
    assert_eq!(parent["applicable"], true);
    assert_eq!(files(parent), ["src/model/entity.ts"]);
}

#[test]
fn holes_skip_comment_lines_as_rlpg_does() {
    let (scratch, _) = common::scratch_dirs();
    let repo = tempfile::tempdir().unwrap();
    shop(repo.path());
    let holes = run_json(
        &["holes", repo.path().to_str().unwrap(), "--json"],
        scratch.path(),
    );
    let lines: Vec<u64> = holes["holes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["file"] == "src/service/order-service.ts")
        .map(|h| h["line"].as_u64().unwrap())
        .collect();
    // 13 lines: line 4 is blank, line 5 the comment.
    assert_eq!(lines, [1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13]);
}

#[test]
fn typed_hole_candidates_take_the_expected_type_from_annotations() {
    let (scratch, _) = common::scratch_dirs();
    let repo = tempfile::tempdir().unwrap();
    shop(repo.path());
    let root = repo.path().to_str().unwrap();
    // `const paid: Money = |order.total;`
    let output = common::ok(keyhole(
        &[
            "prompt",
            root,
            "src/service/order-service.ts:10:25",
            "--id",
            "71",
        ],
        scratch.path(),
    ));
    let prompt = String::from_utf8_lossy(&output.stdout);
    assert!(
        prompt.contains("// Expected type at the hole: Money\n"),
        "{prompt}"
    );
    assert!(prompt.contains("class Money {"), "{prompt}");
    assert!(prompt.contains("plus(other: Money): Money;"), "{prompt}");
    // Candidate 72: the values in scope of that type, parameters first.
    let output = common::ok(keyhole(
        &[
            "prompt",
            root,
            "src/service/order-service.ts:10:25",
            "--id",
            "72",
        ],
        scratch.path(),
    ));
    let prompt = String::from_utf8_lossy(&output.stdout);
    // A local as TypeScript declares one, the name before its type.
    assert!(prompt.contains("\nprice: Money;\n"), "{prompt}");
    // An argument of a method with an annotated parameter, on a typed parameter.
    let output = common::ok(keyhole(
        &[
            "prompt",
            root,
            "src/service/order-service.ts:8:15",
            "--id",
            "71",
        ],
        scratch.path(),
    ));
    let prompt = String::from_utf8_lossy(&output.stdout);
    assert!(
        prompt.contains("// Expected type at the hole: Money\n"),
        "{prompt}"
    );
}

/// A monorepo: each package's `tsconfig.json` extends a base at the root whose `paths` reach
/// another package; one package's tsconfig is malformed.
fn monorepo(root: &Path) {
    write(
        root,
        "tsconfig.base.json",
        r#"{ "compilerOptions": { "baseUrl": ".", "paths": { "@shared/*": ["packages/shared/src/*"] } } }"#,
    );
    write(
        root,
        "packages/app/tsconfig.json",
        "{ \"extends\": \"../../tsconfig.base.json\" }\n",
    );
    write(
        root,
        "packages/shared/src/log.ts",
        "export function log(message: string): void {\n  console.log(message);\n}\n",
    );
    write(
        root,
        "packages/app/src/main.ts",
        "import { log } from '@shared/log';\n\nexport function main(): void {\n  log('started');\n}\n",
    );
    write(root, "packages/broken/tsconfig.json", "{ \"extends\": ,\n");
    write(
        root,
        "packages/broken/src/use.ts",
        "import { log } from '@shared/log';\n\nlog('broken');\n",
    );
}

#[test]
fn imports_resolve_through_each_packages_tsconfig_and_what_it_extends() {
    let (scratch, _) = common::scratch_dirs();
    let repo = tempfile::tempdir().unwrap();
    monorepo(repo.path());
    let root = repo.path().to_str().unwrap();
    let proposals = run_json(
        &["proposals", root, "packages/app/src/main.ts:4:3", "--json"],
        scratch.path(),
    );
    let import = proposal(&proposals, 16);
    assert_eq!(files(import), ["packages/shared/src/log.ts"]);

    // The malformed tsconfig is one warning naming it; its package resolves relative imports
    // only, and everything else works.
    let output = common::ok(keyhole(&["index", root], scratch.path()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("packages/broken/tsconfig.json") && warnings[0].contains("line 1"),
        "{stderr}"
    );
    let proposals = run_json(
        &[
            "proposals",
            root,
            "packages/broken/src/use.ts:3:1",
            "--json",
        ],
        scratch.path(),
    );
    assert_eq!(proposal(&proposals, 16)["applicable"], false);
}

/// Six sources that import `@x`, beside the configurations under test.
fn six_sources(root: &Path) {
    write(root, "src/x.ts", "export const x = 1;\n");
    for i in 0..5 {
        write(
            root,
            &format!("src/m{i}.ts"),
            "import { x } from '@x';\nexport const y = x;\n",
        );
    }
}

#[test]
fn extends_arrays_that_reach_each_other_index_without_hanging_and_say_where_they_were_cut() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    six_sources(root);
    // Fourteen configurations, each extending all the others (an exponential number of
    // paths through them when each is resolved again wherever it is reached).
    let names: Vec<String> = (0..14).map(|i| format!("./c{i}.json")).collect();
    for i in 0..14 {
        let others: Vec<&String> = names.iter().filter(|n| **n != names[i]).collect();
        let paths = r#""paths": { "@x": ["src/x.ts"] }"#;
        let config = format!(r#"{{ "extends": {others:?}, "compilerOptions": {{ {paths} }} }}"#);
        write(root, &format!("c{i}.json"), &config);
    }
    write(
        root,
        "tsconfig.json",
        &format!(r#"{{ "extends": {names:?} }}"#),
    );
    let index =
        common::index_within_minutes(root).expect("extends arrays must not take exponential time");
    let m0 = index.file_id("src/m0.ts").unwrap();
    let imported: Vec<&str> = keyhole::testing::repo::graph(&index).imports[m0]
        .iter()
        .map(|i| index.files[i.file].path.as_str())
        .collect();
    assert_eq!(imported, ["src/x.ts"]);
    let cut: Vec<&String> = index
        .warnings
        .iter()
        .filter(|w| w.contains("`extends`"))
        .collect();
    assert_eq!(cut.len(), 1, "{:?}", index.warnings);
    assert!(
        cut[0].starts_with("tsconfig.json: its `extends` goes deeper than 8 configurations"),
        "{cut:?}"
    );
}

#[test]
fn a_long_extends_chain_or_a_wide_one_is_cut_with_a_warning_naming_the_file() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    six_sources(root);
    // A chain of twelve, and a configuration that extends a hundred others.
    write(root, "tsconfig.json", r#"{ "extends": "./1.json" }"#);
    for i in 1..12 {
        write(
            root,
            &format!("{i}.json"),
            &format!(r#"{{ "extends": "./{}.json" }}"#, i + 1),
        );
    }
    write(
        root,
        "12.json",
        r#"{ "compilerOptions": { "baseUrl": "." } }"#,
    );
    let wide: Vec<String> = (0..100).map(|i| format!("./wide/{i}.json")).collect();
    write(
        root,
        "lib/tsconfig.json",
        &format!(r#"{{ "extends": {wide:?} }}"#),
    );
    for i in 0..100 {
        write(root, &format!("lib/wide/{i}.json"), "{}");
    }
    write(root, "lib/a.ts", "export const a = 1;\n");
    let index = common::index_within_minutes(root).expect("indexing ends");
    let warnings = index.warnings.join("\n");
    for expected in [
        "tsconfig.json: its `extends` goes deeper than 8 configurations; not read from 9.json on",
        "lib/tsconfig.json: its `extends` reaches more than 64 configurations; not read from \
         lib/wide/64.json on",
    ] {
        assert!(
            warnings.contains(expected),
            "missing '{expected}' in:\n{warnings}"
        );
    }
}
