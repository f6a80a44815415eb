//! Errors: every failure the runtime reports names the task or the data involved.

use std::fmt;
use std::time::Duration;

/// Identifies a task in error messages: its id, codelet and optional label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    /// Task id (submission order, unique per runtime).
    pub id: u64,
    /// Codelet name.
    pub codelet: String,
    /// Per-task label, if one was given.
    pub label: Option<String>,
}

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(l) => write!(f, "task '{}' (#{}, codelet {})", l, self.id, self.codelet),
            None => write!(f, "task '{}' (#{})", self.codelet, self.id),
        }
    }
}

/// A task whose body panicked or returned an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// The task.
    pub task: TaskInfo,
    /// The panic message or the error's text.
    pub message: String,
}

/// What went wrong in a batch of tasks: the failures, and the dependent tasks
/// that were cancelled (not run) because of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunError {
    /// Tasks whose body failed.
    pub failures: Vec<TaskFailure>,
    /// Tasks that were not run because a predecessor failed or was cancelled.
    pub cancelled: Vec<TaskInfo>,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, fail) in self.failures.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{} failed: {}", fail.task, fail.message)?;
        }
        if self.failures.is_empty() {
            f.write_str("no task failed")?;
        }
        if !self.cancelled.is_empty() {
            write!(
                f,
                "; {} dependent task(s) cancelled (first: {})",
                self.cancelled.len(),
                self.cancelled[0]
            )?;
        }
        Ok(())
    }
}

/// The runtime's error type.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A task could not be submitted; nothing was run.
    Submit {
        /// The task's name.
        task: String,
        /// Why.
        reason: String,
    },
    /// Tasks failed (and their dependents were cancelled).
    Failed(RunError),
    /// A wait did not finish in time.
    Timeout(Duration),
    /// A data handle was last written by a task that failed or was cancelled,
    /// so its contents are not what the program asked for.
    Poisoned {
        /// The handle's name.
        handle: String,
        /// Which writer failed or was cancelled, and the root failure.
        task: String,
    },
    /// An explicit-edge task graph has a cycle through the named task.
    Cycle {
        /// A task on the cycle.
        task: String,
    },
    /// The runtime was configured wrongly.
    Config(String),
    /// The run was stopped by [`Runtime::interrupt`](crate::Runtime::interrupt)
    /// (Ctrl-C): what did not start was cancelled.
    Interrupted(RunError),
    /// A numerical method cannot go on (a zero norm, a non-positive
    /// curvature, NaN in the data): the message says where and why.
    Breakdown(String),
    /// Another rank of a distributed run stopped it (its message names the
    /// rank and the failed task).
    Remote(String),
    /// A simulated run could not go on: it stalled (no event pending while
    /// awaited tasks have not finished: in a multi-rank simulation, usually
    /// a rank that is not being driven), or its clock overflowed.
    Simulation(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Submit { task, reason } => write!(f, "cannot submit task '{task}': {reason}"),
            Error::Failed(e) => write!(f, "{e}"),
            Error::Timeout(d) => write!(f, "tasks did not finish within {d:?}"),
            Error::Poisoned { handle, task } => write!(f, "data '{handle}' is invalid: {task}"),
            Error::Cycle { task } => write!(f, "task graph has a cycle through task '{task}'"),
            Error::Config(m) => write!(f, "invalid runtime configuration: {m}"),
            Error::Breakdown(m) => write!(f, "numerical breakdown: {m}"),
            Error::Interrupted(e) => write!(f, "interrupted (e.g. by Ctrl-C): {e}"),
            Error::Remote(m) => write!(f, "distributed run stopped: {m}"),
            Error::Simulation(m) => write!(f, "simulation stopped: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// What a task body returns as an error: any error type, boxed.
pub type BodyError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A task body reached for data it did not declare, or in the wrong mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessError(pub String);

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AccessError {}
