//! HPL-style problem: a random system `A·x = b` reproducible from `(n, seed)`, the flops HPL
//! credits its solve with, and HPL's scaled-residual check (the solve itself is the LU's:
//! [`crate::lu::solve_from_factors`]).
//!
//! Every entry is a pure function of `(seed, row, col)` (a counter-based generator), so any
//! tile can be generated on its own, by any worker or rank, in any order, and the residual
//! check regenerates `A` tile by tile instead of keeping a copy.

use faer::linalg::matmul::matmul;
use faer::{Accum, Par};
use tessera_tasks::tile::Tile;

use crate::tiled::{col_mut, col_ref, TileMatrix};

/// HPL's pass threshold on the scaled residual: a run passes when it is below this.
pub const HPL_THRESHOLD: f64 = 16.0;

/// Unit roundoff `2⁻⁵³`, the `eps` HPL prints (`dlamch('E')`), half of `f64::EPSILON`.
pub const HPL_EPS: f64 = f64::EPSILON / 2.0;

/// Domain separators: the matrix and the right-hand side are distinct streams of one seed.
const STREAM_A: u64 = 0x4850_4C2D_4D41_5452; // "HPL-MATR"
const STREAM_B: u64 = 0x4850_4C2D_5248_5321; // "HPL-RHS!"
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijection on `u64` with good avalanche.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `counter`-th output of SplitMix64 started at `base`, as a uniform value in [−0.5, 0.5).
fn uniform(base: u64, counter: u64) -> f64 {
    let bits = mix64(base.wrapping_add(counter.wrapping_add(1).wrapping_mul(GAMMA)));
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5
}

fn stream_base(seed: u64, stream: u64) -> u64 {
    mix64(seed ^ stream)
}

/// Entry `(row, col)` of the matrix of `seed`. It does not depend on `n`, so the leading
/// `k × k` block of the matrix of order `n` is the matrix of order `k`.
fn entry(base: u64, row: usize, col: usize) -> f64 {
    // (row, col) → a distinct counter while both fit in 32 bits; `generate_*` assert that.
    uniform(base, ((row as u64) << 32) | col as u64)
}

fn check_order(n: usize) {
    assert!(
        u32::try_from(n).is_ok(),
        "HPL generator: order {n} does not fit the 32-bit row/column counters"
    );
}

/// Tile `(i, j)` of the HPL matrix of order `n` cut in tiles of `nb`, entries uniform in
/// [−0.5, 0.5), equal to the same block of [`generate_matrix`]`(n, nb, seed)`.
///
/// # Panics
/// If `nb == 0`, the tile is outside the matrix, or `n ≥ 2³²`.
pub fn generate_tile(n: usize, nb: usize, seed: u64, i: usize, j: usize) -> Tile {
    check_order(n);
    assert!(
        nb > 0 && i * nb < n && j * nb < n,
        "HPL tile ({i}, {j}) is outside an order-{n} matrix with nb={nb}"
    );
    let (rows, cols) = (nb.min(n - i * nb), nb.min(n - j * nb));
    let base = stream_base(seed, STREAM_A);
    let mut t = Tile::zeros(rows, cols);
    for c in 0..cols {
        for (r, x) in t.col_mut(c).iter_mut().enumerate() {
            *x = entry(base, i * nb + r, j * nb + c);
        }
    }
    t
}

/// The HPL matrix of order `n` and `seed`, in tiles of `nb`, generated on every core (as
/// HPL generates each process's part in parallel): single-threaded, N = 65536 took longer
/// than its factorisation on an H200.
pub fn generate_matrix(n: usize, nb: usize, seed: u64) -> TileMatrix {
    assert!(nb > 0, "generate_matrix: nb must be positive");
    let mt = n.div_ceil(nb);
    // Column-major tile order, as `TileMatrix::from_tiles` takes them.
    let tiles = par_map(mt * mt, |k| generate_tile(n, nb, seed, k % mt, k / mt));
    TileMatrix::from_tiles(n, n, nb, tiles)
}

/// `(0..count).map(f)` on every core the process may use, in order. Written here, not with
/// rayon, because these two loops (generation, residual) are the only data-parallel host
/// loops outside the task runtime and a scoped thread per core with a shared counter does it.
fn par_map<T: Send>(count: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(count);
    if threads <= 1 {
        return (0..count).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut parts: Vec<(usize, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= count {
                            return mine;
                        }
                        mine.push((k, f(k)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    parts.sort_unstable_by_key(|(k, _)| *k);
    parts.into_iter().map(|(_, t)| t).collect()
}

/// The right-hand side `b` of the HPL problem `(n, seed)`, uniform in [−0.5, 0.5), from a
/// stream distinct from the matrix's.
pub fn generate_rhs(n: usize, seed: u64) -> Vec<f64> {
    check_order(n);
    let base = stream_base(seed, STREAM_B);
    (0..n).map(|i| uniform(base, i as u64)).collect()
}

/// Flops HPL credits a solve of order `n` with: `2/3·n³ + 3/2·n²`.
pub fn hpl_flops(n: usize) -> f64 {
    let n = n as f64;
    2.0 / 3.0 * n * n * n + 1.5 * n * n
}

/// HPL's scaled residual `‖A·x − b‖∞ / (ε·(‖A‖∞·‖x‖∞ + ‖b‖∞)·n)` for the HPL matrix of
/// `(n, seed)`, regenerated tile by tile (tiles of `nb`; no copy of `A` is kept; tile rows
/// on every core), with
/// `ε = 2⁻⁵³` ([`HPL_EPS`]). The run passes when this is below [`HPL_THRESHOLD`].
///
/// # Panics
/// If `x` or `b` does not have length `n`, or `nb == 0`.
pub fn hpl_residual(n: usize, nb: usize, seed: u64, x: &[f64], b: &[f64]) -> f64 {
    assert!(nb > 0, "hpl_residual: nb must be positive");
    scaled_residual_by_tiles(n, nb, x, b, |i, j| generate_tile(n, nb, seed, i, j))
}

/// HPL's scaled residual (see [`hpl_residual`]) of `x` for an arbitrary square matrix `a`.
///
/// # Panics
/// If `a` is not square, or `x` or `b` does not have length `n`.
pub fn scaled_residual(a: &TileMatrix, x: &[f64], b: &[f64]) -> f64 {
    assert_eq!(
        a.n_rows(),
        a.n_cols(),
        "scaled_residual: the matrix must be square"
    );
    scaled_residual_by_tiles(a.n_rows(), a.nb(), x, b, |i, j| a.tile(i, j).clone())
}

fn scaled_residual_by_tiles(
    n: usize,
    nb: usize,
    x: &[f64],
    b: &[f64],
    tile: impl Fn(usize, usize) -> Tile + Sync,
) -> f64 {
    assert_eq!(x.len(), n, "scaled residual: x has the wrong length");
    assert_eq!(b.len(), n, "scaled residual: b has the wrong length");
    if n == 0 {
        return 0.0;
    }
    let nt = n.div_ceil(nb);
    // Tile row i owns rows i·nb.. of r and of the row sums; its tiles are added in column
    // order, as a sequential loop over j then i adds them, so the bits do not depend on the
    // thread count.
    let rows: Vec<(Vec<f64>, Vec<f64>)> = par_map(nt, |i| {
        let rows = i * nb..(i * nb + nb).min(n);
        let mut r: Vec<f64> = b[rows.clone()].iter().map(|v| -v).collect();
        let mut row_sums = vec![0.0; rows.len()];
        for j in 0..nt {
            let xj = col_ref(&x[j * nb..(j * nb + nb).min(n)]);
            let a = tile(i, j);
            matmul(col_mut(&mut r), Accum::Add, a.as_ref(), xj, 1.0, Par::Seq);
            for c in 0..a.cols() {
                for (s, v) in row_sums.iter_mut().zip(a.col(c)) {
                    *s += v.abs();
                }
            }
        }
        (r, row_sums)
    });
    let inf = |v: &[f64]| v.iter().fold(0.0_f64, |m, e| m.max(e.abs()));
    let norm_r = rows.iter().fold(0.0_f64, |m, (r, _)| m.max(inf(r)));
    let norm_a = rows
        .iter()
        .flat_map(|(_, s)| s.iter())
        .fold(0.0_f64, |m, &s| m.max(s));
    norm_r / (HPL_EPS * (norm_a * inf(x) + inf(b)) * n as f64)
}

#[cfg(test)]
mod tests {
    //! Proves that the generator is reproducible and tile-local, that its two streams differ,
    //! and that the scaled residual agrees with a direct dense computation.

    use super::*;

    #[test]
    fn reproducible_from_n_and_seed() {
        let a = generate_matrix(37, 8, 42);
        assert_eq!(a, generate_matrix(37, 8, 42));
        assert_ne!(a, generate_matrix(37, 8, 43));
        assert_eq!(generate_rhs(37, 42), generate_rhs(37, 42));
        assert_ne!(generate_rhs(37, 42), generate_rhs(37, 43));
        // The layout does not change the matrix, nor does the order (leading blocks agree).
        let dense = a.to_col_major();
        assert_eq!(generate_matrix(37, 5, 42).to_col_major(), dense);
        let small = generate_matrix(20, 3, 42).to_col_major();
        assert_eq!(small.as_ref(), dense.as_ref().submatrix(0, 0, 20, 20));
        assert_eq!(generate_rhs(20, 42), generate_rhs(37, 42)[..20]);
    }

    #[test]
    fn tiles_agree_with_the_matrix() {
        let (n, nb, seed) = (29, 6, 7);
        let a = generate_matrix(n, nb, seed);
        for i in 0..a.mt() {
            for j in 0..a.nt() {
                assert_eq!(
                    &generate_tile(n, nb, seed, i, j),
                    a.tile(i, j),
                    "tile ({i}, {j})"
                );
            }
        }
    }

    #[test]
    fn entries_are_uniform_in_half_open_interval() {
        let a = generate_matrix(200, 64, 1).to_col_major();
        let vals: Vec<f64> = (0..200).flat_map(|j| a.col_as_slice(j).to_vec()).collect();
        assert!(vals.iter().all(|v| (-0.5..0.5).contains(v)));
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / vals.len() as f64;
        // 40 000 samples: mean within ~6σ of 0, variance near 1/12.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.003, "variance {var}");
        // The right-hand side is not a copy of a column or of the first entries of A.
        let b = generate_rhs(200, 1);
        assert_ne!(b, a.col_as_slice(0));
        assert!(b.iter().all(|v| (-0.5..0.5).contains(v)));
    }

    #[test]
    fn residual_matches_dense_formula() {
        let (n, nb, seed) = (23, 4, 3);
        let a = generate_matrix(n, nb, seed).to_col_major();
        let b = generate_rhs(n, seed);
        let x: Vec<f64> = (0..n).map(|i| (i as f64 - 10.0) / 7.0).collect();
        let mut r_max: f64 = 0.0;
        let mut a_norm: f64 = 0.0;
        for i in 0..n {
            let ax: f64 = (0..n).map(|j| a[(i, j)] * x[j]).sum();
            r_max = r_max.max((ax - b[i]).abs());
            a_norm = a_norm.max((0..n).map(|j| a[(i, j)].abs()).sum());
        }
        let inf = |v: &[f64]| v.iter().fold(0.0_f64, |m, e| m.max(e.abs()));
        let expected = r_max / (HPL_EPS * (a_norm * inf(&x) + inf(&b)) * n as f64);
        let got = hpl_residual(n, nb, seed, &x, &b);
        assert!(
            (got - expected).abs() <= 1e-10 * expected,
            "{got} vs {expected}"
        );
        assert!(got > HPL_THRESHOLD, "a made-up x must fail the check");
        let tiled = scaled_residual(&generate_matrix(n, 5, seed), &x, &b);
        assert!((tiled - expected).abs() <= 1e-10 * expected);
    }

    #[test]
    fn empty_problem() {
        assert!(generate_matrix(0, 4, 1).into_tiles().is_empty());
        assert!(generate_rhs(0, 1).is_empty());
        assert_eq!(hpl_residual(0, 4, 1, &[], &[]), 0.0);
        assert_eq!(hpl_flops(0), 0.0);
        assert!((hpl_flops(10) - (2000.0 / 3.0 + 150.0)).abs() < 1e-9);
    }
}
