//! Proves that the members of a distributed panel, threads exchanging over channels, end
//! with `getrf_panel`'s pivots on every member and its bits in every tile, at 1 to 4
//! members and several deals of the tiles, on random, graded, nearly singular, tied and
//! NaN panels; that a singular panel fails with its column on every member; and that a
//! failing exchange ends the panel with `Exchange`.

use std::cell::Cell;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use super::*;
use crate::kernels::getrf_panel::dist_team::Alone;
use crate::kernels::getrf_panel::{split_columns, LEAF};
use crate::kernels::test_support::{
    grade_rows, nearly_singular, random_dense, split_rows, tiles_of, SplitMix64,
};

/// One member's end of a group of threads joined pairwise by channels (one per ordered
/// pair, so each call's parts meet, whichever member runs ahead).
pub(crate) struct ThreadExchange {
    pub(crate) me: usize,
    /// `to[q]`: the channel to member `q` (`None` for this member).
    to: Vec<Option<Sender<Vec<f64>>>>,
    /// `from[q]`: the channel from member `q`.
    from: Vec<Option<Receiver<Vec<f64>>>>,
    pub(crate) calls: Cell<usize>,
    /// Refuse this call (0-based), before sending anything.
    fail_at: Option<usize>,
}

impl ColumnExchange for ThreadExchange {
    fn members(&self) -> usize {
        self.to.len()
    }

    fn me(&self) -> usize {
        self.me
    }

    fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
        let call = self.calls.get();
        self.calls.set(call + 1);
        if self.fail_at == Some(call) {
            return Err(format!("test exchange refuses call {call}"));
        }
        for (q, to) in self.to.iter().enumerate() {
            if let Some(to) = to {
                to.send(part.clone())
                    .map_err(|_| format!("member {q} is gone"))?;
            }
        }
        self.from
            .iter()
            .enumerate()
            .map(|(q, from)| match from {
                None => Ok(part.clone()),
                Some(from) => from.recv().map_err(|_| format!("member {q} is gone")),
            })
            .collect()
    }
}

/// The ends of a group of `size` members; member `f` of `fail` refuses its call `k`.
pub(crate) fn group(size: usize, fail: Option<(usize, usize)>) -> Vec<ThreadExchange> {
    let mut to: Vec<Vec<Option<Sender<Vec<f64>>>>> = (0..size).map(|_| vec![]).collect();
    let mut from: Vec<Vec<Option<Receiver<Vec<f64>>>>> = (0..size)
        .map(|_| (0..size).map(|_| None).collect())
        .collect();
    for (a, to_a) in to.iter_mut().enumerate() {
        for (b, from_b) in from.iter_mut().enumerate() {
            if a == b {
                to_a.push(None);
            } else {
                let (tx, rx) = mpsc::channel();
                to_a.push(Some(tx));
                from_b[a] = Some(rx);
            }
        }
    }
    to.into_iter()
        .zip(from)
        .enumerate()
        .map(|(me, (to, from))| ThreadExchange {
            me,
            to,
            from,
            calls: Cell::new(0),
            fail_at: fail.and_then(|(f, k)| (f == me).then_some(k)),
        })
        .collect()
}

pub(crate) type Outcome = Result<Vec<usize>, DistPanelError>;

/// What one member ended with: its outcome, its tiles, its exchange calls.
pub(crate) struct MemberEnd {
    outcome: Outcome,
    tiles: Vec<Tile>,
    index: Vec<usize>,
    calls: usize,
}

/// Runs the members (member `q` gets the tiles `deal` gives it) on threads of their own;
/// fails the test if one has not returned after a minute.
pub(crate) fn run_members(
    tiles: &[Tile],
    deal: &[usize],
    nb: usize,
    m: usize,
    col0: usize,
    fail: Option<(usize, usize)>,
) -> Vec<MemberEnd> {
    let size = deal.iter().max().map_or(1, |&q| q + 1);
    let (tx, rx) = mpsc::channel();
    for ex in group(size, fail) {
        let index: Vec<usize> = (0..tiles.len()).filter(|&i| deal[i] == ex.me).collect();
        let mine: Vec<Tile> = index.iter().map(|&i| tiles[i].clone()).collect();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut mine = mine;
            let mut refs: Vec<&mut Tile> = mine.iter_mut().collect();
            let outcome = getrf_panel_dist(&mut refs, &index, nb, m, col0, &ex);
            let end = MemberEnd {
                outcome,
                tiles: mine,
                index,
                calls: ex.calls.get(),
            };
            let me = ex.me;
            drop(ex); // releases members waiting on this one after a failure
            let _ = tx.send((me, end));
        });
    }
    drop(tx);
    let mut ends: Vec<Option<MemberEnd>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let (me, end) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a member returns within a minute (a member panicked or hangs?)");
        ends[me] = Some(end);
    }
    ends.into_iter().map(Option::unwrap).collect()
}

/// Exchanges of a panel: one per leaf column, one per recursion step.
pub(crate) fn exchanges(m: usize, d: usize, n: usize) -> usize {
    let k = (m - d).min(n);
    if k <= LEAF || n <= LEAF {
        return k;
    }
    let n1 = split_columns(k);
    exchanges(m, d, n1) + 1 + exchanges(m, d + n1, n - n1)
}

pub(crate) fn assert_same_bits(got: &Tile, want: &Tile, what: &str) {
    let (g, w) = (got.as_slice(), want.as_slice());
    assert_eq!(g.len(), w.len());
    if let Some(i) = g
        .iter()
        .zip(w)
        .position(|(x, y)| x.to_bits() != y.to_bits())
    {
        panic!(
            "{what}: entry ({}, {}) is {:e}, getrf_panel's {:e}",
            i % got.rows(),
            i / got.rows(),
            g[i],
            w[i]
        );
    }
}

/// The deals of `tiles` tiles over `size` members checked: cyclic (`i mod P`), then two
/// irregular ones where every member holds a tile (tiles `1..P` in reverse member order
/// and the rest at random; member 0 alone with tile 0 and the rest in blocks).
pub(crate) fn deals(tiles: usize, size: usize, seed: u64) -> Vec<Vec<usize>> {
    if size == 1 {
        return vec![vec![0; tiles]];
    }
    let cyclic = (0..tiles).map(|i| i % size).collect();
    let mut rng = SplitMix64(seed);
    let shuffled = (0..tiles)
        .map(|i| match i {
            0 => 0,
            i if i < size => size - i,
            _ => (rng.next_u64() % size as u64) as usize,
        })
        .collect();
    let per = (tiles - 1).div_ceil(size - 1);
    let blocks = (0..tiles)
        .map(|i| if i == 0 { 0 } else { 1 + (i - 1) / per })
        .collect();
    vec![cyclic, shuffled, blocks]
}

/// The `m × w` panel `a` in tiles of `nb` rows, factored by `getrf_panel`, then by 1 to 4
/// members (as many as there are tiles) under each deal: the same outcome on every
/// member, and on success the same bits in every tile and one exchange per leaf column
/// and per recursion step. Returns `getrf_panel`'s outcome.
pub(crate) fn assert_same_as_single(
    a: &[f64],
    m: usize,
    w: usize,
    nb: usize,
    col0: usize,
) -> Result<Vec<usize>, SingularColumn> {
    let (tiles, want_tiles, want) = reference(a, m, w, nb, col0);
    let want_dist = want.clone().map_err(DistPanelError::Singular);

    // One member through the distributed code.
    let mut alone = tiles.clone();
    let mut refs: Vec<&mut Tile> = alone.iter_mut().collect();
    let index: Vec<usize> = (0..tiles.len()).collect();
    let got = DistPanel::new(&mut refs, &index, nb, m, w, col0, 0).factor_all(&Alone);
    assert_eq!(got, want_dist, "m={m} w={w} nb={nb} alone");
    if want.is_ok() {
        for (s, (g, t)) in alone.iter().zip(&want_tiles).enumerate() {
            assert_same_bits(g, t, &format!("m={m} w={w} nb={nb} alone, tile {s}"));
        }
    }

    for size in 1..=tiles.len().min(4) {
        for deal in deals(tiles.len(), size, (m * w + size) as u64) {
            let what = format!("m={m} w={w} nb={nb} deal {deal:?}");
            for end in run_members(&tiles, &deal, nb, m, col0, None) {
                assert_eq!(end.outcome, want_dist, "{what}");
                if want.is_err() {
                    continue;
                }
                let ranks = (size, m, w);
                assert_success(&what, ranks, end.calls, &end.tiles, &end.index, &want_tiles);
            }
        }
    }
    want
}

/// Panels of the LU's shapes: (m, w, nb) with tiles of `nb` rows, the last short or
/// whole, `w = nb` or narrower (the last panel's width), recursing (w > LEAF, splits at
/// multiples of 8 from w >= 32) or one leaf.
pub(crate) const SHAPES: [(usize, usize, usize); 8] = [
    (150, 40, 40),
    (160, 40, 40),
    (97, 24, 24),
    (61, 13, 20),
    (45, 16, 16),
    (33, 9, 11),
    (50, 5, 12),
    (20, 10, 10),
];

#[test]
fn random_panels() {
    for (i, (m, w, nb)) in SHAPES.into_iter().enumerate() {
        let a = random_dense(m, w, 100 + i as u64);
        assert_same_as_single(&a, m, w, nb, 0).unwrap();
    }
    // One tile: a lone member, also with m < w.
    for (m, w, nb) in [(12, 12, 16), (5, 9, 16), (1, 1, 4), (0, 3, 4)] {
        let a = random_dense(m, w, 7);
        assert_same_as_single(&a, m, w, nb, 0).unwrap();
    }
}

#[test]
fn graded_panels() {
    // Rows scaled by 10^k, k from −12 to 12: the pivots follow the scaling, across tiles.
    let mut rng = SplitMix64(9);
    for (m, w, nb) in SHAPES {
        let mut a = random_dense(m, w, 10 + m as u64);
        grade_rows(&mut a, m, w, &mut rng);
        assert_same_as_single(&a, m, w, nb, 0).unwrap();
    }
}

#[test]
fn nearly_singular_panels() {
    // Rank r plus noise at 1e-14: past column r the pivots are chosen among rounding
    // errors, where only the same operations give the same choice.
    for (m, w, nb, r) in [(150, 40, 40, 7), (97, 24, 24, 20), (61, 13, 20, 3)] {
        let a = nearly_singular(m, w, r);
        assert_same_as_single(&a, m, w, nb, 0).unwrap();
    }
}

#[test]
fn ties_go_to_the_smaller_row_not_the_smaller_member() {
    // Column 0's largest magnitude, 5, in panel tile 2 (row 23) and tile 1 (row 12):
    // dealt [0, 2, 1, 2, 1], tile 1 is member 2's, tile 2 member 1's. Row 12 wins.
    let (m, w, nb) = (50, 6, 10);
    let mut a = random_dense(m, w, 21);
    a[23] = 5.0;
    a[12] = -5.0;
    let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
    let ends = run_members(&tiles, &[0, 2, 1, 2, 1], nb, m, 0, None);
    for end in &ends {
        assert_eq!(end.outcome.as_ref().unwrap()[0], 12);
    }
    assert_same_as_single(&a, m, w, nb, 0).unwrap();

    // Entries ±1: every search in column 0 is a tie, and later ones often. Then panel
    // tiles 2.. copies of tile 1: the rows of members other than 0 tie all along.
    let (m, w, nb) = (97, 24, 24);
    let mut rng = SplitMix64(5);
    let ones: Vec<f64> = (0..m * w)
        .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
        .collect();
    assert_same_as_single(&ones, m, w, nb, 0).unwrap();
    let mut copies = random_dense(m, w, 22);
    for j in 0..w {
        for i in 2 * nb..m {
            copies[i + j * m] = copies[nb + i % nb + j * m];
        }
    }
    assert_same_as_single(&copies, m, w, nb, 0).unwrap();
}

#[test]
fn nans_are_never_pivots() {
    // Scattered NaNs (never chosen), and a column of NaNs (no candidate: the diagonal
    // row stays, on every member).
    let (m, w, nb) = (97, 24, 24);
    let mut nans = random_dense(m, w, 6);
    for i in (0..m).step_by(9) {
        nans[i + 3 * m] = f64::NAN;
    }
    nans[50 + 2 * m] = f64::NAN;
    assert_same_as_single(&nans, m, w, nb, 0).unwrap();
    let mut col = random_dense(m, w, 7);
    col[..m].fill(f64::NAN);
    assert_eq!(assert_same_as_single(&col, m, w, nb, 0).unwrap()[0], 0);
}

#[test]
fn singular_panels_fail_on_every_member() {
    // A zero column (in a leaf, at a split point, in the right half) names its global
    // column on every member, as getrf_panel does.
    let (m, w, nb) = (150, 40, 40);
    for zero_col in [0, 5, 8, 16, 20, 39] {
        let mut a = random_dense(m, w, 40 + zero_col as u64);
        a[zero_col * m..(zero_col + 1) * m].fill(0.0);
        let e = assert_same_as_single(&a, m, w, nb, 64).unwrap_err();
        assert_eq!(e.column, 64 + zero_col);
    }
    // Column 1 = 2 · column 0, whose largest magnitude is 4 (in member 1's tile): exact
    // multipliers, so column 1 is exactly zero after the first step.
    let (m, w, nb) = (61, 13, 20);
    let mut rng = SplitMix64(3);
    let mut a = random_dense(m, w, 8);
    for x in &mut a[..m] {
        *x = (rng.next_u64() % 7) as f64 - 3.0;
    }
    a[27] = -4.0;
    for i in 0..m {
        a[i + m] = 2.0 * a[i];
    }
    let e = assert_same_as_single(&a, m, w, nb, 10).unwrap_err();
    assert_eq!(e, SingularColumn { column: 11 });
    let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
    for end in run_members(&tiles, &[0, 1, 2, 1], nb, m, 10, None) {
        assert_eq!(end.outcome, Err(DistPanelError::Singular(e)));
        assert_eq!(end.calls, 2, "no exchange after the singular column");
    }
    assert_eq!(
        DistPanelError::Singular(e).to_string(),
        "matrix is singular: exact zero pivot in column 11"
    );
}

#[test]
fn a_failing_exchange_ends_the_panel() {
    // Calls 0..8 are the first leaf's columns, call 8 the first A12.
    let (m, w, nb) = (150, 40, 40);
    let a = random_dense(m, w, 9);
    let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
    for (failing, call) in [(0, 0), (1, 0), (2, 5), (0, 8), (3, 8), (1, 30)] {
        let ends = run_members(&tiles, &[0, 1, 2, 3], nb, m, 0, Some((failing, call)));
        for (q, end) in ends.iter().enumerate() {
            let Err(DistPanelError::Exchange(e)) = &end.outcome else {
                panic!("member {q}: {:?} after call {call} failed", end.outcome);
            };
            if q == failing {
                assert!(e.contains(&format!("refuses call {call}")), "{e}");
                assert_eq!(end.calls, call + 1);
            }
        }
    }
    let e = DistPanelError::Exchange("pivot search of column 3: member 1 is gone".into());
    assert_eq!(
        e.to_string(),
        "panel exchange failed: pivot search of column 3: member 1 is gone"
    );
}

#[test]
fn malformed_parts_are_exchange_errors() {
    // An exchange that hands back a part too short, or a candidate row above the pivot
    // row, is refused rather than read.
    struct Bad(usize);
    impl ColumnExchange for Bad {
        fn members(&self) -> usize {
            2
        }
        fn me(&self) -> usize {
            0
        }
        fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
            // Member 1's part is [magnitude, row, 4 entries].
            let mut other = part.clone();
            if self.0 == 0 {
                other.truncate(3);
            } else {
                other.truncate(6);
                other[..2].copy_from_slice(&[1.0, -3.0]);
            }
            Ok(vec![part, other])
        }
    }
    let (m, w, nb) = (20, 4, 10);
    for bad in [0, 1] {
        let mut tiles = tiles_of(&random_dense(10, w, 1), 10, w, &[10]);
        let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
        let r = getrf_panel_dist(&mut refs, &[0], nb, m, 0, &Bad(bad));
        let Err(DistPanelError::Exchange(e)) = r else {
            panic!("{r:?}");
        };
        assert!(e.contains("member 1 sent a malformed candidate"), "{e}");
    }
}

#[test]
#[should_panic(expected = "member 0, and only member 0, holds panel tile 0")]
fn tile_0_belongs_to_member_0() {
    let mut tiles = tiles_of(&random_dense(10, 4, 1), 10, 4, &[10]);
    let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
    struct Second;
    impl ColumnExchange for Second {
        fn members(&self) -> usize {
            2
        }
        fn me(&self) -> usize {
            1
        }
        fn allgather(&self, _: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
            unreachable!()
        }
    }
    let _ = getrf_panel_dist(&mut refs, &[0], 10, 20, 0, &Second);
}

/// The `m × w` panel `a` in tiles of `nb` rows, a copy factored by `getrf_panel`, and
/// its outcome.
pub(crate) fn reference(
    a: &[f64],
    m: usize,
    w: usize,
    nb: usize,
    col0: usize,
) -> (Vec<Tile>, Vec<Tile>, Result<Vec<usize>, SingularColumn>) {
    let tiles = tiles_of(a, m, w, &split_rows(m, nb));
    let mut want_tiles = tiles.clone();
    let mut refs: Vec<&mut Tile> = want_tiles.iter_mut().collect();
    let want = getrf_panel(&mut refs, col0);
    (tiles, want_tiles, want)
}

/// A member (or rank) that succeeded among `ranks` ranks, `(ranks, m, w)`: one exchange
/// per leaf column and per recursion step (none alone), and `getrf_panel`'s bits in each
/// of its tiles (`index`: their panel tile numbers).
pub(crate) fn assert_success(
    what: &str,
    (ranks, m, w): (usize, usize, usize),
    calls: usize,
    tiles: &[Tile],
    index: &[usize],
    want_tiles: &[Tile],
) {
    let want_calls = if ranks == 1 { 0 } else { exchanges(m, 0, w) };
    assert_eq!(calls, want_calls, "{what}: exchanges");
    for (t, &i) in tiles.iter().zip(index) {
        assert_same_bits(t, &want_tiles[i], &format!("{what}, tile {i}"));
    }
}
