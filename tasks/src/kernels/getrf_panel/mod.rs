//! GETRF on a panel: LU with partial pivoting of one column of tiles, LAPACK-style pivots,
//! on one core ([`getrf_panel`]), by a team of workers ([`TeamPanel`]), spread over the
//! ranks of a process column ([`getrf_panel_dist`]), or both ([`DistTeamPanel`]).
//!
//! Every panel runs one recursion, [`factor`] (LAPACK `dgetrf2`'s: halve the columns, factor
//! the left half, update the right half, factor it), generic over a [`Strategy`] that
//! supplies what differs: who owns which rows, how a leaf finds its pivot (a scan, or one
//! reduced across team members or ranks), how rows are exchanged (deferred per half, or
//! whole rows in the leaf), and who makes which TRSM and GEMM calls. Each strategy makes
//! the single-core kernel's floating-point operations on the same operands in the same
//! order, so all give its pivots and bits (the tests beside each strategy check this bit
//! for bit).

use std::fmt;

use crate::tile::Tile;

mod claims;
mod dist;
mod dist_team;
mod single;
mod team;

pub use dist::{getrf_panel_dist, ColumnExchange, DistPanelError};
pub use dist_team::DistTeamPanel;
pub use single::{getrf_panel, getrf_panel_faer, getrf_panel_flops};
pub use team::TeamPanel;

/// An exact zero pivot: the matrix is singular (LAPACK's `info > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SingularColumn {
    /// Global, 0-based column where the first exact zero pivot appeared.
    pub column: usize,
}

impl fmt::Display for SingularColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "matrix is singular: exact zero pivot in column {}",
            self.column
        )
    }
}

impl std::error::Error for SingularColumn {}

/// Widest block factored by the unblocked leaves of the recursive panel. Chosen from
/// `tessera lu-kernels --what panel` runs with 8, 12, 16 and 24 (N=8192, w=448, alternated,
/// load ~4): 33.4–34.6 GFLOP/s at 8, 33.7–34.0 at 12, 28.9–32.9 at 16, 21.6–32.6 at 24.
pub const LEAF: usize = 8;

/// What one way of factoring a panel supplies to the recursion ([`factor`]). Rows and columns
/// are panel rows and columns, `0..rows()` and `0..w`; a strategy is driven from one thread
/// (each member of a team drives its own, SPMD).
pub(super) trait Strategy {
    /// What ends the factorisation early: a zero pivot (its panel column), or a failed
    /// exchange.
    type Error;

    /// Rows of the whole panel.
    fn rows(&self) -> usize;

    /// Unblocked right-looking LU (`dgetf2`) of rows `d..rows()`, columns `d..d+n`: `ipiv`
    /// (length `min(rows() − d, n)`) gets the pivot rows (panel rows) of steps `d..`.
    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), Self::Error>;

    /// Swaps panel row `first + i` with row `ipiv[i]`, in order, in columns `c0..c0+cols`:
    /// the interchanges a leaf chose, applied to the columns it did not hold. A strategy
    /// whose leaves exchange whole rows (all `w` columns) does nothing here.
    fn interchange(&mut self, c0: usize, cols: usize, first: usize, ipiv: &[usize]);

    /// `A12 := L11⁻¹ A12`, then `A22 −= A21·A12`, for the split of rows `d..rows()`, columns
    /// `d..d+n1+n2`, after `n1` columns: the single-core kernel's faer calls.
    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), Self::Error>;
}

/// LU of rows `d..rows()`, columns `d..d+n` (`dgetrf2`'s recursion): `ipiv` gets the pivot
/// rows (panel rows) of steps `d..d+min(rows()−d, n)`. The split points and leaves are the
/// same for every strategy, which is what makes their bits the same.
pub(super) fn factor<S: Strategy>(
    s: &mut S,
    d: usize,
    n: usize,
    ipiv: &mut [usize],
) -> Result<(), S::Error> {
    let k = (s.rows() - d).min(n);
    if k <= LEAF || n <= LEAF {
        return s.leaf(d, n, ipiv);
    }
    let n1 = split_columns(k);
    let n2 = n - n1;
    factor(s, d, n1, &mut ipiv[..n1])?;
    s.interchange(d + n1, n2, d, &ipiv[..n1]);
    s.update(d, n1, n2)?;
    factor(s, d + n1, n2, &mut ipiv[n1..k])?;
    s.interchange(d, n1, d + n1, &ipiv[n1..k]);
    Ok(())
}

/// Columns of the left half when a recursion step splits `k` pivots: half, rounded down
/// to a multiple of 8 (whole vectors of `U` for the GEMM) once the blocks are wide.
pub(super) fn split_columns(k: usize) -> usize {
    if k >= 4 * LEAF {
        k / 2 / 8 * 8
    } else {
        k / 2
    }
}

/// The tile holding panel row `row`, and the row within it, for tiles beginning at panel
/// rows `starts` (increasing, `starts[0] <= row`).
pub(super) fn locate(starts: &[usize], row: usize) -> (usize, usize) {
    let s = starts.partition_point(|&st| st <= row) - 1;
    (s, row - starts[s])
}

/// Index of the first entry of largest magnitude (BLAS `idamax`, 0-based); 0 for an empty
/// or all-NaN slice. Two passes: a lane-wise maximum the compiler vectorises, then the
/// first index that reaches it.
pub(super) fn iamax(x: &[f64]) -> usize {
    const LANES: usize = 8;
    let mut best = [-1.0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (b, v) in best.iter_mut().zip(c) {
            let v = v.abs();
            *b = if v > *b { v } else { *b };
        }
    }
    let mut max = best.iter().fold(-1.0f64, |m, &b| if b > m { b } else { m });
    for v in rest {
        max = if v.abs() > max { v.abs() } else { max };
    }
    x.iter().position(|v| v.abs() == max).unwrap_or(0)
}

/// One elimination step on one block of rows of a leaf: scales the multipliers `l` by `inv`
/// (the pivot's reciprocal), then subtracts `l · u` from each column `x` that comes with its
/// pivot-row entry `u` (none where `u == 0`). The rows are independent, so each entry gets
/// the same two operations whichever block, member or rank holds it.
#[inline(always)]
pub(super) fn eliminate<'c>(
    l: &mut [f64],
    inv: f64,
    columns: impl Iterator<Item = (f64, &'c mut [f64])>,
) {
    for x in l.iter_mut() {
        *x *= inv;
    }
    let l = &*l;
    for (u, x) in columns {
        if u != 0.0 {
            for (x, &y) in x.iter_mut().zip(l) {
                *x -= y * u;
            }
        }
    }
}

/// [`eliminate`] on rows `from..` of tile `t`: its column `col` holds the multipliers, and
/// `u` the pivot row's entries in columns `col+1..col+1+u.len()`. Nothing when `from` is
/// past the tile.
#[inline]
pub(super) fn eliminate_tile(t: &mut Tile, from: usize, col: usize, inv: f64, u: &[f64]) {
    let ld = t.rows();
    if from >= ld {
        return;
    }
    let (head, tail) = t.as_mut_slice().split_at_mut((col + 1) * ld);
    let columns = tail.chunks_exact_mut(ld).map(|x| &mut x[from..]);
    eliminate(
        &mut head[col * ld + from..],
        inv,
        u.iter().copied().zip(columns),
    );
}
