//! A streamed answer (SSE or NDJSON) of each protocol, cut into chunks anywhere: no panic,
//! and the texts read do not depend on where the chunks were cut.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_stream(data));
