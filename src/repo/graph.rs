//! The repository graph: resolved imports with their usage lines, parent and child class
//! files, siblings, similar names and exact duplicates (RLPG appendix A.2).

use std::collections::HashMap;

use rayon::prelude::*;

use super::{FileId, SourceFile};
use crate::lang::{Span, TypeKind};

/// How an import reached a repository file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportKind {
    /// `import a.b.C;` (also static imports of C's members and nested types of C).
    Single,
    /// `import a.b.*;` resolving to the file of a type used in the current file.
    Wildcard,
    /// A type of the same package used without an import. RLPG only followed import
    /// statements; Java code reaches its own package without them, so keyhole counts these too.
    SamePackage,
}

/// A repository file the current file depends on, and the 0-based lines where it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub file: FileId,
    pub kind: ImportKind,
    pub usage_lines: Vec<u32>,
}

/// A class of this file that extends a class declared in another repository file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentLink {
    /// Name span of the child class declaration in this file.
    pub class_name_span: Span,
    pub parent_name: String,
    pub file: FileId,
}

pub struct RepoGraph {
    pub by_path: HashMap<String, FileId>,
    /// Fully qualified top-level type name → file.
    types: HashMap<String, FileId>,
    /// Simple class name → files declaring a class of that name.
    classes: HashMap<String, Vec<FileId>>,
    dirs: HashMap<String, Vec<FileId>>,
    parts: HashMap<String, Vec<FileId>>,
    pub imports: Vec<Vec<Import>>,
    pub parents: Vec<Vec<ParentLink>>,
    pub children: Vec<Vec<FileId>>,
    /// Whether the file has an exact copy elsewhere in the repository.
    pub duplicated: Vec<bool>,
}

/// Parts of a file stem split on underscores and camelCase, lowercased:
/// `XMLHttpOrder_service2` → `xml`, `http`, `order`, `service2`.
pub fn name_parts(stem: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for word in stem.split('_').filter(|w| !w.is_empty()) {
        let chars: Vec<char> = word.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (cur.is_uppercase() && !prev.is_uppercase())
                || (cur.is_uppercase() && prev.is_uppercase() && next_lower);
            if boundary {
                parts.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        parts.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    parts
}

impl RepoGraph {
    pub fn build(files: &[SourceFile]) -> RepoGraph {
        let mut graph = RepoGraph {
            by_path: files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.path.clone(), i))
                .collect(),
            types: HashMap::new(),
            classes: HashMap::new(),
            dirs: HashMap::new(),
            parts: HashMap::new(),
            imports: Vec::new(),
            parents: Vec::new(),
            children: vec![Vec::new(); files.len()],
            duplicated: vec![false; files.len()],
        };
        for (id, file) in files.iter().enumerate() {
            graph.add_declarations(id, file);
            graph
                .dirs
                .entry(file.dir().to_string())
                .or_default()
                .push(id);
            let mut parts = name_parts(file.stem());
            parts.sort();
            parts.dedup();
            for part in parts {
                graph.parts.entry(part).or_default().push(id);
            }
        }
        graph.imports = files
            .par_iter()
            .enumerate()
            .map(|(id, f)| graph.resolve_imports(id, f))
            .collect();
        graph.parents = files
            .par_iter()
            .enumerate()
            .map(|(id, f)| graph.resolve_parents(id, f))
            .collect();
        for (child, links) in graph.parents.iter().enumerate() {
            for link in links {
                if !graph.children[link.file].contains(&child) {
                    graph.children[link.file].push(child);
                }
            }
        }
        graph.mark_duplicates(files);
        graph
    }

    fn add_declarations(&mut self, id: FileId, file: &SourceFile) {
        for decl in &file.facts.types {
            if decl.kind == TypeKind::Class {
                self.classes.entry(decl.name.clone()).or_default().push(id);
            }
            if !decl.top_level {
                continue;
            }
            let fq = qualify(file.facts.package.as_deref(), &decl.name);
            // When two files claim one name (a copied file), the one whose path matches its
            // package wins, as javac would have it.
            let conventional = file
                .path
                .ends_with(&format!("{}.java", fq.replace('.', "/")));
            if conventional || !self.types.contains_key(&fq) {
                self.types.insert(fq, id);
            }
        }
    }

    fn resolve_imports(&self, id: FileId, file: &SourceFile) -> Vec<Import> {
        let facts = &file.facts;
        let mut found: Vec<Import> = Vec::new();
        let mut add = |target: FileId, kind: ImportKind, lines: &[u32]| {
            if target == id {
                return;
            }
            match found.iter_mut().find(|i| i.file == target) {
                Some(existing) => {
                    existing.usage_lines.extend_from_slice(lines);
                    existing.usage_lines.sort_unstable();
                    existing.usage_lines.dedup();
                }
                None => found.push(Import {
                    file: target,
                    kind,
                    usage_lines: lines.to_vec(),
                }),
            }
        };
        for import in &facts.imports {
            if import.wildcard {
                for (name, lines) in facts.name_usages.iter().filter(|(n, _)| starts_upper(n)) {
                    if let Some(&target) = self.types.get(&format!("{}.{name}", import.path)) {
                        add(target, ImportKind::Wildcard, lines);
                    }
                }
            } else if let Some(target) = self.longest_type_prefix(&import.path) {
                let simple = import.path.rsplit('.').next().unwrap_or(&import.path);
                add(target, ImportKind::Single, facts.usages_of(simple));
            }
        }
        for (name, lines) in facts.name_usages.iter().filter(|(n, _)| starts_upper(n)) {
            if let Some(&target) = self.types.get(&qualify(facts.package.as_deref(), name)) {
                add(target, ImportKind::SamePackage, lines);
            }
        }
        found
    }

    /// The file declaring the top-level type with this fully qualified name.
    pub fn file_of_type(&self, qualified: &str) -> Option<FileId> {
        self.types.get(qualified).copied()
    }

    /// `a.b.Outer.Inner.member` → the file of `a.b.Outer.Inner` or else of `a.b.Outer`.
    fn longest_type_prefix(&self, path: &str) -> Option<FileId> {
        let mut prefix = path;
        loop {
            if let Some(&id) = self.types.get(prefix) {
                return Some(id);
            }
            prefix = prefix.rsplit_once('.')?.0;
        }
    }

    /// RLPG finds a parent class file by searching every file for a class of that name; keyhole
    /// prefers a file of the same package or one the file imports when names clash.
    fn resolve_parents(&self, id: FileId, file: &SourceFile) -> Vec<ParentLink> {
        let imported: Vec<FileId> = self.imports[id].iter().map(|i| i.file).collect();
        file.facts
            .types
            .iter()
            .filter_map(|decl| {
                let parent_name = decl.superclass.as_ref()?;
                let candidates = self.classes.get(parent_name)?;
                let preferred = self
                    .types
                    .get(&qualify(file.facts.package.as_deref(), parent_name));
                let target = preferred
                    .copied()
                    .filter(|t| *t != id)
                    .or_else(|| candidates.iter().copied().find(|c| imported.contains(c)))
                    .or_else(|| candidates.iter().copied().find(|&c| c != id))?;
                Some(ParentLink {
                    class_name_span: decl.name_span,
                    parent_name: parent_name.clone(),
                    file: target,
                })
            })
            .collect()
    }

    fn mark_duplicates(&mut self, files: &[SourceFile]) {
        let mut by_hash: HashMap<&[u8; 32], Vec<FileId>> = HashMap::new();
        for (id, file) in files.iter().enumerate() {
            by_hash.entry(&file.hash).or_default().push(id);
        }
        for ids in by_hash.values().filter(|ids| ids.len() > 1) {
            for &id in ids {
                self.duplicated[id] = true;
            }
        }
    }

    /// Other files in the same directory, in path order.
    pub fn siblings(&self, files: &[SourceFile], id: FileId) -> Vec<FileId> {
        self.dirs[files[id].dir()]
            .iter()
            .copied()
            .filter(|&f| f != id)
            .collect()
    }

    /// Other files whose names share a part with this one's, in path order.
    pub fn similar_names(&self, files: &[SourceFile], id: FileId) -> Vec<FileId> {
        let mut similar: Vec<FileId> = name_parts(files[id].stem())
            .iter()
            .filter_map(|p| self.parts.get(p))
            .flatten()
            .copied()
            .filter(|&f| f != id)
            .collect();
        similar.sort_unstable();
        similar.dedup();
        similar
    }
}

fn qualify(package: Option<&str>, name: &str) -> String {
    match package {
        Some(p) => format!("{p}.{name}"),
        None => name.to_string(),
    }
}

fn starts_upper(name: &str) -> bool {
    name.chars().next().is_some_and(char::is_uppercase)
}

#[cfg(test)]
mod tests {
    use super::name_parts;

    #[test]
    fn names_split_on_camel_case_acronyms_and_underscores() {
        assert_eq!(name_parts("OrderService"), ["order", "service"]);
        assert_eq!(
            name_parts("XMLHttpOrder_service2"),
            ["xml", "http", "order", "service2"]
        );
        assert_eq!(name_parts("order_repository"), ["order", "repository"]);
        assert_eq!(name_parts("IOUtils"), ["io", "utils"]);
    }
}
