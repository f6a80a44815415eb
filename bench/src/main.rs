//! The `tessera` command line: drivers (`lu`), benchmarks (`overhead`) and
//! trace tools (`trace`); all of it is in [`tessera_bench::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(tessera_bench::cli::main(std::env::args_os()))
}
