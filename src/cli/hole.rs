//! What the hole commands share: their arguments, opening the repository and the hole as a
//! library [`Session`], and the pieces of output every one of them prints.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::backends::BackendArgs;
use super::{bounds, dirs};
use keyhole::candidate::CandidateId;
use keyhole::compose::{self, Prompt, SegmentKind};
use keyhole::context::fidelity::Fidelity;
use keyhole::context::{SourcedText, perspectives};
use keyhole::escape;
use keyhole::hole::Hole;
use keyhole::lsp::ServerChoice;
use keyhole::model::Backend;
use keyhole::rank::RankerKind;
use keyhole::repo::{RepoIndex, Vendored};
use keyhole::session::{Choices, Session, Settings};
use keyhole::token::{Keep, TokenizerKind};

/// How the repository is indexed.
#[derive(Args)]
pub struct CacheArgs {
    /// Do not read or write the on-disk index cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Also index the folders languages install dependencies into (node_modules, .venv,
    /// venv, site-packages), which are left out by default.
    #[arg(long)]
    pub include_vendored: bool,
}

impl CacheArgs {
    fn vendored(&self) -> Vendored {
        match self.include_vendored {
            true => Vendored::Included,
            false => Vendored::Skipped,
        }
    }
}

/// Which language servers type holes (candidates 71 and 72), and how long they may take.
#[derive(Args, Clone, Default)]
pub struct ServerArgs {
    /// Language servers for typed holes: auto (each language's server where it is on PATH),
    /// off, or LANGUAGE=COMMAND[,LANGUAGE=COMMAND] (python, typescript) [default:
    /// KEYHOLE_LANGUAGE_SERVERS, else auto].
    #[arg(long, value_name = "SERVERS")]
    pub language_servers: Option<ServerChoice>,
    /// Seconds a language server may take for any answer, its start included; while it
    /// loads the project, the longest it may stay silent, and one that says it is loading
    /// may take ten times as long [default: 60 to start, 10 a request].
    #[arg(long, value_name = "SECS", value_parser = bounds::server_timeout)]
    pub language_server_timeout: Option<Duration>,
}

impl ServerArgs {
    /// Put these choices into `choices`.
    pub fn choose(&self, choices: &mut Choices) {
        choices.language_servers.clone_from(&self.language_servers);
        choices.language_server_timeout = self.language_server_timeout;
    }
}

/// How prompts are counted and built: every command that composes prompts takes these.
#[derive(Args, Clone)]
pub struct PromptArgs {
    /// Total prompt budget in tokens.
    #[arg(long, default_value_t = compose::DEFAULT_BUDGET, value_parser = bounds::budget)]
    pub budget: usize,
    /// Tokenizer the budget is counted in: code, r50k_base, p50k_base, cl100k_base,
    /// o200k_base [default: the backend's, else code].
    #[arg(long)]
    pub tokenizer: Option<TokenizerKind>,
    /// Whose rules place the holes and build the contexts where a paper and its authors'
    /// code disagree: paper or code.
    #[arg(long, default_value = "paper")]
    pub fidelity: Fidelity,
}

impl PromptArgs {
    /// Put these choices into `choices`.
    pub fn choose(&self, choices: &mut Choices) {
        choices.budget = Some(self.budget);
        choices.tokenizer = self.tokenizer;
        choices.profile = Some(self.fidelity);
    }
}

#[derive(Args)]
pub struct HoleArgs {
    /// Repository root.
    pub repo: PathBuf,
    /// FILE:LINE:COL, FILE relative to REPO, LINE and COL 1-based.
    pub position: String,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// RepoCoder's iterations (candidate 67 is the last one).
    #[arg(long, default_value_t = perspectives::DEFAULT_ITERATIONS, value_parser = bounds::iterations)]
    pub iterations: u16,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
}

/// How to rank the candidates of a hole.
#[derive(Args)]
pub struct RankArgs {
    /// Which ranker orders the candidates: rlpg-h (the bundled classifier), rlpg-r, bm25,
    /// fixed, online.
    #[arg(long, default_value = "rlpg-h")]
    pub ranker: RankerKind,
    /// A classifier written by `keyhole train` [default: the bundled one].
    #[arg(long)]
    pub classifier: Option<PathBuf>,
    /// The local BERT-family model (config.json, model.safetensors, tokenizer.json) the
    /// classifier was trained on with `keyhole train --encoder-dir`.
    #[arg(long)]
    pub encoder_dir: Option<PathBuf>,
}

impl RankArgs {
    /// Put these choices into `choices`.
    pub fn choose(&self, choices: &mut Choices) {
        choices.ranker = Some(self.ranker);
        choices.classifier.clone_from(&self.classifier);
        choices.encoder_dir.clone_from(&self.encoder_dir);
    }
}

impl HoleArgs {
    /// Put these choices into `choices`.
    pub fn choose(&self, choices: &mut Choices) {
        self.prompt.choose(choices);
        choices.iterations = Some(self.iterations);
        choices.no_cache = self.cache.no_cache;
        self.servers.choose(choices);
        choices.include_vendored = self.cache.include_vendored;
    }
}

/// The settings a command runs with: `choices` resolved with backends.toml and the defaults,
/// and a local model's threads set for the whole process.
pub fn settings(choices: &Choices) -> Result<Settings> {
    let settings = Settings::resolve(choices, dirs().clone())?;
    // SAFETY: every command resolves its settings before it starts a thread.
    unsafe { settings.use_threads() };
    Ok(settings)
}

/// Index `repo` (through the cache unless `--no-cache`), printing the first warnings.
pub fn open_repo(repo: &Path, cache: &CacheArgs) -> Result<RepoIndex> {
    let cache_dir = if cache.no_cache {
        None
    } else {
        dirs().cache.clone()
    };
    let index =
        RepoIndex::open_with_progress(repo, cache_dir.as_deref(), cache.vendored(), &|_, _| {})?;
    print_warnings(&index)?;
    if index.files.is_empty() {
        return Err(keyhole::session::SessionError::NoSourceFiles(repo.to_path_buf()).into());
    }
    Ok(index)
}

/// The first warnings of indexing `index`, and how many more there are.
fn print_warnings(index: &RepoIndex) -> Result<()> {
    for warning in index.warnings.iter().take(5) {
        errln!("warning: {warning}");
    }
    if index.warnings.len() > 5 {
        errln!(
            "warning: ... and {} more (keyhole index --json lists them)",
            index.warnings.len() - 5
        );
    }
    Ok(())
}

/// A hole of an opened repository and the session that builds its candidates.
pub struct Opened {
    pub settings: Settings,
    pub session: Session,
    pub hole: Hole,
}

impl Opened {
    /// Open the repository and the hole as the hole, backend and (where the command ranks)
    /// ranking arguments say.
    pub fn open(at: &HoleArgs, backend: &BackendArgs, rank: Option<&RankArgs>) -> Result<Opened> {
        let mut choices = Choices::default();
        at.choose(&mut choices);
        backend.choose(&mut choices);
        if let Some(rank) = rank {
            rank.choose(&mut choices);
        }
        let settings = settings(&choices)?;
        let session = Session::open(&at.repo, &settings)?;
        print_warnings(&session.index)?;
        // Empty only where `keyhole REPO` runs without a terminal: where the UI would open.
        let hole = match at.position.as_str() {
            "" => Hole::opening(&session.index),
            spec => Hole::parse(&session.index, spec)?,
        };
        Ok(Opened {
            settings,
            session,
            hole,
        })
    }

    /// The number people see for candidate `id`: the profile's ([`keyhole::candidate::Numbering`]).
    pub fn number(&self, id: CandidateId) -> usize {
        self.session.fidelity.numbering().number(id)
    }

    /// The candidate a person means by `typed` (`--id`), a number of the profile's.
    pub fn meant(&self, typed: CandidateId) -> CandidateId {
        self.session.fidelity.numbering().typed(typed)
    }

    /// A file's path, relative to the repository.
    pub fn path(&self, file: usize) -> &str {
        &self.session.index.files[file].path
    }

    pub fn hole_out(&self) -> HoleOut<'_> {
        HoleOut {
            file: self.path(self.hole.file),
            line: self.hole.line + 1,
            column: self.hole.column + 1,
            target: self.hole.target.as_deref(),
        }
    }

    /// Where each piece of `text` came from: the file and 1-based line range.
    pub fn pieces(&self, text: &SourcedText) -> Vec<PieceOut<'_>> {
        text.pieces
            .iter()
            .map(|p| {
                let origin = p.origin.map(|o| {
                    let file = &self.session.index.files[o.file];
                    let last = (o.span.end as usize)
                        .saturating_sub(1)
                        .max(o.span.start as usize);
                    (
                        file.path.as_str(),
                        [
                            file.line_of(o.span.start as usize) + 1,
                            file.line_of(last) + 1,
                        ],
                    )
                });
                PieceOut {
                    start: p.range.start,
                    end: p.range.end,
                    file: origin.map(|o| o.0),
                    lines: origin.map(|o| o.1),
                }
            })
            .collect()
    }

    /// The repository, the hole, its line and target, and the budget, a line each.
    pub fn print_header(&self) -> Result<()> {
        let index = &self.session.index;
        outln!(
            "repository  {}",
            escape::controls(&index.root.to_string_lossy())
        );
        outln!(
            "hole        {}",
            escape::controls(&self.hole.display(index))
        );
        let line = index.files[self.hole.file].line_text(self.hole.line);
        outln!("line        {}", escape::controls(line.trim()));
        let target = self.hole.target.as_deref().unwrap_or("(unknown)");
        outln!("target      {}", escape::controls(target));
        let tokenizer = self.session.tokenizer.name();
        outln!("budget      {} {tokenizer} tokens", self.session.budget);
        Ok(())
    }

    /// End a command that exits next: print the backend's notices and leave the repository's
    /// memory to the operating system, as freeing a large index, its search indexes and model
    /// piece by piece takes longer than a one-hole command's own work.
    pub fn finish(self) -> Result<()> {
        print_notices(self.session.backend.as_ref())?;
        // Language servers are processes of their own: they are stopped, not left running.
        self.session.index.language_servers.stop();
        std::mem::forget(self);
        Ok(())
    }
}

/// What the backend changed about how it serves (see [`Backend::notices`]), on stderr.
pub fn print_notices(backend: &dyn Backend) -> Result<()> {
    for notice in backend.notices() {
        errln!("note: {notice}");
    }
    Ok(())
}

/// The hole, as JSON output names it.
#[derive(Serialize)]
pub struct HoleOut<'a> {
    pub file: &'a str,
    pub line: usize,
    pub column: usize,
    pub target: Option<&'a str>,
}

/// A piece of prompt text and where it came from (`file: null` for formatting keyhole added).
#[derive(Serialize)]
pub struct PieceOut<'a> {
    pub start: usize,
    pub end: usize,
    pub file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<[usize; 2]>,
}

/// The segment of a candidate's own context in `prompt`.
pub fn context_segment(prompt: &Prompt) -> Option<&compose::Segment> {
    prompt.segment(|k| matches!(k, SegmentKind::Proposal { .. }))
}

/// The default context's segment, which every prompt has.
pub fn default_segment(prompt: &Prompt) -> &compose::Segment {
    prompt
        .segment(|k| matches!(k, SegmentKind::Default))
        .expect("every prompt has a default segment")
}

pub fn cut_name(cut: Option<Keep>) -> &'static str {
    match cut {
        None => "-",
        Some(Keep::Start) => "start",
        Some(Keep::End) => "end",
    }
}

pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The first `shown` items and how many more there are.
pub fn summarize(items: &[&str], shown: usize) -> String {
    let mut text = items
        .iter()
        .take(shown)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > shown {
        text.push_str(&format!(" +{}", items.len() - shown));
    }
    text
}
