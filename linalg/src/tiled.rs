//! Tiled layout: a dense matrix cut into `nb × nb` tiles (smaller at the bottom and right edges),
//! and the one-column views of vectors that multiply it.

use faer::{Mat, MatMut, MatRef};
use tessera_tasks::tile::Tile;

/// An `n_rows × n_cols` matrix stored as `mt × nt` tiles of at most `nb × nb`.
///
/// Tile `(i, j)` covers rows `i·nb..` and columns `j·nb..`, and is
/// `min(nb, n_rows − i·nb) × min(nb, n_cols − j·nb)`. Tiles are kept column of tiles after
/// column of tiles (index `i + j·mt`), so the tiles of one tile column are contiguous.
#[derive(Debug, Clone, PartialEq)]
pub struct TileMatrix {
    n_rows: usize,
    n_cols: usize,
    nb: usize,
    /// Tile `(i, j)` at `i + j * mt`; invariant: each has the dimensions stated above.
    tiles: Vec<Tile>,
}

impl TileMatrix {
    /// A matrix of zeros.
    ///
    /// # Panics
    /// If `nb == 0`.
    pub fn zeros(n_rows: usize, n_cols: usize, nb: usize) -> Self {
        Self::from_fn_tiles(n_rows, n_cols, nb, |_, _, r, c| Tile::zeros(r, c))
    }

    /// Builds each tile from its coordinates and dimensions: `tile(i, j, rows, cols)`.
    ///
    /// # Panics
    /// If `nb == 0` or a returned tile has the wrong dimensions.
    pub fn from_fn_tiles(
        n_rows: usize,
        n_cols: usize,
        nb: usize,
        mut tile: impl FnMut(usize, usize, usize, usize) -> Tile,
    ) -> Self {
        assert!(nb > 0, "TileMatrix: nb must be positive");
        let (mt, nt) = (n_rows.div_ceil(nb), n_cols.div_ceil(nb));
        let mut tiles = Vec::with_capacity(mt * nt);
        for j in 0..nt {
            for i in 0..mt {
                tiles.push(tile(i, j, tile_dim(n_rows, nb, i), tile_dim(n_cols, nb, j)));
            }
        }
        Self::from_tiles(n_rows, n_cols, nb, tiles)
    }

    /// Reassembles a matrix from tiles in the order [`TileMatrix::into_tiles`] gives them.
    ///
    /// # Panics
    /// If `nb == 0`, the count of tiles is not `mt·nt`, or a tile has the wrong dimensions.
    pub fn from_tiles(n_rows: usize, n_cols: usize, nb: usize, tiles: Vec<Tile>) -> Self {
        assert!(nb > 0, "TileMatrix: nb must be positive");
        let (mt, nt) = (n_rows.div_ceil(nb), n_cols.div_ceil(nb));
        assert_eq!(
            tiles.len(),
            mt * nt,
            "TileMatrix::from_tiles: {n_rows}x{n_cols} with nb={nb} needs {mt}x{nt} tiles"
        );
        for (idx, t) in tiles.iter().enumerate() {
            let (i, j) = (idx % mt, idx / mt);
            let want = (tile_dim(n_rows, nb, i), tile_dim(n_cols, nb, j));
            assert_eq!(
                (t.rows(), t.cols()),
                want,
                "TileMatrix::from_tiles: tile ({i}, {j}) has the wrong shape"
            );
        }
        Self {
            n_rows,
            n_cols,
            nb,
            tiles,
        }
    }

    /// Gives up the tiles, tile `(i, j)` at index `i + j·mt`.
    pub fn into_tiles(self) -> Vec<Tile> {
        self.tiles
    }

    /// Copies a column-major `n_rows × n_cols` array (leading dimension `n_rows`) into tiles.
    ///
    /// # Panics
    /// If `data.len() != n_rows·n_cols` or `nb == 0`.
    pub fn from_col_major(data: &[f64], n_rows: usize, n_cols: usize, nb: usize) -> Self {
        assert_eq!(
            data.len(),
            n_rows * n_cols,
            "TileMatrix::from_col_major: {n_rows}x{n_cols} matrix, {} values",
            data.len()
        );
        Self::from_mat(MatRef::from_column_major_slice(data, n_rows, n_cols), nb)
    }

    /// Copies a faer matrix view (any strides) into tiles.
    ///
    /// # Panics
    /// If `nb == 0`.
    pub fn from_mat(a: MatRef<'_, f64>, nb: usize) -> Self {
        Self::from_fn_tiles(a.nrows(), a.ncols(), nb, |i, j, r, c| {
            let mut t = Tile::zeros(r, c);
            t.as_mut().copy_from(a.submatrix(i * nb, j * nb, r, c));
            t
        })
    }

    /// The whole matrix, column-major.
    pub fn to_col_major(&self) -> Mat<f64> {
        let mut a = Mat::zeros(self.n_rows, self.n_cols);
        for j in 0..self.nt() {
            for i in 0..self.mt() {
                let t = self.tile(i, j);
                a.as_mut()
                    .submatrix_mut(i * self.nb, j * self.nb, t.rows(), t.cols())
                    .copy_from(t.as_ref());
            }
        }
        a
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Tile size (the full tiles are `nb × nb`).
    pub fn nb(&self) -> usize {
        self.nb
    }

    /// Number of tile rows, `⌈n_rows / nb⌉`.
    pub fn mt(&self) -> usize {
        self.n_rows.div_ceil(self.nb)
    }

    /// Number of tile columns, `⌈n_cols / nb⌉`.
    pub fn nt(&self) -> usize {
        self.n_cols.div_ceil(self.nb)
    }

    /// Tile `(i, j)`.
    ///
    /// # Panics
    /// If `i >= mt` or `j >= nt`.
    pub fn tile(&self, i: usize, j: usize) -> &Tile {
        &self.tiles[self.index(i, j)]
    }

    /// Tile `(i, j)`, writable.
    ///
    /// # Panics
    /// If `i >= mt` or `j >= nt`.
    pub fn tile_mut(&mut self, i: usize, j: usize) -> &mut Tile {
        let idx = self.index(i, j);
        &mut self.tiles[idx]
    }

    /// Tiles `(i0..mt, j)`, top to bottom, all writable: a column of tiles as the panel and
    /// row-interchange kernels take it.
    ///
    /// # Panics
    /// If `i0 > mt` or `j >= nt`.
    pub fn tile_column_mut(&mut self, i0: usize, j: usize) -> Vec<&mut Tile> {
        let mt = self.mt();
        assert!(
            i0 <= mt && j < self.nt(),
            "tile column ({i0}.., {j}) is outside {mt}x{} tiles",
            self.nt()
        );
        self.tiles[i0 + j * mt..(j + 1) * mt].iter_mut().collect()
    }

    fn index(&self, i: usize, j: usize) -> usize {
        let (mt, nt) = (self.mt(), self.nt());
        assert!(
            i < mt && j < nt,
            "tile ({i}, {j}) is outside {mt}x{nt} tiles"
        );
        i + j * mt
    }
}

/// Size of tile `i` along a dimension of length `n` cut in tiles of `nb`.
fn tile_dim(n: usize, nb: usize, i: usize) -> usize {
    nb.min(n - i * nb)
}

/// A vector as a one-column matrix, the shape every faer routine takes (the solves and the
/// residuals multiply tiles by blocks of vectors).
pub(crate) fn col_mut(x: &mut [f64]) -> MatMut<'_, f64> {
    let len = x.len();
    MatMut::from_column_major_slice_mut(x, len, 1)
}

/// See [`col_mut`].
pub(crate) fn col_ref(x: &[f64]) -> MatRef<'_, f64> {
    MatRef::from_column_major_slice(x, x.len(), 1)
}

#[cfg(test)]
mod tests {
    //! Proves that the tiled layout round-trips exactly, has the right tile shapes at the edges,
    //! and keeps every tile 64-byte aligned.

    use super::*;
    use tessera_tasks::tile::TILE_ALIGN;

    fn sample(n_rows: usize, n_cols: usize) -> Vec<f64> {
        (0..n_rows * n_cols).map(|k| k as f64 * 0.5 - 3.0).collect()
    }

    #[test]
    fn round_trip_is_exact() {
        for (m, n) in [
            (0, 0),
            (0, 3),
            (1, 1),
            (2, 3),
            (7, 7),
            (8, 8),
            (9, 8),
            (17, 5),
            (5, 17),
            (64, 65),
        ] {
            for nb in [1, 2, 3, 8, 64] {
                let data = sample(m, n);
                let a = TileMatrix::from_col_major(&data, m, n, nb);
                let back = a.to_col_major();
                assert_eq!((back.nrows(), back.ncols()), (m, n));
                for j in 0..n {
                    assert_eq!(
                        back.col_as_slice(j),
                        &data[j * m..(j + 1) * m],
                        "m={m} n={n} nb={nb}"
                    );
                }
                let again = TileMatrix::from_mat(back.as_ref(), nb);
                assert_eq!(again, a);
                let (mt, nt) = (a.mt(), a.nt());
                let rebuilt = TileMatrix::from_tiles(m, n, nb, a.clone().into_tiles());
                assert_eq!(rebuilt, a);
                assert_eq!((rebuilt.mt(), rebuilt.nt()), (mt, nt));
            }
        }
    }

    #[test]
    fn from_mat_accepts_strided_views() {
        let data = sample(6, 4);
        let a = MatRef::from_column_major_slice(&data, 6, 4);
        let t = TileMatrix::from_mat(a.transpose(), 3); // row-major view of a 4×6 matrix
        let back = t.to_col_major();
        for i in 0..4 {
            for j in 0..6 {
                assert_eq!(back[(i, j)], a[(j, i)]);
            }
        }
    }

    #[test]
    fn edge_tile_dims() {
        let a = TileMatrix::zeros(10, 7, 4);
        assert_eq!(
            (a.mt(), a.nt(), a.nb(), a.n_rows(), a.n_cols()),
            (3, 2, 4, 10, 7)
        );
        let dims: Vec<(usize, usize)> = (0..3)
            .flat_map(|i| (0..2).map(move |j| (i, j)))
            .map(|(i, j)| (a.tile(i, j).rows(), a.tile(i, j).cols()))
            .collect();
        assert_eq!(dims, [(4, 4), (4, 3), (4, 4), (4, 3), (2, 4), (2, 3)]);
        let exact = TileMatrix::zeros(8, 8, 4);
        assert!(exact
            .into_tiles()
            .iter()
            .all(|t| (t.rows(), t.cols()) == (4, 4)));
    }

    #[test]
    fn tiles_are_aligned() {
        let a = TileMatrix::from_col_major(&sample(13, 11), 13, 11, 5);
        for t in a.into_tiles() {
            assert_eq!(t.as_slice().as_ptr() as usize % TILE_ALIGN, 0);
        }
    }

    #[test]
    fn tile_access() {
        let mut a = TileMatrix::from_col_major(&sample(5, 5), 5, 5, 2);
        a.tile_mut(2, 1).as_mut()[(0, 1)] = 100.0;
        assert_eq!(a.to_col_major()[(4, 3)], 100.0);
        let col = a.tile_column_mut(1, 2);
        assert_eq!(col.len(), 2);
        assert_eq!((col[1].rows(), col[1].cols()), (1, 1));
        assert!(a.tile_column_mut(3, 0).is_empty());
    }

    #[test]
    #[should_panic(expected = "wrong shape")]
    fn from_tiles_checks_shapes() {
        TileMatrix::from_tiles(
            3,
            3,
            2,
            vec![
                Tile::zeros(2, 2),
                Tile::zeros(1, 2),
                Tile::zeros(2, 2),
                Tile::zeros(1, 2),
            ],
        );
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn tile_out_of_range_panics() {
        TileMatrix::zeros(4, 4, 2).tile(2, 0);
    }
}
