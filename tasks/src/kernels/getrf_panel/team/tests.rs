//! Proves that a team of 1 to 4 members factors a panel exactly as the single-core kernel
//! does (the same pivots, the same bits, the same error, from every member) on random,
//! graded, tied, NaN-holding and nearly singular panels of every shape at tile edges, that
//! a singular panel fails on every member without a hang, and that a panel admits one team.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use tessera_engine::team::run_threads;

use super::*;
use crate::kernels::getrf_panel;
use crate::kernels::test_support::{
    dense_of, grade_rows, nearly_singular, random_dense, split_rows, tiles_of, SplitMix64,
};

type Outcome = Result<Vec<usize>, SingularColumn>;

/// Runs `f` on a thread of its own and fails the test if it has not finished after a
/// minute: a member stuck in a barrier would otherwise hang the test run.
fn with_deadline<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: no result after 60 s (a member hangs?)"),
    }
}

/// The single-core kernel's outcome and the panel it leaves.
fn single(a: &[f64], m: usize, w: usize, splits: &[usize], col0: usize) -> (Outcome, Vec<f64>) {
    let mut tiles = tiles_of(a, m, w, splits);
    let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
    let r = getrf_panel(&mut refs, col0);
    (r, dense_of(&tiles, w))
}

/// A team of `size`'s outcome on every member (rank order) and the panel it leaves.
fn team(
    a: &[f64],
    m: usize,
    w: usize,
    splits: &[usize],
    col0: usize,
    size: usize,
) -> (Vec<Outcome>, Vec<f64>) {
    let (a, splits) = (a.to_vec(), splits.to_vec());
    let what = format!("team of {size} on {m}x{w} in tiles {splits:?}");
    with_deadline(what, move || {
        let mut tiles = tiles_of(&a, m, w, &splits);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        let panel = TeamPanel::new(&mut refs);
        let outcomes = Mutex::new(vec![None; size]);
        run_threads(size, |member| {
            let r = panel.factor(col0, member);
            outcomes.lock().unwrap()[member.rank()] = Some(r);
        })
        .unwrap();
        drop(panel);
        let outcomes = outcomes.into_inner().unwrap();
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.expect("every member returned"))
            .collect();
        (outcomes, dense_of(&tiles, w))
    })
}

/// Bits of every entry (NaN-safe equality).
fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Teams of 1..=4 give the single-core kernel's outcome on every member, and its panel
/// bit for bit. Returns that outcome.
fn assert_same_as_single(a: &[f64], m: usize, w: usize, splits: &[usize], col0: usize) -> Outcome {
    let (want, want_lu) = single(a, m, w, splits, col0);
    for size in 1..=4 {
        let (got, lu) = team(a, m, w, splits, col0, size);
        for (rank, g) in got.iter().enumerate() {
            assert_eq!(
                g, &want,
                "m={m} w={w} tiles {splits:?} size {size} rank {rank}"
            );
        }
        if let Some(i) = bits(&lu)
            .iter()
            .zip(bits(&want_lu))
            .position(|(x, y)| *x != y)
        {
            panic!(
                "m={m} w={w} tiles {splits:?} size {size}: entry ({}, {}) is {:e}, the \
                 single-core kernel's {:e}",
                i % m,
                i / m,
                lu[i],
                want_lu[i]
            );
        }
    }
    want
}

/// Tilings of `m` rows for a panel of width `w`: the LU's (tiles of `nb` rows, the last
/// one shorter), one tile, a first tile of `w + 3` rows and small ones after, and tiles
/// shorter than `min(m, w)` (the contiguous fallback).
fn tilings(m: usize, w: usize, nb: usize) -> Vec<Vec<usize>> {
    let first = (w + 3).min(m);
    let mut t = vec![
        split_rows(m, nb),
        vec![m],
        [vec![first], split_rows(m - first, 5)].concat(),
        split_rows(m, 7),
    ];
    t.dedup();
    t
}

#[test]
fn random_panels_at_tile_edges() {
    let mut seed = 100;
    for w in [1, 3, 8, 9, 17, 40] {
        // nb = w: the LU's tiles (nb × nb, the panel's first tile holds the diagonal).
        let nb = w.max(2);
        // 1 to 5 tiles, the last one short or whole.
        let one_or_two = [1, 2, 3, nb - 1, nb, nb + 1];
        let more = [2 * nb + 3, 4 * nb - 1, 5 * nb - 2];
        for m in one_or_two.into_iter().chain(more) {
            for splits in tilings(m, w, nb) {
                seed += 1;
                let a = random_dense(m, w, seed);
                assert_same_as_single(&a, m, w, &splits, 0).unwrap();
            }
        }
    }
}

#[test]
fn tall_panel_recursing_several_levels() {
    // w = 96 > 4 · LEAF: split points at multiples of 8, GEMMs over 16 tiles.
    let (m, w) = (1500, 96);
    let a = random_dense(m, w, 31);
    assert_same_as_single(&a, m, w, &split_rows(m, w), 0).unwrap();
    // Tiles of 256 rows: GEMM row blocks inside the tiles when the blocks get wide.
    let (m, w) = (700, 72);
    let a = random_dense(m, w, 32);
    assert_same_as_single(&a, m, w, &split_rows(m, 256), 0).unwrap();
}

#[test]
fn wide_panels() {
    // m < w: the last leaves are wider than LEAF (rank 0 alone).
    for (m, w) in [(1, 20), (3, 40), (9, 40), (12, 64), (30, 64)] {
        let a = random_dense(m, w, (m * w) as u64);
        assert_same_as_single(&a, m, w, &[m], 0).unwrap();
    }
}

#[test]
fn graded_panels() {
    // Rows scaled by 10^k, k from −12 to 12: the pivots follow the scaling.
    let mut rng = SplitMix64(9);
    for (m, w, nb) in [(100, 24, 24), (333, 40, 40), (64, 64, 16)] {
        let mut a = random_dense(m, w, 10 + m as u64);
        grade_rows(&mut a, m, w, &mut rng);
        for splits in tilings(m, w, nb) {
            assert_same_as_single(&a, m, w, &splits, 0).unwrap();
        }
    }
}

#[test]
fn nearly_singular_panels() {
    // Rank r plus noise at 1e-14: past column r the pivots are chosen among rounding
    // errors, where only the same operations give the same choice.
    for (m, w, r) in [(90, 32, 5), (200, 48, 20), (130, 17, 16)] {
        let a = nearly_singular(m, w, r);
        for splits in tilings(m, w, w) {
            assert_same_as_single(&a, m, w, &splits, 0).unwrap();
        }
    }
}

#[test]
fn ties_and_nans_pick_the_single_core_pivot() {
    // Entries ±1: every column search is a tie, won by its first row, whichever member
    // holds it. NaNs are never chosen; a column of NaNs keeps the diagonal.
    let (m, w) = (70, 20);
    let mut rng = SplitMix64(5);
    let ones: Vec<f64> = (0..m * w)
        .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
        .collect();
    for splits in tilings(m, w, w) {
        // ±1 panels are singular in exact arithmetic only by chance; either outcome must match.
        let _ = assert_same_as_single(&ones, m, w, &splits, 0);
    }
    let mut nans = random_dense(m, w, 6);
    for i in (0..m).step_by(9) {
        nans[i + 3 * m] = f64::NAN;
    }
    nans[50 + 2 * m] = f64::NAN;
    assert_same_as_single(&nans, m, w, &split_rows(m, w), 0).unwrap();
    let mut col = random_dense(m, w, 7);
    col[..m].fill(f64::NAN);
    assert_same_as_single(&col, m, w, &split_rows(m, w), 0).unwrap();
}

#[test]
fn singular_panel_fails_on_every_member() {
    // A zero column (in a leaf, at a split point, in the right half) names its global
    // column, from every member, and leaves the single-core kernel's partial factors.
    let (m, w) = (50, 40);
    for zero_col in [0, 5, 7, 8, 16, 20, 39] {
        let mut a = random_dense(m, w, 40 + zero_col as u64);
        a[zero_col * m..(zero_col + 1) * m].fill(0.0);
        for splits in tilings(m, w, w) {
            let e = assert_same_as_single(&a, m, w, &splits, 64).unwrap_err();
            assert_eq!(e.column, 64 + zero_col);
        }
    }
    // A zero row of a square panel shows at the last step only.
    let n = 30;
    let mut a = random_dense(n, n, 3);
    for j in 0..n {
        a[11 + j * n] = 0.0;
    }
    let e = assert_same_as_single(&a, n, n, &[n], 0).unwrap_err();
    assert_eq!(e.column, n - 1);
    // A zero column of a wide panel, in a wide leaf.
    let (m, w) = (5, 30);
    let mut a = random_dense(m, w, 4);
    a[2 * m..3 * m].fill(0.0);
    assert_eq!(
        assert_same_as_single(&a, m, w, &[m], 0).unwrap_err().column,
        2
    );
}

#[test]
fn empty_panels() {
    for (m, w, splits) in [(0, 5, vec![0]), (4, 0, vec![4]), (0, 0, vec![0])] {
        let a = vec![0.0; m * w];
        assert!(assert_same_as_single(&a, m, w, &splits, 0)
            .unwrap()
            .is_empty());
    }
    let mut none: Vec<&mut Tile> = Vec::new();
    let panel = TeamPanel::new(&mut none);
    assert_eq!(run_threads(2, |m| panel.factor(0, m)).unwrap(), Ok(vec![]));
}

#[test]
fn a_panel_admits_one_team_once() {
    let (second_call, second_team) = with_deadline("a panel claimed twice".into(), || {
        let (m, w) = (40, 16);
        let a = random_dense(m, w, 8);
        let mut tiles = tiles_of(&a, m, w, &[m]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        let panel = TeamPanel::new(&mut refs);
        // A second call within the team is refused before it touches the tiles (and
        // fails the team), and so is any team after it.
        let second_call = run_threads(2, |mem| {
            panel.factor(0, mem).unwrap();
            panel.factor(0, mem)
        })
        .unwrap_err();
        let second_team = run_threads(3, |mem| panel.factor(0, mem)).unwrap_err();
        (second_call, second_team)
    });
    for e in [second_call, second_team] {
        assert!(e.contains("a panel is factored once, by one team"), "{e}");
    }
}
