//! Tasks: a codelet applied to data accesses, how they are built, and what a
//! body sees while it runs.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::access::AccessMode;
use crate::codelet::Codelet;
use crate::data::{Access, DataHandle, DevicePtr};
use crate::device::Device;
use crate::error::{AccessError, BodyError, TaskInfo};
use crate::util::lock;

/// A task body: runs once, on a worker, with the task's data reachable through
/// the [`TaskContext`].
pub(crate) type Body = Box<dyn FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send>;

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
    pub(crate) list: Vec<(Arc<TaskNode>, bool)>,
}

/// The engine's view of a submitted task.
pub(crate) struct TaskNode {
    pub(crate) id: u64,
    pub(crate) codelet: Codelet,
    pub(crate) label: Option<Box<str>>,
    pub(crate) priority: i32,
    pub(crate) flops: f64,
    pub(crate) accesses: Box<[Access]>,
    /// Only the worker that popped the task from a ready queue touches this,
    /// once (see `take_body`). The CPU body, then the device body.
    body: UnsafeCell<(Option<Body>, Option<Body>)>,
    /// Never run on a device (set by the builder, or because some data is host-only).
    pub(crate) cpu_only: bool,
    /// The task has a device body (the only kind of body that can run on
    /// device memory the host cannot address).
    pub(crate) has_device_body: bool,
    /// Run on a worker of this memory node (honoured by `dmda`; see `TaskBuilder::on_node`).
    pub(crate) node_hint: Option<usize>,
    /// `dmda`'s predicted cost of this task on the worker it was given, in ns.
    pub(crate) estimate_ns: std::sync::atomic::AtomicU64,
    /// Unfinished predecessors, plus one held by the submitter until all edges
    /// are in place. The decrement that reaches zero makes the task ready, and
    /// whoever performs it pushes the task to a queue, exactly once.
    pub(crate) pending: AtomicUsize,
    /// Set by a failed or cancelled predecessor before it decrements `pending`.
    pub(crate) cancelled: AtomicBool,
    pub(crate) state: AtomicU8,
    pub(crate) successors: Mutex<Successors>,
    /// Predecessor ids, kept only when tracing or graph recording is on.
    /// Written by the submitter before the task can become ready.
    pub(crate) preds: OnceLock<crate::preds::PredList>,
    /// For a cancelled task: the failure that caused it (first one wins).
    pub(crate) cause: OnceLock<String>,
}

// SAFETY: `body` is the only non-Sync field; it is reached only by the one
// worker that popped the task (`take_body`'s contract), so sharing
// `&TaskNode` between threads never gives two threads access to it.
unsafe impl Sync for TaskNode {}

impl TaskNode {
    pub(crate) fn new(id: u64, b: TaskBuilderParts, accesses: Box<[Access]>) -> TaskNode {
        let cpu_only = b.cpu_only || accesses.iter().any(|a| !a.handle.replicable());
        TaskNode {
            id,
            codelet: b.codelet,
            label: b.label,
            priority: b.priority,
            flops: b.flops,
            accesses,
            cpu_only,
            has_device_body: b.device_body.is_some(),
            node_hint: b.node_hint,
            body: UnsafeCell::new((b.body, b.device_body)),
            estimate_ns: std::sync::atomic::AtomicU64::new(0),
            pending: AtomicUsize::new(1),
            cancelled: AtomicBool::new(false),
            state: AtomicU8::new(state::SUBMITTED),
            successors: Mutex::new(Successors {
                done: false,
                list: Vec::new(),
            }),
            preds: OnceLock::new(),
            cause: OnceLock::new(),
        }
    }

    /// Take the body out, marking the task running.
    ///
    /// # Safety
    /// Only the worker that popped this task from a ready queue may call it.
    /// (A task becomes ready exactly once, so at most one worker pops it; the
    /// state check below turns a violation into a panic instead of a race.)
    pub(crate) unsafe fn take_body(&self) -> (Option<Body>, Option<Body>) {
        let prev = self.state.swap(state::RUNNING, Ordering::AcqRel);
        assert_eq!(prev, state::SUBMITTED, "task #{} started twice", self.id);
        // SAFETY: per the contract and the assertion, this thread is the only
        // one to touch `body`, and it does so once.
        unsafe { std::mem::take(&mut *self.body.get()) }
    }

    /// Whether the task may run on memory node `node`: always on the host;
    /// on a device, unless it is CPU-only, its working set can never fit
    /// there (admission control), or the device's memory is not
    /// host-addressable and the task has no device body.
    pub(crate) fn can_run_on(&self, mem: &crate::memory::Memory, node: usize) -> bool {
        mem.is_host(node)
            || (!self.cpu_only
                && mem.fits(node, self.footprint())
                && (self.has_device_body || mem.device_memory(node).is_none()))
    }

    /// Bytes of the data this task accesses (replicable data only).
    pub(crate) fn footprint(&self) -> u64 {
        self.accesses.iter().map(|a| a.handle.bytes()).sum()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::SeqCst) >= state::DONE_OK
    }

    pub(crate) fn info(&self) -> TaskInfo {
        TaskInfo {
            id: self.id,
            codelet: self.codelet.name().to_string(),
            label: self.label.as_deref().map(str::to_string),
        }
    }

    /// The root failure behind this task's failure or cancellation, as text.
    pub(crate) fn root_cause(&self) -> String {
        match self.cause.get() {
            Some(c) => c.clone(),
            None => format!("{} failed", self.info()),
        }
    }

    /// Cancel this task because of `cause` (a root failure, as text).
    pub(crate) fn cancel(&self, cause: impl FnOnce() -> String) {
        self.cause.get_or_init(cause);
        // Relaxed: published by the Release decrement of `pending` (or the
        // submitter's) that follows every call.
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub(crate) fn display_name(&self) -> String {
        match &self.label {
            Some(l) => l.to_string(),
            None => format!("{}#{}", self.codelet.name(), self.id),
        }
    }
}

impl Drop for TaskNode {
    /// Successor lists form chains as long as the graph (a 10^5-task chain);
    /// dropping them recursively would overflow the stack, so unlink them
    /// iteratively.
    fn drop(&mut self) {
        let list = std::mem::take(
            &mut self
                .successors
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .list,
        );
        let mut stack = list;
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

/// The parts of a task description, before the runtime gives it an id.
pub(crate) struct TaskBuilderParts {
    pub(crate) codelet: Codelet,
    pub(crate) label: Option<Box<str>>,
    pub(crate) priority: i32,
    pub(crate) flops: f64,
    pub(crate) body: Option<Body>,
    pub(crate) device_body: Option<Body>,
    pub(crate) cpu_only: bool,
    pub(crate) node_hint: Option<usize>,
}

/// Describes one task: its codelet, its data accesses, priority and body.
/// Hand it to [`Runtime::submit`](crate::Runtime::submit).
pub struct TaskBuilder {
    pub(crate) parts: TaskBuilderParts,
    pub(crate) accesses: Vec<Access>,
    pub(crate) access_ids: Vec<u64>,
    pub(crate) after: Vec<TaskHandle>,
    /// Dependencies already satisfied outside the engine (by the symbolic
    /// front-end), recorded in traces and DOT but not enforced.
    pub(crate) satisfied_preds: Vec<u64>,
}

impl TaskBuilder {
    /// A task applying `codelet`, with no data, priority 0 and no body.
    pub fn new(codelet: &Codelet) -> TaskBuilder {
        TaskBuilder {
            parts: TaskBuilderParts {
                codelet: codelet.clone(),
                label: None,
                priority: 0,
                flops: 0.0,
                body: None,
                device_body: None,
                cpu_only: false,
                node_hint: None,
            },
            accesses: Vec::new(),
            access_ids: Vec::new(),
            after: Vec::new(),
            satisfied_preds: Vec::new(),
        }
    }

    /// Declare an access to `handle` with `mode`.
    pub fn access<T: Send + Sync + 'static>(
        mut self,
        handle: &DataHandle<T>,
        mode: AccessMode,
    ) -> Self {
        self.accesses.push(Access {
            handle: handle.erased(),
            mode,
        });
        self.access_ids.push(handle.id());
        self
    }

    /// Declare a read-only access.
    pub fn read<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::R)
    }

    /// Declare a write-only access.
    pub fn write<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::W)
    }

    /// Declare a read-write access.
    pub fn rw<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::RW)
    }

    /// Larger runs earlier under the `prio` policy.
    pub fn priority(mut self, priority: i32) -> Self {
        self.parts.priority = priority;
        self
    }

    /// A label for traces and error messages, e.g. `gemm(3,4,5)`.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.parts.label = Some(label.into().into_boxed_str());
        self
    }

    /// Floating-point operations this task performs (cost hint for statistics).
    pub fn flops(mut self, flops: f64) -> Self {
        self.parts.flops = flops;
        self
    }

    /// An explicit dependency on an already submitted task, beside the ones
    /// inferred from data.
    pub fn after(mut self, task: &TaskHandle) -> Self {
        self.after.push(task.clone());
        self
    }

    /// The CPU body. It gets the [`TaskContext`] and returns `Ok(())` or an
    /// error, which fails the task like a panic does.
    pub fn body<F>(mut self, f: F) -> Self
    where
        F: FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send + 'static,
    {
        self.parts.body = Some(Box::new(f));
        self
    }

    /// A body for device workers (a GPU kernel launch, say). Without one, a
    /// device runs the CPU body on its own replicas (the sim device). If the
    /// device body fails, the task falls back to the CPU body (Cashmere).
    pub fn device_body<F>(mut self, f: F) -> Self
    where
        F: FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send + 'static,
    {
        self.parts.device_body = Some(Box::new(f));
        self
    }

    /// Placement hint: run on a worker of memory node `node` (host NUMA
    /// nodes first, then devices; with one NUMA node, 0 is the host and
    /// `d + 1` is device `d`). `dmda` honours it; `ws` and `prio` only
    /// keep tasks hinted to the host off devices. A hint naming a node the
    /// runtime does not have is ignored.
    pub fn on_node(mut self, node: usize) -> Self {
        self.parts.node_hint = Some(node);
        self
    }

    /// Keep this task on CPU workers.
    pub fn cpu_only(mut self) -> Self {
        self.parts.cpu_only = true;
        self
    }

    /// The name used in messages before the task has an id.
    pub(crate) fn display_name(&self) -> String {
        match &self.parts.label {
            Some(l) => l.to_string(),
            None => self.parts.codelet.name().to_string(),
        }
    }
}

/// Per-access borrow state inside one body run: 0 free, n shared reads,
/// `EXCLUSIVE` handed out as `&mut`.
const EXCLUSIVE: u32 = u32::MAX;

/// What a running body sees: typed access to the data its task declared.
///
/// Asking for a handle the task did not declare, writing one declared R,
/// reading one declared W, or asking twice in a way that would alias a `&mut`
/// gives an [`AccessError`] naming the task and the handle.
pub struct TaskContext<'t> {
    node: &'t TaskNode,
    /// Memory node whose replicas this body sees.
    mem_node: crate::memory::NodeId,
    sleep: &'t crate::sleep::Sleep,
    borrows: Box<[Cell<u32>]>,
    worker: usize,
    /// The device whose node `mem_node` is, when the body runs on it.
    device: Option<&'t Arc<dyn Device>>,
    /// `mem_node` is device memory the host cannot address: no typed
    /// access, only `device_parts`.
    raw: bool,
}

impl<'t> TaskContext<'t> {
    pub(crate) fn new(
        node: &'t TaskNode,
        worker: usize,
        mem_node: crate::memory::NodeId,
        sleep: &'t crate::sleep::Sleep,
        device: Option<&'t Arc<dyn Device>>,
    ) -> Self {
        let borrows = (0..node.accesses.len()).map(|_| Cell::new(0)).collect();
        let raw = device.is_some_and(|d| d.memory().is_some());
        TaskContext {
            node,
            mem_node,
            sleep,
            borrows,
            worker,
            device,
            raw,
        }
    }

    /// The device this body runs on (`None` on a CPU worker or for a CPU
    /// body). A device body downcasts it (`as_any`) to reach the device's
    /// streams and library handles.
    pub fn device(&self) -> Option<&'t dyn Device> {
        self.device.map(|d| &**d)
    }

    /// Whether this body runs on device memory the host cannot address (a
    /// GPU's): then it reaches its data with [`device_parts`](Self::device_parts),
    /// not `read`/`write`.
    pub fn on_device_memory(&self) -> bool {
        self.raw
    }

    /// Where the replica of a declared handle lies in the device's own
    /// memory: one [`DevicePtr`] per part of the value
    /// ([`Replicate::parts`](crate::memory::Replicate::parts)). Only on a
    /// device whose memory the host cannot address (a GPU); writing through
    /// the pointers is the body's promise that it declared W or RW.
    pub fn device_parts<T: Send + Sync + 'static>(
        &self,
        h: &DataHandle<T>,
    ) -> Result<Vec<DevicePtr>, AccessError> {
        self.find(h)?;
        if !self.raw {
            return Err(AccessError(format!(
                "task '{}' asked for the device memory of data '{}', but it runs on host-addressable memory (node {}): use read/write",
                self.node.display_name(),
                h.name(),
                self.mem_node
            )));
        }
        // SAFETY: the task declared the handle and is running, so its replica
        // on this node is acquired and pinned until the body returns.
        unsafe { h.device_ptrs(self.mem_node) }.ok_or_else(|| {
            AccessError(format!(
                "data '{}' has no replica in device memory on node {}",
                h.name(),
                self.mem_node
            ))
        })
    }

    fn host_addressable<T>(&self, h: &DataHandle<T>) -> Result<(), AccessError> {
        if self.raw {
            return Err(AccessError(format!(
                "task '{}': data '{}' is in device memory on node {}, which the host cannot address; a device body reaches it with device_parts",
                self.node.display_name(),
                h.name(),
                self.mem_node
            )));
        }
        Ok(())
    }

    /// Index of the worker running this body.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The memory node whose replicas this body sees (0: host).
    pub fn memory_node(&self) -> usize {
        self.mem_node
    }

    /// Workers of this runtime that are idle right now (a hint, possibly
    /// stale): a body on the critical path may borrow their cores for inner
    /// parallelism, e.g. a tall LU panel.
    pub fn idle_workers(&self) -> usize {
        self.sleep.sleepers()
    }

    /// The task's id.
    pub fn task_id(&self) -> u64 {
        self.node.id
    }

    fn find<T>(&self, h: &DataHandle<T>) -> Result<usize, AccessError> {
        let target = Arc::as_ptr(&h.inner) as *const ();
        self.node
            .accesses
            .iter()
            .position(|a| Arc::as_ptr(&a.handle) as *const () == target)
            .ok_or_else(|| {
                AccessError(format!(
                    "task '{}' did not declare data '{}'",
                    self.node.display_name(),
                    h.name()
                ))
            })
    }

    /// Shared access to a handle declared R or RW.
    pub fn read<'a, T: Send + Sync + 'static>(
        &'a self,
        h: &'a DataHandle<T>,
    ) -> Result<&'a T, AccessError> {
        let i = self.find(h)?;
        self.host_addressable(h)?;
        let mode = self.node.accesses[i].mode;
        if !mode.reads() {
            return Err(AccessError(format!(
                "task '{}' declared data '{}' {}, so it may not read it",
                self.node.display_name(),
                h.name(),
                mode
            )));
        }
        let b = self.borrows[i].get();
        if b == EXCLUSIVE {
            return Err(AccessError(format!(
                "task '{}' already holds data '{}' mutably",
                self.node.display_name(),
                h.name()
            )));
        }
        self.borrows[i].set(b + 1);
        // SAFETY: the task declared the handle (found above) and is running,
        // so by the data module invariant no writer of it runs concurrently;
        // within this body, `borrows` forbids a `&mut` while this `&` lives
        // (a borrow is never released during the body).
        Ok(unsafe { &*h.value_ptr(self.mem_node) })
    }

    /// Exclusive access to a handle declared W or RW. Can be taken once per body.
    // `&mut` from `&self` is the point of the context: the exclusivity that
    // the borrow checker cannot see comes from the task's declared access
    // (no concurrent task touches the handle) and `borrows` (one `&mut` per
    // handle per body), both checked at run time.
    #[allow(clippy::mut_from_ref)]
    pub fn write<'a, T: Send + Sync + 'static>(
        &'a self,
        h: &'a DataHandle<T>,
    ) -> Result<&'a mut T, AccessError> {
        let i = self.find(h)?;
        self.host_addressable(h)?;
        let mode = self.node.accesses[i].mode;
        if !mode.writes() {
            return Err(AccessError(format!(
                "task '{}' declared data '{}' R, so it may not write it",
                self.node.display_name(),
                h.name()
            )));
        }
        if self.borrows[i].get() != 0 {
            return Err(AccessError(format!(
                "task '{}' already borrowed data '{}' in this body",
                self.node.display_name(),
                h.name()
            )));
        }
        self.borrows[i].set(EXCLUSIVE);
        // SAFETY: the task declared the handle in a writing mode and is
        // running, so no other task touching it runs concurrently; within
        // this body, `borrows` makes this the only reference to the value.
        Ok(unsafe { &mut *h.value_ptr(self.mem_node) })
    }

    /// Same as [`write`](Self::write): the access for an RW handle.
    pub fn rw<'a, T: Send + Sync + 'static>(
        &'a self,
        h: &'a DataHandle<T>,
    ) -> Result<&'a mut T, AccessError> {
        self.write(h)
    }
}

pub(crate) fn lock_successors(node: &TaskNode) -> std::sync::MutexGuard<'_, Successors> {
    lock(&node.successors)
}
