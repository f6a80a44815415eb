//! Workers (CPU and device): the loop that pops ready tasks, makes their
//! data valid on the worker's memory node, runs their bodies, and releases
//! their successors.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::device::{Device, TaskCost};
use crate::error::BodyError;
use crate::recorder::{Event, Recorder};
use crate::runtime::Shared;
use crate::sched::{Pushed, ReadyTask, WorkerQueue};
use crate::sleep::Pop;
use crate::task::{lock_successors, state, Body, DeviceMatch, Once, TaskContext, TaskNode};
use crate::team::{Board, Joined, Post, TeamJob};
use crate::util::panic_message;
use crate::watch::{Activity, Watch, Watching};

/// How a task ended.
pub(crate) enum Outcome {
    Ok,
    Failed(String),
    Cancelled,
}

/// The worker a thread is, while it runs a task's body: submissions from the
/// body go to this worker's own queue, and waits from it are refused.
#[derive(Clone, Copy)]
pub(crate) struct Current {
    pub(crate) runtime: u64,
    /// The worker's runtime, which the thread that set this value holds
    /// (an `Arc`: a worker's thread for its whole life, a simulation's
    /// thread while it runs its virtual worker's task) for as long as
    /// `CURRENT` holds it.
    shared: *const Shared,
    pub(crate) worker: usize,
    /// The worker's queue. Valid while `CURRENT` holds this value: set from
    /// the worker's `&mut` queue right before a body runs (or the worker
    /// polls the network) and replaced by what it replaced right after
    /// (`CurrentGuard`), and the worker does not touch the queue in between.
    queue: *mut dyn WorkerQueue,
    /// Set while the worker polls the network from its idle path (no body
    /// runs, no lock of the runtime is held): a receive its message
    /// releases may run right here (`run_received`).
    idle: bool,
    /// Set while a body runs: what it submits goes where other workers can
    /// take it (the body may run on for long). Outside a body (the task's
    /// `then`, a poll of the network) the worker pops next, so a task made
    /// ready here may be kept for it (`WorkerQueue::push_next`).
    in_body: bool,
}

thread_local! {
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// The worker of `runtime` this thread is running a body for, if any.
pub(crate) fn current(runtime: u64) -> Option<Current> {
    CURRENT.with(|c| c.get()).filter(|c| c.runtime == runtime)
}

/// `f` on the runtime `shared` points to, if this thread is one of its
/// workers running a body or polling the network (see [`Current`]); else
/// `f(None)`. No reference count is taken: the worker holds the runtime.
/// (`Submitter` and `Hold` hold it weakly, and each `upgrade` wrote the
/// count's line, shared by every thread that submits: two atomic writes
/// on a line that moved between the workers, per task a symbolic
/// front-end makes and per message that releases a receive.)
pub(crate) fn on_own_runtime<R>(shared: *const Shared, f: impl FnOnce(Option<&Shared>) -> R) -> R {
    let own = CURRENT
        .with(|c| c.get())
        .filter(|c| std::ptr::eq(c.shared, shared));
    // SAFETY: a `Current` is set only while its worker's thread holds its
    // runtime (`Current::shared`), so the pointer is valid for this call.
    f(own.map(|c| unsafe { &*c.shared }))
}

impl Current {
    /// Push `task` into this worker's queue (a task its body made ready).
    pub(crate) fn push(&self, task: ReadyTask) -> Pushed {
        // SAFETY: `current` hands out a `Current` only on the worker's own
        // thread while its body runs (or it polls), when the queue pointer
        // is valid and no other reference to the queue is in use (see the
        // field's doc).
        let queue = unsafe { &mut *self.queue };
        match self.in_body {
            true => queue.push(task),
            false => queue.push_next(task),
        }
    }

    /// Whether tasks wait for this worker: kept for it, or visibly queued
    /// ([`WorkerQueue::has_more`]).
    pub(crate) fn has_more(&self) -> bool {
        // SAFETY: as `push`.
        let queue = unsafe { &*self.queue };
        queue.has_kept() || queue.has_more()
    }

    /// Run `task`, a receive its message just made ready, on this worker
    /// now, from inside its poll of the network, if the worker is polling
    /// from its idle path and the task can run here as it would after a
    /// pop: a CPU task of a host-only runtime with no trace (a traced one
    /// records each task on its worker's recorder). Its successors go to
    /// this worker's queue. Saves the receive a round through the queues
    /// and the worker's loop between its message and the task it feeds.
    /// Gives the task back when it cannot run here.
    pub(crate) fn run_received(&self, shared: &Shared, task: ReadyTask) -> Option<ReadyTask> {
        if !self.idle || shared.trace().is_some() || shared.multi_node() || shared.sim().is_some() {
            return Some(task);
        }
        // SAFETY: as `push`; the worker's own idle path is suspended in
        // this poll, so the queue is not otherwise borrowed, and the task
        // was just made ready by this thread (no other worker popped it).
        let queue = unsafe { &mut *self.queue };
        execute(shared, task, queue, self.worker, None, None);
        None
    }
}

/// Sets `CURRENT`, and puts the value it replaced back when dropped (the
/// body is done, even if it unwinds, or the poll is over).
pub(crate) struct CurrentGuard(Option<Current>);

impl CurrentGuard {
    pub(crate) fn set(shared: &Shared, worker: usize, queue: &mut dyn WorkerQueue) -> CurrentGuard {
        Self::with(shared, worker, queue, false)
    }

    /// For a worker polling the network from its idle path.
    fn idle(shared: &Shared, worker: usize, queue: &mut dyn WorkerQueue) -> CurrentGuard {
        Self::with(shared, worker, queue, true)
    }

    /// `shared`: the runtime the calling thread holds until the guard drops.
    fn with(
        shared: &Shared,
        worker: usize,
        queue: &mut dyn WorkerQueue,
        idle: bool,
    ) -> CurrentGuard {
        let queue: *mut (dyn WorkerQueue + '_) = queue;
        // SAFETY: only the lifetime is erased; the pointer is cleared by the
        // guard's drop before the borrow it came from ends.
        let queue: *mut dyn WorkerQueue = unsafe { std::mem::transmute(queue) };
        let before = CURRENT.with(|c| {
            c.replace(Some(Current {
                runtime: shared.id(),
                shared,
                worker,
                queue,
                idle,
                in_body: !idle,
            }))
        });
        CurrentGuard(before)
    }

    /// The body has ended: what the worker makes ready from now on (in the
    /// task's `then`) it may keep for its next pop.
    fn body_ended(&self) {
        CURRENT.with(|c| {
            if let Some(mut cur) = c.get() {
                cur.in_body = false;
                c.set(Some(cur));
            }
        });
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0.take()));
    }
}

/// What a worker takes next: a task, or a place in a recruiting team.
enum Work {
    Task(ReadyTask),
    Join(Joined),
}

/// What an idle worker pops from: the team board first (CPU workers only),
/// then its policy queue. The sleep protocol's re-check after announcing
/// (W3) thereby sees a posted team as it sees a pushed task.
struct Source<'a> {
    shared: &'a Shared,
    queue: &'a mut dyn WorkerQueue,
    board: Option<&'a Board>,
    index: usize,
    /// The network idle CPU workers watch (`crate::watch`); `None` on
    /// device workers.
    watch: Option<&'a Watch>,
    /// Whether this worker holds the watcher role (and what it watches):
    /// given up when the source is dropped, that is, when the worker takes
    /// work.
    watching: Watching,
}

impl Pop for Source<'_> {
    type Item = Work;
    fn pop(&mut self) -> Option<Work> {
        if let Some(joined) = self.board.and_then(|b| b.try_join(self.index)) {
            // A task kept for this worker would wait for the whole team
            // task: other workers may take it now.
            if let Some(kept) = self.queue.take_kept() {
                let pushed = self.queue.push(kept);
                self.shared.wake(pushed);
            }
            return Some(Work::Join(joined));
        }
        self.queue.pop().map(Work::Task)
    }

    fn poll(&mut self) -> Activity {
        match self.watch {
            Some(w) => {
                // A receive the poll releases may run here (`run_received`).
                let _current = CurrentGuard::idle(self.shared, self.index, &mut *self.queue);
                w.poll(&mut self.watching)
            }
            None => Activity::Idle,
        }
    }

    fn settled(&mut self) {
        // Every task may have finished (the last one here, perhaps).
        self.shared.notify_drained();
    }
}

impl Source<'_> {
    /// Between two tasks: poll the watched network, without the watcher
    /// role (`Watch::poll_between`), so a message that came while this
    /// worker computed releases its tasks before the worker picks its next
    /// one, instead of waiting for the communication thread's next round.
    fn poll_between(&mut self) {
        if let Some(w) = self.watch {
            // A receive the poll releases may run here, as in an idle poll.
            let _current = CurrentGuard::idle(self.shared, self.index, &mut *self.queue);
            w.poll_between();
        }
    }
}

impl Drop for Source<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.watch {
            w.leave(&mut self.watching);
        }
    }
}

pub(crate) fn run_worker(shared: Arc<Shared>, mut queue: Box<dyn WorkerQueue>, index: usize) {
    let mut recorder = shared
        .trace()
        .as_ref()
        .map(|log| Recorder::new(Arc::clone(log), index));
    let is_device = shared.kinds()[index].is_device();
    let board = (!is_device).then_some(shared.board());
    // When this worker last polled a watched network between two tasks.
    let mut polled = std::time::Instant::now();
    loop {
        if shared.sleep().is_shutdown() {
            break;
        }
        let mut source = Source {
            shared: &shared,
            queue: &mut *queue,
            board,
            index,
            watch: (!is_device).then_some(shared.watch()),
            watching: None,
        };
        if !is_device && shared.watch().is_set() && polled.elapsed() >= crate::watch::BETWEEN_TASKS
        {
            polled = std::time::Instant::now();
            source.poll_between();
        }
        let work = source
            .pop()
            .or_else(|| shared.sleep().idle(index, &mut source));
        drop(source);
        let Some(work) = work else { break };
        let task = match work {
            Work::Task(t) => t,
            Work::Join(joined) => {
                serve(joined, recorder.as_mut());
                continue;
            }
        };
        if is_device
            && !task
                .0
                .can_run_on(shared.memory(), shared.kinds()[index].node)
        {
            // Host-only data, a CPU-only task, a working set larger than the
            // device's memory (admission control), or no body for a device
            // the host cannot address: the CPU workers take it.
            let pushed = shared.policy().push_cpu_only(task);
            shared.wake(pushed);
            continue;
        }
        // Chain wake-up (sleep/README.md): more work is queued and someone sleeps.
        if shared.sleep().has_sleepers() && queue.has_more() {
            shared.sleep().notify_one();
        }
        match team_size(&shared, &task.0, is_device) {
            Some(size) if size > 1 => {
                lead(&shared, task, size, &mut *queue, index, recorder.as_mut())
            }
            _ => execute(&shared, task, &mut *queue, index, recorder.as_mut(), None),
        }
    }
}

/// The team a team task gets on a CPU worker: the size a policy chose, else
/// the largest the runtime allows. `None`: not a team task here (a device
/// worker runs one alone, with its device body).
pub(crate) fn team_size(shared: &Shared, node: &TaskNode, is_device: bool) -> Option<usize> {
    let team = node.team().filter(|_| !is_device)?;
    match node.team_target.load(Ordering::Relaxed) {
        0 => team.largest_within(shared.cpu_workers()),
        chosen => Some(chosen),
    }
}

/// Lead `task`'s team of `size` (`team/README.md`, L2–L3): post it (or,
/// if another team recruits, hand the task back and join that one), wake
/// the parked CPU workers, wait on this thread for the team, and run it.
fn lead(
    shared: &Shared,
    task: ReadyTask,
    size: usize,
    queue: &mut dyn WorkerQueue,
    index: usize,
    recorder: Option<&mut Recorder>,
) {
    let board = shared.board();
    // Another team recruits: back where any worker may find it.
    let give_back = |task| {
        let pushed = queue.push(task);
        shared.wake(pushed);
    };
    let (job, task) = match board.post(task, size, index, shared.cpu_workers(), give_back) {
        Post::Recruiting(job, task) => (job, task),
        Post::Helping(joined) => {
            if let Some(joined) = joined {
                serve(joined, recorder);
            }
            return;
        }
    };
    for w in (0..shared.cpu_workers()).filter(|&w| w != index) {
        shared.sleep().notify_worker(w);
    }
    if !board.wait_complete(&job, || shared.sleep().is_shutdown()) {
        let node = task.0;
        // SAFETY: this worker popped the task from a ready queue.
        drop(unsafe { node.take_once() });
        complete(
            shared,
            &node,
            Outcome::Failed("the runtime shut down while the task's team was recruiting".into()),
            queue,
        );
        return;
    }
    execute(shared, task, queue, index, recorder, Some(&job));
}

/// A member of a team: run what its leader hands out until the body
/// returns, then record the task on this worker's timeline too.
fn serve(joined: Joined, recorder: Option<&mut Recorder>) {
    joined.serve(|node, rank, (start, end)| {
        // (0, 0): the task was cancelled, or not traced; the leader recorded nothing.
        if let (Some(rec), true) = (recorder, end > 0) {
            let mut e = event(node, start, end);
            e.team_rank = rank as u32;
            e.flops = 0.0; // counted once, on the leader's event
            rec.record(e, &node.codelet);
        }
    });
}

/// After a team task completed: its members checked out before its
/// successors were released (L5 of `team/README.md`), so they may have
/// parked; offer them the `offered` tasks this leader just pushed where
/// others may take them. The leader takes one itself; one member is woken
/// per other task (then any parked worker, up to the CPU workers), at once
/// rather than one after another through the chain wake-up, each a futex
/// wake-up and a pop later than the one before. Extra wake-ups are P2–P3 steps after P1, so the
/// sleep protocol's proof is unchanged (`sleep/README.md`).
fn wake_members(shared: &Shared, job: &TeamJob, offered: usize) {
    let mut left = offered.saturating_sub(1).min(shared.cpu_workers());
    if left == 0 {
        return;
    }
    for w in job.members() {
        if left == 0 {
            return;
        }
        shared.sleep().notify_worker(w);
        left -= 1;
    }
    for _ in 0..left {
        shared.sleep().notify_one();
    }
}

fn execute(
    shared: &Shared,
    task: ReadyTask,
    queue: &mut dyn WorkerQueue,
    index: usize,
    recorder: Option<&mut Recorder>,
    team: Option<&TeamJob>,
) {
    let node = task.0;
    // SAFETY: this worker popped the task from a ready queue.
    let once = unsafe { node.take_once() };
    if shared.is_interrupted() {
        // Published to `cancelled`'s reader below on this same thread.
        node.cancel(|| crate::runtime::INTERRUPTED.into());
    }
    // Acquire pairs with the Release of the predecessor's `pending` decrement
    // that followed its store of `cancelled`.
    let outcome = if node.cancelled.load(Ordering::Acquire) {
        Outcome::Cancelled
    } else {
        let start = recorder.as_ref().map(|r| r.now());
        let (outcome, end) = {
            let current = CurrentGuard::set(shared, index, &mut *queue);
            let Once { cpu, device, then } = once;
            // Data this task writes may still be read by a transport
            // (`dist::lent`).
            crate::dist::lent::before_writes(&node.accesses);
            let outcome = if shared.multi_node() {
                run_with_data(shared, &node, index, cpu, device, team)
            } else {
                let host = crate::memory::HOST;
                run_body(shared, &node, index, host, Chosen::Cpu(cpu), team)
            };
            // The span ends with the body, before `then` (a symbolic task
            // makes its successors there): as StarPU's and PaRSEC's traces
            // keep callbacks and dependency release out of a task's
            // execution, so a trace shows what the body took and the making
            // as the successors' release latency (`trace summary`).
            let end = recorder.as_ref().map(|r| r.now());
            let outcome = match (outcome, then) {
                (Outcome::Ok, Some(then)) => {
                    current.body_ended();
                    match catch_unwind(AssertUnwindSafe(|| then(node.id))) {
                        Ok(Ok(())) => Outcome::Ok,
                        Ok(Err(e)) => Outcome::Failed(e.to_string()),
                        Err(p) => Outcome::Failed(format!("panicked: {}", panic_message(&*p))),
                    }
                }
                (outcome, _) => outcome,
            };
            (outcome, end)
        };
        if let (Some(rec), Some(start), Some(end)) = (recorder, start, end) {
            if let Some(job) = team {
                job.set_span(start, end);
            }
            rec.record(event(&node, start, end), &node.codelet);
        }
        outcome
    };
    if let Some(job) = team {
        job.release();
    }
    let kind = &shared.kinds()[index];
    if kind.is_device() && matches!(outcome, Outcome::Ok) && crate::sched::writes_through(&node) {
        shared
            .policy()
            .write_back(&ReadyTask(Arc::clone(&node)), kind.node);
    }
    shared.policy().finished(index, ReadyTask::of(&node));
    let offered = complete(shared, &node, outcome, queue);
    if let Some(job) = team {
        wake_members(shared, job, offered);
    }
    shared.nodes().recycle(node);
}

/// Which body to run.
pub(crate) enum Chosen {
    /// The CPU body: the task's own, else the codelet's.
    Cpu(Option<Body>),
    /// A device body: the task's own, else the codelet's for this device.
    Device(Option<Body>),
}

#[inline]
pub(crate) fn call(
    node: &TaskNode,
    ctx: &TaskContext<'_>,
    chosen: Chosen,
    device: Option<&dyn Device>,
) -> Result<(), BodyError> {
    match chosen {
        Chosen::Cpu(Some(b)) | Chosen::Device(Some(b)) => b(ctx),
        Chosen::Cpu(None) => match &node.codelet.bodies.cpu {
            Some(f) => f(ctx, &*node.params, &mut ctx.cursor()),
            // Nothing to run, on purpose (`Codelet::empty`).
            None if node.codelet.bodies.empty => Ok(()),
            // Succeeding here would leave the data silently unchanged.
            None => Err(format!(
                "codelet '{}' has no CPU body (give one with `.cpu(..)` or `.body(..)`, or declare the codelet `Codelet::empty` if its tasks do nothing on purpose)",
                node.codelet.name
            )
            .into()),
        },
        Chosen::Device(None) => {
            let d = device.ok_or("a device body ran off a device")?;
            match node.codelet.bodies.device(d.as_any().type_id()) {
                Some(f) => f(d.as_any(), ctx, &*node.params, &mut ctx.cursor()),
                None => Err(format!(
                    "codelet '{}' has no body for {}",
                    node.codelet.name,
                    d.name()
                )
                .into()),
            }
        }
    }
}

/// Run the chosen body on memory node `mem_node`, catching panics; feeds the
/// perf models when calibrating.
#[inline]
fn run_body(
    shared: &Shared,
    node: &TaskNode,
    index: usize,
    mem_node: usize,
    chosen: Chosen,
    team: Option<&TeamJob>,
) -> Outcome {
    let kind = &shared.kinds()[index];
    let device = kind.device.as_ref().filter(|_| mem_node == kind.node);
    let ctx = TaskContext::new(node, index, mem_node, shared.sleep(), device).with_team(team);
    let t0 = shared.calibrate().then(Instant::now);
    let mut result = None;
    let mut once = Some(chosen);
    let dev: Option<&dyn Device> = device.map(|d| &**d);
    let mut run = || {
        if let Some(c) = once.take() {
            result = Some(catch_unwind(AssertUnwindSafe(|| call(node, &ctx, c, dev))));
        }
    };
    let mut device_error = None;
    let elapsed = match device {
        // A device body, or the CPU body on the device's replicas (sim).
        Some(d) => {
            let cost = TaskCost {
                codelet: &node.codelet.name,
                flops: node.flops,
                bytes: node.footprint(),
            };
            match d.run(&cost, &mut run) {
                Ok(t) => Some(t),
                Err(e) => {
                    device_error = Some(e);
                    None
                }
            }
        }
        None => {
            run();
            t0.map(|t| t.elapsed())
        }
    };
    let outcome = match (result, device_error) {
        (Some(Ok(Err(e))), _) => Outcome::Failed(e.to_string()),
        (Some(Err(payload)), _) => {
            Outcome::Failed(format!("panicked: {}", panic_message(&*payload)))
        }
        (_, Some(e)) => Outcome::Failed(format!("device error: {e}")),
        (Some(Ok(Ok(()))), None) => Outcome::Ok,
        (None, None) => Outcome::Failed("the device never ran the body".into()),
    };
    if let (true, Some(el), Outcome::Ok) = (shared.calibrate(), elapsed, &outcome) {
        let arch = if device.is_none() { "cpu" } else { kind.arch };
        let size = team.map_or(1, |j| j.sync.size());
        let arch = crate::team::team_arch(arch, size);
        shared
            .perf()
            .record(&node.codelet.name, &arch, node.size_key(), el.as_secs_f64());
    }
    outcome
}

/// Acquire every access on `mem_node` (transfers), run, release.
fn with_data(node: &TaskNode, mem_node: usize, run: impl FnOnce() -> Outcome) -> (Outcome, bool) {
    for (i, a) in node.accesses.iter().enumerate() {
        if let Err(e) = a.handle.acquire(&a.handle, mem_node, a.mode, true) {
            for b in &node.accesses[..i] {
                b.handle.unpin(mem_node, b.mode);
            }
            return (Outcome::Failed(e), true);
        }
    }
    (run(), false)
}

/// A task on a runtime with several memory nodes: data made valid on the
/// worker's node first. On a device worker, a device body runs if the task
/// has one for this device; if it fails, the task falls back to the CPU
/// body, on the host, on this same thread (Cashmere).
fn run_with_data(
    shared: &Shared,
    node: &TaskNode,
    index: usize,
    cpu: Option<Body>,
    device: Option<(DeviceMatch, Body)>,
    team: Option<&TeamJob>,
) -> Outcome {
    let kind = &shared.kinds()[index];
    let mem_node = kind.node;
    let host = crate::memory::HOST;
    let dev = match &kind.device {
        Some(d) if node.has_device_body(&**d) => d,
        _ => {
            // A CPU worker, or a device running the CPU body on its own
            // (host-addressable) replicas.
            let (outcome, acquire_failed) = with_data(node, mem_node, || {
                run_body(shared, node, index, mem_node, Chosen::Cpu(cpu), team)
            });
            if !acquire_failed {
                release_all(node, mem_node);
            }
            return outcome;
        }
    };
    let ty = dev.as_any().type_id();
    let task_body = device.and_then(|(m, b)| match m {
        DeviceMatch::Any => Some(b),
        DeviceMatch::Type(t) if t == ty => Some(b),
        DeviceMatch::Type(_) => None,
    });
    let (outcome, acquire_failed) = with_data(node, mem_node, || {
        run_body(
            shared,
            node,
            index,
            mem_node,
            Chosen::Device(task_body),
            None,
        )
    });
    if acquire_failed {
        return outcome;
    }
    let has_cpu = cpu.is_some() || node.codelet.bodies.cpu.is_some();
    match outcome {
        Outcome::Failed(msg) if has_cpu => {
            // Throw away what the device wrote; the host copy must still be valid.
            // Every access is discarded (no short circuit): each one unpins.
            let mut trusted = true;
            for a in node.accesses.iter() {
                trusted &= a.handle.discard(mem_node, a.mode);
            }
            shared.note_fallback(|| format!("{} on {}: {msg}", node.info(), dev.name()));
            if !trusted {
                return Outcome::Failed(format!(
                    "device body failed ({msg}) and the data it was writing has no other valid copy, so the CPU body cannot run"
                ));
            }
            let (outcome, acquire_failed) = with_data(node, host, || {
                run_body(shared, node, index, host, Chosen::Cpu(cpu), None)
            });
            if !acquire_failed {
                release_all(node, host);
            }
            outcome
        }
        outcome => {
            release_all(node, mem_node);
            outcome
        }
    }
}

pub(crate) fn release_all(node: &TaskNode, mem_node: usize) {
    for a in node.accesses.iter() {
        a.handle.release(mem_node, a.mode);
    }
}

fn event(node: &TaskNode, start: u64, end: u64) -> Event {
    Event {
        id: node.id,
        codelet: node.codelet.id,
        // Built only here, when tracing.
        label: node.label().map(|l| l.into_owned().into_boxed_str()),
        priority: node.priority,
        flops: node.flops,
        start,
        end,
        team_rank: 0,
        // A copy (or an Arc clone past eight): no allocation per event.
        preds: node.preds.get().map(|p| (**p).clone()).unwrap_or_default(),
    }
}

/// Finish a task: record failures, mark it done, release its successors into
/// this worker's queue, and wake waiters. Returns how many successors went
/// to a queue other workers may take from (`Local` or `Shared`) without a
/// wake-up.
#[inline]
pub(crate) fn complete(
    shared: &Shared,
    node: &Arc<TaskNode>,
    outcome: Outcome,
    queue: &mut dyn WorkerQueue,
) -> usize {
    let failed = !matches!(outcome, Outcome::Ok);
    if failed {
        shared.record_failure(node, &outcome);
    } else {
        shared.add_flops(node.flops);
    }
    let final_state = match outcome {
        Outcome::Ok => state::DONE_OK,
        Outcome::Failed(_) => state::DONE_FAILED,
        Outcome::Cancelled => state::DONE_CANCELLED,
    };
    let (successors, hooks, last_writes) = {
        let mut s = lock_successors(node);
        s.done = true;
        // SeqCst: pairs with waiters' SeqCst reads (see Shared::wait_until).
        node.state.store(final_state, Ordering::SeqCst);
        (
            std::mem::take(&mut s.list),
            std::mem::take(&mut s.hooks),
            s.last_writes,
        )
    };
    // Before any successor is released: a hook may read what this task wrote.
    for hook in hooks {
        hook(!failed);
    }
    // Successors bound for a device whose inputs were prefetched: a task
    // that shares many data with its successor has an edge per datum. (A
    // `Vec`: empty, it costs nothing to make and drop on the CPU-only path,
    // where a `SmallVec` cost about 90 instructions per task.)
    let mut prefetched: Vec<*const TaskNode> = Vec::new();
    let mut offered = 0;
    for (succ, flow) in successors {
        if failed && flow {
            succ.cancel(|| node.root_cause());
        }
        if succ.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Local and shared pushes rely on the chain wake-up after this
            // worker's next pop; a push into another worker's private queue
            // wakes that worker.
            match queue.push_next(ReadyTask(succ)) {
                Pushed::Worker(w) => shared.sleep().notify_worker(w),
                Pushed::Local | Pushed::Shared => offered += 1,
                Pushed::Kept => {}
            }
        } else if let Some(n) = succ
            .node_hint
            .filter(|&n| !failed && !shared.memory().is_host(n))
        {
            // Not ready yet, but bound for a device: what this task just
            // produced for it can move there now, while its other
            // predecessors run (a panel's broadcast overlapping the
            // devices' previous update).
            if prefetched.contains(&Arc::as_ptr(&succ)) {
                continue;
            }
            prefetched.push(Arc::as_ptr(&succ));
            shared.policy().prefetch_produced(
                &ReadyTask(Arc::clone(node)),
                &ReadyTask(Arc::clone(&succ)),
                n,
            );
        }
    }
    // An ordered task is in no handle's dependency state (`TaskNode::ordered`).
    for a in node.accesses.iter().filter(|_| !node.ordered) {
        if a.mode.writes() {
            if last_writes > 0 {
                a.core().writer_finished(node.id);
            }
        } else {
            a.core().reader_finished();
        }
    }
    shared.finish_one(node);
    offered
}
