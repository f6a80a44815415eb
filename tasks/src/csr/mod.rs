//! Compressed sparse row matrices with validated invariants, row blocks and nonzero-balanced
//! row partitions: the data the SpMV driver registers and splits.
//!
//! This module holds the matrix and its methods; why [`Csr::new`] refuses parts is in
//! `error`, the nonzero-balanced row partition in `partition`, and how a matrix moves
//! between memory nodes and is seen on a device in `device`.

mod device;
mod error;
mod partition;
#[cfg(test)]
mod tests;

use std::ops::Range;

pub use device::{DevCsr, DevCsrMut};
pub use error::CsrError;
use partition::nearest_row_boundary;
pub use partition::partition_row_ptr_by_nnz;

/// A sparse matrix in compressed sparse row form, `f64` values and `u32` column indices.
///
/// Invariants, checked by [`Csr::new`] and kept by every method (so the unchecked SpMV
/// kernel can rely on them):
/// - `n_cols ≤ u32::MAX` (column indices are `u32`: they are a third of a memory-bound
///   kernel's traffic, and `usize` indices would make it half);
/// - `row_ptr.len() == n_rows + 1`, `row_ptr[0] == 0`, `row_ptr` is non-decreasing and
///   `row_ptr[n_rows] == col_idx.len() == vals.len()`;
/// - every column index is `< n_cols`.
///
/// Column indices within a row need not be sorted and may repeat (repeats add up in a
/// product); the generators and `Coo::to_csr` (tessera-linalg) produce sorted,
/// distinct columns.
///
/// A matrix may also hold its column indices a second time, compact: see
/// [`Csr::with_compact_columns`]. Equality compares the matrices, not whether they hold it.
#[derive(Clone, Debug)]
pub struct Csr {
    n_rows: usize,
    n_cols: usize,
    row_ptr: Vec<usize>,
    col_idx: Vec<u32>,
    vals: Vec<f64>,
    /// `col_idx` again as 16-bit gaps, when [`Csr::with_compact_columns`] built it.
    compact: Option<CompactColumns>,
}

/// The column indices of a [`Csr`] as 16-bit gaps: row `i`'s entries `s..e` are in columns
/// `first[i] + gaps[s]`, then each the one before plus its gap (`gaps[s]` is 0). Invariant
/// (checked where it is built, from the matrix's own indices, which must be non-decreasing in
/// each row): `gaps.len() == col_idx.len()`, `first.len() == n_rows`, and the columns decoded
/// so equal `col_idx`, so each is `< n_cols`.
#[derive(Clone, Debug)]
struct CompactColumns {
    first: Vec<u32>,
    gaps: Vec<u16>,
}

impl PartialEq for Csr {
    fn eq(&self, other: &Csr) -> bool {
        (
            self.n_rows,
            self.n_cols,
            &self.row_ptr,
            &self.col_idx,
            &self.vals,
        ) == (
            other.n_rows,
            other.n_cols,
            &other.row_ptr,
            &other.col_idx,
            &other.vals,
        )
    }
}

impl Csr {
    /// A CSR matrix from its parts, after checking every invariant listed on [`Csr`] in
    /// `O(n_rows + nnz)`.
    pub fn new(
        n_rows: usize,
        n_cols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        vals: Vec<f64>,
    ) -> Result<Csr, CsrError> {
        if u32::try_from(n_cols).is_err() {
            return Err(CsrError::TooManyColumns { n_cols });
        }
        if n_rows.checked_add(1) != Some(row_ptr.len()) {
            return Err(CsrError::RowPtrLength {
                expected: n_rows.saturating_add(1),
                found: row_ptr.len(),
            });
        }
        if row_ptr[0] != 0 {
            return Err(CsrError::RowPtrStart { found: row_ptr[0] });
        }
        if let Some(row) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
            return Err(CsrError::RowPtrDecreasing {
                row,
                start: row_ptr[row],
                end: row_ptr[row + 1],
            });
        }
        let row_ptr_end = row_ptr[n_rows];
        if row_ptr_end != col_idx.len() || row_ptr_end != vals.len() {
            return Err(CsrError::LengthMismatch {
                row_ptr_end,
                col_idx: col_idx.len(),
                vals: vals.len(),
            });
        }
        // Fast path: one branch-free max; only a failure walks the rows to name one.
        let max = col_idx.iter().fold(0u32, |m, &c| m.max(c));
        if !col_idx.is_empty() && max as usize >= n_cols {
            let entry = col_idx
                .iter()
                .position(|&c| c as usize >= n_cols)
                .expect("the maximum is out of range, so some index is");
            // The row owning `entry`: the last row starting at or before it (skips empty rows).
            let row = row_ptr.partition_point(|&p| p <= entry) - 1;
            return Err(CsrError::ColumnOutOfRange {
                row,
                entry,
                col: col_idx[entry],
                n_cols,
            });
        }
        Ok(Csr {
            n_rows,
            n_cols,
            row_ptr,
            col_idx,
            vals,
            compact: None,
        })
    }

    /// The `n_rows × n_cols` matrix with no stored entries.
    pub fn zeros(n_rows: usize, n_cols: usize) -> Result<Csr, CsrError> {
        Csr::new(n_rows, n_cols, vec![0; n_rows + 1], Vec::new(), Vec::new())
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Number of stored entries (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Row offsets: row `i` holds entries `row_ptr[i]..row_ptr[i + 1]`.
    pub fn row_ptr(&self) -> &[usize] {
        &self.row_ptr
    }

    /// Column index of each entry.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Value of each entry.
    pub fn vals(&self) -> &[f64] {
        &self.vals
    }

    /// Values, mutable: changing values keeps every invariant.
    pub fn vals_mut(&mut self) -> &mut [f64] {
        &mut self.vals
    }

    /// The parts `(n_rows, n_cols, row_ptr, col_idx, vals)`, for a caller that moves them
    /// into its own buffers.
    pub fn into_parts(self) -> (usize, usize, Vec<usize>, Vec<u32>, Vec<f64>) {
        (
            self.n_rows,
            self.n_cols,
            self.row_ptr,
            self.col_idx,
            self.vals,
        )
    }

    /// Column indices and values of row `i`.
    ///
    /// # Panics
    /// If `i ≥ n_rows`.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let r = self.row_ptr[i]..self.row_ptr[i + 1];
        (&self.col_idx[r.clone()], &self.vals[r])
    }

    /// The matrix holding its column indices a second time, as 16-bit gaps between each
    /// row's consecutive columns (after the row's first column), when every row's columns are
    /// non-decreasing with gaps of at most `u16::MAX` (else unchanged): the SpMV kernels then
    /// read 2 bytes of index per entry instead of 4. Costs `2·nnz + 4·n_rows` bytes more (the
    /// `u32` indices stay, for transfers, devices and everything else that reads
    /// [`Csr::col_idx`]); a transfer into the matrix (`parts_mut`) drops it; a replica in a
    /// device's memory holds the `u32` indices only.
    ///
    /// Chosen because the SpMV streams the matrix from memory, 12 bytes per entry with `u32`
    /// indices and 10 with gaps: `tessera spmv --gen stencil27:150 --compare-compact` (the
    /// same products with both layouts, 11 alternated rounds in one process, the 2-core EPYC
    /// VM) measured a median `u32`/compact time of 1.078 and 1.037, and 1.104 on
    /// `stencil27:200`; short rows lose ([`COMPACT_MIN_ROW_LEN`]). Gaps rather than offsets
    /// from the row's first column (offsets measured 1.037 and 1.015 on `stencil27:150`): a
    /// 3-D grid's rows span about 2·N² columns but their largest gap is about N², so the
    /// stencils qualify up to N = 256 instead of 180. Rows with wider gaps (power-law graphs,
    /// a distributed rank's halo columns) or unsorted columns keep the `u32` kernel, as
    /// PETSc's AIJ always does. `--no-compact` turns it off.
    pub fn with_compact_columns(mut self) -> Csr {
        let mut first = Vec::with_capacity(self.n_rows);
        let mut gaps = Vec::with_capacity(self.col_idx.len());
        for i in 0..self.n_rows {
            let cols = &self.col_idx[self.row_ptr[i]..self.row_ptr[i + 1]];
            let start = cols.first().copied().unwrap_or(0);
            let mut prev = start;
            for &c in cols {
                match c.checked_sub(prev).map(u16::try_from) {
                    Some(Ok(gap)) => gaps.push(gap),
                    // A decreasing column, or a gap over `u16::MAX`.
                    _ => return self,
                }
                prev = c;
            }
            first.push(start);
        }
        self.compact = Some(CompactColumns { first, gaps });
        self
    }

    /// Whether compact column indices are worth building for this matrix: its rows hold
    /// [`COMPACT_MIN_ROW_LEN`] entries or more on average ([`compact_pays_for`]).
    pub fn compact_pays(&self) -> bool {
        compact_pays_for(self.nnz(), self.n_rows)
    }

    /// The compact column indices `(first, gaps)` if [`Csr::with_compact_columns`] built
    /// them: row `i`'s entries `s..e` are in columns `first[i] + gaps[s]`, then each the one
    /// before plus its gap; every such column is `< n_cols`.
    pub fn compact_columns(&self) -> Option<(&[u32], &[u16])> {
        self.compact
            .as_ref()
            .map(|c| (c.first.as_slice(), c.gaps.as_slice()))
    }

    /// Bytes held by `row_ptr`, `col_idx` and `vals` (their lengths, not capacities): what a
    /// transfer of the matrix moves.
    pub fn bytes(&self) -> usize {
        self.row_ptr.len() * std::mem::size_of::<usize>()
            + self.col_idx.len() * std::mem::size_of::<u32>()
            + self.vals.len() * std::mem::size_of::<f64>()
    }

    /// Rows `rows` as a matrix of their own (`rows.len() × n_cols`, same columns), with
    /// `row_ptr` rebased to start at 0.
    ///
    /// # Panics
    /// If `rows` is decreasing or ends past `n_rows`, like slicing.
    pub fn row_block(&self, rows: Range<usize>) -> Csr {
        let ptr = &self.row_ptr[rows.start..=rows.end];
        let (lo, hi) = (ptr[0], ptr[ptr.len() - 1]);
        Csr {
            n_rows: rows.len(),
            n_cols: self.n_cols,
            row_ptr: ptr.iter().map(|&p| p - lo).collect(),
            col_idx: self.col_idx[lo..hi].to_vec(),
            vals: self.vals[lo..hi].to_vec(),
            compact: None,
        }
    }

    /// The row where the fraction `f` of the stored entries is reached: the `r` in
    /// `0..=n_rows` whose `row_ptr[r]` is nearest to `f · nnz` (the smaller `r` on a tie or
    /// among rows with equal offsets). Rows `0..r` then hold about `f` of the work. `f` is
    /// clamped to `[0, 1]`; NaN counts as 0. `0` gives `0` and `1` gives `n_rows`.
    pub fn split_rows_at_fraction(&self, f: f64) -> usize {
        let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        if f == 1.0 {
            return self.n_rows;
        }
        if self.nnz() == 0 {
            // No work anywhere: split the rows themselves.
            return ((self.n_rows as f64 * f).round() as usize).min(self.n_rows);
        }
        self.nearest_row_boundary(f * self.nnz() as f64)
    }

    /// The `r` in `0..=n_rows` with `row_ptr[r]` nearest to `target` (smaller `r` on ties).
    fn nearest_row_boundary(&self, target: f64) -> usize {
        nearest_row_boundary(&self.row_ptr, target)
    }

    /// `parts` contiguous row ranges covering `0..n_rows` in order, each with about
    /// `nnz / parts` stored entries: each boundary is the row boundary nearest to its ideal
    /// `k · nnz / parts`, so a part's entry count is within the longest row's length of the
    /// ideal. When `n_rows ≥ parts` every range is non-empty (a boundary that would make an
    /// empty part is moved by the fewest rows needed); otherwise the last `parts − n_rows`
    /// ranges are empty. A matrix with no entries is split evenly by rows.
    ///
    /// # Panics
    /// If `parts == 0`.
    pub fn partition_by_nnz(&self, parts: usize) -> Vec<Range<usize>> {
        partition_row_ptr_by_nnz(&self.row_ptr, parts)
    }

    /// `y += A·x` with the fast kernel (`tessera_tasks::kernels::spmv_csr_unchecked`, or
    /// `spmv_csr16_unchecked` with compact columns).
    ///
    /// # Panics
    /// If `x.len() != n_cols` or `y.len() != n_rows`.
    pub fn spmv(&self, x: &[f64], y: &mut [f64]) {
        self.check_spmv_lengths(x, y);
        // SAFETY: every column index is < n_cols (a `Csr` invariant, and the compact
        // columns' invariant) = x.len() (checked).
        unsafe {
            match self.compact_columns() {
                Some((first, gaps)) => crate::kernels::spmv_csr16_unchecked(
                    &self.row_ptr,
                    first,
                    gaps,
                    &self.vals,
                    x,
                    y,
                ),
                None => crate::kernels::spmv_csr_unchecked(
                    &self.row_ptr,
                    &self.col_idx,
                    &self.vals,
                    x,
                    y,
                ),
            }
        }
    }

    /// `y = A·x` (overwriting `y`) fused with the dots `(Σ x_rows[i]·y[i], Σ y[i]²)`
    /// (`tessera_tasks::kernels::spmv_csr_dot_unchecked`, or `spmv_csr16_dot_unchecked` with
    /// compact columns): the iterative solvers' multiply, `x_rows` being `x` at the block's
    /// own rows.
    ///
    /// # Panics
    /// If `x.len() != n_cols`, `y.len() != n_rows` or `x_rows.len() != n_rows`.
    pub fn spmv_dot(&self, x: &[f64], x_rows: &[f64], y: &mut [f64]) -> (f64, f64) {
        self.check_spmv_lengths(x, y);
        // SAFETY: as in `spmv`.
        unsafe {
            match self.compact_columns() {
                Some((first, gaps)) => crate::kernels::spmv_csr16_dot_unchecked(
                    &self.row_ptr,
                    first,
                    gaps,
                    &self.vals,
                    x,
                    x_rows,
                    y,
                ),
                None => crate::kernels::spmv_csr_dot_unchecked(
                    &self.row_ptr,
                    &self.col_idx,
                    &self.vals,
                    x,
                    x_rows,
                    y,
                ),
            }
        }
    }

    /// `y += A·x` by the plainest loop (one accumulator per row, left to right): the
    /// reference the tests hold the fast kernels to.
    ///
    /// # Panics
    /// If `x.len() != n_cols` or `y.len() != n_rows`.
    pub fn spmv_reference(&self, x: &[f64], y: &mut [f64]) {
        self.check_spmv_lengths(x, y);
        for (i, yi) in y.iter_mut().enumerate() {
            for k in self.row_ptr[i]..self.row_ptr[i + 1] {
                *yi += self.vals[k] * x[self.col_idx[k] as usize];
            }
        }
    }

    fn check_spmv_lengths(&self, x: &[f64], y: &[f64]) {
        assert_eq!(x.len(), self.n_cols, "spmv: x has the wrong length");
        assert_eq!(y.len(), self.n_rows, "spmv: y has the wrong length");
    }

    /// The entry `(i, j)` (summing repeats), 0 when not stored. `O(row length)`.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let (cols, vals) = self.row(i);
        cols.iter()
            .zip(vals)
            .filter(|(&c, _)| c as usize == j)
            .map(|(_, &v)| v)
            .sum()
    }

    /// Whether the matrix equals its transpose, entry for entry (an entry
    /// stored on one side only, or with another value, says no): what CG
    /// assumes of its matrix. `O(nnz log(row length))` and a transpose's
    /// memory, for a driver to check a file before solving with it.
    pub fn is_symmetric(&self) -> bool {
        if self.n_rows != self.n_cols {
            return false;
        }
        let t = self.transpose();
        let mut row: Vec<(u32, f64)> = Vec::new();
        (0..self.n_rows).all(|i| {
            let (cols, vals) = self.row(i);
            let (tcols, tvals) = t.row(i);
            if cols.len() != tcols.len() {
                return false;
            }
            row.clear();
            row.extend(cols.iter().copied().zip(vals.iter().copied()));
            row.sort_by_key(|e| e.0);
            // The transpose's rows are sorted by column.
            row.iter()
                .zip(tcols.iter().zip(tvals))
                .all(|(&(c, v), (&tc, &tv))| c == tc && v == tv)
        })
    }

    /// The transpose, columns sorted within each row (a counting sort, `O(nnz + n)`).
    ///
    /// # Panics
    /// If `n_rows > u32::MAX` (the rows become 32-bit column indices).
    pub fn transpose(&self) -> Csr {
        assert!(
            u32::try_from(self.n_rows).is_ok(),
            "transpose: {} rows do not fit the 32-bit column indices",
            self.n_rows
        );
        let mut row_ptr = vec![0usize; self.n_cols + 1];
        for &c in &self.col_idx {
            row_ptr[c as usize + 1] += 1;
        }
        for j in 0..self.n_cols {
            row_ptr[j + 1] += row_ptr[j];
        }
        let mut next = row_ptr.clone();
        let mut col_idx = vec![0u32; self.nnz()];
        let mut vals = vec![0.0; self.nnz()];
        for i in 0..self.n_rows {
            for k in self.row_ptr[i]..self.row_ptr[i + 1] {
                let c = self.col_idx[k] as usize;
                let dst = next[c];
                next[c] += 1;
                col_idx[dst] = i as u32;
                vals[dst] = self.vals[k];
            }
        }
        Csr {
            n_rows: self.n_cols,
            n_cols: self.n_rows,
            row_ptr,
            col_idx,
            vals,
            compact: None,
        }
    }
}

/// Rows shorter than this on average (entries per row) keep `u32` column indices by default
/// (`tessera spmv` and `SpmvMatrix::new`): the 16-bit gaps add an add per entry and a load per
/// row, which the 2 bytes saved per entry repay only on long rows. Measured with
/// `tessera spmv --gen G --iters 20 --workers 2 --compare-compact` (median `u32`/compact time,
/// 11 alternated rounds in one process, the 2-core EPYC VM; one to four runs each):
///
/// | matrix | entries per row | `u32`/compact |
/// | --- | --- | --- |
/// | `stencil7:150`, `stencil7:200` | 6.9 | 0.880–0.956 (4 runs) |
/// | `banded:3000000:6` | 13 | 0.945, 0.894 |
/// | `banded:3000000:8` | 17 | 0.984, 0.960 |
/// | `banded:3000000:10` | 21 | 0.891, 0.958, 1.051 |
/// | `banded:2000000:12` | 25 | 0.995, 1.084 |
/// | `stencil27:150`, `stencil27:200` | 26.6 | 1.037–1.104 (4 runs) |
/// | `banded:1500000:20` | 41 | 1.089, 0.999 |
///
/// With one worker (the core, not the memory, the limit) `stencil27:150` measured 0.977.
pub const COMPACT_MIN_ROW_LEN: usize = 24;

/// [`Csr::compact_pays`] from the counts alone: `nnz ≥ COMPACT_MIN_ROW_LEN · rows`.
pub fn compact_pays_for(nnz: usize, rows: usize) -> bool {
    nnz >= COMPACT_MIN_ROW_LEN.saturating_mul(rows)
}
