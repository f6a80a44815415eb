//! The device-resident LU's device side (as MAGMA's `dgetrf_gpu`): the
//! whole `n × n` matrix in one column-major allocation (leading dimension
//! `n`), so a step's trailing update is one cuBLAS call however many tile
//! columns it spans, and the panel is cuSOLVER's `dgetrf` in place, with
//! the pivots left on the device for the row-interchange kernel.
//!
//! This module only issues operations: [`ResidentLu`] owns the streams,
//! the handles bound to them, the events and the device buffers, and each
//! method enqueues one operation on the stream named by the caller. What
//! runs where and after what is the plan's business
//! (`tessera_linalg::lu::resident`), which is checked for races before it
//! is issued. Nothing here synchronises until [`ResidentLu::finish`].
//!
//! Streams (indices the plan uses): 0 host→device copies, 1 the panel
//! stream (the highest priority the device offers, so a panel's small
//! kernels are not queued behind a large GEMM's blocks: look-ahead), 2 the
//! update stream, 3 device→host copies. Streams 1 and 2 each have a cuBLAS
//! and a cuSOLVER handle with its own workspace.
//!
//! Host memory: [`HostRegistration`] page-locks the caller's tiles
//! (`cuMemHostRegister`), so the copies are DMA at the link's rate and
//! overlap the computation; where registration fails the copies still run
//! (the driver stages pageable memory) and the caller says so.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::cusolver::sys as cs;
use cudarc::driver::{result, sys, CudaEvent, CudaStream, LaunchConfig, PushKernelArg};

use super::blas::{dgemm_minus_with, dtrsm_unit_lower_left_with, BlasHandle};
use tessera_engine::device::DeviceBuffer;

use super::device::CudaBuffer;
use super::{driver_error, CudaDevice};

/// Number of streams of a [`ResidentLu`].
pub const STREAMS: usize = 4;
/// The streams that compute (and so have cuBLAS and cuSOLVER handles).
const COMPUTE: [usize; 2] = [1, 2];

/// A cuSOLVER handle bound to one stream, with its `dgetrf` workspace.
struct SolverHandle {
    handle: cs::cusolverDnHandle_t,
    work: CudaBuffer,
}

impl Drop for SolverHandle {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed only here.
        let _ = unsafe { cs::cusolverDnDestroy(self.handle) };
    }
}

/// What [`ResidentLu::finish`] reads back.
pub struct Finished {
    /// cuSOLVER's pivots for every row, 1-based, relative to the first row
    /// of their panel.
    pub ipiv: Vec<i32>,
    /// Each panel's `info` (0: fine; `i > 0`: exact zero pivot in the
    /// panel's column `i − 1`).
    pub info: Vec<i32>,
    /// Start and end of each timed operation, in seconds after the first
    /// timed start.
    pub times: Vec<(f64, f64)>,
}

/// One device-resident LU in flight (see the module doc).
///
/// Fields drop in declaration order: the handles and buffers before the
/// streams they are bound to (and `Drop` first waits for every stream).
pub struct ResidentLu<'d> {
    blas: Vec<BlasHandle>,
    solvers: Vec<SolverHandle>,
    a: CudaBuffer,
    ipiv: CudaBuffer,
    info: CudaBuffer,
    events: Vec<CudaEvent>,
    /// A start and an end event per timed operation.
    timing: Vec<(CudaEvent, CudaEvent)>,
    streams: Vec<Arc<CudaStream>>,
    dev: &'d CudaDevice,
    n: usize,
}

fn int(what: &str, v: usize) -> Result<c_int, String> {
    c_int::try_from(v).map_err(|_| format!("resident LU: {what} = {v} does not fit a C int"))
}

impl<'d> ResidentLu<'d> {
    /// Bytes of device memory [`ResidentLu::new`] takes for `n`, besides
    /// cuSOLVER's workspaces: the matrix, the pivots and the panels' infos.
    pub fn matrix_bytes(n: usize, panels: usize) -> u64 {
        (n as u64) * (n as u64) * 8 + (n as u64 + panels as u64) * 4
    }

    /// Allocates the matrix and creates the streams, handles, `events`
    /// synchronisation events and `timed` pairs of timing events, for
    /// panels of at most `nb` columns.
    pub fn new(
        dev: &'d CudaDevice,
        n: usize,
        nb: usize,
        panels: usize,
        events: usize,
        timed: usize,
    ) -> Result<Self, String> {
        let name = dev.info().to_string();
        let err = |what: &str, e| format!("{name}: resident LU: {what}: {}", driver_error(e));
        dev.bind()?;
        let ctx = dev.context();
        let (_least, greatest) =
            result::stream::get_priority_range().map_err(|e| err("stream priorities", e))?;
        let streams = (0..STREAMS)
            .map(|s| {
                if s == 1 {
                    ctx.new_stream_with_priority(greatest)
                } else {
                    ctx.new_stream()
                }
                .map_err(|e| err("creating a stream", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let nn = n
            .checked_mul(n)
            .and_then(|v| v.checked_mul(8))
            .ok_or("resident LU: n·n·8 overflows")?;
        let a = dev.alloc_raw(nn)?;
        let ipiv = dev.alloc_raw(n.max(1) * 4)?;
        let info = dev.alloc_raw(panels.max(1) * 4)?;
        let (ni, nbi) = (int("n", n)?, int("nb", nb.min(n).max(1))?);
        let mut blas = Vec::new();
        let mut solvers = Vec::new();
        for &s in &COMPUTE {
            blas.push(BlasHandle::new(&streams[s])?);
            let mut handle = std::ptr::null_mut();
            // SAFETY: writes a new handle into `handle`.
            unsafe { cs::cusolverDnCreate(&mut handle) }
                .result()
                .map_err(|e| format!("cusolverDnCreate: {:?}", e.0))?;
            // SAFETY: the handle is live; the stream outlives it (fields
            // of this struct, the solvers dropped first: declared before).
            unsafe { cs::cusolverDnSetStream(handle, streams[s].cu_stream() as cs::cudaStream_t) }
                .result()
                .map_err(|e| format!("cusolverDnSetStream: {:?}", e.0))?;
            let mut lwork: c_int = 0;
            // SAFETY: a size query on a live handle; `a` is n × n, lda n.
            unsafe {
                cs::cusolverDnDgetrf_bufferSize(handle, ni, nbi, a.ptr as *mut f64, ni, &mut lwork)
            }
            .result()
            .map_err(|e| format!("cusolverDnDgetrf_bufferSize: {:?}", e.0))?;
            let work = dev.alloc_raw((lwork.max(1) as usize) * 8)?;
            solvers.push(SolverHandle { handle, work });
        }
        let sync = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING));
        let events = (0..events)
            .map(|_| sync().map_err(|e| err("creating an event", e)))
            .collect::<Result<Vec<_>, _>>()?;
        let timed_event = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let timing = (0..timed)
            .map(|_| {
                Ok((
                    timed_event().map_err(|e| err("creating an event", e))?,
                    timed_event().map_err(|e| err("creating an event", e))?,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(ResidentLu {
            dev,
            n,
            streams,
            blas,
            solvers,
            a,
            ipiv,
            info,
            events,
            timing,
        })
    }

    fn stream(&self, s: usize) -> Result<&Arc<CudaStream>, String> {
        self.streams
            .get(s)
            .ok_or_else(|| format!("resident LU: no stream {s}"))
    }

    /// The compute slot (cuBLAS and cuSOLVER handles) of stream `s`.
    fn slot(&self, s: usize) -> Result<usize, String> {
        COMPUTE
            .iter()
            .position(|&c| c == s)
            .ok_or_else(|| format!("resident LU: stream {s} does not compute"))
    }

    /// Device address of element `(row, col)`.
    fn at(&self, row: usize, col: usize) -> u64 {
        self.a.ptr + 8 * (row + col * self.n) as u64
    }

    fn check_block(
        &self,
        what: &str,
        row0: usize,
        col0: usize,
        rows: usize,
        cols: usize,
    ) -> Result<(), String> {
        if row0 + rows > self.n || col0 + cols > self.n {
            return Err(format!(
                "resident LU: {what} of {rows}x{cols} at ({row0}, {col0}) leaves the {n}x{n} matrix",
                n = self.n
            ));
        }
        Ok(())
    }

    fn copy_2d(&self, s: usize, p: &sys::CUDA_MEMCPY2D, what: &str) -> Result<(), String> {
        let stream = self.stream(s)?.cu_stream();
        // SAFETY: the descriptor's addresses were checked by the callers
        // (device block inside the matrix, host block the caller's).
        unsafe { sys::cuMemcpy2DAsync_v2(p, stream) }
            .result()
            .map_err(|e| format!("resident LU: {what}: cuMemcpy2DAsync: {}", driver_error(e)))
    }

    /// Copies the host block `src` (`rows × cols`, column-major, leading
    /// dimension `rows`) to the matrix at `(row0, col0)`, on stream `s`.
    ///
    /// # Safety
    /// `src` stays allocated and unwritten until [`ResidentLu::finish`]
    /// returns (the copy is asynchronous).
    pub unsafe fn upload(
        &self,
        s: usize,
        src: &[f64],
        rows: usize,
        cols: usize,
        row0: usize,
        col0: usize,
    ) -> Result<(), String> {
        self.check_block("upload", row0, col0, rows, cols)?;
        if src.len() < rows * cols {
            return Err(format!(
                "resident LU: upload: {} values for a {rows}x{cols} block",
                src.len()
            ));
        }
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let p = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            srcHost: src.as_ptr() as *const c_void,
            srcDevice: 0,
            srcArray: std::ptr::null_mut(),
            srcPitch: rows * 8,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: self.at(row0, col0),
            dstArray: std::ptr::null_mut(),
            dstPitch: self.n * 8,
            WidthInBytes: rows * 8,
            Height: cols,
        };
        self.copy_2d(s, &p, "upload")
    }

    /// Copies the matrix block at `(row0, col0)` into the host block `dst`
    /// (`rows × cols`, leading dimension `rows`), on stream `s`.
    ///
    /// # Safety
    /// `dst` stays allocated, and is neither read nor written by the host,
    /// until [`ResidentLu::finish`] returns.
    pub unsafe fn download(
        &self,
        s: usize,
        dst: &mut [f64],
        rows: usize,
        cols: usize,
        row0: usize,
        col0: usize,
    ) -> Result<(), String> {
        self.check_block("download", row0, col0, rows, cols)?;
        if dst.len() < rows * cols {
            return Err(format!(
                "resident LU: download: {} values for a {rows}x{cols} block",
                dst.len()
            ));
        }
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let p = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: self.at(row0, col0),
            srcArray: std::ptr::null_mut(),
            srcPitch: self.n * 8,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            dstHost: dst.as_mut_ptr() as *mut c_void,
            dstDevice: 0,
            dstArray: std::ptr::null_mut(),
            dstPitch: rows * 8,
            WidthInBytes: rows * 8,
            Height: cols,
        };
        self.copy_2d(s, &p, "download")
    }

    /// Panel `k`: `dgetrf` of rows `r0..n` of columns `r0..r0 + w` in place,
    /// pivots into rows `r0..r0 + w` of the pivot array, `info` into slot
    /// `k`; on stream `s`.
    pub fn panel(&self, s: usize, k: usize, r0: usize, w: usize) -> Result<(), String> {
        self.check_block("panel", r0, r0, self.n.saturating_sub(r0), w)?;
        if k * 4 >= self.info.bytes() {
            return Err(format!("resident LU: panel {k}: no info slot"));
        }
        let solver = &self.solvers[self.slot(s)?];
        let m = self.n - r0;
        let (mi, wi, ldi) = (int("m", m)?, int("w", w)?, int("n", self.n)?);
        // SAFETY: the panel lies inside the matrix (checked); the workspace
        // was sized for the tallest panel of this width; pivots and info
        // lie inside their buffers (r0 + w <= n, k checked).
        unsafe {
            cs::cusolverDnDgetrf(
                solver.handle,
                mi,
                wi,
                self.at(r0, r0) as *mut f64,
                ldi,
                solver.work.ptr as *mut f64,
                (self.ipiv.ptr + 4 * r0 as u64) as *mut c_int,
                (self.info.ptr + 4 * k as u64) as *mut c_int,
            )
        }
        .result()
        .map_err(|e| {
            format!(
                "resident LU: panel {k}: cusolverDnDgetrf ({m}x{w}): {:?}",
                e.0
            )
        })
    }

    /// Applies the `w` pivots of the panel at row `r0` to rows `r0..n` of
    /// columns `c0..c1`, on stream `s`.
    pub fn swap(&self, s: usize, r0: usize, w: usize, c0: usize, c1: usize) -> Result<(), String> {
        self.check_block(
            "swap",
            r0,
            c0,
            self.n.saturating_sub(r0),
            c1.saturating_sub(c0),
        )?;
        if c1 <= c0 || w == 0 {
            return Ok(());
        }
        let ncols = (c1 - c0) as u64;
        let cfg = LaunchConfig {
            grid_dim: (
                u32::try_from(ncols.div_ceil(256))
                    .map_err(|_| "resident LU: swap: too many columns")?,
                1,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (a, lda, piv, npiv) = (
            self.at(r0, c0),
            self.n as u64,
            self.ipiv.ptr + 4 * r0 as u64,
            w as u64,
        );
        // SAFETY: the arguments match `laswp_ld`'s signature; the columns lie
        // inside the matrix (checked) and cuSOLVER's pivots stay within rows
        // r0..n of their panel.
        unsafe {
            self.stream(s)?
                .launch_builder(&self.dev.kernels.laswp_ld)
                .arg(&a)
                .arg(&lda)
                .arg(&ncols)
                .arg(&piv)
                .arg(&npiv)
                .launch(cfg)
        }
        .map(|_| ())
        .map_err(|e| format!("resident LU: swap: launching laswp_ld: {}", driver_error(e)))
    }

    /// `A(r0..r0+w, c0..c1) := L⁻¹ · A(r0..r0+w, c0..c1)`, `L` the unit lower
    /// triangle of the diagonal block at `r0`; on stream `s`.
    pub fn trsm(&self, s: usize, r0: usize, w: usize, c0: usize, c1: usize) -> Result<(), String> {
        self.check_block("trsm", r0, c0, w, c1.saturating_sub(c0))?;
        let blas = &self.blas[self.slot(s)?];
        // SAFETY: both blocks lie inside the matrix (checked) and do not
        // overlap (c0 >= r0 + w in every plan; L is read from columns r0..).
        unsafe {
            dtrsm_unit_lower_left_with(
                blas,
                w,
                c1.saturating_sub(c0),
                self.at(r0, r0),
                self.n,
                self.at(r0, c0),
                self.n,
            )
        }
    }

    /// `A(r0+w.., c0..c1) −= A(r0+w.., r0..r0+w) · A(r0..r0+w, c0..c1)`, on
    /// stream `s`.
    pub fn gemm(&self, s: usize, r0: usize, w: usize, c0: usize, c1: usize) -> Result<(), String> {
        let m = self.n.saturating_sub(r0 + w);
        self.check_block("gemm", r0, c0, w + m, c1.saturating_sub(c0))?;
        let blas = &self.blas[self.slot(s)?];
        // SAFETY: the three blocks lie inside the matrix (checked); C
        // (rows r0+w.., columns c0..) overlaps neither A (columns r0..r0+w,
        // c0 >= r0 + w) nor B (rows r0..r0+w).
        unsafe {
            dgemm_minus_with(
                blas,
                m,
                c1.saturating_sub(c0),
                w,
                self.at(r0 + w, r0),
                self.n,
                self.at(r0, c0),
                self.n,
                self.at(r0 + w, c0),
                self.n,
            )
        }
    }

    /// Records synchronisation event `e` on stream `s`.
    pub fn record(&self, s: usize, e: usize) -> Result<(), String> {
        let ev = self
            .events
            .get(e)
            .ok_or_else(|| format!("resident LU: no event {e}"))?;
        ev.record(self.stream(s)?)
            .map_err(|err| format!("resident LU: cuEventRecord: {}", driver_error(err)))
    }

    /// Makes stream `s` wait for event `e`'s last record.
    pub fn wait(&self, s: usize, e: usize) -> Result<(), String> {
        let ev = self
            .events
            .get(e)
            .ok_or_else(|| format!("resident LU: no event {e}"))?;
        self.stream(s)?
            .wait(ev)
            .map_err(|err| format!("resident LU: cuStreamWaitEvent: {}", driver_error(err)))
    }

    /// Marks the start (`end` false) or end of timed operation `i` on `s`.
    pub fn mark(&self, s: usize, i: usize, end: bool) -> Result<(), String> {
        let pair = self
            .timing
            .get(i)
            .ok_or_else(|| format!("resident LU: no timing slot {i}"))?;
        let ev = if end { &pair.1 } else { &pair.0 };
        ev.record(self.stream(s)?)
            .map_err(|err| format!("resident LU: cuEventRecord: {}", driver_error(err)))
    }

    /// Waits for every stream, then reads back the pivots, the panels'
    /// infos and the operations' times.
    pub fn finish(&self) -> Result<Finished, String> {
        self.dev.bind()?;
        for (s, st) in self.streams.iter().enumerate() {
            st.synchronize()
                .map_err(|e| format!("resident LU: stream {s}: {}", driver_error(e)))?;
        }
        let mut ipiv = vec![0i32; self.n];
        let mut info = vec![0i32; self.info.bytes() / 4];
        // SAFETY: the buffers hold exactly these many ints; every stream
        // is idle (synchronised above).
        unsafe {
            result::memcpy_dtoh_sync(&mut ipiv, self.ipiv.ptr)
                .and_then(|()| result::memcpy_dtoh_sync(&mut info, self.info.ptr))
        }
        .map_err(|e| format!("resident LU: reading the pivots: {}", driver_error(e)))?;
        let mut times = Vec::with_capacity(self.timing.len());
        if let Some((first, _)) = self.timing.first() {
            for (a, b) in &self.timing {
                let t0 = first.elapsed_ms(a).map_err(driver_error)? as f64 / 1e3;
                let t1 = first.elapsed_ms(b).map_err(driver_error)? as f64 / 1e3;
                times.push((t0, t1));
            }
        }
        Ok(Finished { ipiv, info, times })
    }
}

impl Drop for ResidentLu<'_> {
    fn drop(&mut self) {
        // Nothing may still use the buffers when they are freed.
        let _ = self.dev.bind();
        for st in &self.streams {
            let _ = st.synchronize();
        }
    }
}

/// Host memory page-locked for the duration of a resident LU
/// (`cuMemHostRegister`), unregistered on drop.
pub struct HostRegistration<'d> {
    dev: &'d CudaDevice,
    ptrs: Vec<*mut c_void>,
}

impl<'d> HostRegistration<'d> {
    /// Page-locks every block of `blocks` (pointer, bytes). The driver
    /// locks whole pages and refuses a range that overlaps one already
    /// registered, and two small tiles may share a page: so the blocks are
    /// widened to whole pages and merged where they touch, and each merged
    /// range is registered once. All or nothing: on a failure the ranges
    /// registered so far are released and the driver's reason returned.
    pub fn new(dev: &'d CudaDevice, blocks: &[(*mut u8, usize)]) -> Result<Self, String> {
        dev.bind()?;
        let mut reg = HostRegistration {
            dev,
            ptrs: Vec::new(),
        };
        for (start, bytes) in page_ranges(blocks, PAGE) {
            // SAFETY: every page of the range holds some of the caller's
            // live blocks (the rest of a page is mapped too: pages are the
            // unit of mapping); flags 0 (not portable, not mapped).
            unsafe { sys::cuMemHostRegister_v2(start as *mut c_void, bytes, 0) }
                .result()
                .map_err(|e| format!("cuMemHostRegister of {bytes} bytes: {}", driver_error(e)))?;
            reg.ptrs.push(start as *mut c_void);
        }
        Ok(reg)
    }
}

impl Drop for HostRegistration<'_> {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        for &p in &self.ptrs {
            // SAFETY: registered above, unregistered only here.
            let _ = unsafe { sys::cuMemHostUnregister(p) };
        }
    }
}

/// The page size the registration rounds to (x86-64 Linux's base page; a
/// larger real page only makes the ranges' ends fall inside one).
const PAGE: usize = 4096;

/// `blocks` widened to whole `page`s, sorted and merged where they overlap
/// or touch: (start, bytes) ranges, none empty.
fn page_ranges(blocks: &[(*mut u8, usize)], page: usize) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = blocks
        .iter()
        .filter(|b| b.1 > 0)
        .map(|&(p, bytes)| {
            let a = p as usize;
            (a / page * page, (a + bytes).div_ceil(page) * page)
        })
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out.into_iter().map(|(a, b)| (a, b - a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_merge_shared_pages() {
        let p = |a: usize| a as *mut u8;
        // Two blocks sharing page 1, one on its own, one empty.
        let r = page_ranges(
            &[
                (p(4096 + 100), 4000),
                (p(8192 + 10), 100),
                (p(40960), 8192),
                (p(99999), 0),
            ],
            4096,
        );
        assert_eq!(r, vec![(4096, 8192), (40960, 8192)]);
        // Touching blocks merge; out of order too.
        let r = page_ranges(&[(p(8192), 4096), (p(4096), 4096)], 4096);
        assert_eq!(r, vec![(4096, 8192)]);
    }
}
