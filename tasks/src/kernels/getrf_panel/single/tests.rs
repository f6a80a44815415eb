//! Proves that the panel factorisation picks exactly LAPACK's pivots (against an unblocked
//! reference and against designed matrices whose pivots are known), reproduces `P·A = L·U`,
//! and reports the first exact zero pivot by its global column.

use super::*;
use crate::kernels::test_support::{dense_of, random_dense, reference_getf2, split_rows, tiles_of};

fn factor(
    a: &[f64],
    m: usize,
    w: usize,
    row_splits: &[usize],
    col0: usize,
) -> (Result<Vec<usize>, SingularColumn>, Vec<f64>) {
    let mut tiles = tiles_of(a, m, w, row_splits);
    let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
    let r = getrf_panel(&mut refs, col0);
    (r, dense_of(&tiles, w))
}

fn assert_close(x: &[f64], y: &[f64], tol: f64) {
    let err = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err <= tol, "max abs difference {err:e} > {tol:e}");
}

#[test]
fn matches_unblocked_reference() {
    let mut seed = 1;
    for (m, w) in [
        (1, 1),
        (5, 5),
        (7, 3),
        (40, 40),
        (100, 17),
        (96, 32),
        (300, 64),
        (3, 7),
        (1, 6),
    ] {
        // Tiles of w rows (the LU's layout) and a first tile of w + 3 are factored in
        // place; shorter first tiles through the contiguous copy.
        for splits in [
            vec![m],
            split_rows(m, w),
            [vec![(w + 3).min(m)], split_rows(m - (w + 3).min(m), 5)].concat(),
            split_rows(m, 16),
            split_rows(m, 7),
            vec![m.min(2), m - m.min(2)],
        ] {
            seed += 1;
            let a = random_dense(m, w, seed);
            let (ipiv, lu) = factor(&a, m, w, &splits, 0);
            let mut reference = a.clone();
            let ref_ipiv = reference_getf2(&mut reference, m, w).expect("random matrix is regular");
            assert_eq!(ipiv.unwrap(), ref_ipiv, "m={m} w={w} splits={splits:?}");
            // Same pivots, different summation order: entries agree to rounding.
            assert_close(&lu, &reference, 1e-12 * m as f64);
        }
    }
}

#[test]
fn known_pivots_of_a_permuted_dominant_matrix() {
    // D is diagonally dominant by rows and columns, so LU of D needs no interchange; rows of
    // A = Q·D are D's rows shuffled by Q, so partial pivoting must undo Q step by step.
    let (m, w) = (12, 12);
    let mut d = random_dense(m, w, 77);
    for i in 0..m {
        d[i + i * m] = 100.0 + i as f64;
    }
    let q = [5, 0, 11, 3, 9, 1, 7, 2, 10, 4, 8, 6]; // row i of A is row q[i] of D
    let mut a = vec![0.0; m * w];
    for j in 0..w {
        for i in 0..m {
            a[i + j * m] = d[q[i] + j * m];
        }
    }
    // Expected transpositions: at step i bring D's row i to position i.
    let mut at = q.to_vec();
    let mut expected = Vec::new();
    for i in 0..m {
        let p = at.iter().position(|&r| r == i).unwrap();
        expected.push(p);
        at.swap(i, p);
    }
    for splits in [vec![12], vec![5, 7], vec![1, 1, 10], vec![4, 4, 4]] {
        let (ipiv, lu) = factor(&a, m, w, &splits, 0);
        assert_eq!(ipiv.unwrap(), expected, "splits={splits:?}");
        let mut reference = d.clone();
        assert_eq!(
            reference_getf2(&mut reference, m, w).unwrap(),
            (0..m).collect::<Vec<_>>()
        );
        assert_close(&lu, &reference, 1e-12);
    }
}

#[test]
fn one_row_and_one_column_panels() {
    // One row: nothing to pivot, U is the row itself.
    let a = [3.0, -1.0, 2.0, 5.0];
    let (ipiv, lu) = factor(&a, 1, 4, &[1], 10);
    assert_eq!(ipiv.unwrap(), vec![0]);
    assert_eq!(lu, a);
    // One column: pivot on the largest magnitude, scale the rest by it.
    let a = [1.0, -4.0, 2.0, 4.0];
    let (ipiv, lu) = factor(&a, 4, 1, &[1, 2, 1], 0);
    assert_eq!(
        ipiv.unwrap(),
        vec![1],
        "first of equal magnitudes wins, like idamax"
    );
    assert_eq!(lu, [-4.0, -0.25, -0.5, -1.0]);
}

#[test]
fn zero_pivot_names_the_global_column() {
    let (m, w) = (20, 6);
    for zero_col in 0..w {
        let mut a = random_dense(m, w, 5 + zero_col as u64);
        a[zero_col * m..(zero_col + 1) * m].fill(0.0);
        let (r, after) = factor(&a, m, w, &[8, 8, 4], 64);
        let e = r.unwrap_err();
        assert_eq!(
            e,
            SingularColumn {
                column: 64 + zero_col
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "matrix is singular: exact zero pivot in column {}",
                64 + zero_col
            )
        );
        // The tiles are partly factored (in place), as LAPACK leaves them: not checked.
        let _ = after;
    }
    // A zero row of a square panel only shows at the last step, like LAPACK's info = n.
    let n = 9;
    let mut a = random_dense(n, n, 3);
    for j in 0..n {
        a[4 + j * n] = 0.0;
    }
    assert_eq!(factor(&a, n, n, &[4, 5], 0).0.unwrap_err().column, n - 1);
}

#[test]
fn tiny_pivots_are_not_singular() {
    let n = 6;
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[i + i * n] = if i == 3 { 1e-300 } else { 1.0 };
        a[(n - 1 - i) + i * n] += 1e-310; // subnormal off-diagonal noise
    }
    let (ipiv, lu) = factor(&a, n, n, &[2, 4], 0);
    ipiv.unwrap();
    assert!(lu.iter().all(|x| x.is_finite()));
}

#[test]
fn perm_round_trip() {
    let ipiv = [3, 1, 4, 4, 4];
    let mut perm: Vec<usize> = (0..5).collect();
    for (i, &p) in ipiv.iter().enumerate() {
        perm.swap(i, p);
    }
    assert_eq!(perm_to_ipiv(&perm, 5), ipiv);
    assert_eq!(perm_to_ipiv(&perm, 2), ipiv[..2]);
}

#[test]
fn flop_count() {
    assert_eq!(getrf_panel_flops(1, 1), 1.0 - 1.0 / 3.0 - 0.5 + 5.0 / 6.0);
    let n = 300.0;
    assert!(
        (getrf_panel_flops(300, 300) - (2.0 / 3.0 * n * n * n - n * n / 2.0 + 5.0 * n / 6.0)).abs()
            < 1e-6
    );
    assert_eq!(getrf_panel_flops(1000, 64), getrf_panel_flops(64, 1000));
}

#[test]
fn same_pivots_as_faers_panel_on_a_tall_panel() {
    // Tall enough to recurse several levels (w = 96 > 4 · LEAF) over many tiles.
    let (m, w): (usize, usize) = (1500, 96);
    let a = random_dense(m, w, 31);
    let splits = split_rows(m, w);
    let (ipiv, lu) = factor(&a, m, w, &splits, 0);
    let mut tiles = tiles_of(&a, m, w, &splits);
    let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
    let faer_ipiv = getrf_panel_faer(&mut refs, 0).unwrap();
    assert_eq!(ipiv.unwrap(), faer_ipiv);
    assert_close(&lu, &dense_of(&tiles, w), 1e-12 * m as f64);
}

#[test]
fn iamax_is_idamax() {
    assert_eq!(iamax(&[]), 0);
    assert_eq!(iamax(&[0.0, 0.0]), 0);
    assert_eq!(
        iamax(&[1.0, -3.0, 3.0, 2.0]),
        1,
        "first of equal magnitudes"
    );
    let mut x: Vec<f64> = (0..37).map(|i| (i as f64).sin()).collect();
    x[29] = -5.0;
    x[33] = 5.0;
    assert_eq!(iamax(&x), 29);
    assert_eq!(iamax(&[f64::NAN, 2.0, f64::NAN]), 1);
}
