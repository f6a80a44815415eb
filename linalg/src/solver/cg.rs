//! Conjugate gradient over an [`Operator`], optionally with the Jacobi preconditioner,
//! stopping like PETSc's KSP on the unpreconditioned residual (`||r|| <= rtol·||b||`, or
//! the iteration limit). The standard algorithm is here; the pipelined one
//! ([`CgVariant::Pipelined`]) in [`super::pipelined`].
//!
//! # One iteration, as tasks
//!
//! Three phases of tasks over the row blocks, and two sums as tasks
//! ([`Operator::submit_sum`]), each going after the one before (see [`super::vector`]):
//!
//! 1. `q = A·p`, fused with the partials of `p·q`; its sum computes `α = r·z / p·q`;
//! 2. `x += α·p`, `r −= α·q` (Jacobi: `z = D⁻¹·r`), fused with `r·z` and `r·r`; its sum
//!    computes `β` and makes the convergence test;
//! 3. `p = z + β·p` (`z` is `r` without a preconditioner), then a join, which the next
//!    multiply goes after (it reads all of `p`).
//!
//! The scalars go from a sum to the next phase's tasks through shared cells
//! (`super::progress`), not through the submitting thread, which only submits: it submits
//! iteration `k`, then waits for the convergence test of iteration `k − 1`, so the workers
//! always have the next iteration queued and the one wait per iteration hides behind a whole
//! iteration of work. When a test stops the run (converged, the iteration limit, or a
//! breakdown), the iteration already submitted behind it does nothing (every task checks
//! the stop flag), so `x`, the history and the iteration count are those of a run that
//! waited for every result: the arithmetic is the same operations in the same order.

use std::ops::Range;
use std::str::FromStr;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use tessera_engine::{BodyError, Error, Runtime, TaskHandle};
use tessera_tasks::kernels::blas1::{precondition, update_p, update_xr, update_xrz};

use super::phases::{
    multiply_dot, submit_blocks, submit_join, HaloClock, MultiplyDot, CG_INIT, CG_UPDATE_P,
    CG_UPDATE_XR, JACOBI,
};
use super::progress::{Part, Progress, Scalar, State};
use super::vector::{Partials, SharedVec};
use super::{check_square, Operator, StopReason};
use crate::spmv::IterStats;

/// The preconditioner of [`conjugate_gradient`] (`--pc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Preconditioner {
    /// None (PETSc's `-pc_type none`).
    #[default]
    None,
    /// The inverted diagonal (PETSc's `-pc_type jacobi`).
    Jacobi,
}

impl FromStr for Preconditioner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Preconditioner::None),
            "jacobi" => Ok(Preconditioner::Jacobi),
            other => Err(format!("unknown --pc '{other}' (known: none, jacobi)")),
        }
    }
}

impl std::fmt::Display for Preconditioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Preconditioner::None => "none",
            Preconditioner::Jacobi => "jacobi",
        })
    }
}

/// Which CG algorithm [`conjugate_gradient`] runs (`--cg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CgVariant {
    /// Hestenes–Stiefel: two sums (all-reduces across ranks) per iteration, each waited for
    /// by the next phase (PETSc's `KSPCG`).
    #[default]
    Standard,
    /// Ghysels–Vanroose pipelined CG: one sum per iteration, overlapping the SpMV, for
    /// extra recurrences that cost stability (see [`super::pipelined`]; PETSc's `KSPPIPECG`).
    Pipelined,
}

impl FromStr for CgVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(CgVariant::Standard),
            "pipelined" => Ok(CgVariant::Pipelined),
            other => Err(format!(
                "unknown --cg '{other}' (known: standard, pipelined)"
            )),
        }
    }
}

impl std::fmt::Display for CgVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgVariant::Standard => "standard",
            CgVariant::Pipelined => "pipelined",
        })
    }
}

/// Why CG broke down at iteration `i`, when the curvature `p·A·p` (`pq`) of its direction
/// is not positive; both algorithms ([`CgVariant`]) test it.
pub(super) fn curvature_breakdown(i: usize, pq: f64) -> Option<String> {
    (pq <= 0.0 || !pq.is_finite()).then(|| {
        format!(
            "CG broke down at iteration {i}: p·Ap = {pq} ({})",
            if pq.is_finite() {
                "is the matrix SPD?"
            } else {
                "the matrix holds NaN or infinity, or the iteration overflowed"
            }
        )
    })
}

/// Why CG broke down at iteration `i`, when `r·z` (`rz`) is negative or not finite; both
/// algorithms test it.
pub(super) fn rz_breakdown(i: usize, rz: f64) -> Option<String> {
    (rz < 0.0 || !rz.is_finite()).then(|| {
        format!(
            "CG broke down at iteration {i}: r·z = {rz} (the preconditioner is not positive definite, or the iteration overflowed)"
        )
    })
}

/// How [`conjugate_gradient`] runs and stops.
#[derive(Clone, Copy, Debug)]
pub struct CgOptions {
    /// Stop when `||r|| <= rtol·||b||` (0: never, run `max_iters`).
    pub rtol: f64,
    /// Stop after this many iterations.
    pub max_iters: usize,
    /// The preconditioner.
    pub pc: Preconditioner,
    /// The algorithm.
    pub variant: CgVariant,
}

/// The smallest relative tolerance CG takes: ten times the machine epsilon. Below it no
/// double-precision residual can be trusted to tell converged from not: the recursive
/// residual keeps shrinking past what the arithmetic holds while the true residual
/// `||b − A·x||` stalls, so a run would report "converged" on a residual it never reached.
pub const RTOL_MIN: f64 = 10.0 * f64::EPSILON;

/// `Err` unless `rtol` is a finite number of at least [`RTOL_MIN`]; the drivers check
/// `--tol` with this before anything runs.
pub fn check_rtol(rtol: f64) -> Result<(), String> {
    if !(rtol.is_finite() && rtol > 0.0) {
        Err(format!("--tol {rtol}: must be a positive number"))
    } else if rtol < RTOL_MIN {
        Err(format!(
            "--tol {rtol:e}: below {RTOL_MIN:.1e} (10 x the machine epsilon), which no residual of a double-precision solve reaches"
        ))
    } else {
        Ok(())
    }
}

/// Conjugate gradient on an SPD matrix from `x = 0` (see the module doc). `b`: this
/// process's rows of the right-hand side; returns this process's rows of `x`. History:
/// `||r||/||b||` per iteration; `stop` says why it stopped.
///
/// A breakdown (`p·A·p <= 0`, a preconditioned `r·z < 0`, NaN) is [`Error::Breakdown`],
/// in one process and across ranks alike.
pub fn conjugate_gradient<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    b: &[f64],
    opts: &CgOptions,
) -> Result<(Vec<f64>, IterStats), Error> {
    let (n_rows, n_cols) = op.shape();
    check_square("cg", n_rows, n_cols).map_err(Error::Config)?;
    let n = op.local_rows();
    if b.len() != n {
        return Err(Error::Config(format!(
            "CG: b has {} entries for {n} rows",
            b.len()
        )));
    }
    let t0 = Instant::now();
    let dots = Partials::new(op.row_blocks().len());
    let dinv = match opts.pc {
        Preconditioner::None => None,
        Preconditioner::Jacobi => Some(inverse_diagonal(rt, op, &dots)?),
    };
    if opts.variant == CgVariant::Pipelined {
        return super::pipelined::run(rt, op, b, opts, dinv, t0);
    }
    let cg = Arc::new(Standard {
        x: SharedVec::zeros(n),
        r: SharedVec::new(b.to_vec()),
        p: SharedVec::zeros(n),
        q: SharedVec::zeros(n),
        z: dinv.as_ref().map(|_| SharedVec::zeros(n)),
        dinv,
        dots,
        progress: Progress::new(t0),
        scalars: Scalars::default(),
        rtol: opts.rtol,
        max_iters: opts.max_iters,
    });
    // Convergence tests are numbered: the first residual's 0, iteration `k`'s `k + 1`.
    let mut last_test = cg.submit_init(rt, op)?;
    let mut after = last_test.clone();
    for k in 0..opts.max_iters {
        let (test, end) = cg.submit_iteration(rt, op, k, &after)?;
        op.wait_for(rt, &last_test)?;
        if cg.progress.stopped_by(k) {
            break;
        }
        (last_test, after) = (test, end);
    }
    op.wait(rt)?;
    // Every task has ended: the run's state goes, `x` and the progress stay.
    let (x, progress) = (Arc::clone(&cg.x), Arc::clone(&cg.progress));
    drop(cg);
    finish(&progress, opts, t0).map(|stats| (SharedVec::into_vec(x), stats))
}

/// The outcome of a run whose tasks have all ended: its stats, or its breakdown.
pub(crate) fn finish(
    progress: &Progress,
    opts: &CgOptions,
    t0: Instant,
) -> Result<IterStats, Error> {
    let mut st = progress.lock();
    let stop = st.stop.clone().unwrap_or(Ok(StopReason::MaxIterations));
    let mut stats = std::mem::take(&mut st.stats);
    stats.stop = Some(stop.map_err(Error::Breakdown)?);
    debug_assert!(stats.iterations <= opts.max_iters);
    stats.total_seconds = t0.elapsed().as_secs_f64();
    Ok(stats)
}

/// `α` and `β` of the current iteration, and `r·z` of the last.
#[derive(Default)]
struct Scalars {
    alpha: Scalar,
    beta: Scalar,
    rz: Scalar,
    bnorm: Scalar,
}

/// A standard CG run's vectors and shared state (see the module doc). The run holds it in
/// one `Arc`, and every closure its tasks run (a phase's block body, a sum's two halves, a
/// join) captures one clone of that `Arc` and calls the method of its phase below.
struct Standard {
    x: Arc<SharedVec>,
    r: Arc<SharedVec>,
    p: Arc<SharedVec>,
    q: Arc<SharedVec>,
    z: Option<Arc<SharedVec>>,
    dinv: Option<Arc<SharedVec>>,
    dots: Arc<Partials>,
    progress: Arc<Progress>,
    scalars: Scalars,
    rtol: f64,
    max_iters: usize,
}

impl Standard {
    /// This process's two partial sums of the last phase, as a sum's part.
    fn dot_sums(&self) -> Vec<f64> {
        let (a, b) = self.dots.sums();
        vec![a, b]
    }

    /// The run's state for a sum's result, the time since the last mark accounted to the
    /// reduction; `None` once the run stopped (the result is then not used).
    fn lock_for_reduce(&self) -> Option<MutexGuard<'_, State>> {
        if self.progress.is_stopped() {
            return None;
        }
        let mut st = self.progress.lock();
        st.account(Part::Reduce);
        Some(st)
    }

    /// `r = b` (set already); `z = D⁻¹·r`; `p = z`, and the sum of `r·z`, `r·r`, which makes
    /// the first convergence test. Returns the sum's task.
    fn submit_init<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
    ) -> Result<TaskHandle, Error> {
        let cg = Arc::clone(self);
        let tasks = submit_blocks(
            rt,
            op,
            &CG_INIT,
            &[],
            Arc::new(move |blk, rows| cg.init_block(blk, rows)),
        )?;
        let (cg, then) = (Arc::clone(self), Arc::clone(self));
        op.submit_sum(
            rt,
            &tasks,
            Box::new(move || cg.init_part()),
            Box::new(move |s| then.first_test(s)),
        )
    }

    /// The set-up's block `blk`: `z = D⁻¹·r` (with Jacobi), `p = z` (else `p = r`), and its
    /// partials of `r·z`, `r·r`.
    fn init_block(&self, blk: usize, rows: Range<usize>) -> Result<(), BodyError> {
        // SAFETY (vector discipline): this phase reads `r`, `dinv` and writes its
        // own rows of `z` and `p`, which no other task of the phase touches.
        let (rb, pb) = unsafe { (self.r.slice(rows.clone()), self.p.slice_mut(rows.clone())) };
        let d = match (&self.z, &self.dinv) {
            (Some(z), Some(dinv)) => {
                let (zb, db) = unsafe { (z.slice_mut(rows.clone()), dinv.slice(rows.clone())) };
                let d = precondition(db, rb, zb);
                pb.copy_from_slice(zb);
                d
            }
            _ => {
                pb.copy_from_slice(rb);
                let rr = rb.iter().map(|v| v * v).sum::<f64>();
                (rr, rr)
            }
        };
        self.dots.set(blk, d);
        Ok(())
    }

    /// This process's part of the set-up's sum: `r·z`, `r·r`.
    fn init_part(&self) -> Vec<f64> {
        self.progress.lock().account(Part::Vector);
        self.dot_sums()
    }

    /// The first convergence test (number 0), from the sums `s = [r·z, r·r]` of `r = b`:
    /// sets `r·z` and `||b||`.
    fn first_test(&self, s: &[f64]) -> Result<(), BodyError> {
        let (pr, sc) = (&self.progress, &self.scalars);
        let mut st = pr.lock();
        st.account(Part::Reduce);
        let (rz, rr) = (s[0], s[1]);
        let bnorm = rr.sqrt().max(f64::MIN_POSITIVE);
        sc.rz.set(rz);
        sc.bnorm.set(bnorm);
        if rr.sqrt() <= self.rtol * bnorm {
            pr.stop(&mut st, Ok(StopReason::Converged), 0);
        } else if self.max_iters == 0 {
            pr.stop(&mut st, Ok(StopReason::MaxIterations), 0);
        }
        Ok(())
    }

    /// Submit iteration `k`, its multiply after `after`: one phase after the other (see the
    /// module doc). Returns the task of its convergence test (the second sum) and its end
    /// (the join the next multiply goes after).
    fn submit_iteration<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        k: usize,
        after: &TaskHandle,
    ) -> Result<(TaskHandle, TaskHandle), Error> {
        let alpha = self.submit_multiply(rt, op, k, after)?;
        let test = self.submit_update_xr(rt, op, k, &alpha)?;
        let end = self.submit_update_p(rt, op, &test)?;
        Ok((test, end))
    }

    /// Phase 1 of iteration `k`: `q = A·p` fused with the partials of `p·q`, after `after`;
    /// its sum computes `α`. Returns the sum's task.
    fn submit_multiply<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        k: usize,
        after: &TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let tasks = multiply_dot(
            rt,
            op,
            &MultiplyDot {
                x: &self.p,
                y: &self.q,
                dots: &self.dots,
                after: Some(after),
                stop: Some(&self.progress.stopped),
            },
        )?;
        let halo = op.halo_clock();
        let (cg, then) = (Arc::clone(self), Arc::clone(self));
        op.submit_sum(
            rt,
            &tasks,
            Box::new(move || cg.multiply_part(halo)),
            Box::new(move |s| then.set_alpha(k, s)),
        )
    }

    /// This process's part of `p·q` (and `q·q`, unused); accounts the multiply and its halo
    /// wait unless the run stopped.
    fn multiply_part(&self, halo: Option<Arc<HaloClock>>) -> Vec<f64> {
        let pr = &self.progress;
        if !pr.is_stopped() {
            let mut st = pr.lock();
            st.account(Part::Spmv);
            st.halo_wait(halo.map_or(0.0, |c| c.take()));
        }
        self.dot_sums()
    }

    /// `α = r·z / p·q` of iteration `k` from the sums `s = [p·q, q·q]`, or a breakdown.
    fn set_alpha(&self, k: usize, s: &[f64]) -> Result<(), BodyError> {
        let (pr, sc) = (&self.progress, &self.scalars);
        let Some(mut st) = self.lock_for_reduce() else {
            return Ok(());
        };
        let pq = s[0];
        if let Some(why) = curvature_breakdown(st.stats.iterations, pq) {
            pr.stop(&mut st, Err(why), k + 1);
        } else {
            sc.alpha.set(sc.rz.get() / pq);
        }
        Ok(())
    }

    /// Phase 2 of iteration `k`, after `alpha` (the task that set `α`): `x += α·p`,
    /// `r −= α·q` (Jacobi: `z = D⁻¹·r`) fused with the partials of `r·z` and `r·r`; its sum
    /// computes `β` and makes the convergence test. Returns the sum's task.
    fn submit_update_xr<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        k: usize,
        alpha: &TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let cg = Arc::clone(self);
        let tasks = submit_blocks(
            rt,
            op,
            &CG_UPDATE_XR,
            std::slice::from_ref(alpha),
            Arc::new(move |blk, rows| cg.update_xr_block(blk, rows)),
        )?;
        let (cg, then) = (Arc::clone(self), Arc::clone(self));
        op.submit_sum(
            rt,
            &tasks,
            Box::new(move || cg.update_xr_part()),
            Box::new(move |s| then.test_convergence(k, s)),
        )
    }

    /// Phase 2's block `blk` (see [`Standard::submit_update_xr`]); nothing once the run
    /// stopped.
    fn update_xr_block(&self, blk: usize, rows: Range<usize>) -> Result<(), BodyError> {
        if self.progress.is_stopped() {
            return Ok(());
        }
        let alpha = self.scalars.alpha.get();
        // SAFETY (vector discipline): this phase reads `p`, `q`, `dinv` and
        // writes its own rows of `x`, `r`, `z`, which no other task touches.
        let (xb, rb, pb, qb) = unsafe {
            (
                self.x.slice_mut(rows.clone()),
                self.r.slice_mut(rows.clone()),
                self.p.slice(rows.clone()),
                self.q.slice(rows.clone()),
            )
        };
        let d = match (&self.z, &self.dinv) {
            (Some(z), Some(dinv)) => {
                let (zb, db) = unsafe { (z.slice_mut(rows.clone()), dinv.slice(rows.clone())) };
                update_xrz(alpha, pb, qb, db, xb, rb, zb)
            }
            _ => {
                let rr = update_xr(alpha, pb, qb, xb, rb);
                (rr, rr)
            }
        };
        self.dots.set(blk, d);
        Ok(())
    }

    /// This process's part of phase 2's sum: `r·z`, `r·r`.
    fn update_xr_part(&self) -> Vec<f64> {
        let pr = &self.progress;
        if !pr.is_stopped() {
            pr.lock().account(Part::Vector);
        }
        self.dot_sums()
    }

    /// Convergence test `k + 1`, from the sums `s = [r·z, r·r]` of iteration `k`: records
    /// the iteration, sets `β` and `r·z`, and stops the run when converged, at the
    /// iteration limit, or on a breakdown.
    fn test_convergence(&self, k: usize, s: &[f64]) -> Result<(), BodyError> {
        let (pr, sc) = (&self.progress, &self.scalars);
        let Some(mut st) = self.lock_for_reduce() else {
            return Ok(());
        };
        let (rz_new, rr_new) = (s[0], s[1]);
        if let Some(why) = rz_breakdown(st.stats.iterations, rz_new) {
            pr.stop(&mut st, Err(why), k + 1);
            return Ok(());
        }
        let bnorm = sc.bnorm.get();
        st.stats.iterations += 1;
        st.stats.history.push(rr_new.sqrt() / bnorm);
        sc.beta.set(rz_new / sc.rz.get());
        sc.rz.set(rz_new);
        if rr_new.sqrt() <= self.rtol * bnorm {
            pr.stop(&mut st, Ok(StopReason::Converged), k + 1);
        } else if k + 1 == self.max_iters {
            // `p` is not updated again.
            pr.stop(&mut st, Ok(StopReason::MaxIterations), k + 1);
        }
        Ok(())
    }

    /// Phase 3, after `test` (the task that set `β`): `p = z + β·p` (`z` is `r` without a
    /// preconditioner), then the join the next multiply goes after. Returns the join.
    fn submit_update_p<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        test: &TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let cg = Arc::clone(self);
        let tasks = submit_blocks(
            rt,
            op,
            &CG_UPDATE_P,
            std::slice::from_ref(test),
            Arc::new(move |_, rows| cg.update_p_block(rows)),
        )?;
        let cg = Arc::clone(self);
        submit_join(rt, &tasks, move || cg.end_iteration())
    }

    /// Phase 3's block of rows `rows`; nothing once the run stopped.
    fn update_p_block(&self, rows: Range<usize>) -> Result<(), BodyError> {
        if self.progress.is_stopped() {
            return Ok(());
        }
        let src = self.z.as_ref().unwrap_or(&self.r);
        // SAFETY (vector discipline): this phase reads `z` (or `r`) and writes
        // its own rows of `p`, which no other task touches.
        let (zb, pb) = unsafe { (src.slice(rows.clone()), self.p.slice_mut(rows)) };
        update_p(self.scalars.beta.get(), zb, pb);
        Ok(())
    }

    /// The iteration's end: accounts phase 3 unless the run stopped.
    fn end_iteration(&self) {
        let pr = &self.progress;
        if !pr.is_stopped() {
            pr.lock().account(Part::Vector);
        }
    }
}

/// `D⁻¹` of this process's rows, as tasks; a zero, negative or non-finite diagonal entry is
/// a breakdown (an SPD matrix has none).
fn inverse_diagonal<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    dots: &Arc<Partials>,
) -> Result<Arc<SharedVec>, Error> {
    let d = SharedVec::zeros(op.local_rows());
    op.submit_diagonal(rt, &d)?;
    op.wait(rt)?;
    {
        let (d, dots) = (Arc::clone(&d), Arc::clone(dots));
        submit_blocks(
            rt,
            op,
            &JACOBI,
            &[],
            Arc::new(move |blk, rows| {
                // SAFETY (vector discipline): each task writes its own rows of `d` only.
                let db = unsafe { d.slice_mut(rows) };
                let mut bad = 0.0;
                for v in db.iter_mut() {
                    if !(*v > 0.0 && v.is_finite()) {
                        bad += 1.0;
                    }
                    *v = 1.0 / *v;
                }
                dots.set(blk, (bad, 0.0));
                Ok(())
            }),
        )?;
    }
    op.wait(rt)?;
    let mut v = [dots.sums().0];
    op.sum(&mut v)?;
    if v[0] > 0.0 {
        // The error path may scan: find this process's first bad row.
        // SAFETY: every task has finished (waited above).
        let here = unsafe { d.all() }
            .iter()
            .position(|v| !(*v > 0.0 && v.is_finite()))
            .map_or_else(String::new, |i| {
                format!("; on this process, the first at row {}", op.first_row() + i)
            });
        return Err(Error::Breakdown(format!(
            "the Jacobi preconditioner needs a positive diagonal (CG needs an SPD matrix): {} row(s) have a zero, negative or non-finite diagonal entry{here}",
            v[0]
        )));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    // Proves the checks both drivers make before anything runs.
    use super::*;

    #[test]
    fn rtol_and_shape_checks() {
        for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
            let e = check_rtol(bad).unwrap_err();
            assert!(e.contains("must be a positive number"), "{e}");
        }
        assert!(check_rtol(1e-8).is_ok());
        // A tolerance no double-precision residual reaches.
        for unreachable in [1e-30, 1e-16, 2e-15] {
            let e = check_rtol(unreachable).unwrap_err();
            assert!(e.contains("10 x the machine epsilon"), "{e}");
        }
        assert!(check_rtol(RTOL_MIN).is_ok());
        assert!(check_square("cg", 5, 5).is_ok());
        let e = check_square("power", 3, 4).unwrap_err();
        assert!(
            e.contains("--solver power needs a square matrix, got 3 x 4"),
            "{e}"
        );
        assert_eq!("jacobi".parse(), Ok(Preconditioner::Jacobi));
        assert!("ilu"
            .parse::<Preconditioner>()
            .unwrap_err()
            .contains("unknown --pc"));
    }
}
