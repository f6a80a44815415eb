//! Dependency tracking per handle: who last wrote it and who read it since,
//! from which sequential task flow infers each new task's predecessors.

use std::sync::{Arc, Weak};

use crate::task::TaskNode;

/// A task as remembered by a handle: weakly (a finished task may be freed),
/// with its id kept for traces and DOT export.
pub(crate) struct TaskRef {
    pub(crate) node: Weak<TaskNode>,
    pub(crate) id: u64,
}

impl TaskRef {
    pub(crate) fn new(node: &Arc<TaskNode>) -> TaskRef {
        TaskRef {
            node: Arc::downgrade(node),
            id: node.id,
        }
    }
}

/// Dependency state of one handle: who last wrote it, who read it since.
/// Protected by `HandleCore::deps`; see `crate::stf` for the lock order.
pub(crate) struct DepState {
    /// The last task that declared W or RW (weak: a finished task may be freed,
    /// and a freed task can never be a dependency again).
    pub(crate) last_writer: Option<TaskRef>,
    /// Readers submitted since the last writer: the first two inline, so
    /// data written once and read by a task or two (Task Bench's default, a
    /// buffer per timestep) allocates nothing and touches no second cache
    /// line when its readers are submitted.
    pub(crate) readers: smallvec::SmallVec<[TaskRef; 2]>,
    /// `readers` is pruned of finished tasks when it reaches this length, so a
    /// handle that is only ever read does not grow without bound.
    prune_at: usize,
    /// Set when the last writer failed or was cancelled: later readers are
    /// cancelled too. A task declaring W (not RW) clears it.
    pub(crate) poisoned_by: Option<String>,
    /// Set by `unregister`: no task may be submitted on the handle any more.
    pub(crate) unregistered: bool,
}

impl DepState {
    pub(crate) fn new() -> DepState {
        DepState {
            last_writer: None,
            readers: smallvec::SmallVec::new(),
            prune_at: 64,
            poisoned_by: None,
            unregistered: false,
        }
    }

    pub(crate) fn push_reader(&mut self, reader: TaskRef) {
        if self.readers.len() >= self.prune_at {
            // Pruned readers are finished; only their (untraced) WAR edges are lost.
            self.readers
                .retain(|r| r.node.upgrade().is_some_and(|t| !t.is_done()));
            self.prune_at = (self.readers.len() * 2).max(64);
        }
        self.readers.push(reader);
    }

    /// The unfinished tasks that use the handle now: the last writer and the
    /// readers since (earlier users are predecessors of these).
    pub(crate) fn users(&self) -> Vec<Arc<TaskNode>> {
        self.last_writer
            .iter()
            .chain(self.readers.iter())
            .filter_map(|w| w.node.upgrade())
            .collect()
    }
}
