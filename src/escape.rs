//! The one printing path for text from outside: file names, what a plugin sent and a server
//! answered (recorded by the proxy), a language server's messages. A name may hold a newline
//! that would forge a second message line, an answer an escape sequence that would set the
//! window title or clear the screen; every command prints such text through here. Warnings a
//! user must see go through here too ([`warn`]): the command line installs no `tracing`
//! subscriber, so a warning sent only there is lost.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// `text` with each control character written as an escape (`\n`, `\u{1b}`); other text,
/// non-ASCII included, as it is. For what is printed on one line: a name, a note, a field.
pub fn controls(text: &str) -> Cow<'_, str> {
    escaped(text, char::is_control)
}

/// `text` as lines: line breaks and tabs kept, every other control character (escape, bell,
/// carriage return, the C1 controls) written as an escape. For a body of text shown as it was
/// sent (a recorded prompt or answer), whose lines a reader expects to see as lines.
pub fn lines(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c.is_control() && c != '\n' && c != '\t')
}

/// Bytes from outside that may not be text (a request body of any kind): the UTF-8 in them
/// as [`controls`] writes it, every other byte as `\xNN`.
pub fn bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&controls(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

fn escaped(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match escape(c) {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// What a panic may say to a person: its message where it is the program's own words (a
/// literal `panic!("…")` or `expect("…")`), else nothing: a formatted message may quote the
/// text it failed on (a slice out of a character boundary quotes the string, which may be a
/// plugin's prompt or a file's contents).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &'static str {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .unwrap_or("its message may quote user text and is not shown")
}

/// Whether [`warn`] writes to standard error; the UI turns it off while it owns the terminal.
static WARN_TO_STDERR: AtomicBool = AtomicBool::new(true);

/// Send [`warn`]'s warnings to the log only (`false`) or to standard error too (`true`, the
/// default): a full-screen UI must not have lines written over it.
pub fn warn_to_stderr(on: bool) {
    WARN_TO_STDERR.store(on, Ordering::Relaxed);
}

/// A warning a user must see: one line on standard error (`keyhole: warning: …`, control
/// characters escaped), and the log; once per process (a damaged file read by every session
/// of an evaluation is said once).
pub fn warn(message: &str) {
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.get_or_insert_default().insert(message.to_string()) {
        return;
    }
    tracing::warn!("{message}");
    if WARN_TO_STDERR.load(Ordering::Relaxed) {
        let line = format!("keyhole: warning: {}\n", controls(message));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(controls("src/A.java"), "src/A.java");
        assert_eq!(controls("Ü/日本.java"), "Ü/日本.java");
        assert_eq!(
            controls("a\nb\r\t\u{1b}[31mc\u{7f}\u{9b}"),
            "a\\nb\\r\\t\\u{1b}[31mc\\u{7f}\\u{9b}"
        );
    }

    #[test]
    fn bytes_that_are_not_text_are_written_as_escapes() {
        assert_eq!(
            bytes(b"a=1\n\xff\xfeb\x1b[2J"),
            "a=1\\n\\xff\\xfeb\\u{1b}[2J"
        );
        assert_eq!(bytes("é".as_bytes()), "é");
    }

    #[test]
    fn lines_keep_their_breaks_and_tabs_but_no_other_control() {
        let answer = "\u{1b}]0;title\u{7}\u{1b}[2J\tx = 1;\r\ny();\u{85}";
        assert_eq!(
            lines(answer),
            "\\u{1b}]0;title\\u{7}\\u{1b}[2J\tx = 1;\\r\ny();\\u{85}"
        );
        assert_eq!(lines("é\n\t日本"), "é\n\t日本");
    }

    #[test]
    fn a_panic_says_only_its_literal_message() {
        let literal = std::panic::catch_unwind(|| panic!("the bundled classifier")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "the bundled classifier");
        let prompt = String::from("# café secret");
        let sliced = std::panic::catch_unwind(|| prompt[..6].len()).unwrap_err();
        let said = panic_message(sliced.as_ref());
        assert!(!said.contains("café"), "{said}");
    }
}
