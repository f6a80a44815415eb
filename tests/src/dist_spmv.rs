//! Distributed SpMV, CG and power iteration against the single-process drivers, shared by
//! the in-process tests (`tests/dist.rs`) and the MPI ones (`tests/mpi.rs`): the cases (every
//! generator, a small symmetric Matrix Market file and, when written, a random SPD one for CG
//! with Jacobi and tall, wide, empty-row and empty-column ones for SpMV alone), the
//! single-process reference, one rank's run, and the comparison (1e-12 relative).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera_engine::dist::{Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_linalg::solver::{
    check_square, conjugate_gradient, power_iteration, CgOptions, CgVariant, Preconditioner,
};
use tessera_linalg::sparse::csr::Csr;
use tessera_linalg::sparse::gen::GenSpec;
use tessera_linalg::sparse::mm::{read_matrix_market, scan_matrix_market};
use tessera_linalg::spmv::{repeated_spmv, SpmvMatrix};
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
    /// Symmetric positive definite: CG is compared; otherwise power iteration (square
    /// matrices) or nothing but SpMV (rectangular ones).
    pub spd: bool,
    /// CG with the Jacobi preconditioner.
    pub jacobi: bool,
    /// The pipelined CG (compared with the single-process pipelined CG, which
    /// `tests/solvers.rs` compares with the sequential reference).
    pub pipelined: bool,
}

/// Every generator, and the Matrix Market file at `mm` (see [`write_symmetric_mm`]).
pub fn cases(mm: &Path) -> Vec<Case> {
    let case = |spec: &str, spd| Case {
        spec: spec.into(),
        spd,
        jacobi: false,
        pipelined: false,
    };
    let pipelined = |spec: &str, jacobi| Case {
        spec: spec.into(),
        spd: true,
        jacobi,
        pipelined: true,
    };
    let mut all = vec![
        case("stencil7:7", true),
        case("stencil27:5", true),
        case("banded:300:4", true),
        case("powerlaw:400:6", false),
        case("dense:24", false),
        case(&format!("mm:{}", mm.display()), true),
        pipelined("stencil7:7", false),
        pipelined("banded:300:4", true),
    ];
    // The files of `write_all_mm`, when it wrote them.
    for (path, _, spd) in extra_mm(mm) {
        if path.exists() {
            all.push(Case {
                spec: format!("mm:{}", path.display()),
                spd,
                jacobi: spd,
                pipelined: false,
            });
        }
    }
    all
}

fn cg_options(case: &Case) -> CgOptions {
    CgOptions {
        rtol: 0.0,
        max_iters: SOLVER_ITERS,
        pc: if case.jacobi {
            Preconditioner::Jacobi
        } else {
            Preconditioner::None
        },
        variant: if case.pipelined {
            CgVariant::Pipelined
        } else {
            CgVariant::Standard
        },
    }
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
    let (solver_x, stats) = if a.n_rows() != a.n_cols() {
        (Vec::new(), Default::default())
    } else if case.spd {
        let b: Vec<f64> = (0..a.n_rows()).map(x_at).collect();
        conjugate_gradient(&rt, &mat, &b, &cg_options(case)).unwrap()
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
    // Both column layouts of the interior blocks: compact gaps on ranks with one worker,
    // `u32` indices on ranks with two (`Csr::with_compact_columns`).
    let a = DistMatrix::new(&rt, net, coll, &src, 3, workers % 2 == 1).unwrap();
    let rows = a.own_rows();
    let x: Vec<f64> = a.own_cols().map(x_at).collect();
    let (y, _) = spmv_dist::repeated_spmv(&rt, coll, &a, x.clone(), SPMV_ITERS).unwrap();
    let (n_rows, n_cols, _) = a.shape();
    let (solver_x, stats) = if n_rows != n_cols {
        // The solvers refuse it, with the one-process message.
        let e = spmv_dist::power_iteration(&rt, coll, &a, x, SOLVER_ITERS).unwrap_err();
        let msg = check_square("power", n_rows, n_cols).unwrap_err();
        assert!(e.to_string().contains(&msg), "{e}");
        (Vec::new(), Default::default())
    } else if case.spd {
        spmv_dist::conjugate_gradient_with(&rt, coll, &a, &x, &cg_options(case)).unwrap()
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
    if want.solver_x.is_empty() {
        // Rectangular: SpMV alone.
        assert!(r.solver_x.is_empty(), "{tag}");
        return;
    }
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

/// A seeded random SPD matrix, `n × n`, about `per_row` off-diagonal entries per row
/// (symmetric, in [−1, 1]), and a diagonal that dominates and varies by a factor of about
/// 60 from row to row (so the Jacobi preconditioner changes the iteration).
pub fn random_spd(n: usize, per_row: usize, seed: u64) -> Csr {
    let mut rng = seed;
    let mut next = move || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut coo = tessera_linalg::sparse::coo::Coo::new(n, n).unwrap();
    let mut rowsum = vec![0.0; n];
    for i in 0..n {
        for _ in 0..per_row / 2 {
            let j = (next() * n as f64) as usize % n;
            if j == i {
                continue;
            }
            let v = 2.0 * next() - 1.0;
            coo.push(i, j, v);
            coo.push(j, i, v);
            rowsum[i] += v.abs();
            rowsum[j] += v.abs();
        }
    }
    for (i, s) in rowsum.iter().enumerate() {
        coo.push(i, i, s + 1.0 + 60.0 * ((i * 7) % 11) as f64 / 10.0);
    }
    coo.to_csr()
}

/// A seeded random general `n_rows × n_cols` matrix with `per_row` entries per row, except
/// for the rows in `empty_rows` and the columns in `empty_cols`, which hold none.
pub fn random_general(
    n_rows: usize,
    n_cols: usize,
    per_row: usize,
    empty_rows: Range<usize>,
    empty_cols: Range<usize>,
    seed: u64,
) -> Csr {
    let mut rng = seed;
    let mut coo = tessera_linalg::sparse::coo::Coo::new(n_rows, n_cols).unwrap();
    for i in 0..n_rows {
        if empty_rows.contains(&i) {
            continue;
        }
        for _ in 0..per_row {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = (rng >> 33) as usize % n_cols;
            if !empty_cols.contains(&j) {
                coo.push(i, j, ((rng >> 11) % 1000) as f64 / 500.0 - 1.0);
            }
        }
    }
    coo.to_csr()
}

/// The extra Matrix Market files of the comparison, beside `mm`: a random SPD matrix (CG
/// with Jacobi), and tall, wide, empty-row and empty-column ones (SpMV only).
fn extra_mm(mm: &Path) -> Vec<(PathBuf, Csr, bool)> {
    let with = |tag: &str| mm.with_extension(format!("{tag}.mtx"));
    vec![
        (with("spd"), random_spd(240, 8, 7), true),
        (
            with("tall"),
            random_general(300, 70, 5, 0..0, 0..0, 1),
            false,
        ),
        (
            with("wide"),
            random_general(70, 300, 9, 0..0, 0..0, 2),
            false,
        ),
        (
            with("empty-rows"),
            random_general(160, 150, 4, 20..70, 0..0, 3),
            false,
        ),
        (
            with("empty-cols"),
            random_general(150, 170, 6, 0..0, 30..120, 4),
            false,
        ),
    ]
}

/// Write [`write_symmetric_mm`]'s file and the extra ones beside it.
pub fn write_all_mm(mm: &Path) {
    write_symmetric_mm(mm);
    for (path, a, _) in extra_mm(mm) {
        tessera_linalg::sparse::mm::write_matrix_market(&a, &path).expect("write an extra file");
    }
}

/// Remove the files [`write_all_mm`] wrote.
pub fn remove_all_mm(mm: &Path) {
    let _ = std::fs::remove_file(mm);
    for (path, _, _) in extra_mm(mm) {
        let _ = std::fs::remove_file(path);
    }
}
