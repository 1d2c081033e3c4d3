//! Batch files: a run's requests written for a serving engine to answer offline (OpenAI's
//! Batch API, vLLM's `run_batch`), and their answers read back into label rows.
//!
//! A request line is `{"custom_id", "method": "POST", "url", "body"}`, the body exactly what
//! the online backend would send; an answer line is `{"custom_id", "response": {"status_code",
//! "body"}, "error"}`. A custom id is the hole's id and the job: `HOLE#62` for a candidate,
//! `HOLE#hypothetical-line` and `HOLE#summary` for ProCC's drafts.
//!
//! Some candidates are built from completions (RepoCoder's second iteration, ProCC's
//! hypothetical line and summary), so a hole takes two rounds: the first exports every
//! candidate that needs nothing and the drafts; once their answers are imported, exporting
//! again gives the second round. Each export writes what is still missing, whatever the round:
//! answers that a cut response file lost, or that failed, are asked again, and a hole is
//! labelled as soon as all its answers are in.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{Value, json};

use super::LabelRow;
use super::labels::LabelFile;
use super::runner::{Draft, Job, RepoRun};
use crate::hole::Hole;
use crate::model::CompletionRequest;
use crate::model::http::{BatchCodec, error_message};

/// Holes whose prompts are built together (in parallel) before their rows are written.
const CHUNK: usize = 64;

/// Why a response file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}:{line}: {detail}")]
    Malformed {
        path: String,
        line: usize,
        detail: String,
    },
}

/// The answers of response files, by custom id.
#[derive(Debug, Default)]
pub struct Responses {
    /// The raw texts of each answered request, in choice order.
    answered: HashMap<String, Vec<String>>,
    /// Requests whose answer was an error, and the last such error.
    pub failed: usize,
    pub last_error: Option<String>,
    /// Files that end in a line cut short (an interrupted download or batch job).
    pub cut: Vec<String>,
    /// Whether an answer refused a fill-in-the-middle request (vLLM takes no `suffix`): the
    /// requests are then exported left to right, as the backend asks them online.
    pub left_to_right: bool,
}

impl Responses {
    /// Reads the response files `paths`. A last line cut short is left out (its request is
    /// still missing); any other line that is not an answer is an error naming it.
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
        let mut reader = BufReader::new(std::fs::File::open(path).map_err(io_error)?);
        let mut line = String::new();
        let mut number = 0;
        loop {
            line.clear();
            if reader.read_line(&mut line).map_err(io_error)? == 0 {
                return Ok(());
            }
            number += 1;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&line) {
                Ok(value) => value,
                Err(_) if !line.ends_with('\n') => {
                    self.cut.push(shown);
                    return Ok(());
                }
                Err(e) => {
                    return Err(BatchError::Malformed {
                        path: shown,
                        line: number,
                        detail: format!("not JSON ({e})"),
                    });
                }
            };
            self.add(&value, codec)
                .map_err(|detail| BatchError::Malformed {
                    path: shown.clone(),
                    line: number,
                    detail,
                })?;
        }
    }

    /// One answer line; an error when it is no answer line at all.
    fn add(&mut self, line: &Value, codec: &BatchCodec) -> Result<(), String> {
        let id = line
            .get("custom_id")
            .and_then(Value::as_str)
            .ok_or("no `custom_id`: not a line of a batch output file")?;
        let texts = match (line.get("error"), line.get("response")) {
            (Some(error), _) if !error.is_null() => Err(error_message(error)),
            (_, Some(response)) if !response.is_null() => self.answer(response, codec),
            _ => return Err("neither `response` nor `error`".to_string()),
        };
        match texts {
            Ok(texts) => {
                self.answered.insert(id.to_string(), texts);
            }
            Err(error) => {
                self.failed += 1;
                self.last_error = Some(format!("{id}: {error}"));
            }
        }
        Ok(())
    }

    /// The texts of a `response` object, or what went wrong.
    fn answer(&mut self, response: &Value, codec: &BatchCodec) -> Result<Vec<String>, String> {
        let status = response.get("status_code").and_then(Value::as_u64);
        let body = response.get("body").unwrap_or(&Value::Null);
        let status = match status {
            Some(200) => return codec.texts(body),
            Some(status) => status,
            None => return Err("a response without `status_code`".to_string()),
        };
        let detail = body.get("error").unwrap_or(body);
        let detail = error_message(detail);
        let status = u16::try_from(status).unwrap_or(u16::MAX);
        self.left_to_right |= codec.refuses_suffix(status, &detail);
        Err(format!("status {status}: {detail}"))
    }

    /// How many requests have an answer.
    pub fn len(&self) -> usize {
        self.answered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answered.is_empty()
    }

    /// The first raw text answering `custom_id`.
    fn text(&self, custom_id: &str) -> Option<&str> {
        self.answered.get(custom_id)?.first().map(String::as_str)
    }
}

/// The custom id of one of a hole's completions.
fn custom_id(hole_id: &str, job: Job) -> String {
    match job {
        Job::Candidate(id) => format!("{hole_id}#{id}"),
        Job::Draft(Draft::HypotheticalLine) => format!("{hole_id}#hypothetical-line"),
        Job::Draft(Draft::Summary) => format!("{hole_id}#summary"),
    }
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
        if self.first_holes > 0 {
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

/// One request line of a batch input file.
pub fn request_line(
    custom_id: &str,
    codec: &BatchCodec,
    request: &CompletionRequest,
    left_to_right: bool,
) -> Value {
    let (url, body) = codec.request(request, left_to_right);
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
        let todo: Vec<&Hole> = holes
            .iter()
            .filter(|h| !labels.is_done(&self.run.id(h)))
            .collect();
        let mut stats = BatchStats {
            holes: holes.len(),
            resumed: holes.len() - todo.len(),
            ..BatchStats::default()
        };
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

    /// The answered jobs' texts, and the request lines of the others.
    fn answers(
        &self,
        hole_id: &str,
        jobs: Vec<(Job, CompletionRequest)>,
    ) -> (Vec<(Job, String)>, Vec<Value>) {
        let mut done = Vec::new();
        let mut missing = Vec::new();
        for (job, request) in jobs {
            let custom_id = custom_id(hole_id, job);
            match self.responses.text(&custom_id) {
                Some(text) => done.push((job, self.codec.finish(text, &request))),
                None => missing.push(request_line(
                    &custom_id,
                    self.codec,
                    &request,
                    self.responses.left_to_right,
                )),
            }
        }
        (done, missing)
    }
}
