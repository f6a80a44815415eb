//! The subcommands of `tessera`, one module each; what they share lives beside this folder:
//! the placement options, the options of `lu` and `spmv` and the LU's report (which their
//! simulation reads and prints too), the Gantt chart.

pub mod calibrate;
pub mod cholesky;
pub mod gpu_check;
pub mod lu;
pub mod lu_kernels;
pub mod overhead;
pub mod overhead_mpi;
pub mod perfmodel;
pub mod platform;
pub mod spmv;
pub mod taskbench;
pub mod topology;
pub mod trace;
