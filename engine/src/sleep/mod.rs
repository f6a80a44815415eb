//! Idle workers: spin briefly, then park on their own condition variable;
//! pushers wake the worker a task was pushed to, or any one parked worker,
//! with no lost wake-ups. The protocol and why it is correct: `sleep/README.md`.

use crossbeam_utils::CachePadded;

use crate::sched::{ReadyTask, WorkerQueue};
use crate::sync::{fence, lock, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};
use crate::watch::Activity;

/// Pops attempted with a busy-wait hint before yielding the core.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 64;
/// How long an idle worker keeps yielding its core, round after round
/// (after its spin rounds), before it parks: about what parking costs on
/// the 2-core VMs, where a parked thread woken on an idle core returns from
/// its wait 58–70 µs later (median; p90 78–130 µs;
/// `bench/peers/wake_latency.c`). A task made within the window starts at
/// once. With a count of 16 yields instead (0.25 µs each there) workers
/// parked after 5–10 µs, and a one-process symbolic `stencil_1d` with 30 µs
/// tasks ran a step's two tasks one after the other on one worker half the
/// time. Medians of 8 alternated runs, a 5 µs window (about those 16
/// yields) → this one: that stencil 0.57 → 0.40 s, its STF twin 0.41 →
/// 0.33 s, `tessera overhead`'s independent tasks 462 → 422 ns each; but
/// its chain, where a third thread submits while a worker searches, 661 →
/// 723 ns (CHANGELOG, issue 41). Each round yields the core, so a device or MPI thread that needs
/// it still runs.
#[cfg(not(loom))]
const YIELD_WINDOW: std::time::Duration = std::time::Duration::from_micros(50);
/// The window of a runtime whose idle workers watch a network
/// ([`Sleep::share_cores`]), about the 16 yields of before: a rank of a
/// distributed run shares its cores with its communication and main
/// threads, and with other ranks when oversubscribed, so its idle workers
/// back off soon (a watcher stays in its search anyway while a message is
/// expected). Measured against [`YIELD_WINDOW`] on 2 ranks × 1 worker, 6
/// alternated pairs: `lu --n 4096` 73.0 against 71.5 GFLOP/s, Task Bench
/// `stencil_1d` (`-iter 2048`) STF 162 against 155 ms, symbolic 129
/// against 150 ms (medians; the runs' spread is wider than any of these).
#[cfg(not(loom))]
const SHARED_CORES_WINDOW: std::time::Duration = std::time::Duration::from_micros(5);
// Under loom every spin round multiplies the explored interleavings; one
// round of each keeps W1 in the model.
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 1;

/// When an idle worker stops searching (W1): after its spin rounds, once
/// its yield rounds have lasted its runtime's window ([`YIELD_WINDOW`] or
/// [`SHARED_CORES_WINDOW`]).
#[cfg(not(loom))]
struct Searching {
    /// When the first yield round began.
    since: Option<std::time::Instant>,
    window: std::time::Duration,
}

#[cfg(not(loom))]
impl Searching {
    fn new(shared_cores: bool) -> Searching {
        Searching {
            since: None,
            window: match shared_cores {
                false => YIELD_WINDOW,
                true => SHARED_CORES_WINDOW,
            },
        }
    }

    /// Whether round `round` (0 again after network progress) searches.
    fn more(&mut self, round: u32) -> bool {
        if round < SPIN_ROUNDS {
            self.since = None;
            return true;
        }
        self.since
            .get_or_insert_with(std::time::Instant::now)
            .elapsed()
            < self.window
    }
}

/// Under loom, a count of rounds (no clock in the model).
#[cfg(loom)]
struct Searching;

#[cfg(loom)]
impl Searching {
    fn new(_shared_cores: bool) -> Searching {
        Searching
    }

    fn more(&mut self, round: u32) -> bool {
        round < SPIN_ROUNDS + YIELD_ROUNDS
    }
}

/// What an idle worker pops from: its policy queue (`dyn WorkerQueue`), or a
/// stand-in in the loom model.
pub(crate) trait Pop {
    type Item;
    fn pop(&mut self) -> Option<Self::Item>;
    /// Poll the network a rank's worker watches (`crate::watch`); the
    /// default has none.
    fn poll(&mut self) -> Activity {
        Activity::Idle
    }
    /// Called in W1 when the spin rounds find nothing (and before W2 if
    /// W1 ends sooner): a worker checks there whether every task has
    /// finished, for `wait_all` (`Shared::notify_drained`). The default
    /// does nothing.
    fn settled(&mut self) {}
}

impl Pop for dyn WorkerQueue + '_ {
    type Item = ReadyTask;
    fn pop(&mut self) -> Option<ReadyTask> {
        WorkerQueue::pop(self)
    }
}

/// One worker's sleep state.
struct Slot {
    /// `true` while the worker is parked in W4 and nobody woke it. Protected
    /// by its mutex, which the worker holds from W2 until `Condvar::wait`
    /// releases it.
    parked: Mutex<bool>,
    cond: Condvar,
    /// Set between W2 and leaving W3/W4: pushers skip slots without it
    /// (no lock taken for a busy worker).
    announced: AtomicBool,
}

pub(crate) struct Sleep {
    /// One cache line each: a worker's W2–W4 writes to its slot must not
    /// evict its neighbours' flags from the pushers' caches.
    slots: Box<[CachePadded<Slot>]>,
    /// Workers that announced they are about to park or are parked (W2..).
    /// Read without a lock by pushers.
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
    /// Where `notify_one` starts looking, so wake-ups spread over workers.
    /// Written by pushers: on a line of its own, away from `shutdown`, which
    /// every worker reads at every task.
    next: CachePadded<AtomicUsize>,
    /// Workers in W1 (searching: spinning or yielding, not announced).
    /// Written by idle workers as they enter and leave W1, read by
    /// [`notify_one_unless_searching`](Self::notify_one_unless_searching):
    /// a line of its own.
    searching: CachePadded<AtomicUsize>,
    /// Set once the runtime's idle workers watch a network: they search
    /// for [`SHARED_CORES_WINDOW`], not [`YIELD_WINDOW`]. (A std atomic: a
    /// tuning flag, outside the loom model, whose rounds are counted.)
    shared_cores: std::sync::atomic::AtomicBool,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Self {
        Sleep {
            slots: (0..workers)
                .map(|_| {
                    CachePadded::new(Slot {
                        parked: Mutex::new(false),
                        cond: Condvar::new(),
                        announced: AtomicBool::new(false),
                    })
                })
                .collect(),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            next: CachePadded::new(AtomicUsize::new(0)),
            searching: CachePadded::new(AtomicUsize::new(0)),
            shared_cores: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The runtime's idle workers watch a network from now on: they share
    /// their cores with communication threads and other ranks, and search
    /// for a shorter time before they park.
    pub(crate) fn share_cores(&self) {
        self.shared_cores
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Wake worker `w` if it parked (or is about to). P3 of the README.
    fn wake(&self, w: usize) -> bool {
        let slot = &self.slots[w];
        if !slot.announced.load(Ordering::SeqCst) {
            return false;
        }
        let mut parked = lock(&slot.parked);
        if *parked {
            *parked = false;
            slot.cond.notify_one();
            true
        } else {
            false
        }
    }

    /// Called after a task was made visible in worker `w`'s own queue, which
    /// only `w` pops (a targeted policy): wakes `w` if it sleeps. P2–P3.
    pub(crate) fn notify_worker(&self, w: usize) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake(w);
        }
    }

    /// Called after a task was made visible in a queue any worker may take
    /// from: wakes one parked worker, if there is one. P2–P3.
    pub(crate) fn notify_one(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            if self.wake((start + k) % n) {
                return;
            }
        }
    }

    /// [`notify_one`](Self::notify_one), unless a worker is searching (in
    /// W1): that worker pops the task, or pops another and stays awake, or
    /// leaves W1 and re-checks the queues in W3 (P2' of the README). Only
    /// for tasks every worker may take (a host-only runtime's `Local` and
    /// `Shared` pushes): a searching worker that cannot run the task would
    /// park without it. And only where no worker watches a network: a
    /// watcher's poll in W1 may run a received task, long, while it counts
    /// as searching. Saves the pusher a lock and a futex wake-up per
    /// task while workers starve for work it alone makes (one thread
    /// submitting small tasks to many workers).
    pub(crate) fn notify_one_unless_searching(&self) {
        fence(Ordering::SeqCst);
        // P2 first: with nobody parked (the common case of a busy runtime)
        // the pusher reads only `sleepers`, a line idle workers seldom
        // write, and not `searching`, which they write at every visit to
        // the idle path.
        if self.sleepers.load(Ordering::SeqCst) == 0 || self.searching.load(Ordering::SeqCst) > 0 {
            return;
        }
        self.notify_one();
    }

    /// Workers parked or about to park (a hint; may be stale).
    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::Relaxed)
    }

    /// Cheap check used by busy workers before deciding to wake someone.
    pub(crate) fn has_sleepers(&self) -> bool {
        self.sleepers.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Ask every worker to stop after its current task and wake them all.
    pub(crate) fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for slot in self.slots.iter() {
            let mut parked = lock(&slot.parked);
            *parked = false;
            slot.cond.notify_one();
        }
    }

    /// The idle path of worker `w`: returns its next task, or `None` when the
    /// runtime shuts down. Steps W1–W4 of the README.
    pub(crate) fn idle<Q: Pop + ?Sized>(&self, w: usize, queue: &mut Q) -> Option<Q::Item> {
        // W1: spin, then yield. A worker watching the network polls it at
        // every round, and stays in W1 while a message is expected. It
        // counts as searching until it leaves W1 (the count drops before
        // W2's fence, which P2' relies on).
        let (mut round, mut watched, mut settled) = (0, 0u32, false);
        self.searching.fetch_add(1, Ordering::SeqCst);
        let stop_searching = || {
            self.searching.fetch_sub(1, Ordering::SeqCst);
        };
        let mut searching =
            Searching::new(self.shared_cores.load(std::sync::atomic::Ordering::Relaxed));
        while searching.more(round) {
            if self.is_shutdown() {
                stop_searching();
                return None;
            }
            if let Some(t) = queue.pop() {
                stop_searching();
                return Some(t);
            }
            match queue.poll() {
                Activity::Progress => {
                    // A task the poll released may have run here, and been
                    // the last: check again.
                    (round, settled) = (0, false);
                    continue;
                }
                Activity::Awaiting => {
                    // Rounds do not count while a message is expected: the
                    // check comes here.
                    settle_once(queue, &mut settled);
                    crate::watch::pause(&mut watched);
                    continue;
                }
                Activity::Idle => {}
            }
            if round < SPIN_ROUNDS {
                std::hint::spin_loop();
            } else {
                settle_once(queue, &mut settled);
                crate::sync::yield_now();
            }
            round += 1;
        }
        stop_searching();
        settle_once(queue, &mut settled);
        // W2: announce, holding this worker's lock.
        let slot = &self.slots[w];
        let mut parked = lock(&slot.parked);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        slot.announced.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let leave = |t: Option<Q::Item>| {
            slot.announced.store(false, Ordering::SeqCst);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            t
        };
        loop {
            // W3: re-check everything after announcing.
            if self.shutdown.load(Ordering::SeqCst) {
                return leave(None);
            }
            if let Some(t) = queue.pop() {
                return leave(Some(t));
            }
            // W4: park until a waker clears `parked`; `wait` releases the
            // lock atomically. Spurious wake-ups loop here.
            *parked = true;
            while *parked {
                parked = slot.cond.wait(parked).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

/// `queue.settled()` once per stretch of W1 in which no poll ran a task
/// (`settled` is cleared at each `Activity::Progress`): only a task this
/// worker runs can make it the worker of the last finish, so one check
/// after its last task suffices.
fn settle_once<Q: Pop + ?Sized>(queue: &mut Q, settled: &mut bool) {
    if !*settled {
        queue.settled();
        *settled = true;
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model-checks the protocol with loom: a pusher makes one task per
    //! worker visible and wakes (a chosen worker, or any one), and every
    //! worker must get a task. A lost wake-up leaves a worker parked forever
    //! while its task waits: loom reports the deadlock.
    use super::*;
    use crate::sync::Arc;

    /// A queue of task tokens: shared by all workers (like `ws`'s injector)
    /// or one per worker (like `dmda`'s private queues).
    struct Tokens(Arc<AtomicUsize>);

    impl Pop for Tokens {
        type Item = ();
        fn pop(&mut self) -> Option<()> {
            let mut n = self.0.load(Ordering::SeqCst);
            while n > 0 {
                match self
                    .0
                    .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                {
                    Ok(_) => return Some(()),
                    Err(m) => n = m,
                }
            }
            None
        }
    }

    /// How the pusher wakes after each push.
    #[derive(Clone, Copy)]
    enum Wake {
        /// `notify_worker(w)` on worker `w`'s private queue.
        Targeted,
        /// `notify_one` on the shared queue.
        One,
    }

    fn model(workers: usize, wake: Wake) {
        let targeted = matches!(wake, Wake::Targeted);
        // Bounded preemptions (loom's recommended practice): exhaustive
        // exploration of two workers and a pusher takes hours; bugs of this
        // kind show up within two or three preemptions.
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let sleep = Arc::new(Sleep::new(workers));
            let queues: Vec<Arc<AtomicUsize>> = if targeted {
                (0..workers)
                    .map(|_| Arc::new(AtomicUsize::new(0)))
                    .collect()
            } else {
                vec![Arc::new(AtomicUsize::new(0))]
            };
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let s = sleep.clone();
                    let q = queues[if targeted { w } else { 0 }].clone();
                    loom::thread::spawn(move || s.idle(w, &mut Tokens(q)))
                })
                .collect();
            for w in 0..workers {
                let q = &queues[if targeted { w } else { 0 }];
                q.fetch_add(1, Ordering::SeqCst);
                match wake {
                    Wake::Targeted => sleep.notify_worker(w),
                    Wake::One => sleep.notify_one(),
                }
            }
            for h in handles {
                assert_eq!(h.join().unwrap(), Some(()), "every worker got its task");
            }
        });
    }

    #[test]
    fn no_lost_wakeup_one_worker() {
        model(1, Wake::One);
    }

    #[test]
    fn no_lost_wakeup_two_workers_shared_queue() {
        model(2, Wake::One);
    }

    #[test]
    fn no_lost_wakeup_two_workers_targeted() {
        model(2, Wake::Targeted);
    }

    /// P2' (`notify_one_unless_searching`) guarantees less than a wake-up
    /// per task: a searcher may take another task than the one whose wake
    /// it saved, and the task is then offered by the worker loop's chain
    /// wake-up, or taken when that searcher pops again. So here the workers
    /// loop as the real ones do (pop, chain wake-up, pop again) until the
    /// pusher, having seen all `tasks` taken, shuts the runtime down. A
    /// task left in the queue while every worker parks is a deadlock.
    fn model_unless_searching(workers: usize, tasks: usize) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let sleep = Arc::new(Sleep::new(workers));
            let queue = Arc::new(AtomicUsize::new(0));
            let taken = Arc::new((Mutex::new(0usize), Condvar::new()));
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let (s, q, taken) = (sleep.clone(), queue.clone(), taken.clone());
                    loom::thread::spawn(move || {
                        while s.idle(w, &mut Tokens(q.clone())).is_some() {
                            // The chain wake-up of `worker::run_worker`.
                            if s.has_sleepers() && q.load(Ordering::SeqCst) > 0 {
                                s.notify_one();
                            }
                            *lock(&taken.0) += 1;
                            taken.1.notify_all();
                        }
                    })
                })
                .collect();
            for _ in 0..tasks {
                queue.fetch_add(1, Ordering::SeqCst);
                sleep.notify_one_unless_searching();
            }
            let mut n = lock(&taken.0);
            while *n < tasks {
                n = taken.1.wait(n).unwrap();
            }
            drop(n);
            sleep.shut_down();
            for h in handles {
                h.join().unwrap();
            }
        });
    }

    #[test]
    fn no_lost_wakeup_one_worker_unless_searching() {
        model_unless_searching(1, 2);
    }

    #[test]
    fn no_lost_wakeup_two_workers_unless_searching() {
        model_unless_searching(2, 2);
    }
}
