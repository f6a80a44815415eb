//! GEMM: the trailing update `C := C − A·B`.

use std::sync::OnceLock;

use faer::linalg::matmul::matmul;
use faer::reborrow::ReborrowMut;
use faer::{Accum, MatMut, MatRef, Par};

use crate::tile::Tile;

/// `C := C − A·B`. Sequential; allocates nothing.
///
/// `C` and `A` are cut into blocks of [`gemm_row_block`] rows, one faer call
/// each, so that the block of `A` a call streams for every strip of `B` stays
/// in L2 (see [`gemm_row_block`] for the measurements).
///
/// # Panics
/// If the shapes do not chain: `A` is `m × k`, `B` is `k × n`, `C` is `m × n`.
pub fn gemm_update(a: &Tile, b: &Tile, c: &mut Tile) {
    assert!(
        a.rows() == c.rows() && b.cols() == c.cols() && a.cols() == b.rows(),
        "gemm_update: A is {}x{}, B is {}x{}, C is {}x{}",
        a.rows(),
        a.cols(),
        b.rows(),
        b.cols(),
        c.rows(),
        c.cols()
    );
    let rows = gemm_row_block(a.rows(), a.cols());
    gemm_minus_blocked(c.as_mut(), a.as_ref(), b.as_ref(), rows);
}

/// `C := C − A·B` on faer views, one call per block of `rows` rows of `C` and
/// `A` (`rows == 0` or `rows >= m`: one call). Sequential; allocates nothing.
pub fn gemm_minus_blocked(
    mut c: MatMut<'_, f64>,
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    rows: usize,
) {
    let m = c.nrows();
    let rows = if rows == 0 { m.max(1) } else { rows };
    let mut r0 = 0;
    while r0 < m {
        let r = rows.min(m - r0);
        matmul(
            c.rb_mut().subrows_mut(r0, r),
            Accum::Add,
            a.subrows(r0, r),
            b,
            -1.0,
            Par::Seq,
        );
        r0 += r;
    }
}

/// Rows of `C` (and `A`) per faer call in [`gemm_update`] for an `m × k` `A`:
/// `m` cut into equal blocks, multiples of 16, none larger than what keeps a
/// block of `A` (`rows · k · 8` bytes) within half of one core's L2.
///
/// Why: faer 0.24's x86 kernel (private-gemm-x86) takes an unpacked-`B` path
/// while `m` is under about `L2 / (8 · k)` rows (585 at `k = 448` with a
/// 2 MiB L2) and streams the whole of `A` from L2 for every 4-column strip of
/// `B`; at `nb = 448` that is 1.6 MB of a 2 MiB L2 and falls off a cliff.
/// Measured here with `tessera lu-kernels` (two threads, cold tiles): see the
/// table in the module doc of `bench/src/cmd/lu_kernels.rs`.
pub fn gemm_row_block(m: usize, k: usize) -> usize {
    let budget = l2_bytes() / 2;
    let max_rows = (budget / (8 * k.max(1))).max(16) / 16 * 16;
    if m <= max_rows {
        return m;
    }
    let blocks = m.div_ceil(max_rows);
    m.div_ceil(blocks).next_multiple_of(16)
}

/// One core's L2 in bytes, read once from sysfs (2 MiB assumed when unknown).
pub fn l2_bytes() -> usize {
    static L2: OnceLock<usize> = OnceLock::new();
    *L2.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .ok()
            .and_then(|s| parse_cache_size(s.trim()))
            .unwrap_or(2 << 20)
    })
}

/// `"2048K"`, `"2M"` or `"524288"` as bytes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let (num, unit) = match s.char_indices().last()? {
        (i, 'K') => (&s[..i], 1 << 10),
        (i, 'M') => (&s[..i], 1 << 20),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()
        .map(|v| v * unit)
        .filter(|&v| v > 0)
}

/// Flops of an `m × k` by `k × n` product accumulated into `C`: `2·m·n·k`.
pub fn gemm_flops(m: usize, n: usize, k: usize) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64
}

#[cfg(test)]
mod tests {
    //! Proves that `gemm_update` subtracts the product from `C`, for square, rectangular and
    //! degenerate (`k = 0`, single row or column) shapes.

    use super::*;
    use crate::kernels::test_support::random_dense;

    #[test]
    fn subtracts_the_product() {
        for (m, n, k) in [
            (1, 1, 1),
            (3, 5, 2),
            (1, 7, 9),
            (9, 1, 4),
            (64, 64, 64),
            (70, 33, 65),
            (4, 4, 0),
        ] {
            let a = Tile::from_col_major(m, k, &random_dense(m, k, 1));
            let b = Tile::from_col_major(k, n, &random_dense(k, n, 2));
            let c0 = Tile::from_col_major(m, n, &random_dense(m, n, 3));
            let mut c = c0.clone();
            gemm_update(&a, &b, &mut c);
            for j in 0..n {
                for i in 0..m {
                    let s: f64 = (0..k)
                        .map(|l| a.as_ref()[(i, l)] * b.as_ref()[(l, j)])
                        .sum();
                    let expected = c0.as_ref()[(i, j)] - s;
                    assert!(
                        (c.as_ref()[(i, j)] - expected).abs() < 1e-13 * (k + 1) as f64,
                        "m={m} n={n} k={k}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "gemm_update")]
    fn shape_mismatch_panics() {
        gemm_update(
            &Tile::zeros(2, 3),
            &Tile::zeros(2, 2),
            &mut Tile::zeros(2, 2),
        );
    }

    #[test]
    fn row_blocks_match_one_call() {
        // Blocked and unblocked products agree to rounding (different faer paths may
        // order the sums differently), for block sizes that do and do not divide m.
        let (m, n, k) = (100, 37, 29);
        let a = Tile::from_col_major(m, k, &random_dense(m, k, 4));
        let b = Tile::from_col_major(k, n, &random_dense(k, n, 5));
        let c0 = Tile::from_col_major(m, n, &random_dense(m, n, 6));
        let mut whole = c0.clone();
        gemm_minus_blocked(whole.as_mut(), a.as_ref(), b.as_ref(), 0);
        for rows in [1, 16, 33, 99, 100, 500] {
            let mut c = c0.clone();
            gemm_minus_blocked(c.as_mut(), a.as_ref(), b.as_ref(), rows);
            let err = c
                .as_slice()
                .iter()
                .zip(whole.as_slice())
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-13, "rows={rows}: {err:e}");
        }
    }

    #[test]
    fn row_block_sizes() {
        let l2 = l2_bytes();
        for (m, k) in [
            (448, 448),
            (512, 512),
            (384, 384),
            (256, 256),
            (8064, 448),
            (5, 3),
        ] {
            let r = gemm_row_block(m, k);
            assert!(
                r >= 1 && (r >= m || r.is_multiple_of(16)),
                "m={m} k={k}: {r}"
            );
            assert!(
                r >= m || r * k * 8 <= l2 / 2 + 16 * k * 8,
                "m={m} k={k}: {r}"
            );
            // Equal blocks: the last one is not a sliver.
            assert!(
                m.div_ceil(r) * r < m + 16 * m.div_ceil(r),
                "m={m} k={k}: {r}"
            );
        }
        assert_eq!(parse_cache_size("2048K"), Some(2 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("4096"), Some(4096));
        assert_eq!(parse_cache_size("x"), None);
    }

    #[test]
    fn flop_count() {
        assert_eq!(gemm_flops(2, 3, 4), 48.0);
    }
}
