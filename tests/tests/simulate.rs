//! Proves simulated time across crates: the simulated LU runs exactly the
//! real LU's tasks (both front-ends); several ranks simulated in one process
//! over the simulated network give the sequential result of random
//! distributed DAGs (bodies executed for checking) and a hand-computed
//! makespan with a network hop; dmda sends most GEMMs to a 10x device; the
//! shipped platform files parse.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tessera_engine::dist::symbolic;
use tessera_engine::perfmodel::PerfModels;
use tessera_engine::simulate::{Platform, Simulation};
use tessera_engine::trace::Trace;
use tessera_engine::{Config, Runtime, Scheduler};
use tessera_linalg::hpl::generate_matrix;
use tessera_linalg::lu::{lu_factor, lu_simulate, Front, LuOptions};
use tessera_tests::dist_dag::RankDag;
use tessera_tests::random_dag::Shape;
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(120);

fn platforms() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/platforms")
}

/// Tasks of a trace as (label → count).
fn task_set(t: &Trace) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in &t.tasks {
        *m.entry(r.label.clone().unwrap_or_else(|| r.codelet.clone()))
            .or_insert(0) += 1;
    }
    m
}

fn cpu_platform(cores: usize) -> Platform {
    Platform::parse(
        &format!("[node]\ncores = {cores}\n[node.cpu]\ngflops = 10\ngbs = 5\n"),
        false,
        "test",
    )
    .unwrap()
}

#[test]
fn simulated_lu_runs_the_real_lu_tasks() {
    with_timeout(LIMIT, || {
        for (n, nb) in [(200, 32), (97, 16), (64, 64)] {
            for front in [Front::Stf, Front::Symbolic] {
                let rt = Runtime::new(Config::with_workers(2).trace(true)).unwrap();
                lu_factor(&rt, generate_matrix(n, nb, 3), &LuOptions::new(front)).unwrap();
                let real = task_set(&rt.trace());
                let sim = Simulation::with_models(cpu_platform(2), Arc::default(), false, false);
                let srt = Runtime::new(Config::simulated(sim.node(0)).trace(true)).unwrap();
                lu_simulate(&srt, n, nb, &LuOptions::new(front)).unwrap();
                let simulated = task_set(&srt.trace());
                assert_eq!(simulated, real, "n={n} nb={nb} {front:?}");
                assert!(sim.now() > 0.0);
            }
        }
    });
}

/// The end of a simulated distributed run: every rank tells the others it is
/// done (messages too, then played) and waits for their word.
fn end_ranks<C: symbolic::DistClasses>(
    sim: &Simulation,
    rts: &[Runtime],
    nets: &[Arc<tessera_engine::dist::Net>],
    started: Vec<symbolic::Started<C>>,
) where
    C::Key: serde::Serialize + serde::de::DeserializeOwned,
{
    let finishing: Vec<_> = started
        .into_iter()
        .enumerate()
        .map(|(r, s)| s.finish(&rts[r], &nets[r]).unwrap())
        .collect();
    sim.run().unwrap();
    for (r, f) in finishing.into_iter().enumerate() {
        f.wait(&nets[r]).unwrap();
    }
}

/// `ranks` ranks of one core each, every task `task_s` seconds, receives
/// `recv_s`, a network of `latency_s` and 1 PB/s.
fn cluster(ranks: usize, task_s: f64, recv_s: f64, latency_s: f64) -> Platform {
    Platform::parse(
        &format!(
            "nodes = {ranks}\n[node]\ncores = 1\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\ncodelets = {{ mix = {{ seconds = {task_s} }}, recv = {{ seconds = {recv_s} }} }}\n[network]\nlatency_us = {}\ngbs = 1e6\n",
            latency_s * 1e6
        ),
        false,
        "cluster",
    )
    .unwrap()
}

/// Run `shape` on a simulated cluster, all ranks in this process; returns
/// every task's output, the simulation, and the virtual time when the last
/// task ended (before the ranks' end-of-run handshake).
fn run_ranks(shape: &Arc<Shape>, p: Platform) -> (Vec<Option<Vec<u64>>>, Arc<Simulation>, f64) {
    let ranks = p.ranks();
    let sim = Simulation::with_models(p, Arc::new(PerfModels::default()), false, true);
    let nets: Vec<_> = (0..ranks).map(|r| sim.net(r)).collect();
    let rts: Vec<Runtime> = (0..ranks)
        .map(|r| Runtime::new(Config::simulated(sim.node(r)).scheduler(Scheduler::Prio)).unwrap())
        .collect();
    let dags: Vec<Arc<RankDag>> = (0..ranks)
        .map(|r| Arc::new(RankDag::new(&rts[r], Arc::clone(shape), r, None)))
        .collect();
    let started: Vec<_> = (0..ranks)
        .map(|r| symbolic::start(&rts[r], &nets[r], Arc::clone(&dags[r])))
        .collect();
    sim.run().unwrap();
    let end = sim.now();
    end_ranks(&sim, &rts, &nets, started);
    let mut got = vec![None; shape.preds.len()];
    for r in 0..ranks {
        for (t, v) in dags[r].outputs(&rts[r]) {
            got[t] = Some(v);
        }
    }
    (got, sim, end)
}

#[test]
fn simulated_ranks_give_the_sequential_result() {
    with_timeout(LIMIT, || {
        for seed in 0..12u64 {
            let ranks = [1, 2, 3, 4, 16][seed as usize % 5];
            let n = 30 + (seed as usize * 41) % 200;
            let shape = Arc::new(Shape::random(seed, n, ranks));
            let expected = shape.expected();
            let (got, sim, _) = run_ranks(&shape, cluster(ranks, 1e-3, 1e-4, 1e-5));
            for t in 0..n {
                assert_eq!(got[t].as_ref(), Some(&expected[t]), "seed {seed}: task {t}");
            }
            let remote = (0..n)
                .filter(|&t| {
                    shape.succs[t]
                        .iter()
                        .any(|&s| shape.owner[s] != shape.owner[t])
                })
                .count();
            assert_eq!(remote > 0, sim.stats().messages > 0, "seed {seed}");
            assert!(sim.now() >= 1e-3, "seed {seed}");
        }
    });
}

#[test]
fn a_network_hop_costs_its_latency() {
    with_timeout(LIMIT, || {
        // Task 0 on rank 0 (1 s), its output sent to rank 1 (1 s of
        // latency), received there (0.5 s), then task 1 (1 s): 3.5 s.
        let shape = Arc::new(Shape {
            preds: vec![vec![], vec![0]],
            succs: vec![vec![1], vec![]],
            owner: vec![0, 1],
            salt: vec![1, 2],
        });
        let (got, sim, end) = run_ranks(&shape, cluster(2, 1.0, 0.5, 1.0));
        assert_eq!(got[1].as_ref(), Some(&shape.expected()[1]));
        // 136 bytes of message at 1 PB/s are below a nanosecond.
        assert!((end - 3.5).abs() < 1e-6, "{end}");
        // The data message, then one DONE each way.
        assert_eq!(sim.stats().messages, 3);
    });
}

#[test]
fn ranks_on_one_node_share_its_memory_bandwidth() {
    with_timeout(LIMIT, || {
        // Two independent 1 s tasks, one per rank. With both ranks on one
        // node of 2 cores whose slowdown is [1, 2], the two run together and
        // each takes at(2)/at(2) = 1 s; on two nodes each runs alone and
        // takes at(1)/at(2) = 0.5 s. (Counting busy cores per rank instead
        // of per node predicted 0.5 s for both, a 2-rank LU 20 % too fast.)
        let shape = Arc::new(Shape {
            preds: vec![vec![], vec![]],
            succs: vec![vec![], vec![]],
            owner: vec![0, 1],
            salt: vec![1, 2],
        });
        for (nodes, rpn, cores, want) in [(1, 2, 2, 1.0), (2, 1, 1, 0.5)] {
            let p = Platform::parse(
                &format!(
                    "nodes = {nodes}\nranks_per_node = {rpn}\n[node]\ncores = {cores}\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\nslowdown = [1.0, 2.0]\ncodelets = {{ mix = {{ seconds = 1 }}, recv = {{ seconds = 1e-9 }} }}\n[network]\nlatency_us = 1\ngbs = 1e6\n"
                ),
                false,
                "shared-node",
            )
            .unwrap();
            let (got, _, end) = run_ranks(&shape, p);
            assert_eq!(
                got,
                shape.expected().into_iter().map(Some).collect::<Vec<_>>()
            );
            assert!((end - want).abs() < 1e-6, "{nodes} node(s): {end}");
        }
    });
}

#[test]
fn dmda_sends_most_gemms_to_the_fast_device() {
    with_timeout(LIMIT, || {
        let path = platforms().join("dmda-10x.toml");
        let mut times = BTreeMap::new();
        for sched in [Scheduler::Dmda, Scheduler::Ws, Scheduler::Prio] {
            let sim = Simulation::new(Platform::load(&path).unwrap()).unwrap();
            let rt =
                Runtime::new(Config::simulated(sim.node(0)).scheduler(sched).trace(true)).unwrap();
            lu_simulate(&rt, 8192, 512, &LuOptions::new(Front::Symbolic)).unwrap();
            let t = rt.trace();
            let fast = t.workers.iter().position(|w| w.name == "fast").unwrap() as u32;
            let gemms: Vec<_> = t.tasks.iter().filter(|r| r.codelet == "gemm").collect();
            let on_fast = gemms.iter().filter(|r| r.worker == fast).count();
            times.insert(
                sched.name(),
                (sim.now(), on_fast as f64 / gemms.len() as f64),
            );
        }
        let (dmda, share) = times["dmda"];
        assert!(
            share > 0.5,
            "dmda gave {:.0} % of the GEMMs to the fast device",
            share * 100.0
        );
        assert!(dmda < times["ws"].0 && dmda < times["prio"].0, "{times:?}");
    });
}

#[test]
fn shipped_platform_files_parse() {
    let mut n = 0;
    for e in std::fs::read_dir(platforms()).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            let p = Platform::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(p.peak_gflops() > 0.0, "{}", path.display());
            if let Some(dir) = &p.perf_models {
                PerfModels::load(dir).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            n += 1;
        }
    }
    assert!(n >= 6, "{n} platform files");
}

/// The factors come home in simulated time, as in a real run: with merged
/// updates and `home_early` off, a device holds the only copy of its columns
/// after the last task, and `unregister` sends them over its link. One device of 1 GB/s and 1 ms
/// latency, 1000× the cores, a 1024 × 1024 LU in tiles of 256: dmda runs
/// every task on the device, so each of the 16 tiles (512 KiB) and the 4
/// pivot vectors (2 KiB) cross once, one after the other on the device→host
/// lane, after the last task; a CPU-only platform has nothing to send.
/// With `home_early` (the default) each tile goes home as soon as it is
/// final (`DataHandle::wont_write`): less is left after the last task, and
/// the whole run, its way home included, ends sooner.
#[test]
fn the_factors_come_home_in_simulated_time() {
    use tessera_linalg::lu::{lu_simulate, LuOptions, Update};
    with_timeout(LIMIT, || {
        let toml = "[node]\ncores = 2\nreserve_core_per_accelerator = false\n\
            [node.cpu]\ngflops = 1\ngbs = 5\n\
            [[node.accelerators]]\nname = \"dev\"\narch = \"dev\"\ncount = 1\ngflops = 1000\ngbs = 100\nmemory_gib = 1\n\
            link = { latency_us = 1000, gbs = 1 }\n";
        let (n, nb) = (1024usize, 256usize);
        let tile_s = 1e-3 + (nb * nb * 8) as f64 / 1e9;
        let piv_s = 1e-3 + (nb * 8) as f64 / 1e9;
        let run = |home_early| {
            let mut opts = LuOptions::new(Front::Symbolic);
            opts.update = Update::Merged;
            opts.home_early = home_early;
            let sim = Simulation::with_models(
                Platform::parse(toml, false, "one device").unwrap(),
                Arc::default(),
                false,
                false,
            );
            let rt =
                Runtime::new(Config::simulated(sim.node(0)).scheduler(Scheduler::Dmda)).unwrap();
            lu_simulate(&rt, n, nb, &opts).unwrap();
            (sim.settled() - sim.now(), sim.settled())
        };
        let (home, end_late) = run(false);
        let want = 16.0 * tile_s + 4.0 * piv_s;
        assert!(
            (home - want).abs() < 0.01 * want,
            "the factors' copies home took {home} s of simulated time, want {want} s"
        );
        let (home_early, end_early) = run(true);
        // Some tiles went home before the last task ended; at least the
        // last panel's tile and the pivots are left.
        assert!(
            home_early <= want - tile_s && home_early >= tile_s + 4.0 * piv_s,
            "early: {home_early} s home after the last task"
        );
        assert!(
            end_early < end_late,
            "early {end_early} s, late {end_late} s"
        );
        // CPU only: the factors are already home.
        let sim = Simulation::with_models(cpu_platform(2), Arc::default(), false, false);
        let rt = Runtime::new(Config::simulated(sim.node(0))).unwrap();
        // Data with a value is unregistered the usual way, and says so.
        let real = rt.register(vec![1.0f64; 4]);
        let e = rt.unregister_virtual(real).unwrap_err().to_string();
        assert!(e.contains("not virtual data"), "{e}");
        lu_simulate(&rt, n, nb, &LuOptions::new(Front::Stf)).unwrap();
        assert_eq!(sim.settled(), sim.now());
    });
}

/// The distributed simulated LU brings its factors home too, as a real run's
/// `take_factors` does: two nodes, each with one device 1000× its cores on a
/// link of 1 ms and 1 GB/s, a 1024 × 1024 LU in tiles of 256 on a 1 × 2
/// grid. dmda runs every task on the devices. Tiles sent to the other rank
/// are home already; the `U` tiles of each rank's columns are not, so each
/// rank sends at least one tile home, and the run ends when the busier link
/// has sent its copies, one after the other (both links work at once).
#[test]
fn the_distributed_factors_come_home_in_simulated_time() {
    use tessera_linalg::lu::dist::{DistLu, Grid, Layout};
    with_timeout(LIMIT, || {
        let toml = "nodes = 2\n[node]\ncores = 2\nreserve_core_per_accelerator = false\n\
            [node.cpu]\ngflops = 1\ngbs = 5\n\
            [[node.accelerators]]\nname = \"dev\"\narch = \"dev\"\ncount = 1\ngflops = 1000\ngbs = 100\nmemory_gib = 1\n\
            link = { latency_us = 1000, gbs = 1 }\n\
            codelets = { panel = { gflops = 1000 }, swap = { gbs = 100 }, trsm = { gflops = 1000 }, gemm = { gflops = 1000 } }\n\
            [network]\nlatency_us = 1\ngbs = 100\n";
        let (n, nb, t) = (1024usize, 256usize, 4usize);
        let sim = Simulation::with_models(
            Platform::parse(toml, false, "two nodes").unwrap(),
            Arc::default(),
            false,
            false,
        );
        let grid = Grid { p: 1, q: 2 };
        let nets: Vec<_> = (0..2).map(|r| sim.net(r)).collect();
        let rts: Vec<Runtime> = (0..2)
            .map(|r| {
                Runtime::new(Config::simulated(sim.node(r)).scheduler(Scheduler::Dmda)).unwrap()
            })
            .collect();
        let lus: Vec<_> = (0..2)
            .map(|r| {
                Arc::new(DistLu::new_virtual(&rts[r], n, nb, Layout::cyclic(grid, t), r).unwrap())
            })
            .collect();
        let started: Vec<_> = (0..2)
            .map(|r| symbolic::start(&rts[r], &nets[r], Arc::clone(&lus[r])))
            .collect();
        sim.run().unwrap();
        let host_in = |rt: &Runtime| {
            let h = &rt.memory_stats().nodes[0];
            (h.bytes_in, h.transfer_ns)
        };
        let before: Vec<_> = rts.iter().map(host_in).collect();
        for (lu, rt) in lus.iter().zip(&rts) {
            lu.release_virtual_factors(rt).unwrap();
        }
        let home = sim.settled() - sim.now();
        let tile = (nb * nb * 8) as u64;
        let mut want = 0.0f64;
        for (r, rt) in rts.iter().enumerate() {
            let (bytes, ns) = host_in(rt);
            let (bytes, ns) = (bytes - before[r].0, ns - before[r].1);
            assert!(bytes >= tile, "rank {r} sent {bytes} bytes home");
            want = want.max(ns as f64 * 1e-9);
        }
        assert!(
            (home - want).abs() < 0.01 * want,
            "the factors' copies home took {home} s of simulated time, want {want} s"
        );
        end_ranks(&sim, &rts, &nets, started);
    });
}
