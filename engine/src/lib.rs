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
//!
//! # A first DAG
//!
//! A [`Codelet`] is a kernel declared once: its name (which keys traces and
//! perf models), its bodies, its flop model. A task names the codelet, its
//! data as a typed access list, and its arguments. Here four `axpy` tasks
//! update the tiles of `y` independently, and a `sum` that reads every tile
//! waits for all four:
//!
//! ```
//! use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime, Scheduler, Write};
//!
//! let rt = Runtime::new(Config::with_workers(2).scheduler(Scheduler::Prio).trace(true))?;
//! let axpy = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>), f64>::with_args("axpy")
//!     .flops(|_| 2.0 * 256.0)
//!     .cpu(|_ctx, &a, (x, y)| {                 // (&Vec<f64>, &mut Vec<f64>)
//!         y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
//!         Ok(())
//!     });
//! let sum = Codelet::<(Vec<Read<Vec<f64>>>, Write<f64>)>::new("sum")
//!     .cpu(|_, _, (tiles, total)| {             // (Vec<&Vec<f64>>, &mut f64)
//!         *total = tiles.iter().map(|t| t.iter().sum::<f64>()).sum();
//!         Ok(())
//!     });
//!
//! let x: Vec<_> = (0..4).map(|_| rt.register(vec![1.0; 256])).collect();
//! let y: Vec<_> = (0..4).map(|_| rt.register(vec![0.0; 256])).collect();
//! let total = rt.register(0.0);
//! for (x, y) in x.iter().zip(&y) {
//!     rt.task(&axpy, (x.r(), y.rw())).args(3.0).priority(1).submit()?;
//! }
//! rt.task(&sum, (y.iter().map(|t| t.r()).collect(), total.w())).submit()?;
//! rt.wait_all()?;                               // a failed task is an Err naming it
//! assert_eq!(rt.unregister(total)?, 3.0 * 1024.0);
//!
//! // The timeline, as Chrome trace JSON (Perfetto, `tessera trace summary`).
//! let path = std::env::temp_dir().join(format!("tessera-doc-{}.json", std::process::id()));
//! tessera_engine::trace::save(&rt.trace(), &path, &Default::default())?;
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! More, runnable from the repository root: `cargo run --example NAME` for
//! `readme_dag`, `cholesky` (tiled, typed), `dynamic` (a graph shaped at
//! run time), `simulate` (a prediction from Rust) and `two_ranks` (under
//! `mpirun`, with `--features mpi`).
//!
//! # The main types
//!
//! - [`Runtime`], built from a [`Config`] (workers, [`Scheduler`], devices,
//!   tracing, calibration, simulated time): registers data, takes tasks,
//!   waits. [`Submitter`] and [`Registrar`] reach it from task bodies.
//! - [`DataHandle`]: registered data; `h.r()`, `h.w()`, `h.rw()` declare
//!   accesses ([`Read`], [`Write`], [`ReadWrite`], tuples and `Vec`s of
//!   them), from which dependencies are inferred (sequential task flow).
//! - [`Codelet`], [`Task`] (typed: the body gets the borrows declared) and
//!   [`TaskBuilder`] (dynamic: accesses checked when the body runs);
//!   [`TaskHandle`] to wait for one task.
//! - [`symbolic::TaskClasses`]: a DAG described by rules (roots,
//!   successors, a task per key) and unfolded as it runs, for graphs too
//!   large to submit whole.
//! - [`device::Device`]: an accelerator behind one trait (memory node,
//!   link, bodies by device type); the backends are in `tessera-backends`.
//! - [`dist`]: one DAG across processes; [`dist::stf::DistRuntime`] runs
//!   ordinary submission on many ranks, [`dist::symbolic`] the rule-based
//!   DAGs; the transport is [`dist::local`] (threads) or MPI. A program
//!   written against [`dist::Submit`] runs unchanged in one process (on a
//!   [`Runtime`]) and on many (on a `DistRuntime`).
//! - [`simulate::Simulation`] over a [`simulate::Platform`]: the same
//!   program predicted on a described machine, in virtual time.
//! - [`perfmodel::PerfModels`] (measured task times), [`trace::Trace`]
//!   (timelines, saved with [`trace::save`]), [`Error`] (every failure
//!   names the task or the data).
//!
//! # Features and other crates
//!
//! This crate has no optional features. MPI, GPUs and NUMA binding live in
//! `tessera-backends`, behind its features `mpi` (the MPI transport,
//! `tessera_backends::mpi`: Open MPI's `libopenmpi-dev openmpi-bin
//! libclang-dev`), `cuda` (cudarc, loaded at run time) and `hwloc`. The
//! `tessera` binary (`tessera-bench`) forwards `mpi` and `cuda`:
//! `cargo build --features mpi`.
//!
//! # How it works
//!
//! Each tricky protocol has a README beside its code, with its states,
//! steps and why it cannot deadlock or lose an update:
//! `engine/src/sleep/README.md` (how idle workers sleep and are woken),
//! `engine/src/data/README.md` (coherence of replicas across memory nodes),
//! `engine/src/dist/README.md` (messages between ranks: channels, layout,
//! ordering, termination), `engine/src/simulate/README.md` (the
//! discrete-event loop and its models).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod access;
mod clock;
mod codelet;
mod counter;
mod data;
pub mod device;
pub mod dist;
mod error;
mod file_error;
pub mod fmt;
pub mod graph;
pub mod light;
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
pub mod team;
pub mod trace;
pub mod util;
mod watch;
mod worker;

pub use access::{AccessMode, Accesses, DeviceAccesses, Dynamic, Read, ReadWrite, Write};
pub use codelet::Codelet;
pub use data::DataHandle;
pub use error::{AccessError, BodyError, Error, RunError, TaskFailure, TaskInfo};
pub use file_error::{FileError, FileErrorKind};
pub use graph::{TaskGraph, Vertex};
pub use runtime::{
    interrupt_all, worker_cap, Config, Registrar, Runtime, Submitter, WorkerHook,
    DEFAULT_SUBMIT_WINDOW, MIN_WORKER_CAP,
};
pub use sched::Scheduler;
pub use task::{Bound, OnSubmit, Rendezvous, Task, TaskBuilder, TaskContext, TaskHandle, Unbound};
