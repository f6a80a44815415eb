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

/// One rank of the distributed LU checks: every size at tile edges on this
/// grid, factors and pivots bit-identical to one process, HPL's residual
/// passing; then a singular matrix named on every rank.
fn lu_rank_suite(grid: &str) {
    use tessera_linalg::hpl::{generate_matrix, generate_tile, HPL_THRESHOLD};
    use tessera_linalg::lu_dist::{DistLu, Grid};
    use tessera_linalg::lu_seq::lu_tiled_seq;
    let m = mpi::init().unwrap();
    let rank = m.rank();
    let net = Net::new(m.transport());
    let c = Collectives::new(&net);
    let g = Grid::parse(grid).unwrap();
    assert_eq!(g.ranks(), m.size());
    for nb in [2, 8, 64] {
        for n in [1, nb - 1, nb + 1, 3 * nb + 5]
            .into_iter()
            .filter(|&n| n > 0)
        {
            let rt = Runtime::new(Config::with_workers(1)).unwrap();
            let lu = Arc::new(DistLu::new(&rt, n, nb, 7, g, rank));
            symbolic::run(&rt, &net, Arc::clone(&lu)).unwrap();
            let held = lu.take_factors(&rt).unwrap();
            let (_, resid) = lu.solve_and_check(&held, &c).unwrap();
            assert!(
                resid < HPL_THRESHOLD,
                "{grid} n={n} nb={nb}: residual {resid}"
            );
            let mut a = generate_matrix(n, nb, 7);
            let ipiv = lu_tiled_seq(&mut a).unwrap();
            for (i, j, tile) in &held.tiles {
                assert!(
                    tile.as_slice() == a.tile(*i, *j).as_slice(),
                    "{grid} n={n} nb={nb}: tile ({i},{j}) differs"
                );
            }
            for (k, p) in &held.pivots {
                let global: Vec<usize> = p.iter().map(|r| r + k * nb).collect();
                assert_eq!(&global[..], &ipiv[k * nb..k * nb + p.len()], "{grid} n={n}");
            }
        }
    }
    // A singular matrix: every rank stops naming the column.
    let (n, nb) = (40, 8);
    let rt = Runtime::new(Config::with_workers(1)).unwrap();
    let lu = Arc::new(DistLu::from_fn(&rt, n, nb, 1, g, rank, |i, j| {
        let mut t = generate_tile(n, nb, 1, i, j);
        if j == 2 {
            t.col_mut(3).iter_mut().for_each(|v| *v = 0.0);
        }
        t
    }));
    let e = symbolic::run(&rt, &net, lu).unwrap_err().to_string();
    assert!(
        e.contains("exact zero pivot in column 19"),
        "rank {rank}: {e}"
    );
    println!("rank {rank}: lu suite passed on {grid}");
}

#[test]
fn distributed_lu_under_mpirun() {
    if is_rank() {
        let grid = std::env::var("TESSERA_TEST_GRID").unwrap();
        return lu_rank_suite(&grid);
    }
    for grid in ["1x1", "1x2", "2x1", "1x3", "2x2"] {
        let np: usize = grid
            .split('x')
            .map(|v| v.parse::<usize>().unwrap())
            .product();
        let out = mpirun(
            np,
            "distributed_lu_under_mpirun",
            &[("TESSERA_TEST_GRID", grid)],
            LIMIT,
        );
        assert!(out.success, "grid {grid}:\n{}", out.output);
        for r in 0..np {
            assert!(
                out.output
                    .contains(&format!("rank {r}: lu suite passed on {grid}")),
                "grid {grid}: rank {r}:\n{}",
                out.output
            );
        }
    }
}
