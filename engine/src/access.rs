//! Access modes: how a task uses a piece of data, from which dependencies are inferred.

/// How a task accesses one data handle.
///
/// Submission order plus access modes define the dependencies (sequential task
/// flow): a reader waits for the last writer (read-after-write), a writer waits
/// for the last writer and for every reader since (write-after-write,
/// write-after-read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessMode {
    /// Read only: the body gets `&T`.
    R,
    /// Write only: the body gets `&mut T` and must not rely on the old contents.
    W,
    /// Read and write: the body gets `&mut T` (or `&T`).
    RW,
}

impl AccessMode {
    /// Whether a task with this mode changes the data.
    pub fn writes(self) -> bool {
        matches!(self, AccessMode::W | AccessMode::RW)
    }

    /// Whether a task with this mode observes the previous contents.
    pub fn reads(self) -> bool {
        matches!(self, AccessMode::R | AccessMode::RW)
    }
}

impl std::fmt::Display for AccessMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccessMode::R => "R",
            AccessMode::W => "W",
            AccessMode::RW => "RW",
        })
    }
}
