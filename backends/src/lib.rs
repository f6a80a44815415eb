//! Tessera's devices and transports: the host CPU (topology, thread binding,
//! worker placement), the emulated device, NVIDIA GPUs (feature `cuda`), and the
//! MPI transport of distributed runs (feature `mpi`).
//!
//! Feature `hwloc` reads the topology, binds threads and allocates
//! NUMA-bound memory through hwloc (system packages `libhwloc-dev` and
//! `libudev-dev`); without it, Linux's sysfs and `sched_setaffinity` do.
//!
//! Feature `cuda` adds the module `cuda`: GPUs through cudarc, loaded at
//! run time, so it builds with no CUDA installed and reports a missing
//! driver as an error. Feature `mpi` adds the module `mpi`.
//!
//! Each feature's items are marked with the feature they need on docs.rs
//! (which documents every feature); locally, `cargo doc -p tessera-backends
//! --features cuda,mpi,hwloc` shows them all.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cpu;
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub mod cuda;
pub mod emu;
#[cfg(feature = "mpi")]
#[cfg_attr(docsrs, doc(cfg(feature = "mpi")))]
pub mod mpi;
pub mod rows;
