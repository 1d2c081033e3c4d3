//! Typed-hole context from a real language server, as ChatLSP's TypeScript port asks one
//! (Blinn et al., OOPSLA 2024, sections 2.5, 2.6 and 3.1):
//!
//! - the expected type is what the server says the hole's place means: at an argument the
//!   active parameter's type in its signature help, at an annotated declaration's value the
//!   declared type its hover gives the name. Elsewhere, and where the server says nothing
//!   there, the hole is written as a call of a generic function declared for the purpose
//!   (`_()` after `declare function _<T>(): T`), the hole's line cut there, and hovering over
//!   it gives the type the server inferred for `T`, ChatLSP's way. That inference loses an
//!   expected `T | undefined`'s `undefined`, so a return, an argument or a declaration the
//!   server says nothing of takes the syntax tree's type first (and says so);
//! - the names in that type are looked up with go-to-definition (from a line that writes the
//!   type, appended to the file), then the names its definition is written with, to
//!   [`TYPE_DEPTH`] hops: the relevant type definitions (candidate 71). Only what names a type
//!   declared in a repository file counts, and each is shown as the syntax tree outlines it
//!   ([`TypedHole::push_definition`]: Python's `class C:` with annotated attributes and
//!   `def m(...) -> T: ...` stubs, TypeScript's `interface`/`type` with their names), so the
//!   server's and the syntax tree's definitions read alike and every piece names its file;
//! - the completion list at the hole is the typing context the server knows; its entries whose
//!   type produces the expected type or a type it names are the relevant headers (candidate
//!   72), scored and cut as ChatLSP does. The paper's port simulated this step by hand, since
//!   the protocol has no typing-context request; completion with its items' details is the
//!   nearest a server offers.
//!
//! Only definitions inside the repository count (the standard library's are base types).
//! [`super::typed`] is the tree-sitter approximation used where no server is installed.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::SourcedText;
use super::typed::{MAX_HEADERS, TYPE_DEPTH, TypeRef, TypedHole};
use crate::candidate::CandidateId;
use crate::hole::Hole;
use crate::lang::typescript::union_members;
use crate::lang::{DeclarationStyle, HolePlace};
use crate::lsp::{Client, LspError, ServerSpec, uri_path};
use crate::repo::{FileId, RepoIndex};

/// Definitions gathered for one hole at most, so a hole's requests stay bounded.
const MAX_DEFINITIONS: usize = 12;
/// Completion entries whose details are asked for at most.
const MAX_RESOLVED: usize = 60;

/// A type definition the server pointed to: a type declared in a file of the repository,
/// shown as the syntax tree outlines it (bodies and documentation left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// Repository-relative path of its file.
    pub path: String,
    /// Byte offset of its declaration's start in the file.
    pub start: usize,
    /// 0 for a name of the expected type, 1 for a name in such a definition, and so on.
    pub hop: usize,
}

/// A value of the typing context, as the server describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerHeader {
    /// The server's declaration line for it (`function clear(g: Grid): Grid`).
    pub declaration: String,
    pub score: f64,
}

/// What the server says about a hole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerAnswer {
    pub expected: Option<String>,
    /// Whether the expected type is the syntax tree's (the server said nothing at the hole).
    #[serde(default)]
    pub expected_by_syntax: bool,
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
    // pyright's plain text goes on with the type's documentation after a blank line.
    let signature = signature.split("\n\n").next().unwrap_or(signature);
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

/// Where a definition answer points: (uri, line, character) of the name it names where the
/// server says (`targetSelectionRange`), else of the start of its range.
fn locations(answer: &Value) -> Vec<(String, [usize; 2])> {
    let items: Vec<&Value> = match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    items
        .into_iter()
        .filter_map(|item| {
            let (uri, range) = match item.get("targetUri") {
                Some(uri) => (uri, &item["targetSelectionRange"]),
                None => (item.get("uri")?, &item["range"]),
            };
            let n = |v: &Value| v.as_u64().map(|n| n as usize);
            Some((
                uri.as_str()?.to_string(),
                [
                    n(&range["start"]["line"])?,
                    n(&range["start"]["character"])?,
                ],
            ))
        })
        .collect()
}

/// Where the bytes of the hole's file are in the text the server is given: the prelude
/// before it, the rest of the hole's line replaced by the placeholder.
#[derive(Clone, Copy)]
struct HoleText {
    prelude: usize,
    hole: usize,
    line_end: usize,
    placeholder: usize,
}

impl HoleText {
    /// Byte `original` of the file in the server's text; none in the cut rest of the line.
    fn to_server(self, original: usize) -> Option<usize> {
        match original {
            o if o < self.hole => Some(o + self.prelude),
            o if o >= self.line_end => {
                Some(o - self.line_end + self.hole + self.placeholder + self.prelude)
            }
            _ => None,
        }
    }

    /// The byte of the file that byte `at` of the server's text is; none in what keyhole wrote.
    fn to_original(self, at: usize) -> Option<usize> {
        let after = self.prelude + self.hole + self.placeholder;
        match at {
            a if a < self.prelude => None,
            a if a < self.prelude + self.hole => Some(a - self.prelude),
            a if a >= after => Some(a - after + self.line_end),
            _ => None,
        }
    }
}

/// One hole's questions to one server.
struct Asking<'c> {
    client: &'c mut Client,
    index: &'c RepoIndex,
    typed: &'c TypedHole<'c>,
    hole_file: FileId,
    /// The hole's file as the server has it now.
    hole_text: String,
    hole_at: HoleText,
    /// Files other than the hole's opened for the server.
    opened: HashSet<FileId>,
}

impl Asking<'_> {
    fn path(&self, file: FileId) -> PathBuf {
        self.index.root.join(&self.index.files[file].path)
    }

    /// The text of `file` as the server has it, opened first (as the index read it).
    fn text(&mut self, file: FileId) -> Result<&str, LspError> {
        if file == self.hole_file {
            return Ok(&self.hole_text);
        }
        let source = &self.index.files[file];
        if self.opened.insert(file) {
            let path = self.path(file);
            self.client
                .open(&path, language_id(&source.path), &source.text)?;
        }
        Ok(&source.text)
    }

    /// The repository types the server's definitions of the names at `at` (byte offsets of
    /// `file`'s text as the server has it) name.
    fn definitions_at(&mut self, file: FileId, at: &[usize]) -> Result<Vec<TypeRef>, LspError> {
        let mut out = Vec::new();
        let path = self.path(file);
        for &offset in at {
            let params = json!({
                "textDocument": {"uri": crate::lsp::file_uri(&path)},
                "position": position(self.text(file)?, offset),
            });
            // Go to Type Definition, as ChatLSP's port asks (go-to-definition stops at an
            // import); go-to-definition where a server has no type definitions.
            let mut answer = self
                .client
                .request("textDocument/typeDefinition", params.clone())?;
            if locations(&answer).is_empty() {
                answer = self.client.request("textDocument/definition", params)?;
            }
            for (uri, [line, character]) in locations(&answer) {
                let Some(target) = uri_path(&uri) else {
                    continue;
                };
                // Only the repository's own files: a library's declarations are base types.
                let Some(found) = target
                    .strip_prefix(&self.index.root)
                    .ok()
                    .and_then(|relative| self.index.file_id(&relative.to_string_lossy()))
                else {
                    continue;
                };
                let at = offset_of(self.text(found)?, line, character);
                let original = match found == self.hole_file {
                    true => self.hole_at.to_original(at),
                    false => Some(at),
                };
                out.extend(original.and_then(|o| self.typed.type_declared_at(found, o)));
            }
        }
        Ok(out)
    }

    /// Where the types `t`'s definition is written with are named, in its file as the
    /// server has it, its own name left out.
    fn names_in(&self, t: TypeRef) -> Vec<usize> {
        let file = &self.index.files[t.file];
        let own = &self.typed.type_at(t).name;
        let mut out = Vec::new();
        for span in self.typed.written_types(t) {
            let written = &file.text[span.range()];
            for (at, name) in type_names(written) {
                let original = span.start as usize + at;
                let in_server = match t.file == self.hole_file {
                    true => self.hole_at.to_server(original),
                    false => Some(original),
                };
                if name != own {
                    out.extend(in_server);
                }
            }
        }
        out
    }
}

/// Bumped whenever [`ServerAnswer`] or what [`ask`] asks changes, so older answers are not
/// reused.
const ANSWER_FORMAT: u32 = 3;

/// The answer of the server of `spec` at `hole`, asked once per content: kept in the
/// repository's cache under the server's identity, the hole's file's text, the hole and the
/// texts of the repository files it imports, so a call on an unchanged file starts no server.
/// `None` where no server is chosen or installed; a failure is not kept.
pub fn cached_answer(
    spec: &'static ServerSpec,
    index: &RepoIndex,
    hole: &Hole,
) -> Option<Result<ServerAnswer, LspError>> {
    let key = answer_key(spec, index, hole)?;
    let cache = index.keyed_cache("server-answers");
    if let Some(answer) = cache.as_ref().and_then(|c| c.load::<ServerAnswer>(&key)) {
        return Some(Ok(answer));
    }
    let asked = index
        .language_servers
        .with(spec, &index.root, |client| ask(client, spec, index, hole))?;
    if let (Ok(answer), Some(cache)) = (&asked, &cache) {
        cache.store(&key, answer);
    }
    Some(asked)
}

/// Whether typing `hole` would ask a language server now: one is chosen and installed for its
/// language and no answer is kept for it (the UI builds the other candidates meanwhile).
pub fn would_ask_a_server(index: &RepoIndex, hole: &Hole) -> bool {
    let Some(spec) = index.files[hole.file].language.language_server() else {
        return false;
    };
    let Some(key) = answer_key(spec, index, hole) else {
        return false;
    };
    let cache = index.keyed_cache("server-answers");
    cache.and_then(|c| c.load::<ServerAnswer>(&key)).is_none()
}

/// The key of the server's answer at `hole`; none where no server is chosen or installed.
fn answer_key(spec: &ServerSpec, index: &RepoIndex, hole: &Hole) -> Option<[u8; 32]> {
    let identity = index.language_servers.identity(spec)?;
    let mut key = blake3::Hasher::new();
    key.update(&ANSWER_FORMAT.to_le_bytes());
    key.update(identity.as_bytes());
    key.update(&(hole.offset as u64).to_le_bytes());
    key.update(&index.files[hole.file].hash);
    for import in &index.graph.imports[hole.file] {
        key.update(&index.files[import.file].hash);
    }
    Some(*key.finalize().as_bytes())
}

/// Ask the server of `spec` about `hole`: its expected type, the repository types that type
/// is written with (followed to [`TYPE_DEPTH`] hops) and the typing context's headers.
pub fn ask(
    client: &mut Client,
    spec: &ServerSpec,
    index: &RepoIndex,
    hole: &Hole,
) -> Result<ServerAnswer, LspError> {
    let file = &index.files[hole.file];
    let path = index.root.join(&file.path);
    let text = &file.text;
    let offset = text.floor_char_boundary(hole.offset.min(text.len()));
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let hole_at = HoleText {
        prelude: spec.prelude.len(),
        hole: offset,
        line_end,
        placeholder: spec.placeholder.len(),
    };
    let cut = format!(
        "{}{}{}{}",
        spec.prelude,
        &text[..offset],
        spec.placeholder,
        &text[line_end..]
    );
    let id = language_id(&file.path);
    client.open(&path, id, &cut)?;
    let document = json!({"uri": crate::lsp::file_uri(&path)});
    let at = |offset: usize| json!({"textDocument": document, "position": position(&cut, offset)});
    let at_hole = at(hole_at.prelude + offset + spec.hover_at);
    let typed = TypedHole::new(index, hole);
    let by_syntax = typed.expected().map(|e| e.text.clone());
    let types = file.language.types();
    let python = types.declaration_style() == DeclarationStyle::Python;
    let at_place = match typed.place() {
        HolePlace::Argument => {
            let params = json!({
                "textDocument": document,
                "position": position(&cut, hole_at.prelude + offset),
                "context": {"triggerKind": 1, "isRetrigger": false},
            });
            let help = client.request("textDocument/signatureHelp", params)?;
            match python {
                true => active_parameter(&help).and_then(|label| pyright_parameter_type(&label)),
                false => match parameter_type(&help) {
                    Some(written) => Some(instantiated(client, at_hole.clone(), written)?),
                    None => None,
                },
            }
        }
        HolePlace::Declaration { name } if python => {
            let declared = format!(
                "{}{}{}",
                spec.prelude,
                without_value(&text[..offset], name),
                &text[line_end..]
            );
            client.open(&path, id, &declared)?;
            let hover = client.request("textDocument/hover", at(hole_at.prelude + name));
            client.open(&path, id, &cut)?;
            pyright_declared_type(&hover_text(&hover?), name_at(text, name))
        }
        HolePlace::Declaration { name } => {
            let hover = client.request("textDocument/hover", at(hole_at.prelude + name))?;
            declared_type(&hover_text(&hover), name_at(text, name))
        }
        HolePlace::Return | HolePlace::Other => None,
    };
    // In the one normal form the syntax tree's types are stated in.
    let at_place = at_place.map(|t| types.normal_form(&t));
    let (expected, expected_by_syntax) = match (at_place, by_syntax) {
        (Some(t), _) => (t, false),
        (None, Some(t)) if typed.place() != HolePlace::Other => (t, true),
        (None, by_syntax) => {
            let hover = client.request("textDocument/hover", at_hole.clone())?;
            let inferred = expected_from_hover(&hover_text(&hover)).map(|t| types.normal_form(&t));
            match (inferred, by_syntax) {
                (Some(t), _) => (t, false),
                (None, Some(t)) => (t, true),
                (None, None) => return Ok(ServerAnswer::default()),
            }
        }
    };
    // A line writing the expected type, where its names can be looked up.
    let probed = format!("{cut}{}", spec.type_probe.replace("{}", &expected));
    client.open(&path, id, &probed)?;
    let probe_start = cut.len() + spec.type_probe.find("{}").unwrap_or(0);
    let mut asking = Asking {
        client,
        index,
        typed: &typed,
        hole_file: hole.file,
        hole_text: probed,
        hole_at,
        opened: HashSet::new(),
    };
    let names: Vec<usize> = type_names(&expected)
        .into_iter()
        .map(|(at, _)| probe_start + at)
        .collect();
    let mut found: Vec<(TypeRef, usize)> = Vec::new();
    let mut level = asking.definitions_at(hole.file, &names)?;
    for hop in 0..=TYPE_DEPTH {
        let mut next = Vec::new();
        for t in level {
            if found.len() == MAX_DEFINITIONS || found.iter().any(|(f, _)| *f == t) {
                continue;
            }
            found.push((t, hop));
            if hop < TYPE_DEPTH {
                let names = asking.names_in(t);
                next.extend(asking.definitions_at(t.file, &names)?);
            }
        }
        level = next;
    }
    let definitions = found
        .into_iter()
        .filter_map(|(t, hop)| {
            Some(Definition {
                path: index.files[t.file].path.clone(),
                start: typed.declaration_start(t)?,
                hop,
            })
        })
        .collect();
    let headers = headers(asking.client, at_hole, &typed, &expected)?;
    Ok(ServerAnswer {
        expected: Some(expected),
        expected_by_syntax,
        definitions,
        headers,
    })
}

/// The type of the active parameter of a signature help answer: `T` of `name: T`, with
/// `| undefined` for an optional `name?: T` (what the checker expects there), the element
/// type of a rest parameter `...name: T[]`.
fn parameter_type(help: &Value) -> Option<String> {
    written_parameter_type(&active_parameter(help)?)
}

/// The label of the active parameter of a signature help answer (`name: T`).
fn active_parameter(help: &Value) -> Option<String> {
    let active_signature = help["activeSignature"].as_u64().unwrap_or(0) as usize;
    let signature = help["signatures"].get(active_signature)?;
    let active = signature["activeParameter"]
        .as_u64()
        .or_else(|| help["activeParameter"].as_u64())? as usize;
    let parameter = signature["parameters"].get(active)?;
    let label = match &parameter["label"] {
        Value::String(label) => label.clone(),
        // Offsets in UTF-16 units into the signature's label.
        Value::Array(range) => {
            let n = |v: &Value| v.as_u64().map(|n| n as usize);
            let (start, end) = (n(range.first()?)?, n(range.get(1)?)?);
            let units: Vec<u16> = signature["label"].as_str()?.encode_utf16().collect();
            String::from_utf16(units.get(start..end)?).ok()?
        }
        _ => return None,
    };
    Some(label)
}

/// The parameter type `written` as the checker instantiates it at the hole: signature help
/// writes a parameter as declared (`final: ParsePayload`), while TypeScript expects the type
/// with its default type arguments (`ParsePayload<unknown>`), which the hole's own inference
/// (hovering over it) shows.
fn instantiated(client: &mut Client, at_hole: Value, written: String) -> Result<String, LspError> {
    let hover = client.request("textDocument/hover", at_hole)?;
    Ok(match expected_from_hover(&hover_text(&hover)) {
        Some(inferred) => with_type_arguments(&written, &inferred).unwrap_or(written),
        None => written,
    })
}

/// `written` with each member of its union that `inferred` writes with type arguments
/// (`ParsePayload` → `ParsePayload<unknown>`) taken from `inferred`; none where a member of
/// `written` is not in `inferred`, so nothing but type arguments is ever taken from it.
fn with_type_arguments(written: &str, inferred: &str) -> Option<String> {
    let inferred = union_members(inferred);
    let members = union_members(written);
    let taken: Vec<&str> = members
        .iter()
        .map(|&member| {
            inferred.iter().copied().find(|&i| {
                i == member
                    || (i.strip_prefix(member))
                        .is_some_and(|args| args.starts_with('<') && args.ends_with('>'))
            })
        })
        .collect::<Option<_>>()?;
    (taken != members).then(|| taken.join(" | "))
}

/// The expected type of an argument for the parameter written `label`.
fn written_parameter_type(label: &str) -> Option<String> {
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut depth = 0i32;
    let colon = label.char_indices().find_map(|(i, c)| {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ':' if depth == 0 => return Some(i),
            _ => {}
        }
        None
    })?;
    let (name, written) = (label[..colon].trim(), label[colon + 1..].trim());
    if written.is_empty() || written == "any" || written == "unknown" {
        return None;
    }
    if name.starts_with("...") {
        let element = written.strip_suffix("[]")?;
        let element = match element.strip_prefix('(') {
            Some(inner) => inner.strip_suffix(')')?,
            None => element,
        };
        return Some(element.to_string());
    }
    let has_undefined = union_members(written).contains(&"undefined");
    Some(match name.ends_with('?') && !has_undefined {
        true => format!("{written} | undefined"),
        false => written.to_string(),
    })
}

/// The type a hover's declaration line (`const name: T`, `(property) C.name: T`) gives
/// `name`.
fn declared_type(code: &str, name: &str) -> Option<String> {
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let found = code.match_indices(name).find_map(|(i, _)| {
        let before = code[..i].chars().next_back();
        let rest = &code[i + name.len()..];
        let written = rest
            .strip_prefix(": ")
            .or_else(|| rest.strip_prefix("?: "))?;
        (!before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')).then_some(written)
    })?;
    let found = found.trim();
    (!found.is_empty() && found != "any" && found != "unknown").then(|| found.to_string())
}

/// The name that starts at byte `start` of `text`.
fn name_at(text: &str, start: usize) -> &str {
    let named = &text[start..];
    let end = named
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(named.len());
    &named[..end]
}

// ----- pyright ----------------------------------------------------------------------------------

/// The index of the first `wanted` in a pyright label or Python line outside brackets and
/// strings.
fn top_level(text: &str, wanted: impl Fn(&str) -> bool) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            (None, _) if depth == 0 && wanted(&text[i..]) => return Some(i),
            _ => {}
        }
    }
    None
}

/// The type pyright's signature help gives the parameter labelled `label`: `T` of `name: T
/// = default`, of `*args: T` and of `**kwargs: T` (the type of each argument they take).
/// A parameter without an annotation, or one pyright cannot name (`Unknown`), says nothing.
fn pyright_parameter_type(label: &str) -> Option<String> {
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    let colon = top_level(&label, |rest| rest.starts_with(':'))?;
    let written = &label[colon + 1..];
    let default = top_level(written, |rest| rest.starts_with(" = "));
    let written = written[..default.unwrap_or(written.len())].trim();
    let unknown = written.is_empty() || written.contains("Unknown") || written == "Any";
    (!unknown).then(|| written.to_string())
}

/// The line before the hole without the value of the annotated assignment declaring the name
/// at byte `name` (`x: T = ▮` as `x: T`): pyright's hover over a name with a value shows the
/// type narrowed to the value's, without one the declared type.
fn without_value(before_hole: &str, name: usize) -> &str {
    let declaration = &before_hole[name..];
    let assignment = top_level(declaration, |rest| {
        rest.starts_with('=') && !rest.starts_with("==")
    });
    match assignment {
        Some(at) => before_hole[..name + at].trim_end(),
        None => before_hole,
    }
}

/// The declared type pyright's hover gives `name`: `T` of `(variable) name: T`; a callable
/// (`(variable) def name(A) -> B`) as `(A) -> B`. Unknown types say nothing.
fn pyright_declared_type(code: &str, name: &str) -> Option<String> {
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let callable = code
        .split_once(&format!("def {name}("))
        .map(|(_, rest)| format!("({rest}"));
    let found = callable.or_else(|| declared_type(&code, name))?;
    (!found.contains("Unknown")).then_some(found)
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

/// Completion kinds that are values: method, function, field, variable, property, constant.
const VALUE_KINDS: [u64; 6] = [2, 3, 5, 6, 10, 21];

/// The typing context at the hole, from the server's completion list, scored against the
/// targets and cut as ChatLSP cuts it.
fn headers(
    client: &mut Client,
    at_hole: Value,
    typed: &TypedHole,
    expected: &str,
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
        // The function being written is no value to use in it.
        .filter(|i| !typed.encloses_hole(i["label"].as_str().unwrap_or_default()))
        .collect();
    // Nearest first: the hole's locals and parameters, then the other names its file writes
    // (its own and imported names), then the rest, each in the server's order (pyright sorts
    // builtins and the file's names alike, alphabetically, and only some are asked about).
    items.sort_by_cached_key(|i| {
        let label = i["label"].as_str().unwrap_or_default();
        let near = match (typed.is_local(label), typed.file_writes(label)) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => 2,
        };
        (near, i["sortText"].as_str().unwrap_or_default().to_string())
    });
    let mut scored = Vec::new();
    for item in items.into_iter().take(MAX_RESOLVED) {
        let detail = match item["detail"].as_str() {
            Some(detail) => detail.to_string(),
            None => {
                let resolved = client.request("completionItem/resolve", item.clone())?;
                match resolved["detail"].as_str().filter(|d| !d.is_empty()) {
                    Some(detail) => detail.to_string(),
                    // pyright writes the declaration as the documentation's code, in plain
                    // text its first paragraph (the docstring follows).
                    None => {
                        let documentation = json!({"contents": resolved["documentation"]});
                        let text = hover_text(&documentation);
                        text.split("\n\n").next().unwrap_or_default().to_string()
                    }
                }
            }
        };
        let declaration = detail.split_whitespace().collect::<Vec<_>>().join(" ");
        // Scored as the syntax tree's headers are, the server's types read in the hole's file.
        let score = produced_type(&declaration).map_or(0.0, |p| typed.score_against(p, expected));
        if score > 0.0
            && !scored
                .iter()
                .any(|h: &ServerHeader| h.declaration == declaration)
        {
            scored.push(ServerHeader { declaration, score });
        }
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    scored.truncate(MAX_HEADERS);
    Ok(scored)
}

/// Both candidates' contexts from the server's answer, written with the line comments of the
/// hole's language; each definition as the syntax tree outlines it, with its provenance.
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
        let typed = TypedHole::new(index, hole);
        let declared: Vec<TypeRef> = answer
            .definitions
            .iter()
            .filter_map(|d| typed.type_declared_at(index.file_id(&d.path)?, d.start))
            .collect();
        if !declared.is_empty() {
            types.push_plain(&format!("{comment} Relevant type definitions:\n"));
        }
        for t in declared {
            typed.push_definition(&mut types, t);
        }
    }
    let mut headers = SourcedText::default();
    if !answer.headers.is_empty() {
        headers.push_plain(&format!(
            "{comment} Consider using these variables relevant to the expected type:\n"
        ));
        // Statements end with `;` where the language ends them so.
        let end = match index.files[hole.file].language.types().declaration_style() {
            DeclarationStyle::Python => "",
            DeclarationStyle::Java | DeclarationStyle::TypeScript => ";",
        };
        for header in &answer.headers {
            headers.push_plain(&format!("{}{end}\n", header.declaration));
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
        assert_eq!(
            read("(variable) __keyhole_hole: MultiCommand\n\nAlias for :meth:`main`.").as_deref(),
            Some("MultiCommand")
        );
        assert_eq!(read("(variable) __keyhole_hole: T@_"), None);
        assert_eq!(read("function _<unknown>(): unknown"), None);
        assert_eq!(read("const x: number"), None);
    }

    #[test]
    fn an_arguments_type_is_its_active_parameters() {
        let help = json!({"activeSignature": 0, "activeParameter": 1, "signatures": [{
            "label": "get(url: Input, options?: Options): ResponsePromise<unknown>",
            "parameters": [{"label": "url: Input"}, {"label": [16, 33]}]}]});
        assert_eq!(
            parameter_type(&help).as_deref(),
            Some("Options | undefined")
        );
        let first = json!({"signatures": [{"label": "f(t: ExecutionContext)", "activeParameter": 0,
            "parameters": [{"label": "t: ExecutionContext"}]}]});
        assert_eq!(parameter_type(&first).as_deref(), Some("ExecutionContext"));
        assert_eq!(parameter_type(&json!(null)), None);
        let read = |label: &str| written_parameter_type(label);
        assert_eq!(
            read("value: { unicorn: string; }").as_deref(),
            Some("{ unicorn: string; }")
        );
        assert_eq!(
            read("{ a, b }: { a: A; b: B }").as_deref(),
            Some("{ a: A; b: B }")
        );
        assert_eq!(
            read("x?: number | undefined").as_deref(),
            Some("number | undefined")
        );
        assert_eq!(read("...rest: (A | B)[]").as_deref(), Some("A | B"));
        assert_eq!(read("x: any"), None);
        assert_eq!(read("x"), None);
    }

    #[test]
    fn a_parameter_takes_only_type_arguments_from_the_holes_inference() {
        let read = |written: &str, inferred: &str| with_type_arguments(written, inferred);
        // Declared without its default type argument, which TypeScript fills in.
        assert_eq!(
            read("ParsePayload", "ParsePayload<unknown>").as_deref(),
            Some("ParsePayload<unknown>")
        );
        assert_eq!(
            read(
                "ParsePayload | undefined",
                "undefined | ParsePayload<unknown>"
            )
            .as_deref(),
            Some("ParsePayload<unknown> | undefined")
        );
        // Nothing to take, or a type other than the parameter's: the parameter as written.
        assert_eq!(read("Options | undefined", "Options | undefined"), None);
        assert_eq!(read("KyHeadersInit | undefined", "KyHeadersInit"), None);
        assert_eq!(read("T", "unknown"), None);
        assert_eq!(read("Payload", "PayloadOf<unknown>"), None);
    }

    #[test]
    fn a_declarations_type_is_what_the_hover_gives_its_name() {
        let read = |code: &str, name: &str| declared_type(code, name);
        assert_eq!(
            read("const chunks: string[]", "chunks").as_deref(),
            Some("string[]")
        );
        assert_eq!(
            read("let defs: Record<string, JSONSchema> | undefined", "defs").as_deref(),
            Some("Record<string, JSONSchema> | undefined")
        );
        assert_eq!(
            read("(property) Ky.x?: {\n    a: number;\n}", "x").as_deref(),
            Some("{ a: number; }")
        );
        // Not a name that merely ends with it.
        assert_eq!(read("const prefix: string", "fix"), None);
        assert_eq!(read("const x: any", "x"), None);
    }

    #[test]
    fn pyright_labels_and_hovers_give_the_declared_type() {
        let read = |label: &str| pyright_parameter_type(label);
        assert_eq!(
            read("color: bool | None = None").as_deref(),
            Some("bool | None")
        );
        assert_eq!(
            read("choice: Literal['a = b', \"c:d\"] = 'a = b'").as_deref(),
            Some("Literal['a = b', \"c:d\"]")
        );
        assert_eq!(
            read("callback: (Context) -> None").as_deref(),
            Some("(Context) -> None")
        );
        assert_eq!(read("*args: int").as_deref(), Some("int"));
        assert_eq!(read("**extra: str").as_deref(), Some("str"));
        assert_eq!(read("file: Unknown | None = None"), None);
        assert_eq!(read("file=None"), None);
        assert_eq!(read("file"), None);
        let hover = |code: &str, name: &str| pyright_declared_type(code, name);
        assert_eq!(
            hover("(variable) cb: ((TextIO) -> TextIO) | None", "cb").as_deref(),
            Some("((TextIO) -> TextIO) | None")
        );
        assert_eq!(
            hover("(variable) def w(\n    int\n) -> (int | None)", "w").as_deref(),
            Some("( int ) -> (int | None)")
        );
        assert_eq!(hover("(variable) n: Unknown", "n"), None);
        assert_eq!(hover("(variable) bar: int", "b"), None);
    }

    #[test]
    fn a_declarations_value_is_left_out_for_pyright() {
        let line = "x = 1\n    opener: t.Dict[str, \"a=b\"] = self.";
        let name = line.find("opener").unwrap();
        assert_eq!(
            without_value(line, name),
            "x = 1\n    opener: t.Dict[str, \"a=b\"]"
        );
        let typed = "    self.width: int = ";
        assert_eq!(
            without_value(typed, typed.find("width").unwrap()),
            "    self.width: int"
        );
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
    fn a_declaration_produces_its_return_or_value_type() {
        assert_eq!(produced_type("function clear(g: Grid): Grid"), Some("Grid"));
        assert_eq!(produced_type("const grid: Grid"), Some("Grid"));
        assert_eq!(produced_type("def load(path: str) -> Grid"), Some("Grid"));
        assert_eq!(
            produced_type("(variable) grid: Grid | None"),
            Some("Grid | None")
        );
        assert_eq!(produced_type("count"), None);
    }

    #[test]
    fn definition_answers_of_every_shape_give_the_names_they_point_at() {
        let range =
            json!({"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 4}});
        let name =
            json!({"start": {"line": 2, "character": 6}, "end": {"line": 2, "character": 9}});
        let link = json!([{"targetUri": "file:///a.ts", "targetRange": range, "targetSelectionRange": name}]);
        let location = json!({"uri": "file:///b.ts", "range": range});
        assert_eq!(locations(&link), vec![("file:///a.ts".to_string(), [2, 6])]);
        assert_eq!(
            locations(&location),
            vec![("file:///b.ts".to_string(), [1, 2])]
        );
        assert!(locations(&Value::Null).is_empty());
    }

    #[test]
    fn the_hole_files_bytes_map_to_the_servers_text_and_back() {
        // "ab|cd\nef" with the hole at 2 and its line's rest "cd" cut; the server's text is
        // "P" + "ab" + "_()" + "\nef".
        let at = HoleText {
            prelude: 1,
            hole: 2,
            line_end: 4,
            placeholder: 3,
        };
        assert_eq!(at.to_server(1), Some(2));
        assert_eq!(at.to_server(3), None);
        assert_eq!(at.to_server(5), Some(7));
        assert_eq!(at.to_original(7), Some(5));
        assert_eq!(at.to_original(2), Some(1));
        assert_eq!(at.to_original(0), None);
        assert_eq!(at.to_original(4), None);
    }
}
