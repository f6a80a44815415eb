//! Splitting one divisible kernel (SpMV rows, a GEMM row block) between unlike workers:
//! the Roadrunner balancer and the TianHe-1 adaptive splitter.
//!
//! Two algorithms from the seed papers, both pure (no engine types, no clocks):
//!
//! - [`Balancer`] (seed 001, Roadrunner): the host/device row split of an
//!   iterative kernel, found online from the times of the previous iterations
//!   (peak ratio, then measured rates, then trial and error); it drives
//!   `spmv::balanced_power_iteration`.
//! - [`AdaptiveSplitter`] (seed 003, TianHe-1): each worker class's share of a
//!   task, learnt from measured GFLOP/s per workload size; it drives the LU's
//!   host/device split of each step's trailing update (`tessera lu --split
//!   adaptive`, [`Split::Adaptive`](crate::lu::Split::Adaptive)).
//!
//! [`partition`] turns shares into whole item counts. Each module's docs say
//! where it departs from its paper, and why.

mod adaptive;
mod roadrunner;
mod shares;

pub use adaptive::AdaptiveSplitter;
pub use roadrunner::{Balancer, BalancerConfig, IterationTimes, LogEntry, RateBasis, State};
pub use shares::partition;
