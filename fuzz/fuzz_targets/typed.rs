//! Arbitrary text and a byte position in it through the typed-hole analysis (the placeholder
//! probe, the expected type, scope and outline): no panic, and every span it reports lies
//! inside the text on character boundaries.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_typed(data));
