//! Proves that a rank's team (1 to 3 members, each rank of 1 to 3 a team) factors its part
//! of a distributed panel exactly as `getrf_panel_dist` does: `getrf_panel`'s pivots on
//! every member and its bits in every tile, with the exchange called by team rank 0 only,
//! on random, graded, nearly singular and tied panels; that a singular panel or a failing
//! exchange ends every member; and that a panel admits one team.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use tessera_engine::team::run_threads;

use super::*;
use crate::kernels::getrf_panel::dist::tests::*;
use crate::kernels::getrf_panel::SingularColumn;
use crate::kernels::test_support::{
    grade_rows, nearly_singular, random_dense, split_rows, tiles_of, SplitMix64,
};

/// A rank's exchange shared by its team (team rank 0 is the only caller that counts):
/// records the threads that call `allgather`.
struct TeamExchange {
    me: usize,
    members: usize,
    ex: Mutex<ThreadExchange>,
    callers: Mutex<Vec<std::thread::ThreadId>>,
}

impl ColumnExchange for TeamExchange {
    fn members(&self) -> usize {
        self.members
    }

    fn me(&self) -> usize {
        self.me
    }

    fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
        self.callers
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.ex.lock().unwrap().allgather(part)
    }
}

/// What one rank's team ended with: every member's outcome (rank order), the rank's
/// tiles, its exchange calls, and whether only team rank 0 made them.
struct RankEnd {
    outcomes: Vec<Outcome>,
    tiles: Vec<Tile>,
    index: Vec<usize>,
    calls: usize,
    only_rank_0_called: bool,
}

/// [`run_members`] with a team of `team` threads per rank ([`DistTeamPanel`]).
fn run_teams(
    tiles: &[Tile],
    deal: &[usize],
    nb: usize,
    m: usize,
    col0: usize,
    team: usize,
    fail: Option<(usize, usize)>,
) -> Vec<RankEnd> {
    let size = deal.iter().max().map_or(1, |&q| q + 1);
    let (tx, rx) = mpsc::channel();
    for ex in group(size, fail) {
        let index: Vec<usize> = (0..tiles.len()).filter(|&i| deal[i] == ex.me).collect();
        let mine: Vec<Tile> = index.iter().map(|&i| tiles[i].clone()).collect();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let me = ex.me;
            let shared = TeamExchange {
                me,
                members: size,
                ex: Mutex::new(ex),
                callers: Mutex::new(Vec::new()),
            };
            let mut mine = mine;
            let outcomes = Mutex::new(vec![None; team]);
            {
                let mut refs: Vec<&mut Tile> = mine.iter_mut().collect();
                let panel = DistTeamPanel::new(&mut refs, &index, nb, m);
                run_threads(team, |member| {
                    let r = panel.factor(col0, &shared, member);
                    outcomes.lock().unwrap()[member.rank()] = Some(r);
                })
                .unwrap();
            }
            let TeamExchange { ex, callers, .. } = shared;
            // Releases ranks waiting on this one after a failure.
            let calls = ex.into_inner().unwrap().calls.get();
            let leader = std::thread::current().id();
            let end = RankEnd {
                outcomes: outcomes
                    .into_inner()
                    .unwrap()
                    .into_iter()
                    .map(|o| o.expect("every member returned"))
                    .collect(),
                tiles: mine,
                index,
                calls,
                only_rank_0_called: callers.into_inner().unwrap().iter().all(|&t| t == leader),
            };
            let _ = tx.send((me, end));
        });
    }
    drop(tx);
    let mut ends: Vec<Option<RankEnd>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let (me, end) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank returns within a minute (a member panicked or hangs?)");
        ends[me] = Some(end);
    }
    ends.into_iter().map(Option::unwrap).collect()
}

/// The `m × w` panel `a` factored by `getrf_panel`, then by 1 to 3 ranks (as many as
/// there are tiles) under each deal, each rank a team of 1 to 3: the same outcome on
/// every member of every rank; on success the same bits in every tile and
/// `getrf_panel_dist`'s exchanges, made by team rank 0 only. Returns `getrf_panel`'s
/// outcome.
fn assert_teams_same_as_single(
    a: &[f64],
    m: usize,
    w: usize,
    nb: usize,
    col0: usize,
) -> Result<Vec<usize>, SingularColumn> {
    let (tiles, want_tiles, want) = reference(a, m, w, nb, col0);
    let want_dist = want.clone().map_err(DistPanelError::Singular);
    for size in 1..=tiles.len().min(3) {
        for deal in deals(tiles.len(), size, (m * w + size) as u64) {
            for team in 1..=3 {
                let what = format!("m={m} w={w} nb={nb} deal {deal:?} team {team}");
                for (q, end) in run_teams(&tiles, &deal, nb, m, col0, team, None)
                    .into_iter()
                    .enumerate()
                {
                    assert!(
                        end.only_rank_0_called,
                        "{what}: rank {q}'s exchange callers"
                    );
                    for (r, outcome) in end.outcomes.iter().enumerate() {
                        assert_eq!(outcome, &want_dist, "{what}: rank {q} member {r}");
                    }
                    if want.is_err() {
                        continue;
                    }
                    let what = format!("{what}: rank {q}");
                    let ranks = (size, m, w);
                    assert_success(&what, ranks, end.calls, &end.tiles, &end.index, &want_tiles);
                }
            }
        }
    }
    want
}

/// Shapes for the teams: recursing several levels (w = 24..40), once (w = 9, 13), a
/// short last tile, w < nb, and one leaf.
const TEAM_SHAPES: [(usize, usize, usize); 6] = [
    (150, 40, 40),
    (97, 24, 24),
    (61, 13, 20),
    (33, 9, 11),
    (50, 5, 12),
    (60, 32, 40),
];

#[test]
fn teams_match_on_random_and_graded_panels() {
    let mut rng = SplitMix64(19);
    for (i, (m, w, nb)) in TEAM_SHAPES.into_iter().enumerate() {
        let a = random_dense(m, w, 200 + i as u64);
        assert_teams_same_as_single(&a, m, w, nb, 0).unwrap();
        let mut g = a;
        grade_rows(&mut g, m, w, &mut rng);
        assert_teams_same_as_single(&g, m, w, nb, 0).unwrap();
    }
}

#[test]
fn teams_match_on_nearly_singular_and_tied_panels() {
    for (m, w, nb, r) in [(150, 40, 40, 7), (97, 24, 24, 20)] {
        let a = nearly_singular(m, w, r);
        assert_teams_same_as_single(&a, m, w, nb, 0).unwrap();
    }
    let (m, w, nb) = (97, 24, 24);
    let mut rng = SplitMix64(5);
    let ones: Vec<f64> = (0..m * w)
        .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
        .collect();
    assert_teams_same_as_single(&ones, m, w, nb, 0).unwrap();
}

#[test]
fn teams_fail_singular_on_every_member() {
    let (m, w, nb) = (150, 40, 40);
    for zero_col in [0, 8, 20, 39] {
        let mut a = random_dense(m, w, 40 + zero_col as u64);
        a[zero_col * m..(zero_col + 1) * m].fill(0.0);
        let e = assert_teams_same_as_single(&a, m, w, nb, 64).unwrap_err();
        assert_eq!(e.column, 64 + zero_col);
    }
}

#[test]
fn a_failing_exchange_ends_every_member() {
    // Calls 0..8 are the first leaf's columns, call 8 the first A12.
    let (m, w, nb) = (150, 40, 40);
    let a = random_dense(m, w, 9);
    let tiles = tiles_of(&a, m, w, &split_rows(m, nb));
    for team in 1..=3 {
        for (failing, call) in [(0, 0), (1, 5), (0, 8), (2, 8), (1, 30)] {
            let ends = run_teams(&tiles, &[0, 1, 2, 1], nb, m, 0, team, Some((failing, call)));
            for (q, end) in ends.iter().enumerate() {
                assert!(end.only_rank_0_called, "rank {q}'s exchange callers");
                let first = end.outcomes[0].clone();
                let Err(DistPanelError::Exchange(e)) = &first else {
                    panic!("rank {q}: {first:?} after call {call} failed (team {team})");
                };
                if q == failing {
                    assert!(e.contains(&format!("refuses call {call}")), "{e}");
                    assert_eq!(end.calls, call + 1);
                }
                for o in &end.outcomes {
                    assert_eq!(o, &first, "rank {q}, team {team}: every member the same");
                }
            }
        }
    }
}

#[test]
fn a_team_panel_is_factored_once() {
    let mut tiles = tiles_of(&random_dense(10, 4, 1), 10, 4, &[10]);
    let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
    let panel = DistTeamPanel::new(&mut refs, &[0], 10, 10);
    assert!(run_threads(2, |m| panel.factor(0, &Alone, m))
        .unwrap()
        .is_ok());
    let e = run_threads(2, |m| panel.factor(0, &Alone, m)).err();
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("entered a panel already claimed")),
        "{e:?}"
    );
}
