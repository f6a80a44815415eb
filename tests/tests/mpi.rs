//! Proves the distributed layer over real MPI: each test re-executes this
//! binary under `mpirun -np N` (N = 1..4, oversubscribed) and, on every
//! rank, runs random symbolic DAGs and random STF programs with random
//! owners, which must give exactly the sequential result; a failing task on
//! rank 1 must end every rank with its message; a rank that dies must make
//! mpirun end, not hang.
#![cfg(feature = "mpi")]

use std::sync::Arc;
use std::time::Duration;

use tessera_backends::mpi;
use tessera_engine::dist::stf::DistRuntime;
use tessera_engine::dist::{symbolic, Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_tests::dist_dag::{RankDag, Shape, StfProgram};
use tessera_tests::mpirun::{is_rank, mpirun};

const LIMIT: Duration = Duration::from_secs(180);

/// One rank of the correctness suite.
fn rank_suite() {
    let m = mpi::init().unwrap();
    let (rank, ranks) = (m.rank(), m.size());
    let net = Net::new(m.transport());
    let c = Collectives::new(&net);
    c.check_same("test suite", "dags+stf").unwrap();
    for seed in 0..6u64 {
        let shape = Arc::new(Shape::random(seed * 31 + ranks as u64, 120, ranks));
        let expected = shape.expected();
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let dag = Arc::new(RankDag::new(&rt, Arc::clone(&shape), rank, None));
        symbolic::run(&rt, &net, Arc::clone(&dag)).unwrap();
        for (t, v) in dag.outputs(&rt) {
            assert_eq!(v, expected[t], "rank {rank}: DAG seed {seed}, task {t}");
        }
        let prog = StfProgram::random(seed + 100, 6, 120, ranks);
        let expected = prog.expected();
        let dist = DistRuntime::new(
            Runtime::new(Config::with_workers(1)).unwrap(),
            Arc::clone(&net),
        );
        for (h, v) in prog.run(&dist).unwrap() {
            assert_eq!(v, expected[h], "rank {rank}: STF seed {seed}, handle {h}");
        }
    }
    c.barrier().unwrap();
    println!("rank {rank}: suite passed");
}

#[test]
fn dags_and_stf_programs_match_sequential_under_mpirun() {
    if is_rank() {
        return rank_suite();
    }
    for np in 1..=4 {
        let out = mpirun(
            np,
            "dags_and_stf_programs_match_sequential_under_mpirun",
            &[],
            LIMIT,
        );
        assert!(out.success, "mpirun -np {np} failed:\n{}", out.output);
        for r in 0..np {
            assert!(
                out.output.contains(&format!("rank {r}: suite passed")),
                "np {np}: rank {r} did not finish:\n{}",
                out.output
            );
        }
    }
}

#[test]
fn a_failing_task_ends_every_rank_under_mpirun() {
    if is_rank() {
        let m = mpi::init().unwrap();
        let (rank, ranks) = (m.rank(), m.size());
        let net = Net::new(m.transport());
        let shape = Arc::new(Shape::random(5, 200, ranks));
        let bad = (0..200)
            .find(|&t| shape.owner[t] == 1 && shape.succs[t].iter().any(|&s| shape.owner[s] != 1))
            .expect("such a task exists");
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let dag = Arc::new(RankDag::new(&rt, shape, rank, Some(bad)));
        let e = symbolic::run(&rt, &net, dag).unwrap_err();
        println!("rank {rank} stopped: {e}");
        return;
    }
    let out = mpirun(3, "a_failing_task_ends_every_rank_under_mpirun", &[], LIMIT);
    assert!(out.success, "{}", out.output);
    for r in 0..3 {
        // Ranks print after the harness's "test ... " prefix on the line.
        let tag = format!("rank {r} stopped:");
        let line = out
            .output
            .lines()
            .find_map(|l| l.find(&tag).map(|i| &l[i..]))
            .unwrap_or_else(|| panic!("rank {r} did not stop with an error:\n{}", out.output));
        assert!(line.contains("fails on purpose"), "{line}");
        if r != 1 {
            assert!(line.contains("rank 1"), "{line}");
        }
    }
}

#[test]
fn a_rank_that_dies_ends_mpirun() {
    if is_rank() {
        let m = mpi::init().unwrap();
        let net = Net::new(m.transport());
        let c = Collectives::new(&net);
        if m.rank() == 1 {
            std::process::exit(3);
        }
        // The others wait for rank 1 forever: mpirun must end the job.
        let _ = c.barrier();
        return;
    }
    let out = mpirun(
        2,
        "a_rank_that_dies_ends_mpirun",
        &[],
        Duration::from_secs(60),
    );
    assert!(!out.success, "mpirun reported success:\n{}", out.output);
}
