//! The SpMV and solver runs: [`plan`] (checks and sizing), [`report`] (the printed
//! lines), [`run`] (one process) and [`dist`] (the ranks of mpirun). `cmd::spmv` only
//! dispatches to them; the runners import [`plan`] and [`report`] and not each other.

pub mod dist;
pub mod plan;
pub mod report;
pub mod run;
