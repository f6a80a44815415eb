//! Proves the distributed layer over the in-process transport (ranks as
//! threads of one process, each with its own runtime): random symbolic DAGs
//! with random owners give exactly the sequential result at 1..4 ranks, data
//! crosses ranks once per (task, destination rank), collectives agree, and a
//! failing task on one rank ends every rank with an error naming the task
//! and the rank, within a timeout.

use std::sync::Arc;
use std::time::Duration;

use tessera_engine::dist::{local, symbolic, Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_tests::dist_dag::{RankDag, Shape};
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(120);

/// Run `f(rank, net)` on `ranks` threads connected by a local transport.
fn spmd<R: Send + 'static>(
    ranks: usize,
    f: impl Fn(usize, Arc<Net>) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = Arc::new(f);
    let handles: Vec<_> = local::world(ranks)
        .into_iter()
        .enumerate()
        .map(|(r, t)| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || f(r, Net::new(t)))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn random_symbolic_dags_match_sequential_at_1_to_4_ranks() {
    with_timeout(LIMIT, || {
        for seed in 0..24u64 {
            let ranks = 1 + seed as usize % 4;
            let n = 20 + (seed as usize * 37) % 150;
            let shape = Arc::new(Shape::random(seed, n, ranks));
            let expected = shape.expected();
            let s2 = Arc::clone(&shape);
            let results = spmd(ranks, move |rank, net| {
                let rt = Runtime::new(Config::with_workers(1 + rank % 2)).unwrap();
                let dag = Arc::new(RankDag::new(&rt, Arc::clone(&s2), rank, None));
                let stats = symbolic::run(&rt, &net, Arc::clone(&dag)).unwrap();
                (dag.outputs(&rt), stats)
            });
            let mut got = vec![None; n];
            for (outs, stats) in &results {
                for (t, v) in outs {
                    got[*t] = Some(v.clone());
                }
                assert!(stats.unfold.instantiated > 0 || n == 0);
            }
            for t in 0..n {
                assert_eq!(got[t].as_ref(), Some(&expected[t]), "seed {seed}: task {t}");
            }
            // One message per (finished task, destination rank), carrying
            // the task's output once.
            let crossing: usize = (0..n)
                .map(|t| {
                    let mut d: Vec<usize> = shape.succs[t]
                        .iter()
                        .map(|&s| shape.owner[s])
                        .filter(|&o| o != shape.owner[t])
                        .collect();
                    d.sort_unstable();
                    d.dedup();
                    d.len()
                })
                .sum();
            let sent: u64 = results.iter().map(|(_, s)| s.messages).sum();
            assert_eq!(sent as usize, crossing, "seed {seed}");
        }
    });
}

#[test]
fn a_failing_task_ends_every_rank_naming_it() {
    with_timeout(LIMIT, || {
        let ranks = 3;
        let shape = Arc::new(Shape::random(7, 120, ranks));
        // A task on rank 1 with successors on other ranks.
        let bad = (0..120)
            .find(|&t| shape.owner[t] == 1 && shape.succs[t].iter().any(|&s| shape.owner[s] != 1))
            .expect("such a task exists");
        let s2 = Arc::clone(&shape);
        let errors = spmd(ranks, move |rank, net| {
            let rt = Runtime::new(Config::with_workers(1)).unwrap();
            let dag = Arc::new(RankDag::new(&rt, Arc::clone(&s2), rank, Some(bad)));
            symbolic::run(&rt, &net, dag).unwrap_err().to_string()
        });
        for (rank, e) in errors.iter().enumerate() {
            assert!(
                e.contains(&format!("task {bad} fails on purpose")),
                "rank {rank}: {e}"
            );
            if rank != 1 {
                assert!(e.contains("rank 1"), "rank {rank}: {e}");
            }
        }
    });
}

#[test]
fn collectives_agree_and_catch_mismatched_parameters() {
    with_timeout(LIMIT, || {
        let out = spmd(4, |rank, net| {
            let c = Collectives::new(&net);
            let mut v = vec![rank as f64, 1.0];
            c.allreduce_sum(&mut v).unwrap();
            c.barrier().unwrap();
            let same = c.check_same("N", "8192").map_err(|e| e.to_string());
            let differ = c
                .check_same("seed", if rank == 2 { "2" } else { "1" })
                .unwrap_err();
            (v, same, differ)
        });
        for (v, same, differ) in out {
            assert_eq!(v, vec![6.0, 4.0]);
            assert!(same.is_ok());
            assert!(differ.contains("rank 2 has '2'"), "{differ}");
        }
    });
}

#[test]
fn random_stf_programs_match_sequential_at_1_to_4_ranks() {
    use tessera_engine::dist::stf::DistRuntime;
    use tessera_tests::dist_dag::StfProgram;
    with_timeout(LIMIT, || {
        for seed in 0..24u64 {
            let ranks = 1 + seed as usize % 4;
            let prog = Arc::new(StfProgram::random(seed, 2 + seed as usize % 9, 150, ranks));
            let expected = prog.expected();
            let p2 = Arc::clone(&prog);
            let results = spmd(ranks, move |rank, net| {
                let rt = Runtime::new(Config::with_workers(1 + rank % 2)).unwrap();
                let dist = DistRuntime::new(rt, net);
                let out = p2.run(&dist).unwrap();
                (out, dist.stats())
            });
            let mut got = vec![None; expected.len()];
            for (outs, _) in &results {
                for (h, v) in outs {
                    got[*h] = Some(v.clone());
                }
            }
            for (h, e) in expected.iter().enumerate() {
                assert_eq!(
                    got[h].as_ref(),
                    Some(e),
                    "seed {seed}, {ranks} ranks: handle {h}"
                );
            }
            let sends: u64 = results.iter().map(|(_, s)| s.sends).sum();
            let receives: u64 = results.iter().map(|(_, s)| s.receives).sum();
            assert_eq!(sends, receives, "seed {seed}: every send has its receive");
        }
    });
}

#[test]
fn received_data_is_cached_until_written() {
    use tessera_engine::dist::stf::DistRuntime;
    use tessera_engine::{Codelet, Read, ReadWrite};
    with_timeout(LIMIT, || {
        let stats = spmd(2, |_rank, net| {
            let dist = DistRuntime::new(Runtime::new(Config::with_workers(1)).unwrap(), net);
            let a = dist.register(0, vec![1.0f64; 64]);
            let outs: Vec<_> = (0..10)
                .map(|_| dist.register(1, vec![0.0f64; 64]))
                .collect();
            let add =
                Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>)>::new("add").cpu(|_, _, (a, o)| {
                    o.iter_mut().zip(a).for_each(|(o, a)| *o += a);
                    Ok(())
                });
            let scale = Codelet::<ReadWrite<Vec<f64>>>::new("scale").cpu(|_, _, a| {
                a.iter_mut().for_each(|x| *x *= 2.0);
                Ok(())
            });
            // Ten readers of `a` on rank 1: one transfer.
            for o in &outs {
                dist.task(&add, (a.r(), o.rw())).submit().unwrap();
            }
            // `a` changes on rank 0: the next readers need a second transfer.
            dist.task(&scale, a.rw()).submit().unwrap();
            for o in &outs {
                dist.task(&add, (a.r(), o.rw())).submit().unwrap();
            }
            dist.wait_all().unwrap();
            let s = dist.stats();
            let sums: Vec<f64> = outs
                .into_iter()
                .map(|o| dist.unregister(o).unwrap().iter().sum())
                .collect();
            (s, sums)
        });
        assert_eq!(stats[0].0.sends, 2);
        assert_eq!(stats[1].0.receives, 2);
        assert!(
            stats[1].1.iter().all(|&s| s == 64.0 * 3.0),
            "{:?}",
            stats[1].1
        );
    });
}

/// Factor the HPL matrix `(n, seed)` on `grid` over in-process ranks;
/// returns every rank's factor tiles and pivots.
#[allow(clippy::type_complexity)]
fn dist_lu(
    n: usize,
    nb: usize,
    seed: u64,
    grid: tessera_linalg::lu_dist::Grid,
) -> (
    Vec<(usize, usize, tessera_tasks::tile::Tile)>,
    Vec<(usize, Vec<usize>)>,
    Vec<(u64, u64)>,
) {
    use tessera_linalg::lu_dist::DistLu;
    let out = spmd(grid.ranks(), move |rank, net| {
        let rt = Runtime::new(
            Config::with_workers(1 + rank % 2).scheduler(tessera_engine::Scheduler::Prio),
        )
        .unwrap();
        let lu = Arc::new(DistLu::new(&rt, n, nb, seed, grid, rank));
        let stats = symbolic::run(&rt, &net, Arc::clone(&lu)).unwrap();
        let predicted = lu.predicted_bytes_sent();
        let held = lu.take_factors(&rt).unwrap();
        // The distributed solve passes HPL's check on every rank.
        let coll = Collectives::new(&net);
        let (_, resid) = lu.solve_and_check(&held, &coll).unwrap();
        assert!(
            resid < tessera_linalg::hpl::HPL_THRESHOLD,
            "rank {rank}: residual {resid}"
        );
        (held.tiles, held.pivots, (predicted, stats.bytes))
    });
    let mut tiles = Vec::new();
    let mut pivs = Vec::new();
    let mut bytes = Vec::new();
    for (t, p, b) in out {
        tiles.extend(t);
        pivs.extend(p);
        bytes.push(b);
    }
    (tiles, pivs, bytes)
}

#[test]
fn distributed_lu_is_bit_identical_to_one_process() {
    use tessera_linalg::hpl::generate_matrix;
    use tessera_linalg::lu_dist::Grid;
    use tessera_linalg::lu_seq::lu_tiled_seq;
    with_timeout(LIMIT, || {
        for (grid, nb) in [
            ("1x1", 8),
            ("1x2", 8),
            ("2x1", 8),
            ("2x2", 8),
            ("1x3", 8),
            ("2x2", 2),
            ("1x2", 64),
        ] {
            for n in [1, nb - 1, nb + 1, 3 * nb + 5] {
                let g = Grid::parse(grid).unwrap();
                let (tiles, pivs, bytes) = dist_lu(n, nb, 3, g);
                let mut a = generate_matrix(n, nb, 3);
                let ipiv = lu_tiled_seq(&mut a).unwrap();
                let t = n.div_ceil(nb);
                assert_eq!(tiles.len(), t * t, "{grid} n={n}: every tile held once");
                for (i, j, tile) in &tiles {
                    assert!(
                        tile.as_slice() == a.tile(*i, *j).as_slice(),
                        "{grid} nb={nb} n={n}: tile ({i},{j}) differs"
                    );
                }
                let mut got: Vec<usize> = Vec::new();
                let mut pivs = pivs;
                pivs.sort_by_key(|(k, _)| *k);
                for (k, p) in &pivs {
                    got.extend(p.iter().map(|&r| r + k * nb));
                }
                assert_eq!(got, ipiv, "{grid} nb={nb} n={n}: pivots differ");
                for (rank, (predicted, sent)) in bytes.iter().enumerate() {
                    assert_eq!(
                        predicted, sent,
                        "{grid} nb={nb} n={n}: rank {rank} sent {sent} bytes, model says {predicted}"
                    );
                }
            }
        }
    });
}

#[test]
fn distributed_lu_dag_is_consistent() {
    use tessera_engine::dist::symbolic::DistClasses;
    use tessera_engine::symbolic::{unroll, TaskClasses};
    use tessera_linalg::lu_dist::{DistLu, Grid};
    for grid in ["1x1", "1x2", "2x1", "2x2", "1x3", "3x2"] {
        let g = Grid::parse(grid).unwrap();
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let lu = DistLu::new(&rt, 8 * 7 + 3, 8, 1, g, 0);
        let tasks = unroll(&lu).unwrap_or_else(|e| panic!("{grid}: {e}"));
        for r in 0..g.ranks() {
            let mine = tasks.iter().filter(|(k, _)| lu.owner(k) == r).count();
            assert_eq!(mine, lu.owned(r), "{grid}: rank {r} owns {mine} tasks");
        }
    }
}

#[test]
fn singular_matrix_names_the_column_on_every_rank() {
    use tessera_linalg::lu_dist::{DistLu, Grid};
    with_timeout(LIMIT, || {
        for grid in ["1x2", "2x2", "1x3"] {
            let g = Grid::parse(grid).unwrap();
            let (n, nb, zero_col) = (24, 8, 13);
            let errors = spmd(g.ranks(), move |rank, net| {
                let rt = Runtime::new(Config::with_workers(1)).unwrap();
                let lu = Arc::new(DistLu::from_fn(&rt, n, nb, 1, g, rank, |i, j| {
                    let mut t = tessera_linalg::hpl::generate_tile(n, nb, 1, i, j);
                    if j == zero_col / nb {
                        t.col_mut(zero_col % nb).iter_mut().for_each(|v| *v = 0.0);
                    }
                    t
                }));
                symbolic::run(&rt, &net, lu).unwrap_err().to_string()
            });
            for (rank, e) in errors.iter().enumerate() {
                assert!(
                    e.contains("exact zero pivot in column 13"),
                    "{grid}: rank {rank}: {e}"
                );
            }
        }
    });
}
