//! What some tests need beyond a Rust toolchain, installed from the package registries on first
//! use, so the README's `cargo test` passes on a fresh machine: the pinned language servers
//! (npm packages under `target/lsp`) and tmux (Debian's package). A test that needs one and
//! cannot have it fails with the reason: a skip would read as a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// `tests/language-servers.txt`: the npm package specs the typed-hole tests run against.
const PINNED_SERVERS: &str = include_str!("../../language-servers.txt");

/// The pinned `(package, version)` pairs.
fn pinned_servers() -> Vec<(&'static str, &'static str)> {
    PINNED_SERVERS
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|spec| {
            spec.rsplit_once('@')
                .unwrap_or_else(|| panic!("tests/language-servers.txt: `{spec}` has no version"))
        })
        .collect()
}

/// The directory holding the pinned language servers' executables: `KEYHOLE_LSP_BIN` where it
/// is set, else `target/lsp/node_modules/.bin`, installed there with npm on first use (and
/// again when a pin changes).
pub fn language_servers() -> PathBuf {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let installed = INSTALLED.get_or_init(|| match std::env::var_os("KEYHOLE_LSP_BIN") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => install_pinned_servers(),
    });
    match installed {
        Ok(dir) => dir.clone(),
        Err(why) => panic!("{why}"),
    }
}

fn install_pinned_servers() -> Result<PathBuf, String> {
    // `target/tmp` is the one directory under `target` a test is told of.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let prefix = target.join("lsp");
    std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
    // Another test process (a second `cargo test`) may be installing at the same time.
    let lock = std::fs::File::create(prefix.join(".install-lock"))
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| format!("{}: {e}", prefix.display()))?;
    let pins = pinned_servers();
    if pins
        .iter()
        .any(|pin| installed_version(&prefix, pin.0) != Some(pin.1.to_string()))
    {
        require_command("npm", &["nodejs", "npm"])?;
        let specs: Vec<String> = pins.iter().map(|(p, v)| format!("{p}@{v}")).collect();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(&specs)
            .output()
            .map_err(|e| format!("npm: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "npm install --prefix {} {} failed: {}",
                prefix.display(),
                specs.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    drop(lock);
    Ok(prefix.join("node_modules/.bin"))
}

/// The version of npm package `package` installed under `prefix`, if any.
fn installed_version(prefix: &Path, package: &str) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(package)
        .join("package.json");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    Some(manifest["version"].as_str()?.to_string())
}

/// tmux, installed with apt-get on first use where it is missing and the tests run as root.
pub fn require_tmux() {
    static TMUX: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(why) = TMUX.get_or_init(|| require_command("tmux", &["tmux"])) {
        panic!("{why}");
    }
}

/// `command` on `PATH`, or Debian's `packages` installed to provide it where the tests run as
/// root on a machine with apt-get; an error that says how to install it otherwise.
fn require_command(command: &str, packages: &[&str]) -> Result<(), String> {
    // apt-get takes one install at a time.
    static APT: Mutex<()> = Mutex::new(());
    let _apt = APT.lock().unwrap_or_else(|e| e.into_inner());
    let on_path = || {
        std::env::var_os("PATH")
            .is_some_and(|path| keyhole::testing::lsp::find_on_path(command, &path).is_some())
    };
    if on_path() {
        return Ok(());
    }
    let how = format!("apt-get install {}", packages.join(" "));
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return Err(format!(
            "{command} is not installed and this test cannot install it without root: run `{how}`"
        ));
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| {
                format!("{command} is not installed, and apt-get could not run ({e}): run `{how}`")
            })
            .and_then(|out| match out.status.success() {
                true => Ok(()),
                false => Err(format!(
                    "{command} is not installed, and `apt-get {}` failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            })
    };
    apt(&["update", "-qq"])?;
    apt(&[&["install", "-y", "-qq"][..], packages].concat())?;
    if on_path() {
        Ok(())
    } else {
        Err(format!("`{how}` ran, yet {command} is not on PATH"))
    }
}
