//! How to build a [`Runtime`](crate::Runtime): its [`Config`] (workers, policy, devices,
//! NUMA placement, tracing, simulation) and the [`WorkerHook`] run on each
//! worker thread at start-up.

use std::sync::Arc;

use crate::device::Device;
use crate::perfmodel::PerfModels;
use crate::sched::{PolicyBuilder, Scheduler};

/// How to build a [`Runtime`](crate::Runtime). Start from [`Config::default`] or
/// [`Config::with_workers`] and set fields with the builder methods.
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// Number of CPU worker threads (default: one per available core).
    pub workers: usize,
    /// Scheduling policy (default: `ws`).
    pub scheduler: Scheduler,
    /// A policy of your own, built once the workers are known; where given
    /// it replaces `scheduler` (see [`Config::custom_policy`]).
    pub custom_policy: Option<PolicyBuilder>,
    /// Record a task timeline (see [`Runtime::trace`](crate::Runtime::trace)).
    pub trace: bool,
    /// Keep every submitted task and edge for
    /// [`Runtime::graph_dot`](crate::Runtime::graph_dot).
    pub record_graph: bool,
    /// Run on each worker thread before it takes tasks (to bind it to a core).
    pub on_worker_start: Option<WorkerHook>,
    /// Victims each worker tries when stealing under `ws` (hierarchical
    /// stealing: NUMA siblings first), group by group: a group is a run of
    /// victims on one memory node, and each scan starts each group at a
    /// victim drawn by the worker, so idle workers spread their first
    /// steals. Default: all the others, round robin. Given for the CPU
    /// workers; device workers are appended.
    pub steal_order: Option<Vec<Vec<usize>>>,
    /// Accelerators: one device worker and one memory node each.
    pub devices: Vec<Arc<dyn Device>>,
    /// NUMA node (0-based index) of each CPU worker: one host memory node per
    /// NUMA node, and each worker computes on its own node's replicas.
    /// Default: every worker on node 0.
    pub worker_numa: Option<Vec<usize>>,
    /// Performance models shared with other runs (default: fresh, in memory).
    pub perf_models: Option<Arc<PerfModels>>,
    /// Time every task for the perf models (default: on when there are
    /// devices or the scheduler is `dmda`).
    pub calibrate: Option<bool>,
    /// Simulated time: this runtime is one rank of a [`Simulation`]
    /// (virtual workers, no thread; see [`Config::simulated`]).
    ///
    /// [`Simulation`]: crate::simulate::Simulation
    pub simulate: Option<crate::simulate::SimNode>,
    /// The submission window: a thread that is not one of the runtime's
    /// workers and submits while this many tasks are in flight waits until
    /// half of them have finished (0: never waits); fine-grained tasks wait
    /// at a quarter of it. Default [`DEFAULT_SUBMIT_WINDOW`]. See
    /// [`Config::submit_window`].
    pub submit_window: usize,
}

/// Tasks in flight at which a submitting thread waits (PaRSEC's DTD keeps
/// a window of 8000 by default; StarPU's `STARPU_LIMIT_MAX_SUBMITTED_TASKS`
/// is the same idea, unset by default).
pub const DEFAULT_SUBMIT_WINDOW: usize = 8192;

/// A function run on each worker thread at start-up, given the worker index.
/// An `Err` is reported when the runtime starts (binding that failed).
#[derive(Clone)]
pub struct WorkerHook(pub Arc<dyn Fn(usize) -> Result<(), String> + Send + Sync>);

impl std::fmt::Debug for WorkerHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerHook(..)")
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scheduler: Scheduler::Ws,
            custom_policy: None,
            trace: false,
            record_graph: false,
            on_worker_start: None,
            steal_order: None,
            devices: Vec::new(),
            worker_numa: None,
            perf_models: None,
            calibrate: None,
            simulate: None,
            submit_window: DEFAULT_SUBMIT_WINDOW,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("workers", &self.workers)
            .field("scheduler", &self.scheduler)
            .field("custom_policy", &self.custom_policy.is_some())
            .field("trace", &self.trace)
            .field("record_graph", &self.record_graph)
            .field("submit_window", &self.submit_window)
            .field(
                "devices",
                &self.devices.iter().map(|d| d.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Add a device.
    pub fn device(mut self, d: Arc<dyn Device>) -> Self {
        self.devices.push(d);
        self
    }

    /// Default configuration with `n` workers.
    pub fn with_workers(n: usize) -> Self {
        Config {
            workers: n,
            ..Config::default()
        }
    }

    /// The submission window (0: none). A program that submits a long
    /// flow of small tasks from its own thread (`Runtime::submit`) waits,
    /// once `window` tasks are in flight, until half of them have finished:
    /// the tasks it keeps ahead are bounded in memory, their nodes are
    /// reused while still in cache instead of taken fresh from the kernel
    /// (a page fault each 4 KiB), and on a core it shares with a worker it
    /// sleeps instead of taking the core from the tasks. Fine-grained tasks
    /// are held at a quarter of the window already (until a sixteenth is
    /// left): when a worker takes under 20 µs per task (timed while a
    /// submitter waits), more depth finds no parallelism worth having and
    /// costs cache misses; and a submitter a sixteenth of the window ahead
    /// yields its core every 64 submissions, so a worker sharing the core
    /// gets it back (the runtime's `window.rs` has the rules and the
    /// measurements). Task bodies and the runtime's own threads never wait,
    /// nor does a simulated runtime (its tasks run only while someone
    /// waits). A window never blocks a program for good: when no task
    /// finishes for 20 ms while a submitter waits (tasks waiting for
    /// something the program has yet to do, such as a message or a channel
    /// send), it goes on, and the window holds nobody until a task finishes
    /// again.
    pub fn submit_window(mut self, window: usize) -> Self {
        self.submit_window = window;
        self
    }

    /// Set the scheduling policy.
    pub fn scheduler(mut self, scheduler: Scheduler) -> Self {
        self.scheduler = scheduler;
        self.custom_policy = None;
        self
    }
    /// Schedule with a policy of your own: `build` makes it once the
    /// runtime's workers are known (`PolicyContext`). Replaces the
    /// built-in `scheduler` (a later [`Config::scheduler`] call puts a
    /// built-in one back).
    pub fn custom_policy(mut self, build: PolicyBuilder) -> Self {
        self.custom_policy = Some(build);
        self
    }

    /// Set the number of CPU workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Turn tracing on or off.
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Turn graph recording on or off.
    pub fn record_graph(mut self, on: bool) -> Self {
        self.record_graph = on;
        self
    }

    /// Run `hook` on each worker thread before it takes tasks.
    pub fn on_worker_start(mut self, hook: WorkerHook) -> Self {
        self.on_worker_start = Some(hook);
        self
    }

    /// The victims each CPU worker tries when stealing under `ws` (see
    /// [`Config::steal_order`](#structfield.steal_order)).
    pub fn steal_order(mut self, order: Vec<Vec<usize>>) -> Self {
        self.steal_order = Some(order);
        self
    }

    /// Replace the devices.
    pub fn devices(mut self, devices: Vec<Arc<dyn Device>>) -> Self {
        self.devices = devices;
        self
    }

    /// The NUMA node of each CPU worker.
    pub fn worker_numa(mut self, numa: Vec<usize>) -> Self {
        self.worker_numa = Some(numa);
        self
    }

    /// Share performance models with other runs.
    pub fn perf_models(mut self, perf: Arc<PerfModels>) -> Self {
        self.perf_models = Some(perf);
        self
    }

    /// Time every task for the perf models (or not).
    pub fn calibrate(mut self, on: bool) -> Self {
        self.calibrate = Some(on);
        self
    }

    /// A runtime in simulated time, as rank `node.rank()` of its
    /// simulation: its platform's CPU workers and accelerators (virtual,
    /// no thread), its perf models; waits run the simulation's event loop.
    /// Change the workers or the scheduler afterwards as usual.
    pub fn simulated(node: crate::simulate::SimNode) -> Self {
        Config {
            workers: node.cpu_workers(),
            devices: node.devices(),
            perf_models: Some(std::sync::Arc::clone(node.simulation().perf_models())),
            simulate: Some(node),
            ..Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves that every builder method sets its field, and that the
    //! runtime starts with what they set.
    use super::*;
    use crate::Runtime;

    #[test]
    fn builder_sets_every_field() {
        let c = Config::default()
            .workers(3)
            .scheduler(Scheduler::Prio)
            .trace(true)
            .record_graph(true)
            .worker_numa(vec![0, 0, 0])
            .calibrate(false);
        assert_eq!(c.workers, 3);
        assert_eq!(c.scheduler.name(), "prio");
        assert!(c.trace && c.record_graph && c.calibrate == Some(false));
        let rt = Runtime::new(c).unwrap();
        assert_eq!((rt.workers(), rt.scheduler_name()), (3, "prio"));
    }
}
