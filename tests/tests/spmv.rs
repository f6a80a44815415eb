//! Proves the task-graph SpMV equals the plain reference loop (relative
//! tolerance 1e-12) on generated matrices at 1..4 workers, that CG converges
//! on SPD stencils, and that power iteration finds a known dominant eigenvalue.

use std::time::Duration;

use tessera_engine::{Config, Runtime};
use tessera_linalg::sparse::coo::Coo;
use tessera_linalg::sparse::gen::parse_gen_spec;
use tessera_linalg::spmv::{conjugate_gradient, power_iteration, repeated_spmv, SpmvMatrix};
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn task_spmv_matches_reference() {
    with_timeout(LIMIT, || {
        for (w, spec) in [
            (1, "stencil7:9"),
            (2, "stencil27:7"),
            (3, "powerlaw:500:6"),
            (4, "banded:300:5"),
            (2, "dense:40"),
        ] {
            let a = parse_gen_spec(spec).unwrap();
            let rt = Runtime::new(Config::with_workers(w)).unwrap();
            let mat = SpmvMatrix::new(&rt, &a, 3 * w);
            let x: Vec<f64> = (0..a.n_cols()).map(|i| (i % 11) as f64 - 5.0).collect();
            let iters = 3;
            let (y, stats) = repeated_spmv(&rt, &mat, x.clone(), iters).unwrap();
            assert_eq!(stats.iterations, iters);
            let mut r = vec![0.0; a.n_rows()];
            a.spmv_reference(&x, &mut r);
            let scale: f64 = r.iter().map(|v| v.abs()).fold(1.0, f64::max);
            for (i, (got, want)) in y.iter().zip(&r).enumerate() {
                let want = want * iters as f64;
                assert!(
                    (got - want).abs() <= 1e-12 * scale * iters as f64,
                    "{spec} row {i}: {got} vs {want}"
                );
            }
        }
    });
}

/// Asking for more blocks than rows gives a block per row, however many were asked for
/// (`usize::MAX` used to allocate that many range bounds, and `--blocks-per-worker 1e12`
/// aborted), and the same product as a few blocks.
#[test]
fn more_blocks_than_rows_give_a_block_per_row() {
    with_timeout(LIMIT, || {
        let a = parse_gen_spec("stencil7:4").unwrap();
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let x: Vec<f64> = (0..a.n_cols()).map(|i| (i % 5) as f64 - 2.0).collect();
        let (want, _) = repeated_spmv(&rt, &SpmvMatrix::new(&rt, &a, 3), x.clone(), 2).unwrap();
        for parts in [a.n_rows() + 1, 1 << 40, usize::MAX] {
            let mat = SpmvMatrix::new(&rt, &a, parts);
            assert_eq!(mat.ranges().len(), a.n_rows(), "{parts} parts");
            assert!(mat.ranges().iter().all(|r| r.len() == 1), "{parts} parts");
            let (y, _) = repeated_spmv(&rt, &mat, x.clone(), 2).unwrap();
            assert_eq!(y, want, "{parts} parts");
        }
    });
}

#[test]
fn compact_and_u32_column_blocks_give_the_same_bits() {
    // 70,000 columns: the first rows span 3 columns each (compact blocks), the last rows
    // read column 0 and the last one (a gap of 69,999: blocks that keep u32 indices).
    with_timeout(LIMIT, || {
        let n = 70_000;
        let mut coo = Coo::new(n, n).unwrap();
        for i in 0..n {
            coo.push(i, i, 4.0 + (i % 5) as f64);
            if i < n - 100 {
                coo.push(i, (i + 1) % n, -1.0);
                coo.push(i, (i + 2) % n, 0.5);
            } else {
                coo.push(i, 0, 0.25);
                coo.push(i, n - 1, -0.75);
            }
        }
        let a = coo.to_csr();
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let compact = SpmvMatrix::new_with(&rt, &a, 8, true);
        let full = SpmvMatrix::new_with(&rt, &a, 8, false);
        assert_eq!(full.compact_nnz(), 0);
        assert!(compact.compact_nnz() > 0 && compact.compact_nnz() < a.nnz());
        assert!(compact.traffic_bytes() < full.traffic_bytes());
        let (y0, _) = repeated_spmv(&rt, &full, x.clone(), 2).unwrap();
        let (y1, _) = repeated_spmv(&rt, &compact, x, 2).unwrap();
        for (i, (p, q)) in y0.iter().zip(&y1).enumerate() {
            assert_eq!(p.to_bits(), q.to_bits(), "row {i}");
        }
    });
}

#[test]
fn cg_converges_on_spd_stencils() {
    with_timeout(LIMIT, || {
        for spec in ["stencil7:12", "stencil27:8"] {
            let a = parse_gen_spec(spec).unwrap();
            let rt = Runtime::with_workers(2).unwrap();
            let mat = SpmvMatrix::new(&rt, &a, 4);
            let b = vec![1.0; a.n_rows()];
            let (x, stats) = conjugate_gradient(&rt, &mat, &b, 1e-10, 500).unwrap();
            assert!(
                *stats.history.last().unwrap() <= 1e-10,
                "{spec}: {:?}",
                stats.history.last()
            );
            let mut ax = vec![0.0; a.n_rows()];
            a.spmv_reference(&x, &mut ax);
            let res: f64 = ax
                .iter()
                .zip(&b)
                .map(|(p, q)| (p - q).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(
                res / (a.n_rows() as f64).sqrt() < 1e-9,
                "{spec}: true residual {res}"
            );
        }
    });
}

#[test]
fn power_iteration_finds_dominant_eigenvalue() {
    with_timeout(LIMIT, || {
        let mut coo = Coo::new(50, 50).unwrap();
        for i in 0..50 {
            coo.push(i, i, if i == 17 { 9.0 } else { 1.0 + i as f64 / 100.0 });
        }
        let a = coo.to_csr();
        let rt = Runtime::with_workers(2).unwrap();
        let mat = SpmvMatrix::new(&rt, &a, 4);
        let (_, stats) = power_iteration(&rt, &mat, vec![1.0; 50], 60).unwrap();
        let l = *stats.history.last().unwrap();
        assert!((l - 9.0).abs() < 1e-9, "dominant eigenvalue {l}");
    });
}

#[test]
fn balanced_power_iteration_matches_the_unbalanced_one() {
    use std::sync::Arc;
    use tessera_backends::emu::{EmuConfig, EmuDevice};
    use tessera_linalg::spmv::balanced_power_iteration;
    // own_memory: the device computes through its SpMV device body on raw
    // buffers (the GPU data path); otherwise the CPU body runs on its replicas.
    with_timeout(LIMIT, || {
        for own_memory in [false, true] {
            let a = parse_gen_spec("stencil7:16").unwrap();
            let mut cfg = Config::with_workers(1).scheduler(tessera_engine::Scheduler::Dmda);
            cfg.devices.push(Arc::new(EmuDevice::new(
                0,
                EmuConfig {
                    own_memory,
                    ..EmuConfig::default()
                },
            )));
            let rt = Runtime::new(cfg).unwrap();
            let mat = SpmvMatrix::new(&rt, &a, 32);
            let x0 = vec![1.0; a.n_rows()];
            let (xb, stats_b, log) =
                balanced_power_iteration(&rt, &mat, x0.clone(), 12, 1, 50e9, 50e9).unwrap();
            let (xp, stats_p) = power_iteration(&rt, &mat, x0, 12).unwrap();
            assert_eq!(log.len(), 12);
            // Iteration 1 uses the peak ratio (1:1 here): about half the nonzeros on the device.
            assert!(
                (log[0].fraction - 0.5).abs() < 0.1,
                "first split {}",
                log[0].fraction
            );
            assert!(log.iter().all(|i| (0.0..=1.0).contains(&i.fraction)));
            for (b, p) in stats_b.history.iter().zip(&stats_p.history) {
                assert!((b - p).abs() <= 1e-12 * p.abs(), "{b} vs {p}");
            }
            for (b, p) in xb.iter().zip(&xp) {
                assert!((b - p).abs() <= 1e-12, "{b} vs {p}");
            }
            // the device really computed, so its data moved
            assert!(rt.memory_stats().nodes[1].bytes_in > 0);
        }
    });
}
