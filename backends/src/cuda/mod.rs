//! NVIDIA GPUs through cudarc: one [`CudaDevice`] per GPU, implementing the
//! engine's `Device` and `DeviceMemory`, with cuBLAS and hand-written NVRTC
//! kernels for the tile operations of LU and SpMV.
//!
//! # Loading
//! cudarc is built with `dynamic-loading`: libcuda, libcublas and libnvrtc
//! are opened at run time, so the crate builds and its tests run on machines
//! with no CUDA. cudarc panics when a library it needs is missing, so
//! [`detect`] first asks `is_culib_present()` for each of the three and
//! returns a one-line reason instead; [`detect`] and [`open`] also turn any
//! panic from inside cudarc into an `Err`.
//!
//! # Streams
//! Each device has three non-blocking streams:
//! - the compute stream: cuBLAS (its handle is bound to it) and our kernels.
//!   [`Device::run`](tessera_engine::device::Device::run) records a timing
//!   event before and after the body, synchronises, and returns the
//!   event-elapsed time, which feeds the perf models;
//! - a host→device copy stream and a device→host copy stream, used by
//!   `upload` and `download`, so a prefetch upload can overlap a kernel and a
//!   download.
//!
//! No stream waits on another. That is enough because every operation the
//! engine sees is synchronous: `run` returns after the compute stream has
//! drained, and `upload`/`download` return after their copies completed, and
//! the engine orders tasks and transfers on a buffer by its own dependency
//! tracking. cudarc's per-slice event tracking is switched off for the same
//! reason (`disable_event_tracking`); we use raw device pointers anyway.
//!
//! # Pinned staging
//! DMA needs page-locked host memory, and page-locked memory is a limited
//! resource (Hetero-HPL: large pinned allocations fail or slow the host).
//! Uploads and downloads therefore go through a small pool of pinned chunks
//! (at most [`STAGING_CHUNKS`] of [`STAGING_CHUNK_BYTES`]), allocated lazily
//! with flags 0: not write-combined, because the host reads the chunks back
//! on downloads and reads of write-combined memory are uncached. A copy takes
//! up to [`STAGING_LEASE`] chunks and pipelines its pieces through them: the host `memcpy` into (or out of) one chunk
//! overlaps the DMA of the other, ordered by one event per chunk. The pool is
//! a `Mutex` + `Condvar`; a caller takes all its chunks in one step and never
//! waits while holding any, so concurrent callers cannot deadlock. If no
//! pinned memory can be had at all, copies fall back to synchronous pageable
//! `cuMemcpy`.
//!
//! # Kernels
//! Matrix products and triangular solves are cuBLAS (`blas`). Row
//! interchanges over a column of tiles (LAPACK `dlaswp`) and the CSR SpMV are
//! written by hand in CUDA C and compiled by NVRTC at [`open`] (`kernels`):
//! no library in reach offers `dlaswp` on a set of separately allocated
//! device tiles (cuSOLVER's `getrs` permutes one contiguous matrix; MAGMA is
//! not available), and cuSPARSE is not part of the build.
//!
//! # Start-up measurements
//! [`open`] measures, once (about 0.1 s in all):
//! - the FP64 rate: one warm-up and one timed cuBLAS `dgemm` of n = 4096,
//!   timed with events; this is `peak_flops` and the rate of `expected_time`;
//! - the link: a 64 MiB upload through the staging pool, wall-clock timed,
//!   i.e. what `copy` really costs (host memcpy and DMA overlapped), with a
//!   fixed 10 µs latency;
//! - the memory limit: 90 % of the free device memory after the context,
//!   cuBLAS and the kernels are set up, leaving room for cuBLAS workspace.
//!
//! [`check::self_check`] runs every raw operation (not the [`views`] nor the
//! codelets built on them) against a CPU reference on a real GPU; `cargo test`
//! has no GPU and tests only the host-side logic.

pub mod blas;
pub mod check;
mod device;
pub mod kernels;
pub mod resident;
pub mod solver;
pub mod views;
pub mod warm;

pub use blas::{dgemm_minus, dtrsm_unit_lower_left};
pub use check::{self_check, CheckLine};
pub use device::CudaDevice;
pub use kernels::{d2d_bandwidth, laswp, spmv_csr};
pub use warm::warm_up_lu;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{result, sys};

/// Bytes of one pinned staging chunk. Small enough that a 2048-wide tile
/// (32 MiB) is four pieces whose host copies overlap the DMA of the others:
/// with one 32 MiB chunk per tile the copy and the DMA ran one after the
/// other (6.1 GB/s on an H200 node, where either alone is faster).
pub const STAGING_CHUNK_BYTES: usize = 8 << 20;
/// Most pinned staging chunks a device allocates (128 MiB in all).
pub const STAGING_CHUNKS: usize = 16;
/// Most chunks one copy holds, so that four copies (the device worker's and
/// prefetches) proceed at once without waiting for chunks.
pub const STAGING_LEASE: usize = 4;
/// Most host threads that copy one piece into or out of its staging chunk.
/// One thread's `memcpy` into pinned memory ran at 11.2 GB/s on an H200
/// node whose DMA runs at 55 GB/s: the host copy, not the link, bounded
/// every staged transfer (9.8 GB/s up, 8.4 down).
pub const STAGING_COPY_THREADS: usize = 4;

/// What [`detect`] reports about one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaInfo {
    /// Device ordinal (`cuDeviceGet`).
    pub index: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Total device memory in bytes.
    pub total_mem: u64,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// (major, minor), e.g. (9, 0) for Hopper.
    pub compute_capability: (u32, u32),
}

/// `GPU 0 NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90, 132 SMs)`.
impl std::fmt::Display for CudaInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GPU {} {} ({:.1} GiB, sm_{}{}, {} SMs)",
            self.index,
            self.name,
            self.total_mem as f64 / (1u64 << 30) as f64,
            self.compute_capability.0,
            self.compute_capability.1,
            self.sm_count
        )
    }
}

/// Detects the driver, cuBLAS and NVRTC with `is_culib_present()` (before
/// any other call) and lists the GPUs. `Err` carries a one-line reason
/// ("no CUDA driver (libcuda.so not found)", "libcublas not found; …",
/// "no GPU"); never panics.
pub fn detect() -> Result<Vec<CudaInfo>, String> {
    catch_unwind(detect_inner).unwrap_or_else(|p| {
        Err(format!(
            "CUDA detection failed: {}",
            tessera_engine::fmt::panic_message(&*p)
        ))
    })
}

fn detect_inner() -> Result<Vec<CudaInfo>, String> {
    // SAFETY: `is_culib_present` only tries to dlopen the library under its
    // usual names and closes it again; it calls nothing in it.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda.so not found)".into());
    }
    // SAFETY: as above.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err("libcublas not found; add the toolkit's lib64 to LD_LIBRARY_PATH".into());
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("libnvrtc not found; add the toolkit's lib64 to LD_LIBRARY_PATH".into());
    }
    match result::init() {
        Ok(()) => {}
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => return Err("no GPU".into()),
        // Seen on an H200 node whose LD_LIBRARY_PATH named the toolkit's
        // `lib64/stubs`: cudarc opens `libcuda.so` before `libcuda.so.1`.
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_STUB_LIBRARY => {
            return Err("cuInit: the libcuda.so found first is the CUDA toolkit's stub (is a `stubs` folder on LD_LIBRARY_PATH?); the driver's libcuda.so.1 must come first".into())
        }
        Err(e) => return Err(format!("cuInit failed: {}", driver_error(e))),
    }
    let count = result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount: {}", driver_error(e)))?;
    if count <= 0 {
        return Err("no GPU".into());
    }
    (0..count as usize).map(device_info).collect()
}

fn device_info(index: usize) -> Result<CudaInfo, String> {
    let what = |call: &str, e| format!("GPU {index}: {call}: {}", driver_error(e));
    let dev = result::device::get(index as i32).map_err(|e| what("cuDeviceGet", e))?;
    let name = result::device::get_name(dev).map_err(|e| what("cuDeviceGetName", e))?;
    // SAFETY: `dev` is a valid device handle from `cuDeviceGet` above.
    let total_mem =
        unsafe { result::device::total_mem(dev) }.map_err(|e| what("cuDeviceTotalMem", e))?;
    let attr = |a| {
        // SAFETY: `dev` is a valid device handle; `a` is a device attribute.
        unsafe { result::device::get_attribute(dev, a) }
            .map(|v| v.max(0) as u32)
            .map_err(|e| what("cuDeviceGetAttribute", e))
    };
    use sys::CUdevice_attribute::*;
    Ok(CudaInfo {
        index,
        name,
        total_mem: total_mem as u64,
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        compute_capability: (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
    })
}

/// Opens GPU `index`: context, streams, cuBLAS handle bound to the compute
/// stream, NVRTC-compiled kernels, start-up measurements (see the module
/// docs).
pub fn open(index: usize) -> Result<Arc<CudaDevice>, String> {
    let gpus = detect()?;
    let info = gpus
        .get(index)
        .cloned()
        .ok_or_else(|| format!("no GPU {index}: {} found", gpus.len()))?;
    catch_unwind(AssertUnwindSafe(|| CudaDevice::open(info)))
        .unwrap_or_else(|p| {
            Err(format!(
                "opening GPU {index} failed: {}",
                tessera_engine::fmt::panic_message(&*p)
            ))
        })
        .map(Arc::new)
}

/// Which GPUs a spec names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GpuSpec {
    /// Every GPU found.
    All,
    /// The first `n` GPUs (0: none).
    Count(usize),
    /// These ordinals, in this order.
    List(Vec<usize>),
}

/// Parses "all", "none", a count ("2") or a list ("0,2"; a single ordinal is
/// written with a trailing comma, "2,"), with no device call.
pub(crate) fn parse_spec(spec: &str) -> Result<GpuSpec, String> {
    let s = spec.trim();
    match s {
        "all" => return Ok(GpuSpec::All),
        "none" | "" => return Ok(GpuSpec::Count(0)),
        _ => {}
    }
    let number = |t: &str| {
        t.trim().parse::<usize>().map_err(|_| {
            format!("GPU spec '{spec}': '{}' is not a GPU number (expected \"all\", \"none\", a count such as \"2\" or a list such as \"0,2\")", t.trim())
        })
    };
    if !s.contains(',') {
        return number(s).map(GpuSpec::Count);
    }
    let body = s.strip_suffix(',').unwrap_or(s);
    let list = body.split(',').map(number).collect::<Result<Vec<_>, _>>()?;
    for (i, g) in list.iter().enumerate() {
        if list[..i].contains(g) {
            return Err(format!("GPU spec '{spec}': GPU {g} is listed twice"));
        }
    }
    Ok(GpuSpec::List(list))
}

/// `spec`: "all", "none", a count "2", or a list "0,2" (one ordinal: "2,").
/// Opens them; `Err` names what is wrong.
pub fn open_spec(spec: &str) -> Result<Vec<Arc<CudaDevice>>, String> {
    let wanted = match parse_spec(spec)? {
        GpuSpec::Count(0) => return Ok(Vec::new()),
        GpuSpec::List(l) if l.is_empty() => return Ok(Vec::new()),
        w => w,
    };
    let found = detect()
        .map_err(|e| format!("GPU spec '{spec}': {e}"))?
        .len();
    let indices: Vec<usize> = match wanted {
        GpuSpec::All => (0..found).collect(),
        GpuSpec::Count(n) if n > found => {
            return Err(format!(
                "GPU spec '{spec}': {n} GPUs asked for, {found} found"
            ))
        }
        GpuSpec::Count(n) => (0..n).collect(),
        GpuSpec::List(l) => {
            if let Some(bad) = l.iter().find(|&&g| g >= found) {
                return Err(format!(
                    "GPU spec '{spec}': no GPU {bad} ({found} found, numbered from 0)"
                ));
            }
            l
        }
    };
    indices
        .into_iter()
        .map(|i| open(i).map_err(|e| format!("GPU spec '{spec}': {e}")))
        .collect()
}

/// A driver error as "CUDA_ERROR_X (text)".
pub(crate) fn driver_error(e: cudarc::driver::DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

#[cfg(test)]
mod tests {
    //! Host-side behaviour with no GPU: detection fails cleanly and specs parse.
    use super::*;

    #[test]
    fn info_describes_the_gpu_in_one_line() {
        let info = CudaInfo {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            total_mem: 80 << 30,
            sm_count: 132,
            compute_capability: (9, 0),
        };
        assert_eq!(
            info.to_string(),
            "GPU 0 NVIDIA H100 80GB HBM3 (80.0 GiB, sm_90, 132 SMs)"
        );
    }

    #[test]
    fn detect_without_gpu_is_err_not_panic() {
        // This machine (and CI) has no driver. On a GPU machine the test
        // only checks that detect returns.
        match detect() {
            Ok(gpus) => assert!(!gpus.is_empty()),
            Err(e) => {
                assert!(!e.is_empty());
                assert!(!e.contains('\n'), "one-line reason: {e}");
            }
        }
    }

    #[test]
    fn open_spec_none_is_empty() {
        assert!(open_spec("none").unwrap().is_empty());
        assert!(open_spec("0").unwrap().is_empty());
    }

    #[test]
    fn bad_specs_name_the_spec() {
        for bad in ["0,x", "-1", "two", "1,1", "0,,2"] {
            let e = open_spec(bad).err().expect(bad);
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn specs_parse() {
        assert_eq!(parse_spec("all"), Ok(GpuSpec::All));
        assert_eq!(parse_spec(" none "), Ok(GpuSpec::Count(0)));
        assert_eq!(parse_spec("2"), Ok(GpuSpec::Count(2)));
        assert_eq!(parse_spec("0,2"), Ok(GpuSpec::List(vec![0, 2])));
        assert_eq!(parse_spec("2,"), Ok(GpuSpec::List(vec![2])));
        assert_eq!(parse_spec("3, 1"), Ok(GpuSpec::List(vec![3, 1])));
        assert!(parse_spec("1,1").is_err());
        assert!(parse_spec(",").is_err());
    }
}
