//! The prompt an editor plugin sent for a hole, recorded by `keyhole proxy`, as one more row
//! beside keyhole's candidates: completed by the same backend and scored the same way, its
//! provenance matched against the repository (the plugin's framing has none); and the context
//! keyhole sends in its place through `keyhole proxy --compose` ([`ComposingRepo`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::candidate::CandidateId;
use crate::compose::{
    Assembly, CandidateContext, Prompt, Segment, SegmentKind, proposal_allocation,
};
use crate::context::perspectives::{self, RetrievedContext};
use crate::context::proposals::ProposalContext;
use crate::hole::Hole;
use crate::pin::{Pin, PinWatch};
use crate::proxy::{
    self, Certainty, Chosen, ContextSource, Exchange, ExtraChunk, NoContext, NotLearnt, Pinned,
    Place, Sent,
};
use crate::rank::RankerKind;
use crate::repo::{FileId, RepoIndex};
use crate::sourced::SourcedText;
use crate::token::Keep;

use super::{Availability, CandidateRow, Session, SessionError, Settings, proposal_why_not};

impl Session {
    /// The prompts `exchange` sent, as rows to go before keyhole's candidates, their code
    /// matched at `place` (where its hole was found) first: the plugin's ("as sent by
    /// CLIENT"), and where `keyhole proxy --compose` sent keyhole's in its place, that one
    /// ("as keyhole sent it: cand 7 (import MNB)"). Each is sent as it was sent: never cut to
    /// the budget nor composed again, with the plugin's suffix where it sent one. A chat
    /// request does not apply: keyhole's backends continue code, they do not hold
    /// conversations.
    pub(crate) fn recorded_rows(
        &self,
        exchange: &Exchange,
        place: Option<&Place>,
    ) -> Vec<CandidateRow> {
        // How sure the place is stays in view beside the rows.
        let found = match place.map(|p| p.certainty) {
            Some(Certainty::Exact) => ", found exactly".to_string(),
            Some(Certainty::BeforeOnly) => ", found; the file changed after the cursor".to_string(),
            Some(Certainty::Nearest { matched, sent }) => {
                format!(", found nearest ({matched} of {sent} lines around it match)")
            }
            None => String::new(),
        };
        let sender = exchange.sender();
        let mut rows = vec![self.sent_row(
            CandidateId::AS_SENT,
            &exchange.sent,
            place,
            format!("as sent by {sender}{found}"),
            sender,
        )];
        let composition = exchange.composition.as_ref().filter(|c| c.composed());
        if let Some((composition, instead)) = composition.and_then(|c| Some((c, c.sent.as_ref()?)))
        {
            let candidate = composition.candidate.map_or(String::new(), |id| {
                let label = composition.label.as_deref().unwrap_or_default();
                format!(": cand {id} ({label})")
            });
            let label = format!("as keyhole sent it{candidate}{found}");
            rows.push(self.sent_row(
                CandidateId::SENT_BY_KEYHOLE,
                instead,
                place,
                label,
                "keyhole",
            ));
        }
        rows
    }

    /// The prompt `sent` asked for, as the row `id` labelled `label`.
    fn sent_row(
        &self,
        id: CandidateId,
        sent: &Sent,
        place: Option<&Place>,
        label: String,
        sender: &str,
    ) -> CandidateRow {
        let prompt = proxy::sent_prompt(&self.index, sent, place);
        let availability = match &prompt {
            Some(_) => Availability::Applicable,
            None => Availability::NotApplicable(Some(format!(
                "{sender} sent a chat, not code to continue"
            ))),
        };
        let sent = prompt.unwrap_or_default();
        let tokens = self.tokenizer.count(&sent.prompt.text);
        let prompt = Prompt {
            segments: vec![Segment {
                kind: SegmentKind::Proposal { id },
                text: sent.prompt,
                tokens,
                // The plugin chose its length: nothing was allotted, nothing cut.
                allocated: tokens,
                cut: None,
            }],
            budget: self.budget,
            tokenizer: self.tokenizer.name(),
            proposal_id: id,
            backend_tokens: None,
            assembly: Assembly::Capped,
            model_room: None,
            suffix: sent.suffix,
        };
        CandidateRow {
            label,
            ..CandidateRow::new(id, availability, None, prompt)
        }
    }
}

/// How keyhole chooses the context it sends for a request ([`Session::context_for`]).
pub struct Choosing<'a> {
    /// Whose first candidate goes where nothing is pinned.
    pub ranker: RankerKind,
    /// The prompt tokens the model takes.
    pub room: usize,
    /// The candidate pinned for the repository (`p` in the UI), where one is.
    pub pinned: Option<CandidateId>,
    /// When the request must go: a pinned retrieved candidate not built a moment before it
    /// gives way to the ranker's first.
    pub deadline: Instant,
    /// Set while a pinned retrieved candidate is being built: one that outlives its request
    /// runs to its end, and no other starts meanwhile, so slow builds cannot pile up.
    pub building_pinned: &'a Arc<AtomicBool>,
}

/// What a request's choice keeps in hand for writing the request after it.
const WRITING_MARGIN: Duration = Duration::from_millis(10);

impl Session {
    /// The context keyhole sends in place of the plugin's for the hole `sent` was made at: the
    /// hole located in the repository, the pinned candidate there (else, or where it cannot be
    /// built by the deadline, the ranker's first), cut to what the room leaves beside the
    /// plugin's own text and the tokens it asks for. Why there is none where there is none.
    pub(crate) fn context_for(
        &self,
        sent: &Sent,
        choosing: &Choosing,
    ) -> Result<Chosen, NoContext> {
        let places = proxy::hole_places(&self.index, sent);
        let place = match places.as_slice() {
            [] => return Err(NoContext::NotInRepository),
            [first, second, ..] if first.certainty == second.certainty => {
                return Err(NoContext::Ambiguous(
                    places
                        .iter()
                        .filter(|p| p.certainty == first.certainty)
                        .count(),
                ));
            }
            [first, ..] => first,
        };
        let hole = Hole::at(&self.index, &place.file, place.line, place.column)?;
        // Started first: it builds while the proposals are.
        let pinned_build = choosing.pinned.map(|id| {
            (
                id,
                self.start_pinned_build(&hole, id, choosing.building_pinned),
            )
        });
        let proposals = self.proposals(&hole);
        let (first, pinned) = match pinned_build {
            Some((id, build)) => match pinned_context(&proposals, id, build, choosing.deadline) {
                Ok(context) => (Some((id, context)), Pinned::used(id)),
                Err(why) => (None, Pinned::passed_over(id, why)),
            },
            None => (None, None),
        };
        let (id, context) = match first {
            Some(pinned) => pinned,
            None => {
                let ranking = self
                    .rank(&hole, &proposals, choosing.ranker)
                    .map_err(NoContext::Rank)?;
                let first = ranking.first().map_or(CandidateId::DEFAULT, |r| r.id);
                let context = proposals.iter().find(|p| p.id() == first);
                let context = context.map(|p| (p.text().clone(), p.keep()));
                (
                    first,
                    context.unwrap_or((SourcedText::default(), Keep::End)),
                )
            }
        };
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
        let left = choosing
            .room
            .saturating_sub(plugin_tokens.saturating_add(asked));
        // The default context is the plugin's own text before the cursor: it adds nothing.
        let (context, keep) = context;
        let (context, tokens) = match id == CandidateId::DEFAULT {
            true => (SourcedText::default(), 0),
            // No room: keyhole's prompt would be the plugin's without its own context.
            false if left == 0 => {
                return Err(NoContext::NoRoom {
                    asked,
                    room: choosing.room,
                });
            }
            false => {
                let allocated = proposal_allocation(self.budget, id.info().share).min(left);
                context.truncate(self.tokenizer, allocated, keep)
            }
        };
        Ok(Chosen {
            candidate: id.index() as u16,
            label: id.label().to_string(),
            hole: place.position(),
            chunks: chunks_by_file(&self.index, &context),
            tokens,
            pinned,
        })
    }

    /// Start building pinned candidate `id` at `hole` where it is a retrieved one that needs
    /// nothing from the backend, on a thread of its own (`building` says one is under way);
    /// what it sends, or why none was started.
    fn start_pinned_build(
        &self,
        hole: &Hole,
        id: CandidateId,
        building: &Arc<AtomicBool>,
    ) -> PinnedBuild {
        if id < CandidateId::FIRST_RETRIEVED {
            return PinnedBuild::Proposal;
        }
        if id.needs_backend() {
            return PinnedBuild::NotStarted(PassedOver::NeedsBackend);
        }
        let typed = [CandidateId::TYPED_TYPES, CandidateId::TYPED_HEADERS].contains(&id);
        if needs_search(id) && self.search.get().is_none() {
            return PinnedBuild::NotStarted(PassedOver::SearchBuilding);
        }
        if building.swap(true, Ordering::AcqRel) {
            return PinnedBuild::NotStarted(PassedOver::StillBuilding);
        }
        let (session, hole) = (self.clone(), hole.clone());
        let building = Building(building.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        std::thread::spawn(move || {
            let _building = building;
            let built = match typed {
                true => perspectives::typed_candidates(&session.index, &hole)
                    .into_iter()
                    .find(|c| c.id == id),
                false => session.perspectives().searched_one(&hole, id),
            };
            let _ = tx.send(built);
        });
        PinnedBuild::Started(rx)
    }
}

/// Held by the thread that builds a pinned candidate: when it ends, however it ends, another
/// may start.
struct Building(Arc<AtomicBool>);

impl Drop for Building {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Pinned candidate `id`'s context at the hole of `proposals` (a proposal's, or what its
/// build sends by `deadline`) and which end of it a cut keeps, or why it cannot be sent.
fn pinned_context(
    proposals: &[ProposalContext],
    id: CandidateId,
    build: PinnedBuild,
    deadline: Instant,
) -> Result<(SourcedText, Keep), PassedOver> {
    let built = match build {
        PinnedBuild::Proposal if id == CandidateId::DEFAULT => {
            return Ok((SourcedText::default(), Keep::End));
        }
        PinnedBuild::Proposal => {
            let proposal = proposals.iter().find(|p| p.id() == id);
            let proposal = proposal.ok_or(PassedOver::NotBuilt)?;
            return match proposal_why_not(proposal) {
                Some(why) => Err(PassedOver::NotApplicable(why)),
                None => Ok((proposal.text().clone(), proposal.keep())),
            };
        }
        PinnedBuild::NotStarted(why) => return Err(why),
        PinnedBuild::Started(built) => {
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(WRITING_MARGIN);
            match built.recv_timeout(wait) {
                Ok(built) => built.ok_or(PassedOver::NotBuilt)?,
                Err(RecvTimeoutError::Timeout) => return Err(PassedOver::Late),
                Err(RecvTimeoutError::Disconnected) => return Err(PassedOver::BuildFailed),
            }
        }
    };
    match built.applicable() {
        true => Ok((built.context, id.info().keep)),
        false => Err(PassedOver::NotApplicable(
            built
                .why_not
                .unwrap_or_else(|| "it found nothing for this hole".into()),
        )),
    }
}

/// How a pinned candidate is being built for a request.
enum PinnedBuild {
    /// One of RLPG's: built with the proposals.
    Proposal,
    /// A retrieved one, on its thread: it sends what it built.
    Started(std::sync::mpsc::Receiver<Option<RetrievedContext>>),
    /// Not built, for this reason.
    NotStarted(PassedOver),
}

/// Why a pinned candidate gave way to the ranker's first for a request (said in the record).
#[derive(Debug, thiserror::Error)]
enum PassedOver {
    #[error("it needs the backend to write first, too slow for a request")]
    NeedsBackend,
    #[error("the search indexes are still being built")]
    SearchBuilding,
    #[error("it is still being built for an earlier request")]
    StillBuilding,
    #[error("it was not built at this hole")]
    NotBuilt,
    #[error("it does not apply here: {0}")]
    NotApplicable(String),
    #[error("it was not built within the deadline")]
    Late,
    #[error("building it failed (the log says why)")]
    BuildFailed,
}

impl Pinned {
    fn used(id: CandidateId) -> Option<Pinned> {
        Some(Pinned {
            candidate: id.index() as u16,
            passed_over_because: None,
        })
    }

    fn passed_over(id: CandidateId, why: PassedOver) -> Option<Pinned> {
        Some(Pinned {
            candidate: id.index() as u16,
            passed_over_because: Some(format!(
                "pinned candidate {id} ({}): {why}; the ranker's first instead",
                id.label()
            )),
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
    failed: Mutex<Option<Arc<SessionError>>>,
    /// A check or opening under way; the last check's time.
    checking: AtomicBool,
    checked: Mutex<Instant>,
    /// The candidate pinned for the repository, read again when its file changes.
    pin: PinWatch,
    /// A pinned retrieved candidate being built ([`Choosing::building_pinned`]).
    building_pinned: Arc<AtomicBool>,
    /// The search indexes being built for a pinned retrieved candidate.
    warming: Arc<AtomicBool>,
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
        opened: impl FnOnce(Result<usize, Arc<SessionError>>) + Send + 'static,
    ) -> ComposingRepo {
        let repo = Arc::new(WarmRepo {
            root: root.to_path_buf(),
            current: RwLock::new(None),
            failed: Mutex::new(None),
            checking: AtomicBool::new(true),
            checked: Mutex::new(Instant::now()),
            pin: PinWatch::new(Pin::of(&settings.dirs, root)),
            building_pinned: Arc::default(),
            warming: Arc::default(),
            settings,
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
                    .expect("an opening that failed says why")),
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
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(why));
                }
            }
        }
        *self.checked.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.checking.store(false, Ordering::Release);
    }

    fn open_now(&self) -> Result<Opened, SessionError> {
        let session = Session::open(&self.root, &self.settings)?;
        session.learning.load_now();
        // A pinned search is ready before the session serves.
        if self.pin.current().is_some_and(needs_search) {
            session.perspectives();
        }
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
    fn choose(&self, sent: &Sent, deadline: Instant) -> Result<Chosen, NoContext> {
        let repo = &self.0;
        repo.check_soon();
        let Some(opened) = repo.read() else {
            let failed = repo
                .failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            return Err(failed.map_or(NoContext::Opening, |why| NoContext::Unopened(why)));
        };
        let pinned = repo.pin.current();
        let session = &opened.session;
        if pinned.is_some_and(needs_search) && session.search.get().is_none() {
            repo.warm_search(session);
        }
        let choosing = Choosing {
            ranker: repo.settings.ranker,
            room: opened.room,
            pinned,
            deadline,
            building_pinned: &repo.building_pinned,
        };
        session.context_for(sent, &choosing)
    }

    fn learn(&self, candidate: u16, hole: &str, accepted: bool) -> Result<String, NotLearnt> {
        let Some(opened) = self.0.read() else {
            return Err(NotLearnt::NotOpen);
        };
        let used =
            CandidateId::new(usize::from(candidate)).ok_or(NotLearnt::NoCandidate(candidate))?;
        opened.session.learning.record_outcome(used, hole, accepted)
    }
}

impl WarmRepo {
    /// Build `session`'s search indexes on a thread of their own, unless one builds them.
    fn warm_search(&self, session: &Session) {
        if !self.warming.swap(true, Ordering::AcqRel) {
            let (session, warming) = (session.clone(), self.warming.clone());
            std::thread::spawn(move || {
                session.perspectives();
                warming.store(false, Ordering::Release);
            });
        }
    }
}

/// Whether candidate `id` searches the repository's indexes (a pinned one has them built).
fn needs_search(id: CandidateId) -> bool {
    perspectives::SEARCHED.contains(&id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_candidate_not_built_by_the_deadline_gives_way_and_says_why() {
        let (_building, built) = std::sync::mpsc::sync_channel(1);
        let started = Instant::now();
        let why = pinned_context(
            &[],
            CandidateId::REPOCODER,
            PinnedBuild::Started(built),
            started + WRITING_MARGIN + Duration::from_millis(30),
        )
        .unwrap_err();
        assert_eq!(why.to_string(), "it was not built within the deadline");
        assert!(started.elapsed() < Duration::from_secs(60), "it waited on");
        let (failed, built) = std::sync::mpsc::sync_channel(1);
        drop(failed);
        let why = pinned_context(
            &[],
            CandidateId::REPOCODER,
            PinnedBuild::Started(built),
            Instant::now() + Duration::from_secs(600),
        )
        .unwrap_err();
        assert!(why.to_string().starts_with("building it failed"), "{why}");
        let passed = Pinned::passed_over(CandidateId::REPOCODER, why);
        let said = passed.unwrap().passed_over_because.unwrap();
        assert!(
            said.starts_with("pinned candidate 66 (RepoCoder): building it failed"),
            "{said}"
        );
        assert!(said.ends_with("; the ranker's first instead"), "{said}");
    }
}
