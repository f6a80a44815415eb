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
use tessera_tasks::kernels::{gemm_flops, getrf_panel_flops, trsm_flops};
use tessera_tasks::tile::Tile;

use crate::hpl::generate_tile;
use crate::lu::tasks::gemm_task;

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

    /// HPL's block-cyclic dealing, then columns moved between process
    /// columns until none is predicted to finish its share of the work
    /// markedly later than the others ([`column_work`] per tile column, and
    /// the first panel's time, which every process column but the first
    /// waits for before its first task).
    ///
    /// Why: cyclic dealing gives every process column the same number of
    /// tile columns, not the same work. A tile column's work grows with its
    /// index (column `j` is updated by every panel before it), and the last
    /// one is usually narrow; at N = 8192, NB = 448 on 1×2 the second rank
    /// gets 3.6 % more flops than the first and starts about 50 ms later
    /// (it waits for panel 0), and traces showed the first rank idle 125 ms
    /// at the end, waiting for the other's last panel. A process column
    /// cannot borrow work from another as a single process's workers do.
    ///
    /// The search: from the cyclic dealing, repeatedly take the move — one
    /// column to another process column, or two columns of different process
    /// columns exchanged — that lowers the most loaded process column's
    /// predicted time the most, by at least 0.1 % of the mean, preferring
    /// among near-equal moves the one that touches only earlier columns (the
    /// end of the factorisation, with the least work left to overlap, keeps
    /// its cyclic alternation). Column 0 stays on process column 0. Moves
    /// only off the most loaded process column are tried, so each round costs
    /// O(T²) and the load's maximum strictly falls: it ends in at most T
    /// rounds. Every rank computes the same layout from `(grid, n, nb)`.
    ///
    /// Measured (2-rank `tessera lu --n 8192 --grid 1x2 --workers 1`, 6
    /// alternated rounds): cyclic median 133.5 GFLOP/s, this dealing 137.2,
    /// ahead in 5 rounds (the sixth equal); `bench/peers/lu_mpi.sh`, two
    /// runs of 3 rounds: 0.999–1.105× cyclic, ahead in 5 rounds of 6. A trace
    /// of it has both ranks 97–99.8 % busy (cyclic: 95.5 and 97.7).
    pub fn balanced(grid: Grid, n: usize, nb: usize) -> Layout {
        let t = n.div_ceil(nb.max(1));
        let mut layout = Layout::cyclic(grid, t);
        if grid.q < 2 || t < 3 {
            return layout;
        }
        let work = column_work(n, nb);
        let mut load = layout.loads(&work, n, nb);
        let tol = 1e-3 * load.iter().sum::<f64>() / grid.q as f64;
        for _ in 0..t {
            let (hot, &top) = load
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .expect("Q >= 2");
            // The new maximum after moving `out` off `hot` and `back` (if
            // any) onto it, onto/from process column `to`.
            let after = |to: usize, out: f64, back: f64| {
                let mut m = load[hot] - out + back;
                for (q, &l) in load.iter().enumerate() {
                    if q == to {
                        m = m.max(l + out - back);
                    } else if q != hot {
                        m = m.max(l);
                    }
                }
                m
            };
            // (new max, latest column moved, column off `hot`, process
            // column it goes to, column coming back to `hot`).
            let mut moves: Vec<(f64, usize, usize, usize, Option<usize>)> = Vec::new();
            for a in (1..t).filter(|&a| layout.cols[a] == hot) {
                for to in (0..grid.q).filter(|&q| q != hot) {
                    moves.push((after(to, work[a], 0.0), a, a, to, None));
                }
                for b in (1..t).filter(|&b| layout.cols[b] != hot) {
                    let to = layout.cols[b];
                    moves.push((after(to, work[a], work[b]), a.max(b), a, to, Some(b)));
                }
            }
            let best = moves.iter().map(|m| m.0).fold(f64::INFINITY, f64::min);
            if best > top - tol {
                break;
            }
            let &(_, _, a, to, b) = moves
                .iter()
                .filter(|m| m.0 <= best + tol)
                .min_by(|x, y| x.1.cmp(&y.1).then(x.0.total_cmp(&y.0)))
                .expect("the best move is among them");
            layout.cols[a] = to;
            load[hot] -= work[a];
            load[to] += work[a];
            if let Some(b) = b {
                layout.cols[b] = hot;
                load[to] -= work[b];
                load[hot] += work[b];
            }
        }
        layout
    }

    /// Each process column's predicted time for the LU of an `n`-order
    /// matrix in tiles of `nb` whose tile columns' work is `work`
    /// ([`column_work`]): its columns' work, plus panel 0's time for every
    /// process column but the one factoring it (they wait for it before
    /// their first task).
    fn loads(&self, work: &[f64], n: usize, nb: usize) -> Vec<f64> {
        let wait = panel_seconds(n, nb.clamp(1, n.max(1)));
        let mut load: Vec<f64> = (0..self.grid.q)
            .map(|q| if q == self.cols[0] { 0.0 } else { wait })
            .collect();
        for (j, &w) in work.iter().enumerate() {
            load[self.cols[j]] += w;
        }
        load
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
        self.moved_from_cyclic() == 0
    }

    /// How many tile columns are dealt otherwise than by
    /// [`cyclic`](Self::cyclic).
    pub fn moved_from_cyclic(&self) -> usize {
        self.cols
            .iter()
            .enumerate()
            .filter(|&(j, &c)| c != j % self.grid.q)
            .count()
    }
}

/// Nominal rates of the LU's tasks on one core of the development VM, from
/// `tessera trace summary` of a 2-rank `tessera lu --n 8192 --grid 1x2
/// --workers 1`: GEMM 71.8 GFLOP/s, TRSM 54.7, panel 42.9, and the row
/// swaps 212 ms for 31.7 M row elements interchanged (6.7 ns each, memory
/// bound). Only their ratios matter to [`Layout::balanced`].
const GEMM_RATE: f64 = 71.8e9;
const TRSM_RATE: f64 = 54.7e9;
const PANEL_RATE: f64 = 42.9e9;
const SWAP_SECONDS: f64 = 6.7e-9;

/// Predicted seconds of an `m × w` panel's factorisation.
fn panel_seconds(m: usize, w: usize) -> f64 {
    getrf_panel_flops(m, w) / PANEL_RATE
}

/// Predicted seconds, at the nominal rates, of the tasks that write tile
/// column `j` of the LU of an `n`-order matrix in tiles of `nb`, for every
/// `j`: its panel, and for each step `k < j` its row swaps, its TRSM and its
/// GEMMs (whatever rank runs them: that is where column `j` lives).
pub fn column_work(n: usize, nb: usize) -> Vec<f64> {
    let nb = nb.clamp(1, n.max(1));
    let t = n.div_ceil(nb);
    let width = |i: usize| (n - i * nb).min(nb);
    (0..t)
        .map(|j| {
            let wj = width(j);
            let steps: f64 = (0..j)
                .map(|k| {
                    let wk = width(k);
                    let below = n - (k + 1) * nb;
                    (wk * wj) as f64 * SWAP_SECONDS
                        + trsm_flops(wk, wj) / TRSM_RATE
                        + gemm_flops(below, wj, wk) / GEMM_RATE
                })
                .sum();
            panel_seconds(n - j * nb, wj) + steps
        })
        .collect()
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

    fn loads(l: &Layout, n: usize, nb: usize) -> Vec<f64> {
        l.loads(&column_work(n, nb), n, nb)
    }

    fn max(v: &[f64]) -> f64 {
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    #[test]
    fn balanced_dealing_evens_the_predicted_work() {
        // The case that motivated it: N = 8192, NB = 448 on 1x2, where the
        // cyclic dealing leaves the second rank 4.7 % more (with its wait
        // for panel 0).
        let (n, nb) = (8192, 448);
        let c = Layout::cyclic(g(1, 2), 19);
        let b = Layout::balanced(g(1, 2), n, nb);
        let (lc, lb) = (loads(&c, n, nb), loads(&b, n, nb));
        assert!(lc[1] / lc[0] > 1.04, "cyclic {lc:?}");
        assert!((lb[1] / lb[0] - 1.0).abs() < 0.01, "balanced {lb:?}");
        assert_ne!(b, c);
        for (grid, n, nb) in [
            (g(1, 2), 8192usize, 512usize),
            (g(1, 2), 8192, 256),
            (g(1, 3), 8192, 448),
            (g(2, 2), 8192, 448),
            (g(1, 4), 20000, 384),
            (g(1, 2), 83, 8),
            (g(1, 3), 200, 8),
        ] {
            let t = n.div_ceil(nb);
            let (c, b) = (Layout::cyclic(grid, t), Layout::balanced(grid, n, nb));
            let (lc, lb) = (loads(&c, n, nb), loads(&b, n, nb));
            let what = format!(
                "{}x{} n={n} nb={nb}: cyclic {lc:?}, balanced {lb:?}",
                grid.p, grid.q
            );
            // Never worse than cyclic, column 0 where it was, every column
            // dealt to a process column of the grid, the same every time.
            assert!(max(&lb) <= max(&lc), "{what}");
            assert_eq!(b.pcol(0), 0, "{what}");
            assert_eq!(b.tiles(), t);
            assert!((0..t).all(|j| b.pcol(j) < grid.q), "{what}");
            assert_eq!(b, Layout::balanced(grid, n, nb), "{what}");
            // Within 1 % of the mean (at these sizes a column is a small
            // part of a share).
            let mean = lb.iter().sum::<f64>() / lb.len() as f64;
            assert!(max(&lb) <= 1.01 * mean, "{what}");
        }
    }

    #[test]
    fn balanced_dealing_of_one_process_column_or_few_tiles_is_cyclic() {
        assert!(Layout::balanced(g(2, 1), 8192, 448).is_cyclic());
        assert!(Layout::balanced(g(1, 2), 9, 8).is_cyclic());
        assert!(Layout::balanced(g(1, 3), 1, 8).is_cyclic());
        assert_eq!(Layout::balanced(g(1, 3), 1, 8).tiles(), 1);
    }

    #[test]
    fn column_work_counts_every_task_of_a_column() {
        // Two tiles of 4: column 0 is its 8x4 panel; column 1 is its 4x4
        // panel plus step 0's swaps (4x4 elements), TRSM and GEMM (4x4x4).
        let w = column_work(8, 4);
        let panel = |m, n| getrf_panel_flops(m, n) / PANEL_RATE;
        assert_eq!(w.len(), 2);
        assert!((w[0] - panel(8, 4)).abs() < 1e-15);
        let step = 16.0 * SWAP_SECONDS + 64.0 / TRSM_RATE + 128.0 / GEMM_RATE;
        assert!((w[1] - panel(4, 4) - step).abs() < 1e-15, "{w:?}");
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
