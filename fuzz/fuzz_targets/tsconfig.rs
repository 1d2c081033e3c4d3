//! Any bytes as a TypeScript project's configurations (tsconfig.json and what it extends):
//! indexing ends without a panic, one-line warnings, imports reach repository files.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_tsconfig(data));
