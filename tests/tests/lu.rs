//! Proves the task-graph LU is right to the last pivot: HPL residual PASSED at
//! tile-edge sizes, pivots equal to the sequential reference (itself checked
//! against faer's LU), STF and symbolic front-ends bit-identical, at 1..4
//! workers under both policies, and singular matrices reported by column.

use std::time::Duration;

use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::{generate_matrix, generate_rhs, hpl_residual, HPL_THRESHOLD};
use tessera_linalg::lu::seq::lu_tiled_seq;
use tessera_linalg::lu::{
    lu_factor, solve_from_factors, symbolic_task_count, Front, LuFactors, LuOptions, Split, Update,
};
use tessera_linalg::tiled::TileMatrix;
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(120);

/// `lu` has the sequential reference's pivots and, bit for bit, its factors
/// (HPL's matrix `n`, `nb`, `seed`).
fn assert_equals_reference(what: &str, lu: &LuFactors, n: usize, nb: usize, seed: u64) {
    let mut reference = generate_matrix(n, nb, seed);
    let ref_ipiv = lu_tiled_seq(&mut reference).unwrap();
    assert_eq!(lu.ipiv, ref_ipiv, "{what}: pivots differ");
    assert!(
        lu.factors.to_col_major() == reference.to_col_major(),
        "{what}: factors differ from the sequential reference"
    );
}

/// Solving with `lu` passes HPL's residual check.
fn assert_residual_passes(what: &str, lu: &LuFactors, n: usize, nb: usize, seed: u64) {
    let b = generate_rhs(n, seed);
    let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
    let r = hpl_residual(n, nb, seed, &x, &b);
    assert!(r < HPL_THRESHOLD, "{what}: residual {r} FAILED");
}

fn sizes(nb: usize) -> Vec<usize> {
    let mut v = vec![
        1,
        2,
        3,
        nb.saturating_sub(1),
        nb,
        nb + 1,
        2 * nb + 3,
        3 * nb,
    ];
    v.retain(|&n| n > 0);
    v.dedup();
    v
}

#[test]
fn residual_passes_and_pivots_match_reference() {
    with_timeout(LIMIT, || {
        let mut case = 0;
        for nb in [2, 3, 8, 64] {
            for n in sizes(nb) {
                let workers = 1 + case % 4;
                let sched = if case % 2 == 0 { "prio" } else { "ws" };
                let front = if case % 3 == 0 {
                    Front::Stf
                } else {
                    Front::Symbolic
                };
                case += 1;
                let seed = 42 + n as u64;
                let rt =
                    Runtime::new(Config::with_workers(workers).scheduler(sched.parse().unwrap()))
                        .unwrap();
                let lu =
                    lu_factor(&rt, generate_matrix(n, nb, seed), &LuOptions::new(front)).unwrap();
                let what = format!("n={n} nb={nb} {front:?} {workers}w {sched}");
                assert_equals_reference(&what, &lu, n, nb, seed);
                assert_residual_passes(&what, &lu, n, nb, seed);
            }
        }
    });
}

#[test]
fn stf_and_symbolic_are_bit_identical_at_every_worker_count() {
    with_timeout(LIMIT, || {
        let (n, nb, seed) = (203, 16, 7);
        let mut results = Vec::new();
        for workers in 1..=4 {
            for sched in ["ws", "prio"] {
                for front in [Front::Stf, Front::Symbolic] {
                    let rt = Runtime::new(
                        Config::with_workers(workers).scheduler(sched.parse().unwrap()),
                    )
                    .unwrap();
                    let lu = lu_factor(&rt, generate_matrix(n, nb, seed), &LuOptions::new(front))
                        .unwrap();
                    results.push((
                        format!("{workers}w {sched} {front:?}"),
                        lu.factors.to_col_major(),
                        lu.ipiv,
                    ));
                }
            }
        }
        let (name0, f0, p0) = &results[0];
        for (name, f, p) in &results[1..] {
            assert_eq!(p, p0, "{name} pivots differ from {name0}");
            assert!(f == f0, "{name} factors differ from {name0}");
        }
    });
}

#[test]
fn symbolic_dag_is_consistent() {
    for (n, nb) in [(1usize, 1usize), (5, 2), (64, 8), (100, 7)] {
        let t = n.div_ceil(nb);
        // panels + right swaps/trsms + gemms (no left swaps: HPL's layout)
        let expected =
            t + 2 * (t * (t - 1) / 2) + (0..t).map(|k| (t - k - 1).pow(2)).sum::<usize>();
        assert_eq!(
            symbolic_task_count(n, nb).unwrap(),
            expected,
            "n={n} nb={nb}"
        );
    }
}

fn singular_matrix(n: usize, nb: usize, zero_col: usize) -> TileMatrix {
    let mut a = generate_matrix(n, nb, 3).to_col_major();
    for i in 0..n {
        a[(i, zero_col)] = 0.0;
    }
    TileMatrix::from_mat(a.as_ref(), nb)
}

#[test]
fn singular_matrix_names_the_column() {
    with_timeout(LIMIT, || {
        for front in [Front::Stf, Front::Symbolic] {
            for zero_col in [0, 5, 17] {
                let rt = Runtime::new(
                    Config::with_workers(2).scheduler(tessera_engine::Scheduler::Prio),
                )
                .unwrap();
                let err = match lu_factor(
                    &rt,
                    singular_matrix(24, 8, zero_col),
                    &LuOptions::new(front),
                ) {
                    Ok(_) => panic!("{front:?}: singular matrix factored"),
                    Err(e) => e.to_string(),
                };
                assert!(
                    err.contains(&format!("exact zero pivot in column {zero_col}")),
                    "{front:?}: {err}"
                );
                assert!(
                    err.contains("panel("),
                    "{front:?}: the failing task is named: {err}"
                );
                // the runtime is still usable afterwards
                let lu = lu_factor(&rt, generate_matrix(16, 8, 1), &LuOptions::new(front)).unwrap();
                assert_eq!(lu.ipiv.len(), 16);
            }
        }
    });
}

#[test]
fn near_singular_matrix_is_finite() {
    with_timeout(LIMIT, || {
        let n = 20;
        let mut a = generate_matrix(n, 4, 9).to_col_major();
        for i in 0..n {
            a[(i, 7)] = a[(i, 6)] * (1.0 + 1e-13);
        }
        let rt = Runtime::with_workers(2).unwrap();
        let lu = lu_factor(
            &rt,
            TileMatrix::from_mat(a.as_ref(), 4),
            &LuOptions::new(Front::Symbolic),
        )
        .unwrap();
        let f = lu.factors.to_col_major();
        assert!((0..n).all(|j| (0..n).all(|i| f[(i, j)].is_finite())));
    });
}

/// A emulated device for LU: fast enough that `dmda` gives it work, with its own
/// memory (the GPU data path: device bodies on raw buffers) or not (the CPU
/// body on host-addressable replicas).
fn lu_sim(i: usize, own_memory: bool) -> std::sync::Arc<dyn tessera_engine::device::Device> {
    use tessera_backends::emu::{EmuConfig, EmuDevice};
    std::sync::Arc::new(EmuDevice::new(
        i,
        EmuConfig {
            speed: 4.0,
            latency: Duration::from_micros(1),
            half_speed_flops: 0.0,
            link: tessera_engine::device::Link {
                latency: Duration::from_micros(1),
                bandwidth: 100e9,
            },
            own_memory,
            ..EmuConfig::default()
        },
    ))
}

#[test]
fn lu_on_devices_is_bit_identical_to_the_sequential_reference() {
    with_timeout(Duration::from_secs(300), || {
        let (nb, seed) = (16, 5);
        let mut case = 0;
        for own_memory in [true, false] {
            for sched in ["dmda", "ws", "prio"] {
                for devices in 1..=2 {
                    let n = [nb * 5 + 3, nb * 4, 37][case % 3];
                    let front = if case % 2 == 0 {
                        Front::Stf
                    } else {
                        Front::Symbolic
                    };
                    case += 1;
                    let mut config = Config::with_workers(1).scheduler(sched.parse().unwrap());
                    config.devices = (0..devices).map(|i| lu_sim(i, own_memory)).collect();
                    let rt = Runtime::new(config).unwrap();
                    let what = format!(
                        "n={n} own_memory={own_memory} {sched} {devices} device(s) {front:?}"
                    );
                    let lu = lu_factor(&rt, generate_matrix(n, nb, seed), &LuOptions::new(front))
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_equals_reference(&what, &lu, n, nb, seed);
                    // Every device body ran where it was sent: a failing
                    // one would fall back to the CPU and still be right.
                    assert_eq!(rt.device_fallbacks(), (0, None), "{what}");
                    let moved: u64 = rt.memory_stats().nodes[1..]
                        .iter()
                        .map(|s| s.bytes_in)
                        .sum();
                    // dmda sends work to a 4x faster device; ws and prio
                    // may leave it idle on a DAG this small.
                    assert!(
                        sched != "dmda" || moved > 0,
                        "{what}: no data reached a device"
                    );
                    if sched == "dmda" && devices == 2 {
                        // Column-block-cyclic owners: both devices hold columns.
                        let stats = rt.memory_stats();
                        assert!(
                            stats.nodes[1].bytes_in > 0 && stats.nodes[2].bytes_in > 0,
                            "{what}: a device got no columns: {stats}"
                        );
                    }
                }
            }
        }
    });
}

/// The device-sized updates (merged per device, streamed in row blocks) and
/// the panel as a team task give the sequential reference's pivots and
/// factors bit for bit: the merged and block kernels call the tile kernels
/// tile by tile, and the team panel equals the one-core panel.
#[test]
fn device_sized_updates_and_team_panels_are_bit_identical() {
    use tessera_engine::team::TeamSize;
    with_timeout(Duration::from_secs(300), || {
        let nb = 8;
        let mut case = 0;
        for update in [
            Update::Tiles,
            Update::Merged,
            Update::Streamed { rows: 1 },
            Update::Streamed { rows: 2 },
        ] {
            for devices in 0..=2 {
                for team in [None, Some(2), Some(4)] {
                    let workers = 1 + case % 4;
                    let own_memory = case % 2 == 0;
                    let sched = ["dmda", "ws", "prio"][case % 3];
                    let n = [nb * 5 + 3, nb * 4, 29, 1][case % 4];
                    let front = if case % 2 == 0 {
                        Front::Stf
                    } else {
                        Front::Symbolic
                    };
                    case += 1;
                    let seed = 7 + case as u64;
                    let mut config =
                        Config::with_workers(workers).scheduler(sched.parse().unwrap());
                    config.devices = (0..devices).map(|i| lu_sim(i, own_memory)).collect();
                    let rt = Runtime::new(config).unwrap();
                    let mut opts = LuOptions::new(front);
                    opts.update = update;
                    opts.panel_team = team.map(TeamSize::up_to);
                    let what = format!(
                        "n={n} {update:?} team={team:?} {devices} device(s) \
                         own_memory={own_memory} {workers}w {sched} {front:?}"
                    );
                    let lu = lu_factor(&rt, generate_matrix(n, nb, seed), &opts)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_equals_reference(&what, &lu, n, nb, seed);
                    assert_eq!(rt.device_fallbacks(), (0, None), "{what}");
                    assert_residual_passes(&what, &lu, n, nb, seed);
                }
            }
        }
    });
}

/// A singular column is named by the merged and streamed shapes too.
#[test]
fn singular_matrix_in_device_sized_updates_names_the_column() {
    with_timeout(LIMIT, || {
        for update in [Update::Merged, Update::Streamed { rows: 2 }] {
            for zero_col in [0, 9, 23] {
                let mut config = Config::with_workers(2).scheduler("dmda".parse().unwrap());
                config.devices = vec![lu_sim(0, true)];
                let rt = Runtime::new(config).unwrap();
                let mut opts = LuOptions::new(Front::Stf);
                opts.update = update;
                let err = match lu_factor(&rt, singular_matrix(24, 8, zero_col), &opts) {
                    Err(e) => e.to_string(),
                    Ok(_) => panic!("{update:?}: singular column {zero_col} not reported"),
                };
                assert!(
                    err.contains(&format!("exact zero pivot in column {zero_col}")),
                    "{update:?}: {err}"
                );
            }
        }
    });
}

#[test]
fn singular_matrix_on_device_memory_names_the_column() {
    with_timeout(LIMIT, || {
        for front in [Front::Stf, Front::Symbolic] {
            for zero_col in [0, 5, 17] {
                let mut config = Config::with_workers(1).scheduler(tessera_engine::Scheduler::Dmda);
                config.devices = vec![lu_sim(0, true), lu_sim(1, true)];
                let rt = Runtime::new(config).unwrap();
                let err = match lu_factor(
                    &rt,
                    singular_matrix(24, 8, zero_col),
                    &LuOptions::new(front),
                ) {
                    Ok(_) => panic!("{front:?}: singular matrix factored"),
                    Err(e) => e.to_string(),
                };
                assert!(
                    err.contains(&format!("exact zero pivot in column {zero_col}"))
                        && err.contains("panel("),
                    "{front:?}: {err}"
                );
                let lu = lu_factor(&rt, generate_matrix(16, 8, 1), &LuOptions::new(front)).unwrap();
                assert_eq!(lu.ipiv.len(), 16);
            }
        }
    });
}

#[test]
fn adaptive_split_learns_and_factors_correctly() {
    with_timeout(Duration::from_secs(120), || {
        // A device 4x a CPU worker's model speed, beside one CPU worker.
        let (n, nb, seed) = (16 * 24, 16, 7);
        let mut config = Config::with_workers(1).scheduler(tessera_engine::Scheduler::Dmda);
        config.devices = vec![lu_sim(0, false)];
        let rt = Runtime::new(config).unwrap();
        let opts = LuOptions {
            split: Split::Adaptive,
            ..LuOptions::new(Front::Symbolic)
        };
        let lu = lu_factor(&rt, generate_matrix(n, nb, seed), &opts).unwrap();
        let shares = &lu.device_shares;
        let mut reference = generate_matrix(n, nb, seed);
        let ref_ipiv = lu_tiled_seq(&mut reference).unwrap();
        assert_eq!(lu.ipiv, ref_ipiv);
        assert!(lu.factors.to_col_major() == reference.to_col_major());
        assert_eq!(rt.device_fallbacks(), (0, None));
        // One decision per step with an update (all but the last), each a
        // share in [0, 1], and the splitter
        // moved off its first (peak-ratio) guess once rates were measured.
        assert_eq!(shares.len(), n / nb - 1);
        assert!(shares.iter().all(|&(_, s)| (0.0..=1.0).contains(&s)));
        let first = shares[0].1;
        assert!(
            shares.iter().any(|&(_, s)| (s - first).abs() > 1e-6),
            "the split never left the peak ratio: {shares:?}"
        );
        assert!(
            rt.memory_stats().nodes[1].bytes_in > 0,
            "no column reached the device"
        );
    });
}

/// `Update::auto` in a real run, where it times one core's tile GEMM to
/// weigh the host: beside one emulated device of 10^6 GFLOP/s (the host
/// under 3 % of the node) it picks merged updates even where a tile's GEMM
/// is large for the device (a real H200 node lost to tile tasks there);
/// beside one of 5 GFLOP/s (the host the most of the node) it keeps tiles,
/// whatever the tile size; without devices, tiles.
#[test]
fn auto_update_weighs_the_host_against_the_devices() {
    use tessera_backends::emu::{EmuConfig, EmuDevice};
    use tessera_linalg::lu::Update;
    let with = |gflops: f64, half: f64| {
        let dev = EmuDevice::new(
            0,
            EmuConfig {
                reference_gflops: gflops,
                speed: 1.0,
                half_speed_flops: half,
                ..EmuConfig::default()
            },
        );
        Runtime::new(Config::with_workers(1).device(std::sync::Arc::new(dev))).unwrap()
    };
    // Large tiles for the device (half-rate size 1 flop), and small ones
    // (a half-rate size past any tile).
    for half in [1.0, 1e15] {
        let fast = with(1e6, half);
        assert_eq!(
            Update::auto(&fast, 4096, 512),
            Update::Merged,
            "half {half}"
        );
        let slow = with(5.0, half);
        assert_eq!(Update::auto(&slow, 4096, 512), Update::Tiles, "half {half}");
    }
    let cpu = Runtime::new(Config::with_workers(1)).unwrap();
    assert_eq!(Update::auto(&cpu, 4096, 512), Update::Tiles);
}

/// `Update::auto` merges while each device's share of the matrix (and two
/// panel columns) fits in its memory, up to the whole of it: Hetero-HPL's
/// own N = 88320 fills 95.0 % of each 16 GiB device at nb 512, and merged
/// updates run it at 64.1 % of peak (simulated) against 9.9 % streamed.
/// Past the memory, streamed.
#[test]
fn auto_update_merges_while_the_share_fits_the_memory() {
    use tessera_backends::emu::{EmuConfig, EmuDevice};
    use tessera_linalg::lu::Update;
    let (n, nb) = (88320usize, 512usize);
    let share = (n * n * 8 / 4 + 2 * n * nb * 8) as f64;
    let node = |memory: f64| {
        let mut cfg = Config::with_workers(1);
        for id in 0..4 {
            cfg = cfg.device(std::sync::Arc::new(EmuDevice::new(
                id,
                EmuConfig {
                    reference_gflops: 1e6,
                    speed: 1.0,
                    half_speed_flops: 1e15,
                    memory: Some(memory as u64),
                    ..EmuConfig::default()
                },
            )));
        }
        Runtime::new(cfg).unwrap()
    };
    let gib16 = 16.0 * (1u64 << 30) as f64;
    assert!((0.94..0.96).contains(&(share / gib16)), "{}", share / gib16);
    assert_eq!(Update::auto(&node(gib16), n, nb), Update::Merged);
    assert!(matches!(
        Update::auto(&node(0.99 * share), n, nb),
        Update::Streamed { .. }
    ));
}
