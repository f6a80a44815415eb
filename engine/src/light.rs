//! Light tasks: a DAG of numbered keys whose work is a call of the
//! classes' own function, scheduled without task objects (Taskflow's and
//! OpenMP's tasks over the application's data; PaRSEC's PTG bodies without
//! its data management).
//!
//! A [`LightClasses`] describes the DAG as [`TaskClasses`](crate::symbolic::TaskClasses)
//! does (roots, predecessor counts, successors, a number per task) and runs
//! a task with [`LightClasses::run`]. [`run`] occupies every CPU worker of
//! the runtime with one team task; each member pops keys from its own
//! deque (LIFO: a task's successors run next on the worker that released
//! them, their inputs in its cache) and steals from the others when it has
//! none. Releasing a successor is one atomic counter per task, as in the
//! symbolic front-end's numbered path; nothing is allocated per task, no
//! handle is touched, no closure boxed, no node made. A symbolic task costs
//! about 4,800 instructions of runtime on one worker (`callgrind`, Task
//! Bench `stencil_1d`: making it 2,270, running 720, releasing 870); most
//! of it is what a general task needs (its accesses checked and resolved,
//! its node, its hooks), which a task that only calls a function does not.
//!
//! What the classes give up: the runtime manages none of their data (no
//! handles, no transfers, no devices; the classes keep their data and
//! `run` reads and writes it, the edges being what orders those accesses),
//! edges between ranks carry what the classes pack (`dist::light`), its
//! tasks appear in a trace as the one team task, and a simulated runtime
//! cannot run it (it runs no bodies). A task's error or panic stops the run: the tasks
//! already started finish, no other starts, and the run returns the error
//! with the task's key. `Runtime::interrupt` (Ctrl-C) stops it the same
//! way, checked before each task.
//!
//! Invariants (checked by `tests/tests/light.rs`):
//! - `run(key)` is called once per task, after `run` returned `Ok` for every
//!   predecessor, on some CPU worker; calls of tasks not joined by a path of
//!   edges may run at once.
//! - In a distributed run a member that finds no task delivers the arrived
//!   messages itself (`Remote::poll`), and the tasks they release go to
//!   the shared injector, counted in `pending` before they are pushed.
//!   The rank ends when every task it owns ran and every other rank said
//!   its own did (`Light::over`).
//! - `pending` counts the tasks released (or roots) and not finished: a
//!   task that releases `k` successors adds `k - 1` before it pushes them,
//!   one that releases none subtracts 1. It reaches 0 only when no task is
//!   queued or running, and then no task can become ready: the run is over.
//!   A member leaves when it finds its deque and every other empty and
//!   `pending` at 0; it pushes only to its own deque, so a task is never
//!   left in the deque of a member that left. (Added before the pushes: a
//!   thief that ran a pushed task and subtracted before the add would see
//!   0 while tasks remain, and leave early: the run would still end right,
//!   on fewer workers.)
//! - A member that released no task and has none queued may *claim* one of
//!   the successors it counted down (`WAITED` on its counter) and keep its
//!   finished task's unit of `pending` for it. The predecessor that counts
//!   a claimed task to zero leaves it (and its unit) to the claimant, which
//!   watches the counter and runs it; a claimant that finds other work, or
//!   has waited `CLAIM_ROUNDS`, withdraws the claim (then drops the unit),
//!   or runs the task if its count reached zero meanwhile. So each task
//!   runs once, by exactly one member, and `pending` still counts it from
//!   its release to its end.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;
use smallvec::SmallVec;

use crate::error::Error;
use crate::runtime::Runtime;
use crate::task::TaskBuilder;
use crate::util::lock;
use crate::{BodyError, Codelet};

/// A DAG of light tasks (see the module doc).
pub trait LightClasses: Send + Sync + 'static {
    /// A task's index.
    type Key: Clone + Debug + Send + Sync + 'static;

    /// Tasks without predecessors.
    fn roots(&self) -> Vec<Self::Key>;

    /// How many tasks precede `key` (asked once per task, when its first
    /// predecessor finishes).
    fn predecessor_count(&self, key: &Self::Key) -> usize;

    /// The tasks `key` precedes, appended to `out`.
    fn successors(&self, key: &Self::Key, out: &mut Vec<Self::Key>);

    /// How many numbers [`slot`](Self::slot) deals.
    fn slots(&self) -> usize;

    /// `key`'s number, distinct for every task, below [`slots`](Self::slots):
    /// the index of its counter.
    fn slot(&self, key: &Self::Key) -> usize;

    /// Task `key`'s work, called once its predecessors' returned `Ok`.
    fn run(&self, key: &Self::Key) -> Result<(), BodyError>;
}

/// What a light run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LightStats {
    /// Tasks run.
    pub tasks: usize,
    /// Of them, taken from another worker's deque.
    pub stolen: usize,
    /// Of them, run by the worker that claimed them, waiting for their
    /// last predecessor (see the module doc).
    pub claimed: usize,
    /// Workers that ran tasks (the team's size).
    pub workers: usize,
}

/// Rounds an idle member looks for a task (its deque, the others', the
/// network) before it yields the core at each round: a few tens of
/// microseconds, about a message's way between two ranks and back. With
/// `crossbeam`'s `Backoff` (a yield from the eighth round on), a 2-rank
/// `stencil_1d` step at `-iter 1024` took 2.4 µs more than its task, the
/// member yielding while the neighbour's message came (0.7 µs more with
/// these spins). A yield once in 32 rounds, as a worker watching the
/// network pauses (`watch::pause`), was level on 2 ranks and 1.05 of the
/// time in one process at `-iter 256`.
const IDLE_SPINS: u32 = 256;

/// Rounds a claimant watches its claimed task's counter (stealing and
/// polling meanwhile, as an idle member does) before it withdraws the
/// claim: long enough for a neighbour's task of tens of microseconds, and
/// a bound on the wait for a count that never reaches zero (predecessor
/// counts that do not match the edges).
const CLAIM_ROUNDS: u32 = 4 * IDLE_SPINS;

/// A claimant looks for other work once in this many rounds.
const CLAIM_LOOK: u32 = 8;

/// A task's counter (see [`Light::satisfy`]): `UNTOUCHED` until a
/// predecessor finishes; each finished predecessor subtracts 1, and the
/// first one also `UNTOUCHED` minus the predecessor count, so the counter
/// then says how many are left, below `LIMIT`, and reaches 0 once, when the
/// task is released (by whichever subtraction comes last). `WAITED`: a
/// member claimed the task (see the module doc); `TAKEN`, released to its
/// claimant. Every predecessor makes one atomic subtraction, the last
/// included (a load before it would take the line twice from the member
/// watching it).
const UNTOUCHED: u32 = 1 << 28;
const LIMIT: u32 = 1 << 27;
const COUNT: u32 = LIMIT - 1;
const WAITED: u32 = 1 << 29;
const TAKEN: u32 = WAITED;

/// What counting a predecessor down did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Satisfied {
    /// Predecessors are left.
    Waiting,
    /// The task is ready: the caller releases it.
    Ready,
    /// The task is ready and claimed: its claimant runs it.
    Handed,
}

/// Run every task of `classes` on `rt`'s CPU workers and wait for them.
///
/// # Errors
/// A task's error or panic ([`Error::Failed`], the task labelled with its
/// key and numbered with its slot), an interrupt
/// ([`Runtime::interrupt`], Ctrl-C: [`Error::Interrupted`] naming the first
/// task not started; tasks already running finish), a number out of range or
/// reused, predecessor counts that do not match the edges, or a simulated
/// runtime ([`Error::Config`]).
pub fn run<C: LightClasses>(rt: &Runtime, classes: Arc<C>) -> Result<LightStats, Error> {
    run_with(rt, classes, None)
}

/// The distributed part of a light run (`dist::light`): who owns a task,
/// how a finished task's remote successors are told, and when the rank's
/// run may end.
pub(crate) trait Remote<K>: Send + Sync {
    /// This rank.
    fn rank(&self) -> usize;
    /// The rank that runs `key`.
    fn owner(&self, key: &K) -> usize;
    /// Tasks this rank runs.
    fn owned(&self) -> usize;
    /// Task `from` finished: tell each rank of `groups` which of its tasks
    /// it precedes (with the data they read).
    fn send(&self, from: &K, groups: &[Group<K>]) -> Result<(), String>;
    /// This rank's tasks are all done: tell the others.
    fn send_done(&self);
    /// Whether every other rank said its tasks are done.
    fn peers_done(&self) -> bool;
    /// Deliver arrived messages on this thread (an idle member's poll).
    fn poll(&self);
    /// Another rank's failure, if one stopped the run.
    fn aborted(&self) -> Option<String>;
    /// Tell every other rank that this one failed.
    fn abort(&self, why: &str);
}

/// A finished task's successors on one other rank: the rank, and them.
pub(crate) type Group<K> = (usize, SmallVec<[K; 4]>);

/// [`run`], or one rank's part of a distributed run (`remote`).
pub(crate) fn run_with<C: LightClasses>(
    rt: &Runtime,
    classes: Arc<C>,
    remote: Option<Arc<dyn Remote<C::Key>>>,
) -> Result<LightStats, Error> {
    let light = prepare(rt, classes, remote)?;
    light.start(rt)?;
    light.finish(rt)
}

/// A light run's state, its roots queued, not started.
pub(crate) fn prepare<C: LightClasses>(
    rt: &Runtime,
    classes: Arc<C>,
    remote: Option<Arc<dyn Remote<C::Key>>>,
) -> Result<Arc<Light<C>>, Error> {
    if rt.is_simulated() {
        return Err(Error::Config(
            "light tasks run their classes' code, and a simulated runtime runs none: use the symbolic front-end".into(),
        ));
    }
    let me = remote.as_ref().map_or(0, |r| r.rank());
    let roots: Vec<C::Key> = classes
        .roots()
        .into_iter()
        .filter(|r| remote.as_ref().is_none_or(|d| d.owner(r) == me))
        .collect();
    let members = rt.workers();
    let slots = classes.slots();
    let injector = Injector::new();
    for r in &roots {
        // A root is its own release: its counter says so, and a root named
        // twice or listed as a successor is caught like a reused number.
        let slot = classes.slot(r);
        if slot >= slots {
            return Err(out_of_range(r, slot, slots));
        }
        injector.push(r.clone());
    }
    let deques: Vec<Worker<C::Key>> = (0..members).map(|_| Worker::new_lifo()).collect();
    let light = Arc::new(Light {
        stealers: deques.iter().map(Worker::stealer).collect(),
        deques: deques.into_iter().map(|d| Mutex::new(Some(d))).collect(),
        counters: (0..slots).map(|_| AtomicU32::new(UNTOUCHED)).collect(),
        injector,
        pending: CachePadded::new(AtomicUsize::new(roots.len())),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        ran: per_member(members),
        stolen: per_member(members),
        claimed: per_member(members),
        team: AtomicUsize::new(0),
        interrupt: rt.interrupt_flag(),
        sent_done: AtomicBool::new(false),
        remote,
        classes,
    });
    for r in &roots {
        if !light.release_root(r) {
            return Err(Error::Config(format!(
                "light DAG: root {r:?} is listed twice"
            )));
        }
    }
    Ok(light)
}

impl<C: LightClasses> Light<C> {
    /// Occupy the runtime's CPU workers with the run's team task.
    pub(crate) fn start(self: &Arc<Self>, rt: &Runtime) -> Result<(), Error> {
        let members = self.deques.len();
        let codelet = Codelet::new("light");
        let l2 = Arc::clone(self);
        let task = TaskBuilder::new(&codelet)
            .team(crate::team::TeamSize::up_to(members))
            .body(move |ctx| {
                let team = ctx.team();
                l2.team.store(team.size(), Ordering::Relaxed);
                team.run(|m| l2.member(m.rank()))?;
                Ok(())
            });
        rt.submit(task)?;
        Ok(())
    }

    /// Wait for the run's end: its error, or what it did.
    pub(crate) fn finish(&self, rt: &Runtime) -> Result<LightStats, Error> {
        let waited = rt.wait_all();
        if let Some(e) = lock(&self.error).take() {
            return Err(e);
        }
        waited?;
        let left = self
            .counters
            .iter()
            .filter(|c| !matches!(c.load(Ordering::Relaxed), UNTOUCHED | 0 | TAKEN))
            .count();
        if left > 0 && self.remote.is_none() {
            return Err(Error::Config(format!(
                "light DAG is inconsistent: {left} task(s) never received all their predecessors (predecessor_count says more than their edges)"
            )));
        }
        Ok(LightStats {
            tasks: self.done(),
            stolen: total(&self.stolen, Ordering::Relaxed),
            claimed: total(&self.claimed, Ordering::Relaxed),
            workers: self.team.load(Ordering::Relaxed),
        })
    }

    /// Tasks run on this rank so far (Acquire: a member's sends precede
    /// its count, so a `DONE` sent after reading it follows every edge).
    fn done(&self) -> usize {
        total(&self.ran, Ordering::Acquire)
    }
}

/// A count per member, each on a line of its own.
fn per_member(members: usize) -> Vec<CachePadded<AtomicUsize>> {
    (0..members)
        .map(|_| CachePadded::new(AtomicUsize::new(0)))
        .collect()
}

/// The members' counts summed.
fn total(counts: &[CachePadded<AtomicUsize>], order: Ordering) -> usize {
    counts.iter().map(|c| c.load(order)).sum()
}

fn out_of_range<K: Debug>(key: &K, slot: usize, slots: usize) -> Error {
    Error::Config(format!(
        "light DAG: task {key:?} has number {slot}, not below slots() = {slots}"
    ))
}

/// One light run's state, shared by the team's members.
pub(crate) struct Light<C: LightClasses> {
    classes: Arc<C>,
    /// Per task (its number), see [`UNTOUCHED`].
    counters: Box<[AtomicU32]>,
    /// The roots, taken by whichever member comes first.
    injector: Injector<C::Key>,
    /// Per member, its deque, taken by the member when it starts.
    deques: Vec<Mutex<Option<Worker<C::Key>>>>,
    stealers: Vec<Stealer<C::Key>>,
    /// Tasks released and not finished (see the module doc).
    pending: CachePadded<AtomicUsize>,
    /// A task failed: no other starts.
    stop: AtomicBool,
    /// The first failure.
    error: Mutex<Option<Error>>,
    /// Per member: tasks run, and of them stolen (each on a line of its own).
    ran: Vec<CachePadded<AtomicUsize>>,
    stolen: Vec<CachePadded<AtomicUsize>>,
    /// Per member: tasks it ran having claimed them.
    claimed: Vec<CachePadded<AtomicUsize>>,
    /// The team's size.
    team: AtomicUsize,
    /// `Runtime::interrupt` (Ctrl-C): checked before each task.
    interrupt: crate::runtime::InterruptFlag,
    /// A distributed run's other ranks (`dist::light`).
    remote: Option<Arc<dyn Remote<C::Key>>>,
    /// Whether this rank told the others its tasks are done.
    sent_done: AtomicBool,
}

impl<C: LightClasses> Light<C> {
    /// Member `rank`'s loop: run its own tasks, steal when it has none,
    /// until none is pending or the run stops.
    fn member(&self, rank: usize) {
        let Some(local) = lock(&self.deques[rank]).take() else {
            return;
        };
        let mut succ = Vec::with_capacity(8);
        let (mut ran, mut stolen, mut claimed) = (0, 0, 0);
        // Rounds without a task since the last one (see `IDLE_SPINS`).
        let mut idle = 0u32;
        // A distributed run's last poll of the network by this member.
        let mut polled = std::time::Instant::now();
        // The successor this member claimed, and its number.
        let mut claim: Option<(C::Key, usize)> = None;
        // The task this member released and runs next.
        let mut next: Option<C::Key> = None;
        loop {
            // Whether the task was stolen (`theft`), or claimed (`kept`).
            let (key, theft, kept) = match next.take().or_else(|| local.pop()) {
                Some(k) => (Some(k), false, false),
                None => match claim.take() {
                    Some((k, slot)) if self.take_claimed(slot) => (Some(k), false, true),
                    held => {
                        claim = held;
                        // A claimant looks for other work every
                        // `CLAIM_LOOK` rounds, and otherwise reads only its
                        // counter (a thief reads the lines that the other
                        // members' pushes and pops write).
                        let look = claim.is_none() || idle.is_multiple_of(CLAIM_LOOK);
                        let theft = look.then(|| self.steal(rank, &local)).flatten();
                        if theft.is_some() {
                            // Work elsewhere first: the claimed task goes
                            // to whichever member takes it.
                            self.withdraw(&mut claim, &local);
                        }
                        (theft, true, false)
                    }
                },
            };
            match key {
                Some(k) => {
                    idle = 0;
                    if self.stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    if self.interrupt.is_set() {
                        // The first task not started names the stop; the
                        // others are dropped as the run ends.
                        let task = self.info(&k);
                        self.fail(Error::Interrupted(crate::RunError {
                            failures: Vec::new(),
                            cancelled: vec![task],
                        }));
                        continue;
                    }
                    stolen += usize::from(theft);
                    claimed += usize::from(kept);
                    // A panic anywhere in the task's turn (its body, or the
                    // classes' successors, counts or packing) fails it: a
                    // member that unwound would leave its deque's tasks to
                    // no one, and the others waiting for them.
                    let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.execute(&k, &local, &mut succ, &mut claim, &mut next)
                    }));
                    if let Err(panic) = turn {
                        self.failed(&k, panicked(panic.as_ref()));
                    }
                    ran += 1;
                    // Release: see `done`.
                    self.ran[rank].store(ran, Ordering::Release);
                    // A busy member delivers what came between two of its
                    // tasks, at most every `BETWEEN_TASKS` (as a busy
                    // worker does, `Watch::poll_between`): otherwise a
                    // message waits until this rank has nothing else to
                    // run, while the other rank waits for the tasks it
                    // releases (`nearest` over 2 ranks ran at 65–84 % of
                    // the others' peak even with 160 µs tasks).
                    if let Some(r) = &self.remote {
                        if polled.elapsed() >= crate::watch::BETWEEN_TASKS {
                            r.poll();
                            polled = std::time::Instant::now();
                        }
                    }
                }
                None => {
                    if self.stop.load(Ordering::Relaxed) || self.over() {
                        break;
                    }
                    // Spins, then yields the core at every round: the
                    // team's members own the workers for the run, but the
                    // cores may be shared (ranks oversubscribed).
                    idle = idle.saturating_add(1);
                    if idle >= CLAIM_ROUNDS {
                        self.withdraw(&mut claim, &local);
                    }
                    if idle < IDLE_SPINS {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
        self.stolen[rank].store(stolen, Ordering::Relaxed);
        self.claimed[rank].store(claimed, Ordering::Relaxed);
    }

    /// Whether this member may leave, having found no task. In one
    /// process: no task is pending. In a distributed run: every task of
    /// this rank ran (then it says so to the others, once) and every other
    /// rank said so, or one failed; meanwhile it delivers what arrives.
    fn over(&self) -> bool {
        let Some(r) = &self.remote else {
            return self.pending.load(Ordering::Acquire) == 0;
        };
        r.poll();
        if let Some(why) = r.aborted() {
            self.fail(Error::Remote(why));
            return true;
        }
        if self.done() < r.owned() {
            return false;
        }
        if !self.sent_done.swap(true, Ordering::AcqRel) {
            r.send_done();
        }
        r.peers_done()
    }

    /// A task from the roots or another member's deque.
    fn steal(&self, rank: usize, local: &Worker<C::Key>) -> Option<C::Key> {
        loop {
            let mut retry = false;
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(k) => return Some(k),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let n = self.stealers.len();
            for v in (1..n).map(|i| (rank + i) % n) {
                match self.stealers[v].steal() {
                    Steal::Success(k) => return Some(k),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// Whether the claimed task numbered `slot` was counted to zero: then
    /// it is this member's to run.
    fn take_claimed(&self, slot: usize) -> bool {
        // Acquire: reads every predecessor's writes, as `satisfy` does.
        self.counters[slot].load(Ordering::Acquire) == TAKEN
    }

    /// Withdraw this member's claim, if any: the task is left to its last
    /// predecessor, and the claim's unit of `pending` dropped; or, counted
    /// to zero meanwhile, it is queued here (its unit stays with it).
    fn withdraw(&self, claim: &mut Option<(C::Key, usize)>, local: &Worker<C::Key>) {
        let Some((key, slot)) = claim.take() else {
            return;
        };
        let counter = &self.counters[slot];
        let mut seen = counter.load(Ordering::Acquire);
        while seen & WAITED != 0 && seen & COUNT > 0 {
            match counter.compare_exchange_weak(
                seen,
                seen & !WAITED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.pending.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
                Err(now) => seen = now,
            }
        }
        // Released to this member (`TAKEN`), its unit of `pending` with it.
        local.push(key);
    }

    /// Claim one of `waiting` (successors of this member's finished task
    /// with predecessors left): the first whose counter says neither
    /// released nor claimed.
    fn claim_one(&self, waiting: &[C::Key]) -> Option<(C::Key, usize)> {
        for k in waiting {
            let slot = self.classes.slot(k);
            let counter = &self.counters[slot];
            let seen = counter.load(Ordering::Relaxed);
            if !(1..LIMIT).contains(&seen) {
                continue;
            }
            // A predecessor that counts it down meanwhile fails the swap:
            // the next is tried (a count that reached zero was released).
            if counter
                .compare_exchange(seen, seen | WAITED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some((k.clone(), slot));
            }
        }
        None
    }

    /// Run `key`, then release its successors: the first into `next`, the
    /// others into `local`; with none released and none queued, claim one
    /// (`claim`, see the module doc).
    fn execute(
        &self,
        key: &C::Key,
        local: &Worker<C::Key>,
        succ: &mut Vec<C::Key>,
        claim: &mut Option<(C::Key, usize)>,
        next: &mut Option<C::Key>,
    ) {
        if let Err(e) = self.classes.run(key) {
            return self.failed(key, e.to_string());
        }
        succ.clear();
        self.classes.successors(key, succ);
        if let Some(r) = &self.remote {
            let me = r.rank();
            let mut groups: SmallVec<[Group<C::Key>; 2]> = SmallVec::new();
            succ.retain(|s| match r.owner(s) {
                o if o == me => true,
                o => {
                    match groups.iter_mut().find(|(g, _)| *g == o) {
                        Some((_, v)) => v.push(s.clone()),
                        None => groups.push((o, smallvec::smallvec![s.clone()])),
                    }
                    false
                }
            });
            if !groups.is_empty() {
                groups.sort_by_key(|(o, _)| *o);
                if let Err(e) = r.send(key, &groups) {
                    // This rank's failure: the others are told (`fail`).
                    return self.failed(key, format!("its edges could not be sent: {e}"));
                }
            }
        }
        let mut ready: SmallVec<[C::Key; 8]> = SmallVec::new();
        let mut waiting: SmallVec<[C::Key; 8]> = SmallVec::new();
        for s in succ.drain(..) {
            match self.satisfy(&s) {
                Ok(Satisfied::Ready) => ready.push(s),
                Ok(Satisfied::Waiting) => waiting.push(s),
                // Its claimant runs it, with its unit of `pending`.
                Ok(Satisfied::Handed) => {}
                Err(e) => return self.fail(e),
            }
        }
        // See the module doc: added before the pushes, subtracted after.
        match ready.len() {
            0 => {
                debug_assert!(claim.is_none(), "a member runs no task while it claims one");
                // Nothing to run next here: wait for a successor instead of
                // stealing it from the member that releases it (its unit
                // of `pending` is this task's).
                if local.is_empty() {
                    *claim = self.claim_one(&waiting);
                }
                if claim.is_none() {
                    self.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
            1 => {}
            n => {
                self.pending.fetch_add(n - 1, Ordering::AcqRel);
            }
        }
        // The first runs next on this member, with no trip through its
        // deque (a push, and a pop's fence); the others are pushed in
        // reverse, so that they are popped in order (LIFO).
        let mut ready = ready.into_iter();
        *next = ready.next();
        for s in ready.rev() {
            local.push(s);
        }
    }

    /// One predecessor of `key` finished: whether `key` is now ready, and
    /// whether a member claimed it.
    fn satisfy(&self, key: &C::Key) -> Result<Satisfied, Error> {
        let slot = self.classes.slot(key);
        let slots = self.counters.len();
        let counter = self
            .counters
            .get(slot)
            .ok_or_else(|| out_of_range(key, slot, slots))?;
        // AcqRel, as the symbolic front-end's counters: the last
        // subtraction reads every earlier one's writes, so the task sees
        // what all its predecessors wrote.
        let before = counter.fetch_sub(1, Ordering::AcqRel);
        if before == UNTOUCHED {
            // The first: the arrivals so far (`UNTOUCHED - now`, this one
            // among them) become the count left.
            let total = self.classes.predecessor_count(key);
            if total == 0 || total >= LIMIT as usize {
                return Err(Error::Config(format!(
                    "light DAG is inconsistent: {key:?} is a successor but predecessor_count says {total}"
                )));
            }
            let shift = UNTOUCHED - total as u32;
            let left = counter
                .fetch_sub(shift, Ordering::AcqRel)
                .wrapping_sub(shift);
            return match left {
                0 => Ok(Satisfied::Ready),
                1..LIMIT => Ok(Satisfied::Waiting),
                // More arrived than `total`.
                _ => Err(more_edges(key)),
            };
        }
        match (before & WAITED != 0, before & !WAITED) {
            (false, 1) => Ok(Satisfied::Ready),
            // The claimant takes it (`take_claimed`).
            (true, 1) => Ok(Satisfied::Handed),
            (_, 2..LIMIT) => Ok(Satisfied::Waiting),
            // The first has not counted yet.
            (false, b) if (UNTOUCHED - LIMIT + 1..UNTOUCHED).contains(&b) => Ok(Satisfied::Waiting),
            // Released already (0, `TAKEN`), or worse.
            _ => Err(more_edges(key)),
        }
    }

    /// Mark root `key` released; false if it already was.
    fn release_root(&self, key: &C::Key) -> bool {
        let slot = self.classes.slot(key);
        self.counters[slot]
            .compare_exchange(UNTOUCHED, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Task `key` failed with `message`: stop the run with it.
    fn failed(&self, key: &C::Key, message: String) {
        let task = self.info(key);
        self.fail(Error::Failed(crate::RunError {
            failures: vec![crate::TaskFailure { task, message }],
            cancelled: Vec::new(),
        }));
    }

    /// How errors name task `key`: by its key, numbered by its slot.
    fn info(&self, key: &C::Key) -> crate::TaskInfo {
        crate::TaskInfo {
            id: self.classes.slot(key) as u64,
            codelet: "light".into(),
            label: Some(format!("{key:?}")),
        }
    }

    /// Keep the first failure and stop the run.
    fn fail(&self, e: Error) {
        let mut first = lock(&self.error);
        if first.is_none() {
            // Another rank's failure is already known everywhere.
            if let (Some(r), false) = (&self.remote, matches!(e, Error::Remote(_))) {
                r.abort(&e.to_string());
            }
            *first = Some(e);
        }
        drop(first);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Predecessors of this rank's tasks `keys` finished on another rank
    /// (their edges' message): release those now ready, on the routing
    /// thread, where any member takes them.
    pub(crate) fn satisfy_remote(&self, keys: impl IntoIterator<Item = C::Key>) {
        for k in keys {
            match self.satisfy(&k) {
                Ok(Satisfied::Ready) => {
                    // Counted before it can be taken (see the module doc).
                    self.pending.fetch_add(1, Ordering::AcqRel);
                    self.injector.push(k);
                }
                // Its claimant, a member of this rank, runs it.
                Ok(Satisfied::Handed) | Ok(Satisfied::Waiting) => {}
                Err(e) => return self.fail(e),
            }
        }
    }

    /// A message could not be read: stop the run with `why`.
    pub(crate) fn fail_message(&self, why: String) {
        self.fail(Error::Remote(why));
    }
}

/// A panic's message, as a task failure says it.
fn panicked(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    format!("panicked: {what}")
}

fn more_edges<K: Debug>(key: &K) -> Error {
    Error::Config(format!(
        "light DAG is inconsistent: {key:?} has more incoming edges than predecessor_count says, or shares its number with another task"
    ))
}
