//! Workers (CPU and device): the loop that pops ready tasks, makes their
//! data valid on the worker's memory node, runs their bodies, and releases
//! their successors.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::device::TaskCost;
use crate::recorder::{Event, Recorder};
use crate::runtime::Shared;
use crate::sched::dmda::size_key;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::task::{lock_successors, state, Body, TaskContext, TaskNode};
use crate::util::panic_message;

/// How a task ended.
pub(crate) enum Outcome {
    Ok,
    Failed(String),
    Cancelled,
}

pub(crate) fn run_worker(shared: Arc<Shared>, mut queue: Box<dyn WorkerQueue>, index: usize) {
    let mut recorder = shared
        .trace
        .as_ref()
        .map(|log| Recorder::new(Arc::clone(log), index));
    let is_device = shared.kinds[index].is_device();
    loop {
        if shared.sleep.is_shutdown() {
            break;
        }
        let task = match queue.pop() {
            Some(t) => t,
            None => match shared.sleep.idle(&mut *queue) {
                Some(t) => t,
                None => break,
            },
        };
        if is_device && !task.0.can_run_on(&shared.memory, shared.kinds[index].node) {
            // Host-only data, a CPU-only task, a working set larger than the
            // device's memory (admission control), or no device body for a
            // device the host cannot address: the CPU workers take it.
            shared.policy.push_cpu_only(task);
            shared.sleep.notify_all();
            continue;
        }
        // Chain wake-up (sleep/README.md): more work is queued and someone sleeps.
        if shared.sleep.has_sleepers() && queue.has_more() {
            shared.sleep.notify_one();
        }
        execute(&shared, task, &mut *queue, index, recorder.as_mut());
    }
}

fn execute(
    shared: &Shared,
    task: ReadyTask,
    queue: &mut dyn WorkerQueue,
    index: usize,
    recorder: Option<&mut Recorder>,
) {
    let node = task.0;
    // Acquire pairs with the Release of the predecessor's `pending` decrement
    // that followed its store of `cancelled`.
    let outcome = if node.cancelled.load(Ordering::Acquire) {
        // Mark running so the life cycle stays SUBMITTED → RUNNING → DONE_*.
        // SAFETY: this worker popped the task; the bodies are dropped unrun.
        drop(unsafe { node.take_body() });
        Outcome::Cancelled
    } else {
        // SAFETY: this worker popped the task from a ready queue.
        let (cpu, device) = unsafe { node.take_body() };
        let start = recorder.as_ref().map(|r| r.now());
        let outcome = if shared.multi_node {
            run_with_data(shared, &node, index, cpu, device)
        } else {
            run_body(shared, &node, index, crate::memory::HOST, cpu)
        };
        if let (Some(rec), Some(start)) = (recorder, start) {
            let end = rec.now();
            rec.record(event(&node, start, end), &node.codelet);
        }
        outcome
    };
    shared.policy.finished(index, &ReadyTask(Arc::clone(&node)));
    complete(shared, &node, outcome, queue);
}

/// Run `body` (if any) on memory node `mem_node`, catching panics; feeds the
/// perf models when calibrating.
fn run_body(
    shared: &Shared,
    node: &TaskNode,
    index: usize,
    mem_node: usize,
    body: Option<Body>,
) -> Outcome {
    let Some(body) = body else {
        return Outcome::Ok;
    };
    let kind = &shared.kinds[index];
    let device = kind.device.as_ref().filter(|_| mem_node == kind.node);
    let ctx = TaskContext::new(node, index, mem_node, &shared.sleep, device);
    let t0 = shared.calibrate.then(Instant::now);
    let mut result = None;
    let mut once = Some(body);
    let mut run = || {
        if let Some(b) = once.take() {
            result = Some(catch_unwind(AssertUnwindSafe(|| b(&ctx))));
        }
    };
    let mut device_error = None;
    let elapsed = match (&kind.device, mem_node) {
        // A device body, or the CPU body on the device's replicas (sim).
        (Some(d), n) if n == kind.node => {
            let cost = TaskCost {
                codelet: node.codelet.name(),
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
        _ => {
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
    if let (true, Some(el), Outcome::Ok) = (shared.calibrate, elapsed, &outcome) {
        let arch = if kind.device.is_none() || mem_node != kind.node {
            "cpu"
        } else {
            kind.arch
        };
        shared
            .perf
            .record(node.codelet.name(), arch, size_key(node), el.as_secs_f64());
    }
    outcome
}

/// Acquire every access on `mem_node` (transfers), run, release.
fn with_data(
    shared: &Shared,
    node: &TaskNode,
    mem_node: usize,
    run: impl FnOnce() -> Outcome,
) -> (Outcome, bool) {
    let mem = &shared.memory;
    for (i, a) in node.accesses.iter().enumerate() {
        if let Err(e) = a.handle.acquire(&a.handle, mem_node, a.mode, mem, true) {
            for b in &node.accesses[..i] {
                b.handle.unpin(mem_node, b.mode);
            }
            return (Outcome::Failed(e), true);
        }
    }
    let outcome = run();
    (outcome, false)
}

/// A task on a runtime with devices: data made valid on the worker's memory
/// node first. A failing device body falls back to the CPU body, on the
/// host, on this same thread (Cashmere).
fn run_with_data(
    shared: &Shared,
    node: &TaskNode,
    index: usize,
    cpu: Option<Body>,
    device: Option<Body>,
) -> Outcome {
    let kind = &shared.kinds[index];
    let mem_node = kind.node;
    if !kind.is_device() {
        let (outcome, acquire_failed) = with_data(shared, node, mem_node, || {
            run_body(shared, node, index, mem_node, cpu)
        });
        if !acquire_failed {
            release_all(node, mem_node);
        }
        return outcome;
    }
    // A device worker: the device body if there is one, else the CPU body on
    // the device's replicas.
    let (first, fallback) = match device {
        Some(d) => (Some(d), cpu),
        None => (cpu, None),
    };
    let (outcome, acquire_failed) = with_data(shared, node, mem_node, || {
        run_body(shared, node, index, mem_node, first)
    });
    if acquire_failed {
        return outcome;
    }
    match (outcome, fallback) {
        (Outcome::Failed(msg), Some(cpu)) => {
            // Throw away what the device wrote; the host copy must still be valid.
            // Every access is discarded (no short circuit): each one unpins.
            let mut trusted = true;
            for a in node.accesses.iter() {
                trusted &= a.handle.discard(mem_node, a.mode);
            }
            if !trusted {
                return Outcome::Failed(format!(
                    "device body failed ({msg}) and the data it was writing has no other valid copy, so the CPU body cannot run"
                ));
            }
            let host = crate::memory::HOST;
            let (outcome, acquire_failed) = with_data(shared, node, host, || {
                run_body(shared, node, index, host, Some(cpu))
            });
            if !acquire_failed {
                release_all(node, host);
            }
            outcome
        }
        (outcome, _) => {
            release_all(node, mem_node);
            outcome
        }
    }
}

fn release_all(node: &TaskNode, mem_node: usize) {
    for a in node.accesses.iter() {
        a.handle.release(mem_node, a.mode);
    }
}

fn event(node: &TaskNode, start: u64, end: u64) -> Event {
    Event {
        id: node.id,
        codelet: node.codelet.id(),
        label: node.label.clone(),
        priority: node.priority,
        flops: node.flops,
        start,
        end,
        // A copy (or an Arc clone past four): no allocation per event.
        preds: node.preds.get().cloned().unwrap_or_default(),
    }
}

/// Finish a task: record failures, mark it done, release its successors into
/// this worker's queue, and wake waiters.
pub(crate) fn complete(
    shared: &Shared,
    node: &Arc<TaskNode>,
    outcome: Outcome,
    queue: &mut dyn WorkerQueue,
) {
    let failed = !matches!(outcome, Outcome::Ok);
    if failed {
        shared.record_failure(node, &outcome);
    }
    let final_state = match outcome {
        Outcome::Ok => state::DONE_OK,
        Outcome::Failed(_) => state::DONE_FAILED,
        Outcome::Cancelled => state::DONE_CANCELLED,
    };
    let successors = {
        let mut s = lock_successors(node);
        s.done = true;
        // SeqCst: pairs with waiters' SeqCst reads (see Shared::notify_waiters).
        node.state.store(final_state, Ordering::SeqCst);
        std::mem::take(&mut s.list)
    };
    let mut wake_all = false;
    for (succ, flow) in successors {
        if failed && flow {
            succ.cancel(|| node.root_cause());
        }
        if succ.pending.fetch_sub(1, Ordering::AcqRel) == 1 && queue.push(ReadyTask(succ)) {
            wake_all = true;
        }
    }
    if wake_all {
        // A targeted policy put a task on another worker's queue.
        shared.sleep.notify_all();
    }
    shared.finish_one();
}
