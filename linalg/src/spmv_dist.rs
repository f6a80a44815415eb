//! Distributed SpMV, power iteration and CG: the rows of `A` split over the ranks by
//! nonzeros, each rank holding (and generating or reading) only its rows, `x` split like
//! the rows, and, per multiply, only the *halo* of `x` exchanged: the entries of other ranks
//! that this rank's rows read.
//!
//! # Set-up ([`DistMatrix::new`])
//!
//! 1. Every rank computes the same partition ([`partition_rows`]) from the row lengths alone
//!    ([`MatrixSource::row_ptr`]) and builds its own rows ([`MatrixSource::rows`]).
//! 2. It reads the column pattern of its rows: every column outside its rows is a halo entry,
//!    owned by the rank whose rows hold that index. The halo is ordered by column, hence by
//!    owner; one all-to-all tells each owner which of its entries this rank reads (and in
//!    which order), so each rank learns whom it sends what without anyone holding the whole
//!    pattern.
//! 3. Columns are renumbered: own entries `0..n_own`, halo entries `n_own..` in halo order.
//!    Rows that read no halo entry are *interior*, the others *boundary*. The rows are cut
//!    into blocks of about equal nonzeros that are all interior or all boundary (a run of
//!    interior rows too short to be worth a block of its own joins the boundary), each block
//!    a data handle kept registered.
//!
//! # One multiply ([`DistMatrix::submit_multiply`])
//!
//! The halo exchange (`tessera_engine::dist::halo`) is submitted first (its sends read
//! `x_own`, its receive writes `x_halo` and is held until the messages come), then the
//! interior blocks' tasks (`SPMV`, reading `x_own` only: they run while the halo is on the
//! way), then the boundary blocks' (`SPMV_HALO`, reading `x_own` and `x_halo`: they run once
//! the receive did). Within a row the products are summed in the same order as the
//! single-process SpMV, on the same values of `x`, so the distributed `A·x` is bitwise the
//! single-process one; dot products are sums over ranks of per-rank sums (all-reduce), so CG
//! and power iteration differ from the single-process run by rounding only.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::dist::halo::{self, HaloExchange, HaloPlan};
use tessera_engine::dist::{Collectives, Net};
use tessera_engine::{DataHandle, Error, Runtime};
use tessera_tasks::codelets::spmv::{SpmvArgs, SPMV, SPMV_HALO};

use crate::sparse::csr::{partition_row_ptr_by_nnz, Csr};
use crate::sparse::gen::GenSpec;
use crate::sparse::mm::MatrixMarketRows;
use crate::spmv::IterStats;

/// Where a distributed run's matrix comes from: each rank builds or reads only its rows.
pub enum MatrixSource {
    /// A generator spec (`stencil27:150`, ...).
    Gen(GenSpec),
    /// A Matrix Market file, scanned once for its row lengths.
    MatrixMarket(MatrixMarketRows),
}

impl MatrixSource {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        match self {
            MatrixSource::Gen(g) => g.n_rows(),
            MatrixSource::MatrixMarket(m) => m.n_rows(),
        }
    }

    /// Columns.
    pub fn n_cols(&self) -> usize {
        match self {
            MatrixSource::Gen(g) => g.n_cols(),
            MatrixSource::MatrixMarket(m) => m.n_cols(),
        }
    }

    /// Row offsets of the whole matrix (for a Matrix Market file, repeated positions counted
    /// each time), without building it.
    pub fn row_ptr(&self) -> Vec<usize> {
        match self {
            MatrixSource::Gen(g) => g.row_ptr(),
            MatrixSource::MatrixMarket(m) => m.row_ptr().to_vec(),
        }
    }

    /// Rows `range` alone (global column indices).
    pub fn rows(&self, range: Range<usize>) -> Result<Csr, String> {
        match self {
            MatrixSource::Gen(g) => Ok(g.rows(range)),
            MatrixSource::MatrixMarket(m) => m.rows(range).map_err(|e| e.to_string()),
        }
    }
}

/// The rows of each of `ranks` ranks: contiguous, in rank order, about equal nonzeros
/// ([`partition_row_ptr_by_nnz`]); the same on every rank.
pub fn partition_rows(row_ptr: &[usize], ranks: usize) -> Vec<Range<usize>> {
    partition_row_ptr_by_nnz(row_ptr, ranks)
}

/// A block of a rank's rows, registered with its runtime.
struct Block {
    a: DataHandle<Csr>,
    /// Rows, numbered from the rank's first row.
    rows: Range<usize>,
    nnz: usize,
    /// Reads the halo (`SPMV_HALO`), or only own entries (`SPMV`).
    boundary: bool,
}

/// What a rank holds of a distributed matrix (see the module doc).
pub struct DistMatrix {
    net: Arc<Net>,
    rank: usize,
    partition: Vec<Range<usize>>,
    n_rows: usize,
    n_cols: usize,
    nnz: usize,
    local_nnz: usize,
    blocks: Vec<Block>,
    exchange: HaloExchange,
    /// Global column of each halo entry, in halo order.
    halo_cols: Vec<usize>,
    /// The halo, written by the exchange's receive, read by the boundary blocks.
    halo: DataHandle<Vec<f64>>,
}

/// A rank's numbers, for its report line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankInfo {
    /// This rank.
    pub rank: usize,
    /// Its rows (global numbering).
    pub rows: Range<usize>,
    /// Nonzeros of its rows.
    pub nnz: usize,
    /// Halo entries it receives per multiply, and from how many ranks.
    pub halo_in: usize,
    /// Ranks it receives from.
    pub sources: usize,
    /// Entries it sends per multiply.
    pub halo_out: usize,
    /// Ranks it sends to.
    pub destinations: usize,
    /// Bytes of the halo messages it sends per multiply (values and headers).
    pub halo_bytes_out: usize,
    /// Blocks: interior, boundary.
    pub blocks: (usize, usize),
    /// Nonzeros in boundary blocks.
    pub boundary_nnz: usize,
}

impl DistMatrix {
    /// Take part in a distributed matrix: every rank calls this with the same `source`,
    /// in the same order relative to its other uses of `net` (it opens a channel and runs an
    /// all-to-all on `coll`). `blocks` is the number of blocks to aim for on this rank.
    pub fn new(
        rt: &Runtime,
        net: &Arc<Net>,
        coll: &Collectives,
        source: &MatrixSource,
        blocks: usize,
    ) -> Result<DistMatrix, String> {
        let (rank, size) = (net.rank(), net.size());
        let row_ptr = source.row_ptr();
        let partition = partition_rows(&row_ptr, size);
        let nnz = row_ptr[source.n_rows()];
        drop(row_ptr);
        let own = partition[rank].clone();
        let local = source.rows(own.clone())?;
        DistMatrix::from_rows(
            rt,
            net,
            coll,
            partition,
            local,
            nnz,
            source.n_cols(),
            blocks,
        )
    }

    /// [`new`](Self::new) from this rank's rows, already built (`local`: rows
    /// `partition[rank]`, global columns), `nnz` the whole matrix's.
    #[allow(clippy::too_many_arguments)]
    pub fn from_rows(
        rt: &Runtime,
        net: &Arc<Net>,
        coll: &Collectives,
        partition: Vec<Range<usize>>,
        local: Csr,
        nnz: usize,
        n_cols: usize,
        blocks: usize,
    ) -> Result<DistMatrix, String> {
        let (rank, size) = (net.rank(), net.size());
        if partition.len() != size {
            return Err(format!(
                "a partition of {} parts for {size} ranks",
                partition.len()
            ));
        }
        let n_rows = partition.last().map_or(0, |r| r.end);
        if n_rows != n_cols {
            return Err(format!(
                "distributed SpMV needs a square matrix (x is split like the rows), got {n_rows} × {n_cols}"
            ));
        }
        // Messages go into `rt`'s trace when it records one.
        net.record_messages(rt.message_log(rank));
        let own = partition[rank].clone();
        let n_own = own.len();
        if local.n_rows() != n_own || local.n_cols() != n_cols {
            return Err(format!(
                "rank {rank}: its rows are {} × {}, expected {n_own} × {n_cols}",
                local.n_rows(),
                local.n_cols()
            ));
        }
        let owner_of = |c: usize| partition.partition_point(|r| r.end <= c);

        // The halo: every column outside the own rows, sorted (hence grouped by owner).
        let mut halo_cols: Vec<usize> = local
            .col_idx()
            .iter()
            .map(|&c| c as usize)
            .filter(|c| !own.contains(c))
            .collect();
        halo_cols.sort_unstable();
        halo_cols.dedup();

        // Tell each owner what this rank reads of its entries.
        let mut wanted: Vec<Vec<u8>> = vec![Vec::new(); size];
        let mut recvs: Vec<(usize, Range<usize>)> = Vec::new();
        for (k, &c) in halo_cols.iter().enumerate() {
            let r = owner_of(c);
            wanted[r].extend_from_slice(&(c as u64).to_le_bytes());
            match recvs.last_mut() {
                Some((src, range)) if *src == r => range.end = k + 1,
                _ => recvs.push((r, k..k + 1)),
            }
        }
        let asked = coll.alltoall(&wanted)?;
        let mut sends: Vec<(usize, Vec<u32>)> = Vec::new();
        for (from, list) in asked.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            if from == rank || list.len() % 8 != 0 {
                return Err(format!(
                    "rank {rank}: a malformed halo request from rank {from} ({} bytes)",
                    list.len()
                ));
            }
            let idx = list
                .chunks_exact(8)
                .map(|b| {
                    let c = u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize;
                    if own.contains(&c) {
                        Ok((c - own.start) as u32)
                    } else {
                        Err(format!(
                            "rank {from} asks rank {rank} for entry {c}, which is not in its rows {own:?} (do the ranks use the same matrix?)"
                        ))
                    }
                })
                .collect::<Result<Vec<u32>, String>>()?;
            sends.push((from, idx));
        }

        // Columns renumbered: own entries first, then the halo in halo order.
        let (_, _, lrow_ptr, mut col_idx, vals) = local.into_parts();
        for c in col_idx.iter_mut() {
            let g = *c as usize;
            *c = if own.contains(&g) {
                (g - own.start) as u32
            } else {
                let k = halo_cols
                    .binary_search(&g)
                    .expect("every halo column listed");
                (n_own + k) as u32
            };
        }
        let n_local_cols = n_own + halo_cols.len();
        let boundary: Vec<bool> = (0..n_own)
            .map(|i| {
                col_idx[lrow_ptr[i]..lrow_ptr[i + 1]]
                    .iter()
                    .any(|&c| c as usize >= n_own)
            })
            .collect();
        let local_nnz = lrow_ptr[n_own];
        let local = Csr::new(n_own, n_local_cols, lrow_ptr, col_idx, vals)
            .map_err(|e| format!("rank {rank}: renumbered rows: {e}"))?;

        let blocks = cut_blocks(&local, &boundary, blocks.max(1))
            .into_iter()
            .map(|(rows, is_boundary)| {
                let block = local.row_block(rows.clone());
                let nnz = block.nnz();
                let block = if is_boundary {
                    block
                } else {
                    // Interior rows read own entries only: `x` is `x_own`.
                    let (r, _, p, c, v) = block.into_parts();
                    Csr::new(r, n_own, p, c, v).expect("interior rows read own columns only")
                };
                let name = format!(
                    "A[{}..{}]{}",
                    own.start + rows.start,
                    own.start + rows.end,
                    if is_boundary { " boundary" } else { "" }
                );
                Block {
                    a: rt.register_replicable_named(block, name),
                    rows,
                    nnz,
                    boundary: is_boundary,
                }
            })
            .collect();
        let plan = HaloPlan { sends, recvs };
        let halo = rt.register_replicable_named(vec![0.0; plan.received()], "x halo");
        let exchange = HaloExchange::new(net, plan);
        Ok(DistMatrix {
            net: Arc::clone(net),
            rank,
            partition,
            n_rows,
            n_cols,
            nnz,
            local_nnz,
            blocks,
            exchange,
            halo_cols,
            halo,
        })
    }

    /// Rows, columns, nonzeros of the whole matrix.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.n_rows, self.n_cols, self.nnz)
    }

    /// Every rank's rows.
    pub fn partition(&self) -> &[Range<usize>] {
        &self.partition
    }

    /// This rank's rows.
    pub fn own_rows(&self) -> Range<usize> {
        self.partition[self.rank].clone()
    }

    /// Global columns of this rank's halo entries, in halo order.
    pub fn halo_columns(&self) -> &[usize] {
        &self.halo_cols
    }

    /// The exchange's plan on this rank.
    pub fn plan(&self) -> &HaloPlan {
        self.exchange.plan()
    }

    /// This rank's numbers.
    pub fn info(&self) -> RankInfo {
        let plan = self.exchange.plan();
        let boundary = self.blocks.iter().filter(|b| b.boundary).count();
        RankInfo {
            rank: self.rank,
            rows: self.own_rows(),
            nnz: self.local_nnz,
            halo_in: plan.received(),
            sources: plan.recvs.len(),
            halo_out: plan.sent(),
            destinations: plan.sends.len(),
            halo_bytes_out: plan.message_bytes_sent(),
            blocks: (self.blocks.len() - boundary, boundary),
            boundary_nnz: self
                .blocks
                .iter()
                .filter(|b| b.boundary)
                .map(|b| b.nnz)
                .sum(),
        }
    }

    /// A zero vector split like this rank's blocks.
    fn register_blocked_zeros(&self, rt: &Runtime) -> Vec<DataHandle<Vec<f64>>> {
        self.blocks
            .iter()
            .map(|b| rt.register_replicable(vec![0.0; b.rows.len()]))
            .collect()
    }

    /// Submit `y_b += A_b · x` for every block of this rank (`x_own`: this rank's entries of
    /// `x`), with the halo exchange first (see the module doc). Does not wait.
    pub fn submit_multiply(
        &self,
        rt: &Runtime,
        x_own: &DataHandle<Vec<f64>>,
        y: &[DataHandle<Vec<f64>>],
    ) -> Result<(), Error> {
        assert_eq!(
            y.len(),
            self.blocks.len(),
            "y must be split like the blocks"
        );
        self.exchange.submit(rt, x_own, &self.halo)?;
        // Interior blocks first: they need nothing from the network.
        for boundary in [false, true] {
            for (k, (b, yb)) in self.blocks.iter().zip(y).enumerate() {
                if b.boundary != boundary {
                    continue;
                }
                let args = SpmvArgs {
                    block: k,
                    nnz: b.nnz,
                };
                if boundary {
                    rt.task(&SPMV_HALO, (b.a.r(), x_own.r(), self.halo.r(), yb.rw()))
                        .args(args)
                        .submit()?;
                } else {
                    rt.task(&SPMV, (b.a.r(), x_own.r(), yb.rw()))
                        .args(args)
                        .submit()?;
                }
            }
        }
        Ok(())
    }

    /// Wait for this rank's tasks (see `tessera_engine::dist::halo::wait_all`).
    pub fn wait(&self, rt: &Runtime) -> Result<(), Error> {
        halo::wait_all(rt, &self.net)
    }

    /// Gather a vector split like the blocks into this rank's part.
    fn gather(&self, rt: &Runtime, y: Vec<DataHandle<Vec<f64>>>) -> Result<Vec<f64>, Error> {
        let mut out = vec![0.0; self.own_rows().len()];
        for (b, h) in self.blocks.iter().zip(y) {
            out[b.rows.clone()].copy_from_slice(&rt.unregister(h)?);
        }
        Ok(out)
    }

    /// One `A·p` into a fresh vector, `p` (this rank's part) moved in and out.
    fn multiply(&self, rt: &Runtime, p: Vec<f64>) -> Result<(Vec<f64>, Vec<f64>), Error> {
        let ph = rt.register_replicable_named(p, "p");
        let q = self.register_blocked_zeros(rt);
        self.submit_multiply(rt, &ph, &q)?;
        self.wait(rt)?;
        Ok((rt.unregister(ph)?, self.gather(rt, q)?))
    }

    /// `A·x` for this rank's rows (`x_own`: this rank's part of `x`), waiting for it.
    pub fn apply(&self, rt: &Runtime, x_own: Vec<f64>) -> Result<Vec<f64>, Error> {
        Ok(self.multiply(rt, x_own)?.1)
    }

    /// Give the blocks and the halo back (unregister them).
    pub fn unregister(self, rt: &Runtime) -> Result<(), Error> {
        for b in self.blocks {
            rt.unregister(b.a)?;
        }
        rt.unregister(self.halo)?;
        Ok(())
    }
}

/// Cut `a`'s rows into blocks of about `nnz / parts` entries, each all interior or all
/// boundary rows (`boundary[i]`); a run of interior rows under a quarter of a block joins
/// the boundary rows around it. Returns (rows, is boundary) in row order.
fn cut_blocks(a: &Csr, boundary: &[bool], parts: usize) -> Vec<(Range<usize>, bool)> {
    let n = a.n_rows();
    let rp = a.row_ptr();
    let target = (a.nnz() / parts).max(1);
    // Runs of rows of one kind.
    let mut runs: Vec<(Range<usize>, bool)> = Vec::new();
    for (i, &bi) in boundary.iter().enumerate().take(n) {
        match runs.last_mut() {
            Some((r, b)) if *b == bi => r.end = i + 1,
            _ => runs.push((i..i + 1, bi)),
        }
    }
    // Short interior runs become boundary rows, then neighbours of one kind merge.
    for (r, b) in runs.iter_mut() {
        if !*b && rp[r.end] - rp[r.start] < target / 4 {
            *b = true;
        }
    }
    let mut merged: Vec<(Range<usize>, bool)> = Vec::new();
    for (r, b) in runs {
        match merged.last_mut() {
            Some((m, mb)) if *mb == b => m.end = r.end,
            _ => merged.push((r, b)),
        }
    }
    // Each run cut into blocks of about `target` entries.
    let mut out = Vec::new();
    for (r, b) in merged {
        let nnz = rp[r.end] - rp[r.start];
        let k = nnz.div_ceil(target).clamp(1, r.len());
        for sub in partition_row_ptr_by_nnz(&rp[r.start..=r.end], k) {
            if !sub.is_empty() {
                out.push((r.start + sub.start..r.start + sub.end, b));
            }
        }
    }
    out
}

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
                history: Vec::new(),
            },
            bytes_sent: after.0 - before.0,
            messages_sent: after.1 - before.1,
        },
    ))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `Σ over ranks of a·b` (each rank's sum first, then the ranks' in rank order).
fn dot_all(coll: &Collectives, a: &[f64], b: &[f64]) -> Result<f64, Error> {
    let mut v = [dot(a, b)];
    coll.allreduce_sum(&mut v).map_err(Error::Remote)?;
    Ok(v[0])
}

/// Power iteration, distributed: `||A·x||` per iteration from `x0` normalised (`x0_own`:
/// this rank's part). Returns this rank's part of the last `x`.
pub fn power_iteration(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    x0_own: Vec<f64>,
    iters: usize,
) -> Result<(Vec<f64>, DistStats), Error> {
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let before = traffic(&a.net);
    let norm = dot_all(coll, &x0_own, &x0_own)?.sqrt();
    let mut x: Vec<f64> = x0_own.into_iter().map(|v| v / norm).collect();
    for _ in 0..iters {
        let ts = Instant::now();
        let (_, y) = a.multiply(rt, x)?;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let lambda = dot_all(coll, &y, &y)?.sqrt();
        if lambda == 0.0 || !lambda.is_finite() {
            return Err(Error::Config(format!(
                "power iteration broke down: ||A·x|| = {lambda}"
            )));
        }
        stats.history.push(lambda);
        stats.iterations += 1;
        x = y.into_iter().map(|v| v / lambda).collect();
    }
    stats.total_seconds = t0.elapsed().as_secs_f64();
    let after = traffic(&a.net);
    Ok((
        x,
        DistStats {
            iter: stats,
            bytes_sent: after.0 - before.0,
            messages_sent: after.1 - before.1,
        },
    ))
}

/// Conjugate gradient, distributed, from `x = 0`: the same steps as the single-process
/// `crate::spmv::conjugate_gradient`, dot products all-reduced. `b_own`: this rank's part
/// of `b`; returns this rank's part of `x`. History: `||r||/||b||`.
pub fn conjugate_gradient(
    rt: &Runtime,
    coll: &Collectives,
    a: &DistMatrix,
    b_own: &[f64],
    tol: f64,
    max_iters: usize,
) -> Result<(Vec<f64>, DistStats), Error> {
    let mut stats = IterStats::default();
    let t0 = Instant::now();
    let before = traffic(&a.net);
    let n = b_own.len();
    let bnorm = dot_all(coll, b_own, b_own)?.sqrt().max(f64::MIN_POSITIVE);
    let mut x = vec![0.0; n];
    let mut r = b_own.to_vec();
    let mut p = r.clone();
    let mut rr = dot_all(coll, &r, &r)?;
    for _ in 0..max_iters {
        if rr.sqrt() <= tol * bnorm {
            break;
        }
        let ts = Instant::now();
        let (p_back, q) = a.multiply(rt, p)?;
        p = p_back;
        stats.spmv_seconds += ts.elapsed().as_secs_f64();
        let pq = dot_all(coll, &p, &q)?;
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
        let rr_new = dot_all(coll, &r, &r)?;
        let beta = rr_new / rr;
        rr = rr_new;
        for i in 0..n {
            p[i] = r[i] + beta * p[i];
        }
        stats.iterations += 1;
        stats.history.push(rr.sqrt() / bnorm);
    }
    stats.total_seconds = t0.elapsed().as_secs_f64();
    let after = traffic(&a.net);
    Ok((
        x,
        DistStats {
            iter: stats,
            bytes_sent: after.0 - before.0,
            messages_sent: after.1 - before.1,
        },
    ))
}

#[cfg(test)]
mod tests {
    // Proves the block cutting rule: blocks cover the rows in order, each all interior or all
    // boundary, short interior runs folded into the boundary.
    use super::*;

    #[test]
    fn blocks_cover_rows_and_keep_kinds_apart() {
        let a = crate::sparse::gen::stencil7(6); // 216 rows
        let n = a.n_rows();
        // Boundary rows at both ends, and one interior row alone in the middle of boundary rows.
        let boundary: Vec<bool> = (0..n)
            .map(|i| !(36..180).contains(&i) || (100..120).contains(&i) && i != 110)
            .collect();
        for parts in [1, 2, 5, 16, 1000] {
            let blocks = cut_blocks(&a, &boundary, parts);
            assert_eq!(blocks[0].0.start, 0);
            assert_eq!(blocks.last().unwrap().0.end, n);
            for w in blocks.windows(2) {
                assert_eq!(w[0].0.end, w[1].0.start);
            }
            for (rows, b) in &blocks {
                assert!(!rows.is_empty());
                if !b {
                    assert!(rows.clone().all(|i| !boundary[i]), "{parts}: {rows:?}");
                }
            }
            // Row 110 (interior, alone) sits in a boundary block, unless blocks are so small
            // that one row is worth a block.
            let (_, b110) = blocks.iter().find(|(r, _)| r.contains(&110)).unwrap();
            assert!(*b110 || parts > 16, "{parts}");
        }
    }
}
