//! The vectors and dot-product partials the solvers' tasks share: one allocation per vector,
//! each task of a phase writing its own row block of it, phases ordered by dependencies.
//!
//! # Access discipline
//!
//! The runtime's data handles serialise every writer of a handle, so a vector written by
//! one task per row block cannot be one handle, and the SpMV needs its input whole. A
//! [`SharedVec`] is therefore outside the runtime's dependency tracking, and the solvers
//! (`super::cg`, `super::pipelined`, `super::power`) keep this discipline, which is what makes
//! the `unsafe` borrows below sound:
//!
//! - a *phase* is a set of tasks that all go after one task (explicit dependencies,
//!   `TaskBuilder::after`) that itself went after every task of the previous phase: a
//!   reduction or a join. The runtime orders a task's completion before its successors'
//!   start, so every write of a phase comes before every access of the next. (Power
//!   iteration and the set-up phases wait instead (`Operator::wait`), which orders them the
//!   same way.);
//! - within a phase, a vector is either only read (by any task, whole or in part) or written
//!   by one task per row block, each in its own block's rows, and then read by no other task
//!   of that phase;
//! - the submitting thread touches a vector only after waiting for every task that uses it.

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

/// A few partial sums per row block (two unless made [`wide`](Self::wide)), written by the
/// block's task, summed in block order by the reduction after the phase (so the total does
/// not depend on which worker ran what, or when).
pub struct Partials {
    width: usize,
    parts: Box<[AtomicU64]>,
}

impl Partials {
    /// Room for `blocks` blocks, two sums each.
    pub fn new(blocks: usize) -> Arc<Partials> {
        Partials::wide(blocks, 2)
    }

    /// Room for `blocks` blocks, `width` sums each.
    pub fn wide(blocks: usize, width: usize) -> Arc<Partials> {
        Arc::new(Partials {
            width,
            parts: (0..width * blocks).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Block `b`'s two partial sums (the first two when wider).
    pub fn set(&self, b: usize, v: (f64, f64)) {
        self.set_all(b, &[v.0, v.1]);
    }

    /// Block `b`'s partial sums, `v.len()` of them from the first.
    ///
    /// # Panics
    /// If `v` is longer than the width.
    pub fn set_all(&self, b: usize, v: &[f64]) {
        assert!(v.len() <= self.width, "{} sums of {}", v.len(), self.width);
        for (k, x) in v.iter().enumerate() {
            // Relaxed: read only by a task that goes after this one (or after a wait), which
            // orders this store before it.
            self.parts[self.width * b + k].store(x.to_bits(), Ordering::Relaxed);
        }
    }

    /// The first two sums over every block, in block order.
    pub fn sums(&self) -> (f64, f64) {
        let s = self.sums_all();
        (s[0], s.get(1).copied().unwrap_or(0.0))
    }

    /// Every sum over every block, in block order.
    pub fn sums_all(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.width];
        for p in self.parts.chunks_exact(self.width.max(1)) {
            for (o, x) in out.iter_mut().zip(p) {
                *o += f64::from_bits(x.load(Ordering::Relaxed));
            }
        }
        out
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
        let w = Partials::wide(2, 3);
        w.set_all(1, &[1.0, 2.0, 3.0]);
        w.set_all(0, &[0.5, 0.25, 0.125]);
        assert_eq!(w.sums_all(), vec![1.5, 2.25, 3.125]);
    }
}
