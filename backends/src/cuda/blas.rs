//! cuBLAS wrappers for LU's tile updates: all enqueue on the device's compute
//! stream, column-major, with device addresses; errors name the cuBLAS status.

use std::ffi::c_int;
use std::sync::Arc;

use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{
    self, cublasDiagType_t, cublasFillMode_t, cublasOperation_t, cublasSideMode_t,
};
use cudarc::driver::{CudaContext, CudaStream};
use tessera_engine::util::lock;

use super::{driver_error, CudaDevice};

/// A cuBLAS handle bound to one stream.
///
/// Ours rather than cudarc's `CudaBlas`, whose `Drop` unwraps the result of
/// `cublasDestroy` (a panic in drop if the context has a sticky error).
pub(crate) struct BlasHandle {
    handle: sys::cublasHandle_t,
    ctx: Arc<CudaContext>,
}

// SAFETY: a cuBLAS handle may move between threads; it is used by one
// thread at a time (`CudaDevice::blas` is a Mutex).
unsafe impl Send for BlasHandle {}

impl BlasHandle {
    /// The raw handle, for calls this module does not wrap.
    pub(crate) fn raw(&self) -> sys::cublasHandle_t {
        self.handle
    }

    /// Creates a handle in `stream`'s context and binds it to `stream`.
    pub(crate) fn new(stream: &CudaStream) -> Result<Self, String> {
        let ctx = stream.context().clone();
        ctx.bind_to_thread().map_err(driver_error)?;
        let handle = cublas::create_handle().map_err(|e| format!("cublasCreate: {:?}", e.0))?;
        let me = BlasHandle { handle, ctx };
        // SAFETY: `handle` is live; the stream outlives the handle (both are
        // fields of CudaDevice, the handle dropped first).
        unsafe { cublas::set_stream(me.handle, stream.cu_stream() as _) }
            .map_err(|e| format!("cublasSetStream: {:?}", e.0))?;
        Ok(me)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle is live and destroyed only here. An error (a
        // broken context) is ignored: there is nothing left to release.
        let _ = unsafe { cublas::destroy_handle(self.handle) };
    }
}

/// `v` as a cuBLAS int, or an error naming `what`.
fn int(what: &str, v: usize) -> Result<c_int, String> {
    c_int::try_from(v).map_err(|_| format!("{what} = {v} does not fit cuBLAS's 32-bit int"))
}

/// Checks `ld >= max(1, rows)`.
fn check_ld(op: &str, name: &str, ld: usize, rows: usize) -> Result<(), String> {
    if ld < rows.max(1) {
        return Err(format!(
            "{op}: {name} = {ld} is below the {rows} rows it must span"
        ));
    }
    Ok(())
}

/// C := C − A·B, with A m×k (leading dimension `lda`), B k×n (`ldb`), C m×n
/// (`ldc`), via `cublasDgemm_v2` on the compute stream.
///
/// # Safety
/// `a`, `b`, `c` are live device allocations of this device holding the
/// stated matrices (column-major, with their leading dimensions); `c` does
/// not overlap `a` or `b`; no other stream touches them until the compute
/// stream has passed this call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dgemm_minus(
    dev: &CudaDevice,
    m: usize,
    n: usize,
    k: usize,
    a: u64,
    lda: usize,
    b: u64,
    ldb: usize,
    c: u64,
    ldc: usize,
) -> Result<(), String> {
    const OP: &str = "dgemm_minus";
    check_ld(OP, "lda", lda, m)?;
    check_ld(OP, "ldb", ldb, k)?;
    check_ld(OP, "ldc", ldc, m)?;
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    dev.bind()?;
    let blas = lock(&dev.blas);
    // SAFETY: the handle is used by this thread only (lock held); the rest
    // is the caller's guarantee.
    unsafe { dgemm_minus_with(&blas, m, n, k, a, lda, b, ldb, c, ldc) }
}

/// [`dgemm_minus`] through `blas` (on the stream it is bound to), the
/// context already current.
///
/// # Safety
/// As [`dgemm_minus`], for `blas`'s stream; `blas` is used by no other
/// thread during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn dgemm_minus_with(
    blas: &BlasHandle,
    m: usize,
    n: usize,
    k: usize,
    a: u64,
    lda: usize,
    b: u64,
    ldb: usize,
    c: u64,
    ldc: usize,
) -> Result<(), String> {
    const OP: &str = "dgemm_minus";
    check_ld(OP, "lda", lda, m)?;
    check_ld(OP, "ldb", ldb, k)?;
    check_ld(OP, "ldc", ldc, m)?;
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let (mi, ni, ki) = (int("m", m)?, int("n", n)?, int("k", k)?);
    let (ldai, ldbi, ldci) = (int("lda", lda)?, int("ldb", ldb)?, int("ldc", ldc)?);
    let (alpha, beta) = (-1.0f64, 1.0f64);
    // SAFETY: the handle is live and used by this thread only (caller);
    // sizes and leading dimensions were checked above; the addresses are
    // the caller's guarantee; alpha and beta are host scalars (the handle's
    // default pointer mode) read before the call returns.
    unsafe {
        sys::cublasDgemm_v2(
            blas.handle,
            cublasOperation_t::CUBLAS_OP_N,
            cublasOperation_t::CUBLAS_OP_N,
            mi,
            ni,
            ki,
            &alpha,
            a as *const f64,
            ldai,
            b as *const f64,
            ldbi,
            &beta,
            c as *mut f64,
            ldci,
        )
    }
    .result()
    .map_err(|e| format!("{OP} ({m}x{n}x{k}): cublasDgemm_v2: {:?}", e.0))
}

/// B := L⁻¹·B, with L unit lower triangular m×m (`ldl`, its strict upper
/// part and diagonal not read) and B m×n (`ldb`), via `cublasDtrsm_v2` on
/// the compute stream.
///
/// # Safety
/// `l` and `b` are live device allocations of this device holding the
/// stated matrices; they do not overlap; no other stream touches them until
/// the compute stream has passed this call.
pub unsafe fn dtrsm_unit_lower_left(
    dev: &CudaDevice,
    m: usize,
    n: usize,
    l: u64,
    ldl: usize,
    b: u64,
    ldb: usize,
) -> Result<(), String> {
    const OP: &str = "dtrsm_unit_lower_left";
    check_ld(OP, "ldl", ldl, m)?;
    check_ld(OP, "ldb", ldb, m)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    dev.bind()?;
    let blas = lock(&dev.blas);
    // SAFETY: as in dgemm_minus.
    unsafe { dtrsm_unit_lower_left_with(&blas, m, n, l, ldl, b, ldb) }
}

/// [`dtrsm_unit_lower_left`] through `blas`, the context already current.
///
/// # Safety
/// As [`dtrsm_unit_lower_left`], for `blas`'s stream; `blas` is used by no
/// other thread during the call.
pub(crate) unsafe fn dtrsm_unit_lower_left_with(
    blas: &BlasHandle,
    m: usize,
    n: usize,
    l: u64,
    ldl: usize,
    b: u64,
    ldb: usize,
) -> Result<(), String> {
    const OP: &str = "dtrsm_unit_lower_left";
    check_ld(OP, "ldl", ldl, m)?;
    check_ld(OP, "ldb", ldb, m)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (mi, ni) = (int("m", m)?, int("n", n)?);
    let (ldli, ldbi) = (int("ldl", ldl)?, int("ldb", ldb)?);
    let alpha = 1.0f64;
    // SAFETY: as in dgemm_minus_with.
    unsafe {
        sys::cublasDtrsm_v2(
            blas.handle,
            cublasSideMode_t::CUBLAS_SIDE_LEFT,
            cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            cublasOperation_t::CUBLAS_OP_N,
            cublasDiagType_t::CUBLAS_DIAG_UNIT,
            mi,
            ni,
            &alpha,
            l as *const f64,
            ldli,
            b as *mut f64,
            ldbi,
        )
    }
    .result()
    .map_err(|e| format!("{OP} ({m}x{n}): cublasDtrsm_v2: {:?}", e.0))
}

#[cfg(test)]
mod tests {
    //! Argument checks, which run before any device call.
    use super::*;

    #[test]
    fn leading_dimensions_are_checked() {
        assert!(check_ld("op", "lda", 5, 5).is_ok());
        assert!(check_ld("op", "lda", 1, 0).is_ok());
        assert!(check_ld("op", "lda", 0, 0).is_err());
        let e = check_ld("op", "ldb", 4, 5).unwrap_err();
        assert!(e.contains("ldb = 4"), "{e}");
        assert!(int("m", 1 << 40).is_err());
    }
}
