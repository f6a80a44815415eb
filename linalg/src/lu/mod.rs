//! Tiled LU with partial pivoting as a task graph on one process (the HPL
//! driver), in two front-ends over the same tasks: sequential task flow
//! ([`Front::Stf`]) and a symbolic, lazily unfolded DAG ([`Front::Symbolic`]).
//!
//! Beside it in this folder: the tasks it shares with the distributed LU
//! (`tasks.rs`), the placement of tile columns on devices ([`Split`],
//! `split.rs`), the solve from the factors ([`solve_from_factors`]), the
//! sequential reference the DAG must reproduce bit for bit ([`seq`]), and the
//! LU across MPI ranks ([`dist`]).
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

mod blocks;
pub mod dist;
pub mod resident;
pub mod seq;
mod solve;
mod split;
mod tasks;

use std::sync::Arc;

use tessera_engine::symbolic::{self, TaskClasses};
use tessera_engine::team::TeamSize;
use tessera_engine::{DataHandle, Error, ReadWrite, Runtime, TaskBuilder};
use tessera_tasks::tile::Tile;

pub use self::blocks::Update;

use self::seq::ipiv_global;
pub use self::solve::solve_from_factors;
use self::split::ColumnPlacement;
pub use self::split::Split;
use self::tasks::{column_priority, gemm_task, panel_priority, panel_task, swap_task, trsm_task};
use crate::tiled::TileMatrix;

/// Which task-graph front-end builds the LU DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// Every task submitted from this thread, dependencies inferred from data.
    Stf,
    /// Task classes with dependency functions, unfolded as tasks finish.
    Symbolic,
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

/// How an LU run is cut into tasks: the front-end, where tile columns go
/// on devices, the panel's team and the shape of the trailing updates. What
/// [`lu_factor`] and [`lu_simulate`] take; [`LuOptions::new`] and struct
/// update syntax set it (`LuOptions { split, ..LuOptions::new(front) }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LuOptions {
    /// Task-graph front-end (the device-sized updates are submitted as
    /// sequential task flow whatever this says).
    pub front: Front,
    /// Placement of tile columns on devices.
    pub split: Split,
    /// The panel as a team task of this size (`None`: one worker).
    pub panel_team: Option<TeamSize>,
    /// How trailing updates are cut ([`Update::auto`] picks one for the
    /// runtime's devices).
    pub update: Update,
    /// With merged updates, send each tile home as soon as it is final
    /// (`DataHandle::wont_write`) instead of all of them after the last task.
    /// On by default; off gives the old behaviour, for comparisons.
    pub home_early: bool,
}

impl LuOptions {
    /// Tile tasks, a one-worker panel, columns placed automatically.
    pub fn new(front: Front) -> LuOptions {
        LuOptions {
            front,
            split: Split::Auto,
            panel_team: None,
            update: Update::Tiles,
            home_early: true,
        }
    }
}

/// The LU's data registered with a runtime, and how to make each task.
struct LuGraph {
    n: usize,
    t: usize,
    nb: usize,
    tiles: Vec<DataHandle<Tile>>,
    piv: Vec<DataHandle<Vec<usize>>>,
    /// Where each column's update tasks run (with devices).
    placement: Arc<ColumnPlacement>,
    /// The panel's team, if it is a team task.
    panel_team: Option<TeamSize>,
}

impl LuGraph {
    fn tile(&self, i: usize, j: usize) -> &DataHandle<Tile> {
        &self.tiles[i + j * self.t]
    }

    /// Tiles `k..T` of tile column `j`, read and written.
    fn column(&self, k: usize, j: usize) -> Vec<ReadWrite<Tile>> {
        (k..self.t).map(|i| self.tile(i, j).rw()).collect()
    }

    fn priority(&self, task: LuTask) -> i32 {
        match task {
            LuTask::Panel(k) => panel_priority(self.t, k),
            LuTask::Swap(_, j) | LuTask::Trsm(_, j) | LuTask::Gemm(_, _, j) => {
                column_priority(self.t, j)
            }
        }
    }

    /// The task for `key`: its codelet, data, arguments, priority and, with
    /// column owners, its placement (panels stay where `dmda` puts them).
    fn task(&self, key: LuTask) -> TaskBuilder {
        let task = self.bare_task(key);
        let (k, column) = match key {
            LuTask::Panel(_) => return task,
            LuTask::Swap(k, j) | LuTask::Trsm(k, j) | LuTask::Gemm(k, _, j) => (k, j),
        };
        match self.placement.node(k, column) {
            Some(node) => task.on_node(node),
            None => task,
        }
    }

    /// The task for `key` without a placement.
    fn bare_task(&self, key: LuTask) -> TaskBuilder {
        let prio = self.priority(key);
        let (n, nb) = (self.n, self.nb);
        match key {
            LuTask::Panel(k) => {
                let task = panel_task(&self.piv[k], self.column(k, k), k, n, nb, prio);
                match self.panel_team {
                    Some(size) => task.team(size),
                    None => task,
                }
            }
            LuTask::Swap(k, j) => swap_task(&self.piv[k], self.column(k, j), k, j, n, nb, prio),
            LuTask::Trsm(k, j) => trsm_task(self.tile(k, k), self.tile(k, j), k, j, n, nb, prio),
            LuTask::Gemm(k, i, j) => gemm_task(
                [self.tile(i, k), self.tile(k, j), self.tile(i, j)],
                (k, i, j),
                n,
                nb,
                prio,
            ),
        }
    }
}

/// The symbolic description of the LU DAG (see the module doc for the tasks).
///
/// Dependencies, for `T` tiles per side:
/// - `PANEL(0)` is the root; `PANEL(k>0)` ← `GEMM(k-1, i, k)` for `i ≥ k`;
/// - `SWAP(k, j>k)` ← `PANEL(k)` and `GEMM(k-1, i, j)` for `i ≥ k`;
/// - `TRSM(k, j)` ← `SWAP(k, j)`; `GEMM(k, i, j)` ← `TRSM(k, j)`.
struct LuClasses {
    graph: LuGraph,
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
        self.graph.task(*key)
    }
}

/// Submit the LU DAG in sequential-task-flow order: for each step, the panel,
/// then per column to its right the swap, the trsm and the gemms.
fn submit_stf(rt: &Runtime, g: &LuGraph) -> Result<(), Error> {
    let t = g.t;
    for k in 0..t {
        rt.submit(g.task(LuTask::Panel(k)))?;
        for j in k + 1..t {
            rt.submit(g.task(LuTask::Swap(k, j)))?;
            rt.submit(g.task(LuTask::Trsm(k, j)))?;
            for i in k + 1..t {
                rt.submit(g.task(LuTask::Gemm(k, i, j)))?;
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
/// ([`solve_from_factors`] applies them to the right-hand side step by step).
/// [`to_dgetrf_layout`](seq::to_dgetrf_layout) applies them to `L`, giving
/// `dgetrf`'s `P·A = L·U`.
pub struct LuFactors {
    /// `L` (unit, strictly below the diagonal) and `U` (on and above it).
    pub factors: TileMatrix,
    /// Global pivots, as `dgetrf`'s `IPIV` minus one.
    pub ipiv: Vec<usize>,
    /// The device share [`Split::Adaptive`] chose at each step, as (step,
    /// share) in step order; empty with any other split.
    pub device_shares: Vec<(usize, f64)>,
}

/// Runs the LU's tasks on `graph` with the front-end and update shape of
/// `opts`, the real and the simulated LU alike; returns the graph once every
/// task is done, its handles ready to unregister.
fn run_graph(rt: &Runtime, graph: LuGraph, opts: &LuOptions) -> Result<LuGraph, Error> {
    match (opts.front, opts.update) {
        (_, update @ (Update::Merged | Update::Streamed { .. })) => {
            blocks::submit(rt, &graph, update, opts.home_early)?;
            Ok(graph)
        }
        (Front::Stf, Update::Tiles) => {
            submit_stf(rt, &graph)?;
            Ok(graph)
        }
        (Front::Symbolic, Update::Tiles) => {
            let classes = Arc::new(LuClasses { graph });
            symbolic::run(rt, Arc::clone(&classes))?;
            match Arc::try_unwrap(classes) {
                Ok(c) => Ok(c.graph),
                Err(_) => unreachable!("every task that held the classes has finished"),
            }
        }
    }
}

/// Factor a square tiled matrix on `rt`, cut into tasks as `opts` says
/// (front-end, placement of tile columns on devices, panel team, update
/// shape; [`LuOptions::new`] gives tile tasks, a one-worker panel and an
/// automatic placement). The one LU entry point: [`lu_simulate`] runs the
/// same tasks over virtual tiles. `Runtime::flops_done` follows its progress.
///
/// # Errors
/// A matrix that is not square is refused. A singular matrix fails
/// `PANEL(k)` with a message naming the exact zero pivot's column; the tasks
/// depending on it are cancelled.
pub fn lu_factor(rt: &Runtime, a: TileMatrix, opts: &LuOptions) -> Result<LuFactors, Error> {
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
    let graph = LuGraph::new(rt, n, nb, tiles, opts);
    let graph = run_graph(rt, graph, opts)?;
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
        device_shares: graph.placement.history(),
    })
}

impl LuGraph {
    /// The graph over `tiles` (column-major), with each panel's pivots
    /// registered at their final length from the start (a replica's shape
    /// is fixed: device memory is allocated from it) and the tile columns
    /// placed as `split` says.
    fn new(
        rt: &Runtime,
        n: usize,
        nb: usize,
        tiles: Vec<DataHandle<Tile>>,
        opts: &LuOptions,
    ) -> LuGraph {
        let t = n.div_ceil(nb);
        if let Update::Streamed { .. } = opts.update {
            // The matrix lives on the host and streams through the devices.
            for h in &tiles {
                h.set_write_through(true);
            }
        }
        let piv = (0..t)
            .map(|k| {
                rt.register_replicable_named(
                    vec![0usize; (n - k * nb).min(nb)],
                    format!("piv({k})"),
                )
            })
            .collect();
        LuGraph {
            n,
            t,
            nb,
            tiles,
            piv,
            placement: Arc::new(ColumnPlacement::new(opts.split, rt, n, nb)),
            panel_team: opts.panel_team,
        }
    }
}

/// The symbolic description over a zero matrix (for inspection only).
fn empty_classes(n: usize, nb: usize) -> LuClasses {
    let rt = Runtime::with_workers(1).expect("one worker starts");
    let a = TileMatrix::zeros(n, n, nb);
    let t = a.mt();
    let graph = LuGraph {
        n,
        t,
        nb,
        tiles: a.into_tiles().into_iter().map(|x| rt.register(x)).collect(),
        piv: (0..t).map(|_| rt.register(Vec::new())).collect(),
        placement: Arc::new(ColumnPlacement::Free),
        panel_team: None,
    };
    LuClasses { graph }
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

/// The LU of an `n × n` matrix in tiles of `nb` on a simulated runtime
/// (`Config::simulated`): the same task graph as [`lu_factor`] with the same
/// `opts` (same front-ends, codelets, priorities, placement), over *virtual*
/// tiles — a size and a shape, no value — so any `n` fits. Returns the
/// device share per step, as [`LuFactors::device_shares`].
pub fn lu_simulate(
    rt: &Runtime,
    n: usize,
    nb: usize,
    opts: &LuOptions,
) -> Result<Vec<(usize, f64)>, Error> {
    if n == 0 || nb == 0 {
        return Err(Error::Config("LU needs n >= 1 and nb >= 1".into()));
    }
    let t = n.div_ceil(nb);
    let side = |i: usize| (n - i * nb).min(nb);
    let mut tiles = Vec::with_capacity(t * t);
    for j in 0..t {
        for i in 0..t {
            let (r, c) = (side(i), side(j));
            tiles.push(rt.register_virtual::<Tile>(
                (r * c * 8) as u64,
                [r, c, 0, 0],
                format!("A({i},{j})"),
            )?);
        }
    }
    let graph = LuGraph::new(rt, n, nb, tiles, opts);
    let placement = Arc::clone(&graph.placement);
    let graph = run_graph(rt, graph, opts)?;
    // As the real run does: the pivots and the factors come home, and the
    // tiles a device holds the only copy of cross its link in simulated time.
    for h in graph.piv {
        rt.unregister(h)?;
    }
    for h in graph.tiles {
        rt.unregister_virtual(h)?;
    }
    Ok(placement.history())
}
