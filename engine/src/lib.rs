//! Tessera's runtime: data handles, task graphs, scheduling policies, workers and traces.
//!
//! Programs register data ([`Runtime::register`]), submit tasks that declare
//! how they access it ([`Runtime::task`] with a typed access list such as
//! `(a.r(), b.rw())`, or the dynamic [`TaskBuilder`]), and wait. Dependencies follow from
//! submission order and access modes (sequential task flow); ready tasks run
//! on the runtime's workers (CPU worker threads, one device worker per
//! accelerator, or virtual workers in simulated time) under a
//! [`SchedulerPolicy`](sched::SchedulerPolicy), and across processes each
//! rank runs its share ([`dist`]).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod access;
mod clock;
mod codelet;
mod data;
pub mod device;
pub mod dist;
mod error;
mod file_error;
pub mod fmt;
pub mod graph;
pub mod memory;
pub mod perfmodel;
mod preds;
mod recorder;
mod runtime;
pub mod sched;
pub mod simulate;
mod sleep;
mod stf;
pub mod symbolic;
mod sync;
mod task;
pub mod trace;
mod util;
mod worker;

pub use access::{AccessMode, Accesses, DeviceAccesses, Dynamic, Read, ReadWrite, Write};
pub use codelet::Codelet;
pub use data::DataHandle;
pub use error::{AccessError, BodyError, Error, RunError, TaskFailure, TaskInfo};
pub use file_error::{FileError, FileErrorKind};
pub use graph::{TaskGraph, Vertex};
pub use runtime::{Config, Registrar, Runtime, Submitter, WorkerHook};
pub use sched::Scheduler;
pub use task::{Bound, Task, TaskBuilder, TaskContext, TaskHandle, Unbound};
