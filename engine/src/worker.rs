//! CPU workers: the loop that pops ready tasks, runs their bodies, and
//! releases their successors.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::recorder::{Event, Recorder};
use crate::runtime::Shared;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::task::{lock_successors, state, TaskContext, TaskNode};
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
        // SAFETY: this worker popped the task; the body is dropped unrun.
        drop(unsafe { node.take_body() });
        Outcome::Cancelled
    } else {
        // SAFETY: this worker popped the task from a ready queue.
        match unsafe { node.take_body() } {
            None => {
                if let Some(rec) = recorder {
                    let t = rec.now();
                    rec.record(event(&node, t, t), &node.codelet);
                }
                Outcome::Ok
            }
            Some(body) => {
                let start = recorder.as_ref().map(|r| r.now());
                let ctx = TaskContext::new(&node, index, &shared.sleep);
                let result = catch_unwind(AssertUnwindSafe(move || body(&ctx)));
                if let (Some(rec), Some(start)) = (recorder, start) {
                    let end = rec.now();
                    rec.record(event(&node, start, end), &node.codelet);
                }
                match result {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(payload) => {
                        Outcome::Failed(format!("panicked: {}", panic_message(&*payload)))
                    }
                }
            }
        }
    };
    complete(shared, &node, outcome, queue);
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
    for (succ, flow) in successors {
        if failed && flow {
            succ.cancel(|| node.root_cause());
        }
        if succ.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            queue.push(ReadyTask(succ));
        }
    }
    shared.finish_one();
}
