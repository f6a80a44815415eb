//! `ws`: locality-aware work stealing. Each worker has a LIFO deque; tasks it
//! makes ready go to its own deque (the data they read is hot in its cache);
//! an idle worker takes from the global injector, then steals the oldest task
//! of another worker. Priorities are ignored.

use std::sync::{Arc, Mutex};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::{Pushed, ReadyTask, SchedulerPolicy, WorkerQueue};
use crate::util::lock;

struct Shared {
    injector: Injector<ReadyTask>,
    /// Tasks only CPU workers may take (handed back by device workers).
    cpu_injector: Injector<ReadyTask>,
    /// Which workers drive a device.
    devices: Vec<bool>,
    stealers: Vec<Stealer<ReadyTask>>,
    /// Victims of each worker, in the order it tries them.
    victims: Vec<Vec<usize>>,
}

/// The work-stealing policy.
pub struct WorkStealing {
    shared: Arc<Shared>,
    /// Deques waiting to be handed to their worker (taken once each).
    locals: Mutex<Vec<Option<Worker<ReadyTask>>>>,
}

impl WorkStealing {
    /// A policy for `workers` CPU workers, each trying the others round robin.
    pub fn new(workers: usize) -> Self {
        Self::with_steal_order(round_robin(workers), vec![false; workers])
    }

    /// A policy where worker `w` steals from `victims[w]`, in that order
    /// (hierarchical stealing: NUMA siblings before remote workers);
    /// `devices[w]` says whether worker `w` drives a device.
    pub fn with_steal_order(victims: Vec<Vec<usize>>, devices: Vec<bool>) -> Self {
        let workers = victims.len();
        assert_eq!(devices.len(), workers, "one device flag per worker");
        let locals: Vec<Worker<ReadyTask>> = (0..workers).map(|_| Worker::new_lifo()).collect();
        let stealers = locals.iter().map(Worker::stealer).collect();
        WorkStealing {
            shared: Arc::new(Shared {
                injector: Injector::new(),
                cpu_injector: Injector::new(),
                devices,
                stealers,
                victims,
            }),
            locals: Mutex::new(locals.into_iter().map(Some).collect()),
        }
    }
}

impl SchedulerPolicy for WorkStealing {
    fn name(&self) -> &'static str {
        "ws"
    }

    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue> {
        let local = lock(&self.locals)[worker]
            .take()
            .expect("each worker queue is handed out once");
        Box::new(WsQueue {
            local,
            shared: Arc::clone(&self.shared),
            index: worker,
        })
    }

    fn push_external(&self, task: ReadyTask) -> Pushed {
        self.shared.injector.push(task);
        Pushed::Shared
    }

    fn push_cpu_only(&self, task: ReadyTask) -> Pushed {
        self.shared.cpu_injector.push(task);
        Pushed::Shared
    }
}

/// Every worker tries the others in index order, starting after itself.
pub(crate) fn round_robin(workers: usize) -> Vec<Vec<usize>> {
    (0..workers)
        .map(|w| (1..workers).map(|k| (w + k) % workers).collect())
        .collect()
}

struct WsQueue {
    local: Worker<ReadyTask>,
    shared: Arc<Shared>,
    index: usize,
}

impl WorkerQueue for WsQueue {
    fn push(&mut self, task: ReadyTask) -> Pushed {
        self.local.push(task);
        Pushed::Local
    }

    fn pop(&mut self) -> Option<ReadyTask> {
        if let Some(t) = self.local.pop() {
            return Some(t);
        }
        if !self.shared.devices[self.index] {
            loop {
                match self.shared.cpu_injector.steal() {
                    Steal::Success(t) => return Some(t),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        loop {
            let mut retry = false;
            match self.shared.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(t) => return Some(t),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            for &victim in &self.shared.victims[self.index] {
                match self.shared.stealers[victim].steal() {
                    Steal::Success(t) => return Some(t),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    fn has_more(&self) -> bool {
        !self.local.is_empty()
            || !self.shared.injector.is_empty()
            || !self.shared.cpu_injector.is_empty()
    }
}
