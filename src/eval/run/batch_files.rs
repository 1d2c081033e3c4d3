//! `--export-requests` and `--import-responses`: an evaluation answered from batch files
//! instead of a server, the files around [`crate::eval::batch`]'s requests and answers.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{At, EvalError, Observer, canonical};
use crate::eval::batch::{BatchRun, BatchStats, Responses};
use crate::eval::labels::LabelFile;
use crate::eval::runner::{RepoRun, RunStats};
use crate::model::config::BackendConfig;
use crate::model::http::BatchCodec;

/// `--export-requests` and `--import-responses`: a run answered from batch files instead of
/// a server.
pub struct BatchFiles {
    codec: BatchCodec,
    responses: Responses,
    /// Where the requests go, and the file they are written to until the run is done.
    export: Option<(PathBuf, PathBuf, BufWriter<File>)>,
    stats: BatchStats,
}

impl BatchFiles {
    /// The batch files `--export-requests` and `--import-responses` name, if any.
    pub fn open(
        export_requests: Option<&Path>,
        import_responses: &[PathBuf],
        entry: &BackendConfig,
        observer: &dyn Observer,
    ) -> Result<Option<BatchFiles>, EvalError> {
        if export_requests.is_none() && import_responses.is_empty() {
            return Ok(None);
        }
        if let Some(export) = export_requests
            && let Some(import) = import_responses
                .iter()
                .find(|import| same_file(export, import))
        {
            return Err(EvalError::ExportOverImport(import.clone()));
        }
        let codec = BatchCodec::new(entry)?;
        let responses = Responses::read(import_responses, &codec)?;
        for file in &responses.cut {
            observer.note(&format!(
                "{file}: its last line is cut short; its request is exported again (or import the whole file later)"
            ))?;
        }
        if !responses.left_out.is_empty() {
            observer.note(&format!(
                "warning: {} lines of the response files are left out and their requests asked again ({})",
                responses.left_out.len(),
                named(&responses.left_out)
            ))?;
        }
        if !responses.repeated.is_empty() {
            observer.note(&format!(
                "warning: {} answers repeat a custom id answered before, and only the first answer of each is used ({})",
                responses.repeated.len(),
                named(&responses.repeated)
            ))?;
        }
        let export = match export_requests {
            Some(path) => {
                let mut partial = path.as_os_str().to_owned();
                partial.push(".partial");
                let partial = PathBuf::from(partial);
                let file = File::create(&partial).at(&partial)?;
                Some((path.to_path_buf(), partial, BufWriter::new(file)))
            }
            None => None,
        };
        Ok(Some(BatchFiles {
            codec,
            responses,
            export,
            stats: BatchStats::default(),
        }))
    }

    /// Labels the holes of `run` the responses answer, and exports what the others need.
    pub fn label(&mut self, run: &RepoRun, labels: &mut LabelFile) -> Result<RunStats, EvalError> {
        let batch = BatchRun {
            run,
            codec: &self.codec,
            responses: &self.responses,
        };
        let export = self.export.as_mut().map(|(_, _, w)| w as &mut dyn Write);
        let stats = batch.run(labels, export).at(labels.path())?;
        self.stats.add(&stats);
        Ok(RunStats {
            holes: stats.holes,
            resumed: stats.resumed,
            completed: stats.labelled,
            ..RunStats::default()
        })
    }

    /// Finishes the export; true when every hole is labelled (the report can be written).
    pub fn finish(self, observer: &dyn Observer) -> Result<bool, EvalError> {
        let unknown = self.responses.unknown();
        if !unknown.is_empty() {
            observer.note(&format!(
                "warning: {} answers are for holes this run does not have (another seed, shard or repository) and are not used ({})",
                unknown.len(),
                named(&unknown)
            ))?;
        }
        if self.responses.failed > 0 {
            observer.note(&format!(
                "{} answers in the response files are errors and their requests are asked again (the last: {})",
                self.responses.failed,
                self.responses.last_error.as_deref().unwrap_or_default()
            ))?;
        }
        if self.responses.left_to_right && self.export.is_some() {
            observer.note(
                "the engine does not fill in the middle (an answer refused the suffix); requests are exported left to right",
            )?;
        }
        let waiting = self.stats.waiting();
        let stale = self.responses.stale();
        let exported = self.export.is_some();
        if let Some((path, partial, writer)) = self.export {
            let written = writer.into_inner().map_err(|e| e.into_error());
            written
                .and_then(|file| file.sync_all())
                .and_then(|()| std::fs::rename(&partial, &path))
                .at(&path)?;
            observer.note(&self.stats.export_summary(&path))?;
        }
        if !stale.is_empty() {
            return Err(EvalError::StaleAnswers {
                count: stale.len(),
                named: named(&stale),
            });
        }
        if waiting > 0 && !exported {
            return Err(EvalError::AnswersToCome {
                waiting,
                first_round: self.stats.first_holes,
                second_round: self.stats.second_holes,
            });
        }
        Ok(waiting == 0)
    }
}

/// The first few of `things`, and how many more there are.
fn named(things: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text = things[..things.len().min(SHOWN)].join("; ");
    if things.len() > SHOWN {
        text.push_str(&format!("; and {} more", things.len() - SHOWN));
    }
    text
}

/// Whether `a` and `b` name one file (`a` need not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    let resolved = |p: &Path| match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => canonical(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
        .join(name),
        _ => canonical(p),
    };
    canonical(a) == canonical(b) || resolved(a) == resolved(b)
}
