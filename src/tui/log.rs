//! Logs go to a file, never to the screen: the TUI owns the terminal. Prompt texts and API keys
//! are never logged (picks log hashes; backend errors their message).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Context;

use crate::feedback;

pub const LOG_FILE: &str = "keyhole.log";

/// `keyhole.log` in the state directory; in the data directory where there is no state
/// directory (macOS, Windows) or KEYHOLE_DATA_DIR moves the data elsewhere.
pub fn path() -> Option<PathBuf> {
    let data = feedback::data_dir()?;
    let dirs = directories::ProjectDirs::from("", "", "keyhole");
    let state = dirs
        .as_ref()
        .filter(|d| d.data_dir() == data)
        .and_then(|d| d.state_dir());
    Some(state.unwrap_or(&data).join(LOG_FILE))
}

/// Send tracing events to the log file for the rest of the process; returns the file.
pub fn init() -> anyhow::Result<PathBuf> {
    let path = path().context("no data directory for the log")?;
    feedback::create_parent(&path)?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open the log {}", path.display()))?;
    tracing_subscriber::fmt()
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))?;
    Ok(path)
}
