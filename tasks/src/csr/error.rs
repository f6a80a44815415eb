//! Why [`Csr::new`](super::Csr::new) refused its parts: one variant per invariant of
//! [`Csr`](super::Csr), each naming the row or entry that breaks it.

use std::fmt;

/// Why [`Csr::new`](super::Csr::new) refused its parts.
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
