//! GEMM: the trailing update `C := C − A·B`.

use faer::linalg::matmul::matmul;
use faer::{Accum, Par};

use crate::tile::Tile;

/// `C := C − A·B`. Sequential; allocates nothing.
///
/// # Panics
/// If the shapes do not chain: `A` is `m × k`, `B` is `k × n`, `C` is `m × n`.
pub fn gemm_update(a: &Tile, b: &Tile, c: &mut Tile) {
    assert!(
        a.rows() == c.rows() && b.cols() == c.cols() && a.cols() == b.rows(),
        "gemm_update: A is {}x{}, B is {}x{}, C is {}x{}",
        a.rows(),
        a.cols(),
        b.rows(),
        b.cols(),
        c.rows(),
        c.cols()
    );
    matmul(
        c.as_mut(),
        Accum::Add,
        a.as_ref(),
        b.as_ref(),
        -1.0,
        Par::Seq,
    );
}

/// Flops of an `m × k` by `k × n` product accumulated into `C`: `2·m·n·k`.
pub fn gemm_flops(m: usize, n: usize, k: usize) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64
}

#[cfg(test)]
mod tests {
    //! Proves that `gemm_update` subtracts the product from `C`, for square, rectangular and
    //! degenerate (`k = 0`, single row or column) shapes.

    use super::*;
    use crate::kernels::test_support::random_dense;

    #[test]
    fn subtracts_the_product() {
        for (m, n, k) in [
            (1, 1, 1),
            (3, 5, 2),
            (1, 7, 9),
            (9, 1, 4),
            (64, 64, 64),
            (70, 33, 65),
            (4, 4, 0),
        ] {
            let a = Tile::from_col_major(m, k, &random_dense(m, k, 1));
            let b = Tile::from_col_major(k, n, &random_dense(k, n, 2));
            let c0 = Tile::from_col_major(m, n, &random_dense(m, n, 3));
            let mut c = c0.clone();
            gemm_update(&a, &b, &mut c);
            for j in 0..n {
                for i in 0..m {
                    let s: f64 = (0..k)
                        .map(|l| a.as_ref()[(i, l)] * b.as_ref()[(l, j)])
                        .sum();
                    let expected = c0.as_ref()[(i, j)] - s;
                    assert!(
                        (c.as_ref()[(i, j)] - expected).abs() < 1e-13 * (k + 1) as f64,
                        "m={m} n={n} k={k}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "gemm_update")]
    fn shape_mismatch_panics() {
        gemm_update(
            &Tile::zeros(2, 3),
            &Tile::zeros(2, 2),
            &mut Tile::zeros(2, 2),
        );
    }

    #[test]
    fn flop_count() {
        assert_eq!(gemm_flops(2, 3, 4), 48.0);
    }
}
