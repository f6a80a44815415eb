//! SpMV as a task graph: `y += A·x` over row blocks partitioned by nonzeros,
//! and the iterative drivers built on it (repeated SpMV, the balanced power
//! iteration; power iteration and conjugate gradient are `crate::solver`'s,
//! over this matrix as an `Operator`).
//!
//! The matrix is split once into row blocks, each registered as its own data
//! handle and kept registered across iterations (resident on the node that
//! computes it); per iteration only vectors move. `x` is one handle read by
//! every block task; `y` is one handle per block, so block tasks write
//! disjoint data and run in parallel.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::balance::{Balancer, BalancerConfig, IterationTimes, RateBasis};
use crate::solver::{phases, MultiplyDot, Operator, SharedVec};
use tessera_engine::dist::allreduce::{Part, Then};
use tessera_engine::{Codelet, DataHandle, Error, Runtime, TaskHandle};
use tessera_tasks::codelets::spmv::{SpmvArgs, SPMV};
use tessera_tasks::kernels::{spmv_bytes, spmv_bytes_saved_by_compact};

use crate::sparse::csr::Csr;

/// A matrix split into row blocks registered with a runtime.
pub struct SpmvMatrix {
    blocks: Vec<DataHandle<Csr>>,
    ranges: Vec<Range<usize>>,
    /// Nonzeros of each block.
    block_nnz: Vec<usize>,
    n_rows: usize,
    n_cols: usize,
    nnz: usize,
    bytes: usize,
    /// Nonzeros and rows of the blocks that hold compact column indices.
    compact: (usize, usize),
    /// Memory node every block's task is placed on, if set (`dmda` honours it).
    home: Option<usize>,
}

impl SpmvMatrix {
    /// Split `a` into `parts` row blocks (at most one per row) of about equal nonzeros and
    /// register them, each
    /// with compact column indices where its rows allow ([`Csr::with_compact_columns`]) if
    /// they pay for this matrix ([`Csr::compact_pays`]).
    pub fn new(rt: &Runtime, a: &Csr, parts: usize) -> SpmvMatrix {
        SpmvMatrix::new_with(rt, a, parts, a.compact_pays())
    }

    /// [`SpmvMatrix::new`], with compact column indices where the rows allow if `compact`,
    /// whatever the rows' length (`false`: `u32` indices only).
    pub fn new_with(rt: &Runtime, a: &Csr, parts: usize, compact: bool) -> SpmvMatrix {
        // At most a block per row: more parts would only add empty ranges, as
        // many as asked (`--blocks-per-worker 1e12` allocated 16 TB of bounds).
        let ranges: Vec<Range<usize>> = a
            .partition_by_nnz(parts.clamp(1, a.n_rows().max(1)))
            .into_iter()
            .filter(|r| !r.is_empty())
            .collect();
        let block_nnz = ranges
            .iter()
            .map(|r| a.row_ptr()[r.end] - a.row_ptr()[r.start])
            .collect();
        let mut compact_parts = (0, 0);
        let blocks = ranges
            .iter()
            .map(|r| {
                let block = a.row_block(r.clone());
                let block = if compact {
                    block.with_compact_columns()
                } else {
                    block
                };
                if block.compact_columns().is_some() {
                    compact_parts.0 += block.nnz();
                    compact_parts.1 += block.n_rows();
                }
                rt.register_replicable_named(block, format!("A[{}..{}]", r.start, r.end))
            })
            .collect();
        SpmvMatrix {
            blocks,
            ranges,
            block_nnz,
            n_rows: a.n_rows(),
            n_cols: a.n_cols(),
            nnz: a.nnz(),
            bytes: a.bytes(),
            compact: compact_parts,
            home: None,
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

    /// Bytes one SpMV on the CPU moves at least ([`spmv_bytes`]), less what the blocks with
    /// compact column indices do not read ([`spmv_bytes_saved_by_compact`]): the traffic its
    /// "effective" bandwidth is counted from.
    pub fn traffic_bytes(&self) -> f64 {
        spmv_bytes(self.nnz, self.n_rows, self.n_cols)
            - spmv_bytes_saved_by_compact(self.compact.0, self.compact.1)
    }

    /// Nonzeros held with compact column indices ([`Csr::with_compact_columns`]).
    pub fn compact_nnz(&self) -> usize {
        self.compact.0
    }

    /// Bytes one block task needs on its memory node, for the largest
    /// block: the block itself, all of `x`, and its part of `y`.
    pub fn largest_working_set(&self) -> u64 {
        self.ranges
            .iter()
            .zip(&self.block_nnz)
            .map(|(r, &nnz)| {
                let block = nnz as u64 * 12 + (r.len() as u64 + 1) * 8;
                block + self.n_cols as u64 * 8 + r.len() as u64 * 8
            })
            .max()
            .unwrap_or(0)
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
        for (b, yb) in y.iter().enumerate() {
            self.submit_block(rt, b, x, yb, self.home)?;
        }
        Ok(())
    }

    /// Place every block's task on memory node `node` (e.g. a GPU's, to
    /// measure the device alone; `None`: wherever the scheduler likes). The
    /// blocks then stay resident there across iterations.
    pub fn set_home(&mut self, node: Option<usize>) {
        self.home = node;
    }

    /// Submit `y_b += A_b·x` for block `b`, on memory node `node` if given.
    pub fn submit_block(
        &self,
        rt: &Runtime,
        b: usize,
        x: &DataHandle<Vec<f64>>,
        yb: &DataHandle<Vec<f64>>,
        node: Option<usize>,
    ) -> Result<TaskHandle, Error> {
        let t = rt
            .task(&SPMV, (self.blocks[b].r(), x.r(), yb.rw()))
            .args(SpmvArgs {
                block: b,
                nnz: self.block_nnz[b],
            });
        match node {
            Some(n) => t.on_node(n).submit(),
            None => t.submit(),
        }
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
    /// Seconds spent in SpMV (the block tasks, the solvers' fused dot partials included;
    /// across ranks, the halo exchange overlapped with the interior blocks, not its wait).
    pub spmv_seconds: f64,
    /// Seconds the SpMV's boundary blocks waited for the halo once the interior blocks were
    /// done (CG across ranks; 0 in one process; see `crate::solver::HaloClock`).
    pub halo_seconds: f64,
    /// Seconds spent in the solvers' vector phases.
    pub vector_seconds: f64,
    /// Seconds spent summing dot products: the block partials, and across ranks the
    /// all-reduce's wait (what of it the pipelined CG did not hide behind the SpMV).
    pub reduce_seconds: f64,
    /// Seconds for the whole run.
    pub total_seconds: f64,
    /// Residual norms (CG) or eigenvalue estimates (power), per iteration.
    pub history: Vec<f64>,
    /// Why a solver stopped (`None` for repeated SpMV).
    pub stop: Option<crate::solver::StopReason>,
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
            ..IterStats::default()
        },
    ))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// One power-iteration step after `y = A·x`: record `||y||` and return `y / ||y||`.
fn power_step(y: Vec<f64>, stats: &mut IterStats) -> Result<Vec<f64>, Error> {
    let lambda = dot(&y, &y).sqrt();
    crate::solver::power::record_norm(lambda, stats)?;
    Ok(y.into_iter().map(|v| v / lambda).collect())
}

/// Power iteration: the dominant eigenvalue estimate `||A·x||` per iteration,
/// from `x0` normalised ([`crate::solver::power_iteration`] on this matrix).
pub fn power_iteration(
    rt: &Runtime,
    a: &SpmvMatrix,
    x0: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    crate::solver::power_iteration(rt, a, x0, iters)
}

/// Conjugate gradient on an SPD matrix from `x = 0`, unpreconditioned: stops when
/// `||r|| <= tol·||b||` or after `max_iters`. History: `||r||/||b||`
/// ([`crate::solver::conjugate_gradient`] on this matrix).
pub fn conjugate_gradient(
    rt: &Runtime,
    a: &SpmvMatrix,
    b: &[f64],
    tol: f64,
    max_iters: usize,
) -> Result<(Vec<f64>, IterStats), Error> {
    crate::solver::conjugate_gradient(
        rt,
        a,
        b,
        &crate::solver::CgOptions {
            rtol: tol,
            max_iters,
            pc: crate::solver::Preconditioner::None,
            variant: crate::solver::CgVariant::Standard,
        },
    )
}

impl Operator for SpmvMatrix {
    fn shape(&self) -> (usize, usize) {
        (self.n_rows, self.n_cols)
    }

    fn row_blocks(&self) -> &[Range<usize>] {
        &self.ranges
    }

    fn local_rows(&self) -> usize {
        self.n_rows
    }

    fn submit_multiply_dot(
        &self,
        rt: &Runtime,
        m: &MultiplyDot<'_>,
    ) -> Result<Vec<TaskHandle>, Error> {
        self.ranges
            .iter()
            .enumerate()
            .map(|(b, rows)| {
                phases::submit_multiply_dot(rt, self.block_ref(b, rows), None, m, None)
            })
            .collect()
    }

    fn submit_diagonal(&self, rt: &Runtime, d: &Arc<SharedVec>) -> Result<(), Error> {
        for (b, rows) in self.ranges.iter().enumerate() {
            phases::submit_diagonal(rt, self.block_ref(b, rows), d)?;
        }
        Ok(())
    }

    fn wait(&self, rt: &Runtime) -> Result<(), Error> {
        rt.wait_all()
    }

    fn wait_for(&self, rt: &Runtime, task: &TaskHandle) -> Result<(), Error> {
        match rt.wait(task) {
            Ok(()) => Ok(()),
            // `wait_all` has the failure's message.
            Err(e) => Err(rt.wait_all().err().unwrap_or(e)),
        }
    }

    fn sum(&self, _v: &mut [f64]) -> Result<(), Error> {
        Ok(())
    }

    fn submit_sum(
        &self,
        rt: &Runtime,
        after: &[TaskHandle],
        part: Part,
        then: Then,
    ) -> Result<TaskHandle, Error> {
        phases::submit_local_sum(rt, after, part, then)
    }
}

impl SpmvMatrix {
    fn block_ref(&self, b: usize, rows: &Range<usize>) -> phases::BlockRef<'_> {
        phases::BlockRef {
            a: &self.blocks[b],
            index: b,
            nnz: self.block_nnz[b],
            rows: rows.clone(),
        }
    }
}

/// One iteration of [`balanced_power_iteration`], as the balancer saw it.
#[derive(Clone, Debug)]
pub struct BalancedIteration {
    /// Share of nonzeros given to the device.
    pub fraction: f64,
    /// Host compute, device compute, transfer and iteration times.
    pub times: IterationTimes,
    /// What the balancer logged (state, ratio) for this iteration.
    pub log: String,
}

/// Power iteration with the rows split between the host's CPU workers and
/// one device (memory node `device_node`), the split found at run time by the
/// Roadrunner balancer (`crate::balance`): peak ratio first, then the
/// measured processing rates, then trial and error until the iteration time
/// stops improving. Row blocks are whole tasks; the split moves the boundary
/// between host blocks and device blocks (granularity: one block). Needs the
/// `dmda` scheduler (placement hints). Each iteration sends `x` to the device
/// and brings its part of `y` back; that time is measured separately
/// (`IterationTimes::transfer`) and counts in the device's rate
/// ([`RateBasis::ComputePlusTransfer`]). One untimed warm-up product first
/// places the matrix.
pub fn balanced_power_iteration(
    rt: &Runtime,
    a: &SpmvMatrix,
    x0: Vec<f64>,
    iters: usize,
    device_node: usize,
    peak_host: f64,
    peak_device: f64,
) -> Result<(Vec<f64>, IterStats, Vec<BalancedIteration>), Error> {
    if rt.scheduler_name() != "dmda" {
        return Err(Error::Config(
            "balanced SpMV needs the dmda scheduler (--sched dmda)".into(),
        ));
    }
    // Timings on a shared machine jitter by tens of percent; a 15 % jump
    // (the default) would restart the search on noise, so only a doubling
    // counts as a new workload here. The device's rate includes its
    // transfers: the host's blocks run while `x` goes up and `y` comes back,
    // so only the device's path pays for them. With the paper's compute-only
    // rate an H200 behind a 10 GB/s link was given every row (stop₁ dropped
    // the host, slower than the kernel alone). Either way a balanced
    // iteration there still took about 60 ms against 13 for the host alone:
    // this loop registers `x` and a zeroed `y` and gathers `y` each time.
    let mut balancer = Balancer::with_config(
        peak_host,
        peak_device,
        BalancerConfig {
            jump_tolerance: 1.0,
            rate_basis: RateBasis::ComputePlusTransfer,
            ..BalancerConfig::default()
        },
    );
    let mut log = Vec::new();
    let mut stats = IterStats::default();
    let t_all = Instant::now();
    let norm = dot(&x0, &x0).sqrt();
    let mut x: Vec<f64> = x0.into_iter().map(|v| v / norm).collect();
    // Warm-up, not shown to the balancer and its result dropped: it places
    // the device's blocks of the matrix on the device (a one-time upload that
    // would otherwise count as iteration 1's transfer: 0.46 s of a 0.50 s
    // iteration on an H200) and warms both sides, as the paper's iterations
    // start with the matrix in place.
    product_at(rt, a, x.clone(), balancer.fraction(), device_node)?;
    let mut fraction = balancer.fraction();
    for _ in 0..iters {
        let (y, times, actual) = product_at(rt, a, x, fraction, device_node)?;
        stats.spmv_seconds += times.total;
        x = power_step(y, &mut stats)?;
        let next = balancer
            .next_fraction(&times)
            .unwrap_or_else(|| balancer.fraction());
        log.push(BalancedIteration {
            fraction: actual,
            times,
            log: balancer
                .log()
                .last()
                .map(|e| e.to_string())
                .unwrap_or_default(),
        });
        fraction = next;
    }
    stats.total_seconds = t_all.elapsed().as_secs_f64();
    Ok((x, stats, log))
}

/// The marker task after each side's blocks in [`product_at`]: it notes when that side ended.
static ITERATION_END: std::sync::LazyLock<Codelet<()>> =
    std::sync::LazyLock::new(|| Codelet::<()>::new("iteration-end"));

/// `y = A·x` with the last blocks, holding about `fraction` of the
/// nonzeros, on `device_node` and the rest on the host; returns `y`, the
/// iteration's times as the balancer reads them, and the device's actual
/// share of the nonzeros (the split moves by whole blocks).
fn product_at(
    rt: &Runtime,
    a: &SpmvMatrix,
    x: Vec<f64>,
    fraction: f64,
    device_node: usize,
) -> Result<(Vec<f64>, IterationTimes, f64), Error> {
    let nnz_per_block = &a.block_nnz;
    let total_nnz: usize = nnz_per_block.iter().sum::<usize>().max(1);
    let mut split = nnz_per_block.len();
    let mut on_device = 0usize;
    while split > 0
        && ((on_device + nnz_per_block[split - 1]) as f64)
            <= fraction * total_nnz as f64 + 0.5 * nnz_per_block[split - 1] as f64
    {
        split -= 1;
        on_device += nnz_per_block[split];
    }
    let before = rt.memory_stats();
    let t0 = Instant::now();
    let xh = rt.register_replicable(x);
    let y = a.register_blocked_zeros(rt);
    // The sides' times start here, after the host has registered `x` and zeroed
    // `y` (both count in `total`): from `t0`, that host work read as host
    // compute, and the host's 1.2 % of an 8M-row stencil took
    // 10 ms on an H200 node where all its rows take 13 ms.
    let t_tasks = Instant::now();
    let mut host_tasks = Vec::new();
    let mut device_tasks = Vec::new();
    for (b, yb) in y.iter().enumerate() {
        let node = if b < split { 0 } else { device_node };
        let h = a.submit_block(rt, b, &xh, yb, Some(node))?;
        if b < split {
            host_tasks.push(h)
        } else {
            device_tasks.push(h)
        }
    }
    let ends = [
        Arc::new(Mutex::new(None::<Instant>)),
        Arc::new(Mutex::new(None::<Instant>)),
    ];
    for (side, tasks) in [&host_tasks, &device_tasks].into_iter().enumerate() {
        let end = Arc::clone(&ends[side]);
        let mut t = rt.task(&ITERATION_END, ()).on_node(0).cpu(move |()| {
            *end.lock().map_err(|_| "poisoned")? = Some(Instant::now());
            Ok(())
        });
        for h in tasks {
            t = t.after(h);
        }
        t.submit()?;
    }
    rt.wait_all()?;
    rt.unregister(xh)?;
    let y = gather(rt, y)?;
    let total = t0.elapsed().as_secs_f64();
    let after = rt.memory_stats();
    let transfer = after.transfer_seconds() - before.transfer_seconds();
    let side_time = |i: usize| {
        ends[i]
            .lock()
            .ok()
            .and_then(|e| *e)
            .map_or(0.0, |e| e.duration_since(t_tasks).as_secs_f64())
    };
    let dev_transfer: f64 = after.nodes[device_node]
        .transfer_ns
        .saturating_sub(before.nodes[device_node].transfer_ns) as f64
        * 1e-9;
    let times = IterationTimes {
        host_compute: if host_tasks.is_empty() {
            0.0
        } else {
            side_time(0)
        },
        device_compute: if device_tasks.is_empty() {
            0.0
        } else {
            (side_time(1) - dev_transfer).max(0.0)
        },
        transfer,
        total,
    };
    Ok((y, times, on_device as f64 / total_nnz as f64))
}
