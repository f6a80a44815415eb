//! The distributed LU's own codelets (`tessera_linalg::lu::dist`, beside the
//! tile LU's of [`super::lu`]): `PANEL_PART`, one rank's share of a panel
//! factored by its process column; `BCAST`, whose body does nothing and
//! which exists so that the distributed layer sends what it reads; and
//! `SWAPOUT`, `SWAPTOP`, `SWAPIN`, the row interchanges of a swap whose rows
//! lie on several process rows.

use std::fmt;
use std::sync::{Arc, LazyLock};

use tessera_engine::{Codelet, Read, ReadWrite, Write};

use crate::kernels::{getrf_panel_dist, getrf_panel_flops, ColumnExchange, DistTeamPanel};
use crate::tile::Tile;

/// Data of `PANEL_PART(k, p)`: panel `k`'s pivots (every member writes the
/// same ones), and this rank's tiles of the panel, top to bottom.
pub type PartData = (Write<Vec<usize>>, Vec<ReadWrite<Tile>>);

/// Arguments of `PANEL_PART(k, p)`.
#[derive(Clone)]
pub struct PartArgs {
    /// Step.
    pub k: usize,
    /// The process row whose tiles these are.
    pub p: usize,
    /// Global index of the panel's first column (for singular-column messages).
    pub col0: usize,
    /// Rows of every panel tile but the last.
    pub nb: usize,
    /// Rows of the whole panel (`n − k·nb`), and its columns.
    pub shape: (usize, usize),
    /// Each of this rank's tiles' index in the panel (0: the diagonal tile).
    pub index: Vec<usize>,
    /// The other members of the panel, reached through the network.
    pub exchange: Arc<dyn ColumnExchange + Send + Sync>,
}

impl fmt::Debug for PartArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartArgs")
            .field("k", &self.k)
            .field("p", &self.p)
            .field("shape", &self.shape)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl PartArgs {
    /// Rows of this rank's tiles.
    fn rows(&self) -> usize {
        let (m, _) = self.shape;
        self.index
            .iter()
            .map(|&s| (m - s * self.nb).min(self.nb))
            .sum()
    }
}

/// `PANEL_PART(k, p)`: process row `p`'s tiles of panel `k`, factored with
/// the other process rows holding tiles of it, each on its rank (HPL's
/// `pdfact`; the kernel: [`getrf_panel_dist`]): the same pivots and factors
/// as the one-process panel, bit for bit. Called `panel` like the one-process
/// codelet, so that a platform's or a calibration's panel figures time it: it
/// is the same kernel on this rank's rows. Its flops are the panel's, shared
/// in proportion to the rows. CPU only (one worker or a team): the body
/// meets the other members through the network at every column, which no
/// device body does yet.
pub static PANEL_PART: LazyLock<Codelet<PartData, PartArgs>> = LazyLock::new(|| {
    Codelet::<PartData, PartArgs>::with_args("panel")
        .flops(|a| {
            let (m, w) = a.shape;
            getrf_panel_flops(m, w) * a.rows() as f64 / m.max(1) as f64
        })
        .label(|a| format!("panel({}) rows of {}", a.k, a.p))
        // One worker: the kernel on its core. A team task (`Task::team`):
        // every member runs `DistTeamPanel` (the exchanges on one member, the
        // recursion's GEMMs shared; the same bits).
        .cpu(|ctx, a, (piv, mut tiles)| {
            let team = ctx.team();
            *piv = if team.size() == 1 {
                getrf_panel_dist(&mut tiles, &a.index, a.nb, a.shape.0, a.col0, &*a.exchange)?
            } else {
                let panel = DistTeamPanel::new(&mut tiles, &a.index, a.nb, a.shape.0);
                team.run(|m| panel.factor(a.col0, &*a.exchange, m))??
            };
            Ok(())
        })
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
