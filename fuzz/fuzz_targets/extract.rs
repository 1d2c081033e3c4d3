//! Arbitrary bytes as Java source: extraction never panics and its facts stay inside the text.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_extract(data));
