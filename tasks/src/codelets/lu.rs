//! The tile LU's codelets (`PANEL`, `SWAP`, `TRSM`, `GEMM`), see
//! `tessera_linalg::lu` for the DAG they make (the distributed LU's own
//! codelets are in [`super::lu_dist`]).

use std::sync::LazyLock;

use tessera_backends::emu::EmuDevice;
use tessera_engine::{Codelet, Read, ReadWrite, Write};

use super::{sim_tile, sim_tile_mut, store};
use crate::kernels::{
    gemm_flops, gemm_update, getrf_panel, getrf_panel_flops, laswp, trsm_flops, trsm_unit_lower,
    TeamPanel,
};
use crate::tile::Tile;

/// Data of `PANEL(k)`: its pivots (written), the tile column `k..T` of column `k`.
pub type PanelData = (Write<Vec<usize>>, Vec<ReadWrite<Tile>>);
/// Data of `SWAP(k, j)`: the pivots of panel `k`, the tiles `k..T` of column `j`.
pub type SwapData = (Read<Vec<usize>>, Vec<ReadWrite<Tile>>);
/// Data of `TRSM(k, j)`: the diagonal tile `(k, k)`, the tile `(k, j)`.
pub type TrsmData = (Read<Tile>, ReadWrite<Tile>);
/// Data of `GEMM(k, i, j)`: tiles `(i, k)`, `(k, j)`, `(i, j)`.
pub type GemmData = (Read<Tile>, Read<Tile>, ReadWrite<Tile>);

/// Arguments of `PANEL(k)`.
#[derive(Clone, Copy, Debug)]
pub struct PanelArgs {
    /// Step.
    pub k: usize,
    /// Global index of the panel's first column (for singular-column messages).
    pub col0: usize,
    /// Rows of the panel (`n − k·nb`).
    pub rows: usize,
    /// Columns of the panel.
    pub cols: usize,
}

/// Arguments of `SWAP(k, j)`.
#[derive(Clone, Copy, Debug)]
pub struct SwapArgs {
    /// Step whose pivots are applied.
    pub k: usize,
    /// Tile column swapped.
    pub j: usize,
    /// Columns of tile column `j`.
    pub cols: usize,
}

/// Arguments of `TRSM(k, j)`.
#[derive(Clone, Copy, Debug)]
pub struct TrsmArgs {
    /// Step.
    pub k: usize,
    /// Tile column.
    pub j: usize,
    /// Rows of the diagonal tile, columns of tile `(k, j)`.
    pub shape: (usize, usize),
}

/// Arguments of `GEMM(k, i, j)`.
#[derive(Clone, Copy, Debug)]
pub struct GemmArgs {
    /// Step.
    pub k: usize,
    /// Tile row.
    pub i: usize,
    /// Tile column.
    pub j: usize,
    /// `(m, n, k)` of `C(m×n) −= A(m×k)·B(k×n)`.
    pub shape: (usize, usize, usize),
}

/// `PANEL(k)`: LU with partial pivoting of a tile column.
pub static PANEL: LazyLock<Codelet<PanelData, PanelArgs>> = LazyLock::new(|| {
    let cl = Codelet::<PanelData, PanelArgs>::with_args("panel")
        .flops(|p| getrf_panel_flops(p.rows, p.cols))
        .label(|p| format!("panel({})", p.k))
        // One worker: the sequential panel kernel on its core. A team task
        // (`Task::team`): every member runs the team panel (the same
        // operations, the tile rows shared, bit-identical factors); no
        // threads outside the engine's workers either way.
        .cpu(|ctx, p, (piv, mut col)| {
            let team = ctx.team();
            if team.size() == 1 {
                *piv = getrf_panel(&mut col, p.col0)?;
            } else {
                let panel = TeamPanel::new(&mut col);
                *piv = team.run(|m| panel.factor(p.col0, m))??;
            }
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, p, (piv, col)| {
            let (mut tiles, mut bufs): (Vec<Tile>, Vec<&mut [f64]>) = col
                .into_iter()
                .map(|t| sim_tile_mut(dev, t))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip();
            let local = getrf_panel(&mut tiles.iter_mut().collect::<Vec<_>>(), p.col0)?;
            store(&tiles, &mut bufs);
            dev.host_mut(piv)?.copy_from_slice(&local);
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, p, (piv, col)| {
        use tessera_backends::cuda::{solver::PanelError, views};
        let tiles: Vec<_> = col.into_iter().map(|t| (t.data, t.rows)).collect();
        match views::getrf_panel(dev, &tiles, p.cols) {
            Ok(local) => Ok(views::upload(dev, &local, piv)?),
            Err(PanelError::Singular(j)) => Err(Box::new(crate::kernels::SingularColumn {
                column: p.col0 + j,
            })),
            Err(PanelError::Failed(e)) => Err(e.into()),
        }
    });
    cl
});

/// `SWAP(k, j)`: apply panel `k`'s row interchanges to tile column `j`.
pub static SWAP: LazyLock<Codelet<SwapData, SwapArgs>> = LazyLock::new(|| {
    let cl = Codelet::<SwapData, SwapArgs>::with_args("swap")
        .label(|p| format!("swap({},{})", p.k, p.j))
        .cpu(|_ctx, _p, (ipiv, mut col)| {
            laswp(&mut col, ipiv);
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (ipiv, col)| {
            let ipiv = dev.host(ipiv)?;
            let (mut tiles, mut bufs): (Vec<Tile>, Vec<&mut [f64]>) = col
                .into_iter()
                .map(|t| sim_tile_mut(dev, t))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip();
            check_pivots(ipiv, tiles.iter().map(Tile::rows).sum())?;
            laswp(&mut tiles.iter_mut().collect::<Vec<_>>(), ipiv);
            store(&tiles, &mut bufs);
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, p, (ipiv, col)| {
        use tessera_backends::cuda::views;
        let ipiv = views::download(dev, ipiv)?;
        let tiles: Vec<_> = col.into_iter().map(|t| (t.data, t.rows)).collect();
        Ok(views::laswp(dev, &tiles, p.cols, &ipiv)?)
    });
    cl
});

/// A pivot outside the column would make `laswp` index out of bounds.
fn check_pivots(ipiv: &[usize], rows: usize) -> Result<(), String> {
    match ipiv.iter().enumerate().find(|(_, &p)| p >= rows) {
        Some((i, p)) => Err(format!(
            "swap: pivot {i} names row {p} of a {rows}-row column"
        )),
        None => Ok(()),
    }
}

/// `TRSM(k, j)`: `A(k, j) := L(k, k)⁻¹ · A(k, j)`.
pub static TRSM: LazyLock<Codelet<TrsmData, TrsmArgs>> = LazyLock::new(|| {
    let cl = Codelet::<TrsmData, TrsmArgs>::with_args("trsm")
        .flops(|p| trsm_flops(p.shape.0, p.shape.1))
        .label(|p| format!("trsm({},{})", p.k, p.j))
        .cpu(|_ctx, _p, (l, b)| {
            trsm_unit_lower(l, b);
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (l, b)| {
            let l = sim_tile(dev, l)?;
            let (mut t, buf) = sim_tile_mut(dev, b)?;
            trsm_unit_lower(&l, &mut t);
            buf.copy_from_slice(t.as_slice());
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, p, (l, b)| {
        Ok(tessera_backends::cuda::views::trsm_unit_lower(
            dev, p.shape, l.data, b.data,
        )?)
    });
    cl
});

/// `GEMM(k, i, j)`: `A(i, j) −= A(i, k) · A(k, j)`.
pub static GEMM: LazyLock<Codelet<GemmData, GemmArgs>> = LazyLock::new(|| {
    let cl = Codelet::<GemmData, GemmArgs>::with_args("gemm")
        .flops(|p| gemm_flops(p.shape.0, p.shape.1, p.shape.2))
        .label(|p| format!("gemm({},{},{})", p.k, p.i, p.j))
        .cpu(|_ctx, _p, (a, b, c)| {
            gemm_update(a, b, c);
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (a, b, c)| {
            let (a, b) = (sim_tile(dev, a)?, sim_tile(dev, b)?);
            let (mut t, buf) = sim_tile_mut(dev, c)?;
            gemm_update(&a, &b, &mut t);
            buf.copy_from_slice(t.as_slice());
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, p, (a, b, c)| {
        Ok(tessera_backends::cuda::views::gemm_minus(
            dev, p.shape, a.data, b.data, c.data,
        )?)
    });
    cl
});
