//! Setting up a rank's part of a distributed matrix (the module doc's "Set-up"): its rows,
//! the halo plan agreed with the other ranks by one all-to-all, the columns renumbered, and
//! the rows cut into interior and boundary blocks.

use std::ops::Range;
use std::sync::Arc;

use tessera_engine::dist::allreduce::AsyncAllreduce;
use tessera_engine::dist::halo::{HaloExchange, HaloPlan};
use tessera_engine::dist::{Collectives, Net};
use tessera_engine::Runtime;

use super::{column_partition, partition_rows, Block, DistMatrix, MatrixSource, RankInfo};
use crate::sparse::csr::{partition_row_ptr_by_nnz, Csr};

impl DistMatrix {
    /// Take part in a distributed matrix: every rank calls this with the same `source`,
    /// in the same order relative to its other uses of `net` (it opens a channel and runs an
    /// all-to-all on `coll`). `blocks` is the number of blocks to aim for on this rank;
    /// `compact`: interior blocks get compact column indices where their rows allow
    /// ([`Csr::with_compact_columns`]; boundary blocks read the halo, numbered after the
    /// rank's own entries, and keep `u32` indices).
    pub fn new(
        rt: &Runtime,
        net: &Arc<Net>,
        coll: &Collectives,
        source: &MatrixSource,
        blocks: usize,
        compact: bool,
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
            compact,
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
        compact: bool,
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
                    let block =
                        Csr::new(r, n_own, p, c, v).expect("interior rows read own columns only");
                    if compact {
                        block.with_compact_columns()
                    } else {
                        block
                    }
                };
                let name = format!(
                    "A[{}..{}]{}",
                    own_rows.start + rows.start,
                    own_rows.start + rows.end,
                    if is_boundary { " boundary" } else { "" }
                );
                Block {
                    compact: block.compact_columns().is_some(),
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
            compact: self
                .blocks
                .iter()
                .filter(|b| b.compact)
                .fold((0, 0), |(z, r), b| (z + b.nnz, r + b.rows.len())),
        }
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
