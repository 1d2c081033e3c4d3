//! Typed-hole context from a real language server, as ChatLSP's TypeScript port asks one
//! (Blinn et al., OOPSLA 2024, sections 2.5, 2.6 and 3.1):
//!
//! - the hole is written as a call of a generic function declared for the purpose (`_()`
//!   after `declare function _<T>(): T`), the hole's line cut there; hovering over it gives
//!   the type the server inferred for `T`: the expected type;
//! - the names in that type are looked up with go-to-definition (from a line that writes the
//!   type, appended to the file), then the names in those definitions, to [`TYPE_DEPTH`]
//!   hops: the relevant type definitions (candidate 71);
//! - the completion list at the hole is the typing context the server knows; its entries whose
//!   type produces the expected type or a type it names are the relevant headers (candidate
//!   72), scored and cut as ChatLSP does. The paper's port simulated this step by hand, since
//!   the protocol has no typing-context request; completion with its items' details is the
//!   nearest a server offers.
//!
//! Only definitions inside the repository count (the standard library's are base types).
//! [`super::typed`] is the tree-sitter approximation used where no server is installed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::SourcedText;
use super::typed::{MAX_HEADERS, TYPE_DEPTH};
use crate::candidate::CandidateId;
use crate::hole::Hole;
use crate::lang::Span;
use crate::lsp::{Client, LspError, ServerSpec, uri_path};
use crate::repo::RepoIndex;

/// Definitions gathered for one hole at most, so a hole's requests stay bounded.
const MAX_DEFINITIONS: usize = 12;
/// Lines of one definition shown at most.
const MAX_DEFINITION_LINES: usize = 40;
/// Completion entries whose details are asked for at most.
const MAX_RESOLVED: usize = 60;
/// ChatLSP's score for an entry reaching a target through a component (typed.rs's too).
const RELATED_SCORE: f64 = 0.5;

/// A type definition the server pointed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// Repository-relative path of its file.
    pub path: String,
    /// Byte offset of its start in the file.
    pub start: usize,
    /// Its text, cut after `MAX_DEFINITION_LINES` lines.
    pub text: String,
    /// Whether lines were cut.
    pub cut: bool,
    /// 0 for a name of the expected type, 1 for a name in such a definition, and so on.
    pub hop: usize,
}

/// A value of the typing context, as the server describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerHeader {
    /// The server's declaration line for it (`function clear(g: Grid): Grid`).
    pub declaration: String,
    pub score: f64,
}

/// What the server says about a hole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerAnswer {
    pub expected: Option<String>,
    pub definitions: Vec<Definition>,
    pub headers: Vec<ServerHeader>,
}

/// The LSP `languageId` of a file.
pub fn language_id(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "jsx" => "javascriptreact",
        "py" | "pyi" => "python",
        _ => "javascript",
    }
}

/// An LSP position (0-based line, UTF-16 column) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> Value {
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    json!({"line": before.matches('\n').count(), "character": character})
}

/// The byte offset of an LSP position in `text`, clamped to its line.
fn offset_of(text: &str, line: usize, character: usize) -> usize {
    let line_start = if line == 0 {
        0
    } else {
        match text.match_indices('\n').nth(line - 1) {
            Some((i, _)) => i + 1,
            None => return text.len(),
        }
    };
    let mut units = 0;
    for (i, c) in text[line_start..].char_indices() {
        if units >= character || c == '\n' {
            return line_start + i;
        }
        units += c.len_utf16();
    }
    text.len()
}

/// The code in a hover answer: a markup string, a marked string or a list of them.
fn hover_text(hover: &Value) -> String {
    let contents = &hover["contents"];
    let parts: Vec<&Value> = match contents {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let texts = parts.iter().filter_map(|p| match p {
        Value::String(s) => Some(s.as_str()),
        Value::Object(_) => p["value"].as_str(),
        _ => None,
    });
    let text = texts.collect::<Vec<_>>().join("\n");
    // The first code block, where the answer is markdown.
    match text.split_once("```") {
        Some((_, rest)) => {
            let code = rest.split_once('\n').map_or(rest, |(_, c)| c);
            code.split("```").next().unwrap_or(code).trim().to_string()
        }
        None => text.trim().to_string(),
    }
}

/// The expected type in the hover text of the hole: TypeScript's `function _<X>(): X`,
/// pyright's `(variable) __keyhole_hole: X`. Unknown types say nothing.
pub fn expected_from_hover(signature: &str) -> Option<String> {
    let signature = signature.split_whitespace().collect::<Vec<_>>().join(" ");
    let ts = signature.strip_prefix("function _<").and_then(|inner| {
        // `X>(): X`: the argument and the return type are the same text.
        let n = inner.len().checked_sub(">(): ".len())? / 2;
        let (argument, rest) = (inner.get(..n)?, inner.get(n..)?);
        (rest.strip_prefix(">(): ")? == argument).then(|| argument.to_string())
    });
    let found = ts.or_else(|| {
        let (_, named) = signature.split_once("__keyhole_hole: ")?;
        Some(named.trim().to_string())
    })?;
    let unknown = [
        "unknown", "any", "Unknown", "", "Never", "never", "NoReturn",
    ];
    // pyright writes an unsolved type variable as `T@_`.
    (!unknown.contains(&found.as_str()) && !found.ends_with("@_")).then_some(found)
}

/// Identifiers of `text` that name types by convention (capitalized), with their offsets,
/// each name once.
fn type_names(text: &str) -> Vec<(usize, &str)> {
    let mut out: Vec<(usize, &str)> = Vec::new();
    let is_part = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (start, is_part(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                let word = &text[s..i];
                let preceded_by_dot = text[..s].ends_with('.');
                if word.starts_with(|c: char| c.is_uppercase())
                    && !preceded_by_dot
                    && !out.iter().any(|(_, w)| *w == word)
                {
                    out.push((s, word));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Where a definition answer points: (uri, start line, start character, end line, end
/// character), the whole declaration where the server gives it (`targetRange`).
fn locations(answer: &Value) -> Vec<(String, [usize; 4])> {
    let items: Vec<&Value> = match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    items
        .into_iter()
        .filter_map(|item| {
            let (uri, range) = match item.get("targetUri") {
                Some(uri) => (uri, &item["targetRange"]),
                None => (item.get("uri")?, &item["range"]),
            };
            let n = |v: &Value| v.as_u64().map(|n| n as usize);
            Some((
                uri.as_str()?.to_string(),
                [
                    n(&range["start"]["line"])?,
                    n(&range["start"]["character"])?,
                    n(&range["end"]["line"])?,
                    n(&range["end"]["character"])?,
                ],
            ))
        })
        .collect()
}

/// One hole's questions to one server.
struct Asking<'c> {
    client: &'c mut Client,
    root: PathBuf,
    /// The hole's file as the server has it.
    hole_path: PathBuf,
    hole_text: String,
    /// Other files' texts, as read for the server.
    texts: Vec<(PathBuf, String)>,
    /// Document symbols of the files asked about.
    symbols: Vec<(PathBuf, Value)>,
}

impl Asking<'_> {
    /// The text of an opened file, opening it from disk first.
    fn text(&mut self, path: &Path) -> Option<String> {
        if path == self.hole_path {
            return Some(self.hole_text.clone());
        }
        if let Some((_, text)) = self.texts.iter().find(|(p, _)| p == path) {
            return Some(text.clone());
        }
        // A server names files outside the repository too (a library's declarations), so
        // only the checks that keep a read bounded apply: a regular file, capped.
        let bytes = crate::repo::read_regular_file(path, crate::repo::MAX_FILE_BYTES).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let id = language_id(&path.to_string_lossy());
        self.client.open(path, id, &text).ok()?;
        self.texts.push((path.to_path_buf(), text.clone()));
        Some(text)
    }

    /// The range of the innermost document symbol of `path` called `name` around position
    /// `at` (line, character), the symbols asked for once per file.
    fn declaration_around(
        &mut self,
        path: &Path,
        name: &str,
        at: [usize; 2],
    ) -> Result<Option<[usize; 4]>, LspError> {
        let symbols = match self.symbols.iter().find(|(p, _)| p == path) {
            Some((_, symbols)) => symbols.clone(),
            None => {
                let params = json!({"textDocument": {"uri": crate::lsp::file_uri(path)}});
                let symbols = self.client.request("textDocument/documentSymbol", params)?;
                self.symbols.push((path.to_path_buf(), symbols.clone()));
                symbols
            }
        };
        let mut stack: Vec<&Value> = symbols
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let point = |v: &Value| -> Option<[usize; 2]> {
            Some([
                v["line"].as_u64()? as usize,
                v["character"].as_u64()? as usize,
            ])
        };
        let mut found = None;
        while let Some(symbol) = stack.pop() {
            let range = match symbol.get("location") {
                Some(location) => &location["range"],
                None => &symbol["range"],
            };
            if let (Some(start), Some(end)) = (point(&range["start"]), point(&range["end"])) {
                // Children come later, so the innermost symbol is the last found.
                if symbol["name"].as_str() == Some(name) && start <= at && at <= end {
                    found = Some([start[0], start[1], end[0], end[1]]);
                }
            }
            stack.extend(symbol["children"].as_array().into_iter().flatten());
        }
        Ok(found)
    }

    /// Definitions of the repository types named at `names` (offsets in `path`'s text).
    fn definitions_at(
        &mut self,
        path: &Path,
        text: &str,
        names: &[(usize, &str)],
    ) -> Result<Vec<(PathBuf, usize, usize)>, LspError> {
        let mut out = Vec::new();
        for &(at, _) in names {
            let params = json!({
                "textDocument": {"uri": crate::lsp::file_uri(path)},
                "position": position(text, at),
            });
            // Go to Type Definition, as ChatLSP's port asks (go-to-definition stops at an
            // import); go-to-definition where a server has no type definitions.
            let mut answer = self
                .client
                .request("textDocument/typeDefinition", params.clone())?;
            if locations(&answer).is_empty() {
                answer = self.client.request("textDocument/definition", params)?;
            }
            for (uri, [l0, c0, l1, c1]) in locations(&answer) {
                let Some(target) = uri_path(&uri) else {
                    continue;
                };
                let inside = target.starts_with(&self.root)
                    && !target.components().any(|c| c.as_os_str() == "node_modules");
                if !inside {
                    continue;
                }
                let Some(target_text) = self.text(&target) else {
                    continue;
                };
                // A type definition may point at the name only: the declaration is the
                // document symbol that name names.
                let named = &target_text[offset_of(&target_text, l0, c0)..];
                let name = &named[..named
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                    .unwrap_or(named.len())];
                let [l0, c0, l1, c1] = self
                    .declaration_around(&target, name, [l0, c0])?
                    .unwrap_or([l0, c0, l1, c1]);
                let start = offset_of(&target_text, l0, c0);
                let end = offset_of(&target_text, l1, c1).max(start);
                out.push((target, start, end));
            }
        }
        Ok(out)
    }
}

/// Ask the server of `spec` about the hole at byte `offset` of the file at `path` (absolute,
/// under `root`) whose text is `text`.
pub fn ask(
    client: &mut Client,
    spec: &ServerSpec,
    root: &Path,
    path: &Path,
    text: &str,
    offset: usize,
) -> Result<ServerAnswer, LspError> {
    let offset = text.floor_char_boundary(offset.min(text.len()));
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let hole = spec.prelude.len() + offset;
    let cut = format!(
        "{}{}{}{}",
        spec.prelude,
        &text[..offset],
        spec.placeholder,
        &text[line_end..]
    );
    let id = language_id(&path.to_string_lossy());
    client.open(path, id, &cut)?;
    let at_hole = json!({
        "textDocument": {"uri": crate::lsp::file_uri(path)},
        "position": position(&cut, hole + spec.hover_at),
    });
    let hover = client.request("textDocument/hover", at_hole.clone())?;
    let Some(expected) = expected_from_hover(&hover_text(&hover)) else {
        return Ok(ServerAnswer::default());
    };
    // A line writing the expected type, where its names can be looked up.
    let probed = format!("{cut}{}", spec.type_probe.replace("{}", &expected));
    client.open(path, id, &probed)?;
    let probe_start = cut.len() + spec.type_probe.find("{}").unwrap_or(0);
    let mut asking = Asking {
        client,
        root: root.to_path_buf(),
        hole_path: path.to_path_buf(),
        hole_text: probed.clone(),
        texts: Vec::new(),
        symbols: Vec::new(),
    };
    let names: Vec<(usize, &str)> = type_names(&expected)
        .into_iter()
        .map(|(at, name)| (probe_start + at, name))
        .collect();
    let mut found: Vec<(PathBuf, usize, usize, usize)> = Vec::new();
    let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
    let mut level = asking.definitions_at(path, &probed, &names)?;
    for hop in 0..=TYPE_DEPTH {
        let mut next = Vec::new();
        for (file, start, end) in level {
            if found.len() == MAX_DEFINITIONS || !seen.insert((file.clone(), start)) {
                continue;
            }
            found.push((file.clone(), start, end, hop));
            if hop < TYPE_DEPTH {
                let Some(file_text) = asking.text(&file) else {
                    continue;
                };
                let body = &file_text[start..end];
                let own = type_names(body).first().map(|(_, n)| *n);
                let names: Vec<(usize, &str)> = type_names(body)
                    .into_iter()
                    .filter(|(_, n)| Some(*n) != own)
                    .map(|(at, n)| (start + at, n))
                    .collect();
                next.extend(asking.definitions_at(&file, &file_text, &names)?);
            }
        }
        level = next;
    }
    let definitions = found
        .into_iter()
        .filter_map(|(file, start, end, hop)| {
            let file_text = asking.text(&file)?;
            let mut text: Vec<&str> = file_text[start..end].lines().collect();
            let long = text.len() > MAX_DEFINITION_LINES;
            text.truncate(MAX_DEFINITION_LINES);
            let relative = file.strip_prefix(root).unwrap_or(&file);
            Some(Definition {
                path: relative.to_string_lossy().replace('\\', "/"),
                start,
                text: text.join("\n"),
                cut: long,
                hop,
            })
        })
        .collect::<Vec<_>>();
    let targets: Vec<String> = std::iter::once(normalize(&expected))
        .chain(
            type_names(&expected)
                .into_iter()
                .map(|(_, n)| n.to_string()),
        )
        .collect();
    let headers = headers(asking.client, at_hole, &targets)?;
    Ok(ServerAnswer {
        expected: Some(expected),
        definitions,
        headers,
    })
}

fn normalize(written: &str) -> String {
    written.split_whitespace().collect()
}

/// The type a completion entry's declaration produces: a function's return type, a value's
/// type.
fn produced_type(declaration: &str) -> Option<&str> {
    let after = |mark: &str| {
        declaration
            .rfind(mark)
            .map(|i| &declaration[i + mark.len()..])
    };
    after("-> ")
        .or_else(|| after("): "))
        .or_else(|| declaration.split_once(": ").map(|(_, t)| t))
}

/// ChatLSP's score of an entry against the targets: 1 for a type consistent with one, a half
/// for one that has a target among its components, else 0.
fn score(declaration: &str, targets: &[String]) -> f64 {
    let Some(produced) = produced_type(declaration) else {
        return 0.0;
    };
    let produced_normal = normalize(produced);
    if targets.contains(&produced_normal) {
        return 1.0;
    }
    let mentions = type_names(produced)
        .iter()
        .any(|(_, n)| targets.iter().skip(1).any(|t| t == n));
    if mentions { RELATED_SCORE } else { 0.0 }
}

/// Completion kinds that are values: method, function, field, variable, property, constant.
const VALUE_KINDS: [u64; 6] = [2, 3, 5, 6, 10, 21];

/// The typing context at the hole, from the server's completion list, scored against the
/// targets and cut as ChatLSP cuts it.
fn headers(
    client: &mut Client,
    at_hole: Value,
    targets: &[String],
) -> Result<Vec<ServerHeader>, LspError> {
    let answer = client.request("textDocument/completion", at_hole)?;
    let items = match &answer {
        Value::Array(items) => items.clone(),
        other => other["items"].as_array().cloned().unwrap_or_default(),
    };
    let mut items: Vec<Value> = items
        .into_iter()
        .filter(|i| i["kind"].as_u64().is_some_and(|k| VALUE_KINDS.contains(&k)))
        .filter(|i| !i["label"].as_str().unwrap_or("_").starts_with('_'))
        .collect();
    // Nearest first: servers sort locals and the file's own names before globals.
    items.sort_by(|a, b| {
        let key = |i: &Value| i["sortText"].as_str().unwrap_or("").to_string();
        key(a).cmp(&key(b))
    });
    let mut scored = Vec::new();
    for item in items.into_iter().take(MAX_RESOLVED) {
        let detail = match item["detail"].as_str() {
            Some(detail) => detail.to_string(),
            None => {
                let resolved = client.request("completionItem/resolve", item.clone())?;
                match resolved["detail"].as_str().filter(|d| !d.is_empty()) {
                    Some(detail) => detail.to_string(),
                    // pyright puts the declaration first in the documentation.
                    None => {
                        let documentation = json!({"contents": resolved["documentation"]});
                        let text = hover_text(&documentation);
                        text.lines().next().unwrap_or_default().to_string()
                    }
                }
            }
        };
        let declaration = detail.split_whitespace().collect::<Vec<_>>().join(" ");
        let score = score(&declaration, targets);
        if score > 0.0 {
            scored.push(ServerHeader { declaration, score });
        }
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    scored.truncate(MAX_HEADERS);
    Ok(scored)
}

/// Both candidates' contexts from the server's answer, written with the line comments of the
/// hole's language; definitions in files of the index keep their provenance.
pub fn contexts(
    answer: &ServerAnswer,
    index: &RepoIndex,
    hole: &Hole,
) -> [(CandidateId, SourcedText); 2] {
    let comment = index.files[hole.file].language.line_comment();
    let mut types = SourcedText::default();
    if let Some(expected) = &answer.expected {
        types.push_plain(&format!(
            "{comment} Expected type at the hole: {expected}\n"
        ));
        if !answer.definitions.is_empty() {
            types.push_plain(&format!("{comment} Relevant type definitions:\n"));
        }
        for definition in &answer.definitions {
            let in_index = index
                .file_id(&definition.path)
                .filter(|&id| id != hole.file)
                .filter(|&id| {
                    let end = definition.start + definition.text.len();
                    index.files[id].text.get(definition.start..end) == Some(&definition.text)
                });
            match in_index {
                Some(id) => {
                    let end = definition.start + definition.text.len();
                    types.push_span(index, id, Span::new(definition.start, end));
                }
                None => types.push_plain(&definition.text),
            }
            types.push_plain(if definition.cut { "\n...\n" } else { "\n" });
        }
    }
    let mut headers = SourcedText::default();
    if !answer.headers.is_empty() {
        headers.push_plain(&format!(
            "{comment} Consider using these variables relevant to the expected type:\n"
        ));
        for header in &answer.headers {
            headers.push_plain(&format!("{};\n", header.declaration));
        }
    }
    [
        (CandidateId::TYPED_TYPES, types),
        (CandidateId::TYPED_HEADERS, headers),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_type_is_read_off_the_hole_functions_hover() {
        let read = |s: &str| expected_from_hover(s);
        assert_eq!(read("function _<Model>(): Model").as_deref(), Some("Model"));
        assert_eq!(
            read("function _<(m: Model, a: Action) => Model>(): (m: Model, a: Action) => Model")
                .as_deref(),
            Some("(m: Model, a: Action) => Model")
        );
        assert_eq!(
            read("function _<{ f(): number; }>(): { f(): number; }").as_deref(),
            Some("{ f(): number; }")
        );
        assert_eq!(
            read("(variable) __keyhole_hole: list[Order]").as_deref(),
            Some("list[Order]")
        );
        assert_eq!(read("(variable) __keyhole_hole: T@_"), None);
        assert_eq!(read("function _<unknown>(): unknown"), None);
        assert_eq!(read("const x: number"), None);
    }

    #[test]
    fn hover_text_takes_the_code_of_markdown() {
        let hover = json!({"contents": {"kind": "markdown", "value": "\n```typescript\nfunction _<Grid>(): Grid\n```\n"}});
        assert_eq!(hover_text(&hover), "function _<Grid>(): Grid");
        let marked = json!({"contents": [{"language": "typescript", "value": "let a: A"}, "doc"]});
        assert_eq!(hover_text(&marked), "let a: A\ndoc");
    }

    #[test]
    fn positions_count_utf16_units_and_read_back() {
        let text = "é𝄞x\nab";
        assert_eq!(position(text, 6), json!({"line": 0, "character": 3}));
        assert_eq!(offset_of(text, 0, 3), 6);
        assert_eq!(position(text, 9), json!({"line": 1, "character": 1}));
        assert_eq!(offset_of(text, 1, 1), 9);
        assert_eq!(offset_of(text, 5, 0), text.len());
    }

    #[test]
    fn type_names_are_capitalized_identifiers_once_not_members() {
        let names: Vec<&str> = type_names("Map<Row, Grid[]> | ns.Inner | Row | string")
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        assert_eq!(names, ["Map", "Row", "Grid"]);
    }

    #[test]
    fn headers_score_as_chatlsp_does() {
        let targets = vec!["Grid".to_string(), "Grid".to_string()];
        assert_eq!(score("function clear(g: Grid): Grid", &targets), 1.0);
        assert_eq!(score("const grid: Grid", &targets), 1.0);
        assert_eq!(
            score("function rows(g: Grid): Grid[]", &targets),
            RELATED_SCORE
        );
        assert_eq!(score("function count(g: Grid): number", &targets), 0.0);
        assert_eq!(score("def load(path: str) -> Grid", &targets), 1.0);
        assert_eq!(score("(variable) grid: Grid", &targets), 1.0);
    }

    #[test]
    fn definition_answers_of_every_shape_give_their_ranges() {
        let range =
            json!({"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 4}});
        let link = json!([{"targetUri": "file:///a.ts", "targetRange": range, "targetSelectionRange": range}]);
        let location = json!({"uri": "file:///b.ts", "range": range});
        assert_eq!(
            locations(&link),
            vec![("file:///a.ts".to_string(), [1, 2, 3, 4])]
        );
        assert_eq!(
            locations(&location),
            vec![("file:///b.ts".to_string(), [1, 2, 3, 4])]
        );
        assert!(locations(&Value::Null).is_empty());
    }
}
