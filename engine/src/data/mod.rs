//! Data handles: user data registered with the runtime. `deps` holds the
//! per-handle state from which dependencies are inferred; `coherence` the
//! replicas on other memory nodes and the protocol that keeps them coherent
//! (written down in `README.md` beside this file).
//!
//! Invariant (checked at submission, relied on by [`TaskContext`](crate::TaskContext)):
//! the value inside a handle is touched only by the body of a task that
//! declared the handle, while that task runs, or by `Runtime::unregister`
//! once every task that declared it has finished and no new one can be
//! submitted. Dependencies guarantee that a task declaring W/RW never runs
//! beside another task declaring the same handle, so `&mut T` is exclusive.
//!
//! A *deferred* handle (`Runtime::register_deferred`: another rank's data,
//! registered by shape) holds no value until its first use: the first
//! `acquire` (or `unregister`) makes it, under the `deferred` lock, before
//! anything reads the value cell (every access goes through `acquire`).

mod coherence;
mod deps;

use std::any::TypeId;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use coherence::Replicas;
pub(crate) use deps::{DepState, TaskRef};

use crate::access::AccessMode;
use crate::device::DeviceParts;
use crate::memory::{Memory, NodeId, Replicate, HOST};

/// The type-erased part of a handle that the engine works with.
pub(crate) struct HandleCore {
    pub(crate) id: u64,
    pub(crate) runtime_id: u64,
    pub(crate) name: Option<String>,
    pub(crate) deps: Mutex<DepState>,
    /// Readers (tasks that declared R) submitted and not finished yet,
    /// whether or not a writer has drained them from `deps.readers` since.
    /// Incremented under `deps` by `push_reader`, decremented by each such
    /// task's completion (`reader_finished`) without the lock.
    live_readers: AtomicUsize,
    /// Copy back to the host right after a device task writes it (see
    /// `DataHandle::set_write_through`).
    pub(crate) write_through: std::sync::atomic::AtomicBool,
    /// The id of the task after whose write, on a device, this handle is
    /// copied back to the host once ([`NO_TASK`]: none; see
    /// `DataHandle::wont_write`).
    pub(crate) home_after: AtomicU64,
    /// Loans of the host value's bytes to a transport in flight
    /// (`dist::lent`): while above 0, nothing writes or frees the value.
    pub(crate) lent: std::sync::atomic::AtomicU32,
    /// [`display`](Self::display), made at its first use.
    display: std::sync::OnceLock<Box<str>>,
}

/// No task: [`HandleCore::home_after`] when no write-back is asked for.
pub(crate) const NO_TASK: u64 = u64::MAX;

impl HandleCore {
    /// Whether `task`'s write of this handle, on a device, is to be copied
    /// back to the host at once: write-through data, or the write
    /// `DataHandle::wont_write` named.
    #[inline]
    pub(crate) fn writes_home(&self, task: u64) -> bool {
        self.write_through.load(Ordering::Relaxed)
            || self.home_after.load(Ordering::Relaxed) == task
    }

    /// Remember `reader` (a task declaring R, being submitted) in `deps`,
    /// this handle's dependency state, locked by the caller.
    pub(crate) fn push_reader(&self, deps: &mut DepState, reader: TaskRef) {
        // Relaxed: read under `deps` by `reader_finished`, whose lock orders it.
        self.live_readers.fetch_add(1, Ordering::Relaxed);
        deps.push_reader(reader);
    }

    /// Task `task`, which declared W or RW on this handle, finished (any
    /// outcome; its state is final). If it is still the last writer, its
    /// record keeps only the id (for traces): a finished task is never a
    /// dependency again, and the `Weak` kept its whole allocation from
    /// being freed or reused. A handle written once per task (Task Bench's
    /// default, one field per timestep) otherwise kept every task ever
    /// submitted, and each submission took fresh pages.
    ///
    /// Not `try_lock`: the submitter often holds the lock right then,
    /// linking the writer's reader, and 39 % of the nodes stayed kept. The
    /// worker calls it only for a task whose `Successors::last_writes`
    /// was not zero at its end, so a chain of writers (each replaced before
    /// it ends) never takes this lock.
    #[inline]
    pub(crate) fn writer_finished(&self, task: u64) {
        let mut deps = crate::util::lock(&self.deps);
        if let Some(w) = deps.last_writer.as_mut().filter(|w| w.id == task) {
            w.node = std::sync::Weak::new();
        }
    }

    /// A task that declared R on this handle finished (any outcome). When
    /// it was the last reader not finished, forget every reader listed: they
    /// are all finished, so no writer needs an edge from them, and each
    /// `Weak` in the list would keep its task's whole allocation alive.
    /// Without this a handle that is never written again kept one dead task
    /// per read until it was unregistered: `lu --n 256 --nb 1` grew to
    /// 1.9 GB (issue 17; `tests/tests/lu_memory.rs`).
    pub(crate) fn reader_finished(&self) {
        if self.live_readers.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut deps = crate::util::lock(&self.deps);
            // Re-checked under the lock: a reader pushed meanwhile is live.
            if self.live_readers.load(Ordering::Acquire) == 0 {
                deps.readers.clear();
            }
        }
    }

    /// Whether a task that declared R on this handle has not finished (its
    /// hooks included).
    pub(crate) fn readers_running(&self) -> bool {
        self.live_readers.load(Ordering::Acquire) > 0
    }

    pub(crate) fn display_name(&self) -> String {
        self.display().to_owned()
    }

    /// The name errors and traces give it, made once, at its first use (the
    /// replicas' paths take the handle as a `Display`, `coherence::Name`, and
    /// format it only into an error).
    pub(crate) fn display(&self) -> &str {
        self.display.get_or_init(|| match &self.name {
            Some(n) => n.as_str().into(),
            None => format!("data#{}", self.id).into(),
        })
    }
}

impl std::fmt::Display for HandleCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.display())
    }
}

/// Implemented by every `HandleInner<T>`, so tasks can hold handles of mixed types.
pub(crate) trait AnyHandle: Send + Sync {
    fn core(&self) -> &HandleCore;

    /// `TypeId` of the value (typed access lists check it in debug builds).
    fn value_type(&self) -> TypeId;

    /// Pointer to the value on `node`, erased.
    ///
    /// # Safety
    /// As [`DataHandle::value_ptr`].
    unsafe fn value_ptr(&self, node: NodeId) -> *mut ();

    /// The replica on `node` in device memory the host cannot address.
    ///
    /// # Safety
    /// The caller holds a pin on that replica (its task is running there).
    unsafe fn device_parts(&self, node: NodeId) -> Option<DeviceParts<'_>>;

    /// Whether the data can have replicas off the host (`Replicate` types).
    fn replicable(&self) -> bool;

    /// Bytes of one replica (0 for host-only data).
    fn bytes(&self) -> u64;

    /// Whether the data is virtual (a size and shape, no value: simulated
    /// time only, see `Runtime::register_virtual`).
    fn is_virtual(&self) -> bool;

    /// Whether `node` holds a valid replica (a hint: see `valid_mask`).
    fn valid_on(&self, node: NodeId) -> bool {
        self.valid_mask() & (1 << node) != 0
    }

    /// Bit `n` set: node `n` holds a valid replica. Read without waiting for
    /// copies in flight, so only a placement hint.
    fn valid_mask(&self) -> u64;

    /// Make the data usable on `node` for `mode` (`coherence.rs`), pinning
    /// the replica when `pin`. `me` is this handle, for the node's LRU list.
    fn acquire(
        &self,
        me: &Arc<dyn AnyHandle>,
        node: NodeId,
        mode: AccessMode,
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

    /// Free the replica on `node` if it is unused (writing it back to the
    /// host first if it is the only valid one). Returns the bytes freed.
    fn try_evict(&self, node: NodeId) -> Option<u64>;

    /// Hand the host value's parts (`Replicate::parts`) to `f`. The caller
    /// holds the host replica acquired for reading.
    fn with_parts(&self, f: &mut dyn FnMut(&[&[u8]])) -> Result<(), String>;

    /// Overwrite the host value's parts with `bytes`, their concatenation.
    ///
    /// # Safety
    /// The caller runs inside a task that declared this handle W or RW and
    /// runs on the host.
    unsafe fn write_parts(&self, bytes: &[u8]) -> Result<(), String>;

    /// Hand the host value's parts, writable, to `fill`, once they are
    /// checked to hold `len` bytes in all (`Err` naming the data
    /// otherwise, `fill` not called): a received version is written into
    /// them in place.
    ///
    /// # Safety
    /// As for [`write_parts`](Self::write_parts).
    unsafe fn fill_parts(&self, len: usize, fill: &mut FillParts<'_>) -> Result<(), String>;
}

/// What writes a value's parts in place (`AnyHandle::fill_parts`).
pub(crate) type FillParts<'a> = dyn FnMut(&mut [&mut [u8]]) -> Result<(), String> + 'a;

pub(crate) struct HandleInner<T> {
    pub(crate) core: HandleCore,
    /// The host copy. `None` after `unregister` took the value out, and
    /// before a deferred handle's first use (see the module doc).
    value: UnsafeCell<Option<T>>,
    /// Replicas on other memory nodes, for data registered as replicable.
    replicas: Option<Replicas<T>>,
    /// A deferred handle's maker, taken at its first use.
    deferred: Mutex<Option<Maker<T>>>,
    /// Whether `deferred` still holds a maker (read without the lock).
    is_deferred: std::sync::atomic::AtomicBool,
}

/// What makes a deferred handle's value (`Err`: it is not of the shape
/// recorded at registration).
type Maker<T> = Box<dyn FnOnce() -> Result<T, String> + Send>;

impl<T> Drop for HandleInner<T> {
    fn drop(&mut self) {
        if let Some(r) = &mut self.replicas {
            r.drop_all();
        }
    }
}

// SAFETY: the value is reached only under the module invariant above: one
// writer at a time (so `T: Send` suffices for moving `&mut T` across threads)
// or several concurrent readers (which needs `T: Sync`).
unsafe impl<T: Send + Sync> Sync for HandleInner<T> {}

impl<T: Send + Sync + 'static> AnyHandle for HandleInner<T> {
    fn core(&self) -> &HandleCore {
        &self.core
    }

    fn value_type(&self) -> TypeId {
        TypeId::of::<T>()
    }

    unsafe fn value_ptr(&self, node: NodeId) -> *mut () {
        let slot = if node == HOST {
            self.value.get()
        } else {
            // SAFETY: forwarded to the caller.
            unsafe { self.device_slot(node) }
        };
        // SAFETY: forwarded to the caller: the replica is acquired, so present.
        match unsafe { &mut *slot } {
            Some(v) => v as *mut T as *mut (),
            None => unreachable!("a handle in use by a task cannot have been unregistered"),
        }
    }

    unsafe fn device_parts(&self, node: NodeId) -> Option<DeviceParts<'_>> {
        // SAFETY: forwarded to the caller.
        unsafe { self.replicas.as_ref()?.raw_parts(node) }
    }

    fn replicable(&self) -> bool {
        self.replicas.is_some()
    }

    fn bytes(&self) -> u64 {
        self.replicas.as_ref().map_or(0, |r| r.bytes)
    }

    fn is_virtual(&self) -> bool {
        self.replicas.as_ref().is_some_and(|r| r.is_virtual)
    }

    fn valid_mask(&self) -> u64 {
        match &self.replicas {
            None => 1 << HOST,
            Some(r) => r.valid_hint(),
        }
    }

    fn acquire(
        &self,
        me: &Arc<dyn AnyHandle>,
        node: NodeId,
        mode: AccessMode,
        pin: bool,
    ) -> Result<(), String> {
        self.materialize()?;
        match &self.replicas {
            Some(r) => r.acquire(
                &self.value,
                &self.core,
                self.core.id,
                me,
                node,
                mode,
                pin,
            ),
            None if node == HOST => Ok(()),
            None => Err(format!(
                "data '{}' is host-only (register it with register_replicable to use it on node {node})",
                self.core.display_name(),
            )),
        }
    }

    fn release(&self, node: NodeId, mode: AccessMode) {
        if let Some(r) = &self.replicas {
            r.release(node, mode);
        }
    }

    fn unpin(&self, node: NodeId, mode: AccessMode) {
        if let Some(r) = &self.replicas {
            r.unpin(node, mode);
        }
    }

    fn discard(&self, node: NodeId, mode: AccessMode) -> bool {
        self.replicas.as_ref().is_none_or(|r| r.discard(node, mode))
    }

    fn last_use(&self, node: NodeId) -> Option<u64> {
        self.replicas.as_ref()?.last_use(node)
    }

    fn try_evict(&self, node: NodeId) -> Option<u64> {
        let r = self.replicas.as_ref()?;
        r.try_evict(&self.value, &self.core, self.core.id, node)
    }

    fn with_parts(&self, f: &mut dyn FnMut(&[&[u8]])) -> Result<(), String> {
        let r = self.replicas.as_ref().ok_or_else(|| self.not_sendable())?;
        self.materialize()?;
        if r.is_virtual {
            // No value: a message carries none of its bytes (the simulated
            // network charges them, see `dist::wire`).
            f(&[]);
            return Ok(());
        }
        // SAFETY: the caller holds the host replica acquired for reading, so
        // no writer runs and the value is present.
        let v = unsafe { (*self.value.get()).as_ref() }.expect("registered");
        if let Some(one) = r.one_part(v) {
            f(&[one]);
            return Ok(());
        }
        let parts = r.parts(v).ok_or_else(|| self.not_sendable())?;
        f(&parts);
        Ok(())
    }

    unsafe fn write_parts(&self, bytes: &[u8]) -> Result<(), String> {
        let mut copy = |parts: &mut [&mut [u8]]| {
            let mut at = 0;
            for p in parts.iter_mut() {
                p.copy_from_slice(&bytes[at..at + p.len()]);
                at += p.len();
            }
            Ok(())
        };
        // SAFETY: forwarded to the caller.
        unsafe { self.fill_parts(bytes.len(), &mut copy) }
    }

    unsafe fn fill_parts(&self, len: usize, fill: &mut FillParts<'_>) -> Result<(), String> {
        let r = self.replicas.as_ref().ok_or_else(|| self.not_sendable())?;
        self.materialize()?;
        if r.is_virtual {
            return Ok(());
        }
        // SAFETY: the caller's task holds this handle for writing on the host.
        let v = unsafe { (*self.value.get()).as_mut() }.expect("registered");
        let wrong = |total: usize| {
            format!(
                "data '{}' holds {total} bytes, but {len} arrived",
                self.core.display_name(),
            )
        };
        if let Some(one) = r.one_part_mut(v) {
            if one.len() != len {
                return Err(wrong(one.len()));
            }
            return fill(&mut [one]);
        }
        let mut parts = r.parts_mut(v).ok_or_else(|| self.not_sendable())?;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total != len {
            return Err(wrong(total));
        }
        fill(&mut parts)
    }
}

impl<T> HandleInner<T> {
    /// Make a deferred handle's value, if not made yet; `Err` when it does
    /// not have the shape recorded at registration.
    fn materialize(&self) -> Result<(), String> {
        if !self.is_deferred.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut maker = crate::util::lock(&self.deferred);
        let Some(make) = maker.take() else {
            return Ok(());
        };
        let v = make().map_err(|e| format!("data '{}': {e}", self.core.display()))?;
        // SAFETY: nothing reads or writes the value cell of a deferred
        // handle before this store: every access acquires first, and
        // acquiring waits here for the lock. The store happens under the
        // lock, before `is_deferred` is cleared with Release.
        unsafe { *self.value.get() = Some(v) };
        self.is_deferred.store(false, Ordering::Release);
        Ok(())
    }
}

impl<T> HandleInner<T> {
    fn not_sendable(&self) -> String {
        format!(
            "data '{}' cannot travel between ranks: register it with register_replicable (a Replicate type with parts)",
            self.core.display_name()
        )
    }
}

impl<T> HandleInner<T> {
    /// The slot of a non-host node's replica.
    ///
    /// # Safety
    /// As [`DataHandle::value_ptr`].
    unsafe fn device_slot(&self, node: NodeId) -> *mut Option<T> {
        self.replicas
            .as_ref()
            .expect("only replicable data has replicas off the host")
            .slot_ptr(node)
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
        Self::with_replicas(Some(value), id, runtime_id, name, None)
    }

    /// A handle whose value can have replicas on `mem`'s other nodes.
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
        let replicas = Replicas::new(&value, mem);
        Self::with_replicas(Some(value), id, runtime_id, name, Some(replicas))
    }

    /// A virtual handle: `bytes` bytes shaped `dims`, no value (simulated
    /// runtimes only; bodies never see it).
    pub(crate) fn new_virtual(
        bytes: u64,
        dims: [usize; 4],
        id: u64,
        runtime_id: u64,
        name: Option<String>,
        mem: Arc<Memory>,
    ) -> Self
    where
        T: Replicate,
    {
        let replicas = Replicas::new_virtual(bytes, dims, mem);
        Self::with_replicas(None, id, runtime_id, name, Some(replicas))
    }

    /// A handle holding `value` on the host (`None`: virtual data) and,
    /// for replicable data, its `replicas`.
    fn with_replicas(
        value: Option<T>,
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
                    deps: Mutex::new(DepState::new()),
                    live_readers: AtomicUsize::new(0),
                    write_through: std::sync::atomic::AtomicBool::new(false),
                    home_after: AtomicU64::new(NO_TASK),
                    lent: std::sync::atomic::AtomicU32::new(0),
                    display: std::sync::OnceLock::new(),
                },
                value: UnsafeCell::new(value),
                replicas,
                deferred: Mutex::new(None),
                is_deferred: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// A replicable handle whose value `make` makes at its first use (see
    /// the module doc). `make` is called once now, for the shape the
    /// replicas record, and that value is dropped at once; it must make the
    /// same shape again later (else the first use fails, naming the data).
    pub(crate) fn new_deferred(
        make: impl Fn() -> T + Send + 'static,
        id: u64,
        runtime_id: u64,
        name: Option<String>,
        mem: Arc<Memory>,
    ) -> Self
    where
        T: Replicate,
    {
        let shape = make();
        let (bytes, dims) = (shape.bytes(), shape.dims());
        let replicas = Replicas::new(&shape, mem);
        drop(shape);
        let h = Self::with_replicas(None, id, runtime_id, name, Some(replicas));
        let maker: Maker<T> = Box::new(move || {
            let v = make();
            if v.bytes() != bytes || v.dims() != dims {
                return Err(format!(
                    "registered as {bytes} bytes shaped {dims:?}, but its maker made {} bytes shaped {:?} at its first use",
                    v.bytes(),
                    v.dims()
                ));
            }
            Ok(v)
        });
        *crate::util::lock(&h.inner.deferred) = Some(maker);
        h.inner.is_deferred.store(true, Ordering::Release);
        h
    }

    pub(crate) fn erased(&self) -> Arc<dyn AnyHandle> {
        self.inner.clone()
    }

    /// [`erased`](Self::erased) taking the handle: its reference moves,
    /// with no count taken and dropped. A typed access list declares its
    /// handles this way: the count's cache line is also written by the
    /// worker that drops a finished task's accesses, so each needless
    /// increment and decrement was a transfer of that line (`perf` of a
    /// stencil's submission: 2.7 % of the submitting thread).
    pub(crate) fn into_erased(self) -> Arc<dyn AnyHandle> {
        self.inner
    }

    /// Pointer to the copy on `node` (the host value for node 0).
    ///
    /// # Safety
    /// The caller must hold the access right described in the module
    /// invariant for the whole lifetime of any reference made from it, and
    /// the replica on `node` must be acquired.
    pub(crate) unsafe fn value_ptr(&self, node: NodeId) -> *mut T {
        // SAFETY: forwarded to the caller.
        unsafe { AnyHandle::value_ptr(&*self.inner, node).cast::<T>() }
    }

    /// Take the value out (a deferred one made first; `Err` if its maker
    /// made another shape).
    ///
    /// # Safety
    /// No task that declared this handle may still be running or be able to
    /// run, and none may be submitted afterwards (`unregistered` is set).
    pub(crate) unsafe fn take_value(&self) -> Result<Option<T>, String> {
        // A deferred value never used is made now: `unregister` gives a
        // value back on every rank.
        self.inner.materialize()?;
        // A transport may still read lent bytes (`dist::lent`).
        crate::dist::lent::wait_returned(&self.inner.core);
        // SAFETY: exclusive access per the caller's contract.
        Ok(unsafe { (*self.inner.value.get()).take() })
    }
}

impl<T> DataHandle<T> {
    /// The handle's id, unique within its runtime.
    pub fn id(&self) -> u64 {
        self.inner.core.id
    }

    /// Write-through to the host (StarPU's `starpu_data_set_wt_mask` for the
    /// host): when a task has written this data on a device, a copy back to
    /// the host starts at once, in the background (under `dmda`, on the
    /// device's copy thread; in simulated time, on the link's device→host
    /// lane), so the device's replica is clean by the time its room is
    /// needed and evicting it costs nothing. For data that streams through a
    /// device too small to keep it (TianHe-1's output stage); data a device
    /// keeps resident is better left write-back (the default).
    pub fn set_write_through(&self, on: bool) {
        self.inner
            .core
            .write_through
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// This data will not be written again by tasks yet to be submitted:
    /// when the last writer submitted so far ends on a device, its result
    /// is copied back to the host at once, in the background, as
    /// [`set_write_through`](Self::set_write_through) does for every write
    /// (StarPU's `starpu_data_wont_use`, for the host). The device keeps its
    /// copy. A factorisation calls it for each tile as soon as the tile's
    /// last update is submitted, so the factors come home while the rest is
    /// computed instead of all at the end. Nothing happens if no writer is
    /// pending, or if the last one runs on a CPU worker (the data is then
    /// on the host already). Writers submitted after the call are not
    /// copied home (call it again after them).
    pub fn wont_write(&self) {
        let core = &self.inner.core;
        let deps = crate::util::lock(&core.deps);
        let last = deps.last_writer.as_ref().map_or(NO_TASK, |w| w.id);
        core.home_after.store(last, Ordering::Relaxed);
    }

    /// The handle's name (given at registration, or `data#<id>`).
    pub fn name(&self) -> String {
        self.inner.core.display_name()
    }
}

#[cfg(test)]
mod coherence_model {
    //! Checks the coherence protocol against a reference MSI model: random
    //! sequences of acquire (R/W/RW) + release, prefetch and eviction on one
    //! handle over the host, a host-addressable device and a device with its
    //! own memory; after every step the replicas' validity matches the model
    //! and every read sees the last value written.
    use std::sync::Mutex;

    use proptest::prelude::*;

    use super::*;
    use crate::device::{Device, DeviceBuffer, DeviceMemory, Link, TaskCost};

    /// A device for the model: its own memory (host buffers behind raw
    /// pointers, like the emulated device) or host-addressable replicas.
    struct ModelDevice {
        own: bool,
        /// Live allocations (address → words), to check frees.
        live: Mutex<Vec<usize>>,
        /// Refuse every allocation (errors must name the data).
        refuse: bool,
    }

    struct Buf {
        ptr: *mut u64,
        words: usize,
    }
    // SAFETY: plain memory, used by one test thread.
    unsafe impl Send for Buf {}
    // SAFETY: as above.
    unsafe impl Sync for Buf {}
    impl Drop for Buf {
        fn drop(&mut self) {
            // SAFETY: from `Box::into_raw` of a `[u64]` of `words` elements.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.words))
            });
        }
    }
    impl DeviceBuffer for Buf {
        fn ptr(&self) -> u64 {
            self.ptr as u64
        }
        fn bytes(&self) -> usize {
            self.words * 8
        }
    }

    impl Device for ModelDevice {
        fn name(&self) -> String {
            if self.own {
                "own".into()
            } else {
                "addr".into()
            }
        }
        fn arch(&self) -> &'static str {
            "model"
        }
        fn memory_limit(&self) -> Option<u64> {
            None
        }
        fn link(&self) -> Link {
            Link {
                latency: std::time::Duration::ZERO,
                bandwidth: 1e12,
            }
        }
        fn peak_flops(&self) -> f64 {
            1e9
        }
        fn expected_time(&self, _: &TaskCost<'_>) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        fn run(
            &self,
            _: &TaskCost<'_>,
            body: &mut dyn FnMut(),
        ) -> Result<std::time::Duration, String> {
            body();
            Ok(std::time::Duration::ZERO)
        }
        fn copy(&self, _: u64, copy: &mut dyn FnMut()) -> std::time::Duration {
            copy();
            std::time::Duration::ZERO
        }
        fn memory(&self) -> Option<&dyn DeviceMemory> {
            self.own.then_some(self as &dyn DeviceMemory)
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    impl DeviceMemory for ModelDevice {
        fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, String> {
            if self.refuse {
                return Err("refused".into());
            }
            let words = bytes / 8;
            let ptr: *mut u64 = Box::into_raw(vec![0u64; words].into_boxed_slice()).cast();
            self.live.lock().unwrap().push(ptr as usize);
            Ok(Box::new(Buf { ptr, words }))
        }
        fn upload(&self, src: &[u8], dst: &dyn DeviceBuffer) -> Result<(), String> {
            // SAFETY: `dst` is one of our buffers of `src.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.ptr() as *mut u8, src.len()) };
            Ok(())
        }
        fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), String> {
            // SAFETY: `src` is one of our buffers of `dst.len()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(src.ptr() as *const u8, dst.as_mut_ptr(), dst.len())
            };
            Ok(())
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Run a task on `node` with mode (0: R, 1: W, 2: RW).
        Task(usize, u8),
        Prefetch(usize),
        Evict(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize, 0..3u8).prop_map(|(n, m)| Op::Task(n, m)),
            1 => (1..3usize).prop_map(Op::Prefetch),
            2 => (1..3usize).prop_map(Op::Evict),
        ]
    }

    /// The value a task sees on `node` (reading the replica there).
    fn read(h: &DataHandle<Vec<u64>>, node: NodeId) -> Vec<u64> {
        let any: &dyn AnyHandle = &*h.inner;
        // SAFETY: the caller acquired `node` for this single-threaded test.
        unsafe {
            match any.device_parts(node) {
                Some(mut p) => {
                    let s = p.slice::<u64>(0).unwrap();
                    std::slice::from_raw_parts(s.ptr() as *const u64, s.len()).to_vec()
                }
                None => (*h.value_ptr(node)).clone(),
            }
        }
    }

    fn write(h: &DataHandle<Vec<u64>>, node: NodeId, v: u64) {
        let any: &dyn AnyHandle = &*h.inner;
        // SAFETY: as in `read`, with write access acquired.
        unsafe {
            match any.device_parts(node) {
                Some(mut p) => {
                    let s = p.slice_mut::<u64>(0).unwrap();
                    std::slice::from_raw_parts_mut(s.ptr() as *mut u64, s.len()).fill(v);
                }
                None => (*h.value_ptr(node)).fill(v),
            }
        }
    }

    /// The replicas' errors name the data as `HandleCore::display` does
    /// (its name, else `data#id`), though they take it as a `Display`
    /// formatted only into the error.
    #[test]
    fn a_refused_allocation_names_the_data() {
        let device: Arc<dyn Device> = Arc::new(ModelDevice {
            own: true,
            live: Mutex::new(Vec::new()),
            refuse: true,
        });
        let mem = Arc::new(Memory::new(1, vec![device], None));
        for (name, want) in [
            (
                Some("tile(3,4)".to_string()),
                "data 'tile(3,4)': allocation on ",
            ),
            (None, "data 'data#5': allocation on "),
        ] {
            let h = DataHandle::new_replicable(vec![7u64; 4], 5, 0, name, Arc::clone(&mem));
            let me: Arc<dyn AnyHandle> = h.erased();
            let e = me.acquire(&me, 1, AccessMode::R, true).unwrap_err();
            assert!(e.starts_with(want) && e.ends_with("failed: refused"), "{e}");
            assert_eq!(me.valid_mask(), 1, "the host copy stays the valid one");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn follows_msi(ops in proptest::collection::vec(op(), 1..40)) {
            let devices: Vec<Arc<dyn Device>> = vec![
                Arc::new(ModelDevice { own: false, live: Mutex::new(Vec::new()), refuse: false }),
                Arc::new(ModelDevice { own: true, live: Mutex::new(Vec::new()), refuse: false }),
            ];
            let mem = Arc::new(Memory::new(1, devices, None));
            let h = DataHandle::new_replicable(vec![7u64; 4], 0, 0, None, Arc::clone(&mem));
            let me: Arc<dyn AnyHandle> = h.erased();
            // The model: the current value and which nodes hold it.
            let mut value = 7u64;
            let mut valid: u64 = 1;
            let mut next = 100u64;
            for op in ops {
                match op {
                    Op::Task(node, m) => {
                        let mode = [AccessMode::R, AccessMode::W, AccessMode::RW][m as usize];
                        me.acquire(&me, node, mode, true).unwrap();
                        if mode.reads() {
                            prop_assert_eq!(read(&h, node), vec![value; 4]);
                            valid |= 1 << node;
                        }
                        if mode.writes() {
                            value = next;
                            next += 1;
                            write(&h, node, value);
                            valid = 1 << node;
                        }
                        me.release(node, mode);
                    }
                    Op::Prefetch(node) => {
                        me.acquire(&me, node, AccessMode::R, false).unwrap();
                        valid |= 1 << node;
                    }
                    Op::Evict(node) => {
                        let was = me.valid_mask();
                        if me.try_evict(node).is_some() {
                            if was == 1 << node {
                                valid |= 1; // written back to the host
                            }
                            valid &= !(1 << node);
                        }
                    }
                }
                prop_assert_eq!(me.valid_mask(), valid);
            }
            // Whatever happened, the host ends up with the last value.
            me.acquire(&me, HOST, AccessMode::R, true).unwrap();
            prop_assert_eq!(read(&h, HOST), vec![value; 4]);
            me.unpin(HOST, AccessMode::R);
        }
    }
}
