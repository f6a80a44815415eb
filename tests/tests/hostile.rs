//! Proves the engine and the drivers' library calls stay bounded and exact
//! under hostile or careless use (issue 17): a dmda run on a device whose
//! memory holds exactly one task's working set never stalls, and API misuse
//! returns an error instead of panicking.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_backends::sim::{SimConfig, SimDevice};
use tessera_engine::device::{Device, Link};
use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::{
    generate_matrix, generate_rhs, scaled_residual, solve_from_factors, HPL_THRESHOLD,
};
use tessera_linalg::lu::{lu_factor, Front};
use tessera_tests::with_timeout;

/// A sim device with its own memory (the GPU data path) of `mem` bytes.
fn own_mem_sim(mem: u64) -> Arc<dyn Device> {
    Arc::new(SimDevice::new(
        0,
        SimConfig {
            latency: Duration::from_micros(2),
            half_speed_flops: 0.0,
            link: Link {
                latency: Duration::from_micros(2),
                bandwidth: 20e9,
            },
            memory: Some(mem),
            own_memory: true,
            ..SimConfig::default()
        },
    ))
}

/// `tessera lu --sched dmda --sim 1:own-mem=1,mem=96KiB` stalled 30 s in
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
            let lu = lu_factor(&rt, generate_matrix(n, nb, run), Front::Symbolic)
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
