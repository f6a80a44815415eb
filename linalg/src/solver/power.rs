//! Power iteration over an [`Operator`]: `y = A·x` fused with `y·y` (one sum), then
//! `x = y / ||y||` as tasks. History: `||A·x||` per iteration, the dominant eigenvalue's
//! magnitude estimate.

use std::sync::Arc;
use std::time::Instant;

use tessera_engine::{Error, Runtime};
use tessera_tasks::kernels::blas1::scale_into;

use super::phases::{submit_blocks, POWER_SCALE};
use super::vector::{Partials, SharedVec};
use super::{check_square, MultiplyDot, Operator, StopReason};
use crate::spmv::IterStats;

/// Power iteration from `x0` normalised (`x0`: this process's rows), `iters` iterations;
/// returns this process's rows of the last `x`. A zero or non-finite `||A·x||` is
/// [`Error::Breakdown`], in one process and across ranks alike.
pub fn power_iteration<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    x0: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    let (n_rows, n_cols) = op.shape();
    check_square("power", n_rows, n_cols).map_err(Error::Config)?;
    let n = op.local_rows();
    if x0.len() != n {
        return Err(Error::Config(format!(
            "power iteration: x has {} entries for {n} rows",
            x0.len()
        )));
    }
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let dots = Partials::new(op.row_blocks().len());
    let sum = |stats: &mut IterStats, v: f64| -> Result<f64, Error> {
        let mut v = [v];
        let tr = Instant::now();
        op.sum(&mut v)?;
        stats.reduce_seconds += tr.elapsed().as_secs_f64();
        Ok(v[0])
    };
    let mut x = SharedVec::new(x0);
    let mut y = SharedVec::zeros(n);

    // ||x0||, then x = x0 / ||x0||: the scale phase run on x itself, y as scratch.
    let tv = Instant::now();
    scale(rt, op, &x, &x, None, &dots)?;
    stats.vector_seconds += tv.elapsed().as_secs_f64();
    let norm = sum(&mut stats, dots.sums().0)?.sqrt();
    let tv = Instant::now();
    scale(rt, op, &x, &y, Some(1.0 / norm), &dots)?;
    std::mem::swap(&mut x, &mut y);
    stats.vector_seconds += tv.elapsed().as_secs_f64();

    for _ in 0..iters {
        let ts = Instant::now();
        op.submit_multiply_dot(
            rt,
            &MultiplyDot {
                x: &x,
                y: &y,
                dots: &dots,
                after: None,
                stop: None,
            },
        )?;
        op.wait(rt)?;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let lambda = sum(&mut stats, dots.sums().1)?.sqrt();
        record_norm(lambda, &mut stats)?;
        let tv = Instant::now();
        scale(rt, op, &y, &x, Some(1.0 / lambda), &dots)?;
        stats.vector_seconds += tv.elapsed().as_secs_f64();
    }
    stats.stop = Some(StopReason::MaxIterations);
    stats.total_seconds = t0.elapsed().as_secs_f64();
    drop(y);
    Ok((SharedVec::into_vec(x), stats))
}

/// Record `||A·x||` (`lambda`) as the next iteration's estimate, or
/// [`Error::Breakdown`] when it is zero or not finite (the power iteration of
/// every driver, including the balanced one in `crate::spmv`).
pub(crate) fn record_norm(lambda: f64, stats: &mut IterStats) -> Result<(), Error> {
    if lambda == 0.0 || !lambda.is_finite() {
        // A norm has no sign: the square root of a sum of -0.0 is -0.0, which
        // printed "||A·x|| = -0" (issue 42).
        let lambda = if lambda == 0.0 { 0.0 } else { lambda };
        return Err(Error::Breakdown(format!(
            "power iteration broke down at iteration {}: ||A·x|| = {lambda}{}",
            stats.iterations + 1,
            if lambda.is_nan() {
                " (the matrix or the start vector holds NaN or infinity)"
            } else {
                ""
            }
        )));
    }
    stats.history.push(lambda);
    stats.iterations += 1;
    Ok(())
}

/// One phase: `to = s·from` when `s` is given, and in any case `dots[b] = (from·from, 0)`;
/// waits for it.
fn scale<O: Operator + ?Sized>(
    rt: &Runtime,
    op: &O,
    from: &Arc<SharedVec>,
    to: &Arc<SharedVec>,
    s: Option<f64>,
    dots: &Arc<Partials>,
) -> Result<(), Error> {
    assert!(
        s.is_none() || !Arc::ptr_eq(from, to),
        "scale: `from` and `to` must differ when it writes"
    );
    let (from, to, dots) = (Arc::clone(from), Arc::clone(to), Arc::clone(dots));
    submit_blocks(
        rt,
        op,
        &POWER_SCALE,
        &[],
        Arc::new(move |blk, rows| {
            // SAFETY (vector discipline): this phase reads `from` and, when it scales,
            // writes its own rows of `to` (a different vector then), which no other task
            // touches.
            let fb = unsafe { from.slice(rows.clone()) };
            dots.set(blk, (fb.iter().map(|v| v * v).sum(), 0.0));
            if let Some(s) = s {
                scale_into(s, fb, unsafe { to.slice_mut(rows) });
            }
            Ok(())
        }),
    )?;
    op.wait(rt)
}

#[cfg(test)]
mod tests {
    //! Proves that a breakdown names the norm without a sign (issue 42).
    use super::*;

    #[test]
    fn a_zero_norm_breaks_down_without_a_sign() {
        let mut stats = IterStats::default();
        let e = record_norm(-0.0, &mut stats).unwrap_err().to_string();
        assert!(e.ends_with("at iteration 1: ||A·x|| = 0"), "{e}");
        record_norm(2.0, &mut stats).unwrap();
        assert_eq!(stats.history, [2.0]);
    }
}
