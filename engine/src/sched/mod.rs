//! Scheduling policies: where a ready task waits and which worker takes it.
//!
//! A policy is a trait with a name. The engine asks it for one
//! [`WorkerQueue`] per worker (owned by that worker's thread, so it may hold
//! non-`Sync` state such as a crossbeam deque) and pushes tasks made ready
//! outside any worker (by a submitting thread) through
//! [`SchedulerPolicy::push_external`].

pub(crate) mod dmda;
mod prio;
mod ws;

use std::sync::Arc;

pub use dmda::Dmda;
pub use prio::Priority;
pub use ws::WorkStealing;

use crate::device::Device;
use crate::error::Error;
use crate::memory::Memory;
use crate::perfmodel::PerfModels;
use crate::task::TaskNode;

/// What a worker is: where it computes and on what.
#[derive(Clone)]
pub struct WorkerKind {
    /// Memory node the worker computes on (0: host).
    pub node: usize,
    /// Architecture name (`cpu`, `sim`, `cuda`) for perf models.
    pub arch: &'static str,
    /// The device a device worker drives.
    pub device: Option<Arc<dyn Device>>,
}

impl WorkerKind {
    /// A CPU worker on the host node.
    pub fn cpu() -> WorkerKind {
        WorkerKind {
            node: 0,
            arch: "cpu",
            device: None,
        }
    }

    /// Whether this worker drives a device.
    pub fn is_device(&self) -> bool {
        self.device.is_some()
    }
}

/// A task whose dependencies are all satisfied.
pub struct ReadyTask(pub(crate) Arc<TaskNode>);

impl ReadyTask {
    /// The task's priority (larger first).
    pub fn priority(&self) -> i32 {
        self.0.priority
    }

    /// The task's id (submission order).
    pub fn id(&self) -> u64 {
        self.0.id
    }
}

/// A ready task ordered for a max-heap: higher priority first, then the
/// older task (smaller id), so equal priorities run in submission order.
pub(crate) struct ByPriority(pub(crate) ReadyTask);

impl PartialEq for ByPriority {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for ByPriority {}
impl PartialOrd for ByPriority {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByPriority {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .priority()
            .cmp(&other.0.priority())
            .then_with(|| other.0.id().cmp(&self.0.id()))
    }
}

/// A scheduling policy.
pub trait SchedulerPolicy: Send + Sync {
    /// The policy's name, as given on the command line (`ws`, `prio`).
    fn name(&self) -> &'static str;

    /// The queue worker `worker` will use. Called once per worker at start-up.
    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue>;

    /// A task made ready by a thread that is not a worker.
    fn push_external(&self, task: ReadyTask);

    /// A task that a device worker took but cannot run (host-only data, or
    /// marked CPU-only): it must reach a CPU worker.
    fn push_cpu_only(&self, task: ReadyTask);

    /// Whether pushes go to one chosen worker's queue, so that pushers must
    /// wake every sleeper (the chosen one may be any of them).
    fn targeted(&self) -> bool {
        false
    }

    /// Worker `worker` finished `task` (for queue accounting).
    fn finished(&self, _worker: usize, _task: &ReadyTask) {}
}

/// One worker's end of a policy. Only its worker thread calls it.
pub trait WorkerQueue: Send {
    /// A task this worker made ready (a successor of the task it just ran).
    /// Returns true when the task went to another worker's queue, which the
    /// caller must then wake (targeted policies).
    fn push(&mut self, task: ReadyTask) -> bool;

    /// The next task for this worker, from anywhere the policy allows.
    fn pop(&mut self) -> Option<ReadyTask>;

    /// Whether more tasks are visibly waiting (a hint used to wake an idle worker).
    fn has_more(&self) -> bool;
}

/// The names accepted by [`policy_by_name`].
pub const POLICY_NAMES: &[&str] = &["ws", "prio", "dmda"];

/// Build a policy by name for the given workers; `steal_order` gives each
/// worker's victims in order (for `ws`).
pub(crate) fn policy_by_name(
    name: &str,
    kinds: &[WorkerKind],
    steal_order: Option<&[Vec<usize>]>,
    memory: &Arc<Memory>,
    perf: &Arc<PerfModels>,
) -> Result<Arc<dyn SchedulerPolicy>, Error> {
    let devices: Vec<bool> = kinds.iter().map(WorkerKind::is_device).collect();
    match name {
        "ws" => {
            let order = match steal_order {
                Some(order) => order.to_vec(),
                None => ws::round_robin(kinds.len()),
            };
            Ok(Arc::new(WorkStealing::with_steal_order(order, devices)))
        }
        "prio" => Ok(Arc::new(Priority::new(devices))),
        "dmda" => Ok(Arc::new(Dmda::new(
            kinds.to_vec(),
            Arc::clone(memory),
            Arc::clone(perf),
        ))),
        other => Err(Error::Config(format!(
            "unknown scheduler '{other}' (known: {})",
            POLICY_NAMES.join(", ")
        ))),
    }
}
