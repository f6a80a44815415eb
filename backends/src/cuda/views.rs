//! Safe, typed entry points for device bodies: each operation takes the
//! engine's device views of a task's data ([`DevSlice`], [`DevSliceMut`]),
//! checks that they belong to this GPU and are large enough for the stated
//! shapes, then calls the raw cuBLAS / cuSOLVER / NVRTC routine. Codelets
//! (`tessera-tasks`) call these; the unsafe address arithmetic stays here.

use tessera_engine::device::{DevSlice, DevSliceMut, DeviceKey};

use super::solver::PanelError;
use super::CudaDevice;

fn mine(dev: &CudaDevice, key: DeviceKey, what: &str) -> Result<(), String> {
    if key != DeviceKey::of(dev) {
        return Err(format!("{what}: a view of another device's memory"));
    }
    Ok(())
}

fn at_least(what: &str, len: usize, need: usize) -> Result<(), String> {
    if len < need {
        return Err(format!("{what}: {len} elements, {need} needed"));
    }
    Ok(())
}

/// `C := C − A·B`, column-major with leading dimension = rows (A m×k, B k×n,
/// C m×n).
pub fn gemm_minus(
    dev: &CudaDevice,
    (m, n, k): (usize, usize, usize),
    a: DevSlice<'_, f64>,
    b: DevSlice<'_, f64>,
    c: DevSliceMut<'_, f64>,
) -> Result<(), String> {
    for (what, key, len, need) in [
        ("gemm A", a.device(), a.len(), m * k),
        ("gemm B", b.device(), b.len(), k * n),
        ("gemm C", c.device(), c.len(), m * n),
    ] {
        mine(dev, key, what)?;
        at_least(what, len, need)?;
    }
    // SAFETY: the three views are live buffers of this device (checked),
    // pinned by the running task, with the stated sizes (checked); C is a
    // writable view, hence distinct from A and B.
    unsafe {
        super::blas::dgemm_minus(
            dev,
            m,
            n,
            k,
            a.ptr(),
            m.max(1),
            b.ptr(),
            k.max(1),
            c.ptr(),
            m.max(1),
        )
    }
}

/// `B := L⁻¹·B` with `L` the unit lower triangle of the m×m block `l`, B m×n.
pub fn trsm_unit_lower(
    dev: &CudaDevice,
    (m, n): (usize, usize),
    l: DevSlice<'_, f64>,
    b: DevSliceMut<'_, f64>,
) -> Result<(), String> {
    mine(dev, l.device(), "trsm L")?;
    mine(dev, b.device(), "trsm B")?;
    at_least("trsm L", l.len(), m * m)?;
    at_least("trsm B", b.len(), m * n)?;
    // SAFETY: as in `gemm_minus`.
    unsafe { super::blas::dtrsm_unit_lower_left(dev, m, n, l.ptr(), m.max(1), b.ptr(), m.max(1)) }
}

/// Check a column of tiles `(view, rows)`, each `rows × cols`.
fn column(
    dev: &CudaDevice,
    tiles: &[(DevSliceMut<'_, f64>, usize)],
    cols: usize,
    what: &str,
) -> Result<Vec<(u64, usize)>, String> {
    tiles
        .iter()
        .map(|(t, rows)| {
            mine(dev, t.device(), what)?;
            at_least(what, t.len(), rows * cols)?;
            Ok((t.ptr(), *rows))
        })
        .collect()
}

/// Row interchanges `ipiv` (LAPACK order, rows counted from the first row of
/// the first tile) over a column of tiles `(view, rows)`, `cols` wide.
pub fn laswp(
    dev: &CudaDevice,
    tiles: &[(DevSliceMut<'_, f64>, usize)],
    cols: usize,
    ipiv: &[usize],
) -> Result<(), String> {
    let t = column(dev, tiles, cols, "swap tile")?;
    // SAFETY: live, distinct (writable views), large enough buffers of this
    // device, pinned by the running task; `laswp` validates `ipiv`.
    unsafe { super::kernels::laswp(dev, &t, cols, ipiv) }
}

/// Factor the panel `tiles` (`(view, rows)`, `cols` wide) in place with
/// partial pivoting; returns the local pivots.
pub fn getrf_panel(
    dev: &CudaDevice,
    tiles: &[(DevSliceMut<'_, f64>, usize)],
    cols: usize,
) -> Result<Vec<usize>, PanelError> {
    let t = column(dev, tiles, cols, "panel tile")?;
    // SAFETY: as in `laswp`.
    unsafe { super::solver::dgetrf_panel(dev, &t, cols) }
}

/// `y += A·x` for a CSR block (`row_ptr` n_rows + 1 entries, `col_idx` and
/// `vals` the block's nonzeros, `x` at least `n_cols` entries). The indices
/// are trusted to be a valid CSR structure below `n_cols` (the `Csr` type
/// checks it on the host before upload); a corrupt structure can only make
/// the kernel fault on the device, which `run` reports.
#[allow(clippy::too_many_arguments)]
pub fn spmv_csr(
    dev: &CudaDevice,
    n_cols: usize,
    row_ptr: DevSlice<'_, usize>,
    col_idx: DevSlice<'_, u32>,
    vals: DevSlice<'_, f64>,
    x: DevSlice<'_, f64>,
    y: DevSliceMut<'_, f64>,
) -> Result<(), String> {
    let n_rows = row_ptr.len().saturating_sub(1);
    for (what, key) in [
        ("spmv row_ptr", row_ptr.device()),
        ("spmv col_idx", col_idx.device()),
        ("spmv vals", vals.device()),
        ("spmv x", x.device()),
        ("spmv y", y.device()),
    ] {
        mine(dev, key, what)?;
    }
    at_least("spmv x", x.len(), n_cols)?;
    at_least("spmv y", y.len(), n_rows)?;
    at_least("spmv col_idx", col_idx.len(), vals.len())?;
    // SAFETY: live buffers of this device (checked), pinned by the running
    // task, with the sizes checked above; y is writable, hence distinct.
    unsafe {
        super::kernels::spmv_csr(
            dev,
            n_rows,
            row_ptr.ptr(),
            col_idx.ptr(),
            vals.ptr(),
            x.ptr(),
            y.ptr(),
        )
    }
}

/// Read a small array back from device memory (after the compute stream).
pub fn download<T: bytemuck::Pod>(dev: &CudaDevice, v: DevSlice<'_, T>) -> Result<Vec<T>, String> {
    mine(dev, v.device(), "download")?;
    let mut out = vec![T::zeroed(); v.len()];
    dev.download_ptr(v.ptr(), bytemuck::cast_slice_mut(&mut out))?;
    Ok(out)
}

/// Write `src` into device memory (after the compute stream).
pub fn upload<T: bytemuck::Pod>(
    dev: &CudaDevice,
    src: &[T],
    dst: DevSliceMut<'_, T>,
) -> Result<(), String> {
    mine(dev, dst.device(), "upload")?;
    if dst.len() != src.len() {
        return Err(format!(
            "upload: {} elements into a view of {}",
            src.len(),
            dst.len()
        ));
    }
    // SAFETY: `dst` is a writable view of this device's memory of exactly
    // `src.len()` elements, pinned by the running task.
    unsafe { dev.upload_ptr(bytemuck::cast_slice(src), dst.ptr()) }
}
