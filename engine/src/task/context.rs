//! What a running body sees: the worker it runs on, its device, and (for
//! dynamic access lists) typed access to the data its task declared.

use std::cell::{Cell, OnceCell};
use std::sync::Arc;

use super::TaskNode;
use crate::access::Cursor;
use crate::data::DataHandle;
use crate::device::Device;
use crate::error::AccessError;
use crate::memory::{DeviceData, NodeId};

/// Borrow state of one access inside one body run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Borrow {
    Free,
    Shared,
    Exclusive,
}

/// Accesses whose borrow state fits in the inline bit sets; a task with
/// more allocates a table on its first dynamic borrow beyond them.
const INLINE: usize = 64;

/// Per-body borrow table of the dynamic API, allocation-free for the first
/// 64 accesses: two bit sets (shared, exclusive). A borrow is never released
/// during the body, so a state only moves away from `Free`.
#[derive(Default)]
struct Borrows {
    shared: Cell<u64>,
    exclusive: Cell<u64>,
    overflow: OnceCell<Box<[Cell<Borrow>]>>,
}

impl Borrows {
    fn get(&self, i: usize, total: usize) -> Borrow {
        if i < INLINE {
            let bit = 1u64 << i;
            if self.exclusive.get() & bit != 0 {
                Borrow::Exclusive
            } else if self.shared.get() & bit != 0 {
                Borrow::Shared
            } else {
                Borrow::Free
            }
        } else {
            self.table(total)[i - INLINE].get()
        }
    }

    fn set(&self, i: usize, total: usize, b: Borrow) {
        if i < INLINE {
            let bit = 1u64 << i;
            match b {
                Borrow::Exclusive => self.exclusive.set(self.exclusive.get() | bit),
                Borrow::Shared => self.shared.set(self.shared.get() | bit),
                Borrow::Free => unreachable!("borrows are never released during a body"),
            }
        } else {
            self.table(total)[i - INLINE].set(b);
        }
    }

    fn table(&self, total: usize) -> &[Cell<Borrow>] {
        self.overflow.get_or_init(|| {
            (INLINE..total.max(INLINE))
                .map(|_| Cell::new(Borrow::Free))
                .collect()
        })
    }
}

/// What a running body sees: the worker, the device, and, for tasks built
/// with the dynamic [`TaskBuilder`](crate::TaskBuilder), typed access to the
/// data they declared.
///
/// Asking for a handle the task did not declare, writing one declared R,
/// reading one declared W, or asking twice in a way that would alias a `&mut`
/// gives an [`AccessError`] naming the task and the handle.
pub struct TaskContext<'t> {
    node: &'t TaskNode,
    /// Memory node whose replicas this body sees.
    mem_node: NodeId,
    sleep: &'t crate::sleep::Sleep,
    borrows: Borrows,
    worker: usize,
    /// The device whose node `mem_node` is, when the body runs on it.
    device: Option<&'t Arc<dyn Device>>,
    /// `mem_node` is device memory the host cannot address: no typed
    /// access, only device views.
    raw: bool,
    /// A typed body took the task's data as arguments: the dynamic accessors
    /// must not hand any of it out again (that could alias a `&mut`).
    typed: Cell<bool>,
    /// The team running this task, when it runs on more than one worker.
    team: Option<&'t crate::team::TeamJob>,
}

impl<'t> TaskContext<'t> {
    pub(crate) fn new(
        node: &'t TaskNode,
        worker: usize,
        mem_node: NodeId,
        sleep: &'t crate::sleep::Sleep,
        device: Option<&'t Arc<dyn Device>>,
    ) -> Self {
        let raw = device.is_some_and(|d| d.memory().is_some());
        TaskContext {
            node,
            mem_node,
            sleep,
            borrows: Borrows::default(),
            worker,
            device,
            raw,
            typed: Cell::new(false),
            team: None,
        }
    }

    /// The same context, run by `team` (the leader's view of a team task).
    pub(crate) fn with_team(mut self, team: Option<&'t crate::team::TeamJob>) -> Self {
        self.team = team;
        self
    }

    /// The team running this task: its size, and [`Team::run`](crate::team::Team::run)
    /// to run a closure on every member. A task that is not a team task, or
    /// got a team of one, sees a team of one (`run` calls the closure here).
    pub fn team(&self) -> crate::team::Team<'t> {
        match self.team {
            Some(job) => crate::team::Team::engine(job),
            None => crate::team::Team::solo(),
        }
    }

    /// A cursor over the task's accesses on this body's node, for a typed
    /// body; from then on `read`/`write` refuse (the body owns the borrows).
    pub(crate) fn cursor(&self) -> Cursor<'t> {
        self.typed.set(true);
        Cursor::new(&self.node.accesses, &self.node.lens, self.mem_node)
    }

    /// The device this body runs on (`None` on a CPU worker or for a CPU
    /// body run on the host).
    pub fn device(&self) -> Option<&'t dyn Device> {
        self.device.map(|d| &**d)
    }

    /// Whether this body runs on device memory the host cannot address (a
    /// GPU's): then its data is reached through device views, not `read`/`write`.
    pub fn on_device_memory(&self) -> bool {
        self.raw
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
    /// stale).
    pub fn idle_workers(&self) -> usize {
        self.sleep.sleepers()
    }

    /// The task's id.
    pub fn task_id(&self) -> u64 {
        self.node.id
    }

    fn find<T>(&self, h: &DataHandle<T>) -> Result<usize, AccessError> {
        if self.typed.get() {
            return Err(AccessError(format!(
                "task '{}' received its data as typed arguments; the context does not hand out data '{}' again",
                self.node.display_name(),
                h.name()
            )));
        }
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

    fn host_addressable<T>(&self, h: &DataHandle<T>) -> Result<(), AccessError> {
        if self.raw {
            return Err(AccessError(format!(
                "task '{}': data '{}' is in device memory on node {}, which the host cannot address; a device body reaches it through device views",
                self.node.display_name(),
                h.name(),
                self.mem_node
            )));
        }
        Ok(())
    }

    /// Shared access to a handle declared R or RW.
    pub fn read<'a, T: Send + Sync + 'static>(
        &'a self,
        h: &'a DataHandle<T>,
    ) -> Result<&'a T, AccessError> {
        let i = self.find(h)?;
        self.host_addressable(h)?;
        let total = self.node.accesses.len();
        let mode = self.node.accesses[i].mode;
        if !mode.reads() {
            return Err(AccessError(format!(
                "task '{}' declared data '{}' {}, so it may not read it",
                self.node.display_name(),
                h.name(),
                mode
            )));
        }
        if self.borrows.get(i, total) == Borrow::Exclusive {
            return Err(AccessError(format!(
                "task '{}' already holds data '{}' mutably",
                self.node.display_name(),
                h.name()
            )));
        }
        self.borrows.set(i, total, Borrow::Shared);
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
        let total = self.node.accesses.len();
        let mode = self.node.accesses[i].mode;
        if !mode.writes() {
            return Err(AccessError(format!(
                "task '{}' declared data '{}' R, so it may not write it",
                self.node.display_name(),
                h.name()
            )));
        }
        if self.borrows.get(i, total) != Borrow::Free {
            return Err(AccessError(format!(
                "task '{}' already borrowed data '{}' in this body",
                self.node.display_name(),
                h.name()
            )));
        }
        self.borrows.set(i, total, Borrow::Exclusive);
        // SAFETY: the task declared the handle in a writing mode and is
        // running, so no other task touching it runs concurrently; within
        // this body, `borrows` makes this the only reference to the value.
        Ok(unsafe { &mut *h.value_ptr(self.mem_node) })
    }

    /// Check that this body may take handle `h` (declared at index `i`) in
    /// device memory, with `borrow` (the same rules as `read` / `write`).
    fn take_device<T>(
        &self,
        h: &DataHandle<T>,
        borrow: Borrow,
    ) -> Result<crate::device::DeviceParts<'t>, AccessError> {
        let i = self.find(h)?;
        if !self.raw {
            return Err(AccessError(format!(
                "task '{}' asked for data '{}' in device memory, but it runs on host-addressable memory (node {}): use read/write",
                self.node.display_name(),
                h.name(),
                self.mem_node
            )));
        }
        let total = self.node.accesses.len();
        let mode = self.node.accesses[i].mode;
        let allowed = match borrow {
            Borrow::Exclusive => mode.writes() && self.borrows.get(i, total) == Borrow::Free,
            _ => mode.reads() && self.borrows.get(i, total) != Borrow::Exclusive,
        };
        if !allowed {
            return Err(AccessError(format!(
                "task '{}' declared data '{}' {mode} (or already borrowed it), so it may not take it this way",
                self.node.display_name(),
                h.name()
            )));
        }
        self.borrows.set(i, total, borrow);
        let a = &self.node.accesses[i];
        // SAFETY: the task is running on `mem_node`, where its replicas are
        // acquired and pinned until the body returns.
        unsafe { a.handle.device_parts(self.mem_node) }.ok_or_else(|| {
            AccessError(format!(
                "data '{}' has no replica in device memory on node {}",
                h.name(),
                self.mem_node
            ))
        })
    }

    /// A read-only view of a handle declared R or RW in the device memory
    /// this body runs on (a device body of a dynamic task).
    pub fn device_view<T: DeviceData>(&self, h: &DataHandle<T>) -> Result<T::Ref<'t>, AccessError> {
        T::view(self.take_device(h, Borrow::Shared)?).map_err(AccessError)
    }

    /// A writable view of a handle declared W or RW in the device memory
    /// this body runs on. Can be taken once per body.
    pub fn device_view_mut<T: DeviceData>(
        &self,
        h: &DataHandle<T>,
    ) -> Result<T::Mut<'t>, AccessError> {
        T::view_mut(self.take_device(h, Borrow::Exclusive)?).map_err(AccessError)
    }

    /// Same as [`write`](Self::write): the access for an RW handle.
    pub fn rw<'a, T: Send + Sync + 'static>(
        &'a self,
        h: &'a DataHandle<T>,
    ) -> Result<&'a mut T, AccessError> {
        self.write(h)
    }
}
