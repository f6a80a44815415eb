//! Codelets: a kernel declared once, with a body per architecture (StarPU's
//! `cpu_funcs` / `cuda_funcs`), its flop model, perf-model key and label.
//!
//! A typed codelet `Codelet<A, P>` knows the shape of its tasks' data (`A`,
//! an [`Accesses`] list such as `(Read<Tile>, Read<Tile>, ReadWrite<Tile>)`)
//! and of their scalar arguments (`P`, e.g. a tile's coordinates). Its bodies
//! are plain functions of `(&P, borrows)`: a CPU body, and one body per device
//! type that has kernels for it. A task then only names the codelet, its data
//! and its arguments; the engine picks the body for the worker it lands on.
//!
//! A codelet used with the dynamic [`TaskBuilder`](crate::TaskBuilder) is
//! `Codelet<Dynamic>`: a name for traces and perf models, with the body given
//! per task.

use std::any::{Any, TypeId};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::access::{Accesses, Cursor, DeviceAccesses, Dynamic};
use crate::device::Device;
use crate::error::BodyError;
use crate::task::TaskContext;

/// A codelet's identity, its name and a process-wide id (traces and perf
/// models are keyed by them), and its bodies and models: one `Arc` per task
/// holds all of it (the bodies in an `Arc` of their own made every task
/// count two references; removing it did not measurably change
/// `bench/peers/overhead_ab.sh`, it is just one thing less).
#[derive(Clone)]
pub(crate) struct CodeletInfo {
    pub(crate) name: String,
    pub(crate) id: u32,
    pub(crate) bodies: Bodies,
}

impl std::fmt::Debug for CodeletInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeletInfo")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

pub(crate) type CodeletRef = Arc<CodeletInfo>;

static NEXT_CODELET_ID: AtomicU32 = AtomicU32::new(0);

/// An erased CPU body: the typed body behind a downcast of the arguments and
/// the cursor over the task's accesses.
pub(crate) type CpuFn =
    Arc<dyn Fn(&TaskContext<'_>, &dyn Any, &mut Cursor<'_>) -> Result<(), BodyError> + Send + Sync>;
/// An erased device body (the device is downcast to the body's type).
pub(crate) type DeviceFn = Arc<
    dyn Fn(&dyn Any, &TaskContext<'_>, &dyn Any, &mut Cursor<'_>) -> Result<(), BodyError>
        + Send
        + Sync,
>;

/// A model of a task from its (erased) arguments: flops, size key, label.
pub(crate) type ArgsFn<R> = Arc<dyn Fn(&dyn Any) -> R + Send + Sync>;

/// What a codelet declares besides its name, erased over `A` and `P`.
#[derive(Clone, Default)]
pub(crate) struct Bodies {
    pub(crate) cpu: Option<CpuFn>,
    /// One body per device type (`TypeId` of the concrete `Device`).
    pub(crate) devices: Vec<(TypeId, DeviceFn)>,
    pub(crate) flops: Option<ArgsFn<f64>>,
    pub(crate) size: Option<ArgsFn<u64>>,
    pub(crate) label: Option<ArgsFn<String>>,
    /// Its tasks run on a team of CPU workers of this size (`team`).
    pub(crate) team: Option<crate::team::TeamSize>,
    /// Its tasks may have no body on purpose ([`Codelet::empty`]).
    pub(crate) empty: bool,
}

impl Bodies {
    pub(crate) fn device(&self, ty: TypeId) -> Option<&DeviceFn> {
        self.devices.iter().find(|(t, _)| *t == ty).map(|(_, f)| f)
    }

    /// Whether there is a body for some device.
    pub(crate) fn has_device_body(&self) -> bool {
        !self.devices.is_empty()
    }
}

/// A kernel known to the runtime by name, with its bodies (see the module doc).
/// Cheap to clone; clones share the bodies and the identity.
///
/// Declare it once (a `static` behind a `LazyLock`, or a value made at
/// set-up), then submit tasks that name it, their data and their arguments:
///
/// ```
/// use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};
///
/// // y += a·x on one tile: the data's shape and modes (`A`), the
/// // arguments (`P` = the tile's index and `a`).
/// let axpy = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>), (usize, f64)>::with_args("axpy")
///     .flops(|_| 2.0 * 512.0)                         // statistics, dmda, simulation
///     .label(|&(i, _)| format!("axpy({i})"))           // built only when traced
///     .cpu(|_ctx, &(_, a), (x, y)| {                   // (&Vec<f64>, &mut Vec<f64>)
///         y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
///         Ok(())
///     });
///
/// let rt = Runtime::new(Config::with_workers(2))?;
/// let x = rt.register(vec![1.0; 512]);
/// let y: Vec<_> = (0..3).map(|_| rt.register(vec![0.0; 512])).collect();
/// for (i, y) in y.iter().enumerate() {
///     rt.task(&axpy, (x.r(), y.rw())).args((i, i as f64)).submit()?;
/// }
/// rt.wait_all()?;
/// assert_eq!(rt.unregister(y.into_iter().last().unwrap())?[0], 2.0);
/// # Ok::<(), tessera_engine::Error>(())
/// ```
///
/// Its name keys traces, perf models and a simulated platform's rates:
/// give your codelets names of their own (a user's `gemm` would be timed as
/// the LU's in a simulation, see [`simulate`](crate::simulate)).
pub struct Codelet<A = Dynamic, P = ()> {
    pub(crate) info: CodeletRef,
    _types: std::marker::PhantomData<fn(A, P)>,
}

impl<A, P> Clone for Codelet<A, P> {
    fn clone(&self) -> Self {
        Codelet {
            info: Arc::clone(&self.info),
            _types: std::marker::PhantomData,
        }
    }
}

impl<A, P> std::fmt::Debug for Codelet<A, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Codelet({})", self.info.name)
    }
}

impl<A> Codelet<A> {
    /// A codelet named `name` (e.g. `"scale"`) whose tasks take no
    /// arguments besides their data, with no body yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_args(name)
    }
}

impl<A, P> Codelet<A, P> {
    /// A codelet named `name` (e.g. `"gemm"`) whose tasks carry arguments
    /// of type `P` for its bodies (`Task::args`), with no body yet.
    pub fn with_args(name: impl Into<String>) -> Self {
        // Relaxed: the id only has to be unique, nothing is published through it.
        let id = NEXT_CODELET_ID.fetch_add(1, Ordering::Relaxed);
        Codelet {
            info: Arc::new(CodeletInfo {
                name: name.into(),
                id,
                bodies: Bodies::default(),
            }),
            _types: std::marker::PhantomData,
        }
    }

    /// The codelet's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// A process-wide unique id.
    pub fn id(&self) -> u32 {
        self.info.id
    }

    /// Declare that this codelet's tasks may do nothing on purpose (join
    /// points, placeholders, tasks that only order others or only carry a
    /// `then`): a task of it with no body for the worker that runs it then
    /// succeeds without running anything.
    ///
    /// Without it, a body-less task is a mistake (a forgotten `.cpu(..)`):
    /// [`Runtime::submit`](crate::Runtime::submit) refuses a task that no
    /// worker of the runtime could run, and a task that reaches a worker
    /// with no body for it fails. (A simulated runtime runs no body, so it
    /// takes any task.)
    ///
    /// ```
    /// # use tessera_engine::{Codelet, Runtime};
    /// let rt = Runtime::with_workers(1).unwrap();
    /// let h = rt.register(0u32);
    /// let forgot: Codelet<tessera_engine::ReadWrite<u32>> = Codelet::new("bump");
    /// assert!(rt.task(&forgot, h.rw()).submit().is_err());
    /// let join: Codelet<tessera_engine::ReadWrite<u32>> = Codelet::new("join").empty();
    /// rt.task(&join, h.rw()).submit().unwrap();
    /// rt.wait_all().unwrap();
    /// ```
    pub fn empty(mut self) -> Self {
        self.bodies_mut().empty = true;
        self
    }

    /// The label of a dynamic codelet's tasks from their arguments (like
    /// [`label`](Codelet::label), which typed codelets have): the engine's
    /// receive and send tasks build theirs only when traced.
    pub(crate) fn label_args(mut self, f: impl Fn(&P) -> String + Send + Sync + 'static) -> Self
    where
        P: 'static,
    {
        self.bodies_mut().label = Some(Arc::new(move |p| f(params::<P>(p))));
        self
    }

    fn bodies_mut(&mut self) -> &mut Bodies {
        // Before the first task (the builder methods are called at set-up),
        // so this does not copy.
        &mut Arc::make_mut(&mut self.info).bodies
    }
}

fn params<P: 'static>(p: &dyn Any) -> &P {
    p.downcast_ref::<P>()
        .expect("a task carries the argument type of its codelet")
}

impl<A: Accesses, P: Send + Sync + 'static> Codelet<A, P> {
    /// The CPU body: gets the worker's context, the task's arguments and its
    /// data borrowed as declared (`&T` for reads, `&mut T` for writes).
    ///
    /// A runtime may keep finished tasks' codelets (it reuses their nodes)
    /// until it is dropped, so a body must not own the runtime: submit from
    /// a body through [`Runtime::submitter`](crate::Runtime::submitter).
    ///
    /// **Type the closure's parameters when the codelet's type is left to
    /// inference.** With `Codelet::new("scale")` and `A` known only from a
    /// later `rt.task(&scale, x.rw())`, the closure is checked first: a call
    /// such as `scale_slice(v, 2.0)` (a `&mut [f64]` function) fixes `v` to
    /// `&mut [f64]`, and the error then comes out backwards, at the
    /// closure: "type mismatch resolving `<ReadWrite<Vec<f64>> as
    /// Accesses>::Cpu<'_> == &mut [f64]`: expected `&mut [f64]`, found
    /// `&mut Vec<f64>`":
    ///
    /// ```compile_fail,E0271
    /// # use tessera_engine::{Codelet, Config, Runtime};
    /// fn scale_slice(v: &mut [f64], a: f64) { v.iter_mut().for_each(|x| *x *= a) }
    /// let rt = Runtime::new(Config::with_workers(1)).unwrap();
    /// let x = rt.register(vec![1.0f64; 4]);
    /// let scale = Codelet::new("scale").cpu(|_, _, v| { scale_slice(v, 2.0); Ok(()) });
    /// rt.task(&scale, x.rw()).submit().unwrap();
    /// ```
    ///
    /// Type the parameter (`v: &mut Vec<f64>`; the call then coerces it to
    /// a slice), or name the codelet's type
    /// (`Codelet::<ReadWrite<Vec<f64>>>::new`):
    ///
    /// ```
    /// # use tessera_engine::{Codelet, Config, Runtime};
    /// fn scale_slice(v: &mut [f64], a: f64) { v.iter_mut().for_each(|x| *x *= a) }
    /// let rt = Runtime::new(Config::with_workers(1)).unwrap();
    /// let x = rt.register(vec![1.0f64; 4]);
    /// let scale = Codelet::new("scale").cpu(|_, _, v: &mut Vec<f64>| {
    ///     scale_slice(v, 2.0);
    ///     Ok(())
    /// });
    /// rt.task(&scale, x.rw()).submit().unwrap();
    /// rt.wait_all().unwrap();
    /// assert_eq!(rt.unregister(x).unwrap(), vec![2.0; 4]);
    /// ```
    pub fn cpu<F>(mut self, f: F) -> Self
    where
        F: for<'a> Fn(&TaskContext<'_>, &P, A::Cpu<'a>) -> Result<(), BodyError>
            + Send
            + Sync
            + 'static,
    {
        self.bodies_mut().cpu = Some(Arc::new(move |ctx, p, cur| {
            // SAFETY: the engine calls CPU bodies only with a cursor over the
            // accesses this codelet's tasks declared (the task was built from
            // an `A`), on a running task whose replicas are acquired on the
            // cursor's host-addressable node.
            let args = unsafe { A::cpu(cur) };
            f(ctx, params::<P>(p), args)
        }));
        self
    }

    /// A body for devices of type `D` (a GPU's kernels): gets the device, the
    /// task's arguments and typed views of its data in the device's memory.
    /// Used on a device worker of type `D` whose memory the host cannot
    /// address; if it fails, the task falls back to the CPU body (Cashmere).
    pub fn device<D, F>(mut self, f: F) -> Self
    where
        A: DeviceAccesses,
        D: Device + 'static,
        F: for<'a> Fn(&D, &P, A::Device<'a>) -> Result<(), BodyError> + Send + Sync + 'static,
    {
        let body: DeviceFn = Arc::new(move |dev, _ctx, p, cur| {
            let dev = dev
                .downcast_ref::<D>()
                .expect("device bodies are looked up by the device's type");
            let views = A::device(cur)?;
            f(dev, params::<P>(p), views)
        });
        let b = self.bodies_mut();
        b.devices.retain(|(t, _)| *t != TypeId::of::<D>());
        b.devices.push((TypeId::of::<D>(), body));
        self
    }

    /// Floating-point operations of a task, from its arguments (statistics,
    /// GFLOP/s, `dmda`'s first estimates, the emulated device's model).
    pub fn flops(mut self, f: impl Fn(&P) -> f64 + Send + Sync + 'static) -> Self {
        self.bodies_mut().flops = Some(Arc::new(move |p| f(params::<P>(p))));
        self
    }

    /// The perf-model size key of a task (default: its flops if any, else the
    /// bytes of its data).
    pub fn size(mut self, f: impl Fn(&P) -> u64 + Send + Sync + 'static) -> Self {
        self.bodies_mut().size = Some(Arc::new(move |p| f(params::<P>(p))));
        self
    }

    /// Its tasks run on a team of CPU workers (StarPU's parallel tasks): the
    /// CPU body runs once, on the team's leader, and fans work out to every
    /// member with [`Team::run`](crate::team::Team::run) (see
    /// [`crate::team`]). A task may override it (`Task::team`). A task that
    /// runs on a device worker (a device body) runs there alone.
    pub fn team(mut self, size: crate::team::TeamSize) -> Self {
        self.bodies_mut().team = Some(size);
        self
    }

    /// A task's label for traces and error messages, e.g. `gemm(3,4,5)`; built
    /// only when needed (a trace is recorded or a message written).
    pub fn label(mut self, f: impl Fn(&P) -> String + Send + Sync + 'static) -> Self {
        self.bodies_mut().label = Some(Arc::new(move |p| f(params::<P>(p))));
        self
    }
}
