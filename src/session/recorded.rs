//! The prompt an editor plugin sent for a hole, recorded by `keyhole proxy`, as one more row
//! beside keyhole's candidates: completed by the same backend and scored the same way, its
//! provenance matched against the repository (the plugin's framing has none); and the context
//! keyhole sends in its place through `keyhole proxy --compose` ([`ComposingRepo`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::candidate::CandidateId;
use crate::compose::{
    Assembly, CandidateContext, Prompt, Segment, SegmentKind, proposal_allocation,
};
use crate::hole::Hole;
use crate::proxy::{self, Certainty, Chosen, ContextSource, Exchange, ExtraChunk, Place, Sent};
use crate::rank::RankerKind;
use crate::repo::{FileId, RepoIndex};
use crate::sourced::SourcedText;

use super::{Availability, CandidateRow, Session, Settings};

impl Session {
    /// The prompt `exchange` sent, as the row "as sent by CLIENT", its code matched at `place`
    /// (where its hole was found) first. It is sent as the plugin sent it: never cut to the
    /// budget nor composed again, with the plugin's suffix where it sent one. A chat request
    /// does not apply: keyhole's backends continue code, they do not hold conversations.
    pub fn as_sent(&self, exchange: &Exchange, place: Option<&Place>) -> CandidateRow {
        let sent = proxy::sent_prompt(&self.index, &exchange.sent, place);
        let availability = match &sent {
            Some(_) => Availability::Applicable,
            None => Availability::NotApplicable(Some(format!(
                "{} sent a chat, not code to continue",
                exchange.sender()
            ))),
        };
        let sent = sent.unwrap_or_default();
        let tokens = self.tokenizer.count(&sent.prompt.text);
        let prompt = Prompt {
            segments: vec![Segment {
                kind: SegmentKind::Proposal {
                    id: CandidateId::AS_SENT,
                },
                text: sent.prompt,
                tokens,
                // The plugin chose its length: nothing was allotted, nothing cut.
                allocated: tokens,
                cut: None,
            }],
            budget: self.budget,
            tokenizer: self.tokenizer.name(),
            proposal_id: CandidateId::AS_SENT,
            backend_tokens: None,
            assembly: Assembly::Capped,
            model_room: None,
            suffix: sent.suffix,
        };
        // How sure the place is stays in view beside the row.
        let found = match place.map(|p| p.certainty) {
            Some(Certainty::Exact) => ", found exactly".to_string(),
            Some(Certainty::BeforeOnly) => ", found; the file changed after the cursor".to_string(),
            Some(Certainty::Nearest { matched, sent }) => {
                format!(", found nearest ({matched} of {sent} lines around it match)")
            }
            None => String::new(),
        };
        CandidateRow {
            label: format!("as sent by {}{found}", exchange.sender()),
            ..CandidateRow::new(CandidateId::AS_SENT, availability, None, prompt)
        }
    }
}

impl Session {
    /// The context keyhole sends in place of the plugin's for the hole `sent` was made at: the
    /// hole located in the repository, `ranker`'s first candidate there, cut to what `room`
    /// (the prompt tokens the model takes) leaves beside the plugin's own text and the tokens
    /// it asks for. Why there is none where there is none.
    pub fn context_for(
        &self,
        sent: &Sent,
        ranker: RankerKind,
        room: usize,
    ) -> Result<Chosen, String> {
        let places = proxy::hole_places(&self.index, sent);
        let place = match places.as_slice() {
            [] => return Err("the hole is not in the repository".into()),
            [first, second, ..] if first.certainty == second.certainty => {
                return Err(format!(
                    "{} places in the repository fit the hole as well as each other",
                    places
                        .iter()
                        .filter(|p| p.certainty == first.certainty)
                        .count()
                ));
            }
            [first, ..] => first,
        };
        let hole = Hole::at(&self.index, &place.file, place.line, place.column)
            .map_err(|e| e.to_string())?;
        let proposals = self.proposals(&hole);
        let ranking = self
            .rank(&hole, &proposals, ranker)
            .map_err(|e| format!("the ranker cannot rank: {e}"))?;
        let first = ranking.first().map_or(CandidateId::DEFAULT, |r| r.id);
        // The plugin's own context (an infill's extra chunks) gives way to keyhole's.
        let plugin_text = [&sent.prefix, &sent.prompt, &sent.suffix]
            .into_iter()
            .flatten();
        let plugin_tokens: usize = plugin_text.map(|t| self.tokenizer.count(t)).sum();
        // Ollama asks in its options.
        let options = sent.parameters.get("options");
        let asked = ["n_predict", "max_tokens", "num_predict"]
            .iter()
            .find_map(|name| {
                let asked = sent.parameters.get(*name);
                let asked = asked.or_else(|| options.and_then(|o| o.get(*name)));
                asked.and_then(serde_json::Value::as_u64)
            })
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let left = room.saturating_sub(plugin_tokens.saturating_add(asked));
        // The default context is the plugin's own text before the cursor: it adds nothing.
        let (context, tokens) = match proposals.iter().find(|p| p.id() == first) {
            // No room: keyhole's prompt would be the plugin's without its own context.
            Some(_) if left == 0 => {
                return Err(format!(
                    "no room for a context: the plugin's text and the {asked} tokens it asks for fill the model's {room}"
                ));
            }
            Some(p) => {
                let allocated = proposal_allocation(self.budget, p.share()).min(left);
                p.text().truncate(self.tokenizer, allocated, p.keep())
            }
            None => (SourcedText::default(), 0),
        };
        Ok(Chosen {
            candidate: first.index() as u16,
            label: first.label().to_string(),
            hole: place.position(),
            chunks: chunks_by_file(&self.index, &context),
            tokens,
        })
    }
}

/// `context` as one chunk per run of one file's text, in order, named by the file; text of
/// no file (a separator) goes with the chunk it is in.
fn chunks_by_file(index: &RepoIndex, context: &SourcedText) -> Vec<ExtraChunk> {
    let mut chunks: Vec<(Option<FileId>, ExtraChunk)> = Vec::new();
    for piece in &context.pieces {
        let text = &context.text[piece.range.clone()];
        let file = piece.origin.map(|o| o.file);
        match chunks.last_mut() {
            Some((last, chunk)) if file.is_none() || *last == file || last.is_none() => {
                if last.is_none()
                    && let Some(file) = file
                {
                    *last = Some(file);
                    chunk.filename = index.files[file].path.clone();
                }
                chunk.text.push_str(text);
            }
            _ => chunks.push((
                file,
                ExtraChunk {
                    filename: file.map_or_else(String::new, |f| index.files[f].path.clone()),
                    text: text.to_string(),
                },
            )),
        }
    }
    chunks.into_iter().map(|(_, chunk)| chunk).collect()
}

/// A repository kept open for `keyhole proxy --compose`: opened once in the background, and
/// opened again (from the index cache, so only changed files are read) when its files change,
/// while requests go on with the session they find. No request waits for an opening: until
/// the first ends, requests go as the plugin sent them.
pub struct ComposingRepo(Arc<WarmRepo>);

/// What a [`ComposingRepo`] and the threads that open it share.
struct WarmRepo {
    root: PathBuf,
    settings: Settings,
    current: RwLock<Option<Arc<Opened>>>,
    /// Why the last opening failed, said to every request until one succeeds.
    failed: Mutex<Option<String>>,
    /// A check or opening under way; the last check's time.
    checking: AtomicBool,
    checked: Mutex<Instant>,
}

/// One opening of the repository.
struct Opened {
    session: Session,
    /// The prompt tokens the model takes: the budget, or less where the backend says so.
    room: usize,
    stamp: u64,
}

/// How often requests look for changed files, at most.
const CHANGE_CHECK: Duration = Duration::from_secs(2);

impl ComposingRepo {
    /// Start opening `root` with `settings`, on a thread of its own; `opened` hears how the
    /// first opening ended (the files indexed, or why it failed).
    pub fn open(
        root: &Path,
        settings: Settings,
        opened: impl FnOnce(Result<usize, String>) + Send + 'static,
    ) -> ComposingRepo {
        let repo = Arc::new(WarmRepo {
            root: root.to_path_buf(),
            settings,
            current: RwLock::new(None),
            failed: Mutex::new(None),
            checking: AtomicBool::new(true),
            checked: Mutex::new(Instant::now()),
        });
        let opening = repo.clone();
        std::thread::spawn(move || {
            opening.clone().reopen();
            opened(match opening.read() {
                Some(open) => Ok(open.session.index.files.len()),
                None => Err(opening
                    .failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .unwrap_or_default()),
            });
        });
        ComposingRepo(repo)
    }
}

impl WarmRepo {
    fn read(&self) -> Option<Arc<Opened>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Open the repository again where its files changed since the session was opened (or
    /// where none is open), then let the next check come.
    fn reopen(self: Arc<Self>) {
        let current = self.read();
        let stamp = stamp(&self.root, current.as_ref().map(|o| &o.session.index));
        if current.as_ref().is_none_or(|o| o.stamp != stamp) {
            match self.open_now() {
                Ok(opened) => {
                    *self.current.write().unwrap_or_else(|e| e.into_inner()) =
                        Some(Arc::new(opened));
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Err(why) => {
                    tracing::warn!(%why, "proxy --compose: cannot open the repository");
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                }
            }
        }
        *self.checked.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.checking.store(false, Ordering::Release);
    }

    fn open_now(&self) -> Result<Opened, String> {
        let session = Session::open(&self.root, &self.settings).map_err(|e| e.to_string())?;
        session.learning.load_now();
        // The model's own room, where the backend knows it (a llama.cpp server's slot).
        let asked = async {
            let room = session.backend.prompt_room();
            tokio::time::timeout(Duration::from_secs(5), room)
                .await
                .ok()
                .flatten()
        };
        let model_room = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()
            .and_then(|runtime| runtime.block_on(asked));
        let room = model_room.map_or(session.budget, |room| room.min(session.budget));
        let stamp = stamp(&self.root, Some(&session.index));
        Ok(Opened {
            session,
            room,
            stamp,
        })
    }

    /// Look for changed files on a thread of its own, unless one looks already or one looked
    /// a moment ago.
    fn check_soon(self: &Arc<Self>) {
        let due = self
            .checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
            >= CHANGE_CHECK;
        if due && !self.checking.swap(true, Ordering::AcqRel) {
            let repo = self.clone();
            std::thread::spawn(move || repo.reopen());
        }
    }
}

impl ContextSource for ComposingRepo {
    fn choose(&self, sent: &Sent) -> Result<Chosen, String> {
        let repo = &self.0;
        repo.check_soon();
        let Some(opened) = repo.read() else {
            let failed = repo
                .failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            return Err(failed.map_or_else(
                || "the repository is still opening".to_string(),
                |why| format!("the repository cannot be opened: {why}"),
            ));
        };
        opened
            .session
            .context_for(sent, repo.settings.ranker, opened.room)
    }

    fn learn(&self, candidate: u16, hole: &str, accepted: bool) -> Result<String, String> {
        let Some(opened) = self.0.read() else {
            return Err("the repository is not open".into());
        };
        let used = CandidateId::new(usize::from(candidate))
            .ok_or_else(|| format!("no candidate {candidate}"))?;
        opened.session.learning.record_outcome(used, hole, accepted)
    }
}

/// What changes when the repository's files do: each indexed file's and each folder's
/// modification time (a file added to a folder changes the folder's), and the root's.
fn stamp(root: &Path, index: Option<&Arc<RepoIndex>>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut folders = std::collections::BTreeSet::from([root.to_path_buf()]);
    for file in index.map_or(&[][..], |i| &i.files[..]) {
        let path = root.join(&file.path);
        if let Some(folder) = path.parent() {
            folders.insert(folder.to_path_buf());
        }
        path.hash(&mut hasher);
        std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .hash(&mut hasher);
    }
    for folder in folders {
        folder.hash(&mut hasher);
        std::fs::metadata(&folder)
            .and_then(|m| m.modified())
            .ok()
            .hash(&mut hasher);
    }
    hasher.finish()
}
