//! The prompt pane (explain, copy, save, scroll) and the source pane (go to line, search,
//! pages, highlighting), and warnings.

use super::*;

/// A state at a hole of a two-file repository whose candidate 7's prompt is B.java's line 2
/// (a proposal) then A.java (the default context), with one finished card of `completion`.
fn explained_state(completion: &str) -> State {
    use crate::context::SourcedText;
    use crate::lang::Span;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("A.java"), "class A {\n  int total() {\n}\n").unwrap();
    std::fs::write(
        dir.path().join("B.java"),
        "class B {\n  int computeTotal(int x) {}\n}\n",
    )
    .unwrap();
    let mut s = state();
    let index = Arc::new(RepoIndex::open(dir.path(), None).unwrap());
    let (a, b) = (
        index.file_id("A.java").unwrap(),
        index.file_id("B.java").unwrap(),
    );
    let segment = |kind, file: usize, range: std::ops::Range<usize>| {
        let mut text = SourcedText::default();
        text.push_span(&index, file, Span::new(range.start, range.end));
        crate::compose::Segment {
            kind,
            tokens: 1,
            allocated: 10,
            cut: None,
            text,
        }
    };
    let b_line_2 = index.files[b].line_start(1)..index.files[b].line_start(2);
    let prompt = Prompt {
        segments: vec![
            segment(
                SegmentKind::Proposal {
                    id: CandidateId::nth(7),
                },
                b,
                b_line_2,
            ),
            segment(SegmentKind::Default, a, 0..index.files[a].text.len()),
        ],
        budget: 20,
        tokenizer: "code",
        proposal_id: CandidateId::nth(7),
        backend_tokens: None,
        assembly: crate::compose::Assembly::Capped,
        model_room: None,
        suffix: None,
    };
    s.index = Some(index);
    s.phase = Phase::Ready;
    at_hole(&mut s, 1);
    s.candidates = vec![CandidateRow {
        prompt,
        ..candidate(7)
    }];
    s.cards = vec![Card {
        fitted: None,
        candidate: CandidateId::nth(7),
        same: Vec::new(),
        edited: None,
        picked: false,
        outcome: Ok(Finished {
            text: completion.into(),
            latency_ms: 0,
            queued_ms: 0,
            scores: Some(crate::metrics::score("a", "a")),
            syntax_errors: 0,
        }),
    }];
    s
}

#[test]
fn explain_names_the_segment_file_and_lines_of_the_longest_copy() {
    let mut s = explained_state("computeTotal(x)");
    update(&mut s, Action::Command(Command::Explain));
    assert!(
        s.status
            .contains("longest, 13 chars: B.java:2 in proposal 7 (")
            && s.status.contains("87% copied"),
        "{}",
        s.status
    );
    assert!(s.status.contains("2 chars not copied"), "{}", s.status);
    // Every piece of it traces to a file and lines, or says it is in no prompt.
    let pieces = provenance::explained_pieces(
        s.index.as_ref().unwrap(),
        &s.candidates[0].prompt,
        "computeTotal(x)",
        s.explained.as_ref().unwrap(),
        s.numbering,
    );
    let expected = [
        ("computeTotal(", "B.java:2 in proposal 7"),
        ("x)", "not in the prompt"),
    ];
    assert_eq!(pieces.len(), expected.len(), "{pieces:?}");
    for ((piece, from), (want, source)) in pieces.iter().zip(expected) {
        assert_eq!(piece, want);
        assert!(from.starts_with(source), "{from}");
    }
    let mut s = explained_state("int total() {");
    update(&mut s, Action::Command(Command::Explain));
    assert!(
        s.status.contains("A.java:2 in the default context"),
        "{}",
        s.status
    );
    assert!(s.explained.is_some());
}

#[test]
fn the_prompt_copies_through_the_terminal_and_saves_under_the_hole_name() {
    let mut s = explained_state("x");
    let effects = update(&mut s, Action::Command(Command::CopyPrompt));
    let text = s.candidates[0].prompt.text();
    assert!(matches!(&effects[..], [Effect::Copy(t)] if *t == text));
    let effects = update(&mut s, Action::Command(Command::SavePrompt));
    assert!(
        matches!(&effects[..], [Effect::SavePrompt { stem, text: t }] if stem == "A-1-1-c7" && *t == text),
        "hole A.java:1:1, candidate 7"
    );
}

#[test]
fn long_prompt_lines_scroll_sideways_unless_wrapped() {
    let mut s = explained_state("x");
    s.focus = Pane::Prompt;
    update(&mut s, Action::Command(Command::Right));
    update(&mut s, Action::Command(Command::Right));
    assert_eq!(s.prompt_left, 16);
    update(&mut s, Action::Command(Command::Left));
    assert_eq!(s.prompt_left, 8);
    update(&mut s, Action::Command(Command::Wrap));
    assert!(s.prompt_wrap);
    assert_eq!(s.prompt_left, 0);
    update(&mut s, Action::Command(Command::Right));
    assert_eq!(s.prompt_left, 0, "wrapped lines have nothing to scroll");
}

/// A state showing a 40-line file: line n (1-based) is "    int vN = N;" with a long line 3.
fn navigable() -> State {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for n in 1..=40 {
        match n {
            3 => text.push_str("    int v3 = 3; // a much longer line than the others\n"),
            _ => text.push_str(&format!("    int v{n} = {n};\n")),
        }
    }
    std::fs::write(dir.path().join("A.java"), text).unwrap();
    let mut s = state();
    s.index = Some(Arc::new(RepoIndex::open(dir.path(), None).unwrap()));
    s.phase = Phase::Ready;
    s
}

fn type_text(s: &mut State, text: &str) {
    for c in text.chars() {
        press(s, key(c));
    }
}

#[test]
fn colon_goes_to_a_line_and_the_column_is_remembered() {
    let mut s = navigable();
    press(&mut s, key(':'));
    assert!(matches!(s.mode, Mode::GoTo(_)));
    type_text(&mut s, "3");
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!((s.mode.clone(), s.cursor.0), (Mode::Normal, 2));
    press(&mut s, KeyEvent::from(KeyCode::End));
    let end_of_3 = s.cursor.1;
    assert!(end_of_3 > 30);
    press(&mut s, KeyEvent::from(KeyCode::Down));
    assert_eq!(
        s.cursor,
        (3, "    int v4 = 4;".len()),
        "clamped to the shorter line"
    );
    press(&mut s, KeyEvent::from(KeyCode::Up));
    assert_eq!(s.cursor, (2, end_of_3), "back in the column it was put in");
    press(&mut s, KeyEvent::from(KeyCode::Home));
    assert_eq!(s.cursor.1, 4, "Home: the indent first");
    press(&mut s, KeyEvent::from(KeyCode::Home));
    assert_eq!(s.cursor.1, 0, "then column 1");
    press(&mut s, key(':'));
    type_text(&mut s, "x");
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert!(
        s.status.contains("'x' is not a line number"),
        "{}",
        s.status
    );
    press(&mut s, key('G'));
    assert_eq!(s.cursor.0, 39, "G: the last line");
    press(&mut s, key('g'));
    assert_eq!(s.cursor.0, 0, "g: the first");
}

#[test]
fn slash_searches_the_file_and_n_and_shift_n_wrap_around() {
    let mut s = navigable();
    s.cursor = (20, 0);
    press(&mut s, key('/'));
    type_text(&mut s, "V2");
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!(s.search_query, "V2");
    assert!(
        s.status.contains("not found"),
        "a capital makes it case-sensitive"
    );
    press(&mut s, key('/'));
    type_text(&mut s, "v3");
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!(s.cursor, (29, 8), "the next v3 after line 21 is v30");
    press(&mut s, key('n'));
    assert_eq!(s.cursor.0, 30, "v31");
    press(&mut s, key('N'));
    press(&mut s, key('N'));
    assert_eq!(s.cursor.0, 2, "back past v30 to v3");
    for _ in 0..11 {
        press(&mut s, key('n'));
    }
    assert_eq!(s.cursor.0, 2, "v30 to v39, then round to v3 again");
}

#[test]
fn pages_move_by_the_pane_height_and_the_wheel_scrolls_the_pane_under_it() {
    let mut s = navigable();
    update(&mut s, Action::Layout([12, 8, 5, 5]));
    press(&mut s, KeyEvent::from(KeyCode::PageDown));
    assert_eq!(s.cursor.0, 11, "a page of 12 rows keeps one for context");
    s.candidates = (1..=20).map(candidate).collect();
    let wheel = Action::Scroll {
        pane: Pane::Candidates,
        command: Command::Down,
    };
    update(&mut s, wheel);
    assert_eq!(s.candidate_cursor, 1);
    assert_eq!(
        (s.focus, s.cursor.0),
        (Pane::Source, 11),
        "focus and source stay"
    );
    update(&mut s, Action::Command(Command::Help));
    let wheel = Action::Scroll {
        pane: Pane::Candidates,
        command: Command::Down,
    };
    update(&mut s, wheel);
    assert_eq!(
        s.mode,
        Mode::Help { scroll: 1 },
        "over the help, the help scrolls"
    );
    assert_eq!(s.candidate_cursor, 1);
}

#[test]
fn a_warning_stays_over_the_status_until_esc() {
    let mut s = state();
    s.warning = Some("keymap.toml: line 3, key `on`: unknown key 'nope'".into());
    update(&mut s, Action::Message("picked".into()));
    assert!(s.warning.is_some(), "messages do not replace it");
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    assert!(s.warning.is_none());
}

#[test]
fn a_file_shows_plain_at_once_and_highlighted_when_the_driver_has_done_it() {
    let mut s = navigable();
    let effects = update(&mut s, Action::Command(Command::Picker));
    assert!(effects.is_empty());
    let effects = press(&mut s, KeyEvent::from(KeyCode::Enter));
    let [Effect::Highlight { shown, text, .. }] = &effects[..] else {
        panic!("the reducer asks for highlighting, it does not do it");
    };
    assert_eq!(s.lines.len(), 40, "plain lines meanwhile");
    assert!(s.busy());
    let lines = highlight::file("A.java", text, &s.theme.code);
    // An older file's lines are dropped.
    update(
        &mut s,
        Action::Highlighted {
            shown: shown - 1,
            lines: vec![],
        },
    );
    assert_eq!(s.lines.len(), 40);
    let shown = *shown;
    update(
        &mut s,
        Action::Highlighted {
            shown,
            lines: lines.clone(),
        },
    );
    assert_eq!(s.lines, lines);
    assert!(!s.busy());
}

#[test]
fn a_write_reads_the_repository_again_and_waits_for_it_before_undo() {
    let mut s = navigable();
    s.backend = Some(Arc::new(
        crate::model::ngram::EmbeddedModel::without_repository(),
    ));
    at_hole(&mut s, 1);
    let undo = FileEdit {
        path: "A.java".into(),
        hash: [0; 32],
        offset: 0,
        replace: 1,
        text: "x".into(),
    };
    let applied = Applied { file: 0, undo };
    let written = Action::Written {
        file: 0,
        result: Ok(("class B {}\n".into(), Some(applied))),
    };
    let effects = update(&mut s, written);
    assert!(
        effects.iter().any(|e| matches!(
            e,
            Effect::Index {
                backend: IndexBackend::Keep(_),
                ..
            }
        )),
        "read again, keeping the backend"
    );
    assert_eq!(s.phase, Phase::Rereading);
    assert_eq!(
        s.lines[0][0].1, "class B {}",
        "the file as written shows at once"
    );
    assert!(press(&mut s, key('u')).is_empty());
    assert!(s.status.contains("a moment"), "{}", s.status);
    let effects = update(
        &mut s,
        Action::Indexed(Err(JobError::failed("A.java: gone"))),
    );
    assert!(effects.is_empty(), "a failed re-read does not leave the UI");
    assert_eq!(s.phase, Phase::Ready);
    assert!(s.status.contains("cannot read the repository again"));
    assert!(matches!(press(&mut s, key('u'))[..], [Effect::Undo { .. }]));
}
