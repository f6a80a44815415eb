//! The receiving side of a numbered exchange with other ranks, shared by the halo exchange
//! (`super::halo`) and the task all-reduce (`super::allreduce`): the receiving task is
//! submitted *held*, each other rank's part comes in on the channel's callback, and the task
//! is released with every part once all have come and it has been submitted, whichever
//! happens last. Exchanges are numbered in submission order (the same on every rank), so a
//! part of a later exchange that comes early waits for its task.
//!
//! Both sides run under the owner's lock; the hold they return is released after it is
//! dropped (releasing may run the task's successors' bookkeeping).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::log::Tick;
use crate::runtime::Hold;
use crate::util::lock;

/// Parts of one exchange: (source rank, part), in arrival order.
pub(crate) type Parts<T> = Vec<(usize, T)>;

/// Parts of one exchange that came in, and what is waiting for them.
struct Pending<T> {
    parts: Parts<T>,
    /// The receiving task, once submitted: released when all parts are here.
    hold: Option<Hold>,
    /// The parts, handed to the receiving task when it is released.
    slot: Option<Arc<Mutex<Parts<T>>>>,
    /// When the receiving task was submitted (trace clock).
    posted: Option<Tick>,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending {
            parts: Vec::new(),
            hold: None,
            slot: None,
            posted: None,
        }
    }
}

/// The exchanges under way, by number.
pub(crate) struct Gather<T> {
    pending: HashMap<u64, Pending<T>>,
}

impl<T> Default for Gather<T> {
    fn default() -> Self {
        Gather {
            pending: HashMap::new(),
        }
    }
}

/// Rank `from` sent two parts of one exchange.
pub(crate) struct Duplicate;

impl<T> Gather<T> {
    /// Part `part` of exchange `seq` came from rank `from`; the exchange has `expected`
    /// parts. Returns when its receiving task was submitted (for the message log), and the
    /// task's hold when this was the last part it waited for.
    pub(crate) fn arrive(
        &mut self,
        seq: u64,
        from: usize,
        part: T,
        expected: usize,
    ) -> Result<(Option<Tick>, Option<Hold>), Duplicate> {
        let p = self.pending.entry(seq).or_default();
        if p.parts.iter().any(|(src, _)| *src == from) {
            return Err(Duplicate);
        }
        p.parts.push((from, part));
        let posted = p.posted;
        if p.parts.len() < expected || p.hold.is_none() {
            return Ok((posted, None));
        }
        let p = self.pending.remove(&seq).expect("present");
        *lock(p.slot.as_ref().expect("set with the hold")) = p.parts;
        Ok((posted, p.hold))
    }

    /// The receiving task of exchange `seq` was submitted, held by `hold`, at `now`; it
    /// takes the `expected` parts from `slot`. Returns the hold when every part is already
    /// here.
    pub(crate) fn post(
        &mut self,
        seq: u64,
        hold: Hold,
        slot: Arc<Mutex<Parts<T>>>,
        expected: usize,
        now: Option<Tick>,
    ) -> Option<Hold> {
        let p = self.pending.entry(seq).or_default();
        p.posted = now;
        if p.parts.len() == expected {
            let p = self.pending.remove(&seq).expect("present");
            *lock(&slot) = p.parts;
            return Some(hold);
        }
        p.hold = Some(hold);
        p.slot = Some(slot);
        None
    }
}
