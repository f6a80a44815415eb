//! Sequential task flow: a submitted task's dependencies inferred from the
//! data it declares, in submission order (StarPU's implicit dependencies).
//! Its twins: [`symbolic`](crate::symbolic) (a DAG unfolded from task
//! classes) and [`dist::stf`](crate::dist::stf) (this flow across ranks).
//!
//! A submission goes in steps ([`Shared::submit_inner`]): check the task
//! (the runtime is open, its accesses are its own and distinct, some worker
//! can run it), make its node, lock its handles, link the edges from its
//! explicit predecessors and from each handle's last writer and readers,
//! then hand it to the policy if nothing holds it back.
//!
//! Lock order (never take an earlier lock while holding a later one):
//! 1. `HandleCore::deps` of the task's handles, in increasing handle id;
//! 2. `TaskNode::successors` of one predecessor at a time;
//! 3. `Shared::errors`, `Shared::graph`, `Shared::wait_lock` (leaf locks).
//!
//! Taking all of a task's handle locks at once, in id order, makes each
//! submission atomic with respect to the others, so submissions from several
//! threads always produce an acyclic graph.
//!
//! `submit_inner` and `prepare` share the checks and the making
//! (`make_checked`), whose steps are inlined always, down to the node's
//! construction (`TaskNode::new`, `NodePool::make`): left to the compiler,
//! they became calls once they had two callers, and the node was moved
//! between them by value (about 150 more instructions a task,
//! `callgrind`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use smallvec::SmallVec;

use crate::access::{Access, AccessMode};
use crate::data::{DepState, TaskRef};
use crate::device::Device;
use crate::error::Error;
use crate::preds::{PredBuilder, PredList};
use crate::runtime::{Hold, Shared, INTERRUPTED};
use crate::sched::{Pushed, ReadyTask};
use crate::task::{lock_successors, state, DeviceMatch, NodeParts, TaskBuilder, TaskHandle};
use crate::task::{Hook, TaskNode};
use crate::util::lock;

/// The positions of a task's accesses, sorted by handle id (the order their
/// locks are taken in). Inline for up to eight accesses.
type LockOrder = SmallVec<[usize; 8]>;

/// A task's handles' dependency states, locked in id order, each with the
/// position of its access.
type Locked<'n> = SmallVec<[(usize, MutexGuard<'n, DepState>); 8]>;

/// What a builder carries besides its node: explicit predecessors, and the
/// ids of predecessors a front-end already satisfied (traces only).
struct Explicit {
    after: Vec<TaskHandle>,
    satisfied: Vec<u64>,
}

impl Explicit {
    /// No explicit edge (allocates nothing).
    fn none() -> Explicit {
        Explicit {
            after: Vec::new(),
            satisfied: Vec::new(),
        }
    }
}

/// A task checked and made, its explicit edges linked, not yet submitted
/// ([`Shared::prepare`]). One pointer: a front-end keeps one per task it
/// numbers, and swaps it in and out of an atomic cell.
pub(crate) struct Prepared(Arc<TaskNode>);

impl Prepared {
    /// The task's name, as errors give it.
    pub(crate) fn display_name(&self) -> String {
        self.0.display_name()
    }
}

impl Shared {
    /// See [`Runtime::submit`](crate::Runtime::submit).
    #[inline]
    pub(crate) fn submit(&self, task: TaskBuilder) -> Result<TaskHandle, Error> {
        self.submit_inner(task, false).map(|(h, _)| h)
    }

    /// Submit `task` holding it back: it does not become ready before the
    /// returned [`Hold`] is released, even once its dependencies are met (a
    /// receive waiting for its message).
    pub(crate) fn submit_held(
        self: &Arc<Self>,
        task: TaskBuilder,
    ) -> Result<(TaskHandle, Hold), Error> {
        let (h, node) = self.submit_inner(task, true)?;
        Ok((
            h,
            Hold::new(node.expect("a held task returns its node"), self),
        ))
    }

    /// Submit `task` (see the module doc for the steps); `held`: keep one
    /// pending count for a [`Hold`], and return the node with the handle.
    fn submit_inner(
        &self,
        task: TaskBuilder,
        held: bool,
    ) -> Result<(TaskHandle, Option<Arc<TaskNode>>), Error> {
        let (node, explicit, order) = self.make_checked(task)?;
        // An ordered task's front-end orders it: no handle is locked, and
        // none remembers it.
        let mut locked = match node.ordered {
            true => Locked::new(),
            false => lock_handles(&node, &order)?,
        };
        let handle = TaskHandle {
            node: Arc::clone(&node),
            runtime: self.id(),
        };
        let held_node = held.then(|| {
            // Relaxed: published by the AcqRel decrement in
            // `release_submitters_count`.
            node.pending.fetch_add(1, Ordering::Relaxed);
            Arc::clone(&node)
        });
        self.count_submitted();
        self.link_edges(&node, explicit, &mut locked);
        drop(locked);
        self.release_submitters_count(node);
        Ok((handle, held_node))
    }

    /// Check `task` (see the module doc) and make its node; with the lock
    /// order of its handles.
    #[inline(always)]
    fn make_checked(
        &self,
        task: TaskBuilder,
    ) -> Result<(Arc<TaskNode>, Explicit, LockOrder), Error> {
        self.check_open(&task)?;
        let order = self.check_accesses(&task)?;
        self.check_runnable(&task)?;
        self.check_team(&task)?;
        let (node, explicit) = self.make_node(task);
        Ok((node, explicit, order))
    }

    /// Link `node`'s edges: the explicit ones, and those each locked handle
    /// gives (then unlocked). The guards are borrowed, not moved: moving the
    /// inline list copied it whole.
    #[inline(always)]
    fn link_edges(&self, node: &Arc<TaskNode>, explicit: Explicit, locked: &mut Locked<'_>) {
        let mut edges = Edges::new(node, self.trace().is_some() || self.graph().is_some());
        edges.link_explicit(explicit);
        for (i, deps) in locked.iter_mut() {
            edges.link_data(&node.accesses[*i], deps);
        }
        locked.clear();
        self.record_preds(node, edges.preds);
    }

    /// Check and make an ordered task ([`TaskNode::ordered`]) without
    /// submitting it: the task is neither in flight nor seen by any worker
    /// until [`submit_prepared`](Self::submit_prepared), and dropping the
    /// [`Prepared`] drops it unrun. The symbolic front-end makes a task when
    /// its first predecessor ends and submits it when its last one does
    /// (`symbolic.rs`, "made ahead"), so the making is off the path from
    /// the last predecessor to the task. Only an ordered task can be made
    /// ahead: an unordered one's edges come from the handles' state at its
    /// submission, which must follow its predecessors'. Its explicit edges
    /// (`after`) are linked now: they name tasks submitted already, and the
    /// submitter's pending count, dropped by `submit_prepared`, keeps it
    /// from becoming ready before then.
    pub(crate) fn prepare(&self, task: TaskBuilder) -> Result<Prepared, Error> {
        if !task.ordered {
            return Err(submit_error(
                &task,
                "only a task ordered by its front-end can be made ahead".into(),
            ));
        }
        let (node, explicit, _) = self.make_checked(task)?;
        self.link_edges(&node, explicit, &mut Locked::new());
        Ok(Prepared(node))
    }

    /// Submit a task made by [`prepare`](Self::prepare): it is counted in
    /// flight now, and is ready unless an explicit predecessor is still
    /// running. Refused (the task dropped unrun) once the runtime shuts
    /// down or is interrupted, as [`submit`](Self::submit) refuses.
    pub(crate) fn submit_prepared(&self, prepared: Prepared) -> Result<(), Error> {
        let node = self.open_prepared(prepared)?;
        self.release_submitters_count(node);
        Ok(())
    }

    /// [`submit_prepared`](Self::submit_prepared), made ready where any
    /// worker takes it (the policy's external push, with its wake-up),
    /// even from a worker that would have kept it: for a task another
    /// worker made ahead, which that worker should run.
    pub(crate) fn submit_prepared_to_any(&self, prepared: Prepared) -> Result<(), Error> {
        let node = self.open_prepared(prepared)?;
        self.release_one(node);
        Ok(())
    }

    /// A prepared task's node, counted in flight; refused once the
    /// runtime shuts down or is interrupted.
    #[inline]
    fn open_prepared(&self, prepared: Prepared) -> Result<Arc<TaskNode>, Error> {
        let Prepared(node) = prepared;
        if let Some(reason) = self.closed() {
            return Err(Error::Submit {
                task: node.display_name(),
                reason: reason.into(),
            });
        }
        self.count_submitted();
        Ok(node)
    }

    /// Why no task may be submitted now, if so.
    #[inline]
    fn closed(&self) -> Option<&'static str> {
        if self.sleep().is_shutdown() {
            Some("the runtime is shutting down")
        } else if self.is_interrupted() {
            Some(INTERRUPTED)
        } else {
            None
        }
    }

    /// Refuse every task once the runtime shuts down or is interrupted, and
    /// a task whose builder found it invalid.
    #[inline(always)]
    fn check_open(&self, task: &TaskBuilder) -> Result<(), Error> {
        if let Some(reason) = self.closed() {
            return Err(submit_error(task, reason.into()));
        }
        if let Some(reason) = task.rare.as_deref().and_then(|r| r.invalid.as_ref()) {
            return Err(submit_error(task, reason.clone()));
        }
        Ok(())
    }

    /// Reject foreign and duplicate handles, and explicit predecessors of
    /// another runtime, before touching any state (typed bodies rely on it:
    /// a duplicate would alias a `&mut`). Returns the lock order (empty for
    /// an ordered task, which locks none).
    #[inline(always)]
    fn check_accesses(&self, task: &TaskBuilder) -> Result<LockOrder, Error> {
        let accesses = &task.declared.accesses;
        // Each handle's id read once, and sorted as plain numbers: sorting
        // the positions by a key read through the handle (a dynamic call
        // per comparison) cost about 330 instructions for a task of three
        // accesses (`callgrind`, a 2-rank Task Bench step).
        let mut ids: SmallVec<[(u64, usize); 8]> = SmallVec::new();
        for (i, a) in accesses.iter().enumerate() {
            let core = a.core();
            if core.runtime_id != self.id() {
                return Err(submit_error(
                    task,
                    format!("data '{}' belongs to another runtime", core.display_name()),
                ));
            }
            ids.push((core.id, i));
        }
        let twice = |i: usize| {
            submit_error(
                task,
                format!(
                    "data '{}' is declared twice; declare it once with the combined mode (RW)",
                    accesses[i].core().display_name()
                ),
            )
        };
        let mut order = LockOrder::new();
        if task.ordered && ids.len() <= 8 {
            // An ordered task locks no handle (`submit_inner`): no lock
            // order to sort, only duplicates to refuse, compared pairwise
            // (a sort and the order's pushes were about 100 instructions of
            // a six-access task).
            for (k, &(id, i)) in ids.iter().enumerate() {
                if ids[..k].iter().any(|&(other, _)| other == id) {
                    return Err(twice(i));
                }
            }
        } else {
            if ids.len() > 1 {
                ids.sort_unstable();
            }
            for (k, &(id, i)) in ids.iter().enumerate() {
                if k > 0 && ids[k - 1].0 == id {
                    return Err(twice(i));
                }
                order.push(i);
            }
        }
        if let Some(t) = task
            .rare
            .as_deref()
            .into_iter()
            .flat_map(|r| &r.after)
            .find(|t| t.runtime != self.id())
        {
            return Err(submit_error(
                task,
                format!(
                    "it depends on {}, which belongs to another runtime",
                    t.info()
                ),
            ));
        }
        Ok(order)
    }

    /// Refuse a task that no worker of this runtime could run: no CPU body
    /// (its own or its codelet's), no device body for a device here, and a
    /// codelet not declared empty ([`Codelet::empty`](crate::Codelet::empty)).
    /// A simulated runtime runs no body, so it takes any task.
    #[inline(always)]
    fn check_runnable(&self, task: &TaskBuilder) -> Result<(), Error> {
        let bodies = &task.codelet.bodies;
        if task.once.cpu.is_some() || bodies.cpu.is_some() || bodies.empty || self.sim().is_some() {
            return Ok(());
        }
        self.check_device_bodies(task)
    }

    /// Refuse a team task whose smallest team is larger than this runtime's
    /// CPU workers (it could never be recruited).
    #[inline(always)]
    fn check_team(&self, task: &TaskBuilder) -> Result<(), Error> {
        match team_of(task) {
            Some(t) if t.min() > self.cpu_workers() => Err(submit_error(
                task,
                format!(
                    "codelet '{}' needs a team of at least {} CPU workers; this runtime has {}",
                    task.codelet.name,
                    t.min(),
                    self.cpu_workers()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The rare case of [`check_runnable`](Self::check_runnable): a task
    /// with no CPU body runs only if one of this runtime's devices has a
    /// body for it.
    #[cold]
    fn check_device_bodies(&self, task: &TaskBuilder) -> Result<(), Error> {
        let cpu_only = task.cpu_only
            || task
                .declared
                .accesses
                .iter()
                .any(|a| !a.handle.replicable());
        let runs = |d: &Arc<dyn Device>| {
            let ty = d.as_any().type_id();
            // Typed device bodies see device views, which exist only in
            // memory the host cannot address (see `TaskNode::has_device_body`).
            let raw = d.memory().is_some();
            let body = match &task.once.device {
                Some((DeviceMatch::Any, _)) => true,
                Some((DeviceMatch::Type(t), _)) if *t == ty => raw,
                _ => raw && task.codelet.bodies.device(ty).is_some(),
            };
            body && d.runs(&task.codelet.name)
        };
        let devices = self.kinds().iter().filter_map(|k| k.device.as_ref());
        let names: Vec<String> = devices.clone().map(|d| d.name()).collect();
        if !cpu_only && devices.clone().any(runs) {
            return Ok(());
        }
        let on_devices = match (names.is_empty(), cpu_only) {
            (true, _) => String::new(),
            (false, true) => " (it is kept on the CPU workers)".to_owned(),
            (false, false) => format!(" and no device body for {}", names.join(", ")),
        };
        Err(submit_error(
            task,
            format!(
                "no worker of this runtime can run it: codelet '{}' has no CPU body{on_devices}; give one (`.cpu(..)`, `.body(..)`), or declare the codelet empty on purpose with `Codelet::empty`",
                task.codelet.name
            ),
        ))
    }

    /// The task's node (from the pool), and what the builder carries for
    /// the edges.
    #[inline(always)]
    fn make_node(&self, mut task: TaskBuilder) -> (Arc<TaskNode>, Explicit) {
        let team = team_of(&task);
        let rendezvous = task.rare.as_mut().and_then(|r| r.rendezvous.take());
        let TaskBuilder {
            codelet,
            params,
            label,
            priority,
            flops,
            declared,
            once,
            cpu_only,
            node_hint,
            rare,
            ordered,
        } = task;
        let explicit = match rare {
            Some(r) => Explicit {
                after: r.after,
                satisfied: r.satisfied_preds,
            },
            None => Explicit::none(),
        };
        let flops = flops
            .or_else(|| codelet.bodies.flops.as_ref().map(|f| f(&*params)))
            .unwrap_or(0.0);
        let accesses = declared.accesses;
        let cpu_only = cpu_only || accesses.iter().any(|a| !a.handle.replicable());
        let id = self.take_task_id();
        let node = self.nodes().make(TaskNode::new(
            id,
            NodeParts {
                codelet,
                params,
                label,
                priority,
                flops,
                accesses,
                // One allocation of the exact length (`into_vec` of the inline
                // list allocated room for four, then the boxing shrank it:
                // a reallocation per task, 3 % of a stencil's submission).
                lens: Box::from(declared.lens.as_slice()),
                once,
                cpu_only,
                ordered,
                node_hint,
                team,
                rendezvous,
            },
        ));
        (node, explicit)
    }

    /// Keep the sorted, deduplicated predecessor ids for traces and DOT
    /// export (only when either is on).
    #[inline(always)]
    fn record_preds(&self, node: &TaskNode, preds: Option<PredBuilder>) {
        let Some(mut preds) = preds else {
            return;
        };
        let preds = PredList::from_ids(&mut preds);
        if let Some(g) = self.graph() {
            lock(g).push((node.id, node.display_name(), preds.as_slice().into()));
        }
        let _ = node.preds.set(Box::new(preds));
    }

    /// Drop the submitter's pending count; if it was the last one, the task
    /// is ready: hand it to the policy. A body's submission goes to its
    /// worker's own queue (its data is hot there); that worker is busy
    /// running the body, so the task is offered to a sleeper too.
    #[inline(always)]
    fn release_submitters_count(&self, node: Arc<TaskNode>) {
        if node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let pushed = match crate::worker::current(self.id()) {
                Some(w) => match w.push(ReadyTask(node)) {
                    Pushed::Worker(t) if t == w.worker => Pushed::Local,
                    p => p,
                },
                None => self.policy().push_external(ReadyTask(node)),
            };
            self.wake(pushed);
        }
    }

    /// Make `node` ready if this was its last pending count (a [`Hold`]
    /// released).
    pub(crate) fn release_one(&self, node: Arc<TaskNode>) {
        if node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let pushed = self.policy().push_external(ReadyTask(node));
            self.wake(pushed);
        }
    }

    /// [`release_one`](Self::release_one) for a receive whose message has
    /// come: when that makes it ready on a worker polling the network from
    /// its idle path, it runs there at once (`Current::run_received`).
    pub(crate) fn release_received(&self, node: Arc<TaskNode>) {
        if node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let task = match crate::worker::current(self.id()) {
                Some(w) => match w.run_received(self, ReadyTask(node)) {
                    None => return,
                    Some(task) => task,
                },
                None => ReadyTask(node),
            };
            let pushed = self.policy().push_external(task);
            self.wake(pushed);
        }
    }
}

/// Lock every handle of the task, in id order (the lock order); refuse
/// the task if one was unregistered.
#[inline]
fn lock_handles<'n>(node: &'n TaskNode, order: &[usize]) -> Result<Locked<'n>, Error> {
    // Filled in place (collecting into an inline list returns it by value,
    // a copy of its whole inline buffer per task).
    let mut locked = Locked::new();
    for &i in order {
        locked.push((i, node.accesses[i].lock_deps()));
    }
    if let Some((i, _)) = locked.iter().find(|(_, g)| g.unregistered) {
        let name = node.accesses[*i].core().display_name();
        drop(locked);
        return Err(Error::Submit {
            task: node.display_name(),
            reason: format!("data '{name}' was unregistered"),
        });
    }
    Ok(locked)
}

/// The edges into one task being submitted, and (when traces or the graph
/// keep them) its predecessors' ids, including those already finished.
struct Edges<'n> {
    node: &'n Arc<TaskNode>,
    preds: Option<PredBuilder>,
}

impl<'n> Edges<'n> {
    #[inline]
    fn new(node: &'n Arc<TaskNode>, keep_preds: bool) -> Self {
        Edges {
            node,
            preds: keep_preds.then(PredBuilder::default),
        }
    }

    /// `pred → node`; `flow`: a failure of `pred` cancels the task.
    #[inline]
    fn link(&mut self, pred: &Arc<TaskNode>, flow: bool, supersedes: bool) {
        add_edge(pred, self.node, flow, supersedes);
        // Traces keep the edge even when `pred` had already finished.
        if let Some(p) = &mut self.preds {
            p.push(pred.id);
        }
    }

    /// An edge from a task a handle remembers, if it still exists (a freed
    /// task finished long ago: only traces note it).
    #[inline]
    fn link_ref(&mut self, pred: &TaskRef, flow: bool, supersedes: bool) {
        match pred.node.upgrade() {
            Some(p) => self.link(&p, flow, supersedes),
            None => {
                if let Some(p) = &mut self.preds {
                    p.push(pred.id);
                }
            }
        }
    }

    /// Edges the builder gave: `after` (they carry failures), and the
    /// satisfied predecessors a front-end recorded (traces only).
    #[inline(always)]
    fn link_explicit(&mut self, explicit: Explicit) {
        for t in &explicit.after {
            self.link(&t.node, true, false);
        }
        if let Some(p) = &mut self.preds {
            explicit.satisfied.iter().for_each(|&id| p.push(id));
        }
    }

    /// The predecessors one access finds in its handle's dependency state,
    /// and the state after it: a read follows the last writer and joins the
    /// readers; a write follows the last writer and the readers since, and
    /// becomes the last writer.
    #[inline]
    fn link_data(&mut self, access: &Access, deps: &mut DepState) {
        let node = self.node;
        let mode = access.mode;
        if mode.reads() {
            if let Some(p) = &deps.poisoned_by {
                node.cancel(|| format!("data '{}' is invalid: {p}", access.core().display_name()));
            }
        }
        if let Some(w) = &deps.last_writer {
            // Read-after-write carries data; write-after-write only orders,
            // and this task takes the writer's place.
            self.link_ref(w, mode.reads(), mode.writes());
        }
        if mode.writes() {
            for r in deps.readers.drain(..) {
                self.link_ref(&r, false, false);
            }
            // Counted in the node's `Successors::last_writes` from the start.
            deps.last_writer = Some(TaskRef::new(node));
            // A pure write replaces poisoned contents; an RW of poisoned
            // data is cancelled above and re-poisons it when it ends.
            if mode == AccessMode::W {
                deps.poisoned_by = None;
            }
        } else {
            access.core().push_reader(deps, TaskRef::new(node));
        }
    }
}

impl Shared {
    /// Run `hook` once the data of `core` holds what the tasks submitted so
    /// far wrote last: at once, on this thread, if its last writer has
    /// finished (or there is none), else on the thread that completes that
    /// writer, before the writer's successors are released (see
    /// [`Hook`](crate::task::Hook)). `hook(false)` when that writer failed
    /// or was cancelled: the data holds no valid version.
    ///
    /// Until the hook has run, no task submitted later can write the data:
    /// such a task follows the last writer (write after write) and is
    /// released after the hook; one submitted after a synchronous call comes
    /// after it on the caller's own thread. Tasks reading the data may run
    /// meanwhile, so the hook may only read it.
    pub(crate) fn after_last_writer(&self, core: &crate::data::HandleCore, hook: Hook) {
        let deps = lock(&core.deps);
        let writer = deps.last_writer.as_ref().and_then(|w| w.node.upgrade());
        if let Some(w) = writer {
            let mut s = lock_successors(&w);
            if !s.done {
                s.hooks.push(hook);
                return;
            }
        }
        // Finished: a failure poisoned the data before `done` was set.
        let valid = deps.poisoned_by.is_none();
        drop(deps);
        hook(valid);
    }
}

impl Shared {
    /// Write `data`'s host value at once with `write`, as a task declaring
    /// it W would if it were submitted and ran now, provided no task uses
    /// the data: its last writer has finished (its hooks too), so has every
    /// reader since, no failure poisoned it, it is still registered, and no
    /// transport reads its bytes (`dist::lent`).
    /// Returns `None` (nothing written) when the data is in use, or when
    /// the runtime has devices or simulated time (a write is then a task:
    /// replicas move, virtual time passes): the caller submits a task
    /// instead. A traced runtime writes at once too, so a trace shows the
    /// path an untraced run takes (its remote edges' latency included); the
    /// message's arrival is in the trace's messages.
    ///
    /// The handle's dependency lock is held while `write` runs, so a task
    /// submitted on the data meanwhile waits for the lock and follows the
    /// write. An `Err` from `write` poisons the data, as a failed writer
    /// does: its later readers are cancelled instead of reading it.
    pub(crate) fn write_now(
        &self,
        data: &Arc<dyn crate::data::AnyHandle>,
        write: impl FnOnce() -> Result<(), String>,
    ) -> Option<Result<(), String>> {
        if !self.host_only() {
            return None;
        }
        let core = data.core();
        let mut deps = lock(&core.deps);
        // A last writer still referenced has not passed `writer_finished`,
        // which comes after its hooks (a hook may be reading the data).
        let writer_busy = deps
            .last_writer
            .as_ref()
            .is_some_and(|w| w.node.strong_count() > 0);
        // Bytes lent to a transport (`dist::lent`) count as in use: this
        // thread (a routing one) must not wait for their send to complete.
        if writer_busy
            || core.readers_running()
            || deps.poisoned_by.is_some()
            || deps.unregistered
            || crate::dist::lent::is_lent(core)
        {
            return None;
        }
        let host = crate::memory::HOST;
        if let Err(e) = data.acquire(data, host, AccessMode::W, true) {
            return Some(Err(e));
        }
        let result = write();
        data.release(host, AccessMode::W);
        // Every earlier user has finished: no later task needs an edge.
        deps.last_writer = None;
        deps.readers.clear();
        if let Err(e) = &result {
            deps.poisoned_by = Some(format!("writing it in place failed: {e}"));
        }
        Some(result)
    }
}

fn submit_error(task: &TaskBuilder, reason: String) -> Error {
    Error::Submit {
        task: task.display_name(),
        reason,
    }
}

/// Add the edge `pred → succ` unless `pred` already finished. `flow`: a
/// failure of `pred` cancels `succ` (see `Successors::list`); for a finished
/// failed/cancelled `pred` that happens now. `supersedes`: `succ` becomes
/// the last writer of data `pred` was the last writer of.
fn add_edge(pred: &Arc<TaskNode>, succ: &Arc<TaskNode>, flow: bool, supersedes: bool) {
    let mut s = lock_successors(pred);
    if supersedes {
        s.last_writes = s.last_writes.saturating_sub(1);
    }
    if s.done {
        if flow && pred.state.load(Ordering::SeqCst) != state::DONE_OK {
            succ.cancel(|| pred.root_cause());
        }
        return;
    }
    s.list.push((Arc::clone(succ), flow));
    // Relaxed: the submitter still holds one count, so `pending` cannot reach
    // zero before the submitter's AcqRel decrement, which publishes this.
    succ.pending.fetch_add(1, Ordering::Relaxed);
}

/// The team a task asks for: its own, else its codelet's.
fn team_of(task: &TaskBuilder) -> Option<crate::team::TeamSize> {
    task.rare
        .as_deref()
        .and_then(|r| r.team)
        .or(task.codelet.bodies.team)
}

#[cfg(test)]
mod tests {
    //! Proves that a task no worker can run is refused at submission, naming
    //! its codelet and label; that a task reaching a CPU worker with no body
    //! for it fails instead of leaving its data silently unchanged; and that
    //! a codelet declared empty runs its body-less tasks fine.
    use std::time::Duration;

    use crate::device::{Link, TaskCost};
    use crate::{Codelet, Config, Error, ReadWrite, Runtime, TaskBuilder};

    /// Proves that `write_now` writes data only while no task uses it (a
    /// running reader or a pending writer makes it decline), that a task
    /// submitted after the write reads what it wrote, that a traced runtime
    /// writes at once as well (with no task in its trace), and that a failed
    /// write poisons the data for its later readers, naming why.
    #[test]
    fn write_now_writes_only_data_no_task_uses() {
        use crate::dist::DataRef;
        use crate::{Read, Write};
        use std::sync::mpsc::channel;
        use std::sync::Mutex;

        let rt = Runtime::with_workers(2).unwrap();
        let h = rt.register_replicable(vec![0u8; 4]);
        let d = DataRef::of(&h);
        // SAFETY (every `unpack` below): `write_now` runs it only while no
        // task uses the data.
        let put = |bytes: &'static [u8]| {
            rt.submitter()
                .write_now(&d.handle, || unsafe { d.unpack(bytes) })
        };
        assert_eq!(put(&[1, 1, 1, 1]), Some(Ok(())), "nothing uses the data");

        // A reader that runs until told: the write is declined meanwhile.
        let (go, wait) = channel::<()>();
        let wait = Mutex::new(wait);
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let seen2 = std::sync::Arc::clone(&seen);
        let hold: Codelet<Read<Vec<u8>>> = Codelet::new("hold").cpu(move |_, _, v: &Vec<u8>| {
            wait.lock().unwrap().recv().map_err(|e| e.to_string())?;
            seen2.lock().unwrap().push(v.clone());
            Ok(())
        });
        rt.task(&hold, h.r()).submit().unwrap();
        assert_eq!(put(&[2, 2, 2, 2]), None, "a reader runs");
        go.send(()).unwrap();
        rt.wait_all().unwrap();
        assert_eq!(seen.lock().unwrap().pop(), Some(vec![1, 1, 1, 1]));

        // A writer that waits for the reader before it: declined too.
        let set: Codelet<Write<Vec<u8>>> = Codelet::new("set").cpu(|_, _, v: &mut Vec<u8>| {
            v.copy_from_slice(&[3, 3, 3, 3]);
            Ok(())
        });
        rt.task(&hold, h.r()).submit().unwrap();
        rt.task(&set, h.w()).submit().unwrap();
        assert_eq!(put(&[4, 4, 4, 4]), None, "a writer is pending");
        go.send(()).unwrap();
        rt.wait_all().unwrap();
        assert_eq!(put(&[5, 5, 5, 5]), Some(Ok(())), "all finished");
        rt.task(&hold, h.r()).submit().unwrap();
        go.send(()).unwrap();
        rt.wait_all().unwrap();
        assert_eq!(
            seen.lock().unwrap().pop(),
            Some(vec![5, 5, 5, 5]),
            "a later reader reads the write"
        );

        // A failed write (wrong size) poisons the data: the next reader is
        // cancelled, naming why.
        let failed = put(&[6, 6]).expect("nothing uses the data");
        assert!(failed.unwrap_err().contains("holds 4 bytes, but 2 arrived"));
        rt.task(&hold, h.r()).submit().unwrap();
        let e = rt.wait_all().unwrap_err().to_string();
        assert!(e.contains("task 'hold'") && e.contains("cancelled"), "{e}");
        let e = rt.unregister(h).unwrap_err().to_string();
        assert!(e.contains("writing it in place failed"), "{e}");

        // A traced runtime writes at once as an untraced one does (its
        // trace shows the path an untraced run takes), and a traced reader
        // reads the write.
        let traced = Runtime::new(Config::with_workers(1).trace(true)).unwrap();
        let t = traced.register_replicable(vec![0u8; 4]);
        let dt = DataRef::of(&t);
        let w = traced
            .submitter()
            .write_now(&dt.handle, || unsafe { dt.unpack(&[1, 1, 1, 1]) });
        assert_eq!(w, Some(Ok(())), "nothing uses the traced data");
        traced.task(&hold, t.r()).submit().unwrap();
        go.send(()).unwrap();
        traced.wait_all().unwrap();
        assert_eq!(seen.lock().unwrap().pop(), Some(vec![1, 1, 1, 1]));
        assert_eq!(traced.trace().tasks.len(), 1, "the write is no task");
    }

    #[test]
    fn a_task_no_worker_can_run_is_refused_naming_its_codelet() {
        let rt = Runtime::with_workers(2).unwrap();
        let h = rt.register(1u32);
        let cl: Codelet<ReadWrite<u32>> = Codelet::new("bump");
        let e = rt.task(&cl, h.rw()).label("bump(7)").submit().unwrap_err();
        match &e {
            Error::Submit { task, reason } => {
                assert_eq!(task, "bump(7)");
                assert!(reason.contains("codelet 'bump' has no CPU body"), "{e}");
                assert!(reason.contains("Codelet::empty"), "{e}");
            }
            other => panic!("{other}"),
        }
        // The dynamic builder without `.body(..)`, and with a device body
        // only on a runtime without devices.
        let dynamic = Codelet::new("scale");
        let e = rt.submit(TaskBuilder::new(&dynamic).rw(&h)).unwrap_err();
        assert!(e.to_string().contains("codelet 'scale'"), "{e}");
        let e = rt
            .submit(TaskBuilder::new(&dynamic).device_body(|_| Ok(())))
            .unwrap_err();
        assert!(e.to_string().contains("no worker of this runtime"), "{e}");
        // Nothing was submitted, and the data is untouched.
        rt.wait_all().unwrap();
        assert_eq!(rt.tasks_in_flight(), 0);
        assert_eq!(rt.unregister(h).unwrap(), 1);
    }

    #[test]
    fn an_empty_codelet_runs_without_a_body() {
        let rt = Runtime::with_workers(2).unwrap();
        let h = rt.register(1u32);
        let join: Codelet<ReadWrite<u32>> = Codelet::new("join").empty();
        let bump = Codelet::<ReadWrite<u32>>::new("bump").cpu(|_, _, h: &mut u32| {
            *h += 1;
            Ok(())
        });
        rt.task(&join, h.rw()).submit().unwrap();
        rt.task(&bump, h.rw()).submit().unwrap();
        rt.submit(TaskBuilder::new(&Codelet::new("mark").empty()).rw(&h))
            .unwrap();
        rt.wait_all().unwrap();
        assert_eq!(rt.unregister(h).unwrap(), 2);
    }

    /// A host-addressable device with no room at all: every task with data
    /// is handed back to the CPU workers (admission control).
    struct Full;

    impl crate::device::Device for Full {
        fn name(&self) -> String {
            "full0".into()
        }
        fn arch(&self) -> &'static str {
            "full"
        }
        fn memory_limit(&self) -> Option<u64> {
            Some(0)
        }
        fn link(&self) -> Link {
            Link {
                latency: Duration::ZERO,
                bandwidth: 1e12,
            }
        }
        fn peak_flops(&self) -> f64 {
            1e9
        }
        fn expected_time(&self, _: &TaskCost<'_>) -> Duration {
            Duration::ZERO
        }
        fn run(&self, _: &TaskCost<'_>, body: &mut dyn FnMut()) -> Result<Duration, String> {
            body();
            Ok(Duration::ZERO)
        }
        fn copy(&self, _: u64, copy: &mut dyn FnMut()) -> Duration {
            copy();
            Duration::ZERO
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn a_cpu_worker_without_a_body_fails_the_task() {
        let rt = Runtime::new(Config::with_workers(1).device(std::sync::Arc::new(Full))).unwrap();
        let h = rt.register_replicable(vec![1.0f64; 4]);
        // A device body only: accepted (the device could run it), but its
        // data never fits there, so a CPU worker gets it.
        let cl = Codelet::new("gpu-only");
        rt.submit(
            TaskBuilder::new(&cl)
                .label("gpu-only(0)")
                .rw(&h)
                .device_body(|_| Ok(())),
        )
        .unwrap();
        let e = rt.wait_all().unwrap_err().to_string();
        assert!(
            e.contains("gpu-only(0)") && e.contains("codelet 'gpu-only' has no CPU body"),
            "{e}"
        );
    }
}
