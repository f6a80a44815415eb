//! Distributed SpMV, and the operator the solvers (`crate::solver`: power iteration, CG) run
//! on across ranks: the rows of `A` split over the ranks by nonzeros, each rank holding (and
//! generating or reading) only its rows, `x` split by columns ([`column_partition`]: like the
//! rows for a square matrix, evenly otherwise, PETSc's column layout), and, per multiply, only
//! the *halo* of `x` exchanged: the entries of other ranks that this rank's rows read.
//!
//! # Set-up ([`DistMatrix::new`])
//!
//! 1. Every rank computes the same partition ([`partition_rows`]) from the row lengths alone
//!    ([`MatrixSource::row_ptr`]) and builds its own rows ([`MatrixSource::rows`]).
//! 2. It reads the column pattern of its rows: every column outside its own columns is a
//!    halo entry, owned by the rank whose columns hold that index. The halo is ordered by column, hence by
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
//! The halo exchange (`tessera_engine::dist::halo`) is submitted first (a task gathers the
//! entries sent from `x_own` into an export vector, the sends read it, the receive writes
//! `x_halo` and is held until the messages come), then the
//! interior blocks' tasks (`SPMV`, reading `x_own` only: they run while the halo is on the
//! way), then the boundary blocks' (`SPMV_HALO`, reading `x_own` and `x_halo`: they run once
//! the receive did). Within a row the products are summed in the same order as the
//! single-process SpMV, on the same values of `x`, so the distributed `A·x` is bitwise the
//! single-process one; dot products are sums over ranks of per-rank sums (all-reduce), so CG
//! and power iteration differ from the single-process run by rounding only.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use std::sync::LazyLock;
use tessera_engine::dist::allreduce::{AsyncAllreduce, Part, Then};
use tessera_engine::dist::halo::{self, HaloExchange, HaloPlan};
use tessera_engine::dist::{Collectives, Net};

use tessera_engine::{BodyError, Codelet, DataHandle, Error, Read, Runtime, TaskHandle, Write};
use tessera_tasks::codelets::spmv::{SpmvArgs, SPMV, SPMV_HALO};

use crate::solver::{phases, CgOptions, HaloClock, MultiplyDot, Operator, SharedVec};
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
    /// Every rank's columns (its part of `x`): the row partition for a square matrix, else
    /// [`column_partition`]'s.
    col_partition: Vec<Range<usize>>,
    /// What this rank sends (positions in its part of `x`) and receives.
    plan: HaloPlan,
    /// Positions in `x_own` of the entries sent, in send order (the sends' lists one after
    /// another).
    export_idx: Arc<Vec<u32>>,
    /// Those entries, gathered before each exchange: what the exchange's sends read.
    export: DataHandle<Vec<f64>>,
    /// Each block's rows (from this rank's first row).
    block_rows: Vec<Range<usize>>,
    /// Global column of each halo entry, in halo order.
    halo_cols: Vec<usize>,
    /// The halo, written by the exchange's receive, read by the boundary blocks.
    halo: DataHandle<Vec<f64>>,
    /// The solvers' dot products, summed over the ranks as tasks.
    allreduce: AsyncAllreduce,
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
        let col_partition = column_partition(&partition, n_cols);
        // Messages go into `rt`'s trace when it records one.
        net.record_messages(rt.message_log(rank));
        let own_rows = partition[rank].clone();
        if local.n_rows() != own_rows.len() || local.n_cols() != n_cols {
            return Err(format!(
                "rank {rank}: its rows are {} × {}, expected {} × {n_cols}",
                local.n_rows(),
                local.n_cols(),
                own_rows.len()
            ));
        }
        // From here on, `own` is this rank's part of `x`: its columns.
        let own = col_partition[rank].clone();
        let n_own = own.len();
        let n_own_rows = own_rows.len();
        let owner_of = |c: usize| col_partition.partition_point(|r| r.end <= c);

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
        let boundary: Vec<bool> = (0..n_own_rows)
            .map(|i| {
                col_idx[lrow_ptr[i]..lrow_ptr[i + 1]]
                    .iter()
                    .any(|&c| c as usize >= n_own)
            })
            .collect();
        let local_nnz = lrow_ptr[n_own_rows];
        let local = Csr::new(n_own_rows, n_local_cols, lrow_ptr, col_idx, vals)
            .map_err(|e| format!("rank {rank}: renumbered rows: {e}"))?;

        let blocks: Vec<Block> = cut_blocks(&local, &boundary, blocks.max(1))
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
                    own_rows.start + rows.start,
                    own_rows.start + rows.end,
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
        // The exchange sends from `export`, the sent entries gathered in send order (see
        // `submit_exchange`).
        let mut export_idx = Vec::with_capacity(plan.sent());
        let mut export_sends = Vec::with_capacity(plan.sends.len());
        for (to, idx) in &plan.sends {
            let start = export_idx.len() as u32;
            export_idx.extend_from_slice(idx);
            export_sends.push((*to, (start..export_idx.len() as u32).collect()));
        }
        let export = rt.register_replicable_named(vec![0.0; export_idx.len()], "x export");
        let exchange = HaloExchange::new(
            net,
            HaloPlan {
                sends: export_sends,
                recvs: plan.recvs.clone(),
            },
        );
        let allreduce = AsyncAllreduce::new(net);
        let block_rows = blocks.iter().map(|b: &Block| b.rows.clone()).collect();
        Ok(DistMatrix {
            net: Arc::clone(net),
            rank,
            col_partition,
            plan,
            export_idx: Arc::new(export_idx),
            export,
            block_rows,
            partition,
            n_rows,
            n_cols,
            nnz,
            local_nnz,
            blocks,
            exchange,
            halo_cols,
            halo,
            allreduce,
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

    /// Every rank's columns: its part of `x`.
    pub fn column_partition(&self) -> &[Range<usize>] {
        &self.col_partition
    }

    /// This rank's columns: the entries of `x` it holds.
    pub fn own_cols(&self) -> Range<usize> {
        self.col_partition[self.rank].clone()
    }

    /// The exchange's plan on this rank (sends as positions in its part of `x`).
    pub fn plan(&self) -> &HaloPlan {
        &self.plan
    }

    /// This rank's numbers.
    pub fn info(&self) -> RankInfo {
        let plan = &self.plan;
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
        self.submit_exchange(rt, Gather::Handle(x_own))?;
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

    /// Submit one halo exchange of `x`: a task gathers the entries sent into `export`
    /// (`O(halo)`), then the exchange's sends read `export` and its receive writes `halo`.
    /// Gathering first lets `x` be a data handle ([`submit_multiply`](Self::submit_multiply))
    /// or a solver's shared vector (`crate::solver::vector`), which cannot be a handle.
    /// Returns the gather task, if any: the one task of the exchange that reads `x`.
    fn submit_exchange(&self, rt: &Runtime, x: Gather<'_>) -> Result<Option<TaskHandle>, Error> {
        let mut reads_x = None;
        if !self.export_idx.is_empty() {
            let idx = Arc::clone(&self.export_idx);
            let gather = move |x: &[f64], out: &mut Vec<f64>| -> Result<(), BodyError> {
                for (o, &i) in out.iter_mut().zip(idx.iter()) {
                    *o = *x.get(i as usize).ok_or_else(|| {
                        format!("halo entry {i} is past the {} owned entries", x.len())
                    })?;
                }
                Ok(())
            };
            let t = match x {
                Gather::Handle(h) => rt
                    .task(&HALO_GATHER, (h.r(), self.export.w()))
                    .cpu_only()
                    .cpu(move |(x, out)| gather(x, out))
                    .submit()?,
                Gather::Shared(v, after) => {
                    let v = Arc::clone(v);
                    let mut t = rt
                        .task(&HALO_GATHER_SHARED, (self.export.w(),))
                        .cpu_only()
                        // SAFETY (vector discipline): the multiply phase only reads `x`.
                        .cpu(move |(out,)| gather(unsafe { v.all() }, out));
                    if let Some(h) = after {
                        t = t.after(h);
                    }
                    t.submit()?
                }
            };
            reads_x = Some(t);
        }
        self.exchange.submit(rt, &self.export, &self.halo)?;
        Ok(reads_x)
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
        rt.unregister(self.export)?;
        Ok(())
    }

    fn block_ref(&self, k: usize) -> phases::BlockRef<'_> {
        let b = &self.blocks[k];
        phases::BlockRef {
            a: &b.a,
            index: k,
            nnz: b.nnz,
            rows: b.rows.clone(),
        }
    }
}

/// Where the halo's entries are gathered from.
enum Gather<'a> {
    Handle(&'a DataHandle<Vec<f64>>),
    /// A shared vector, ready once the task given (if any) ended.
    Shared(&'a Arc<SharedVec>, Option<&'a TaskHandle>),
}

/// `export = x[export_idx]`, from a handle.
type GatherCodelet = Codelet<(Read<Vec<f64>>, Write<Vec<f64>>)>;
static HALO_GATHER: LazyLock<GatherCodelet> = LazyLock::new(|| Codelet::new("halo-gather"));
/// `export = x[export_idx]`, from a solver's shared vector.
static HALO_GATHER_SHARED: LazyLock<Codelet<(Write<Vec<f64>>,)>> =
    LazyLock::new(|| Codelet::new("halo-gather"));

/// Every rank's columns (its part of `x`, PETSc's column layout): like the rows for a
/// square matrix, so that `x` and `A·x` are split alike; otherwise `n_cols` split evenly, the
/// first `n_cols mod ranks` ranks one more (PETSc's `PetscSplitOwnership`).
pub fn column_partition(rows: &[Range<usize>], n_cols: usize) -> Vec<Range<usize>> {
    let n_rows = rows.last().map_or(0, |r| r.end);
    if n_rows == n_cols {
        return rows.to_vec();
    }
    let size = rows.len().max(1);
    let (base, extra) = (n_cols / size, n_cols % size);
    let mut start = 0;
    (0..rows.len())
        .map(|r| {
            let len = base + usize::from(r < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// A rank's part of a distributed matrix with its collectives: the solvers' operator
/// (`crate::solver`), dot products all-reduced over the ranks.
pub struct DistOperator<'a> {
    /// The matrix.
    pub a: &'a DistMatrix,
    /// The collectives of its ranks.
    pub coll: &'a Collectives,
    /// The halo waits of its multiplies.
    clock: Arc<HaloClock>,
}

impl<'a> DistOperator<'a> {
    /// The operator of `a` over `coll`.
    pub fn new(a: &'a DistMatrix, coll: &'a Collectives) -> DistOperator<'a> {
        DistOperator {
            a,
            coll,
            clock: Arc::default(),
        }
    }
}

impl Operator for DistOperator<'_> {
    fn shape(&self) -> (usize, usize) {
        (self.a.n_rows, self.a.n_cols)
    }

    fn row_blocks(&self) -> &[Range<usize>] {
        &self.a.block_rows
    }

    fn local_rows(&self) -> usize {
        self.a.own_rows().len()
    }

    fn first_row(&self) -> usize {
        self.a.own_rows().start
    }

    fn submit_multiply_dot(
        &self,
        rt: &Runtime,
        m: &MultiplyDot<'_>,
    ) -> Result<Vec<TaskHandle>, Error> {
        let a = self.a;
        // The gather reads `x` as the blocks do: what writes `x` next must go after it too.
        let mut out: Vec<TaskHandle> = a
            .submit_exchange(rt, Gather::Shared(m.x, m.after))?
            .into_iter()
            .collect();
        // Interior blocks first: they need nothing from the network.
        for boundary in [false, true] {
            for (k, b) in a.blocks.iter().enumerate() {
                if b.boundary == boundary {
                    let halo = boundary.then_some(&a.halo);
                    out.push(phases::submit_multiply_dot(
                        rt,
                        a.block_ref(k),
                        halo,
                        m,
                        Some(&self.clock),
                    )?);
                }
            }
        }
        Ok(out)
    }

    fn submit_diagonal(&self, rt: &Runtime, d: &Arc<SharedVec>) -> Result<(), Error> {
        for k in 0..self.a.blocks.len() {
            phases::submit_diagonal(rt, self.a.block_ref(k), d)?;
        }
        Ok(())
    }

    fn wait(&self, rt: &Runtime) -> Result<(), Error> {
        self.a.wait(rt)
    }

    fn wait_for(&self, rt: &Runtime, task: &TaskHandle) -> Result<(), Error> {
        // Poll, so that another rank's abort ends the wait; a failure here (every solver
        // task is a successor of the ones before, so `task` then fails or is cancelled)
        // goes through `wait`, which tells the other ranks.
        loop {
            match rt.wait_timeout(task, std::time::Duration::from_millis(20)) {
                Ok(()) => return Ok(()),
                Err(Error::Timeout(_)) => {
                    if let Some(why) = self.a.net.aborted() {
                        return Err(Error::Remote(why));
                    }
                }
                Err(e) => return Err(self.wait(rt).err().unwrap_or(e)),
            }
        }
    }

    fn sum(&self, v: &mut [f64]) -> Result<(), Error> {
        self.coll.allreduce_sum(v).map_err(Error::Remote)
    }

    fn submit_sum(
        &self,
        rt: &Runtime,
        after: &[TaskHandle],
        part: Part,
        then: Then,
    ) -> Result<TaskHandle, Error> {
        self.a.allreduce.submit(rt, after, part, then)
    }

    fn halo_clock(&self) -> Option<Arc<HaloClock>> {
        Some(Arc::clone(&self.clock))
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

#[cfg(test)]
mod tests {
    // Proves the block cutting rule: blocks cover the rows in order, each all interior or all
    // boundary, short interior runs folded into the boundary.
    use super::*;

    #[test]
    fn columns_follow_the_rows_when_square_and_split_evenly_otherwise() {
        let rows = vec![0..3, 3..10, 10..12];
        assert_eq!(column_partition(&rows, 12), rows);
        assert_eq!(column_partition(&rows, 8), vec![0..3, 3..6, 6..8]);
        assert_eq!(column_partition(&rows, 2), vec![0..1, 1..2, 2..2]);
        let no_rows: Vec<Range<usize>> = std::iter::once(0..0).collect();
        let one = column_partition(&no_rows, 5);
        assert_eq!((one.len(), one[0].clone()), (1, 0..5));
    }

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
