//! The composer: budgets are never exceeded and the proposal's unused share goes, exactly, to
//! the default context — for any hole, proposal, budget and tokenizer.

use crate::common;
use keyhole::testing::candidate;

use common::SAMPLE;
use keyhole::Fidelity;
use keyhole::TokenizerKind;
use keyhole::testing::context::HoleRequest;
use keyhole::testing::context::proposals;
use keyhole::{SegmentKind, testing::compose};
use keyhole::{testing::hole::HoleColumn, testing::hole::sample_holes};
use proptest::prelude::*;

fn tokenizers() -> impl Strategy<Value = TokenizerKind> {
    prop_oneof![
        8 => Just(TokenizerKind::Code),
        1 => Just(TokenizerKind::P50kBase),
        1 => Just(TokenizerKind::Cl100kBase),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn prompts_fit_the_budget_and_reallocation_is_exact(
        hole_pick in any::<prop::sample::Index>(),
        id in 0usize..=62,
        budget in 0usize..3000,
        kind in tokenizers(),
    ) {
        let holes = sample_holes(&SAMPLE, None, 9, HoleColumn::TrimmedMiddle);
        let hole = hole_pick.get(&holes);
        let tok = kind.tokenizer();
        let proposal = (id < 62).then(|| {
            let spec = candidate::proposal_specs()[id];
            let req = HoleRequest { index: &SAMPLE, hole, tokenizer: tok, allocation: compose::proposal_allocation(budget, spec.share), fidelity: Fidelity::Paper, seed: 9, };
            proposals::build(spec, &req)
        });
        let context = proposal.as_ref().map_or(&keyhole::DefaultContext as &dyn compose::CandidateContext, |p| p);
        let prompt = compose::compose(&SAMPLE, hole, context, tok, budget);

        prop_assert_eq!(prompt.validate(&SAMPLE, tok), Ok(()));
        let (default, before_default) = prompt.segments.split_last().unwrap();
        prop_assert!(matches!(default.kind, SegmentKind::Default));
        // The default context is the code right before the hole, cut from the start.
        let before = &SAMPLE.files[hole.file].text[..hole.offset];
        prop_assert!(before.ends_with(&default.text.text));
        // A proposal allocated no tokens (a budget of 1) has no segment.
        if let Some(p) = proposal.as_ref().filter(|p| p.applicable())
            && let Some(seg) = before_default.iter().find(|s| matches!(s.kind, SegmentKind::Proposal { .. }))
        {
            prop_assert!(seg.tokens <= compose::proposal_allocation(budget, p.spec.share));
        }
        // Reallocation is exact: the default context is allotted every token the proposal and
        // separator did not use, not their share of the budget.
        let used: usize = before_default.iter().map(|s| s.tokens).sum();
        prop_assert_eq!(default.allocated, budget - used);
        // And it uses them: cut, it fills its allotment, so the prompt spends the whole budget.
        // (A BPE may merge tokens across the joins; the composer then gives back the excess,
        // so for BPE only `validate`'s "within budget" holds.)
        if tok.stable_boundaries() {
            if default.cut.is_some() {
                prop_assert_eq!(default.tokens, default.allocated);
                prop_assert_eq!(used + default.tokens, budget);
            } else {
                prop_assert_eq!(default.tokens, tok.count(before));
            }
        }
    }
}

#[test]
fn a_short_proposal_hands_its_unused_tokens_to_the_default_context() {
    let hole = common::hole("service/OrderService.java:94:32");
    let (_, prompt) = common::proposal(&hole, 3, 1000);
    let [proposal, separator, default] = &prompt.segments[..] else {
        panic!("three segments")
    };
    assert_eq!(
        (proposal.tokens, proposal.allocated, proposal.cut),
        (18, 500, None)
    );
    assert_eq!(separator.text.text, "\n");
    assert_eq!(default.allocated, 1000 - 18 - 1);
    assert_eq!(
        default.tokens, default.allocated,
        "the file before the hole is longer than that"
    );
    assert!(default.cut.is_some());
    assert_eq!(
        prompt.tokens(keyhole::TokenizerKind::Code.tokenizer()),
        1000
    );
}

#[test]
fn the_default_context_alone_is_the_code_before_the_hole() {
    let hole = common::hole("model/Entity.java:14:13");
    let prompt = compose::compose(
        &SAMPLE,
        &hole,
        &keyhole::DefaultContext,
        TokenizerKind::Code.tokenizer(),
        4072,
    );
    assert_eq!(prompt.segments.len(), 1);
    let text = prompt.text();
    assert!(text.starts_with("package com.acme.shop.model;\n"));
    assert!(text.ends_with("public abstract class Entity {\n\n    private "));
}

#[test]
fn every_position_of_the_sample_composes_valid_prompts() {
    let tok = TokenizerKind::Code.tokenizer();
    let holes = keyhole::testing::hole::every_line(&SAMPLE, 1, 3);
    assert!(holes.len() > 2000);
    for hole in holes.iter().step_by(3) {
        for spec in candidate::proposal_specs() {
            let req = HoleRequest {
                index: &SAMPLE,
                hole,
                tokenizer: tok,
                allocation: compose::proposal_allocation(600, spec.share),
                fidelity: Fidelity::Paper,
                seed: 9,
            };
            let prompt = compose::compose(&SAMPLE, hole, &proposals::build(*spec, &req), tok, 600);
            assert_eq!(
                prompt.validate(&SAMPLE, tok),
                Ok(()),
                "{} proposal {}",
                hole.display(&SAMPLE),
                spec.id
            );
        }
    }
}

#[test]
fn validation_catches_a_prompt_over_its_budget() {
    let hole = common::hole("model/Entity.java:14:13");
    let tok = TokenizerKind::Code.tokenizer();
    let mut prompt = compose::compose(&SAMPLE, &hole, &keyhole::DefaultContext, tok, 100);
    assert_eq!(prompt.validate(&SAMPLE, tok), Ok(()));
    prompt.budget = 50;
    assert!(
        prompt
            .validate(&SAMPLE, tok)
            .unwrap_err()
            .to_string()
            .starts_with("prompt has 100 tokens, budget 50")
    );
}
