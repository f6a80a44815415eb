//! Symbolic task graphs (PaRSEC-PTG style): task classes over an index space,
//! with dependency functions, unfolded lazily as predecessors finish.
//!
//! A [`TaskClasses`] implementation describes the whole DAG without building
//! it: the roots, each task's number of predecessors, its successors, and the
//! task itself (codelet, data, priority, body). [`run`] submits the roots;
//! when a task's body succeeds, its successors' counters drop and those that
//! reach zero are instantiated and submitted. So a task object exists only
//! once it is ready (or running), and the only other state is one counter per
//! partially satisfied task: memory is O(ready window), not O(tasks). Classes
//! that number their tasks ([`TaskClasses::slot`]) trade that for speed: one
//! atomic counter per task for the whole run, and no lock or hashing on the
//! release path; if they also order their data
//! ([`TaskClasses::described_order`]), a task may be made when its first
//! predecessor ends and submitted when its last does ("made ahead",
//! [`Unfolder::satisfy`]).
//!
//! Ownership: each task has an `owner` (an MPI rank later; 0 here). A run for
//! rank `r` instantiates only the tasks `r` owns; a successor owned elsewhere
//! is a *remote edge* (counted in [`UnfoldStats::remote_edges`]), and a
//! predecessor owned elsewhere must be reported with [`Unfolder::satisfy`].
//!
//! Instantiated tasks still declare their data, so the STF inference runs on
//! them too. With a correct description it adds no edge (every conflicting
//! earlier task is a finished predecessor); with a wrong one it still orders
//! conflicting tasks by instantiation order, so data races cannot result.
//! Classes that promise their edges order every data access
//! ([`TaskClasses::described_order`], an `unsafe` promise as PaRSEC trusts a
//! PTG) skip it: no handle lock and no reader or writer list per task,
//! which two workers' tasks otherwise touch in turn.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::atomic::AtomicCell;
use crossbeam_utils::CachePadded;
use rustc_hash::FxBuildHasher;
use smallvec::SmallVec;

use crate::error::Error;
use crate::runtime::{Runtime, Submitter};
use crate::stf::Prepared;
use crate::task::TaskBuilder;
use crate::util::lock;

/// A symbolic DAG: task classes over an index space.
pub trait TaskClasses: Send + Sync + 'static {
    /// Identifies one task, e.g. `Gemm { k, i, j }`.
    type Key: Clone + Eq + Hash + Debug + Send + Sync + 'static;

    /// The tasks with no predecessor.
    fn roots(&self) -> Vec<Self::Key>;

    /// How many predecessors `key` has (over all owners).
    fn predecessor_count(&self, key: &Self::Key) -> usize;

    /// Append `key`'s successors to `out`.
    fn successors(&self, key: &Self::Key, out: &mut Vec<Self::Key>);

    /// The task to run for `key`: codelet, data accesses, priority, label, body.
    fn task(&self, key: &Self::Key) -> TaskBuilder;

    /// Which rank runs `key` (default: everything on rank 0).
    fn owner(&self, _key: &Self::Key) -> usize {
        0
    }

    /// How many numbers [`slot`](Self::slot) deals (default 0: the classes
    /// number no task).
    fn slots(&self) -> usize {
        0
    }

    /// A number in `0..slots()` that no other task of the run has, if the
    /// classes number their tasks (default: none). With one, a task's
    /// satisfied predecessors are counted in an array of atomic counters
    /// (one `u32` per number, for the whole run) instead of a locked map
    /// holding only the partially satisfied tasks: no lock and no hashing
    /// on the release path, for memory O(tasks) instead of O(ready window).
    /// With [`described_order`](Self::described_order) too, a one-process
    /// run also keeps a pointer per number, for tasks made ahead (see
    /// [`Unfolder::satisfy`]): 12 bytes per number in all.
    /// A key without a number (or a number out of range) uses the map.
    fn slot(&self, _key: &Self::Key) -> Option<usize> {
        None
    }

    /// Whether the classes' edges order every two tasks that use the same
    /// data (default: `None`, they may not). With
    /// `Some(unsafe { DescribedOrder::new() })` a run submits each task
    /// without inferring its dependencies from its data, as PaRSEC trusts a
    /// PTG's dataflow: no handle is locked, and no reader or writer
    /// recorded, per task. Read [`DescribedOrder::new`]'s contract, and
    /// check it with [`check_order`] on small instances. In a distributed
    /// run (`dist::symbolic`) a copy of another rank's data is written only
    /// once its message has come, which the contract places after every
    /// local task using the previous version, and the successors the
    /// message satisfies are made once the copy is written.
    fn described_order(&self) -> Option<DescribedOrder> {
        None
    }
}

/// The promise of [`TaskClasses::described_order`]: the classes' edges
/// order their tasks' data accesses, so a run need not infer them.
#[derive(Clone, Copy, Debug)]
pub struct DescribedOrder(());

impl DescribedOrder {
    /// Make the promise.
    ///
    /// Measured on Task Bench's `stencil_1d` (width 2, empty tasks, one
    /// process, 2 workers), skipping the inference took a run from 54 to
    /// 34 ms (medians of 10 alternated runs,
    /// `bench/results/described-order-2026-12-01-intel-stop72.txt`): each
    /// task locked three handles the other worker's tasks lock too.
    ///
    /// # Safety
    /// For every run of the classes with this promise:
    /// - each task's [`predecessor_count`](TaskClasses::predecessor_count)
    ///   is the number of tasks naming it among their successors;
    /// - any two of its tasks that declare the same data, one of them
    ///   writing it, are joined by a path of edges
    ///   ([`TaskClasses::successors`]), over all ranks in a distributed
    ///   run (a rank's copy of another's data counts as that data);
    /// - while the run is in progress, no other task (submitted to the
    ///   runtime directly, or by another run) declares any of that data,
    ///   and none of it is unregistered.
    ///
    /// A task is submitted only after all its predecessors' bodies have
    /// ended (it may be made earlier, "made ahead" on
    /// [`Unfolder::satisfy`], but its body cannot start before), so such a
    /// path orders the two tasks' bodies. Break the contract and
    /// two bodies may hold the same data at once, one of them mutably:
    /// undefined behaviour. [`check_order`] checks the first two points on
    /// an unrolled instance.
    pub unsafe fn new() -> DescribedOrder {
        DescribedOrder(())
    }
}

// A made-ahead task moves in and out of its cell with one atomic swap (a
// pointer), never through the cell's fallback lock.
const _: () = assert!(AtomicCell::<Option<Prepared>>::is_lock_free());

/// A counter of [`Unfolder::counters`]: 0 until one of the task's
/// predecessors finishes; then `STARTED` and the predecessors still to
/// finish (`COUNT`), with `AHEAD` if the task is being made ahead;
/// [`MADE`] once the task is made.
const STARTED: u32 = 1 << 31;
/// See [`STARTED`]: the task is made ahead, and whoever drops the last
/// count finds it in `Unfolder::ahead`. Without it, the cell is not
/// touched: taking from it, an atomic swap on a line of its own per task
/// even when empty, made 2-rank `stencil_1d` runs of empty tasks 1.055 of
/// the time (medians of 20 alternated runs) once distributed runs had
/// the cells.
const AHEAD: u32 = 1 << 30;
/// See [`STARTED`].
const COUNT: u32 = AHEAD - 1;
/// A counter whose task was made (all its predecessors satisfied).
const MADE: u32 = u32::MAX;

const SHARDS: usize = 16;

/// How many remote successors a release looks beyond, and how many of
/// this rank's tasks it considers there (`Unfolder::make_beyond`).
const BEYOND: usize = 8;

/// One shard of the partially satisfied tasks.
type PendingMap<K> = HashMap<K, Pending, FxBuildHasher>;

/// A partially satisfied task: predecessors still to finish, and the ids of
/// those that did (kept only when tracing).
struct Pending {
    remaining: usize,
    done: Vec<u64>,
}

/// Counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnfoldStats {
    /// Tasks instantiated and submitted on this rank.
    pub instantiated: usize,
    /// Largest number of partially satisfied tasks held at once in the map
    /// (tasks the classes number, [`TaskClasses::slot`], are not counted).
    pub peak_pending: usize,
    /// Edges whose successor is owned by another rank.
    pub remote_edges: usize,
    /// Tasks made ahead: by their first predecessor to finish, and
    /// submitted by their last (see [`Unfolder::satisfy`]); in a
    /// distributed run, by a task that sent the edges of their remote
    /// predecessors.
    pub made_ahead: usize,
}

/// The lazy unfolding state of one run on one rank.
pub struct Unfolder<C: TaskClasses> {
    classes: Arc<C>,
    rank: usize,
    submitter: Submitter,
    /// Remaining predecessor counts of partially satisfied tasks, sharded by
    /// key hash so completions on different workers rarely share a lock.
    pending: Vec<Mutex<PendingMap<C::Key>>>,
    /// Satisfied predecessors per numbered task ([`TaskClasses::slot`]),
    /// [`MADE`] once made; used instead of `pending` for those tasks
    /// (empty when the classes number none, or when tracing: traces need
    /// the predecessors' ids, which only `pending` keeps).
    counters: Box<[std::sync::atomic::AtomicU32]>,
    /// Per numbered task, the task made ahead (see "Made ahead" on
    /// [`satisfy`](Self::satisfy)) until its last predecessor submits it.
    /// Empty unless the classes number their tasks and order their data
    /// ([`TaskClasses::described_order`]).
    ahead: Box<[AtomicCell<Option<Prepared>>]>,
    /// Keep the ids of satisfied predecessors (when the runtime traces), so
    /// traces show the symbolic edges.
    keep_preds: bool,
    /// Submit the tasks ordered by the unfolding alone, not by their data
    /// (the classes promised it, [`TaskClasses::described_order`]).
    ordered: bool,
    // The counters below are written by every worker, once per task or
    // edge: each on a cache line of its own, away from the fields above,
    // which every release reads. (Measured together with the numbered
    // counters; alone, its effect was within the runs' spread.)
    pending_len: CachePadded<AtomicUsize>,
    peak_pending: CachePadded<AtomicUsize>,
    /// Per worker (`crate::counter`): the workers make tasks at once.
    instantiated: crate::counter::Sharded,
    /// Of them, made ahead (per worker too).
    made_ahead: crate::counter::Sharded,
    remote_edges: CachePadded<AtomicUsize>,
    /// First submission error raised inside a body (reported by `run`).
    error: Mutex<Option<Error>>,
    /// Owned tasks whose body succeeded (and whose successors were released):
    /// in `done` when a thread waits for a count (`wake_at`, a distributed
    /// run), else per worker in `done_apart`, read only at the end (a run in
    /// one process waits with `wait_all`). One counter both workers add to
    /// moved its line between the cores at every task.
    done: CachePadded<AtomicUsize>,
    done_apart: crate::counter::Sharded,
    /// Where successors owned by other ranks go (the distributed layer).
    remote: Option<RemoteEdges<C::Key>>,
    /// Notified after a task's successors are released, once `done` has
    /// reached `wake_at` (a distributed run waits on it for the end).
    pub(crate) wake: Arc<(Mutex<()>, std::sync::Condvar)>,
    /// See `wake`. `usize::MAX` (a run in one process, which waits with
    /// `wait_all`) never notifies: the notification was a `futex` system
    /// call per task (std's condition variable makes one whether anyone
    /// waits or not), 4 % of all samples of a one-process `stencil_1d`
    /// run. A distributed run sets it to the number of tasks its rank owns,
    /// so its waiting thread is woken once, not after every task: chosen
    /// because that wake-up measured ~9 µs of each remote edge's 38 µs
    /// between two ranks sharing a core with their threads (`tessera
    /// overhead-mpi --trace`).
    pub(crate) wake_at: AtomicUsize,
}

/// Called when a task finishes with its key, its task id and its successors
/// owned by other ranks, grouped by rank (rank order; possibly none). Runs on
/// the worker that ran the task, before its local successors are released;
/// an `Err` fails the task.
pub(crate) type RemoteEdges<K> =
    Box<dyn Fn(&K, u64, &[(usize, RemoteGroup<K>)]) -> Result<(), String> + Send + Sync>;

/// A finished task's successors owned by one other rank (inline: no
/// allocation per remote edge for up to four).
pub(crate) type RemoteGroup<K> = SmallVec<[K; 4]>;

impl<C: TaskClasses> Unfolder<C> {
    /// The unfolding state of a run of `classes` on `rank` of `rt`.
    pub(crate) fn new(
        rt: &Runtime,
        classes: Arc<C>,
        rank: usize,
        remote: Option<RemoteEdges<C::Key>>,
    ) -> Arc<Self> {
        let keep_preds = rt.keeps_preds();
        let slots = if keep_preds { 0 } else { classes.slots() };
        let ordered = classes.described_order().is_some();
        // Tasks are made ahead only when no handle orders them (an
        // unordered task's edges come from the handles' state when it is
        // submitted, `Shared::prepare`): in one process by their first
        // predecessor (see "Made ahead" on `satisfy`), in a distributed
        // run beyond a remote edge (see "Ahead of a remote edge" on
        // `make_beyond`; the run drops what is left when it ends, as
        // `run_rank` does, with `discard_ahead`).
        let ahead = if ordered { slots } else { 0 };
        Arc::new(Unfolder {
            counters: (0..slots)
                .map(|_| std::sync::atomic::AtomicU32::new(0))
                .collect(),
            ahead: (0..ahead).map(|_| AtomicCell::new(None)).collect(),
            classes,
            rank,
            submitter: rt.submitter(),
            pending: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(FxBuildHasher)))
                .collect(),
            keep_preds,
            ordered,
            pending_len: CachePadded::new(AtomicUsize::new(0)),
            peak_pending: CachePadded::new(AtomicUsize::new(0)),
            instantiated: crate::counter::Sharded::default(),
            made_ahead: crate::counter::Sharded::default(),
            remote_edges: CachePadded::new(AtomicUsize::new(0)),
            error: Mutex::new(None),
            done: CachePadded::new(AtomicUsize::new(0)),
            done_apart: crate::counter::Sharded::default(),
            remote,
            wake: Arc::new((Mutex::new(()), std::sync::Condvar::new())),
            wake_at: AtomicUsize::new(usize::MAX),
        })
    }

    fn shard(&self, key: &C::Key) -> &Mutex<PendingMap<C::Key>> {
        // The map inside the shard uses both ends of the same hash (its
        // bucket from the low bits, its tag from the top 7), so the shard is
        // taken from the hash mixed once more, not from bits the map uses.
        let h = FxBuildHasher.hash_one(key);
        let mixed = (h ^ (h >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.pending[(mixed >> 60) as usize % SHARDS]
    }

    /// One predecessor of `key` finished (locally, or on another rank);
    /// `pred` is its task id, if known. Instantiates `key` when it was the
    /// last one.
    ///
    /// **Made ahead.** In one process, a numbered task of ordered classes
    /// is made (checked, its node built) by its *first* predecessor to
    /// finish when that predecessor's worker has nothing else queued, and
    /// only submitted by its last (`Shared::prepare`). Making a task costs
    /// a few thousand instructions (the classes' `task` and the node); made
    /// by the last predecessor, they lie between that predecessor's end and
    /// the task's start. Made ahead, they fill the time the first
    /// predecessor's worker would spend waiting for the others (Task
    /// Bench's `stencil_1d` on 2 workers: one worker's task of a step ends
    /// while the other's still runs, and each worker then makes one of the
    /// next step's tasks, in parallel). A worker with tasks queued makes
    /// nothing ahead (one worker, or an over-decomposed graph): there the
    /// making would delay its next task and save none. The counter then
    /// starts with one count more, the maker's, dropped once the task is
    /// stored in `ahead`: whichever decrement reaches zero finds it there
    /// and submits it. A task made ahead is not in flight: if a
    /// predecessor fails (its successors are never satisfied), it is
    /// dropped unrun at the end of the run (`discard_ahead`), as a task
    /// never made would not exist. Distributed runs make nothing ahead
    /// this way: on 2 ranks sharing 2 cores it did not shorten a
    /// `stencil_1d` step (medians of 14 alternated runs: 1.02 and 0.95 of
    /// the time without, empty tasks and `-iter 1024`), the remote
    /// predecessor's message and the local one ending together there.
    /// Measured again once a task not made ahead no longer touched its
    /// cell (`AHEAD`), two series of 20 alternated runs: 0.945 and 0.987
    /// with empty tasks, 0.972 and 1.064 at `-iter 1024`. They make ahead
    /// beyond a remote edge instead (`make_beyond`).
    pub fn satisfy(self: &Arc<Self>, key: C::Key, pred: Option<u64>) {
        self.satisfy_from(key, pred, &mut true)
    }

    /// [`satisfy`](Self::satisfy), from a release that may still make a
    /// task ahead (`may_make_ahead`, cleared once it did: see "One ahead
    /// per release" on `release_successors`).
    fn satisfy_from(self: &Arc<Self>, key: C::Key, pred: Option<u64>, may_make_ahead: &mut bool) {
        if let Some((slot, counter)) = self
            .classes
            .slot(&key)
            .and_then(|i| self.counters.get(i).map(|c| (i, c)))
        {
            // The first predecessor to finish asks for the count and starts
            // the counter at the predecessors left; the others count down
            // without asking (`predecessor_count` is the classes' code, a
            // few hundred instructions in Task Bench's: once per task
            // instead of once per edge). AcqRel: the last predecessor's
            // decrement reads every earlier change (a release sequence), so
            // the task it makes sees what all its predecessors wrote.
            let before = match counter.load(Ordering::Acquire) {
                0 => {
                    let total = self.classes.predecessor_count(&key);
                    assert!(
                        total > 0,
                        "{key:?} has a predecessor but predecessor_count says 0"
                    );
                    assert!(
                        total < COUNT as usize,
                        "{key:?} has {total} predecessors, more than the unfolding counts"
                    );
                    if total == 1 {
                        // Its only predecessor is its last: read as a
                        // count of one left, so the branch below makes it.
                        // Where tasks are made beyond remote edges, a
                        // worker may be starting the counter
                        // (`make_beyond`): whichever changes it first from
                        // 0 wins, and this one then counts down.
                        if !self.makes_beyond()
                            || counter
                                .compare_exchange(0, MADE, Ordering::AcqRel, Ordering::Acquire)
                                .is_ok()
                        {
                            STARTED | 1
                        } else {
                            counter.fetch_sub(1, Ordering::AcqRel)
                        }
                    } else {
                        // Made ahead only where the making fills a wait
                        // (see above): then the counter holds the other
                        // predecessors' counts and the maker's.
                        let ahead = *may_make_ahead
                            && slot < self.ahead.len()
                            && self.remote.is_none()
                            && self.submitter.worker_would_wait();
                        let left = total - 1 + usize::from(ahead);
                        let flags = if ahead { STARTED | AHEAD } else { STARTED };
                        match counter.compare_exchange(
                            0,
                            flags | left as u32,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) if ahead => {
                                *may_make_ahead = false;
                                return self.make_ahead(slot, key);
                            }
                            Ok(_) => return,
                            // Another predecessor started it meanwhile.
                            Err(_) => counter.fetch_sub(1, Ordering::AcqRel),
                        }
                    }
                }
                _ => counter.fetch_sub(1, Ordering::AcqRel),
            };
            if before & COUNT == 1 {
                counter.store(MADE, Ordering::Relaxed);
                self.submit_numbered(slot, key, before & AHEAD != 0, false);
            }
            return;
        }
        let pred = pred.filter(|_| self.keep_preds);
        let ready = {
            let mut shard = lock(self.shard(&key));
            match shard.get_mut(&key) {
                Some(p) => {
                    p.remaining -= 1;
                    p.done.extend(pred);
                    if p.remaining == 0 {
                        let p = shard.remove(&key).expect("present");
                        self.pending_len.fetch_sub(1, Ordering::Relaxed);
                        Some(p.done)
                    } else {
                        None
                    }
                }
                None => {
                    let total = self.classes.predecessor_count(&key);
                    assert!(
                        total > 0,
                        "{key:?} has a predecessor but predecessor_count says 0"
                    );
                    let done: Vec<u64> = pred.into_iter().collect();
                    if total == 1 {
                        Some(done)
                    } else {
                        let entry = Pending {
                            remaining: total - 1,
                            done,
                        };
                        shard.insert(key.clone(), entry);
                        let now = self.pending_len.fetch_add(1, Ordering::Relaxed) + 1;
                        self.peak_pending.fetch_max(now, Ordering::Relaxed);
                        None
                    }
                }
            }
        };
        if let Some(preds) = ready {
            self.instantiate(key, preds);
        }
    }

    fn instantiate(self: &Arc<Self>, key: C::Key, preds: Vec<u64>) {
        let task = self.task_of(key, preds);
        if let Err(e) = self.submitter.submit(task) {
            self.fail(e);
        }
    }

    /// The task of `key`, which releases its successors when its body
    /// succeeds; `preds`: its satisfied predecessors' ids (traces only).
    fn task_of(self: &Arc<Self>, key: C::Key, preds: Vec<u64>) -> TaskBuilder {
        let mut task = self.classes.task(&key);
        if !preds.is_empty() {
            // Only traced runs keep them: no box for the others.
            task.rare_mut().satisfied_preds = preds;
        }
        // Whichever body succeeds (a device body, or the CPU body it falls
        // back to) is followed by the release of the successors, exactly once,
        // on the worker that ran it (so they land in its queue).
        task.ordered = self.ordered;
        let me = Arc::clone(self);
        task.add_then(move |id| me.release_successors(&key, id));
        self.instantiated.add(1);
        task
    }

    /// Keep the first submission error (reported by the run).
    fn fail(&self, e: Error) {
        lock(&self.error).get_or_insert(e);
    }

    /// Make the numbered task `key` ahead (its counter started with the
    /// maker's count, see [`satisfy`](Self::satisfy)), store it, then drop
    /// the maker's count: if the other predecessors all finished meanwhile,
    /// submit it here.
    fn make_ahead(self: &Arc<Self>, slot: usize, key: C::Key) {
        match self
            .submitter
            .prepare(self.task_of(key.clone(), Vec::new()))
        {
            Ok(task) => {
                self.ahead[slot].store(Some(task));
                self.made_ahead.add(1);
            }
            Err(e) => self.fail(e),
        }
        // AcqRel: the decrement that reaches zero reads the store above.
        if self.counters[slot].fetch_sub(1, Ordering::AcqRel) & COUNT == 1 {
            self.counters[slot].store(MADE, Ordering::Relaxed);
            self.submit_numbered(slot, key, true, true);
        }
    }

    /// The numbered task `key`'s last count dropped: submit it, made ahead
    /// (`ahead`: its counter said so, [`AHEAD`]) or now. `by_maker`: this
    /// thread made it ahead (its own count was
    /// the last). A task made ahead by another worker is not kept by this
    /// one: it goes where any worker takes it, so that its maker, which
    /// made it because it had nothing else to do and holds the node, its
    /// arguments and its accesses in its cache, can run it, while this
    /// worker makes and runs its own (see "One ahead per release" on
    /// `release_successors`).
    fn submit_numbered(self: &Arc<Self>, slot: usize, key: C::Key, ahead: bool, by_maker: bool) {
        let made = match ahead {
            true => self.ahead.get(slot).and_then(AtomicCell::take),
            false => None,
        };
        match made {
            Some(task) => {
                // In a distributed run the task was made beyond a remote
                // edge (`make_beyond`) by a worker that was idle then: the
                // thread that satisfies it last keeps it (the network's
                // watcher, an idle worker, for an edge that arrives), with
                // no wake-up of another.
                let submitted = match by_maker || self.remote.is_some() {
                    true => self.submitter.submit_prepared(task),
                    false => self.submitter.submit_prepared_to_any(task),
                };
                if let Err(e) = submitted {
                    self.fail(e);
                }
            }
            // One predecessor, no making ahead, or its making failed (the
            // error is kept; making it again reports the same).
            None => self.instantiate(key, Vec::new()),
        }
    }

    /// **Ahead of a remote edge.** A task that has just sent its remote
    /// edges, on a worker with nothing else to do, makes one of this
    /// rank's tasks that those remote successors will release, while the
    /// edges travel: the first not yet started (no predecessor satisfied,
    /// its counter 0) among their successors this rank owns whose
    /// predecessors are all among those remote tasks. Its counter
    /// starts at all its predecessors plus the maker's count, dropped once
    /// it is stored, as for a task made by its first predecessor
    /// (`satisfy`). A chain between two ranks (`tessera overhead-mpi`'s)
    /// then has the making of each task (about 2,000 instructions of its
    /// classes' `task` and the node, `callgrind`) off its path: the message
    /// that comes back finds the task made, and the watcher that routes it
    /// runs it at once (`submit_numbered`). Nothing is made for a worker
    /// with queued work, and at most one task per release. Only a task
    /// whose successors are all remote looks: one with local successors
    /// has its rank's next work in them (a choice, not a measurement: the
    /// slowdown first blamed on the look was the cells' swap, see
    /// `AHEAD`). The look is bounded: the first [`BEYOND`] remote
    /// successors, and as many candidates; a task with predecessors
    /// among the ones not looked at is not made (its count would not
    /// match), so a wide fan-out costs no more than a narrow one.
    fn make_beyond(self: &Arc<Self>, remote: &[(usize, RemoteGroup<C::Key>)]) {
        if !self.submitter.worker_would_wait() {
            return;
        }
        // This rank's numbered tasks not started yet that the edges' tasks
        // release, each with how many of those tasks precede it.
        let mut found: SmallVec<[(C::Key, usize, usize); BEYOND]> = SmallVec::new();
        let mut next = Vec::new();
        for s in remote.iter().flat_map(|(_, group)| group).take(BEYOND) {
            next.clear();
            self.classes.successors(s, &mut next);
            for g in next.drain(..) {
                if let Some(f) = found.iter_mut().find(|f| f.0 == g) {
                    f.2 += 1;
                    continue;
                }
                if found.len() == BEYOND || self.classes.owner(&g) != self.rank {
                    continue;
                }
                let Some(slot) = self.classes.slot(&g).filter(|&i| i < self.ahead.len()) else {
                    continue;
                };
                if self.counters[slot].load(Ordering::Relaxed) == 0 {
                    found.push((g, slot, 1));
                }
            }
        }
        for (g, slot, preceding) in found {
            // Only a task that those remote tasks alone release: one that
            // also waits for a task of this rank (a `stencil_1d` two steps
            // on) is made by its first predecessor's end or its last's.
            // Made here, on 2 ranks of a symmetric stencil, the making
            // delayed the remote edge that arrived meanwhile: 1.16 of the
            // time of empty tasks (medians of 10 alternated runs), against
            // 1.055 without it (that part was the cells' swap, `AHEAD`).
            if self.classes.predecessor_count(&g) != preceding || preceding + 1 >= COUNT as usize {
                continue;
            }
            // AcqRel as in `satisfy`; a predecessor that starts the counter
            // first wins, and nothing is made.
            let started = self.counters[slot].compare_exchange(
                0,
                STARTED | AHEAD | (preceding + 1) as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if started.is_ok() {
                return self.make_ahead(slot, g);
            }
        }
    }

    /// Whether tasks are made beyond remote edges (`make_beyond`): a
    /// distributed run whose tasks may be made ahead (ordered, numbered).
    fn makes_beyond(&self) -> bool {
        self.remote.is_some() && !self.ahead.is_empty()
    }

    /// Drop the tasks made ahead and never submitted (a predecessor failed,
    /// or the run was cut short): called once the run's tasks are done, so
    /// nothing submits one any more. Each holds this unfolder (its release
    /// of successors): kept, they would keep it alive.
    pub(crate) fn discard_ahead(&self) {
        for a in self.ahead.iter() {
            drop(a.take());
        }
    }

    /// The task `key` (id `id`) succeeded: satisfy its successors, send
    /// the remote ones' edges.
    ///
    /// **One ahead per release.** A release makes at most one task ahead.
    /// In a `stencil_1d` step on two workers, the worker whose task ends
    /// first made both of the next step's tasks ahead, one after the
    /// other, while the other worker ended its own task and then waited
    /// for them; and whichever worker submitted a task ran it, so the
    /// second task ran on another worker than the one that made it, its
    /// node, arguments and accesses crossing between the cores. Now the
    /// first worker makes one and waits for it (the last predecessor's
    /// worker submits it to any worker: `submit_numbered`), and the last
    /// makes the other, and keeps it: the two makings run in parallel,
    /// each on the worker that runs the task.
    fn release_successors(self: &Arc<Self>, key: &C::Key, id: u64) -> Result<(), crate::BodyError> {
        // Room for eight at once: grown from empty, a list of five (Task
        // Bench's `nearest`, radix 5) was allocated twice.
        let mut succ = Vec::with_capacity(8);
        self.classes.successors(key, &mut succ);
        let mut remote: SmallVec<[(usize, RemoteGroup<C::Key>); 2]> = SmallVec::new();
        let mut local: SmallVec<[C::Key; 8]> = SmallVec::new();
        for s in succ {
            match self.classes.owner(&s) {
                r if r == self.rank => local.push(s),
                r => {
                    self.remote_edges.fetch_add(1, Ordering::Relaxed);
                    match remote.iter_mut().find(|(q, _)| *q == r) {
                        Some((_, v)) => v.push(s),
                        None => remote.push((r, smallvec::smallvec![s])),
                    }
                }
            }
        }
        if let Some(f) = &self.remote {
            remote.sort_by_key(|(r, _)| *r);
            f(key, id, &remote)?;
        }
        // Only a task whose successors are all remote looks beyond them
        // (see `make_beyond`).
        let beyond = local.is_empty() && !remote.is_empty() && self.makes_beyond();
        let mut may_make_ahead = true;
        for s in local {
            self.satisfy_from(s, Some(id), &mut may_make_ahead);
        }
        if beyond {
            self.make_beyond(&remote);
        }
        // `wake_at` is set before the first task is made, and never again.
        let wake_at = self.wake_at.load(Ordering::Relaxed);
        if wake_at == usize::MAX {
            self.done_apart.add(1);
            return Ok(());
        }
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        // The count goes up before the lock is taken: a waiter that checked
        // `done()` under the lock and found too few is waiting by then.
        if done >= wake_at {
            let _g = lock(&self.wake.0);
            self.wake.1.notify_all();
        }
        Ok(())
    }

    /// Whether its tasks are ordered by the unfolding alone (see
    /// [`TaskClasses::described_order`]).
    pub(crate) fn ordered(&self) -> bool {
        self.ordered
    }

    /// Owned tasks finished so far.
    pub(crate) fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst) + self.done_apart.sum() as usize
    }

    /// Instantiate the roots this rank owns.
    pub(crate) fn start(self: &Arc<Self>) {
        for root in self.classes.roots() {
            if self.classes.owner(&root) == self.rank {
                self.instantiate(root, Vec::new());
            }
        }
    }

    /// Whether a submission inside a body failed.
    pub(crate) fn has_error(&self) -> bool {
        lock(&self.error).is_some()
    }

    /// The first submission error raised inside a body, if any.
    pub(crate) fn take_error(&self) -> Option<Error> {
        lock(&self.error).take()
    }

    /// Numbered tasks with some but not all predecessors satisfied.
    fn counted_pending(&self) -> usize {
        self.counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .filter(|&c| c != 0 && c != MADE)
            .count()
    }

    pub(crate) fn stats(&self) -> UnfoldStats {
        UnfoldStats {
            instantiated: self.instantiated.sum() as usize,
            peak_pending: self.peak_pending.load(Ordering::Relaxed),
            remote_edges: self.remote_edges.load(Ordering::Relaxed),
            made_ahead: self.made_ahead.sum() as usize,
        }
    }
}

/// Run the whole symbolic DAG on `rt` as rank 0 and wait for it.
pub fn run<C: TaskClasses>(rt: &Runtime, classes: Arc<C>) -> Result<UnfoldStats, Error> {
    run_rank(rt, classes, 0)
}

/// Run the tasks `rank` owns and wait for them.
pub fn run_rank<C: TaskClasses>(
    rt: &Runtime,
    classes: Arc<C>,
    rank: usize,
) -> Result<UnfoldStats, Error> {
    let unfolder = Unfolder::new(rt, classes, rank, None);
    unfolder.start();
    let waited = rt.wait_all();
    unfolder.discard_ahead();
    waited?;
    if let Some(e) = unfolder.take_error() {
        return Err(e);
    }
    let pending = unfolder.pending_len.load(Ordering::Relaxed) + unfolder.counted_pending();
    // With remote edges, tasks waiting for another rank's predecessors are
    // expected to stay pending here; without any, a leftover is a bug in the
    // description.
    if pending != 0 && unfolder.remote_edges.load(Ordering::Relaxed) == 0 {
        return Err(Error::Config(format!(
            "symbolic DAG is inconsistent: {pending} task(s) never received all their predecessors"
        )));
    }
    Ok(unfolder.stats())
}

/// Every task of an unrolled DAG with its successors.
pub type Unrolled<K> = Vec<(K, Vec<K>)>;

/// The fully unrolled DAG (for small sizes): every task reachable from the
/// roots, in breadth-first order, with its successors. Checks that each task's
/// declared predecessor count equals its number of incoming edges, and that
/// no two tasks share a number ([`TaskClasses::slot`]): two that did would
/// share one counter, and one of them could be made before its
/// predecessors finished.
pub fn unroll<C: TaskClasses>(classes: &C) -> Result<Unrolled<C::Key>, Error> {
    let mut seen: HashMap<C::Key, usize> = HashMap::new();
    let mut incoming: HashMap<C::Key, usize> = HashMap::new();
    let mut out: Unrolled<C::Key> = Vec::new();
    let mut queue: std::collections::VecDeque<C::Key> = classes.roots().into();
    for r in &queue {
        seen.insert(r.clone(), 0);
    }
    while let Some(k) = queue.pop_front() {
        let mut succ = Vec::new();
        classes.successors(&k, &mut succ);
        for s in &succ {
            *incoming.entry(s.clone()).or_insert(0) += 1;
            if !seen.contains_key(s) {
                seen.insert(s.clone(), 0);
                queue.push_back(s.clone());
            }
        }
        out.push((k, succ));
    }
    let mut numbered: HashMap<usize, &C::Key> = HashMap::new();
    for (k, _) in &out {
        if let Some(i) = classes.slot(k).filter(|&i| i < classes.slots()) {
            if let Some(other) = numbered.insert(i, k) {
                return Err(Error::Config(format!(
                    "symbolic DAG is inconsistent: {other:?} and {k:?} have the same number {i} (TaskClasses::slot)"
                )));
            }
        }
        let declared = classes.predecessor_count(k);
        let actual = incoming.get(k).copied().unwrap_or(0);
        if declared != actual {
            return Err(Error::Config(format!(
                "symbolic DAG is inconsistent: {k:?} declares {declared} predecessor(s) but has {actual} incoming edge(s)"
            )));
        }
    }
    Ok(out)
}

/// Check on the unrolled DAG (for small sizes) the first two points of
/// [`DescribedOrder::new`]'s contract: the predecessor counts (as
/// [`unroll`] checks them), and that any two tasks that declare the same
/// data, one of them writing it, are joined by a path of edges. The error names the first two tasks found that are not, and
/// their data. Costs a bit per pair of tasks.
pub fn check_order<C: TaskClasses>(classes: &C) -> Result<(), Error> {
    let tasks = unroll(classes)?;
    let n = tasks.len();
    let index: HashMap<&C::Key, usize> =
        tasks.iter().enumerate().map(|(i, (k, _))| (k, i)).collect();
    let succ: Vec<Vec<usize>> = tasks
        .iter()
        .map(|(_, s)| s.iter().map(|k| index[k]).collect())
        .collect();
    // Kahn's order (`unroll`'s is breadth-first, not topological), then
    // each task's descendants as a bit set, sinks first.
    let mut preds_left = vec![0usize; n];
    succ.iter().flatten().for_each(|&j| preds_left[j] += 1);
    let mut order: Vec<usize> = (0..n).filter(|&i| preds_left[i] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        for &j in &succ[order[next]] {
            preds_left[j] -= 1;
            if preds_left[j] == 0 {
                order.push(j);
            }
        }
        next += 1;
    }
    let words = n.div_ceil(64);
    let mut below = vec![0u64; n * words];
    for &i in order.iter().rev() {
        for &j in &succ[i] {
            below[i * words + j / 64] |= 1 << (j % 64);
            for w in 0..words {
                below[i * words + w] |= below[j * words + w];
            }
        }
    }
    let reaches = |a: usize, b: usize| below[a * words + b / 64] & (1 << (b % 64)) != 0;
    // Per datum, the tasks declaring it and whether each writes it.
    let mut users: HashMap<u64, (String, Vec<(usize, bool)>)> = HashMap::new();
    for (i, (k, _)) in tasks.iter().enumerate() {
        for a in &classes.task(k).declared.accesses {
            let core = a.core();
            users
                .entry(core.id)
                .or_insert_with(|| (core.display_name(), Vec::new()))
                .1
                .push((i, a.mode.writes()));
        }
    }
    let mut data: Vec<_> = users.into_values().collect();
    data.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, list) in &data {
        for (x, &(a, a_writes)) in list.iter().enumerate() {
            for &(b, b_writes) in &list[x + 1..] {
                if a != b && (a_writes || b_writes) && !reaches(a, b) && !reaches(b, a) {
                    return Err(Error::Config(format!(
                        "symbolic DAG does not order its data: {:?} and {:?} both declare data '{name}', {} writes it, and no path of edges joins them",
                        tasks[a].0,
                        tasks[b].0,
                        if a_writes && b_writes { "each" } else { "one" },
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The unrolled DAG in Graphviz DOT.
pub fn to_dot<C: TaskClasses>(classes: &C) -> Result<String, Error> {
    use petgraph::dot::{Config as DotConfig, Dot};
    use petgraph::graph::DiGraph;
    let tasks = unroll(classes)?;
    let mut g: DiGraph<String, ()> = DiGraph::new();
    let index: HashMap<&C::Key, _> = tasks
        .iter()
        .map(|(k, _)| (k, g.add_node(format!("{k:?}"))))
        .collect();
    for (k, succ) in &tasks {
        for s in succ {
            g.add_edge(index[k], index[s], ());
        }
    }
    Ok(format!(
        "{:?}",
        Dot::with_config(&g, &[DotConfig::EdgeNoLabel])
    ))
}

#[cfg(test)]
mod tests {
    //! Proves the unfolding on small hand-made DAGs: every task runs once,
    //! after all its predecessors; only owned tasks run on a rank, remote
    //! edges are counted; wrong predecessor counts are reported.
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::codelet::Codelet;
    use crate::{Config, Task};

    /// A diamond `a → {b, c} → d` repeated `n` times in a chain, each task
    /// appending its key to a shared log.
    struct Diamonds {
        n: u32,
        cl: Codelet<()>,
        log: Arc<Mutex<Vec<(u32, u8)>>>,
        /// Declared predecessor count of `d` (2 is right).
        d_preds: usize,
        /// Owner of each task: by layer.
        owner_of_c: usize,
        /// Number the tasks (`slot`), so the unfolding counts in its array
        /// of counters instead of its map.
        numbered: bool,
    }

    impl TaskClasses for Diamonds {
        type Key = (u32, u8);
        fn roots(&self) -> Vec<(u32, u8)> {
            vec![(0, b'a')]
        }
        fn predecessor_count(&self, k: &(u32, u8)) -> usize {
            match k.1 {
                b'a' => usize::from(k.0 > 0),
                b'd' => self.d_preds,
                _ => 1,
            }
        }
        fn successors(&self, k: &(u32, u8), out: &mut Vec<(u32, u8)>) {
            match k.1 {
                b'a' => out.extend([(k.0, b'b'), (k.0, b'c')]),
                b'b' | b'c' => out.push((k.0, b'd')),
                _ if k.0 + 1 < self.n => out.push((k.0 + 1, b'a')),
                _ => {}
            }
        }
        fn task(&self, k: &(u32, u8)) -> TaskBuilder {
            let (log, k) = (Arc::clone(&self.log), *k);
            Task::new(&self.cl, ())
                .cpu(move |()| {
                    lock(&log).push(k);
                    Ok(())
                })
                .into()
        }
        fn owner(&self, k: &(u32, u8)) -> usize {
            if k.1 == b'c' {
                self.owner_of_c
            } else {
                0
            }
        }
        fn slots(&self) -> usize {
            if self.numbered {
                4 * self.n as usize
            } else {
                0
            }
        }
        fn slot(&self, k: &(u32, u8)) -> Option<usize> {
            self.numbered
                .then(|| 4 * k.0 as usize + usize::from(k.1 - b'a'))
        }
    }

    fn diamonds(n: u32, d_preds: usize, owner_of_c: usize) -> Arc<Diamonds> {
        Arc::new(Diamonds {
            n,
            cl: Codelet::new("diamond"),
            log: Arc::new(Mutex::new(Vec::new())),
            d_preds,
            owner_of_c,
            numbered: false,
        })
    }

    /// `diamonds` with its tasks numbered.
    fn numbered(n: u32, d_preds: usize, owner_of_c: usize) -> Arc<Diamonds> {
        let mut d = Arc::into_inner(diamonds(n, d_preds, owner_of_c)).unwrap();
        d.numbered = true;
        Arc::new(d)
    }

    /// `f` on another thread, failing the test if it takes over a minute
    /// (a lost count would leave the run waiting).
    fn within_a_minute<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the run ended within a minute")
    }

    /// Diamonds numbered by `number` (`None`: not), over `slots` numbers.
    struct Renumbered {
        d: Arc<Diamonds>,
        number: fn(&(u32, u8)) -> Option<usize>,
        slots: usize,
    }

    impl TaskClasses for Renumbered {
        type Key = (u32, u8);
        fn roots(&self) -> Vec<(u32, u8)> {
            self.d.roots()
        }
        fn predecessor_count(&self, k: &(u32, u8)) -> usize {
            self.d.predecessor_count(k)
        }
        fn successors(&self, k: &(u32, u8), out: &mut Vec<(u32, u8)>) {
            self.d.successors(k, out)
        }
        fn task(&self, k: &(u32, u8)) -> TaskBuilder {
            self.d.task(k)
        }
        fn slots(&self) -> usize {
            self.slots
        }
        fn slot(&self, k: &(u32, u8)) -> Option<usize> {
            (self.number)(k)
        }
    }

    #[test]
    fn runs_every_task_after_its_predecessors() {
        for (workers, make) in
            (1..=3).flat_map(|w| [(w, diamonds as fn(_, _, _) -> _), (w, numbered)])
        {
            let rt = Runtime::new(Config::with_workers(workers)).unwrap();
            let d = make(50, 2, 0);
            let stats = run(&rt, Arc::clone(&d)).unwrap();
            assert_eq!(stats.instantiated, 200);
            assert_eq!(stats.remote_edges, 0);
            assert!(stats.peak_pending <= 2, "{stats:?}");
            if d.numbered {
                // Each `d` waited in the counters, never in the map.
                assert_eq!(stats.peak_pending, 0, "{stats:?}");
            }
            let log = lock(&d.log);
            let pos = |k: (u32, u8)| log.iter().position(|&x| x == k).unwrap();
            for i in 0..50 {
                assert!(pos((i, b'a')) < pos((i, b'b')) && pos((i, b'b')) < pos((i, b'd')));
                assert!(pos((i, b'c')) < pos((i, b'd')));
                if i > 0 {
                    assert!(pos((i - 1, b'd')) < pos((i, b'a')));
                }
            }
            assert_eq!(unroll(&*d).unwrap().len(), 200);
        }
    }

    #[test]
    fn a_rank_runs_only_its_tasks_and_counts_remote_edges() {
        for d in [diamonds(3, 2, 1), numbered(3, 2, 1)] {
            let rt = Runtime::new(Config::with_workers(2)).unwrap();
            // Rank 0 owns a, b, d: it runs a(0), b(0) and counts a(0) → c(0)
            // as remote; d(0) then waits for the remote c(0) forever.
            let stats = run_rank(&rt, Arc::clone(&d), 0).unwrap();
            assert_eq!(stats.instantiated, 2);
            assert_eq!(stats.remote_edges, 1);
            assert_eq!(*lock(&d.log), vec![(0, b'a'), (0, b'b')]);
        }
    }

    #[test]
    fn wrong_predecessor_counts_are_reported() {
        let d = diamonds(2, 3, 0);
        let e = unroll(&*d).unwrap_err().to_string();
        assert!(e.contains("declares 3 predecessor(s) but has 2"), "{e}");
        // Counted in the map or in the numbered counters alike.
        for d in [d, numbered(2, 3, 0)] {
            let rt = Runtime::new(Config::with_workers(1)).unwrap();
            let e = run(&rt, d).unwrap_err().to_string();
            assert!(
                e.contains("1 task(s) never received all their predecessors"),
                "{e}"
            );
        }
        let _ = AtomicU64::new(0);
    }

    /// Numbers out of `0..slots()` fall back to the map (the run is still
    /// right); two tasks with one number are refused by `unroll`.
    #[test]
    fn numbers_out_of_range_use_the_map_and_shared_numbers_are_refused() {
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let d = diamonds(20, 2, 0);
        // Every `d` numbered past the end (each waits in the map), the rest
        // in range.
        let past = Arc::new(Renumbered {
            d: Arc::clone(&d),
            number: |k| {
                Some(if k.1 == b'd' {
                    1000 + k.0 as usize
                } else {
                    4 * k.0 as usize + usize::from(k.1 - b'a')
                })
            },
            slots: 80,
        });
        assert_eq!(unroll(&*past).unwrap().len(), 80);
        let stats = run(&rt, past).unwrap();
        assert_eq!(stats.instantiated, 80);
        assert!(stats.peak_pending >= 1, "{stats:?}");
        assert_eq!(lock(&d.log).len(), 80);
        // `b` and `c` of a diamond share a number.
        let shared = Renumbered {
            d: diamonds(3, 2, 0),
            number: |k| Some(4 * k.0 as usize + usize::from(k.1 == b'd')),
            slots: 12,
        };
        let e = unroll(&shared).unwrap_err().to_string();
        assert!(e.contains("have the same number"), "{e}");
    }

    /// A stencil of `width` points over `steps` steps: task `(t, p)` follows
    /// `(t − 1, p − 1..=p + 1)`; each body checks that its predecessors ran.
    struct Stencil {
        width: usize,
        steps: usize,
        cl: Codelet<()>,
        ran: Arc<Vec<std::sync::atomic::AtomicBool>>,
    }

    impl Stencil {
        fn preds(&self, &(t, p): &(usize, usize)) -> impl Iterator<Item = (usize, usize)> {
            let (lo, hi) = (p.saturating_sub(1), (p + 1).min(self.width - 1));
            (lo..=hi).filter(move |_| t > 0).map(move |q| (t - 1, q))
        }
    }

    impl TaskClasses for Stencil {
        type Key = (usize, usize);
        fn roots(&self) -> Vec<(usize, usize)> {
            (0..self.width).map(|p| (0, p)).collect()
        }
        fn predecessor_count(&self, k: &(usize, usize)) -> usize {
            self.preds(k).count()
        }
        fn successors(&self, &(t, p): &(usize, usize), out: &mut Vec<(usize, usize)>) {
            if t + 1 < self.steps {
                let (lo, hi) = (p.saturating_sub(1), (p + 1).min(self.width - 1));
                out.extend((lo..=hi).map(|q| (t + 1, q)));
            }
        }
        fn task(&self, k: &(usize, usize)) -> TaskBuilder {
            let ran = Arc::clone(&self.ran);
            let (w, k) = (self.width, *k);
            let preds: Vec<usize> = self.preds(&k).map(|(t, q)| t * w + q).collect();
            Task::new(&self.cl, ())
                .cpu(move |()| {
                    if preds.iter().any(|&i| !ran[i].load(Ordering::Acquire)) {
                        return Err(format!("{k:?} ran before a predecessor").into());
                    }
                    ran[k.0 * w + k.1].store(true, Ordering::Release);
                    Ok(())
                })
                .into()
        }
        fn slots(&self) -> usize {
            self.width * self.steps
        }
        fn slot(&self, &(t, p): &(usize, usize)) -> Option<usize> {
            Some(t * self.width + p)
        }
    }

    /// Long runs of small numbered tasks, at more workers than points and
    /// fewer: the first predecessor of each task to finish starts its
    /// counter while the others count down, and every task runs once,
    /// after all its predecessors (its body checks them).
    #[test]
    fn numbered_tasks_counted_down_run_once_after_their_predecessors() {
        for (workers, width) in [(2, 2), (2, 3), (3, 2), (4, 5)] {
            for _ in 0..3 {
                let steps = 3000;
                let s = Arc::new(Stencil {
                    width,
                    steps,
                    cl: Codelet::new("stencil"),
                    ran: Arc::new((0..width * steps).map(|_| Default::default()).collect()),
                });
                let rt = Runtime::new(Config::with_workers(workers)).unwrap();
                let stats = within_a_minute({
                    let s = Arc::clone(&s);
                    move || run(&rt, s).unwrap()
                });
                assert_eq!(stats.instantiated, width * steps);
                assert!(s.ran.iter().all(|r| r.load(Ordering::Relaxed)));
            }
        }
    }

    /// A traced run keeps each task's satisfied predecessors, which only
    /// the map holds: numbered tasks are counted there then, and the trace
    /// still shows every symbolic edge.
    #[test]
    fn a_traced_run_of_numbered_tasks_keeps_their_predecessors() {
        let rt = Runtime::new(Config::with_workers(2).trace(true)).unwrap();
        let stats = run(&rt, numbered(5, 2, 0)).unwrap();
        assert_eq!(stats.instantiated, 20);
        assert!(stats.peak_pending >= 1, "{stats:?}");
        // Per diamond a→b, a→c, b→d, c→d, and d→a between diamonds.
        let mut edges = rt.trace().edges;
        edges.sort_unstable();
        edges.dedup();
        assert_eq!(edges.len(), 5 * 4 + 4, "{edges:?}");
    }

    /// A stencil over data: task `(t, p)` reads field `(t − 1) % fields`
    /// of points `p − 1..=p + 1` and writes field `t % fields` of `p`, the
    /// sum of what it read plus one (wrapping). With two fields (Task Bench's layout)
    /// the edges order every access; with one they do not: `(t, p)`
    /// overwrites what `(t, p + 1)` reads.
    struct Fields {
        width: usize,
        steps: usize,
        fields: usize,
        data: Vec<crate::DataHandle<u64>>,
        cl: Codelet<(Vec<crate::Read<u64>>, crate::Write<u64>)>,
        /// Make the first task of this step fail.
        fail_at: Option<usize>,
    }

    impl Fields {
        fn new(rt: &Runtime, width: usize, steps: usize, fields: usize) -> Fields {
            Fields {
                width,
                steps,
                fields,
                data: (0..fields * width).map(|_| rt.register(0u64)).collect(),
                cl: Codelet::<(Vec<crate::Read<u64>>, crate::Write<u64>)>::new("field").cpu(
                    |_, _, (inputs, out)| {
                        *out = inputs.iter().fold(1u64, |s, v| s.wrapping_add(**v));
                        Ok(())
                    },
                ),
                fail_at: None,
            }
        }

        fn near(&self, p: usize) -> std::ops::RangeInclusive<usize> {
            p.saturating_sub(1)..=(p + 1).min(self.width - 1)
        }

        fn field(&self, t: usize, p: usize) -> &crate::DataHandle<u64> {
            &self.data[(t % self.fields) * self.width + p]
        }

        /// The values of the last step, computed in order.
        fn expected(&self) -> Vec<u64> {
            let mut v = vec![0u64; self.width];
            for _ in 0..self.steps {
                v = (0..self.width)
                    .map(|p| self.near(p).fold(1u64, |s, q| s.wrapping_add(v[q])))
                    .collect();
            }
            v
        }
    }

    impl TaskClasses for Fields {
        type Key = (usize, usize);
        fn roots(&self) -> Vec<(usize, usize)> {
            (0..self.width).map(|p| (0, p)).collect()
        }
        fn predecessor_count(&self, &(t, p): &(usize, usize)) -> usize {
            if t == 0 {
                0
            } else {
                self.near(p).count()
            }
        }
        fn successors(&self, &(t, p): &(usize, usize), out: &mut Vec<(usize, usize)>) {
            if t + 1 < self.steps {
                out.extend(self.near(p).map(|q| (t + 1, q)));
            }
        }
        fn task(&self, &(t, p): &(usize, usize)) -> TaskBuilder {
            // Step 0 reads the last field, still 0.
            let before = t + self.fields - 1;
            let inputs = self.near(p).map(|q| self.field(before, q).r()).collect();
            let task = Task::new(&self.cl, (inputs, self.field(t, p).w()));
            match self.fail_at {
                Some(f) if f == t && p == 0 => task.cpu(|_| Err("failed on purpose".into())).into(),
                _ => task.into(),
            }
        }
        fn slots(&self) -> usize {
            self.width * self.steps
        }
        fn slot(&self, &(t, p): &(usize, usize)) -> Option<usize> {
            Some(t * self.width + p)
        }
        fn described_order(&self) -> Option<DescribedOrder> {
            // SAFETY: with two fields or more, every access is ordered
            // (`check_order` confirms it in the tests); with one, the
            // promise is not made.
            (self.fields >= 2).then(|| unsafe { DescribedOrder::new() })
        }
    }

    /// Roots `a` and `b`; then `c` and `d`, each after both, and `f`,
    /// after `a` alone (`a`'s successors in the order `c`, `d`, `f`). `a`
    /// waits until `b` runs, and `b` until `f` has run: `a`'s release
    /// finds `c` and `d` each with one predecessor left, and its worker
    /// with nothing queued.
    struct OneAhead {
        cl: Codelet<()>,
        b_runs: Arc<std::sync::atomic::AtomicBool>,
        f_ran: Arc<std::sync::atomic::AtomicBool>,
        log: Arc<Mutex<Vec<char>>>,
    }

    const ONE_AHEAD: [char; 5] = ['a', 'b', 'c', 'd', 'f'];

    impl TaskClasses for OneAhead {
        type Key = char;
        fn roots(&self) -> Vec<char> {
            vec!['a', 'b']
        }
        fn predecessor_count(&self, k: &char) -> usize {
            match k {
                'c' | 'd' => 2,
                'f' => 1,
                _ => 0,
            }
        }
        fn successors(&self, k: &char, out: &mut Vec<char>) {
            match k {
                'a' => out.extend(['c', 'd', 'f']),
                'b' => out.extend(['c', 'd']),
                _ => {}
            }
        }
        fn task(&self, &k: &char) -> TaskBuilder {
            let (b_runs, f_ran, log) = (
                Arc::clone(&self.b_runs),
                Arc::clone(&self.f_ran),
                Arc::clone(&self.log),
            );
            Task::new(&self.cl, ())
                .cpu(move |()| {
                    let wait = |flag: &std::sync::atomic::AtomicBool| {
                        while !flag.load(Ordering::Acquire) {
                            std::thread::yield_now();
                        }
                    };
                    match k {
                        'a' => wait(&b_runs),
                        'b' => {
                            b_runs.store(true, Ordering::Release);
                            wait(&f_ran);
                        }
                        'f' => f_ran.store(true, Ordering::Release),
                        _ => {}
                    }
                    lock(&log).push(k);
                    Ok(())
                })
                .into()
        }
        fn slots(&self) -> usize {
            ONE_AHEAD.len()
        }
        fn slot(&self, k: &char) -> Option<usize> {
            ONE_AHEAD.iter().position(|c| c == k)
        }
        fn described_order(&self) -> Option<DescribedOrder> {
            // SAFETY: the tasks access no data.
            Some(unsafe { DescribedOrder::new() })
        }
    }

    /// A release makes at most one task ahead: `a`'s makes `c`, and `d`
    /// is made by its last predecessor `b` (making both, one worker made
    /// the tasks of both while the other waited for them). Each runs once,
    /// after its predecessors.
    #[test]
    fn a_release_makes_one_task_ahead() {
        for _ in 0..5 {
            let classes = Arc::new(OneAhead {
                cl: Codelet::new("one_ahead"),
                b_runs: Arc::default(),
                f_ran: Arc::default(),
                log: Arc::default(),
            });
            let c = Arc::clone(&classes);
            let stats = within_a_minute(move || {
                let rt = Runtime::new(Config::with_workers(2)).unwrap();
                run(&rt, c).unwrap()
            });
            assert_eq!(stats.instantiated, 5, "{stats:?}");
            assert_eq!(stats.made_ahead, 1, "{stats:?}");
            let log = lock(&classes.log).clone();
            let at = |k: char| log.iter().position(|&c| c == k).unwrap();
            assert_eq!(log.len(), 5, "{log:?}");
            for k in ['c', 'd'] {
                assert!(at(k) > at('a') && at(k) > at('b'), "{log:?}");
            }
        }
    }

    /// With the order described, a run submits its tasks without the data
    /// inference (no handle remembers them) and still computes the ordered
    /// result, at 1 to 4 workers; the data stay usable by tasks submitted
    /// afterwards.
    #[test]
    fn a_described_order_runs_without_inference_and_right() {
        for workers in 1..=4 {
            for _ in 0..3 {
                let rt = Arc::new(Runtime::new(Config::with_workers(workers)).unwrap());
                let f = Arc::new(Fields::new(&rt, 5, 400, 2));
                check_order(&*f).unwrap();
                let stats = within_a_minute({
                    let (rt, f) = (Arc::clone(&rt), Arc::clone(&f));
                    move || run(&rt, f).unwrap()
                });
                assert_eq!(stats.instantiated, 5 * 400);
                for d in &f.data {
                    let core = &d.inner.core;
                    assert!(
                        lock(&core.deps).last_writer.is_none(),
                        "no task was inferred"
                    );
                    assert!(!core.readers_running(), "no reader counted");
                }
                // Tasks submitted afterwards see the run's results and
                // order themselves as usual.
                let last = (f.steps - 1) % f.fields;
                let (now, other) = (
                    &f.data[last * f.width..][..f.width],
                    &f.data[(1 - last) * f.width..],
                );
                let copy = Codelet::<(crate::Read<u64>, crate::Write<u64>)>::new("copy").cpu(
                    |_, _, (a, b)| {
                        *b = *a;
                        Ok(())
                    },
                );
                for (a, b) in now.iter().zip(other) {
                    rt.task(&copy, (a.r(), b.w())).submit().unwrap();
                }
                rt.wait_all().unwrap();
                let f = Arc::into_inner(f).unwrap();
                let expected = f.expected();
                let values: Vec<u64> = f
                    .data
                    .into_iter()
                    .skip((1 - last) * f.width)
                    .take(f.width)
                    .map(|d| rt.unregister(d).unwrap())
                    .collect();
                assert_eq!(values, expected, "{workers} workers");
            }
        }
    }

    /// Without the promise, the same classes are inferred (the handles
    /// remember their last writers): the test above checks the path it
    /// means to.
    #[test]
    fn without_the_promise_the_data_order_is_inferred() {
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let f = Arc::new(Fields::new(&rt, 3, 20, 3));
        struct Plain(Arc<Fields>);
        impl TaskClasses for Plain {
            type Key = (usize, usize);
            fn roots(&self) -> Vec<(usize, usize)> {
                self.0.roots()
            }
            fn predecessor_count(&self, k: &(usize, usize)) -> usize {
                self.0.predecessor_count(k)
            }
            fn successors(&self, k: &(usize, usize), out: &mut Vec<(usize, usize)>) {
                self.0.successors(k, out)
            }
            fn task(&self, k: &(usize, usize)) -> TaskBuilder {
                self.0.task(k)
            }
        }
        run(&rt, Arc::new(Plain(Arc::clone(&f)))).unwrap();
        assert!(f
            .data
            .iter()
            .all(|d| lock(&d.inner.core.deps).last_writer.is_some()));
    }

    /// A task of classes that promise their order declares no lock order,
    /// but declaring one datum twice is still refused (its typed body would
    /// alias a `&mut`), before anything runs, and the run reports it by
    /// name; so is a datum repeated among more accesses than are compared
    /// pairwise (more than eight).
    #[test]
    fn an_ordered_task_declaring_a_datum_twice_is_refused() {
        struct Twice {
            cl: Codelet<(Vec<crate::Read<u64>>, crate::Write<u64>)>,
            data: Vec<crate::DataHandle<u64>>,
            reads: usize,
        }
        impl TaskClasses for Twice {
            type Key = u8;
            fn roots(&self) -> Vec<u8> {
                vec![0]
            }
            fn predecessor_count(&self, _: &u8) -> usize {
                0
            }
            fn successors(&self, _: &u8, _: &mut Vec<u8>) {}
            fn task(&self, _: &u8) -> TaskBuilder {
                // Reads of data 1, 2, ..., then data 1 again; writes data 0.
                let mut reads: Vec<_> = (1..self.reads).map(|i| self.data[i].r()).collect();
                reads.push(self.data[1].r());
                Task::new(&self.cl, (reads, self.data[0].w())).into()
            }
            fn described_order(&self) -> Option<DescribedOrder> {
                // SAFETY: one task.
                Some(unsafe { DescribedOrder::new() })
            }
        }
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for reads in [2, 4, 12] {
            let ran2 = Arc::clone(&ran);
            let twice = Twice {
                cl: Codelet::new("dup_reader").cpu(move |_, _, _| {
                    ran2.store(true, Ordering::SeqCst);
                    Ok(())
                }),
                data: (0..reads as u64).map(|i| rt.register(i)).collect(),
                reads,
            };
            let e = run(&rt, Arc::new(twice)).unwrap_err().to_string();
            assert!(e.contains("declared twice"), "{reads} reads: {e}");
            assert!(
                e.contains("dup_reader"),
                "{reads} reads, names the task: {e}"
            );
            assert!(
                e.contains("data 'data#"),
                "{reads} reads, names the datum: {e}"
            );
        }
        assert!(!ran.load(Ordering::SeqCst), "no body ran");
    }

    /// `check_order` refuses classes whose edges leave two accesses of one
    /// datum unordered, naming both tasks and the datum.
    #[test]
    fn check_order_names_two_unordered_tasks() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let e = check_order(&Fields::new(&rt, 3, 4, 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not order its data"), "{e}");
        assert!(
            e.contains("(0, 0) and (0, 1)") && e.contains("data#0"),
            "{e}"
        );
        check_order(&Fields::new(&rt, 3, 4, 2)).unwrap();
    }

    /// Task `c` follows `a` and `b`, and `a` names `c` before `b` (which
    /// `a` releases): with one worker, `a`'s release finds nothing queued
    /// when it satisfies `c`, so `c` is made ahead, and `b`'s end submits
    /// it. `fail_b`: `b` fails instead.
    struct Join {
        cl: Codelet<()>,
        log: Arc<Mutex<Vec<char>>>,
        fail_b: bool,
    }

    impl TaskClasses for Join {
        type Key = char;
        fn roots(&self) -> Vec<char> {
            vec!['x']
        }
        fn predecessor_count(&self, k: &char) -> usize {
            match k {
                'x' => 0,
                'c' => 2,
                _ => 1,
            }
        }
        fn successors(&self, k: &char, out: &mut Vec<char>) {
            out.extend(match k {
                'x' => &['a'][..],
                'a' => &['c', 'b'][..],
                'b' => &['c'][..],
                _ => &[][..],
            });
        }
        fn task(&self, &k: &char) -> TaskBuilder {
            let (log, fail) = (Arc::clone(&self.log), self.fail_b && k == 'b');
            Task::new(&self.cl, ())
                .cpu(move |()| match fail {
                    true => Err("failed on purpose".into()),
                    false => {
                        lock(&log).push(k);
                        Ok(())
                    }
                })
                .into()
        }
        fn slots(&self) -> usize {
            4
        }
        fn slot(&self, k: &char) -> Option<usize> {
            "xabc".find(*k)
        }
        fn described_order(&self) -> Option<DescribedOrder> {
            // SAFETY: the tasks declare no data.
            Some(unsafe { DescribedOrder::new() })
        }
    }

    fn join(fail_b: bool) -> Arc<Join> {
        Arc::new(Join {
            cl: Codelet::new("join"),
            log: Arc::default(),
            fail_b,
        })
    }

    #[test]
    fn a_task_made_ahead_runs_once_after_its_last_predecessor() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let j = join(false);
        let stats = run(&rt, Arc::clone(&j)).unwrap();
        assert_eq!((stats.instantiated, stats.made_ahead), (4, 1), "{stats:?}");
        assert_eq!(*lock(&j.log), ['x', 'a', 'b', 'c']);
        // The unfolder, which the task made ahead held, is gone.
        assert_eq!(Arc::strong_count(&j), 1);
        // Without the promise (inferred order) nothing is made ahead.
        struct Plain(Arc<Join>);
        impl TaskClasses for Plain {
            type Key = char;
            fn roots(&self) -> Vec<char> {
                self.0.roots()
            }
            fn predecessor_count(&self, k: &char) -> usize {
                self.0.predecessor_count(k)
            }
            fn successors(&self, k: &char, out: &mut Vec<char>) {
                self.0.successors(k, out)
            }
            fn task(&self, k: &char) -> TaskBuilder {
                self.0.task(k)
            }
            fn slots(&self) -> usize {
                4
            }
            fn slot(&self, k: &char) -> Option<usize> {
                self.0.slot(k)
            }
        }
        let stats = run(&rt, Arc::new(Plain(join(false)))).unwrap();
        assert_eq!((stats.instantiated, stats.made_ahead), (4, 0), "{stats:?}");
    }

    /// A predecessor of a task made ahead fails: the run ends with its
    /// error (the task made ahead is not in flight, so nothing waits for
    /// it), the task never runs, and dropping it lets the unfolder go.
    #[test]
    fn a_task_made_ahead_whose_predecessor_fails_is_dropped_unrun() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let j = join(true);
        let e = within_a_minute({
            let j = Arc::clone(&j);
            move || run(&rt, j).unwrap_err().to_string()
        });
        assert!(e.contains("failed on purpose"), "{e}");
        assert_eq!(*lock(&j.log), ['x', 'a']);
        assert_eq!(Arc::strong_count(&j), 1, "the unfolder was kept alive");
    }

    /// A failed task of a run with a described order poisons the data it
    /// was to write (it is no handle's last writer, but nothing later
    /// writes them): a task reading them afterwards is cancelled.
    #[test]
    fn a_failure_under_a_described_order_poisons_its_data() {
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let mut f = Fields::new(&rt, 3, 10, 2);
        f.fail_at = Some(4);
        let f = Arc::new(f);
        let e = run(&rt, Arc::clone(&f)).unwrap_err().to_string();
        assert!(e.contains("failed on purpose"), "{e}");
        let read: Codelet<crate::Read<u64>> = Codelet::new("read").cpu(|_, _, _| Ok(()));
        let h = rt.task(&read, f.field(4, 0).r()).submit().unwrap();
        let e = rt.wait(&h).unwrap_err().to_string();
        assert!(e.contains("cancelled (first: task 'read'"), "{e}");
    }
}
