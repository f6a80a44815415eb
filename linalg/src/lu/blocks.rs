//! The LU's trailing updates in device-sized tasks (the accelerated-node
//! LU): how a step's update is cut when devices run it, and the sequential
//! task flow that submits it.
//!
//! Two shapes, after the seed papers:
//! - [`Update::Merged`] (Hetero-HPL, §4.2: "let all column blocks on the
//!   same device execute the same operation at the same time"): each
//!   device owns tile columns (dealt cyclically) and keeps them resident;
//!   at step `k` it runs one `UPDATE(k, J)` over every column `J` it owns
//!   (their interchanges, TRSMs and GEMMs: calls as large as the trailing
//!   matrix allows). The next panel's column `k+1` gets an `UPDATE` of its
//!   own at the highest update priority, so `PANEL(k+1)` (a host team)
//!   runs while the devices update the rest — HPL's look-ahead of depth 1.
//! - [`Update::Streamed`] (TianHe-1, §4.3: input, execute and output
//!   pipelined): the matrix lives on the host, and a device's share of a
//!   column's GEMMs goes in blocks of `rows` tile rows (`GEMMB`), each large
//!   enough for the device's large-call rate. The tiles are written through
//!   to the host, so their device copies are clean and leave memory free;
//!   `dmda` prefetches the next block's inputs while a block runs. The
//!   interchanges and TRSMs stay per column, and the host's share of the
//!   columns (`--split adaptive`) keeps its tile tasks.
//!
//! Either way the panel may be a team task ([`LuOptions::panel_team`]).
//! The tasks go in in step order from this thread; dependencies come from
//! the data (sequential task flow).

use std::time::Instant;
use tessera_engine::{Error, Runtime, Task, TaskBuilder};
use tessera_tasks::codelets::lu_blocks::{GemmBlockArgs, UpdateArgs, GEMMB, UPDATE};

use tessera_tasks::kernels::{gemm_flops, gemm_update, trsm_flops};
use tessera_tasks::tile::Tile;

use super::tasks::column_priority;
use super::{LuGraph, LuTask};

/// How the trailing update of each step is cut into tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Per tile: `SWAP(k, j)`, `TRSM(k, j)`, `GEMM(k, i, j)` (CPU workers;
    /// the scheduler may send tiles to devices).
    Tiles,
    /// One `UPDATE(k, J)` per device and step over the columns it owns, one
    /// for the next panel's column (see the module doc).
    Merged,
    /// Per-column interchanges and TRSMs; a device's GEMMs in blocks of
    /// `rows` tile rows, its outputs written through to the host.
    Streamed {
        /// Tile rows per `GEMMB`.
        rows: usize,
    },
}

/// A call of this many times a device's half-rate size runs at 80 % of its
/// large-call rate (`f / (f + half)`).
const LARGE_CALL: f64 = 4.0;

/// The largest share of the node's GEMM rate the CPU workers may have for
/// `Update::auto` to pick `Merged` (see there).
const MERGED_MAX_HOST_SHARE: f64 = 0.1;

/// The largest share of the node's GEMM rate the CPU workers may have for
/// `Update::auto` to pick `Merged` even where tile GEMMs already run near the
/// devices' large-call rate: a host this small gains nothing from taking
/// tiles and sends them back and forth (see there).
const NEGLIGIBLE_HOST_SHARE: f64 = 0.03;

/// The CPU workers' share of the node's GEMM rate (CPU workers and devices
/// together). A simulated run takes a core's rate from the platform; a real
/// run measures it ([`probe_core_flops`], about 10 ms).
fn host_share(rt: &Runtime) -> f64 {
    let config = rt.config();
    let core = match config.simulate.as_ref() {
        Some(sim) => sim.cpu_gflops() * 1e9,
        None => probe_core_flops(),
    };
    let host = core * config.workers as f64;
    let devices: f64 = config.devices.iter().map(|d| d.peak_flops()).sum();
    if host + devices > 0.0 {
        host / (host + devices)
    } else {
        0.0
    }
}

/// One CPU core's rate on the LU's own tile GEMM (`gemm_update`), 256-wide
/// tiles, best of three calls after a warm-up, in flop/s. A small tile runs
/// below an `nb`-wide one, so this understates the host a little: enough for
/// the 10 % rule it feeds (a core beside an H200 is under 0.1 % of it).
fn probe_core_flops() -> f64 {
    const W: usize = 256;
    let data = |m: usize| -> Vec<f64> { (0..W * W).map(|k| (k % m) as f64 - 5.0).collect() };
    let a = Tile::from_col_major(W, W, &data(11));
    let b = Tile::from_col_major(W, W, &data(13));
    let mut c = Tile::zeros(W, W);
    gemm_update(&a, &b, &mut c);
    let best = (0..3)
        .map(|_| {
            let t = Instant::now();
            gemm_update(&a, &b, &mut c);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    gemm_flops(W, W, W) / best.max(1e-9)
}

impl Update {
    /// The shape for `rt`'s devices and an `n × n` LU in tiles of `nb`:
    /// - `Tiles` without devices;
    /// - `Merged` when each device's share of the matrix and two panel
    ///   columns fit in its memory and the CPU workers are at most 3 % of
    ///   the node's GEMM rate. (Hetero-HPL's devices hold 95.5 % of theirs.
    ///   Until the ninth session the bound was 90 % of the memory, which
    ///   left out the paper's own N = 88320: 95.0 % at nb 512, so `auto`
    ///   streamed it, 9.9 % of peak simulated, against 64.1 % merged with
    ///   no over-committed allocation.)
    /// - else `Tiles` when a tile's GEMM already runs at 80 % of every
    ///   device's large-call rate (StarPU's mirage, its host 9 % of the
    ///   node: 74.5 % of the GEMM bound with tiles at N = 19200, 68.7 %
    ///   merged);
    /// - else, when the matrix fits, `Merged` if the CPU workers are at
    ///   most a tenth of the node, `Tiles` if more;
    /// - else `Streamed`, with blocks of flops at least 8× the device's
    ///   half-rate call size (9/10 of its large-call rate; 4 tile rows when
    ///   the device does not say), at most an eighth of its memory per block.
    ///
    /// Only a shape some device may run is picked (a platform's `only`
    /// list, [`Device::runs`](tessera_engine::device::Device::runs)):
    /// `Merged` falls back to `Streamed`, and `Streamed` to `Tiles`, where
    /// no device runs their codelet (issue 42: with `only = ["gemm"]`, auto
    /// picked merged updates, which one CPU core then ran, 18x slower).
    pub fn auto(rt: &Runtime, n: usize, nb: usize) -> Update {
        let shape = Self::auto_any(rt, n, nb);
        let runs = |name: &str| rt.config().devices.iter().any(|d| d.runs(name));
        match shape {
            Update::Merged if !runs(UPDATE.name()) => match Self::auto_streamed(rt, n, nb) {
                s @ Update::Streamed { .. } if runs(GEMMB.name()) => s,
                _ => Update::Tiles,
            },
            Update::Streamed { .. } if !runs(GEMMB.name()) => Update::Tiles,
            s => s,
        }
    }

    /// Whether some device of `rt` may run the tasks of this shape (tiles:
    /// always, they run on the CPU workers at worst).
    pub fn runs_on_devices(self, rt: &Runtime) -> bool {
        let name = match self {
            Update::Tiles => return true,
            Update::Merged => UPDATE.name(),
            Update::Streamed { .. } => GEMMB.name(),
        };
        rt.config().devices.iter().any(|d| d.runs(name))
    }

    /// [`Update::auto`]'s choice where every device runs every shape.
    fn auto_any(rt: &Runtime, n: usize, nb: usize) -> Update {
        let devices = &rt.config().devices;
        if devices.is_empty() || nb == 0 || n == 0 {
            return Update::Tiles;
        }
        let tile = gemm_flops(nb, nb, nb);
        let (nf, nbf) = (n as f64, nb as f64);
        let share = nf * nf * 8.0 / devices.len() as f64 + 2.0 * nf * nbf * 8.0;
        let fits = devices
            .iter()
            .all(|d| d.memory_limit().is_none_or(|m| share <= m as f64));
        let host = host_share(rt);
        let large_tiles = devices
            .iter()
            .all(|d| tile >= LARGE_CALL * d.half_rate_flops());
        if fits && host <= NEGLIGIBLE_HOST_SHARE {
            // Where the host is a negligible part of the node, tile tasks
            // only lose, even where tiles are large enough for the device:
            // on an H200 node (16 cores, under 1 % of it), `lu --n 32768
            // --nb 2048 --gpus all` ran 5.2–5.5 TFLOP/s in tiles, with CPU
            // GEMMs sending 10–22 GiB back and forth, against 7.0 merged, in
            // one run (README, "First runs on a real GPU").
            return Update::Merged;
        }
        if large_tiles {
            // Device-sized updates exist to make device calls large enough;
            // where a tile's GEMM already runs at 80 % of the device's
            // large-call rate, tile tasks keep dmda's freedom (look-ahead,
            // any worker): StarPU's mirage, 82 % of its GEMM bound with
            // tiles against 77 % streamed (README, "Machines StarPU measured").
            return Update::Tiles;
        }
        if fits {
            // Merged updates leave the host cores only the panels: right
            // when they are a small part of the node (Hetero-HPL's 28 cores
            // are 4 % of it), a loss of their whole share otherwise (4
            // cores beside one device 10× faster: 87 % of peak with tiles,
            // 73 % merged, bench/platforms/dmda-10x.toml).
            return if host <= MERGED_MAX_HOST_SHARE {
                Update::Merged
            } else {
                Update::Tiles
            };
        }
        Self::auto_streamed(rt, n, nb)
    }

    /// Streamed updates with the block rows [`Update::auto`] gives them.
    fn auto_streamed(rt: &Runtime, n: usize, nb: usize) -> Update {
        let devices = &rt.config().devices;
        let tile = gemm_flops(nb, nb, nb);
        let nbf = nb as f64;
        let t = n.div_ceil(nb);
        let rows = devices
            .iter()
            .map(|d| {
                let half = d.half_rate_flops();
                let want = if half > 0.0 {
                    (16.0 * half / tile).ceil() as usize
                } else {
                    4
                };
                // Two blocks in flight, each `rows` tiles of C and of L and
                // one of U, in half the device's memory (the rest for the
                // prefetches of the blocks queued behind them: at three
                // quarters the TSUBAME platform over-committed 399 times).
                let room = d.memory_limit().map_or(usize::MAX, |m| {
                    let tiles = 0.5 * m as f64 / (nbf * nbf * 8.0);
                    ((tiles / 2.0 - 1.0) / 2.0).max(1.0) as usize
                });
                want.min(room)
            })
            .max()
            .unwrap_or(4);
        Update::Streamed {
            rows: rows.clamp(1, t.max(1)),
        }
    }
}

impl LuGraph {
    /// `UPDATE(k, J)` over the columns `cols` (all right of `k`).
    fn update_task(&self, k: usize, cols: &[usize], prio: i32) -> TaskBuilder {
        let (n, nb, t) = (self.n, self.nb, self.t);
        let side = |i: usize| (n - i * nb).min(nb);
        let below = n - (k + 1).min(t) * nb;
        let flops = cols
            .iter()
            .map(|&j| trsm_flops(side(k), side(j)) + gemm_flops(below, side(j), side(k)))
            .sum();
        let l = (k..t).map(|i| self.tile(i, k).r()).collect();
        let c = cols
            .iter()
            .flat_map(|&j| (k..t).map(move |i| (i, j)))
            .map(|(i, j)| self.tile(i, j).rw())
            .collect();
        Task::new(&UPDATE, (self.piv[k].r(), l, c))
            .args(UpdateArgs {
                k,
                cols: cols.to_vec(),
                flops,
            })
            .priority(prio)
            .into()
    }

    /// `GEMMB(k, i0..i1, j)`.
    fn gemm_block_task(
        &self,
        k: usize,
        (i0, i1): (usize, usize),
        j: usize,
        prio: i32,
    ) -> TaskBuilder {
        let (n, nb) = (self.n, self.nb);
        let side = |i: usize| (n - i * nb).min(nb);
        let flops = (i0..i1)
            .map(|i| gemm_flops(side(i), side(j), side(k)))
            .sum();
        Task::new(
            &GEMMB,
            (
                (i0..i1).map(|i| self.tile(i, k).r()).collect(),
                self.tile(k, j).r(),
                (i0..i1).map(|i| self.tile(i, j).rw()).collect(),
            ),
        )
        .args(GemmBlockArgs {
            k,
            rows: (i0, i1),
            j,
            flops,
        })
        .priority(prio)
        .into()
    }

    /// [`Self::gemm_block_task`] on column `j`'s placement node, if any.
    fn streamed_block(&self, k: usize, rows: (usize, usize), j: usize, prio: i32) -> TaskBuilder {
        let task = self.gemm_block_task(k, rows, j, prio);
        match self.placement.node(k, j) {
            Some(n) => task.on_node(n),
            None => task,
        }
    }

    /// The device node that owns column `j` in the merged shape: the
    /// placement's (cyclic over two or more devices), else device `j mod D`.
    fn owner(&self, k: usize, j: usize, devices: &[usize]) -> Option<usize> {
        self.placement
            .node(k, j)
            .or_else(|| (!devices.is_empty()).then(|| devices[j % devices.len()]))
    }
}

/// Submit the LU in the device-sized shape `update` (not `Tiles`), step by
/// step, and wait; `home_early`: merged updates send each tile home when it
/// is final (see [`LuOptions::home_early`](super::LuOptions::home_early)).
pub(super) fn submit(
    rt: &Runtime,
    g: &LuGraph,
    update: Update,
    home_early: bool,
) -> Result<(), Error> {
    let t = g.t;
    let devices = rt.device_nodes();
    for k in 0..t {
        rt.submit(g.task(LuTask::Panel(k)))?;
        match update {
            Update::Tiles => {
                for j in k + 1..t {
                    g.submit_column_tiles(rt, k, j)?;
                }
            }
            Update::Merged => {
                // The next panel's column first, alone; then each owner's
                // other columns in one task.
                let mut groups: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
                if k + 1 < t {
                    groups.push((g.owner(k, k + 1, &devices), vec![k + 1]));
                }
                for j in k + 2..t {
                    let owner = g.owner(k, j, &devices);
                    // Skip the look-ahead group (the first): it stays alone.
                    match groups.iter_mut().skip(1).find(|(o, _)| *o == owner) {
                        Some((_, cols)) => cols.push(j),
                        None => groups.push((owner, vec![j])),
                    }
                }
                for (owner, cols) in groups {
                    let task = g.update_task(k, &cols, column_priority(t, cols[0]));
                    rt.submit(match owner {
                        Some(node) => task.on_node(node),
                        None => task,
                    })?;
                }
                // Tile row k (its TRSMs, in the updates just submitted) and
                // tile column k (the panel) take no further writes: each
                // comes home as soon as it is final, while the devices go
                // on, not all at the end (on an H200 node that end was 0.47
                // of 2.34 s predicted at N = 32768). The interchanges of
                // later steps reach the columns left of the panel only in
                // `to_dgetrf_layout`, on the host.
                if home_early {
                    for j in k..t {
                        g.tile(k, j).wont_write();
                    }
                    for i in k + 1..t {
                        g.tile(i, k).wont_write();
                    }
                }
            }
            Update::Streamed { rows } => {
                // The look-ahead column (k + 1) first, whole; then every other
                // device column's interchange and TRSM, and their GEMM blocks
                // row block by row block (TianHe-1's pipelining): a block of
                // L stays on the device while it meets every column, so each
                // step moves its panel once, not once per column.
                let on_device = |j: usize| {
                    let node = g.placement.node(k, j);
                    node.is_some_and(|n| devices.contains(&n))
                        || (node.is_none() && !devices.is_empty())
                };
                let mut streamed = Vec::new();
                for j in k + 1..t {
                    if !on_device(j) {
                        g.submit_column_tiles(rt, k, j)?;
                        continue;
                    }
                    rt.submit(g.placed(LuTask::Swap(k, j), None))?;
                    rt.submit(g.placed(LuTask::Trsm(k, j), None))?;
                    if j == k + 1 {
                        for block in row_blocks(k + 1, t, rows) {
                            rt.submit(g.streamed_block(k, block, j, column_priority(t, j)))?;
                        }
                    } else {
                        streamed.push(j);
                    }
                }
                if let Some(&first) = streamed.first() {
                    // One priority for the step's streamed blocks: the queue
                    // keeps their (row-block-major) submission order.
                    let prio = column_priority(t, first);
                    for block in row_blocks(k + 1, t, rows) {
                        for &j in &streamed {
                            rt.submit(g.streamed_block(k, block, j, prio))?;
                        }
                    }
                }
            }
        }
    }
    rt.wait_all()
}

/// Tile rows `from..t` in blocks of `rows` (the last may be short).
fn row_blocks(from: usize, t: usize, rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (from..t)
        .step_by(rows.max(1))
        .map(move |i0| (i0, (i0 + rows.max(1)).min(t)))
}

impl LuGraph {
    /// Column `j`'s step-`k` tile tasks: its swap, its TRSM, its GEMMs.
    fn submit_column_tiles(&self, rt: &Runtime, k: usize, j: usize) -> Result<(), Error> {
        rt.submit(self.task(LuTask::Swap(k, j)))?;
        rt.submit(self.task(LuTask::Trsm(k, j)))?;
        for i in k + 1..self.t {
            rt.submit(self.task(LuTask::Gemm(k, i, j)))?;
        }
        Ok(())
    }

    /// `key`'s task placed on `node` (`None`: wherever the scheduler finds
    /// best, whatever the column placement says).
    fn placed(&self, key: LuTask, node: Option<usize>) -> TaskBuilder {
        let task = self.bare_task(key);
        match node {
            Some(n) => task.on_node(n),
            None => task,
        }
    }
}
