//! The LU's device-sized updates: `UPDATE(k, J)`, step `k`'s whole update
//! (interchanges, TRSM, GEMMs) of a set of tile columns in one task — every
//! column a device owns, merged into one call as Hetero-HPL does — and
//! `GEMMB(k, I, j)`, the GEMMs of a block of tile rows of one column, the
//! unit a device too small to hold its columns streams (TianHe-1). See
//! `tessera_linalg::lu` for the DAG they make.

use std::sync::LazyLock;

use tessera_backends::emu::EmuDevice;
use tessera_engine::{BodyError, Codelet, Read, ReadWrite};

use super::{sim_tile, sim_tile_mut, store};
use crate::kernels::{gemm_rows, update_column};
use crate::tile::Tile;

/// Data of `UPDATE(k, J)`: panel `k`'s pivots, its tile column (rows
/// `k..T`), and the tiles `k..T` of each column of `J`, column after column.
pub type UpdateData = (Read<Vec<usize>>, Vec<Read<Tile>>, Vec<ReadWrite<Tile>>);
/// Data of `GEMMB(k, I, j)`: the panel's tiles of rows `I`, the `U` tile
/// `(k, j)`, and the tiles of rows `I` of column `j`.
pub type GemmBlockData = (Vec<Read<Tile>>, Read<Tile>, Vec<ReadWrite<Tile>>);

/// Arguments of `UPDATE(k, J)`.
#[derive(Clone, Debug)]
pub struct UpdateArgs {
    /// Step.
    pub k: usize,
    /// The tile columns updated, in the order of the data.
    pub cols: Vec<usize>,
    /// Floating-point operations (TRSM and GEMMs of every column).
    pub flops: f64,
}

/// Arguments of `GEMMB(k, I, j)`.
#[derive(Clone, Copy, Debug)]
pub struct GemmBlockArgs {
    /// Step.
    pub k: usize,
    /// Tile rows `i0..i1`.
    pub rows: (usize, usize),
    /// Tile column.
    pub j: usize,
    /// Floating-point operations.
    pub flops: f64,
}

/// `UPDATE(k, J)`: for each column `j` of `J`, `SWAP(k, j)`, `TRSM(k, j)`
/// and every `GEMM(k, i, j)`, in one task. On a GPU the column's calls are
/// queued on one stream without a synchronisation between them.
pub static UPDATE: LazyLock<Codelet<UpdateData, UpdateArgs>> = LazyLock::new(|| {
    let cl = Codelet::<UpdateData, UpdateArgs>::with_args("update")
        .flops(|p| p.flops)
        .label(|p| match p.cols.as_slice() {
            [j] => format!("update({},{j})", p.k),
            [a, .., b] => format!("update({},{a}..{b}:{})", p.k, p.cols.len()),
            [] => format!("update({},-)", p.k),
        })
        .cpu(|_ctx, _p, (ipiv, l, mut cols)| {
            for col in cols.chunks_mut(l.len().max(1)) {
                update_column(ipiv, &l, col);
            }
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (ipiv, l, cols)| {
            let ipiv = dev.host(ipiv)?.to_vec();
            let l: Vec<Tile> = l
                .into_iter()
                .map(|t| sim_tile(dev, t))
                .collect::<Result<_, _>>()?;
            let l: Vec<&Tile> = l.iter().collect();
            let (mut tiles, mut bufs): (Vec<Tile>, Vec<&mut [f64]>) = cols
                .into_iter()
                .map(|t| sim_tile_mut(dev, t))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip();
            let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
            for col in refs.chunks_mut(l.len().max(1)) {
                check_rows(&ipiv, col)?;
                update_column(&ipiv, &l, col);
            }
            store(&tiles, &mut bufs);
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, _p, (ipiv, l, cols)| {
        use tessera_backends::cuda::views;
        let ipiv = views::download(dev, ipiv)?;
        let per = l.len().max(1);
        let mut cols = cols;
        for col in cols.chunks_mut(per) {
            let w = col[0].cols;
            let tiles: Vec<_> = col
                .iter_mut()
                .map(|t| (t.data.reborrow(), t.rows))
                .collect();
            views::laswp(dev, &tiles, w, &ipiv)?;
            drop(tiles);
            let (u, below) = col.split_first_mut().expect("a column has tiles");
            views::trsm_unit_lower(dev, (u.rows, w), l[0].data, u.data.reborrow())?;
            for (li, ci) in l[1..].iter().zip(below.iter_mut()) {
                views::gemm_minus(
                    dev,
                    (ci.rows, w, li.cols),
                    li.data,
                    u.data.as_ref(),
                    ci.data.reborrow(),
                )?;
            }
        }
        Ok(())
    });
    cl
});

/// A pivot outside the column would make `laswp` index out of bounds.
fn check_rows(ipiv: &[usize], col: &[&mut Tile]) -> Result<(), BodyError> {
    let rows: usize = col.iter().map(|t| t.rows()).sum();
    match ipiv.iter().find(|&&p| p >= rows) {
        Some(p) => Err(format!("update: a pivot names row {p} of a {rows}-row column").into()),
        None => Ok(()),
    }
}

/// `GEMMB(k, I, j)`: `C(i, j) −= L(i, k) · U(k, j)` for the tile rows `i`
/// of `I`, one task (on a GPU, one stream of calls).
pub static GEMMB: LazyLock<Codelet<GemmBlockData, GemmBlockArgs>> = LazyLock::new(|| {
    let cl = Codelet::<GemmBlockData, GemmBlockArgs>::with_args("gemmb")
        .flops(|p| p.flops)
        .label(|p| format!("gemmb({},{}..{},{})", p.k, p.rows.0, p.rows.1, p.j))
        .cpu(|_ctx, _p, (l, u, mut c)| {
            gemm_rows(&l, u, &mut c);
            Ok(())
        })
        .device::<EmuDevice, _>(|dev, _p, (l, u, c)| {
            let l: Vec<Tile> = l
                .into_iter()
                .map(|t| sim_tile(dev, t))
                .collect::<Result<_, _>>()?;
            let u = sim_tile(dev, u)?;
            let (mut tiles, mut bufs): (Vec<Tile>, Vec<&mut [f64]>) = c
                .into_iter()
                .map(|t| sim_tile_mut(dev, t))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip();
            gemm_rows(
                &l.iter().collect::<Vec<_>>(),
                &u,
                &mut tiles.iter_mut().collect::<Vec<_>>(),
            );
            store(&tiles, &mut bufs);
            Ok(())
        });
    #[cfg(feature = "cuda")]
    let cl = cl.device::<tessera_backends::cuda::CudaDevice, _>(|dev, _p, (l, u, c)| {
        use tessera_backends::cuda::views;
        for (li, mut ci) in l.into_iter().zip(c) {
            views::gemm_minus(
                dev,
                (ci.rows, ci.cols, li.cols),
                li.data,
                u.data,
                ci.data.reborrow(),
            )?;
        }
        Ok(())
    });
    cl
});
