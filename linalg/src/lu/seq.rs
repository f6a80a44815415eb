//! Tiled right-looking LU with partial pivoting, run sequentially in the task order of the DAG.
//!
//! This is the reference the task-graph LU must reproduce bit for bit: the same kernels on the
//! same tiles in an order the DAG allows. For each step `k`:
//!
//! - `PANEL(k)`: [`getrf_panel`] on tiles `(k..mt, k)` → panel-local `ipiv_k`;
//! - `SWAP(k, j)` for `j > k`: [`laswp`] of `ipiv_k` on tiles `(k..mt, j)`. Not left of `k`:
//!   as in HPL, `L`'s tile column `j` keeps the row order `PANEL(j)` left it in (HPL's
//!   layout); [`to_dgetrf_layout`] applies the later interchanges when `dgetrf`'s is wanted;
//! - `TRSM(k, j)` for `j > k`: [`trsm_unit_lower`] of tile `(k, j)` by tile `(k, k)`;
//! - `GEMM(k, i, j)` for `i, j > k`: [`gemm_update`] of tile `(i, j)` by `(i, k)·(k, j)`.

pub use tessera_tasks::kernels::SingularColumn;
use tessera_tasks::kernels::{gemm_update, getrf_panel, laswp, trsm_unit_lower};

use crate::tiled::TileMatrix;

/// Factors `P·A = L·U` in place, tile by tile, for any `n_rows × n_cols` matrix.
///
/// On return `a` holds `L` strictly below the diagonal (unit diagonal implicit, in HPL's
/// layout: see the module doc) and `U` on and above it. Returns `ipiv` of length
/// `min(n_rows, n_cols)`: 0-based global rows, row `i` was swapped with row `ipiv[i]` at step
/// `i` (LAPACK `dgetrf`'s `IPIV` minus one).
///
/// # Errors
/// [`SingularColumn`] naming the global column of the first exact zero pivot. `a` then holds
/// a partly factored matrix.
pub fn lu_tiled_seq(a: &mut TileMatrix) -> Result<Vec<usize>, SingularColumn> {
    let (mt, nt, nb) = (a.mt(), a.nt(), a.nb());
    let mut ipiv = Vec::with_capacity(a.n_rows().min(a.n_cols()));
    for k in 0..mt.min(nt) {
        let local = panel(a, k)?;
        for j in k + 1..nt {
            swap(a, k, j, &local);
        }
        for j in k + 1..nt {
            trsm(a, k, j);
        }
        for i in k + 1..mt {
            for j in k + 1..nt {
                gemm(a, k, i, j);
            }
        }
        ipiv.extend(ipiv_global(k, nb, &local));
    }
    Ok(ipiv)
}

/// Turns factors in HPL's layout (as [`lu_tiled_seq`] and the task-graph LU leave them) into
/// `dgetrf`'s: applies each step's interchanges to the tile columns of `L` left of it, after
/// which `P·A = L·U` holds with `P` from `ipiv` (global, 0-based, as returned).
///
/// # Panics
/// If `ipiv` is longer than `min(n_rows, n_cols)` or names a row outside the matrix.
pub fn to_dgetrf_layout(a: &mut TileMatrix, ipiv: &[usize]) {
    let nb = a.nb();
    assert!(
        ipiv.len() <= a.n_rows().min(a.n_cols()),
        "to_dgetrf_layout: {} pivots for a {}x{} matrix",
        ipiv.len(),
        a.n_rows(),
        a.n_cols()
    );
    for (k, step) in ipiv.chunks(nb).enumerate() {
        let first_row = k * nb;
        let local: Vec<usize> = step.iter().map(|&p| p - first_row).collect();
        for j in 0..k {
            swap(a, k, j, &local);
        }
    }
}

/// Turns the panel-local pivots of step `k` (rows counted from row `k·nb`) into global rows.
pub fn ipiv_global(
    k: usize,
    nb: usize,
    local: &[usize],
) -> impl ExactSizeIterator<Item = usize> + '_ {
    let first_row = k * nb;
    local.iter().map(move |&p| first_row + p)
}

/// `PANEL(k)`.
pub(super) fn panel(a: &mut TileMatrix, k: usize) -> Result<Vec<usize>, SingularColumn> {
    let col0 = k * a.nb();
    getrf_panel(&mut a.tile_column_mut(k, k), col0)
}

/// `SWAP(k, j)`.
pub(super) fn swap(a: &mut TileMatrix, k: usize, j: usize, local: &[usize]) {
    laswp(&mut a.tile_column_mut(k, j), local);
}

/// `TRSM(k, j)`: the diagonal tile is read while tile `(k, j)` is written, so the latter is
/// taken out for the call (an empty tile stands in; no allocation).
pub(super) fn trsm(a: &mut TileMatrix, k: usize, j: usize) {
    let mut b = std::mem::take(a.tile_mut(k, j));
    trsm_unit_lower(a.tile(k, k), &mut b);
    *a.tile_mut(k, j) = b;
}

/// `GEMM(k, i, j)`, taking tile `(i, j)` out as `trsm` does.
pub(super) fn gemm(a: &mut TileMatrix, k: usize, i: usize, j: usize) {
    let mut c = std::mem::take(a.tile_mut(i, j));
    gemm_update(a.tile(i, k), a.tile(k, j), &mut c);
    *a.tile_mut(i, j) = c;
}

#[cfg(test)]
mod tests {
    //! Proves that the tiled LU passes HPL's residual check at every size around the tile edges,
    //! picks the same pivots as an untiled LU of the whole matrix, reproduces `P·A = L·U`, and
    //! reports exact singularity by global column while accepting near-singular matrices.

    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
    use faer::{Mat, Par};

    use super::*;
    use crate::hpl::{generate_matrix, generate_rhs, hpl_residual, scaled_residual, HPL_THRESHOLD};
    use crate::lu::solve_from_factors;

    /// Pivots of faer's (untiled, recursive) LU of the whole matrix, as LAPACK transpositions.
    fn reference_ipiv(a: &Mat<f64>) -> Vec<usize> {
        let (m, n) = (a.nrows(), a.ncols());
        let mut lu = a.clone();
        let (mut perm, mut perm_inv) = (vec![0usize; m], vec![0usize; m]);
        let mut buf = MemBuffer::new(lu_in_place_scratch::<usize, f64>(
            m,
            n,
            Par::Seq,
            Default::default(),
        ));
        lu_in_place(
            lu.as_mut(),
            &mut perm,
            &mut perm_inv,
            Par::Seq,
            MemStack::new(&mut buf),
            Default::default(),
        );
        // Step i brings original row perm[i] to position i.
        let mut at: Vec<usize> = (0..m).collect();
        (0..m.min(n))
            .map(|i| {
                let p = at.iter().position(|&r| r == perm[i]).unwrap();
                at.swap(i, p);
                p
            })
            .collect()
    }

    /// `max |P·A − L·U| / (‖A‖∞ · n · ε)`, with `L`, `U` read from the factored tiles.
    fn factorisation_error(a: &Mat<f64>, factors: &TileMatrix, ipiv: &[usize]) -> f64 {
        let (m, n) = (a.nrows(), a.ncols());
        let f = factors.to_col_major();
        let k = m.min(n);
        let l = Mat::<f64>::from_fn(m, k, |i, j| {
            if i == j {
                1.0
            } else if i > j {
                f[(i, j)]
            } else {
                0.0
            }
        });
        let u = Mat::<f64>::from_fn(k, n, |i, j| if i <= j { f[(i, j)] } else { 0.0 });
        let lu = &l * &u;
        let mut pa = a.clone();
        for (i, &p) in ipiv.iter().enumerate() {
            for j in 0..n {
                let t = pa[(i, j)];
                pa[(i, j)] = pa[(p, j)];
                pa[(p, j)] = t;
            }
        }
        let mut err: f64 = 0.0;
        let mut norm: f64 = 0.0;
        for i in 0..m {
            norm = norm.max((0..n).map(|j| a[(i, j)].abs()).sum());
            for j in 0..n {
                err = err.max((pa[(i, j)] - lu[(i, j)]).abs());
            }
        }
        err / (norm * m.max(n) as f64 * f64::EPSILON)
    }

    #[test]
    fn hpl_passes_at_tile_edges_with_reference_pivots() {
        for nb in [2, 3, 8, 64] {
            for n in [1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 3, 3 * nb] {
                if n == 0 {
                    continue;
                }
                let seed = (n * 1000 + nb) as u64;
                let mut a = generate_matrix(n, nb, seed);
                let dense = a.to_col_major();
                let ipiv = lu_tiled_seq(&mut a).expect("HPL matrices are regular");
                assert_eq!(ipiv, reference_ipiv(&dense), "n={n} nb={nb}");
                let b = generate_rhs(n, seed);
                let x = solve_from_factors(&a, &ipiv, &b);
                let resid = hpl_residual(n, nb, seed, &x, &b);
                assert!(
                    resid < HPL_THRESHOLD,
                    "n={n} nb={nb}: scaled residual {resid}"
                );
            }
        }
    }

    #[test]
    fn factors_reproduce_permuted_matrix() {
        // Stated tolerance: max |P·A − L·U| ≤ ‖A‖∞ · n · ε (partial pivoting on random
        // matrices has small growth; the observed ratios are 0.002–0.016).
        for (m, n, nb) in [
            (50, 50, 8),
            (67, 67, 16),
            (130, 130, 64),
            (40, 25, 8),
            (25, 40, 8),
            (9, 30, 4),
            (30, 9, 4),
        ] {
            let mut a = generate_matrix(m.max(n), nb, 5).to_col_major();
            a = a.as_ref().submatrix(0, 0, m, n).to_owned();
            let mut t = TileMatrix::from_mat(a.as_ref(), nb);
            let ipiv = lu_tiled_seq(&mut t).unwrap();
            assert_eq!(ipiv.len(), m.min(n));
            assert_eq!(ipiv, reference_ipiv(&a), "{m}x{n} nb={nb}");
            to_dgetrf_layout(&mut t, &ipiv);
            let e = factorisation_error(&a, &t, &ipiv);
            assert!(e < 1.0, "{m}x{n} nb={nb}: error ratio {e}");
        }
    }

    #[test]
    fn tiling_does_not_change_the_result_much() {
        // Different nb, same matrix: pivots equal, factors equal up to rounding.
        let n = 45;
        let a = generate_matrix(n, 45, 11);
        let mut whole = a.clone();
        let ipiv_whole = lu_tiled_seq(&mut whole).unwrap();
        let whole = whole.to_col_major();
        for nb in [1, 4, 7, 16] {
            let mut t = TileMatrix::from_mat(a.to_col_major().as_ref(), nb);
            assert_eq!(lu_tiled_seq(&mut t).unwrap(), ipiv_whole, "nb={nb}");
            // Layouts differ with the tiling; dgetrf's does not.
            to_dgetrf_layout(&mut t, &ipiv_whole);
            let f = t.to_col_major();
            let diff = (0..n)
                .flat_map(|j| (0..n).map(move |i| (i, j)))
                .map(|(i, j)| (f[(i, j)] - whole[(i, j)]).abs())
                .fold(0.0, f64::max);
            assert!(diff < 1e-11, "nb={nb}: {diff:e}");
        }
    }

    #[test]
    fn singular_matrices_name_the_column() {
        let (n, nb) = (13, 4);
        // A zero column: the first exact zero pivot is that column, wherever it sits in its tile.
        for zero_col in [0, 3, 4, 6, 12] {
            let mut a = generate_matrix(n, nb, 1).to_col_major();
            a.col_as_slice_mut(zero_col).fill(0.0);
            let err = lu_tiled_seq(&mut TileMatrix::from_mat(a.as_ref(), nb)).unwrap_err();
            assert_eq!(err, SingularColumn { column: zero_col });
        }
        // A zero row shows only at the last column (LAPACK: info = n).
        let mut a = generate_matrix(n, nb, 2).to_col_major();
        for j in 0..n {
            a[(5, j)] = 0.0;
        }
        assert_eq!(
            lu_tiled_seq(&mut TileMatrix::from_mat(a.as_ref(), nb))
                .unwrap_err()
                .column,
            n - 1
        );
        // Two identical columns of a matrix whose elimination is exact (a permuted identity):
        // the second copy loses its pivot.
        let mut a = Mat::<f64>::from_fn(n, n, |i, j| if (i * 5 + 3) % n == j { 1.0 } else { 0.0 });
        let src = a.col_as_slice(2).to_vec();
        a.col_as_slice_mut(9).copy_from_slice(&src);
        assert_eq!(
            lu_tiled_seq(&mut TileMatrix::from_mat(a.as_ref(), nb))
                .unwrap_err()
                .column,
            9
        );
    }

    #[test]
    fn near_singular_is_ok_and_finite() {
        let (n, nb) = (20, 6);
        let base = generate_matrix(n, nb, 8);
        // Column 11 = column 4 + 1e-9 · column 0: nearly dependent, tiny pivot at column 11.
        let mut a = base.to_col_major();
        let (c0, c4) = (a.col_as_slice(0).to_vec(), a.col_as_slice(4).to_vec());
        for (dst, (x, y)) in a.col_as_slice_mut(11).iter_mut().zip(c4.iter().zip(&c0)) {
            *dst = x + 1e-9 * y;
        }
        // And a diagonal-ish block with a 1e-200 pivot.
        let mut d = Mat::<f64>::identity(n, n);
        d[(7, 7)] = 1e-200;
        for a in [a, d] {
            let tiles = TileMatrix::from_mat(a.as_ref(), nb);
            let mut f = tiles.clone();
            let ipiv = lu_tiled_seq(&mut f).expect("tiny pivots are not zero pivots");
            let fm = f.to_col_major();
            assert!((0..n).all(|j| fm.col_as_slice(j).iter().all(|v| v.is_finite())));
            let b = generate_rhs(n, 8);
            let x = solve_from_factors(&f, &ipiv, &b);
            assert!(x.iter().all(|v| v.is_finite()));
            // Backward stability: the residual check passes even though A is ill-conditioned.
            let r = scaled_residual(&tiles, &x, &b);
            assert!(r < HPL_THRESHOLD, "scaled residual {r}");
        }
    }

    #[test]
    fn hpl_layout_solve_is_exact() {
        // The solve on HPL-layout factors (interchanges applied to b step by step) against
        // the textbook solve on the same factors in dgetrf's layout (all of P first, then L,
        // then U, dense): the same x to rounding, and A·x = b to the stated tolerance.
        for (n, nb) in [(1, 1), (7, 2), (50, 8), (67, 16), (130, 64)] {
            let seed = 17 + n as u64;
            let a = generate_matrix(n, nb, seed);
            let mut f = a.clone();
            let ipiv = lu_tiled_seq(&mut f).unwrap();
            let b = generate_rhs(n, seed);
            let x = solve_from_factors(&f, &ipiv, &b);
            let mut g = f.clone();
            to_dgetrf_layout(&mut g, &ipiv);
            if n > nb {
                assert!(g != f, "n={n} nb={nb}: later interchanges must move L rows");
            }
            let g = g.to_col_major();
            let mut y = b.clone();
            for (i, &p) in ipiv.iter().enumerate() {
                y.swap(i, p);
            }
            for j in 0..n {
                for i in j + 1..n {
                    y[i] -= g[(i, j)] * y[j];
                }
            }
            for j in (0..n).rev() {
                y[j] /= g[(j, j)];
                for i in 0..j {
                    y[i] -= g[(i, j)] * y[j];
                }
            }
            let diff = x
                .iter()
                .zip(&y)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f64::max);
            let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert!(diff <= 1e-12 * scale * n as f64, "n={n} nb={nb}: {diff:e}");
            let r = hpl_residual(n, nb, seed, &x, &b);
            assert!(r < 1.0, "n={n} nb={nb}: scaled residual {r}");
        }
    }

    #[test]
    fn ipiv_to_global() {
        assert_eq!(
            ipiv_global(2, 8, &[0, 3, 2]).collect::<Vec<_>>(),
            vec![16, 19, 18]
        );
        assert_eq!(ipiv_global(0, 8, &[1]).len(), 1);
    }

    #[test]
    fn empty_matrix() {
        let mut a = TileMatrix::zeros(0, 0, 4);
        assert!(lu_tiled_seq(&mut a).unwrap().is_empty());
    }
}
