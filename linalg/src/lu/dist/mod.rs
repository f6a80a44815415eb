//! Tiled LU with partial pivoting across MPI ranks: one symbolic DAG on every
//! rank, tiles dealt 2-D block-cyclically over a P×Q process grid, remote
//! edges instead of HPL's hand-written broadcasts (the distributed layer,
//! `tessera_engine::dist::symbolic`).
//!
//! Rank `(p, q)` (number `p·Q + q`, HPL's row-major order) owns tile `(i, j)`
//! when `i mod P = p` and `j mod Q = q` (HPL's layout; a [`Layout`] may deal
//! the tile columns otherwise, e.g. in proportion to the ranks' speeds, see
//! [`layout`]); it generates only the tiles it owns. The
//! tasks are the LU's (`PANEL`, `TRSM`, `GEMM` on the same codelets, no left
//! swaps: HPL's layout) placed on the owner of what they write, plus:
//!
//! - **1×Q grids** (column-cyclic, DPLASMA `zgetrf_1d`-like): the panel stays
//!   on the owner of its column (local pivot search and swaps); its pivots
//!   and `L` tiles travel along a ring of the ranks that own a column to its
//!   right (`BCAST(k, r)` on each, forwarding what it received), so the
//!   panel's owner sends it once, not Q−1 times. The swaps of column `j`,
//!   `SWAP(k, j)`, are local to column `j`'s owner.
//! - **P×Q grids, P > 1**: panel `k` is factored by its process column, as
//!   HPL's `pdfact` does: `PANEL_PART(k, p)` on each rank of the column that
//!   holds tiles of it factors its own tiles, and the members meet inside
//!   their bodies, one exchange per panel column (the pivot candidates, the
//!   pivot row and the diagonal row) and one per recursion step (the block
//!   row of `U` the others update with): `getrf_panel_dist`, whose pivots and
//!   factors are the one-process panel's, bit for bit. No panel tile moves
//!   to be factored: gathering the column on one rank would move the panel's
//!   bytes twice and serialise every panel on that rank (CHANGELOG: "The
//!   distributed LU on P×Q grids"). The members' tasks carry a
//!   `Rendezvous`, so the simulator holds each until all have started and
//!   charges the exchanges. Each part's `L` tiles then go to every rank of
//!   its process row (the panel broadcast along process rows), each rank's
//!   `TRSM` results (`U` rows) down its process column. The row swaps of
//!   column `j` cross ranks: `SWAPOUT(k, j, p)` collects the rows of process
//!   row `p`'s tiles that the pivots move into the top tile, `SWAPTOP(k, j)`
//!   builds the new top tile and the top rows that move down, `SWAPIN(k, j,
//!   p)` writes those back (only the moved rows travel, in buffers of at most
//!   `nb` rows).
//!
//! Look-ahead keeps the priorities of the one-process LU (the next panel's
//! column first), on every rank. Copies of other ranks' data are dropped once
//! this rank's last task reading them is done, so a rank holds its share of
//! the matrix plus the data in flight (and, for P > 1, the panels it factored).
//!
//! This folder: the rank's part and its geometry (here), the DAG and its
//! remote edges (`dag.rs`), where a rank keeps its data (`storage.rs`), how
//! the tiles are dealt over the ranks ([`layout`]), the communication model
//! (`traffic.rs`), the solve and the residual after the run (`solve.rs`,
//! `residual.rs`) and the byte codecs of their collectives (`codec.rs`).

mod codec;
mod column;
mod dag;
pub mod layout;
mod residual;
mod solve;
mod storage;
mod traffic;

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tessera_engine::dist::Collectives;
use tessera_engine::team::TeamSize;
use tessera_engine::util::lock;
use tessera_engine::{Error, Registrar, Runtime};
use tessera_tasks::tile::{Tile, TilePool};

use self::storage::{Key, Slot};
use crate::hpl::generate_tile;

pub use self::layout::{Grid, Layout};
pub use self::solve::HeldFactors;

/// One task of the distributed LU DAG (see the module doc): the key of its
/// task classes, as [`LuTask`](crate::lu::LuTask) is the one-process LU's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DistLuTask {
    /// `PANEL(k)` (P = 1).
    Panel(usize),
    /// `PANEL_PART(k, p)`: process row `p`'s tiles of panel `k` (P > 1).
    Part(usize, usize),
    /// `BCAST(k, r)`: rank `r`'s step of panel `k`'s ring (P = 1).
    Bcast(usize, usize),
    /// `SWAP(k, j)` (P = 1).
    Swap(usize, usize),
    /// `SWAPOUT(k, j, p)` (P > 1).
    SwapOut(usize, usize, usize),
    /// `SWAPTOP(k, j)` (P > 1).
    SwapTop(usize, usize),
    /// `SWAPIN(k, j, p)` (P > 1).
    SwapIn(usize, usize, usize),
    /// `TRSM(k, j)`.
    Trsm(usize, usize),
    /// `GEMM(k, i, j)`.
    Gemm(usize, usize, usize),
}

/// One rank's part of the distributed LU: the DAG, its data, and the copies
/// of other ranks' data it holds.
pub struct DistLu {
    n: usize,
    nb: usize,
    t: usize,
    /// The owner of every tile, and the process grid ([`DistLu::grid`]).
    layout: Layout,
    rank: usize,
    seed: u64,
    registrar: Registrar,
    data: Mutex<HashMap<u64, Slot>>,
    /// Copies of other ranks' data (and this rank's buffers): reads of them
    /// still to come by tasks of this rank; dropped at zero.
    uses: Mutex<HashMap<u64, usize>>,
    /// Tiles and row buffers are virtual (a simulated run: sizes, no values).
    virtual_data: bool,
    /// Buffers for the copies of other ranks' tiles, made and touched when
    /// the matrix is generated ([`DistLu::from_fn`]), before the
    /// factorisation's clock starts, as HPL allocates its work space: a
    /// fresh copy had cost a page fault per 4 KiB on the communication
    /// thread in the middle of the run (about 32 k faults, 55 ms of a rank's
    /// core at N = 8192). They are exactly the copies the memory check
    /// counts ([`DistLu::tile_copies`]); a copy is overwritten by the data it
    /// receives before any read.
    copy_pool: std::sync::Arc<TilePool>,
    /// The channel the members of a panel meet on (P > 1), opened when the
    /// run starts (`DistClasses::open`).
    panel_net: std::sync::OnceLock<std::sync::Arc<Collectives>>,
    /// The team a rank's part of a panel may have (P > 1; `None`: one worker).
    panel_team: Option<TeamSize>,
}

impl DistLu {
    /// Rank `rank`'s part of the LU of the HPL matrix `(n, seed)` in tiles of
    /// `nb` on `grid`, block-cyclic: generates the tiles this rank owns on `rt`.
    pub fn new(rt: &Runtime, n: usize, nb: usize, seed: u64, grid: Grid, rank: usize) -> DistLu {
        let layout = Layout::cyclic(grid, n.div_ceil(nb));
        Self::with_layout(rt, n, nb, seed, layout, rank)
    }

    /// Like [`new`](Self::new) with the tiles dealt by `layout`.
    ///
    /// # Panics
    /// If `layout` does not have `⌈n / nb⌉` tile columns (a caller's bug:
    /// make it with `n.div_ceil(nb)`).
    pub fn with_layout(
        rt: &Runtime,
        n: usize,
        nb: usize,
        seed: u64,
        layout: Layout,
        rank: usize,
    ) -> DistLu {
        Self::from_fn(rt, n, nb, seed, layout, rank, |i, j| {
            generate_tile(n, nb, seed, i, j)
        })
    }

    /// Like [`with_layout`](Self::with_layout) with the tiles this rank owns
    /// made by `tile(i, j)` (the solve's right-hand side and residual still
    /// use the HPL problem of `seed`).
    pub fn from_fn(
        rt: &Runtime,
        n: usize,
        nb: usize,
        seed: u64,
        layout: Layout,
        rank: usize,
        tile: impl Fn(usize, usize) -> Tile,
    ) -> DistLu {
        let t = n.div_ceil(nb);
        let mut lu = DistLu::empty(n, nb, seed, layout, rank, rt.registrar(), false);
        let copies = lu.copied_tiles();
        lu.copy_pool = TilePool::new(copies.len());
        for &(i, j) in &copies {
            lu.copy_pool.reserve(lu.rows(i), lu.rows(j));
        }
        // And, when there are messages at all, two message buffers (one
        // going out, one coming in) as large as the largest message: a whole
        // tile column, with room for headers.
        if lu.layout.grid().ranks() > 1 {
            tessera_engine::dist::buffers::reserve(n * nb.min(n) * 8 + (64 << 10), 2);
        }
        {
            let mut d = lock(&lu.data);
            for j in 0..t {
                for i in 0..t {
                    if lu.layout.owner(i, j) == rank {
                        let h = rt.register_replicable_named(tile(i, j), format!("A({i},{j})"));
                        d.insert(lu.key(Key::Tile(i, j)), Slot::Tile(h));
                    }
                }
            }
        }
        lu
    }

    /// Rank `rank`'s part of the LU of an `n × n` matrix on a simulated
    /// runtime (`Config::simulated`), tiles dealt by `layout`: the same DAG,
    /// owners and messages as [`with_layout`](Self::with_layout), over
    /// virtual tiles and row buffers (sizes, no values; the simulated network
    /// charges their bytes), so any `n` fits.
    ///
    /// # Panics
    /// If `layout` does not have `⌈n / nb⌉` tile columns.
    pub fn new_virtual(
        rt: &Runtime,
        n: usize,
        nb: usize,
        layout: Layout,
        rank: usize,
    ) -> Result<DistLu, Error> {
        let t = n.div_ceil(nb);
        let lu = DistLu::empty(n, nb, 0, layout, rank, rt.registrar(), true);
        {
            let mut d = lock(&lu.data);
            for j in 0..t {
                for i in 0..t {
                    if lu.layout.owner(i, j) == rank {
                        let (r, c) = (lu.rows(i), lu.rows(j));
                        let h = rt.register_virtual::<Tile>(
                            (r * c * 8) as u64,
                            [r, c, 0, 0],
                            format!("A({i},{j})"),
                        )?;
                        d.insert(lu.key(Key::Tile(i, j)), Slot::Tile(h));
                    }
                }
            }
        }
        Ok(lu)
    }

    /// Rank `rank`'s part with no data registered yet.
    ///
    /// # Panics
    /// If `layout` does not have `⌈n / nb⌉` tile columns (a caller's bug:
    /// make it with `n.div_ceil(nb)`).
    fn empty(
        n: usize,
        nb: usize,
        seed: u64,
        layout: Layout,
        rank: usize,
        registrar: Registrar,
        virtual_data: bool,
    ) -> DistLu {
        let t = n.div_ceil(nb);
        assert_eq!(
            layout.tiles(),
            t,
            "a layout of {} tile columns for {t} tile columns",
            layout.tiles()
        );
        DistLu {
            n,
            nb,
            t,
            layout,
            rank,
            seed,
            registrar,
            data: Mutex::new(HashMap::new()),
            uses: Mutex::new(HashMap::new()),
            virtual_data,
            copy_pool: TilePool::new(0),
            panel_net: std::sync::OnceLock::new(),
            panel_team: None,
        }
    }

    /// Let a team of CPU workers factor this rank's part of each panel (P > 1:
    /// `DistTeamPanel`; the rank's exchanges stay on one member, the GEMMs of
    /// the recursion are shared). `None`: one worker.
    pub fn with_panel_team(mut self, team: Option<TeamSize>) -> DistLu {
        self.panel_team = team;
        self
    }

    /// Tile rows (and columns).
    pub fn tiles(&self) -> usize {
        self.t
    }

    fn rows(&self, i: usize) -> usize {
        (self.n - i * self.nb).min(self.nb)
    }

    /// The process grid.
    fn grid(&self) -> Grid {
        self.layout.grid()
    }

    /// The rank of the diagonal tile `(k, k)`: where panel `k` is factored
    /// (P = 1), or its top member (P > 1), which keeps its pivots.
    fn panel_rank(&self, k: usize) -> usize {
        self.layout.owner(k, k)
    }

    /// Panel `k`'s members (P > 1): the process rows holding tiles of rows
    /// `k..T`, the diagonal tile's first, then on down the grid, cyclically.
    fn members(&self, k: usize) -> Vec<usize> {
        let p = self.grid().p;
        (0..p)
            .map(|d| (k + d) % p)
            .filter(|&r| (k..self.t).any(|i| i % p == r))
            .collect()
    }

    /// Whether this rank factors panel `k`, or a part of it (and so writes,
    /// and keeps, its pivots).
    fn factors(&self, k: usize) -> bool {
        self.factors_on(k, self.rank)
    }

    /// Whether `rank` factors panel `k`, or a part of it: it runs `PANEL(k)`
    /// (P = 1) or a `PANEL_PART(k, p)` (P > 1).
    fn factors_on(&self, k: usize, rank: usize) -> bool {
        let (pr, pc) = self.grid().coords(rank);
        if self.grid().p == 1 {
            self.panel_rank(k) == rank
        } else {
            self.layout.pcol(k) == pc && self.members(k).contains(&pr)
        }
    }

    /// Process row `p`'s tiles of rows `k..T` (of any column).
    fn part_rows(&self, k: usize, p: usize) -> Vec<usize> {
        (k..self.t).filter(|i| i % self.grid().p == p).collect()
    }

    /// Process rows holding tiles of rows `k+1..T` (those with a `SWAPOUT`).
    fn prows(&self, k: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (k + 1..self.t).map(|i| i % self.grid().p).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Tile columns `j > k` of process column `q`.
    fn cols_of(&self, k: usize, q: usize) -> usize {
        (k + 1..self.t)
            .filter(|&j| self.layout.pcol(j) == q)
            .count()
    }

    /// Tile rows `i > k` of process row `p`.
    fn rows_of(&self, k: usize, p: usize) -> usize {
        (k + 1..self.t).filter(|i| i % self.grid().p == p).count()
    }

    /// Panel `k`'s ring (P = 1): the process columns right of it, from the
    /// one after the panel's owner around.
    fn ring(&self, k: usize) -> Vec<usize> {
        let q = self.grid().q;
        let c = self.layout.pcol(k);
        (1..q)
            .map(|d| (c + d) % q)
            .filter(|&r| self.cols_of(k, r) > 0)
            .collect()
    }
}
