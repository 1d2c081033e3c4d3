//! The embedded model behaves like a language model that reads its prompt: context that holds
//! the answer turns a miss into an exact match, and it never sees the line being completed.

use crate::common;

use std::sync::LazyLock;

use common::{SAMPLE, hole, proposal};
use keyhole::Hole;
use keyhole::TokenizerKind;
use keyhole::testing::compose;
use keyhole::testing::model::ngram::EmbeddedModel;
use keyhole::{Backend, CompletionRequest};

static MODEL: LazyLock<EmbeddedModel> = LazyLock::new(|| EmbeddedModel::new(&SAMPLE));

fn request(hole: &Hole, prompt: String) -> CompletionRequest {
    let mut request = CompletionRequest::single_line(prompt);
    request.current_file = Some(SAMPLE.files[hole.file].path.clone());
    request
}

fn complete(hole: &Hole, id: Option<usize>) -> String {
    let prompt = match id {
        Some(id) => proposal(hole, id, 4072).1,
        None => compose::compose(
            &SAMPLE,
            hole,
            &keyhole::DefaultContext,
            TokenizerKind::Code.tokenizer(),
            4072,
        ),
    };
    MODEL.generate(&request(hole, prompt.text()), 0)
}

#[test]
fn context_with_the_answer_turns_a_miss_into_an_exact_match() {
    // BaseController.requireParam: `if (TextUtil.isBlank(value)) {`, and
    // TextUtil's method bodies (Import, MNB) show `isBlank(value)` in use.
    let h = hole("web/BaseController.java:24:24");
    assert_eq!(h.target.as_deref(), Some("Blank(value)) {"));
    let without = complete(&h, None);
    assert_ne!(
        without.trim_end(),
        "Blank(value)) {",
        "the default context alone misses"
    );
    assert_eq!(complete(&h, Some(14)), "Blank(value)) {");
}

#[test]
fn the_current_file_is_left_out_of_the_repository_statistics() {
    // A line that exists nowhere but in its own file: with the file left out the model cannot
    // produce it from an empty prompt; told nothing about the file, it recalls it.
    let h = hole("service/OrderService.java:94:32");
    let prompt = "        return orderRepository.find".to_string();
    let left_out = request(&h, prompt);
    let leaked = MODEL.generate(
        &CompletionRequest {
            current_file: None,
            ..left_out.clone()
        },
        0,
    );
    assert_eq!(leaked, "ByCustomerId(customerId);");
    assert_ne!(MODEL.generate(&left_out, 0), "ByCustomerId(customerId);");
}

#[test]
fn completions_stop_at_the_line_end_and_the_token_limit() {
    let h = hole("model/Entity.java:24:16");
    let mut req = request(&h, compose::default_context(&SAMPLE, &h).text);
    let line = MODEL.generate(&req, 0);
    assert!(!line.contains('\n'));
    req.max_tokens = 1;
    let one = MODEL.generate(&req, 0);
    assert!(
        line.starts_with(&one) && one.len() < line.len().max(2),
        "{one:?} vs {line:?}"
    );
}

#[tokio::test]
async fn sampling_is_seeded_and_gives_several_candidates() {
    let h = hole("service/OrderService.java:94:32");
    let mut req = request(&h, compose::default_context(&SAMPLE, &h).text);
    req.temperature = 1.0;
    req.n = 6;
    req.seed = Some(7);
    let texts = || async {
        let completions = MODEL.complete(&req, None).await.unwrap();
        completions
            .into_iter()
            .map(|c| c.text)
            .collect::<Vec<String>>()
    };
    let first = texts().await;
    let again = texts().await;
    assert_eq!(first.len(), 6);
    assert_eq!(first, again, "same seed, same samples");
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert!(
        distinct.len() > 1,
        "temperature gives different samples: {first:?}"
    );
}

#[test]
fn a_word_only_the_hole_line_holds_is_never_copied_from_it() {
    // The hole splits an identifier that exists nowhere but on its own line; the vocabulary
    // fallback for a partial word may only offer words the rest of the repository has.
    let sources = vec![
        (
            "p/Counter.java".to_string(),
            "package p;\n\nclass Counter {\n    int zqxCountOnlyHere = 0;\n}\n".to_string(),
        ),
        (
            "p/Other.java".to_string(),
            // Used after something the hole's line never has, so that only the vocabulary
            // fallback can offer it.
            "package p;\n\nclass Other {\n    void f() { zqxCountElsewhere(); }\n}\n".to_string(),
        ),
    ];
    let index = keyhole::RepoIndex::from_sources(std::path::Path::new("/leak"), sources);
    let model = EmbeddedModel::new(&index);
    let hole = Hole::at(&index, "p/Counter.java", 4, 15).unwrap();
    assert_eq!(hole.target.as_deref(), Some("ntOnlyHere = 0;"));
    let prompt = compose::compose(
        &index,
        &hole,
        &keyhole::DefaultContext,
        TokenizerKind::Code.tokenizer(),
        4072,
    );
    let mut request = CompletionRequest::single_line(prompt.text());
    request.current_file = Some("p/Counter.java".to_string());
    let completion = model.generate(&request, 0);
    assert!(
        !completion.starts_with("ntOnlyHere"),
        "copied the answer: {completion:?}"
    );
    assert!(
        completion.starts_with("ntElsewhere"),
        "the word from another file: {completion:?}"
    );
}
