use super::*;
use ratatui::crossterm::event::KeyModifiers;

fn state() -> State {
    State::new(Keymap::builtin(), Theme::dark())
}

/// A key as the terminal loop reads it: through the mode's keymap layer.
fn press(s: &mut State, key: KeyEvent) -> Vec<Effect> {
    match key_action(s, key) {
        Some(action) => update(s, action),
        None => vec![],
    }
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

#[test]
fn focus_cycles_both_ways_and_help_scrolls_and_closes_by_esc_or_question_mark() {
    let mut s = state();
    update(&mut s, Action::Command(Command::FocusPrev));
    assert_eq!(s.focus, Pane::Completions);
    update(&mut s, Action::Command(Command::FocusNext));
    assert_eq!(s.focus, Pane::Source);
    for close in [KeyCode::Esc, KeyCode::Char('?')] {
        update(&mut s, Action::Command(Command::Help));
        assert_eq!(s.mode, Mode::Help { scroll: 0 });
        // Other keys do not close it: they scroll it, or nothing.
        for key in [KeyCode::Tab, KeyCode::Char('x')] {
            assert!(key_action(&s, KeyEvent::from(key)).is_none());
        }
        for key in [KeyCode::Down, KeyCode::PageDown, KeyCode::Up] {
            let action = key_action(&s, KeyEvent::from(key)).unwrap();
            update(&mut s, action);
        }
        assert!(
            matches!(s.mode, Mode::Help { scroll } if scroll > 1),
            "{:?}",
            s.mode
        );
        let action = key_action(&s, KeyEvent::from(close)).unwrap();
        update(&mut s, action);
        assert_eq!(s.mode, Mode::Normal);
        assert_eq!(s.focus, Pane::Source);
    }
}

#[test]
fn k_stays_within_bounds() {
    let mut s = state();
    for _ in 0..10 {
        update(&mut s, Action::Command(Command::MoreK));
    }
    assert_eq!(s.k, MAX_K);
    for _ in 0..10 {
        update(&mut s, Action::Command(Command::FewerK));
    }
    assert_eq!(s.k, 1);
}

#[test]
fn filter_mode_takes_raw_keys_until_enter() {
    let mut s = state();
    update(&mut s, Action::Command(Command::Filter));
    assert!(matches!(key_action(&s, key('q')), Some(Action::Input(_))));
    for c in "mnb".chars() {
        press(&mut s, key(c));
    }
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!(s.filter, "mnb");
    assert_eq!(s.mode, Mode::Normal);
    assert!(matches!(
        key_action(&s, key('q')),
        Some(Action::Command(Command::Quit))
    ));
}

#[test]
fn streamed_text_shows_while_running_and_gives_way_to_the_cards() {
    let mut s = state();
    let hole = Hole {
        file: 0,
        line: 0,
        column: 0,
        offset: 0,
        target: None,
    };
    s.view = Some(HoleView {
        hole,
        generation: 3,
        failed: None,
    });
    s.running = true;
    let streamed = |generation, card, text: &str| Action::Streamed {
        generation,
        card,
        text: text.into(),
    };
    update(&mut s, streamed(3, 1, "find"));
    update(&mut s, streamed(3, 1, "ById("));
    update(&mut s, streamed(2, 0, "stale"));
    assert_eq!(s.streamed, ["", "findById("]);
    update(
        &mut s,
        Action::Completed {
            generation: 3,
            cards: vec![],
        },
    );
    assert!(!s.running && s.streamed.is_empty());
}

#[test]
fn results_for_another_hole_are_dropped() {
    let mut s = state();
    let effects = update(
        &mut s,
        Action::Analysed {
            generation: 7,
            candidates: vec![],
            proposals: Arc::default(),
            ranker: RankerKind::RlpgH,
        },
    );
    assert!(effects.is_empty());
    assert!(s.candidates.is_empty());
    update(
        &mut s,
        Action::Completed {
            generation: 7,
            cards: vec![],
        },
    );
    assert!(!s.running);
}

fn candidate(id: usize) -> Candidate {
    let id = CandidateId::nth(id);
    Candidate {
        id,
        label: format!("cand {id}"),
        source: "current",
        context_type: "default",
        score: None,
        retrieval_score: None,
        availability: Availability::Applicable,
        prompt: Prompt {
            segments: vec![],
            budget: 10,
            tokenizer: "code",
            proposal_id: id,
        },
    }
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

#[test]
fn ranking_orders_and_scores_then_lists_retrieved_then_the_unranked() {
    let not_applicable = |id| Candidate {
        id: CandidateId::nth(id),
        availability: Availability::NotApplicable(None),
        ..candidate(id)
    };
    let mut cands: Vec<Candidate> = [70, 4, 1, 63, 2, 3, 5].into_iter().map(candidate).collect();
    cands[1] = not_applicable(4);
    cands[4] = not_applicable(2);
    let ranked = [(3, 0.9), (1, 0.5)].map(|(id, score)| Ranked {
        id: CandidateId::nth(id),
        score,
    });
    apply_ranking(&mut cands, &ranked);
    let order: Vec<_> = cands.iter().map(|c| (c.id.index(), c.score)).collect();
    assert_eq!(
        order,
        [
            (3, Some(0.9)),
            (1, Some(0.5)),
            (5, None),
            (63, None),
            (70, None),
            (2, None),
            (4, None)
        ]
    );
}

/// A state with a one-file repository open.
fn opened() -> State {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("A.java"), "class A {}\n").unwrap();
    let mut s = state();
    s.index = Some(Arc::new(RepoIndex::open(dir.path(), None).unwrap()));
    s.phase = Phase::Ready;
    s
}

fn at_hole(s: &mut State, generation: u64) {
    s.view = Some(HoleView {
        hole: Hole {
            file: 0,
            line: 0,
            column: 0,
            offset: 0,
            target: None,
        },
        generation,
        failed: None,
    });
}

#[test]
fn a_backend_that_cannot_start_keeps_the_current_one_and_says_why() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.candidates = vec![candidate(1)];
    let mut other = BackendConfig::embedded();
    other.name = "other".into();
    s.setup.backends.push(other);
    update(&mut s, Action::Command(Command::Backends));
    assert_eq!(s.mode, Mode::Backends { cursor: 0 });
    press(&mut s, KeyEvent::from(KeyCode::Down));
    let effects = press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert!(matches!(
        effects[..],
        [Effect::SwitchBackend { chosen: 1, .. }]
    ));
    assert!(s.busy(), "starting it");
    let failed = Action::BackendSwitched {
        chosen: 1,
        backend: Err("other: cannot read model.gguf".into()),
    };
    assert!(update(&mut s, failed).is_empty());
    assert_eq!(s.setup.backend, 0);
    assert!(!s.busy());
    assert_eq!(
        s.status,
        "cannot switch the backend: other: cannot read model.gguf"
    );
}

#[test]
fn a_failed_analysis_stops_the_spinner_and_says_why() {
    let mut s = opened();
    at_hole(&mut s, 3);
    assert!(s.busy(), "building the candidates");
    let failed = |generation| Action::AnalysisFailed {
        generation,
        error: "internal error (boom)".into(),
    };
    update(&mut s, failed(2));
    assert!(s.busy(), "a stale failure is ignored");
    update(&mut s, failed(3));
    assert!(!s.busy());
    assert_eq!(
        s.status,
        "cannot build the candidates: internal error (boom)"
    );
}

#[test]
fn the_ranker_cycles_through_every_kind_from_rlpg_h() {
    let mut s = state();
    assert_eq!(s.ranker, RankerKind::RlpgH, "RLPG-H ranks by default");
    let mut seen = vec![s.ranker];
    for _ in 0..5 {
        update(&mut s, Action::Command(Command::CycleRanker));
        seen.push(s.ranker);
    }
    use RankerKind::*;
    assert_eq!(seen, [RlpgH, RlpgR, Bm25, Fixed, Online, RlpgH]);
    assert!(ui::candidates::title(&s).contains("ranker RLPG-H"));
}

#[test]
fn cycling_the_ranker_asks_for_a_ranking_and_drops_an_overtaken_one() {
    let mut s = opened();
    at_hole(&mut s, 2);
    s.candidates = vec![candidate(1), candidate(2)];
    let effects = update(&mut s, Action::Command(Command::CycleRanker));
    assert_eq!(s.ranker, RankerKind::RlpgR);
    assert!(matches!(
        effects[..],
        [Effect::Rank {
            generation: 2,
            ranker: RankerKind::RlpgR,
            ..
        }]
    ));
    let ranked = |ranker, first| Action::Ranked {
        generation: 2,
        ranker,
        ranked: Ok(vec![Ranked {
            id: CandidateId::nth(first),
            score: 1.0,
        }]),
    };
    update(&mut s, ranked(RankerKind::RlpgH, 1));
    assert_eq!(s.candidates[0].id, 1, "the RLPG-H ranking was overtaken");
    update(&mut s, ranked(RankerKind::RlpgR, 2));
    assert_eq!(s.candidates[0].id, 2);
    assert_eq!(s.candidates[0].score, Some(1.0));
    assert!(s.status.contains("RLPG-R"), "{}", s.status);
    let failed = Action::Ranked {
        generation: 2,
        ranker: RankerKind::RlpgR,
        ranked: Err("no RLPG-R head".into()),
    };
    update(&mut s, failed);
    assert_eq!(s.candidates[0].score, None, "no score is shown as RLPG-R's");
    assert!(s.status.contains("RLPG-R cannot rank: no RLPG-R head"));
    update(&mut s, Action::Command(Command::CycleRanker));
    assert_eq!(s.ranker, RankerKind::Bm25);
    let built_by = |ranker| Action::Analysed {
        generation: 2,
        candidates: vec![candidate(1)],
        proposals: Arc::default(),
        ranker,
    };
    assert!(update(&mut s, built_by(RankerKind::Bm25)).is_empty());
    assert!(matches!(
        update(&mut s, built_by(RankerKind::RlpgR))[..],
        [Effect::Rank {
            ranker: RankerKind::Bm25,
            ..
        }]
    ));
}

fn waiting(id: usize) -> Candidate {
    Candidate {
        availability: Availability::Building,
        ..candidate(id)
    }
}

fn procc(pick: Option<usize>) -> Procc {
    let pick = pick.map(CandidateId::nth);
    Procc {
        context: bandit::context([Some((0.5, 0.25)), Some((0.4, 0.2)), None]),
        available: [true, true, false],
        pick,
    }
}

#[test]
fn retrieved_candidates_arrive_later_without_blocking_and_mark_procc_pick() {
    let mut s = opened();
    at_hole(&mut s, 4);
    let analysed = vec![candidate(6), candidate(68), waiting(69), waiting(70)];
    update(
        &mut s,
        Action::Analysed {
            generation: 4,
            candidates: analysed,
            proposals: Arc::default(),
            ranker: RankerKind::RlpgH,
        },
    );
    assert!(
        s.retrieving() && s.busy(),
        "the spinner runs while they build"
    );
    assert!(
        s.status.contains("asking the backend for 2"),
        "{}",
        s.status
    );
    // Input is not blocked: the cursor moves, but a waiting row cannot be chosen yet.
    update(&mut s, Action::Command(Command::FocusNext));
    update(&mut s, Action::Command(Command::Bottom));
    assert_eq!(s.focused_candidate().unwrap().id, 70);
    update(&mut s, Action::Command(Command::Select));
    assert!(s.selected.is_empty() && s.status.contains("waiting"));
    assert!(ui::prompt::title(&s).contains("waiting for the backend"));
    s.k = MAX_K;
    assert_eq!(run_ids(&s), [6, 68], "waiting rows are not completed");

    let built = |id, availability| Candidate {
        id: CandidateId::nth(id),
        availability,
        retrieval_score: Some(0.5),
        ..candidate(id)
    };
    let why = "backend `embedded` does not follow instructions".to_string();
    let retrieved = |generation| Action::Retrieved {
        generation,
        candidates: vec![
            built(69, Availability::Applicable),
            built(70, Availability::NotApplicable(Some(why.clone()))),
        ],
        procc: procc(Some(69)),
    };
    update(&mut s, retrieved(3));
    assert!(s.retrieving(), "a stale hole's candidates are dropped");
    update(&mut s, retrieved(4));
    assert!(!s.retrieving() && !s.busy());
    let ids: Vec<_> = s.candidates.iter().map(|c| c.id).collect();
    assert_eq!(ids, [6, 68, 69, 70], "rows keep their places");
    assert!(s.candidate(CandidateId::nth(69)).unwrap().applicable());
    assert!(ui::prompt::title(&s).contains(&why), "why not shows");
    assert!(ui::candidates::title(&s).contains("ProCC ★69"));
    assert!(s.status.contains("ProCC (LinUCB) picks 69"));
    update(&mut s, Action::Command(Command::Up));
    update(&mut s, Action::Command(Command::Select));
    assert!(s.selected.contains(&CandidateId::nth(69)));
}

fn card(candidate: usize) -> Card {
    let candidate = CandidateId::nth(candidate);
    Card {
        candidate,
        edited: None,
        outcome: Ok(Finished {
            text: format!("c{candidate}"),
            latency_ms: 0,
            scores: crate::metrics::score("a", "a"),
            syntax_errors: 0,
        }),
    }
}

fn lesson_of(effects: &[Effect]) -> Option<BanditLesson> {
    match effects {
        [Effect::Pick { bandit, .. }] => bandit.clone(),
        _ => panic!("a pick effect"),
    }
}

#[test]
fn picking_a_procc_perspective_rewards_its_arm_and_the_shown_others_nothing() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.procc = Some(procc(Some(68)));
    // 70 was not available, 6 is RLPG's: neither is taught.
    s.cards = [68, 69, 70, 6].map(card).to_vec();
    let lesson = lesson_of(&update(&mut s, Action::Command(Command::Pick2))).unwrap();
    assert_eq!(lesson.rewards, [(0, 0.0), (1, 1.0)]);
    assert_eq!(lesson.context, procc(None).context);
    let effects = update(&mut s, Action::Command(Command::Pick4));
    assert_eq!(
        lesson_of(&effects),
        None,
        "an RLPG pick leaves the bandit alone"
    );
}
#[test]
fn the_editor_counts_tokens_and_esc_discards_it() {
    let mut s = state();
    s.candidates = vec![candidate(7)];
    assert!(matches!(
        key_action(&s, key('i')),
        Some(Action::Command(Command::Edit))
    ));
    update(&mut s, Action::Command(Command::Edit));
    assert_eq!((s.mode.clone(), s.focus), (Mode::Edit, Pane::Prompt));
    for c in "int x".chars() {
        press(&mut s, key(c));
    }
    let editor = s.editor.as_ref().unwrap();
    assert_eq!(
        (editor.text().as_str(), editor.candidate.index()),
        ("int x", 7)
    );
    let tokens = TokenizerKind::Code.tokenizer().count("int x");
    assert_eq!(editor.tokens, tokens);
    assert!(ui::prompt::title(&s).contains(&format!("{tokens}/10 tokens")));
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    assert!(s.editor.is_none() && s.mode == Mode::Normal);
    assert_eq!(s.candidates[0].prompt.text(), "", "the prompt is unchanged");
}

#[test]
fn ctrl_s_closes_the_editor_and_edited_cards_join_the_shown_ones() {
    let mut s = state();
    s.candidates = vec![candidate(7)];
    update(&mut s, Action::Command(Command::Edit));
    // No backend yet: nothing runs, but the editor still closes.
    assert!(
        key_action(&s, ctrl('s')).is_some_and(|a| matches!(a, Action::Command(Command::Confirm)))
    );
    assert!(update(&mut s, Action::Command(Command::Confirm)).is_empty());
    assert_eq!(s.mode, Mode::Normal);
    let card = |edited: Option<&str>| Card {
        candidate: CandidateId::nth(7),
        edited: edited.map(String::from),
        outcome: Err("offline".into()),
    };
    s.cards = (0..MAX_K).map(|_| card(None)).collect();
    show_cards(&mut s, vec![card(Some("edit"))]);
    assert_eq!(s.cards.len(), MAX_K);
    assert_eq!(s.card_cursor, MAX_K - 1);
    assert!(s.cards[MAX_K - 1].edited.is_some());
    show_cards(&mut s, vec![card(None)]);
    assert_eq!((s.cards.len(), s.card_cursor), (1, 0));
}

#[test]
fn opening_moves_through_its_stages_and_a_failure_leaves_with_the_error() {
    let mut s = state();
    let at = |stage, done| {
        Action::Progress(Progress {
            stage,
            done,
            total: 1581,
        })
    };
    update(&mut s, at(Stage::Files, 812));
    assert_eq!(s.status, "indexing 812/1581 files");
    update(&mut s, at(Stage::Graph, 1581));
    assert!(
        s.status.contains("building the repository graph"),
        "{}",
        s.status
    );
    update(&mut s, at(Stage::Search, 1581));
    assert!(s.status.contains("search indexes"), "{}", s.status);
    assert!(s.busy());
    let effects = update(
        &mut s,
        Action::Indexed(Err("A.java:99: line out of range".into())),
    );
    assert!(
        matches!(effects[..], [Effect::Quit]),
        "nothing to show: leave"
    );
    assert_eq!(
        s.phase,
        Phase::Failed("A.java:99: line out of range".into())
    );
    assert!(!s.busy(), "the spinner stops");
    update(&mut s, at(Stage::Backend, 1581));
    assert!(
        matches!(s.phase, Phase::Failed(_)),
        "late progress does not revive it"
    );
}

#[test]
fn quit_cancels_and_quits_and_mouse_toggles() {
    let mut s = state();
    let effects = update(&mut s, Action::Command(Command::Quit));
    assert!(matches!(
        effects[..],
        [Effect::CancelCompletions, Effect::Quit]
    ));
    let effects = update(&mut s, Action::Command(Command::ToggleMouse));
    assert!(matches!(effects[..], [Effect::SetMouse(false)]));
}

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
    };
    s.index = Some(index);
    s.phase = Phase::Ready;
    at_hole(&mut s, 1);
    s.candidates = vec![Candidate {
        prompt,
        ..candidate(7)
    }];
    s.cards = vec![Card {
        candidate: CandidateId::nth(7),
        edited: None,
        outcome: Ok(Finished {
            text: completion.into(),
            latency_ms: 0,
            scores: crate::metrics::score("a", "a"),
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
