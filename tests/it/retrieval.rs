//! RLPG's retrieval baselines on the sample repository.

use crate::common;

use common::{SAMPLE, hole};
use keyhole::Hole;
use keyhole::SourcedText;
use keyhole::TokenizerKind;
use keyhole::testing::context::HoleRequest;
use keyhole::{testing::context::retrieval::Retrieval, testing::context::retrieval::hole_window};

fn request(h: &Hole, allocation: usize, seed: u64) -> HoleRequest<'_> {
    HoleRequest {
        index: &SAMPLE,
        hole: h,
        tokenizer: TokenizerKind::Code.tokenizer(),
        allocation,
        seed,
        fidelity: keyhole::Fidelity::Paper,
    }
}

fn files(text: &SourcedText) -> Vec<&str> {
    text.files()
        .into_iter()
        .map(|f| SAMPLE.files[f].stem())
        .collect()
}

#[test]
fn the_hole_window_is_two_lines_around_the_hole_without_the_target() {
    let h = hole("service/OrderService.java:94:32");
    let window = hole_window(&SAMPLE, &h);
    assert!(
        window.starts_with("\n    public List<Order> findOrdersForCustomer"),
        "{window}"
    );
    assert!(window.contains("        return orderRepository.\n    }\n"));
    assert!(!window.contains("findByCustomerId"));
}

#[test]
fn file_level_bm25_takes_similar_files_first_and_never_the_current_one() {
    let h = hole("service/OrderService.java:94:32");
    let text = Retrieval::new(&SAMPLE).file_bm25(&request(&h, 2000, 9));
    let used = files(&text);
    assert!(!used.contains(&"OrderService"));
    assert!(
        ["OrderRepository", "OrderController", "CustomerService"].contains(&used[0]),
        "{used:?}"
    );
    assert!(TokenizerKind::Code.tokenizer().count(&text.text) <= 2000);
}

#[test]
fn identifier_usage_windows_surround_uses_of_the_nearest_identifier() {
    // The identifier nearest before the hole is `orderRepository`.
    let h = hole("service/OrderService.java:94:32");
    let text = Retrieval::new(&SAMPLE).identifier_usage(&request(&h, 4000, 9));
    assert!(
        text.text.matches("orderRepository").count() >= 3,
        "{}",
        text.text
    );
    assert!(
        !text.text.contains("findByCustomerId(customerId);"),
        "the hole's own lines are left out"
    );
    let again = Retrieval::new(&SAMPLE).identifier_usage(&request(&h, 4000, 9));
    assert_eq!(text, again, "random order, but seeded");
}

#[test]
fn random_context_is_seeded_and_avoids_the_hole() {
    let h = hole("service/OrderService.java:94:32");
    let retrieval = Retrieval::new(&SAMPLE);
    let draws: Vec<SourcedText> = (0..8)
        .map(|seed| retrieval.random_context(&request(&h, 300, seed)))
        .collect();
    assert_eq!(draws[3], retrieval.random_context(&request(&h, 300, 3)));
    assert!(
        draws.iter().any(|d| d != &draws[0]),
        "different seeds draw differently"
    );
    assert!(
        draws
            .iter()
            .all(|d| !d.text.contains("findByCustomerId(customerId);"))
    );
}
