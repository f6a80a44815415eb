//! Compressed sparse row matrices with validated invariants, row blocks and nonzero-balanced
//! row partitions: the data the SpMV driver registers and splits.

use std::fmt;
use std::ops::Range;

use tessera_engine::device::{DevSlice, DevSliceMut, DeviceParts};
use tessera_engine::memory::DeviceData;

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

/// Why [`Csr::new`] refused its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsrError {
    /// `n_cols` does not fit the `u32` column indices.
    TooManyColumns {
        /// The requested column count.
        n_cols: usize,
    },
    /// `row_ptr` does not have `n_rows + 1` entries.
    RowPtrLength {
        /// `n_rows + 1`.
        expected: usize,
        /// `row_ptr.len()`.
        found: usize,
    },
    /// `row_ptr[0]` is not 0.
    RowPtrStart {
        /// `row_ptr[0]`.
        found: usize,
    },
    /// `row_ptr[row] > row_ptr[row + 1]`: the row would have a negative length.
    RowPtrDecreasing {
        /// The row.
        row: usize,
        /// `row_ptr[row]`.
        start: usize,
        /// `row_ptr[row + 1]`.
        end: usize,
    },
    /// `row_ptr[n_rows]`, `col_idx.len()` and `vals.len()` disagree.
    LengthMismatch {
        /// `row_ptr[n_rows]`.
        row_ptr_end: usize,
        /// `col_idx.len()`.
        col_idx: usize,
        /// `vals.len()`.
        vals: usize,
    },
    /// A column index is `≥ n_cols`.
    ColumnOutOfRange {
        /// The row holding it.
        row: usize,
        /// Its position in `col_idx`.
        entry: usize,
        /// The index.
        col: u32,
        /// The column count.
        n_cols: usize,
    },
}

impl fmt::Display for CsrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CsrError::TooManyColumns { n_cols } => write!(
                f,
                "{n_cols} columns do not fit the 32-bit column indices (at most {})",
                u32::MAX
            ),
            CsrError::RowPtrLength { expected, found } => write!(
                f,
                "row_ptr has {found} entries, expected n_rows + 1 = {expected}"
            ),
            CsrError::RowPtrStart { found } => {
                write!(f, "row_ptr[0] is {found}, expected 0")
            }
            CsrError::RowPtrDecreasing { row, start, end } => write!(
                f,
                "row {row}: row_ptr decreases from {start} to {end} (negative row length)"
            ),
            CsrError::LengthMismatch {
                row_ptr_end,
                col_idx,
                vals,
            } => write!(
                f,
                "row_ptr ends at {row_ptr_end} but col_idx has {col_idx} and vals {vals} entries"
            ),
            CsrError::ColumnOutOfRange {
                row,
                entry,
                col,
                n_cols,
            } => write!(
                f,
                "row {row}: column index {col} (entry {entry}) out of range 0..{n_cols}"
            ),
        }
    }
}

impl std::error::Error for CsrError {}

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
    /// from the row's first column (the first form, 1.037 and 1.015 on `stencil27:150`): a
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

/// A CSR block moves between memory nodes as its three arrays.
/// The `r` in `0..row_ptr.len()` with `row_ptr[r]` nearest to `target` (smaller `r` on ties;
/// among rows with equal offsets, the first).
fn nearest_row_boundary(row_ptr: &[usize], target: f64) -> usize {
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

/// [`Csr::partition_by_nnz`] from the row offsets alone (`row_ptr[0] = 0`, non-decreasing,
/// one entry more than rows): how a distributed run splits a matrix it has not built between
/// ranks.
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

impl tessera_engine::memory::Replicate for Csr {
    fn bytes(&self) -> usize {
        Csr::bytes(self)
    }

    /// A copy, compact column indices included: a host NUMA node's CPU workers read them
    /// there too. (A device's replica is its own memory, filled from `parts`: `u32` only.)
    fn replicate(&self) -> Self {
        self.clone()
    }

    fn copy_from(&mut self, src: &Self) {
        self.clone_from(src);
    }

    /// `row_ptr` (usize), `col_idx` (u32), `vals` (f64), in that order.
    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![
            bytemuck::cast_slice(&self.row_ptr),
            bytemuck::cast_slice(&self.col_idx),
            bytemuck::cast_slice(&self.vals),
        ])
    }

    /// Drops the compact column indices: the transfer overwrites the indices they mirror.
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        self.compact = None;
        Some(vec![
            bytemuck::cast_slice_mut(&mut self.row_ptr),
            bytemuck::cast_slice_mut(&mut self.col_idx),
            bytemuck::cast_slice_mut(&mut self.vals),
        ])
    }

    /// Rows and columns.
    fn dims(&self) -> [usize; 4] {
        [self.n_rows, self.n_cols, 0, 0]
    }
}

/// A CSR block in a device's own memory, read-only.
#[derive(Clone, Copy, Debug)]
pub struct DevCsr<'a> {
    /// Rows of the block.
    pub n_rows: usize,
    /// Columns (the length `x` must have).
    pub n_cols: usize,
    /// `n_rows + 1` offsets.
    pub row_ptr: DevSlice<'a, usize>,
    /// Column index of each nonzero.
    pub col_idx: DevSlice<'a, u32>,
    /// Value of each nonzero.
    pub vals: DevSlice<'a, f64>,
}

/// A CSR block in a device's own memory whose values a task may write; the
/// structure stays read-only, so the CSR invariants hold on the device too.
#[derive(Debug)]
pub struct DevCsrMut<'a> {
    /// Rows of the block.
    pub n_rows: usize,
    /// Columns.
    pub n_cols: usize,
    /// `n_rows + 1` offsets.
    pub row_ptr: DevSlice<'a, usize>,
    /// Column index of each nonzero.
    pub col_idx: DevSlice<'a, u32>,
    /// Value of each nonzero, writable.
    pub vals: DevSliceMut<'a, f64>,
}

impl DeviceData for Csr {
    type Ref<'a> = DevCsr<'a>;
    type Mut<'a> = DevCsrMut<'a>;

    fn view(mut parts: DeviceParts<'_>) -> Result<DevCsr<'_>, String> {
        let [n_rows, n_cols, ..] = parts.dims();
        Ok(DevCsr {
            n_rows,
            n_cols,
            row_ptr: parts.slice(0)?,
            col_idx: parts.slice(1)?,
            vals: parts.slice(2)?,
        })
    }

    fn view_mut(mut parts: DeviceParts<'_>) -> Result<DevCsrMut<'_>, String> {
        let [n_rows, n_cols, ..] = parts.dims();
        Ok(DevCsrMut {
            n_rows,
            n_cols,
            row_ptr: parts.slice(0)?,
            col_idx: parts.slice(1)?,
            vals: parts.slice_mut(2)?,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Proves that `Csr::new` accepts exactly the valid layouts and names the offending row,
    //! and that row blocks, fraction splits and nonzero partitions cut where documented.

    use super::*;

    /// [1 0 2; 0 0 0; 0 3 4; 5 0 0]
    fn small() -> Csr {
        Csr::new(
            4,
            3,
            vec![0, 2, 2, 4, 5],
            vec![0, 2, 1, 2, 0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0],
        )
        .unwrap()
    }

    #[test]
    fn compact_columns_mirror_the_indices_and_multiply_alike() {
        // A repeated column, an empty row, rows far from column 0, a row spanning 130,000
        // columns in gaps of at most 65,535.
        let a = Csr::new(
            4,
            200_000,
            vec![0, 3, 3, 5, 9],
            vec![5, 5, 65_540, 134_464, 199_999, 3, 65_538, 131_000, 131_001],
            vec![1.0, -2.0, 0.5, 3.0, 0.25, 1.5, -1.0, 2.0, 0.5],
        )
        .unwrap();
        let c = a.clone().with_compact_columns();
        let (first, gaps) = c
            .compact_columns()
            .expect("every row rises by at most 65,535 at a time");
        assert_eq!(first, [5, 0, 134_464, 3]);
        assert_eq!(gaps, [0, 0, 65_535, 0, 65_535, 0, 65_535, 65_462, 1]);
        for (i, (w, &f)) in a.row_ptr().windows(2).zip(first).enumerate() {
            let cols = gaps[w[0]..w[1]].iter().scan(f, |c, &g| {
                *c += u32::from(g);
                Some(*c)
            });
            assert!(cols.eq(a.col_idx()[w[0]..w[1]].iter().copied()), "row {i}");
        }
        assert_eq!(c, a, "equality compares the matrices");
        let x: Vec<f64> = (0..200_000).map(|i| (i as f64 * 0.001).sin()).collect();
        let (mut y0, mut y1) = (vec![1.0; 4], vec![1.0; 4]);
        a.spmv(&x, &mut y0);
        c.spmv(&x, &mut y1);
        assert_eq!(
            y0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            y1.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // A block cut from it does not inherit them (its rows are rebuilt).
        assert!(c.row_block(0..2).compact_columns().is_none());
    }

    #[test]
    fn a_wide_gap_or_an_unsorted_row_keeps_u32() {
        let row = |cols: Vec<u32>| Csr::new(1, 70_000, vec![0, 2], cols, vec![1.0, 1.0]).unwrap();
        let compact = |cols: Vec<u32>| row(cols).with_compact_columns().compact_columns().is_some();
        assert!(compact(vec![1, 65_536]), "a gap of 65,535");
        assert!(!compact(vec![1, 65_537]), "a gap of 65,536");
        assert!(!compact(vec![5, 4]), "a decreasing row");
        // No rows, or rows without entries: nothing to hold.
        let empty = Csr::zeros(3, 10).unwrap().with_compact_columns();
        assert_eq!(empty.compact_columns(), Some((&[0u32, 0, 0][..], &[][..])));
    }

    #[test]
    fn compact_pays_from_24_entries_per_row() {
        assert!(compact_pays_for(24 * 1000, 1000));
        assert!(!compact_pays_for(24 * 1000 - 1, 1000));
        assert!(compact_pays_for(0, 0), "no rows: nothing to lose");
        assert!(!small().compact_pays(), "5 entries in 4 rows");
        let dense = Csr::new(1, 24, vec![0, 24], (0..24).collect(), vec![1.0; 24]).unwrap();
        assert!(dense.compact_pays());
    }

    #[test]
    fn a_transfer_into_the_matrix_drops_its_compact_columns() {
        use tessera_engine::memory::Replicate;
        let mut c = small().with_compact_columns();
        assert!(c.compact_columns().is_some());
        let replica = c.replicate();
        assert_eq!(
            replica.compact_columns(),
            c.compact_columns(),
            "a host copy keeps them"
        );
        assert_eq!(replica, c);
        let _ = c.parts_mut();
        assert!(c.compact_columns().is_none());
    }

    #[test]
    fn accepts_valid_and_reports_sizes() {
        let a = small();
        assert_eq!((a.n_rows(), a.n_cols(), a.nnz()), (4, 3, 5));
        assert_eq!(a.bytes(), 5 * 8 + 5 * 4 + 5 * 8);
        assert_eq!(a.get(2, 2), 4.0);
        assert_eq!(a.get(1, 1), 0.0);
        let z = Csr::zeros(0, 0).unwrap();
        assert_eq!(z.nnz(), 0);
        assert_eq!(z.partition_by_nnz(3), vec![0..0, 0..0, 0..0]);
    }

    #[test]
    fn rejects_bad_layouts_naming_the_row() {
        let e = |r: Result<Csr, CsrError>| r.unwrap_err().to_string();
        assert_eq!(
            e(Csr::new(2, 3, vec![0, 1], vec![0], vec![1.0])),
            "row_ptr has 2 entries, expected n_rows + 1 = 3"
        );
        assert_eq!(
            e(Csr::new(1, 3, vec![1, 1], vec![0], vec![1.0])),
            "row_ptr[0] is 1, expected 0"
        );
        assert_eq!(
            e(Csr::new(3, 3, vec![0, 2, 1, 2], vec![0, 1], vec![1.0; 2])),
            "row 1: row_ptr decreases from 2 to 1 (negative row length)"
        );
        assert_eq!(
            e(Csr::new(1, 3, vec![0, 2], vec![0, 1], vec![1.0])),
            "row_ptr ends at 2 but col_idx has 2 and vals 1 entries"
        );
        // Entry 2 is in row 2 (row 1 is empty): the message must skip the empty row.
        assert_eq!(
            e(Csr::new(
                3,
                3,
                vec![0, 2, 2, 3],
                vec![0, 1, 3],
                vec![1.0; 3]
            )),
            "row 2: column index 3 (entry 2) out of range 0..3"
        );
        let big = u32::MAX as usize + 1;
        assert_eq!(
            e(Csr::new(0, big, vec![0], vec![], vec![])),
            format!("{big} columns do not fit the 32-bit column indices (at most 4294967295)")
        );
    }

    #[test]
    fn row_block_rebases() {
        let a = small();
        let b = a.row_block(1..4);
        assert_eq!(b.row_ptr(), &[0, 0, 2, 3]);
        assert_eq!(b.col_idx(), &[1, 2, 0]);
        assert_eq!(b.n_cols(), 3);
        let x = [1.0, 10.0, 100.0];
        let mut full = vec![0.0; 4];
        a.spmv_reference(&x, &mut full);
        let mut part = vec![0.0; 3];
        b.spmv(&x, &mut part);
        assert_eq!(part, full[1..4]);
        assert_eq!(a.row_block(2..2).nnz(), 0);
    }

    #[test]
    fn split_at_fraction() {
        let a = small(); // row_ptr 0 2 2 4 5
        assert_eq!(a.split_rows_at_fraction(0.0), 0);
        assert_eq!(a.split_rows_at_fraction(f64::NAN), 0);
        assert_eq!(a.split_rows_at_fraction(1.0), 4);
        assert_eq!(a.split_rows_at_fraction(7.0), 4);
        // 0.4·5 = 2: rows 1 and 2 both start at 2; the first is taken.
        assert_eq!(a.split_rows_at_fraction(0.4), 1);
        // 0.6·5 = 3: 2 and 4 are equally near; the smaller row wins.
        assert_eq!(a.split_rows_at_fraction(0.6), 1);
        assert_eq!(a.split_rows_at_fraction(0.7), 3);
        assert_eq!(a.split_rows_at_fraction(0.9), 3);
        assert_eq!(a.split_rows_at_fraction(0.95), 4);
    }

    #[test]
    fn partition_nonempty_when_enough_rows() {
        // One heavy row first: nearest boundaries would give empty parts; clamping must not.
        let mut row_ptr = vec![0, 100];
        for _ in 0..5 {
            row_ptr.push(row_ptr.last().unwrap() + 1);
        }
        let nnz = *row_ptr.last().unwrap();
        let a = Csr::new(6, 1, row_ptr, vec![0; nnz], vec![1.0; nnz]).unwrap();
        let p = a.partition_by_nnz(6);
        assert_eq!(p, (0..6).map(|i| i..i + 1).collect::<Vec<_>>());
        let p = a.partition_by_nnz(3);
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|r| !r.is_empty()));
        assert_eq!(p[0], 0..1);
        // Fewer rows than parts: trailing empty ranges.
        let p = small().partition_by_nnz(6);
        assert_eq!(p, vec![0..1, 1..2, 2..3, 3..4, 4..4, 4..4]);
    }

    #[test]
    fn transpose_round_trip() {
        let a = small();
        let t = a.transpose();
        assert_eq!((t.n_rows(), t.n_cols()), (3, 4));
        assert_eq!(t.get(2, 2), 4.0);
        assert_eq!(t.get(0, 3), 5.0);
        assert_eq!(t.transpose(), a);
    }

    /// Issue 42, item 10: CG ran on matrices that are not symmetric without
    /// a word; `is_symmetric` is what the driver now checks.
    #[test]
    fn symmetry_is_told_entry_for_entry() {
        let m = |rows: &[&[(u32, f64)]]| {
            let mut row_ptr = vec![0];
            let (mut cols, mut vals) = (Vec::new(), Vec::new());
            for r in rows {
                for &(c, v) in *r {
                    cols.push(c);
                    vals.push(v);
                }
                row_ptr.push(cols.len());
            }
            Csr::new(rows.len(), rows.len(), row_ptr, cols, vals).unwrap()
        };
        // Unsorted rows are fine.
        assert!(m(&[&[(1, 2.0), (0, 1.0)], &[(0, 2.0), (1, 3.0)]]).is_symmetric());
        assert!(!m(&[&[(0, 1.0), (1, 2.0)], &[(0, 2.5), (1, 3.0)]]).is_symmetric());
        assert!(!m(&[&[(0, 1.0), (1, 2.0)], &[(1, 3.0)]]).is_symmetric());
        assert!(!small().is_symmetric());
    }
}
