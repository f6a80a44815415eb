//! Idle workers watching the network: a rank's runtime whose transport can
//! be polled from any thread (MPI: [`Transport::polled`]) lets one idle CPU
//! worker at a time poll it instead of sleeping, while a message is
//! expected. A message then reaches the task it releases on that worker,
//! with no wake-up of the transport's thread and no hand-over between
//! threads; the transport's own thread naps while a worker watches.
//!
//! Invariants:
//! - at most one worker watches at a time (`watcher`): on oversubscribed
//!   cores a second polling worker would take a core from the ranks that
//!   compute;
//! - a watcher polls only from its idle path (no body runs, no lock held),
//!   so the messages it delivers may run any routing callback;
//! - a worker stops watching as soon as it takes a task, or when nothing is
//!   expected ([`Transport::expecting`]); then it parks as usual, and the
//!   transport's thread is the one that makes progress.
//!
//! A busy worker also polls, between two of its tasks, at most every
//! [`BETWEEN_TASKS`], without taking the role ([`Watch::poll_between`]),
//! so the transport's thread is needed only under tasks longer than that.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};

use crate::dist::Transport;

/// What an idle worker's poll found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Activity {
    /// Messages moved: a task may have become ready.
    Progress,
    /// Nothing now, but a message is expected: keep polling.
    Awaiting,
    /// Nothing expected (or another worker watches): sleep as usual.
    Idle,
}

/// How often, at most, a busy worker polls a watched network between two
/// of its tasks (`Watch::poll_between`): a poll costs a pass through the
/// transport (an `MPI_Test`, a few tenths of a microsecond), so tasks
/// shorter than this are not each followed by one.
pub(crate) const BETWEEN_TASKS: std::time::Duration = std::time::Duration::from_micros(50);

/// Polls of a watched network between two yields of the polling thread.
const WATCH_SPINS: u32 = 32;

/// The pause between two polls of a watched network that found nothing,
/// `polls` counting them: a spin, and one `yield_now` in [`WATCH_SPINS`]. A
/// yield per poll cost a system call (and often a switch) per round,
/// microseconds of a remote edge's latency; the occasional one still lets an
/// oversubscribed core's other threads run. Idle workers and blocking
/// collectives pause alike.
pub(crate) fn pause(polls: &mut u32) {
    *polls = polls.wrapping_add(1);
    if polls.is_multiple_of(WATCH_SPINS) {
        crate::sync::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A runtime's end of the watch (in `Shared`).
#[derive(Default)]
pub(crate) struct Watch {
    /// Whether `transport` is set: read by every idle worker before taking the lock.
    set: AtomicBool,
    transport: RwLock<Option<Weak<dyn Transport>>>,
    /// Whether a worker watches now.
    watcher: AtomicBool,
}

impl Watch {
    /// Let idle workers poll `transport` (if it can be polled).
    pub(crate) fn set(&self, transport: &Arc<dyn Transport>) {
        if !transport.polled() {
            return;
        }
        let same = |w: &Option<Weak<dyn Transport>>| {
            w.as_ref()
                .and_then(Weak::upgrade)
                .is_some_and(|t| Arc::ptr_eq(&t, transport))
        };
        if same(&self.transport.read().unwrap_or_else(|e| e.into_inner())) {
            return;
        }
        *self.transport.write().unwrap_or_else(|e| e.into_inner()) =
            Some(Arc::downgrade(transport));
        self.set.store(true, Ordering::Release);
    }

    /// Poll once as the watcher, claiming the role if nobody has it.
    /// `watching` is the caller's record of holding it: the transport it
    /// watches, kept between polls (no lock or reference count per poll).
    pub(crate) fn poll(&self, watching: &mut Watching) -> Activity {
        if watching.is_none() {
            if !self.set.load(Ordering::Acquire)
                || self
                    .watcher
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                return Activity::Idle;
            }
            match self.transport() {
                Some(t) => *watching = Some(t),
                None => {
                    self.watcher.store(false, Ordering::Release);
                    return Activity::Idle;
                }
            }
        }
        let activity = match watching {
            Some(t) if t.poll() => Activity::Progress,
            Some(t) if t.expecting() => Activity::Awaiting,
            _ => Activity::Idle,
        };
        if activity == Activity::Idle {
            self.leave(watching);
        }
        activity
    }

    /// One poll by a busy worker between two of its tasks, without taking
    /// the watcher role (an idle worker may claim it meanwhile): nothing
    /// when no network is set or a worker watches (that one polls).
    /// Returns whether messages moved.
    pub(crate) fn poll_between(&self) -> bool {
        if !self.set.load(Ordering::Acquire) || self.watcher.load(Ordering::Relaxed) {
            return false;
        }
        self.transport().is_some_and(|t| t.poll())
    }

    /// The watched transport, while it is alive.
    fn transport(&self) -> Option<Arc<dyn Transport>> {
        self.transport
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Whether a network is set (a cheap check before [`poll_between`](Self::poll_between)).
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Relaxed)
    }

    /// Give the role up if `watching` says the caller holds it.
    pub(crate) fn leave(&self, watching: &mut Watching) {
        if watching.take().is_some() {
            self.watcher.store(false, Ordering::Release);
        }
    }
}

/// A worker's record of the watcher role: the transport it watches, while
/// it holds the role.
pub(crate) type Watching = Option<Arc<dyn Transport>>;

#[cfg(test)]
mod tests {
    //! Proves the watcher role is held by one caller at a time, kept while
    //! messages are expected, and given up when nothing is.
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// A transport whose poll does `work` rounds of progress, then expects
    /// messages while `expect` is set.
    #[derive(Default)]
    struct Fake {
        work: AtomicUsize,
        expect: AtomicBool,
    }

    impl Transport for Fake {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            1
        }
        fn send(&self, _: usize, _: Vec<u8>) {}
        fn recv(&self, _: Duration) -> Option<(usize, Vec<u8>)> {
            None
        }
        fn pending_sends(&self) -> usize {
            0
        }
        fn poll(&self) -> bool {
            self.work
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| w.checked_sub(1))
                .is_ok()
        }
        fn polled(&self) -> bool {
            true
        }
        fn expecting(&self) -> bool {
            self.expect.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn one_watcher_at_a_time() {
        let fake = Arc::new(Fake::default());
        fake.work.store(1, Ordering::SeqCst);
        fake.expect.store(true, Ordering::SeqCst);
        let t: Arc<dyn Transport> = fake.clone();
        let w = Watch::default();
        w.set(&t);
        let (mut a, mut b): (Watching, Watching) = (None, None);
        assert_eq!(
            w.poll(&mut b),
            Activity::Progress,
            "nobody watched: b claims"
        );
        assert_eq!(w.poll(&mut a), Activity::Idle, "b holds the role");
        assert!(b.is_some() && a.is_none());
        assert_eq!(w.poll(&mut b), Activity::Awaiting);
        w.leave(&mut b);
        assert_eq!(w.poll(&mut a), Activity::Awaiting, "the role is free again");
        fake.expect.store(false, Ordering::SeqCst);
        assert_eq!(w.poll(&mut a), Activity::Idle);
        assert!(a.is_none(), "nothing expected: the role is given up");
        assert_eq!(
            w.poll(&mut b),
            Activity::Idle,
            "and anyone may take it again"
        );
        drop(t);
    }

    #[test]
    fn unset_or_dropped_transport_is_idle() {
        let w = Watch::default();
        let mut me: Watching = None;
        assert_eq!(w.poll(&mut me), Activity::Idle);
        let t: Arc<dyn Transport> = Arc::new(Fake::default());
        w.set(&t);
        drop(t);
        assert_eq!(w.poll(&mut me), Activity::Idle);
        assert!(me.is_none());
        let t: Arc<dyn Transport> = Arc::new(Fake::default());
        w.set(&t);
        assert_eq!(w.poll(&mut me), Activity::Idle, "nothing expected");
        assert!(
            me.is_none(),
            "and the role was given back: {}",
            w.watcher.load(Ordering::SeqCst)
        );
        assert!(!w.watcher.load(Ordering::SeqCst));
    }
}
