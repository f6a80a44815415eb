//! Proves that `Csr::new` accepts exactly the valid layouts and names the offending row,
//! and that row blocks, fraction splits and nonzero partitions cut where documented.

use super::*;

/// [1 0 2; 0 0 0; 0 3 4; 5 0 0]
fn small() -> Csr {
    Csr::new(
        4,
        3,
        vec![0, 2, 2, 4, 5],
        vec![0, 2, 1, 2, 0],
        vec![1.0, 2.0, 3.0, 4.0, 5.0],
    )
    .unwrap()
}

#[test]
fn compact_columns_mirror_the_indices_and_multiply_alike() {
    // A repeated column, an empty row, rows far from column 0, a row spanning 130,000
    // columns in gaps of at most 65,535.
    let a = Csr::new(
        4,
        200_000,
        vec![0, 3, 3, 5, 9],
        vec![5, 5, 65_540, 134_464, 199_999, 3, 65_538, 131_000, 131_001],
        vec![1.0, -2.0, 0.5, 3.0, 0.25, 1.5, -1.0, 2.0, 0.5],
    )
    .unwrap();
    let c = a.clone().with_compact_columns();
    let (first, gaps) = c
        .compact_columns()
        .expect("every row rises by at most 65,535 at a time");
    assert_eq!(first, [5, 0, 134_464, 3]);
    assert_eq!(gaps, [0, 0, 65_535, 0, 65_535, 0, 65_535, 65_462, 1]);
    for (i, (w, &f)) in a.row_ptr().windows(2).zip(first).enumerate() {
        let cols = gaps[w[0]..w[1]].iter().scan(f, |c, &g| {
            *c += u32::from(g);
            Some(*c)
        });
        assert!(cols.eq(a.col_idx()[w[0]..w[1]].iter().copied()), "row {i}");
    }
    assert_eq!(c, a, "equality compares the matrices");
    let x: Vec<f64> = (0..200_000).map(|i| (i as f64 * 0.001).sin()).collect();
    let (mut y0, mut y1) = (vec![1.0; 4], vec![1.0; 4]);
    a.spmv(&x, &mut y0);
    c.spmv(&x, &mut y1);
    assert_eq!(
        y0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        y1.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // A block cut from it does not inherit them (its rows are rebuilt).
    assert!(c.row_block(0..2).compact_columns().is_none());
}

#[test]
fn a_wide_gap_or_an_unsorted_row_keeps_u32() {
    let row = |cols: Vec<u32>| Csr::new(1, 70_000, vec![0, 2], cols, vec![1.0, 1.0]).unwrap();
    let compact = |cols: Vec<u32>| row(cols).with_compact_columns().compact_columns().is_some();
    assert!(compact(vec![1, 65_536]), "a gap of 65,535");
    assert!(!compact(vec![1, 65_537]), "a gap of 65,536");
    assert!(!compact(vec![5, 4]), "a decreasing row");
    // No rows, or rows without entries: nothing to hold.
    let empty = Csr::zeros(3, 10).unwrap().with_compact_columns();
    assert_eq!(empty.compact_columns(), Some((&[0u32, 0, 0][..], &[][..])));
}

#[test]
fn compact_pays_from_24_entries_per_row() {
    assert!(compact_pays_for(24 * 1000, 1000));
    assert!(!compact_pays_for(24 * 1000 - 1, 1000));
    assert!(compact_pays_for(0, 0), "no rows: nothing to lose");
    assert!(!small().compact_pays(), "5 entries in 4 rows");
    let dense = Csr::new(1, 24, vec![0, 24], (0..24).collect(), vec![1.0; 24]).unwrap();
    assert!(dense.compact_pays());
}

#[test]
fn a_transfer_into_the_matrix_drops_its_compact_columns() {
    use tessera_engine::memory::Replicate;
    let mut c = small().with_compact_columns();
    assert!(c.compact_columns().is_some());
    let replica = c.replicate();
    assert_eq!(
        replica.compact_columns(),
        c.compact_columns(),
        "a host copy keeps them"
    );
    assert_eq!(replica, c);
    let _ = c.parts_mut();
    assert!(c.compact_columns().is_none());
}

#[test]
fn accepts_valid_and_reports_sizes() {
    let a = small();
    assert_eq!((a.n_rows(), a.n_cols(), a.nnz()), (4, 3, 5));
    assert_eq!(a.bytes(), 5 * 8 + 5 * 4 + 5 * 8);
    assert_eq!(a.get(2, 2), 4.0);
    assert_eq!(a.get(1, 1), 0.0);
    let z = Csr::zeros(0, 0).unwrap();
    assert_eq!(z.nnz(), 0);
    assert_eq!(z.partition_by_nnz(3), vec![0..0, 0..0, 0..0]);
}

#[test]
fn rejects_bad_layouts_naming_the_row() {
    let e = |r: Result<Csr, CsrError>| r.unwrap_err().to_string();
    assert_eq!(
        e(Csr::new(2, 3, vec![0, 1], vec![0], vec![1.0])),
        "row_ptr has 2 entries, expected n_rows + 1 = 3"
    );
    assert_eq!(
        e(Csr::new(1, 3, vec![1, 1], vec![0], vec![1.0])),
        "row_ptr[0] is 1, expected 0"
    );
    assert_eq!(
        e(Csr::new(3, 3, vec![0, 2, 1, 2], vec![0, 1], vec![1.0; 2])),
        "row 1: row_ptr decreases from 2 to 1 (negative row length)"
    );
    assert_eq!(
        e(Csr::new(1, 3, vec![0, 2], vec![0, 1], vec![1.0])),
        "row_ptr ends at 2 but col_idx has 2 and vals 1 entries"
    );
    // Entry 2 is in row 2 (row 1 is empty): the message must skip the empty row.
    assert_eq!(
        e(Csr::new(
            3,
            3,
            vec![0, 2, 2, 3],
            vec![0, 1, 3],
            vec![1.0; 3]
        )),
        "row 2: column index 3 (entry 2) out of range 0..3"
    );
    let big = u32::MAX as usize + 1;
    assert_eq!(
        e(Csr::new(0, big, vec![0], vec![], vec![])),
        format!("{big} columns do not fit the 32-bit column indices (at most 4294967295)")
    );
}

#[test]
fn row_block_rebases() {
    let a = small();
    let b = a.row_block(1..4);
    assert_eq!(b.row_ptr(), &[0, 0, 2, 3]);
    assert_eq!(b.col_idx(), &[1, 2, 0]);
    assert_eq!(b.n_cols(), 3);
    let x = [1.0, 10.0, 100.0];
    let mut full = vec![0.0; 4];
    a.spmv_reference(&x, &mut full);
    let mut part = vec![0.0; 3];
    b.spmv(&x, &mut part);
    assert_eq!(part, full[1..4]);
    assert_eq!(a.row_block(2..2).nnz(), 0);
}

#[test]
fn split_at_fraction() {
    let a = small(); // row_ptr 0 2 2 4 5
    assert_eq!(a.split_rows_at_fraction(0.0), 0);
    assert_eq!(a.split_rows_at_fraction(f64::NAN), 0);
    assert_eq!(a.split_rows_at_fraction(1.0), 4);
    assert_eq!(a.split_rows_at_fraction(7.0), 4);
    // 0.4·5 = 2: rows 1 and 2 both start at 2; the first is taken.
    assert_eq!(a.split_rows_at_fraction(0.4), 1);
    // 0.6·5 = 3: 2 and 4 are equally near; the smaller row wins.
    assert_eq!(a.split_rows_at_fraction(0.6), 1);
    assert_eq!(a.split_rows_at_fraction(0.7), 3);
    assert_eq!(a.split_rows_at_fraction(0.9), 3);
    assert_eq!(a.split_rows_at_fraction(0.95), 4);
}

#[test]
fn partition_nonempty_when_enough_rows() {
    // One heavy row first: nearest boundaries would give empty parts; clamping must not.
    let mut row_ptr = vec![0, 100];
    for _ in 0..5 {
        row_ptr.push(row_ptr.last().unwrap() + 1);
    }
    let nnz = *row_ptr.last().unwrap();
    let a = Csr::new(6, 1, row_ptr, vec![0; nnz], vec![1.0; nnz]).unwrap();
    let p = a.partition_by_nnz(6);
    assert_eq!(p, (0..6).map(|i| i..i + 1).collect::<Vec<_>>());
    let p = a.partition_by_nnz(3);
    assert_eq!(p.len(), 3);
    assert!(p.iter().all(|r| !r.is_empty()));
    assert_eq!(p[0], 0..1);
    // Fewer rows than parts: trailing empty ranges.
    let p = small().partition_by_nnz(6);
    assert_eq!(p, vec![0..1, 1..2, 2..3, 3..4, 4..4, 4..4]);
}

#[test]
fn transpose_round_trip() {
    let a = small();
    let t = a.transpose();
    assert_eq!((t.n_rows(), t.n_cols()), (3, 4));
    assert_eq!(t.get(2, 2), 4.0);
    assert_eq!(t.get(0, 3), 5.0);
    assert_eq!(t.transpose(), a);
}

/// `is_symmetric` is what the CG driver checks before it runs (CG needs a
/// symmetric matrix): one entry out of place makes a matrix not symmetric.
#[test]
fn symmetry_is_told_entry_for_entry() {
    let m = |rows: &[&[(u32, f64)]]| {
        let mut row_ptr = vec![0];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for r in rows {
            for &(c, v) in *r {
                cols.push(c);
                vals.push(v);
            }
            row_ptr.push(cols.len());
        }
        Csr::new(rows.len(), rows.len(), row_ptr, cols, vals).unwrap()
    };
    // Unsorted rows are fine.
    assert!(m(&[&[(1, 2.0), (0, 1.0)], &[(0, 2.0), (1, 3.0)]]).is_symmetric());
    assert!(!m(&[&[(0, 1.0), (1, 2.0)], &[(0, 2.5), (1, 3.0)]]).is_symmetric());
    assert!(!m(&[&[(0, 1.0), (1, 2.0)], &[(1, 3.0)]]).is_symmetric());
    assert!(!small().is_symmetric());
}
