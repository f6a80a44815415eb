//! The solve `A·x = b` from the factors a [`ResidentLu`] leaves on the device, on its update
//! stream: the host never reads the factors. It runs after [`ResidentLu::finish`], in the
//! factorisation's order (panel `k`'s interchanges applied to `x` at step `k`).

use std::ffi::c_int;

use cudarc::driver::{result, LaunchConfig, PushKernelArg};

use super::{int, ResidentLu};
use crate::cuda::driver_error;

impl ResidentLu<'_> {
    /// Solves `A·x = b` from the factors still on the device (HPL's layout:
    /// panel `k`'s interchanges applied to `x` at step `k`), on the update
    /// stream, after [`ResidentLu::finish`]: the host never reads the
    /// factors (solving with their `n²` doubles on one host core takes
    /// longer than the factorisation). Blocked as the factorisation: per panel an
    /// interchange of `x`, a triangular solve and a matrix-vector product.
    pub fn solve(&self, b: &[f64]) -> Result<Vec<f64>, String> {
        self.solve_on_device(b, self.n)
    }

    /// [`ResidentLu::solve`] over the leading `n_used × n_used` part (the
    /// warm-up's corner; `n_used = n` for a real solve).
    pub(super) fn solve_on_device(&self, b: &[f64], n_used: usize) -> Result<Vec<f64>, String> {
        use cudarc::cublas::sys::{
            cublasDiagType_t as Diag, cublasFillMode_t as Fill, cublasOperation_t as Trans,
        };
        if b.len() != self.n {
            return Err(format!(
                "resident LU: solve: b has {} entries for n = {}",
                b.len(),
                self.n
            ));
        }
        let n = n_used.min(self.n);
        if n == 0 {
            return Ok(Vec::new());
        }
        self.dev.bind()?;
        let err = |what: &str, e| format!("resident LU: solve: {what}: {}", driver_error(e));
        let x = self.dev.alloc_raw(self.n * 8)?;
        // SAFETY: `x` holds self.n doubles; the copy is synchronous.
        unsafe { result::memcpy_htod_sync(x.ptr, b) }.map_err(|e| err("uploading b", e))?;
        let s = 2;
        let blas = self.blas[self.slot(s)?].raw();
        let stream = self.stream(s)?;
        let xs = |row: usize| x.ptr + 8 * row as u64;
        let (ni, one) = (int("n", self.n)?, 1 as c_int);
        let (minus, plus) = (-1.0f64, 1.0f64);
        let status = |what: &str, st: cudarc::cublas::sys::cublasStatus_t| {
            st.result()
                .map_err(|e| format!("resident LU: solve: {what}: {:?}", e.0))
        };
        let panels: Vec<(usize, usize)> = (0..n.div_ceil(self.nb))
            .map(|k| (k * self.nb, self.nb.min(n - k * self.nb)))
            .collect();
        for &(r0, w) in &panels {
            let cfg = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (32, 1, 1),
                shared_mem_bytes: 0,
            };
            let (a, lda, ncols, piv, npiv) = (
                xs(r0),
                n as u64,
                1u64,
                self.ipiv.ptr + 4 * r0 as u64,
                w as u64,
            );
            // SAFETY: `laswp_ld` over one column (x from row r0) with the
            // panel's own pivots, which stay within rows r0..n.
            unsafe {
                stream
                    .launch_builder(&self.kernels.laswp_ld)
                    .arg(&a)
                    .arg(&lda)
                    .arg(&ncols)
                    .arg(&piv)
                    .arg(&npiv)
                    .launch(cfg)
            }
            .map_err(|e| err("launching laswp_ld", e))?;
            let wi = int("w", w)?;
            // SAFETY: L(r0, r0) is w × w inside the matrix (lda n); x holds
            // rows r0..r0 + w; all on the update stream, in order.
            status("dtrsv", unsafe {
                cudarc::cublas::sys::cublasDtrsv_v2(
                    blas,
                    Fill::CUBLAS_FILL_MODE_LOWER,
                    Trans::CUBLAS_OP_N,
                    Diag::CUBLAS_DIAG_UNIT,
                    wi,
                    self.at(r0, r0) as *const f64,
                    ni,
                    xs(r0) as *mut f64,
                    one,
                )
            })?;
            let m = n - r0 - w;
            if m > 0 {
                // SAFETY: A(r0 + w.., r0..r0 + w) is m × w inside the matrix;
                // x's rows r0.. and r0 + w.. do not overlap.
                status("dgemv", unsafe {
                    cudarc::cublas::sys::cublasDgemv_v2(
                        blas,
                        Trans::CUBLAS_OP_N,
                        int("m", m)?,
                        wi,
                        &minus,
                        self.at(r0 + w, r0) as *const f64,
                        ni,
                        xs(r0) as *const f64,
                        one,
                        &plus,
                        xs(r0 + w) as *mut f64,
                        one,
                    )
                })?;
            }
        }
        for &(r0, w) in panels.iter().rev() {
            let wi = int("w", w)?;
            // SAFETY: as above, U(r0, r0) on and above the diagonal.
            status("dtrsv", unsafe {
                cudarc::cublas::sys::cublasDtrsv_v2(
                    blas,
                    Fill::CUBLAS_FILL_MODE_UPPER,
                    Trans::CUBLAS_OP_N,
                    Diag::CUBLAS_DIAG_NON_UNIT,
                    wi,
                    self.at(r0, r0) as *const f64,
                    ni,
                    xs(r0) as *mut f64,
                    one,
                )
            })?;
            if r0 > 0 {
                // SAFETY: A(0..r0, r0..r0 + w) inside the matrix; x's rows
                // ..r0 and r0.. do not overlap.
                status("dgemv", unsafe {
                    cudarc::cublas::sys::cublasDgemv_v2(
                        blas,
                        Trans::CUBLAS_OP_N,
                        int("r0", r0)?,
                        wi,
                        &minus,
                        self.at(0, r0) as *const f64,
                        ni,
                        xs(r0) as *const f64,
                        one,
                        &plus,
                        x.ptr as *mut f64,
                        one,
                    )
                })?;
            }
        }
        stream.synchronize().map_err(|e| err("synchronising", e))?;
        let mut out = vec![0.0f64; self.n];
        // SAFETY: `x` holds self.n doubles; the stream is idle.
        unsafe { result::memcpy_dtoh_sync(&mut out, x.ptr) }
            .map_err(|e| err("downloading x", e))?;
        Ok(out)
    }
}
