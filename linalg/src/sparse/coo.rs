//! Coordinate-format (triplet) matrices: the assembly format files and generators push
//! entries into, in any order and with repeats, before conversion to CSR.

use std::collections::TryReserveError;

use super::csr::{Csr, CsrError};

/// A sparse matrix as a list of `(row, col, value)` triplets, in insertion order, repeats
/// allowed. Column indices are `u32` like [`Csr`]'s, so `n_cols ≤ u32::MAX`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coo {
    n_rows: usize,
    n_cols: usize,
    rows: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
}

impl Coo {
    /// An empty `n_rows × n_cols` matrix; fails when `n_cols` does not fit `u32`.
    pub fn new(n_rows: usize, n_cols: usize) -> Result<Coo, CsrError> {
        Coo::with_capacity(n_rows, n_cols, 0)
    }

    /// An empty `n_rows × n_cols` matrix with room for `capacity` entries.
    pub fn with_capacity(n_rows: usize, n_cols: usize, capacity: usize) -> Result<Coo, CsrError> {
        if u32::try_from(n_cols).is_err() {
            return Err(CsrError::TooManyColumns { n_cols });
        }
        Ok(Coo {
            n_rows,
            n_cols,
            rows: Vec::with_capacity(capacity),
            cols: Vec::with_capacity(capacity),
            vals: Vec::with_capacity(capacity),
        })
    }

    /// Appends the entry `(row, col) = val` (0-based). A repeated position adds up in
    /// [`Coo::to_csr`].
    ///
    /// # Panics
    /// If `row ≥ n_rows` or `col ≥ n_cols`.
    pub fn push(&mut self, row: usize, col: usize, val: f64) {
        assert!(
            row < self.n_rows && col < self.n_cols,
            "Coo::push: ({row}, {col}) out of range for {} × {}",
            self.n_rows,
            self.n_cols
        );
        self.rows.push(row);
        self.cols.push(col as u32);
        self.vals.push(val);
    }

    /// Room for `additional` more entries, or the allocator's refusal (for readers that must
    /// not abort on a huge declared size).
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), TryReserveError> {
        self.rows.try_reserve(additional)?;
        self.cols.try_reserve(additional)?;
        self.vals.try_reserve(additional)
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Number of triplets pushed (repeats counted).
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// Whether no triplet was pushed.
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// Row index of each triplet.
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// Column index of each triplet.
    pub fn cols(&self) -> &[u32] {
        &self.cols
    }

    /// Value of each triplet.
    pub fn vals(&self) -> &[f64] {
        &self.vals
    }

    /// The CSR form: columns sorted within each row, repeated positions summed in insertion
    /// order, explicit zeros kept (they are structure). `O(nnz + n_rows)` plus a sort of each
    /// row that is not already in column order.
    ///
    /// # Panics
    /// If memory for the result cannot be allocated (like `Vec`); see
    /// [`Coo::try_to_csr`] for the fallible form.
    pub fn to_csr(&self) -> Csr {
        self.try_to_csr().expect("Coo::to_csr: out of memory")
    }

    /// [`Coo::to_csr`], returning the allocator's refusal instead of aborting.
    pub fn try_to_csr(&self) -> Result<Csr, TryReserveError> {
        try_csr_from_parts(
            self.n_rows,
            self.n_cols,
            &[(&self.rows[..], &self.cols[..], &self.vals[..])],
        )
    }
}

/// [`Coo::to_csr`] over triplets held in several parts, taken in order as one list (the
/// Matrix Market reader's per-thread pieces). Every index must be in range (`rows < n_rows`,
/// `cols < n_cols ≤ u32::MAX`) and each part's three slices of equal length.
pub(crate) fn try_csr_from_parts(
    n_rows: usize,
    n_cols: usize,
    parts: &[(&[usize], &[u32], &[f64])],
) -> Result<Csr, TryReserveError> {
    let n = n_rows;
    let nnz: usize = parts.iter().map(|p| p.2.len()).sum();
    // Counting sort by row: row_ptr[i + 1] counts row i, then a prefix sum.
    let mut row_ptr = zeroed::<usize>(n.saturating_add(1))?;
    for (rows, _, _) in parts {
        for &r in *rows {
            row_ptr[r + 1] += 1;
        }
    }
    for i in 0..n {
        row_ptr[i + 1] += row_ptr[i];
    }
    let mut col_idx = zeroed::<u32>(nnz)?;
    let mut vals = zeroed::<f64>(nnz)?;
    {
        // `next[i]`: where row i's next triplet goes.
        let mut next = zeroed::<usize>(n)?;
        next.copy_from_slice(&row_ptr[..n]);
        for (rows, cols, vs) in parts {
            for ((&r, &c), &v) in rows.iter().zip(*cols).zip(*vs) {
                let dst = next[r];
                next[r] += 1;
                col_idx[dst] = c;
                vals[dst] = v;
            }
        }
    }
    // Sort each row by column (stable: ties keep insertion order) and fold repeats,
    // compacting in place: `w` is the write position, never ahead of the read position.
    let mut scratch: Vec<(u32, usize)> = Vec::new();
    let mut scratch_vals: Vec<f64> = Vec::new();
    let mut w = 0;
    let mut start = 0;
    for i in 0..n {
        let end = row_ptr[i + 1];
        let sorted = col_idx[start..end].windows(2).all(|p| p[0] < p[1]);
        if sorted {
            if w != start {
                col_idx.copy_within(start..end, w);
                vals.copy_within(start..end, w);
            }
            w += end - start;
        } else {
            scratch.clear();
            // (column, position) keys are distinct, so an unstable sort is stable.
            scratch.extend((start..end).map(|k| (col_idx[k], k)));
            scratch.sort_unstable();
            // The row is copied out, so writing at `w ≤ start` cannot clobber unread input.
            scratch_vals.clear();
            scratch_vals.extend(scratch.iter().map(|&(_, k)| vals[k]));
            let row_start = w;
            for (j, &(c, _)) in scratch.iter().enumerate() {
                if w > row_start && col_idx[w - 1] == c {
                    vals[w - 1] += scratch_vals[j];
                } else {
                    col_idx[w] = c;
                    vals[w] = scratch_vals[j];
                    w += 1;
                }
            }
        }
        start = end;
        row_ptr[i + 1] = w;
    }
    col_idx.truncate(w);
    vals.truncate(w);
    col_idx.shrink_to_fit();
    vals.shrink_to_fit();
    Ok(Csr::new(n, n_cols, row_ptr, col_idx, vals)
        .expect("COO → CSR builds a valid CSR from in-range triplets"))
}

/// `len` default values, or the allocator's refusal.
fn zeroed<T: Clone + Default>(len: usize) -> Result<Vec<T>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)?;
    v.resize(len, T::default());
    Ok(v)
}

#[cfg(test)]
mod tests {
    //! Proves that COO → CSR sorts columns, sums repeated positions in insertion order, keeps
    //! empty rows and explicit zeros, and refuses out-of-range pushes.

    use super::*;

    #[test]
    fn duplicates_summed_and_rows_sorted() {
        let mut a = Coo::new(4, 5).unwrap();
        a.push(2, 4, 1.0);
        a.push(0, 3, 2.0);
        a.push(2, 1, 3.0);
        a.push(2, 4, 10.0);
        a.push(0, 3, 20.0);
        a.push(0, 0, 0.0); // explicit zero
        a.push(3, 2, 5.0);
        a.push(2, 1, 30.0);
        a.push(2, 4, 100.0);
        let c = a.to_csr();
        assert_eq!(c.row_ptr(), &[0, 2, 2, 4, 5]);
        assert_eq!(c.col_idx(), &[0, 3, 1, 4, 2]);
        assert_eq!(c.vals(), &[0.0, 22.0, 33.0, 111.0, 5.0]);
        assert_eq!(c.n_cols(), 5);
    }

    #[test]
    fn sorted_input_is_kept_and_empty_matrix_works() {
        let mut a = Coo::new(3, 3).unwrap();
        for (r, c) in [(0, 0), (0, 2), (1, 1), (2, 0), (2, 1)] {
            a.push(r, c, (r * 3 + c) as f64);
        }
        let c = a.to_csr();
        assert_eq!(c.row_ptr(), &[0, 2, 3, 5]);
        assert_eq!(c.col_idx(), &[0, 2, 1, 0, 1]);
        assert_eq!(c.vals(), &[0.0, 2.0, 4.0, 6.0, 7.0]);
        let e = Coo::new(0, 0).unwrap().to_csr();
        assert_eq!((e.n_rows(), e.nnz()), (0, 0));
    }

    #[test]
    fn repeats_add_in_insertion_order() {
        // 1e16 + 1 + 1 rounds differently from 1 + 1 + 1e16: insertion order must win.
        let mut a = Coo::new(1, 2).unwrap();
        a.push(0, 1, 1e16);
        a.push(0, 0, 7.0);
        a.push(0, 1, 1.0);
        a.push(0, 1, 1.0);
        let c = a.to_csr();
        assert_eq!(c.vals(), &[7.0, ((1e16f64 + 1.0) + 1.0)]);
    }

    #[test]
    #[should_panic(expected = "(1, 3) out of range for 2 × 3")]
    fn push_out_of_range_panics() {
        Coo::new(2, 3).unwrap().push(1, 3, 1.0);
    }

    #[test]
    fn too_many_columns_refused() {
        assert!(Coo::new(1, u32::MAX as usize + 1).is_err());
    }
}
