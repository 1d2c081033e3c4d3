//! Retrieved candidates beside RLPG's proposals, with ids after the default context (62):
//! RLPG's baselines 63–65 ([`super::retrieval`]), RepoCoder 66–67 and ProCC's three
//! perspectives 68–70, all searching RepoCoder's window database ([`super::windows`]). Each
//! takes half the budget (RepoCoder: "half the prompt length"), like a proposal, and is
//! composed the same way.
//!
//! Some candidates need the backend to write something first: RepoCoder's second iteration
//! needs the first iteration's completion, the hypothetical line needs the line itself, the
//! summary needs the summary. [`Perspectives`] builds every candidate from such texts;
//! [`build_all`] asks the backend for them (the eval runner batches the same requests
//! across holes itself).

use super::fidelity::Fidelity;
use super::retrieval::Retrieval;
use super::typed::TypedHole;
use super::typed_server;
use super::windows::{self, Shown, Similarity, WINDOW_LINES, WINDOW_STEP, WindowIndex};
use super::{HoleRequest, SourcedText};
use crate::candidate::{self, CandidateId};
use crate::compose::{Composer, DefaultContext, Prompt};
use crate::hole::Hole;
use crate::model::{Backend, BackendError, CompletionRequest};
use crate::repo::RepoIndex;
use crate::token::Tokenizer;

/// RepoCoder's iterations by default (the paper's main comparison is one against two).
pub const DEFAULT_ITERATIONS: u16 = 2;
/// Tokens a summary may take.
const SUMMARY_TOKENS: usize = 64;

/// One retrieved candidate (63–72) as built for a hole: its context and how it was found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetrievedContext {
    pub id: CandidateId,
    /// Empty when the candidate is not applicable.
    pub context: SourcedText,
    /// Similarity of the best retrieved window to the query (window-based candidates).
    pub score: Option<f64>,
    /// Jaccard similarity of the best retrieved window and the code around the hole (ProCC's
    /// second bandit feature).
    pub jaccard: Option<f64>,
    /// Why the candidate cannot apply at all (rather than found nothing), for people.
    pub why_not: Option<String>,
    /// Which reading built a typed-hole candidate (71, 72): [`TREE_SITTER`] or the language
    /// server's name.
    pub reader: Option<String>,
}

/// The reader of typed holes built from the syntax tree.
pub const TREE_SITTER: &str = "tree-sitter";

impl RetrievedContext {
    pub fn applicable(&self) -> bool {
        !self.context.is_empty()
    }

    /// The candidate's prompt, `None` when it is not applicable. RepoCoder's layout puts the
    /// best block last, so any cut takes the front.
    pub fn compose(&self, composer: &Composer) -> Option<Prompt> {
        let info = self.id.info();
        self.applicable()
            .then(|| composer.compose_context(self.id, &self.context, info.share, info.keep))
    }
}

/// ChatLSP's static context (candidates 71 and 72), saying why one does not apply: from the
/// language's server where one is chosen and answers, else from the syntax tree (the pool
/// says once why a server did not answer).
pub fn typed_candidates(index: &RepoIndex, hole: &Hole) -> Vec<RetrievedContext> {
    let file = &index.files[hole.file];
    let asked = file
        .language
        .language_server()
        .and_then(|spec| typed_server::cached_answer(spec, index, hole));
    match asked {
        Some(Ok(answer)) => server_candidates(index, hole, &answer),
        Some(Err(_)) | None => approximated_candidates(index, hole),
    }
}

/// Candidates 71 and 72 from a language server's answer.
fn server_candidates(
    index: &RepoIndex,
    hole: &Hole,
    answer: &typed_server::ServerAnswer,
) -> Vec<RetrievedContext> {
    let server = index.files[hole.file]
        .language
        .language_server()
        .map_or("the language server", |s| s.command);
    // Where the server said nothing of the hole's type, the syntax tree's is shown with the
    // server's definitions and headers.
    let reader = match answer.expected_by_syntax {
        true => format!("{server}, its expected type {TREE_SITTER}'s"),
        false => server.to_string(),
    };
    let no_type = answer.expected.is_none();
    typed_server::contexts(answer, index, hole)
        .into_iter()
        .map(|(id, context)| {
            let why_not = match (context.is_empty(), no_type) {
                (false, _) => None,
                (true, true) => Some(format!("{server} found no expected type at the hole")),
                (true, false) => Some(format!(
                    "{server} lists nothing in scope that produces the expected type"
                )),
            };
            RetrievedContext {
                id,
                context,
                why_not,
                reader: Some(reader.clone()),
                ..RetrievedContext::default()
            }
        })
        .collect()
}

/// Candidates 71 and 72 from the syntax tree (no language server installed).
fn approximated_candidates(index: &RepoIndex, hole: &Hole) -> Vec<RetrievedContext> {
    let typed = TypedHole::new(index, hole);
    let no_type = typed.expected().is_none();
    typed
        .contexts()
        .into_iter()
        .map(|(id, context)| {
            let why_not = match (context.is_empty(), no_type) {
                (false, _) => None,
                (true, true) => Some("no expected type at the hole".to_string()),
                (true, false) => Some("nothing in scope produces the expected type".to_string()),
            };
            RetrievedContext {
                id,
                context,
                why_not,
                reader: Some(TREE_SITTER.to_string()),
                ..RetrievedContext::default()
            }
        })
        .collect()
}

/// The candidates a search of the repository builds at once, in the order they are listed.
pub const SEARCHED: [CandidateId; 5] = [
    CandidateId::FILE_BM25,
    CandidateId::IDENTIFIER_USAGE,
    CandidateId::RANDOM_CONTEXT,
    CandidateId::REPOCODER,
    CandidateId::LEXICAL,
];

/// What every candidate of a repository shares.
pub struct Perspectives<'a> {
    pub index: &'a RepoIndex,
    pub retrieval: &'a Retrieval,
    pub windows: &'a WindowIndex,
    pub tokenizer: &'a dyn Tokenizer,
    pub budget: usize,
    /// Seeds the random choices of the baselines.
    pub seed: u64,
    pub fidelity: Fidelity,
}

impl<'a> Perspectives<'a> {
    fn request<'h>(&self, hole: &'h Hole) -> HoleRequest<'h>
    where
        'a: 'h,
    {
        HoleRequest::new(
            self.index,
            hole,
            self.tokenizer,
            (self.budget, candidate::RETRIEVED_SHARE),
            self.fidelity,
            self.seed,
        )
    }

    /// The candidates that need nothing from the backend: 63–66, 68, 71 and 72.
    pub fn immediate(&self, hole: &Hole) -> Vec<RetrievedContext> {
        let mut built = self.searched(hole);
        built.extend(typed_candidates(self.index, hole));
        built
    }

    /// [`Self::immediate`] less the typed holes (71, 72), which may wait for a language
    /// server.
    pub fn searched(&self, hole: &Hole) -> Vec<RetrievedContext> {
        SEARCHED
            .iter()
            .filter_map(|&id| self.searched_one(hole, id))
            .collect()
    }

    /// One of the candidates [`Self::searched`] builds, alone (`keyhole proxy --compose`
    /// builds only the one pinned); `None` for any other id.
    pub fn searched_one(&self, hole: &Hole, id: CandidateId) -> Option<RetrievedContext> {
        let plain = |context| RetrievedContext {
            id,
            context,
            ..RetrievedContext::default()
        };
        let req = self.request(hole);
        Some(match id {
            CandidateId::FILE_BM25 => plain(self.retrieval.file_bm25(&req)),
            CandidateId::IDENTIFIER_USAGE => plain(self.retrieval.identifier_usage(&req)),
            CandidateId::RANDOM_CONTEXT => plain(self.retrieval.random_context(&req)),
            CandidateId::REPOCODER => self.retrieve(
                hole,
                id,
                &repocoder_query(self.index, hole),
                Similarity::Jaccard,
            ),
            CandidateId::LEXICAL => self.retrieve(
                hole,
                id,
                &around_hole(self.index, hole),
                Similarity::TfIdfCosine,
            ),
            _ => return None,
        })
    }

    /// RepoCoder's next iteration after one that completed the hole with `previous`.
    pub fn repocoder_iteration(&self, hole: &Hole, previous: &str) -> RetrievedContext {
        let query = iteration_query(self.index, hole, previous);
        self.retrieve(
            hole,
            CandidateId::REPOCODER_ITERATION,
            &query,
            Similarity::Jaccard,
        )
    }

    /// ProCC's hypothetical line (HyDE): retrieval by the code before the hole followed by the
    /// line the backend imagined for it. (ProCC also embeds a hypothetical line for every
    /// database snippet; that is a completion per window, so windows stay as they are here.)
    pub fn hypothetical_line(&self, hole: &Hole, line: &str) -> RetrievedContext {
        let query = format!("{}{line}", code_before(self.index, hole));
        self.retrieve(
            hole,
            CandidateId::HYPOTHETICAL_LINE,
            &query,
            Similarity::TfIdfCosine,
        )
    }

    /// ProCC's code summarization: retrieval by the backend's summary of the code around the
    /// hole (the windows are matched on the identifiers and words the summary names).
    pub fn summary(&self, hole: &Hole, summary: &str) -> RetrievedContext {
        self.retrieve(hole, CandidateId::SUMMARY, summary, Similarity::TfIdfCosine)
    }

    fn retrieve(
        &self,
        hole: &Hole,
        id: CandidateId,
        query: &str,
        similarity: Similarity,
    ) -> RetrievedContext {
        let hits = self
            .windows
            .search_as(self.index, hole, query, similarity, self.fidelity);
        let request = self.request(hole);
        let (context, used) = self
            .windows
            .blocks(&request, &hits, shown(id), self.fidelity);
        let best = used.first().copied();
        let why_not = context.is_empty().then(|| match hits.is_empty() {
            true => "no window of another file shares a token with the code before the hole".into(),
            false => format!(
                "no retrieved window fits in {} tokens, its share of the budget",
                request.allocation
            ),
        });
        RetrievedContext {
            id,
            context,
            score: best.and_then(|w| hits.iter().find(|h| h.window == w).map(|h| h.score)),
            jaccard: best.map(|w| self.windows.jaccard_with(w, &around_hole(self.index, hole))),
            why_not,
            reader: None,
        }
    }
}

/// Which lines the blocks of candidate `id` show: RepoCoder's first iteration shows each window
/// extended below it (its r-g prompt), later iterations and ProCC the windows themselves.
pub fn shown(id: CandidateId) -> Shown {
    if id == CandidateId::REPOCODER {
        Shown::Extended
    } else {
        Shown::Window
    }
}

/// The summary candidate for a backend that cannot be asked for a summary.
fn summary_not_applicable(backend: &dyn Backend) -> RetrievedContext {
    RetrievedContext {
        id: CandidateId::SUMMARY,
        why_not: Some(format!(
            "backend `{}` does not follow instructions, so it cannot summarise the code",
            backend.name()
        )),
        ..RetrievedContext::default()
    }
}

/// The text of lines `first..` of the hole's file up to the hole.
fn before_hole<'i>(index: &'i RepoIndex, hole: &Hole, first: usize) -> &'i str {
    let file = &index.files[hole.file];
    &file.text[file.line_start(first)..hole.offset]
}

/// RepoCoder's first query: the [`WINDOW_LINES`] whole lines before the hole's line, as its
/// code takes them (its holes are whole lines; the start of the hole's line is left out).
pub fn repocoder_query(index: &RepoIndex, hole: &Hole) -> String {
    let file = &index.files[hole.file];
    windows::lines_text(file, windows::query_first_line(hole), hole.line)
}

/// RepoCoder's query for iteration i > 1, as its code builds it: the S_w − S_s lines before the
/// hole's line and the first S_s lines of the generated code, blank lines left out. The hole's
/// line as generated is its start continued by the previous completion.
pub fn iteration_query(index: &RepoIndex, hole: &Hole, previous: &str) -> String {
    let file = &index.files[hole.file];
    let first = hole.line.saturating_sub(WINDOW_LINES - WINDOW_STEP);
    let generated = format!("{}{previous}", before_hole(index, hole, hole.line));
    let not_blank = |line: &&str| !line.trim().is_empty();
    let before = (first..hole.line).map(|line| file.line_text(line));
    let lines: Vec<&str> = before
        .filter(not_blank)
        .chain(generated.lines().filter(not_blank).take(WINDOW_STEP))
        .collect();
    lines.join("\n")
}

/// The code before the hole that ProCC's perspectives read: the last [`WINDOW_LINES`] lines,
/// the hole's own line (up to the hole) being the last of them.
pub fn code_before<'i>(index: &'i RepoIndex, hole: &Hole) -> &'i str {
    before_hole(index, hole, (hole.line + 1).saturating_sub(WINDOW_LINES))
}

/// The unfinished code around the hole (ProCC's X̂: prefix and suffix): [`code_before`] and the [`WINDOW_STEP`] lines after the hole's line; the rest of the hole's line is
/// the answer and is left out.
pub fn around_hole(index: &RepoIndex, hole: &Hole) -> String {
    format!(
        "{}\n{}",
        code_before(index, hole),
        after_hole(index, hole, WINDOW_STEP)
    )
}

/// `lines` lines after the hole's line.
fn after_hole<'i>(index: &'i RepoIndex, hole: &Hole, lines: usize) -> &'i str {
    let file = &index.files[hole.file];
    &file.text[file.line_start(hole.line + 1)..file.line_start(hole.line + 1 + lines)]
}

/// A greedy single-line request for `prompt` at the hole.
pub fn line_request(index: &RepoIndex, hole: &Hole, prompt: &Prompt) -> CompletionRequest {
    CompletionRequest {
        current_file: Some(index.files[hole.file].path.clone()),
        ..CompletionRequest::single_line(prompt.text())
    }
}

/// ProCC's request for the hypothetical line: the code before the hole (the default prompt)
/// and the code after it as the suffix, for backends that fill in the middle (ProCC's
/// `<PRE> [Prefix] <SUF> [Suffix] <MID>`).
fn hypothetical_request(index: &RepoIndex, hole: &Hole, composer: &Composer) -> CompletionRequest {
    CompletionRequest {
        suffix: Some(after_hole(index, hole, WINDOW_LINES).to_string()),
        ..line_request(index, hole, &composer.compose(&DefaultContext))
    }
}

/// ProCC's summary instruction, "This code snippet of [code] means", for a backend that
/// follows instructions.
fn summary_request(index: &RepoIndex, hole: &Hole) -> CompletionRequest {
    CompletionRequest {
        prompt: format!("This code snippet of\n{}\nmeans", around_hole(index, hole)),
        max_tokens: SUMMARY_TOKENS,
        stop: Vec::new(),
        instruction: true,
        current_file: Some(index.files[hole.file].path.clone()),
        ..CompletionRequest::single_line(String::new())
    }
}

/// The first completion of `request`, empty if the backend returned none.
pub async fn first_completion(
    backend: &dyn Backend,
    request: &CompletionRequest,
) -> Result<String, BackendError> {
    let completions = backend.complete(request, None).await?;
    Ok(completions
        .into_iter()
        .next()
        .map(|c| c.text)
        .unwrap_or_default())
}

/// Every candidate 63–72 for one hole, asking `backend` for what they need; RepoCoder runs
/// `iterations` iterations (at least 2), and candidate 67 is the last one.
pub async fn build_all(
    perspectives: &Perspectives<'_>,
    hole: &Hole,
    composer: &Composer<'_>,
    backend: &dyn Backend,
    iterations: usize,
) -> Result<Vec<RetrievedContext>, BackendError> {
    let mut all = perspectives.immediate(hole);
    let later = build_later(perspectives, hole, composer, backend, iterations, &all).await?;
    all.extend(later);
    all.sort_by_key(|c| c.id);
    Ok(all)
}

/// A text the backend writes for a hole before a later candidate (67, 69, 70) can be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draft {
    /// RepoCoder's first completion: of candidate 66's prompt, or of the code alone where
    /// RepoCoder found nothing (its prompt then is the code alone).
    RepoCoderLine,
    /// ProCC's hypothetical line (candidate 69).
    HypotheticalLine,
    /// ProCC's summary (candidate 70), from a backend that follows instructions.
    Summary,
}

impl Perspectives<'_> {
    /// What the later candidates of `hole` need `backend` to write first, each with the
    /// request that writes it, given the `immediate` candidates. Every caller asks for these
    /// and builds the later candidates with [`Perspectives::later_from`]: the session one hole
    /// at a time, eval's runner many holes together.
    pub fn later_drafts(
        &self,
        hole: &Hole,
        composer: &Composer,
        immediate: &[RetrievedContext],
        backend: &dyn Backend,
    ) -> Vec<(Draft, CompletionRequest)> {
        let repocoder = immediate
            .iter()
            .find(|c| c.id == CandidateId::REPOCODER)
            .and_then(|c| c.compose(composer))
            .unwrap_or_else(|| composer.compose(&DefaultContext));
        let mut drafts = vec![
            (
                Draft::RepoCoderLine,
                line_request(self.index, hole, &repocoder),
            ),
            (
                Draft::HypotheticalLine,
                hypothetical_request(self.index, hole, composer),
            ),
        ];
        if backend.follows_instructions() {
            drafts.push((Draft::Summary, summary_request(self.index, hole)));
        }
        drafts
    }

    /// The later candidates (67, 69, 70) from the drafts' texts: RepoCoder's next iteration
    /// retrieves with its line; a draft not written is empty, a summary not written is not
    /// applicable (the backend follows no instructions).
    pub fn later_from<'t>(
        &self,
        hole: &Hole,
        text: impl Fn(Draft) -> Option<&'t str>,
        backend: &dyn Backend,
    ) -> Vec<RetrievedContext> {
        let iteration = self.repocoder_iteration(hole, text(Draft::RepoCoderLine).unwrap_or(""));
        let hypothetical =
            self.hypothetical_line(hole, text(Draft::HypotheticalLine).unwrap_or(""));
        let summary = match text(Draft::Summary) {
            Some(summary) => self.summary(hole, summary),
            None => summary_not_applicable(backend),
        };
        vec![iteration, hypothetical, summary]
    }
}

/// The candidates that need the backend (67, 69, 70), given the `immediate` ones (RepoCoder's
/// second iteration starts from the first's prompt), so a view can show those first.
pub async fn build_later(
    perspectives: &Perspectives<'_>,
    hole: &Hole,
    composer: &Composer<'_>,
    backend: &dyn Backend,
    iterations: usize,
    immediate: &[RetrievedContext],
) -> Result<Vec<RetrievedContext>, BackendError> {
    let mut written = Vec::new();
    for (draft, request) in perspectives.later_drafts(hole, composer, immediate, backend) {
        written.push((draft, first_completion(backend, &request).await?));
    }
    // RepoCoder's iterations past the second retrieve with the one before's completion.
    let line = written.iter().position(|(d, _)| *d == Draft::RepoCoderLine);
    for _ in 2..iterations {
        let Some(line) = line else { break };
        let prompt = perspectives
            .repocoder_iteration(hole, &written[line].1)
            .compose(composer)
            .unwrap_or_else(|| composer.compose(&DefaultContext));
        let request = line_request(perspectives.index, hole, &prompt);
        written[line].1 = first_completion(backend, &request).await?;
    }
    let text = |draft| {
        written
            .iter()
            .find(|(d, _)| *d == draft)
            .map(|(_, t)| t.as_str())
    };
    Ok(perspectives.later_from(hole, text, backend))
}
