//! The solvers' vector phases: one task per row block of the operator, each running a
//! `tessera_tasks::kernels::blas1` kernel on its rows of shared vectors (see
//! [`super::vector`] for the discipline), with one codelet per kind of phase so that traces
//! and performance models tell them apart; and the two block tasks that read the matrix (the
//! fused multiply and the diagonal), shared by the operators.

use std::ops::Range;
use std::sync::{Arc, LazyLock};

use tessera_engine::{BodyError, Codelet, DataHandle, Error, Read, Runtime};
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
/// The Jacobi preconditioner's inverted diagonal.
pub(crate) static JACOBI: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("jacobi-inverse"));
/// Power iteration's `x = y / λ` (and the start vector's `x·x`).
pub(crate) static POWER_SCALE: LazyLock<VectorCodelet> = LazyLock::new(|| codelet("power-scale"));

/// The body of a block's task: its index and rows.
pub(crate) type BlockFn = dyn Fn(usize, Range<usize>) -> Result<(), BodyError> + Send + Sync;

/// Submit `f(b, rows)` as a task of `cl` for every row block of `op` (does not wait).
pub(crate) fn submit_blocks<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    cl: &VectorCodelet,
    f: Arc<BlockFn>,
) -> Result<(), Error> {
    for (b, rows) in op.row_blocks().iter().enumerate() {
        let (f, rows) = (Arc::clone(&f), rows.clone());
        rt.task(cl, ())
            .args(b)
            .cpu_only()
            .cpu(move |()| f(b, rows))
            .submit()?;
    }
    Ok(())
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

/// Submit `y[rows] = A_b·[x; halo]` with `dots[b] = (x[rows]·y[rows], y[rows]·y[rows])`.
pub(crate) fn submit_multiply_dot(
    rt: &Runtime,
    blk: BlockRef<'_>,
    halo: Option<&DataHandle<Vec<f64>>>,
    x: &Arc<SharedVec>,
    y: &Arc<SharedVec>,
    dots: &Arc<Partials>,
) -> Result<(), Error> {
    let (x, y, dots, rows, b) = (
        Arc::clone(x),
        Arc::clone(y),
        Arc::clone(dots),
        blk.rows,
        blk.index,
    );
    let args = SpmvArgs {
        block: b,
        nnz: blk.nnz,
    };
    // SAFETY (vector discipline, for both bodies): the multiply phase reads `x` and writes
    // its own rows of `y` (a different vector), which no other task of the phase touches.
    let body = move |a: &Csr, halo: &[f64]| -> Result<(), BodyError> {
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
        let d = spmv_csr_dot(
            a.row_ptr(),
            a.col_idx(),
            a.vals(),
            xs,
            halo,
            &xs[rows.clone()],
            ys,
        );
        dots.set(b, d);
        Ok(())
    };
    match halo {
        None => rt
            .task(&SPMV_DOT, (blk.a.r(),))
            .args(args)
            .cpu_only()
            .cpu(move |(a,)| body(a, &[]))
            .submit()?,
        Some(h) => rt
            .task(&SPMV_HALO_DOT, (blk.a.r(), h.r()))
            .args(args)
            .cpu_only()
            .cpu(move |(a, halo)| body(a, halo))
            .submit()?,
    };
    Ok(())
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
