//! The subcommands of `tessera`, one module each; the options they share (placement) and
//! the Gantt chart live beside this folder.

pub mod calibrate;
pub mod gpu_check;
pub mod lu;
pub mod lu_kernels;
pub mod overhead;
pub mod overhead_mpi;
pub mod perfmodel;
pub mod spmv;
pub mod spmv_dist;
pub mod topology;
pub mod trace;
