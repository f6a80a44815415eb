//! Run statistics from a trace: makespan, busy time per worker, time per
//! codelet, critical path, and efficiency against the two lower bounds; for
//! a distributed run, per rank: messages, bytes and time waiting on the network.
//!
//! This module holds the figures and the per-worker, per-codelet and transfer
//! sums; the critical path is in `path`, the per-rank figures in `ranks`,
//! the latency of local dependencies in `release`, the text report in
//! `report`.

mod path;
mod ranks;
mod release;
mod report;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use super::model::{Nanos, Trace};
use super::remote::EdgeLatency;
use path::critical_path;
use ranks::rank_stats;
pub use release::{LatencySplit, ReleaseLatency};

/// Time one worker spent running tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerStats {
    /// [`WorkerInfo::name`](super::model::WorkerInfo::name), after its rank
    /// in a trace of several ranks (`r1 cpu0`), or `#i` for a worker index
    /// that tasks use but the trace does not list ([`Trace::worker_labels`]).
    pub name: String,
    /// Tasks it ran.
    pub tasks: usize,
    /// Time covered by its tasks (overlapping tasks counted once).
    pub busy: Nanos,
    /// `busy` as a percentage of the makespan.
    pub busy_pct: f64,
    /// `100 - busy_pct`.
    pub idle_pct: f64,
}

/// Time spent in one codelet, over all workers.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeletStats {
    /// Codelet name.
    pub codelet: String,
    /// Tasks of this codelet.
    pub count: usize,
    /// Sum of their durations.
    pub total: Nanos,
    /// `total / count`, in ns.
    pub mean: f64,
    /// Sum of their declared flops.
    pub flops: f64,
    /// `flops / total` in GFLOP/s; `None` when no flops were declared or no time was spent.
    pub gflops: Option<f64>,
}

/// Data movement between memory nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransferStats {
    /// Number of transfers.
    pub count: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// Sum of transfer durations (concurrent transfers add up).
    pub time: Nanos,
    /// `bytes / time` in GB/s; `None` when no time was spent.
    pub gbytes_per_s: Option<f64>,
}

/// One rank of a distributed run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankStats {
    /// The rank.
    pub rank: u32,
    /// Its workers.
    pub workers: usize,
    /// Tasks its workers ran.
    pub tasks: usize,
    /// Time during which at least one of its workers ran a task.
    pub busy: Nanos,
    /// Messages it sent, and their bytes.
    pub sent: u64,
    /// Bytes of the messages it sent.
    pub bytes_sent: u64,
    /// Messages it received.
    pub received: u64,
    /// Bytes of the messages it received.
    pub bytes_received: u64,
    /// Time during which one of its receives was outstanding (see
    /// [`MessageRecord`](super::model::MessageRecord)) while none of its
    /// workers ran a task: the time it waited on the network.
    pub network_wait: Nanos,
}

/// Statistics of one recorded run; [`Display`](std::fmt::Display) prints them as a report.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStats {
    /// Tasks in the trace.
    pub tasks: usize,
    /// Start of the first task (0 when there are none).
    pub first_start: Nanos,
    /// End of the last task (0 when there are none).
    pub last_end: Nanos,
    /// `last_end - first_start`.
    pub makespan: Nanos,
    /// Sum of all task durations.
    pub total_work: Nanos,
    /// One entry per worker, in worker index order.
    pub workers: Vec<WorkerStats>,
    /// One entry per codelet, most total time first.
    pub codelets: Vec<CodeletStats>,
    /// Transfers.
    pub transfers: TransferStats,
    /// Longest path through the dependency edges, weighted by task durations.
    /// `None` when the trace has no edges or the edges form a cycle
    /// (see [`TraceStats::cyclic_tasks`]).
    pub critical_path: Option<Nanos>,
    /// Task ids along the critical path, first to last (empty when `critical_path` is `None`).
    pub critical_path_tasks: Vec<u64>,
    /// `total_work / workers`, in ns: no schedule can beat it.
    pub area_bound: f64,
    /// `max(critical_path, area_bound) / makespan`: 1.0 means the schedule
    /// met the best lower bound. `None` when the makespan is 0.
    pub efficiency: Option<f64>,
    /// Edges that name a task id not in the trace; left out of the critical path.
    pub ignored_edges: usize,
    /// Tasks that are on a dependency cycle or after one; non-zero means the
    /// edges are not a DAG and the critical path was not computed.
    pub cyclic_tasks: usize,
    /// Tasks whose id repeats an earlier task's; edges use the first one.
    pub duplicate_ids: usize,
    /// Per rank, in rank order: empty unless the trace comes from a
    /// distributed run ([`Trace::is_distributed`]).
    pub ranks: Vec<RankStats>,
    /// The remote edges of a trace of several ranks and their latencies,
    /// from the end of the sending task to the start of the receiving one
    /// ([`remote`](super::remote)); `None` for a trace of one rank.
    pub remote_edges: Option<EdgeLatency>,
    /// How long tasks waited to start after their last predecessor on
    /// their rank ended (`release`); `None` without such edges.
    pub release: Option<ReleaseLatency>,
}

impl TraceStats {
    /// The larger of the two lower bounds on the makespan, in ns.
    pub fn lower_bound(&self) -> f64 {
        self.critical_path
            .map_or(self.area_bound, |cp| self.area_bound.max(cp as f64))
    }

    /// Human-readable problems found in the trace (empty when none).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.ignored_edges > 0 {
            w.push(format!(
                "{} dependency edge(s) name unknown task ids; ignored",
                self.ignored_edges
            ));
        }
        if self.cyclic_tasks > 0 {
            w.push(format!(
                "the dependency edges form a cycle ({} task(s) on or after it); \
                 critical path not computed",
                self.cyclic_tasks
            ));
        }
        if self.duplicate_ids > 0 {
            w.push(format!(
                "{} task(s) reuse an earlier task's id; edges refer to the first",
                self.duplicate_ids
            ));
        }
        w
    }
}

/// Computes the statistics of `trace`. O(T log T + E) for T tasks and E edges.
pub fn stats(trace: &Trace) -> TraceStats {
    let tasks = &trace.tasks;
    let dur = |i: usize| tasks[i].end.saturating_sub(tasks[i].start);
    let first_start = tasks.iter().map(|t| t.start).min().unwrap_or(0);
    let last_end = tasks.iter().map(|t| t.end).max().unwrap_or(0);
    let makespan = last_end.saturating_sub(first_start);
    let total_work: Nanos = (0..tasks.len()).map(dur).fold(0, Nanos::saturating_add);

    let workers = worker_stats(trace, makespan);
    let codelets = codelet_stats(trace);
    let transfers = transfer_stats(trace);
    let path = critical_path(trace);

    let area_bound = if workers.is_empty() {
        0.0
    } else {
        total_work as f64 / workers.len() as f64
    };
    let mut s = TraceStats {
        // A team task once (its members' records are busy time, not tasks).
        tasks: tasks.iter().filter(|t| t.team_rank == 0).count(),
        first_start,
        last_end,
        makespan,
        total_work,
        workers,
        codelets,
        transfers,
        critical_path: path.length,
        critical_path_tasks: path.tasks,
        area_bound,
        efficiency: None,
        ignored_edges: path.ignored_edges,
        cyclic_tasks: path.cyclic_tasks,
        duplicate_ids: path.duplicate_ids,
        ranks: if trace.is_distributed() {
            rank_stats(trace)
        } else {
            Vec::new()
        },
        remote_edges: (trace.ranks.len() > 1)
            .then(|| super::remote::edge_latency(trace, &super::remote::remote_edges(trace))),
        release: release::release_latency(trace),
    };
    if makespan > 0 {
        s.efficiency = Some(s.lower_bound() / makespan as f64);
    }
    s
}

fn pct(part: Nanos, whole: Nanos) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn worker_stats(trace: &Trace, makespan: Nanos) -> Vec<WorkerStats> {
    let n = trace.worker_count();
    let names = trace.worker_labels();
    let mut intervals: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); n];
    for t in &trace.tasks {
        intervals[t.worker as usize].push((t.start, t.end.max(t.start)));
    }
    intervals
        .into_iter()
        .enumerate()
        .map(|(i, mut iv)| {
            // Union of intervals: a worker's tasks should not overlap, but if a
            // recorder makes them, busy time must still not exceed the makespan.
            iv.sort_unstable();
            let (mut busy, mut cur): (Nanos, Option<(Nanos, Nanos)>) = (0, None);
            for &(s, e) in &iv {
                cur = match cur {
                    Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                    Some((cs, ce)) => {
                        busy = busy.saturating_add(ce - cs);
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            busy = busy.saturating_add(cur.map_or(0, |(s, e)| e - s));
            let busy_pct = pct(busy, makespan);
            WorkerStats {
                name: names[i].clone(),
                tasks: iv.len(),
                busy,
                busy_pct,
                idle_pct: if makespan == 0 { 0.0 } else { 100.0 - busy_pct },
            }
        })
        .collect()
}

fn codelet_stats(trace: &Trace) -> Vec<CodeletStats> {
    let mut by_name: HashMap<&str, (usize, Nanos, f64)> = HashMap::new();
    for t in trace.tasks.iter().filter(|t| t.team_rank == 0) {
        let e = by_name.entry(&t.codelet).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(t.end.saturating_sub(t.start));
        if t.flops.is_finite() {
            e.2 += t.flops;
        }
    }
    let mut v: Vec<CodeletStats> = by_name
        .into_iter()
        .map(|(name, (count, total, flops))| CodeletStats {
            codelet: name.to_owned(),
            count,
            total,
            mean: total as f64 / count as f64,
            flops,
            // flop per ns = GFLOP/s
            gflops: (flops > 0.0 && total > 0).then(|| flops / total as f64),
        })
        .collect();
    v.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| a.codelet.cmp(&b.codelet))
    });
    v
}

fn transfer_stats(trace: &Trace) -> TransferStats {
    let bytes = trace
        .transfers
        .iter()
        .map(|x| x.bytes)
        .fold(0, u64::saturating_add);
    let time = trace
        .transfers
        .iter()
        .map(|x| x.end.saturating_sub(x.start))
        .fold(0, u64::saturating_add);
    TransferStats {
        count: trace.transfers.len(),
        bytes,
        time,
        // byte per ns = GB/s
        gbytes_per_s: (time > 0).then(|| bytes as f64 / time as f64),
    }
}
