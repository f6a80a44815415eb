//! Idle workers: spin briefly, then park on a condition variable, with no
//! lost wake-ups. The protocol and why it is correct: `sleep/README.md`.

use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use crate::sched::{ReadyTask, WorkerQueue};
use crate::util::lock;

/// Pops attempted with a busy-wait hint before yielding the core.
const SPIN_ROUNDS: u32 = 64;
/// `yield_now` rounds before parking. Chosen so an idle worker gives up its
/// core after roughly 10–50 µs: long enough to catch the next task of a
/// pipelined submission, short enough not to starve device or MPI threads.
const YIELD_ROUNDS: u32 = 16;

pub(crate) struct Sleep {
    /// Protects the decision to park; held by a worker from announcing itself
    /// sleepy until `Condvar::wait` releases it.
    lock: Mutex<()>,
    cond: Condvar,
    /// Workers that announced they are about to park or are parked.
    /// Changed only under `lock`; read without it by pushers.
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
}

impl Sleep {
    pub(crate) fn new() -> Self {
        Sleep {
            lock: Mutex::new(()),
            cond: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Called by a thread after it made a task visible in a queue: wakes one
    /// parked worker if there is one. Step P2–P3 of the README.
    pub(crate) fn notify_one(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.cond.notify_one();
        }
    }

    /// Like `notify_one`, but wakes every parked worker: for pushes that
    /// target one worker's queue, which may be any of the sleepers.
    pub(crate) fn notify_all(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.cond.notify_all();
        }
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
        let _g = lock(&self.lock);
        self.cond.notify_all();
    }

    /// The idle path of a worker: returns the next task, or `None` when the
    /// runtime shuts down. Steps W1–W4 of the README.
    pub(crate) fn idle(&self, queue: &mut dyn WorkerQueue) -> Option<ReadyTask> {
        // W1: spin, then yield.
        for round in 0..SPIN_ROUNDS + YIELD_ROUNDS {
            if self.is_shutdown() {
                return None;
            }
            if let Some(t) = queue.pop() {
                return Some(t);
            }
            if round < SPIN_ROUNDS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // W2: announce, under the lock.
        let mut guard = lock(&self.lock);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        loop {
            // W3: re-check everything after announcing.
            if self.shutdown.load(Ordering::SeqCst) {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return None;
            }
            if let Some(t) = queue.pop() {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return Some(t);
            }
            // W4: park; `wait` releases the lock atomically.
            guard = self.cond.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}
