//! Arbitrary bytes as a repository file (held in memory) and a hole in it: every candidate,
//! proposals and retrieved ones, composes into a prompt that keeps its promises.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_compose(data));
