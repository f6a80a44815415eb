//! Coherence of a handle's replicas across memory nodes (MSI-like): which
//! replicas are valid, making one valid where a task runs, and freeing them.
//! The protocol, its states and why it cannot deadlock: `README.md` beside
//! this file.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::AnyHandle;
use crate::access::AccessMode;
use crate::device::{DeviceBuffer, DeviceKey, DeviceMemory, DeviceParts};
use crate::memory::{Memory, NodeId, Replicate, HOST};
use crate::util::lock;

/// The data's name as errors give it, formatted only when one is made: a
/// handle's display name is built at its first use (`HandleCore::display`),
/// and Task Bench's default graph writes a new handle at every task, whose
/// every send acquired it and paid for the formatting and the `String` (900
/// instructions a step on a rank of a 2-rank `stencil_1d`, callgrind) with
/// no error to name.
pub(crate) type Name<'a> = &'a dyn std::fmt::Display;

/// How to copy a `Replicate` type, captured at registration as plain
/// function pointers so `Replicas<T>` needs no trait bound.
pub(crate) struct ReplicaFns<T> {
    pub(crate) replicate: fn(&T) -> T,
    pub(crate) copy_from: fn(&mut T, &T),
    pub(crate) parts: fn(&T) -> Option<Vec<&[u8]>>,
    pub(crate) parts_mut: fn(&mut T) -> Option<Vec<&mut [u8]>>,
    pub(crate) one_part: fn(&T) -> Option<&[u8]>,
    pub(crate) one_part_mut: fn(&mut T) -> Option<&mut [u8]>,
}

impl<T: Replicate> ReplicaFns<T> {
    pub(crate) fn of() -> Self {
        ReplicaFns {
            replicate: T::replicate,
            copy_from: T::copy_from,
            parts: T::parts,
            parts_mut: T::parts_mut,
            one_part: T::one_part,
            one_part_mut: T::one_part_mut,
        }
    }
}

/// A replica on a node whose memory the host cannot address (a GPU): one
/// device buffer per part of the value (`Replicate::parts`).
pub(crate) type RawReplica = Vec<Box<dyn DeviceBuffer>>;

fn bit(node: NodeId) -> u64 {
    1 << node
}

/// Replica bookkeeping of one handle, protected by `Replicas::state`.
pub(crate) struct ReplicaState {
    /// Bit `n`: node `n` holds a valid copy.
    pub(crate) valid: u64,
    /// Bit `n`: node `n` has an allocated replica (bit 0, the host, always).
    pub(crate) present: u64,
    /// Bit `n`: a copy into node `n` (or its allocation) is in flight, done
    /// by the thread that set the bit, without the lock. Nobody else touches
    /// that replica until the bit clears.
    pub(crate) filling: u64,
    /// Users of each node's replica: running tasks, and copies reading it.
    pub(crate) pins: Vec<u32>,
    /// Copies of this handle in flight (any direction). A writer starts only
    /// when there is none, and no copy starts while a writer runs: a copy
    /// never reads a replica being written.
    pub(crate) copies: u32,
    /// Running tasks that write this handle (on any node). While non-zero,
    /// prefetches and evictions leave the handle alone.
    pub(crate) writers: u32,
    /// LRU stamps per node.
    pub(crate) last_use: Vec<u64>,
    /// Bit `n`: this handle is on node `n`'s resident list (it stays there
    /// for good, see `Memory::add_resident`), so the list is never searched.
    pub(crate) listed: u64,
}

impl ReplicaState {
    /// Whether `node`'s replica can be freed now.
    fn evictable(&self, node: NodeId) -> bool {
        self.present & bit(node) != 0
            && self.pins[node] == 0
            && self.writers == 0
            && self.copies == 0
            && self.filling == 0
    }
}

/// Device replicas of a handle. The host copy stays in `HandleInner::value`.
pub(crate) struct Replicas<T> {
    fns: ReplicaFns<T>,
    /// Index = node; slot 0 is unused (the host copy is `value`). A slot's
    /// contents are written only by the thread that set its `filling` bit
    /// (a copy or allocation) or by an eviction holding `state` with the
    /// replica unused; they are read by tasks that pinned it and by copies
    /// that pinned it as their source.
    slots: Box<[UnsafeCell<Option<T>>]>,
    /// Index = node: the replicas on nodes with their own device memory
    /// (the same rules as `slots`; such a node never uses `slots`).
    raw: Box<[UnsafeCell<Option<RawReplica>>]>,
    /// Byte sizes of the value's parts, fixed at registration; `None`: the
    /// type cannot live in device memory.
    part_bytes: Option<Vec<usize>>,
    /// `Replicate::dims`, recorded at registration for device views.
    dims: [usize; 4],
    pub(crate) state: Mutex<ReplicaState>,
    /// Signalled whenever `state` changes in a way a waiter may care about
    /// (a fill completes, a pin or writer goes away).
    changed: Condvar,
    /// Threads waiting on `changed`, counted under `state`'s lock, so a
    /// notifier that changed the state under that lock sees every waiter
    /// that checked the old state: `notify` skips the condition variable
    /// when there is none. std's `Condvar::notify_all` makes a `futex`
    /// system call whether anyone waits or not, and a remote edge's pack
    /// and its unpack each notified once (about 0.3 µs each).
    waiters: AtomicUsize,
    /// Mirror of `state.valid`, written under the lock, read without it by
    /// `dmda` (a placement hint; it must not wait behind a copy).
    valid_hint: AtomicU64,
    pub(crate) bytes: u64,
    /// The host is the runtime's only memory node (no device, emulated or
    /// simulated): then the state above never changes that matters. The
    /// host's replica is the only one and always valid; nothing copies,
    /// evicts or prefetches it, and its pins and writers are read only by
    /// those. So `acquire`, `release` and `unpin` on the host leave the
    /// state alone, with no lock: a lock (and, for `acquire`, a shared LRU
    /// tick) each, four times per remote edge of a small item (packing it:
    /// `acquire`, `unpin`; writing it on arrival: `acquire`, `release`),
    /// about 290 of a 2-rank Task Bench step's 13,500 instructions
    /// (`callgrind`).
    single: bool,
    pub(crate) mem: Arc<Memory>,
    /// Virtual data (simulated time): no replica holds a value, so
    /// allocations and copies only change the state above and hand the
    /// transfer to the link model (`Memory::transfer`).
    pub(crate) is_virtual: bool,
}

impl<T> Replicas<T> {
    pub(crate) fn new(value: &T, mem: Arc<Memory>) -> Self
    where
        T: Replicate,
    {
        let part_bytes = value.parts().map(|p| p.iter().map(|b| b.len()).collect());
        Self::with_layout(part_bytes, value.dims(), value.bytes() as u64, mem, false)
    }

    /// Replicas of virtual data of `bytes` bytes in one part, shaped `dims`:
    /// the protocol runs as for real data, but nothing is allocated or copied.
    pub(crate) fn new_virtual(bytes: u64, dims: [usize; 4], mem: Arc<Memory>) -> Self
    where
        T: Replicate,
    {
        Self::with_layout(Some(vec![bytes as usize]), dims, bytes, mem, true)
    }

    /// Replicas whose only valid copy is the host's.
    fn with_layout(
        part_bytes: Option<Vec<usize>>,
        dims: [usize; 4],
        bytes: u64,
        mem: Arc<Memory>,
        is_virtual: bool,
    ) -> Self
    where
        T: Replicate,
    {
        let nodes = mem.nodes.len();
        Replicas {
            single: nodes == 1,
            fns: ReplicaFns::of(),
            slots: (0..nodes).map(|_| UnsafeCell::new(None)).collect(),
            raw: (0..nodes).map(|_| UnsafeCell::new(None)).collect(),
            part_bytes,
            dims,
            state: Mutex::new(ReplicaState {
                valid: 1,
                present: 1,
                filling: 0,
                pins: vec![0; nodes],
                copies: 0,
                writers: 0,
                last_use: vec![0; nodes],
                listed: 0,
            }),
            changed: Condvar::new(),
            waiters: AtomicUsize::new(0),
            valid_hint: AtomicU64::new(1),
            bytes,
            mem,
            is_virtual,
        }
    }

    pub(crate) fn valid_hint(&self) -> u64 {
        // Relaxed: a hint for placement; correctness never depends on it.
        self.valid_hint.load(Ordering::Relaxed)
    }

    fn publish(&self, st: &ReplicaState) {
        self.valid_hint.store(st.valid, Ordering::Relaxed);
    }

    /// Something changed that a waiter on this handle or a reservation on
    /// `node` may be waiting for.
    /// Called after the change, with or without the lock held.
    fn notify(&self, node: NodeId) {
        self.notify_waiters();
        self.mem.notify(node);
    }

    /// Wake the threads waiting on `changed`, if any. Relaxed: a waiter
    /// counted itself under `state`'s lock before it released the lock to
    /// wait, and the caller changed the state under that lock, so the
    /// count is seen (the lock orders both).
    fn notify_waiters(&self) {
        if self.waiters.load(Ordering::Relaxed) > 0 {
            self.changed.notify_all();
        }
    }

    fn wait<'a>(&self, st: MutexGuard<'a, ReplicaState>) -> MutexGuard<'a, ReplicaState> {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        st
    }

    /// The value's parts (`Replicate::parts`).
    pub(crate) fn parts<'v>(&self, v: &'v T) -> Option<Vec<&'v [u8]>> {
        (self.fns.parts)(v)
    }

    /// The value's parts, writable.
    pub(crate) fn parts_mut<'v>(&self, v: &'v mut T) -> Option<Vec<&'v mut [u8]>> {
        (self.fns.parts_mut)(v)
    }

    /// The value's only part, if its type says it has one
    /// (`Replicate::one_part`).
    pub(crate) fn one_part<'v>(&self, v: &'v T) -> Option<&'v [u8]> {
        (self.fns.one_part)(v)
    }

    /// The value's only part, writable.
    pub(crate) fn one_part_mut<'v>(&self, v: &'v mut T) -> Option<&'v mut [u8]> {
        (self.fns.one_part_mut)(v)
    }

    /// Pointer to the copy on non-host `node` (host-addressable nodes).
    pub(crate) fn slot_ptr(&self, node: NodeId) -> *mut Option<T> {
        self.slots[node].get()
    }

    /// Pointer to the copy on `node` (`host` is the handle's host value).
    fn slot(&self, host: &UnsafeCell<Option<T>>, node: NodeId) -> *mut Option<T> {
        if node == HOST {
            host.get()
        } else {
            self.slots[node].get()
        }
    }

    /// The raw replica on `node`.
    ///
    /// # Safety
    /// The caller holds a pin on `node`'s replica (a running task), so it is
    /// neither freed nor replaced while the result lives.
    pub(crate) unsafe fn raw_parts(&self, node: NodeId) -> Option<DeviceParts<'_>> {
        // SAFETY: forwarded to the caller.
        let bufs = unsafe { (*self.raw.get(node)?.get()).as_ref()? };
        let device = DeviceKey::of(&**self.mem.device(node)?);
        Some(DeviceParts {
            bufs,
            dims: self.dims,
            device,
            taken: 0,
        })
    }

    fn not_device_data(&self, name: Name<'_>, node: NodeId) -> String {
        format!(
            "data '{name}' has a type that cannot live in device memory ({}): its Replicate impl gives no parts",
            self.mem.nodes[node].name
        )
    }

    /// Device buffers for every part of this handle on `node`.
    fn alloc_raw(
        &self,
        name: Name<'_>,
        dm: &dyn DeviceMemory,
        node: NodeId,
    ) -> Result<RawReplica, String> {
        let sizes = self
            .part_bytes
            .as_ref()
            .ok_or_else(|| self.not_device_data(name, node))?;
        sizes
            .iter()
            .map(|&n| dm.alloc(n))
            .collect::<Result<_, _>>()
            .map_err(|e| {
                format!(
                    "data '{name}': allocation on {} failed: {e}",
                    self.mem.nodes[node].name
                )
            })
    }

    /// Allocate `to`'s replica: device buffers, or, on a host-addressable
    /// node, a replicate of the replica on `shape` (for its shape; a
    /// replicate of a valid source is also its copy). Runs without the state
    /// lock: the caller set `to`'s filling bit and pinned `shape`, so nobody
    /// else touches `to` and `shape` is neither freed nor written meanwhile.
    fn allocate(
        &self,
        host: &UnsafeCell<Option<T>>,
        name: Name<'_>,
        to: NodeId,
        shape: NodeId,
    ) -> Result<(), String> {
        if self.is_virtual {
            return Ok(());
        }
        // SAFETY: as described above (the host value, when it is `shape`,
        // is not being filled: the caller waited for its filling bit).
        unsafe {
            match self.mem.device_memory(to) {
                Some(dm) => *self.raw[to].get() = Some(self.alloc_raw(name, dm, to)?),
                None => {
                    let src = (*self.slot(host, shape))
                        .as_ref()
                        .expect("a present replica has a value");
                    *self.slot(host, to) = Some((self.fns.replicate)(src));
                }
            }
        }
        Ok(())
    }

    /// Copy the valid replica at `from` into the allocated one at `to`, as a
    /// transfer. Runs without the state lock, under the same rules as
    /// `allocate` (`from` pinned and valid, no writer running).
    fn copy(
        &self,
        host: &UnsafeCell<Option<T>>,
        name: Name<'_>,
        id: u64,
        from: NodeId,
        to: NodeId,
    ) -> Result<(), String> {
        let mem = &self.mem;
        let bytes = self.bytes;
        if self.is_virtual {
            mem.transfer(id, from, to, bytes, &mut || {});
            return Ok(());
        }
        let mut result = Ok(());
        // SAFETY (all blocks): `to` is ours (filling bit), `from` is pinned
        // and valid with no writer running.
        match (mem.device_memory(from), mem.device_memory(to)) {
            (None, None) => unsafe {
                let src = (*self.slot(host, from)).as_ref().expect("valid replica");
                let dst = (*self.slot(host, to)).as_mut().expect("allocated replica");
                mem.transfer(id, from, to, bytes, &mut || (self.fns.copy_from)(dst, src));
            },
            (None, Some(dm)) => unsafe {
                let src = (*self.slot(host, from)).as_ref().expect("valid replica");
                let parts = (self.fns.parts)(src).ok_or_else(|| self.not_device_data(name, to))?;
                let bufs = (*self.raw[to].get()).as_ref().expect("allocated replica");
                mem.transfer(id, from, to, bytes, &mut || {
                    result = upload(dm, &parts, bufs);
                });
            },
            (Some(dm), None) => unsafe {
                let dst = (*self.slot(host, to)).as_mut().expect("allocated replica");
                let mut parts =
                    (self.fns.parts_mut)(dst).ok_or_else(|| self.not_device_data(name, from))?;
                let bufs = (*self.raw[from].get()).as_ref().expect("valid replica");
                mem.transfer(id, from, to, bytes, &mut || {
                    result = download(dm, bufs, &mut parts);
                });
            },
            (Some(src_dm), Some(dst_dm)) => unsafe {
                let dst = (*self.raw[to].get()).as_ref().expect("allocated replica");
                let src = (*self.raw[from].get()).as_ref().expect("valid replica");
                mem.transfer(id, from, to, bytes, &mut || {
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
                "data '{name}': copy from {} to {} failed: {e}",
                mem.nodes[from].name, mem.nodes[to].name
            )
        })
    }

    /// Allocate `to` if `shape` says so, then copy `from` into it if given;
    /// a host-addressable allocation shaped from the source itself is the
    /// copy (counted as the transfer it is).
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        host: &UnsafeCell<Option<T>>,
        name: Name<'_>,
        id: u64,
        from: Option<NodeId>,
        to: NodeId,
        shape: Option<NodeId>,
    ) -> Result<(), String> {
        if let Some(s) = shape {
            self.allocate(host, name, to, s)?;
            if from == Some(s) && self.mem.device_memory(to).is_none() {
                self.mem.transfer(id, s, to, self.bytes, &mut || {});
                return Ok(());
            }
        }
        match from {
            Some(f) => self.copy(host, name, id, f, to),
            None => Ok(()),
        }
    }

    /// Free `node`'s replica.
    ///
    /// # Safety
    /// `state` is locked and the replica is evictable (unused by anyone).
    unsafe fn free(&self, host: &UnsafeCell<Option<T>>, node: NodeId) {
        // SAFETY: forwarded to the caller.
        unsafe {
            if self.mem.device_memory(node).is_some() {
                *self.raw[node].get() = None;
            } else {
                *self.slot(host, node) = None;
            }
        }
    }

    /// Make the data usable on `node` for `mode` (see README.md), pinning the
    /// replica when `pin` (a task about to run); without `pin` this is a
    /// best-effort prefetch that gives up rather than wait. `me` is the handle.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire(
        &self,
        host: &UnsafeCell<Option<T>>,
        name: Name<'_>,
        id: u64,
        me: &Arc<dyn AnyHandle>,
        node: NodeId,
        mode: AccessMode,
        pin: bool,
    ) -> Result<(), String> {
        if self.single && node == HOST {
            return Ok(());
        }
        let mem = &*self.mem;
        let b = bit(node);
        // Bytes reserved on `node` for a replica not allocated yet.
        let mut reserved = false;
        let unreserve = |reserved: &mut bool| {
            if std::mem::take(reserved) {
                mem.unreserve(node, self.bytes);
            }
        };
        let mut st = lock(&self.state);
        loop {
            if !pin && (st.writers > 0 || st.filling & b != 0) {
                // A prefetch racing with a writer, or with another fill of
                // the same replica: leave it to the task that needs the data.
                unreserve(&mut reserved);
                return Ok(());
            }
            if st.filling & b != 0 {
                st = self.wait(st);
                continue;
            }
            let need_copy = mode.reads() && st.valid & b == 0;
            let need_alloc = node != HOST && st.present & b == 0;
            if need_alloc && !reserved {
                // Reserving may evict other handles' replicas and wait for
                // room: never with this handle's lock held. It stops when
                // another thread starts or finishes allocating this very
                // replica (a prefetch): this handle is never evicted to make
                // room for itself, so the room it waited for might never come.
                drop(st);
                let still_missing = || {
                    let st = lock(&self.state);
                    st.present & b == 0 && st.filling & b == 0
                };
                reserved = mem
                    .reserve(
                        node,
                        self.bytes,
                        Arc::as_ptr(me) as *const (),
                        pin,
                        &still_missing,
                    )
                    .map_err(|e| format!("data '{name}': {e}"))?;
                st = lock(&self.state);
                continue;
            }
            if !need_alloc {
                unreserve(&mut reserved);
            }
            if need_copy || need_alloc {
                // Prefer the host as the source; else any valid device copy.
                let from = need_copy.then(|| {
                    assert!(st.valid != 0, "data '{name}' has no valid replica");
                    if st.valid & 1 != 0 {
                        HOST
                    } else {
                        st.valid.trailing_zeros() as NodeId
                    }
                });
                // A host-addressable allocation copies the shape of a
                // host-addressable replica: the source if it is one, else
                // another valid one, else the host value.
                let host_addressable = |n: NodeId| mem.device_memory(n).is_none();
                let shape = (need_alloc).then(|| match from {
                    Some(f) if host_addressable(f) => f,
                    _ => (0..mem.nodes.len())
                        .find(|&n| n != node && st.valid & bit(n) != 0 && host_addressable(n))
                        .unwrap_or(HOST),
                });
                if shape == Some(HOST) && st.filling & bit(HOST) != 0 {
                    st = self.wait(st);
                    continue;
                }
                let mut pinned: Vec<NodeId> = from.into_iter().collect();
                pinned.extend(shape.filter(|&s| Some(s) != from && host_addressable(node)));
                st.filling |= b;
                for &s in &pinned {
                    st.pins[s] += 1;
                }
                st.copies += 1;
                drop(st);
                let shape = shape.filter(|_| need_alloc);
                let result = self.fill(host, name, id, from, node, shape);
                st = lock(&self.state);
                st.filling &= !b;
                st.copies -= 1;
                for &s in &pinned {
                    st.pins[s] -= 1;
                }
                match result {
                    Ok(()) => {
                        if need_alloc {
                            st.present |= b;
                            // The reservation now backs the replica.
                            reserved = false;
                            if st.listed & b == 0 {
                                st.listed |= b;
                                mem.add_resident(node, Arc::downgrade(me));
                            }
                        }
                        if need_copy {
                            st.valid |= b;
                        }
                        self.publish(&st);
                        self.notify(node);
                        for &s in &pinned {
                            mem.notify(s);
                        }
                        if !pin {
                            st.last_use[node] = mem.next_tick();
                            return Ok(());
                        }
                        continue;
                    }
                    Err(e) => {
                        drop(st);
                        unreserve(&mut reserved);
                        self.notify(node);
                        return Err(e);
                    }
                }
            }
            // The replica is in place.
            if pin {
                if mode.writes() && st.copies > 0 {
                    st = self.wait(st);
                    continue;
                }
                st.pins[node] += 1;
                if mode.writes() {
                    st.writers += 1;
                }
            }
            st.last_use[node] = mem.next_tick();
            return Ok(());
        }
    }

    /// Unpin after a task; a write leaves `node`'s replica the only valid one.
    pub(crate) fn release(&self, node: NodeId, mode: AccessMode) {
        if self.single && node == HOST {
            return;
        }
        let mut st = lock(&self.state);
        st.pins[node] = st.pins[node].saturating_sub(1);
        if mode.writes() {
            st.valid = bit(node);
            st.writers = st.writers.saturating_sub(1);
        }
        self.publish(&st);
        drop(st);
        self.notify(node);
    }

    /// Undo an `acquire` whose task never ran: unpin, validity unchanged.
    pub(crate) fn unpin(&self, node: NodeId, mode: AccessMode) {
        if self.single && node == HOST {
            return;
        }
        let mut st = lock(&self.state);
        st.pins[node] = st.pins[node].saturating_sub(1);
        if mode.writes() {
            st.writers = st.writers.saturating_sub(1);
        }
        drop(st);
        self.notify(node);
    }

    /// After a failed device body: unpin `node`'s replica and, for a write,
    /// mark it invalid — possible only if another valid copy exists (returns
    /// false otherwise: the data cannot be trusted anywhere).
    pub(crate) fn discard(&self, node: NodeId, mode: AccessMode) -> bool {
        let mut st = lock(&self.state);
        st.pins[node] = st.pins[node].saturating_sub(1);
        let trusted = if mode.writes() {
            st.writers = st.writers.saturating_sub(1);
            let others = st.valid & !bit(node);
            if others != 0 {
                st.valid = others;
            }
            others != 0
        } else {
            true
        };
        self.publish(&st);
        drop(st);
        self.notify(node);
        trusted
    }

    /// LRU stamp of the replica on `node`, if one is allocated there (a
    /// busy handle is skipped: it is not a candidate now).
    pub(crate) fn last_use(&self, node: NodeId) -> Option<u64> {
        let st = self.state.try_lock().ok()?;
        (st.present & bit(node) != 0).then(|| st.last_use[node])
    }

    /// Free the replica on `node` if nobody uses it, writing it back to the
    /// host first if it is the only valid copy (that copy runs without the
    /// lock; if someone started using the replica meanwhile, it stays).
    /// Returns the bytes freed.
    pub(crate) fn try_evict(
        &self,
        host: &UnsafeCell<Option<T>>,
        name: Name<'_>,
        id: u64,
        node: NodeId,
    ) -> Option<u64> {
        if self.mem.is_host(node) {
            return None;
        }
        let mut st = self.state.try_lock().ok()?;
        if !st.evictable(node) {
            return None;
        }
        if st.valid == bit(node) {
            st.filling |= bit(HOST);
            st.pins[node] += 1;
            st.copies += 1;
            drop(st);
            let result = self.copy(host, name, id, node, HOST);
            st = lock(&self.state);
            st.filling &= !bit(HOST);
            st.pins[node] -= 1;
            st.copies -= 1;
            if result.is_ok() {
                st.valid |= bit(HOST);
            }
            self.publish(&st);
            self.notify_waiters();
            // A failed write-back keeps the replica; a replica someone
            // started to use meanwhile stays too.
            if result.is_err() || !st.evictable(node) {
                return None;
            }
        }
        // SAFETY: `state` is locked and the replica is evictable.
        unsafe { self.free(host, node) };
        st.present &= !bit(node);
        st.valid &= !bit(node);
        self.publish(&st);
        Some(self.bytes)
    }

    /// Give back the bytes of every device replica (the handle is dropped).
    pub(crate) fn drop_all(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for node in 1..self.slots.len() {
            if st.present & bit(node) != 0 {
                self.mem.unreserve(node, self.bytes);
            }
        }
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
