//! Reused message buffers: a process-wide pool of large byte buffers that
//! senders pack into, transports receive into, and that come back here when
//! the send completes or the received message is dropped.
//!
//! Why: a distributed LU's panel message is tens of MB (a column of tiles).
//! A fresh buffer of that size is fresh memory, and its first touch costs a
//! page fault per 4 KiB page: measured 1.7 µs per page on the 2-core VM
//! (against 0.35 µs to write a page already mapped), about 50 k faults per
//! rank and run at N = 8192, on the worker that packs and on the
//! communication thread that receives. glibc does not keep such buffers for
//! reuse across threads (a buffer allocated by a worker is freed by the
//! communication thread, and one above its `mmap` threshold goes back to the
//! kernel on every free), so the pool does it, like MPI libraries' own
//! registration caches and PaRSEC's arenas.
//!
//! Only buffers of at least [`MIN_POOLED`] bytes are pooled (small ones are
//! cheap for the allocator), at most [`MAX_KEPT`] of them and
//! [`MAX_BYTES`] in all (the largest are kept): the pool holds on to about
//! the bytes a rank had in flight at its busiest, not more.
//!
//! A buffer is handed out empty: a sender packs into it, the MPI transport
//! receives into its spare capacity (`backends/src/mpi.rs`), so neither
//! writes it twice.
//!
//! The count bound is at least the messages a rank keeps in flight when it
//! streams (a window of 64, as `osu_bw`'s): with fewer kept, every message
//! past the bound of a stream of 1 MiB outputs takes fresh memory again.

use std::sync::Mutex;

use crate::util::lock;

/// Buffers smaller than this are not pooled.
pub const MIN_POOLED: usize = 256 << 10;
/// Buffers kept at most.
pub const MAX_KEPT: usize = 64;
/// Bytes (capacity) kept at most.
pub const MAX_BYTES: usize = 64 << 20;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// The smallest pooled buffer of at least `capacity` bytes, if any.
fn take_fitting(capacity: usize) -> Option<Vec<u8>> {
    if capacity < MIN_POOLED {
        return None;
    }
    let mut pool = lock(&POOL);
    let best = pool
        .iter()
        .enumerate()
        .filter(|(_, b)| b.capacity() >= capacity)
        .min_by_key(|(_, b)| b.capacity())
        .map(|(i, _)| i)?;
    Some(pool.swap_remove(best))
}

/// An empty buffer with room for `capacity` bytes (a pooled one when one
/// fits).
pub fn take(capacity: usize) -> Vec<u8> {
    match take_fitting(capacity) {
        Some(mut b) => {
            b.clear();
            b
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Give `buf` back for reuse (dropped when it is small or the pool is full).
pub fn give(buf: Vec<u8>) {
    if buf.capacity() < MIN_POOLED {
        return;
    }
    let mut pool = lock(&POOL);
    pool.push(buf);
    // Keep the largest: a later message may need them, and smaller requests
    // fit them too.
    pool.sort_unstable_by_key(|b| std::cmp::Reverse(b.capacity()));
    let mut total = 0;
    let keep = pool
        .iter()
        .take_while(|b| {
            total += b.capacity();
            total <= MAX_BYTES
        })
        .count()
        .min(MAX_KEPT);
    let dropped: Vec<Vec<u8>> = pool.drain(keep..).collect();
    drop(pool);
    drop(dropped);
}

/// Make `count` buffers of `len` bytes now, their pages touched, and keep
/// them (as far as the pool's bounds allow): for set-up time, before a run's
/// clock starts, with `len` the largest message the run will send, so that
/// its first messages do not pay the page faults either.
pub fn reserve(len: usize, count: usize) {
    if !(MIN_POOLED..=MAX_BYTES).contains(&len) {
        return;
    }
    for _ in 0..count {
        let mut b = vec![0u8; len];
        crate::memory::touch_pages(&mut b);
        give(b);
    }
}

/// Bytes the pool holds now (capacity of its buffers).
pub fn pooled_bytes() -> usize {
    lock(&POOL).iter().map(|b| b.capacity()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool is process-wide: the tests of this module run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn drain() {
        lock(&POOL).clear();
    }

    #[test]
    fn a_given_buffer_is_reused_for_a_request_it_fits() {
        let _g = lock(&SERIAL);
        drain();
        let mut b = take(MIN_POOLED * 2);
        b.extend_from_slice(&[7; 100]);
        let addr = b.as_ptr();
        give(b);
        let again = take(MIN_POOLED);
        assert_eq!(again.as_ptr(), addr, "the pooled buffer is reused");
        assert!(again.is_empty(), "take hands out an empty buffer");
        drain();
    }

    #[test]
    fn reserved_buffers_fill_the_pool_within_its_bounds() {
        let _g = lock(&SERIAL);
        drain();
        reserve(MIN_POOLED + 5, 2);
        assert_eq!(pooled_bytes(), 2 * (MIN_POOLED + 5));
        let b = take(MIN_POOLED + 5);
        assert!(b.is_empty() && b.capacity() >= MIN_POOLED + 5);
        drain();
        reserve(MIN_POOLED - 1, 3);
        reserve(MAX_BYTES + 1, 1);
        assert_eq!(pooled_bytes(), 0, "too small or too large: not kept");
        drain();
    }

    #[test]
    fn small_buffers_are_not_kept_and_the_pool_is_bounded() {
        let _g = lock(&SERIAL);
        drain();
        give(Vec::with_capacity(MIN_POOLED - 1));
        assert_eq!(pooled_bytes(), 0);
        for _ in 0..MAX_KEPT + 3 {
            give(Vec::with_capacity(MIN_POOLED));
        }
        assert_eq!(lock(&POOL).len(), MAX_KEPT);
        drain();
        // Bytes: a buffer above the cap is not kept, the largest that fit are.
        give(Vec::with_capacity(MAX_BYTES + 1));
        assert_eq!(pooled_bytes(), 0);
        give(Vec::with_capacity(MAX_BYTES / 2));
        give(Vec::with_capacity(MAX_BYTES / 2));
        give(Vec::with_capacity(MIN_POOLED));
        assert!(pooled_bytes() <= MAX_BYTES);
        assert_eq!(pooled_bytes(), MAX_BYTES);
        drain();
    }
}
