//! GETRF on a panel by a team: [`getrf_panel`]'s recursive LU with its phases shared among the
//! members of a team task (HPL's `pdfact` run by the threads of a process).
//!
//! [`getrf_panel`]: super::getrf_panel

use std::ops::Range;
use std::sync::Mutex;

use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::IntoConst;
use faer::{MatMut, MatRef, Par};
use tessera_engine::team::{share, Member, Part, PartError, PartMut, TeamBuf};

use super::claims::Claims;
use super::single::{factor_contiguous, unblocked_lu};
use super::{eliminate, factor, iamax, locate, SingularColumn, Strategy, LEAF};
use crate::kernels::gemm::{gemm_minus_blocked, gemm_row_block};
use crate::tile::Tile;

/// Rows of a member's share of the panel are whole groups of this many panel rows (one cache
/// line of `f64` when the tiles' rows are multiples of 8): two members never write the same
/// cache line of a column in the leaves, where they write every few microseconds.
const ROW_ALIGN: usize = 8;

/// A column of tiles that the members of one team factor together: [`TeamPanel::factor`],
/// called by every member, gives exactly what [`getrf_panel`](super::getrf_panel) gives on
/// the same tiles (the same pivots, the same bits in every entry, the same error), at every
/// team size.
///
/// ```
/// use tessera_engine::team::run_threads;
/// use tessera_tasks::kernels::TeamPanel;
/// use tessera_tasks::tile::Tile;
///
/// let mut tiles = vec![Tile::from_col_major(2, 2, &[1.0, 4.0, 2.0, 3.0])];
/// let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
/// let panel = TeamPanel::new(&mut refs);
/// let ipiv = run_threads(2, |m| panel.factor(0, m)).unwrap().unwrap();
/// assert_eq!(ipiv, vec![1, 1]); // row 1 holds the larger first entry
/// assert_eq!(tiles[0].as_slice(), &[4.0, 0.25, 3.0, 1.25]);
/// ```
///
/// Chosen design: the same recursion as the single-core kernel (the same split points and
/// leaves of at most [`LEAF`] columns), each phase done by the team, SPMD: every member runs
/// the recursion and takes its part of each phase.
/// - **Leaf** (unblocked LU of rows `d..m`, columns `d..d+n`): the rows are split into
///   contiguous, rank-ordered ranges ([`Member::share`] over rows `d..m`, cut at multiples
///   of 8 panel rows: a cache line of a column); a member reads and writes only its own
///   rows. Per column, each member finds its first row of largest magnitude (the single-core
///   kernel's `iamax` and strict `>`), and one [`Member::all_reduce`] in rank order (a later
///   rank replaces only when strictly greater) gives every member the single-core pivot,
///   together with the pivot row's and the diagonal row's entries. The owners of those two rows then swap them, and every member
///   scales and updates its own rows with the pivot row it received.
/// - **Row interchanges** of a recursion step: the columns are split among the members, each
///   applying every interchange to its columns.
/// - **TRSM** (`A12 := L11⁻¹ A12`, at most `w/2` square, a few percent of the flops): rank 0.
/// - **GEMM** (`A22 −= A21·A12`): the single-core kernel's faer calls (one per row block of
///   each tile), each made by one member, whole: contiguous, rank-ordered runs of calls, a call
///   going to the member whose leaf rows hold its middle row.
///
/// Every floating-point operation is then the single-core kernel's, on the same operands in
/// the same order: each entry of the leaves gets the same scalings and updates (the rows are
/// independent), faer gets the same calls (splitting a call by rows could change its path:
/// faer picks kernels by the shape), and interchanges move values. So the team's pivots are
/// the single-core pivots even where rounding decides them (nearly singular panels), which
/// "equal within rounding" could not promise.
///
/// Synchronisation per recursion step (one fewer than the leaves): 3 barriers (after the
/// interchanges of the right half, after the TRSM, after the GEMM). Per leaf column: 1, the
/// reduction's; none after a leaf or after the interchanges of a left half (see the phase
/// table under *Why the members' accesses never race*). Plus one barrier at the start, after
/// the members claimed the panel.
/// A tall panel of `w = 448` columns: 63 steps, 64 leaves of 7 columns, 448 leaf columns:
/// 638 synchronisations.
///
/// The contiguous fallback of the single-core kernel (first tile shorter than `min(m, w)`:
/// not a layout the LU makes), and leaves wider than [`LEAF`] (at most `LEAF` rows left: only
/// when `m < w`) run on rank 0 alone, with the same code as the single-core kernel, while the
/// other members wait in a reduction that hands them its outcome.
///
/// # Why the members' accesses never race, and are never refused
/// [`TeamPanel::new`] takes the tiles by `&mut` for the panel's lifetime and wraps each in a
/// [`TeamBuf`]; every access of a member goes through a part of one
/// ([`Member::part_mut`] to write, [`Member::part`] to read), lent only while no other part
/// lent overlaps it where either writes, so no two members can ever write, or read and write,
/// one entry at once: a schedule that broke the table below would fail the team with the
/// refused part named, not race (the only `unsafe` left, in `mat_ref` and `mat_mut`, makes a
/// faer view of a lent part: faer takes strided views from raw parts only). [`factor`](TeamPanel::factor) also admits one team, once:
/// each member claims its rank, a claim that finds its rank taken (a second team, a second
/// call) panics, and no member asks for a part before a barrier that every member of its team
/// passes only once all of them claimed. Within the team, phases and the parts each member
/// holds (dropped before the phase ends):
///
/// | phase | member `r` writes (and reads) | ends with |
/// |---|---|---|
/// | claim | nothing | barrier |
/// | leaf column `j` | its own leaf rows, columns `d..d+n`, one part per tile for the whole leaf (reads the pivot and diagonal rows through the reduction, never another member's rows) | the next column's reduction, or nothing (below) |
/// | interchanges, right half | its columns of `d+n1..d+n`, every row of the tiles the interchanges touch | barrier |
/// | TRSM | rank 0: tile 0, rows `d..d+n1`, columns `d+n1..d+n` (reads `L11`, columns `d..d+n1`) | barrier |
/// | GEMM | its calls' rows of columns `d+n1..d+n` (reads `A12`, written by nobody in the phase, and its calls' `A21`: one part per call holds both) | barrier |
/// | interchanges, left half | its columns of `d..d+n1`, every row of the tiles the interchanges touch | nothing (below) |
/// | wide leaf, contiguous fallback | rank 0 alone | reduction |
///
/// A leaf, or a step, that ends with nothing is followed, up to the next barrier, only by the
/// interchanges of enclosing steps as the recursion returns: the left-half interchanges of
/// each step it is the right half of (columns left of it), then, at the first step it is the
/// left half of, that step's right-half interchanges (columns right of it), which end with a
/// barrier; or by the end of `factor`. No two phases of such a run touch the same column, so
/// their parts never overlap. Every leaf starts right after a barrier (the claim's, or the
/// GEMM's of the step whose right half it begins), and a member drops its parts before it
/// reaches a barrier, so the parts of the phase before are returned. The barriers and
/// reductions synchronise as acquire/release (the engine's [`Member::barrier`]), and so does
/// lending a part after its entries' last part was returned (the buffer's lock), so what one
/// phase wrote is visible to the next.
///
/// Cost of the checks (a lock of the tile's buffer to lend, one to return): one part per tile
/// of a member's rows per leaf, one per touched tile per interchange phase, one per GEMM call
/// (its rows of `A21` and `C`) and one for `A12` per step, one for the TRSM; against the
/// leaf's reduction per column and the barriers per step.
pub struct TeamPanel<'a> {
    /// Each tile's entries (column-major, leading dimension its rows), lent to the members
    /// in parts.
    tiles: Vec<TeamBuf<'a, f64>>,
    /// `starts[s]`: the panel row where tile `s` begins.
    starts: Vec<usize>,
    /// Rows of the panel.
    m: usize,
    /// Columns of every tile.
    w: usize,
    /// Which ranks of which team size entered [`factor`](TeamPanel::factor).
    claims: Mutex<Claims>,
}

/// One member's contribution to a leaf column's reduction.
#[derive(Clone, Copy)]
struct Candidate {
    /// Magnitude of the member's first largest entry; −1 when it has none (no rows, or NaN).
    abs: f64,
    /// Its panel row ([`NO_ROW`]: none).
    row: usize,
    /// That row's entries in the leaf's columns.
    prow: [f64; LEAF],
    /// The diagonal row's entries in the leaf's columns, from the member that owns it.
    top: Option<[f64; LEAF]>,
}

const NO_ROW: usize = usize::MAX;

impl Candidate {
    /// `a` from lower ranks, `b` from the next one: the single-core scan's rule, where a later
    /// row replaces the best so far only when strictly larger.
    fn combine(a: Candidate, b: Candidate) -> Candidate {
        let top = a.top.or(b.top);
        let mut best = if b.abs > a.abs { b } else { a };
        best.top = top;
        best
    }
}

/// A member's rows in one tile: tile `s`, which begins at panel row `start`, local `rows`.
struct Segment {
    s: usize,
    start: usize,
    rows: Range<usize>,
}

impl<'a> TeamPanel<'a> {
    /// The panel `tiles` (tile rows `k..mt` of tile column `k`, top to bottom, as for
    /// [`getrf_panel`](super::getrf_panel)), borrowed until the view is dropped.
    ///
    /// # Panics
    /// If the tiles do not all have the same number of columns.
    pub fn new(tiles: &'a mut [&mut Tile]) -> TeamPanel<'a> {
        let w = tiles.first().map_or(0, |t| t.cols());
        assert!(
            tiles.iter().all(|t| t.cols() == w),
            "getrf_panel: all tiles of a panel must have {w} columns"
        );
        let mut starts = Vec::with_capacity(tiles.len());
        let mut m = 0;
        let tiles = tiles
            .iter_mut()
            .map(|t| {
                starts.push(m);
                let rows = t.rows();
                m += rows;
                TeamBuf::new(t.as_mut_slice(), rows, w)
            })
            .collect();
        TeamPanel {
            tiles,
            starts,
            m,
            w,
            claims: Mutex::new(Claims::default()),
        }
    }

    /// Factors the panel `P·A = L·U` in place, with partial pivoting over all its rows: what
    /// [`getrf_panel`](super::getrf_panel)`(tiles, col0)` does, bit for bit. Every member of
    /// one team calls it (`team.run(|m| panel.factor(col0, m))`), and every member returns
    /// the same result.
    ///
    /// # Errors
    /// [`SingularColumn`] naming global column `col0 + j` when the pivot of local column `j`
    /// is an exact zero (the first such column), from every member.
    ///
    /// # Panics
    /// When a second team, or a second call, enters the panel (it is factored once, by one
    /// team): that member panics before touching any tile, which fails its team.
    pub fn factor(&self, col0: usize, member: &Member<'_>) -> Result<Vec<usize>, SingularColumn> {
        self.claim(member);
        // Every member of this team claimed its rank: no other team gets past its own.
        member.barrier();
        let singular = |j| SingularColumn { column: col0 + j };
        let k = self.m.min(self.w);
        let Some(first) = self.tiles.first() else {
            return Ok(Vec::new());
        };
        if first.rows() < k {
            return self.factor_copied(member).map_err(singular);
        }
        let mut ipiv = vec![0usize; k];
        factor(
            &mut Walk {
                panel: self,
                member,
            },
            0,
            self.w,
            &mut ipiv,
        )
        .map_err(singular)?;
        Ok(ipiv)
    }

    /// Records `member`'s rank as taken.
    ///
    /// # Panics
    /// If the rank was taken, or the panel was claimed by a team of another size.
    fn claim(&self, member: &Member<'_>) {
        Claims::claim(&self.claims, member, "TeamPanel::factor");
    }

    /// This member's leaf rows when rows `d..m` are shared: contiguous, in rank order, cut at
    /// multiples of `ROW_ALIGN` panel rows.
    fn rows_of(&self, member: &Member<'_>, d: usize) -> Range<usize> {
        let base = d / ROW_ALIGN * ROW_ALIGN;
        let r = share(self.m - base, ROW_ALIGN, member.size(), member.rank());
        let start = (base + r.start).max(d);
        start..(base + r.end).max(start)
    }

    /// The pieces of panel rows `rows` in each tile.
    fn segments(&self, rows: &Range<usize>) -> Vec<Segment> {
        (0..self.tiles.len())
            .filter_map(|s| {
                let (start, end) = (self.starts[s], self.starts[s] + self.tiles[s].rows());
                let (lo, hi) = (rows.start.max(start), rows.end.min(end));
                (lo < hi).then(|| Segment {
                    s,
                    start,
                    rows: lo - start..hi - start,
                })
            })
            .collect()
    }

    /// Panel row `row`'s entries in columns `d..d+n` (`n <= LEAF`), from the part of `parts`
    /// (this member's leaf rows, columns `d..d+n`) that holds it.
    fn read_row(
        parts: &[(Segment, PartMut<'_, f64>)],
        row: usize,
        d: usize,
        n: usize,
    ) -> [f64; LEAF] {
        let (seg, part) = &parts[Self::holding(parts, row)];
        let i = row - seg.start - seg.rows.start;
        let mut out = [0.0; LEAF];
        for (c, x) in out.iter_mut().enumerate().take(n) {
            *x = part.col(d + c)[i];
        }
        out
    }

    /// Writes `vals` into panel row `row`, columns `d..d+n`, through the part of `parts` that
    /// holds it.
    fn write_row(
        parts: &mut [(Segment, PartMut<'_, f64>)],
        row: usize,
        d: usize,
        n: usize,
        vals: &[f64; LEAF],
    ) {
        let k = Self::holding(parts, row);
        let (seg, part) = &mut parts[k];
        let i = row - seg.start - seg.rows.start;
        for (c, &v) in vals.iter().enumerate().take(n) {
            part.col_mut(d + c)[i] = v;
        }
    }

    /// Which of `parts` holds panel row `row`.
    fn holding(parts: &[(Segment, PartMut<'_, f64>)], row: usize) -> usize {
        parts
            .iter()
            .position(|(seg, _)| {
                (seg.start + seg.rows.start..seg.start + seg.rows.end).contains(&row)
            })
            .expect("a row of this member's")
    }

    /// Unblocked right-looking LU (`dgetf2`) of rows `d..m`, columns `d..d+n`, by the team:
    /// each member pivots, swaps, scales and updates its own rows (see [`TeamPanel`]).
    fn leaf(
        &self,
        member: &Member<'_>,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
    ) -> Result<(), usize> {
        let steps = (self.m - d).min(n);
        if steps == 0 {
            return Ok(());
        }
        if n > LEAF {
            return self.wide_leaf(member, d, n, ipiv);
        }
        let own = self.rows_of(member, d);
        let end = d + n;
        // This member's rows of the leaf's columns, one part per tile, held for the whole leaf.
        let mut parts: Vec<(Segment, PartMut<'_, f64>)> = self
            .segments(&own)
            .into_iter()
            .map(|seg| {
                let part = lent(
                    seg.s,
                    member.part_mut(&self.tiles[seg.s], seg.rows.clone(), d..end),
                );
                (seg, part)
            })
            .collect();
        for (j, slot) in ipiv.iter_mut().enumerate().take(steps) {
            let (row, col) = (d + j, d + j);
            // This member's first row of largest magnitude, as the single-core scan finds it.
            let mut mine = Candidate {
                abs: -1.0,
                row: NO_ROW,
                prow: [0.0; LEAF],
                top: None,
            };
            for (seg, part) in &parts {
                let from = seg.rows.start.max(row.saturating_sub(seg.start));
                if from >= seg.rows.end {
                    continue;
                }
                let c = &part.col(col)[from - seg.rows.start..];
                let i = iamax(c);
                if c[i].abs() > mine.abs {
                    (mine.abs, mine.row) = (c[i].abs(), seg.start + from + i);
                }
            }
            if mine.row != NO_ROW {
                mine.prow = Self::read_row(&parts, mine.row, d, n);
            }
            if own.contains(&row) {
                mine.top = Some(Self::read_row(&parts, row, d, n));
            }
            let best = member.all_reduce(mine, Candidate::combine);
            let top = best.top.expect("the diagonal row is some member's");
            // No candidate: every entry is NaN, and the single-core scan keeps the diagonal.
            let (p, prow) = if best.row == NO_ROW {
                (row, top)
            } else {
                (best.row, best.prow)
            };
            *slot = p;
            let pivot = prow[j];
            if pivot == 0.0 {
                return Err(col);
            }
            if p != row {
                if own.contains(&row) {
                    Self::write_row(&mut parts, row, d, n, &prow);
                }
                if own.contains(&p) {
                    Self::write_row(&mut parts, p, d, n, &top);
                }
            }
            let inv = pivot.recip();
            for (seg, part) in &mut parts {
                let from = seg.rows.start.max((row + 1).saturating_sub(seg.start));
                if from >= seg.rows.end {
                    continue;
                }
                let lo = from - seg.rows.start;
                // The part's columns `col..end` (it holds `d..end`).
                let mut cols = part.cols_mut().skip(j);
                let l = &mut cols.next().expect("column `col` of the leaf")[lo..];
                let columns = prow[j + 1..n]
                    .iter()
                    .copied()
                    .zip(cols.map(|x| &mut x[lo..]));
                eliminate(l, inv, columns);
            }
        }
        Ok(())
    }

    /// A leaf of more than [`LEAF`] columns, hence at most `LEAF` rows (`m < w`, so tile 0
    /// holds every row): rank 0 factors it alone, with the single-core kernel's `dgetf2`
    /// (which is its leaf, operation for operation), and hands the outcome to the others.
    fn wide_leaf(
        &self,
        member: &Member<'_>,
        d: usize,
        n: usize,
        ipiv: &mut [usize],
    ) -> Result<(), usize> {
        let steps = (self.m - d).min(n);
        let mine = (member.rank() == 0).then(|| {
            let ld = self.tiles[0].rows();
            assert!(ld >= self.m, "a wide leaf lies in tile 0");
            let rows = self.m - d;
            // Whole columns `d..d+n` of tile 0: `dgetf2` takes them as one slice.
            let mut part = lent(0, member.part_mut(&self.tiles[0], 0..ld, d..d + n));
            let cols = part.as_mut_slice().expect("whole columns are contiguous");
            let a = &mut cols[d..d + (n - 1) * ld + rows];
            let mut piv = vec![0; steps];
            unblocked_lu(a, ld, rows, n, &mut piv).map(|()| piv)
        });
        let outcome = member
            .all_reduce(mine, |a, b| a.or(b))
            .expect("rank 0 factored the leaf");
        let piv = outcome.map_err(|j| d + j)?;
        for (slot, p) in ipiv.iter_mut().zip(piv) {
            *slot = d + p;
        }
        Ok(())
    }

    /// Swaps panel row `first + i` with row `ipiv[i]`, in order, in this member's share of
    /// columns `c0..c0+cols`.
    fn swap_rows(&self, member: &Member<'_>, c0: usize, cols: usize, first: usize, ipiv: &[usize]) {
        let mine = member.share(cols, 1);
        if mine.is_empty() {
            return;
        }
        let pairs: Vec<_> = ipiv
            .iter()
            .enumerate()
            .filter(|&(i, &p)| p != first + i)
            .map(|(i, &p)| (locate(&self.starts, first + i), locate(&self.starts, p)))
            .collect();
        if pairs.is_empty() {
            return;
        }
        let mine = c0 + mine.start..c0 + mine.end;
        // This member's columns, every row, of each tile the interchanges touch.
        let mut parts: Vec<Option<PartMut<'_, f64>>> =
            (0..self.tiles.len()).map(|_| None).collect();
        for &((sa, _), (sb, _)) in &pairs {
            for s in [sa, sb] {
                if parts[s].is_none() {
                    let rows = self.tiles[s].rows();
                    parts[s] = Some(lent(
                        s,
                        member.part_mut(&self.tiles[s], 0..rows, mine.clone()),
                    ));
                }
            }
        }
        // Column by column (the interchanges in order within each): each part's columns,
        // and the current column of every tile (empty for a tile no interchange touches).
        let mut cols: Vec<_> = parts
            .iter_mut()
            .map(|p| p.as_mut().map(PartMut::cols_mut))
            .collect();
        let mut col: Vec<&mut [f64]> = Vec::with_capacity(cols.len());
        for _ in mine {
            col.clear();
            col.extend(cols.iter_mut().map(|it| match it {
                Some(it) => it.next().expect("one column per column of the part"),
                None => &mut [],
            }));
            for &((sa, ra), (sb, rb)) in &pairs {
                if sa == sb {
                    col[sa].swap(ra, rb);
                } else {
                    let [a, b] = col.get_disjoint_mut([sa, sb]).expect("two tiles");
                    std::mem::swap(&mut a[ra], &mut b[rb]);
                }
            }
        }
    }

    /// `A12 := L11⁻¹ A12` for the split of rows `d..m`, columns `d..d+n1+n2` after `n1`
    /// columns, as the single-core kernel calls it. Rank 0 only.
    fn trsm(&self, member: &Member<'_>, d: usize, n1: usize, n2: usize) {
        // `L11` (rows and columns `d..d+n1`) and `A12` (rows `d..d+n1`, columns
        // `d+n1..d+n1+n2`) lie in tile 0 (`rows >= min(m, w)`): one part, split by faer.
        let mut part = lent(
            0,
            member.part_mut(&self.tiles[0], d..d + n1, d..d + n1 + n2),
        );
        let (l11, a12) = mat_mut(&mut part).split_at_col_mut(n1);
        solve_unit_lower_triangular_in_place(l11.into_const(), a12, Par::Seq);
    }

    /// `A22 −= A21·A12` for the split of rows `d..m` after `n1` columns: the single-core
    /// kernel's faer calls (one per row block of each tile, [`gemm_row_block`]), this
    /// member's share of them.
    fn gemm(&self, member: &Member<'_>, d: usize, n1: usize, n2: usize) {
        let own = self.rows_of(member, d + n1);
        let right = d + n1..d + n1 + n2;
        // Read by every member in this phase, written by none (the members write rows
        // `>= d+n1`).
        let a12 = lent(0, member.part(&self.tiles[0], d..d + n1, right.clone()));
        for (s, t) in self.tiles.iter().enumerate() {
            let first = if s == 0 { d + n1 } else { 0 };
            if t.rows() <= first {
                continue;
            }
            let rows = t.rows() - first;
            // `gemm_minus_blocked`'s blocks for the single-core kernel's call on this tile.
            let block = match gemm_row_block(rows, n1) {
                0 => rows,
                b => b,
            };
            let mut r0 = 0;
            while r0 < rows {
                let r = block.min(rows - r0);
                if own.contains(&(self.starts[s] + first + r0 + r / 2)) {
                    let top = first + r0;
                    // Each block has one owner: its rows of `A21` and `C` (one part, split
                    // by faer) are this member's alone.
                    let mut block = lent(
                        s,
                        member.part_mut(&self.tiles[s], top..top + r, d..right.end),
                    );
                    let (a21, c) = mat_mut(&mut block).split_at_col_mut(n1);
                    // Rows 0: one faer call, the one the single-core kernel makes.
                    gemm_minus_blocked(c, a21.into_const(), mat_ref(&a12), 0);
                }
                r0 += r;
            }
        }
    }

    /// Copies the whole panel into `buf` (column-major, `m` rows) when `to_buf`, else `buf`
    /// back into the tiles: rank 0 alone, in the contiguous fallback.
    fn copy_panel(&self, member: &Member<'_>, buf: &mut [f64], to_buf: bool) {
        let mut parts: Vec<_> = (0..self.tiles.len())
            .map(|s| {
                let rows = self.tiles[s].rows();
                lent(s, member.part_mut(&self.tiles[s], 0..rows, 0..self.w))
            })
            .collect();
        for j in 0..self.w {
            for (s, part) in parts.iter_mut().enumerate() {
                let tile = part.col_mut(j);
                let at = j * self.m + self.starts[s];
                let panel = &mut buf[at..at + tile.len()];
                if to_buf {
                    panel.copy_from_slice(tile);
                } else {
                    tile.copy_from_slice(panel);
                }
            }
        }
    }

    /// The contiguous fallback of the single-core kernel, on rank 0 alone (the others wait
    /// in the reduction): its copy, recursion and copy back. `Err(j)`: zero pivot in panel
    /// column `j`.
    fn factor_copied(&self, member: &Member<'_>) -> Result<Vec<usize>, usize> {
        let (m, w) = (self.m, self.w);
        let mine = (member.rank() == 0).then(|| {
            let mut buf = vec![0.0; m * w];
            self.copy_panel(member, &mut buf, true);
            let mut ipiv = vec![0usize; m.min(w)];
            let r = factor_contiguous(&mut buf, m, w, &mut ipiv);
            if r.is_ok() {
                self.copy_panel(member, &mut buf, false);
            }
            r.map(|()| ipiv)
        });
        member
            .all_reduce(mine, |a, b| a.or(b))
            .expect("rank 0 factored the panel")
    }
}

/// One member's walk of the recursion: it takes its part of each phase of the team's.
struct Walk<'p, 'a, 'm> {
    panel: &'p TeamPanel<'a>,
    member: &'p Member<'m>,
}

/// Leaves on each member's rows, with one reduction per column; deferred interchanges by
/// columns; the TRSM on rank 0; the GEMM calls dealt by rows (see [`TeamPanel`]).
impl Strategy for Walk<'_, '_, '_> {
    type Error = usize;

    fn rows(&self) -> usize {
        self.panel.m
    }

    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), usize> {
        self.panel.leaf(self.member, d, n, ipiv)
    }

    fn interchange(&mut self, c0: usize, cols: usize, first: usize, ipiv: &[usize]) {
        self.panel.swap_rows(self.member, c0, cols, first, ipiv);
    }

    /// Ends the right half's interchanges with a barrier, then the TRSM and the GEMM, each
    /// ending with one.
    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), usize> {
        let (panel, member) = (self.panel, self.member);
        member.barrier();
        if member.rank() == 0 {
            panel.trsm(member, d, n1, n2);
        }
        member.barrier();
        panel.gemm(member, d, n1, n2);
        member.barrier();
        Ok(())
    }
}

/// The part `request` asked for, from tile `s`.
///
/// # Panics
/// If it was refused (another part lent now overlaps it, which the phase table of
/// [`TeamPanel`] says never happens), which fails the team.
fn lent<P>(s: usize, request: Result<P, PartError>) -> P {
    request.unwrap_or_else(|e| panic!("TeamPanel: tile {s}: {e}"))
}

/// `part` as a faer view.
fn mat_ref<'b>(part: &'b Part<'_, f64>) -> MatRef<'b, f64> {
    let (rows, cols) = (part.rows().len(), part.cols().len());
    // SAFETY: the part's entries (`rows` × `cols`, columns `ld` apart from its first entry)
    // lie in its buffer, and no part lent while `part` lives, hence while this borrow of it
    // lives, writes them (its lease).
    unsafe { MatRef::from_raw_parts(part.as_ptr(), rows, cols, 1, part.ld() as isize) }
}

/// `part` as a faer view, writable.
fn mat_mut<'b>(part: &'b mut PartMut<'_, f64>) -> MatMut<'b, f64> {
    let (rows, cols, ld) = (part.rows().len(), part.cols().len(), part.ld() as isize);
    // SAFETY: the part's entries (`rows` × `cols`, columns `ld` apart from its first entry)
    // lie in its buffer and are this part's alone while it lives (its lease); the `&mut`
    // borrow of `part` keeps its own accessors away while the view lives.
    unsafe { MatMut::from_raw_parts_mut(part.as_mut_ptr(), rows, cols, 1, ld) }
}

#[cfg(test)]
mod tests;
