//! The `tessera` command line's subcommands and the benchmarks' shared code.

pub mod gantt;
pub mod lu_cmd;
pub mod overhead;
pub mod placement;
pub mod spmv_cmd;
pub mod trace_cmd;
