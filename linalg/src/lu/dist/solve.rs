//! The distributed LU's factors after the run (which rank holds which) and
//! the triangular solve from them across the ranks.

use tessera_engine::util::lock;
use tessera_engine::{DataHandle, Error, Runtime};
use tessera_tasks::tile::Tile;

use super::codec::{decode_usizes, encode_usizes, f64s, from_f64s};
use super::storage::{Key, Slot};
use super::DistLu;

/// The factors a rank holds after the run (see [`DistLu::take_factors`]).
pub struct HeldFactors {
    /// `(i, j, tile)`: the factor tiles this rank owns.
    pub tiles: Vec<(usize, usize, Tile)>,
    /// `(k, local pivots)` of the panels whose diagonal tile this rank owns.
    pub pivots: Vec<(usize, Vec<usize>)>,
}

/// A factor tile this rank holds: its position and handle.
type HeldTile = (usize, usize, DataHandle<Tile>);
/// The pivots of a panel this rank factored: the panel and the handle.
type HeldPivots = (usize, DataHandle<Vec<usize>>);

impl DistLu {
    /// Where factor tile `(i, j)` is after the run: on its owner (every
    /// rank factors its own tiles of each panel).
    pub fn holder(&self, i: usize, j: usize) -> usize {
        self.layout.owner(i, j)
    }

    /// After the run: the factor tiles this rank holds and the pivots of the
    /// panels whose diagonal tile it owns, unregistered from `rt`.
    pub fn take_factors(&self, rt: &Runtime) -> Result<HeldFactors, Error> {
        let (held_tiles, held_pivs) = self.drain_held();
        let mut tiles = Vec::with_capacity(held_tiles.len());
        for (i, j, h) in held_tiles {
            tiles.push((i, j, rt.unregister(h)?));
        }
        let mut pivots = Vec::with_capacity(held_pivs.len());
        for (k, h) in held_pivs {
            pivots.push((k, rt.unregister(h)?));
        }
        tiles.sort_by_key(|&(i, j, _)| (j, i));
        pivots.sort_by_key(|&(k, _)| k);
        Ok(HeldFactors { tiles, pivots })
    }

    /// After a simulated run ([`DistLu::new_virtual`]): what [`take_factors`](Self::take_factors)
    /// does in a real one, with no values: the factor tiles a device of this rank holds the
    /// only copy of go home over its link, in simulated time.
    pub fn release_virtual_factors(&self, rt: &Runtime) -> Result<(), Error> {
        let (tiles, pivs) = self.drain_held();
        for (_, _, h) in tiles {
            rt.unregister_virtual(h)?;
        }
        for (_, h) in pivs {
            rt.unregister(h)?;
        }
        Ok(())
    }

    /// Empties this rank's data, keeping the handles of the factor tiles it holds and of
    /// the pivots of the panels whose diagonal tile it owns (the rest were copies and
    /// buffers, and other members' copies of the pivots).
    fn drain_held(&self) -> (Vec<HeldTile>, Vec<HeldPivots>) {
        let slots: Vec<(u64, Slot)> = lock(&self.data).drain().collect();
        lock(&self.uses).clear();
        let (mut tiles, mut pivs) = (Vec::new(), Vec::new());
        for (key, s) in slots {
            match (self.unkey(key), s) {
                (Key::Tile(i, j), Slot::Tile(h)) if self.holder(i, j) == self.rank => {
                    tiles.push((i, j, h))
                }
                (Key::Piv(k), Slot::Piv(h)) if self.panel_rank(k) == self.rank => pivs.push((k, h)),
                _ => {}
            }
        }
        (tiles, pivs)
    }

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

        use crate::tiled::{col_mut, col_ref as col};
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
}
