//! The recorded-requests picker: listing, choosing, asking which place, and the plugin's
//! prompt as a candidate.

use super::*;
use crate::proxy::{Answered, Certainty, Exchange, Place, Sent};

fn exchange(id: u64, agent: &str) -> Exchange {
    Exchange {
        id,
        at: 1_700_000_000.0 + id as f64,
        client: "127.0.0.1:40000".into(),
        agent: Some(format!("{agent}/1.0")),
        method: "POST".into(),
        endpoint: "/infill".into(),
        upstream: "http://127.0.0.1:8080/".into(),
        status: 200,
        sent: Sent {
            prefix: Some("class A {".into()),
            prompt: Some(String::new()),
            suffix: Some("}\n".into()),
            ..Sent::default()
        },
        answered: Answered {
            text: format!("answer {id}"),
            ..Answered::default()
        },
        first_byte_ms: Some(1.0),
        total_ms: 2.0,
        cancelled: false,
        error: None,
        ..Default::default()
    }
}

#[test]
fn the_list_says_where_keyhole_sent_its_prompt_in_place_of_the_plugins() {
    let mut composed = exchange(1, "llama.vim");
    composed.composition = Some(crate::proxy::Composition {
        candidate: Some(3),
        ..Default::default()
    });
    assert!(recorded_row(&composed).contains("keyhole's: answer 1"));
    let mut forwarded = exchange(2, "llama.vim");
    forwarded.composition = Some(crate::proxy::Composition::forwarded("a chat request", 0.1));
    assert!(!recorded_row(&forwarded).contains("keyhole's"));
    assert!(!recorded_row(&exchange(3, "curl")).contains("keyhole's"));
}

fn place(line: usize) -> Place {
    Place {
        file: "A.java".into(),
        line,
        column: 10,
        certainty: Certainty::Exact,
    }
}

#[test]
fn context_only_and_refused_requests_are_not_listed_but_open_by_number() {
    let mut s = opened();
    press(&mut s, key('R'));
    let mut ring = exchange(2, "curl");
    ring.sent.parameters.insert("n_predict".into(), 0.into());
    let mut refused = exchange(3, "curl");
    refused.refused = true;
    let read = |s: &mut State| {
        let exchanges = vec![exchange(1, "curl"), ring.clone(), refused.clone()];
        update(
            s,
            Action::RecordedRead {
                exchanges,
                unreadable: 0,
            },
        )
    };
    read(&mut s);
    let ids: Vec<u64> = s.recorded.exchanges.iter().map(|e| e.id).collect();
    assert_eq!(ids, [1]);
    assert_eq!(s.recorded.hidden, 2);
    // Asked for by number, a context-only request is still found.
    s.recorded.pending = Some(2);
    let effects = read(&mut s);
    assert!(matches!(
        &effects[..],
        [Effect::LocateRecorded { exchange, .. }] if exchange.id == 2
    ));
}

#[test]
fn r_lists_the_record_newest_first_and_enter_looks_for_the_chosen_hole() {
    let mut s = opened();
    let effects = press(&mut s, key('R'));
    assert!(matches!(effects[..], [Effect::ReadRecorded]));
    assert_eq!(s.mode, Mode::Recorded { cursor: 0 });
    let read = Action::RecordedRead {
        exchanges: vec![exchange(1, "curl"), exchange(2, "axios")],
        unreadable: 0,
    };
    update(&mut s, read);
    let ids: Vec<u64> = s.recorded.exchanges.iter().map(|e| e.id).collect();
    assert_eq!(ids, [2, 1], "newest first");
    let row = recorded_row(&s.recorded.exchanges[0]);
    assert!(row.contains("axios") && row.contains("/infill"), "{row}");
    assert!(row.contains("answer 2"), "{row}");
    press(&mut s, KeyEvent::from(KeyCode::Down));
    let effects = press(&mut s, KeyEvent::from(KeyCode::Enter));
    match &effects[..] {
        [Effect::LocateRecorded { exchange, .. }] => assert_eq!(exchange.id, 1),
        _ => panic!("Enter looks for the hole of the request chosen"),
    }
    assert_eq!(s.mode, Mode::Normal);
    // Esc closes the picker without choosing.
    press(&mut s, key('R'));
    assert!(press(&mut s, KeyEvent::from(KeyCode::Esc)).is_empty());
    assert_eq!(s.mode, Mode::Normal);
}

#[test]
fn an_empty_record_says_how_to_fill_it() {
    let mut s = opened();
    press(&mut s, key('R'));
    let read = Action::RecordedRead {
        exchanges: vec![],
        unreadable: 0,
    };
    update(&mut s, read);
    assert_eq!(s.mode, Mode::Normal);
    assert!(s.status.contains("keyhole proxy"), "{}", s.status);
}

#[test]
fn several_places_as_sure_ask_which_and_none_says_so() {
    let mut s = opened();
    update(
        &mut s,
        Action::RecordedRead {
            exchanges: vec![exchange(7, "curl")],
            unreadable: 0,
        },
    );
    let located = |places| Action::RecordedLocated {
        exchange: Box::new(exchange(7, "curl")),
        places,
    };
    update(&mut s, located(vec![]));
    // A warning that stays: the status would be replaced at once.
    let warning = s.warning.clone().unwrap_or_default();
    assert!(warning.contains("in no file"), "{warning}");
    assert!(s.recorded.open.is_none());
    // Two exact places and a less sure one: only the two are offered.
    update(&mut s, located(vec![place(1), place(1), less_sure_place()]));
    assert!(s.status.contains("2 places fit"), "{}", s.status);
    assert!(
        matches!(&s.mode, Mode::RecordedPlace { places, exchange: 7, .. } if places.len() == 2)
    );
    press(&mut s, KeyEvent::from(KeyCode::Down));
    press(&mut s, KeyEvent::from(KeyCode::Enter));
    assert_eq!(s.mode, Mode::Normal);
    let open = s.recorded.open.as_ref().expect("the chosen place opens");
    assert_eq!((open.exchange.id, open.place.line), (7, 1));
    assert!(s.status.contains("from curl"), "{}", s.status);
    // One place opens at once.
    s.recorded.open = None;
    update(&mut s, located(vec![less_sure_place()]));
    let open = s.recorded.open.as_ref().expect("one place opens");
    assert_eq!(open.place.certainty, Certainty::BeforeOnly);
    assert!(s.status.contains("changed"), "{}", s.status);
}

fn less_sure_place() -> Place {
    Place {
        certainty: Certainty::BeforeOnly,
        ..place(1)
    }
}

#[test]
fn the_plugins_prompt_stays_first_and_picking_it_teaches_the_rankers_nothing() {
    let mut sent = candidate(62);
    sent.id = CandidateId::AS_SENT;
    let mut cands = vec![candidate(3), sent, candidate(1)];
    let ranked = [(1, 0.9), (3, 0.5)].map(|(id, score)| Ranked {
        id: CandidateId::nth(id),
        score,
    });
    apply_ranking(&mut cands, &ranked);
    let order: Vec<CandidateId> = cands.iter().map(|c| c.id).collect();
    assert_eq!(
        order,
        [
            CandidateId::AS_SENT,
            CandidateId::nth(1),
            CandidateId::nth(3)
        ]
    );
    let mut s = opened();
    at_hole(&mut s, 1);
    s.candidates = cands;
    s.cards = vec![card(1), card(3)];
    s.cards[0].candidate = CandidateId::AS_SENT;
    assert!(update(&mut s, Action::Command(Command::Pick1)).is_empty());
    assert!(s.status.contains("plugin's prompt"), "{}", s.status);
    // A pick of keyhole's candidate leaves the plugin's out of what is learnt.
    match &update(&mut s, Action::Command(Command::Pick2))[..] {
        [Effect::Pick { pick, .. }] => {
            assert_eq!(pick.candidates, [CandidateId::nth(3)]);
            assert_eq!(pick.completions.len(), 1);
        }
        _ => panic!("a pick of candidate 3 is recorded"),
    }
    assert_eq!(s.shown_number(CandidateId::AS_SENT), "sent");
}

#[test]
fn p_pins_one_of_keyholes_candidates_and_again_unpins_it() {
    let mut s = opened();
    at_hole(&mut s, 1);
    let mut sent = candidate(62);
    sent.id = CandidateId::AS_SENT;
    let mut composed = candidate(62);
    composed.id = CandidateId::SENT_BY_KEYHOLE;
    // Keyhole's prompt as sent follows the plugin's, both before the ranked candidates.
    let mut cands = vec![candidate(3), composed, candidate(67), sent];
    let ranked = [Ranked {
        id: CandidateId::nth(3),
        score: 0.5,
    }];
    apply_ranking(&mut cands, &ranked);
    let order: Vec<CandidateId> = cands.iter().map(|c| c.id).collect();
    assert_eq!(
        order,
        [
            CandidateId::AS_SENT,
            CandidateId::SENT_BY_KEYHOLE,
            CandidateId::nth(3),
            CandidateId::nth(67)
        ]
    );
    s.candidates = cands;
    s.focus = Pane::Candidates;
    for cursor in [0, 1] {
        s.candidate_cursor = cursor;
        assert!(update(&mut s, Action::Command(Command::Pin)).is_empty());
        assert!(s.status.contains("cannot be pinned"), "{}", s.status);
    }
    s.candidate_cursor = 3;
    assert!(update(&mut s, Action::Command(Command::Pin)).is_empty());
    assert!(s.status.contains("needs the backend"), "{}", s.status);

    s.candidate_cursor = 2;
    let root = s.index.as_ref().unwrap().root.clone();
    match &update(&mut s, Action::Command(Command::Pin))[..] {
        [
            Effect::Pin {
                root: at,
                candidate,
            },
        ] => {
            assert_eq!((at, *candidate), (&root, Some(CandidateId::nth(3))));
        }
        _ => panic!("p pins candidate 3"),
    }
    update(&mut s, Action::Pinned(Ok(Some(CandidateId::nth(3)))));
    assert_eq!(s.pinned, Some(CandidateId::nth(3)));
    assert!(s.status.starts_with("pinned cand 3"), "{}", s.status);
    // Again: unpin; a write that fails keeps the pin and says why.
    match &update(&mut s, Action::Command(Command::Pin))[..] {
        [Effect::Pin { candidate, .. }] => assert_eq!(*candidate, None),
        _ => panic!("p again unpins"),
    }
    update(
        &mut s,
        Action::Pinned(Err(JobError::failed("no space left"))),
    );
    assert_eq!(s.pinned, Some(CandidateId::nth(3)));
    assert_eq!(s.status, "cannot pin: no space left");
    assert_eq!(s.shown_number(CandidateId::SENT_BY_KEYHOLE), "comp");
}
