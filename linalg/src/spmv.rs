//! SpMV as a task graph: `y += A·x` over row blocks partitioned by nonzeros,
//! and the iterative drivers built on it (repeated SpMV, power iteration,
//! conjugate gradient).
//!
//! The matrix is split once into row blocks, each registered as its own data
//! handle and kept registered across iterations (resident on the node that
//! computes it); per iteration only vectors move. `x` is one handle read by
//! every block task; `y` is one handle per block, so block tasks write
//! disjoint data and run in parallel.

use std::ops::Range;
use std::time::Instant;

use tessera_engine::{Codelet, DataHandle, Error, Runtime, TaskBuilder};
use tessera_tasks::kernels::{spmv_csr_unchecked, spmv_flops};

use crate::sparse::csr::Csr;

/// A matrix split into row blocks registered with a runtime.
pub struct SpmvMatrix {
    blocks: Vec<DataHandle<Csr>>,
    ranges: Vec<Range<usize>>,
    n_rows: usize,
    n_cols: usize,
    nnz: usize,
    bytes: usize,
    codelet: Codelet,
}

impl SpmvMatrix {
    /// Split `a` into `parts` row blocks of about equal nonzeros and register them.
    pub fn new(rt: &Runtime, a: &Csr, parts: usize) -> SpmvMatrix {
        let ranges: Vec<Range<usize>> = a
            .partition_by_nnz(parts.max(1))
            .into_iter()
            .filter(|r| !r.is_empty())
            .collect();
        let blocks = ranges
            .iter()
            .map(|r| {
                rt.register_replicable_named(
                    a.row_block(r.clone()),
                    format!("A[{}..{}]", r.start, r.end),
                )
            })
            .collect();
        SpmvMatrix {
            blocks,
            ranges,
            n_rows: a.n_rows(),
            n_cols: a.n_cols(),
            nnz: a.nnz(),
            bytes: a.bytes(),
            codelet: Codelet::new("spmv"),
        }
    }

    /// Rows, columns, nonzeros.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.n_rows, self.n_cols, self.nnz)
    }

    /// Bytes of the matrix (values, column indices, row pointers).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The row range of each block.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// A zero vector split like the rows, one handle per block.
    pub fn register_blocked_zeros(&self, rt: &Runtime) -> Vec<DataHandle<Vec<f64>>> {
        self.ranges
            .iter()
            .map(|r| rt.register_replicable(vec![0.0; r.len()]))
            .collect()
    }

    /// Submit `y_b += A_b·x` for every block `b` (does not wait).
    pub fn submit_multiply(
        &self,
        rt: &Runtime,
        x: &DataHandle<Vec<f64>>,
        y: &[DataHandle<Vec<f64>>],
    ) -> Result<(), Error> {
        assert_eq!(
            y.len(),
            self.blocks.len(),
            "y must be split like the matrix"
        );
        let n_cols = self.n_cols;
        for (b, (a, yb)) in self.blocks.iter().zip(y).enumerate() {
            let (a2, x2, y2) = (a.clone(), x.clone(), yb.clone());
            let r = &self.ranges[b];
            let nnz_hint = self.nnz as f64 * r.len() as f64 / self.n_rows.max(1) as f64;
            rt.submit(
                TaskBuilder::new(&self.codelet)
                    .label(format!("spmv[{b}]"))
                    .flops(spmv_flops(nnz_hint as usize))
                    .read(a)
                    .read(x)
                    .rw(yb)
                    .body(move |ctx| {
                        let (a, x, y) = (ctx.read(&a2)?, ctx.read(&x2)?, ctx.write(&y2)?);
                        if x.len() != n_cols || y.len() != a.n_rows() {
                            return Err(format!(
                                "x has {} entries for {} columns, y {} for {} rows",
                                x.len(),
                                n_cols,
                                y.len(),
                                a.n_rows()
                            )
                            .into());
                        }
                        // SAFETY: `Csr` guarantees every column index is
                        // `< n_cols` (checked at construction), and `x.len()
                        // == n_cols` was just checked.
                        unsafe { spmv_csr_unchecked(a.row_ptr(), a.col_idx(), a.vals(), x, y) };
                        Ok(())
                    }),
            )?;
        }
        Ok(())
    }

    /// Give the blocks back to the caller's runtime (unregister them).
    pub fn unregister(self, rt: &Runtime) -> Result<Vec<Csr>, Error> {
        self.blocks.into_iter().map(|h| rt.unregister(h)).collect()
    }
}

/// Gather a blocked vector into one.
fn gather(rt: &Runtime, blocks: Vec<DataHandle<Vec<f64>>>) -> Result<Vec<f64>, Error> {
    let mut out = Vec::new();
    for b in blocks {
        out.extend_from_slice(&rt.unregister(b)?);
    }
    Ok(out)
}

/// Timing of an iterative run.
#[derive(Clone, Debug, Default)]
pub struct IterStats {
    /// Iterations done.
    pub iterations: usize,
    /// Seconds spent in SpMV (submission to completion of the block tasks).
    pub spmv_seconds: f64,
    /// Seconds for the whole run.
    pub total_seconds: f64,
    /// Residual norms (CG) or eigenvalue estimates (power), per iteration.
    pub history: Vec<f64>,
}

/// `y += A·x`, `iters` times (x fixed): the bandwidth benchmark.
pub fn repeated_spmv(
    rt: &Runtime,
    a: &SpmvMatrix,
    x: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    let xh = rt.register_replicable_named(x, "x");
    let y = a.register_blocked_zeros(rt);
    let t0 = Instant::now();
    for _ in 0..iters {
        a.submit_multiply(rt, &xh, &y)?;
    }
    rt.wait_all()?;
    let t = t0.elapsed().as_secs_f64();
    rt.unregister(xh)?;
    let y = gather(rt, y)?;
    Ok((
        y,
        IterStats {
            iterations: iters,
            spmv_seconds: t,
            total_seconds: t,
            history: Vec::new(),
        },
    ))
}

/// One SpMV `A·p` into a fresh vector, with `p` moved in and out (no copy).
fn multiply(rt: &Runtime, a: &SpmvMatrix, p: Vec<f64>) -> Result<(Vec<f64>, Vec<f64>), Error> {
    let ph = rt.register_replicable(p);
    let q = a.register_blocked_zeros(rt);
    a.submit_multiply(rt, &ph, &q)?;
    rt.wait_all()?;
    Ok((rt.unregister(ph)?, gather(rt, q)?))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Power iteration: the dominant eigenvalue estimate `||A·x||` per iteration,
/// from `x0` normalised.
pub fn power_iteration(
    rt: &Runtime,
    a: &SpmvMatrix,
    x0: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let norm = dot(&x0, &x0).sqrt();
    let mut x: Vec<f64> = x0.into_iter().map(|v| v / norm).collect();
    for _ in 0..iters {
        let ts = Instant::now();
        let (_, y) = multiply(rt, a, x)?;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let lambda = dot(&y, &y).sqrt();
        if lambda == 0.0 || !lambda.is_finite() {
            return Err(Error::Config(format!(
                "power iteration broke down: ||A·x|| = {lambda}"
            )));
        }
        x = y.into_iter().map(|v| v / lambda).collect();
        stats.history.push(lambda);
        stats.iterations += 1;
    }
    stats.total_seconds = t0.elapsed().as_secs_f64();
    Ok((x, stats))
}

/// Conjugate gradient on an SPD matrix from `x = 0`: stops when
/// `||r|| <= tol·||b||` or after `max_iters`. History: `||r||/||b||`.
pub fn conjugate_gradient(
    rt: &Runtime,
    a: &SpmvMatrix,
    b: &[f64],
    tol: f64,
    max_iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let n = b.len();
    let bnorm = dot(b, b).sqrt().max(f64::MIN_POSITIVE);
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    for _ in 0..max_iters {
        if rr.sqrt() <= tol * bnorm {
            break;
        }
        let ts = Instant::now();
        let (p_back, q) = multiply(rt, a, p)?;
        p = p_back;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let pq = dot(&p, &q);
        if pq <= 0.0 || !pq.is_finite() {
            return Err(Error::Config(format!(
                "CG broke down at iteration {}: p·Ap = {pq} (is the matrix SPD?)",
                stats.iterations
            )));
        }
        let alpha = rr / pq;
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let rr_new = dot(&r, &r);
        let beta = rr_new / rr;
        rr = rr_new;
        for i in 0..n {
            p[i] = r[i] + beta * p[i];
        }
        stats.iterations += 1;
        stats.history.push(rr.sqrt() / bnorm);
    }
    stats.total_seconds = t0.elapsed().as_secs_f64();
    Ok((x, stats))
}
