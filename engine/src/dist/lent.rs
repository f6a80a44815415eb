//! Data sent from where it lies: a long data item's bytes lent to the
//! transport (MPI reads them straight out of the data's host value) instead
//! of copied into the message first.
//!
//! Why: a 1 MiB remote edge copied the value into its message, then MPI
//! copied the message into the receiver (one copy, `process_vm_readv`, on
//! this VM type). The sender's copy cost as much as MPI's: a chain of 1 MiB
//! edges ran at 2.1–2.7× MPI's latency with it, 1.4–1.5× without it
//! (`overhead-mpi`, the copy skipped in a throwaway build).
//!
//! Invariant: while a handle's bytes are lent (`HandleCore::lent` above 0),
//! nothing writes or frees its host value. A task that writes it, on any
//! memory node, waits before its body until they are returned
//! ([`before_writes`], on the worker; a write on a device would leave the
//! host copy to be overwritten by a later copy back), and so does
//! `unregister` before it gives the value back; a handle cannot be dropped
//! meanwhile (the loan holds it). The threads that must never wait for the
//! network (the routing thread, in `write_now`, the STF receive in place
//! and the receive it runs at once) check [`is_lent`] and take their other
//! way. No loan can start while such a writer runs: a loan is made by the
//! writer of the version sent (as it completes) or by a reader of it, which
//! the next writer follows.
//!
//! Lent only: one part (a `Vec`, a matrix: contiguous), at least
//! [`LEND_FROM`] bytes, on a transport that sends in place
//! ([`super::Transport::sends_in_place`]: MPI). Shorter items are copied:
//! the copy costs less than the loan's bookkeeping.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::access::AccessMode;
use crate::data::{AnyHandle, HandleCore};
use crate::memory::HOST;

/// The smallest data item lent instead of copied: 64 KiB.
pub(crate) const LEND_FROM: usize = 64 << 10;

/// Loans in flight in this process, all handles together: while 0 (every
/// run without MPI, and most of the time with it), a writing task checks
/// nothing else (one load of a line rarely written, instead of one of each
/// written handle's per task).
static LOANS: AtomicUsize = AtomicUsize::new(0);

/// A data item's bytes lent to a transport, which reads them where they
/// lie until it drops this (the send completed, or it was never posted).
/// Returned to the data when dropped.
pub struct Lent {
    ptr: *const u8,
    len: usize,
    handle: Arc<dyn AnyHandle>,
}

// SAFETY: `Lent` only reads the bytes it points to, which nothing writes or
// frees while it lives (the module invariant), from whichever thread holds it.
unsafe impl Send for Lent {}

impl Lent {
    /// The lent bytes. Valid as long as this `Lent`: MPI may read them after
    /// the call that returned the slice, until the `Lent` is dropped.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the module invariant keeps them valid and unchanged.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Bytes lent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none are (never: only items of at least 64 KiB are lent).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // Release: the transport's reads happen before a writer's writes
        // (`wait_returned` reads with Acquire).
        self.handle.core().lent.fetch_sub(1, Ordering::Release);
        LOANS.fetch_sub(1, Ordering::Release);
    }
}

/// Lend the host bytes of `handle` if they are one part of at least
/// [`LEND_FROM`] bytes; `None` otherwise (the caller copies them). The
/// caller makes sure no task writes the handle meanwhile (as for
/// `DataRef::pack`); once this returns, none can until the loan ends.
pub(crate) fn lend(handle: &Arc<dyn AnyHandle>) -> Result<Option<Lent>, String> {
    if handle.is_virtual() || (handle.bytes() as usize) < LEND_FROM {
        return Ok(None);
    }
    handle.acquire(handle, HOST, AccessMode::R, true)?;
    let mut lent = None;
    let out = handle.with_parts(&mut |parts| {
        if let [one] = parts {
            if one.len() >= LEND_FROM {
                // Counted before the acquire's pin is dropped, under the
                // caller's guarantee that no writer runs now.
                handle.core().lent.fetch_add(1, Ordering::AcqRel);
                LOANS.fetch_add(1, Ordering::AcqRel);
                lent = Some(Lent {
                    ptr: one.as_ptr(),
                    len: one.len(),
                    handle: Arc::clone(handle),
                });
            }
        }
    });
    handle.unpin(HOST, AccessMode::R);
    out.map(|()| lent)
}

/// Whether some of `core`'s bytes are lent now.
#[inline]
pub(crate) fn is_lent(core: &HandleCore) -> bool {
    core.lent.load(Ordering::Acquire) > 0
}

/// Networks whose transports hold lent bytes (registered at their first
/// loan): a thread waiting for a loan to end drives their sends, and stops
/// waiting once one was aborted.
static LENDERS: Mutex<Vec<Weak<dyn Lender>>> = Mutex::new(Vec::new());

/// What [`wait_returned`] needs of a network that lends.
pub(crate) trait Lender: Send + Sync {
    /// Complete what sends can be completed now, delivering nothing.
    fn progress_sends(&self);
    /// Whether the run was aborted (its sends may never complete).
    fn aborted(&self) -> bool;
}

/// Remember `lender` for [`wait_returned`] (once per network).
pub(crate) fn register(lender: Weak<dyn Lender>) {
    let mut l = crate::util::lock(&LENDERS);
    l.retain(|w| w.strong_count() > 0);
    l.push(lender);
}

/// Before a task's body: wait until no bytes of the data it writes are lent.
#[inline]
pub(crate) fn before_writes(accesses: &[crate::access::Access]) {
    if LOANS.load(Ordering::Acquire) == 0 {
        return;
    }
    for a in accesses.iter().filter(|a| a.mode.writes()) {
        wait_returned(a.core());
    }
}

/// Wait until every loan of `core`'s bytes has ended, driving the lending
/// networks' sends meanwhile, or until one of them was aborted (its sends
/// may never complete; the run fails anyway). Never call it on a thread
/// that may hold a transport's progress: the routing thread checks
/// [`is_lent`] instead.
#[inline]
pub(crate) fn wait_returned(core: &HandleCore) {
    if is_lent(core) {
        wait_slow(core);
    }
}

#[cold]
fn wait_slow(core: &HandleCore) {
    let mut polls = 0u32;
    while is_lent(core) {
        let lenders: Vec<Arc<dyn Lender>> = crate::util::lock(&LENDERS)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        if lenders.iter().any(|l| l.aborted()) {
            return;
        }
        lenders.iter().for_each(|l| l.progress_sends());
        drop(lenders);
        if polls >= 4096 {
            // A slow receiver: sleep instead of taking a core from it.
            std::thread::sleep(std::time::Duration::from_micros(50));
        } else {
            crate::watch::pause(&mut polls);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves the loan's invariant without a transport: while a handle's
    //! bytes are lent, a task writing it does not start, `write_now`
    //! declines, and `unregister` does not give the value back; each goes
    //! ahead once the loan ends. Short values and values of two parts are
    //! never lent.
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::*;
    use crate::dist::DataRef;
    use crate::{Codelet, Runtime, Write};

    /// Long enough to be lent.
    const LONG: usize = LEND_FROM + 3;

    #[test]
    fn lent_bytes_are_not_written_or_given_back_until_returned() {
        let rt = Runtime::with_workers(2).unwrap();
        let h = rt.register_replicable(vec![1u8; LONG]);
        let d = DataRef::of(&h);
        let lent = lend(&d.handle).unwrap().expect("long enough");
        assert_eq!((lent.len(), lent.bytes()[LONG - 1]), (LONG, 1));
        assert!(is_lent(d.handle.core()));

        let wrote = std::sync::Arc::new(AtomicBool::new(false));
        let wrote2 = std::sync::Arc::clone(&wrote);
        let set: Codelet<Write<Vec<u8>>> = Codelet::new("set").cpu(move |_, _, v: &mut Vec<u8>| {
            v.fill(2);
            wrote2.store(true, Ordering::SeqCst);
            Ok(())
        });
        rt.task(&set, h.w()).submit().unwrap();
        // SAFETY: `write_now` runs it only while no task uses the data.
        let put = || {
            rt.submitter()
                .write_now(&d.handle, || unsafe { d.unpack(&[3; LONG]) })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !wrote.load(Ordering::SeqCst),
            "a writer started on lent bytes"
        );
        assert!(
            lent.bytes().iter().all(|&b| b == 1),
            "the lent bytes changed"
        );
        drop(lent);
        rt.wait_all().unwrap();
        assert!(wrote.load(Ordering::SeqCst));
        assert_eq!(put(), Some(Ok(())), "returned: nothing uses the data");

        // `write_now` declines lent bytes; `unregister` waits for them.
        let lent = lend(&d.handle).unwrap().expect("long enough");
        assert_eq!(put(), None, "write_now on lent bytes");
        let back = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(lent);
        });
        let started = std::time::Instant::now();
        drop(d);
        let v = rt.unregister(h).unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "unregister did not wait"
        );
        assert!(v.iter().all(|&b| b == 3));
        back.join().unwrap();
    }

    #[test]
    fn short_values_and_values_of_two_parts_are_not_lent() {
        let rt = Runtime::with_workers(1).unwrap();
        let short = rt.register_replicable(vec![0u8; LEND_FROM - 1]);
        assert!(lend(&DataRef::of(&short).handle).unwrap().is_none());
        let two = rt.register_replicable(TwoVecs(vec![0; LONG], vec![0; LONG]));
        assert!(lend(&DataRef::of(&two).handle).unwrap().is_none());
    }

    /// A value of two parts.
    struct TwoVecs(Vec<u8>, Vec<u8>);

    impl crate::memory::Replicate for TwoVecs {
        fn bytes(&self) -> usize {
            self.0.len() + self.1.len()
        }
        fn replicate(&self) -> Self {
            TwoVecs(self.0.clone(), self.1.clone())
        }
        fn copy_from(&mut self, src: &Self) {
            self.0.copy_from_slice(&src.0);
            self.1.copy_from_slice(&src.1);
        }
        fn parts(&self) -> Option<Vec<&[u8]>> {
            Some(vec![&self.0, &self.1])
        }
        fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
            Some(vec![&mut self.0, &mut self.1])
        }
    }
}
