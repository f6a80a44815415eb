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

use std::sync::Arc;
use std::time::Instant;

use tessera_engine::{Error, Runtime, TaskHandle};
use tessera_tasks::kernels::blas1::{pipecg_update, PipeBlock, PipePre};

use super::cg::{curvature_breakdown, finish, rz_breakdown, CgOptions};
use super::phases::{
    multiply_dot, submit_blocks, submit_join, MultiplyDot, CG_INIT, PIPECG_DOTS,
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

/// One pipelined run's vectors and shared state.
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
    scalars: Arc<Scalars>,
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
    let cg = Pipelined {
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
        scalars: Arc::default(),
        rtol: opts.rtol,
        max_iters: opts.max_iters,
    };
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
    let Pipelined { x, .. } = cg;
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
    fn submit_init<O: Operator + ?Sized>(&self, rt: &Runtime, op: &O) -> Result<TaskHandle, Error> {
        let mut after: Option<TaskHandle> = None;
        if let Some(pre) = &self.pre {
            let (r, u, dinv) = (
                Arc::clone(&self.r),
                Arc::clone(&pre.u),
                Arc::clone(&pre.dinv),
            );
            let tasks = submit_blocks(
                rt,
                op,
                &CG_INIT,
                &[],
                Arc::new(move |_, rows| {
                    // SAFETY (vector discipline): this phase reads `r`, `dinv` and writes its
                    // own rows of `u`.
                    let (rb, db, ub) = unsafe {
                        (
                            r.slice(rows.clone()),
                            dinv.slice(rows.clone()),
                            u.slice_mut(rows),
                        )
                    };
                    for ((u, d), r) in ub.iter_mut().zip(db).zip(rb) {
                        *u = d * r;
                    }
                    Ok(())
                }),
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
        let (r, u, w, dots, halo) = (
            Arc::clone(&self.r),
            Arc::clone(self.u()),
            Arc::clone(&self.w),
            Arc::clone(&self.dots),
            op.halo_clock(),
        );
        let join = submit_join(rt, &tasks, move || {
            if let Some(c) = halo {
                c.take();
            }
        })?;
        let tasks = submit_blocks(
            rt,
            op,
            &PIPECG_DOTS,
            std::slice::from_ref(&join),
            Arc::new(move |blk, rows| {
                // SAFETY (vector discipline): this phase only reads.
                let (rb, ub, wb) =
                    unsafe { (r.slice(rows.clone()), u.slice(rows.clone()), w.slice(rows)) };
                let (mut ru, mut wu, mut rr) = (0.0, 0.0, 0.0);
                for i in 0..rb.len() {
                    ru += rb[i] * ub[i];
                    wu += wb[i] * ub[i];
                    rr += rb[i] * rb[i];
                }
                dots.set_all(blk, &[ru, wu, rr]);
                Ok(())
            }),
        )?;
        let pr = Arc::clone(&self.progress);
        submit_join(rt, &tasks, move || pr.lock().account(Part::Vector))
    }

    /// Submit iteration `i`, after `after` (the end of the last update): its sum (which
    /// makes the convergence test for `r_i`), `m`, `n = A·m`, and the update. Returns the
    /// sum's task and the update's end.
    fn submit_iteration<O: Operator + ?Sized>(
        &self,
        rt: &Runtime,
        op: &O,
        i: usize,
        after: &TaskHandle,
    ) -> Result<(TaskHandle, TaskHandle), Error> {
        let pr = &self.progress;
        let after = std::slice::from_ref(after);

        // 1. The sum, first: it is on the way while the SpMV runs.
        let (pr1, sc, dots) = (
            Arc::clone(pr),
            Arc::clone(&self.scalars),
            Arc::clone(&self.dots),
        );
        let (rtol, max_iters) = (self.rtol, self.max_iters);
        let test = op.submit_sum(
            rt,
            after,
            Box::new(move || dots.sums_all()),
            Box::new(move |s| {
                if pr1.is_stopped() {
                    return Ok(());
                }
                let mut st = pr1.lock();
                let (gamma, delta, rr) = (s[0], s[1], s[2]);
                if i == 0 {
                    sc.bnorm.set(rr.sqrt().max(f64::MIN_POSITIVE));
                } else {
                    st.stats.iterations = i;
                    st.stats.history.push(rr.sqrt() / sc.bnorm.get());
                }
                if rr.sqrt() <= rtol * sc.bnorm.get() {
                    pr1.stop(&mut st, Ok(StopReason::Converged), i);
                    return Ok(());
                }
                if i == max_iters {
                    pr1.stop(&mut st, Ok(StopReason::MaxIterations), i);
                    return Ok(());
                }
                if let Some(why) = rz_breakdown(i, gamma) {
                    pr1.stop(&mut st, Err(why), i);
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
                    pr1.stop(&mut st, Err(why), i);
                    return Ok(());
                }
                sc.beta.set(beta);
                sc.alpha.set(gamma / denom);
                sc.gamma.set(gamma);
                Ok(())
            }),
        )?;

        // 2. m = M⁻¹·w, n = A·m.
        let mut mult_after = after[0].clone();
        if let Some(pre) = &self.pre {
            let (w, m, dinv, pr) = (
                Arc::clone(&self.w),
                Arc::clone(&pre.m),
                Arc::clone(&pre.dinv),
                Arc::clone(pr),
            );
            let tasks = submit_blocks(
                rt,
                op,
                &PIPECG_PRECONDITION,
                after,
                Arc::new(move |_, rows| {
                    if pr.is_stopped() {
                        return Ok(());
                    }
                    // SAFETY (vector discipline): this phase reads `w`, `dinv` and writes
                    // its own rows of `m`.
                    let (wb, db, mb) = unsafe {
                        (
                            w.slice(rows.clone()),
                            dinv.slice(rows.clone()),
                            m.slice_mut(rows),
                        )
                    };
                    for ((m, d), w) in mb.iter_mut().zip(db).zip(wb) {
                        *m = d * w;
                    }
                    Ok(())
                }),
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
                stop: Some(&pr.stopped),
            },
        )?;
        let (pr2, halo) = (Arc::clone(pr), op.halo_clock());
        let spmv_end = submit_join(rt, &tasks, move || {
            let halo = halo.map_or(0.0, |c| c.take());
            if !pr2.is_stopped() {
                let mut st = pr2.lock();
                st.account(Part::Spmv);
                st.halo_wait(halo);
            }
        })?;

        // 3. The update, once the sum and the SpMV are both done.
        let pr3 = Arc::clone(pr);
        let ready = submit_join(rt, &[test.clone(), spmv_end], move || {
            if !pr3.is_stopped() {
                // What of the sum the SpMV did not hide.
                pr3.lock().account(Part::Reduce);
            }
        })?;
        let (x, r, w, z, s, p, n) = (
            Arc::clone(&self.x),
            Arc::clone(&self.r),
            Arc::clone(&self.w),
            Arc::clone(&self.z),
            Arc::clone(&self.s),
            Arc::clone(&self.p),
            Arc::clone(&self.n),
        );
        let pre = self
            .pre
            .as_ref()
            .map(|p| (Arc::clone(&p.u), Arc::clone(&p.q), Arc::clone(&p.m)));
        let (dots, sc, pr4) = (
            Arc::clone(&self.dots),
            Arc::clone(&self.scalars),
            Arc::clone(pr),
        );
        let tasks = submit_blocks(
            rt,
            op,
            &PIPECG_UPDATE,
            std::slice::from_ref(&ready),
            Arc::new(move |blk, rows| {
                if pr4.is_stopped() {
                    return Ok(());
                }
                // SAFETY (vector discipline): this phase reads `n` (and `m`) and writes its
                // own rows of the others, which no other task of the phase touches.
                let v = unsafe {
                    PipeBlock {
                        n: n.slice(rows.clone()),
                        x: x.slice_mut(rows.clone()),
                        r: r.slice_mut(rows.clone()),
                        w: w.slice_mut(rows.clone()),
                        z: z.slice_mut(rows.clone()),
                        s: s.slice_mut(rows.clone()),
                        p: p.slice_mut(rows.clone()),
                        pre: pre.as_ref().map(|(u, q, m)| PipePre {
                            u: u.slice_mut(rows.clone()),
                            q: q.slice_mut(rows.clone()),
                            m: m.slice(rows.clone()),
                        }),
                    }
                };
                let d = pipecg_update(sc.alpha.get(), sc.beta.get(), v);
                dots.set_all(blk, &d);
                Ok(())
            }),
        )?;
        let pr5 = Arc::clone(pr);
        let end = submit_join(rt, &tasks, move || {
            if !pr5.is_stopped() {
                pr5.lock().account(Part::Vector);
            }
        })?;
        Ok((test, end))
    }
}
