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
//! release path.
//!
//! Look-ahead: classes that also list each task's predecessors
//! ([`TaskClasses::predecessors`]) let a one-process run make a numbered
//! task early, on the worker that finished its *first* predecessor, once
//! every one of its predecessors has been submitted; the task is submitted
//! held and released by its last predecessor. The making (its `task` call
//! and submission) then leaves the critical path: in a stencil whose
//! workers end a step together, the worker that ends last made both tasks
//! of the next step, one after the other, before either could start; with
//! look-ahead the worker that ends first makes them while the other still
//! runs (or each makes one), and the last one only releases them.
//!
//! Ownership: each task has an `owner` (an MPI rank later; 0 here). A run for
//! rank `r` instantiates only the tasks `r` owns; a successor owned elsewhere
//! is a *remote edge* (counted in [`UnfoldStats::remote_edges`]), and a
//! predecessor owned elsewhere must be reported with [`Unfolder::satisfy`].
//!
//! Instantiated tasks still declare their data, so the STF inference runs on
//! them too. With a correct description it adds no edge (every conflicting
//! earlier task is a finished predecessor, or, made ahead, a submitted
//! one); with a wrong one it still orders conflicting tasks by
//! instantiation order, so data races cannot result.
//!
//! Invariant: tasks are submitted in a topological order of the symbolic
//! DAG (a task after all its predecessors were submitted: made when they
//! have finished, or ahead once they are submitted). So the inferred edges,
//! which follow submission order, and the symbolic ones never form a cycle.
//! A task made ahead that can never be released (a wrong description, or a
//! predecessor that failed) is cancelled when nothing else is left to run
//! ([`run_rank`]), never left waiting.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use rustc_hash::FxBuildHasher;
use smallvec::SmallVec;

use crate::error::Error;
use crate::runtime::{Hold, Runtime, Submitter};
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

    /// Append `key`'s predecessors to `out` and return `true`, if the
    /// classes list them (default: `false`, they do not). A one-process
    /// run then makes a numbered task ahead (see the module doc) when all
    /// its listed predecessors are numbered and submitted, and the list is
    /// as long as [`predecessor_count`](Self::predecessor_count) says.
    /// [`unroll`] checks that the lists mirror [`successors`](Self::successors).
    fn predecessors(&self, _key: &Self::Key, _out: &mut Vec<Self::Key>) -> bool {
        false
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
    /// A key without a number (or a number out of range) uses the map.
    fn slot(&self, _key: &Self::Key) -> Option<usize> {
        None
    }
}

/// A counter of [`Unfolder::counters`]: the task's satisfied predecessors
/// (below the flags), and two flags.
///
/// A worker claimed the task to make it ahead (set with the count below its
/// total: the last predecessor then releases the task instead of making it).
const AHEAD: u32 = 1 << 31;
/// The task was submitted (made, ahead or not): its successors may be made
/// ahead. Set after its submission returned, so a successor made ahead is
/// submitted after it.
const SUBMITTED: u32 = 1 << 30;
/// The count of satisfied predecessors.
const COUNT: u32 = SUBMITTED - 1;
/// A task made and released: every predecessor satisfied (both flags set).
const MADE: u32 = u32::MAX;

/// A task made ahead, by the number [`TaskClasses::slot`] gave it: held
/// until its last predecessor finishes, or that predecessor came first
/// (`Due`: the worker that made it releases it once submitted).
enum Ahead {
    Held(Hold),
    Due,
}

type AheadMap = HashMap<usize, Ahead, FxBuildHasher>;

const SHARDS: usize = 16;

/// How often a run with look-ahead checks, while it waits, for tasks made
/// ahead that can never run ([`Unfolder::cancel_stuck`]).
#[cfg(not(test))]
const STUCK_CHECK: std::time::Duration = std::time::Duration::from_millis(20);
/// Often, in the tests: a check that cancels a task that could still run
/// shows up as a run that hangs or fails.
#[cfg(test)]
const STUCK_CHECK: std::time::Duration = std::time::Duration::from_micros(200);

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
    /// Tasks made ahead (see the module doc), among `instantiated`.
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
    counters: Box<[AtomicU32]>,
    /// Whether numbered tasks may be made ahead (those whose classes list
    /// their predecessors): only in a run in one process. With other
    /// ranks, a task whose predecessors are all local could be submitted
    /// before a receive of data it does not read, which looks harmless,
    /// but the distributed layer's sends and receives were not checked
    /// against it.
    look_ahead: bool,
    /// Tasks made ahead and not yet released, by number, sharded as
    /// `pending` is.
    ahead: Vec<Mutex<AheadMap>>,
    /// Tasks made ahead whose hold is not released yet, and a count of
    /// every change to it (see [`Unfolder::cancel_stuck`]).
    held: CachePadded<AtomicUsize>,
    held_changes: CachePadded<AtomicUsize>,
    made_ahead: CachePadded<AtomicUsize>,
    /// Keep the ids of satisfied predecessors (when the runtime traces), so
    /// traces show the symbolic edges.
    keep_preds: bool,
    // The counters below are written by every worker, once per task or
    // edge: each on a cache line of its own, away from the fields above,
    // which every release reads. (Measured together with the numbered
    // counters; alone, its effect was within the runs' spread.)
    pending_len: CachePadded<AtomicUsize>,
    peak_pending: CachePadded<AtomicUsize>,
    instantiated: CachePadded<AtomicUsize>,
    remote_edges: CachePadded<AtomicUsize>,
    /// First submission error raised inside a body (reported by `run`).
    error: Mutex<Option<Error>>,
    /// Owned tasks whose body succeeded (and whose successors were released).
    done: CachePadded<AtomicUsize>,
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
        let look_ahead = slots > 0 && remote.is_none();
        Arc::new(Unfolder {
            counters: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            look_ahead,
            ahead: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(FxBuildHasher)))
                .collect(),
            held: CachePadded::new(AtomicUsize::new(0)),
            held_changes: CachePadded::new(AtomicUsize::new(0)),
            made_ahead: CachePadded::new(AtomicUsize::new(0)),
            classes,
            rank,
            submitter: rt.submitter(),
            pending: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(FxBuildHasher)))
                .collect(),
            keep_preds,
            pending_len: CachePadded::new(AtomicUsize::new(0)),
            peak_pending: CachePadded::new(AtomicUsize::new(0)),
            instantiated: CachePadded::new(AtomicUsize::new(0)),
            remote_edges: CachePadded::new(AtomicUsize::new(0)),
            error: Mutex::new(None),
            done: CachePadded::new(AtomicUsize::new(0)),
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
    pub fn satisfy(self: &Arc<Self>, key: C::Key, pred: Option<u64>) {
        if let Some((slot, counter)) = self
            .classes
            .slot(&key)
            .and_then(|i| self.counters.get(i).map(|c| (i, c)))
        {
            let total = self.classes.predecessor_count(&key);
            assert!(
                total > 0,
                "{key:?} has a predecessor but predecessor_count says 0"
            );
            if total == 1 {
                self.make(key, counter);
                return;
            }
            // AcqRel: the last predecessor's increment reads every earlier
            // one's (a release sequence), so the task it makes sees what
            // all its predecessors wrote.
            let now = counter.fetch_add(1, Ordering::AcqRel) + 1;
            let count = (now & COUNT) as usize;
            if count == total {
                match now & AHEAD {
                    0 => self.make(key, counter),
                    _ => self.release_ahead(slot, counter),
                }
            } else if count == 1 && self.look_ahead {
                self.make_ahead(key, slot, counter, total);
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

    /// Make numbered task `key`, all its predecessors satisfied, and mark
    /// it made (after its submission: see [`SUBMITTED`]).
    fn make(self: &Arc<Self>, key: C::Key, counter: &AtomicU32) {
        self.instantiate(key, Vec::new());
        counter.store(MADE, Ordering::Release);
    }

    fn instantiate(self: &Arc<Self>, key: C::Key, preds: Vec<u64>) {
        let task = self.prepare(key, preds);
        if let Err(e) = self.submitter.submit(task) {
            lock(&self.error).get_or_insert(e);
        }
    }

    /// `key`'s task, followed by the release of its successors.
    fn prepare(self: &Arc<Self>, key: C::Key, preds: Vec<u64>) -> TaskBuilder {
        let mut task = self.classes.task(&key);
        if !preds.is_empty() {
            // Only traced runs keep them: no box for the others.
            task.rare_mut().satisfied_preds = preds;
        }
        // Whichever body succeeds (a device body, or the CPU body it falls
        // back to) is followed by the release of the successors, exactly once,
        // on the worker that ran it (so they land in its queue).
        let me = Arc::clone(self);
        self.instantiated.fetch_add(1, Ordering::Relaxed);
        task.then(move |id| me.release_successors(&key, id))
    }

    /// Make numbered task `key` ahead, one of its `total` predecessors
    /// having finished, if all of them are submitted (the order of the
    /// module doc's invariant): submitted held, released by the last
    /// predecessor ([`release_ahead`](Self::release_ahead)).
    fn make_ahead(self: &Arc<Self>, key: C::Key, slot: usize, counter: &AtomicU32, total: usize) {
        let mut preds = Vec::with_capacity(total);
        if !self.classes.predecessors(&key, &mut preds) || preds.len() != total {
            return;
        }
        let submitted = |p: &C::Key| {
            let c = self.classes.slot(p).and_then(|i| self.counters.get(i));
            // Acquire: pairs with the Release that marked it submitted, so
            // this task's submission (its data's dependency states) comes
            // after that one's.
            c.is_some_and(|c| c.load(Ordering::Acquire) & SUBMITTED != 0)
        };
        if !preds.iter().all(submitted) {
            return;
        }
        // Claim it, unless its last predecessor came meanwhile (which then
        // makes it): that predecessor's increment sees the claim or not.
        let mut cur = counter.load(Ordering::Relaxed);
        loop {
            if (cur & COUNT) as usize >= total {
                return;
            }
            match counter.compare_exchange_weak(
                cur,
                cur | AHEAD,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
        self.made_ahead.fetch_add(1, Ordering::Relaxed);
        let task = self.prepare(key, Vec::new());
        match self.submitter.submit_held(task) {
            Ok((_, hold)) => {
                // Counted once in flight (see `cancel_stuck`).
                self.held_changed(1);
                counter.fetch_or(SUBMITTED, Ordering::Release);
                let mut ahead = lock(&self.ahead[slot % SHARDS]);
                match ahead.remove(&slot) {
                    Some(Ahead::Due) => {
                        drop(ahead);
                        self.release(hold, counter);
                    }
                    None => {
                        ahead.insert(slot, Ahead::Held(hold));
                    }
                    Some(Ahead::Held(_)) => unreachable!("task number {slot} made ahead twice"),
                }
            }
            Err(e) => {
                lock(&self.error).get_or_insert(e);
            }
        }
    }

    /// The last predecessor of numbered task `slot`, made ahead, finished:
    /// release it, or leave that to the worker still submitting it.
    fn release_ahead(&self, slot: usize, counter: &AtomicU32) {
        let mut ahead = lock(&self.ahead[slot % SHARDS]);
        match ahead.remove(&slot) {
            Some(Ahead::Held(hold)) => {
                drop(ahead);
                self.release(hold, counter);
            }
            None => {
                ahead.insert(slot, Ahead::Due);
            }
            Some(Ahead::Due) => unreachable!("task number {slot} released twice"),
        }
    }

    /// Let a task made ahead run: all its predecessors are satisfied.
    fn release(&self, hold: Hold, counter: &AtomicU32) {
        counter.store(MADE, Ordering::Release);
        // Uncounted before it is released (see `cancel_stuck`).
        self.held_changed(-1);
        hold.release_here();
    }

    /// Count held tasks made ahead: one more (`1`, once submitted) or one
    /// less (`-1`, before its release); every change is counted too (see
    /// [`cancel_stuck`](Self::cancel_stuck)).
    fn held_changed(&self, by: isize) {
        self.held_changes.fetch_add(1, Ordering::SeqCst);
        match by {
            1 => self.held.fetch_add(1, Ordering::SeqCst),
            _ => self.held.fetch_sub(1, Ordering::SeqCst),
        };
    }

    /// Cancel the tasks made ahead that nothing can release any more (a
    /// predecessor failed, or the description is wrong), once every task in
    /// flight is one of them: no task is left to finish and release them.
    ///
    /// Why the check below proves it: `held` counts only tasks in flight
    /// (counted after their submission, uncounted before their release),
    /// so the runtime's count of tasks in flight is at least `held` plus
    /// every task running or ready. A hold is counted or uncounted only by
    /// a running task (a predecessor's release of its successors), so if
    /// the count of changes is the same before and after the runtime's
    /// count is read, `held` was exact while it was read, and equality
    /// means nothing but held tasks was in flight then, nor could be after.
    /// Returns whether it cancelled any.
    fn cancel_stuck(&self, rt: &Runtime) -> bool {
        let changes = self.held_changes.load(Ordering::SeqCst);
        let held = self.held.load(Ordering::SeqCst);
        if held == 0
            || rt.tasks_in_flight() != held
            || self.held_changes.load(Ordering::SeqCst) != changes
        {
            return false;
        }
        for shard in &self.ahead {
            let stuck: Vec<Ahead> = lock(shard).drain().map(|(_, a)| a).collect();
            for a in stuck {
                if let Ahead::Held(hold) = a {
                    self.held_changed(-1);
                    hold.cancel(
                        "it was made ahead and never received all its predecessors (one failed, or the symbolic description is wrong)",
                    );
                }
            }
        }
        true
    }

    /// Wait for every task of the run; with look-ahead, cancel the tasks
    /// made ahead that can never run ([`cancel_stuck`](Self::cancel_stuck)),
    /// checked every [`STUCK_CHECK`]. Returns the wait's result, and
    /// whether tasks were cancelled so.
    fn wait_all(&self, rt: &Runtime) -> (Result<(), Error>, bool) {
        if !self.look_ahead {
            return (rt.wait_all(), false);
        }
        let mut cancelled = false;
        loop {
            match rt.wait_all_timeout(STUCK_CHECK) {
                Err(Error::Timeout(_)) => cancelled |= self.cancel_stuck(rt),
                r => return (r, cancelled),
            }
        }
    }

    fn release_successors(self: &Arc<Self>, key: &C::Key, id: u64) -> Result<(), crate::BodyError> {
        let mut succ = Vec::new();
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
        for s in local {
            self.satisfy(s, Some(id));
        }
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        // The count goes up before the lock is taken: a waiter that checked
        // `done()` under the lock and found too few is waiting by then.
        if done >= self.wake_at.load(Ordering::Relaxed) {
            let _g = lock(&self.wake.0);
            self.wake.1.notify_all();
        }
        Ok(())
    }

    /// Owned tasks finished so far.
    pub(crate) fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Instantiate the roots this rank owns.
    pub(crate) fn start(self: &Arc<Self>) {
        for root in self.classes.roots() {
            if self.classes.owner(&root) == self.rank {
                match self.classes.slot(&root).and_then(|i| self.counters.get(i)) {
                    Some(counter) => self.make(root, counter),
                    None => self.instantiate(root, Vec::new()),
                }
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
            instantiated: self.instantiated.load(Ordering::Relaxed),
            peak_pending: self.peak_pending.load(Ordering::Relaxed),
            remote_edges: self.remote_edges.load(Ordering::Relaxed),
            made_ahead: self.made_ahead.load(Ordering::Relaxed),
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
    let (waited, cancelled) = unfolder.wait_all(rt);
    let pending = unfolder.pending_len.load(Ordering::Relaxed) + unfolder.counted_pending();
    match waited {
        // Only tasks made ahead were cancelled, none failed: the
        // description is wrong, said below.
        Err(Error::Failed(e)) if cancelled && e.failures.is_empty() && pending != 0 => {}
        r => r?,
    }
    if let Some(e) = unfolder.take_error() {
        return Err(e);
    }
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
    // Each task's predecessors, as the successor lists give them.
    let mut from: HashMap<C::Key, Vec<C::Key>> = HashMap::new();
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
            from.entry(s.clone()).or_default().push(k.clone());
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
        let mut listed = Vec::new();
        if classes.predecessors(k, &mut listed) {
            let mut edges = from.remove(k).unwrap_or_default();
            let key = |x: &C::Key| format!("{x:?}");
            listed.sort_by_key(key);
            edges.sort_by_key(key);
            if listed != edges {
                return Err(Error::Config(format!(
                    "symbolic DAG is inconsistent: {k:?} lists the predecessors {listed:?} but the successor lists give {edges:?}"
                )));
            }
        }
    }
    Ok(out)
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
        /// List each task's predecessors (`d` lists `a` too when it
        /// declares 3), so a run makes tasks ahead.
        lists_preds: bool,
        /// This task's body fails.
        fail: Option<(u32, u8)>,
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
        fn predecessors(&self, k: &(u32, u8), out: &mut Vec<(u32, u8)>) -> bool {
            match k.1 {
                b'a' if k.0 > 0 => out.push((k.0 - 1, b'd')),
                b'a' => {}
                b'b' | b'c' => out.push((k.0, b'a')),
                _ => {
                    out.extend([(k.0, b'b'), (k.0, b'c')]);
                    if self.d_preds == 3 {
                        out.push((k.0, b'a'));
                    }
                }
            }
            self.lists_preds
        }
        fn task(&self, k: &(u32, u8)) -> TaskBuilder {
            let (log, k, fail) = (Arc::clone(&self.log), *k, self.fail == Some(*k));
            Task::new(&self.cl, ())
                .cpu(move |()| {
                    if fail {
                        return Err("fails on purpose".into());
                    }
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
            lists_preds: false,
            fail: None,
        })
    }

    /// `diamonds` with its tasks numbered.
    fn numbered(n: u32, d_preds: usize, owner_of_c: usize) -> Arc<Diamonds> {
        let mut d = Arc::into_inner(diamonds(n, d_preds, owner_of_c)).unwrap();
        d.numbered = true;
        Arc::new(d)
    }

    /// `numbered` diamonds that list their predecessors, `fail` failing.
    fn listed(n: u32, d_preds: usize, fail: Option<(u32, u8)>) -> Arc<Diamonds> {
        let mut d = Arc::into_inner(numbered(n, d_preds, 0)).unwrap();
        d.lists_preds = true;
        d.fail = fail;
        Arc::new(d)
    }

    /// `f` on another thread, failing the test if it takes over a minute
    /// (a task made ahead and never released would hang the run).
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

    /// Classes that list predecessors: tasks are made ahead (with one
    /// worker always: `b` and `c` are queued together, and `d` is made
    /// ahead when the first of them ends), held until their last
    /// predecessor ends, and every task still runs after all its
    /// predecessors (`d` waits for `b` and `c` through its hold alone: the
    /// tasks declare no data). The lists are checked by `unroll`.
    #[test]
    fn tasks_made_ahead_run_after_their_predecessors() {
        for workers in 1..=4 {
            let d = listed(200, 2, None);
            let rt = Runtime::new(Config::with_workers(workers)).unwrap();
            let stats = within_a_minute({
                let d = Arc::clone(&d);
                move || run(&rt, d).unwrap()
            });
            assert_eq!(stats.instantiated, 800, "{stats:?}");
            if workers == 1 {
                assert_eq!(stats.made_ahead, 200, "{stats:?}");
            }
            let log = lock(&d.log);
            assert_eq!(log.len(), 800);
            let pos = |k: (u32, u8)| log.iter().position(|&x| x == k).unwrap();
            for i in 0..200 {
                let (a, b, c, dd) = (
                    pos((i, b'a')),
                    pos((i, b'b')),
                    pos((i, b'c')),
                    pos((i, b'd')),
                );
                assert!(
                    a < b && a < c && b < dd && c < dd,
                    "diamond {i} at {workers} workers"
                );
                if i > 0 {
                    assert!(pos((i - 1, b'd')) < a);
                }
            }
            assert_eq!(unroll(&*d).unwrap().len(), 800);
        }
        // A list that does not mirror the successors is refused.
        let e = unroll(&WrongList(listed(2, 2, None)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lists the predecessors"), "{e}");
    }

    /// Diamonds whose `d` lists `a` instead of `c` among its predecessors.
    struct WrongList(Arc<Diamonds>);

    impl TaskClasses for WrongList {
        type Key = (u32, u8);
        fn roots(&self) -> Vec<(u32, u8)> {
            self.0.roots()
        }
        fn predecessor_count(&self, k: &(u32, u8)) -> usize {
            self.0.predecessor_count(k)
        }
        fn predecessors(&self, k: &(u32, u8), out: &mut Vec<(u32, u8)>) -> bool {
            self.0.predecessors(k, out);
            for p in out.iter_mut().filter(|p| p.1 == b'c' && k.1 == b'd') {
                p.1 = b'a';
            }
            true
        }
        fn successors(&self, k: &(u32, u8), out: &mut Vec<(u32, u8)>) {
            self.0.successors(k, out)
        }
        fn task(&self, k: &(u32, u8)) -> TaskBuilder {
            self.0.task(k)
        }
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
        fn predecessors(&self, k: &(usize, usize), out: &mut Vec<(usize, usize)>) -> bool {
            out.extend(self.preds(k));
            true
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

    /// Long runs of small tasks made ahead, while the waiting thread looks
    /// for stuck ones every 200 µs: none is cancelled while it can still
    /// run (the run ends, with every task run once after its
    /// predecessors).
    #[test]
    fn no_task_made_ahead_is_taken_for_stuck_while_it_can_run() {
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

    /// A task made ahead whose predecessor fails is cancelled, not left
    /// held: the run ends with the failure. One whose description is wrong
    /// (it lists and counts a predecessor that never releases it) ends the
    /// run with the inconsistency, as a task that was never made does.
    #[test]
    fn a_task_made_ahead_that_cannot_run_is_cancelled() {
        for workers in 1..=2 {
            let rt = Runtime::new(Config::with_workers(workers)).unwrap();
            let d = listed(3, 2, Some((1, b'b')));
            let e = within_a_minute(move || run(&rt, d).unwrap_err().to_string());
            assert!(e.contains("fails on purpose"), "{e}");
            let rt = Runtime::new(Config::with_workers(workers)).unwrap();
            let e = within_a_minute(move || run(&rt, listed(3, 3, None)).unwrap_err().to_string());
            assert!(e.contains("never received all their predecessors"), "{e}");
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
}
