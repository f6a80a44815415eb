//! Distributed SpMV, CG and power iteration against the single-process drivers, shared by
//! the in-process tests (`tests/dist.rs`) and the MPI ones (`tests/mpi.rs`): the cases (every
//! generator and a small symmetric Matrix Market file), the single-process reference, one
//! rank's run, and the comparison (1e-12 relative).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera_engine::dist::{Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_linalg::sparse::csr::Csr;
use tessera_linalg::sparse::gen::GenSpec;
use tessera_linalg::sparse::mm::{read_matrix_market, scan_matrix_market};
use tessera_linalg::spmv::{conjugate_gradient, power_iteration, repeated_spmv, SpmvMatrix};
use tessera_linalg::spmv_dist::{self, DistMatrix, MatrixSource};

/// SpMV repetitions compared.
pub const SPMV_ITERS: usize = 3;
/// CG and power iterations compared (CG runs them all: tolerance 0).
pub const SOLVER_ITERS: usize = 20;

/// One matrix of the comparison.
#[derive(Clone, Debug)]
pub struct Case {
    /// A generator spec, or `mm:PATH`.
    pub spec: String,
    /// Symmetric positive definite: CG is compared; otherwise power iteration.
    pub spd: bool,
}

/// Every generator, and the Matrix Market file at `mm` (see [`write_symmetric_mm`]).
pub fn cases(mm: &Path) -> Vec<Case> {
    let case = |spec: &str, spd| Case {
        spec: spec.into(),
        spd,
    };
    vec![
        case("stencil7:7", true),
        case("stencil27:5", true),
        case("banded:300:4", true),
        case("powerlaw:400:6", false),
        case("dense:24", false),
        case(&format!("mm:{}", mm.display()), true),
    ]
}

/// A symmetric Matrix Market file (the lower triangle of the 7-point stencil on 4³, with
/// comments): symmetric storage, expanded by the readers.
pub fn write_symmetric_mm(path: &Path) {
    let a = tessera_linalg::sparse::gen::stencil7(4);
    let mut lines = Vec::new();
    for i in 0..a.n_rows() {
        let (cols, vals) = a.row(i);
        for (&c, &v) in cols.iter().zip(vals) {
            if c as usize <= i {
                lines.push(format!("{} {} {v}", i + 1, c + 1));
            }
        }
    }
    let text = format!(
        "%%MatrixMarket matrix coordinate real symmetric\n% 7-point stencil, 4^3\n{} {} {}\n{}\n",
        a.n_rows(),
        a.n_cols(),
        lines.len(),
        lines.join("\n")
    );
    std::fs::write(path, text).expect("write the Matrix Market file");
}

/// A file name for the Matrix Market case, unique to this process.
pub fn mm_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "tessera-dist-spmv-{tag}-{}.mtx",
        std::process::id()
    ))
}

fn source(case: &Case) -> MatrixSource {
    match case.spec.strip_prefix("mm:") {
        Some(path) => MatrixSource::MatrixMarket(scan_matrix_market(path).unwrap()),
        None => MatrixSource::Gen(GenSpec::parse(&case.spec).unwrap()),
    }
}

fn whole(case: &Case) -> Csr {
    match case.spec.strip_prefix("mm:") {
        Some(path) => read_matrix_market(path).unwrap(),
        None => GenSpec::parse(&case.spec).unwrap().build(),
    }
}

/// The `x` of the comparison (a function of the index, so each rank makes its part).
pub fn x_at(i: usize) -> f64 {
    1.0 + (i % 7) as f64 * 0.125 - (i % 3) as f64 * 0.25
}

/// The single-process results: `y` after [`SPMV_ITERS`] of `y += A·x`, and the solver's
/// `x` and history.
pub struct Reference {
    pub y: Vec<f64>,
    pub solver_x: Vec<f64>,
    pub history: Vec<f64>,
}

/// What one rank computed.
pub struct RankResult {
    pub rows: Range<usize>,
    pub y: Vec<f64>,
    pub solver_x: Vec<f64>,
    pub history: Vec<f64>,
    /// Halo entries this rank received per multiply.
    pub halo_in: usize,
}

/// The single-process run on 2 workers.
pub fn reference(case: &Case) -> Reference {
    let a = whole(case);
    let rt = Runtime::new(Config::with_workers(2)).unwrap();
    let mat = SpmvMatrix::new(&rt, &a, 5);
    let x: Vec<f64> = (0..a.n_cols()).map(x_at).collect();
    let (y, _) = repeated_spmv(&rt, &mat, x.clone(), SPMV_ITERS).unwrap();
    let (solver_x, stats) = if case.spd {
        let b: Vec<f64> = (0..a.n_rows()).map(x_at).collect();
        conjugate_gradient(&rt, &mat, &b, 0.0, SOLVER_ITERS).unwrap()
    } else {
        power_iteration(&rt, &mat, x, SOLVER_ITERS).unwrap()
    };
    Reference {
        y,
        solver_x,
        history: stats.history,
    }
}

/// One rank's run over `net` (every rank calls it with the same case, in the same order).
pub fn run_rank(net: &Arc<Net>, coll: &Collectives, case: &Case, workers: usize) -> RankResult {
    let rt = Runtime::new(Config::with_workers(workers)).unwrap();
    let src = source(case);
    let a = DistMatrix::new(&rt, net, coll, &src, 3).unwrap();
    let rows = a.own_rows();
    let x: Vec<f64> = rows.clone().map(x_at).collect();
    let (y, _) = spmv_dist::repeated_spmv(&rt, coll, &a, x.clone(), SPMV_ITERS).unwrap();
    let (solver_x, stats) = if case.spd {
        spmv_dist::conjugate_gradient(&rt, coll, &a, &x, 0.0, SOLVER_ITERS).unwrap()
    } else {
        spmv_dist::power_iteration(&rt, coll, &a, x, SOLVER_ITERS).unwrap()
    };
    let halo_in = a.info().halo_in;
    a.unregister(&rt).unwrap();
    RankResult {
        rows,
        y,
        solver_x,
        history: stats.iter.history,
        halo_in,
    }
}

/// `max |got − want| ≤ 1e-12 · max |want|`, with a message naming the case and the entry.
pub fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * scale,
            "{what}: entry {i}: {g} vs {w} (relative {:e})",
            (g - w).abs() / scale
        );
    }
}

/// Checks a rank's part against the reference.
pub fn check_rank(case: &Case, ranks: usize, r: &RankResult, want: &Reference) {
    let tag = format!("{} at {ranks} ranks, rows {:?}", case.spec, r.rows);
    assert_close(&format!("{tag}: SpMV"), &r.y, &want.y[r.rows.clone()]);
    let solver = if case.spd { "CG" } else { "power" };
    // The solvers' vectors are normalised by global quantities: compare each rank's part
    // against the same part of the reference, relative to the whole reference's scale.
    let scale = want
        .solver_x
        .iter()
        .fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    for (k, i) in r.rows.clone().enumerate() {
        let (g, w) = (r.solver_x[k], want.solver_x[i]);
        assert!(
            (g - w).abs() <= 1e-12 * scale,
            "{tag}: {solver} x[{i}]: {g} vs {w}"
        );
    }
    assert_close(
        &format!("{tag}: {solver} history"),
        &r.history,
        &want.history,
    );
}
