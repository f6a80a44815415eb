//! Submitting tasks: the runtime handle's `submit`, [`Submitter`] (which
//! submits from anywhere, task bodies included), and [`Hold`] (a task
//! submitted held back). The submission itself, with the lock order, is in
//! [`crate::stf`].
//!
//! Invariants kept here:
//! - A `Submitter` or `Hold` holds the runtime weakly: it never keeps a
//!   dropped runtime alive, and fails (or does nothing) once it is gone.
//! - A held task keeps one extra pending count until its `Hold` is released.

use std::sync::{Arc, Weak};

use super::{Runtime, Shared};
use crate::error::Error;
use crate::stf::Prepared;
use crate::task::{TaskBuilder, TaskHandle, TaskNode};

/// Submits tasks to a runtime from anywhere, task bodies included. Holds the
/// runtime weakly, so a body that keeps one does not keep the runtime alive.
///
/// A task submitted from a body is ordered like any other, by the data it
/// names, in submission order: if it reads or writes data its parent task
/// writes, it depends on the parent and starts only once the parent has
/// finished (it sees the parent's writes). So a body must not wait for a
/// task it submits on its own data: that task waits for the body.
///
/// ```
/// use tessera_engine::{Codelet, Config, Runtime};
///
/// let rt = Runtime::new(Config::with_workers(2)).unwrap();
/// let h = rt.register(1u64);
/// let (parent, child) = (Codelet::new("parent"), Codelet::new("child"));
/// let sub = rt.submitter();
/// let h2 = h.clone();
/// rt.task(&parent, h.rw())
///     .cpu(move |v| {
///         // Submitted while this body holds `h`: runs after it, and sees 2.
///         sub.submit(tessera_engine::Task::new(&child, h2.rw()).cpu(|v| {
///             *v *= 10;
///             Ok(())
///         }))?;
///         *v += 1;
///         Ok(())
///     })
///     .submit()
///     .unwrap();
/// rt.wait_all().unwrap();
/// assert_eq!(rt.unregister(h).unwrap(), 20);
/// ```
#[derive(Clone)]
pub struct Submitter(Weak<Shared>);

impl Submitter {
    /// Like [`Runtime::submit`]; `Err` if the runtime is gone.
    pub fn submit(&self, task: impl Into<TaskBuilder>) -> Result<TaskHandle, Error> {
        let task = task.into();
        with_runtime(&self.0, |shared| match shared {
            Some(shared) => shared.submit(task),
            None => Err(dropped(task.display_name())),
        })
    }
}

/// A submission's error once the runtime is gone.
fn dropped(task: String) -> Error {
    Error::Submit {
        task,
        reason: "the runtime was dropped".into(),
    }
}

impl Submitter {
    /// [`Shared::prepare`] on the runtime: a task made, not yet submitted.
    pub(crate) fn prepare(&self, task: TaskBuilder) -> Result<Prepared, Error> {
        with_runtime(&self.0, |shared| match shared {
            Some(shared) => shared.prepare(task),
            None => Err(dropped(task.display_name())),
        })
    }

    /// Whether this thread is a worker of the runtime, running a body (or
    /// polling the network), with no task visibly waiting for it: work
    /// done here now delays no other task of this worker.
    pub(crate) fn worker_would_wait(&self) -> bool {
        with_runtime(&self.0, |shared| {
            shared
                .and_then(|s| crate::worker::current(s.id()))
                .is_some_and(|w| !w.has_more())
        })
    }

    /// [`Shared::submit_prepared`] on the runtime.
    pub(crate) fn submit_prepared(&self, prepared: Prepared) -> Result<(), Error> {
        with_runtime(&self.0, |shared| match shared {
            Some(shared) => shared.submit_prepared(prepared),
            None => Err(dropped(prepared.display_name())),
        })
    }

    /// [`Shared::submit_prepared_to_any`] on the runtime.
    pub(crate) fn submit_prepared_to_any(&self, prepared: Prepared) -> Result<(), Error> {
        with_runtime(&self.0, |shared| match shared {
            Some(shared) => shared.submit_prepared_to_any(prepared),
            None => Err(dropped(prepared.display_name())),
        })
    }

    /// [`Shared::write_now`] on the runtime: `None` (nothing written) if it
    /// is gone or the data is in use.
    pub(crate) fn write_now(
        &self,
        data: &Arc<dyn crate::data::AnyHandle>,
        write: impl FnOnce() -> Result<(), String>,
    ) -> Option<Result<(), String>> {
        with_runtime(&self.0, |shared| shared?.write_now(data, write))
    }
}

/// `f` on the runtime `weak` refers to, `None` if it is gone: through this
/// thread's worker when the thread is one of that runtime's (no count
/// taken, see `worker::on_own_runtime`), else upgraded.
fn with_runtime<R>(weak: &Weak<Shared>, f: impl FnOnce(Option<&Shared>) -> R) -> R {
    crate::worker::on_own_runtime(Weak::as_ptr(weak), |own| match own {
        Some(shared) => f(Some(shared)),
        None => f(weak.upgrade().as_deref()),
    })
}

/// The extra pending count of a task submitted held (see
/// `Shared::submit_held`): releasing it lets the task become ready.
pub(crate) struct Hold {
    node: Arc<TaskNode>,
    shared: Weak<Shared>,
}

impl Hold {
    /// The count `node` keeps for `shared` until released.
    pub(crate) fn new(node: Arc<TaskNode>, shared: &Arc<Shared>) -> Hold {
        Hold {
            node,
            shared: Arc::downgrade(shared),
        }
    }

    /// Let the task run (once its dependencies are met).
    pub(crate) fn release(self) {
        let Hold { node, shared } = self;
        with_runtime(&shared, |s| {
            if let Some(s) = s {
                s.release_one(node);
            }
        });
    }

    /// Whether the task waits for this hold alone (every predecessor has
    /// finished, none failed): what it declared is used by no other task
    /// until it runs.
    pub(crate) fn only_hold_left(&self) -> bool {
        self.node.pending.load(std::sync::atomic::Ordering::Acquire) == 1
            && !self
                .node
                .cancelled
                .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Let a receive run, its message having come: at once on this thread
    /// if it is a worker polling the network and the receive is ready (see
    /// `Shared::release_received`). Only for a task whose body is short
    /// and never waits (it runs inside the network's poll).
    pub(crate) fn release_received(self) {
        let Hold { node, shared } = self;
        with_runtime(&shared, |s| {
            if let Some(s) = s {
                s.release_received(node);
            }
        });
    }
}

impl Runtime {
    /// Submit a task (a typed [`Task`](crate::Task) or a dynamic
    /// [`TaskBuilder`]). Its dependencies are inferred from the data it
    /// declares and the tasks submitted before it (plus any explicit
    /// `after`). Callable from several threads, and from task bodies (the
    /// task then goes to that worker's queue). A thread that is not one of
    /// the runtime's workers may wait here first, while the submission
    /// window is full ([`Config::submit_window`](crate::Config::submit_window)).
    #[inline]
    pub fn submit(&self, task: impl Into<TaskBuilder>) -> Result<TaskHandle, Error> {
        self.shared.throttle();
        self.shared.submit(task.into())
    }

    /// Submit a task that stays held back until the `Hold` is released.
    pub(crate) fn submit_held(&self, task: TaskBuilder) -> Result<(TaskHandle, Hold), Error> {
        self.shared.submit_held(task)
    }

    /// Run `hook` once `data` holds what the tasks submitted so far wrote
    /// last (see `Shared::after_last_writer`).
    pub(crate) fn after_last_writer(
        &self,
        data: &dyn crate::data::AnyHandle,
        hook: crate::task::Hook,
    ) {
        self.shared.after_last_writer(data.core(), hook)
    }

    /// A handle that can submit to this runtime from inside task bodies
    /// (it does not keep the runtime alive).
    pub fn submitter(&self) -> Submitter {
        Submitter(Arc::downgrade(&self.shared))
    }
}

#[cfg(test)]
mod tests {
    //! Proves that a `Submitter` reaches its own runtime whichever thread
    //! calls it: a worker of that runtime (no count taken), a worker of
    //! another runtime, or a thread that is no worker; and that it fails,
    //! naming the task, once the runtime is gone.
    use crate::{Codelet, Error, ReadWrite, Runtime};

    #[test]
    fn a_submitter_reaches_its_own_runtime_from_any_thread() {
        let (a, b) = (
            Runtime::with_workers(1).unwrap(),
            Runtime::with_workers(1).unwrap(),
        );
        let (ha, hb) = (a.register(0u64), b.register(0u64));
        let add: Codelet<ReadWrite<u64>, u64> =
            Codelet::with_args("add").cpu(|_, &n, v: &mut u64| {
                *v += n;
                Ok(())
            });
        let (sub_a, sub_b) = (a.submitter(), b.submitter());
        let (ha2, hb2, add2) = (ha.clone(), hb.clone(), add.clone());
        // A body of `a` submits to `a` (its own worker) and to `b`.
        let parent: Codelet<()> = Codelet::new("parent").cpu(move |_, _, ()| {
            sub_a.submit(crate::Task::new(&add2, ha2.rw()).args(1))?;
            sub_b.submit(crate::Task::new(&add2, hb2.rw()).args(10))?;
            Ok(())
        });
        a.task(&parent, ()).submit().unwrap();
        a.wait_all().unwrap();
        b.wait_all().unwrap();
        // From this thread, no worker of either.
        b.submitter()
            .submit(crate::Task::new(&add, hb.rw()).args(100))
            .unwrap();
        b.wait_all().unwrap();
        assert_eq!(a.unregister(ha).unwrap(), 1);
        assert_eq!(b.unregister(hb).unwrap(), 110);
        let gone = b.submitter();
        drop(b);
        let e = gone
            .submit(crate::Task::new(&add, a.register(0u64).rw()).args(1))
            .unwrap_err();
        assert!(
            matches!(&e, Error::Submit { reason, .. } if reason.contains("dropped")),
            "{e}"
        );
    }
}
