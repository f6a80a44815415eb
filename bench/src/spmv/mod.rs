//! The SpMV and solver runs' shared parts: [`plan`] (checks and sizing) and [`report`]
//! (the printed lines), used by the one-process run (`cmd::spmv`) and the distributed one
//! (`cmd::spmv_dist`), which import them and not each other.

pub mod plan;
pub mod report;
