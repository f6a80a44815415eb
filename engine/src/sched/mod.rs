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
use crate::memory::Memory;
use crate::perfmodel::PerfModels;
use crate::task::TaskNode;

/// What a worker is: where it computes and on what.
#[derive(Clone)]
pub struct WorkerKind {
    /// Memory node the worker computes on (0: host).
    pub node: usize,
    /// Architecture name (`cpu`, `emu`, `cuda`) for perf models.
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
// transparent: `ReadyTask::of` views an `Arc<TaskNode>` as one.
#[repr(transparent)]
pub struct ReadyTask(pub(crate) Arc<TaskNode>);

impl ReadyTask {
    /// `node` seen as a ready task, for the policy hooks that take one by
    /// reference (`finished`) after it has run: without cloning the `Arc`
    /// (two atomic operations per task on the hot path, issue 25).
    pub(crate) fn of(node: &Arc<TaskNode>) -> &ReadyTask {
        // SAFETY: `ReadyTask` is `repr(transparent)` over `Arc<TaskNode>`,
        // so both have the same layout, and the borrow keeps `node`'s
        // lifetime.
        unsafe { &*(node as *const Arc<TaskNode>).cast::<ReadyTask>() }
    }

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

/// Where a push put a task, so the pusher knows whom to wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Into the pushing worker's own queue (other workers may steal it).
    Local,
    /// Into a queue any worker may take from.
    Shared,
    /// Into the private queue of worker `w`, which only `w` pops.
    Worker(usize),
    /// Kept by the pushing worker, which runs it next
    /// ([`WorkerQueue::push_next`]): nobody is woken for it.
    Kept,
}

/// A scheduling policy.
pub trait SchedulerPolicy: Send + Sync {
    /// The policy's name, as given on the command line (`ws`, `prio`, `dmda`).
    fn name(&self) -> &'static str;

    /// The queue worker `worker` will use. Called once per worker at start-up.
    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue>;

    /// A task made ready by a thread that is not a worker.
    fn push_external(&self, task: ReadyTask) -> Pushed;

    /// A task that a device worker took but cannot run (host-only data, or
    /// marked CPU-only): it must reach a CPU worker.
    fn push_cpu_only(&self, task: ReadyTask) -> Pushed;

    /// Worker `worker` finished `task` (for queue accounting).
    fn finished(&self, _worker: usize, _task: &ReadyTask) {}

    /// `produced` finished, and its successor `succ`, placed on memory node
    /// `node` (`TaskBuilder::on_node`), still waits for other predecessors:
    /// the data `produced` wrote and `succ` reads may move to `node` now.
    /// The default does nothing; `dmda` hands it to the node's copy thread.
    fn prefetch_produced(&self, _produced: &ReadyTask, _succ: &ReadyTask, _node: usize) {}

    /// A device worker's task wrote data marked write-through
    /// (`DataHandle::set_write_through`) on memory node `node`: copy it
    /// back to the host. This default copies at once, on the calling
    /// worker's thread; `dmda` hands it to the device's copy thread.
    fn write_back(&self, task: &ReadyTask, _node: usize) {
        write_back_now(&task.0);
    }
}

/// Make the host replica of each write-through datum `task` wrote, and of
/// each it wrote last (`DataHandle::wont_write`), valid again (a copy from
/// where it was written; not pinned).
pub(crate) fn write_back_now(task: &TaskNode) {
    for a in task
        .accesses
        .iter()
        .filter(|a| a.mode.writes() && a.core().writes_home(task.id))
    {
        // Best effort: a failure leaves the device's copy the valid one,
        // written back when evicted, as without write-through.
        let _ = a.handle.acquire(
            &a.handle,
            crate::memory::HOST,
            crate::access::AccessMode::R,
            false,
        );
    }
}

/// Make valid on `node` (not pinned) the data `produced` wrote that `succ`
/// reads: no later writer can come between them in submission order, so
/// the copy is of the value `succ` will read.
pub(crate) fn prefetch_between(produced: &TaskNode, succ: &TaskNode, node: usize) {
    let mut wrote: Vec<u64> = produced
        .accesses
        .iter()
        .filter(|a| a.mode.writes() && !a.handle.valid_on(node))
        .map(|a| a.core().id)
        .collect();
    if wrote.is_empty() {
        return;
    }
    wrote.sort_unstable();
    for b in succ.accesses.iter().filter(|b| b.mode.reads()) {
        if wrote.binary_search(&b.core().id).is_ok() {
            // Best effort, as a prefetch: no room now leaves it to the task.
            let _ = b
                .handle
                .acquire(&b.handle, node, crate::access::AccessMode::R, false);
        }
    }
}

/// Whether `task` wrote write-through data, or data it wrote last
/// (`DataHandle::wont_write`) (see `write_back`).
pub(crate) fn writes_through(task: &TaskNode) -> bool {
    task.accesses
        .iter()
        .any(|a| a.mode.writes() && a.core().writes_home(task.id))
}

/// One worker's end of a policy. Only its worker thread calls it.
pub trait WorkerQueue: Send {
    /// A task this worker made ready (a successor of the task it just ran,
    /// or one its body submitted). Never `Pushed::Worker(self)`: a push into
    /// this worker's own queue is `Local`.
    fn push(&mut self, task: ReadyTask) -> Pushed;

    /// A task this worker made ready after its body ended (its successor,
    /// released by its end), when the worker pops next: the policy may keep
    /// it out of other workers' reach for [`pop`](Self::pop) to return next
    /// (`Pushed::Kept`), as `ws` does, saving the queue round trip and the
    /// theft of a chain's next task by a worker that is between two tasks
    /// of its own chain. The default pushes as [`push`](Self::push).
    fn push_next(&mut self, task: ReadyTask) -> Pushed {
        self.push(task)
    }

    /// The task [`push_next`](Self::push_next) kept, taken back (the worker
    /// is about to do something else first: join a team).
    fn take_kept(&mut self) -> Option<ReadyTask> {
        None
    }

    /// Whether a task is kept for this worker's next pop.
    fn has_kept(&self) -> bool {
        false
    }

    /// The next task for this worker, from anywhere the policy allows.
    fn pop(&mut self) -> Option<ReadyTask>;

    /// Whether more tasks are visibly waiting for other workers too (a hint
    /// used to wake an idle worker; a kept task is not one).
    fn has_more(&self) -> bool;
}

/// What a custom policy is built from: the runtime's workers.
pub struct PolicyContext<'a> {
    /// What each worker is (CPU workers first, then one per device).
    pub workers: &'a [WorkerKind],
    /// The victims each worker should try first when stealing (NUMA order).
    pub steal_order: &'a [Vec<usize>],
}

/// Builds a custom policy for a runtime's workers.
pub type PolicyBuilder = Arc<dyn Fn(&PolicyContext<'_>) -> Arc<dyn SchedulerPolicy> + Send + Sync>;

/// Which built-in scheduling policy a runtime uses (`Config::scheduler`; a
/// policy of your own goes in with `Config::custom_policy`). A plain value:
/// `Copy`, comparable, parsed from its name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// Locality-aware work stealing ([`WorkStealing`]).
    Ws,
    /// Priority first, for look-ahead ([`Priority`]).
    Prio,
    /// Minimum expected completion time with data transfers and perf models ([`Dmda`]).
    Dmda,
}

impl Scheduler {
    /// The names of the built-in policies, as `FromStr` takes them.
    pub const NAMES: [&'static str; 3] = ["ws", "prio", "dmda"];

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Scheduler::Ws => "ws",
            Scheduler::Prio => "prio",
            Scheduler::Dmda => "dmda",
        }
    }

    /// Whether this policy places tasks by their data and the perf models
    /// (then tasks are timed by default).
    pub fn is_data_aware(&self) -> bool {
        matches!(self, Scheduler::Dmda)
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scheduler {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ws" => Ok(Scheduler::Ws),
            "prio" => Ok(Scheduler::Prio),
            "dmda" => Ok(Scheduler::Dmda),
            other => Err(format!(
                "unknown scheduler '{other}' (known: {})",
                Scheduler::NAMES.join(", ")
            )),
        }
    }
}

/// Build `scheduler`'s policy (or `custom`'s, where given) for the given
/// workers; `steal_order` gives each worker's victims in order (for `ws`).
pub(crate) fn build_policy(
    scheduler: Scheduler,
    custom: Option<&PolicyBuilder>,
    kinds: &[WorkerKind],
    steal_order: Option<&[Vec<usize>]>,
    memory: &Arc<Memory>,
    perf: &Arc<PerfModels>,
) -> Arc<dyn SchedulerPolicy> {
    let devices: Vec<bool> = kinds.iter().map(WorkerKind::is_device).collect();
    let order = match steal_order {
        Some(order) => order.to_vec(),
        None => ws::round_robin(kinds.len()),
    };
    if let Some(build) = custom {
        return build(&PolicyContext {
            workers: kinds,
            steal_order: &order,
        });
    }
    match scheduler {
        Scheduler::Ws => Arc::new(WorkStealing::for_workers(order, kinds)),
        Scheduler::Prio => Arc::new(Priority::new(devices)),
        Scheduler::Dmda => Arc::new(Dmda::new(
            kinds.to_vec(),
            Arc::clone(memory),
            Arc::clone(perf),
        )),
    }
}

#[cfg(test)]
mod tests {
    //! Proves the policies' contracts that do not need a running runtime:
    //! priority order (FIFO among equals), policy names, `ws`'s victim
    //! order, and where each policy says a push went.
    use super::*;
    use crate::codelet::Codelet;
    use crate::task::{NodeParts, Once, TaskNode};

    fn task(id: u64, priority: i32) -> ReadyTask {
        let cl: Codelet = Codelet::new("t");
        ReadyTask(Arc::new(TaskNode::new(
            id,
            NodeParts {
                codelet: Arc::clone(&cl.info),
                params: Box::new(()),
                label: None,
                priority,
                flops: 0.0,
                accesses: Vec::new(),
                lens: Box::new([]),
                once: Once::default(),
                cpu_only: false,
                ordered: false,
                node_hint: None,
                team: None,
                rendezvous: None,
            },
        )))
    }

    #[test]
    fn priority_then_submission_order() {
        let mut heap = std::collections::BinaryHeap::new();
        for (id, p) in [(0, 1), (1, 5), (2, 1), (3, 5), (4, 0)] {
            heap.push(ByPriority(task(id, p)));
        }
        let order: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|e| e.0.id())).collect();
        assert_eq!(order, [1, 3, 0, 2, 4]);
    }

    #[test]
    fn names_parse_and_unknown_is_an_error() {
        for n in Scheduler::NAMES {
            assert_eq!(n.parse::<Scheduler>().unwrap().name(), n);
        }
        let e = "fifo".parse::<Scheduler>().unwrap_err();
        assert!(e.contains("fifo") && e.contains("ws, prio, dmda"), "{e}");
    }

    #[test]
    fn round_robin_skips_self() {
        assert_eq!(ws::round_robin(3), vec![vec![1, 2], vec![2, 0], vec![0, 1]]);
    }

    #[test]
    fn pushes_say_where_they_went() {
        let cpu = vec![false, false];
        let wsp = WorkStealing::with_steal_order(ws::round_robin(2), cpu.clone());
        let mut q0 = wsp.worker_queue(0);
        let mut q1 = wsp.worker_queue(1);
        assert_eq!(q0.push(task(0, 0)), Pushed::Local);
        assert_eq!(wsp.push_external(task(1, 0)), Pushed::Shared);
        // Worker 1 takes the shared task first, then steals worker 0's.
        assert_eq!(q1.pop().map(|t| t.id()), Some(1));
        assert_eq!(q1.pop().map(|t| t.id()), Some(0));
        assert!(q1.pop().is_none() && q0.pop().is_none());

        let prio = Priority::new(cpu);
        let mut p0 = prio.worker_queue(0);
        assert_eq!(p0.push(task(0, 1)), Pushed::Shared);
        assert_eq!(prio.push_external(task(1, 9)), Pushed::Shared);
        assert_eq!(p0.pop().map(|t| t.id()), Some(1));
    }

    /// `ws` keeps the newest `push_next` for its worker's next pop, out of
    /// thieves' reach; an older one goes to the deque. A device worker and
    /// the other policies keep nothing.
    #[test]
    fn push_next_keeps_the_newest_for_the_pusher() {
        let wsp = WorkStealing::with_steal_order(ws::round_robin(3), vec![false, false, true]);
        let (mut q0, mut q1, mut q2) = (
            wsp.worker_queue(0),
            wsp.worker_queue(1),
            wsp.worker_queue(2),
        );
        assert_eq!(q0.push_next(task(0, 0)), Pushed::Kept);
        assert!(
            q0.has_kept() && !q0.has_more(),
            "a kept task is not offered"
        );
        assert!(q1.pop().is_none(), "a kept task cannot be stolen");
        // The older one goes where thieves find it.
        assert_eq!(q0.push_next(task(1, 0)), Pushed::Local);
        assert!(q0.has_more());
        assert_eq!(q1.pop().map(|t| t.id()), Some(0));
        assert_eq!(q0.pop().map(|t| t.id()), Some(1));
        assert!(!q0.has_kept() && q0.pop().is_none());
        // Taken back, it is no longer kept.
        q0.push_next(task(2, 0));
        assert_eq!(q0.take_kept().map(|t| t.id()), Some(2));
        assert!(q0.pop().is_none());
        // A device worker keeps nothing.
        assert_eq!(q2.push_next(task(3, 0)), Pushed::Local);
        assert!(!q2.has_kept());
        assert_eq!(q1.pop().map(|t| t.id()), Some(3));

        let prio = Priority::new(vec![false; 2]);
        let mut p0 = prio.worker_queue(0);
        assert_eq!(p0.push_next(task(4, 0)), Pushed::Shared);
        assert!(!p0.has_kept());
    }

    #[test]
    fn custom_policy_is_built_for_the_workers() {
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let s2 = Arc::clone(&seen);
        let custom: PolicyBuilder = Arc::new(move |ctx: &PolicyContext<'_>| {
            s2.store(ctx.workers.len(), std::sync::atomic::Ordering::SeqCst);
            Arc::new(Priority::new(vec![false; ctx.workers.len()])) as Arc<dyn SchedulerPolicy>
        });
        let kinds = vec![WorkerKind::cpu(); 3];
        let mem = Arc::new(Memory::new(1, Vec::new(), None));
        let perf = Arc::new(PerfModels::new(crate::perfmodel::PerfModelConfig::default()));
        // The custom builder wins over the built-in choice.
        let p = build_policy(Scheduler::Ws, Some(&custom), &kinds, None, &mem, &perf);
        assert_eq!(p.name(), "prio");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn schedulers_are_plain_values() {
        // Issue 42: `Scheduler` was not `Copy` (it held a custom builder).
        fn copy<T: Copy + Eq>(t: T) -> (T, T) {
            (t, t)
        }
        let (a, b) = copy(Scheduler::Dmda);
        assert_eq!(a, b);
        for name in Scheduler::NAMES {
            let s: Scheduler = name.parse().unwrap();
            assert_eq!(s.name(), name);
        }
    }
}
