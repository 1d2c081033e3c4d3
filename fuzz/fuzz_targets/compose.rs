//! Arbitrary bytes as a repository file and a hole in it: every proposal composes into a
//! prompt that keeps its promises (`Prompt::validate`).
#![no_main]

#[path = "../../tests/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_compose(data));
