use super::*;
use crate::compose::SegmentKind;
use crate::rank::bandit;
use crate::tui::ui;
use ratatui::crossterm::event::KeyModifiers;
use std::time::Instant;

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
        analysis: AnalysisPhase::Building,
    });
    let waiting = |id| RunningCard {
        candidate: CandidateId::nth(id),
        text: String::new(),
        pieces: 0,
        started: None,
    };
    s.completion = CompletionPhase::Running {
        cards: vec![waiting(6), waiting(7)],
    };
    let streamed = |generation, card, text: &str| Action::Streamed {
        generation,
        card,
        text: text.into(),
    };
    let at = Instant::now();
    update(
        &mut s,
        Action::CardStarted {
            generation: 3,
            card: 1,
            at,
        },
    );
    update(&mut s, streamed(3, 1, "find"));
    update(&mut s, streamed(3, 1, "ById("));
    update(&mut s, streamed(2, 0, "stale"));
    let CompletionPhase::Running { cards } = &s.completion else {
        panic!("still running");
    };
    assert_eq!(cards[0], waiting(6), "the first waits its turn");
    assert_eq!(
        (cards[1].text.as_str(), cards[1].pieces, cards[1].started),
        ("findById(", 2, Some(at))
    );
    update(
        &mut s,
        Action::Completed {
            generation: 3,
            cards: vec![],
        },
    );
    assert_eq!(s.completion, CompletionPhase::Idle);
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
    assert!(!s.running());
}

/// Candidate `id` whose prompt is its own text ("prompt of 7").
fn candidate(id: usize) -> CandidateRow {
    with_prompt(id, &format!("prompt of {id}"))
}

fn with_prompt(id: usize, text: &str) -> CandidateRow {
    let id = CandidateId::nth(id);
    let mut sourced = crate::context::SourcedText::default();
    sourced.push_plain(text);
    CandidateRow {
        id,
        label: format!("cand {id}"),
        source: "current",
        context_type: "default",
        score: None,
        retrieval_score: None,
        availability: Availability::Applicable,
        reader: None,
        prompt: Prompt {
            segments: vec![crate::compose::Segment {
                kind: SegmentKind::Default,
                text: sourced,
                tokens: 1,
                allocated: 10,
                cut: None,
            }],
            budget: 10,
            tokenizer: "code",
            proposal_id: id,
            backend_tokens: None,
            assembly: crate::compose::Assembly::Capped,
            model_room: None,
            suffix: None,
        },
    }
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

#[test]
fn ranking_orders_and_scores_then_lists_retrieved_then_the_unranked() {
    let not_applicable = |id| CandidateRow {
        id: CandidateId::nth(id),
        availability: Availability::NotApplicable(None),
        ..candidate(id)
    };
    let mut cands: Vec<CandidateRow> = [70, 4, 1, 63, 2, 3, 5].into_iter().map(candidate).collect();
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

/// The hole at the start of the first file.
fn first_hole() -> Hole {
    Hole {
        file: 0,
        line: 0,
        column: 0,
        offset: 0,
        target: None,
    }
}

fn at_hole(s: &mut State, generation: u64) {
    s.view = Some(HoleView {
        hole: first_hole(),
        generation,
        analysis: AnalysisPhase::Building,
    });
}

#[test]
fn a_backend_that_cannot_start_keeps_the_current_one_and_says_why() {
    let mut s = opened();
    at_hole(&mut s, 1);
    let built = Action::Analysed {
        generation: 1,
        candidates: vec![candidate(1)],
        proposals: Arc::default(),
        ranker: RankerKind::RlpgH,
    };
    update(&mut s, built);
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
        backend: Err(JobError::failed("other: cannot read model.gguf")),
        learning: None,
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
fn the_backend_picker_reads_the_file_again_and_keeps_the_one_completing() {
    let mut s = opened();
    let named = |name: &str| {
        let mut entry = BackendConfig::embedded();
        entry.name = name.into();
        entry
    };
    s.setup.backends.push(named("old-server"));
    s.setup.backend = 1;
    let effects = update(&mut s, Action::Command(Command::Backends));
    assert!(matches!(effects[..], [Effect::ReadBackends]));
    // The file now: the server moved under a new name, another entry was bad.
    let read = Action::BackendsRead {
        backends: vec![BackendConfig::embedded(), named("new-server")],
        warnings: vec![
            "left out of the backends: backends.toml, line 9, key `temperature`: …".into(),
        ],
    };
    update(&mut s, read);
    let names: Vec<&str> = s.setup.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["embedded", "new-server", "old-server"]);
    assert_eq!(s.setup.entry().name, "old-server", "still completing");
    assert!(
        s.warning
            .as_deref()
            .unwrap()
            .contains("line 9, key `temperature`")
    );
    press(&mut s, KeyEvent::from(KeyCode::Up));
    assert_eq!(s.mode, Mode::Backends { cursor: 1 });
}

#[test]
fn a_failed_analysis_stops_the_spinner_and_says_why() {
    let mut s = opened();
    at_hole(&mut s, 3);
    assert!(s.busy(), "building the candidates");
    let failed = |generation| Action::AnalysisFailed {
        generation,
        error: JobError::Panicked("boom".into()),
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
        ranked: Err(JobError::failed("no RLPG-R head")),
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

fn waiting(id: usize) -> CandidateRow {
    CandidateRow {
        availability: Availability::Building,
        ..candidate(id)
    }
}

/// Hole `generation`'s analysis, ranked by RLPG-H, with `candidates`.
fn analysed_by_rlpg_h(generation: u64, candidates: Vec<CandidateRow>) -> Action {
    Action::Analysed {
        generation,
        candidates,
        proposals: Arc::default(),
        ranker: RankerKind::RlpgH,
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
    update(&mut s, analysed_by_rlpg_h(4, analysed));
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
    let ids = |runs: Vec<RunPrompt>| runs.iter().map(|r| r.candidate.index()).collect::<Vec<_>>();
    assert_eq!(
        ids(run_prompts(&s, false).unwrap()),
        [6, 68],
        "waiting rows are not completed"
    );
    assert!(run_prompts(&s, true).unwrap_err().contains("still waiting"));

    let built = |id, availability| CandidateRow {
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

#[test]
fn searched_candidates_read_as_pending_until_the_search_indexes_are_ready() {
    let mut s = opened();
    at_hole(&mut s, 4);
    let analysed = vec![candidate(6), waiting(63), waiting(65), waiting(67)];
    update(&mut s, analysed_by_rlpg_h(4, analysed));
    assert!(s.busy(), "the spinner runs while the indexes build");
    assert!(
        s.status.contains("building the search indexes for 2")
            && s.status.contains("asking the backend for 1"),
        "{}",
        s.status
    );
    let pending = s.candidate(CandidateId::nth(63)).unwrap();
    assert_eq!(
        ui::candidates::note(&s, pending).as_deref(),
        Some("waiting for the search indexes")
    );
    let searched = |generation| Action::Searched {
        generation,
        candidates: Ok(vec![candidate(63), candidate(65)]),
    };
    update(&mut s, searched(3));
    assert!(
        s.candidate(CandidateId::nth(63)).unwrap().building(),
        "a stale hole's rows are dropped"
    );
    update(&mut s, searched(4));
    let ids: Vec<_> = s.candidates.iter().map(|c| c.id.index()).collect();
    assert_eq!(ids, [6, 63, 65, 67], "rows keep their places");
    assert!(s.candidate(CandidateId::nth(65)).unwrap().applicable());
    assert!(s.candidate(CandidateId::nth(67)).unwrap().building());
    assert!(
        !s.status.contains("search indexes") && s.status.contains("asking the backend for 1"),
        "{}",
        s.status
    );
}

/// The status after the driver counted `done` of `total` in building the search indexes.
fn counted(s: &mut State, stage: SearchStage, done: usize, total: usize) -> String {
    let progress = SearchProgress { stage, done, total };
    update(s, Action::SearchProgress(progress));
    s.status.clone()
}

#[test]
fn the_status_counts_the_search_indexes_as_they_build_and_drops_the_count_once_they_are() {
    let mut s = opened();
    at_hole(&mut s, 4);
    let analysed = analysed_by_rlpg_h(4, vec![candidate(6), waiting(63)]);
    update(&mut s, analysed);
    let status = counted(&mut s, SearchStage::Files, 10, 20);
    let files = "building the search indexes (BM25: 10/20 files) for 1 retrieved";
    assert!(status.contains(files), "{status}");
    let status = counted(&mut s, SearchStage::Windows, 300, 1200);
    assert!(
        status.contains("(RepoCoder: 300/1200 windows tokenized)"),
        "{status}"
    );
    let status = counted(&mut s, SearchStage::Windows, 290, 1200);
    assert!(status.contains("300/1200"), "a count behind: {status}");
    let status = counted(&mut s, SearchStage::Windows, 1200, 1200);
    let indexing = "(RepoCoder: 1200 windows tokenized, indexing them)";
    assert!(status.contains(indexing), "{status}");
    let searched = Action::Searched {
        generation: 4,
        candidates: Ok(vec![candidate(63)]),
    };
    update(&mut s, searched);
    assert!(!s.status.contains("search indexes"), "{}", s.status);
    // A count that comes after the rows are in (an index read before) shows nothing.
    let status = counted(&mut s, SearchStage::Windows, 400, 1200);
    assert!(!status.contains("windows"), "{status}");
    assert_eq!(s.search_progress, None);
}

/// What opening `s` at a hole of its index gives, as the driver reports it.
fn indexed(s: &State) -> Action {
    let index = s.index.clone().unwrap();
    let backend = Arc::new(crate::model::ngram::EmbeddedModel::open(index.clone()));
    Action::Indexed(Ok(Indexed {
        index,
        search: SharedSearch::default(),
        backend,
        hole: first_hole(),
        pinned: None,
        pin_warning: None,
        read_at: std::time::SystemTime::now(),
    }))
}

#[test]
fn highlighting_and_the_watch_wait_until_the_ranked_candidates_show() {
    let kinds = |effects: &[Effect]| -> Vec<&'static str> {
        (effects.iter())
            .map(|e| match e {
                Effect::Analyse { .. } => "analyse",
                Effect::Highlight { .. } => "highlight",
                Effect::Watch { .. } => "watch",
                _ => "other",
            })
            .collect()
    };
    let mut s = opened();
    let opening = indexed(&s);
    let effects = update(&mut s, opening);
    assert_eq!(kinds(&effects), ["other", "analyse"], "the ranking alone");
    assert!(!s.lines.is_empty(), "the file shows plain meanwhile");
    let generation = s.view.as_ref().unwrap().generation;
    let effects = update(&mut s, analysed_by_rlpg_h(generation, vec![candidate(6)]));
    assert_eq!(kinds(&effects), ["highlight", "watch"]);
    assert!(s.after_ranked.is_empty());
    // Read again: held once more, and let go where the ranking fails too.
    let reading_again = indexed(&s);
    update(&mut s, reading_again);
    let generation = s.view.as_ref().unwrap().generation;
    let failed = Action::AnalysisFailed {
        generation,
        error: JobError::failed("no classifier"),
    };
    assert_eq!(kinds(&update(&mut s, failed)), ["highlight", "watch"]);
}

#[test]
fn search_indexes_that_cannot_be_built_say_why_in_the_rows_that_waited_for_them() {
    let mut s = opened();
    at_hole(&mut s, 4);
    let analysed = vec![candidate(6), waiting(63), waiting(67), waiting(71)];
    update(&mut s, analysed_by_rlpg_h(4, analysed));
    let failed = Action::Searched {
        generation: 4,
        candidates: Err(JobError::Panicked("boom".into())),
    };
    update(&mut s, failed);
    for id in [63, 67] {
        let row = s.candidate(CandidateId::nth(id)).unwrap();
        let why = ui::candidates::note(&s, row).unwrap();
        assert!(
            why.contains("search indexes could not be built: internal error (boom)"),
            "{id}: {why}"
        );
    }
    assert!(
        s.candidate(CandidateId::nth(71)).unwrap().building(),
        "the typed holes wait for their language server, not the indexes"
    );
}

#[test]
fn typed_holes_a_language_server_answers_fill_their_rows_later() {
    let mut s = opened();
    at_hole(&mut s, 4);
    let analysed = vec![candidate(6), waiting(71), waiting(72)];
    update(&mut s, analysed_by_rlpg_h(4, analysed));
    assert!(
        s.status.contains("the language server for the typed holes")
            && !s.status.contains("backend"),
        "{}",
        s.status
    );
    update(&mut s, Action::Command(Command::FocusNext));
    update(&mut s, Action::Command(Command::Bottom));
    assert!(ui::prompt::title(&s).contains("waiting for the language server"));
    let read = |generation| Action::Typed {
        generation,
        candidates: vec![
            CandidateRow {
                reader: Some("pyright-langserver".into()),
                ..candidate(71)
            },
            CandidateRow {
                availability: Availability::NotApplicable(None),
                ..candidate(72)
            },
        ],
    };
    update(&mut s, read(3));
    assert!(
        s.candidate(CandidateId::nth(71)).unwrap().building(),
        "a stale hole's rows are dropped"
    );
    update(&mut s, read(4));
    let ids: Vec<_> = s.candidates.iter().map(|c| c.id).collect();
    assert_eq!(ids, [6, 71, 72], "rows keep their places");
    let types = s.candidate(CandidateId::nth(71)).unwrap();
    assert!(types.applicable());
    assert_eq!(types.reader.as_deref(), Some("pyright-langserver"));
    assert!(!s.candidate(CandidateId::nth(72)).unwrap().applicable());
}

fn card(candidate: usize) -> Card {
    let candidate = CandidateId::nth(candidate);
    Card {
        fitted: None,
        candidate,
        same: Vec::new(),
        edited: None,
        picked: false,
        outcome: Ok(Finished {
            text: format!("c{candidate}"),
            latency_ms: 0,
            queued_ms: 0,
            scores: Some(crate::metrics::score("a", "a")),
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
fn the_editor_counts_tokens_and_esc_closes_it() {
    let mut s = state();
    s.candidates = vec![with_prompt(7, "")];
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
fn an_edit_is_kept_per_candidate_sent_by_runs_and_dropped_by_d() {
    let mut s = ready_to_run(vec![
        with_prompt(7, "class A {"),
        with_prompt(6, "class B {"),
    ]);
    s.focus = Pane::Candidates;
    update(&mut s, Action::Command(Command::Edit));
    press(&mut s, KeyEvent::from(KeyCode::End));
    for c in " int x".chars() {
        press(&mut s, key(c));
    }
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    let seven = CandidateId::nth(7);
    assert_eq!(s.kept_edit(seven), Some("class A { int x"));
    assert!(
        s.status.contains("edit of candidate 7 kept"),
        "{}",
        s.status
    );
    // The pane shows the edit; the row is marked; D compares it with the composed prompt.
    s.focus = Pane::Candidates;
    assert!(
        ui::prompt::title(&s).contains("edited by you"),
        "{}",
        ui::prompt::title(&s)
    );
    update(&mut s, Action::Command(Command::DiffPrompts));
    assert!(matches!(s.mode, Mode::Diff { .. }));
    assert_eq!(s.diff.as_ref().unwrap().title, "cand 7 → edited");
    s.mode = Mode::Normal;
    // Moving away and back keeps it; `i` resumes from it.
    update(&mut s, Action::Command(Command::Down));
    assert_eq!(s.kept_edit(CandidateId::nth(6)), None);
    update(&mut s, Action::Command(Command::Up));
    update(&mut s, Action::Command(Command::Edit));
    assert_eq!(s.editor.as_ref().unwrap().text(), "class A { int x");
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    // `r` sends the edit, as written, on the edited candidate's card.
    let effects = update(&mut s, Action::Command(Command::Run));
    let job = job_of(&effects);
    let sent: Vec<(usize, &str, bool)> = job
        .prompts
        .iter()
        .map(|p| (p.candidate.index(), p.text.as_str(), p.edited))
        .collect();
    assert_eq!(
        sent,
        [(7, "class A { int x", true), (6, "class B {", false)]
    );
    // `d` drops it: the composed prompt again.
    s.focus = Pane::Candidates;
    update(&mut s, Action::Command(Command::DiscardEdit));
    assert_eq!(s.kept_edit(seven), None);
    assert!(s.status.contains("discarded"), "{}", s.status);
    assert!(!ui::prompt::title(&s).contains("edited by you"));
    // An edit back to the composed text keeps nothing.
    update(&mut s, Action::Command(Command::Edit));
    press(&mut s, KeyEvent::from(KeyCode::End));
    press(&mut s, key('x'));
    press(&mut s, KeyEvent::from(KeyCode::Backspace));
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    assert_eq!(s.kept_edit(seven), None);
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
        fitted: None,
        candidate: CandidateId::nth(7),
        same: Vec::new(),
        edited: edited.map(String::from),
        outcome: Err(JobError::failed("offline")),
        picked: false,
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
    update(&mut s, at(Stage::Backend, 1581));
    assert!(s.status.contains("starting the backend"), "{}", s.status);
    assert!(s.busy());
    let effects = update(
        &mut s,
        Action::Indexed(Err(JobError::failed("A.java:99: line out of range"))),
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

mod prompt_and_source;
mod recorded;

#[test]
fn the_code_profile_shows_rlpgs_code_numbers_where_ids_are_shown() {
    let mut s = opened();
    s.numbering = crate::candidate::Numbering::RlpgCode;
    at_hole(&mut s, 4);
    // Table 7's 5 (`current PL 25%`) is RLPG's code's 6, and the other way round.
    update(
        &mut s,
        analysed_by_rlpg_h(4, vec![waiting(5), candidate(6)]),
    );
    update(&mut s, Action::Command(Command::FocusNext));
    update(&mut s, Action::Command(Command::Top));
    assert_eq!(s.focused_candidate().unwrap().id, 5);
    update(&mut s, Action::Command(Command::Select));
    assert!(s.status.contains("candidate 6 is still"), "{}", s.status);
    assert!(ui::prompt::title(&s).contains("candidate 6 is waiting"));
    let name = |id| provenance::segment_name(SegmentKind::Proposal { id }, s.numbering);
    assert_eq!(name(CandidateId::nth(6)), "proposal 5 (current PL 50%)");
    s.numbering = crate::candidate::Numbering::Table7;
    assert!(ui::prompt::title(&s).contains("candidate 5 is waiting"));
}

/// A state at a hole with an embedded backend, so that runs start.
fn ready_to_run(candidates: Vec<CandidateRow>) -> State {
    let mut s = opened();
    at_hole(&mut s, 1);
    let index = s.index.clone().unwrap();
    s.backend = Some(Arc::new(crate::model::ngram::EmbeddedModel::new(&index)));
    update(
        &mut s,
        Action::Analysed {
            generation: 1,
            candidates,
            proposals: Arc::default(),
            ranker: RankerKind::RlpgH,
        },
    );
    s
}

fn job_of(effects: &[Effect]) -> &CompleteJob {
    match effects {
        [Effect::CancelCompletions, Effect::Complete(job)] => job,
        _ => panic!("a completion run"),
    }
}

#[test]
fn identical_prompts_take_one_request_and_r_completes_the_top_k_distinct_ones() {
    let same = "post lines";
    let rows = vec![
        with_prompt(7, same),
        with_prompt(6, same),
        with_prompt(5, same),
        candidate(11),
        candidate(52),
        candidate(8),
    ];
    let mut s = ready_to_run(rows);
    s.candidate_cursor = 4;
    let effects = update(&mut s, Action::Command(Command::Run));
    let job = job_of(&effects);
    let runs: Vec<(usize, Vec<usize>)> = job
        .prompts
        .iter()
        .map(|p| {
            (
                p.candidate.index(),
                p.same.iter().map(|c| c.index()).collect(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [(7, vec![6, 5]), (11, vec![]), (52, vec![])],
        "r takes the top k whatever is focused; 6 and 5 share 7's request"
    );
    assert!(
        s.status
            .contains("2 more candidates had one of the same prompts"),
        "{}",
        s.status
    );
    let CompletionPhase::Running { cards } = &s.completion else {
        panic!("running");
    };
    assert_eq!(cards.len(), 3);
}

#[test]
fn enter_completes_the_focused_candidate_first_and_refuses_one_that_does_not_apply() {
    let why = "child_class offers no file at this hole (of method names)".to_string();
    let inapplicable = CandidateRow {
        availability: Availability::NotApplicable(Some(why.clone())),
        ..candidate(32)
    };
    let mut s = ready_to_run(vec![
        candidate(7),
        candidate(11),
        candidate(8),
        inapplicable,
    ]);
    s.focus = Pane::Candidates;
    s.candidate_cursor = 2;
    let effects = update(&mut s, Action::Command(Command::Confirm));
    let order: Vec<usize> = job_of(&effects)
        .prompts
        .iter()
        .map(|p| p.candidate.index())
        .collect();
    assert_eq!(order, [8, 7, 11]);
    (s.completion, s.focus) = (CompletionPhase::Idle, Pane::Candidates);
    s.candidate_cursor = 3;
    assert!(update(&mut s, Action::Command(Command::Confirm)).is_empty());
    assert!(
        s.status.contains("32 does not apply") && s.status.contains(&why),
        "{}",
        s.status
    );
    update(&mut s, Action::Command(Command::Select));
    assert!(s.selected.is_empty(), "nor can it be selected");
}

#[test]
fn a_pick_marks_its_card_a_failed_card_says_why_nothing_is_picked() {
    let mut s = opened();
    at_hole(&mut s, 1);
    let failed = Card {
        outcome: Err(JobError::failed("connection refused")),
        ..card(7)
    };
    s.cards = vec![card(6), failed];
    assert!(update(&mut s, Action::Command(Command::Pick2)).is_empty());
    assert!(
        s.status.contains("completion 2 failed") && s.status.contains("connection refused"),
        "{}",
        s.status
    );
    assert!(matches!(
        update(&mut s, Action::Command(Command::Pick1))[..],
        [Effect::Pick { .. }]
    ));
    assert_eq!(
        s.cards.iter().map(|c| c.picked).collect::<Vec<_>>(),
        [true, false]
    );
}

#[test]
fn procc_star_moves_when_a_pick_teaches_its_bandit() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.procc = Some(procc(Some(68)));
    let context = procc(None).context;
    update(
        &mut s,
        Action::ProccTaught {
            context,
            pick: Some(CandidateId::nth(69)),
        },
    );
    assert!(
        ui::candidates::title(&s).contains("ProCC ★69"),
        "{}",
        ui::candidates::title(&s)
    );
    let mut elsewhere = context;
    elsewhere[0] += 1.0;
    update(
        &mut s,
        Action::ProccTaught {
            context: elsewhere,
            pick: None,
        },
    );
    assert!(
        ui::candidates::title(&s).contains("ProCC ★69"),
        "another hole's lesson"
    );
}

#[test]
fn slash_in_the_prompt_pane_searches_the_prompt_counts_and_highlights_matches() {
    let mut s = state();
    s.candidates = vec![with_prompt(7, "a\nb\nc\norder one\nd\nOrder two\nreorder")];
    s.focus = Pane::Prompt;
    assert!(matches!(
        key_action(&s, key('/')),
        Some(Action::Command(Command::Search))
    ));
    update(&mut s, Action::Command(Command::Search));
    for c in "order".chars() {
        press(&mut s, key(c));
    }
    assert!(
        ui::prompt::title(&s).ends_with("/order▏"),
        "{}",
        ui::prompt::title(&s)
    );
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!(s.focus, Pane::Prompt, "the prompt keeps the focus");
    assert_eq!(s.filter, "", "nothing filters the candidates");
    assert_eq!(s.status, "/order: match 1 of 3 in the prompt");
    assert_eq!(s.prompt_scroll, 1, "two lines above the match");
    update(&mut s, Action::Command(Command::NextMatch));
    assert!(
        ui::prompt::title(&s).ends_with("/order 2 of 3"),
        "{}",
        ui::prompt::title(&s)
    );
    update(&mut s, Action::Command(Command::PrevMatch));
    update(&mut s, Action::Command(Command::PrevMatch));
    assert_eq!(s.prompt_match, Some(2), "it wraps");
}

#[test]
fn y_copies_the_focused_completion_alt_digits_jump_to_panes_and_e_opens_the_editor() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.cards = vec![card(6), card(7)];
    s.card_cursor = 1;
    s.focus = Pane::Completions;
    let effects = press(&mut s, key('y'));
    assert!(
        matches!(&effects[..], [Effect::Copy(text)] if text == "c7"),
        "{}",
        s.status
    );
    let alt = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT);
    press(&mut s, alt('2'));
    assert_eq!(s.focus, Pane::Candidates);
    press(&mut s, alt('3'));
    assert_eq!(s.focus, Pane::Prompt);
    let effects = press(
        &mut s,
        KeyEvent::new(KeyCode::Char('E'), KeyModifiers::SHIFT),
    );
    let [Effect::OpenInEditor { path, line }] = &effects[..] else {
        panic!("the editor opens");
    };
    assert!(path.ends_with("A.java") && *line == 1);
    let effects = update(&mut s, Action::Edited(Ok(())));
    assert!(matches!(&effects[..], [Effect::Index { .. }]), "read again");
    assert_eq!(s.phase, Phase::Rereading);
    s.phase = Phase::Ready;
    s.shared_sample = true;
    assert!(
        press(
            &mut s,
            KeyEvent::new(KeyCode::Char('E'), KeyModifiers::SHIFT)
        )
        .is_empty()
    );
    assert!(s.status.contains("bundled sample"), "{}", s.status);
}

#[test]
fn the_palette_lists_every_action_with_its_key_and_enter_runs_the_chosen_one() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.cards = vec![card(6)];
    s.focus = Pane::Completions;
    press(&mut s, KeyEvent::new(KeyCode::Char('x'), KeyModifiers::ALT));
    assert!(matches!(s.mode, Mode::Palette { .. }));
    let all = s.palette_matches("");
    assert!(
        all.iter()
            .any(|(c, keys, _)| *c == Command::Run && keys == "r")
    );
    assert!(
        all.iter().any(|(c, _, _)| *c == Command::CopyCompletion),
        "the pane's own"
    );
    for c in "copy compl".chars() {
        press(&mut s, key(c));
    }
    let effects = press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert!(
        matches!(&effects[..], [Effect::Copy(text)] if text == "c6"),
        "{}",
        s.status
    );
    assert_eq!(s.mode, Mode::Normal);
}

#[test]
fn the_request_log_keeps_what_runs_sent_newest_last_and_l_opens_it() {
    let mut s = opened();
    let logged = |n: usize| LoggedRequest {
        at: "05:00:00".into(),
        backend: "smol".into(),
        candidate: CandidateId::nth(n % 60),
        shared_by: 0,
        edited: false,
        prompt_tokens: Some(100),
        prompt_bytes: 400,
        outcome: Ok(("x".into(), 0, 12)),
    };
    update(&mut s, Action::Logged((0..3).map(logged).collect()));
    assert_eq!(s.request_log.len(), 3);
    update(
        &mut s,
        Action::Logged((0..REQUEST_LOG_KEEPS).map(logged).collect()),
    );
    assert_eq!(s.request_log.len(), REQUEST_LOG_KEEPS, "the oldest go");
    press(
        &mut s,
        KeyEvent::new(KeyCode::Char('L'), KeyModifiers::SHIFT),
    );
    assert_eq!(s.mode, Mode::Requests { scroll: 0 });
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    assert_eq!(s.mode, Mode::Normal);
}

#[test]
fn d_diffs_two_selected_prompts_or_an_edited_prompt_against_its_original() {
    let mut s = opened();
    at_hole(&mut s, 1);
    s.candidates = vec![
        with_prompt(7, "a\nb\nc"),
        with_prompt(11, "a\nB\nc"),
        with_prompt(8, "x"),
    ];
    s.focus = Pane::Candidates;
    press(
        &mut s,
        KeyEvent::new(KeyCode::Char('D'), KeyModifiers::SHIFT),
    );
    assert!(s.status.contains("select two candidates"), "{}", s.status);
    s.selected
        .extend([CandidateId::nth(7), CandidateId::nth(11)]);
    press(
        &mut s,
        KeyEvent::new(KeyCode::Char('D'), KeyModifiers::SHIFT),
    );
    assert_eq!(s.mode, Mode::Diff { scroll: 0 });
    let diff = s.diff.clone().unwrap();
    assert_eq!(diff.title, "cand 7 → cand 11");
    assert!(diff.lines.contains(&DiffLine::Removed("b".into())));
    assert!(diff.lines.contains(&DiffLine::Added("B".into())));
    press(&mut s, KeyEvent::from(KeyCode::Esc));
    assert_eq!(s.mode, Mode::Normal);
    s.cards = vec![Card {
        edited: Some("a\nb\nc\nd".into()),
        ..card(7)
    }];
    s.focus = Pane::Completions;
    press(
        &mut s,
        KeyEvent::new(KeyCode::Char('D'), KeyModifiers::SHIFT),
    );
    let diff = s.diff.clone().unwrap();
    assert_eq!(diff.title, "cand 7 → edited");
    assert!(diff.lines.contains(&DiffLine::Added("d".into())));
}

#[test]
fn a_change_on_disk_is_read_at_once_waits_for_a_run_and_a_report_on_an_older_index_is_dropped() {
    let mut s = opened();
    at_hole(&mut s, 1);
    let index = s.index.clone().unwrap();
    let changed = |index: &Arc<RepoIndex>, paths: &[&str]| Action::ChangedOnDisk {
        index: index.clone(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
    };
    // A report on an index the UI no longer shows (read again since) reads nothing.
    let sources = vec![("A.java".to_string(), "class A {}\n".to_string())];
    let older = Arc::new(RepoIndex::from_sources(&index.root, sources));
    assert!(update(&mut s, changed(&older, &["A.java"])).is_empty());
    assert!(s.changed_on_disk.is_empty());
    // While completions run, the reading waits, and says so.
    s.completion = CompletionPhase::Running { cards: Vec::new() };
    assert!(update(&mut s, changed(&index, &["A.java", "B.java"])).is_empty());
    assert_eq!(
        s.status,
        "the hole's file A.java and 1 more file changed on disk: the candidates are built \
         again once the completions are in"
    );
    assert_eq!(s.phase, Phase::Ready);
    // The run ends: the repository is read again, once.
    s.completion = CompletionPhase::Idle;
    let effects = update(&mut s, Action::Tick(Instant::now()));
    assert!(matches!(&effects[..], [Effect::Index { .. }]), "read again");
    assert_eq!(s.phase, Phase::Rereading);
    assert!(
        s.status
            .contains("changed on disk: reading the repository again")
    );
    assert!(update(&mut s, Action::Tick(Instant::now())).is_empty());
    // Changed back before it could be read: nothing to read.
    s.phase = Phase::Ready;
    s.completion = CompletionPhase::Running { cards: Vec::new() };
    update(&mut s, changed(&index, &["A.java"]));
    update(&mut s, changed(&index, &[]));
    s.completion = CompletionPhase::Idle;
    assert!(update(&mut s, Action::Tick(Instant::now())).is_empty());
}
