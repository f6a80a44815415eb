//! Codelets: the named kernels tasks apply, with their cost hints.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A kernel known to the runtime by name: traces, statistics and (later)
/// performance models are keyed by it. Cheap to clone.
///
/// The body itself travels with each task (a closure capturing the task's
/// arguments), so one codelet serves every task that applies the kernel.
#[derive(Clone, Debug)]
pub struct Codelet {
    inner: Arc<CodeletInfo>,
}

#[derive(Debug)]
struct CodeletInfo {
    name: String,
    id: u32,
}

static NEXT_CODELET_ID: AtomicU32 = AtomicU32::new(0);

impl Codelet {
    /// A codelet named `name` (e.g. `"gemm"`).
    pub fn new(name: impl Into<String>) -> Codelet {
        // Relaxed: the id only has to be unique, nothing is published through it.
        let id = NEXT_CODELET_ID.fetch_add(1, Ordering::Relaxed);
        Codelet {
            inner: Arc::new(CodeletInfo {
                name: name.into(),
                id,
            }),
        }
    }

    /// The codelet's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// A process-wide unique id.
    pub fn id(&self) -> u32 {
        self.inner.id
    }
}
