//! The `vole` binary: parses the command line and hands over to [`vole::cli`].

use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: every request allocates (hyper's
/// buffers, header maps, the request log line) on whichever worker thread
/// runs it, and a profile of warm site requests spent a fifth of its time
/// in glibc's allocator and its arena locks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    vole::cli::main()
}
