//! Tasks: a codelet applied to data accesses. This module holds the engine's
//! view of a submitted task ([`TaskNode`]) and the user's handle on it;
//! `builder` how tasks are described, `context` what a running body sees.

mod builder;
mod context;
mod recycle;

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use builder::{Bound, OnSubmit, Rendezvous, Task, TaskBuilder, Unbound};
pub use context::TaskContext;
pub(crate) use recycle::NodePool;

use crate::access::Access;
use crate::codelet::CodeletRef;
use crate::error::{BodyError, TaskInfo};
use crate::util::lock;

/// A per-task body: runs once, on a worker, with the task's data reachable
/// through the [`TaskContext`].
pub(crate) type Body = Box<dyn FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send>;

/// Run after a task's body succeeded, on the worker that ran it, before its
/// successors are released (the symbolic front-end unfolds successors here).
pub(crate) type Then = Box<dyn FnOnce(u64) -> Result<(), BodyError> + Send>;

/// Life cycle of a task node, stored in `TaskNode::state`.
pub(crate) mod state {
    /// Submitted; waiting for dependencies or in a ready queue.
    pub const SUBMITTED: u8 = 0;
    /// Popped by a worker; the body is being run.
    pub const RUNNING: u8 = 1;
    /// Finished successfully.
    pub const DONE_OK: u8 = 2;
    /// The body panicked or returned an error.
    pub const DONE_FAILED: u8 = 3;
    /// Not run because a predecessor failed or was cancelled.
    pub const DONE_CANCELLED: u8 = 4;
}

/// Successor list of a task, protected by `TaskNode::successors`.
pub(crate) struct Successors {
    /// Set (under the lock) when the task has finished: after that no edge
    /// may be added, the submitter sees the outcome instead.
    pub(crate) done: bool,
    /// Successors, each with whether a failure of this task cancels it: true
    /// for data flow (it reads what this task wrote) and explicit edges,
    /// false for write-after-read and write-after-write ordering edges.
    pub(crate) list: SuccessorList,
    /// Run when the task finishes, before any successor is released (see
    /// [`Hook`]). Empty for nearly every task: a `Vec` costs nothing then.
    pub(crate) hooks: Vec<Hook>,
    /// The data whose last writer (`DepState::last_writer`) this task still
    /// is: its writes at first (each makes it the last writer as it is
    /// submitted), counted down as a later writer takes its place. Read at
    /// the task's end, under this lock (taken then anyway): only if it is
    /// not zero does the worker visit those data's dependency state
    /// (`HandleCore::writer_finished`), whose lines the submitter writes.
    pub(crate) last_writes: u32,
}

/// A callback on a task's end, added after its submission (a distributed
/// run's eager send of what the task wrote: see
/// `Shared::after_last_writer`). It runs on the thread that completes the
/// task, after the task's failure (if any) is recorded and before its
/// successors are released, so no successor has touched the task's data
/// yet; its argument says whether the task succeeded. It must not block
/// and must not take a lock of the submission path (handles' `deps`,
/// tasks' `successors`).
pub(crate) type Hook = Box<dyn FnOnce(bool) + Send>;

/// Most tasks have one or two successors (a chain, a tile read by the next
/// update): kept inline, no allocation per edge.
pub(crate) type SuccessorList = smallvec::SmallVec<[(Arc<TaskNode>, bool); 2]>;

/// Which device a per-task device body is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceMatch {
    /// Any device (the dynamic builder's `device_body`).
    Any,
    /// Devices of one concrete type.
    Type(TypeId),
}

/// The parts of a task that run once and are taken by the worker that runs
/// it. Only that worker touches them (see `TaskNode::take_once`).
#[derive(Default)]
pub(crate) struct Once {
    /// A per-task CPU body (overrides the codelet's).
    pub(crate) cpu: Option<Body>,
    /// A per-task device body (overrides the codelet's for matching devices).
    pub(crate) device: Option<(DeviceMatch, Body)>,
    pub(crate) then: Option<Then>,
}

/// `Once` as a task node stores it: the device body's `DeviceMatch` lives
/// in `TaskNode::device_match` (any thread reads it), not twice.
#[derive(Default)]
struct StoredOnce {
    cpu: Option<Body>,
    device: Option<Body>,
    then: Option<Then>,
}

/// The engine's view of a submitted task.
pub(crate) struct TaskNode {
    pub(crate) id: u64,
    /// The codelet: its identity, bodies and models (shared by all its tasks).
    pub(crate) codelet: CodeletRef,
    /// The task's arguments, as the codelet's bodies expect them (`()` for none).
    pub(crate) params: Box<dyn Any + Send + Sync>,
    /// An explicit label; otherwise the codelet's label function makes one on demand.
    pub(crate) label: Option<Cow<'static, str>>,
    pub(crate) priority: i32,
    pub(crate) flops: f64,
    /// Kept as the builder's `Vec` (shrinking it to a boxed slice would
    /// reallocate once per task).
    pub(crate) accesses: Vec<Access>,
    /// Lengths of the `Vec`s of a typed access list, in declaration order
    /// (usually none: an empty box allocates nothing). A box, not the
    /// builder's inline list: that made every node 8 bytes larger, and
    /// `tessera overhead`'s chain slower.
    pub(crate) lens: Box<[u32]>,
    once: UnsafeCell<StoredOnce>,
    /// Whether `once.device` is set, and for which devices (readable by any
    /// thread, unlike `once`).
    pub(crate) device_match: Option<DeviceMatch>,
    /// Never run on a device (set by the builder, or because some data is host-only).
    pub(crate) cpu_only: bool,
    /// Ordered by its front-end (a symbolic run whose classes describe the
    /// order of their data, `symbolic::DescribedOrder`), not by its data:
    /// its submission skipped the inference, so it is in no handle's
    /// dependency state (no last writer, no reader to count at its end).
    pub(crate) ordered: bool,
    /// Whether it has a CPU body (its own or its codelet's): with no device
    /// body besides, it runs on no simulated accelerator.
    cpu_body: bool,
    /// Run on a worker of this memory node (honoured by `dmda`; see `TaskBuilder::on_node`).
    pub(crate) node_hint: Option<usize>,
    /// `dmda`'s predicted cost of this task on the worker it was given, in ns.
    pub(crate) estimate_ns: AtomicU64,
    /// Its team and its rendezvous, if any: boxed, since few tasks have
    /// either, and every task carries this field (see [`Gang`]).
    gang: Option<Box<Gang>>,
    /// The team size a policy chose (0: none chose; the worker takes the
    /// largest allowed).
    pub(crate) team_target: AtomicUsize,
    /// Unfinished predecessors, plus one held by the submitter until all edges
    /// are in place. The decrement that reaches zero makes the task ready, and
    /// whoever performs it pushes the task to a queue, exactly once.
    pub(crate) pending: AtomicUsize,
    /// Set by a failed or cancelled predecessor before it decrements `pending`.
    pub(crate) cancelled: AtomicBool,
    /// A thread waits for this task in particular (`Runtime::wait`, `unregister`): only
    /// its completion wakes task waiters (see `Shared::finish_one`).
    pub(crate) awaited: AtomicBool,
    pub(crate) state: AtomicU8,
    pub(crate) successors: Mutex<Successors>,
    /// Predecessor ids, kept only when tracing or graph recording is on.
    /// Written by the submitter before the task can become ready.
    /// Boxed: 80 bytes inline would be carried by every task, traced or not.
    pub(crate) preds: OnceLock<Box<crate::preds::PredList>>,
    /// For a cancelled task: the failure that caused it (first one wins).
    pub(crate) cause: OnceLock<Box<str>>,
}

/// What few tasks have: a team, a rendezvous.
struct Gang {
    /// Runs on a team of CPU workers of this size (the task's, else the
    /// codelet's; see `crate::team`).
    team: Option<crate::team::TeamSize>,
    /// Its meeting with tasks of other ranks, for the simulator
    /// (`TaskBuilder::rendezvous`).
    rendezvous: Option<Rendezvous>,
}

/// What a submitted task is made of (see `TaskNode`'s fields).
pub(crate) struct NodeParts {
    pub(crate) codelet: CodeletRef,
    pub(crate) params: Box<dyn Any + Send + Sync>,
    pub(crate) label: Option<Cow<'static, str>>,
    pub(crate) priority: i32,
    pub(crate) flops: f64,
    pub(crate) accesses: Vec<Access>,
    pub(crate) lens: Box<[u32]>,
    pub(crate) once: Once,
    pub(crate) cpu_only: bool,
    pub(crate) ordered: bool,
    pub(crate) node_hint: Option<usize>,
    pub(crate) team: Option<crate::team::TeamSize>,
    pub(crate) rendezvous: Option<Rendezvous>,
}

// SAFETY: `once` is the only non-Sync field; it is reached only by the one
// worker that popped the task (`take_once`'s contract), so sharing
// `&TaskNode` between threads never gives two threads access to it.
unsafe impl Sync for TaskNode {}

impl TaskNode {
    /// Inlined always: see `stf.rs`.
    #[inline(always)]
    pub(crate) fn new(id: u64, p: NodeParts) -> TaskNode {
        let cpu_body = p.once.cpu.is_some() || p.codelet.bodies.cpu.is_some();
        // An ordered task is no handle's last writer.
        let writes = match p.ordered {
            true => 0,
            false => p.accesses.iter().filter(|a| a.mode.writes()).count() as u32,
        };
        TaskNode {
            id,
            codelet: p.codelet,
            params: p.params,
            label: p.label,
            priority: p.priority,
            flops: p.flops,
            accesses: p.accesses,
            lens: p.lens,
            device_match: p.once.device.as_ref().map(|(m, _)| *m),
            once: UnsafeCell::new(StoredOnce {
                cpu: p.once.cpu,
                device: p.once.device.map(|(_, b)| b),
                then: p.once.then,
            }),
            cpu_only: p.cpu_only,
            ordered: p.ordered,
            cpu_body,
            node_hint: p.node_hint,
            estimate_ns: AtomicU64::new(0),
            gang: (p.team.is_some() || p.rendezvous.is_some()).then(|| {
                Box::new(Gang {
                    team: p.team,
                    rendezvous: p.rendezvous,
                })
            }),
            team_target: AtomicUsize::new(0),
            pending: AtomicUsize::new(1),
            cancelled: AtomicBool::new(false),
            awaited: AtomicBool::new(false),
            state: AtomicU8::new(state::SUBMITTED),
            successors: Mutex::new(Successors {
                done: false,
                list: SuccessorList::new(),
                hooks: Vec::new(),
                last_writes: writes,
            }),
            preds: OnceLock::new(),
            cause: OnceLock::new(),
        }
    }

    /// Runs on a team of CPU workers of this size (see `crate::team`).
    #[inline]
    pub(crate) fn team(&self) -> Option<crate::team::TeamSize> {
        self.gang.as_ref().and_then(|g| g.team)
    }

    /// Its meeting with tasks of other ranks (`TaskBuilder::rendezvous`).
    pub(crate) fn rendezvous(&self) -> Option<&Rendezvous> {
        self.gang.as_ref().and_then(|g| g.rendezvous.as_ref())
    }

    /// Drop what a finished task refers to (its data, arguments, label,
    /// predecessor list, team and rendezvous), keeping the allocation for
    /// `NodePool`. The codelet stays referenced until the node is reused or
    /// the runtime is dropped: swapping in a shared placeholder made every
    /// recycle and reuse write one reference count from all threads
    /// (`independent` 0.80 -> 1.11x the old binary). A codelet's bodies must
    /// therefore not own the runtime (a body submits through
    /// `Runtime::submitter`, which holds it weakly).
    pub(crate) fn release_contents(&mut self) {
        self.accesses = Vec::new();
        self.params = Box::new(());
        self.label = None;
        self.lens = Box::default();
        self.preds = OnceLock::new();
        self.cause = OnceLock::new();
        self.gang = None;
        *self.once.get_mut() = StoredOnce::default();
    }

    /// Take the one-shot parts out, marking the task running.
    ///
    /// # Safety
    /// Only the worker that popped this task from a ready queue may call it.
    /// (A task becomes ready exactly once, so at most one worker pops it; the
    /// state check below turns a violation into a panic instead of a race.)
    #[inline]
    pub(crate) unsafe fn take_once(&self) -> Once {
        let prev = self.state.swap(state::RUNNING, Ordering::AcqRel);
        assert_eq!(prev, state::SUBMITTED, "task #{} started twice", self.id);
        // SAFETY: per the contract and the assertion, this thread is the only
        // one to touch `once`, and it does so once.
        let s = unsafe { std::mem::take(&mut *self.once.get()) };
        Once {
            cpu: s.cpu,
            device: self.device_match.zip(s.device),
            then: s.then,
        }
    }

    /// Whether a device body runs on `device`: a dynamic per-task one (for
    /// any device), or a typed one for its type (the task's own, else the
    /// codelet's) — typed device bodies see device views, which exist only
    /// in memory the host cannot address; elsewhere the CPU body runs.
    pub(crate) fn has_device_body(&self, device: &dyn crate::device::Device) -> bool {
        let ty = device.as_any().type_id();
        let raw = device.memory().is_some();
        match self.device_match {
            Some(DeviceMatch::Any) => true,
            Some(DeviceMatch::Type(t)) if t == ty => raw,
            _ => raw && self.codelet.bodies.device(ty).is_some(),
        }
    }

    /// Whether the task may run on memory node `node`: always on the host;
    /// on a device, unless it is CPU-only, its working set can never fit
    /// there (admission control), or the device's memory is not
    /// host-addressable and the task has no body for that device.
    pub(crate) fn can_run_on(&self, mem: &crate::memory::Memory, node: usize) -> bool {
        if mem.is_host(node) {
            return true;
        }
        if self.cpu_only || !mem.fits(node, self.footprint()) {
            return false;
        }
        match mem.device(node) {
            Some(d) if !d.runs(&self.codelet.name) => false,
            Some(d) if d.memory().is_some() => self.has_device_body(&**d),
            // A simulated accelerator stands for a device with memory of its
            // own: only a task with some device body runs there, as on the
            // real device (issue 42: codelets with CPU bodies alone ran on
            // simulated GPUs).
            // A task with no body at all (a workload made up for a
            // simulation) runs anywhere.
            Some(d) if d.as_any().is::<crate::simulate::VirtualDevice>() => {
                self.has_any_device_body() || !self.cpu_body
            }
            _ => true,
        }
    }

    /// Whether the task has a device body for some device: a dynamic
    /// per-task one, its own typed one, or its codelet's.
    fn has_any_device_body(&self) -> bool {
        self.device_match.is_some() || self.codelet.bodies.has_device_body()
    }

    /// The perf-model size key: the codelet's size model, else the flops if
    /// any, else the bytes of the data. Computed where a perf model is used
    /// (`dmda`, calibration, simulation), not at every submission.
    pub(crate) fn size_key(&self) -> u64 {
        match &self.codelet.bodies.size {
            Some(f) => f(&*self.params),
            None if self.flops > 0.0 => self.flops as u64,
            None => self.footprint(),
        }
    }

    /// Bytes of the data this task accesses (replicable data only).
    pub(crate) fn footprint(&self) -> u64 {
        self.accesses.iter().map(|a| a.handle.bytes()).sum()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::SeqCst) >= state::DONE_OK
    }

    /// The label: the explicit one, or the codelet's label of the arguments.
    pub(crate) fn label(&self) -> Option<Cow<'static, str>> {
        match (&self.label, &self.codelet.bodies.label) {
            (Some(l), _) => Some(l.clone()),
            (None, Some(f)) => Some(Cow::Owned(f(&*self.params))),
            (None, None) => None,
        }
    }

    pub(crate) fn info(&self) -> TaskInfo {
        TaskInfo {
            id: self.id,
            codelet: self.codelet.name.clone(),
            label: self.label().map(Cow::into_owned),
        }
    }

    /// The root failure behind this task's failure or cancellation, as text.
    pub(crate) fn root_cause(&self) -> String {
        match self.cause.get() {
            Some(c) => c.to_string(),
            None => format!("{} failed", self.info()),
        }
    }

    /// Cancel this task because of `cause` (a root failure, as text).
    pub(crate) fn cancel(&self, cause: impl FnOnce() -> String) {
        self.cause.get_or_init(|| cause().into_boxed_str());
        // Relaxed: published by the Release decrement of `pending` (or the
        // submitter's) that follows every call.
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub(crate) fn display_name(&self) -> String {
        match self.label() {
            Some(l) => l.into_owned(),
            None => format!("{}#{}", self.codelet.name, self.id),
        }
    }
}

impl Drop for TaskNode {
    /// Successor lists form chains as long as the graph (a 10^5-task chain);
    /// dropping them recursively would overflow the stack, so unlink them
    /// iteratively.
    fn drop(&mut self) {
        let list = &mut self
            .successors
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .list;
        // The usual case: the task ran and `complete` took its successors.
        if list.is_empty() {
            return;
        }
        let list = std::mem::take(list);
        let mut stack: Vec<(Arc<TaskNode>, bool)> = list.into_vec();
        while let Some((node, _)) = stack.pop() {
            if let Some(mut inner) = Arc::into_inner(node) {
                let more = std::mem::take(
                    &mut inner
                        .successors
                        .get_mut()
                        .unwrap_or_else(|e| e.into_inner())
                        .list,
                );
                stack.extend(more);
            }
        }
    }
}

/// A submitted task: wait for it, ask whether it finished.
#[derive(Clone)]
pub struct TaskHandle {
    pub(crate) node: Arc<TaskNode>,
    /// Id of the runtime the task was submitted to.
    pub(crate) runtime: u64,
}

impl TaskHandle {
    /// The task's id (submission order).
    pub fn id(&self) -> u64 {
        self.node.id
    }

    /// Whether the task has finished (successfully or not).
    pub fn is_done(&self) -> bool {
        self.node.is_done()
    }

    /// The task's codelet, id and label.
    pub fn info(&self) -> TaskInfo {
        self.node.info()
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TaskHandle({})", self.node.info())
    }
}

pub(crate) fn lock_successors(node: &TaskNode) -> std::sync::MutexGuard<'_, Successors> {
    lock(&node.successors)
}
