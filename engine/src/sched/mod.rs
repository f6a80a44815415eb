//! Scheduling policies: where a ready task waits and which worker takes it.
//!
//! A policy is a trait with a name. The engine asks it for one
//! [`WorkerQueue`] per worker (owned by that worker's thread, so it may hold
//! non-`Sync` state such as a crossbeam deque) and pushes tasks made ready
//! outside any worker (by a submitting thread) through
//! [`SchedulerPolicy::push_external`].

mod prio;
mod ws;

use std::sync::Arc;

pub use prio::Priority;
pub use ws::WorkStealing;

use crate::error::Error;
use crate::task::TaskNode;

/// A task whose dependencies are all satisfied.
pub struct ReadyTask(pub(crate) Arc<TaskNode>);

impl ReadyTask {
    /// The task's priority (larger first).
    pub fn priority(&self) -> i32 {
        self.0.priority
    }

    /// The task's id (submission order).
    pub fn id(&self) -> u64 {
        self.0.id
    }
}

/// A scheduling policy.
pub trait SchedulerPolicy: Send + Sync {
    /// The policy's name, as given on the command line (`ws`, `prio`).
    fn name(&self) -> &'static str;

    /// The queue worker `worker` will use. Called once per worker at start-up.
    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue>;

    /// A task made ready by a thread that is not a worker.
    fn push_external(&self, task: ReadyTask);
}

/// One worker's end of a policy. Only its worker thread calls it.
pub trait WorkerQueue: Send {
    /// A task this worker made ready (a successor of the task it just ran).
    fn push(&mut self, task: ReadyTask);

    /// The next task for this worker, from anywhere the policy allows.
    fn pop(&mut self) -> Option<ReadyTask>;

    /// Whether more tasks are visibly waiting (a hint used to wake an idle worker).
    fn has_more(&self) -> bool;
}

/// The names accepted by [`policy_by_name`].
pub const POLICY_NAMES: &[&str] = &["ws", "prio"];

/// Build a policy by name for `workers` workers; `steal_order` gives each
/// worker's victims in order (for `ws`).
pub fn policy_by_name(
    name: &str,
    workers: usize,
    steal_order: Option<&[Vec<usize>]>,
) -> Result<Arc<dyn SchedulerPolicy>, Error> {
    match name {
        "ws" => Ok(Arc::new(match steal_order {
            Some(order) => WorkStealing::with_steal_order(order.to_vec()),
            None => WorkStealing::new(workers),
        })),
        "prio" => Ok(Arc::new(Priority::new())),
        other => Err(Error::Config(format!(
            "unknown scheduler '{other}' (known: {})",
            POLICY_NAMES.join(", ")
        ))),
    }
}
