//! Logs go to a file, never to the screen: the TUI owns the terminal. Prompt texts and API keys
//! are never logged (picks log hashes; backend errors their message).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::dirs::Dirs;
use crate::feedback;

/// Why there is no log (the UI runs on and says so once).
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("no data directory for the log")]
    NoDataDir,
    #[error("cannot open the log {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start logging: {0}")]
    Start(String),
}

/// Send tracing events to the log file of `dirs` for the rest of the process; returns the file.
pub fn init(dirs: &Dirs) -> Result<PathBuf, LogError> {
    let path = dirs.log_file().ok_or(LogError::NoDataDir)?;
    let cannot_open = |source| LogError::Open {
        path: path.clone(),
        source,
    };
    feedback::create_parent(&path).map_err(cannot_open)?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(cannot_open)?;
    tracing_subscriber::fmt()
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init()
        .map_err(|e| LogError::Start(e.to_string()))?;
    Ok(path)
}
