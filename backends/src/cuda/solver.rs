//! The LU panel on the GPU: cuSOLVER's `dgetrf` on the panel's tiles.
//!
//! A panel is a column of separate tile buffers; `dgetrf` wants one
//! column-major matrix. So the tiles are gathered into a device scratch
//! matrix (one 2-D async copy per tile on the compute stream), factored
//! there (the pivot search and row interchanges are cuSOLVER's), and
//! scattered back. An H100 factors a tall panel far faster than the host
//! cores, and the panel is on the critical path of the whole LU: with a
//! CPU panel, a GPU-dominated LU waits on the host at every step.
//!
//! cuSOLVER is loaded at run time like the rest; without it
//! [`dgetrf_panel`] fails and the engine runs the CPU body instead.

use std::ffi::c_int;

use cudarc::cusolver::sys as cs;
use cudarc::driver::sys as ds;

use tessera_engine::device::DeviceBuffer;
use tessera_engine::util::lock;

use super::device::{CudaBuffer, CudaDevice};
use super::driver_error;

/// The device's cuSOLVER handle and the panel's scratch buffers (grown on
/// demand, kept between panels).
pub(crate) struct Solver {
    handle: cs::cusolverDnHandle_t,
    /// The gathered `m × n` panel.
    matrix: Option<CudaBuffer>,
    /// `dgetrf`'s workspace.
    work: Option<CudaBuffer>,
    /// `min(m, n)` pivots then `info`, as C ints.
    pivots: Option<CudaBuffer>,
}

// SAFETY: the handle may move between threads; it is used by one thread at
// a time (`CudaDevice::solver` is a Mutex).
unsafe impl Send for Solver {}

impl Drop for Solver {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed only here; an error
        // (a broken context) leaves nothing to release.
        let _ = unsafe { cs::cusolverDnDestroy(self.handle) };
    }
}

/// Why a GPU panel did not produce pivots.
#[derive(Debug)]
pub enum PanelError {
    /// An exact zero pivot in this local column (0-based): the matrix is
    /// singular (LAPACK's `info > 0`). The tiles hold a partial result.
    Singular(usize),
    /// cuSOLVER, the driver or the arguments failed.
    Failed(String),
}

impl From<String> for PanelError {
    fn from(e: String) -> Self {
        PanelError::Failed(e)
    }
}

fn grow(dev: &CudaDevice, slot: &mut Option<CudaBuffer>, bytes: usize) -> Result<u64, String> {
    if slot.as_ref().is_none_or(|b| b.bytes() < bytes) {
        *slot = None; // free first: the old buffer is too small
        *slot = Some(dev.alloc_raw(bytes)?);
    }
    Ok(slot.as_ref().map_or(0, |b| b.ptr))
}

/// Copy a `rows × cols` column-major block between device addresses with
/// leading dimensions `src_ld` and `dst_ld` (in doubles), on `stream`.
///
/// # Safety
/// Both blocks are device memory of the current context, sized as stated.
unsafe fn copy_2d(
    src: u64,
    src_ld: usize,
    dst: u64,
    dst_ld: usize,
    rows: usize,
    cols: usize,
    stream: ds::CUstream,
) -> Result<(), String> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let p = ds::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_ld * 8,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_ld * 8,
        WidthInBytes: rows * 8,
        Height: cols,
    };
    // SAFETY: the caller's guarantee; `p` outlives the call (the driver
    // reads the descriptor before returning).
    unsafe { ds::cuMemcpy2DAsync_v2(&p, stream) }
        .result()
        .map_err(|e| format!("cuMemcpy2DAsync: {}", driver_error(e)))
}

/// Factor the panel `tiles` (device address, rows; column-major, leading
/// dimension = rows, all `cols` wide, top to bottom) in place with partial
/// pivoting, as `tessera_tasks::kernels::getrf_panel` does on the host.
/// Returns the 0-based local pivots (`min(m, cols)` of them, dgetrf's
/// `IPIV` minus one). Synchronises the compute stream.
///
/// # Safety
/// The tiles are live device buffers of this device holding the stated
/// blocks, used by no other stream until this returns.
pub unsafe fn dgetrf_panel(
    dev: &CudaDevice,
    tiles: &[(u64, usize)],
    cols: usize,
) -> Result<Vec<usize>, PanelError> {
    let m: usize = tiles.iter().map(|t| t.1).sum();
    let k = m.min(cols);
    if k == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: only tries to dlopen the library.
    if !unsafe { cs::is_culib_present() } {
        return Err(PanelError::Failed(
            "cuSOLVER not found (libcusolver): the panel runs on the CPU".into(),
        ));
    }
    let int = |what: &str, v: usize| {
        c_int::try_from(v).map_err(|_| format!("dgetrf_panel: {what} = {v} does not fit an int"))
    };
    let (mi, ni) = (int("m", m)?, int("n", cols)?);
    dev.bind()?;
    let stream = dev.stream().cu_stream();
    let mut guard = lock(&dev.solver);
    if guard.is_none() {
        let mut handle = std::ptr::null_mut();
        // SAFETY: writes a new handle into `handle`.
        unsafe { cs::cusolverDnCreate(&mut handle) }
            .result()
            .map_err(|e| format!("cusolverDnCreate: {:?}", e.0))?;
        let solver = Solver {
            handle,
            matrix: None,
            work: None,
            pivots: None,
        };
        // SAFETY: the handle is live; the compute stream outlives it (both
        // belong to `dev`, the solver is dropped first).
        unsafe { cs::cusolverDnSetStream(solver.handle, stream as cs::cudaStream_t) }
            .result()
            .map_err(|e| format!("cusolverDnSetStream: {:?}", e.0))?;
        *guard = Some(solver);
    }
    let s = guard.as_mut().expect("created above");
    let a = grow(dev, &mut s.matrix, m * cols * 8)?;
    let piv = grow(dev, &mut s.pivots, (k + 1) * std::mem::size_of::<c_int>())?;
    let info = piv + (k * std::mem::size_of::<c_int>()) as u64;

    // Gather.
    let mut row = 0;
    for &(t, rows) in tiles {
        // SAFETY: tile `t` is `rows × cols` (caller); the scratch is `m × cols`.
        unsafe { copy_2d(t, rows, a + (row * 8) as u64, m, rows, cols, stream) }?;
        row += rows;
    }
    let mut lwork: c_int = 0;
    // SAFETY: the handle is live; `a` is an m × n matrix with lda = m.
    unsafe { cs::cusolverDnDgetrf_bufferSize(s.handle, mi, ni, a as *mut f64, mi, &mut lwork) }
        .result()
        .map_err(|e| format!("cusolverDnDgetrf_bufferSize: {:?}", e.0))?;
    let work = grow(dev, &mut s.work, (lwork.max(1) as usize) * 8)?;
    // SAFETY: every buffer is sized as cuSOLVER asked; all on the compute stream.
    unsafe {
        cs::cusolverDnDgetrf(
            s.handle,
            mi,
            ni,
            a as *mut f64,
            mi,
            work as *mut f64,
            piv as *mut c_int,
            info as *mut c_int,
        )
    }
    .result()
    .map_err(|e| format!("cusolverDnDgetrf ({m}x{cols}): {:?}", e.0))?;
    // Scatter back.
    let mut row = 0;
    for &(t, rows) in tiles {
        // SAFETY: as for the gather.
        unsafe { copy_2d(a + (row * 8) as u64, m, t, rows, rows, cols, stream) }?;
        row += rows;
    }
    dev.synchronize()?;
    let mut out = vec![0 as c_int; k + 1];
    dev.download_ptr(piv, bytemuck_ints(&mut out))?;
    drop(guard);
    let info = out[k];
    if info > 0 {
        return Err(PanelError::Singular(info as usize - 1));
    }
    if info < 0 {
        return Err(PanelError::Failed(format!(
            "cusolverDnDgetrf: argument {} is wrong",
            -info
        )));
    }
    Ok(out[..k].iter().map(|&p| p as usize - 1).collect())
}

fn bytemuck_ints(v: &mut [c_int]) -> &mut [u8] {
    // SAFETY: c_int has no padding and every byte pattern is valid; the
    // byte view covers exactly the slice.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}
