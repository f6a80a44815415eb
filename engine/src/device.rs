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
//! 3. give the codelets it should run a body for it,
//!    `Codelet::device::<YourDevice>(..)`, next to their CPU body (in the
//!    codelet library, `tessera-tasks`); the body gets `&YourDevice` and typed
//!    views of the task's data ([`DeviceParts`] → `DevSlice`s). A device
//!    whose memory the host can address runs the CPU body on its own replicas
//!    when a codelet has no body for it (the emulated device);
//! 4. add a `Config::devices` entry; the runtime starts one device worker
//!    per device and one memory node for it.
//!
//! A device whose memory the host cannot address (a GPU) also implements
//! [`DeviceMemory`] and returns it from [`Device::memory`]. Replicas on its
//! node are then raw buffers, one per [`Replicate::parts`](crate::memory::Replicate::parts)
//! of the value (StarPU's data interfaces), reached by device bodies through
//! typed views ([`DevSlice`], [`DevSliceMut`]); CPU bodies never run there.

use std::any::Any;
use std::marker::PhantomData;
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
        // Saturating: a link built in code may hold any figures (NaN: zero).
        let moving = Duration::try_from_secs_f64(bytes as f64 / self.bandwidth.max(1.0))
            .unwrap_or(Duration::MAX);
        self.latency.saturating_add(moving)
    }
}

/// An accelerator.
pub trait Device: Send + Sync {
    /// Track and memory-node name, e.g. `emu0`.
    fn name(&self) -> String;

    /// Architecture name for perf models, e.g. `sim` or `cuda`.
    fn arch(&self) -> &'static str;

    /// Bytes of device memory the runtime may use (`None`: unlimited).
    fn memory_limit(&self) -> Option<u64>;

    /// The host ↔ device link.
    fn link(&self) -> Link;

    /// Peak rate in flop/s (the balancer's first guess: Roadrunner's peak ratio).
    fn peak_flops(&self) -> f64;

    /// Flops at which one call reaches half the device's rate (its fixed
    /// cost per call, in flops); 0 when unknown. Algorithms size the work
    /// they give a device from it (`tessera_linalg::lu`'s row blocks).
    fn half_rate_flops(&self) -> f64 {
        0.0
    }

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

    /// Whether tasks of `codelet` may run on this device at all (default:
    /// all; a simulated accelerator that only offloads DGEMM, like
    /// TSUBAME's ClearSpeed boards, says no to the rest).
    fn runs(&self, _codelet: &str) -> bool {
        true
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

/// Identifies the device a device view belongs to (the address of the
/// device object), so a backend can refuse a view of another device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceKey(usize);

impl DeviceKey {
    /// The key of `device`.
    pub fn of<D: ?Sized>(device: &D) -> DeviceKey {
        DeviceKey(device as *const D as *const () as usize)
    }
}

/// A replica in a device's own memory, while the task that holds it runs:
/// its parts (one buffer per [`Replicate::parts`](crate::memory::Replicate::parts))
/// and the shape figures recorded at registration
/// ([`Replicate::dims`](crate::memory::Replicate::dims)).
///
/// Each part can be taken once (as a [`DevSlice`] or a [`DevSliceMut`]), so
/// two writable views of one buffer never coexist.
pub struct DeviceParts<'a> {
    pub(crate) bufs: &'a [Box<dyn DeviceBuffer>],
    pub(crate) dims: [usize; 4],
    pub(crate) device: DeviceKey,
    /// Bit `i`: part `i` was taken.
    pub(crate) taken: u64,
}

impl<'a> DeviceParts<'a> {
    /// Number of parts.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Whether there is no part.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// The value's shape figures (`Replicate::dims`), e.g. `[rows, cols, 0, 0]`.
    pub fn dims(&self) -> [usize; 4] {
        self.dims
    }

    fn part<T: bytemuck::Pod>(&mut self, i: usize) -> Result<(u64, usize), String> {
        let b = self
            .bufs
            .get(i)
            .ok_or_else(|| format!("part {i} of a {}-part replica", self.bufs.len()))?;
        if i >= 64 || self.taken & (1 << i) != 0 {
            return Err(format!("part {i} was already taken (or is past part 63)"));
        }
        self.taken |= 1 << i;
        let size = std::mem::size_of::<T>().max(1);
        if b.bytes() % size != 0 || b.ptr() % std::mem::align_of::<T>() as u64 != 0 {
            return Err(format!(
                "part {i} ({} bytes at {:#x}) is not an array of {}",
                b.bytes(),
                b.ptr(),
                std::any::type_name::<T>()
            ));
        }
        Ok((b.ptr(), b.bytes() / size))
    }

    /// Part `i` as a read-only array of `T`.
    pub fn slice<T: bytemuck::Pod>(&mut self, i: usize) -> Result<DevSlice<'a, T>, String> {
        let (ptr, len) = self.part::<T>(i)?;
        Ok(DevSlice {
            ptr,
            len,
            device: self.device,
            _m: PhantomData,
        })
    }

    /// Part `i` as a writable array of `T` (only for data the task writes:
    /// [`DeviceData::view_mut`](crate::memory::DeviceData::view_mut) is the
    /// only caller the engine hands write access to).
    pub fn slice_mut<T: bytemuck::Pod>(&mut self, i: usize) -> Result<DevSliceMut<'a, T>, String> {
        let (ptr, len) = self.part::<T>(i)?;
        Ok(DevSliceMut {
            ptr,
            len,
            device: self.device,
            _m: PhantomData,
        })
    }
}

/// A read-only array of `T` in a device's own memory, valid while the task
/// that was handed it runs. Backends turn it into kernel arguments
/// (`CudaDevice`) or host slices (`EmuDevice`) after checking it is theirs.
#[derive(Debug)]
pub struct DevSlice<'a, T> {
    ptr: u64,
    len: usize,
    device: DeviceKey,
    _m: PhantomData<&'a [T]>,
}

impl<T> Clone for DevSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevSlice<'_, T> {}

/// A writable array of `T` in a device's own memory (see [`DevSlice`]).
#[derive(Debug)]
pub struct DevSliceMut<'a, T> {
    ptr: u64,
    len: usize,
    device: DeviceKey,
    _m: PhantomData<&'a mut [T]>,
}

/// The accessors both kinds of device view share.
macro_rules! view_accessors {
    ($view:ident) => {
        impl<'a, T> $view<'a, T> {
            /// Device address of the first element.
            pub fn ptr(&self) -> u64 {
                self.ptr
            }
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }
            /// Whether the array is empty.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
            /// The device whose memory holds it.
            pub fn device(&self) -> DeviceKey {
                self.device
            }
        }
    };
}

view_accessors!(DevSlice);
view_accessors!(DevSliceMut);

impl<'a, T> DevSliceMut<'a, T> {
    /// A writable view of the same array, for as long as this one is
    /// borrowed (to hand to an operation that takes its view by value, and
    /// use this one again after).
    pub fn reborrow(&mut self) -> DevSliceMut<'_, T> {
        DevSliceMut {
            ptr: self.ptr,
            len: self.len,
            device: self.device,
            _m: PhantomData,
        }
    }

    /// A read-only view of the same array, for as long as this one is borrowed.
    pub fn as_ref(&self) -> DevSlice<'_, T> {
        DevSlice {
            ptr: self.ptr,
            len: self.len,
            device: self.device,
            _m: PhantomData,
        }
    }
}
