//! Data handles: user data registered with the runtime, and the per-handle
//! state from which dependencies are inferred.
//!
//! Invariant (checked at submission, relied on by [`TaskContext`](crate::TaskContext)):
//! the value inside a handle is touched only by the body of a task that
//! declared the handle, while that task runs, or by `Runtime::unregister`
//! once every task that declared it has finished and no new one can be
//! submitted. Dependencies guarantee that a task declaring W/RW never runs
//! beside another task declaring the same handle, so `&mut T` is exclusive.

use std::cell::UnsafeCell;
use std::sync::{Arc, Mutex, Weak};

use crate::access::AccessMode;
use crate::device::{DeviceBuffer, DeviceMemory};
use crate::memory::{Memory, NodeId, Replicate, HOST};
use crate::task::TaskNode;
use crate::util::lock;

/// A task as remembered by a handle: weakly (a finished task may be freed),
/// with its id kept for traces and DOT export.
pub(crate) struct TaskRef {
    pub(crate) node: Weak<TaskNode>,
    pub(crate) id: u64,
}

impl TaskRef {
    pub(crate) fn new(node: &Arc<TaskNode>) -> TaskRef {
        TaskRef {
            node: Arc::downgrade(node),
            id: node.id,
        }
    }
}

/// Dependency state of one handle: who last wrote it, who read it since.
/// Protected by `HandleCore::deps`; see `Runtime::submit` for the lock order.
pub(crate) struct DepState {
    /// The last task that declared W or RW (weak: a finished task may be freed,
    /// and a freed task can never be a dependency again).
    pub(crate) last_writer: Option<TaskRef>,
    /// Readers submitted since the last writer.
    pub(crate) readers: Vec<TaskRef>,
    /// `readers` is pruned of finished tasks when it reaches this length, so a
    /// handle that is only ever read does not grow without bound.
    prune_at: usize,
    /// Set when the last writer failed or was cancelled: later readers are
    /// cancelled too. A task declaring W (not RW) clears it.
    pub(crate) poisoned_by: Option<String>,
    /// Set by `unregister`: no task may be submitted on the handle any more.
    pub(crate) unregistered: bool,
}

impl DepState {
    pub(crate) fn push_reader(&mut self, reader: TaskRef) {
        if self.readers.len() >= self.prune_at {
            // Pruned readers are finished; only their (untraced) WAR edges are lost.
            self.readers
                .retain(|r| r.node.upgrade().is_some_and(|t| !t.is_done()));
            self.prune_at = (self.readers.len() * 2).max(64);
        }
        self.readers.push(reader);
    }
}

/// The type-erased part of a handle that the engine works with.
pub(crate) struct HandleCore {
    pub(crate) id: u64,
    pub(crate) runtime_id: u64,
    pub(crate) name: Option<String>,
    pub(crate) deps: Mutex<DepState>,
}

impl HandleCore {
    pub(crate) fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => format!("data#{}", self.id),
        }
    }
}

/// Implemented by every `HandleInner<T>`, so tasks can hold handles of mixed types.
pub(crate) trait AnyHandle: Send + Sync {
    fn core(&self) -> &HandleCore;

    /// Whether the data can have replicas off the host (`Replicate` types).
    fn replicable(&self) -> bool;

    /// Bytes of one replica (0 for host-only data).
    fn bytes(&self) -> u64;

    /// Whether `node` holds a valid replica.
    fn valid_on(&self, node: NodeId) -> bool;

    /// Bit `n` set: node `n` holds a valid replica.
    fn valid_mask(&self) -> u64;

    /// Make the data usable on `node` for `mode` (see `memory.rs`), pinning
    /// the replica when `pin`. `me` is this handle, for the node's LRU list.
    fn acquire(
        &self,
        me: &Arc<dyn AnyHandle>,
        node: NodeId,
        mode: AccessMode,
        mem: &Memory,
        pin: bool,
    ) -> Result<(), String>;

    /// Unpin after a task; a write leaves `node`'s replica the only valid one.
    fn release(&self, node: NodeId, mode: AccessMode);

    /// Undo an `acquire` whose task never ran: unpin, validity unchanged.
    fn unpin(&self, node: NodeId, mode: AccessMode);

    /// LRU stamp of the replica on `node`, if one is allocated there.
    fn last_use(&self, node: NodeId) -> Option<u64>;

    /// After a failed device body: unpin `node`'s replica and, for a write,
    /// mark it invalid — possible only if another valid copy exists (returns
    /// false otherwise: the data cannot be trusted anywhere).
    fn discard(&self, node: NodeId, mode: AccessMode) -> bool;

    /// Free the replica on `node` if it is not pinned and the handle is not
    /// busy (writing it back to the host first if it is the only valid one).
    /// Returns the bytes freed.
    fn try_evict(&self, node: NodeId, mem: &Memory) -> Option<u64>;
}

/// Host memory is never evicted (it is the backing store).
fn mem_is_host(mem: &Memory, node: NodeId) -> bool {
    mem.is_host(node)
}

/// How to copy a `Replicate` type, captured at registration as plain
/// function pointers so `HandleInner<T>` needs no trait bound.
pub(crate) struct ReplicaFns<T> {
    pub(crate) replicate: fn(&T) -> T,
    pub(crate) copy_from: fn(&mut T, &T),
    pub(crate) parts: fn(&T) -> Option<Vec<&[u8]>>,
    pub(crate) parts_mut: fn(&mut T) -> Option<Vec<&mut [u8]>>,
}

/// A replica on a node whose memory the host cannot address (a GPU): one
/// device buffer per part of the value (`Replicate::parts`).
type RawReplica = Vec<Box<dyn DeviceBuffer>>;

/// Where a device body finds one part of a handle's replica in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePtr {
    /// Device address.
    pub ptr: u64,
    /// Length in bytes.
    pub bytes: usize,
}

/// Replica bookkeeping of one handle, protected by `Replicas::state`.
pub(crate) struct ReplicaState {
    /// Bit `n`: node `n` holds a valid copy.
    valid: u64,
    /// Bit `n`: node `n` has an allocated replica (bit 0, the host, always).
    present: u64,
    /// Tasks currently using each node's replica.
    pins: Vec<u32>,
    /// Running tasks that write this handle (on any node). While non-zero,
    /// prefetches and evictions leave the handle alone: they would read a
    /// replica that is being written.
    writers: u32,
    /// LRU stamps per node.
    last_use: Vec<u64>,
}

/// Device replicas of a handle. The host copy stays in `HandleInner::value`.
pub(crate) struct Replicas<T> {
    fns: ReplicaFns<T>,
    /// Index = node; slot 0 is unused (the host copy is `value`). A slot is
    /// written only under `state`'s lock, by an acquire that makes it valid
    /// or an eviction, never while its node's replica is pinned.
    slots: Box<[UnsafeCell<Option<T>>]>,
    /// Index = node: the replicas on nodes with their own device memory
    /// (the same rules as `slots`; such a node never uses `slots`).
    raw: Box<[UnsafeCell<Option<RawReplica>>]>,
    /// Byte sizes of the value's parts, fixed at registration; `None`: the
    /// type cannot live in device memory.
    part_bytes: Option<Vec<usize>>,
    state: Mutex<ReplicaState>,
    bytes: u64,
    mem: Arc<Memory>,
}

pub(crate) struct HandleInner<T> {
    pub(crate) core: HandleCore,
    /// The host copy. `None` only after `unregister` took the value out.
    value: UnsafeCell<Option<T>>,
    /// Device replicas, for data registered as replicable on a runtime with devices.
    replicas: Option<Replicas<T>>,
}

impl<T> Drop for HandleInner<T> {
    fn drop(&mut self) {
        if let Some(r) = &mut self.replicas {
            let st = r.state.get_mut().unwrap_or_else(|e| e.into_inner());
            for node in 1..r.slots.len() {
                if st.present & (1 << node) != 0 {
                    r.mem.unreserve(node, r.bytes);
                }
            }
        }
    }
}

// SAFETY: the value is reached only under the module invariant above: one
// writer at a time (so `T: Send` suffices for moving `&mut T` across threads)
// or several concurrent readers (which needs `T: Sync`).
unsafe impl<T: Send + Sync> Sync for HandleInner<T> {}

impl<T: Send + Sync> HandleInner<T> {
    /// Pointer to the copy on `node`.
    ///
    /// # Safety
    /// As `DataHandle::value_ptr`, and `node` must hold an acquired replica.
    unsafe fn slot_ptr(&self, node: NodeId) -> *mut Option<T> {
        if node == HOST {
            self.value.get()
        } else {
            self.replicas
                .as_ref()
                .expect("only replicable data has device replicas")
                .slots[node]
                .get()
        }
    }

    /// Copy the valid replica at `from` into `to` (allocating `to` if absent),
    /// as a transfer. Called with `state` locked. Nodes with their own device
    /// memory are reached through their raw replicas (uploads, downloads, and
    /// device → device through a host staging copy).
    fn copy_between(
        &self,
        r: &Replicas<T>,
        st: &mut ReplicaState,
        from: NodeId,
        to: NodeId,
    ) -> Result<(), String> {
        let bytes = r.bytes;
        let id = self.core.id;
        let mut result = Ok(());
        // SAFETY (all blocks below): `state` is locked (no other copy or
        // eviction of this handle runs); `from` is valid, so no writer runs
        // on it (a writer would be the current owner of the only valid copy
        // and hold a pin on it, and dependencies keep readers and writers
        // apart); `to` is not pinned by anyone but a reader waiting for this
        // very copy. The host value is read only for its shape while no
        // writer runs anywhere (prefetches and evictions skip busy handles).
        match (r.mem.device_memory(from), r.mem.device_memory(to)) {
            (None, None) => unsafe {
                let src = (*self.slot_ptr(from))
                    .as_ref()
                    .expect("a valid replica is present");
                let dst = &mut *self.slot_ptr(to);
                r.mem.transfer(id, from, to, bytes, &mut || match dst {
                    Some(d) => (r.fns.copy_from)(d, src),
                    None => *dst = Some((r.fns.replicate)(src)),
                });
            },
            (None, Some(dm)) => unsafe {
                let src = (*self.slot_ptr(from))
                    .as_ref()
                    .expect("a valid replica is present");
                let parts = (r.fns.parts)(src).ok_or_else(|| self.not_device_data(r, to))?;
                let raw = &mut *r.raw[to].get();
                if raw.is_none() {
                    *raw = Some(self.alloc_raw(r, dm, to)?);
                }
                let bufs = raw.as_ref().expect("allocated above");
                r.mem.transfer(id, from, to, bytes, &mut || {
                    result = upload(dm, &parts, bufs);
                });
            },
            (Some(dm), None) => unsafe {
                let dst = &mut *self.slot_ptr(to);
                if dst.is_none() {
                    // Only a device node's slot can be absent; shape it
                    // after the host value.
                    let host = (*self.value.get()).as_ref().expect("registered");
                    *dst = Some((r.fns.replicate)(host));
                }
                let mut parts = (r.fns.parts_mut)(dst.as_mut().expect("allocated above"))
                    .ok_or_else(|| self.not_device_data(r, from))?;
                let bufs = (*r.raw[from].get())
                    .as_ref()
                    .expect("a valid replica is present");
                r.mem.transfer(id, from, to, bytes, &mut || {
                    result = download(dm, bufs, &mut parts);
                });
            },
            (Some(src_dm), Some(dst_dm)) => unsafe {
                let raw = &mut *r.raw[to].get();
                if raw.is_none() {
                    *raw = Some(self.alloc_raw(r, dst_dm, to)?);
                }
                let dst = raw.as_ref().expect("allocated above");
                let src = (*r.raw[from].get())
                    .as_ref()
                    .expect("a valid replica is present");
                r.mem.transfer(id, from, to, bytes, &mut || {
                    let mut stage: Vec<Vec<u8>> = src.iter().map(|b| vec![0; b.bytes()]).collect();
                    let mut views: Vec<&mut [u8]> =
                        stage.iter_mut().map(|v| v.as_mut_slice()).collect();
                    result = download(src_dm, src, &mut views).and_then(|()| {
                        let views: Vec<&[u8]> = stage.iter().map(|v| v.as_slice()).collect();
                        upload(dst_dm, &views, dst)
                    });
                });
            },
        }
        result.map_err(|e| {
            format!(
                "data '{}': copy from {} to {} failed: {e}",
                self.core.display_name(),
                r.mem.nodes[from].name,
                r.mem.nodes[to].name
            )
        })?;
        st.present |= 1 << to;
        st.valid |= 1 << to;
        Ok(())
    }

    fn not_device_data(&self, r: &Replicas<T>, node: NodeId) -> String {
        format!(
            "data '{}' has a type that cannot live in device memory ({}): its Replicate impl gives no parts",
            self.core.display_name(),
            r.mem.nodes[node].name
        )
    }

    /// Device buffers for every part of this handle on `node`.
    fn alloc_raw(
        &self,
        r: &Replicas<T>,
        dm: &dyn DeviceMemory,
        node: NodeId,
    ) -> Result<RawReplica, String> {
        let sizes = r
            .part_bytes
            .as_ref()
            .ok_or_else(|| self.not_device_data(r, node))?;
        sizes
            .iter()
            .map(|&n| dm.alloc(n))
            .collect::<Result<_, _>>()
            .map_err(|e| {
                format!(
                    "data '{}': allocation on {} failed: {e}",
                    self.core.display_name(),
                    r.mem.nodes[node].name
                )
            })
    }
}

fn upload(dm: &dyn DeviceMemory, parts: &[&[u8]], bufs: &RawReplica) -> Result<(), String> {
    assert_eq!(parts.len(), bufs.len(), "Replicate::parts changed shape");
    for (p, b) in parts.iter().zip(bufs) {
        dm.upload(p, &**b)?;
    }
    Ok(())
}

fn download(
    dm: &dyn DeviceMemory,
    bufs: &RawReplica,
    parts: &mut [&mut [u8]],
) -> Result<(), String> {
    assert_eq!(
        parts.len(),
        bufs.len(),
        "Replicate::parts_mut changed shape"
    );
    for (p, b) in parts.iter_mut().zip(bufs) {
        dm.download(&**b, p)?;
    }
    Ok(())
}

impl<T: Send + Sync> AnyHandle for HandleInner<T> {
    fn core(&self) -> &HandleCore {
        &self.core
    }

    fn replicable(&self) -> bool {
        self.replicas.is_some()
    }

    fn bytes(&self) -> u64 {
        self.replicas.as_ref().map_or(0, |r| r.bytes)
    }

    fn valid_on(&self, node: NodeId) -> bool {
        self.valid_mask() & (1 << node) != 0
    }

    fn valid_mask(&self) -> u64 {
        match &self.replicas {
            None => 1 << HOST,
            Some(r) => lock(&r.state).valid,
        }
    }

    fn acquire(
        &self,
        me: &Arc<dyn AnyHandle>,
        node: NodeId,
        mode: AccessMode,
        mem: &Memory,
        pin: bool,
    ) -> Result<(), String> {
        let Some(r) = &self.replicas else {
            return if node == HOST {
                Ok(())
            } else {
                Err(format!(
                    "data '{}' is host-only (register it with register_replicable to use it on {})",
                    self.core.display_name(),
                    mem.nodes[node].name
                ))
            };
        };
        // Reserve device memory before taking this handle's lock (see the
        // lock-order note in memory.rs).
        if !pin && lock(&r.state).writers > 0 {
            // A prefetch racing with a running writer: skip it (the task
            // that wanted the data fetches it itself, after the writer).
            return Ok(());
        }
        let mut reserved = false;
        if node != HOST && lock(&r.state).present & (1 << node) == 0 {
            mem.reserve(node, r.bytes, Arc::as_ptr(me) as *const (), pin)
                .map_err(|e| format!("data '{}': {e}", self.core.display_name()))?;
            reserved = true;
        }
        let mut st = lock(&r.state);
        if !pin && st.writers > 0 {
            if reserved {
                mem.unreserve(node, r.bytes);
            }
            return Ok(());
        }
        let newly_present = node != HOST && st.present & (1 << node) == 0;
        if reserved && !newly_present {
            mem.unreserve(node, r.bytes);
        }
        if mode.reads() && st.valid & (1 << node) == 0 {
            // Prefer the host as the source; else any valid device copy.
            let from = if st.valid & 1 != 0 {
                HOST
            } else {
                st.valid.trailing_zeros() as NodeId
            };
            assert!(
                st.valid != 0,
                "data '{}' has no valid replica",
                self.core.display_name()
            );
            if let Err(e) = self.copy_between(r, &mut st, from, node) {
                if newly_present {
                    mem.unreserve(node, r.bytes);
                }
                return Err(e);
            }
        } else if newly_present {
            // A write-only use: allocate (not a transfer).
            if let Some(dm) = mem.device_memory(node) {
                match self.alloc_raw(r, dm, node) {
                    // SAFETY: as in `copy_between`; this allocates `node`'s raw slot.
                    Ok(raw) => unsafe { *r.raw[node].get() = Some(raw) },
                    Err(e) => {
                        mem.unreserve(node, r.bytes);
                        return Err(e);
                    }
                }
            } else {
                // A copy of any host-addressable replica, for its shape.
                let src_node = if st.valid & 1 != 0 {
                    HOST
                } else {
                    (0..mem.nodes.len())
                        .find(|&n| st.valid & (1 << n) != 0 && mem.device_memory(n).is_none())
                        .unwrap_or(HOST)
                };
                // SAFETY: as in `copy_between`; this is an allocation of `node`'s slot.
                unsafe {
                    let src = (*self.slot_ptr(src_node)).as_ref().expect("present");
                    *self.slot_ptr(node) = Some((r.fns.replicate)(src));
                }
            }
            st.present |= 1 << node;
        }
        if newly_present {
            mem.add_resident(node, Arc::downgrade(me));
        }
        if pin {
            st.pins[node] += 1;
            if mode.writes() {
                st.writers += 1;
            }
        }
        st.last_use[node] = mem.next_tick();
        Ok(())
    }

    fn release(&self, node: NodeId, mode: AccessMode) {
        if let Some(r) = &self.replicas {
            let mut st = lock(&r.state);
            st.pins[node] = st.pins[node].saturating_sub(1);
            if mode.writes() {
                st.valid = 1 << node;
                st.writers = st.writers.saturating_sub(1);
            }
        }
    }

    fn unpin(&self, node: NodeId, mode: AccessMode) {
        if let Some(r) = &self.replicas {
            let mut st = lock(&r.state);
            st.pins[node] = st.pins[node].saturating_sub(1);
            if mode.writes() {
                st.writers = st.writers.saturating_sub(1);
            }
        }
    }

    fn discard(&self, node: NodeId, mode: AccessMode) -> bool {
        let Some(r) = &self.replicas else { return true };
        let mut st = lock(&r.state);
        st.pins[node] = st.pins[node].saturating_sub(1);
        if !mode.writes() {
            return true;
        }
        st.writers = st.writers.saturating_sub(1);
        let others = st.valid & !(1 << node);
        if others == 0 {
            return false;
        }
        st.valid = others;
        true
    }

    fn last_use(&self, node: NodeId) -> Option<u64> {
        let r = self.replicas.as_ref()?;
        let st = r.state.try_lock().ok()?;
        (st.present & (1 << node) != 0).then(|| st.last_use[node])
    }

    fn try_evict(&self, node: NodeId, mem: &Memory) -> Option<u64> {
        let r = self.replicas.as_ref()?;
        let mut st = r.state.try_lock().ok()?;
        if mem_is_host(mem, node)
            || st.present & (1 << node) == 0
            || st.pins[node] != 0
            || st.writers != 0
        {
            return None;
        }
        if st.valid == 1 << node {
            // The only valid copy: write it back to the host first (a failed
            // write-back keeps the replica).
            self.copy_between(r, &mut st, node, HOST).ok()?;
        }
        // SAFETY: `state` is locked and the replica is not pinned, so no task
        // uses it; dropping it frees the node's memory.
        unsafe {
            if mem.device_memory(node).is_some() {
                *r.raw[node].get() = None;
            } else {
                *self.slot_ptr(node) = None;
            }
        }
        st.present &= !(1 << node);
        st.valid &= !(1 << node);
        Some(r.bytes)
    }
}

/// A piece of data registered with a runtime: a tile, a vector, any `T`.
///
/// Cloning a handle clones the reference, not the data. Tasks declare how they
/// access a handle ([`AccessMode`]) and reach the data inside their body through
/// [`TaskContext`](crate::TaskContext); `Runtime::unregister` gives the value back.
pub struct DataHandle<T> {
    pub(crate) inner: Arc<HandleInner<T>>,
}

impl<T> Clone for DataHandle<T> {
    fn clone(&self) -> Self {
        DataHandle {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> std::fmt::Debug for DataHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataHandle({})", self.inner.core.display_name())
    }
}

impl<T: Send + Sync + 'static> DataHandle<T> {
    pub(crate) fn new(value: T, id: u64, runtime_id: u64, name: Option<String>) -> Self {
        Self::with_replicas(value, id, runtime_id, name, None)
    }

    /// A handle whose value can have replicas on `mem`'s device nodes.
    pub(crate) fn new_replicable(
        value: T,
        id: u64,
        runtime_id: u64,
        name: Option<String>,
        mem: Arc<Memory>,
    ) -> Self
    where
        T: Replicate,
    {
        let nodes = mem.nodes.len();
        let bytes = value.bytes() as u64;
        let part_bytes = value.parts().map(|p| p.iter().map(|b| b.len()).collect());
        let replicas = Replicas {
            fns: ReplicaFns {
                replicate: T::replicate,
                copy_from: T::copy_from,
                parts: T::parts,
                parts_mut: T::parts_mut,
            },
            slots: (0..nodes).map(|_| UnsafeCell::new(None)).collect(),
            raw: (0..nodes).map(|_| UnsafeCell::new(None)).collect(),
            part_bytes,
            state: Mutex::new(ReplicaState {
                valid: 1,
                present: 1,
                pins: vec![0; nodes],
                writers: 0,
                last_use: vec![0; nodes],
            }),
            bytes,
            mem,
        };
        Self::with_replicas(value, id, runtime_id, name, Some(replicas))
    }

    fn with_replicas(
        value: T,
        id: u64,
        runtime_id: u64,
        name: Option<String>,
        replicas: Option<Replicas<T>>,
    ) -> Self {
        DataHandle {
            inner: Arc::new(HandleInner {
                core: HandleCore {
                    id,
                    runtime_id,
                    name,
                    deps: Mutex::new(DepState {
                        last_writer: None,
                        readers: Vec::new(),
                        prune_at: 64,
                        poisoned_by: None,
                        unregistered: false,
                    }),
                },
                value: UnsafeCell::new(Some(value)),
                replicas,
            }),
        }
    }

    pub(crate) fn erased(&self) -> Arc<dyn AnyHandle> {
        self.inner.clone()
    }

    /// Pointer to the copy on `node` (the host value for node 0).
    ///
    /// # Safety
    /// The caller must hold the access right described in the module
    /// invariant for the whole lifetime of any reference made from it, and
    /// the replica on `node` must be acquired.
    pub(crate) unsafe fn value_ptr(&self, node: NodeId) -> *mut T {
        // SAFETY: forwarded to the caller.
        match unsafe { &mut *self.inner.slot_ptr(node) } {
            Some(v) => v as *mut T,
            None => unreachable!("a handle in use by a task cannot have been unregistered"),
        }
    }

    /// The device buffers of the replica on `node`, a node with its own
    /// device memory (`None` if the handle has none there).
    ///
    /// # Safety
    /// As [`value_ptr`](Self::value_ptr).
    pub(crate) unsafe fn device_ptrs(&self, node: NodeId) -> Option<Vec<DevicePtr>> {
        let r = self.inner.replicas.as_ref()?;
        // SAFETY: forwarded to the caller.
        let raw = unsafe { (*r.raw.get(node)?.get()).as_ref()? };
        Some(
            raw.iter()
                .map(|b| DevicePtr {
                    ptr: b.ptr(),
                    bytes: b.bytes(),
                })
                .collect(),
        )
    }

    /// Take the value out.
    ///
    /// # Safety
    /// No task that declared this handle may still be running or be able to
    /// run, and none may be submitted afterwards (`unregistered` is set).
    pub(crate) unsafe fn take_value(&self) -> Option<T> {
        // SAFETY: exclusive access per the caller's contract.
        unsafe { (*self.inner.value.get()).take() }
    }
}

impl<T> DataHandle<T> {
    /// The handle's id, unique within its runtime.
    pub fn id(&self) -> u64 {
        self.inner.core.id
    }

    /// The handle's name (given at registration, or `data#<id>`).
    pub fn name(&self) -> String {
        self.inner.core.display_name()
    }
}

/// One (handle, mode) pair of a task.
pub(crate) struct Access {
    pub(crate) handle: Arc<dyn AnyHandle>,
    pub(crate) mode: AccessMode,
}

impl Access {
    pub(crate) fn core(&self) -> &HandleCore {
        self.handle.core()
    }

    pub(crate) fn lock_deps(&self) -> std::sync::MutexGuard<'_, DepState> {
        lock(&self.core().deps)
    }
}
