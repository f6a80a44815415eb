//! Task Bench (Slaughter et al., SC20) in Tessera: its task graphs
//! ([`graph`], their dependence lists computed once in [`deps`]), kernels
//! ([`kernel`]) and command line ([`app`]), run as
//! Tessera tasks, submitted one by one ([`run`]) or described by their
//! dependence functions ([`symbolic`]), and reported with Task Bench's output lines
//! ([`report`]), so that `tessera taskbench` compares line for line with
//! Task Bench's own implementations (MPI, OpenMP, StarPU, ...) run with the
//! same flags (`bench/peers/taskbench.sh`).

pub mod app;
pub mod deps;
pub mod graph;
pub mod kernel;
pub mod random;
pub mod report;
pub mod run;
pub mod symbolic;
