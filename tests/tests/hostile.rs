//! Proves the engine and the drivers' library calls stay bounded and exact
//! under hostile or careless use (issue 17): a dmda run on a device whose
//! memory holds exactly one task's working set never stalls, and API misuse
//! returns an error instead of panicking.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_backends::emu::{EmuConfig, EmuDevice};
use tessera_engine::device::{Device, Link};
use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::{generate_matrix, generate_rhs, scaled_residual, HPL_THRESHOLD};
use tessera_linalg::lu::{lu_factor, solve_from_factors, Front, LuOptions};
use tessera_tests::with_timeout;

/// A emulated device with its own memory (the GPU data path) of `mem` bytes.
fn own_mem_sim(mem: u64) -> Arc<dyn Device> {
    Arc::new(EmuDevice::new(
        0,
        EmuConfig {
            latency: Duration::from_micros(2),
            half_speed_flops: 0.0,
            link: Link {
                latency: Duration::from_micros(2),
                bandwidth: 20e9,
            },
            memory: Some(mem),
            own_memory: true,
            ..EmuConfig::default()
        },
    ))
}

/// `tessera lu --sched dmda --emu 1:own-mem=1,mem=96KiB` stalled 30 s in
/// `Memory::reserve` in up to 6 of 20 runs, then failed: a GEMM's working
/// set (3 tiles) is exactly the device's memory, and while the task reserved
/// room for its third tile, dmda's prefetch allocated that very tile, so the
/// reservation waited for room its own replica held (coherence README,
/// "Progress under memory pressure"). 200 runs, each must pass in well
/// under a second (a stall costs `RESERVE_PATIENCE`, 30 s).
#[test]
fn stampede_dmda_own_memory_at_exactly_one_working_set() {
    with_timeout(Duration::from_secs(150), || {
        let (n, nb) = (64, 16);
        let tile = (nb * nb * 8) as u64;
        let mut slowest = Duration::ZERO;
        for run in 0..200u64 {
            let mut config = Config::with_workers(1).scheduler("dmda".parse().unwrap());
            config.devices = vec![own_mem_sim(3 * tile)];
            let rt = Runtime::new(config).unwrap();
            let t0 = Instant::now();
            let lu = lu_factor(
                &rt,
                generate_matrix(n, nb, run),
                &LuOptions::new(Front::Symbolic),
            )
            .unwrap_or_else(|e| panic!("run {run}: {e}"));
            slowest = slowest.max(t0.elapsed());
            let b = generate_rhs(n, run);
            let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
            let r = scaled_residual(&generate_matrix(n, nb, run), &x, &b);
            assert!(r < HPL_THRESHOLD, "run {run}: residual {r}");
        }
        assert!(
            slowest < Duration::from_secs(10),
            "a run took {slowest:?}: a reservation waited for room"
        );
    });
}

/// `TaskGraph::edge` with a vertex of another graph panicked inside
/// petgraph (issue 17); with an index that exists in both graphs it would
/// have joined the wrong tasks. Now `check` and `submit` refuse it by name.
#[test]
fn edge_with_a_vertex_of_another_graph_is_an_error() {
    with_timeout(Duration::from_secs(60), || {
        use tessera_engine::{Codelet, TaskBuilder, TaskGraph};
        let rt = Runtime::with_workers(1).unwrap();
        let cl = Codelet::new("noop").empty();
        let task = || TaskBuilder::new(&cl);
        let mut g1 = TaskGraph::new();
        let mut g2 = TaskGraph::new();
        let a = g1.add(task());
        let b = g1.add(task());
        let (c, _d, _e) = (g2.add(task()), g2.add(task()), g2.add(task()));
        g1.edge(a, b);
        g1.edge(b, c); // c's index (0) exists in g1 too
        let e = g1.check().unwrap_err().to_string();
        assert!(e.contains("belongs to another TaskGraph"), "{e}");
        let mut far = TaskGraph::new();
        let f = far.add(task());
        far.edge(f, _e); // index 2: beyond `far`, once a petgraph panic
        assert!(far.submit(&rt).is_err());
        g2.edge(c, _d);
        assert_eq!(g2.submit(&rt).unwrap().len(), 3);
        rt.wait_all().unwrap();
    });
}

/// Ctrl-C in the drivers calls `Runtime::interrupt`: running bodies finish,
/// the tasks not started are cancelled as "interrupted", waits return at
/// once with that error, and later submissions are refused.
#[test]
fn interrupt_cancels_what_has_not_started() {
    with_timeout(Duration::from_secs(60), || {
        use tessera_engine::Codelet;
        let rt = Runtime::with_workers(2).unwrap();
        let h = rt.register(0u64);
        let cl = Codelet::new("step");
        for _ in 0..400 {
            rt.task(&cl, h.rw())
                .cpu(|v| {
                    *v += 1;
                    std::thread::sleep(Duration::from_millis(5));
                    Ok(())
                })
                .submit()
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        rt.interrupt();
        let e = rt.wait_all().unwrap_err().to_string();
        assert!(e.contains("interrupted"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(rt.is_interrupted());
        let e = rt.task(&cl, h.rw()).cpu(|_| Ok(())).submit().unwrap_err();
        assert!(e.to_string().contains("interrupted"), "{e}");
        drop(rt);
    });
}
