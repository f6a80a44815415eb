//! The distributed runs: repeated SpMV (the bandwidth benchmark), power iteration and CG
//! over [`DistOperator`], each with the bytes and messages its rank sent.

use std::time::Instant;

use tessera_engine::dist::{Collectives, Net};
use tessera_engine::{Error, Runtime};

use super::{DistMatrix, DistOperator};
use crate::solver::CgOptions;
use crate::spmv::IterStats;

/// Timing and traffic of a distributed iterative run on one rank.
#[derive(Clone, Debug, Default)]
pub struct DistStats {
    /// As in the single-process drivers (times on this rank).
    pub iter: IterStats,
    /// Bytes this rank's transport sent during the iterations, and messages.
    pub bytes_sent: u64,
    /// Messages this rank's transport sent during the iterations.
    pub messages_sent: u64,
}

fn traffic(net: &Net) -> (u64, u64) {
    let c = net.transport().counters();
    (c.bytes_sent, c.sent)
}

/// `y += A·x`, `iters` times (`x` fixed, its halo exchanged every time): the bandwidth
/// benchmark. `x_own` is this rank's part of `x`; returns this rank's part of `y`. Starts
/// and ends with a barrier on `coll`, so the time covers every rank's work.
pub fn repeated_spmv(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    x_own: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, DistStats), Error> {
    let xh = rt.register_replicable_named(x_own, "x");
    let y = a.register_blocked_zeros(rt);
    coll.barrier().map_err(Error::Remote)?;
    let before = traffic(&a.net);
    let t0 = Instant::now();
    for _ in 0..iters {
        a.submit_multiply(rt, &xh, &y)?;
    }
    a.wait(rt)?;
    let t = t0.elapsed().as_secs_f64();
    let after = traffic(&a.net);
    coll.barrier().map_err(Error::Remote)?;
    rt.unregister(xh)?;
    let y = a.gather(rt, y)?;
    Ok((
        y,
        DistStats {
            iter: IterStats {
                iterations: iters,
                spmv_seconds: t,
                total_seconds: t,
                ..IterStats::default()
            },
            bytes_sent: after.0 - before.0,
            messages_sent: after.1 - before.1,
        },
    ))
}

/// Power iteration, distributed: `||A·x||` per iteration from `x0` normalised (`x0_own`:
/// this rank's part): `crate::solver::power_iteration` over [`DistOperator`]. Returns this
/// rank's part of the last `x`.
pub fn power_iteration(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    x0_own: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, DistStats), Error> {
    with_traffic(a, || {
        crate::solver::power_iteration(rt, &DistOperator::new(a, coll), x0_own, iters)
    })
}

/// Conjugate gradient, distributed, unpreconditioned, from `x = 0`: stops when
/// `||r|| <= tol·||b||` or after `max_iters` ([`conjugate_gradient_with`]).
pub fn conjugate_gradient(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    b_own: &[f64],
    tol: f64,
    max_iters: usize,
) -> Result<(Vec<f64>, DistStats), Error> {
    let opts = CgOptions {
        rtol: tol,
        max_iters,
        pc: crate::solver::Preconditioner::None,
        variant: crate::solver::CgVariant::Standard,
    };
    conjugate_gradient_with(rt, coll, a, b_own, &opts)
}

/// Conjugate gradient, distributed, from `x = 0`: `crate::solver::conjugate_gradient` over
/// [`DistOperator`], the same steps as in one process, dot products all-reduced. `b_own`:
/// this rank's part of `b`; returns this rank's part of `x`. History: `||r||/||b||`.
pub fn conjugate_gradient_with(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    b_own: &[f64],
    opts: &CgOptions,
) -> Result<(Vec<f64>, DistStats), Error> {
    with_traffic(a, || {
        crate::solver::conjugate_gradient(rt, &DistOperator::new(a, coll), b_own, opts)
    })
}

/// `f`'s result with the bytes and messages this rank's transport sent meanwhile.
fn with_traffic(
    a: &DistMatrix,
    f: impl FnOnce() -> Result<(Vec<f64>, IterStats), Error>,
) -> Result<(Vec<f64>, DistStats), Error> {
    let before = traffic(&a.net);
    let (x, iter) = f()?;
    let after = traffic(&a.net);
    Ok((
        x,
        DistStats {
            iter,
            bytes_sent: after.0 - before.0,
            messages_sent: after.1 - before.1,
        },
    ))
}
