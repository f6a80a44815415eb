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

mod coherence;
mod deps;

use std::any::TypeId;
use std::cell::UnsafeCell;
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
}

pub(crate) struct HandleInner<T> {
    pub(crate) core: HandleCore,
    /// The host copy. `None` only after `unregister` took the value out.
    value: UnsafeCell<Option<T>>,
    /// Replicas on other memory nodes, for data registered as replicable.
    replicas: Option<Replicas<T>>,
}

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
        match &self.replicas {
            Some(r) => r.acquire(
                &self.value,
                &self.core.display_name(),
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
        r.try_evict(&self.value, &self.core.display_name(), self.core.id, node)
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
        Self::with_replicas(value, id, runtime_id, name, None)
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
                    deps: Mutex::new(DepState::new()),
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
        unsafe { AnyHandle::value_ptr(&*self.inner, node).cast::<T>() }
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
