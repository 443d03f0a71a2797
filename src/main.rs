//! The `vole` binary: parses the command line and hands over to [`vole::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    vole::cli::main()
}
