//! RepoEval / CrossCodeEval task files: reading both styles, errors, and export round trips.

use std::path::{Path, PathBuf};

use keyhole::RepoIndex;
use keyhole::{
    testing::eval::interop::Task, testing::eval::interop::TaskError,
    testing::eval::interop::export_row, testing::eval::interop::read_tasks,
    testing::eval::interop::write_jsonl,
};
use keyhole::{testing::hole::HoleColumn, testing::hole::sample_holes};

const REPOEVAL: &str = r#"{"prompt": "def f(x):\n    return ", "metadata": {"task_id": "CarperAI--trlx/3", "ground_truth": "x + 1", "fpath_tuple": ["CarperAI_trlx", "trlx", "utils.py"], "line_no": 41, "context_start_lineno": 0}}"#;
const CROSSCODEEVAL: &str = r#"{"prompt": "int a = ", "groundtruth": "b();", "right_context": "\n}\n", "metadata": {"task_id": "project_cc_java/7", "repository": "acme-shop", "file": "src/Shop.java", "context_start_lineno": 0, "groundtruth_start_lineno": 12, "right_context_start_lineno": 13}, "crossfile_context": {"text": "", "list": []}}"#;

fn write(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

#[test]
fn both_styles_are_detected_per_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "mixed.jsonl",
        &[REPOEVAL, "", CROSSCODEEVAL, ""],
    );
    let tasks = read_tasks(&path).unwrap();
    assert_eq!(
        tasks,
        [
            Task {
                id: "CarperAI--trlx/3".into(),
                repository: "CarperAI_trlx".into(),
                prompt: "def f(x):\n    return ".into(),
                ground_truth: "x + 1".into(),
                suffix: None,
                file: "trlx/utils.py".into(),
                line: 42,
            },
            Task {
                id: "project_cc_java/7".into(),
                repository: "acme-shop".into(),
                prompt: "int a = ".into(),
                ground_truth: "b();".into(),
                suffix: Some("\n}\n".into()),
                file: "src/Shop.java".into(),
                line: 13,
            },
        ]
    );
}

/// The error for a file whose third line is `bad`.
fn error_for(bad: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "tasks.jsonl", &[REPOEVAL, CROSSCODEEVAL, bad]);
    let err = read_tasks(&path).unwrap_err();
    assert!(
        matches!(err, TaskError::Malformed { line: 3, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}:3: ", path.display())),
        "{message}"
    );
    message
}

#[test]
fn malformed_rows_name_the_file_and_line() {
    assert!(error_for("{not json").contains("not JSON"));
    assert!(error_for(r#"{"prompt": "x"}"#).contains("neither"));
    let missing = CROSSCODEEVAL.replace(r#""file": "src/Shop.java", "#, "");
    let message = error_for(&missing);
    assert!(
        message.contains("CrossCodeEval") && message.contains("`file`"),
        "{message}"
    );
    let empty = REPOEVAL.replace(r#"["CarperAI_trlx", "trlx", "utils.py"]"#, "[]");
    assert!(error_for(&empty).contains("fpath_tuple"));
}

#[test]
fn a_missing_file_is_an_io_error() {
    let err = read_tasks(Path::new("/nonexistent/tasks.jsonl")).unwrap_err();
    assert!(matches!(err, TaskError::Io { .. }));
    assert!(err.to_string().starts_with("/nonexistent/tasks.jsonl: "));
}

#[test]
fn exported_holes_read_back_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo");
    let index = RepoIndex::open(&root, None).unwrap();
    let holes = sample_holes(&index, Some(12), 5, HoleColumn::TrimmedMiddle);
    assert!(!holes.is_empty());
    let prompt = |i: usize| format!("// prompt {i}\nclass X {{");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("export.jsonl");
    let rows = holes
        .iter()
        .enumerate()
        .map(|(i, h)| export_row(&index, "sample", h, &prompt(i)));
    write_jsonl(&path, rows).unwrap();
    let tasks = read_tasks(&path).unwrap();
    assert_eq!(tasks.len(), holes.len());
    for (i, (task, hole)) in tasks.iter().zip(&holes).enumerate() {
        let file = &index.files[hole.file];
        assert_eq!(task.prompt, prompt(i));
        assert_eq!(Some(&task.ground_truth), hole.target.as_ref());
        assert_eq!(
            (task.file.as_str(), task.line),
            (file.path.as_str(), hole.line + 1)
        );
        assert_eq!(task.repository, "sample");
        assert_eq!(task.id, format!("sample/{}", hole.display(&index)));
        let suffix = task.suffix.as_deref().unwrap();
        assert_eq!(
            format!("{}{suffix}", task.ground_truth),
            file.text[hole.offset..]
        );
    }
}
