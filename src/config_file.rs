//! Reading keyhole's TOML files (`backends.toml`, `keymap.toml`, themes): problems on one line
//! that name the line and the key, as every bad input should.

/// A TOML error in a user file, on one line: `line N, key `k`: message`.
#[cfg_attr(not(feature = "tui"), allow(dead_code))] // the keymap's and themes' reader
pub fn toml_error_line(text: &str, error: &toml::de::Error) -> String {
    let offset = error.span().map_or(0, |span| span.start);
    problem_line(
        text,
        offset,
        key_at(text, offset).as_deref(),
        error.message(),
    )
}

/// A problem at byte `offset` of a user file, on one line: `line N, key `k`: message`.
#[cfg_attr(not(feature = "tui"), allow(dead_code))] // the keymap's and themes' reader
pub fn problem_line(text: &str, offset: usize, key: Option<&str>, message: &str) -> String {
    let key = key.map(|k| format!(", key `{k}`")).unwrap_or_default();
    format!("line {}{key}: {message}", line_of(text, offset))
}

/// 1-based line number of byte `offset`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line holding byte `offset`.
fn line_at(text: &str, offset: usize) -> &str {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    &text[start..end]
}

/// The key assigned on the line holding byte `offset`, if that line is `key = value`.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let line = line_at(text, offset).trim_start();
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !line.starts_with('[')).then(|| key.to_string())
}

/// Where `key` is assigned in the table starting at `table` (toml's span for a table covers
/// only its header), so errors point at the offending line.
pub fn key_offset(text: &str, table: usize, key: &str) -> Option<usize> {
    let mut offset = table;
    for (i, line) in text[table..].split_inclusive('\n').enumerate() {
        if i > 0 && line.trim_start().starts_with('[') {
            return None;
        }
        if key_at(line, 0).as_deref() == Some(key) {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}
