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

use super::csr::Csr;

/// SplitMix64: a small, seeded generator whose stream is fixed forever (unlike a library RNG
/// whose algorithm may change between versions), so a seed names the same matrix in every
/// build.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
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
    let nnz = if n == 0 { 0 } else { 7 * rows - 6 * n * n };
    let (nn, n2) = (n, n * n);
    let mut row_ptr = Vec::with_capacity(rows + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    for z in 0..nn {
        for y in 0..nn {
            for x in 0..nn {
                let i = (z * nn + y) * nn + x;
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
        }
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(rows, rows, row_ptr, col_idx, vals)
}

/// The 27-point stencil on an `n × n × n` grid: 26 on the diagonal, −1 for each of the ≤ 26
/// neighbours in the surrounding 3×3×3 cube. `(3n − 2)³` entries, columns sorted.
///
/// # Panics
/// If `n³` overflows or exceeds `u32::MAX`.
pub fn stencil27(n: usize) -> Csr {
    let rows = grid_rows("stencil27", n);
    let nnz = if n == 0 { 0 } else { (3 * n - 2).pow(3) };
    let mut row_ptr = Vec::with_capacity(rows + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    // Neighbour offsets −1..=1 along an axis, clipped to the grid.
    let span = |p: usize| p.saturating_sub(1)..(p + 2).min(n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let i = (z * n + y) * n + x;
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
        }
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(rows, rows, row_ptr, col_idx, vals)
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
    check_order("banded", n);
    let hb = half_bandwidth.min(n.saturating_sub(1));
    let nnz = n
        .checked_mul(2 * hb + 1)
        .map(|full| full - hb * (hb + 1))
        .expect("banded: entry count overflows");
    let diag = (2 * hb + 1) as f64;
    let mut row_ptr = Vec::with_capacity(n + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    for i in 0..n {
        for c in i.saturating_sub(hb)..(i + hb + 1).min(n) {
            col_idx.push(c as u32);
            vals.push(if c == i { diag } else { -1.0 });
        }
        row_ptr.push(col_idx.len());
    }
    debug_assert_eq!(col_idx.len(), nnz);
    assemble(n, n, row_ptr, col_idx, vals)
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
    check_order("powerlaw", n);
    if n == 0 {
        return Csr::zeros(0, 0).expect("empty matrix");
    }
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
    drop(weights);
    let nnz = row_ptr[n];
    let mut col_idx: Vec<u32> = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    let mut pool: Vec<u32> = Vec::new();
    for i in 0..n {
        let len = row_ptr[i + 1] - row_ptr[i];
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
        vals.extend((0..len).map(|_| 2.0 * rng.next_unit() - 1.0));
    }
    assemble(n, n, row_ptr, col_idx, vals)
}

/// The dense `n × n` matrix stored as CSR (every entry, columns sorted), entries uniform in
/// [−0.5, 0.5) from `seed`: the Roadrunner paper's "Sparse Dense" case, where SpMV is limited
/// by streaming the matrix with perfectly regular access to `x`.
///
/// # Panics
/// If `n > u32::MAX` or `n²` overflows.
pub fn dense_as_sparse(n: usize, seed: u64) -> Csr {
    check_order("dense_as_sparse", n);
    let nnz = n.checked_mul(n).expect("dense_as_sparse: n² overflows");
    let mut rng = SplitMix64(seed ^ 0x4445_4E53_4541_5353); // "DENSEASS"
    let row_ptr: Vec<usize> = (0..=n).map(|i| i * n).collect();
    let col_idx: Vec<u32> = (0..nnz).map(|k| (k % n) as u32).collect();
    let vals: Vec<f64> = (0..nnz).map(|_| rng.next_unit() - 0.5).collect();
    assemble(n, n, row_ptr, col_idx, vals)
}

/// Largest entry count a spec may ask for: 2³⁴ entries are 192 GiB of CSR, beyond any node
/// this runs on; refusing earlier gives a message instead of an allocation failure.
const MAX_SPEC_NNZ: u128 = 1 << 34;

const SPEC_FORMS: &str =
    "stencil7:N, stencil27:N, powerlaw:N[:AVG[:ALPHA[:SEED]]], banded:N:HALFBW, dense:N[:SEED]";

/// Builds the matrix a spec names (see the module doc), e.g. `stencil27:64`,
/// `powerlaw:100000:16:2.2`, `banded:1000000:8`, `dense:4000`. Errors name the spec and the
/// bad part; sizes are checked before anything is allocated.
pub fn parse_gen_spec(spec: &str) -> Result<Csr, String> {
    Ok(gen_spec(spec)?.build())
}

/// A checked generator spec, not built yet: its size is known first, so a
/// driver can check that the matrix fits in memory before allocating it.
#[derive(Clone, Debug, PartialEq)]
pub struct GenSpec {
    kind: GenKind,
    rows: usize,
    nnz: u128,
}

#[derive(Clone, Debug, PartialEq)]
enum GenKind {
    Stencil7(usize),
    Stencil27(usize),
    Banded(usize, usize),
    Powerlaw(usize, f64, f64, u64),
    Dense(usize, u64),
}

impl GenSpec {
    /// Rows (= columns) of the matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Entries of the matrix (for `powerlaw`, the expected count).
    pub fn nnz(&self) -> u128 {
        self.nnz
    }

    /// Bytes of the CSR matrix (values, 32-bit column indices, row pointers).
    pub fn csr_bytes(&self) -> u128 {
        self.nnz * 12 + (self.rows as u128 + 1) * 8
    }

    /// The matrix.
    pub fn build(&self) -> Csr {
        match self.kind {
            GenKind::Stencil7(n) => stencil7(n),
            GenKind::Stencil27(n) => stencil27(n),
            GenKind::Banded(n, hb) => banded(n, hb),
            GenKind::Powerlaw(n, avg, alpha, seed) => powerlaw(n, avg, alpha, seed),
            GenKind::Dense(n, seed) => dense_as_sparse(n, seed),
        }
    }
}

/// Parses and checks a spec (see [`parse_gen_spec`]) without building it.
pub fn gen_spec(spec: &str) -> Result<GenSpec, String> {
    let mut parts = spec.trim().split(':');
    let name = parts.next().unwrap_or("");
    let args: Vec<&str> = parts.collect();
    let arity = |min: usize, max: usize, form: &str| {
        if args.len() < min || args.len() > max {
            Err(format!(
                "matrix spec '{spec}': expected {form}, got {} argument(s)",
                args.len()
            ))
        } else {
            Ok(())
        }
    };
    let int = |k: usize, what: &str| -> Result<usize, String> {
        args[k].parse::<usize>().map_err(|e| {
            format!(
                "matrix spec '{spec}': {what} '{}' is not a non-negative integer ({e})",
                args[k]
            )
        })
    };
    let real = |k: usize, what: &str| -> Result<f64, String> {
        match args[k].parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!(
                "matrix spec '{spec}': {what} '{}' is not a finite number",
                args[k]
            )),
        }
    };
    let order = |n: usize, rows: u128, nnz: u128| -> Result<(), String> {
        if n == 0 {
            return Err(format!("matrix spec '{spec}': N must be at least 1"));
        }
        if rows > u32::MAX as u128 {
            return Err(format!(
                "matrix spec '{spec}': {rows} rows exceed the 32-bit column indices ({})",
                u32::MAX
            ));
        }
        if nnz > MAX_SPEC_NNZ {
            return Err(format!(
                "matrix spec '{spec}': {nnz} entries exceed the limit of {MAX_SPEC_NNZ}"
            ));
        }
        Ok(())
    };
    match name {
        "stencil7" | "stencil27" => {
            arity(1, 1, &format!("{name}:N"))?;
            let n = int(0, "N")?;
            let rows = (n as u128).pow(3);
            let nnz = rows * if name == "stencil7" { 7 } else { 27 };
            order(n, rows, nnz)?;
            let kind = if name == "stencil7" {
                GenKind::Stencil7(n)
            } else {
                GenKind::Stencil27(n)
            };
            Ok(GenSpec {
                kind,
                rows: rows as usize,
                nnz,
            })
        }
        "banded" => {
            arity(2, 2, "banded:N:HALFBW")?;
            let n = int(0, "N")?;
            let hb = int(1, "HALFBW")?;
            let nnz = n as u128 * (2 * hb.min(n) as u128 + 1);
            order(n, n as u128, nnz)?;
            Ok(GenSpec {
                kind: GenKind::Banded(n, hb),
                rows: n,
                nnz,
            })
        }
        "powerlaw" => {
            arity(1, 4, "powerlaw:N[:AVG[:ALPHA[:SEED]]]")?;
            let n = int(0, "N")?;
            let avg = if args.len() > 1 {
                real(1, "AVG")?
            } else {
                16.0
            };
            let alpha = if args.len() > 2 {
                real(2, "ALPHA")?
            } else {
                2.5
            };
            let seed = if args.len() > 3 {
                int(3, "SEED")? as u64
            } else {
                1
            };
            order(n, n as u128, (avg.max(0.0) * n as f64) as u128)?;
            if !(avg > 0.0 && avg <= n as f64) {
                return Err(format!(
                    "matrix spec '{spec}': AVG {avg} must be in (0, N = {n}]"
                ));
            }
            if alpha <= 1.0 {
                return Err(format!(
                    "matrix spec '{spec}': ALPHA {alpha} must be > 1 (a power law with a \
                     finite total)"
                ));
            }
            Ok(GenSpec {
                kind: GenKind::Powerlaw(n, avg, alpha, seed),
                rows: n,
                nnz: (avg * n as f64) as u128,
            })
        }
        "dense" => {
            arity(1, 2, "dense:N[:SEED]")?;
            let n = int(0, "N")?;
            let seed = if args.len() > 1 {
                int(1, "SEED")? as u64
            } else {
                1
            };
            order(n, n as u128, n as u128 * n as u128)?;
            Ok(GenSpec {
                kind: GenKind::Dense(n, seed),
                rows: n,
                nnz: n as u128 * n as u128,
            })
        }
        _ => Err(format!(
            "matrix spec '{spec}': unknown generator '{name}' (expected {SPEC_FORMS})"
        )),
    }
}

#[cfg(test)]
mod tests {
    //! Proves the generators' documented shapes: exact stencil and band entry counts,
    //! symmetry and diagonal dominance of the SPD ones, seeded determinism and power-law
    //! spread, nonzero-balanced partitions of their output, and the spec parser's errors.

    use super::*;

    /// Symmetric with sorted, distinct columns in every row.
    fn assert_symmetric(a: &Csr) {
        for i in 0..a.n_rows() {
            let (cols, _) = a.row(i);
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
        }
        assert_eq!(&a.transpose(), a);
    }

    /// `|a_ii| ≥ Σ_{j≠i} |a_ij|` for every row, strictly for at least one.
    fn assert_diagonally_dominant(a: &Csr) {
        let mut strict = false;
        for i in 0..a.n_rows() {
            let (cols, vals) = a.row(i);
            let mut diag = 0.0;
            let mut off = 0.0;
            for (&c, &v) in cols.iter().zip(vals) {
                if c as usize == i {
                    diag += v;
                } else {
                    off += f64::abs(v);
                }
            }
            assert!(
                diag >= off,
                "row {i}: diagonal {diag} < off-diagonal sum {off}"
            );
            strict |= diag > off;
        }
        assert!(strict || a.n_rows() == 0);
    }

    #[test]
    fn stencil_counts_exact_symmetric_dominant() {
        for n in [1, 2, 3, 5, 8] {
            let a = stencil7(n);
            assert_eq!(a.n_rows(), n * n * n);
            assert_eq!(a.nnz(), 7 * n * n * n - 6 * n * n, "stencil7 n={n}");
            assert_symmetric(&a);
            assert_diagonally_dominant(&a);
            let b = stencil27(n);
            assert_eq!(b.nnz(), (3 * n - 2).pow(3), "stencil27 n={n}");
            assert_symmetric(&b);
            assert_diagonally_dominant(&b);
        }
        assert_eq!(stencil7(0).nnz(), 0);
        assert_eq!(stencil27(0).nnz(), 0);
        // An interior row of the 27-point stencil: 26 neighbours at −1, 26 on the diagonal.
        let b = stencil27(3);
        let (cols, vals) = b.row(13);
        assert_eq!(cols.len(), 27);
        assert_eq!(vals.iter().sum::<f64>(), 0.0);
    }

    #[test]
    fn banded_counts_and_spd_shape() {
        for (n, hb) in [(1, 0), (5, 0), (5, 1), (10, 3), (7, 6), (4, 9)] {
            let a = banded(n, hb);
            let h = hb.min(n - 1);
            assert_eq!(a.nnz(), n * (2 * h + 1) - h * (h + 1), "n={n} hb={hb}");
            assert_symmetric(&a);
            assert_diagonally_dominant(&a);
        }
    }

    #[test]
    fn powerlaw_seeded_spread_and_average() {
        let a = powerlaw(20_000, 16.0, 2.2, 7);
        assert_eq!(a, powerlaw(20_000, 16.0, 2.2, 7), "same seed, same matrix");
        assert_ne!(a, powerlaw(20_000, 16.0, 2.2, 8));
        let avg = a.nnz() as f64 / a.n_rows() as f64;
        assert!((12.0..20.0).contains(&avg), "average row length {avg}");
        let lens: Vec<usize> = a.row_ptr().windows(2).map(|w| w[1] - w[0]).collect();
        let max = *lens.iter().max().unwrap();
        assert!(
            max > 20 * 16,
            "power law should have a heavy row, longest {max}"
        );
        assert!(*lens.iter().min().unwrap() >= 1);
        for i in 0..a.n_rows() {
            let (cols, vals) = a.row(i);
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i}");
            assert!(vals.iter().all(|v| (-1.0..1.0).contains(v)));
        }
        // A dense row path (len > n/2) on a tiny matrix with a heavy tail.
        let b = powerlaw(50, 20.0, 1.5, 3);
        for i in 0..b.n_rows() {
            assert!(b.row(i).0.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn dense_is_full_and_seeded() {
        let a = dense_as_sparse(7, 5);
        assert_eq!(a.nnz(), 49);
        assert_eq!(a, dense_as_sparse(7, 5));
        assert!(a.vals().iter().all(|v| (-0.5..0.5).contains(v)));
        assert_eq!(a.row(3).0, &[0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn partitions_balance_within_one_row() {
        for a in [
            stencil27(9),
            stencil7(12),
            powerlaw(5000, 8.0, 2.5, 1),
            banded(3000, 5),
        ] {
            let max_row = a.row_ptr().windows(2).map(|w| w[1] - w[0]).max().unwrap();
            for parts in [1, 2, 3, 7, 16] {
                let p = a.partition_by_nnz(parts);
                assert_eq!(p.len(), parts);
                assert_eq!(p[0].start, 0);
                assert_eq!(p[parts - 1].end, a.n_rows());
                let ideal = a.nnz() as f64 / parts as f64;
                for (k, r) in p.iter().enumerate() {
                    assert!(!r.is_empty());
                    if k > 0 {
                        assert_eq!(p[k - 1].end, r.start);
                    }
                    let got = (a.row_ptr()[r.end] - a.row_ptr()[r.start]) as f64;
                    assert!(
                        (got - ideal).abs() <= max_row as f64,
                        "part {k}/{parts}: {got} entries, ideal {ideal}, longest row {max_row}"
                    );
                }
            }
        }
    }

    #[test]
    fn spmv_matches_reference_on_generators() {
        use tessera_tasks::kernels::spmv_csr;
        for a in [
            stencil7(6),
            stencil27(5),
            banded(200, 9),
            powerlaw(2000, 12.0, 2.1, 5),
            dense_as_sparse(70, 2),
        ] {
            let x: Vec<f64> = (0..a.n_cols())
                .map(|j| (j as f64 * 0.7).sin() + 0.1)
                .collect();
            let y0: Vec<f64> = (0..a.n_rows()).map(|i| i as f64 * 0.01).collect();
            let mut want = y0.clone();
            a.spmv_reference(&x, &mut want);
            // Stated tolerance: reordering a row's sum changes it by at most len·ε·Σ|a·x|;
            // 1e-12 relative to Σ|a·x| (+ |y0|) covers rows up to ~4500 entries.
            let scale: Vec<f64> = (0..a.n_rows())
                .map(|i| {
                    let (cols, vals) = a.row(i);
                    y0[i].abs()
                        + cols
                            .iter()
                            .zip(vals)
                            .map(|(&c, &v)| (v * x[c as usize]).abs())
                            .sum::<f64>()
                })
                .collect();
            let close = |got: &[f64], rows: std::ops::Range<usize>| {
                for (k, i) in rows.enumerate() {
                    assert!(
                        (got[k] - want[i]).abs() <= 1e-12 * scale[i],
                        "row {i}: {} vs {}",
                        got[k],
                        want[i]
                    );
                }
            };
            let mut y = y0.clone();
            a.spmv(&x, &mut y);
            close(&y, 0..a.n_rows());
            let mut y = y0.clone();
            spmv_csr(a.row_ptr(), a.col_idx(), a.vals(), &x, &mut y);
            close(&y, 0..a.n_rows());
            // A row block in place (row_ptr starting at a non-zero offset) and copied out.
            let (r0, r1) = (a.n_rows() / 3, a.n_rows() * 3 / 4);
            let mut y = y0[r0..r1].to_vec();
            spmv_csr(&a.row_ptr()[r0..=r1], a.col_idx(), a.vals(), &x, &mut y);
            close(&y, r0..r1);
            let mut y = y0[r0..r1].to_vec();
            a.row_block(r0..r1).spmv(&x, &mut y);
            close(&y, r0..r1);
        }
    }

    #[test]
    fn spec_parses_and_rejects() {
        assert_eq!(parse_gen_spec("stencil27:4").unwrap(), stencil27(4));
        assert_eq!(parse_gen_spec("stencil7:3").unwrap(), stencil7(3));
        assert_eq!(parse_gen_spec("banded:10:2").unwrap(), banded(10, 2));
        assert_eq!(parse_gen_spec("dense:5:9").unwrap(), dense_as_sparse(5, 9));
        assert_eq!(
            parse_gen_spec("powerlaw:300").unwrap(),
            powerlaw(300, 16.0, 2.5, 1)
        );
        assert_eq!(
            parse_gen_spec("powerlaw:300:4:3.5:2").unwrap(),
            powerlaw(300, 4.0, 3.5, 2)
        );
        let err = |s: &str| parse_gen_spec(s).unwrap_err();
        assert!(err("blob:3").contains("unknown generator 'blob'"));
        assert!(err("blob:3").contains("stencil27:N"));
        assert!(err("stencil27:x").contains("N 'x' is not a non-negative integer"));
        assert!(err("stencil27:-4").contains("N '-4'"));
        assert!(err("stencil27").contains("expected stencil27:N, got 0 argument(s)"));
        assert!(err("stencil7:4:5").contains("got 2 argument(s)"));
        assert!(err("stencil7:0").contains("N must be at least 1"));
        assert!(err("stencil27:2000").contains("exceed the 32-bit column indices"));
        assert!(err("dense:4000000").contains("exceed the limit"));
        assert!(err("banded:10").contains("expected banded:N:HALFBW"));
        assert!(err("powerlaw:10:0").contains("AVG 0 must be in (0, N = 10]"));
        assert!(err("powerlaw:10:2:1").contains("ALPHA 1 must be > 1"));
        assert!(err("powerlaw:10:2:nan").contains("ALPHA 'nan' is not a finite number"));
    }
}
