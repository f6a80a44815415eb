//! Waiting: for given tasks (`wait`, `wait_timeout`) or for all of them
//! (`wait_all`, `wait_all_timeout`), and the failures a wait reports.
//!
//! Invariants kept here:
//! - No wait is called from one of this runtime's own task bodies (the
//!   worker would wait for itself): `not_from_a_body` refuses it.
//! - A task waiter marks its tasks `awaited` before it waits, so their
//!   completion wakes it (see `Shared::finish_one`).
//! - `wait_all` reports each failure once: it takes them and forgets them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Runtime, Shared};
use crate::error::{Error, RunError, TaskFailure};
use crate::task::{state, TaskHandle};
use crate::util::lock;

impl Shared {
    /// Refuse a blocking call made from one of this runtime's task bodies:
    /// the worker would wait for itself.
    pub(super) fn not_from_a_body(&self, what: &str) -> Result<(), Error> {
        match crate::worker::current(self.id) {
            Some(c) => Err(Error::Config(format!(
                "{what} was called from a task body (on worker {}); a body cannot wait for tasks of its own runtime",
                c.worker
            ))),
            None => Ok(()),
        }
    }
}

impl Runtime {
    /// Wait until `task` has finished. `Err` if it failed or was cancelled
    /// (the failure is still reported by the next `wait_all`).
    pub fn wait(&self, task: &TaskHandle) -> Result<(), Error> {
        self.wait_task(task, None)
    }

    /// [`wait`](Self::wait) with a deadline.
    pub fn wait_timeout(&self, task: &TaskHandle, timeout: Duration) -> Result<(), Error> {
        self.wait_task(task, Some(timeout))
    }

    fn wait_task(&self, task: &TaskHandle, timeout: Option<Duration>) -> Result<(), Error> {
        self.shared.not_from_a_body("wait")?;
        task.node.awaited.store(true, Ordering::SeqCst);
        self.shared
            .wait_until(false, || task.node.is_done(), timeout)?;
        match task.node.state.load(Ordering::SeqCst) {
            state::DONE_OK => Ok(()),
            s => {
                let what = if s == state::DONE_FAILED {
                    "failed"
                } else {
                    "was cancelled"
                };
                let mut e = RunError::default();
                if s == state::DONE_FAILED {
                    e.failures.push(TaskFailure {
                        task: task.info(),
                        message: format!("{} {what}; see wait_all for the message", task.info()),
                    });
                } else {
                    e.cancelled.push(task.info());
                }
                Err(Error::Failed(e))
            }
        }
    }

    /// Wait until every submitted task has finished. Returns the failures and
    /// cancellations since the last `wait_all` (and forgets them).
    pub fn wait_all(&self) -> Result<(), Error> {
        self.wait_all_inner(None)
    }

    /// [`wait_all`](Self::wait_all) with a deadline.
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<(), Error> {
        self.wait_all_inner(Some(timeout))
    }

    fn wait_all_inner(&self, timeout: Option<Duration>) -> Result<(), Error> {
        let s = &self.shared;
        s.not_from_a_body("wait_all")?;
        s.wait_until(true, || s.in_flight() == 0, timeout)?;
        s.take_errors()
    }

    /// Whether a task failed or was cancelled since the last `wait_all`.
    pub(crate) fn has_failures(&self) -> bool {
        self.shared.has_errors.load(Ordering::SeqCst)
    }

    /// The first failure since the last `wait_all`, as `wait_all` would
    /// report it (without forgetting it).
    pub(crate) fn first_failure(&self) -> Option<String> {
        let errors = lock(&self.shared.errors);
        errors
            .failures
            .first()
            .map(|f| format!("{} failed: {}", f.task, f.message))
    }

    /// Number of submitted tasks that have not finished.
    pub fn tasks_in_flight(&self) -> usize {
        self.shared.in_flight()
    }
}

#[cfg(test)]
mod tests {
    //! Proves the waits' own checks: deadlines that cannot overflow, and
    //! calls from a body that would wait for the body itself; and the
    //! submission window: it never holds a body, and lets a submitter go on
    //! when the tasks in flight cannot finish (its bounds: `window.rs`).
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::codelet::Codelet;
    use crate::{Config, TaskBuilder};

    fn stalls(rt: &Runtime) -> u64 {
        rt.shared.window.stalls()
    }

    #[test]
    fn a_window_whose_tasks_cannot_finish_lets_the_submitter_go_on() {
        let rt = Runtime::new(Config::with_workers(1).submit_window(64)).unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        // Every task waits for the gate, which opens only after the last
        // submission: a window that waited for them would never return.
        let gate = rt
            .submit(TaskBuilder::new(&Codelet::new("gate")).body(move |_| {
                wait.recv().ok();
                Ok(())
            }))
            .unwrap();
        let cl = Codelet::new("after");
        for _ in 0..300 {
            rt.submit(TaskBuilder::new(&cl).after(&gate).body(|_| Ok(())))
                .unwrap();
        }
        // Held once: the window stays open while nothing finishes.
        assert_eq!(stalls(&rt), 1, "the submitter was held once");
        go.send(()).unwrap();
        rt.wait_all().unwrap();
    }

    #[test]
    fn task_bodies_never_wait_for_the_window() {
        let rt = Arc::new(Runtime::new(Config::with_workers(1).submit_window(64)).unwrap());
        let weak = Arc::downgrade(&rt);
        // The only worker runs the parent: had a submission from its body
        // waited for the window, no child could finish, and each wait
        // would have ended as a stall.
        rt.submit(TaskBuilder::new(&Codelet::new("parent")).body(move |_| {
            let rt = weak.upgrade().ok_or("runtime gone")?;
            let cl = Codelet::new("child");
            for _ in 0..500 {
                rt.submit(TaskBuilder::new(&cl).body(|_| Ok(())))
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }))
        .unwrap();
        rt.wait_all().unwrap();
        assert_eq!(stalls(&rt), 0);
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let rt = Runtime::with_workers(1).unwrap();
        let cl: Codelet<()> = Codelet::new("noop");
        let t = rt.task(&cl, ()).cpu(|()| Ok(())).submit().unwrap();
        rt.wait_timeout(&t, Duration::MAX).unwrap();
        rt.wait_all_timeout(Duration::MAX).unwrap();
    }

    #[test]
    fn waiting_from_a_body_is_an_error() {
        let rt = Arc::new(Runtime::with_workers(2).unwrap());
        let h = rt.register(0u32);
        let cl: Codelet<()> = Codelet::new("selfwait");
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let (rt2, h2, seen2) = (Arc::downgrade(&rt), h.clone(), Arc::clone(&seen));
        rt.task(&cl, ())
            .cpu(move |()| {
                let rt = rt2.upgrade().ok_or("runtime gone")?;
                let mut s = lock(&seen2);
                s.push(rt.wait_all().unwrap_err().to_string());
                s.push(rt.unregister(h2).unwrap_err().to_string());
                Ok(())
            })
            .submit()
            .unwrap();
        rt.wait_all().unwrap();
        for m in lock(&seen).iter() {
            assert!(m.contains("called from a task body"), "{m}");
        }
        assert_eq!(lock(&seen).len(), 2);
        assert_eq!(Arc::try_unwrap(rt).ok().unwrap().unregister(h).unwrap(), 0);
    }
}
