//! The receiving side of a numbered exchange with other ranks, shared by the halo exchange
//! (`super::halo`) and the task all-reduce (`super::allreduce`): the receiving task is
//! submitted *held*, each other rank's part comes in on the channel's callback, and the task
//! is released with every part once all have come and it has been submitted, whichever
//! happens last. Exchanges are numbered in submission order (the same on every rank), so a
//! part of a later exchange that comes early waits for its task.
//!
//! Both sides run under the owner's lock; the hold they return is released after it is
//! dropped (releasing may run the task's successors' bookkeeping).
//!
//! **Awaited exchanges.** Once this rank has sent its own part of an exchange
//! ([`Gather::sent`]) and some other rank's part is still missing, the exchange is *awaited*:
//! its reply is what this rank's next task waits for. The gather tells the transport
//! ([`Transport::awaiting`]) when an exchange becomes awaited and when its last part comes,
//! so a transport that polls for messages (MPI: `tessera_backends::mpi`) polls often while
//! a reply is awaited, and sleeps long only when nothing is.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use super::log::Tick;
use super::Transport;
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
    /// This rank sent its part while another's was missing: counted in the transport's
    /// awaited exchanges until the last part comes.
    awaited: bool,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending {
            parts: Vec::new(),
            hold: None,
            slot: None,
            posted: None,
            awaited: false,
        }
    }
}

/// The exchanges under way, by number.
pub(crate) struct Gather<T> {
    pending: HashMap<u64, Pending<T>>,
    /// Told when exchanges become awaited and when they stop being (see the module doc).
    transport: Arc<dyn Transport>,
    /// Every exchange numbered below this one has all its parts.
    complete_below: u64,
    /// Exchanges at or above `complete_below` that have all their parts.
    complete: BTreeSet<u64>,
}

impl<T> Gather<T> {
    /// No exchange under way yet; `transport` is told which are awaited.
    pub(crate) fn new(transport: Arc<dyn Transport>) -> Gather<T> {
        Gather {
            pending: HashMap::new(),
            transport,
            complete_below: 0,
            complete: BTreeSet::new(),
        }
    }

    /// Every part of exchange `seq` is here.
    fn completed(&mut self, seq: u64) {
        self.complete.insert(seq);
        while self.complete.remove(&self.complete_below) {
            self.complete_below += 1;
        }
    }

    /// This rank sent (one of) its part(s) of exchange `seq`, which has `expected` parts
    /// from other ranks: if one is still missing, the exchange becomes awaited.
    pub(crate) fn sent(&mut self, seq: u64, expected: usize) {
        if expected == 0 || seq < self.complete_below || self.complete.contains(&seq) {
            return;
        }
        let p = self.pending.entry(seq).or_default();
        if !p.awaited {
            p.awaited = true;
            self.transport.awaiting(1);
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
        if p.parts.len() < expected {
            return Ok((posted, None));
        }
        if std::mem::take(&mut p.awaited) {
            self.transport.awaiting(-1);
        }
        let posted_task = p.hold.is_some();
        self.completed(seq);
        if !posted_task {
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

#[cfg(test)]
mod tests {
    // Proves the awaited count the transport is told: an exchange is awaited from this
    // rank's send until its last part comes, once however many sends it has, and never
    // when every part came before the send.
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::dist::local::{self, Counting};

    #[test]
    fn an_exchange_is_awaited_from_its_send_to_its_last_part() {
        let t = Counting::new(local::world(1).remove(0));
        let mut g: Gather<u8> = Gather::new(Arc::clone(&t) as Arc<dyn Transport>);
        let count = || t.now.load(Ordering::SeqCst);
        // Sent first, then the one part: awaited in between.
        g.sent(0, 1);
        assert_eq!(count(), 1);
        assert!(g.arrive(0, 1, 0, 1).is_ok());
        assert_eq!(count(), 0);
        // Every part before the send: never awaited.
        assert!(g.arrive(1, 1, 0, 1).is_ok());
        g.sent(1, 1);
        assert_eq!(count(), 0);
        // Two sends and two parts (a halo with two neighbours): counted once, until the
        // second part.
        g.sent(2, 2);
        g.sent(2, 2);
        assert_eq!(count(), 1);
        assert!(g.arrive(2, 1, 0, 2).is_ok());
        assert_eq!(count(), 1);
        assert!(g.arrive(2, 2, 0, 2).is_ok());
        assert_eq!(count(), 0);
        // A rank that receives nothing awaits nothing; exchanges overlap.
        g.sent(3, 0);
        g.sent(4, 1);
        g.sent(5, 1);
        assert_eq!(count(), 2);
        assert!(g.arrive(5, 1, 0, 1).is_ok());
        assert!(g.arrive(4, 1, 0, 1).is_ok());
        assert_eq!(count(), 0);
    }
}
