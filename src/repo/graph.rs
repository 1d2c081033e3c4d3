//! The repository graph: resolved imports with their usage lines, parent and child class
//! files, siblings, similar names and exact duplicates (RLPG appendix A.2).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::read::read_repo_file;
use super::{FileId, SourceFile};
pub use crate::lang::Import;
use crate::lang::{FileFacts, ImportScope, ProjectFile, Span, TypeKind};

/// A class of this file that extends a class declared in another repository file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentLink {
    /// Name span of the child class declaration in this file.
    pub class_name_span: Span,
    pub parent_name: String,
    pub file: FileId,
}

pub struct RepoGraph {
    pub by_path: FxHashMap<String, FileId>,
    /// A language's qualified names ([`crate::lang::Language::qualified_names`]) → file.
    types: FxHashMap<String, FileId>,
    /// The project files import resolution asked for.
    project_files: ProjectFiles,
    /// Simple class name → files declaring a class of that name.
    classes: FxHashMap<String, Vec<FileId>>,
    dirs: FxHashMap<String, Vec<FileId>>,
    parts: FxHashMap<String, Vec<FileId>>,
    pub imports: Vec<Vec<Import>>,
    pub parents: Vec<Vec<ParentLink>>,
    pub children: Vec<Vec<FileId>>,
    /// Whether the file has an exact copy elsewhere in the repository.
    pub duplicated: Vec<bool>,
    /// Project files a language could not read, one line each: resolution went without them.
    pub warnings: Vec<String>,
}

/// Parts of a file stem split on underscores, hyphens (`loan-service.ts`) and camelCase,
/// lowercased:
/// `XMLHttpOrder_service2` → `xml`, `http`, `order`, `service2`.
pub fn name_parts(stem: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for word in stem.split(['_', '-']).filter(|w| !w.is_empty()) {
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

/// The parts of a file stem by which similar names are matched: [`name_parts`] of the stem
/// without the affix every test file of its language shares
/// ([`crate::lang::Language::test_affixes`]), which would make every test similar to every
/// other.
pub fn similar_name_parts(stem: &str, language: &dyn crate::lang::Language) -> Vec<String> {
    let (prefixes, suffixes) = language.test_affixes();
    let mut name = stem;
    if let Some(rest) = prefixes.iter().find_map(|p| name.strip_prefix(p)) {
        name = rest;
    }
    if let Some(rest) = suffixes.iter().find_map(|s| name.strip_suffix(s)) {
        name = rest;
    }
    if name.is_empty() {
        name = stem;
    }
    name_parts(name)
}

impl RepoGraph {
    /// The graph of `files`, indexed from the repository at `root` (whose project files, such
    /// as `tsconfig.json`, import resolution may read).
    pub fn build(root: &Path, files: &[SourceFile]) -> RepoGraph {
        let mut graph = RepoGraph {
            by_path: files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.path.clone(), i))
                .collect(),
            types: FxHashMap::default(),
            project_files: ProjectFiles {
                root: root.to_path_buf(),
                read: Mutex::default(),
                notes: Mutex::default(),
            },
            classes: FxHashMap::default(),
            dirs: FxHashMap::default(),
            parts: FxHashMap::default(),
            imports: Vec::new(),
            parents: Vec::new(),
            children: vec![Vec::new(); files.len()],
            duplicated: vec![false; files.len()],
            warnings: Vec::new(),
        };
        for (id, file) in files.iter().enumerate() {
            graph.add_declarations(id, file);
            graph
                .dirs
                .entry(file.dir().to_string())
                .or_default()
                .push(id);
            let mut parts = similar_name_parts(file.stem(), file.language);
            parts.sort();
            parts.dedup();
            for part in parts {
                graph.parts.entry(part).or_default().push(id);
            }
        }
        let scope = Resolving {
            graph: &graph,
            files,
        };
        let imports = files
            .par_iter()
            .enumerate()
            .map(|(id, f)| scope.resolve_imports(id, f))
            .collect();
        graph.imports = imports;
        graph.parents = files
            .par_iter()
            .enumerate()
            .map(|(id, f)| graph.resolve_parents(id, f, files))
            .collect();
        for (child, links) in graph.parents.iter().enumerate() {
            for link in links {
                if !graph.children[link.file].contains(&child) {
                    graph.children[link.file].push(child);
                }
            }
        }
        graph.mark_duplicates(files);
        graph.warnings = graph.project_files.problems();
        graph
    }

    fn add_declarations(&mut self, id: FileId, file: &SourceFile) {
        for decl in &file.facts.types {
            if decl.kind == TypeKind::Class {
                self.classes.entry(decl.name.clone()).or_default().push(id);
            }
        }
        // When two files claim one name (a copied file), the one where the name says it
        // should be wins, as javac would have it.
        for (name, conventional) in file.language.qualified_names(&file.path, &file.facts) {
            if conventional || !self.types.contains_key(&name) {
                self.types.insert(name, id);
            }
        }
    }

    /// The file declaring the top-level type with this fully qualified name.
    pub fn file_of_type(&self, qualified: &str) -> Option<FileId> {
        self.types.get(qualified).copied()
    }

    /// RLPG finds a parent class file by searching every file for a class of that name; keyhole
    /// looks among the files of the same language, and prefers one the file imports (its
    /// package's, in Java) when names clash.
    fn resolve_parents(
        &self,
        id: FileId,
        file: &SourceFile,
        files: &[SourceFile],
    ) -> Vec<ParentLink> {
        let imported: Vec<FileId> = self.imports[id].iter().map(|i| i.file).collect();
        let same_language = |c: &FileId| files[*c].same_language(file);
        file.facts
            .types
            .iter()
            .filter_map(|decl| {
                let parent_name = decl.superclass.as_ref()?;
                let candidates: Vec<FileId> = self
                    .classes
                    .get(parent_name)?
                    .iter()
                    .copied()
                    .filter(|c| *c != id && same_language(c))
                    .collect();
                let target = imported
                    .iter()
                    .copied()
                    .find(|c| candidates.contains(c))
                    .or_else(|| candidates.first().copied())?;
                Some(ParentLink {
                    class_name_span: decl.name_span,
                    parent_name: parent_name.clone(),
                    file: target,
                })
            })
            .collect()
    }

    fn mark_duplicates(&mut self, files: &[SourceFile]) {
        let mut by_hash: FxHashMap<&[u8; 32], Vec<FileId>> = FxHashMap::default();
        for (id, file) in files.iter().enumerate() {
            by_hash.entry(&file.hash).or_default().push(id);
        }
        for ids in by_hash.values().filter(|ids| ids.len() > 1) {
            for &id in ids {
                self.duplicated[id] = true;
            }
        }
    }

    /// Other files of the same language in the same directory, in path order.
    pub fn siblings(&self, files: &[SourceFile], id: FileId) -> Vec<FileId> {
        self.dirs[files[id].dir()]
            .iter()
            .copied()
            .filter(|&f| f != id && files[f].same_language(&files[id]))
            .collect()
    }

    /// Other files of the same language whose names share a part with this one's, in path
    /// order.
    pub fn similar_names(&self, files: &[SourceFile], id: FileId) -> Vec<FileId> {
        let mut similar: Vec<FileId> = similar_name_parts(files[id].stem(), files[id].language)
            .iter()
            .filter_map(|p| self.parts.get(p))
            .flatten()
            .copied()
            .filter(|&f| f != id && files[f].same_language(&files[id]))
            .collect();
        similar.sort_unstable();
        similar.dedup();
        similar
    }
}

/// What a language may ask while it resolves one file's imports: the graph's lookups, and the
/// facts of the other files (what a Python package's `__init__.py` re-exports).
struct Resolving<'g> {
    graph: &'g RepoGraph,
    files: &'g [SourceFile],
}

impl Resolving<'_> {
    fn resolve_imports(&self, id: FileId, file: &SourceFile) -> Vec<Import> {
        let mut found = file.language.resolve_imports(&file.path, &file.facts, self);
        found.retain(|i| i.file != id);
        found
    }
}

impl ImportScope for Resolving<'_> {
    fn file_at(&self, path: &str) -> Option<FileId> {
        self.graph.by_path.get(path).copied()
    }

    fn declaring(&self, qualified: &str) -> Option<FileId> {
        self.graph.types.get(qualified).copied()
    }

    fn project_file(&self, path: &str) -> Option<Arc<ProjectFile>> {
        self.graph.project_files.get(path)
    }

    fn source(&self, file: FileId) -> Option<(&str, &FileFacts)> {
        let file = self.files.get(file)?;
        Some((&file.path, &file.facts))
    }

    fn directories(&self) -> Vec<&str> {
        self.graph.dirs.keys().map(String::as_str).collect()
    }

    fn note(&self, line: String) {
        let mut notes = self
            .graph
            .project_files
            .notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        notes.push(line);
    }
}

/// The largest project file read: a `tsconfig.json` or `package.json` of more is no
/// configuration a person wrote, and reading it would only cost memory.
pub const MAX_PROJECT_FILE_BYTES: u64 = 4 << 20;

/// The project files (`tsconfig.json`) import resolution asks for, each read from the
/// repository the first time, through [`read_repo_file`].
struct ProjectFiles {
    root: PathBuf,
    /// By repository-relative path: what was read, or why it was not.
    read: Mutex<HashMap<String, ProjectFileRead>>,
    /// What languages said of the configurations they resolved (a cut `extends` chain).
    notes: Mutex<Vec<String>>,
}

enum ProjectFileRead {
    Absent,
    /// Not read (a FIFO, a link out of the repository, too large, not UTF-8): why.
    Refused(String),
    Read(Arc<ProjectFile>),
}

impl ProjectFiles {
    fn get(&self, path: &str) -> Option<Arc<ProjectFile>> {
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        let file = read.entry(path.to_string()).or_insert_with(|| {
            match read_repo_file(&self.root, Path::new(path), MAX_PROJECT_FILE_BYTES) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => ProjectFileRead::Read(Arc::new(ProjectFile::new(text))),
                    Err(_) => ProjectFileRead::Refused(format!("{path}: not valid UTF-8")),
                },
                Err(e) if e.is_missing() => ProjectFileRead::Absent,
                Err(e) => ProjectFileRead::Refused(e.to_string()),
            }
        });
        match file {
            ProjectFileRead::Read(file) => Some(file.clone()),
            _ => None,
        }
    }

    /// A line for each file that could not be read or a language could not read, and each
    /// note of a language, in order.
    fn problems(&self) -> Vec<String> {
        let read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        let mut problems: Vec<String> = read
            .iter()
            .filter_map(|(path, file)| {
                let why = match file {
                    ProjectFileRead::Absent => return None,
                    ProjectFileRead::Refused(why) => why.clone(),
                    ProjectFileRead::Read(file) => format!("{path}: {}", file.problem()?),
                };
                Some(format!("{why}; imports were resolved without it"))
            })
            .collect();
        problems.extend(
            self.notes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        problems.sort();
        problems.dedup();
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::{name_parts, similar_name_parts};

    #[test]
    fn names_split_on_camel_case_acronyms_and_underscores() {
        assert_eq!(name_parts("OrderService"), ["order", "service"]);
        assert_eq!(
            name_parts("XMLHttpOrder_service2"),
            ["xml", "http", "order", "service2"]
        );
        assert_eq!(name_parts("order_repository"), ["order", "repository"]);
        assert_eq!(name_parts("IOUtils"), ["io", "utils"]);
        assert_eq!(name_parts("loan-service"), ["loan", "service"]);
    }

    #[test]
    fn similar_names_leave_out_test_affixes_only() {
        let python = crate::lang::for_path(std::path::Path::new("a.py")).unwrap();
        let parts = |stem| similar_name_parts(stem, python);
        assert_eq!(parts("test_panel"), ["panel"]);
        assert_eq!(parts("panel_test"), ["panel"]);
        assert_eq!(parts("test"), ["test"]);
        assert_eq!(parts("test_"), ["test"]);
        assert_eq!(parts("OrderServiceTest"), ["order", "service", "test"]);
        assert_eq!(parts("testing_utils"), ["testing", "utils"]);
        // Java has no such affix: RLPG's camel-case and underscore parts as they are.
        let java = crate::lang::for_path(std::path::Path::new("A.java")).unwrap();
        assert_eq!(similar_name_parts("Order_test", java), ["order", "test"]);
    }
}
