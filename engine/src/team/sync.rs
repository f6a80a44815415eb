//! The synchronisation a team's members share: a barrier, a double-buffered
//! all-reduce, and the failure flag that releases every waiting member.
//!
//! Waiting backs off as the sleep protocol's idle path does (spin, then
//! yield, then park), so a team on an oversubscribed machine (ranks sharing
//! cores) gives its cores away instead of burning them. Why no wake-up is
//! lost: `README.md` beside this file.

use std::any::Any;

use crate::sync::{fence, lock, yield_now, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

/// Busy-wait rounds before yielding, and yields before parking. A team's
/// members run on distinct cores and reach each barrier within microseconds
/// of each other (the panel's leaf step is a few µs of work): spinning
/// catches that; parking after ~10–50 µs keeps an oversubscribed rank from
/// starving the others.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 256;
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 16;
// Under loom every round multiplies the explored interleavings; one yield
// keeps the spin phase in the model (as in `crate::sleep`).
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 1;

/// The payload a member's wait panics with when another member failed: the
/// member unwinds out of the shared closure, and the team reports the first
/// failure, not this one.
#[derive(Debug)]
pub(crate) struct TeamAborted;

/// Wait until `ready()` holds, spinning, then yielding, then parking on
/// `park` (whose waiters are counted in `sleepers`; a waker that changes
/// what `ready` reads must then call [`wake_all`]). A store-buffering pair
/// closed by two SeqCst fences, as the sleep protocol's W2/P2: a waiter
/// stores `sleepers`, fences, then reads `ready`'s state; a waker stores
/// that state, fences, then reads `sleepers`: one of them sees the other,
/// and the waker takes `park`'s lock, which the waiter holds until
/// `Condvar::wait` releases it. (SeqCst accesses alone would do in C11, but
/// loom models them as AcqRel and cannot check that; the fences are what
/// `loom_tests.rs` checks, at the cost of one `mfence` per wake on x86.)
pub(crate) fn wait_until(
    ready: impl Fn() -> bool,
    park: &(Mutex<()>, Condvar),
    sleepers: &AtomicUsize,
) {
    for round in 0..SPIN_ROUNDS + YIELD_ROUNDS {
        if ready() {
            return;
        }
        if round < SPIN_ROUNDS {
            std::hint::spin_loop();
        } else {
            yield_now();
        }
    }
    let mut g = lock(&park.0);
    sleepers.fetch_add(1, Ordering::SeqCst);
    // Pairs with `wake_all`'s fence.
    fence(Ordering::SeqCst);
    while !ready() {
        g = park.1.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    sleepers.fetch_sub(1, Ordering::SeqCst);
}

/// Wake every thread parked in [`wait_until`] on `park`, after the state its
/// `ready` reads was changed (with a SeqCst store).
pub(crate) fn wake_all(park: &(Mutex<()>, Condvar), sleepers: &AtomicUsize) {
    // Pairs with `wait_until`'s fence: orders the caller's store of the
    // state before this read of `sleepers`.
    fence(Ordering::SeqCst);
    if sleepers.load(Ordering::SeqCst) > 0 {
        let _g = lock(&park.0);
        park.1.notify_all();
    }
}

/// One member's contribution to an all-reduce (type-erased).
type Slot = Mutex<Option<Box<dyn Any + Send>>>;

/// What the members of one team synchronise through.
pub(crate) struct TeamSync {
    size: usize,
    /// Members arrived at the current barrier.
    arrived: AtomicUsize,
    /// Barriers completed; a member waits for it to change.
    generation: AtomicUsize,
    /// Set when a member failed: every wait returns by panicking with
    /// [`TeamAborted`].
    aborted: AtomicBool,
    /// The first failure's message.
    failure: Mutex<Option<String>>,
    /// All-reduce contributions, two sets used alternately (see `all_reduce`).
    slots: [Box<[Slot]>; 2],
    park: (Mutex<()>, Condvar),
    sleepers: AtomicUsize,
}

impl TeamSync {
    pub(crate) fn new(size: usize) -> TeamSync {
        assert!(size >= 1, "a team has at least one member");
        let slots = || (0..size).map(|_| Mutex::new(None)).collect();
        TeamSync {
            size,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
            failure: Mutex::new(None),
            slots: [slots(), slots()],
            park: (Mutex::new(()), Condvar::new()),
            sleepers: AtomicUsize::new(0),
        }
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Block until every member has called `barrier` as often as this one.
    ///
    /// # Panics
    /// With [`TeamAborted`] when another member failed.
    pub(crate) fn barrier(&self) {
        self.check();
        if self.size == 1 {
            return;
        }
        // Read before arriving: the last arriver bumps it only after every
        // member (this one included) arrived.
        let gen = self.generation.load(Ordering::SeqCst);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            // Reset before the release: a member that sees the new
            // generation may arrive at the next barrier at once.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.store(gen.wrapping_add(1), Ordering::SeqCst);
            wake_all(&self.park, &self.sleepers);
            return;
        }
        wait_until(
            || self.generation.load(Ordering::SeqCst) != gen || self.aborted.load(Ordering::SeqCst),
            &self.park,
            &self.sleepers,
        );
        self.check();
    }

    /// Every member's `value`, combined in rank order
    /// (`combine(combine(v0, v1), v2)…`), returned to every member.
    ///
    /// Two slot sets used alternately need one barrier per reduction: a
    /// member writes set `p` of reduction `r` only after the barrier of
    /// reduction `r − 1`, which every member passes only after reading set
    /// `p` of reduction `r − 2`.
    pub(crate) fn all_reduce<T: Clone + Send + 'static>(
        &self,
        parity: usize,
        rank: usize,
        value: T,
        combine: impl Fn(T, T) -> T,
    ) -> T {
        if self.size == 1 {
            self.check();
            return value;
        }
        let set = &self.slots[parity & 1];
        *lock(&set[rank]) = Some(Box::new(value));
        self.barrier();
        let take = |r: usize| -> T {
            lock(&set[r])
                .as_ref()
                .and_then(|b| b.downcast_ref::<T>())
                .cloned()
                .expect("every member contributed a value of the same type")
        };
        (1..self.size).fold(take(0), |acc, r| combine(acc, take(r)))
    }

    /// Record a member's failure and release every waiting member.
    pub(crate) fn abort(&self, message: String) {
        lock(&self.failure).get_or_insert(message);
        self.aborted.store(true, Ordering::SeqCst);
        wake_all(&self.park, &self.sleepers);
    }

    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// The first failure, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    fn check(&self) {
        if self.aborted.load(Ordering::SeqCst) {
            std::panic::resume_unwind(Box::new(TeamAborted));
        }
    }
}
