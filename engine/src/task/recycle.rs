//! Finished task nodes, kept for the next submissions.
//!
//! A task node is allocated by the thread that submits it and, most often,
//! released by the worker that ran it (the submitter dropped its handle
//! first). With glibc's allocator that free takes the lock of the arena the
//! node came from, which the submitter's next allocation also takes: in
//! `tessera overhead`'s `independent` case (2 workers, 2 cores) nearly every
//! futex call was on that lock (`perf record -e syscalls:sys_enter_futex`).
//! As PaRSEC's task mempools do, a finished node that nothing else refers to
//! goes to a bounded pool instead, emptied of everything it referenced (data,
//! arguments, label), and a submission takes its allocation from there.
//!
//! A thread that makes nodes (submits) keeps the nodes it frees last in a
//! small list of its own, and takes its next node from there first; the
//! shared pool gets what that list cannot hold and what threads that make
//! none free, and serves the threads whose list is empty.
//! A worker that makes the tasks it releases (the symbolic front-end, a
//! body that submits) then reuses a node its own cache holds, instead of
//! one the other workers wrote last, through a queue every worker writes:
//! with the shared pool alone, its head and tail, and the node's five
//! cache lines, crossed between the cores at every task, and its `pop` and
//! `push` were 12 % of a worker's samples in a 2-worker symbolic
//! `no_comm` run of empty tasks (`perf record -e cpu-clock`). A submitter
//! that is no worker (the STF front-end's thread) finds its own list empty
//! and takes from the shared pool, as before.
//!
//! Invariant: a node in the pool or in a thread's list is unique
//! (`Arc::get_mut` succeeded on it: no other strong or weak reference), so
//! no thread can observe it until a submission overwrites it with a new
//! task. A node holds nothing of its task once pooled, so a thread's list
//! may serve any runtime.

use std::cell::RefCell;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::TaskNode;

/// Enough for a submitter running ahead of its workers to find a free node;
/// 312 bytes each.
const CAPACITY: usize = 256;

/// Nodes a thread keeps for itself (20 KiB at most).
const LOCAL_CAPACITY: usize = 64;

/// A thread's own nodes.
struct Local {
    /// Whether the thread makes nodes (submits): only then does it keep
    /// the nodes it frees. A worker that never submits (the STF front-end's
    /// workers) would hold them away from the submitter.
    makes: bool,
    /// Its freed nodes, most recent last.
    free: Vec<Arc<TaskNode>>,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local {
            makes: false,
            free: Vec::new(),
        })
    };
}

pub(crate) struct NodePool {
    free: ArrayQueue<Arc<TaskNode>>,
}

impl Default for NodePool {
    fn default() -> Self {
        NodePool {
            free: ArrayQueue::new(CAPACITY),
        }
    }
}

impl NodePool {
    /// `node` in a shared allocation: a pooled one when there is one.
    /// Inlined always: see `stf.rs`.
    #[inline(always)]
    pub(crate) fn make(&self, node: TaskNode) -> Arc<TaskNode> {
        let local = LOCAL
            .try_with(|l| {
                let mut l = l.borrow_mut();
                l.makes = true;
                l.free.pop()
            })
            .ok()
            .flatten();
        if let Some(mut a) = local.or_else(|| self.free.pop()) {
            // Always unique (the invariant); a failure would only cost an
            // allocation.
            if let Some(slot) = Arc::get_mut(&mut a) {
                *slot = node;
                return a;
            }
        }
        Arc::new(node)
    }

    /// Take back a finished node if nothing else refers to it (a kept
    /// `TaskHandle`, or the data's last-writer and reader records, do);
    /// otherwise, or when the pool is full, it is simply dropped.
    #[inline]
    pub(crate) fn recycle(&self, mut node: Arc<TaskNode>) {
        if let Some(n) = Arc::get_mut(&mut node) {
            n.release_contents();
            let mut spare = Some(node);
            // `try_with` fails only while the thread's locals are destroyed.
            let _ = LOCAL.try_with(|l| {
                let mut l = l.borrow_mut();
                if l.makes && l.free.len() < LOCAL_CAPACITY {
                    l.free.extend(spare.take());
                }
            });
            if let Some(node) = spare {
                let _ = self.free.push(node);
            }
        }
    }

    /// Nodes this thread can take: its own list and the shared pool.
    #[cfg(test)]
    fn len(&self) -> usize {
        LOCAL.with_borrow(|l| l.free.len()) + self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{Access, AccessMode};
    use crate::task::{NodeParts, Once};
    use crate::{Codelet, Config, Runtime, TaskBuilder};

    fn node(id: u64, cl: &Codelet, data: &crate::DataHandle<u64>) -> TaskNode {
        TaskNode::new(
            id,
            NodeParts {
                codelet: Arc::clone(&cl.info),
                params: Box::new(5u32),
                label: Some("labelled".into()),
                priority: 0,
                flops: 0.0,
                accesses: vec![Access {
                    handle: data.erased(),
                    mode: AccessMode::R,
                }],
                lens: Box::default(),
                once: Once::default(),
                cpu_only: false,
                ordered: false,
                node_hint: None,
                team: None,
                rendezvous: None,
            },
        )
    }

    /// A pooled node no longer refers to the task's data, arguments or
    /// label, and the next node made takes its allocation.
    #[test]
    fn a_pooled_node_holds_nothing_and_is_reused() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let cl = Codelet::new("t");
        let h = rt.register(0u64);
        let refs = || Arc::strong_count(&h.erased()) - 1;
        let alone = refs();
        let a = Arc::new(node(1, &cl, &h));
        assert_eq!(refs(), alone + 1, "the node refers to the data");
        let at = Arc::as_ptr(&a);
        let pool = NodePool::default();
        pool.recycle(a);
        assert_eq!(pool.len(), 1);
        assert_eq!(refs(), alone, "the pooled node let the data go");
        let b = pool.make(node(2, &cl, &h));
        assert_eq!(Arc::as_ptr(&b), at, "the allocation is reused");
        assert_eq!(pool.len(), 0);
        assert_eq!((b.id, b.label.as_deref()), (2, Some("labelled")));
        assert_eq!(b.accesses.len(), 1);
    }

    /// A node something else refers to (a kept handle, a weak record) is
    /// not pooled; a full pool drops what it cannot take.
    #[test]
    fn shared_nodes_are_not_pooled_and_the_pool_is_bounded() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let cl = Codelet::new("t");
        let h = rt.register(0u64);
        let pool = NodePool::default();
        let a = Arc::new(node(1, &cl, &h));
        let kept = Arc::clone(&a);
        pool.recycle(a);
        let weak = Arc::downgrade(&kept);
        pool.recycle(kept);
        assert_eq!(pool.len(), 0);
        assert!(weak.upgrade().is_none(), "a node not pooled is freed");
        // A thread that makes nodes keeps the first it frees.
        drop(pool.make(node(0, &cl, &h)));
        for k in 0..LOCAL_CAPACITY + CAPACITY + 10 {
            pool.recycle(Arc::new(node(k as u64, &cl, &h)));
        }
        assert_eq!(pool.len(), LOCAL_CAPACITY + CAPACITY);
        assert_eq!(LOCAL.with_borrow(|l| l.free.len()), LOCAL_CAPACITY);
    }

    /// Through a runtime: nodes reused over rounds give fresh tasks (new
    /// ids, each finished), with data released for `unregister`.
    #[test]
    fn reused_nodes_run_fresh_tasks() {
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let cl = Codelet::new("n");
        let h = rt.register(0u64);
        let mut seen = std::collections::HashSet::new();
        for round in 0..4 {
            let hs: Vec<_> = (0..200)
                .map(|k| {
                    let t = TaskBuilder::new(&cl);
                    let t = if k % 2 == 0 { t.read(&h) } else { t };
                    rt.submit(t.body(|_| Ok(()))).unwrap()
                })
                .collect();
            rt.wait_all().unwrap();
            for t in &hs {
                assert!(t.is_done(), "round {round}: task #{} finished", t.id());
                assert!(seen.insert(t.id()), "ids are never reused");
            }
            // Drop the handles before the next round: these nodes may be pooled.
        }
        assert_eq!(rt.unregister(h).unwrap(), 0);
    }
}
