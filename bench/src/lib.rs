//! The `tessera` command line's subcommands and the benchmarks' shared code.

pub mod overhead;
