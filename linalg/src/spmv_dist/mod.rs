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

//!
//! # Files
//!
//! - `layout`: the set-up above (halo plan, renumbering, blocks);
//! - `multiply`: one multiply and its halo exchange;
//! - `operator`: [`DistOperator`], the solvers' operator (`crate::solver`);
//! - `driver`: the runs (repeated SpMV, power iteration, CG) with their traffic.

mod driver;
mod layout;
mod multiply;
mod operator;

use std::ops::Range;
use std::sync::Arc;

use tessera_engine::dist::allreduce::AsyncAllreduce;
use tessera_engine::dist::halo::{HaloExchange, HaloPlan};
use tessera_engine::dist::Net;
use tessera_engine::DataHandle;

use crate::sparse::csr::{partition_row_ptr_by_nnz, Csr};
use crate::sparse::gen::GenSpec;
use crate::sparse::mm::MatrixMarketRows;

pub use driver::{
    conjugate_gradient, conjugate_gradient_with, power_iteration, repeated_spmv, DistStats,
};
pub use operator::DistOperator;

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
    /// Holds compact column indices (`Csr::with_compact_columns`).
    compact: bool,
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
    /// Nonzeros and rows of this rank's blocks that hold compact column indices
    /// (`Csr::with_compact_columns`).
    pub compact: (usize, usize),
}

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

#[cfg(test)]
mod tests {
    // Proves the column layout: like the rows when square, even otherwise.
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
}
