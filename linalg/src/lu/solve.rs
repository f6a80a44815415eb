//! The solve of `A·x = b` from the factors the one-process LU leaves (HPL's layout), tile by
//! tile.

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, Par};

use crate::tiled::{col_mut, col_ref, TileMatrix};

/// Solves `A·x = b` from the LU factors of `A` in HPL's layout (as [`lu_tiled_seq`] and the
/// task-graph LU leave them: `L` unit lower and `U` upper in `factors`, each tile column of
/// `L` as its panel left it, `ipiv` dgetrf-style with global 0-based rows).
///
/// Forward substitution step by step as the factorisation went: at step `k`, the
/// interchanges of panel `k` on `x`, then `x_k := L_kk⁻¹ x_k` and `x_i -= L_ik x_k` below;
/// then back substitution with `U`, tile by tile (`O(n²)`). For factors in `dgetrf`'s layout
/// (after [`to_dgetrf_layout`]) the same result comes from applying all of `ipiv` first.
///
/// # Panics
/// If `factors` is not square, or `ipiv` or `b` does not have length `n`.
///
/// [`lu_tiled_seq`]: super::seq::lu_tiled_seq
/// [`to_dgetrf_layout`]: super::seq::to_dgetrf_layout
pub fn solve_from_factors(factors: &TileMatrix, ipiv_global: &[usize], b: &[f64]) -> Vec<f64> {
    let n = factors.n_rows();
    assert_eq!(
        factors.n_cols(),
        n,
        "solve_from_factors: the factors must be square"
    );
    assert_eq!(
        ipiv_global.len(),
        n,
        "solve_from_factors: ipiv has the wrong length"
    );
    assert_eq!(b.len(), n, "solve_from_factors: b has the wrong length");
    let (nb, nt) = (factors.nb(), factors.nt());
    let mut x = b.to_vec();
    // Vectors are handled as 1-column matrices, which every faer routine accepts.
    let block = |k: usize| (k * nb, (k * nb + nb).min(n));

    // Forward: panel k's interchanges, x_k := L_kk⁻¹ x_k, then x_i -= L_ik x_k below.
    for k in 0..nt {
        let (s, e) = block(k);
        for (i, &p) in ipiv_global.iter().enumerate().take(e).skip(s) {
            x.swap(i, p);
        }
        let (head, tail) = x.split_at_mut(e);
        let xk = col_mut(&mut head[s..]);
        solve_unit_lower_triangular_in_place(factors.tile(k, k).as_ref(), xk, Par::Seq);
        let xk = col_ref(&head[s..]);
        for i in k + 1..nt {
            let (si, ei) = (i * nb - e, (i * nb + nb).min(n) - e);
            matmul(
                col_mut(&mut tail[si..ei]),
                Accum::Add,
                factors.tile(i, k).as_ref(),
                xk,
                -1.0,
                Par::Seq,
            );
        }
    }
    // Backward: x_k := U_kk⁻¹ x_k, then x_i -= U_ik x_k above.
    for k in (0..nt).rev() {
        let (s, e) = block(k);
        let (head, rest) = x.split_at_mut(s);
        let xk = col_mut(&mut rest[..e - s]);
        solve_upper_triangular_in_place(factors.tile(k, k).as_ref(), xk, Par::Seq);
        let xk = col_ref(&rest[..e - s]);
        for i in 0..k {
            matmul(
                col_mut(&mut head[i * nb..i * nb + nb]),
                Accum::Add,
                factors.tile(i, k).as_ref(),
                xk,
                -1.0,
                Par::Seq,
            );
        }
    }
    x
}

#[cfg(test)]
mod tests {
    //! Proves that the solve agrees with a direct dense computation on factors chosen by hand,
    //! at every tile size.

    use super::*;

    #[test]
    fn solve_from_triangular_factors() {
        // Factors chosen by hand: P swaps rows 0 and 2 (ipiv = [2, 1, 2]), L and U known, so
        // A = Pᵀ·L·U and the solution of A·x = b can be checked by multiplying back.
        let n = 3;
        let lu = [2.0, 0.5, -0.25, 1.0, 4.0, 0.5, -1.0, 2.0, 8.0]; // col-major; L strict lower, U upper
        for nb in [1, 2, 3] {
            let f = TileMatrix::from_col_major(&lu, n, n, nb);
            let ipiv = [2, 1, 2];
            let b = [1.0, -2.0, 3.0];
            let x = solve_from_factors(&f, &ipiv, &b);
            // Rebuild A·x = Pᵀ·L·U·x.
            let l = |i: usize, j: usize| {
                if i == j {
                    1.0
                } else if i > j {
                    lu[i + j * n]
                } else {
                    0.0
                }
            };
            let u = |i: usize, j: usize| if i <= j { lu[i + j * n] } else { 0.0 };
            let ux: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| u(i, j) * x[j]).sum())
                .collect();
            let mut lux: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| l(i, j) * ux[j]).sum())
                .collect();
            for (i, &p) in ipiv.iter().enumerate().rev() {
                lux.swap(i, p);
            }
            for (got, want) in lux.iter().zip(b) {
                assert!((got - want).abs() < 1e-14, "nb={nb}: {lux:?} vs {b:?}");
            }
        }
    }
}
