//! Benchmark matrices built directly in CSR (no triplet sort): 3-D stencils, banded, power-law
//! rows and dense-stored-sparse, all deterministic (the random ones from a seed), plus the
//! `name:args` spec the CLI takes.
//!
//! | spec | matrix | nnz |
//! |------|--------|-----|
//! | `stencil7:N` | 7-point Laplacian on an `N³` grid, diagonal 6, neighbours −1 | `7N³ − 6N²` |
//! | `stencil27:N` | 27-point stencil on an `N³` grid, diagonal 26, neighbours −1 | `(3N − 2)³` |
//! | `banded:N:HB` | band of half-width `HB`, diagonal `2·HB + 1`, off-diagonals −1 | `N(2HB + 1) − HB(HB + 1)` (for `HB < N`) |
//! | `powerlaw:N[:AVG[:ALPHA[:SEED]]]` | power-law row lengths, random columns and values | `≈ AVG·N` |
//! | `dense:N[:SEED]` | every entry stored, uniform in [−0.5, 0.5) (Roadrunner's "Sparse Dense") | `N²` |
//!
//! The stencils and the banded matrix are symmetric and diagonally dominant (strictly in at
//! least one row, and their graphs are connected), hence symmetric positive definite: fit for
//! CG. Defaults: `AVG = 16`, `ALPHA = 2.5`, `SEED = 1`.
//!
//! # A range of rows alone
//!
//! A distributed run builds only its own rows: [`GenSpec`] is a spec parsed but not built;
//! [`GenSpec::row_ptr`] gives every row's length without building the matrix (to split the
//! rows between ranks by entries) and [`GenSpec::rows`] builds rows `a..b` alone, equal to
//! rows `a..b` of the whole matrix. The stencils, the band and the dense matrix compute a
//! row from its index; `dense` jumps its random stream to the row's first value (SplitMix64
//! is a counter, so a jump is one multiply). `powerlaw` draws every row's weight (O(N), as
//! its scale needs their sum), then, since its rows draw a varying number of columns from
//! one stream, it replays the column draws of the rows before `a` without keeping them:
//! O(entries before `a`) time, O(longest row) memory, and for a seed the same rows
//! whether the matrix is built whole or by ranges.

mod spec;
#[cfg(test)]
mod tests;

pub use spec::{parse_gen_spec, GenSpec};

use std::ops::Range;

use super::csr::Csr;

/// SplitMix64: a small, seeded generator whose stream is fixed forever (unlike a library RNG
/// whose algorithm may change between versions), so a seed names the same matrix in every
/// build.
struct SplitMix64(u64);

/// SplitMix64's increment: the state after `k` draws is the seed plus `k` of them.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl SplitMix64 {
    /// Skip `k` draws.
    fn jump(&mut self, k: u64) {
        self.0 = self.0.wrapping_add(k.wrapping_mul(GOLDEN));
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2⁻³² for `n < 2³²`).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// Assembles a CSR from parts the generators built; their construction guarantees validity.
fn assemble(
    n_rows: usize,
    n_cols: usize,
    row_ptr: Vec<usize>,
    col_idx: Vec<u32>,
    vals: Vec<f64>,
) -> Csr {
    Csr::new(n_rows, n_cols, row_ptr, col_idx, vals)
        .unwrap_or_else(|e| panic!("generator built an invalid CSR: {e}"))
}

/// Panics unless `n` rows/columns fit the `u32` column indices.
fn check_order(what: &str, n: usize) {
    assert!(
        u32::try_from(n).is_ok(),
        "{what}: order {n} does not fit the 32-bit column indices"
    );
}

/// The 7-point Laplacian on an `n × n × n` grid (rows ordered x fastest, then y, then z):
/// 6 on the diagonal, −1 for each of the ≤ 6 face neighbours. `7n³ − 6n²` entries,
/// columns sorted.
///
/// # Panics
/// If `n³` overflows or exceeds `u32::MAX`.
pub fn stencil7(n: usize) -> Csr {
    let rows = grid_rows("stencil7", n);
    stencil7_rows(n, 0..rows)
}

/// Rows `range` of [`stencil7`]`(n)`.
fn stencil7_rows(n: usize, range: Range<usize>) -> Csr {
    let rows = grid_rows("stencil7", n);
    assert!(
        range.start <= range.end && range.end <= rows,
        "rows {range:?} of {rows}"
    );
    let nnz = (range.start..range.end).map(|i| stencil7_len(n, i)).sum();
    let (nn, n2) = (n, n * n);
    let mut row_ptr = Vec::with_capacity(range.len() + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    for i in range.clone() {
        let (x, y, z) = (i % nn, i / nn % nn, i / n2);
        // In increasing column order: −z, −y, −x, self, +x, +y, +z.
        let mut put = |c: usize, v: f64| {
            col_idx.push(c as u32);
            vals.push(v);
        };
        if z > 0 {
            put(i - n2, -1.0);
        }
        if y > 0 {
            put(i - nn, -1.0);
        }
        if x > 0 {
            put(i - 1, -1.0);
        }
        put(i, 6.0);
        if x + 1 < nn {
            put(i + 1, -1.0);
        }
        if y + 1 < nn {
            put(i + nn, -1.0);
        }
        if z + 1 < nn {
            put(i + n2, -1.0);
        }
        row_ptr.push(col_idx.len());
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(range.len(), rows, row_ptr, col_idx, vals)
}

/// Entries of row `i` of the 7-point stencil.
fn stencil7_len(n: usize, i: usize) -> usize {
    let (x, y, z) = (i % n, i / n % n, i / (n * n));
    let inner = |p: usize| (p > 0) as usize + (p + 1 < n) as usize;
    1 + inner(x) + inner(y) + inner(z)
}

/// The 27-point stencil on an `n × n × n` grid: 26 on the diagonal, −1 for each of the ≤ 26
/// neighbours in the surrounding 3×3×3 cube. `(3n − 2)³` entries, columns sorted.
///
/// # Panics
/// If `n³` overflows or exceeds `u32::MAX`.
pub fn stencil27(n: usize) -> Csr {
    let rows = grid_rows("stencil27", n);
    stencil27_rows(n, 0..rows)
}

/// Rows `range` of [`stencil27`]`(n)`.
fn stencil27_rows(n: usize, range: Range<usize>) -> Csr {
    let rows = grid_rows("stencil27", n);
    assert!(
        range.start <= range.end && range.end <= rows,
        "rows {range:?} of {rows}"
    );
    let nnz = (range.start..range.end).map(|i| stencil27_len(n, i)).sum();
    let mut row_ptr = Vec::with_capacity(range.len() + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    // Neighbour offsets −1..=1 along an axis, clipped to the grid.
    let span = |p: usize| p.saturating_sub(1)..(p + 2).min(n);
    for i in range.clone() {
        let (x, y, z) = (i % n, i / n % n, i / (n * n));
        // z, then y, then x ascending: columns come out sorted.
        for zz in span(z) {
            for yy in span(y) {
                let base = (zz * n + yy) * n;
                for xx in span(x) {
                    let c = base + xx;
                    col_idx.push(c as u32);
                    vals.push(if c == i { 26.0 } else { -1.0 });
                }
            }
        }
        row_ptr.push(col_idx.len());
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(range.len(), rows, row_ptr, col_idx, vals)
}

/// Entries of row `i` of the 27-point stencil.
fn stencil27_len(n: usize, i: usize) -> usize {
    let (x, y, z) = (i % n, i / n % n, i / (n * n));
    let span = |p: usize| (p + 2).min(n) - p.saturating_sub(1);
    span(x) * span(y) * span(z)
}

fn grid_rows(what: &str, n: usize) -> usize {
    let rows = n
        .checked_mul(n)
        .and_then(|n2| n2.checked_mul(n))
        .unwrap_or_else(|| panic!("{what}: {n}³ overflows"));
    check_order(what, rows);
    rows
}

/// The `n × n` band matrix of half-width `half_bandwidth`: `2·hb + 1` on the diagonal and −1
/// at every other position within the band, so every row is strictly diagonally dominant
/// (SPD). Deterministic; columns sorted.
///
/// # Panics
/// If `n > u32::MAX` or the entry count overflows.
pub fn banded(n: usize, half_bandwidth: usize) -> Csr {
    banded_rows(n, half_bandwidth, 0..n)
}

/// Rows `range` of [`banded`]`(n, half_bandwidth)`.
fn banded_rows(n: usize, half_bandwidth: usize, range: Range<usize>) -> Csr {
    check_order("banded", n);
    assert!(
        range.start <= range.end && range.end <= n,
        "rows {range:?} of {n}"
    );
    let hb = half_bandwidth.min(n.saturating_sub(1));
    let nnz = (range.start..range.end)
        .map(|i| banded_len(n, hb, i))
        .try_fold(0usize, |a, b| a.checked_add(b))
        .expect("banded: entry count overflows");
    let diag = (2 * hb + 1) as f64;
    let mut row_ptr = Vec::with_capacity(range.len() + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    for i in range.clone() {
        for c in i.saturating_sub(hb)..(i + hb + 1).min(n) {
            col_idx.push(c as u32);
            vals.push(if c == i { diag } else { -1.0 });
        }
        row_ptr.push(col_idx.len());
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(range.len(), n, row_ptr, col_idx, vals)
}

/// Entries of row `i` of the band of half-width `hb` (already clipped to `n − 1`).
fn banded_len(n: usize, hb: usize, i: usize) -> usize {
    (i + hb + 1).min(n) - i.saturating_sub(hb)
}

/// An `n × n` matrix whose row lengths follow a power law: row `i` gets a weight
/// `wᵢ = u^(−1/(α−1))` (`u` uniform: a Pareto tail `P(w > t) = t^(1−α)`, i.e. density
/// `∝ t^(−α)`), lengths are the weights scaled to average `avg_nnz_per_row`, rounded, and
/// clamped to `1..=n`; each row's columns are distinct, uniform, sorted, with values uniform
/// in [−1, 1). Heavy rows land at random positions, as in web and social graphs; `α` near 2
/// gives a few very long rows, large `α` almost uniform lengths. Deterministic in `seed`.
///
/// # Panics
/// If `n > u32::MAX`, `avg_nnz_per_row` is not in `(0, n]` or `alpha` is not a finite number
/// `> 1`.
pub fn powerlaw(n: usize, avg_nnz_per_row: f64, alpha: f64, seed: u64) -> Csr {
    powerlaw_rows(n, avg_nnz_per_row, alpha, seed, 0..n)
}

/// The generator after the weights of [`powerlaw`]'s rows were drawn, and the row
/// offsets they give.
fn powerlaw_lengths(
    n: usize,
    avg_nnz_per_row: f64,
    alpha: f64,
    seed: u64,
) -> (SplitMix64, Vec<usize>) {
    check_order("powerlaw", n);
    assert!(
        avg_nnz_per_row > 0.0 && avg_nnz_per_row <= n as f64,
        "powerlaw: average row length {avg_nnz_per_row} is not in (0, {n}]"
    );
    assert!(
        alpha.is_finite() && alpha > 1.0,
        "powerlaw: exponent {alpha} must be a finite number > 1"
    );
    let mut rng = SplitMix64(seed ^ 0x504F_5745_524C_4157); // "POWERLAW"
                                                            // 1 − u ∈ (0, 1]: no infinite weight.
    let weights: Vec<f64> = (0..n)
        .map(|_| (1.0 - rng.next_unit()).powf(-1.0 / (alpha - 1.0)))
        .collect();
    let scale = avg_nnz_per_row * n as f64 / weights.iter().sum::<f64>();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0usize);
    for &w in &weights {
        let len = ((w * scale).round() as usize).clamp(1, n);
        row_ptr.push(row_ptr.last().unwrap() + len);
    }
    (rng, row_ptr)
}

/// The columns of one row of `len` entries out of `n`, drawn as [`powerlaw`] does, appended
/// to `col_idx` (sorted, distinct); `pool` is scratch.
fn powerlaw_columns(
    rng: &mut SplitMix64,
    n: usize,
    len: usize,
    col_idx: &mut Vec<u32>,
    pool: &mut Vec<u32>,
) {
    let start = col_idx.len();
    if 2 * len <= n {
        // Sparse row: draw, sort, drop repeats, top up until `len` distinct.
        while col_idx.len() - start < len {
            let missing = len - (col_idx.len() - start);
            col_idx.extend((0..missing).map(|_| rng.below(n) as u32));
            col_idx[start..].sort_unstable();
            let mut w = start;
            for k in start..col_idx.len() {
                if k == start || col_idx[k] != col_idx[w - 1] {
                    col_idx[w] = col_idx[k];
                    w += 1;
                }
            }
            col_idx.truncate(w);
        }
    } else {
        // Dense row: a partial Fisher–Yates shuffle picks `len` of all columns.
        pool.clear();
        pool.extend(0..n as u32);
        for k in 0..len {
            let j = k + rng.below(n - k);
            pool.swap(k, j);
        }
        pool[..len].sort_unstable();
        col_idx.extend_from_slice(&pool[..len]);
    }
}

/// Rows `range` of [`powerlaw`]: the rows before it are drawn and dropped (see the module
/// doc, "A range of rows alone").
fn powerlaw_rows(
    n: usize,
    avg_nnz_per_row: f64,
    alpha: f64,
    seed: u64,
    range: Range<usize>,
) -> Csr {
    if n == 0 {
        return Csr::zeros(0, 0).expect("empty matrix");
    }
    let (mut rng, full_ptr) = powerlaw_lengths(n, avg_nnz_per_row, alpha, seed);
    assert!(
        range.start <= range.end && range.end <= n,
        "rows {range:?} of {n}"
    );
    let len = |i: usize| full_ptr[i + 1] - full_ptr[i];
    let mut pool: Vec<u32> = Vec::new();
    let mut scratch: Vec<u32> = Vec::new();
    for i in 0..range.start {
        if 2 * len(i) <= n {
            // The number of draws depends on the repeats: replay them.
            scratch.clear();
            powerlaw_columns(&mut rng, n, len(i), &mut scratch, &mut pool);
        } else {
            // A dense row draws exactly one number per entry.
            rng.jump(len(i) as u64);
        }
        rng.jump(len(i) as u64); // its values
    }
    let base = full_ptr[range.start];
    let row_ptr: Vec<usize> = full_ptr[range.start..=range.end]
        .iter()
        .map(|&p| p - base)
        .collect();
    drop(full_ptr);
    let nnz = row_ptr[range.len()];
    let mut col_idx: Vec<u32> = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    for k in 0..range.len() {
        let len = row_ptr[k + 1] - row_ptr[k];
        powerlaw_columns(&mut rng, n, len, &mut col_idx, &mut pool);
        vals.extend((0..len).map(|_| 2.0 * rng.next_unit() - 1.0));
    }
    assemble(range.len(), n, row_ptr, col_idx, vals)
}

/// The dense `n × n` matrix stored as CSR (every entry, columns sorted), entries uniform in
/// [−0.5, 0.5) from `seed`: the Roadrunner paper's "Sparse Dense" case, where SpMV is limited
/// by streaming the matrix with perfectly regular access to `x`.
///
/// # Panics
/// If `n > u32::MAX` or `n²` overflows.
pub fn dense_as_sparse(n: usize, seed: u64) -> Csr {
    dense_rows(n, seed, 0..n)
}

/// Rows `range` of [`dense_as_sparse`]`(n, seed)`: the stream jumps to the first value.
fn dense_rows(n: usize, seed: u64, range: Range<usize>) -> Csr {
    check_order("dense_as_sparse", n);
    assert!(
        range.start <= range.end && range.end <= n,
        "rows {range:?} of {n}"
    );
    let nnz = range
        .len()
        .checked_mul(n)
        .expect("dense_as_sparse: n² overflows");
    n.checked_mul(n).expect("dense_as_sparse: n² overflows");
    let mut rng = SplitMix64(seed ^ 0x4445_4E53_4541_5353); // "DENSEASS"
    rng.jump((range.start * n) as u64);
    let row_ptr: Vec<usize> = (0..=range.len()).map(|i| i * n).collect();
    let col_idx: Vec<u32> = (0..nnz).map(|k| (k % n) as u32).collect();
    let vals: Vec<f64> = (0..nnz).map(|_| rng.next_unit() - 0.5).collect();
    assemble(range.len(), n, row_ptr, col_idx, vals)
}
