//! Logs go to a file, never to the screen: the TUI owns the terminal. Prompt texts and API keys
//! are never logged (picks log hashes; backend errors their message).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Context;

use crate::dirs::Dirs;
use crate::feedback;

/// Send tracing events to the log file of `dirs` for the rest of the process; returns the file.
pub fn init(dirs: &Dirs) -> anyhow::Result<PathBuf> {
    let path = dirs.log_file().context("no data directory for the log")?;
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
