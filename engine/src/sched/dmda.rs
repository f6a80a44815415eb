//! `dmda`: deque model data aware. Each ready task goes at once to the worker
//! that minimises its expected completion time = the work already queued on
//! that worker + the transfer time of the inputs missing on its memory node +
//! the predicted execution time there; ties go to the worker that already
//! holds more of the data. Predictions come from the perf models, or from a
//! device's own speed table until measurements exist (Cashmere's order). While
//! an architecture is still calibrating for a task's (codelet, size), the task
//! goes to the least-loaded worker of that architecture, so each gets samples.
//!
//! Each worker pops from its own priority queue only (no stealing: the choice
//! was made with the data's location in mind). When a task is given to a
//! device worker, its inputs start moving at once on the device's copy thread
//! (prefetch: the next task's input overlaps the current task's execution).

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{ByPriority as Entry, Pushed, ReadyTask, SchedulerPolicy, WorkerKind, WorkerQueue};
use crate::device::TaskCost;
use crate::memory::Memory;
use crate::perfmodel::PerfModels;
use crate::task::TaskNode;
use crate::util::lock;

/// Assumed CPU rate for tasks with a flop hint before any measurement.
const DEFAULT_CPU_FLOPS: f64 = 20e9;
/// How many of a worker's next tasks have their inputs moved ahead: all
/// queued tasks at once would fill a small device memory with the inputs
/// of tasks far ahead, each evicting what the next one needs (TianHe-1's
/// 1 GiB streamed update: 21 evictions per device task, the device idle
/// between tasks waiting for its own inputs). Pipelining the next one is
/// what TianHe-1's DGEMM does (seed 003, Section 4.2).
const PREFETCH_AHEAD: usize = 2;
/// Assumed time of a task with no hint and no measurement.
const DEFAULT_TASK: Duration = Duration::from_micros(10);
/// Assumed rate at which a CPU worker streams the data of a task with no
/// flops hint before any measurement: a core's share of STREAM is 6–25 GB/s
/// on the machines of `PLATFORM.md`; the low end, as [`DEFAULT_CPU_FLOPS`]
/// is for flops. Without it such a task was [`DEFAULT_TASK`] on a CPU
/// whatever its data: the tile LU's first row interchanges (a column of
/// 2048² tiles, 352 MiB, 56 ms each on the H200 node's host) all went to
/// its one CPU worker, against a GPU whose estimate counted the transfer.
const DEFAULT_CPU_BYTES_PER_S: f64 = 10e9;

struct WorkerState {
    kind: WorkerKind,
    queue: Mutex<BinaryHeap<Entry>>,
    len: AtomicUsize,
    /// Predicted nanoseconds of work queued or running on this worker.
    queued_ns: AtomicU64,
}

/// Where `dmda` put a task: its worker and predicted cost, and for a team
/// task the size it chose and the other CPU workers it charged.
struct Choice {
    worker: usize,
    cost_ns: u64,
    team: Option<(usize, Vec<usize>)>,
}

/// A copy thread's work: move a task's inputs to a memory node ahead of it
/// (prefetch), or its write-through outputs back to the host.
enum CopyJob {
    Inputs(Arc<TaskNode>, usize),
    WriteBack(Arc<TaskNode>),
    /// What the first task wrote and the second reads, to that node.
    Produced(Arc<TaskNode>, Arc<TaskNode>, usize),
}

/// Requests to one device's copy thread.
type PrefetchTx = Sender<CopyJob>;

struct Shared {
    workers: Vec<WorkerState>,
    memory: Arc<Memory>,
    perf: Arc<PerfModels>,
    /// Per worker: the copy thread of its device, if any.
    /// Per worker, its device's copy thread (for CPU workers: the first
    /// device's, which brings data back to the host). Taken (closing the
    /// channels) when the policy is dropped.
    prefetch: Vec<Mutex<Option<PrefetchTx>>>,
    /// Team tasks in flight: the members charged besides the leader (by
    /// task id), discharged when the task finishes.
    team_charges: Mutex<std::collections::HashMap<u64, Vec<usize>>>,
}

/// The dmda policy.
pub struct Dmda {
    shared: Arc<Shared>,
    copy_threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Dmda {
    pub(crate) fn new(kinds: Vec<WorkerKind>, memory: Arc<Memory>, perf: Arc<PerfModels>) -> Dmda {
        let mut copy_threads = Vec::new();
        let mut senders = Vec::new();
        // Simulated time: no copy threads, prefetches are made inline (they
        // only schedule virtual transfers; see `push_to`).
        let threads = !memory.is_virtual();
        for k in kinds.iter().filter(|k| k.is_device() && threads) {
            let (tx, rx) = channel::<CopyJob>();
            let t = std::thread::Builder::new()
                .name(format!("tessera-copy{}", k.node))
                .spawn(move || {
                    for job in rx {
                        match job {
                            CopyJob::Inputs(task, node) => prefetch_inputs(&task, node),
                            CopyJob::WriteBack(task) => super::write_back_now(&task),
                            CopyJob::Produced(p, s, node) => super::prefetch_between(&p, &s, node),
                        }
                    }
                })
                .expect("copy thread starts");
            copy_threads.push(t);
            senders.push(tx);
        }
        let mut next_device = 0;
        let prefetch = kinds
            .iter()
            .map(|k| {
                let tx = if k.is_device() {
                    next_device += 1;
                    senders.get(next_device - 1).cloned()
                } else {
                    senders.first().cloned()
                };
                Mutex::new(tx)
            })
            .collect();
        Dmda {
            shared: Arc::new(Shared {
                workers: kinds
                    .into_iter()
                    .map(|kind| WorkerState {
                        kind,
                        queue: Mutex::new(BinaryHeap::new()),
                        len: AtomicUsize::new(0),
                        queued_ns: AtomicU64::new(0),
                    })
                    .collect(),
                memory,
                perf,
                prefetch,
                team_charges: Mutex::new(std::collections::HashMap::new()),
            }),
            copy_threads: Mutex::new(copy_threads),
        }
    }
}

impl Drop for Dmda {
    fn drop(&mut self) {
        // Closing the channels ends the copy threads.
        for tx in &self.shared.prefetch {
            lock(tx).take();
        }
        for t in lock(&self.copy_threads).drain(..) {
            let _ = t.join();
        }
    }
}

/// Move a ready task's inputs to `node` ahead of its execution (not pinned:
/// they may be evicted again, then the task fetches them itself).
fn prefetch_inputs(task: &TaskNode, node: usize) {
    for a in task.accesses.iter().filter(|a| a.mode.reads()) {
        // Best effort: a failure here (no room now) is retried by the task.
        let _ = a
            .handle
            .acquire(&a.handle, node, crate::access::AccessMode::R, false);
    }
}

impl Shared {
    /// Predicted execution time of `task`, of perf-model size `key`, on
    /// worker `w`, in seconds.
    fn exec_seconds(&self, task: &TaskNode, key: u64, w: usize) -> f64 {
        self.exec_seconds_team(task, key, w, 1)
    }

    /// Predicted execution time of `task` on a team of `team` workers of
    /// worker `w`'s kind (`team` 1: the worker alone).
    fn exec_seconds_team(&self, task: &TaskNode, key: u64, w: usize, team: usize) -> f64 {
        let kind = &self.workers[w].kind;
        let arch = crate::team::team_arch(kind.arch, team);
        if let Some(p) = self.perf.predict(&task.codelet.name, &arch, key) {
            return p.seconds;
        }
        match &kind.device {
            Some(d) => d
                .expected_time(&TaskCost {
                    codelet: &task.codelet.name,
                    flops: task.flops,
                    bytes: task.footprint(),
                })
                .as_secs_f64(),
            None if self.memory.is_virtual() => {
                let v = self.memory.virtual_links.as_ref().expect("virtual");
                v.cpu_seconds(
                    &TaskCost {
                        codelet: &task.codelet.name,
                        flops: task.flops,
                        bytes: task.footprint(),
                    },
                    team,
                )
            }
            None if task.flops > 0.0 => {
                task.flops / DEFAULT_CPU_FLOPS / crate::team::default_speedup(team)
            }
            None => {
                (task.footprint() as f64 / DEFAULT_CPU_BYTES_PER_S).max(DEFAULT_TASK.as_secs_f64())
            }
        }
    }

    /// A team task's best CPU team: for each allowed size, the time its
    /// members are all free (the size-th least-loaded CPU worker) plus its
    /// predicted run on that many: the earliest finish, as (end, missing
    /// bytes, leader, cost, size, members).
    fn best_team(&self, task: &TaskNode, key: u64) -> Option<(f64, u64, Choice)> {
        let team = task.team()?;
        let mut cpus: Vec<(u64, usize)> = (0..self.workers.len())
            .filter(|&w| !self.workers[w].kind.is_device())
            .map(|w| (self.workers[w].queued_ns.load(AtomicOrdering::Relaxed), w))
            .collect();
        cpus.sort_unstable();
        let top = team.largest_within(cpus.len())?;
        let lead = cpus.first()?.1;
        let (missing, transfer) = self.missing(task, lead);
        let mut best: Option<(f64, usize, f64)> = None;
        for size in team.min()..=top {
            let free = cpus[size - 1].0 as f64 * 1e-9;
            let exec = self.exec_seconds_team(task, key, lead, size);
            let end = free + transfer + exec;
            // Ties go to the larger team (it frees the critical path sooner
            // when estimates are equal, e.g. before any measurement).
            if best.is_none_or(|(b, _, _)| end <= b * (1.0 + 1e-9)) {
                best = Some((end, size, exec));
            }
        }
        let (end, size, exec) = best?;
        let members = cpus[1..size].iter().map(|&(_, w)| w).collect();
        Some((
            end,
            missing,
            Choice {
                worker: lead,
                cost_ns: ((transfer + exec) * 1e9) as u64,
                team: Some((size, members)),
            },
        ))
    }

    /// Bytes of `task`'s inputs not valid on worker `w`'s node, and the time to move them.
    fn missing(&self, task: &TaskNode, w: usize) -> (u64, f64) {
        let node = self.workers[w].kind.node;
        let mut bytes = 0;
        let mut secs = 0.0;
        for a in task.accesses.iter().filter(|a| a.mode.reads()) {
            let valid = a.handle.valid_mask();
            if valid & (1 << node) != 0 {
                continue;
            }
            let b = a.handle.bytes();
            bytes += b;
            secs += self.memory.transfer_estimate(valid, node, b);
        }
        (bytes, secs)
    }

    fn choose(&self, task: &TaskNode) -> Choice {
        let hinted = task.node_hint.filter(|&n| {
            self.workers
                .iter()
                .any(|w| w.kind.node == n && task.can_run_on(&self.memory, n))
        });
        // A team task runs on a CPU team (weighed by `best_team`), or alone
        // on a device that can run it.
        let team = task.team().is_some();
        let capable = |w: usize| {
            let k = &self.workers[w].kind;
            if team && !k.is_device() {
                return false;
            }
            match hinted {
                Some(n) => k.node == n,
                None => task.can_run_on(&self.memory, k.node),
            }
        };
        let key = task.size_key();
        // Workers of one kind (all CPU workers, say) share their estimates:
        // computed once per task and kind, not per worker (with 64 CPU
        // workers the perf-model lookups were most of a push). CPU workers
        // share one entry; each device its own.
        let same_kind = |a: usize, b: usize| {
            let (x, y) = (&self.workers[a].kind, &self.workers[b].kind);
            x.arch == y.arch
                && x.node == y.node
                && match (&x.device, &y.device) {
                    (None, None) => true,
                    (Some(p), Some(q)) => Arc::ptr_eq(p, q),
                    _ => false,
                }
        };
        let mut seen: Vec<(usize, bool, f64, (u64, f64))> = Vec::new();
        let mut estimate = |w: usize| {
            if let Some(e) = seen.iter().find(|e| same_kind(e.0, w)) {
                return (e.1, e.2, e.3);
            }
            let calib = self
                .perf
                .calibrating(&task.codelet.name, self.workers[w].kind.arch, key);
            let e = (
                w,
                calib,
                self.exec_seconds(task, key, w),
                self.missing(task, w),
            );
            seen.push(e);
            (e.1, e.2, e.3)
        };
        // Calibration: an architecture without enough samples gets the task
        // on its least-loaded worker.
        let calibrating = (0..self.workers.len())
            .filter(|&w| capable(w))
            .filter(|&w| estimate(w).0)
            .min_by_key(|&w| self.workers[w].queued_ns.load(AtomicOrdering::Relaxed));
        let mut best: Option<(f64, u64, usize, u64)> = None;
        let mut explore: Option<(f64, u64, usize, u64)> = None;
        for w in (0..self.workers.len()).filter(|&w| capable(w)) {
            let (_, exec, (missing, transfer)) = estimate(w);
            let queued = self.workers[w].queued_ns.load(AtomicOrdering::Relaxed) as f64 * 1e-9;
            let end = queued + transfer + exec;
            let cost_ns = ((transfer + exec) * 1e9) as u64;
            let better = match best {
                None => true,
                Some((b_end, b_missing, _, _)) => {
                    end < b_end * (1.0 - 1e-9)
                        || ((end - b_end).abs() <= 1e-9 * b_end.max(1e-12) && missing < b_missing)
                }
            };
            if better {
                best = Some((end, missing, w, cost_ns));
            }
            if calibrating == Some(w) {
                explore = Some((end, missing, w, cost_ns));
            }
        }
        if team && hinted.is_none_or(|n| self.memory.is_host(n)) {
            if let Some((end, missing, choice)) = self.best_team(task, key) {
                let device_wins = best.is_some_and(|(b_end, b_missing, _, _)| {
                    b_end < end * (1.0 - 1e-9) || (b_end <= end && b_missing < missing)
                });
                if !device_wins {
                    return choice;
                }
            }
        }
        let best = best.expect("at least one CPU worker can run every task");
        // Explore an uncalibrated architecture only when it costs at most
        // twice the best estimate: calibration must not ship a large working
        // set over a slow link for a tiny task.
        let chosen = match explore {
            Some(e) if e.0 <= 2.0 * best.0 + 1e-4 => e,
            _ => best,
        };
        Choice {
            worker: chosen.2,
            cost_ns: chosen.3,
            team: None,
        }
    }

    fn push_to(&self, task: ReadyTask) -> usize {
        let Choice {
            worker: w,
            cost_ns: cost,
            team,
        } = self.choose(&task.0);
        task.0.estimate_ns.store(cost, AtomicOrdering::Relaxed);
        if let Some((size, members)) = team {
            task.0.team_target.store(size, AtomicOrdering::Relaxed);
            for &m in &members {
                self.workers[m]
                    .queued_ns
                    .fetch_add(cost, AtomicOrdering::Relaxed);
            }
            lock(&self.team_charges).insert(task.0.id, members);
        }
        let ws = &self.workers[w];
        ws.queued_ns.fetch_add(cost, AtomicOrdering::Relaxed);
        // Start moving the inputs missing on the chosen worker's node if the
        // task is among the next few it runs; the others start when the
        // worker pops the task before them (`DmdaQueue::pop`).
        let ahead =
            (ws.len.load(AtomicOrdering::Relaxed) < PREFETCH_AHEAD).then(|| Arc::clone(&task.0));
        {
            let mut q = lock(&ws.queue);
            q.push(Entry(task));
            ws.len.store(q.len(), AtomicOrdering::Relaxed);
        }
        if let Some(t) = ahead {
            self.prefetch(w, &t);
        }
        w
    }

    /// Move `task`'s inputs that are missing on worker `w`'s node there,
    /// ahead of its execution: inline in simulated time (a virtual transfer
    /// on the link), else on the device's copy thread.
    fn prefetch(&self, w: usize, task: &Arc<TaskNode>) {
        let node = self.workers[w].kind.node;
        if self.memory.is_virtual() {
            prefetch_inputs(task, node);
        } else if let Some(tx) = lock(&self.prefetch[w]).as_ref() {
            if task
                .accesses
                .iter()
                .any(|a| a.mode.reads() && !a.handle.valid_on(node))
            {
                let _ = tx.send(CopyJob::Inputs(Arc::clone(task), node));
            }
        }
    }
}

impl SchedulerPolicy for Dmda {
    fn name(&self) -> &'static str {
        "dmda"
    }

    fn worker_queue(&self, worker: usize) -> Box<dyn WorkerQueue> {
        Box::new(DmdaQueue {
            shared: Arc::clone(&self.shared),
            worker,
        })
    }

    fn push_external(&self, task: ReadyTask) -> Pushed {
        Pushed::Worker(self.shared.push_to(task))
    }

    fn push_cpu_only(&self, task: ReadyTask) -> Pushed {
        // `choose` never gives a CPU-only task to a device worker.
        Pushed::Worker(self.shared.push_to(task))
    }

    fn prefetch_produced(&self, produced: &ReadyTask, succ: &ReadyTask, node: usize) {
        let (produced, succ) = (&produced.0, &succ.0);
        if self.shared.memory.is_virtual() {
            // Simulated time: the copy is scheduled on the link at once.
            return super::prefetch_between(produced, succ, node);
        }
        let w = self
            .shared
            .workers
            .iter()
            .position(|w| w.kind.node == node && w.kind.is_device());
        if let Some(tx) = w.and_then(|w| lock(&self.shared.prefetch[w]).clone()) {
            let _ = tx.send(CopyJob::Produced(
                Arc::clone(produced),
                Arc::clone(succ),
                node,
            ));
        }
    }

    fn write_back(&self, task: &ReadyTask, node: usize) {
        let w = self
            .shared
            .workers
            .iter()
            .position(|w| w.kind.node == node && w.kind.is_device());
        let tx = w.and_then(|w| lock(&self.shared.prefetch[w]).clone());
        match tx {
            Some(tx) if !self.shared.memory.is_virtual() => {
                let _ = tx.send(CopyJob::WriteBack(Arc::clone(&task.0)));
            }
            // Simulated time: the copy is scheduled on the link at once.
            _ => super::write_back_now(&task.0),
        }
    }

    fn finished(&self, worker: usize, task: &ReadyTask) {
        let cost = task.0.estimate_ns.load(AtomicOrdering::Relaxed);
        let members = if task.0.team().is_some() {
            lock(&self.shared.team_charges).remove(&task.0.id)
        } else {
            None
        };
        for w in std::iter::once(worker).chain(members.into_iter().flatten()) {
            let q = &self.shared.workers[w].queued_ns;
            // Saturating: estimates of tasks handed in before a reset may exceed it.
            let _ = q.fetch_update(AtomicOrdering::Relaxed, AtomicOrdering::Relaxed, |v| {
                Some(v.saturating_sub(cost))
            });
        }
    }
}

struct DmdaQueue {
    shared: Arc<Shared>,
    worker: usize,
}

impl WorkerQueue for DmdaQueue {
    fn push(&mut self, task: ReadyTask) -> Pushed {
        match self.shared.push_to(task) {
            w if w == self.worker => Pushed::Local,
            w => Pushed::Worker(w),
        }
    }

    fn pop(&mut self) -> Option<ReadyTask> {
        let ws = &self.shared.workers[self.worker];
        if ws.len.load(AtomicOrdering::Relaxed) == 0 {
            // Cheap exit; a racing push is caught by the sleep protocol's
            // re-check after its SeqCst fence (sleep/README.md).
            return None;
        }
        let (t, next) = {
            let mut q = lock(&ws.queue);
            let t = q.pop().map(|e| e.0);
            ws.len.store(q.len(), AtomicOrdering::Relaxed);
            (t, q.peek().map(|e| Arc::clone(&e.0 .0)))
        };
        // The task after this one starts moving now, while this one runs.
        if let Some(next) = next {
            self.shared.prefetch(self.worker, &next);
        }
        t
    }

    fn has_more(&self) -> bool {
        self.shared.workers[self.worker]
            .len
            .load(AtomicOrdering::Relaxed)
            > 0
    }
}
