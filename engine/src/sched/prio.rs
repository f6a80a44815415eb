//! `prio`: highest priority first, FIFO among equals, from one global heap.
//! One lock for all workers is fine at the task sizes LU uses (tens of µs and
//! more) and makes the order exact, which is what look-ahead needs.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use super::{ByPriority as Entry, Pushed, ReadyTask, SchedulerPolicy, WorkerQueue};
use crate::util::lock;

#[derive(Default)]
struct Heap {
    heap: Mutex<BinaryHeap<Entry>>,
    /// Mirrors the heap's length for the lock-free `has_more` hint.
    len: AtomicUsize,
}

impl Heap {
    fn push(&self, t: ReadyTask) {
        let mut h = lock(&self.heap);
        h.push(Entry(t));
        // Relaxed: `len` is only a hint; the heap itself is under the lock.
        self.len.store(h.len(), AtomicOrdering::Relaxed);
    }

    fn pop(&self) -> Option<ReadyTask> {
        if self.len.load(AtomicOrdering::Relaxed) == 0 {
            // Cheap early exit for idle workers. A push racing with this load
            // is not lost: the sleep protocol re-checks under its own lock
            // after a SeqCst fence (see sleep/README.md).
            return None;
        }
        let mut h = lock(&self.heap);
        let t = h.pop().map(|e| e.0);
        self.len.store(h.len(), AtomicOrdering::Relaxed);
        t
    }
}

/// The priority policy.
pub struct Priority {
    heap: Arc<Heap>,
    /// Tasks only CPU workers may take (handed back by device workers).
    cpu_heap: Arc<Heap>,
    devices: Vec<bool>,
}

impl Priority {
    /// A priority policy shared by all workers; `devices[w]` says whether
    /// worker `w` drives a device.
    pub fn new(devices: Vec<bool>) -> Self {
        Priority {
            heap: Arc::default(),
            cpu_heap: Arc::default(),
            devices,
        }
    }
}

impl SchedulerPolicy for Priority {
    fn name(&self) -> &'static str {
        "prio"
    }

    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue> {
        Box::new(PrioQueue {
            heap: Arc::clone(&self.heap),
            cpu_heap: (!self.devices[worker]).then(|| Arc::clone(&self.cpu_heap)),
        })
    }

    fn push_external(&self, task: ReadyTask) -> Pushed {
        self.heap.push(task);
        Pushed::Shared
    }

    fn push_cpu_only(&self, task: ReadyTask) -> Pushed {
        self.cpu_heap.push(task);
        Pushed::Shared
    }
}

struct PrioQueue {
    heap: Arc<Heap>,
    /// Present for CPU workers only.
    cpu_heap: Option<Arc<Heap>>,
}

impl WorkerQueue for PrioQueue {
    fn push(&mut self, task: ReadyTask) -> Pushed {
        self.heap.push(task);
        Pushed::Shared
    }

    fn pop(&mut self) -> Option<ReadyTask> {
        if let Some(t) = self.cpu_heap.as_ref().and_then(|h| h.pop()) {
            return Some(t);
        }
        self.heap.pop()
    }

    fn has_more(&self) -> bool {
        self.heap.len.load(AtomicOrdering::Relaxed) > 0
            || self
                .cpu_heap
                .as_ref()
                .is_some_and(|h| h.len.load(AtomicOrdering::Relaxed) > 0)
    }
}
