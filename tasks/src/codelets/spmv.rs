//! The SpMV codelets: `y_b += A_b · x` for one CSR row block, and the same with `x` in two
//! parts (a rank's own entries and its halo) for a distributed SpMV's boundary rows.

use std::sync::LazyLock;

use tessera_backends::emu::EmuDevice;
use tessera_engine::{BodyError, Codelet, Read, ReadWrite};

use crate::csr::Csr;
use crate::kernels::{spmv_csr, spmv_csr_split, spmv_flops};

/// Data of an SpMV block task: the block, `x`, the block's slice of `y`.
pub type SpmvData = (Read<Csr>, Read<Vec<f64>>, ReadWrite<Vec<f64>>);

/// Arguments of an SpMV block task.
#[derive(Clone, Copy, Debug)]
pub struct SpmvArgs {
    /// Block index (for the label).
    pub block: usize,
    /// Nonzeros of the block (for the flop count).
    pub nnz: usize,
}

fn check_lengths(x: usize, n_cols: usize, y: usize, n_rows: usize) -> Result<(), BodyError> {
    if x != n_cols || y != n_rows {
        return Err(
            format!("x has {x} entries for {n_cols} columns, y {y} for {n_rows} rows").into(),
        );
    }
    Ok(())
}

/// `SPMV(b)`: `y_b += A_b · x`.
pub static SPMV: LazyLock<Codelet<SpmvData, SpmvArgs>> = LazyLock::new(|| {
    let cl = Codelet::<SpmvData, SpmvArgs>::with_args("spmv")
        .flops(|p| spmv_flops(p.nnz))
        .label(|p| format!("spmv[{}]", p.block))
        .cpu(|_ctx, _p, (a, x, y)| {
            // Checked here as an error; `Csr::spmv` (which picks the kernel for the
            // block's column indices) would panic.
            check_lengths(x.len(), a.n_cols(), y.len(), a.n_rows())?;
            a.spmv(x, y);
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (a, x, y)| {
            let (x, y) = (dev.host(x)?, dev.host_mut(y)?);
            check_lengths(x.len(), a.n_cols, y.len(), a.n_rows)?;
            let (row_ptr, col_idx, vals) = (
                dev.host(a.row_ptr)?,
                dev.host(a.col_idx)?,
                dev.host(a.vals)?,
            );
            // The checked kernel: the block's structure came from a valid
            // `Csr`, but device memory is not the host's to vouch for.
            spmv_csr(row_ptr, col_idx, vals, x, y);
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, _p, (a, x, y)| {
        check_lengths(x.len(), a.n_cols, y.len(), a.n_rows)?;
        Ok(tessera_backends::cuda::views::spmv_csr(
            dev, a.n_cols, a.row_ptr, a.col_idx, a.vals, x, y,
        )?)
    });
    cl
});

/// Data of a boundary-row SpMV task: the block (columns numbered own entries first, then
/// halo entries), the rank's own part of `x`, its halo, the block's slice of `y`.
pub type SpmvHaloData = (
    Read<Csr>,
    Read<Vec<f64>>,
    Read<Vec<f64>>,
    ReadWrite<Vec<f64>>,
);

/// `SPMV_HALO(b)`: `y_b += A_b · [x_own; x_halo]` (CPU only).
pub static SPMV_HALO: LazyLock<Codelet<SpmvHaloData, SpmvArgs>> = LazyLock::new(|| {
    Codelet::<SpmvHaloData, SpmvArgs>::with_args("spmv-halo")
        .flops(|p| spmv_flops(p.nnz))
        .label(|p| format!("spmv-halo[{}]", p.block))
        .cpu(|_ctx, _p, (a, own, halo, y)| {
            check_lengths(own.len() + halo.len(), a.n_cols(), y.len(), a.n_rows())?;
            spmv_csr_split(a.row_ptr(), a.col_idx(), a.vals(), own, halo, y);
            Ok(())
        })
});
