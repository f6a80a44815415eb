//! Describing a task: typed ([`Task`], accesses as a tuple whose borrows the
//! body receives) or dynamic ([`TaskBuilder`], accesses added one by one and
//! reached through the [`TaskContext`]). A typed task erases into a
//! `TaskBuilder`, which is what the runtime, the symbolic front-end and
//! explicit-edge graphs take.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use super::{Body, DeviceMatch, Once, TaskContext, TaskHandle};
use crate::access::{AccessMode, Accesses, Declared, DeviceAccesses, Dynamic};
use crate::codelet::{Codelet, CodeletRef};
use crate::data::DataHandle;
use crate::device::Device;
use crate::error::{BodyError, Error};
use crate::runtime::Runtime;

/// A task described with a dynamic access list: data added one by one
/// ([`read`](Self::read), [`write`](Self::write), [`rw`](Self::rw)) and
/// reached inside the body through the [`TaskContext`], which checks modes at
/// run time. Prefer the typed [`Task`] (`rt.task(&codelet, (a.r(), b.rw()))`)
/// unless the list is only known at run time. Hand it to
/// [`Runtime::submit`](crate::Runtime::submit).
pub struct TaskBuilder {
    pub(crate) codelet: CodeletRef,
    pub(crate) params: Box<dyn Any + Send + Sync>,
    pub(crate) label: Option<Cow<'static, str>>,
    pub(crate) priority: i32,
    /// Explicit flops (else the codelet's flop model, else 0).
    pub(crate) flops: Option<f64>,
    pub(crate) declared: Declared,
    pub(crate) once: Once,
    pub(crate) cpu_only: bool,
    /// Ordered by its front-end, not by its data: the submission skips the
    /// inference (see `TaskNode::ordered`).
    pub(crate) ordered: bool,
    pub(crate) node_hint: Option<usize>,
    /// What few tasks have (explicit edges, a front-end's satisfied
    /// predecessors, an error found while building), boxed: the builder is
    /// moved by value at every call of a chain like `t = t.access(..)`, and
    /// these 72 bytes were copied each time.
    pub(crate) rare: Option<Box<Rare>>,
}

/// The rarely used parts of a [`TaskBuilder`].
#[derive(Default)]
pub(crate) struct Rare {
    pub(crate) after: Vec<TaskHandle>,
    /// Dependencies already satisfied outside the engine (by the symbolic
    /// front-end), recorded in traces and DOT but not enforced.
    pub(crate) satisfied_preds: Vec<u64>,
    /// Why this description cannot be submitted (found while building).
    pub(crate) invalid: Option<String>,
    /// Team size overriding the codelet's (`team`).
    pub(crate) team: Option<crate::team::TeamSize>,
    /// Its meeting with tasks of other ranks (`rendezvous`).
    pub(crate) rendezvous: Option<Rendezvous>,
}

/// Tasks of several ranks whose bodies meet: each waits inside its body for
/// the others, as the members of a distributed LU panel do at every column
/// (they exchange their pivot candidates). A real run needs nothing from
/// this: the bodies meet by themselves. The simulator runs no bodies, so it
/// is told: it holds each member's worker from the member's start until all
/// members have started, then ends them all together, at the latest start
/// plus the longest modelled duration plus `rounds` exchanges among the
/// members, each costing the network's latency and `bytes` to every other
/// member through the sender's NIC (`simulate/README.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendezvous {
    /// The same on every member, and on no other task of the run.
    pub key: u64,
    /// How many tasks meet (one per rank).
    pub members: usize,
    /// Exchanges among the members while they run.
    pub rounds: u64,
    /// Bytes each member sends each other member per exchange.
    pub bytes: u64,
}

impl TaskBuilder {
    pub(crate) fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// A task applying `codelet`, with no data, priority 0 and no body.
    #[inline]
    pub fn new(codelet: &Codelet<Dynamic>) -> TaskBuilder {
        Self::from_parts(&codelet.info)
    }

    /// A task applying `codelet` to `args`, which its codelet's models and
    /// label see: the engine's own tasks (receives, sends) carry numbers and
    /// build their label only when a trace or a message needs it.
    #[inline]
    pub(crate) fn with_args<P: Send + Sync + 'static>(
        codelet: &Codelet<Dynamic, P>,
        args: P,
    ) -> TaskBuilder {
        let mut b = Self::from_parts(&codelet.info);
        b.params = Box::new(args);
        b
    }

    #[inline]
    fn from_parts(info: &CodeletRef) -> TaskBuilder {
        TaskBuilder {
            codelet: Arc::clone(info),
            params: Box::new(()),
            label: None,
            priority: 0,
            flops: None,
            declared: Declared::default(),
            once: Once::default(),
            cpu_only: false,
            ordered: false,
            node_hint: None,
            rare: None,
        }
    }

    /// Declare an access to `handle` with `mode`.
    #[inline]
    pub fn access<T: Send + Sync + 'static>(
        mut self,
        handle: &DataHandle<T>,
        mode: AccessMode,
    ) -> Self {
        self.declared.accesses.push(crate::access::Access {
            handle: handle.erased(),
            mode,
        });
        self
    }

    /// Declare a read-only access.
    #[inline]
    pub fn read<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::R)
    }

    /// Declare a write-only access.
    #[inline]
    pub fn write<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::W)
    }

    /// Declare a read-write access.
    #[inline]
    pub fn rw<T: Send + Sync + 'static>(self, handle: &DataHandle<T>) -> Self {
        self.access(handle, AccessMode::RW)
    }

    /// Larger runs earlier under the `prio` and `dmda` policies.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// A label for traces and error messages, e.g. `gemm(3,4,5)` (a
    /// `&'static str` costs nothing; see also `Codelet::label`, built lazily).
    pub fn label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Floating-point operations this task performs (cost hint for
    /// statistics and scheduling; overrides the codelet's flop model).
    pub fn flops(mut self, flops: f64) -> Self {
        self.flops = Some(flops);
        self
    }

    /// An explicit dependency on an already submitted task, beside the ones
    /// inferred from data.
    pub fn after(mut self, task: &TaskHandle) -> Self {
        self.rare_mut().after.push(task.clone());
        self
    }

    /// The CPU body. It gets the [`TaskContext`] and returns `Ok(())` or an
    /// error, which fails the task like a panic does.
    #[inline]
    pub fn body<F>(mut self, f: F) -> Self
    where
        F: FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send + 'static,
    {
        self.once.cpu = Some(Box::new(f));
        self
    }

    /// A body for device workers (a GPU kernel launch, say), for any device.
    /// Without one, a device whose memory the host can address runs the CPU
    /// body on its own replicas (the emulated device). If the device body fails,
    /// the task falls back to the CPU body (Cashmere).
    pub fn device_body<F>(mut self, f: F) -> Self
    where
        F: FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send + 'static,
    {
        self.once.device = Some((DeviceMatch::Any, Box::new(f)));
        self
    }

    /// Placement hint: run on a worker of memory node `node` (host NUMA
    /// nodes first, then devices; with one NUMA node, 0 is the host and
    /// `d + 1` is device `d`). `dmda` honours it; `ws` and `prio` only
    /// keep tasks hinted to the host off devices. A hint naming a node the
    /// runtime does not have is ignored.
    pub fn on_node(mut self, node: usize) -> Self {
        self.node_hint = Some(node);
        self
    }

    /// Keep this task on CPU workers.
    pub fn cpu_only(mut self) -> Self {
        self.cpu_only = true;
        self
    }

    /// Run this task on a team of CPU workers of this size (overrides the
    /// codelet's [`Codelet::team`](crate::Codelet::team)).
    pub fn team(mut self, size: crate::team::TeamSize) -> Self {
        self.rare_mut().team = Some(size);
        self
    }

    /// This task meets tasks of other ranks inside its body (see [`Rendezvous`]).
    pub fn rendezvous(mut self, r: Rendezvous) -> Self {
        self.rare_mut().rendezvous = Some(r);
        self
    }

    /// Run `then` with the task's id after its body succeeded (whichever
    /// body: a device body or the CPU body it fell back to), on the worker
    /// that ran it, before its successors are released; tasks `then` submits
    /// go to that worker's queue. An `Err` fails the task. Several calls
    /// chain in order (a failing one stops the chain).
    pub fn then(
        mut self,
        then: impl FnOnce(u64) -> Result<(), BodyError> + Send + 'static,
    ) -> Self {
        self.add_then(then);
        self
    }

    /// [`then`](Self::then) in place: the builder is not moved (a copy of
    /// the whole builder per task the symbolic front-end makes).
    pub(crate) fn add_then(
        &mut self,
        then: impl FnOnce(u64) -> Result<(), BodyError> + Send + 'static,
    ) {
        self.once.then = Some(match self.once.then.take() {
            None => Box::new(then),
            Some(first) => Box::new(move |id| {
                first(id)?;
                then(id)
            }),
        });
    }

    /// Declare an access to an erased handle (the distributed layer's
    /// receive tasks).
    pub(crate) fn access_erased(
        mut self,
        handle: std::sync::Arc<dyn crate::data::AnyHandle>,
        mode: AccessMode,
    ) -> Self {
        self.declared
            .accesses
            .push(crate::access::Access { handle, mode });
        self
    }

    /// The name used in messages before the task has an id.
    pub(crate) fn display_name(&self) -> String {
        match (&self.label, &self.codelet.bodies.label) {
            (Some(l), _) => l.to_string(),
            (None, Some(f)) => f(&*self.params),
            (None, None) => self.codelet.name.clone(),
        }
    }
}

/// Type state of a [`Task`] not tied to a runtime (submit it with
/// `Runtime::submit`, or return it from `TaskClasses::task`).
pub struct Unbound;

/// Type state of a [`Task`] made by [`Runtime::task`]: it has `submit()`.
pub struct Bound<'rt>(&'rt Runtime);

/// Type state of a [`Task`] made by [`Submit::task`](crate::dist::Submit::task)
/// on a one-process or a distributed runtime: its `submit()` goes through
/// that runtime's [`Submit::submit`](crate::dist::Submit::submit).
pub struct OnSubmit<'s, S: ?Sized>(&'s S);

/// A task with a typed access list `A` (a tuple of `h.r()`, `h.w()`,
/// `h.rw()`, or `Vec`s of one kind) and arguments `P` for its codelet's
/// bodies. The body receives the data borrowed exactly as declared:
///
/// ```
/// # use tessera_engine::{Codelet, Config, Runtime};
/// let rt = Runtime::new(Config::with_workers(1)).unwrap();
/// let (a, c) = (rt.register(2.0f64), rt.register(1.0f64));
/// let axpy = Codelet::new("axpy");
/// rt.task(&axpy, (a.r(), c.rw()))
///     .cpu(|(a, c)| {
///         *c += 3.0 * *a;
///         Ok(())
///     })
///     .submit()
///     .unwrap();
/// rt.wait_all().unwrap();
/// assert_eq!(rt.unregister(c).unwrap(), 7.0);
/// ```
pub struct Task<A, P = (), S = Unbound> {
    b: TaskBuilder,
    params: Option<P>,
    state: S,
    _a: PhantomData<fn(A)>,
}

impl<A: Accesses, P: Send + Sync + 'static> Task<A, P, Unbound> {
    /// A task of `codelet` over `accesses`, not tied to a runtime.
    pub fn new(codelet: &Codelet<A, P>, accesses: A) -> Self {
        Task::with_state(codelet, accesses, Unbound)
    }
}

impl<A: Accesses, P: Send + Sync + 'static, S> Task<A, P, S> {
    /// A task of `codelet` over `accesses` in type state `state`, built in
    /// place (the builder is a few hundred bytes: making an unbound task and
    /// re-wrapping it moved it once more).
    #[inline]
    pub(crate) fn with_state(codelet: &Codelet<A, P>, accesses: A, state: S) -> Self {
        let mut b = TaskBuilder::from_parts(&codelet.info);
        // Room for the whole list at once, in steps of four (for up to
        // eight accesses, the 4 or 8 a list grown by pushes ended at). At
        // its exact length a list of three took 72 bytes instead of 96, and
        // Task Bench's STF `stencil_1d` ran about 10 % slower (alternated
        // rounds, `taskbench_ab.sh`; why is not established: perhaps
        // blocks sharing cache lines between the submitting thread, which
        // makes lists, and the workers, which drop their predecessors').
        b.declared
            .accesses
            .reserve_exact(accesses.count().next_multiple_of(4));
        accesses.declare(&mut b.declared);
        Task {
            b,
            params: None,
            state,
            _a: PhantomData,
        }
    }
}

impl Runtime {
    /// A typed task of `codelet` over `accesses` (e.g. `(a.r(), b.rw())`),
    /// to be completed with its arguments, priority, body and submitted
    /// with [`Task::submit`].
    pub fn task<A: Accesses, P: Send + Sync + 'static>(
        &self,
        codelet: &Codelet<A, P>,
        accesses: A,
    ) -> Task<A, P, Bound<'_>> {
        Task::with_state(codelet, accesses, Bound(self))
    }
}

impl<A: Accesses, P: Send + Sync + 'static, S> Task<A, P, S> {
    /// The arguments the codelet's bodies, flop model and label get.
    pub fn args(mut self, args: P) -> Self {
        self.params = Some(args);
        self
    }

    /// Larger runs earlier under the `prio` and `dmda` policies.
    pub fn priority(mut self, priority: i32) -> Self {
        self.b.priority = priority;
        self
    }

    /// A label for traces and error messages (see `Codelet::label` for one
    /// built from the arguments only when needed).
    pub fn label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.b.label = Some(label.into());
        self
    }

    /// Floating-point operations (overrides the codelet's flop model).
    pub fn flops(mut self, flops: f64) -> Self {
        self.b.flops = Some(flops);
        self
    }

    /// An explicit dependency on an already submitted task.
    pub fn after(mut self, task: &TaskHandle) -> Self {
        self.b.rare_mut().after.push(task.clone());
        self
    }

    /// Placement hint (see [`TaskBuilder::on_node`]).
    pub fn on_node(mut self, node: usize) -> Self {
        self.b.node_hint = Some(node);
        self
    }

    /// Keep this task on CPU workers.
    pub fn cpu_only(mut self) -> Self {
        self.b.cpu_only = true;
        self
    }

    /// Run this task on a team of CPU workers of this size (overrides the
    /// codelet's [`Codelet::team`](crate::Codelet::team)).
    pub fn team(mut self, size: crate::team::TeamSize) -> Self {
        self.b = self.b.team(size);
        self
    }

    /// This task meets tasks of other ranks inside its body (see [`Rendezvous`]).
    pub fn rendezvous(mut self, r: Rendezvous) -> Self {
        self.b = self.b.rendezvous(r);
        self
    }

    /// The CPU body of this task (instead of the codelet's): gets the data
    /// borrowed as declared.
    pub fn cpu<F>(mut self, f: F) -> Self
    where
        F: for<'a> FnOnce(A::Cpu<'a>) -> Result<(), BodyError> + Send + 'static,
    {
        let body: Body = Box::new(move |ctx| {
            // SAFETY: the cursor walks the accesses declared from this `A`
            // (`Task::new`), of the running task, on its acquired node.
            let args = unsafe { A::cpu(&mut ctx.cursor()) };
            f(args)
        });
        self.b.once.cpu = Some(body);
        self
    }

    /// A body of this task for devices of type `D` (instead of the codelet's):
    /// gets the device and typed views of the data in its memory.
    pub fn device<D, F>(mut self, f: F) -> Self
    where
        A: DeviceAccesses,
        D: Device + 'static,
        F: for<'a> FnOnce(&D, A::Device<'a>) -> Result<(), BodyError> + Send + 'static,
    {
        let body: Body = Box::new(move |ctx| {
            let dev = ctx
                .device()
                .and_then(|d| d.as_any().downcast_ref::<D>())
                .ok_or("a device body ran off its device type")?;
            f(dev, A::device(&mut ctx.cursor())?)
        });
        self.b.once.device = Some((DeviceMatch::Type(TypeId::of::<D>()), body));
        self
    }

    #[inline]
    fn into_builder(self) -> TaskBuilder {
        let mut b = self.b;
        match self.params {
            Some(p) => b.params = Box::new(p),
            None if TypeId::of::<P>() == TypeId::of::<()>() => {}
            None => {
                b.rare_mut().invalid = Some(format!(
                    "codelet '{}' takes arguments of type {}; give them with .args(..)",
                    b.codelet.name,
                    std::any::type_name::<P>()
                ))
            }
        }
        b
    }
}

impl<A: Accesses, P: Send + Sync + 'static> Task<A, P, Bound<'_>> {
    /// Submit the task to the runtime that made it.
    #[inline]
    pub fn submit(self) -> Result<TaskHandle, Error> {
        let rt = self.state.0;
        rt.submit(self.into_builder())
    }
}

impl<'s, S: ?Sized> OnSubmit<'s, S> {
    pub(crate) fn new(s: &'s S) -> Self {
        OnSubmit(s)
    }
}

impl<A: Accesses, P: Send + Sync + 'static, S: crate::dist::Submit + ?Sized>
    Task<A, P, OnSubmit<'_, S>>
{
    /// Submit the task on every rank of the runtime that made it (see
    /// [`Submit::submit`](crate::dist::Submit::submit)): the local task on
    /// the rank that runs it.
    #[inline]
    pub fn submit(self) -> Result<Option<TaskHandle>, Error> {
        let s = self.state.0;
        s.submit(self.into_builder())
    }
}

impl<A: Accesses, P: Send + Sync + 'static> From<Task<A, P, Unbound>> for TaskBuilder {
    fn from(t: Task<A, P, Unbound>) -> TaskBuilder {
        t.into_builder()
    }
}
