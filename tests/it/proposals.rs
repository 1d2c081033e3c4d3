//! RLPG's prompt proposals on the sample repository: every source and every context type, with
//! exact expected text.

use crate::common;
use keyhole::{
    testing::candidate, testing::candidate::ContextType, testing::candidate::PromptSource,
};

use common::{SAMPLE, hole, proposal, proposal_text, ranked_names};

#[test]
fn table_seven_ids_sources_and_types() {
    let all = candidate::proposal_specs();
    assert_eq!(all.len(), 62);
    let row = |id: usize| (all[id].source, all[id].context_type, all[id].share);
    assert_eq!(
        row(0),
        (PromptSource::Current, ContextType::MethodNames, 0.5)
    );
    assert_eq!(
        row(4),
        (PromptSource::Current, ContextType::FieldDeclarations, 0.5)
    );
    assert_eq!(
        row(5),
        (PromptSource::Current, ContextType::PostLines, 0.25)
    );
    assert_eq!(
        row(7),
        (PromptSource::Current, ContextType::PostLines, 0.75)
    );
    assert_eq!(
        row(8),
        (
            PromptSource::ParentClass,
            ContextType::MethodNamesAndBodies,
            0.5
        )
    );
    assert_eq!(
        row(14),
        (PromptSource::Import, ContextType::MethodNamesAndBodies, 0.5)
    );
    assert_eq!(
        row(25),
        (PromptSource::Sibling, ContextType::FieldDeclarations, 0.5)
    );
    assert_eq!(
        row(30),
        (PromptSource::SimilarName, ContextType::StringLiterals, 0.5)
    );
    assert_eq!(
        row(33),
        (PromptSource::ChildClass, ContextType::MethodNames, 0.5)
    );
    assert_eq!(
        row(40),
        (PromptSource::ImportOfSibling, ContextType::Identifiers, 0.5)
    );
    assert_eq!(
        row(47),
        (
            PromptSource::ImportOfSimilarName,
            ContextType::TypeIdentifiers,
            0.5
        )
    );
    assert_eq!(
        row(50),
        (
            PromptSource::ImportOfParentClass,
            ContextType::MethodNamesAndBodies,
            0.5
        )
    );
    assert_eq!(
        row(61),
        (
            PromptSource::ImportOfChildClass,
            ContextType::FieldDeclarations,
            0.5
        )
    );
    assert!(all.iter().enumerate().all(|(i, s)| s.id == i));
}

#[test]
fn current_post_lines_are_the_lines_after_the_hole_line() {
    let h = hole("service/OrderService.java:94:32");
    let text = proposal_text(&h, 5, 4072);
    assert!(text.starts_with("    }\n\n    public Map<OrderStatus, Long> statusReport() {\n"));
    assert!(text.ends_with("\"Customer\", customerId);\n    }\n}\n"));
    assert!(
        !text.contains("findByCustomerId"),
        "the hole line itself is not a post line"
    );
    // At a budget of 40, post lines get 10 tokens (25%) and keep the lines nearest the hole.
    assert_eq!(
        proposal_text(&h, 5, 40),
        "    }\n\n    public Map<OrderStatus"
    );
}

#[test]
fn current_items_come_from_after_the_hole_line() {
    let h = hole("service/OrderService.java:94:32");
    assert_eq!(
        proposal_text(&h, 0, 4072),
        "public Map<OrderStatus, Long> statusReport() private void transition(Order order, OrderStatus next) \
         private Order loadOrder(Long orderId) private Customer loadCustomer(Long customerId)"
    );
    assert_eq!(
        proposal_text(&h, 2, 24),
        "Map OrderStatus Long Order OrderStatus Order "
    );
    assert_eq!(
        proposal_text(&h, 3, 4072),
        "\"Order \" \" is \" \"Order\" \"Customer\""
    );
    assert_eq!(
        proposal_text(&h, 1, 16),
        "statusReport orderRepository countByStatus transition "
    );
}

#[test]
fn current_items_fall_back_to_before_the_hole_keeping_the_nearest() {
    // No field is declared after line 94 of OrderService, so the fields before it are used.
    let h = hole("service/OrderService.java:94:32");
    let fields = proposal_text(&h, 4, 4072);
    assert!(
        fields.starts_with("public static final String SUBJECT_CONFIRMED"),
        "{fields}"
    );
    assert!(
        fields.ends_with("private final OrderValidator validator = new OrderValidator();"),
        "{fields}"
    );
    // Cut to 5 tokens (budget 10), the fields nearest the hole are kept.
    assert_eq!(proposal_text(&h, 4, 10), " OrderValidator();");
}

#[test]
fn parent_class_is_labelled_and_names_the_current_class() {
    let h = hole("repository/OrderRepository.java:30:34");
    let mn = proposal_text(&h, 9, 4072);
    assert!(
        mn.starts_with(
            "[AbstractRepository] protected abstract String entityName(); public T save(T item)"
        ),
        "{mn}"
    );
    assert!(mn.contains("protected List<T> findWhere(Predicate<T> condition)"));
    assert!(mn.ends_with("protected long countWhere(Predicate<T> condition)\n[OrderRepository]"));
    // Parent class keeps its beginning when cut (B.3).
    let (_, prompt) = proposal(&h, 9, 40);
    assert_eq!(
        prompt.segments[0].text.text,
        "[AbstractRepository] protected abstract String entityName(); public T save"
    );
}

#[test]
fn method_bodies_are_prefixed_with_the_method_name() {
    let h = hole("repository/OrderRepository.java:30:34");
    let mnb = proposal_text(&h, 8, 4072);
    assert!(mnb.starts_with("[AbstractRepository] [entityName] protected abstract String entityName(); [save] public T save(T item) {\n"));
    assert!(mnb.contains("[findWhere] protected List<T> findWhere(Predicate<T> condition) {\n"));
}

#[test]
fn no_parent_means_no_parent_proposals() {
    let h = hole("util/IdGenerator.java:20:10");
    for id in 8..=13 {
        let (context, _) = proposal(&h, id, 4072);
        assert!(!context.applicable(), "proposal {id}");
    }
}

#[test]
fn imports_rank_by_nearest_usage_to_the_hole() {
    let h = hole("service/OrderService.java:94:32");
    let ranked = ranked_names(&h, 15);
    assert_eq!(
        ranked[0], "Order",
        "List<Order> is used on the line above the hole"
    );
    assert!(ranked.contains(&"OrderRepository".to_string()));
    assert!(
        ranked.contains(&"OrderValidator".to_string()),
        "same-package reference"
    );
    assert!(!ranked.contains(&"OrderService".to_string()));
}

#[test]
fn multi_file_context_puts_the_best_file_last_and_cuts_the_worst_first() {
    let h = hole("service/OrderService.java:94:32");
    let full = proposal_text(&h, 15, 8000);
    assert!(full.contains("[Order] public static Builder builder(Long customerId)"));
    let last_label = full
        .rfind("] ")
        .map(|i| &full[..i])
        .and_then(|s| s.rfind('['))
        .unwrap();
    assert!(
        full[last_label..].starts_with("[Order] "),
        "best-ranked file sits nearest the code"
    );
    assert!(full.ends_with("\n[OrderService]"));
    // Each file is first cut to the allocation from its end, then the whole from its start:
    // what survives a small budget is the beginning of the best file's context.
    let small = proposal_text(&h, 15, 60);
    assert_eq!(
        small,
        "public static Builder builder(Long customerId) public Long getCustomerId() public List<OrderLine\n[OrderService]"
    );
}

#[test]
fn siblings_are_the_other_files_of_the_directory() {
    let h = hole("service/OrderService.java:94:32");
    let mut ranked = ranked_names(&h, 21);
    ranked.sort();
    assert_eq!(
        ranked,
        [
            "BaseService",
            "CustomerService",
            "EmailNotifier",
            "Notifier",
            "OrderValidator",
            "ProductService",
            "ServiceException",
            "SmsNotifier"
        ]
    );
    let fd = proposal_text(&h, 25, 4072);
    assert!(fd.contains("[EmailNotifier] "), "{fd}");
}

#[test]
fn similar_names_share_a_name_part() {
    let h = hole("service/OrderService.java:94:32");
    let mut ranked = ranked_names(&h, 27);
    ranked.sort();
    assert_eq!(
        ranked,
        [
            "BaseService",
            "CustomerService",
            "Order",
            "OrderController",
            "OrderLine",
            "OrderRepository",
            "OrderStatus",
            "OrderValidator",
            "ProductService",
            "ServiceException"
        ]
    );
    let sl = proposal_text(&h, 30, 4072);
    assert!(sl.contains("[OrderStatus] \"new\" \"paid\""), "{sl}");
}

#[test]
fn child_classes_of_the_current_file() {
    let h = hole("repository/AbstractRepository.java:35:30");
    let mut ranked = ranked_names(&h, 33);
    ranked.sort();
    assert_eq!(
        ranked,
        ["CustomerRepository", "OrderRepository", "ProductRepository"]
    );
    let mn = proposal_text(&h, 33, 4072);
    assert!(mn.contains("[OrderRepository] protected String entityName() public List<Order> findByCustomerId(Long customerId)"), "{mn}");
    assert!(mn.ends_with("\n[AbstractRepository]"));
}

#[test]
fn imports_of_related_files_rank_by_frequency_and_never_include_the_current_file() {
    let h = hole("repository/OrderRepository.java:30:34");
    let of_parent = ranked_names(&h, 51);
    assert_eq!(of_parent, ["Entity", "Repository", "IdGenerator"]);
    let of_sibling = ranked_names(&h, 39);
    assert_eq!(
        of_sibling[0], "AbstractRepository",
        "every sibling extends it"
    );
    assert!(!of_sibling.contains(&"OrderRepository".to_string()));
    let of_children = ranked_names(&hole("model/Entity.java:33:16"), 57);
    assert!(
        of_children.contains(&"Money".to_string()),
        "{of_children:?}"
    );
    let of_similar = ranked_names(&h, 45);
    assert!(!of_similar.is_empty());
}

#[test]
fn every_context_type_yields_its_kind_of_item() {
    let h = hole("web/OrderController.java:33:40");
    let ti = proposal_text(&h, 23, 4072);
    assert!(ti.contains("[ApiKeys] String String"), "{ti}");
    let fd = proposal_text(&h, 25, 4072);
    assert!(
        fd.contains("public static final String PARAM_CUSTOMER_ID = \"customerId\";"),
        "{fd}"
    );
    let i = proposal_text(&h, 22, 4072);
    assert!(i.contains("PARAM_CUSTOMER_ID"), "{i}");
}

#[test]
fn duplicates_are_flagged_both_ways() {
    let dup: Vec<&str> = SAMPLE
        .files
        .iter()
        .zip(&keyhole::testing::repo::graph(&SAMPLE).duplicated)
        .filter(|(_, d)| **d)
        .map(|(f, _)| f.path.as_str())
        .collect();
    assert_eq!(
        dup,
        [
            "src/main/java/com/acme/shop/legacy/TextUtil.java",
            "src/main/java/com/acme/shop/util/TextUtil.java"
        ]
    );
}
