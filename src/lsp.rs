//! A small Language Server Protocol client: JSON-RPC over a server's stdin and stdout with
//! `Content-Length` framing, every wait bounded. One [`Client`] is one server process; a
//! [`Servers`] pool keeps one per language of a repository, started on first use and stopped
//! when the pool is dropped. Typed-hole context (`context::typed_server`) is what asks it.
//!
//! The messages are few (initialize, didOpen, didChange, hover, definition, completion), so
//! they are built as JSON values; a crate of protocol types would add more than it saves.

use std::collections::VecDeque;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
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
    /// The `initializationOptions` sent to it, as JSON.
    pub initialization_options: &'static str,
}

/// `typescript-language-server` (npm `typescript-language-server typescript`).
pub const TYPESCRIPT: ServerSpec = ServerSpec {
    command: "typescript-language-server",
    args: &["--stdio"],
    prelude: "declare function _<T>(): T;\n",
    placeholder: "_()",
    hover_at: 0,
    type_probe: "\ntype __KeyholeProbe = {};\n",
    // Its syntax-only tsserver (which answers while the project loads, and then for files
    // outside every tsconfig.json) resolves no import: every imported name would be `any`.
    initialization_options: r#"{"tsserver": {"useSyntaxServer": "never"}}"#,
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
    initialization_options: "null",
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
    /// Until the server first answers a request after `initialize` (while it loads the
    /// project): the longest it may stay silent, unless it said it is working (a work-done
    /// progress begun and not ended). [`Timeouts::loading`] bounds the whole wait.
    pub start: Duration,
    /// Any later request.
    pub request: Duration,
}

/// How many start timeouts a server that keeps showing signs of life may take to load.
const LOADING_STARTS: u32 = 10;

impl Timeouts {
    /// The longest wait for an answer while the project loads, however busy the server says
    /// it is: a server that begins a progress and then hangs still falls back.
    pub fn loading(&self) -> Duration {
        self.start * LOADING_STARTS
    }
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
/// How an answer is waited for.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// At most this long from the request.
    Within(Duration),
    /// While the server loads the project: as long as it shows signs of life (any message
    /// within [`Timeouts::start`] of the last, or an open work-done progress), up to
    /// [`Timeouts::loading`] from the request.
    Loading,
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
    #[error(
        "{server} stopped reading: `{method}` was not taken within {seconds} s, so it was stopped"
    )]
    Stalled {
        server: String,
        method: String,
        seconds: u64,
    },
    #[error("{server} exited while keyhole waited for `{method}`")]
    Exited { server: String, method: String },
    #[error("{server} was stopped: {reason}")]
    Broken { server: String, reason: String },
    #[error("{server} answered `{method}` with an error: {message}")]
    Answer {
        server: String,
        method: String,
        message: String,
    },
}

impl LspError {
    /// Whether the server is unusable from now on (rather than one request failing).
    fn stops_the_server(&self) -> bool {
        !matches!(self, LspError::Answer { .. })
    }
}

// ----- Framing --------------------------------------------------------------------------------

/// One message with its `Content-Length` header, as written.
pub fn framed(message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).expect("a JSON value serializes");
    let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    bytes.extend(body);
    bytes
}

/// Write one message with its `Content-Length` header.
pub fn write_message(out: &mut impl Write, message: &Value) -> io::Result<()> {
    out.write_all(&framed(message))?;
    out.flush()
}

/// Most bytes one message may take; a longer header is a broken server, not a big answer.
const MAX_MESSAGE: usize = 256 << 20;
/// Most bytes one header line may take (real ones are under 100).
const MAX_HEADER_LINE: usize = 8 << 10;
/// Most lines one message's header may take, blank ones before it included.
const MAX_HEADER_LINES: usize = 32;

/// Read one message's body; `None` at the end of the stream. Headers other than
/// `Content-Length` are read past. Whatever the input, at most [`MAX_HEADER_LINE`] bytes of a
/// header line and [`MAX_MESSAGE`] bytes of a body are held.
pub fn read_body(input: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut length = None;
    let mut line = Vec::new();
    for _ in 0..MAX_HEADER_LINES {
        if !read_header_line(input, &mut line)? {
            return match length {
                None if line.is_empty() => Ok(None),
                _ => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a header",
                )),
            };
        }
        let header = std::str::from_utf8(&line)
            .map_err(|_| invalid("a header that is not UTF-8"))?
            .trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            match length {
                Some(n) => return read_exactly(input, n).map(Some),
                None => continue,
            }
        }
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| invalid(&format!("not a header: {:?}", cut(header))))?;
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| invalid(&format!("bad Content-Length: {:?}", cut(value))))?;
            if n > MAX_MESSAGE {
                return Err(invalid(&format!(
                    "a message of {n} bytes (at most {MAX_MESSAGE})"
                )));
            }
            length = Some(n);
        }
    }
    Err(invalid(&format!(
        "a header of more than {MAX_HEADER_LINES} lines"
    )))
}

/// Read one message; `None` at the end of the stream ([`read_body`], then JSON).
pub fn read_message(input: &mut impl BufRead) -> io::Result<Option<Value>> {
    read_body(input)?.map(|body| parse(&body)).transpose()
}

/// A message's body as JSON.
fn parse(body: &[u8]) -> io::Result<Value> {
    serde_json::from_slice(body).map_err(|e| invalid(&format!("not JSON: {e}")))
}

/// Read a line into `line` (emptied first), its newline included; `false` at the end of the
/// stream before a newline. A line longer than [`MAX_HEADER_LINE`] is an error once that much
/// is read, whatever follows.
fn read_header_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<bool> {
    line.clear();
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(false);
        }
        let (taken, ends) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if line.len() + taken > MAX_HEADER_LINE {
            return Err(invalid(&format!(
                "a header line longer than {MAX_HEADER_LINE} bytes"
            )));
        }
        line.extend_from_slice(&buffer[..taken]);
        input.consume(taken);
        if ends {
            return Ok(true);
        }
    }
}

/// Exactly `n` bytes, read as they come (a body that never arrives holds no more than it sent).
fn read_exactly(input: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    input.take(n as u64).read_to_end(&mut body)?;
    if body.len() < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the stream ended inside a message",
        ));
    }
    Ok(body)
}

/// The start of a server's text, for a message.
fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(60)]
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

// ----- Pipes ----------------------------------------------------------------------------------

/// Messages read from a server and not yet taken, bounded in number and bytes: a server that
/// writes faster than keyhole reads is held back (its writes wait) instead of filling memory.
struct Inbox {
    state: Mutex<InboxState>,
    changed: Condvar,
}

#[derive(Default)]
struct InboxState {
    bodies: VecDeque<Vec<u8>>,
    bytes: usize,
    /// Why no more will come: the stream ended (`None` inside) or could not be read.
    ended: Option<Option<String>>,
    /// The client is gone: the reader stops.
    closed: bool,
}

/// Messages held at most, and their bytes (one larger message is still let in alone).
const INBOX_MESSAGES: usize = 256;
const INBOX_BYTES: usize = 16 << 20;

/// Why [`Inbox::take`] gave no message.
enum NoMessage {
    TimedOut,
    /// The stream ended (`None`) or could not be read.
    Ended(Option<String>),
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read messages from `output` into the inbox until it ends or the client is gone.
    fn fill(&self, output: impl Read) {
        let mut input = BufReader::new(output);
        let ended = loop {
            match read_body(&mut input) {
                Ok(Some(body)) => {
                    if !self.put(body) {
                        return;
                    }
                }
                Ok(None) => break None,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        self.lock().ended = Some(ended);
        self.changed.notify_all();
    }

    /// Wait for room, then hold `body`; `false` where the client is gone.
    fn put(&self, body: Vec<u8>) -> bool {
        let mut state = self.lock();
        while !state.closed
            && !state.bodies.is_empty()
            && (state.bodies.len() >= INBOX_MESSAGES || state.bytes + body.len() > INBOX_BYTES)
        {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.closed {
            return false;
        }
        state.bytes += body.len();
        state.bodies.push_back(body);
        self.changed.notify_all();
        true
    }

    /// The next message, waiting until `deadline` at most.
    fn take(&self, deadline: Instant) -> Result<Vec<u8>, NoMessage> {
        let mut state = self.lock();
        loop {
            if let Some(body) = state.bodies.pop_front() {
                state.bytes -= body.len();
                self.changed.notify_all();
                return Ok(body);
            }
            if let Some(ended) = &state.ended {
                return Err(NoMessage::Ended(ended.clone()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NoMessage::TimedOut);
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The client is gone: let the reader stop and drop what is held.
    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.bodies.clear();
        self.changed.notify_all();
    }
}

/// Writes to a server's standard input from a thread of their own, so that every write has a
/// deadline (a server that stops reading blocks that thread, never keyhole), with SIGPIPE
/// blocked there: a server that exited is an error of the write, not the end of keyhole.
struct Writer {
    outbox: SyncSender<Vec<u8>>,
    written: Receiver<io::Result<()>>,
    /// Why writing stopped for good: a write ran past its deadline or failed.
    broken: Option<LspError>,
}

impl Writer {
    fn new(mut stdin: impl Write + Send + 'static) -> Writer {
        let (outbox, to_write) = mpsc::sync_channel::<Vec<u8>>(1);
        let (report, written) = mpsc::sync_channel(1);
        std::thread::spawn(move || {
            block_sigpipe();
            for bytes in to_write {
                let done = stdin.write_all(&bytes).and_then(|()| stdin.flush());
                let failed = done.is_err();
                if report.send(done).is_err() || failed {
                    break;
                }
            }
        });
        Writer {
            outbox,
            written,
            broken: None,
        }
    }
}

/// Block SIGPIPE for the calling thread, where writes to a pipe whose reader is gone then fail
/// with `EPIPE`; the signal stays pending on this thread only, which the process never reads.
fn block_sigpipe() {
    #[cfg(unix)]
    // SAFETY: a signal set on the stack, initialized by sigemptyset before use; changing the
    // calling thread's own mask has no other effect.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

// ----- Client ---------------------------------------------------------------------------------

/// One running server.
pub struct Client {
    name: String,
    child: Child,
    writer: Writer,
    inbox: Arc<Inbox>,
    next_id: u64,
    timeouts: Timeouts,
    /// Whether a request after `initialize` was answered (the project is loaded).
    loaded: bool,
    /// The tokens of the work-done progresses the server began and has not ended (it loads a
    /// project, indexes): while one is open, its silence is not a hang.
    working: HashSet<String>,
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
    /// Start `program` in `root` and initialize it, waiting at most `timeouts.start`. The
    /// server runs in a process group of its own, which is ended with it.
    pub fn start(
        name: &str,
        program: &Path,
        spec: &ServerSpec,
        root: &Path,
        timeouts: Timeouts,
    ) -> Result<Client, LspError> {
        let start_error = |reason: String| LspError::Start {
            server: name.to_string(),
            reason,
        };
        let mut command = Command::new(program);
        command
            .args(spec.args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().map_err(|e| start_error(e.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(start_error("no pipes to it".into()));
        };
        let inbox = Arc::new(Inbox {
            state: Mutex::default(),
            changed: Condvar::new(),
        });
        let filling = Arc::clone(&inbox);
        std::thread::spawn(move || filling.fill(stdout));
        let mut client = Client {
            name: name.to_string(),
            child,
            writer: Writer::new(stdin),
            inbox,
            next_id: 0,
            timeouts,
            loaded: false,
            working: HashSet::new(),
            opened: HashMap::new(),
        };
        let root_uri = file_uri(root);
        let options: Value = serde_json::from_str(spec.initialization_options)
            .map_err(|e| start_error(format!("its initialization options: {e}")))?;
        let params = json!({
            "processId": std::process::id(),
            "rootUri": root_uri,
            "initializationOptions": options,
            "workspaceFolders": [{"uri": root_uri, "name": "repository"}],
            "capabilities": {
                "textDocument": {
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "definition": {"linkSupport": true},
                    "typeDefinition": {"linkSupport": true},
                    "completion": {"completionItem": {"snippetSupport": false}},
                    "synchronization": {"didSave": false}
                },
                "workspace": {"configuration": true, "workspaceFolders": true},
                // typescript-language-server says so while tsserver loads the project.
                "window": {"workDoneProgress": true}
            }
        });
        client.answer("initialize", params, Wait::Loading)?;
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

    /// How long the next write may take: the start timeout until the project is loaded.
    fn timeout(&self) -> Duration {
        match self.loaded {
            true => self.timeouts.request,
            false => self.timeouts.start,
        }
    }

    /// How the next answer is waited for: as the project loads until one is answered.
    fn wait(&self) -> Wait {
        match self.loaded {
            true => Wait::Within(self.timeouts.request),
            false => Wait::Loading,
        }
    }

    /// When waiting for an answer to a request written at `sent` ends, the server last heard
    /// from at `heard`.
    fn deadline(&self, wait: Wait, sent: Instant, heard: Instant) -> Instant {
        match wait {
            Wait::Within(timeout) => sent + timeout,
            Wait::Loading => {
                let longest = sent + self.timeouts.loading();
                match self.working.is_empty() {
                    true => longest.min(heard + self.timeouts.start),
                    false => longest,
                }
            }
        }
    }

    /// Note what a `$/progress` notification says: a work-done progress begun or ended.
    fn progress(&mut self, params: &Value) {
        let token = params["token"].to_string();
        match params["value"]["kind"].as_str() {
            Some("begin") => {
                self.working.insert(token);
            }
            Some("end") => {
                self.working.remove(&token);
            }
            _ => {}
        }
    }

    /// Hand `message` to the server by `deadline`. A write that misses it or fails leaves the
    /// writer broken: every later one fails the same way without waiting.
    fn send(&mut self, method: &str, message: &Value, deadline: Instant) -> Result<(), LspError> {
        if let Some(broken) = &self.writer.broken {
            return Err(broken.clone());
        }
        let failed = match self.writer.outbox.try_send(framed(message)) {
            Err(TrySendError::Disconnected(_)) => Some(self.exited(method)),
            // Never while every write is waited for; said as what it would mean.
            Err(TrySendError::Full(_)) => Some(LspError::Stalled {
                server: self.name.clone(),
                method: method.to_string(),
                seconds: 0,
            }),
            Ok(()) => {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.writer.written.recv_timeout(left) {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                        Some(self.exited(method))
                    }
                    Ok(Err(e)) => Some(LspError::Broken {
                        server: self.name.clone(),
                        reason: format!("writing `{method}` to it failed: {e}"),
                    }),
                    Err(RecvTimeoutError::Disconnected) => Some(self.exited(method)),
                    Err(RecvTimeoutError::Timeout) => Some(LspError::Stalled {
                        server: self.name.clone(),
                        method: method.to_string(),
                        seconds: seconds(left),
                    }),
                }
            }
        };
        match failed {
            None => Ok(()),
            Some(error) => {
                self.writer.broken = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), LspError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let deadline = Instant::now() + self.timeout();
        self.send(method, &message, deadline)
    }

    /// A request answered within the request timeout; the first, while the server loads
    /// the project, as [`Wait::Loading`] waits.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, LspError> {
        let answer = self.answer(method, params, self.wait())?;
        self.loaded = true;
        Ok(answer)
    }

    /// A request's result, written and answered within `timeout`.
    pub fn request_within(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspError> {
        self.answer(method, params, Wait::Within(timeout))
    }

    /// A request's result, written within the write timeout and waited for as `wait` says.
    /// The server's own requests in between (configuration, progress) are answered with
    /// nothing.
    fn answer(&mut self, method: &str, params: Value, wait: Wait) -> Result<Value, LspError> {
        self.next_id += 1;
        let id = self.next_id;
        let sent = Instant::now();
        let write_deadline = match wait {
            Wait::Within(timeout) => sent + timeout,
            Wait::Loading => sent + self.timeouts.start,
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(method, &message, write_deadline)?;
        // The request itself is the last exchange until the server writes.
        let mut heard = sent;
        loop {
            let deadline = self.deadline(wait, sent, heard);
            let message = match self.inbox.take(deadline) {
                Ok(body) => {
                    heard = Instant::now();
                    parse(&body).map_err(|e| LspError::Broken {
                        server: self.name.clone(),
                        reason: format!("it wrote {e}"),
                    })?
                }
                Err(NoMessage::TimedOut) => {
                    return Err(LspError::Timeout {
                        server: self.name.clone(),
                        method: method.to_string(),
                        seconds: seconds(deadline - sent),
                    });
                }
                Err(NoMessage::Ended(None)) => return Err(self.exited(method)),
                Err(NoMessage::Ended(Some(why))) => {
                    return Err(LspError::Broken {
                        server: self.name.clone(),
                        reason: format!("it wrote {why}"),
                    });
                }
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
                    self.send(method, &answer, deadline)?;
                }
                (None, Some(their_method)) if their_method == "$/progress" => {
                    self.progress(&message["params"]);
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
    /// Ask the server to shut down where it still reads, then end its process group.
    fn drop(&mut self) {
        if self.writer.broken.is_none()
            && self
                .request_within("shutdown", Value::Null, SHUTDOWN_TIMEOUT)
                .is_ok()
        {
            let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
            let exit = json!({"jsonrpc": "2.0", "method": "exit"});
            let _ = self.send("exit", &exit, deadline);
        }
        self.inbox.close();
        #[cfg(unix)]
        if let Ok(group) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: signals the group the server leads (started with `process_group(0)`);
            // its id cannot be reused before the server is waited for below.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whole seconds of `duration`, rounded up, for messages.
fn seconds(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil() as u64
}

// ----- Notices ------------------------------------------------------------------------------

/// Where notices go: set by the program (the CLI's standard error), else the log.
static NOTICES: OnceLock<fn(&str)> = OnceLock::new();

/// Send the notices of language servers to `show` for the rest of the process (the first
/// call wins). Without one they are logged.
pub fn show_notices_with(show: fn(&str)) {
    let _ = NOTICES.set(show);
}

/// Say `line` about `server`, once per server in a process, however many holes and
/// repositories ask it.
fn notice_once(server: &str, line: &str) {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.iter().any(|s| s == server) {
        return;
    }
    said.push(server.to_string());
    match NOTICES.get() {
        Some(show) => show(line),
        None => tracing::warn!(%line, "language server not used"),
    }
}

/// `error` with what a person can do about it, where keyhole knows: typescript-language-server
/// fails to initialize where the TypeScript it finds has no `tsserver.js` (npm's
/// `typescript@7` has none).
fn explained(spec: &ServerSpec, program: &Path, root: &Path, error: LspError) -> LspError {
    let (LspError::Answer { server, .. } | LspError::Exited { server, .. }) = &error else {
        return error;
    };
    if *spec != TYPESCRIPT || tsserver_found(program, root) {
        return error;
    }
    LspError::Start {
        server: server.clone(),
        reason: "no tsserver.js beside it or in the repository (npm's typescript@7 has none); \
                 install one that has it: npm install typescript@5"
            .into(),
    }
}

/// Whether a `node_modules/typescript/lib/tsserver.js` is in the repository or a folder above
/// the server's installed file, where typescript-language-server looks.
fn tsserver_found(program: &Path, root: &Path) -> bool {
    let installed = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    installed.ancestors().chain(root.ancestors()).any(|dir| {
        dir.join("node_modules/typescript/lib/tsserver.js")
            .is_file()
    })
}

// ----- Pool -----------------------------------------------------------------------------------

/// A server of the pool: running, or why it is not (a failed server is not started again
/// for the rest of the session, so every hole does not wait for it anew).
enum Slot {
    Running(Box<Client>),
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
            drop(chosen);
            self.stop();
        }
    }

    /// Stop every server now (a program that exits without dropping the pool calls this);
    /// a hole that asks later starts its server again.
    pub fn stop(&self) {
        // Dropping a client ends the server's process group.
        let stopped = std::mem::take(&mut *self.slots.lock().unwrap_or_else(|e| e.into_inner()));
        drop(stopped);
    }

    /// The person's choice of servers and timeouts, as it stands now.
    fn chosen(&self) -> Chosen {
        self.chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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

    /// What names the server of `spec` as chosen, without starting it: its executable's path
    /// (links followed), size and modification time, which an install or upgrade changes;
    /// `None` where none is chosen or it is not on the search path. Answers cached under it
    /// are a new server's to give again.
    pub fn identity(&self, spec: &ServerSpec) -> Option<String> {
        let program = self.program(spec, &self.chosen().servers)?;
        let real = std::fs::canonicalize(&program).unwrap_or(program);
        // A named command that is not there still has an identity: starting it then fails,
        // and that failure is said, not taken for "no server".
        let metadata = std::fs::metadata(&real).ok();
        let modified = (metadata.as_ref())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Some(format!(
            "{} {} {} {modified}",
            spec.command,
            real.display(),
            metadata.map_or(0, |m| m.len())
        ))
    }

    /// Run `ask` with the server of `spec` started in `root`, `None` where none is chosen
    /// for it or its executable is not on `PATH`. A server that fails to start, times out,
    /// exits or breaks the protocol is stopped, and its error is the answer for the rest of
    /// the session; the first error of each server is a notice (callers read the syntax tree
    /// instead).
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
                    let chosen = self.chosen();
                    let program = self.program(spec, &chosen.servers)?;
                    // The name a person chose it by, or the usual one.
                    let name = program
                        .file_name()
                        .map_or(spec.command.into(), |n| n.to_string_lossy());
                    let started = Client::start(&name, &program, spec, root, chosen.timeouts)
                        .map_err(|e| explained(spec, &program, root, e));
                    tracing::info!(
                        server = spec.command,
                        ok = started.is_ok(),
                        "language server"
                    );
                    let slot = Arc::new(Mutex::new(match started {
                        Ok(client) => Slot::Running(Box::new(client)),
                        Err(e) => Slot::Failed(e),
                    }));
                    slots.insert(spec.command, Arc::clone(&slot));
                    slot
                }
            }
        };
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        let answer = match &mut *slot {
            Slot::Failed(e) => Err(e.clone()),
            Slot::Running(client) => ask(client),
        };
        if let Err(e) = &answer {
            notice_once(
                spec.command,
                &format!("{e}; typed holes are read from the syntax tree"),
            );
            if e.stops_the_server() && matches!(*slot, Slot::Running(_)) {
                // Dropping the client ends the server's process group.
                *slot = Slot::Failed(e.clone());
            }
        }
        Some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_servers_initialization_options_are_json() {
        for (_, spec) in KNOWN {
            let options: Result<Value, _> = serde_json::from_str(spec.initialization_options);
            assert!(options.is_ok(), "{}", spec.command);
        }
    }

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
    fn a_header_line_or_header_past_its_cap_is_an_error_before_more_is_held() {
        let long = format!("X-Long: {}\r\n", "y".repeat(MAX_HEADER_LINE));
        let error = read_body(&mut io::Cursor::new(long)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("a header line longer than {MAX_HEADER_LINE} bytes")
        );
        // A line that never ends is refused once the cap is read, from any reader.
        let mut endless = io::BufReader::with_capacity(4096, io::repeat(b'9'));
        assert!(read_body(&mut endless).is_err());
        let many = "X-A: 1\r\n".repeat(MAX_HEADER_LINES + 1);
        let error = read_body(&mut io::Cursor::new(many)).unwrap_err();
        assert!(error.to_string().contains("more than 32 lines"), "{error}");
        let blank = "\r\n".repeat(MAX_HEADER_LINES + 1);
        assert!(read_body(&mut io::Cursor::new(blank)).is_err());
        let huge = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1);
        let error = read_body(&mut io::Cursor::new(huge)).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("a message of 268435457 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_body_cut_short_is_the_end_of_the_stream_not_garbage() {
        let error = read_body(&mut io::Cursor::new("Content-Length: 10\r\n\r\n{}")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        let error = read_body(&mut io::Cursor::new("Content-Length: 10\r\n")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn the_inbox_holds_back_a_flood_and_gives_the_end_after_what_it_holds() {
        let inbox = Arc::new(Inbox {
            state: Mutex::default(),
            changed: Condvar::new(),
        });
        let flood = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || {
                let mut put = 0;
                while put < 2 * INBOX_MESSAGES && inbox.put(b"{}".to_vec()) {
                    put += 1;
                }
                put
            })
        };
        // The writer waits once the inbox is full.
        while inbox.lock().bodies.len() < INBOX_MESSAGES {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(inbox.lock().bodies.len(), INBOX_MESSAGES);
        // Taking one lets one more in; closing lets the writer go.
        let soon = Instant::now() + Duration::from_secs(5);
        assert!(inbox.take(soon).is_ok());
        inbox.close();
        assert!(flood.join().unwrap() <= INBOX_MESSAGES + 1);
        // After the end, what was held comes first, then why it ended.
        let inbox = Inbox {
            state: Mutex::default(),
            changed: Condvar::new(),
        };
        inbox.fill(io::Cursor::new(
            "Content-Length: 2\r\n\r\n{}Content-Length: x\r\n\r\n",
        ));
        assert_eq!(inbox.take(soon).ok(), Some(b"{}".to_vec()));
        match inbox.take(soon) {
            Err(NoMessage::Ended(Some(why))) => assert!(why.contains("Content-Length"), "{why}"),
            _ => panic!("the error that ended the stream"),
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
