//! The solvers' vector phases: one task per row block of the operator, each running a
//! `tessera_tasks::kernels::blas1` kernel on its rows of shared vectors (see
//! [`super::vector`] for the discipline), with one codelet per kind of phase so that traces
//! and performance models tell them apart; and the two block tasks that read the matrix (the
//! fused multiply and the diagonal), shared by the operators.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use tessera_engine::dist::allreduce::{Part, Then};
use tessera_engine::{BodyError, Codelet, DataHandle, Error, Read, Runtime, TaskHandle};
use tessera_tasks::codelets::spmv::SpmvArgs;
use tessera_tasks::kernels::{spmv_csr_dot, spmv_flops};

use super::vector::{Partials, SharedVec};
use super::Operator;
use crate::sparse::csr::Csr;

/// A vector phase's codelet: no data handles (the vectors are shared, see
/// [`super::vector`]), the block's index as argument (for the label).
pub(crate) type VectorCodelet = Codelet<(), usize>;

fn codelet(name: &'static str) -> VectorCodelet {
    Codelet::<(), usize>::with_args(name).label(move |b| format!("{name}[{b}]"))
}

/// CG's first residual: `r = b`, `z = M⁻¹·r`, `p = z`, with `r·z`, `r·r`.
pub(crate) static CG_INIT: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("cg-init"));
/// CG's `x += α·p`, `r −= α·q` (`z = M⁻¹·r`), with `r·z`, `r·r`.
pub(crate) static CG_UPDATE_XR: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("cg-update-xr"));
/// CG's `p = z + β·p`.
pub(crate) static CG_UPDATE_P: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("cg-update-p"));
/// Pipelined CG's first dot products `r·u`, `w·u`, `r·r`.
pub(crate) static PIPECG_DOTS: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("pipecg-dots"));
/// Pipelined CG's `m = M⁻¹·w` (Jacobi only).
pub(crate) static PIPECG_PRECONDITION: LazyLock<VectorCodelet> =
    LazyLock::new(|| codelet("pipecg-precondition"));
/// Pipelined CG's fused update of every vector, with the next iteration's dot products.
pub(crate) static PIPECG_UPDATE: LazyLock<VectorCodelet> =
    LazyLock::new(|| codelet("pipecg-update"));
/// A phase's end: goes after every task of a phase, the next phase's tasks go after it.
static JOIN: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("join"));
/// The Jacobi preconditioner's inverted diagonal.
pub(crate) static JACOBI: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("jacobi-inverse"));
/// Power iteration's `x = y / λ` (and the start vector's `x·x`).
pub(crate) static POWER_SCALE: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("power-scale"));

/// The body of a block's task: its index and rows.
pub(crate) type BlockFn = dyn Fn(usize, Range<usize>) -> Result<(), BodyError> + Send + Sync;

/// Submit `f(b, rows)` as a task of `cl` for every row block of `op`, each after every
/// task of `after`; returns the tasks (does not wait).
pub(crate) fn submit_blocks<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    cl: &VectorCodelet,
    after: &[TaskHandle],
    f: Arc<BlockFn>,
) -> Result<Vec<TaskHandle>, Error> {
    let mut out = Vec::with_capacity(op.row_blocks().len());
    for (b, rows) in op.row_blocks().iter().enumerate() {
        let (f, rows) = (Arc::clone(&f), rows.clone());
        let mut t = rt.task(cl, ()).args(b).cpu_only();
        for h in after {
            t = t.after(h);
        }
        out.push(t.cpu(move |()| f(b, rows)).submit()?);
    }
    if out.is_empty() {
        // No rows here: the phase is one empty task, so what goes after it still goes after
        // `after`.
        out.push(submit_join(rt, after, || ())?);
    }
    Ok(out)
}

/// [`Operator::submit_multiply_dot`], its tasks never empty (see [`submit_blocks`]).
pub(crate) fn multiply_dot<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    m: &MultiplyDot<'_>,
) -> Result<Vec<TaskHandle>, Error> {
    let tasks = op.submit_multiply_dot(rt, m)?;
    if tasks.is_empty() {
        let after: Vec<TaskHandle> = m.after.into_iter().cloned().collect();
        return Ok(vec![submit_join(rt, &after, || ())?]);
    }
    Ok(tasks)
}

/// Submit a task that runs `f` after every task of `after` (a phase's end); returns it.
pub(crate) fn submit_join(
    rt: &Runtime,
    after: &[TaskHandle],
    f: impl FnOnce() + Send + 'static,
) -> Result<TaskHandle, Error> {
    let mut t = rt.task(&JOIN, ()).args(0).cpu_only();
    for h in after {
        t = t.after(h);
    }
    t.cpu(move |()| {
        f();
        Ok(())
    })
    .submit()
}

/// A sum in one process: the block partials, then what uses them.
static SUM: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("sum"));

/// [`Operator::submit_sum`] in one process: one task, after every task of `after`, that
/// runs `then(&part())`.
pub(crate) fn submit_local_sum(
    rt: &Runtime,
    after: &[TaskHandle],
    part: Part,
    then: Then,
) -> Result<TaskHandle, Error> {
    let mut t = rt.task(&SUM, ()).args(0).cpu_only();
    for h in after {
        t = t.after(h);
    }
    t.cpu(move |()| then(&part())).submit()
}

/// One fused multiply of a solver: `y = A·x` with the partials of `x·y`, `y·y` in `dots`.
pub struct MultiplyDot<'a> {
    /// The input (this process's part).
    pub x: &'a Arc<SharedVec>,
    /// The output (this process's rows).
    pub y: &'a Arc<SharedVec>,
    /// Per block: `(x_b·y_b, y_b·y_b)`.
    pub dots: &'a Arc<Partials>,
    /// The task every block task goes after (the previous phase's end), if any.
    pub after: Option<&'a TaskHandle>,
    /// When set (the solver stopped before this multiply ran), the block tasks do nothing.
    pub stop: Option<&'a Arc<AtomicBool>>,
}

/// How long a distributed multiply's boundary blocks waited for the halo: the time from
/// the end of its last interior block to the start of its first boundary block, when
/// positive (the workers had nothing of the multiply left to run meanwhile). The block
/// tasks record; a task that goes after every block of the multiply, and before any block
/// of the next, takes it ([`take`](Self::take)).
pub struct HaloClock {
    epoch: Instant,
    /// Nanoseconds since `epoch`, plus one (0: no interior block ran).
    interior_end: AtomicU64,
    /// Nanoseconds since `epoch`, plus one (`u64::MAX`: no boundary block ran).
    boundary_start: AtomicU64,
}

impl Default for HaloClock {
    fn default() -> HaloClock {
        HaloClock {
            epoch: Instant::now(),
            interior_end: AtomicU64::new(0),
            boundary_start: AtomicU64::new(u64::MAX),
        }
    }
}

impl HaloClock {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// An interior block ends.
    pub fn interior_done(&self) {
        // Relaxed: read by `take`, which goes after every block task (the dependency orders).
        self.interior_end.fetch_max(self.now(), Ordering::Relaxed);
    }

    /// A boundary block starts (the halo is here).
    pub fn boundary_started(&self) {
        self.boundary_start.fetch_min(self.now(), Ordering::Relaxed);
    }

    /// Seconds of the last multiply's halo wait (see the type's doc); resets.
    pub fn take(&self) -> f64 {
        let end = self.interior_end.swap(0, Ordering::Relaxed);
        let start = self.boundary_start.swap(u64::MAX, Ordering::Relaxed);
        if end == 0 || start == u64::MAX {
            return 0.0;
        }
        start.saturating_sub(end) as f64 * 1e-9
    }
}

/// `y_b = A_b·x` with `(x_b·y_b, y_b·y_b)`: the block, `x` shared (see [`super::vector`]).
static SPMV_DOT: LazyLock<Codelet<(Read<Csr>,), SpmvArgs>> = LazyLock::new(|| {
    Codelet::with_args("spmv-dot")
        .flops(|p: &SpmvArgs| spmv_flops(p.nnz))
        .label(|p| format!("spmv-dot[{}]", p.block))
});

/// As [`SPMV_DOT`], `x` in two parts: the shared own part and a rank's halo handle.
type HaloDotCodelet = Codelet<(Read<Csr>, Read<Vec<f64>>), SpmvArgs>;
static SPMV_HALO_DOT: LazyLock<HaloDotCodelet> = LazyLock::new(|| {
    Codelet::with_args("spmv-halo-dot")
        .flops(|p: &SpmvArgs| spmv_flops(p.nnz))
        .label(|p| format!("spmv-halo-dot[{}]", p.block))
});

/// The diagonal of a block's rows.
static DIAGONAL: LazyLock<Codelet<(Read<Csr>,), usize>> = LazyLock::new(|| {
    Codelet::<(Read<Csr>,), usize>::with_args("diagonal").label(|b| format!("diagonal[{b}]"))
});

/// What one block task of an operator works on.
pub(crate) struct BlockRef<'a> {
    /// The block's matrix (columns: `x`'s entries, then `halo`'s if given).
    pub a: &'a DataHandle<Csr>,
    /// Its index (labels) and nonzeros (flops).
    pub index: usize,
    pub nnz: usize,
    /// Its rows in the process's vectors.
    pub rows: Range<usize>,
}

/// Submit `y[rows] = A_b·[x; halo]` with `dots[b] = (x[rows]·y[rows], y[rows]·y[rows])`;
/// `clock`: record on it, as an interior block without `halo`, as a boundary one with.
pub(crate) fn submit_multiply_dot(
    rt: &Runtime,
    blk: BlockRef<'_>,
    halo: Option<&DataHandle<Vec<f64>>>,
    m: &MultiplyDot<'_>,
    clock: Option<&Arc<HaloClock>>,
) -> Result<TaskHandle, Error> {
    let (x, y, dots, rows, b) = (
        Arc::clone(m.x),
        Arc::clone(m.y),
        Arc::clone(m.dots),
        blk.rows,
        blk.index,
    );
    let (stop, clock, boundary) = (m.stop.cloned(), clock.cloned(), halo.is_some());
    let args = SpmvArgs {
        block: b,
        nnz: blk.nnz,
    };
    // SAFETY (vector discipline, for both bodies): the multiply phase reads `x` and writes
    // its own rows of `y` (a different vector), which no other task of the phase touches.
    let body = move |a: &Csr, halo: &[f64]| -> Result<(), BodyError> {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(());
        }
        if let (Some(c), true) = (&clock, boundary) {
            c.boundary_started();
        }
        let xs = unsafe { x.all() };
        if a.n_cols() != xs.len() + halo.len() || a.n_rows() != rows.len() {
            return Err(format!(
                "a {} x {} block for x of {} + {} entries and {} rows",
                a.n_rows(),
                a.n_cols(),
                xs.len(),
                halo.len(),
                rows.len()
            )
            .into());
        }
        let ys = unsafe { y.slice_mut(rows.clone()) };
        let d = if halo.is_empty() {
            // The lengths were just checked (`Csr::spmv_dot` picks the kernel for the
            // block's column indices).
            a.spmv_dot(xs, &xs[rows.clone()], ys)
        } else {
            spmv_csr_dot(
                a.row_ptr(),
                a.col_idx(),
                a.vals(),
                xs,
                halo,
                &xs[rows.clone()],
                ys,
            )
        };
        dots.set(b, d);
        if let (Some(c), false) = (&clock, boundary) {
            c.interior_done();
        }
        Ok(())
    };
    let t = match halo {
        None => {
            let mut t = rt
                .task(&SPMV_DOT, (blk.a.r(),))
                .args(args)
                .cpu_only()
                .cpu(move |(a,)| body(a, &[]));
            if let Some(h) = m.after {
                t = t.after(h);
            }
            t.submit()?
        }
        Some(h) => {
            let mut t = rt
                .task(&SPMV_HALO_DOT, (blk.a.r(), h.r()))
                .args(args)
                .cpu_only()
                .cpu(move |(a, halo)| body(a, halo));
            if let Some(h) = m.after {
                t = t.after(h);
            }
            t.submit()?
        }
    };
    Ok(t)
}

/// Submit `d[rows]` = the diagonal of the block's rows: row `i` of the block is row
/// `rows.start + i` of the process's vectors, and its diagonal entry sits in that column
/// (0 when the row does not store it).
pub(crate) fn submit_diagonal(
    rt: &Runtime,
    blk: BlockRef<'_>,
    d: &Arc<SharedVec>,
) -> Result<(), Error> {
    let (d, rows) = (Arc::clone(d), blk.rows);
    rt.task(&DIAGONAL, (blk.a.r(),))
        .args(blk.index)
        .cpu_only()
        .cpu(move |(a,)| {
            // SAFETY (vector discipline): each task writes its own rows of `d` only.
            let db = unsafe { d.slice_mut(rows.clone()) };
            for (i, di) in db.iter_mut().enumerate() {
                let (cols, vals) = a.row(i);
                let c = (rows.start + i) as u32;
                *di = cols
                    .iter()
                    .zip(vals)
                    .filter(|(&j, _)| j == c)
                    .map(|(_, &v)| v)
                    .sum();
            }
            Ok(())
        })
        .submit()?;
    Ok(())
}
