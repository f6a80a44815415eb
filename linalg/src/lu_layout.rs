//! Where the distributed LU's tiles live: a P×Q process grid, tile rows dealt
//! cyclically over the process rows, and tile columns dealt over the process
//! columns either cyclically (HPL's block-cyclic layout) or in proportion to
//! the speed each process column measured (TSUBAME's lesson, seed 000: HPL
//! gives every process the same work, so "the overall performance is degraded
//! if speeds of processes are uneven"; the traditional remedy is "to assign
//! proper sizes of data to each CPU").
//!
//! Why it matters even on one machine: the cores of a virtual machine need not
//! run at the same speed. Two single-core LUs pinned to the two cores of the
//! 2-core development VM at the same time ran at 63 and 42 GFLOP/s, and one
//! 2-rank run's traces show one rank's GEMMs 40 % slower than the other's from
//! its first step to its last. A single process balances that by work
//! stealing; ranks that own fixed columns cannot, so the fast rank idles at
//! the end of every step it waits on the slow one.
//!
//! The weighted dealing is smooth weighted round-robin (each column goes to
//! the process column with the largest credit; credits grow by the speeds and
//! the chosen one pays the total), so every prefix of columns — and so every
//! step's trailing matrix — is shared in proportion to the speeds, not just
//! the totals. With equal speeds it is exactly the cyclic dealing.

use std::time::{Duration, Instant};

use tessera_engine::{DataHandle, Error, Runtime};
use tessera_tasks::kernels::gemm_flops;
use tessera_tasks::tile::Tile;

use crate::hpl::generate_tile;
use crate::lu::gemm_task;

/// A P×Q process grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Process rows.
    pub p: usize,
    /// Process columns.
    pub q: usize,
}

impl Grid {
    /// `PxQ`, e.g. `2x2`.
    pub fn parse(s: &str) -> Result<Grid, String> {
        let (a, b) = s
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("grid '{s}' is not PxQ (e.g. 1x2)"))?;
        let p: usize = a
            .trim()
            .parse()
            .map_err(|_| format!("grid '{s}': P is not a number"))?;
        let q: usize = b
            .trim()
            .parse()
            .map_err(|_| format!("grid '{s}': Q is not a number"))?;
        if p == 0 || q == 0 {
            return Err(format!("grid '{s}': P and Q must be at least 1"));
        }
        if p > 64 {
            return Err(format!("grid '{s}': at most 64 process rows"));
        }
        Ok(Grid { p, q })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.p * self.q
    }

    /// The rank at process row `p`, column `q`.
    pub fn rank(&self, p: usize, q: usize) -> usize {
        p * self.q + q
    }

    /// The (process row, process column) of `rank`.
    pub fn coords(&self, rank: usize) -> (usize, usize) {
        (rank / self.q, rank % self.q)
    }
}

/// The owners of a `t × t` tile matrix on a [`Grid`]: tile `(i, j)` belongs
/// to rank `(i mod P, col(j))`.
///
/// Invariant (checked at construction): every column's process column is
/// below `Q`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    grid: Grid,
    /// The process column of each tile column.
    cols: Vec<usize>,
}

impl Layout {
    /// HPL's block-cyclic layout: tile column `j` on process column `j mod Q`.
    pub fn cyclic(grid: Grid, t: usize) -> Layout {
        Layout {
            grid,
            cols: (0..t).map(|j| j % grid.q).collect(),
        }
    }

    /// Tile columns dealt in proportion to `speeds`, one per rank (rank
    /// order), e.g. GFLOP/s measured on each. A process column's speed is
    /// its slowest rank's (its tiles are shared evenly by its ranks, so it
    /// advances at the pace of the slowest). Equal speeds give
    /// [`cyclic`](Self::cyclic).
    pub fn weighted(grid: Grid, t: usize, speeds: &[f64]) -> Result<Layout, String> {
        if speeds.len() != grid.ranks() {
            return Err(format!(
                "{} speeds for a {}x{} grid of {} ranks",
                speeds.len(),
                grid.p,
                grid.q,
                grid.ranks()
            ));
        }
        if let Some((r, s)) = speeds
            .iter()
            .enumerate()
            .find(|(_, s)| !(s.is_finite() && **s > 0.0))
        {
            return Err(format!("rank {r}'s speed {s} is not a positive number"));
        }
        let column_speed: Vec<f64> = (0..grid.q)
            .map(|q| {
                (0..grid.p)
                    .map(|p| speeds[grid.rank(p, q)])
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let total: f64 = column_speed.iter().sum();
        let mut credit = vec![0.0f64; grid.q];
        let mut cols = Vec::with_capacity(t);
        for _ in 0..t {
            for (c, s) in credit.iter_mut().zip(&column_speed) {
                *c += s;
            }
            // The largest credit, the lowest process column on ties (so equal
            // speeds deal 0, 1, ..., Q−1, 0, ...).
            let mut best = 0;
            for q in 1..grid.q {
                if credit[q] > credit[best] {
                    best = q;
                }
            }
            credit[best] -= total;
            cols.push(best);
        }
        Ok(Layout { grid, cols })
    }

    /// A layout with tile column `j` on process column `cols[j]`.
    pub fn from_columns(grid: Grid, cols: Vec<usize>) -> Result<Layout, String> {
        if let Some((j, &c)) = cols.iter().enumerate().find(|(_, &c)| c >= grid.q) {
            return Err(format!(
                "tile column {j} dealt to process column {c} of a {}x{} grid",
                grid.p, grid.q
            ));
        }
        Ok(Layout { grid, cols })
    }

    /// The process grid.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// Tile columns (and rows).
    pub fn tiles(&self) -> usize {
        self.cols.len()
    }

    /// The process column of tile column `j`.
    pub fn pcol(&self, j: usize) -> usize {
        self.cols[j]
    }

    /// The owner of tile `(i, j)`.
    pub fn owner(&self, i: usize, j: usize) -> usize {
        self.grid.rank(i % self.grid.p, self.cols[j])
    }

    /// How many tile columns each process column holds.
    pub fn columns_per_pcol(&self) -> Vec<usize> {
        let mut n = vec![0; self.grid.q];
        for &c in &self.cols {
            n[c] += 1;
        }
        n
    }

    /// True if this is [`cyclic`](Self::cyclic)'s dealing.
    pub fn is_cyclic(&self) -> bool {
        self.cols
            .iter()
            .enumerate()
            .all(|(j, &c)| c == j % self.grid.q)
    }
}

/// How fast `rt` runs the LU's own GEMM codelet on `nb × nb` tiles, in
/// flop/s: rounds of independent updates (four per worker, each on a tile of
/// its own) until `budget` has passed, after one round not counted (first
/// touches, packing buffers). Every worker and device of `rt` takes part, so
/// this is the rank's throughput, the speed [`Layout::weighted`] wants.
pub fn measure_gemm_rate(rt: &Runtime, nb: usize, budget: Duration) -> Result<f64, Error> {
    let n = 2 * nb;
    let a = rt.register_replicable(generate_tile(n, nb, 1, 1, 0));
    let b = rt.register_replicable(generate_tile(n, nb, 1, 0, 1));
    let cs: Vec<DataHandle<Tile>> = (0..4 * rt.workers().max(1))
        .map(|_| rt.register_replicable(Tile::zeros(nb, nb)))
        .collect();
    let round = || -> Result<(), Error> {
        for c in &cs {
            rt.submit(gemm_task([&a, &b, c], (0, 1, 1), n, nb, 0))?;
        }
        rt.wait_all()
    };
    round()?;
    let start = Instant::now();
    let mut rounds = 0u32;
    while rounds == 0 || start.elapsed() < budget {
        round()?;
        rounds += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let flops = gemm_flops(nb, nb, nb) * (cs.len() as f64) * f64::from(rounds);
    for h in cs.into_iter().chain([a, b]) {
        rt.unregister(h)?;
    }
    Ok(flops / secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(p: usize, q: usize) -> Grid {
        Grid { p, q }
    }

    #[test]
    fn equal_speeds_deal_cyclically() {
        for (p, q) in [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3)] {
            let w = Layout::weighted(g(p, q), 17, &vec![42.0; p * q]).unwrap();
            assert_eq!(w, Layout::cyclic(g(p, q), 17), "{p}x{q}");
            assert!(w.is_cyclic());
        }
    }

    #[test]
    fn every_prefix_is_shared_in_proportion() {
        // Speeds 3 : 1 : 2 over 1x3; every prefix of columns within one
        // column of its share, so each step's trailing matrix is too.
        let speeds = [3.0, 1.0, 2.0];
        let l = Layout::weighted(g(1, 3), 60, &speeds).unwrap();
        let mut n = [0usize; 3];
        for j in 0..60 {
            n[l.pcol(j)] += 1;
            for q in 0..3 {
                let share = (j + 1) as f64 * speeds[q] / 6.0;
                assert!(
                    (n[q] as f64 - share).abs() <= 1.0,
                    "prefix {j}: process column {q} has {} columns, its share is {share}",
                    n[q]
                );
            }
        }
        assert_eq!(l.columns_per_pcol(), vec![30, 10, 20]);
        assert!(!l.is_cyclic());
    }

    #[test]
    fn a_process_column_goes_at_its_slowest_ranks_pace() {
        // 2x2: column 0 has ranks 0 and 2 (speeds 10, 1), column 1 has ranks
        // 1 and 3 (speeds 1, 1): equal column speeds, so cyclic.
        let l = Layout::weighted(g(2, 2), 8, &[10.0, 1.0, 1.0, 1.0]).unwrap();
        assert!(l.is_cyclic());
        assert_eq!(l.owner(1, 2), 2);
        assert_eq!(l.owner(1, 3), 3);
    }

    #[test]
    fn bad_speeds_and_columns_are_refused() {
        let e = Layout::weighted(g(1, 2), 4, &[1.0]).unwrap_err();
        assert!(e.contains("1 speeds for a 1x2 grid"), "{e}");
        let e = Layout::weighted(g(1, 2), 4, &[1.0, f64::NAN]).unwrap_err();
        assert!(e.contains("rank 1's speed NaN"), "{e}");
        let e = Layout::weighted(g(1, 2), 4, &[0.0, 1.0]).unwrap_err();
        assert!(e.contains("rank 0's speed 0"), "{e}");
        let e = Layout::from_columns(g(1, 2), vec![0, 2]).unwrap_err();
        assert!(e.contains("tile column 1 dealt to process column 2"), "{e}");
    }
}
