//! The vectors and dot-product partials the solvers' tasks share: one allocation per vector,
//! each task of a phase writing its own row block of it, phases separated by waits.
//!
//! # Access discipline
//!
//! The runtime's data handles serialise every writer of a handle, so a vector written by
//! one task per row block cannot be one handle, and the SpMV needs its input whole. A
//! [`SharedVec`] is therefore outside the runtime's dependency tracking, and the solvers
//! (`super::cg`, `super::power`) keep this discipline, which is what makes the `unsafe`
//! borrows below sound:
//!
//! - a *phase* is a set of tasks submitted together, then waited for (`Operator::wait`)
//!   before the next phase is submitted; the wait orders every write of a phase before every
//!   access of the next (the runtime's completion and submission synchronise);
//! - within a phase, a vector is either only read (by any task, whole or in part) or written
//!   by one task per row block, each in its own block's rows, and then read by no other task
//!   of that phase;
//! - the submitting thread touches a vector only between phases (and then none is in use).

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A vector of `f64` shared by the tasks of the solver phases (see the module doc).
pub struct SharedVec {
    ptr: NonNull<f64>,
    len: usize,
}

// SAFETY: the values are plain `f64`s owned by this struct; concurrent access is governed
// by the module's discipline, which every `unsafe` borrow below requires of its caller.
unsafe impl Send for SharedVec {}
// SAFETY: as for `Send`: `&SharedVec` hands out borrows only through `unsafe` methods.
unsafe impl Sync for SharedVec {}

impl SharedVec {
    /// Take `v` over.
    pub fn new(v: Vec<f64>) -> Arc<SharedVec> {
        let b = v.into_boxed_slice();
        let len = b.len();
        let ptr = NonNull::new(Box::into_raw(b).cast::<f64>()).expect("a box is not null");
        Arc::new(SharedVec { ptr, len })
    }

    /// `len` zeros.
    pub fn zeros(len: usize) -> Arc<SharedVec> {
        SharedVec::new(vec![0.0; len])
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries `r`, read only.
    ///
    /// # Safety
    /// No task or thread writes an entry of `r` while the borrow lives (the module doc's
    /// discipline).
    ///
    /// # Panics
    /// If `r` is not within `0..len`.
    pub unsafe fn slice(&self, r: Range<usize>) -> &[f64] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "{r:?} of {}",
            self.len
        );
        // SAFETY: in bounds (just checked) of the allocation this struct owns; no writer of
        // these entries lives meanwhile (the caller's promise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(r.start), r.len()) }
    }

    /// Entries `r`, to write.
    ///
    /// # Safety
    /// No other borrow of an entry of `r` lives while this one does (the module doc's
    /// discipline: one task per row block writes it).
    ///
    /// # Panics
    /// If `r` is not within `0..len`.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, r: Range<usize>) -> &mut [f64] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "{r:?} of {}",
            self.len
        );
        // SAFETY: in bounds (just checked); exclusive for its lifetime (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(r.start), r.len()) }
    }

    /// The whole vector, read only.
    ///
    /// # Safety
    /// As [`slice`](Self::slice), for every entry.
    pub unsafe fn all(&self) -> &[f64] {
        // SAFETY: the caller's promise, for every entry.
        unsafe { self.slice(0..self.len) }
    }

    /// The values, once no task holds the vector any more (else a copy).
    pub fn into_vec(this: Arc<SharedVec>) -> Vec<f64> {
        match Arc::try_unwrap(this) {
            Ok(v) => {
                let me = std::mem::ManuallyDrop::new(v);
                // SAFETY: `ptr`/`len` came from `Box<[f64]>::into_raw` in `new`, and
                // `ManuallyDrop` keeps `Drop` from freeing it a second time.
                let b = unsafe {
                    Box::from_raw(std::ptr::slice_from_raw_parts_mut(me.ptr.as_ptr(), me.len))
                };
                b.into_vec()
            }
            // A task that never ran (cancelled) may still hold a clone.
            // SAFETY: the solvers call this after their last wait: no task runs.
            Err(shared) => unsafe { shared.all() }.to_vec(),
        }
    }
}

impl Drop for SharedVec {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box<[f64]>::into_raw` in `new`; dropped once.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len,
            ))
        });
    }
}

/// Two partial sums per row block, written by the block's task, summed in block order by
/// the submitting thread after the phase's wait (so the total does not depend on which
/// worker ran what, or when).
pub struct Partials(Box<[AtomicU64]>);

impl Partials {
    /// Room for `blocks` blocks.
    pub fn new(blocks: usize) -> Arc<Partials> {
        Arc::new(Partials(
            (0..2 * blocks).map(|_| AtomicU64::new(0)).collect(),
        ))
    }

    /// Block `b`'s two partial sums.
    pub fn set(&self, b: usize, v: (f64, f64)) {
        // Relaxed: read only after the phase's wait, which orders this store before it.
        self.0[2 * b].store(v.0.to_bits(), Ordering::Relaxed);
        self.0[2 * b + 1].store(v.1.to_bits(), Ordering::Relaxed);
    }

    /// The sums over every block, in block order.
    pub fn sums(&self) -> (f64, f64) {
        self.0.chunks_exact(2).fold((0.0, 0.0), |(a, b), p| {
            (
                a + f64::from_bits(p[0].load(Ordering::Relaxed)),
                b + f64::from_bits(p[1].load(Ordering::Relaxed)),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    // Proves the round trip of a shared vector and the block-order sums.
    use super::*;

    #[test]
    fn round_trip_and_sums() {
        let v = SharedVec::new(vec![1.0, 2.0, 3.0]);
        // SAFETY: no other borrow lives.
        unsafe { v.slice_mut(1..3).copy_from_slice(&[5.0, 6.0]) };
        let held = Arc::clone(&v);
        assert_eq!(SharedVec::into_vec(held), vec![1.0, 5.0, 6.0]);
        assert_eq!(SharedVec::into_vec(v), vec![1.0, 5.0, 6.0]);
        assert!(SharedVec::into_vec(SharedVec::zeros(0)).is_empty());
        let p = Partials::new(2);
        p.set(1, (1.5, 2.0));
        p.set(0, (0.5, 1.0));
        assert_eq!(p.sums(), (2.0, 3.0));
    }
}
