//! The paper profile (`--fidelity paper`, the default): RLPG's proposals as the paper describes
//! them (section 2.1, appendix B), with keyhole's judgment where the paper is silent or a quirk
//! of the code would mislead; RepoCoder's prompt as its paper describes it. One row per rule;
//! the code profile's rows ([`super::code`]) say where the authors' code differs.

use super::{
    BlockBudget, BodyShare, ClassLine, Cutting, Identifiers, ItemText, MethodNames, MethodText,
    Rules, WindowOrder, WindowRules,
};
use crate::candidate::PromptSource;
use crate::context::HoleRequest;
use crate::repo::{FileId, Import, ParentLink, RepoIndex};
use crate::token::Keep;

/// The paper's reading.
pub static RULES: Rules = Rules {
    // Table 6's file ranking, on keyhole's repository graph (`rank_files` below).
    rank_files,
    // Parents resolved through imports and packages (the repository graph's).
    parents,
    // Whole signatures (appendix B.2's example).
    method_names: MethodNames::Signatures,
    // Identifiers alone (I): type identifiers are a context type of their own (TI).
    identifiers: Identifiers::Identifiers,
    // An item is its own bytes.
    item_text: ItemText::Span,
    // The whole declaration, from its signature.
    method_text: MethodText::Declaration,
    // An item ending where the hole starts is wholly before it.
    item_ending_at_hole_is_before: true,
    // B.3: the start of a parent class, its first members.
    parent_keep: Keep::Start,
    // The start of a body: its signature and first statements.
    body_keep: Keep::Start,
    // An equal share of the allocation each (the share the authors' code starts from).
    body_share: BodyShare::Equal,
    // Section 2.3: the composer cuts the context to its allocation, the default context gets
    // what it leaves. RLPG's code sends the context whole and cuts the joined prompt (see
    // [`crate::context::fidelity`]).
    cutting: Cutting::Composer,
    // B.5 class_name: any type, classes, interfaces, enums and records.
    class_line: ClassLine::AnyType,
    // A label without context is noise.
    keeps_empty_file_labels: false,
    // B.5: the files' contexts, then the class line.
    pads_file_list: false,
    // RepoCoder's blocks as its paper describes them, commented in the hole's language: half of
    // the budget, in its tokenizer.
    windows: WindowRules {
        comment: None,
        budget: BlockBudget::Allocation,
        skips_repeated_code: true,
        order: WindowOrder::Path,
        shows_first_place: false,
        splits_windows_again: false,
    },
};

/// Parents resolved through imports and packages (the repository graph's).
fn parents(index: &RepoIndex, file: FileId) -> Vec<ParentLink> {
    index.graph.parents[file].clone()
}

/// Table 6's file ranking; the current file never feeds another source, as its text holds
/// the hole's answer.
fn rank_files(source: PromptSource, req: &HoleRequest) -> Vec<FileId> {
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
