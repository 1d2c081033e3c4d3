//! A small Language Server Protocol client: JSON-RPC over a server's stdin and stdout with
//! `Content-Length` framing, every wait bounded. One [`Client`] is one server process; a
//! [`Servers`] pool keeps one per language of a repository, started on first use and stopped
//! when the pool is dropped. Typed-hole context (`context::typed_server`) is what asks it.
//!
//! The messages are few (initialize, didOpen, didChange, hover, definition, completion), so
//! they are built as JSON values; a crate of protocol types would add more than it saves.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A language server keyhole knows how to ask about typed holes, and how its language writes
/// a hole that the server can type (ChatLSP's TypeScript port: a call of a generic function
/// declared for the purpose, whose inferred type argument is the expected type).
#[derive(Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The executable, looked up on `PATH`.
    pub command: &'static str,
    pub args: &'static [&'static str],
    /// Written before the file: declares the hole function.
    pub prelude: &'static str,
    /// Written at the hole.
    pub placeholder: &'static str,
    /// Where in the placeholder hovering gives the expected type.
    pub hover_at: usize,
    /// A line appended to the file that writes a type (`{}`) where the server can be asked
    /// for the definitions of the names in it.
    pub type_probe: &'static str,
}

/// `typescript-language-server` (npm `typescript-language-server typescript`).
pub const TYPESCRIPT: ServerSpec = ServerSpec {
    command: "typescript-language-server",
    args: &["--stdio"],
    prelude: "declare function _<T>(): T;\n",
    placeholder: "_()",
    hover_at: 0,
    type_probe: "\ntype __KeyholeProbe = {};\n",
};

/// `pyright-langserver` (npm `pyright`). Its hover over `_` shows the declared `T`, not the
/// solved one, so the call's value is named and the name hovered over.
pub const PYRIGHT: ServerSpec = ServerSpec {
    command: "pyright-langserver",
    args: &["--stdio"],
    prelude: "def _[T]() -> T: ...\n",
    placeholder: "(__keyhole_hole := _())",
    hover_at: 1,
    type_probe: "\n__keyhole_probe: {}\n",
};

/// The servers keyhole knows, each with the name of the language whose holes it types
/// (`Language::name`): the languages `--language-servers` can name.
pub const KNOWN: [(&str, &ServerSpec); 2] = [("python", &PYRIGHT), ("typescript", &TYPESCRIPT)];

/// The server keyhole asks for the language called `language`, where it knows one.
pub fn server_for(language: &str) -> Option<&'static ServerSpec> {
    KNOWN
        .iter()
        .find(|(l, _)| *l == language)
        .map(|&(_, spec)| spec)
}

/// The environment variable that chooses servers where no flag does, with the flag's syntax.
pub const SERVERS_VARIABLE: &str = "KEYHOLE_LANGUAGE_SERVERS";

/// Which servers typed holes ask, as a person chose them (`--language-servers`,
/// [`SERVERS_VARIABLE`]): `auto`, `off`, or `LANGUAGE=COMMAND[,LANGUAGE=COMMAND]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ServerChoice {
    /// Each language's usual server, where its executable is on `PATH`.
    #[default]
    Auto,
    /// None: typed holes read the syntax tree only.
    Off,
    /// These commands (a path, or a name looked up on `PATH`) for these languages, with the
    /// server's usual arguments; languages not named get none.
    Commands(Vec<(String, PathBuf)>),
}

/// Why a choice of servers could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{value}`: {why} (the choices: auto, off or LANGUAGE=COMMAND[,LANGUAGE=COMMAND], LANGUAGE one of {})",
    known_languages()
)]
pub struct ServerChoiceError {
    value: String,
    why: String,
}

fn known_languages() -> String {
    KNOWN.map(|(language, _)| language).join(", ")
}

impl std::str::FromStr for ServerChoice {
    type Err = ServerChoiceError;

    fn from_str(text: &str) -> Result<ServerChoice, ServerChoiceError> {
        let error = |why: String| ServerChoiceError {
            value: text.to_string(),
            why,
        };
        match text.trim() {
            "auto" => return Ok(ServerChoice::Auto),
            "off" => return Ok(ServerChoice::Off),
            "" => return Err(error("empty".into())),
            _ => {}
        }
        let mut commands: Vec<(String, PathBuf)> = Vec::new();
        for item in text.split(',') {
            let Some((language, command)) = item.split_once('=') else {
                return Err(error(match item == text {
                    true => "not a choice".into(),
                    false => format!("`{}` is not LANGUAGE=COMMAND", item.trim()),
                }));
            };
            let (language, command) = (language.trim(), command.trim());
            if server_for(language).is_none() {
                return Err(error(format!("keyhole asks no server for `{language}`")));
            }
            if command.is_empty() {
                return Err(error(format!("no command for {language}")));
            }
            if commands.iter().any(|(l, _)| l == language) {
                return Err(error(format!("{language} is named twice")));
            }
            commands.push((language.to_string(), PathBuf::from(command)));
        }
        Ok(ServerChoice::Commands(commands))
    }
}

impl ServerChoice {
    /// The choice [`SERVERS_VARIABLE`] makes: `auto` where it is not set.
    pub fn from_env() -> Result<ServerChoice, ServerChoiceError> {
        match std::env::var_os(SERVERS_VARIABLE) {
            None => Ok(ServerChoice::Auto),
            Some(value) => value.to_string_lossy().parse(),
        }
    }
}

/// How typed holes use language servers: which, and how long one may take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerOptions {
    pub choice: ServerChoice,
    /// The longest wait for any answer, the start included [default: [`Timeouts::default`]].
    pub timeout: Option<Duration>,
}

/// How long a server may take to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// `initialize`, and the first request after it, while the server loads the project.
    pub start: Duration,
    /// Any later request.
    pub request: Duration,
}

impl Default for Timeouts {
    /// Generous for a start on a busy machine (typescript-language-server took 13 s to load a
    /// two-file project with the load average at 10 on 2 cores); a hole asks a dozen requests.
    fn default() -> Timeouts {
        Timeouts {
            start: Duration::from_secs(60),
            request: Duration::from_secs(10),
        }
    }
}
/// How long a server may take to answer `shutdown` before it is killed.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(500);

/// Why a server gave no answer; one line, naming the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LspError {
    #[error("{server} could not be started: {reason}")]
    Start { server: String, reason: String },
    #[error("{server} did not answer `{method}` within {seconds} s, so it was stopped")]
    Timeout {
        server: String,
        method: String,
        seconds: u64,
    },
    #[error("{server} exited while keyhole waited for `{method}`")]
    Exited { server: String, method: String },
    #[error("{server} answered `{method}` with an error: {message}")]
    Answer {
        server: String,
        method: String,
        message: String,
    },
}

// ----- Framing --------------------------------------------------------------------------------

/// Write one message with its `Content-Length` header.
pub fn write_message(out: &mut impl Write, message: &Value) -> io::Result<()> {
    let body = serde_json::to_vec(message)?;
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(&body)?;
    out.flush()
}

/// Most bytes one message may take; a longer header is a broken server, not a big answer.
const MAX_MESSAGE: usize = 256 << 20;

/// Read one message; `None` at the end of the stream. Headers other than `Content-Length`
/// are read past.
pub fn read_message(input: &mut impl BufRead) -> io::Result<Option<Value>> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return match length {
                None => Ok(None),
                Some(_) => Err(invalid("the stream ended inside a header")),
            };
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| invalid(&format!("not a header: {header:?}")))?;
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| invalid(&format!("bad Content-Length: {value:?}")))?;
            if n > MAX_MESSAGE {
                return Err(invalid(&format!("a message of {n} bytes")));
            }
            length = Some(n);
        }
    }
    let mut body = vec![0; length.unwrap_or_default()];
    input.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| invalid(&format!("not JSON: {e}")))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

// ----- Client ---------------------------------------------------------------------------------

/// One running server.
pub struct Client {
    name: String,
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: u64,
    timeouts: Timeouts,
    /// Whether a request after `initialize` was answered (the project is loaded).
    loaded: bool,
    /// Documents opened, with their version.
    opened: HashMap<String, i64>,
}

/// The file URI of an absolute path.
pub fn file_uri(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut uri = String::from("file://");
    for c in text.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '/' | '-' | '_' | '.' | '~' => uri.push(c),
            _ => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    uri.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    uri
}

/// The path of a file URI.
pub fn uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

/// The executable `command` in one of the directories of `path` (a `PATH` value).
pub fn find_on_path(command: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
}

impl Client {
    /// Start `program` in `root` and initialize it, waiting at most `timeouts.start`.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[&str],
        root: &Path,
        timeouts: Timeouts,
    ) -> Result<Client, LspError> {
        let start_error = |reason: String| LspError::Start {
            server: name.to_string(),
            reason,
        };
        let mut child = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| start_error(e.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(start_error("no pipes to it".into()));
        };
        let (send, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut input = BufReader::new(stdout);
            while let Ok(Some(message)) = read_message(&mut input) {
                if send.send(message).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            name: name.to_string(),
            child,
            stdin,
            messages,
            next_id: 0,
            timeouts,
            loaded: false,
            opened: HashMap::new(),
        };
        let root_uri = file_uri(root);
        let params = json!({
            "processId": std::process::id(),
            "rootUri": root_uri,
            "workspaceFolders": [{"uri": root_uri, "name": "repository"}],
            "capabilities": {
                "textDocument": {
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "definition": {"linkSupport": true},
                    "typeDefinition": {"linkSupport": true},
                    "completion": {"completionItem": {"snippetSupport": false}},
                    "synchronization": {"didSave": false}
                },
                "workspace": {"configuration": true, "workspaceFolders": true}
            }
        });
        client.request_within("initialize", params, timeouts.start)?;
        client.notify("initialized", json!({}))?;
        Ok(client)
    }

    /// The server's name, as messages give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn exited(&self, method: &str) -> LspError {
        LspError::Exited {
            server: self.name.clone(),
            method: method.to_string(),
        }
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), LspError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        write_message(&mut self.stdin, &message).map_err(|_| self.exited(method))
    }

    /// A request answered within the request timeout (the start timeout for the first).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, LspError> {
        let timeout = match self.loaded {
            true => self.timeouts.request,
            false => self.timeouts.start,
        };
        let answer = self.request_within(method, params, timeout)?;
        self.loaded = true;
        Ok(answer)
    }

    /// A request's result, waiting at most `timeout`. The server's own requests in between
    /// (configuration, progress) are answered with nothing.
    pub fn request_within(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspError> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write_message(&mut self.stdin, &message).map_err(|_| self.exited(method))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.messages.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(LspError::Timeout {
                        server: self.name.clone(),
                        method: method.to_string(),
                        seconds: timeout.as_secs_f64().ceil() as u64,
                    });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.exited(method)),
            };
            match (message.get("id"), message.get("method")) {
                (Some(their_id), Some(their_method)) => {
                    let result = match their_method.as_str() {
                        Some("workspace/configuration") => {
                            let items = message["params"]["items"].as_array().map_or(0, Vec::len);
                            Value::Array(vec![Value::Null; items])
                        }
                        _ => Value::Null,
                    };
                    let answer = json!({"jsonrpc": "2.0", "id": their_id, "result": result});
                    write_message(&mut self.stdin, &answer).map_err(|_| self.exited(method))?;
                }
                (Some(their_id), None) if their_id.as_u64() == Some(id) => {
                    if let Some(error) = message.get("error") {
                        return Err(LspError::Answer {
                            server: self.name.clone(),
                            method: method.to_string(),
                            message: error["message"].as_str().unwrap_or("unknown").to_string(),
                        });
                    }
                    return Ok(message.get("result").cloned().unwrap_or(Value::Null));
                }
                _ => {}
            }
        }
    }

    /// Open the document at `path` with `text`, or replace its text where it is open.
    pub fn open(&mut self, path: &Path, language_id: &str, text: &str) -> Result<(), LspError> {
        let uri = file_uri(path);
        match self.opened.get_mut(&uri) {
            Some(version) => {
                *version += 1;
                let params = json!({
                    "textDocument": {"uri": uri, "version": *version},
                    "contentChanges": [{"text": text}]
                });
                self.notify("textDocument/didChange", params)
            }
            None => {
                let params = json!({
                    "textDocument": {
                        "uri": uri, "languageId": language_id, "version": 1, "text": text
                    }
                });
                self.opened.insert(uri, 1);
                self.notify("textDocument/didOpen", params)
            }
        }
    }

    /// Whether the document at `path` is open.
    pub fn is_open(&self, path: &Path) -> bool {
        self.opened.contains_key(&file_uri(path))
    }
}

impl Drop for Client {
    /// Ask the server to shut down, then make sure it is gone.
    fn drop(&mut self) {
        if self
            .request_within("shutdown", Value::Null, SHUTDOWN_TIMEOUT)
            .is_ok()
        {
            let _ = self.notify("exit", Value::Null);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ----- Pool -----------------------------------------------------------------------------------

/// A server of the pool: running, or why it is not (a failed server is not started again
/// for the rest of the session, so every hole does not wait for it anew).
enum Slot {
    Running(Client),
    Failed(LspError),
}

/// One server per language of a repository, started on first use and stopped on drop.
#[derive(Default)]
pub struct Servers {
    slots: Mutex<HashMap<&'static str, Arc<Mutex<Slot>>>>,
    /// Where servers are looked for: `PATH` where `None`.
    search_path: Option<OsString>,
    chosen: Mutex<Chosen>,
}

/// Which servers a pool starts, and how long they may take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Chosen {
    servers: ServerChoice,
    timeouts: Timeouts,
}

impl Servers {
    /// A pool looking for servers in `search_path` (a `PATH` value) with its own timeouts.
    pub fn new(search_path: Option<OsString>, timeouts: Timeouts) -> Servers {
        Servers {
            slots: Mutex::default(),
            search_path,
            chosen: Mutex::new(Chosen {
                servers: ServerChoice::Auto,
                timeouts,
            }),
        }
    }

    /// Use the servers and timeout `options` choose from now on (sessions on a shared index
    /// choose after it is open); servers started under another choice stop once no hole
    /// asks them. A timeout not chosen keeps the pool's.
    pub fn choose(&self, options: &ServerOptions) {
        let mut chosen = self.chosen.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = Chosen {
            servers: options.choice.clone(),
            timeouts: options.timeout.map_or(chosen.timeouts, |t| Timeouts {
                start: t,
                request: t,
            }),
        };
        if *chosen != wanted {
            *chosen = wanted;
            self.slots.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// The executable of the server of `spec` as chosen, `None` where none is chosen or it
    /// is not on the search path.
    fn program(&self, spec: &ServerSpec, servers: &ServerChoice) -> Option<PathBuf> {
        let command = match servers {
            ServerChoice::Off => return None,
            ServerChoice::Auto => Path::new(spec.command),
            ServerChoice::Commands(commands) => {
                let (language, _) = KNOWN.iter().find(|(_, known)| *known == spec)?;
                let (_, command) = commands.iter().find(|(l, _)| l == language)?;
                command.as_path()
            }
        };
        // A command with a directory is a path; a bare name is looked up.
        if command.components().count() > 1 {
            return Some(command.to_path_buf());
        }
        let search_path = match &self.search_path {
            Some(path) => path.clone(),
            None => std::env::var_os("PATH")?,
        };
        find_on_path(&command.to_string_lossy(), &search_path)
    }

    /// Run `ask` with the server of `spec` started in `root`, `None` where none is chosen
    /// for it or its executable is not on `PATH`. A server that times out or exits is
    /// stopped, and its error is the answer for the rest of the session.
    pub fn with<T>(
        &self,
        spec: &'static ServerSpec,
        root: &Path,
        ask: impl FnOnce(&mut Client) -> Result<T, LspError>,
    ) -> Option<Result<T, LspError>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.get(spec.command) {
                Some(slot) => Arc::clone(slot),
                None => {
                    let chosen = self
                        .chosen
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    let program = self.program(spec, &chosen.servers)?;
                    let started =
                        Client::start(spec.command, &program, spec.args, root, chosen.timeouts);
                    tracing::info!(
                        server = spec.command,
                        ok = started.is_ok(),
                        "language server"
                    );
                    let slot = Arc::new(Mutex::new(match started {
                        Ok(client) => Slot::Running(client),
                        Err(e) => Slot::Failed(e),
                    }));
                    slots.insert(spec.command, Arc::clone(&slot));
                    slot
                }
            }
        };
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        let answer = match &mut *slot {
            Slot::Failed(e) => return Some(Err(e.clone())),
            Slot::Running(client) => ask(client),
        };
        if let Err(e @ (LspError::Timeout { .. } | LspError::Exited { .. })) = &answer {
            tracing::warn!(error = %e, "language server stopped");
            // Dropping the client kills the process.
            *slot = Slot::Failed(e.clone());
        }
        Some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_as_written() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {"text": "é ü"}});
        let mut bytes = Vec::new();
        write_message(&mut bytes, &message).unwrap();
        let body = serde_json::to_vec(&message).unwrap();
        assert!(bytes.starts_with(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes()));
        let mut input = io::Cursor::new([bytes.clone(), bytes].concat());
        assert_eq!(read_message(&mut input).unwrap(), Some(message.clone()));
        assert_eq!(read_message(&mut input).unwrap(), Some(message));
        assert_eq!(read_message(&mut input).unwrap(), None);
    }

    #[test]
    fn other_headers_are_read_past_and_bad_ones_are_errors() {
        let body = r#"{"id":2}"#;
        let text = format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let got = read_message(&mut io::Cursor::new(text)).unwrap();
        assert_eq!(got, Some(json!({"id": 2})));
        for bad in [
            "Content-Length: x\r\n\r\n{}",
            "no colon\r\n\r\n",
            "Content-Length: 10\r\n\r\n{}",
            "Content-Length: 2\r\n\r\n{]",
            "Content-Length: 99999999999\r\n\r\n",
        ] {
            assert!(
                read_message(&mut io::Cursor::new(bad)).is_err(),
                "{bad:?} should be an error"
            );
        }
    }

    #[test]
    fn server_choices_read_as_written_and_bad_ones_say_why() {
        assert_eq!("auto".parse(), Ok(ServerChoice::Auto));
        assert_eq!(" off ".parse(), Ok(ServerChoice::Off));
        assert_eq!(
            "python=/opt/pyright-langserver, typescript = tsls".parse(),
            Ok(ServerChoice::Commands(vec![
                ("python".into(), "/opt/pyright-langserver".into()),
                ("typescript".into(), "tsls".into()),
            ]))
        );
        for (bad, why) in [
            ("", "empty"),
            ("on", "`on`: not a choice"),
            ("java=x", "keyhole asks no server for `java`"),
            ("python=", "no command for python"),
            ("python=a,python=b", "python is named twice"),
            ("python=a,off", "`off` is not LANGUAGE=COMMAND"),
        ] {
            let error = bad.parse::<ServerChoice>().unwrap_err().to_string();
            assert!(error.contains(why), "{bad:?}: {error}");
            assert!(error.contains("python, typescript"), "{error}");
        }
    }

    #[test]
    fn each_language_with_a_server_is_named_by_its_language() {
        for language in crate::lang::languages() {
            let spec = server_for(language.name());
            assert_eq!(language.language_server(), spec, "{}", language.name());
        }
        assert_eq!(server_for("python"), Some(&PYRIGHT));
        assert_eq!(server_for("typescript"), Some(&TYPESCRIPT));
        assert_eq!(server_for("java"), None);
    }

    #[test]
    fn a_pool_starts_what_is_chosen_and_nothing_where_servers_are_off() {
        let bin = tempfile::tempdir().unwrap();
        let fake = bin.path().join(PYRIGHT.command);
        std::fs::write(&fake, "").unwrap();
        let servers = Servers::new(Some(bin.path().as_os_str().to_owned()), Timeouts::default());
        let chosen = |servers: &Servers| {
            let chosen = servers.chosen.lock().unwrap().clone();
            servers.program(&PYRIGHT, &chosen.servers)
        };
        assert_eq!(chosen(&servers), Some(fake.clone()));
        servers.choose(&ServerOptions {
            choice: ServerChoice::Off,
            timeout: Some(Duration::from_secs(3)),
        });
        assert_eq!(chosen(&servers), None);
        assert_eq!(
            servers.chosen.lock().unwrap().timeouts,
            Timeouts {
                start: Duration::from_secs(3),
                request: Duration::from_secs(3)
            }
        );
        let elsewhere = PathBuf::from("/opt/pyright/bin/pyright-langserver");
        servers.choose(&ServerOptions {
            choice: ServerChoice::Commands(vec![("python".into(), elsewhere.clone())]),
            timeout: None,
        });
        assert_eq!(chosen(&servers), Some(elsewhere));
        assert_eq!(
            servers.program(&TYPESCRIPT, &servers.chosen.lock().unwrap().servers),
            None
        );
        // A timeout not chosen keeps the pool's.
        assert_eq!(
            servers.chosen.lock().unwrap().timeouts.request,
            Duration::from_secs(3)
        );
    }

    #[test]
    fn file_uris_escape_and_read_back() {
        let path = Path::new("/tmp/a b/ü#.ts");
        let uri = file_uri(path);
        assert_eq!(uri, "file:///tmp/a%20b/%C3%BC%23.ts");
        assert_eq!(uri_path(&uri).as_deref(), Some(path));
        assert_eq!(uri_path("http://x"), None);
    }
}
