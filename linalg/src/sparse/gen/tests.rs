//! Proves the generators' documented shapes: exact stencil and band entry counts,
//! symmetry and diagonal dominance of the SPD ones, seeded determinism and power-law
//! spread, nonzero-balanced partitions of their output, and the spec parser's errors.

use super::*;

/// Symmetric with sorted, distinct columns in every row.
fn assert_symmetric(a: &Csr) {
    for i in 0..a.n_rows() {
        let (cols, _) = a.row(i);
        assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
    }
    assert_eq!(&a.transpose(), a);
}

/// `|a_ii| ≥ Σ_{j≠i} |a_ij|` for every row, strictly for at least one.
fn assert_diagonally_dominant(a: &Csr) {
    let mut strict = false;
    for i in 0..a.n_rows() {
        let (cols, vals) = a.row(i);
        let mut diag = 0.0;
        let mut off = 0.0;
        for (&c, &v) in cols.iter().zip(vals) {
            if c as usize == i {
                diag += v;
            } else {
                off += f64::abs(v);
            }
        }
        assert!(
            diag >= off,
            "row {i}: diagonal {diag} < off-diagonal sum {off}"
        );
        strict |= diag > off;
    }
    assert!(strict || a.n_rows() == 0);
}

#[test]
fn stencil_counts_exact_symmetric_dominant() {
    for n in [1, 2, 3, 5, 8] {
        let a = stencil7(n);
        assert_eq!(a.n_rows(), n * n * n);
        assert_eq!(a.nnz(), 7 * n * n * n - 6 * n * n, "stencil7 n={n}");
        assert_symmetric(&a);
        assert_diagonally_dominant(&a);
        let b = stencil27(n);
        assert_eq!(b.nnz(), (3 * n - 2).pow(3), "stencil27 n={n}");
        assert_symmetric(&b);
        assert_diagonally_dominant(&b);
    }
    assert_eq!(stencil7(0).nnz(), 0);
    assert_eq!(stencil27(0).nnz(), 0);
    // An interior row of the 27-point stencil: 26 neighbours at −1, 26 on the diagonal.
    let b = stencil27(3);
    let (cols, vals) = b.row(13);
    assert_eq!(cols.len(), 27);
    assert_eq!(vals.iter().sum::<f64>(), 0.0);
}

#[test]
fn banded_counts_and_spd_shape() {
    for (n, hb) in [(1, 0), (5, 0), (5, 1), (10, 3), (7, 6), (4, 9)] {
        let a = banded(n, hb);
        let h = hb.min(n - 1);
        assert_eq!(a.nnz(), n * (2 * h + 1) - h * (h + 1), "n={n} hb={hb}");
        assert_symmetric(&a);
        assert_diagonally_dominant(&a);
    }
}

#[test]
fn powerlaw_seeded_spread_and_average() {
    let a = powerlaw(20_000, 16.0, 2.2, 7);
    assert_eq!(a, powerlaw(20_000, 16.0, 2.2, 7), "same seed, same matrix");
    assert_ne!(a, powerlaw(20_000, 16.0, 2.2, 8));
    let avg = a.nnz() as f64 / a.n_rows() as f64;
    assert!((12.0..20.0).contains(&avg), "average row length {avg}");
    let lens: Vec<usize> = a.row_ptr().windows(2).map(|w| w[1] - w[0]).collect();
    let max = *lens.iter().max().unwrap();
    assert!(
        max > 20 * 16,
        "power law should have a heavy row, longest {max}"
    );
    assert!(*lens.iter().min().unwrap() >= 1);
    for i in 0..a.n_rows() {
        let (cols, vals) = a.row(i);
        assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i}");
        assert!(vals.iter().all(|v| (-1.0..1.0).contains(v)));
    }
    // A dense row path (len > n/2) on a tiny matrix with a heavy tail.
    let b = powerlaw(50, 20.0, 1.5, 3);
    for i in 0..b.n_rows() {
        assert!(b.row(i).0.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn dense_is_full_and_seeded() {
    let a = dense_as_sparse(7, 5);
    assert_eq!(a.nnz(), 49);
    assert_eq!(a, dense_as_sparse(7, 5));
    assert!(a.vals().iter().all(|v| (-0.5..0.5).contains(v)));
    assert_eq!(a.row(3).0, &[0, 1, 2, 3, 4, 5, 6]);
}

#[test]
fn partitions_balance_within_one_row() {
    for a in [
        stencil27(9),
        stencil7(12),
        powerlaw(5000, 8.0, 2.5, 1),
        banded(3000, 5),
    ] {
        let max_row = a.row_ptr().windows(2).map(|w| w[1] - w[0]).max().unwrap();
        for parts in [1, 2, 3, 7, 16] {
            let p = a.partition_by_nnz(parts);
            assert_eq!(p.len(), parts);
            assert_eq!(p[0].start, 0);
            assert_eq!(p[parts - 1].end, a.n_rows());
            let ideal = a.nnz() as f64 / parts as f64;
            for (k, r) in p.iter().enumerate() {
                assert!(!r.is_empty());
                if k > 0 {
                    assert_eq!(p[k - 1].end, r.start);
                }
                let got = (a.row_ptr()[r.end] - a.row_ptr()[r.start]) as f64;
                assert!(
                    (got - ideal).abs() <= max_row as f64,
                    "part {k}/{parts}: {got} entries, ideal {ideal}, longest row {max_row}"
                );
            }
        }
    }
}

#[test]
fn spmv_matches_reference_on_generators() {
    use tessera_tasks::kernels::spmv_csr;
    for a in [
        stencil7(6),
        stencil27(5),
        banded(200, 9),
        powerlaw(2000, 12.0, 2.1, 5),
        dense_as_sparse(70, 2),
    ] {
        let x: Vec<f64> = (0..a.n_cols())
            .map(|j| (j as f64 * 0.7).sin() + 0.1)
            .collect();
        let y0: Vec<f64> = (0..a.n_rows()).map(|i| i as f64 * 0.01).collect();
        let mut want = y0.clone();
        a.spmv_reference(&x, &mut want);
        // Stated tolerance: reordering a row's sum changes it by at most len·ε·Σ|a·x|;
        // 1e-12 relative to Σ|a·x| (+ |y0|) covers rows up to ~4500 entries.
        let scale: Vec<f64> = (0..a.n_rows())
            .map(|i| {
                let (cols, vals) = a.row(i);
                y0[i].abs()
                    + cols
                        .iter()
                        .zip(vals)
                        .map(|(&c, &v)| (v * x[c as usize]).abs())
                        .sum::<f64>()
            })
            .collect();
        let close = |got: &[f64], rows: std::ops::Range<usize>| {
            for (k, i) in rows.enumerate() {
                assert!(
                    (got[k] - want[i]).abs() <= 1e-12 * scale[i],
                    "row {i}: {} vs {}",
                    got[k],
                    want[i]
                );
            }
        };
        let mut y = y0.clone();
        a.spmv(&x, &mut y);
        close(&y, 0..a.n_rows());
        let mut y = y0.clone();
        spmv_csr(a.row_ptr(), a.col_idx(), a.vals(), &x, &mut y);
        close(&y, 0..a.n_rows());
        // A row block in place (row_ptr starting at a non-zero offset) and copied out.
        let (r0, r1) = (a.n_rows() / 3, a.n_rows() * 3 / 4);
        let mut y = y0[r0..r1].to_vec();
        spmv_csr(&a.row_ptr()[r0..=r1], a.col_idx(), a.vals(), &x, &mut y);
        close(&y, r0..r1);
        let mut y = y0[r0..r1].to_vec();
        a.row_block(r0..r1).spmv(&x, &mut y);
        close(&y, r0..r1);
    }
}

#[test]
fn row_ranges_equal_the_whole_matrix_rows() {
    for spec in [
        "stencil7:1",
        "stencil7:5",
        "stencil27:1",
        "stencil27:4",
        "banded:1:0",
        "banded:40:3",
        "banded:7:20",
        "powerlaw:1:1",
        "powerlaw:600:8",
        "powerlaw:60:25:1.5:3",
        "dense:1",
        "dense:13:4",
    ] {
        let g = GenSpec::parse(spec).unwrap();
        let a = g.build();
        assert_eq!(a, parse_gen_spec(spec).unwrap());
        assert_eq!(g.row_ptr(), a.row_ptr(), "{spec}");
        assert_eq!((g.n_rows(), g.n_cols()), (a.n_rows(), a.n_cols()));
        let n = a.n_rows();
        let cuts = [0, 1, n / 3, n / 2, n.saturating_sub(1), n];
        for &lo in &cuts {
            for &hi in cuts.iter().filter(|&&hi| hi >= lo) {
                assert_eq!(
                    g.rows(lo..hi),
                    a.row_block(lo..hi),
                    "{spec} rows {lo}..{hi}"
                );
            }
        }
    }
    // The free functions are the specs' whole matrices.
    assert_eq!(GenSpec::Stencil27 { n: 3 }.build(), stencil27(3));
    assert_eq!(
        GenSpec::Powerlaw {
            n: 300,
            avg: 16.0,
            alpha: 2.5,
            seed: 1
        }
        .build(),
        powerlaw(300, 16.0, 2.5, 1)
    );
}

#[test]
fn spec_parses_and_rejects() {
    assert_eq!(parse_gen_spec("stencil27:4").unwrap(), stencil27(4));
    assert_eq!(parse_gen_spec("stencil7:3").unwrap(), stencil7(3));
    assert_eq!(parse_gen_spec("banded:10:2").unwrap(), banded(10, 2));
    assert_eq!(parse_gen_spec("dense:5:9").unwrap(), dense_as_sparse(5, 9));
    assert_eq!(
        parse_gen_spec("powerlaw:300").unwrap(),
        powerlaw(300, 16.0, 2.5, 1)
    );
    assert_eq!(
        parse_gen_spec("powerlaw:300:4:3.5:2").unwrap(),
        powerlaw(300, 4.0, 3.5, 2)
    );
    let err = |s: &str| parse_gen_spec(s).unwrap_err();
    assert!(err("blob:3").contains("unknown generator 'blob'"));
    assert!(err("blob:3").contains("stencil27:N"));
    assert!(err("stencil27:x").contains("N 'x' is not a non-negative integer"));
    assert!(err("stencil27:-4").contains("N '-4'"));
    assert!(err("stencil27").contains("expected stencil27:N, got 0 argument(s)"));
    assert!(err("stencil7:4:5").contains("got 2 argument(s)"));
    assert!(err("stencil7:0").contains("N must be at least 1"));
    assert!(err("stencil27:2000").contains("exceed the 32-bit column indices"));
    assert!(err("dense:4000000").contains("exceed the limit"));
    assert!(err("banded:10").contains("expected banded:N:HALFBW"));
    assert!(err("powerlaw:10:0").contains("AVG 0 must be in (0, N = 10]"));
    assert!(err("powerlaw:10:2:1").contains("ALPHA 1 must be > 1"));
    assert!(err("powerlaw:10:2:nan").contains("ALPHA 'nan' is not a finite number"));
}
