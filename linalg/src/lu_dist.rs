//! Tiled LU with partial pivoting across MPI ranks: one symbolic DAG on every
//! rank, tiles dealt 2-D block-cyclically over a P×Q process grid, remote
//! edges instead of HPL's hand-written broadcasts (the distributed layer,
//! `tessera_engine::dist::symbolic`).
//!
//! Rank `(p, q)` (number `p·Q + q`, HPL's row-major order) owns tile `(i, j)`
//! when `i mod P = p` and `j mod Q = q` (HPL's layout; a [`Layout`] may deal
//! the tile columns otherwise, e.g. in proportion to the ranks' speeds, see
//! `lu_layout`); it generates only the tiles it owns. The
//! tasks are the LU's (`PANEL`, `TRSM`, `GEMM` on the same codelets, no left
//! swaps: HPL's layout) placed on the owner of what they write, plus:
//!
//! - **1×Q grids** (column-cyclic, DPLASMA `zgetrf_1d`-like): the panel stays
//!   on the owner of its column (local pivot search and swaps); its pivots
//!   and `L` tiles travel along a ring of the ranks that own a column to its
//!   right (`BCAST(k, r)` on each, forwarding what it received), so the
//!   panel's owner sends it once, not Q−1 times. The swaps of column `j`,
//!   `SWAP(k, j)`, are local to column `j`'s owner.
//! - **P×Q grids, P > 1**: the pivot search gathers panel `k`'s column on the
//!   rank of its diagonal tile, which factors it with partial pivoting
//!   exactly as one process would (so pivots and factors stay bit-identical
//!   to the single-process run at every grid). We chose this over a
//!   per-column reduction of (|value|, row), which costs `nb` latency-bound
//!   exchanges per panel where this costs one gather and one scatter of the
//!   panel's tiles, and over tournament (CALU) pivoting, whose pivots — and so
//!   factors and residuals — differ from partial pivoting's. The cost is the
//!   panel's bytes crossing twice and a panel serialised on one rank, as it
//!   is on 1×Q grids anyway. Its `L` tiles then go to every rank of their
//!   process row (the panel broadcast along process rows), each rank's
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

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tessera_engine::dist::symbolic::DistClasses;
use tessera_engine::dist::DataRef;
use tessera_engine::symbolic::TaskClasses;
use tessera_engine::{DataHandle, Error, Read, ReadWrite, Registrar, Runtime, Task, TaskBuilder};
use tessera_tasks::codelets::lu::{RowsArgs, BCAST, SWAPIN, SWAPOUT, SWAPTOP};
use tessera_tasks::tile::{Tile, TilePool};

use crate::hpl::generate_tile;
use crate::lu::{column_priority, gemm_task, panel_priority, panel_task, swap_task, trsm_task};

pub use crate::lu_layout::{Grid, Layout};

/// One task of the distributed LU DAG (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DTask {
    /// `FEED(i)`: sends tile `(i, 0)` to panel 0's rank (P > 1).
    Feed(usize),
    /// `PANEL(k)`.
    Panel(usize),
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

/// A handle of the distributed LU's data.
#[derive(Clone)]
enum Slot {
    Tile(DataHandle<Tile>),
    Piv(DataHandle<Vec<usize>>),
    Rows(DataHandle<Vec<f64>>),
}

/// What a data key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Tile(usize, usize),
    Piv(usize),
    /// Rows sent up by process row `p` for `SWAPTOP(k, j)`.
    Up(usize, usize, usize),
    /// Top rows sent down by `SWAPTOP(k, j)`.
    Down(usize, usize),
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
        }
    }

    /// Tile rows (and columns).
    pub fn tiles(&self) -> usize {
        self.t
    }

    fn rows(&self, i: usize) -> usize {
        (self.n - i * self.nb).min(self.nb)
    }

    fn key(&self, k: Key) -> u64 {
        let t = self.t as u64;
        let p = self.grid().p as u64;
        let tt = t * t;
        match k {
            Key::Tile(i, j) => i as u64 + j as u64 * t,
            Key::Piv(k) => tt + k as u64,
            Key::Up(k, j, q) => tt + t + (k as u64 * t + j as u64) * p + q as u64,
            Key::Down(k, j) => tt + t + tt * p + k as u64 * t + j as u64,
        }
    }

    fn unkey(&self, key: u64) -> Key {
        let t = self.t as u64;
        let p = self.grid().p as u64;
        let tt = t * t;
        if key < tt {
            Key::Tile((key % t) as usize, (key / t) as usize)
        } else if key < tt + t {
            Key::Piv((key - tt) as usize)
        } else if key < tt + t + tt * p {
            let r = key - tt - t;
            let q = r % p;
            let kj = r / p;
            Key::Up((kj / t) as usize, (kj % t) as usize, q as usize)
        } else {
            let r = key - tt - t - tt * p;
            Key::Down((r / t) as usize, (r % t) as usize)
        }
    }

    /// The process grid.
    fn grid(&self) -> Grid {
        self.layout.grid()
    }

    /// The rank of the diagonal tile `(k, k)`: where panel `k` is factored.
    fn panel_rank(&self, k: usize) -> usize {
        self.layout.owner(k, k)
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

    /// This rank's handle for `key` (created with the right shape when it is
    /// a copy of another rank's data or a buffer).
    fn slot(&self, key: u64) -> Slot {
        let mut d = lock(&self.data);
        if let Some(s) = d.get(&key) {
            return s.clone();
        }
        let reg = &self.registrar;
        let virt = self.virtual_data;
        let rows_buf = |k: usize, j: usize, name: String| {
            let len = self.rows(k) * self.rows(j);
            if virt {
                reg.register_virtual::<Vec<f64>>((len * 8) as u64, [len, 0, 0, 0], name)
            } else {
                reg.register_replicable_named(vec![0.0f64; len], name)
            }
        };
        let made: Result<Slot, Error> = match self.unkey(key) {
            Key::Tile(i, j) if virt => {
                let (r, c) = (self.rows(i), self.rows(j));
                reg.register_virtual::<Tile>(
                    (r * c * 8) as u64,
                    [r, c, 0, 0],
                    format!("A({i},{j})"),
                )
                .map(Slot::Tile)
            }
            Key::Tile(i, j) => {
                let (r, c) = (self.rows(i), self.rows(j));
                // A copy is overwritten by what it receives before any read.
                let tile = if self.is_copy(i, j) {
                    self.copy_pool.tile(r, c)
                } else {
                    Tile::zeros(r, c)
                };
                reg.register_replicable_named(tile, format!("A({i},{j})"))
                    .map(Slot::Tile)
            }
            Key::Piv(k) => reg
                .register_replicable_named(vec![0usize; self.rows(k)], format!("piv({k})"))
                .map(Slot::Piv),
            Key::Up(k, j, p) => rows_buf(k, j, format!("up({k},{j},{p})")).map(Slot::Rows),
            Key::Down(k, j) => rows_buf(k, j, format!("down({k},{j})")).map(Slot::Rows),
        };
        let s = made.expect("the runtime outlives its LU");
        d.insert(key, s.clone());
        let uses = self.uses_of(self.unkey(key));
        if let Some(u) = uses {
            lock(&self.uses).insert(key, u);
        }
        s
    }

    fn tile(&self, i: usize, j: usize) -> DataHandle<Tile> {
        match self.slot(self.key(Key::Tile(i, j))) {
            Slot::Tile(h) => h,
            _ => unreachable!("a tile key holds a tile"),
        }
    }

    fn piv(&self, k: usize) -> DataHandle<Vec<usize>> {
        match self.slot(self.key(Key::Piv(k))) {
            Slot::Piv(h) => h,
            _ => unreachable!("a pivot key holds pivots"),
        }
    }

    fn buf(&self, k: Key) -> DataHandle<Vec<f64>> {
        match self.slot(self.key(k)) {
            Slot::Rows(h) => h,
            _ => unreachable!("a buffer key holds rows"),
        }
    }

    /// How many tasks of this rank read `k` when it is a copy of another
    /// rank's data or a buffer this rank only passes on (`None`: this rank
    /// keeps it: its own tile, or a panel it factored).
    fn uses_of(&self, k: Key) -> Option<usize> {
        let (pr, pc) = self.grid().coords(self.rank);
        let g = self.grid();
        match k {
            Key::Tile(i, j) if !self.is_copy(i, j) => None,
            Key::Tile(i, k) if i >= k => {
                // `L(i, k)` (or the diagonal tile): read by this rank's
                // GEMMs (or TRSMs) of step k, and forwarded by its BCAST.
                let bcast = usize::from(g.p == 1 && self.ring(k).contains(&pc));
                Some(self.cols_of(k, pc) + bcast)
            }
            // `U(k, j)`: read by this rank's GEMMs of step k.
            Key::Tile(k, _) => Some(self.rows_of(k, pr)),
            Key::Piv(k) if self.panel_rank(k) == self.rank => None,
            Key::Piv(k) => {
                let cols = self.cols_of(k, pc);
                Some(if g.p == 1 {
                    cols + usize::from(self.ring(k).contains(&pc))
                } else {
                    let rows = usize::from(self.prows(k).contains(&pr));
                    let top = usize::from(k % g.p == pr);
                    cols * (2 * rows + top)
                })
            }
            // Rows sent up: read by SWAPTOP; where made and sent away, the
            // send is their only use.
            Key::Up(..) => Some(1),
            Key::Down(k, j) => {
                let local_in = usize::from(self.prows(k).contains(&(k % g.p)));
                Some(if self.layout.owner(k, j) == self.rank {
                    // Made here: read by the local SWAPIN, if any, and sent
                    // to the others (counted as one use, at SWAPTOP's end).
                    local_in + usize::from(self.prows(k).iter().any(|&p| p != k % g.p))
                } else {
                    1
                })
            }
        }
    }

    /// One use of `key` is over; drop this rank's handle on it at zero.
    /// Lock order: `data` before `uses` (as in `slot`), so `uses` is
    /// released before `data` is taken here.
    fn used(&self, k: Key) {
        let key = self.key(k);
        let last = {
            let mut u = lock(&self.uses);
            match u.get_mut(&key) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n == 0 && u.remove(&key).is_some()
                }
                None => false,
            }
        };
        if last {
            lock(&self.data).remove(&key);
        }
    }

    /// Tile rows `i` of column 0 whose owner is not panel 0's rank: they are
    /// fed to it before the first panel (P > 1).
    fn feeds(&self) -> Vec<usize> {
        (0..self.t)
            .filter(|&i| self.layout.owner(i, 0) != self.panel_rank(0))
            .collect()
    }

    /// The one-process LU's priorities; the panel's sends rank just below it.
    fn priority(&self, task: DTask) -> i32 {
        let t = self.t;
        match task {
            DTask::Feed(_) => panel_priority(t, 0) + 1,
            DTask::Panel(k) => panel_priority(t, k),
            DTask::Bcast(k, _) => panel_priority(t, k) - 1,
            DTask::Swap(_, j)
            | DTask::SwapOut(_, j, _)
            | DTask::SwapTop(_, j)
            | DTask::SwapIn(_, j, _)
            | DTask::Trsm(_, j)
            | DTask::Gemm(_, _, j) => column_priority(t, j),
        }
    }

    fn rows_args(&self, k: usize, j: usize, p: usize) -> RowsArgs {
        RowsArgs {
            k,
            j,
            p,
            grid_p: self.grid().p,
            nb: self.nb,
            w: self.rows(k),
            cols: self.rows(j),
            m: self.n - k * self.nb,
            prows: self.prows(k).iter().fold(0u64, |m, &p| m | (1 << p)),
        }
    }

    /// Tiles `(i, j)`, `i > k`, `i mod P = p`, top to bottom.
    fn below(&self, k: usize, j: usize, p: usize) -> Vec<DataHandle<Tile>> {
        (k + 1..self.t)
            .filter(|i| i % self.grid().p == p)
            .map(|i| self.tile(i, j))
            .collect()
    }

    /// The data keys a task reads that may be copies (for `used`).
    fn reads(&self, task: &DTask) -> Vec<Key> {
        match *task {
            DTask::Feed(_) | DTask::Panel(_) => Vec::new(),
            DTask::Bcast(k, _) => std::iter::once(Key::Piv(k))
                .chain((k..self.t).map(|i| Key::Tile(i, k)))
                .collect(),
            DTask::Swap(k, _) | DTask::SwapOut(k, _, _) => vec![Key::Piv(k)],
            DTask::SwapTop(k, j) => std::iter::once(Key::Piv(k))
                .chain(self.prows(k).into_iter().map(|p| Key::Up(k, j, p)))
                .collect(),
            DTask::SwapIn(k, j, _) => vec![Key::Piv(k), Key::Down(k, j)],
            DTask::Trsm(k, _) => vec![Key::Tile(k, k)],
            DTask::Gemm(k, i, j) => vec![Key::Tile(i, k), Key::Tile(k, j)],
        }
    }

    /// Where this rank's factors are: the `L` part and diagonal of column `k`
    /// on panel `k`'s rank, the rest on the tiles' owners.
    pub fn holder(&self, i: usize, j: usize) -> usize {
        if i >= j {
            self.panel_rank(j)
        } else {
            self.layout.owner(i, j)
        }
    }

    /// After the run: the factor tiles this rank holds and the pivots of the
    /// panels it factored, unregistered from `rt`.
    pub fn take_factors(&self, rt: &Runtime) -> Result<HeldFactors, Error> {
        let mut tiles = Vec::new();
        let mut pivs = Vec::new();
        let slots: Vec<(u64, Slot)> = lock(&self.data).drain().collect();
        lock(&self.uses).clear();
        for (key, s) in slots {
            match (self.unkey(key), s) {
                (Key::Tile(i, j), Slot::Tile(h)) if self.holder(i, j) == self.rank => {
                    tiles.push((i, j, rt.unregister(h)?))
                }
                (Key::Piv(k), Slot::Piv(h)) if self.panel_rank(k) == self.rank => {
                    pivs.push((k, rt.unregister(h)?))
                }
                _ => {}
            }
        }
        tiles.sort_by_key(|&(i, j, _)| (j, i));
        pivs.sort_by_key(|&(k, _)| k);
        Ok(HeldFactors {
            tiles,
            pivots: pivs,
        })
    }

    /// How many of other ranks' tiles rank `rank` copies over the LU of an
    /// `n`-order matrix in tiles of `nb` dealt by `layout` (the panels' `L`
    /// tiles it updates with; for P > 1 also the `U` tiles of its process
    /// column). All of them may be held at once: a copy is dropped after
    /// this rank's last read of it, and the column-first priorities leave
    /// the updates of a rank's rightmost column, which read every earlier
    /// panel, for the end. The per-rank memory check counts them all.
    pub fn tile_copies(n: usize, nb: usize, layout: Layout, rank: usize) -> usize {
        DistLu::empty(n, nb, 0, layout, rank, Registrar::detached(), true)
            .copied_tiles()
            .len()
    }

    /// The tiles `(i, j)` this rank's tasks read a copy of.
    fn copied_tiles(&self) -> Vec<(usize, usize)> {
        let t = self.t;
        (0..t)
            .flat_map(|j| (0..t).map(move |i| (i, j)))
            .filter(|&(i, j)| self.reads_copy(i, j))
            .collect()
    }

    /// Whether this rank's handle for tile `(i, j)` would be a copy: another
    /// rank's tile, and not one of panel `j`'s tiles, which (P > 1) are
    /// gathered on the panel's rank and kept there as factor storage.
    fn is_copy(&self, i: usize, j: usize) -> bool {
        self.layout.owner(i, j) != self.rank && !(i >= j && self.panel_rank(j) == self.rank)
    }

    /// Whether this rank's tasks read a copy of tile `(i, j)`.
    fn reads_copy(&self, i: usize, j: usize) -> bool {
        let g = self.grid();
        let (pr, pc) = g.coords(self.rank);
        if !self.is_copy(i, j) {
            return false;
        }
        if i >= j {
            // Panel j's L (or diagonal) tile.
            let has = self.cols_of(j, pc) > 0;
            if g.p == 1 {
                return has;
            }
            has && i % g.p == pr
        } else {
            // U(i, j), read by this rank's GEMMs below it (P > 1 only).
            g.p > 1 && self.layout.pcol(j) == pc && self.rows_of(i, pr) > 0
        }
    }

    /// Copies of other ranks' tiles this rank has made and not dropped (a
    /// check of [`tile_copies`](Self::tile_copies)).
    pub fn tile_copies_held(&self) -> usize {
        lock(&self.data)
            .keys()
            .filter(|&&key| matches!(self.unkey(key), Key::Tile(i, j) if self.is_copy(i, j)))
            .count()
    }

    /// Bytes this rank is predicted to send over the whole factorisation
    /// (the remote edges' data, one message per destination), from the DAG's
    /// shape alone: the communication model the driver prints beside the
    /// measured counter.
    pub fn predicted_bytes_sent(&self) -> u64 {
        let (t, g, me) = (self.t, self.grid(), self.rank);
        let tile = |i: usize, j: usize| (self.rows(i) * self.rows(j) * 8) as u64;
        let piv = |k: usize| (self.rows(k) * 8) as u64;
        let mut bytes = 0u64;
        for k in 0..t {
            if g.p == 1 {
                // The ring: each hop carries the pivots and the tile column.
                let panel: u64 = piv(k) + (k..t).map(|i| tile(i, k)).sum::<u64>();
                let ring = self.ring(k);
                let hops = std::iter::once(self.layout.pcol(k)).chain(ring.iter().copied());
                let senders: Vec<usize> = hops.take(ring.len()).collect();
                bytes += panel * senders.iter().filter(|&&r| r == me).count() as u64;
                continue;
            }
            // Panel gather: tiles of column k from the other process rows
            // (from the GEMMs of step k − 1, or the feeds of step 0).
            for i in k..t {
                if self.layout.owner(i, k) == me && me != self.panel_rank(k) {
                    bytes += tile(i, k);
                }
            }
            // Panel scatter: pivots and L tiles to every rank with a task of step k.
            if self.panel_rank(k) == me {
                for r in 0..g.ranks() {
                    let (pr, pc) = g.coords(r);
                    let has =
                        self.cols_of(k, pc) > 0 && (self.prows(k).contains(&pr) || k % g.p == pr);
                    if r != me && has {
                        bytes += piv(k)
                            + (k..t)
                                .filter(|i| i % g.p == pr)
                                .map(|i| tile(i, k))
                                .sum::<u64>();
                    }
                }
            }
            for j in k + 1..t {
                let top = self.layout.owner(k, j);
                for p in self.prows(k) {
                    let r = g.rank(p, self.layout.pcol(j));
                    if r == top {
                        continue;
                    }
                    let buf = (self.rows(k) * self.rows(j) * 8) as u64;
                    if r == me {
                        bytes += buf; // rows sent up
                    }
                    if top == me {
                        bytes += buf; // top rows sent down
                    }
                }
                // U(k, j) down the process column.
                if top == me {
                    let others = self.prows(k).into_iter().filter(|&p| p != k % g.p).count() as u64;
                    bytes += tile(k, j) * others;
                }
            }
        }
        bytes
    }
}

/// `FEED(i)`: a tile of column 0 leaves for panel 0's rank (the task does
/// nothing; the distributed layer sends what it read when it finishes).
static FEED: std::sync::LazyLock<tessera_engine::Codelet<Vec<Read<Tile>>, usize>> =
    std::sync::LazyLock::new(|| {
        tessera_engine::Codelet::<Vec<Read<Tile>>, usize>::with_args("feed")
            .label(|i| format!("feed({i})"))
            .cpu(|_, _, _| Ok(()))
    });

/// The factors a rank holds after the run (see [`DistLu::take_factors`]).
pub struct HeldFactors {
    /// `(i, j, tile)`: the `L` part and diagonal of column `j` on panel `j`'s
    /// rank, the `U` tiles on their owners.
    pub tiles: Vec<(usize, usize, Tile)>,
    /// `(k, local pivots)` of the panels this rank factored.
    pub pivots: Vec<(usize, Vec<usize>)>,
}

fn encode_usizes(v: &[(usize, Vec<usize>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, p) in v {
        out.extend_from_slice(&(*k as u64).to_le_bytes());
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        for &x in p {
            out.extend_from_slice(&(x as u64).to_le_bytes());
        }
    }
    out
}

fn decode_usizes(b: &[u8]) -> Result<Vec<(usize, Vec<usize>)>, String> {
    let words: Vec<u64> = b
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let (k, n) = (
            words[at] as usize,
            words.get(at + 1).copied().unwrap_or(0) as usize,
        );
        let end = at + 2 + n;
        let p = words.get(at + 2..end).ok_or("truncated pivot list")?;
        out.push((k, p.iter().map(|&x| x as usize).collect()));
        at = end;
    }
    Ok(out)
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

impl DistLu {
    /// [`solve`](Self::solve), then [`residual`](Self::residual): `x` and
    /// HPL's scaled residual, the same on every rank.
    pub fn solve_and_check(
        &self,
        held: &HeldFactors,
        coll: &tessera_engine::dist::Collectives,
    ) -> Result<(Vec<f64>, f64), String> {
        let x = self.solve(held, coll)?;
        let resid = self.residual(&x, coll)?;
        Ok((x, resid))
    }

    /// Solve `A·x = b` (HPL's right-hand side of the same seed) from the
    /// factors every rank holds. Every rank returns the same `x`.
    ///
    /// The right-hand side and `x` (length N) are kept on every rank; the
    /// updates each rank makes with its tiles are summed by an all-reduce of
    /// one block per step, and the block solved by the rank holding the
    /// diagonal tile goes to all: 4 collectives per tile row in all.
    pub fn solve(
        &self,
        held: &HeldFactors,
        coll: &tessera_engine::dist::Collectives,
    ) -> Result<Vec<f64>, String> {
        use faer::linalg::matmul::matmul;
        use faer::linalg::triangular_solve::{
            solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
        };
        use faer::{Accum, Par};

        use crate::hpl::{col_mut, col_ref as col};
        let (n, nb, t) = (self.n, self.nb, self.t);
        let block = |k: usize| k * nb..(k * nb + nb).min(n);
        // Every panel's pivots on every rank.
        let mut pivots: Vec<Vec<usize>> = vec![Vec::new(); t];
        for part in coll.allgather(&encode_usizes(&held.pivots))? {
            for (k, p) in decode_usizes(&part)? {
                pivots[k] = p;
            }
        }
        let tile = |i: usize, j: usize| -> Option<&Tile> {
            held.tiles
                .iter()
                .find(|(a, b, _)| *a == i && *b == j)
                .map(|(_, _, t)| t)
        };
        let b = crate::hpl::generate_rhs(n, self.seed);
        let mut x = b.clone();
        let mut delta = vec![0.0; n];
        // The pending updates of block k from every rank, then the block
        // solved by `holder`, on every rank.
        let settle = |x: &mut [f64],
                      delta: &mut [f64],
                      k: usize,
                      solve: &dyn Fn(&mut [f64])|
         -> Result<(), String> {
            let r = block(k);
            let mut d = delta[r.clone()].to_vec();
            coll.allreduce_sum(&mut d)?;
            for (xi, di) in x[r.clone()].iter_mut().zip(&d) {
                *xi += di;
            }
            delta[r.clone()].iter_mut().for_each(|v| *v = 0.0);
            let mine = if self.holder(k, k) == self.rank {
                solve(&mut x[r.clone()]);
                f64s(&x[r.clone()])
            } else {
                Vec::new()
            };
            let all = coll.allgather(&mine)?;
            x[r].copy_from_slice(&from_f64s(&all[self.holder(k, k)]));
            Ok(())
        };
        // Forward: panel k's interchanges, then L.
        for k in 0..t {
            for (i, &p) in pivots[k].iter().enumerate() {
                x.swap(k * nb + i, k * nb + p);
                delta.swap(k * nb + i, k * nb + p);
            }
            let diag = tile(k, k);
            settle(&mut x, &mut delta, k, &|v: &mut [f64]| {
                if let Some(l) = diag {
                    solve_unit_lower_triangular_in_place(l.as_ref(), col_mut(v), Par::Seq);
                }
            })?;
            let xk = x[block(k)].to_vec();
            for i in k + 1..t {
                if let (Some(l), true) = (tile(i, k), self.holder(i, k) == self.rank) {
                    matmul(
                        col_mut(&mut delta[block(i)]),
                        Accum::Add,
                        l.as_ref(),
                        col(&xk),
                        -1.0,
                        Par::Seq,
                    );
                }
            }
        }
        // Backward: U.
        for j in (0..t).rev() {
            let diag = tile(j, j);
            settle(&mut x, &mut delta, j, &|v: &mut [f64]| {
                if let Some(u) = diag {
                    solve_upper_triangular_in_place(u.as_ref(), col_mut(v), Par::Seq);
                }
            })?;
            let xj = x[block(j)].to_vec();
            for i in 0..j {
                if let (Some(u), true) = (tile(i, j), self.holder(i, j) == self.rank) {
                    matmul(
                        col_mut(&mut delta[block(i)]),
                        Accum::Add,
                        u.as_ref(),
                        col(&xj),
                        -1.0,
                        Par::Seq,
                    );
                }
            }
        }
        Ok(x)
    }

    /// HPL's scaled residual of `x` (the same on every rank), computed with
    /// distributed norms: each rank regenerates only the tiles it owns and
    /// its products are summed by all-reduces. Not part of HPL's timed
    /// region (HPL times the factorisation and the solve only).
    pub fn residual(
        &self,
        x: &[f64],
        coll: &tessera_engine::dist::Collectives,
    ) -> Result<f64, String> {
        use faer::linalg::matmul::matmul;
        use faer::{Accum, Par};

        use crate::hpl::{col_mut, col_ref as col};
        let (n, nb, t) = (self.n, self.nb, self.t);
        let block = |k: usize| k * nb..(k * nb + nb).min(n);
        let b = crate::hpl::generate_rhs(n, self.seed);
        // A·x and |A|'s row sums from the tiles each rank owns.
        let mut r = vec![0.0; n];
        let mut row_sums = vec![0.0; n];
        for j in 0..t {
            for i in 0..t {
                if self.layout.owner(i, j) != self.rank {
                    continue;
                }
                let a = generate_tile(n, nb, self.seed, i, j);
                matmul(
                    col_mut(&mut r[block(i)]),
                    Accum::Add,
                    a.as_ref(),
                    col(&x[block(j)]),
                    1.0,
                    Par::Seq,
                );
                for c in 0..a.cols() {
                    for (s, v) in row_sums[block(i)].iter_mut().zip(a.col(c)) {
                        *s += v.abs();
                    }
                }
            }
        }
        coll.allreduce_sum(&mut r)?;
        coll.allreduce_sum(&mut row_sums)?;
        for (ri, bi) in r.iter_mut().zip(&b) {
            *ri -= bi;
        }
        if n == 0 {
            return Ok(0.0);
        }
        let inf = |v: &[f64]| v.iter().fold(0.0_f64, |m, e| m.max(e.abs()));
        let norm_a = row_sums.iter().fold(0.0_f64, |m, &s| m.max(s));
        Ok(inf(&r) / (crate::hpl::HPL_EPS * (norm_a * inf(x) + inf(&b)) * n as f64))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TaskClasses for DistLu {
    type Key = DTask;

    fn roots(&self) -> Vec<DTask> {
        match self.feeds() {
            f if f.is_empty() => vec![DTask::Panel(0)],
            f => f.into_iter().map(DTask::Feed).collect(),
        }
    }

    fn predecessor_count(&self, key: &DTask) -> usize {
        let t = self.t;
        let after = |k: usize, n: usize| if k > 0 { n } else { 0 };
        match *key {
            DTask::Feed(_) => 0,
            DTask::Panel(0) => self.feeds().len(),
            DTask::Panel(k) => t - k,
            DTask::Bcast(..) => 1,
            DTask::Swap(k, _) => 1 + after(k, t - k),
            DTask::SwapOut(k, _, p) => 1 + after(k, self.rows_of(k, p)),
            DTask::SwapTop(k, _) => 1 + after(k, 1) + self.prows(k).len(),
            DTask::SwapIn(..) | DTask::Trsm(..) => 1,
            DTask::Gemm(..) => {
                if self.grid().p == 1 {
                    1
                } else {
                    2
                }
            }
        }
    }

    fn successors(&self, key: &DTask, out: &mut Vec<DTask>) {
        let (t, g) = (self.t, self.grid());
        match *key {
            DTask::Feed(_) => out.push(DTask::Panel(0)),
            DTask::Panel(k) if g.p == 1 => {
                let c = self.layout.pcol(k);
                out.extend(
                    (k + 1..t)
                        .filter(|&j| self.layout.pcol(j) == c)
                        .map(|j| DTask::Swap(k, j)),
                );
                if let Some(&r) = self.ring(k).first() {
                    out.push(DTask::Bcast(k, r));
                }
            }
            DTask::Panel(k) => {
                for j in k + 1..t {
                    out.extend(self.prows(k).into_iter().map(|p| DTask::SwapOut(k, j, p)));
                    out.push(DTask::SwapTop(k, j));
                }
            }
            DTask::Bcast(k, r) => {
                out.extend(
                    (k + 1..t)
                        .filter(|&j| self.layout.pcol(j) == r)
                        .map(|j| DTask::Swap(k, j)),
                );
                let ring = self.ring(k);
                let at = ring.iter().position(|&x| x == r).expect("r is on the ring");
                if let Some(&next) = ring.get(at + 1) {
                    out.push(DTask::Bcast(k, next));
                }
            }
            DTask::Swap(k, j) => out.push(DTask::Trsm(k, j)),
            DTask::SwapOut(k, j, _) => out.push(DTask::SwapTop(k, j)),
            DTask::SwapTop(k, j) => {
                out.extend(self.prows(k).into_iter().map(|p| DTask::SwapIn(k, j, p)));
                out.push(DTask::Trsm(k, j));
            }
            DTask::SwapIn(k, j, p) => out.extend(
                (k + 1..t)
                    .filter(|i| i % g.p == p)
                    .map(|i| DTask::Gemm(k, i, j)),
            ),
            DTask::Trsm(k, j) => out.extend((k + 1..t).map(|i| DTask::Gemm(k, i, j))),
            DTask::Gemm(k, i, j) => out.push(if j == k + 1 {
                DTask::Panel(k + 1)
            } else if g.p == 1 {
                DTask::Swap(k + 1, j)
            } else if i == k + 1 {
                DTask::SwapTop(k + 1, j)
            } else {
                DTask::SwapOut(k + 1, j, i % g.p)
            }),
        }
    }

    fn task(&self, key: &DTask) -> TaskBuilder {
        let prio = self.priority(*key);
        let t = self.t;
        let column = |k: usize, j: usize| -> Vec<ReadWrite<Tile>> {
            (k..t).map(|i| self.tile(i, j).rw()).collect()
        };
        match *key {
            DTask::Feed(i) => Task::new(&FEED, vec![self.tile(i, 0).r()])
                .args(i)
                .priority(prio)
                .into(),
            DTask::Panel(k) => panel_task(&self.piv(k), column(k, k), k, self.n, self.nb, prio),
            DTask::Bcast(k, _) => {
                let tiles: Vec<Read<Tile>> = (k..t).map(|i| self.tile(i, k).r()).collect();
                Task::new(&BCAST, (self.piv(k).r(), tiles))
                    .args(k)
                    .priority(prio)
                    .into()
            }
            DTask::Swap(k, j) => swap_task(&self.piv(k), column(k, j), k, j, self.n, self.nb, prio),
            DTask::SwapOut(k, j, p) => {
                let tiles: Vec<Read<Tile>> = self.below(k, j, p).iter().map(|h| h.r()).collect();
                Task::new(
                    &SWAPOUT,
                    (self.piv(k).r(), tiles, self.buf(Key::Up(k, j, p)).w()),
                )
                .args(self.rows_args(k, j, p))
                .priority(prio)
                .into()
            }
            DTask::SwapTop(k, j) => {
                let ups: Vec<Read<Vec<f64>>> = self
                    .prows(k)
                    .into_iter()
                    .map(|p| self.buf(Key::Up(k, j, p)).r())
                    .collect();
                Task::new(
                    &SWAPTOP,
                    (
                        self.piv(k).r(),
                        self.tile(k, j).rw(),
                        ups,
                        self.buf(Key::Down(k, j)).w(),
                    ),
                )
                .args(self.rows_args(k, j, k % self.grid().p))
                .priority(prio)
                .into()
            }
            DTask::SwapIn(k, j, p) => {
                let tiles: Vec<ReadWrite<Tile>> =
                    self.below(k, j, p).iter().map(|h| h.rw()).collect();
                Task::new(
                    &SWAPIN,
                    (self.piv(k).r(), self.buf(Key::Down(k, j)).r(), tiles),
                )
                .args(self.rows_args(k, j, p))
                .priority(prio)
                .into()
            }
            DTask::Trsm(k, j) => trsm_task(
                &self.tile(k, k),
                &self.tile(k, j),
                k,
                j,
                self.n,
                self.nb,
                prio,
            ),
            DTask::Gemm(k, i, j) => gemm_task(
                [&self.tile(i, k), &self.tile(k, j), &self.tile(i, j)],
                (k, i, j),
                self.n,
                self.nb,
                prio,
            ),
        }
    }

    fn owner(&self, key: &DTask) -> usize {
        let g = self.grid();
        match *key {
            DTask::Feed(i) => self.layout.owner(i, 0),
            DTask::Panel(k) => self.panel_rank(k),
            DTask::Bcast(_, r) => r,
            DTask::Swap(k, j) | DTask::SwapTop(k, j) | DTask::Trsm(k, j) => self.layout.owner(k, j),
            DTask::SwapOut(_, j, p) | DTask::SwapIn(_, j, p) => g.rank(p, self.layout.pcol(j)),
            DTask::Gemm(_, i, j) => self.layout.owner(i, j),
        }
    }
}

impl DistClasses for DistLu {
    fn flows(&self, from: &DTask, to: &DTask, out: &mut Vec<u64>) {
        let g = self.grid();
        match (*from, *to) {
            (DTask::Panel(k) | DTask::Bcast(k, _), _) if g.p == 1 => {
                out.push(self.key(Key::Piv(k)));
                out.extend((k..self.t).map(|i| self.key(Key::Tile(i, k))));
            }
            (DTask::Panel(k), to) => {
                let (pr, _) = g.coords(self.owner(&to));
                out.push(self.key(Key::Piv(k)));
                out.extend(
                    (k..self.t)
                        .filter(|i| i % g.p == pr)
                        .map(|i| self.key(Key::Tile(i, k))),
                );
            }
            (DTask::Gemm(_, i, j), DTask::Panel(_)) => out.push(self.key(Key::Tile(i, j))),
            (DTask::Feed(i), _) => out.push(self.key(Key::Tile(i, 0))),
            (DTask::SwapOut(k, j, p), _) => out.push(self.key(Key::Up(k, j, p))),
            (DTask::SwapTop(k, j), _) => out.push(self.key(Key::Down(k, j))),
            (DTask::Trsm(k, j), _) => out.push(self.key(Key::Tile(k, j))),
            (from, to) => unreachable!("no data flows from {from:?} to {to:?} across ranks"),
        }
    }

    fn data(&self, key: u64) -> DataRef {
        match self.slot(key) {
            Slot::Tile(h) => DataRef::of(&h),
            Slot::Piv(h) => DataRef::of(&h),
            Slot::Rows(h) => DataRef::of(&h),
        }
    }

    fn owned(&self, rank: usize) -> usize {
        let (t, g) = (self.t, self.grid());
        let (pr, pc) = g.coords(rank);
        let mut n = self
            .feeds()
            .into_iter()
            .filter(|&i| self.layout.owner(i, 0) == rank)
            .count();
        for k in 0..t {
            n += usize::from(self.panel_rank(k) == rank);
            let cols = self.cols_of(k, pc);
            if g.p == 1 {
                n += usize::from(self.ring(k).contains(&pc));
                // SWAP, TRSM, and a GEMM per row below, per column of mine.
                n += cols * (2 + (t - k - 1));
            } else {
                let rows = self.rows_of(k, pr);
                let top = usize::from(k % g.p == pr);
                // SWAPOUT + SWAPIN if I hold rows below, SWAPTOP + TRSM if I
                // hold the top tile, and my GEMMs.
                n += cols * (2 * usize::from(self.prows(k).contains(&pr)) + 2 * top + rows);
            }
        }
        n
    }

    fn finished(&self, key: &DTask) {
        for k in self.reads(key) {
            self.used(k);
        }
        // What a task made only to send away is done once sent.
        match *key {
            DTask::SwapOut(k, j, p) if self.layout.owner(k, j) != self.rank => {
                self.used(Key::Up(k, j, p))
            }
            DTask::SwapTop(k, j) if self.prows(k).iter().any(|&p| p != k % self.grid().p) => {
                self.used(Key::Down(k, j))
            }
            _ => {}
        }
    }
}
