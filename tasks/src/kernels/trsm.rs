//! TRSM: solve with the unit lower-triangular factor of a diagonal tile, `B := L⁻¹·B`.

use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::Par;

use crate::tile::Tile;

/// `B := L⁻¹·B`, with `L` the unit lower triangle of the leading `r × r` block of `l`, where
/// `r = b.rows()` (the diagonal tile after [`getrf_panel`](fn@super::getrf_panel); its diagonal
/// and upper triangle are not read). Sequential; allocates nothing.
///
/// # Panics
/// If `b.rows() != l.rows()` or `l` has fewer columns than rows.
pub fn trsm_unit_lower(l: &Tile, b: &mut Tile) {
    let r = b.rows();
    assert!(
        l.rows() == r && l.cols() >= r,
        "trsm_unit_lower: L is {}x{}, B is {}x{}",
        l.rows(),
        l.cols(),
        r,
        b.cols()
    );
    let l = l.as_ref().get(.., ..r);
    solve_unit_lower_triangular_in_place(l, b.as_mut(), Par::Seq);
}

/// Flops of a triangular solve with an `m × m` triangle and `n` right-hand sides, LAPACK's
/// count for TRSM (left side): `m²·n`. (With a unit diagonal the exact count is `m·(m−1)·n`;
/// the standard count is kept so rates compare with other libraries.)
pub fn trsm_flops(m: usize, n: usize) -> f64 {
    m as f64 * m as f64 * n as f64
}

#[cfg(test)]
mod tests {
    //! Proves that `trsm_unit_lower` solves `L·X = B` with the implicit unit diagonal, reading
    //! only the strict lower triangle of the diagonal tile.

    use super::*;
    use crate::kernels::test_support::random_dense;

    #[test]
    fn solves_unit_lower_system() {
        for (r, c, n) in [(1, 1, 1), (3, 3, 5), (8, 8, 8), (64, 64, 17), (5, 9, 3)] {
            // L is the unit lower part of `l`, whose other entries are garbage to be ignored.
            let mut l = Tile::from_col_major(r, c, &random_dense(r, c, 11));
            for i in 0..r {
                l.as_mut()[(i, i)] = 1e300; // must not be read
            }
            let x = Tile::from_col_major(r, n, &random_dense(r, n, 12));
            // B = L·X computed by hand.
            let mut b = Tile::zeros(r, n);
            for j in 0..n {
                for i in 0..r {
                    let mut s = x.as_ref()[(i, j)];
                    for k in 0..i {
                        s += l.as_ref()[(i, k)] * x.as_ref()[(k, j)];
                    }
                    b.as_mut()[(i, j)] = s;
                }
            }
            trsm_unit_lower(&l, &mut b);
            let err = b
                .as_slice()
                .iter()
                .zip(x.as_slice())
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-12 * r as f64, "r={r} n={n}: error {err:e}");
        }
    }

    #[test]
    #[should_panic(expected = "trsm_unit_lower")]
    fn shape_mismatch_panics() {
        trsm_unit_lower(&Tile::zeros(3, 3), &mut Tile::zeros(4, 2));
    }

    #[test]
    fn flop_count() {
        assert_eq!(trsm_flops(256, 128), 256.0 * 256.0 * 128.0);
    }
}
