//! Proves that the solvers written once over an operator (`tessera_linalg::solver`) equal a
//! plain sequential reference on random SPD matrices at 1..4 workers (CG with and without
//! Jacobi, standard and pipelined, power iteration), that Jacobi changes the iteration
//! count, that CG stops for the reason it prints (after as many iterations in both
//! variants), and that a breakdown is the same error kind in one process and across ranks.

use std::time::Duration;

use tessera_engine::dist::Collectives;
use tessera_engine::{Config, Error, Runtime};
use tessera_linalg::solver::{
    conjugate_gradient, power_iteration, CgOptions, CgVariant, Preconditioner, StopReason,
};
use tessera_linalg::sparse::coo::Coo;
use tessera_linalg::sparse::csr::Csr;
use tessera_linalg::spmv::SpmvMatrix;
use tessera_linalg::spmv_dist::{self, DistMatrix};
use tessera_tests::dist_spmv::random_spd;
use tessera_tests::{spmd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Textbook preconditioned CG, sequential (`jacobi`: `M = diag(A)`); x and `||r||/||b||`.
fn reference_cg(a: &Csr, b: &[f64], jacobi: bool, iters: usize) -> (Vec<f64>, Vec<f64>) {
    let n = b.len();
    let dinv: Vec<f64> = (0..n)
        .map(|i| if jacobi { 1.0 / a.get(i, i) } else { 1.0 })
        .collect();
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut z: Vec<f64> = (0..n).map(|i| dinv[i] * r[i]).collect();
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    let bnorm = dot(b, b).sqrt();
    let mut hist = Vec::new();
    for _ in 0..iters {
        let mut q = vec![0.0; n];
        a.spmv_reference(&p, &mut q);
        let alpha = rz / dot(&p, &q);
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
            z[i] = dinv[i] * r[i];
        }
        let rz_new = dot(&r, &z);
        hist.push(dot(&r, &r).sqrt() / bnorm);
        for i in 0..n {
            p[i] = z[i] + rz_new / rz * p[i];
        }
        rz = rz_new;
    }
    (x, hist)
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * scale, "{what}[{i}]: {g} vs {w}");
    }
}

#[test]
fn cg_and_power_equal_the_sequential_reference_at_1_to_4_workers() {
    with_timeout(LIMIT, || {
        for (seed, n) in [(1, 97), (2, 300)] {
            let a = random_spd(n, 8, seed);
            let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
            for (jacobi, variant) in [false, true]
                .into_iter()
                .flat_map(|j| [(j, CgVariant::Standard), (j, CgVariant::Pipelined)])
            {
                let (want_x, want_h) = reference_cg(&a, &b, jacobi, 15);
                // The pipelined recurrences round differently (see its module doc).
                let tol = match variant {
                    CgVariant::Standard => 1e-10,
                    CgVariant::Pipelined => 1e-8,
                };
                for w in 1..=4 {
                    let rt = Runtime::new(Config::with_workers(w)).unwrap();
                    let mat = SpmvMatrix::new(&rt, &a, 3 * w);
                    let opts = CgOptions {
                        rtol: 0.0,
                        max_iters: 15,
                        pc: if jacobi {
                            Preconditioner::Jacobi
                        } else {
                            Preconditioner::None
                        },
                        variant,
                    };
                    let (x, st) = conjugate_gradient(&rt, &mat, &b, &opts).unwrap();
                    let tag = format!("n {n}, jacobi {jacobi}, {variant}, {w} workers");
                    assert_eq!(st.iterations, 15, "{tag}");
                    assert_eq!(st.stop, Some(StopReason::MaxIterations), "{tag}");
                    assert_close(&format!("{tag}: x"), &x, &want_x, tol);
                    assert_close(&format!("{tag}: history"), &st.history, &want_h, 10.0 * tol);
                }
            }
            // Power iteration: ||A·x_k|| against the plain loop.
            let mut x: Vec<f64> = vec![1.0; n];
            let norm = dot(&x, &x).sqrt();
            x.iter_mut().for_each(|v| *v /= norm);
            let mut want = Vec::new();
            for _ in 0..10 {
                let mut y = vec![0.0; n];
                a.spmv_reference(&x, &mut y);
                let l = dot(&y, &y).sqrt();
                want.push(l);
                x = y.iter().map(|v| v / l).collect();
            }
            for w in 1..=4 {
                let rt = Runtime::new(Config::with_workers(w)).unwrap();
                let mat = SpmvMatrix::new(&rt, &a, 2 * w + 1);
                let (xs, st) = power_iteration(&rt, &mat, vec![1.0; n], 10).unwrap();
                assert_close("power history", &st.history, &want, 1e-12);
                assert_close("power x", &xs, &x, 1e-10);
            }
        }
    });
}

#[test]
fn jacobi_converges_in_fewer_iterations_and_says_why_it_stopped() {
    with_timeout(LIMIT, || {
        let a = random_spd(400, 6, 9);
        let b = vec![1.0; 400];
        let rt = Runtime::with_workers(2).unwrap();
        let mat = SpmvMatrix::new(&rt, &a, 6);
        let run_with = |pc, max_iters, variant| {
            let opts = CgOptions {
                rtol: 1e-8,
                max_iters,
                pc,
                variant,
            };
            conjugate_gradient(&rt, &mat, &b, &opts).unwrap().1
        };
        let run = |pc, max_iters| run_with(pc, max_iters, CgVariant::Standard);
        // The pipelined CG stops after as many iterations (±1: its residual rounds
        // differently), for the same reason; and at the limit like the standard one.
        for pc in [Preconditioner::None, Preconditioner::Jacobi] {
            let (st, pi) = (
                run_with(pc, 500, CgVariant::Standard),
                run_with(pc, 500, CgVariant::Pipelined),
            );
            assert_eq!(pi.stop, Some(StopReason::Converged), "{pc}");
            assert!(
                st.iterations.abs_diff(pi.iterations) <= 1,
                "{pc}: standard {} vs pipelined {}",
                st.iterations,
                pi.iterations
            );
            assert_eq!(pi.history.len(), pi.iterations, "{pc}");
            for limit in [0, 1, 3] {
                let short = run_with(pc, limit, CgVariant::Pipelined);
                assert_eq!(
                    (short.iterations, short.stop, short.history.len()),
                    (limit, Some(StopReason::MaxIterations), limit),
                    "{pc}"
                );
            }
        }
        let zero = vec![0.0; 400];
        for variant in [CgVariant::Standard, CgVariant::Pipelined] {
            let opts = CgOptions {
                rtol: 1e-8,
                max_iters: 10,
                pc: Preconditioner::None,
                variant,
            };
            let (x, st) = conjugate_gradient(&rt, &mat, &zero, &opts).unwrap();
            assert_eq!((st.iterations, st.stop), (0, Some(StopReason::Converged)));
            assert!(x.iter().all(|v| *v == 0.0));
        }
        let plain = run(Preconditioner::None, 500);
        let jacobi = run(Preconditioner::Jacobi, 500);
        assert_eq!(plain.stop, Some(StopReason::Converged));
        assert_eq!(jacobi.stop, Some(StopReason::Converged));
        assert!(*jacobi.history.last().unwrap() <= 1e-8);
        assert!(
            jacobi.iterations < plain.iterations,
            "jacobi {} vs none {}",
            jacobi.iterations,
            plain.iterations
        );
        let short = run(Preconditioner::Jacobi, 3);
        assert_eq!(
            (short.iterations, short.stop),
            (3, Some(StopReason::MaxIterations))
        );
    });
}

/// A symmetric indefinite matrix: CG's `p·A·p` goes non-positive.
fn indefinite() -> Csr {
    let mut coo = Coo::new(6, 6).unwrap();
    for i in 0..6 {
        coo.push(i, i, if i % 2 == 0 { 1.0 } else { -1.0 });
    }
    coo.to_csr()
}

#[test]
fn breakdown_is_the_same_error_kind_in_one_process_and_across_ranks() {
    with_timeout(LIMIT, || {
        let a = indefinite();
        let b = vec![1.0; 6];
        let rt = Runtime::with_workers(2).unwrap();
        let mat = SpmvMatrix::new(&rt, &a, 2);
        for pc in [Preconditioner::None, Preconditioner::Jacobi] {
            for variant in [CgVariant::Standard, CgVariant::Pipelined] {
                let opts = CgOptions {
                    rtol: 1e-10,
                    max_iters: 10,
                    pc,
                    variant,
                };
                let e = conjugate_gradient(&rt, &mat, &b, &opts).unwrap_err();
                assert!(
                    matches!(e, Error::Breakdown(_)),
                    "one process, {pc}, {variant}: {e}"
                );
            }
        }
        let zero = Coo::new(4, 4).unwrap().to_csr();
        let zmat = SpmvMatrix::new(&rt, &zero, 2);
        let e = power_iteration(&rt, &zmat, vec![1.0; 4], 3).unwrap_err();
        assert!(matches!(e, Error::Breakdown(_)), "power: {e}");
        for ranks in 1..=3 {
            let errors = spmd(ranks, move |_, net| {
                let coll = Collectives::new(&net);
                let rt = Runtime::with_workers(1).unwrap();
                let part = tessera_linalg::spmv_dist::partition_rows(indefinite().row_ptr(), ranks);
                let own = part[net.rank()].clone();
                let local = indefinite().row_block(own.clone());
                // `row_block` keeps global columns.
                let a =
                    DistMatrix::from_rows(&rt, &net, &coll, part, local, 6, 6, 2, true).unwrap();
                let b = vec![1.0; own.len()];
                let cg = spmv_dist::conjugate_gradient(&rt, &coll, &a, &b, 1e-10, 10).unwrap_err();
                let opts = CgOptions {
                    rtol: 1e-10,
                    max_iters: 10,
                    pc: Preconditioner::None,
                    variant: CgVariant::Pipelined,
                };
                let pipe =
                    spmv_dist::conjugate_gradient_with(&rt, &coll, &a, &b, &opts).unwrap_err();
                assert!(
                    matches!(pipe, Error::Breakdown(_)),
                    "{ranks} ranks, pipelined: {pipe}"
                );
                let x = vec![0.0; own.len()];
                let power = spmv_dist::power_iteration(&rt, &coll, &a, x, 3).unwrap_err();
                (cg, power)
            });
            for (cg, power) in errors {
                assert!(matches!(cg, Error::Breakdown(_)), "{ranks} ranks: {cg}");
                assert!(
                    matches!(power, Error::Breakdown(_)),
                    "{ranks} ranks: {power}"
                );
            }
        }
    });
}
