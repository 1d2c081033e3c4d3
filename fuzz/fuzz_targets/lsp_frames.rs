//! Any bytes as what a language server writes: headers, `Content-Length`, bodies. No panic,
//! one-line errors, the same messages whatever pieces the bytes arrive in.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_lsp_frames(data));
