//! GETRF on a panel spread over the ranks of a process column (HPL's `pdfact`): each member
//! factors its own tiles, exchanging pivot rows and `A12` with the others, and ends with
//! exactly [`getrf_panel`]'s pivots and bits; each member on one core ([`getrf_panel_dist`],
//! here) or with a team of its cores ([`DistTeamPanel`]).
//!
//! [`getrf_panel`]: super::getrf_panel
//! [`DistTeamPanel`]: super::DistTeamPanel

use std::fmt;

use faer::MatRef;

use super::single::{gemm_below, gemm_tiles, solve_a12};
use super::{eliminate_tile, factor, getrf_panel, iamax, SingularColumn, Strategy};
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
/// `split_columns` points, leaves of at most [`LEAF`](super::LEAF) columns), run SPMD by every member,
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
///   (`A22 −= A21·A12`, one per tile, [`gemm_row_block`](crate::kernels::gemm_row_block)
///   rows per faer call) on its rows below `d + n1`; a received `A12` is laid out with the
///   top tile's column stride, so that faer gets the very operands' shapes and strides it
///   gets in the single-core kernel.
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
pub(super) fn check_tiles(tiles: &[&mut Tile], index: &[usize], nb: usize, m: usize) -> usize {
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
pub(super) fn check_member(index: &[usize], rows: usize, m: usize, members: usize, me: usize) {
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
pub(super) struct DistPanel<'p, 't> {
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
    pub(super) fn new(
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
    pub(super) fn factor_all(
        mut self,
        ex: &dyn ColumnExchange,
    ) -> Result<Vec<usize>, DistPanelError> {
        let w = self.w;
        let mut ipiv = vec![0usize; self.m.min(w)];
        factor(
            &mut Walk {
                panel: &mut self,
                ex,
            },
            0,
            w,
            &mut ipiv,
        )?;
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

    /// Unblocked right-looking LU of rows `d..m`, columns `d..d+n`, one exchange per column.
    pub(super) fn leaf(
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
            eliminate_tile(t, from, c, inv, &urow[c + 1..end]);
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
    pub(super) fn share_a12(
        &mut self,
        d: usize,
        n1: usize,
        n2: usize,
        ex: &dyn ColumnExchange,
        a12: &mut Vec<f64>,
    ) -> Result<(), DistPanelError> {
        let k0 = d + n1;
        let part = if self.me == 0 {
            solve_a12(self.tiles[0], d, n1, n2);
            let (top, ld) = (self.tiles[0].as_slice(), self.tiles[0].rows());
            (0..n2)
                .flat_map(|j| top[d + (k0 + j) * ld..][..n1].iter().copied())
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
        if self.me == 0 {
            // The single-core kernel's calls verbatim, A12 where the TRSM left it.
            gemm_below(self.tiles, d, n1, n2);
        } else {
            let a12 = MatRef::from_column_major_slice_with_stride(&self.a12, n1, n2, self.top_rows);
            gemm_tiles(&mut *self.tiles, d, n1, n2, a12);
        }
    }
}

/// One member's walk of the recursion, with its exchange.
struct Walk<'v, 'p, 't> {
    panel: &'v mut DistPanel<'p, 't>,
    ex: &'v dyn ColumnExchange,
}

/// Leaves on this member's rows, one exchange per column, interchanging whole rows (so
/// nothing is deferred); the TRSM on member 0, `A12` exchanged, the GEMM on each member's
/// rows.
impl Strategy for Walk<'_, '_, '_> {
    type Error = DistPanelError;

    fn rows(&self) -> usize {
        self.panel.m
    }

    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), DistPanelError> {
        self.panel.leaf(d, n, ipiv, self.ex)
    }

    fn interchange(&mut self, _: usize, _: usize, _: usize, _: &[usize]) {}

    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), DistPanelError> {
        self.panel.update(d, n1, n2, self.ex)
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

#[cfg(test)]
pub(super) mod tests;
