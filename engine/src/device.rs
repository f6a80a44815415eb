//! Devices: accelerators behind one trait, each with its own memory node and
//! a device worker that drives it.
//!
//! Adding a backend (StarPU's driver checklist, condensed):
//! 1. implement [`Device`]: a name and arch for traces and perf models, a
//!    memory limit, a transfer model, `run` (execute a body, with whatever
//!    launch/synchronisation the device needs) and `copy` (move bytes between
//!    host and device memory);
//! 2. make the data types its kernels use implement
//!    [`Replicate`](crate::memory::Replicate), so they can have a replica on
//!    the device's memory node;
//! 3. give tasks a device body with `TaskBuilder::device_body` where the CPU
//!    body is not what the device should run (the sim device runs the CPU
//!    body on its own replicas);
//! 4. add a `Config::devices` entry; the runtime starts one device worker
//!    per device and one memory node for it.
//!
//! A device whose memory the host cannot address (a GPU) also implements
//! [`DeviceMemory`] and returns it from [`Device::memory`]. Replicas on its
//! node are then raw buffers, one per [`Replicate::parts`](crate::memory::Replicate::parts)
//! of the value (StarPU's data interfaces), reached by device bodies through
//! `TaskContext::device_parts`; CPU bodies never run there.

use std::any::Any;
use std::time::Duration;

/// What the runtime tells a device about a task it runs, for its cost model.
#[derive(Clone, Debug)]
pub struct TaskCost<'a> {
    /// Codelet name.
    pub codelet: &'a str,
    /// Floating-point operations the task declared (0 if unknown).
    pub flops: f64,
    /// Bytes of the data the task accesses.
    pub bytes: u64,
}

/// Host ↔ device link: time to move `bytes` is `latency + bytes / bandwidth`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Per-transfer latency.
    pub latency: Duration,
    /// Bytes per second.
    pub bandwidth: f64,
}

impl Link {
    /// Modelled time of one transfer.
    pub fn time(&self, bytes: u64) -> Duration {
        self.latency + Duration::from_secs_f64(bytes as f64 / self.bandwidth.max(1.0))
    }
}

/// An accelerator.
pub trait Device: Send + Sync {
    /// Track and memory-node name, e.g. `sim0`.
    fn name(&self) -> String;

    /// Architecture name for perf models, e.g. `sim` or `cuda`.
    fn arch(&self) -> &'static str;

    /// Bytes of device memory the runtime may use (`None`: unlimited).
    fn memory_limit(&self) -> Option<u64>;

    /// The host ↔ device link.
    fn link(&self) -> Link;

    /// Peak rate in flop/s (the balancer's first guess: Roadrunner's peak ratio).
    fn peak_flops(&self) -> f64;

    /// Expected execution time of a task, from the device's own speed table
    /// (used by `dmda` before measurements exist: Cashmere's order).
    fn expected_time(&self, cost: &TaskCost<'_>) -> Duration;

    /// Run `body` on the device. Returns the time the device took, which
    /// feeds the perf models, or what went wrong on the device after the
    /// body returned (e.g. a faulting kernel found at synchronisation): the
    /// task then fails like a failing body (and falls back to its CPU body).
    fn run(&self, cost: &TaskCost<'_>, body: &mut dyn FnMut()) -> Result<Duration, String>;

    /// Perform `copy` (the data movement itself) as a transfer of `bytes`
    /// over the link; returns the time it took.
    fn copy(&self, bytes: u64, copy: &mut dyn FnMut()) -> Duration;

    /// The device's own memory, when the host cannot address it; `None`
    /// (the default): replicas on this device's node are host values (sim).
    fn memory(&self) -> Option<&dyn DeviceMemory> {
        None
    }

    /// For device bodies that need the concrete device (a CUDA body gets its
    /// stream and cuBLAS handle this way).
    fn as_any(&self) -> &dyn Any;
}

/// One allocation in a device's own memory.
pub trait DeviceBuffer: Send + Sync {
    /// Device address (a `CUdeviceptr` for CUDA).
    fn ptr(&self) -> u64;
    /// Length in bytes.
    fn bytes(&self) -> usize;
}

/// Memory the host cannot address: allocation and synchronous host ↔ device
/// copies. Implementations order the copies as they like (CUDA: copy streams
/// and events) but return only once the copy is complete.
pub trait DeviceMemory: Send + Sync {
    /// Allocate `bytes` (may be 0).
    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, String>;
    /// Copy `src` into `dst` (same length).
    fn upload(&self, src: &[u8], dst: &dyn DeviceBuffer) -> Result<(), String>;
    /// Copy `src` into `dst` (same length).
    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), String>;
}
