//! Memory nodes: the host and each device's memory, with per-node limits,
//! replica accounting, LRU eviction and transfer statistics.
//!
//! Coherence itself (which replica of a handle is valid) lives with the
//! handle (`data/coherence.rs`); this module owns what is per node. Protocol
//! (`data/coherence.rs` and this module implement it; `data/README.md` has
//! it step by step, in brief):
//! - A task on node `n` *acquires* each access before its body runs: for a
//!   read, a valid replica is copied to `n` if `n` has none; for a write, `n`
//!   gets a replica (allocated if absent). The replica is *pinned* until the
//!   task *releases* it; a write then leaves `n`'s replica the only valid one.
//! - Allocating on a node with a limit first *reserves* the bytes; if they do
//!   not fit, unpinned replicas are evicted in least-recently-used order
//!   (a replica that is the only valid copy is written back to the host
//!   first). Victims are locked with `try_lock` only, so reservation never
//!   waits on another handle's lock while holding one: no lock cycle.
//! - Admission control: a task whose working set exceeds a node's limit can
//!   never run there and fails at once, naming the task and the sizes. A
//!   smaller working set always fits eventually: a device worker runs one
//!   task at a time and prefetches do not pin, so everything but the current
//!   task's replicas is evictable — eviction cannot livelock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::data::AnyHandle;
use crate::device::Device;
use crate::trace::model::TransferRecord;
use crate::util::lock;

/// Index of a memory node: host NUMA nodes first (0 .. numa), then device
/// `d` at node `numa + d`. Node 0 holds the copy `unregister` returns.
pub type NodeId = usize;
/// The first host memory node (NUMA node 0).
pub const HOST: NodeId = 0;
/// How long a task waits for busy replicas to become evictable before its
/// allocation fails. The admission check guarantees its working set fits, so
/// only transient business (copies, writers elsewhere) can be in the way.
const RESERVE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);
/// Longest single wait for a notification inside `reserve` (a safety net:
/// every change that can free room notifies, see `Memory::notify`).
const RESERVE_NAP: std::time::Duration = std::time::Duration::from_millis(20);
/// On a node that lists more than [`EVICT_BATCH_FROM`] replicas, a reservation
/// that must evict frees its own bytes plus `1/EVICT_BATCH` of the node's
/// limit, from one scan of the node's replicas (as StarPU reclaims memory
/// down to a target, `STARPU_TARGET_AVAILABLE_MEM`, not one buffer at a
/// time). One scan per evicted tile sorted every replica the node ever held:
/// on the simulated Hetero-HPL node (`lu --n 66240 --nb 288 --front stf`,
/// 52,900 tiles) that was 38 % of the run in `last_use` and 17 % in the sort,
/// 78 s of wall time for 1365 tasks; batched, 7 s, and the same prediction to
/// the digit. The replicas evicted early are the next in LRU order, which the
/// following reservations would have evicted anyway unless used meanwhile.
const EVICT_BATCH: u64 = 256;
/// Below this many listed replicas a scan is cheap, and eviction stays one
/// victim at a time: batches moved the predictions of the 1 GiB devices
/// (TianHe-1 62.3 → 61.7 %), whose tiles are a sizeable part of their
/// memory.
const EVICT_BATCH_FROM: usize = 4096;

/// Most memory nodes a runtime may have (replica masks are `u64`).
pub const MAX_NODES: usize = 64;

/// Map every page of a freshly zeroed buffer now, so that later writes do not
/// pay a page fault per 4 KiB (for set-up time, before a run's clock starts).
/// A zeroed allocation may leave its pages unmapped (they read as zeros):
/// this writes `T::default()` once per page, volatile so the compiler cannot
/// drop the writes as stores of zeros into zeroed memory. `T::default()`
/// must be the all-zero value (true of the numbers), so the contents do not
/// change.
pub fn touch_pages<T: Copy + Default>(buf: &mut [T]) {
    let step = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    for e in buf.iter_mut().step_by(step) {
        // SAFETY: `e` is a valid, aligned, exclusive reference into `buf`.
        unsafe { std::ptr::write_volatile(e, T::default()) }
    }
}

/// Data that can have replicas on several memory nodes: explicit copies
/// between separate allocations.
pub trait Replicate: Send + Sync + 'static {
    /// Bytes this value occupies (what a transfer moves).
    fn bytes(&self) -> usize;
    /// A new allocation holding a copy.
    fn replicate(&self) -> Self;
    /// Overwrite `self` with `src` (same shape).
    fn copy_from(&mut self, src: &Self);
    /// The value's contiguous parts as bytes, for copies to a device's own
    /// memory (StarPU's data interfaces: a tile is one part, a CSR matrix
    /// three). `None` (the default): the type cannot live in device memory.
    /// The number and sizes of the parts must not change over the value's
    /// life (`copy_from` keeps the shape).
    fn parts(&self) -> Option<Vec<&[u8]>> {
        None
    }
    /// The same parts, writable, in the same order.
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        None
    }
    /// For a value of one part, that part, without the list
    /// [`parts`](Self::parts) allocates: a message packs and unpacks it with
    /// no allocation (an 8-byte remote edge spent about 100 instructions
    /// on each list). `None` (the default): ask `parts`. When `Some`, it
    /// must be `parts`' only part.
    fn one_part(&self) -> Option<&[u8]> {
        None
    }
    /// The same part, writable (`Some` exactly when `one_part` is).
    fn one_part_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
    /// Shape figures device views need besides the parts' sizes (a tile's
    /// rows and columns, say), recorded once at registration; like the parts,
    /// they must not change over the value's life.
    fn dims(&self) -> [usize; 4] {
        [0; 4]
    }
}

/// Data that device bodies reach through typed views of its parts in device
/// memory ([`DevSlice`](crate::device::DevSlice) and friends) instead of raw
/// addresses.
pub trait DeviceData: Replicate {
    /// The view a device body gets for a read.
    type Ref<'a>;
    /// The view a device body gets for a write.
    type Mut<'a>;
    /// A read-only view of `parts`, or why they do not fit the type.
    fn view(parts: crate::device::DeviceParts<'_>) -> Result<Self::Ref<'_>, String>;
    /// A writable view of `parts`.
    fn view_mut(parts: crate::device::DeviceParts<'_>) -> Result<Self::Mut<'_>, String>;
}

impl<T: bytemuck::Pod + Send + Sync + 'static> Replicate for Vec<T> {
    fn bytes(&self) -> usize {
        std::mem::size_of_val(self.as_slice())
    }
    fn replicate(&self) -> Self {
        self.clone()
    }
    fn copy_from(&mut self, src: &Self) {
        self.clear();
        self.extend_from_slice(src);
    }
    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![bytemuck::cast_slice(self.as_slice())])
    }
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        Some(vec![bytemuck::cast_slice_mut(self.as_mut_slice())])
    }
    fn one_part(&self) -> Option<&[u8]> {
        Some(bytemuck::cast_slice(self.as_slice()))
    }
    fn one_part_mut(&mut self) -> Option<&mut [u8]> {
        Some(bytemuck::cast_slice_mut(self.as_mut_slice()))
    }
    fn dims(&self) -> [usize; 4] {
        [self.len(), 0, 0, 0]
    }
}

/// Fixed-size arrays of plain numbers (`[i64; 2]`, `[f64; 3]`): one part,
/// so they can live on devices and travel between ranks (issue 42: only
/// `Vec` could).
impl<T: bytemuck::Pod + Send + Sync + 'static, const N: usize> Replicate for [T; N] {
    fn bytes(&self) -> usize {
        std::mem::size_of_val(self)
    }
    fn replicate(&self) -> Self {
        *self
    }
    fn copy_from(&mut self, src: &Self) {
        *self = *src;
    }
    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![bytemuck::cast_slice(self.as_slice())])
    }
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        Some(vec![bytemuck::cast_slice_mut(self.as_mut_slice())])
    }
    fn one_part(&self) -> Option<&[u8]> {
        Some(bytemuck::cast_slice(self.as_slice()))
    }
    fn one_part_mut(&mut self) -> Option<&mut [u8]> {
        Some(bytemuck::cast_slice_mut(self.as_mut_slice()))
    }
    fn dims(&self) -> [usize; 4] {
        [N, 0, 0, 0]
    }
}

/// Scalars, as one part of their bytes. Written per type: a blanket impl
/// over `bytemuck::Pod` would overlap the `Vec` and array impls in
/// coherence's eyes.
macro_rules! replicate_scalar {
    ($($t:ty),*) => {$(
        impl Replicate for $t {
            fn bytes(&self) -> usize {
                std::mem::size_of::<$t>()
            }
            fn replicate(&self) -> Self {
                *self
            }
            fn copy_from(&mut self, src: &Self) {
                *self = *src;
            }
            fn parts(&self) -> Option<Vec<&[u8]>> {
                Some(vec![bytemuck::bytes_of(self)])
            }
            fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
                Some(vec![bytemuck::bytes_of_mut(self)])
            }
            fn one_part(&self) -> Option<&[u8]> {
                Some(bytemuck::bytes_of(self))
            }
            fn one_part_mut(&mut self) -> Option<&mut [u8]> {
                Some(bytemuck::bytes_of_mut(self))
            }
            fn dims(&self) -> [usize; 4] {
                [1, 0, 0, 0]
            }
        }
    )*};
}

replicate_scalar!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

impl<T: bytemuck::Pod + Send + Sync + 'static> DeviceData for Vec<T> {
    type Ref<'a> = crate::device::DevSlice<'a, T>;
    type Mut<'a> = crate::device::DevSliceMut<'a, T>;
    fn view(mut parts: crate::device::DeviceParts<'_>) -> Result<Self::Ref<'_>, String> {
        parts.slice(0)
    }
    fn view_mut(mut parts: crate::device::DeviceParts<'_>) -> Result<Self::Mut<'_>, String> {
        parts.slice_mut(0)
    }
}

/// One memory node.
pub(crate) struct MemoryNode {
    pub(crate) name: String,
    pub(crate) limit: Option<u64>,
    /// Bytes of replicas allocated or reserved here.
    pub(crate) used: AtomicU64,
    /// Replicas allocated here (weak: a dropped handle frees its own).
    pub(crate) resident: Mutex<Vec<Weak<dyn AnyHandle>>>,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) transfer_ns: AtomicU64,
    /// Bumped by every change that may make room (an unpin, a finished
    /// copy, freed bytes); reservations that found nothing to evict wait for
    /// it to move, on `room`.
    changes: AtomicU64,
    /// Threads waiting in `reserve` (notifiers lock `room_lock` only then).
    waiting: AtomicU64,
    room_lock: Mutex<()>,
    room: std::sync::Condvar,
}

impl MemoryNode {
    fn new(name: String, limit: Option<u64>) -> MemoryNode {
        MemoryNode {
            name,
            limit,
            used: AtomicU64::new(0),
            resident: Mutex::new(Vec::new()),
            bytes_in: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            transfer_ns: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            room_lock: Mutex::new(()),
            room: std::sync::Condvar::new(),
        }
    }
}

/// All memory nodes of a runtime, and the devices behind node 1.. .
pub(crate) struct Memory {
    pub(crate) nodes: Vec<MemoryNode>,
    pub(crate) devices: Vec<Arc<dyn Device>>,
    /// Number of host (NUMA) nodes; devices start at this index.
    pub(crate) host_nodes: usize,
    /// Model of a copy between two host NUMA nodes (for `dmda`'s estimates;
    /// the copy itself is a plain memcpy by the thread that needs the data).
    pub(crate) numa_link: crate::device::Link,
    /// LRU clock: bumped on every acquire.
    pub(crate) tick: AtomicU64,
    /// Transfers, when tracing: (record with `Instant`-based times converted by the caller).
    pub(crate) transfers: Option<Mutex<Vec<TransferRecord>>>,
    pub(crate) clock: Option<Arc<crate::recorder::TraceLog>>,
    /// Simulated time (`crate::simulate`): transfers move no bytes and take
    /// the virtual time the link model gives; reservations never wait (an
    /// allocation that finds no evictable replica over-commits the node and
    /// is counted). `None` on a real runtime.
    pub(crate) virtual_links: Option<Arc<dyn VirtualLinks>>,
}

/// Where a simulated runtime's transfers go (`crate::simulate` implements
/// it): the link model schedules the copy in virtual time.
pub(crate) trait VirtualLinks: Send + Sync {
    /// A copy of `bytes` of handle `handle` from node `from` to node `to`
    /// starts now (virtual time) or as soon as its links and its source
    /// allow; the link model remembers when the replica on `to` is ready.
    /// Returns the copy's virtual duration in ns.
    fn transfer(&self, handle: u64, from: NodeId, to: NodeId, bytes: u64) -> u64;
    /// A reservation that had to over-commit `node` (nothing evictable).
    fn overcommit(&self, _node: NodeId, _bytes: u64) {}
    /// Modelled seconds of a task on one host core (`dmda`'s estimate for
    /// CPU workers before measurements exist: the platform's, not a guess).
    fn cpu_seconds(&self, cost: &crate::device::TaskCost<'_>, team: usize) -> f64;
}

/// One memory node's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Node name (`host`, `emu0`, ...).
    pub name: String,
    /// Bytes copied into the node.
    pub bytes_in: u64,
    /// Replicas evicted from the node.
    pub evictions: u64,
    /// Bytes of replicas allocated there now.
    pub resident: u64,
    /// The node's limit.
    pub limit: Option<u64>,
    /// Time spent in transfers into the node, in ns.
    pub transfer_ns: u64,
}

/// Totals printed by drivers at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Per memory node, host first.
    pub nodes: Vec<NodeStats>,
}

impl MemoryStats {
    /// Total transfer time into every node, in seconds.
    pub fn transfer_seconds(&self) -> f64 {
        self.nodes.iter().map(|n| n.transfer_ns).sum::<u64>() as f64 * 1e-9
    }
}

impl std::fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for n in &self.nodes {
            let (name, bytes_in, evictions, used, limit) =
                (&n.name, &n.bytes_in, &n.evictions, &n.resident, &n.limit);
            write!(
                f,
                "node {name}: {:.1} MiB transferred in, {evictions} evictions, {:.1} MiB resident",
                *bytes_in as f64 / (1 << 20) as f64,
                *used as f64 / (1 << 20) as f64
            )?;
            if let Some(l) = limit {
                write!(f, " (limit {:.1} MiB)", *l as f64 / (1 << 20) as f64)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

impl Memory {
    pub(crate) fn new(
        host_nodes: usize,
        devices: Vec<Arc<dyn Device>>,
        trace: Option<Arc<crate::recorder::TraceLog>>,
    ) -> Memory {
        let host_nodes = host_nodes.max(1);
        let mut nodes: Vec<MemoryNode> = (0..host_nodes)
            .map(|n| {
                let name = if host_nodes == 1 {
                    "host".into()
                } else {
                    format!("numa{n}")
                };
                MemoryNode::new(name, None)
            })
            .collect();
        for d in &devices {
            nodes.push(MemoryNode::new(d.name(), d.memory_limit()));
        }
        Memory {
            nodes,
            devices,
            host_nodes,
            numa_link: crate::device::Link {
                latency: std::time::Duration::from_micros(1),
                bandwidth: 20e9,
            },
            tick: AtomicU64::new(0),
            transfers: trace.as_ref().map(|_| Mutex::new(Vec::new())),
            clock: trace,
            virtual_links: None,
        }
    }

    /// Whether this is a simulated runtime's memory (virtual transfers).
    pub(crate) fn is_virtual(&self) -> bool {
        self.virtual_links.is_some()
    }

    /// The device behind `node` (none for the host).
    pub(crate) fn device(&self, node: NodeId) -> Option<&Arc<dyn Device>> {
        node.checked_sub(self.host_nodes)
            .and_then(|d| self.devices.get(d))
    }

    /// The device memory behind `node`, when the host cannot address it.
    pub(crate) fn device_memory(&self, node: NodeId) -> Option<&dyn crate::device::DeviceMemory> {
        self.device(node).and_then(|d| d.memory())
    }

    /// Admission control: whether a working set of `bytes` can ever fit on `node`.
    pub(crate) fn fits(&self, node: NodeId, bytes: u64) -> bool {
        self.nodes[node].limit.is_none_or(|limit| bytes <= limit)
    }

    /// Whether `node` is host memory (a NUMA node).
    pub(crate) fn is_host(&self, node: NodeId) -> bool {
        node < self.host_nodes
    }

    /// Modelled time to bring `bytes` to `to` from the nearest node in `valid`.
    pub(crate) fn transfer_estimate(&self, valid: u64, to: NodeId, bytes: u64) -> f64 {
        let host_mask = (1u64 << self.host_nodes) - 1;
        let link = if let Some(d) = self.device(to) {
            d.link()
        } else if valid & host_mask != 0 {
            self.numa_link
        } else {
            match self.device(valid.trailing_zeros() as NodeId) {
                Some(d) => d.link(),
                None => self.numa_link,
            }
        };
        link.time(bytes).as_secs_f64()
    }

    pub(crate) fn next_tick(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserve `bytes` on `node`, evicting unused replicas (never `keep`'s)
    /// in LRU order. Replicas can be busy for a moment (a copy in flight, a
    /// writer running elsewhere, another reservation): with `wait`, wait for
    /// a change on the node (`notify`) and retry, until `RESERVE_PATIENCE`
    /// has passed; without (prefetch, best effort), give up at once. `Err`
    /// names the figures.
    ///
    /// `needed` is asked (without any lock held here) before each eviction
    /// attempt and each wait: once it says no, the reservation stops and
    /// returns `Ok(false)` with nothing reserved. The caller reserves for a
    /// replica that is not there yet, and another thread (dmda's prefetch)
    /// may allocate that very replica meanwhile; since `keep`'s replicas are
    /// never evicted, waiting on would then wait for room that the caller's
    /// own replica holds — with a working set exactly at the node's limit,
    /// for ever (issue 17: `--sched dmda --emu 1:own-mem=1,mem=96KiB`).
    /// That fill notifies the node, so a waiting reservation is woken to ask.
    pub(crate) fn reserve(
        &self,
        node: NodeId,
        bytes: u64,
        keep: *const (),
        wait: bool,
        needed: &dyn Fn() -> bool,
    ) -> Result<bool, String> {
        let deadline = std::time::Instant::now() + RESERVE_PATIENCE;
        let n = &self.nodes[node];
        let Some(limit) = n.limit else {
            n.used.fetch_add(bytes, Ordering::Relaxed);
            return Ok(true);
        };
        if bytes > limit {
            return Err(format!(
                "needs {bytes} bytes on node {} but its limit is {limit} bytes",
                n.name
            ));
        }
        loop {
            // Read before trying, so a change made while trying is not missed.
            let seen = n.changes.load(Ordering::SeqCst);
            let cur = n.used.load(Ordering::Acquire);
            if cur + bytes <= limit {
                if n.used
                    .compare_exchange(cur, cur + bytes, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(true);
                }
                continue;
            }
            if !needed() {
                return Ok(false);
            }
            // Room for this reservation (and a batch more where the node
            // lists many replicas, see `EVICT_BATCH`).
            if self.evict_lru(node, keep, (cur + bytes).saturating_sub(limit), limit) {
                continue;
            }
            if let (Some(v), true) = (&self.virtual_links, wait) {
                // Simulated time cannot wait here (the replicas in the way
                // are freed by later events): over-commit and count it.
                n.used.fetch_add(bytes, Ordering::AcqRel);
                v.overcommit(node, bytes);
                return Ok(true);
            }
            let now = std::time::Instant::now();
            if !wait || now >= deadline {
                return Err(format!(
                    "needs {bytes} more bytes on node {}, which has {cur} of {limit} bytes in use by replicas that cannot be evicted now",
                    n.name
                ));
            }
            n.waiting.fetch_add(1, Ordering::SeqCst);
            let mut g = lock(&n.room_lock);
            // SeqCst pairs with `notify`: either it sees `waiting`, or this
            // load sees its bump of `changes`.
            if n.changes.load(Ordering::SeqCst) == seen {
                let nap = RESERVE_NAP.min(deadline - now);
                g = n
                    .room
                    .wait_timeout(g, nap)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(g);
            n.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Something changed on `node` that may make room: an unpin, a finished
    /// copy, freed bytes. Wakes reservations waiting there.
    pub(crate) fn notify(&self, node: NodeId) {
        let n = &self.nodes[node];
        n.changes.fetch_add(1, Ordering::SeqCst);
        if n.waiting.load(Ordering::SeqCst) > 0 {
            let _g = lock(&n.room_lock);
            n.room.notify_all();
        }
    }

    /// Give back a reservation or a freed replica's bytes.
    pub(crate) fn unreserve(&self, node: NodeId, bytes: u64) {
        self.nodes[node].used.fetch_sub(bytes, Ordering::AcqRel);
        self.notify(node);
    }

    /// Remember that `h` has a replica on `node` (once per handle: the list
    /// keeps evicted handles too, and `last_use` skips those that are not
    /// present). Entries are never removed on eviction: a handle evicted by
    /// one thread may be re-allocated by another before the evicting thread
    /// could remove it, and removing it then would hide a live replica from
    /// eviction for good.
    ///
    /// The handle calls it once per node (its replica state's `listed`
    /// bit): a search here made a device holding 10^5 tiles quadratic.
    pub(crate) fn add_resident(&self, node: NodeId, h: Weak<dyn AnyHandle>) {
        let mut res = lock(&self.nodes[node].resident);
        debug_assert!(
            !res.iter()
                .any(|w| std::ptr::addr_eq(w.as_ptr(), h.as_ptr())),
            "a handle is listed once per node"
        );
        res.push(h);
    }

    /// Evict unpinned replicas on `node` in least-recently-used order (clean
    /// ones first) until `bytes` are freed, plus `limit / EVICT_BATCH` where
    /// the node lists more than `EVICT_BATCH_FROM` replicas, or none is left
    /// to evict. Returns whether one was evicted.
    fn evict_lru(&self, node: NodeId, keep: *const (), mut bytes: u64, limit: u64) -> bool {
        let candidates: Vec<Arc<dyn AnyHandle>> = {
            let mut res = lock(&self.nodes[node].resident);
            if res.len() > EVICT_BATCH_FROM {
                bytes += limit / EVICT_BATCH;
            }
            res.retain(|w| w.strong_count() > 0);
            res.iter().filter_map(|w| w.upgrade()).collect()
        };
        // Clean replicas (valid elsewhere too: evicting them costs no
        // write-back) before the only copies, each in LRU order: a device
        // keeps the data it owns and has written (Hetero-HPL's resident
        // columns) while read-only copies it fetched (a broadcast panel) or
        // written through to the host go first.
        let mine = 1u64 << node;
        let mut order: Vec<(bool, u64, &Arc<dyn AnyHandle>)> = candidates
            .iter()
            .filter(|h| Arc::as_ptr(h) as *const () != keep)
            .filter_map(|h| {
                let only_copy = h.valid_mask() & !mine == 0;
                h.last_use(node).map(|t| (only_copy, t, h))
            })
            .collect();
        order.sort_by_key(|&(only_copy, t, _)| (only_copy, t));
        let mut freed_total = 0;
        for (_, _, h) in order {
            if let Some(freed) = h.try_evict(node) {
                self.unreserve(node, freed);
                self.nodes[node].evictions.fetch_add(1, Ordering::Relaxed);
                freed_total += freed.max(1);
                if freed_total >= bytes {
                    break;
                }
            }
        }
        freed_total > 0
    }

    /// Run `copy` as a transfer of `bytes` from `from` to `to`, through the
    /// device links involved; accounts and traces it.
    pub(crate) fn transfer(
        &self,
        handle: u64,
        from: NodeId,
        to: NodeId,
        bytes: u64,
        copy: &mut dyn FnMut(),
    ) {
        if let Some(v) = &self.virtual_links {
            // Simulated: the copy of real data (if any) is done at once, the
            // time is the link model's; it accounts the bytes itself.
            copy();
            self.nodes[to].bytes_in.fetch_add(bytes, Ordering::Relaxed);
            let ns = v.transfer(handle, from, to, bytes);
            self.nodes[to].transfer_ns.fetch_add(ns, Ordering::Relaxed);
            return;
        }
        let start = self.clock.as_ref().map(|c| c.now());
        let t0 = std::time::Instant::now();
        // Device → device goes through the host: both links' times.
        let mut done = false;
        let mut run = || {
            if !done {
                copy();
                done = true;
            }
        };
        match (self.device(from), self.device(to)) {
            (Some(a), Some(b)) => {
                a.copy(bytes, &mut run);
                b.copy(bytes, &mut || {});
            }
            (Some(d), None) | (None, Some(d)) => {
                d.copy(bytes, &mut run);
            }
            (None, None) => run(),
        }
        self.nodes[to].bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.nodes[to]
            .transfer_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if let (Some(list), Some(clock), Some(start)) = (&self.transfers, &self.clock, start) {
            let end = clock.now();
            lock(list).push(TransferRecord {
                handle,
                from_node: from as u32,
                to_node: to as u32,
                bytes,
                start,
                end,
            });
        }
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        MemoryStats {
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeStats {
                    name: n.name.clone(),
                    bytes_in: n.bytes_in.load(Ordering::Relaxed),
                    evictions: n.evictions.load(Ordering::Relaxed),
                    resident: n.used.load(Ordering::Relaxed),
                    limit: n.limit,
                    transfer_ns: n.transfer_ns.load(Ordering::Relaxed),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves per-node accounting: reservations within a limit, refusal of a
    //! size above it (at once, naming the node), and that a reservation
    //! waiting for room is woken by `unreserve` instead of polling; and
    //! that a one-part type's `one_part` is its only part.
    use super::*;

    /// `v`'s `one_part` and `one_part_mut` are the bytes of its `parts`'
    /// only part.
    fn one_part_is_the_part<T: Replicate>(mut v: T) {
        let want: Vec<u8> = {
            let parts = v.parts().unwrap();
            assert_eq!(parts.len(), 1);
            parts[0].to_vec()
        };
        assert_eq!(v.one_part(), Some(&want[..]));
        let ptr = v.parts().unwrap()[0].as_ptr();
        let one = v.one_part_mut().unwrap();
        assert_eq!((one.as_ptr(), &one[..]), (ptr, &want[..]));
    }

    #[test]
    fn one_part_types_give_their_part_without_the_list() {
        one_part_is_the_part(vec![1u16, 2, 3, 0xfffe]);
        one_part_is_the_part(Vec::<f64>::new());
        one_part_is_the_part([1.5f32, -2.0, 3.25]);
        one_part_is_the_part(0x1234_5678u32);
        one_part_is_the_part(-7.5f64);
    }

    fn with_limit(limit: u64) -> Memory {
        let mut m = Memory::new(1, Vec::new(), None);
        m.nodes.push(MemoryNode::new("dev".into(), Some(limit)));
        m
    }

    #[test]
    fn touching_pages_leaves_a_zeroed_buffer_as_it_was() {
        let mut f = vec![0.0f64; 3 * 512 + 7];
        touch_pages(&mut f);
        assert!(f.iter().all(|&x| x == 0.0));
        let mut b = vec![0u8; 10_000];
        touch_pages(&mut b);
        assert!(b.iter().all(|&x| x == 0));
        touch_pages::<u64>(&mut []);
        touch_pages(&mut [(); 3]);
    }

    #[test]
    fn reserve_within_and_above_the_limit() {
        let m = with_limit(100);
        assert!(m.fits(1, 100) && !m.fits(1, 101) && m.fits(0, u64::MAX));
        m.reserve(1, 60, std::ptr::null(), false, &|| true).unwrap();
        let e = m
            .reserve(1, 50, std::ptr::null(), false, &|| true)
            .unwrap_err();
        assert!(e.contains("dev") && e.contains("60 of 100"), "{e}");
        let e = m
            .reserve(1, 101, std::ptr::null(), true, &|| true)
            .unwrap_err();
        assert!(e.contains("limit is 100"), "{e}");
        m.unreserve(1, 60);
        m.reserve(1, 100, std::ptr::null(), false, &|| true)
            .unwrap();
    }

    #[test]
    fn a_waiting_reservation_is_woken_by_unreserve() {
        let m = Arc::new(with_limit(100));
        m.reserve(1, 80, std::ptr::null(), false, &|| true).unwrap();
        let m2 = Arc::clone(&m);
        let t0 = std::time::Instant::now();
        let waiter =
            std::thread::spawn(move || m2.reserve(1, 50, std::ptr::null(), true, &|| true));
        std::thread::sleep(std::time::Duration::from_millis(30));
        m.unreserve(1, 80);
        assert!(waiter.join().unwrap().unwrap());
        // Correctness only: it returned Ok (well before RESERVE_PATIENCE).
        assert!(t0.elapsed() < RESERVE_PATIENCE);
        assert_eq!(m.nodes[1].used.load(Ordering::SeqCst), 50);
    }

    /// The issue-17 stall in miniature: the node is full, and the replica a
    /// reservation waits for is allocated by someone else; `notify` wakes it
    /// and it stops at once with nothing reserved.
    #[test]
    fn a_reservation_no_longer_needed_stops_waiting() {
        let m = Arc::new(with_limit(100));
        m.reserve(1, 100, std::ptr::null(), false, &|| true)
            .unwrap();
        let missing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (m2, missing2) = (Arc::clone(&m), Arc::clone(&missing));
        let t0 = std::time::Instant::now();
        let waiter = std::thread::spawn(move || {
            m2.reserve(1, 50, std::ptr::null(), true, &|| {
                missing2.load(Ordering::SeqCst)
            })
        });
        std::thread::sleep(std::time::Duration::from_millis(30));
        missing.store(false, Ordering::SeqCst);
        m.notify(1);
        assert!(!waiter.join().unwrap().unwrap(), "nothing was reserved");
        assert!(t0.elapsed() < RESERVE_PATIENCE / 2);
        assert_eq!(m.nodes[1].used.load(Ordering::SeqCst), 100);
    }
}
