//! Tessera's devices and transports: the host CPU (topology, thread binding,
//! worker placement) today; sim, cuda and mpi backends to come.
//!
//! Feature `hwloc` reads the topology, binds threads and allocates
//! NUMA-bound memory through hwloc (system packages `libhwloc-dev` and
//! `libudev-dev`); without it, Linux's sysfs and `sched_setaffinity` do.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cpu;
pub mod sim;
