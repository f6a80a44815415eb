//! The submission window ([`Config::submit_window`](crate::Config::submit_window)):
//! how far a thread that submits tasks, and is not one of the runtime's workers,
//! may run ahead of them.
//!
//! Checked at every [`WINDOW_CHECK`]th submission (the count of finished tasks
//! is on the workers' cache line), with two bounds:
//! - **The window** (`limit`, default 8192 tasks in flight): memory. A
//!   submitter that reaches it waits until half of them have finished.
//! - **A quarter of it, for fine-grained tasks.** When a worker's tasks take
//!   less than [`FINE_TASK`] each (their body and the runtime's own part),
//!   a deeper window finds no more parallelism worth having, and costs: each
//!   task's node and parts, written at submission, are read back by its
//!   worker thousands of tasks later, from memory instead of cache, and a
//!   distributed runtime's table of pending receives grows with it. A
//!   submitter there waits until a sixteenth of the window is left. Task
//!   Bench's `stencil_1d` on 2 ranks (`DistRuntime`, each rank on one core,
//!   where the submitting thread shares the core with the worker; tasks of
//!   about 7 µs) ran faster with 2048 tasks in flight than with 8192, while
//!   a one-process run did not change (the CHANGELOG has the figures).
//!   Coarse tasks (an LU's tiles, whose depth of submission is the LU's
//!   lookahead) keep the whole window: 1024 tasks in flight cost the
//!   one-process LU at N = 8192 5 % of its speed.
//!
//! And a submitter with a sixteenth of the window in flight (512 tasks by
//! default) or more yields its core at each check: the tasks it submits now
//! are not needed soon, and a worker that shares its core (a rank of a
//! distributed run on one core, or more threads than cores) gets the core
//! back within [`WINDOW_CHECK`] submissions instead of a scheduler time
//! slice, milliseconds during which the other ranks wait for this rank's
//! messages. Task Bench's STF `stencil_1d` on 2 ranks ran 8–18 % faster per
//! run (medians of alternated runs, 11–15 each, `-iter` 1024 and 2048); in
//! one process, where the submitter has fewer tasks ahead, it did not change
//! (37.8 against 39.7 ms), while yielding at every check whatever the tasks
//! in flight cost it 21 % (48.1 ms: the workers wait for the submitter
//! there).
//!
//! A task's time is measured while a submitter waits here: the tasks that
//! finish during the wait, over its length, times the workers. Not while it
//! submits: on a core it shares with a worker, the submitter runs alone for
//! milliseconds and nothing finishes (a rate measured then read 0 tasks a
//! second). Until a wait has measured, tasks count as fine: a program's
//! first wait comes at the quarter, and coarse tasks get the whole window
//! from the next check on. Every wait measures again (a program whose tasks
//! grow gets the whole window back after its next wait).
//!
//! Neither bound ever blocks a program for good: when no task finishes for
//! [`WINDOW_STALL`] while a submitter waits (tasks waiting for something the
//! program has yet to do, such as a message or a channel send), it goes on,
//! and the window holds nobody until a task finishes again (a program that
//! submits 200 000 tasks behind a gate it opens later loses one stall, not one
//! per check). Task bodies and the runtime's own threads never wait.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Shared;
use crate::util::lock;

/// Completions per thread between two window checks, above
/// `SAMPLED_ABOVE` (see `Window::wakes`).
const SAMPLE: u64 = 16;
/// Targets from which the window checks at one completion in `SAMPLE`.
const SAMPLED_ABOVE: u64 = 256;

/// A submitter waiting for the window goes on when no task has finished for
/// this long.
const WINDOW_STALL: Duration = Duration::from_millis(20);

/// The window is checked at every this many submissions.
pub(super) const WINDOW_CHECK: u64 = 64;

/// Tasks are fine-grained when a worker takes less than this for each (at
/// that size the runtime's own part of a task, 1–3 µs, is a tenth of it or
/// more).
pub(super) const FINE_TASK: Duration = Duration::from_micros(20);

/// A wait measures the tasks' time only when it lasted at least this long.
const MEASURED_WAIT: Duration = Duration::from_micros(500);

/// The fine-grained bound is this fraction of the window...
const FINE_SHARE: u64 = 4;

/// ...and a submitter it holds waits until this fraction is left: a
/// wait's sleep and wake-up are shared by three quarters of the bound's
/// tasks (draining to half of it, the submitter slept twice as often, and
/// `tessera overhead`'s independent empty tasks took 4 % longer).
const FINE_DRAIN: u64 = 16;

/// Whether tasks taking `task_time` each on a worker are fine-grained;
/// `None` (not measured yet) counts as fine, so that the first wait, which
/// measures, comes at the quarter.
pub(super) fn fine_grained(task_time: Option<Duration>) -> bool {
    task_time.is_none_or(|t| t < FINE_TASK)
}

/// A runtime's submission window: its bounds and the submitters held by it.
pub(crate) struct Window {
    /// `Config::submit_window` (0: none).
    limit: u64,
    /// Submitters waiting for the tasks in flight to drain to `target`.
    waiters: AtomicUsize,
    /// In flight at which the completion that gets there notifies the
    /// waiters (stored before a waiter counts itself in `waiters`).
    target: AtomicU64,
    /// Waits that ended because no task finished for [`WINDOW_STALL`] (the
    /// submitter then went on).
    stalls: AtomicU64,
    /// Waits at the fine-grained bound.
    fine_waits: AtomicU64,
    /// Checks at which the submitter yielded its core.
    yields: AtomicU64,
    /// `finished` when the last stalled wait ended (`u64::MAX`: none): until
    /// a task finishes again, the window holds nobody.
    stalled_at: AtomicU64,
    /// A worker's time per task as the last measuring wait saw it, in
    /// nanoseconds (`u64::MAX`: not measured).
    task_ns: AtomicU64,
}

impl Window {
    /// A window of `limit` tasks in flight (0: none).
    pub(super) fn new(limit: u64) -> Window {
        Window {
            limit,
            waiters: AtomicUsize::new(0),
            target: AtomicU64::new(limit / 2),
            stalls: AtomicU64::new(0),
            fine_waits: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            stalled_at: AtomicU64::new(u64::MAX),
            task_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// Whether a completion must wake the submitters waiting here, with
    /// `in_flight` the tasks left in flight; `finished_here` counts the
    /// completing thread's completions. SeqCst, as the waiter's side.
    ///
    /// Above a target of `SAMPLED_ABOVE`, a thread checks at one completion
    /// in `SAMPLE` only: reading the count in flight sums every thread's
    /// counts (`crate::counter::Sharded`), whose lines then move between
    /// the cores, and a waiter draining thousands of tasks is woken at most
    /// `SAMPLE` completions per worker late. A worker that runs out of
    /// tasks checks too (`Shared::notify_drained`).
    #[inline]
    pub(super) fn wakes(&self, finished_here: u64, in_flight: impl FnOnce() -> u64) -> bool {
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let target = self.target.load(Ordering::SeqCst);
        (target < SAMPLED_ABOVE || finished_here.is_multiple_of(SAMPLE)) && in_flight() <= target
    }

    /// Waits that ended because nothing finished for [`WINDOW_STALL`].
    #[cfg(test)]
    pub(super) fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// Waits at the fine-grained bound.
    #[cfg(test)]
    pub(super) fn fine_waits(&self) -> u64 {
        self.fine_waits.load(Ordering::Relaxed)
    }

    /// Checks at which the submitter yielded its core.
    #[cfg(test)]
    pub(super) fn yields(&self) -> u64 {
        self.yields.load(Ordering::Relaxed)
    }

    /// A worker's time per task, as last measured.
    fn task_time(&self) -> Option<Duration> {
        match self.task_ns.load(Ordering::Relaxed) {
            u64::MAX => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }
}

impl Shared {
    /// Yield the core, or wait, if this thread is a submitter far enough
    /// ahead (see the module doc).
    pub(super) fn throttle(&self) {
        let w = &self.window;
        // This thread's count (`Sharded::here`): a submitter alone on its
        // shard checks every WINDOW_CHECK submissions, as before.
        if w.limit == 0 || !self.submitted.here().is_multiple_of(WINDOW_CHECK) {
            return;
        }
        let in_flight = self.in_flight() as u64;
        if in_flight < w.limit / FINE_DRAIN || crate::worker::current(self.id).is_some() {
            return;
        }
        // Far enough ahead that its next tasks are not needed soon: let a
        // worker that shares this core have it now (see the module doc).
        w.yields.fetch_add(1, Ordering::Relaxed);
        crate::sync::yield_now();
        if in_flight < w.limit / FINE_SHARE
            || self.finished.sum_ordered() == w.stalled_at.load(Ordering::Relaxed)
        {
            return;
        }
        let target = if in_flight >= w.limit {
            w.limit / 2
        } else if fine_grained(w.task_time()) {
            w.fine_waits.fetch_add(1, Ordering::Relaxed);
            w.limit / FINE_DRAIN
        } else {
            return;
        };
        self.wait_window(target);
    }

    /// Block until at most `target` tasks are in flight, or until no task
    /// has finished for [`WINDOW_STALL`]; then record a worker's time per
    /// task over the wait.
    fn wait_window(&self, target: u64) {
        let w = &self.window;
        // Stored before this waiter counts: a completer that sees the count
        // sees the target. Several submitters waiting at once share one (the
        // last stored); one woken at another's target waits again, and one
        // not woken at its own sees the drain within WINDOW_STALL.
        w.target.store(target, Ordering::SeqCst);
        w.waiters.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        let first = self.finished.sum_ordered();
        let mut guard = lock(&self.wait_lock);
        let mut seen = first;
        // SeqCst on both sides, as in `wait_until`: either this check sees
        // the completions, or the completer sees this waiter.
        while self.in_flight() as u64 > target {
            let (g, timeout) = self
                .wait_cond
                .wait_timeout(guard, WINDOW_STALL)
                .unwrap_or_else(|e| e.into_inner());
            guard = g;
            let now = self.finished.sum_ordered();
            if timeout.timed_out() && now == seen {
                w.stalls.fetch_add(1, Ordering::Relaxed);
                w.stalled_at.store(now, Ordering::Relaxed);
                break;
            }
            seen = now;
        }
        drop(guard);
        w.waiters.fetch_sub(1, Ordering::SeqCst);
        let took = start.elapsed();
        let done = self.finished.sum_ordered().saturating_sub(first);
        if took >= MEASURED_WAIT && done > 0 {
            let workers = self.kinds.len().max(1) as u128;
            let ns = took.as_nanos() * workers / u128::from(done);
            w.task_ns
                .store(u64::try_from(ns).unwrap_or(u64::MAX - 1), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The window's decisions: fine-grained from a measured task time, and,
    //! on a runtime, that a submitter yields only when far ahead, and that
    //! the window holds a flow of short tasks at a quarter of itself while
    //! long ones get the whole of it (the durations are chosen
    //! 3× or more away from the threshold, and the sleeps make the long
    //! ones' time certain).
    use std::time::Duration;

    use super::*;
    use crate::codelet::Codelet;
    use crate::{Config, Runtime};

    #[test]
    fn fine_means_under_the_threshold_once_measured() {
        let us = Duration::from_micros;
        assert!(fine_grained(Some(us(19))));
        assert!(!fine_grained(Some(FINE_TASK)));
        assert!(!fine_grained(Some(us(21))));
        assert!(
            fine_grained(None),
            "not measured yet: the first wait measures"
        );
    }

    /// Submit `n` tasks that each take `body` to a runtime of one worker
    /// and a window of `limit`; the most in flight at once seen by the
    /// submitter, and the runtime.
    fn flow(limit: usize, n: usize, body: fn()) -> (usize, Runtime) {
        let rt = Runtime::new(Config::with_workers(1).submit_window(limit)).unwrap();
        let cl: Codelet<()> = Codelet::new("t");
        let mut most = 0;
        for _ in 0..n {
            rt.task(&cl, ())
                .cpu(move |()| {
                    body();
                    Ok(())
                })
                .submit()
                .unwrap();
            most = most.max(rt.tasks_in_flight());
        }
        rt.wait_all().unwrap();
        (most, rt)
    }

    fn spin_4us() {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(4) {}
    }

    #[test]
    fn a_submitter_yields_only_when_far_ahead() {
        // Hundreds of 4 µs tasks in flight: it yields.
        let (_, rt) = flow(1024, 5_000, spin_4us);
        assert!(rt.shared.window.yields() > 0);
        // Each task waited for before the next: never ahead, never yields.
        let rt = Runtime::new(Config::with_workers(1).submit_window(1024)).unwrap();
        let cl: Codelet<()> = Codelet::new("t");
        for _ in 0..1000 {
            let t = rt.task(&cl, ()).cpu(|()| Ok(())).submit().unwrap();
            rt.wait(&t).unwrap();
        }
        assert_eq!(rt.shared.window.yields(), 0);
    }

    #[test]
    fn short_tasks_are_held_at_a_quarter_of_the_window() {
        // Tasks of 4 µs (and the runtime's part): slower than their
        // submission, so the submitter gets ahead, and 3x or more under
        // FINE_TASK. Asserted: the fine bound held the submitter (a wait
        // during which the worker was descheduled measures a longer time
        // and lets the submitter on to the window once more, so the count
        // of holds is what is checked, not a maximum).
        let (most, rt) = flow(1024, 20_000, spin_4us);
        let w = &rt.shared.window;
        assert!(
            w.fine_waits() > 0,
            "never held at the fine bound ({most} in flight at most)"
        );
        assert!(most <= 1024 + WINDOW_CHECK as usize || w.stalls() > 0);
    }

    #[test]
    fn long_tasks_get_the_whole_window() {
        // 1 ms sleeps: 50x FINE_TASK at least, never fine. The window itself
        // still bounds them (checked every WINDOW_CHECK submissions; a wait
        // that ended as a stall lets one more batch in).
        let (most, rt) = flow(256, 400, || std::thread::sleep(Duration::from_millis(1)));
        let w = &rt.shared.window;
        // The first wait, before any measure, is at the quarter.
        assert_eq!(w.fine_waits(), 1);
        assert!(most >= 256, "the submitter stopped at {most} in flight");
        assert!(
            most <= 256 + WINDOW_CHECK as usize || w.stalls() > 0,
            "{most} tasks in flight under a window of 256"
        );
    }
}
