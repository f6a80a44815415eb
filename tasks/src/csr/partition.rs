//! Nonzero-balanced row partitions from the row offsets alone: each boundary is the row
//! boundary nearest to its ideal share of the entries, and when there are at least as many
//! rows as parts no part is empty.

use std::ops::Range;

/// The `r` in `0..row_ptr.len()` with `row_ptr[r]` nearest to `target` (smaller `r` on ties;
/// among rows with equal offsets, the first).
pub(super) fn nearest_row_boundary(row_ptr: &[usize], target: f64) -> usize {
    let n_rows = row_ptr.len() - 1;
    // First row whose offset reaches the target; the boundary is it or the one before.
    let hi = row_ptr.partition_point(|&p| (p as f64) < target);
    if hi == 0 {
        return 0;
    }
    if hi > n_rows {
        return n_rows;
    }
    let below = row_ptr[hi - 1];
    // Among rows with the offset `below`, take the first (empty rows go to the later part).
    let lo = row_ptr.partition_point(|&p| p < below);
    if target - below as f64 <= row_ptr[hi] as f64 - target {
        lo
    } else {
        hi
    }
}

/// [`Csr::partition_by_nnz`](super::Csr::partition_by_nnz) from the row offsets alone
/// (`row_ptr[0] = 0`, non-decreasing, one entry more than rows): how a distributed run splits a
/// matrix it has not built between ranks.
///
/// # Panics
/// If `parts == 0` or `row_ptr` is empty.
pub fn partition_row_ptr_by_nnz(row_ptr: &[usize], parts: usize) -> Vec<Range<usize>> {
    assert!(parts > 0, "partition_by_nnz: parts must be at least 1");
    let n = row_ptr.len() - 1;
    let nnz = row_ptr[n] - row_ptr[0];
    let mut bounds = Vec::with_capacity(parts + 1);
    bounds.push(0usize);
    for k in 1..parts {
        let b = if nnz == 0 {
            // Exact in u128 for any n and parts.
            (n as u128 * k as u128 / parts as u128) as usize
        } else {
            nearest_row_boundary(
                row_ptr,
                row_ptr[0] as f64 + nnz as f64 * k as f64 / parts as f64,
            )
        };
        bounds.push(b);
    }
    bounds.push(n);
    if n >= parts {
        // Leave room for one row per part on both sides: b_k ∈ [k, n − (parts − k)].
        for k in 1..parts {
            let lo = bounds[k - 1] + 1;
            let hi = n - (parts - k);
            bounds[k] = bounds[k].clamp(lo, hi);
        }
    } else {
        for (k, b) in bounds.iter_mut().enumerate() {
            *b = k.min(n);
        }
    }
    bounds.windows(2).map(|w| w[0]..w[1]).collect()
}
