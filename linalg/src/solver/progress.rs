//! What a CG run's tasks share besides vectors: the scalars its reductions compute for the
//! next phase, whether it has stopped (and why), its history, and the time split. The
//! reductions write, the phases' tasks read; every access is ordered by the tasks'
//! dependencies (the same chain that orders the vectors, see [`super::vector`]), and the
//! submitting thread reads only after waiting for the task that wrote.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::StopReason;
use crate::spmv::IterStats;

/// A scalar written by one task and read by tasks that go after it.
#[derive(Default)]
pub(crate) struct Scalar(AtomicU64);

impl Scalar {
    pub(crate) fn get(&self) -> f64 {
        // Relaxed: the reader goes after the writer (a task dependency orders the two).
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
}

/// Which line of the report an interval of an iteration goes to.
#[derive(Clone, Copy)]
pub(crate) enum Part {
    Spmv,
    Vector,
    Reduce,
}

/// A run's state behind its lock (reductions and joins only: one at a time, in order).
pub(crate) struct State {
    pub(crate) stats: IterStats,
    /// Why it stopped: `Err` holds a breakdown's message.
    pub(crate) stop: Option<Result<StopReason, String>>,
    /// The end of the last interval accounted.
    mark: Instant,
}

impl State {
    /// Account the time since the last mark to `part`.
    pub(crate) fn account(&mut self, part: Part) {
        let now = Instant::now();
        let s = (now - self.mark).as_secs_f64();
        self.mark = now;
        match part {
            Part::Spmv => self.stats.spmv_seconds += s,
            Part::Vector => self.stats.vector_seconds += s,
            Part::Reduce => self.stats.reduce_seconds += s,
        }
    }

    /// Move `halo` seconds accounted to the SpMV to the halo wait.
    pub(crate) fn halo_wait(&mut self, halo: f64) {
        let halo = halo.min(self.stats.spmv_seconds);
        self.stats.spmv_seconds -= halo;
        self.stats.halo_seconds += halo;
    }
}

/// The state of one run, shared by its tasks (see the module doc).
pub(crate) struct Progress {
    /// Set once the run stopped: the tasks submitted ahead do nothing.
    pub(crate) stopped: Arc<AtomicBool>,
    /// The number of the convergence test at or before which it stopped (`usize::MAX`
    /// while it runs): what the submitting thread decides on, since by the time it looks,
    /// tasks of the iteration submitted ahead may have stopped the run too, and which test
    /// the submitting thread waited for must not depend on timing (across ranks, every
    /// rank must submit the same tasks).
    stopped_at: AtomicUsize,
    state: Mutex<State>,
}

impl Progress {
    pub(crate) fn new(t0: Instant) -> Arc<Progress> {
        Arc::new(Progress {
            stopped: Arc::default(),
            stopped_at: AtomicUsize::new(usize::MAX),
            state: Mutex::new(State {
                stats: IterStats::default(),
                stop: None,
                mark: t0,
            }),
        })
    }

    /// Whether the run stopped (a task submitted ahead then does nothing).
    pub(crate) fn is_stopped(&self) -> bool {
        // Relaxed: set by a task this one goes after (see `Scalar::get`); the submitting
        // thread reads it after waiting for that task.
        self.stopped.load(Ordering::Relaxed)
    }

    /// Stop for `why`, at or before convergence test number `at`.
    pub(crate) fn stop(&self, st: &mut State, why: Result<StopReason, String>, at: usize) {
        debug_assert!(st.stop.is_none(), "stopped twice");
        st.stop = Some(why);
        self.stopped_at.store(at, Ordering::Relaxed);
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether the run stopped at or before convergence test number `at` (read after
    /// waiting for that test's task: the same answer on every rank, whatever ran since).
    pub(crate) fn stopped_by(&self, at: usize) -> bool {
        self.stopped_at.load(Ordering::Relaxed) <= at
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking reduction fails its task (and the run); the state is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
