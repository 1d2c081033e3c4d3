//! The `keyhole` command line: `keyhole::cli`, in the library so that it can use the library's
//! crate-private parts.

/// mimalloc rather than the system allocator: opening a repository (its cached index, search
/// indexes and model) makes millions of small allocations, which glibc's allocator serves
/// markedly slower.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keyhole::cli::main()
}
