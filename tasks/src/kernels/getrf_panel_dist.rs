//! GETRF on a panel spread over the ranks of a process column (HPL's `pdfact`): each member
//! factors its own tiles, exchanging pivot rows and `A12` with the others, and ends with
//! exactly [`getrf_panel`]'s pivots and bits; each member on one core ([`getrf_panel_dist`])
//! or with a team of its cores ([`DistTeamPanel`]).
//!
//! [`getrf_panel`]: super::getrf_panel

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Mutex, PoisonError, RwLock};

use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{MatMut, MatRef, Par};
use tessera_engine::team::{share, Member};

use super::gemm::{gemm_minus_blocked, gemm_row_block};
use super::getrf_panel::{getrf_panel, iamax, split_columns, SingularColumn, LEAF};
use super::getrf_panel_team::Claims;
use crate::tile::Tile;

/// The members of one distributed panel (the ranks of its process column holding rows of it),
/// as the kernel needs them.
pub trait ColumnExchange {
    /// Members in the group; member 0 holds the panel's top (diagonal) tile.
    fn members(&self) -> usize;
    /// This member's index, 0..members().
    fn me(&self) -> usize;
    /// Sends `part` to every other member and returns every member's part, in member order
    /// (this member's own included). Every member makes the same calls in the same order.
    ///
    /// # Errors
    /// A text naming what failed; the panel then ends with [`DistPanelError::Exchange`].
    fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String>;
}

/// Why a distributed panel failed: the same on every member.
#[derive(Debug, Clone, PartialEq)]
pub enum DistPanelError {
    /// An exact zero pivot: [`getrf_panel`](super::getrf_panel)'s error, the same column.
    Singular(SingularColumn),
    /// The exchange failed (names what): on this member, from its own exchange.
    Exchange(String),
}

impl fmt::Display for DistPanelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistPanelError::Singular(s) => s.fmt(f),
            DistPanelError::Exchange(what) => write!(f, "panel exchange failed: {what}"),
        }
    }
}

impl std::error::Error for DistPanelError {}

/// Factors this member's part of the panel. `tiles`: this member's tiles of the panel, in
/// increasing panel tile index; `index[s]` is `tiles[s]`'s panel tile index (panel tile 0 is the
/// top, diagonal tile; the tiles of the whole panel are dealt among members arbitrarily, e.g.
/// tile i to member i mod P, but member 0 always holds tile 0); every panel tile but the last
/// has `nb` rows (panel tile s starts at panel row s*nb); `m` is the panel's rows in all; all
/// tiles have the same number of columns w <= nb (= the top tile's rows unless the panel is
/// the last, short one). Returns ipiv exactly as getrf_panel returns it on the assembled
/// panel (len min(m, w), 0-based panel rows), identical on every member, and leaves in this
/// member's tiles exactly the bits getrf_panel leaves in those tiles.
///
/// With one member this is [`getrf_panel`](super::getrf_panel) on the tiles, no exchange.
///
/// # Errors
/// - [`DistPanelError::Singular`] on every member, naming the column `getrf_panel` names,
///   right after the exchange of that column (no member waits on another). The tiles then
///   hold a partly factored panel, as `getrf_panel` leaves its own.
/// - [`DistPanelError::Exchange`] when an exchange of this member fails or hands back parts
///   of the wrong count or size; the other members get theirs from their own exchanges.
///
/// # Panics
/// If the tiles are not a member's part of such a panel: no tile, `index` not increasing or
/// not as long as `tiles`, tile 0 held by a member other than 0 (or member 0 without it),
/// tiles of other than `nb` rows (the last one: `m − start` rows, at most `nb`), tiles of
/// different widths, or a width above `nb`.
///
/// # Design
/// The recursion of the single-core kernel (`dgetrf2`'s halving at the same
/// `split_columns` points, leaves of at most [`LEAF`] columns), run SPMD by every member,
/// each on its own rows; the top tile, which holds every diagonal block (`min(m, w) <=
/// min(m, nb)` rows), is member 0's.
/// - **Leaf column `c`** (pivot row `r = c`), one exchange: each member finds its candidate
///   among its rows `>= r` as the single-core leaf does (`iamax` per tile, strict `>` across
///   its tiles in increasing row order, starting at −1 so that NaN never wins) and sends its
///   magnitude, its panel row and its `w` entries; member 0 also sends row `r`'s `w`
///   entries. Every member then picks the same winner `p` from the same parts: the largest
///   magnitude, ties to the smaller panel row — the single-core rule, "first row of largest
///   magnitude", since each member's candidate is its own first such row (members' rows
///   interleave by tile, so member order is not row order); with no candidate anywhere
///   (all NaN) `p = r`. A zero pivot is `Singular` everywhere. Else the owner of row `p`
///   writes row `r`'s old entries into it, member 0 writes the pivot row into row `r`, in
///   all `w` columns at once, and each member scales its rows below `r` in column `c` by
///   `pivot.recip()` and applies the rank-1 update to columns `c+1..d+n` (the leaf's end) of
///   those rows, the received pivot row as `U`: the single-core arithmetic on each entry.
/// - **Recursion step** (`n1 + n2` columns from `d`), one exchange: member 0 solves
///   `A12 := L11⁻¹ A12` in its top tile (the same faer call) and sends `A12` (`n1 × n2`); the
///   others send nothing. Every member then makes the single-core kernel's GEMM calls
///   (`A22 −= A21·A12`, one per tile, [`gemm_row_block`] rows per faer call) on its rows
///   below `d + n1`; a received `A12` is laid out with the top tile's column stride, so that
///   faer gets the very operands' shapes and strides it gets in the single-core kernel.
///
/// **Why the bits are `getrf_panel`'s.** The single-core kernel defers interchanges: a leaf
/// swaps rows in its own columns only, and a recursion step applies the interchanges of its
/// left half to its right half (before the TRSM reads it) and those of its right half to its
/// left half (at its end). So it applies each transposition to each column exactly once, in
/// step order, as this kernel does, which applies it to all columns when the step chooses it.
/// Take a column `c` and a step `i` whose leaf does not hold `c`, and the recursion step
/// `N` whose halves separate them. If `c` is right of `i`, nothing writes column `c` between
/// step `i` and `N`'s TRSM/GEMM (the rest of `N`'s left half writes only left-half
/// columns), and `N` applies its left half's transpositions, `i` among them, in step order
/// just before: the same transpositions in the same order with no arithmetic in between.
/// If `c` is left of `i`, column `c` is finished (part of `L`) once `N`'s left half is: only
/// transpositions touch it after, in step order in both kernels. So at every moment when
/// either kernel reads a column for arithmetic (a leaf's columns, `L11`, `A21`, `A12`, `A22`)
/// that column holds the same values in both, every floating-point operation is the
/// single-core kernel's on the same operands (the scaling and rank-1 update per entry, the
/// same faer calls per tile), and each final column differs by no pending transposition.
/// The tests back this bit for bit, also on nearly singular panels where rounding picks the
/// pivots.
///
/// **Exchanges per panel**: one per leaf column (`min(m, w)`) plus one per recursion step
/// (one fewer than the leaves); with `w = 448 <= m`: 448 + 63 = 511. Bytes: a leaf column's
/// part is `(w + 2) · 8` bytes from each member, `(2w + 2) · 8` from member 0 (3.6 and
/// 7.2 KB at `w = 448`), each sent to the `P − 1` others: a member other than 0 receives
/// `((P − 1)(w + 2) + w) · 8` bytes per column. A recursion step's is `n1 · n2 · 8` bytes
/// from member 0, `Σ n1·n2 ≈ w²/2` values over a panel (98 752 values, 790 KB, at
/// `w = 448`), received by each other member.
pub fn getrf_panel_dist(
    tiles: &mut [&mut Tile],
    index: &[usize],
    nb: usize,
    m: usize,
    col0: usize,
    ex: &dyn ColumnExchange,
) -> Result<Vec<usize>, DistPanelError> {
    let (members, me) = (ex.members(), ex.me());
    let w = check_layout(tiles, index, nb, m, members, me);
    if members == 1 {
        return getrf_panel(tiles, col0).map_err(DistPanelError::Singular);
    }
    DistPanel::new(tiles, index, nb, m, w, col0, me).factor_all(ex)
}

/// Asserts that `tiles` and `index` are member `me`'s part of an `m`-row panel of tiles of
/// `nb` rows (see [`getrf_panel_dist`]'s *Panics*) and returns the panel's width.
fn check_layout(
    tiles: &[&mut Tile],
    index: &[usize],
    nb: usize,
    m: usize,
    members: usize,
    me: usize,
) -> usize {
    let w = check_tiles(tiles, index, nb, m);
    let rows = tiles.iter().map(|t| t.rows()).sum();
    check_member(index, rows, m, members, me);
    w
}

/// The part of [`check_layout`] that needs no exchange: some part of an `m`-row panel of
/// tiles of `nb` rows, whoever holds it. Returns the panel's width.
fn check_tiles(tiles: &[&mut Tile], index: &[usize], nb: usize, m: usize) -> usize {
    assert!(
        !tiles.is_empty() && index.len() == tiles.len(),
        "getrf_panel_dist: {} tiles and {} indices (at least one tile each)",
        tiles.len(),
        index.len()
    );
    assert!(
        index.windows(2).all(|p| p[0] < p[1]),
        "getrf_panel_dist: tile indices {index:?} must increase"
    );
    let w = tiles[0].cols();
    assert!(
        w <= nb && tiles.iter().all(|t| t.cols() == w),
        "getrf_panel_dist: all tiles of a panel must have the same {w} <= nb = {nb} columns"
    );
    for (t, &i) in tiles.iter().zip(index) {
        let start = i * nb;
        let rows = t.rows();
        assert!(
            rows <= nb && start + rows <= m && (rows == nb || start + rows == m),
            "getrf_panel_dist: panel tile {i} has {rows} rows: tiles of nb = {nb} rows, the \
             last of the m = {m} rows shorter"
        );
    }
    w
}

/// The part of [`check_layout`] that depends on the member: tiles `index` (`rows` rows in
/// all) are member `me`'s of `members`.
fn check_member(index: &[usize], rows: usize, m: usize, members: usize, me: usize) {
    assert!(me < members, "getrf_panel_dist: member {me} of {members}");
    assert_eq!(
        me == 0,
        index[0] == 0,
        "getrf_panel_dist: member 0, and only member 0, holds panel tile 0 (member {me} \
         holds tiles {index:?})"
    );
    if members == 1 {
        assert!(
            rows == m && index.iter().enumerate().all(|(s, &i)| s == i),
            "getrf_panel_dist: a lone member holds the whole panel"
        );
    }
}

/// One member's part of a distributed panel, factored where it lies.
struct DistPanel<'p, 't> {
    /// This member's tiles, in increasing panel row.
    tiles: &'p mut [&'t mut Tile],
    /// `starts[s]`: the panel row where `tiles[s]` begins.
    starts: Vec<usize>,
    /// Rows of the whole panel.
    m: usize,
    /// Columns of every tile.
    w: usize,
    /// Rows of panel tile 0 (the column stride of `A12` in the single-core kernel).
    top_rows: usize,
    col0: usize,
    me: usize,
    /// A received `A12`, column stride `top_rows` (members other than 0).
    a12: Vec<f64>,
}

impl<'p, 't> DistPanel<'p, 't> {
    fn new(
        tiles: &'p mut [&'t mut Tile],
        index: &[usize],
        nb: usize,
        m: usize,
        w: usize,
        col0: usize,
        me: usize,
    ) -> Self {
        let starts = index.iter().map(|&i| i * nb).collect();
        DistPanel {
            tiles,
            starts,
            m,
            w,
            top_rows: nb.min(m),
            col0,
            me,
            a12: Vec::new(),
        }
    }

    /// The whole panel: `ipiv` of length `min(m, w)`.
    fn factor_all(mut self, ex: &dyn ColumnExchange) -> Result<Vec<usize>, DistPanelError> {
        let mut ipiv = vec![0usize; self.m.min(self.w)];
        self.factor(0, self.w, &mut ipiv, ex)?;
        Ok(ipiv)
    }

    /// This member's tile holding panel row `row`, and the row within it; `None` if another
    /// member holds it.
    fn locate(&self, row: usize) -> Option<(usize, usize)> {
        let s = self
            .starts
            .partition_point(|&st| st <= row)
            .checked_sub(1)?;
        let l = row - self.starts[s];
        (l < self.tiles[s].rows()).then_some((s, l))
    }

    /// LU of rows `d..m`, columns `d..d+n`: the single-core `TiledPanel::factor` without its
    /// row interchanges (done whole-row by the leaves).
    fn factor(
        &mut self,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
        ex: &dyn ColumnExchange,
    ) -> Result<(), DistPanelError> {
        let k = (self.m - d).min(n);
        if k <= LEAF || n <= LEAF {
            return self.leaf(d, n, ipiv, ex);
        }
        let n1 = split_columns(k);
        let n2 = n - n1;
        self.factor(d, n1, &mut ipiv[..n1], ex)?;
        self.update(d, n1, n2, ex)?;
        self.factor(d + n1, n2, &mut ipiv[n1..k], ex)
    }

    /// Unblocked right-looking LU of rows `d..m`, columns `d..d+n`, one exchange per column.
    fn leaf(
        &mut self,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
        ex: &dyn ColumnExchange,
    ) -> Result<(), DistPanelError> {
        let w = self.w;
        let steps = (self.m - d).min(n);
        for (j, slot) in ipiv.iter_mut().enumerate().take(steps) {
            let (r, c) = (d + j, d + j);
            let parts = self.exchange_candidates(r, c, ex)?;
            let (p, winner) = pick_pivot(&parts, r);
            let old_r = &parts[0][2 + w..];
            let pivot_row = match winner {
                Some(q) => &parts[q][2..2 + w],
                None => old_r,
            };
            *slot = p;
            if pivot_row[c] == 0.0 {
                return Err(DistPanelError::Singular(SingularColumn {
                    column: self.col0 + c,
                }));
            }
            if p != r {
                if let Some((s, l)) = self.locate(p) {
                    self.write_row(s, l, old_r);
                }
                if self.me == 0 {
                    self.write_row(0, r, pivot_row);
                }
            }
            self.eliminate(r, c, d + n, pivot_row);
        }
        Ok(())
    }

    /// The exchange of leaf column `c` (pivot row `r`): every member's part, checked. A part
    /// is `[magnitude, panel row, w entries]` of the member's candidate (`[-1, -1, zeros]`
    /// when it has none), member 0's followed by row `r`'s `w` entries.
    fn exchange_candidates(
        &self,
        r: usize,
        c: usize,
        ex: &dyn ColumnExchange,
    ) -> Result<Vec<Vec<f64>>, DistPanelError> {
        let w = self.w;
        let (mut best, mut at) = (-1.0, None);
        for (s, t) in self.tiles.iter().enumerate() {
            let from = r.saturating_sub(self.starts[s]).min(t.rows());
            let col = &t.col(c)[from..];
            if col.is_empty() {
                continue;
            }
            let i = iamax(col);
            if col[i].abs() > best {
                (best, at) = (col[i].abs(), Some((s, from + i)));
            }
        }
        let mut part = Vec::with_capacity(2 + 2 * w);
        match at {
            Some((s, l)) => {
                part.extend([best, (self.starts[s] + l) as f64]);
                part.extend(self.row(s, l));
            }
            None => {
                part.extend([-1.0, -1.0]);
                part.resize(2 + w, 0.0);
            }
        }
        if self.me == 0 {
            part.extend(self.row(0, r));
        }
        let what = |e: String| format!("pivot search of column {}: {e}", self.col0 + c);
        let parts = ex
            .allgather(part)
            .map_err(|e| DistPanelError::Exchange(what(e)))?;
        let members = ex.members();
        if parts.len() != members {
            return Err(DistPanelError::Exchange(what(format!(
                "{} parts for {members} members",
                parts.len()
            ))));
        }
        for (q, part) in parts.iter().enumerate() {
            let len = if q == 0 { 2 + 2 * w } else { 2 + w };
            let (b, row) = (part.first().copied(), part.get(1).copied());
            let sound = match (b, row) {
                (Some(b), Some(row)) if b >= 0.0 => {
                    row.fract() == 0.0 && row >= r as f64 && row < self.m as f64
                }
                (Some(b), Some(row)) => b == -1.0 && row == -1.0,
                _ => false,
            };
            if part.len() != len || !sound {
                return Err(DistPanelError::Exchange(what(format!(
                    "member {q} sent a malformed candidate ({} values)",
                    part.len()
                ))));
            }
        }
        Ok(parts)
    }

    /// Row `l` of `tiles[s]`, all `w` columns.
    fn row(&self, s: usize, l: usize) -> impl Iterator<Item = f64> + '_ {
        let t = &*self.tiles[s];
        let ld = t.rows();
        (0..self.w).map(move |j| t.as_slice()[l + j * ld])
    }

    /// Writes `values` (`w` entries) into row `l` of `tiles[s]`.
    fn write_row(&mut self, s: usize, l: usize, values: &[f64]) {
        let t = &mut *self.tiles[s];
        let ld = t.rows();
        let data = t.as_mut_slice();
        for (j, &v) in values.iter().enumerate() {
            data[l + j * ld] = v;
        }
    }

    /// Scales this member's rows below `r` in column `c` by the pivot's reciprocal and
    /// subtracts their multiple of `urow` (the pivot row) in columns `c+1..end`: the
    /// single-core leaf's loops, on this member's tiles.
    fn eliminate(&mut self, r: usize, c: usize, end: usize, urow: &[f64]) {
        let inv = urow[c].recip();
        for (t, &start) in self.tiles.iter_mut().zip(&self.starts) {
            let from = (r + 1).saturating_sub(start);
            let ld = t.rows();
            if from >= ld {
                continue;
            }
            let data = t.as_mut_slice();
            let (head, tail) = data.split_at_mut((c + 1) * ld);
            let l = &mut head[c * ld + from..];
            for x in l.iter_mut() {
                *x *= inv;
            }
            let l = &*l;
            for (i, &u) in urow[c + 1..end].iter().enumerate() {
                if u != 0.0 {
                    let base = i * ld;
                    for (x, &y) in tail[base + from..base + ld].iter_mut().zip(l) {
                        *x -= y * u;
                    }
                }
            }
        }
    }

    /// `A12 := L11⁻¹ A12` on member 0, `A12` to every member (one exchange), then
    /// `A22 −= A21 · A12` on each member's rows below `d + n1`, columns `d+n1..d+n1+n2`.
    fn update(
        &mut self,
        d: usize,
        n1: usize,
        n2: usize,
        ex: &dyn ColumnExchange,
    ) -> Result<(), DistPanelError> {
        let mut a12 = std::mem::take(&mut self.a12);
        let shared = self.share_a12(d, n1, n2, ex, &mut a12);
        self.a12 = a12;
        shared?;
        self.gemm(d, n1, n2);
        Ok(())
    }

    /// `A12 := L11⁻¹ A12` on member 0, `A12` to every member (one exchange): a member other
    /// than 0 gets it in `a12`, column stride `top_rows` (member 0's stays in its top tile).
    fn share_a12(
        &mut self,
        d: usize,
        n1: usize,
        n2: usize,
        ex: &dyn ColumnExchange,
        a12: &mut Vec<f64>,
    ) -> Result<(), DistPanelError> {
        let k0 = d + n1;
        let part = if self.me == 0 {
            let (left, right) = self.tiles[0].as_mut().split_at_col_mut(k0);
            let l11 = left.rb().subcols(d, n1).subrows(d, n1);
            let mut a12 = right.subcols_mut(0, n2).subrows_mut(d, n1);
            solve_unit_lower_triangular_in_place(l11, a12.rb_mut(), Par::Seq);
            let a12 = a12.rb();
            (0..n2)
                .flat_map(|j| (0..n1).map(move |i| a12[(i, j)]))
                .collect()
        } else {
            Vec::new()
        };
        let what = |e: String| {
            DistPanelError::Exchange(format!(
                "A12 of columns {}..{}: {e}",
                self.col0 + k0,
                self.col0 + k0 + n2
            ))
        };
        let parts = ex.allgather(part).map_err(what)?;
        if parts.len() != ex.members() || parts[0].len() != n1 * n2 {
            return Err(what(format!(
                "{} parts, member 0's of {} values, for {} members and {n1}x{n2} values",
                parts.len(),
                parts.first().map_or(0, Vec::len),
                ex.members()
            )));
        }
        if self.me != 0 {
            let ld = self.top_rows;
            a12.clear();
            a12.resize((n2 - 1) * ld + n1, 0.0);
            for (j, col) in parts[0].chunks_exact(n1).enumerate() {
                a12[j * ld..j * ld + n1].copy_from_slice(col);
            }
        }
        Ok(())
    }

    /// `A22 −= A21 · A12` on this member's rows below `d + n1`, after [`Self::share_a12`]:
    /// the single-core kernel's faer calls.
    fn gemm(&mut self, d: usize, n1: usize, n2: usize) {
        let k0 = d + n1;
        if self.me == 0 {
            // The single-core kernel's calls verbatim, A12 where the TRSM left it.
            let (first, rest) = self.tiles.split_first_mut().expect("member 0 has tile 0");
            let (left, right) = first.as_mut().split_at_col_mut(k0);
            let a21 = left.rb().subcols(d, n1).split_at_row(k0).1;
            let (a12, mut a22) = right.subcols_mut(0, n2).split_at_row_mut(k0);
            let a12 = a12.rb().subrows(d, n1);
            let rows = gemm_row_block(a21.nrows(), n1);
            gemm_minus_blocked(a22.rb_mut(), a21, a12, rows);
            gemm_tiles(rest, d, n1, n2, a12);
        } else {
            let a12 = MatRef::from_column_major_slice_with_stride(&self.a12, n1, n2, self.top_rows);
            gemm_tiles(&mut *self.tiles, d, n1, n2, a12);
        }
    }
}

/// `A22 −= A21 · A12` on whole tiles below the top one: the single-core kernel's call per
/// tile (`A21`: columns `d..d+n1`, `A22`: columns `d+n1..d+n1+n2`).
fn gemm_tiles(tiles: &mut [&mut Tile], d: usize, n1: usize, n2: usize, a12: MatRef<'_, f64>) {
    for t in tiles.iter_mut().filter(|t| t.rows() > 0) {
        let (l, r) = t.as_mut().split_at_col_mut(d + n1);
        let rows = gemm_row_block(l.nrows(), n1);
        gemm_minus_blocked(r.subcols_mut(0, n2), l.rb().subcols(d, n1), a12, rows);
    }
}

/// The pivot row of a leaf column from every member's candidate (checked parts): the largest
/// magnitude, ties to the smaller panel row; `r` itself when no member has a candidate.
/// Returns the row and the member whose part holds it (`None`: row `r`, from member 0's).
fn pick_pivot(parts: &[Vec<f64>], r: usize) -> (usize, Option<usize>) {
    let (mut best, mut p, mut winner) = (-1.0, r, None);
    for (q, part) in parts.iter().enumerate() {
        let b = part[0];
        if b < 0.0 {
            continue;
        }
        let row = part[1] as usize;
        if b > best || (b == best && row < p) {
            (best, p, winner) = (b, row, Some(q));
        }
    }
    (p, winner)
}

/// [`getrf_panel_dist`] run by the members of a team (the CPU workers of one rank's task):
/// every member calls [`factor`](DistTeamPanel::factor) (inside `Team::run`), and every
/// member gets what `getrf_panel_dist` gives on the same tiles: the same pivots, the same bits
/// in every entry, the same error, at every team size.
///
/// ```
/// use tessera_engine::team::run_threads;
/// use tessera_tasks::kernels::{ColumnExchange, DistTeamPanel};
/// use tessera_tasks::tile::Tile;
///
/// /// A process column of one rank.
/// struct Lone;
/// impl ColumnExchange for Lone {
///     fn members(&self) -> usize { 1 }
///     fn me(&self) -> usize { 0 }
///     fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> { Ok(vec![part]) }
/// }
///
/// let mut tiles = vec![Tile::from_col_major(2, 2, &[1.0, 4.0, 2.0, 3.0])];
/// let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
/// let panel = DistTeamPanel::new(&mut refs, &[0], 2, 2);
/// let ipiv = run_threads(2, |m| panel.factor(0, &Lone, m)).unwrap().unwrap();
/// assert_eq!(ipiv, vec![1, 1]); // row 1 holds the larger first entry
/// assert_eq!(tiles[0].as_slice(), &[4.0, 0.25, 3.0, 1.25]);
/// ```
///
/// Chosen design: every member walks `getrf_panel_dist`'s recursion (the same splits, the
/// same leaves); per phase, one member or all of them work.
/// - **Leaves** (pivot search, the rank exchange of each column, row writes, scaling and
///   rank-1 updates): team rank 0 alone, with `getrf_panel_dist`'s own code, then one
///   [`Member::all_reduce`] hands its outcome (the leaf's pivots, or its error) to every
///   member. They are memory-bound and a few percent of the flops on a tall panel (`w`
///   columns of `m ≫ w` rows: the leaves' `~w·LEAF·m` of `~w²·m`), and their exchange is the
///   rank's: one caller per rank keeps the exchange's call order that of the other ranks.
/// - **Recursion step**, the TRSM and the `A12` exchange: rank 0 alone (`getrf_panel_dist`'s
///   code; a received `A12` goes into a buffer of this struct), then one reduction hands its
///   outcome to every member.
/// - **Recursion step**, the GEMM (`A22 −= A21·A12`, nearly all the flops): the single-core
///   kernel's faer calls (one per [`gemm_row_block`] rows of each tile: exactly the calls
///   `getrf_panel_dist` makes), each made whole by one member: the calls in order, split
///   into contiguous, rank-ordered runs of about equal rows (a call goes to the member whose
///   share of the rows holds its middle row). Then a barrier.
///
/// Synchronisation: one reduction per leaf, one reduction and one barrier per recursion
/// step, one barrier at the start (after the members claimed the panel). The bits are
/// `getrf_panel_dist`'s because every floating-point operation is its own: the leaves and
/// the TRSM are its code on its data, and each GEMM call is its call (the same shapes,
/// strides and operands: faer picks its path by those, so a call split by rows could differ,
/// a call made by another thread cannot). Members other than rank 0 never call the
/// exchange. A team of one is `getrf_panel_dist` itself; with one rank (`members() == 1`) the
/// team runs the distributed code on a local exchange, whose bits are `getrf_panel`'s
/// (tested), and makes no exchange call either.
///
/// # Safety (why the members' accesses never race)
/// [`DistTeamPanel::new`] takes the tiles by `&mut` for the panel's lifetime, so only members
/// reach them; [`factor`](DistTeamPanel::factor) admits one team, once: each member claims its
/// rank, a claim that finds its rank taken (a second team, a second call) panics, and no
/// member touches a tile before a barrier that every member of its team passes only once all
/// of them claimed. Within the team:
///
/// | phase | who touches the tiles | ends with |
/// |---|---|---|
/// | claim | nobody | barrier |
/// | leaf | rank 0: all (through `&mut` reborrowed from the borrow `new` took) | reduction |
/// | TRSM, `A12` exchange | rank 0: all; then it takes fresh raw addresses of the tiles' entries for the GEMM | reduction |
/// | GEMM | each member the rows of its calls, columns `d+n1..d+n1+n2` (writes) and `d..d+n1` (reads); all read `A12` (top tile rows `d..d+n1`, or the buffer), which nobody writes in the phase | barrier |
///
/// Rank 0 makes the `&mut` views only when no other member touches the tiles, and the
/// raw addresses the GEMM uses are taken after its last such view and before the next. The
/// barriers and reductions synchronise as acquire/release (the engine's [`Member::barrier`]),
/// so what one phase wrote is visible to the next.
pub struct DistTeamPanel<'a> {
    /// The tiles `new` borrowed (`index.len()` of them): reborrowed `&mut` by rank 0 alone,
    /// in its phases.
    tiles: *mut &'a mut Tile,
    /// `index[s]`: the panel tile index of tile `s`.
    index: Vec<usize>,
    /// Rows of each tile.
    rows: Vec<usize>,
    nb: usize,
    /// Rows of the whole panel.
    m: usize,
    /// Columns of every tile.
    w: usize,
    /// Which ranks of which team size entered [`factor`](DistTeamPanel::factor).
    claims: Mutex<Claims>,
    /// What rank 0 leaves to the GEMM of a recursion step: written by rank 0 in the TRSM
    /// phase, read by every member in the GEMM phase.
    step: RwLock<Step>,
    _tiles: PhantomData<&'a mut [&'a mut Tile]>,
}

// SAFETY: a `DistTeamPanel` is an exclusive borrow of its tiles (`new` takes them by `&mut`
// for `'a`), like `&'a mut [&mut Tile]`, which is `Send` and `Sync`; its raw pointers are
// that borrow and addresses of the tiles' buffers. Moving it to another thread moves that
// borrow.
unsafe impl Send for DistTeamPanel<'_> {}
// SAFETY: shared, it is used only through `factor`, whose members touch the tiles in turn
// (rank 0 alone) or disjoint entries (the GEMM) between barriers (the phase table in the
// type's documentation), and which admits one team.
unsafe impl Sync for DistTeamPanel<'_> {}

/// Rank 0's hand-over to the GEMM of a recursion step.
#[derive(Default)]
struct Step {
    /// Each tile's entries (column-major, leading dimension its rows), taken after rank 0's
    /// last `&mut` view of the step.
    entries: Vec<*mut f64>,
    /// A received `A12` (this rank is not member 0), column stride `min(nb, m)`.
    a12: Vec<f64>,
}

impl<'a> DistTeamPanel<'a> {
    /// This rank's part of a panel, as for [`getrf_panel_dist`] (`tiles`, `index`, `nb`,
    /// `m`), borrowed until the view is dropped.
    ///
    /// # Panics
    /// As `getrf_panel_dist`, for the tiles' layout; what depends on the rank (who holds
    /// tile 0) is checked by [`factor`](DistTeamPanel::factor).
    pub fn new(
        tiles: &'a mut [&mut Tile],
        index: &[usize],
        nb: usize,
        m: usize,
    ) -> DistTeamPanel<'a> {
        let w = check_tiles(tiles, index, nb, m);
        let rows = tiles.iter().map(|t| t.rows()).collect();
        DistTeamPanel {
            // The inner borrows outlive `'a`; the panel uses them for `'a` only.
            tiles: tiles.as_mut_ptr().cast::<&'a mut Tile>(),
            index: index.to_vec(),
            rows,
            nb,
            m,
            w,
            claims: Mutex::new(Claims::default()),
            step: RwLock::new(Step::default()),
            _tiles: PhantomData,
        }
    }

    /// Factors this rank's part of the panel: what
    /// [`getrf_panel_dist`]`(tiles, index, nb, m, col0, ex)` does, bit for bit. Every member
    /// of one team calls it (`team.run(|m| panel.factor(col0, ex, m))`) and gets the same
    /// result; only rank 0 calls `ex.allgather`.
    ///
    /// # Errors
    /// `getrf_panel_dist`'s, on every member.
    ///
    /// # Panics
    /// `getrf_panel_dist`'s for a rank that does not hold its tiles (on every member); when a
    /// second team, or a second call, enters the panel (that member panics before touching
    /// any tile, which fails its team).
    pub fn factor(
        &self,
        col0: usize,
        ex: &(dyn ColumnExchange + Sync),
        member: &Member<'_>,
    ) -> Result<Vec<usize>, DistPanelError> {
        let (members, me) = (ex.members(), ex.me());
        check_member(&self.index, self.rows.iter().sum(), self.m, members, me);
        self.claim(member);
        // Every member of this team claimed its rank: no other team gets past its own.
        member.barrier();
        if member.size() == 1 {
            // SAFETY: the team's only member, after its claim: nobody else reaches the tiles.
            let tiles = unsafe { self.tiles_mut() };
            return getrf_panel_dist(tiles, &self.index, self.nb, self.m, col0, ex);
        }
        let ex: &dyn ColumnExchange = if members == 1 { &Alone } else { ex };
        let mut ipiv = vec![0usize; self.m.min(self.w)];
        let at = At { col0, me, ex };
        self.factor_rec(member, &at, 0, self.w, &mut ipiv)?;
        Ok(ipiv)
    }

    /// Records `member`'s rank as taken.
    ///
    /// # Panics
    /// If the rank was taken, or the panel was claimed by a team of another size.
    fn claim(&self, member: &Member<'_>) {
        Claims::claim(&self.claims, member, "DistTeamPanel::factor");
    }

    /// The tiles `new` borrowed.
    ///
    /// # Safety
    /// No other member touches the tiles while the slice lives (the phase table of
    /// [`DistTeamPanel`]).
    #[expect(
        clippy::mut_from_ref,
        reason = "the members share `&self`; the phase table says when rank 0 may do this"
    )]
    unsafe fn tiles_mut(&self) -> &mut [&'a mut Tile] {
        // SAFETY: `new`'s exclusive borrow of `index.len()` tiles, live for `'a`; nobody
        // else touches them now (caller).
        unsafe { std::slice::from_raw_parts_mut(self.tiles, self.index.len()) }
    }

    /// Rank 0's `getrf_panel_dist` view of the tiles.
    ///
    /// # Safety
    /// Called by rank 0 in a phase where no other member touches the tiles (the phase table
    /// of [`DistTeamPanel`]), the view dropped before the phase ends.
    unsafe fn view(&self, at: &At<'_>) -> DistPanel<'_, 'a> {
        // SAFETY: the borrow `new` took, touched by nobody else now (caller).
        let tiles = unsafe { self.tiles_mut() };
        DistPanel::new(tiles, &self.index, self.nb, self.m, self.w, at.col0, at.me)
    }

    /// `getrf_panel_dist`'s recursion over rows `d..m`, columns `d..d+n`, by the team.
    fn factor_rec(
        &self,
        member: &Member<'_>,
        at: &At<'_>,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
    ) -> Result<(), DistPanelError> {
        let k = (self.m - d).min(n);
        if k <= LEAF || n <= LEAF {
            return self.leaf(member, at, d, n, ipiv);
        }
        let n1 = split_columns(k);
        let n2 = n - n1;
        self.factor_rec(member, at, d, n1, &mut ipiv[..n1])?;
        self.update(member, at, d, n1, n2)?;
        self.factor_rec(member, at, d + n1, n2, &mut ipiv[n1..k])
    }

    /// A leaf, by rank 0; its outcome to every member.
    fn leaf(
        &self,
        member: &Member<'_>,
        at: &At<'_>,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
    ) -> Result<(), DistPanelError> {
        let mine = (member.rank() == 0).then(|| {
            let mut piv = vec![0usize; ipiv.len()];
            // SAFETY: rank 0, in the leaf phase; the view ends here.
            let mut view = unsafe { self.view(at) };
            view.leaf(d, n, &mut piv, at.ex).map(|()| piv)
        });
        let piv = member
            .all_reduce(mine, |a, b| a.or(b))
            .expect("rank 0 factored the leaf")?;
        ipiv.copy_from_slice(&piv);
        Ok(())
    }

    /// A recursion step: TRSM and `A12` exchange by rank 0 (its outcome to every member),
    /// then the GEMM by the team.
    fn update(
        &self,
        member: &Member<'_>,
        at: &At<'_>,
        d: usize,
        n1: usize,
        n2: usize,
    ) -> Result<(), DistPanelError> {
        let mine = (member.rank() == 0).then(|| {
            let mut step = self.step.write().unwrap_or_else(PoisonError::into_inner);
            let step = &mut *step;
            let shared = {
                // SAFETY: rank 0, in the TRSM phase; the view ends in this block.
                let mut view = unsafe { self.view(at) };
                view.share_a12(d, n1, n2, at.ex, &mut step.a12)
            };
            // SAFETY: as above; after the view's end, and no `&mut` view until the GEMM's
            // barrier, so the addresses stay valid for the GEMM.
            let tiles = unsafe { self.tiles_mut() };
            step.entries.clear();
            step.entries
                .extend(tiles.iter_mut().map(|t| t.as_mut_slice().as_mut_ptr()));
            shared
        });
        member
            .all_reduce(mine, |a, b| a.or(b))
            .expect("rank 0 solved A12")?;
        self.gemm(member, at.me, d, n1, n2);
        member.barrier();
        Ok(())
    }

    /// `A22 −= A21·A12` of a recursion step: `getrf_panel_dist`'s faer calls, this member's
    /// share of them.
    fn gemm(&self, member: &Member<'_>, me: usize, d: usize, n1: usize, n2: usize) {
        let k0 = d + n1;
        // The single-core kernel's calls, in its order: (tile, first row, rows).
        let mut calls = Vec::new();
        for (s, &rows) in self.rows.iter().enumerate() {
            let first = if self.index[s] == 0 { k0 } else { 0 };
            if rows <= first {
                continue;
            }
            let len = rows - first;
            let block = gemm_row_block(len, n1);
            let mut r0 = 0;
            while r0 < len {
                let r = block.min(len - r0);
                calls.push((s, first + r0, r));
                r0 += r;
            }
        }
        let total = calls.iter().map(|c| c.2).sum();
        let own = share(total, 1, member.size(), member.rank());
        let step = self.step.read().unwrap_or_else(PoisonError::into_inner);
        let a12 = if me == 0 {
            let ld0 = self.rows[0] as isize;
            // SAFETY: `A12` (tile 0, rows `d..d+n1`, columns `k0..k0+n2`, in bounds) is read
            // by every member in this phase and written by none (they write rows `>= k0`).
            unsafe {
                MatRef::from_raw_parts(
                    step.entries[0].wrapping_add(d + k0 * self.rows[0]),
                    n1,
                    n2,
                    1,
                    ld0,
                )
            }
        } else {
            MatRef::from_column_major_slice_with_stride(&step.a12, n1, n2, self.nb.min(self.m))
        };
        let mut pos = 0;
        for (s, top, r) in calls {
            let mid = pos + r / 2;
            pos += r;
            if !own.contains(&mid) {
                continue;
            }
            let ld = self.rows[s];
            let p = step.entries[s];
            // SAFETY: rows `top..top+r` of tile `s`, columns `d..d+n1` (`A21`, read only) and
            // `k0..k0+n2` (`C`, written by this member alone: each call has one owner), in
            // bounds, disjoint from each other and from `A12`.
            let (a21, c) = unsafe {
                (
                    MatRef::from_raw_parts(p.wrapping_add(top + d * ld), r, n1, 1, ld as isize),
                    MatMut::from_raw_parts_mut(
                        p.wrapping_add(top + k0 * ld),
                        r,
                        n2,
                        1,
                        ld as isize,
                    ),
                )
            };
            // Rows 0: one faer call, the one the single-core kernel makes.
            gemm_minus_blocked(c, a21, a12, 0);
        }
    }
}

/// What every phase of a team's factorization needs to know of the call.
struct At<'e> {
    col0: usize,
    /// This rank's index in the exchange.
    me: usize,
    ex: &'e dyn ColumnExchange,
}

/// A lone member's exchange, local: the distributed code run by one member (whole-row
/// interchanges, member 0's update), which gives `getrf_panel`'s bits (tested).
struct Alone;

impl ColumnExchange for Alone {
    fn members(&self) -> usize {
        1
    }
    fn me(&self) -> usize {
        0
    }
    fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
        Ok(vec![part])
    }
}

#[cfg(test)]
mod tests {
    //! Proves that the members of a distributed panel, threads exchanging over channels, end
    //! with `getrf_panel`'s pivots on every member and its bits in every tile, at 1 to 4
    //! members and several deals of the tiles, on random, graded, nearly singular, tied and
    //! NaN panels; that a singular panel fails with its column on every member; and that a
    //! failing exchange ends the panel with `Exchange`.

    use std::cell::Cell;
    use std::sync::mpsc::{self, Receiver, Sender};
    use std::sync::Mutex;
    use std::time::Duration;

    use tessera_engine::team::run_threads;

    use super::*;
    use crate::kernels::test_support::{
        grade_rows, nearly_singular, random_dense, split_rows, tiles_of, SplitMix64,
    };

    /// One member's end of a group of threads joined pairwise by channels (one per ordered
    /// pair, so each call's parts meet, whichever member runs ahead).
    struct ThreadExchange {
        me: usize,
        /// `to[q]`: the channel to member `q` (`None` for this member).
        to: Vec<Option<Sender<Vec<f64>>>>,
        /// `from[q]`: the channel from member `q`.
        from: Vec<Option<Receiver<Vec<f64>>>>,
        calls: Cell<usize>,
        /// Refuse this call (0-based), before sending anything.
        fail_at: Option<usize>,
    }

    impl ColumnExchange for ThreadExchange {
        fn members(&self) -> usize {
            self.to.len()
        }

        fn me(&self) -> usize {
            self.me
        }

        fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
            let call = self.calls.get();
            self.calls.set(call + 1);
            if self.fail_at == Some(call) {
                return Err(format!("test exchange refuses call {call}"));
            }
            for (q, to) in self.to.iter().enumerate() {
                if let Some(to) = to {
                    to.send(part.clone())
                        .map_err(|_| format!("member {q} is gone"))?;
                }
            }
            self.from
                .iter()
                .enumerate()
                .map(|(q, from)| match from {
                    None => Ok(part.clone()),
                    Some(from) => from.recv().map_err(|_| format!("member {q} is gone")),
                })
                .collect()
        }
    }

    /// The ends of a group of `size` members; member `f` of `fail` refuses its call `k`.
    fn group(size: usize, fail: Option<(usize, usize)>) -> Vec<ThreadExchange> {
        let mut to: Vec<Vec<Option<Sender<Vec<f64>>>>> = (0..size).map(|_| vec![]).collect();
        let mut from: Vec<Vec<Option<Receiver<Vec<f64>>>>> = (0..size)
            .map(|_| (0..size).map(|_| None).collect())
            .collect();
        for (a, to_a) in to.iter_mut().enumerate() {
            for (b, from_b) in from.iter_mut().enumerate() {
                if a == b {
                    to_a.push(None);
                } else {
                    let (tx, rx) = mpsc::channel();
                    to_a.push(Some(tx));
                    from_b[a] = Some(rx);
                }
            }
        }
        to.into_iter()
            .zip(from)
            .enumerate()
            .map(|(me, (to, from))| ThreadExchange {
                me,
                to,
                from,
                calls: Cell::new(0),
                fail_at: fail.and_then(|(f, k)| (f == me).then_some(k)),
            })
            .collect()
    }

    type Outcome = Result<Vec<usize>, DistPanelError>;

    /// What one member ended with: its outcome, its tiles, its exchange calls.
    struct MemberEnd {
        outcome: Outcome,
        tiles: Vec<Tile>,
        index: Vec<usize>,
        calls: usize,
    }

    /// Runs the members (member `q` gets the tiles `deal` gives it) on threads of their own;
    /// fails the test if one has not returned after a minute.
    fn run_members(
        tiles: &[Tile],
        deal: &[usize],
        nb: usize,
        m: usize,
        col0: usize,
        fail: Option<(usize, usize)>,
    ) -> Vec<MemberEnd> {
        let size = deal.iter().max().map_or(1, |&q| q + 1);
        let (tx, rx) = mpsc::channel();
        for ex in group(size, fail) {
            let index: Vec<usize> = (0..tiles.len()).filter(|&i| deal[i] == ex.me).collect();
            let mine: Vec<Tile> = index.iter().map(|&i| tiles[i].clone()).collect();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut mine = mine;
                let mut refs: Vec<&mut Tile> = mine.iter_mut().collect();
                let outcome = getrf_panel_dist(&mut refs, &index, nb, m, col0, &ex);
                let end = MemberEnd {
                    outcome,
                    tiles: mine,
                    index,
                    calls: ex.calls.get(),
                };
                let me = ex.me;
                drop(ex); // releases members waiting on this one after a failure
                let _ = tx.send((me, end));
            });
        }
        drop(tx);
        let mut ends: Vec<Option<MemberEnd>> = (0..size).map(|_| None).collect();
        for _ in 0..size {
            let (me, end) = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a member returns within a minute (a member panicked or hangs?)");
            ends[me] = Some(end);
        }
        ends.into_iter().map(Option::unwrap).collect()
    }

    /// Exchanges of a panel: one per leaf column, one per recursion step.
    fn exchanges(m: usize, d: usize, n: usize) -> usize {
        let k = (m - d).min(n);
        if k <= LEAF || n <= LEAF {
            return k;
        }
        let n1 = split_columns(k);
        exchanges(m, d, n1) + 1 + exchanges(m, d + n1, n - n1)
    }

    fn assert_same_bits(got: &Tile, want: &Tile, what: &str) {
        let (g, w) = (got.as_slice(), want.as_slice());
        assert_eq!(g.len(), w.len());
        if let Some(i) = g
            .iter()
            .zip(w)
            .position(|(x, y)| x.to_bits() != y.to_bits())
        {
            panic!(
                "{what}: entry ({}, {}) is {:e}, getrf_panel's {:e}",
                i % got.rows(),
                i / got.rows(),
                g[i],
                w[i]
            );
        }
    }

    /// The deals of `tiles` tiles over `size` members checked: cyclic (`i mod P`), then two
    /// irregular ones where every member holds a tile (tiles `1..P` in reverse member order
    /// and the rest at random; member 0 alone with tile 0 and the rest in blocks).
    fn deals(tiles: usize, size: usize, seed: u64) -> Vec<Vec<usize>> {
        if size == 1 {
            return vec![vec![0; tiles]];
        }
        let cyclic = (0..tiles).map(|i| i % size).collect();
        let mut rng = SplitMix64(seed);
        let shuffled = (0..tiles)
            .map(|i| match i {
                0 => 0,
                i if i < size => size - i,
                _ => (rng.next_u64() % size as u64) as usize,
            })
            .collect();
        let per = (tiles - 1).div_ceil(size - 1);
        let blocks = (0..tiles)
            .map(|i| if i == 0 { 0 } else { 1 + (i - 1) / per })
            .collect();
        vec![cyclic, shuffled, blocks]
    }

    /// The `m × w` panel `a` in tiles of `nb` rows, factored by `getrf_panel`, then by 1 to 4
    /// members (as many as there are tiles) under each deal: the same outcome on every
    /// member, and on success the same bits in every tile and one exchange per leaf column
    /// and per recursion step. Returns `getrf_panel`'s outcome.
    fn assert_same_as_single(
        a: &[f64],
        m: usize,
        w: usize,
        nb: usize,
        col0: usize,
    ) -> Result<Vec<usize>, SingularColumn> {
        let (tiles, want_tiles, want) = reference(a, m, w, nb, col0);
        let want_dist = want.clone().map_err(DistPanelError::Singular);

        // One member through the distributed code.
        let mut alone = tiles.clone();
        let mut refs: Vec<&mut Tile> = alone.iter_mut().collect();
        let index: Vec<usize> = (0..tiles.len()).collect();
        let got = DistPanel::new(&mut refs, &index, nb, m, w, col0, 0).factor_all(&Alone);
        assert_eq!(got, want_dist, "m={m} w={w} nb={nb} alone");
        if want.is_ok() {
            for (s, (g, t)) in alone.iter().zip(&want_tiles).enumerate() {
                assert_same_bits(g, t, &format!("m={m} w={w} nb={nb} alone, tile {s}"));
            }
        }

        for size in 1..=tiles.len().min(4) {
            for deal in deals(tiles.len(), size, (m * w + size) as u64) {
                let what = format!("m={m} w={w} nb={nb} deal {deal:?}");
                for end in run_members(&tiles, &deal, nb, m, col0, None) {
                    assert_eq!(end.outcome, want_dist, "{what}");
                    if want.is_err() {
                        continue;
                    }
                    let ranks = (size, m, w);
                    assert_success(&what, ranks, end.calls, &end.tiles, &end.index, &want_tiles);
                }
            }
        }
        want
    }

    /// Panels of the LU's shapes: (m, w, nb) with tiles of `nb` rows, the last short or
    /// whole, `w = nb` or narrower (the last panel's width), recursing (w > LEAF, splits at
    /// multiples of 8 from w >= 32) or one leaf.
    const SHAPES: [(usize, usize, usize); 8] = [
        (150, 40, 40),
        (160, 40, 40),
        (97, 24, 24),
        (61, 13, 20),
        (45, 16, 16),
        (33, 9, 11),
        (50, 5, 12),
        (20, 10, 10),
    ];

    #[test]
    fn random_panels() {
        for (i, (m, w, nb)) in SHAPES.into_iter().enumerate() {
            let a = random_dense(m, w, 100 + i as u64);
            assert_same_as_single(&a, m, w, nb, 0).unwrap();
        }
        // One tile: a lone member, also with m < w.
        for (m, w, nb) in [(12, 12, 16), (5, 9, 16), (1, 1, 4), (0, 3, 4)] {
            let a = random_dense(m, w, 7);
            assert_same_as_single(&a, m, w, nb, 0).unwrap();
        }
    }

    #[test]
    fn graded_panels() {
        // Rows scaled by 10^k, k from −12 to 12: the pivots follow the scaling, across tiles.
        let mut rng = SplitMix64(9);
        for (m, w, nb) in SHAPES {
            let mut a = random_dense(m, w, 10 + m as u64);
            grade_rows(&mut a, m, w, &mut rng);
            assert_same_as_single(&a, m, w, nb, 0).unwrap();
        }
    }

    #[test]
    fn nearly_singular_panels() {
        // Rank r plus noise at 1e-14: past column r the pivots are chosen among rounding
        // errors, where only the same operations give the same choice.
        for (m, w, nb, r) in [(150, 40, 40, 7), (97, 24, 24, 20), (61, 13, 20, 3)] {
            let a = nearly_singular(m, w, r);
            assert_same_as_single(&a, m, w, nb, 0).unwrap();
        }
    }

    #[test]
    fn ties_go_to_the_smaller_row_not_the_smaller_member() {
        // Column 0's largest magnitude, 5, in panel tile 2 (row 23) and tile 1 (row 12):
        // dealt [0, 2, 1, 2, 1], tile 1 is member 2's, tile 2 member 1's. Row 12 wins.
        let (m, w, nb) = (50, 6, 10);
        let mut a = random_dense(m, w, 21);
        a[23] = 5.0;
        a[12] = -5.0;
        let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
        let ends = run_members(&tiles, &[0, 2, 1, 2, 1], nb, m, 0, None);
        for end in &ends {
            assert_eq!(end.outcome.as_ref().unwrap()[0], 12);
        }
        assert_same_as_single(&a, m, w, nb, 0).unwrap();

        // Entries ±1: every search in column 0 is a tie, and later ones often. Then panel
        // tiles 2.. copies of tile 1: the rows of members other than 0 tie all along.
        let (m, w, nb) = (97, 24, 24);
        let mut rng = SplitMix64(5);
        let ones: Vec<f64> = (0..m * w)
            .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert_same_as_single(&ones, m, w, nb, 0).unwrap();
        let mut copies = random_dense(m, w, 22);
        for j in 0..w {
            for i in 2 * nb..m {
                copies[i + j * m] = copies[nb + i % nb + j * m];
            }
        }
        assert_same_as_single(&copies, m, w, nb, 0).unwrap();
    }

    #[test]
    fn nans_are_never_pivots() {
        // Scattered NaNs (never chosen), and a column of NaNs (no candidate: the diagonal
        // row stays, on every member).
        let (m, w, nb) = (97, 24, 24);
        let mut nans = random_dense(m, w, 6);
        for i in (0..m).step_by(9) {
            nans[i + 3 * m] = f64::NAN;
        }
        nans[50 + 2 * m] = f64::NAN;
        assert_same_as_single(&nans, m, w, nb, 0).unwrap();
        let mut col = random_dense(m, w, 7);
        col[..m].fill(f64::NAN);
        assert_eq!(assert_same_as_single(&col, m, w, nb, 0).unwrap()[0], 0);
    }

    #[test]
    fn singular_panels_fail_on_every_member() {
        // A zero column (in a leaf, at a split point, in the right half) names its global
        // column on every member, as getrf_panel does.
        let (m, w, nb) = (150, 40, 40);
        for zero_col in [0, 5, 8, 16, 20, 39] {
            let mut a = random_dense(m, w, 40 + zero_col as u64);
            a[zero_col * m..(zero_col + 1) * m].fill(0.0);
            let e = assert_same_as_single(&a, m, w, nb, 64).unwrap_err();
            assert_eq!(e.column, 64 + zero_col);
        }
        // Column 1 = 2 · column 0, whose largest magnitude is 4 (in member 1's tile): exact
        // multipliers, so column 1 is exactly zero after the first step.
        let (m, w, nb) = (61, 13, 20);
        let mut rng = SplitMix64(3);
        let mut a = random_dense(m, w, 8);
        for x in &mut a[..m] {
            *x = (rng.next_u64() % 7) as f64 - 3.0;
        }
        a[27] = -4.0;
        for i in 0..m {
            a[i + m] = 2.0 * a[i];
        }
        let e = assert_same_as_single(&a, m, w, nb, 10).unwrap_err();
        assert_eq!(e, SingularColumn { column: 11 });
        let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
        for end in run_members(&tiles, &[0, 1, 2, 1], nb, m, 10, None) {
            assert_eq!(end.outcome, Err(DistPanelError::Singular(e)));
            assert_eq!(end.calls, 2, "no exchange after the singular column");
        }
        assert_eq!(
            DistPanelError::Singular(e).to_string(),
            "matrix is singular: exact zero pivot in column 11"
        );
    }

    #[test]
    fn a_failing_exchange_ends_the_panel() {
        // Calls 0..8 are the first leaf's columns, call 8 the first A12.
        let (m, w, nb) = (150, 40, 40);
        let a = random_dense(m, w, 9);
        let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
        for (failing, call) in [(0, 0), (1, 0), (2, 5), (0, 8), (3, 8), (1, 30)] {
            let ends = run_members(&tiles, &[0, 1, 2, 3], nb, m, 0, Some((failing, call)));
            for (q, end) in ends.iter().enumerate() {
                let Err(DistPanelError::Exchange(e)) = &end.outcome else {
                    panic!("member {q}: {:?} after call {call} failed", end.outcome);
                };
                if q == failing {
                    assert!(e.contains(&format!("refuses call {call}")), "{e}");
                    assert_eq!(end.calls, call + 1);
                }
            }
        }
        let e = DistPanelError::Exchange("pivot search of column 3: member 1 is gone".into());
        assert_eq!(
            e.to_string(),
            "panel exchange failed: pivot search of column 3: member 1 is gone"
        );
    }

    #[test]
    fn malformed_parts_are_exchange_errors() {
        // An exchange that hands back a part too short, or a candidate row above the pivot
        // row, is refused rather than read.
        struct Bad(usize);
        impl ColumnExchange for Bad {
            fn members(&self) -> usize {
                2
            }
            fn me(&self) -> usize {
                0
            }
            fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
                // Member 1's part is [magnitude, row, 4 entries].
                let mut other = part.clone();
                if self.0 == 0 {
                    other.truncate(3);
                } else {
                    other.truncate(6);
                    other[..2].copy_from_slice(&[1.0, -3.0]);
                }
                Ok(vec![part, other])
            }
        }
        let (m, w, nb) = (20, 4, 10);
        for bad in [0, 1] {
            let mut tiles = tiles_of(&random_dense(10, w, 1), 10, w, &[10]);
            let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
            let r = getrf_panel_dist(&mut refs, &[0], nb, m, 0, &Bad(bad));
            let Err(DistPanelError::Exchange(e)) = r else {
                panic!("{r:?}");
            };
            assert!(e.contains("member 1 sent a malformed candidate"), "{e}");
        }
    }

    #[test]
    #[should_panic(expected = "member 0, and only member 0, holds panel tile 0")]
    fn tile_0_belongs_to_member_0() {
        let mut tiles = tiles_of(&random_dense(10, 4, 1), 10, 4, &[10]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        struct Second;
        impl ColumnExchange for Second {
            fn members(&self) -> usize {
                2
            }
            fn me(&self) -> usize {
                1
            }
            fn allgather(&self, _: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
                unreachable!()
            }
        }
        let _ = getrf_panel_dist(&mut refs, &[0], 10, 20, 0, &Second);
    }

    /// A rank's exchange shared by its team (team rank 0 is the only caller that counts):
    /// records the threads that call `allgather`.
    struct TeamExchange {
        me: usize,
        members: usize,
        ex: Mutex<ThreadExchange>,
        callers: Mutex<Vec<std::thread::ThreadId>>,
    }

    impl ColumnExchange for TeamExchange {
        fn members(&self) -> usize {
            self.members
        }

        fn me(&self) -> usize {
            self.me
        }

        fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
            self.callers
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            self.ex.lock().unwrap().allgather(part)
        }
    }

    /// What one rank's team ended with: every member's outcome (rank order), the rank's
    /// tiles, its exchange calls, and whether only team rank 0 made them.
    struct RankEnd {
        outcomes: Vec<Outcome>,
        tiles: Vec<Tile>,
        index: Vec<usize>,
        calls: usize,
        only_rank_0_called: bool,
    }

    /// [`run_members`] with a team of `team` threads per rank ([`DistTeamPanel`]).
    fn run_teams(
        tiles: &[Tile],
        deal: &[usize],
        nb: usize,
        m: usize,
        col0: usize,
        team: usize,
        fail: Option<(usize, usize)>,
    ) -> Vec<RankEnd> {
        let size = deal.iter().max().map_or(1, |&q| q + 1);
        let (tx, rx) = mpsc::channel();
        for ex in group(size, fail) {
            let index: Vec<usize> = (0..tiles.len()).filter(|&i| deal[i] == ex.me).collect();
            let mine: Vec<Tile> = index.iter().map(|&i| tiles[i].clone()).collect();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let me = ex.me;
                let shared = TeamExchange {
                    me,
                    members: size,
                    ex: Mutex::new(ex),
                    callers: Mutex::new(Vec::new()),
                };
                let mut mine = mine;
                let outcomes = Mutex::new(vec![None; team]);
                {
                    let mut refs: Vec<&mut Tile> = mine.iter_mut().collect();
                    let panel = DistTeamPanel::new(&mut refs, &index, nb, m);
                    run_threads(team, |member| {
                        let r = panel.factor(col0, &shared, member);
                        outcomes.lock().unwrap()[member.rank()] = Some(r);
                    })
                    .unwrap();
                }
                let TeamExchange { ex, callers, .. } = shared;
                // Releases ranks waiting on this one after a failure.
                let calls = ex.into_inner().unwrap().calls.get();
                let leader = std::thread::current().id();
                let end = RankEnd {
                    outcomes: outcomes
                        .into_inner()
                        .unwrap()
                        .into_iter()
                        .map(|o| o.expect("every member returned"))
                        .collect(),
                    tiles: mine,
                    index,
                    calls,
                    only_rank_0_called: callers.into_inner().unwrap().iter().all(|&t| t == leader),
                };
                let _ = tx.send((me, end));
            });
        }
        drop(tx);
        let mut ends: Vec<Option<RankEnd>> = (0..size).map(|_| None).collect();
        for _ in 0..size {
            let (me, end) = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a rank returns within a minute (a member panicked or hangs?)");
            ends[me] = Some(end);
        }
        ends.into_iter().map(Option::unwrap).collect()
    }

    /// The `m × w` panel `a` in tiles of `nb` rows, a copy factored by `getrf_panel`, and
    /// its outcome.
    fn reference(
        a: &[f64],
        m: usize,
        w: usize,
        nb: usize,
        col0: usize,
    ) -> (Vec<Tile>, Vec<Tile>, Result<Vec<usize>, SingularColumn>) {
        let tiles = tiles_of(a, m, w, &split_rows(m, nb));
        let mut want_tiles = tiles.clone();
        let mut refs: Vec<&mut Tile> = want_tiles.iter_mut().collect();
        let want = getrf_panel(&mut refs, col0);
        (tiles, want_tiles, want)
    }

    /// A member (or rank) that succeeded among `ranks` ranks, `(ranks, m, w)`: one exchange
    /// per leaf column and per recursion step (none alone), and `getrf_panel`'s bits in each
    /// of its tiles (`index`: their panel tile numbers).
    fn assert_success(
        what: &str,
        (ranks, m, w): (usize, usize, usize),
        calls: usize,
        tiles: &[Tile],
        index: &[usize],
        want_tiles: &[Tile],
    ) {
        let want_calls = if ranks == 1 { 0 } else { exchanges(m, 0, w) };
        assert_eq!(calls, want_calls, "{what}: exchanges");
        for (t, &i) in tiles.iter().zip(index) {
            assert_same_bits(t, &want_tiles[i], &format!("{what}, tile {i}"));
        }
    }

    /// The `m × w` panel `a` factored by `getrf_panel`, then by 1 to 3 ranks (as many as
    /// there are tiles) under each deal, each rank a team of 1 to 3: the same outcome on
    /// every member of every rank; on success the same bits in every tile and
    /// `getrf_panel_dist`'s exchanges, made by team rank 0 only. Returns `getrf_panel`'s
    /// outcome.
    fn assert_teams_same_as_single(
        a: &[f64],
        m: usize,
        w: usize,
        nb: usize,
        col0: usize,
    ) -> Result<Vec<usize>, SingularColumn> {
        let (tiles, want_tiles, want) = reference(a, m, w, nb, col0);
        let want_dist = want.clone().map_err(DistPanelError::Singular);
        for size in 1..=tiles.len().min(3) {
            for deal in deals(tiles.len(), size, (m * w + size) as u64) {
                for team in 1..=3 {
                    let what = format!("m={m} w={w} nb={nb} deal {deal:?} team {team}");
                    for (q, end) in run_teams(&tiles, &deal, nb, m, col0, team, None)
                        .into_iter()
                        .enumerate()
                    {
                        assert!(
                            end.only_rank_0_called,
                            "{what}: rank {q}'s exchange callers"
                        );
                        for (r, outcome) in end.outcomes.iter().enumerate() {
                            assert_eq!(outcome, &want_dist, "{what}: rank {q} member {r}");
                        }
                        if want.is_err() {
                            continue;
                        }
                        let what = format!("{what}: rank {q}");
                        let ranks = (size, m, w);
                        assert_success(
                            &what,
                            ranks,
                            end.calls,
                            &end.tiles,
                            &end.index,
                            &want_tiles,
                        );
                    }
                }
            }
        }
        want
    }

    /// Shapes for the teams: recursing several levels (w = 24..40), once (w = 9, 13), a
    /// short last tile, w < nb, and one leaf.
    const TEAM_SHAPES: [(usize, usize, usize); 6] = [
        (150, 40, 40),
        (97, 24, 24),
        (61, 13, 20),
        (33, 9, 11),
        (50, 5, 12),
        (60, 32, 40),
    ];

    #[test]
    fn teams_match_on_random_and_graded_panels() {
        let mut rng = SplitMix64(19);
        for (i, (m, w, nb)) in TEAM_SHAPES.into_iter().enumerate() {
            let a = random_dense(m, w, 200 + i as u64);
            assert_teams_same_as_single(&a, m, w, nb, 0).unwrap();
            let mut g = a;
            grade_rows(&mut g, m, w, &mut rng);
            assert_teams_same_as_single(&g, m, w, nb, 0).unwrap();
        }
    }

    #[test]
    fn teams_match_on_nearly_singular_and_tied_panels() {
        for (m, w, nb, r) in [(150, 40, 40, 7), (97, 24, 24, 20)] {
            let a = nearly_singular(m, w, r);
            assert_teams_same_as_single(&a, m, w, nb, 0).unwrap();
        }
        let (m, w, nb) = (97, 24, 24);
        let mut rng = SplitMix64(5);
        let ones: Vec<f64> = (0..m * w)
            .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert_teams_same_as_single(&ones, m, w, nb, 0).unwrap();
    }

    #[test]
    fn teams_fail_singular_on_every_member() {
        let (m, w, nb) = (150, 40, 40);
        for zero_col in [0, 8, 20, 39] {
            let mut a = random_dense(m, w, 40 + zero_col as u64);
            a[zero_col * m..(zero_col + 1) * m].fill(0.0);
            let e = assert_teams_same_as_single(&a, m, w, nb, 64).unwrap_err();
            assert_eq!(e.column, 64 + zero_col);
        }
    }

    #[test]
    fn a_failing_exchange_ends_every_member() {
        // Calls 0..8 are the first leaf's columns, call 8 the first A12.
        let (m, w, nb) = (150, 40, 40);
        let a = random_dense(m, w, 9);
        let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
        for team in 1..=3 {
            for (failing, call) in [(0, 0), (1, 5), (0, 8), (2, 8), (1, 30)] {
                let ends = run_teams(&tiles, &[0, 1, 2, 1], nb, m, 0, team, Some((failing, call)));
                for (q, end) in ends.iter().enumerate() {
                    assert!(end.only_rank_0_called, "rank {q}'s exchange callers");
                    let first = end.outcomes[0].clone();
                    let Err(DistPanelError::Exchange(e)) = &first else {
                        panic!("rank {q}: {first:?} after call {call} failed (team {team})");
                    };
                    if q == failing {
                        assert!(e.contains(&format!("refuses call {call}")), "{e}");
                        assert_eq!(end.calls, call + 1);
                    }
                    for o in &end.outcomes {
                        assert_eq!(o, &first, "rank {q}, team {team}: every member the same");
                    }
                }
            }
        }
    }

    #[test]
    fn a_team_panel_is_factored_once() {
        let mut tiles = tiles_of(&random_dense(10, 4, 1), 10, 4, &[10]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        let panel = DistTeamPanel::new(&mut refs, &[0], 10, 10);
        assert!(run_threads(2, |m| panel.factor(0, &Alone, m))
            .unwrap()
            .is_ok());
        let e = run_threads(2, |m| panel.factor(0, &Alone, m)).err();
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("entered a panel already claimed")),
            "{e:?}"
        );
    }
}
