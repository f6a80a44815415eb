//! `ws`: locality-aware work stealing. Each worker has a LIFO deque; tasks it
//! makes ready go to its own deque (the data they read is hot in its cache);
//! an idle worker takes from the global injector, then steals the oldest task
//! of another worker. Priorities are ignored.
//!
//! A successor a CPU worker makes ready after its task's body ended is kept
//! for that worker's next pop instead (`WorkerQueue::push_next`; a second
//! one pushes the first into the deque): LIFO would pop it next anyway, and
//! while the worker completes its task no idle worker can steal it. With
//! two independent chains on two workers, each worker stole the other's
//! next task in that window, again and again (5 % of the tasks changed
//! workers), and each theft left the victim searching.
//!
//! Victims are tried group by group (NUMA siblings, then farther nodes, then
//! devices: see [`Victims`]); within a group, each scan starts at a victim
//! drawn from the worker's own generator (as rayon and tokio do), so idle
//! workers do not all hit the same victim first, scan after scan.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::{Pushed, ReadyTask, SchedulerPolicy, WorkerKind, WorkerQueue};
use crate::util::lock;

struct Shared {
    injector: Injector<ReadyTask>,
    /// Tasks only CPU workers may take (handed back by device workers).
    cpu_injector: Injector<ReadyTask>,
    /// Which workers drive a device.
    devices: Vec<bool>,
    stealers: Vec<Stealer<ReadyTask>>,
    /// Victims of each worker.
    victims: Vec<Victims>,
}

/// The work-stealing policy.
pub struct WorkStealing {
    shared: Arc<Shared>,
    /// Deques waiting to be handed to their worker (taken once each).
    locals: Mutex<Vec<Option<Worker<ReadyTask>>>>,
}

impl WorkStealing {
    /// A policy for `workers` CPU workers, each trying all the others, from
    /// a different one at each scan.
    pub fn new(workers: usize) -> Self {
        let victims = round_robin(workers)
            .into_iter()
            .map(|v| Victims::grouped(v, |_| 0))
            .collect();
        Self::with_victims(victims, vec![false; workers])
    }

    /// A policy where worker `w` steals from `victims[w]`, in exactly that
    /// order (no rotation); `devices[w]` says whether worker `w` drives a
    /// device.
    pub fn with_steal_order(victims: Vec<Vec<usize>>, devices: Vec<bool>) -> Self {
        let victims = victims
            .into_iter()
            // Each victim a group of its own: tried in the given order.
            .map(|v| Victims::grouped(v, |k| k))
            .collect();
        Self::with_victims(victims, devices)
    }

    /// The runtime's policy: worker `w` steals from `order[w]`, group by
    /// group, a group being a run of victims on one memory node (NUMA
    /// siblings first when the order puts them first); each scan starts
    /// each group at a victim of its own.
    pub(crate) fn for_workers(order: Vec<Vec<usize>>, kinds: &[WorkerKind]) -> Self {
        let victims = order
            .into_iter()
            .map(|v| {
                let nodes: Vec<usize> = v.iter().map(|&x| kinds[x].node).collect();
                Victims::grouped(v, |k| nodes[k])
            })
            .collect();
        Self::with_victims(victims, kinds.iter().map(WorkerKind::is_device).collect())
    }

    fn with_victims(victims: Vec<Victims>, devices: Vec<bool>) -> Self {
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
            rng: XorShift64Star::new(worker),
            stole_from: None,
            kept: None,
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

/// One worker's victims: every other worker once, in groups tried in
/// order. Within a group, a scan starts at a victim drawn at random and goes
/// round the group from there.
struct Victims {
    /// The victims, group after group.
    order: Box<[usize]>,
    /// Where each group lies in `order`.
    groups: Box<[Range<usize>]>,
}

impl Victims {
    /// `order` cut into groups: runs of consecutive victims whose
    /// `key(position)` is the same.
    fn grouped(order: Vec<usize>, key: impl Fn(usize) -> usize) -> Victims {
        let mut groups = Vec::new();
        let mut start = 0;
        for k in 1..=order.len() {
            if k == order.len() || key(k) != key(start) {
                groups.push(start..k);
                start = k;
            }
        }
        Victims {
            order: order.into_boxed_slice(),
            groups: groups.into_boxed_slice(),
        }
    }

    /// Offer each victim once to `steal`, group by group, each group from a
    /// start drawn from `rng`; stop at the first `Some`.
    #[inline]
    fn scan<T>(
        &self,
        rng: &mut XorShift64Star,
        mut steal: impl FnMut(usize) -> Option<T>,
    ) -> Option<T> {
        for g in self.groups.iter() {
            let group = &self.order[g.clone()];
            // A group of one needs no draw (devices, an exact order).
            let first = if group.len() > 1 {
                rng.below(group.len())
            } else {
                0
            };
            let (tail, head) = (&group[first..], &group[..first]);
            for &v in tail.iter().chain(head) {
                if let Some(t) = steal(v) {
                    return Some(t);
                }
            }
        }
        None
    }
}

/// A worker's own cheap random numbers (rayon's choice: xorshift64*), for
/// where its steal scans start. Not shared, so no atomics.
struct XorShift64Star(u64);

impl XorShift64Star {
    /// Seeded from the worker's index: each worker its own sequence.
    fn new(worker: usize) -> Self {
        // Any non-zero state works; the odd multiplier spreads small seeds.
        XorShift64Star((worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (n > 0): the high bits scaled, no division.
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

struct WsQueue {
    local: Worker<ReadyTask>,
    shared: Arc<Shared>,
    index: usize,
    /// Where this worker's steal scans start (see `Victims::scan`).
    rng: XorShift64Star,
    /// The victim of this worker's last successful steal: `has_more` looks
    /// at its deque too.
    stole_from: Option<usize>,
    /// The task `push_next` kept: `pop` returns it first.
    kept: Option<ReadyTask>,
}

impl WorkerQueue for WsQueue {
    fn push(&mut self, task: ReadyTask) -> Pushed {
        self.local.push(task);
        Pushed::Local
    }

    fn push_next(&mut self, task: ReadyTask) -> Pushed {
        if self.shared.devices[self.index] {
            return self.push(task);
        }
        match self.kept.replace(task) {
            None => Pushed::Kept,
            // The newer one is kept, as LIFO would pop it first.
            Some(older) => self.push(older),
        }
    }

    fn take_kept(&mut self) -> Option<ReadyTask> {
        self.kept.take()
    }

    fn has_kept(&self) -> bool {
        self.kept.is_some()
    }

    fn pop(&mut self) -> Option<ReadyTask> {
        self.stole_from = None;
        if let Some(t) = self.kept.take() {
            return Some(t);
        }
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
            let stealers = &self.shared.stealers;
            let stole_from = &mut self.stole_from;
            let stolen =
                self.shared.victims[self.index].scan(&mut self.rng, |victim| {
                    match stealers[victim].steal() {
                        Steal::Success(t) => {
                            *stole_from = Some(victim);
                            Some(t)
                        }
                        Steal::Retry => {
                            retry = true;
                            None
                        }
                        Steal::Empty => None,
                    }
                });
            if stolen.is_some() {
                return stolen;
            }
            if !retry {
                return None;
            }
        }
    }

    /// Whether more tasks wait where this worker found its last one: its
    /// own deque, the injectors, and the deque it last stole from. The last
    /// keeps the chain wake-up going (sleep/README.md): a burst of tasks
    /// pushed to one worker's deque wakes a sleeper per pop of any worker
    /// that takes from it, not only of its owner (a thief that looked only
    /// at its own empty deque stopped the chain, and the burst's other tasks
    /// waited for their owner while workers slept).
    fn has_more(&self) -> bool {
        !self.local.is_empty()
            || !self.shared.injector.is_empty()
            || !self.shared.cpu_injector.is_empty()
            || self
                .stole_from
                .is_some_and(|v| !self.shared.stealers[v].is_empty())
    }
}

#[cfg(test)]
mod tests {
    //! Proves the victim order: every scan offers each victim once, groups
    //! in order; within a group the scan keeps the group's cyclic order but
    //! starts at a different victim from scan to scan and from worker to
    //! worker; an exact order (`with_steal_order`) is kept as given.
    use std::collections::BTreeSet;

    use super::*;

    /// The victims one scan offers, in order.
    fn scan_order(v: &Victims, rng: &mut XorShift64Star) -> Vec<usize> {
        let mut seen = Vec::new();
        let none: Option<()> = v.scan(rng, |x| {
            seen.push(x);
            None
        });
        assert!(none.is_none());
        seen
    }

    #[test]
    fn groups_in_order_each_from_a_rotating_start() {
        // Siblings 1, 2, 3 (node 0), remote 4, 5 (node 1), a device 6.
        let nodes = [0, 0, 0, 1, 1, 2];
        let v = Victims::grouped(vec![1, 2, 3, 4, 5, 6], |k| nodes[k]);
        assert_eq!(&*v.groups, [0..3, 3..5, 5..6]);
        let mut rng = XorShift64Star::new(0);
        let mut firsts = BTreeSet::new();
        let mut remote_firsts = BTreeSet::new();
        for _ in 0..200 {
            let s = scan_order(&v, &mut rng);
            let siblings = &s[..3];
            assert!(
                [[1, 2, 3], [2, 3, 1], [3, 1, 2]].contains(&[
                    siblings[0],
                    siblings[1],
                    siblings[2]
                ]),
                "{s:?}"
            );
            assert!(s[3..5] == [4, 5] || s[3..5] == [5, 4], "{s:?}");
            assert_eq!(s[5], 6, "{s:?}");
            firsts.insert(s[0]);
            remote_firsts.insert(s[3]);
        }
        // No victim is every scan's first.
        assert_eq!(firsts, BTreeSet::from([1, 2, 3]));
        assert_eq!(remote_firsts, BTreeSet::from([4, 5]));
    }

    #[test]
    fn workers_start_their_scans_at_different_victims() {
        // Eight workers on one node, each scanning the same seven victims
        // (0 excluded, say): their first scans do not all start alike.
        let firsts: BTreeSet<usize> = (0..8)
            .map(|w| {
                let v = Victims::grouped((1..8).collect(), |_| 0);
                scan_order(&v, &mut XorShift64Star::new(w))[0]
            })
            .collect();
        assert!(firsts.len() >= 3, "{firsts:?}");
    }

    #[test]
    fn an_exact_order_is_kept() {
        let ws = WorkStealing::with_steal_order(
            vec![vec![2, 1], vec![0, 2], vec![1, 0]],
            vec![false; 3],
        );
        let mut rng = XorShift64Star::new(0);
        for _ in 0..20 {
            assert_eq!(scan_order(&ws.shared.victims[0], &mut rng), [2, 1]);
            assert_eq!(scan_order(&ws.shared.victims[2], &mut rng), [1, 0]);
        }
    }

    #[test]
    fn the_runtime_groups_victims_by_memory_node() {
        // Two CPU workers per NUMA node, and a fifth worker on a memory
        // node of its own (as a device worker is).
        let mut kinds: Vec<WorkerKind> = [0, 0, 1, 1]
            .iter()
            .map(|&node| WorkerKind {
                node,
                ..WorkerKind::cpu()
            })
            .collect();
        kinds.push(WorkerKind {
            node: 2,
            ..WorkerKind::cpu()
        });
        let order = vec![
            vec![1, 2, 3, 4],
            vec![0, 3, 2, 4],
            vec![3, 0, 1, 4],
            vec![2, 1, 0, 4],
            vec![0, 1, 2, 3],
        ];
        let ws = WorkStealing::for_workers(order, &kinds);
        assert_eq!(&*ws.shared.victims[0].groups, [0..1, 1..3, 3..4]);
        assert_eq!(&*ws.shared.victims[4].groups, [0..2, 2..4]);
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = XorShift64Star::new(3);
        for n in 1..50 {
            for _ in 0..100 {
                assert!(rng.below(n) < n);
            }
        }
    }
}
