//! The `keyhole` command line.

mod cli;

/// mimalloc rather than the system allocator: opening a repository (its cached index, search
/// indexes and model) makes millions of small allocations, which glibc's allocator serves
/// markedly slower.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    report_panics_without_user_text();
    cli::main()
}

/// A panic is a bug in keyhole: say where, in one line, but not the message when it is not the
/// program's own words: a formatted message may quote what keyhole was reading (a slice error
/// quotes the string, which may be a plugin's prompt or a file's contents).
/// `RUST_BACKTRACE=1` adds the backtrace, which holds no text from outside.
fn report_panics_without_user_text() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map_or_else(|| "an unknown place".to_string(), ToString::to_string);
        let said = keyhole::escape::panic_message(info.payload());
        let mut line =
            format!("keyhole: internal error at {at} ({said}); this is a bug in keyhole\n");
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            line.push_str(&std::backtrace::Backtrace::force_capture().to_string());
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }));
}
