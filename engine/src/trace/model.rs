//! The trace data model: what a recorded run is, independent of how it is stored.
//!
//! The recorder (per-worker buffers in the worker loop) produces a [`Trace`];
//! exporters write it as Chrome/Perfetto JSON and the parser reads it back into
//! the same type, so statistics and Gantt charts work on live runs and on files.

/// All times are nanoseconds since the runtime's epoch (one monotonic clock,
/// `std::time::Instant`, shared by every worker).
pub type Nanos = u64;

/// A recorded run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Trace {
    /// One entry per worker (execution track), indexed by [`TaskRecord::worker`].
    pub workers: Vec<WorkerInfo>,
    /// Every task that ran, in no particular order.
    pub tasks: Vec<TaskRecord>,
    /// Data transfers between memory nodes.
    pub transfers: Vec<TransferRecord>,
    /// Dependency edges `(predecessor task id, successor task id)`, when recorded.
    pub edges: Vec<(u64, u64)>,
}

/// One execution track.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerInfo {
    /// Track name shown in viewers, e.g. `cpu0`, `sim0`, `cuda0 stream1`.
    pub name: String,
    /// Memory node the worker computes on.
    pub memory_node: u32,
}

/// One executed task.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskRecord {
    /// Unique task id within the run (submission order).
    pub id: u64,
    /// Codelet name, e.g. `gemm`.
    pub codelet: String,
    /// Optional per-task label, e.g. `gemm(3,4,5)`.
    pub label: Option<String>,
    /// Index into [`Trace::workers`].
    pub worker: u32,
    /// Task priority (larger runs first under `prio`).
    pub priority: i32,
    /// Floating-point operations the codelet declared for this task (0 if unknown).
    pub flops: f64,
    /// Start of the body.
    pub start: Nanos,
    /// End of the body.
    pub end: Nanos,
}

/// One data transfer.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TransferRecord {
    /// Registered data handle id.
    pub handle: u64,
    /// Source memory node.
    pub from_node: u32,
    /// Destination memory node.
    pub to_node: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Start of the copy.
    pub start: Nanos,
    /// End of the copy.
    pub end: Nanos,
}

impl Trace {
    /// Number of execution tracks: the listed workers, or more if a task
    /// names a worker index past the list.
    pub fn worker_count(&self) -> usize {
        self.tasks
            .iter()
            .map(|t| t.worker as usize + 1)
            .max()
            .unwrap_or(0)
            .max(self.workers.len())
    }
}
