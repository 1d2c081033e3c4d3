//! What TypeScript's module resolution reads of a file's project: the nearest `tsconfig.json`
//! above the file (a monorepo's `packages/a/tsconfig.json`, else the root's) with the
//! configurations it `extends`, for `baseUrl` and `paths`.

use serde::Deserialize;

use super::ImportScope;

/// How many `extends` a configuration may go through: TypeScript has no limit, but a chain
/// longer than this is a mistake, and resolution must end on any repository.
const MAX_EXTENDS: usize = 8;

/// A configuration's `baseUrl` and `paths`, with everything it extends applied.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TsConfig {
    /// Where non-relative specifiers are looked up, repository-relative (`""`: the root).
    base_url: Option<String>,
    /// `paths` patterns (`@app/*`) with their substitutions.
    paths: Vec<(String, Vec<String>)>,
    /// The directory the substitutions are relative to when there is no `baseUrl`: that of
    /// the configuration that wrote `paths`.
    paths_dir: String,
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
}

impl TsConfigFile {
    fn read(text: &str) -> Result<TsConfigFile, String> {
        let options = jsonc_parser::ParseOptions::default();
        let file: Option<TsConfigFile> = jsonc_parser::parse_to_serde_value(text, &options)
            .map_err(|e| e.to_string().replace('\n', " "))?;
        Ok(file.unwrap_or_default())
    }
}

impl TsConfig {
    /// The configuration of the file at `path`: the nearest `tsconfig.json` in its directory
    /// or above, with what it extends. None: resolution goes by relative specifiers only.
    pub(super) fn of_file(path: &str, scope: &dyn ImportScope) -> TsConfig {
        let mut dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        loop {
            let candidate = join(dir, "tsconfig.json");
            if scope.project_file(&candidate).is_some() {
                return TsConfig::read(&candidate, scope, &mut Vec::new());
            }
            if dir.is_empty() {
                return TsConfig::default();
            }
            dir = dir.rsplit_once('/').map_or("", |(d, _)| d);
        }
    }

    /// The configuration at `path` with what it extends applied; `chain` holds the
    /// configurations being read, so a cycle ends where it closes. One that cannot be read
    /// counts as empty (the repository index warns about it).
    fn read(path: &str, scope: &dyn ImportScope, chain: &mut Vec<String>) -> TsConfig {
        let Some(project_file) = scope.project_file(path) else {
            return TsConfig::default();
        };
        let Some(file) = project_file.reading(TsConfigFile::read) else {
            return TsConfig::default();
        };
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        let mut config = TsConfig::default();
        chain.push(path.to_string());
        let bases: &[String] = match &file.extends {
            Extends::None => &[],
            Extends::One(base) => std::slice::from_ref(base),
            Extends::Many(bases) => bases,
        };
        for base in bases {
            // Package names (`@tsconfig/node20`) name files under node_modules, not the
            // repository's.
            if !(base.starts_with("./") || base.starts_with("../")) || chain.len() > MAX_EXTENDS {
                continue;
            }
            let Some(base_path) = normalize(dir, base).map(|p| with_json(p, scope)) else {
                continue;
            };
            if !chain.contains(&base_path) {
                config.override_with(TsConfig::read(&base_path, scope, chain));
            }
        }
        chain.pop();
        let options = &file.compiler_options;
        config.override_with(TsConfig {
            base_url: options.base_url.as_deref().and_then(|b| normalize(dir, b)),
            paths: options.paths.iter().flatten().map(pattern).collect(),
            paths_dir: dir.to_string(),
        });
        config
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
    }

    /// The repository paths a non-relative specifier may name, most specific pattern first
    /// (an exact pattern, then the longest prefix before `*`), then under `baseUrl`.
    pub(super) fn candidates(&self, specifier: &str) -> Vec<String> {
        let base = self.base_url.as_deref().unwrap_or(&self.paths_dir);
        let mut matched: Vec<(usize, &[String], &str)> = Vec::new();
        for (pattern, targets) in &self.paths {
            match pattern.split_once('*') {
                None if pattern == specifier => matched.push((usize::MAX, targets, "")),
                Some((prefix, suffix))
                    if specifier.len() >= prefix.len() + suffix.len()
                        && specifier.starts_with(prefix)
                        && specifier.ends_with(suffix) =>
                {
                    let star = &specifier[prefix.len()..specifier.len() - suffix.len()];
                    matched.push((prefix.len(), targets, star));
                }
                _ => {}
            }
        }
        matched.sort_by_key(|(specificity, _, _)| std::cmp::Reverse(*specificity));
        let mut out: Vec<String> = matched
            .into_iter()
            .flat_map(|(_, targets, star)| targets.iter().map(move |t| t.replacen('*', star, 1)))
            .filter_map(|t| normalize(base, &t))
            .collect();
        if let Some(base_url) = &self.base_url {
            out.extend(normalize(base_url, specifier));
        }
        out
    }
}

/// A `paths` entry with its substitutions (those that are not strings left out).
fn pattern((pattern, targets): (&String, &serde_json::Value)) -> (String, Vec<String>) {
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

fn join(dir: &str, name: &str) -> String {
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
