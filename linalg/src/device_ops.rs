//! Device bodies of the LU and SpMV codelets: the same operations as the CPU
//! kernels, on data in a device's own memory (`TaskContext::device_parts`).
//!
//! Two targets: a CUDA GPU (feature `cuda`: cuBLAS for GEMM and TRSM, NVRTC
//! kernels for the row swaps and SpMV, all on the device's compute stream),
//! and a sim device with its own memory, whose "device memory" is host memory:
//! there the buffers are copied into tiles, the CPU kernel runs, and what it
//! wrote is copied back — so CI exercises every device body, its pointers,
//! shapes and leading dimensions, through the same data path a GPU uses, and
//! gets results bit-identical to the CPU's.
//!
//! On a device whose replicas are host values (a sim device without its own
//! memory) a device body is not needed: `TaskContext::on_device_memory` is false and the
//! callers run their CPU code.

use tessera_backends::sim::SimDevice;
use tessera_engine::{BodyError, DataHandle, DevicePtr, TaskContext};
use tessera_tasks::kernels::{gemm_update, laswp as laswp_tiles, trsm_unit_lower as host_trsm};
use tessera_tasks::tile::Tile;

/// The device a device body runs on.
enum Target<'a> {
    /// A sim device with its own memory: pointers are host addresses.
    Sim,
    #[cfg(feature = "cuda")]
    Cuda(&'a tessera_backends::cuda::CudaDevice),
    #[cfg(not(feature = "cuda"))]
    #[allow(dead_code)]
    Never(std::marker::PhantomData<&'a ()>),
}

fn target<'a>(ctx: &TaskContext<'a>) -> Result<Target<'a>, BodyError> {
    let dev = ctx
        .device()
        .ok_or_else(|| BodyError::from("a device body ran off a device"))?;
    let any = dev.as_any();
    if any.is::<SimDevice>() {
        return Ok(Target::Sim);
    }
    #[cfg(feature = "cuda")]
    if let Some(c) = any.downcast_ref::<tessera_backends::cuda::CudaDevice>() {
        return Ok(Target::Cuda(c));
    }
    Err(format!("no device kernels for {} (arch {})", dev.name(), dev.arch()).into())
}

fn check_len(what: &str, p: &DevicePtr, elems: usize, elem: usize) -> Result<(), BodyError> {
    if p.bytes < elems * elem {
        return Err(format!(
            "{what}: device buffer of {} bytes, {} needed",
            p.bytes,
            elems * elem
        )
        .into());
    }
    Ok(())
}

/// # Safety
/// `p` is a sim device buffer (host memory) of at least `len` `T`s, and the
/// task holds the access that makes this borrow exclusive (or shared, for
/// data it only reads — then the slice must not be written).
unsafe fn host_slice<'a, T>(p: &DevicePtr, len: usize) -> &'a mut [T] {
    // SAFETY: forwarded to the caller.
    unsafe { std::slice::from_raw_parts_mut(p.ptr as *mut T, len) }
}

/// The sim target's view of tile buffers: copies of the `rows × cols`
/// column-major blocks at `parts`.
///
/// # Safety
/// Each `DevicePtr` is a sim buffer (host memory) of at least `rows × cols`
/// doubles that the task may read.
unsafe fn load_tiles(parts: &[(DevicePtr, usize, usize)]) -> Vec<Tile> {
    parts
        .iter()
        // SAFETY: forwarded to the caller.
        .map(|(p, r, c)| Tile::from_col_major(*r, *c, unsafe { host_slice(p, r * c) }))
        .collect()
}

/// Copy `tiles[i]` back into `parts[i]` for the written indices.
///
/// # Safety
/// As [`load_tiles`], and the task may write `parts[i]` for each `i` in `written`.
unsafe fn store_tiles(
    parts: &[(DevicePtr, usize, usize)],
    tiles: &[Tile],
    written: impl Iterator<Item = usize>,
) {
    for i in written {
        let (p, r, c) = &parts[i];
        // SAFETY: forwarded to the caller.
        unsafe { host_slice::<f64>(p, r * c) }.copy_from_slice(tiles[i].as_slice());
    }
}

/// `C := C − A·B` on column-major tiles (`A` m×k, `B` k×n, `C` m×n, leading
/// dimension = rows).
pub(crate) fn gemm_minus(
    ctx: &TaskContext<'_>,
    (m, n, k): (usize, usize, usize),
    a: &DevicePtr,
    b: &DevicePtr,
    c: &DevicePtr,
) -> Result<(), BodyError> {
    check_len("gemm A", a, m * k, 8)?;
    check_len("gemm B", b, k * n, 8)?;
    check_len("gemm C", c, m * n, 8)?;
    match target(ctx)? {
        Target::Sim => {
            let parts = [(*a, m, k), (*b, k, n), (*c, m, n)];
            // SAFETY: sim buffers of the checked sizes; C is the task's RW tile.
            unsafe {
                let mut t = load_tiles(&parts);
                let (ab, c_tile) = t.split_at_mut(2);
                gemm_update(&ab[0], &ab[1], &mut c_tile[0]);
                store_tiles(&parts, &t, 2..3);
            }
            Ok(())
        }
        #[cfg(feature = "cuda")]
        // SAFETY: device buffers of the checked sizes, pinned by the task.
        Target::Cuda(d) => Ok(unsafe {
            tessera_backends::cuda::blas::dgemm_minus(
                d,
                m,
                n,
                k,
                a.ptr,
                m.max(1),
                b.ptr,
                k.max(1),
                c.ptr,
                m.max(1),
            )
        }?),
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// `B := L⁻¹·B` with `L` the unit lower triangle of the leading `m × m`
/// block of the `m`-row tile `l` (`B` m×n).
pub(crate) fn trsm_unit_lower(
    ctx: &TaskContext<'_>,
    (m, n): (usize, usize),
    l: &DevicePtr,
    b: &DevicePtr,
) -> Result<(), BodyError> {
    check_len("trsm L", l, m * m, 8)?;
    check_len("trsm B", b, m * n, 8)?;
    match target(ctx)? {
        Target::Sim => {
            let parts = [(*l, m, m), (*b, m, n)];
            // SAFETY: sim buffers of the checked sizes; B is the task's RW tile.
            unsafe {
                let mut t = load_tiles(&parts);
                let (l_tile, b_tile) = t.split_at_mut(1);
                host_trsm(&l_tile[0], &mut b_tile[0]);
                store_tiles(&parts, &t, 1..2);
            }
            Ok(())
        }
        #[cfg(feature = "cuda")]
        // SAFETY: device buffers of the checked sizes, pinned by the task.
        Target::Cuda(d) => Ok(unsafe {
            tessera_backends::cuda::blas::dtrsm_unit_lower_left(
                d,
                m,
                n,
                l.ptr,
                m.max(1),
                b.ptr,
                m.max(1),
            )
        }?),
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// The pivots of a panel (`npiv` local row indices), read from device memory.
pub(crate) fn read_pivots(
    ctx: &TaskContext<'_>,
    piv: &DevicePtr,
    npiv: usize,
) -> Result<Vec<usize>, BodyError> {
    check_len("pivots", piv, npiv, std::mem::size_of::<usize>())?;
    match target(ctx)? {
        // SAFETY: a sim buffer of the checked size, read only.
        Target::Sim => Ok(unsafe { host_slice::<usize>(piv, npiv) }.to_vec()),
        #[cfg(feature = "cuda")]
        Target::Cuda(d) => {
            let mut out = vec![0usize; npiv];
            d.download_ptr(piv.ptr, bytemuck::cast_slice_mut(&mut out))?;
            Ok(out)
        }
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// A column of tiles in device memory: each tile's buffer with its row count.
pub(crate) fn column(
    ctx: &TaskContext<'_>,
    tiles: &[DataHandle<Tile>],
    rows: &[usize],
) -> Result<Vec<(DevicePtr, usize)>, BodyError> {
    tiles
        .iter()
        .zip(rows)
        .map(|(h, &r)| Ok((ctx.device_parts(h)?[0], r)))
        .collect()
}

/// Row interchanges `ipiv` (LAPACK order, rows counted from the first row of
/// `tiles[0]`) over a column of tiles `(buffer, rows)` with `cols` columns.
pub(crate) fn laswp(
    ctx: &TaskContext<'_>,
    tiles: &[(DevicePtr, usize)],
    cols: usize,
    ipiv: &[usize],
) -> Result<(), BodyError> {
    let total: usize = tiles.iter().map(|t| t.1).sum();
    for (t, rows) in tiles {
        check_len("swap tile", t, rows * cols, 8)?;
    }
    if let Some((i, p)) = ipiv.iter().enumerate().find(|(_, &p)| p >= total) {
        return Err(format!("swap: pivot {i} names row {p} of a {total}-row column").into());
    }
    match target(ctx)? {
        Target::Sim => {
            let parts: Vec<_> = tiles.iter().map(|(p, r)| (*p, *r, cols)).collect();
            // SAFETY: sim buffers of the checked sizes, the task's RW tiles.
            unsafe {
                let mut t = load_tiles(&parts);
                laswp_tiles(&mut t.iter_mut().collect::<Vec<_>>(), ipiv);
                store_tiles(&parts, &t, 0..parts.len());
            }
            Ok(())
        }
        #[cfg(feature = "cuda")]
        Target::Cuda(d) => {
            let t: Vec<(u64, usize)> = tiles.iter().map(|(p, r)| (p.ptr, *r)).collect();
            // SAFETY: device buffers of the checked sizes, pinned by the task.
            Ok(unsafe { tessera_backends::cuda::kernels::laswp(d, &t, cols, ipiv) }?)
        }
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// `y += A·x` for one CSR block in device memory: `a` is the block's parts
/// (`row_ptr` usize, `col_idx` u32, `vals` f64), `x` has `n_cols` entries.
pub(crate) fn spmv(
    ctx: &TaskContext<'_>,
    a: &[DevicePtr],
    x: &DevicePtr,
    y: &DevicePtr,
    n_cols: usize,
) -> Result<(), BodyError> {
    let [row_ptr, col_idx, vals] = a else {
        return Err(format!("a CSR block has 3 parts, got {}", a.len()).into());
    };
    let n_rows = (row_ptr.bytes / 8).saturating_sub(1);
    check_len("spmv y", y, n_rows, 8)?;
    check_len("spmv x", x, n_cols, 8)?;
    match target(ctx)? {
        Target::Sim => {
            // SAFETY: sim buffers holding a `Csr` block's arrays (valid by
            // construction: indices < n_cols, row_ptr within the arrays), x
            // and A read only, y the task's RW vector.
            unsafe {
                let nnz = vals.bytes / 8;
                tessera_tasks::kernels::spmv_csr(
                    host_slice::<usize>(row_ptr, n_rows + 1),
                    host_slice::<u32>(col_idx, col_idx.bytes / 4),
                    host_slice::<f64>(vals, nnz),
                    host_slice::<f64>(x, n_cols),
                    host_slice::<f64>(y, n_rows),
                );
            }
            Ok(())
        }
        #[cfg(feature = "cuda")]
        // SAFETY: a `Csr` block's arrays (valid by construction) in device
        // memory, pinned by the task; sizes checked above.
        Target::Cuda(d) => Ok(unsafe {
            tessera_backends::cuda::kernels::spmv_csr(
                d,
                n_rows,
                row_ptr.ptr,
                col_idx.ptr,
                vals.ptr,
                x.ptr,
                y.ptr,
            )
        }?),
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// Factor a panel in device memory (tiles `(buffer, rows)`, `cols` wide,
/// top to bottom) with partial pivoting, as `getrf_panel` does on the host;
/// returns the local pivots. A singular panel fails with the same
/// [`SingularColumn`](tessera_tasks::kernels::SingularColumn) error (global
/// column `col0 + j`).
pub(crate) fn getrf_panel(
    ctx: &TaskContext<'_>,
    tiles: &[(DevicePtr, usize)],
    cols: usize,
    col0: usize,
) -> Result<Vec<usize>, BodyError> {
    for (t, rows) in tiles {
        check_len("panel tile", t, rows * cols, 8)?;
    }
    match target(ctx)? {
        Target::Sim => {
            let parts: Vec<_> = tiles.iter().map(|(p, r)| (*p, *r, cols)).collect();
            // SAFETY: sim buffers of the checked sizes, the task's RW tiles;
            // written back only on success (as the host kernel leaves them).
            unsafe {
                let mut t = load_tiles(&parts);
                let ipiv = tessera_tasks::kernels::getrf_panel(
                    &mut t.iter_mut().collect::<Vec<_>>(),
                    col0,
                )?;
                store_tiles(&parts, &t, 0..parts.len());
                Ok(ipiv)
            }
        }
        #[cfg(feature = "cuda")]
        Target::Cuda(d) => {
            use tessera_backends::cuda::solver::{dgetrf_panel, PanelError};
            let t: Vec<(u64, usize)> = tiles.iter().map(|(p, r)| (p.ptr, *r)).collect();
            // SAFETY: device buffers of the checked sizes, pinned by the task.
            match unsafe { dgetrf_panel(d, &t, cols) } {
                Ok(ipiv) => Ok(ipiv),
                Err(PanelError::Singular(j)) => {
                    Err(Box::new(tessera_tasks::kernels::SingularColumn {
                        column: col0 + j,
                    }))
                }
                Err(PanelError::Failed(e)) => Err(e.into()),
            }
        }
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}

/// Write a panel's pivots into its pivot vector in device memory.
pub(crate) fn write_pivots(
    ctx: &TaskContext<'_>,
    piv: &DevicePtr,
    ipiv: &[usize],
) -> Result<(), BodyError> {
    if piv.bytes != std::mem::size_of_val(ipiv) {
        return Err(format!(
            "pivots: device buffer of {} bytes for {} pivots",
            piv.bytes,
            ipiv.len()
        )
        .into());
    }
    match target(ctx)? {
        Target::Sim => {
            // SAFETY: the task's W pivot buffer, of exactly this size.
            unsafe { host_slice::<usize>(piv, ipiv.len()) }.copy_from_slice(ipiv);
            Ok(())
        }
        #[cfg(feature = "cuda")]
        // SAFETY: the task's W pivot buffer, of exactly this size.
        Target::Cuda(d) => Ok(unsafe { d.upload_ptr(bytemuck::cast_slice(ipiv), piv.ptr) }?),
        #[cfg(not(feature = "cuda"))]
        Target::Never(_) => unreachable!(),
    }
}
