//! The tile LU's operations run once before a timed factorisation.
//!
//! cuSOLVER is opened at its first panel (`solver::dgetrf_panel`), and the
//! CUDA libraries load each kernel at its first launch. In a tile LU that
//! happens inside the first tasks, on the clock: 0.2 s on a warm H200 node,
//! and on a freshly started one (libraries not yet in the file cache) one
//! GPU-only tile LU at N = 22528 ran in 11.8 s against 2.0 s for the same
//! command run again (`bench/results/h200-stop57/`). While the device worker
//! sat in that first call, dmda gave its work to the CPU worker. The
//! device-resident LU warms its own operations (`resident::warm_up`); this is
//! the same for the tile path.

use tessera_engine::device::DeviceMemory;

use super::solver::PanelError;
use super::{blas, kernels, solver, CudaDevice};

/// Runs each operation of the tile LU once at tile size `nb` (the panel over
/// two tiles, the row interchanges, the triangular solve and the matrix
/// product) on scratch buffers of this device, and waits for them. The
/// matrices are small and exact (an identity over zeros), so nothing is
/// singular; the buffers are freed on return.
pub fn warm_up_lu(dev: &CudaDevice, nb: usize) -> Result<(), String> {
    if nb == 0 {
        return Ok(());
    }
    let err = |e: String| {
        format!(
            "cuda{}: warm-up of the LU operations: {e}",
            dev.info().index
        )
    };
    let tile = nb * nb;
    let mut host = vec![0.0f64; 2 * tile];
    for i in 0..nb {
        host[i + i * nb] = 1.0;
    }
    // Two panel tiles (identity above zeros), then B and C for TRSM and GEMM.
    let panel = dev.alloc(2 * tile * 8).map_err(err)?;
    let others = dev.alloc(2 * tile * 8).map_err(err)?;
    dev.upload(bytemuck::cast_slice(&host), &*panel)
        .map_err(err)?;
    host.fill(0.0);
    dev.upload(bytemuck::cast_slice(&host), &*others)
        .map_err(err)?;
    let (top, bottom) = (panel.ptr(), panel.ptr() + (tile * 8) as u64);
    let (b, c) = (others.ptr(), others.ptr() + (tile * 8) as u64);
    let tiles = [(top, nb), (bottom, nb)];
    // SAFETY: `panel` holds the two nb × nb tiles, `others` B and C, all
    // live allocations of this device, used by nothing else; every call is
    // on the compute stream, synchronised before the buffers are dropped.
    let result = unsafe {
        let ipiv = match solver::dgetrf_panel(dev, &tiles, nb) {
            Ok(p) => p,
            Err(PanelError::Failed(e)) => return Err(err(e)),
            Err(PanelError::Singular(col)) => {
                return Err(err(format!(
                    "the identity panel was singular at column {col}"
                )))
            }
        };
        kernels::laswp(dev, &tiles, nb, &ipiv)
            .and_then(|()| blas::dtrsm_unit_lower_left(dev, nb, nb, top, nb, b, nb))
            .and_then(|()| blas::dgemm_minus(dev, nb, nb, nb, bottom, nb, b, nb, c, nb))
    };
    let synced = dev.synchronize();
    result.and(synced).map_err(err)
}
