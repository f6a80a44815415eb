//! Sequential in-place tile kernels for LU with partial pivoting, one file per operation.
//!
//! These are the bodies that codelets wrap: each works on the tiles a task is handed, calls
//! faer sequentially (`Par::Seq`: the runtime owns the parallelism), and comes with a flop
//! count for cost hints. `spmv` and `blas1` hold the sparse and vector kernels of the
//! iterative solvers. `gemm_update`, `trsm_unit_lower` and `laswp` allocate nothing.
//! [`TeamPanel`] is the panel for a team task: the members of the team (the runtime's
//! workers) share its phases, each member's part sequential.

pub mod blas1;
mod gemm;
mod getrf_panel;
mod laswp;
pub mod spmv;
mod trsm;
mod update;

pub use gemm::{gemm_flops, gemm_minus_blocked, gemm_row_block, gemm_update, l2_bytes};
pub use getrf_panel::{
    getrf_panel, getrf_panel_dist, getrf_panel_faer, getrf_panel_flops, ColumnExchange,
    DistPanelError, DistTeamPanel, SingularColumn, TeamPanel, LEAF,
};
pub use laswp::{laswp, laswp_bytes, laswp_flops};
pub use spmv::{
    dot_pair, spmv_bytes, spmv_bytes_saved_by_compact, spmv_csr, spmv_csr16_dot_unchecked,
    spmv_csr16_unchecked, spmv_csr_dot, spmv_csr_dot_unchecked, spmv_csr_split, spmv_csr_unchecked,
    spmv_flops,
};
pub use trsm::{trsm_flops, trsm_unit_lower};
pub use update::{gemm_rows, update_column};

#[cfg(test)]
pub(crate) mod test_support {
    //! Helpers shared by the kernel tests: a seeded generator, dense ↔ tile conversions and an
    //! unblocked reference LU (textbook `dgetf2`, used only here).

    use crate::tile::Tile;

    /// SplitMix64: small, seeded, good enough for test matrices.
    pub(crate) struct SplitMix64(pub(crate) u64);

    impl SplitMix64 {
        pub(crate) fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in [−0.5, 0.5).
        pub(crate) fn next_f64(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5
        }
    }

    /// An `m × n` column-major matrix of uniform entries in [−0.5, 0.5).
    pub(crate) fn random_dense(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        (0..m * n).map(|_| rng.next_f64()).collect()
    }

    /// Scales each row of the column-major `m × w` matrix `a` by 10^k, k drawn from `rng` in
    /// −12..=12: pivots that follow the scaling, across tiles.
    pub(crate) fn grade_rows(a: &mut [f64], m: usize, w: usize, rng: &mut SplitMix64) {
        for i in 0..m {
            let k = (rng.next_u64() % 25) as i32 - 12;
            for j in 0..w {
                a[i + j * m] *= 10f64.powi(k);
            }
        }
    }

    /// An `m × w` column-major matrix of rank `r` plus noise at 1e-14: past column `r` the
    /// pivots are chosen among rounding errors, where only the same operations give the same
    /// choice.
    pub(crate) fn nearly_singular(m: usize, w: usize, r: usize) -> Vec<f64> {
        let u = random_dense(m, r, 1);
        let v = random_dense(r, w, 2);
        let noise = random_dense(m, w, 3);
        let mut a = vec![0.0; m * w];
        for j in 0..w {
            for i in 0..m {
                let s: f64 = (0..r).map(|l| u[i + l * m] * v[l + j * r]).sum();
                a[i + j * m] = s + 1e-14 * noise[i + j * m];
            }
        }
        a
    }

    /// Row counts of `m` rows cut into tiles of `nb` (the last one shorter).
    pub(crate) fn split_rows(m: usize, nb: usize) -> Vec<usize> {
        if m == 0 {
            return vec![0];
        }
        (0..m).step_by(nb).map(|start| nb.min(m - start)).collect()
    }

    /// Cuts a column-major `m × n` matrix into a column of tiles with the given row counts.
    pub(crate) fn tiles_of(a: &[f64], m: usize, n: usize, row_splits: &[usize]) -> Vec<Tile> {
        assert_eq!(row_splits.iter().sum::<usize>(), m);
        let mut start = 0;
        row_splits
            .iter()
            .map(|&r| {
                let mut t = Tile::zeros(r, n);
                for j in 0..n {
                    t.col_mut(j)
                        .copy_from_slice(&a[start + j * m..start + r + j * m]);
                }
                start += r;
                t
            })
            .collect()
    }

    /// The column-major matrix that a column of tiles with `n` columns holds.
    pub(crate) fn dense_of(tiles: &[Tile], n: usize) -> Vec<f64> {
        let m: usize = tiles.iter().map(Tile::rows).sum();
        let mut a = vec![0.0; m * n];
        let mut start = 0;
        for t in tiles {
            for j in 0..n {
                a[start + j * m..start + t.rows() + j * m].copy_from_slice(t.col(j));
            }
            start += t.rows();
        }
        a
    }

    /// Unblocked right-looking LU with partial pivoting (LAPACK `dgetf2`), column-major `m × n`.
    /// Returns 0-based `ipiv`, or the first column with an exact zero pivot.
    pub(crate) fn reference_getf2(a: &mut [f64], m: usize, n: usize) -> Result<Vec<usize>, usize> {
        let mut ipiv = Vec::new();
        for j in 0..m.min(n) {
            let mut p = j;
            for i in j + 1..m {
                if a[i + j * m].abs() > a[p + j * m].abs() {
                    p = i;
                }
            }
            ipiv.push(p);
            if a[p + j * m] == 0.0 {
                return Err(j);
            }
            for c in 0..n {
                a.swap(j + c * m, p + c * m);
            }
            let inv = 1.0 / a[j + j * m];
            for i in j + 1..m {
                a[i + j * m] *= inv;
            }
            for c in j + 1..n {
                let u = a[j + c * m];
                for i in j + 1..m {
                    a[i + c * m] -= a[i + j * m] * u;
                }
            }
        }
        Ok(ipiv)
    }
}

#[cfg(test)]
mod no_alloc {
    //! Proves that `gemm_update`, `trsm_unit_lower` and `laswp` allocate nothing once warm, on
    //! HPL-sized tiles, by counting this thread's allocations.

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use super::*;
    use crate::kernels::test_support::random_dense;
    use crate::tile::Tile;

    thread_local! {
        // `const` init and no destructor: reading it from the allocator cannot allocate.
        static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    }

    struct CountingAlloc;

    // SAFETY: forwards every call to `System` unchanged; the counter is thread-local, so
    // tests running in parallel do not see each other's allocations.
    unsafe impl GlobalAlloc for CountingAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|c| c.set(c.get() + 1));
            // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|c| c.set(c.get() + 1));
            // SAFETY: as for `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCATIONS.with(|c| c.set(c.get() + 1));
            // SAFETY: as for `alloc`; `ptr` came from this allocator, hence from `System`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from this allocator, hence from `System`, with `layout`.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    fn allocations_during(f: impl FnOnce()) -> usize {
        let before = ALLOCATIONS.with(Cell::get);
        f();
        ALLOCATIONS.with(Cell::get) - before
    }

    #[test]
    fn hot_kernels_do_not_allocate() {
        assert_eq!(
            allocations_during(|| drop(std::hint::black_box(vec![0u8; 16]))),
            1,
            "the counter counts"
        );
        for nb in [64, 256] {
            let a = Tile::from_col_major(nb, nb, &random_dense(nb, nb, 1));
            let b = Tile::from_col_major(nb, nb, &random_dense(nb, nb, 2));
            let mut c = Tile::from_col_major(nb, nb, &random_dense(nb, nb, 3));
            let mut d = Tile::from_col_major(nb, nb, &random_dense(nb, nb, 4));
            let mut e = Tile::from_col_major(nb, nb, &random_dense(nb, nb, 5));
            // Swaps reaching into the second tile of the column `[c, e]`.
            let ipiv: Vec<usize> = (0..nb).map(|i| i + (i * 7 + 3) % (2 * nb - i)).collect();
            // Warm up: first calls may set up per-thread caches (CPU feature detection).
            gemm_update(&a, &b, &mut c);
            trsm_unit_lower(&a, &mut d);
            assert_eq!(
                allocations_during(|| gemm_update(&a, &b, &mut c)),
                0,
                "gemm_update nb={nb}"
            );
            assert_eq!(
                allocations_during(|| trsm_unit_lower(&a, &mut d)),
                0,
                "trsm_unit_lower nb={nb}"
            );
            let mut col = [&mut c, &mut e];
            assert_eq!(
                allocations_during(|| laswp(&mut col, &ipiv)),
                0,
                "laswp nb={nb}"
            );
        }
    }
}
