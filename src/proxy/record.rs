//! The record of what an editor plugin sent through the proxy: one JSON line per exchange,
//! appended to `exchanges.jsonl` in keyhole's data directory and written whole at once, so a
//! crash loses at most the exchange in flight. The file is bounded: past its limit it becomes
//! `exchanges.1.jsonl` (replacing the older one) and a new file starts.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::exchange::{Answered, Sent};

/// The default limit of one log file; two files are kept.
pub const DEFAULT_MAX_BYTES: u64 = 32 << 20;

const CURRENT: &str = "exchanges.jsonl";
const OLDER: &str = "exchanges.1.jsonl";

/// One request a plugin made and what came back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// Numbered from 1 across the log's files.
    pub id: u64,
    /// When the request came, in seconds since the Unix epoch.
    pub at: f64,
    /// The client's address.
    pub client: String,
    /// The client's own name for itself (its User-Agent: `curl/8.5.0`, `axios/1.7.9`), where
    /// it sent one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent: Option<String>,
    pub method: String,
    /// The path (and query) the plugin asked for, as it went to the server.
    pub endpoint: String,
    /// The server, with any credentials in its URL masked.
    pub upstream: String,
    /// The server's status, or 502 when it could not be reached.
    pub status: u16,
    pub sent: Sent,
    pub answered: Answered,
    /// Milliseconds from the request to the first byte of the answer.
    pub first_byte_ms: Option<f64>,
    /// Milliseconds from the request to the end of the answer (or the hang-up).
    pub total_ms: f64,
    /// The client hung up before the answer ended.
    pub cancelled: bool,
    /// Why the server could not be reached, if it could not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

impl Exchange {
    /// Who sent it, as people read it: the client's name for itself (its product, without
    /// the version), else its address.
    pub fn sender(&self) -> &str {
        match &self.agent {
            Some(agent) => agent.split(['/', ' ']).next().unwrap_or(agent),
            None => &self.client,
        }
    }
}

/// The append-only, bounded log.
pub struct RecordLog {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<LogState>,
}

struct LogState {
    file: File,
    bytes: u64,
    next_id: u64,
}

impl RecordLog {
    /// Open (creating) the log in `dir`; ids go on from the last one recorded.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<RecordLog> {
        std::fs::create_dir_all(dir)?;
        let next_id = match read_log(dir)?.0.last() {
            Some(last) => next_id(last.id)?,
            None => 1,
        };
        let mut file = append(&dir.join(CURRENT))?;
        let mut bytes = file.metadata()?.len();
        // A line a crash cut short stays unreadable; the next one must not join it.
        if bytes > 0 && !ends_with_newline(&dir.join(CURRENT))? {
            file.write_all(b"\n")?;
            bytes += 1;
        }
        Ok(RecordLog {
            dir: dir.to_path_buf(),
            max_bytes,
            state: Mutex::new(LogState {
                file,
                bytes,
                next_id,
            }),
        })
    }

    /// Where the log lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append `exchange` under the next id (which it returns), rotating first when the
    /// current file is full.
    pub fn append(&self, mut exchange: Exchange) -> std::io::Result<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        exchange.id = state.next_id;
        // Checked before anything is written: an id is never reused, not even by wrapping.
        let following = next_id(exchange.id)?;
        let mut line = serde_json::to_vec(&exchange).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if state.bytes > 0 && state.bytes + line.len() as u64 > self.max_bytes {
            std::fs::rename(self.dir.join(CURRENT), self.dir.join(OLDER))?;
            state.file = append(&self.dir.join(CURRENT))?;
            state.bytes = 0;
        }
        // One write of the whole line: a reader or a crash sees all of it or none.
        state.file.write_all(&line)?;
        state.file.flush()?;
        state.bytes += line.len() as u64;
        state.next_id = following;
        Ok(exchange.id)
    }
}

/// The id after `id`; an error rather than a wrap to 0 (which would sort the newest first)
/// once ids are used up.
fn next_id(id: u64) -> std::io::Result<u64> {
    id.checked_add(1).ok_or_else(|| {
        std::io::Error::other(format!(
            "the record's ids are used up (the last is {id}); move {CURRENT} and {OLDER} away to start again"
        ))
    })
}

fn ends_with_newline(path: &Path) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path)?;
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Every exchange recorded in `dir`, oldest first, and how many lines could not be parsed (a
/// line cut by a crash, a hand edit). A file that cannot be read (a directory in its place, a
/// disk error) stops the reading with an error naming it: a read that fails once fails again,
/// and counting each failure as a line would never end.
pub fn read_log(dir: &Path) -> std::io::Result<(Vec<Exchange>, usize)> {
    let mut exchanges = Vec::new();
    let mut unreadable = 0;
    for name in [OLDER, CURRENT] {
        let path = dir.join(name);
        let named = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
        };
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(named(e)),
        };
        for line in BufReader::new(file).split(b'\n') {
            // Bytes, not `lines()`: a line whose bytes are not UTF-8 is one unreadable line,
            // not an I/O error.
            match serde_json::from_slice::<Exchange>(&line.map_err(named)?) {
                Ok(exchange) => exchanges.push(exchange),
                Err(_) => unreadable += 1,
            }
        }
    }
    Ok((exchanges, unreadable))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(prompt: &str) -> Exchange {
        Exchange {
            id: 0,
            at: 0.0,
            client: "127.0.0.1:5000".into(),
            agent: None,
            method: "POST".into(),
            endpoint: "/infill".into(),
            upstream: "http://127.0.0.1:8080/".into(),
            status: 200,
            sent: Sent {
                prompt: Some(prompt.into()),
                ..Sent::default()
            },
            answered: Answered::default(),
            first_byte_ms: Some(1.0),
            total_ms: 2.0,
            cancelled: false,
            error: None,
        }
    }

    #[test]
    fn ids_go_on_across_reopening_and_rotation_keeps_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let log = RecordLog::open(dir.path(), 600).unwrap();
        for i in 0..4 {
            assert_eq!(log.append(exchange(&format!("p{i}"))).unwrap(), i + 1);
        }
        drop(log);
        let log = RecordLog::open(dir.path(), 600).unwrap();
        for i in 4..12 {
            assert_eq!(log.append(exchange(&format!("p{i}"))).unwrap(), i + 1);
        }
        let (kept, unreadable) = read_log(dir.path()).unwrap();
        assert_eq!(unreadable, 0);
        // Bounded: the oldest went with the first rotation, the newest are all there in order.
        assert!(kept.len() < 12, "{} kept", kept.len());
        let ids: Vec<u64> = kept.iter().map(|e| e.id).collect();
        assert_eq!(ids.last(), Some(&12));
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        let size = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().len();
        assert!(size(CURRENT) <= 600 && size(OLDER) <= 600);
    }

    #[test]
    fn a_line_cut_by_a_crash_is_counted_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let log = RecordLog::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        log.append(exchange("whole")).unwrap();
        drop(log);
        let mut file = append(&dir.path().join(CURRENT)).unwrap();
        file.write_all(b"{\"id\": 2, \"at\"").unwrap();
        let (kept, unreadable) = read_log(dir.path()).unwrap();
        assert_eq!((kept.len(), unreadable), (1, 1));
        assert_eq!(kept[0].sent.prompt.as_deref(), Some("whole"));
        // The next exchange after a restart is whole again, under the next id.
        let log = RecordLog::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        assert_eq!(log.append(exchange("after")).unwrap(), 2);
        let (kept, unreadable) = read_log(dir.path()).unwrap();
        assert_eq!((kept.len(), unreadable), (2, 1));
    }
    #[test]
    fn a_log_that_cannot_be_read_is_one_error_naming_it_not_an_endless_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(CURRENT)).unwrap();
        // On main this read counted every failed read as a line, for ever.
        let error = read_log(dir.path()).unwrap_err().to_string();
        assert!(error.contains(CURRENT), "{error}");
        assert_eq!(error.lines().count(), 1, "{error}");
        let error = RecordLog::open(dir.path(), DEFAULT_MAX_BYTES)
            .err()
            .unwrap();
        assert!(error.to_string().contains(CURRENT), "{error}");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_one_unreadable_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = RecordLog::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        log.append(exchange("first")).unwrap();
        append(&dir.path().join(CURRENT))
            .unwrap()
            .write_all(b"\xff\xfe not json\n")
            .unwrap();
        log.append(exchange("second")).unwrap();
        let (kept, unreadable) = read_log(dir.path()).unwrap();
        assert_eq!((kept.len(), unreadable), (2, 1));
    }

    #[test]
    fn ids_are_never_reused_by_wrapping_past_the_largest() {
        let dir = tempfile::tempdir().unwrap();
        let mut last = exchange("last");
        last.id = u64::MAX - 1;
        let mut line = serde_json::to_vec(&last).unwrap();
        line.push(b'\n');
        std::fs::write(dir.path().join(CURRENT), line).unwrap();
        // u64::MAX - 1 recorded: there is no id after the next, so it is refused, not 0.
        let log = RecordLog::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        let error = log.append(exchange("one more")).unwrap_err().to_string();
        assert!(error.contains("used up"), "{error}");
        let (kept, _) = read_log(dir.path()).unwrap();
        assert_eq!(
            kept.iter().map(|e| e.id).collect::<Vec<_>>(),
            [u64::MAX - 1]
        );
        last.id = u64::MAX;
        let mut line = serde_json::to_vec(&last).unwrap();
        line.push(b'\n');
        std::fs::write(dir.path().join(CURRENT), line).unwrap();
        assert!(RecordLog::open(dir.path(), DEFAULT_MAX_BYTES).is_err());
    }
}
