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

//!
//! Beside this file: the kernels' CUDA source (`laswp`), the triangular
//! solve from the factors left on the device (`solve`), and the host
//! memory's page-locking (`host`).

mod host;
mod laswp;
mod solve;

pub use host::HostRegistration;
pub use laswp::SOURCE;

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::cusolver::sys as cs;
use cudarc::driver::{
    result, sys, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};

use super::blas::{dgemm_minus_with, dtrsm_unit_lower_left_with, BlasHandle};
use tessera_engine::device::DeviceBuffer;

use super::device::CudaBuffer;
use super::{driver_error, CudaDevice};

/// The loaded kernels of [`SOURCE`].
struct Kernels {
    laswp_ld: CudaFunction,
    laswp_perm: CudaFunction,
    laswp_apply: CudaFunction,
}

/// Ints of one panel's move record (see [`SOURCE`]).
fn record_ints(nb: usize) -> usize {
    1 + 4 * nb
}

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
    /// Each panel's move record (`laswp_perm`), [`record_ints`] apart.
    moves: CudaBuffer,
    kernels: Kernels,
    events: Vec<CudaEvent>,
    /// A start and an end event per timed operation.
    timing: Vec<(CudaEvent, CudaEvent)>,
    streams: Vec<Arc<CudaStream>>,
    dev: &'d CudaDevice,
    n: usize,
    nb: usize,
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
        let moves = dev.alloc_raw(panels.max(1) * record_ints(nb) * 4)?;
        let module = super::kernels::load_module(ctx, dev.info().compute_capability, SOURCE)
            .map_err(|e| format!("{name}: resident LU: {e}"))?;
        let f = |k: &str| {
            module
                .load_function(k)
                .map_err(|e| format!("{name}: resident LU: kernel {k}: {}", driver_error(e)))
        };
        let kernels = Kernels {
            laswp_ld: f("laswp_ld")?,
            laswp_perm: f("laswp_perm")?,
            laswp_apply: f("laswp_apply")?,
        };
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
        let me = ResidentLu {
            dev,
            n,
            nb,
            streams,
            blas,
            solvers,
            a,
            ipiv,
            info,
            moves,
            kernels,
            events,
            timing,
        };
        me.warm_up()?;
        Ok(me)
    }

    /// Runs every operation once on a small zeroed corner of the matrix, on
    /// both compute streams, and waits: the libraries load their kernels on
    /// first use (0.2 s for the first cuSOLVER panel on an H200), which
    /// belongs to the set-up, not to the factorisation. The corner, its
    /// pivots, panel 0's info and move record are all overwritten by the
    /// run that follows.
    fn warm_up(&self) -> Result<(), String> {
        let w = self.n.min(self.nb).min(64);
        if w == 0 {
            return Ok(());
        }
        let err = |e| format!("resident LU: warm-up: {}", driver_error(e));
        // SAFETY: the first min(2w, n) columns are doubles of the matrix.
        unsafe { result::memset_d8_sync(self.a.ptr, 0, (2 * w).min(self.n) * self.n * 8) }
            .map_err(err)?;
        for &s in &COMPUTE {
            self.getrf(s, 0, 0, w, w)?;
            self.swap(s, 0, 0, w, 0, w)?;
            if self.n >= 2 * w {
                // Right of the corner, as in the factorisation (the solved
                // and updated block never overlaps the triangle).
                self.trsm(s, 0, w, w, 2 * w)?;
                self.gemm_at(s, 0, w / 2, w / 2, w, 2 * w)?;
            }
        }
        for st in &self.streams {
            st.synchronize().map_err(err)?;
        }
        // The solve's kernels too, on a zero right-hand side.
        self.solve_on_device(&vec![0.0; self.n], w)?;
        Ok(())
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
    /// `k`, then the panel's net row moves (`laswp_perm`); on stream `s`.
    pub fn panel(&self, s: usize, k: usize, r0: usize, w: usize) -> Result<(), String> {
        self.getrf(s, k, r0, self.n.saturating_sub(r0), w)
    }

    /// [`ResidentLu::panel`] over `m` rows.
    fn getrf(&self, s: usize, k: usize, r0: usize, m: usize, w: usize) -> Result<(), String> {
        self.check_block("panel", r0, r0, m, w)?;
        if k * 4 >= self.info.bytes() || w > self.nb {
            return Err(format!(
                "resident LU: panel {k} ({w} wide): no info slot or record"
            ));
        }
        let solver = &self.solvers[self.slot(s)?];
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
        })?;
        let npiv = m.min(w);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: (3 * npiv * 4) as u32,
        };
        let (piv, npiv64, rec, nb64) = (
            self.ipiv.ptr + 4 * r0 as u64,
            npiv as u64,
            self.move_record(k),
            self.nb as u64,
        );
        // SAFETY: the arguments match `laswp_perm`'s signature; npiv pivots
        // of this panel (cuSOLVER's, within its m rows); the record holds
        // 1 + 4 nb ints and npiv <= nb.
        unsafe {
            self.stream(s)?
                .launch_builder(&self.kernels.laswp_perm)
                .arg(&piv)
                .arg(&npiv64)
                .arg(&rec)
                .arg(&nb64)
                .launch(cfg)
        }
        .map(|_| ())
        .map_err(|e| {
            format!(
                "resident LU: panel {k}: launching laswp_perm: {}",
                driver_error(e)
            )
        })
    }

    /// Device address of panel `k`'s move record.
    fn move_record(&self, k: usize) -> u64 {
        self.moves.ptr + 4 * (k * record_ints(self.nb)) as u64
    }

    /// Applies panel `k`'s moves (its panel starts at row `r0`, `w` wide) to
    /// rows `r0..n` of columns `c0..c1`, on stream `s`.
    pub fn swap(
        &self,
        s: usize,
        k: usize,
        r0: usize,
        w: usize,
        c0: usize,
        c1: usize,
    ) -> Result<(), String> {
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
        if (k + 1) * record_ints(self.nb) * 4 > self.moves.bytes() || w > self.nb {
            return Err(format!("resident LU: swap: no move record for panel {k}"));
        }
        let ncols = (c1 - c0) as u64;
        let cfg = LaunchConfig {
            grid_dim: (ncols.min(65_535) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: (2 * w * 8) as u32,
        };
        let (a, lda, rec, nb64) = (
            self.at(r0, c0),
            self.n as u64,
            self.move_record(k),
            self.nb as u64,
        );
        // SAFETY: the arguments match `laswp_apply`'s signature; the record
        // (written by panel k's `laswp_perm`, ordered before this by the
        // plan) names at most 2w rows, all within rows r0..n; the columns
        // lie inside the matrix (checked).
        unsafe {
            self.stream(s)?
                .launch_builder(&self.kernels.laswp_apply)
                .arg(&a)
                .arg(&lda)
                .arg(&ncols)
                .arg(&rec)
                .arg(&nb64)
                .launch(cfg)
        }
        .map(|_| ())
        .map_err(|e| {
            format!(
                "resident LU: swap: launching laswp_apply: {}",
                driver_error(e)
            )
        })
    }

    /// `A(r0..r0+w, c0..c1) := L⁻¹ · A(r0..r0+w, c0..c1)`, `L` the unit lower
    /// triangle of the diagonal block at `r0`; on stream `s`. One cuBLAS
    /// call: split in two around a GEMM down to 256 rows it ran slower on
    /// an H200 (5.4 against 6.9 TFLOP/s at 2048 rows, 3.2 against 4.2 at
    /// 1024; `bench/results/h200-stop46/r1`, `r2`).
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
        self.gemm_at(s, r0, w, self.n.saturating_sub(r0 + w), c0, c1)
    }

    /// [`ResidentLu::gemm`] over the `m` rows below `r0 + w`.
    fn gemm_at(
        &self,
        s: usize,
        r0: usize,
        w: usize,
        m: usize,
        c0: usize,
        c1: usize,
    ) -> Result<(), String> {
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
