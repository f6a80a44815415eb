//! The iterative solvers (conjugate gradient, power iteration), written once over an
//! [`Operator`]: the one-process matrix (`crate::spmv::SpmvMatrix`) and one rank's part of a
//! distributed one (`crate::spmv_dist::DistOperator`) both implement it, so the two drivers
//! run the same steps and differ only in how a multiply is done and whether a dot product
//! is all-reduced.
//!
//! Every `O(n)` step is a task per row block of the operator (the SpMV's blocks), fused with
//! the dot products that read the same entries: `q = A·p` with `p·q`; the `x`, `r` (and `z`)
//! updates with `r·r` (and `r·z`); `p = z + β·p`. CG's dot products are reductions as tasks
//! too ([`Operator::submit_sum`]: one task in one process, a non-blocking all-reduce across
//! ranks), whose scalars the next phase's tasks read; the submitting thread waits once per
//! iteration, for the convergence test, one iteration behind (see [`cg`]). Vectors are
//! shared between a phase's tasks as described in [`vector`].

pub mod cg;
pub(crate) mod phases;
pub mod pipelined;
pub mod power;
mod progress;
pub mod vector;

use std::ops::Range;
use std::sync::Arc;

use tessera_engine::dist::allreduce::{Part, Then};
use tessera_engine::{Error, Runtime, TaskHandle};

pub use cg::{conjugate_gradient, CgOptions, CgVariant, Preconditioner};
pub use phases::{HaloClock, MultiplyDot};
pub use power::power_iteration;
pub use vector::{Partials, SharedVec};

/// What the solvers need of a matrix (on this process: one rank's rows when distributed).
pub trait Operator {
    /// Rows and columns of the whole matrix.
    fn shape(&self) -> (usize, usize);

    /// This process's row blocks, numbered from its first row, in order and covering
    /// `0..local_rows()`.
    fn row_blocks(&self) -> &[Range<usize>];

    /// Rows of the vectors this process holds.
    fn local_rows(&self) -> usize {
        self.row_blocks().last().map_or(0, |r| r.end)
    }

    /// Submit, for every row block `b`: `y[b] = A_b · x` and `dots[b] = (x[b]·y[b], y[b]·y[b])`
    /// (`x`: this process's part, its other entries fetched as the operator needs), each
    /// block's task after `m.after`. Returns the block tasks; does not wait.
    fn submit_multiply_dot(
        &self,
        rt: &Runtime,
        m: &MultiplyDot<'_>,
    ) -> Result<Vec<TaskHandle>, Error>;

    /// Submit, for every row block `b`: `d[b]` = the diagonal of its rows. Does not wait.
    fn submit_diagonal(&self, rt: &Runtime, d: &Arc<SharedVec>) -> Result<(), Error>;

    /// Wait for every task submitted.
    fn wait(&self, rt: &Runtime) -> Result<(), Error>;

    /// Wait for `task` (and, if it failed, for every task, to report the failure).
    fn wait_for(&self, rt: &Runtime, task: &TaskHandle) -> Result<(), Error>;

    /// Sum `v` over every process, in an order that is the same on every process (nothing
    /// to do in one process). Blocks the calling thread.
    fn sum(&self, v: &mut [f64]) -> Result<(), Error>;

    /// Submit a sum as tasks: after every task of `after`, `part()` is this process's part,
    /// the sums over every process (in the same order on every one, as [`sum`](Self::sum))
    /// go to `then`, run by the task this returns. Nothing blocks a worker or the
    /// submitting thread. Every process must submit the same sums in the same order.
    fn submit_sum(
        &self,
        rt: &Runtime,
        after: &[TaskHandle],
        part: Part,
        then: Then,
    ) -> Result<TaskHandle, Error>;

    /// The clock of the halo waits of this operator's multiplies (none in one process).
    fn halo_clock(&self) -> Option<Arc<HaloClock>> {
        None
    }

    /// The global row of this process's local row 0.
    fn first_row(&self) -> usize {
        0
    }
}

/// Why a solver stopped (PETSc's `KSPConvergedReason`, the ones that apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `||r|| <= rtol·||b||` (PETSc's `CONVERGED_RTOL`).
    Converged,
    /// The iteration limit was reached (PETSc's `DIVERGED_ITS`; power iteration's only way).
    MaxIterations,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Converged => "converged: ||r||/||b|| <= rtol",
            StopReason::MaxIterations => "reached the iteration limit",
        })
    }
}

/// `Err` unless the matrix is square: CG and power iteration need `x` and `A·x` alike. The
/// one-process and the distributed drivers both refuse with this message.
pub fn check_square(solver: &str, n_rows: usize, n_cols: usize) -> Result<(), String> {
    if n_rows == n_cols {
        Ok(())
    } else {
        Err(format!(
            "--solver {solver} needs a square matrix, got {n_rows} x {n_cols} (--solver spmv multiplies any shape)"
        ))
    }
}
