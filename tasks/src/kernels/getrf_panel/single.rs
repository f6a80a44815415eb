//! The single-core panel: [`getrf_panel`]'s strategies for the recursion (the tiles where
//! they lie, or one contiguous copy), the unblocked leaf they share with the team panel, and
//! faer's panel as the baseline it is measured against.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Mat, MatMut, MatRef, Par};

use super::{eliminate, eliminate_tile, factor, iamax, locate, SingularColumn, Strategy};
use crate::kernels::gemm::{gemm_minus_blocked, gemm_row_block};
use crate::tile::Tile;

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
/// it, swap the left half's rows) whose leaves (at most [`LEAF`](super::LEAF) columns) are an unblocked
/// right-looking LU, all on the tiles where they lie: no copy, and the only workspace is
/// `O(w + tiles)`, sized once per call. It runs on the calling worker's core only, with no
/// thread outside the engine. When the first tile is shorter than `min(m, w)` (not a
/// layout the LU makes) the panel is copied into one contiguous matrix instead. Measured
/// against faer's recursive `lu_in_place` (the previous kernel, [`getrf_panel_faer`]) and
/// OpenBLAS `dgetrf` on the same panel by `bench/peers/lu_kernels.sh`; the figures are in
/// the module doc of `bench/src/cmd/lu_kernels.rs`.
pub fn getrf_panel(panel: &mut [&mut Tile], col0: usize) -> Result<Vec<usize>, SingularColumn> {
    let Some((m, w)) = shape(panel) else {
        return Ok(Vec::new());
    };
    let k = m.min(w);
    let mut ipiv = vec![0usize; k];
    let singular = |j| SingularColumn { column: col0 + j };
    if panel[0].rows() >= k {
        factor(&mut TiledPanel::new(panel), 0, w, &mut ipiv).map_err(singular)?;
        return Ok(ipiv);
    }
    let mut buf = vec![0.0; m * w];
    for j in 0..w {
        gather(panel, j, &mut buf[j * m..(j + 1) * m]);
    }
    factor_contiguous(&mut buf, m, w, &mut ipiv).map_err(singular)?;
    for j in 0..w {
        scatter(panel, j, &buf[j * m..(j + 1) * m]);
    }
    Ok(ipiv)
}

/// The panel's rows `m` and columns `w`; `None` for a panel of no tiles.
///
/// # Panics
/// If the tiles do not all have the same number of columns.
fn shape(panel: &[&mut Tile]) -> Option<(usize, usize)> {
    let w = panel.first()?.cols();
    assert!(
        panel.iter().all(|t| t.cols() == w),
        "getrf_panel: all tiles of a panel must have {w} columns"
    );
    Some((panel.iter().map(|t| t.rows()).sum(), w))
}

/// Copies column `j` of the panel, top to bottom, into `dst` (the panel's rows).
fn gather(panel: &[&mut Tile], j: usize, dst: &mut [f64]) {
    let mut row = 0;
    for t in panel {
        dst[row..row + t.rows()].copy_from_slice(t.col(j));
        row += t.rows();
    }
}

/// Copies `src` (the panel's rows) into column `j` of the panel: [`gather`]'s inverse.
fn scatter(panel: &mut [&mut Tile], j: usize, src: &[f64]) {
    let mut row = 0;
    for t in panel {
        let r = t.rows();
        t.col_mut(j).copy_from_slice(&src[row..row + r]);
        row += r;
    }
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
}

/// Tile 0 holds every diagonal block, so every TRSM and every `A12`; the leaves scan the
/// tiles in row order, and interchanges are deferred (a leaf swaps its own columns).
impl Strategy for TiledPanel<'_, '_> {
    type Error = usize;

    fn rows(&self) -> usize {
        self.m
    }

    /// `L11` and `A12` lie in tile 0 (rows `d..d+n1`); one GEMM call per row block of each
    /// tile ([`gemm_row_block`]).
    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), usize> {
        solve_a12(self.tiles[0], d, n1, n2);
        gemm_below(self.tiles, d, n1, n2);
        Ok(())
    }

    /// The pivot: the first row of largest magnitude (`iamax` per tile, in row order, a
    /// later tile winning only when strictly larger).
    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), usize> {
        let steps = (self.m - d).min(n);
        for (j, slot) in ipiv.iter_mut().enumerate().take(steps) {
            let (row, col) = (d + j, d + j);
            let (s0, l0) = locate(&self.starts, row);
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
            let (sp, lp) = locate(&self.starts, p);
            let pivot = self.tiles[sp].col(col)[lp];
            if pivot == 0.0 {
                return Err(col);
            }
            if p != row {
                self.interchange(d, n, row, &[p]);
            }
            let end = d + n;
            for c in col + 1..end {
                self.urow[c] = self.tiles[s0].col(c)[l0];
            }
            let inv = pivot.recip();
            for s in s0..self.tiles.len() {
                let from = if s == s0 { l0 + 1 } else { 0 };
                eliminate_tile(self.tiles[s], from, col, inv, &self.urow[col + 1..end]);
            }
        }
        Ok(())
    }

    fn interchange(&mut self, c0: usize, cols: usize, first: usize, ipiv: &[usize]) {
        for (i, &p) in ipiv.iter().enumerate() {
            let r = first + i;
            if p == r {
                continue;
            }
            let ((sa, ra), (sb, rb)) = (locate(&self.starts, r), locate(&self.starts, p));
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

/// `A12 := L11⁻¹ A12` in the top tile, for the split of rows `d..m` after `n1` columns
/// (`L11`: rows and columns `d..d+n1`; `A12`: rows `d..d+n1`, columns `d+n1..d+n1+n2`).
pub(super) fn solve_a12(top: &mut Tile, d: usize, n1: usize, n2: usize) {
    let (left, right) = top.as_mut().split_at_col_mut(d + n1);
    let l11 = left.rb().subcols(d, n1).subrows(d, n1);
    let a12 = right.subcols_mut(0, n2).subrows_mut(d, n1);
    solve_unit_lower_triangular_in_place(l11, a12, Par::Seq);
}

/// `A22 −= A21·A12` on rows `d+n1..` of the top tile `tiles[0]`, which holds `A12`, and on
/// every other tile.
pub(super) fn gemm_below(tiles: &mut [&mut Tile], d: usize, n1: usize, n2: usize) {
    let k0 = d + n1;
    let (first, rest) = tiles.split_first_mut().expect("a panel has tiles");
    let (left, right) = first.as_mut().split_at_col_mut(k0);
    let a21 = left.rb().subcols(d, n1).split_at_row(k0).1;
    let (a12, mut a22) = right.subcols_mut(0, n2).split_at_row_mut(k0);
    let a12 = a12.rb().subrows(d, n1);
    let rows = gemm_row_block(a21.nrows(), n1);
    gemm_minus_blocked(a22.rb_mut(), a21, a12, rows);
    gemm_tiles(rest, d, n1, n2, a12);
}

/// `A22 −= A21·A12` on whole tiles below the top one, `A21` in columns `d..d+n1` and `A22`
/// in columns `d+n1..d+n1+n2`: one faer call per [`gemm_row_block`] rows of each tile.
pub(super) fn gemm_tiles(
    tiles: &mut [&mut Tile],
    d: usize,
    n1: usize,
    n2: usize,
    a12: MatRef<'_, f64>,
) {
    for t in tiles.iter_mut().filter(|t| t.rows() > 0) {
        let (l, r) = t.as_mut().split_at_col_mut(d + n1);
        let rows = gemm_row_block(l.nrows(), n1);
        gemm_minus_blocked(r.subcols_mut(0, n2), l.rb().subcols(d, n1), a12, rows);
    }
}

/// LU with partial pivoting of the column-major `m × w` matrix in `a` (leading dimension
/// `m`), the contiguous fallback of [`getrf_panel`]: `ipiv` (length `min(m, w)`) gets 0-based
/// transpositions relative to row 0. `Err(j)`: the pivot of column `j` is an exact zero; `a`
/// is then partly factored.
pub(super) fn factor_contiguous(
    a: &mut [f64],
    m: usize,
    w: usize,
    ipiv: &mut [usize],
) -> Result<(), usize> {
    factor(&mut Contiguous { a, ld: m, m }, 0, w, ipiv)
}

/// A panel as one column-major `m`-row matrix in `a`, leading dimension `ld >= m`.
struct Contiguous<'a> {
    a: &'a mut [f64],
    ld: usize,
    m: usize,
}

/// The whole panel is one block: every leaf is [`unblocked_lu`] on it, interchanges are
/// deferred, and each update is one TRSM and one GEMM call.
impl Strategy for Contiguous<'_> {
    type Error = usize;

    fn rows(&self) -> usize {
        self.m
    }

    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), usize> {
        let at = d * self.ld + d;
        unblocked_lu(&mut self.a[at..], self.ld, self.m - d, n, ipiv).map_err(|j| d + j)?;
        for p in ipiv.iter_mut() {
            *p += d;
        }
        Ok(())
    }

    fn interchange(&mut self, c0: usize, cols: usize, first: usize, ipiv: &[usize]) {
        for c in c0..c0 + cols {
            let col = &mut self.a[c * self.ld..];
            for (i, &p) in ipiv.iter().enumerate() {
                col.swap(first + i, p);
            }
        }
    }

    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), usize> {
        let (ld, m) = (self.ld, self.m - d);
        let (left, right) = self.a[d * ld + d..].split_at_mut(n1 * ld);
        let l11 = MatRef::from_column_major_slice_with_stride(&left[..], m, n1, ld);
        let r = MatMut::from_column_major_slice_with_stride_mut(&mut right[..], m, n2, ld);
        let (mut a12, mut a22) = r.split_at_row_mut(n1);
        solve_unit_lower_triangular_in_place(l11.get(..n1, ..), a12.rb_mut(), Par::Seq);
        let a21 = l11.get(n1.., ..);
        // One call: a tall product takes faer's packed, cache-blocked path.
        gemm_minus_blocked(a22.rb_mut(), a21, a12.rb(), 0);
        Ok(())
    }
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
        let columns = tail.chunks_mut(ld).take(n - j - 1).map(|col| {
            let (top, below) = col[..m].split_at_mut(j + 1);
            (top[j], below)
        });
        eliminate(&mut head[j * ld + j + 1..j * ld + m], inv, columns);
    }
    Ok(())
}

/// The previous panel kernel, kept as the baseline `tessera lu-kernels` measures against:
/// faer's recursive partial-pivoting LU (`lu_in_place`, sequential) on a contiguous copy,
/// its row permutation turned back into LAPACK transpositions.
pub fn getrf_panel_faer(
    panel: &mut [&mut Tile],
    col0: usize,
) -> Result<Vec<usize>, SingularColumn> {
    let Some((m, w)) = shape(panel) else {
        return Ok(Vec::new());
    };
    let size = m.min(w);

    let mut lu = Mat::<f64>::zeros(m, w);
    for j in 0..w {
        gather(panel, j, lu.col_as_slice_mut(j));
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
        scatter(panel, j, lu.col_as_slice(j));
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
