//! The paper profile (`--fidelity paper`, the default): RLPG's proposals as the paper describes
//! them (section 2.1, appendix B), with keyhole's judgment where the paper is silent or a quirk
//! of the code would mislead.

use super::{BlockBudget, Profile, WindowOrder, WindowRules, fact_spans};
use crate::candidate::{ContextType, PromptSource};
use crate::compose::Assembly;
use crate::context::HoleRequest;
use crate::context::SourcedText;
use crate::context::proposals::{file_items, push_current_class};
use crate::lang::{MethodDecl, Span, TypeKind};
use crate::repo::{FileId, Import, ParentLink, RepoIndex, SourceFile};
use crate::token::{Keep, Tokenizer};

/// The paper's reading.
pub struct Paper;

/// RepoCoder's blocks as its paper describes them, commented in the hole's language: half of
/// the budget, in its tokenizer.
static WINDOWS: WindowRules = WindowRules {
    comment: None,
    budget: BlockBudget::Allocation,
    skips_repeated_code: true,
    order: WindowOrder::Path,
    shows_first_place: false,
    splits_windows_again: false,
};

impl Profile for Paper {
    fn windows(&self) -> &'static WindowRules {
        &WINDOWS
    }

    fn finish_current(
        &self,
        text: SourcedText,
        _before: bool,
        _req: &HoleRequest,
    ) -> (SourcedText, Option<usize>) {
        (text, None)
    }

    fn ends_before_hole(&self, end: usize, hole_offset: usize) -> bool {
        end <= hole_offset
    }

    /// Parents resolved through imports and packages (the repository graph's).
    fn parents(&self, index: &RepoIndex, file: FileId) -> Vec<ParentLink> {
        index.graph.parents[file].clone()
    }

    /// The start: the class's first members.
    fn parent_keep(&self) -> Keep {
        Keep::Start
    }

    fn finish_parent_items(
        &self,
        items: SourcedText,
        _counted: Option<usize>,
        _keep: Keep,
        _req: &HoleRequest,
    ) -> (SourcedText, Option<usize>) {
        (items, None)
    }

    /// Any type: classes, interfaces, enums and records.
    fn names_in_class_line(&self, _kind: TypeKind) -> bool {
        true
    }

    /// Table 6's file ranking; the current file never feeds another source, as its text holds
    /// the hole's answer.
    fn rank_files(&self, source: PromptSource, req: &HoleRequest) -> Vec<FileId> {
        let index = req.index;
        let graph = &index.graph;
        let id = req.hole.file;
        let ranked = match source {
            PromptSource::Import => rank_imports(req),
            PromptSource::Sibling => rank_by_common_imports(req, graph.siblings(&index.files, id)),
            PromptSource::SimilarName => {
                rank_by_common_imports(req, graph.similar_names(&index.files, id))
            }
            PromptSource::ChildClass => rank_by_common_imports(req, graph.children[id].clone()),
            PromptSource::ImportOfSibling => {
                rank_imports_by_frequency(req, &graph.siblings(&index.files, id))
            }
            PromptSource::ImportOfSimilarName => {
                rank_imports_by_frequency(req, &graph.similar_names(&index.files, id))
            }
            PromptSource::ImportOfParentClass => {
                let parents: Vec<FileId> = graph.parents[id].iter().map(|l| l.file).collect();
                rank_imports_by_frequency(req, &parents)
            }
            PromptSource::ImportOfChildClass => rank_imports_by_frequency(req, &graph.children[id]),
            PromptSource::Current | PromptSource::ParentClass => {
                unreachable!("single-file sources")
            }
        };
        ranked.into_iter().filter(|&f| f != id).collect()
    }

    fn file_context(
        &self,
        req: &HoleRequest,
        file: FileId,
        context_type: ContextType,
    ) -> (SourcedText, Option<usize>) {
        (file_items(req, file, context_type, Keep::Start), None)
    }

    /// A label without context is noise.
    fn keeps_empty_file_labels(&self) -> bool {
        false
    }

    /// The label and its items cut together.
    fn file_part(
        &self,
        mut label: SourcedText,
        items: SourcedText,
        _counted: Option<usize>,
        req: &HoleRequest,
    ) -> (SourcedText, usize) {
        label.append(items);
        label.truncate(req.tokenizer, req.allocation, Keep::Start)
    }

    fn close_files(&self, text: &mut SourcedText, req: &HoleRequest) {
        push_current_class(text, req);
    }

    /// keyhole's composer: the context cut to its allocation, the default context given what
    /// it leaves (section 2.3). RLPG's code sends the context whole and cuts the joined prompt
    /// (see [`crate::context::fidelity`]).
    fn assembly(&self, _context_type: ContextType, _counted: Option<usize>) -> Assembly {
        Assembly::Capped
    }

    /// Method names are whole signatures (the paper's appendix B.2 example).
    fn item_spans(&self, source: &SourceFile, context_type: ContextType) -> Vec<Span> {
        fact_spans(source, context_type)
    }

    /// The whole declaration, from its signature.
    fn method_text(&self, _source: &SourceFile, method: &MethodDecl) -> Span {
        method.with_body
    }

    /// Keeps the start (the signature and first statements), each method an equal share.
    fn cut_body(
        &self,
        body: &SourcedText,
        tokenizer: &dyn Tokenizer,
        share: usize,
    ) -> (SourcedText, usize, usize) {
        let (cut, tokens) = body.truncate(tokenizer, share, Keep::Start);
        (cut, tokens, share)
    }
}

/// Distance in lines from the hole to the nearest usage of each import of the current file.
/// A usage on the hole line counts only if it is visible before the hole; the rest of that line
/// is the answer. Imports never used come last.
fn import_distances(req: &HoleRequest) -> Vec<(FileId, usize)> {
    let index = req.index;
    let file = &index.files[req.hole.file];
    let prefix = &file.text[file.line_start(req.hole.line)..req.hole.offset];
    imports_of(req, req.hole.file)
        .map(|import| {
            let visible_on_hole_line = index.files[import.file]
                .facts
                .types
                .iter()
                .any(|t| t.top_level && prefix.contains(t.name.as_str()));
            let distance = import
                .usage_lines
                .iter()
                .filter(|&&l| l as usize != req.hole.line || visible_on_hole_line)
                .map(|&l| (l as usize).abs_diff(req.hole.line))
                .min()
                .unwrap_or(usize::MAX);
            (import.file, distance)
        })
        .collect()
}

/// The repository files `file` imports, every kind keyhole resolves.
fn imports_of<'r>(
    req: &HoleRequest<'r>,
    file: FileId,
) -> impl Iterator<Item = &'r Import> + use<'r> {
    req.index.graph.imports[file].iter()
}

/// Import: import files ranked by how close their nearest usage is to the hole.
fn rank_imports(req: &HoleRequest) -> Vec<FileId> {
    let mut distances = import_distances(req);
    distances.sort_by_key(|&(file, d)| (d, file));
    distances.into_iter().map(|(f, _)| f).collect()
}

/// Sibling, Similar Name, Child Class: files sharing an import with the current file, ranked by
/// how close to the hole the nearest shared import is used, ties broken by the number of shared
/// imports; files sharing none follow in path order (the authors' code falls back to all of
/// them when none shares an import).
fn rank_by_common_imports(req: &HoleRequest, candidates: Vec<FileId>) -> Vec<FileId> {
    let distances = import_distances(req);
    let mut keyed: Vec<(usize, std::cmp::Reverse<usize>, FileId)> = candidates
        .into_iter()
        .map(|candidate| {
            let theirs: Vec<FileId> = imports_of(req, candidate).map(|i| i.file).collect();
            let shared: Vec<usize> = distances
                .iter()
                .filter(|(f, _)| theirs.contains(f))
                .map(|&(_, d)| d)
                .collect();
            let nearest = shared.iter().copied().min().unwrap_or(usize::MAX);
            (nearest, std::cmp::Reverse(shared.len()), candidate)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, f)| f).collect()
}

/// Import of X: the files X import, ranked by how many of the X files import each.
fn rank_imports_by_frequency(req: &HoleRequest, of: &[FileId]) -> Vec<FileId> {
    // Counted in a map: X can be hundreds of files (a large package's siblings).
    let mut counted: std::collections::HashMap<FileId, usize> = std::collections::HashMap::new();
    for &file in of {
        for import in imports_of(req, file) {
            *counted.entry(import.file).or_default() += 1;
        }
    }
    let mut counts: Vec<(FileId, usize)> = counted.into_iter().collect();
    counts.sort_unstable_by_key(|&(file, n)| (std::cmp::Reverse(n), file));
    counts.into_iter().map(|(f, _)| f).collect()
}
