//! The `tessera` command line's subcommands and the benchmarks' shared code.

pub mod lu_cmd;
pub mod overhead;
