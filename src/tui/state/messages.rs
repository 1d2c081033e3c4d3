//! What flows through the reducer: actions that reach `update` (a key's [`Command`] among
//! them) and the effects it asks the driver for.

use std::time::Instant;

use super::*;

/// Why a job the driver ran for the state came back without its result: the library's error
/// (the status line or card shows its one line), or a panic the driver caught (a bug).
#[derive(Clone, Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Failed(Arc<dyn std::error::Error + Send + Sync>),
    #[error("internal error ({0})")]
    Panicked(String),
}

impl JobError {
    pub fn failed(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> JobError {
        JobError::Failed(Arc::from(error.into()))
    }
}

pub enum Action {
    Command(Command),
    /// A key typed while a text field or question has the focus.
    Input(KeyEvent),
    /// A mouse click, relative to the pane's inner area of the given size.
    Click {
        pane: Pane,
        row: u16,
        col: u16,
        width: u16,
        height: u16,
    },
    /// The mouse wheel over `pane`: it scrolls whichever pane has the focus.
    Scroll {
        pane: Pane,
        command: Command,
    },
    /// Rows of each pane as drawn (`Pane::ALL` order), when they change.
    Layout([u16; 4]),
    /// The spinner's beat, with the time: running cards show how long they have taken.
    Tick(Instant),
    /// How far opening the repository has come.
    Progress(Progress),
    /// The hole's file, read from disk as opening begins, so that it shows before the index is
    /// ready; the hole's (line, column), 0-based.
    Previewed {
        path: String,
        text: String,
        at: (usize, usize),
    },
    Indexed(Result<Indexed, JobError>),
    Analysed {
        generation: u64,
        candidates: Vec<CandidateRow>,
        /// What the ranker ranks, kept so a ranker change re-ranks without rebuilding.
        proposals: Arc<Vec<ProposalContext>>,
        /// The ranker that ordered `candidates`.
        ranker: RankerKind,
    },
    /// backends.toml read again for the backend picker: its usable entries (the embedded one
    /// first) and what was left out.
    BackendsRead {
        backends: Vec<BackendConfig>,
        warnings: Vec<String>,
    },
    /// Backend `chosen` of the setup is ready, or why it could not be built; with the rankers
    /// for it where they change (`keyhole tune` made a classifier for one of the two).
    BackendSwitched {
        chosen: usize,
        backend: Result<Arc<dyn Backend>, JobError>,
        learning: Option<Learning>,
    },
    /// Building the candidates of hole `generation` failed (a bug: the driver caught a panic).
    AnalysisFailed {
        generation: u64,
        error: JobError,
    },
    /// The retrieved candidates that needed the backend, built after the others.
    Retrieved {
        generation: u64,
        candidates: Vec<CandidateRow>,
        procc: Procc,
    },
    /// How far building the search indexes has come (the first time, or after an edit).
    SearchProgress(SearchProgress),
    /// The retrieved candidates of hole `generation` that search the repository (63–66, 68),
    /// once the search indexes were ready, or why they could not be built.
    Searched {
        generation: u64,
        candidates: Result<Vec<CandidateRow>, JobError>,
    },
    /// The typed holes (71, 72) of hole `generation`, once its language server answered or
    /// the syntax tree was read in its place.
    Typed {
        generation: u64,
        candidates: Vec<CandidateRow>,
    },
    /// A new order of the candidates from `ranker`, or why it cannot rank.
    Ranked {
        generation: u64,
        ranker: RankerKind,
        ranked: Result<Vec<Ranked>, JobError>,
    },
    /// Card slot `card`'s request was taken up by the backend at `at`.
    CardStarted {
        generation: u64,
        card: usize,
        at: Instant,
    },
    /// Candidate `candidate`'s prompt fitted to the backend's own count, or why it cannot be.
    Fitted {
        generation: u64,
        candidate: CandidateId,
        prompt: Result<Prompt, JobError>,
    },
    /// Text streamed so far for card slot `card` of a running completion.
    Streamed {
        generation: u64,
        card: usize,
        text: String,
    },
    Completed {
        generation: u64,
        cards: Vec<Card>,
    },
    /// The requests a run sent, for the request log.
    Logged(Vec<LoggedRequest>),
    /// What the online ranker has learnt: shows and picks per candidate.
    OnlineLearnt(BTreeMap<CandidateId, Counts>),
    /// A pick taught ProCC's bandit: the perspective it now chooses for the hole of `context`.
    ProccTaught {
        context: bandit::Context,
        pick: Option<CandidateId>,
    },
    /// The source pane's `shown`th text, highlighted.
    Highlighted {
        shown: u64,
        lines: Vec<StyledLine>,
    },
    /// A completion was written into `file` (`Some`), or the last one undone (`None`).
    Written {
        file: FileId,
        /// The file's text now, and what undoes the write (none for an undo).
        result: Result<(String, Option<Applied>), JobError>,
    },
    /// The proxy's record as read: every exchange, oldest first, and how many lines could not
    /// be read.
    RecordedRead {
        exchanges: Vec<crate::proxy::Exchange>,
        unreadable: usize,
    },
    /// Where the hole of a recorded request may be, surest first.
    RecordedLocated {
        exchange: Box<crate::proxy::Exchange>,
        places: Vec<crate::proxy::Place>,
    },
    /// The user's editor returned (or could not start: why): files may have changed.
    Edited(Result<(), crate::tui::EditorError>),
    /// Files of `index` another program changed on disk (their content is not the index's:
    /// changed, added or removed), or none where they were changed back; the watch on
    /// `index` reports whenever they differ from its last report.
    ChangedOnDisk {
        index: Arc<RepoIndex>,
        paths: Vec<String>,
    },
    /// A one-line report from the driver (pick logged, file written, errors).
    Message(String),
    /// The repository's pin was written (the candidate pinned now; none: unpinned), or why
    /// not.
    Pinned(Result<Option<CandidateId>, JobError>),
}

pub struct Indexed {
    pub index: Arc<RepoIndex>,
    pub search: SharedSearch,
    /// The backend built for it, or the one kept.
    pub backend: Arc<dyn Backend>,
    pub hole: Hole,
    /// The candidate pinned for the repository, and a warning where its file is damaged.
    pub pinned: Option<CandidateId>,
    pub pin_warning: Option<String>,
    /// When reading the repository began: a file changed after that may not be what the
    /// index holds.
    pub read_at: std::time::SystemTime,
}

/// The backend a repository opens with.
pub enum IndexBackend {
    /// Build this configured backend for it.
    Build(Box<BackendConfig>),
    /// Keep the one running (the repository is read again after a write).
    Keep(Arc<dyn Backend>),
}

pub enum Effect {
    /// Rank with these from now on (the classifier tuned for the backend switched to).
    UseLearning(Learning),
    /// Open the repository with `backend`.
    Index {
        root: PathBuf,
        position: Option<String>,
        backend: IndexBackend,
    },
    /// Build and rank RLPG's candidates within `budget` tokens of `tokenizer`; the retrieved
    /// ones follow as the search indexes, the language server and `backend` are ready.
    Analyse {
        index: Arc<RepoIndex>,
        search: SharedSearch,
        backend: Arc<dyn Backend>,
        hole: Hole,
        generation: u64,
        ranker: RankerKind,
        tokenizer: TokenizerKind,
        budget: usize,
        /// The recorded request whose hole this is: its prompt joins the candidates.
        recorded: Option<Arc<OpenRecorded>>,
    },
    /// Watch the files of `index`, read from `read_at` on, for changes other programs make
    /// ([`Action::ChangedOnDisk`]), instead of the index watched before.
    Watch {
        index: Arc<RepoIndex>,
        read_at: std::time::SystemTime,
    },
    /// Read the proxy's record (the recorded-requests picker opens on it).
    ReadRecorded,
    /// Find where the hole of a recorded request is in the repository.
    LocateRecorded {
        index: Arc<RepoIndex>,
        exchange: Box<crate::proxy::Exchange>,
    },
    /// Read backends.toml again (the backend picker opens on what it says now).
    ReadBackends,
    /// Build backend `chosen` of the setup (a local model loads its file).
    SwitchBackend {
        chosen: usize,
        entry: BackendConfig,
        index: Arc<RepoIndex>,
    },
    Rank {
        index: Arc<RepoIndex>,
        hole: Hole,
        proposals: Arc<Vec<ProposalContext>>,
        generation: u64,
        ranker: RankerKind,
    },
    /// Fit `candidate`'s prompt to the budget as `backend`'s model counts it (as a run sends
    /// it), so that the prompt pane shows what would be sent.
    Fit {
        generation: u64,
        candidate: CandidateId,
        backend: Arc<dyn Backend>,
        refit: Refit,
    },
    Complete(CompleteJob),
    CancelCompletions,
    Pick {
        pick: feedback::Pick,
        /// Set when the picked completion came from one of ProCC's perspectives.
        bandit: Option<BanditLesson>,
    },
    /// Write a completion into `file` (the hole's target, `original`, is what undo puts back).
    Apply {
        file: FileId,
        edit: FileEdit,
        original: String,
    },
    /// Take an apply back.
    Undo {
        file: FileId,
        edit: FileEdit,
    },
    /// Pin `candidate` for the repository at `root` (none: unpin it).
    Pin {
        root: PathBuf,
        candidate: Option<CandidateId>,
    },
    SetMouse(bool),
    /// Put text on the terminal's clipboard.
    Copy(String),
    /// Highlight `text` of `path` with the syntect theme `theme`, for what the source pane
    /// shows as its `shown`th text.
    Highlight {
        shown: u64,
        path: String,
        text: String,
        theme: String,
    },
    /// Write a prompt to a new file named after `stem` in the working directory.
    SavePrompt {
        stem: String,
        text: String,
    },
    /// Hand the terminal to the user's editor on `path` at `line` (1-based).
    OpenInEditor {
        path: PathBuf,
        line: usize,
    },
    Suspend,
    Quit,
}

/// Everything a completion run needs, owned, so it can move into a task.
pub struct CompleteJob {
    pub generation: u64,
    pub backend: Arc<dyn Backend>,
    /// One card each.
    pub prompts: Vec<RunPrompt>,
    pub current_file: String,
    pub file_text: String,
    pub offset: usize,
    pub target: String,
    /// What composing the prompts again needs, so that each fits the budget as the backend's
    /// model counts it; `None` for edits, which are sent as written.
    pub refit: Option<Refit>,
}

/// A hole's prompts composed again for the backend (see [`crate::session::Session::fit`]).
pub struct Refit {
    pub index: Arc<RepoIndex>,
    pub search: crate::session::SharedSearch,
    pub hole: Hole,
    pub tokenizer: TokenizerKind,
    pub budget: usize,
}
