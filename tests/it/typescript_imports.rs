//! TypeScript as TypeScript resolves it, on layouts real repositories use: a package that
//! imports itself by name through `exports` and a `customConditions` condition (zod's tests),
//! a workspace monorepo whose packages import each other by name (vue's `@vue/shared`), and
//! barrels of every kind followed to the file that declares what a file uses, also through a
//! namespace import (`core.someName`).

use crate::common::{imported, keyhole, ok, set, write_tree};

#[test]
fn tests_that_import_their_own_package_by_name_reach_the_declaring_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("pnpm-workspace.yaml", "packages:\n  - packages/*\n"),
            (
                "packages/zod/package.json",
                r#"{
  "name": "zod",
  "type": "module",
  "main": "./index.cjs",
  "exports": {
    "./package.json": "./package.json",
    ".": { "@zod/source": "./src/index.ts", "types": "./index.d.cts", "import": "./index.js" },
    "./v4": { "@zod/source": "./src/v4/index.ts", "types": "./v4/index.d.cts", "import": "./v4/index.js" }
  }
}"#,
            ),
            (
                "packages/zod/tsconfig.json",
                r#"{ "compilerOptions": { "module": "nodenext", "customConditions": ["@zod/source"] } }"#,
            ),
            (
                "packages/zod/src/index.ts",
                "export * from \"./v4/index.js\";\n",
            ),
            (
                "packages/zod/src/v4/index.ts",
                "import * as z4 from \"./classic/external.js\";\nexport * from \"./classic/index.js\";\nexport { z4 as default };\n",
            ),
            (
                "packages/zod/src/v4/classic/index.ts",
                "import * as z from \"./external.js\";\n\nexport * from \"./external.js\";\nexport { z };\n",
            ),
            (
                "packages/zod/src/v4/classic/external.ts",
                "export * as core from \"../core/index.js\";\nexport * from \"./schemas.js\";\n",
            ),
            (
                "packages/zod/src/v4/classic/schemas.ts",
                "export interface ZodString {\n  min(n: number): ZodString;\n}\n\nexport function string(): ZodString {\n  return {} as ZodString;\n}\n",
            ),
            (
                "packages/zod/src/v4/core/index.ts",
                "export * from \"./errors.js\";\n",
            ),
            (
                "packages/zod/src/v4/core/errors.ts",
                "export class $ZodError extends Error {}\n",
            ),
            (
                "packages/zod/src/v4/classic/tests/string.test.ts",
                "import * as z from \"zod/v4\";\n\nconst minFive = z.string().min(5);\nlet error: z.core.$ZodError | undefined;\nconsole.log(minFive, error);\n",
            ),
        ],
    );
    let files = imported(
        &repo,
        "packages/zod/src/v4/classic/tests/string.test.ts:5:13",
        dir.path(),
    );
    assert_eq!(
        files,
        set(&[
            "packages/zod/src/v4/index.ts",
            "packages/zod/src/v4/classic/schemas.ts",
            "packages/zod/src/v4/core/errors.ts",
        ])
    );
}

#[test]
fn workspace_packages_import_each_other_by_name_through_their_barrels() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            (
                "pnpm-workspace.yaml",
                "packages:\n  - 'packages/*'\n\ncatalog:\n  vite: ^8.2.0\n",
            ),
            ("package.json", r#"{ "private": true, "type": "module" }"#),
            (
                "packages/shared/package.json",
                r#"{ "name": "@acme/shared", "main": "dist/shared.cjs.js", "types": "src/index.ts" }"#,
            ),
            (
                "packages/shared/src/index.ts",
                "export * from './general';\nexport { ShapeFlags } from './shapeFlags';\n",
            ),
            (
                "packages/shared/src/general.ts",
                "export const isArray: typeof Array.isArray = Array.isArray;\nexport function hasOwn(o: object, k: string): boolean {\n  return k in o;\n}\n",
            ),
            (
                "packages/shared/src/shapeFlags.ts",
                "export enum ShapeFlags {\n  ELEMENT = 1,\n}\n",
            ),
            (
                "packages/runtime/package.json",
                r#"{ "name": "@acme/runtime", "exports": { ".": { "types": "./dist/runtime.d.ts", "default": "./src/index.ts" } } }"#,
            ),
            (
                "packages/runtime/src/index.ts",
                "export function h(type: string) {\n  return { type };\n}\n",
            ),
            (
                "packages/runtime/__tests__/vnode.spec.ts",
                "import { isArray, ShapeFlags } from '@acme/shared';\nimport { h } from '@acme/runtime';\n\nconst vnode = h('div');\nconst flags = isArray([vnode]) ? ShapeFlags.ELEMENT : 0;\n",
            ),
        ],
    );
    let files = imported(
        &repo,
        "packages/runtime/__tests__/vnode.spec.ts:5:15",
        dir.path(),
    );
    assert_eq!(
        files,
        set(&[
            "packages/runtime/src/index.ts",
            "packages/shared/src/index.ts",
            "packages/shared/src/general.ts",
            "packages/shared/src/shapeFlags.ts",
        ])
    );
}

#[test]
fn a_namespace_imports_members_reach_the_files_behind_barrels_of_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            (
                "src/core/index.ts",
                "export * from './checks.js';\nexport { parseValue as parse } from './parse.js';\nexport * as util from './util.js';\n",
            ),
            (
                "src/core/checks.ts",
                "export function minLength(n: number) {\n  return n;\n}\n",
            ),
            (
                "src/core/parse.ts",
                "export function parseValue(text: string) {\n  return text;\n}\n",
            ),
            (
                "src/core/util.ts",
                "export const EMPTY = '';\nexport function clone<T>(x: T): T {\n  return x;\n}\n",
            ),
            ("src/core/unrelated.ts", "export function parse() {}\n"),
            (
                "src/classic/schemas.ts",
                "import * as core from \"../core/index.js\";\n\nexport function string(text: string) {\n  const checked = core.minLength(text.length);\n  return core.util.clone(core.parse(text)) + checked;\n}\n",
            ),
        ],
    );
    let files = imported(&repo, "src/classic/schemas.ts:5:10", dir.path());
    assert_eq!(
        files,
        set(&[
            "src/core/index.ts",
            "src/core/checks.ts",
            "src/core/parse.ts",
            "src/core/util.ts",
        ])
    );
}

#[test]
fn a_malformed_package_json_is_one_warning_naming_it_and_resolution_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("pnpm-workspace.yaml", "packages:\n  - 'packages/*'\n"),
            (
                "packages/broken/package.json",
                "{ \"name\": \"@acme/broken\",\n  \"main\": }\n",
            ),
            ("packages/broken/src/index.ts", "export const broken = 1;\n"),
            (
                "packages/ok/package.json",
                r#"{ "name": "@acme/ok", "types": "src/index.ts" }"#,
            ),
            ("packages/ok/src/index.ts", "export const ok = 1;\n"),
            (
                "packages/app/main.ts",
                "import { broken } from '@acme/broken';\nimport { ok } from '@acme/ok';\n\nconsole.log(broken, ok);\n",
            ),
        ],
    );
    let out = ok(keyhole(
        &["index", repo.to_str().unwrap(), "--json"],
        dir.path(),
    ));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("packages/broken/package.json: ") && warnings[0].contains("line 2"),
        "{warnings:?}"
    );
    let files = imported(&repo, "packages/app/main.ts:4:13", dir.path());
    assert_eq!(files, set(&["packages/ok/src/index.ts"]));
}

#[test]
fn a_packages_types_versions_map_its_subpaths_and_its_entry() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("pnpm-workspace.yaml", "packages:\n  - packages/*\n"),
            // No `exports`; its `types` names a build that is not there. The first range is
            // for TypeScripts before 4, so the `*` entry maps.
            (
                "packages/ui/package.json",
                r#"{
  "name": "@acme/ui",
  "main": "dist/index.js",
  "types": "dist/index.d.ts",
  "typesVersions": {
    "<4.0": { "*": ["ts3/*"] },
    "*": { "dist/index.d.ts": ["./src/index.ts"], "v2": ["./src/v2/index.ts"], "*": ["./src/*"] }
  }
}"#,
            ),
            ("packages/ui/src/index.ts", "export const VERSION = '1';\n"),
            (
                "packages/ui/src/v2/index.ts",
                "export function card(): string {\n  return 'card';\n}\n",
            ),
            (
                "packages/ui/src/button.ts",
                "export function button(): string {\n  return 'button';\n}\n",
            ),
            ("packages/ui/ts3/button.ts", "export function button() {}\n"),
            (
                "packages/app/src/main.ts",
                "import { VERSION } from '@acme/ui';\nimport { card } from '@acme/ui/v2';\nimport { button } from '@acme/ui/button';\n\nconsole.log(VERSION, card(), button());\n",
            ),
        ],
    );
    let files = imported(&repo, "packages/app/src/main.ts:5:13", dir.path());
    assert_eq!(
        files,
        set(&[
            "packages/ui/src/index.ts",
            "packages/ui/src/v2/index.ts",
            "packages/ui/src/button.ts",
        ])
    );
}

#[test]
fn a_module_a_declaration_file_declares_by_name_is_what_the_name_imports() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            ("tsconfig.json", r#"{ "include": ["src", "types"] }"#),
            (
                "types/vendor.d.ts",
                "declare module \"legacy-charts\" {\n  export interface Chart {\n    draw(): void;\n  }\n  export function render(id: string): Chart;\n}\n",
            ),
            // A pattern: what matches no file is taken from it.
            (
                "types/assets.d.ts",
                "declare module \"*.svg\" {\n  const url: string;\n  export default url;\n}\n",
            ),
            (
                "src/app.ts",
                "import { render } from \"legacy-charts\";\nimport logo from \"./logo.svg\";\n\nconst chart = render(logo);\nchart.draw();\n",
            ),
        ],
    );
    let files = imported(&repo, "src/app.ts:5:7", dir.path());
    assert_eq!(files, set(&["types/vendor.d.ts", "types/assets.d.ts"]));
}

#[test]
fn commonjs_exports_and_requires_reach_the_files_that_declare_what_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write_tree(
        &repo,
        &[
            (
                "package.json",
                r#"{ "name": "textkit", "main": "lib/index.js" }"#,
            ),
            // The entry is another module as a whole; that module gathers the others.
            (
                "lib/index.js",
                "'use strict';\n\nmodule.exports = require('./core');\n",
            ),
            (
                "lib/core.js",
                "'use strict';\nconst helpers = require('./helpers');\n\nexports.Parser = require('./parser').Parser;\nexports.format = require('./format');\nmodule.exports.helpers = helpers;\n",
            ),
            (
                "lib/parser.js",
                "class Parser {\n  parse(text) {\n    return text.split(' ');\n  }\n}\n\nmodule.exports = { Parser };\n",
            ),
            (
                "lib/format.js",
                "module.exports = function format(words) {\n  return words.join(' ');\n};\n",
            ),
            (
                "lib/helpers.js",
                "exports.slug = function slug(text) {\n  return text.toLowerCase();\n};\n",
            ),
            (
                "test/parse.test.js",
                "const textkit = require('../lib');\nconst { Parser } = require('../lib');\n\nconst words = new Parser().parse('A b');\nconsole.log(textkit.format(words), textkit.helpers.slug('A'));\n",
            ),
        ],
    );
    let files = imported(&repo, "test/parse.test.js:5:13", dir.path());
    assert_eq!(
        files,
        set(&[
            "lib/index.js",
            "lib/parser.js",
            "lib/format.js",
            "lib/helpers.js",
        ])
    );
}
