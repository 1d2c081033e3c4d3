//! What TypeScript's module resolution reads of the repository's own npm packages, for a bare
//! specifier (`zod/v4`, `@vue/shared`) that no `paths` entry maps: the package the importing
//! file belongs to, imported by its own name (a self-reference, which needs `exports`), and
//! the packages of its workspace (pnpm's `pnpm-workspace.yaml`, npm's and yarn's `workspaces`
//! field), which the package manager links into `node_modules` where TypeScript finds them.
//! Inside a package, `exports` (subpaths, `*` patterns, conditions in the order written: the
//! `tsconfig.json`'s `customConditions`, `types`, `import`, `node`, `default`), else `types`,
//! `typings`, `main` and `index` (a subpath as a path inside the package), each mapped
//! through `typesVersions` first where it maps them, each target taken only where it is a
//! repository file, as TypeScript falls through to the next condition when one names no file. A `#` specifier
//! (`#internal/log`) is a subpath import of the file's own package, through its `imports`
//! by the same rules.
//!
//! Every `package.json` and `pnpm-workspace.yaml` is read once per index through
//! [`ImportScope::project_file`] (the repository's checked reads), and a workspace's packages
//! are found once, however many files import them.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::tsconfig::{join, normalize, substitutions};
use super::{ImportScope, ProjectFileError};

/// The conditions TypeScript matches in `exports` for an import, besides a configuration's
/// `customConditions` (which come first among equals: the order that counts is the one the
/// `exports` object is written in) and `default`, which always matches.
const CONDITIONS: [&str; 3] = ["types", "import", "node"];

/// The file a bare `specifier` written in the directory `dir` names through the repository's
/// own packages, as `load` takes a path (extensions, `index`, a `.js` naming its `.ts`).
pub(super) fn resolve<T>(
    dir: &str,
    specifier: &str,
    custom_conditions: &[String],
    scope: &dyn ImportScope,
    load: &dyn Fn(&str) -> Option<T>,
) -> Option<T> {
    let conditions = Conditions(custom_conditions);
    if specifier.starts_with('#') {
        // A subpath import: the `imports` of the package the file belongs to.
        let (package_dir, manifest) = nearest_manifest(dir, scope)?;
        let Value::Object(imports) = manifest.imports.as_ref()? else {
            return None;
        };
        let exports = Targets {
            dir: &package_dir,
            conditions: &conditions,
        };
        return exports.matching(imports, specifier, load);
    }
    let (name, subpath) = split_specifier(specifier)?;
    if let Some((package_dir, manifest)) = nearest_manifest(dir, scope)
        && manifest.name.as_deref() == Some(name)
        && manifest.exports.is_some()
    {
        return manifest.resolve(&package_dir, &subpath, &conditions, load);
    }
    let workspace = workspace_of(dir, scope)?;
    let package_dir = workspace.get(name)?;
    let file = scope.project_file(&join(package_dir, "package.json"))?;
    let read = file.reading(Manifest::read)?;
    read.manifest
        .resolve(package_dir, &subpath, &conditions, load)
}

/// `@scope/name/sub/path` → (`@scope/name`, `./sub/path`); `name` → (`name`, `.`).
fn split_specifier(specifier: &str) -> Option<(&str, String)> {
    let parts = if specifier.starts_with('@') { 2 } else { 1 };
    let end = specifier
        .match_indices('/')
        .nth(parts - 1)
        .map_or(specifier.len(), |(i, _)| i);
    let name = &specifier[..end];
    let valid = !name.is_empty() && !name.ends_with('/') && (parts == 1 || name.contains('/'));
    valid.then(|| (name, format!(".{}", &specifier[end..])))
}

/// The conditions an import matches.
struct Conditions<'c>(&'c [String]);

impl Conditions<'_> {
    fn matches(&self, condition: &str) -> bool {
        condition == "default"
            || CONDITIONS.contains(&condition)
            || self.0.iter().any(|c| c == condition)
    }
}

/// What keyhole reads of a `package.json`.
#[derive(Clone, Debug, Default)]
struct Manifest {
    name: Option<String>,
    exports: Option<Value>,
    /// Subpath imports (`"#internal/*": "./src/internal/*.ts"`), which only the package's own
    /// files use.
    imports: Option<Value>,
    /// `types`, `typings` and `main`, in the order TypeScript tries them.
    entries: Vec<String>,
    /// The `workspaces` field's patterns (npm, yarn: an array, or `{ "packages": [...] }`).
    workspaces: Option<Vec<String>>,
    /// The `typesVersions` paths for the TypeScript keyhole reads as (the first version range
    /// it is in): `paths`-style patterns over the package's own paths.
    types_versions: Vec<(String, Vec<String>)>,
}

/// The TypeScript whose resolution keyhole follows, for a package's `typesVersions` (the one
/// the tests pin, `tests/language-servers.txt`).
const TYPESCRIPT_VERSION: [u64; 3] = [5, 9, 3];

/// The paths of the first entry of a `typesVersions` object whose version range TypeScript
/// [`TYPESCRIPT_VERSION`] is in, as TypeScript takes the first that matches.
fn types_versions(value: Option<&Value>) -> Vec<(String, Vec<String>)> {
    let Some(Value::Object(ranges)) = value else {
        return Vec::new();
    };
    let paths = ranges
        .iter()
        .find(|(range, _)| in_version_range(range, TYPESCRIPT_VERSION));
    match paths {
        Some((_, Value::Object(paths))) => paths.iter().map(super::tsconfig::pattern).collect(),
        _ => Vec::new(),
    }
}

/// Whether `version` is in a semver range as `typesVersions` writes them: `*`, comparators
/// (`>=3.1`, `<4`) that all hold, alternatives joined by `||`; a bare version (`4.1`) holds
/// for the versions it begins.
fn in_version_range(range: &str, version: [u64; 3]) -> bool {
    range.split("||").any(|alternative| {
        alternative.split_whitespace().all(|comparator| {
            let operators = [">=", "<=", ">", "<", "="];
            let (operator, written) = operators
                .iter()
                .find_map(|o| comparator.strip_prefix(o).map(|rest| (*o, rest)))
                .unwrap_or(("", comparator));
            if written == "*" {
                return true;
            }
            let parts: Vec<Option<u64>> = written.split('.').map(|p| p.parse().ok()).collect();
            let Some(parts) = parts.into_iter().collect::<Option<Vec<u64>>>() else {
                return false;
            };
            let mut bound = [0; 3];
            for (b, p) in bound.iter_mut().zip(&parts) {
                *b = *p;
            }
            match operator {
                ">=" => version >= bound,
                ">" => version > bound,
                "<=" => version <= bound,
                "<" => version < bound,
                _ => version[..parts.len().min(3)] == bound[..parts.len().min(3)],
            }
        })
    })
}

/// A `package.json` as its project file holds it, with (for a workspace root, once a source
/// file asked) its workspace's packages.
struct ReadManifest {
    manifest: Manifest,
    workspace: OnceLock<Arc<Workspace>>,
}

impl Manifest {
    /// Only invalid JSON is an error (the index warns, naming the line); a field of an
    /// unexpected shape is left out.
    fn read(text: &str) -> Result<ReadManifest, ProjectFileError> {
        let value: Value = serde_json::from_str(text)?;
        let string = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let workspaces = match value.get("workspaces") {
            Some(Value::Array(patterns)) => Some(strings(patterns)),
            Some(Value::Object(fields)) => fields
                .get("packages")
                .and_then(Value::as_array)
                .map(|p| strings(p)),
            _ => None,
        };
        let manifest = Manifest {
            name: string("name"),
            exports: value.get("exports").filter(|e| !e.is_null()).cloned(),
            imports: value.get("imports").cloned(),
            entries: ["types", "typings", "main"]
                .into_iter()
                .filter_map(string)
                .collect(),
            workspaces,
            types_versions: types_versions(value.get("typesVersions")),
        };
        Ok(ReadManifest {
            manifest,
            workspace: OnceLock::new(),
        })
    }

    /// The file `subpath` (`.`, `./v4`) of this package, in the directory `dir`, names.
    fn resolve<T>(
        &self,
        dir: &str,
        subpath: &str,
        conditions: &Conditions,
        load: &dyn Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let at = |relative: &str| normalize(dir, relative).and_then(|p| load(&p));
        if let Some(exports) = &self.exports {
            // Where `exports` is given, it is all the package offers.
            return Targets { dir, conditions }.resolve(exports, subpath, load);
        }
        // `typesVersions` maps a path inside the package (a subpath, or the entry a field
        // names) first, as TypeScript maps it before it looks there.
        let mapped = |path: &str| {
            let relative = normalize("", path)?;
            substitutions(&self.types_versions, &relative)
                .iter()
                .find_map(|target| at(target))
        };
        if subpath != "." {
            return mapped(subpath).or_else(|| at(subpath));
        }
        self.entries
            .iter()
            .find_map(|entry| mapped(entry).or_else(|| at(entry)))
            .or_else(|| mapped("index"))
            .or_else(|| at("."))
    }
}

/// Node's rules for the targets of `exports` and `imports`, as TypeScript follows them.
struct Targets<'e> {
    dir: &'e str,
    conditions: &'e Conditions<'e>,
}

impl Targets<'_> {
    /// The target of `subpath` (`.`, `./v4`, `./locales/en.js`), matched against `./*` and
    /// `./locales/*` patterns as [`Targets::matching`] does.
    fn resolve<T>(
        &self,
        exports: &Value,
        subpath: &str,
        load: &dyn Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let subpaths = match exports {
            Value::Object(fields) if fields.keys().all(|k| k.starts_with('.')) => fields,
            // A string, an array or conditions: what `.` exports.
            _ if subpath == "." => return self.target(exports, None, load),
            _ => return None,
        };
        self.matching(subpaths, subpath, load)
    }

    /// The target of the key `subpath` of `exports` or `imports` names: an exact key, else the
    /// pattern with the longest part before its `*`.
    fn matching<T>(
        &self,
        subpaths: &serde_json::Map<String, Value>,
        subpath: &str,
        load: &dyn Fn(&str) -> Option<T>,
    ) -> Option<T> {
        if let Some(target) = subpaths.get(subpath).filter(|_| !subpath.contains('*')) {
            return self.target(target, None, load);
        }
        let mut best: Option<(usize, &Value, &str)> = None;
        for (key, target) in subpaths {
            let Some((prefix, suffix)) = key.split_once('*') else {
                continue;
            };
            let fits = subpath.len() >= prefix.len() + suffix.len()
                && subpath.starts_with(prefix)
                && subpath.ends_with(suffix);
            if fits && best.is_none_or(|(longest, _, _)| prefix.len() > longest) {
                let star = &subpath[prefix.len()..subpath.len() - suffix.len()];
                best = Some((prefix.len(), target, star));
            }
        }
        let (_, target, star) = best?;
        self.target(target, Some(star), load)
    }

    /// A target: a path inside the package (`./src/index.ts`, `*` replaced), the first of an
    /// array that names a file, or the first matching condition whose target does.
    fn target<T>(
        &self,
        target: &Value,
        star: Option<&str>,
        load: &dyn Fn(&str) -> Option<T>,
    ) -> Option<T> {
        match target {
            Value::String(path) => {
                let path = path.strip_prefix("./")?;
                let path = match star {
                    Some(star) => path.replace('*', star),
                    None => path.to_string(),
                };
                // A target never leaves its package.
                let inside = !path.split('/').any(|p| p == ".." || p == "node_modules");
                normalize(self.dir, &path)
                    .filter(|_| inside)
                    .and_then(|p| load(&p))
            }
            Value::Array(targets) => targets.iter().find_map(|t| self.target(t, star, load)),
            Value::Object(conditions) => conditions
                .iter()
                .filter(|(condition, _)| self.conditions.matches(condition))
                .find_map(|(_, t)| self.target(t, star, load)),
            _ => None,
        }
    }
}

/// The nearest `package.json` at `dir` or above it, with its directory: the package a file
/// belongs to.
fn nearest_manifest(dir: &str, scope: &dyn ImportScope) -> Option<(String, Manifest)> {
    ancestors(dir).find_map(|d| {
        let file = scope.project_file(&join(d, "package.json"))?;
        // One that does not read is no package (the index warns about it).
        let manifest = file.reading(Manifest::read)?.manifest.clone();
        Some((d.to_string(), manifest))
    })
}

/// `dir` and each directory above it, the repository's root (`""`) last.
fn ancestors(dir: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(dir);
    std::iter::from_fn(move || {
        let current = next?;
        next = match current {
            "" => None,
            _ => Some(current.rsplit_once('/').map_or("", |(d, _)| d)),
        };
        Some(current)
    })
}

/// A workspace's packages: name → directory (the first in path order where two share one).
type Workspace = HashMap<String, String>;

/// The packages of the workspace `dir` belongs to: that of the nearest directory at or above
/// it with a `pnpm-workspace.yaml`, or a `package.json` with `workspaces`.
fn workspace_of(dir: &str, scope: &dyn ImportScope) -> Option<Arc<Workspace>> {
    for root in ancestors(dir) {
        if let Some(file) = scope.project_file(&join(root, "pnpm-workspace.yaml")) {
            let read = file.reading(read_pnpm_workspace)?;
            let found = || Arc::new(find_packages(root, &read.patterns, scope));
            return Some(read.workspace.get_or_init(found).clone());
        }
        let Some(file) = scope.project_file(&join(root, "package.json")) else {
            continue;
        };
        let Some(read) = file.reading(Manifest::read) else {
            continue;
        };
        if let Some(patterns) = &read.manifest.workspaces {
            let found = || Arc::new(find_packages(root, patterns, scope));
            return Some(read.workspace.get_or_init(found).clone());
        }
    }
    None
}

/// A `pnpm-workspace.yaml` as its project file holds it.
struct ReadPnpmWorkspace {
    patterns: Vec<String>,
    workspace: OnceLock<Arc<Workspace>>,
}

/// The `packages:` list of a `pnpm-workspace.yaml`, the one key resolution needs: a block
/// sequence (`- 'packages/*'`) or a flow one (`['a/*', 'b']`). The rest of the file (catalogs,
/// settings) is left unread, so a YAML feature keyhole does not read there changes nothing.
fn read_pnpm_workspace(text: &str) -> Result<ReadPnpmWorkspace, ProjectFileError> {
    let unquote = |item: &str| {
        let item = item.split(" #").next().unwrap_or_default().trim();
        item.trim_matches(|c| c == '\'' || c == '"').to_string()
    };
    let mut patterns = Vec::new();
    let mut in_packages = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let top_level = !line.starts_with([' ', '\t', '-']);
        if top_level {
            in_packages = false;
            if let Some(rest) = trimmed.strip_prefix("packages:") {
                let rest = rest.trim();
                match rest.strip_prefix('[') {
                    Some(flow) => {
                        let items = flow.split(']').next().unwrap_or_default().split(',');
                        patterns.extend(items.map(unquote).filter(|p| !p.is_empty()));
                    }
                    None => in_packages = rest.is_empty() || rest.starts_with('#'),
                }
            }
            continue;
        }
        if in_packages && let Some(item) = trimmed.strip_prefix('-') {
            patterns.push(unquote(item));
        }
    }
    Ok(ReadPnpmWorkspace {
        patterns,
        workspace: OnceLock::new(),
    })
}

/// The packages of the workspace at `root`: every directory holding (or above) a source file
/// that a pattern matches and no `!` pattern excludes, with a `package.json` that names it.
fn find_packages(root: &str, patterns: &[String], scope: &dyn ImportScope) -> Workspace {
    let (excluded, included): (Vec<&str>, Vec<&str>) = patterns
        .iter()
        .map(|p| p.trim_start_matches("./").trim_end_matches('/'))
        .partition(|p| p.starts_with('!'));
    let excluded: Vec<&str> = excluded.iter().map(|p| &p[1..]).collect();
    let mut dirs: Vec<&str> = Vec::new();
    for dir in scope.directories() {
        for above in ancestors(dir) {
            dirs.push(above);
        }
    }
    dirs.sort_unstable();
    dirs.dedup();
    let mut packages = Workspace::new();
    for dir in dirs {
        let Some(relative) = relative_to(root, dir) else {
            continue;
        };
        let matches = |ps: &[&str]| ps.iter().any(|p| glob_matches(p, relative));
        if !matches(&included) || matches(&excluded) {
            continue;
        }
        let Some(file) = scope.project_file(&join(dir, "package.json")) else {
            continue;
        };
        let name = file
            .reading(Manifest::read)
            .and_then(|r| r.manifest.name.clone());
        if let Some(name) = name {
            packages.entry(name).or_insert_with(|| dir.to_string());
        }
    }
    packages
}

/// `dir` relative to `root`, if it is inside it.
fn relative_to<'d>(root: &str, dir: &'d str) -> Option<&'d str> {
    if root.is_empty() {
        return Some(dir);
    }
    let rest = dir.strip_prefix(root)?;
    match rest {
        "" => Some(""),
        _ => rest.strip_prefix('/'),
    }
}

/// Whether a workspace pattern (`packages/*`, `apps/**`, `tools/pkg-*`) matches a relative
/// directory: `*` stands for any part of one name, `**` for any number of directories.
fn glob_matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    let path: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    segments_match(&pattern, &path)
}

fn segments_match(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments_match(rest, &path[skip..])),
        Some((first, rest)) => path
            .split_first()
            .is_some_and(|(name, tail)| name_matches(first, name) && segments_match(rest, tail)),
    }
}

/// One name against one part of a pattern, where `*` stands for any run of characters.
fn name_matches(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

fn strings(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_versions_ranges_hold_as_semver_says() {
        let v = [5, 9, 3];
        for holds in [
            "*",
            ">=3.1",
            ">4",
            "<6",
            ">=5.9 <6",
            "5",
            "5.9",
            "<4 || >=5.0",
        ] {
            assert!(in_version_range(holds, v), "{holds}");
        }
        for fails in ["<4.0", ">=6", "5.8", "<=5.9.2", ">=5 <5.9", "beta"] {
            assert!(!in_version_range(fails, v), "{fails}");
        }
    }

    #[test]
    fn specifiers_split_into_package_and_subpath() {
        assert_eq!(split_specifier("zod"), Some(("zod", ".".to_string())));
        assert_eq!(
            split_specifier("zod/v4/core"),
            Some(("zod", "./v4/core".to_string()))
        );
        assert_eq!(
            split_specifier("@vue/shared"),
            Some(("@vue/shared", ".".to_string()))
        );
        assert_eq!(
            split_specifier("@vue/shared/x"),
            Some(("@vue/shared", "./x".to_string()))
        );
        assert_eq!(split_specifier("@vue"), None);
    }

    #[test]
    fn workspace_patterns_match_directories() {
        assert!(glob_matches("packages/*", "packages/shared"));
        assert!(!glob_matches("packages/*", "packages/shared/src"));
        assert!(!glob_matches("packages/*", "packages"));
        assert!(glob_matches("apps/**", "apps/web/admin"));
        assert!(glob_matches("**/pkg-*", "a/b/pkg-one"));
        assert!(!glob_matches("tools/pkg-*", "tools/lib-one"));
    }

    #[test]
    fn pnpm_workspace_lists_are_read_in_both_styles() {
        let block = "# ws\npackages:\n  - 'packages/*'\n  - \"apps/**\" # apps\n  - '!**/test/**'\n\
                     catalog:\n  vite: ^8\n";
        let read = read_pnpm_workspace(block).unwrap();
        assert_eq!(read.patterns, ["packages/*", "apps/**", "!**/test/**"]);
        let flow = read_pnpm_workspace("packages: ['a/*', b]\n").unwrap();
        assert_eq!(flow.patterns, ["a/*", "b"]);
        let unindented = read_pnpm_workspace("packages:\n- x/*\nother: 1\n- y\n").unwrap();
        assert_eq!(unindented.patterns, ["x/*"]);
    }
}
