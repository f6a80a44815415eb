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
