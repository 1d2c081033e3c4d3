//! What TypeScript's module resolution reads of a file's project: the nearest `tsconfig.json`
//! above the file (a monorepo's `packages/a/tsconfig.json`, else the root's) with the
//! configurations it `extends`, for `baseUrl` and `paths`. Each configuration is resolved once
//! per index, however many files it serves; a resolution reads each configuration it reaches
//! once, and at most [`MAX_CONFIGS`] of them, so `extends` arrays that reach each other cannot
//! multiply the work.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::{ImportScope, ProjectFileError};

/// How many `extends` a configuration may go through: TypeScript has no limit, but a chain
/// longer than this is a mistake, and resolution must end on any repository.
const MAX_EXTENDS: usize = 8;

/// How many configurations one resolution may read besides its own: more is no project a
/// person set up, and the bound keeps `extends` arrays that reach each other cheap.
const MAX_CONFIGS: usize = 64;

/// A configuration's `baseUrl` and `paths`, with everything it extends applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct TsConfig {
    /// Where non-relative specifiers are looked up, repository-relative (`""`: the root).
    base_url: Option<String>,
    /// `paths` patterns (`@app/*`) with their substitutions.
    paths: Vec<(String, Vec<String>)>,
    /// The directory the substitutions are relative to when there is no `baseUrl`: that of
    /// the configuration that wrote `paths`.
    paths_dir: String,
    /// `customConditions`: conditions a package's `exports` are matched with, besides
    /// TypeScript's own.
    custom_conditions: Option<Vec<String>>,
}

/// One configuration file as written (tsconfig allows comments and trailing commas: JSONC).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TsConfigFile {
    #[serde(default)]
    extends: Extends,
    #[serde(default)]
    compiler_options: CompilerOptions,
}

/// `extends`: one configuration, or several (TypeScript 5.0), later ones overriding earlier.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum Extends {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CompilerOptions {
    base_url: Option<String>,
    paths: Option<serde_json::Map<String, serde_json::Value>>,
    custom_conditions: Option<Vec<String>>,
}

/// A configuration file as its project file holds it: what it says, and (once a source file
/// asked for it) its configuration with what it extends applied.
struct ReadConfig {
    file: TsConfigFile,
    resolved: OnceLock<Arc<TsConfig>>,
}

impl ReadConfig {
    fn read(text: &str) -> Result<ReadConfig, ProjectFileError> {
        let options = jsonc_parser::ParseOptions::default();
        let file: Option<TsConfigFile> = jsonc_parser::parse_to_serde_value(text, &options)
            .map_err(|e| ProjectFileError::Jsonc(e.to_string().replace('\n', " ")))?;
        Ok(ReadConfig {
            file: file.unwrap_or_default(),
            resolved: OnceLock::new(),
        })
    }
}

impl TsConfig {
    /// The configuration of the file at `path`: the nearest `tsconfig.json` in its directory
    /// or above, with what it extends. None: resolution goes by relative specifiers only.
    pub(super) fn of_file(path: &str, scope: &dyn ImportScope) -> Arc<TsConfig> {
        let mut dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        loop {
            let candidate = join(dir, "tsconfig.json");
            if let Some(project_file) = scope.project_file(&candidate) {
                let Some(read) = project_file.reading(ReadConfig::read) else {
                    // It does not read; the repository index says so.
                    return Arc::default();
                };
                let resolve = || Arc::new(Resolution::new(&candidate, scope).run(&read.file));
                return read.resolved.get_or_init(resolve).clone();
            }
            if dir.is_empty() {
                return Arc::default();
            }
            dir = dir.rsplit_once('/').map_or("", |(d, _)| d);
        }
    }

    /// `other`'s settings where it has them (a configuration overrides what it extends,
    /// `paths` as a whole).
    fn override_with(&mut self, other: TsConfig) {
        if other.base_url.is_some() {
            self.base_url = other.base_url;
        }
        if !other.paths.is_empty() {
            self.paths = other.paths;
            self.paths_dir = other.paths_dir;
        }
        if other.custom_conditions.is_some() {
            self.custom_conditions = other.custom_conditions;
        }
    }

    /// The configuration's `customConditions` (as extended), for a package's `exports`.
    pub(super) fn custom_conditions(&self) -> &[String] {
        self.custom_conditions.as_deref().unwrap_or_default()
    }

    /// The repository paths a non-relative specifier may name, most specific pattern first
    /// (an exact pattern, then the longest prefix before `*`), then under `baseUrl`.
    pub(super) fn candidates(&self, specifier: &str) -> Vec<String> {
        let base = self.base_url.as_deref().unwrap_or(&self.paths_dir);
        let mut out: Vec<String> = substitutions(&self.paths, specifier)
            .into_iter()
            .filter_map(|t| normalize(base, &t))
            .collect();
        if let Some(base_url) = &self.base_url {
            out.extend(normalize(base_url, specifier));
        }
        out
    }
}

/// What `paths`-style patterns (`@app/*` → `src/app/*`; also a package's `typesVersions`)
/// make of `name`: the targets of the patterns it matches, `*` replaced, the most specific
/// pattern first (an exact one, then the longest prefix before `*`).
pub(super) fn substitutions(patterns: &[(String, Vec<String>)], name: &str) -> Vec<String> {
    let mut matched: Vec<(usize, &[String], &str)> = Vec::new();
    for (pattern, targets) in patterns {
        match pattern.split_once('*') {
            None if pattern == name => matched.push((usize::MAX, targets, "")),
            Some((prefix, suffix))
                if name.len() >= prefix.len() + suffix.len()
                    && name.starts_with(prefix)
                    && name.ends_with(suffix) =>
            {
                let star = &name[prefix.len()..name.len() - suffix.len()];
                matched.push((prefix.len(), targets, star));
            }
            _ => {}
        }
    }
    matched.sort_by_key(|(specificity, _, _)| std::cmp::Reverse(*specificity));
    matched
        .into_iter()
        .flat_map(|(_, targets, star)| targets.iter().map(move |t| t.replacen('*', star, 1)))
        .collect()
}

/// One resolution of a configuration with what it extends.
struct Resolution<'s> {
    scope: &'s dyn ImportScope,
    /// The configuration resolved, which a note names.
    entry: &'s str,
    /// The configurations being read, innermost last: a cycle ends where it closes.
    chain: Vec<String>,
    /// Configurations already resolved here: a diamond of `extends` reads each once.
    done: HashMap<String, TsConfig>,
    /// Configurations read besides the entry, against [`MAX_CONFIGS`].
    read: usize,
    /// Whether a note about a cut was made: one line per resolution.
    noted: bool,
}

impl<'s> Resolution<'s> {
    fn new(entry: &'s str, scope: &'s dyn ImportScope) -> Self {
        Resolution {
            scope,
            entry,
            chain: Vec::new(),
            done: HashMap::new(),
            read: 0,
            noted: false,
        }
    }

    fn run(mut self, file: &TsConfigFile) -> TsConfig {
        self.resolve(self.entry, file)
    }

    /// The configuration at `path`, written as `file`, with what it extends applied. One
    /// that cannot be read counts as empty (the repository index warns about it).
    fn resolve(&mut self, path: &str, file: &TsConfigFile) -> TsConfig {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        let mut config = TsConfig::default();
        self.chain.push(path.to_string());
        let bases: &[String] = match &file.extends {
            Extends::None => &[],
            Extends::One(base) => std::slice::from_ref(base),
            Extends::Many(bases) => bases,
        };
        for base in bases {
            // Package names (`@tsconfig/node20`) name files under node_modules, not the
            // repository's.
            if !(base.starts_with("./") || base.starts_with("../")) {
                continue;
            }
            let Some(base_path) = normalize(dir, base).map(|p| with_json(p, self.scope)) else {
                continue;
            };
            if self.chain.contains(&base_path) {
                continue;
            }
            if let Some(done) = self.done.get(&base_path) {
                config.override_with(done.clone());
                continue;
            }
            if self.chain.len() > MAX_EXTENDS {
                let why = format!("goes deeper than {MAX_EXTENDS} configurations");
                self.cut(&base_path, &why);
                continue;
            }
            if self.read == MAX_CONFIGS {
                let why = format!("reaches more than {MAX_CONFIGS} configurations");
                self.cut(&base_path, &why);
                continue;
            }
            let Some(project_file) = self.scope.project_file(&base_path) else {
                continue;
            };
            let Some(base) = project_file.reading(ReadConfig::read) else {
                continue;
            };
            self.read += 1;
            let base_config = self.resolve(&base_path, &base.file);
            config.override_with(base_config);
        }
        self.chain.pop();
        let options = &file.compiler_options;
        config.override_with(TsConfig {
            base_url: options.base_url.as_deref().and_then(|b| normalize(dir, b)),
            paths: options.paths.iter().flatten().map(pattern).collect(),
            paths_dir: dir.to_string(),
            custom_conditions: options.custom_conditions.clone(),
        });
        self.done.insert(path.to_string(), config.clone());
        config
    }

    /// Note, once, that the entry's `extends` were cut before `skipped`, for the reason
    /// `why`.
    fn cut(&mut self, skipped: &str, why: &str) {
        if !self.noted {
            self.noted = true;
            self.scope.note(format!(
                "{}: its `extends` {why}; not read from {skipped} on",
                self.entry
            ));
        }
    }
}

/// A `paths` entry with its substitutions (those that are not strings left out).
pub(super) fn pattern((pattern, targets): (&String, &serde_json::Value)) -> (String, Vec<String>) {
    let targets = targets
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_string))
        .collect();
    (pattern.clone(), targets)
}

/// An `extends` path as TypeScript takes it: as written, else with `.json` added.
fn with_json(path: String, scope: &dyn ImportScope) -> String {
    if path.ends_with(".json") || scope.project_file(&path).is_some() {
        path
    } else {
        format!("{path}.json")
    }
}

/// `name` in the repository directory `dir` (`""`: the root).
pub(super) fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_string(),
        _ => format!("{dir}/{name}"),
    }
}

/// `dir` joined with a relative `path`, `.` and `..` resolved; `None` above the root.
pub(super) fn normalize(dir: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::lang::{FileId, ProjectFile};

    /// Project files only, counting how often one is asked for.
    struct Configs {
        files: Vec<(&'static str, Arc<ProjectFile>)>,
        asked: AtomicUsize,
    }

    impl ImportScope for Configs {
        fn file_at(&self, _: &str) -> Option<FileId> {
            None
        }
        fn declaring(&self, _: &str) -> Option<FileId> {
            None
        }
        fn project_file(&self, path: &str) -> Option<Arc<ProjectFile>> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            let found = self.files.iter().find(|(p, _)| *p == path);
            found.map(|(_, file)| file.clone())
        }
    }

    #[test]
    fn a_configuration_is_resolved_once_for_all_the_files_it_serves() {
        let file = |text: &str| Arc::new(ProjectFile::new(text.to_string()));
        let scope = Configs {
            files: vec![
                ("tsconfig.json", file(r#"{ "extends": "./base.json" }"#)),
                (
                    "base.json",
                    file(r#"{ "compilerOptions": { "baseUrl": "src" } }"#),
                ),
            ],
            asked: AtomicUsize::new(0),
        };
        let first = TsConfig::of_file("src/a/one.ts", &scope);
        assert_eq!(first.candidates("x"), ["src/x"]);
        let asked = scope.asked.load(Ordering::Relaxed);
        let second = TsConfig::of_file("src/b/two.ts", &scope);
        assert_eq!(second.candidates("x"), ["src/x"]);
        // Only the search for the nearest configuration (src/b, src, the root); what it
        // extends is not read again.
        assert_eq!(scope.asked.load(Ordering::Relaxed) - asked, 3);
    }
}
