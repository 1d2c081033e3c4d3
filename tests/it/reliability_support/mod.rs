//! Helpers shared by the reliability tests: the real binary with every directory it writes to
//! in a scratch directory, and the fuzz invariants.
#![allow(dead_code)] // each test binary uses a different part

pub mod fuzz_checks;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the real binary with its config, cache and data directories under `scratch`.
pub fn keyhole(scratch: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keyhole"))
        .args(args)
        .envs(crate::common::hermetic_env(scratch))
        .envs(env.iter().copied())
        .output()
        .expect("the keyhole binary runs")
}

/// Writes `toml` as the backends file of the config directory under `scratch`.
pub fn write_backends(scratch: &Path, toml: &str) {
    let config = scratch.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("backends.toml"), toml).unwrap();
}

/// The message of a failed command, checked to be one line with exit code 2.
pub fn one_line_error(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// Stdout of a successful command.
pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A tmpfs of `size` (as mount's `size=` takes it) mounted at a fresh directory, unmounted
/// when dropped: a small full disk, or another filesystem. Panics where mounting is refused:
/// the tests that need one are ignored by default and `.ci/run` runs them as root, so a
/// refusal there is a failure, never a silent pass.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "cannot mount a tmpfs at {} (needs root): {}",
            at.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
