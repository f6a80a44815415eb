//! Hand-written CUDA kernels (row interchanges over tiles, CSR SpMV),
//! compiled by NVRTC at `open`, and their launch wrappers on the compute
//! stream; plus the device-to-device bandwidth probe.
//!
//! Kernels are compiled to a CUBIN for the device's own `sm_XY`, not to
//! PTX: a CUBIN from a newer toolkit loads on an older driver of the same
//! major version (CUDA minor-version compatibility), while PTX from a newer
//! NVRTC is refused by an older driver's JIT. If NVRTC does not know the
//! device's architecture, PTX for NVRTC's default architecture is the
//! fallback.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, CudaContext, CudaFunction, LaunchConfig, PushKernelArg};
use cudarc::nvrtc;

use super::device::{CudaBuffer, PinnedChunk};
use super::{driver_error, CudaDevice};
use tessera_engine::device::DeviceBuffer;
use tessera_engine::util::lock;

/// CUDA C source of every kernel of this backend.
const SOURCE: &str = r#"
typedef unsigned long long u64;

// Row interchanges, step 1: scratch[c * n + j] = source row j, column c.
// desc holds four arrays of n entries: source row addresses, source leading
// dimensions (in doubles), destination row addresses, destination leading
// dimensions. Threads run over rows (adjacent rows of a column are adjacent
// in memory), the grid's y dimension over columns.
extern "C" __global__ void laswp_gather(const u64* __restrict__ desc, u64 n, u64 cols,
                                        double* __restrict__ scratch) {
    u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const double* src = (const double*)desc[j];
    u64 ld = desc[n + j];
    for (u64 c = blockIdx.y; c < cols; c += gridDim.y)
        scratch[c * n + j] = src[c * ld];
}

// Row interchanges, step 2: destination row j, column c = scratch[c * n + j].
// A separate launch, so every row is read before any is overwritten.
extern "C" __global__ void laswp_scatter(const u64* __restrict__ desc, u64 n, u64 cols,
                                         const double* __restrict__ scratch) {
    u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (j >= n) return;
    double* dst = (double*)desc[2 * n + j];
    u64 ld = desc[3 * n + j];
    for (u64 c = blockIdx.y; c < cols; c += gridDim.y)
        dst[c * ld] = scratch[c * n + j];
}

// y[row] += sum_k vals[k] * x[col_idx[k]] over the row's entries, with
// `lanes` threads per row (a power of two <= 32, so a row's threads sit in
// one warp). row_ptr entries are absolute; vals and col_idx start at entry
// row_ptr[0]. Every thread of a warp reaches the shuffles (no early return),
// so the full mask is valid; lane 0 of each group holds the row's sum.
extern "C" __global__ void spmv_csr_vector(u64 n_rows, unsigned int lanes,
                                           const u64* __restrict__ row_ptr,
                                           const unsigned int* __restrict__ col_idx,
                                           const double* __restrict__ vals,
                                           const double* x, double* y) {
    u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    u64 row = t / lanes;
    unsigned int lane = (unsigned int)(t & (u64)(lanes - 1));
    double sum = 0.0;
    if (row < n_rows) {
        u64 base = row_ptr[0];
        u64 end = row_ptr[row + 1] - base;
        for (u64 k = row_ptr[row] - base + lane; k < end; k += lanes)
            sum += vals[k] * x[col_idx[k]];
    }
    for (unsigned int off = lanes >> 1; off > 0; off >>= 1)
        sum += __shfl_down_sync(0xffffffffu, sum, off, lanes);
    if (row < n_rows && lane == 0) y[row] += sum;
}
"#;

/// [`SOURCE`], for the compile test beside the resident LU's kernels.
#[cfg(test)]
pub(crate) const SOURCE_FOR_TESTS: &str = SOURCE;

/// Threads per block of every launch here.
const BLOCK: u32 = 256;
/// Largest grid y dimension.
const MAX_GRID_Y: usize = 65535;

/// The loaded kernels of one device.
pub(crate) struct Kernels {
    laswp_gather: CudaFunction,
    laswp_scatter: CudaFunction,
    spmv_csr: CudaFunction,
}

impl Kernels {
    /// Compiles [`SOURCE`] for compute capability `cc` and loads it into `ctx`.
    pub(crate) fn load(ctx: &Arc<CudaContext>, cc: (u32, u32)) -> Result<Self, String> {
        let module = load_module(ctx, cc, SOURCE)?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| format!("kernel {name}: {}", driver_error(e)))
        };
        Ok(Kernels {
            laswp_gather: f("laswp_gather")?,
            laswp_scatter: f("laswp_scatter")?,
            spmv_csr: f("spmv_csr_vector")?,
        })
    }
}

/// Compiles `src` for compute capability `cc` (a CUBIN, else PTX: see the
/// module doc) and loads it into `ctx`.
pub(crate) fn load_module(
    ctx: &Arc<CudaContext>,
    cc: (u32, u32),
    src: &str,
) -> Result<Arc<cudarc::driver::CudaModule>, String> {
    let image = match compile_cubin(src, cc) {
        Ok(cubin) => nvrtc::Ptx::from_binary(cubin),
        Err(cubin_err) => nvrtc::compile_ptx(src)
            .map_err(|e| format!("NVRTC: {cubin_err}; PTX fallback failed too: {e:?}"))?,
    };
    ctx.load_module(image)
        .map_err(|e| format!("loading the kernels: {}", driver_error(e)))
}

/// Compiles `src` to a CUBIN for `sm_{major}{minor}` with NVRTC.
pub(crate) fn compile_cubin(src: &str, (major, minor): (u32, u32)) -> Result<Vec<u8>, String> {
    let src_c = CString::new(src).map_err(|_| "kernel source has a NUL byte".to_string())?;
    let prog = nvrtc::result::create_program(&src_c, None)
        .map_err(|e| format!("nvrtcCreateProgram: {:?}", e.0))?;
    let arch = format!("--gpu-architecture=sm_{major}{minor}");
    // SAFETY: `prog` is a live program (created above, destroyed below);
    // `src_c` outlives it.
    let out = unsafe {
        match nvrtc::result::compile_program(prog, &[arch.as_str()]) {
            Err(e) => {
                let log = nvrtc::result::get_program_log(prog)
                    .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(format!(
                    "compiling for sm_{major}{minor}: {:?}: {}",
                    e.0,
                    log.trim()
                ))
            }
            Ok(()) => {
                let mut size = 0usize;
                nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| format!("nvrtcGetCUBINSize: {:?}", e.0))
                    .and_then(|()| {
                        let mut cubin = vec![0u8; size];
                        nvrtc::sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char)
                            .result()
                            .map(|()| cubin)
                            .map_err(|e| format!("nvrtcGetCUBIN: {:?}", e.0))
                    })
            }
        }
    };
    // SAFETY: `prog` is live and destroyed only here.
    let _ = unsafe { nvrtc::result::destroy_program(prog) };
    out
}

/// The device descriptor of `moves` over `tiles` ((address, rows), column
/// major, ld = rows): source addresses, source lds, destination addresses,
/// destination lds, `moves.len()` entries each.
pub(crate) fn laswp_descriptors(
    tiles: &[(u64, usize)],
    moves: &[(usize, usize)],
) -> Result<Vec<u64>, String> {
    // first[t]: global index of tile t's first row.
    let mut first = Vec::with_capacity(tiles.len());
    let mut total = 0usize;
    for &(_, rows) in tiles {
        first.push(total);
        total += rows;
    }
    let locate = |row: usize| -> Result<(u64, u64), String> {
        // The last tile starting at or before `row` that has rows.
        let t = first.partition_point(|&f| f <= row);
        let t = (0..t)
            .rev()
            .find(|&t| tiles[t].1 > 0)
            .filter(|&t| row < first[t] + tiles[t].1)
            .ok_or_else(|| format!("laswp: row {row} is outside the tiles ({total} rows)"))?;
        let (ptr, rows) = tiles[t];
        if ptr == 0 {
            return Err(format!("laswp: tile {t} has a null address"));
        }
        Ok((ptr + 8 * (row - first[t]) as u64, rows as u64))
    };
    let n = moves.len();
    let mut desc = vec![0u64; 4 * n];
    for (j, &(dst, src)) in moves.iter().enumerate() {
        let (sa, sld) = locate(src)?;
        let (da, dld) = locate(dst)?;
        desc[j] = sa;
        desc[n + j] = sld;
        desc[2 * n + j] = da;
        desc[3 * n + j] = dld;
    }
    Ok(desc)
}

/// `laswp`'s per-device buffers, grown as needed; guarded by
/// `CudaDevice::scratch`.
#[derive(Default)]
pub(crate) struct LaswpScratch {
    /// Device copy of the descriptor.
    desc: Option<CudaBuffer>,
    /// Device buffer of the gathered rows.
    rows: Option<CudaBuffer>,
    /// Pinned host descriptor; its `done` event marks the end of the last
    /// upload from it.
    host: Option<PinnedChunk>,
}

/// Grows `slot` to at least `bytes` (waiting for the compute stream first,
/// since queued kernels may use the old buffer).
fn grow_device(
    dev: &CudaDevice,
    slot: &mut Option<CudaBuffer>,
    bytes: usize,
) -> Result<(), String> {
    if slot.as_ref().is_some_and(|b| b.bytes() >= bytes) {
        return Ok(());
    }
    dev.synchronize()?;
    *slot = None;
    *slot = Some(dev.alloc_raw(bytes.next_power_of_two())?);
    Ok(())
}

/// Row interchanges over a column of tiles (LAPACK `dlaswp` semantics, in
/// order i = 0..ipiv.len(): row i swapped with row `ipiv[i]`, rows counted from
/// the first row of `tiles[0]`). `tiles` are (device address, rows),
/// column-major with ld = rows, all with `cols` columns.
///
/// The host computes the net permutation of the affected rows and uploads
/// it; one gather kernel copies those rows into a device scratch buffer and
/// one scatter kernel writes them to their new places. Enqueued on the
/// compute stream; `ipiv` is validated first (an `Err` names the bad entry).
///
/// # Safety
/// - every tile address is a live device allocation of this device holding
///   `rows * cols` doubles;
/// - no other stream writes the tiles until the compute stream has passed
///   these kernels.
pub unsafe fn laswp(
    dev: &CudaDevice,
    tiles: &[(u64, usize)],
    cols: usize,
    ipiv: &[usize],
) -> Result<(), String> {
    let total = tiles
        .iter()
        .try_fold(0usize, |s, t| s.checked_add(t.1))
        .ok_or("laswp: the tile rows overflow")?;
    let moves = crate::rows::laswp_moves(total, ipiv)?;
    if moves.is_empty() || cols == 0 {
        return Ok(());
    }
    let desc = laswp_descriptors(tiles, &moves)?;
    let n = moves.len();
    let desc_bytes = desc.len() * 8;
    let rows_bytes = n
        .checked_mul(cols)
        .and_then(|v| v.checked_mul(8))
        .ok_or("laswp: scratch size overflows")?;
    dev.bind()?;
    let err = |what: &str, e| format!("laswp: {what}: {}", driver_error(e));
    let mut guard = lock(&dev.scratch);
    let scratch = &mut *guard;
    grow_device(dev, &mut scratch.desc, desc_bytes)?;
    grow_device(dev, &mut scratch.rows, rows_bytes)?;
    if scratch.host.as_ref().is_none_or(|h| h.bytes < desc_bytes) {
        // Dropping the old chunk waits for its last upload.
        scratch.host = None;
        scratch.host = PinnedChunk::new(dev.context(), desc_bytes.next_power_of_two()).ok();
    }
    let (desc_dev, rows_dev) = match (&scratch.desc, &scratch.rows) {
        (Some(d), Some(r)) => (d.ptr, r.ptr),
        _ => return Err("laswp: scratch buffers missing".into()),
    };
    let stream = dev.stream();
    match &scratch.host {
        Some(host) => {
            // The previous upload from this buffer must be done before we
            // overwrite it; the device copy is then ordered before the
            // kernels by the stream.
            host.done
                .synchronize()
                .map_err(|e| err("waiting for the descriptor buffer", e))?;
            // SAFETY: `host` holds at least desc_bytes bytes and no DMA
            // reads it now (event above); we hold the scratch lock.
            let staged = unsafe {
                std::ptr::copy_nonoverlapping(desc.as_ptr() as *const u8, host.ptr, desc_bytes);
                std::slice::from_raw_parts(host.ptr, desc_bytes)
            };
            // SAFETY: `desc_dev` holds at least desc_bytes bytes; `staged`
            // stays untouched until `done` (recorded next) completes.
            unsafe { result::memcpy_htod_async(desc_dev, staged, stream.cu_stream()) }
                .map_err(|e| err("cuMemcpyHtoDAsync", e))?;
            host.done
                .record(stream)
                .map_err(|e| err("cuEventRecord", e))?;
        }
        None => {
            // No pinned memory: queued kernels may still read the device
            // descriptor, so drain the stream before a synchronous copy.
            dev.synchronize()?;
            // SAFETY: `desc_dev` holds at least desc_bytes bytes.
            unsafe { result::memcpy_htod_sync(desc_dev, &desc) }
                .map_err(|e| err("cuMemcpyHtoD", e))?;
        }
    }
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(n.div_ceil(BLOCK as usize)).map_err(|_| "laswp: too many rows")?,
            cols.min(MAX_GRID_Y) as u32,
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let (n64, cols64) = (n as u64, cols as u64);
    // SAFETY: the arguments match the kernels' signatures (u64 pointers
    // and counts); the descriptor addresses point into the tiles (caller),
    // and the scratch holds n·cols doubles.
    unsafe {
        stream
            .launch_builder(&dev.kernels.laswp_gather)
            .arg(&desc_dev)
            .arg(&n64)
            .arg(&cols64)
            .arg(&rows_dev)
            .launch(cfg)
            .map_err(|e| err("launching laswp_gather", e))?;
        stream
            .launch_builder(&dev.kernels.laswp_scatter)
            .arg(&desc_dev)
            .arg(&n64)
            .arg(&cols64)
            .arg(&rows_dev)
            .launch(cfg)
            .map_err(|e| err("launching laswp_scatter", e))?;
    }
    Ok(())
}

/// Threads per row for an average of `nnz / n_rows` entries per row: about
/// four entries per thread, rounded up to a power of two, between 1 and a
/// warp (32). Measured by `gpu-check` on an H200 with 27 entries per row
/// (2M rows): 4 lanes 2521 GB/s, 8 lanes 2568, 16 lanes 2180, 32 lanes 1388
/// (a thread per entry, the rule before, left 5 of 32 lanes idle and spent
/// five shuffles per row).
pub(crate) fn spmv_lanes_for(nnz: u64, n_rows: usize) -> u32 {
    if n_rows == 0 {
        return 1;
    }
    let avg = nnz.div_ceil(n_rows as u64);
    (avg.div_ceil(4).clamp(1, 32) as u32).next_power_of_two()
}

/// Lanes per row chosen for each CSR block seen, keyed by (row_ptr address,
/// rows). A stale entry (a buffer reused for another matrix) costs speed,
/// never correctness.
#[derive(Default)]
pub(crate) struct SpmvLanes(Mutex<HashMap<(u64, usize), u32>>);

/// Entries kept in [`SpmvLanes`] before it is cleared.
const SPMV_LANES_CACHE: usize = 4096;

impl SpmvLanes {
    fn get(&self, dev: &CudaDevice, row_ptr: u64, n_rows: usize) -> Result<u32, String> {
        if let Some(&l) = lock(&self.0).get(&(row_ptr, n_rows)) {
            return Ok(l);
        }
        // Read row_ptr[0] and row_ptr[n_rows] in stream order, once.
        let (mut first, mut last) = ([0u64; 1], [0u64; 1]);
        let stream = dev.stream();
        let err = |e| format!("spmv_csr: reading row_ptr: {}", driver_error(e));
        // SAFETY: row_ptr holds n_rows + 1 u64 (caller of spmv_csr); the
        // host arrays live until the synchronisation below.
        unsafe {
            result::memcpy_dtoh_async(&mut first, row_ptr, stream.cu_stream()).map_err(err)?;
            result::memcpy_dtoh_async(&mut last, row_ptr + 8 * n_rows as u64, stream.cu_stream())
                .map_err(err)?;
        }
        stream.synchronize().map_err(err)?;
        let lanes = spmv_lanes_for(last[0].saturating_sub(first[0]), n_rows);
        let mut map = lock(&self.0);
        if map.len() >= SPMV_LANES_CACHE {
            map.clear();
        }
        map.insert((row_ptr, n_rows), lanes);
        Ok(lanes)
    }
}

/// y[0..n_rows] += A·x for a CSR block: `row_ptr` has n_rows + 1 u64
/// entries starting anywhere (entry k of the block is `row_ptr[i] -
/// row_ptr[0]` into `col_idx` (u32) and `vals` (f64)), `x` and `y` f64.
/// A vector CSR kernel with 1 to 32 threads per row, chosen from the mean
/// row length (read from the device once per block). Enqueued on the
/// compute stream.
///
/// # Safety
/// All addresses are live device allocations of this device: `row_ptr` with
/// n_rows + 1 entries, `col_idx`/`vals` with `row_ptr[n_rows] - row_ptr[0]`,
/// `x` covering every column index, `y` with n_rows; `y` does not overlap
/// the others.
pub unsafe fn spmv_csr(
    dev: &CudaDevice,
    n_rows: usize,
    row_ptr: u64,
    col_idx: u64,
    vals: u64,
    x: u64,
    y: u64,
) -> Result<(), String> {
    if n_rows == 0 {
        return Ok(());
    }
    dev.bind()?;
    let lanes = dev.spmv_lanes.get(dev, row_ptr, n_rows)?;
    // SAFETY: the caller's guarantee, passed on.
    unsafe { launch_spmv(dev, n_rows, lanes, row_ptr, col_idx, vals, x, y) }
}

/// Enqueues `spmv_csr_vector` with `lanes` threads per row (a power of two
/// from 1 to 32).
///
/// # Safety
/// As [`spmv_csr`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch_spmv(
    dev: &CudaDevice,
    n_rows: usize,
    lanes: u32,
    row_ptr: u64,
    col_idx: u64,
    vals: u64,
    x: u64,
    y: u64,
) -> Result<(), String> {
    debug_assert!(lanes.is_power_of_two() && lanes <= 32);
    let blocks = (n_rows as u64)
        .checked_mul(lanes as u64)
        .map(|t| t.div_ceil(BLOCK as u64))
        .and_then(|b| u32::try_from(b).ok())
        .filter(|&b| b < i32::MAX as u32)
        .ok_or("spmv_csr: too many rows for one launch")?;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let n64 = n_rows as u64;
    // SAFETY: the arguments match spmv_csr_vector's signature; addresses
    // and sizes are the caller's guarantee.
    unsafe {
        dev.stream()
            .launch_builder(&dev.kernels.spmv_csr)
            .arg(&n64)
            .arg(&lanes)
            .arg(&row_ptr)
            .arg(&col_idx)
            .arg(&vals)
            .arg(&x)
            .arg(&y)
            .launch(cfg)
            .map_err(|e| format!("spmv_csr: launching: {}", driver_error(e)))?;
    }
    Ok(())
}

/// The rate of the SpMV kernel alone on a stencil-like block: `n_rows` rows
/// of 27 entries each (a band of columns around the diagonal, as a 27-point
/// stencil's rows after numbering), `x` and `y` of `n_rows`. For each of 4,
/// 8, 16 and 32 threads per row it times five launches with events (after one
/// warm-up) and returns `(lanes, bytes/s)`, bytes being the matrix's stream
/// (12 per entry: value and column index; 8 per row: row_ptr) plus `y` read
/// and written, as `spmv_bytes` counts on the host without `x`. This
/// separates the kernel from the task around it (`gpu-check`).
pub fn spmv_rate(dev: &CudaDevice, n_rows: usize) -> Result<Vec<(u32, f64)>, String> {
    const REPS: usize = 5;
    const PER_ROW: usize = 27;
    if n_rows < PER_ROW {
        return Err(format!(
            "spmv_rate: {n_rows} rows, at least {PER_ROW} needed"
        ));
    }
    // Columns: planes, lines and points at distances 0, 1 and the plane size
    // of a cube of side ~n^(1/3), clipped to the matrix, as stencil27 gives.
    let side = ((n_rows as f64).cbrt() as usize).max(2);
    let offsets: Vec<i64> = (-1i64..=1)
        .flat_map(|p| (-1i64..=1).flat_map(move |l| (-1i64..=1).map(move |c| (p, l, c))))
        .map(|(p, l, c)| p * (side * side) as i64 + l * side as i64 + c)
        .collect();
    let mut row_ptr = Vec::with_capacity(n_rows + 1);
    let mut col_idx: Vec<u32> = Vec::with_capacity(n_rows * PER_ROW);
    row_ptr.push(0u64);
    for r in 0..n_rows as i64 {
        for &o in &offsets {
            col_idx.push((r + o).clamp(0, n_rows as i64 - 1) as u32);
        }
        row_ptr.push(col_idx.len() as u64);
    }
    let vals = vec![0.5f64; col_idx.len()];
    let x = vec![1.0f64; n_rows];
    let up = |bytes: &[u8]| -> Result<CudaBuffer, String> {
        let b = dev.alloc_raw(bytes.len())?;
        // SAFETY: `b` was just allocated with `bytes.len()` bytes.
        unsafe { dev.upload_ptr(bytes, b.ptr)? };
        Ok(b)
    };
    let d_rp = up(bytemuck::cast_slice(&row_ptr))?;
    let d_ci = up(bytemuck::cast_slice(&col_idx))?;
    let d_v = up(bytemuck::cast_slice(&vals))?;
    let d_x = up(bytemuck::cast_slice(&x))?;
    let d_y = up(bytemuck::cast_slice(&x))?;
    let bytes = (12 * col_idx.len() + 8 * (n_rows + 1) + 16 * n_rows) as f64;
    let mut out = Vec::new();
    for lanes in [4u32, 8, 16, 32] {
        // SAFETY: the buffers hold the block (n_rows + 1 row pointers,
        // col_idx.len() entries), x and y of n_rows; y is apart from the rest.
        let launch = || unsafe {
            launch_spmv(
                dev, n_rows, lanes, d_rp.ptr, d_ci.ptr, d_v.ptr, d_x.ptr, d_y.ptr,
            )
        };
        launch()?;
        let ms = dev.time_on_compute(|| (0..REPS).try_for_each(|_| launch()))?;
        out.push((lanes, bytes * REPS as f64 / (ms / 1e3).max(1e-9)));
    }
    dev.synchronize()?;
    Ok(out)
}

/// Device-to-device copy bandwidth (bytes/s) over `bytes`: one warm-up and
/// five timed `cuMemcpyDtoDAsync` on the compute stream, timed with events,
/// counting bytes read plus bytes written (as CUDA's `bandwidthTest` does).
/// This is the physical limit of a memory-bound kernel such as SpMV.
pub fn d2d_bandwidth(dev: &CudaDevice, bytes: usize) -> Result<f64, String> {
    const REPS: usize = 5;
    if bytes == 0 {
        return Err("d2d_bandwidth: 0 bytes".into());
    }
    let a = dev.alloc_raw(bytes)?;
    let b = dev.alloc_raw(bytes)?;
    let stream = dev.stream().cu_stream();
    let err = |e| format!("d2d_bandwidth: {}", driver_error(e));
    // SAFETY: `a` and `b` are live allocations of `bytes` bytes; all work is
    // drained below before they are freed.
    let copy = || unsafe { result::memcpy_dtod_async(b.ptr, a.ptr, bytes, stream) }.map_err(err);
    // SAFETY: as above.
    let timed = unsafe { result::memset_d8_async(a.ptr, 0, bytes, stream) }
        .map_err(err)
        .and_then(|()| copy())
        .and_then(|()| {
            dev.time_on_compute(|| {
                for _ in 0..REPS {
                    copy()?;
                }
                Ok(())
            })
        });
    let _ = dev.synchronize();
    let ms = timed?;
    Ok((2 * bytes * REPS) as f64 / (ms / 1e3).max(1e-9))
}

#[cfg(test)]
mod tests {
    //! The host side of laswp (descriptors) and SpMV's lanes choice,
    //! checked against direct computations.
    use super::*;

    #[test]
    fn descriptors_cross_tiles() {
        // Tiles of 3, 0 and 2 rows: global rows 0..3 in tile 0, 3..5 in tile 2.
        let tiles = [(1000u64, 3usize), (0, 0), (5000, 2)];
        let moves = crate::rows::laswp_moves(5, &[4, 3]).unwrap();
        // Row 0 <- 4, row 1 <- 3, row 3 <- 1, row 4 <- 0.
        assert_eq!(moves, vec![(0, 4), (1, 3), (3, 1), (4, 0)]);
        let d = laswp_descriptors(&tiles, &moves).unwrap();
        let n = moves.len();
        assert_eq!(&d[..n], &[5008, 5000, 1008, 1000]);
        assert_eq!(&d[n..2 * n], &[2, 2, 3, 3]);
        assert_eq!(&d[2 * n..3 * n], &[1000, 1008, 5000, 5008]);
        assert_eq!(&d[3 * n..], &[3, 3, 2, 2]);
        let e = laswp_descriptors(&[(0, 2)], &[(0, 1)]).unwrap_err();
        assert!(e.contains("null"), "{e}");
    }

    #[test]
    fn kernels_compile_where_nvrtc_is_present() {
        // NVRTC needs no GPU: where libnvrtc is on the library path (the
        // `nvidia-cuda-nvrtc` wheel's lib folder will do), compile the
        // kernels for Ampere and Hopper; elsewhere (CI) there is nothing to do.
        // SAFETY: only tries to dlopen the library.
        if !unsafe { nvrtc::sys::is_culib_present() } {
            eprintln!("libnvrtc not found: kernel compilation not checked");
            return;
        }
        for cc in [(8, 0), (9, 0)] {
            let cubin = compile_cubin(SOURCE, cc).unwrap();
            assert!(
                cubin.starts_with(b"\x7fELF"),
                "sm_{}{}: not an ELF image",
                cc.0,
                cc.1
            );
        }
        assert!(compile_cubin(SOURCE, (1, 0)).unwrap_err().contains("sm_10"));
        nvrtc::compile_ptx(SOURCE).unwrap();
    }

    #[test]
    fn lanes_follow_row_length() {
        assert_eq!(spmv_lanes_for(0, 10), 1);
        assert_eq!(spmv_lanes_for(10, 10), 1);
        assert_eq!(spmv_lanes_for(70, 10), 2);
        assert_eq!(spmv_lanes_for(7_000_000, 1_000_000), 2);
        assert_eq!(spmv_lanes_for(27_000_000, 1_000_000), 8);
        assert_eq!(spmv_lanes_for(1000, 10), 32);
        assert_eq!(spmv_lanes_for(130_000, 1000), 32);
        assert_eq!(spmv_lanes_for(5, 0), 1);
    }
}
