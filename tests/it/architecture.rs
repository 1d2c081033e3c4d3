//! What keeps the code base and its docs honest: the module graph has no cycles, neither
//! between top-level modules nor between the files of a folder, and the README and every
//! `--help` say what the candidate catalogue says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use keyhole::{CandidateId, testing::candidate};

/// Every `.rs` file under `root`: its path relative to `root` and its code before any
/// `#[cfg(test)]`.
fn sources_under(root: &Path) -> Vec<(String, String)> {
    let mut sources = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !rel.ends_with(".rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap().to_string();
            sources.push((rel, code));
        }
    }
    sources
}

/// The identifier starting at byte `at` of `code`.
fn word_at(code: &str, at: usize) -> String {
    code[at..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Top-level library modules and the ones each names through `crate::` (test code left out).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in sources_under(&src) {
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if ["lib", "main", "cli"].contains(&top.as_str()) {
            continue;
        }
        let uses = graph.entry(top.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let name = word_at(&code, at + "crate::".len());
            if name != top {
                uses.insert(name);
            }
        }
    }
    graph
}

#[test]
fn the_library_modules_import_each_other_without_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "{graph:?}");
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit<'g>(
        module: &'g str,
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'g str>,
        done: &mut BTreeSet<&'g str>,
    ) {
        if let Some(at) = path.iter().position(|&m| m == module) {
            panic!(
                "module cycle: {}",
                path[at..].join(" -> ") + " -> " + module
            );
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done);
    }
}

/// The terminal UI's modules in layers, lowest first: a module may import only modules of
/// lower layers, so the pure state never reaches up into rendering and the keymap and the state
/// do not import each other. `mod.rs` (the loop that wires them) sits above all of them.
const TUI_LAYERS: &[&[&str]] = &[
    // Vocabulary and data: commands and panes, screen geometry, colours, syntax, the log.
    &["command", "layout", "theme", "highlight", "log"],
    // Keys to commands.
    &["keymap"],
    // The pure state and its update.
    &["state"],
    // Drawing a state; turning a drawn buffer into SVG or PNG.
    &["ui", "svg", "png"],
    // Effects and the application around the state.
    &["driver"],
    &["app"],
];

/// The UI's submodules (`src/tui/<name>.rs` or `src/tui/<name>/`) and the siblings each names
/// (`crate::tui::x`, or `super::x` where that leads to `tui`), test code left out.
fn tui_graph() -> BTreeMap<String, BTreeSet<String>> {
    let tui = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in sources_under(&tui) {
        let rel = rel.trim_end_matches(".rs");
        // The module path below `tui`: a/mod.rs is `a`, a/b.rs is `a::b`.
        let module: Vec<&str> = rel.split('/').filter(|&part| part != "mod").collect();
        let Some(&top) = module.first() else {
            continue; // tui/mod.rs itself
        };
        if module.contains(&"tests") {
            continue;
        }
        let mut names: Vec<String> = code
            .match_indices("crate::tui::")
            .map(|(at, _)| word_at(&code, at + "crate::tui::".len()))
            .collect();
        // `super::` climbs one module per occurrence; as many as the depth reach `tui`.
        let supers = "super::".repeat(module.len());
        names.extend(
            code.match_indices(&supers)
                .filter(|&(at, _)| !code[..at].ends_with("super::"))
                .map(|(at, _)| word_at(&code, at + supers.len())),
        );
        let uses = graph.entry(top.to_string()).or_default();
        uses.extend(names.into_iter().filter(|n| n != top && !n.is_empty()));
    }
    graph
}

#[test]
fn the_ui_modules_depend_only_downwards() {
    let graph = tui_graph();
    let layer_of = |module: &str| TUI_LAYERS.iter().position(|layer| layer.contains(&module));
    for (module, uses) in &graph {
        let Some(layer) = layer_of(module) else {
            panic!("src/tui/{module} is in no layer of TUI_LAYERS (tests/it/architecture.rs)");
        };
        for used in uses {
            // Names that are not submodules (items of tui/mod.rs, such as `Options`) are the
            // loop's own and do not count.
            let Some(used_layer) = layer_of(used) else {
                assert!(
                    !graph.contains_key(used),
                    "src/tui/{used} is in no layer of TUI_LAYERS"
                );
                continue;
            };
            assert!(
                used_layer < layer,
                "tui::{module} imports tui::{used}, which is not below it in TUI_LAYERS"
            );
        }
    }
    // The ones the layering exists for.
    assert!(
        graph["state"].contains("keymap") && graph["ui"].contains("state"),
        "{graph:?}"
    );
    assert!(
        !graph["keymap"].contains("state") && !graph["state"].contains("ui"),
        "{graph:?}"
    );
}

/// A module's path below `src` from its file: `a/b/mod.rs` and `a/b.rs` are `a::b`.
fn module_path(rel: &str) -> Vec<String> {
    let rel = rel.trim_end_matches(".rs");
    let mut path: Vec<String> = rel.split('/').map(str::to_string).collect();
    if path
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        path.pop();
    }
    path
}

/// The module paths `code` names (`crate::a::b`, `super::c`, and each item of a braced
/// list), resolved from the module at `module`. Whole-line comments are left out: a doc link
/// is no import.
fn paths_named(module: &[String], code: &str) -> Vec<Vec<String>> {
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let prefix = regex::Regex::new(r"\b(crate|(?:super::)+)((?:::)?(?:\w+::)*)(\{|\w+)").unwrap();
    let mut paths = Vec::new();
    for found in prefix.captures_iter(&code) {
        let start = &found[1];
        let base: Vec<String> = if start == "crate" {
            Vec::new()
        } else {
            let up = start.matches("super::").count();
            module[..module.len().saturating_sub(up)].to_vec()
        };
        let middle: Vec<String> = found[2]
            .split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect();
        let heads: Vec<String> = if &found[3] == "{" {
            // The first name of each item of the list, at its top level.
            let rest = &code[found.get(3).unwrap().end()..];
            let (mut depth, mut item, mut items) = (0, String::new(), Vec::new());
            for c in rest.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    _ if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            items
                .iter()
                .filter_map(|item| item.trim().split("::").next().map(str::to_string))
                .filter(|head| !head.is_empty() && head != "self")
                .collect()
        } else {
            vec![found[3].to_string()]
        };
        for head in heads {
            let mut path = base.clone();
            path.extend(middle.iter().cloned());
            path.push(head);
            paths.push(path);
        }
    }
    paths
}

/// For each folder of `src` (below the top level, which
/// `the_library_modules_import_each_other_without_cycles` checks), the files and subfolders
/// it holds and the siblings each imports. An item `mod.rs` re-exports from a file counts as
/// that file's; one `mod.rs` defines itself is the folder's own and counts for none. Test
/// code is left out.
fn folder_graphs() -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources: BTreeMap<Vec<String>, String> = sources_under(&src)
        .into_iter()
        .filter(|(rel, _)| !rel.starts_with("cli/") && rel != "main.rs")
        .map(|(rel, code)| (module_path(&rel), code))
        .filter(|(module, _)| !module.iter().any(|part| part == "tests"))
        .collect();
    let folders: BTreeSet<Vec<String>> = sources
        .keys()
        .filter(|module| module.len() > 1)
        .map(|module| module[..module.len() - 1].to_vec())
        .collect();
    // What each folder's mod.rs re-exports: name -> the child it comes from.
    let reexport = regex::Regex::new(r"pub(?:\([^)]*\))? use (\w+)::(\{[^}]*\}|\w+)").unwrap();
    let word = regex::Regex::new(r"\w+").unwrap();
    let reexports = |folder: &Vec<String>| -> BTreeMap<String, String> {
        let code = sources.get(folder).map_or("", String::as_str);
        reexport
            .captures_iter(code)
            .flat_map(|found| {
                let child = found[1].to_string();
                word.find_iter(&found[2])
                    .map(|name| (name.as_str().to_string(), child.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let mut graphs = BTreeMap::new();
    for folder in folders {
        let reexported = reexports(&folder);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, code) in &sources {
            if module.len() <= folder.len() || !module.starts_with(&folder) {
                continue;
            }
            let from = module[folder.len()].clone();
            let uses = graph.entry(from.clone()).or_default();
            for path in paths_named(module, code) {
                if path.len() <= folder.len() || !path.starts_with(&folder) {
                    continue;
                }
                let name = &path[folder.len()];
                let mut child = folder.clone();
                child.push(name.clone());
                let to = match sources.keys().any(|m| m.starts_with(&child)) {
                    true => Some(name.clone()),
                    false => reexported.get(name).cloned(),
                };
                if let Some(to) = to.filter(|to| *to != from) {
                    uses.insert(to);
                }
            }
        }
        graphs.insert(folder, graph);
    }
    graphs
}

#[test]
fn no_folder_has_files_that_import_each_other_in_a_circle() {
    let graphs = folder_graphs();
    for (folder, graph) in &graphs {
        let folder = folder.join("/");
        fn visit<'g>(
            file: &'g str,
            graph: &'g BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<&'g str>,
            done: &mut BTreeSet<&'g str>,
            folder: &str,
        ) {
            if let Some(at) = path.iter().position(|&f| f == file) {
                panic!(
                    "src/{folder}: its files import each other in a circle: {} -> {file} \
                     (move what they share into a file of its own)",
                    path[at..].join(" -> ")
                );
            }
            if !done.insert(file) {
                return;
            }
            path.push(file);
            for next in graph.get(file).into_iter().flatten() {
                visit(next, graph, path, done, folder);
            }
            path.pop();
        }
        let mut done = BTreeSet::new();
        for file in graph.keys() {
            visit(file, graph, &mut Vec::new(), &mut done, &folder);
        }
    }
    // The imports are read: those of the files whose circles were taken apart among them.
    assert!(
        graphs[&vec!["lang".to_string()]]["java_typed"].contains("java_tree")
            && graphs[&vec!["context".to_string()]]["windows"].contains("profile"),
        "{graphs:?}"
    );
}

fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

/// The subcommands `keyhole --help` lists.
fn subcommands() -> Vec<String> {
    let text = help(&["--help"]);
    let list = text.split("Commands:").nth(1).unwrap();
    let list = list.split("\n\n").next().unwrap();
    list.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|&name| name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_lists_every_command_and_no_other() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let usage = readme.split("## Use").nth(1).unwrap();
    let block = usage.split("```").nth(1).unwrap();
    let listed: BTreeSet<String> = block
        .lines()
        .filter_map(|line| line.strip_prefix("keyhole "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|word| word.chars().all(|c| c.is_ascii_lowercase()))
        .map(str::to_string)
        .collect();
    let commands: BTreeSet<String> = subcommands().into_iter().collect();
    assert_eq!(
        listed, commands,
        "README's command list against `keyhole --help`"
    );
    assert!(
        block.contains(&candidate::id_kinds()),
        "the README names the ids as the catalogue does: {}",
        candidate::id_kinds()
    );
}

#[test]
fn every_help_text_names_candidate_ids_as_the_catalogue_does() {
    let retrieved = format!(
        "{}-{}",
        CandidateId::FIRST_RETRIEVED,
        CandidateId::COUNT - 1
    );
    let proposals = format!("0-{}", CandidateId::PROPOSALS - 1);
    let mut texts = vec![help(&["--help"])];
    texts.extend(subcommands().iter().map(|c| help(&[c, "--help"])));
    let mut checked = 0;
    for text in &texts {
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.windows(2) {
            let number = pair[1].trim_end_matches([',', ')', ';', '.']);
            let (kind, expected) = match pair[0] {
                "retrieved" | "candidates" if number.contains('-') => ("retrieved", &retrieved),
                "proposals" if number.contains('-') => ("proposals", &proposals),
                _ => continue,
            };
            if number.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                assert_eq!(number, expected.as_str(), "{kind} ids in:\n{text}");
                checked += 1;
            }
        }
        for (at, _) in text.match_indices("default context ") {
            let number: String = text[at + 16..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !number.is_empty() {
                assert_eq!(number, CandidateId::DEFAULT.to_string(), "{text}");
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 3,
        "the help texts name id ranges ({checked} found)"
    );
}
