//! Explaining completions against prompts composed on the sample repository.

use crate::common;

use common::{SAMPLE, hole, proposal};
use keyhole::CandidateId;
use keyhole::{Prompt, SegmentKind};
use keyhole::{
    testing::explain::ExplainedSpan, testing::explain::explain,
    testing::explain::explained_fraction,
};

/// The hole after `orderRepository.` in `findOrdersForCustomer`, with current post lines (25%).
fn post_lines_prompt() -> (keyhole::Hole, Prompt) {
    let h = hole("service/OrderService.java:94:32");
    let (_, prompt) = proposal(&h, 5, 4072);
    (h, prompt)
}

/// The promises every explanation keeps: spans tile the completion, copied spans equal their
/// prompt bytes, lie in their segment, and equal their file span.
fn check(prompt: &Prompt, completion: &str, spans: &[ExplainedSpan]) {
    let text = prompt.text();
    let mut at = 0;
    for span in spans {
        assert_eq!(span.completion.start, at, "{spans:?}");
        at = span.completion.end;
        let copied = &completion[span.completion.clone()];
        let Some(range) = span.prompt.clone() else {
            assert_eq!((span.segment, span.origin), (None, None));
            continue;
        };
        assert_eq!(&text[range.clone()], copied);
        let segment = span.segment.expect("copied text has a segment");
        let segment_start: usize = prompt.segments[..segment]
            .iter()
            .map(|s| s.text.text.len())
            .sum();
        assert!(range.start >= segment_start);
        assert!(range.end <= segment_start + prompt.segments[segment].text.text.len());
        if let Some(origin) = span.origin {
            assert_eq!(&SAMPLE.files[origin.file].text[origin.span.range()], copied);
        }
    }
    assert_eq!(at, completion.len());
}

#[test]
fn text_copied_from_post_lines_maps_to_the_proposal_and_its_line() {
    let (h, prompt) = post_lines_prompt();
    let completion = "public Map<OrderStatus, Long> statusReport()";
    let spans = explain(&prompt, completion);
    check(&prompt, completion, &spans);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    assert_eq!(
        prompt.segments[span.segment.unwrap()].kind,
        SegmentKind::Proposal {
            id: CandidateId::nth(5)
        }
    );
    let origin = span.origin.expect("copied from the file");
    assert_eq!(origin.file, h.file);
    let file = &SAMPLE.files[origin.file];
    assert_eq!(file.line_of(origin.span.start as usize) + 1, 97);
    assert_eq!(explained_fraction(&spans), 1.0);
}

#[test]
fn invented_text_is_unexplained() {
    let (h, prompt) = post_lines_prompt();
    let completion = "orderRepository.qzxvjk()";
    let spans = explain(&prompt, completion);
    check(&prompt, completion, &spans);
    assert_eq!(spans.len(), 2, "{spans:?}");
    // The copy nearest the hole wins: the very end of the code before it.
    let end = prompt.text().len();
    assert_eq!(spans[0].prompt, Some(end - 16..end));
    assert_eq!(spans[0].segment, Some(prompt.segments.len() - 1));
    let origin = spans[0].origin.unwrap();
    assert_eq!(
        (origin.file, origin.span.range()),
        (h.file, h.offset - 16..h.offset)
    );
    assert_eq!(spans[1].completion, 16..completion.len());
    assert_eq!(spans[1].prompt, None);
    assert_eq!(explained_fraction(&spans), 16.0 / 24.0);

    let invented = explain(&prompt, "qzxv ∂ qzxv");
    assert_eq!(invented.len(), 1);
    assert_eq!(invented[0].prompt, None);
    assert_eq!(explained_fraction(&invented), 0.0);
    assert_eq!(explained_fraction(&explain(&prompt, "")), 0.0);
}

#[test]
fn a_copy_across_segments_is_split_at_their_boundaries() {
    let (_, prompt) = post_lines_prompt();
    let text = prompt.text();
    let proposal_len = prompt.segments[0].text.text.len();
    let completion = &text[proposal_len - 20..proposal_len + 21];
    let spans = explain(&prompt, completion);
    check(&prompt, completion, &spans);
    let segments: Vec<Option<usize>> = spans.iter().map(|s| s.segment).collect();
    assert_eq!(segments, [Some(0), Some(1), Some(2)], "{spans:?}");
    assert_eq!(spans[1].origin, None, "the separator comes from no file");
}

#[test]
fn identifier_lists_attribute_each_identifier_to_its_file() {
    let h = hole("service/OrderService.java:94:32");
    let (_, prompt) = proposal(&h, 1, 4072);
    let ids = &prompt.segments[0].text.text;
    let completion = &ids[..ids.len().min(60)];
    let spans = explain(&prompt, completion);
    check(&prompt, completion, &spans);
    assert!(spans.iter().any(|s| s.origin.is_some()));
    assert!(
        spans
            .iter()
            .any(|s| s.prompt.is_some() && s.origin.is_none())
    );
    assert_eq!(explained_fraction(&spans), 1.0);
}
