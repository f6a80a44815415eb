//! Pipelined conjugate gradient (Ghysels & Vanroose, "Hiding global synchronization latency
//! in the preconditioned Conjugate Gradient algorithm", Parallel Computing 40(7), 2014;
//! PETSc's `KSPPIPECG`): the same iterates as CG in exact arithmetic, with one sum
//! (all-reduce across ranks) per iteration instead of two, and that sum overlapping the
//! iteration's SpMV instead of waiting for it.
//!
//! # The algorithm
//!
//! Besides `x`, `r` it keeps `u = M⁻¹·r`, `w = A·u` and the recurrences `z ≈ A·q`,
//! `q ≈ M⁻¹·s`, `s ≈ A·p`, `p`. Iteration `i`:
//!
//! 1. one sum of `γ = r·u`, `δ = w·u` and `r·r` (the convergence test), submitted first;
//! 2. meanwhile `m = M⁻¹·w` and `n = A·m` (the SpMV and its halo exchange);
//! 3. once both are done: `β = γ/γ_old`, `α = γ/(δ − β·γ/α_old)` (`β = 0`, `α = γ/δ` at
//!    `i = 0`), then in one pass over each block: `z = n + β·z`, `q = m + β·q`,
//!    `s = w + β·s`, `p = u + β·p`, `x += α·p`, `r −= α·s`, `u −= α·q`, `w −= α·z`, fused
//!    with the next iteration's three dot products.
//!
//! # What it costs
//!
//! - Memory traffic: the update streams 7 vectors and writes 6 (11 and 9 with Jacobi), where
//!   the standard CG's two phases stream 6 and write 3: per iteration about 104 bytes a row
//!   against 72 (`tessera_tasks::kernels::blas1::pipecg_vector_bytes`).
//! - Stability: `r`, `w`, `s`, `z` (and `u`, `q`) are updated by recurrences, not computed
//!   from `A` and `x`, and rounding errors in them are not corrected: the recursively updated
//!   `r` drifts away from the true `b − A·x`, more than in the standard CG, so the attainable
//!   accuracy is lower (Cools, Yetkin, Agullo, Giraud & Vanroose, SIAM J. Matrix Anal. Appl.
//!   39(1), 2018, measure several orders of magnitude on hard problems) and the iteration
//!   count near the attainable accuracy can grow. The stopping test uses the recursive `r`,
//!   like PETSc's; the drivers print the true residual at the end, which shows the drift.
//!   For moderate `rtol` on well-conditioned problems the iterates agree with the standard
//!   CG's to rounding; the tests check it.
//! - When the sum stops the run, the SpMV beside it has already run: one multiply more than
//!   the iterations done.
//!
//! The submitting thread waits as in the standard CG ([`super::cg`]): once per iteration,
//! one iteration behind, with the stop flag making the iteration submitted ahead a no-op.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::{BodyError, Error, Runtime, TaskHandle};
use tessera_tasks::kernels::blas1::{pipecg_update, PipeBlock, PipePre};

use super::cg::{curvature_breakdown, finish, rz_breakdown, CgOptions};
use super::phases::{
    multiply_dot, submit_blocks, submit_join, HaloClock, MultiplyDot, CG_INIT, PIPECG_DOTS,
    PIPECG_PRECONDITION, PIPECG_UPDATE,
};
use super::progress::{Part, Progress, Scalar};
use super::vector::{Partials, SharedVec};
use super::{Operator, StopReason};
use crate::spmv::IterStats;

/// The scalars the sums hand to the updates.
#[derive(Default)]
struct Scalars {
    alpha: Scalar,
    beta: Scalar,
    gamma: Scalar,
    bnorm: Scalar,
}

/// The preconditioned vectors (`u`, `m`, `q`, and `D⁻¹`).
struct Pre {
    dinv: Arc<SharedVec>,
    u: Arc<SharedVec>,
    m: Arc<SharedVec>,
    q: Arc<SharedVec>,
}

/// One pipelined run's vectors and shared state. The run holds it in one `Arc`, and every
/// closure its tasks run (a phase's block body, a sum's two halves, a join) captures one
/// clone of that `Arc` and calls the method of its phase.
struct Pipelined {
    x: Arc<SharedVec>,
    r: Arc<SharedVec>,
    w: Arc<SharedVec>,
    z: Arc<SharedVec>,
    s: Arc<SharedVec>,
    p: Arc<SharedVec>,
    n: Arc<SharedVec>,
    pre: Option<Pre>,
    /// The three dot products of the update (or of the set-up's dots phase).
    dots: Arc<Partials>,
    /// What the multiplies' fused dots write (not read).
    scratch: Arc<Partials>,
    progress: Arc<Progress>,
    scalars: Scalars,
    rtol: f64,
    max_iters: usize,
}

/// Pipelined CG from `x = 0` (see the module doc); `dinv`: Jacobi's inverted diagonal.
pub(crate) fn run<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    b: &[f64],
    opts: &CgOptions,
    dinv: Option<Arc<SharedVec>>,
    t0: Instant,
) -> Result<(Vec<f64>, IterStats), Error> {
    let (n, blocks) = (op.local_rows(), op.row_blocks().len());
    let cg = Arc::new(Pipelined {
        x: SharedVec::zeros(n),
        r: SharedVec::new(b.to_vec()),
        w: SharedVec::zeros(n),
        z: SharedVec::zeros(n),
        s: SharedVec::zeros(n),
        p: SharedVec::zeros(n),
        n: SharedVec::zeros(n),
        pre: dinv.map(|dinv| Pre {
            dinv,
            u: SharedVec::zeros(n),
            m: SharedVec::zeros(n),
            q: SharedVec::zeros(n),
        }),
        dots: Partials::wide(blocks, 3),
        scratch: Partials::new(blocks),
        progress: Progress::new(t0),
        scalars: Scalars::default(),
        rtol: opts.rtol,
        max_iters: opts.max_iters,
    });
    let mut after = cg.submit_init(rt, op)?;
    let mut last_test: Option<TaskHandle> = None;
    // Iteration `max_iters` only makes the last convergence test.
    for i in 0..=opts.max_iters {
        let (test, end) = cg.submit_iteration(rt, op, i, &after)?;
        // Convergence test `i` is iteration `i`'s sum.
        if let Some(t) = &last_test {
            op.wait_for(rt, t)?;
            if cg.progress.stopped_by(i - 1) {
                break;
            }
        }
        (last_test, after) = (Some(test), end);
    }
    op.wait(rt)?;
    let stats = finish(&cg.progress, opts, t0)?;
    // Every task has ended: the run's state goes, `x` stays.
    let x = Arc::clone(&cg.x);
    drop(cg);
    Ok((SharedVec::into_vec(x), stats))
}

impl Pipelined {
    /// `u` of the vectors (`r` without a preconditioner).
    fn u(&self) -> &Arc<SharedVec> {
        self.pre.as_ref().map_or(&self.r, |p| &p.u)
    }

    /// `m` of the vectors (`w` without a preconditioner).
    fn m(&self) -> &Arc<SharedVec> {
        self.pre.as_ref().map_or(&self.w, |p| &p.m)
    }

    /// `u = M⁻¹·r`, `w = A·u`, then the dots of the first sum. Returns the end of the dots
    /// phase (the first iteration's sum and `m` go after it).
    fn submit_init<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
    ) -> Result<TaskHandle, Error> {
        let mut after: Option<TaskHandle> = None;
        if self.pre.is_some() {
            let cg = Arc::clone(self);
            let tasks = submit_blocks(
                rt,
                op,
                &CG_INIT,
                &[],
                Arc::new(move |_, rows| cg.precondition_r_block(rows)),
            )?;
            after = Some(submit_join(rt, &tasks, || ())?);
        }
        let tasks = multiply_dot(
            rt,
            op,
            &MultiplyDot {
                x: self.u(),
                y: &self.w,
                dots: &self.scratch,
                after: after.as_ref(),
                stop: None,
            },
        )?;
        let halo = op.halo_clock();
        let join = submit_join(rt, &tasks, move || {
            if let Some(c) = halo {
                c.take();
            }
        })?;
        let cg = Arc::clone(self);
        let tasks = submit_blocks(
            rt,
            op,
            &PIPECG_DOTS,
            std::slice::from_ref(&join),
            Arc::new(move |blk, rows| cg.first_dots_block(blk, rows)),
        )?;
        let cg = Arc::clone(self);
        submit_join(rt, &tasks, move || cg.progress.lock().account(Part::Vector))
    }

    /// The set-up's `u = D⁻¹·r` on rows `rows` (with a preconditioner only).
    fn precondition_r_block(&self, rows: Range<usize>) -> Result<(), BodyError> {
        let pre = self.pre.as_ref().expect("a preconditioned run");
        // SAFETY (vector discipline): this phase reads `r`, `dinv` and writes its
        // own rows of `u`.
        unsafe { jacobi_block(&pre.dinv, &self.r, &pre.u, rows) };
        Ok(())
    }

    /// The set-up's block `blk`: its partials of `r·u`, `w·u`, `r·r` for the first sum.
    fn first_dots_block(&self, blk: usize, rows: Range<usize>) -> Result<(), BodyError> {
        // SAFETY (vector discipline): this phase only reads.
        let (rb, ub, wb) = unsafe {
            (
                self.r.slice(rows.clone()),
                self.u().slice(rows.clone()),
                self.w.slice(rows),
            )
        };
        let (mut ru, mut wu, mut rr) = (0.0, 0.0, 0.0);
        for i in 0..rb.len() {
            ru += rb[i] * ub[i];
            wu += wb[i] * ub[i];
            rr += rb[i] * rb[i];
        }
        self.dots.set_all(blk, &[ru, wu, rr]);
        Ok(())
    }

    /// Submit iteration `i`, after `after` (the end of the last update): its sum (which
    /// makes the convergence test for `r_i`), `m`, `n = A·m`, and the update. Returns the
    /// sum's task and the update's end.
    fn submit_iteration<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        i: usize,
        after: &TaskHandle,
    ) -> Result<(TaskHandle, TaskHandle), Error> {
        // The sum goes first: it is on the way while the SpMV runs.
        let test = self.submit_sum(rt, op, i, after)?;
        let spmv_end = self.submit_multiply(rt, op, after)?;
        let end = self.submit_update(rt, op, &test, spmv_end)?;
        Ok((test, end))
    }

    /// Phase 1 of iteration `i`, after `after`: the sum of `γ = r·u`, `δ = w·u` and `r·r`,
    /// which makes convergence test `i` and computes `α`, `β`. Returns the sum's task.
    fn submit_sum<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        i: usize,
        after: &TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let (cg, then) = (Arc::clone(self), Arc::clone(self));
        op.submit_sum(
            rt,
            std::slice::from_ref(after),
            Box::new(move || cg.dots.sums_all()),
            Box::new(move |s| then.test_and_step(i, s)),
        )
    }

    /// Convergence test `i` from the sums `s = [γ, δ, r·r]`: records the iteration, stops
    /// the run when converged, at the iteration limit or on a breakdown, else sets `α`, `β`
    /// and `γ` for the update.
    fn test_and_step(&self, i: usize, s: &[f64]) -> Result<(), BodyError> {
        let (pr, sc) = (&self.progress, &self.scalars);
        if pr.is_stopped() {
            return Ok(());
        }
        let mut st = pr.lock();
        let (gamma, delta, rr) = (s[0], s[1], s[2]);
        if i == 0 {
            sc.bnorm.set(rr.sqrt().max(f64::MIN_POSITIVE));
        } else {
            st.stats.iterations = i;
            st.stats.history.push(rr.sqrt() / sc.bnorm.get());
        }
        if rr.sqrt() <= self.rtol * sc.bnorm.get() {
            pr.stop(&mut st, Ok(StopReason::Converged), i);
            return Ok(());
        }
        if i == self.max_iters {
            pr.stop(&mut st, Ok(StopReason::MaxIterations), i);
            return Ok(());
        }
        if let Some(why) = rz_breakdown(i, gamma) {
            pr.stop(&mut st, Err(why), i);
            return Ok(());
        }
        let (beta, denom) = if i == 0 {
            (0.0, delta)
        } else {
            let beta = gamma / sc.gamma.get();
            (beta, delta - beta * gamma / sc.alpha.get())
        };
        // `denom` is p·A·p of the direction this update takes.
        if let Some(why) = curvature_breakdown(i, denom) {
            pr.stop(&mut st, Err(why), i);
            return Ok(());
        }
        sc.beta.set(beta);
        sc.alpha.set(gamma / denom);
        sc.gamma.set(gamma);
        Ok(())
    }

    /// Phase 2, after `after` (beside the sum): `m = M⁻¹·w`, then `n = A·m`. Returns the
    /// multiply's end.
    fn submit_multiply<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        after: &TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let mut mult_after = after.clone();
        if self.pre.is_some() {
            let cg = Arc::clone(self);
            let tasks = submit_blocks(
                rt,
                op,
                &PIPECG_PRECONDITION,
                std::slice::from_ref(after),
                Arc::new(move |_, rows| cg.precondition_w_block(rows)),
            )?;
            mult_after = submit_join(rt, &tasks, || ())?;
        }
        let tasks = multiply_dot(
            rt,
            op,
            &MultiplyDot {
                x: self.m(),
                y: &self.n,
                dots: &self.scratch,
                after: Some(&mult_after),
                stop: Some(&self.progress.stopped),
            },
        )?;
        let (cg, halo) = (Arc::clone(self), op.halo_clock());
        submit_join(rt, &tasks, move || cg.multiply_end(halo))
    }

    /// `m = D⁻¹·w` on rows `rows` (with a preconditioner only); nothing once the run stopped.
    fn precondition_w_block(&self, rows: Range<usize>) -> Result<(), BodyError> {
        if self.progress.is_stopped() {
            return Ok(());
        }
        let pre = self.pre.as_ref().expect("a preconditioned run");
        // SAFETY (vector discipline): this phase reads `w`, `dinv` and writes
        // its own rows of `m`.
        unsafe { jacobi_block(&pre.dinv, &self.w, &pre.m, rows) };
        Ok(())
    }

    /// The multiply's end: takes its halo wait, and accounts both unless the run stopped.
    fn multiply_end(&self, halo: Option<Arc<HaloClock>>) {
        let halo = halo.map_or(0.0, |c| c.take());
        if !self.progress.is_stopped() {
            let mut st = self.progress.lock();
            st.account(Part::Spmv);
            st.halo_wait(halo);
        }
    }

    /// Phase 3, once the sum (`test`) and the SpMV (`spmv_end`) are both done: the fused
    /// update of every vector with the next iteration's dots. Returns its end.
    fn submit_update<O: Operator + ?Sized>(
        self: &Arc<Self>,
        rt: &Runtime,
        op: &O,
        test: &TaskHandle,
        spmv_end: TaskHandle,
    ) -> Result<TaskHandle, Error> {
        let cg = Arc::clone(self);
        let ready = submit_join(rt, &[test.clone(), spmv_end], move || {
            if !cg.progress.is_stopped() {
                // What of the sum the SpMV did not hide.
                cg.progress.lock().account(Part::Reduce);
            }
        })?;
        let cg = Arc::clone(self);
        let tasks = submit_blocks(
            rt,
            op,
            &PIPECG_UPDATE,
            std::slice::from_ref(&ready),
            Arc::new(move |blk, rows| cg.update_block(blk, rows)),
        )?;
        let cg = Arc::clone(self);
        submit_join(rt, &tasks, move || {
            if !cg.progress.is_stopped() {
                cg.progress.lock().account(Part::Vector);
            }
        })
    }

    /// Phase 3's block `blk`: [`pipecg_update`] with this iteration's `α`, `β`, and its
    /// partials of the next sum; nothing once the run stopped.
    fn update_block(&self, blk: usize, rows: Range<usize>) -> Result<(), BodyError> {
        if self.progress.is_stopped() {
            return Ok(());
        }
        // SAFETY (vector discipline): this phase reads `n` (and `m`) and writes its
        // own rows of the others, which no other task of the phase touches.
        let v = unsafe {
            PipeBlock {
                n: self.n.slice(rows.clone()),
                x: self.x.slice_mut(rows.clone()),
                r: self.r.slice_mut(rows.clone()),
                w: self.w.slice_mut(rows.clone()),
                z: self.z.slice_mut(rows.clone()),
                s: self.s.slice_mut(rows.clone()),
                p: self.p.slice_mut(rows.clone()),
                pre: self.pre.as_ref().map(|pre| PipePre {
                    u: pre.u.slice_mut(rows.clone()),
                    q: pre.q.slice_mut(rows.clone()),
                    m: pre.m.slice(rows.clone()),
                }),
            }
        };
        let d = pipecg_update(self.scalars.alpha.get(), self.scalars.beta.get(), v);
        self.dots.set_all(blk, &d);
        Ok(())
    }
}

/// `out = D⁻¹·v` on rows `rows` (`dinv` holds `D⁻¹`), entry by entry.
///
/// # Safety
/// No task writes rows `rows` of `dinv` or `v`, nor reads or writes those of `out`, while
/// this runs (the vector discipline of [`super::vector`]).
unsafe fn jacobi_block(dinv: &SharedVec, v: &SharedVec, out: &SharedVec, rows: Range<usize>) {
    // SAFETY: the caller's promise.
    let (vb, db, ob) = unsafe {
        (
            v.slice(rows.clone()),
            dinv.slice(rows.clone()),
            out.slice_mut(rows),
        )
    };
    for ((o, d), v) in ob.iter_mut().zip(db).zip(vb) {
        *o = d * v;
    }
}
