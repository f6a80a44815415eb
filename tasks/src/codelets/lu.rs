//! The LU codelets (`PANEL`, `SWAP`, `TRSM`, `GEMM`), see
//! `tessera_linalg::lu` for the DAG they make.

use std::sync::LazyLock;

use tessera_backends::sim::SimDevice;
use tessera_engine::{Codelet, Read, ReadWrite, Write};

use super::{sim_tile, sim_tile_mut, store};
use crate::kernels::{
    gemm_flops, gemm_update, getrf_panel, getrf_panel_flops, laswp, trsm_flops, trsm_unit_lower,
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
        // The sequential panel kernel on this worker's core: no threads
        // outside the engine's workers.
        .cpu(|_ctx, p, (piv, mut col)| {
            *piv = getrf_panel(&mut col, p.col0)?;
            Ok(())
        })
        .device::<SimDevice, _>(|dev, p, (piv, col)| {
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
        .device::<SimDevice, _>(|dev, _p, (ipiv, col)| {
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
        .device::<SimDevice, _>(|dev, _p, (l, b)| {
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
        .device::<SimDevice, _>(|dev, _p, (a, b, c)| {
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

/// Data of `BCAST(k, r)`: the pivots and the tile column `k..T` of panel `k`,
/// as this rank received them (its task forwards them down the ring).
pub type BcastData = (Read<Vec<usize>>, Vec<Read<Tile>>);

/// `BCAST(k, r)`: a rank's step in the ring broadcast of panel `k` (1×Q
/// grids). The body does nothing: declaring the panel's data orders it after
/// the receives, and the distributed layer forwards that data to the next
/// rank of the ring when it finishes.
pub static BCAST: LazyLock<Codelet<BcastData, usize>> = LazyLock::new(|| {
    Codelet::<BcastData, usize>::with_args("bcast")
        .label(|k| format!("bcast({k})"))
        .cpu(|_, _, _| Ok(()))
});

/// Arguments of the row-exchange tasks of a distributed swap: the panel's
/// step and width, the swapped column, the process row `p` of the tiles
/// handled, and the process-grid height `P`.
#[derive(Clone, Copy, Debug)]
pub struct RowsArgs {
    /// Step.
    pub k: usize,
    /// Tile column swapped.
    pub j: usize,
    /// Process row whose tiles this task handles (`SWAPOUT`, `SWAPIN`).
    pub p: usize,
    /// Process rows of the grid.
    pub grid_p: usize,
    /// Tile size.
    pub nb: usize,
    /// Rows of the top tile `(k, j)` (the panel's width).
    pub w: usize,
    /// Columns of tile column `j`.
    pub cols: usize,
    /// Rows of the whole tile column from row `k·nb` (the pivots' range).
    pub m: usize,
    /// Bit `p`: process row `p` holds tiles below the top one (a `SWAPOUT`
    /// and a buffer of rows sent up, in `SWAPTOP`'s list in process-row order).
    pub prows: u64,
}

impl RowsArgs {
    /// The tile (index from `k`) and local row of panel-relative row `row`.
    fn locate(&self, row: usize) -> (usize, usize) {
        (row / self.nb, row % self.nb)
    }

    /// The moves of panel `k`'s interchanges (`(dst, src)`: row `dst`
    /// receives row `src`'s old content), panel-relative rows.
    fn moves(&self, ipiv: &[usize]) -> Result<Vec<(usize, usize)>, String> {
        tessera_backends::rows::laswp_moves(self.m, ipiv)
    }

    /// Whether panel-relative row `row` lies in a tile of process row `p`
    /// (tiles `k + t` for `t ≥ 1` are on process row `(k + t) mod P`).
    fn on(&self, row: usize, p: usize) -> bool {
        let (t, _) = self.locate(row);
        t >= 1 && (self.k + t) % self.grid_p == p
    }
}

/// Data of `SWAPOUT(k, j, p)`: the pivots, the tiles `(i, j)`, `i > k`,
/// `i mod P = p`, top to bottom, and the buffer of rows they send up.
pub type SwapOutData = (Read<Vec<usize>>, Vec<Read<Tile>>, Write<Vec<f64>>);
/// Data of `SWAPTOP(k, j)`: the pivots, the top tile `(k, j)`, every process
/// row's buffer of rows sent up (by process row), and the buffer of the top
/// rows sent down.
pub type SwapTopData = (
    Read<Vec<usize>>,
    ReadWrite<Tile>,
    Vec<Read<Vec<f64>>>,
    Write<Vec<f64>>,
);
/// Data of `SWAPIN(k, j, p)`: the pivots, the rows sent down, and the tiles
/// `(i, j)`, `i > k`, `i mod P = p`, that receive them.
pub type SwapInData = (Read<Vec<usize>>, Read<Vec<f64>>, Vec<ReadWrite<Tile>>);

/// The local tile (in a process row's list, from `k + 1` every `P`) and row
/// of panel-relative row `row`.
fn in_list(a: &RowsArgs, row: usize) -> (usize, usize) {
    let (t, r) = a.locate(row);
    ((t - 1) / a.grid_p, r)
}

/// `SWAPOUT(k, j, p)`: the rows of process row `p`'s tiles that the panel's
/// interchanges move into the top tile, into buffer row = destination row.
pub static SWAPOUT: LazyLock<Codelet<SwapOutData, RowsArgs>> = LazyLock::new(|| {
    Codelet::<SwapOutData, RowsArgs>::with_args("swapout")
        .label(|a| format!("swapout({},{},{})", a.k, a.j, a.p))
        .cpu(|_, a, (ipiv, tiles, up)| {
            for (dst, src) in a.moves(ipiv)? {
                if dst < a.w && a.on(src, a.p) {
                    let (t, r) = in_list(a, src);
                    let tile = tiles[t];
                    for c in 0..a.cols {
                        up[dst + c * a.w] = tile.col(c)[r];
                    }
                }
            }
            Ok(())
        })
});

/// `SWAPTOP(k, j)`: the new top tile from its own rows and the rows sent up,
/// and the top rows the interchanges move down, into buffer row = source row.
pub static SWAPTOP: LazyLock<Codelet<SwapTopData, RowsArgs>> = LazyLock::new(|| {
    Codelet::<SwapTopData, RowsArgs>::with_args("swaptop")
        .label(|a| format!("swaptop({},{})", a.k, a.j))
        .cpu(|_, a, (ipiv, top, ups, down)| {
            let old = top.clone();
            for (dst, src) in a.moves(ipiv)? {
                for c in 0..a.cols {
                    if dst < a.w {
                        top.col_mut(c)[dst] = if src < a.w {
                            old.col(c)[src]
                        } else {
                            let (t, _) = a.locate(src);
                            let p = (a.k + t) % a.grid_p;
                            let at = (a.prows & ((1u64 << p) - 1)).count_ones() as usize;
                            ups[at][dst + c * a.w]
                        };
                    } else if src < a.w {
                        down[src + c * a.w] = old.col(c)[src];
                    }
                }
            }
            Ok(())
        })
});

/// `SWAPIN(k, j, p)`: write the top rows sent down into the rows of process
/// row `p`'s tiles that receive them.
pub static SWAPIN: LazyLock<Codelet<SwapInData, RowsArgs>> = LazyLock::new(|| {
    Codelet::<SwapInData, RowsArgs>::with_args("swapin")
        .label(|a| format!("swapin({},{},{})", a.k, a.j, a.p))
        .cpu(|_, a, (ipiv, down, mut tiles)| {
            for (dst, src) in a.moves(ipiv)? {
                if src < a.w && a.on(dst, a.p) {
                    let (t, r) = in_list(a, dst);
                    for c in 0..a.cols {
                        tiles[t].col_mut(c)[r] = down[src + c * a.w];
                    }
                }
            }
            Ok(())
        })
});
