//! Where one rank keeps the distributed LU's data: a handle per data key (its
//! own tiles, copies of other ranks' tiles, pivots, row buffers), made on
//! first use and dropped after this rank's last read of a copy.

use tessera_engine::util::lock;
use tessera_engine::{DataHandle, Error, Registrar};
use tessera_tasks::tile::Tile;

use super::{DistLu, Layout};

/// A handle of the distributed LU's data.
#[derive(Clone)]
pub(super) enum Slot {
    Tile(DataHandle<Tile>),
    Piv(DataHandle<Vec<usize>>),
    Rows(DataHandle<Vec<f64>>),
}

/// What a data key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    Tile(usize, usize),
    Piv(usize),
    /// Rows sent up by process row `p` for `SWAPTOP(k, j)`.
    Up(usize, usize, usize),
    /// Top rows sent down by `SWAPTOP(k, j)`.
    Down(usize, usize),
}

impl DistLu {
    /// The distributed layer's number for `k`, the same on every rank: the
    /// tiles (column-major), then the pivots, the buffers of rows sent up,
    /// and those sent down ([`unkey`](Self::unkey) inverts it).
    pub(super) fn key(&self, k: Key) -> u64 {
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

    /// The data key numbered `key` (see [`key`](Self::key)).
    pub(super) fn unkey(&self, key: u64) -> Key {
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

    /// This rank's handle for `key` (created with the right shape when it is
    /// a copy of another rank's data or a buffer).
    pub(super) fn slot(&self, key: u64) -> Slot {
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

    pub(super) fn tile(&self, i: usize, j: usize) -> DataHandle<Tile> {
        match self.slot(self.key(Key::Tile(i, j))) {
            Slot::Tile(h) => h,
            _ => unreachable!("a tile key holds a tile"),
        }
    }

    pub(super) fn piv(&self, k: usize) -> DataHandle<Vec<usize>> {
        match self.slot(self.key(Key::Piv(k))) {
            Slot::Piv(h) => h,
            _ => unreachable!("a pivot key holds pivots"),
        }
    }

    pub(super) fn buf(&self, k: Key) -> DataHandle<Vec<f64>> {
        match self.slot(self.key(k)) {
            Slot::Rows(h) => h,
            _ => unreachable!("a buffer key holds rows"),
        }
    }

    /// How many tasks of this rank read `k` when it is a copy of another
    /// rank's data or a buffer this rank only passes on (`None`: this rank
    /// keeps it: its own tile, or a panel it factored).
    pub(super) fn uses_of(&self, k: Key) -> Option<usize> {
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
            Key::Piv(k) if self.factors(k) => None,
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
    pub(super) fn used(&self, k: Key) {
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
    pub(super) fn copied_tiles(&self) -> Vec<(usize, usize)> {
        let t = self.t;
        (0..t)
            .flat_map(|j| (0..t).map(move |i| (i, j)))
            .filter(|&(i, j)| self.reads_copy(i, j))
            .collect()
    }

    /// Whether this rank's handle for tile `(i, j)` would be a copy: another
    /// rank's tile (every rank factors its own tiles of each panel).
    pub(super) fn is_copy(&self, i: usize, j: usize) -> bool {
        self.layout.owner(i, j) != self.rank
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
}

#[cfg(test)]
mod tests {
    //! Proves that data keys are numbered one to one, that the copies a rank
    //! makes are the other ranks' tiles it reads and not the panels it keeps
    //! (hand-counted on 2-tile grids), and that a copy's use count is the
    //! number of this rank's tasks that read it in the unrolled DAG.

    use std::collections::HashMap;

    use tessera_engine::symbolic::{unroll, TaskClasses};

    use super::*;
    use crate::lu::dist::Grid;

    /// Rank `rank`'s part of an `n`-order LU in tiles of `nb` dealt
    /// cyclically on a `p × q` grid, with no data (nothing is registered).
    fn part(n: usize, nb: usize, (p, q): (usize, usize), rank: usize) -> DistLu {
        let layout = Layout::cyclic(Grid { p, q }, n.div_ceil(nb));
        DistLu::empty(n, nb, 0, layout, rank, Registrar::detached(), true)
    }

    /// Every key of `lu`'s numbering, in key order.
    fn all_keys(lu: &DistLu) -> Vec<Key> {
        let (t, p) = (lu.t, lu.grid().p);
        let mut keys: Vec<Key> = (0..t)
            .flat_map(|j| (0..t).map(move |i| Key::Tile(i, j)))
            .collect();
        keys.extend((0..t).map(Key::Piv));
        for k in 0..t {
            for j in 0..t {
                keys.extend((0..p).map(|q| Key::Up(k, j, q)));
            }
        }
        for k in 0..t {
            keys.extend((0..t).map(|j| Key::Down(k, j)));
        }
        keys
    }

    #[test]
    fn keys_are_numbered_one_to_one() {
        for (n, nb, grid) in [
            (4, 2, (1, 2)),
            (5, 2, (2, 1)),
            (7, 2, (2, 2)),
            (9, 2, (3, 2)),
        ] {
            let lu = part(n, nb, grid, 0);
            for (at, k) in all_keys(&lu).into_iter().enumerate() {
                // The numbering is dense: key order is the order listed.
                assert_eq!(lu.key(k), at as u64, "n={n} nb={nb} {grid:?}: {k:?}");
                assert_eq!(lu.unkey(at as u64), k, "n={n} nb={nb} {grid:?}");
            }
        }
    }

    #[test]
    fn copies_on_a_one_by_two_grid() {
        // Tile column j on rank j. Rank 1 copies panel 0's two tiles for its
        // TRSM and GEMM; rank 0 updates nothing right of panel 1, so it copies
        // nothing, though rank 1's tiles are not its own.
        let (n, nb) = (4, 2);
        let r0 = part(n, nb, (1, 2), 0);
        let r1 = part(n, nb, (1, 2), 1);
        assert!(r0.is_copy(0, 1) && r0.is_copy(1, 1));
        assert!(!r0.is_copy(0, 0) && !r0.is_copy(1, 0));
        assert_eq!(r0.copied_tiles(), vec![]);
        assert_eq!(r1.copied_tiles(), vec![(0, 0), (1, 0)]);
        let layout = Layout::cyclic(Grid { p: 1, q: 2 }, 2);
        assert_eq!(DistLu::tile_copies(n, nb, layout.clone(), 0), 0);
        assert_eq!(DistLu::tile_copies(n, nb, layout, 1), 2);
    }

    #[test]
    fn copies_on_a_two_by_one_grid() {
        // Tile row i on rank i. Panel 0 is factored by both ranks, each on
        // its own tile: rank 0 reads no copy of tile (1, 0). Rank 1 copies
        // U(0, 1) for its GEMM, and not panel 0's diagonal tile: its GEMM
        // reads L(1, 0), its own tile.
        let (n, nb) = (4, 2);
        let r0 = part(n, nb, (2, 1), 0);
        let r1 = part(n, nb, (2, 1), 1);
        assert!(r0.is_copy(1, 0) && r0.is_copy(1, 1));
        assert_eq!(r0.copied_tiles(), vec![]);
        assert!(r1.is_copy(0, 0) && r1.is_copy(0, 1));
        assert_eq!(r1.copied_tiles(), vec![(0, 1)]);
    }

    #[test]
    fn use_counts_are_the_reads_of_this_ranks_tasks() {
        for (n, nb, grid) in [
            (6, 2, (1, 3)),
            (7, 2, (2, 2)),
            (9, 2, (3, 2)),
            (8, 2, (2, 3)),
        ] {
            let ranks = grid.0 * grid.1;
            for rank in 0..ranks {
                let lu = part(n, nb, grid, rank);
                let mut reads: HashMap<u64, usize> = HashMap::new();
                for (task, _) in unroll(&lu).unwrap() {
                    if lu.owner(&task) == rank {
                        for k in lu.reads(&task) {
                            *reads.entry(lu.key(k)).or_default() += 1;
                        }
                    }
                }
                for (&key, &count) in &reads {
                    let k = lu.unkey(key);
                    // Buffers also count their send (see `finished`).
                    if matches!(k, Key::Tile(..) | Key::Piv(_)) {
                        if let Some(uses) = lu.uses_of(k) {
                            assert_eq!(uses, count, "n={n} {grid:?} rank {rank}: {k:?}");
                        }
                    }
                }
            }
        }
    }
}
