//! Proves the distributed layer over real MPI: each test re-executes this
//! binary under `mpirun -np N` (N = 1..4, oversubscribed) and, on every
//! rank, runs random symbolic DAGs and random STF programs with random
//! owners, which must give exactly the sequential result; a failing task on
//! rank 1 must end every rank with its message; a rank that dies must make
//! mpirun end, not hang. Distributed SpMV, CG and power iteration on every
//! generator and a Matrix Market file equal the single-process runs (1e-12
//! relative) at 1..4 ranks; `tessera spmv` runs under mpirun end to end (per-rank
//! traces that merge) and refuses ranks started with different parameters;
//! ranks started without binding take CPUs of their own.
#![cfg(feature = "mpi")]

use std::sync::Arc;
use std::time::Duration;

use tessera_backends::mpi;
use tessera_engine::dist::stf::DistRuntime;
use tessera_engine::dist::{symbolic, Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_tests::dist_dag::{run_stf, stf_program, RankDag};
use tessera_tests::mpirun::{is_rank, mpirun};
use tessera_tests::random_dag::Shape;

const LIMIT: Duration = Duration::from_secs(180);

/// One rank of the correctness suite.
fn rank_suite() {
    let m = mpi::init().unwrap();
    let (rank, ranks) = (m.rank(), m.size());
    let net = Net::new(m.transport());
    let c = Collectives::new(&net);
    c.check_same("test suite", "dags+stf").unwrap();
    for seed in 0..6u64 {
        // 1 to 4 workers per rank: the idle workers that watch the network
        // (one at a time) and the others that park (engine `watch.rs`).
        let workers = 1 + seed as usize % 4;
        let shape = Arc::new(Shape::random(seed * 31 + ranks as u64, 120, ranks));
        let expected = shape.expected();
        let rt = Runtime::new(Config::with_workers(workers)).unwrap();
        let dag = Arc::new(RankDag::new(&rt, Arc::clone(&shape), rank, None));
        symbolic::run(&rt, &net, Arc::clone(&dag)).unwrap();
        for (t, v) in dag.outputs(&rt) {
            assert_eq!(v, expected[t], "rank {rank}: DAG seed {seed}, task {t}");
        }
        let prog = stf_program(seed + 100, 6, 120, ranks);
        let expected = prog.expected();
        let dist = DistRuntime::new(
            Runtime::new(Config::with_workers(workers)).unwrap(),
            Arc::clone(&net),
        );
        for (h, v) in run_stf(&prog, &dist).unwrap() {
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
        out.assert_every_rank_said(np, "suite passed", &format!("np {np}"));
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
    use tessera_linalg::lu::dist::{DistLu, Grid, Layout};
    use tessera_linalg::lu::seq::lu_tiled_seq;
    let m = mpi::init().unwrap();
    let rank = m.rank();
    let net = Net::new(m.transport());
    let c = Collectives::new(&net);
    let g = Grid::parse(grid).unwrap();
    assert_eq!(g.ranks(), m.size());
    for nb in [2usize, 8, 64] {
        for n in [1, nb - 1, nb + 1, 3 * nb + 5]
            .into_iter()
            .filter(|&n| n > 0)
        {
            // Cyclic, and (nb = 8, Q > 1) columns dealt as if rank r ran at
            // 1 + 2r.
            let t = n.div_ceil(nb);
            let speeds: Vec<f64> = (0..g.ranks()).map(|r| 1.0 + 2.0 * r as f64).collect();
            let mut layouts = vec![Layout::cyclic(g, t)];
            if nb == 8 && g.q > 1 {
                layouts.push(Layout::weighted(g, t, &speeds).unwrap());
            }
            for layout in layouts {
                let grid = format!("{grid} dealt {:?}", layout.columns_per_pcol());
                let rt = Runtime::new(Config::with_workers(1)).unwrap();
                let lu = Arc::new(DistLu::with_layout(&rt, n, nb, 7, layout, rank));
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
    }
    // A singular matrix: every rank stops naming the column.
    let (n, nb): (usize, usize) = (40, 8);
    let rt = Runtime::new(Config::with_workers(1)).unwrap();
    let layout = Layout::cyclic(g, n.div_ceil(nb));
    let lu = Arc::new(DistLu::from_fn(&rt, n, nb, 1, layout, rank, |i, j| {
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
        out.assert_every_rank_said(
            np,
            &format!("lu suite passed on {grid}"),
            &format!("grid {grid}"),
        );
    }
}

/// Env var naming the Matrix Market file the parent wrote for the ranks.
const MM_ENV: &str = "TESSERA_TEST_MM";

#[test]
fn distributed_spmv_and_solvers_equal_single_process_under_mpirun() {
    use tessera_tests::dist_spmv::{
        cases, check_rank, mm_path, reference, remove_all_mm, run_rank, write_all_mm,
    };
    if is_rank() {
        let m = mpi::init().unwrap();
        let (rank, ranks) = (m.rank(), m.size());
        let net = Net::new(m.transport());
        let coll = Collectives::new(&net);
        let mm = std::path::PathBuf::from(std::env::var(MM_ENV).unwrap());
        for case in cases(&mm) {
            coll.check_same("case", &case.spec).unwrap();
            // Every rank computes the (small) single-process reference itself.
            let want = reference(&case);
            let got = run_rank(&net, &coll, &case, 1);
            check_rank(&case, ranks, &got, &want);
        }
        coll.barrier().unwrap();
        println!("rank {rank}: spmv suite passed");
        return;
    }
    let mm = mm_path("mpirun");
    write_all_mm(&mm);
    for np in 1..=4 {
        let out = mpirun(
            np,
            "distributed_spmv_and_solvers_equal_single_process_under_mpirun",
            &[(MM_ENV, mm.to_str().unwrap())],
            LIMIT,
        );
        out.assert_every_rank_said(np, "spmv suite passed", &format!("np {np}"));
    }
    remove_all_mm(&mm);
}

/// Env vars naming the folder for the traces of `tessera spmv` under mpirun, and the solver.
const DIR_ENV: &str = "TESSERA_TEST_DIR";
const SOLVER_ENV: &str = "TESSERA_TEST_SOLVER";

fn spmv_cli(args: &[&str]) -> Result<(), String> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        spmv: tessera_bench::args::SpmvArgs,
    }
    let cli = Cli::try_parse_from(std::iter::once("spmv").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    tessera_bench::cmd::spmv::run(cli.spmv)
}

#[test]
fn tessera_spmv_runs_under_mpirun_with_per_rank_traces() {
    if is_rank() {
        let dir = std::path::PathBuf::from(std::env::var(DIR_ENV).unwrap());
        let trace = dir.join("run.json");
        // MPI starts once per process: one solver per mpirun.
        let solver = std::env::var(SOLVER_ENV).unwrap();
        spmv_cli(&[
            "--gen",
            "stencil27:12",
            "--iters",
            "4",
            "--workers",
            "1",
            "--no-bind",
            "--solver",
            &solver,
            "--stream-mi",
            "16",
            "--trace",
            trace.to_str().unwrap(),
        ])
        .unwrap();
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-mpi-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut output = String::new();
    for solver in ["spmv", "cg"] {
        let out = mpirun(
            2,
            "tessera_spmv_runs_under_mpirun_with_per_rank_traces",
            &[(DIR_ENV, dir.to_str().unwrap()), (SOLVER_ENV, solver)],
            LIMIT,
        );
        assert!(out.success, "{}", out.output);
        output.push_str(&out.output);
    }
    let out = tessera_tests::mpirun::Outcome {
        success: true,
        code: Some(0),
        output,
    };
    for needle in [
        "rank 0: rows 0..",
        "rank 1: rows ",
        "distributed spmv: 2 ranks x 1 worker(s), 4 iterations",
        "check: max relative difference from the reference loop",
        "distributed cg: 2 ranks",
        "cg: true residual",
        "merge with: tessera trace merge",
    ] {
        assert!(
            out.output.contains(needle),
            "missing '{needle}' in:\n{}",
            out.output
        );
    }
    // The halo the transports carried is what the partition predicts.
    let line = out
        .output
        .lines()
        .find(|l| l.contains("distributed spmv:"))
        .unwrap();
    let num = |after: &str| -> f64 {
        let i = line
            .find(after)
            .unwrap_or_else(|| panic!("'{after}' in {line}"))
            + after.len();
        line[i..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(num("; halo "), num("predicted by the partition "), "{line}");
    // No warning, except the one a machine whose last-level cache exceeds
    // the small triad earns (some VM types report a 300 MiB L3).
    let unexpected: Vec<_> = out
        .output
        .lines()
        .filter(|l| l.contains("warning") && !l.contains("measures the cache, not memory"))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:?} in:\n{}", out.output);
    // The two ranks' traces (of the last run, CG) merge into one with a process each.
    let traces: Vec<_> = (0..2)
        .map(|r| tessera_engine::trace::load(dir.join(format!("run.rank{r}.json"))).unwrap())
        .collect();
    // Both record the run's id, the same (issue 28: merge refuses mixed ids).
    let id = &traces[0].ranks[0].run_id;
    assert!(
        !id.is_empty() && traces[1].ranks[0].run_id == *id,
        "{:?}",
        traces[1].ranks
    );
    let merged = tessera_engine::trace::merge(traces).unwrap();
    assert_eq!(merged.ranks.len(), 2);
    assert!(merged
        .messages
        .iter()
        .any(|m| m.rank == 0 && m.kind == "halo"));
    assert!(merged
        .messages
        .iter()
        .any(|m| m.rank == 1 && m.kind == "halo"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 42, item 10: ranks started with different `--workers` were reported
/// as rank 0's one figure ("2 ranks x 1 worker(s)"). Now each rank's count is
/// given, said to differ.
#[test]
fn ranks_with_different_workers_are_reported_each() {
    if is_rank() {
        let rank: usize = std::env::var("OMPI_COMM_WORLD_RANK")
            .unwrap()
            .parse()
            .unwrap();
        let workers = (rank + 1).to_string();
        spmv_cli(&[
            "--gen",
            "stencil7:6",
            "--iters",
            "2",
            "--workers",
            &workers,
            "--no-bind",
            "--stream-mi",
            "16",
        ])
        .unwrap();
        return;
    }
    let out = mpirun(
        2,
        "ranks_with_different_workers_are_reported_each",
        &[],
        LIMIT,
    );
    assert!(out.success, "{}", out.output);
    assert!(
        out.output.contains(
            "distributed spmv: 2 ranks x 1, 2 (ranks started with different --workers) worker(s)"
        ),
        "{}",
        out.output
    );
}

#[test]
fn tessera_spmv_refuses_ranks_with_different_parameters() {
    if is_rank() {
        let rank: usize = std::env::var("OMPI_COMM_WORLD_RANK")
            .unwrap()
            .parse()
            .unwrap();
        let gen = if rank == 1 {
            "stencil7:6"
        } else {
            "stencil7:5"
        };
        // Fails (and ends the job) on every rank.
        let _ = spmv_cli(&["--gen", gen, "--iters", "2", "--workers", "1", "--no-bind"]);
        println!("rank {rank}: not refused");
        return;
    }
    let out = mpirun(
        3,
        "tessera_spmv_refuses_ranks_with_different_parameters",
        &[],
        LIMIT,
    );
    assert!(!out.success, "mpirun reported success:\n{}", out.output);
    assert!(!out.output.contains("not refused"), "{}", out.output);
    assert!(
        out.output
            .contains("ranks disagree on the spmv parameters: rank 0 has '--gen stencil7:5")
            && out.output.contains("rank 1 has '--gen stencil7:6"),
        "{}",
        out.output
    );
}

#[test]
fn messages_that_come_before_the_network_opens_are_kept() {
    if is_rank() {
        let m = mpi::init().unwrap();
        let rank = m.rank();
        if rank == 0 {
            // The others' first messages reach this rank's communication
            // thread before there is a network to route them.
            std::thread::sleep(Duration::from_millis(300));
        }
        let net = Net::new(m.transport());
        let c = Collectives::new(&net);
        c.check_same("early", "messages").unwrap();
        c.barrier().unwrap();
        println!("rank {rank}: early messages kept");
        return;
    }
    let out = mpirun(
        3,
        "messages_that_come_before_the_network_opens_are_kept",
        &[],
        Duration::from_secs(60),
    );
    out.assert_every_rank_said(3, "early messages kept", "early messages");
}

#[test]
fn the_communication_thread_is_bound_where_asked_and_still_carries_messages() {
    if is_rank() {
        let m = mpi::init().unwrap();
        let rank = m.rank();
        let mine = tessera_backends::cpu::current_thread_cpus().unwrap();
        let cpu = *mine.last().unwrap();
        m.bind_progress_thread(&[cpu]).unwrap();
        // The thread named for this rank's MPI now runs on `cpu` alone.
        let want = format!("tessera-mpi{rank}");
        let mut found = false;
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let dir = task.unwrap().path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap();
            if comm.trim() != want {
                continue;
            }
            let status = std::fs::read_to_string(dir.join("status")).unwrap();
            let allowed = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_string();
            assert_eq!(allowed, cpu.to_string(), "rank {rank}");
            found = true;
        }
        assert!(found, "rank {rank}: no thread named {want}");
        // A CPU that does not exist is refused with a message.
        let e = m.bind_progress_thread(&[60_000]).unwrap_err();
        assert!(e.contains("binding the MPI communication thread"), "{e}");
        let net = Net::new(m.transport());
        let c = Collectives::new(&net);
        c.check_same("bound", "messages").unwrap();
        c.barrier().unwrap();
        println!("rank {rank}: bound and talking");
        return;
    }
    let out = mpirun(
        2,
        "the_communication_thread_is_bound_where_asked_and_still_carries_messages",
        &[],
        Duration::from_secs(60),
    );
    out.assert_every_rank_said(2, "bound and talking", "bound communication thread");
}

fn lu_cli(args: &[&str]) -> Result<(), String> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        lu: tessera_bench::args::LuArgs,
    }
    let cli = Cli::try_parse_from(std::iter::once("lu").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    tessera_bench::cmd::lu::run(cli.lu)
}

/// A distributed LU too big for a rank's memory is refused on every rank
/// before anything is allocated, naming what the rank needs, including its
/// copies of other ranks' tiles (which it may hold all at once).
#[test]
fn tessera_lu_refuses_a_matrix_no_rank_can_hold() {
    if is_rank() {
        // About 1.3 TB a rank: more than any machine this runs on.
        let r = lu_cli(&[
            "--n",
            "400000",
            "--grid",
            "1x2",
            "--workers",
            "1",
            "--no-bind",
        ]);
        println!("rank result: {r:?}");
        return;
    }
    let out = mpirun(
        2,
        "tessera_lu_refuses_a_matrix_no_rank_can_hold",
        &[],
        LIMIT,
    );
    assert!(!out.success, "mpirun reported success:\n{}", out.output);
    // Every rank finds it; the first to fail ends the others (possibly
    // before they print), so the message may come from either rank.
    let named = (0..2).any(|r| {
        out.output.contains(&format!(
            "lu --n 400000 --nb 448 on rank {r} of a 1x2 grid needs about"
        ))
    });
    assert!(
        named && out.output.contains("copies of other ranks' tiles"),
        "{}",
        out.output
    );
}

/// Messages longer than the transport's largest MPI message (MPI counts
/// are `i32`: under 2 GiB) travel as a header and pieces and arrive whole,
/// byte for byte, in their sender's order among the short ones. The piece
/// size is cut to 1000 bytes for the first half of the messages, so no test
/// needs 2-GiB buffers; the second half goes with the default piece size,
/// so a message longer than the posted receive's 8 KiB goes as a header and
/// one piece. A burst of 300 short messages follows, more than a rank keeps
/// in flight (64): the rest wait in order.
#[test]
fn long_messages_arrive_whole_and_in_order_under_mpirun() {
    use tessera_engine::dist::Transport;
    if is_rank() {
        let m = mpi::init().unwrap();
        let (rank, ranks) = (m.rank(), m.size());
        let t = m.transport();
        let sizes = [
            10usize, 5000, 999, 1000, 1001, 250_000, 3, 0, 2999, 8191, 8192, 8193, 100_000,
        ];
        // Both halves: every size with pieces of 1000 bytes, then every
        // size with the default pieces; then the burst.
        let count = 2 * sizes.len() + 300;
        let body = |from: usize, i: usize| -> Vec<u8> {
            if i >= 2 * sizes.len() {
                // A burst message: its index and sender, so any reordering shows.
                return [(i as u64).to_le_bytes(), (from as u64).to_le_bytes()].concat();
            }
            (0..sizes[i % sizes.len()])
                .map(|b| (from * 131 + i * 17 + b * 7 % 251) as u8)
                .collect()
        };
        // Then one last short message, so no rank leaves while others
        // still send to it.
        let bye = vec![0xBBu8];
        for to in (0..ranks).filter(|&r| r != rank) {
            m.set_max_piece(1000);
            for i in 0..count {
                if i == sizes.len() {
                    m.set_max_piece(mpi::MAX_PIECE);
                }
                // A third go head first (`send_split`): with no sink, the
                // transport reads each tail after its head, whole.
                let b = body(rank, i);
                match i % 3 {
                    1 => t.send_split(to, b.clone(), (b.len() / 3).min(4000)),
                    _ => t.send(to, b),
                }
            }
            t.send(to, bye.clone());
        }
        let check = || -> Result<(), String> {
            let mut next = vec![0usize; ranks];
            next[rank] = count + 1;
            while next.iter().any(|&n| n <= count) {
                let (from, msg) = t
                    .recv(Duration::from_secs(30))
                    .ok_or("no message within 30 s")?;
                let i = next[from];
                let want = if i < count {
                    body(from, i)
                } else if i == count {
                    bye.clone()
                } else {
                    return Err(format!("a message from rank {from} after its last"));
                };
                if msg != want {
                    return Err(format!(
                        "message {i} from rank {from} ({} bytes, {} expected) differs",
                        msg.len(),
                        want.len()
                    ));
                }
                next[from] += 1;
            }
            Ok(())
        };
        if let Err(e) = check() {
            // End every rank now, not after their own timeouts.
            println!("rank {rank}: {e}");
            m.abort(1);
        }
        while t.pending_sends() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        println!("rank {rank}: long messages whole");
        return;
    }
    let out = mpirun(
        3,
        "long_messages_arrive_whole_and_in_order_under_mpirun",
        &[],
        Duration::from_secs(120),
    );
    out.assert_every_rank_said(3, "long messages whole", "long messages");
}

/// A value of two parts (a [`Replicate`](tessera_engine::memory::Replicate)
/// type whose parts a message carries in turn), for
/// `long_edges_are_read_into_their_data_under_mpirun`.
#[derive(Clone)]
struct TwoParts(Vec<u8>, Vec<u8>);

impl tessera_engine::memory::Replicate for TwoParts {
    fn bytes(&self) -> usize {
        self.0.len() + self.1.len()
    }
    fn replicate(&self) -> Self {
        self.clone()
    }
    fn copy_from(&mut self, src: &Self) {
        self.0.copy_from_slice(&src.0);
        self.1.copy_from_slice(&src.1);
    }
    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![&self.0, &self.1])
    }
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        Some(vec![&mut self.0, &mut self.1])
    }
}

/// The edges of `long_edges_are_read_into_their_data_under_mpirun`: task
/// `(0, k)` on rank 0 writes a small value `g` and one of four two-part
/// values (`k % 4`, from 16 bytes to about 1 MB), after task `(0, k - 1)`;
/// task `(1, k)` on rank `1 + k % (ranks - 1)` reads both and checks every
/// byte. One message per edge carries both items, the large one last, so
/// the MPI transport sends it head first and the receiver reads the large
/// one straight into its copy; one reader in three is slow, so a later
/// version often finds the copy still being read and goes the whole-message
/// way (a receive task after the reader).
struct LongEdges {
    steps: u64,
    ranks: usize,
    g: tessera_engine::DataHandle<Vec<u8>>,
    h: Vec<tessera_engine::DataHandle<TwoParts>>,
}

/// The parts' lengths of `LongEdges`' values.
const LONG_EDGE_SIZES: [(usize, usize); 4] =
    [(10, 6), (1500, 7000), (20000, 5), (600_000, 424_288)];

fn long_edge_byte(k: u64, part: usize, i: usize) -> u8 {
    (k as usize * 31 + part * 101 + i * 7 + i / 251) as u8
}

fn long_edge_value(k: u64) -> TwoParts {
    let (a, b) = LONG_EDGE_SIZES[(k % 4) as usize];
    TwoParts(
        (0..a).map(|i| long_edge_byte(k, 0, i)).collect(),
        (0..b).map(|i| long_edge_byte(k, 1, i)).collect(),
    )
}

type LongWrite = (
    tessera_engine::Write<Vec<u8>>,
    tessera_engine::Write<TwoParts>,
);
type LongRead = (
    tessera_engine::Read<Vec<u8>>,
    tessera_engine::Read<TwoParts>,
);

static LONG_WRITE: std::sync::LazyLock<tessera_engine::Codelet<LongWrite, u64>> =
    std::sync::LazyLock::new(|| {
        tessera_engine::Codelet::<LongWrite, u64>::with_args("write").cpu(|_, &k, (g, h)| {
            *g = k.to_le_bytes().repeat(2);
            *h = long_edge_value(k);
            Ok(())
        })
    });

static LONG_READ: std::sync::LazyLock<tessera_engine::Codelet<LongRead, u64>> =
    std::sync::LazyLock::new(|| {
        tessera_engine::Codelet::<LongRead, u64>::with_args("read").cpu(|_, &k, (g, h)| {
            if **g != k.to_le_bytes().repeat(2) {
                return Err(format!("step {k}: the small item is {g:?}").into());
            }
            check_long_edge(k, h)
        })
    });

/// Checks every byte of `h`, step `k`'s value (slowly for one step in three).
fn check_long_edge(k: u64, h: &TwoParts) -> Result<(), tessera_engine::BodyError> {
    if k.is_multiple_of(3) {
        std::thread::sleep(Duration::from_millis(3));
    }
    let want = long_edge_value(k);
    for (part, (got, want)) in [(&h.0, &want.0), (&h.1, &want.1)].into_iter().enumerate() {
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != want.get(i)) {
            return Err(format!("step {k}: part {part} differs at byte {i}").into());
        }
    }
    Ok(())
}

static STF_LONG_WRITE: std::sync::LazyLock<
    tessera_engine::Codelet<tessera_engine::Write<TwoParts>, u64>,
> = std::sync::LazyLock::new(|| {
    tessera_engine::Codelet::<tessera_engine::Write<TwoParts>, u64>::with_args("write").cpu(
        |_, &k, h| {
            *h = long_edge_value(k);
            Ok(())
        },
    )
});

static STF_LONG_READ: std::sync::LazyLock<
    tessera_engine::Codelet<tessera_engine::Read<TwoParts>, u64>,
> = std::sync::LazyLock::new(|| {
    tessera_engine::Codelet::<tessera_engine::Read<TwoParts>, u64>::with_args("read")
        .cpu(|_, &k, h| check_long_edge(k, h))
});

/// The edges of `LongEdges` through the STF layer: rank 0 writes value
/// `k % 4` at step `k`, rank `1 + k % (ranks - 1)` reads and checks it.
fn stf_long_edges(dist: &DistRuntime, ranks: usize) -> Result<(), tessera_engine::Error> {
    let h: Vec<_> = (0..4)
        .map(|k| dist.register(0, long_edge_value(k + 100)))
        .collect();
    for k in 0..40u64 {
        let hk = &h[(k % 4) as usize];
        dist.task(&STF_LONG_WRITE, hk.w()).args(k).submit()?;
        dist.task(&STF_LONG_READ, hk.r())
            .args(k)
            .on_rank(1 + k as usize % (ranks - 1))
            .submit()?;
    }
    dist.wait_all()?;
    for hk in h {
        dist.unregister(hk)?;
    }
    Ok(())
}

impl tessera_engine::symbolic::TaskClasses for LongEdges {
    type Key = (u8, u64);

    fn roots(&self) -> Vec<(u8, u64)> {
        vec![(0, 0)]
    }
    fn predecessor_count(&self, key: &(u8, u64)) -> usize {
        usize::from(*key != (0, 0))
    }
    fn successors(&self, &(side, k): &(u8, u64), out: &mut Vec<(u8, u64)>) {
        if side == 0 {
            out.push((1, k));
            if k + 1 < self.steps {
                out.push((0, k + 1));
            }
        }
    }
    fn task(&self, &(side, k): &(u8, u64)) -> tessera_engine::TaskBuilder {
        let h = &self.h[(k % 4) as usize];
        match side {
            0 => tessera_engine::Task::new(&LONG_WRITE, (self.g.w(), h.w()))
                .args(k)
                .into(),
            _ => tessera_engine::Task::new(&LONG_READ, (self.g.r(), h.r()))
                .args(k)
                .into(),
        }
    }
    fn owner(&self, &(side, k): &(u8, u64)) -> usize {
        match side {
            0 => 0,
            _ => 1 + (k as usize) % (self.ranks - 1),
        }
    }
}

impl symbolic::DistClasses for LongEdges {
    fn flows(&self, &(_, k): &(u8, u64), _to: &(u8, u64), out: &mut Vec<u64>) {
        // The small item first: the large one is last, read in place.
        out.extend([0, 1 + k % 4]);
    }
    fn data(&self, key: u64) -> tessera_engine::dist::DataRef {
        match key {
            0 => tessera_engine::dist::DataRef::of(&self.g),
            m => tessera_engine::dist::DataRef::of(&self.h[m as usize - 1]),
        }
    }
    fn owned(&self, rank: usize) -> usize {
        let steps = self.steps as usize;
        match rank {
            0 => steps,
            r => (0..steps).filter(|k| 1 + k % (self.ranks - 1) == r).count(),
        }
    }
}

/// Issue 41 (1 MiB remote edges at MPI's bandwidth): a remote edge's large
/// last data item goes head first and is received straight into the
/// receiver's copy of the data, or, when a task still reads that copy, as a
/// whole message copied by a receive task; the same through the STF layer
/// (`DistRuntime`), whose receive task then has nothing to copy. Every byte arrives, in both ways,
/// at 2 and 3 ranks, with MPI pieces of the default size and of 1000 bytes
/// (pieces that cross the two parts of a value).
#[test]
fn long_edges_are_read_into_their_data_under_mpirun() {
    if is_rank() {
        both_layers_at_two_piece_sizes(
            "long edges read",
            |rt, net, ranks| {
                let edges = Arc::new(LongEdges {
                    steps: 40,
                    ranks,
                    g: rt.register_replicable(vec![0u8; 16]),
                    h: (0..4)
                        .map(|k| rt.register_replicable(long_edge_value(k + 100)))
                        .collect(),
                });
                symbolic::run(rt, net, edges).map(drop)
            },
            stf_long_edges,
        );
        return;
    }
    at_two_and_three_ranks(
        "long_edges_are_read_into_their_data_under_mpirun",
        "long edges read",
    );
}

/// One rank of a test through both distributed layers: for MPI pieces of
/// the default size and of 1000 bytes (pieces that cross a value's parts,
/// many sends in flight), `symbolic(rt, net, ranks)` on a fresh runtime,
/// then `stf(dist, ranks)` on a fresh `DistRuntime`, each with 2 workers.
/// An error aborts every rank, naming its layer; at the end, every rank
/// prints `rank R: said`.
fn both_layers_at_two_piece_sizes(
    said: &str,
    symbolic: impl Fn(&Runtime, &Arc<Net>, usize) -> Result<(), tessera_engine::Error>,
    stf: impl Fn(&DistRuntime, usize) -> Result<(), tessera_engine::Error>,
) {
    let m = mpi::init().unwrap();
    let (rank, ranks) = (m.rank(), m.size());
    let net = Net::new(m.transport());
    for piece in [mpi::MAX_PIECE, 1000] {
        m.set_max_piece(piece);
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        if let Err(e) = symbolic(&rt, &net, ranks) {
            println!("rank {rank}: symbolic: {e}");
            m.abort(1);
        }
        let dist = DistRuntime::new(
            Runtime::new(Config::with_workers(2)).unwrap(),
            Arc::clone(&net),
        );
        if let Err(e) = stf(&dist, ranks) {
            println!("rank {rank}: STF: {e}");
            m.abort(1);
        }
    }
    Collectives::new(&net).barrier().unwrap();
    println!("rank {rank}: {said}");
}

/// Run test `name` under mpirun at 2 and at 3 ranks, each of which must
/// say `said` (see [`both_layers_at_two_piece_sizes`]).
fn at_two_and_three_ranks(name: &str, said: &str) {
    for ranks in [2, 3] {
        let out = mpirun(ranks, name, &[], Duration::from_secs(120));
        out.assert_every_rank_said(ranks, said, name);
    }
}

/// Bytes of the value `lent_bytes_are_not_overwritten_before_they_arrive_under_mpirun`
/// sends: one part, long enough to be lent (`dist::lent`, 64 KiB and up).
const LENT_BYTES: usize = 300_000;

/// Steps of that test: one write of the value each.
const LENT_STEPS: u64 = 30;

fn lent_byte(k: u64, i: usize) -> u8 {
    (k as usize * 37 + i * 11 + i / 4093) as u8
}

static LENT_FILL: std::sync::LazyLock<
    tessera_engine::Codelet<tessera_engine::Write<Vec<u8>>, u64>,
> = std::sync::LazyLock::new(|| {
    tessera_engine::Codelet::<tessera_engine::Write<Vec<u8>>, u64>::with_args("fill").cpu(
        |_, &k, v| {
            v.iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = lent_byte(k, i));
            Ok(())
        },
    )
});

static LENT_CHECK: std::sync::LazyLock<
    tessera_engine::Codelet<tessera_engine::Read<Vec<u8>>, u64>,
> = std::sync::LazyLock::new(|| {
    tessera_engine::Codelet::<tessera_engine::Read<Vec<u8>>, u64>::with_args("check").cpu(
        |_, &k, v| match (0..LENT_BYTES).find(|&i| v.get(i) != Some(&lent_byte(k, i))) {
            Some(i) => Err(format!(
                "step {k}: byte {i} is {:?}, step {k}'s is {}",
                v.get(i),
                lent_byte(k, i)
            )
            .into()),
            None => Ok(()),
        },
    )
});

/// The symbolic graph of that test: task `(0, k)` on rank 0 fills the one
/// value `v` with step `k`'s bytes, after `(0, k - 1)`; task `(r, k)` on
/// every other rank `r` reads and checks it.
struct LentChain {
    ranks: usize,
    v: tessera_engine::DataHandle<Vec<u8>>,
}

impl tessera_engine::symbolic::TaskClasses for LentChain {
    type Key = (usize, u64);

    fn roots(&self) -> Vec<(usize, u64)> {
        vec![(0, 0)]
    }
    fn predecessor_count(&self, key: &(usize, u64)) -> usize {
        usize::from(*key != (0, 0))
    }
    fn successors(&self, &(r, k): &(usize, u64), out: &mut Vec<(usize, u64)>) {
        if r == 0 {
            out.extend((1..self.ranks).map(|r| (r, k)));
            if k + 1 < LENT_STEPS {
                out.push((0, k + 1));
            }
        }
    }
    fn task(&self, &(r, k): &(usize, u64)) -> tessera_engine::TaskBuilder {
        match r {
            0 => tessera_engine::Task::new(&LENT_FILL, self.v.w())
                .args(k)
                .into(),
            _ => tessera_engine::Task::new(&LENT_CHECK, self.v.r())
                .args(k)
                .into(),
        }
    }
    fn owner(&self, &(r, _): &(usize, u64)) -> usize {
        r
    }
}

impl symbolic::DistClasses for LentChain {
    fn flows(&self, _from: &(usize, u64), _to: &(usize, u64), out: &mut Vec<u64>) {
        out.push(0);
    }
    fn data(&self, _key: u64) -> tessera_engine::dist::DataRef {
        tessera_engine::dist::DataRef::of(&self.v)
    }
    fn owned(&self, rank: usize) -> usize {
        LENT_STEPS as usize * usize::from(rank < self.ranks)
    }
}

/// Issue 41 (1 MiB remote edges at MPI's speed): a long one-part value is
/// sent from where it lies (MPI reads the data itself, no copy into a
/// message), so its next writer must wait until MPI has read it. Here rank
/// 0 rewrites one value at every step, at once (its next writer follows only
/// its previous one), and every other rank checks each version it gets:
/// a writer that did not wait would change bytes MPI was still sending.
/// Through the symbolic and the STF layers, at 2 and 3 ranks (two loans of
/// the value at a time), with MPI pieces of the default size and of 1000
/// bytes (a slower send, many pieces in flight).
#[test]
fn lent_bytes_are_not_overwritten_before_they_arrive_under_mpirun() {
    if is_rank() {
        both_layers_at_two_piece_sizes(
            "lent bytes arrived whole",
            |rt, net, ranks| {
                let v = rt.register_replicable(vec![0u8; LENT_BYTES]);
                symbolic::run(rt, net, Arc::new(LentChain { ranks, v })).map(drop)
            },
            |dist, ranks| {
                let v = dist.register(0, vec![0u8; LENT_BYTES]);
                for k in 0..LENT_STEPS {
                    dist.task(&LENT_FILL, v.w()).args(k).submit()?;
                    for r in 1..ranks {
                        dist.task(&LENT_CHECK, v.r()).args(k).on_rank(r).submit()?;
                    }
                }
                dist.wait_all()?;
                dist.unregister(v).map(drop)
            },
        );
        return;
    }
    at_two_and_three_ranks(
        "lent_bytes_are_not_overwritten_before_they_arrive_under_mpirun",
        "lent bytes arrived whole",
    );
}

/// Env var naming the case of `distributed_spmv_refuses_what_one_process_refuses`.
const CASE_ENV: &str = "TESSERA_TEST_CASE";

/// Issue 28: the distributed `spmv` path skipped the one-process checks:
/// `--matrix /dev/zero` aborted at 2.2 GB, a FIFO hung, and generated
/// matrices too big for a rank aborted on allocation. Now each is refused
/// on every rank with the one-process message.
#[test]
fn distributed_spmv_refuses_what_one_process_refuses() {
    if is_rank() {
        let case = std::env::var(CASE_ENV).unwrap();
        let (flag, value) = case.split_once(' ').unwrap();
        let r = spmv_cli(&[flag, value, "--iters", "2", "--workers", "1", "--no-bind"]);
        println!("rank result: {r:?}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-mpi-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("m.mtx");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
    let cases = [
        (
            "--matrix /dev/zero".to_string(),
            "a device, not a regular file",
        ),
        (
            format!("--matrix {}", fifo.display()),
            "a FIFO, not a regular file",
        ),
        ("--gen dense:100000".to_string(), "needs about"),
        ("--gen stencil7:1000".to_string(), "needs about"),
    ];
    for (case, want) in &cases {
        let out = mpirun(
            2,
            "distributed_spmv_refuses_what_one_process_refuses",
            &[(CASE_ENV, case)],
            Duration::from_secs(60),
        );
        assert!(
            !out.success,
            "{case}: mpirun reported success:\n{}",
            out.output
        );
        assert!(
            out.output.contains(want),
            "{case}: no '{want}' in:\n{}",
            out.output
        );
        for bad in ["memory allocation", "panicked", "capacity overflow"] {
            assert!(!out.output.contains(bad), "{case}: {bad}:\n{}", out.output);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 28: ranks that read different files at the same path (nodes
/// without a shared file system) passed the parameter check, which compares
/// the path only. Each rank here runs in a folder of its own with its own
/// `m.mtx`: the content check refuses them.
#[test]
fn distributed_spmv_refuses_different_files_at_one_path() {
    if is_rank() {
        let rank: usize = std::env::var("OMPI_COMM_WORLD_RANK")
            .unwrap()
            .parse()
            .unwrap();
        let dir = std::path::PathBuf::from(std::env::var(DIR_ENV).unwrap());
        std::env::set_current_dir(dir.join(format!("r{rank}"))).unwrap();
        let r = spmv_cli(&[
            "--matrix",
            "m.mtx",
            "--iters",
            "2",
            "--workers",
            "1",
            "--no-bind",
        ]);
        println!("rank {rank}: not refused: {r:?}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-mpi-paths-{}", std::process::id()));
    for (r, v) in [(0, "2.0"), (1, "3.0")] {
        let d = dir.join(format!("r{r}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("m.mtx"),
            format!("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 {v}\n2 2 1.0\n"),
        )
        .unwrap();
    }
    let out = mpirun(
        2,
        "distributed_spmv_refuses_different_files_at_one_path",
        &[(DIR_ENV, dir.to_str().unwrap())],
        Duration::from_secs(60),
    );
    assert!(!out.success, "mpirun reported success:\n{}", out.output);
    assert!(!out.output.contains("not refused"), "{}", out.output);
    assert!(
        out.output
            .contains("ranks disagree on the content of m.mtx"),
        "{}",
        out.output
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Env var naming the case of `tessera taskbench` under mpirun.
const TASKBENCH_ENV: &str = "TESSERA_TEST_TASKBENCH";

/// Issue 41: `tessera taskbench` under mpirun, points dealt to ranks in
/// blocks and outputs carried by remote edges, with every front-end (STF on
/// `DistRuntime`, the symbolic one, light tasks; the light ones on the
/// graphs whose buffers the edges order): every pattern (as graphs of one
/// run, `-and`; every other one reusing 3 output buffers per point, so
/// write-after-read edges cross ranks too) validates its inputs at 1, 2 and
/// 3 ranks; so do graphs with a buffer per timestep, whose symbolic
/// classes skip the inference, some outputs large enough to go through
/// receive tasks (2 and 3 ranks), and graphs reusing 2 or 3 buffers per
/// point whose classes skip it too; a corrupted output ends every rank with
/// the reader's error.
#[test]
fn tessera_taskbench_validates_under_mpirun() {
    if is_rank() {
        let case = std::env::var(TASKBENCH_ENV).unwrap_or_default();
        let (what, frontend) = case.split_once(':').expect("CASE:FRONTEND");
        let mut args = vec![
            "tessera",
            "taskbench",
            "--workers",
            "1",
            "--no-bind",
            "--frontend",
            frontend,
        ];
        if what.starts_with("corrupt") {
            args.extend_from_slice(&["--corrupt", "1:3:3"]);
        }
        // Buffers reused (`-field 2` and 3, as the METG sweep runs): the
        // write-after-read edges order every buffer, so the symbolic
        // classes promise their order here too; one graph's outputs are
        // over 64 KiB (receive tasks write the reused copies).
        let reused: &[&[&str]] = &[
            &["-type", "stencil_1d", "-field", "2", "-output", "70000"],
            &["-type", "nearest", "-radix", "5", "-field", "2"],
            &[
                "-type", "spread", "-radix", "2", "-period", "3", "-field", "3",
            ],
            &["-type", "fft", "-field", "2"],
        ];
        // A buffer per timestep everywhere: the symbolic classes promise
        // their order (`TaskClasses::described_order`), so no inference
        // runs; three graphs' outputs are over 64 KiB, so receive tasks
        // write them (and the successors wait for those: made at once, they
        // read the buffers unwritten in 1 of 2 runs).
        let fresh: &[&[&str]] = &[
            &["-type", "stencil_1d", "-output", "70000"],
            &["-type", "nearest", "-radix", "5", "-output", "70000"],
            &["-type", "fft", "-output", "100000"],
            &["-type", "tree", "-output", "32"],
        ];
        if let Some(graphs) = match what {
            "reused" => Some(reused),
            "fresh" | "corrupt-fresh" => Some(fresh),
            _ => None,
        } {
            for (i, graph) in graphs.iter().enumerate() {
                if i > 0 {
                    args.push("-and");
                }
                args.extend_from_slice(&["-steps", "12", "-width", "7"]);
                args.extend_from_slice(graph);
                args.extend_from_slice(&["-kernel", "busy_wait", "-iter", "50"]);
            }
            std::process::exit(i32::from(tessera_bench::cli::main(args)));
        }
        for (i, graph) in [
            &["-type", "stencil_1d"][..],
            &["-type", "stencil_1d_periodic"],
            &["-type", "dom"],
            &["-type", "tree"],
            &["-type", "fft"],
            &["-type", "all_to_all"],
            &["-type", "nearest", "-radix", "5"],
            &["-type", "spread", "-radix", "2", "-period", "3"],
            &["-type", "random_nearest", "-radix", "3"],
            &["-type", "no_comm"],
            &["-type", "trivial"],
        ]
        .iter()
        .enumerate()
        {
            if i > 0 {
                args.push("-and");
            }
            args.extend_from_slice(&["-steps", "12", "-width", "7", "-output", "32"]);
            if i % 2 == 1 {
                args.extend_from_slice(&["-field", "3"]);
            }
            args.extend_from_slice(graph);
            args.extend_from_slice(&["-kernel", "busy_wait", "-iter", "50"]);
        }
        std::process::exit(i32::from(tessera_bench::cli::main(args)));
    }
    for frontend in ["stf", "symbolic", "light"] {
        // The light front-end refuses the first case's reused `tree` buffers
        // (no path joins two writers): it runs the other two at 1–3 ranks.
        let cases: Vec<(usize, &str)> = match frontend {
            "light" => (1..=3)
                .flat_map(|np| [(np, "fresh"), (np, "reused")])
                .collect(),
            _ => (1..=3)
                .map(|np| (np, "ok"))
                .chain([(2, "fresh"), (3, "fresh"), (2, "reused"), (3, "reused")])
                .collect(),
        };
        for (np, what) in cases {
            let case = format!("{what}:{frontend}");
            let out = mpirun(
                np,
                "tessera_taskbench_validates_under_mpirun",
                &[(TASKBENCH_ENV, case.as_str())],
                LIMIT,
            );
            assert!(out.success, "{frontend} np {np}: {}", out.output);
            assert!(out.output.contains("Total Tasks "), "{}", out.output);
            assert!(
                out.output.contains(&format!(
                    "tessera: {np} rank(s) x 1 worker(s), scheduler ws, front-end {frontend}"
                )),
                "{}",
                out.output
            );
        }
        let case = match frontend {
            "light" => "corrupt-fresh:light".to_string(),
            _ => format!("corrupt:{frontend}"),
        };
        let out = mpirun(
            2,
            "tessera_taskbench_validates_under_mpirun",
            &[(TASKBENCH_ENV, case.as_str())],
            LIMIT,
        );
        assert!(!out.success, "{frontend}: {}", out.output);
        assert!(
            out.output.contains("corrupted input")
                && out
                    .output
                    .contains("holds (timestep 4, point 3), expected (timestep 3, point 3)"),
            "{frontend}: {}",
            out.output
        );
    }
}

/// Env var naming the case of `tessera cholesky` under mpirun.
const CHOLESKY_ENV: &str = "TESSERA_TEST_CHOLESKY";

/// Issue 41's user program: `tessera cholesky`, written once against
/// `dist::Submit`, factors on 1, 2 and 3 ranks (tiles dealt block-cyclic,
/// read tiles carried by remote edges) to faer's factor on every rank's
/// tiles; a matrix that is not positive definite ends every rank with the
/// failing task's tile named.
#[test]
fn tessera_cholesky_matches_faer_under_mpirun() {
    if is_rank() {
        let case = std::env::var(CHOLESKY_ENV).unwrap_or_default();
        let mut args = vec![
            "tessera",
            "cholesky",
            "--workers",
            "1",
            "--no-bind",
            "--n",
            "160",
            "--nb",
            "32",
            "--rounds",
            "2",
            "--no-peer",
        ];
        if case == "indefinite" {
            args.extend_from_slice(&["--diagonal", "-1000"]);
        }
        std::process::exit(i32::from(tessera_bench::cli::main(args)));
    }
    for np in 1..=3 {
        let out = mpirun(
            np,
            "tessera_cholesky_matches_faer_under_mpirun",
            &[(CHOLESKY_ENV, "ok")],
            LIMIT,
        );
        assert!(out.success, "np {np}: {}", out.output);
        let grid = format!("{np} rank(s) on a 1x{np} grid x 1 worker(s)");
        assert!(out.output.contains(&grid), "np {np}: {}", out.output);
        assert!(out.output.contains("PASSED"), "np {np}: {}", out.output);
    }
    let out = mpirun(
        2,
        "tessera_cholesky_matches_faer_under_mpirun",
        &[(CHOLESKY_ENV, "indefinite")],
        LIMIT,
    );
    assert!(!out.success, "{}", out.output);
    assert!(
        out.output
            .contains("diagonal tile (0, 0) is not positive definite"),
        "{}",
        out.output
    );
}

/// Issue 42: `overhead-mpi` under `-np 3` left a rank idle and reported as
/// if two ran; every rank now refuses, naming the count.
#[test]
fn overhead_mpi_refuses_more_than_two_ranks() {
    if is_rank() {
        let args = vec!["tessera", "overhead-mpi", "--rounds", "1"];
        std::process::exit(i32::from(tessera_bench::cli::main(args)));
    }
    let out = mpirun(3, "overhead_mpi_refuses_more_than_two_ranks", &[], LIMIT);
    assert!(!out.success, "{}", out.output);
    assert!(
        out.output
            .contains("one link between exactly two ranks; this run has 3"),
        "{}",
        out.output
    );
    assert!(!out.output.contains("panicked"), "{}", out.output);
}

/// Ranks of one node started without binding (`--bind-to none`, here
/// through Open MPI's environment) all see the same CPUs: each takes a
/// share of whole cores of its own (`share_cpus`), so their workers no
/// longer pile onto the first core (2 ranks ran Task Bench 2× slower).
/// Checked on the workers themselves: a task reads the CPUs its worker is
/// bound to, and the ranks' sets are disjoint (where the node has a core
/// per rank).
#[test]
fn unbound_ranks_of_one_node_take_cpus_of_their_own() {
    #[derive(clap::Parser)]
    struct Opts {
        #[command(flatten)]
        placement: tessera_bench::placement::PlacementArgs,
    }
    if is_rank() {
        let ranks = tessera_bench::ranks::Ranks::join().unwrap();
        let given = tessera_backends::cpu::current_thread_cpus().unwrap();
        let opts = <Opts as clap::Parser>::parse_from(["test", "--workers", "1"]);
        let config = tessera_bench::placement::runtime_config_ranks(
            &opts.placement,
            "ws",
            tessera_engine::Scheduler::Ws,
            &ranks,
        )
        .unwrap();
        let rt = Runtime::new(config).unwrap();
        let seen = rt.register(Vec::<u64>::new());
        let cl: tessera_engine::Codelet<tessera_engine::Write<Vec<u64>>> =
            tessera_engine::Codelet::new("where").cpu(|_, _, out: &mut Vec<u64>| {
                let cpus =
                    tessera_backends::cpu::current_thread_cpus().map_err(|e| e.to_string())?;
                *out = cpus.into_iter().map(|c| c as u64).collect();
                Ok(())
            });
        rt.task(&cl, seen.w()).submit().unwrap();
        rt.wait_all().unwrap();
        let mine = rt.unregister(seen).unwrap();
        let coll = ranks.collectives().unwrap();
        let text = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let all = coll.allgather(text(&mine).as_bytes()).unwrap();
        let sets: Vec<std::collections::BTreeSet<&[u8]>> = all
            .iter()
            .map(|s| s.split(|&b| b == b',').collect())
            .collect();
        assert!(!mine.is_empty() && mine.iter().all(|c| given.contains(&(*c as usize))));
        if given.len() >= ranks.size {
            assert!(
                sets[0].is_disjoint(&sets[1]),
                "ranks 0 and 1 share CPUs: {:?}",
                all.iter()
                    .map(|s| String::from_utf8_lossy(s))
                    .collect::<Vec<_>>()
            );
        } else {
            println!(
                "note: {} CPU(s) for {} ranks: shared",
                given.len(),
                ranks.size
            );
        }
        println!("rank {}: workers on CPUs {}", ranks.rank, text(&mine));
        drop(rt);
        return;
    }
    let out = mpirun(
        2,
        "unbound_ranks_of_one_node_take_cpus_of_their_own",
        &[("OMPI_MCA_hwloc_base_binding_policy", "none")],
        LIMIT,
    );
    out.assert_every_rank_said(2, "workers on CPUs", "--bind-to none");
    assert!(
        out.output
            .contains("(the launcher did not bind them): each takes its share"),
        "{}",
        out.output
    );
}
