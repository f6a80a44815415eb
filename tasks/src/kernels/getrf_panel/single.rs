//! GETRF on a panel: LU with partial pivoting of one column of tiles, LAPACK-style pivots.

use std::fmt;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Mat, MatMut, MatRef, Par};

use crate::kernels::gemm::{gemm_minus_blocked, gemm_row_block};
use crate::tile::Tile;

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

/// Factors the panel `P·A = L·U` in place, with partial pivoting over all its rows.
///
/// `panel` is a column of tiles (tile rows `k..mt` of tile column `k`), top to bottom, all
/// with the same number of columns `w`; the first one holds the diagonal. Its `m` rows
/// (the sum of the tiles' rows) are treated as one `m × w` matrix. On return the panel holds
/// `L` strictly below the diagonal (unit diagonal implicit) and `U` on and above it, with
/// its rows interchanged as `dgetrf` leaves them.
///
/// Returns `ipiv` of length `min(m, w)`, 0-based and relative to the panel's first row: at
/// step `i` row `i` was swapped with row `ipiv[i] >= i` (dgetrf's `IPIV` minus one).
///
/// # Errors
/// [`SingularColumn`] naming global column `col0 + j` when the pivot of local column `j` is an
/// exact zero (the first such column). The tiles then hold a partly factored panel.
///
/// # Panics
/// If the tiles do not all have the same number of columns.
///
/// A nonzero pivot below `f64::MIN_POSITIVE` (subnormal) is accepted, but its reciprocal
/// overflows: the column is scaled by the reciprocal (as faer does) where LAPACK would
/// divide, so such a panel gets non-finite multipliers. Pivots of normal magnitude, however
/// tiny, are fine.
///
/// Chosen design: a sequential recursive LU (LAPACK's `dgetrf2` scheme: halve the columns,
/// factor the left half, update the right half with one TRSM and one GEMM per tile, factor
/// it, swap the left half's rows) whose leaves (at most [`LEAF`] columns) are an unblocked
/// right-looking LU, all on the tiles where they lie: no copy, and the only workspace is
/// `O(w + tiles)`, sized once per call. It runs on the calling worker's core only, with no
/// thread outside the engine. When the first tile is shorter than `min(m, w)` (not a
/// layout the LU makes) the panel is copied into one contiguous matrix instead. Measured
/// against faer's recursive `lu_in_place` (the previous kernel, [`getrf_panel_faer`]) and
/// OpenBLAS `dgetrf` on the same panel by `bench/peers/lu_kernels.sh`; the figures are in
/// the module doc of `bench/src/cmd/lu_kernels.rs`.
pub fn getrf_panel(panel: &mut [&mut Tile], col0: usize) -> Result<Vec<usize>, SingularColumn> {
    let Some(first) = panel.first() else {
        return Ok(Vec::new());
    };
    let w = first.cols();
    assert!(
        panel.iter().all(|t| t.cols() == w),
        "getrf_panel: all tiles of a panel must have {w} columns"
    );
    let m: usize = panel.iter().map(|t| t.rows()).sum();
    let k = m.min(w);
    let mut ipiv = vec![0usize; k];
    let singular = |j| SingularColumn { column: col0 + j };
    if first.rows() >= k {
        TiledPanel::new(panel)
            .factor(0, w, &mut ipiv)
            .map_err(singular)?;
        return Ok(ipiv);
    }
    let mut buf = vec![0.0; m * w];
    for j in 0..w {
        let dst = &mut buf[j * m..(j + 1) * m];
        let mut row = 0;
        for t in panel.iter() {
            dst[row..row + t.rows()].copy_from_slice(t.col(j));
            row += t.rows();
        }
    }
    recursive_lu(&mut buf, m, m, w, &mut ipiv).map_err(singular)?;
    for j in 0..w {
        let src = &buf[j * m..(j + 1) * m];
        let mut row = 0;
        for t in panel.iter_mut() {
            let r = t.rows();
            t.col_mut(j).copy_from_slice(&src[row..row + r]);
            row += r;
        }
    }
    Ok(ipiv)
}

/// A panel factored where it lies: its tiles as consecutive row segments of one `m × w`
/// matrix, the first of which holds every diagonal block (`tiles[0].rows() >= min(m, w)`),
/// so each TRSM and the `B` of each GEMM sit in one tile.
struct TiledPanel<'p, 't> {
    tiles: &'p mut [&'t mut Tile],
    /// `starts[s]`: the panel row where tile `s` begins.
    starts: Vec<usize>,
    m: usize,
    /// The pivot row of the current leaf step, read once before the rank-1 update.
    urow: Vec<f64>,
}

impl<'p, 't> TiledPanel<'p, 't> {
    fn new(tiles: &'p mut [&'t mut Tile]) -> Self {
        let mut starts = Vec::with_capacity(tiles.len());
        let mut m = 0;
        for t in tiles.iter() {
            starts.push(m);
            m += t.rows();
        }
        let w = tiles[0].cols();
        TiledPanel {
            tiles,
            starts,
            m,
            urow: vec![0.0; w],
        }
    }

    /// The tile holding panel row `row < m`, and the row within it.
    fn locate(&self, row: usize) -> (usize, usize) {
        let s = self.starts.partition_point(|&st| st <= row) - 1;
        (s, row - self.starts[s])
    }

    /// LU of rows `d..m`, columns `d..d+n` (`dgetrf2`'s recursion); `ipiv` gets the pivot
    /// rows (panel rows) of steps `d..d+min(m−d, n)`. `Err(j)`: zero pivot in panel column `j`.
    fn factor(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), usize> {
        let k = (self.m - d).min(n);
        if k <= LEAF || n <= LEAF {
            return self.leaf(d, n, ipiv);
        }
        let n1 = split_columns(k);
        let n2 = n - n1;
        self.factor(d, n1, &mut ipiv[..n1])?;
        self.swap_rows(d + n1, n2, d, &ipiv[..n1]);
        self.update(d, n1, n2);
        self.factor(d + n1, n2, &mut ipiv[n1..k])?;
        self.swap_rows(d, n1, d + n1, &ipiv[n1..k]);
        Ok(())
    }

    /// `A12 := L11⁻¹ A12`, then `A22 -= A21 · A12`, for the split of rows `d..m`, columns
    /// `d..d+n1+n2` after `n1` columns. `L11` and `A12` lie in tile 0 (rows `d..d+n1`).
    fn update(&mut self, d: usize, n1: usize, n2: usize) {
        let (first, rest) = self.tiles.split_first_mut().expect("a panel has tiles");
        let (left, right) = first.as_mut().split_at_col_mut(d + n1);
        let left = left.rb().subcols(d, n1);
        let right = right.subcols_mut(0, n2);
        let (l_top, a21) = left.split_at_row(d + n1);
        let (a12, mut a22) = right.split_at_row_mut(d + n1);
        let mut a12 = a12.subrows_mut(d, n1);
        solve_unit_lower_triangular_in_place(l_top.subrows(d, n1), a12.rb_mut(), Par::Seq);
        let a12 = a12.rb();
        let rows = gemm_row_block(a21.nrows(), n1);
        gemm_minus_blocked(a22.rb_mut(), a21, a12, rows);
        for t in rest.iter_mut().filter(|t| t.rows() > 0) {
            let (l, r) = t.as_mut().split_at_col_mut(d + n1);
            let rows = gemm_row_block(l.nrows(), n1);
            gemm_minus_blocked(r.subcols_mut(0, n2), l.rb().subcols(d, n1), a12, rows);
        }
    }

    /// Unblocked right-looking LU (`dgetf2`) of rows `d..m`, columns `d..d+n`.
    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), usize> {
        let steps = (self.m - d).min(n);
        for (j, slot) in ipiv.iter_mut().enumerate().take(steps) {
            let (row, col) = (d + j, d + j);
            let (s0, l0) = self.locate(row);
            // Pivot: the first row of largest magnitude (idamax over the tiles in order).
            let (mut best, mut p) = (-1.0, row);
            for s in s0..self.tiles.len() {
                let from = if s == s0 { l0 } else { 0 };
                let c = &self.tiles[s].col(col)[from..];
                if c.is_empty() {
                    continue;
                }
                let i = iamax(c);
                if c[i].abs() > best {
                    (best, p) = (c[i].abs(), self.starts[s] + from + i);
                }
            }
            *slot = p;
            let (sp, lp) = self.locate(p);
            let pivot = self.tiles[sp].col(col)[lp];
            if pivot == 0.0 {
                return Err(col);
            }
            if p != row {
                self.swap_rows(d, n, row, &[p]);
            }
            let end = d + n;
            for c in col + 1..end {
                self.urow[c] = self.tiles[s0].col(c)[l0];
            }
            let inv = pivot.recip();
            for s in s0..self.tiles.len() {
                let from = if s == s0 { l0 + 1 } else { 0 };
                let t = &mut *self.tiles[s];
                let ld = t.rows();
                if from >= ld {
                    continue;
                }
                let data = t.as_mut_slice();
                let (head, tail) = data.split_at_mut((col + 1) * ld);
                let l = &mut head[col * ld + from..];
                for x in l.iter_mut() {
                    *x *= inv;
                }
                let l = &*l;
                for c in col + 1..end {
                    let u = self.urow[c];
                    if u != 0.0 {
                        let base = (c - col - 1) * ld;
                        for (x, &y) in tail[base + from..base + ld].iter_mut().zip(l) {
                            *x -= y * u;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Swaps panel row `first + i` with row `ipiv[i]`, in order, in columns `c0..c0+cols`.
    fn swap_rows(&mut self, c0: usize, cols: usize, first: usize, ipiv: &[usize]) {
        for (i, &p) in ipiv.iter().enumerate() {
            let r = first + i;
            if p == r {
                continue;
            }
            let ((sa, ra), (sb, rb)) = (self.locate(r), self.locate(p));
            if sa == sb {
                let t = &mut *self.tiles[sa];
                let ld = t.rows();
                let data = t.as_mut_slice();
                for c in c0..c0 + cols {
                    data.swap(ra + c * ld, rb + c * ld);
                }
            } else {
                let (lo, hi) = self.tiles.split_at_mut(sb.max(sa));
                let (a, b) = if sa < sb {
                    (&mut *lo[sa], &mut *hi[0])
                } else {
                    (&mut *hi[0], &mut *lo[sb])
                };
                let (lda, ldb) = (a.rows(), b.rows());
                let (a, b) = (a.as_mut_slice(), b.as_mut_slice());
                for c in c0..c0 + cols {
                    std::mem::swap(&mut a[ra + c * lda], &mut b[rb + c * ldb]);
                }
            }
        }
    }
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

/// Widest block factored by the unblocked leaves of the recursive panel. Chosen from
/// `tessera lu-kernels --what panel` runs with 8, 12, 16 and 24 (N=8192, w=448, alternated,
/// load ~4): 33.4–34.6 GFLOP/s at 8, 33.7–34.0 at 12, 28.9–32.9 at 16, 21.6–32.6 at 24.
pub const LEAF: usize = 8;

/// LU with partial pivoting of the column-major `m × n` matrix in `a` (leading dimension
/// `ld >= m`), LAPACK `dgetrf2`'s recursion: the contiguous fallback of [`getrf_panel`]. `ipiv` (length `min(m, n)`) gets 0-based
/// transpositions relative to row 0. `Err(j)`: the pivot of local column `j` is an exact
/// zero; `a` is then partly factored.
pub(super) fn recursive_lu(
    a: &mut [f64],
    ld: usize,
    m: usize,
    n: usize,
    ipiv: &mut [usize],
) -> Result<(), usize> {
    let k = m.min(n);
    if k <= LEAF || n <= LEAF {
        return unblocked_lu(a, ld, m, n, ipiv);
    }
    let n1 = split_columns(k);
    let n2 = n - n1;
    let (left, right) = a.split_at_mut(n1 * ld);
    recursive_lu(left, ld, m, n1, &mut ipiv[..n1])?;
    swap_rows(right, ld, n2, &ipiv[..n1], 0);
    {
        let l11 = MatRef::from_column_major_slice_with_stride(&left[..], m, n1, ld);
        let r = MatMut::from_column_major_slice_with_stride_mut(&mut right[..], m, n2, ld);
        let (mut a12, mut a22) = r.split_at_row_mut(n1);
        solve_unit_lower_triangular_in_place(l11.get(..n1, ..), a12.rb_mut(), Par::Seq);
        let a21 = l11.get(n1.., ..);
        // One call: a tall product takes faer's packed, cache-blocked path.
        gemm_minus_blocked(a22.rb_mut(), a21, a12.rb(), 0);
    }
    let k2 = k - n1;
    recursive_lu(&mut right[n1..], ld, m - n1, n2, &mut ipiv[n1..k]).map_err(|j| j + n1)?;
    for p in &mut ipiv[n1..k] {
        *p += n1;
    }
    debug_assert_eq!(k2, ipiv[n1..k].len());
    swap_rows(left, ld, n1, &ipiv[n1..k], n1);
    Ok(())
}

/// Unblocked right-looking LU with partial pivoting (`dgetf2`) of the `m × n` matrix in `a`.
pub(super) fn unblocked_lu(
    a: &mut [f64],
    ld: usize,
    m: usize,
    n: usize,
    ipiv: &mut [usize],
) -> Result<(), usize> {
    for j in 0..m.min(n) {
        let p = j + iamax(&a[j * ld + j..j * ld + m]);
        ipiv[j] = p;
        let pivot = a[j * ld + p];
        if pivot == 0.0 {
            return Err(j);
        }
        if p != j {
            for c in 0..n {
                a.swap(c * ld + j, c * ld + p);
            }
        }
        let inv = pivot.recip();
        let split = ((j + 1) * ld).min(a.len());
        let (head, tail) = a.split_at_mut(split);
        let l = &mut head[j * ld + j + 1..j * ld + m];
        for x in l.iter_mut() {
            *x *= inv;
        }
        let l = &*l;
        for c in 0..n - j - 1 {
            let col = &mut tail[c * ld..c * ld + m];
            let u = col[j];
            if u != 0.0 {
                for (x, &y) in col[j + 1..].iter_mut().zip(l) {
                    *x -= y * u;
                }
            }
        }
    }
    Ok(())
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

/// Applies the transpositions `ipiv` (row `first + i` with row `ipiv[i]`, in order) to the
/// first `cols` columns of the column-major block `a` with leading dimension `ld`.
fn swap_rows(a: &mut [f64], ld: usize, cols: usize, ipiv: &[usize], first: usize) {
    for c in 0..cols {
        let col = &mut a[c * ld..];
        for (i, &p) in ipiv.iter().enumerate() {
            col.swap(first + i, p);
        }
    }
}

/// The previous panel kernel, kept as the baseline `tessera lu-kernels` measures against:
/// faer's recursive partial-pivoting LU (`lu_in_place`, sequential) on a contiguous copy,
/// its row permutation turned back into LAPACK transpositions.
pub fn getrf_panel_faer(
    panel: &mut [&mut Tile],
    col0: usize,
) -> Result<Vec<usize>, SingularColumn> {
    let Some(first) = panel.first() else {
        return Ok(Vec::new());
    };
    let w = first.cols();
    assert!(
        panel.iter().all(|t| t.cols() == w),
        "getrf_panel: all tiles of a panel must have {w} columns"
    );
    let m: usize = panel.iter().map(|t| t.rows()).sum();
    let size = m.min(w);

    let mut lu = Mat::<f64>::zeros(m, w);
    for j in 0..w {
        let dst = lu.col_as_slice_mut(j);
        let mut row = 0;
        for t in panel.iter() {
            dst[row..row + t.rows()].copy_from_slice(t.col(j));
            row += t.rows();
        }
    }

    let mut perm = vec![0usize; m];
    let mut perm_inv = vec![0usize; m];
    let scratch = lu_in_place_scratch::<usize, f64>(m, w, Par::Seq, Default::default());
    let mut buf = MemBuffer::new(scratch);
    lu_in_place(
        lu.as_mut(),
        &mut perm,
        &mut perm_inv,
        Par::Seq,
        MemStack::new(&mut buf),
        Default::default(),
    );
    if let Some(j) = (0..size).find(|&j| lu[(j, j)] == 0.0) {
        return Err(SingularColumn { column: col0 + j });
    }
    for j in 0..w {
        let src = lu.col_as_slice(j);
        let mut row = 0;
        for t in panel.iter_mut() {
            let r = t.rows();
            t.col_mut(j).copy_from_slice(&src[row..row + r]);
            row += r;
        }
    }
    Ok(perm_to_ipiv(&perm, size))
}

/// Turns a row permutation (`perm[i]` = original row now at position `i`) into the first
/// `steps` LAPACK transpositions that produce it.
///
/// The transpositions are unique: step `i` must bring row `perm[i]` to position `i`, and
/// later steps never touch position `i` again (they swap positions `>= i + 1`). So when
/// `perm` came from `steps` transpositions with `ipiv[i] >= i`, this gives them back exactly.
pub(crate) fn perm_to_ipiv(perm: &[usize], steps: usize) -> Vec<usize> {
    let m = perm.len();
    // at[p] = original row at position p; pos[r] = position of original row r.
    let mut at: Vec<usize> = (0..m).collect();
    let mut pos: Vec<usize> = (0..m).collect();
    let mut ipiv = Vec::with_capacity(steps);
    for (i, &row) in perm.iter().enumerate().take(steps) {
        let p = pos[row];
        debug_assert!(p >= i);
        ipiv.push(p);
        at.swap(i, p);
        pos[at[i]] = i;
        pos[at[p]] = p;
    }
    ipiv
}

/// Flops of an `m × n` LU factorisation, LAPACK's count (`dopla` for GETRF):
/// `K·k² − k³/3 − k²/2 + 5k/6` with `k = min(m, n)`, `K = max(m, n)`.
pub fn getrf_panel_flops(m: usize, n: usize) -> f64 {
    let (k, big) = (m.min(n) as f64, m.max(n) as f64);
    big * k * k - k * k * k / 3.0 - k * k / 2.0 + 5.0 * k / 6.0
}

#[cfg(test)]
mod tests;
