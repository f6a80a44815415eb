//! Virtual workers: a simulated runtime's workers ([`SimRt`]) and what the
//! loop does with them ([`RtView`]): let idle ones pop a task, start it
//! (data acquired, start and duration modelled), end it through the real
//! completion path.
//!
//! Invariants: a worker runs at most one task (`SimRt::running`), and a busy
//! worker pops nothing; a worker's queue is out of `SimRt::queues` only
//! while one step uses it (taken and put back around each use); a task
//! starts no earlier than the replicas it reads are ready (`State::ready`);
//! the cores counted busy on a platform node (`Simulation::busy_cpus`) are
//! those of the CPU tasks started and not ended, team members included.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::events::Kind;
use super::links::RtLinks;
use super::Simulation;
use crate::memory::{NodeId, VirtualLinks};
use crate::runtime::Shared;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::simulate::platform::Processor;
use crate::simulate::vdevice::VirtualDevice;
use crate::task::{Once, TaskContext, TaskNode};
use crate::team::Board;
use crate::trace::model::{TaskRecord, Trace, WorkerInfo};
use crate::util::{lock, panic_message};
use crate::worker::{self, Chosen, CurrentGuard, Outcome};

/// A task on a virtual worker: popped, data acquired, waiting for its end event.
struct Running {
    node: Arc<TaskNode>,
    once: Once,
    mem_node: NodeId,
    /// When its body starts (its inputs are there), ns.
    start: u64,
    /// Modelled duration, seconds.
    secs: f64,
    /// The other members of its team (busy until it ends).
    members: Vec<usize>,
}

/// A simulated runtime's virtual workers (held by its `Shared`).
pub(crate) struct SimRt {
    pub(crate) world: Arc<Simulation>,
    pub(crate) slot: usize,
    /// The platform node its rank runs on (cores busy are counted per node:
    /// the ranks of one node share its memory bandwidth).
    platform_node: usize,
    running: Mutex<Vec<Option<Running>>>,
    /// Per worker: the leader of the team it serves (busy until the team's
    /// task ends).
    pub(super) member_of: Mutex<Vec<Option<usize>>>,
    /// Where teams recruit: the real board, on one NUMA node (the
    /// simulator does not model where a team's members sit).
    pub(super) board: Board,
    /// Each worker's queue; taken out while the event loop uses it.
    queues: Mutex<Vec<Option<Box<dyn WorkerQueue>>>>,
    dirty: AtomicBool,
    trace: Option<Arc<Mutex<Trace>>>,
}

impl SimRt {
    /// Virtual workers named `names` (memory node of each) in `world`'s slot.
    pub(crate) fn new(
        world: Arc<Simulation>,
        slot: usize,
        platform_node: usize,
        names: Vec<(String, u32)>,
        trace: bool,
    ) -> SimRt {
        let n = names.len();
        SimRt {
            world,
            slot,
            platform_node,
            running: Mutex::new((0..n).map(|_| None).collect()),
            member_of: Mutex::new(vec![None; n]),
            board: Board::new(Vec::new()),
            queues: Mutex::new((0..n).map(|_| None).collect()),
            dirty: AtomicBool::new(false),
            trace: trace.then(|| {
                Arc::new(Mutex::new(Trace {
                    workers: names
                        .into_iter()
                        .map(|(name, node)| WorkerInfo {
                            name,
                            memory_node: node,
                        })
                        .collect(),
                    ..Trace::default()
                }))
            }),
        }
    }

    /// The virtual workers of `shared`, a simulated runtime. `Shared::sim`
    /// is set when a runtime starts (`Config::simulated`) and never changes,
    /// and only such a runtime takes a slot in a simulation: every runtime
    /// the loop reaches has it. Panics on a runtime with threads (a bug of
    /// the caller).
    pub(crate) fn of(shared: &Shared) -> &SimRt {
        shared.sim().as_ref().expect("a simulated runtime")
    }

    /// The link model this runtime's memory hands its transfers to.
    pub(crate) fn links(&self) -> Arc<dyn VirtualLinks> {
        Arc::new(RtLinks {
            world: Arc::clone(&self.world),
            slot: self.slot,
            trace: self.trace.clone(),
        })
    }

    pub(crate) fn set_queues(&self, queues: Vec<Box<dyn WorkerQueue>>) {
        *lock(&self.queues) = queues.into_iter().map(Some).collect();
    }

    /// Whether virtual worker `w` runs a task, serves a team, or leads
    /// one that recruits.
    pub(super) fn busy(&self, w: usize) -> bool {
        lock(&self.running)[w].is_some()
            || lock(&self.member_of)[w].is_some()
            || self.board.is_led_by(w)
    }

    /// The team of a task that ended (or never ran) goes back to work.
    fn release_members(&self, members: &[usize]) {
        let mut of = lock(&self.member_of);
        for &m in members {
            of[m] = None;
        }
    }

    pub(super) fn take_queue(&self, w: usize) -> Box<dyn WorkerQueue> {
        lock(&self.queues)[w]
            .take()
            .expect("a virtual worker's queue is used by one step at a time")
    }

    pub(super) fn put_queue(&self, w: usize, q: Box<dyn WorkerQueue>) {
        lock(&self.queues)[w] = Some(q);
    }

    /// A task was pushed: poll this runtime's idle workers at the next step.
    pub(crate) fn mark_dirty(&self) {
        if !self.dirty.swap(true, Ordering::Relaxed) {
            self.world.mark_dirty(self.slot);
        }
    }

    /// Run the simulation until `done()` holds (a wait of this runtime).
    pub(crate) fn run_until(&self, done: &dyn Fn() -> bool) -> Result<(), String> {
        self.world.run_until(done, false)
    }

    /// The timeline recorded so far (virtual ns).
    pub(crate) fn trace(&self) -> Trace {
        match &self.trace {
            Some(t) => {
                let mut t = lock(t).clone();
                t.tasks.sort_by_key(|r| r.start);
                t
            }
            None => Trace::default(),
        }
    }
}

/// One simulated runtime as the loop sees it in one step: the simulation,
/// the runtime's shared state and its virtual workers, looked up once.
pub(super) struct RtView<'a> {
    pub(super) world: &'a Simulation,
    pub(super) shared: &'a Arc<Shared>,
    pub(super) sim: &'a SimRt,
}

impl<'a> RtView<'a> {
    /// The runtime `shared` of `world` (it holds a slot there, so it is
    /// simulated: [`SimRt::of`]).
    pub(super) fn new(world: &'a Simulation, shared: &'a Arc<Shared>) -> Self {
        RtView {
            world,
            shared,
            sim: SimRt::of(shared),
        }
    }

    /// Let every idle worker take a task. A CPU worker joins a recruiting
    /// team first, as a real one looks at the team board before its queue
    /// (`crate::team`).
    pub(super) fn poll(&self) {
        let (shared, sim) = (self.shared, self.sim);
        sim.dirty.store(false, Ordering::Relaxed);
        for w in 0..shared.kinds().len() {
            loop {
                if sim.busy(w) {
                    break;
                }
                if w < shared.cpu_workers() && self.try_join(w) {
                    break;
                }
                let mut q = sim.take_queue(w);
                let task = q.pop();
                match task {
                    Some(t) => {
                        let is_device = shared.kinds()[w].is_device();
                        match worker::team_size(shared, &t.0, is_device) {
                            Some(size) if size > 1 && !t.0.cancelled.load(Ordering::Acquire) => {
                                self.recruit(w, t, size, &mut *q);
                            }
                            _ => self.start_task(w, t, &mut *q, Vec::new()),
                        }
                        sim.put_queue(w, q);
                    }
                    None => {
                        sim.put_queue(w, q);
                        break;
                    }
                }
            }
        }
    }

    /// Worker `w` (leading `members`) starts `task`: its data is acquired
    /// on `w`'s memory node, it starts when the replicas it reads are ready
    /// and its end is scheduled after its modelled duration (or when its
    /// rendezvous meets). A task `w` cannot run goes back to the policy; a
    /// cancelled one, or one whose data cannot be had, is completed at once.
    pub(super) fn start_task(
        &self,
        w: usize,
        task: ReadyTask,
        q: &mut dyn WorkerQueue,
        members: Vec<usize>,
    ) {
        let (world, shared, sim) = (self.world, self.shared, self.sim);
        let kind = &shared.kinds()[w];
        if kind.is_device() && !task.0.can_run_on(shared.memory(), kind.node) {
            let pushed = shared.policy().push_cpu_only(task);
            shared.wake(pushed);
            return;
        }
        let node = task.0;
        // SAFETY: this virtual worker popped the task from a ready queue.
        let once = unsafe { node.take_once() };
        if node.cancelled.load(Ordering::Acquire) {
            sim.release_members(&members);
            self.complete(w, &node, Outcome::Cancelled, q);
            return;
        }
        let mem_node = kind.node;
        let now = world.now_ns();
        let mut start = now;
        if shared.multi_node() {
            for (i, a) in node.accesses.iter().enumerate() {
                if let Err(e) = a.handle.acquire(&a.handle, mem_node, a.mode, true) {
                    for b in &node.accesses[..i] {
                        b.handle.unpin(mem_node, b.mode);
                    }
                    sim.release_members(&members);
                    self.complete(w, &node, Outcome::Failed(e), q);
                    return;
                }
            }
            let st = lock(&world.state);
            for a in node.accesses.iter().filter(|a| a.mode.reads()) {
                if let Some(&t) = st.ready.get(&(sim.slot, a.handle.core().id, mem_node)) {
                    start = start.max(t);
                }
            }
        }
        let team = 1 + members.len();
        let mut secs = self.task_seconds(w, &node, team);
        let slowdown = &world.platform.node.cpu.slowdown;
        if !kind.is_device() && !slowdown.is_empty() {
            // Shared memory bandwidth: the cores of the platform node busy
            // now (every rank on it), this one (and its team) included.
            let mut busy_cpus = lock(&world.busy_cpus);
            if busy_cpus.len() <= sim.platform_node {
                busy_cpus.resize(sim.platform_node + 1, 0);
            }
            busy_cpus[sim.platform_node] += team;
            let busy = busy_cpus[sim.platform_node];
            let at = |b: usize| slowdown[b.min(slowdown.len()) - 1];
            secs *= at(busy) / at(slowdown.len());
        }
        let end = world.after(start, secs);
        let rendezvous = node.rendezvous().cloned();
        lock(&sim.running)[w] = Some(Running {
            node,
            once,
            mem_node,
            start,
            secs,
            members,
        });
        match rendezvous {
            Some(r) => world.meet(&r, sim.slot, w, start, secs),
            None => world.schedule(
                end,
                Kind::TaskEnd {
                    slot: sim.slot,
                    worker: w,
                },
            ),
        }
    }

    /// Finish a task that never ran (cancelled, or its data could not be had).
    fn complete(&self, w: usize, node: &Arc<TaskNode>, outcome: Outcome, q: &mut dyn WorkerQueue) {
        self.shared.policy().finished(w, ReadyTask::of(node));
        worker::complete(self.shared, node, outcome, q);
        self.world.mark_dirty(self.sim.slot);
    }

    /// Worker `w`'s task ends now: its team goes back to work, its data is
    /// released, its `then` hook runs with `w`'s queue as the current one
    /// (the symbolic front-end unfolds into it), and it completes as on a
    /// real worker (trace, calibration, successors).
    pub(super) fn end_task(&self, w: usize) {
        let (world, shared, sim) = (self.world, self.shared, self.sim);
        let Some(r) = lock(&sim.running)[w].take() else {
            return;
        };
        if !shared.kinds()[w].is_device() && !world.platform.node.cpu.slowdown.is_empty() {
            lock(&world.busy_cpus)[sim.platform_node] -= 1 + r.members.len();
        }
        sim.release_members(&r.members);
        let node = r.node;
        let mut q = sim.take_queue(w);
        let Once {
            cpu,
            device: _,
            then,
        } = r.once;
        let run_body = world.execute_bodies && !node.accesses.iter().any(|a| a.handle.is_virtual());
        let mut outcome = Outcome::Ok;
        {
            let _current = CurrentGuard::set(shared, w, &mut *q);
            if run_body {
                let ctx = TaskContext::new(&node, w, r.mem_node, shared.sleep(), None);
                outcome = match catch_unwind(AssertUnwindSafe(|| {
                    worker::call(&node, &ctx, Chosen::Cpu(cpu), None)
                })) {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(p) => Outcome::Failed(format!("panicked: {}", panic_message(&*p))),
                };
            }
            if shared.multi_node() {
                worker::release_all(&node, r.mem_node);
                let mut st = lock(&world.state);
                for a in node.accesses.iter().filter(|a| a.mode.writes()) {
                    st.ready.remove(&(sim.slot, a.handle.core().id, r.mem_node));
                }
                drop(st);
                if shared.kinds()[w].is_device() && crate::sched::writes_through(&node) {
                    shared
                        .policy()
                        .write_back(&ReadyTask(Arc::clone(&node)), r.mem_node);
                }
            }
            if let (Outcome::Ok, Some(then)) = (&outcome, then) {
                outcome = match catch_unwind(AssertUnwindSafe(|| then(node.id))) {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(p) => Outcome::Failed(format!("panicked: {}", panic_message(&*p))),
                };
            }
        }
        if let Some(trace) = &sim.trace {
            let end = world.now_ns();
            let label = node.label().map(|l| l.into_owned());
            let mut t = lock(trace);
            for (rank, &m) in std::iter::once(&w).chain(&r.members).enumerate() {
                t.tasks.push(TaskRecord {
                    id: node.id,
                    codelet: node.codelet.name.clone(),
                    label: label.clone(),
                    worker: m as u32,
                    priority: node.priority,
                    // Counted once, on the leader's record.
                    flops: if rank == 0 { node.flops } else { 0.0 },
                    start: r.start,
                    end,
                    team_rank: rank as u32,
                });
            }
            drop(t);
            if let Some(p) = node.preds.get() {
                let mut t = lock(trace);
                t.edges.extend(p.as_slice().iter().map(|&x| (x, node.id)));
            }
        }
        if shared.calibrate() && matches!(outcome, Outcome::Ok) {
            let kind = &shared.kinds()[w];
            let overhead = self.processor(w).overhead;
            let arch = crate::team::team_arch(kind.arch, 1 + r.members.len());
            world.durations.perf().record(
                &node.codelet.name,
                &arch,
                node.size_key(),
                (r.secs - overhead).max(0.0),
            );
        }
        {
            let mut st = lock(&world.state);
            st.stats.tasks += 1;
            st.stats.peak_in_flight = st.stats.peak_in_flight.max(shared.in_flight());
        }
        shared.policy().finished(w, ReadyTask::of(&node));
        worker::complete(shared, &node, outcome, &mut *q);
        sim.put_queue(w, q);
        world.mark_dirty(sim.slot);
    }

    /// The processor worker `w` models: its virtual device's, else the
    /// platform's CPU core.
    fn processor(&self, w: usize) -> &'a Processor {
        match &self.shared.kinds()[w].device {
            Some(d) => match d.as_any().downcast_ref::<VirtualDevice>() {
                Some(v) => &v.spec.proc,
                None => &self.world.platform.node.cpu,
            },
            None => &self.world.platform.node.cpu,
        }
    }

    /// Modelled duration of `node` on worker `w` (leading a team of `team`),
    /// in seconds.
    fn task_seconds(&self, w: usize, node: &TaskNode, team: usize) -> f64 {
        self.world
            .durations
            .seconds(self.processor(w), self.shared.kinds()[w].arch, node, team)
    }
}
