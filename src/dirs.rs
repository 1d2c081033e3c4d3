//! Where keyhole keeps its files: the config directory (`backends.toml`, `keymap.toml`,
//! themes), the cache directory (repository indexes) and the data directory (picks, what the
//! rankers learned, the bundled sample's copy, the log). Resolved once per process from the
//! environment and handed down, so that tests and library users can point every lookup at
//! their own folders without touching the process environment.

use std::path::{Path, PathBuf};

pub const CONFIG_DIR_ENV: &str = "KEYHOLE_CONFIG_DIR";
pub const CACHE_DIR_ENV: &str = "KEYHOLE_CACHE_DIR";
pub const DATA_DIR_ENV: &str = "KEYHOLE_DATA_DIR";

/// The log's file name.
pub const LOG_FILE: &str = "keyhole.log";

/// keyhole's directories; `None` where the platform has none (and no variable names one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dirs {
    pub config: Option<PathBuf>,
    pub cache: Option<PathBuf>,
    pub data: Option<PathBuf>,
    /// Where the log goes: the platform's state directory where it has one and the data
    /// directory is the platform's; else the data directory.
    pub state: Option<PathBuf>,
}

impl Dirs {
    /// `KEYHOLE_CONFIG_DIR`, `KEYHOLE_CACHE_DIR` and `KEYHOLE_DATA_DIR` where set and not
    /// empty, else the platform's directories.
    pub fn from_env() -> Dirs {
        let platform = directories::ProjectDirs::from("", "", "keyhole");
        let chosen = |var: &str, platform_dir: fn(&directories::ProjectDirs) -> &Path| {
            match std::env::var_os(var) {
                Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
                _ => platform.as_ref().map(|d| platform_dir(d).to_path_buf()),
            }
        };
        let data = chosen(DATA_DIR_ENV, |d| d.data_dir());
        let state = platform
            .as_ref()
            .filter(|d| Some(d.data_dir()) == data.as_deref())
            .and_then(|d| d.state_dir())
            .map(Path::to_path_buf)
            .or_else(|| data.clone());
        Dirs {
            config: chosen(CONFIG_DIR_ENV, |d| d.config_dir()),
            cache: chosen(CACHE_DIR_ENV, |d| d.cache_dir()),
            data,
            state,
        }
    }

    /// `config`, `cache` and `data` folders under `root`: for tests and embedding.
    pub fn under(root: &Path) -> Dirs {
        Dirs {
            config: Some(root.join("config")),
            cache: Some(root.join("cache")),
            data: Some(root.join("data")),
            state: Some(root.join("data")),
        }
    }

    /// No directories at all: nothing is read or kept.
    pub fn none() -> Dirs {
        Dirs::default()
    }

    /// A file of the config directory.
    pub fn config_file(&self, name: &str) -> Option<PathBuf> {
        self.config.as_ref().map(|dir| dir.join(name))
    }

    /// A file of the data directory.
    pub fn data_file(&self, name: &str) -> Option<PathBuf> {
        self.data.as_ref().map(|dir| dir.join(name))
    }

    /// The log file.
    pub fn log_file(&self) -> Option<PathBuf> {
        self.state.as_ref().map(|dir| dir.join(LOG_FILE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_root_every_lookup_stays_inside_it() {
        let root = Path::new("/tmp/keyhole-root");
        let dirs = Dirs::under(root);
        for path in [
            dirs.config_file("backends.toml"),
            dirs.data_file("feedback.jsonl"),
            dirs.log_file(),
            dirs.cache.clone(),
        ] {
            assert!(path.unwrap().starts_with(root));
        }
        assert_eq!(Dirs::none().data_file("x"), None);
    }
}
