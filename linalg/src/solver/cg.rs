//! Conjugate gradient over an [`Operator`], optionally with the Jacobi preconditioner,
//! stopping like PETSc's KSP on the unpreconditioned residual (`||r|| <= rtol·||b||`, or
//! the iteration limit). One iteration is three phases of tasks over the row blocks, with a
//! wait and one sum (all-reduce across ranks) after each of the first two:
//!
//! 1. `q = A·p`, fused with the partials of `p·q` → `α = r·z / p·q`;
//! 2. `x += α·p`, `r −= α·q` (Jacobi: `z = D⁻¹·r`), fused with `r·z` and `r·r` → `β`;
//! 3. `p = z + β·p` (`z` is `r` without a preconditioner), then waited for: the next
//!    multiply reads all of `p`.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::{Error, Runtime};
use tessera_tasks::kernels::blas1::{precondition, update_p, update_xr, update_xrz};

use super::phases::{submit_blocks, CG_INIT, CG_UPDATE_P, CG_UPDATE_XR, JACOBI};
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

/// How [`conjugate_gradient`] runs and stops.
#[derive(Clone, Copy, Debug)]
pub struct CgOptions {
    /// Stop when `||r|| <= rtol·||b||` (0: never, run `max_iters`).
    pub rtol: f64,
    /// Stop after this many iterations.
    pub max_iters: usize,
    /// The preconditioner.
    pub pc: Preconditioner,
}

/// `Err` unless `rtol` is a finite positive number, or 0 (run every iteration); the drivers
/// check `--tol` with this before anything runs.
pub fn check_rtol(rtol: f64) -> Result<(), String> {
    if rtol.is_finite() && rtol > 0.0 {
        Ok(())
    } else {
        Err(format!("--tol {rtol}: must be a positive number"))
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
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let dots = Partials::new(op.row_blocks().len());
    let dinv = match opts.pc {
        Preconditioner::None => None,
        Preconditioner::Jacobi => Some(inverse_diagonal(rt, op, &dots)?),
    };
    let x = SharedVec::zeros(n);
    let r = SharedVec::new(b.to_vec());
    let p = SharedVec::zeros(n);
    let q = SharedVec::zeros(n);
    let z = dinv.as_ref().map(|_| SharedVec::zeros(n));

    // Sum the phase's partials over blocks and ranks.
    let reduce = |stats: &mut IterStats| -> Result<(f64, f64), Error> {
        let (a, b) = dots.sums();
        let mut v = [a, b];
        let tr = Instant::now();
        op.sum(&mut v)?;
        stats.reduce_seconds += tr.elapsed().as_secs_f64();
        Ok((v[0], v[1]))
    };

    // r = b; z = D⁻¹·r; p = z.
    let tv = Instant::now();
    {
        let (r, p, z, dinv, dots) = (
            Arc::clone(&r),
            Arc::clone(&p),
            z.clone(),
            dinv.clone(),
            Arc::clone(&dots),
        );
        submit_blocks(
            rt,
            op,
            &CG_INIT,
            Arc::new(move |blk, rows| {
                // SAFETY (vector discipline): this phase reads `r`, `dinv` and writes its
                // own rows of `z` and `p`, which no other task of the phase touches.
                let (rb, pb) = unsafe { (r.slice(rows.clone()), p.slice_mut(rows.clone())) };
                let d = match (&z, &dinv) {
                    (Some(z), Some(dinv)) => {
                        let (zb, db) =
                            unsafe { (z.slice_mut(rows.clone()), dinv.slice(rows.clone())) };
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
                dots.set(blk, d);
                Ok(())
            }),
        )?;
    }
    op.wait(rt)?;
    stats.vector_seconds += tv.elapsed().as_secs_f64();
    let (mut rz, mut rr) = reduce(&mut stats)?;
    let bnorm = rr.sqrt().max(f64::MIN_POSITIVE);
    let converged = |rr: f64| rr.sqrt() <= opts.rtol * bnorm;

    for k in 0..opts.max_iters {
        if converged(rr) {
            break;
        }
        let ts = Instant::now();
        op.submit_multiply_dot(rt, &p, &q, &dots)?;
        op.wait(rt)?;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let (pq, _) = reduce(&mut stats)?;
        if pq <= 0.0 || !pq.is_finite() {
            return Err(Error::Breakdown(format!(
                "CG broke down at iteration {}: p·Ap = {pq} ({})",
                stats.iterations,
                if pq.is_finite() {
                    "is the matrix SPD?"
                } else {
                    "the matrix holds NaN or infinity, or the iteration overflowed"
                }
            )));
        }
        let alpha = rz / pq;

        let tv = Instant::now();
        {
            let (x, r, p, q, z, dinv, dots) = (
                Arc::clone(&x),
                Arc::clone(&r),
                Arc::clone(&p),
                Arc::clone(&q),
                z.clone(),
                dinv.clone(),
                Arc::clone(&dots),
            );
            submit_blocks(
                rt,
                op,
                &CG_UPDATE_XR,
                Arc::new(move |blk, rows| {
                    // SAFETY (vector discipline): this phase reads `p`, `q`, `dinv` and
                    // writes its own rows of `x`, `r`, `z`, which no other task touches.
                    let (xb, rb, pb, qb) = unsafe {
                        (
                            x.slice_mut(rows.clone()),
                            r.slice_mut(rows.clone()),
                            p.slice(rows.clone()),
                            q.slice(rows.clone()),
                        )
                    };
                    let d = match (&z, &dinv) {
                        (Some(z), Some(dinv)) => {
                            let (zb, db) =
                                unsafe { (z.slice_mut(rows.clone()), dinv.slice(rows.clone())) };
                            update_xrz(alpha, pb, qb, db, xb, rb, zb)
                        }
                        _ => {
                            let rr = update_xr(alpha, pb, qb, xb, rb);
                            (rr, rr)
                        }
                    };
                    dots.set(blk, d);
                    Ok(())
                }),
            )?;
        }
        op.wait(rt)?;
        stats.vector_seconds += tv.elapsed().as_secs_f64();
        let (rz_new, rr_new) = reduce(&mut stats)?;
        if rz_new < 0.0 || !rz_new.is_finite() {
            return Err(Error::Breakdown(format!(
                "CG broke down at iteration {}: r·z = {rz_new} (the preconditioner is not positive definite, or the iteration overflowed)",
                stats.iterations
            )));
        }
        stats.iterations += 1;
        stats.history.push(rr_new.sqrt() / bnorm);
        let beta = rz_new / rz;
        rz = rz_new;
        rr = rr_new;
        if k + 1 == opts.max_iters || converged(rr) {
            // `p` is not read again.
            break;
        }

        let tv = Instant::now();
        {
            let (p, src) = (Arc::clone(&p), Arc::clone(z.as_ref().unwrap_or(&r)));
            submit_blocks(
                rt,
                op,
                &CG_UPDATE_P,
                Arc::new(move |_, rows| {
                    // SAFETY (vector discipline): this phase reads `z` (or `r`) and writes
                    // its own rows of `p`, which no other task touches.
                    let (zb, pb) = unsafe { (src.slice(rows.clone()), p.slice_mut(rows)) };
                    update_p(beta, zb, pb);
                    Ok(())
                }),
            )?;
        }
        op.wait(rt)?;
        stats.vector_seconds += tv.elapsed().as_secs_f64();
    }
    stats.stop = Some(if converged(rr) {
        StopReason::Converged
    } else {
        StopReason::MaxIterations
    });
    stats.total_seconds = t0.elapsed().as_secs_f64();
    drop((r, p, q, z, dinv));
    Ok((SharedVec::into_vec(x), stats))
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
