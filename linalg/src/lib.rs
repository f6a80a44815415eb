//! Tessera's algorithms as task graphs: tiled layouts, LU, SpMV, generators and numerical checks.

pub mod balance;
pub mod hpl;
pub mod lu;
pub mod solver;
pub mod sparse;
pub mod spmv;
pub mod spmv_dist;
pub mod tiled;
