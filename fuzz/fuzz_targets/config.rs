//! Any text as backends.toml, keymap.toml and theme.toml: no panic, one-line errors.
#![no_main]

#[path = "../../tests/it/reliability_support/fuzz_checks.rs"]
mod fuzz_checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::check_config(data));
