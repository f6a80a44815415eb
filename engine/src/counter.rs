//! Counts that every worker adds to at every task and that few read: kept
//! per thread, so no cache line moves between the cores at each addition.
//!
//! A counter one atomic holds, written by two workers, moves its line from
//! one core to the other at every task: in a 2-worker symbolic run of empty
//! tasks (`taskbench --frontend symbolic -type no_comm`, each worker making
//! and running its own chain) the workers ran no faster together than one
//! alone, and the locked additions on such lines were a third of
//! `submit_inner`'s samples (`perf record -e cpu-clock`, `perf annotate`).
//!
//! - [`Sharded`]: a sum over per-thread shards (a thread adds to its own;
//!   a reader adds the shards up). Relaxed for counts read as hints or once
//!   at the end (flops done, tasks made); SeqCst for the tasks submitted and
//!   finished (`runtime/shared.rs` says how a waiter sees them reach zero).
//! - [`Ids`]: unique numbers handed out in blocks, one block per thread at a
//!   time (task ids).
//!
//! Why by hand: `crossbeam_utils` has the padding but no sharded counter,
//! and the crates that have one (per-CPU counters) key shards by the CPU a
//! thread last ran on, a system call or an instruction this code does not
//! need: a thread keeps the shard it was given.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Shards of a [`Sharded`]: threads get them in turn, so up to this many
/// threads (a runtime's workers, its submitter) never share one.
const SHARDS: usize = 8;

/// The shard the calling thread adds to (given at its first addition).
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    // A thread whose locals are being destroyed shares shard 0.
    SHARD.try_with(|s| *s).unwrap_or(0)
}

/// A count added to by many threads: one atomic per shard, each on a line
/// of its own. Additions are Relaxed: read it for a hint, or after
/// something else (a wait) has ordered the additions before the read.
pub(crate) struct Sharded {
    shards: [CachePadded<AtomicU64>; SHARDS],
}

impl Default for Sharded {
    fn default() -> Self {
        Sharded {
            shards: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        }
    }
}

impl Sharded {
    /// Add `n` (to the calling thread's shard), Relaxed.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.add_with(n, Ordering::Relaxed);
    }

    /// The sum of every shard, read Relaxed.
    pub(crate) fn sum(&self) -> u64 {
        self.sum_with(Ordering::Relaxed)
    }

    /// [`add`](Self::add), SeqCst: in the single total order of SeqCst
    /// operations, for counts whose readers must not miss it
    /// ([`sum_ordered`](Self::sum_ordered)).
    #[inline]
    pub(crate) fn add_ordered(&self, n: u64) {
        self.add_with(n, Ordering::SeqCst);
    }

    /// [`sum`](Self::sum) with SeqCst loads, in shard order.
    pub(crate) fn sum_ordered(&self) -> u64 {
        self.sum_with(Ordering::SeqCst)
    }

    #[inline]
    fn add_with(&self, n: u64, order: Ordering) {
        self.shards[shard()].fetch_add(n, order);
    }

    fn sum_with(&self, order: Ordering) -> u64 {
        self.shards
            .iter()
            .map(|s| s.load(order))
            .fold(0, u64::wrapping_add)
    }

    /// The calling thread's shard alone (a hint: other threads may share it).
    #[inline]
    pub(crate) fn here(&self) -> u64 {
        self.shards[shard()].load(Ordering::Relaxed)
    }
}

/// Ids a thread takes from the shared counter at once.
const BLOCK: u64 = 256;

/// Unique ids, from 0, handed out in blocks of [`BLOCK`]: a thread takes
/// its next ids from the block it holds, and writes the shared counter once
/// per block. Ids increase along one thread's takes; across threads they
/// are unique but in no order (a thread's block may be older than
/// another's). Each `Ids` knows its own blocks by `owner`, a number unique
/// to it in the process (a runtime's id).
pub(crate) struct Ids {
    owner: u64,
    next: CachePadded<AtomicU64>,
}

thread_local! {
    /// This thread's block: (the owner it is of, next id, end).
    static BLOCK_HELD: Cell<(u64, u64, u64)> = const { Cell::new((u64::MAX, 0, 0)) };
}

impl Ids {
    /// The ids of `owner` (unique in the process).
    pub(crate) fn new(owner: u64) -> Ids {
        Ids {
            owner,
            next: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// A fresh id.
    #[inline]
    pub(crate) fn take(&self) -> u64 {
        BLOCK_HELD
            .try_with(|b| {
                let (owner, next, end) = b.get();
                if owner == self.owner && next < end {
                    b.set((owner, next + 1, end));
                    next
                } else {
                    let start = self.next.fetch_add(BLOCK, Ordering::Relaxed);
                    b.set((self.owner, start + 1, start + BLOCK));
                    start
                }
            })
            // This thread's locals are gone: one id, from the counter.
            .unwrap_or_else(|_| self.next.fetch_add(1, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    /// Additions from several threads, some sharing a shard (more threads
    /// than shards), all count.
    #[test]
    fn a_sharded_count_sums_every_threads_additions() {
        let c = Arc::new(Sharded::default());
        let threads: Vec<_> = (0..SHARDS as u64 + 3)
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(t + 1);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let n = SHARDS as u64 + 3;
        assert_eq!(c.sum(), 1000 * n * (n + 1) / 2);
    }

    /// Ids taken by several threads from two owners, interleaved on one
    /// thread too, are unique per owner and increase along each thread.
    #[test]
    fn ids_are_unique_across_threads_and_owners() {
        let (a, b) = (Arc::new(Ids::new(1_000_001)), Arc::new(Ids::new(1_000_002)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (a, b) = (Arc::clone(&a), Arc::clone(&b));
                std::thread::spawn(move || {
                    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
                    for k in 0..3 * BLOCK as usize {
                        from_a.push(a.take());
                        if k % 7 == 0 {
                            from_b.push(b.take());
                        }
                    }
                    assert!(from_a.windows(2).all(|w| w[0] < w[1]), "increasing");
                    (from_a, from_b)
                })
            })
            .collect();
        let (mut all_a, mut all_b) = (HashSet::new(), HashSet::new());
        for t in threads {
            let (from_a, from_b) = t.join().unwrap();
            for id in from_a {
                assert!(all_a.insert(id), "id {id} of owner a taken twice");
            }
            for id in from_b {
                assert!(all_b.insert(id), "id {id} of owner b taken twice");
            }
        }
        assert_eq!(all_a.len(), 4 * 3 * BLOCK as usize);
    }
}
