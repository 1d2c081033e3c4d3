//! Any bytes as a GGUF model file (metadata, tensor headers, then the weights they describe):
//! no panic, no allocation beyond what the file justifies, one-line errors.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_gguf(data));
