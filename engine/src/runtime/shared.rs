//! The state a runtime's handle and workers share ([`Shared`]), and its
//! completion protocol: counting tasks in flight, recording failures, and
//! waking the threads that wait.
//!
//! Invariants kept here:
//! - `finished` never exceeds `submitted` read after it; in flight is their
//!   difference (`in_flight`). Both are per-thread sums
//!   (`crate::counter::Sharded`, SeqCst): a task's submission is added
//!   before it can run, so a finish seen is a submission seen, whichever
//!   shards the two went to.
//! - No lost wake-up for a task waiter: `finish_one` and `wait_until` both
//!   use SeqCst on the counters, waiter counts and `TaskNode::awaited`, so
//!   either a waiter sees the task done or the completer sees the waiter
//!   (and notifies under `wait_lock`).
//! - No lost wake-up for a `wait_all` waiter: a worker that runs out of
//!   tasks checks, once its spin rounds have found none and before it
//!   parks, whether all have finished and someone waits (`notify_drained`,
//!   from `sleep`'s W1); the worker of the last finish does so after it (it
//!   finds no task: none is left). SeqCst on both sides, as above: either
//!   the waiter's count sees that finish, or that worker sees the waiter.
//!   A completer does not check: the sum over every thread's counts, read
//!   at every task, moved their lines between the cores as one shared
//!   counter did; and a worker that gets a task during its spin rounds (the
//!   next step of a fine-grained graph) does not read them either.
//! - Failures are pushed to `errors` before `has_errors` is set, and taken
//!   (with `has_errors` cleared) under the same lock.
//!
//! The fields private to the runtime are `pub(super)`: visible to the
//! runtime's own files (`start` builds the value, `data` counts handles),
//! as they were when the runtime was one file, and to nothing else.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, RunError, TaskFailure};
use crate::memory::Memory;
use crate::perfmodel::PerfModels;
use crate::recorder::TraceLog;
use crate::sched::{Pushed, SchedulerPolicy, WorkerKind};
use crate::sleep::Sleep;
use crate::task::TaskNode;
use crate::util::lock;
use crate::worker::Outcome;

/// One recorded task for DOT export: (id, name, predecessor ids).
pub(crate) type GraphEntry = (u64, String, Box<[u64]>);

/// State shared by the runtime handle and its workers.
pub(crate) struct Shared {
    pub(super) id: u64,
    pub(super) policy: Arc<dyn SchedulerPolicy>,
    pub(super) sleep: Sleep,
    /// Task ids, handed to submitters in blocks (`crate::counter::Ids`): a
    /// symbolic run's workers submit too.
    pub(super) next_task: crate::counter::Ids,
    pub(super) next_handle: AtomicU64,
    /// Tasks submitted, and tasks finished, so far: in flight is the
    /// difference. Each thread adds to shards of its own
    /// (`crate::counter::Sharded`): one counter that submitters and workers
    /// all wrote moved its line between the submitting core and the
    /// workers' at every task (the increment was a third of `submit`'s own
    /// time in `tessera overhead`), and two counters, one per side, still
    /// moved between the workers when they submit (a symbolic run), a fifth
    /// of `submit_inner`'s samples (`perf annotate`).
    pub(super) submitted: crate::counter::Sharded,
    pub(super) finished: crate::counter::Sharded,
    /// Threads inside `wait_all`: notified only when `in_flight` is zero
    /// and a worker found no task (`notify_drained`; a notification per task
    /// would cost every completion of a drain a system call, and the waiter
    /// a wake-up).
    pub(super) all_waiters: AtomicUsize,
    /// Threads waiting for given tasks (`wait`, `unregister`): notified by
    /// the completion of a task marked `awaited` while non-zero.
    pub(super) task_waiters: AtomicUsize,
    /// The submission window and the submitters it holds (`window.rs`).
    pub(super) window: super::window::Window,
    pub(super) wait_lock: Mutex<()>,
    pub(super) wait_cond: Condvar,
    /// Failures and cancellations since the last `wait_all`.
    pub(super) errors: Mutex<RunError>,
    pub(super) has_errors: AtomicBool,
    pub(super) trace: Option<Arc<TraceLog>>,
    pub(super) graph: Option<Mutex<Vec<GraphEntry>>>,
    /// What each worker is (CPU workers first, then one per device).
    pub(super) kinds: Vec<WorkerKind>,
    /// CPU workers (the first `cpu_workers` of `kinds`): the most a team has.
    pub(super) cpu_workers: usize,
    /// Where a team task's leader recruits its members (`crate::team`).
    pub(super) board: crate::team::Board,
    pub(super) memory: Arc<Memory>,
    /// Whether there is more than one memory node (devices or NUMA nodes):
    /// then every task acquires its data on its worker's node.
    pub(super) multi_node: bool,
    pub(super) perf: Arc<PerfModels>,
    /// Time tasks into `perf`.
    pub(super) calibrate: bool,
    /// Flops of the tasks finished successfully (for progress reports),
    /// per worker.
    pub(super) flops_done: crate::counter::Sharded,
    /// Set by `Runtime::interrupt` (Ctrl-C): tasks not started are
    /// cancelled as workers pop them, and submissions are refused.
    pub(super) interrupted: AtomicBool,
    /// Device bodies that failed and fell back to the CPU body: how many,
    /// and the first one's message.
    pub(super) fallbacks: AtomicU64,
    pub(super) first_fallback: std::sync::OnceLock<String>,
    /// The virtual workers of a simulated runtime (`crate::simulate`).
    pub(super) sim: Option<crate::simulate::SimRt>,
    /// Finished task nodes whose allocations submissions reuse.
    pub(super) nodes: crate::task::NodePool,
    /// The network this rank's idle workers watch, if any (`crate::watch`).
    pub(super) watch: crate::watch::Watch,
}

/// What the rest of the engine reads of a runtime's shared state. The fields
/// stay private to `runtime/` (as rayon's `Registry` and tokio's `Shared`
/// keep theirs): every other room goes through these, so a field's users
/// are found here, and what is only read outside cannot be replaced there.
impl Shared {
    /// The runtime's id (handles and task handles carry it to check they
    /// are used with their own runtime).
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    #[inline]
    pub(crate) fn policy(&self) -> &Arc<dyn SchedulerPolicy> {
        &self.policy
    }

    #[inline]
    pub(crate) fn sleep(&self) -> &Sleep {
        &self.sleep
    }

    /// A fresh task id: unique in the runtime, increasing along one
    /// thread's submissions (not across threads).
    #[inline]
    pub(crate) fn take_task_id(&self) -> u64 {
        self.next_task.take()
    }

    /// Count one more task submitted (by the calling thread, see the field).
    #[inline]
    pub(crate) fn count_submitted(&self) {
        self.submitted.add_ordered(1);
    }

    #[inline]
    pub(crate) fn trace(&self) -> &Option<Arc<TraceLog>> {
        &self.trace
    }

    #[inline]
    pub(crate) fn graph(&self) -> &Option<Mutex<Vec<GraphEntry>>> {
        &self.graph
    }

    /// What each worker is (CPU workers first, then one per device).
    #[inline]
    pub(crate) fn kinds(&self) -> &[WorkerKind] {
        &self.kinds
    }

    /// CPU workers: the most a team has.
    #[inline]
    pub(crate) fn cpu_workers(&self) -> usize {
        self.cpu_workers
    }

    #[inline]
    pub(crate) fn board(&self) -> &crate::team::Board {
        &self.board
    }

    #[inline]
    pub(crate) fn memory(&self) -> &Arc<Memory> {
        &self.memory
    }

    /// Whether tasks acquire their data on their worker's memory node.
    #[inline]
    pub(crate) fn multi_node(&self) -> bool {
        self.multi_node
    }

    #[inline]
    pub(crate) fn perf(&self) -> &Arc<PerfModels> {
        &self.perf
    }

    /// Whether tasks are timed into `perf`.
    #[inline]
    pub(crate) fn calibrate(&self) -> bool {
        self.calibrate
    }

    #[inline]
    pub(crate) fn sim(&self) -> &Option<crate::simulate::SimRt> {
        &self.sim
    }

    #[inline]
    pub(crate) fn nodes(&self) -> &crate::task::NodePool {
        &self.nodes
    }

    #[inline]
    pub(crate) fn watch(&self) -> &crate::watch::Watch {
        &self.watch
    }
}

impl Shared {
    /// Wake whoever must take a task that was just pushed (`Pushed` says where).
    pub(crate) fn wake(&self, pushed: Pushed) {
        if let Some(sim) = &self.sim {
            // Virtual workers poll at the event loop's next step.
            sim.mark_dirty();
            return;
        }
        match pushed {
            Pushed::Worker(w) => self.sleep.notify_worker(w),
            // Every worker of a host-only runtime may take the task, and
            // with no watched network none runs a received task while it
            // counts as searching (the watcher's polls in W1 may).
            Pushed::Local | Pushed::Shared if self.host_only() && !self.watch.is_set() => {
                self.sleep.notify_one_unless_searching()
            }
            Pushed::Local | Pushed::Shared => self.sleep.notify_one(),
            // The pushing worker runs it next.
            Pushed::Kept => {}
        }
    }

    /// A device body failed and the task falls back to its CPU body.
    pub(crate) fn note_fallback(&self, message: impl FnOnce() -> String) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        self.first_fallback.get_or_init(message);
    }

    /// A task of `flops` finished successfully.
    pub(crate) fn add_flops(&self, flops: f64) {
        if flops > 0.0 {
            // A progress counter, read as a hint.
            self.flops_done.add(flops as u64);
        }
    }

    /// Whether every task runs on the host with no body skipped: no device
    /// and no simulated time (a body reading data in place can then run on
    /// any thread).
    pub(crate) fn host_only(&self) -> bool {
        self.sim.is_none() && self.memory.devices.is_empty()
    }

    /// Submitted tasks not finished yet.
    pub(crate) fn in_flight(&self) -> usize {
        // `finished` first: it never exceeds `submitted` read after it, and
        // equality means nothing was in flight when `finished` was read.
        let f = self.finished.sum_ordered();
        let s = self.submitted.sum_ordered();
        usize::try_from(s.saturating_sub(f)).unwrap_or(usize::MAX)
    }

    /// Called by a worker whose spin rounds found no task, before it
    /// yields or parks: wake the `wait_all` waiters if every task has
    /// finished (see the module doc).
    #[inline]
    pub(crate) fn notify_drained(&self) {
        // A window waiter too: completions check it at one in `SAMPLE`.
        if (self.all_waiters.load(Ordering::SeqCst) > 0 && self.in_flight() == 0)
            || self.window.wakes(0, || self.in_flight() as u64)
        {
            let _g = lock(&self.wait_lock);
            self.wait_cond.notify_all();
        }
    }

    /// Task `node` finished: one less in flight; wake the waiters it may concern.
    ///
    /// A thread waiting for given tasks is woken only by theirs (`TaskNode::awaited`).
    /// Until the ninth session every completion woke it: the one-process CG waits for
    /// each iteration's convergence test, and each of the iteration's hundred tasks then
    /// woke the submitting thread, which took the lock the worker had to take to wake it
    /// (two futex calls per task on the worker, 20–30 µs between tasks in its traces).
    #[inline]
    pub(crate) fn finish_one(&self, node: &TaskNode) {
        // SeqCst on both sides (here and in `wait_until`): either the waiter
        // sees the finished state, or this load sees the waiter. A task
        // waiter marks its tasks `awaited` (SeqCst) before it checks them,
        // and this task's done state was stored (SeqCst) before: either the
        // waiter sees it done, or this load sees the mark. `wait_all`
        // waiters are woken by `notify_drained`.
        self.finished.add_ordered(1);
        if (self.task_waiters.load(Ordering::SeqCst) > 0 && node.awaited.load(Ordering::SeqCst))
            || self
                .window
                .wakes(self.finished.here(), || self.in_flight() as u64)
        {
            let _g = lock(&self.wait_lock);
            self.wait_cond.notify_all();
        }
    }

    /// Record a failed or cancelled task and poison the data it was to write.
    pub(crate) fn record_failure(&self, node: &Arc<TaskNode>, outcome: &Outcome) {
        let who = match outcome {
            Outcome::Cancelled => format!(
                "its last writer {} was cancelled because {}",
                node.info(),
                node.root_cause()
            ),
            _ => format!("its last writer {} failed", node.info()),
        };
        for a in node.accesses.iter().filter(|a| a.mode.writes()) {
            let mut deps = a.lock_deps();
            // An ordered task is no handle's last writer, but its
            // front-end runs no later writer of its data after a failure
            // (a symbolic run makes no successor of a failed task).
            let is_last = node.ordered
                || deps
                    .last_writer
                    .as_ref()
                    .is_some_and(|w| std::ptr::eq(w.node.as_ptr(), Arc::as_ptr(node)));
            if is_last {
                deps.poisoned_by = Some(who.clone());
            }
        }
        let mut errors = lock(&self.errors);
        match outcome {
            Outcome::Failed(message) => errors.failures.push(TaskFailure {
                task: node.info(),
                message: message.clone(),
            }),
            Outcome::Cancelled => errors.cancelled.push(node.info()),
            Outcome::Ok => {}
        }
        self.has_errors.store(true, Ordering::SeqCst);
    }

    /// Block until `done()` holds, or the deadline passes. `all`: `done` is
    /// "nothing in flight" (see `all_waiters`), else it is about given tasks.
    pub(super) fn wait_until(
        &self,
        all: bool,
        done: impl Fn() -> bool,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        if done() {
            return Ok(());
        }
        if let Some(sim) = &self.sim {
            // Simulated time: waiting is running the event loop (deadlines
            // are wall-clock and do not apply).
            return sim.run_until(&done).map_err(Error::Simulation);
        }
        // A timeout too large to add to now (`Duration::MAX`) is no deadline.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let waiters = if all {
            &self.all_waiters
        } else {
            &self.task_waiters
        };
        waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = lock(&self.wait_lock);
        let result = loop {
            if done() {
                break Ok(());
            }
            match deadline {
                None => {
                    guard = self
                        .wait_cond
                        .wait(guard)
                        .unwrap_or_else(|e| e.into_inner())
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break Err(Error::Timeout(timeout.unwrap_or_default()));
                    }
                    guard = self
                        .wait_cond
                        .wait_timeout(guard, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        };
        drop(guard);
        waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    pub(super) fn take_errors(&self) -> Result<(), Error> {
        if !self.has_errors.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut errors = lock(&self.errors);
        self.has_errors.store(false, Ordering::SeqCst);
        let e = std::mem::take(&mut *errors);
        if e.failures.is_empty() && e.cancelled.is_empty() {
            Ok(())
        } else if self.is_interrupted() {
            Err(Error::Interrupted(e))
        } else {
            Err(Error::Failed(e))
        }
    }
}
