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
}

pub(crate) struct HandleInner<T> {
    pub(crate) core: HandleCore,
    /// `None` only after `unregister` took the value out.
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is reached only under the module invariant above: one
// writer at a time (so `T: Send` suffices for moving `&mut T` across threads)
// or several concurrent readers (which needs `T: Sync`).
unsafe impl<T: Send + Sync> Sync for HandleInner<T> {}

impl<T: Send + Sync> AnyHandle for HandleInner<T> {
    fn core(&self) -> &HandleCore {
        &self.core
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
            }),
        }
    }

    pub(crate) fn erased(&self) -> Arc<dyn AnyHandle> {
        self.inner.clone()
    }

    /// Pointer to the value.
    ///
    /// # Safety
    /// The caller must hold the access right described in the module
    /// invariant for the whole lifetime of any reference made from it.
    pub(crate) unsafe fn value_ptr(&self) -> *mut T {
        // SAFETY: forwarded to the caller; `get` itself is always safe.
        match unsafe { &mut *self.inner.value.get() } {
            Some(v) => v as *mut T,
            None => unreachable!("a handle in use by a task cannot have been unregistered"),
        }
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
