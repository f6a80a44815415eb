//! The event queue and the loop that drains it: timed events (task ends,
//! message arrivals) taken earliest first, and the runtimes marked dirty
//! polled before each step.
//!
//! Invariants: events of one time are processed in the order they were
//! scheduled (`seq` breaks ties), so a run is deterministic and messages of
//! one pair arrive in sending order; the clock never goes back (an event is
//! never scheduled before `now`: every time here is `after` some start that
//! is at least `now`); no time passes [`CLOCK_LIMIT_NS`] (`after` saturates
//! and the run fails, naming the overflow).

use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::sync::Weak;

use super::workers::RtView;
use super::{Simulation, CLOCK_LIMIT_NS};
use crate::util::lock;

/// What happens at an event.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    /// Worker `worker` of the runtime in slot `slot` ends its task.
    TaskEnd { slot: usize, worker: usize },
    /// Message `id` (in `State::messages`) arrives.
    Message { id: u64 },
}

/// A timed event, ordered by its fields in turn: time, then scheduling
/// order (`seq` is unique, so `kind` never decides).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Event {
    time: u64,
    seq: u64,
    kind: Kind,
}

impl Simulation {
    /// Process events until none is left (a multi-rank run: every rank's
    /// tasks were started, this plays them all). `Err` if tasks are left
    /// unfinished when nothing more can happen: a program whose tasks wait
    /// for something no simulated rank does fails here rather than ending
    /// at simulated time 0.
    pub fn run(&self) -> Result<(), String> {
        self.run_until(&|| false, true)?;
        let left: Vec<String> = lock(&self.runtimes)
            .iter()
            .enumerate()
            .filter_map(|(slot, rt)| {
                let n = rt.upgrade()?.in_flight();
                (n > 0).then(|| format!("{n} on runtime {slot}"))
            })
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the simulation stalled at {:.6} s: no event is pending but tasks are unfinished ({}): they wait for data, a message or a hold that no simulated rank provides",
                self.now(),
                left.join(", ")
            ))
        }
    }

    /// Process events until `done()` holds. `Err` if nothing is left to
    /// happen and `done()` still does not hold (unless `drain`: then running
    /// out of events is the end).
    pub(crate) fn run_until(&self, done: &dyn Fn() -> bool, drain: bool) -> Result<(), String> {
        loop {
            self.poll_dirty();
            if done() {
                return Ok(());
            }
            if crate::runtime::all_interrupted() {
                // Ctrl-C: a long simulation stops as a real run does.
                return Err(format!(
                    "{} at {:.6} s of simulated time",
                    crate::runtime::INTERRUPTED,
                    self.now()
                ));
            }
            let batch = {
                let mut st = lock(&self.state);
                let Some(Reverse(first)) = st.events.pop() else {
                    if drain {
                        return Ok(());
                    }
                    return Err(format!(
                        "the simulation stalled at {:.6} s: no event is pending but the awaited tasks have not finished (a task waits for data, a message or a hold that never comes; in a multi-rank simulation, every rank's tasks must be submitted before any rank waits: see Simulation::run)",
                        self.now()
                    ));
                };
                let t = first.time;
                let mut batch = vec![first];
                while st.events.peek().is_some_and(|e| e.0.time == t) {
                    batch.push(st.events.pop().expect("peeked").0);
                }
                st.stats.events += batch.len() as u64;
                batch
            };
            self.now.store(batch[0].time, Ordering::Relaxed);
            for ev in batch {
                self.process(ev.kind);
            }
            if self.clock_overflow.load(Ordering::Relaxed) {
                return Err(format!(
                    "the simulated clock overflowed: an event fell more than {:.0} years after the start (the clock counts u64 nanoseconds); the platform's rates or times are absurd for this run",
                    CLOCK_LIMIT_NS as f64 * 1e-9 / (365.25 * 86_400.0)
                ));
            }
        }
    }

    /// The time `secs` seconds after `start` (ns), saturated at
    /// [`CLOCK_LIMIT_NS`] and noted ([`run_until`](Self::run_until) then
    /// fails): a plain cast and add would wrap, and a run of centuries
    /// would be reported as one of milliseconds.
    pub(super) fn after(&self, start: u64, secs: f64) -> u64 {
        let ns = (secs * 1e9).round();
        // A NaN fails both tests: it is an overflow too.
        if ns >= 0.0 && ns < CLOCK_LIMIT_NS.saturating_sub(start) as f64 {
            start + ns as u64
        } else if ns < 0.0 {
            start
        } else {
            self.clock_overflow.store(true, Ordering::Relaxed);
            CLOCK_LIMIT_NS
        }
    }

    /// Add an event at `time` (ns, not before now), after every event
    /// already scheduled for that time.
    pub(super) fn schedule(&self, time: u64, kind: Kind) {
        debug_assert!(time >= self.now_ns(), "an event before the clock");
        let mut st = lock(&self.state);
        let seq = st.seq;
        st.seq += 1;
        st.events.push(Reverse(Event { time, seq, kind }));
        let n = st.events.len();
        st.stats.peak_events = st.stats.peak_events.max(n);
    }

    fn process(&self, kind: Kind) {
        match kind {
            Kind::TaskEnd { slot, worker } => {
                let rt = lock(&self.runtimes).get(slot).and_then(Weak::upgrade);
                if let Some(shared) = rt {
                    RtView::new(self, &shared).end_task(worker);
                }
            }
            Kind::Message { id } => self.deliver(id),
        }
    }

    /// Poll the runtime in `slot` at the next step.
    pub(super) fn mark_dirty(&self, slot: usize) {
        lock(&self.dirty).push(slot);
    }

    /// Let the idle workers of every runtime marked dirty take tasks, until
    /// none is marked (a task started or ended may mark its runtime again).
    fn poll_dirty(&self) {
        loop {
            let slots = std::mem::take(&mut *lock(&self.dirty));
            if slots.is_empty() {
                return;
            }
            for slot in slots {
                let rt = lock(&self.runtimes).get(slot).and_then(Weak::upgrade);
                if let Some(shared) = rt {
                    RtView::new(self, &shared).poll();
                }
            }
        }
    }
}
