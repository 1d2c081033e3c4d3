//! The user's state survives a process killed (SIGKILL) while it writes the feedback log and
//! the online ranker.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keyhole::CandidateId;
use keyhole::testing::rank::online::OnlineRanker;
use keyhole::{
    testing::feedback::Pick, testing::feedback::append_pick, testing::feedback::apply_completion,
};

use crate::reliability_support;
use reliability_support::Tmpfs;

/// Set in the child copy of this test binary: the directory to write into.
const WRITER_DIR: &str = "KEYHOLE_TEST_STATE_WRITER";
/// The data directory the apply writer stages in.
const APPLY_DATA: &str = "KEYHOLE_TEST_APPLY_DATA";

/// In the child: record picks and save the ranker as fast as possible until killed. Not a test
/// of its own: the kill test below runs it with `--ignored`.
#[test]
#[ignore = "child process of kill_dash_nine_while_writing_picks_and_the_ranker_loses_nothing_finished"]
fn state_writer() {
    let dir = std::env::var_os(WRITER_DIR).expect("run by the kill test, which sets the directory");
    let dir = Path::new(&dir);
    let mut ranker = OnlineRanker::default();
    for n in 0u64.. {
        let pick = Pick {
            hole: format!("A.java:{n}:1"),
            candidates: [6, 7, 62].map(CandidateId::nth).to_vec(),
            prompt_hash: format!("{n:016x}"),
            completions: vec!["x".repeat(2000), "y".into()],
            picked: CandidateId::nth([6, 7, 62][(n % 3) as usize]),
            unix_time: n,
        };
        append_pick(&dir.join("feedback.jsonl"), &pick).unwrap();
        ranker.record_pick(&pick.candidates, pick.picked);
        ranker.save(&dir.join("ranker.json")).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn kill_dash_nine_while_writing_picks_and_the_ranker_loses_nothing_finished() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "reliability_state::state_writer",
            "--ignored",
            "--nocapture",
        ])
        .env(WRITER_DIR, dir.path())
        .spawn()
        .unwrap();
    let log = dir.path().join("feedback.jsonl");
    let started = Instant::now();
    while std::fs::read(&log).map_or(0, |b| b.len()) < 200_000
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, in the middle of a write or a save
    child.wait().unwrap();

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let complete = lines.iter().filter(|l| l.ends_with('\n')).count();
    assert!(complete >= 50, "{complete} picks written");
    // Every finished line parses; at most the last, unfinished one does not.
    for line in lines.iter().filter(|l| l.ends_with('\n')) {
        serde_json::from_str::<Pick>(line).unwrap();
    }
    let (ranker, warning) = OnlineRanker::load(&dir.path().join("ranker.json"));
    assert_eq!(warning, None, "the ranker file is always whole");
    assert_ne!(ranker, OnlineRanker::default());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leftovers.len() <= 3, "no pile of temp files: {leftovers:?}");
}

/// Set in the child copy of this test binary: the source file to apply completions to, over
/// and over (or once, with [`APPLY_ONCE`] set too).
const APPLY_FILE: &str = "KEYHOLE_TEST_APPLY_FILE";
const APPLY_ONCE: &str = "KEYHOLE_TEST_APPLY_ONCE";

/// Two versions of a source file, large enough that writing one takes a while.
fn version(n: u64) -> String {
    let line = format!("// version {}\n", n % 2);
    line.repeat(1_000_000)
}

/// In the child: apply completions that swap the whole file between two versions until killed.
/// Not a test of its own: the apply tests below run it with `--ignored`.
#[test]
#[ignore = "child process of the apply tests"]
fn apply_writer() {
    let path = std::env::var_os(APPLY_FILE).expect("run by an apply test, which sets the file");
    let path = Path::new(&path);
    let once = std::env::var_os(APPLY_ONCE).is_some();
    let data = std::env::var_os(APPLY_DATA).map(std::path::PathBuf::from);
    for n in 1u64.. {
        let content = std::fs::read(path).unwrap();
        let hash = *blake3::hash(&content).as_bytes();
        apply_completion(path, &hash, 0, content.len(), &version(n), data.as_deref()).unwrap();
        if once {
            return;
        }
    }
}

fn spawn_apply_writer(file: &Path, data: &Path, once: bool) -> std::process::Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "reliability_state::apply_writer",
            "--ignored",
            "--nocapture",
        ])
        .env(APPLY_FILE, file)
        .env(APPLY_DATA, data);
    if once {
        command.env(APPLY_ONCE, "1");
    }
    command.spawn().unwrap()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn kill_dash_nine_during_apply_leaves_nothing_in_the_source_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let (src, data) = (scratch.path().join("src"), scratch.path().join("data"));
    std::fs::create_dir_all(&src).unwrap();
    let file = src.join("File.java");
    std::fs::write(&file, version(0)).unwrap();
    let staging = data.join("apply");

    let mut child = spawn_apply_writer(&file, &data, false);
    // Kill it while a temporary file is being written, wherever that is.
    let writing = |dir: &Path| names_in(dir).iter().any(|n| n.ends_with(".tmp"));
    let started = Instant::now();
    while !writing(&src) && !writing(&staging) && started.elapsed() < Duration::from_secs(60) {
        std::hint::spin_loop();
    }
    child.kill().unwrap();
    child.wait().unwrap();

    assert_eq!(
        names_in(&src),
        ["File.java"],
        "nothing else in the user's folder"
    );
    assert!(writing(&staging), "killed while staging a file");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text == version(0) || text == version(1),
        "the file is whole"
    );

    // The next apply clears what the killed one left in the data directory.
    let mut next = spawn_apply_writer(&file, &data, true);
    assert!(next.wait().unwrap().success());
    assert_eq!(names_in(&staging), Vec::<String>::new());
    assert_eq!(names_in(&src), ["File.java"]);
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "mounts a tmpfs, which needs root: .ci/run runs it"]
fn apply_works_when_the_data_directory_is_on_another_filesystem_or_full() {
    for size in ["64m", "4k"] {
        let scratch = tempfile::tempdir().unwrap();
        let src = scratch.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        let file = src.join("File.java");
        std::fs::write(&file, version(0)).unwrap();
        let data = Tmpfs::mount(&scratch.path().join("data"), size);
        // The rename from the tmpfs fails (or the tmpfs is too small): staged beside instead.
        let mut once = spawn_apply_writer(&file, &data.0, true);
        assert!(once.wait().unwrap().success(), "{size}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            version(1),
            "{size}"
        );
        assert_eq!(names_in(&src), ["File.java"], "{size}");
        assert_eq!(
            names_in(&data.0.join("apply")),
            Vec::<String>::new(),
            "{size}"
        );
    }
}
