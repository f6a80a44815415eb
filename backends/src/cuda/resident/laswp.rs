//! The resident LU's own kernels as CUDA C source (row interchanges: `laswp_perm`,
//! `laswp_apply`, and `laswp_ld` for the solve), and the host transcription of the two
//! that interchange a matrix's rows, tested against LAPACK's swaps: the moves they make must
//! equal LAPACK's row swaps in order.

/// CUDA C source of the resident LU's kernels, compiled (NVRTC) when a
/// resident LU is set up, apart from the backend's other kernels: a fault
/// here cannot take the tile path down with it.
///
/// Row interchanges come in two steps. `laswp_perm` runs once per panel, on
/// one block: it applies the panel's pivots, in LAPACK order, to the row
/// *indices* (the top `npiv` rows and the distinct rows the pivots name
/// below them, staged in shared memory) and writes the net moves (`dst`
/// row gets `src` row's values). `laswp_apply` then moves the values, one
/// block per column: all sources into shared memory, then all
/// destinations; the rows of a column are read together and written
/// together. `laswp_ld`, one thread per column running the pivot chain
/// (one scattered row at a time in every column: 171 GB/s measured on an
/// H200), serves only the one-column solve.
pub const SOURCE: &str = r#"
typedef unsigned long long u64;

// One thread per column applies the npiv swaps in order (LAPACK dlaswp);
// pivots 1-based, relative to row 0 of `a`. Used for the right-hand side.
extern "C" __global__ void laswp_ld(double* a, u64 lda, u64 ncols,
                                    const int* __restrict__ ipiv, u64 npiv) {
    u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (j >= ncols) return;
    double* col = a + j * lda;
    for (u64 i = 0; i < npiv; i++) {
        u64 p = (u64)(ipiv[i] - 1);
        if (p != i) { double t = col[i]; col[i] = col[p]; col[p] = t; }
    }
}

// The net moves of a panel's pivots. rec[0] = number of moves m; rec[1..]
// = m destination rows, rec[1 + 2 nb ..] = m source rows (relative to the
// panel's first row). Shared memory: 3 npiv ints. One block.
extern "C" __global__ void laswp_perm(const int* __restrict__ ipiv, u64 npiv,
                                      int* rec, u64 nb) {
    extern __shared__ int perm_smem[];
    int* slot = perm_smem;          // pivot i's low slot (first pivot naming its row), or -1
    int* top = perm_smem + npiv;    // original row now at top position i
    int* low = perm_smem + 2 * npiv; // original row now at row ipiv[s] - 1, for slots s
    for (u64 i = threadIdx.x; i < npiv; i += blockDim.x) {
        int p = ipiv[i] - 1;
        int s = -1;
        if ((u64)p >= npiv) {
            s = (int)i;
            for (u64 j = 0; j < i; j++)
                if (ipiv[j] - 1 == p) { s = (int)j; break; }
        }
        slot[i] = s;
        top[i] = (int)i;
        low[i] = p;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (u64 i = 0; i < npiv; i++) {
        int p = ipiv[i] - 1;
        if ((u64)p == i) continue;
        int* q = (u64)p < npiv ? &top[p] : &low[slot[i]];
        int t = top[i]; top[i] = *q; *q = t;
    }
    int m = 0;
    int* dst = rec + 1;
    int* src = rec + 1 + 2 * nb;
    for (u64 i = 0; i < npiv; i++)
        if (top[i] != (int)i) { dst[m] = (int)i; src[m] = top[i]; m++; }
    for (u64 i = 0; i < npiv; i++)
        if (slot[i] == (int)i && low[i] != ipiv[i] - 1) { dst[m] = ipiv[i] - 1; src[m] = low[i]; m++; }
    rec[0] = m;
}

// Apply the moves of `rec` to columns 0..ncols of `a` (from the panel's
// first row). Shared memory: 2 nb doubles (m <= 2 npiv <= 2 nb).
extern "C" __global__ void laswp_apply(double* a, u64 lda, u64 ncols,
                                       const int* __restrict__ rec, u64 nb) {
    extern __shared__ double vals[];
    int m = rec[0];
    const int* dst = rec + 1;
    const int* src = rec + 1 + 2 * nb;
    for (u64 c = blockIdx.x; c < ncols; c += gridDim.x) {
        double* col = a + c * lda;
        for (int i = threadIdx.x; i < m; i += blockDim.x) vals[i] = col[src[i]];
        __syncthreads();
        for (int i = threadIdx.x; i < m; i += blockDim.x) col[dst[i]] = vals[i];
        __syncthreads();
    }
}
"#;

#[cfg(test)]
mod kernel_tests {
    /// The kernels compile for Hopper where NVRTC is installed (a machine
    /// without it, such as CI's, skips this: the GPU run compiles them at
    /// set-up and says so if they do not).
    #[test]
    fn the_kernels_compile_where_nvrtc_is_present() {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: no libnvrtc on this machine");
            return;
        }
        for cc in [(8, 0), (9, 0)] {
            crate::cuda::kernels::compile_cubin(super::SOURCE, cc)
                .unwrap_or_else(|e| panic!("sm_{}{}: {e}", cc.0, cc.1));
            crate::cuda::kernels::compile_cubin(crate::cuda::kernels::SOURCE_FOR_TESTS, cc)
                .unwrap_or_else(|e| panic!("sm_{}{}: {e}", cc.0, cc.1));
        }
    }
}

#[cfg(test)]
mod perm_tests {
    /// `laswp_perm` and `laswp_apply` transcribed line for line (the
    /// kernels themselves run only on a GPU): the moves they make must
    /// equal LAPACK's swaps in order, duplicates and chains included.
    fn moves(ipiv: &[i32]) -> Vec<(usize, usize)> {
        let npiv = ipiv.len();
        let mut slot = vec![-1i32; npiv];
        let mut top: Vec<i32> = (0..npiv as i32).collect();
        let mut low = vec![0i32; npiv];
        for i in 0..npiv {
            let p = ipiv[i] - 1;
            if p as usize >= npiv {
                slot[i] = (0..i).find(|&j| ipiv[j] - 1 == p).unwrap_or(i) as i32;
            }
            low[i] = p;
        }
        for i in 0..npiv {
            let p = (ipiv[i] - 1) as usize;
            if p == i {
                continue;
            }
            if p < npiv {
                top.swap(i, p);
            } else {
                let s = slot[i] as usize;
                std::mem::swap(&mut top[i], &mut low[s]);
            }
        }
        let mut out = Vec::new();
        for (i, &t) in top.iter().enumerate() {
            if t != i as i32 {
                out.push((i, t as usize));
            }
        }
        for i in 0..npiv {
            if slot[i] == i as i32 && low[i] != ipiv[i] - 1 {
                out.push(((ipiv[i] - 1) as usize, low[i] as usize));
            }
        }
        out
    }

    #[test]
    fn the_moves_equal_lapacks_swaps() {
        let mut seed = 12345u64;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for case in 0..400 {
            let (npiv, m) = (1 + next(40), 41 + next(60));
            // Pivot i names a row >= i (LAPACK's partial pivoting), often
            // the same low row twice, sometimes itself.
            let ipiv: Vec<i32> = (0..npiv)
                .map(|i| match next(4) {
                    0 => i as i32 + 1,
                    1 => (npiv + next(3)) as i32 + 1,
                    _ => (i + next(m - i)) as i32 + 1,
                })
                .collect();
            let mut want: Vec<usize> = (0..m).collect();
            for (i, &p) in ipiv.iter().enumerate() {
                want.swap(i, (p - 1) as usize);
            }
            let mut got: Vec<usize> = (0..m).collect();
            let mv = moves(&ipiv);
            assert!(mv.len() <= 2 * npiv, "case {case}");
            let vals: Vec<usize> = mv.iter().map(|&(_, s)| got[s]).collect();
            for (&(d, _), v) in mv.iter().zip(vals) {
                got[d] = v;
            }
            assert_eq!(got, want, "case {case}: ipiv {ipiv:?}");
        }
    }
}
