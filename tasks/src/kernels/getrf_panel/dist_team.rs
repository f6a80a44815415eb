//! [`getrf_panel_dist`] run by the members of a team (the CPU workers of one rank's task).

use std::marker::PhantomData;
use std::sync::{Mutex, PoisonError, RwLock};

use faer::{MatMut, MatRef};
use tessera_engine::team::{share, Member};

use super::claims::Claims;
use super::dist::{check_member, check_tiles, DistPanel};
use super::{factor, getrf_panel_dist, ColumnExchange, DistPanelError, Strategy};
use crate::kernels::gemm::{gemm_minus_blocked, gemm_row_block};
use crate::tile::Tile;

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
        factor(
            &mut Walk {
                panel: self,
                member,
                at,
            },
            0,
            self.w,
            &mut ipiv,
        )?;
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

/// One member's walk of the recursion.
struct Walk<'v, 'a, 'm> {
    panel: &'v DistTeamPanel<'a>,
    member: &'v Member<'m>,
    at: At<'v>,
}

/// Leaves and the TRSM with the `A12` exchange on team rank 0 (each then reduced to every
/// member), the GEMM calls dealt among the members; whole-row interchanges in the leaves.
impl Strategy for Walk<'_, '_, '_> {
    type Error = DistPanelError;

    fn rows(&self) -> usize {
        self.panel.m
    }

    fn leaf(&mut self, d: usize, n: usize, ipiv: &mut [usize]) -> Result<(), DistPanelError> {
        self.panel.leaf(self.member, &self.at, d, n, ipiv)
    }

    fn interchange(&mut self, _: usize, _: usize, _: usize, _: &[usize]) {}

    fn update(&mut self, d: usize, n1: usize, n2: usize) -> Result<(), DistPanelError> {
        self.panel.update(self.member, &self.at, d, n1, n2)
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
pub(super) struct Alone;

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
mod tests;
