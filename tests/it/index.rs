//! Indexing real trees: .gitignore, bad files, the cache, and hole sampling.

use crate::common;
use crate::reliability_support::Tmpfs;

use std::fs;
use std::path::Path;

use keyhole::{Hole, HoleError, testing::hole::HoleColumn, testing::hole::sample_holes};
use keyhole::{RepoIndex, testing::repo::Vendored};

fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn paths(index: &RepoIndex) -> Vec<&str> {
    index.files.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn bad_files_are_skipped_with_a_warning_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/Good.java", b"class Good { int x = 1; }\n");
    write(root, "src/Binary.java", b"class B {\0\0\0}");
    write(
        root,
        "src/Latin1.java",
        b"class L { String s = \"caf\xe9\"; }",
    );
    write(root, "src/Huge.java", &vec![b'a'; 2 << 20]);
    write(root, "src/Broken.java", b"class { void ( { int = ; ]]] ");
    write(root, "build/Generated.java", b"class Generated {}");
    write(root, ".gitignore", b"build/\n");
    write(root, "notes.txt", b"not java");
    let index = RepoIndex::open(root, None).unwrap();
    assert_eq!(paths(&index), ["src/Broken.java", "src/Good.java"]);
    let warnings = index.warnings.join("\n");
    for name in [
        "src/Binary.java: binary",
        "src/Latin1.java: not valid UTF-8",
        "src/Huge.java: larger than",
    ] {
        assert!(warnings.contains(name), "missing '{name}' in:\n{warnings}");
    }
    assert!(keyhole::testing::repo::facts(&index.files[0]).syntax_errors > 0);
}

#[cfg(unix)]
#[test]
fn symlink_loops_and_unreadable_directories_do_not_stop_indexing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a/A.java", b"class A {}");
    std::os::unix::fs::symlink(root.join("a"), root.join("a/loop")).unwrap();
    let index = RepoIndex::open(root, None).unwrap();
    assert_eq!(paths(&index), ["a/A.java"]);
}

#[test]
fn missing_root_and_empty_repository() {
    let dir = tempfile::tempdir().unwrap();
    let err = RepoIndex::open(&dir.path().join("nope"), None)
        .err()
        .unwrap();
    assert!(err.to_string().ends_with("nope: no such directory"));
    let index = RepoIndex::open(dir.path(), None).unwrap();
    assert!(index.files.is_empty());
    assert!(sample_holes(&index, None, 1, HoleColumn::TrimmedMiddle).is_empty());
}

#[test]
fn the_cache_is_reused_refreshed_by_content_and_rebuilt_when_corrupt() {
    let repo = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write(repo.path(), "p/A.java", b"package p; class A extends B {}");
    write(repo.path(), "p/B.java", b"package p; class B {}");
    let first = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((first.cache.reused, first.cache.parsed), (0, 2));
    let second = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((second.cache.reused, second.cache.parsed), (2, 0));
    assert_eq!(
        keyhole::testing::repo::facts(&second.files[0]),
        keyhole::testing::repo::facts(&first.files[0])
    );
    assert_eq!(
        keyhole::testing::repo::graph(&second).children[1],
        vec![0],
        "graph rebuilt from cached facts"
    );

    write(
        repo.path(),
        "p/B.java",
        b"package p; class B { int changed; }",
    );
    let third = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((third.cache.reused, third.cache.parsed), (1, 1));

    let cache_file = third.cache.path.clone().unwrap();
    let mut bytes = fs::read(&cache_file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&cache_file, bytes).unwrap();
    let fourth = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    // The changed file's facts are in the delta beside the corrupt base, and still good.
    assert_eq!((fourth.cache.reused, fourth.cache.parsed), (1, 1));
    assert!(
        fourth
            .warnings
            .iter()
            .any(|w| w.contains("corrupt") && w.contains("rebuilding")),
        "{:?}",
        fourth.warnings
    );
    let fifth = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!(fifth.cache.reused, 2, "the rebuilt cache is good again");
}

#[test]
fn a_cache_sealed_by_an_earlier_version_is_rebuilt_with_one_line() {
    let repo = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write(repo.path(), "p/A.java", b"package p; class A extends B {}");
    write(repo.path(), "p/B.java", b"package p; class B {}");
    let first = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    // Sealed as keyhole sealed its caches before: a blake3 sum of the payload. The payload is
    // whole, but nothing says so in this version's terms.
    let cache_file = first.cache.path.clone().unwrap();
    let mut bytes = fs::read(&cache_file).unwrap();
    let sum = *blake3::hash(&bytes[32..]).as_bytes();
    bytes[..32].copy_from_slice(&sum);
    fs::write(&cache_file, bytes).unwrap();
    let second = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((second.cache.reused, second.cache.parsed), (0, 2));
    assert_eq!(second.warnings.len(), 1, "{:?}", second.warnings);
    assert!(
        second.warnings[0].ends_with("written by another version; rebuilding it"),
        "{:?}",
        second.warnings
    );
    let third = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((third.cache.reused, third.warnings.len()), (2, 0));
}

/// The index's cache files in `cache`: the base (`<key>.bin`) and the delta beside it
/// (`<key>.delta`), each with its bytes, if there.
fn facts_cache_files(cache: &Path) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let dir = cache.join("index");
    let file = |suffix: &str| {
        let entries = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path());
        let mut found = entries.filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.len() == 32 + suffix.len() && name.ends_with(suffix)
        });
        found.next().map(|p| fs::read(p).unwrap())
    };
    (file(".bin"), file(".delta"))
}

fn java_files(repo: &Path, count: usize, body: &str) {
    for i in 0..count {
        let text = format!("package p; class C{i} {{ {body} int f{i}; }}");
        write(repo, &format!("p/C{i}.java"), text.as_bytes());
    }
}

#[test]
fn an_edit_writes_only_a_delta_beside_the_cache_until_the_delta_grows() {
    let (repo, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    java_files(repo.path(), 40, "");
    RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    let (base, delta) = facts_cache_files(cache.path());
    let base = base.expect("a base is written");
    assert_eq!(delta, None);

    write(
        repo.path(),
        "p/C3.java",
        b"package p; class C3 { int edited; }",
    );
    fs::remove_file(repo.path().join("p/C5.java")).unwrap();
    let edited = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((edited.cache.reused, edited.cache.parsed), (38, 1));
    let (base_after, delta) = facts_cache_files(cache.path());
    assert_eq!(
        base_after.as_ref(),
        Some(&base),
        "the base is not written again"
    );
    let delta = delta.expect("the edited file's facts go to a delta");
    assert!(delta.len() * 10 < base.len(), "{} bytes", delta.len());

    // Read back from base and delta, as a fresh parse would make them.
    let again = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((again.cache.reused, again.cache.parsed), (39, 0));
    let fresh = RepoIndex::open(repo.path(), None).unwrap();
    for (cached, parsed) in again.files.iter().zip(&fresh.files) {
        assert_eq!(
            (&cached.path, keyhole::testing::repo::facts(cached)),
            (&parsed.path, keyhole::testing::repo::facts(parsed))
        );
    }
    assert_eq!(
        facts_cache_files(cache.path()),
        (Some(base.clone()), Some(delta))
    );

    // Once more files changed than the delta keeps, the base is written afresh.
    java_files(repo.path(), 40, "int more;");
    let rewritten = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!(rewritten.cache.parsed, 40);
    let (base_after, delta) = facts_cache_files(cache.path());
    assert_ne!(base_after, Some(base));
    assert_eq!(delta, None, "the delta goes with the rewrite");
    let last = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert_eq!((last.cache.reused, last.cache.parsed), (40, 0));
}

/// The kept-texts file beside the index's cache in `cache` (`<key>.texts`).
fn kept_texts_file(cache: &Path) -> std::path::PathBuf {
    let entries = fs::read_dir(cache.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path());
    let mut found = entries.filter(|p| p.extension().is_some_and(|e| e == "texts"));
    found.next().expect("texts are kept beside the cache")
}

#[test]
fn texts_are_kept_while_files_are_unchanged_and_read_again_once_written_whatever_their_times() {
    let (repo, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(
        repo.path(),
        "p/A.java",
        b"package p; class A extends B {}\n",
    );
    write(
        repo.path(),
        "p/B.java",
        b"package p; class B { int old; }\n",
    );
    let written = fs::metadata(repo.path().join("p/B.java"))
        .unwrap()
        .modified()
        .unwrap();
    let open = || RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    // Just written, a file's times could still miss a write in the same tick of the clock.
    assert_eq!(open().cache.texts_kept, 0);
    assert_eq!(
        open().cache.texts_kept,
        0,
        "nothing kept while the times are fresh"
    );
    std::thread::sleep(std::time::Duration::from_millis(2200));
    assert_eq!(open().cache.texts_kept, 0, "kept now, read this time");
    let kept = open();
    assert_eq!((kept.cache.texts_kept, kept.cache.reused), (2, 2));
    assert_eq!(&*kept.files[1].text, "package p; class B { int old; }\n");
    assert!(kept.warnings.is_empty(), "{:?}", kept.warnings);

    // Written in place to the same length, its modification time set back: still seen.
    write(
        repo.path(),
        "p/B.java",
        b"package p; class B { int new; }\n",
    );
    let file = fs::File::options()
        .write(true)
        .open(repo.path().join("p/B.java"))
        .unwrap();
    file.set_modified(written).unwrap();
    drop(file);
    // Once its times have stood as long, only its change time tells.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let after = open();
    assert_eq!((after.cache.texts_kept, after.cache.parsed), (1, 1));
    assert_eq!(&*after.files[1].text, "package p; class B { int new; }\n");
    let fresh = RepoIndex::open(repo.path(), None).unwrap();
    for (kept, read) in after.files.iter().zip(&fresh.files) {
        assert_eq!(
            (&*kept.text, keyhole::testing::repo::facts(kept)),
            (&*read.text, keyhole::testing::repo::facts(read))
        );
    }

    // A damaged file of kept texts is never used: one line, and its files are read (the
    // rewritten file is kept in the delta beside it, which is whole).
    let texts = kept_texts_file(cache.path());
    let mut bytes = fs::read(&texts).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&texts, bytes).unwrap();
    let damaged = open();
    assert_eq!(damaged.cache.texts_kept, 1);
    assert_eq!(damaged.warnings.len(), 1, "{:?}", damaged.warnings);
    assert!(damaged.warnings[0].ends_with("checksum mismatch (corrupt); rebuilding it"));
    assert_eq!(&*damaged.files[0].text, "package p; class A extends B {}\n");
    assert_eq!(&*damaged.files[1].text, "package p; class B { int new; }\n");
}

#[cfg(unix)]
#[test]
fn a_name_not_utf8_that_reads_as_another_files_is_skipped_with_a_warning() {
    use std::os::unix::ffi::OsStrExt;
    let repo = tempfile::tempdir().unwrap();
    write(repo.path(), "p/A\\xff.java", b"class Spelled {}");
    write(repo.path(), "p/B.java", b"class B {}");
    let raw = repo
        .path()
        .join("p")
        .join(std::ffi::OsStr::from_bytes(b"A\xff.java"));
    fs::write(&raw, "class Raw {}").unwrap();
    let raw = repo
        .path()
        .join("p")
        .join(std::ffi::OsStr::from_bytes(b"C\xfe.java"));
    fs::write(&raw, "class C {}").unwrap();
    let index = RepoIndex::open(repo.path(), None).unwrap();
    assert_eq!(
        paths(&index),
        ["p/A\\xff.java", "p/B.java", "p/C\\xfe.java"]
    );
    assert_eq!(&*index.files[0].text, "class Spelled {}");
    assert_eq!(
        index.warnings,
        ["skipped p/A\\xff.java: its name is not UTF-8 and reads as another file's"]
    );
}

#[test]
fn opens_sharing_a_cache_while_files_change_never_corrupt_it() {
    let (repo, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    java_files(repo.path(), 60, "");
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (repo, cache) = (repo.path(), cache.path());
            scope.spawn(move || {
                for round in 0..6 {
                    // Some rounds change a few files (the delta), some many (a rewrite).
                    let changed = if round % 3 == 2 { 50 } else { 2 };
                    for i in 0..changed {
                        let text =
                            format!("package p; class C{i} {{ int t{thread}r{round}; int f{i}; }}");
                        // Whole files only: an editor saves by renaming too.
                        let (path, tmp) = (
                            repo.join(format!("p/C{i}.java")),
                            repo.join(format!("t{thread}")),
                        );
                        fs::write(&tmp, text).unwrap();
                        fs::rename(tmp, path).unwrap();
                    }
                    let index = RepoIndex::open(repo, Some(cache)).unwrap();
                    assert!(
                        index.warnings.is_empty(),
                        "thread {thread} round {round}: {:?}",
                        index.warnings
                    );
                }
            });
        }
    });
    let cached = RepoIndex::open(repo.path(), Some(cache.path())).unwrap();
    assert!(cached.warnings.is_empty(), "{:?}", cached.warnings);
    let fresh = RepoIndex::open(repo.path(), None).unwrap();
    for (cached, parsed) in cached.files.iter().zip(&fresh.files) {
        assert_eq!(
            (&cached.path, keyhole::testing::repo::facts(cached)),
            (&parsed.path, keyhole::testing::repo::facts(parsed))
        );
    }
}

#[cfg(unix)]
#[test]
fn an_unwritable_cache_is_reported_and_indexing_goes_on() {
    let repo = tempfile::tempdir().unwrap();
    write(repo.path(), "A.java", b"class A {}");
    // A regular file where the cache directory should be: nothing can be created under it.
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let index = RepoIndex::open(repo.path(), Some(blocker.path())).unwrap();
    assert_eq!(index.files.len(), 1);
    assert_ran_without_cache(&index);
}

#[test]
fn holes_are_rlpg_lines_with_the_hole_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let source =
        "package p;\n\n/**\n * Doc.\n */\nclass A {\n    // note\n    int total = 42;\n}\n";
    write(dir.path(), "p/A.java", source.as_bytes());
    let index = RepoIndex::open(dir.path(), None).unwrap();
    let holes = sample_holes(&index, None, 9, HoleColumn::TrimmedMiddle);
    let shown: Vec<(usize, usize, &str)> = holes
        .iter()
        .map(|h| (h.line + 1, h.column + 1, h.target.as_deref().unwrap()))
        .collect();
    // "int total = 42;" has 15 characters: the hole is at index 7 of it, after the indent.
    assert_eq!(
        shown,
        [
            (1, 6, "ge p;"),
            (6, 5, "s A {"),
            (8, 12, "al = 42;"),
            (9, 1, "}")
        ]
    );
}

#[test]
fn holes_skip_duplicated_files_and_respect_the_cap_and_seed() {
    let index = &*common::SAMPLE;
    let all = sample_holes(index, None, 9, HoleColumn::TrimmedMiddle);
    assert!(
        all.iter()
            .all(|h| !index.files[h.file].path.contains("TextUtil"))
    );
    assert!(all.len() > 1000, "{}", all.len());
    let capped = sample_holes(index, Some(50), 9, HoleColumn::TrimmedMiddle);
    assert_eq!(capped.len(), 50);
    assert_eq!(
        capped,
        sample_holes(index, Some(50), 9, HoleColumn::TrimmedMiddle),
        "same seed, same holes"
    );
    assert_ne!(
        capped,
        sample_holes(index, Some(50), 10, HoleColumn::TrimmedMiddle)
    );
    assert!(
        capped
            .windows(2)
            .all(|w| (w[0].file, w[0].line) < (w[1].file, w[1].line))
    );
}

#[test]
fn positions_are_checked_and_errors_name_them() {
    let index = &*common::SAMPLE;
    let file = "src/main/java/com/acme/shop/model/Entity.java";
    let hole = Hole::parse(index, &format!("{file}:12:8")).unwrap();
    assert_eq!(hole.target.as_deref(), Some("abstract class Entity {"));
    let end = Hole::parse(index, &format!("{file}:12:31")).unwrap();
    assert_eq!(end.target.as_deref(), Some(""));
    let err = |spec: String| Hole::parse(index, &spec).unwrap_err();
    assert!(matches!(
        err(format!("{file}:12:32")),
        HoleError::ColumnOutOfRange { chars: 30, .. }
    ));
    assert_eq!(
        err(format!("{file}:999:1")).to_string(),
        format!("{file}:999: line out of range (the file has 84 lines)")
    );
    assert_eq!(
        err("Nope.java:1:1".into()).to_string(),
        "Nope.java: no such source file in the repository"
    );
    assert!(matches!(
        err(format!("{file}:x:1")),
        HoleError::BadPosition(_)
    ));
    assert!(matches!(
        err(format!("{file}:0:1")),
        HoleError::LineOutOfRange { .. }
    ));
}

/// The index says, in one warning, that it could not write its cache and went on without it.
fn assert_ran_without_cache(index: &RepoIndex) {
    assert!(
        index
            .warnings
            .iter()
            .any(|w| w.contains("cannot write") && w.contains("without a cache")),
        "{:?}",
        index.warnings
    );
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "mounts a tmpfs, which needs root: .ci/run runs it"]
fn a_full_cache_directory_is_reported_and_indexing_goes_on() {
    let scratch = tempfile::tempdir().unwrap();
    let cache = Tmpfs::mount(&scratch.path().join("cache"), "16k");
    let index = RepoIndex::open(&common::sample_path(), Some(&cache.0)).unwrap();
    let entries = std::fs::read_dir(cache.0.join("index"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(index.files.len(), 38);
    assert_ran_without_cache(&index);
    assert_eq!(entries, 0, "a failed write leaves no partial file behind");
}

#[test]
fn ignore_files_apply_from_the_nearest_folder_and_the_git_exclude_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b"*.gen.ts\nout/\n");
    write(root, ".git/info/exclude", b"local.ts\n");
    write(root, "src/.gitignore", b"!keep.gen.ts\n");
    // Rules reach through folders without ignore files, the nearest folder's first.
    write(root, "src/deep/er/.gitignore", b"c.ts\n-early.ts\n");
    for file in [
        "a.ts",
        "local.ts",
        "drop.gen.ts",
        "out/b.ts",
        "src/keep.gen.ts",
        "src/other.gen.ts",
        "src/c.ts",
        "src/deep/keep.gen.ts",
        "src/deep/other.gen.ts",
        "src/deep/out/d.ts",
        "src/deep/er/c.ts",
        "src/deep/er/keep.gen.ts",
        // Listed before the folder's ignore files ('-' and '+' sort below '.').
        "src/deep/er/-early.ts",
        "src/deep/er/+kept.ts",
        "src/.hidden.ts",
    ] {
        write(root, file, b"export const a = 1;\n");
    }
    let index = RepoIndex::open(root, None).unwrap();
    assert_eq!(
        paths(&index),
        [
            "a.ts",
            "src/c.ts",
            "src/deep/er/+kept.ts",
            "src/deep/er/keep.gen.ts",
            "src/deep/keep.gen.ts",
            "src/keep.gen.ts"
        ]
    );
    assert!(index.warnings.is_empty(), "{:?}", index.warnings);
}

#[cfg(unix)]
#[test]
fn ignore_files_that_are_fifos_or_links_out_of_the_repository_are_refused_with_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("repo");
    write(&root, "a.ts", b"export const a = 1;\n");
    write(&root, "sub/b.ts", b"export const b = 1;\n");
    let fifo = std::ffi::CString::new(root.join(".gitignore").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // Rules outside the repository are not the repository's: not read, not applied.
    write(scratch.path(), "elsewhere", b"*.ts\n");
    std::os::unix::fs::symlink(
        scratch.path().join("elsewhere"),
        root.join("sub/.gitignore"),
    )
    .unwrap();
    let index =
        common::index_within_minutes(&root).expect("a FIFO as .gitignore must not hang indexing");
    assert_eq!(paths(&index), ["a.ts", "sub/b.ts"]);
    let warnings = index.warnings.join("\n");
    for expected in [
        ".gitignore: not a regular file; its rules were not applied",
        "sub/.gitignore: outside the repository; its rules were not applied",
    ] {
        assert!(
            warnings.contains(expected),
            "missing '{expected}' in:\n{warnings}"
        );
    }
}

#[test]
fn folders_of_installed_dependencies_are_left_out_unless_included() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("repo");
    for file in [
        "src/app.ts",
        "node_modules/left-pad/index.ts",
        "packages/ui/node_modules/react/index.d.ts",
        "main.py",
        "venv/lib/python3.12/site-packages/six.py",
        "site-packages/requests/api.py",
    ] {
        write(&root, file, b"export const a = 1;\n");
    }
    let index = RepoIndex::open(&root, None).unwrap();
    assert_eq!(paths(&index), ["main.py", "src/app.ts"]);
    let everything = RepoIndex::open_with_progress(&root, None, Vendored::Included, &|_, _| {});
    assert_eq!(paths(&everything.unwrap()).len(), 6);

    // The command line's flag.
    let files = |extra: &[&str]| {
        let args = [&["index", root.to_str().unwrap(), "--json"][..], extra].concat();
        let out = common::ok(common::keyhole(&args, scratch.path()));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["files"].as_u64().unwrap()
    };
    assert_eq!(files(&[]), 2);
    assert_eq!(files(&["--include-vendored"]), 6);
}
