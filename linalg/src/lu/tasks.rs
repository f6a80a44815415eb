//! The LU's tasks, shared by the one-process DAG ([`super`]) and the
//! distributed one ([`super::dist`]): for each of `PANEL`, `SWAP`, `TRSM` and
//! `GEMM`, its codelet, its data, its arguments, and the look-ahead priorities.

use tessera_engine::{DataHandle, ReadWrite, Task, TaskBuilder};
use tessera_tasks::codelets::lu::{
    GemmArgs, PanelArgs, SwapArgs, TrsmArgs, GEMM, PANEL, SWAP, TRSM,
};
use tessera_tasks::tile::Tile;

/// Rows (or columns) of tile row (or column) `i` of an `n`-order matrix.
fn tile_rows(n: usize, nb: usize, i: usize) -> usize {
    (n - i * nb).min(nb)
}

/// Priorities of the LU's tasks over `t` tile columns: a task on column `j`
/// ranks higher the closer `j` is to the left, and a panel above the
/// updates of its column (the look-ahead; the distributed LU uses them too).
pub(crate) fn column_priority(t: usize, j: usize) -> i32 {
    4 * (t as i32 - j as i32) + 1
}

/// See [`column_priority`].
pub(crate) fn panel_priority(t: usize, k: usize) -> i32 {
    4 * (t as i32 - k as i32) + 3
}

/// `PANEL(k)` over its pivots and tile column `col` (rows `k..T`).
pub(crate) fn panel_task(
    piv: &DataHandle<Vec<usize>>,
    col: Vec<ReadWrite<Tile>>,
    k: usize,
    n: usize,
    nb: usize,
    prio: i32,
) -> TaskBuilder {
    Task::new(&PANEL, (piv.w(), col))
        .args(PanelArgs {
            k,
            col0: k * nb,
            rows: n - k * nb,
            cols: tile_rows(n, nb, k),
        })
        .priority(prio)
        .into()
}

/// `SWAP(k, j)` over panel `k`'s pivots and tile column `col` of column `j`.
pub(crate) fn swap_task(
    piv: &DataHandle<Vec<usize>>,
    col: Vec<ReadWrite<Tile>>,
    k: usize,
    j: usize,
    n: usize,
    nb: usize,
    prio: i32,
) -> TaskBuilder {
    Task::new(&SWAP, (piv.r(), col))
        .args(SwapArgs {
            k,
            j,
            cols: tile_rows(n, nb, j),
        })
        .priority(prio)
        .into()
}

/// `TRSM(k, j)`: tile `b` = `(k, j)` against the diagonal tile `l`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn trsm_task(
    l: &DataHandle<Tile>,
    b: &DataHandle<Tile>,
    k: usize,
    j: usize,
    n: usize,
    nb: usize,
    prio: i32,
) -> TaskBuilder {
    Task::new(&TRSM, (l.r(), b.rw()))
        .args(TrsmArgs {
            k,
            j,
            shape: (tile_rows(n, nb, k), tile_rows(n, nb, j)),
        })
        .priority(prio)
        .into()
}

/// `GEMM(k, i, j)` over tiles `[(i, k), (k, j), (i, j)]`.
pub(crate) fn gemm_task(
    [a, b, c]: [&DataHandle<Tile>; 3],
    (k, i, j): (usize, usize, usize),
    n: usize,
    nb: usize,
    prio: i32,
) -> TaskBuilder {
    Task::new(&GEMM, (a.r(), b.r(), c.rw()))
        .args(GemmArgs {
            k,
            i,
            j,
            shape: (
                tile_rows(n, nb, i),
                tile_rows(n, nb, j),
                tile_rows(n, nb, k),
            ),
        })
        .priority(prio)
        .into()
}
