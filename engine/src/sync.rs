//! The synchronisation primitives of the sleep protocol, behind a facade so
//! that `cfg(loom)` builds can model-check it with loom's versions
//! (`RUSTFLAGS="--cfg loom" cargo test -p tessera-engine --lib --release sleep::loom`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
#[cfg(all(loom, test))]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex};
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex};
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

// Poison-ignoring lock: the workspace's one helper, `util::lock`, except
// under loom, whose mutex and guard are other types: there, the same body over
// them, so that loom models the sleep protocol's locks too.
#[cfg(not(loom))]
pub(crate) use crate::util::lock;

/// [`crate::util::lock`]'s body over loom's mutex.
#[cfg(loom)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
