//! The runtime: the state its handle and workers share, data registration,
//! waiting, and the handle's API. Its other rooms: [`Config`] in `config`,
//! start-up in `start`, and task submission (sequential task flow, with
//! the lock order) in [`crate::stf`].

mod config;
mod start;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

pub use config::{Config, WorkerHook};
pub use start::{worker_cap, MIN_WORKER_CAP};

use crate::data::DataHandle;
use crate::error::{Error, RunError, TaskFailure};
use crate::memory::{Memory, MemoryStats, Replicate};
use crate::perfmodel::PerfModels;
use crate::recorder::TraceLog;
use crate::sched::{Pushed, SchedulerPolicy, WorkerKind};
use crate::sleep::Sleep;
use crate::task::{state, TaskBuilder, TaskHandle, TaskNode};
use crate::trace::model::Trace;
use crate::util::lock;
use crate::worker::Outcome;

/// One recorded task for DOT export: (id, name, predecessor ids).
pub(crate) type GraphEntry = (u64, String, Box<[u64]>);

/// State shared by the runtime handle and its workers.
pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) policy: Arc<dyn SchedulerPolicy>,
    pub(crate) sleep: Sleep,
    /// Written by submitters only (`stf`): on a line of its own, like
    /// `submitted`.
    pub(crate) next_task: CachePadded<AtomicU64>,
    next_handle: AtomicU64,
    /// Tasks submitted, and tasks finished, so far: in flight is the
    /// difference. Two counters on lines of their own, one written by
    /// submitters and one by workers, rather than one counter both write:
    /// that line moved between the submitting core and the workers' at every
    /// task (the increment was a third of `submit`'s own time in
    /// `tessera overhead`).
    pub(crate) submitted: CachePadded<AtomicU64>,
    finished: CachePadded<AtomicU64>,
    /// Threads inside `wait_all`: a completer notifies them only when it
    /// brings `in_flight` to zero (a notification per task would cost every
    /// completion of a drain a system call, and the waiter a wake-up).
    all_waiters: AtomicUsize,
    /// Threads waiting for given tasks (`wait`, `unregister`): notified by
    /// the completion of a task marked `awaited` while non-zero.
    task_waiters: AtomicUsize,
    wait_lock: Mutex<()>,
    wait_cond: Condvar,
    /// Failures and cancellations since the last `wait_all`.
    errors: Mutex<RunError>,
    has_errors: AtomicBool,
    pub(crate) trace: Option<Arc<TraceLog>>,
    pub(crate) graph: Option<Mutex<Vec<GraphEntry>>>,
    /// What each worker is (CPU workers first, then one per device).
    pub(crate) kinds: Vec<WorkerKind>,
    /// CPU workers (the first `cpu_workers` of `kinds`): the most a team has.
    pub(crate) cpu_workers: usize,
    /// Where a team task's leader recruits its members (`crate::team`).
    pub(crate) board: crate::team::Board,
    pub(crate) memory: Arc<Memory>,
    /// Whether there is more than one memory node (devices or NUMA nodes):
    /// then every task acquires its data on its worker's node.
    pub(crate) multi_node: bool,
    pub(crate) perf: Arc<PerfModels>,
    /// Time tasks into `perf`.
    pub(crate) calibrate: bool,
    /// Flops of the tasks finished successfully (for progress reports).
    flops_done: AtomicU64,
    /// Set by `Runtime::interrupt` (Ctrl-C): tasks not started are
    /// cancelled as workers pop them, and submissions are refused.
    pub(crate) interrupted: AtomicBool,
    /// Device bodies that failed and fell back to the CPU body: how many,
    /// and the first one's message.
    fallbacks: AtomicU64,
    first_fallback: std::sync::OnceLock<String>,
    /// The virtual workers of a simulated runtime (`crate::simulate`).
    pub(crate) sim: Option<crate::simulate::SimRt>,
    /// Finished task nodes whose allocations submissions reuse.
    pub(crate) nodes: crate::task::NodePool,
    /// The network this rank's idle workers watch, if any (`crate::watch`).
    pub(crate) watch: crate::watch::Watch,
}

impl Shared {
    /// Virtual data of `bytes` bytes shaped `dims` (see
    /// [`Runtime::register_virtual`]); refused by a real runtime.
    fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: String,
    ) -> Result<DataHandle<T>, Error> {
        if self.sim.is_none() {
            return Err(Error::Config(format!(
                "cannot register virtual data '{name}' ({bytes} bytes, no value) with a real runtime: only a simulated one (Config::simulated) can run tasks on it"
            )));
        }
        let id = self.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new_virtual(
            bytes,
            dims,
            id,
            self.id,
            Some(name),
            Arc::clone(&self.memory),
        ))
    }

    /// Wake whoever must take a task that was just pushed (`Pushed` says where).
    pub(crate) fn wake(&self, pushed: Pushed) {
        if let Some(sim) = &self.sim {
            // Virtual workers poll at the event loop's next step.
            sim.mark_dirty();
            return;
        }
        match pushed {
            Pushed::Worker(w) => self.sleep.notify_worker(w),
            Pushed::Local | Pushed::Shared => self.sleep.notify_one(),
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
            // Relaxed: a progress counter, read as a hint.
            self.flops_done.fetch_add(flops as u64, Ordering::Relaxed);
        }
    }

    /// Refuse a blocking call made from one of this runtime's task bodies:
    /// the worker would wait for itself.
    fn not_from_a_body(&self, what: &str) -> Result<(), Error> {
        match crate::worker::current(self.id) {
            Some(c) => Err(Error::Config(format!(
                "{what} was called from a task body (on worker {}); a body cannot wait for tasks of its own runtime",
                c.worker
            ))),
            None => Ok(()),
        }
    }

    /// Submitted tasks not finished yet.
    pub(crate) fn in_flight(&self) -> usize {
        // `finished` first: it never exceeds `submitted` read after it, and
        // equality means nothing was in flight when `finished` was read.
        let f = self.finished.load(Ordering::SeqCst);
        let s = self.submitted.load(Ordering::SeqCst);
        usize::try_from(s.saturating_sub(f)).unwrap_or(usize::MAX)
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
        // sees the finished state, or this load sees the waiter. A `wait_all`
        // waiter's condition can only turn true at the decrement to zero. A
        // task waiter marks its tasks `awaited` (SeqCst) before it checks
        // them, and this task's done state was stored (SeqCst) before: either
        // the waiter sees it done, or this load sees the mark.
        let finished = self.finished.fetch_add(1, Ordering::SeqCst) + 1;
        // `submitted` is read only while someone waits for all: the line
        // stays with the submitters otherwise.
        if (self.all_waiters.load(Ordering::SeqCst) > 0
            && self.submitted.load(Ordering::SeqCst) == finished)
            || (self.task_waiters.load(Ordering::SeqCst) > 0 && node.awaited.load(Ordering::SeqCst))
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
            let is_last = deps
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
    fn wait_until(
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

    fn take_errors(&self) -> Result<(), Error> {
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

/// Submits tasks to a runtime from anywhere, task bodies included. Holds the
/// runtime weakly, so a body that keeps one does not keep the runtime alive.
///
/// A task submitted from a body is ordered like any other, by the data it
/// names, in submission order: if it reads or writes data its parent task
/// writes, it depends on the parent and starts only once the parent has
/// finished (it sees the parent's writes). So a body must not wait for a
/// task it submits on its own data: that task waits for the body.
///
/// ```
/// use tessera_engine::{Codelet, Config, Runtime};
///
/// let rt = Runtime::new(Config::with_workers(2)).unwrap();
/// let h = rt.register(1u64);
/// let (parent, child) = (Codelet::new("parent"), Codelet::new("child"));
/// let sub = rt.submitter();
/// let h2 = h.clone();
/// rt.task(&parent, h.rw())
///     .cpu(move |v| {
///         // Submitted while this body holds `h`: runs after it, and sees 2.
///         sub.submit(tessera_engine::Task::new(&child, h2.rw()).cpu(|v| {
///             *v *= 10;
///             Ok(())
///         }))?;
///         *v += 1;
///         Ok(())
///     })
///     .submit()
///     .unwrap();
/// rt.wait_all().unwrap();
/// assert_eq!(rt.unregister(h).unwrap(), 20);
/// ```
#[derive(Clone)]
pub struct Submitter(Weak<Shared>);

impl Submitter {
    /// Like [`Runtime::submit`]; `Err` if the runtime is gone.
    pub fn submit(&self, task: impl Into<TaskBuilder>) -> Result<TaskHandle, Error> {
        let task = task.into();
        match self.0.upgrade() {
            Some(shared) => shared.submit(task),
            None => Err(Error::Submit {
                task: task.display_name(),
                reason: "the runtime was dropped".into(),
            }),
        }
    }
}

impl Submitter {
    /// [`Shared::write_now`] on the runtime: `None` (nothing written) if it
    /// is gone or the data is in use.
    pub(crate) fn write_now(
        &self,
        data: &Arc<dyn crate::data::AnyHandle>,
        write: impl FnOnce() -> Result<(), String>,
    ) -> Option<Result<(), String>> {
        self.0.upgrade()?.write_now(data, write)
    }
}

/// The extra pending count of a task submitted held (see
/// `Shared::submit_held`): releasing it lets the task become ready.
pub(crate) struct Hold {
    node: Arc<TaskNode>,
    shared: Weak<Shared>,
}

impl Hold {
    /// The count `node` keeps for `shared` until released.
    pub(crate) fn new(node: Arc<TaskNode>, shared: &Arc<Shared>) -> Hold {
        Hold {
            node,
            shared: Arc::downgrade(shared),
        }
    }

    /// Let the task run (once its dependencies are met).
    pub(crate) fn release(self) {
        if let Some(s) = self.shared.upgrade() {
            s.release_one(self.node);
        }
    }

    /// Let a receive run, its message having come: at once on this thread
    /// if it is a worker polling the network and the receive is ready (see
    /// `Shared::release_received`). Only for a task whose body is short
    /// and never waits (it runs inside the network's poll).
    pub(crate) fn release_received(self) {
        if let Some(s) = self.shared.upgrade() {
            s.release_received(self.node);
        }
    }
}

/// Registers data with a runtime from anywhere (a symbolic DAG making the
/// local copy of another rank's data, say). Holds the runtime weakly.
#[derive(Clone)]
pub struct Registrar(Weak<Shared>);

impl Registrar {
    /// A registrar of no runtime: every registration through it fails
    /// ("the runtime was dropped"). For values that only plan, such as a
    /// distributed DAG asked for its shape before any data exists.
    pub fn detached() -> Registrar {
        Registrar(Weak::new())
    }

    fn shared(&self) -> Result<Arc<Shared>, Error> {
        self.0
            .upgrade()
            .ok_or_else(|| Error::Config("the runtime was dropped".into()))
    }

    /// Like [`Runtime::register_named`].
    pub fn register_named<T: Send + Sync + 'static>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        let s = self.shared()?;
        let id = s.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new(value, id, s.id, Some(name.into())))
    }

    /// Like [`Runtime::register_virtual`] (a simulated runtime's copy of
    /// another rank's virtual data, say).
    pub fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        self.shared()?.register_virtual(bytes, dims, name.into())
    }

    /// Like [`Runtime::register_replicable_named`].
    pub fn register_replicable_named<T: Replicate>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        let s = self.shared()?;
        let id = s.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new_replicable(
            value,
            id,
            s.id,
            Some(name.into()),
            Arc::clone(&s.memory),
        ))
    }
}

/// A task-graph runtime: its workers (CPU worker threads, one device worker
/// per accelerator, or virtual workers in simulated time), the data
/// registered with it, and the tasks submitted to it.
///
/// Register data, submit tasks that declare how they access it (their
/// dependencies follow from the order of submission), wait, take the data
/// back:
///
/// ```
/// use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};
///
/// let rt = Runtime::new(Config::with_workers(2).trace(true))?;
/// let (x, y) = (rt.register(vec![1.0f64; 4]), rt.register(vec![0.0f64; 4]));
/// // y += a x, with `a` as the task's argument.
/// let axpy = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>), f64>::with_args("axpy")
///     .cpu(|_, &a, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
///         y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
///         Ok(())
///     });
/// for a in [1.0, 2.0, 3.0] {
///     // Each task reads x and updates y: they run one after the other.
///     rt.task(&axpy, (x.r(), y.rw())).args(a).submit()?;
/// }
/// rt.wait_all()?;
/// assert_eq!(rt.unregister(y)?, vec![6.0; 4]);
///
/// // With `Config::trace`, the timeline: save it for Perfetto UI or
/// // chrome://tracing (what `--trace FILE` does on the command line).
/// let trace = rt.trace();
/// assert_eq!(trace.tasks.len(), 3);
/// let path = std::env::temp_dir().join(format!("axpy-{}.json", std::process::id()));
/// tessera_engine::trace::save(&trace, &path, &Default::default())?;
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping it stops the workers after their current task; tasks not yet
/// started are cancelled (dropped unrun). Call [`wait_all`](Self::wait_all)
/// first to let them finish.
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    config: Config,
}

impl Runtime {
    /// A runtime with `n` workers and the default policy.
    pub fn with_workers(n: usize) -> Result<Runtime, Error> {
        Runtime::new(Config::with_workers(n))
    }

    /// The configuration this runtime runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of workers, device workers included: the `Config::workers`
    /// CPU workers plus one per device (e.g. 5 for 4 CPU workers and a
    /// GPU), as threads, or virtual workers in simulated time.
    pub fn workers(&self) -> usize {
        self.shared.kinds.len()
    }

    /// Whether this runtime runs in simulated time (`Config::simulated`).
    pub fn is_simulated(&self) -> bool {
        self.shared.sim.is_some()
    }

    /// Virtual time of a simulated runtime's simulation, in seconds (`None`
    /// on a real runtime).
    pub fn simulated_time(&self) -> Option<f64> {
        self.shared.sim.as_ref().map(|s| s.world.now())
    }

    /// Register *virtual* data: `bytes` bytes with no value. Tasks declare
    /// it like any data, the coherence protocol tracks its replicas and the
    /// link model charges its transfers, but bodies never see it (they do
    /// not run in simulated time). Only a simulated runtime takes it: an
    /// N = 10^6 LU's tiles need no memory there.
    ///
    /// `dims` is the shape a real value of type `T` would report through
    /// [`Replicate::dims`]: the figures a device view needs besides the
    /// size, e.g. `[rows, cols, 0, 0]` for a tile, `[len, 0, 0, 0]` for a
    /// `Vec`. `bytes` alone is the size that transfers and device memory
    /// are charged for; `[0; 4]` will do when nothing reads the shape.
    pub fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        self.shared.register_virtual(bytes, dims, name.into())
    }

    /// The scheduling policy's name (`ws`, `prio`, `dmda`, or a custom policy's).
    pub fn scheduler_name(&self) -> &'static str {
        self.shared.policy.name()
    }

    /// Register `value`; tasks reach it through the returned handle.
    pub fn register<T: Send + Sync + 'static>(&self, value: T) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new(value, id, self.shared.id, None)
    }

    /// Register `value` under a name used in error messages and traces.
    pub fn register_named<T: Send + Sync + 'static>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new(value, id, self.shared.id, Some(name.into()))
    }

    /// Register `value` so that it can also live on devices' memory nodes
    /// (explicit copies, made by the engine when a task on a device needs it).
    pub fn register_replicable<T: Replicate>(&self, value: T) -> DataHandle<T> {
        self.register_replicable_named_opt(value, None)
    }

    /// [`register_replicable`](Self::register_replicable) with a name.
    pub fn register_replicable_named<T: Replicate>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> DataHandle<T> {
        self.register_replicable_named_opt(value, Some(name.into()))
    }

    fn register_replicable_named_opt<T: Replicate>(
        &self,
        value: T,
        name: Option<String>,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new_replicable(
            value,
            id,
            self.shared.id,
            name,
            Arc::clone(&self.shared.memory),
        )
    }

    /// Register data whose value `make` makes at its first use (another
    /// rank's data, registered by shape: [`DistRuntime::register_with`]).
    /// `make` is called once now for the shape, and that value dropped.
    ///
    /// [`DistRuntime::register_with`]: crate::dist::stf::DistRuntime::register_with
    pub(crate) fn register_deferred<T: Replicate>(
        &self,
        make: impl Fn() -> T + Send + 'static,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new_deferred(
            make,
            id,
            self.shared.id,
            None,
            Arc::clone(&self.shared.memory),
        )
    }

    /// Bytes moved between memory nodes and evictions, per node.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared.memory.stats()
    }

    /// The memory nodes of the devices, in `Config::devices` order (use
    /// them with `TaskBuilder::on_node`).
    pub fn device_nodes(&self) -> Vec<usize> {
        let m = &self.shared.memory;
        (0..m.devices.len()).map(|d| m.host_nodes + d).collect()
    }

    /// The perf models this runtime records into and predicts from.
    pub fn perf_models(&self) -> &Arc<PerfModels> {
        &self.shared.perf
    }

    /// Submit a task (a typed [`Task`](crate::Task) or a dynamic
    /// [`TaskBuilder`]). Its dependencies are inferred from the data it
    /// declares and the tasks submitted before it (plus any explicit
    /// `after`). Callable from several threads, and from task bodies (the
    /// task then goes to that worker's queue).
    #[inline]
    pub fn submit(&self, task: impl Into<TaskBuilder>) -> Result<TaskHandle, Error> {
        self.shared.submit(task.into())
    }

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

    /// Device bodies that failed so far and whose tasks ran their CPU body
    /// instead (Cashmere's fallback), with the first failure's message.
    /// Drivers report it: a fallback keeps results right but is slow.
    pub fn device_fallbacks(&self) -> (u64, Option<String>) {
        let s = &self.shared;
        (
            s.fallbacks.load(Ordering::Relaxed),
            s.first_fallback.get().cloned(),
        )
    }

    /// Flops of the tasks that finished successfully so far (progress).
    pub fn flops_done(&self) -> u64 {
        self.shared.flops_done.load(Ordering::Relaxed)
    }

    /// Submit a task that stays held back until the `Hold` is released.
    pub(crate) fn submit_held(&self, task: TaskBuilder) -> Result<(TaskHandle, Hold), Error> {
        self.shared.submit_held(task)
    }

    /// Run `hook` once `data` holds what the tasks submitted so far wrote
    /// last (see `Shared::after_last_writer`).
    pub(crate) fn after_last_writer(
        &self,
        data: &dyn crate::data::AnyHandle,
        hook: crate::task::Hook,
    ) {
        self.shared.after_last_writer(data.core(), hook)
    }

    /// Whether every task runs on the host with no body skipped: no device
    /// and no simulated time (a body reading data in place can then run on
    /// any thread).
    pub(crate) fn host_only(&self) -> bool {
        self.shared.sim.is_none() && self.shared.memory.devices.is_empty()
    }

    /// Whether this runtime records a trace (`Config::trace`).
    pub(crate) fn traced(&self) -> bool {
        self.shared.trace.is_some()
    }

    /// A handle that registers data with this runtime from anywhere (it does
    /// not keep the runtime alive).
    pub fn registrar(&self) -> Registrar {
        Registrar(Arc::downgrade(&self.shared))
    }

    /// A handle that can submit to this runtime from inside task bodies
    /// (it does not keep the runtime alive).
    pub fn submitter(&self) -> Submitter {
        Submitter(Arc::downgrade(&self.shared))
    }

    /// Wait until `task` has finished. `Err` if it failed or was cancelled
    /// (the failure is still reported by the next `wait_all`).
    pub fn wait(&self, task: &TaskHandle) -> Result<(), Error> {
        self.wait_task(task, None)
    }

    /// [`wait`](Self::wait) with a deadline.
    pub fn wait_timeout(&self, task: &TaskHandle, timeout: Duration) -> Result<(), Error> {
        self.wait_task(task, Some(timeout))
    }

    fn wait_task(&self, task: &TaskHandle, timeout: Option<Duration>) -> Result<(), Error> {
        self.shared.not_from_a_body("wait")?;
        task.node.awaited.store(true, Ordering::SeqCst);
        self.shared
            .wait_until(false, || task.node.is_done(), timeout)?;
        match task.node.state.load(Ordering::SeqCst) {
            state::DONE_OK => Ok(()),
            s => {
                let what = if s == state::DONE_FAILED {
                    "failed"
                } else {
                    "was cancelled"
                };
                let mut e = RunError::default();
                if s == state::DONE_FAILED {
                    e.failures.push(TaskFailure {
                        task: task.info(),
                        message: format!("{} {what}; see wait_all for the message", task.info()),
                    });
                } else {
                    e.cancelled.push(task.info());
                }
                Err(Error::Failed(e))
            }
        }
    }

    /// Wait until every submitted task has finished. Returns the failures and
    /// cancellations since the last `wait_all` (and forgets them).
    pub fn wait_all(&self) -> Result<(), Error> {
        self.wait_all_inner(None)
    }

    /// [`wait_all`](Self::wait_all) with a deadline.
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<(), Error> {
        self.wait_all_inner(Some(timeout))
    }

    fn wait_all_inner(&self, timeout: Option<Duration>) -> Result<(), Error> {
        let s = &self.shared;
        s.not_from_a_body("wait_all")?;
        s.wait_until(true, || s.in_flight() == 0, timeout)?;
        s.take_errors()
    }

    /// Whether a task failed or was cancelled since the last `wait_all`.
    pub(crate) fn has_failures(&self) -> bool {
        self.shared.has_errors.load(Ordering::SeqCst)
    }

    /// The first failure since the last `wait_all`, as `wait_all` would
    /// report it (without forgetting it).
    pub(crate) fn first_failure(&self) -> Option<String> {
        let errors = lock(&self.shared.errors);
        errors
            .failures
            .first()
            .map(|f| format!("{} failed: {}", f.task, f.message))
    }

    /// Number of submitted tasks that have not finished.
    pub fn tasks_in_flight(&self) -> usize {
        self.shared.in_flight()
    }

    /// [`unregister`](Self::unregister) for virtual data (simulated time):
    /// waits for its users and brings it back to the host, so that a device
    /// holding its only copy sends it over its link in simulated time, as a
    /// real run's `unregister` would; there is no value to return.
    /// `Err(Poisoned)` if its last writer failed or was cancelled.
    pub fn unregister_virtual<T: Send + Sync + 'static>(
        &self,
        handle: DataHandle<T>,
    ) -> Result<(), Error> {
        if !crate::data::AnyHandle::is_virtual(&*handle.inner) {
            return Err(Error::Config(format!(
                "'{}' is not virtual data: unregister it to get its value",
                handle.name()
            )));
        }
        match self.release(&handle)? {
            Some(task) => Err(Error::Poisoned {
                handle: handle.name(),
                task,
            }),
            None => Ok(()),
        }
    }

    /// Wait for every task using `handle`, then take its value back. No task
    /// can be submitted on the handle afterwards. `Err(Poisoned)` if its last
    /// writer failed or was cancelled.
    pub fn unregister<T: Send + Sync + 'static>(&self, handle: DataHandle<T>) -> Result<T, Error> {
        let poisoned = self.release(&handle)?;
        if crate::data::AnyHandle::is_virtual(&*handle.inner) {
            return Err(Error::Config(format!(
                "'{}' is virtual data: it has no value to give back (unregister_virtual releases it)",
                handle.name()
            )));
        }
        // SAFETY: `release` waited for every task that declared the handle
        // before `unregistered` was set (the last writer and the readers
        // since it; earlier tasks are predecessors of those, hence done too),
        // and no task can be submitted on it any more.
        let value = unsafe { handle.take_value() }
            .map_err(Error::Config)?
            .expect("value is present until unregistered");
        match poisoned {
            Some(task) => Err(Error::Poisoned {
                handle: handle.name(),
                task,
            }),
            None => Ok(value),
        }
    }

    /// The common part of the unregisters: marks `handle` unregistered, waits
    /// for every task using it, and brings it back to the host if a device
    /// holds the only valid copy. Returns the task that poisoned it, if any.
    fn release<T: Send + Sync + 'static>(
        &self,
        handle: &DataHandle<T>,
    ) -> Result<Option<String>, Error> {
        self.shared.not_from_a_body("unregister")?;
        let users: Vec<Arc<TaskNode>> = {
            let mut deps = lock(&handle.inner.core.deps);
            if deps.unregistered {
                return Err(Error::Submit {
                    task: "unregister".into(),
                    reason: format!("data '{}' was already unregistered", handle.name()),
                });
            }
            deps.unregistered = true;
            deps.users()
        };
        for t in &users {
            t.awaited.store(true, Ordering::SeqCst);
        }
        self.shared
            .wait_until(false, || users.iter().all(|t| t.is_done()), None)?;
        let me: Arc<dyn crate::data::AnyHandle> = handle.erased();
        if !me.valid_on(crate::memory::HOST) {
            me.acquire(&me, crate::memory::HOST, crate::access::AccessMode::R, true)
                .inspect(|()| me.unpin(crate::memory::HOST, crate::access::AccessMode::R))
                .map_err(|e| {
                    Error::Config(format!(
                        "cannot bring '{}' back to the host: {e}",
                        handle.name()
                    ))
                })?;
        }
        drop(me);
        let poisoned = lock(&handle.inner.core.deps).poisoned_by.clone();
        Ok(poisoned)
    }

    /// The timeline recorded so far (empty unless `Config::trace`). Save it
    /// with [`trace::save`](crate::trace::save) (Chrome trace JSON, for
    /// Perfetto UI), or summarise it with [`trace::stats`](fn@crate::trace::stats);
    /// see the example on [`Runtime`].
    pub fn trace(&self) -> Trace {
        if let Some(sim) = &self.shared.sim {
            return sim.trace();
        }
        match &self.shared.trace {
            Some(log) => {
                let mut t = log.snapshot();
                if let Some(list) = &self.shared.memory.transfers {
                    t.transfers = lock(list)
                        .iter()
                        .map(|r| {
                            let mut r = r.clone();
                            r.start = log.ticks_to_ns(r.start);
                            r.end = log.ticks_to_ns(r.end);
                            r
                        })
                        .collect();
                }
                if let Some(r) = t.ranks.first_mut() {
                    r.transfers = t.transfers.len() as u32;
                }
                t
            }
            None => Trace::default(),
        }
    }

    /// The trace log, if this runtime records a trace (the distributed
    /// layer records messages into it).
    pub(crate) fn trace_log(&self) -> Option<&Arc<TraceLog>> {
        self.shared.trace.as_ref()
    }

    /// Let this runtime's idle workers poll `transport` while a message is
    /// expected (`crate::watch`); nothing if it cannot be polled.
    pub(crate) fn watch_network(&self, transport: &Arc<dyn crate::dist::Transport>) {
        self.shared.watch.set(transport);
    }

    /// Whether this runtime records a trace.
    pub fn is_tracing(&self) -> bool {
        self.shared.trace.is_some()
    }

    /// Whether predecessor ids are kept (for traces or DOT export).
    pub(crate) fn keeps_preds(&self) -> bool {
        self.shared.trace.is_some() || self.shared.graph.is_some()
    }

    /// The submitted task graph in Graphviz DOT (needs `Config::record_graph`).
    pub fn graph_dot(&self) -> Option<String> {
        let g = self.shared.graph.as_ref()?;
        let entries = lock(g);
        Some(crate::graph::dot_from_entries(&entries))
    }
}

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

pub(crate) const INTERRUPTED: &str = "interrupted (Runtime::interrupt, e.g. Ctrl-C)";

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.sleep.shut_down();
        for t in self.threads.drain(..) {
            // A worker never panics outside a body (bodies are caught), so a
            // join error would be an engine bug; there is nothing to add.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves the runtime handle's own checks: deadlines that cannot
    //! overflow, calls from a body that would wait for the body itself, and
    //! the count of flops done.
    use super::*;
    use crate::codelet::Codelet;

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let rt = Runtime::with_workers(1).unwrap();
        let cl: Codelet<()> = Codelet::new("noop");
        let t = rt.task(&cl, ()).cpu(|()| Ok(())).submit().unwrap();
        rt.wait_timeout(&t, Duration::MAX).unwrap();
        rt.wait_all_timeout(Duration::MAX).unwrap();
    }

    #[test]
    fn waiting_from_a_body_is_an_error() {
        let rt = Arc::new(Runtime::with_workers(2).unwrap());
        let h = rt.register(0u32);
        let cl: Codelet<()> = Codelet::new("selfwait");
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let (rt2, h2, seen2) = (Arc::downgrade(&rt), h.clone(), Arc::clone(&seen));
        rt.task(&cl, ())
            .cpu(move |()| {
                let rt = rt2.upgrade().ok_or("runtime gone")?;
                let mut s = lock(&seen2);
                s.push(rt.wait_all().unwrap_err().to_string());
                s.push(rt.unregister(h2).unwrap_err().to_string());
                Ok(())
            })
            .submit()
            .unwrap();
        rt.wait_all().unwrap();
        for m in lock(&seen).iter() {
            assert!(m.contains("called from a task body"), "{m}");
        }
        assert_eq!(lock(&seen).len(), 2);
        assert_eq!(Arc::try_unwrap(rt).ok().unwrap().unregister(h).unwrap(), 0);
    }

    #[test]
    fn flops_done_counts_successful_tasks() {
        let rt = Runtime::with_workers(2).unwrap();
        let cl: Codelet<()> = Codelet::new("f");
        for i in 0..10 {
            let t = rt.task(&cl, ()).flops(1000.0);
            let t = if i == 3 {
                t.cpu(|()| Err("no".into()))
            } else {
                t.cpu(|()| Ok(()))
            };
            t.submit().unwrap();
        }
        assert!(rt.wait_all().is_err());
        assert_eq!(rt.flops_done(), 9000);
    }
}
