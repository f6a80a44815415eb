//! Interrupting runs (Ctrl-C): one runtime ([`Runtime::interrupt`]) or
//! every runtime of the process ([`interrupt_all`]).
//!
//! Invariants kept here:
//! - An interrupt cannot be undone: both flags are only ever set.
//! - Setting one is a single relaxed atomic store (async-signal-safe); the
//!   flags are polled per task, so a task popped just before one is seen
//!   simply runs.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Runtime, Shared};

/// Why tasks are cancelled or refused after `Runtime::interrupt`.
/// Set by [`interrupt_all`]; read with each runtime's own flag.
static ALL_INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Interrupt every runtime of this process, those running and those yet to
/// be made, simulated ones included, as [`Runtime::interrupt`] does one: a
/// driver's first Ctrl-C stops whatever it runs, however many runtimes it
/// makes (issue 28: `calibrate`, `overhead`, `lu-kernels` and `--simulate`
/// ran to the end). Only an atomic store, so async-signal-safe: a SIGINT
/// handler may call it. It cannot be undone.
pub fn interrupt_all() {
    // Relaxed: a flag polled per task, as `Runtime::interrupt`'s.
    ALL_INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Whether [`interrupt_all`] was called.
pub(crate) fn all_interrupted() -> bool {
    ALL_INTERRUPTED.load(Ordering::Relaxed)
}

impl Shared {
    /// Whether this runtime was interrupted, alone or with all the others.
    pub(crate) fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed) || all_interrupted()
    }
}

/// Tells whether a runtime was interrupted, for code that runs many pieces
/// of work inside one task and must stop between them (`light`'s members).
#[derive(Clone)]
pub(crate) struct InterruptFlag(std::sync::Arc<Shared>);

impl InterruptFlag {
    /// Whether the runtime was interrupted (two relaxed loads).
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_interrupted()
    }
}

impl Runtime {
    /// This runtime's [`InterruptFlag`].
    pub(crate) fn interrupt_flag(&self) -> InterruptFlag {
        InterruptFlag(std::sync::Arc::clone(&self.shared))
    }
}

pub(crate) const INTERRUPTED: &str = "interrupted (Runtime::interrupt, e.g. Ctrl-C)";
impl Runtime {
    /// Stop the run soon, cleanly (for Ctrl-C): bodies already running
    /// finish; every task not started yet completes as cancelled
    /// ("interrupted") when a worker pops it, and later submissions fail. So
    /// waits return promptly with an error, the data stays consistent (a
    /// cancelled task never touched it), and the trace holds what ran.
    /// Callable from any thread, any number of times; it cannot be undone.
    pub fn interrupt(&self) {
        // Relaxed: a flag polled per task; a task popped just before it is
        // seen simply runs.
        self.shared.interrupted.store(true, Ordering::Relaxed);
    }

    /// Whether [`interrupt`](Self::interrupt) was called.
    pub fn is_interrupted(&self) -> bool {
        self.shared.is_interrupted()
    }
}
