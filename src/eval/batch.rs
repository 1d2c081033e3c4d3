//! Batch files: a run's requests written for a serving engine to answer offline (OpenAI's
//! Batch API, vLLM's `run_batch`), and their answers read back into label rows.
//!
//! A request line is `{"custom_id", "method": "POST", "url", "body"}`, the body exactly what
//! the online backend would send; an answer line is `{"custom_id", "response": {"status_code",
//! "body"}, "error"}`. A custom id is the hole's id, the job and a hash of the request:
//! `HOLE#62#HASH` for a candidate, `HOLE#hypothetical-line#HASH` and `HOLE#summary#HASH` for
//! ProCC's drafts. The hash binds an answer to the very request it answers: an answer to a
//! request this run would not send (made with another budget, model or candidate set, or by an
//! older keyhole) is refused, never labelled.
//!
//! Some candidates are built from completions (RepoCoder's second iteration, ProCC's
//! hypothetical line and summary), so a hole takes two rounds: the first exports every
//! candidate that needs nothing and the drafts; once their answers are imported, exporting
//! again gives the second round. Each export writes what is still missing, whatever the round:
//! answers that a cut response file lost, or that failed, are asked again, and a hole is
//! labelled as soon as all its answers are in.
//!
//! Response files are read as online answers are: a line holds at most
//! [`MAX_ANSWER_BYTES`](crate::model::http::MAX_ANSWER_BYTES), and a line that is too long or
//! not UTF-8 is left out on its own (its request is asked again), named by file and line.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;
use serde_json::{Value, json};

use super::LabelRow;
use super::labels::LabelFile;
use super::runner::{Job, RepoRun, copy_answer, share_identical};
use crate::context::perspectives::Draft;
use crate::hole::Hole;
use crate::model::CompletionRequest;
use crate::model::http::{AnswerError, BatchCodec, MAX_ANSWER_BYTES, error_message};

/// Holes whose prompts are built together (in parallel) before their rows are written.
const CHUNK: usize = 64;
/// Hex digits of a request's hash in its custom id (48 bits: no two requests of a run share
/// one by chance).
const HASH_DIGITS: usize = 12;

/// Why a response file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error(
        "{path}: not a regular file (a response file is read to its end; a pipe or a device may have none)"
    )]
    NotAFile { path: String },
    #[error("{path}:{line}: {detail}")]
    Malformed {
        path: String,
        line: usize,
        detail: MalformedLine,
    },
}

/// Why a line of a response file is no answer line at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedLine {
    #[error("not JSON ({0})")]
    NotJson(serde_json::Error),
    #[error("no `custom_id`: not a line of a batch output file")]
    NoCustomId,
    #[error("neither `response` nor `error`")]
    NoOutcome,
}

/// Why a request of a batch has no texts: what its answer line says went wrong (kept as the
/// file's last error).
#[derive(Debug, thiserror::Error)]
enum FailedRequest {
    /// The line's `error` object.
    #[error("{0}")]
    Reported(String),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("a response without `status_code`")]
    NoStatus,
    #[error("status {status}: {detail}")]
    Status { status: u16, detail: String },
}

/// An answer as a response file gives it.
#[derive(Debug)]
struct Answer {
    /// The hash of the request it answers; none in custom ids of older versions.
    hash: Option<String>,
    /// The raw texts, in choice order.
    texts: Vec<String>,
}

/// What the run made of the answers: for the warnings and the refusal at its end.
#[derive(Debug, Default)]
struct Claims {
    /// Holes of the run (of every repository), whether or not they were labelled before.
    holes: HashSet<String>,
    /// Custom ids of answers to requests other than the run's.
    stale: Vec<String>,
}

/// The answers of response files, by hole id and job.
#[derive(Debug, Default)]
pub struct Responses {
    answered: HashMap<String, HashMap<String, Answer>>,
    /// Requests whose answer was an error, and the last such error.
    pub failed: usize,
    pub last_error: Option<String>,
    /// Files that end in a line cut short (an interrupted download or batch job).
    pub cut: Vec<String>,
    /// Lines left out on their own (`FILE:LINE: why`): too long or not UTF-8.
    pub left_out: Vec<String>,
    /// Custom ids answered more than once (`ID (FILE:LINE)` of each repeat); the first
    /// answer is the one used.
    pub repeated: Vec<String>,
    /// Whether an answer refused a fill-in-the-middle request (vLLM takes no `suffix`): the
    /// requests are then exported left to right, as the backend asks them online.
    pub left_to_right: bool,
    claims: Mutex<Claims>,
}

/// How one line of a response file reads.
enum Line {
    End,
    /// A whole line (with its line break) or the file's last, unterminated one.
    Text(String, bool),
    TooLong,
    NotUtf8(bool),
}

/// Reads the next line of `reader` into `buf`, holding at most [`MAX_ANSWER_BYTES`] of it.
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Line> {
    buf.clear();
    let limit = MAX_ANSWER_BYTES as u64 + 1;
    if reader.by_ref().take(limit).read_until(b'\n', buf)? == 0 {
        return Ok(Line::End);
    }
    let terminated = buf.last() == Some(&b'\n');
    if !terminated && buf.len() as u64 == limit {
        // Skip the rest of the line without holding it.
        loop {
            let available = reader.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let (used, found) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            reader.consume(used);
            if found {
                break;
            }
        }
        return Ok(Line::TooLong);
    }
    match String::from_utf8(std::mem::take(buf)) {
        Ok(text) => Ok(Line::Text(text, terminated)),
        Err(_) => Ok(Line::NotUtf8(terminated)),
    }
}

/// A custom id's hole id, job and request hash (none in ids of older versions).
fn parse_custom_id(id: &str) -> Option<(&str, &str, Option<&str>)> {
    let (rest, last) = id.rsplit_once('#')?;
    let is_hash = last.len() == HASH_DIGITS && last.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hash {
        return Some((rest, last, None));
    }
    let (hole, job) = rest.rsplit_once('#')?;
    Some((hole, job, Some(last)))
}

/// What a lookup of a request's answer found.
enum Found<'r> {
    Answer(&'r str),
    /// An answer to another request for the same hole and job.
    Stale,
    Missing,
}

impl Responses {
    /// Reads the response files `paths`. A last line cut short is left out (its request is
    /// still missing), as is a line too long to be an answer or not UTF-8; any other line that
    /// is not an answer is an error naming it.
    pub fn read(paths: &[PathBuf], codec: &BatchCodec) -> Result<Responses, BatchError> {
        let mut responses = Responses::default();
        for path in paths {
            responses.read_file(path, codec)?;
        }
        Ok(responses)
    }

    fn read_file(&mut self, path: &Path, codec: &BatchCodec) -> Result<(), BatchError> {
        let shown = path.display().to_string();
        let io_error = |source| BatchError::Io {
            path: shown.clone(),
            source,
        };
        // A FIFO would block the open until a writer comes, and a device may never end.
        if !std::fs::metadata(path).map_err(io_error)?.is_file() {
            return Err(BatchError::NotAFile { path: shown });
        }
        let mut reader = BufReader::new(std::fs::File::open(path).map_err(io_error)?);
        let mut buf = Vec::new();
        let mut number = 0;
        loop {
            number += 1;
            let (line, terminated) = match next_line(&mut reader, &mut buf).map_err(io_error)? {
                Line::End => return Ok(()),
                Line::Text(line, terminated) => (line, terminated),
                Line::TooLong => {
                    self.left_out.push(format!(
                        "{shown}:{number}: longer than {} MiB, the most an answer may be",
                        MAX_ANSWER_BYTES >> 20
                    ));
                    continue;
                }
                // A last line cut inside a character is a line cut short.
                Line::NotUtf8(false) => {
                    self.cut.push(shown);
                    return Ok(());
                }
                Line::NotUtf8(true) => {
                    self.left_out.push(format!("{shown}:{number}: not UTF-8"));
                    continue;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&line) {
                Ok(value) => value,
                Err(_) if !terminated => {
                    self.cut.push(shown);
                    return Ok(());
                }
                Err(e) => {
                    return Err(BatchError::Malformed {
                        path: shown,
                        line: number,
                        detail: MalformedLine::NotJson(e),
                    });
                }
            };
            self.add(&value, codec, &format!("{shown}:{number}"))
                .map_err(|detail| BatchError::Malformed {
                    path: shown.clone(),
                    line: number,
                    detail,
                })?;
        }
    }

    /// One answer line (at `place`, `FILE:LINE`); an error when it is no answer line at all.
    fn add(&mut self, line: &Value, codec: &BatchCodec, place: &str) -> Result<(), MalformedLine> {
        let id = line
            .get("custom_id")
            .and_then(Value::as_str)
            .ok_or(MalformedLine::NoCustomId)?;
        let texts = match (line.get("error"), line.get("response")) {
            (Some(error), _) if !error.is_null() => {
                Err(FailedRequest::Reported(error_message(error)))
            }
            (_, Some(response)) if !response.is_null() => self.answer(response, codec),
            _ => return Err(MalformedLine::NoOutcome),
        };
        let texts = match texts {
            Ok(texts) => texts,
            Err(error) => {
                self.failed += 1;
                self.last_error = Some(format!("{id}: {error}"));
                return Ok(());
            }
        };
        let (hole, job, hash) = parse_custom_id(id).unwrap_or((id, "", None));
        let answer = Answer {
            hash: hash.map(str::to_string),
            texts,
        };
        let jobs = self.answered.entry(hole.to_string()).or_default();
        match jobs.entry(job.to_string()) {
            std::collections::hash_map::Entry::Occupied(_) => {
                self.repeated.push(format!("{id} ({place})"));
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(answer);
            }
        }
        Ok(())
    }

    /// The texts of a `response` object, or what went wrong.
    fn answer(
        &mut self,
        response: &Value,
        codec: &BatchCodec,
    ) -> Result<Vec<String>, FailedRequest> {
        let status = response.get("status_code").and_then(Value::as_u64);
        let body = response.get("body").unwrap_or(&Value::Null);
        let status = match status {
            Some(200) => return Ok(codec.texts(body)?),
            Some(status) => status,
            None => return Err(FailedRequest::NoStatus),
        };
        let detail = body.get("error").unwrap_or(body);
        let detail = error_message(detail);
        let status = u16::try_from(status).unwrap_or(u16::MAX);
        self.left_to_right |= codec.refuses_suffix(status, &detail);
        Err(FailedRequest::Status { status, detail })
    }

    /// Counts `hole_id` as one of the run's holes: its answers are no strangers.
    fn claim_hole(&self, hole_id: &str) {
        let mut claims = self.claims.lock().expect("claims lock");
        claims.holes.insert(hole_id.to_string());
    }

    /// The first raw text answering the job `job` of `hole_id` whose request hashes to one of
    /// `hashes` (the request, and the same request left to right).
    fn text(&self, hole_id: &str, job: &str, hashes: &[String]) -> Found<'_> {
        let Some(answer) = self.answered.get(hole_id).and_then(|jobs| jobs.get(job)) else {
            return Found::Missing;
        };
        if answer.hash.as_ref().is_some_and(|h| hashes.contains(h)) {
            return answer
                .texts
                .first()
                .map_or(Found::Missing, |t| Found::Answer(t));
        }
        let mut claims = self.claims.lock().expect("claims lock");
        let hash = answer.hash.as_deref().unwrap_or("no hash");
        claims.stale.push(format!("{hole_id}#{job}#{hash}"));
        Found::Stale
    }

    /// Custom ids of answers to requests other than the run's: made with other settings, or
    /// by an older keyhole. Such an answer is never labelled.
    pub fn stale(&self) -> Vec<String> {
        let mut stale = self.claims.lock().expect("claims lock").stale.clone();
        stale.sort();
        stale.dedup();
        stale
    }

    /// Custom ids of answers for holes the run does not have (another seed, shard or
    /// repository), sorted.
    pub fn unknown(&self) -> Vec<String> {
        let claims = self.claims.lock().expect("claims lock");
        let mut unknown: Vec<String> = self
            .answered
            .iter()
            .filter(|(hole, _)| !claims.holes.contains(*hole))
            .flat_map(|(hole, jobs)| jobs.keys().map(move |job| format!("{hole}#{job}")))
            .collect();
        unknown.sort();
        unknown
    }
}

/// The job of a custom id: a candidate's id, or a draft's name.
fn job_name(job: Job) -> String {
    match job {
        Job::Candidate(id) => id.to_string(),
        Job::Draft(Draft::HypotheticalLine) => "hypothetical-line".to_string(),
        Job::Draft(Draft::Summary) => "summary".to_string(),
        Job::Draft(Draft::RepoCoderLine) => "repocoder-line".to_string(),
    }
}

/// The hash of a request line's `url` and `body`, as custom ids carry it.
fn request_hash(url: &str, body: &Value) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(url.as_bytes());
    hasher.update(b"\n");
    hasher.update(body.to_string().as_bytes());
    hasher.finalize().to_hex()[..HASH_DIGITS].to_string()
}
/// What a batch pass did for one repository, or for all of them added up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchStats {
    pub holes: usize,
    /// Holes already in the label file.
    pub resumed: usize,
    /// Holes labelled from the responses now.
    pub labelled: usize,
    /// Requests exported for the first round, and the holes they are for.
    pub first_requests: usize,
    pub first_holes: usize,
    /// Requests exported for the second round, and the holes they are for.
    pub second_requests: usize,
    pub second_holes: usize,
    /// Whether the run's candidate set has candidates built from first-round answers.
    pub second_round: bool,
}

impl BatchStats {
    pub fn add(&mut self, other: &BatchStats) {
        self.holes += other.holes;
        self.resumed += other.resumed;
        self.labelled += other.labelled;
        self.first_requests += other.first_requests;
        self.first_holes += other.first_holes;
        self.second_requests += other.second_requests;
        self.second_holes += other.second_holes;
        self.second_round |= other.second_round;
    }

    /// Holes still waiting for answers.
    pub fn waiting(&self) -> usize {
        self.first_holes + self.second_holes
    }

    /// The export's summary: what the file holds, and whether another round follows.
    pub fn export_summary(&self, file: &Path) -> String {
        let file = file.display();
        let requests = self.first_requests + self.second_requests;
        let mut text = format!(
            "{requests} requests for {} holes in {file} (round 1: {} requests for {} holes; round 2, RepoCoder's second iteration and ProCC's hypothetical line and summary: {} requests for {} holes)",
            self.waiting(),
            self.first_requests,
            self.first_holes,
            self.second_requests,
            self.second_holes
        );
        if self.first_holes > 0 && self.second_round {
            text.push_str(&format!(
                "; the {} holes of round 1 need a second round: import these answers with --import-responses and export again",
                self.first_holes
            ));
        } else if requests > 0 {
            text.push_str("; importing these answers with --import-responses labels every hole");
        } else {
            text.push_str("; every hole is labelled");
        }
        text
    }
}

/// One request line of a batch input file, for job `job` of hole `hole_id`.
pub fn request_line(
    hole_id: &str,
    job: &str,
    codec: &BatchCodec,
    request: &CompletionRequest,
    left_to_right: bool,
) -> Value {
    let (url, body) = codec.request(request, left_to_right);
    let custom_id = format!("{hole_id}#{job}#{}", request_hash(url, &body));
    json!({"custom_id": custom_id, "method": "POST", "url": url, "body": body})
}

/// A hole as the responses leave it.
enum Outcome {
    Labelled(Vec<LabelRow>),
    /// The round whose requests it still needs, and those requests (custom id, line).
    Waiting(u8, Vec<Value>),
}

/// One repository's run answered from batch files.
pub struct BatchRun<'a> {
    pub run: &'a RepoRun<'a>,
    pub codec: &'a BatchCodec,
    pub responses: &'a Responses,
}

impl BatchRun<'_> {
    /// Label every hole not yet in `labels` that the responses answer in full, and write the
    /// requests the others still need to `export` (when given).
    pub fn run(
        &self,
        labels: &mut LabelFile,
        mut export: Option<&mut dyn Write>,
    ) -> io::Result<BatchStats> {
        let holes = self.run.holes();
        for hole in &holes {
            self.responses.claim_hole(&self.run.id(hole));
        }
        let todo: Vec<&Hole> = holes
            .iter()
            .filter(|h| !labels.is_done(&self.run.id(h)))
            .collect();
        let mut stats = BatchStats {
            holes: holes.len(),
            resumed: holes.len() - todo.len(),
            second_round: self.run.has_second_stage(),
            ..BatchStats::default()
        };
        // Built before the holes' jobs on the CPU pool, rather than by the first while the
        // others wait.
        self.run.session.build_shared();
        for chunk in todo.chunks(CHUNK) {
            let outcomes: Vec<Outcome> = chunk.par_iter().map(|h| self.hole(h)).collect();
            for outcome in outcomes {
                match outcome {
                    Outcome::Labelled(rows) => {
                        labels.append_hole(&rows)?;
                        stats.labelled += 1;
                    }
                    Outcome::Waiting(round, requests) => {
                        let (count, holes) = if round == 1 {
                            (&mut stats.first_requests, &mut stats.first_holes)
                        } else {
                            (&mut stats.second_requests, &mut stats.second_holes)
                        };
                        *count += requests.len();
                        *holes += 1;
                        if let Some(out) = export.as_deref_mut() {
                            for line in requests {
                                serde_json::to_writer(&mut *out, &line)?;
                                out.write_all(b"\n")?;
                            }
                        }
                    }
                }
            }
        }
        Ok(stats)
    }

    /// Both stages of a hole from the responses, as far as they go.
    fn hole(&self, hole: &Hole) -> Outcome {
        let id = self.run.id(hole);
        let first = self.run.first_stage(hole);
        let (done, missing) = self.answers(&id, self.run.first_jobs(hole, &first));
        if !missing.is_empty() {
            return Outcome::Waiting(1, missing);
        }
        let second = self.run.second_stage(hole, &first.composer, &done);
        let (more, missing) = self.answers(&id, self.run.candidate_jobs(hole, &second));
        if !missing.is_empty() {
            return Outcome::Waiting(2, missing);
        }
        let mut done = done;
        done.extend(more);
        Outcome::Labelled(self.run.rows(hole, first.prompts, second, done))
    }

    /// The answered jobs' texts, and the request lines of the others (of the jobs without an
    /// answer, or with an answer to another request).
    fn answers(
        &self,
        hole_id: &str,
        jobs: Vec<(Job, CompletionRequest)>,
    ) -> (Vec<(Job, String)>, Vec<Value>) {
        let mut done = Vec::new();
        let mut missing = Vec::new();
        // Identical requests of the hole are asked once, and their answer labels them all.
        let keyed = jobs.into_iter().map(|(job, request)| ((), job, request));
        let (jobs, copies) = share_identical(keyed.collect());
        for ((), job, request) in jobs {
            let name = job_name(job);
            // An answer to the request as sent, or as sent once the engine refused suffixes.
            let hashes = [false, true].map(|left_to_right| {
                let (url, body) = self.codec.request(&request, left_to_right);
                request_hash(url, &body)
            });
            match self.responses.text(hole_id, &name, &hashes) {
                Found::Answer(text) => done.push((job, self.codec.finish(text, &request))),
                Found::Stale | Found::Missing => missing.push(request_line(
                    hole_id,
                    &name,
                    self.codec,
                    &request,
                    self.responses.left_to_right,
                )),
            }
        }
        for ((), job, leader) in copies {
            copy_answer(&mut done, job, leader);
        }
        (done, missing)
    }
}
