//! The `tessera` command line: drivers (`lu`), benchmarks (`overhead`) and
//! trace tools (`trace`); all of it is in [`tessera_bench::cli`].

use std::process::ExitCode;

/// Large blocks in transparent huge pages (see [`tessera_bench::huge_pages`]).
#[global_allocator]
static ALLOC: tessera_bench::huge_pages::HugePages = tessera_bench::huge_pages::HugePages;

fn main() -> ExitCode {
    tessera_bench::huge_pages::from_env();
    ExitCode::from(tessera_bench::cli::main(std::env::args_os()))
}
