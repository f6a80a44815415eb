//! Tiled LU with partial pivoting as a task graph (the HPL driver), in two
//! front-ends over the same tasks: sequential task flow ([`Front::Stf`]) and a
//! symbolic, lazily unfolded DAG ([`Front::Symbolic`]).
//!
//! Tasks per step `k` (tiles `nb × nb`, `T` tile rows and columns):
//! - `PANEL(k)`: factor tiles `(k..T, k)` with partial pivoting → `piv[k]`;
//! - `SWAP(k, j)`, `j > k`: apply `piv[k]` to tiles `(k..T, j)`. As in HPL,
//!   the swaps are not applied to the `L` columns left of the panel: the
//!   factors keep each column of `L` as its panel left it, and the solve
//!   applies `piv[k]` to the right-hand side at step `k` (see [`LuFactors`]);
//! - `TRSM(k, j)`, `j > k`: `A(k,j) := L(k,k)⁻¹ A(k,j)`;
//! - `GEMM(k, i, j)`, `i, j > k`: `A(i,j) -= A(i,k) A(k,j)`.
//!
//! Look-ahead comes from priorities (under the `prio` policy): a task that
//! works on tile column `j` gets a priority that grows as `j` gets closer to
//! the left, and panels rank above updates of their column, so `PANEL(k+1)`
//! runs as soon as column `k+1` is updated while step `k`'s other updates
//! continue.
//!
//! With two or more devices, tile columns are dealt to them block-cyclically
//! (Hetero-HPL): every task that updates column `j` (its swaps, TRSM, GEMMs)
//! is placed on device `j mod D` (`on_node`, honoured by `dmda`), so a
//! column's tiles stay in one device's memory and only the panel's `L` tiles
//! travel; panels stay on the CPU. With one device `dmda` shares the updates
//! between the CPU workers and the device by its cost estimates.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_engine::symbolic::{self, TaskClasses};
use tessera_engine::{BodyError, Codelet, DataHandle, Error, Runtime, TaskBuilder, TaskContext};
use tessera_tasks::kernels::{
    gemm_flops, gemm_update, getrf_panel, getrf_panel_flops, laswp, trsm_flops, trsm_unit_lower,
};
use tessera_tasks::tile::Tile;

use crate::device_ops;
use crate::lu_seq::ipiv_global;
use crate::tiled::TileMatrix;

/// Which task-graph front-end builds the LU DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// Every task submitted from this thread, dependencies inferred from data.
    Stf,
    /// Task classes with dependency functions, unfolded as tasks finish.
    Symbolic,
}

/// The codelets of the LU, shared by both front-ends.
struct Codelets {
    panel: Codelet,
    swap: Codelet,
    trsm: Codelet,
    gemm: Codelet,
}

impl Codelets {
    fn new() -> Self {
        Codelets {
            panel: Codelet::new("panel"),
            swap: Codelet::new("swap"),
            trsm: Codelet::new("trsm"),
            gemm: Codelet::new("gemm"),
        }
    }
}

/// One task of the LU DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LuTask {
    /// `PANEL(k)`.
    Panel(usize),
    /// `SWAP(k, j)`.
    Swap(usize, usize),
    /// `TRSM(k, j)`.
    Trsm(usize, usize),
    /// `GEMM(k, i, j)`.
    Gemm(usize, usize, usize),
}

/// The LU's data registered with a runtime, and how to make each task.
struct LuGraph {
    t: usize,
    nb: usize,
    tiles: Vec<DataHandle<Tile>>,
    piv: Vec<DataHandle<Vec<usize>>>,
    cl: Codelets,
    /// Flops finished so far (for progress reporting), if asked for.
    progress: Option<Arc<AtomicU64>>,
    /// Device memory nodes owning tile columns block-cyclically (empty: no owners).
    column_owners: Vec<usize>,
}

impl LuGraph {
    fn tile(&self, i: usize, j: usize) -> &DataHandle<Tile> {
        &self.tiles[i + j * self.t]
    }

    fn rows(&self, i: usize, n: usize) -> usize {
        (n - i * self.nb).min(self.nb)
    }

    fn priority(&self, task: LuTask) -> i32 {
        let t = self.t as i32;
        match task {
            LuTask::Panel(k) => 4 * (t - k as i32) + 3,
            LuTask::Swap(_, j) | LuTask::Trsm(_, j) | LuTask::Gemm(_, _, j) => {
                4 * (t - j as i32) + 1
            }
        }
    }

    /// The task for `key`, with its data, priority, label, body and, with
    /// column owners, its placement.
    fn task(&self, key: LuTask, n: usize) -> TaskBuilder {
        let tb = self.unplaced_task(key, n);
        let column = match key {
            LuTask::Panel(_) => return tb,
            LuTask::Swap(_, j) | LuTask::Trsm(_, j) | LuTask::Gemm(_, _, j) => j,
        };
        match self.column_owners.len() {
            0 => tb,
            d => tb.on_node(self.column_owners[column % d]),
        }
    }

    fn unplaced_task(&self, key: LuTask, n: usize) -> TaskBuilder {
        let prio = self.priority(key);
        let progress = self.progress.clone();
        let tally = move |flops: f64| {
            if let Some(p) = &progress {
                p.fetch_add(flops as u64, Ordering::Relaxed);
            }
        };
        match key {
            LuTask::Panel(k) => {
                let col: Vec<_> = (k..self.t).map(|i| self.tile(i, k).clone()).collect();
                let piv = self.piv[k].clone();
                let m = n - k * self.nb;
                let w = self.rows(k, n);
                let flops = getrf_panel_flops(m, w);
                let nb = self.nb;
                let mut tb = TaskBuilder::new(&self.cl.panel)
                    .label(format!("panel({k})"))
                    .priority(prio)
                    .flops(flops)
                    .write(&piv);
                for h in &col {
                    tb = tb.rw(h);
                }
                let (dcol, dpiv, dtally) = (col.clone(), piv.clone(), tally.clone());
                let rows: Vec<usize> = (k..self.t).map(|i| self.rows(i, n)).collect();
                tb.device_body(move |ctx| {
                    if ctx.on_device_memory() {
                        let tiles = device_ops::column(ctx, &dcol, &rows)?;
                        let local = device_ops::getrf_panel(ctx, &tiles, w, k * nb)?;
                        device_ops::write_pivots(ctx, &ctx.device_parts(&dpiv)?[0], &local)?;
                    } else {
                        panel_host(ctx, &dcol, &dpiv, k * nb)?;
                    }
                    dtally(flops);
                    Ok(())
                })
                .body(move |ctx| {
                    panel_host(ctx, &col, &piv, k * nb)?;
                    tally(flops);
                    Ok(())
                })
            }
            LuTask::Swap(k, j) => {
                let col: Vec<_> = (k..self.t).map(|i| self.tile(i, j).clone()).collect();
                let piv = self.piv[k].clone();
                let mut tb = TaskBuilder::new(&self.cl.swap)
                    .label(format!("swap({k},{j})"))
                    .priority(prio)
                    .read(&piv);
                for h in &col {
                    tb = tb.rw(h);
                }
                let (dcol, dpiv) = (col.clone(), piv.clone());
                let rows: Vec<usize> = (k..self.t).map(|i| self.rows(i, n)).collect();
                let (cols, npiv) = (self.rows(j, n), self.rows(k, n));
                tb.device_body(move |ctx| {
                    if !ctx.on_device_memory() {
                        return swap_host(ctx, &dcol, &dpiv);
                    }
                    let ipiv = device_ops::read_pivots(ctx, &ctx.device_parts(&dpiv)?[0], npiv)?;
                    let tiles = device_ops::column(ctx, &dcol, &rows)?;
                    device_ops::laswp(ctx, &tiles, cols, &ipiv)
                })
                .body(move |ctx| swap_host(ctx, &col, &piv))
            }
            LuTask::Trsm(k, j) => {
                let (l, b) = (self.tile(k, k).clone(), self.tile(k, j).clone());
                let shape = (self.rows(k, n), self.rows(j, n));
                let flops = trsm_flops(shape.0, shape.1);
                let (dl, db, dtally) = (l.clone(), b.clone(), tally.clone());
                TaskBuilder::new(&self.cl.trsm)
                    .label(format!("trsm({k},{j})"))
                    .priority(prio)
                    .flops(flops)
                    .read(&l)
                    .rw(&b)
                    .device_body(move |ctx| {
                        if ctx.on_device_memory() {
                            let (pl, pb) = (ctx.device_parts(&dl)?[0], ctx.device_parts(&db)?[0]);
                            device_ops::trsm_unit_lower(ctx, shape, &pl, &pb)?;
                        } else {
                            trsm_unit_lower(ctx.read(&dl)?, ctx.write(&db)?);
                        }
                        dtally(flops);
                        Ok(())
                    })
                    .body(move |ctx| {
                        trsm_unit_lower(ctx.read(&l)?, ctx.write(&b)?);
                        tally(flops);
                        Ok(())
                    })
            }
            LuTask::Gemm(k, i, j) => {
                let (a, b, c) = (
                    self.tile(i, k).clone(),
                    self.tile(k, j).clone(),
                    self.tile(i, j).clone(),
                );
                let shape = (self.rows(i, n), self.rows(j, n), self.rows(k, n));
                let flops = gemm_flops(shape.0, shape.1, shape.2);
                let (da, db, dc, dtally) = (a.clone(), b.clone(), c.clone(), tally.clone());
                TaskBuilder::new(&self.cl.gemm)
                    .label(format!("gemm({k},{i},{j})"))
                    .priority(prio)
                    .flops(flops)
                    .read(&a)
                    .read(&b)
                    .rw(&c)
                    .device_body(move |ctx| {
                        if ctx.on_device_memory() {
                            let pa = ctx.device_parts(&da)?[0];
                            let pb = ctx.device_parts(&db)?[0];
                            let pc = ctx.device_parts(&dc)?[0];
                            device_ops::gemm_minus(ctx, shape, &pa, &pb, &pc)?;
                        } else {
                            gemm_update(ctx.read(&da)?, ctx.read(&db)?, ctx.write(&dc)?);
                        }
                        dtally(flops);
                        Ok(())
                    })
                    .body(move |ctx| {
                        gemm_update(ctx.read(&a)?, ctx.read(&b)?, ctx.write(&c)?);
                        tally(flops);
                        Ok(())
                    })
            }
        }
    }
}

/// `PANEL`'s work on host-addressable replicas: the sequential panel kernel
/// on this worker's core (no threads outside the engine's workers).
fn panel_host(
    ctx: &TaskContext<'_>,
    col: &[DataHandle<Tile>],
    piv: &DataHandle<Vec<usize>>,
    col0: usize,
) -> Result<(), BodyError> {
    let mut tiles = col
        .iter()
        .map(|h| ctx.write(h))
        .collect::<Result<Vec<_>, _>>()?;
    *ctx.write(piv)? = getrf_panel(&mut tiles, col0)?;
    Ok(())
}

/// `SWAP`'s work on host-addressable replicas.
fn swap_host(
    ctx: &TaskContext<'_>,
    col: &[DataHandle<Tile>],
    piv: &DataHandle<Vec<usize>>,
) -> Result<(), BodyError> {
    let ipiv = ctx.read(piv)?;
    let mut tiles = col
        .iter()
        .map(|h| ctx.write(h))
        .collect::<Result<Vec<_>, _>>()?;
    laswp(&mut tiles, ipiv);
    Ok(())
}

/// The symbolic description of the LU DAG (see the module doc for the tasks).
///
/// Dependencies, for `T` tiles per side:
/// - `PANEL(0)` is the root; `PANEL(k>0)` ← `GEMM(k-1, i, k)` for `i ≥ k`;
/// - `SWAP(k, j>k)` ← `PANEL(k)` and `GEMM(k-1, i, j)` for `i ≥ k`;
/// - `TRSM(k, j)` ← `SWAP(k, j)`; `GEMM(k, i, j)` ← `TRSM(k, j)`.
struct LuClasses {
    graph: LuGraph,
    n: usize,
}

impl TaskClasses for LuClasses {
    type Key = LuTask;

    fn roots(&self) -> Vec<LuTask> {
        vec![LuTask::Panel(0)]
    }

    fn predecessor_count(&self, key: &LuTask) -> usize {
        let t = self.graph.t;
        match *key {
            LuTask::Panel(k) => {
                if k == 0 {
                    0
                } else {
                    t - k
                }
            }
            LuTask::Swap(k, _) => 1 + if k > 0 { t - k } else { 0 },
            LuTask::Trsm(_, _) | LuTask::Gemm(_, _, _) => 1,
        }
    }

    fn successors(&self, key: &LuTask, out: &mut Vec<LuTask>) {
        let t = self.graph.t;
        match *key {
            LuTask::Panel(k) => {
                out.extend((k + 1..t).map(|j| LuTask::Swap(k, j)));
            }
            LuTask::Swap(k, j) => out.push(LuTask::Trsm(k, j)),
            LuTask::Trsm(k, j) => out.extend((k + 1..t).map(|i| LuTask::Gemm(k, i, j))),
            LuTask::Gemm(k, _, j) => {
                out.push(if j == k + 1 {
                    LuTask::Panel(k + 1)
                } else {
                    LuTask::Swap(k + 1, j)
                });
            }
        }
    }

    fn task(&self, key: &LuTask) -> TaskBuilder {
        self.graph.task(*key, self.n)
    }
}

/// Submit the LU DAG in sequential-task-flow order: for each step, the panel,
/// then per column to its right the swap, the trsm and the gemms.
fn submit_stf(rt: &Runtime, g: &LuGraph, n: usize) -> Result<(), Error> {
    let t = g.t;
    for k in 0..t {
        rt.submit(g.task(LuTask::Panel(k), n))?;
        for j in k + 1..t {
            rt.submit(g.task(LuTask::Swap(k, j), n))?;
            rt.submit(g.task(LuTask::Trsm(k, j), n))?;
            for i in k + 1..t {
                rt.submit(g.task(LuTask::Gemm(k, i, j), n))?;
            }
        }
    }
    rt.wait_all()
}

/// The result of a factorisation: `L` and `U` in `factors`, and LAPACK-style
/// 0-based global pivots (`ipiv[i]`: row swapped with row `i` at step `i`).
///
/// HPL's layout, not `dgetrf`'s: a tile column `k` of `L` is left as
/// `PANEL(k)` wrote it, without the interchanges of later panels
/// ([`solve_from_factors`](crate::hpl::solve_from_factors) applies them to the
/// right-hand side step by step). [`to_dgetrf_layout`](crate::lu_seq::to_dgetrf_layout)
/// applies them to `L`, giving `dgetrf`'s `P·A = L·U`.
pub struct LuFactors {
    /// `L` (unit, strictly below the diagonal) and `U` (on and above it).
    pub factors: TileMatrix,
    /// Global pivots, as `dgetrf`'s `IPIV` minus one.
    pub ipiv: Vec<usize>,
}

/// Factor a square tiled matrix on `rt` with the given front-end.
/// `progress`, if given, accumulates the flops of finished tasks.
///
/// # Errors
/// A singular matrix fails `PANEL(k)` with a message naming the exact zero
/// pivot's column; the tasks depending on it are cancelled.
pub fn lu_factor(
    rt: &Runtime,
    a: TileMatrix,
    front: Front,
    progress: Option<Arc<AtomicU64>>,
) -> Result<LuFactors, Error> {
    let (n, nb) = (a.n_rows(), a.nb());
    if a.n_cols() != n {
        return Err(Error::Config(format!(
            "LU needs a square matrix, got {} x {}",
            n,
            a.n_cols()
        )));
    }
    let t = a.mt();
    let tiles: Vec<_> = a
        .into_tiles()
        .into_iter()
        .enumerate()
        .map(|(ix, tile)| rt.register_replicable_named(tile, format!("A({},{})", ix % t, ix / t)))
        .collect();
    // Each panel's pivots have their final length from the start: a
    // replica's shape is fixed (device memory is allocated from it).
    let piv = (0..t)
        .map(|k| {
            rt.register_replicable_named(vec![0usize; (n - k * nb).min(nb)], format!("piv({k})"))
        })
        .collect();
    let graph = LuGraph {
        t,
        nb,
        tiles,
        piv,
        cl: Codelets::new(),
        progress,
        column_owners: match rt.device_nodes() {
            d if d.len() >= 2 => d,
            _ => Vec::new(),
        },
    };
    let graph = match front {
        Front::Stf => {
            submit_stf(rt, &graph, n)?;
            graph
        }
        Front::Symbolic => {
            let classes = Arc::new(LuClasses { graph, n });
            symbolic::run(rt, Arc::clone(&classes))?;
            match Arc::try_unwrap(classes) {
                Ok(c) => c.graph,
                Err(_) => unreachable!("every task that held the classes has finished"),
            }
        }
    };
    let mut ipiv = Vec::with_capacity(n);
    for (k, h) in graph.piv.into_iter().enumerate() {
        ipiv.extend(ipiv_global(k, nb, &rt.unregister(h)?));
    }
    let tiles = graph
        .tiles
        .into_iter()
        .map(|h| rt.unregister(h))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LuFactors {
        factors: TileMatrix::from_tiles(n, n, nb, tiles),
        ipiv,
    })
}

/// The symbolic description over a zero matrix (for inspection only).
fn empty_classes(n: usize, nb: usize) -> LuClasses {
    let rt = Runtime::with_workers(1).expect("one worker starts");
    let a = TileMatrix::zeros(n, n, nb);
    let t = a.mt();
    let graph = LuGraph {
        t,
        nb,
        tiles: a.into_tiles().into_iter().map(|x| rt.register(x)).collect(),
        piv: (0..t).map(|_| rt.register(Vec::new())).collect(),
        cl: Codelets::new(),
        progress: None,
        column_owners: Vec::new(),
    };
    LuClasses { graph, n }
}

/// The symbolic LU DAG of an `n × n` matrix with tile size `nb`, unrolled to
/// DOT (for small sizes; checks the dependency functions are consistent).
pub fn symbolic_dot(n: usize, nb: usize) -> Result<String, Error> {
    symbolic::to_dot(&empty_classes(n, nb))
}

/// The number of tasks in the unrolled symbolic LU DAG, after checking that
/// every declared predecessor count equals the number of incoming edges.
pub fn symbolic_task_count(n: usize, nb: usize) -> Result<usize, Error> {
    Ok(symbolic::unroll(&empty_classes(n, nb))?.len())
}
