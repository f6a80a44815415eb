//! LASWP: apply a panel's row interchanges to another column of tiles.

use crate::tile::Tile;

/// Columns swapped together per sweep over `ipiv`, as in reference LAPACK's `dlaswp`: enough
/// to use each cache line of a row twice, few enough that the block's rows stay in cache.
const COL_BLOCK: usize = 32;

/// Applies the interchanges `ipiv` to a column of tiles, in order `i = 0..ipiv.len()`: row `i`
/// is swapped with row `ipiv[i]`, both counted from the first row of `tiles[0]`.
///
/// `tiles` are tile rows `k..mt` of one tile column, top to bottom, all with the same number
/// of columns; a swap may cross tile boundaries. Allocates nothing.
///
/// # Panics
/// If the tiles' column counts differ or a row index is past the last row.
pub fn laswp(tiles: &mut [&mut Tile], ipiv: &[usize]) {
    let Some(first) = tiles.first() else {
        assert!(ipiv.is_empty(), "laswp: interchanges given but no tile");
        return;
    };
    let cols = first.cols();
    assert!(
        tiles.iter().all(|t| t.cols() == cols),
        "laswp: all tiles must have {cols} columns"
    );
    let rows = RowMap::new(tiles);
    for j0 in (0..cols).step_by(COL_BLOCK) {
        let j1 = (j0 + COL_BLOCK).min(cols);
        for (i, &p) in ipiv.iter().enumerate() {
            if p == i {
                continue;
            }
            let (ta, ra) = rows.locate(tiles, i);
            let (tb, rb) = rows.locate(tiles, p);
            if ta == tb {
                let ld = tiles[ta].rows();
                let data = tiles[ta].as_mut_slice();
                for j in j0..j1 {
                    data.swap(ra + j * ld, rb + j * ld);
                }
            } else {
                let (a, b) = two_mut(tiles, ta, tb);
                let (lda, ldb) = (a.rows(), b.rows());
                let (a, b) = (a.as_mut_slice(), b.as_mut_slice());
                for j in j0..j1 {
                    std::mem::swap(&mut a[ra + j * lda], &mut b[rb + j * ldb]);
                }
            }
        }
    }
}

/// Finds which tile holds a row of the tile column. In a tiled matrix every tile but the last
/// has the same number of rows, so that case is a division; other layouts scan the tiles.
struct RowMap {
    /// `Some(nb)` when all tiles but the last have `nb > 0` rows.
    uniform: Option<usize>,
}

impl RowMap {
    fn new(tiles: &[&mut Tile]) -> Self {
        let nb = tiles[0].rows();
        let uniform = tiles[..tiles.len() - 1].iter().all(|t| t.rows() == nb) && nb > 0;
        Self {
            uniform: uniform.then_some(nb),
        }
    }

    fn locate(&self, tiles: &[&mut Tile], row: usize) -> (usize, usize) {
        if let Some(nb) = self.uniform {
            // The last tile may be taller or shorter than `nb`.
            let t = (row / nb).min(tiles.len() - 1);
            let local = row - t * nb;
            if local < tiles[t].rows() {
                return (t, local);
            }
        } else {
            let mut start = 0;
            for (t, tile) in tiles.iter().enumerate() {
                if row < start + tile.rows() {
                    return (t, row - start);
                }
                start += tile.rows();
            }
        }
        panic!("laswp: row {row} is past the last row of the tile column");
    }
}

/// Two distinct tiles of the column, both writable.
fn two_mut<'a>(tiles: &'a mut [&mut Tile], a: usize, b: usize) -> (&'a mut Tile, &'a mut Tile) {
    debug_assert_ne!(a, b);
    if a < b {
        let (lo, hi) = tiles.split_at_mut(b);
        (&mut *lo[a], &mut *hi[0])
    } else {
        let (lo, hi) = tiles.split_at_mut(a);
        (&mut *hi[0], &mut *lo[b])
    }
}

/// Flops of a row interchange: none; it moves data. See [`laswp_bytes`] for its cost.
pub fn laswp_flops(_n_swaps: usize, _cols: usize) -> f64 {
    0.0
}

/// Bytes read and written by `n_swaps` interchanges over `cols` columns (upper bound: every
/// swap reads and writes two `f64` per column).
pub fn laswp_bytes(n_swaps: usize, cols: usize) -> f64 {
    32.0 * n_swaps as f64 * cols as f64
}

#[cfg(test)]
mod tests {
    //! Proves that `laswp` applies the interchanges in order, across tile boundaries and over
    //! tiles of unequal heights, exactly as on the dense matrix.

    use super::*;
    use crate::kernels::test_support::{dense_of, random_dense, split_rows, tiles_of, SplitMix64};

    fn dense_laswp(a: &mut [f64], m: usize, cols: usize, ipiv: &[usize]) {
        for (i, &p) in ipiv.iter().enumerate() {
            for j in 0..cols {
                a.swap(i + j * m, p + j * m);
            }
        }
    }

    #[test]
    fn matches_dense_swaps() {
        let mut rng = SplitMix64(9);
        for (m, cols) in [(1, 1), (5, 3), (17, 40), (64, 33), (130, 70)] {
            for splits in [
                vec![m],
                split_rows(m, 8),
                split_rows(m, 5),
                vec![m / 2, 0, m - m / 2],
                vec![m / 3, m / 3, m - 2 * (m / 3)],
            ] {
                let a = random_dense(m, cols, rng.next_u64());
                let n_swaps = m.min(1 + (rng.next_u64() % 20) as usize);
                let ipiv: Vec<usize> = (0..n_swaps)
                    .map(|i| i + (rng.next_u64() as usize) % (m - i))
                    .collect();
                let mut tiles = tiles_of(&a, m, cols, &splits);
                let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
                laswp(&mut refs, &ipiv);
                let mut expected = a.clone();
                dense_laswp(&mut expected, m, cols, &ipiv);
                assert_eq!(
                    dense_of(&tiles, cols),
                    expected,
                    "m={m} cols={cols} splits={splits:?} ipiv={ipiv:?}"
                );
            }
        }
    }

    #[test]
    fn order_matters() {
        // (0 2) then (1 2) is a 3-cycle; applied in the other order it would be another one.
        let a: Vec<f64> = vec![0.0, 1.0, 2.0];
        let mut tiles = tiles_of(&a, 3, 1, &[1, 1, 1]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        laswp(&mut refs, &[2, 2]);
        assert_eq!(dense_of(&tiles, 1), vec![2.0, 0.0, 1.0]);
    }

    #[test]
    #[should_panic(expected = "past the last row")]
    fn row_out_of_range_panics() {
        let mut tiles = tiles_of(&[1.0, 2.0], 2, 1, &[1, 1]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        laswp(&mut refs, &[2]);
    }

    #[test]
    fn cost() {
        assert_eq!(laswp_flops(10, 10), 0.0);
        assert_eq!(laswp_bytes(2, 3), 192.0);
    }
}
