//! One GPU as an engine device: its context, streams, cuBLAS handle,
//! kernels, pinned staging pool and start-up measurements (design in the
//! [module docs](super)).

use std::any::Any;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaStream};
use tessera_engine::device::{Device, DeviceBuffer, DeviceMemory, Link, TaskCost};
// Every lock of this backend ignores poison: each state its mutexes guard
// stays consistent across a panic, which can only come from a device body,
// between complete operations.
use tessera_engine::util::lock;

use super::blas::BlasHandle;
use super::kernels::{Kernels, LaswpScratch, SpmvLanes};
use super::{
    driver_error, CudaInfo, STAGING_CHUNKS, STAGING_CHUNK_BYTES, STAGING_COPY_THREADS,
    STAGING_LEASE,
};

/// Fixed cost of one `run` (kernel launch and event round trip), added by
/// `expected_time`.
const LAUNCH_LATENCY: Duration = Duration::from_micros(10);
/// Per-transfer latency of the link model.
const LINK_LATENCY: Duration = Duration::from_micros(10);
/// Size of the start-up dgemm (2·4096³ flop: a few ms on an H100).
const CALIBRATION_N: usize = 4096;
/// Size of the start-up upload that measures the link.
const LINK_PROBE_BYTES: usize = 64 << 20;
/// Share of the free device memory left to the runtime; the rest is for
/// cuBLAS workspace, our scratch buffers and other users of the GPU.
const MEMORY_FRACTION: f64 = 0.9;

/// One NVIDIA GPU, opened by [`open`](super::open).
///
/// Thread use: the device worker calls `run` (and, inside it, the `blas` and
/// `kernels` functions, which enqueue on the compute stream); the device
/// worker and the prefetch thread call `upload`/`download` concurrently. Every
/// entry point makes the context current on the calling thread first.
///
/// Lock order: `run_events` (held by `run` across the body) before `blas`,
/// `scratch` or `spmv_lanes`, which are never held together; the staging
/// pool's lock is held only inside the pool.
pub struct CudaDevice {
    info: CudaInfo,
    /// The cuBLAS handle, bound to `compute`. A handle must not be used by
    /// two threads at once, hence the lock.
    pub(crate) blas: Mutex<BlasHandle>,
    /// NVRTC-compiled kernels (read-only after `open`).
    pub(crate) kernels: Kernels,
    /// Device scratch and descriptor buffers of `laswp`.
    pub(crate) scratch: Mutex<LaswpScratch>,
    /// `spmv_csr`'s lanes-per-row choices, cached per CSR block.
    pub(crate) spmv_lanes: SpmvLanes,
    /// cuSOLVER handle and panel scratch, created on the first GPU panel.
    pub(crate) solver: Mutex<Option<super::solver::Solver>>,
    /// Start and end events of `run`, with timing enabled.
    run_events: Mutex<(CudaEvent, CudaEvent)>,
    staging: StagingPool,
    /// Streams: cuBLAS and kernels; host→device copies; device→host copies.
    compute: Arc<CudaStream>,
    h2d: Arc<CudaStream>,
    d2h: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    /// Written once in `open`, before the device is shared.
    memory_limit: u64,
    link: Link,
    dgemm_flops: f64,
    /// The last error `run` met (it cannot return one).
    last_error: Mutex<Option<String>>,
}

impl CudaDevice {
    /// Sets the device up (see [`open`](super::open)).
    pub(crate) fn open(info: CudaInfo) -> Result<Self, String> {
        let index = info.index;
        let err = |what: &str, e| format!("cuda{index}: {what}: {}", driver_error(e));
        let ctx = CudaContext::new(index).map_err(|e| err("creating the context", e))?;
        // SAFETY: no CudaSlice is created by this backend; buffers are raw
        // device pointers whose uses the engine orders (see module docs).
        unsafe { ctx.disable_event_tracking() };
        let compute = ctx.new_stream().map_err(|e| err("creating a stream", e))?;
        let h2d = ctx.new_stream().map_err(|e| err("creating a stream", e))?;
        let d2h = ctx.new_stream().map_err(|e| err("creating a stream", e))?;
        let blas = BlasHandle::new(&compute).map_err(|e| format!("cuda{index}: {e}"))?;
        let kernels = Kernels::load(&ctx, info.compute_capability)
            .map_err(|e| format!("cuda{index}: {e}"))?;
        let timing = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let run_events = (
            timing().map_err(|e| err("creating an event", e))?,
            timing().map_err(|e| err("creating an event", e))?,
        );
        let mut dev = CudaDevice {
            info,
            blas: Mutex::new(blas),
            kernels,
            scratch: Mutex::new(LaswpScratch::default()),
            spmv_lanes: SpmvLanes::default(),
            solver: Mutex::new(None),
            run_events: Mutex::new(run_events),
            staging: StagingPool::new(ctx.clone()),
            compute,
            h2d,
            d2h,
            ctx,
            memory_limit: 0,
            link: Link {
                latency: LINK_LATENCY,
                bandwidth: 1.0,
            },
            dgemm_flops: 1.0,
            last_error: Mutex::new(None),
        };
        dev.dgemm_flops = dev
            .measure_dgemm(CALIBRATION_N)
            .map_err(|e| format!("cuda{index}: dgemm calibration: {e}"))?;
        dev.link.bandwidth = dev
            .measure_upload(LINK_PROBE_BYTES)
            .map_err(|e| format!("cuda{index}: link measurement: {e}"))?;
        let (free, _total) = dev.ctx.mem_get_info().map_err(|e| err("cuMemGetInfo", e))?;
        dev.memory_limit = (free as f64 * MEMORY_FRACTION) as u64;
        Ok(dev)
    }

    /// What [`detect`](super::detect) said about this GPU.
    pub fn info(&self) -> &CudaInfo {
        &self.info
    }

    /// cuBLAS dgemm rate measured at `open` (n = 4096), in GFLOP/s.
    pub fn dgemm_gflops(&self) -> f64 {
        self.dgemm_flops / 1e9
    }

    /// The CUDA context (for device bodies with their own kernels).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The compute stream: device bodies enqueue their work here, and `run`
    /// waits for it.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.compute
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<(), String> {
        self.ctx.bind_to_thread().map_err(|e| {
            format!(
                "{}: making the context current: {}",
                self.name(),
                driver_error(e)
            )
        })
    }

    /// Waits for everything enqueued on the compute stream (for callers
    /// outside `run`, such as [`self_check`](super::self_check)).
    pub fn synchronize(&self) -> Result<(), String> {
        self.bind()?;
        self.compute
            .synchronize()
            .map_err(|e| format!("{}: compute stream: {}", self.name(), driver_error(e)))
    }

    /// Copies `src` to device address `dst`, after everything already queued
    /// on the compute stream (a device body writing results the host
    /// computed, e.g. pivots, into its data).
    ///
    /// # Safety
    /// `dst .. dst + src.len()` is device memory of this context that the
    /// caller may write (its task's W/RW data).
    pub unsafe fn upload_ptr(&self, src: &[u8], dst: u64) -> Result<(), String> {
        if src.is_empty() {
            return Ok(());
        }
        self.synchronize()?;
        self.upload_to(src, dst)
    }

    /// Copies `dst.len()` bytes from device address `src` to the host, after
    /// everything already queued on the compute stream (so a device body can
    /// read back what it just computed, e.g. pivots).
    ///
    /// Safe to call with any address: the driver validates device addresses
    /// and returns an error for one outside this context's allocations; the
    /// host side is `dst`, a valid slice.
    pub fn download_ptr(&self, src: u64, dst: &mut [u8]) -> Result<(), String> {
        if dst.is_empty() {
            return Ok(());
        }
        if src == 0 {
            return Err(format!(
                "{}: download_ptr: null device address",
                self.name()
            ));
        }
        self.synchronize()?;
        self.download_from(src, dst)
    }

    /// Takes the last error `run` or `copy` met, if any. `run` also returns
    /// its errors (the task fails); `copy` cannot (the copy itself reports
    /// through `DeviceMemory`), so a failed context bind there is kept here
    /// and printed once.
    pub fn take_error(&self) -> Option<String> {
        lock(&self.last_error).take()
    }

    fn note_error(&self, e: String) {
        let mut last = lock(&self.last_error);
        if last.is_none() {
            eprintln!("tessera: {e}");
        }
        *last = Some(e);
    }

    /// Allocates `bytes` of device memory (0 gives a null buffer).
    pub(crate) fn alloc_raw(&self, bytes: usize) -> Result<CudaBuffer, String> {
        if bytes == 0 {
            return Ok(CudaBuffer {
                ptr: 0,
                bytes: 0,
                ctx: self.ctx.clone(),
            });
        }
        self.bind()?;
        // SAFETY: the context is current; the allocation is freed once, by
        // CudaBuffer's Drop.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            format!(
                "{}: cuMemAlloc of {bytes} bytes: {}",
                self.name(),
                driver_error(e)
            )
        })?;
        Ok(CudaBuffer {
            ptr,
            bytes,
            ctx: self.ctx.clone(),
        })
    }

    /// Copies `src` to device address `dst` through the staging pool.
    ///
    /// The caller guarantees `dst .. dst + src.len()` is device memory of
    /// this context that no queued kernel uses.
    pub(crate) fn upload_to(&self, src: &[u8], dst: u64) -> Result<(), String> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let err = |what: &str, e| format!("{}: upload: {what}: {}", self.name(), driver_error(e));
        let pieces = src.len().div_ceil(STAGING_CHUNK_BYTES);
        let lease = self.staging.acquire(pieces.min(STAGING_LEASE));
        if lease.chunks.is_empty() {
            // No pinned memory at all: the driver's pageable path.
            // SAFETY: `dst` holds `src.len()` bytes (caller); the copy is
            // synchronous, so `src` outlives it.
            return unsafe { result::memcpy_htod_sync(dst, src) }
                .map_err(|e| err("cuMemcpyHtoD", e));
        }
        let n = lease.chunks.len();
        for (i, piece) in src.chunks(STAGING_CHUNK_BYTES).enumerate() {
            let chunk = &lease.chunks[i % n];
            // The DMA that last read this chunk must be done before we refill it.
            chunk
                .done
                .synchronize()
                .map_err(|e| err("waiting for a staging chunk", e))?;
            // SAFETY: the chunk holds STAGING_CHUNK_BYTES >= piece.len()
            // bytes, is held only by this lease, and no DMA reads it now.
            let staged = unsafe {
                copy_parallel(piece.as_ptr(), chunk.ptr, piece.len());
                std::slice::from_raw_parts(chunk.ptr, piece.len())
            };
            let at = dst + (i * STAGING_CHUNK_BYTES) as u64;
            // SAFETY: `at .. at + piece.len()` lies in the destination
            // (caller); `staged` is pinned and stays untouched until `done`
            // (recorded next) completes: we wait on it before reusing the
            // chunk, and the lease waits on it before returning the chunk.
            unsafe { result::memcpy_htod_async(at, staged, self.h2d.cu_stream()) }
                .map_err(|e| err("cuMemcpyHtoDAsync", e))?;
            chunk
                .done
                .record(&self.h2d)
                .map_err(|e| err("recording an event", e))?;
        }
        for chunk in &lease.chunks {
            chunk
                .done
                .synchronize()
                .map_err(|e| err("waiting for the copy", e))?;
        }
        Ok(())
    }

    /// Copies device address `src` into `dst` through the staging pool.
    ///
    /// The caller guarantees `src .. src + dst.len()` is device memory of
    /// this context that no queued kernel writes.
    pub(crate) fn download_from(&self, src: u64, dst: &mut [u8]) -> Result<(), String> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let err = |what: &str, e| format!("{}: download: {what}: {}", self.name(), driver_error(e));
        let total = dst.len();
        let pieces = total.div_ceil(STAGING_CHUNK_BYTES);
        let lease = self.staging.acquire(pieces.min(STAGING_LEASE));
        if lease.chunks.is_empty() {
            // SAFETY: `src` holds `dst.len()` bytes (caller); synchronous copy.
            return unsafe { result::memcpy_dtoh_sync(dst, src) }
                .map_err(|e| err("cuMemcpyDtoH", e));
        }
        let n = lease.chunks.len();
        let range = |i: usize| {
            (
                i * STAGING_CHUNK_BYTES,
                ((i + 1) * STAGING_CHUNK_BYTES).min(total),
            )
        };
        let enqueue = |i: usize, chunk: &PinnedChunk| -> Result<(), String> {
            let (a, b) = range(i);
            // SAFETY: the chunk holds STAGING_CHUNK_BYTES >= b - a bytes and
            // is held only by this lease; the host reads it only after
            // `done` (recorded next) completes.
            let staged = unsafe { std::slice::from_raw_parts_mut(chunk.ptr, b - a) };
            // SAFETY: `src + a .. src + b` lies in the source (caller).
            unsafe { result::memcpy_dtoh_async(staged, src + a as u64, self.d2h.cu_stream()) }
                .map_err(|e| err("cuMemcpyDtoHAsync", e))?;
            chunk
                .done
                .record(&self.d2h)
                .map_err(|e| err("recording an event", e))
        };
        for i in 0..n.min(pieces) {
            enqueue(i, &lease.chunks[i])?;
        }
        for i in 0..pieces {
            let chunk = &lease.chunks[i % n];
            chunk
                .done
                .synchronize()
                .map_err(|e| err("waiting for the copy", e))?;
            let (a, b) = range(i);
            // SAFETY: the DMA into the chunk is complete (event above) and
            // no other DMA targets it until we enqueue the next piece below.
            unsafe { copy_parallel(chunk.ptr, dst[a..b].as_mut_ptr(), b - a) };
            if i + n < pieces {
                enqueue(i + n, chunk)?;
            }
        }
        Ok(())
    }

    /// FP64 rate of one cuBLAS dgemm of size `n` (after one warm-up call),
    /// timed with events on the compute stream, in flop/s.
    pub(crate) fn measure_dgemm(&self, n: usize) -> Result<f64, String> {
        let bytes = n * n * 8;
        let bufs = [
            self.alloc_raw(bytes)?,
            self.alloc_raw(bytes)?,
            self.alloc_raw(bytes)?,
        ];
        let err = |what: &str, e| format!("{what}: {}", driver_error(e));
        for b in &bufs {
            // Bytes 0x3F make every f64 0x3F3F3F3F3F3F3F3F ≈ 4.8e-4: normal
            // numbers (no NaN, no subnormal), so the timing is representative.
            // SAFETY: `b` is a live allocation of `bytes` bytes.
            unsafe { result::memset_d8_async(b.ptr, 0x3F, bytes, self.compute.cu_stream()) }
                .map_err(|e| err("cuMemsetD8Async", e))?;
        }
        let [a, b, c] = &bufs;
        // SAFETY: a, b, c hold n·n doubles each, live until after the
        // synchronisation below.
        let gemm =
            || unsafe { super::blas::dgemm_minus(self, n, n, n, a.ptr, n, b.ptr, n, c.ptr, n) };
        let timed = gemm().and_then(|()| self.time_on_compute(gemm));
        // The buffers are freed on return: nothing may still use them.
        let _ = self.compute.synchronize();
        Ok(2.0 * (n as f64).powi(3) / (timed? / 1e3).max(1e-9))
    }

    /// Milliseconds of GPU time `body` enqueues on the compute stream
    /// (events around it, then a synchronisation).
    pub(crate) fn time_on_compute(
        &self,
        body: impl FnOnce() -> Result<(), String>,
    ) -> Result<f64, String> {
        self.bind()?;
        let err = |what: &str, e| format!("{what}: {}", driver_error(e));
        let timing = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        };
        let start = timing().map_err(|e| err("cuEventCreate", e))?;
        let end = timing().map_err(|e| err("cuEventCreate", e))?;
        start
            .record(&self.compute)
            .map_err(|e| err("cuEventRecord", e))?;
        let r = body();
        end.record(&self.compute)
            .map_err(|e| err("cuEventRecord", e))?;
        self.compute
            .synchronize()
            .map_err(|e| err("cuStreamSynchronize", e))?;
        r?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| err("cuEventElapsedTime", e))?;
        Ok(ms as f64)
    }

    /// The link's parts, for `gpu-check` (bytes/s each): raw DMA from and to
    /// one pinned buffer of `bytes` (no host copy), the host `memcpy` rate
    /// into pinned memory, and the staged upload and download that `copy`
    /// really does. Best of three after a warm-up.
    pub(crate) fn measure_link(&self, bytes: usize) -> Result<LinkRates, String> {
        self.bind()?;
        let err = |what: &str, e| format!("link probe: {what}: {}", driver_error(e));
        let buf = self.alloc_raw(bytes)?;
        let pinned = PinnedChunk::new(&self.ctx, bytes)?;
        let mut host = vec![0x5Au8; bytes];
        let best = |f: &mut dyn FnMut() -> Result<(), String>| -> Result<f64, String> {
            f()?;
            let mut t_best = f64::INFINITY;
            for _ in 0..3 {
                let t = Instant::now();
                f()?;
                t_best = t_best.min(t.elapsed().as_secs_f64());
            }
            Ok(bytes as f64 / t_best.max(1e-9))
        };
        // SAFETY: `pinned` holds `bytes` bytes, `buf` too; each copy is
        // waited for before the next and before both are freed.
        let pinned_h2d = best(&mut || unsafe {
            let src = std::slice::from_raw_parts(pinned.ptr, bytes);
            result::memcpy_htod_async(buf.ptr, src, self.h2d.cu_stream())
                .map_err(|e| err("cuMemcpyHtoDAsync", e))?;
            self.h2d.synchronize().map_err(|e| err("synchronize", e))
        })?;
        // SAFETY: as above.
        let pinned_d2h = best(&mut || unsafe {
            let dst = std::slice::from_raw_parts_mut(pinned.ptr, bytes);
            result::memcpy_dtoh_async(dst, buf.ptr, self.d2h.cu_stream())
                .map_err(|e| err("cuMemcpyDtoHAsync", e))?;
            self.d2h.synchronize().map_err(|e| err("synchronize", e))
        })?;
        // SAFETY: `pinned` holds `bytes` bytes and no DMA uses it now.
        let memcpy = best(&mut || {
            unsafe { std::ptr::copy_nonoverlapping(host.as_ptr(), pinned.ptr, bytes) };
            Ok(())
        })?;
        let staged_h2d = best(&mut || self.upload_to(&host, buf.ptr))?;
        let staged_d2h = best(&mut || self.download_from(buf.ptr, &mut host))?;
        Ok(LinkRates {
            pinned_h2d,
            pinned_d2h,
            memcpy,
            staged_h2d,
            staged_d2h,
        })
    }

    /// Effective upload bandwidth (bytes/s) over `bytes`: the best of two
    /// wall-clock-timed uploads after one warm-up (which also allocates the
    /// staging chunks). This is what `copy` costs: host memcpy and DMA
    /// overlapped, so it is below the raw PCIe/NVLink rate.
    fn measure_upload(&self, bytes: usize) -> Result<f64, String> {
        let buf = self.alloc_raw(bytes)?;
        let host = vec![0x5Au8; bytes];
        self.upload_to(&host, buf.ptr)?;
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let t = Instant::now();
            self.upload_to(&host, buf.ptr)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(bytes as f64 / best.max(1e-9))
    }

    fn check_buffer(&self, what: &str, buf: &dyn DeviceBuffer, len: usize) -> Result<(), String> {
        if buf.bytes() != len {
            return Err(format!(
                "{}: {what}: the host slice has {len} bytes, the device buffer {}",
                self.name(),
                buf.bytes()
            ));
        }
        if len > 0 && buf.ptr() == 0 {
            return Err(format!("{}: {what}: null device buffer", self.name()));
        }
        Ok(())
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Drain the streams while the context is current, so the fields
        // (cuBLAS handle, scratch, staging chunks, streams) are released
        // with no work in flight.
        if self.ctx.bind_to_thread().is_ok() {
            for s in [&self.compute, &self.h2d, &self.d2h] {
                let _ = s.synchronize();
            }
        }
    }
}

impl Device for CudaDevice {
    fn name(&self) -> String {
        format!("cuda{}", self.info.index)
    }

    fn arch(&self) -> &'static str {
        "cuda"
    }

    fn memory_limit(&self) -> Option<u64> {
        Some(self.memory_limit)
    }

    fn link(&self) -> Link {
        self.link
    }

    fn peak_flops(&self) -> f64 {
        self.dgemm_flops
    }

    fn half_rate_flops(&self) -> f64 {
        // `expected_time`'s model: a call costs its launch latency plus its
        // flops at the measured dgemm rate, so half the rate is reached
        // where the two are equal.
        LAUNCH_LATENCY.as_secs_f64() * self.dgemm_flops
    }

    fn expected_time(&self, cost: &TaskCost<'_>) -> Duration {
        LAUNCH_LATENCY + Duration::from_secs_f64(cost.flops.max(0.0) / self.dgemm_flops.max(1.0))
    }

    /// Records an event on the compute stream, runs `body` (which enqueues
    /// there), records a second event, synchronises, and returns the time
    /// between the events. An error at any of these steps (a kernel that
    /// faulted shows up at the synchronisation) fails the task.
    fn run(&self, cost: &TaskCost<'_>, body: &mut dyn FnMut()) -> Result<Duration, String> {
        self.bind()
            .map_err(|e| format!("{}: task '{}': {e}", self.name(), cost.codelet))?;
        let events = lock(&self.run_events);
        let started = events.0.record(&self.compute);
        body();
        let ended = events.1.record(&self.compute);
        let synced = self.compute.synchronize();
        let timed = match (started, ended, synced) {
            (Ok(()), Ok(()), Ok(())) => events.0.elapsed_ms(&events.1),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
        };
        timed
            .map(|ms| Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3))
            .map_err(|e| {
                format!(
                    "{}: task '{}': {}",
                    self.name(),
                    cost.codelet,
                    driver_error(e)
                )
            })
    }

    /// Makes the context current and runs `copy` (a synchronous upload or
    /// download through [`DeviceMemory`]); returns its wall time.
    fn copy(&self, _bytes: u64, copy: &mut dyn FnMut()) -> Duration {
        if let Err(e) = self.bind() {
            self.note_error(e);
        }
        let t = Instant::now();
        copy();
        t.elapsed()
    }

    fn memory(&self) -> Option<&dyn DeviceMemory> {
        Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl DeviceMemory for CudaDevice {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, String> {
        Ok(Box::new(self.alloc_raw(bytes)?))
    }

    fn upload(&self, src: &[u8], dst: &dyn DeviceBuffer) -> Result<(), String> {
        self.check_buffer("upload", dst, src.len())?;
        self.upload_to(src, dst.ptr())
    }

    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), String> {
        self.check_buffer("download", src, dst.len())?;
        self.download_from(src.ptr(), dst)
    }
}

/// `copy_nonoverlapping(src, dst, len)` split over up to
/// [`STAGING_COPY_THREADS`] scoped threads (one per MiB at least): a staged
/// copy's host side, which one thread could not do at the link's rate.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`: `src` readable and `dst` writable for
/// `len` bytes, not overlapping, and neither touched by anyone else until
/// this returns.
unsafe fn copy_parallel(src: *const u8, dst: *mut u8, len: usize) {
    const MIN_PART: usize = 1 << 20;
    let threads = STAGING_COPY_THREADS
        .min(std::thread::available_parallelism().map_or(1, |p| p.get()))
        .min(len / MIN_PART)
        .max(1);
    if threads == 1 {
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    let part = len.div_ceil(threads);
    // Addresses, not pointers, cross into the threads (raw pointers are not
    // Send); each thread copies its own disjoint byte range.
    let (src, dst) = (src as usize, dst as usize);
    std::thread::scope(|s| {
        for t in 1..threads {
            s.spawn(move || {
                let a = t * part;
                let n = part.min(len - a);
                // SAFETY: [a, a + n) lies inside both buffers (caller) and no
                // other thread touches it.
                unsafe {
                    std::ptr::copy_nonoverlapping((src + a) as *const u8, (dst + a) as *mut u8, n)
                };
            });
        }
        // SAFETY: as above, for the first part.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, part.min(len)) };
    });
}

/// A device allocation (`cuMemAlloc`), freed on drop.
pub(crate) struct CudaBuffer {
    pub(crate) ptr: u64,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer for CudaBuffer {
    fn ptr(&self) -> u64 {
        self.ptr
    }

    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // The engine frees a buffer only when no task or copy uses it, and
        // every device operation is synchronous, so nothing is in flight.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemAlloc in this context and is freed
        // only here.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// A page-locked host allocation (`cuMemHostAlloc`, flags 0: cached, not
/// write-combined) with an event marking the end of the last DMA that used it.
pub(crate) struct PinnedChunk {
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: usize,
    pub(crate) done: CudaEvent,
    ctx: Arc<CudaContext>,
}

// SAFETY: the chunk owns its allocation; whoever holds the chunk (one lease,
// or the laswp scratch under its lock) is the only one touching it.
unsafe impl Send for PinnedChunk {}

impl PinnedChunk {
    pub(crate) fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self, String> {
        let done = ctx.new_event(None).map_err(driver_error)?;
        // SAFETY: new_event made the context current; flags 0 is valid.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }.map_err(driver_error)?;
        Ok(PinnedChunk {
            ptr: ptr as *mut u8,
            bytes,
            done,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for PinnedChunk {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // No DMA may still use the memory when it is freed.
        let _ = self.done.synchronize();
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed only here.
        let _ = unsafe { result::free_host(self.ptr as _) };
    }
}

/// What [`CudaDevice::measure_link`] found, in bytes/s.
#[derive(Clone, Copy, Debug)]
pub struct LinkRates {
    /// Host→device DMA from pinned memory.
    pub pinned_h2d: f64,
    /// Device→host DMA into pinned memory.
    pub pinned_d2h: f64,
    /// One host thread's `memcpy` into pinned memory.
    pub memcpy: f64,
    /// `upload` through the staging pool (memcpy and DMA overlapped).
    pub staged_h2d: f64,
    /// `download` through the staging pool.
    pub staged_d2h: f64,
}

/// The pinned staging chunks of one device: at most [`STAGING_CHUNKS`],
/// allocated on first need.
struct StagingPool {
    ctx: Arc<CudaContext>,
    state: Mutex<PoolState>,
    /// Signalled when a lease returns its chunks.
    returned: Condvar,
}

struct PoolState {
    free: Vec<PinnedChunk>,
    /// Chunks in existence (free or leased).
    allocated: usize,
    /// cuMemHostAlloc failed once: do not try again.
    pinned_failed: bool,
}

/// Chunks taken from the pool; returns them, idle, on drop.
struct Lease<'a> {
    pool: &'a StagingPool,
    chunks: Vec<PinnedChunk>,
}

impl StagingPool {
    fn new(ctx: Arc<CudaContext>) -> Self {
        StagingPool {
            ctx,
            state: Mutex::new(PoolState {
                free: Vec::new(),
                allocated: 0,
                pinned_failed: false,
            }),
            returned: Condvar::new(),
        }
    }

    /// Takes between 1 and `want` chunks, allocating up to the cap first,
    /// and waits while all existing chunks are leased. Returns no chunk only
    /// when none could ever be allocated (the caller then copies pageable).
    ///
    /// Cannot deadlock: a caller takes all its chunks in one step, under the
    /// lock, and never waits while holding any; leases return theirs on drop.
    fn acquire(&self, want: usize) -> Lease<'_> {
        let want = want.max(1);
        let mut st = lock(&self.state);
        loop {
            while st.free.len() < want && st.allocated < STAGING_CHUNKS && !st.pinned_failed {
                match PinnedChunk::new(&self.ctx, STAGING_CHUNK_BYTES) {
                    Ok(c) => {
                        st.free.push(c);
                        st.allocated += 1;
                    }
                    Err(_) => st.pinned_failed = true,
                }
            }
            if !st.free.is_empty() {
                let keep = st.free.len() - want.min(st.free.len());
                let chunks = st.free.split_off(keep);
                return Lease { pool: self, chunks };
            }
            if st.allocated == 0 {
                return Lease {
                    pool: self,
                    chunks: Vec::new(),
                };
            }
            st = self.returned.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.chunks.is_empty() {
            return;
        }
        // On an early error return a DMA may still use a chunk: wait for it
        // before another caller may refill the chunk.
        for c in &self.chunks {
            let _ = c.done.synchronize();
        }
        lock(&self.pool.state).free.append(&mut self.chunks);
        self.pool.returned.notify_all();
    }
}

#[cfg(test)]
mod tests {
    //! The staging copy's host side, which needs no GPU.

    use super::copy_parallel;

    #[test]
    fn parallel_copy_equals_the_source_at_every_size() {
        // Below one part, at the edge, uneven parts, and more than the threads.
        for len in [
            0,
            1,
            (1 << 20) - 1,
            1 << 20,
            (2 << 20) + 3,
            (5 << 20) + 7,
            (17 << 20) + 1,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut dst = vec![0u8; len + 2];
            // SAFETY: `src` holds `len` bytes, `dst[1..]` at least `len`; distinct vectors.
            unsafe { copy_parallel(src.as_ptr(), dst[1..].as_mut_ptr(), len) };
            assert_eq!(&dst[1..=len], &src[..], "len {len}");
            assert_eq!((dst[0], dst[len + 1]), (0, 0), "len {len}: wrote outside");
        }
    }
}
