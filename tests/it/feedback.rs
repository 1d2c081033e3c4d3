//! Recording picks and applying completions to files.

use std::fs;
use std::path::Path;

use keyhole::CandidateId;
use keyhole::{
    testing::feedback::ApplyError, testing::feedback::Pick, testing::feedback::append_pick,
    testing::feedback::apply_completion, testing::feedback::prompt_hash,
};

fn pick(picked: usize) -> Pick {
    let picked = CandidateId::nth(picked);
    Pick {
        hole: "src/A.java:3:9".to_string(),
        candidates: vec![CandidateId::nth(6), CandidateId::DEFAULT, picked],
        prompt_hash: prompt_hash("prompt text"),
        completions: vec!["a();".into(), "b();".into(), "c(\"x\\n\");".into()],
        picked,
        unix_time: 1_700_000_000,
    }
}

#[test]
fn a_line_left_without_its_break_is_ended_before_the_next_pick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("picks.jsonl");
    // A crash (or a full disk) cut the last pick short.
    fs::write(&path, "{\"hole\": \"src/A.java:1:1\", \"cand").unwrap();
    append_pick(&path, &pick(14)).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(serde_json::from_str::<Pick>(lines[1]).unwrap(), pick(14));
}

#[test]
fn picks_appended_at_once_by_many_writers_are_each_one_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("picks.jsonl");
    std::thread::scope(|scope| {
        for writer in 0..8 {
            let path = &path;
            scope.spawn(move || {
                for _ in 0..40 {
                    append_pick(path, &pick(10 + writer)).unwrap();
                }
            });
        }
    });
    let text = fs::read_to_string(&path).unwrap();
    let picks: Vec<Pick> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(picks.len(), 320);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

#[test]
fn picks_append_as_json_lines_that_parse_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/picks.jsonl");
    let picks = [pick(14), pick(20)];
    for p in &picks {
        append_pick(&path, p).unwrap();
    }
    let text = fs::read_to_string(&path).unwrap();
    let parsed: Vec<Pick> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, picks);
}

#[test]
fn prompt_hash_is_16_hex_digits_of_blake3() {
    let hash = prompt_hash("abc");
    assert_eq!(hash, &blake3::hash(b"abc").to_hex()[..16]);
    assert_ne!(hash, prompt_hash("abd"));
}

const JAVA: &str = "class A {\n    int f() {\n        return TODO;\n    }\n}\n";

/// A file holding `JAVA`, its hash, and the hole after `return `.
fn java_file(dir: &Path) -> (std::path::PathBuf, [u8; 32], usize) {
    let path = dir.join("A.java");
    fs::write(&path, JAVA).unwrap();
    let offset = JAVA.find("TODO").unwrap();
    (path, *blake3::hash(JAVA.as_bytes()).as_bytes(), offset)
}

#[test]
fn apply_replaces_the_rest_of_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (path, hash, offset) = java_file(dir.path());
    apply_completion(
        &path,
        &hash,
        offset,
        "TODO;".len(),
        "42; // é",
        Some(data.path()),
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "class A {\n    int f() {\n        return 42; // é\n    }\n}\n"
    );
    let leftovers = fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

#[cfg(unix)]
#[test]
fn apply_keeps_the_file_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (path, hash, offset) = java_file(dir.path());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    apply_completion(&path, &hash, offset, 0, "x", Some(data.path())).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn apply_refuses_a_file_changed_since_it_was_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (path, hash, offset) = java_file(dir.path());
    let edited = JAVA.replace("int f", "long f");
    fs::write(&path, &edited).unwrap();
    let err = apply_completion(&path, &hash, offset, 5, "42;", Some(data.path())).unwrap_err();
    assert!(matches!(err, ApplyError::ChangedOnDisk { .. }), "{err}");
    assert_message_names(&err, &path);
    assert_eq!(fs::read_to_string(&path).unwrap(), edited);
}

#[test]
fn apply_refuses_bad_ranges_and_leaves_the_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let path = dir.path().join("U.java");
    let text = "String s = \"é\";\n";
    fs::write(&path, text).unwrap();
    let hash = *blake3::hash(text.as_bytes()).as_bytes();
    let inside_e = text.find('é').unwrap() + 1;
    let cases = [
        (text.len() + 1, 0),
        (text.len(), 1),
        (0, usize::MAX),
        (inside_e, 0),
        (0, inside_e),
    ];
    for (offset, replace) in cases {
        let err =
            apply_completion(&path, &hash, offset, replace, "x", Some(data.path())).unwrap_err();
        assert!(
            matches!(
                err,
                ApplyError::OutOfRange { .. } | ApplyError::NotCharBoundary { .. }
            ),
            "{offset}+{replace}: {err}"
        );
        assert_message_names(&err, &path);
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn apply_to_a_missing_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let path = dir.path().join("Gone.java");
    let err = apply_completion(&path, &[0; 32], 0, 0, "x", Some(data.path())).unwrap_err();
    assert!(matches!(err, ApplyError::Io { .. }), "{err}");
    assert_message_names(&err, &path);
}

fn assert_message_names(err: &ApplyError, path: &Path) {
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(!message.contains('\n'), "{message}");
}
